// test_rmsnorm.c: tests for src/layers/rmsnorm.c (RMSNorm, weight, no bias).
//
// 1. forward on rows worked out by hand (one ordinary, one of zeros);
// 2. backward against central finite differences of L = sum(out * R) for
//    both inp and weight, and that it adds to both gradients;
// 3. a row alone gives the same bits as inside a batch (sampling
//    normalises one position at a time, training all);
// 4. QK-norm (qk_norm_forward_reference/backward): every head of q and k at length
//    sqrt(HS) and v untouched, no weight the same bits as a weight of ones,
//    and the backward, in place on dqkv, against finite differences.
// 5. The fast versions (rmsnorm_fast.c) give the references' bits: every
//    output, rstd and gradient, for row counts and widths that fill a
//    vector's lanes and ones that leave some over.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "fast.h"
#include "gradcheck.h"
#include "helpers.h"
#include "rmsnorm.h"
#include "rng.h"
#include "tests.h"

// The hand values are given to 9 digits; float32 holds about 7.
static const double HAND_VALUE_TOL = 1e-6;

// Gradient from a non-zero start vs start + gradient from zero: they add the
// same terms but round differently, by a few float32 steps (1.2e-7 relative
// each). Forgetting the start, or writing instead of adding, is off by the
// start itself, O(1).
static const double ADDS_TO_START_RTOL = 1e-5;

// ---------------------------------------------------------------------------
// 1. Hand-computed rows, C = 4.
//   row 0: x = (1, 2, 3, 4): mean square (1 + 4 + 9 + 16) / 4 = 7.5 (no
//          mean is taken out: LayerNorm's would be 2.5, its variance 1.25),
//          rstd = 1 / sqrt(7.5 + 1e-5) = 0.365148128;
//          out = x * rstd * weight, weight = (1, 2, -1, 0.5).
//   row 1: x = 0: rstd = 1 / sqrt(1e-5) = 316.227766 (eps keeps it finite), out 0.

enum { HN = 2, HC = 4 };
static const float HAND_INP[HN * HC] = {1, 2, 3, 4, 0, 0, 0, 0};
static const float HAND_WEIGHT[HC] = {1, 2, -1, 0.5f};
static const double HAND_RSTD[HN] = {0.365148128, 316.227766};
static const double HAND_OUT[HN * HC] = {0.365148128, 1.46059251, -1.09544438, 0.730296256, 0, 0, 0, 0};

START_TEST(forward_scales_a_hand_computed_row_by_its_root_mean_square_and_keeps_a_zero_row_finite) {
    float out[HN * HC], rstd[HN];
    rmsnorm_forward_reference(out, rstd, HAND_INP, HAND_WEIGHT, HN, HC);
    for (int n = 0; n < HN; n++)
        ck_assert_msg(fabs(rstd[n] - HAND_RSTD[n]) <= HAND_VALUE_TOL * HAND_RSTD[n], "rstd[%d] = %.9g, want %.9g", n,
                      (double)rstd[n], HAND_RSTD[n]);
    for (int i = 0; i < HN * HC; i++)
        ck_assert_msg(fabs(out[i] - HAND_OUT[i]) <= HAND_VALUE_TOL, "out[%d] = %.9g, want %.9g", i, (double)out[i],
                      HAND_OUT[i]);
}
END_TEST

// ---------------------------------------------------------------------------
// 2. Finite differences: N = 3 rows, C = 7 channels. The rows sit around 3
// (RMSNorm, unlike LayerNorm, sees the offset) with a spread of about 1,
// the weight around 1.

enum { GN = 3, GC = 7 };

typedef struct {
    float inp[GN * GC], weight[GC];
    float out[GN * GC], rstd[GN];
    double R[GN * GC];
} RmsNormCase;

static void rmsnorm_case_init(RmsNormCase *rc, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    for (int i = 0; i < GN * GC; i++) rc->inp[i] = 3.0f + 2.0f * rng_uniform(&rng) - 1.0f;
    for (int c = 0; c < GC; c++) rc->weight[c] = 1.0f + 0.5f * (2.0f * rng_uniform(&rng) - 1.0f);
    for (int i = 0; i < GN * GC; i++) rc->R[i] = 2.0 * rng_uniform(&rng) - 1.0;
}

// L = sum(out * R), in double
static double rmsnorm_loss(void *ctx) {
    RmsNormCase *rc = ctx;
    rmsnorm_forward_reference(rc->out, rc->rstd, rc->inp, rc->weight, GN, GC);
    double loss = 0;
    for (int i = 0; i < GN * GC; i++) loss += rc->out[i] * rc->R[i];
    return loss;
}

