// test_attention.c: tests for src/layers/attention.c and attention_fast.c (causal multi-head
// self-attention with dropout on the weights), and its one-position pass
// for sampling.
//
// attention has two versions of each pass, a reference one and a fast one
// (transposed keys and values, precomputed dropout factors), and every test
// below runs on both. The forward pass is compared with a hand-worked case
// and with a plain double-precision version written here from the five
// steps in attention.h. Then its promises: rows of weights are distributions
// that never look ahead; later positions cannot change earlier outputs;
// dropout zeroes about p of the weights, scales the rest by 1/(1-p), and
// picks the same mask in both versions and for any thread count. Backward is
// checked against central finite differences of L = sum(out * R) for a fixed
// random R (dL/dout = R), with and without dropout: for a fixed dropout_key
// the mask is a pure function of the key, so f(x+h) and f(x-h) see the same
// mask and L is a smooth function of qkv.
//
// Per-element checks in big loops use `if` + ck_abort_msg: every passing
// ck_assert writes a message to Check's pipe, which adds up.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#endif

#include "attention.h"
#include "common.h"
#include "fast.h"
#include "gradcheck.h"
#include "rng.h"
#include "helpers.h"
#include "sanitized.h"
#include "tests.h"

// float32 forward vs the double version: values of order 1 after a softmax
// and sums of a handful of terms, so float32 round-off (6e-8 per operation)
// stays below 1e-6; 1e-5 leaves a margin.
static const double MATCHES_DOUBLE_TOL = 1e-5;
// Fast vs reference: the same terms summed in a different order (the fast
// dot products run "sideways" and scale q before the sum), so they differ
// by a few float32 roundings, relative to max(1, |value|).
static const double FAST_MATCHES_REFERENCE_TOL = 1e-5;
// A row of weights sums to 1 up to T float32 roundings.
static const double ROW_SUM_TOL = 1e-5;

static const char *const VERSION_NAME[2] = {"reference", "fast"};

// ---------------------------------------------------------------------------
// One interface over both versions. The fast forward saves three tensors for
// its backward; the reference recomputes what it needs.

typedef struct {
    int B, T, C, NH;
    float p;
    uint64_t key;
    bool fast;
    float *dropped_weights; // [B,NH,T,T]   (fast version only)
    float *keys_t;          // [B,NH,HS,T] (fast version only)
    float *values_t;        // [B,NH,HS,T] (fast version only)
} Attn;

static Attn attn_new(bool fast, int B, int T, int C, int NH, float p, uint64_t key) {
    Attn a = {B, T, C, NH, p, key, fast, NULL, NULL, NULL};
    a.dropped_weights = xmalloc((size_t)B * NH * T * T * sizeof(float));
    a.keys_t = xmalloc((size_t)B * T * C * sizeof(float));
    a.values_t = xmalloc((size_t)B * T * C * sizeof(float));
    return a;
}

static void attn_free(Attn *a) {
    free(a->values_t);
    free(a->keys_t);
    free(a->dropped_weights);
}

static void attn_forward(Attn *a, float *out, float *weights, const float *qkv) {
    if (a->fast)
        attention_forward(out, weights, a->dropped_weights, a->keys_t, qkv, a->B, a->T, a->C, a->NH, a->p, a->key, 0);
    else
        attention_forward_reference(out, weights, qkv, a->B, a->T, a->C, a->NH, a->p, a->key, 0);
}

// Must follow attn_forward on the same "qkv" (the fast version reads what
// that forward saved).
static void attn_backward(Attn *a, float *dqkv, float *dweights, const float *dout, const float *qkv,
                          const float *weights) {
    if (a->fast)
        attention_backward(dqkv, dweights, dout, qkv, weights, a->dropped_weights, a->values_t, a->B, a->T, a->C,
                           a->NH, a->p);
    else
        attention_backward_reference(dqkv, dweights, dout, qkv, weights, a->B, a->T, a->C, a->NH, a->p, a->key, 0);
}

// ---------------------------------------------------------------------------
// The five steps of attention.h, in double, written for clarity: every score
// is computed, the future ones are set to -inf, and exp(-inf) = 0 takes care
// of the rest. out[B,T,C] and weights[B,NH,T,T] as in attention_forward,
// without dropout.

enum { REF_MAX_T = 16 };

