/* The JSON lexer and document tree: a hand-written parser for untrusted
 * input. It builds a small tree (bounded depth, bounded sizes, every value
 * tagged with its line and column) and knows nothing of graphs; structural
 * nonsense is LOOM_PARSE with "line L, column C: ...". */
#include <stdarg.h>
#include <stdio.h>
#include "json.h"

const char *const jtype_names[] = { "null", "false", "true", "a number", "a string", "an array", "an object" };

loom_result jfail(jp *p, loom_result rc, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (p->rc)
        return p->rc;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->rc = loom_fail(rc, "line %u, column %u: %s", line, col, msg);
    return p->rc;
}

static void skip_ws(jp *p)
{
    while (p->i < p->len) {
        char c = p->s[p->i];
        if (c == '\n') {
            p->line++;
            p->line_start = p->i + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        p->i++;
    }
}

static uint32_t new_value(jp *p, uint8_t t)
{
    if (p->v.n >= JSON_MAX_VALUES) {
        SYNTAX(p, "more than %u values", JSON_MAX_VALUES);
        return LOOM_NONE;
    }
    if (!LOOM_VEC_RESERVE(p->al, p->v, p->v.n + 1)) {
        jfail(p, LOOM_OUT_OF_MEMORY, p->line, col_of(p), "out of memory");
        return LOOM_NONE;
    }
    jv *v = &p->v.v[p->v.n];
    memset(v, 0, sizeof *v);
    v->t = t;
    v->line = p->line;
    v->col = col_of(p);
    v->key = v->first = v->next = LOOM_NONE;
    return p->v.n++;
}

static bool pool_put(jp *p, const char *src, uint32_t n)
{
    if (!LOOM_VEC_RESERVE(p->al, p->pool, p->pool.n + n)) {
        jfail(p, LOOM_OUT_OF_MEMORY, p->line, col_of(p), "out of memory");
        return false;
    }
    memcpy(p->pool.v + p->pool.n, src, n);
    p->pool.n += n;
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool read_hex4(jp *p, uint32_t *out)
{
    if (p->len - p->i < 4)
        return SYNTAX(p, "truncated \\u escape"), false;
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p->s[p->i + k]);
        if (h < 0)
            return SYNTAX(p, "bad hex digit in \\u escape"), false;
        v = v << 4 | (uint32_t)h;
    }
    p->i += 4;
    *out = v;
    return true;
}

static bool put_utf8(jp *p, uint32_t cp)
{
    char b[4];
    uint32_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18);
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return pool_put(p, b, n);
}

static bool read_escape(jp *p)
{
    if (p->i >= p->len)
        return SYNTAX(p, "truncated escape"), false;
    char c = p->s[p->i++];
    const char *simple = "\"\"\\\\//b\bf\fn\nr\rt\t";
    for (const char *e = simple; *e; e += 2)
        if (c == e[0])
            return pool_put(p, e + 1, 1);
    if (c != 'u') {
        p->i--;
        return SYNTAX(p, "bad escape '\\%c'", c >= 0x20 && c < 0x7f ? c : '?'), false;
    }
    uint32_t cp;
    if (!read_hex4(p, &cp))
        return false;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return SYNTAX(p, "lone low surrogate \\u%04x", cp), false;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        uint32_t lo;
        if (p->len - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
            return SYNTAX(p, "high surrogate \\u%04x without its low half", cp), false;
        p->i += 2;
        if (!read_hex4(p, &lo))
            return false;
        if (lo < 0xdc00 || lo > 0xdfff)
            return SYNTAX(p, "high surrogate \\u%04x followed by \\u%04x", cp, lo), false;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (cp == 0)
        return SYNTAX(p, "\\u0000 in a string"), false;
    return put_utf8(p, cp);
}

/* Reads a string at p->i (on the opening quote) into the pool, NUL-
 * terminated; *off and *n describe it. */
static bool read_string(jp *p, uint32_t *off, uint32_t *n)
{
    p->i++;
    *off = p->pool.n;
    for (;;) {
        if (p->i >= p->len)
            return SYNTAX(p, "unterminated string"), false;
        if (p->pool.n - *off > JSON_MAX_STRING)
            return SYNTAX(p, "string longer than %u bytes", JSON_MAX_STRING), false;
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c == 0)
            return SYNTAX(p, "NUL byte in a string"), false;
        if (c < 0x20)
            return SYNTAX(p, "control character 0x%02x in a string", c), false;
        if (c == '\\') {
            p->i++;
            if (!read_escape(p))
                return false;
            continue;
        }
        /* Copy the plain run at once rather than byte by byte. */
        size_t j = p->i;
        while (j < p->len && (unsigned char)p->s[j] >= 0x20 && p->s[j] != '"' && p->s[j] != '\\' &&
               j - p->i < JSON_MAX_STRING)
            j++;
        if (!pool_put(p, p->s + p->i, (uint32_t)(j - p->i)))
            return false;
        p->i = j;
    }
    *n = p->pool.n - *off;
    return pool_put(p, "", 1);
}

