// gelu.c: GELU, reference and fast versions (see gelu.h).
#include "gelu.h"

#include <math.h>
#include <stddef.h>

#include "fasterf.h"
#include "fastexp.h"

#define INV_SQRT2 0.70710678118654752f     // 1 / sqrt(2)
#define INV_SQRT_2PI 0.39894228040143268f  // 1 / sqrt(2 pi)

// Below this many elements (one row of the hidden layer when sampling, say),
// waking the other threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

// ---------------------------------------------------------------------------
// Reference versions: the formula, with libm.

void gelu_forward_reference(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + erff(x * INV_SQRT2));
    }
}

// Backward, derived. Each output depends on its own input only:
//   gelu(x) = x Phi(x),   Phi(x) = 0.5 (1 + erf(x / sqrt 2))
// (1) the product rule: gelu'(x) = Phi(x) + x Phi'(x)
// (2) Phi is the normal CDF, so its slope is the normal density:
//       Phi'(x) = phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
//     (erf'(u) = 2/sqrt(pi) exp(-u^2); with u = x/sqrt 2 and the 0.5 in
//     front, 0.5 * 2/sqrt(pi) * exp(-x^2/2) / sqrt 2 = phi(x))
// (3) the chain rule: dinp[i] = dout[i] * gelu'(x) = dout[i] * (Phi(x) + x phi(x))
// Written, not added to: fc_out, GELU's input, feeds nothing else.
void gelu_backward_reference(float *dinp, const float *inp, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float cdf = 0.5f * (1.0f + erff(x * INV_SQRT2));  // Phi(x)
        const float pdf = expf(-0.5f * x * x) * INV_SQRT_2PI;   // (2) phi(x)
        dinp[i] = dout[i] * (cdf + x * pdf);                    // (1) and (3)
    }
}

// ---------------------------------------------------------------------------
// Fast versions: the same formula on fast_erff and fast_expf, in loops with
// no calls, so each compiles to vector instructions.

// Phi(x), the standard normal CDF
static inline float normal_cdf(float x) { return 0.5f * (1.0f + fast_erff(x * INV_SQRT2)); }

// phi(x), the standard normal density. Beyond |x| = sqrt(174) it is below
// 1e-38, where fast_expf stops (at e^-87) but libm's expf reaches 0: 0 here
// too, so that x * phi(x) is 0 for large x, as in the reference.
static inline float normal_pdf(float x) {
    const float half_x2 = 0.5f * x * x;
    return half_x2 < 87.0f ? fast_expf(-half_x2) * INV_SQRT_2PI : 0.0f;
}

void gelu_forward(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) out[i] = inp[i] * normal_cdf(inp[i]);
}

// In place (dinp == dout) is safe: element i reads dout[i] before it writes
// dinp[i], and reads no other element.
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        dinp[i] = dout[i] * (normal_cdf(x) + x * normal_pdf(x));
    }
}
