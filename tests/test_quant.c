/* Check suite "quant": the host conversions of ir/quant.c. Blocks built by
 * hand from GGML's layouts decode to values worked out from the layout
 * (not from the decoder), so a file written by llama.cpp and a kernel that
 * follows the same layout agree with them; quantizing seeded Gaussian rows
 * stays within each type's error bound; zeros, subnormal and NaN scales,
 * non-finite input and bad arguments behave as loom_ops.h says. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loom_ops.h"
#include "runner.h"
#include "test_rand.h"

#define OK(expr)                                                                                   \
    do {                                                                                           \
        loom_result rc_ = (expr);                                                                  \
        ck_assert_msg(rc_ == LOOM_OK, "%s: %s: %s", #expr, loom_result_str(rc_), loom_last_error()); \
    } while (0)

#define BLOCK_TYPES 4
static const loom_dtype block_types[BLOCK_TYPES] = { LOOM_Q8_0, LOOM_Q4_0, LOOM_Q4_K, LOOM_Q6_K };

/* Where each block type keeps d (Q4_K's dmin follows it). */
static uint32_t d_at(loom_dtype t) { return t == LOOM_Q6_K ? 208 : 0; }

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* A standard normal draw (Box-Muller on the shared generator). */
static float gauss(void)
{
    double u1 = (uniform() + 1) / 2, u2 = (uniform() + 1) / 2;
    return (float)(sqrt(-2 * log(u1 > 1e-12 ? u1 : 1e-12)) * cos(6.283185307179586 * u2));
}

static uint32_t float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* ---- f16 ---------------------------------------------------------------- */

