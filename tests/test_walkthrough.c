// test_walkthrough.c: tests for src/commands/walkthrough.c (`tinygpt
// walkthrough`).
//
// Every matrix the walkthrough prints is read back from its printed text
// (4 decimals) and compared with the same quantity computed here, in plain
// double arithmetic, straight from the formulas of each step: no tinygpt
// layer is called. The inputs (X and the weights) are the example's
// constants from walkthrough.h; a separate test checks them against the
// numbers the textbook example publishes for the token "journey".
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tests.h"
#include "walkthrough.h"

enum { T = WALK_T, D_IN = WALK_D_IN, D_OUT = WALK_D_OUT, C = WALK_C };

// Printed with 4 decimals: rounding moves a value by at most 5e-5, and the
// float32 arithmetic behind it adds less than 1e-6.
static const double PRINTED_TOL = 1e-4;
// The textbook computed its numbers from weights it prints rounded to 4
// decimals; from the rounded ones (ours) its results move by up to ~1e-4
// (its query for "journey" is 0.4306, ours 0.430674).
static const double TEXTBOOK_TOL = 2e-4;

static char *printed;  // walkthrough_print's whole output, for the default key

static void print_walkthrough(uint64_t key) {
    Walkthrough w;
    walkthrough_compute(&w, key);
    size_t len;
    FILE *f = open_memstream(&printed, &len);
    ck_assert_ptr_nonnull(f);
    walkthrough_print(&w, f);
    fclose(f);
}

static void setup(void) { print_walkthrough(9); }
static void teardown(void) { free(printed); }

// The matrix printed under the title that starts with "tag" (at the start of
// a line): skip the title and the column labels, then read "rows" lines of a
// label and "cols" numbers. "-inf" reads as -inf, "." (not computed) as NAN.
static void read_printed(const char *tag, int rows, int cols, double *out) {
    char needle[64];
    snprintf(needle, sizeof needle, "\n%s", tag);
    const char *p = strstr(printed, needle);
    ck_assert_msg(p != NULL, "no matrix %s in the output", tag);
    char shape[32];
    snprintf(shape, sizeof shape, "[%d x %d]\n", rows, cols);
    const char *eol = strchr(p + 1, '\n');
    ck_assert_msg(eol && strstr(p + 1, shape) == eol - strlen(shape) + 1, "%s is not printed as %s", tag, shape);
    p = strchr(eol + 1, '\n') + 1;  // past the column labels
    for (int r = 0; r < rows; r++) {
        char line[512];
        const char *end = strchr(p, '\n');
        ck_assert_msg(end && (size_t)(end - p) < sizeof line, "%s: row %d missing", tag, r);
        memcpy(line, p, (size_t)(end - p));
        line[end - p] = '\0';
        char *save, *tok = strtok_r(line, " ", &save);  // the row label
        for (int c = 0; c < cols; c++) {
            tok = strtok_r(NULL, " ", &save);
            ck_assert_msg(tok != NULL, "%s: row %d has fewer than %d numbers", tag, r, cols);
            char *num_end;
            double v = strcmp(tok, ".") == 0 ? NAN : strtod(tok, &num_end);
            if (strcmp(tok, ".") != 0) ck_assert_msg(*num_end == '\0', "%s: '%s' is not a number", tag, tok);
            out[r * cols + c] = v;
        }
        ck_assert_msg(strtok_r(NULL, " ", &save) == NULL, "%s: row %d has more than %d numbers", tag, r, cols);
        p = end + 1;
    }
}

// The printed matrix "tag" against the expected values.
static void assert_printed(const char *tag, const double *expected, int rows, int cols) {
    double got[T * T > T * C ? T * T : T * C];
    read_printed(tag, rows, cols, got);
    for (int i = 0; i < rows * cols; i++) {
        if (isinf(expected[i])) {
            ck_assert_msg(isinf(got[i]) && got[i] < 0, "%s [%d,%d]: printed %g, expected -inf", tag, i / cols,
                          i % cols, got[i]);
            continue;
        }
        ck_assert_msg(fabs(got[i] - expected[i]) <= PRINTED_TOL, "%s [%d,%d]: printed %.4f, expected %.6f", tag,
                      i / cols, i % cols, got[i], expected[i]);
    }
}

