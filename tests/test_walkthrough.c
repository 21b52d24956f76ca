// test_walkthrough.c: tests for src/commands/walkthrough.c (`tinygpt
// walkthrough`).
//
// Every matrix the walkthrough prints is read back from its printed text
// (4 decimals) and compared with the same quantity computed here, in plain
// double arithmetic, straight from the formulas of each step: no tinygpt
// layer is called. The inputs (X and the weights) are the example's
// constants from walkthrough.h; a separate test checks them against the
// numbers the textbook example publishes for the token "journey".
// `--backward`'s gradients (5 decimals) are read back the same way and held
// to the chain rule worked out here by hand, and each printed finite
// difference to its printed gradient, within the stated tolerance.
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tests.h"
#include "walkthrough_backward.h"

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

// ---------------------------------------------------------------------------
// Steps 6-11, `--backward`: the loss and every gradient, computed here in
// double from the chain rule worked out by hand (not from tinygpt's
// layers), and each printed finite difference against its printed
// gradient.

enum { V = WALK_V, NG = WALK_N_GRADIENTS, CELLS = WALK_MAX_CELLS };

// Printed with 5 decimals: rounding moves a value by at most 5e-6, and the
// float32 arithmetic behind it adds less than 1e-6.
static const double GRADIENT_PRINTED_TOL = 1e-5;

// What steps 6-11 must print: the loss, and each gradient as printed
// (row-major, NAN above the diagonal of the [T,T] ones).
typedef struct {
    double stream[T * C], normed[T * C], logits[T * V], probs[T * V], losses[T], loss;
    double grads[NG][CELLS];
} Expected;

// out[n,m] = a^T b, for a[k,n] and b[k,m]
static void matmul_at(double *out, const double *a, const double *b, int k, int n, int m) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m; j++) {
            double sum = 0;
            for (int l = 0; l < k; l++) sum += a[l * n + i] * b[l * m + j];
            out[i * m + j] = sum;
        }
}

// out[n,k] = a[n,m] b[k,m]^T
static void matmul_bt(double *out, const double *a, const double *b, int n, int m, int k) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < k; j++) {
            double sum = 0;
            for (int l = 0; l < m; l++) sum += a[i * m + l] * b[j * m + l];
            out[i * k + j] = sum;
        }
}

static void column_sums(double *out, const double *a, int rows, int cols) {
    for (int c = 0; c < cols; c++) {
        out[c] = 0;
        for (int r = 0; r < rows; r++) out[c] += a[r * cols + c];
    }
}

// One head's backward: from its d context [T,D_OUT] and its forward
// tensors, d weights and d scores [T,T] (NAN above the diagonal) and
// d q, d k, d v [T,D_OUT].
static void head_backward(double *dweights, double *dscores, double *dq, double *dk, double *dv, const double *dctx,
                          const double *weights, const double *q, const double *k, const double *v) {
    const double scale = 1.0 / sqrt((double)D_OUT);
    memset(dq, 0, sizeof(double) * T * D_OUT);
    memset(dk, 0, sizeof(double) * T * D_OUT);
    memset(dv, 0, sizeof(double) * T * D_OUT);
    for (int t = 0; t < T; t++) {
        double inner = 0;  // <w, dw> of row t
        for (int j = 0; j < T; j++) {
            dweights[t * T + j] = dscores[t * T + j] = NAN;
            if (j > t) continue;
            double dw = 0;
            for (int i = 0; i < D_OUT; i++) {
                dw += dctx[t * D_OUT + i] * v[j * D_OUT + i];
                dv[j * D_OUT + i] += weights[t * T + j] * dctx[t * D_OUT + i];
            }
            dweights[t * T + j] = dw;
            inner += weights[t * T + j] * dw;
        }
        for (int j = 0; j <= t; j++) {
            double ds = weights[t * T + j] * (dweights[t * T + j] - inner);
            dscores[t * T + j] = ds;
            for (int i = 0; i < D_OUT; i++) {
                dq[t * D_OUT + i] += ds * scale * k[j * D_OUT + i];
                dk[j * D_OUT + i] += ds * scale * q[t * D_OUT + i];
            }
        }
    }
}

