// simd.h: 16-float vectors for the kernels that choose their own
// instructions: the register tile of tile.h, and the lane sums below.
//
// Reading order: file 17, the first of the fast kernels, with tile.h,
// matmul.h and linear_fast.c: read once the model is whole (files 1-16),
// for why training is fast, not for what it computes. The type is
// GCC/clang's vector extension: arithmetic on a vec16 is element-wise, a
// float operand is broadcast, and the compiler emits AVX-512 (or two AVX2
// halves) for it.
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
// transpose16x16: rows[r][c] becomes rows[c][r] for a 16 x 16 block held in
// 16 vectors. Four rounds, d = 8, 4, 2, 1: in each, rows r and r + d (r
// without bit d) swap their entries [r][c + d] and [r + d][c] (c without
// bit d), a 2 x 2 block transpose at scale d; the four rounds swap the four
// bits of the row and column numbers one at a time. Each swap is a shuffle
// of two vectors (one instruction with AVX-512): 64 shuffles move the 256
// numbers, where loading and storing them one by one takes 512 accesses.
// Round d swaps 2 x 2 blocks of size d between rows x and y = x + d: lane l
// of the new x is its own [l] (l without bit d) or y's [l - d]; lane l of the
// new y is x's [l + d] or its own [l]. __builtin_shufflevector takes lanes
// 0-15 from its first vector and 16-31 from its second (gcc 12 and clang).
static inline void swap_blocks_8(vec16 *x, vec16 *y) {
    const vec16 a = *x, b = *y;
    *x = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    *y = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
}
static inline void swap_blocks_4(vec16 *x, vec16 *y) {
    const vec16 a = *x, b = *y;
    *x = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
    *y = __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
}
static inline void swap_blocks_2(vec16 *x, vec16 *y) {
    const vec16 a = *x, b = *y;
    *x = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
    *y = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
}
static inline void swap_blocks_1(vec16 *x, vec16 *y) {
    const vec16 a = *x, b = *y;
    *x = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
    *y = __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
}

static inline void transpose16x16(vec16 rows[16]) {
    // (Unrolled completely, so the 16 rows stay in registers.)
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
        if (!(r & 8)) swap_blocks_8(&rows[r], &rows[r + 8]);
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
        if (!(r & 4)) swap_blocks_4(&rows[r], &rows[r + 4]);
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
        if (!(r & 2)) swap_blocks_2(&rows[r], &rows[r + 2]);
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++)
        if (!(r & 1)) swap_blocks_1(&rows[r], &rows[r + 1]);
}

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

// v's lanes [0, count) (count < 16) into x[0..count), and nothing past
// them: the store to load_tail16's load.
static inline void store_tail16(float *x, vec16 v, int count) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(x, (__mmask16)((1u << count) - 1), (__m512)v);
#else
    memcpy(x, &v, (size_t)count * sizeof(float));
#endif
}

// the 16 lanes of v added up, lane 0 first
static inline float sum16(vec16 v) {
    float sum = 0.0f;
    for (int i = 0; i < 16; i++) sum += v[i];
    return sum;
}

// sums[r] = sum16(lanes[r]) for r < rows: the same additions in the same
// order, for a block of rows at once. One sum16 is a chain of 16 dependent
// additions (~50 cycles); here the rows' chains run side by side, one
// addition of each row per step, and overlap. (Softmax over a block of
// short rows spent most of its time waiting on these chains.)
static inline void sum16_rows(float *sums, const vec16 *lanes, int rows) {
    for (int r = 0; r < rows; r++) sums[r] = 0.0f;
    for (int i = 0; i < 16; i++)
        for (int r = 0; r < rows; r++) sums[r] += lanes[r][i];
}

// x[0..n) added in lanes: lane i holds x[i] + x[i+16] + ..., in increasing j
static inline vec16 row_sum_lanes(const float *x, int n) {
    vec16 lanes = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes += load16(x + j);
    if (j < n) lanes += load_tail16(x + j, n - j, 0.0f);
    return lanes;
}

// sum over j < n of x[j]
static inline float row_sum(const float *x, int n) { return sum16(row_sum_lanes(x, n)); }

// sum over j < n of a[j] * b[j]: softmax's backward needs sum_i w_i dw_i
// (attention_backward).
static inline vec16 row_dot_lanes(const float *a, const float *b, int n) {
    vec16 lanes = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes += load16(a + j) * load16(b + j);
    if (j < n) lanes += load_tail16(a + j, n - j, 0.0f) * load_tail16(b + j, n - j, 0.0f);
    return lanes;
}
static inline float row_dot(const float *a, const float *b, int n) { return sum16(row_dot_lanes(a, b, n)); }

#endif
