// test_swiglu.c: tests for src/layers/swiglu.c (SwiGLU, silu(g) * u).
//
// 1. forward and backward on values worked out by hand;
// 2. backward against central finite differences of L = sum(swiglu(x) * R).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
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

START_TEST(forward_and_backward_give_hand_checked_values) {
    float out[HH], dfc[2 * HH], ones[HH] = {1, 1, 1};
    swiglu_forward(out, HAND_FC, 1, HH);
    swiglu_backward(dfc, ones, HAND_FC, 1, HH);
    for (int c = 0; c < HH; c++)
        ck_assert_msg(fabs(out[c] - HAND_OUT[c]) <= HAND_VALUE_TOL * fmax(1, fabs(HAND_OUT[c])),
                      "out[%d] = %.9g, want %.9g", c, (double)out[c], HAND_OUT[c]);
    for (int i = 0; i < 2 * HH; i++)
        ck_assert_msg(fabs(dfc[i] - HAND_DFC[i]) <= HAND_VALUE_TOL * fmax(1, fabs(HAND_DFC[i])),
                      "dfc[%d] = %.9g, want %.9g", i, (double)dfc[i], HAND_DFC[i]);
}
END_TEST

// 2. Finite differences: N = 4 rows, H = 6, g and u in [-3, 3].
enum { GN = 4, GH = 6 };

typedef struct {
    float fc[GN * 2 * GH], out[GN * GH];
    double R[GN * GH];
} SwigluCase;

static double swiglu_loss(void *ctx) {
    SwigluCase *sc = ctx;
    swiglu_forward(sc->out, sc->fc, GN, GH);
    double loss = 0;
    for (int i = 0; i < GN * GH; i++) loss += sc->out[i] * sc->R[i];
    return loss;
}

START_TEST(backward_matches_finite_differences) {
    SwigluCase sc;
    Rng rng;
    rng_init(&rng, 211);
    for (int i = 0; i < GN * 2 * GH; i++) sc.fc[i] = 6.0f * rng_uniform(&rng) - 3.0f;
    float dout[GN * GH], dfc[GN * 2 * GH];
    for (int i = 0; i < GN * GH; i++) dout[i] = (float)(sc.R[i] = 2.0 * rng_uniform(&rng) - 1.0);
    swiglu_backward(dfc, dout, sc.fc, GN, GH);
    assert_gradcheck_passes("fc_out", gradcheck(swiglu_loss, &sc, sc.fc, dfc, GN * 2 * GH, GRADCHECK_FLOAT32),
                            GN * 2 * GH);
}
END_TEST

Suite *swiglu_suite(void) {
    Suite *s = suite_create("swiglu");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_and_backward_give_hand_checked_values);
    tcase_add_test(tc, backward_matches_finite_differences);
    suite_add_tcase(s, tc);
    return s;
}
