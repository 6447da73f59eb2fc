/* ir/ private: what the three files of the JSON format (docs/json-format.md)
 * share. json_write.c writes a graph; json_parse.c reads text into a small
 * document tree (bounded depth and sizes, every value tagged with its line
 * and column); json_schema.c maps that tree onto a graph through the
 * capture and edit APIs, and reads graph files. */
#ifndef LOOM_IR_JSON_H
#define LOOM_IR_JSON_H

#include "internal.h"

#define JSON_FORMAT "loom-graph"
#define JSON_VERSION 1
#define JSON_MAX_DEPTH 32           /* the format itself needs 5 */
#define JSON_MAX_VALUES (1u << 24)
#define JSON_MAX_STRING 65536       /* bytes, after unescaping */
#define JSON_MAX_INPUT (1u << 30)

/* ---- the document tree -------------------------------------------------- */

enum { J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ };
extern const char *const jtype_names[];   /* "null", ..., "an object", by J_* */

typedef struct jv {
    uint8_t t;
    uint32_t line, col;
    uint32_t a, n;              /* NUM: input offset, length; STR: pool offset, length */
    uint32_t key;               /* member of an object: pool offset of its key */
    uint32_t first, next, count;
} jv;

/* A parse: the input, the position, the tree and the first failure. */
typedef struct jp {
    const loom_allocator *al;
    const char *s;
    size_t len, i;
    uint32_t line;
    size_t line_start;
    LOOM_VEC(jv) v;
    LOOM_VEC(char) pool;
    loom_result rc;
} jp;

/* Parses the whole input as one value; its index, or LOOM_NONE with p->rc
 * set. The caller frees p->v and p->pool. */
uint32_t json_parse_document(jp *p);

/* Records the first failure only (later ones are consequences); returns it. */
loom_result jfail(jp *p, loom_result rc, uint32_t line, uint32_t col, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
static inline uint32_t col_of(const jp *p) { return (uint32_t)(p->i - p->line_start + 1); }
static inline const jv *J(const jp *p, uint32_t i) { return &p->v.v[i]; }
static inline const char *jstr(const jp *p, uint32_t i) { return p->pool.v + p->v.v[i].a; }

/* A failure at the parse position, or at a value of the tree. */
#define SYNTAX(p, ...) jfail((p), LOOM_PARSE, (p)->line, col_of(p), __VA_ARGS__)
#define AT(p, val, ...) jfail((p), LOOM_PARSE, (val)->line, (val)->col, __VA_ARGS__)

#endif