// ---------------------------------------------------------------------------
// The formulas, in double.

static void load(double *out, const float *in, int n) {
    for (int i = 0; i < n; i++) out[i] = in[i];
}

// out[n,m] = a[n,k] b[k,m]
static void matmul(double *out, const double *a, const double *b, int n, int k, int m) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double sum = 0;
            for (int l = 0; l < k; l++) sum += a[i * k + l] * b[l * m + j];
            out[i * m + j] = sum;
        }
}

static void transposed(double *out, const double *a, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) out[c * rows + r] = a[r * cols + c];
}

// Row-wise softmax of scores[T,T] * scale; with "causal", only j <= t count
// (the rest come out 0).
static void softmax_rows(double *out, const double *scores, double scale, bool causal) {
    for (int t = 0; t < T; t++) {
        int last = causal ? t : T - 1;
        double sum = 0;
        for (int j = 0; j <= last; j++) sum += exp(scores[t * T + j] * scale);
        for (int j = 0; j < T; j++) out[t * T + j] = j <= last ? exp(scores[t * T + j] * scale) / sum : 0.0;
    }
}

// queries, keys, values [T,D_OUT] of one head: X W for each W [D_IN,D_OUT]
static void project(double *q, double *k, double *v, const float wq[D_IN][D_OUT], const float wk[D_IN][D_OUT],
                    const float wv[D_IN][D_OUT]) {
    double X[T * D_IN], W[D_IN * D_OUT];
    load(X, &WALK_X[0][0], T * D_IN);
    load(W, &wq[0][0], D_IN * D_OUT);
    matmul(q, X, W, T, D_IN, D_OUT);
    load(W, &wk[0][0], D_IN * D_OUT);
    matmul(k, X, W, T, D_IN, D_OUT);
    load(W, &wv[0][0], D_IN * D_OUT);
    matmul(v, X, W, T, D_IN, D_OUT);
}

// One head's causal weights [T,T] and context [T,D_OUT].
static void causal_head(double *weights, double *context, const double *q, const double *k, const double *v) {
    double kt[D_OUT * T], scores[T * T];
    transposed(kt, k, T, D_OUT);
    matmul(scores, q, kt, T, D_OUT, T);
    softmax_rows(weights, scores, 1.0 / sqrt((double)D_OUT), true);
    matmul(context, weights, v, T, T, D_OUT);
}

// ---------------------------------------------------------------------------

START_TEST(the_constants_reproduce_the_textbook_numbers_for_journey) {
    // The example publishes, for the second token, "journey": its step 1
    // weights and context vector, its query, and its step 2 weights and
    // context vector. Reading them off the printed rows checks both the
    // constants and our transposition of the [d_in, d_out] weights.
    const double weights1[T] = {0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581};
    const double context1[D_IN] = {0.4419, 0.6515, 0.5683};
    const double query[D_OUT] = {0.4306, 1.4551};
    const double weights2[T] = {0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820};
    const double context2[D_OUT] = {0.3061, 0.8210};
    double m[T * T];
    read_printed("(1b)", T, T, m);
    for (int j = 0; j < T; j++) ck_assert_double_eq_tol(m[T + j], weights1[j], TEXTBOOK_TOL);
    read_printed("(1c)", T, D_IN, m);
    for (int j = 0; j < D_IN; j++) ck_assert_double_eq_tol(m[D_IN + j], context1[j], TEXTBOOK_TOL);
    read_printed("(2a)", T, D_OUT, m);
    for (int j = 0; j < D_OUT; j++) ck_assert_double_eq_tol(m[D_OUT + j], query[j], TEXTBOOK_TOL);
    read_printed("(2e)", T, T, m);
    for (int j = 0; j < T; j++) ck_assert_double_eq_tol(m[T + j], weights2[j], TEXTBOOK_TOL);
    read_printed("(2f)", T, D_OUT, m);
    for (int j = 0; j < D_OUT; j++) ck_assert_double_eq_tol(m[D_OUT + j], context2[j], TEXTBOOK_TOL);
}
END_TEST

