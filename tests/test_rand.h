/* The tests' input generator: xorshift64 seeded per case, so a failing
 * case reproduces from its seed. One copy for every test program. */
#ifndef LOOM_TEST_RAND_H
#define LOOM_TEST_RAND_H

#include <stdint.h>

static uint64_t rng_state;

static void seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }

static float uniform(void)  /* [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / (1ull << 23)) - 1.0);
}

#endif
