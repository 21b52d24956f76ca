// model.h: the whole model: its sizes, its parameter and activation tables,
// and forward, backward and the SGD update that tie the layers together.
//
// Reading order: file 12, after the layers it calls (files 3-10: encoder,
// linear, attention, crossentropy, then layernorm, rmsnorm, residual, gelu,
// relu2, mlp, rope).
//
// Shape alphabet, used in every comment in src/:
//   B  batch size            T  context length (positions, "time")
//   C  channels (n_embd)     NH number of attention heads
//   HS head size = C / NH    V  vocabulary size
//   L  number of blocks (n_layer)
//
// Two architectures are built from the same layers (PyTorch names in quotes):
//
// card, the attention model: one block that is attention and nothing else.
//   x[B,T,C]       = tok_emb[inputs] + pos_emb[0..T)              "tok_emb", "pos_emb"
//   qkv[B,T,3C]    = x @ [Wq;Wk;Wv]^T                             "blocks.0.attn.{q,k,v}"
//   x              = attention(qkv) @ Wproj^T + bproj             "blocks.0.attn.proj"
//   logits[B,T,V]  = x @ Whead^T + bhead                          "head"
//
// gpt, nanoGPT's model without biases: L blocks on a residual stream.
//   x              = dropout(tok_emb[inputs] + pos_emb[0..T))
//   for each block i:
//     x            = x + dropout(attention(ln1(x)) @ Wproj^T)     "blocks.{i}.ln1", ".attn.*"
//     x            = x + dropout(mlp(ln2(x)))                     "blocks.{i}.ln2", ".mlp.fc", ".mlp.proj"
//   logits[B,T,V]  = ln_f(x) @ tok_emb^T                          "ln_f"; the head is tied to tok_emb
//
// gpt2, GPT-2 itself (Radford et al. 2019; what Hugging Face's GPT-2
// files hold): the gpt with a bias in every linear layer and LayerNorm.
//   ln(x)          = layernorm(x) * weight + bias                 ".ln1.bias", ".ln2.bias", "ln_f.bias"
//   qkv            = ln1(x) @ [Wq;Wk;Wv]^T + [bq;bk;bv]           ".attn.{q,k,v}.bias"
//   proj, fc, mlp proj: each + its bias                           ".attn.proj.bias", ".mlp.{fc,proj}.bias"
//   the MLP's GELU exact (--mlp gelu) or GPT-2's tanh form (--mlp gelu_tanh)
//
// and in all, loss = mean cross-entropy(logits, targets).
//
// They differ only in which parts a block has (ModelParts below). block.c
// writes a block's forward and backward twice: card's, and the gpt's, which
// is gpt2's too (with its bias pointers NULL in a gpt) and asks of each
// part whether the model has it (`make ladder`: the ladder's --no-*
// switches) and which kind it is (the modern recipe's, each one part
// replaced by what today's small GPTs use); model.c's one loop over the
// blocks serves all three architectures.
//
// The modern recipe, one switch each (docs/model.md, "The modern recipe"):
//   --norm rmsnorm   ln1, ln2, ln_f are RMSNorm (rmsnorm.h): x / rms(x) * weight
//   --mlp relu2      the MLP's activation is ReLU^2 (relu2.h): max(x, 0)^2
//   --mlp swiglu     the MLP is LLaMA's (swiglu.h): (silu(x Wgate^T) * x Wup^T) Wdown^T, hidden 8C/3
//   --untied-head    logits = ln_f(x) @ Whead^T, Whead [V,C] a weight of its own   "head"
//   --pos rope       no pos_emb: q and k rotated by their position in every block (rope.h)
//   --qk-norm        each head's q and k divided by its RMS before the scores (rmsnorm.h)
#ifndef TINYGPT_MODEL_H
#define TINYGPT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "mlp.h"
#include "rng.h"
#include "tensor_table.h"

typedef enum { ARCH_CARD = 0, ARCH_GPT = 1, ARCH_GPT2 = 2 } Arch;
// Their names, indexed by Arch ("card", "gpt", "gpt2"), NULL-terminated: the
// --arch values and the checkpoint's "arch".
extern const char *const ARCH_NAMES[];

