// model.c: the tables, and the passes that chain the layers (see model.h
// for both architectures in a few lines).
//
// The file in parts: the configuration and the tables; allocation and
// initialisation; which kernels (the fast ones or, with `make REFERENCE=1`,
// the plain loops); the forward pass (block_forward, called once per block
// by the window forward and by the one-position forward of sampling); the
// backward pass (block_backward, the same blocks in reverse); and finding a
// NaN.
#include "model.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

// Upper bounds on any one size, so products of three sizes cannot overflow
// size_t and absurd flags are refused before anything is allocated.
#define MAX_DIM (1 << 20)

// ===========================================================================
// The configuration.

const char *const ARCH_NAMES[] = {"card", "gpt", "gpt2", NULL};
const char *const NORM_NAMES[] = {"layernorm", "rmsnorm", NULL};
const char *const MLP_NAMES[] = {"gelu", "relu2", "swiglu", "gelu_tanh", NULL};
const char *const POS_NAMES[] = {"learned", "rope", NULL};

const char *arch_name(Arch arch) { return ARCH_NAMES[arch]; }

bool arch_from_name(const char *name, Arch *arch) {
    int index = name_index(ARCH_NAMES, name);
    if (index >= 0) *arch = (Arch)index;
    return index >= 0;
}

// gpt2 is a gpt (model_check_config refuses its removals and swaps, so the
// gpt's rules below give it every part) with biases.
ModelParts model_parts(const ModelConfig *cfg) {
    const bool gpt = cfg->arch != ARCH_CARD, gpt2 = cfg->arch == ARCH_GPT2;
    return (ModelParts){.layernorm = gpt && !cfg->no_layernorm,
                        .rmsnorm = gpt && !cfg->no_layernorm && cfg->norm == NORM_RMSNORM,
                        .mlp = gpt && !cfg->no_mlp,
                        .activation = gpt ? cfg->mlp : MLP_GELU,
                        .residual = gpt && !cfg->no_residual,
                        .proj_bias = !gpt || gpt2,
                        .biases = gpt2,
                        .tied_head = gpt && !cfg->untied_head,
                        .head_bias = !gpt,
                        .rope = gpt && cfg->pos == POS_ROPE,
                        .qk_norm = gpt && cfg->qk_norm};
}

int model_layers(const ModelConfig *cfg) { return cfg->arch != ARCH_CARD ? cfg->n_layer : 1; }

bool model_check_config(const ModelConfig *cfg, Error *err) {
    if (cfg->vocab_size < 1 || cfg->vocab_size > MAX_DIM)
        return error_set(err, "vocabulary size %d is out of range [1, %d]", cfg->vocab_size, MAX_DIM);
    if (cfg->block_size < 1 || cfg->block_size > 1 << 16)
        return error_set(err, "--context %d is out of range [1, 65536]", cfg->block_size);
    if (cfg->n_embd < 1 || cfg->n_embd > 1 << 16)
        return error_set(err, "--embd %d is out of range [1, 65536]", cfg->n_embd);
    if (cfg->n_head < 1 || cfg->n_head > cfg->n_embd)
        return error_set(err, "--heads %d must be between 1 and --embd %d", cfg->n_head, cfg->n_embd);
    if (cfg->n_embd % cfg->n_head != 0)
        return error_set(err, "--heads %d does not divide --embd %d; pick heads that divide it (e.g. %d)",
                         cfg->n_head, cfg->n_embd, cfg->n_embd % 4 == 0 ? 4 : 1);
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f))
        return error_set(err, "--dropout %g is outside [0, 1); use e.g. 0.1, or 0 to turn it off",
                         (double)cfg->dropout);
    if (cfg->arch != ARCH_CARD && cfg->arch != ARCH_GPT && cfg->arch != ARCH_GPT2)
        return error_set(err, "unknown architecture %d", (int)cfg->arch);
    if (cfg->arch == ARCH_CARD && cfg->n_layer > 1)
        return error_set(err, "--layers %d: the card model has exactly one block; use --arch gpt for more",
                         cfg->n_layer);
    if (cfg->arch == ARCH_CARD && (cfg->no_layernorm || cfg->no_mlp || cfg->no_residual))
        return error_set(err, "--no-%s: the card model has no %s to remove; use --arch gpt",
                         cfg->no_layernorm ? "layernorm" : cfg->no_mlp ? "mlp" : "residual",
                         cfg->no_layernorm ? "LayerNorm" : cfg->no_mlp ? "MLP" : "residual stream");
    if (cfg->norm != NORM_LAYERNORM && cfg->norm != NORM_RMSNORM)
        return error_set(err, "unknown norm %d", (int)cfg->norm);
    if (cfg->arch == ARCH_CARD && cfg->norm != NORM_LAYERNORM)
        return error_set(err, "--norm %s: the card model has no norm to swap; use --arch gpt", NORM_NAMES[cfg->norm]);
    if (cfg->mlp != MLP_GELU && cfg->mlp != MLP_RELU2 && cfg->mlp != MLP_SWIGLU && cfg->mlp != MLP_GELU_TANH)
        return error_set(err, "unknown MLP %d", (int)cfg->mlp);
    if (cfg->arch == ARCH_CARD && cfg->mlp != MLP_GELU)
        return error_set(err, "--mlp %s: the card model has no MLP; use --arch gpt", MLP_NAMES[cfg->mlp]);
    if (cfg->arch == ARCH_CARD && cfg->untied_head)
        return error_set(err, "--untied-head: the card model's head is its own already; use --arch gpt");
    if (cfg->pos != POS_LEARNED && cfg->pos != POS_ROPE) return error_set(err, "unknown positions %d", (int)cfg->pos);
    if (cfg->arch == ARCH_CARD && cfg->pos != POS_LEARNED)
        return error_set(err, "--pos %s: the card model keeps its learned positions; use --arch gpt", POS_NAMES[cfg->pos]);
    if (cfg->arch == ARCH_CARD && cfg->qk_norm)
        return error_set(err, "--qk-norm: the card model is the attention of the card, unnormalised; use --arch gpt");
    if (cfg->pos == POS_ROPE && (cfg->n_embd / cfg->n_head) % 2 != 0)
        return error_set(err, "--pos rope turns pairs of channels, so the head size --embd / --heads (%d) must be even",
                         cfg->n_embd / cfg->n_head);
    // gpt2 is GPT-2's model as it is: of the gpt's switches only GELU's form.
    if (cfg->arch == ARCH_GPT2 && (cfg->no_layernorm || cfg->no_mlp || cfg->no_residual || cfg->untied_head ||
                                   cfg->norm != NORM_LAYERNORM || cfg->pos != POS_LEARNED || cfg->qk_norm ||
                                   (cfg->mlp != MLP_GELU && cfg->mlp != MLP_GELU_TANH)))
        return error_set(err, "gpt2 is GPT-2's model: LayerNorm, a GELU MLP (--mlp gelu or gelu_tanh), learned positions, a tied head, nothing removed; use --arch gpt for the others");
    if (cfg->arch != ARCH_CARD && (cfg->n_layer < 1 || cfg->n_layer > MODEL_MAX_LAYERS))
        return error_set(err, "--layers %d is out of range [1, %d]", cfg->n_layer, MODEL_MAX_LAYERS);
    return true;
}

