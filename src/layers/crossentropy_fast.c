// crossentropy_fast.c: softmax + cross-entropy, the fast forward (see
// crossentropy.h), and softmax alone.
//
// Reading order: file 20, after attention_fast.c, whose softmax.h rows it
// reuses, and crossentropy.c (file 6), the definition it must match. The
// row's softmax is the reference's arithmetic with its max and sum taken in
// 16 lanes and exp as fast_expf (softmax.h), rows spread over threads; the
// tests hold the two forwards together.
#include <math.h>
#include <stddef.h>

#include "crossentropy.h"
#include "fast.h"
#include "softmax.h"

void softmax_forward(float *probs, const float *logits, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) softmax_row(probs + (size_t)n * V, logits + (size_t)n * V, V, 1.0f, NULL);
}

float crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float target_logit = logits[(size_t)n * V + targets[n]];  // before probs, which may be logits
        float log_sum_exp;
        softmax_row(probs + (size_t)n * V, logits + (size_t)n * V, V, 1.0f, &log_sum_exp);
        losses[n] = log_sum_exp - target_logit;
    }
    // The mean in double and in a fixed order: the same for any thread count.
    double total = 0.0;
    for (int n = 0; n < N; n++) total += losses[n];
    return (float)(total / N);
}