START_TEST(step_1_prints_x_xt_its_row_softmax_and_the_weighted_sum_of_x) {
    double X[T * D_IN], Xt[D_IN * T], scores[T * T], weights[T * T], context[T * D_IN];
    load(X, &WALK_X[0][0], T * D_IN);
    transposed(Xt, X, T, D_IN);
    matmul(scores, X, Xt, T, D_IN, T);
    softmax_rows(weights, scores, 1.0, false);
    matmul(context, weights, X, T, T, D_IN);
    assert_printed("X:", X, T, D_IN);
    assert_printed("(1a)", scores, T, T);
    assert_printed("(1b)", weights, T, T);
    assert_printed("(1c)", context, T, D_IN);
}
END_TEST

START_TEST(step_2_prints_the_projections_scaled_softmax_and_context) {
    double q[T * D_OUT], k[T * D_OUT], v[T * D_OUT], kt[D_OUT * T], scores[T * T], weights[T * T],
        context[T * D_OUT];
    project(q, k, v, WALK_W_QUERY, WALK_W_KEY, WALK_W_VALUE);
    transposed(kt, k, T, D_OUT);
    matmul(scores, q, kt, T, D_OUT, T);
    softmax_rows(weights, scores, 1.0 / sqrt(2.0), false);
    matmul(context, weights, v, T, T, D_OUT);
    assert_printed("(2a)", q, T, D_OUT);
    assert_printed("(2b)", k, T, D_OUT);
    assert_printed("(2c)", v, T, D_OUT);
    assert_printed("(2d)", scores, T, T);
    assert_printed("(2e)", weights, T, T);
    assert_printed("(2f)", context, T, D_OUT);
}
END_TEST

START_TEST(step_3_prints_the_same_causal_weights_three_ways_and_their_context) {
    double q[T * D_OUT], k[T * D_OUT], v[T * D_OUT], kt[D_OUT * T], scores[T * T], masked[T * T], weights[T * T],
        context[T * D_OUT];
    project(q, k, v, WALK_W_QUERY, WALK_W_KEY, WALK_W_VALUE);
    transposed(kt, k, T, D_OUT);
    matmul(scores, q, kt, T, D_OUT, T);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++) masked[t * T + j] = j <= t ? scores[t * T + j] / sqrt(2.0) : -INFINITY;
    causal_head(weights, context, q, k, v);
    assert_printed("(3a)", weights, T, T);  // naive: zero the future after the softmax, renormalise
    assert_printed("(3b)", masked, T, T);
    assert_printed("(3c)", weights, T, T);  // -inf before the softmax
    assert_printed("(3d)", weights, T, T);  // attention_forward's
    assert_printed("(3e)", context, T, D_OUT);
    for (int t = 0; t < T; t++)
        for (int j = t + 1; j < T; j++) ck_assert_double_eq(weights[t * T + j], 0.0);
}
END_TEST

START_TEST(step_4_keeps_each_weight_doubled_or_drops_it_and_its_context_uses_only_the_kept) {
    double q[T * D_OUT], k[T * D_OUT], v[T * D_OUT], weights[T * T], context[T * D_OUT];
    project(q, k, v, WALK_W_QUERY, WALK_W_KEY, WALK_W_VALUE);
    causal_head(weights, context, q, k, v);
    double factors[T * T], dropped[T * T], expected_dropped[T * T], expected_context[T * D_OUT];
    read_printed("(4a)", T, T, factors);
    read_printed("(4b)", T, T, dropped);
    int kept = 0;
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < T; j++) {
            double f = factors[t * T + j];
            if (j > t) {
                ck_assert_msg(isnan(f), "(4a) [%d,%d]: a factor above the diagonal", t, j);
                expected_dropped[t * T + j] = 0.0;
                continue;
            }
            // p = 0.5: each factor is 0 (dropped) or 1 / (1 - 0.5) = 2 (kept).
            ck_assert_msg(f == 0.0 || f == 2.0, "(4a) [%d,%d] = %g, neither 0 nor 2", t, j, f);
            kept += f == 2.0;
            expected_dropped[t * T + j] = f * weights[t * T + j];
        }
    }
    assert_printed("(4b)", expected_dropped, T, T);
    // The mask is random, but not degenerate: some kept, some dropped.
    ck_assert_msg(kept > 0 && kept < T * (T + 1) / 2, "kept %d of %d", kept, T * (T + 1) / 2);
    matmul(expected_context, expected_dropped, v, T, T, D_OUT);
    assert_printed("(4c)", expected_context, T, D_OUT);
}
END_TEST