// ===========================================================================
// The tables.
//
// Each buffer (parameters, activations, activation gradients) is described
// once, by a list of TensorEntry below: its name, its shape in the shape
// alphabet, the part of the model it belongs to, and the view (a field of
// ParamTensors, BlockParams, ...) that points into it. The same lists build
// the tables (build_table) and set the views (set_views), so a tensor's
// name is written in one place. A buffer is laid out as its front entries,
// then, for each block i, the block entries named "blocks.{i}.<name>", then
// its back entries.

// A dimension of a tensor, in the shape alphabet of model.h.
// D_H is the MLP's hidden width (4C, or SwiGLU's 8C/3 rounded: mlp.h), D_FC
// its first product's (H, or SwiGLU's 2H), D_DH its backward's scratch.
typedef enum { D_NONE, D_V, D_T, D_C, D_3C, D_H, D_FC, D_DH, D_2NH, D_BT, D_BNH, D_TT, D_HST } Dim;

// The part of the model a tensor belongs to: it is in the table when the
// model has that part (has_part).
typedef enum {
    ALWAYS,
    IF_POS_TABLE,           // pos_emb: learned positions (all but --pos rope)
    IF_LAYERNORM,           // ln1, ln2, ln_f and their statistics (LayerNorm or RMSNorm)
    IF_LAYERNORM_MEAN,      // ln1's and ln_f's means: LayerNorm's, not RMSNorm's
    IF_MLP,                 // the MLP
    IF_MLP_FC_PROJ,         // its two matrices, fc and proj (GELU or ReLU^2)
    IF_MLP_GELU,            // the MLP's activation, when it is GELU
    IF_MLP_RELU2,           // ... when it is ReLU^2
    IF_MLP_SWIGLU,          // ... when it is SwiGLU, with its three matrices
    IF_LAYERNORM_AND_MLP,   // ln2: the norm before the MLP
    IF_LAYERNORM_AND_MLP_MEAN,  // ln2's mean (LayerNorm's)
    IF_PROJ_BIAS,           // the projection's bias (card, gpt2)
    IF_BIASES,              // gpt2's other biases: every linear layer's and LayerNorm's
    IF_OWN_HEAD,            // an untied head (card, and gpt --untied-head)
    IF_HEAD_BIAS,           // its bias (card)
    IF_QK_NORM,             // the statistics of --qk-norm
    IF_RESIDUAL,            // the residual stream's branch buffers
    IF_DROPOUT,             // the attention weights after dropout
    IF_LAYERNORM_OR_RESIDUAL,  // dln_out: where a branch's input gradient goes (see input_grad)
} Part;

