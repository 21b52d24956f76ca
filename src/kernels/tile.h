// tile.h: the register tile, the one loop behind every fast product in
// tinygpt (linear_fast.c's three matmuls and attention_fast.c's six: two forward,
// four backward).
//
// Reading order: file 17, after simd.h. One tile computes
//   out[n, m] (+)= sum over k in [k0, k1) of A(n, k) * B[k, m]
//   for n in [n0, n0 + rows), m in [m0, m0 + cols)
// adding the terms in increasing k, each with one fused multiply-add, so a
// tile's result does not depend on how the caller cuts the work.
//
// A is read through strides, so one kernel serves a matrix and a transposed
// one. B and out are row-major with their own row strides (ldb, ldo), so
// both can be slices of a wider tensor, such as one head's channels of qkv.
//
// Why it is fast: the ROWS x COLS block of out lives in ROWS * NV vector
// registers (NV = COLS / VEC_FLOATS) while k runs. Each k loads NV vectors
// of B's row k and broadcasts ROWS numbers of A into ROWS * NV
// multiply-adds; with at least 8 independent accumulators the multiply-adds
// overlap instead of waiting for each other's results.
#ifndef TINYGPT_TILE_H
#define TINYGPT_TILE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "simd.h"

// A(n, k) = data[n * row_stride + k * col_stride]
typedef struct {
    const float *data;
    size_t row_stride, col_stride;
} StridedMatrix;

static inline float strided_at(StridedMatrix a, int n, int k) {
    return a.data[(size_t)n * a.row_stride + (size_t)k * a.col_stride];
}

// Where a tile's partial sums start: the values already in out
// ("accumulate"), else init_row[m] (a bias), else zero.
typedef struct {
    bool accumulate;
    const float *init_row;
} TileStart;

// The plain tile: any rows and cols, one float at a time. The definition
// of the vector tiles below, which must give its bits (test_tile holds
// them to it); no fast product runs on it any more: the columns past a
// tile's whole vectors run in tile_tail, a vector each.
static inline void tile_any(float *out, size_t ldo, StridedMatrix A, const float *B, size_t ldb, int k0, int k1,
                            int n0, int rows, int m0, int cols, TileStart start) {
    for (int r = 0; r < rows; r++) {
        float *out_row = out + (size_t)(n0 + r) * ldo + m0;
        for (int j = 0; j < cols; j++) {
            float sum = start.accumulate ? out_row[j] : start.init_row ? start.init_row[m0 + j] : 0.0f;
            for (int k = k0; k < k1; k++) sum = fmaf(strided_at(A, n0 + r, k), B[(size_t)k * ldb + m0 + j], sum);
            out_row[j] = sum;
        }
    }
}

