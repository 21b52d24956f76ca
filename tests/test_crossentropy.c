// test_crossentropy.c: tests for src/layers/crossentropy.c and
// crossentropy_fast.c (softmax over
// the vocabulary + mean cross-entropy loss).
//
// A hand-worked case with logits chosen as logs of small integers, so the
// softmax is a ratio of integers, forward and backward (which overwrites
// dlogits, not adds to it); the two limits every implementation should
// survive (all-zero logits give ln V; logits of +-1e4 stay finite);
// probability rows that sum to 1 (each for both forwards, the reference
// loops and the fast one on softmax.h); the two forwards against each
// other; both, and the backward, in place against separate buffers; and the
// backward pass against central finite differences of the mean loss itself.
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#endif

#include "crossentropy.h"
#include "fast.h"
#include "gradcheck.h"
#include "rng.h"
#include "helpers.h"
#include "tests.h"

// float32 exp/log of numbers of order 1: a few roundings of 6e-8 each, so
// hand-worked values match to far better than 1e-6.
static const double HAND_TOL = 1e-6;
// A row of V probabilities sums to 1 up to V float32 roundings (V <= 100 here).
static const double ROW_SUM_TOL = 1e-5;

// The two forwards; the tests that loop over _i run on each.
typedef float (*ForwardFn)(float *, float *, const float *, const int *, int, int);
static const struct {
    const char *name;
    ForwardFn forward;
} FORWARDS[] = {{"crossentropy_forward", crossentropy_forward},
                {"crossentropy_forward_reference", crossentropy_forward_reference}};

// ---------------------------------------------------------------------------
// Hand-worked: N=2, V=3. exp(0, ln 2, ln 3) = (1, 2, 3), sum 6.
//   row 0: logits (0, ln 2, ln 3), target 2: probs (1/6, 1/3, 1/2); loss -ln(1/2) = ln 2
//   row 1: logits (ln 3, ln 2, 0), target 2: probs (1/2, 1/3, 1/6); loss -ln(1/6) = ln 6
//   mean loss = (ln 2 + ln 6) / 2
// Backward, dlogits = (probs - onehot(target)) / N with N = 2:
//   row 0: (1/6, 1/3, 1/2 - 1) / 2 = (1/12, 1/6, -1/4)
//   row 1: (1/2, 1/3, 1/6 - 1) / 2 = (1/4, 1/6, -5/12)

enum { HN = 2, HV = 3 };
static const int HAND_TARGETS[HN] = {2, 2};

static void hand_logits(float logits[HN * HV]) {
    const float ln2 = (float)log(2.0), ln3 = (float)log(3.0);
    const float values[HN * HV] = {0, ln2, ln3, ln3, ln2, 0};
    memcpy(logits, values, sizeof values);
}

START_TEST(forward_matches_a_hand_worked_case) {
    float logits[HN * HV], probs[HN * HV], losses[HN];
    hand_logits(logits);
    float loss = FORWARDS[_i].forward(losses, probs, logits, HAND_TARGETS, HN, HV);
    const double expected_probs[HN * HV] = {1.0 / 6, 1.0 / 3, 1.0 / 2, 1.0 / 2, 1.0 / 3, 1.0 / 6};
    for (int i = 0; i < HN * HV; i++) ck_assert_double_eq_tol(probs[i], expected_probs[i], HAND_TOL);
    ck_assert_double_eq_tol(losses[0], log(2.0), HAND_TOL);
    ck_assert_double_eq_tol(losses[1], log(6.0), HAND_TOL);
    ck_assert_double_eq_tol(loss, (log(2.0) + log(6.0)) / 2, HAND_TOL);
}
END_TEST

START_TEST(backward_matches_a_hand_worked_case) {
    float logits[HN * HV], probs[HN * HV], losses[HN], dlogits[HN * HV] = {0};
    hand_logits(logits);
    crossentropy_forward(losses, probs, logits, HAND_TARGETS, HN, HV);
    crossentropy_backward(dlogits, probs, HAND_TARGETS, HN, HV, HN);
    const double expected[HN * HV] = {1.0 / 12, 1.0 / 6, -1.0 / 4, 1.0 / 4, 1.0 / 6, -5.0 / 12};
    for (int i = 0; i < HN * HV; i++) ck_assert_double_eq_tol(dlogits[i], expected[i], HAND_TOL);
}
END_TEST

// dlogits is written, not added to: what the buffer held (NaN here) is gone.
START_TEST(backward_overwrites_the_gradient_already_there) {
    float logits[HN * HV], probs[HN * HV], losses[HN], dlogits[HN * HV];
    hand_logits(logits);
    crossentropy_forward(losses, probs, logits, HAND_TARGETS, HN, HV);
    for (int i = 0; i < HN * HV; i++) dlogits[i] = NAN;
    crossentropy_backward(dlogits, probs, HAND_TARGETS, HN, HV, HN);
    const double expected[HN * HV] = {1.0 / 12, 1.0 / 6, -1.0 / 4, 1.0 / 4, 1.0 / 6, -5.0 / 12};
    for (int i = 0; i < HN * HV; i++) ck_assert_double_eq_tol(dlogits[i], expected[i], HAND_TOL);
}
END_TEST