// How a parameter starts (model_init_weights): PyTorch's rules for card,
// GPT-2's for gpt and gpt2. INIT_BIAS: card's Linear biases are drawn as its
// weights; GPT-2's biases start at 0.
typedef enum { INIT_LINEAR, INIT_EMBEDDING, INIT_ONES, INIT_BRANCH_END, INIT_BIAS } ParamInit;

#define NO_VIEW SIZE_MAX  // a tensor without a view of its own (k and v: see qkv_weight)

typedef struct {
    const char *name;  // for a block's tensor, what follows "blocks.{i}."
    Dim rows, cols;    // cols D_NONE: a 1-D tensor
    Part part;
    size_t view;       // offsetof the float * that points at it, in its views struct; NO_VIEW for none
    ParamInit init;    // parameters only
} TensorEntry;

typedef struct {
    const TensorEntry *front;
    int n_front;
    const TensorEntry *block;  // NULL: the buffer has no per-block tensors
    int n_block;
    const TensorEntry *back;
    int n_back;
} Layout;

#define ENTRIES(list) list, (int)(sizeof list / sizeof list[0])

// The parameters, in checkpoint order. Within a block q, k and v are
// adjacent, so together they are one [3C,C] matrix (qkv_weight) and a
// single matmul computes all three projections; their biases (gpt2) one
// [3C] vector (qkv_bias).
static const TensorEntry PARAMS_FRONT[] = {
    {"tok_emb.weight", D_V, D_C, ALWAYS, offsetof(ParamTensors, tok_emb), INIT_EMBEDDING},
    {"pos_emb.weight", D_T, D_C, IF_POS_TABLE, offsetof(ParamTensors, pos_emb), INIT_EMBEDDING},
};
static const TensorEntry PARAMS_BLOCK[] = {
    {"ln1.weight", D_C, D_NONE, IF_LAYERNORM, offsetof(BlockParams, ln1_weight), INIT_ONES},
    {"ln1.bias", D_C, D_NONE, IF_BIASES, offsetof(BlockParams, ln1_bias), INIT_BIAS},
    {"attn.q.weight", D_C, D_C, ALWAYS, offsetof(BlockParams, qkv_weight), INIT_LINEAR},
    {"attn.k.weight", D_C, D_C, ALWAYS, NO_VIEW, INIT_LINEAR},
    {"attn.v.weight", D_C, D_C, ALWAYS, NO_VIEW, INIT_LINEAR},
    {"attn.q.bias", D_C, D_NONE, IF_BIASES, offsetof(BlockParams, qkv_bias), INIT_BIAS},
    {"attn.k.bias", D_C, D_NONE, IF_BIASES, NO_VIEW, INIT_BIAS},
    {"attn.v.bias", D_C, D_NONE, IF_BIASES, NO_VIEW, INIT_BIAS},
    {"attn.proj.weight", D_C, D_C, ALWAYS, offsetof(BlockParams, proj_weight), INIT_BRANCH_END},
    {"attn.proj.bias", D_C, D_NONE, IF_PROJ_BIAS, offsetof(BlockParams, proj_bias), INIT_BIAS},
    {"ln2.weight", D_C, D_NONE, IF_LAYERNORM_AND_MLP, offsetof(BlockParams, ln2_weight), INIT_ONES},
    {"ln2.bias", D_C, D_NONE, IF_BIASES, offsetof(BlockParams, ln2_bias), INIT_BIAS},
    {"mlp.fc.weight", D_H, D_C, IF_MLP_FC_PROJ, offsetof(BlockParams, fc_weight), INIT_LINEAR},
    {"mlp.fc.bias", D_H, D_NONE, IF_BIASES, offsetof(BlockParams, fc_bias), INIT_BIAS},
    {"mlp.proj.weight", D_C, D_H, IF_MLP_FC_PROJ, offsetof(BlockParams, mlp_proj_weight), INIT_BRANCH_END},
    {"mlp.proj.bias", D_C, D_NONE, IF_BIASES, offsetof(BlockParams, mlp_proj_bias), INIT_BIAS},
    // SwiGLU's (LLaMA's names): gate and up adjacent, one [2H,C] fc_weight
    {"mlp.gate_proj.weight", D_H, D_C, IF_MLP_SWIGLU, offsetof(BlockParams, fc_weight), INIT_LINEAR},
    {"mlp.up_proj.weight", D_H, D_C, IF_MLP_SWIGLU, NO_VIEW, INIT_LINEAR},
    {"mlp.down_proj.weight", D_C, D_H, IF_MLP_SWIGLU, offsetof(BlockParams, mlp_proj_weight), INIT_BRANCH_END},
};
static const TensorEntry PARAMS_BACK[] = {
    {"ln_f.weight", D_C, D_NONE, IF_LAYERNORM, offsetof(ParamTensors, lnf_weight), INIT_ONES},
    {"ln_f.bias", D_C, D_NONE, IF_BIASES, offsetof(ParamTensors, lnf_bias), INIT_BIAS},
    {"head.weight", D_V, D_C, IF_OWN_HEAD, offsetof(ParamTensors, head_weight), INIT_LINEAR},
    {"head.bias", D_V, D_NONE, IF_HEAD_BIAS, offsetof(ParamTensors, head_bias), INIT_BIAS},
};
static const Layout PARAMS = {ENTRIES(PARAMS_FRONT), ENTRIES(PARAMS_BLOCK), ENTRIES(PARAMS_BACK)};

