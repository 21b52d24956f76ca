// model_tensors.c: what a model is made of (see model.h for both
// architectures in a few lines): its configuration checked, one list of
// every tensor of each buffer (parameters, activations, their gradients),
// the memory those lists lay out and the views into it, the slices of a
// batch, the first weights, and the search for a NaN.
//
// Reading order: file 12, after model.h and before which_kernels.h; the
// blocks (block.c) and model.c read and write the tensors laid out here.
#include "model.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

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