// ---------------------------------------------------------------------------
// Limits

START_TEST(zero_logits_give_a_loss_of_ln_v) {
    // Every token equally likely: probs = 1/V and the loss is -ln(1/V) = ln V,
    // whatever the targets.
    enum { N = 3, V = 65 };
    float logits[N * V] = {0}, probs[N * V], losses[N];
    const int targets[N] = {0, 17, V - 1};
    float loss = FORWARDS[_i].forward(losses, probs, logits, targets, N, V);
    ck_assert_double_eq_tol(loss, log((double)V), HAND_TOL * log((double)V));
    for (int i = 0; i < N * V; i++) ck_assert_double_eq_tol(probs[i], 1.0 / V, HAND_TOL);
}
END_TEST

START_TEST(logits_of_plus_minus_ten_thousand_give_finite_losses) {
    // exp(1e4) overflows float32 (max about 3.4e38 = exp(88.7)); the max
    // subtraction and the logsumexp form must keep everything finite.
    // Row 0's target holds the +1e4 logit: probability 1, loss 0.
    // Row 1's target holds a -1e4 logit: loss = logsumexp - logit = 1e4 - (-1e4) = 2e4.
    enum { N = 2, V = 4 };
    const float big = 1e4f;
    const float logits[N * V] = {big, -big, -big, -big, big, -big, -big, -big};
    const int targets[N] = {0, 1};
    float probs[N * V], losses[N], dlogits[N * V] = {0};
    float loss = FORWARDS[_i].forward(losses, probs, logits, targets, N, V);
    crossentropy_backward(dlogits, probs, targets, N, V, (size_t)N);
    for (int i = 0; i < N * V; i++) {
        ck_assert_msg(isfinite(probs[i]), "probs[%d] = %g", i, (double)probs[i]);
        ck_assert_msg(isfinite(dlogits[i]), "dlogits[%d] = %g", i, (double)dlogits[i]);
    }
    ck_assert(isfinite(loss));
    // Both values are exactly representable and every step is exact here
    // (exp(-2e4) underflows to 0, log(1) = 0).
    ck_assert_float_eq(losses[0], 0.0f);
    ck_assert_float_eq(losses[1], 2e4f);
    ck_assert_double_eq_tol(loss, 1e4, HAND_TOL);
}
END_TEST

START_TEST(probability_rows_sum_to_one) {
    enum { N = 5, V = 97 };
    Rng rng;
    rng_init(&rng, 1);
    float logits[N * V], probs[N * V], losses[N], softmax_probs[N * V];
    int targets[N];
    for (int n = 0; n < N; n++) {
        targets[n] = (int)rng_below(&rng, V);
        // Row n has logits of scale 10^(n-2): from nearly flat to very peaked.
        for (int v = 0; v < V; v++) logits[n * V + v] = powf(10.0f, (float)(n - 2)) * rng_normal(&rng);
    }
    FORWARDS[_i].forward(losses, probs, logits, targets, N, V);
    softmax_forward(softmax_probs, logits, N, V);
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int v = 0; v < V; v++) {
            ck_assert(probs[n * V + v] >= 0.0f);
            sum += probs[n * V + v];
        }
        ck_assert_double_eq_tol(sum, 1.0, ROW_SUM_TOL);
    }
    // softmax_forward (walkthrough's) is the fast forward's softmax, bit for bit.
    if (FORWARDS[_i].forward == crossentropy_forward) ck_assert(memcmp(probs, softmax_probs, sizeof probs) == 0);
}
END_TEST

// ---------------------------------------------------------------------------
// The fast forward computes the reference's numbers: its exp (fast_expf) is
// within about one unit in the last place of expf and its sums run in
// another order, so each probability and loss agrees to a few roundings
// (1e-5 relative to max(1, |value|) is far below any indexing mistake).

// Random targets, and rows of logits at scales 10^(n - middle) (row n):
// tiny, ordinary and huge logits in one batch.
static void fill_scaled_rows(float *logits, int *targets, int N, int V, int middle, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    for (int n = 0; n < N; n++) {
        targets[n] = (int)rng_below(&rng, V);
        for (int v = 0; v < V; v++) logits[n * V + v] = powf(10.0f, (float)(n - middle)) * rng_normal(&rng);
    }
}