// The activations, for B rows of T = block_size, in forward order. The
// loss's probs and their gradient dlogits have no entries: they are
// written over the logits (share_logits).
static const TensorEntry ACTS_FRONT[] = {
    {"encoded", D_BT, D_C, ALWAYS, offsetof(ActTensors, encoded), 0},
};
static const TensorEntry ACTS_BLOCK[] = {
    {"ln1_out", D_BT, D_C, IF_LAYERNORM, offsetof(BlockActs, ln1_out), 0},
    {"ln1_mean", D_BT, D_NONE, IF_LAYERNORM_MEAN, offsetof(BlockActs, ln1_mean), 0},
    {"ln1_rstd", D_BT, D_NONE, IF_LAYERNORM, offsetof(BlockActs, ln1_rstd), 0},
    {"qkv", D_BT, D_3C, ALWAYS, offsetof(BlockActs, qkv), 0},
    {"qk_rstd", D_BT, D_2NH, IF_QK_NORM, offsetof(BlockActs, qk_rstd), 0},
    {"attn_weights", D_BNH, D_TT, ALWAYS, offsetof(BlockActs, attn_weights), 0},
    {"dropped_weights", D_BNH, D_TT, IF_DROPOUT, offsetof(BlockActs, dropped_weights), 0},
    {"keys_t", D_BNH, D_HST, ALWAYS, offsetof(BlockActs, keys_t), 0},
    {"attn_out", D_BT, D_C, ALWAYS, offsetof(BlockActs, attn_out), 0},
    {"res_attn", D_BT, D_C, ALWAYS, offsetof(BlockActs, res_attn), 0},
    {"ln2_out", D_BT, D_C, IF_LAYERNORM_AND_MLP, offsetof(BlockActs, ln2_out), 0},
    {"ln2_mean", D_BT, D_NONE, IF_LAYERNORM_AND_MLP_MEAN, offsetof(BlockActs, ln2_mean), 0},
    {"ln2_rstd", D_BT, D_NONE, IF_LAYERNORM_AND_MLP, offsetof(BlockActs, ln2_rstd), 0},
    {"fc_out", D_BT, D_FC, IF_MLP, offsetof(BlockActs, fc_out), 0},
    {"res_mlp", D_BT, D_C, IF_MLP, offsetof(BlockActs, res_mlp), 0},
};
static const TensorEntry ACTS_BACK[] = {
    {"branch_out", D_BT, D_C, IF_RESIDUAL, offsetof(ActTensors, branch_out), 0},
    {"gelu_out", D_BT, D_H, IF_MLP_GELU, offsetof(ActTensors, act_out), 0},  // one of these three
    {"relu2_out", D_BT, D_H, IF_MLP_RELU2, offsetof(ActTensors, act_out), 0},
    {"swiglu_out", D_BT, D_H, IF_MLP_SWIGLU, offsetof(ActTensors, act_out), 0},
    {"lnf_out", D_BT, D_C, IF_LAYERNORM, offsetof(ActTensors, lnf_out), 0},
    {"lnf_mean", D_BT, D_NONE, IF_LAYERNORM_MEAN, offsetof(ActTensors, lnf_mean), 0},
    {"lnf_rstd", D_BT, D_NONE, IF_LAYERNORM, offsetof(ActTensors, lnf_rstd), 0},
    {"logits", D_BT, D_V, ALWAYS, offsetof(ActTensors, logits), 0},
    {"losses", D_BT, D_NONE, ALWAYS, offsetof(ActTensors, losses), 0},
};
static const Layout ACTS = {ENTRIES(ACTS_FRONT), ENTRIES(ACTS_BLOCK), ENTRIES(ACTS_BACK)};

// The activation gradients: one block's worth, reused by every block.
static const TensorEntry GRAD_ACTS_FRONT[] = {
    {"dresidual", D_BT, D_C, ALWAYS, offsetof(GradActs, dresidual), 0},
    {"dln_out", D_BT, D_C, IF_LAYERNORM_OR_RESIDUAL, offsetof(GradActs, dln_out), 0},
    {"dbranch", D_BT, D_C, IF_RESIDUAL, offsetof(GradActs, dbranch), 0},
    {"dattn_out", D_BT, D_C, ALWAYS, offsetof(GradActs, dattn_out), 0},
    {"dqkv", D_BT, D_3C, ALWAYS, offsetof(GradActs, dqkv), 0},
    {"dattn_weights", D_BNH, D_TT, ALWAYS, offsetof(GradActs, dattn_weights), 0},
    {"values_t", D_BNH, D_HST, ALWAYS, offsetof(GradActs, values_t), 0},
    {"dhidden", D_BT, D_DH, IF_MLP, offsetof(GradActs, dhidden), 0},
};
static const Layout GRAD_ACTS = {ENTRIES(GRAD_ACTS_FRONT), NULL, 0, NULL, 0};

