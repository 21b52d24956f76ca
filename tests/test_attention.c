// test_attention.c: tests for src/attention.c (causal multi-head
// self-attention with dropout on the weights).
//
// The forward pass is compared with a hand-worked case and with a plain
// double-precision version written here from the five steps in attention.h.
// Then its promises: rows of weights are distributions that never look
// ahead; later positions cannot change earlier outputs; dropout zeroes about
// p of the weights, scales the rest by 1/(1-p), and picks the same mask for
// any thread count. Backward is checked against central finite differences
// of L = sum(out * R) for a fixed random R (dL/dout = R), with and without
// dropout: for a fixed dropout_key the mask is a pure function of the key,
// so f(x+h) and f(x-h) see the same mask and L is a smooth function of qkv.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "attention.h"
#include "common.h"
#include "gradcheck.h"
#include "rng.h"
#include "tests.h"

// float32 forward vs the double version: values of order 1 after a softmax
// and a few sums of a handful of terms, so float32 round-off (6e-8 per
// operation) stays below 1e-6; 1e-5 leaves a margin.
static const double MATCHES_DOUBLE_TOL = 1e-5;
// A row of weights sums to 1 up to T float32 roundings.
static const double ROW_SUM_TOL = 1e-5;

static void fill_uniform(float *x, size_t n, Rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(rng) - 1.0f;
}

static void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;  // without OpenMP everything runs on one thread anyway
#endif
}

static int get_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

// ---------------------------------------------------------------------------
// The five steps of attention.h, in double, written for clarity: every score
// is computed, the future ones are set to -inf, and exp(-inf) = 0 takes care
// of the rest. out[B,T,C] and weights[B,NH,T,T] as in attention_forward,
// without dropout.

enum { REF_MAX_T = 16 };

