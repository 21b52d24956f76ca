// walkthrough_backward.c: steps 6-11 of the attention example: a residual,
// a norm, a loss, and the backward pass, every gradient beside its finite
// difference; and the command, which runs steps 1-5 and, with --backward,
// these (see walkthrough_backward.h).
#include "walkthrough_backward.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "args.h"
#include "attention.h"
#include "crossentropy.h"
#include "fast.h"
#include "linear.h"
#include "residual.h"
#include "rmsnorm.h"

enum { T = WALK_T, D_IN = WALK_D_IN, D_OUT = WALK_D_OUT, HEADS = WALK_HEADS, C = WALK_C };

// The norm's weight g: RMSNorm's starts at 1 in training; these differ from
// 1 (ours, not the textbook's), so that multiplying by g shows.
const float WALK_NORM_WEIGHT[C] = {1.0f, 0.8f, 1.2f, 0.9f};
// The head: small weights of both signs (ours, not the textbook's), in the
// example's layout [d_in, d_out]: row o of W_HEAD is what output channel o
// adds to each token's logit.
const float WALK_W_HEAD[C][WALK_V] = {
    {0.5f, -0.3f, 0.8f, -0.6f, 0.2f, 0.4f},
    {-0.4f, 0.7f, -0.2f, 0.3f, 0.9f, -0.5f},
    {0.6f, 0.1f, -0.7f, 0.5f, -0.3f, 0.2f},
    {-0.2f, -0.6f, 0.4f, 0.1f, 0.7f, -0.8f},
};
const float WALK_B_HEAD[WALK_V] = {0.05f, -0.1f, 0.0f, 0.1f, -0.05f, 0.02f};
const int WALK_TARGETS[T] = {1, 2, 3, 4, 5, 0};  // the next token; after "step", "Your" again
const double WALK_FD_STEP = 1e-2, WALK_FD_ATOL = 5e-5, WALK_FD_RTOL = 1e-2;

enum { V = WALK_V, NG = WALK_N_GRADIENTS };

// Every tensor of the backward example, in the layers' layouts ([out, in]
// weights), and the gradient of each.
typedef struct {
    float X[T * D_IN];                 // the embeddings: a tensor of their own, so they can be moved
    float qkv_weight[3 * C * D_IN];    // [3C, D_IN] step 5's, both heads
    float qkv[T * 3 * C];              // [T, 3C]
    float scores[HEADS * T * T];       // [HEADS, T, T] q.k / sqrt(D_OUT), -inf above the diagonal
    float weights[HEADS * T * T];      // [HEADS, T, T] their softmax
    float context[T * C];              // [T, C] both heads' contexts
    float proj_weight[C * C], proj_bias[C];
    float output[T * C];               // [T, C] context W_out + b_out
    float stream[T * C];               // [T, C] context + output: the residual
    float norm_weight[C], rstd[T];     // RMSNorm's g, and 1 / rms of each row of the stream
    float normed[T * C];               // [T, C] stream * rstd * g
    float head_weight[V * C], head_bias[V];
    float logits[T * V], probs[T * V], losses[T];
    float dX[T * D_IN], dqkv_weight[3 * C * D_IN], dqkv[T * 3 * C], dscores[HEADS * T * T],
        dweights[HEADS * T * T], dcontext[T * C], dproj_weight[C * C], dproj_bias[C], doutput[T * C],
        dstream[T * C], dnorm_weight[C], dnormed[T * C], dhead_weight[V * C], dhead_bias[V], dlogits[T * V];
} Work;

// Where the forward pass restarts after one tensor has changed: everything
// computed from it is computed again (in this order of the forward pass).
typedef enum {
    FROM_X, FROM_QKV, FROM_SCORES, FROM_WEIGHTS, FROM_CONTEXT, FROM_OUTPUT, FROM_STREAM, FROM_NORMED, FROM_LOGITS
} Stage;

// context = weights V, head by head, as step 2 computes it: a linear
// layer whose weight is V^T.
static void context_from_weights(Work *w) {
    for (int h = 0; h < HEADS; h++) {
        float values_t[D_OUT * T], context_h[T * D_OUT];
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D_OUT; i++) values_t[i * T + t] = w->qkv[t * 3 * C + 2 * C + h * D_OUT + i];
        linear_forward_reference(context_h, w->weights + h * T * T, values_t, NULL, T, T, D_OUT);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D_OUT; i++) w->context[t * C + h * D_OUT + i] = context_h[t * D_OUT + i];
    }
}

