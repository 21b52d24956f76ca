// rmsnorm.c: RMSNorm with a weight, forward and backward derived (see
// rmsnorm.h).
#include "rmsnorm.h"

#include <math.h>
#include <stddef.h>

// Below this many numbers (a row or a few, when sampling), waking the other
// threads costs more than the work. The rows are shared among the threads;
// each row's sums run in the same order on any number of them.
#define MIN_PARALLEL_WORK (1 << 15)
#define CHANNEL_RUN 64

// The multiply-adds of this file are said (fmaf), not left to the
// compiler's -ffp-contract=fast: in dy w - xhat m, which of the two
// products is fused with the subtraction is its choice, and gcc chose one
// for x86 and the other for aarch64, whose trained weights then came 1e-7
// apart. Said, they are the same bits on every CPU (make arm-check).
// (QK-norm's backward sum was left to it until 2026-11-29: gcc multiplied
// in vectors and added the products one at a time unfused, but fused the
// last HS mod the vector's width, so the bits hung on the vector width.)

// A row's steps 1-4 once its sum of squares is known (rmsnorm.h): r = 1 /
// sqrt(squares / C + eps), returned, and out[C] = x[C] * r * weight[C];
// without a weight (NULL) out = x * r, the same bits as a weight of ones.
float rmsnorm_scale_row(float *out, const float *x, const float *weight, float squares, int C) {
    const float r = 1.0f / sqrtf(squares / (float)C + RMSNORM_EPS);  // 1-2.
    if (weight)
        for (int c = 0; c < C; c++) out[c] = x[c] * r * weight[c];  // 3-4.
    else
        for (int c = 0; c < C; c++) out[c] = x[c] * r;  // 3. (4. has no weight)
    return r;
}

// One row: its sum of squares, one running sum in increasing c, then the rest.
static float rmsnorm_row(float *out, const float *x, const float *weight, int C) {
    float squares = 0.0f;
    for (int c = 0; c < C; c++) squares = fmaf(x[c], x[c], squares);
    return rmsnorm_scale_row(out, x, weight, squares, C);
}

// out[N,C] = inp[N,C] * rstd[N] * weight[C], rstd[N] = 1 / sqrt(sum over c of inp[n,c]^2 / C + eps)
void rmsnorm_forward_reference(float *out, float *rstd, const float *inp, const float *weight, int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= MIN_PARALLEL_WORK)
    for (int n = 0; n < N; n++) rstd[n] = rmsnorm_row(out + (size_t)n * C, inp + (size_t)n * C, weight, C);
}

// Backward, derived, for one row x[C] with r = rstd, w = weight, dy = dout:
// rmsnorm.h's four steps in reverse (LayerNorm's derivation in
// layernorm.c, with the mean gone).
//   4. y[c] = xhat[c] w[c]:
//        dw[c]   += dy[c] xhat[c]           summed over the rows (added to)
//        dxhat[c] = dy[c] w[c]
//   3-1. xhat[c] = x[c] r depends on every x[j] of the row: directly, and
//      through r. With
//        d ms / d x[j] = 2 x[j] / C
//        d r / d x[j]  = -r^3 / 2 * d ms / d x[j] = -r^2 xhat[j] / C
//      the product rule on x[c] * r gives
//        d xhat[c] / d x[j] = r [c == j] + x[c] (-r^2 xhat[j] / C)
//                           = r ([c == j] - xhat[c] xhat[j] / C)
//      and summing over c against dxhat[c], two terms:
//        dx[j] = r (dxhat[j]                                    the direct path
//                   - xhat[j] mean over c of dxhat[c] xhat[c])  through the scale
//      That is dxhat with the part that would only scale the row taken
//      out: scaling x does not change xhat (but for eps), so it cannot
//      change the loss. LayerNorm's backward also takes out the part that
//      would shift the row; RMSNorm's output does change with a shift.
//   For the rows at once, with * elementwise and rowmean(X) each row's mean:
//        dW += colsum(dY * Xhat)      dX += r * (dXhat - Xhat * rowmean(dXhat * Xhat)),  dXhat = dY * w
// dx is added to dinp, not written: the input is the residual stream
// (rmsnorm.h). Two passes, each shared among the threads: dx row by row,
// then dw channel by channel (rmsnorm_weight_grad).

// 3-1. for one row once its sum of dxhat xhat is known:
// dx[C] += r (dy w - xhat mean), xhat = x r, mean = dxhat_xhat_sum / C.
void rmsnorm_dx_row(float *dx, const float *x, const float *dy, const float *weight, float r, float dxhat_xhat_sum,
                    int C) {
    const float dxhat_xhat_mean = dxhat_xhat_sum / (float)C;
    for (int c = 0; c < C; c++) {
        const float xhat = x[c] * r;
        dx[c] = fmaf(r, fmaf(dy[c], weight[c], -(xhat * dxhat_xhat_mean)), dx[c]);  // 3-1. the two terms
    }
}