static bool read_number(jp *p, jv *v)
{
    size_t start = p->i;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->len || !is_digit(p->s[p->i]))
        return SYNTAX(p, "expected a digit"), false;
    if (p->s[p->i] == '0' && p->i + 1 < p->len && is_digit(p->s[p->i + 1]))
        return SYNTAX(p, "leading zero in a number"), false;
    while (p->i < p->len && is_digit(p->s[p->i]))
        p->i++;
    if (p->i < p->len && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->len || !is_digit(p->s[p->i]))
            return SYNTAX(p, "expected a digit after '.'"), false;
        while (p->i < p->len && is_digit(p->s[p->i]))
            p->i++;
    }
    if (p->i < p->len && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->len && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->len || !is_digit(p->s[p->i]))
            return SYNTAX(p, "expected a digit in the exponent"), false;
        while (p->i < p->len && is_digit(p->s[p->i]))
            p->i++;
    }
    v->a = (uint32_t)start;
    v->n = (uint32_t)(p->i - start);
    return true;
}

static uint32_t parse_value(jp *p, uint32_t depth);

/* Parses an array or object body; the opener is at p->i. */
static bool parse_container(jp *p, uint32_t self, uint32_t depth, bool object)
{
    char close = object ? '}' : ']';
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == close) {
        p->i++;
        return true;
    }
    uint32_t last = LOOM_NONE;
    for (;;) {
        uint32_t key = LOOM_NONE, key_len;
        if (object) {
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != '"')
                return SYNTAX(p, "expected a key string"), false;
            if (!read_string(p, &key, &key_len))
                return false;
            skip_ws(p);
            if (p->i >= p->len || p->s[p->i] != ':')
                return SYNTAX(p, "expected ':' after a key"), false;
            p->i++;
        }
        uint32_t child = parse_value(p, depth + 1);
        if (child == LOOM_NONE)
            return false;
        p->v.v[child].key = key;
        if (last == LOOM_NONE)
            p->v.v[self].first = child;
        else
            p->v.v[last].next = child;
        last = child;
        p->v.v[self].count++;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->len && p->s[p->i] == close) {
            p->i++;
            return true;
        }
        if (p->i >= p->len)
            return SYNTAX(p, "unexpected end of input"), false;
        return SYNTAX(p, "expected ',' or '%c'", close), false;
    }
}

static uint32_t parse_value(jp *p, uint32_t depth)
{
    skip_ws(p);
    if (depth > JSON_MAX_DEPTH) {
        SYNTAX(p, "nesting deeper than %u", JSON_MAX_DEPTH);
        return LOOM_NONE;
    }
    if (p->i >= p->len) {
        SYNTAX(p, "unexpected end of input");
        return LOOM_NONE;
    }
    char c = p->s[p->i];
    static const struct { const char *word; uint8_t t; } literals[] = {
        { "null", J_NULL }, { "false", J_FALSE }, { "true", J_TRUE },
    };
    for (unsigned k = 0; k < 3; k++) {
        size_t n = strlen(literals[k].word);
        if (c != literals[k].word[0])
            continue;
        if (p->len - p->i < n || memcmp(p->s + p->i, literals[k].word, n) != 0) {
            SYNTAX(p, "unknown literal (expected %s)", literals[k].word);
            return LOOM_NONE;
        }
        uint32_t v = new_value(p, literals[k].t);
        p->i += n;
        return v;
    }
    uint32_t v;
    if (c == '{' || c == '[') {
        v = new_value(p, c == '{' ? J_OBJ : J_ARR);
        if (v == LOOM_NONE || !parse_container(p, v, depth, c == '{'))
            return LOOM_NONE;
    } else if (c == '"') {
        v = new_value(p, J_STR);
        uint32_t off, n;
        if (v == LOOM_NONE || !read_string(p, &off, &n))
            return LOOM_NONE;
        p->v.v[v].a = off;
        p->v.v[v].n = n;
    } else if (c == '-' || is_digit(c)) {
        v = new_value(p, J_NUM);
        if (v == LOOM_NONE || !read_number(p, &p->v.v[v]))
            return LOOM_NONE;
    } else {
        if (c == 0)
            SYNTAX(p, "NUL byte");
        else if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
            SYNTAX(p, "unexpected character '%c'", c);
        else
            SYNTAX(p, "unexpected byte 0x%02x", (unsigned char)c);
        return LOOM_NONE;
    }
    return v;
}

uint32_t json_parse_document(jp *p)
{
    uint32_t root = parse_value(p, 1);
    if (root == LOOM_NONE)
        return LOOM_NONE;
    skip_ws(p);
    if (p->i < p->len) {
        SYNTAX(p, "unexpected data after the document");
        return LOOM_NONE;
    }
    return root;
}
