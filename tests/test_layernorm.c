// test_layernorm.c: tests for src/layers/layernorm.c and layernorm_fast.c
// (LayerNorm, weight, no bias).
//
// 1. forward on rows worked out by hand (one ordinary, one constant);
// 2. backward against central finite differences of L = sum(out * R) for
//    both inp and weight, and that it adds to both gradients;
// 3. the same bits on 1 and 2 threads, and for a row alone as inside a
//    batch (sampling normalises one position at a time, training all);
// 4. the fast versions against the plain reference loops.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fast.h"
#include "gradcheck.h"
#include "helpers.h"
#include "layernorm.h"
#include "rng.h"
#include "tests.h"

// The hand values are given to 9 digits; float32 holds about 7.
static const double HAND_VALUE_TOL = 1e-6;

// Gradient from a non-zero start vs start + gradient from zero: they add the
// same terms but round differently (dweight sums N rows onto its start), by
// a few float32 steps (1.2e-7 relative each). Forgetting the start, or
// writing instead of adding, is off by the start itself, O(1).
static const double ADDS_TO_START_RTOL = 1e-5;

// ---------------------------------------------------------------------------
// 1. Hand-computed rows, C = 4.
//   row 0: x = (1, 2, 3, 4): mean 2.5, deviations (-1.5, -0.5, 0.5, 1.5),
//          var = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25 (divided by C, not C - 1),
//          rstd = 1 / sqrt(1.25 + 1e-5) = 0.894423613;
//          out = deviation * rstd * weight, weight = (1, 2, -1, 0.5).
//   row 1: x = (5, 5, 5, 5): mean 5, var 0, rstd = 1 / sqrt(1e-5) = 316.227766
//          (eps keeps it finite), and every deviation is exactly 0, so out is 0.

enum { HN = 2, HC = 4 };
static const float HAND_INP[HN * HC] = {1, 2, 3, 4, 5, 5, 5, 5};
static const float HAND_WEIGHT[HC] = {1, 2, -1, 0.5f};
static const double HAND_RSTD[HN] = {0.894423613, 316.227766};
static const double HAND_OUT[HN * HC] = {-1.34163542, -0.894423613, -0.447211807, 0.67081771, 0, 0, 0, 0};

START_TEST(forward_normalises_a_hand_computed_row_and_a_constant_one) {
    float out[HN * HC], mean[HN], rstd[HN];
    layernorm_forward(out, mean, rstd, HAND_INP, HAND_WEIGHT, HN, HC);
    ck_assert_float_eq(mean[0], 2.5f);  // sums of small integers: exact
    ck_assert_float_eq(mean[1], 5.0f);
    for (int n = 0; n < HN; n++)
        ck_assert_msg(fabs(rstd[n] - HAND_RSTD[n]) <= HAND_VALUE_TOL * HAND_RSTD[n], "rstd[%d] = %.9g, want %.9g", n,
                      (double)rstd[n], HAND_RSTD[n]);
    for (int i = 0; i < HN * HC; i++)
        ck_assert_msg(fabs(out[i] - HAND_OUT[i]) <= HAND_VALUE_TOL, "out[%d] = %.9g, want %.9g", i, (double)out[i],
                      HAND_OUT[i]);
    for (int c = 0; c < HC; c++) ck_assert_float_eq(out[HC + c], 0.0f);
}
END_TEST

// ---------------------------------------------------------------------------
// 2. Finite differences: N = 3 rows, C = 7 channels. The rows sit around 3
// (a mean far from 0) with a spread of about 1, the weight around 1.

enum { GN = 3, GC = 7 };

typedef struct {
    float inp[GN * GC], weight[GC];
    float out[GN * GC], mean[GN], rstd[GN];
    double R[GN * GC];
} LayerNormCase;

static void layernorm_case_init(LayerNormCase *lc, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    for (int i = 0; i < GN * GC; i++) lc->inp[i] = 3.0f + 2.0f * rng_uniform(&rng) - 1.0f;
    for (int c = 0; c < GC; c++) lc->weight[c] = 1.0f + 0.5f * (2.0f * rng_uniform(&rng) - 1.0f);
    for (int i = 0; i < GN * GC; i++) lc->R[i] = 2.0 * rng_uniform(&rng) - 1.0;
}

// L = sum(out * R), in double
static double layernorm_loss(void *ctx) {
    LayerNormCase *lc = ctx;
    layernorm_forward(lc->out, lc->mean, lc->rstd, lc->inp, lc->weight, GN, GC);
    double loss = 0;
    for (int i = 0; i < GN * GC; i++) loss += lc->out[i] * lc->R[i];
    return loss;
}

