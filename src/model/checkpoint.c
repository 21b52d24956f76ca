// checkpoint.c: what tinygpt's model files hold (see checkpoint.h); AdamW's
// state beside it is optimizer_state.c's.
//
// Reading order: file 27, after safetensors.c (the container, with every
// check of the header, the offsets and the floats) and tokenizer.c.
//
// Saving writes the parameter table's tensors in table order (model.h)
// after the model's metadata (model_metadata). Loading reads the metadata
// first (read_model_metadata), builds the table it describes (param_table)
// and checks the file against it: every tensor of the table present with
// its shape, no other, in any order (Python's writer sorts by name). The
// table, whose length grows with n_layer, is built only once n_layer is
// within MODEL_MAX_LAYERS.
//
#include "checkpoint.h"

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_tokenizer.h"

// What the file is called in messages.
#define MODEL_FILE "checkpoint"

// ===========================================================================
// The model's metadata.

// The keys of a model file that describe its model, each spelled once
// here: model_keys writes them, read_model_metadata reads them, beside
// "tokenizer", "arch", "n_layer" and "dropout", which have rules of their
// own. A file saved before a switch or a swap existed lacks its key; its
// model is "absent": no part removed, none swapped. (The run's settings
// that shape the model, settings_table.c's KEPT_IN_MODEL rows, name these keys
// as their own: checkpoint_model_metadata is how --init reads them, and a
// test holds the two lists equal.)
typedef enum { KEY_SIZE, KEY_SWITCH, KEY_CHOICE } ModelKeyType;
typedef struct {
    const char *key;
    ModelKeyType type;
    size_t field;              // offsetof(ModelConfig, ...): an int (a size, or a choice's enum) or a bool
    const char *const *names;  // KEY_CHOICE: the names, in enum order
    int absent;                // KEY_CHOICE: the index a file without the key meant (a switch: off)
    const char *what;          // KEY_CHOICE: what the key names, for messages
} ModelKey;
_Static_assert(sizeof(NormKind) == sizeof(int) && sizeof(MlpKind) == sizeof(int) && sizeof(PosKind) == sizeof(int),
               "a choice is kept through an int *");
// Each key is its ModelConfig field's name.
#define SIZE_KEY(f) {#f, KEY_SIZE, offsetof(ModelConfig, f), NULL, 0, NULL}
#define SWITCH_KEY(f) {#f, KEY_SWITCH, offsetof(ModelConfig, f), NULL, 0, NULL}
#define CHOICE_KEY(f, names, absent, what) {#f, KEY_CHOICE, offsetof(ModelConfig, f), names, absent, what}
static const ModelKey MODEL_KEYS[] = {
    SIZE_KEY(vocab_size),
    SIZE_KEY(n_embd),
    SIZE_KEY(n_head),
    SIZE_KEY(block_size),
    SWITCH_KEY(no_layernorm),
    SWITCH_KEY(no_mlp),
    SWITCH_KEY(no_residual),
    SWITCH_KEY(untied_head),
    SWITCH_KEY(qk_norm),
    CHOICE_KEY(norm, NORM_NAMES, NORM_LAYERNORM, "a norm"),
    CHOICE_KEY(mlp, MLP_NAMES, MLP_GELU, "an MLP activation"),
    CHOICE_KEY(pos, POS_NAMES, POS_LEARNED, "a kind of position embedding"),
};
enum { N_MODEL_KEYS = sizeof MODEL_KEYS / sizeof MODEL_KEYS[0] };

// key_value / set_key: the ModelConfig field of "k", read or set.
static int key_value(const ModelConfig *cfg, const ModelKey *k) {
    const char *field = (const char *)cfg + k->field;
    return k->type == KEY_SWITCH ? *(const bool *)field : *(const int *)field;
}
static void set_key(ModelConfig *cfg, const ModelKey *k, long value) {
    char *field = (char *)cfg + k->field;
    if (k->type == KEY_SWITCH) *(bool *)field = value != 0;
    else *(int *)field = (int)value;
}

