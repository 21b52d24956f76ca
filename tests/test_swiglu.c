// test_swiglu.c: tests for src/layers/swiglu.c (SwiGLU, silu(g) * u, the
// reference) and swiglu_fast.c (the fast versions, on fast_exp_vec).
//
// 1. forward and backward, both versions, on values worked out by hand;
// 2. both backwards against central finite differences of
//    L = sum(swiglu(x) * R);
// 3. fast vs reference over a dense grid of g and u, and the extremes;
//    a row alone gives the bits it gives in a batch.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fast.h"
#include "gradcheck.h"
#include "helpers.h"
#include "rng.h"
#include "swiglu.h"
#include "tests.h"

// The hand values are given to 9 digits; float32 holds about 7.
static const double HAND_VALUE_TOL = 1e-6;

// 1. One row, H = 3: g = (0, 2, -1), u = (5, 3, 2).
//   sigmoid(0) = 0.5, sigmoid(2) = 0.880797078, sigmoid(-1) = 0.268941421
//   out = g s u            = (0, 5.28478247, -0.537882843)
//   dg  = u s (1 + g (1-s)) with dout = 1 = (2.5, 3.27235275, 0.144658976)
//   du  = g s              = (0, 1.76159416, -0.268941421)
enum { HH = 3 };
static const float HAND_FC[2 * HH] = {0, 2, -1, 5, 3, 2};
static const double HAND_OUT[HH] = {0, 5.28478247, -0.537882843};
static const double HAND_DFC[2 * HH] = {2.5, 3.27235275, 0.144658976, 0, 1.76159416, -0.268941421};

// Both versions, by the same arguments.
typedef struct {
    const char *name;
    void (*forward)(float *out, const float *fc_out, int N, int H);
    void (*backward)(float *dfc_out, const float *dout, const float *fc_out, int N, int H);
} Version;
static const Version VERSIONS[] = {
    {"reference", swiglu_forward_reference, swiglu_backward_reference},
    {"fast", swiglu_forward, swiglu_backward},
};

START_TEST(forward_and_backward_give_hand_checked_values) {
    const Version *v = &VERSIONS[_i];
    float out[HH], dfc[2 * HH], ones[HH] = {1, 1, 1};
    v->forward(out, HAND_FC, 1, HH);
    v->backward(dfc, ones, HAND_FC, 1, HH);
    for (int c = 0; c < HH; c++)
        ck_assert_msg(fabs(out[c] - HAND_OUT[c]) <= HAND_VALUE_TOL * fmax(1, fabs(HAND_OUT[c])),
                      "%s: out[%d] = %.9g, want %.9g", v->name, c, (double)out[c], HAND_OUT[c]);
    for (int i = 0; i < 2 * HH; i++)
        ck_assert_msg(fabs(dfc[i] - HAND_DFC[i]) <= HAND_VALUE_TOL * fmax(1, fabs(HAND_DFC[i])),
                      "%s: dfc[%d] = %.9g, want %.9g", v->name, i, (double)dfc[i], HAND_DFC[i]);
}
END_TEST

// 2. Finite differences: N = 4 rows, H = 6, g and u in [-3, 3].
enum { GN = 4, GH = 6 };

typedef struct {
    const Version *version;
    float fc[GN * 2 * GH], out[GN * GH];
    double R[GN * GH];
} SwigluCase;

static double swiglu_loss(void *ctx) {
    SwigluCase *sc = ctx;
    sc->version->forward(sc->out, sc->fc, GN, GH);
    double loss = 0;
    for (int i = 0; i < GN * GH; i++) loss += sc->out[i] * sc->R[i];
    return loss;
}

START_TEST(backward_matches_finite_differences) {
    SwigluCase sc = {.version = &VERSIONS[_i]};
    Rng rng;
    rng_init(&rng, 211);
    for (int i = 0; i < GN * 2 * GH; i++) sc.fc[i] = 6.0f * rng_uniform(&rng) - 3.0f;
    float dout[GN * GH], dfc[GN * 2 * GH];
    for (int i = 0; i < GN * GH; i++) dout[i] = (float)(sc.R[i] = 2.0 * rng_uniform(&rng) - 1.0);
    sc.version->backward(dfc, dout, sc.fc, GN, GH);
    assert_gradcheck_passes("fc_out", gradcheck(swiglu_loss, &sc, sc.fc, dfc, GN * 2 * GH, GRADCHECK_FLOAT32),
                            GN * 2 * GH);
}
END_TEST

