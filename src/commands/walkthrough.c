// walkthrough.c: the attention example, steps 1-5 (see walkthrough.h).
#include "walkthrough.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "attention.h"
#include "crossentropy.h"
#include "fast.h"
#include "linear.h"
#include "rng.h"

enum { T = WALK_T, D_IN = WALK_D_IN, D_OUT = WALK_D_OUT, HEADS = WALK_HEADS, C = WALK_C };

const char *const WALK_TOKENS[T] = {"Your", "journey", "starts", "with", "one", "step"};
const float WALK_X[T][D_IN] = {
    {0.43f, 0.15f, 0.89f},  // Your
    {0.55f, 0.87f, 0.66f},  // journey
    {0.57f, 0.85f, 0.64f},  // starts
    {0.22f, 0.58f, 0.33f},  // with
    {0.77f, 0.25f, 0.10f},  // one
    {0.05f, 0.80f, 0.55f},  // step
};
const float WALK_W_QUERY[D_IN][D_OUT] = {{0.2961f, 0.5166f}, {0.2517f, 0.6886f}, {0.0740f, 0.8665f}};
const float WALK_W_KEY[D_IN][D_OUT] = {{0.1366f, 0.1025f}, {0.1841f, 0.7264f}, {0.3153f, 0.6871f}};
const float WALK_W_VALUE[D_IN][D_OUT] = {{0.0756f, 0.1966f}, {0.3164f, 0.4017f}, {0.1186f, 0.8274f}};
// Step 5's second head: small weights of both signs, chosen so that its
// pattern of attention differs visibly from the first head's.
const float WALK_W2_QUERY[D_IN][D_OUT] = {{0.9f, -0.4f}, {-0.6f, 0.2f}, {0.3f, 0.8f}};
const float WALK_W2_KEY[D_IN][D_OUT] = {{0.8f, 0.1f}, {-0.7f, 0.5f}, {0.2f, -0.3f}};
const float WALK_W2_VALUE[D_IN][D_OUT] = {{0.5f, -0.3f}, {0.2f, 0.4f}, {-0.1f, 0.6f}};
const float WALK_W_OUT[C][C] = {
    {0.3f, -0.1f, 0.2f, 0.0f},
    {0.1f, 0.4f, -0.2f, 0.3f},
    {-0.2f, 0.1f, 0.5f, 0.1f},
    {0.0f, 0.3f, 0.1f, -0.4f},
};
const float WALK_B_OUT[C] = {0.1f, 0.0f, -0.1f, 0.05f};
const float WALK_DROPOUT = 0.5f;

// Rows [first_row, first_row + d_out) of a PyTorch-layout weight [out, d_in]
// get the textbook's w[d_in, d_out], transposed: weight[first_row + o, i] = w[i, o].
void walk_weight_rows(float *weight, int first_row, const float w[D_IN][D_OUT]) {
    for (int o = 0; o < D_OUT; o++)
        for (int i = 0; i < D_IN; i++) weight[(size_t)(first_row + o) * D_IN + i] = w[i][o];
}

// out[cols, rows] = m[rows, cols] transposed: "multiply by m" as a weight
void walk_transpose(float *out, const float *m, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) out[(size_t)c * rows + r] = m[(size_t)r * cols + c];
}

