// block.h: one block of the model, forward and backward (block.c), and
// what block.c and model.c share: the rows a pass computes (Span), where
// each block reads and leaves the stream, and the keys of dropout's masks.
//
// Reading order: file 12, after which_kernels.h and before block.c, whose
// blocks model.c chains. Inside the model, not part of its interface
// (model.h): only block.c and model.c include it.
#ifndef TINYGPT_BLOCK_H
#define TINYGPT_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "rng.h"

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

static inline Span window_span(int B, int T) { return (Span){B, T, -1, 0, 0, B * T}; }
static inline Span position_span(int T, int t) { return (Span){1, T, t, 0, (size_t)t, 1}; }

// rows_of: the span's rows of a [.., width] activation; NULL for a tensor
// the model does not have (RMSNorm's mean).
static inline float *rows_of(float *tensor, Span s, size_t width) {
    return tensor ? tensor + s.first_row * width : NULL;
}

// block_output: what block l leaves on the stream: the MLP's sum, or, in a
// block without an MLP (card, --no-mlp), the attention's.
// block_input: what block l reads: the embedding, or the previous block's output.
static inline float *block_output(const Model *m, int l) {
    const BlockActs *a = &m->acts.blocks[l];
    return m->parts.mlp ? a->res_mlp : a->res_attn;
}
static inline float *block_input(const Model *m, int l) {
    return l == 0 ? m->acts.encoded : block_output(m, l - 1);
}

// The dropout masks of one step: each place dropout acts gets its own key.
// Block 0's attention uses the step's key itself, as the one-block card
// model always has, so card runs keep their masks.
enum { SITE_ATTN, SITE_ATTN_BRANCH, SITE_MLP_BRANCH, SITE_EMBEDDING };
static inline uint64_t site_key(uint64_t step_key, int layer, int site) {
    if (layer == 0 && site == SITE_ATTN) return step_key;
    return mix64(step_key ^ (((uint64_t)layer << 8) | (uint64_t)site));
}

// The masks of a part of a batch. Train may give the model some of a
// step's rows (a --grad-accum micro-batch, one process's rows under
// mpirun); m->batch_first is the row of the whole batch its row 0 is. A
// mask is a function of an element's index in the whole batch's tensor
// (rng.h), so a part's indices start at batch_first times the elements of
// one batch row: T*C on the stream (stream_first), NH*T*T in attention's
// weights (weights_first, block.c). 0 for a whole batch.
static inline uint64_t stream_first(const Model *m, int T) {
    return (uint64_t)m->batch_first * (uint64_t)T * (uint64_t)m->config.n_embd;
}

// zero_floats: p[0..n) = 0, over the threads when it pays (parallel.h).
// add_floats: sum[0..n) += x[0..n), over the threads.
void zero_floats(float *p, size_t n);
void add_floats(float *sum, const float *x, size_t n);

// block_forward: block l over the span's rows, by its architecture: the
// gpt's block (gpt, gpt2, and every switch of the ladder and the modern
// recipe), or card's.
void block_forward(Model *m, int l, Span s, float dropout_p, uint64_t key);

// block_backward: block l's forward read backwards, for the last forward's
// whole window. On entry grad_acts.dresidual is d loss / d (block
// output); on exit, d loss / d (block input). Adds to block l's parameter
// gradients.
void block_backward(Model *m, int l, float dropout_p, uint64_t key);

#endif
