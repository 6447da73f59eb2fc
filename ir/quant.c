/* Host-side conversion between f32 and loom's other element types: f16
 * both ways, and rows of GGUF's block types (Q8_0, Q4_0, Q4_K, Q6_K) packed
 * and unpacked byte for byte as GGML lays them out, so that blocks written
 * here, read by the kernels or loaded from a llama.cpp file all decode to
 * the same floats. Frontends quantize weights with it; CPU references read
 * quantized weights with it. ir/ links no libm, so rounding is done on the
 * bits. */
#include <float.h>
#include <inttypes.h>
#include <string.h>
#include "loom_ops.h"

/* ---- f16 ---------------------------------------------------------------- */

float loom_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ffu, bits;
    if (exp == 0) {
        /* zero or subnormal: man units of 2^-24, exact in f32 */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    }
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | (man << 13);  /* inf, or NaN with its payload */
    else
        bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* v >> shift, rounded to nearest with ties to even. */
static uint32_t shift_round_even(uint32_t v, uint32_t shift)
{
    uint32_t q = v >> shift, rest = v & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rest > half || (rest == half && (q & 1)));
}

uint16_t loom_f32_to_f16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    uint32_t a = bits & 0x7fffffffu, exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
    if (a > 0x7f800000u)
        return sign | 0x7e00;  /* NaN stays NaN (quiet, payload dropped) */
    if (a >= 0x477ff000u)      /* 65520 and up round past the largest half */
        return sign | 0x7c00;
    if (exp >= 113)            /* a normal half; the rounding may carry into the exponent, still right */
        return sign | (uint16_t)(((exp - 112) << 10) + shift_round_even(a & 0x7fffffu, 13));
    if (exp < 102)             /* below half the smallest subnormal (2^-25): zero */
        return sign;
    /* A subnormal half: units of 2^-24; man * 2^(exp - 150) holds man >> (126 - exp)
     * of them. 1024 units carry into the smallest normal, which is right. */
    return sign | (uint16_t)shift_round_even(man, 126 - exp);
}

/* ---- shared helpers ----------------------------------------------------- */

#define HALF_MAX 65504.0f

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static float get_half(const uint8_t *p) { return loom_f16_to_f32(get16(p)); }

static float absf(float v) { return v < 0 ? -v : v; }

/* v rounded half away from zero (as roundf), clamped to [lo, hi]. Safe for
 * any float: clamping first keeps the conversion to int defined; NaN gives
 * lo. */
static int nearest(float v, int lo, int hi)
{
    if (!(v > (float)lo))
        return lo;
    if (v >= (float)hi)
        return hi;
    int t = (int)v;
    float r = v - (float)t;  /* exact */
    return t + (r >= 0.5f) - (r <= -0.5f);
}

/* d held to the largest half's magnitude, so that a block too large for
 * f16 stores a finite scale (its weights then clip) instead of infinity. */
static float clamp_half(float d) { return d > HALF_MAX ? HALF_MAX : d < -HALF_MAX ? -HALF_MAX : d; }

/* A clamped scale's f16 bits; +0 for zero of either sign, so that a block
 * of zeros stores d = 0. A subnormal half is rounded up in magnitude (never
 * to zero): f16 is too coarse there to ignore, and coding against a stored
 * d no smaller than the true one never clips the largest weight. */
static uint16_t scale_half(float d)
{
    if (d == 0)
        return 0;
    uint16_t h = loom_f32_to_f16(d);
    if (!(h & 0x7c00) && absf(loom_f16_to_f32(h)) < absf(d))
        h++;
    return h;
}

/* What turns weights into codes against d, stored as h: 1 / d from the
 * unrounded d while h is a normal half, as GGML's reference quantizers do;
 * from the stored d below that. */
static float code_factor(float d, uint16_t h)
{
    if (!h)
        return 0;
    return h & 0x7c00 ? 1 / d : 1 / loom_f16_to_f32(h);
}

/* ---- Q8_0: f16 d, int8 qs[32]; w = d q ---------------------------------- */

static void q8_0_quant(const float *x, uint8_t *b)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = absf(x[j]) > amax ? absf(x[j]) : amax;
    float d = clamp_half(amax / 127);
    uint16_t dh = scale_half(d);
    float id = code_factor(d, dh);
    put16(b, dh);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)nearest(x[j] * id, -127, 127);
}

static void q8_0_dequant(const uint8_t *b, float *y)
{
    float d = get_half(b);
    for (int j = 0; j < 32; j++)
        y[j] = (int8_t)b[2 + j] * d;
}