// Head h's [T or D_IN, D_OUT] block into columns [h*D_OUT, (h+1)*D_OUT) of a
// [rows, C] matrix.
static void put_head(double *out, const double *head, int rows, int h) {
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < D_OUT; i++) out[r * C + h * D_OUT + i] = head[r * D_OUT + i];
}

static void expected_backward(Expected *e) {
    const float(*const wq[2])[D_OUT] = {WALK_W_QUERY, WALK_W2_QUERY};
    const float(*const wk[2])[D_OUT] = {WALK_W_KEY, WALK_W2_KEY};
    const float(*const wv[2])[D_OUT] = {WALK_W_VALUE, WALK_W2_VALUE};
    double X[T * D_IN], q[2][T * D_OUT], k[2][T * D_OUT], v[2][T * D_OUT], weights[2][T * T], ctx[2][T * D_OUT];
    double concat[T * C], w_out[C * C], out[T * C], w_head[C * V], rms[T];
    load(X, &WALK_X[0][0], T * D_IN);
    for (int h = 0; h < 2; h++) {
        project(q[h], k[h], v[h], wq[h], wk[h], wv[h]);
        causal_head(weights[h], ctx[h], q[h], k[h], v[h]);
        put_head(concat, ctx[h], T, h);
    }
    load(w_out, &WALK_W_OUT[0][0], C * C);
    matmul(out, concat, w_out, T, C, C);
    for (int t = 0; t < T; t++)
        for (int o = 0; o < C; o++) out[t * C + o] += WALK_B_OUT[o];
    // (6a-b): the residual, then RMSNorm: each row over its root mean
    // square (eps 1e-5, as rmsnorm.h), times g
    for (int t = 0; t < T; t++) {
        double squares = 0;
        for (int c = 0; c < C; c++) {
            e->stream[t * C + c] = concat[t * C + c] + out[t * C + c];
            squares += e->stream[t * C + c] * e->stream[t * C + c];
        }
        rms[t] = sqrt(squares / C + 1e-5);
        for (int c = 0; c < C; c++) e->normed[t * C + c] = e->stream[t * C + c] / rms[t] * WALK_NORM_WEIGHT[c];
    }
    // (6c-e): the head, the softmax, the loss
    load(w_head, &WALK_W_HEAD[0][0], C * V);
    matmul(e->logits, e->normed, w_head, T, C, V);
    e->loss = 0;
    for (int t = 0; t < T; t++) {
        double sum = 0;
        for (int u = 0; u < V; u++) {
            e->logits[t * V + u] += WALK_B_HEAD[u];
            sum += exp(e->logits[t * V + u]);
        }
        for (int u = 0; u < V; u++) e->probs[t * V + u] = exp(e->logits[t * V + u]) / sum;
        e->losses[t] = -log(e->probs[t * V + WALK_TARGETS[t]]);
        e->loss += e->losses[t] / T;
    }
    // (7a-d): the loss, the head
    double dlogits[T * V], dnormed[T * C], dstream[T * C], dconcat[T * C];
    for (int t = 0; t < T; t++)
        for (int u = 0; u < V; u++) dlogits[t * V + u] = (e->probs[t * V + u] - (u == WALK_TARGETS[t])) / T;
    matmul_bt(dnormed, dlogits, w_head, T, V, C);
    memcpy(e->grads[WALK_G_LOGITS], dlogits, sizeof dlogits);
    memcpy(e->grads[WALK_G_NORMED], dnormed, sizeof dnormed);
    matmul_at(e->grads[WALK_G_W_HEAD], e->normed, dlogits, T, C, V);
    column_sums(e->grads[WALK_G_B_HEAD], dlogits, T, V);
    // (8a-b): RMSNorm by its whole Jacobian, not the walkthrough's short
    // form: normed_j = g_j x_j / rms, d rms / d x_i = x_i / (C rms), so
    // d normed_j / d x_i = g_j ([i == j] / rms - x_j x_i / (C rms^3)).
    memset(e->grads[WALK_G_NORM_WEIGHT], 0, sizeof e->grads[WALK_G_NORM_WEIGHT]);
    for (int t = 0; t < T; t++) {
        const double *x = e->stream + t * C, r = rms[t];
        for (int i = 0; i < C; i++) {
            double dx = 0;
            for (int j = 0; j < C; j++)
                dx += dnormed[t * C + j] * WALK_NORM_WEIGHT[j] * ((i == j) / r - x[j] * x[i] / (C * r * r * r));
            dstream[t * C + i] = dx;
            e->grads[WALK_G_NORM_WEIGHT][i] += dnormed[t * C + i] * x[i] / r;
        }
    }
    memcpy(e->grads[WALK_G_STREAM], dstream, sizeof dstream);
    // (9a-d): stream = concat + out hands d stream to both; the context
    // gets it again through the projection
    memcpy(e->grads[WALK_G_OUTPUT], dstream, sizeof dstream);
    matmul_at(e->grads[WALK_G_W_OUT], concat, dstream, T, C, C);
    column_sums(e->grads[WALK_G_B_OUT], dstream, T, C);
    matmul_bt(dconcat, dstream, w_out, T, C, C);
    for (int i = 0; i < T * C; i++) dconcat[i] += dstream[i];
    memcpy(e->grads[WALK_G_CONTEXT], dconcat, sizeof dconcat);
    // (10a-g) and (11a-d): each head, then the projections and X
    memset(e->grads[WALK_G_X], 0, sizeof e->grads[WALK_G_X]);
    for (int h = 0; h < 2; h++) {
        double dctx[T * D_OUT], dq[T * D_OUT], dk[T * D_OUT], dv[T * D_OUT];
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D_OUT; i++) dctx[t * D_OUT + i] = dconcat[t * C + h * D_OUT + i];
        head_backward(e->grads[h == 0 ? WALK_G_WEIGHTS1 : WALK_G_WEIGHTS2],
                      e->grads[h == 0 ? WALK_G_SCORES1 : WALK_G_SCORES2], dq, dk, dv, dctx, weights[h], q[h], k[h],
                      v[h]);
        const double *dqkv[3] = {dq, dk, dv};
        const float(*const *w[3])[D_OUT] = {wq, wk, wv};
        for (int part = 0; part < 3; part++) {
            double dw[D_IN * D_OUT], W[D_IN * D_OUT], dx[T * D_IN];
            put_head(e->grads[WALK_G_QUERIES + part], dqkv[part], T, h);
            matmul_at(dw, X, dqkv[part], T, D_IN, D_OUT);  // X^T d q
            put_head(e->grads[WALK_G_W_QUERY + part], dw, D_IN, h);
            load(W, &w[part][h][0][0], D_IN * D_OUT);
            matmul_bt(dx, dqkv[part], W, T, D_OUT, D_IN);  // d q W^T
            for (int i = 0; i < T * D_IN; i++) e->grads[WALK_G_X][i] += dx[i];
        }
    }
}

