// layernorm_fast.c: LayerNorm without bias, the fast versions (see
// layernorm.h): the same math, the row sums in 16 lanes, over threads.
//
// Reading order: file 18, after linear_fast.c (simd.h's lanes are met
// there) and layernorm.c (file 7), the loops these must match. Why the
// trick changes no result beyond rounding: a row's sum in 16 lanes adds
// the same numbers in another order (lane i holds c = i, i+16, ...); each
// add rounds once either way, so the two differ by a few roundings, not by
// any term. The order is fixed, so a row gives the same bits alone or in a
// batch, on any thread count. The tests hold the fast versions to the reference within 2e-5.
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "layernorm.h"
#include "fast.h"
#include "parallel.h"
#include "simd.h"

// Below this many numbers (a row or a few, when sampling), waking the other
// threads costs more than the work.
#define MIN_PARALLEL_WORK (1 << 15)

// dweight sums over rows in runs of this many channels (see layernorm_backward).
#define CHANNEL_RUN 64

static inline int min_int(int a, int b) { return a < b ? a : b; }

// 16 columns' squared distances from the mean m, added to their lanes.
static inline Lanes16 add_squared_distances(Lanes16 squares, Lanes16 xs, float m) {
    for (int p = 0; p < LANE_PARTS; p++) {
        const vec d = xs.part[p] - m;
        squares.part[p] = fma_vec(d, d, squares.part[p]);
    }
    return squares;
}

// Steps 1-3 for one row x[C]. Two passes: the mean first, then the squared
// distances from it, which stay accurate when the mean is large next to the
// spread (sum(x^2)/C - mean^2 would cancel). Both sums run in 16 lanes
// (simd.h's lane sums): with one running float, each of the C additions
// waits for the one before, and the two passes took most of the layer's time.
static void row_statistics(float *mean, float *rstd, const float *x, int C) {
    const float m = row_sum(x, C) / (float)C;
    Lanes16 squares = lanes16_fill(0.0f);
    int c = 0;
    for (; c + 16 <= C; c += 16) squares = add_squared_distances(squares, load16(x + c), m);
    if (c < C)  // the last partial vector, padded with the mean: distance 0
        squares = add_squared_distances(squares, load_tail16(x + c, C - c, m), m);
    *mean = m;
    *rstd = 1.0f / sqrtf(sum16(squares) / (float)C + LAYERNORM_EPS);
}

// The rows, an orphaned `omp for`, in a region of their own only when one
// pays (parallel.h).
static void layernorm_forward_rows(float *out, float *mean, float *rstd, const float *inp, const float *weight, int N,
                                   int C) {
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *inp_n = inp + (size_t)n * C;
        float *out_n = out + (size_t)n * C;
        float mean_n, rstd_n;
        row_statistics(&mean_n, &rstd_n, inp_n, C);
        for (int c = 0; c < C; c++) out_n[c] = (inp_n[c] - mean_n) * rstd_n * weight[c];  // steps 4-5
        mean[n] = mean_n;
        rstd[n] = rstd_n;
    }
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight, int N, int C) {
    RUN_SHARED((size_t)N * C, MIN_PARALLEL_WORK, layernorm_forward_rows(out, mean, rstd, inp, weight, N, C));
}

// Backward of one row: dinp_n[C] += dloss/dx, given dout_n[C], as derived
// above layernorm_backward_reference:
//     dx[j] = rstd * (dxhat[j] - mean(dxhat) - xhat[j] * mean(dxhat * xhat)),  dxhat = dout * weight
// The two sums run in 16 lanes, as in row_statistics; a last partial
// vector is padded so that its xhat and dxhat are 0 (inp with the mean,
// dout with 0).
// 16 columns' terms of the two sums: dxhat and dxhat * xhat, in lanes.
static inline void add_dxhat_terms(Lanes16 *dxhat_sum, Lanes16 *dxhat_xhat_sum, Lanes16 inp, Lanes16 dout, Lanes16 w,
                                   float mean_n, float rstd_n) {
    for (int p = 0; p < LANE_PARTS; p++) {
        const vec xhat = (inp.part[p] - mean_n) * rstd_n;
        const vec dxhat = dout.part[p] * w.part[p];
        dxhat_sum->part[p] += dxhat;
        dxhat_xhat_sum->part[p] = fma_vec(dxhat, xhat, dxhat_xhat_sum->part[p]);
    }
}

static void row_backward(float *dinp_n, const float *dout_n, const float *inp_n, const float *weight, float mean_n,
                         float rstd_n, int C) {
    Lanes16 dxhat_sum = lanes16_fill(0.0f), dxhat_xhat_sum = lanes16_fill(0.0f);
    int c = 0;
    for (; c + 16 <= C; c += 16)
        add_dxhat_terms(&dxhat_sum, &dxhat_xhat_sum, load16(inp_n + c), load16(dout_n + c), load16(weight + c), mean_n,
                        rstd_n);
    if (c < C)
        add_dxhat_terms(&dxhat_sum, &dxhat_xhat_sum, load_tail16(inp_n + c, C - c, mean_n),
                        load_tail16(dout_n + c, C - c, 0.0f), load_tail16(weight + c, C - c, 0.0f), mean_n, rstd_n);
    const float dxhat_mean = sum16(dxhat_sum) / (float)C;
    const float dxhat_xhat_mean = sum16(dxhat_xhat_sum) / (float)C;
    for (c = 0; c < C; c++) {
        const float xhat = (inp_n[c] - mean_n) * rstd_n;
        const float dxhat = dout_n[c] * weight[c];
        dinp_n[c] += rstd_n * (dxhat - dxhat_mean - xhat * dxhat_xhat_mean);
    }
}

// The two loops below write different tensors from the same inputs, so
// they share one parallel region (parallel.h), and a thread done with its
// rows of the first goes on to the second without waiting ("nowait").
static void layernorm_backward_loops(float *dinp, float *dweight, const float *dout, const float *inp,
                                     const float *weight, const float *mean, const float *rstd, int N, int C) {
    // dinp: rows are independent, one thread per row.
#pragma omp for schedule(static) nowait
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * C;
        row_backward(dinp + row, dout + row, inp + row, weight, mean[n], rstd[n], C);
    }
    // dweight[c] += sum over n of dout[n,c] * xhat[n,c]: a sum over rows, so
    // the threads split the channels instead, in runs of CHANNEL_RUN. Each
    // channel adds its rows in increasing n, whatever the thread count; each
    // run reads dout and inp a row at a time (a column at a time would touch
    // a new cache line for every number).
#pragma omp for schedule(static) nowait
    for (int c0 = 0; c0 < C; c0 += CHANNEL_RUN) {
        const int width = min_int(C - c0, CHANNEL_RUN);
        float sum[CHANNEL_RUN];
        for (int c = 0; c < width; c++) sum[c] = dweight[c0 + c];
        for (int n = 0; n < N; n++) {
            const float *dout_n = dout + (size_t)n * C + c0;
            const float *inp_n = inp + (size_t)n * C + c0;
            for (int c = 0; c < width; c++) sum[c] += dout_n[c] * ((inp_n[c] - mean[n]) * rstd[n]);
        }
        for (int c = 0; c < width; c++) dweight[c0 + c] = sum[c];
    }
}

void layernorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                        const float *mean, const float *rstd, int N, int C) {
    RUN_SHARED((size_t)N * C, MIN_PARALLEL_WORK,
               layernorm_backward_loops(dinp, dweight, dout, inp, weight, mean, rstd, N, C));
}
