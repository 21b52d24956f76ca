// softmax.h: the softmax of one row, in loops the compiler vectorises.
//
// Reading order: with attention.h (file 7), after fastexp.h. Used by the
// attention weights (attention.c) and by the loss (crossentropy.c):
//   out[j] = exp(in[j] - max) / sum over i of exp(in[i] - max),  j < n
// where max is the row's largest entry: subtracting it makes the largest
// exp() exactly 1, so nothing overflows, and leaves the result unchanged.
//
// The max and the sum run on 16-float vectors (simd.h): lane i sees
// j = i, i+16, ..., and the lanes are combined at the end. With one running
// max or sum, each step waits for the one before, and for the sum the
// compiler may not reorder float additions itself. A last partial vector
// is padded with -inf (for the max) or 0 (for the sum).
#ifndef TINYGPT_SOFTMAX_H
#define TINYGPT_SOFTMAX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fastexp.h"
#include "simd.h"

typedef int32_t ivec16 __attribute__((vector_size(64)));

// max16: the larger of a and b in each lane; the comparison gives -1 (all
// bits set) where a > b, which selects a's bits, else b's.
static inline vec16 max16(vec16 a, vec16 b) {
    ivec16 a_wins = a > b;
    return (vec16)((a_wins & (ivec16)a) | (~a_wins & (ivec16)b));
}

// x[j..n) (fewer than 16 floats) in a vector whose other lanes are "pad"
static inline vec16 load_tail16(const float *x, int count, float pad) {
    vec16 v = (vec16){0} + pad;
    memcpy(&v, x, (size_t)count * sizeof(float));
    return v;
}

// the 16 lanes of v added up, lane 0 first
static inline float sum16(vec16 v) {
    float sum = 0.0f;
    for (int i = 0; i < 16; i++) sum += v[i];
    return sum;
}

static inline float row_max(const float *x, int n) {
    vec16 lanes = (vec16){0} - INFINITY;
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes = max16(lanes, load16(x + j));
    if (j < n) lanes = max16(lanes, load_tail16(x + j, n - j, -INFINITY));
    float max = lanes[0];
    for (int i = 1; i < 16; i++) max = lanes[i] > max ? lanes[i] : max;
    return max;
}

static inline float row_sum(const float *x, int n) {
    vec16 lanes = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes += load16(x + j);
    if (j < n) lanes += load_tail16(x + j, n - j, 0.0f);
    return sum16(lanes);
}

// sum over j < n of a[j] * b[j]: softmax's backward needs sum_i w_i dw_i
// (attention_backward).
static inline float row_dot(const float *a, const float *b, int n) {
    vec16 lanes = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes += load16(a + j) * load16(b + j);
    if (j < n) lanes += load_tail16(a + j, n - j, 0.0f) * load_tail16(b + j, n - j, 0.0f);
    return sum16(lanes);
}

// out[0..n) = softmax(scale * in[0..n)), scale > 0 (attention's
// 1/sqrt(HS); 1 for the loss); out may be in. Since scale > 0, the largest
// scale * in[j] is scale * max, so the scale rides along in the exp's
// argument instead of costing a pass of its own. Returns the row's
// log-sum-exp, log(sum over j of exp(scale * in[j])), when asked (the loss
// needs it).
static inline void softmax_row(float *out, const float *in, int n, float scale, float *log_sum_exp) {
    const float max = row_max(in, n);
    for (int j = 0; j < n; j++) out[j] = fast_expf((in[j] - max) * scale);
    const float sum = row_sum(out, n);
    const float inv_sum = 1.0f / sum;
    for (int j = 0; j < n; j++) out[j] *= inv_sum;
    if (log_sum_exp) *log_sum_exp = scale * max + logf(sum);
}

#endif
