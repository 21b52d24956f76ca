// test_mlp.c: tests for src/layers/mlp.c (Linear(C, 4C) -> GELU -> Linear(4C, C),
// or ReLU^2 or GELU's tanh form in GELU's place, or Linear(C, 2H) -> SwiGLU
// -> Linear(H, C)). Every test runs with all four activations, without
// biases (gpt) and with them (gpt2).
//
// 1. forward agrees with the same three steps built from the _reference
//    versions of linear.h and gelu.h (relu2.h and swiglu.h have one version);
//    SwiGLU's hidden width is 8C/3 rounded as mlp.h says;
// 2. backward matches central finite differences of L = sum(out * R) for
//    inp, both weights and both biases, adds to the weight and bias
//    gradients and writes dinp;
// 3. one row alone gives the bits it gets inside a batch (sampling vs training).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gelu.h"
#include "gradcheck.h"
#include "helpers.h"
#include "linear.h"
#include "mlp.h"
#include "relu2.h"
#include "rng.h"
#include "swiglu.h"
#include "tests.h"

// mlp_forward vs the reference steps, relative to max(1, |value|). fc_out
// is linear_fast.c's product, which test_linear.c holds to the reference one.
// The fast GELU is within 5e-7 max(1, |x|) of the reference one (gelu.h),
// and out adds H = 4C such differences times weights of about 1/sqrt(H)
// (scaled as in a trained model, below): with random signs, about
// sqrt(H) * 5e-7 / sqrt(H) = 5e-7 per unit of |fc_out| (at most 3 here).
// 1e-5 leaves a wide margin and is far below an indexing or layout
// mistake, which changes values by 0.1 or more.
static const double MATCHES_REFERENCE_STEPS_RTOL = 1e-5;

// Two backward passes from zero vs twice one: a sum of the same terms
// rounded a few times more, a few float32 steps (1.2e-7 relative each).
static const double ADDS_TWICE_RTOL = 1e-6;

// All of one MLP's tensors, for N rows of width C (hidden width H = 4C, or
// SwiGLU's; FC = the width of fc_out: H, or SwiGLU's 2H; DH = dhidden's).
typedef struct {
    int N, C, H, FC, DH;
    MlpKind act;
    bool bias;                                                           // fc_bias and proj_bias are passed
    float *inp, *fc_weight, *proj_weight;                                // [N,C], [FC,C], [C,H]
    float *fc_bias, *proj_bias, *dfc_bias, *dproj_bias;                  // [FC], [C], [FC], [C]
    float *fc_out, *act_out, *out;                                       // [N,FC], [N,H], [N,C]
    float *dout, *dinp, *dfc_weight, *dproj_weight, *dhidden;            // [N,C], [N,C], [FC,C], [C,H], [N,DH]
    double *R;                                                           // [N,C], the loss weights
} Mlp;

// x[0..n) uniform in [-scale, scale)
static void fill_scaled(float *x, size_t n, float scale, Rng *rng) {
    fill_uniform(x, n, rng);
    for (size_t i = 0; i < n; i++) x[i] *= scale;
}

// Loop tests run every activation without biases (_i < N_ACTS), then with
// them: the case "k" of N_ACTS * 2.
enum { N_ACTS = 4 };
static MlpKind case_act(int k) { return (MlpKind)(k % N_ACTS); }
static bool case_bias(int k) { return k >= N_ACTS; }

