// model.c: the parameter and activation tables, and the passes that chain
// the layers (see model.h for the model in six lines).
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "crossentropy.h"
#include "encoder.h"
#include "linear.h"

// Upper bound on any one size, so products of three sizes cannot overflow
// size_t and absurd flags are refused before anything is allocated.
#define MAX_DIM (1 << 20)

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
    return true;
}

// Saturating size_t arithmetic for model_memory_bytes: a result that does
// not fit becomes SIZE_MAX and stays there, and SIZE_MAX bytes never fit in
// memory, so an overflow is refused like any other model too large.
// (B*NH*T*T alone can reach 2^68 within the flags' ranges.)
static size_t sat_mul(size_t a, size_t b) {
    size_t product;
    return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}
static size_t sat_add(size_t a, size_t b) {
    size_t sum;
    return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

// model_memory_bytes: what model_init allocates, buffer by buffer (the
// tables are in model.h and README's "Every tensor's size"):
//   parameters  2VC + TC + 4CC + C + V floats        (and as many gradients)
//   activations BT(C + 3C + C + C + 2V + 1 + 2C) + 2 B NH T T floats
//   activation gradients: the prefix up to probs, BT(6C + V) + B NH T T floats
//   scratch     max(3C, V) C floats; inputs, targets: 2BT ints
// A test checks the sum against model_init's real allocations.
size_t model_memory_bytes(const ModelConfig *cfg, int max_batch, bool with_grads) {
    size_t V = (size_t)cfg->vocab_size, T = (size_t)cfg->block_size, C = (size_t)cfg->n_embd;
    size_t NH = (size_t)cfg->n_head, B = (size_t)max_batch;
    size_t BT = sat_mul(B, T);
    size_t attention = sat_mul(sat_mul(B, NH), sat_mul(T, T));  // one [B,NH,T,T] tensor
    size_t params = sat_add(sat_add(sat_mul(2 * V, C), sat_mul(T, C)), sat_add(sat_mul(4 * C, C), C + V));
    size_t acts = sat_add(sat_mul(BT, sat_add(8 * C, 2 * V + 1)), sat_mul(2, attention));
    size_t floats = sat_add(params, acts);
    if (with_grads) {
        size_t grad_acts = sat_add(sat_mul(BT, 6 * C + V), attention);
        floats = sat_add(floats, sat_add(params, grad_acts));
    }
    floats = sat_add(floats, sat_mul(3 * C > V ? 3 * C : V, C));
    return sat_add(sat_mul(floats, sizeof(float)), sat_mul(sat_mul(2, BT), sizeof(int)));
}

bool model_check_memory(const ModelConfig *cfg, int max_batch, bool with_grads, Error *err) {
    size_t limit = memory_limit_bytes();
    size_t need = model_memory_bytes(cfg, max_batch, with_grads);
    if (limit == 0 || need <= limit) return true;
    char need_text[32];
    if (need == SIZE_MAX) snprintf(need_text, sizeof need_text, "more than 18 EB");
    else snprintf(need_text, sizeof need_text, "%.1f GB", (double)need / 1e9);
    return error_set(err, "--batch %d --context %d --embd %d --heads %d (with %d characters) need %s for the model%s, more than the %.1f GB of memory here; use a smaller --batch, --context or --embd",
                     max_batch, cfg->block_size, cfg->n_embd, cfg->n_head, cfg->vocab_size, need_text,
                     with_grads ? " and its gradients" : "", (double)limit / 1e9);
}

// Fill one table entry (a 1-d tensor when cols == 0) and advance the
// running offset. Sizes are size_t: B*NH*T*T overflows an int long before
// it overflows memory.
static size_t add_tensor(TensorSpec *spec, const char *name, size_t rows, size_t cols, size_t offset) {
    spec->name = name;
    spec->ndim = cols > 0 ? 2 : 1;
    spec->shape[0] = rows;
    spec->shape[1] = cols;
    spec->offset = offset;
    spec->size = rows * (cols > 0 ? cols : 1);
    return offset + spec->size;
}

size_t param_table(const ModelConfig *cfg, TensorSpec specs[NUM_PARAM_TENSORS]) {
    size_t V = (size_t)cfg->vocab_size, T = (size_t)cfg->block_size, C = (size_t)cfg->n_embd;
    size_t at = 0;
    at = add_tensor(&specs[PARAM_TOK_EMB], "tok_emb.weight", V, C, at);
    at = add_tensor(&specs[PARAM_POS_EMB], "pos_emb.weight", T, C, at);
    at = add_tensor(&specs[PARAM_Q_WEIGHT], "blocks.0.attn.q.weight", C, C, at);
    at = add_tensor(&specs[PARAM_K_WEIGHT], "blocks.0.attn.k.weight", C, C, at);
    at = add_tensor(&specs[PARAM_V_WEIGHT], "blocks.0.attn.v.weight", C, C, at);
    at = add_tensor(&specs[PARAM_PROJ_WEIGHT], "blocks.0.attn.proj.weight", C, C, at);
    at = add_tensor(&specs[PARAM_PROJ_BIAS], "blocks.0.attn.proj.bias", C, 0, at);
    at = add_tensor(&specs[PARAM_HEAD_WEIGHT], "head.weight", V, C, at);
    at = add_tensor(&specs[PARAM_HEAD_BIAS], "head.bias", V, 0, at);
    return at;
}

// Activations are [B,T,...] with T = block_size: the largest forward pass.
// Everything from probs on has no gradient, so the gradient buffer is the
// prefix of this layout that ends where probs begins.
size_t act_table(const ModelConfig *cfg, int B, TensorSpec specs[NUM_ACT_TENSORS]) {
    size_t T = (size_t)cfg->block_size, C = (size_t)cfg->n_embd, NH = (size_t)cfg->n_head;
    size_t V = (size_t)cfg->vocab_size, BT = (size_t)B * T;
    size_t at = 0;
    at = add_tensor(&specs[ACT_ENCODED], "encoded", BT, C, at);
    at = add_tensor(&specs[ACT_QKV], "qkv", BT, 3 * C, at);
    at = add_tensor(&specs[ACT_ATTN_WEIGHTS], "attn_weights", (size_t)B * NH, T * T, at);
    at = add_tensor(&specs[ACT_ATTN_OUT], "attn_out", BT, C, at);
    at = add_tensor(&specs[ACT_PROJ_OUT], "proj_out", BT, C, at);
    at = add_tensor(&specs[ACT_LOGITS], "logits", BT, V, at);
    at = add_tensor(&specs[ACT_PROBS], "probs", BT, V, at);
    at = add_tensor(&specs[ACT_LOSSES], "losses", BT, 0, at);
    at = add_tensor(&specs[ACT_DROPOUT_SCALES], "dropout_scales", (size_t)B * NH, T * T, at);
    at = add_tensor(&specs[ACT_KEYS_T], "keys_t", (size_t)B * NH, (C / NH) * T, at);
    at = add_tensor(&specs[ACT_VALUES_T], "values_t", (size_t)B * NH, (C / NH) * T, at);
    return at;
}

static ParamTensors param_views(float *memory, const TensorSpec specs[NUM_PARAM_TENSORS]) {
    ParamTensors p;
    p.tok_emb = memory + specs[PARAM_TOK_EMB].offset;
    p.pos_emb = memory + specs[PARAM_POS_EMB].offset;
    p.qkv_weight = memory + specs[PARAM_Q_WEIGHT].offset;  // q, then k and v right after it
    p.proj_weight = memory + specs[PARAM_PROJ_WEIGHT].offset;
    p.proj_bias = memory + specs[PARAM_PROJ_BIAS].offset;
    p.head_weight = memory + specs[PARAM_HEAD_WEIGHT].offset;
    p.head_bias = memory + specs[PARAM_HEAD_BIAS].offset;
    return p;
}

static ActTensors act_views(float *memory, const TensorSpec specs[NUM_ACT_TENSORS], bool is_gradient) {
    ActTensors a;
    a.encoded = memory + specs[ACT_ENCODED].offset;
    a.qkv = memory + specs[ACT_QKV].offset;
    a.attn_weights = memory + specs[ACT_ATTN_WEIGHTS].offset;
    a.attn_out = memory + specs[ACT_ATTN_OUT].offset;
    a.proj_out = memory + specs[ACT_PROJ_OUT].offset;
    a.logits = memory + specs[ACT_LOGITS].offset;
    a.probs = is_gradient ? NULL : memory + specs[ACT_PROBS].offset;
    a.losses = is_gradient ? NULL : memory + specs[ACT_LOSSES].offset;
    a.dropout_scales = is_gradient ? NULL : memory + specs[ACT_DROPOUT_SCALES].offset;
    a.keys_t = is_gradient ? NULL : memory + specs[ACT_KEYS_T].offset;
    a.values_t = is_gradient ? NULL : memory + specs[ACT_VALUES_T].offset;
    return a;
}

void model_init(Model *m, const ModelConfig *cfg, int max_batch, bool with_grads) {
    memset(m, 0, sizeof *m);
    m->config = *cfg;
    m->max_batch = max_batch;
    m->num_params = param_table(cfg, m->param_specs);
    m->params_memory = xcalloc(m->num_params, sizeof(float));
    m->params = param_views(m->params_memory, m->param_specs);
    m->num_acts = act_table(cfg, max_batch, m->act_specs);
    m->acts_memory = xcalloc(m->num_acts, sizeof(float));
    m->acts = act_views(m->acts_memory, m->act_specs, false);
    if (with_grads) {
        m->grads_memory = xcalloc(m->num_params, sizeof(float));
        m->grads = param_views(m->grads_memory, m->param_specs);
        m->grad_acts_memory = xcalloc(m->act_specs[ACT_PROBS].offset, sizeof(float));
        m->grad_acts = act_views(m->grad_acts_memory, m->act_specs, true);
    }
    int widest = 3 * cfg->n_embd > cfg->vocab_size ? 3 * cfg->n_embd : cfg->vocab_size;
    m->weight_scratch_size = (size_t)widest * cfg->n_embd;
    m->weight_scratch = xcalloc(m->weight_scratch_size, sizeof(float));
    size_t positions = (size_t)max_batch * cfg->block_size;
    m->inputs = xcalloc(positions, sizeof(int));
    m->targets = xcalloc(positions, sizeof(int));
}

void model_free(Model *m) {
    free(m->targets);
    free(m->inputs);
    free(m->weight_scratch);
    free(m->grad_acts_memory);
    free(m->grads_memory);
    free(m->acts_memory);
    free(m->params_memory);
    memset(m, 0, sizeof *m);
}

void model_init_weights(Model *m, Rng *rng) {
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const TensorSpec *spec = &m->param_specs[i];
        float *w = m->params_memory + spec->offset;
        bool embedding = i == PARAM_TOK_EMB || i == PARAM_POS_EMB;
        // nn.Linear draws weight and bias from U(-1/sqrt(in), 1/sqrt(in)),
        // which keeps each layer's output variance close to its input's.
        float bound = 1.0f / sqrtf((float)m->config.n_embd);
        for (size_t j = 0; j < spec->size; j++)
            w[j] = embedding ? rng_normal(rng) : bound * (2.0f * rng_uniform(rng) - 1.0f);
    }
}

