// simd.h: the vectors of the kernels that choose their own instructions:
// the register tile of tile.h, the in-register transpose, and the lane sums
// below.
//
// Reading order: file 17, the first of the fast kernels, with tile.h,
// matmul.h and linear_fast.c: read once the model is whole (files 1-16),
// for why training is fast, not for what it computes. The type is
// GCC/clang's vector extension: arithmetic on a `vec` is element-wise, a
// float operand is broadcast, and the compiler emits the instructions of
// the target it builds for.
// Elsewhere tinygpt leaves vectorisation to the compiler, except for sums
// (the lane sums below), which it may not reorder by itself.
//
// One width per build: the kernel path. A `vec` is one register of the
// target (the Makefile builds for the CPU it runs on, or, with PORTABLE=1,
// once per path):
//   avx512   16 floats, 32 registers   (x86-64 with AVX-512F)
//   avx2      8 floats, 16 registers   (x86-64 with AVX2 and FMA)
//   neon      4 floats, 32 registers   (aarch64)
//   generic   4 floats, plain vectors  (anything else; -DTINYGPT_GENERIC forces it)
// The results do not depend on the path: a tile adds its terms in
// increasing k with one FMA each, whatever its width (tile.h), and a lane
// sum has 16 lanes on every path, held as one, two or four vectors.
#ifndef TINYGPT_SIMD_H
#define TINYGPT_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// PATH_AVX512, PATH_AVX2, PATH_NEON: 1 on that path, else 0 (all 0: generic).
#if defined(TINYGPT_GENERIC)
#define VEC_FLOATS 4
#define KERNEL_PATH "generic"
#elif defined(__AVX512F__)
#define VEC_FLOATS 16
#define KERNEL_PATH "avx512"
#define PATH_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__)
#define VEC_FLOATS 8
#define KERNEL_PATH "avx2"
#define PATH_AVX2 1
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define VEC_FLOATS 4
#define KERNEL_PATH "neon"
#define PATH_NEON 1
#include <arm_neon.h>
#else
#define VEC_FLOATS 4
#define KERNEL_PATH "generic"
#endif
#ifndef PATH_AVX512
#define PATH_AVX512 0
#endif
#ifndef PATH_AVX2
#define PATH_AVX2 0
#endif
#ifndef PATH_NEON
#define PATH_NEON 0
#endif

typedef float vec __attribute__((vector_size(VEC_FLOATS * sizeof(float))));
// As many 32-bit integers: a comparison of two vecs gives one, -1 (all bits
// set) in the lanes where it holds and 0 elsewhere.
typedef int32_t ivec __attribute__((vector_size(VEC_FLOATS * sizeof(int32_t))));