// write_key: "k"'s value in "cfg", unless "complete" is false and the value
// is the one a file without the key means (a switch off, a choice not made).
static void write_key(Metadata *md, const ModelKey *k, const ModelConfig *cfg, bool complete) {
    const int value = key_value(cfg, k);
    if (!complete && k->type != KEY_SIZE && value == k->absent) return;
    if (k->type == KEY_CHOICE) metadata_set(md, k->key, "%s", k->names[value]);
    else metadata_set(md, k->key, "%d", value);
}

// model_keys: the keys that describe "cfg", a tokenizer of "kind": with
// "complete", every one; without, as a file holds them: a char model says
// nothing of its tokenizer, a whole gpt nothing of parts it lacks, and a
// gpt nothing of the modern recipe's swaps it does not make, so those files
// stay as they were before bpe, the ladder and the recipe existed. The
// sizes come before "arch" and "n_layer", the rest after, as files always
// had them.
static void model_keys(Metadata *md, const ModelConfig *cfg, TokenizerKind kind, bool complete) {
    if (complete || kind != TOKENIZER_CHAR) metadata_set(md, "tokenizer", "%s", tokenizer_kind_name(kind));
    for (int i = 0; i < N_MODEL_KEYS; i++)
        if (MODEL_KEYS[i].type == KEY_SIZE) write_key(md, &MODEL_KEYS[i], cfg, complete);
    metadata_set(md, "arch", "%s", arch_name(cfg->arch));
    metadata_set(md, "n_layer", "%d", model_layers(cfg));
    for (int i = 0; i < N_MODEL_KEYS; i++)
        if (MODEL_KEYS[i].type != KEY_SIZE) write_key(md, &MODEL_KEYS[i], cfg, complete);
    // %.9g prints any float so that strtod + (float) gives back the same bits.
    metadata_set(md, "dropout", "%.9g", (double)cfg->dropout);
}

void checkpoint_model_metadata(Metadata *md, const ModelConfig *cfg, TokenizerKind kind) {
    model_keys(md, cfg, kind, true);
}

// model_metadata: a model file's whole "__metadata__": the format, the
// tokenizer (a char model's characters in id order, "vocab"; a bpe
// model's "merges"; a gpt2 model's vocab.json and merges.txt, whole, as
// "gpt2_vocab" and "gpt2_merges", which its reader reads back with every
// check and GPT-2's numbering), the model's keys, the step.
static void model_metadata(Metadata *md, const Model *m, const Tokenizer *tok, long step) {
    metadata_set(md, "format", CHECKPOINT_FORMAT);
    if (tok->kind == TOKENIZER_GPT2) {
        JsonBuf vocab = {0}, merges = {0};
        Error err;
        // A gpt2 tokenizer was read from these files, so it writes back.
        bool written = gpt2_tokenizer_files(tok, &vocab, &merges, &err);
        assert(written);
        (void)written;
        metadata_set(md, "tokenizer", "gpt2");
        metadata_set_bytes(md, "gpt2_vocab", vocab.data, vocab.len);
        metadata_set_bytes(md, "gpt2_merges", merges.data, merges.len);
        json_buf_free(&vocab);
        json_buf_free(&merges);
    } else if (tok->kind == TOKENIZER_BPE) {
        metadata_set(md, "tokenizer", "bpe");
        char *merges = bpe_merges_text(&tok->bpe);
        metadata_set_bytes(md, "merges", merges, strlen(merges));
        free(merges);
    } else {
        size_t len;
        char *vocab = tokenizer_vocab_utf8(tok, &len);
        metadata_set_bytes(md, "vocab", vocab, len);
        free(vocab);
    }
    model_keys(md, &m->config, tok->kind, false);
    metadata_set(md, "step", "%ld", step);
}

bool checkpoint_save(const Model *m, const Tokenizer *tok, long step, const char *path, Error *err) {
    return checkpoint_save_run(m, tok, step, NULL, path, err);
}

