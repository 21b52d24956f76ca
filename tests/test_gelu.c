// test_gelu.c: tests for src/layers/gelu.c and gelu_fast.c (GELU, exact erf form).
//
// 1. both versions give values worked out in double precision (python's
//    math.erf), forward and backward;
// 2. fast_erff keeps the error bound src/kernels/fasterf.h states, and the
//    fast versions (on fast_erff and src/kernels/fastexp.h's fast_expf)
//    stay within a named tolerance of the libm ones over a dense range of x
//    and at the extremes;
// 3. both backwards match central finite differences of L = sum(gelu(x) * R);
// 4. the edges: in place, NaN, and bits that do not depend on where an
//    element sits in the array or on the thread count; the forward's output
//    again from the pass that also takes the backward (both forms);
// 5. GPT-2's tanh approximation, both versions: hand values (python's
//    math.tanh), fast against reference, finite differences, in place, NaN.
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fast.h"
#include "fasterf.h"
#include "gelu.h"
#include "gradcheck.h"
#include "helpers.h"
#include "rng.h"
#include "sanitized.h"
#include "tests.h"

// Fast vs reference, |fast - reference| <= this * max(1, |x|) forward and
// <= this * max(1, |dout|) backward. Phi = (1 + erf) / 2 takes half of
// fast_erff's 4.4e-7 (fasterf.h); the reference itself is off the exact
// value by up to 1.1e-7 forward and 1.4e-7 backward (measured against double).
// Together 3.6e-7; measured 2.4e-7. A mistake in the formula (a lost
// x phi(x) term, a wrong constant) is off by 1e-3 or more.
static const double FAST_MATCHES_REFERENCE_TOL = 5e-7;

// The hand values below are given to 9 digits; float32 holds about 7.
static const double HAND_VALUE_TOL = 1e-6;

typedef void (*GeluForward)(float *out, const float *inp, size_t n);
typedef void (*GeluBackward)(float *dinp, const float *inp, const float *dout, size_t n);
typedef void (*GeluBoth)(float *out, float *dinp, const float *inp, const float *dout, size_t n);

// The fast backward is the second output of gelu_forward_backward (the
// MLP's backward takes GELU's output again with it); here the first goes
// to a buffer of its own.
static void backward_of(GeluBoth both, float *dinp, const float *inp, const float *dout, size_t n) {
    float *out = xmalloc((n ? n : 1) * sizeof(float));
    both(out, dinp, inp, dout, n);
    free(out);
}
static void fast_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    backward_of(gelu_forward_backward, dinp, inp, dout, n);
}
static void fast_gelu_tanh_backward(float *dinp, const float *inp, const float *dout, size_t n) {
    backward_of(gelu_tanh_forward_backward, dinp, inp, dout, n);
}
// Loop tests run _i = 0 (reference) and _i = 1 (fast).
static const GeluForward FORWARDS[2] = {gelu_forward_reference, gelu_forward};
static const GeluBackward BACKWARDS[2] = {gelu_backward_reference, fast_gelu_backward};
static const char *const VERSION_NAMES[2] = {"reference", "fast"};

// ---------------------------------------------------------------------------
// 1. Hand-checked values: x Phi(x) and Phi(x) + x phi(x) in double.

enum { HAND_COUNT = 7 };
static const float HAND_X[HAND_COUNT] = {0, 1, -1, 2, -2, 0.5f, -3};
static const double HAND_GELU[HAND_COUNT] = {0,          0.841344746,   -0.158655254, 1.95449974,
                                             -0.0455002639, 0.345731231, -0.00404969409};
static const double HAND_GELU_GRAD[HAND_COUNT] = {0.5,           1.08331547, -0.0833154706, 1.0852318,
                                                  -0.0852318011, 0.867495125, -0.0119456472};

START_TEST(forward_and_backward_give_hand_checked_values) {
    float out[HAND_COUNT], dinp[HAND_COUNT], ones[HAND_COUNT];
    for (int i = 0; i < HAND_COUNT; i++) ones[i] = 1.0f;  // dout = 1: dinp is the derivative
    FORWARDS[_i](out, HAND_X, HAND_COUNT);
    BACKWARDS[_i](dinp, HAND_X, ones, HAND_COUNT);
    for (int i = 0; i < HAND_COUNT; i++) {
        ck_assert_msg(fabs(out[i] - HAND_GELU[i]) <= HAND_VALUE_TOL, "%s: gelu(%g) = %.9g, want %.9g",
                      VERSION_NAMES[_i], (double)HAND_X[i], (double)out[i], HAND_GELU[i]);
        ck_assert_msg(fabs(dinp[i] - HAND_GELU_GRAD[i]) <= HAND_VALUE_TOL, "%s: gelu'(%g) = %.9g, want %.9g",
                      VERSION_NAMES[_i], (double)HAND_X[i], (double)dinp[i], HAND_GELU_GRAD[i]);
    }
    ck_assert_float_eq(out[0], 0.0f);  // gelu(0) = 0 exactly: 0 times anything finite
}
END_TEST

