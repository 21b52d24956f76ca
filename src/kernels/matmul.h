// matmul.h: the matrix-multiply engine: register tiles (tile.h) cut over
// cache blocks and OpenMP threads.
//
// Reading order: file 17, after tile.h; linear_fast.c (the layer) and
// attention_fast.c (its T x T score tiles) both call it, so neither reaches into
// the other. Every product adds its k terms in increasing order, whatever
// the tiling or the thread count, so results are reproducible bit for bit.
#ifndef TINYGPT_MATMUL_H
#define TINYGPT_MATMUL_H

#include <stdbool.h>
#include <stddef.h>

#include "parallel.h"
#include "tile.h"

// Below this many multiply-adds (one row of a small model's sampling, say),
// waking the other threads costs more than the work: such products run on
// the calling thread alone (here, and linear_forward_rows).
#define MIN_PARALLEL_WORK (1 << 18)

// The engine runs k in blocks (matmul.c), each block's rows of Bmat copied
// into a panel that must stay in L1. matmul_k_block_for: the depth for an
// L1 data cache of "l1_data_bytes" (0: unknown), the panel at most two
// thirds of it, in multiples of 16, from 64 to MATMUL_K_BLOCK_MAX. The
// depth is MATMUL_K_BLOCK_MAX until matmul_set_k_block (1 to
// MATMUL_K_BLOCK_MAX) sets it, once, before the products run: as tinygpt
// starts, for this CPU (main.c), or in a test. No product's bits depend on
// it. matmul_k_block: the depth now.
#define MATMUL_K_BLOCK_MAX 128
int matmul_k_block_for(long l1_data_bytes);
void matmul_set_k_block(int depth);
int matmul_k_block(void);

// out[N,M] (+)= A(N,K) @ Bmat[K,M], A read through its strides (a matrix or a
// transposed one). "accumulate" adds to out; otherwise each row of out starts
// from init_row[M] (a bias) or, when init_row is NULL, from zero.
void matmul(float *out, StridedMatrix A, const float *Bmat, int N, int K, int M, bool accumulate,
            const float *init_row);

// out[N,M] = A(N,K) @ Bt[M,K]^T (+ init_row[M]): the same product with Bmat
// given as its transpose, row-major (a linear layer's weight [OC,C], so
// out = inp @ weight^T + bias), read turned into the engine's panels. Each
// number is the sum matmul would give it on Bt transposed.
void matmul_turned(float *out, StridedMatrix A, const float *Bt, int N, int K, int M, const float *init_row);

// Two independent products (neither reads the other's out), as two calls of
// matmul without a bias, but in one parallel region whose threads share the
// work items of both: one start and one wait of the threads instead of two
// (linear_backward's dinp and dweight).
void matmul_pair(float *out1, StridedMatrix A1, const float *Bmat1, int N1, int K1, int M1, bool accumulate1,
                 float *out2, StridedMatrix A2, const float *Bmat2, int N2, int K2, int M2, bool accumulate2);

// One tile of rows <= 4 by cols <= 64 of out[.,M] = A @ Bmat,
//   out[n,m] = sum over k < K of A[n*lda + k] * Bmat[k*M + m]
// for n in [n0, n0+rows), m in [m0, m0+cols), each sum in increasing k.
// attention_fast.c computes its causal score tiles with it, one tile at a time.
void matmul_tile_rows(float *out, const float *A, size_t lda, const float *Bmat, int M, int K, int n0, int rows,
                      int m0, int cols);

// The same tile with everything said: out's rows ldo floats apart, A read
// through its strides, B[k, m] at B[k * ldb + m], k in [k0, k1), and the
// tile's start (tile.h):
//   out[n,m] (+)= sum over k in [k0, k1) of A(n,k) * B[k,m]
// attention_fast.c's head products for heads the size of no vector tile
// (HS not 16, 32, 48 or 64) run on it, 64 columns at a time.
void matmul_tile_strided(float *out, size_t ldo, StridedMatrix A, const float *B, size_t ldb, int k0, int k1, int n0,
                         int rows, int m0, int cols, TileStart start);

#endif
