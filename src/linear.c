// linear.c: y = x W^T + b, reference and fast versions (see linear.h).
#include "linear.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "simd.h"

// ---------------------------------------------------------------------------
// Reference versions: the math, nothing else.
//
// Every product is added with fmaf (fused multiply-add: x*y + z rounded
// once), here and in the fast versions. Left to itself the compiler fuses
// some additions and not others, and then the two versions, which add the
// same terms in the same order, would still differ in the last bit.

void linear_forward_reference(float *out, const float *inp, const float *weight, const float *bias, int N,
                              int C, int OC) {
    for (int n = 0; n < N; n++) {
        const float *inp_n = inp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            const float *weight_o = weight + (size_t)o * C;
            float sum = bias ? bias[o] : 0.0f;
            for (int c = 0; c < C; c++) sum = fmaf(inp_n[c], weight_o[c], sum);
            out[(size_t)n * OC + o] = sum;
        }
    }
}

void linear_backward_reference(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int N, int C, int OC) {
    for (int n = 0; n < N; n++) {
        const float *dout_n = dout + (size_t)n * OC;
        const float *inp_n = inp + (size_t)n * C;
        float *dinp_n = dinp + (size_t)n * C;
        for (int o = 0; o < OC; o++) {
            // out[n,o] = bias[o] + sum_c inp[n,c] * weight[o,c], so each term
            // passes dout[n,o] back to its two factors and to the bias.
            float d = dout_n[o];
            const float *weight_o = weight + (size_t)o * C;
            float *dweight_o = dweight + (size_t)o * C;
            for (int c = 0; c < C; c++) {
                dinp_n[c] = fmaf(d, weight_o[c], dinp_n[c]);
                dweight_o[c] = fmaf(d, inp_n[c], dweight_o[c]);
            }
            if (dbias) dbias[o] += d;
        }
    }
}

// ---------------------------------------------------------------------------
// Fast versions. All three products are one shape of loop:
//     out[n,m] (+)= sum over k of A(n,k) * Bmat[k,m]
// with Bmat row-major [K,M] and A read through strides, so A can be a matrix
// or a transposed one:
//     forward:  out = inp @ weight_t          A = inp [N,C]      Bmat = weight_t [C,OC]
//     dinp:     dinp += dout @ weight         A = dout [N,OC]    Bmat = weight [OC,C]
//     dweight:  dweight += dout^T @ inp       A = dout^T [OC,N]  Bmat = inp [N,C]
//
// Speed comes from three levels of reuse:
// - registers: a TILE_ROWS x TILE_COLS block of out (16 AVX-512 vectors) is
//   held in registers while k runs, so each Bmat load feeds TILE_ROWS FMAs;
// - cache: k runs in blocks of K_BLOCK, so the TILE_COLS-wide slice of Bmat
//   for one block (K_BLOCK * TILE_COLS floats, 64 KB) stays in L2 while all
//   the row tiles of a chunk use it (block sizes measured best on the
//   S, M and L shapes of `make bench`);
// - threads: a work item is one column tile of one CHUNK_ROWS-row chunk,
//   handed out dynamically.
// Each out element still adds its k terms in increasing order (the block
// boundaries only store and reload the partial sum), so the result does not
// depend on the number of threads, and matches the reference loops.

#define TILE_ROWS 4
#define TILE_COLS 64
#define CHUNK_ROWS 64
#define K_BLOCK 256

typedef struct {
    const float *data;
    size_t row_stride, col_stride;  // A(n,k) = data[n * row_stride + k * col_stride]
} StridedMatrix;

// One tile: out[n0.., m0..] for "rows" x "cols" entries, adding the terms
// k in [k0, k1). The partial sums start from "out" itself (when "from_out"),
// or from "init_row" (a bias; zeros when NULL). This plain version serves
// the ragged edge tiles; full tiles take matmul_tile_full below.
static inline void matmul_tile(float *out, StridedMatrix A, const float *Bmat, size_t M, int k0, int k1, int n0,
                               int m0, int rows, int cols, bool from_out, const float *init_row) {
    float acc[TILE_ROWS][TILE_COLS];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++)
            acc[r][j] = from_out ? out[(size_t)(n0 + r) * M + m0 + j] : (init_row ? init_row[m0 + j] : 0.0f);
    for (int k = k0; k < k1; k++) {
        const float *b_row = Bmat + (size_t)k * M + m0;
        for (int r = 0; r < rows; r++) {
            float a = A.data[(size_t)(n0 + r) * A.row_stride + (size_t)k * A.col_stride];
            for (int j = 0; j < cols; j++) acc[r][j] = fmaf(a, b_row[j], acc[r][j]);
        }
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) out[(size_t)(n0 + r) * M + m0 + j] = acc[r][j];
}