static char *printed_backward;  // walkthrough_backward_print's output
static WalkBackward computed;   // what it printed
static int printed_disagree;    // what it returned

static void print_backward(const WalkBackward *b, char **out, int *disagree) {
    size_t len;
    FILE *f = open_memstream(out, &len);
    ck_assert_ptr_nonnull(f);
    *disagree = walkthrough_backward_print(b, f);
    fclose(f);
}

// The backward fixture: read_printed reads steps 6-11's output.
static void setup_backward(void) {
    walkthrough_backward_compute(&computed);
    print_backward(&computed, &printed_backward, &printed_disagree);
    printed = printed_backward;
}
static void teardown_backward(void) { free(printed_backward); }

// The gradient printed under "tag" [rows x cols]: per row a line "label d
// numbers" and a line "fd numbers" (none when "numeric" is NULL: what
// scripts/walkthrough_torch.py prints); a number followed by '!' is marked
// as disagreeing, "." (not computed) reads as NAN.
static void read_gradient(const char *tag, int rows, int cols, double *analytic, double *numeric, bool *marked) {
    char needle[64];
    snprintf(needle, sizeof needle, "\n%s", tag);
    const char *p = strstr(printed, needle);
    ck_assert_msg(p != NULL, "no gradient %s in the output", tag);
    char shape[32];
    snprintf(shape, sizeof shape, "[%d x %d]\n", rows, cols);
    const char *eol = strchr(p + 1, '\n');
    ck_assert_msg(eol && strstr(p + 1, shape) == eol - strlen(shape) + 1, "%s is not printed as %s", tag, shape);
    p = strchr(eol + 1, '\n') + 1;  // past the column labels
    const int lines = numeric ? 2 : 1;  // per row
    for (int r = 0; r < lines * rows; r++) {
        const bool fd = lines == 2 && r % 2 == 1;
        char line[512];
        const char *end = strchr(p, '\n');
        ck_assert_msg(end && (size_t)(end - p) < sizeof line, "%s: line %d missing", tag, r);
        memcpy(line, p, (size_t)(end - p));
        line[end - p] = '\0';
        char *save, *tok = strtok_r(line, " ", &save);
        if (!fd) tok = strtok_r(NULL, " ", &save);  // past the row label
        ck_assert_msg(tok && strcmp(tok, fd ? "fd" : "d") == 0, "%s: line %d does not start with %s", tag, r,
                      fd ? "fd" : "d");
        for (int c = 0; c < cols; c++) {
            tok = strtok_r(NULL, " ", &save);
            ck_assert_msg(tok != NULL, "%s: line %d has fewer than %d numbers", tag, r, cols);
            const size_t n = strlen(tok);
            const bool mark = n > 1 && tok[n - 1] == '!';
            if (mark) tok[n - 1] = '\0';
            char *num_end;
            const double value = strcmp(tok, ".") == 0 ? NAN : strtod(tok, &num_end);
            if (strcmp(tok, ".") != 0) ck_assert_msg(*num_end == '\0', "%s: '%s' is not a number", tag, tok);
            (fd ? numeric : analytic)[(r / lines) * cols + c] = value;
            if (marked) marked[(r / lines) * cols + c] |= mark;
        }
        ck_assert_msg(strtok_r(NULL, " ", &save) == NULL, "%s: line %d has more than %d numbers", tag, r, cols);
        p = end + 1;
    }
}

