// walkthrough.h: `tinygpt walkthrough`: the classic worked example of
// self-attention, replayed step by step through tinygpt's own layers.
//
// Reading order: file 38, after the layers it calls and args.h (file 28);
// but run it before reading attention.c. Six tokens, "Your journey starts
// with one step", each a 3-d embedding (a row of X), and the trainable
// weights of the textbook example:
//   1. simplified self-attention, no weights: scores = X X^T, weights =
//      softmax(scores) row by row, context = weights X;
//   2. trainable projections: queries = X W_query, keys = X W_key, values =
//      X W_value; scores = queries keys^T; weights = softmax(scores/sqrt(2));
//      context = weights values;
//   3. causal attention: the naive way (softmax, zero the future, renormalise
//      each row) and the -inf mask before the softmax give the same weights;
//   4. dropout p = 0.5 on those weights: the kept ones are doubled;
//   5. two heads side by side, concatenated, then an output projection.
// With --backward, the same example learns, and its backward pass is shown:
//   6. a head over the six tokens as the vocabulary, and the loss of
//      predicting each next token;
//   7. the gradient back through the loss, the head and the output
//      projection;
//   8. back through attention, head by head: the weights, the scores (the
//      softmax's backward), then the queries, keys and values;
//   9. back into the projection weights and the embeddings X;
// every gradient beside the same number by central finite differences of
// the loss, (loss(x + h) - loss(x - h)) / 2h, so each derivation of the
// layers' backward passes is seen to hold in numbers.
//
// Every number comes from the functions that train the model
// (linear_forward, linear_forward_reference, softmax_forward,
// attention_forward; for steps 6-9 the layers' reference versions and
// their backward passes), called with these fixed weights. Two conventions
// differ from the textbook's and are bridged here, not in the layers: its
// W is [d_in, d_out] applied as X @ W, while our linear layer stores
// PyTorch's [d_out, d_in] (so each W is transposed into the layer's weight);
// and attention_forward takes q, k, v packed in one [T, 3C] tensor, which is
// exactly what one linear layer with the three weights stacked produces.
#ifndef TINYGPT_WALKTHROUGH_H
#define TINYGPT_WALKTHROUGH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// T tokens, D_IN embedding dims, D_OUT dims per head, HEADS heads in step 5
// (whose C = HEADS * D_OUT channels are the heads side by side).
enum { WALK_T = 6, WALK_D_IN = 3, WALK_D_OUT = 2, WALK_HEADS = 2, WALK_C = WALK_HEADS * WALK_D_OUT };

// The example's inputs, in its layout ([d_in, d_out] weights, used as X @ W).
extern const char *const WALK_TOKENS[WALK_T];
extern const float WALK_X[WALK_T][WALK_D_IN];
extern const float WALK_W_QUERY[WALK_D_IN][WALK_D_OUT], WALK_W_KEY[WALK_D_IN][WALK_D_OUT],
    WALK_W_VALUE[WALK_D_IN][WALK_D_OUT];
// Step 5's second head and output projection (ours, not the textbook's).
extern const float WALK_W2_QUERY[WALK_D_IN][WALK_D_OUT], WALK_W2_KEY[WALK_D_IN][WALK_D_OUT],
    WALK_W2_VALUE[WALK_D_IN][WALK_D_OUT];
extern const float WALK_W_OUT[WALK_C][WALK_C], WALK_B_OUT[WALK_C];
extern const float WALK_DROPOUT;  // 0.5

// Every matrix the walkthrough prints, row-major, T = WALK_T.
typedef struct {
    // step 1
    float scores1[WALK_T * WALK_T];           // [T,T]     X X^T
    float weights1[WALK_T * WALK_T];          // [T,T]     softmax of each row
    float context1[WALK_T * WALK_D_IN];       // [T,D_IN]  weights1 X
    // step 2
    float qkv[WALK_T * 3 * WALK_D_OUT];       // [T,3*D_OUT] queries | keys | values, as attention takes them
    float queries[WALK_T * WALK_D_OUT];       // [T,D_OUT] the three slices of qkv
    float keys[WALK_T * WALK_D_OUT];
    float values[WALK_T * WALK_D_OUT];
    float scores2[WALK_T * WALK_T];           // [T,T]     queries keys^T
    float weights2[WALK_T * WALK_T];          // [T,T]     softmax(scores2 / sqrt(D_OUT))
    float context2[WALK_T * WALK_D_OUT];      // [T,D_OUT] weights2 values
    // step 3
    float naive3[WALK_T * WALK_T];            // [T,T] weights2, future zeroed, rows renormalised
    float masked_scores3[WALK_T * WALK_T];    // [T,T] scores2 / sqrt(D_OUT), -inf above the diagonal
    float masked_weights3[WALK_T * WALK_T];   // [T,T] softmax(masked_scores3)
    float attn_weights3[WALK_T * WALK_T];     // [T,T] attention_forward's weights
    float context3[WALK_T * WALK_D_OUT];      // [T,D_OUT] attention_forward's output
    // step 4
    float dropout_factors4[WALK_T * WALK_T];  // [T,T] 0 or 1/(1-p) on and below the diagonal
    float dropped4[WALK_T * WALK_T];          // [T,T] attention_forward's weights after dropout: (3d) x factors
    float context4[WALK_T * WALK_D_OUT];      // [T,D_OUT] attention_forward's output with dropout
    // step 5
    float qkv5[WALK_T * 3 * WALK_C];          // [T,3C] both heads' queries | keys | values
    float attn_weights5[WALK_HEADS * WALK_T * WALK_T];  // [HEADS,T,T]
    float concat5[WALK_T * WALK_C];           // [T,C] head 1's context | head 2's context
    float out5[WALK_T * WALK_C];              // [T,C] concat5 W_OUT + B_OUT
    uint64_t dropout_key;
} Walkthrough;

