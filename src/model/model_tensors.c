// model_tensors.c: what a model is made of (see model.h): one list of
// every tensor of each buffer (parameters, activations, their gradients),
// the memory those lists lay out and the views into it, the slices of a
// batch, the first weights, and the search for a NaN.
//
// Reading order: file 12, after model_config.c and before which_kernels.h;
// the blocks (block.c) and model.c read and write the tensors laid out here.
#include "model.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

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

// Each search is tensor_table.h's table_find_beyond over one buffer:
// with limit FLT_MAX it finds the first NaN or infinity.

int model_find_nonfinite(const Model *m, const float *memory, size_t *element) {
    return table_find_beyond(&m->param_table, memory, FLT_MAX, element);
}

int model_find_weight_beyond(const Model *m, size_t *element) {
    return table_find_beyond(&m->param_table, m->params_memory, MODEL_MAX_WEIGHT, element);
}

int model_find_nonfinite_act(const Model *m, size_t *element) {
    return table_find_beyond(&m->act_table, m->acts_memory, FLT_MAX, element);
}
