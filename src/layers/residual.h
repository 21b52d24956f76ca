// residual.h: the residual connection, with dropout on the branch.
//
// Reading order: file 8, after layernorm.h. A transformer block never replaces its
// input: each sublayer (attention, then the MLP) computes a "branch" from
// it, and the branch is added back onto the input, the residual stream:
//   out = inp + dropout(branch)
// The sum passes the stream's gradient through unchanged, so the gradient
// reaches the first layers undiminished however deep the model is. Dropout
// (nanoGPT's resid_dropout) zeroes each element of the branch with
// probability p and scales the kept ones by 1/(1-p), so the expected branch
// is unchanged and evaluation (p = 0) needs no rescaling.
//
// The rule is rng.h's dropout_factor, the one attention uses too: element
// i is kept when dropout_uniform(dropout_key, dropout_first + i) >= p, a
// pure function of the key and the index, so the mask is the same on any
// thread count and backward recomputes it instead of storing it. The caller
// gives each residual of each step its own key, and "dropout_first", the
// index of element 0 in the whole batch's tensor: 0, unless these rows are
// a part of a batch (a --grad-accum micro-batch, one process's rows under
// mpirun), which then gets the whole batch's mask of its rows.
#ifndef TINYGPT_RESIDUAL_H
#define TINYGPT_RESIDUAL_H

#include <stddef.h>
#include <stdint.h>

// out[i] = inp[i] + branch[i] * scale_i, for i < n, where scale_i = 0 (dropped, probability p) or 1/(1-p)
// (kept), decided by dropout_uniform(dropout_key, dropout_first + i) >= p (rng.h); dropout_p = 0 means
// scale_i = 1 always (no hashing at all then). out may be the same buffer as inp (the stream updated in place).
void residual_forward(float *out, const float *inp, const float *branch, size_t n, float dropout_p,
                      uint64_t dropout_key, uint64_t dropout_first);

// The skip path passes the stream's gradient through unchanged: the caller keeps dout as the gradient of inp
// (same buffer, nothing to do), so backward only computes the branch's gradient:
// dbranch[i] = dout[i] * scale_i   (written)
void residual_backward(float *dbranch, const float *dout, size_t n, float dropout_p, uint64_t dropout_key,
                       uint64_t dropout_first);

// x[i] *= scale_i in place, for i < n: dropout alone, for the embedding
// (gpt). Its backward is residual_backward: dx[i] = dout[i] * scale_i.
void dropout_forward(float *x, size_t n, float dropout_p, uint64_t dropout_key, uint64_t dropout_first);

#endif