static const char *const GRADIENT_TAGS[NG] = {"(7a)",  "(7b)",  "(7c)",  "(7d)",  "(8a)",  "(8b)",  "(9a)",
                                              "(9b)",  "(9c)",  "(9d)",  "(10a)", "(10b)", "(10c)", "(10d)",
                                              "(10e)", "(10f)", "(10g)", "(11a)", "(11b)", "(11c)", "(11d)"};
static const int GRADIENT_SHAPES[NG][2] = {{T, V},    {T, C},    {C, V},    {1, V},   {T, C}, {1, C}, {T, C},
                                           {C, C},    {1, C},    {T, C},    {T, T},   {T, T}, {T, T}, {T, T},
                                           {T, C},    {T, C},    {T, C},    {D_IN, C}, {D_IN, C}, {D_IN, C}, {T, D_IN}};

START_TEST(step_6_prints_the_residual_the_norm_the_head_and_the_loss_of_each_next_token) {
    Expected e;
    expected_backward(&e);
    assert_printed("(6a)", e.stream, T, C);
    assert_printed("(6b)", e.normed, T, C);
    assert_printed("(6c)", e.logits, T, V);
    assert_printed("(6d)", e.probs, T, V);
    assert_printed("(6e)", e.losses, T, 1);
    const char *line = strstr(printed, "\nloss = mean of (6e) = ");
    ck_assert_msg(line != NULL, "no loss line");
    ck_assert_double_eq_tol(strtod(line + strlen("\nloss = mean of (6e) = "), NULL), e.loss, PRINTED_TOL);
    ck_assert_msg(strstr(printed, "targets: journey starts with one step Your\n") != NULL, "targets not printed");
}
END_TEST

