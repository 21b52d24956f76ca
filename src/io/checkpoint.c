// checkpoint.c: save and load the model, and AdamW's state beside it, as
// .safetensors (see checkpoint.h).
//
// Reading order: file 18, after model.c (the parameter table) and json.c.
//
// The file, byte by byte:
//
//   [0, 8)          N, the header length, as a little-endian u64
//   [8, 8+N)        the header: JSON, padded with spaces to make 8+N a multiple of 8
//   [8+N, end)      the data section: each tensor's floats, little-endian F32
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets"},
// where data_offsets = [begin, end) in bytes from the start of the data
// section, and holds "__metadata__", an object of strings (safetensors allows
// only strings there) with what the weights alone cannot tell: the
// vocabulary, the sizes, the architecture ("arch": "card" or "gpt") and its
// number of blocks ("n_layer"), dropout, the step, and "format": "tinygpt-1".
// Files saved before gpt existed have neither "arch" nor "n_layer": they
// are card models with one block, and load as such.
// A safetensors reader in any language (Python's safetensors.torch.load_file,
// for one) opens the file as it is.
//
// Saving writes the tensors in parameter-table order (model.h). Loading
// builds the table the metadata describes (param_table) and checks the file
// against it: every tensor of the table present with its shape, no other.
// It accepts them in any order, as long as they tile the data section with
// no gap and no overlap (safetensors' own rule; Python's writer sorts by name).
//
// Loading trusts nothing: every size, name, shape and offset is checked
// against the others and against the file's real size before anything is
// allocated by size (the table, whose length grows with n_layer, only once
// n_layer is within MODEL_MAX_LAYERS), so a damaged or hostile file
// gives a one-line message, never a crash, a hang or a huge allocation.
// What it leaves out: dtypes other than F32, big-endian machines, and
// memory-mapping the file.
//
// AdamW's state (optimizer.safetensors, at the end of this file) is the same
// container with other metadata and other names, written by the same writer
// and checked by the same loader steps, against a table of the names and
// shapes it must hold built from the model's parameter table.
#include "checkpoint.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json.h"

// The data section is the parameter buffer's bytes as they sit in memory
// (fwrite out, fread back in). safetensors stores little-endian IEEE-754
// floats, so that is only right on a little-endian machine: refuse to
// compile anywhere else rather than write files no one else can read.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "checkpoint.c copies floats to and from the file as raw bytes, so it needs a little-endian machine");
_Static_assert(sizeof(float) == 4, "safetensors F32 is 4 bytes");

// The value of "__metadata__"."format"; bump it if the meaning of the file changes.
#define CHECKPOINT_FORMAT "tinygpt-1"
// The same for AdamW's state (optimizer_state_save).
#define OPTIMIZER_FORMAT "tinygpt-optimizer-1"
// The largest header accepted, the limit the safetensors library itself uses.
#define MAX_HEADER_BYTES (100u * 1000u * 1000u)
// The bytes before the header: N as a little-endian u64.
#define LENGTH_BYTES 8

// ---- Saving -------------------------------------------------------------------
//
// Both files tinygpt writes, the model and AdamW's state, are made the same
// way: a "__metadata__" object and groups of tensors (TensorGroup), which
// save_safetensors turns into the header's entries and the data section, in
// the same order, and writes atomically.

// One group of tensors in a file: those of "table", in table order, each
// named "prefix" followed by its name in the table, its floats at "memory" +
// its offset. A model checkpoint is one group (the parameters, no prefix);
// AdamW's state is two (MOMENT_PREFIX below).
typedef struct {
    const char *prefix;
    const TensorTable *table;
    const float *memory;
} TensorGroup;

// The names of AdamW's two moments, torch.optim.AdamW's, in the order its
// file holds them: every "exp_avg.<parameter>" (m), then every
// "exp_avg_sq.<parameter>" (v), each in parameter-table order.
static const char *const MOMENT_PREFIX[2] = {"exp_avg.", "exp_avg_sq."};

// build_model_metadata: the "__metadata__" object of a model checkpoint:
// "cfg", "tok"'s vocabulary, "step" and, if not NULL, "state".
static void build_model_metadata(JsonBuf *b, const ModelConfig *cfg, const Tokenizer *tok, long step,
                                 const TrainState *state) {
    json_buf_printf(b, "{\"format\":\"%s\"", CHECKPOINT_FORMAT);
    // The tokenizer: a char model's characters in id order ("vocab"), or a
    // bpe model's merges. A char file says nothing more, so it stays as
    // files were before bpe existed.
    char *vocab;
    size_t vocab_len;
    if (tok->kind == TOKENIZER_BPE) {
        vocab = bpe_merges_text(&tok->bpe);
        vocab_len = strlen(vocab);
        json_buf_printf(b, ",\"tokenizer\":\"bpe\",\"merges\":");
    } else {
        vocab = tokenizer_vocab_utf8(tok, &vocab_len);
        json_buf_printf(b, ",\"vocab\":");
    }
    json_buf_string(b, vocab, vocab_len);
    json_buf_printf(b, ",\"vocab_size\":\"%d\",\"n_embd\":\"%d\",\"n_head\":\"%d\",\"block_size\":\"%d\"",
                    cfg->vocab_size, cfg->n_embd, cfg->n_head, cfg->block_size);
    json_buf_printf(b, ",\"arch\":\"%s\",\"n_layer\":\"%d\"", arch_name(cfg->arch), model_layers(cfg));
    // A gpt with parts removed (`make ladder`) says which; a whole gpt and
    // card write nothing more, so their files stay as they were.
    if (cfg->no_layernorm) json_buf_printf(b, ",\"no_layernorm\":\"1\"");
    if (cfg->no_mlp) json_buf_printf(b, ",\"no_mlp\":\"1\"");
    if (cfg->no_residual) json_buf_printf(b, ",\"no_residual\":\"1\"");
    // %.9g prints any float so that strtod + (float) gives back the same bits.
    json_buf_printf(b, ",\"dropout\":\"%.9g\",\"step\":\"%ld\"", (double)cfg->dropout, step);
    if (state) {
        json_buf_printf(b, ",\"data_tokens\":\"%llu\",\"data_hash\":\"%llu\",\"seed\":\"%llu\",\"batch_rng\":\"%llu\"",
                        (unsigned long long)state->data_tokens, (unsigned long long)state->data_hash,
                        (unsigned long long)state->seed, (unsigned long long)state->batch_rng);
        json_buf_printf(b, ",\"steps\":\"%ld\",\"batch\":\"%d\",\"lr\":\"%.9g\",\"val_fraction\":\"%.9g\"",
                        state->steps, state->batch, (double)state->lr, (double)state->val_fraction);
        json_buf_printf(b, ",\"eval_interval\":\"%d\",\"eval_batches\":\"%d\",\"save_every\":\"%ld\",\"order\":",
                        state->eval_interval, state->eval_batches, state->save_every);
        json_buf_string(b, state->order, strlen(state->order));
        const OptimizerConfig *o = &state->optimizer;
        json_buf_printf(b, ",\"optimizer\":\"%s\",\"lr_schedule\":\"%s\",\"warmup\":\"%ld\"",
                        o->kind == OPT_ADAMW ? "adamw" : "sgd", o->schedule == LR_COSINE ? "cosine" : "constant",
                        o->warmup_steps);
        json_buf_printf(b, ",\"min_lr\":\"%.17g\",\"grad_clip\":\"%.17g\",\"beta1\":\"%.17g\",\"beta2\":\"%.17g\",\"weight_decay\":\"%.17g\"",
                        o->min_lr, o->grad_clip, o->beta1, o->beta2, o->weight_decay);
    }
    json_buf_append(b, "}", 1);
    free(vocab);
}