float model_forward(Model *m, const int *inputs, const int *targets, int B, int T, bool training,
                    uint64_t dropout_key) {
    const ModelConfig *cfg = &m->config;
    int C = cfg->n_embd, NH = cfg->n_head, V = cfg->vocab_size, BT = B * T;
    ParamTensors p = m->params;
    ActTensors a = m->acts;
    float dropout_p = training ? cfg->dropout : 0.0f;

    memcpy(m->inputs, inputs, (size_t)BT * sizeof(int));
    if (targets) memcpy(m->targets, targets, (size_t)BT * sizeof(int));
    m->last_B = B;
    m->last_T = T;
    m->last_training = training;

    encoder_forward(a.encoded, inputs, p.tok_emb, p.pos_emb, B, T, C);
    linear_forward(a.qkv, a.encoded, p.qkv_weight, NULL, m->weight_scratch, BT, C, 3 * C);
    attention_forward(a.attn_out, a.attn_weights, a.dropout_scales, a.keys_t, a.values_t, a.qkv, B, T, C, NH,
                      dropout_p, dropout_key);
    linear_forward(a.proj_out, a.attn_out, p.proj_weight, p.proj_bias, m->weight_scratch, BT, C, C);
    linear_forward(a.logits, a.proj_out, p.head_weight, p.head_bias, m->weight_scratch, BT, C, V);
    if (!targets) return 0.0f;
    return crossentropy_forward(a.losses, a.probs, a.logits, targets, BT, V);
}