START_TEST(test_f16_values)
{
    static const struct {
        float f;
        uint16_t h;
    } c[] = {
        { 1.0f, 0x3c00 },          { -2.0f, 0xc000 },         { 65504.0f, 0x7bff },    { 65519.0f, 0x7bff },
        { 65520.0f, 0x7c00 },      { 1e9f, 0x7c00 },          { -INFINITY, 0xfc00 },   { 0x1p-14f, 0x0400 },
        { 0x1p-24f, 0x0001 },      { 0x1p-25f, 0x0000 },      { 0x1.8p-24f, 0x0002 },  { 0x1.4p-24f, 0x0001 },
        { 0x1.ff8p-15f, 0x03ff },  { 0x1.ffcp-15f, 0x0400 },  { -0.0f, 0x8000 },       { 1e-30f, 0x0000 },
        { 1.00048828125f, 0x3c00 }, { 1.00146484375f, 0x3c02 }, { 0.333333f, 0x3555 },
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        ck_assert_msg(loom_f32_to_f16(c[i].f) == c[i].h, "%a -> %04x, want %04x", c[i].f, loom_f32_to_f16(c[i].f),
                      c[i].h);
    ck_assert_uint_eq(loom_f32_to_f16(NAN) & 0x7e00, 0x7e00);
    ck_assert(isnan(loom_f16_to_f32(0x7e00)) && isnan(loom_f16_to_f32(0xfc01)));
    ck_assert(isinf(loom_f16_to_f32(0x7c00)) && loom_f16_to_f32(0xfc00) < 0);
    ck_assert(loom_f16_to_f32(0x0001) == 0x1p-24f && loom_f16_to_f32(0x83ff) == -0x1.ff8p-15f);
    /* Every half but NaN survives the trip through f32. */
    for (uint32_t h = 0; h < 0x10000; h++)
        if ((h & 0x7c00) != 0x7c00 || !(h & 0x3ff))
            ck_assert_uint_eq(loom_f32_to_f16(loom_f16_to_f32((uint16_t)h)), h);
}
END_TEST

/* The row API's f32 and f16: a copy, and the conversions above. */
START_TEST(test_f16_rows)
{
    float x[6] = { 1.0f, 0x1p-24f, -65520.0f, NAN, INFINITY, 0.1f }, y[6];
    uint16_t h[6];
    OK(loom_quantize_row(LOOM_F16, x, 6, h));
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(h[i], loom_f32_to_f16(x[i]));
    OK(loom_dequantize_row(LOOM_F16, h, 6, y));
    ck_assert(y[0] == 1.0f && y[1] == 0x1p-24f && isinf(y[2]) && y[2] < 0 && isnan(y[3]) && isinf(y[4]));
    ck_assert(fabsf(y[5] - 0.1f) < 0.1f * 0x1p-11f);
    float z[6];
    OK(loom_quantize_row(LOOM_F32, x, 6, z));
    ck_assert(!memcmp(x, z, sizeof x));
    OK(loom_dequantize_row(LOOM_F32, x, 6, z));
    ck_assert(!memcmp(x, z, sizeof x));
}
END_TEST

/* ---- hand-built blocks -------------------------------------------------- */

static void expect_row(loom_dtype t, const uint8_t *b, const float *want, uint32_t n)
{
    float y[256];
    OK(loom_dequantize_row(t, b, n, y));
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(float_bits(y[i]) == float_bits(want[i]), "%s weight %u: %g, want %g", loom_dtype_name(t), i,
                      y[i], want[i]);
}

START_TEST(test_layout_q8_0)
{
    /* d = 0.5; int8 codes 127, -128, then j - 16, and -1 last. */
    uint8_t b[34] = { 0x00, 0x38, 0x7f, 0x80 };
    float want[32] = { 63.5f, -64.0f };
    for (int j = 2; j < 31; j++) {
        b[2 + j] = (uint8_t)(j - 16);
        want[j] = (j - 16) * 0.5f;
    }
    b[33] = 0xff;
    want[31] = -0.5f;
    expect_row(LOOM_Q8_0, b, want, 32);
}
END_TEST

START_TEST(test_layout_q4_0)
{
    /* d = 2; byte j holds weight j in its low nibble and j + 16 in its high,
     * each minus 8. 0x88 is two zeros. */
    uint8_t b[18] = { 0x00, 0x40, 0x1f, 0x80, 0x88, 0x3c };
    memset(b + 6, 0x88, 12);
    float want[32] = { 0 };
    want[0] = 14, want[16] = -14;  /* 0x1f: 15 - 8, 1 - 8 */
    want[1] = -16, want[17] = 0;   /* 0x80 */
    want[3] = 8, want[19] = -10;   /* 0x3c: 12 - 8, 3 - 8 */
    expect_row(LOOM_Q4_0, b, want, 32);
}
END_TEST

/* A Q4_K block: d = 1, dmin = 0.5, sub-block scales and mins below, packed
 * by hand into the 12 bytes, and qs[i] = 7 i. */
static const int k4_sc[8] = { 1, 2, 3, 4, 17, 33, 50, 63 }, k4_m[8] = { 0, 1, 2, 3, 20, 40, 5, 63 };

static void k4_block(uint8_t *b)
{
    /* Bytes 0-3: scales 0-3, top bits scales 4-7 >> 4 (1, 2, 3, 3); bytes 4-7:
     * mins 0-3, top bits mins 4-7 >> 4 (1, 2, 0, 3); bytes 8-11: scale 4-7's
     * low nibble | min 4-7's low nibble << 4. */
    static const uint8_t scales[12] = { 0x41, 0x82, 0xc3, 0xc4, 0x40, 0x81, 0x02, 0xc3, 0x41, 0x81, 0x52, 0xff };
    put16(b, 0x3c00);
    put16(b + 2, 0x3800);
    memcpy(b + 4, scales, 12);
    for (int i = 0; i < 128; i++)
        b[16 + i] = (uint8_t)(7 * i);
}

START_TEST(test_layout_q4_k)
{
    uint8_t b[144];
    k4_block(b);
    /* Weight e: 64-group e / 64 owns qs[32 g .. 32 g + 32); weight 64 g + l
     * is byte l's low nibble, 64 g + 32 + l its high nibble. */
    float want[256];
    for (int e = 0; e < 256; e++) {
        int g = e / 64, l = e % 32, byte = (7 * (32 * g + l)) & 255;
        int q = e % 64 < 32 ? byte & 15 : byte >> 4;
        want[e] = (float)(k4_sc[e / 32] * q) - 0.5f * k4_m[e / 32];
    }
    /* A few worked by hand: weight 40 is qs[8] = 0x38's high nibble in
     * sub-block 1 (2 * 3 - 0.5); 130 is qs[66] = 0xce's low nibble in 4
     * (17 * 14 - 10); 170 is qs[74] = 0x06's high nibble in 5 (-20); 200 is
     * qs[104] = 0xd8's low in 6 (50 * 8 - 2.5); 255 is qs[127] = 0x79's
     * high in 7 (63 * 7 - 31.5). */
    ck_assert(want[0] == 0 && want[40] == 5.5f && want[130] == 228 && want[170] == -20 && want[200] == 397.5f &&
              want[255] == 409.5f);
    expect_row(LOOM_Q4_K, b, want, 256);
}
END_TEST

/* A Q6_K block: ql[i] = 5 i, qh[i] = 11 i, scales alternate 1, -2, 3, -4,
 * ..., d = 0.25. */
static int k6_scale(int s) { return s % 2 ? -(s + 1) : s + 1; }

static void k6_block(uint8_t *b)
{
    for (int i = 0; i < 128; i++)
        b[i] = (uint8_t)(5 * i);
    for (int i = 0; i < 64; i++)
        b[128 + i] = (uint8_t)(11 * i);
    for (int s = 0; s < 16; s++)
        b[192 + s] = (uint8_t)(int8_t)k6_scale(s);
    put16(b + 208, 0x3400);
}

START_TEST(test_layout_q6_k)
{
    uint8_t b[210];
    k6_block(b);
    /* Each half n of 128 weights reads ql[64 n ..] and qh[32 n ..]: for l <
     * 32, weight l is ql[l]'s low nibble with qh[l] bits 0-1 on top; l + 32
     * is ql[l + 32] low with bits 2-3; l + 64 ql[l] high with bits 4-5; l +
     * 96 ql[l + 32] high with bits 6-7. Codes are biased by 32; weight e's
     * scale is scales[e / 16]. */
    float want[256];
    for (int n = 0; n < 2; n++)
        for (int l = 0; l < 32; l++) {
            int ql0 = (5 * (64 * n + l)) & 255, ql1 = (5 * (64 * n + l + 32)) & 255, qh = (11 * (32 * n + l)) & 255;
            int q[4] = { (ql0 & 15) | (qh & 3) << 4, (ql1 & 15) | (qh >> 2 & 3) << 4, (ql0 >> 4) | (qh >> 4 & 3) << 4,
                         (ql1 >> 4) | (qh >> 6) << 4 };
            for (int k = 0; k < 4; k++) {
                int e = 128 * n + 32 * k + l;
                want[e] = 0.25f * (float)(k6_scale(e / 16) * (q[k] - 32));
            }
        }
    /* By hand: weight 0 is code 0 (-32 * 0.25); 33 is ql[33] = 0xa5's low 5
     * with qh[1] = 0x0b's bits 2-3 (2): code 37, scale 3; 70 is ql[6] =
     * 0x1e's high 1, qh[6] = 0x42's bits 4-5 (0): code 1, scale 5; 150 is
     * ql[86] = 0xae's low 14 with qh[54] = 0x52's bits 0-1 (2): code 46,
     * scale -10; 255 is ql[127] = 0x7b's high 7 with qh[63] = 0xb5's bits
     * 6-7 (2): code 39, scale -16. */
    ck_assert(want[0] == -8 && want[33] == 3.75f && want[70] == -38.75f && want[150] == -35 && want[255] == -28);
    expect_row(LOOM_Q6_K, b, want, 256);
}
END_TEST

/* Blocks of a row decode independently, each from its own offset. */
START_TEST(test_layout_rows)
{
    uint8_t k4[3 * 144], k6[3 * 210];
    for (int i = 0; i < 3; i++) {
        k4_block(k4 + 144 * i);
        put16(k4 + 144 * i, (uint16_t)(0x3c00 + 0x400 * i));  /* d = 1, 2, 4 */
        k6_block(k6 + 210 * i);
        put16(k6 + 210 * i + 208, (uint16_t)(0x3400 + 0x400 * i));
    }
    static float y[768], one[256];
    OK(loom_dequantize_row(LOOM_Q4_K, k4, 768, y));
    for (int i = 0; i < 3; i++) {
        OK(loom_dequantize_row(LOOM_Q4_K, k4 + 144 * i, 256, one));
        ck_assert(!memcmp(y + 256 * i, one, sizeof one));
    }
    ck_assert(y[256 + 40] == 2 * 2 * 3 - 0.5f);
    OK(loom_dequantize_row(LOOM_Q6_K, k6, 768, y));
    for (int i = 0; i < 3; i++) {
        OK(loom_dequantize_row(LOOM_Q6_K, k6 + 210 * i, 256, one));
        ck_assert(!memcmp(y + 256 * i, one, sizeof one));
    }
    ck_assert(y[512 + 255] == -28 * 4);
}
END_TEST

/* ---- round trips -------------------------------------------------------- */

/* Relative RMS error of quantizing x[0..n) and decoding it back. */
static double round_trip_error(loom_dtype t, const float *x, uint32_t n)
{
    uint8_t *q = malloc(loom_dtype_row_bytes(t, n));
    float *y = malloc(n * sizeof *y);
    ck_assert(q && y);
    OK(loom_quantize_row(t, x, n, q));
    OK(loom_dequantize_row(t, q, n, y));
    double e = 0, s = 0;
    for (uint32_t i = 0; i < n; i++) {
        ck_assert(isfinite(y[i]));
        e += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        s += (double)x[i] * x[i];
    }
    free(q);
    free(y);
    return sqrt(e / s);
}

/* Bounds a little above what each type measures: a long row averages out,
 * one block of 32 does not (Q4_0's worst over 1000 seeds is near 15%);
 * Q4_K's is tight enough to see its scale search (7.9% without it);
 * weights near 1e-5, whose scales are subnormal halves, lose a little. */
static const struct {
    loom_dtype t;
    double row, block, tiny;
} bounds[] = {
    { LOOM_F16, 0.0003, 0.0004, 0.01 }, { LOOM_Q8_0, 0.007, 0.012, 0.01 }, { LOOM_Q4_0, 0.095, 0.18, 0.12 },
    { LOOM_Q4_K, 0.077, 0.10, 0.10 },    { LOOM_Q6_K, 0.022, 0.03, 0.03 },
};

START_TEST(test_round_trip_row)
{
    enum { N = 64 * 256 };
    static float x[N];
    seed(1000 + (uint64_t)_i);
    for (int i = 0; i < N; i++)
        x[i] = gauss();
    double err = round_trip_error(bounds[_i].t, x, N);
    fprintf(stderr, "quant: %s relative RMS error %.3f%% over %d weights\n", loom_dtype_name(bounds[_i].t),
            100 * err, N);
    ck_assert_msg(err < bounds[_i].row, "%s: %g", loom_dtype_name(bounds[_i].t), err);
}
END_TEST

START_TEST(test_round_trip_block)
{
    loom_dtype t = bounds[_i].t;
    uint32_t n = t == LOOM_F16 ? 32 : loom_dtype_block(t);
    float x[256];
    for (uint64_t s = 1; s <= 50; s++) {
        seed(s);
        for (uint32_t i = 0; i < n; i++)
            x[i] = gauss();
        double err = round_trip_error(t, x, n);
        ck_assert_msg(err < bounds[_i].block, "%s seed %d: %g", loom_dtype_name(t), (int)s, err);
    }
}
END_TEST

/* Scale matters not: a row times 2^k quantizes to the same codes times 2^k
 * while d stays a normal half. */
START_TEST(test_round_trip_scaled)
{
    loom_dtype t = block_types[_i];
    float x[256], y[256], xs[256], ys[256];
    seed(7);
    for (int i = 0; i < 256; i++)
        x[i] = gauss(), xs[i] = x[i] * 64;
    static uint8_t q[272], qs[272];
    OK(loom_quantize_row(t, x, 256, q));
    OK(loom_quantize_row(t, xs, 256, qs));
    OK(loom_dequantize_row(t, q, 256, y));
    OK(loom_dequantize_row(t, qs, 256, ys));
    for (int i = 0; i < 256; i++)
        ck_assert_msg(ys[i] == y[i] * 64, "%s weight %d: %g vs %g", loom_dtype_name(t), i, ys[i], y[i] * 64);
}
END_TEST

/* Decoded Q8_0, Q4_0 and f16 rows are fixed points: quantizing them again
 * gives the same bytes (the weight of largest magnitude sets d exactly). */
START_TEST(test_round_trip_fixed_point)
{
    static const loom_dtype t[3] = { LOOM_Q8_0, LOOM_Q4_0, LOOM_F16 };
    float x[256], y[256];
    uint8_t q[512], q2[512];
    seed(11);
    for (int i = 0; i < 256; i++)
        x[i] = gauss();
    uint64_t bytes = loom_dtype_row_bytes(t[_i], 256);
    OK(loom_quantize_row(t[_i], x, 256, q));
    OK(loom_dequantize_row(t[_i], q, 256, y));
    OK(loom_quantize_row(t[_i], y, 256, q2));
    ck_assert(!memcmp(q, q2, bytes));
}
END_TEST

/* ---- special values ----------------------------------------------------- */

/* Zeros of either sign store d = 0 (and dmin = 0) and decode to +0. */
START_TEST(test_special_zeros)
{
    loom_dtype t = block_types[_i];
    float x[256], y[256];
    for (int i = 0; i < 256; i++)
        x[i] = i % 3 ? 0.0f : -0.0f;
    uint8_t q[210];
    uint32_t n = loom_dtype_block(t);
    memset(q, 0xaa, sizeof q);
    OK(loom_quantize_row(t, x, n, q));
    ck_assert_uint_eq(get16(q + d_at(t)), 0);
    if (t == LOOM_Q4_K)
        ck_assert_uint_eq(get16(q + 2), 0);
    OK(loom_dequantize_row(t, q, n, y));
    for (uint32_t i = 0; i < n; i++)
        ck_assert_msg(float_bits(y[i]) == 0, "%s weight %u: %g", loom_dtype_name(t), i, y[i]);
}
END_TEST

/* A subnormal d (and dmin) decodes exactly: the weights are small integers
 * times a power of two. */
START_TEST(test_special_subnormal_d)
{
    uint8_t b8[34] = { 0x01, 0x00, 100, 0x9c };  /* d = 2^-24; 100, -100 */
    float y[256];
    OK(loom_dequantize_row(LOOM_Q8_0, b8, 32, y));
    ck_assert(y[0] == 100 * 0x1p-24f && y[1] == -100 * 0x1p-24f && y[2] == 0);

    uint8_t b4[18] = { 0xff, 0x03, 0x0f };  /* d = 1023 * 2^-24, the largest subnormal */
    OK(loom_dequantize_row(LOOM_Q4_0, b4, 32, y));
    ck_assert(y[0] == 7 * 1023 * 0x1p-24f && y[16] == -8 * 1023 * 0x1p-24f);

    uint8_t k4[144];
    k4_block(k4);
    put16(k4, 0x0003);      /* d = 3 * 2^-24 */
    put16(k4 + 2, 0x0200);  /* dmin = 2^-15 */
    OK(loom_dequantize_row(LOOM_Q4_K, k4, 256, y));
    ck_assert(y[40] == 2 * 3 * 3 * 0x1p-24f - 0x1p-15f && y[255] == 63 * 3 * 7 * 0x1p-24f - 63 * 0x1p-15f);

    uint8_t k6[210];
    k6_block(k6);
    put16(k6 + 208, 0x0010);  /* d = 2^-20 */
    OK(loom_dequantize_row(LOOM_Q6_K, k6, 256, y));
    ck_assert(y[33] == 15 * 0x1p-20f && y[255] == -112 * 0x1p-20f);
}
END_TEST

/* Weights so small that d is a subnormal half still quantize to something
 * near them, at the precision a subnormal d leaves. */
START_TEST(test_special_subnormal_row)
{
    loom_dtype t = bounds[_i].t;
    float x[256];
    seed(5);
    for (int i = 0; i < 256; i++)
        x[i] = gauss() * 1e-5f;
    double err = round_trip_error(t, x, 256);
    ck_assert_msg(err < bounds[_i].tiny, "%s: %g", loom_dtype_name(t), err);
    if (t != LOOM_F16) {
        uint8_t q[272];
        OK(loom_quantize_row(t, x, 256, q));
        ck_assert_uint_eq(get16(q + d_at(t)) & 0x7c00, 0);  /* the case meant: d subnormal */
    }
}
END_TEST

/* Weights down to where even a subnormal scale cannot reach them decode
 * no worse than zeros would (once, Q4_K decoded such a row to its min
 * alone, at 188% error). */
START_TEST(test_special_tiny_row)
{
    loom_dtype t = block_types[_i];
    float x[256];
    for (float scale = 1e-6f; scale > 1e-10f; scale /= 10) {
        seed(5);
        for (int i = 0; i < 256; i++)
            x[i] = gauss() * scale;
        double err = round_trip_error(t, x, 256);
        ck_assert_msg(err <= 1, "%s at %g: %g", loom_dtype_name(t), scale, err);
    }
}
END_TEST

/* A NaN d (or dmin) poisons its block. */
START_TEST(test_special_nan_d)
{
    uint8_t b[4][210] = { { 0 } };
    put16(b[0], 0x7e00);
    put16(b[1], 0x7e00);
    k4_block(b[2]);
    put16(b[2] + 2, 0x7e00);  /* dmin only */
    k6_block(b[3]);
    put16(b[3] + 208, 0xfe00);
    for (int k = 0; k < BLOCK_TYPES; k++) {
        float y[256];
        uint32_t n = loom_dtype_block(block_types[k]);
        OK(loom_dequantize_row(block_types[k], b[k], n, y));
        for (uint32_t i = 0; i < n; i++)
            ck_assert_msg(isnan(y[i]), "%s weight %u: %g", loom_dtype_name(block_types[k]), i, y[i]);
    }
}
END_TEST

/* NaN or infinity in a block's input stores a NaN scale: that block decodes
 * to NaN, its neighbours as if it were not there. */
START_TEST(test_special_nonfinite_input)
{
    loom_dtype t = block_types[_i / 2];
    uint32_t k = loom_dtype_block(t), n = 3 * k;
    float x[768], y[768], alone[256];
    seed(3);
    for (uint32_t i = 0; i < n; i++)
        x[i] = gauss();
    x[k + 5] = _i % 2 ? -INFINITY : NAN;
    uint8_t q[3 * 210], q1[210];
    OK(loom_quantize_row(t, x, n, q));
    OK(loom_dequantize_row(t, q, n, y));
    for (uint32_t i = k; i < 2 * k; i++)
        ck_assert(isnan(y[i]));
    for (uint32_t b = 0; b < 3; b += 2) {
        OK(loom_quantize_row(t, x + b * k, k, q1));
        OK(loom_dequantize_row(t, q1, k, alone));
        ck_assert(!memcmp(alone, y + b * k, k * sizeof *y));
    }
}
END_TEST

/* Weights past what an f16 scale can reach clip; nothing is NaN or
 * infinite, and the sign of each survives. */
START_TEST(test_special_huge)
{
    loom_dtype t = block_types[_i];
    float x[256], y[256];
    seed(9);
    for (int i = 0; i < 256; i++)
        x[i] = gauss() * 1e37f;
    x[0] = 3.4e38f, x[1] = -3.4e38f;
    uint8_t q[272];
    OK(loom_quantize_row(t, x, 256, q));
    OK(loom_dequantize_row(t, q, 256, y));
    ck_assert(isfinite(y[0]) && y[0] > 0 && isfinite(y[1]) && y[1] < 0);
    for (uint32_t i = 1; i < 256; i++)
        ck_assert_msg(isfinite(y[i]), "%s weight %u: %g", loom_dtype_name(t), i, y[i]);
}
END_TEST

/* ---- argument errors ---------------------------------------------------- */

START_TEST(test_errors_count)
{
    float x[288] = { 0 }, y[288];
    uint8_t q[512];
    static const struct {
        loom_dtype t;
        uint64_t n;
    } c[] = { { LOOM_Q8_0, 33 }, { LOOM_Q8_0, 1 }, { LOOM_Q4_0, 48 }, { LOOM_Q4_K, 255 },
              { LOOM_Q4_K, 288 }, { LOOM_Q6_K, 257 }, { LOOM_Q6_K, 32 } };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        memset(q, 0x5a, sizeof q);
        memset(y, 0x5a, sizeof y);
        ck_assert_int_eq(loom_quantize_row(c[i].t, x, c[i].n, q), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_dequantize_row(c[i].t, q, c[i].n, y), LOOM_INVALID_ARGUMENT);
        for (size_t j = 0; j < sizeof q; j++)
            ck_assert_uint_eq(q[j], 0x5a);  /* nothing written */
        ck_assert_uint_eq(float_bits(y[0]), 0x5a5a5a5a);
    }
    /* An empty row is a whole number of blocks. */
    OK(loom_quantize_row(LOOM_Q4_K, x, 0, q));
    OK(loom_dequantize_row(LOOM_Q4_K, q, 0, y));
}
END_TEST