// The gpt's norm: LayerNorm (layernorm.h) or RMSNorm (rmsnorm.h). Names
// indexed the same way ("layernorm", "rmsnorm"): --norm and the
// checkpoint's "norm".
typedef enum { NORM_LAYERNORM = 0, NORM_RMSNORM = 1 } NormKind;
extern const char *const NORM_NAMES[];
// The MLP's activation, MlpKind (mlp.h): names "gelu", "relu2", "swiglu",
// "gelu_tanh" (--mlp and the checkpoint's "mlp").
extern const char *const MLP_NAMES[];
// How a gpt knows positions: a learned table added to the embedding
// (pos_emb), or rotary embeddings (rope.h); names "learned", "rope" (--pos
// and the checkpoint's "pos").
typedef enum { POS_LEARNED = 0, POS_ROPE = 1 } PosKind;
extern const char *const POS_NAMES[];

// The most blocks a gpt may have: a bound that keeps every table small and
// lets a checkpoint's n_layer be refused before anything is allocated.
#define MODEL_MAX_LAYERS 1024

typedef struct {
    int vocab_size;  // V
    int block_size;  // the longest context the model can see; pos_emb has this many rows
    int n_embd;      // C
    int n_head;      // NH; must divide C
    float dropout;   // p: probability of zeroing an attention weight (and, in gpt, a stream input)
    Arch arch;       // ARCH_CARD (what a zeroed config means), ARCH_GPT or ARCH_GPT2
    int n_layer;     // L for gpt and gpt2; card has one block (0 or 1 here)
    // A gpt without some of its parts, to see what each one buys (`make
    // ladder`); all false is the whole gpt. card has none of these parts.
    bool no_layernorm, no_mlp, no_residual;
    // The modern recipe's swaps (gpt only); zero is the gpt above.
    NormKind norm;   // which norm ln1, ln2 and ln_f are (when the model has them)
    MlpKind mlp;     // the MLP's activation (when the model has one); gpt2: MLP_GELU or MLP_GELU_TANH
    bool untied_head;  // a head.weight of its own instead of tok_emb
    PosKind pos;     // learned positions (pos_emb) or rotary ones
    bool qk_norm;    // each head's q and k RMS-normalised, no weight
} ModelConfig;

// arch_name / arch_from_name: ARCH_NAMES both ways; arch_from_name returns
// false for any other name.
const char *arch_name(Arch arch);
bool arch_from_name(const char *name, Arch *arch);

// What each block and the ends of the model are made of. A function of the
// architecture: card has none of these parts but the projection's bias and
// its own head; gpt has every part (less those its no_* switches remove),
// no biases, and a head tied to tok_emb (or, with --untied-head, its own
// head.weight, still without a bias); gpt2 has every part, a bias in each
// linear layer and LayerNorm, and the tied head.
typedef struct {
    bool layernorm;  // ln1, ln2 before the branches and ln_f before the head (LayerNorm or RMSNorm)
    bool rmsnorm;    // those norms are RMSNorm (--norm rmsnorm), which take out no mean
    MlpKind activation;  // the MLP's: MLP_GELU, MLP_RELU2 (--mlp relu2) or MLP_SWIGLU (--mlp swiglu)
    bool mlp;        // the MLP after attention
    bool residual;   // x + dropout(branch(x)) instead of branch(x)
    bool proj_bias;  // attn.proj has a bias (card, gpt2)
    bool biases;     // every linear layer and LayerNorm of a block, and ln_f, has a bias (gpt2)
    bool tied_head;  // logits = x @ tok_emb^T, instead of head.weight
    bool head_bias;  // the head has a bias, head.bias (card)
    bool rope;       // q and k rotated by position (--pos rope), and no pos_emb
    bool qk_norm;    // q and k normalised per head (--qk-norm), after any rotation
} ModelParts;
ModelParts model_parts(const ModelConfig *cfg);
// model_layers: how many blocks "cfg" has (card: 1).
int model_layers(const ModelConfig *cfg);

// param_table: the parameters, in checkpoint order. Within a block q, k and
// v are adjacent, so together they are one [3C,C] matrix and a single
// matmul computes all three projections.
void param_table(TensorTable *t, const ModelConfig *cfg);
// act_table: the activations for batches of up to B rows of T = block_size.
void act_table(TensorTable *t, const ModelConfig *cfg, int B);
// grad_act_table: the gradients of the activations. Only one block's worth:
// the backward pass goes block by block, and each block's gradients are
// dead once it has passed them on, so every block reuses the same buffers.
void grad_act_table(TensorTable *t, const ModelConfig *cfg, int B);

// ---- Named views into the buffers -------------------------------------------
// A view is NULL where the architecture has no such tensor.