/* ---- Q4_0: f16 d, qs[16] of nibbles; w = d (q - 8) ---------------------- */

/* GGML's code for v = x / d: floor(v + 8.5), at most 15. */
static uint8_t q4_0_code(float v)
{
    v += 8.5f;
    return v <= 0 ? 0 : v >= 15 ? 15 : (uint8_t)v;
}

static void q4_0_quant(const float *x, uint8_t *b)
{
    /* The weight of largest magnitude maps to -8, the one code with no
     * positive twin, so the range is used in full on its side. */
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (absf(x[j]) > amax) {
            amax = absf(x[j]);
            max = x[j];
        }
    float d = clamp_half(max / -8);
    uint16_t dh = scale_half(d);
    float id = code_factor(d, dh);
    put16(b, dh);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(q4_0_code(x[j] * id) | q4_0_code(x[16 + j] * id) << 4);
}

static void q4_0_dequant(const uint8_t *b, float *y)
{
    float d = get_half(b);
    for (int j = 0; j < 16; j++) {
        y[j] = ((b[2 + j] & 15) - 8) * d;
        y[16 + j] = ((b[2 + j] >> 4) - 8) * d;
    }
}

/* ---- Q4_K: f16 d, f16 dmin, scales[12], qs[128]; w = d sc q - dmin m ---- */

/* A sub-block's affine code: w = scale q - min, q in 0..qmax. GGUF keeps
 * min >= 0 (an offset below zero), so a sub-block of positive weights has
 * min 0 and still codes 0 exactly. */
typedef struct affine {
    float scale, min;
} affine;

static int affine_code(affine a, float x, int qmax)
{
    return a.scale > 0 ? nearest((x + a.min) / a.scale, 0, qmax) : 0;
}

/* Squared error of coding x with a, in double so large weights cannot
 * overflow it (a non-finite a gives inf or NaN, which no comparison prefers). */
static double affine_error(const float *x, int n, affine a, int qmax)
{
    double e = 0;
    for (int i = 0; i < n; i++) {
        double r = (double)a.scale * affine_code(a, x[i], qmax) - a.min - x[i];
        e += r * r;
    }
    return e;
}

/* The least-squares scale and min for a's codes, min held at 0 when the
 * fit wants it negative; a itself when the codes cannot say (all equal)
 * or the fit leaves float's range. */
static affine affine_refit(const float *x, int n, affine a, int qmax)
{
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; i++) {
        double q = affine_code(a, x[i], qmax);
        sq += q, sqq += q * q, sx += x[i], sqx += q * x[i];
    }
    double det = n * sqq - sq * sq;
    if (!(det > 0))
        return a;
    double s = (n * sqx - sq * sx) / det, m = (s * sq - sx) / n;
    if (m < 0)
        m = 0, s = sqx / sqq;
    if (!(s > 0 && s < FLT_MAX && m < FLT_MAX))
        return a;
    return (affine){ (float)s, (float)m };
}

/* A sub-block's code: from its range (min/max), then refitted to its own
 * codes while that lowers the error; a few rounds settle it. */