// build_header: {"__metadata__": "metadata", then one entry per tensor of
// "groups", in order, at consecutive data offsets}, padded with spaces so
// that the data section (at byte 8 + N) starts on an 8-byte boundary, where a
// reader that memory-maps the file can use the floats in place.
static void build_header(JsonBuf *b, const JsonBuf *metadata, const TensorGroup *groups, int n_groups) {
    json_buf_printf(b, "{\"__metadata__\":");
    json_buf_append(b, metadata->data, metadata->len);
    size_t begin = 0;
    for (int g = 0; g < n_groups; g++) {
        for (int i = 0; i < groups[g].table->count; i++) {
            const TensorSpec *spec = &groups[g].table->specs[i];
            size_t end = begin + spec->size * sizeof(float);
            char name[sizeof spec->name + 16];
            int len = snprintf(name, sizeof name, "%s%s", groups[g].prefix, spec->name);
            assert(len > 0 && (size_t)len < sizeof name);
            json_buf_append(b, ",", 1);
            json_buf_string(b, name, (size_t)len);
            json_buf_printf(b, ":{\"dtype\":\"F32\",\"shape\":[%zu", spec->shape[0]);
            if (spec->ndim == 2) json_buf_printf(b, ",%zu", spec->shape[1]);
            json_buf_printf(b, "],\"data_offsets\":[%zu,%zu]}", begin, end);
            begin = end;
        }
    }
    json_buf_append(b, "}", 1);
    while ((LENGTH_BYTES + b->len) % 8 != 0) json_buf_append(b, " ", 1);
}

// save_safetensors: the header ("metadata" and the entries of "groups"),
// then the groups' tensors, written whole or not at all (atomic_open and
// atomic_commit, common.h: "<path>.tmp", flushed to disk, renamed over
// "path", the directory synced). Both savers below end here.
static bool save_safetensors(const char *path, const JsonBuf *metadata, const TensorGroup *groups, int n_groups,
                             Error *err) {
    JsonBuf header = {0};
    build_header(&header, metadata, groups, n_groups);

    unsigned char length[LENGTH_BYTES];  // N, little-endian, whatever this machine's byte order
    for (int i = 0; i < LENGTH_BYTES; i++) length[i] = (unsigned char)((uint64_t)header.len >> (8 * i));

    AtomicFile af;
    bool ok = atomic_open(&af, path, err);
    if (ok) {
        ok = write_exact(length, sizeof length, af.f, af.tmp, err);
        ok = ok && write_exact(header.data, header.len, af.f, af.tmp, err);
        for (int g = 0; g < n_groups; g++) {
            const TensorTable *table = groups[g].table;
            for (int i = 0; i < table->count; i++)
                ok = ok && write_exact(groups[g].memory + table->specs[i].offset,
                                       table->specs[i].size * sizeof(float), af.f, af.tmp, err);
        }
        ok = atomic_commit(&af, ok, err);
    }
    json_buf_free(&header);
    return ok;
}

// checkpoint_save / checkpoint_save_with_state: the parameters, one group
// under their own names, after the model's metadata.
bool checkpoint_save(const Model *m, const Tokenizer *tok, long step, const char *path, Error *err) {
    return checkpoint_save_with_state(m, tok, step, NULL, path, err);
}

bool checkpoint_save_with_state(const Model *m, const Tokenizer *tok, long step, const TrainState *state,
                                const char *path, Error *err) {
    assert(tok->vocab_size == m->config.vocab_size && step >= 0);
    JsonBuf metadata = {0};
    build_model_metadata(&metadata, &m->config, tok, step, state);
    const TensorGroup params = {"", &m->param_table, m->params_memory};
    bool ok = save_safetensors(path, &metadata, &params, 1, err);
    json_buf_free(&metadata);
    return ok;
}

// ---- Loading --------------------------------------------------------------------
//
// Both loaders, checkpoint_load and optimizer_state_load, run the same steps
// on a Loader: read_header and parse_header (the container), their own
// metadata reader (read_metadata or read_adamw_metadata), then check_tensors
// against the table of tensors the file must hold (the parameters the
// metadata describes, or AdamW's moments of the model's parameters), then
// read_tensors into the memory that table describes. Only the metadata and
// a few messages differ between the two: those ask ld->kind.

// Which file a Loader reads.
typedef enum { MODEL_FILE, OPTIMIZER_FILE } FileKind;

// What a loader has learned about the file so far; each step below fills in
// some of it, and loader_close frees it at the end, whatever happened.
typedef struct {
    const char *path;          // for messages
    FileKind kind;             // the model or AdamW's state: which metadata, and the messages
    Error *err;
    FILE *f;
    uint64_t file_size;        // bytes
    uint64_t header_len;       // N
    uint64_t data_size;        // bytes in the data section: file_size - 8 - N
    char *header;              // [N] the JSON text
    JsonValue *root;           // the parsed header
    const JsonValue *vocab;    // model: the metadata's "vocab" (char) or "merges" (bpe) string, inside "root"
    TokenizerKind tokenizer;   // model: the metadata's "tokenizer"; char when absent
    ModelConfig cfg;           // model: the metadata's config; optimizer: the model's
    long step;                 // the metadata's "step"
    const JsonValue **entries; // [table->count] each expected tensor's entry in "root" (check_tensors)
    uint64_t *begin;           // [table->count] where each one starts in the data section, in bytes
} Loader;

// loader_close: free whatever the steps allocated and close the file.
static void loader_close(Loader *ld) {
    free(ld->entries);
    free(ld->begin);
    json_free(ld->root);
    free(ld->header);
    fclose(ld->f);
}