// Far from 0 the normal CDF is 1 or 0 to float precision (erf(x / sqrt 2)
// rounds to +-1 beyond |x| = 5.6), so gelu is x or 0 exactly. The derivative
// is 1 or 0 plus x phi(x), which is 8e-22 at x = +-10 and 0 at +-1e4.
START_TEST(large_x_passes_unchanged_and_large_negative_x_gives_zero) {
    const float x[4] = {10, 1e4f, -10, -1e4f};
    const float ones[4] = {1, 1, 1, 1};
    float out[4], dinp[4];
    FORWARDS[_i](out, x, 4);
    BACKWARDS[_i](dinp, x, ones, 4);
    for (int i = 0; i < 4; i++) {
        float want = x[i] > 0 ? x[i] : 0.0f;
        ck_assert_msg(out[i] == want, "%s: gelu(%g) = %.9g, want %g", VERSION_NAMES[_i], (double)x[i],
                      (double)out[i], (double)want);
        ck_assert_msg(fabs(dinp[i] - (x[i] > 0 ? 1.0 : 0.0)) <= HAND_VALUE_TOL, "%s: gelu'(%g) = %.9g",
                      VERSION_NAMES[_i], (double)x[i], (double)dinp[i]);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// 2. fast_erff against double-precision erf, then fast vs reference GELU.

// fasterf.h's stated bound, measured over every float in [-4.5, 4.5].
static const double FAST_ERFF_MAX_ERROR = 4.5e-7;

START_TEST(fast_erff_keeps_its_stated_error_bound_and_nan) {
    for (int i = -600000; i <= 600000; i++) {  // [-6, 6] in steps of 1e-5
        float x = (float)(1e-5 * i);
        double err = fabs((double)fast_erff(x) - erf((double)x));
        if (!(err <= FAST_ERFF_MAX_ERROR)) ck_abort_msg("fast_erff(%.9g) is off by %.3g", (double)x, err);
    }
    ck_assert(isnan(fast_erff(NAN)));
    ck_assert_float_eq(fast_erff(INFINITY), 1.0f);
    ck_assert_float_eq(fast_erff(-INFINITY), -1.0f);
}
END_TEST

// Fast vs reference: x from -10 to 10 in steps of 1e-4 (200001 values, every
// region of the erf fit, including its clamp at |x / sqrt 2| = 4), then the
// extremes: huge, zero of both signs, and subnormal.

static const float EXTREME_X[] = {1e4f, -1e4f, FLT_MAX, -FLT_MAX, 0.0f, -0.0f, FLT_MIN, -FLT_MIN,
                                  1e-40f, -1e-40f, FLT_TRUE_MIN, -FLT_TRUE_MIN};

// The dense range and the extremes, in a new array of *n floats.
static float *test_inputs(size_t *n) {
    const size_t dense = 200001;
    *n = dense + (size_t)COUNT(EXTREME_X);
    float *x = xmalloc(*n * sizeof(float));
    for (size_t i = 0; i < dense; i++) x[i] = (float)(-10.0 + 1e-4 * (double)i);
    memcpy(x + dense, EXTREME_X, sizeof EXTREME_X);
    return x;
}

START_TEST(fast_forward_matches_reference_over_a_dense_range_and_extremes) {
    size_t n;
    float *x = test_inputs(&n);
    float *fast = xmalloc(n * sizeof(float)), *ref = xmalloc(n * sizeof(float));
    gelu_forward(fast, x, n);
    gelu_forward_reference(ref, x, n);
    for (size_t i = 0; i < n; i++) {
        double scale = fmax(1.0, fabs(x[i]));
        if (!(fabs((double)fast[i] - ref[i]) <= FAST_MATCHES_REFERENCE_TOL * scale))
            ck_abort_msg("gelu(%.9g): fast %.9g, reference %.9g", (double)x[i], (double)fast[i], (double)ref[i]);
    }
    free(ref);
    free(fast);
    free(x);
}
END_TEST

START_TEST(fast_backward_matches_reference_over_a_dense_range_and_extremes) {
    size_t n;
    float *x = test_inputs(&n);
    float *dout = xmalloc(n * sizeof(float));
    float *fast = xmalloc(n * sizeof(float)), *ref = xmalloc(n * sizeof(float));
    Rng rng;
    rng_init(&rng, 5);
    fill_uniform(dout, n, &rng);
    fast_gelu_backward(fast, x, dout, n);
    gelu_backward_reference(ref, x, dout, n);
    for (size_t i = 0; i < n; i++) {
        double scale = fmax(1.0, fabs(dout[i]));
        if (!(fabs((double)fast[i] - ref[i]) <= FAST_MATCHES_REFERENCE_TOL * scale))
            ck_abort_msg("gelu backward at x = %.9g, dout = %.9g: fast %.9g, reference %.9g", (double)x[i],
                         (double)dout[i], (double)fast[i], (double)ref[i]);
    }
    free(ref);
    free(fast);
    free(dout);
    free(x);
}
END_TEST

// ---------------------------------------------------------------------------
// 3. Finite differences: x = -5, -4.75, ..., 5 (where GELU bends most), R random.

enum { GRAD_COUNT = 41 };

typedef struct {
    float x[GRAD_COUNT], out[GRAD_COUNT];
    double R[GRAD_COUNT];
    GeluForward forward;
} GeluCase;

// L = sum(gelu(x) * R), in double
static double gelu_loss(void *ctx) {
    GeluCase *gc = ctx;
    gc->forward(gc->out, gc->x, GRAD_COUNT);
    double loss = 0;
    for (int i = 0; i < GRAD_COUNT; i++) loss += gc->out[i] * gc->R[i];
    return loss;
}

START_TEST(backward_matches_finite_differences) {
    GeluCase gc = {.forward = FORWARDS[_i]};
    Rng rng;
    rng_init(&rng, 31);
    float dout[GRAD_COUNT], dinp[GRAD_COUNT];
    for (int i = 0; i < GRAD_COUNT; i++) {
        gc.x[i] = -5.0f + 0.25f * (float)i;
        gc.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
        dout[i] = (float)gc.R[i];  // dL/dout = R
    }
    BACKWARDS[_i](dinp, gc.x, dout, GRAD_COUNT);
    GradCheckResult r = gradcheck(gelu_loss, &gc, gc.x, dinp, GRAD_COUNT, GRADCHECK_FLOAT32);
    ck_assert_msg(r.failures == 0, "%s: %zu of %d elements off; worst x = %g: analytic %.6g numeric %.6g",
                  VERSION_NAMES[_i], r.failures, GRAD_COUNT, (double)gc.x[r.worst_index], r.worst_analytic,
                  r.worst_numeric);
}
END_TEST

// ---------------------------------------------------------------------------
// 4. Edges.

// The MLP's backward runs the backward in place (dinp == dout).
START_TEST(backward_in_place_gives_the_same_bits_as_out_of_place) {
    enum { N = 100 };  // a few vectors and a ragged end
    Rng rng;
    rng_init(&rng, 41);
    float x[N], dout[N], out_of_place[N], in_place[N];
    for (int i = 0; i < N; i++) x[i] = 8.0f * rng_uniform(&rng) - 4.0f;
    fill_uniform(dout, N, &rng);
    BACKWARDS[_i](out_of_place, x, dout, N);
    memcpy(in_place, dout, sizeof in_place);
    BACKWARDS[_i](in_place, x, in_place, N);
    ck_assert_msg(memcmp(in_place, out_of_place, sizeof in_place) == 0, "%s: in place differs",
                  VERSION_NAMES[_i]);
}
END_TEST

// The MLP's backward takes GELU's output again from gelu_forward_backward
// (and the tanh form's), in place on dout: it must be the forward's own
// output, bit for bit, or the weight gradient it feeds would be of another
// number than the forward used (close, under the sanitizers: sanitized.h).
// Over x in [-6, 6) (both sides of erf's clamp at 4 / sqrt 2), NaN in the
// vector body and the ragged end, on 2 threads at a size that splits
// (1 << 16 + 37 elements).
START_TEST(forward_backward_gives_the_forward_s_output) {
    static const GeluForward forwards[2] = {gelu_forward, gelu_tanh_forward};
    static const GeluBoth both[2] = {gelu_forward_backward, gelu_tanh_forward_backward};
    enum { N = (1 << 16) + 37 };
    float *x = xmalloc(N * sizeof(float)), *dout = xmalloc(N * sizeof(float));
    float *out = xmalloc(N * sizeof(float)), *out_both = xmalloc(N * sizeof(float));
    Rng rng;
    rng_init(&rng, 43);
    for (int i = 0; i < N; i++) x[i] = 12.0f * rng_uniform(&rng) - 6.0f;
    x[5] = x[N - 2] = NAN;
    fill_uniform(dout, N, &rng);
    const int saved_threads = get_threads();
    set_threads(2);
    forwards[_i](out, x, N);
    both[_i](out_both, dout, x, dout, N);
    set_threads(saved_threads);
    for (int i = 0; i < N; i++)
        ck_assert_msg(same_or_close(out_both[i], out[i]) || (isnan(out_both[i]) && isnan(out[i])),
                      "%s: out[%d] %.9g with the backward, %.9g alone", _i ? "tanh" : "erf", i, (double)out_both[i],
                      (double)out[i]);
    ck_assert(isnan(out_both[5]) && isnan(out_both[N - 2]) && isnan(dout[5]) && isnan(dout[N - 2]));
    float *all[] = {x, dout, out, out_both};
    for (int i = 0; i < COUNT(all); i++) free(all[i]);
}
END_TEST

// A NaN means something upstream went wrong; it must reach the loss rather
// than be clamped into a number. NaNs sit inside the vectorised body (3) and
// in the ragged end (37); their neighbours stay finite.
START_TEST(nan_in_gives_nan_out) {
    enum { N = 40 };
    float x[N], dout[N], out[N], dinp[N];
    for (int i = 0; i < N; i++) x[i] = dout[i] = 0.1f * (float)(i - N / 2);
    x[3] = x[37] = NAN;
    dout[10] = NAN;  // a NaN gradient, at a finite x
    FORWARDS[_i](out, x, N);
    BACKWARDS[_i](dinp, x, dout, N);
    for (int i = 0; i < N; i++) {
        bool x_nan = i == 3 || i == 37;
        ck_assert_msg(isnan(out[i]) == x_nan, "%s: gelu(x[%d] = %g) = %g", VERSION_NAMES[_i], i, (double)x[i],
                      (double)out[i]);
        ck_assert_msg(isnan(dinp[i]) == (x_nan || i == 10), "%s: dinp[%d] = %g", VERSION_NAMES[_i], i,
                      (double)dinp[i]);
    }
}
END_TEST

// Sampling runs GELU on one row of the hidden layer, training on all rows at
// once (threads, vector body, ragged ends all in other places); the model
// needs the same bits either way. Rows here start at unaligned offsets and
// have ragged widths.
START_TEST(an_element_gets_the_same_bits_alone_in_a_batch_and_on_any_thread_count) {
    const size_t n = 1 << 18;  // above gelu_fast.c's MIN_PARALLEL_ELEMENTS
    const size_t row_starts[] = {0, 1, 12345, n - 1000};
    const size_t row_width = 1000;
    Rng rng;
    rng_init(&rng, 51);
    float *x = xmalloc(n * sizeof(float)), *dout = xmalloc(n * sizeof(float));
    float *out[2], *dinp[2];
    for (size_t i = 0; i < n; i++) x[i] = 12.0f * rng_uniform(&rng) - 6.0f;
    fill_uniform(dout, n, &rng);
    int saved_threads = get_threads();
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        out[t] = xmalloc(n * sizeof(float));
        dinp[t] = xmalloc(n * sizeof(float));
        gelu_forward(out[t], x, n);
        fast_gelu_backward(dinp[t], x, dout, n);
    }
    ck_assert_msg(memcmp(out[0], out[1], n * sizeof(float)) == 0, "forward depends on the thread count");
    ck_assert_msg(memcmp(dinp[0], dinp[1], n * sizeof(float)) == 0, "backward depends on the thread count");
    float row_out[1000], row_dinp[1000];
    for (int r = 0; r < COUNT(row_starts); r++) {
        size_t start = row_starts[r];
        gelu_forward(row_out, x + start, row_width);
        fast_gelu_backward(row_dinp, x + start, dout + start, row_width);
        ck_assert_msg(memcmp(row_out, out[1] + start, sizeof row_out) == 0, "forward of row at %zu differs", start);
        ck_assert_msg(memcmp(row_dinp, dinp[1] + start, sizeof row_dinp) == 0, "backward of row at %zu differs",
                      start);
    }
    set_threads(saved_threads);
    for (int t = 0; t < 2; t++) {
        free(dinp[t]);
        free(out[t]);
    }
    free(dout);
    free(x);
}
END_TEST

// ---------------------------------------------------------------------------
// 5. GPT-2's tanh approximation (gelu_tanh_*).

// Fast vs reference, as FAST_MATCHES_REFERENCE_TOL. Forward: fast_expf's
// 1e-7 and a division against libm's tanhf, measured 2.1e-7. Backward:
// the reference's own 1 - t^2 cancels near |t| = 1 (t's rounding, 6e-8,
// times 0.5 x u', up to 10 around x = 3), where the fast form's e s^2 does
// not; measured 6.0e-7 (dout = 1). A lost term or a wrong constant is off by 1e-3.
static const double TANH_FORWARD_TOL = 5e-7, TANH_BACKWARD_TOL = 2e-6;

static const GeluForward TANH_FORWARDS[2] = {gelu_tanh_forward_reference, gelu_tanh_forward};
static const GeluBackward TANH_BACKWARDS[2] = {gelu_tanh_backward_reference, fast_gelu_tanh_backward};

// 0.5 x (1 + tanh u) and its slope, worked out in double (python's math.tanh).
static const double HAND_GELU_TANH[HAND_COUNT] = {0,           0.841191991, -0.158808009, 1.95459769,
                                                  -0.0454023059, 0.34571401, -0.00363739208};
static const double HAND_GELU_TANH_GRAD[HAND_COUNT] = {0.5,           1.08296408, -0.0829640838, 1.08609926,
                                                       -0.0860992566, 0.867369904, -0.0115841666};

START_TEST(tanh_form_gives_hand_checked_values_and_differs_from_erf) {
    float out[HAND_COUNT], dinp[HAND_COUNT], ones[HAND_COUNT], exact[HAND_COUNT];
    for (int i = 0; i < HAND_COUNT; i++) ones[i] = 1.0f;
    TANH_FORWARDS[_i](out, HAND_X, HAND_COUNT);
    TANH_BACKWARDS[_i](dinp, HAND_X, ones, HAND_COUNT);
    gelu_forward_reference(exact, HAND_X, HAND_COUNT);
    for (int i = 0; i < HAND_COUNT; i++) {
        ck_assert_msg(fabs(out[i] - HAND_GELU_TANH[i]) <= HAND_VALUE_TOL, "%s: gelu_tanh(%g) = %.9g, want %.9g",
                      VERSION_NAMES[_i], (double)HAND_X[i], (double)out[i], HAND_GELU_TANH[i]);
        ck_assert_msg(fabs(dinp[i] - HAND_GELU_TANH_GRAD[i]) <= HAND_VALUE_TOL,
                      "%s: gelu_tanh'(%g) = %.9g, want %.9g", VERSION_NAMES[_i], (double)HAND_X[i], (double)dinp[i],
                      HAND_GELU_TANH_GRAD[i]);
    }
    // It is an approximation: at x = -3 the two forms differ by 4e-4.
    ck_assert_msg(fabs(out[6] - exact[6]) > 1e-4, "%s: gelu_tanh(-3) is erf's", VERSION_NAMES[_i]);
}
END_TEST

// test_inputs' but for +-FLT_MAX, where x^2 overflows in u' (gelu.h).
START_TEST(tanh_form_fast_matches_reference_over_a_dense_range_and_extremes) {
    size_t n;
    float *x = test_inputs(&n);
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) == FLT_MAX) x[i] = copysignf(1e18f, x[i]);
    float *dout = xmalloc(n * sizeof(float));
    float *fast = xmalloc(n * sizeof(float)), *ref = xmalloc(n * sizeof(float));
    Rng rng;
    rng_init(&rng, 6);
    fill_uniform(dout, n, &rng);
    gelu_tanh_forward(fast, x, n);
    gelu_tanh_forward_reference(ref, x, n);
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)fast[i] - ref[i]) <= TANH_FORWARD_TOL * fmax(1.0, fabs(x[i]))))
            ck_abort_msg("gelu_tanh(%.9g): fast %.9g, reference %.9g", (double)x[i], (double)fast[i], (double)ref[i]);
    fast_gelu_tanh_backward(fast, x, dout, n);
    gelu_tanh_backward_reference(ref, x, dout, n);
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)fast[i] - ref[i]) <= TANH_BACKWARD_TOL * fmax(1.0, fabs(dout[i]))))
            ck_abort_msg("gelu_tanh backward at x = %.9g: fast %.9g, reference %.9g", (double)x[i], (double)fast[i],
                         (double)ref[i]);
    free(ref);
    free(fast);
    free(dout);
    free(x);
}
END_TEST