// The full tile, written with GCC/clang vector types so the inner loop is
// exactly 4 loads of Bmat, TILE_ROWS broadcasts of A and 16 fused
// multiply-adds into 16 accumulator registers. The arithmetic is the same
// as matmul_tile's; only the instructions are chosen by hand.
static void matmul_tile_full(float *out, StridedMatrix A, const float *Bmat, size_t M, int k0, int k1, int n0,
                             int m0, bool from_out, const float *init_row) {
    vec16 acc[TILE_ROWS][TILE_COLS / 16];
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < TILE_COLS / 16; v++)
            acc[r][v] = from_out   ? load16(out + (size_t)(n0 + r) * M + m0 + 16 * v)
                        : init_row ? load16(init_row + m0 + 16 * v)
                                   : (vec16){0};
    for (int k = k0; k < k1; k++) {
        const float *b_row = Bmat + (size_t)k * M + m0;
        vec16 b[TILE_COLS / 16];
        for (int v = 0; v < TILE_COLS / 16; v++) {
            b[v] = load16(b_row + 16 * v);
            KEEP_IN_REGISTER(b[v]);
        }
        for (int r = 0; r < TILE_ROWS; r++) {
            const float a = A.data[(size_t)(n0 + r) * A.row_stride + (size_t)k * A.col_stride];
            for (int v = 0; v < TILE_COLS / 16; v++) acc[r][v] += a * b[v];  // fused: -ffp-contract=fast
        }
    }
    for (int r = 0; r < TILE_ROWS; r++)
        for (int v = 0; v < TILE_COLS / 16; v++) store16(out + (size_t)(n0 + r) * M + m0 + 16 * v, acc[r][v]);
}

static inline int min_int(int a, int b) { return a < b ? a : b; }

// Below this many multiply-adds (one row of sampling's forward pass, say),
// waking the other threads costs more than the work.
#define MIN_PARALLEL_WORK (1 << 18)

// out[N,M] (+)= A(N,K) @ Bmat[K,M]; "accumulate" adds to out, otherwise out
// starts from init_row (or zeros).
static void matmul(float *out, StridedMatrix A, const float *Bmat, int N, int K, int M, bool accumulate,
                   const float *init_row) {
    int row_chunks = (N + CHUNK_ROWS - 1) / CHUNK_ROWS;
    int col_tiles = (M + TILE_COLS - 1) / TILE_COLS;
    // Dynamic scheduling: work items differ in cost (a ragged edge tile of
    // the head, V = 65 columns, is one column wide), and a static split can
    // hand one thread all the full tiles. Which thread computes a tile does
    // not change its bits.
#pragma omp parallel for collapse(2) schedule(dynamic) if ((size_t)N * K * M >= MIN_PARALLEL_WORK)
    for (int ct = 0; ct < col_tiles; ct++) {
        for (int rc = 0; rc < row_chunks; rc++) {
            int m0 = ct * TILE_COLS, cols = min_int(TILE_COLS, M - m0);
            int chunk_end = min_int(N, (rc + 1) * CHUNK_ROWS);
            for (int k0 = 0; k0 < K || k0 == 0; k0 += K_BLOCK) {
                int k1 = min_int(K, k0 + K_BLOCK);
                bool from_out = accumulate || k0 > 0;
                for (int n0 = rc * CHUNK_ROWS; n0 < chunk_end; n0 += TILE_ROWS) {
                    int rows = min_int(TILE_ROWS, chunk_end - n0);
                    if (rows == TILE_ROWS && cols == TILE_COLS)
                        matmul_tile_full(out, A, Bmat, M, k0, k1, n0, m0, from_out, init_row);
                    else  // a ragged edge tile: same arithmetic, runtime bounds
                        matmul_tile(out, A, Bmat, M, k0, k1, n0, m0, rows, cols, from_out, init_row);
                }
            }
        }
    }
}

void matmul_tile_rows(float *out, const float *A, size_t lda, const float *Bmat, int M, int K, int n0, int rows,
                      int m0, int cols) {
    StridedMatrix a = {A, lda, 1};
    if (rows == TILE_ROWS && cols == TILE_COLS) matmul_tile_full(out, a, Bmat, (size_t)M, 0, K, n0, m0, false, NULL);
    else matmul_tile(out, a, Bmat, (size_t)M, 0, K, n0, m0, rows, cols, false, NULL);
}

void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC) {
#pragma omp parallel for schedule(static)
    for (int o = 0; o < OC; o++)
        for (int c = 0; c < C; c++) weight_t[(size_t)c * OC + o] = weight[(size_t)o * C + c];
}

void linear_forward_transposed(float *out, const float *inp, const float *weight_t, const float *bias, int N, int C,
                               int OC) {
    StridedMatrix A = {inp, (size_t)C, 1};
    matmul(out, A, weight_t, N, C, OC, false, bias);
}

void linear_forward(float *out, const float *inp, const float *weight, const float *bias, float *weight_t,
                    int N, int C, int OC) {
    linear_transpose_weight(weight_t, weight, C, OC);
    linear_forward_transposed(out, inp, weight_t, bias, N, C, OC);
}

void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC) {
    StridedMatrix dout_rows = {dout, (size_t)OC, 1};  // dout as [N,OC]
    StridedMatrix dout_cols = {dout, 1, (size_t)OC};  // dout^T as [OC,N]
    matmul(dinp, dout_rows, weight, N, OC, C, true, NULL);
    matmul(dweight, dout_cols, inp, OC, N, C, true, NULL);
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float sum = dbias[o];
            for (int n = 0; n < N; n++) sum += dout[(size_t)n * OC + o];
            dbias[o] = sum;
        }
    }
}