bool checkpoint_save_run(const Model *m, const Tokenizer *tok, long step, const Metadata *run, const char *path,
                         Error *err) {
    assert(tokenizer_fits_model(tok, m->config.vocab_size) && step >= 0);
    Metadata md = {0};
    model_metadata(&md, m, tok, step);
    for (int i = 0; run && i < run->count; i++)
        metadata_set_bytes(&md, run->items[i].key, run->items[i].value, run->items[i].len);
    const TensorGroup params = {"", &m->param_table, m->params_memory};
    bool ok = safetensors_save(path, &md, &params, 1, err);
    metadata_free(&md);
    return ok;
}

// ===========================================================================
// Loading the model.

// What a model file's metadata says, as read_model_metadata reads it.
typedef struct {
    ModelConfig cfg;
    TokenizerKind tokenizer;   // "tokenizer"; char when absent
    const JsonValue *vocab;    // "vocab" (char), "merges" (bpe) or "gpt2_vocab" (gpt2), inside the file's header
    const JsonValue *merges;   // "gpt2_merges" (gpt2); NULL for the others
    long step;
} ModelMetadata;

// check_format: the metadata's "format" must be "want", or "older" (the
// version before checksums). The other file of a run directory is the
// likely mix-up (the model and AdamW's state sit side by side), and the
// message says which file to give instead. A file of today's version must
// have its checksum: without one, the header itself was damaged.
bool checkpoint_check_format(SafetensorsFile *st, const char *want, const char *older) {
    const JsonValue *format = safetensors_meta_string(st, "format");
    if (!format) return false;
    if (json_string_is(format, want) && !st->has_checksum)
        return safetensors_reject(st, "its format \"%s\" carries a checksum, but its header has none; the file is damaged: use another checkpoint, or retrain",
                                  want);
    if (json_string_is(format, want) || json_string_is(format, older)) return true;
    if (json_string_is(format, OPTIMIZER_FORMAT) || json_string_is(format, OPTIMIZER_FORMAT_1))
        return safetensors_reject(st, "it holds AdamW's state (format \"%s\"), not a model; give the model.safetensors saved next to it",
                                  format->string);
    if (json_string_is(format, CHECKPOINT_FORMAT) || json_string_is(format, CHECKPOINT_FORMAT_1))
        return safetensors_reject(st, "it is a model checkpoint (format \"%s\"), not AdamW's state; give the optimizer.safetensors saved next to it",
                                  format->string);
    return safetensors_reject(st, "its format is \"%s\" but this tinygpt reads \"%s\" (and \"%s\", from before checksums); retrain with this version",
                              show(format->string, format->string_len).text, want, older);
}

// read_choice: the metadata entry "key", one of "names", into "*index";
// "absent" (an index) when the file has no such key (an older file). "what"
// names what the key says in a message: "an architecture".
static bool read_choice(SafetensorsFile *st, const char *key, const char *what, const char *const *names, int absent,
                        int *index) {
    *index = absent;
    if (!safetensors_meta_has(st, key)) return true;
    const JsonValue *name = safetensors_meta_string(st, key);
    if (!name) return false;
    *index = strlen(name->string) == name->string_len ? name_index(names, name->string) : -1;
    if (*index >= 0) return true;
    char known[64] = "";
    for (int i = 0; names[i]; i++) {
        size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, "%s\"%s\"", i ? " and " : "", names[i]);
    }
    return safetensors_reject(st, "its __metadata__ \"%s\" is \"%s\", %s this tinygpt does not know (it knows %s); load it with the tinygpt that saved it, or retrain",
                              key, show(name->string, name->string_len).text, what, known);
}

// read_architecture: "arch" and "n_layer" from the metadata. A file saved
// before gpt existed has neither and is card, whose one block makes n_layer
// 1; a gpt file must say how many blocks it has. n_layer is bounded here,
// before anything sized by it (the parameter table) is allocated.
static bool read_architecture(SafetensorsFile *st, Arch *arch, long *n_layer) {
    int index;
    if (!read_choice(st, "arch", "an architecture", ARCH_NAMES, ARCH_CARD, &index)) return false;
    *arch = (Arch)index;
    *n_layer = 1;
    if (safetensors_meta_has(st, "n_layer")) {
        if (!safetensors_meta_long(st, "n_layer", LONG_MAX, n_layer)) return false;
    } else if (*arch != ARCH_CARD) {
        return safetensors_reject(st, "its __metadata__ says \"arch\" is \"%s\" but has no \"n_layer\", the number of blocks; the file is damaged, retrain",
                                  arch_name(*arch));
    }
    if (*n_layer < 1 || *n_layer > MODEL_MAX_LAYERS)
        return safetensors_reject(st, "its __metadata__ \"n_layer\" is %ld, outside [1, %d]; the file is damaged, retrain",
                                  *n_layer, MODEL_MAX_LAYERS);
    if (*arch == ARCH_CARD && *n_layer != 1)
        return safetensors_reject(st, "its __metadata__ \"n_layer\" is %ld but \"arch\" is \"card\", which has exactly one block; the file is damaged, retrain",
                                  *n_layer);
    return true;
}