typedef struct {
    float *ln1_weight;       // [C]      "blocks.{i}.ln1.weight"
    float *ln1_bias;         // [C]      gpt2 only, as every bias below but proj_bias
    float *qkv_weight;       // [3C,C]   rows [0,C) q, [C,2C) k, [2C,3C) v
    float *qkv_bias;         // [3C]     "attn.q.bias", ".k.bias", ".v.bias", adjacent
    float *proj_weight;      // [C,C]    "blocks.{i}.attn.proj.weight"
    float *proj_bias;        // [C]      card and gpt2
    float *ln2_weight;       // [C]
    float *ln2_bias;         // [C]
    float *fc_weight;        // [4C,C]   "blocks.{i}.mlp.fc.weight"; SwiGLU: [2H,C] gate_proj then up_proj
    float *fc_bias;          // [4C]
    float *mlp_proj_weight;  // [C,4C]   "blocks.{i}.mlp.proj.weight"; SwiGLU: [C,H] down_proj
    float *mlp_proj_bias;    // [C]      "blocks.{i}.mlp.proj.bias"
} BlockParams;

typedef struct {
    float *tok_emb;       // [V,C]
    float *pos_emb;       // [T,C]   NULL with --pos rope
    BlockParams *blocks;  // [L]
    float *lnf_weight;    // [C]   gpt
    float *lnf_bias;      // [C]   gpt2
    float *head_weight;   // [V,C] card and --untied-head; in gpt, the same memory as tok_emb (tied)
    float *head_bias;     // [V]   card
} ParamTensors;

typedef struct {
    float *ln1_out, *ln1_mean, *ln1_rstd;  // [B,T,C], [B,T], [B,T]   ln1(x); no mean with RMSNorm
    float *qkv;             // [B,T,3C]    queries, keys, values (with --qk-norm, q and k normalised)
    float *qk_rstd;         // [B,T,2NH]   --qk-norm: 1/rms of each head's q, then of each head's k
    float *attn_weights;    // [B,NH,T,T]  softmax of masked scaled scores (before dropout)
    float *dropped_weights; // [B,NH,T,T]  attn_weights after dropout (each x 0 or 1/(1-p)); only when dropout > 0
    float *keys_t;          // [B,NH,HS,T] scratch of the fast forward, and sampling's key cache (fast.h)
    float *attn_out;        // [B,T,C]     attention output, heads concatenated
    float *res_attn;        // [B,T,C]     the stream after attention: x + dropout(proj) (card: proj)
    float *ln2_out, *ln2_mean, *ln2_rstd;  // ln2(res_attn)
    float *fc_out;          // [B,T,4C]    the MLP's hidden layer, before GELU
    float *res_mlp;         // [B,T,C]     the stream after the MLP: the block's output
} BlockActs;

typedef struct {
    float *encoded;          // [B,T,C]  token + position embedding (gpt: after dropout)
    BlockActs *blocks;       // [L]
    float *branch_out;       // [B,T,C]  a branch's output before it joins the stream (gpt; shared by all blocks)
    float *act_out;          // [B,T,4C] the activation of fc_out, GELU or ReLU^2 (gpt; shared: backward recomputes it)
    float *lnf_out, *lnf_mean, *lnf_rstd;  // ln_f(x) (gpt)
    // One [B,T,V] buffer holds the logits, then their softmax, then its
    // gradient: at GPT-2's V = 50257, each is 206 MB for a batch of 4 x 256.
    // The loss writes probs over the logits (crossentropy.h), and the
    // backward dlogits over the probs; so after a forward with targets,
    // logits holds probs, and a caller that wants the logits runs one
    // without (sampling and the walkthrough do).
    float *logits;           // [B,T,V]
    float *probs;            // [B,T,V]  softmax(logits), kept for the backward pass: the memory of logits
    float *losses;           // [B,T]    per-position cross-entropy
} ActTensors;

// The gradients of the activations (see grad_act_table). The convention,
// once: a backward pass WRITES the gradient of its input activation, and
// ADDS to parameter gradients and to `dresidual`. The residual stream feeds
// two consumers in every block (the branch and the skip connection), so its
// gradient is the sum of both: the skip path leaves dresidual as it is, and
// the branch's backward adds its part to it.
typedef struct {
    float *dresidual;      // [B,T,C]    d loss / d stream, at the point the backward pass has reached
    float *dlogits;        // [B,T,V]    the memory of acts.logits (ActTensors), not of this table
    float *dln_out;        // [B,T,C]    gradient of a branch's input (a LayerNorm's output)
    float *dbranch;        // [B,T,C]    gradient of a branch's output
    float *dattn_out;      // [B,T,C]
    float *dqkv;           // [B,T,3C]
    float *dattn_weights;  // [B,NH,T,T] scratch of attention_backward
    float *values_t;       // [B,NH,HS,T] scratch of attention_backward: each head's values, transposed
    float *dhidden;        // [B,T,4C]   scratch of mlp_backward (gpt)
} GradActs;

