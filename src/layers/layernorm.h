// layernorm.h: layer normalisation with a learned weight and no bias.
//
// Reading order: file 7, after crossentropy.h (the card model is complete
// by then), the first of the gpt block's other layers (layernorm,
// residual, gelu, mlp). Each block reads
// the residual stream through a LayerNorm before attention and before the
// MLP: however large the stream grows as blocks add to it, each sublayer
// sees every position's C numbers at mean 0 and variance 1, times a learned
// per-channel weight. For each row x = inp[n,:]:
//   1. mean    = sum over c of x[c] / C
//   2. var     = sum over c of (x[c] - mean)^2 / C     (divides by C, not C - 1)
//   3. rstd    = 1 / sqrt(var + eps)                    (eps keeps a constant row finite)
//   4. xhat[c] = (x[c] - mean) * rstd
//   5. out[c]  = xhat[c] * weight[c]
// This is PyTorch's nn.LayerNorm(C, bias=False): the bias (a learned shift
// after step 5) is left out, as in nanoGPT with bias=False. GPT-2 (--arch
// gpt2) has it, a step of its own after these five (layernorm_bias_*):
//   6. out[c] += bias[c]
//
// Rows are independent and each row's sums run in a fixed order, so a row
// alone (sampling, one position at a time) gives the same bits as inside a
// batch (training), on any thread count.
#ifndef TINYGPT_LAYERNORM_H
#define TINYGPT_LAYERNORM_H

#define LAYERNORM_EPS 1e-5f

// The reference versions (layernorm.c): the steps above as plain loops,
// one running sum per row, and the backward derived. Read these now (the
// fast versions, which training runs, are in fast.h).
// out[N,C] = (inp[N,C] - mean[N]) * rstd[N] * weight[C]; mean[N] and
// rstd[N] = 1/sqrt(var + eps) are saved for backward.
void layernorm_forward_reference(float *out, float *mean, float *rstd, const float *inp, const float *weight, int N,
                                 int C);
// Backward, given dout[N,C] (the steps in reverse, derived in layernorm.c):
//   dinp[N,C]  += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dout * weight
//   dweight[C] += sum over n of dout[n,c] * xhat[n,c]
// Both are added to. dinp is, unlike the other layers' input gradients,
// because the input is the residual stream, whose gradient collects from two
// consumers: this LayerNorm and the skip path around the sublayer.
void layernorm_backward_reference(float *dinp, float *dweight, const float *dout, const float *inp,
                                  const float *weight, const float *mean, const float *rstd, int N, int C);

// GPT-2's bias, step 6, in place on a forward's out[N,C]:
//   out[n,c]  += bias[c]
// and its backward: out = y + bias has d out / d bias[c] = 1 in every row,
// so bias[c] collects dout[n,c] from each row n, and y's gradient is dout
// itself (layernorm_backward's dout, unchanged):
//   dbias[C]  += sum over n of dout[n,c]          (added to)
// One version, plain loops (a pass over N*C floats, as cheap as a copy),
// for both builds.
void layernorm_bias_forward(float *out, const float *bias, int N, int C);
void layernorm_bias_backward(float *dbias, const float *dout, int N, int C);

#endif
