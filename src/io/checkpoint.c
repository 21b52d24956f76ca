// checkpoint.c: save and load the model as .safetensors (see checkpoint.h).
//
// Reading order: file 16, after model.c (the parameter table) and json.c.
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
#include "checkpoint.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
// The largest header accepted, the limit the safetensors library itself uses.
#define MAX_HEADER_BYTES (100u * 1000u * 1000u)
// The bytes before the header: N as a little-endian u64.
#define LENGTH_BYTES 8

// ---- Saving -------------------------------------------------------------------

// build_header: the JSON header for "cfg", "tok" and "step", with one entry
// per tensor of "table" at consecutive data offsets, padded with spaces so
// that the data section (at byte 8 + N) starts on an 8-byte boundary, where a
// reader that memory-maps the file can use the floats in place.
static void build_header(JsonBuf *b, const ModelConfig *cfg, const Tokenizer *tok, long step,
                         const TrainState *state, const TensorTable *table) {
    size_t vocab_len;
    char *vocab = tokenizer_vocab_utf8(tok, &vocab_len);
    json_buf_printf(b, "{\"__metadata__\":{\"format\":\"%s\",\"vocab\":", CHECKPOINT_FORMAT);
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
        json_buf_append(b, ",\"data\":", 8);
        json_buf_string(b, state->data_path, strlen(state->data_path));
        json_buf_printf(b, ",\"data_tokens\":\"%llu\",\"data_hash\":\"%llu\",\"seed\":\"%llu\",\"batch_rng\":\"%llu\"",
                        (unsigned long long)state->data_tokens, (unsigned long long)state->data_hash,
                        (unsigned long long)state->seed, (unsigned long long)state->batch_rng);
        json_buf_printf(b, ",\"steps\":\"%ld\",\"batch\":\"%d\",\"lr\":\"%.9g\",\"val_fraction\":\"%.9g\"",
                        state->steps, state->batch, (double)state->lr, (double)state->val_fraction);
        json_buf_printf(b, ",\"eval_interval\":\"%d\",\"eval_batches\":\"%d\",\"save_every\":\"%ld\",\"order\":",
                        state->eval_interval, state->eval_batches, state->save_every);
        json_buf_string(b, state->order, strlen(state->order));
    }
    json_buf_append(b, "}", 1);
    free(vocab);

    size_t begin = 0;
    for (int i = 0; i < table->count; i++) {
        const TensorSpec *spec = &table->specs[i];
        size_t end = begin + spec->size * sizeof(float);
        json_buf_append(b, ",", 1);
        json_buf_string(b, spec->name, strlen(spec->name));
        json_buf_printf(b, ":{\"dtype\":\"F32\",\"shape\":[%zu", spec->shape[0]);
        if (spec->ndim == 2) json_buf_printf(b, ",%zu", spec->shape[1]);
        json_buf_printf(b, "],\"data_offsets\":[%zu,%zu]}", begin, end);
        begin = end;
    }
    json_buf_append(b, "}", 1);
    while ((LENGTH_BYTES + b->len) % 8 != 0) json_buf_append(b, " ", 1);
}

// checkpoint_save: header, then the tensors, into "<path>.tmp"; then fflush
// (our buffer to the kernel), fsync (the kernel's cache to the disk) and
// fclose, each checked, since a full disk may only show up at any of them.
// Only then rename over "path": rename is atomic, so "path" is always either
// the old checkpoint or the complete new one. On any failure the .tmp file is
// removed. Last, fsync the directory: until then a crash could lose the
// rename itself (the old file would survive).
bool checkpoint_save(const Model *m, const Tokenizer *tok, long step, const char *path, Error *err) {
    return checkpoint_save_with_state(m, tok, step, NULL, path, err);
}