static void double_attention(double *out, double *weights, const float *qkv, int B, int T, int C, int NH) {
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
// Forward. Loop tests: _i = 0 runs the reference version, _i = 1 the fast one.

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
    Attn a = attn_new(_i, 1, T, C, 1, 0.0f, 0);
    attn_forward(&a, out, weights, qkv);
    for (int i = 0; i < T * T; i++) ck_assert_double_eq_tol(weights[i], expected_weights[i], MATCHES_DOUBLE_TOL);
    // out scales the weights' error by |v| <= 8.
    for (int i = 0; i < T * C; i++) ck_assert_double_eq_tol(out[i], expected_out[i], 8 * MATCHES_DOUBLE_TOL);
    attn_free(&a);
}
END_TEST

START_TEST(forward_matches_a_double_precision_version_for_every_head_count) {
    enum { B = 2, T = 5, C = 8, MAX_NH = 8 };
    const int head_counts[] = {1, 2, 4, 8};  // HS = 8, 4, 2, 1
    Rng rng;
    rng_init(&rng, 1);
    float qkv[B * T * 3 * C], out[B * T * C], weights[B * MAX_NH * T * T];
    double ref_out[B * T * C], ref_weights[B * MAX_NH * T * T];
    fill_uniform(qkv, B * T * 3 * C, &rng);
    for (size_t k = 0; k < sizeof head_counts / sizeof head_counts[0]; k++) {
        int NH = head_counts[k];
        Attn a = attn_new(_i, B, T, C, NH, 0.0f, 0);
        attn_forward(&a, out, weights, qkv);
        attn_free(&a);
        double_attention(ref_out, ref_weights, qkv, B, T, C, NH);
        for (int i = 0; i < B * NH * T * T; i++)
            ck_assert_msg(fabs(weights[i] - ref_weights[i]) < MATCHES_DOUBLE_TOL, "%s NH=%d weights[%d]: %.9g vs %.9g",
                          VERSION_NAME[_i], NH, i, (double)weights[i], ref_weights[i]);
        for (int i = 0; i < B * T * C; i++)
            ck_assert_msg(fabs(out[i] - ref_out[i]) < MATCHES_DOUBLE_TOL, "%s NH=%d out[%d]: %.9g vs %.9g",
                          VERSION_NAME[_i], NH, i, (double)out[i], ref_out[i]);
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
        Attn a = attn_new(_i, B, T, C, NH, with_dropout ? 0.5f : 0.0f, 77);
        attn_forward(&a, out, weights, qkv);
        attn_free(&a);
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
        Attn a = attn_new(_i, B, T, C, NH, with_dropout ? 0.3f : 0.0f, 5);
        attn_forward(&a, out, weights, qkv);
        for (int s = 1; s < T; s++) {
            // Replace q, k and v of position s (in every batch row) with new values.
            memcpy(changed, qkv, sizeof qkv);
            for (int b = 0; b < B; b++) fill_uniform(changed + ((size_t)b * T + s) * 3 * C, 3 * C, &rng);
            attn_forward(&a, out2, weights2, changed);
            for (int b = 0; b < B; b++) {
                // Outputs and weight rows before s: bit for bit the same.
                for (int t = 0; t < s; t++) {
                    const float *o1 = out + ((size_t)b * T + t) * C, *o2 = out2 + ((size_t)b * T + t) * C;
                    ck_assert_msg(memcmp(o1, o2, C * sizeof(float)) == 0, "out[%d,%d] changed with position %d",
                                  b, t, s);
                    for (int h = 0; h < NH; h++) {
                        size_t row = (((size_t)b * NH + h) * T + t) * T;
                        ck_assert_msg(memcmp(weights + row, weights2 + row, T * sizeof(float)) == 0,
                                      "weights[%d,%d,%d,:] changed with position %d", b, h, t, s);
                    }
                }
                // Position s's own weights do change: the test is not vacuous.
                // (Its output might not: dropout may zero its whole row.)
                size_t row_s = ((size_t)b * NH * T + s) * T;  // weights[b,0,s,:]
                ck_assert_msg(memcmp(weights + row_s, weights2 + row_s, T * sizeof(float)) != 0,
                              "weights[%d,0,%d,:] ignored its own q, k", b, s);
            }
        }
        attn_free(&a);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// Backward vs finite differences

// GC = 64 with 1, 2, 4 or 8 heads gives head sizes 64, 32, 16 and 8: the
// fast version's vector paths (multiples of 16) and its scalar fallback.
enum { GB = 2, GT = 5, GC = 64, N_GQKV = GB * GT * 3 * GC, N_GOUT = GB * GT * GC, G_MAX_NH = 8 };

typedef struct {
    Attn attn;
    float qkv[N_GQKV];
    float out[N_GOUT];
    float weights[GB * G_MAX_NH * GT * GT];
    double R[N_GOUT];  // fixed random loss weights
} AttentionCase;

// L = sum(out * R) in double; the same key every call, so the same mask.
static double attention_loss(void *ctx) {
    AttentionCase *ac = ctx;
    attn_forward(&ac->attn, ac->out, ac->weights, ac->qkv);
    double loss = 0;
    for (int i = 0; i < N_GOUT; i++) loss += ac->out[i] * ac->R[i];
    return loss;
}

// Loop test over 16 cases: _i % 2 picks the version, (_i / 2) % 4 the head
// count NH = 1, 2, 4, 8, and _i / 8 the dropout p = 0 or 0.3.
START_TEST(backward_matches_finite_differences_for_every_element_of_qkv) {
    static const int head_counts[] = {1, 2, 4, G_MAX_NH};
    bool fast = _i % 2;
    int NH = head_counts[(_i / 2) % 4];
    float p = _i < 8 ? 0.0f : 0.3f;
    AttentionCase ac;
    ac.attn = attn_new(fast, GB, GT, GC, NH, p, 1234);
    Rng rng;
    rng_init(&rng, 40 + (uint64_t)_i);
    fill_uniform(ac.qkv, N_GQKV, &rng);
    for (int i = 0; i < N_GOUT; i++) ac.R[i] = 2.0 * rng_uniform(&rng) - 1.0;

    float dout[N_GOUT], dqkv[N_GQKV] = {0}, dweights[GB * G_MAX_NH * GT * GT] = {0};
    for (int i = 0; i < N_GOUT; i++) dout[i] = (float)ac.R[i];
    attention_loss(&ac);  // forward, to fill ac.weights (and the fast version's saved tensors)
    attn_backward(&ac.attn, dqkv, dweights, dout, ac.qkv, ac.weights);

    // The ~500 tiny forward passes run on one thread: there a parallel
    // region costs more than its arithmetic, and on a loaded machine one
    // descheduled thread stalls every barrier. (The passes give the same
    // bits on any thread count; see the last test below.)
    int saved_threads = get_threads();
    set_threads(1);
    GradCheckResult r = gradcheck(attention_loss, &ac, ac.qkv, dqkv, N_GQKV, GRADCHECK_FLOAT32);
    set_threads(saved_threads);
    ck_assert_msg(r.failures == 0, "%s NH=%d p=%g: %zu of %d elements off; worst [%zu] analytic %.6g numeric %.6g",
                  VERSION_NAME[fast], NH, (double)p, r.failures, N_GQKV, r.worst_index, r.worst_analytic,
                  r.worst_numeric);
    attn_free(&ac.attn);
}
END_TEST

START_TEST(backward_results_do_not_depend_on_what_the_buffers_held) {
    // Whatever dqkv and the dweights scratch held before (here NaN) must not
    // leak into dqkv: it is written, not added to.
    enum { B = 2, T = 4, C = 4, NH = 2, N_QKV = B * T * 3 * C, N_W = B * NH * T * T };
    Rng rng;
    rng_init(&rng, 6);
    float qkv[N_QKV], out[B * T * C], weights[N_W], dout[B * T * C];
    float from_nan[N_QKV], from_zero[N_QKV] = {0};
    float dweights_clean[N_W] = {0}, dweights_dirty[N_W];
    fill_uniform(qkv, N_QKV, &rng);
    fill_uniform(dout, B * T * C, &rng);
    for (int i = 0; i < N_QKV; i++) from_nan[i] = NAN;
    for (int i = 0; i < N_W; i++) dweights_dirty[i] = NAN;
    Attn a = attn_new(_i, B, T, C, NH, 0.2f, 9);
    attn_forward(&a, out, weights, qkv);
    attn_backward(&a, from_zero, dweights_clean, dout, qkv, weights);
    attn_backward(&a, from_nan, dweights_dirty, dout, qkv, weights);
    attn_free(&a);
    ck_assert_msg(memcmp(from_nan, from_zero, sizeof from_zero) == 0, "dqkv depends on what the buffers held before");
}
END_TEST

// ---------------------------------------------------------------------------
// Fast vs reference

// Both versions on the same inputs: forward outputs and weights, then dqkv,
// within FAST_MATCHES_REFERENCE_TOL. (dweights is scratch whose meaning
// differs: the reference leaves dloss/dweights there, the fast version
// dloss/dscores.) T = 1 (one position), T = 17 (not a multiple of any vector
// width), T = 70 (more than one 64-wide score tile); head sizes 64, 48,
// 32, 16 (vector tiles of 4, 3, 2 and 1 vectors), 8 and 72 (the engine's
// tiles, whole vectors and then the rest; 72 takes two 64-column blocks);
// with and without dropout.
START_TEST(fast_version_matches_reference_version) {
    enum { B = 2, MAX_C = 144, MAX_NH = 8, MAX_T = 70 };
    static const int lengths[] = {1, 17, MAX_T};
    static const struct {
        int C, NH;
    } heads[] = {{64, 1}, {64, 2}, {64, 4}, {64, 8}, {144, 3}, {144, 2}};
    enum { N_QKV = B * MAX_T * 3 * MAX_C, N_OUT = B * MAX_T * MAX_C, N_W = B * MAX_NH * MAX_T * MAX_T };
    Rng rng;
    rng_init(&rng, 12);
    static float qkv[N_QKV], dout[N_OUT];
    static float out[2][N_OUT], weights[2][N_W], dqkv[2][N_QKV], dweights[2][N_W];
    for (int li = 0; li < 3; li++) {
        for (int hi = 0; hi < (int)(sizeof heads / sizeof heads[0]); hi++) {
            for (int with_dropout = 0; with_dropout <= 1; with_dropout++) {
                int T = lengths[li], C = heads[hi].C, NH = heads[hi].NH;
                float p = with_dropout ? 0.3f : 0.0f;
                size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C, n_w = (size_t)B * NH * T * T;
                fill_uniform(qkv, n_qkv, &rng);
                fill_uniform(dout, n_out, &rng);
                for (int fast = 0; fast <= 1; fast++) {
                    Attn a = attn_new(fast, B, T, C, NH, p, 31);
                    memset(dqkv[fast], 0, sizeof dqkv[fast]);
                    attn_forward(&a, out[fast], weights[fast], qkv);
                    attn_backward(&a, dqkv[fast], dweights[fast], dout, qkv, weights[fast]);
                    attn_free(&a);
                }
                const struct {
                    const char *name;
                    const float *ref, *fast;
                    size_t n;
                } pairs[] = {
                    {"out", out[0], out[1], n_out},
                    {"weights", weights[0], weights[1], n_w},
                    {"dqkv", dqkv[0], dqkv[1], n_qkv},
                };
                for (int k = 0; k < 3; k++) {
                    for (size_t i = 0; i < pairs[k].n; i++) {
                        double x = pairs[k].ref[i], y = pairs[k].fast[i];
                        if (!(fabs(x - y) <= FAST_MATCHES_REFERENCE_TOL * fmax(1.0, fmax(fabs(x), fabs(y)))))
                            ck_abort_msg("T=%d C=%d NH=%d p=%g: %s[%zu] reference %.9g vs fast %.9g", T, C, NH, (double)p,
                                         pairs[k].name, i, x, y);
                    }
                }
            }
        }
    }
}
END_TEST

// The key/value cache of sampling (model_forward_position) runs the fast
// forward pass in pieces: cache one position's key, then attend from that
// position, its weights and outputs in rows of their own. Pieces in that
// order must give attention_forward's bits exactly: every output, and each
// row's visible weights (the rest of a position's row is scratch). T = 70:
// two blocks of cached keys, the second 6 wide, and a score tile across
// the 64th position. Head sizes 16 (a vector tile), 8 and 72 (the engine's
// tiles, whole vectors and then the rest). (Under the sanitizer, to 1e-6:
// the two paths inline the same kernels separately, which clang's
// instrumented -O1 need not fuse alike; see sanitized.h.)
START_TEST(one_position_at_a_time_gives_the_bits_of_a_whole_forward_pass) {
    static const struct {
        int C, NH;
    } heads[] = {{32, 2}, {24, 3}, {144, 2}};
    const int C = heads[_i].C, NH = heads[_i].NH, HS = C / NH;
    enum { B = 2, T = 70 };
    const size_t N_QKV = (size_t)B * T * 3 * C, N_OUT = (size_t)B * T * C, N_W = (size_t)B * NH * T * T;
    Rng rng;
    rng_init(&rng, 15);
    float *qkv = xmalloc(N_QKV * sizeof(float)), *out = xmalloc(N_OUT * sizeof(float));
    float *weights = xmalloc(N_W * sizeof(float)), *row_out = xmalloc(N_OUT * sizeof(float));
    float row_weights[T];
    fill_uniform(qkv, N_QKV, &rng);
    Attn whole = attn_new(true, B, T, C, NH, 0.0f, 77), rows = attn_new(true, B, T, C, NH, 0.0f, 77);
    attn_forward(&whole, out, weights, qkv);
    for (int b = 0; b < B; b++) {
        const float *qkv_b = qkv + (size_t)b * T * 3 * C;
        float *keys_cache = rows.keys_t + (size_t)b * NH * HS * T;
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < NH; h++) {
                cache_key(keys_cache, qkv_b, h, t, T, C, NH);
                attention_forward_position(row_out + ((size_t)b * T + t) * C, row_weights, keys_cache, qkv_b, h, t,
                                           T, C, NH);
                const float *expected = weights + (((size_t)b * NH + h) * T + t) * T;
                for (int j = 0; j <= t; j++)
                    ck_assert_msg(same_or_close(row_weights[j], expected[j]),
                                  "HS %d b=%d h=%d t=%d: weight %d: %.9g, %.9g", HS, b, h, t, j,
                                  (double)row_weights[j], (double)expected[j]);
            }
        }
    }
    for (size_t i = 0; i < N_OUT; i++)
        ck_assert_msg(same_or_close(row_out[i], out[i]), "HS %d: output %zu: %.9g one position at a time, %.9g whole",
                      HS, i, (double)row_out[i], (double)out[i]);
    attn_free(&rows);
    attn_free(&whole);
    free(row_out);
    free(weights);
    free(out);
    free(qkv);
}
END_TEST

