// hf_gpt2.c: a Hugging Face GPT-2 directory read as a gpt2 (see hf_gpt2.h).
//
// Reading order: file 27b. In the order hf_gpt2_load runs: config.json into
// a ModelConfig; every tensor name of model.safetensors mapped onto the
// parameter table and its shape checked, and every parameter found, before
// anything large is read; then each tensor read into place, a Conv1D
// weight transposed on the way; the tied head checked; the tokenizer.
#include "hf_gpt2.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "fast.h"
#include "gpt2_tokenizer.h"
#include "json.h"
#include "layernorm.h"
#include "linear.h"
#include "safetensors.h"

// What the weights file is called in messages ("'<dir>/model.safetensors'
// is not a valid tinygpt Hugging Face GPT-2 model: ...").
#define WEIGHTS_KIND "Hugging Face GPT-2 model"
// The largest config.json read: Hugging Face's configs are a few KB.
#define HF_CONFIG_MAX_BYTES (1 << 20)

// ===========================================================================
// config.json

// config_int: config.json's "key", a whole number in [1, max], into "*out".
static bool config_int(const JsonValue *root, const char *path, const char *key, int max, int *out, Error *err) {
    const JsonValue *v = json_get(root, key);
    uint64_t value;
    if (!v)
        return error_set(err, "'%s': \"%s\" is missing; a GPT-2 config.json has it (Hugging Face's gpt2 repository's does)",
                         path, key);
    if (!json_as_uint(v, &value) || value < 1 || value > (uint64_t)max)
        return error_set(err, "'%s': \"%s\" must be a whole number in [1, %d]", path, key, max);
    *out = (int)value;
    return true;
}

// The activation_function names of Hugging Face's GPT-2 and the GELU each
// is: "gelu_new" (GPT-2's own, and Hugging Face's default), and
// "gelu_pytorch_tanh", the same formula in PyTorch's kernel, are the tanh
// form; "gelu" is the exact one.
static bool config_activation(const JsonValue *root, const char *path, MlpKind *act, Error *err) {
    const JsonValue *v = json_get(root, "activation_function");
    if (!v || json_string_is(v, "gelu_new") || json_string_is(v, "gelu_pytorch_tanh")) *act = MLP_GELU_TANH;
    else if (json_string_is(v, "gelu")) *act = MLP_GELU;
    else
        return error_set(err, "'%s': \"activation_function\" must be \"gelu_new\" or \"gelu_pytorch_tanh\" (GELU's tanh form, GPT-2's) or \"gelu\" (exact); tinygpt's gpt2 has no other",
                         path);
    return true;
}