// Unaligned load and store; memcpy is how C says "these bytes, any alignment".
static inline vec load_vec(const float *p) {
    vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void store_vec(float *p, vec v) { memcpy(p, &v, sizeof v); }

// x in every lane: x converted to a vector (which broadcasts it) minus a
// vector of zeros, which the compiler may drop, as x - 0 is x for every x,
// -0 included: one broadcast instruction, or none where the FMA takes a
// lane (NEON's fmla by element). (`(vec){0} + x` may not be dropped: -0 +
// 0 is +0. It kept a register of zeros and an add for every broadcast, and
// a loop over the lanes became a chain of lane inserts in the tile.)
static inline vec splat(float x) { return x - (vec){0}; }

// a * b + c in each lane, rounded once: one fused multiply-add. Written out
// rather than left to -ffp-contract=fast, which fuses `acc += a * b` in most
// places but not in all: gcc 12 left one such product of the lane sums
// unfused in one caller and fused in another, one unit in the last place
// apart. Where the bits must not depend on the path, the FMA is said.
// The generic vectors leave the fusing to the compiler (-ffp-contract=fast,
// one expression): on a CPU with FMA it is one instruction (tests/test_paths.c
// holds the bits to the other paths'; per-lane fmaf calls were unpacked
// into single floats through the stack). On a CPU without FMA (the
// portable x86-64 build's baseline) the product is rounded, then the sum:
// the one path whose bits differ from the others' (docs/cpus.md says by
// how much).
static inline vec fma_vec(vec a, vec b, vec c) {
#if PATH_AVX512
    return (vec)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif PATH_AVX2
    return (vec)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#elif PATH_NEON
    return (vec)vfmaq_f32((float32x4_t)c, (float32x4_t)a, (float32x4_t)b);
#else
    return a * b + c;
#endif
}

// select_vec: a's bits where "mask" holds (a comparison's -1, all bits
// set), b's elsewhere, in each lane.
static inline vec select_vec(ivec mask, vec a, vec b) { return (vec)((mask & (ivec)a) | (~mask & (ivec)b)); }

// max_vec: a where a > b, else b, in each lane; min_vec: a where a < b,
// else b. That is x86's max and min exactly (their second operand unless
// the first is larger, or smaller; NaN and signed zeros included), one
// instruction each; elsewhere the comparison selects.
static inline vec max_vec(vec a, vec b) {
#if PATH_AVX512
    return (vec)_mm512_max_ps((__m512)a, (__m512)b);
#elif PATH_AVX2
    return (vec)_mm256_max_ps((__m256)a, (__m256)b);
#else
    return select_vec(a > b, a, b);
#endif
}
static inline vec min_vec(vec a, vec b) {
#if PATH_AVX512
    return (vec)_mm512_min_ps((__m512)a, (__m512)b);
#elif PATH_AVX2
    return (vec)_mm256_min_ps((__m256)a, (__m256)b);
#else
    return select_vec(a < b, a, b);
#endif
}

// x clamped to [lo, hi] in each lane, as `x < lo ? lo : x > hi ? hi : x`
// (a NaN lane stays NaN: both comparisons fail, and max_vec and min_vec
// then give their second operand, x).
static inline vec clamp_vec(vec x, float lo, float hi) { return min_vec(splat(hi), max_vec(splat(lo), x)); }

// Each lane of x (a whole number in int32_t's range) as an integer. A NaN
// lane gives some integer (C leaves its conversion undefined; x86 gives
// INT32_MIN, NEON 0, and the generic vectors convert 0 instead), for
// callers whose result is NaN there whatever the integer.
static inline ivec to_int_vec(vec x) {
#if PATH_AVX512
    return (ivec)_mm512_cvttps_epi32((__m512)x);
#elif PATH_AVX2
    return (ivec)_mm256_cvttps_epi32((__m256)x);
#elif PATH_NEON
    return (ivec)vcvtq_s32_f32((float32x4_t)x);
#else
    return __builtin_convertvector(select_vec(x == x, x, splat(0.0f)), ivec);
#endif
}

// KEEP_IN_REGISTER: an empty asm statement that the compiler must assume
// reads and changes "v". It stops gcc from folding a vector's load into
// every multiply-add that uses it (x86's FMAs take an operand from memory),
// which multiplies the loads and halves the matmul's speed. NEON's fmla
// reads registers only, and there the statement made gcc store each of B's
// vectors to the stack as well: nothing to stop, so nothing is said.
#if PATH_AVX512 || PATH_AVX2
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define KEEP_IN_REGISTER(v) ((void)0)
#endif

// x[0..count) (0 < count < VEC_FLOATS) in a vector whose other lanes are
// "pad". The plain version copies the floats into a vector in memory and
// loads it back; the processor cannot forward the small stores to the wide
// load, and the load waits ~20 cycles for them to reach the cache, on every
// short row of the attention's softmax. AVX-512 and AVX2 load only the
// lanes a mask selects (and never touch memory past x[count - 1]), with
// the same result; NEON and the generic vectors set the lanes one by one.
static inline vec load_tail(const float *x, int count, float pad) {
#if PATH_AVX512
    return (vec)_mm512_mask_loadu_ps(_mm512_set1_ps(pad), (__mmask16)((1u << count) - 1), x);
#elif PATH_AVX2
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256 wanted = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane));
    return (vec)_mm256_blendv_ps(_mm256_set1_ps(pad), _mm256_maskload_ps(x, _mm256_castps_si256(wanted)), wanted);
#else
    // Lane by lane, each a constant lane of the vector (a loop to count
    // became a call of memcpy, and a variable lane a trip through memory).
    vec v = splat(pad);
#pragma GCC unroll 16
    for (int i = 0; i < VEC_FLOATS; i++)
        if (i < count) v[i] = x[i];
    return v;
#endif
}

// v's lanes [0, count) (0 < count < VEC_FLOATS) into x[0..count), and
// nothing past them: the store to load_tail's load.
static inline void store_tail(float *x, vec v, int count) {
#if PATH_AVX512
    _mm512_mask_storeu_ps(x, (__mmask16)((1u << count) - 1), (__m512)v);
#elif PATH_AVX2
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(x, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lane), (__m256)v);
#else
#pragma GCC unroll 16
    for (int i = 0; i < VEC_FLOATS; i++)
        if (i < count) x[i] = v[i];
#endif
}

