// softmax.h: the softmax of one row, in loops the compiler vectorises.
//
// Reading order: with attention.h (file 7), after fastexp.h. Used by the
// attention weights (attention.c) and by the loss (crossentropy.c):
//   out[j] = exp(in[j] - max) / sum over i of exp(in[i] - max),  j < n
// where max is the row's largest entry: subtracting it makes the largest
// exp() exactly 1, so nothing overflows, and leaves the result unchanged.
//
// The max and the sum are taken in 16 lanes (lane i sees j = i, i+16, ...)
// and the lanes combined at the end. With one running max or sum, each
// step waits for the one before, and for the sum the compiler may not
// reorder float additions itself; 16 independent lanes are one vector.
#ifndef TINYGPT_SOFTMAX_H
#define TINYGPT_SOFTMAX_H

#include <math.h>

#include "fastexp.h"

#define SOFTMAX_LANES 16

static inline float row_max(const float *x, int n) {
    float lane[SOFTMAX_LANES];
    for (int i = 0; i < SOFTMAX_LANES; i++) lane[i] = -INFINITY;
    int j = 0;
    for (; j + SOFTMAX_LANES <= n; j += SOFTMAX_LANES)
        for (int i = 0; i < SOFTMAX_LANES; i++) lane[i] = x[j + i] > lane[i] ? x[j + i] : lane[i];
    for (; j < n; j++) lane[0] = x[j] > lane[0] ? x[j] : lane[0];
    for (int half = SOFTMAX_LANES / 2; half > 0; half /= 2)  // 16 lanes -> 8 -> 4 -> 2 -> 1
        for (int i = 0; i < half; i++) lane[i] = lane[i + half] > lane[i] ? lane[i + half] : lane[i];
    return lane[0];
}

static inline float row_sum(const float *x, int n) {
    float lane[SOFTMAX_LANES] = {0};
    int j = 0;
    for (; j + SOFTMAX_LANES <= n; j += SOFTMAX_LANES)
        for (int i = 0; i < SOFTMAX_LANES; i++) lane[i] += x[j + i];
    for (; j < n; j++) lane[0] += x[j];
    for (int half = SOFTMAX_LANES / 2; half > 0; half /= 2)
        for (int i = 0; i < half; i++) lane[i] += lane[i + half];
    return lane[0];
}

// out[0..n) = softmax(in[0..n)); out may be in. Returns the row's
// log-sum-exp, log(sum over j of exp(in[j])), when asked (the loss needs it).
static inline void softmax_row(float *out, const float *in, int n, float *log_sum_exp) {
    const float max = row_max(in, n);
    for (int j = 0; j < n; j++) out[j] = fast_expf(in[j] - max);
    const float sum = row_sum(out, n);
    const float inv_sum = 1.0f / sum;
    for (int j = 0; j < n; j++) out[j] *= inv_sum;
    if (log_sum_exp) *log_sum_exp = max + logf(sum);
}

#endif