// read_config: DIR/config.json as the gpt2 it describes (dropout 0: the
// model is read to be run; a fine-tune says its own). Keys it does not
// name (Hugging Face writes many) are ignored; layer_norm_epsilon and
// activation_function may be absent, and then are Hugging Face's defaults
// (1e-5, "gelu_new").
static bool read_config(const char *dir, ModelConfig *cfg, Error *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", dir);
    // Its size first: a config.json is a few KB (GPT-2's, under 1 KB), and a
    // huge file is refused before it takes its size in memory.
    struct stat info;
    if (stat(path, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > HF_CONFIG_MAX_BYTES)
        return error_set(err, "'%s' is %lld bytes, more than any config.json (at most %d); it is not GPT-2's: download it again",
                         path, (long long)info.st_size, HF_CONFIG_MAX_BYTES);
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, err)) return false;
    JsonValue *root = NULL;
    Error json_err;
    bool ok = json_parse(text, len, &root, &json_err);
    free(text);
    if (!ok) return error_set(err, "'%s' is not JSON (%s); download it again", path, json_err.msg);
    *cfg = (ModelConfig){.arch = ARCH_GPT2, .dropout = 0.0f};
    const JsonValue *type = json_get(root, "model_type");
    const JsonValue *eps = json_get(root, "layer_norm_epsilon");
    const JsonValue *inner = json_get(root, "n_inner");
    const JsonValue *tied = json_get(root, "tie_word_embeddings");
    if (root->type != JSON_OBJECT) ok = error_set(err, "'%s' is not a JSON object of settings; download it again", path);
    else if (type && !json_string_is(type, "gpt2"))
        ok = error_set(err, "'%s': \"model_type\" is not \"gpt2\"; tinygpt reads GPT-2's directories only", path);
    else
        ok = config_int(root, path, "n_layer", MODEL_MAX_LAYERS, &cfg->n_layer, err) &&
             config_int(root, path, "n_head", 1 << 16, &cfg->n_head, err) &&
             config_int(root, path, "n_embd", 1 << 16, &cfg->n_embd, err) &&
             config_int(root, path, "n_positions", 1 << 16, &cfg->block_size, err) &&
             config_int(root, path, "vocab_size", 1 << 20, &cfg->vocab_size, err) &&
             config_activation(root, path, &cfg->mlp, err);
    // tinygpt's LayerNorm has one eps, LAYERNORM_EPS; GPT-2's is the same.
    if (ok && eps && !(eps->type == JSON_NUMBER && (float)eps->number == LAYERNORM_EPS))
        ok = error_set(err, "'%s': \"layer_norm_epsilon\" must be 1e-05, the eps of tinygpt's LayerNorm (and GPT-2's)", path);
    // The MLP's width: null (or absent) means 4 n_embd, the only one tinygpt has.
    uint64_t width = 0;
    if (ok && inner && inner->type != JSON_NULL && !(json_as_uint(inner, &width) && width == 4 * (uint64_t)cfg->n_embd))
        ok = error_set(err, "'%s': \"n_inner\" must be null or 4 n_embd (%d); tinygpt's MLP is 4 n_embd wide", path,
                       4 * cfg->n_embd);
    // Absent or true: the head is wte, as in every GPT-2. False: a head of
    // its own, which tinygpt's gpt2 (GPT-2's architecture) does not have.
    if (ok && tied && !(tied->type == JSON_BOOL && tied->boolean))
        ok = error_set(err, "'%s': \"tie_word_embeddings\" is not true: the model's head (lm_head.weight) is not its embedding (wte), but tinygpt's gpt2 ties them, as GPT-2 does; tinygpt reads GPT-2's tied models only",
                       path);
    if (ok && cfg->n_embd % cfg->n_head != 0)
        ok = error_set(err, "'%s': \"n_head\" %d does not divide \"n_embd\" %d", path, cfg->n_head, cfg->n_embd);
    Error why;
    if (ok && !model_check_config(cfg, &why))
        ok = error_set(err, "'%s' describes a model tinygpt cannot build: %s", path, why.msg);
    json_free(root);
    return ok;
}

// ===========================================================================
// The names.

// A name of GPT-2's and where it goes in tinygpt's table.
typedef struct {
    const char *hf;    // GPT-2's name; for a block's, what follows "h.{i}."
    const char *ours;  // tinygpt's; for a block's, what follows "blocks.{i}."
    int parts;         // our adjacent tensors it fills: 3 for c_attn (q, k, v), else 1
    bool conv1d;       // a Conv1D weight [in, out], transposed into our [out, in]
} NameMap;

