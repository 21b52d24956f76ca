// rng.c: the xorshift64* stream (see rng.h; the splitmix64 hash is inline there).
#include "rng.h"

#include <math.h>

void rng_init(Rng *rng, uint64_t seed) {
    // Hash the seed so nearby seeds (1, 2, 3) give unrelated streams.
    rng->state = mix64(seed);
    if (rng->state == 0) rng->state = 0x9E3779B97F4A7C15ull;
}

uint64_t rng_u64(Rng *rng) {
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float rng_uniform(Rng *rng) {
    return (float)(rng_u64(rng) >> 40) * (1.0f / 16777216.0f);
}

float rng_normal(Rng *rng) {
    // Box-Muller: u1 in (0, 1] keeps log() finite.
    float u1 = 1.0f - rng_uniform(rng);
    float u2 = rng_uniform(rng);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

uint64_t rng_below(Rng *rng, uint64_t n) {
    // Multiply-shift maps 64 random bits onto [0, n) with negligible bias.
    return (uint64_t)(((unsigned __int128)rng_u64(rng) * n) >> 64);
}