// forward_from: the forward pass from "from" on; returns the loss.
// attention_forward_reference computes the weights and the context from
// q, k and v at once; to change the scores or the weights alone, the rest
// of its steps run one by one: the softmax of each head's scores
// (softmax_forward), then context_from_weights.
static float forward_from(Work *w, Stage from) {
    if (from <= FROM_X) linear_forward_reference(w->qkv, w->X, w->qkv_weight, NULL, T, D_IN, 3 * C);
    if (from <= FROM_QKV) {
        attention_forward_reference(w->context, w->weights, w->qkv, 1, T, C, HEADS, 0.0f, 0, 0);
    } else {
        if (from <= FROM_SCORES) softmax_forward(w->weights, w->scores, HEADS * T, T);
        if (from <= FROM_WEIGHTS) context_from_weights(w);
    }
    if (from <= FROM_CONTEXT) linear_forward_reference(w->output, w->context, w->proj_weight, w->proj_bias, T, C, C);
    if (from <= FROM_OUTPUT) residual_forward(w->stream, w->context, w->output, (size_t)T * C, 0.0f, 0, 0);
    if (from <= FROM_STREAM) rmsnorm_forward_reference(w->normed, w->rstd, w->stream, w->norm_weight, T, C);
    if (from <= FROM_NORMED) linear_forward_reference(w->logits, w->normed, w->head_weight, w->head_bias, T, C, V);
    return crossentropy_forward(w->losses, w->probs, w->logits, WALK_TARGETS, T, V);
}

// scores_from_qkv: each head's q k^T / sqrt(D_OUT) as in steps 2-3 (a linear
// layer whose weight is the keys), -inf above the diagonal.
static void scores_from_qkv(Work *w) {
    const float scale = 1.0f / sqrtf((float)D_OUT);
    for (int h = 0; h < HEADS; h++) {
        float q[T * D_OUT], k[T * D_OUT], *scores = w->scores + h * T * T;
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D_OUT; i++) {
                q[t * D_OUT + i] = w->qkv[t * 3 * C + h * D_OUT + i];
                k[t * D_OUT + i] = w->qkv[t * 3 * C + C + h * D_OUT + i];
            }
        linear_forward_reference(scores, q, k, NULL, T, D_OUT, T);
        for (int t = 0; t < T; t++)
            for (int j = 0; j < T; j++) scores[t * T + j] = j <= t ? scores[t * T + j] * scale : -INFINITY;
    }
}

// The forward pass of steps 5-6 from the example's constants, through the
// layers' reference versions.
static void forward(Work *w) {
    memcpy(w->X, WALK_X, sizeof w->X);
    walk_weight_rows(w->qkv_weight, 0, WALK_W_QUERY);
    walk_weight_rows(w->qkv_weight, D_OUT, WALK_W2_QUERY);
    walk_weight_rows(w->qkv_weight, C, WALK_W_KEY);
    walk_weight_rows(w->qkv_weight, C + D_OUT, WALK_W2_KEY);
    walk_weight_rows(w->qkv_weight, 2 * C, WALK_W_VALUE);
    walk_weight_rows(w->qkv_weight, 2 * C + D_OUT, WALK_W2_VALUE);
    walk_transpose(w->proj_weight, &WALK_W_OUT[0][0], C, C);
    memcpy(w->proj_bias, WALK_B_OUT, sizeof w->proj_bias);
    memcpy(w->norm_weight, WALK_NORM_WEIGHT, sizeof w->norm_weight);
    walk_transpose(w->head_weight, &WALK_W_HEAD[0][0], C, V);
    memcpy(w->head_bias, WALK_B_HEAD, sizeof w->head_bias);
    forward_from(w, FROM_X);
    scores_from_qkv(w);
}

