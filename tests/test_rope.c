// test_rope.c: tests for src/layers/rope.c (rotary position embeddings).
//
// 1. one pair rotated by hand; v untouched;
// 2. what RoPE is for: lengths are kept, and a query's score against a
//    key depends on their positions only through the distance between them;
// 3. backward against central finite differences of L = sum(rope(qkv) * R),
//    and a backward after a forward gives the gradient back unrotated;
// 4. a row alone (sampling, first_pos = t) gives the bits of that row in a
//    window.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gradcheck.h"
#include "helpers.h"
#include "rng.h"
#include "rope.h"
#include "tests.h"

// Values computed with cosf and sinf of float angles, against double math:
// a few float32 roundings of numbers of order 1.
static const double ROUNDING_TOL = 1e-5;

// 1. C = 4, one head (HS = 4, two pairs: (0, 2) turning by t, (1, 3) by
// t / 100), position t = 2 (the third row of a window of T = 3).
START_TEST(forward_rotates_each_pair_by_its_angle_and_leaves_v_alone) {
    enum { C = 4, N = 3 };
    float qkv[N * 3 * C];
    for (int i = 0; i < N * 3 * C; i++) qkv[i] = (float)(i % 7) - 3.0f;
    float before[N * 3 * C];
    memcpy(before, qkv, sizeof qkv);
    rope_forward(qkv, N, N, 0, C, 1);
    const float *x = before + 2 * 3 * C, *y = qkv + 2 * 3 * C;  // row t = 2
    for (int part = 0; part < 2; part++) {
        for (int i = 0; i < 2; i++) {
            const double angle = 2.0 * pow(10000.0, -2.0 * i / 4.0);
            const double x1 = x[part * C + i], x2 = x[part * C + i + 2];
            ck_assert_msg(fabs(y[part * C + i] - (x1 * cos(angle) - x2 * sin(angle))) <= ROUNDING_TOL, "pair %d", i);
            ck_assert_msg(fabs(y[part * C + i + 2] - (x1 * sin(angle) + x2 * cos(angle))) <= ROUNDING_TOL, "pair %d",
                          i);
        }
    }
    ck_assert_msg(memcmp(qkv, before, 3 * C * sizeof(float)) == 0, "position 0 must not turn");
    for (int r = 0; r < N; r++)
        ck_assert_msg(memcmp(qkv + r * 3 * C + 2 * C, before + r * 3 * C + 2 * C, C * sizeof(float)) == 0,
                      "v of row %d changed", r);
}
END_TEST

// 2. The same q and k (one head, HS = 8) placed at every position of a
// window of T = 12: after the rotation, q_t . k_j is the same for every
// pair of positions with the same t - j, and every vector keeps its length.
START_TEST(scores_depend_on_the_distance_between_positions_only) {
    enum { T = 12, C = 8 };
    float q[C], k[C], qkv[T * 3 * C];
    Rng rng;
    rng_init(&rng, 301);
    fill_uniform(q, C, &rng);
    fill_uniform(k, C, &rng);
    for (int t = 0; t < T; t++) {
        memcpy(qkv + t * 3 * C, q, sizeof q);
        memcpy(qkv + t * 3 * C + C, k, sizeof k);
        fill_uniform(qkv + t * 3 * C + 2 * C, C, &rng);
    }
    rope_forward(qkv, T, T, 0, C, 1);
    double q_len = 0;
    for (int c = 0; c < C; c++) q_len += (double)q[c] * q[c];
    for (int t = 0; t < T; t++) {
        double len = 0;
        for (int c = 0; c < C; c++) len += (double)qkv[t * 3 * C + c] * qkv[t * 3 * C + c];
        ck_assert_msg(fabs(len - q_len) <= ROUNDING_TOL * q_len, "q's length changed at t = %d", t);
    }
    for (int d = 0; d < 4; d++) {
        double first = 0;
        for (int j = 0; j + d < T; j++) {
            const float *qt = qkv + (j + d) * 3 * C, *kj = qkv + j * 3 * C + C;
            double score = 0;
            for (int c = 0; c < C; c++) score += (double)qt[c] * kj[c];
            if (j == 0) first = score;
            ck_assert_msg(fabs(score - first) <= ROUNDING_TOL * (1 + fabs(first)),
                          "distance %d: score %g at j = %d, %g at j = 0", d, score, j, first);
        }
    }
}
END_TEST

// 3. Finite differences: N = 6 rows (2 sequences of T = 3), C = 8, two heads.
enum { GN = 6, GT = 3, GC = 8, GNH = 2 };

typedef struct {
    float qkv[GN * 3 * GC], out[GN * 3 * GC];
    double R[GN * 3 * GC];
} RopeCase;

static double rope_loss(void *ctx) {
    RopeCase *rc = ctx;
    memcpy(rc->out, rc->qkv, sizeof rc->out);
    rope_forward(rc->out, GN, GT, 0, GC, GNH);
    double loss = 0;
    for (int i = 0; i < GN * 3 * GC; i++) loss += rc->out[i] * rc->R[i];
    return loss;
}

START_TEST(backward_matches_finite_differences_and_undoes_the_rotation) {
    RopeCase rc;
    Rng rng;
    rng_init(&rng, 302);
    fill_uniform(rc.qkv, GN * 3 * GC, &rng);
    for (int i = 0; i < GN * 3 * GC; i++) rc.R[i] = 2.0 * rng_uniform(&rng) - 1.0;
    float d[GN * 3 * GC];
    for (int i = 0; i < GN * 3 * GC; i++) d[i] = (float)rc.R[i];
    rope_backward(d, GN, GT, 0, GC, GNH);
    assert_gradcheck_passes("qkv", gradcheck(rope_loss, &rc, rc.qkv, d, GN * 3 * GC, GRADCHECK_FLOAT32),
                            GN * 3 * GC);
    // The backward is the inverse rotation: forward then backward is the identity.
    float x[GN * 3 * GC];
    memcpy(x, rc.qkv, sizeof x);
    rope_forward(x, GN, GT, 0, GC, GNH);
    rope_backward(x, GN, GT, 0, GC, GNH);
    for (int i = 0; i < GN * 3 * GC; i++)
        ck_assert_msg(fabs(x[i] - rc.qkv[i]) <= ROUNDING_TOL, "element %d: %g, was %g", i, (double)x[i],
                      (double)rc.qkv[i]);
}
END_TEST

// 4. Sampling rotates one row, position t, with first_pos = t.
START_TEST(a_row_alone_gives_the_same_bits_as_inside_a_window) {
    enum { T = 20, C = 16, NH = 2 };
    float window[T * 3 * C];
    Rng rng;
    rng_init(&rng, 303);
    fill_uniform(window, T * 3 * C, &rng);
    float alone[T * 3 * C];
    memcpy(alone, window, sizeof window);
    rope_forward(window, T, T, 0, C, NH);
    for (int t = 0; t < T; t++) {
        rope_forward(alone + t * 3 * C, 1, T, t, C, NH);
        ck_assert_msg(memcmp(alone + t * 3 * C, window + t * 3 * C, 3 * C * sizeof(float)) == 0, "row %d differs", t);
    }
}
END_TEST

Suite *rope_suite(void) {
    Suite *s = suite_create("rope");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_rotates_each_pair_by_its_angle_and_leaves_v_alone);
    tcase_add_test(tc, scores_depend_on_the_distance_between_positions_only);
    tcase_add_test(tc, backward_matches_finite_differences_and_undoes_the_rotation);
    tcase_add_test(tc, a_row_alone_gives_the_same_bits_as_inside_a_window);
    suite_add_tcase(s, tc);
    return s;
}