static const NameMap OUTSIDE_BLOCKS[] = {
    {"wte.weight", "tok_emb.weight", 1, false},
    {"wpe.weight", "pos_emb.weight", 1, false},
    {"ln_f.weight", "ln_f.weight", 1, false},
    {"ln_f.bias", "ln_f.bias", 1, false},
};
static const NameMap IN_BLOCKS[] = {
    {"ln_1.weight", "ln1.weight", 1, false},
    {"ln_1.bias", "ln1.bias", 1, false},
    {"attn.c_attn.weight", "attn.q.weight", 3, true},  // q, k, v adjacent: [Wq;Wk;Wv] = W^T
    {"attn.c_attn.bias", "attn.q.bias", 3, false},      // [bq;bk;bv], as it lies
    {"attn.c_proj.weight", "attn.proj.weight", 1, true},
    {"attn.c_proj.bias", "attn.proj.bias", 1, false},
    {"ln_2.weight", "ln2.weight", 1, false},
    {"ln_2.bias", "ln2.bias", 1, false},
    {"mlp.c_fc.weight", "mlp.fc.weight", 1, true},
    {"mlp.c_fc.bias", "mlp.fc.bias", 1, false},
    {"mlp.c_proj.weight", "mlp.proj.weight", 1, true},
    {"mlp.c_proj.bias", "mlp.proj.bias", 1, false},
};
// A block's causal-mask buffers: recognised and skipped.
static const char *const MASK_BUFFERS[] = {"attn.bias", "attn.masked_bias"};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

// What one tensor of the file is.
typedef enum { NAME_UNKNOWN, NAME_MAPPED, NAME_MASK, NAME_LM_HEAD, NAME_PAST_N_LAYER } NameKind;

// block_number: "h.<i>.<rest>" -> i (decimal, no leading zero, < 2^20) and
// "*rest"; false for a name of any other form.
static bool block_number(const char *name, int *block, const char **rest) {
    if (strncmp(name, "h.", 2) != 0) return false;
    const char *p = name + 2;
    int value = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) value = value * 10 + (*p - '0');
    if (digits == 0 || *p != '.' || (digits > 1 && name[2] == '0')) return false;
    *block = value;
    *rest = p + 1;
    return true;
}

// classify: what tensor "name" of the file is, for a model of "n_layer"
// blocks; for NAME_MAPPED, its map and block (-1 outside the blocks).
static NameKind classify(const char *name, int n_layer, const NameMap **map, int *block) {
    if (strcmp(name, "lm_head.weight") == 0) return NAME_LM_HEAD;
    const char prefix[] = "transformer.";
    if (strncmp(name, prefix, sizeof prefix - 1) == 0) name += sizeof prefix - 1;
    *block = -1;
    for (size_t i = 0; i < COUNT_OF(OUTSIDE_BLOCKS); i++)
        if (strcmp(name, OUTSIDE_BLOCKS[i].hf) == 0) {
            *map = &OUTSIDE_BLOCKS[i];
            return NAME_MAPPED;
        }
    const char *rest;
    if (!block_number(name, block, &rest)) return NAME_UNKNOWN;
    for (size_t i = 0; i < COUNT_OF(MASK_BUFFERS); i++)
        if (strcmp(rest, MASK_BUFFERS[i]) == 0) return NAME_MASK;
    for (size_t i = 0; i < COUNT_OF(IN_BLOCKS); i++)
        if (strcmp(rest, IN_BLOCKS[i].hf) == 0) {
            *map = &IN_BLOCKS[i];
            return *block < n_layer ? NAME_MAPPED : NAME_PAST_N_LAYER;
        }
    return NAME_UNKNOWN;
}

// our_spec: our first tensor of "map" in block "block", in our parameter table.
static const TensorSpec *our_spec(const TensorTable *table, const NameMap *map, int block) {
    char name[96];
    if (block < 0) snprintf(name, sizeof name, "%s", map->ours);
    else snprintf(name, sizeof name, "blocks.%d.%s", block, map->ours);
    const TensorSpec *spec = table_find(table, name);
    if (!spec) die(EXIT_RUNTIME, "hf_gpt2.c: the gpt2 table has no %s", name);  // a broken NameMap, not a bad file
    return spec;
}

// hf_shape: the shape GPT-2 stores "map"'s tensor in, for our "spec": a
// Conv1D weight [in, out] for our [out, in] (out counted over its parts); a
// bias [parts x ours]; an embedding as ours.
static int hf_shape(const NameMap *map, const TensorSpec *spec, uint64_t shape[2]) {
    const uint64_t rows = (uint64_t)spec->shape[0] * (uint64_t)map->parts;
    if (spec->ndim == 1) {
        shape[0] = rows;
        return 1;
    }
    shape[0] = map->conv1d ? (uint64_t)spec->shape[1] : rows;
    shape[1] = map->conv1d ? rows : (uint64_t)spec->shape[1];
    return 2;
}