// read_key: "k" from the metadata into "cfg": a size (at most INT_MAX here;
// model_check_config bounds it further), a switch "0" or "1", a choice one
// of its names; a switch or a choice the file lacks (an older file) takes
// its "absent".
static bool read_key(SafetensorsFile *st, const ModelKey *k, ModelConfig *cfg) {
    long value = k->absent;
    if (k->type == KEY_SIZE) {
        if (!safetensors_meta_long(st, k->key, INT_MAX, &value)) return false;
    } else if (k->type == KEY_SWITCH) {
        if (safetensors_meta_has(st, k->key) && !safetensors_meta_long(st, k->key, 1, &value)) return false;
    } else {
        int index;
        if (!read_choice(st, k->key, k->what, k->names, k->absent, &index)) return false;
        value = index;
    }
    set_key(cfg, k, value);
    return true;
}

// read_model_metadata: the format marker, the config, the step and the
// tokenizer's string. The config must pass model_check_config: it bounds
// every size, so the shape arithmetic that follows cannot overflow.
static bool read_model_metadata(SafetensorsFile *st, ModelMetadata *mm) {
    if (!st->meta)
        return safetensors_reject(st, "its header has no \"__metadata__\" object with the vocabulary and sizes; was it written by tinygpt train?");
    if (!checkpoint_check_format(st, CHECKPOINT_FORMAT, CHECKPOINT_FORMAT_1)) return false;

    mm->cfg = (ModelConfig){0};
    for (int i = 0; i < N_MODEL_KEYS; i++)
        if (MODEL_KEYS[i].type == KEY_SIZE && !read_key(st, &MODEL_KEYS[i], &mm->cfg)) return false;
    if (!safetensors_meta_long(st, "step", LONG_MAX, &mm->step)) return false;
    double p;
    if (!safetensors_meta_double(st, "dropout", &p)) return false;
    mm->cfg.dropout = (float)p;
    int tokenizer;
    if (!read_choice(st, "tokenizer", "a tokenizer", TOKENIZER_NAMES, TOKENIZER_CHAR, &tokenizer)) return false;
    mm->tokenizer = (TokenizerKind)tokenizer;
    const char *vocab_key = mm->tokenizer == TOKENIZER_BPE ? "merges" : mm->tokenizer == TOKENIZER_GPT2 ? "gpt2_vocab" : "vocab";
    mm->vocab = safetensors_meta_string(st, vocab_key);
    if (!mm->vocab) return false;
    mm->merges = NULL;
    if (mm->tokenizer == TOKENIZER_GPT2 && !(mm->merges = safetensors_meta_string(st, "gpt2_merges"))) return false;
    long n_layer;
    if (!read_architecture(st, &mm->cfg.arch, &n_layer)) return false;
    mm->cfg.n_layer = (int)n_layer;
    for (int i = 0; i < N_MODEL_KEYS; i++)
        if (MODEL_KEYS[i].type != KEY_SIZE && !read_key(st, &MODEL_KEYS[i], &mm->cfg)) return false;

    Error cfg_err;
    if (!model_check_config(&mm->cfg, &cfg_err))
        return safetensors_reject(st, "its __metadata__ describes an impossible model (%s); the file is damaged, retrain",
                                  cfg_err.msg);
    return true;
}