// kind_name: what a file of "kind" is called in messages.
static const char *kind_name(FileKind kind) { return kind == MODEL_FILE ? "checkpoint" : "optimizer state"; }

// reject: fill "err" with "'<path>' is not a valid tinygpt checkpoint: ..."
// (or "optimizer state"; the rest from "fmt", which should end by saying
// what to do); returns false.
__attribute__((format(printf, 2, 3)))
static bool reject(const Loader *ld, const char *fmt, ...) {
    char prefix[sizeof ld->err->msg];
    snprintf(prefix, sizeof prefix, "'%s' is not a valid tinygpt %s: ", ld->path, kind_name(ld->kind));
    va_list args;
    va_start(args, fmt);
    error_setv(ld->err, prefix, fmt, args);
    va_end(args);
    return false;
}

// read_header: the 8-byte length N, checked against the limits and the file
// size before N bytes are allocated, then the header itself.
static bool read_header(Loader *ld) {
    struct stat st;
    if (fstat(fileno(ld->f), &st) != 0)
        return error_set(ld->err, "cannot read the size of '%s': %s", ld->path, strerror(errno));
    ld->file_size = (uint64_t)st.st_size;
    if (ld->file_size < LENGTH_BYTES)
        return reject(ld, "it is only %llu bytes long, shorter than the 8-byte header length; it is truncated (copy it again) or not a %s",
                      (unsigned long long)ld->file_size, kind_name(ld->kind));

    unsigned char length[LENGTH_BYTES];
    if (!read_exact(length, sizeof length, ld->f, ld->path, ld->err)) return false;
    uint64_t n = 0;
    for (int i = LENGTH_BYTES - 1; i >= 0; i--) n = (n << 8) | length[i];
    uint64_t after = ld->file_size - LENGTH_BYTES;  // bytes after the length field
    if (n < 2)
        return reject(ld, "its header length is %llu bytes, too short for even \"{}\"; was it written by tinygpt train?",
                      (unsigned long long)n);
    if (n > MAX_HEADER_BYTES)
        return reject(ld, "its header length is %llu bytes, more than the %u safetensors allows; it is damaged or not a safetensors file",
                      (unsigned long long)n, MAX_HEADER_BYTES);
    if (n > after)
        return reject(ld, "its header length is %llu bytes but only %llu bytes follow; it is truncated (copy it again) or damaged",
                      (unsigned long long)n, (unsigned long long)after);
    ld->header_len = n;
    ld->data_size = after - n;
    ld->header = xmalloc((size_t)n);
    return read_exact(ld->header, (size_t)n, ld->f, ld->path, ld->err);
}

// parse_header: the header as JSON. safetensors requires it to start with
// '{' (no leading whitespace), which also catches most files of other kinds.
static bool parse_header(Loader *ld) {
    if (ld->header[0] != '{')
        return reject(ld, "its header does not start with '{', so it is not a safetensors file; was it written by tinygpt train?");
    Error json_err;
    if (!json_parse(ld->header, (size_t)ld->header_len, &ld->root, &json_err))
        return reject(ld, "its header is damaged (%s); save it again or retrain", json_err.msg);
    return true;
}

// string_is: whether the JSON string "v" is exactly "text" (it may hold NULs).
static bool string_is(const JsonValue *v, const char *text) {
    return v->string_len == strlen(text) && memcmp(v->string, text, v->string_len) == 0;
}

// metadata_string: the metadata entry "key", which must be a string.
static const JsonValue *metadata_string(Loader *ld, const JsonValue *meta, const char *key) {
    const JsonValue *v = json_get(meta, key);
    if (!v) reject(ld, "its __metadata__ has no \"%s\"; was it written by tinygpt train?", key);
    else if (v->type != JSON_STRING)
        reject(ld, "its __metadata__ \"%s\" is %s, not a string; was it written by tinygpt train?", key,
               json_type_name(v->type));
    return v && v->type == JSON_STRING ? v : NULL;
}

// metadata_long: the metadata entry "key", a string of decimal digits, as a
// number in [0, "max"]. Strict on purpose: no sign, no spaces, no "12abc".
static bool metadata_long(Loader *ld, const JsonValue *meta, const char *key, long max, long *out) {
    const JsonValue *v = metadata_string(ld, meta, key);
    if (!v) return false;
    // 18 digits always fit in a long (whose max is 9.2e18), so strtol cannot overflow.
    bool digits = v->string_len >= 1 && v->string_len <= 18 && strspn(v->string, "0123456789") == v->string_len;
    long value = digits ? strtol(v->string, NULL, 10) : -1;
    if (value < 0 || value > max)
        return reject(ld, "its __metadata__ \"%s\" is \"%s\", not a whole number in [0, %ld]; the file is damaged, retrain",
                      key, show(v->string, v->string_len).text, max);
    *out = value;
    return true;
}

// metadata_u64: the metadata entry "key", a string of 1 to 20 decimal
// digits, as a number that fits in 64 bits. Strict like metadata_long.
static bool metadata_u64(Loader *ld, const JsonValue *meta, const char *key, uint64_t *out) {
    const JsonValue *v = metadata_string(ld, meta, key);
    if (!v) return false;
    bool digits = v->string_len >= 1 && v->string_len <= 20 && strspn(v->string, "0123456789") == v->string_len;
    errno = 0;
    unsigned long long value = digits ? strtoull(v->string, NULL, 10) : 0;
    if (!digits || errno == ERANGE)
        return reject(ld, "its __metadata__ \"%s\" is \"%s\", not a whole number below 2^64; the file is damaged, retrain",
                      key, show(v->string, v->string_len).text);
    *out = value;
    return true;
}

// metadata_double: the metadata entry "key", a non-negative decimal number
// such as "0.100000001" or "1e-05". strtod alone would also skip leading
// spaces and read "nan" or "inf": ask for a digit first.
static bool metadata_double(Loader *ld, const JsonValue *meta, const char *key, double *out) {
    const JsonValue *v = metadata_string(ld, meta, key);
    if (!v) return false;
    char *end;
    double value = strtod(v->string, &end);
    if (!(v->string[0] >= '0' && v->string[0] <= '9') || end != v->string + v->string_len || !isfinite(value))
        return reject(ld, "its __metadata__ \"%s\" is \"%s\", not a decimal number; the file is damaged, retrain", key,
                      show(v->string, v->string_len).text);
    *out = value;
    return true;
}

