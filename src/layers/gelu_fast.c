// gelu_fast.c: GELU, the fast versions (see gelu.h): the same formula on
// fast_erf_vec and fast_exp_vec, a vector of elements at a time.
//
// Reading order: file 21, after fasterf.h and gelu.c (file 9), the formula
// these must match. The one approximation is erf's and exp's (each within
// about 1e-7 relative, fasterf.h and fastexp.h); the formula and its
// derivative are the reference's, term for term. GPT-2's tanh form, below
// them, is rewritten once (see there), so it runs on fast_exp_vec alone.
// Each loop runs over the elements in pieces of a vector (simd.h's
// lanes_left), the last piece perhaps shorter: an element's bits do not
// depend on which piece, or which thread, it falls in.
#include <stddef.h>

#include "fast.h"
#include "fasterf.h"
#include "fastexp.h"
#include "gelu.h"
#include "parallel.h"
#include "simd.h"

// Below this many elements (one row of the hidden layer when sampling, say),
// waking the other threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

// Phi(x), the standard normal CDF
static inline vec normal_cdf(vec x) { return 0.5f * (1.0f + fast_erf_vec(x * GELU_INV_SQRT2)); }

// phi(x), the standard normal density. Beyond |x| = sqrt(174) it is below
// 1e-38, where fast_expf stops (at e^-87) but libm's expf reaches 0: 0 here
// too, so that x * phi(x) is 0 for large x, as in the reference.
static inline vec normal_pdf(vec x) {
    const vec half_x2 = 0.5f * x * x;
    return select_vec(half_x2 < 87.0f, fast_exp_vec(-half_x2) * GELU_INV_SQRT_2PI, splat(0.0f));
}

// Each pass's loop is an orphaned `omp for`, in a region of its own only
// when one pays (parallel.h).
static void gelu_forward_loop(float *out, const float *inp, size_t n) {
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i += VEC_FLOATS) {
        const int count = lanes_left(n, i);
        const vec x = load_upto(inp + i, count);
        store_upto(out + i, x * normal_cdf(x), count);
    }
}

void gelu_forward(float *out, const float *inp, size_t n) {
    RUN_SHARED(n, MIN_PARALLEL_ELEMENTS, gelu_forward_loop(out, inp, n));
}

// The forward again and the backward, in one pass (mlp_backward needs
// both at once): each element's x and Phi(x) serve both lines, so erf runs
// once an element, not twice. In place (dinp == dout) is safe: a piece
// reads its dout before it writes its dinp, and reads no other piece.
static void gelu_forward_backward_loop(float *out, float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i += VEC_FLOATS) {
        const int count = lanes_left(n, i);
        const vec x = load_upto(inp + i, count), cdf = normal_cdf(x);
        store_upto(out + i, x * cdf, count);
        store_upto(dinp + i, load_upto(dout + i, count) * (cdf + x * normal_pdf(x)), count);
    }
}

void gelu_forward_backward(float *out, float *dinp, const float *inp, const float *dout, size_t n) {
    RUN_SHARED(n, MIN_PARALLEL_ELEMENTS, gelu_forward_backward_loop(out, dinp, inp, dout, n));
}

// ---------------------------------------------------------------------------
// GPT-2's tanh approximation. With u = sqrt(2/pi) (x + 0.044715 x^3) and
// e = e^(-2u):
//   0.5 (1 + tanh u) = 1 / (1 + e) = s          (tanh u = (1 - e) / (1 + e))
// so gelu_tanh(x) = x s, one exp and one division. The slope, from the
// reference's (gelu.c), with 0.5 (1 - tanh^2 u) = 2 s (1 - s) and
// 1 - s = e s:
//   g'(x) = s + x * 2 s (1 - s) * u',   s (1 - s) = e s^2
// e s^2 rather than s (1 - s): near s = 1, 1 - s would cancel to a few bits.
// Where |2u| >= 87, s (1 - s) is below 1e-37 and taken as 0: fast_expf
// stops at e^-87 and e^88 (about 1e-38 and 1.7e38), and x u' grows as x^3,
// so its e there would make the term large where the reference's
// 1 - tanh^2 is 0. Beyond |x| = 1e19, x^2 overflows and the slope is not
// finite, in the reference too; no activation comes near.

// s = 1 / (1 + e^(-2u)) of x, and s (1 - s) in "*s_slope"
static inline vec tanh_gate(vec x, vec *s_slope) {
    const vec two_u = 2.0f * GELU_SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x);
    const vec e = fast_exp_vec(-two_u);
    const vec s = 1.0f / (1.0f + e);
    *s_slope = select_vec(abs_vec(two_u) < 87.0f, e * s * s, splat(0.0f));  // e s first: at most 1, where e may be 1.7e38
    return s;
}

static void gelu_tanh_forward_loop(float *out, const float *inp, size_t n) {
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i += VEC_FLOATS) {
        const int count = lanes_left(n, i);
        const vec x = load_upto(inp + i, count);
        vec s_slope;
        store_upto(out + i, x * tanh_gate(x, &s_slope), count);
    }
}

void gelu_tanh_forward(float *out, const float *inp, size_t n) {
    RUN_SHARED(n, MIN_PARALLEL_ELEMENTS, gelu_tanh_forward_loop(out, inp, n));
}

// The forward again and the backward in one pass, as gelu_forward_backward:
// one exp an element, not two. In place (dinp == dout) is safe.
static void gelu_tanh_forward_backward_loop(float *out, float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i += VEC_FLOATS) {
        const int count = lanes_left(n, i);
        const vec x = load_upto(inp + i, count);
        vec s_slope;
        const vec s = tanh_gate(x, &s_slope);
        const vec du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_CUBIC * x * x);  // u'
        store_upto(out + i, x * s, count);
        store_upto(dinp + i, load_upto(dout + i, count) * (s + x * 2.0f * s_slope * du), count);
    }
}

void gelu_tanh_forward_backward(float *out, float *dinp, const float *inp, const float *dout, size_t n) {
    RUN_SHARED(n, MIN_PARALLEL_ELEMENTS, gelu_tanh_forward_backward_loop(out, dinp, inp, dout, n));
}