// block_of: the block number in a name "blocks.<i>.<rest>" (saturating at
// LONG_MAX); false for a name of any other form.
static bool block_of(const char *name, size_t len, long *block) {
    const char prefix[] = "blocks.";
    size_t at = sizeof prefix - 1, digits = 0;
    if (len <= at || memcmp(name, prefix, at) != 0) return false;
    long value = 0;
    for (; at < len && name[at] >= '0' && name[at] <= '9'; at++, digits++)
        value = value > (LONG_MAX - 9) / 10 ? LONG_MAX : value * 10 + (name[at] - '0');
    if (digits == 0 || at >= len || name[at] != '.') return false;
    *block = value;
    return true;
}

// has_block: whether any tensor in the header belongs to block "block".
static bool has_block(const SafetensorsFile *st, long block) {
    for (size_t i = 0; i < st->root->count; i++) {
        long b;
        if (block_of(st->root->items[i].key, st->root->items[i].key_len, &b) && b == block) return true;
    }
    return false;
}

// model_name_problem: a wrong tensor name in a model file. When the names
// disagree with n_layer (tensors of a block past the last, or none for a
// block the table has), the message says so.
static bool model_name_problem(SafetensorsFile *st, const char *name, size_t len, bool missing, const void *ctx) {
    const ModelConfig *cfg = ctx;
    Shown shown = show(name, len);
    long block;
    bool in_block = block_of(name, len, &block);
    if (missing && in_block && !has_block(st, block))
        return safetensors_reject(st, "tensor '%s' is missing: its __metadata__ \"n_layer\" is %d but it has no tensors of block %ld, so n_layer disagrees with the tensors; the file is damaged, retrain",
                                  shown.text, cfg->n_layer, block);
    if (missing) return safetensors_reject(st, "tensor '%s' is missing; was it written by tinygpt train?", shown.text);
    if (in_block && block >= cfg->n_layer)
        return safetensors_reject(st, "it has a tensor '%s' of block %ld but its __metadata__ \"n_layer\" is %d (blocks 0 to %d), so n_layer disagrees with the tensors; the file is damaged, retrain",
                                  shown.text, block, cfg->n_layer, cfg->n_layer - 1);
    return safetensors_reject(st, "it has a tensor '%s' that tinygpt's %s model does not have; was it written by tinygpt train with this architecture?",
                              shown.text, arch_name(cfg->arch));
}

TensorExpectations checkpoint_expectations(const ModelConfig *cfg, const char *source, const char *fix,
                                       bool (*name_problem)(SafetensorsFile *, const char *, size_t, bool, const void *)) {
    TensorExpectations e = {.shape_fix = fix, .name_problem = name_problem, .ctx = cfg};
    snprintf(e.shape_source, sizeof e.shape_source, "%s (vocab_size %d, n_embd %d, block_size %d)", source,
             cfg->vocab_size, cfg->n_embd, cfg->block_size);
    return e;
}

// check_memory: the model and its activations for batches of "max_batch"
// must fit in memory. The weights are in the file, so they fit on disk, but
// the activations grow with the batch and the context squared.
static bool check_memory(SafetensorsFile *st, const ModelConfig *cfg, int max_batch, bool with_grads) {
    Error mem_err;
    if (model_check_memory(cfg, max_batch, with_grads, &mem_err)) return true;
    return error_set(st->err, "cannot load '%s': %s%s", st->path, mem_err.msg,
                     max_batch > 1 ? "; fewer windows at once need less" : "; this machine cannot hold it");
}