// ---------------------------------------------------------------------------
// transpose_block: rows[r][c] becomes rows[c][r] for a VEC_FLOATS x
// VEC_FLOATS block held in VEC_FLOATS vectors. Rounds d = VEC_FLOATS / 2,
// ..., 2, 1: in each, rows r and r + d (r without bit d) swap their entries
// [r][c + d] and [r + d][c] (c without bit d), a 2 x 2 block transpose at
// scale d; the rounds swap the bits of the row and column numbers one at a
// time. Each swap is a shuffle of two vectors (one or two instructions):
// 64 shuffles move AVX-512's 256 numbers, where loading and storing them one
// by one takes 512 accesses.
// Round d makes, of rows x and y = x + d: lane l of the new x is its own
// [l] (l without bit d) or y's [l - d]; lane l of the new y is x's [l + d]
// or its own [l]. __builtin_shufflevector takes lanes 0..W-1 from its first
// vector and W..2W-1 from its second (gcc 12 and clang); the lists below
// spell that rule out for each width.
#if VEC_FLOATS == 16
#define SWAP_X_8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define SWAP_Y_8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define SWAP_X_4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define SWAP_Y_4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define SWAP_X_2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define SWAP_Y_2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define SWAP_X_1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define SWAP_Y_1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#elif VEC_FLOATS == 8
#define SWAP_X_4 0, 1, 2, 3, 8, 9, 10, 11
#define SWAP_Y_4 4, 5, 6, 7, 12, 13, 14, 15
#define SWAP_X_2 0, 1, 8, 9, 4, 5, 12, 13
#define SWAP_Y_2 2, 3, 10, 11, 6, 7, 14, 15
#define SWAP_X_1 0, 8, 2, 10, 4, 12, 6, 14
#define SWAP_Y_1 1, 9, 3, 11, 5, 13, 7, 15
#else
#define SWAP_X_2 0, 1, 4, 5
#define SWAP_Y_2 2, 3, 6, 7
#define SWAP_X_1 0, 4, 2, 6
#define SWAP_Y_1 1, 5, 3, 7
#endif