// One backward with dout = R from zeroed gradients, into dinp[GN*GC] and dweight[GC].
static void layernorm_case_backward(LayerNormCase *lc, float *dinp, float *dweight) {
    float dout[GN * GC];
    for (int i = 0; i < GN * GC; i++) dout[i] = (float)lc->R[i];  // dL/dout = R
    layernorm_loss(lc);                                             // fills mean and rstd
    layernorm_backward(dinp, dweight, dout, lc->inp, lc->weight, lc->mean, lc->rstd, GN, GC);
}

START_TEST(backward_matches_finite_differences_for_inp_and_weight) {
    LayerNormCase lc;
    layernorm_case_init(&lc, 71);
    float dinp[GN * GC] = {0}, dweight[GC] = {0};
    layernorm_case_backward(&lc, dinp, dweight);
    assert_gradcheck_passes("inp", gradcheck(layernorm_loss, &lc, lc.inp, dinp, GN * GC, GRADCHECK_FLOAT32),
                            GN * GC);
    assert_gradcheck_passes("weight", gradcheck(layernorm_loss, &lc, lc.weight, dweight, GC, GRADCHECK_FLOAT32),
                            GC);
}
END_TEST

// layernorm_case_backward for expect_backward_adds
static void layernorm_case_backward_adds(void *ctx, float *dinp, float *dweight) {
    layernorm_case_backward(ctx, dinp, dweight);
}

// dinp collects the residual stream's gradient from two consumers, so the
// values it held must stay and the gradient be added; dweight likewise.
START_TEST(backward_adds_to_dinp_and_dweight) {
    LayerNormCase lc;
    layernorm_case_init(&lc, 72);
    expect_backward_adds(layernorm_case_backward_adds, &lc, GN * GC, GC, 73, ADDS_TO_START_RTOL);
}
END_TEST

// ---------------------------------------------------------------------------
// 3. Bits. N * C = 39000 is above layernorm_fast.c's MIN_PARALLEL_WORK, so two
// threads share the rows (and the channel runs of dweight: C = 130 is two
// full runs of 64 and a ragged one of 2).

enum { BN = 300, BC = 130 };

typedef struct {
    float *inp, *weight, *dout, *dinp_start, *dweight_start;  // inputs
    float *out, *mean, *rstd, *dinp, *dweight;                // results
} Batch;

static Batch batch_new(uint64_t seed) {
    Batch b;
    const size_t nc = (size_t)BN * BC;
    b.inp = xmalloc(nc * sizeof(float));
    b.weight = xmalloc(BC * sizeof(float));
    b.dout = xmalloc(nc * sizeof(float));
    b.dinp_start = xmalloc(nc * sizeof(float));
    b.dweight_start = xmalloc(BC * sizeof(float));
    b.out = xmalloc(nc * sizeof(float));
    b.mean = xmalloc(BN * sizeof(float));
    b.rstd = xmalloc(BN * sizeof(float));
    b.dinp = xmalloc(nc * sizeof(float));
    b.dweight = xmalloc(BC * sizeof(float));
    Rng rng;
    rng_init(&rng, seed);
    fill_uniform(b.inp, nc, &rng);
    fill_uniform(b.weight, BC, &rng);
    fill_uniform(b.dout, nc, &rng);
    fill_uniform(b.dinp_start, nc, &rng);
    fill_uniform(b.dweight_start, BC, &rng);
    return b;
}

// Forward and backward over the whole batch, from the start gradients.
static void batch_run(Batch *b) {
    memcpy(b->dinp, b->dinp_start, (size_t)BN * BC * sizeof(float));
    memcpy(b->dweight, b->dweight_start, BC * sizeof(float));
    layernorm_forward(b->out, b->mean, b->rstd, b->inp, b->weight, BN, BC);
    layernorm_backward(b->dinp, b->dweight, b->dout, b->inp, b->weight, b->mean, b->rstd, BN, BC);
}

static void batch_free(Batch *b) {
    float *all[] = {b->inp, b->weight, b->dout, b->dinp_start, b->dweight_start,
                    b->out, b->mean,   b->rstd, b->dinp,       b->dweight};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

START_TEST(one_and_two_threads_give_identical_bits) {
    Batch b[2] = {batch_new(81), batch_new(81)};
    int saved_threads = get_threads();
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        batch_run(&b[t]);
    }
    set_threads(saved_threads);
    const size_t nc = (size_t)BN * BC * sizeof(float);
    ck_assert_msg(memcmp(b[0].out, b[1].out, nc) == 0, "out depends on the thread count");
    ck_assert_msg(memcmp(b[0].mean, b[1].mean, BN * sizeof(float)) == 0, "mean depends on the thread count");
    ck_assert_msg(memcmp(b[0].rstd, b[1].rstd, BN * sizeof(float)) == 0, "rstd depends on the thread count");
    ck_assert_msg(memcmp(b[0].dinp, b[1].dinp, nc) == 0, "dinp depends on the thread count");
    ck_assert_msg(memcmp(b[0].dweight, b[1].dweight, BC * sizeof(float)) == 0, "dweight depends on the thread count");
    batch_free(&b[1]);
    batch_free(&b[0]);
}
END_TEST

