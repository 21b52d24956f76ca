// model.c: the passes that chain the layers (see model.h for both
// architectures in a few lines; model_tensors.c lays out the tensors they
// read and write).
//
// The file in parts: which kernels (the fast ones or, with `make
// REFERENCE=1`, the plain loops); the forward pass (block_forward, called
// once per block by the window forward and by the one-position forward of
// sampling); and the backward pass (block_backward, the same blocks in
// reverse), with the plain SGD step.
#include "model.h"

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "attention.h"
#include "crossentropy.h"
#include "encoder.h"
#include "gelu.h"
#include "layernorm.h"
#include "linear.h"
#include "mlp.h"
#include "parallel.h"
#include "relu2.h"
#include "swiglu.h"
#include "residual.h"
#include "rmsnorm.h"
#include "rope.h"

// ===========================================================================
// Which kernels: the fast ones, or, built with `make REFERENCE=1`, the plain
// reference loops of each layer, which train just as well, only slower.
// The products, attention, LayerNorm, GELU (and so the MLP) and the loss's
// forward have two versions; the other passes are plain loops already. Every switch between
// the two is one of the small functions below, so the passes that call
// them read the same in both builds.

#ifdef TINYGPT_REFERENCE
static const bool USE_REFERENCE = true;
#else
static const bool USE_REFERENCE = false;
#endif

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC]
static void linear(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (USE_REFERENCE) linear_forward_reference(out, inp, weight, bias, N, C, OC);
    else linear_forward(out, inp, weight, bias, N, C, OC);
}

// LayerNorm, and then, when "bias" is not NULL (gpt2), its bias added.
static void layernorm(float *out, float *mean, float *rstd, const float *inp, const float *weight, const float *bias,
                      int N, int C) {
    if (USE_REFERENCE) layernorm_forward_reference(out, mean, rstd, inp, weight, N, C);
    else layernorm_forward(out, mean, rstd, inp, weight, N, C);
    if (bias) layernorm_bias_forward(out, bias, N, C);
}

// The model's norm: LayerNorm (with gpt2's bias, else "bias" NULL), or with
// --norm rmsnorm RMSNorm, which keeps no mean ("mean" NULL) and has no bias.
// RMSNorm has one version, plain loops, for both builds.
static void norm(const Model *m, float *out, float *mean, float *rstd, const float *inp, const float *weight,
                 const float *bias, int N, int C) {
    if (m->parts.rmsnorm) rmsnorm_forward(out, rstd, inp, weight, N, C);
    else layernorm(out, mean, rstd, inp, weight, bias, N, C);
}

// The attention layer over a whole window [B,T] of block "a" (attention.h).
// "first": the dropout index of its weights[0,0,0,0] (weights_first).
static void attention(BlockActs *a, int B, int T, int C, int NH, float dropout_p, uint64_t key, uint64_t first) {
    if (USE_REFERENCE)
        attention_forward_reference(a->attn_out, a->attn_weights, a->qkv, B, T, C, NH, dropout_p, key, first);
    else
        attention_forward(a->attn_out, a->attn_weights, a->dropped_weights, a->keys_t, a->qkv, B, T, C, NH, dropout_p,
                          key, first);
}

