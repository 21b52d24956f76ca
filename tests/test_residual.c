// test_residual.c: tests for src/layers/residual.c (out = inp + dropout(branch)).
//
// Without dropout, hand values. With dropout, the mask: the rule itself
// (kept iff dropout_uniform(key, i) >= p, scaled by 1/(1-p)), the kept
// fraction, and that the mask is the same on any thread count and in
// backward as in forward. Finally both gradients against finite differences.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gradcheck.h"
#include "helpers.h"
#include "residual.h"
#include "rng.h"
#include "tests.h"

// ---------------------------------------------------------------------------
// Without dropout. Small dyadic numbers: every sum is exact, compared with ==.

enum { HN = 4 };
static const float HAND_INP[HN] = {1, -2, 0.5f, 100};
static const float HAND_BRANCH[HN] = {0.25f, 2, -0.5f, -1};
static const float HAND_OUT[HN] = {1.25f, 0, 0, 99};

START_TEST(without_dropout_forward_adds_the_branch_to_the_stream) {
    float out[HN];
    // p = 0 ignores the key: two keys, one answer.
    for (uint64_t key = 1; key <= 2; key++) {
        residual_forward(out, HAND_INP, HAND_BRANCH, HN, 0.0f, key, 0);
        for (int i = 0; i < HN; i++) ck_assert_float_eq(out[i], HAND_OUT[i]);
    }
}
END_TEST

START_TEST(without_dropout_backward_passes_dout_to_the_branch) {
    const float dout[HN] = {3, -1, 0.125f, 7};
    float dbranch[HN] = {NAN, NAN, NAN, NAN};  // written, whatever it held
    residual_backward(dbranch, dout, HN, 0.0f, 9, 0);
    for (int i = 0; i < HN; i++) ck_assert_float_eq(dbranch[i], dout[i]);
}
END_TEST

// The model updates the residual stream in place: out == inp.
START_TEST(forward_may_update_the_stream_in_place) {
    float stream[HN];
    memcpy(stream, HAND_INP, sizeof stream);
    residual_forward(stream, stream, HAND_BRANCH, HN, 0.0f, 0, 0);
    for (int i = 0; i < HN; i++) ck_assert_float_eq(stream[i], HAND_OUT[i]);
}
END_TEST

// ---------------------------------------------------------------------------
// With dropout. inp = 0 and branch = 1 make out the scale itself: exactly 0
// (dropped) or exactly 1/(1-p) (kept; a product with 1 and a sum with 0
// are exact).

enum { MASK_N = 1 << 17 };  // above residual.c's MIN_PARALLEL_ELEMENTS: two threads share it
static const float P = 0.25f;
static const uint64_t KEY = 2024;

// out[MASK_N] = 0 + 1 * scale, the mask itself
static void mask_of(float *out, uint64_t key) {
    float *zeros = xmalloc(MASK_N * sizeof(float)), *ones = xmalloc(MASK_N * sizeof(float));
    for (int i = 0; i < MASK_N; i++) {
        zeros[i] = 0.0f;
        ones[i] = 1.0f;
    }
    residual_forward(out, zeros, ones, MASK_N, P, key, 0);
    free(ones);
    free(zeros);
}

START_TEST(dropout_keeps_about_1_minus_p_and_scales_kept_values_by_1_over_1_minus_p) {
    // Standard error of the kept fraction: sqrt(p (1-p) / n) = 0.0012; 0.006 is 5 of them.
    const double kept_fraction_tol = 0.006;
    const float keep = 1.0f / (1.0f - P);  // 4/3, rounded as residual.c rounds it
    float *out = xmalloc(MASK_N * sizeof(float));
    mask_of(out, KEY);
    int kept = 0;
    for (int i = 0; i < MASK_N; i++) {
        // The project's one dropout rule (attention.c's dropout_scale).
        float want = dropout_uniform(KEY, (uint64_t)i) < P ? 0.0f : keep;
        if (out[i] != want) ck_abort_msg("element %d: scale %.9g, the rule says %.9g", i, (double)out[i], (double)want);
        kept += out[i] != 0.0f;
    }
    ck_assert_double_eq_tol((double)kept / MASK_N, 1.0 - P, kept_fraction_tol);
    free(out);
}
END_TEST

START_TEST(a_new_key_draws_a_new_mask) {
    float *first = xmalloc(MASK_N * sizeof(float)), *second = xmalloc(MASK_N * sizeof(float));
    mask_of(first, KEY);
    mask_of(second, KEY + 1);
    int differ = 0;
    for (int i = 0; i < MASK_N; i++) differ += first[i] != second[i];
    // Independent masks differ where exactly one drops: 2 p (1-p) = 37.5% of elements.
    ck_assert_msg(differ > MASK_N / 4, "only %d of %d elements differ", differ, MASK_N);
    free(second);
    free(first);
}
END_TEST