// The backward pass, each line the backward of one forward line, in
// reverse; parameter gradients add, so they start from zero.
static void backward(Work *w) {
    memset(w->dqkv_weight, 0, sizeof w->dqkv_weight);
    memset(w->dproj_weight, 0, sizeof w->dproj_weight);
    memset(w->dproj_bias, 0, sizeof w->dproj_bias);
    memset(w->dhead_weight, 0, sizeof w->dhead_weight);
    memset(w->dhead_bias, 0, sizeof w->dhead_bias);
    memset(w->dnorm_weight, 0, sizeof w->dnorm_weight);
    crossentropy_backward(w->dlogits, w->probs, WALK_TARGETS, T, V, (size_t)T);
    linear_backward_reference(w->dnormed, w->dhead_weight, w->dhead_bias, w->dlogits, w->normed, w->head_weight, T,
                              C, V);
    // rmsnorm_backward_reference adds to its input's gradient (in a block, the skip
    // path has put its part there already); here it is the first, so zero.
    memset(w->dstream, 0, sizeof w->dstream);
    rmsnorm_backward_reference(w->dstream, w->dnorm_weight, w->dnormed, w->stream, w->norm_weight, w->rstd, T, C);
    // stream = context + output: the branch gets d stream as it is...
    residual_backward(w->doutput, w->dstream, (size_t)T * C, 0.0f, 0, 0);
    linear_backward_reference(w->dcontext, w->dproj_weight, w->dproj_bias, w->doutput, w->context, w->proj_weight,
                              T, C, C);
    // ...and so does the skip path, which meets the projection's gradient
    // at the context: the two are added.
    for (int i = 0; i < T * C; i++) w->dcontext[i] += w->dstream[i];
    // dweights: d loss / d weights, which attention_backward_reference
    // leaves in its scratch; it keeps d loss / d scores to itself, so the
    // softmax's backward is written out here, as its derivation ends
    // (attention.c): ds_j = w_j (dw_j - <w, dw>), row by row.
    attention_backward_reference(w->dqkv, w->dweights, w->dcontext, w->qkv, w->weights, 1, T, C, HEADS, 0.0f, 0, 0);
    for (int row = 0; row < HEADS * T; row++) {
        const int t = row % T;
        const float *w_t = w->weights + row * T, *dw_t = w->dweights + row * T;
        float weighted_sum = 0.0f;  // <w, dw>
        for (int j = 0; j <= t; j++) weighted_sum += w_t[j] * dw_t[j];
        for (int j = 0; j < T; j++) w->dscores[row * T + j] = j <= t ? w_t[j] * (dw_t[j] - weighted_sum) : 0.0f;
    }
    linear_backward_reference(w->dX, w->dqkv_weight, NULL, w->dqkv, w->X, w->qkv_weight, T, D_IN, 3 * C);
}

// How each gradient is printed, and where its numbers are: element (r, c)
// of the printed matrix is element first + r * row_stride + c * col_stride
// of the tensor (the member of Work at "tensor") and of its gradient (at
// "grad"). A weight's stride is that of its transpose: the layers keep
// [out, in], the example prints [in, out].
typedef struct {
    const char *tag, *title;
    int rows, cols;
    const char *const *row_labels, *const *col_labels;
    bool causal;  // [T,T]: only j <= t exists
    size_t tensor, grad;
    int first, row_stride, col_stride;
    Stage from;  // where the forward pass restarts when the tensor moves
} GradientSpec;

static const char *const BIAS[] = {"bias"}, *const NORM_WEIGHT[] = {"g"};
#define AT(tensor, grad, first, row_stride, col_stride) \
    offsetof(Work, tensor), offsetof(Work, grad), first, row_stride, col_stride