static Mlp mlp_new(int N, int C, uint64_t seed, int k) {
    const MlpKind act = case_act(k);
    Mlp m = {.N = N, .C = C, .H = mlp_hidden(C, act), .FC = mlp_fc_width(C, act), .DH = mlp_dhidden_width(C, act),
             .act = act, .bias = case_bias(k)};
    const size_t nc = (size_t)N * C, nh = (size_t)N * m.H, hc = (size_t)m.H * C, fc = (size_t)m.FC * C;
    m.inp = xmalloc(nc * sizeof(float));
    m.fc_weight = xmalloc(fc * sizeof(float));
    m.proj_weight = xmalloc(hc * sizeof(float));
    m.fc_out = xmalloc((size_t)N * m.FC * sizeof(float));
    m.act_out = xmalloc(nh * sizeof(float));
    m.out = xmalloc(nc * sizeof(float));
    m.dout = xmalloc(nc * sizeof(float));
    m.dinp = xmalloc(nc * sizeof(float));
    m.dfc_weight = xmalloc(fc * sizeof(float));
    m.dproj_weight = xmalloc(hc * sizeof(float));
    m.dhidden = xmalloc((size_t)N * m.DH * sizeof(float));
    m.R = xmalloc(nc * sizeof(double));
    m.fc_bias = xmalloc((size_t)m.FC * sizeof(float));
    m.dfc_bias = xmalloc((size_t)m.FC * sizeof(float));
    m.proj_bias = xmalloc((size_t)C * sizeof(float));
    m.dproj_bias = xmalloc((size_t)C * sizeof(float));
    Rng rng;
    rng_init(&rng, seed);
    fill_uniform(m.fc_bias, (size_t)m.FC, &rng);
    fill_uniform(m.proj_bias, (size_t)C, &rng);
    fill_uniform(m.inp, nc, &rng);
    // Uniform in +-sqrt(3 / fan_in), variance 1 / fan_in: each layer's output
    // is on the scale of its input, as in a trained model.
    fill_scaled(m.fc_weight, fc, sqrtf(3.0f / (float)C), &rng);
    fill_scaled(m.proj_weight, hc, sqrtf(3.0f / (float)m.H), &rng);
    for (size_t i = 0; i < nc; i++) {
        m.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
        m.dout[i] = (float)m.R[i];  // dL/dout = R
    }
    return m;
}

static void mlp_free(Mlp *m) {
    float *all[] = {m->inp,    m->fc_weight, m->proj_weight,
                    m->fc_out, m->act_out,   m->out,         m->dout,        m->dinp,
                    m->dfc_weight, m->dproj_weight, m->dhidden, m->fc_bias, m->proj_bias, m->dfc_bias,
                    m->dproj_bias};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    free(m->R);
}

static void mlp_run_forward(Mlp *m) {
    mlp_forward(m->out, m->fc_out, m->act_out, m->inp, m->fc_weight, m->bias ? m->fc_bias : NULL, m->proj_weight,
                m->bias ? m->proj_bias : NULL, m->N, m->C, m->act);
}

static void mlp_run_backward(Mlp *m) {
    mlp_backward(m->dinp, m->dfc_weight, m->bias ? m->dfc_bias : NULL, m->dproj_weight, m->bias ? m->dproj_bias : NULL,
                 m->dhidden, m->act_out, m->dout, m->inp, m->fc_out, m->fc_weight, m->proj_weight, m->N, m->C, m->act);
}

// ---------------------------------------------------------------------------
// 1. Forward vs the reference steps. (5, 8): the size of the gradient
// checks; (7, 24): H = 96, a full 64-column tile and a ragged one.

static const int SHAPES[][2] = {{5, 8}, {7, 24}};
enum { N_SHAPES = 2 };  // loop tests: case _i, or shape _i % N_SHAPES and case _i / N_SHAPES