void walkthrough_compute(Walkthrough *w, uint64_t dropout_key) {
    memset(w, 0, sizeof *w);
    w->dropout_key = dropout_key;
    const float *X = &WALK_X[0][0];  // [T, D_IN]
    float transposed[T * T];                   // X^T or values^T: a right-hand factor as a linear weight
    float keys_t[HEADS * D_OUT * T];  // attention_forward's saved keys, transposed
    float dropped[HEADS * T * T] = {0};  // attention_forward's weights after dropout (unused: no dropout)

    // Step 1. A linear layer computes inp @ weight^T, so X X^T is a linear
    // layer whose weight is X, and weights X one whose weight is X^T.
    linear_forward_reference(w->scores1, X, X, NULL, T, D_IN, T);
    softmax_forward(w->weights1, w->scores1, T, T);
    walk_transpose(transposed, X, T, D_IN);
    linear_forward_reference(w->context1, w->weights1, transposed, NULL, T, T, D_IN);

    // Step 2. One linear layer with weight [W_query^T; W_key^T; W_value^T]
    // computes all three projections, packed the way the model's
    // qkv_weight packs them.
    float qkv_weight[3 * D_OUT * D_IN];  // [3*D_OUT, D_IN]
    walk_weight_rows(qkv_weight, 0, WALK_W_QUERY);
    walk_weight_rows(qkv_weight, D_OUT, WALK_W_KEY);
    walk_weight_rows(qkv_weight, 2 * D_OUT, WALK_W_VALUE);
    linear_forward(w->qkv, X, qkv_weight, NULL, T, D_IN, 3 * D_OUT);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < D_OUT; i++) {
            w->queries[t * D_OUT + i] = w->qkv[t * 3 * D_OUT + i];
            w->keys[t * D_OUT + i] = w->qkv[t * 3 * D_OUT + D_OUT + i];
            w->values[t * D_OUT + i] = w->qkv[t * 3 * D_OUT + 2 * D_OUT + i];
        }
    }
    linear_forward_reference(w->scores2, w->queries, w->keys, NULL, T, D_OUT, T);
    float scaled[T * T];
    const float scale = 1.0f / sqrtf((float)D_OUT);  // the factor attention_forward applies
    for (int i = 0; i < T * T; i++) scaled[i] = w->scores2[i] * scale;
    softmax_forward(w->weights2, scaled, T, T);
    walk_transpose(transposed, w->values, T, D_OUT);
    linear_forward_reference(w->context2, w->weights2, transposed, NULL, T, T, D_OUT);

    // Step 3. The naive way: step 2's weights, the future zeroed, each row
    // divided by what is left of its sum.
    for (int t = 0; t < T; t++) {
        float sum = 0.0f;
        for (int j = 0; j < T; j++) {
            w->naive3[t * T + j] = j <= t ? w->weights2[t * T + j] : 0.0f;
            sum += w->naive3[t * T + j];
        }
        for (int j = 0; j < T; j++) w->naive3[t * T + j] /= sum;
    }
    // The real way: -inf before the softmax, and exp(-inf) = 0.
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++) w->masked_scores3[t * T + j] = j <= t ? scaled[t * T + j] : -INFINITY;
    softmax_forward(w->masked_weights3, w->masked_scores3, T, T);
    // And what training runs: attention_forward on the packed q, k, v
    // (batch 1, one head of D_OUT channels, dropout off).
    attention_forward(w->context3, w->attn_weights3, dropped, keys_t, w->qkv, 1, T, D_OUT, 1, 0.0f, 0, 0);

    // Step 4. The same call with dropout on; attn_weights come out before
    // dropout, dropped_weights after. The factors, from the rule itself
    // (rng.h), for weight (t, j), index t * T + j of the one head's [T,T].
    float weights4[T * T];
    attention_forward(w->context4, weights4, w->dropped4, keys_t, w->qkv, 1, T, D_OUT, 1, WALK_DROPOUT, dropout_key,
                      0);
    const float keep = 1.0f / (1.0f - WALK_DROPOUT);
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++)
            w->dropout_factors4[t * T + j] = dropout_factor(dropout_key, (uint64_t)(t * T + j), WALK_DROPOUT, keep);

    // Step 5. Two heads: q, k and v each get C = 2 * D_OUT channels, head h
    // owning channels [h*D_OUT, (h+1)*D_OUT) of each, as in the model.
    float qkv_weight5[3 * C * D_IN];  // [3C, D_IN]
    walk_weight_rows(qkv_weight5, 0, WALK_W_QUERY);
    walk_weight_rows(qkv_weight5, D_OUT, WALK_W2_QUERY);
    walk_weight_rows(qkv_weight5, C, WALK_W_KEY);
    walk_weight_rows(qkv_weight5, C + D_OUT, WALK_W2_KEY);
    walk_weight_rows(qkv_weight5, 2 * C, WALK_W_VALUE);
    walk_weight_rows(qkv_weight5, 2 * C + D_OUT, WALK_W2_VALUE);
    linear_forward(w->qkv5, X, qkv_weight5, NULL, T, D_IN, 3 * C);
    attention_forward(w->concat5, w->attn_weights5, dropped, keys_t, w->qkv5, 1, T, C, HEADS, 0.0f, 0, 0);
    float proj_weight[C * C];  // W_out^T: our layer's [out, in] layout
    walk_transpose(proj_weight, &WALK_W_OUT[0][0], C, C);
    linear_forward(w->out5, w->concat5, proj_weight, WALK_B_OUT, T, C, C);
}