// ---------------------------------------------------------------------------
// Dropout

START_TEST(dropout_zeroes_about_p_of_the_weights_and_scales_the_rest) {
    // With HS = T and v_j = the j-th unit vector, out_t[i] = dropped weight
    // (t,i): the output row shows the mask directly. Products with 0 and 1
    // and doubling are exact, so each kept entry is exactly 2 * weight.
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
    Attn a = attn_new(_i, 1, T, C, NH, p, key);
    attn_forward(&a, out, weights, qkv);
    if (a.fast) {
        // What the fast backward reads: each weight times the rule's factor
        // (rng.h), zero above the diagonal; a kept weight is never 0.
        for (int t = 0; t < T; t++) {
            for (int j = 0; j < T; j++) {
                const size_t at = (size_t)t * T + j;
                const float expected = j <= t ? weights[at] * dropout_factor(key, at, p, 2.0f) : 0.0f;
                if (memcmp(&a.dropped_weights[at], &expected, sizeof expected) != 0)
                    ck_abort_msg("dropped_weights[%d][%d] = %.9g, expected %.9g", t, j,
                                 (double)a.dropped_weights[at], (double)expected);
                if (j <= t && dropout_factor(key, at, p, 2.0f) != 0.0f)
                    ck_assert_msg(a.dropped_weights[at] != 0.0f, "kept weight [%d][%d] is 0", t, j);
            }
        }
    }
    attn_free(&a);
    int dropped = 0, total = 0;
    for (int t = 0; t < T; t++) {
        for (int j = 0; j <= t; j++) {
            float w = weights[(size_t)t * T + j], o = out[(size_t)t * C + j];
            if (!(o == 0.0f || o == 2.0f * w))
                ck_abort_msg("out[%d][%d] = %.9g is neither 0 nor 2 * %.9g", t, j, (double)o, (double)w);
            dropped += o == 0.0f;
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

START_TEST(both_versions_drop_the_same_weights) {
    // The identity-values trick again (see above): out shows each version's
    // mask, and attention.h promises that every version drops the same weights.
    enum { B = 2, T = 24, C = T, NH = 1 };
    Rng rng;
    rng_init(&rng, 13);
    float qkv[B * T * 3 * C], out[2][B * T * C], weights[B * NH * T * T];
    for (int bt = 0; bt < B * T; bt++) {
        float *row = qkv + (size_t)bt * 3 * C;
        fill_uniform(row, 2 * C, &rng);
        for (int i = 0; i < C; i++) row[2 * C + i] = i == bt % T;
    }
    for (int fast = 0; fast <= 1; fast++) {
        Attn a = attn_new(fast, B, T, C, NH, 0.4f, 555);
        attn_forward(&a, out[fast], weights, qkv);
        attn_free(&a);
    }
    for (int i = 0; i < B * T * C; i++)
        if ((out[0][i] == 0.0f) != (out[1][i] == 0.0f))
            ck_abort_msg("element %d: reference %s it, fast %s it", i, out[0][i] == 0.0f ? "drops" : "keeps",
                         out[1][i] == 0.0f ? "drops" : "keeps");
}
END_TEST

START_TEST(zero_dropout_ignores_the_key_and_matches_no_dropout) {
    enum { B = 2, T = 5, C = 4, NH = 2 };
    Rng rng;
    rng_init(&rng, 10);
    float qkv[B * T * 3 * C], out1[B * T * C], out2[B * T * C], w1[B * NH * T * T], w2[B * NH * T * T];
    double ref_out[B * T * C], ref_weights[B * NH * T * T];
    fill_uniform(qkv, sizeof qkv / sizeof qkv[0], &rng);
    Attn a1 = attn_new(_i, B, T, C, NH, 0.0f, 1), a2 = attn_new(_i, B, T, C, NH, 0.0f, 0xDEADBEEF);
    attn_forward(&a1, out1, w1, qkv);
    attn_forward(&a2, out2, w2, qkv);
    attn_free(&a2);
    attn_free(&a1);
    ck_assert(memcmp(out1, out2, sizeof out1) == 0);
    ck_assert(memcmp(w1, w2, sizeof w1) == 0);
    double_attention(ref_out, ref_weights, qkv, B, T, C, NH);
    for (int i = 0; i < B * T * C; i++) ck_assert_double_eq_tol(out1[i], ref_out[i], MATCHES_DOUBLE_TOL);
}
END_TEST

START_TEST(one_and_two_threads_give_the_same_bits) {
    // B * NH = 6 (batch, head) pairs to share between threads, with dropout.
    enum { B = 3, T = 16, C = 8, NH = 2, N_QKV = B * T * 3 * C, N_OUT = B * T * C, N_W = B * NH * T * T };
    Rng rng;
    rng_init(&rng, 11);
    float qkv[N_QKV], dout[N_OUT];
    fill_uniform(qkv, N_QKV, &rng);
    fill_uniform(dout, N_OUT, &rng);
    float out[2][N_OUT], weights[2][N_W], dqkv[2][N_QKV], dweights[2][N_W];
    int saved_threads = get_threads();
    for (int run = 0; run < 2; run++) {
        set_threads(run + 1);
        Attn a = attn_new(_i, B, T, C, NH, 0.3f, 99);
        memset(dqkv[run], 0, sizeof dqkv[run]);
        attn_forward(&a, out[run], weights[run], qkv);
        attn_backward(&a, dqkv[run], dweights[run], dout, qkv, weights[run]);
        attn_free(&a);
    }
    set_threads(saved_threads);
    ck_assert_msg(memcmp(out[0], out[1], sizeof out[0]) == 0, "forward output depends on the thread count");
    ck_assert_msg(memcmp(dqkv[0], dqkv[1], sizeof dqkv[0]) == 0, "dqkv depends on the thread count");
}
END_TEST

Suite *attention_suite(void) {
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("core");
    // Loop tests with _i in [0, 2) run the reference version, then the fast one.
    tcase_add_loop_test(tc, forward_matches_a_hand_worked_case, 0, 2);
    tcase_add_loop_test(tc, forward_matches_a_double_precision_version_for_every_head_count, 0, 2);
    tcase_add_loop_test(tc, weight_rows_sum_to_one_and_are_exactly_zero_above_the_diagonal, 0, 2);
    tcase_add_loop_test(tc, changing_a_later_position_does_not_change_earlier_outputs, 0, 2);
    tcase_add_loop_test(tc, backward_matches_finite_differences_for_every_element_of_qkv, 0, 16);
    tcase_add_loop_test(tc, backward_results_do_not_depend_on_what_the_buffers_held, 0, 2);
    tcase_add_test(tc, fast_version_matches_reference_version);
    tcase_add_loop_test(tc, one_position_at_a_time_gives_the_bits_of_a_whole_forward_pass, 0, 3);
    tcase_add_loop_test(tc, dropout_zeroes_about_p_of_the_weights_and_scales_the_rest, 0, 2);
    tcase_add_test(tc, both_versions_drop_the_same_weights);
    tcase_add_loop_test(tc, zero_dropout_ignores_the_key_and_matches_no_dropout, 0, 2);
    tcase_add_loop_test(tc, one_and_two_threads_give_the_same_bits, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