void rmsnorm_backward_reference(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                                const float *rstd, int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= MIN_PARALLEL_WORK)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float dxhat_xhat_sum = 0.0f;
        for (int c = 0; c < C; c++)
            dxhat_xhat_sum = fmaf(dy[c] * weight[c], x[c] * rstd[n], dxhat_xhat_sum);  // sum of dxhat xhat (4. dxhat = dy w)
        rmsnorm_dx_row(dinp + (size_t)n * C, x, dy, weight, rstd[n], dxhat_xhat_sum, C);
    }
    rmsnorm_weight_grad(dweight, dout, inp, rstd, N, C);
}

// 4. dw, each channel's sum over the rows in row order, so the threads
// never add to the same dw[c]; in runs of CHANNEL_RUN channels, read row by
// row (a column at a time would touch a new cache line for every number).
void rmsnorm_weight_grad(float *dweight, const float *dout, const float *inp, const float *rstd, int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= MIN_PARALLEL_WORK)
    for (int c0 = 0; c0 < C; c0 += CHANNEL_RUN) {
        const int width = C - c0 < CHANNEL_RUN ? C - c0 : CHANNEL_RUN;
        float dw[CHANNEL_RUN];
        for (int c = 0; c < width; c++) dw[c] = dweight[c0 + c];
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * C + c0, *dy = dout + (size_t)n * C + c0;
            for (int c = 0; c < width; c++) dw[c] = fmaf(dy[c], x[c] * rstd[n], dw[c]);  // 4. dw
        }
        for (int c = 0; c < width; c++) dweight[c0 + c] = dw[c];
    }
}

// qk_norm_forward_reference: rmsnorm_forward_reference without a weight over each row's 2NH
// heads of q and k, in place (rmsnorm.h). One parallel loop over the rows,
// each head a rmsnorm_row (through rmsnorm_forward_reference, every row's call opened
// a parallel region of its own: ~4,800 a step of the default gpt, each a
// futex call, ~10% of the step).
void qk_norm_forward_reference(float *qkv, float *rstd, int N, int C, int NH) {
    const int HS = C / NH;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= MIN_PARALLEL_WORK)
    for (int n = 0; n < N; n++) {
        float *qk_n = qkv + (size_t)n * 3 * C;  // q[n,:] then k[n,:]: 2NH heads of HS
        for (int h = 0; h < 2 * NH; h++)
            rstd[(size_t)n * 2 * NH + h] = rmsnorm_row(qk_n + (size_t)h * HS, qk_n + (size_t)h * HS, NULL, HS);
    }
}

// qk_norm_backward_reference, derived: rmsnorm_backward_reference's derivation with w = 1, for
// one head's x[HS] with r = rstd, y = xhat = x r (the forward's output,
// which is all the backward needs: no weight to multiply back out):
//   4. no weight: dxhat = dy, no dw
//   3-1. dx[j] = r (dxhat[j] - xhat[j] mean over c of dxhat[c] xhat[c])
//              = r (dy[j] - y[j] mean(dy y))
// The mean is taken before any dx is written, so dx can overwrite dy in
// place. Written, not added: q and k go nowhere but through this norm.

// 3-1. for one head once its sum of dy y is known: d[HS] = r (d - y mean),
// mean = dy_y_sum / HS, in place.
void qk_norm_dx_row(float *d, const float *y, float r, float dy_y_sum, int HS) {
    const float dy_y_mean = dy_y_sum / (float)HS;
    for (int c = 0; c < HS; c++) d[c] = r * fmaf(-y[c], dy_y_mean, d[c]);  // 3-1.
}

void qk_norm_backward_reference(float *dqkv, const float *qkv, const float *rstd, int N, int C, int NH) {
    const int HS = C / NH;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= MIN_PARALLEL_WORK)
    for (int n = 0; n < N; n++) {
        for (int h = 0; h < 2 * NH; h++) {  // q's heads, then k's
            const size_t at = (size_t)n * 3 * C + (size_t)h * HS;
            const float *y = qkv + at;
            float *d = dqkv + at;
            float dy_y_sum = 0.0f;
            for (int c = 0; c < HS; c++) dy_y_sum = fmaf(d[c], y[c], dy_y_sum);
            qk_norm_dx_row(d, y, rstd[(size_t)n * 2 * NH + h], dy_y_sum, HS);
        }
    }
}
