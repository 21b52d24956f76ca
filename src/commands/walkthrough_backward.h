// walkthrough_backward.h: `tinygpt walkthrough --backward`: the attention
// example of walkthrough.h learns, and its backward pass is shown, step by
// step, through tinygpt's own layers.
//
// Reading order: file 38, with walkthrough.h, after it; run it after
// `tinygpt walkthrough` and before reading the layers' backward passes.
// Step 5's model grows the two pieces every block of a GPT has, then a
// head and a loss:
//   6. a residual (stream = context + output: a skip path around the output
//      projection), an RMSNorm of the stream, a head over the six tokens as
//      the vocabulary, and the loss of predicting each next token;
//   7. the gradient back through the loss and the head, and where the
//      layout turns from the textbook's y = x W to linear.c's y = x W^T;
//   8. back through the RMSNorm, its backward derived in a few lines;
//   9. back through the residual and the output projection: the skip path
//      and the projection's gradients meet at the context and are added;
//  10. back through attention, head by head: the weights, the scores (the
//      softmax's backward), then the queries, keys and values;
//  11. back into the projection weights and the embeddings X;
// every gradient beside the same number by central finite differences of
// the loss, (loss(x + h) - loss(x - h)) / 2h, so each derivation of the
// layers' backward passes is seen to hold in numbers. Every number comes
// from the layers' reference versions and their backward passes.
// scripts/walkthrough_torch.py builds the same example in PyTorch and
// prints the same gradients from its autograd.
#ifndef TINYGPT_WALKTHROUGH_BACKWARD_H
#define TINYGPT_WALKTHROUGH_BACKWARD_H

#include <stdbool.h>
#include <stdio.h>

#include "walkthrough.h"

// Step 5's model (both heads, the output projection), then a residual and a
// norm: stream = context + output, normed = RMSNorm(stream) * WALK_NORM_WEIGHT,
// then a head: logits = normed W_HEAD + B_HEAD over a vocabulary of the six
// tokens. The target of each token is the next one, of the last ("step")
// the first (the sentence read as a loop). Dropout is off, as at evaluation.
enum { WALK_V = WALK_T };
extern const float WALK_NORM_WEIGHT[WALK_C];
extern const float WALK_W_HEAD[WALK_C][WALK_V], WALK_B_HEAD[WALK_V];
extern const int WALK_TARGETS[WALK_T];

// The finite differences: step h, and the tolerance within which a
// gradient agrees with its finite difference:
//   |analytic - numeric| <= WALK_FD_ATOL + WALK_FD_RTOL * |numeric|
// The layers compute in float32, so the loss carries rounding errors of
// about 1e-7, which the division by 2h magnifies (h = 0.01: to about 1e-5).
extern const double WALK_FD_STEP, WALK_FD_ATOL, WALK_FD_RTOL;

// The gradients steps 7-11 print, in order. Each is a matrix in the layout
// of the tensor it belongs to as printed above it (the weights as the
// example writes them, [d_in, d_out]).
enum {
    WALK_G_LOGITS,       // (7a) [T,V]
    WALK_G_NORMED,       // (7b) [T,C]     the norm's output
    WALK_G_W_HEAD,       // (7c) [C,V]
    WALK_G_B_HEAD,       // (7d) [1,V]
    WALK_G_STREAM,       // (8a) [T,C]     the residual stream, the norm's input
    WALK_G_NORM_WEIGHT,  // (8b) [1,C]
    WALK_G_OUTPUT,       // (9a) [T,C]     the output of step 5's projection
    WALK_G_W_OUT,        // (9b) [C,C]
    WALK_G_B_OUT,        // (9c) [1,C]
    WALK_G_CONTEXT,      // (9d) [T,C]     both heads' contexts, concatenated
    WALK_G_WEIGHTS1, WALK_G_SCORES1,  // (10a), (10b) [T,T] head 1: entries j <= t only
    WALK_G_WEIGHTS2, WALK_G_SCORES2,  // (10c), (10d) [T,T] head 2
    WALK_G_QUERIES, WALK_G_KEYS, WALK_G_VALUES,    // (10e-g) [T,C]  both heads
    WALK_G_W_QUERY, WALK_G_W_KEY, WALK_G_W_VALUE,  // (11a-c) [D_IN,C]: head 1's W_QUERY | head 2's W2_QUERY
    WALK_G_X,            // (11d) [T,D_IN]
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
    float stream[WALK_T * WALK_C];  // [T,C]  step 6: context + output
    float normed[WALK_T * WALK_C];  // [T,C]  RMSNorm(stream) * WALK_NORM_WEIGHT
    float logits[WALK_T * WALK_V];  // [T,V]
    float probs[WALK_T * WALK_V];   // [T,V]  softmax of each row
    float losses[WALK_T];           // [T]    -log probs[t, target t]
    float loss;                     // their mean
    WalkGradient grads[WALK_N_GRADIENTS];
} WalkBackward;

// walkthrough_backward_compute: the forward pass of steps 5-6, the backward
// pass of steps 7-11, and every gradient's finite differences.
void walkthrough_backward_compute(WalkBackward *b);
// walkthrough_agrees: whether an analytic gradient and its finite difference
// agree within the tolerance above.
bool walkthrough_agrees(double analytic, double numeric);
// walkthrough_backward_print: steps 6-11: the loss, then every gradient,
// each row of numbers ("d") with its finite differences under it ("fd"), a
// '!' after each one that disagrees, and a last line saying whether all
// agree. Returns the number of values that disagree.
int walkthrough_backward_print(const WalkBackward *b, FILE *out);

// cmd_walkthrough: the `tinygpt walkthrough` command: steps 1-5, and with
// --backward steps 6-11.
int cmd_walkthrough(int argc, char **argv);

#endif
