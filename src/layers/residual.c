// residual.c: out = inp + dropout(branch), forward and backward (see residual.h).
#include "residual.h"

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

// Below this many elements (one position when sampling, say), waking the
// other threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

void residual_forward(float *out, const float *inp, const float *branch, size_t n, float dropout_p,
                      uint64_t dropout_key) {
    if (dropout_p == 0.0f) {  // evaluation and sampling: no mask to hash
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
        for (size_t i = 0; i < n; i++) out[i] = inp[i] + branch[i];
        return;
    }
    const float keep = 1.0f / (1.0f - dropout_p);
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) out[i] = inp[i] + branch[i] * dropout_factor(dropout_key, i, dropout_p, keep);
}

// out = inp + branch * scale, so dinp = dout (the caller's buffer, untouched)
// and dbranch = dout * scale.
void residual_backward(float *dbranch, const float *dout, size_t n, float dropout_p, uint64_t dropout_key) {
    if (dropout_p == 0.0f) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
        for (size_t i = 0; i < n; i++) dbranch[i] = dout[i];
        return;
    }
    const float keep = 1.0f / (1.0f - dropout_p);
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) dbranch[i] = dout[i] * dropout_factor(dropout_key, i, dropout_p, keep);
}

// x = dropout(x) in place: the embedding's dropout (gpt), with the same rule.
// Its backward is residual_backward's: dx = dout * factor.
void dropout_forward(float *x, size_t n, float dropout_p, uint64_t dropout_key) {
    if (dropout_p == 0.0f) return;
    const float keep = 1.0f / (1.0f - dropout_p);
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) x[i] *= dropout_factor(dropout_key, i, dropout_p, keep);
}
