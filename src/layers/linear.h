// linear.h: the fully connected layer, y = x W^T + b, forward and backward.
//
// Reading order: file 4, after encoder.h. The model uses it in every block
// for the q/k/v projection (one [3C,C] weight) and the attention output
// projection, in gpt's for the MLP's two layers (through mlp.h), and once
// for the classification head (gpt's is tok_emb, tied). Weight layout
// follows PyTorch's nn.Linear: [out, in].
//
// Two versions of each pass:
// - linear_*_reference (linear.c): the definition as plain loops, and the
//   backward derived. Read these now.
// - linear_forward / linear_backward (linear_fast.c, file 17, with the
//   fast kernels): the same sums in the same order on matmul.h's engine:
//   blocks of the output held in vector registers while k runs, cut over
//   cache-sized blocks and spread over OpenMP threads. Training runs these;
//   tests check that the two agree.
// Here N is the number of rows (B*T, or 1 when sampling), C the input and
// OC the output width.
#ifndef TINYGPT_LINEAR_H
#define TINYGPT_LINEAR_H

#include <stddef.h>

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]      (bias may be NULL)
void linear_forward_reference(float *out, const float *inp, const float *weight, const float *bias, int N,
                              int C, int OC);

// Backward of the line above, given dout = dloss/dout [N,OC] (derived in
// linear.c):
//   dinp[N,C]      = dout[N,OC] @ weight[OC,C]          (written)
//   dweight[OC,C] += dout[N,OC]^T @ inp[N,C]            (added to)
//   dbias[OC]     += sum over n of dout[n,:]            (added to; dbias may be NULL)
// Parameter gradients are added to, so that several backward passes (and
// gpt's tied head and embedding, both tok_emb) can sum into them; the
// input's gradient is written. Where the input has a second consumer (the
// residual stream), the model adds the two itself (model.c: LayerNorm's
// backward adds to the stream's gradient; without LayerNorm, join_stream).
void linear_backward_reference(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int N, int C, int OC);

// Fast versions (linear_fast.c). "weight_t" is scratch for weight transposed, [C,OC]: with it
// the innermost loop runs along a contiguous row of outputs.
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, float *weight_t,
                    int N, int C, int OC);
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC);

// linear_forward is these two steps; the model runs them apart.
// model_forward transposes a block's matrices (transpose_block in model.c,
// all four in one parallel region), or a slice of the head's rows, into its
// weight scratch just before they are used. Sampling transposes nothing: its
// products have one row, and linear_forward_rows reads the weight as it lies.
// weight_t[C,OC] = weight[OC,C]^T. Inside a parallel region its threads
// share the work, with no barrier of their own (the region's end waits for
// it); outside one, the calling thread does it all.
void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC);
// out[N,OC] = inp[N,C] @ weight_t[C,OC] + bias[OC], exactly as linear_forward
void linear_forward_transposed(float *out, const float *inp, const float *weight_t, const float *bias, int N, int C,
                               int OC);
// The same into columns [o0, o0+OC) of a wider out[N, ldo]: weight_t[C,OC]
// holds those outputs' rows of the weight, transposed, and bias[OC] theirs
// (the model's head, a slice of the vocabulary at a time). Each output is
// the number linear_forward_transposed gives it.
void linear_forward_transposed_columns(float *out, size_t ldo, const float *inp, const float *weight_t,
                                       const float *bias, int N, int C, int OC);
// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC], exactly as linear_forward
// (every output the same chain of multiply-adds), on the weight as it lies:
// for a few rows (sampling's one), where transposing would cost more than
// the product.
void linear_forward_rows(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
// linear_forward_transposed on weight_t when the caller has it, else
// linear_forward_rows on weight.
void linear_forward_with(float *out, const float *inp, const float *weight, const float *weight_t, const float *bias,
                         int N, int C, int OC);

#endif