START_TEST(test_errors_null)
{
    float x[256] = { 0 };
    uint8_t q[210];
    for (int k = 0; k < BLOCK_TYPES + 2; k++) {
        loom_dtype t = k < BLOCK_TYPES ? block_types[k] : k == BLOCK_TYPES ? LOOM_F32 : LOOM_F16;
        uint32_t n = loom_dtype_block(t);
        ck_assert_int_eq(loom_quantize_row(t, NULL, n, q), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_quantize_row(t, x, n, NULL), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_dequantize_row(t, NULL, n, x), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_dequantize_row(t, q, n, NULL), LOOM_INVALID_ARGUMENT);
    }
}
END_TEST

START_TEST(test_errors_dtype)
{
    float x[32] = { 0 };
    uint8_t q[256];
    static const loom_dtype bad[] = { LOOM_U32, (loom_dtype)LOOM_DTYPE_COUNT, (loom_dtype)99, (loom_dtype)-1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(loom_quantize_row(bad[i], x, 32, q), LOOM_INVALID_ARGUMENT);
        ck_assert_int_eq(loom_dequantize_row(bad[i], q, 32, x), LOOM_INVALID_ARGUMENT);
    }
}
END_TEST

static Suite *quant_suite(void)
{
    Suite *s = suite_create("quant");
    int n_bounds = (int)(sizeof bounds / sizeof bounds[0]);
    TCase *tc = tcase_create("f16");
    tcase_add_test(tc, test_f16_values);
    tcase_add_test(tc, test_f16_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("layout");
    tcase_add_test(tc, test_layout_q8_0);
    tcase_add_test(tc, test_layout_q4_0);
    tcase_add_test(tc, test_layout_q4_k);
    tcase_add_test(tc, test_layout_q6_k);
    tcase_add_test(tc, test_layout_rows);
    suite_add_tcase(s, tc);

    tc = tcase_create("round_trip");
    tcase_add_loop_test(tc, test_round_trip_row, 0, n_bounds);
    tcase_add_loop_test(tc, test_round_trip_block, 0, n_bounds);
    tcase_add_loop_test(tc, test_round_trip_scaled, 0, BLOCK_TYPES);
    tcase_add_loop_test(tc, test_round_trip_fixed_point, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("special");
    tcase_add_loop_test(tc, test_special_zeros, 0, BLOCK_TYPES);
    tcase_add_test(tc, test_special_subnormal_d);
    tcase_add_loop_test(tc, test_special_subnormal_row, 0, n_bounds);
    tcase_add_loop_test(tc, test_special_tiny_row, 0, BLOCK_TYPES);
    tcase_add_test(tc, test_special_nan_d);
    tcase_add_loop_test(tc, test_special_nonfinite_input, 0, 2 * BLOCK_TYPES);
    tcase_add_loop_test(tc, test_special_huge, 0, BLOCK_TYPES);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_errors_count);
    tcase_add_test(tc, test_errors_null);
    tcase_add_test(tc, test_errors_dtype);
    suite_add_tcase(s, tc);
    return s;
}

void loom_test_register(loom_test_runner *r, int argc, char **argv)
{
    (void)argc, (void)argv;
    loom_test_add_suite(r, quant_suite());
}
