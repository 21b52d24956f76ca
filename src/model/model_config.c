// model_config.c: what a model's configuration means, and whether it can
// be built (see model.h for both architectures in a few lines): the names
// of its choices, the parts each architecture has (model_parts), the
// checks on its sizes and switches, and the memory it needs, summed from
// the tables of model_tensors.c.
//
// Reading order: file 12, after model.h and before model_tensors.c, whose
// tables list a tensor when the model has its part.
#include "model.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
// The memory a model needs.

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