// Loop test over the gradients (7a) ... (9d): each printed value is the
// gradient worked out here, and its printed finite difference agrees with
// it, unmarked.
START_TEST(every_gradient_is_the_chain_rule_and_agrees_with_its_finite_difference) {
    Expected e;
    expected_backward(&e);
    const char *tag = GRADIENT_TAGS[_i];
    const int rows = GRADIENT_SHAPES[_i][0], cols = GRADIENT_SHAPES[_i][1];
    double analytic[CELLS], numeric[CELLS];
    bool marked[CELLS] = {false};
    read_gradient(tag, rows, cols, analytic, numeric, marked);
    const bool causal = _i == WALK_G_WEIGHTS1 || _i == WALK_G_SCORES1 || _i == WALK_G_WEIGHTS2 || _i == WALK_G_SCORES2;
    for (int i = 0; i < rows * cols; i++) {
        const int r = i / cols, c = i % cols;
        if (causal && c > r) {
            ck_assert_msg(isnan(analytic[i]) && isnan(numeric[i]), "%s [%d,%d]: above the diagonal", tag, r, c);
            continue;
        }
        ck_assert_msg(fabs(analytic[i] - e.grads[_i][i]) <= GRADIENT_PRINTED_TOL,
                      "%s [%d,%d]: printed %.5f, the chain rule gives %.7f", tag, r, c, analytic[i], e.grads[_i][i]);
        ck_assert_msg(walkthrough_agrees(analytic[i], numeric[i]) && !marked[i],
                      "%s [%d,%d]: gradient %.5f, finite difference %.5f%s", tag, r, c, analytic[i], numeric[i],
                      marked[i] ? " (marked)" : "");
    }
}
END_TEST

// The residual, read off the printed rows: the branch's gradient (9a) is
// the stream's (8a), digit for digit, and the context's (9d) is the
// stream's again (the skip path) plus the projection's d output W_out^T.
START_TEST(the_residual_hands_d_stream_to_the_branch_and_adds_it_to_the_context) {
    double dstream[T * C], doutput[T * C], dcontext[T * C], unused[T * C], w_out[C * C], projected[T * C];
    read_gradient("(8a)", T, C, dstream, unused, NULL);
    read_gradient("(9a)", T, C, doutput, unused, NULL);
    read_gradient("(9d)", T, C, dcontext, unused, NULL);
    load(w_out, &WALK_W_OUT[0][0], C * C);
    matmul_bt(projected, doutput, w_out, T, C, C);
    for (int i = 0; i < T * C; i++) {
        ck_assert_msg(doutput[i] == dstream[i], "(9a) [%d,%d] = %.5f, (8a) %.5f", i / C, i % C, doutput[i],
                      dstream[i]);
        // Three printed values, each off by up to 5e-6 (d output's through a
        // row of W_out, whose |w| sum to at most 0.9); d stream is 0.01-0.2,
        // so a context without the skip path would fail by far.
        ck_assert_msg(fabs(dcontext[i] - (dstream[i] + projected[i])) <= 2 * GRADIENT_PRINTED_TOL,
                      "(9d) [%d,%d] = %.5f, not d stream + d output W_out^T = %.5f", i / C, i % C, dcontext[i],
                      dstream[i] + projected[i]);
    }
}
END_TEST

