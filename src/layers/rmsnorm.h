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
// The plain loops, the reference, which `make REFERENCE=1` trains with:
// like LayerNorm's, one running sum per row, so a row alone (sampling)
// gives the same bits as inside a batch (training). Training runs their
// fast twins (rmsnorm_fast.c, declared in fast.h), which keep each row's
// one sum and give the same bits.
#ifndef TINYGPT_RMSNORM_H
#define TINYGPT_RMSNORM_H

#define RMSNORM_EPS 1e-5f

// out[N,C] = inp[N,C] * rstd[N] * weight[C],  rstd[N] = 1/sqrt(mean(inp^2) + eps), saved for backward.
// "weight" NULL: no weight (times 1; qk_norm_forward_reference below). "out" may be
// "inp" (in place): each element is read before it is written.
void rmsnorm_forward_reference(float *out, float *rstd, const float *inp, const float *weight, int N, int C);

// Backward, given dout[N,C] (derived in rmsnorm.c):
//   dinp[N,C]  += rstd * (dxhat - xhat * mean(dxhat * xhat)),  dxhat = dout * weight
//   dweight[C] += sum over n of dout[n,c] * xhat[n,c]
// Both are added to, as in LayerNorm's: the input is the residual stream,
// whose gradient collects from this norm and from the skip path.
void rmsnorm_backward_reference(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                                const float *rstd, int N, int C);
// Its second half alone, dweight[C] += sum over n of dout[n,c] * inp[n,c] *
// rstd[n], shared with the fast backward.
void rmsnorm_weight_grad(float *dweight, const float *dout, const float *inp, const float *rstd, int N, int C);

// ---- QK-norm (`--qk-norm`) ------------------------------------------------
// The same normalisation, without a weight, on each attention head's query
// and key: for every row n and head h, the HS = C/NH channels of q[n,h,:]
// and of k[n,h,:] divided by their root mean square, as in the
// modded-nanoGPT speedrun (F.rms_norm(q, (HS,)), no weight). Each head's q
// and k then have length sqrt(HS), so a score q.k/sqrt(HS) lies in
// [-sqrt(HS), sqrt(HS)] however large the weights grow: attention cannot
// saturate into a one-hot softmax (Dehghani et al. 2023, who normalise q
// and k to train ViT-22B stably). No weight, because a per-channel weight
// on q and one on k only multiply to a per-channel scale of the score,
// which Wq and Wk can already learn; the speedrun has none, and the table
// of parameters stays as it is.

// In place on the q and k parts of qkv[N,3C] (columns [0,C) q, [C,2C) k,
// each NH heads of HS channels, one after another; v, [2C,3C), is left as
// it is); rstd[N,2NH] saved for backward (q's heads, then k's). Row n's
// 2NH heads of q and k are 2NH consecutive rows of HS, so this is
// rmsnorm_forward_reference over them, weight NULL.
void qk_norm_forward_reference(float *qkv, float *rstd, int N, int C, int NH);

// Backward, in place on dqkv[N,3C] (derived in rmsnorm.c): the gradient of
// the normalised q and k becomes that of q and k before the norm, from the
// forward's output y (the normalised qkv) and rstd:
//   dx = rstd (dy - y mean(dy y))      per head, over its HS channels
// Written, not added: q and k feed nothing but the norm. v's part is left
// as it is.
void qk_norm_backward_reference(float *dqkv, const float *qkv, const float *rstd, int N, int C, int NH);

// ---- A row's last steps, once its sum is known ----------------------------
// The sums are the slow part (a chain of multiply-adds a row); the fast
// versions (rmsnorm_fast.c) take them several rows at once and then finish
// each row with these, so both versions share every step after the sum.
// rmsnorm_scale_row: steps 1-4 given sum of x^2, returns r (rstd).
// rmsnorm_dx_row: 3-1. given sum of dxhat xhat, dx[C] added to.
// qk_norm_dx_row: QK-norm's 3-1. given sum of dy y, d[HS] in place.
float rmsnorm_scale_row(float *out, const float *x, const float *weight, float squares, int C);
void rmsnorm_dx_row(float *dx, const float *x, const float *dy, const float *weight, float r, float dxhat_xhat_sum,
                    int C);
void qk_norm_dx_row(float *d, const float *y, float r, float dy_y_sum, int HS);

#endif