// The vector tile: ROWS rows by COLS columns (COLS a multiple of
// VEC_FLOATS), held in ROWS * COLS / VEC_FLOATS vector registers. Always
// inlined with constant ROWS and COLS, so the loops over them unroll and the
// accumulators become registers; a shape must leave registers for B's row
// and the broadcast, or the compiler keeps accumulators on the stack and the
// tile runs at a few percent of its speed (TILE_SHAPES below).
#define TILE_MAX_ROWS 16
#define TILE_MAX_VECS 8  // of one row: 64 columns of AVX-512, 32 of NEON's
static inline __attribute__((always_inline)) void tile_vec(float *out, size_t ldo, StridedMatrix A, const float *B,
                                                           size_t ldb, int k0, int k1, int n0, int m0, TileStart start,
                                                           const int ROWS, const int COLS) {
    const int NV = COLS / VEC_FLOATS;
    vec acc[TILE_MAX_ROWS][TILE_MAX_VECS];
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++)
            acc[r][v] = start.accumulate ? load_vec(out + (size_t)(n0 + r) * ldo + m0 + VEC_FLOATS * v)
                        : start.init_row ? load_vec(start.init_row + m0 + VEC_FLOATS * v)
                                         : splat(0.0f);
    for (int k = k0; k < k1; k++) {
        const float *b_row = B + (size_t)k * ldb + m0;
        vec b[TILE_MAX_VECS];
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) {
            b[v] = load_vec(b_row + VEC_FLOATS * v);
            KEEP_IN_REGISTER(b[v]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < ROWS; r++) {
            const float a = strided_at(A, n0 + r, k);
#pragma GCC unroll 8
            for (int v = 0; v < NV; v++) acc[r][v] = fma_vec(splat(a), b[v], acc[r][v]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 8
        for (int v = 0; v < NV; v++) store_vec(out + (size_t)(n0 + r) * ldo + m0 + VEC_FLOATS * v, acc[r][v]);
}

// The last cols < VEC_FLOATS columns of a tile (a head V = 83 wide ends in
// 3 such columns on AVX-512 and AVX2), in one vector per row whose lanes
// past cols are never read from B or out nor written (load_tail,
// store_tail). Each lane is its column's chain of fused multiply-adds in
// increasing k, as in tile_any, so the bits are tile_any's; tile_any's
// single chain per number waits on each multiply-add in turn, ~16 times
// slower (at card L, the 19 columns took longer than the head's other 64).
static inline __attribute__((always_inline)) void tile_tail(float *out, size_t ldo, StridedMatrix A,
                                                            const float *B, size_t ldb, int k0, int k1, int n0,
                                                            int m0, int cols, TileStart start, const int ROWS) {
    vec acc[TILE_MAX_ROWS];
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++)
        acc[r] = start.accumulate ? load_tail(out + (size_t)(n0 + r) * ldo + m0, cols, 0.0f)
                 : start.init_row ? load_tail(start.init_row + m0, cols, 0.0f)
                                  : splat(0.0f);
    for (int k = k0; k < k1; k++) {
        vec b = load_tail(B + (size_t)k * ldb + m0, cols, 0.0f);
        KEEP_IN_REGISTER(b);
#pragma GCC unroll 16
        for (int r = 0; r < ROWS; r++) acc[r] = fma_vec(splat(strided_at(A, n0 + r, k)), b, acc[r]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++) store_tail(out + (size_t)(n0 + r) * ldo + m0, acc[r], cols);
}

// TILE_SHAPES: the tiles each path's products run on, ROWS x COLS, as many
// accumulators as leave registers for B's row and the broadcast of A:
//   TALL     A read as it lies (forward, dinp), the bulk of a product;
//   PAIR     the rows a chunk has left past its TALL tiles, two at a time;
//   STRIP    A transposed (dweight), read from matmul.c's strips, STRIP rows high;
//   EDGE     the rows and columns left over (and attention's score tiles).
// AVX-512 (32 registers): TALL 6 x 64 (24 accumulators), PAIR 2 x 64 (8),
// STRIP 8 x 32 and EDGE 4 x 64 (16). AVX2 (16 registers): TALL 6 x 16 (12,
// BLIS's Haswell shape), PAIR 2 x 32 (8), the strips 6 x 16 too, EDGE 4 x 16
// (8). NEON (32 registers of 4): 5 x 16 (20; its fmla takes A's number
// from a register of its own, 5 more, and B's row is 4), 2 x 32 (16),
// strips 5 x 16, EDGE 4 x 16 (16). Generic (assume 16 registers of 4, and perhaps no FMA,
// whose multiply and add need a register between them): 4 x 8 for all (8),
// PAIR 2 x 16. PAIR has 8 accumulators or more, the fewest that keep two
// FMA units busy.
#if PATH_AVX512
#define TALL_ROWS 6
#define TALL_COLS 64
#define PAIR_COLS 64
#define STRIP_ROWS 8
#define STRIP_COLS 32
#define EDGE_ROWS 4
#define EDGE_COLS 64
#elif PATH_AVX2
#define TALL_ROWS 6
#define TALL_COLS 16
#define PAIR_COLS 32
#define STRIP_ROWS 6
#define STRIP_COLS 16
#define EDGE_ROWS 4
#define EDGE_COLS 16
#elif PATH_NEON
#define TALL_ROWS 5
#define TALL_COLS 16
#define PAIR_COLS 32
#define STRIP_ROWS 5
#define STRIP_COLS 16
#define EDGE_ROWS 4
#define EDGE_COLS 16
#else
#define TALL_ROWS 4
#define TALL_COLS 8
#define PAIR_COLS 16
#define STRIP_ROWS 4
#define STRIP_COLS 8
#define EDGE_ROWS 4
#define EDGE_COLS 8
#endif

#endif
