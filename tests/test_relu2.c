// test_relu2.c: tests for src/layers/relu2.c (ReLU^2).
//
// 1. forward and backward on values worked out by hand;
// 2. backward against central finite differences of L = sum(relu2(x) * R);
// 3. in place, and the same bits on 1 and 2 threads;
// 4. forward and backward in one pass give the two passes' bits;
// 5. a NaN in gives NaN out, both ways.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gradcheck.h"
#include "helpers.h"
#include "relu2.h"
#include "rng.h"
#include "tests.h"

// 1. max(x, 0)^2 and 2 max(x, 0): exact in float32 for these x.
enum { HAND_COUNT = 7 };
static const float HAND_X[HAND_COUNT] = {0, 1, -1, 2, -2, 0.5f, 3};
static const float HAND_RELU2[HAND_COUNT] = {0, 1, 0, 4, 0, 0.25f, 9};
static const float HAND_RELU2_GRAD[HAND_COUNT] = {0, 2, 0, 4, 0, 1, 6};

START_TEST(forward_and_backward_give_hand_checked_values) {
    float out[HAND_COUNT], dinp[HAND_COUNT], ones[HAND_COUNT];
    for (int i = 0; i < HAND_COUNT; i++) ones[i] = 1.0f;  // dout = 1: dinp is the derivative
    relu2_forward(out, HAND_X, HAND_COUNT);
    relu2_backward(dinp, HAND_X, ones, HAND_COUNT);
    for (int i = 0; i < HAND_COUNT; i++) {
        ck_assert_msg(out[i] == HAND_RELU2[i], "relu2(%g) = %.9g, want %.9g", (double)HAND_X[i], (double)out[i],
                      (double)HAND_RELU2[i]);
        ck_assert_msg(dinp[i] == HAND_RELU2_GRAD[i], "relu2'(%g) = %.9g, want %.9g", (double)HAND_X[i],
                      (double)dinp[i], (double)HAND_RELU2_GRAD[i]);
    }
}
END_TEST

// 2. Finite differences on x in [-2, 2], kept away from 0 by more than the
// step h: relu2 has no corner there, but its second derivative jumps from
// 0 to 2, so a central difference straddling 0 is off by O(h).
enum { GN = 40 };

typedef struct {
    float x[GN], out[GN];
    double R[GN];
} Relu2Case;

static double relu2_loss(void *ctx) {
    Relu2Case *rc = ctx;
    relu2_forward(rc->out, rc->x, GN);
    double loss = 0;
    for (int i = 0; i < GN; i++) loss += rc->out[i] * rc->R[i];
    return loss;
}

START_TEST(backward_matches_finite_differences) {
    Relu2Case rc;
    Rng rng;
    rng_init(&rng, 201);
    for (int i = 0; i < GN; i++) {
        const float u = 2.0f * rng_uniform(&rng) - 1.0f;
        rc.x[i] = u < 0 ? 2.0f * u - 0.05f : 2.0f * u + 0.05f;
        rc.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
    }
    float dout[GN], dinp[GN];
    for (int i = 0; i < GN; i++) dout[i] = (float)rc.R[i];
    relu2_backward(dinp, rc.x, dout, GN);
    assert_gradcheck_passes("x", gradcheck(relu2_loss, &rc, rc.x, dinp, GN, GRADCHECK_FLOAT32), GN);
}
END_TEST

// 3. The MLP's backward runs it in place (dinp == dout); and n = 1 << 17 is
// above relu2.c's MIN_PARALLEL_ELEMENTS, so two threads share the work.
START_TEST(in_place_and_one_or_two_threads_give_identical_bits) {
    const size_t n = (size_t)1 << 17;
    float *x = xmalloc(n * sizeof(float)), *dout = xmalloc(n * sizeof(float));
    float *out[2], *dinp[2];
    Rng rng;
    rng_init(&rng, 202);
    fill_uniform(x, n, &rng);
    fill_uniform(dout, n, &rng);
    int saved_threads = get_threads();
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        out[t] = xmalloc(n * sizeof(float));
        dinp[t] = xmalloc(n * sizeof(float));
        memcpy(dinp[t], dout, n * sizeof(float));
        relu2_forward(out[t], x, n);
        relu2_backward(dinp[t], x, dinp[t], n);  // in place
    }
    set_threads(saved_threads);
    float *apart = xmalloc(n * sizeof(float));
    relu2_backward(apart, x, dout, n);
    ck_assert_msg(memcmp(out[0], out[1], n * sizeof(float)) == 0, "out depends on the thread count");
    ck_assert_msg(memcmp(dinp[0], dinp[1], n * sizeof(float)) == 0, "dinp depends on the thread count");
    ck_assert_msg(memcmp(dinp[0], apart, n * sizeof(float)) == 0, "in place differs from apart");
    for (int t = 0; t < 2; t++) {
        free(out[t]);
        free(dinp[t]);
    }
    free(apart);
    free(dout);
    free(x);
}
END_TEST