// One backward with dout = R, into dinp[GN*GC] and dweight[GC].
static void rmsnorm_case_backward(RmsNormCase *rc, float *dinp, float *dweight) {
    float dout[GN * GC];
    for (int i = 0; i < GN * GC; i++) dout[i] = (float)rc->R[i];  // dL/dout = R
    rmsnorm_loss(rc);                                             // fills rstd
    rmsnorm_backward_reference(dinp, dweight, dout, rc->inp, rc->weight, rc->rstd, GN, GC);
}

START_TEST(backward_matches_finite_differences_for_inp_and_weight) {
    RmsNormCase rc;
    rmsnorm_case_init(&rc, 171);
    float dinp[GN * GC] = {0}, dweight[GC] = {0};
    rmsnorm_case_backward(&rc, dinp, dweight);
    assert_gradcheck_passes("inp", gradcheck(rmsnorm_loss, &rc, rc.inp, dinp, GN * GC, GRADCHECK_FLOAT32), GN * GC);
    assert_gradcheck_passes("weight", gradcheck(rmsnorm_loss, &rc, rc.weight, dweight, GC, GRADCHECK_FLOAT32), GC);
}
END_TEST

// rmsnorm_case_backward for expect_backward_adds
static void rmsnorm_case_backward_adds(void *ctx, float *dinp, float *dweight) {
    rmsnorm_case_backward(ctx, dinp, dweight);
}

// dinp collects the residual stream's gradient from two consumers, so the
// values it held must stay and the gradient be added; dweight likewise.
START_TEST(backward_adds_to_dinp_and_dweight) {
    RmsNormCase rc;
    rmsnorm_case_init(&rc, 172);
    expect_backward_adds(rmsnorm_case_backward_adds, &rc, GN * GC, GC, 173, ADDS_TO_START_RTOL);
}
END_TEST

// ---------------------------------------------------------------------------
// 3. Bits: rows normalised alone against the same rows in a batch.

enum { BN = 40, BC = 130 };

START_TEST(a_row_alone_gives_the_same_bits_as_inside_a_batch) {
    const size_t nc = (size_t)BN * BC;
    float *inp = xmalloc(nc * sizeof(float)), *dout = xmalloc(nc * sizeof(float));
    float *out = xmalloc(nc * sizeof(float)), *dinp = xcalloc(nc, sizeof(float));
    float weight[BC], rstd[BN], dweight[BC] = {0};
    Rng rng;
    rng_init(&rng, 182);
    fill_uniform(inp, nc, &rng);
    fill_uniform(dout, nc, &rng);
    fill_uniform(weight, BC, &rng);
    rmsnorm_forward_reference(out, rstd, inp, weight, BN, BC);
    rmsnorm_backward_reference(dinp, dweight, dout, inp, weight, rstd, BN, BC);
    const int rows[] = {0, 17, BN - 1};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const size_t at = (size_t)rows[r] * BC;
        float out_1[BC], rstd_1, dinp_1[BC] = {0}, dweight_1[BC] = {0};
        rmsnorm_forward_reference(out_1, &rstd_1, inp + at, weight, 1, BC);
        rmsnorm_backward_reference(dinp_1, dweight_1, dout + at, inp + at, weight, &rstd_1, 1, BC);
        ck_assert_msg(memcmp(out_1, out + at, sizeof out_1) == 0, "out of row %d differs", rows[r]);
        ck_assert_msg(rstd_1 == rstd[rows[r]], "rstd of row %d differs", rows[r]);
        ck_assert_msg(memcmp(dinp_1, dinp + at, sizeof dinp_1) == 0, "dinp of row %d differs", rows[r]);
    }
    free(dinp);
    free(out);
    free(dout);
    free(inp);
}
END_TEST

// ---------------------------------------------------------------------------
// 4. QK-norm: N = 3 rows of qkv, C = 8, NH = 2 (HS = 4).

enum { QN = 3, QC = 8, QNH = 2, QHS = QC / QNH };

// A head's squared length after the norm is HS * ms / (ms + eps): HS to
// within eps / ms (rows of O(1): 1e-5) and float rounding.
static const double HEAD_LENGTH_RTOL = 1e-4;

