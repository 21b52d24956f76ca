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
// - linear_forward / linear_backward (fast.h; linear_fast.c, file 17, with the
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
// residual stream), the model adds the two itself (block.c: LayerNorm's
// backward adds to the stream's gradient; without LayerNorm, join_stream).
void linear_backward_reference(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int N, int C, int OC);

#endif
