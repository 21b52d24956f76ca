// rmsnorm.h: RMS normalisation with a learned weight: LayerNorm without
// its mean (`--norm rmsnorm`).
//
// Reading order: file 7b, after layernorm.h (file 7), which it simplifies.
// Zhang and Sennrich (2019, "Root Mean Square Layer Normalization") found
// that re-centring each row (LayerNorm's subtracted mean) buys little: what
// keeps a deep stack trainable is that each sublayer sees its input at a
// fixed scale. RMSNorm keeps only that: each row divided by its root mean
// square, then times a per-channel weight. For each row x = inp[n,:]:
//   1. ms      = sum over c of x[c]^2 / C         (the mean square; no mean taken out)
//   2. rstd    = 1 / sqrt(ms + eps)                (eps keeps a zero row finite)
//   3. xhat[c] = x[c] * rstd
//   4. out[c]  = xhat[c] * weight[c]
// No bias, as LLaMA's RMSNorm and nanoGPT's bias=False LayerNorm. It is
// one sum a row instead of two, and its backward one term shorter. eps is
// LayerNorm's, 1e-5 (PyTorch's nn.RMSNorm defaults to the float's own
// epsilon; LLaMA uses 1e-5 or 1e-6).
//
// One version, plain loops, that training and `make REFERENCE=1` both run:
// like LayerNorm's reference, one running sum per row, so a row alone
// (sampling) gives the same bits as inside a batch (training).
#ifndef TINYGPT_RMSNORM_H
#define TINYGPT_RMSNORM_H

#define RMSNORM_EPS 1e-5f

// out[N,C] = inp[N,C] * rstd[N] * weight[C],  rstd[N] = 1/sqrt(mean(inp^2) + eps), saved for backward.
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C);

// Backward, given dout[N,C] (derived in rmsnorm.c):
//   dinp[N,C]  += rstd * (dxhat - xhat * mean(dxhat * xhat)),  dxhat = dout * weight
//   dweight[C] += sum over n of dout[n,c] * xhat[n,c]
// Both are added to, as in LayerNorm's: the input is the residual stream,
// whose gradient collects from this norm and from the skip path.
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C);

#endif