static bool has_part(Part part, const ModelConfig *cfg) {
    const ModelParts p = model_parts(cfg);
    switch (part) {
    case ALWAYS: return true;
    case IF_POS_TABLE: return !p.rope;
    case IF_LAYERNORM: return p.layernorm;
    case IF_LAYERNORM_MEAN: return p.layernorm && !p.rmsnorm;
    case IF_MLP: return p.mlp;
    case IF_MLP_GELU: return p.mlp && (p.activation == MLP_GELU || p.activation == MLP_GELU_TANH);
    case IF_MLP_RELU2: return p.mlp && p.activation == MLP_RELU2;
    case IF_MLP_SWIGLU: return p.mlp && p.activation == MLP_SWIGLU;
    case IF_MLP_FC_PROJ: return p.mlp && p.activation != MLP_SWIGLU;
    case IF_LAYERNORM_AND_MLP: return p.layernorm && p.mlp;
    case IF_LAYERNORM_AND_MLP_MEAN: return p.layernorm && p.mlp && !p.rmsnorm;
    case IF_PROJ_BIAS: return p.proj_bias;
    case IF_BIASES: return p.biases;
    case IF_OWN_HEAD: return !p.tied_head;
    case IF_HEAD_BIAS: return p.head_bias;
    case IF_QK_NORM: return p.qk_norm;
    case IF_RESIDUAL: return p.residual;
    case IF_DROPOUT: return cfg->dropout > 0.0f;
    case IF_LAYERNORM_OR_RESIDUAL: return p.layernorm || p.residual;
    }
    return false;
}

// dim: the size of "d" for "cfg" with batches of B rows, saturating.
static size_t dim(Dim d, const ModelConfig *cfg, size_t B) {
    const size_t V = (size_t)cfg->vocab_size, T = (size_t)cfg->block_size, C = (size_t)cfg->n_embd;
    const size_t NH = (size_t)cfg->n_head;
    switch (d) {
    case D_NONE: return 0;
    case D_V: return V;
    case D_T: return T;
    case D_C: return C;
    case D_3C: return 3 * C;
    case D_H: return (size_t)mlp_hidden((int)C, cfg->mlp);
    case D_FC: return (size_t)mlp_fc_width((int)C, cfg->mlp);
    case D_DH: return (size_t)mlp_dhidden_width((int)C, cfg->mlp);
    case D_2NH: return 2 * NH;
    case D_BT: return sat_mul(B, T);
    case D_BNH: return sat_mul(B, NH);
    case D_TT: return sat_mul(T, T);
    case D_HST: return (C / NH) * T;  // a head's keys or values, transposed: [HS, T]
    }
    return 0;
}

// add_entries: the entries of "list" that "cfg" has, named "prefix" + name.
static void add_entries(TensorTable *t, const TensorEntry *list, int n, const char *prefix, const ModelConfig *cfg,
                        size_t B) {
    for (int i = 0; i < n; i++) {
        if (!has_part(list[i].part, cfg)) continue;
        char name[sizeof ((TensorSpec *)0)->name];
        snprintf(name, sizeof name, "%s%s", prefix, list[i].name);
        table_add(t, name, dim(list[i].rows, cfg, B), dim(list[i].cols, cfg, B), (int)list[i].init);
    }
}

static void build_table(TensorTable *t, const Layout *lo, const ModelConfig *cfg, size_t B) {
    memset(t, 0, sizeof *t);
    add_entries(t, lo->front, lo->n_front, "", cfg, B);
    for (int l = 0; lo->block && l < model_layers(cfg); l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "blocks.%d.", l);
        add_entries(t, lo->block, lo->n_block, prefix, cfg, B);
    }
    add_entries(t, lo->back, lo->n_back, "", cfg, B);
}

void param_table(TensorTable *t, const ModelConfig *cfg) { build_table(t, &PARAMS, cfg, 0); }
void act_table(TensorTable *t, const ModelConfig *cfg, int B) { build_table(t, &ACTS, cfg, (size_t)B); }
void grad_act_table(TensorTable *t, const ModelConfig *cfg, int B) { build_table(t, &GRAD_ACTS, cfg, (size_t)B); }

