// walkthrough.h: `tinygpt walkthrough`: the classic worked example of
// self-attention, replayed step by step through tinygpt's own layers.
//
// Reading order: file 38, after what it calls (rng.h, linear.h, attention.h,
// crossentropy.h: files 2, 4-6);
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
// With --backward, the same example learns: walkthrough_backward.h, steps
// 6-9, which also holds the command.
//
// Every number comes from the functions that train the model
// (linear_forward, linear_forward_reference, softmax_forward,
// attention_forward), called with these fixed weights. Two conventions
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

// ---- Shared with steps 6-9 (walkthrough_backward.c) ---------------------
// The labels of the printed matrices' columns: the embedding's dims (d1-d3),
// both heads' channels side by side (h1.d1 ... h2.d2), the output's (o1-o4).
extern const char *const WALK_DIMS[WALK_D_IN], *const WALK_HEAD_DIMS[WALK_C], *const WALK_OUT_DIMS[WALK_C];
// walk_weight_rows: rows [first_row, first_row + D_OUT) of a linear layer's
// weight [out, D_IN] get the textbook's w [D_IN, D_OUT], transposed.
void walk_weight_rows(float *weight, int first_row, const float w[WALK_D_IN][WALK_D_OUT]);
// walk_transpose: out[cols, rows] = m[rows, cols] transposed.
void walk_transpose(float *out, const float *m, int rows, int cols);
// walk_print_matrix: "title [rows x cols]", a row of column labels, then
// one row per line: its label and %.4f numbers; with "causal_only", the
// entries above the diagonal print as ".".
void walk_print_matrix(FILE *out, const char *title, const float *m, int rows, int cols,
                       const char *const *row_labels, const char *const *col_labels, bool causal_only);

#endif
