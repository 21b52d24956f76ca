// linear.c: y = x W^T + b, the reference versions: the definition as plain
// loops (see linear.h). The fast versions, the same sums on the matmul
// engine, are in linear_fast.c (file 17).
#include "linear.h"

#include <math.h>
#include <stddef.h>

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