START_TEST(step_5_prints_two_heads_side_by_side_and_their_output_projection) {
    double q[T * D_OUT], k[T * D_OUT], v[T * D_OUT], weights1[T * T], context1[T * D_OUT];
    double weights2[T * T], context2[T * D_OUT];
    project(q, k, v, WALK_W_QUERY, WALK_W_KEY, WALK_W_VALUE);
    causal_head(weights1, context1, q, k, v);
    project(q, k, v, WALK_W2_QUERY, WALK_W2_KEY, WALK_W2_VALUE);
    causal_head(weights2, context2, q, k, v);
    double concat[T * C], w_out[C * C], out[T * C];
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D_OUT; i++) {
            concat[t * C + i] = context1[t * D_OUT + i];
            concat[t * C + D_OUT + i] = context2[t * D_OUT + i];
        }
    load(w_out, &WALK_W_OUT[0][0], C * C);
    matmul(out, concat, w_out, T, C, C);
    for (int t = 0; t < T; t++)
        for (int o = 0; o < C; o++) out[t * C + o] += WALK_B_OUT[o];
    assert_printed("(5a)", weights2, T, T);
    assert_printed("(5b)", concat, T, C);
    assert_printed("(5c)", out, T, C);
}
END_TEST

START_TEST(another_seed_drops_other_weights_but_the_same_steps_stay_put) {
    // Only step 4 depends on the dropout key.
    char *first = printed;
    printed = NULL;
    print_walkthrough(10);
    char *second = printed;
    ck_assert_str_ne(first, second);
    const char *step4_a = strstr(first, "== Step 4"), *step4_b = strstr(second, "== Step 4");
    ck_assert_int_eq(strncmp(first, second, (size_t)(step4_a - first)), 0);
    const char *step5_a = strstr(first, "== Step 5"), *step5_b = strstr(second, "== Step 5");
    ck_assert_str_eq(step5_a, step5_b);
    ck_assert(step5_b - step4_b > 0);
    free(first);
}
END_TEST

START_TEST(the_walkthrough_command_prints_every_step) {
    char dir[256];
    scratch_dir_create(dir, sizeof dir);
    RunResult *r = run_tinygpt(dir, "walkthrough");
    ck_assert_msg(r->status == 0, "walkthrough failed: %s", r->err);
    ck_assert_str_eq(r->out, printed);  // the default key is the one setup used
    expect_run_fails(dir, "walkthrough --seed -1", 2, "--seed");
    scratch_dir_remove(dir);
}
END_TEST

Suite *walkthrough_suite(void) {
    Suite *s = suite_create("walkthrough");
    TCase *tc = tcase_create("walkthrough");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);  // one test runs the binary
    tcase_add_test(tc, the_constants_reproduce_the_textbook_numbers_for_journey);
    tcase_add_test(tc, step_1_prints_x_xt_its_row_softmax_and_the_weighted_sum_of_x);
    tcase_add_test(tc, step_2_prints_the_projections_scaled_softmax_and_context);
    tcase_add_test(tc, step_3_prints_the_same_causal_weights_three_ways_and_their_context);
    tcase_add_test(tc, step_4_keeps_each_weight_doubled_or_drops_it_and_its_context_uses_only_the_kept);
    tcase_add_test(tc, step_5_prints_two_heads_side_by_side_and_their_output_projection);
    tcase_add_test(tc, another_seed_drops_other_weights_but_the_same_steps_stay_put);
    tcase_add_test(tc, the_walkthrough_command_prints_every_step);
    suite_add_tcase(s, tc);
    return s;
}
