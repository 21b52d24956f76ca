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
// Why it is fast: the ROWS x (16 * NV) block of out lives in ROWS * NV
// vector registers while k runs. Each k loads NV vectors of B's row k and
// broadcasts ROWS numbers of A into ROWS * NV multiply-adds; with at least
// 8 independent accumulators the multiply-adds overlap instead of waiting
// for each other's results.
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

// The vector tile: ROWS rows by 16 * NV columns, ROWS * NV <= 16. Always
// inlined with constant ROWS and NV, so the loops over them unroll and the
// accumulators become registers.
#define TILE_MAX_ROWS 16
#define TILE_MAX_NV 4
static inline __attribute__((always_inline)) void tile_vec(float *out, size_t ldo, StridedMatrix A, const float *B,
                                                           size_t ldb, int k0, int k1, int n0, int m0, TileStart start,
                                                           const int ROWS, const int NV) {
    vec16 acc[TILE_MAX_ROWS][TILE_MAX_NV];
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[r][v] = start.accumulate ? load16(out + (size_t)(n0 + r) * ldo + m0 + 16 * v)
                        : start.init_row ? load16(start.init_row + m0 + 16 * v)
                                         : (vec16){0};
    for (int k = k0; k < k1; k++) {
        const float *b_row = B + (size_t)k * ldb + m0;
        vec16 b[TILE_MAX_NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) {
            b[v] = load16(b_row + 16 * v);
            KEEP_IN_REGISTER(b[v]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < ROWS; r++) {
            const float a = strided_at(A, n0 + r, k);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[r][v] += a * b[v];  // fused: -ffp-contract=fast
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) store16(out + (size_t)(n0 + r) * ldo + m0 + 16 * v, acc[r][v]);
}

// The last cols < 16 columns of a tile (a head V = 83 wide ends in a tile
// 19 wide: a whole vector, then these 3), in one vector per row
// whose lanes past cols are never read from B or out nor written
// (load_tail16, store_tail16). Each lane is its column's chain of fused
// multiply-adds in increasing k, as in tile_any, so the bits are tile_any's;
// tile_any's single chain per number waits on each multiply-add in turn,
// ~16 times slower (at card L, the 19 columns took longer than the head's
// other 64).
static inline __attribute__((always_inline)) void tile_tail(float *out, size_t ldo, StridedMatrix A,
                                                            const float *B, size_t ldb, int k0, int k1, int n0,
                                                            int m0, int cols, TileStart start, const int ROWS) {
    vec16 acc[TILE_MAX_ROWS];
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++)
        acc[r] = start.accumulate ? load_tail16(out + (size_t)(n0 + r) * ldo + m0, cols, 0.0f)
                 : start.init_row ? load_tail16(start.init_row + m0, cols, 0.0f)
                                  : (vec16){0};
    for (int k = k0; k < k1; k++) {
        vec16 b = load_tail16(B + (size_t)k * ldb + m0, cols, 0.0f);
        KEEP_IN_REGISTER(b);
#pragma GCC unroll 16
        for (int r = 0; r < ROWS; r++) acc[r] += strided_at(A, n0 + r, k) * b;  // fused: -ffp-contract=fast
    }
#pragma GCC unroll 16
    for (int r = 0; r < ROWS; r++) store_tail16(out + (size_t)(n0 + r) * ldo + m0, acc[r], cols);
}

#endif