static const GradientSpec GRADIENTS[NG] = {
    {"(7a)", "d logits = (probs - onehot) / 6 (crossentropy_backward)", T, V, WALK_TOKENS, WALK_TOKENS, false,
     AT(logits, dlogits, 0, V, 1), FROM_LOGITS},
    {"(7b)", "d normed = d logits W_head^T", T, C, WALK_TOKENS, WALK_OUT_DIMS, false, AT(normed, dnormed, 0, C, 1),
     FROM_NORMED},
    {"(7c)", "d W_head = normed^T d logits", C, V, WALK_OUT_DIMS, WALK_TOKENS, false,
     AT(head_weight, dhead_weight, 0, 1, C), FROM_NORMED},
    {"(7d)", "d b_head = d logits summed over the rows", 1, V, BIAS, WALK_TOKENS, false,
     AT(head_bias, dhead_bias, 0, 0, 1), FROM_NORMED},
    {"(8a)", "d stream = (d xhat - xhat mean(d xhat xhat)) / rms, d xhat = d normed g (rmsnorm_backward_reference)", T, C,
     WALK_TOKENS, WALK_OUT_DIMS, false, AT(stream, dstream, 0, C, 1), FROM_STREAM},
    {"(8b)", "d g = d normed xhat summed over the rows", 1, C, NORM_WEIGHT, WALK_OUT_DIMS, false,
     AT(norm_weight, dnorm_weight, 0, 0, 1), FROM_STREAM},
    {"(9a)", "d output = d stream: the branch (residual_backward)", T, C, WALK_TOKENS, WALK_OUT_DIMS, false,
     AT(output, doutput, 0, C, 1), FROM_OUTPUT},
    {"(9b)", "d W_out = context^T d output", C, C, WALK_HEAD_DIMS, WALK_OUT_DIMS, false,
     AT(proj_weight, dproj_weight, 0, 1, C), FROM_CONTEXT},
    {"(9c)", "d b_out = d output summed over the rows", 1, C, BIAS, WALK_OUT_DIMS, false,
     AT(proj_bias, dproj_bias, 0, 0, 1), FROM_CONTEXT},
    {"(9d)", "d context = d stream (the skip path) + d output W_out^T (the projection)", T, C, WALK_TOKENS,
     WALK_HEAD_DIMS, false, AT(context, dcontext, 0, C, 1), FROM_CONTEXT},
    {"(10a)", "head 1: d weights[t,j] = d context_t . v_j", T, T, WALK_TOKENS, WALK_TOKENS, true,
     AT(weights, dweights, 0, T, 1), FROM_WEIGHTS},
    {"(10b)", "head 1: d scores = w * (d w - <w, d w>), row by row", T, T, WALK_TOKENS, WALK_TOKENS, true,
     AT(scores, dscores, 0, T, 1), FROM_SCORES},
    {"(10c)", "head 2: d weights[t,j] = d context_t . v_j", T, T, WALK_TOKENS, WALK_TOKENS, true,
     AT(weights, dweights, T * T, T, 1), FROM_WEIGHTS},
    {"(10d)", "head 2: d scores = w * (d w - <w, d w>), row by row", T, T, WALK_TOKENS, WALK_TOKENS, true,
     AT(scores, dscores, T * T, T, 1), FROM_SCORES},
    {"(10e)", "d queries: d q_t = sum over j <= t of d scores[t,j] k_j / sqrt(2)", T, C, WALK_TOKENS, WALK_HEAD_DIMS,
     false, AT(qkv, dqkv, 0, 3 * C, 1), FROM_QKV},
    {"(10f)", "d keys: d k_j = sum over t >= j of d scores[t,j] q_t / sqrt(2)", T, C, WALK_TOKENS, WALK_HEAD_DIMS,
     false, AT(qkv, dqkv, C, 3 * C, 1), FROM_QKV},
    {"(10g)", "d values: d v_j = sum over t >= j of weights[t,j] d context_t", T, C, WALK_TOKENS, WALK_HEAD_DIMS,
     false, AT(qkv, dqkv, 2 * C, 3 * C, 1), FROM_QKV},
    {"(11a)", "d W_query = X^T d queries (head 1's W_query | head 2's W2_query)", D_IN, C, WALK_DIMS, WALK_HEAD_DIMS,
     false, AT(qkv_weight, dqkv_weight, 0, 1, D_IN), FROM_X},
    {"(11b)", "d W_key = X^T d keys", D_IN, C, WALK_DIMS, WALK_HEAD_DIMS, false,
     AT(qkv_weight, dqkv_weight, C * D_IN, 1, D_IN), FROM_X},
    {"(11c)", "d W_value = X^T d values", D_IN, C, WALK_DIMS, WALK_HEAD_DIMS, false,
     AT(qkv_weight, dqkv_weight, 2 * C * D_IN, 1, D_IN), FROM_X},
    {"(11d)", "d X = d queries W_query^T + d keys W_key^T + d values W_value^T", T, D_IN, WALK_TOKENS, WALK_DIMS,
     false, AT(X, dX, 0, D_IN, 1), FROM_X},
};
#undef AT

static float *member(Work *w, size_t offset) { return (float *)((char *)w + offset); }