static void reference_attention(double *out, double *weights, const float *qkv, int B, int T, int C, int NH) {
    ck_assert_int_le(T, REF_MAX_T);
    int HS = C / NH;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
                double scores[REF_MAX_T], max_score = -INFINITY;
                for (int j = 0; j < T; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
                    double dot = 0;
                    for (int i = 0; i < HS; i++) dot += (double)q[i] * k[i];
                    scores[j] = j > t ? -INFINITY : dot / sqrt((double)HS);
                    max_score = fmax(max_score, scores[j]);
                }
                double sum = 0;
                for (int j = 0; j < T; j++) sum += exp(scores[j] - max_score);
                double *w = weights + (((size_t)b * NH + h) * T + t) * T;
                for (int j = 0; j < T; j++) w[j] = exp(scores[j] - max_score) / sum;
                double *o = out + ((size_t)b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) {
                    o[i] = 0;
                    for (int j = 0; j < T; j++) o[i] += w[j] * qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * HS + i];
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Forward

START_TEST(forward_matches_a_hand_worked_case) {
    // B=1, T=2, C=2, NH=1, so HS=2 and the scale is 1/sqrt(2).
    enum { T = 2, C = 2 };
    const float r2ln3 = (float)(sqrt(2.0) * log(3.0));
    const float qkv[T * 3 * C] = {
        //  q            k        v
        1, 0,            0, 1,    4, 0,  // position 0
        r2ln3, 0,        1, 0,    0, 8,  // position 1
    };
    // Position 0 can only see itself: weight 1, out_0 = v_0 = (4, 0).
    // Position 1: s_10 = q_1.k_0 / sqrt2 = 0;  s_11 = q_1.k_1 / sqrt2 = ln 3.
    //   softmax(0, ln 3) = (1, 3) / 4 = (1/4, 3/4)
    //   out_1 = 1/4 (4, 0) + 3/4 (0, 8) = (1, 6)
    const double expected_weights[T * T] = {1, 0, 0.25, 0.75};
    const double expected_out[T * C] = {4, 0, 1, 6};
    float out[T * C], weights[T * T];
    attention_forward(out, weights, qkv, 1, T, C, 1, 0.0f, 0);
    for (int i = 0; i < T * T; i++) ck_assert_double_eq_tol(weights[i], expected_weights[i], MATCHES_DOUBLE_TOL);
    // out scales the weights' error by |v| <= 8.
    for (int i = 0; i < T * C; i++) ck_assert_double_eq_tol(out[i], expected_out[i], 8 * MATCHES_DOUBLE_TOL);
}
END_TEST

START_TEST(forward_matches_a_double_precision_version_for_every_head_count) {
    enum { B = 2, T = 5, C = 8 };
    const int head_counts[] = {1, 2, 4, 8};  // HS = 8, 4, 2, 1
    Rng rng;
    rng_init(&rng, 1);
    float qkv[B * T * 3 * C], out[B * T * C], weights[B * 8 * T * T];
    double ref_out[B * T * C], ref_weights[B * 8 * T * T];
    fill_uniform(qkv, B * T * 3 * C, &rng);
    for (size_t k = 0; k < sizeof head_counts / sizeof head_counts[0]; k++) {
        int NH = head_counts[k];
        attention_forward(out, weights, qkv, B, T, C, NH, 0.0f, 0);
        reference_attention(ref_out, ref_weights, qkv, B, T, C, NH);
        for (int i = 0; i < B * NH * T * T; i++)
            ck_assert_msg(fabs(weights[i] - ref_weights[i]) < MATCHES_DOUBLE_TOL,
                          "NH=%d weights[%d]: %.9g vs %.9g", NH, i, (double)weights[i], ref_weights[i]);
        for (int i = 0; i < B * T * C; i++)
            ck_assert_msg(fabs(out[i] - ref_out[i]) < MATCHES_DOUBLE_TOL, "NH=%d out[%d]: %.9g vs %.9g", NH, i,
                          (double)out[i], ref_out[i]);
    }
}
END_TEST

START_TEST(weight_rows_sum_to_one_and_are_exactly_zero_above_the_diagonal) {
    enum { B = 2, T = 7, C = 6, NH = 3 };
    Rng rng;
    rng_init(&rng, 2);
    float qkv[B * T * 3 * C], out[B * T * C], weights[B * NH * T * T];
    for (int i = 0; i < B * T * 3 * C; i++) qkv[i] = 3.0f * rng_normal(&rng);  // peaked softmaxes too
    // Dropout acts after the stored weights, so they are distributions either way.
    for (int with_dropout = 0; with_dropout <= 1; with_dropout++) {
        for (int i = 0; i < B * NH * T * T; i++) weights[i] = NAN;  // forward must write every entry
        attention_forward(out, weights, qkv, B, T, C, NH, with_dropout ? 0.5f : 0.0f, 77);
        for (int row = 0; row < B * NH * T; row++) {
            int t = row % T;
            const float *w = weights + (size_t)row * T;
            double sum = 0;
            for (int j = 0; j <= t; j++) {
                ck_assert_msg(w[j] >= 0.0f && w[j] <= 1.0f, "row %d weight %d = %g", row, j, (double)w[j]);
                sum += w[j];
            }
            ck_assert_double_eq_tol(sum, 1.0, ROW_SUM_TOL);
            for (int j = t + 1; j < T; j++)
                ck_assert_msg(w[j] == 0.0f, "row %d (t=%d) looks ahead to %d: %g", row, t, j, (double)w[j]);
        }
    }
}
END_TEST

START_TEST(changing_a_later_position_does_not_change_earlier_outputs) {
    enum { B = 2, T = 6, C = 4, NH = 2, N_QKV = B * T * 3 * C };
    Rng rng;
    rng_init(&rng, 3);
    float qkv[N_QKV], changed[N_QKV];
    float out[B * T * C], weights[B * NH * T * T], out2[B * T * C], weights2[B * NH * T * T];
    fill_uniform(qkv, N_QKV, &rng);
    for (int with_dropout = 0; with_dropout <= 1; with_dropout++) {
        float p = with_dropout ? 0.3f : 0.0f;
        attention_forward(out, weights, qkv, B, T, C, NH, p, 5);
        for (int s = 1; s < T; s++) {
            // Replace q, k and v of position s (in every batch row) with new values.
            memcpy(changed, qkv, sizeof qkv);
            for (int b = 0; b < B; b++) fill_uniform(changed + ((size_t)b * T + s) * 3 * C, 3 * C, &rng);
            attention_forward(out2, weights2, changed, B, T, C, NH, p, 5);
            for (int b = 0; b < B; b++) {
                // Outputs and weight rows before s: bit for bit the same.
                for (int t = 0; t < s; t++) {
                    const float *a = out + ((size_t)b * T + t) * C, *c = out2 + ((size_t)b * T + t) * C;
                    ck_assert_msg(memcmp(a, c, C * sizeof(float)) == 0, "out[%d,%d] changed with position %d", b,
                                  t, s);
                    for (int h = 0; h < NH; h++) {
                        size_t row = (((size_t)b * NH + h) * T + t) * T;
                        ck_assert_msg(memcmp(weights + row, weights2 + row, T * sizeof(float)) == 0,
                                      "weights[%d,%d,%d,:] changed with position %d", b, h, t, s);
                    }
                }
                // Position s itself does change: the test is not vacuous.
                const float *a = out + ((size_t)b * T + s) * C, *c = out2 + ((size_t)b * T + s) * C;
                ck_assert_msg(memcmp(a, c, C * sizeof(float)) != 0, "out[%d,%d] ignored its own q, k, v", b, s);
            }
        }
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Backward vs finite differences

enum { GB = 2, GT = 5, GC = 8, N_GQKV = GB * GT * 3 * GC, N_GOUT = GB * GT * GC, MAX_NH = 4 };

typedef struct {
    int NH;
    float p;
    uint64_t key;
    float qkv[N_GQKV];
    float out[N_GOUT];
    float weights[GB * MAX_NH * GT * GT];
    double R[N_GOUT];  // fixed random loss weights
} AttentionCase;

// L = sum(out * R) in double; the same key every call, so the same mask.
static double attention_loss(void *ctx) {
    AttentionCase *ac = ctx;
    attention_forward(ac->out, ac->weights, ac->qkv, GB, GT, GC, ac->NH, ac->p, ac->key);
    double loss = 0;
    for (int i = 0; i < N_GOUT; i++) loss += ac->out[i] * ac->R[i];
    return loss;
}

// Loop test: _i = 0..5 runs NH = 1, 2, 4 without dropout, then with p = 0.3.
START_TEST(backward_matches_finite_differences_for_every_element_of_qkv) {
    static const int head_counts[] = {1, 2, MAX_NH};
    AttentionCase ac = {.NH = head_counts[_i % 3], .p = _i < 3 ? 0.0f : 0.3f, .key = 1234};
    Rng rng;
    rng_init(&rng, 40 + (uint64_t)_i);
    fill_uniform(ac.qkv, N_GQKV, &rng);
    for (int i = 0; i < N_GOUT; i++) ac.R[i] = 2.0 * rng_uniform(&rng) - 1.0;

    float dout[N_GOUT], dqkv[N_GQKV] = {0}, dweights[GB * MAX_NH * GT * GT] = {0};
    for (int i = 0; i < N_GOUT; i++) dout[i] = (float)ac.R[i];
    attention_loss(&ac);  // forward, to fill ac.weights
    attention_backward(dqkv, dweights, dout, ac.qkv, ac.weights, GB, GT, GC, ac.NH, ac.p, ac.key);

    // The ~500 tiny forward passes run on one thread: there a parallel
    // region costs more than its arithmetic, and on a loaded machine one
    // descheduled thread stalls every barrier. (The forward pass gives the
    // same bits on any thread count; see the last test below.)
    int saved_threads = get_threads();
    set_threads(1);
    GradCheckResult r = gradcheck(attention_loss, &ac, ac.qkv, dqkv, N_GQKV, GRADCHECK_FLOAT32);
    set_threads(saved_threads);
    ck_assert_msg(r.failures == 0, "NH=%d p=%g: %zu of %d elements off; worst [%zu] analytic %.6g numeric %.6g",
                  ac.NH, (double)ac.p, r.failures, N_GQKV, r.worst_index, r.worst_analytic, r.worst_numeric);
}
END_TEST

START_TEST(backward_adds_to_the_gradient_already_in_dqkv) {
    enum { B = 1, T = 4, C = 4, NH = 2 };
    Rng rng;
    rng_init(&rng, 6);
    float qkv[B * T * 3 * C], out[B * T * C], weights[B * NH * T * T], dout[B * T * C];
    float start[B * T * 3 * C], from_start[B * T * 3 * C], from_zero[B * T * 3 * C] = {0};
    float dweights[B * NH * T * T];
    fill_uniform(qkv, sizeof qkv / sizeof qkv[0], &rng);
    fill_uniform(dout, sizeof dout / sizeof dout[0], &rng);
    fill_uniform(start, sizeof start / sizeof start[0], &rng);
    memcpy(from_start, start, sizeof start);
    attention_forward(out, weights, qkv, B, T, C, NH, 0.2f, 9);
    memset(dweights, 0, sizeof dweights);
    attention_backward(from_zero, dweights, dout, qkv, weights, B, T, C, NH, 0.2f, 9);
    memset(dweights, 0, sizeof dweights);
    attention_backward(from_start, dweights, dout, qkv, weights, B, T, C, NH, 0.2f, 9);
    for (int i = 0; i < B * T * 3 * C; i++)
        ck_assert_double_eq_tol(from_start[i], (double)start[i] + from_zero[i], MATCHES_DOUBLE_TOL);
}
END_TEST

// ---------------------------------------------------------------------------
// Dropout

START_TEST(dropout_zeroes_about_p_of_the_weights_and_scales_the_rest) {
    // With HS = T and v_j = the j-th unit vector, out_t[i] = dropped weight
    // (t,i): the output row shows the mask directly. Products with 0 and 1
    // and doubling are exact, so each kept entry is exactly 2 * weight.
    // (Per-element checks use `if` + ck_abort_msg: a passing ck_assert costs
    // a write to Check's pipe.)
    enum { T = 128, C = T, NH = 1 };
    const float p = 0.5f;
    const uint64_t key = 2024;
    // T(T+1)/2 = 8256 coin flips: standard error of the fraction is
    // sqrt(0.25 / 8256) = 0.0055; 0.03 is more than 5 of them.
    const double fraction_tol = 0.03;
    Rng rng;
    rng_init(&rng, 8);
    float *qkv = xmalloc((size_t)T * 3 * C * sizeof(float));
    float *out = xmalloc((size_t)T * C * sizeof(float));
    float *weights = xmalloc((size_t)T * T * sizeof(float));
    for (int t = 0; t < T; t++) {
        float *row = qkv + (size_t)t * 3 * C;
        fill_uniform(row, 2 * C, &rng);                       // q and k
        for (int i = 0; i < C; i++) row[2 * C + i] = i == t;  // v_t = e_t
    }
    attention_forward(out, weights, qkv, 1, T, C, NH, p, key);
    int dropped = 0, total = 0;
    for (int t = 0; t < T; t++) {
        for (int j = 0; j <= t; j++) {
            float w = weights[(size_t)t * T + j], o = out[(size_t)t * C + j];
            if (!(o == 0.0f || o == 2.0f * w))
                ck_abort_msg("out[%d][%d] = %.9g is neither 0 nor 2 * %.9g", t, j, (double)o, (double)w);
            bool is_dropped = o == 0.0f;
            // ...and the mask is the one attention.h documents.
            bool documented = dropout_uniform(key, (size_t)t * T + j) < p;
            if (is_dropped != documented)
                ck_abort_msg("element (%d,%d): dropped %d, documented mask %d", t, j, is_dropped, documented);
            dropped += is_dropped;
            total++;
        }
        for (int j = t + 1; j < T; j++)
            if (out[(size_t)t * C + j] != 0.0f) ck_abort_msg("out[%d][%d] reads the future", t, j);
    }
    ck_assert_double_eq_tol((double)dropped / total, p, fraction_tol);
    free(weights);
    free(out);
    free(qkv);
}
END_TEST

START_TEST(zero_dropout_ignores_the_key_and_matches_no_dropout) {
    enum { B = 2, T = 5, C = 4, NH = 2 };
    Rng rng;
    rng_init(&rng, 10);
    float qkv[B * T * 3 * C], out1[B * T * C], out2[B * T * C], w1[B * NH * T * T], w2[B * NH * T * T];
    double ref_out[B * T * C], ref_weights[B * NH * T * T];
    fill_uniform(qkv, sizeof qkv / sizeof qkv[0], &rng);
    attention_forward(out1, w1, qkv, B, T, C, NH, 0.0f, 1);
    attention_forward(out2, w2, qkv, B, T, C, NH, 0.0f, 0xDEADBEEF);
    ck_assert(memcmp(out1, out2, sizeof out1) == 0);
    ck_assert(memcmp(w1, w2, sizeof w1) == 0);
    reference_attention(ref_out, ref_weights, qkv, B, T, C, NH);
    for (int i = 0; i < B * T * C; i++) ck_assert_double_eq_tol(out1[i], ref_out[i], MATCHES_DOUBLE_TOL);
}
END_TEST

START_TEST(dropout_mask_is_the_same_for_one_and_two_threads) {
    enum { B = 3, T = 16, C = 8, NH = 2, N_QKV = B * T * 3 * C, N_OUT = B * T * C, N_W = B * NH * T * T };
    const float p = 0.3f;
    const uint64_t key = 99;
    Rng rng;
    rng_init(&rng, 11);
    float qkv[N_QKV], dout[N_OUT];
    fill_uniform(qkv, N_QKV, &rng);
    fill_uniform(dout, N_OUT, &rng);
    float out[2][N_OUT], weights[2][N_W], dqkv[2][N_QKV], dweights[2][N_W];
    int saved_threads = get_threads();
    for (int run = 0; run < 2; run++) {
        set_threads(run + 1);
        memset(dqkv[run], 0, sizeof dqkv[run]);
        memset(dweights[run], 0, sizeof dweights[run]);
        attention_forward(out[run], weights[run], qkv, B, T, C, NH, p, key);
        attention_backward(dqkv[run], dweights[run], dout, qkv, weights[run], B, T, C, NH, p, key);
    }
    set_threads(saved_threads);
    ck_assert_msg(memcmp(out[0], out[1], sizeof out[0]) == 0, "forward output depends on the thread count");
    ck_assert_msg(memcmp(dqkv[0], dqkv[1], sizeof dqkv[0]) == 0, "dqkv depends on the thread count");
}
END_TEST

Suite *attention_suite(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_matches_a_hand_worked_case);
    tcase_add_test(tc, forward_matches_a_double_precision_version_for_every_head_count);
    tcase_add_test(tc, weight_rows_sum_to_one_and_are_exactly_zero_above_the_diagonal);
    tcase_add_test(tc, changing_a_later_position_does_not_change_earlier_outputs);
    tcase_add_loop_test(tc, backward_matches_finite_differences_for_every_element_of_qkv, 0, 6);
    tcase_add_test(tc, backward_adds_to_the_gradient_already_in_dqkv);
    tcase_add_test(tc, dropout_zeroes_about_p_of_the_weights_and_scales_the_rest);
    tcase_add_test(tc, zero_dropout_ignores_the_key_and_matches_no_dropout);
    tcase_add_test(tc, dropout_mask_is_the_same_for_one_and_two_threads);
    suite_add_tcase(s, tc);
    return s;
}
