// model.h: the whole model: its sizes, its parameter and activation tables,
// and forward, backward and the SGD update that tie the layers together.
//
// Reading order: file 9, after the four layers (encoder, linear, attention,
// crossentropy) it calls.
//
// Shape alphabet, used in every comment in src/:
//   B  batch size            T  context length (positions, "time")
//   C  channels (n_embd)     NH number of attention heads
//   HS head size = C / NH    V  vocabulary size
//
// The model, one line per layer (PyTorch names in quotes):
//   encoded[B,T,C]   = tok_emb[inputs] + pos_emb[0..T)          "tok_emb", "pos_emb"
//   qkv[B,T,3C]      = encoded @ [Wq;Wk;Wv]^T                   "blocks.0.attn.{q,k,v}"
//   attn_out[B,T,C]  = causal multi-head attention(q, k, v) with dropout
//   proj_out[B,T,C]  = attn_out @ Wproj^T + bproj               "blocks.0.attn.proj"
//   logits[B,T,V]    = proj_out @ Whead^T + bhead               "head"
//   loss             = mean cross-entropy(logits, targets)
#ifndef TINYGPT_MODEL_H
#define TINYGPT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "rng.h"

typedef struct {
    int vocab_size;  // V
    int block_size;  // the longest context the model can see; pos_emb has this many rows
    int n_embd;      // C
    int n_head;      // NH; must divide C
    float dropout;   // p: probability of zeroing each attention weight while training
} ModelConfig;

// One named tensor inside a contiguous buffer.
typedef struct {
    const char *name;  // the PyTorch / safetensors name
    int ndim;          // 1 or 2
    size_t shape[2];   // shape[1] unused when ndim == 1
    size_t offset;     // in floats, from the start of the buffer
    size_t size;       // number of floats
} TensorSpec;

// ---- Parameters: the table, in buffer order -------------------------------
// q, k and v are adjacent, so together they are one [3C,C] matrix, and a
// single matmul computes all three projections.
enum {
    PARAM_TOK_EMB,    // tok_emb.weight            [V,C]
    PARAM_POS_EMB,    // pos_emb.weight            [T,C]  (T = block_size)
    PARAM_Q_WEIGHT,   // blocks.0.attn.q.weight    [C,C]
    PARAM_K_WEIGHT,   // blocks.0.attn.k.weight    [C,C]
    PARAM_V_WEIGHT,   // blocks.0.attn.v.weight    [C,C]
    PARAM_PROJ_WEIGHT,// blocks.0.attn.proj.weight [C,C]
    PARAM_PROJ_BIAS,  // blocks.0.attn.proj.bias   [C]
    PARAM_HEAD_WEIGHT,// head.weight               [V,C]
    PARAM_HEAD_BIAS,  // head.bias                 [V]
    NUM_PARAM_TENSORS
};

// Named views into the parameter buffer (and, with the same layout, into the
// gradient buffer).
typedef struct {
    float *tok_emb;      // [V,C]
    float *pos_emb;      // [T,C]
    float *qkv_weight;   // [3C,C] rows [0,C) are q, [C,2C) k, [2C,3C) v
    float *proj_weight;  // [C,C]
    float *proj_bias;    // [C]
    float *head_weight;  // [V,C]
    float *head_bias;    // [V]
} ParamTensors;

// ---- Activations: the table, in buffer order ------------------------------
// Sized for (max_batch, block_size); a forward pass with smaller B or T uses
// a prefix of each tensor.
enum {
    ACT_ENCODED,       // [B,T,C]     token + position embedding
    ACT_QKV,           // [B,T,3C]    queries, keys, values
    ACT_ATTN_WEIGHTS,  // [B,NH,T,T]  softmax of masked scaled scores (before dropout)
    ACT_ATTN_OUT,      // [B,T,C]     attention output, heads concatenated
    ACT_PROJ_OUT,      // [B,T,C]     output projection
    ACT_LOGITS,        // [B,T,V]     classification head
    ACT_PROBS,         // [B,T,V]     softmax(logits), kept for the backward pass
    ACT_LOSSES,        // [B,T]       per-position cross-entropy
    ACT_DROPOUT_SCALES,// [B,NH,T,T]  0 or 1/(1-p) for each attention weight (training only)
    ACT_KEYS_T,        // [B,NH,HS,T] each head's keys, transposed (see attention.h)
    ACT_VALUES_T,      // [B,NH,HS,T] each head's values, transposed
    NUM_ACT_TENSORS
};

typedef struct {
    float *encoded;       // [B,T,C]
    float *qkv;           // [B,T,3C]
    float *attn_weights;  // [B,NH,T,T]
    float *attn_out;      // [B,T,C]
    float *proj_out;      // [B,T,C]
    float *logits;        // [B,T,V]
    float *probs;         // [B,T,V]
    float *losses;        // [B,T]
    float *dropout_scales;// [B,NH,T,T]
    float *keys_t;        // [B,NH,HS,T]
    float *values_t;      // [B,NH,HS,T]
} ActTensors;