// finite_difference: (loss(x + h) - loss(x - h)) / 2h for the number at "x"
// (a float of w), the forward pass restarting at "from"; x and everything
// computed from it are as they were afterwards. x + h is rounded to a
// float, so the step taken is measured rather than assumed.
static double finite_difference(Work *w, float *x, Stage from) {
    const float x0 = *x;
    const float up = (float)(x0 + WALK_FD_STEP), down = (float)(x0 - WALK_FD_STEP);
    *x = up;
    const double loss_up = forward_from(w, from);
    *x = down;
    const double loss_down = forward_from(w, from);
    *x = x0;
    forward_from(w, from);
    return (loss_up - loss_down) / ((double)up - (double)down);
}

// gradient_fill: the printed matrix of GRADIENTS[g], with a finite
// difference for every number that exists.
static void gradient_fill(WalkGradient *out, Work *w, const GradientSpec *spec) {
    out->rows = spec->rows;
    out->cols = spec->cols;
    float *tensor = member(w, spec->tensor);
    const float *grad = member(w, spec->grad);
    for (int r = 0; r < spec->rows; r++) {
        for (int c = 0; c < spec->cols; c++) {
            const int at = spec->first + r * spec->row_stride + c * spec->col_stride, cell = r * spec->cols + c;
            if (spec->causal && c > r) {
                out->analytic[cell] = out->numeric[cell] = NAN;
                continue;
            }
            out->analytic[cell] = grad[at];
            out->numeric[cell] = (float)finite_difference(w, tensor + at, spec->from);
        }
    }
}

void walkthrough_backward_compute(WalkBackward *b) {
    memset(b, 0, sizeof *b);
    Work w;
    memset(&w, 0, sizeof w);
    forward(&w);
    b->loss = forward_from(&w, FROM_LOGITS);
    memcpy(b->stream, w.stream, sizeof b->stream);
    memcpy(b->normed, w.normed, sizeof b->normed);
    memcpy(b->logits, w.logits, sizeof b->logits);
    memcpy(b->probs, w.probs, sizeof b->probs);
    memcpy(b->losses, w.losses, sizeof b->losses);
    backward(&w);
    for (int g = 0; g < NG; g++) gradient_fill(&b->grads[g], &w, &GRADIENTS[g]);
}

bool walkthrough_agrees(double analytic, double numeric) {
    return fabs(analytic - numeric) <= WALK_FD_ATOL + WALK_FD_RTOL * fabs(numeric);
}

// print_gradient: "(tag) title [rows x cols]", the column labels, then per
// row two lines: "label d" and the gradient, "fd" and its finite
// differences, each number followed by '!' if the two disagree. Then the
// largest difference. Returns how many disagree.
static int print_gradient(FILE *out, const GradientSpec *spec, const WalkGradient *g) {
    fprintf(out, "%s %s [%d x %d]\n%13s", spec->tag, spec->title, g->rows, g->cols, "");
    for (int c = 0; c < g->cols; c++) fprintf(out, " %9s%s", spec->col_labels[c], c + 1 < g->cols ? " " : "");
    fputc('\n', out);
    int disagree = 0;
    double worst = 0.0;
    for (int r = 0; r < g->rows; r++) {
        for (int line = 0; line < 2; line++) {
            fprintf(out, "  %-8s%3s", line == 0 ? spec->row_labels[r] : "", line == 0 ? "d" : "fd");
            for (int c = 0; c < g->cols; c++) {
                const int cell = r * g->cols + c;
                const double a = g->analytic[cell], n = g->numeric[cell];
                const char *after = c + 1 < g->cols ? " " : "";  // the column of the marks
                if (spec->causal && c > r) {
                    fprintf(out, " %9s%s", ".", after);
                    continue;
                }
                const bool ok = walkthrough_agrees(a, n);
                fprintf(out, " %9.5f%s", line == 0 ? a : n, ok ? after : "!");
                if (line == 1) {
                    disagree += !ok;
                    worst = fmax(worst, fabs(a - n));
                }
            }
            fputc('\n', out);
        }
    }
    fprintf(out, "  largest |d - fd| = %.1e: %s\n\n", worst,
            disagree == 0 ? "every value agrees" : "DISAGREES (marked !)");
    return disagree;
}