// read_architecture: "arch" and "n_layer" from the metadata. A file saved
// before gpt existed has neither and is card, whose one block makes n_layer
// 1; a gpt file must say how many blocks it has. n_layer is bounded here,
// before anything sized by it (the parameter table) is allocated.
static bool read_architecture(Loader *ld, const JsonValue *meta, Arch *arch, long *n_layer) {
    *arch = ARCH_CARD;
    if (json_get(meta, "arch")) {
        const JsonValue *name = metadata_string(ld, meta, "arch");
        if (!name) return false;
        if (strlen(name->string) != name->string_len || !arch_from_name(name->string, arch))
            return reject(ld, "its __metadata__ \"arch\" is \"%s\", an architecture this tinygpt does not know (it knows \"card\" and \"gpt\"); load it with the tinygpt that saved it, or retrain",
                          show(name->string, name->string_len).text);
    }
    *n_layer = 1;
    if (json_get(meta, "n_layer")) {
        if (!metadata_long(ld, meta, "n_layer", LONG_MAX, n_layer)) return false;
    } else if (*arch != ARCH_CARD) {
        return reject(ld, "its __metadata__ says \"arch\" is \"%s\" but has no \"n_layer\", the number of blocks; the file is damaged, retrain",
                      arch_name(*arch));
    }
    if (*n_layer < 1 || *n_layer > MODEL_MAX_LAYERS)
        return reject(ld, "its __metadata__ \"n_layer\" is %ld, outside [1, %d]; the file is damaged, retrain",
                      *n_layer, MODEL_MAX_LAYERS);
    if (*arch == ARCH_CARD && *n_layer != 1)
        return reject(ld, "its __metadata__ \"n_layer\" is %ld but \"arch\" is \"card\", which has exactly one block; the file is damaged, retrain",
                      *n_layer);
    return true;
}

// check_format: the metadata's "format" must be the one of ld->kind. The
// other kind's is the likely mix-up (the model and AdamW's state sit side by
// side in a run directory), and the message says which file to give instead.
static bool check_format(Loader *ld, const JsonValue *meta) {
    const JsonValue *format = metadata_string(ld, meta, "format");
    if (!format) return false;
    const char *want = ld->kind == MODEL_FILE ? CHECKPOINT_FORMAT : OPTIMIZER_FORMAT;
    if (string_is(format, want)) return true;
    if (ld->kind == MODEL_FILE && string_is(format, OPTIMIZER_FORMAT))
        return reject(ld, "it holds AdamW's state (format \"%s\"), not a model; give the model.safetensors saved next to it",
                      OPTIMIZER_FORMAT);
    if (ld->kind == OPTIMIZER_FILE && string_is(format, CHECKPOINT_FORMAT))
        return reject(ld, "it is a model checkpoint (format \"%s\"), not AdamW's state; give the optimizer.safetensors saved next to it",
                      CHECKPOINT_FORMAT);
    return reject(ld, "its format is \"%s\" but this tinygpt reads \"%s\"; retrain with this version",
                  show(format->string, format->string_len).text, want);
}

// read_tokenizer_kind: "tokenizer" from the metadata: "bpe", or "char",
// which a file saved before bpe existed means by saying nothing.
static bool read_tokenizer_kind(Loader *ld, const JsonValue *meta) {
    ld->tokenizer = TOKENIZER_CHAR;
    if (!json_get(meta, "tokenizer")) return true;
    const JsonValue *name = metadata_string(ld, meta, "tokenizer");
    if (!name) return false;
    if (string_is(name, "bpe")) ld->tokenizer = TOKENIZER_BPE;
    else if (!string_is(name, "char"))
        return reject(ld, "its __metadata__ \"tokenizer\" is \"%s\", a tokenizer this tinygpt does not know (it knows \"char\" and \"bpe\"); load it with the tinygpt that saved it, or retrain",
                      show(name->string, name->string_len).text);
    return true;
}

// read_metadata: the format marker, the config, the step and the vocabulary
// string. The config must pass model_check_config: it bounds every size, so
// the shape arithmetic that follows cannot overflow.
static bool read_metadata(Loader *ld) {
    const JsonValue *meta = json_get(ld->root, "__metadata__");
    if (!meta || meta->type != JSON_OBJECT)
        return reject(ld, "its header has no \"__metadata__\" object with the vocabulary and sizes; was it written by tinygpt train?");
    if (!check_format(ld, meta)) return false;

    long vocab_size, n_embd, n_head, block_size;
    if (!metadata_long(ld, meta, "vocab_size", INT_MAX, &vocab_size) ||
        !metadata_long(ld, meta, "n_embd", INT_MAX, &n_embd) ||
        !metadata_long(ld, meta, "n_head", INT_MAX, &n_head) ||
        !metadata_long(ld, meta, "block_size", INT_MAX, &block_size) ||
        !metadata_long(ld, meta, "step", LONG_MAX, &ld->step))
        return false;
    double p;
    if (!metadata_double(ld, meta, "dropout", &p)) return false;
    if (!read_tokenizer_kind(ld, meta)) return false;
    ld->vocab = metadata_string(ld, meta, ld->tokenizer == TOKENIZER_BPE ? "merges" : "vocab");
    if (!ld->vocab) return false;
    Arch arch;
    long n_layer, no_layernorm = 0, no_mlp = 0, no_residual = 0;
    if (!read_architecture(ld, meta, &arch, &n_layer)) return false;
    if ((json_get(meta, "no_layernorm") && !metadata_long(ld, meta, "no_layernorm", 1, &no_layernorm)) ||
        (json_get(meta, "no_mlp") && !metadata_long(ld, meta, "no_mlp", 1, &no_mlp)) ||
        (json_get(meta, "no_residual") && !metadata_long(ld, meta, "no_residual", 1, &no_residual)))
        return false;

    ld->cfg = (ModelConfig){.vocab_size = (int)vocab_size,
                            .block_size = (int)block_size,
                            .n_embd = (int)n_embd,
                            .n_head = (int)n_head,
                            .dropout = (float)p,
                            .arch = arch,
                            .n_layer = (int)n_layer,
                            .no_layernorm = no_layernorm != 0,
                            .no_mlp = no_mlp != 0,
                            .no_residual = no_residual != 0};
    Error cfg_err;
    if (!model_check_config(&ld->cfg, &cfg_err))
        return reject(ld, "its __metadata__ describes an impossible model (%s); the file is damaged, retrain",
                      cfg_err.msg);
    return true;
}