typedef struct {
    ModelConfig config;
    int max_batch;                                // activations are sized for this many rows

    TensorSpec param_specs[NUM_PARAM_TENSORS];
    size_t num_params;
    float *params_memory;                         // [num_params]
    ParamTensors params;
    float *grads_memory;                          // [num_params]; NULL when built without grads
    ParamTensors grads;

    TensorSpec act_specs[NUM_ACT_TENSORS];
    size_t num_acts;
    float *acts_memory;                           // [num_acts]
    ActTensors acts;
    float *grad_acts_memory;                      // [num_acts]; NULL without grads
    ActTensors grad_acts;                         // only up to logits: the rest have no gradient (NULL)
    float *weight_scratch;                        // [weight_scratch_size] for the fast matmul
    size_t weight_scratch_size;                   // max(3C, V) * C

    // What the last forward pass saw, for the backward pass.
    int *inputs;                                  // [max_batch, block_size]
    int *targets;                                 // [max_batch, block_size]
    int last_B, last_T;
    bool last_training;
} Model;

// model_check_config: false (with a message naming the flag) when the sizes
// are invalid: non-positive, heads not dividing embd, dropout outside [0,1).
bool model_check_config(const ModelConfig *cfg, Error *err);

// model_memory_bytes: the bytes model_init allocates for "cfg" with batches
// of up to "max_batch" rows (and gradients when "with_grads"), computed in
// saturating size_t arithmetic: SIZE_MAX means "more than a size_t holds".
// "cfg" must pass model_check_config.
size_t model_memory_bytes(const ModelConfig *cfg, int max_batch, bool with_grads);
// model_check_memory: false, with a message naming the size flags and the
// bytes needed, when model_memory_bytes is more than memory_limit_bytes().
// Call it before model_init: an allocation that the kernel grants lazily
// and cannot back would kill the process later, without a message.
bool model_check_memory(const ModelConfig *cfg, int max_batch, bool with_grads, Error *err);

// param_table / act_table: fill in the tables above; return the total floats.
size_t param_table(const ModelConfig *cfg, TensorSpec specs[NUM_PARAM_TENSORS]);
size_t act_table(const ModelConfig *cfg, int B, TensorSpec specs[NUM_ACT_TENSORS]);

// model_init: allocate parameters (zeroed) and activations for batches of up
// to "max_batch" rows; gradients too when "with_grads". model_free releases.
void model_init(Model *m, const ModelConfig *cfg, int max_batch, bool with_grads);
void model_free(Model *m);

// model_init_weights: PyTorch's default initialisation: embeddings N(0,1);
// Linear weights and biases U(-1/sqrt(C), 1/sqrt(C)).
void model_init_weights(Model *m, Rng *rng);

// model_forward: run the model on inputs[B,T] (B <= max_batch, T <= block_size).
// With targets[B,T] it returns the mean cross-entropy loss; with targets NULL
// it only computes logits and returns 0. "training" turns dropout on, with
// its mask a function of "dropout_key".
float model_forward(Model *m, const int *inputs, const int *targets, int B, int T, bool training,
                    uint64_t dropout_key);
// The three Linear weights transposed ([in, out]), made once for sampling,
// whose weights do not change, so each token's forward pass can use the
// fast kernel without transposing again (see linear_forward_transposed).
typedef struct {
    float *memory;      // [(3C + C + V) * C]
    float *qkv_weight;  // [C,3C]
    float *proj_weight; // [C,C]
    float *head_weight; // [C,V]
} TransposedWeights;

// transposed_weights_init: allocate and fill from m's current parameters.
void transposed_weights_init(TransposedWeights *w, const Model *m);
void transposed_weights_free(TransposedWeights *w);

// model_forward_position: the forward pass for position t (< block_size) of a
// single sequence (row 0 of the batch), dropout off, computing only row t of
// every activation and reading rows 0..t-1 as an earlier call or forward
// pass left them. Those rows are the key/value cache: generating a token
// costs O(T*C + C*C) instead of a forward pass over the whole window.
// Activations are laid out for T = block_size here, so do not mix it with
// model_forward on the same rows. The arithmetic, and so every bit of the
// result, is the same as model_forward's. "wt" holds m's weights,
// transposed. Returns logits[V] for position t.
const float *model_forward_position(Model *m, const TransposedWeights *wt, int token, int t);
// model_zero_grad: zero the parameter gradients (backward adds to them; it
// writes the activation gradients afresh).
void model_zero_grad(Model *m);
// model_backward: gradients of the last forward's loss into m->grads.
void model_backward(Model *m);
// model_sgd_step: params -= lr * grads.
void model_sgd_step(Model *m, float lr);

// model_find_nonfinite: the first tensor of the parameter table, read in
// "memory" (m->params_memory, or m->grads_memory for the gradients), that
// holds a NaN or an infinity: its index, with the element in "*element";
// -1 if every value is finite. Training calls it after every step, so a
// diverging run stops before its weights reach a checkpoint.
int model_find_nonfinite(const Model *m, const float *memory, size_t *element);
// model_find_nonfinite_act: the same over the activation table (forward
// order), to say where a non-finite loss came from.
int model_find_nonfinite_act(const Model *m, size_t *element);

#endif