static int print_gradients(FILE *out, int first, int last, const WalkBackward *b) {
    int disagree = 0;
    for (int g = first; g <= last; g++) disagree += print_gradient(out, &GRADIENTS[g], &b->grads[g]);
    return disagree;
}

int walkthrough_backward_print(const WalkBackward *b, FILE *out) {
    const char *const *tok = WALK_TOKENS;
    static const char *const LOSS[] = {"loss"};
    fprintf(out, "\n== Step 6: a residual, a norm, and a loss to learn from ==\n"
                 "A block of a GPT adds each sublayer's output back onto its input, the residual stream,\n"
                 "and normalises the stream before the next layer reads it. Here the skip path goes around\n"
                 "the output projection, stream = context + output (both have C = 4 channels), and RMSNorm\n"
                 "divides each row by its root mean square, rms = sqrt(mean(stream^2) + 1e-5), then\n"
                 "multiplies channel c by a weight g[c]. A head turns each normed row into one score (logit)\n"
                 "per token of a vocabulary of the six tokens, and the loss says how well each position\n"
                 "predicts the token after it (after \"step\", read as a loop, \"Your\" again): the mean over\n"
                 "the rows of -log probs[t, target]. Dropout is off from here on, as at evaluation.\n\n");
    walk_print_matrix(out, "(6a) stream = context (5b) + output (5c) (residual_forward)", b->stream, T, C, tok,
                      WALK_OUT_DIMS, false);
    walk_print_matrix(out, "g", WALK_NORM_WEIGHT, 1, C, NORM_WEIGHT, WALK_OUT_DIMS, false);
    walk_print_matrix(out, "(6b) normed = stream / rms of its row * g (rmsnorm_forward_reference)", b->normed, T, C, tok,
                      WALK_OUT_DIMS, false);
    walk_print_matrix(out, "W_head", &WALK_W_HEAD[0][0], C, V, WALK_OUT_DIMS, tok, false);
    walk_print_matrix(out, "b_head", WALK_B_HEAD, 1, V, BIAS, tok, false);
    walk_print_matrix(out, "(6c) logits = normed W_head + b_head (linear_forward_reference)", b->logits, T, V, tok,
                      tok, false);
    walk_print_matrix(out, "(6d) probs = softmax of each row (crossentropy_forward)", b->probs, T, V, tok, tok, false);
    fprintf(out, "targets:");
    for (int t = 0; t < T; t++) fprintf(out, " %s", tok[WALK_TARGETS[t]]);
    fprintf(out, "\n\n");
    walk_print_matrix(out, "(6e) losses = -log probs[t, target] (crossentropy_forward)", b->losses, T, 1, tok, LOSS,
                      false);
    fprintf(out, "loss = mean of (6e) = %.4f\n\n", (double)b->loss);

    fprintf(out,
            "== Step 7: backward through the loss and the head ==\n"
            "Below, d A means d loss / d A, from the layers' backward passes (rows \"d\"). Under each number\n"
            "(rows \"fd\") is the same one by central finite differences: that one number of A moved by\n"
            "h = %g both ways, the forward pass run again from there, (loss(+h) - loss(-h)) / 2h.\n"
            "They agree when |d - fd| <= %g + %g |fd|; a '!' follows any that do not.\n"
            "The loss and its softmax together give d logits = (probs - onehot) / 6 (crossentropy_backward).\n"
            "A linear layer y = x W + b gives d x = d y W^T, d W = x^T d y and d b = d y summed over the rows.\n"
            "Here the layout turns. The textbook, and this walkthrough, write W as [in, out] and y = x W;\n"
            "linear.c keeps PyTorch's weight = W^T, [out, in], and computes y = x weight^T, so its code\n"
            "reads the same gradients as d x = d y weight and d weight = d y^T x\n"
            "(linear_backward_reference). Each d W below is its d weight, transposed back to [in, out].\n\n",
            WALK_FD_STEP, WALK_FD_ATOL, WALK_FD_RTOL);
    int disagree = print_gradients(out, WALK_G_LOGITS, WALK_G_B_HEAD, b);

    fprintf(out, "== Step 8: backward through the RMSNorm ==\n"
                 "Row by row, xhat = x / rms and normed = xhat g, so d g = d normed xhat (summed over the rows)\n"
                 "and d xhat = d normed g. rms depends on every x of its row: d rms / d x_i = x_i / (C rms), so\n"
                 "  d x_i = d xhat_i / rms - (sum over j of d xhat_j x_j / rms^2) x_i / (C rms)\n"
                 "        = (d xhat_i - xhat_i mean(d xhat xhat)) / rms.\n"
                 "LayerNorm subtracts the row's mean first, which adds one term: - mean(d xhat).\n\n");
    disagree += print_gradients(out, WALK_G_STREAM, WALK_G_NORM_WEIGHT, b);

    fprintf(out, "== Step 9: backward through the residual and the output projection ==\n"
                 "stream = context + output, and d(a + b)/da = d(a + b)/db = 1: the sum hands d stream, as it\n"
                 "is, to both. The branch's output gets it (residual_backward), and the projection turns it into\n"
                 "its weights' gradients and its input's. The context feeds the stream twice, through the\n"
                 "projection and along the skip path, so its two gradients meet there and are added. This is\n"
                 "why the norms' backward passes add to their input's gradient (rmsnorm.h): that input is a\n"
                 "stream that also feeds a skip path.\n\n");
    disagree += print_gradients(out, WALK_G_OUTPUT, WALK_G_CONTEXT, b);

    fprintf(out, "== Step 10: backward through attention, head by head ==\n"
                 "context_t = sum over j <= t of weights[t,j] v_j, so d weights[t,j] = d context_t . v_j, and\n"
                 "d v_j collects weights[t,j] d context_t from every row t >= j. The softmax's Jacobian,\n"
                 "diag(w) - w w^T, turns a row's d weights into d scores = w * (d w - <w, d w>); the future\n"
                 "(.) gets nothing, and a row of one score (\"Your\") gets 0: its weight is 1 whatever the\n"
                 "score. The scores are q_t . k_j / sqrt(2), so q and k each get d scores times the other.\n"
                 "attention_backward_reference computes all of it; it keeps d scores to itself, so the\n"
                 "d scores below are its line written out here.\n\n");
    disagree += print_gradients(out, WALK_G_WEIGHTS1, WALK_G_VALUES, b);

    fprintf(out, "== Step 11: backward into the projections and the embeddings ==\n"
                 "q, k and v are one linear layer of X, so each weight gets X^T times its gradient, and X\n"
                 "the sum of what flows back through all three.\n\n");
    disagree += print_gradients(out, WALK_G_W_QUERY, WALK_G_X, b);

    int values = 0;
    for (int g = 0; g < NG; g++)
        for (int i = 0; i < b->grads[g].rows * b->grads[g].cols; i++) values += !isnan(b->grads[g].analytic[i]);
    if (disagree == 0)
        fprintf(out, "All %d gradients agree with their finite differences: each backward pass above is the\n"
                     "derivative of the forward pass it undoes.\n", values);
    else
        fprintf(out, "MISMATCH: %d of %d gradients disagree with their finite differences (marked !).\n", disagree,
                values);
    return disagree;
}