// read_optimizer_state: TrainState's optimizer flags. A checkpoint saved
// before they existed trained with plain SGD at a constant rate and no
// clipping: that is what it resumes with.
static bool read_optimizer_state(Loader *ld, const JsonValue *meta, TrainState *state) {
    OptimizerConfig *o = &state->optimizer;
    *o = (OptimizerConfig){.kind = OPT_SGD, .lr = state->lr, .min_lr = state->lr, .beta1 = 0.9, .beta2 = 0.99,
                           .weight_decay = 0.0, .grad_clip = 0.0, .schedule = LR_CONSTANT, .warmup_steps = 0,
                           .decay_steps = state->steps};
    if (!json_get(meta, "optimizer")) return true;
    const JsonValue *kind = metadata_string(ld, meta, "optimizer"), *schedule = metadata_string(ld, meta, "lr_schedule");
    if (!kind || !schedule) return false;
    if (!string_is(kind, "sgd") && !string_is(kind, "adamw"))
        return reject(ld, "its __metadata__ \"optimizer\" is neither \"sgd\" nor \"adamw\"; the file is damaged, retrain");
    if (!string_is(schedule, "constant") && !string_is(schedule, "cosine"))
        return reject(ld, "its __metadata__ \"lr_schedule\" is neither \"constant\" nor \"cosine\"; the file is damaged, retrain");
    o->kind = string_is(kind, "adamw") ? OPT_ADAMW : OPT_SGD;
    o->schedule = string_is(schedule, "cosine") ? LR_COSINE : LR_CONSTANT;
    if (!metadata_long(ld, meta, "warmup", LONG_MAX, &o->warmup_steps) ||
        !metadata_double(ld, meta, "min_lr", &o->min_lr) || !metadata_double(ld, meta, "grad_clip", &o->grad_clip) ||
        !metadata_double(ld, meta, "beta1", &o->beta1) || !metadata_double(ld, meta, "beta2", &o->beta2) ||
        !metadata_double(ld, meta, "weight_decay", &o->weight_decay))
        return false;
    if (!(o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 && o->beta2 < 1) || o->min_lr > 1e6 || o->grad_clip > 1e9 ||
        o->weight_decay > 1e6)
        return reject(ld, "its __metadata__ optimizer settings are out of range (betas in [0, 1), min_lr at most 1e6); the file is damaged, retrain");
    return true;
}

// read_state: the TrainState in the metadata (see checkpoint.h), each value
// in the range the train flags allow, so a damaged file cannot make train
// divide by a zero --eval-interval or draw from a stuck random stream.
static bool read_state(Loader *ld, TrainState *state) {
    const JsonValue *meta = json_get(ld->root, "__metadata__");
    if (!json_get(meta, "batch_rng"))
        return error_set(ld->err, "'%s' holds no training state to resume (it was saved by an older tinygpt); start a new run from its weights with --init",
                         ld->path);
    memset(state, 0, sizeof *state);

    // The text: its length and its fingerprint, and in a file saved before
    // run.json existed, its path (see TrainState).
    if (json_get(meta, "data")) {
        const JsonValue *data = metadata_string(ld, meta, "data");
        if (!data) return false;
        if (data->string_len >= sizeof state->data_path || memchr(data->string, '\0', data->string_len))
            return reject(ld, "its __metadata__ \"data\" is not a file path; the file is damaged, retrain");
        memcpy(state->data_path, data->string, data->string_len + 1);
    }
    if (!metadata_u64(ld, meta, "data_tokens", &state->data_tokens) ||
        !metadata_u64(ld, meta, "data_hash", &state->data_hash))
        return false;

    // The random streams.
    if (!metadata_u64(ld, meta, "seed", &state->seed) || !metadata_u64(ld, meta, "batch_rng", &state->batch_rng))
        return false;
    if (state->batch_rng == 0)
        return reject(ld, "its __metadata__ \"batch_rng\" is 0, a state no run can reach; the file is damaged, retrain");

    // The flags, in the ranges train's flag table allows.
    long steps, batch, eval_interval, eval_batches, save_every;
    double lr, val_fraction;
    if (!metadata_long(ld, meta, "steps", LONG_MAX, &steps) || !metadata_long(ld, meta, "batch", 1 << 20, &batch) ||
        !metadata_long(ld, meta, "eval_interval", INT_MAX, &eval_interval) ||
        !metadata_long(ld, meta, "eval_batches", INT_MAX, &eval_batches) ||
        !metadata_long(ld, meta, "save_every", LONG_MAX, &save_every) || !metadata_double(ld, meta, "lr", &lr) ||
        !metadata_double(ld, meta, "val_fraction", &val_fraction))
        return false;
    if (batch < 1 || eval_interval < 1 || eval_batches < 1)
        return reject(ld, "its __metadata__ \"batch\", \"eval_interval\" and \"eval_batches\" must each be at least 1; the file is damaged, retrain");
    if (lr > 1e6 || val_fraction >= 1.0)
        return reject(ld, "its __metadata__ \"lr\" must be at most 1e6 and \"val_fraction\" below 1; the file is damaged, retrain");
    const JsonValue *order = metadata_string(ld, meta, "order");
    if (!order) return false;
    if (!string_is(order, "random") && !string_is(order, "sequential"))
        return reject(ld, "its __metadata__ \"order\" is neither \"random\" nor \"sequential\"; the file is damaged, retrain");
    memcpy(state->order, order->string, order->string_len + 1);
    state->steps = steps;
    state->batch = (int)batch;
    state->eval_interval = (int)eval_interval;
    state->eval_batches = (int)eval_batches;
    state->save_every = save_every;
    state->lr = (float)lr;
    state->val_fraction = (float)val_fraction;
    return read_optimizer_state(ld, meta, state);
}

