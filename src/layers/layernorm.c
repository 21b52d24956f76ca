// layernorm.c: LayerNorm without bias, the reference versions, forward
// and backward derived (see layernorm.h); then GPT-2's bias, its step 6. The fast versions are in
// layernorm_fast.c (file 18).
#include "layernorm.h"

#include <math.h>
#include <stddef.h>

// ---------------------------------------------------------------------------
// Reference versions: the five steps of layernorm.h as written, one running
// sum at a time. Read these first.

void layernorm_forward_reference(float *out, float *mean, float *rstd, const float *inp, const float *weight, int N,
                                 int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float sum = 0.0f;
        for (int c = 0; c < C; c++) sum += x[c];
        const float m = sum / (float)C;  // 1.
        float squares = 0.0f;
        for (int c = 0; c < C; c++) squares += (x[c] - m) * (x[c] - m);
        const float r = 1.0f / sqrtf(squares / (float)C + LAYERNORM_EPS);  // 2-3.
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] = (x[c] - m) * r * weight[c];  // 4-5.
        mean[n] = m;
        rstd[n] = r;
    }
}

// Backward, derived, for one row x[C] with r = rstd, w = weight, dy = dout:
// layernorm.h's five steps in reverse.
//   5. y[c] = xhat[c] w[c]:
//        dw[c]   += dy[c] xhat[c]           summed over the rows (added to)
//        dxhat[c] = dy[c] w[c]
//   4-1. xhat[c] = (x[c] - mean) r depends on every x[j] of the row: directly,
//      through the mean, and through r. With
//        d mean / d x[j] = 1/C
//        d var / d x[j]  = 2 (x[j] - mean) / C     (the mean's own term sums to 0)
//        d r / d x[j]    = -r^3 / 2 * d var / d x[j] = -r^2 xhat[j] / C
//      the product rule on (x[c] - mean) * r gives
//        d xhat[c] / d x[j] = r ([c == j] - 1/C) + (x[c] - mean) (-r^2 xhat[j] / C)
//                           = r ([c == j] - 1/C - xhat[c] xhat[j] / C)
//      and summing over c against dxhat[c], three terms:
//        dx[j] = r (dxhat[j]                           the direct path
//                   - mean over c of dxhat[c]          through the mean
//                   - xhat[j] mean over c of dxhat[c] xhat[c])   through the variance
//      That is dxhat with the parts that would only shift the row or scale
//      it taken out: neither changes xhat (but for eps), so neither can
//      change the loss.
//   For the rows at once, with * elementwise and rowmean(X) each row's mean:
//        dW += colsum(dY * Xhat)
//        dX += r * (dXhat - rowmean(dXhat) - Xhat * rowmean(dXhat * Xhat)),  dXhat = dY * w
// dx is added to dinp, not written: the input is the residual stream, whose
// gradient also collects the skip path's (layernorm.h).
void layernorm_backward_reference(float *dinp, float *dweight, const float *dout, const float *inp,
                                  const float *weight, const float *mean, const float *rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float dxhat_sum = 0.0f, dxhat_xhat_sum = 0.0f;
        for (int c = 0; c < C; c++) {
            const float xhat = (x[c] - mean[n]) * rstd[n];
            dxhat_sum += dy[c] * weight[c];              // sum of dxhat (5. dxhat = dy w)
            dxhat_xhat_sum += dy[c] * weight[c] * xhat;  // sum of dxhat xhat
            dweight[c] += dy[c] * xhat;                  // 5. dw
        }
        for (int c = 0; c < C; c++) {
            const float xhat = (x[c] - mean[n]) * rstd[n];
            const float dxhat = dy[c] * weight[c];
            // 4-1. the three terms
            dinp[(size_t)n * C + c] += rstd[n] * (dxhat - dxhat_sum / (float)C - xhat * dxhat_xhat_sum / (float)C);
        }
    }
}

// ---------------------------------------------------------------------------
// GPT-2's bias (layernorm.h, step 6). Rows are independent; the backward's
// sum runs over the rows in order, so its bits do not depend on threads.

void layernorm_bias_forward(float *out, const float *bias, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) out[(size_t)n * C + c] += bias[c];
}

void layernorm_bias_backward(float *dbias, const float *dout, int N, int C) {
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) dbias[c] += dout[(size_t)n * C + c];
}