START_TEST(qk_norm_puts_every_head_of_q_and_k_at_length_sqrt_hs_and_leaves_v_alone) {
    float qkv[QN * 3 * QC], before[QN * 3 * QC], rstd[QN * 2 * QNH];
    Rng rng;
    rng_init(&rng, 191);
    for (int i = 0; i < QN * 3 * QC; i++) qkv[i] = 3.0f * (2.0f * rng_uniform(&rng) - 1.0f);
    memcpy(before, qkv, sizeof qkv);
    qk_norm_forward_reference(qkv, rstd, QN, QC, QNH);
    for (int n = 0; n < QN; n++) {
        for (int h = 0; h < 2 * QNH; h++) {
            double sq = 0;
            for (int c = 0; c < QHS; c++) sq += (double)qkv[n * 3 * QC + h * QHS + c] * qkv[n * 3 * QC + h * QHS + c];
            ck_assert_msg(fabs(sq - QHS) <= HEAD_LENGTH_RTOL * QHS, "row %d head %d: squared length %g, want %d", n,
                          h, sq, QHS);
        }
        ck_assert_msg(memcmp(qkv + n * 3 * QC + 2 * QC, before + n * 3 * QC + 2 * QC, QC * sizeof(float)) == 0,
                      "v of row %d changed", n);
    }
}
END_TEST

START_TEST(no_weight_gives_the_bits_of_a_weight_of_ones) {
    float inp[GN * GC], ones[GC], with[GN * GC], without[GN * GC], rstd[GN];
    Rng rng;
    rng_init(&rng, 192);
    fill_uniform(inp, GN * GC, &rng);
    for (int c = 0; c < GC; c++) ones[c] = 1.0f;
    rmsnorm_forward_reference(with, rstd, inp, ones, GN, GC);
    rmsnorm_forward_reference(without, rstd, inp, NULL, GN, GC);
    ck_assert(memcmp(with, without, sizeof with) == 0);
}
END_TEST

typedef struct {
    float qkv[QN * 3 * QC];  // before the norm
    float out[QN * 3 * QC], rstd[QN * 2 * QNH];
    double R[QN * 3 * QC];
} QkNormCase;

// L = sum(qk_norm(qkv) * R), in double
static double qk_norm_loss(void *ctx) {
    QkNormCase *qc = ctx;
    memcpy(qc->out, qc->qkv, sizeof qc->out);
    qk_norm_forward_reference(qc->out, qc->rstd, QN, QC, QNH);
    double loss = 0;
    for (int i = 0; i < QN * 3 * QC; i++) loss += qc->out[i] * qc->R[i];
    return loss;
}

START_TEST(qk_norm_backward_matches_finite_differences_and_passes_v_through) {
    QkNormCase qc;
    Rng rng;
    rng_init(&rng, 193);
    for (int i = 0; i < QN * 3 * QC; i++) qc.qkv[i] = 2.0f * rng_uniform(&rng) - 1.0f;
    for (int i = 0; i < QN * 3 * QC; i++) qc.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
    float d[QN * 3 * QC];
    for (int i = 0; i < QN * 3 * QC; i++) d[i] = (float)qc.R[i];  // dL/d out = R, then in place
    qk_norm_loss(&qc);                                           // out and rstd
    qk_norm_backward_reference(d, qc.out, qc.rstd, QN, QC, QNH);
    assert_gradcheck_passes("qkv", gradcheck(qk_norm_loss, &qc, qc.qkv, d, QN * 3 * QC, GRADCHECK_FLOAT32),
                            QN * 3 * QC);
}
END_TEST

// ---------------------------------------------------------------------------
// 5. Fast against reference, bit for bit.