// ---------------------------------------------------------------------------

int cmd_walkthrough(int argc, char **argv) {
    long seed = 9;  // step 4's dropout key: drops 10 of the 21 weights, and in no row all of them
    bool backward = false;
    Flag flags[] = {
        seed_flag(&seed, "dropout key for step 4 (which weights are dropped)"),
        {"--backward", FLAG_SWITCH, &backward, NULL,
         "then steps 6-11: a residual, a norm, a loss and the backward pass, every gradient beside its finite "
         "difference",
         0, 0, false, NULL, NULL},
    };
    Command cmd = {"walkthrough", NULL,
                   "Replay the classic self-attention example (\"Your journey starts with one step\") step by "
                   "step with tinygpt's own layers, printing every matrix; with --backward, its backward pass too, "
                   "each gradient checked by finite differences (exit 1 if one disagrees). "
                   "scripts/walkthrough_torch.py builds the same example in PyTorch and prints the same gradients "
                   "from its autograd.",
                   "tinygpt walkthrough --backward | less", flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    Walkthrough w;
    walkthrough_compute(&w, (uint64_t)seed);
    walkthrough_print(&w, stdout);
    if (!backward) return 0;
    WalkBackward b;
    walkthrough_backward_compute(&b);
    return walkthrough_backward_print(&b, stdout) == 0 ? 0 : EXIT_RUNTIME;
}
