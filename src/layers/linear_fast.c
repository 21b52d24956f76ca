// linear_fast.c: y = x W^T + b, the fast versions (see linear.h): the three
// products of linear_backward_reference's derivation, (1) dinp = dout W,
// (2) dW += dout^T x and (3) db += the column sums of dout, on matmul.h's
// engine.
//
// Reading order: file 17, after matmul.c, the engine, and linear.c (file 4),
// the loops these must equal. Why the trick is exact: each output is the
// same fmaf chain over k, in the same order, as the reference's (tile.h), so
// the two agree to the bit (test_model.c checks it end to end).
#include <stdbool.h>
#include <stddef.h>

#include "linear.h"
#include "matmul.h"

static inline int min_int(int a, int b) { return a < b ? a : b; }

// In 16 x 16 blocks: a plain row-by-row transpose writes each number a
// whole row of weight_t away from the last, a new cache line every time;
// within a block, the 16 lines read and the 16 written stay in L1.
// The blocks are shared among the threads of the caller's parallel region
// (an orphaned `omp for`; alone, one thread does them all), with no wait at
// the end: the model transposes a block's four matrices in one region
// (transpose_block in model.c), not four.
#define TRANSPOSE_BLOCK 16
void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC) {
#pragma omp for schedule(static) nowait
    for (int o0 = 0; o0 < OC; o0 += TRANSPOSE_BLOCK) {
        const int o1 = min_int(OC, o0 + TRANSPOSE_BLOCK);
        for (int c0 = 0; c0 < C; c0 += TRANSPOSE_BLOCK) {
            const int c1 = min_int(C, c0 + TRANSPOSE_BLOCK);
            for (int c = c0; c < c1; c++)
                for (int o = o0; o < o1; o++) weight_t[(size_t)c * OC + o] = weight[(size_t)o * C + c];
        }
    }
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
    matmul_pair(dinp, dout_rows, weight, N, OC, C, false,     // (1) dinp = dout @ weight
                dweight, dout_cols, inp, OC, N, C, true);    // (2) dweight += dout^T @ inp
    if (dbias) {
        // (3) dbias[o] += sum over n of dout[n,o], in runs of 64 outputs: each
        // run reads dout row by row (a column at a time would touch a new
        // cache line for every number) and adds across the run in vectors.
#pragma omp parallel for schedule(static)
        for (int o0 = 0; o0 < OC; o0 += 64) {
            const int width = min_int(OC - o0, 64);
            float sum[64];
            for (int o = 0; o < width; o++) sum[o] = dbias[o0 + o];
            for (int n = 0; n < N; n++)
                for (int o = 0; o < width; o++) sum[o] += dout[(size_t)n * OC + o0 + o];
            for (int o = 0; o < width; o++) dbias[o0 + o] = sum[o];
        }
    }
}
