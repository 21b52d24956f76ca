// which_kernels.h: each layer as the model's passes call it: the fast
// kernels, or, built with `make REFERENCE=1`, the plain reference loops of
// each layer, which train just as well, only slower.
//
// Reading order: file 12, after model_tensors.c and before block.h, whose
// block and model.c's ends call these. The products, attention,
// LayerNorm, RMSNorm and QK-norm, GELU (and so the MLP) and the loss's forward have two
// versions; the other passes are plain loops already. Every switch between
// the two is one of the small functions below, so the passes that call
// them read the same in both builds. They are static inline: each pass
// compiles them into its own code, as when they sat in model.c.
#ifndef TINYGPT_WHICH_KERNELS_H
#define TINYGPT_WHICH_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "crossentropy.h"
#include "fast.h"
#include "gelu.h"
#include "layernorm.h"
#include "linear.h"
#include "mlp.h"
#include "model.h"
#include "relu2.h"
#include "rmsnorm.h"
#include "swiglu.h"

#ifdef TINYGPT_REFERENCE
static const bool USE_REFERENCE = true;
#else
static const bool USE_REFERENCE = false;
#endif

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]
static inline void linear(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (USE_REFERENCE) linear_forward_reference(out, inp, weight, bias, N, C, OC);
    else linear_forward(out, inp, weight, bias, N, C, OC);
}

// LayerNorm, and then, when "bias" is not NULL (gpt2), its bias added.
static inline void layernorm(float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias,
                      int N, int C) {
    if (USE_REFERENCE) layernorm_forward_reference(out, mean, rstd, inp, weight, N, C);
    else layernorm_forward(out, mean, rstd, inp, weight, N, C);
    if (bias) layernorm_bias_forward(out, bias, N, C);
}

// The model's norm: LayerNorm (with gpt2's bias, else "bias" NULL), or with
// --norm rmsnorm RMSNorm, which keeps no mean ("mean" NULL) and has no bias.
static inline void norm(const Model *m, float *out, float *mean, float *rstd, const float *inp, const float *weight,
                 const float *bias, int N, int C) {
    if (!m->parts.rmsnorm) layernorm(out, mean, rstd, inp, weight, bias, N, C);
    else if (USE_REFERENCE) rmsnorm_forward_reference(out, rstd, inp, weight, N, C);
    else rmsnorm_forward(out, rstd, inp, weight, N, C);
}

// QK-norm (--qk-norm): each head of q and k in qkv[N,3C] divided by its
// root mean square, in place (rmsnorm.h).
static inline void qk_norm(float *qkv, float *rstd, int N, int C, int NH) {
    if (USE_REFERENCE) qk_norm_forward_reference(qkv, rstd, N, C, NH);
    else qk_norm_forward(qkv, rstd, N, C, NH);
}

// The attention layer over a whole window [B,T] of block "a" (attention.h).
// "first": the dropout index of its weights[0,0,0,0] (weights_first).
static inline void attention(BlockActs *a, int B, int T, int C, int NH, float dropout_p, uint64_t key, uint64_t first) {
    if (USE_REFERENCE)
        attention_forward_reference(a->attn_out, a->attn_weights, a->qkv, B, T, C, NH, dropout_p, key, first);
    else
        attention_forward(a->attn_out, a->attn_weights, a->dropped_weights, a->keys_t, a->qkv, B, T, C, NH, dropout_p,
                          key, first);
}

// The MLP over n rows: out = act(inp @ Wfc^T + bfc) @ Wproj^T + bproj
// (mlp.h; the biases gpt2's, NULL in gpt), act GELU (either form) or
// ReLU^2 or SwiGLU; the reference build runs its three steps one by one
// (ReLU^2 has one version).
static inline void mlp(float *out, float *fc_out, float *act_out, const float *inp, const BlockParams *p, int n, int C,
                MlpKind act) {
    if (USE_REFERENCE) {
        const int H = mlp_hidden(C, act);
        linear_forward_reference(fc_out, inp, p->fc_weight, p->fc_bias, n, C, mlp_fc_width(C, act));
        if (act == MLP_SWIGLU) swiglu_forward_reference(act_out, fc_out, n, H);
        else if (act == MLP_RELU2) relu2_forward(act_out, fc_out, (size_t)n * H);
        else if (act == MLP_GELU_TANH) gelu_tanh_forward_reference(act_out, fc_out, (size_t)n * H);
        else gelu_forward_reference(act_out, fc_out, (size_t)n * H);
        linear_forward_reference(out, act_out, p->mlp_proj_weight, p->mlp_proj_bias, n, H, C);
    } else {
        mlp_forward(out, fc_out, act_out, inp, p->fc_weight, p->fc_bias, p->mlp_proj_weight, p->mlp_proj_bias, n, C,
                    act);
    }
}