START_TEST(a_row_alone_gives_the_same_bits_as_inside_a_batch) {
    Batch b = batch_new(82);
    int saved_threads = get_threads();
    set_threads(2);
    batch_run(&b);
    const int rows[] = {0, 17, BN - 1};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const size_t at = (size_t)rows[r] * BC;
        float out[BC], mean, rstd, dinp[BC], dweight[BC] = {0};
        memcpy(dinp, b.dinp_start + at, sizeof dinp);
        layernorm_forward(out, &mean, &rstd, b.inp + at, b.weight, 1, BC);
        layernorm_backward(dinp, dweight, b.dout + at, b.inp + at, b.weight, &mean, &rstd, 1, BC);
        ck_assert_msg(memcmp(out, b.out + at, sizeof out) == 0, "out of row %d differs", rows[r]);
        ck_assert_msg(mean == b.mean[rows[r]] && rstd == b.rstd[rows[r]], "mean or rstd of row %d differs", rows[r]);
        ck_assert_msg(memcmp(dinp, b.dinp + at, sizeof dinp) == 0, "dinp of row %d differs", rows[r]);
    }
    set_threads(saved_threads);
    batch_free(&b);
}
END_TEST

// 4. The fast versions (sums in 16 lanes, threads) against the reference
// loops (one running sum), on ragged widths (a partial last vector) and on
// rows far from zero (the mean large next to the spread). The two add the
// same terms in another order, so they agree to float32 rounding: a few
// units of 6e-8 relative on sums of up to 200 terms. An indexing or
// padding mistake is off by O(1).
static const double FAST_MATCHES_REFERENCE_RTOL = 2e-5;

START_TEST(fast_versions_match_the_reference_loops) {
    const int widths[] = {1, 7, 16, 33, 128, 200};
    Rng rng;
    rng_init(&rng, 91);
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int N = 5, C = widths[w];
        const size_t n = (size_t)N * C;
        float *inp = xmalloc(n * sizeof(float)), *dout = xmalloc(n * sizeof(float));
        float *weight = xmalloc((size_t)C * sizeof(float));
        fill_uniform(inp, n, &rng);
        for (size_t i = 0; i < n; i++) inp[i] = 3.0f * inp[i] + (float)(i / C);  // row n centred near n
        fill_uniform(dout, n, &rng);
        fill_uniform(weight, (size_t)C, &rng);
        float *out[2], *mean[2], *rstd[2], *dinp[2], *dweight[2];
        for (int v = 0; v < 2; v++) {
            out[v] = xmalloc(n * sizeof(float));
            dinp[v] = xcalloc(n, sizeof(float));
            mean[v] = xmalloc((size_t)N * sizeof(float));
            rstd[v] = xmalloc((size_t)N * sizeof(float));
            dweight[v] = xcalloc((size_t)C, sizeof(float));
        }
        layernorm_forward(out[0], mean[0], rstd[0], inp, weight, N, C);
        layernorm_forward_reference(out[1], mean[1], rstd[1], inp, weight, N, C);
        layernorm_backward(dinp[0], dweight[0], dout, inp, weight, mean[0], rstd[0], N, C);
        layernorm_backward_reference(dinp[1], dweight[1], dout, inp, weight, mean[1], rstd[1], N, C);
        assert_all_close("out", out[0], out[1], n, FAST_MATCHES_REFERENCE_RTOL);
        assert_all_close("dinp", dinp[0], dinp[1], n, FAST_MATCHES_REFERENCE_RTOL);
        assert_all_close("dweight", dweight[0], dweight[1], (size_t)C, FAST_MATCHES_REFERENCE_RTOL);
        for (int v = 0; v < 2; v++) {
            free(out[v]);
            free(dinp[v]);
            free(mean[v]);
            free(rstd[v]);
            free(dweight[v]);
        }
        free(weight);
        free(dout);
        free(inp);
    }
}
END_TEST

Suite *layernorm_suite(void) {
    Suite *s = suite_create("layernorm");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_normalises_a_hand_computed_row_and_a_constant_one);
    tcase_add_test(tc, backward_matches_finite_differences_for_inp_and_weight);
    tcase_add_test(tc, backward_adds_to_dinp_and_dweight);
    tcase_add_test(tc, one_and_two_threads_give_identical_bits);
    tcase_add_test(tc, a_row_alone_gives_the_same_bits_as_inside_a_batch);
    tcase_add_test(tc, fast_versions_match_the_reference_loops);
    suite_add_tcase(s, tc);
    return s;
}