START_TEST(tanh_form_backward_matches_finite_differences) {
    GeluCase gc = {.forward = TANH_FORWARDS[_i]};
    Rng rng;
    rng_init(&rng, 32);
    float dout[GRAD_COUNT], dinp[GRAD_COUNT];
    for (int i = 0; i < GRAD_COUNT; i++) {
        gc.x[i] = -5.0f + 0.25f * (float)i;
        gc.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
        dout[i] = (float)gc.R[i];
    }
    TANH_BACKWARDS[_i](dinp, gc.x, dout, GRAD_COUNT);
    GradCheckResult r = gradcheck(gelu_loss, &gc, gc.x, dinp, GRAD_COUNT, GRADCHECK_FLOAT32);
    ck_assert_msg(r.failures == 0, "%s: %zu of %d elements off; worst x = %g: analytic %.6g numeric %.6g",
                  VERSION_NAMES[_i], r.failures, GRAD_COUNT, (double)gc.x[r.worst_index], r.worst_analytic,
                  r.worst_numeric);
}
END_TEST

START_TEST(tanh_form_backward_in_place_and_nan) {
    enum { N = 40 };
    float x[N], dout[N], out[N], dinp[N], in_place[N];
    for (int i = 0; i < N; i++) x[i] = dout[i] = 0.2f * (float)(i - N / 2);
    TANH_BACKWARDS[_i](dinp, x, dout, N);
    memcpy(in_place, dout, sizeof in_place);
    TANH_BACKWARDS[_i](in_place, x, in_place, N);
    ck_assert_msg(memcmp(in_place, dinp, sizeof dinp) == 0, "%s: in place differs", VERSION_NAMES[_i]);
    x[3] = x[37] = NAN;
    TANH_FORWARDS[_i](out, x, N);
    TANH_BACKWARDS[_i](dinp, x, dout, N);
    for (int i = 0; i < N; i++) {
        bool x_nan = i == 3 || i == 37;
        ck_assert_msg(isnan(out[i]) == x_nan && isnan(dinp[i]) == x_nan, "%s: x[%d] = %g gives %g, slope %g",
                      VERSION_NAMES[_i], i, (double)x[i], (double)out[i], (double)dinp[i]);
    }
}
END_TEST