// key_is: whether the header entry "entry" is named "name" (keys may hold NULs).
static bool key_is(const JsonValue *entry, const char *name) {
    return entry->key_len == strlen(name) && memcmp(entry->key, name, entry->key_len) == 0;
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
static bool has_block(const Loader *ld, long block) {
    for (size_t i = 0; i < ld->root->count; i++) {
        long b;
        if (block_of(ld->root->items[i].key, ld->root->items[i].key_len, &b) && b == block) return true;
    }
    return false;
}

// A table entry's name and index, for looking names up by binary search:
// a header may hold millions of entries, and a table thousands.
typedef struct {
    const char *name;
    int index;
} NamedIndex;

static int compare_names(const void *a, const void *b) {
    return strcmp(((const NamedIndex *)a)->name, ((const NamedIndex *)b)->name);
}

// check_names: every tensor in the header must be one of "table"'s, and
// every one of "table"'s must be there (the JSON reader has already refused
// a name given twice). Records each tensor's entry in ld->entries. When a
// model's names disagree with n_layer (tensors of a block past the last, or
// none for a block the table has), the message says so.
static bool check_names(Loader *ld, const TensorTable *table) {
    int n = table->count;
    NamedIndex *sorted = xmalloc((size_t)n * sizeof *sorted);
    for (int t = 0; t < n; t++) sorted[t] = (NamedIndex){table->specs[t].name, t};
    qsort(sorted, (size_t)n, sizeof *sorted, compare_names);

    bool ok = true;
    for (size_t i = 0; ok && i < ld->root->count; i++) {
        const JsonValue *entry = &ld->root->items[i];
        if (key_is(entry, "__metadata__")) continue;
        NamedIndex key = {entry->key, 0};
        const NamedIndex *found = strlen(entry->key) == entry->key_len
                                      ? bsearch(&key, sorted, (size_t)n, sizeof *sorted, compare_names)
                                      : NULL;
        if (found) {
            ld->entries[found->index] = entry;
            continue;
        }
        Shown shown = show(entry->key, entry->key_len);
        long block;
        if (ld->kind == OPTIMIZER_FILE)
            ok = reject(ld, "it has a tensor '%s', which is not AdamW's state of this %s model (exp_avg.<parameter> and exp_avg_sq.<parameter> of each of its parameters); give the optimizer.safetensors saved with this model",
                        shown.text, arch_name(ld->cfg.arch));
        else if (block_of(entry->key, entry->key_len, &block) && block >= ld->cfg.n_layer)
            ok = reject(ld, "it has a tensor '%s' of block %ld but its __metadata__ \"n_layer\" is %d (blocks 0 to %d), so n_layer disagrees with the tensors; the file is damaged, retrain",
                        shown.text, block, ld->cfg.n_layer, ld->cfg.n_layer - 1);
        else
            ok = reject(ld, "it has a tensor '%s' that tinygpt's %s model does not have; was it written by tinygpt train with this architecture?",
                        shown.text, arch_name(ld->cfg.arch));
    }
    free(sorted);

    for (int t = 0; ok && t < n; t++) {
        if (ld->entries[t]) continue;
        const char *name = table->specs[t].name;
        long block;
        if (ld->kind == OPTIMIZER_FILE)
            ok = reject(ld, "tensor '%s' is missing; give the optimizer.safetensors saved with this model", name);
        else if (block_of(name, strlen(name), &block) && !has_block(ld, block))
            ok = reject(ld, "tensor '%s' is missing: its __metadata__ \"n_layer\" is %d but it has no tensors of block %ld, so n_layer disagrees with the tensors; the file is damaged, retrain",
                        name, ld->cfg.n_layer, block);
        else
            ok = reject(ld, "tensor '%s' is missing; was it written by tinygpt train?", name);
    }
    return ok;
}

// format_dims: "[a,b]" from "n" dimensions, for messages.
static void format_dims(char *buf, size_t size, const uint64_t *dims, int n) {
    if (n == 1) snprintf(buf, size, "[%llu]", (unsigned long long)dims[0]);
    else snprintf(buf, size, "[%llu,%llu]", (unsigned long long)dims[0], (unsigned long long)dims[1]);
}

// check_tensor: tensor "t" of "table": an object with dtype "F32", the
// table's shape, and data_offsets [begin, end) inside the data section
// holding exactly 4 bytes per element. Saves begin in ld->begin[t].
static bool check_tensor(Loader *ld, const TensorTable *table, int t) {
    const TensorSpec *spec = &table->specs[t];
    const JsonValue *entry = ld->entries[t];
    if (entry->type != JSON_OBJECT)
        return reject(ld, "tensor '%s' is %s, not an object with dtype, shape and data_offsets; was it written by tinygpt train?",
                      spec->name, json_type_name(entry->type));

    const JsonValue *dtype = json_get(entry, "dtype");
    if (!dtype || dtype->type != JSON_STRING)
        return reject(ld, "tensor '%s' has no dtype string; was it written by tinygpt train?", spec->name);
    if (dtype->string_len != 3 || strcmp(dtype->string, "F32") != 0)
        return reject(ld, "tensor '%s' has dtype \"%s\" but tinygpt reads only F32; convert the weights to float32",
                      spec->name, show(dtype->string, dtype->string_len).text);

    // The shape: compare each dimension with the table's, as numbers.
    uint64_t want[2] = {(uint64_t)spec->shape[0], (uint64_t)spec->shape[1]}, got[2] = {0, 0};
    const JsonValue *shape = json_get(entry, "shape");
    bool same = shape && shape->type == JSON_ARRAY && shape->count == (size_t)spec->ndim;
    for (int d = 0; same && d < spec->ndim; d++)
        same = json_as_uint(&shape->items[d], &got[d]) && got[d] == want[d];
    if (!same) {
        char wanted[48], found[48] = "something else";
        format_dims(wanted, sizeof wanted, want, spec->ndim);
        bool readable = shape && shape->type == JSON_ARRAY && (shape->count == 1 || shape->count == 2) &&
                        json_as_uint(&shape->items[0], &got[0]) &&
                        (shape->count == 1 || json_as_uint(&shape->items[1], &got[1]));
        if (readable) format_dims(found, sizeof found, got, (int)shape->count);
        if (ld->kind == OPTIMIZER_FILE)
            return reject(ld, "tensor '%s' has shape %s but this model (vocab_size %d, n_embd %d, block_size %d) needs %s; give the optimizer.safetensors saved with this model",
                          spec->name, found, ld->cfg.vocab_size, ld->cfg.n_embd, ld->cfg.block_size, wanted);
        return reject(ld, "tensor '%s' has shape %s but the metadata (vocab_size %d, n_embd %d, block_size %d) needs %s; the file is damaged, retrain",
                      spec->name, found, ld->cfg.vocab_size, ld->cfg.n_embd, ld->cfg.block_size, wanted);
    }

    // The offsets: inside the data section, and exactly the right length.
    const JsonValue *offsets = json_get(entry, "data_offsets");
    uint64_t begin, end;
    if (!offsets || offsets->type != JSON_ARRAY || offsets->count != 2 || !json_as_uint(&offsets->items[0], &begin) ||
        !json_as_uint(&offsets->items[1], &end) || begin > end)
        return reject(ld, "tensor '%s' has no data_offsets [begin, end] with begin <= end; was it written by tinygpt train?",
                      spec->name);
    if (end > ld->data_size)
        return reject(ld, "tensor '%s' has data_offsets [%llu, %llu] but the data section is only %llu bytes; the file is truncated (copy it again) or damaged",
                      spec->name, (unsigned long long)begin, (unsigned long long)end,
                      (unsigned long long)ld->data_size);
    if (end - begin != (uint64_t)spec->size * sizeof(float))
        return reject(ld, "tensor '%s' spans %llu bytes but its %zu F32 values need %zu; the file is damaged, retrain",
                      spec->name, (unsigned long long)(end - begin), spec->size, spec->size * sizeof(float));
    ld->begin[t] = begin;
    return true;
}

// A tensor's index in the table and where it begins in the data section,
// for sorting by begin.
typedef struct {
    uint64_t begin;
    int index;
} Placed;

static int compare_begins(const void *a, const void *b) {
    const Placed *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);  // ties in table order, for a stable message
}