void transposed_weights_init(TransposedWeights *w, const Model *m) {
    const int C = m->config.n_embd, V = m->config.vocab_size;
    w->memory = xmalloc((size_t)(4 * C + V) * C * sizeof(float));
    w->qkv_weight = w->memory;
    w->proj_weight = w->qkv_weight + (size_t)3 * C * C;
    w->head_weight = w->proj_weight + (size_t)C * C;
    linear_transpose_weight(w->qkv_weight, m->params.qkv_weight, C, 3 * C);
    linear_transpose_weight(w->proj_weight, m->params.proj_weight, C, C);
    linear_transpose_weight(w->head_weight, m->params.head_weight, C, V);
}

void transposed_weights_free(TransposedWeights *w) {
    free(w->memory);
    w->memory = w->qkv_weight = w->proj_weight = w->head_weight = NULL;
}

// One row through the same kernels as model_forward (the fast matmul with
// one row adds the same terms in the same order as with many), so the bits
// agree.
const float *model_forward_position(Model *m, const TransposedWeights *wt, int token, int t) {
    const ModelConfig *cfg = &m->config;
    const int C = cfg->n_embd, NH = cfg->n_head, V = cfg->vocab_size, T = cfg->block_size, HS = C / NH;
    ParamTensors p = m->params;
    ActTensors a = m->acts;
    float *encoded_t = a.encoded + (size_t)t * C;
    float *qkv_t = a.qkv + (size_t)t * 3 * C;
    float *attn_out_t = a.attn_out + (size_t)t * C;
    float *proj_out_t = a.proj_out + (size_t)t * C;
    float *logits_t = a.logits + (size_t)t * V;

    encoder_forward(encoded_t, &token, p.tok_emb, p.pos_emb + (size_t)t * C, 1, 1, C);
    linear_forward_transposed(qkv_t, encoded_t, wt->qkv_weight, NULL, 1, C, 3 * C);
    for (int h = 0; h < NH; h++) {
        // Add this position's key and value to the cache, then attend.
        transpose_head(a.keys_t + (size_t)h * HS * T, a.values_t + (size_t)h * HS * T, a.qkv, t, t + 1, T, C, HS, h);
        attention_forward_row(a.attn_out, a.attn_weights, NULL, a.keys_t, a.qkv, 0, h, t, T, C, NH, 0.0f, 0);
    }
    linear_forward_transposed(proj_out_t, attn_out_t, wt->proj_weight, p.proj_bias, 1, C, C);
    linear_forward_transposed(logits_t, proj_out_t, wt->head_weight, p.head_bias, 1, C, V);
    return logits_t;
}