// losses[N], probs[N,V] from logits[N,V] and targets[N]; the mean loss.
static inline float crossentropy(float *losses, float *probs, const float *logits, const int *targets, int N, int V) {
    if (USE_REFERENCE) return crossentropy_forward_reference(losses, probs, logits, targets, N, V);
    return crossentropy_forward(losses, probs, logits, targets, N, V);
}

static inline void linear_grad(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, int N, int C, int OC) {
    if (USE_REFERENCE) linear_backward_reference(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    else linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

// LayerNorm's backward, and its bias's when "dbias" is not NULL (gpt2):
// dout is the gradient of the sum, so of the normed rows too (layernorm.h).
static inline void layernorm_grad(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, const float *mean, const float *rstd, int N, int C) {
    if (USE_REFERENCE) layernorm_backward_reference(dinp, dweight, dout, inp, weight, mean, rstd, N, C);
    else layernorm_backward(dinp, dweight, dout, inp, weight, mean, rstd, N, C);
    if (dbias) layernorm_bias_backward(dbias, dout, N, C);
}

static inline void norm_grad(const Model *m, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                      const float *weight, const float *mean, const float *rstd, int N, int C) {
    if (!m->parts.rmsnorm) layernorm_grad(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    else if (USE_REFERENCE) rmsnorm_backward_reference(dinp, dweight, dout, inp, weight, rstd, N, C);
    else rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
}

// QK-norm's backward, in place on dqkv's q and k (rmsnorm.h).
static inline void qk_norm_grad(float *dqkv, const float *qkv, const float *rstd, int N, int C, int NH) {
    if (USE_REFERENCE) qk_norm_backward_reference(dqkv, qkv, rstd, N, C, NH);
    else qk_norm_backward(dqkv, qkv, rstd, N, C, NH);
}

// attention's backward: dqkv from dattn_out, with dweights and values_t as scratch.
// The reference recomputes the dropout mask from the key; the fast one
// reads the weights after dropout its forward kept in "a", and transposes each head's
// values into "values_t" (scratch) as it goes.
static inline void attention_grad(float *dqkv, float *dweights, float *values_t, const float *dattn_out, const BlockActs *a,
                           int B, int T, int C, int NH, float dropout_p, uint64_t key, uint64_t first) {
    if (USE_REFERENCE)
        attention_backward_reference(dqkv, dweights, dattn_out, a->qkv, a->attn_weights, B, T, C, NH, dropout_p,
                                     key, first);
    else
        attention_backward(dqkv, dweights, dattn_out, a->qkv, a->attn_weights, a->dropped_weights, values_t, B, T, C,
                           NH, dropout_p);
}

// The MLP's backward over N rows, given dout: dinp written, the two weights'
// gradients (in "g"), and gpt2's two biases', added to; dhidden [N,DH] is scratch, and act_out is
// recomputed from fc_out (mlp.h). The reference build runs the three steps
// in reverse one by one.
static inline void mlp_grad(float *dinp, const BlockParams *g, float *dhidden, float *act_out, const float *dout,
                     const float *inp, const float *fc_out, const BlockParams *p, int N, int C, MlpKind act) {
    if (USE_REFERENCE) {
        const int H = mlp_hidden(C, act), FC = mlp_fc_width(C, act);
        const size_t n = (size_t)N * H;
        float *dact = act == MLP_SWIGLU ? dhidden + (size_t)N * FC : dhidden;  // as mlp_backward
        if (act == MLP_SWIGLU) swiglu_forward_reference(act_out, fc_out, N, H);
        else if (act == MLP_RELU2) relu2_forward(act_out, fc_out, n);
        else if (act == MLP_GELU_TANH) gelu_tanh_forward_reference(act_out, fc_out, n);
        else gelu_forward_reference(act_out, fc_out, n);
        linear_backward_reference(dact, g->mlp_proj_weight, g->mlp_proj_bias, dout, act_out, p->mlp_proj_weight, N,
                                  H, C);
        if (act == MLP_SWIGLU) swiglu_backward_reference(dhidden, dact, fc_out, N, H);
        else if (act == MLP_RELU2) relu2_backward(dhidden, fc_out, dhidden, n);
        else if (act == MLP_GELU_TANH) gelu_tanh_backward_reference(dhidden, fc_out, dhidden, n);
        else gelu_backward_reference(dhidden, fc_out, dhidden, n);
        linear_backward_reference(dinp, g->fc_weight, g->fc_bias, dhidden, inp, p->fc_weight, N, C, FC);
    } else {
        mlp_backward(dinp, g->fc_weight, g->fc_bias, g->mlp_proj_weight, g->mlp_proj_bias, dhidden, act_out, dout,
                     inp, fc_out, p->fc_weight, p->mlp_proj_weight, N, C, act);
    }
}

#endif
