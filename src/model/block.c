// block.c: one block of the model, its forward and its backward side by
// side (see block.h): the gpt's first, the block `make run` trains, written
// once for gpt, gpt2 and every switch of the ladder and the modern recipe;
// then card's, attention alone. model.c chains them.
//
// Reading order: file 12, after block.h and before model.c. Each block runs
// over a span's rows (block.h): the whole window, or, when sampling, one
// position (attention_span then reads the earlier positions' keys and
// values from the cache). The layers it calls are which_kernels.h's, so
// the reference build (`make REFERENCE=1`) runs these same lines.
#include "block.h"

#include "fast.h"
#include "parallel.h"
#include "residual.h"
#include "rmsnorm.h"
#include "rope.h"
#include "which_kernels.h"

// ===========================================================================
// What the blocks share.

// Split over threads: at the L size of `make bench` clearing the gradients
// (model_zero_grad) is 30 MB of memory every step, too much for one core's
// bandwidth. (A slice's dresidual, cleared in its team of one, opens no
// region: parallel.h.)
static void zero_loop(float *p, size_t n) {
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = 0.0f;
}
void zero_floats(float *p, size_t n) { RUN_SHARED(n, 1 << 16, zero_loop(p, n)); }

void add_floats(float *sum, const float *x, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) sum[i] += x[i];
}

// weights_first: where a part of a batch starts in attention's weights'
// masks (block.h, stream_first).
static uint64_t weights_first(const Model *m, int T) {
    return (uint64_t)m->batch_first * (uint64_t)m->config.n_head * (uint64_t)T * (uint64_t)T;
}

// qkv_rows: the span's rows of a block's qkv, which for one position is its
// row of the cache (Span).
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

// ===========================================================================
// The gpt's block.

// gpt_block_forward: block l of a gpt, in four steps, on the stream x (the
// block's input):
//   1. ln1_out  = ln1(x)
//   2. qkv      = ln1_out @ [Wq;Wk;Wv]^T,  attn_out = attention(qkv)
//   3. res_attn = x + dropout(attn_out @ Wproj^T)
//   4. res_mlp  = res_attn + dropout(mlp(ln2(res_attn)))
// Each switch is a branch on the model's parts (model.h, ModelParts):
// - the norms are LayerNorm, or RMSNorm with --norm rmsnorm (norm);
// - --pos rope turns q and k by their positions before attention, and
//   --qk-norm then divides each head's q and k by its RMS (after the turn,
//   which keeps lengths, so before or after is the same function; after,
//   the norm's output is what attention reads and its backward needs);
// - the MLP's activation is GELU, ReLU^2 or SwiGLU (parts.activation);
// - gpt2 adds a bias to every layer (the "+ b" below: NULL in a gpt);
// - the ladder's removals: --no-layernorm, a branch reads the stream
//   itself; --no-residual, a branch's output replaces the stream (as in
//   card) instead of joining it; --no-mlp, the block ends after step 3.
// (--untied-head changes no block, only the head's weight: model_init.)
// With a residual stream both branches write their output in the shared
// branch_out before it joins the stream.
static void gpt_block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key) {
    const ModelParts *parts = &m->parts;
    const int C = m->config.n_embd, NH = m->config.n_head, n = s.rows;
    const BlockParams *p = &m->params.blocks[l];
    BlockActs *a = &m->acts.blocks[l];
    const float *x = rows_of(block_input(m, l), s, C);
    float *ln1_out = rows_of(a->ln1_out, s, C), *ln2_out = rows_of(a->ln2_out, s, C);  // NULL without the norms
    float *qkv = qkv_rows(a, s, C), *attn_out = rows_of(a->attn_out, s, C);
    float *res_attn = rows_of(a->res_attn, s, C), *res_mlp = rows_of(a->res_mlp, s, C);
    float *branch = rows_of(m->acts.branch_out, s, C);  // NULL without a residual stream

    // 1. ln1_out = ln1(x)  (+ b); without the norms attention reads x
    if (parts->layernorm)
        norm(m, ln1_out, rows_of(a->ln1_mean, s, 1), rows_of(a->ln1_rstd, s, 1), x, p->ln1_weight, p->ln1_bias, n, C);
    const float *attn_in = parts->layernorm ? ln1_out : x;
    // 2. qkv = ln1_out @ [Wq;Wk;Wv]^T  (+ [bq;bk;bv]), q and k turned and normed,  attn_out = attention(qkv)
    linear(qkv, attn_in, p->qkv_weight, p->qkv_bias, n, C, 3 * C);
    if (parts->rope) rope_forward(qkv, n, s.T, s.position < 0 ? 0 : s.position, C, NH);
    if (parts->qk_norm) qk_norm(qkv, rows_of(a->qk_rstd, s, 2 * (size_t)NH), n, C, NH);
    attention_span(a, s, &m->config, dropout_p, site_key(key, l, SITE_ATTN), weights_first(m, s.T));
    // 3. res_attn = x + dropout(attn_out @ Wproj^T  (+ b)); without the stream, the projection itself
    linear(parts->residual ? branch : res_attn, attn_out, p->proj_weight, p->proj_bias, n, C, C);
    if (parts->residual)
        residual_forward(res_attn, x, branch, (size_t)n * C, dropout_p, site_key(key, l, SITE_ATTN_BRANCH),
                         stream_first(m, s.T));
    if (!parts->mlp) return;
    // 4. res_mlp = res_attn + dropout(mlp(ln2_out)), ln2_out = ln2(res_attn)  (each + b)
    if (parts->layernorm)
        norm(m, ln2_out, rows_of(a->ln2_mean, s, 1), rows_of(a->ln2_rstd, s, 1), res_attn, p->ln2_weight,
             p->ln2_bias, n, C);
    const float *mlp_in = parts->layernorm ? ln2_out : res_attn;
    float *fc_out = rows_of(a->fc_out, s, (size_t)mlp_fc_width(C, parts->activation));
    float *act_out = rows_of(m->acts.act_out, s, (size_t)mlp_hidden(C, parts->activation));
    mlp(parts->residual ? branch : res_mlp, fc_out, act_out, mlp_in, p, n, C, parts->activation);
    if (parts->residual)
        residual_forward(res_mlp, res_attn, branch, (size_t)n * C, dropout_p, site_key(key, l, SITE_MLP_BRANCH),
                         stream_first(m, s.T));
}