// Split over threads: at the L size of `make bench` this is 30 MB of memory
// to clear every step, too much for one core's bandwidth.
static void zero_floats(float *p, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = 0.0f;
}

// Only the parameter gradients: backward adds to those, but writes every
// activation gradient before anything reads it (each activation feeds one
// layer, so its gradient has one source; see crossentropy.h).
void model_zero_grad(Model *m) { zero_floats(m->grads_memory, m->num_params); }

// The forward pass read backwards: each layer turns the gradient of its
// output into gradients of its inputs and parameters.
void model_backward(Model *m) {
    const ModelConfig *cfg = &m->config;
    int B = m->last_B, T = m->last_T, BT = B * T;
    int C = cfg->n_embd, NH = cfg->n_head, V = cfg->vocab_size;
    float dropout_p = m->last_training ? cfg->dropout : 0.0f;
    ParamTensors p = m->params, g = m->grads;
    ActTensors a = m->acts, da = m->grad_acts;

    crossentropy_backward(da.logits, a.probs, m->targets, BT, V);
    linear_backward(da.proj_out, g.head_weight, g.head_bias, da.logits, a.proj_out, p.head_weight, BT, C, V);
    linear_backward(da.attn_out, g.proj_weight, g.proj_bias, da.proj_out, a.attn_out, p.proj_weight, BT, C, C);
    attention_backward(da.qkv, da.attn_weights, da.attn_out, a.qkv, a.attn_weights, a.dropout_scales, a.values_t, B,
                       T, C, NH, dropout_p);
    linear_backward(da.encoded, g.qkv_weight, NULL, da.qkv, a.encoded, p.qkv_weight, BT, C, 3 * C);
    encoder_backward(g.tok_emb, g.pos_emb, da.encoded, m->inputs, B, T, C);
}

void model_sgd_step(Model *m, float lr) {
    float *w = m->params_memory;
    const float *grad = m->grads_memory;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m->num_params; i++) w[i] -= lr * grad[i];
}

// first_nonfinite: the index of the first NaN or infinity in x[n], or n.
// Training asks twice a step and almost always finds nothing, so blocks of
// 1024 are first tested with a loop that vectorises (an OR over "exponent
// bits all ones", which is what NaN and infinity have in common; a loop
// that stops at the first hit cannot be vectorised), and only a block that
// holds one is searched number by number.
static size_t first_nonfinite(const float *x, size_t n) {
    for (size_t block = 0; block < n; block += 1024) {
        size_t end = n - block < 1024 ? n : block + 1024;
        uint32_t found = 0;
        for (size_t i = block; i < end; i++) {
            uint32_t bits;
            memcpy(&bits, &x[i], sizeof bits);
            found |= (bits & 0x7f800000u) == 0x7f800000u;
        }
        if (found)
            for (size_t i = block; i < end; i++)
                if (!isfinite(x[i])) return i;
    }
    return n;
}

int model_find_nonfinite(const Model *m, const float *memory, size_t *element) {
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        const TensorSpec *spec = &m->param_specs[t];
        size_t i = first_nonfinite(memory + spec->offset, spec->size);
        if (i < spec->size) {
            *element = i;
            return t;
        }
    }
    return -1;
}

int model_find_nonfinite_act(const Model *m, size_t *element) {
    for (int t = 0; t < NUM_ACT_TENSORS; t++) {
        const TensorSpec *spec = &m->act_specs[t];
        size_t i = first_nonfinite(m->acts_memory + spec->offset, spec->size);
        if (i < spec->size) {
            *element = i;
            return t;
        }
    }
    return -1;
}
