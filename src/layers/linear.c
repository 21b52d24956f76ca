// linear.c: y = x W^T + b, reference and fast versions (see linear.h).
#include "linear.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "matmul.h"

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

// Backward, derived. Write x = inp, W = weight, b = bias, dy = dout. One
// output number is
//   out[n,o] = b[o] + sum over c of x[n,c] W[o,c]
// so its slopes are
//   d out[n,o] / d x[n,c] = W[o,c],   d out[n,o] / d W[o,c] = x[n,c],   d out[n,o] / d b[o] = 1
// and the chain rule sums each over the outputs the number reaches: x[n,c]
// reaches every o of row n; W[o,c] and b[o] reach every row n:
//   (1) dx[n,c]  = sum over o of dy[n,o] W[o,c]     dx = dy W        (written)
//   (2) dW[o,c] += sum over n of dy[n,o] x[n,c]     dW += dy^T x     (added to)
//   (3) db[o]   += sum over n of dy[n,o]                             (added to)
// The loops below visit each (n, o) once and add that term of all three sums.
void linear_backward_reference(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int N, int C, int OC) {
    for (int n = 0; n < N; n++) {
        const float *dout_n = dout + (size_t)n * OC;
        const float *inp_n = inp + (size_t)n * C;
        float *dinp_n = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) dinp_n[c] = 0.0f;  // (1) is written: start it from 0
        for (int o = 0; o < OC; o++) {
            float d = dout_n[o];
            const float *weight_o = weight + (size_t)o * C;
            float *dweight_o = dweight + (size_t)o * C;
            for (int c = 0; c < C; c++) {
                dinp_n[c] = fmaf(d, weight_o[c], dinp_n[c]);    // (1)
                dweight_o[c] = fmaf(d, inp_n[c], dweight_o[c]);  // (2)
            }
            if (dbias) dbias[o] += d;  // (3)
        }
    }
}

// ---------------------------------------------------------------------------
// Fast versions: the three products on matmul.h's engine.

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