// One round: every pair of rows (r, r + D), r without bit D.
#define TRANSPOSE_ROUND(rows, D)                                                 \
    _Pragma("GCC unroll 16") for (int r = 0; r < VEC_FLOATS; r++) if (!(r & (D))) { \
        const vec a = (rows)[r], b = (rows)[r + (D)];                            \
        (rows)[r] = __builtin_shufflevector(a, b, SWAP_X_##D);                   \
        (rows)[r + (D)] = __builtin_shufflevector(a, b, SWAP_Y_##D);             \
    }

static inline void transpose_block(vec rows[VEC_FLOATS]) {
    // (Unrolled completely, so the rows stay in registers.)
#if VEC_FLOATS == 16
    TRANSPOSE_ROUND(rows, 8)
#endif
#if VEC_FLOATS >= 8
    TRANSPOSE_ROUND(rows, 4)
#endif
    TRANSPOSE_ROUND(rows, 2)
    TRANSPOSE_ROUND(rows, 1)
}

// The loops of element-wise kernels run over vectors: element i of n in
// piece i / VEC_FLOATS, the last piece perhaps shorter. lanes_left: the
// elements of the piece at i; load_upto and store_upto: those elements (the
// lanes past them, 0 in a load, are not stored).
static inline int lanes_left(size_t n, size_t i) { return n - i < VEC_FLOATS ? (int)(n - i) : VEC_FLOATS; }
static inline vec load_upto(const float *x, int count) {
    return count == VEC_FLOATS ? load_vec(x) : load_tail(x, count, 0.0f);
}
static inline void store_upto(float *x, vec v, int count) {
    if (count == VEC_FLOATS) store_vec(x, v);
    else store_tail(x, v, count);
}

// |x| in each lane: the sign bit cleared.
static inline vec abs_vec(vec x) { return (vec)((ivec)x & 0x7fffffff); }

// ---------------------------------------------------------------------------
// Lane sums: a sum over a row, in 16 lanes. Lane i adds the entries
// j = i, i+16, ..., and the lanes are added at the end, lane 0 first. One
// running float would make every addition wait for the one before (and the
// compiler may not reorder float additions itself); 16 lanes make a 128-long
// row 8 vector additions. The order is fixed by n alone, so a row gives the
// same bits wherever it is, whatever thread sums it, and on every path: the
// 16 lanes are one AVX-512 vector, two AVX2 halves or four NEON quarters.
// Used by the softmax (softmax.h), attention's backward and LayerNorm.
#define LANE_PARTS (16 / VEC_FLOATS)

// Lane i is part[i / VEC_FLOATS][i % VEC_FLOATS].
typedef struct {
    vec part[LANE_PARTS];
} Lanes16;

static inline Lanes16 lanes16_fill(float x) {
    Lanes16 l;
    for (int p = 0; p < LANE_PARTS; p++) l.part[p] = splat(x);
    return l;
}

static inline float lane_at(Lanes16 l, int i) { return l.part[i / VEC_FLOATS][i % VEC_FLOATS]; }

// x[0..16) as lanes
static inline Lanes16 load16(const float *x) {
    Lanes16 l;
    for (int p = 0; p < LANE_PARTS; p++) l.part[p] = load_vec(x + p * VEC_FLOATS);
    return l;
}

// x[0..count) (count < 16) as lanes, the lanes past count "pad"; memory
// past x[count - 1] is never touched.
static inline Lanes16 load_tail16(const float *x, int count, float pad) {
    Lanes16 l;
    for (int p = 0; p < LANE_PARTS; p++) {
        const int here = count - p * VEC_FLOATS;
        l.part[p] = here >= VEC_FLOATS ? load_vec(x + p * VEC_FLOATS)
                    : here > 0         ? load_tail(x + p * VEC_FLOATS, here, pad)
                                       : splat(pad);
    }
    return l;
}

// Lane by lane: a + b, and a * b + c with one rounding (fma_vec).
static inline Lanes16 lanes16_add(Lanes16 a, Lanes16 b) {
    for (int p = 0; p < LANE_PARTS; p++) a.part[p] += b.part[p];
    return a;
}
static inline Lanes16 lanes16_fma(Lanes16 a, Lanes16 b, Lanes16 c) {
    for (int p = 0; p < LANE_PARTS; p++) c.part[p] = fma_vec(a.part[p], b.part[p], c.part[p]);
    return c;
}

// the 16 lanes of l added up, lane 0 first
static inline float sum16(Lanes16 l) {
    float sum = 0.0f;
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) sum += lane_at(l, i);
    return sum;
}

// lanes_by_row(block, lanes, r0, rows, p): block[c] = lane p * VEC_FLOATS
// + c of rows r0, r0 + 1, ... side by side (lane k of the vector: row r0 +
// k; rows past "rows" read as 0). One VEC_FLOATS x VEC_FLOATS transpose
// (transpose_block) turns a block of rows' lanes into a vector per lane, so
// a block of rows combines its lanes in whole vectors, a row per vector
// lane, instead of one float at a time.
static inline void lanes_by_row(vec block[VEC_FLOATS], const Lanes16 *lanes, int r0, int rows, int p) {
    for (int k = 0; k < VEC_FLOATS; k++) block[k] = r0 + k < rows ? lanes[r0 + k].part[p] : splat(0.0f);
    transpose_block(block);
}

// sums[r] = sum16(lanes[r]) for r < rows: the same additions in the same
// order (0 + lane 0 + lane 1 + ... + lane 15), for a block of rows at once,
// VEC_FLOATS rows to a vector (lanes_by_row). One sum16 is a chain of 16
// dependent additions (~50 cycles); here the rows' chains run side by side,
// and a vector add does a step of VEC_FLOATS of them. (Softmax over a block
// of short rows spent most of its time on these chains; one float at a time,
// through the stack, a 128 x 128 head's softmax took 5.6 us, now 4.1, on one
// Sapphire Rapids core, AVX-512.)
static inline void sum16_rows(float *sums, const Lanes16 *lanes, int rows) {
    for (int r0 = 0; r0 < rows; r0 += VEC_FLOATS) {
        vec total = splat(0.0f);
        for (int p = 0; p < LANE_PARTS; p++) {
            vec block[VEC_FLOATS];
            lanes_by_row(block, lanes, r0, rows, p);
            for (int c = 0; c < VEC_FLOATS; c++) total += block[c];
        }
        for (int k = 0; k < VEC_FLOATS && r0 + k < rows; k++) sums[r0 + k] = total[k];
    }
}

// x[0..n) added in lanes: lane i holds x[i] + x[i+16] + ..., in increasing j
static inline Lanes16 row_sum_lanes(const float *x, int n) {
    Lanes16 lanes = lanes16_fill(0.0f);
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes = lanes16_add(lanes, load16(x + j));
    if (j < n) lanes = lanes16_add(lanes, load_tail16(x + j, n - j, 0.0f));
    return lanes;
}

// sum over j < n of x[j]
static inline float row_sum(const float *x, int n) { return sum16(row_sum_lanes(x, n)); }

// sum over j < n of a[j] * b[j], in lanes: softmax's backward needs
// sum_i w_i dw_i (attention_backward).
static inline Lanes16 row_dot_lanes(const float *a, const float *b, int n) {
    Lanes16 lanes = lanes16_fill(0.0f);
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes = lanes16_fma(load16(a + j), load16(b + j), lanes);
    if (j < n) lanes = lanes16_fma(load_tail16(a + j, n - j, 0.0f), load_tail16(b + j, n - j, 0.0f), lanes);
    return lanes;
}
static inline float row_dot(const float *a, const float *b, int n) { return sum16(row_dot_lanes(a, b, n)); }

#endif