// point_entries: each view in "list" (fields of the struct at "views") at
// its tensor in "memory", found by position: the table lists the entries the
// model has in the same order, from "*next" on. A view whose tensor the
// model lacks stays NULL; so do all of them without memory (a model built
// without gradients).
// Rows: a slice of the batch (model_slice_init) points each view of an
// activation buffer at its own rows, "first" onwards of the table's "of".
typedef struct {
    size_t first, of;  // {0, 1}: the whole tensor
} Rows;
#define ALL_ROWS ((Rows){0, 1})

// "base": the table's offset that sits at memory[0] (0 but for a slice's
// gradients, model_slice_init, which keep one block's worth).
static void point_entries(void *views, const TensorEntry *list, int n, const TensorTable *t, int *next,
                          float *memory, size_t base, const ModelConfig *cfg, Rows rows) {
    for (int i = 0; i < n; i++) {
        if (!has_part(list[i].part, cfg)) continue;
        const TensorSpec *spec = &t->specs[(*next)++];
        // Every activation's first dimension is the batch's (B*T or B*NH rows).
        assert(spec->size % rows.of == 0 && spec->offset >= base);
        const size_t offset = spec->offset - base + rows.first * (spec->size / rows.of);
        if (list[i].view != NO_VIEW && memory) *(float **)((char *)views + list[i].view) = memory + offset;
    }
}

// set_views: the views of a buffer laid out by "lo" (table "t" at "memory"):
// the front and back entries' in "views", each block's in blocks[l]
// ("block_size" bytes apart); of every tensor, "rows" (ALL_ROWS: all).
static void set_views(void *views, void *blocks, size_t block_size, const Layout *lo, const TensorTable *t,
                      float *memory, const ModelConfig *cfg, Rows rows) {
    int next = 0;
    point_entries(views, lo->front, lo->n_front, t, &next, memory, 0, cfg, rows);
    for (int l = 0; lo->block && l < model_layers(cfg); l++)
        point_entries((char *)blocks + (size_t)l * block_size, lo->block, lo->n_block, t, &next, memory, 0, cfg, rows);
    point_entries(views, lo->back, lo->n_back, t, &next, memory, 0, cfg, rows);
}

// share_logits: probs and dlogits are views of the logits' memory, which
// has the only entry in the tables (ActTensors in model.h): the loss writes
// each over the one before, so one [B,T,V] buffer serves all three.
// dlogits only in a model with gradients.
static void share_logits(ActTensors *a, GradActs *g, bool with_grads) {
    a->probs = a->logits;
    if (with_grads) g->dlogits = a->logits;
}

size_t model_memory_bytes(const ModelConfig *cfg, int max_batch, bool with_grads) {
    TensorTable params, acts, grad_acts;
    param_table(&params, cfg);
    act_table(&acts, cfg, max_batch);
    size_t floats = sat_add(params.total, acts.total);
    if (with_grads) {
        grad_act_table(&grad_acts, cfg, max_batch);
        floats = sat_add(floats, sat_add(params.total, grad_acts.total));
        table_free(&grad_acts);
    }
    size_t positions = sat_mul((size_t)max_batch, (size_t)cfg->block_size);
    table_free(&acts);
    table_free(&params);
    return sat_add(sat_mul(floats, sizeof(float)), sat_mul(sat_mul(2, positions), sizeof(int)));
}

bool model_check_memory(const ModelConfig *cfg, int max_batch, bool with_grads, Error *err) {
    size_t limit = memory_limit_bytes();
    size_t need = model_memory_bytes(cfg, max_batch, with_grads);
    if (limit == 0 || need <= limit) return true;
    char need_text[32];
    if (need == SIZE_MAX) snprintf(need_text, sizeof need_text, "more than 18 EB");
    else snprintf(need_text, sizeof need_text, "%.1f GB", (double)need / 1e9);
    return error_set(err, "a model of L=%d blocks, C=%d channels, NH=%d heads, T=%d positions and V=%d tokens, for %d windows at once, needs %s%s, more than the %.1f GB of memory here",
                     model_layers(cfg), cfg->n_embd, cfg->n_head, cfg->block_size, cfg->vocab_size, max_batch,
                     need_text, with_grads ? " with its gradients" : "", (double)limit / 1e9);
}

// ===========================================================================
// Allocation and initialisation.

