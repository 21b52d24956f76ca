// gelu.c: GELU, the reference versions, with the backward derived (see
// gelu.h), then GPT-2's tanh approximation, the same. The fast versions are in gelu_fast.c (file 21).
#include "gelu.h"

#include <math.h>
#include <stddef.h>

// ---------------------------------------------------------------------------
// Reference versions: the formula, with libm.

void gelu_forward_reference(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + erff(x * GELU_INV_SQRT2));
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
        const float cdf = 0.5f * (1.0f + erff(x * GELU_INV_SQRT2));  // Phi(x)
        const float pdf = expf(-0.5f * x * x) * GELU_INV_SQRT_2PI;   // (2) phi(x)
        dinp[i] = dout[i] * (cdf + x * pdf);                         // (1) and (3)
    }
}

// ---------------------------------------------------------------------------
// GPT-2's tanh approximation, the reference versions: the formula, with
// libm's tanhf.

void gelu_tanh_forward_reference(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = GELU_SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

// Backward, derived. Each output depends on its own input only:
//   g(x) = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
// (1) the product rule: g'(x) = 0.5 (1 + tanh(u)) + 0.5 x d tanh(u)/dx
// (2) tanh' = 1 - tanh^2, and the chain rule through u:
//       d tanh(u)/dx = (1 - tanh(u)^2) u',   u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// (3) the chain rule: dinp[i] = dout[i] * g'(x)
// Written, not added to: fc_out, the activation's input, feeds nothing else.
void gelu_tanh_backward_reference(float *dinp, const float *inp, const float *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float u = GELU_SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x);
        const float t = tanhf(u);
        const float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_CUBIC * x * x);  // (2) u'
        dinp[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);      // (1) and (3)
    }
}
