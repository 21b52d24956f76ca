// rng.h: explicit, seedable random numbers.
//
// Reading order: file 2. Every random choice in tinygpt (weight init, batch
// positions, sampling, dropout) draws from state passed by pointer, never from
// rand() or a hidden global, so a run is reproducible from its --seed.
//
// Two generators:
// - Rng, a sequential stream (xorshift64*), for things done in a fixed order.
// - dropout_uniform(key, index), a counter-based hash: the random number for
//   element "index" depends only on (key, index), not on which thread asks or
//   in what order. Attention dropout uses it so that the mask is the same for
//   any thread count, and so backward can recompute the mask instead of
//   storing it.
#ifndef TINYGPT_RNG_H
#define TINYGPT_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t state;  // never 0 (xorshift's one fixed point)
} Rng;

// rng_init: seed the stream; any seed, including 0, is fine.
void rng_init(Rng *rng, uint64_t seed);
// rng_u64: next 64 random bits.
uint64_t rng_u64(Rng *rng);
// rng_uniform: a float in [0, 1) with 24 random bits.
float rng_uniform(Rng *rng);
// rng_normal: a standard normal sample (Box-Muller).
float rng_normal(Rng *rng);
// rng_below: an integer in [0, n), n > 0.
uint64_t rng_below(Rng *rng, uint64_t n);

// mix64: the splitmix64 finaliser, a strong 64-bit -> 64-bit hash. Inline so
// that loops calling it (dropout masks) can be vectorised.
static inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// dropout_uniform: a float in [0, 1) that is a pure function of (key, index).
// The top 24 bits go to float through int32_t: the same number as from the
// uint64_t they are, but a conversion AVX2 and NEON have in vector form,
// so the dropout loops vectorise there too (from uint64_t only AVX-512 can:
// card L's attention dropout ran one weight at a time, 7% of its AVX2 step).
static inline float dropout_uniform(uint64_t key, uint64_t index) {
    return (float)(int32_t)(mix64(key ^ mix64(index)) >> 40) * (1.0f / 16777216.0f);
}

// dropout_factor: the one dropout rule, for every place dropout acts
// (attention weights, residual branches, the embedding): element "index" of
// the tensor drawn with "key" is dropped (factor 0) with probability p, and
// kept with factor "keep" = 1/(1-p) otherwise ("inverted" dropout keeps each
// element's expected value, so evaluation needs no rescaling).
static inline float dropout_factor(uint64_t key, uint64_t index, float p, float keep) {
    return dropout_uniform(key, index) < p ? 0.0f : keep;
}

#endif