// check_layout: "table"'s tensors must tile the data section: sorted by
// begin, each starts where the previous one ended, the first at 0, the last
// ending at the end of the file. (Their lengths are already checked, so
// comparing begins is enough.) Without this, two tensors could share bytes,
// or junk could hide between them.
static bool check_layout(Loader *ld, const TensorTable *table) {
    int n = table->count;
    Placed *order = xmalloc((size_t)n * sizeof *order);
    for (int t = 0; t < n; t++) order[t] = (Placed){ld->begin[t], t};
    qsort(order, (size_t)n, sizeof *order, compare_begins);
    uint64_t expected = 0;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const TensorSpec *spec = &table->specs[order[i].index];
        if (order[i].begin != expected)
            ok = reject(ld, "tensor '%s' starts at byte %llu of the data section, but %s; the file is damaged, retrain",
                        spec->name, (unsigned long long)order[i].begin,
                        order[i].begin < expected ? "that overlaps the tensor before it" : "that leaves a gap before it");
        expected += spec->size * sizeof(float);
    }
    free(order);
    if (ok && expected != ld->data_size)
        ok = reject(ld, "its tensors take %llu bytes but its data section has %llu; it has extra bytes at the end, so it is damaged",
                    (unsigned long long)expected, (unsigned long long)ld->data_size);
    return ok;
}

// check_tensors: the header's tensors are exactly "table"'s (check_names),
// each well formed (check_tensor), together tiling the data section
// (check_layout). "table" is what the file must hold: for a model the
// parameter table its metadata describes, which read_architecture has kept
// to a few thousand entries by bounding n_layer; for AdamW's state, the
// moments of the model's parameters (moment_table).
static bool check_tensors(Loader *ld, const TensorTable *table) {
    ld->entries = xcalloc((size_t)table->count, sizeof *ld->entries);
    ld->begin = xcalloc((size_t)table->count, sizeof *ld->begin);
    bool ok = check_names(ld, table);
    for (int t = 0; ok && t < table->count; t++) ok = check_tensor(ld, table, t);
    return ok && check_layout(ld, table);
}

// check_memory: the model and its activations for batches of "max_batch"
// must fit in memory. The weights are in the file, so they fit on disk, but
// the activations grow with the batch and the context squared.
static bool check_memory(Loader *ld, int max_batch, bool with_grads) {
    Error mem_err;
    if (model_check_memory(&ld->cfg, max_batch, with_grads, &mem_err)) return true;
    return error_set(ld->err, "cannot load '%s': %s", ld->path, mem_err.msg);
}

// build_vocab: the tokenizer from the metadata's vocabulary string, which
// must have one character per row of tok_emb (vocab_size of them).
// A bpe file's "merges" must make exactly vocab_size - 256 tokens.
static bool build_vocab(Loader *ld, Tokenizer *tok) {
    Error vocab_err;
    bool bpe = ld->tokenizer == TOKENIZER_BPE;
    bool built = bpe ? tokenizer_from_bpe_merges(tok, ld->vocab->string, ld->vocab->string_len, &vocab_err)
                     : tokenizer_from_vocab(tok, ld->vocab->string, ld->vocab->string_len, &vocab_err);
    if (!built) return reject(ld, "its %s", vocab_err.msg);
    if (tok->vocab_size != ld->cfg.vocab_size) {
        int found = tok->vocab_size;
        tokenizer_free(tok);
        return reject(ld, bpe ? "its merges make %d tokens but vocab_size says %d; the file is damaged, retrain"
                              : "its vocabulary has %d characters but vocab_size says %d; the file is damaged, retrain",
                      found, ld->cfg.vocab_size);
    }
    return true;
}

// read_tensors: each tensor of "table" (checked by check_tensors) into its
// place in "memory" (memory + its offset), then a check that every value is
// finite and at most "limit" in magnitude (MODEL_MAX_WEIGHT for a model's
// weights; AdamW's moments are only checked to be finite: a mean of squared
// gradients may be large and still right). Training stops before it would
// save a NaN, an infinity or a weight beyond MODEL_MAX_WEIGHT (train.c), so
// one means the file is damaged or was not written by tinygpt: say so,
// rather than let eval print a NaN loss or a new run blame its --lr.
static bool read_tensors(Loader *ld, const TensorTable *table, float *memory, float limit) {
    for (int t = 0; t < table->count; t++) {
        const TensorSpec *spec = &table->specs[t];
        float *w = memory + spec->offset;
        off_t at = (off_t)(LENGTH_BYTES + ld->header_len + ld->begin[t]);
        if (fseeko(ld->f, at, SEEK_SET) != 0)
            return error_set(ld->err, "cannot seek in '%s': %s", ld->path, strerror(errno));
        if (!read_exact(w, spec->size * sizeof(float), ld->f, ld->path, ld->err)) return false;
        for (size_t i = 0; i < spec->size; i++) {
            if (!isfinite(w[i]))
                return reject(ld, "tensor '%s' holds %s at element %zu, which training never saves; the file is damaged or not from tinygpt: use another checkpoint, or retrain",
                              spec->name, isnan(w[i]) ? "NaN" : "an infinity", i);
            if (fabsf(w[i]) > limit)
                return reject(ld, "tensor '%s' holds %g at element %zu, beyond the %g a weight may have; the file is damaged or not from tinygpt: use another checkpoint, or retrain",
                              spec->name, (double)w[i], i, (double)limit);
        }
    }
    return true;
}

// checkpoint_read_state: the header steps of checkpoint_load, then the state.
bool checkpoint_read_state(const char *path, TrainState *state, long *step, Error *err) {
    Loader ld = {.path = path, .kind = MODEL_FILE, .err = err};
    ld.f = fopen_checked(path, "rb", err);
    if (!ld.f) return false;
    bool ok = read_header(&ld) && parse_header(&ld) && read_metadata(&ld) && read_state(&ld, state);
    if (ok) *step = ld.step;
    loader_close(&ld);
    return ok;
}