// build_vocab: the tokenizer from the metadata's vocabulary string, which
// must have one character per row of tok_emb (vocab_size of them). A bpe
// file's "merges" must make exactly vocab_size - 256 tokens.
static bool build_vocab(SafetensorsFile *st, const ModelMetadata *mm, Tokenizer *tok) {
    Error vocab_err;
    bool bpe = mm->tokenizer != TOKENIZER_CHAR;
    bool built = mm->tokenizer == TOKENIZER_GPT2
                     ? gpt2_tokenizer_from_text(tok, mm->vocab->string, mm->vocab->string_len, "gpt2_vocab",
                                                mm->merges->string, mm->merges->string_len, "gpt2_merges", &vocab_err)
                 : bpe ? tokenizer_from_bpe_merges(tok, mm->vocab->string, mm->vocab->string_len, &vocab_err)
                       : tokenizer_from_vocab(tok, mm->vocab->string, mm->vocab->string_len, &vocab_err);
    if (!built) return safetensors_reject(st, "its %s", vocab_err.msg);
    if (!tokenizer_fits_model(tok, mm->cfg.vocab_size)) {
        int found = tok->vocab_size;
        tokenizer_free(tok);
        return safetensors_reject(st, bpe ? "its merges make %d tokens but vocab_size says %d; the file is damaged, retrain"
                                          : "its vocabulary has %d characters but vocab_size says %d; the file is damaged, retrain",
                                  found, mm->cfg.vocab_size);
    }
    return true;
}

// checkpoint_load: the steps above in order; the model is allocated only
// once the header has passed every check, and freed again if the data fails.
// Training stops before it would save a weight beyond MODEL_MAX_WEIGHT
// (check_tensors, train_save.c), so a file that holds one is refused.
bool checkpoint_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads, long *step,
                     Error *err) {
    return checkpoint_load_stream(fopen_checked(path, "rb", err), path, m, tok, max_batch, with_grads, step, err);
}

bool checkpoint_load_stream(FILE *f, const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads,
                            long *step, Error *err) {
    SafetensorsFile st;
    ModelMetadata mm;
    Tokenizer vocab = {0};
    TensorTable params = {0};  // the parameters the metadata describes
    bool ok = safetensors_open_stream(&st, f, path, MODEL_FILE, err) && read_model_metadata(&st, &mm);
    if (ok) {
        param_table(&params, &mm.cfg);
        TensorExpectations expect = checkpoint_expectations(&mm.cfg, "the metadata", "the file is damaged, retrain", model_name_problem);
        ok = safetensors_check_tensors(&st, &params, &expect) && check_memory(&st, &mm.cfg, max_batch, with_grads) &&
             build_vocab(&st, &mm, &vocab);
    }
    if (ok) {
        model_init(m, &mm.cfg, max_batch, with_grads);
        // model_init built the same table from the same config.
        assert(m->param_table.count == params.count && m->param_table.total == params.total);
        ok = safetensors_read_tensors(&st, &params, m->params_memory, MODEL_MAX_WEIGHT);
        if (!ok) {
            model_free(m);
            tokenizer_free(&vocab);
        }
    }
    if (ok) {
        *tok = vocab;
        if (step) *step = mm.step;
    }
    table_free(&params);
    safetensors_close(&st);
    return ok;
}

bool checkpoint_read_header(const char *path, CheckpointHeader *h, Error *err) {
    return checkpoint_read_header_stream(fopen_checked(path, "rb", err), path, h, err);
}

bool checkpoint_read_header_stream(FILE *f, const char *path, CheckpointHeader *h, Error *err) {
    memset(h, 0, sizeof *h);
    SafetensorsFile st;
    ModelMetadata mm;
    bool ok = safetensors_open_stream(&st, f, path, MODEL_FILE, err) && read_model_metadata(&st, &mm);
    if (ok && !safetensors_meta_has(&st, "batch_rng"))
        ok = error_set(err, "'%s' holds no training state to resume (it was saved by an older tinygpt); start a new run from its weights with --init",
                       path);
    for (size_t i = 0; ok && i < st.meta->count; i++) {
        const JsonValue *item = &st.meta->items[i];
        if (item->type != JSON_STRING || strlen(item->key) != item->key_len)
            ok = safetensors_reject(&st, "its __metadata__ \"%s\" is %s, not a string; was it written by tinygpt train?",
                                    show(item->key, item->key_len).text,
                                    item->type == JSON_STRING ? "a key with a NUL" : json_type_name(item->type));
        else metadata_set_bytes(&h->metadata, item->key, item->string, item->string_len);
    }
    if (ok) {
        h->config = mm.cfg;
        h->tokenizer = mm.tokenizer;
        h->step = mm.step;
    } else {
        metadata_free(&h->metadata);
    }
    safetensors_close(&st);
    return ok;
}
