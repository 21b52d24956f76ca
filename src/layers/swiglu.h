// swiglu.h: the SwiGLU gate (`--mlp swiglu`), forward and backward: the
// MLP's hidden layer as one half, through SiLU, times the other.
//
// Reading order: file 9c, after gelu.h and relu2.h (files 9, 9b), the
// activations it replaces, and before mlp.h, which calls any of them.
// Shazeer (2020, "GLU Variants Improve Transformer") replaced the MLP's
// act(x W1^T) by a gated product of two projections of x, and found
// SwiGLU, the one whose gate is SiLU, the best of those he tried; LLaMA
// uses it. With the MLP's first product widened to both projections at
// once, fc_out[N,2H] = x [Wgate; Wup]^T (gate in columns [0,H), up in
// [H,2H)), this layer is, for each row and each hidden channel c:
//   silu(g)  = g sigmoid(g) = g / (1 + exp(-g))
//   out[c]   = silu(g[c]) * u[c],   g = fc_out[:, 0:H), u = fc_out[:, H:2H)
// The gate decides, channel by channel and token by token, how much of
// the "up" projection passes; silu is smooth, ~0 for g << 0 and ~g for
// g >> 0. Three matrices instead of two, so mlp.h makes the hidden layer
// 2/3 as wide to keep the parameter count.
//
// Two versions, as in gelu.h:
// - swiglu_*_reference (swiglu.c): plain loops on libm's expf, and the
//   backward derived. Read these now; `make REFERENCE=1` runs them.
// - swiglu_forward / swiglu_backward (fast.h; swiglu_fast.c, file 21a):
//   the same formulas on fast_exp_vec (fastexp.h), a vector of channels
//   at a time; within 1e-6 max(1, |value|) of the reference (the tests
//   hold them to that).
// Each element's result depends on its own g and u alone, so a row alone
// (sampling) gives the bits it gives in a batch.
#ifndef TINYGPT_SWIGLU_H
#define TINYGPT_SWIGLU_H

// out[N,H] = silu(fc_out[:, 0:H)) * fc_out[:, H:2H)
void swiglu_forward_reference(float *out, const float *fc_out, int N, int H);

// Given dout[N,H] (derived in swiglu.c), dfc_out[N,2H] written, not added:
//   dg = dout * u * sigmoid(g) (1 + g (1 - sigmoid(g)))     columns [0,H)
//   du = dout * silu(g)                                      columns [H,2H)
// dfc_out must not overlap dout.
void swiglu_backward_reference(float *dfc_out, const float *dout, const float *fc_out, int N, int H);

#endif