// Where the backward's gradients go. Without a residual stream or a norm
// they take other paths; gpt_block_backward's comment derives each.
//
// branch_grad: d loss / d (a branch's output), given dresidual, the
// gradient of what the branch leaves on the stream. With a residual stream
// (res = x + dropout(branch)) that is dropout's backward of dresidual, into
// dbranch; without dropout the two are equal, and dresidual is returned
// itself rather than copied (the branch's backward only reads it, and adds
// to dresidual only after it is done). Without a stream the branch's output
// is what it leaves: dresidual itself.
static const float *branch_grad(Model *m, size_t n, float dropout_p, uint64_t key) {
    GradActs *g = &m->grad_acts;
    if (!m->parts.residual || dropout_p == 0.0f) return g->dresidual;
    residual_backward(g->dbranch, g->dresidual, n, dropout_p, key, stream_first(m, m->last_T));
    return g->dbranch;
}

// input_grad: where a branch's first layer writes the gradient of its
// input: dln_out. Without a norm and without a residual stream that input
// is the stream itself, whose gradient nothing else needs any more:
// dresidual.
static float *input_grad(Model *m) {
    return m->parts.layernorm || m->parts.residual ? m->grad_acts.dln_out : m->grad_acts.dresidual;
}

// join_stream: the branch has left the gradient of its input in dln_out;
// pass it back to the stream x it read, through the norm when the block
// has one (its weight's and gpt2's bias's gradients added to): added to
// dresidual with a residual stream, written without one (zeroed, then
// added to).
static void join_stream(Model *m, float *dnorm_weight, float *dnorm_bias, const float *x, const float *norm_weight,
                        const float *mean, const float *rstd, int BT) {
    GradActs *g = &m->grad_acts;
    const int C = m->config.n_embd;
    const size_t n = (size_t)BT * C;
    if (m->parts.layernorm) {
        if (!m->parts.residual) zero_floats(g->dresidual, n);
        norm_grad(m, g->dresidual, dnorm_weight, dnorm_bias, g->dln_out, x, norm_weight, mean, rstd, BT, C);
    } else if (m->parts.residual) {
        add_floats(g->dresidual, g->dln_out, n);
    }
}

