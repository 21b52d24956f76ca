// softmax.h: the softmax of one row, in loops the compiler vectorises.
//
// Reading order: with attention.h (file 7), after fastexp.h. Used by the
// attention weights (attention.c) and by the loss (crossentropy.c):
//   out[j] = exp(in[j] - max) / sum over i of exp(in[i] - max),  j < n
// where max is the row's largest entry: subtracting it makes the largest
// exp() exactly 1, so nothing overflows, and leaves the result unchanged.
//
// The max and the sum run on 16-float vectors: lane i sees j = i, i+16,
// ..., and the lanes are combined at the end (the sums are simd.h's
// row_sum and row_dot). With one running max or sum, each step waits for
// the one before, and for the sum the compiler may not reorder float
// additions itself. A last partial vector is padded with -inf (for the max)
// or 0 (for the sum).
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

static inline float row_max(const float *x, int n) {
    vec16 lanes = (vec16){0} - INFINITY;
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes = max16(lanes, load16(x + j));
    if (j < n) lanes = max16(lanes, load_tail16(x + j, n - j, -INFINITY));
    float max = lanes[0];
    for (int i = 1; i < 16; i++) max = lanes[i] > max ? lanes[i] : max;
    return max;
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