START_TEST(fast_forward_matches_the_reference) {
    enum { N = 7, V = 261 };  // V not a multiple of 16: a ragged last vector
    static float logits[N * V], probs[2][N * V], losses[2][N];
    int targets[N];
    fill_scaled_rows(logits, targets, N, V, 3, 3);
    float loss[2];
    for (int i = 0; i < 2; i++) loss[i] = FORWARDS[i].forward(losses[i], probs[i], logits, targets, N, V);
    const double tol = 1e-5;
    for (int i = 0; i < N * V; i++)
        ck_assert_double_eq_tol(probs[0][i], probs[1][i], tol * fmax(1.0, fabs(probs[1][i])));
    for (int n = 0; n < N; n++)
        ck_assert_double_eq_tol(losses[0][n], losses[1][n], tol * fmax(1.0, fabs(losses[1][n])));
    ck_assert_double_eq_tol(loss[0], loss[1], tol * fmax(1.0, fabs(loss[1])));
}
END_TEST

// ---------------------------------------------------------------------------
// In place (crossentropy.h; the model trains so): probs written over the
// logits, then dlogits over the probs, give the bits of three buffers.

START_TEST(in_place_forward_and_backward_give_the_bits_of_separate_buffers) {
    enum { N = 5, V = 261 };
    static float logits[N * V], probs[N * V], dlogits[N * V], shared[N * V];
    float losses[N], shared_losses[N];
    int targets[N];
    fill_scaled_rows(logits, targets, N, V, 2, 4);
    targets[0] = V - 1;  // the last number of a row, written last by no loop
    memcpy(shared, logits, sizeof logits);
    const float loss = FORWARDS[_i].forward(losses, probs, logits, targets, N, V);
    const float shared_loss = FORWARDS[_i].forward(shared_losses, shared, shared, targets, N, V);
    ck_assert_msg(memcmp(&loss, &shared_loss, sizeof loss) == 0, "%s: loss %.9g, in place %.9g", FORWARDS[_i].name,
                  (double)loss, (double)shared_loss);
    ck_assert_msg(memcmp(losses, shared_losses, sizeof losses) == 0, "%s: the losses differ", FORWARDS[_i].name);
    ck_assert_msg(memcmp(probs, shared, sizeof probs) == 0, "%s: the probabilities differ", FORWARDS[_i].name);
    crossentropy_backward(dlogits, probs, targets, N, V, 3 * N);
    crossentropy_backward(shared, shared, targets, N, V, 3 * N);
    ck_assert_msg(memcmp(dlogits, shared, sizeof dlogits) == 0, "the gradients differ");
}
END_TEST

// ---------------------------------------------------------------------------
// Finite differences: the mean loss as a function of the logits.

enum { GN = 4, GV = 6 };

typedef struct {
    float logits[GN * GV], probs[GN * GV], losses[GN];
    int targets[GN];
} CrossEntropyCase;

static double crossentropy_loss(void *ctx) {
    CrossEntropyCase *cc = ctx;
    return crossentropy_forward(cc->losses, cc->probs, cc->logits, cc->targets, GN, GV);
}

START_TEST(backward_matches_finite_differences) {
    CrossEntropyCase cc;
    Rng rng;
    rng_init(&rng, 2);
    for (int i = 0; i < GN * GV; i++) cc.logits[i] = 2.0f * rng_normal(&rng);
    for (int n = 0; n < GN; n++) cc.targets[n] = (int)rng_below(&rng, GV);
    float dlogits[GN * GV] = {0};
    crossentropy_loss(&cc);
    crossentropy_backward(dlogits, cc.probs, cc.targets, GN, GV, GN);
    // One thread for the finite differences: for N=4 rows a parallel region
    // costs more than its arithmetic, and on a loaded machine one
    // descheduled thread stalls every barrier.
    int saved_threads = get_threads();
    set_threads(1);
    GradCheckResult r = gradcheck(crossentropy_loss, &cc, cc.logits, dlogits, GN * GV, GRADCHECK_FLOAT32);
    set_threads(saved_threads);
    ck_assert_msg(r.failures == 0, "%zu of %d elements off; worst [%zu] analytic %.6g numeric %.6g", r.failures,
                  GN * GV, r.worst_index, r.worst_analytic, r.worst_numeric);
}
END_TEST

Suite *crossentropy_suite(void) {
    Suite *s = suite_create("crossentropy");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, forward_matches_a_hand_worked_case, 0, COUNT(FORWARDS));
    tcase_add_test(tc, backward_matches_a_hand_worked_case);
    tcase_add_test(tc, backward_overwrites_the_gradient_already_there);
    tcase_add_loop_test(tc, zero_logits_give_a_loss_of_ln_v, 0, COUNT(FORWARDS));
    tcase_add_loop_test(tc, logits_of_plus_minus_ten_thousand_give_finite_losses, 0, COUNT(FORWARDS));
    tcase_add_loop_test(tc, probability_rows_sum_to_one, 0, COUNT(FORWARDS));
    tcase_add_test(tc, fast_forward_matches_the_reference);
    tcase_add_loop_test(tc, in_place_forward_and_backward_give_the_bits_of_separate_buffers, 0, COUNT(FORWARDS));
    tcase_add_test(tc, backward_matches_finite_differences);
    suite_add_tcase(s, tc);
    return s;
}