START_TEST(forward_matches_the_reference_linear_activation_linear_steps) {
    const int N = SHAPES[_i % N_SHAPES][0], C = SHAPES[_i % N_SHAPES][1];
    Mlp m = mlp_new(N, C, 90 + (uint64_t)_i, _i / N_SHAPES);
    mlp_run_forward(&m);
    const size_t nh = (size_t)N * m.H, nfc = (size_t)N * m.FC;
    float *fc_ref = xmalloc(nfc * sizeof(float)), *act_ref = xmalloc(nh * sizeof(float));
    float *out_ref = xmalloc((size_t)N * C * sizeof(float));
    linear_forward_reference(fc_ref, m.inp, m.fc_weight, m.bias ? m.fc_bias : NULL, N, C, m.FC);
    if (m.act == MLP_SWIGLU) swiglu_forward_reference(act_ref, fc_ref, N, m.H);
    else if (m.act == MLP_RELU2) relu2_forward(act_ref, fc_ref, nh);
    else if (m.act == MLP_GELU_TANH) gelu_tanh_forward_reference(act_ref, fc_ref, nh);
    else gelu_forward_reference(act_ref, fc_ref, nh);
    linear_forward_reference(out_ref, act_ref, m.proj_weight, m.bias ? m.proj_bias : NULL, N, m.H, C);
    assert_all_close("fc_out", m.fc_out, fc_ref, nfc, MATCHES_REFERENCE_STEPS_RTOL);
    assert_all_close("act_out", m.act_out, act_ref, nh, MATCHES_REFERENCE_STEPS_RTOL);
    assert_all_close("out", m.out, out_ref, (size_t)N * C, MATCHES_REFERENCE_STEPS_RTOL);
    free(out_ref);
    free(act_ref);
    free(fc_ref);
    mlp_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// 2. Backward.

enum { GN = 5, GC = 8 };

// L = sum(out * R), in double
static double mlp_loss(void *ctx) {
    Mlp *m = ctx;
    mlp_run_forward(m);
    double loss = 0;
    for (size_t i = 0; i < (size_t)m->N * m->C; i++) loss += m->out[i] * m->R[i];
    return loss;
}

// One forward, then one backward from zeroed weight gradients. Backward
// must recompute act_out from fc_out (mlp.h: the model passes scratch), so
// it gets NaN in act_out, which would reach every gradient if read.
static void mlp_forward_backward_from_zero(Mlp *m) {
    memset(m->dfc_weight, 0, (size_t)m->FC * m->C * sizeof(float));
    memset(m->dproj_weight, 0, (size_t)m->H * m->C * sizeof(float));
    memset(m->dfc_bias, 0, (size_t)m->FC * sizeof(float));
    memset(m->dproj_bias, 0, (size_t)m->C * sizeof(float));
    mlp_run_forward(m);
    for (size_t i = 0; i < (size_t)m->N * m->H; i++) m->act_out[i] = NAN;
    mlp_run_backward(m);
}

START_TEST(backward_matches_finite_differences_for_inp_both_weights_and_both_biases) {
    Mlp m = mlp_new(GN, GC, 95, _i);
    mlp_forward_backward_from_zero(&m);
    // One thread: thousands of tiny forward passes, where a parallel region
    // costs more than its arithmetic (see test_linear.c).
    int saved_threads = get_threads();
    set_threads(1);
    const size_t nc = (size_t)GN * GC, hc = (size_t)m.H * GC, fc = (size_t)m.FC * GC;
    GradCheckResult r_inp = gradcheck(mlp_loss, &m, m.inp, m.dinp, nc, GRADCHECK_FLOAT32);
    GradCheckResult r_fc = gradcheck(mlp_loss, &m, m.fc_weight, m.dfc_weight, fc, GRADCHECK_FLOAT32);
    GradCheckResult r_proj = gradcheck(mlp_loss, &m, m.proj_weight, m.dproj_weight, hc, GRADCHECK_FLOAT32);
    GradCheckResult r_fcb = {0}, r_projb = {0};
    if (m.bias) {
        r_fcb = gradcheck(mlp_loss, &m, m.fc_bias, m.dfc_bias, (size_t)m.FC, GRADCHECK_FLOAT32);
        r_projb = gradcheck(mlp_loss, &m, m.proj_bias, m.dproj_bias, GC, GRADCHECK_FLOAT32);
    }
    set_threads(saved_threads);
    assert_gradcheck_passes("fc_bias", r_fcb, (size_t)m.FC);
    assert_gradcheck_passes("proj_bias", r_projb, GC);
    assert_gradcheck_passes("inp", r_inp, nc);
    assert_gradcheck_passes("fc_weight", r_fc, fc);
    assert_gradcheck_passes("proj_weight", r_proj, hc);
    mlp_free(&m);
}
END_TEST

// Twice from zero = double once for the weight gradients (added to); dinp
// is written, so whatever it held (NaN here) is gone and it equals once.
START_TEST(backward_adds_to_the_weight_gradients_and_writes_dinp) {
    Mlp m = mlp_new(GN, GC, 96, _i);
    const size_t nc = (size_t)GN * GC, hc = (size_t)m.H * GC, fc = (size_t)m.FC * GC;
    mlp_forward_backward_from_zero(&m);
    float *once_inp = xmalloc(nc * sizeof(float)), *twice_fc = xmalloc(fc * sizeof(float));
    float *twice_proj = xmalloc(hc * sizeof(float));
    memcpy(once_inp, m.dinp, nc * sizeof(float));
    for (size_t i = 0; i < fc; i++) twice_fc[i] = 2.0f * m.dfc_weight[i];
    for (size_t i = 0; i < hc; i++) twice_proj[i] = 2.0f * m.dproj_weight[i];
    float twice_proj_bias[GC];
    for (size_t i = 0; i < GC; i++) twice_proj_bias[i] = 2.0f * m.dproj_bias[i];
    for (size_t i = 0; i < nc; i++) m.dinp[i] = NAN;
    mlp_run_backward(&m);
    if (m.bias) assert_all_close("dproj_bias", m.dproj_bias, twice_proj_bias, GC, ADDS_TWICE_RTOL);
    assert_all_close("dinp", m.dinp, once_inp, nc, ADDS_TWICE_RTOL);
    assert_all_close("dfc_weight", m.dfc_weight, twice_fc, fc, ADDS_TWICE_RTOL);
    assert_all_close("dproj_weight", m.dproj_weight, twice_proj, hc, ADDS_TWICE_RTOL);
    free(twice_proj);
    free(twice_fc);
    free(once_inp);
    mlp_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// 3. Sampling runs the MLP on one position (its products on
// linear_forward_rows), training on all of them (on the engine, large
// enough here, 64 x 64 -> 256, for matmul.c and gelu_fast.c to use both
// threads); the model needs the same bits either way.

START_TEST(one_row_alone_gives_the_same_bits_as_inside_a_batch) {
    enum { N = 64, C = 64, H = 4 * C };
    Mlp m = mlp_new(N, C, 97, _i);
    int saved_threads = get_threads();
    set_threads(2);
    mlp_run_forward(&m);
    const int rows[] = {0, 29, N - 1};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        const int n = rows[r];
        static float out[C], fc_out[2 * H], act_out[H];  // room for the widest: SwiGLU's fc_out, 2 * 176
        mlp_forward(out, fc_out, act_out, m.inp + (size_t)n * C, m.fc_weight, m.bias ? m.fc_bias : NULL, m.proj_weight,
                    m.bias ? m.proj_bias : NULL, 1, C, m.act);
        if (TINYGPT_SANITIZED) {  // sanitized.h: two loops, no promise of the same bits there
            assert_all_close("fc_out", fc_out, m.fc_out + (size_t)n * m.FC, m.FC, MATCHES_REFERENCE_STEPS_RTOL);
            assert_all_close("act_out", act_out, m.act_out + (size_t)n * m.H, m.H, MATCHES_REFERENCE_STEPS_RTOL);
            assert_all_close("out", out, m.out + (size_t)n * C, C, MATCHES_REFERENCE_STEPS_RTOL);
            continue;
        }
        ck_assert_msg(memcmp(fc_out, m.fc_out + (size_t)n * m.FC, m.FC * sizeof(float)) == 0, "fc_out of row %d differs",
                      n);
        ck_assert_msg(memcmp(act_out, m.act_out + (size_t)n * m.H, m.H * sizeof(float)) == 0,
                      "act_out of row %d differs", n);
        ck_assert_msg(memcmp(out, m.out + (size_t)n * C, sizeof out) == 0, "out of row %d differs", n);
    }
    set_threads(saved_threads);
    mlp_free(&m);
}
END_TEST

// mlp.h's rule, 8C/3 rounded down then up to a multiple of 16: C = 128 is
// 341 -> 352; C = 24, 64 -> 64; C = 8, 21 -> 32.
START_TEST(swiglu_hidden_width_is_8c_over_3_rounded_up_to_a_multiple_of_16) {
    ck_assert_int_eq(mlp_hidden(128, MLP_SWIGLU), 352);
    ck_assert_int_eq(mlp_hidden(24, MLP_SWIGLU), 64);
    ck_assert_int_eq(mlp_hidden(8, MLP_SWIGLU), 32);
    ck_assert_int_eq(mlp_fc_width(128, MLP_SWIGLU), 704);
    ck_assert_int_eq(mlp_hidden(128, MLP_GELU), 512);
    ck_assert_int_eq(mlp_fc_width(128, MLP_RELU2), 512);
}
END_TEST

Suite *mlp_suite(void) {
    Suite *s = suite_create("mlp");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, forward_matches_the_reference_linear_activation_linear_steps, 0, N_SHAPES * N_ACTS * 2);
    tcase_add_loop_test(tc, backward_matches_finite_differences_for_inp_both_weights_and_both_biases, 0, N_ACTS * 2);
    tcase_add_loop_test(tc, backward_adds_to_the_weight_gradients_and_writes_dinp, 0, N_ACTS * 2);
    tcase_add_loop_test(tc, one_row_alone_gives_the_same_bits_as_inside_a_batch, 0, N_ACTS * 2);
    tcase_add_test(tc, swiglu_hidden_width_is_8c_over_3_rounded_up_to_a_multiple_of_16);
    suite_add_tcase(s, tc);
    return s;
}