static void format_shape(char *out, size_t cap, const uint64_t *shape, int ndim) {
    int n = snprintf(out, cap, "[");
    for (int d = 0; d < ndim && n < (int)cap; d++)
        n += snprintf(out + n, cap - (size_t)n, "%s%llu", d ? "," : "", (unsigned long long)shape[d]);
    if (n < (int)cap) snprintf(out + n, cap - (size_t)n, "]");
}

// One tensor of the file to read: which, and where it goes.
typedef struct {
    const SafetensorsTensor *t;
    const NameMap *map;
    const TensorSpec *spec;
} Placement;

// place_tensors: every tensor of the file classified, its shape checked
// against "cfg", each of our parameters ("table", param_table(cfg)) filled
// exactly once; "*lm_head" the file's lm_head.weight, or NULL. "placed"
// has room for every tensor of the file. Nothing is allocated by size yet.
static bool place_tensors(SafetensorsFile *st, const ModelConfig *cfg, const TensorTable *table,
                          const SafetensorsTensor *tensors, size_t n, Placement *placed, size_t *n_placed,
                          const SafetensorsTensor **lm_head) {
    const char **filled_by = xcalloc((size_t)table->count, sizeof *filled_by);  // the file's name of each of ours
    *n_placed = 0;
    *lm_head = NULL;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        const SafetensorsTensor *t = &tensors[i];
        const NameMap *map = NULL;
        int block;
        switch (classify(t->name, cfg->n_layer, &map, &block)) {
        case NAME_MASK: continue;
        case NAME_UNKNOWN:
            ok = safetensors_reject(st, "tensor '%s' is not one of GPT-2's (wte, wpe, h.{i}.ln_1, .attn.c_attn, .attn.c_proj, .ln_2, .mlp.c_fc, .mlp.c_proj, ln_f, lm_head); is it a GPT-2?",
                                    t->name);
            continue;
        case NAME_PAST_N_LAYER:
            ok = safetensors_reject(st, "tensor '%s' is of block %d, but config.json's n_layer is %d (blocks 0 to %d); the two disagree",
                                    t->name, block, cfg->n_layer, cfg->n_layer - 1);
            continue;
        case NAME_LM_HEAD: {
            const uint64_t V = (uint64_t)cfg->vocab_size, C = (uint64_t)cfg->n_embd;
            if (t->ndim != 2 || t->shape[0] != V || t->shape[1] != C) {
                char got[64];
                format_shape(got, sizeof got, t->shape, t->ndim);
                ok = safetensors_reject(st, "tensor 'lm_head.weight' has shape %s but config.json (vocab_size %llu, n_embd %llu) needs [%llu,%llu]",
                                        got, (unsigned long long)V, (unsigned long long)C, (unsigned long long)V,
                                        (unsigned long long)C);
            }
            *lm_head = t;
            continue;
        }
        case NAME_MAPPED: break;
        }
        const TensorSpec *spec = our_spec(table, map, block);
        uint64_t want[2];
        const int ndim = hf_shape(map, spec, want);
        if (t->ndim != ndim || t->shape[0] != want[0] || (ndim == 2 && t->shape[1] != want[1])) {
            char got[64], wanted[64];
            format_shape(got, sizeof got, t->shape, t->ndim);
            format_shape(wanted, sizeof wanted, want, ndim);
            ok = safetensors_reject(st, "tensor '%s' has shape %s but config.json (n_embd %d, n_positions %d, vocab_size %d) needs %s",
                                    t->name, got, cfg->n_embd, cfg->block_size, cfg->vocab_size, wanted);
            continue;
        }
        const int index = (int)(spec - table->specs);
        if (filled_by[index]) {
            ok = safetensors_reject(st, "tensors '%s' and '%s' are the same weight; keep one of them", filled_by[index],
                                    t->name);
            continue;
        }
        for (int p = 0; p < map->parts; p++) filled_by[index + p] = t->name;
        placed[(*n_placed)++] = (Placement){t, map, spec};
    }
    // Every parameter of ours, named as GPT-2 names it.
    for (int b = -1; ok && b < cfg->n_layer; b++) {
        const NameMap *maps = b < 0 ? OUTSIDE_BLOCKS : IN_BLOCKS;
        const size_t count = b < 0 ? COUNT_OF(OUTSIDE_BLOCKS) : COUNT_OF(IN_BLOCKS);
        for (size_t i = 0; ok && i < count; i++) {
            if (filled_by[our_spec(table, &maps[i], b) - table->specs]) continue;
            char name[96];
            if (b < 0) snprintf(name, sizeof name, "%s", maps[i].hf);
            else snprintf(name, sizeof name, "h.%d.%s", b, maps[i].hf);
            if (b < 0)
                ok = safetensors_reject(st, "tensor '%s' (or 'transformer.%s') is missing; every GPT-2 has it", name,
                                        name);
            else
                ok = safetensors_reject(st, "tensor '%s' (or 'transformer.%s') is missing; config.json's n_layer %d needs it",
                                        name, name, cfg->n_layer);
        }
    }
    free(filled_by);
    return ok;
}