// 3. Fast vs reference: rows of H = 37 channels (whole vectors and a
// ragged last piece on every path), g from -20 to 20 in steps of 1e-3
// against u and dout of both signs, then the extremes.
static const double FAST_MATCHES_REFERENCE_TOL = 1e-6;
enum { FH = 37 };

static bool close_to(float got, float want) {
    return fabs((double)got - (double)want) <= FAST_MATCHES_REFERENCE_TOL * fmax(1.0, fabs((double)want));
}

START_TEST(fast_matches_reference_over_a_dense_range_and_extremes) {
    enum { N = 40001 / FH + 1 };
    float *fc = xmalloc(sizeof(float) * N * 2 * FH), *dout = xmalloc(sizeof(float) * N * FH);
    float *out_fast = xmalloc(sizeof(float) * N * FH), *out_ref = xmalloc(sizeof(float) * N * FH);
    float *dfc_fast = xmalloc(sizeof(float) * N * 2 * FH), *dfc_ref = xmalloc(sizeof(float) * N * 2 * FH);
    for (int n = 0; n < N; n++)
        for (int c = 0; c < FH; c++) {
            const int i = n * FH + c;
            fc[n * 2 * FH + c] = (float)(-20.0 + 1e-3 * i);                  // g
            fc[n * 2 * FH + FH + c] = (float)(i % 7 - 3) * 0.75f;             // u
            dout[i] = (float)(i % 5 - 2) * 0.5f + 0.125f;
        }
    const float EXTREMES[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 80.0f, -80.0f, 88.5f, -88.5f, 100.0f, -100.0f};
    for (int e = 0; e < (int)(sizeof EXTREMES / sizeof EXTREMES[0]); e++) fc[e] = EXTREMES[e];
    swiglu_forward(out_fast, fc, N, FH);
    swiglu_forward_reference(out_ref, fc, N, FH);
    swiglu_backward(dfc_fast, dout, fc, N, FH);
    swiglu_backward_reference(dfc_ref, dout, fc, N, FH);
    for (int i = 0; i < N * FH; i++)
        if (!close_to(out_fast[i], out_ref[i]))
            ck_abort_msg("out[%d] (g %.9g): fast %.9g, reference %.9g", i, (double)fc[i / FH * 2 * FH + i % FH],
                         (double)out_fast[i], (double)out_ref[i]);
    for (int i = 0; i < N * 2 * FH; i++)
        if (!close_to(dfc_fast[i], dfc_ref[i]))
            ck_abort_msg("dfc[%d]: fast %.9g, reference %.9g", i, (double)dfc_fast[i], (double)dfc_ref[i]);
    // a row alone: the bits it gives in the batch
    float row_out[FH], row_dfc[2 * FH];
    for (int n = 0; n < N; n += 97) {
        swiglu_forward(row_out, fc + n * 2 * FH, 1, FH);
        swiglu_backward(row_dfc, dout + n * FH, fc + n * 2 * FH, 1, FH);
        ck_assert(memcmp(row_out, out_fast + n * FH, sizeof row_out) == 0);
        ck_assert(memcmp(row_dfc, dfc_fast + n * 2 * FH, sizeof row_dfc) == 0);
    }
    free(dfc_ref);
    free(dfc_fast);
    free(out_ref);
    free(out_fast);
    free(dout);
    free(fc);
}
END_TEST

Suite *swiglu_suite(void) {
    Suite *s = suite_create("swiglu");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, forward_and_backward_give_hand_checked_values, 0, 2);
    tcase_add_loop_test(tc, backward_matches_finite_differences, 0, 2);
    tcase_add_test(tc, fast_matches_reference_over_a_dense_range_and_extremes);
    suite_add_tcase(s, tc);
    return s;
}