// sync_parent_dir: fsync the directory holding "path", which makes a rename
// into it durable. Some file systems cannot sync a directory and say EINVAL;
// there is nothing more to do on those.
static bool sync_parent_dir(const char *path, Error *err) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return error_set(err, "cannot open directory '%s' to flush it: %s", dir, strerror(errno));
    bool ok = fsync(fd) == 0 || errno == EINVAL;
    if (!ok) error_set(err, "error flushing directory '%s' to disk: %s", dir, strerror(errno));
    close(fd);
    return ok;
}

bool checkpoint_save_with_state(const Model *m, const Tokenizer *tok, long step, const TrainState *state,
                                const char *path, Error *err) {
    assert(tok->vocab_size == m->config.vocab_size && step >= 0);
    const TensorTable *table = &m->param_table;
    JsonBuf header = {0};
    build_header(&header, &m->config, tok, step, state, table);

    unsigned char length[LENGTH_BYTES];  // N, little-endian, whatever this machine's byte order
    for (int i = 0; i < LENGTH_BYTES; i++) length[i] = (unsigned char)((uint64_t)header.len >> (8 * i));

    size_t tmp_size = strlen(path) + sizeof ".tmp";
    char *tmp = xmalloc(tmp_size);
    snprintf(tmp, tmp_size, "%s.tmp", path);

    FILE *f = fopen_checked(tmp, "wb", err);
    bool ok = f != NULL;
    ok = ok && write_exact(length, sizeof length, f, tmp, err);
    ok = ok && write_exact(header.data, header.len, f, tmp, err);
    for (int i = 0; i < table->count; i++)
        ok = ok && write_exact(m->params_memory + table->specs[i].offset, table->specs[i].size * sizeof(float), f,
                               tmp, err);
    if (ok && fflush(f) != 0)
        ok = error_set(err, "error writing '%s': %s (is the disk full?)", tmp, strerror(errno));
    if (ok && fsync(fileno(f)) != 0)
        ok = error_set(err, "error flushing '%s' to disk: %s (is the disk full?)", tmp, strerror(errno));
    if (f && fclose(f) != 0 && ok)
        ok = error_set(err, "error closing '%s': %s (is the disk full?)", tmp, strerror(errno));
    if (ok && rename(tmp, path) != 0)
        ok = error_set(err, "cannot rename '%s' to '%s': %s; check that '%s' is not a directory", tmp, path,
                       strerror(errno), path);
    if (!ok && f) remove(tmp);  // only a .tmp we created: f is NULL if it could not be opened
    ok = ok && sync_parent_dir(path, err);

    free(tmp);
    json_buf_free(&header);
    return ok;
}

// ---- Loading --------------------------------------------------------------------

// What checkpoint_load has learned about the file so far; each step below
// fills in some of it, and loader_close frees it at the end, whatever happened.
typedef struct {
    const char *path;          // for messages
    Error *err;
    FILE *f;
    uint64_t file_size;        // bytes
    uint64_t header_len;       // N
    uint64_t data_size;        // bytes in the data section: file_size - 8 - N
    char *header;              // [N] the JSON text
    JsonValue *root;           // the parsed header
    const JsonValue *vocab;    // the metadata's "vocab" string, inside "root"
    ModelConfig cfg;
    long step;
    TensorTable table;         // what the metadata says the tensors must be (param_table)
    const JsonValue **entries; // [table.count] each tensor's entry in "root"
    uint64_t *begin;           // [table.count] where each one starts in the data section, in bytes
} Loader;

// loader_close: free whatever the steps allocated and close the file.
static void loader_close(Loader *ld) {
    if (ld->table.specs) table_free(&ld->table);
    free(ld->entries);
    free(ld->begin);
    json_free(ld->root);
    free(ld->header);
    fclose(ld->f);
}

// reject: fill "err" with "'<path>' is not a valid tinygpt checkpoint: ..."
// (the rest from "fmt", which should end by saying what to do); returns false.
__attribute__((format(printf, 2, 3)))
static bool reject(const Loader *ld, const char *fmt, ...) {
    char detail[400];
    va_list args;
    va_start(args, fmt);
    vsnprintf(detail, sizeof detail, fmt, args);
    va_end(args);
    return error_set(ld->err, "'%s' is not a valid tinygpt checkpoint: %s", ld->path, detail);
}