static affine affine_fit(const float *x, int n, int qmax)
{
    float lo = 0, hi = x[0];
    for (int i = 0; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    affine best = { hi > lo ? (hi - lo) / qmax : 0, -lo };
    double best_err = affine_error(x, n, best, qmax);
    for (int round = 0; round < 4 && best.scale > 0; round++) {
        affine a = affine_refit(x, n, best, qmax);
        double err = affine_error(x, n, a, qmax);
        if (!(err < best_err))
            break;
        best = a, best_err = err;
    }
    return best;
}

/* Sub-block j's 6-bit scale and min in the 12 bytes: j < 4 in the low six
 * bits of bytes j and j + 4; j >= 4 split, low four bits in byte j + 4's
 * nibbles, high two in the top bits of bytes j - 4 (scale) and j (min). */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

static void k4_put_scale_min(uint8_t *s, int j, int sc, int m)
{
    if (j < 4) {
        s[j] = (uint8_t)((s[j] & 0xc0) | sc);
        s[j + 4] = (uint8_t)((s[j + 4] & 0xc0) | m);
    } else {
        s[j + 4] = (uint8_t)((sc & 15) | (m & 15) << 4);
        s[j - 4] = (uint8_t)((s[j - 4] & 63) | (sc >> 4) << 6);
        s[j] = (uint8_t)((s[j] & 63) | (m >> 4) << 6);
    }
}

static float mean(const float *x, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    return (float)(sum / n);
}

/* Sub-blocks s and s + 1 of each 64 share 32 bytes: s even in the low
 * nibbles, odd in the high. */
static void q4_k_quant(const float *x, uint8_t *b)
{
    affine sub[8];
    float max_scale = 0, max_min = 0;
    for (int s = 0; s < 8; s++) {
        sub[s] = affine_fit(x + 32 * s, 32, 15);
        max_scale = sub[s].scale > max_scale ? sub[s].scale : max_scale;
        max_min = sub[s].min > max_min ? sub[s].min : max_min;
    }
    uint16_t dh = scale_half(clamp_half(max_scale / 63)), mh = scale_half(clamp_half(max_min / 63));
    float d = loom_f16_to_f32(dh), dmin = loom_f16_to_f32(mh);
    put16(b, dh);
    put16(b + 2, mh);
    memset(b + 4, 0, 140);
    for (int s = 0; s < 8; s++) {
        /* The sub-block's scale and min as stored, in 6 bits against d and
         * dmin; its weights are coded against those, as they will be read. */
        int sc = d > 0 ? nearest(sub[s].scale / d, 0, 63) : 0, m = dmin > 0 ? nearest(sub[s].min / dmin, 0, 63) : 0;
        if (sc == 0 && dmin > 0)  /* all its weights decode to -dmin m: take the m nearest their mean */
            m = nearest(-mean(x + 32 * s, 32) / dmin, 0, 63);
        k4_put_scale_min(b + 4, s, sc, m);
        affine a = { d * sc, dmin * m };
        uint8_t *q = b + 16 + 32 * (s / 2);
        for (int i = 0; i < 32; i++)
            q[i] |= (uint8_t)(affine_code(a, x[32 * s + i], 15) << 4 * (s & 1));
    }
}

static void q4_k_dequant(const uint8_t *b, float *y)
{
    float d = get_half(b), dmin = get_half(b + 2);
    for (int s = 0; s < 8; s++) {
        int sc, m;
        k4_scale_min(b + 4, s, &sc, &m);
        float ds = d * sc, dm = dmin * m;
        const uint8_t *q = b + 16 + 32 * (s / 2);
        for (int i = 0; i < 32; i++)
            y[32 * s + i] = ds * (q[i] >> 4 * (s & 1) & 15) - dm;
    }
}

/* ---- Q6_K: ql[128], qh[64], int8 scales[16], f16 d; w = d sc (q - 32) --- */

/* Weight e's 6-bit code. Each half of 128 weights has 64 low bytes and 32
 * high bytes; its four 32-runs k take low byte l (k even) or l + 32 (k odd),
 * the low nibble for k < 2 and the high one after, and bits 2k, 2k + 1 of
 * high byte l. */
static int q6_k_code(const uint8_t *b, int e)
{
    int h = e / 128, k = e % 128 / 32, l = e % 32;
    int low = b[64 * h + 32 * (k & 1) + l] >> 4 * (k / 2) & 15, high = b[128 + 32 * h + l] >> 2 * k & 3;
    return low | high << 4;
}

static void q6_k_put_code(uint8_t *b, int e, int code)
{
    int h = e / 128, k = e % 128 / 32, l = e % 32;
    b[64 * h + 32 * (k & 1) + l] |= (uint8_t)((code & 15) << 4 * (k / 2));
    b[128 + 32 * h + l] |= (uint8_t)((code >> 4) << 2 * k);
}

/* Symmetric codes of 16 weights in -32..31: the weight of largest magnitude
 * maps to -32, the code with no positive twin (as Q4_0's -8). */
static float q6_k_sub_scale(const float *x)
{
    float amax = 0, max = 0;
    for (int i = 0; i < 16; i++)
        if (absf(x[i]) > amax) {
            amax = absf(x[i]);
            max = x[i];
        }
    return max / -32;
}

static void q6_k_quant(const float *x, uint8_t *b)
{
    float sub[16], amax = 0, max = 0;
    for (int s = 0; s < 16; s++) {
        sub[s] = q6_k_sub_scale(x + 16 * s);
        if (absf(sub[s]) > amax) {
            amax = absf(sub[s]);
            max = sub[s];
        }
    }
    /* The sub-block scales in int8 against d, the largest in magnitude at
     * -128 (as each sub-block's largest weight is at -32). */
    uint16_t dh = scale_half(clamp_half(max / -128));
    float d = loom_f16_to_f32(dh);
    memset(b, 0, 208);
    put16(b + 208, dh);
    for (int s = 0; s < 16; s++) {
        int sc = d != 0 ? nearest(sub[s] / d, -128, 127) : 0;
        b[192 + s] = (uint8_t)(int8_t)sc;
        float ds = d * sc;
        for (int i = 0; i < 16; i++)
            q6_k_put_code(b, 16 * s + i, (ds != 0 ? nearest(x[16 * s + i] / ds, -32, 31) : 0) + 32);
    }
}

static void q6_k_dequant(const uint8_t *b, float *y)
{
    float d = get_half(b + 208);
    for (int e = 0; e < 256; e++)
        y[e] = d * (int8_t)b[192 + e / 16] * (q6_k_code(b, e) - 32);
}

/* ---- rows --------------------------------------------------------------- */

static void f32_quant(const float *x, uint8_t *b) { memcpy(b, x, 4); }
static void f32_dequant(const uint8_t *b, float *y) { memcpy(y, b, 4); }
static void f16_quant(const float *x, uint8_t *b) { put16(b, loom_f32_to_f16(*x)); }
static void f16_dequant(const uint8_t *b, float *y) { *y = get_half(b); }

/* Each dtype's block coder and decoder (block sizes are ops.c's table),
 * and where a block type keeps its f16 scales: a block holding NaN or
 * infinity stores NaN there and zeros elsewhere, so it decodes to NaN
 * (poison shows) rather than to numbers that look sane. u32 has no coder. */
static const struct codec {
    void (*quant)(const float *x, uint8_t *b);
    void (*dequant)(const uint8_t *b, float *y);
    uint8_t scale_at, scales;
} codecs[LOOM_DTYPE_COUNT] = {
    [LOOM_F32] = { f32_quant, f32_dequant, 0, 0 },     [LOOM_F16] = { f16_quant, f16_dequant, 0, 0 },
    [LOOM_Q8_0] = { q8_0_quant, q8_0_dequant, 0, 1 },  [LOOM_Q4_0] = { q4_0_quant, q4_0_dequant, 0, 1 },
    [LOOM_Q4_K] = { q4_k_quant, q4_k_dequant, 0, 2 },  [LOOM_Q6_K] = { q6_k_quant, q6_k_dequant, 208, 1 },
};

static bool all_finite(const float *x, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        if ((bits & 0x7f800000u) == 0x7f800000u)
            return false;
    }
    return true;
}