typedef struct Model {
    ModelConfig config;
    ModelParts parts;
    int n_layer;                 // L
    int max_batch;               // activations are sized for this many rows

    TensorTable param_table;
    float *params_memory;        // [param_table.total]
    ParamTensors params;
    float *grads_memory;         // [grads_size]; NULL when built without grads
    size_t grads_size;           // param_table.total; fewer in a slice that hands its blocks' on (below)
    ParamTensors grads;

    TensorTable act_table;
    float *acts_memory;          // [act_table.total]
    ActTensors acts;
    TensorTable grad_act_table;
    float *grad_acts_memory;     // [grad_act_table.total]; NULL without grads
    GradActs grad_acts;

    // The blocks whose backward has ended since model_zero_grad (L - the
    // lowest; in a slice that hands its gradients on, once it has), for the
    // slice that waits on it; and in such a slice (model_slice_init), the
    // model it hands its blocks' gradients to and the one whose turn comes
    // just before its own (that model, or the slice before); else NULL.
    // Such a slice keeps where the blocks' parameters sit in the table: the
    // front's floats before them, and one block's.
    int blocks_done;
    struct Model *hands_to;
    const struct Model *after;
    size_t blocks_front, block_floats;

    // What the last forward pass saw, for the backward pass.
    int *inputs;                 // [max_batch, block_size]
    int *targets;                // [max_batch, block_size]
    int last_B, last_T;
    bool last_training;
    uint64_t last_dropout_key;
    // The rows the step's loss is the mean of, when the last forward's B
    // rows are one part of a step's batch (a --grad-accum micro-batch, one
    // process's rows under mpirun): model_backward then adds this part's
    // share of the whole batch's gradient. 0 (model_init's): the last
    // forward's B rows are the whole batch.
    size_t loss_rows;
    // The row of that whole batch the last forward's row 0 is (0 for a
    // whole batch): dropout's masks are the whole batch's (block.h,
    // stream_first), so cutting a batch into parts changes no mask.
    size_t batch_first;
} Model;

// model_check_config: false (with a message naming the flag) when the sizes
// are invalid: non-positive, heads not dividing embd, dropout outside [0,1),
// a layer count out of range or given to card.
bool model_check_config(const ModelConfig *cfg, Error *err);

// model_memory_bytes: the bytes model_init allocates for "cfg" with batches
// of up to "max_batch" rows (and gradients when "with_grads"), summed from
// the tables in saturating size_t arithmetic: SIZE_MAX means "more than a
// size_t holds". "cfg" must pass model_check_config.
size_t model_memory_bytes(const ModelConfig *cfg, int max_batch, bool with_grads);
// model_check_memory: false, with a message naming the sizes and the bytes
// needed (a command adds which of its flags make it smaller), when
// model_memory_bytes is more than memory_limit_bytes().
// Call it before model_init: an allocation that the kernel grants lazily
// and cannot back would kill the process later, without a message.
bool model_check_memory(const ModelConfig *cfg, int max_batch, bool with_grads, Error *err);

// model_init: allocate parameters (zeroed) and activations for batches of up
// to "max_batch" rows; gradients too when "with_grads". model_free releases.
void model_init(Model *m, const ModelConfig *cfg, int max_batch, bool with_grads);
void model_free(Model *m);

// model_init_weights: card: PyTorch's defaults (embeddings N(0,1); Linear
// weights and biases U(-1/sqrt(C), 1/sqrt(C))). gpt: nanoGPT's (every
// Linear and Embedding weight N(0, 0.02), the two projections that end a
// branch N(0, 0.02/sqrt(2L)), LayerNorm weights 1); gpt2: the same, and
// every bias 0 (GPT-2's).
void model_init_weights(Model *m, Rng *rng);

// model_forward: run the model on inputs[B,T] (B <= max_batch, T <= block_size).
// With targets[B,T] it returns the mean cross-entropy loss, and leaves in
// acts.logits their softmax, acts.probs (see ActTensors); with targets NULL
// it only computes logits and returns 0. "training" turns dropout on, with
// its masks a function of "dropout_key".
float model_forward(Model *m, const int *inputs, const int *targets, int B, int T, bool training,
                    uint64_t dropout_key);