// ===========================================================================
// The weights.

// read_placed: each placed tensor into m's parameters: as it lies, or a
// Conv1D weight W [in, out] read into "scratch" and transposed into our
// [out, in] (linear_transpose_weight: weight_t[C,OC] = weight[OC,C]^T, with
// OC = in, C = out).
static bool read_placed(SafetensorsFile *st, Model *m, const Placement *placed, size_t n, float *scratch) {
    for (size_t i = 0; i < n; i++) {
        const Placement *p = &placed[i];
        float *ours = m->params_memory + p->spec->offset;
        if (!p->map->conv1d) {
            if (!safetensors_read_f32(st, p->t, ours, MODEL_MAX_WEIGHT)) return false;
            continue;
        }
        if (!safetensors_read_f32(st, p->t, scratch, MODEL_MAX_WEIGHT)) return false;
        linear_transpose_weight(ours, scratch, (int)p->t->shape[1], (int)p->t->shape[0]);
    }
    return true;
}

// check_tied_head: lm_head.weight, when the file has one, must be wte:
// tinygpt's gpt2 reads its head from tok_emb, as GPT-2 does. Compared a
// piece at a time, in "scratch" (room for "room" floats).
static bool check_tied_head(SafetensorsFile *st, const Model *m, const SafetensorsTensor *lm_head, float *scratch,
                            size_t room) {
    const float *wte = m->params.tok_emb;
    for (uint64_t first = 0; first < lm_head->count; first += room) {
        const size_t n = (size_t)(lm_head->count - first < room ? lm_head->count - first : room);
        if (!safetensors_read_f32_range(st, lm_head, first, n, scratch, MODEL_MAX_WEIGHT)) return false;
        for (size_t i = 0; i < n; i++)
            if (scratch[i] != wte[first + i])
                return safetensors_reject(st, "tensor 'lm_head.weight' differs from wte.weight at element %llu (%g, not %g); tinygpt's gpt2 ties its head to the embedding, as GPT-2 does",
                                          (unsigned long long)(first + i), (double)scratch[i],
                                          (double)wte[first + i]);
    }
    return true;
}