static void poison(const struct codec *c, uint8_t *b, uint32_t bytes)
{
    memset(b, 0, bytes);
    for (uint32_t i = 0; i < c->scales; i++)
        put16(b + c->scale_at + 2 * i, 0x7e00);
}

static loom_result check_row(const char *fn, loom_dtype t, const void *src, uint64_t n, const void *dst)
{
    if ((unsigned)t >= LOOM_DTYPE_COUNT || !codecs[t].quant)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: t %u (%s) has no host conversion", fn, (unsigned)t,
                         loom_dtype_name(t));
    if (n % loom_dtype_block(t))
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: n %" PRIu64 " is not a whole number of %s blocks of %u", fn, n,
                         loom_dtype_name(t), loom_dtype_block(t));
    if (!src)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: src is NULL", fn);
    if (!dst)
        return loom_fail(LOOM_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    return LOOM_OK;
}

loom_result loom_quantize_row(loom_dtype t, const float *src, uint64_t n, void *dst)
{
    loom_result rc = check_row("loom_quantize_row", t, src, n, dst);
    if (rc)
        return rc;
    const struct codec *c = &codecs[t];
    uint32_t k = loom_dtype_block(t), bytes = loom_dtype_block_bytes(t);
    for (uint64_t i = 0; i < n / k; i++) {
        const float *x = src + i * k;
        uint8_t *b = (uint8_t *)dst + i * bytes;
        if (c->scales && !all_finite(x, k))
            poison(c, b, bytes);
        else
            c->quant(x, b);
    }
    return LOOM_OK;
}

loom_result loom_dequantize_row(loom_dtype t, const void *src, uint64_t n, float *dst)
{
    loom_result rc = check_row("loom_dequantize_row", t, src, n, dst);
    if (rc)
        return rc;
    uint32_t k = loom_dtype_block(t), bytes = loom_dtype_block_bytes(t);
    for (uint64_t i = 0; i < n / k; i++)
        codecs[t].dequant((const uint8_t *)src + i * bytes, dst + i * k);
    return LOOM_OK;
}