// 4. The MLP's backward takes the forward's output again from
// relu2_forward_backward, in place on dout: the output must be the
// forward's own, bit for bit (the projection's weight gradient is of it),
// and the gradient the backward's. On 2 threads at a size that splits, with
// a ragged end (1 << 16 + 37 elements), NaN and both signs of zero among x.
START_TEST(forward_backward_gives_the_two_passes_bits) {
    enum { N = (1 << 16) + 37 };
    float *x = xmalloc(N * sizeof(float)), *dout = xmalloc(N * sizeof(float));
    float *out = xmalloc(N * sizeof(float)), *dinp = xmalloc(N * sizeof(float));
    float *out_both = xmalloc(N * sizeof(float)), *dinp_both = xmalloc(N * sizeof(float));
    Rng rng;
    rng_init(&rng, 203);
    for (int i = 0; i < N; i++) x[i] = 8.0f * rng_uniform(&rng) - 4.0f;
    x[3] = NAN;
    x[7] = 0.0f;
    x[11] = -0.0f;
    fill_uniform(dout, N, &rng);
    memcpy(dinp_both, dout, N * sizeof(float));
    const int saved_threads = get_threads();
    set_threads(2);
    relu2_forward(out, x, N);
    relu2_backward(dinp, x, dout, N);
    relu2_forward_backward(out_both, dinp_both, x, dinp_both, N);  // in place, as the MLP runs it
    set_threads(saved_threads);
    ck_assert_msg(memcmp(out_both, out, N * sizeof(float)) == 0, "out differs from relu2_forward's");
    ck_assert_msg(memcmp(dinp_both, dinp, N * sizeof(float)) == 0, "dinp differs from relu2_backward's");
    float *all[] = {x, dout, out, dinp, out_both, dinp_both};
    for (int i = 0; i < COUNT(all); i++) free(all[i]);
}
END_TEST

// 5. A NaN means something upstream went wrong; it must reach the loss, as
// torch.relu lets it, rather than become a 0. NaNs sit inside the
// vectorised body (3) and in the ragged end (37); their neighbours stay
// finite.
START_TEST(nan_in_gives_nan_out) {
    enum { N = 40 };
    float x[N], dout[N], out[N], dinp[N], out_both[N], dinp_both[N];
    for (int i = 0; i < N; i++) x[i] = dout[i] = 0.1f * (float)(i - N / 2) + 0.05f;
    x[3] = x[37] = NAN;
    relu2_forward(out, x, N);
    relu2_backward(dinp, x, dout, N);
    relu2_forward_backward(out_both, dinp_both, x, dout, N);
    for (int i = 0; i < N; i++) {
        const bool nan_in = i == 3 || i == 37;
        const float got[4] = {out[i], dinp[i], out_both[i], dinp_both[i]};
        for (int k = 0; k < 4; k++)
            ck_assert_msg(nan_in ? isnan(got[k]) : isfinite(got[k]), "element %d, output %d: %g for x = %g", i, k,
                          (double)got[k], (double)x[i]);
    }
}
END_TEST

Suite *relu2_suite(void) {
    Suite *s = suite_create("relu2");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_and_backward_give_hand_checked_values);
    tcase_add_test(tc, backward_matches_finite_differences);
    tcase_add_test(tc, in_place_and_one_or_two_threads_give_identical_bits);
    tcase_add_test(tc, forward_backward_gives_the_two_passes_bits);
    tcase_add_test(tc, nan_in_gives_nan_out);
    suite_add_tcase(s, tc);
    return s;
}
