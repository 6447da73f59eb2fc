/* Host-side conversion between f32 and loom's other element types: f16
 * both ways, and rows of GGUF's block types (Q8_0, Q4_0, Q4_K, Q6_K) packed
 * and unpacked byte for byte as GGML lays them out, so that blocks written
 * here, read by the kernels or loaded from a llama.cpp file all decode to
 * the same floats. Frontends quantize weights with it; CPU references read
 * quantized weights with it. ir/ links no libm, so rounding is done on the
 * bits. */
#include <string.h>
#include "loom_ops.h"

/* ---- f16 ------------------------------------------------------------------ */

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