// ---------------------------------------------------------------------------
// Printing

const char *const WALK_DIMS[WALK_D_IN] = {"d1", "d2", "d3"};
const char *const WALK_HEAD_DIMS[WALK_C] = {"h1.d1", "h1.d2", "h2.d1", "h2.d2"};
const char *const WALK_OUT_DIMS[WALK_C] = {"o1", "o2", "o3", "o4"};

// "(tag) title [rows x cols]", a row of column labels, then one row per line:
// its label and %.4f numbers (-inf as "-inf"). With "causal_only", entries
// above the diagonal, which nothing computed, print as ".".
void walk_print_matrix(FILE *out, const char *title, const float *m, int rows, int cols, const char *const *row_labels,
                       const char *const *col_labels, bool causal_only) {
    fprintf(out, "%s [%d x %d]\n%10s", title, rows, cols, "");
    for (int c = 0; c < cols; c++) fprintf(out, " %9s", col_labels[c]);
    fputc('\n', out);
    for (int r = 0; r < rows; r++) {
        fprintf(out, "  %-8s", row_labels[r]);
        for (int c = 0; c < cols; c++) {
            if (causal_only && c > r) fprintf(out, " %9s", ".");
            else fprintf(out, " %9.4f", (double)m[(size_t)r * cols + c]);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
}

static float max_abs_diff(const float *a, const float *b, int n) {
    float worst = 0.0f;
    for (int i = 0; i < n; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
    return worst;
}

void walkthrough_print(const Walkthrough *w, FILE *out) {
    const char *const *tok = WALK_TOKENS;
    fprintf(out,
            "Self-attention on \"Your journey starts with one step\", step by step.\n"
            "Every number below comes from the functions that train tinygpt (linear_forward,\n"
            "softmax_forward, attention_forward), called with the fixed weights of the classic example.\n\n");
    walk_print_matrix(out, "X: one 3-d embedding per token", &WALK_X[0][0], T, D_IN, tok, WALK_DIMS, false);

    fprintf(out, "== Step 1: simplified self-attention, no trainable weights ==\n"
                 "Each token scores every token by a dot product, softmax turns the scores into weights\n"
                 "that sum to 1, and its context vector is the weighted mean of all the embeddings.\n\n");
    walk_print_matrix(out, "(1a) scores = X X^T (linear_forward_reference, weight X)", w->scores1, T, T, tok, tok,
                      false);
    walk_print_matrix(out, "(1b) weights = softmax of each row (softmax_forward)", w->weights1, T, T, tok, tok, false);
    walk_print_matrix(out, "(1c) context = weights X (linear_forward_reference, weight X^T)", w->context1, T, D_IN, tok,
                      WALK_DIMS, false);

    fprintf(out, "== Step 2: trainable projections ==\n"
                 "Three learned matrices turn each embedding into a query (what it looks for), a key (what\n"
                 "it offers) and a value (what it passes on); the scores are divided by sqrt(2) = sqrt(d_out).\n\n");
    static const char *const QDIMS[] = {"q1", "q2"}, *const KDIMS[] = {"k1", "k2"}, *const VDIMS[] = {"v1", "v2"};
    walk_print_matrix(out, "W_query", &WALK_W_QUERY[0][0], D_IN, D_OUT, WALK_DIMS, QDIMS, false);
    walk_print_matrix(out, "W_key", &WALK_W_KEY[0][0], D_IN, D_OUT, WALK_DIMS, KDIMS, false);
    walk_print_matrix(out, "W_value", &WALK_W_VALUE[0][0], D_IN, D_OUT, WALK_DIMS, VDIMS, false);
    walk_print_matrix(out, "(2a) queries = X W_query (linear_forward, one weight for q, k and v)", w->queries, T, D_OUT,
                      tok, QDIMS, false);
    walk_print_matrix(out, "(2b) keys = X W_key", w->keys, T, D_OUT, tok, KDIMS, false);
    walk_print_matrix(out, "(2c) values = X W_value", w->values, T, D_OUT, tok, VDIMS, false);
    walk_print_matrix(out, "(2d) scores = queries keys^T (linear_forward_reference, weight keys)", w->scores2, T, T,
                      tok, tok, false);
    walk_print_matrix(out, "(2e) weights = softmax(scores / sqrt(2)) (softmax_forward)", w->weights2, T, T, tok, tok,
                      false);
    walk_print_matrix(out, "(2f) context = weights values (linear_forward_reference, weight values^T)", w->context2, T,
                      D_OUT, tok, VDIMS, false);

    fprintf(out, "== Step 3: causal attention ==\n"
                 "A token may not read the tokens after it, so the weights above the diagonal must be 0.\n\n");
    walk_print_matrix(out, "(3a) naive: (2e) with the future zeroed, each row divided by its new sum", w->naive3, T, T,
                      tok, tok, false);
    walk_print_matrix(out, "(3b) masked scores: scores / sqrt(2), -inf above the diagonal", w->masked_scores3, T, T,
                      tok, tok, false);
    walk_print_matrix(out, "(3c) weights = softmax(masked scores) (softmax_forward)", w->masked_weights3, T, T, tok,
                      tok, false);
    fprintf(out, "(3a) and (3c) differ by at most %.1e: the same weights, because exp(-inf) = 0 and softmax\n"
                 "divides by the row's sum anyway. Nothing from the future leaks into them.\n\n",
            (double)max_abs_diff(w->naive3, w->masked_weights3, T * T));
    walk_print_matrix(out, "(3d) weights inside attention_forward, which never computes the masked scores",
                      w->attn_weights3, T, T, tok, tok, false);
    walk_print_matrix(out, "(3e) causal context = weights values (attention_forward)", w->context3, T, D_OUT, tok,
                      VDIMS, false);

    int kept = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++) kept += w->dropout_factors4[t * T + j] != 0.0f;
    fprintf(out, "== Step 4: dropout, p = %.1f (training only; key %llu) ==\n"
                 "Each weight is zeroed with probability p and the kept ones are multiplied by 1/(1-p) = 2,\n"
                 "so the expected weight is unchanged. This mask kept %d of the %d weights.\n\n",
            (double)WALK_DROPOUT, (unsigned long long)w->dropout_key, kept, T * (T + 1) / 2);
    walk_print_matrix(out, "(4a) dropout factors (dropout_factor, rng.h)", w->dropout_factors4, T, T, tok, tok, true);
    walk_print_matrix(out, "(4b) weights after dropout (attention_forward's dropped_weights) = (3d) x factors",
                      w->dropped4, T, T, tok, tok, false);
    walk_print_matrix(out, "(4c) context with dropout (attention_forward)", w->context4, T, D_OUT, tok, VDIMS, false);

    fprintf(out, "== Step 5: two heads, then the output projection ==\n"
                 "Head 1 is the head above; head 2 has its own weights. Each head reads the tokens in its\n"
                 "own way; their contexts sit side by side, and one linear layer mixes them.\n\n");
    walk_print_matrix(out, "W2_query (head 2)", &WALK_W2_QUERY[0][0], D_IN, D_OUT, WALK_DIMS, QDIMS, false);
    walk_print_matrix(out, "W2_key (head 2)", &WALK_W2_KEY[0][0], D_IN, D_OUT, WALK_DIMS, KDIMS, false);
    walk_print_matrix(out, "W2_value (head 2)", &WALK_W2_VALUE[0][0], D_IN, D_OUT, WALK_DIMS, VDIMS, false);
    fprintf(out, "Head 1's weights (attention_forward with 2 heads) differ from (3d) by at most %.1e.\n\n",
            (double)max_abs_diff(w->attn_weights5, w->attn_weights3, T * T));
    walk_print_matrix(out, "(5a) head 2's weights (attention_forward, 2 heads)", w->attn_weights5 + T * T, T, T, tok,
                      tok, false);
    walk_print_matrix(out, "(5b) context, heads concatenated: head 1 | head 2 (attention_forward)", w->concat5, T, C,
                      tok, WALK_HEAD_DIMS, false);
    walk_print_matrix(out, "W_out", &WALK_W_OUT[0][0], C, C, WALK_HEAD_DIMS, WALK_OUT_DIMS, false);
    walk_print_matrix(out, "b_out", WALK_B_OUT, 1, C, (const char *const[]){"bias"}, WALK_OUT_DIMS, false);
    walk_print_matrix(out, "(5c) output = context W_out + b_out (linear_forward)", w->out5, T, C, tok, WALK_OUT_DIMS,
                      false);
    fprintf(out, "tinygpt's model is step 5 with C = --embd channels split into --heads heads, and a token\n"
                 "plus position embedding in place of X; `tinygpt train` learns every weight above.\n");
}