// gpt_block_backward: gpt_block_forward's steps in reverse.
//
// The block is two residual steps, y = h + drop(f(u)), u = norm(h): steps
// 1-3 with h = x, f = attention and its projection; step 4 with h =
// res_attn, f = the MLP (drop: times dropout's mask). Given dy = d loss / dy,
// the chain rule, step by step backwards:
//   dv = drop(dy)             v = f(u): the same mask           branch_grad
//   du = f'(u)^T dv           the branch's layers in reverse    input_grad
//   dh = dy + norm'(h)^T du   h reaches y by the skip path too  join_stream
// The skip path's dy needs no work: dresidual holds it, and the norm's
// backward adds its term in place. Without the residual stream (y = f(u))
// dv = dy and dh = norm'(h)^T du, written; without the norms (u = h)
// norm'(h)^T du is du, added (with neither, the branch's first layer
// writes du into dresidual as dh itself: input_grad).
//
// It WRITES dbranch, dln_out, dattn_out and dqkv (and the scratch dhidden,
// dattn_weights, values_t), and ADDS to block l's parameter gradients and to
// dresidual, the stream's gradient: on entry d loss / d (block output), on
// exit d loss / d x.
static void gpt_block_backward(Model *m, int l, float dropout_p, uint64_t key) {
    const ModelParts *parts = &m->parts;
    const int B = m->last_B, T = m->last_T, BT = B * T, C = m->config.n_embd, NH = m->config.n_head;
    const size_t n = (size_t)BT * C;
    const BlockParams *p = &m->params.blocks[l], *g = &m->grads.blocks[l];
    const BlockActs *a = &m->acts.blocks[l];
    GradActs *d = &m->grad_acts;
    const float *x = block_input(m, l);

    if (parts->mlp) {
        // 4. res_mlp = res_attn + dropout(mlp(ln2_out)), ln2_out = ln2(res_attn)
        const float *dmlp_out = branch_grad(m, n, dropout_p, site_key(key, l, SITE_MLP_BRANCH));
        const float *mlp_in = parts->layernorm ? a->ln2_out : a->res_attn;
        mlp_grad(input_grad(m), g, d->dhidden, m->acts.act_out, dmlp_out, mlp_in, a->fc_out, p, BT, C,
                 parts->activation);
        join_stream(m, g->ln2_weight, g->ln2_bias, a->res_attn, p->ln2_weight, a->ln2_mean, a->ln2_rstd, BT);
    }
    // 3. res_attn = x + dropout(attn_out @ Wproj^T  (+ b))
    const float *dproj_out = branch_grad(m, n, dropout_p, site_key(key, l, SITE_ATTN_BRANCH));
    linear_grad(d->dattn_out, g->proj_weight, g->proj_bias, dproj_out, a->attn_out, p->proj_weight, BT, C, C);
    // 2. qkv = ln1_out @ [Wq;Wk;Wv]^T  (+ [bq;bk;bv]), q and k turned and normed,  attn_out = attention(qkv)
    attention_grad(d->dqkv, d->dattn_weights, d->values_t, d->dattn_out, a, B, T, C, NH, dropout_p,
                   site_key(key, l, SITE_ATTN), weights_first(m, T));
    if (parts->qk_norm) qk_norm_grad(d->dqkv, a->qkv, a->qk_rstd, BT, C, NH);  // d(normed q, k) -> d(q, k)
    if (parts->rope) rope_backward(d->dqkv, BT, T, 0, C, NH);                      // d(turned q, k) -> d(q, k)
    const float *attn_in = parts->layernorm ? a->ln1_out : x;
    linear_grad(input_grad(m), g->qkv_weight, g->qkv_bias, d->dqkv, attn_in, p->qkv_weight, BT, C, 3 * C);
    // 1. ln1_out = ln1(x)  (+ b)
    join_stream(m, g->ln1_weight, g->ln1_bias, x, p->ln1_weight, a->ln1_mean, a->ln1_rstd, BT);
}

// ===========================================================================
// card's block: attention and nothing around it.

// card_block_forward: card's one block, in two steps.
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

// ===========================================================================
// A block, by its architecture.

void block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key) {
    if (m->config.arch == ARCH_CARD) card_block_forward(m, l, s, dropout_p, key);
    else gpt_block_forward(m, l, s, dropout_p, key);
}

void block_backward(Model *m, int l, float dropout_p, uint64_t key) {
    if (m->config.arch == ARCH_CARD) card_block_backward(m, l, dropout_p, key);
    else gpt_block_backward(m, l, dropout_p, key);
}