// model_forward_position: the forward pass for position t (< block_size) of a
// single sequence (row 0 of the batch), dropout off. Each block writes row t
// of its qkv (and position t of keys_t, which holds the keys as
// attention.h's cache_key lays them out) and reads positions 0..t-1 as
// earlier calls left them: the key/value cache, so generating a token costs
// O(L (T*C + C*C)) instead of a forward pass over the whole window. Every
// other activation of position t, its logits included, is written in row 0,
// over the last position's (only the cache needs memory per position).
// Activations are laid out for T = block_size here, so do not mix it with
// model_forward on the same model. It runs the same block_forward as
// model_forward, on one row, so every bit of the result is the same (its
// products run linear_forward_rows, model_forward's the matmul engine, each
// output the same multiply-adds in the same order). Returns logits[V] for
// position t.
const float *model_forward_position(Model *m, int token, int t);
// model_zero_grad: zero the parameter gradients (backward adds to them).
void model_zero_grad(Model *m);
// model_backward: gradients of the last forward's loss into m->grads.
void model_backward(Model *m);
// model_sgd_step: params -= lr * grads.
void model_sgd_step(Model *m, float lr);

// Slices: one team of threads through a whole step. Instead of every layer
// sharing its rows among the threads and waiting for them at its end, each
// thread can run the whole forward and backward on its own rows of the
// batch, as one process under mpirun does (dist.h), and the threads meet
// once, to sum their gradients: each core keeps its rows in its own cache
// through the step, and no layer waits for the other threads at its end.
// Two threads ran the default gpt 1.2x as fast this way (docs/model.md,
// "Threads").
// model_slice_init: "slice" becomes rows [first_row, first_row + rows) of
// m's batch: it reads m's weights, keeps its activations in m's buffers at
// those rows (so two slices never touch one element), and has gradients of
// its own (two slices adding to one buffer would race). m must have gradients; m itself serves as the slice of row 0.
// Set loss_rows and batch_first before each forward, as for a part of a
// batch. Run a slice's forward and backward on one thread: inside a
// parallel region (nested parallelism off) every layer's loop does.
// With "after" (for one forward and backward per model_zero_grad: no
// --grad-accum) the slice keeps the gradients of one block, not of all:
// as its backward ends a block it waits until "after" has ended that
// block too (m's backward, or the slice before this one has handed it
// on; each runs at the same time, on a thread of its own), adds its
// gradients of the block to m's and clears them for the next block. The
// sums are those model_add_grads would make at the end, slice after slice
// (m's own rows' gradient, plus the first slice's, plus the next's), so
// the bits do not change. With "after" NULL it keeps
// all of its gradients to the end. model_slice_free releases what the
// slice owns.
void model_slice_init(Model *slice, Model *m, int first_row, int rows, const Model *after);
void model_slice_free(Model *slice);
// model_slice_bytes: the memory a slice of m owns: its gradients.
size_t model_slice_bytes(const Model *m, bool hand_on);
// model_add_grads: m's gradients += the slice's (of a slice that hands its
// blocks' on, the rest: the embeddings', ln_f's and the head's).
void model_add_grads(Model *m, const Model *slice);

// model_find_nonfinite: the first tensor of the parameter table, read in
// "memory" (m->params_memory, or m->grads_memory for the gradients), that
// holds a NaN or an infinity: its index in m->param_table, with the element
// in "*element"; -1 if every value is finite. Training calls it after every
// step, so a diverging run stops before its weights reach a checkpoint.
int model_find_nonfinite(const Model *m, const float *memory, size_t *element);
// model_find_nonfinite_act: the same over the activation table (forward
// order), to say where a non-finite loss came from.
int model_find_nonfinite_act(const Model *m, size_t *element);

// MODEL_MAX_WEIGHT: the largest magnitude a weight may have. Weights start
// small (gpt's at 0.02, LayerNorm's at 1, card's embeddings N(0, 1)), AdamW
// moves each by about --lr a step and weight decay pulls it back, so a
// weight beyond 1e6 is no model: a run that has diverged, a damaged file, or
// one not written by tinygpt; and a forward pass through such weights can
// overflow float into a NaN loss. Training stops before it saves one, and
// the checkpoint loader refuses one, naming the tensor.
#define MODEL_MAX_WEIGHT 1e6f
// model_find_weight_beyond: like model_find_nonfinite on m->params_memory,
// but also finds a finite weight beyond +-MODEL_MAX_WEIGHT.
int model_find_weight_beyond(const Model *m, size_t *element);

#endif
