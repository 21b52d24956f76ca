// model.c: the passes that chain the blocks into the model (see model.h
// for both architectures in a few lines; model_tensors.c lays out the
// tensors they read and write; block.c is one block, forward and
// backward).
//
// Reading order: file 12, the last of the model's files. The file in
// parts: the forward pass (the embedding, block_forward once per block,
// the head and the loss), for the whole window and for sampling's one
// position; and the backward pass (the loss, the head, block_backward on
// the blocks in reverse, the embedding), with the plain SGD step.
#include "model.h"

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "block.h"
#include "encoder.h"
#include "residual.h"
#include "which_kernels.h"

// ===========================================================================
// The forward pass.

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
