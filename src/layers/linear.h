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
// residual stream), the model adds the two itself (block.c: LayerNorm's
// backward adds to the stream's gradient; without LayerNorm, join_stream).
void linear_backward_reference(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int N, int C, int OC);

// Fast versions (linear_fast.c), the same sums as the reference's. The
// forward reads the weight as it lies, [OC,C], turning it into the engine's
// panels as it goes (matmul_turned in matmul.h); for fewer rows than the
// engine's register tile (sampling's one) it runs linear_forward_rows.
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC);
// linear_backward's two halves, for a caller with work between them
// (mlp_backward): dinp alone, then dweight and dbias, each with
// linear_backward's bits. (linear_backward runs the two products in one
// parallel region: one start and one wait of the threads, not two.)
void linear_backward_input(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
void linear_backward_params(float *dweight, float *dbias, const float *dout, const float *inp, int N, int C, int OC);
// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC], exactly as linear_forward
// (every output the same chain of multiply-adds), one row at a time: each
// weight is read once a row, where the engine would copy all of it first.
void linear_forward_rows(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);

// out[N,OC] = inp[N,C] @ weight_t[C,OC] + bias[OC], for a caller that holds
// the weight transposed already: Muon's products (optimizer.c) are plain
// a @ b. The engine reads weight_t where it lies.
void linear_forward_transposed(float *out, const float *inp, const float *weight_t, const float *bias, int N, int C,
                               int OC);

// weight_t[C,OC] = weight[OC,C]^T: not used by the layer itself, but where a
// matrix must be turned (Muon's tall matrices, GPT-2's Conv1D weights,
// which Hugging Face stores [in, out]). Inside a parallel region its
// threads share the work, with no barrier of their own (the region's end
// waits for it); outside one, the calling thread does it all.
void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC);

#endif