Suite *gelu_suite(void) {
    Suite *s = suite_create("gelu");
    TCase *tc = tcase_create("core");
    // Loop tests with _i in [0, 2) run the reference version, then the fast one.
    tcase_add_loop_test(tc, forward_and_backward_give_hand_checked_values, 0, 2);
    tcase_add_loop_test(tc, large_x_passes_unchanged_and_large_negative_x_gives_zero, 0, 2);
    tcase_add_test(tc, fast_erff_keeps_its_stated_error_bound_and_nan);
    tcase_add_test(tc, fast_forward_matches_reference_over_a_dense_range_and_extremes);
    tcase_add_test(tc, fast_backward_matches_reference_over_a_dense_range_and_extremes);
    tcase_add_loop_test(tc, backward_matches_finite_differences, 0, 2);
    tcase_add_loop_test(tc, backward_in_place_gives_the_same_bits_as_out_of_place, 0, 2);
    tcase_add_loop_test(tc, nan_in_gives_nan_out, 0, 2);
    tcase_add_loop_test(tc, forward_backward_gives_the_forward_s_output, 0, 2);
    tcase_add_test(tc, an_element_gets_the_same_bits_alone_in_a_batch_and_on_any_thread_count);
    tcase_add_loop_test(tc, tanh_form_gives_hand_checked_values_and_differs_from_erf, 0, 2);
    tcase_add_test(tc, tanh_form_fast_matches_reference_over_a_dense_range_and_extremes);
    tcase_add_loop_test(tc, tanh_form_backward_matches_finite_differences, 0, 2);
    tcase_add_loop_test(tc, tanh_form_backward_in_place_and_nan, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