void model_init(Model *m, const ModelConfig *cfg, int max_batch, bool with_grads) {
    memset(m, 0, sizeof *m);
    m->config = *cfg;
    m->parts = model_parts(cfg);
    m->n_layer = model_layers(cfg);
    m->config.n_layer = m->n_layer;
    m->max_batch = max_batch;
    const size_t L = (size_t)m->n_layer;
    param_table(&m->param_table, cfg);
    m->params_memory = xcalloc_lines(m->param_table.total, sizeof(float));
    m->params.blocks = xcalloc(L, sizeof(BlockParams));
    set_views(&m->params, m->params.blocks, sizeof(BlockParams), &PARAMS, &m->param_table, m->params_memory, cfg,
              ALL_ROWS);
    act_table(&m->act_table, cfg, max_batch);
    m->acts_memory = xcalloc_lines(m->act_table.total, sizeof(float));
    m->acts.blocks = xcalloc(L, sizeof(BlockActs));
    set_views(&m->acts, m->acts.blocks, sizeof(BlockActs), &ACTS, &m->act_table, m->acts_memory, cfg, ALL_ROWS);
    if (with_grads) {
        m->grads.blocks = xcalloc(L, sizeof(BlockParams));
        m->grads_size = m->param_table.total;
        m->grads_memory = xcalloc_lines(m->grads_size, sizeof(float));
        set_views(&m->grads, m->grads.blocks, sizeof(BlockParams), &PARAMS, &m->param_table, m->grads_memory, cfg,
                  ALL_ROWS);
        grad_act_table(&m->grad_act_table, cfg, max_batch);
        m->grad_acts_memory = xcalloc_lines(m->grad_act_table.total, sizeof(float));
        set_views(&m->grad_acts, NULL, 0, &GRAD_ACTS, &m->grad_act_table, m->grad_acts_memory, cfg, ALL_ROWS);
    }
    share_logits(&m->acts, &m->grad_acts, with_grads);
    // Tied (gpt): the head is tok_emb, and the head's gradient adds to tok_emb's.
    if (m->parts.tied_head) {
        m->params.head_weight = m->params.tok_emb;
        m->grads.head_weight = m->grads.tok_emb;
    }
    size_t positions = (size_t)max_batch * cfg->block_size;
    m->inputs = xcalloc(positions, sizeof(int));
    m->targets = xcalloc(positions, sizeof(int));
}

// blocks_region: where the blocks' parameters sit in m's table: after the
// front's (tok_emb, pos_emb) "*front" floats, one block's "*block" after
// another, then the back's (ln_f, head).
static void blocks_region(const Model *m, size_t *front, size_t *block) {
    const TensorTable *t = &m->param_table;
    size_t first = SIZE_MAX, end = 0;
    for (int i = 0; i < t->count; i++) {
        if (strncmp(t->specs[i].name, "blocks.", 7) != 0) continue;
        if (t->specs[i].offset < first) first = t->specs[i].offset;
        end = t->specs[i].offset + t->specs[i].size;
    }
    assert(first < end);
    *front = first;
    *block = (end - first) / (size_t)m->n_layer;
}

// The gradients of a slice that hands its blocks' on: the front's, then one
// block's worth, then the back's. Every block's views point at the one
// block's worth.
// (slice->blocks_front and block_floats already say where m's blocks are.)
static void set_handing_views(Model *slice, const Model *m) {
    const TensorTable *t = &m->param_table;
    const ModelConfig *cfg = &m->config;
    const size_t front = slice->blocks_front, block = slice->block_floats;
    float *mine = slice->grads_memory + front;
    int next = 0;
    point_entries(&slice->grads, PARAMS.front, PARAMS.n_front, t, &next, slice->grads_memory, 0, cfg, ALL_ROWS);
    for (int l = 0; l < m->n_layer; l++)
        point_entries(&slice->grads.blocks[l], PARAMS.block, PARAMS.n_block, t, &next, mine, front + (size_t)l * block,
                      cfg, ALL_ROWS);
    point_entries(&slice->grads, PARAMS.back, PARAMS.n_back, t, &next, mine + block,
                  front + (size_t)m->n_layer * block, cfg, ALL_ROWS);
}

size_t model_slice_bytes(const Model *m, bool hand_on) {
    if (!hand_on) return m->param_table.total * sizeof(float);
    size_t front, block;
    blocks_region(m, &front, &block);
    const size_t back = m->param_table.total - front - (size_t)m->n_layer * block;
    return (front + block + back) * sizeof(float);
}

// A slice shares its model's weights and activation buffers (their rows
// first_row onwards) and has gradients of its own.
void model_slice_init(Model *slice, Model *m, int first_row, int rows, const Model *after) {
    assert(m->grads_memory && first_row >= 0 && rows >= 1 && first_row + rows <= m->max_batch);
    const ModelConfig *cfg = &m->config;
    const Rows mine = {(size_t)first_row, (size_t)m->max_batch};
    *slice = *m;
    slice->max_batch = rows;
    slice->acts.blocks = xcalloc((size_t)m->n_layer, sizeof(BlockActs));
    set_views(&slice->acts, slice->acts.blocks, sizeof(BlockActs), &ACTS, &m->act_table, m->acts_memory, cfg, mine);
    set_views(&slice->grad_acts, NULL, 0, &GRAD_ACTS, &m->grad_act_table, m->grad_acts_memory, cfg, mine);
    share_logits(&slice->acts, &slice->grad_acts, true);
    slice->grads.blocks = xcalloc((size_t)m->n_layer, sizeof(BlockParams));
    const bool hand_on = after != NULL;
    slice->grads_size = hand_on ? model_slice_bytes(m, true) / sizeof(float) : m->param_table.total;
    slice->grads_memory = xcalloc_lines(slice->grads_size, sizeof(float));
    if (hand_on) {
        blocks_region(m, &slice->blocks_front, &slice->block_floats);
        set_handing_views(slice, m);
        slice->hands_to = m;
        slice->after = after;
    } else {
        set_views(&slice->grads, slice->grads.blocks, sizeof(BlockParams), &PARAMS, &m->param_table,
                  slice->grads_memory, cfg, ALL_ROWS);
    }
    if (m->parts.tied_head) slice->grads.head_weight = slice->grads.tok_emb;
    slice->inputs = m->inputs + (size_t)first_row * cfg->block_size;
    slice->targets = m->targets + (size_t)first_row * cfg->block_size;
}