START_TEST(when_every_gradient_agrees_the_last_line_says_so_and_nothing_is_marked) {
    ck_assert_int_eq(printed_disagree, 0);
    for (const char *mark = strchr(printed, '!'); mark; mark = strchr(mark + 1, '!'))
        ck_assert_msg(!isdigit((unsigned char)mark[-1]), "a value is marked: %.20s", mark - 9);
    ck_assert_msg(strstr(printed, "\nAll 396 gradients agree with their finite differences") != NULL,
                  "no summary line for 396 gradients");
    ck_assert_msg(strstr(printed, "MISMATCH") == NULL && strstr(printed, "DISAGREES") == NULL, "a mismatch reported");
}
END_TEST

// A slip in a backward pass (here: one d score off by 0.001, as a softmax
// backward without its "- <w, dw>" term would put it off) is marked where
// it is, named in its matrix's last line and in the summary, and counted.
START_TEST(a_gradient_that_disagrees_is_marked_and_counted) {
    WalkBackward broken = computed;
    const int cell = 4 * T + 2;  // (10b), row "one", column "starts"
    broken.grads[WALK_G_SCORES1].analytic[cell] += 1e-3f;
    char *out;
    int disagree;
    print_backward(&broken, &out, &disagree);
    ck_assert_int_eq(disagree, 1);
    printed = out;
    double analytic[CELLS], numeric[CELLS];
    bool marked[CELLS] = {false};
    read_gradient("(10b)", T, T, analytic, numeric, marked);
    for (int i = 0; i < T * T; i++)
        ck_assert_msg(marked[i] == (i == cell), "(10b) [%d,%d] marked: %d", i / T, i % T, marked[i]);
    const char *matrix = strstr(out, "\n(10b)"), *next = strstr(out, "\n(10c)");
    const char *verdict = strstr(matrix, "DISAGREES (marked !)");
    ck_assert_msg(verdict != NULL && verdict < next, "(10b)'s last line does not say it disagrees");
    ck_assert_msg(strstr(out, "\nMISMATCH: 1 of 396 gradients disagree") != NULL, "no MISMATCH line");
    printed = printed_backward;
    free(out);
}
END_TEST

START_TEST(agreement_is_within_the_stated_absolute_and_relative_tolerance) {
    ck_assert(walkthrough_agrees(0.0, 0.0));
    ck_assert(walkthrough_agrees(0.0, 0.9 * WALK_FD_ATOL));
    ck_assert(!walkthrough_agrees(0.0, 1.1 * WALK_FD_ATOL));
    ck_assert(walkthrough_agrees(1.0, 1.0 + 0.9 * WALK_FD_RTOL));
    ck_assert(!walkthrough_agrees(1.0, 1.0 + 1.1 * WALK_FD_RTOL + WALK_FD_ATOL));
    ck_assert(!walkthrough_agrees(NAN, 0.0));
}
END_TEST

START_TEST(the_walkthrough_command_with_backward_prints_both_passes_and_exits_0) {
    char *forward;
    size_t len;
    Walkthrough w;
    walkthrough_compute(&w, 9);
    FILE *f = open_memstream(&forward, &len);
    walkthrough_print(&w, f);
    fputs(printed_backward, f);
    fclose(f);
    char dir[256];
    scratch_dir_create(dir, sizeof dir);
    RunResult *r = run_tinygpt(dir, "walkthrough --backward");
    ck_assert_msg(r->status == 0, "walkthrough --backward failed (%d): %s", r->status, r->err);
    ck_assert_str_eq(r->out, forward);
    scratch_dir_remove(dir);
    free(forward);
}
END_TEST

// ---------------------------------------------------------------------------
// scripts/walkthrough_torch.py: the same example in PyTorch, its gradients
// from autograd.