// read_weights: DIR/model.safetensors into "m", built here for "cfg".
static bool read_weights(const char *dir, const ModelConfig *cfg, Model *m, int max_batch, bool with_grads,
                         Error *err) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    SafetensorsFile st;
    SafetensorsTensor *tensors = NULL;
    size_t n = 0;
    bool ok = safetensors_open(&st, path, WEIGHTS_KIND, err) && safetensors_list(&st, &tensors, &n);
    // The names and shapes first, against the table alone: a wrong file is
    // refused before the model's memory is allocated.
    TensorTable table;
    param_table(&table, cfg);
    Placement *placed = xmalloc((n ? n : 1) * sizeof *placed);
    size_t n_placed = 0;
    const SafetensorsTensor *lm_head = NULL;
    ok = ok && place_tensors(&st, cfg, &table, tensors, n, placed, &n_placed, &lm_head);
    if (ok && !model_check_memory(cfg, max_batch, with_grads, err)) ok = false;
    if (ok) model_init(m, cfg, max_batch, with_grads);  // the same table: the placements' offsets hold
    // The largest Conv1D weight: c_fc's and c_proj's 4C x C.
    const size_t room = (size_t)4 * (size_t)cfg->n_embd * (size_t)cfg->n_embd;
    float *scratch = ok ? xmalloc(room * sizeof(float)) : NULL;
    ok = ok && read_placed(&st, m, placed, n_placed, scratch);
    ok = ok && (!lm_head || check_tied_head(&st, m, lm_head, scratch, room));
    free(scratch);
    table_free(&table);  // the placements point into it
    free(placed);
    free(tensors);
    safetensors_close(&st);
    return ok;
}

// ===========================================================================
// The directory.

// dir_has: whether "dir" holds a file called "name".
static bool dir_has(const char *dir, const char *name) {
    char path[4200];
    struct stat info;
    int len = snprintf(path, sizeof path, "%s/%s", dir, name);
    return len < (int)sizeof path && stat(path, &info) == 0;
}

// is_hf_directory: whether "dir" holds a file that only a Hugging Face
// GPT-2 directory has (a tinygpt run keeps its tokenizer in its checkpoints).
static bool is_hf_directory(const char *dir) {
    return dir_has(dir, "config.json") || dir_has(dir, "vocab.json") || dir_has(dir, "merges.txt");
}

bool hf_gpt2_load(const char *dir, Model *m, Tokenizer *tok, int max_batch, bool with_grads, Error *err) {
    memset(m, 0, sizeof *m);
    memset(tok, 0, sizeof *tok);
    // The callers have taken a run directory for its model.safetensors (run_model_path).
    if (!dir_has(dir, "config.json") && is_hf_directory(dir))
        return error_set(err, "'%s' has no config.json: a Hugging Face GPT-2 directory needs it beside model.safetensors, vocab.json and merges.txt; download it again",
                         dir);
    if (!dir_has(dir, "config.json"))
        return error_set(err, "'%s' is a directory, neither a tinygpt run (no model.safetensors) nor a Hugging Face GPT-2 directory (no config.json); give a checkpoint, a run directory or a GPT-2 directory",
                         dir);
    ModelConfig cfg;
    if (!read_config(dir, &cfg, err)) return false;
    if (!read_weights(dir, &cfg, m, max_batch, with_grads, err)) {
        if (m->params_memory) model_free(m);
        return false;
    }
    if (!tokenizer_load_gpt2(tok, dir, err)) {
        model_free(m);
        return false;
    }
    if (!tokenizer_fits_model(tok, cfg.vocab_size)) {
        error_set(err, "'%s/vocab.json' has %d tokens but '%s/config.json' says vocab_size %d; the two are of different models",
                  dir, tok->vocab_size, dir, cfg.vocab_size);
        tokenizer_free(tok);
        model_free(m);
        return false;
    }
    return true;
}

bool path_is_directory(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

const char *run_model_path(const char *path, char *buf, size_t cap) {
    if (!path_is_directory(path) || is_hf_directory(path) || !dir_has(path, "model.safetensors")) return path;
    int len = snprintf(buf, cap, "%s/model.safetensors", path);
    return len < (int)cap ? buf : path;
}

bool model_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads, Error *err) {
    if (path_is_directory(path)) return hf_gpt2_load(path, m, tok, max_batch, with_grads, err);
    return checkpoint_load(path, m, tok, max_batch, with_grads, NULL, err);
}