// Forward on 1 and 2 threads, and backward with dout = 1 (so dbranch is the
// scale too), must all give the same mask, bit for bit.
START_TEST(the_mask_is_the_same_on_any_thread_count_and_in_backward) {
    float *forward[2], *backward[2];
    float *ones = xmalloc(MASK_N * sizeof(float));
    for (int i = 0; i < MASK_N; i++) ones[i] = 1.0f;
    int saved_threads = get_threads();
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        forward[t] = xmalloc(MASK_N * sizeof(float));
        backward[t] = xmalloc(MASK_N * sizeof(float));
        mask_of(forward[t], KEY);
        residual_backward(backward[t], ones, MASK_N, P, KEY, 0);
    }
    set_threads(saved_threads);
    ck_assert_msg(memcmp(forward[0], forward[1], MASK_N * sizeof(float)) == 0, "forward mask depends on threads");
    ck_assert_msg(memcmp(backward[0], backward[1], MASK_N * sizeof(float)) == 0, "backward mask depends on threads");
    ck_assert_msg(memcmp(forward[0], backward[0], MASK_N * sizeof(float)) == 0, "backward's mask is not forward's");
    for (int t = 0; t < 2; t++) {
        free(backward[t]);
        free(forward[t]);
    }
    free(ones);
}
END_TEST

// ---------------------------------------------------------------------------
// Finite differences, L = sum(out * R), with and without dropout.

enum { GN = 64 };

typedef struct {
    float inp[GN], branch[GN], out[GN];
    double R[GN];
    float p;
} ResidualCase;

static double residual_loss(void *ctx) {
    ResidualCase *rc = ctx;
    residual_forward(rc->out, rc->inp, rc->branch, GN, rc->p, KEY, 0);
    double loss = 0;
    for (int i = 0; i < GN; i++) loss += rc->out[i] * rc->R[i];
    return loss;
}

// assert_gradcheck_passes (helpers.h), naming the dropout rate "p".
static void assert_gradcheck_passes_at(const char *what, GradCheckResult r, float p) {
    ck_assert_msg(r.failures == 0, "%s (p = %g): %zu of %d elements off; worst [%zu] analytic %.6g numeric %.6g",
                  what, (double)p, r.failures, GN, r.worst_index, r.worst_analytic, r.worst_numeric);
}

// _i = 0: no dropout; _i = 1: p = 0.5, where half the branch gets no gradient.
START_TEST(backward_matches_finite_differences_for_the_stream_and_the_branch) {
    ResidualCase rc = {.p = _i ? 0.5f : 0.0f};
    Rng rng;
    rng_init(&rng, 61);
    fill_uniform(rc.inp, GN, &rng);
    fill_uniform(rc.branch, GN, &rng);
    float dout[GN], dbranch[GN];
    for (int i = 0; i < GN; i++) {
        rc.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
        dout[i] = (float)rc.R[i];  // dL/dout = R
    }
    residual_backward(dbranch, dout, GN, rc.p, KEY, 0);
    // The stream's gradient is dout itself (residual.h): check that claim.
    assert_gradcheck_passes_at("inp", gradcheck(residual_loss, &rc, rc.inp, dout, GN, GRADCHECK_FLOAT32), rc.p);
    assert_gradcheck_passes_at("branch", gradcheck(residual_loss, &rc, rc.branch, dbranch, GN, GRADCHECK_FLOAT32),
                            rc.p);
}
END_TEST

// A part of a batch (one process's rows, a micro-batch) that starts at
// element "first" of the whole tensor gets the whole tensor's mask there,
// forward, in dropout_forward and in backward.
START_TEST(a_part_of_a_tensor_gets_the_whole_tensors_mask_of_its_elements) {
    enum { FIRST = 1000, N = 4096 };
    float *whole = xmalloc(MASK_N * sizeof(float)), *part = xmalloc(N * sizeof(float));
    float *ones = xmalloc(N * sizeof(float)), *zeros = xmalloc(N * sizeof(float));
    for (int i = 0; i < N; i++) {
        ones[i] = 1.0f;
        zeros[i] = 0.0f;
    }
    mask_of(whole, KEY);
    residual_forward(part, zeros, ones, N, P, KEY, FIRST);
    ck_assert_mem_eq(part, whole + FIRST, N * sizeof(float));
    residual_backward(part, ones, N, P, KEY, FIRST);
    ck_assert_mem_eq(part, whole + FIRST, N * sizeof(float));
    for (int i = 0; i < N; i++) part[i] = 1.0f;
    dropout_forward(part, N, P, KEY, FIRST);
    ck_assert_mem_eq(part, whole + FIRST, N * sizeof(float));
    // and not the mask of the tensor's start
    ck_assert_int_ne(memcmp(part, whole, N * sizeof(float)), 0);
    free(zeros);
    free(ones);
    free(part);
    free(whole);
}
END_TEST

Suite *residual_suite(void) {
    Suite *s = suite_create("residual");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, without_dropout_forward_adds_the_branch_to_the_stream);
    tcase_add_test(tc, without_dropout_backward_passes_dout_to_the_branch);
    tcase_add_test(tc, forward_may_update_the_stream_in_place);
    tcase_add_test(tc, dropout_keeps_about_1_minus_p_and_scales_kept_values_by_1_over_1_minus_p);
    tcase_add_test(tc, a_new_key_draws_a_new_mask);
    tcase_add_test(tc, the_mask_is_the_same_on_any_thread_count_and_in_backward);
    tcase_add_test(tc, a_part_of_a_tensor_gets_the_whole_tensors_mask_of_its_elements);
    tcase_add_loop_test(tc, backward_matches_finite_differences_for_the_stream_and_the_branch, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