// printable: "s" ("len" bytes, from the file) cut to fit "buf", with control
// characters (even NUL) shown as '?', so a message stays on one line.
static const char *printable(const char *s, size_t len, char *buf, size_t size) {
    size_t n = 0;
    for (; n < len && n + 1 < size; n++) buf[n] = (unsigned char)s[n] < 0x20 ? '?' : s[n];
    buf[n] = '\0';
    return buf;
}

// read_header: the 8-byte length N, checked against the limits and the file
// size before N bytes are allocated, then the header itself.
static bool read_header(Loader *ld) {
    struct stat st;
    if (fstat(fileno(ld->f), &st) != 0)
        return error_set(ld->err, "cannot read the size of '%s': %s", ld->path, strerror(errno));
    ld->file_size = (uint64_t)st.st_size;
    if (ld->file_size < LENGTH_BYTES)
        return reject(ld, "it is only %llu bytes long, shorter than the 8-byte header length; it is truncated (copy it again) or not a checkpoint",
                      (unsigned long long)ld->file_size);

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
    char shown[48];
    if (value < 0 || value > max)
        return reject(ld, "its __metadata__ \"%s\" is \"%s\", not a whole number in [0, %ld]; the file is damaged, retrain",
                      key, printable(v->string, v->string_len, shown, sizeof shown), max);
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
    char shown[48];
    if (!digits || errno == ERANGE)
        return reject(ld, "its __metadata__ \"%s\" is \"%s\", not a whole number below 2^64; the file is damaged, retrain",
                      key, printable(v->string, v->string_len, shown, sizeof shown));
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
    char shown[48];
    if (!(v->string[0] >= '0' && v->string[0] <= '9') || end != v->string + v->string_len || !isfinite(value))
        return reject(ld, "its __metadata__ \"%s\" is \"%s\", not a decimal number; the file is damaged, retrain", key,
                      printable(v->string, v->string_len, shown, sizeof shown));
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
        char shown[48];
        if (strlen(name->string) != name->string_len || !arch_from_name(name->string, arch))
            return reject(ld, "its __metadata__ \"arch\" is \"%s\", an architecture this tinygpt does not know (it knows \"card\" and \"gpt\"); load it with the tinygpt that saved it, or retrain",
                          printable(name->string, name->string_len, shown, sizeof shown));
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

// read_metadata: the format marker, the config, the step and the vocabulary
// string. The config must pass model_check_config: it bounds every size, so
// the shape arithmetic that follows cannot overflow.
static bool read_metadata(Loader *ld) {
    const JsonValue *meta = json_get(ld->root, "__metadata__");
    if (!meta || meta->type != JSON_OBJECT)
        return reject(ld, "its header has no \"__metadata__\" object with the vocabulary and sizes; was it written by tinygpt train?");
    const JsonValue *format = metadata_string(ld, meta, "format");
    if (!format) return false;
    char shown[48];
    if (format->string_len != strlen(CHECKPOINT_FORMAT) || strcmp(format->string, CHECKPOINT_FORMAT) != 0)
        return reject(ld, "its format is \"%s\" but this tinygpt reads \"%s\"; retrain with this version",
                      printable(format->string, format->string_len, shown, sizeof shown), CHECKPOINT_FORMAT);

    long vocab_size, n_embd, n_head, block_size;
    if (!metadata_long(ld, meta, "vocab_size", INT_MAX, &vocab_size) ||
        !metadata_long(ld, meta, "n_embd", INT_MAX, &n_embd) ||
        !metadata_long(ld, meta, "n_head", INT_MAX, &n_head) ||
        !metadata_long(ld, meta, "block_size", INT_MAX, &block_size) ||
        !metadata_long(ld, meta, "step", LONG_MAX, &ld->step))
        return false;
    double p;
    if (!metadata_double(ld, meta, "dropout", &p)) return false;
    ld->vocab = metadata_string(ld, meta, "vocab");
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

// string_is: whether the JSON string "v" is exactly "text" (it may hold NULs).
static bool string_is(const JsonValue *v, const char *text) {
    return v->string_len == strlen(text) && memcmp(v->string, text, v->string_len) == 0;
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

    // The text: its path, its length and its fingerprint.
    const JsonValue *data = metadata_string(ld, meta, "data");
    if (!data) return false;
    if (data->string_len >= sizeof state->data_path || memchr(data->string, '\0', data->string_len))
        return reject(ld, "its __metadata__ \"data\" is not a file path; the file is damaged, retrain");
    memcpy(state->data_path, data->string, data->string_len + 1);
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
    return true;
}

// key_is: whether the header entry "entry" is named "name" (keys may hold NULs).
static bool key_is(const JsonValue *entry, const char *name) {
    return entry->key_len == strlen(name) && memcmp(entry->key, name, entry->key_len) == 0;
}

// build_table: the parameter table the metadata describes, with room for
// each tensor's entry and offset. read_architecture has bounded n_layer, so
// the table has at most a few thousand entries.
static void build_table(Loader *ld) {
    param_table(&ld->table, &ld->cfg);
    ld->entries = xcalloc((size_t)ld->table.count, sizeof *ld->entries);
    ld->begin = xcalloc((size_t)ld->table.count, sizeof *ld->begin);
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

// check_names: every tensor in the header must be one of the table's, and
// every one of the table's must be there (the JSON reader has already
// refused a name given twice). Records each tensor's entry in ld->entries.
// When the names disagree with n_layer (tensors of a block past the last,
// or none for a block the table has), the message says so.
static bool check_names(Loader *ld) {
    int n = ld->table.count;
    NamedIndex *sorted = xmalloc((size_t)n * sizeof *sorted);
    for (int t = 0; t < n; t++) sorted[t] = (NamedIndex){ld->table.specs[t].name, t};
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
        char shown[64];
        printable(entry->key, entry->key_len, shown, sizeof shown);
        long block;
        if (block_of(entry->key, entry->key_len, &block) && block >= ld->cfg.n_layer)
            ok = reject(ld, "it has a tensor '%s' of block %ld but its __metadata__ \"n_layer\" is %d (blocks 0 to %d), so n_layer disagrees with the tensors; the file is damaged, retrain",
                        shown, block, ld->cfg.n_layer, ld->cfg.n_layer - 1);
        else
            ok = reject(ld, "it has a tensor '%s' that tinygpt's %s model does not have; was it written by tinygpt train with this architecture?",
                        shown, arch_name(ld->cfg.arch));
    }
    free(sorted);

    for (int t = 0; ok && t < n; t++) {
        if (ld->entries[t]) continue;
        const char *name = ld->table.specs[t].name;
        long block;
        if (block_of(name, strlen(name), &block) && !has_block(ld, block))
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

// check_tensor: tensor "t" of the table: an object with dtype "F32", the
// shape the metadata implies, and data_offsets [begin, end) inside the data
// section holding exactly 4 bytes per element. Saves begin in ld->begin[t].
static bool check_tensor(Loader *ld, int t) {
    const TensorSpec *spec = &ld->table.specs[t];
    const JsonValue *entry = ld->entries[t];
    if (entry->type != JSON_OBJECT)
        return reject(ld, "tensor '%s' is %s, not an object with dtype, shape and data_offsets; was it written by tinygpt train?",
                      spec->name, json_type_name(entry->type));

    const JsonValue *dtype = json_get(entry, "dtype");
    if (!dtype || dtype->type != JSON_STRING)
        return reject(ld, "tensor '%s' has no dtype string; was it written by tinygpt train?", spec->name);
    char shown[24];
    if (dtype->string_len != 3 || strcmp(dtype->string, "F32") != 0)
        return reject(ld, "tensor '%s' has dtype \"%s\" but tinygpt reads only F32; convert the weights to float32",
                      spec->name, printable(dtype->string, dtype->string_len, shown, sizeof shown));

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

// check_layout: the tensors must tile the data section: sorted by begin,
// each starts where the previous one ended, the first at 0, the last ending
// at the end of the file. (Their lengths are already checked, so comparing
// begins is enough.) Without this, two tensors could share bytes, or junk
// could hide between them.
static bool check_layout(Loader *ld) {
    int n = ld->table.count;
    Placed *order = xmalloc((size_t)n * sizeof *order);
    for (int t = 0; t < n; t++) order[t] = (Placed){ld->begin[t], t};
    qsort(order, (size_t)n, sizeof *order, compare_begins);
    uint64_t expected = 0;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const TensorSpec *spec = &ld->table.specs[order[i].index];
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
static bool build_vocab(Loader *ld, Tokenizer *tok) {
    Error vocab_err;
    if (!tokenizer_from_vocab(tok, ld->vocab->string, ld->vocab->string_len, &vocab_err))
        return reject(ld, "its %s", vocab_err.msg);
    if (tok->vocab_size != ld->cfg.vocab_size) {
        int found = tok->vocab_size;
        tokenizer_free(tok);
        return reject(ld, "its vocabulary has %d characters but vocab_size says %d; the file is damaged, retrain",
                      found, ld->cfg.vocab_size);
    }
    return true;
}

// read_tensors: each tensor's floats into its place in m->params_memory,
// then a check that every one is finite: a NaN or infinity means the run
// that saved it diverged, and training or sampling from it would only spread
// the NaN.
static bool read_tensors(Loader *ld, Model *m) {
    // model_init built the same table from the same config.
    assert(m->param_table.count == ld->table.count && m->param_table.total == ld->table.total);
    for (int t = 0; t < ld->table.count; t++) {
        const TensorSpec *spec = &ld->table.specs[t];
        float *w = m->params_memory + spec->offset;
        off_t at = (off_t)(LENGTH_BYTES + ld->header_len + ld->begin[t]);
        if (fseeko(ld->f, at, SEEK_SET) != 0)
            return error_set(ld->err, "cannot seek in '%s': %s", ld->path, strerror(errno));
        if (!read_exact(w, spec->size * sizeof(float), ld->f, ld->path, ld->err)) return false;
        for (size_t i = 0; i < spec->size; i++)
            if (!isfinite(w[i]))
                return reject(ld, "tensor '%s' holds %s at element %zu; the run that saved it diverged (retrain with a lower --lr)",
                              spec->name, isnan(w[i]) ? "NaN" : "an infinity", i);
    }
    return true;
}

// checkpoint_read_state: the header steps of checkpoint_load, then the state.
bool checkpoint_read_state(const char *path, TrainState *state, long *step, Error *err) {
    Loader ld = {.path = path, .err = err};
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
    Loader ld = {.path = path, .err = err};
    ld.f = fopen_checked(path, "rb", err);
    if (!ld.f) return false;

    Tokenizer vocab = {0};
    bool ok = read_header(&ld) && parse_header(&ld) && read_metadata(&ld);
    if (ok) build_table(&ld);
    ok = ok && check_names(&ld);
    for (int t = 0; ok && t < ld.table.count; t++) ok = check_tensor(&ld, t);
    ok = ok && check_layout(&ld) && check_memory(&ld, max_batch, with_grads) && build_vocab(&ld, &vocab);
    if (ok) {
        model_init(m, &ld.cfg, max_batch, with_grads);
        ok = read_tensors(&ld, m);
        if (!ok) {
            model_free(m);
            tokenizer_free(&vocab);
        }
    }
    if (ok) {
        *tok = vocab;
        if (step) *step = ld.step;
    }
    loader_close(&ld);
    return ok;
}