// Each of the four functions, fast and reference, on the same random
// inputs (dinp and dweight start non-zero: both are added to); the
// buffers compared whole, memcmp.
static void expect_fast_bits(int N, int C, int NH, uint64_t seed) {
    const size_t nc = (size_t)N * C, nqkv = 3 * nc, nheads = (size_t)N * 2 * NH;
    float *inp = xmalloc(nc * sizeof(float)), *dout = xmalloc(nc * sizeof(float)), *weight = xmalloc(C * sizeof(float));
    float *out[2], *rstd[2], *dinp[2], *dweight[2], *qkv[2], *qk_rstd[2], *dqkv[2];
    Rng rng;
    rng_init(&rng, seed);
    fill_uniform(inp, nc, &rng);
    fill_uniform(dout, nc, &rng);
    fill_uniform(weight, (size_t)C, &rng);
    float *qkv_start = xmalloc(nqkv * sizeof(float)), *dqkv_start = xmalloc(nqkv * sizeof(float));
    float *dinp_start = xmalloc(nc * sizeof(float)), *dweight_start = xmalloc(C * sizeof(float));
    fill_uniform(qkv_start, nqkv, &rng);
    fill_uniform(dqkv_start, nqkv, &rng);
    fill_uniform(dinp_start, nc, &rng);
    fill_uniform(dweight_start, (size_t)C, &rng);
    for (int v = 0; v < 2; v++) {  // 0 reference, 1 fast
        out[v] = xmalloc(nc * sizeof(float)), rstd[v] = xmalloc(N * sizeof(float));
        dinp[v] = xmalloc(nc * sizeof(float)), dweight[v] = xmalloc(C * sizeof(float));
        qkv[v] = xmalloc(nqkv * sizeof(float)), qk_rstd[v] = xmalloc(nheads * sizeof(float));
        dqkv[v] = xmalloc(nqkv * sizeof(float));
        memcpy(dinp[v], dinp_start, nc * sizeof(float));
        memcpy(dweight[v], dweight_start, C * sizeof(float));
        memcpy(qkv[v], qkv_start, nqkv * sizeof(float));
        memcpy(dqkv[v], dqkv_start, nqkv * sizeof(float));
    }
    rmsnorm_forward_reference(out[0], rstd[0], inp, weight, N, C);
    rmsnorm_forward(out[1], rstd[1], inp, weight, N, C);
    rmsnorm_backward_reference(dinp[0], dweight[0], dout, inp, weight, rstd[0], N, C);
    rmsnorm_backward(dinp[1], dweight[1], dout, inp, weight, rstd[1], N, C);
    qk_norm_forward_reference(qkv[0], qk_rstd[0], N, C, NH);
    qk_norm_forward(qkv[1], qk_rstd[1], N, C, NH);
    qk_norm_backward_reference(dqkv[0], qkv[0], qk_rstd[0], N, C, NH);
    qk_norm_backward(dqkv[1], qkv[1], qk_rstd[1], N, C, NH);
    ck_assert_msg(memcmp(out[0], out[1], nc * sizeof(float)) == 0, "N %d C %d: out differs", N, C);
    ck_assert_msg(memcmp(rstd[0], rstd[1], N * sizeof(float)) == 0, "N %d C %d: rstd differs", N, C);
    ck_assert_msg(memcmp(dinp[0], dinp[1], nc * sizeof(float)) == 0, "N %d C %d: dinp differs", N, C);
    ck_assert_msg(memcmp(dweight[0], dweight[1], C * sizeof(float)) == 0, "N %d C %d: dweight differs", N, C);
    ck_assert_msg(memcmp(qkv[0], qkv[1], nqkv * sizeof(float)) == 0, "N %d C %d NH %d: qk-norm's qkv differs", N, C,
                  NH);
    ck_assert_msg(memcmp(qk_rstd[0], qk_rstd[1], nheads * sizeof(float)) == 0, "N %d C %d NH %d: qk-norm's rstd differs",
                  N, C, NH);
    ck_assert_msg(memcmp(dqkv[0], dqkv[1], nqkv * sizeof(float)) == 0, "N %d C %d NH %d: qk-norm's dqkv differs", N, C,
                  NH);
    for (int v = 0; v < 2; v++) {
        free(out[v]), free(rstd[v]), free(dinp[v]), free(dweight[v]), free(qkv[v]), free(qk_rstd[v]), free(dqkv[v]);
    }
    free(qkv_start), free(dqkv_start), free(dinp_start), free(dweight_start);
    free(weight), free(dout), free(inp);
}

START_TEST(the_fast_versions_give_the_references_bits) {
    // widths: under a vector, whole vectors of every path (16 floats),
    // ragged; heads of 1, 3, 8 and 32 channels; row counts under, at and
    // past a group of lanes. 768 x 128: the default gpt's slice, parallel.
    const struct { int N, C, NH; } shapes[] = {{1, 3, 1},  {5, 13, 1},  {16, 16, 2},  {17, 24, 8},
                                               {33, 130, 10}, {7, 128, 4}, {768, 128, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        expect_fast_bits(shapes[i].N, shapes[i].C, shapes[i].NH, 300 + i);
}
END_TEST

Suite *rmsnorm_suite(void) {
    Suite *s = suite_create("rmsnorm");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_scales_a_hand_computed_row_by_its_root_mean_square_and_keeps_a_zero_row_finite);
    tcase_add_test(tc, backward_matches_finite_differences_for_inp_and_weight);
    tcase_add_test(tc, backward_adds_to_dinp_and_dweight);
    tcase_add_test(tc, a_row_alone_gives_the_same_bits_as_inside_a_batch);
    tcase_add_test(tc, qk_norm_puts_every_head_of_q_and_k_at_length_sqrt_hs_and_leaves_v_alone);
    tcase_add_test(tc, no_weight_gives_the_bits_of_a_weight_of_ones);
    tcase_add_test(tc, qk_norm_backward_matches_finite_differences_and_passes_v_through);
    tcase_add_test(tc, the_fast_versions_give_the_references_bits);
    suite_add_tcase(s, tc);
    return s;
}