void model_slice_free(Model *slice) {
    xfree_lines(slice->grads_memory);
    free(slice->grads.blocks);
    free(slice->acts.blocks);
    memset(slice, 0, sizeof *slice);
}

void model_free(Model *m) {
    free(m->targets);
    free(m->inputs);
    xfree_lines(m->grad_acts_memory);
    table_free(&m->grad_act_table);
    free(m->grads.blocks);
    xfree_lines(m->grads_memory);
    free(m->acts.blocks);
    xfree_lines(m->acts_memory);
    table_free(&m->act_table);
    free(m->params.blocks);
    xfree_lines(m->params_memory);
    table_free(&m->param_table);
    memset(m, 0, sizeof *m);
}

// Every tensor is drawn in table order, element by element, from one
// stream, so a seed gives the same weights on any machine. Each tensor's
// rule is its entry's ParamInit (PARAMS_FRONT, ... above).
void model_init_weights(Model *m, Rng *rng) {
    const bool gpt = m->config.arch != ARCH_CARD;
    // card: nn.Linear draws weight and bias from U(-1/sqrt(in), 1/sqrt(in)),
    // which keeps each layer's output variance close to its input's;
    // nn.Embedding draws from N(0, 1).
    const float linear_bound = 1.0f / sqrtf((float)m->config.n_embd);
    // gpt, gpt2: GPT-2's scheme: N(0, 0.02), LayerNorm weights 1, biases 0
    // (drawing nothing, so a gpt2's weights are its gpt twin's). Each block adds
    // two branches to the stream, so the projections that end them start
    // 1/sqrt(2L) smaller, and the stream's variance does not grow with depth.
    const float branch_end_std = 0.02f / sqrtf(2.0f * (float)m->n_layer);
    for (int i = 0; i < m->param_table.count; i++) {
        const TensorSpec *spec = &m->param_table.specs[i];
        const ParamInit init = (ParamInit)spec->init;
        float *w = m->params_memory + spec->offset;
        for (size_t j = 0; j < spec->size; j++) {
            if (!gpt) w[j] = init == INIT_EMBEDDING ? rng_normal(rng) : linear_bound * (2.0f * rng_uniform(rng) - 1.0f);
            else if (init == INIT_ONES) w[j] = 1.0f;
            else if (init == INIT_BIAS) w[j] = 0.0f;
            else w[j] = (init == INIT_BRANCH_END ? branch_end_std : 0.02f) * rng_normal(rng);
        }
    }
}

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

// ===========================================================================
// Finding a NaN.

// first_beyond: the index of the first value of x[n] that is NaN or beyond
// +-"limit" (with limit FLT_MAX: the first NaN or infinity), or n.
// Training asks twice a step and almost always finds nothing, so blocks of
// 1024 are first tested with a loop that vectorises (an OR of "not
// |x| <= limit", which is also true for NaN; a loop that stops at the first
// hit cannot be vectorised), and only a block that holds one is searched
// number by number.
static size_t first_beyond(const float *x, size_t n, float limit) {
    for (size_t block = 0; block < n; block += 1024) {
        size_t end = n - block < 1024 ? n : block + 1024;
        int found = 0;
        for (size_t i = block; i < end; i++) found |= !(fabsf(x[i]) <= limit);
        if (found)
            for (size_t i = block; i < end; i++)
                if (!(fabsf(x[i]) <= limit)) return i;
    }
    return n;
}

static int table_find_beyond(const TensorTable *t, const float *memory, float limit, size_t *element) {
    for (int i = 0; i < t->count; i++) {
        const TensorSpec *spec = &t->specs[i];
        size_t at = first_beyond(memory + spec->offset, spec->size, limit);
        if (at < spec->size) {
            *element = at;
            return i;
        }
    }
    return -1;
}

int model_find_nonfinite(const Model *m, const float *memory, size_t *element) {
    return table_find_beyond(&m->param_table, memory, FLT_MAX, element);
}

int model_find_weight_beyond(const Model *m, size_t *element) {
    return table_find_beyond(&m->param_table, m->params_memory, MODEL_MAX_WEIGHT, element);
}

int model_find_nonfinite_act(const Model *m, size_t *element) {
    return table_find_beyond(&m->act_table, m->acts_memory, FLT_MAX, element);
}
