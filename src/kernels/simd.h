// simd.h: 16-float vectors for the kernels that choose their own
// instructions: the register tile of tile.h, and the lane sums below.
//
// Reading order: with linear.h (file 6). The type is GCC/clang's vector
// extension: arithmetic on a vec16 is element-wise, a float operand is
// broadcast, and the compiler emits AVX-512 (or two AVX2 halves) for it.
// Elsewhere tinygpt leaves vectorisation to the compiler, except for sums
// (the lane sums below), which it may not reorder by itself.
#ifndef TINYGPT_SIMD_H
#define TINYGPT_SIMD_H

#include <string.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

typedef float vec16 __attribute__((vector_size(64)));

// Unaligned load and store; memcpy is how C says "these bytes, any alignment".
static inline vec16 load16(const float *p) {
    vec16 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void store16(float *p, vec16 v) { memcpy(p, &v, sizeof v); }

// KEEP_IN_REGISTER: an empty asm statement that the compiler must assume
// reads and changes "v". It stops gcc from folding a vector's load into
// every multiply-add that uses it, which multiplies the loads and halves the
// matmul's speed. Only with AVX-512, where a vec16 fits one register.
#if defined(__AVX512F__)
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define KEEP_IN_REGISTER(v) ((void)0)
#endif

// ---------------------------------------------------------------------------
// Lane sums: a sum over a row, in 16 lanes. Lane i adds the entries
// j = i, i+16, ..., and the lanes are added at the end, lane 0 first. One
// running float would make every addition wait for the one before (and the
// compiler may not reorder float additions itself); 16 lanes make a 128-long
// row 8 vector additions. The order is fixed by n alone, so a row gives the
// same bits wherever it is and whatever thread sums it. Used by the
// softmax (softmax.h), attention's backward and LayerNorm.

// x[0..count) (count < 16) in a vector whose other lanes are "pad". The
// plain version copies the floats into a vector in memory and loads it
// back; the processor cannot forward the small stores to the wide load, and
// the load waits ~20 cycles for them to reach the cache, on every short row
// of the attention's softmax. AVX-512 loads only the lanes a mask selects
// (and never touches memory past x[count - 1]), with the same result.
static inline vec16 load_tail16(const float *x, int count, float pad) {
#if defined(__AVX512F__)
    return (vec16)_mm512_mask_loadu_ps(_mm512_set1_ps(pad), (__mmask16)((1u << count) - 1), x);
#else
    vec16 v = (vec16){0} + pad;
    memcpy(&v, x, (size_t)count * sizeof(float));
    return v;
#endif
}

// the 16 lanes of v added up, lane 0 first
static inline float sum16(vec16 v) {
    float sum = 0.0f;
    for (int i = 0; i < 16; i++) sum += v[i];
    return sum;
}

// sum over j < n of x[j]
static inline float row_sum(const float *x, int n) {
    vec16 lanes = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes += load16(x + j);
    if (j < n) lanes += load_tail16(x + j, n - j, 0.0f);
    return sum16(lanes);
}

// sum over j < n of a[j] * b[j]: softmax's backward needs sum_i w_i dw_i
// (attention_backward).
static inline float row_dot(const float *a, const float *b, int n) {
    vec16 lanes = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes += load16(a + j) * load16(b + j);
    if (j < n) lanes += load_tail16(a + j, n - j, 0.0f) * load_tail16(b + j, n - j, 0.0f);
    return sum16(lanes);
}

#endif