// walkthrough_compute: run the five steps; "dropout_key" picks step 4's mask.
void walkthrough_compute(Walkthrough *w, uint64_t dropout_key);
// walkthrough_print: every matrix with 4 decimals, each under a title that
// starts with its tag "(1a)", "(1b)", ..., with one sentence per step.
void walkthrough_print(const Walkthrough *w, FILE *out);

// ---- Steps 6-9, `--backward` -----------------------------------------------
// Step 5's model (both heads, the output projection) with a head on top:
// logits = output W_HEAD + B_HEAD over a vocabulary of the six tokens, and
// the target of each token is the next one, of the last ("step") the first
// (the sentence read as a loop). Dropout is off, as at evaluation.
enum { WALK_V = WALK_T };
extern const float WALK_W_HEAD[WALK_C][WALK_V], WALK_B_HEAD[WALK_V];
extern const int WALK_TARGETS[WALK_T];

// The finite differences: step h, and the tolerance within which a
// gradient agrees with its finite difference:
//   |analytic - numeric| <= WALK_FD_ATOL + WALK_FD_RTOL * |numeric|
// The layers compute in float32, so the loss carries rounding errors of
// about 1e-7, which the division by 2h magnifies (h = 0.01: to about 1e-5).
extern const double WALK_FD_STEP, WALK_FD_ATOL, WALK_FD_RTOL;

// The gradients step 7-9 print, in order. Each is a matrix in the layout
// of the tensor it belongs to as printed above it (the weights as the
// example writes them, [d_in, d_out]).
enum {
    WALK_G_LOGITS,   // (7a) [T,V]
    WALK_G_OUTPUT,   // (7b) [T,C]     the output of step 5's projection
    WALK_G_W_HEAD,   // (7c) [C,V]
    WALK_G_B_HEAD,   // (7d) [1,V]
    WALK_G_CONTEXT,  // (7e) [T,C]     both heads' contexts, concatenated
    WALK_G_W_OUT,    // (7f) [C,C]
    WALK_G_B_OUT,    // (7g) [1,C]
    WALK_G_WEIGHTS1, WALK_G_SCORES1,  // (8a), (8b) [T,T] head 1: entries j <= t only
    WALK_G_WEIGHTS2, WALK_G_SCORES2,  // (8c), (8d) [T,T] head 2
    WALK_G_QUERIES, WALK_G_KEYS, WALK_G_VALUES,    // (8e-g) [T,C]  both heads
    WALK_G_W_QUERY, WALK_G_W_KEY, WALK_G_W_VALUE,  // (9a-c) [D_IN,C]: head 1's W_QUERY | head 2's W2_QUERY
    WALK_G_X,        // (9d) [T,D_IN]
    WALK_N_GRADIENTS
};
enum { WALK_MAX_CELLS = WALK_T * WALK_T };  // the largest printed gradient

// One gradient as printed, row-major [rows, cols]: the backward passes'
// value and the finite difference. Above the diagonal of the [T,T] ones,
// which nothing computes, both are NAN.
typedef struct {
    int rows, cols;
    float analytic[WALK_MAX_CELLS];
    float numeric[WALK_MAX_CELLS];
} WalkGradient;

typedef struct {
    float logits[WALK_T * WALK_V];  // [T,V]  step 6
    float probs[WALK_T * WALK_V];   // [T,V]  softmax of each row
    float losses[WALK_T];           // [T]    -log probs[t, target t]
    float loss;                     // their mean
    WalkGradient grads[WALK_N_GRADIENTS];
} WalkBackward;

// walkthrough_backward_compute: the forward pass of steps 5-6, the backward
// pass of steps 7-9, and every gradient's finite differences.
void walkthrough_backward_compute(WalkBackward *b);
// walkthrough_agrees: whether an analytic gradient and its finite difference
// agree within the tolerance above.
bool walkthrough_agrees(double analytic, double numeric);
// walkthrough_backward_print: steps 6-9: the loss, then every gradient, each
// row of numbers ("d") with its finite differences under it ("fd"), a '!'
// after each one that disagrees, and a last line saying whether all agree.
// Returns the number of values that disagree.
int walkthrough_backward_print(const WalkBackward *b, FILE *out);

// cmd_walkthrough: the `tinygpt walkthrough` command.
int cmd_walkthrough(int argc, char **argv);

#endif
