// linear.h: the fully connected layer, y = x W^T + b, forward and backward.
//
// Reading order: file 8. The model uses it three times: the q/k/v
// projection (one [3C,C] weight), the attention output projection, and the
// classification head. Weight layout follows PyTorch's nn.Linear: [out, in].
//
// Two versions of each pass:
// - linear_*_reference: the definition as three plain loops. Read these first.
// - linear_forward / linear_backward: the same sums in the same order, cut
//   into register-sized tiles so the compiler vectorises the inner loop, and
//   spread over OpenMP threads. Tests check that the two agree.
// Here N is the number of rows (B*T), C the input and OC the output width.
#ifndef TINYGPT_LINEAR_H
#define TINYGPT_LINEAR_H

#include <stddef.h>

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]      (bias may be NULL)
void linear_forward_reference(float *out, const float *inp, const float *weight, const float *bias, int N,
                              int C, int OC);

// Backward of the line above, given dout = dloss/dout [N,OC]:
//   dinp[N,C]      = dout[N,OC] @ weight[OC,C]          (written)
//   dweight[OC,C] += dout[N,OC]^T @ inp[N,C]            (added to)
//   dbias[OC]     += sum over n of dout[n,:]            (added to; dbias may be NULL)
// Parameter gradients are added to, so that several backward passes can
// sum into them; the input's gradient is written (it has one source).
void linear_backward_reference(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                               const float *weight, int N, int C, int OC);

// Fast versions. "weight_t" is scratch for weight transposed, [C,OC]: with it
// the innermost loop runs along a contiguous row of outputs.
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, float *weight_t,
                    int N, int C, int OC);
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC);

// linear_forward is these two steps. Sampling, whose weights do not change,
// transposes them once and then runs only the second.
// weight_t[C,OC] = weight[OC,C]^T; called inside a parallel region, its
// threads share the work and the caller's region waits for it.
void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC);
// out[N,OC] = inp[N,C] @ weight_t[C,OC] + bias[OC], exactly as linear_forward
void linear_forward_transposed(float *out, const float *inp, const float *weight_t, const float *bias, int N, int C,
                               int OC);

#endif