// The MLP over n rows: out = act(inp @ Wfc^T + bfc) @ Wproj^T + bproj
// (mlp.h; the biases gpt2's, NULL in gpt), act GELU (either form) or
// ReLU^2 or SwiGLU; the reference build runs its three steps one by one
// (ReLU^2 and SwiGLU have one version).
static void mlp(float *out, float *fc_out, float *act_out, const float *inp, const BlockParams *p, int n, int C,
                MlpKind act) {
    if (USE_REFERENCE) {
        const int H = mlp_hidden(C, act);
        linear_forward_reference(fc_out, inp, p->fc_weight, p->fc_bias, n, C, mlp_fc_width(C, act));
        if (act == MLP_SWIGLU) swiglu_forward(act_out, fc_out, n, H);
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
static float crossentropy(float *losses, float *probs, const float *logits, const int *targets, int N, int V) {
    if (USE_REFERENCE) return crossentropy_forward_reference(losses, probs, logits, targets, N, V);
    return crossentropy_forward(losses, probs, logits, targets, N, V);
}

static void linear_grad(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                        const float *weight, int N, int C, int OC) {
    if (USE_REFERENCE) linear_backward_reference(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    else linear_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

// LayerNorm's backward, and its bias's when "dbias" is not NULL (gpt2):
// dout is the gradient of the sum, so of the normed rows too (layernorm.h).
static void layernorm_grad(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, const float *mean, const float *rstd, int N, int C) {
    if (USE_REFERENCE) layernorm_backward_reference(dinp, dweight, dout, inp, weight, mean, rstd, N, C);
    else layernorm_backward(dinp, dweight, dout, inp, weight, mean, rstd, N, C);
    if (dbias) layernorm_bias_backward(dbias, dout, N, C);
}

static void norm_grad(const Model *m, float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                      const float *weight, const float *mean, const float *rstd, int N, int C) {
    if (m->parts.rmsnorm) rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
    else layernorm_grad(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

// attention's backward: dqkv from dattn_out, with dweights and values_t as scratch.
// The reference recomputes the dropout mask from the key; the fast one
// reads the weights after dropout its forward kept in "a", and transposes each head's
// values into "values_t" (scratch) as it goes.
static void attention_grad(float *dqkv, float *dweights, float *values_t, const float *dattn_out, const BlockActs *a,
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
static void mlp_grad(float *dinp, const BlockParams *g, float *dhidden, float *act_out, const float *dout,
                     const float *inp, const float *fc_out, const BlockParams *p, int N, int C, MlpKind act) {
    if (USE_REFERENCE) {
        const int H = mlp_hidden(C, act), FC = mlp_fc_width(C, act);
        const size_t n = (size_t)N * H;
        float *dact = act == MLP_SWIGLU ? dhidden + (size_t)N * FC : dhidden;  // as mlp_backward
        if (act == MLP_SWIGLU) swiglu_forward(act_out, fc_out, N, H);
        else if (act == MLP_RELU2) relu2_forward(act_out, fc_out, n);
        else if (act == MLP_GELU_TANH) gelu_tanh_forward_reference(act_out, fc_out, n);
        else gelu_forward_reference(act_out, fc_out, n);
        linear_backward_reference(dact, g->mlp_proj_weight, g->mlp_proj_bias, dout, act_out, p->mlp_proj_weight, N,
                                  H, C);
        if (act == MLP_SWIGLU) swiglu_backward(dhidden, dact, fc_out, N, H);
        else if (act == MLP_RELU2) relu2_backward(dhidden, fc_out, dhidden, n);
        else if (act == MLP_GELU_TANH) gelu_tanh_backward_reference(dhidden, fc_out, dhidden, n);
        else gelu_backward_reference(dhidden, fc_out, dhidden, n);
        linear_backward_reference(dinp, g->fc_weight, g->fc_bias, dhidden, inp, p->fc_weight, N, C, FC);
    } else {
        mlp_backward(dinp, g->fc_weight, g->fc_bias, g->mlp_proj_weight, g->mlp_proj_bias, dhidden, act_out, dout,
                     inp, fc_out, p->fc_weight, p->mlp_proj_weight, N, C, act);
    }
}

// ===========================================================================
// The forward pass.

// Which positions a forward pass computes: the whole window [B,T]
// (training, evaluation), or only position t of sequence 0 (sampling with
// the key/value cache). Either way the rows to compute are contiguous:
// [first_row, first_row + rows). One position's keys and values are the
// cache, read by every later position: they go in row t of qkv
// (cache_row). Its other activations are dead once its logits are out, so
// they all go in row 0, over the last position's: a sample of any length
// touches one row of them, not one per token (at GPT-2's size a row of
// every activation is 1.2 MB, 300 fresh pages each token).
typedef struct {
    int B, T;          // the layout: T rows per sequence
    int position;      // -1 for the whole window, else the one position t
    size_t first_row;  // of every activation but qkv
    size_t cache_row;  // of qkv: first_row, or t
    int rows;
} Span;

static Span window_span(int B, int T) { return (Span){B, T, -1, 0, 0, B * T}; }
static Span position_span(int T, int t) { return (Span){1, T, t, 0, (size_t)t, 1}; }

// The dropout masks of one step: each place dropout acts gets its own key.
// Block 0's attention uses the step's key itself, as the one-block card
// model always has, so card runs keep their masks.
enum { SITE_ATTN, SITE_ATTN_BRANCH, SITE_MLP_BRANCH, SITE_EMBEDDING };
static uint64_t site_key(uint64_t step_key, int layer, int site) {
    if (layer == 0 && site == SITE_ATTN) return step_key;
    return mix64(step_key ^ (((uint64_t)layer << 8) | (uint64_t)site));
}

// The masks of a part of a batch. Train may give the model some of a
// step's rows (a --grad-accum micro-batch, one process's rows under
// mpirun); m->batch_first is the row of the whole batch its row 0 is. A
// mask is a function of an element's index in the whole batch's tensor
// (rng.h), so a part's indices start at batch_first times the elements of
// one batch row: T*C on the stream, NH*T*T in attention's weights. 0 for
// a whole batch.
static uint64_t stream_first(const Model *m, int T) {
    return (uint64_t)m->batch_first * (uint64_t)T * (uint64_t)m->config.n_embd;
}
static uint64_t weights_first(const Model *m, int T) {
    return (uint64_t)m->batch_first * (uint64_t)m->config.n_head * (uint64_t)T * (uint64_t)T;
}

// rows_of: the span's rows of a [.., width] activation; NULL for a tensor
// the model does not have (RMSNorm's mean). qkv_rows: those of a block's
// qkv, which for one position is its row of the cache (Span).
static float *rows_of(float *tensor, Span s, size_t width) { return tensor ? tensor + s.first_row * width : NULL; }
static float *qkv_rows(BlockActs *a, Span s, int C) { return a->qkv + s.cache_row * 3 * (size_t)C; }

// The attention layer over the span: the whole window at once, or, for one
// position, each head's new key added to the cache (keys_t holds it, laid
// out for sampling: cache_key) and then that row's steps (see attention.h),
// its weights in the first row of attn_weights, each head's over the last
// one's.
static void attention_span(BlockActs *a, Span s, const ModelConfig *cfg, float dropout_p, uint64_t key,
                           uint64_t first) {
    const int C = cfg->n_embd, NH = cfg->n_head;
    if (s.position < 0) {
        attention(a, s.B, s.T, C, NH, dropout_p, key, first);
        return;
    }
    for (int h = 0; h < NH; h++) {
        cache_key(a->keys_t, a->qkv, h, s.position, s.T, C, NH);
        attention_forward_position(rows_of(a->attn_out, s, C), a->attn_weights, a->keys_t, a->qkv, h, s.position,
                                   s.T, C, NH);
    }
}

// block_output: what block l leaves on the stream: the MLP's sum, or, in a
// block without an MLP (card), the attention's.
// block_input: what block l reads: the embedding, or the previous block's output.
static float *block_output(const Model *m, int l) {
    const BlockActs *a = &m->acts.blocks[l];
    return m->parts.mlp ? a->res_mlp : a->res_attn;
}
static float *block_input(const Model *m, int l) { return l == 0 ? m->acts.encoded : block_output(m, l - 1); }

// ---- One block -------------------------------------------------------------
// A block is written three times: the gpt's, straight through from its
// first step to its last (read it first; gpt2's is the same, with its
// biases); card's, attention alone; and the
// ladder's, a gpt with some of its parts removed (`--no-layernorm`,
// `--no-mlp`, `--no-residual`) or swapped for the modern recipe's
// (`--norm rmsnorm`, `--mlp relu2`, `--pos rope`, `--qk-norm`), for `make ladder`,
// whose steps ask which parts are there and which kind each is
// (`--untied-head` changes no block, only the tables and the head's
// weight: model_init). block_forward picks one; block_backward, further
// down, is written the same three ways. Each runs over the span's rows:
// the whole window, or, when sampling, one position (attention_span then
// reads the earlier positions' keys and values from the cache).

// gpt_block_forward: block l of a gpt, in four steps, on the stream x (the
// block's input). Both branches write their output in the shared
// branch_out before it joins the stream. It is gpt2's block too: gpt2 adds
// a bias to each step's layers (the "+ b" below), which in a gpt are NULL,
// and its GELU may be the tanh form (parts.activation).
static void gpt_block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key) {
    const ModelConfig *cfg = &m->config;
    const int C = cfg->n_embd, n = s.rows;
    const BlockParams *p = &m->params.blocks[l];
    BlockActs *a = &m->acts.blocks[l];
    const float *x = rows_of(block_input(m, l), s, C);
    float *ln1_out = rows_of(a->ln1_out, s, C), *ln2_out = rows_of(a->ln2_out, s, C);
    float *res_attn = rows_of(a->res_attn, s, C), *res_mlp = rows_of(a->res_mlp, s, C);
    float *branch = rows_of(m->acts.branch_out, s, C);

    // 1. ln1_out = ln1(x)  (+ b)
    layernorm(ln1_out, a->ln1_mean + s.first_row, a->ln1_rstd + s.first_row, x, p->ln1_weight, p->ln1_bias, n, C);
    // 2. qkv = ln1_out @ [Wq;Wk;Wv]^T  (+ [bq;bk;bv]),  attn_out = attention(qkv)
    linear(qkv_rows(a, s, C), ln1_out, p->qkv_weight, p->qkv_bias, n, C, 3 * C);
    attention_span(a, s, cfg, dropout_p, site_key(key, l, SITE_ATTN), weights_first(m, s.T));
    // 3. res_attn = x + dropout(attn_out @ Wproj^T  (+ b))
    linear(branch, rows_of(a->attn_out, s, C), p->proj_weight, p->proj_bias, n, C, C);
    residual_forward(res_attn, x, branch, (size_t)n * C, dropout_p, site_key(key, l, SITE_ATTN_BRANCH),
                     stream_first(m, s.T));
    // 4. res_mlp = res_attn + dropout(mlp(ln2_out)), ln2_out = ln2(res_attn)  (each + b)
    layernorm(ln2_out, a->ln2_mean + s.first_row, a->ln2_rstd + s.first_row, res_attn, p->ln2_weight, p->ln2_bias,
              n, C);
    mlp(branch, rows_of(a->fc_out, s, 4 * C), rows_of(m->acts.act_out, s, 4 * C), ln2_out, p, n, C,
        m->parts.activation);
    residual_forward(res_mlp, res_attn, branch, (size_t)n * C, dropout_p, site_key(key, l, SITE_MLP_BRANCH),
                     stream_first(m, s.T));
}

// card_block_forward: card's one block, attention and nothing around it,
// in two steps.
static void card_block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key) {
    const int C = m->config.n_embd, n = s.rows;
    const BlockParams *p = &m->params.blocks[l];
    BlockActs *a = &m->acts.blocks[l];
    const float *x = rows_of(block_input(m, l), s, C);

    // 1. qkv = x @ [Wq;Wk;Wv]^T, attn_out = attention(qkv)
    linear(qkv_rows(a, s, C), x, p->qkv_weight, NULL, n, C, 3 * C);
    attention_span(a, s, &m->config, dropout_p, site_key(key, l, SITE_ATTN), weights_first(m, s.T));
    // 2. res_attn = attn_out @ Wproj^T + bproj, the block's output
    linear(rows_of(a->res_attn, s, C), rows_of(a->attn_out, s, C), p->proj_weight, p->proj_bias, n, C, C);
}

// ladder_block_forward: gpt_block_forward's four steps with each removed
// part skipped and each swapped part swapped: without LayerNorm a branch
// reads the stream itself, and with --norm rmsnorm through RMSNorm (norm);
// with --mlp relu2 the MLP bends with ReLU^2 (parts->activation); with
// --pos rope q and k are rotated by their positions before attention;
// with --qk-norm each head's q and k is then divided by its RMS (after the
// rotation, which keeps lengths, so before or after is the same function;
// after, the norm's output is what attention reads and what its backward
// needs);
// without the residual stream a branch's output replaces the stream (as in
// card) instead of being added to it; without the MLP the block ends after
// step 3. With every part present and none swapped it computes what
// gpt_block_forward does.
static void ladder_block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key) {
    const ModelConfig *cfg = &m->config;
    const ModelParts *parts = &m->parts;
    const int C = cfg->n_embd, n = s.rows;
    const BlockParams *p = &m->params.blocks[l];
    BlockActs *a = &m->acts.blocks[l];
    const float *x = rows_of(block_input(m, l), s, C);

    const float *attn_in = x;  // 1.
    if (parts->layernorm) {
        norm(m, rows_of(a->ln1_out, s, C), rows_of(a->ln1_mean, s, 1), rows_of(a->ln1_rstd, s, 1), x, p->ln1_weight,
             NULL, n, C);
        attn_in = rows_of(a->ln1_out, s, C);
    }
    linear(qkv_rows(a, s, C), attn_in, p->qkv_weight, NULL, n, C, 3 * C);  // 2.
    if (parts->rope) rope_forward(qkv_rows(a, s, C), n, s.T, s.position < 0 ? 0 : s.position, C, cfg->n_head);
    if (parts->qk_norm) qk_norm_forward(qkv_rows(a, s, C), rows_of(a->qk_rstd, s, 2 * (size_t)cfg->n_head), n, C, cfg->n_head);
    attention_span(a, s, cfg, dropout_p, site_key(key, l, SITE_ATTN), weights_first(m, s.T));
    float *res_attn = rows_of(a->res_attn, s, C);  // 3.
    if (parts->residual) {
        float *branch = rows_of(m->acts.branch_out, s, C);
        linear(branch, rows_of(a->attn_out, s, C), p->proj_weight, p->proj_bias, n, C, C);
        residual_forward(res_attn, x, branch, (size_t)n * C, dropout_p, site_key(key, l, SITE_ATTN_BRANCH),
                     stream_first(m, s.T));
    } else {
        linear(res_attn, rows_of(a->attn_out, s, C), p->proj_weight, p->proj_bias, n, C, C);
    }
    if (!parts->mlp) return;
    const float *mlp_in = res_attn;  // 4.
    if (parts->layernorm) {
        norm(m, rows_of(a->ln2_out, s, C), rows_of(a->ln2_mean, s, 1), rows_of(a->ln2_rstd, s, 1), res_attn,
             p->ln2_weight, NULL, n, C);
        mlp_in = rows_of(a->ln2_out, s, C);
    }
    float *res_mlp = rows_of(a->res_mlp, s, C);
    float *fc_out = rows_of(a->fc_out, s, (size_t)mlp_fc_width(C, parts->activation));
    float *act_out = rows_of(m->acts.act_out, s, (size_t)mlp_hidden(C, parts->activation));
    if (parts->residual) {
        float *branch = rows_of(m->acts.branch_out, s, C);
        mlp(branch, fc_out, act_out, mlp_in, p, n, C, parts->activation);
        residual_forward(res_mlp, res_attn, branch, (size_t)n * C, dropout_p, site_key(key, l, SITE_MLP_BRANCH),
                     stream_first(m, s.T));
    } else {
        mlp(res_mlp, fc_out, act_out, mlp_in, p, n, C, parts->activation);
    }
}

// plain_gpt: the model is the gpt itself (or gpt2): all its parts (no
// --no-* switch), none swapped (no switch of the modern recipe but GELU's
// form).
static bool plain_gpt(const Model *m) {
    return m->parts.layernorm && m->parts.mlp && m->parts.residual && !m->parts.rmsnorm &&
           (m->parts.activation == MLP_GELU || m->parts.activation == MLP_GELU_TANH) && !m->parts.rope &&
           !m->parts.qk_norm;
}

// block_forward: block l over the span's rows, by its architecture.
static void block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key) {
    if (m->config.arch == ARCH_CARD) card_block_forward(m, l, s, dropout_p, key);
    else if (plain_gpt(m)) gpt_block_forward(m, l, s, dropout_p, key);
    else ladder_block_forward(m, l, s, dropout_p, key);
}

// head_forward: logits for the span's rows from the last block's output,
// through ln_f when the model has it (LayerNorm, or RMSNorm: norm).
static float *head_forward(Model *m, Span s) {
    const int C = m->config.n_embd, V = m->config.vocab_size;
    const float *x = rows_of(block_output(m, m->n_layer - 1), s, C);
    ActTensors *a = &m->acts;
    if (m->parts.layernorm) {
        norm(m, rows_of(a->lnf_out, s, C), rows_of(a->lnf_mean, s, 1), rows_of(a->lnf_rstd, s, 1), x,
             m->params.lnf_weight, m->params.lnf_bias, s.rows, C);
        x = rows_of(a->lnf_out, s, C);
    }
    float *logits = rows_of(a->logits, s, V);
    linear(logits, x, m->params.head_weight, m->params.head_bias, s.rows, C, V);
    return logits;
}

// embed: encoded = tok_emb[tokens] + pos_emb for the span's rows (with
// --pos rope no pos_emb: positions enter in the blocks), then (gpt,
// training) dropout on it.
static void embed(Model *m, const int *tokens, Span s, float dropout_p, uint64_t key) {
    const int C = m->config.n_embd;
    const float *pos_emb = m->params.pos_emb;  // NULL with --pos rope
    if (pos_emb && s.position >= 0) pos_emb += (size_t)s.position * C;
    float *encoded = rows_of(m->acts.encoded, s, C);
    encoder_forward(encoded, tokens, m->params.tok_emb, pos_emb, s.position < 0 ? s.B : 1, s.position < 0 ? s.T : 1, C);
    if (m->parts.residual && dropout_p > 0.0f)
        dropout_forward(encoded, (size_t)s.rows * C, dropout_p, site_key(key, 0, SITE_EMBEDDING), stream_first(m, s.T));
}

float model_forward(Model *m, const int *inputs, const int *targets, int B, int T, bool training,
                    uint64_t dropout_key) {
    const ModelConfig *cfg = &m->config;
    const int V = cfg->vocab_size, BT = B * T;
    const float dropout_p = training ? cfg->dropout : 0.0f;
    const Span s = window_span(B, T);

    memcpy(m->inputs, inputs, (size_t)BT * sizeof(int));
    if (targets) memcpy(m->targets, targets, (size_t)BT * sizeof(int));
    m->last_B = B;
    m->last_T = T;
    m->last_training = training;
    m->last_dropout_key = dropout_key;

    embed(m, inputs, s, dropout_p, dropout_key);
    for (int l = 0; l < m->n_layer; l++) block_forward(m, l, s, dropout_p, dropout_key);
    head_forward(m, s);
    if (!targets) return 0.0f;
    return crossentropy(m->acts.losses, m->acts.probs, m->acts.logits, targets, BT, V);  // probs over the logits
}

// The same blocks as model_forward, on one row: every kernel computes a row
// the same way whether it runs on one row or many, so the bits agree (the
// products of one row run linear_forward_rows, each output the same chain
// of multiply-adds as the engine's).
const float *model_forward_position(Model *m, int token, int t) {
    const Span s = position_span(m->config.block_size, t);
    embed(m, &token, s, 0.0f, 0);
    for (int l = 0; l < m->n_layer; l++) block_forward(m, l, s, 0.0f, 0);
    return head_forward(m, s);
}

// ===========================================================================
// The backward pass.
//
// Every layer's backward derives its lines next to its code (layers/); here
// they are chained, the forward read from its end. One convention holds
// throughout (model.h, GradActs): a backward WRITES the gradient of its
// input activation, and ADDS to parameter gradients and to dresidual, the
// residual stream's gradient. The stream is the one activation with two
// consumers in every step of a gpt block (the branch, through its
// LayerNorm, and the skip path), and the chain rule sums over consumers.

// Split over threads: at the L size of `make bench` this is 30 MB of memory
// to clear every step, too much for one core's bandwidth. (A slice's
// dresidual, cleared in its team of one, opens no region: parallel.h.)
static void zero_loop(float *p, size_t n) {
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = 0.0f;
}
static void zero_floats(float *p, size_t n) { RUN_SHARED(n, 1 << 16, zero_loop(p, n)); }

void model_zero_grad(Model *m) {
    zero_floats(m->grads_memory, m->grads_size);
    m->blocks_done = 0;
}

// block_done: m's backward has ended block l. A slice that hands its
// blocks' gradients on (model_slice_init) waits until the one before it
// (the model, or the slice before) is done with block l too, then adds its
// own to the model's and clears them, so the next block finds them zero.
// Then m says it is done (a slice may be waiting for that). The model's
// backward never waits.
static void block_done(Model *m, int l) {
    const int done = m->n_layer - l;
    Model *to = m->hands_to;
    if (to) {
        while (__atomic_load_n(&m->after->blocks_done, __ATOMIC_ACQUIRE) < done) sched_yield();
        const size_t front = m->blocks_front, block = m->block_floats;
        float *sum = to->grads_memory + front + (size_t)l * block, *mine = m->grads_memory + front;
        for (size_t i = 0; i < block; i++) {
            sum[i] += mine[i];
            mine[i] = 0.0f;
        }
    }
    __atomic_store_n(&m->blocks_done, done, __ATOMIC_RELEASE);
}

static void add_floats(float *sum, const float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) sum[i] += x[i];
}

void model_add_grads(Model *m, const Model *slice) {
    if (!slice->hands_to) {
        add_floats(m->grads_memory, slice->grads_memory, m->param_table.total);
        return;
    }
    const size_t front = slice->blocks_front, block = slice->block_floats;
    const size_t blocks_end = front + (size_t)m->n_layer * block, back = m->param_table.total - blocks_end;
    add_floats(m->grads_memory, slice->grads_memory, front);
    add_floats(m->grads_memory + blocks_end, slice->grads_memory + slice->grads_size - back, back);
}

// through_dropout: the gradient of a branch's output, given dresidual,
// the gradient of the sum it joins (res = x + dropout(branch)): dropout's
// backward of dresidual, into dbranch. Without dropout the two are equal,
// and dresidual is returned itself rather than copied (the branch's
// backward only reads it, and adds to dresidual only after it is done).
static const float *through_dropout(Model *m, size_t n, float dropout_p, uint64_t key) {
    GradActs *g = &m->grad_acts;
    if (dropout_p == 0.0f) return g->dresidual;
    residual_backward(g->dbranch, g->dresidual, n, dropout_p, key, stream_first(m, m->last_T));
    return g->dbranch;
}

// gpt_block_backward: gpt_block_forward's four steps in reverse (gpt2's
// biases' gradients too, each added where its layer's backward runs). On entry
// dresidual holds d loss / d res_mlp (the block's output); on exit,
// d loss / d x (its input). In steps 4 and 3 the skip path's share of the
// stream's gradient is dresidual as it stands (d(a + b)/da = 1), and each
// LayerNorm backward, in steps 4 and 1, adds its branch's share to it.
static void gpt_block_backward(Model *m, int l, float dropout_p, uint64_t key) {
    const ModelConfig *cfg = &m->config;
    const int B = m->last_B, T = m->last_T, BT = B * T, C = cfg->n_embd, NH = cfg->n_head;
    const size_t n = (size_t)BT * C;
    const BlockParams *p = &m->params.blocks[l], *g = &m->grads.blocks[l];
    const BlockActs *a = &m->acts.blocks[l];
    GradActs *d = &m->grad_acts;
    const float *x = block_input(m, l);

    // 4. res_mlp = res_attn + dropout(mlp(ln2_out)), ln2_out = ln2(res_attn)
    const float *dmlp_out = through_dropout(m, n, dropout_p, site_key(key, l, SITE_MLP_BRANCH));
    mlp_grad(d->dln_out, g, d->dhidden, m->acts.act_out, dmlp_out, a->ln2_out, a->fc_out, p, BT, C,
             m->parts.activation);
    layernorm_grad(d->dresidual, g->ln2_weight, g->ln2_bias, d->dln_out, a->res_attn, p->ln2_weight, a->ln2_mean,
                   a->ln2_rstd, BT, C);
    // 3. res_attn = x + dropout(attn_out @ Wproj^T  (+ b))
    const float *dproj_out = through_dropout(m, n, dropout_p, site_key(key, l, SITE_ATTN_BRANCH));
    linear_grad(d->dattn_out, g->proj_weight, g->proj_bias, dproj_out, a->attn_out, p->proj_weight, BT, C, C);
    // 2. qkv = ln1_out @ [Wq;Wk;Wv]^T  (+ [bq;bk;bv]),  attn_out = attention(qkv)
    attention_grad(d->dqkv, d->dattn_weights, d->values_t, d->dattn_out, a, B, T, C, NH, dropout_p,
                   site_key(key, l, SITE_ATTN), weights_first(m, T));
    linear_grad(d->dln_out, g->qkv_weight, g->qkv_bias, d->dqkv, a->ln1_out, p->qkv_weight, BT, C, 3 * C);
    // 1. ln1_out = ln1(x)  (+ b)
    layernorm_grad(d->dresidual, g->ln1_weight, g->ln1_bias, d->dln_out, x, p->ln1_weight, a->ln1_mean, a->ln1_rstd,
                   BT, C);
}

// card_block_backward: card_block_forward's two steps in reverse. On entry
// dresidual holds d loss / d res_attn (the block's output); on exit,
// d loss / d x, written over it: x feeds nothing else.
static void card_block_backward(Model *m, int l, float dropout_p, uint64_t key) {
    const ModelConfig *cfg = &m->config;
    const int B = m->last_B, T = m->last_T, BT = B * T, C = cfg->n_embd, NH = cfg->n_head;
    const BlockParams *p = &m->params.blocks[l], *g = &m->grads.blocks[l];
    const BlockActs *a = &m->acts.blocks[l];
    GradActs *d = &m->grad_acts;
    const float *x = block_input(m, l);

    // 2. res_attn = attn_out @ Wproj^T + bproj
    linear_grad(d->dattn_out, g->proj_weight, g->proj_bias, d->dresidual, a->attn_out, p->proj_weight, BT, C, C);
    // 1. qkv = x @ [Wq;Wk;Wv]^T, attn_out = attention(qkv)
    attention_grad(d->dqkv, d->dattn_weights, d->values_t, d->dattn_out, a, B, T, C, NH, dropout_p,
                   site_key(key, l, SITE_ATTN), weights_first(m, T));
    linear_grad(d->dresidual, g->qkv_weight, NULL, d->dqkv, x, p->qkv_weight, BT, C, 3 * C);
}

// The ladder's backward: where the gradients go when parts are removed.
//
// branch_grad: the gradient of a branch's output: through_dropout with a
// residual stream; without one, the branch's output is the stream, so its
// gradient is dresidual itself.
static const float *branch_grad(Model *m, size_t n, float dropout_p, uint64_t key) {
    return m->parts.residual ? through_dropout(m, n, dropout_p, key) : m->grad_acts.dresidual;
}

// input_grad: where a branch's first layer writes the gradient of its
// input. Without LayerNorm and without the residual stream, that input is
// the stream itself, whose gradient nothing else needs any more: write
// dresidual.
static float *input_grad(Model *m) {
    return m->parts.layernorm || m->parts.residual ? m->grad_acts.dln_out : m->grad_acts.dresidual;
}

// join_stream: the branch has left the gradient of its input in dln_out;
// pass it back to the stream x it read (through the norm when the block
// has one): added to dresidual with a residual stream, written without one.
static void join_stream(Model *m, float *dln_weight, const float *x, const float *ln_weight, const float *mean,
                        const float *rstd, size_t BT) {
    GradActs *g = &m->grad_acts;
    const int C = m->config.n_embd;
    const size_t n = BT * (size_t)C;
    if (m->parts.layernorm) {
        if (!m->parts.residual) zero_floats(g->dresidual, n);
        norm_grad(m, g->dresidual, dln_weight, NULL, g->dln_out, x, ln_weight, mean, rstd, (int)BT, C);
    } else if (m->parts.residual) {
        add_floats(g->dresidual, g->dln_out, n);
    }
}

// ladder_block_backward: ladder_block_forward read backwards, with the
// gradients routed by branch_grad, input_grad and join_stream, and each
// swapped part's own backward (norm_grad; mlp_grad's activation;
// qk_norm_backward; rope_backward). With every part present and none swapped it computes
// what gpt_block_backward does.
static void ladder_block_backward(Model *m, int l, float dropout_p, uint64_t key) {
    const ModelConfig *cfg = &m->config;
    const int B = m->last_B, T = m->last_T, BT = B * T, C = cfg->n_embd, NH = cfg->n_head;
    const size_t n = (size_t)BT * C;
    const BlockParams *p = &m->params.blocks[l], *g = &m->grads.blocks[l];
    const BlockActs *a = &m->acts.blocks[l];
    GradActs *d = &m->grad_acts;
    const float *x = block_input(m, l);

    if (m->parts.mlp) {  // 4. backwards
        const float *dmlp_out = branch_grad(m, n, dropout_p, site_key(key, l, SITE_MLP_BRANCH));
        const float *mlp_in = m->parts.layernorm ? a->ln2_out : a->res_attn;
        mlp_grad(input_grad(m), g, d->dhidden, m->acts.act_out, dmlp_out, mlp_in, a->fc_out, p, BT, C,
                 m->parts.activation);
        join_stream(m, g->ln2_weight, a->res_attn, p->ln2_weight, a->ln2_mean, a->ln2_rstd, (size_t)BT);
    }
    // 3. backwards: the projection
    const float *dproj = branch_grad(m, n, dropout_p, site_key(key, l, SITE_ATTN_BRANCH));
    linear_grad(d->dattn_out, g->proj_weight, g->proj_bias, dproj, a->attn_out, p->proj_weight, BT, C, C);
    // 2. backwards: attention, then the q/k/v projection
    attention_grad(d->dqkv, d->dattn_weights, d->values_t, d->dattn_out, a, B, T, C, NH, dropout_p,
                   site_key(key, l, SITE_ATTN), weights_first(m, T));
    if (m->parts.qk_norm) qk_norm_backward(d->dqkv, a->qkv, a->qk_rstd, BT, C, NH);  // d(normed q, k) -> d(q, k)
    if (m->parts.rope) rope_backward(d->dqkv, BT, T, 0, C, NH);  // d(rotated q, k) -> d(q, k)
    const float *attn_in = m->parts.layernorm ? a->ln1_out : x;
    linear_grad(input_grad(m), g->qkv_weight, NULL, d->dqkv, attn_in, p->qkv_weight, BT, C, 3 * C);
    join_stream(m, g->ln1_weight, x, p->ln1_weight, a->ln1_mean, a->ln1_rstd, (size_t)BT);  // 1. backwards
}

// block_backward: block l's forward read backwards, by its architecture.
// On entry dresidual is d loss / d (block output); on exit, d loss /
// d (block input).
static void block_backward(Model *m, int l, float dropout_p, uint64_t key) {
    if (m->config.arch == ARCH_CARD) card_block_backward(m, l, dropout_p, key);
    else if (plain_gpt(m)) gpt_block_backward(m, l, dropout_p, key);
    else ladder_block_backward(m, l, dropout_p, key);
}

// model_backward: the forward pass read backwards; each layer turns the
// gradient of its output into gradients of its inputs and parameters.
//
// The tied head (gpt). tok_emb is used twice: as the embedding table
// (encoded = tok_emb[inputs] + ...) and as the head's weight (logits =
// lnf_out @ tok_emb^T). A weight used twice gets the sum of the two uses'
// gradients, because the chain rule sums over every path from it to the
// loss:
//   d tok_emb = dlogits^T @ lnf_out                        the head: linear's dW += dy^T x
//             + dencoded[b,t,:] added to row inputs[b,t]     the embedding (encoder.c)
// Nothing has to add the two: grads.head_weight is the memory of
// grads.tok_emb (model_init), and both backwards add to it, the head's
// first, the embedding's last. With --untied-head (and in card) the two
// are separate weights, and each gets its own use's gradient: the same
// code, with head_weight pointing at head.weight.
void model_backward(Model *m) {
    const ModelConfig *cfg = &m->config;
    const int B = m->last_B, T = m->last_T, BT = B * T, C = cfg->n_embd, V = cfg->vocab_size;
    const float dropout_p = m->last_training ? cfg->dropout : 0.0f;
    const uint64_t key = m->last_dropout_key;
    ParamTensors *p = &m->params, *g = &m->grads;
    ActTensors *a = &m->acts;
    GradActs *d = &m->grad_acts;

    const size_t loss_rows = m->loss_rows ? m->loss_rows : (size_t)B;
    crossentropy_backward(d->dlogits, a->probs, m->targets, BT, V, loss_rows * (size_t)T);  // dlogits over the probs
    // The head: its input's gradient starts the stream's (through ln_f,
    // whose backward adds, so dresidual starts from zero).
    const float *top = block_output(m, m->n_layer - 1);
    if (m->parts.layernorm) {
        linear_grad(d->dln_out, g->head_weight, g->head_bias, d->dlogits, a->lnf_out, p->head_weight, BT, C, V);
        zero_floats(d->dresidual, (size_t)BT * C);
        norm_grad(m, d->dresidual, g->lnf_weight, g->lnf_bias, d->dln_out, top, p->lnf_weight, a->lnf_mean,
                  a->lnf_rstd, BT, C);
    } else {
        linear_grad(d->dresidual, g->head_weight, g->head_bias, d->dlogits, top, p->head_weight, BT, C, V);
    }
    for (int l = m->n_layer - 1; l >= 0; l--) {
        block_backward(m, l, dropout_p, key);
        block_done(m, l);
    }
    // The embedding, through its dropout (gpt).
    const float *dencoded = d->dresidual;
    if (m->parts.residual && dropout_p > 0.0f) {
        residual_backward(d->dbranch, d->dresidual, (size_t)BT * C, dropout_p, site_key(key, 0, SITE_EMBEDDING),
                          stream_first(m, T));
        dencoded = d->dbranch;
    }
    encoder_backward(g->tok_emb, g->pos_emb, dencoded, m->inputs, B, T, C);
}

void model_sgd_step(Model *m, float lr) {
    float *w = m->params_memory;
    const float *grad = m->grads_memory;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m->param_table.total; i++) w[i] -= lr * grad[i];
}