// checkpoint_load: the steps above in order; the model is allocated only
// once the header has passed every check, and freed again if the data fails.
bool checkpoint_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads, long *step,
                     Error *err) {
    Loader ld = {.path = path, .kind = MODEL_FILE, .err = err};
    ld.f = fopen_checked(path, "rb", err);
    if (!ld.f) return false;

    Tokenizer vocab = {0};
    TensorTable params = {0};  // the parameters the metadata describes
    bool ok = read_header(&ld) && parse_header(&ld) && read_metadata(&ld);
    if (ok) param_table(&params, &ld.cfg);
    ok = ok && check_tensors(&ld, &params) && check_memory(&ld, max_batch, with_grads) && build_vocab(&ld, &vocab);
    if (ok) {
        model_init(m, &ld.cfg, max_batch, with_grads);
        // model_init built the same table from the same config.
        assert(m->param_table.count == params.count && m->param_table.total == params.total);
        ok = read_tensors(&ld, &params, m->params_memory, MODEL_MAX_WEIGHT);
        if (!ok) {
            model_free(m);
            tokenizer_free(&vocab);
        }
    }
    if (ok) {
        *tok = vocab;
        if (step) *step = ld.step;
    }
    table_free(&params);
    loader_close(&ld);
    return ok;
}

// ---- AdamW's state ----------------------------------------------------------------
//
// DIR/optimizer.safetensors (see checkpoint.h): the same container, written
// by save_safetensors and checked by the same loader steps. What is its own:
// the metadata, the names (each parameter's, behind "exp_avg." and
// "exp_avg_sq."), and one more check, that exp_avg_sq is never negative.

bool optimizer_state_save(const Optimizer *opt, const Model *m, long step, const char *path, Error *err) {
    assert(opt->cfg.kind == OPT_ADAMW && opt->m && opt->v && opt->size == m->param_table.total);
    assert(step >= 0 && opt->step >= 0);
    JsonBuf metadata = {0};
    json_buf_printf(&metadata, "{\"format\":\"%s\",\"optimizer\":\"adamw\",\"step\":\"%ld\",\"updates\":\"%ld\"}",
                    OPTIMIZER_FORMAT, step, opt->step);
    const TensorGroup moments[2] = {{MOMENT_PREFIX[0], &m->param_table, opt->m},
                                    {MOMENT_PREFIX[1], &m->param_table, opt->v}};
    bool ok = save_safetensors(path, &metadata, moments, 2, err);
    json_buf_free(&metadata);
    return ok;
}

// moment_table: the tensors of AdamW's state for parameters "params", as
// optimizer_state_save writes them: "exp_avg.<name>" of every parameter, then
// "exp_avg_sq.<name>" of every one, each with its parameter's shape, laid
// out over one buffer of 2 * params->total floats: m, then v. table_free
// releases it.
static void moment_table(TensorTable *t, const TensorTable *params) {
    t->count = 2 * params->count;
    t->total = 2 * params->total;
    t->specs = xcalloc((size_t)t->count, sizeof *t->specs);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < params->count; i++) {
            TensorSpec *spec = &t->specs[k * params->count + i];
            *spec = params->specs[i];
            int len = snprintf(spec->name, sizeof spec->name, "%s%s", MOMENT_PREFIX[k], params->specs[i].name);
            assert(len > 0 && (size_t)len < sizeof spec->name);  // the longest, "exp_avg_sq.blocks.1023.attn.proj.weight", fits
            spec->offset += (size_t)k * params->total;
        }
    }
}

// read_adamw_metadata: the format marker, "optimizer" (which must be
// "adamw"), the training "step" the state belongs to and the number of
// "updates" that made it, both whole numbers >= 0.
static bool read_adamw_metadata(Loader *ld, long *updates) {
    const JsonValue *meta = json_get(ld->root, "__metadata__");
    if (!meta || meta->type != JSON_OBJECT)
        return reject(ld, "its header has no \"__metadata__\" object with the format and the step; was it written by tinygpt train?");
    if (!check_format(ld, meta)) return false;
    const JsonValue *name = metadata_string(ld, meta, "optimizer");
    if (!name) return false;
    if (!string_is(name, "adamw"))
        return reject(ld, "its __metadata__ \"optimizer\" is \"%s\" but only AdamW (\"adamw\") keeps a state; the file is damaged: start a new run from the weights with --init",
                      show(name->string, name->string_len).text);
    return metadata_long(ld, meta, "step", LONG_MAX, &ld->step) && metadata_long(ld, meta, "updates", LONG_MAX, updates);
}

// check_second_moments: every exp_avg_sq value (the second half of
// "moments", read into "memory") is a running mean of squares, so it is >= 0
// (-0 included); the square root of a negative one would make the next
// update NaN.
static bool check_second_moments(Loader *ld, const TensorTable *moments, const float *memory) {
    for (int t = moments->count / 2; t < moments->count; t++) {
        const TensorSpec *spec = &moments->specs[t];
        const float *v = memory + spec->offset;
        for (size_t i = 0; i < spec->size; i++)
            if (v[i] < 0.0f)
                return reject(ld, "tensor '%s' holds %g at element %zu, but a mean of squares cannot be negative; the file is damaged: start a new run from the weights with --init",
                              spec->name, (double)v[i], i);
    }
    return true;
}

// optimizer_state_load: the loader's steps against moment_table of m's
// parameters, reading m and v into a buffer of its own; only when all of it
// has passed are they copied into "opt".
bool optimizer_state_load(Optimizer *opt, const Model *m, const char *path, long *step, Error *err) {
    assert(opt->cfg.kind == OPT_ADAMW && opt->m && opt->v && opt->size == m->param_table.total);
    Loader ld = {.path = path, .kind = OPTIMIZER_FILE, .err = err, .cfg = m->config};
    Error open_err;
    ld.f = fopen_checked(path, "rb", &open_err);
    if (!ld.f)
        return error_set(err, "%s; an --optimizer adamw run saves AdamW's moments there with each checkpoint: resume a run that has them, or start a new run from the weights with --init",
                         open_err.msg);

    long updates = 0;
    TensorTable moments = {0};
    float *read = NULL;  // [2 * opt->size] m, then v, as read from the file
    bool ok = read_header(&ld) && parse_header(&ld) && read_adamw_metadata(&ld, &updates);
    if (ok) moment_table(&moments, &m->param_table);
    ok = ok && check_tensors(&ld, &moments);
    if (ok) {
        read = xmalloc(moments.total * sizeof *read);
        ok = read_tensors(&ld, &moments, read, FLT_MAX) && check_second_moments(&ld, &moments, read);
    }
    if (ok) {
        memcpy(opt->m, read, opt->size * sizeof *opt->m);
        memcpy(opt->v, read + opt->size, opt->size * sizeof *opt->v);
        opt->step = updates;
        if (step) *step = ld.step;
    }
    free(read);
    table_free(&moments);
    loader_close(&ld);
    return ok;
}