// Both print 5 decimals of float32 numbers summed in different orders,
// which may round to last digits one apart.
static const double TORCH_PRINTED_TOL = 1.5e-5;
// Debian's, as the Makefile's scripts run: where python3-torch installs.
static const char *const PYTHON = "/usr/bin/python3";

START_TEST(pytorch_autograd_prints_every_gradient_the_walkthrough_prints) {
    char dir[256];
    scratch_dir_create(dir, sizeof dir);
    RunResult *r = run_binary(PYTHON, dir, "scripts/walkthrough_torch.py");
    if (r->status == 127 || strstr(r->err, "No module named 'torch'")) {  // no python3, or no torch
        // make parity installs torch first and sets this: there, a skip would hide the comparison.
        ck_assert_msg(getenv("TINYGPT_REQUIRE_TORCH") == NULL, "%s has no torch, yet TINYGPT_REQUIRE_TORCH is set",
                      PYTHON);
        fprintf(stderr, "walkthrough: skipped comparing scripts/walkthrough_torch.py: %s has no torch "
                        "(scripts/setup.sh --python installs python3-torch)\n", PYTHON);
        scratch_dir_remove(dir);
        return;
    }
    ck_assert_msg(r->status == 0, "walkthrough_torch.py failed (%d): %s", r->status, r->err);
    const char *loss = strstr(r->out, "loss = ");
    ck_assert_msg(loss == r->out, "walkthrough_torch.py does not start with its loss: %.40s", r->out);
    ck_assert_double_eq_tol(strtod(loss + strlen("loss = "), NULL), computed.loss, PRINTED_TOL);
    int compared = 0;
    for (int g = 0; g < NG; g++) {
        const int rows = GRADIENT_SHAPES[g][0], cols = GRADIENT_SHAPES[g][1];
        double walk[CELLS], walk_fd[CELLS], torch[CELLS];
        printed = printed_backward;
        read_gradient(GRADIENT_TAGS[g], rows, cols, walk, walk_fd, NULL);
        printed = r->out;
        read_gradient(GRADIENT_TAGS[g], rows, cols, torch, NULL, NULL);
        for (int i = 0; i < rows * cols; i++) {
            if (isnan(walk[i])) {
                ck_assert_msg(isnan(torch[i]), "%s [%d,%d]: PyTorch prints %.5f where the walkthrough prints '.'",
                              GRADIENT_TAGS[g], i / cols, i % cols, torch[i]);
                continue;
            }
            ck_assert_msg(fabs(torch[i] - walk[i]) <= TORCH_PRINTED_TOL, "%s [%d,%d]: PyTorch %.5f, walkthrough %.5f",
                          GRADIENT_TAGS[g], i / cols, i % cols, torch[i], walk[i]);
            compared++;
        }
    }
    printed = printed_backward;
    ck_assert_int_eq(compared, 396);  // every gradient the walkthrough's last line counts
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
    TCase *backward = tcase_create("backward");
    tcase_add_checked_fixture(backward, setup_backward, teardown_backward);
    tcase_set_timeout(backward, 30);  // one test runs the binary
    tcase_add_test(backward, step_6_prints_the_residual_the_norm_the_head_and_the_loss_of_each_next_token);
    tcase_add_loop_test(backward, every_gradient_is_the_chain_rule_and_agrees_with_its_finite_difference, 0, NG);
    tcase_add_test(backward, the_residual_hands_d_stream_to_the_branch_and_adds_it_to_the_context);
    tcase_add_test(backward, when_every_gradient_agrees_the_last_line_says_so_and_nothing_is_marked);
    tcase_add_test(backward, a_gradient_that_disagrees_is_marked_and_counted);
    tcase_add_test(backward, agreement_is_within_the_stated_absolute_and_relative_tolerance);
    tcase_add_test(backward, the_walkthrough_command_with_backward_prints_both_passes_and_exits_0);
    tcase_add_test(backward, pytorch_autograd_prints_every_gradient_the_walkthrough_prints);
    suite_add_tcase(s, backward);
    return s;
}
