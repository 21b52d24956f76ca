// gelu_fast.c: GELU, the fast versions (see gelu.h): the same formula on
// fast_erff and fast_expf, in loops with no calls, so each compiles to
// vector instructions.
//
// Reading order: file 21, after fasterf.h and gelu.c (file 9), the formula
// these must match. The one approximation is erf's and exp's (each within
// about 1e-7 relative, fasterf.h and fastexp.h); the formula and its
// derivative are the reference's, term for term.
#include <stddef.h>

#include "fasterf.h"
#include "fastexp.h"
#include "gelu.h"

// Below this many elements (one row of the hidden layer when sampling, say),
// waking the other threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

// Phi(x), the standard normal CDF
static inline float normal_cdf(float x) { return 0.5f * (1.0f + fast_erff(x * GELU_INV_SQRT2)); }

// phi(x), the standard normal density. Beyond |x| = sqrt(174) it is below
// 1e-38, where fast_expf stops (at e^-87) but libm's expf reaches 0: 0 here
// too, so that x * phi(x) is 0 for large x, as in the reference.
static inline float normal_pdf(float x) {
    const float half_x2 = 0.5f * x * x;
    return half_x2 < 87.0f ? fast_expf(-half_x2) * GELU_INV_SQRT_2PI : 0.0f;
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
