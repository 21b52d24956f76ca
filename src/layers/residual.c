// residual.c: out = inp + dropout(branch), forward and backward (see residual.h).
#include "residual.h"

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

// Below this many elements (one position when sampling, say), waking the
// other threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

void residual_forward(float *out, const float *inp, const float *branch, size_t n, float dropout_p,
                      uint64_t dropout_key, uint64_t dropout_first) {
    if (dropout_p == 0.0f) {  // evaluation and sampling: no mask to hash
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
        for (size_t i = 0; i < n; i++) out[i] = inp[i] + branch[i];
        return;
    }
    const float keep = 1.0f / (1.0f - dropout_p);
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] + branch[i] * dropout_factor(dropout_key, dropout_first + i, dropout_p, keep);
}

// Backward, derived. out[i] = inp[i] + branch[i] * scale_i, with scale_i
// the fixed dropout factor (0 or 1/(1-p)), so
//   (1) d out[i] / d inp[i]    = 1        ->  dinp[i]    = dout[i]
//   (2) d out[i] / d branch[i] = scale_i  ->  dbranch[i] = dout[i] * scale_i
// (1) needs no code: the caller's dout buffer already holds it. But it is
// only the skip path's share of inp's gradient: inp (the stream) is also
// what the branch was computed from, so the branch's backward, walked down
// to its LayerNorm, adds the other share to the same buffer (block.c). A
// sum in the forward pass copies the gradient to both addends; a value used
// twice sums the gradients of its two uses. That is why the stream's
// gradient is added to, and every other activation's, which has one
// consumer, is written.
// (2) is the loop: written, since the branch's output feeds only this sum.
void residual_backward(float *dbranch, const float *dout, size_t n, float dropout_p, uint64_t dropout_key,
                       uint64_t dropout_first) {
    if (dropout_p == 0.0f) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
        for (size_t i = 0; i < n; i++) dbranch[i] = dout[i];  // (2), every scale_i = 1
        return;
    }
    const float keep = 1.0f / (1.0f - dropout_p);
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++)
        dbranch[i] = dout[i] * dropout_factor(dropout_key, dropout_first + i, dropout_p, keep);  // (2)
}

// x = dropout(x) in place: the embedding's dropout (gpt), with the same rule.
// Its backward is residual_backward's (2): x_out = x * factor, so
// dx = dout * factor.
void dropout_forward(float *x, size_t n, float dropout_p, uint64_t dropout_key, uint64_t dropout_first) {
    if (dropout_p == 0.0f) return;
    const float keep = 1.0f / (1.0f - dropout_p);
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) x[i] *= dropout_factor(dropout_key, dropout_first + i, dropout_p, keep);
}
