// test_checkpoint.c: tests for src/io/checkpoint.c: saving and loading a
// model as .safetensors, with its vocabulary (or bpe merges), the training
// state `train --resume` reads, and AdamW's state beside it.
//
// Every test starts from the same fixture: a small model whose weights are
// all set (including -0, a denormal and the largest weights the loader
// accepts, which a lossy round trip would change), a vocabulary with a
// quote, a backslash, a newline and multi-byte characters, saved to a fresh
// directory. The model is card (one attention block) or gpt with GPT_LAYERS
// blocks: the loop tests run once on each (fixture_of), the "gpt" cases
// check what only gpt has, and old card files (without "arch") still load.
// The rejection tests then damage that file in one specific way, by editing
// its JSON header as text (and rewriting the 8-byte length to match), or its
// data bytes, and check that loading fails with a one-line message naming
// the file and the problem, and leaves nothing allocated. Then the same
// tools on the training state a checkpoint holds for `train --resume`, on
// AdamW's state (optimizer.safetensors), saved beside the model, and on a
// bpe tokenizer's merges.
#define _GNU_SOURCE  // memmem
#include <dirent.h>
#include <float.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "helpers.h"
#include "json.h"
#include "optimizer.h"
#include "sanitized.h"
#include "tests.h"

// The training "text" the vocabulary is built from: a quote, a backslash and
// a newline (which the JSON header must escape) and 2-, 3- and 4-byte UTF-8.
static const char TEXT[] = "ab \"quoted\"\nline\\ caf\xC3\xA9 \xE2\x80\x94 \xF0\x9F\x98\x80";
static const long STEP = 1234;
// The gpt fixture's number of blocks.
enum { GPT_LAYERS = 2 };

// ---- Fixture --------------------------------------------------------------------

static char dir[64];    // a fresh directory for each test
static char path[128];  // dir/m.safetensors, the fixture's saved checkpoint
// The file the editing helpers below (split, join and those built on them)
// read and rewrite: the checkpoint, or in the optimizer tests AdamW's state.
static const char *edit_target = path;
static Model model;
static Tokenizer tok;
static Arch fixture_arch;  // which architecture the fixture is, for start_over
static TokenizerKind fixture_tokenizer;  // and which tokenizer

// setup_arch: build and save the fixture model, of architecture "arch".
static void setup_arch(Arch arch) {
    fixture_arch = arch;
    edit_target = path;
    scratch_dir_create(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);

    Error err = {{0}};
    TokenizerSpec spec = {fixture_tokenizer, BPE_BYTES + 3, false};
    ck_assert_msg(tokenizer_learn(&tok, &spec, TEXT, sizeof TEXT - 1, "TEXT", &err), "%s", err.msg);
    ModelConfig cfg = {.vocab_size = tok.vocab_size, .block_size = 4, .n_embd = 8, .n_head = 2, .dropout = 0.1f};
    if (arch != ARCH_CARD) {
        cfg.arch = arch;
        cfg.n_layer = GPT_LAYERS;
    }
    if (arch == ARCH_GPT2) cfg.mlp = MLP_GELU_TANH;  // GPT-2's, kept as "mlp"
    ck_assert_msg(model_check_config(&cfg, &err), "%s", err.msg);
    model_init(&model, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 7);
    model_init_weights(&model, &rng);
    model.params_memory[0] = -0.0f;
    model.params_memory[1] = 1e-45f;  // the smallest denormal
    // The largest float below the bound (all of its mantissa bits set, so
    // printing it with %g would round it), and the bound itself.
    model.params_memory[2] = nextafterf(MODEL_MAX_WEIGHT, 0.0f);
    if (arch == ARCH_CARD) {
        model.params.head_bias[0] = -MODEL_MAX_WEIGHT;
    } else {
        const TensorSpec *lnf = table_find(&model.param_table, "ln_f.weight");
        ck_assert_ptr_nonnull(lnf);
        model.params_memory[lnf->offset] = -MODEL_MAX_WEIGHT;
    }
    ck_assert_msg(checkpoint_save(&model, &tok, STEP, path, &err), "%s", err.msg);
}

// setup / setup_gpt: the card and the gpt fixtures.
static void setup(void) {
    fixture_tokenizer = TOKENIZER_CHAR;
    setup_arch(ARCH_CARD);
}
static void setup_gpt(void) {
    fixture_tokenizer = TOKENIZER_CHAR;
    setup_arch(ARCH_GPT);
}
// setup_bpe: a card whose tokenizer is bpe, 3 merges learned from TEXT.
static void setup_bpe(void) {
    fixture_tokenizer = TOKENIZER_BPE;
    setup_arch(ARCH_CARD);
}

// teardown: free the fixture and delete the directory with whatever the test
// left in it: files and empty directories. In process, unlike
// scratch_dir_remove's `rm -rf`: start_over calls it once per damaged case.
static void teardown(void) {
    model_free(&model);
    tokenizer_free(&tok);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char file[512];
            snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
            if (remove(file) != 0) rmdir(file);
        }
        closedir(d);
    }
    rmdir(dir);
}

// start_over: a fresh fixture, for a test that damages the file once per case.
static void start_over(void) {
    Arch arch = fixture_arch;
    teardown();
    setup_arch(arch);
}

// The loop tests run on both fixtures: _i = 0 on card, _i = 1 on gpt (the
// round trip's also _i = 2, on gpt2 with the tanh GELU).
static const Arch FIXTURE_ARCHES[] = {ARCH_CARD, ARCH_GPT, ARCH_GPT2};

// fixture_of: make the fixture (setup's card one) the one of architecture
// FIXTURE_ARCHES[i], and return that architecture's name, for the messages.
static const char *fixture_of(int i) {
    if (fixture_arch != FIXTURE_ARCHES[i]) {
        teardown();
        setup_arch(FIXTURE_ARCHES[i]);
    }
    return arch_name(fixture_arch);
}

// ---- Helpers: reading and rewriting the file ----------------------------------

// A checkpoint cut into its two parts.
typedef struct {
    char *header;  // [header_len + 1] the JSON text, NUL-terminated
    size_t header_len;
    char *data;    // [data_len] the data section
    size_t data_len;
} Parts;

// length_at: the little-endian u64 at "bytes".
static uint64_t length_at(const char *bytes) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)bytes[i];
    return n;
}

// split: the edited file's header and data section.
static Parts split(void) {
    size_t len;
    char *bytes = slurp(edit_target, &len);
    Parts p;
    p.header_len = (size_t)length_at(bytes);
    ck_assert(8 + p.header_len <= len);
    p.header = xmalloc(p.header_len + 1);
    memcpy(p.header, bytes + 8, p.header_len);
    p.header[p.header_len] = '\0';
    p.data_len = len - 8 - p.header_len;
    p.data = xmalloc(p.data_len + 1);
    memcpy(p.data, bytes + 8 + p.header_len, p.data_len);
    free(bytes);
    return p;
}

// join: write "p" back to the edited file, with the length of its (maybe
// edited) header, resealed (helpers.h), so the loader's later checks see
// the edit instead of the checksum.
static void join(const Parts *p) {
    size_t len = 8 + p->header_len + p->data_len;
    char *bytes = xmalloc(len);
    for (int i = 0; i < 8; i++) bytes[i] = (char)((uint64_t)p->header_len >> (8 * i));
    memcpy(bytes + 8, p->header, p->header_len);
    memcpy(bytes + 8 + p->header_len, p->data, p->data_len);
    reseal(bytes, len);
    write_bytes(edit_target, bytes, len);
    free(bytes);
}

// free_parts: release what split allocated.
static void free_parts(Parts *p) {
    free(p->header);
    free(p->data);
}

// set_header: replace the header with "json" (a new, correct length).
static void set_header(Parts *p, const char *json) {
    free(p->header);
    p->header_len = strlen(json);
    p->header = xmalloc(p->header_len + 1);
    memcpy(p->header, json, p->header_len + 1);
}

// replace_span: the header with bytes [begin, end) replaced by "to".
static void replace_span(Parts *p, size_t begin, size_t end, const char *to) {
    size_t to_len = strlen(to);
    char *s = xmalloc(p->header_len - (end - begin) + to_len + 1);
    memcpy(s, p->header, begin);
    memcpy(s + begin, to, to_len);
    memcpy(s + begin + to_len, p->header + end, p->header_len - end + 1);
    free(p->header);
    p->header = s;
    p->header_len = p->header_len - (end - begin) + to_len;
}

// find: the offset of "what" in the header at or after "from"; it must be there.
static size_t find(const Parts *p, const char *what, size_t from) {
    const char *at = strstr(p->header + from, what);
    ck_assert_msg(at != NULL, "the header has no %s:\n%s", what, p->header);
    return (size_t)(at - p->header);
}

// edit_header: in the fixture file, replace the first "from" in the header by "to".
static void edit_header(const char *from, const char *to) {
    Parts p = split();
    size_t at = find(&p, from, 0);
    replace_span(&p, at, at + strlen(from), to);
    join(&p);
    free_parts(&p);
}

// set_metadata: in the fixture file, give metadata "key" the string "value"
// ("len" bytes), escaped for JSON.
static void set_metadata(const char *key, const char *value, size_t len) {
    Parts p = split();
    char quoted_key[64];
    snprintf(quoted_key, sizeof quoted_key, "\"%s\":\"", key);
    size_t begin = find(&p, quoted_key, 0) + strlen(quoted_key) - 1;  // the value's opening quote
    size_t end = begin + 1;
    while (p.header[end] != '"') end += p.header[end] == '\\' ? 2 : 1;
    JsonBuf quoted = {0};
    json_buf_string(&quoted, value, len);
    replace_span(&p, begin, end + 1, quoted.data);
    json_buf_free(&quoted);
    join(&p);
    free_parts(&p);
}

// set_offsets_in: give tensor "name" the data_offsets [begin, end] in "p".
static void set_offsets_in(Parts *p, const char *name, size_t begin, size_t end) {
    char key[96], value[64];
    snprintf(key, sizeof key, "\"%s\":{", name);
    size_t from = find(p, "\"data_offsets\":[", find(p, key, 0)) + strlen("\"data_offsets\":[");
    size_t to = find(p, "]", from);
    snprintf(value, sizeof value, "%zu,%zu", begin, end);
    replace_span(p, from, to, value);
}

// set_offsets: the same, in the fixture file.
static void set_offsets(const char *name, size_t begin, size_t end) {
    Parts p = split();
    set_offsets_in(&p, name, begin, end);
    join(&p);
    free_parts(&p);
}

// remove_tensor: delete tensor "name"'s entry, from its leading comma to its '}'.
static void remove_tensor(const char *name) {
    Parts p = split();
    char key[64];
    snprintf(key, sizeof key, ",\"%s\":{", name);
    size_t begin = find(&p, key, 0);
    replace_span(&p, begin, find(&p, "}", begin) + 1, "");
    join(&p);
    free_parts(&p);
}

// index_of: the index of tensor "name" in the fixture model's parameter table.
static int index_of(const char *name) {
    const TensorSpec *spec = table_find(&model.param_table, name);
    ck_assert_msg(spec != NULL, "the model has no tensor '%s'", name);
    return (int)(spec - model.param_table.specs);
}

// begin_of / end_of: where the saver put tensor "t" in the data section, in
// bytes: the tensors one after another, in table order.
static size_t begin_of(int t) {
    size_t begin = 0;
    for (int i = 0; i < t; i++) begin += model.param_table.specs[i].size * sizeof(float);
    return begin;
}
static size_t end_of(int t) { return begin_of(t) + model.param_table.specs[t].size * sizeof(float); }

// set_float: overwrite element "index" of tensor "t" in the data section.
static void set_float(int t, size_t index, float value) {
    Parts p = split();
    memcpy(p.data + begin_of(t) + index * sizeof(float), &value, sizeof value);
    join(&p);
    free_parts(&p);
}

// add_tensor: a header entry for tensor "name" of shape "shape" (JSON),
// inserted just before tensor "before"'s. Its offsets are [0,4]: the names
// are checked before any offset, so they do not matter.
static void add_tensor(const char *name, const char *shape, const char *before) {
    char from[64], to[256];
    snprintf(from, sizeof from, ",\"%s\":{", before);
    snprintf(to, sizeof to, ",\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[0,4]},\"%s\":{", name,
             shape, before);
    edit_header(from, to);
}

// ---- Helpers: loading ---------------------------------------------------------

// heap_in_use: the bytes malloc has handed out and not had back, in every
// arena and in mmap'd blocks; 0 under AddressSanitizer, which owns malloc
// (its leak checker, run by `make sanitize`, catches leaks there instead).
static size_t heap_in_use(void) {
#if TINYGPT_SANITIZED
    return 0;
#else
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
#endif
}

// One checkpoint_load call and what it returned (see load_measured).
typedef struct {
    const char *file;
    Model m;
    Tokenizer t;
    long step;  // -1 before the call
    Error err;
    bool loaded;
} Load;

static void *run_load(void *arg) {
    Load *load = arg;
    load->loaded = checkpoint_load(load->file, &load->m, &load->t, 1, false, &load->step, &load->err);
    return NULL;
}

static void *touch_heap(void *arg) {
    free(xmalloc(16));
    return arg;
}

// run_on_a_thread: "fn"("arg") on a new thread, waited for.
static void run_on_a_thread(void *(*fn)(void *), void *arg) {
    pthread_t thread;
    ck_assert_int_eq(pthread_create(&thread, NULL, fn, arg), 0);
    ck_assert_int_eq(pthread_join(thread, NULL), 0);
}

// heap_left_by: run "fn"("arg") (a load) and return the bytes of heap the
// call left allocated. It runs on a thread of its own because glibc keeps a
// thread's recently freed small blocks in a cache (tcache) that mallinfo2
// counts as in use, and empties it into the heap only when the thread ends.
// The first call starts one thread more, unmeasured, which leaves the arena
// and the stack that later threads reuse. Under AddressSanitizer there is
// nothing to measure, and threads are slow to start: "fn" runs on this
// thread and 0 is returned.
static ptrdiff_t heap_left_by(void *(*fn)(void *), void *arg) {
    if (TINYGPT_SANITIZED) {
        fn(arg);
        return 0;
    }
    static bool warm;
    if (!warm) run_on_a_thread(touch_heap, NULL);
    warm = true;
    size_t before = heap_in_use();
    run_on_a_thread(fn, arg);
    return (ptrdiff_t)(heap_in_use() - before);
}

// load_measured: checkpoint_load "file" into "load" and return the bytes of
// heap the call left allocated.
static ptrdiff_t load_measured(Load *load, const char *file) {
    *load = (Load){.file = file, .step = -1};
    return heap_left_by(run_load, load);
}

// expect_file_rejected: loading "file" must fail with one line that names
// the file and contains "needle", and leave nothing allocated. Each
// failure names the fixture's architecture.
static void expect_file_rejected(const char *file, const char *needle) {
    const char *arch = arch_name(fixture_arch);
    Load load;
    ptrdiff_t leaked = load_measured(&load, file);
    const char *msg = load.err.msg;
    ck_assert_msg(!load.loaded, "%s: a damaged file loaded (wanted '%s')", arch, needle);
    ck_assert_msg(leaked == 0, "%s: a failed load left %td bytes allocated (wanted '%s'): %s", arch, leaked, needle,
                  msg);
    ck_assert_msg(strstr(msg, file) != NULL, "%s: the message must name the file: %s", arch, msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "%s: the message must mention '%s': %s", arch, needle, msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "%s: the message must be one line: %s", arch, msg);
    ck_assert_msg(load.step == -1, "%s: a failed load set the step to %ld", arch, load.step);  // untouched
}

// expect_rejected: the same for the fixture file.
static void expect_rejected(const char *needle) { expect_file_rejected(path, needle); }

// load_ok: load the fixture file (which must succeed) into "m" and "t".
static long load_ok(Model *m, Tokenizer *t, int max_batch, bool with_grads) {
    long step = -1;
    Error err = {{0}};
    ck_assert_msg(checkpoint_load(path, m, t, max_batch, with_grads, &step, &err), "%s: %s", arch_name(fixture_arch),
                  err.msg);
    return step;
}

// expect_loads_as_the_fixture: the fixture file loads, as the fixture's
// architecture and number of blocks, with every weight bit for bit; for
// sampling (one row, no gradients), or "with_grads" for training (a batch
// of 2).
static void expect_loads_as_the_fixture(bool with_grads) {
    const char *arch = arch_name(fixture_arch);
    Model m;
    Tokenizer t;
    long step = load_ok(&m, &t, with_grads ? 2 : 1, with_grads);
    ck_assert_msg(step == STEP, "%s: step %ld, saved %ld", arch, step, STEP);
    ck_assert_msg(m.config.arch == model.config.arch, "%s: loaded as %s", arch, arch_name(m.config.arch));
    ck_assert_msg(model_layers(&m.config) == model_layers(&model.config), "%s: %d blocks loaded, %d saved", arch,
                  model_layers(&m.config), model_layers(&model.config));
    ck_assert_msg(m.param_table.count == model.param_table.count, "%s: %d tensors loaded, %d saved", arch,
                  m.param_table.count, model.param_table.count);
    for (int i = 0; i < model.param_table.count; i++)
        ck_assert_msg(strcmp(m.param_table.specs[i].name, model.param_table.specs[i].name) == 0,
                      "%s: tensor %d loaded as %s, saved as %s", arch, i, m.param_table.specs[i].name,
                      model.param_table.specs[i].name);
    ck_assert_msg(m.param_table.total == model.param_table.total, "%s: %zu weights loaded, %zu saved", arch,
                  m.param_table.total, model.param_table.total);
    ck_assert_msg(memcmp(m.params_memory, model.params_memory, model.param_table.total * sizeof(float)) == 0,
                  "%s: the loaded weights differ from the saved ones", arch);
    model_free(&m);
    tokenizer_free(&t);
}

// ---- Round trip -----------------------------------------------------------------

// Loop test: _i = 0 on card, _i = 1 on gpt; loaded for sampling and for
// training.
START_TEST(save_then_load_restores_every_weight_bit_exactly) {
    fixture_of(_i);
    expect_loads_as_the_fixture(false);
    expect_loads_as_the_fixture(true);
}
END_TEST

// Loop test: _i = 0 on card (one block), _i = 1 on gpt (GPT_LAYERS blocks).
START_TEST(save_then_load_restores_config_vocabulary_and_step) {
    const char *arch = fixture_of(_i);
    const int layers = FIXTURE_ARCHES[_i] != ARCH_CARD ? GPT_LAYERS : 1;
    Model m;
    Tokenizer t;
    long step = load_ok(&m, &t, 3, true);
    ck_assert_msg(step == STEP, "%s: step %ld, saved %ld", arch, step, STEP);
    const struct {
        const char *name;
        long loaded, saved;
    } ints[] = {
        {"vocab_size", m.config.vocab_size, model.config.vocab_size},
        {"block_size", m.config.block_size, model.config.block_size},
        {"n_embd", m.config.n_embd, model.config.n_embd},
        {"n_head", m.config.n_head, model.config.n_head},
        {"arch", m.config.arch, FIXTURE_ARCHES[_i]},
        {"mlp", m.config.mlp, model.config.mlp},
        {"n_layer", m.config.n_layer, layers},
        {"model_layers", model_layers(&m.config), layers},
        {"max_batch", m.max_batch, 3},
        {"the tokenizer's vocab_size", t.vocab_size, tok.vocab_size},
        {"the id of '\"'", tokenizer_id(&t, '"'), tokenizer_id(&tok, '"')},
        {"the id of U+1F600", tokenizer_id(&t, 0x1F600), tokenizer_id(&tok, 0x1F600)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        ck_assert_msg(ints[i].loaded == ints[i].saved, "%s: %s is %ld, expected %ld", arch, ints[i].name,
                      ints[i].loaded, ints[i].saved);
    ck_assert_msg(memcmp(&m.config.dropout, &model.config.dropout, sizeof(float)) == 0,  // bit-exact
                  "%s: dropout %.9g, saved %.9g", arch, (double)m.config.dropout, (double)model.config.dropout);
    ck_assert_msg(m.grads_memory != NULL, "%s: loaded for training, but without gradients", arch);
    ck_assert_msg(memcmp(t.chars.codepoints, tok.chars.codepoints, (size_t)tok.vocab_size * sizeof(uint32_t)) == 0,
                  "%s: the vocabulary's characters differ", arch);
    model_free(&m);
    tokenizer_free(&t);
}
END_TEST

START_TEST(load_accepts_a_null_step_pointer) {
    Model m;
    Tokenizer t;
    Error err = {{0}};
    ck_assert_msg(checkpoint_load(path, &m, &t, 1, false, NULL, &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&t);
}
END_TEST

// Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(saving_a_loaded_checkpoint_gives_identical_bytes) {
    const char *arch = fixture_of(_i);
    Model m;
    Tokenizer t;
    long step = load_ok(&m, &t, 1, false);
    char again[160];
    snprintf(again, sizeof again, "%s/again.safetensors", dir);
    Error err = {{0}};
    ck_assert_msg(checkpoint_save(&m, &t, step, again, &err), "%s: %s", arch, err.msg);
    size_t len1, len2;
    char *first = slurp(path, &len1), *second = slurp(again, &len2);
    ck_assert_msg(len1 == len2, "%s: %zu bytes saved again, %zu the first time", arch, len2, len1);
    ck_assert_msg(memcmp(first, second, len1) == 0, "%s: the bytes saved again differ", arch);
    free(first);
    free(second);
    model_free(&m);
    tokenizer_free(&t);
}
END_TEST

START_TEST(save_leaves_no_tmp_file_behind) {
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_ne(stat(tmp, &st), 0);
}
END_TEST

START_TEST(save_replaces_an_existing_checkpoint) {
    model.params.head_bias[1] = 42.0f;
    Error err = {{0}};
    ck_assert_msg(checkpoint_save(&model, &tok, STEP + 1, path, &err), "%s", err.msg);
    Model m;
    Tokenizer t;
    ck_assert_int_eq(load_ok(&m, &t, 1, false), STEP + 1);
    ck_assert(m.params.head_bias[1] == 42.0f);
    model_free(&m);
    tokenizer_free(&t);
}
END_TEST

START_TEST(save_over_a_directory_fails_and_removes_its_tmp_file) {
    char sub[160], tmp[170];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", sub);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    Error err = {{0}};
    ck_assert(!checkpoint_save(&model, &tok, STEP, sub, &err));
    ck_assert_msg(strstr(err.msg, sub) != NULL, "%s", err.msg);
    struct stat st;
    ck_assert_int_ne(stat(tmp, &st), 0);
}
END_TEST

START_TEST(save_into_a_missing_directory_fails_naming_the_file) {
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/dir/m.safetensors", dir);
    Error err = {{0}};
    ck_assert(!checkpoint_save(&model, &tok, STEP, missing, &err));
    ck_assert_msg(strstr(err.msg, missing) != NULL, "%s", err.msg);
}
END_TEST

// ---- The file itself ------------------------------------------------------------

START_TEST(saved_file_has_the_safetensors_byte_layout) {
    size_t len;
    char *bytes = slurp(path, &len);
    uint64_t n = length_at(bytes);  // [0, 8): N, little-endian
    ck_assert_uint_eq(bytes[8], '{');                                  // [8, 8+N): the JSON header
    ck_assert_uint_eq((8 + n) % 8, 0);                                 // data starts 8-byte aligned
    size_t total = model.param_table.total;
    ck_assert_uint_eq(end_of(model.param_table.count - 1), total * sizeof(float));  // no gaps between tensors
    ck_assert_uint_eq(len, 8 + n + total * sizeof(float));             // [8+N, end): the floats
    ck_assert_mem_eq(bytes + 8 + n, model.params_memory, total * sizeof(float));
    size_t end = 8 + (size_t)n;  // any padding after the closing '}' is spaces
    while (bytes[end - 1] == ' ') end--;
    ck_assert_uint_eq(bytes[end - 1], '}');
    ck_assert_uint_lt(8 + n - end, 8);
    free(bytes);
}
END_TEST

// The tensors a checkpoint must list, in order, with their shapes ("dims[1]"
// is 0 for a 1-D tensor): what docs/checkpoints.md, "The file format", specifies, written out
// here rather than taken from param_table, so the test also checks the table.
typedef struct {
    char name[48];
    size_t dims[2];
} Expected;

// expected_tensors: the list for the fixture model (the caller frees).
static Expected *expected_tensors(int *count) {
    size_t V = (size_t)model.config.vocab_size, T = (size_t)model.config.block_size, C = (size_t)model.config.n_embd;
    int L = fixture_arch == ARCH_GPT ? GPT_LAYERS : 1;
    Expected *e = xcalloc(3 + 8 * (size_t)L, sizeof *e);
    int n = 0;
#define ADD(d0, d1, ...) (snprintf(e[n].name, sizeof e[n].name, __VA_ARGS__), e[n].dims[0] = (d0), e[n++].dims[1] = (d1))
    ADD(V, C, "tok_emb.weight");
    ADD(T, C, "pos_emb.weight");
    if (fixture_arch == ARCH_CARD) {
        ADD(C, C, "blocks.0.attn.q.weight");
        ADD(C, C, "blocks.0.attn.k.weight");
        ADD(C, C, "blocks.0.attn.v.weight");
        ADD(C, C, "blocks.0.attn.proj.weight");
        ADD(C, 0, "blocks.0.attn.proj.bias");
        ADD(V, C, "head.weight");
        ADD(V, 0, "head.bias");
    } else {
        for (int i = 0; i < L; i++) {
            ADD(C, 0, "blocks.%d.ln1.weight", i);
            ADD(C, C, "blocks.%d.attn.q.weight", i);
            ADD(C, C, "blocks.%d.attn.k.weight", i);
            ADD(C, C, "blocks.%d.attn.v.weight", i);
            ADD(C, C, "blocks.%d.attn.proj.weight", i);
            ADD(C, 0, "blocks.%d.ln2.weight", i);
            ADD(4 * C, C, "blocks.%d.mlp.fc.weight", i);
            ADD(C, 4 * C, "blocks.%d.mlp.proj.weight", i);
        }
        ADD(C, 0, "ln_f.weight");  // and no head: it is tok_emb
    }
#undef ADD
    *count = n;
    return e;
}

// check_saved_header: the fixture file's header lists exactly the expected
// tensors, in table order, each with its dtype, shape and the offsets of
// its bytes, which hold the model's weights.
static void check_saved_header(void) {
    Parts p = split();
    JsonValue *root = NULL;
    Error err = {{0}};
    ck_assert_msg(json_parse(p.header, p.header_len, &root, &err), "%s", err.msg);
    int count;
    Expected *want = expected_tensors(&count);
    ck_assert_int_eq(model.param_table.count, count);
    ck_assert_uint_eq(root->count, 1 + (size_t)count);
    ck_assert_str_eq(root->items[0].key, "__metadata__");
    for (int t = 0; t < count; t++) {
        const TensorSpec *spec = &model.param_table.specs[t];
        const JsonValue *entry = &root->items[1 + t];  // in parameter-table order
        ck_assert_str_eq(spec->name, want[t].name);
        ck_assert_str_eq(entry->key, want[t].name);
        ck_assert_str_eq(json_get(entry, "dtype")->string, "F32");
        const JsonValue *shape = json_get(entry, "shape");
        int ndim = want[t].dims[1] ? 2 : 1;
        ck_assert_int_eq(spec->ndim, ndim);
        ck_assert_uint_eq(shape->count, (size_t)ndim);
        for (int d = 0; d < ndim; d++) {
            ck_assert_uint_eq(spec->shape[d], want[t].dims[d]);
            ck_assert(shape->items[d].number == want[t].dims[d]);
        }
        const JsonValue *offsets = json_get(entry, "data_offsets");
        uint64_t begin, end;
        ck_assert(json_as_uint(&offsets->items[0], &begin) && json_as_uint(&offsets->items[1], &end));
        ck_assert_uint_eq(begin, begin_of(t));
        ck_assert_uint_eq(end, end_of(t));
        ck_assert_uint_eq(end - begin, spec->size * sizeof(float));
        ck_assert_mem_eq(p.data + begin, model.params_memory + spec->offset, end - begin);
    }
    free(want);
    json_free(root);
    free_parts(&p);
}

START_TEST(saved_header_lists_each_tensor_with_its_shape_and_offsets) {
    check_saved_header();
}
END_TEST

START_TEST(saved_metadata_holds_strings_for_vocab_sizes_dropout_and_step) {
    Parts p = split();
    JsonValue *root = NULL;
    Error err = {{0}};
    ck_assert_msg(json_parse(p.header, p.header_len, &root, &err), "%s", err.msg);
    const JsonValue *meta = json_get(root, "__metadata__");
    size_t vocab_len;
    char *vocab = tokenizer_vocab_utf8(&tok, &vocab_len);
    const JsonValue *saved_vocab = json_get(meta, "vocab");
    ck_assert_uint_eq(saved_vocab->string_len, vocab_len);
    ck_assert_mem_eq(saved_vocab->string, vocab, vocab_len);
    char want[32];
    snprintf(want, sizeof want, "%d", tok.vocab_size);
    ck_assert_str_eq(json_get(meta, "vocab_size")->string, want);
    ck_assert_str_eq(json_get(meta, "n_embd")->string, "8");
    ck_assert_str_eq(json_get(meta, "n_head")->string, "2");
    ck_assert_str_eq(json_get(meta, "block_size")->string, "4");
    ck_assert_str_eq(json_get(meta, "arch")->string, "card");
    ck_assert_str_eq(json_get(meta, "n_layer")->string, "1");
    ck_assert_str_eq(json_get(meta, "dropout")->string, "0.100000001");  // 0.1f to 9 digits
    ck_assert_str_eq(json_get(meta, "step")->string, "1234");
    ck_assert_str_eq(json_get(meta, "format")->string, "tinygpt-2");
    for (size_t i = 0; i < meta->count; i++) ck_assert_int_eq(meta->items[i].type, JSON_STRING);
    free(vocab);
    json_free(root);
    free_parts(&p);
}
END_TEST

// store_tensors_in_reverse: rewrite the fixture's data section with the
// tensors in reverse table order, each entry's offsets moved with it.
static void store_tensors_in_reverse(void) {
    Parts p = split();
    char *data = xmalloc(p.data_len);
    size_t at = 0;
    for (int t = model.param_table.count - 1; t >= 0; t--) {
        size_t bytes = end_of(t) - begin_of(t);
        memcpy(data + at, p.data + begin_of(t), bytes);
        set_offsets_in(&p, model.param_table.specs[t].name, at, at + bytes);
        at += bytes;
    }
    free(p.data);
    p.data = data;
    join(&p);
    free_parts(&p);
}

// Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(load_accepts_tensors_stored_in_another_order) {
    fixture_of(_i);
    store_tensors_in_reverse();
    expect_loads_as_the_fixture(false);
}
END_TEST

START_TEST(load_accepts_an_edited_header_with_no_padding) {
    // The rejection tests below edit the header with these same tools; this
    // shows the tools alone do not break the file.
    Parts p = split();
    while (p.header[p.header_len - 1] == ' ') p.header[--p.header_len] = '\0';
    join(&p);
    free_parts(&p);
    edit_header("\"dtype\":\"F32\"", "\"dtype\":\"F32\"");
    int head_bias = index_of("head.bias");
    set_offsets("head.bias", begin_of(head_bias), end_of(head_bias));
    set_metadata("step", "99", 2);
    Model m;
    Tokenizer t;
    ck_assert_int_eq(load_ok(&m, &t, 1, false), 99);
    model_free(&m);
    tokenizer_free(&t);
}
END_TEST

// ---- Rejecting damaged files: the container --------------------------------------

START_TEST(load_of_a_missing_file_fails_naming_it) {
    char missing[160];
    snprintf(missing, sizeof missing, "%s/missing.safetensors", dir);
    expect_file_rejected(missing, "no such file; check the name");
}
END_TEST

// Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(load_rejects_the_file_truncated_at_every_length) {
    const char *arch = fixture_of(_i);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    size_t len = (size_t)st.st_size;
    // Shorten the file one byte at a time, from one byte short down to empty.
    for (size_t n = len; n-- > 0;) {
        ck_assert_int_eq(truncate(path, (off_t)n), 0);
        Load load;
        ptrdiff_t leaked = load_measured(&load, path);
        ck_assert_msg(!load.loaded && strstr(load.err.msg, path) != NULL,
                      "%s: cut at %zu of %zu bytes: loaded=%d, '%s'", arch, n, len, load.loaded, load.err.msg);
        ck_assert_msg(leaked == 0, "%s: cut at %zu of %zu bytes: the failed load left %td bytes allocated: %s", arch,
                      n, len, leaked, load.err.msg);
    }
}
END_TEST

START_TEST(load_rejects_a_wrong_header_length) {
    size_t len;
    char *bytes = slurp(path, &len);
    uint64_t n = length_at(bytes);
    const struct {
        uint64_t value;
        const char *needle;
    } cases[] = {
        {0, "too short"},
        {1, "too short"},
        {100000001, "more than"},
        {UINT64_MAX, "more than"},
        {len - 8 + 1, "only"},
        {n - 1, ""},  // the header loses its last byte, the data gains one ("" = any message)
        {n + 1, ""},  // the header gains the first data byte
        {n + 8, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int b = 0; b < 8; b++) bytes[b] = (char)(cases[i].value >> (8 * b));
        write_bytes(path, bytes, len);
        expect_rejected(cases[i].needle);
    }
    free(bytes);
}
END_TEST

START_TEST(load_rejects_a_file_shorter_than_the_length_field) {
    write_bytes(path, "\x10\0\0", 3);
    expect_rejected("only 3 bytes");
}
END_TEST

START_TEST(load_rejects_a_header_that_is_not_json) {
    const struct {
        const char *header;
        const char *needle;
    } cases[] = {
        {"{\"__metadata__\":", "invalid JSON"},
        {"{\"a\":1} trailing", "invalid JSON"},
        {"{\"__metadata__\":{}}}", "invalid JSON"},
        {"[]", "does not start with '{'"},
        {" {}", "does not start with '{'"},
        {"PK\x03\x04 not a checkpoint at all", "does not start with '{'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Parts p = split();
        set_header(&p, cases[i].header);
        join(&p);
        free_parts(&p);
        expect_rejected(cases[i].needle);
    }
}
END_TEST

START_TEST(load_rejects_a_tensor_named_twice) {
    edit_header("\"pos_emb.weight\"", "\"tok_emb.weight\"");
    expect_rejected("\"tok_emb.weight\" twice");
}
END_TEST

// ---- Rejecting damaged files: the tensors ----------------------------------------

// Loop test: _i = 0 on card, _i = 1 on gpt, each missing in turn one of
// its own tensors (a later block's, gpt's LayerNorms) and tok_emb.
START_TEST(load_rejects_a_missing_tensor) {
    static const char *const names[][5] = {
        {"head.bias", "tok_emb.weight", NULL},
        {"blocks.1.mlp.fc.weight", "blocks.0.ln2.weight", "ln_f.weight", "tok_emb.weight", NULL},
    };
    fixture_of(_i);
    for (size_t i = 0; names[_i][i]; i++) {
        remove_tensor(names[_i][i]);
        char needle[96];
        snprintf(needle, sizeof needle, "tensor '%s' is missing", names[_i][i]);
        expect_rejected(needle);
        start_over();
    }
}
END_TEST

START_TEST(load_rejects_an_extra_tensor) {
    edit_header(",\"head.bias\"", ",\"extra.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"head.bias\"");
    expect_rejected("tensor 'extra.weight'");
}
END_TEST

START_TEST(load_rejects_a_dtype_other_than_f32) {
    edit_header("\"tok_emb.weight\":{\"dtype\":\"F32\"", "\"tok_emb.weight\":{\"dtype\":\"F16\"");
    expect_rejected("dtype \"F16\"");
}
END_TEST

START_TEST(load_rejects_a_wrong_shape) {
    int V = model.config.vocab_size, C = model.config.n_embd;
    char right[64], extra_dim[32];
    snprintf(right, sizeof right, "\"head.bias\":{\"dtype\":\"F32\",\"shape\":[%d]", V);
    snprintf(extra_dim, sizeof extra_dim, "[%d,1]", V);
    const char *wrong[] = {extra_dim, "[1]", "[]", "[-1]", "[\"x\"]", "[1.0]", "{}"};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        char to[96];
        snprintf(to, sizeof to, "\"head.bias\":{\"dtype\":\"F32\",\"shape\":%s", wrong[i]);
        edit_header(right, to);
        expect_rejected("tensor 'head.bias' has shape");
        edit_header(to, right);  // undo, for the next case
    }
    // A 2-D tensor with its dimensions swapped.
    char from[64], to[64];
    snprintf(from, sizeof from, "\"shape\":[%d,%d]", V, C);
    snprintf(to, sizeof to, "\"shape\":[%d,%d]", C, V);
    edit_header(from, to);
    expect_rejected("tensor 'tok_emb.weight' has shape");
}
END_TEST

START_TEST(load_rejects_offsets_outside_the_data_section) {
    int head_bias = index_of("head.bias");
    size_t data_size = model.param_table.total * sizeof(float);
    size_t bytes = end_of(head_bias) - begin_of(head_bias);
    set_offsets("head.bias", data_size, data_size + bytes);
    expect_rejected("data section is only");
}
END_TEST

START_TEST(load_rejects_offsets_that_are_not_an_increasing_pair) {
    int head_bias = index_of("head.bias");
    set_offsets("head.bias", end_of(head_bias), begin_of(head_bias));
    expect_rejected("no data_offsets");
}
END_TEST

START_TEST(load_rejects_a_byte_length_that_does_not_match_the_shape) {
    int head_bias = index_of("head.bias");
    set_offsets("head.bias", begin_of(head_bias), end_of(head_bias) - 4);
    expect_rejected("tensor 'head.bias' spans");
}
END_TEST

START_TEST(load_rejects_overlapping_tensors) {
    // head.bias moved onto the first bytes of tok_emb (same length, so only the overlap is wrong).
    int head_bias = index_of("head.bias");
    set_offsets("head.bias", 0, end_of(head_bias) - begin_of(head_bias));
    expect_rejected("overlaps");
}
END_TEST

START_TEST(load_rejects_extra_bytes_after_the_last_tensor) {
    size_t len;
    char *bytes = slurp(path, &len);
    bytes = xrealloc(bytes, len + 4);
    memset(bytes + len, 0, 4);
    write_bytes(path, bytes, len + 4);
    free(bytes);
    expect_rejected("extra bytes at the end");
}
END_TEST

// Loop test: _i = 0 on card, _i = 1 on gpt, whose NaN is in a later block
// (so the tensor named is found past block 0's).
START_TEST(load_rejects_nan_or_infinite_weights_naming_the_tensor) {
    static const struct {
        const char *tensor;
        size_t element;
    } nan_at[] = {{"head.bias", 2}, {"blocks.1.mlp.proj.weight", 7}};
    const char *arch = fixture_of(_i);
    const char *tensor = nan_at[_i].tensor;
    const size_t element = nan_at[_i].element;
    set_float(index_of(tensor), element, NAN);
    char needle[96];
    snprintf(needle, sizeof needle, "tensor '%s' holds NaN at element %zu", tensor, element);
    expect_rejected(needle);
    // Training never saves a NaN, so the message blames the file, not --lr
    // (which `train --init` would take as advice about its own run).
    expect_rejected("the file is damaged or not from tinygpt");
    Load load;
    load_measured(&load, path);
    ck_assert_msg(!strstr(load.err.msg, "--lr"), "%s: %s", arch, load.err.msg);
    set_float(index_of(tensor), element, 0.0f);
    set_float(index_of("pos_emb.weight"), 5, -INFINITY);
    expect_rejected("tensor 'pos_emb.weight' holds an infinity at element 5");
}
END_TEST

START_TEST(load_rejects_weights_beyond_the_bound_naming_the_tensor) {
    // The fixture already holds -MODEL_MAX_WEIGHT, and loads; one float
    // further out does not, on either side.
    set_float(index_of("head.bias"), 3, nextafterf(MODEL_MAX_WEIGHT, INFINITY));
    expect_rejected("at element 3, beyond the 1e+06 a weight may have");
    set_float(index_of("head.bias"), 3, 0.0f);
    set_float(index_of("blocks.0.attn.q.weight"), 7, -3e30f);
    expect_rejected("tensor 'blocks.0.attn.q.weight' holds -3e+30 at element 7, beyond");
}
END_TEST

START_TEST(load_refuses_a_fifo_at_once_instead_of_waiting_for_a_writer) {
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(10);  // opening a FIFO for reading used to wait forever: fail, rather than hang
    expect_file_rejected(fifo, "is a named pipe (FIFO), not a regular file");
    alarm(0);
}
END_TEST

// ---- Rejecting damaged files: the metadata ---------------------------------------

START_TEST(load_rejects_a_header_without_metadata) {
    edit_header("\"__metadata__\"", "\"__meta__\"");
    expect_rejected("no \"__metadata__\"");
}
END_TEST

START_TEST(load_rejects_another_format) {
    set_metadata("format", "tinygpt-3", 9);
    expect_rejected("format is \"tinygpt-3\"");
}
END_TEST

START_TEST(load_rejects_missing_or_non_string_metadata) {
    edit_header(",\"step\":\"1234\"", "");
    expect_rejected("no \"step\"");
    start_over();
    edit_header("\"n_head\":\"2\"", "\"n_head\":2");
    expect_rejected("\"n_head\" is a number, not a string");
}
END_TEST

START_TEST(load_rejects_metadata_that_is_not_a_number) {
    const struct {
        const char *key, *value, *needle;
    } cases[] = {
        {"n_embd", "8x", "\"n_embd\" is \"8x\""},
        {"n_embd", "", "\"n_embd\" is \"\""},
        {"n_embd", "-8", "\"n_embd\" is \"-8\""},
        {"n_embd", " 8", "\"n_embd\" is \" 8\""},
        {"block_size", "99999999999999999999", "\"block_size\""},
        {"vocab_size", "4294967296", "\"vocab_size\""},
        {"step", "1.5", "\"step\""},
        {"dropout", "abc", "\"dropout\" is \"abc\""},
        {"dropout", "nan", "\"dropout\""},
        {"dropout", "", "\"dropout\""},
        {"dropout", "0.1 ", "\"dropout\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_metadata(cases[i].key, cases[i].value, strlen(cases[i].value));
        expect_rejected(cases[i].needle);
        start_over();
    }
}
END_TEST

START_TEST(load_rejects_metadata_that_contradicts_the_shapes) {
    char v_plus_1[16];
    snprintf(v_plus_1, sizeof v_plus_1, "%d", model.config.vocab_size + 1);
    const struct {
        const char *key, *value, *needle;
    } cases[] = {
        {"vocab_size", v_plus_1, "tensor 'tok_emb.weight' has shape"},
        {"n_embd", "16", "tensor 'tok_emb.weight' has shape"},
        {"block_size", "5", "tensor 'pos_emb.weight' has shape"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_metadata(cases[i].key, cases[i].value, strlen(cases[i].value));
        expect_rejected(cases[i].needle);
        start_over();
    }
}
END_TEST

START_TEST(load_rejects_an_impossible_config) {
    const struct {
        const char *key, *value, *needle;
    } cases[] = {
        {"n_head", "3", "--heads 3 does not divide"},
        {"n_head", "0", "impossible model"},
        {"dropout", "1", "impossible model"},
        {"n_embd", "0", "impossible model"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_metadata(cases[i].key, cases[i].value, strlen(cases[i].value));
        expect_rejected(cases[i].needle);
        start_over();
    }
}
END_TEST

START_TEST(load_rejects_a_vocabulary_of_the_wrong_length) {
    size_t len;
    char *vocab = tokenizer_vocab_utf8(&tok, &len);
    set_metadata("vocab", vocab, len - 4);  // without its last character, the 4-byte emoji
    char needle[80];
    snprintf(needle, sizeof needle, "vocabulary has %d characters but vocab_size says %d", tok.vocab_size - 1,
             tok.vocab_size);
    expect_rejected(needle);
    set_metadata("vocab", "", 0);
    expect_rejected("vocabulary is empty");
    free(vocab);
}
END_TEST

START_TEST(load_rejects_a_vocabulary_out_of_code_point_order) {
    size_t len;
    char *vocab = tokenizer_vocab_utf8(&tok, &len);
    char first = vocab[0];  // '\n' and ' ', swapped: ids 0 and 1 would mean each other's character
    vocab[0] = vocab[1];
    vocab[1] = first;
    set_metadata("vocab", vocab, len);
    expect_rejected("its vocabulary is not in increasing code point order (U+000A comes after U+0020, at byte 1)");
    free(vocab);
}
END_TEST

START_TEST(load_rejects_a_vocabulary_with_a_repeated_character) {
    size_t len;
    char *vocab = tokenizer_vocab_utf8(&tok, &len);
    vocab[1] = vocab[0];  // the second character (' ') becomes another newline
    set_metadata("vocab", vocab, len);
    expect_rejected("twice");
    free(vocab);
}
END_TEST

// ---- Architectures: card files from before gpt, and gpt -------------------------

START_TEST(a_card_checkpoint_without_arch_or_n_layer_loads_as_card) {
    // As saved before gpt existed: neither key. Then each one alone missing.
    edit_header(",\"arch\":\"card\",\"n_layer\":\"1\"", "");
    Parts p = split();
    ck_assert_ptr_null(strstr(p.header, "arch"));
    ck_assert_ptr_null(strstr(p.header, "n_layer"));
    free_parts(&p);
    expect_loads_as_the_fixture(false);
    start_over();
    edit_header(",\"arch\":\"card\"", "");
    expect_loads_as_the_fixture(false);
    start_over();
    edit_header(",\"n_layer\":\"1\"", "");
    expect_loads_as_the_fixture(false);
}
END_TEST

START_TEST(load_rejects_an_unknown_arch) {
#define VALUE(literal) literal, sizeof literal - 1
    const struct {
        const char *value;
        size_t len;
        const char *needle;
    } cases[] = {
        {VALUE("llama"), "\"arch\" is \"llama\", an architecture this tinygpt does not know"},
        {VALUE("GPT"), "\"arch\" is \"GPT\""},
        {VALUE(""), "\"arch\" is \"\""},
        {VALUE("gpt\0"), "\"arch\" is \"gpt?\""},
    };
#undef VALUE
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_metadata("arch", cases[i].value, cases[i].len);
        expect_rejected(cases[i].needle);
        start_over();
    }
    edit_header("\"arch\":\"card\"", "\"arch\":1");
    expect_rejected("\"arch\" is a number, not a string");
}
END_TEST

START_TEST(load_rejects_a_card_n_layer_other_than_one) {
    set_metadata("n_layer", "2", 1);
    expect_rejected("\"n_layer\" is 2 but \"arch\" is \"card\", which has exactly one block");
    set_metadata("n_layer", "0", 1);
    expect_rejected("\"n_layer\" is 0, outside [1, 1024]");
    edit_header(",\"arch\":\"card\"", "");  // a file from before gpt cannot have more blocks either
    set_metadata("n_layer", "3", 1);
    expect_rejected("exactly one block");
}
END_TEST

START_TEST(load_rejects_a_card_file_that_says_it_is_gpt) {
    set_metadata("arch", "gpt", 3);
    expect_rejected("tensor 'blocks.0.attn.proj.bias' that tinygpt's gpt model does not have");
}
END_TEST

// `make ladder`'s gpts without some parts: the metadata says which parts
// are gone, the tables (and so the tensors) follow, and the loaded model
// has the same parts and weights. A whole gpt writes no such keys.
START_TEST(gpt_without_some_parts_saves_and_loads_which_parts_it_lacks) {
    Parts whole = split();
    ck_assert_ptr_null(strstr(whole.header, "\"no_"));
    free_parts(&whole);
    ModelConfig cfg = model.config;
    cfg.no_layernorm = true;
    cfg.no_residual = true;
    Model lacking;
    model_init(&lacking, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 3);
    model_init_weights(&lacking, &rng);
    char lacking_path[160];
    snprintf(lacking_path, sizeof lacking_path, "%s/lacking.safetensors", dir);
    Error err = {{0}};
    ck_assert_msg(checkpoint_save(&lacking, &tok, 0, lacking_path, &err), "%s", err.msg);
    Model back;
    Tokenizer t;
    ck_assert_msg(checkpoint_load(lacking_path, &back, &t, 1, false, NULL, &err), "%s", err.msg);
    ck_assert(back.config.no_layernorm && !back.config.no_mlp && back.config.no_residual);
    ck_assert_ptr_null(table_find(&back.param_table, "ln_f.weight"));
    ck_assert_ptr_nonnull(table_find(&back.param_table, "blocks.0.mlp.fc.weight"));
    ck_assert_uint_eq(back.param_table.total, lacking.param_table.total);
    ck_assert_mem_eq(back.params_memory, lacking.params_memory, lacking.param_table.total * sizeof(float));
    model_free(&back);
    tokenizer_free(&t);
    model_free(&lacking);
}
END_TEST

START_TEST(gpt_saved_header_lists_its_blocks_and_ln_f_but_no_head) {
    check_saved_header();
    Parts p = split();
    JsonValue *root = NULL;
    Error err = {{0}};
    ck_assert_msg(json_parse(p.header, p.header_len, &root, &err), "%s", err.msg);
    const JsonValue *meta = json_get(root, "__metadata__");
    ck_assert_str_eq(json_get(meta, "arch")->string, "gpt");
    ck_assert_str_eq(json_get(meta, "n_layer")->string, "2");
    ck_assert_str_eq(json_get(meta, "format")->string, "tinygpt-2");
    ck_assert_ptr_null(json_get(root, "head.weight"));  // tied to tok_emb
    ck_assert_ptr_null(json_get(root, "head.bias"));
    for (size_t i = 0; i < meta->count; i++) ck_assert_int_eq(meta->items[i].type, JSON_STRING);
    json_free(root);
    free_parts(&p);
}
END_TEST

START_TEST(gpt_load_rejects_a_file_without_n_layer) {
    edit_header(",\"n_layer\":\"2\"", "");
    expect_rejected("\"arch\" is \"gpt\" but has no \"n_layer\"");
}
END_TEST

START_TEST(gpt_load_rejects_n_layer_out_of_range) {
    const struct {
        const char *value, *needle;
    } cases[] = {
        {"0", "\"n_layer\" is 0, outside [1, 1024]"},
        {"1025", "\"n_layer\" is 1025, outside [1, 1024]"},
        {"2147483648", "\"n_layer\" is 2147483648, outside [1, 1024]"},
        {"999999999999999999", "\"n_layer\" is 999999999999999999, outside [1, 1024]"},
        {"99999999999999999999", "\"n_layer\" is \"99999999999999999999\""},
        {"-1", "\"n_layer\" is \"-1\""},
        {"2x", "\"n_layer\" is \"2x\""},
        {"", "\"n_layer\" is \"\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_metadata("n_layer", cases[i].value, strlen(cases[i].value));
        expect_rejected(cases[i].needle);
        start_over();
    }
    edit_header("\"n_layer\":\"2\"", "\"n_layer\":2");
    expect_rejected("\"n_layer\" is a number, not a string");
}
END_TEST

START_TEST(gpt_load_rejects_tensors_of_a_block_past_n_layer) {
    // blocks.2.* in a file whose n_layer is 2.
    add_tensor("blocks.2.ln1.weight", "[8]", "ln_f.weight");
    expect_rejected("tensor 'blocks.2.ln1.weight' of block 2 but its __metadata__ \"n_layer\" is 2");
    expect_rejected("n_layer disagrees with the tensors");
    start_over();
    // Two blocks of tensors, but n_layer says one.
    set_metadata("n_layer", "1", 1);
    expect_rejected("tensor 'blocks.1.ln1.weight' of block 1 but its __metadata__ \"n_layer\" is 1");
    expect_rejected("n_layer disagrees with the tensors");
}
END_TEST

START_TEST(gpt_load_rejects_an_n_layer_larger_than_its_blocks) {
    // The largest n_layer allowed still builds its table, and is refused for its missing blocks.
    const char *values[] = {"3", "1024"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        set_metadata("n_layer", values[i], strlen(values[i]));
        expect_rejected("tensor 'blocks.2.ln1.weight' is missing: its __metadata__ \"n_layer\" is");
        expect_rejected("no tensors of block 2, so n_layer disagrees with the tensors");
    }
}
END_TEST

START_TEST(gpt_load_rejects_a_tensor_gpt_does_not_have) {
    add_tensor("head.weight", "[20,8]", "ln_f.weight");
    expect_rejected("tensor 'head.weight' that tinygpt's gpt model does not have");
    start_over();
    add_tensor("blocks.1.attn.proj.bias", "[8]", "ln_f.weight");
    expect_rejected("tensor 'blocks.1.attn.proj.bias' that tinygpt's gpt model does not have");
    start_over();
    set_metadata("arch", "card", 4);  // a gpt file that says it is card
    expect_rejected("\"n_layer\" is 2 but \"arch\" is \"card\"");
    set_metadata("n_layer", "1", 1);
    expect_rejected("tensor 'blocks.0.ln1.weight' that tinygpt's card model does not have");
}
END_TEST

START_TEST(gpt_load_rejects_a_wrong_shape_naming_both_shapes) {
    const struct {
        const char *from, *to, *found, *wanted;
    } cases[] = {
        // mlp.fc [4C,C] saved as mlp.proj's [C,4C]
        {"\"blocks.1.mlp.fc.weight\":{\"dtype\":\"F32\",\"shape\":[32,8]",
         "\"blocks.1.mlp.fc.weight\":{\"dtype\":\"F32\",\"shape\":[8,32]",
         "tensor 'blocks.1.mlp.fc.weight' has shape [8,32] but the metadata", "needs [32,8]"},
        {"\"blocks.0.ln1.weight\":{\"dtype\":\"F32\",\"shape\":[8]",
         "\"blocks.0.ln1.weight\":{\"dtype\":\"F32\",\"shape\":[8,1]",
         "tensor 'blocks.0.ln1.weight' has shape [8,1] but the metadata", "needs [8]"},
        {"\"ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8]", "\"ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[9]",
         "tensor 'ln_f.weight' has shape [9] but the metadata", "needs [8]"},
        {"\"blocks.0.mlp.proj.weight\":{\"dtype\":\"F32\",\"shape\":[8,32]",
         "\"blocks.0.mlp.proj.weight\":{\"dtype\":\"F32\",\"shape\":[8]",
         "tensor 'blocks.0.mlp.proj.weight' has shape [8] but the metadata", "needs [8,32]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        edit_header(cases[i].from, cases[i].to);
        expect_rejected(cases[i].found);
        expect_rejected(cases[i].wanted);
        edit_header(cases[i].to, cases[i].from);  // undo, for the next case
    }
}
END_TEST

// ---- The checksum ------------------------------------------------------------------
//
// Every file tinygpt writes carries the XXH3-64 of its whole contents
// (safetensors.h): one byte changed anywhere, in the header or in a tensor,
// and the file is refused, naming it. Files from before the checksum
// (format tinygpt-1) still load.

// flip_and_load: "bytes" with bit "bit" of byte "at" flipped, written to the
// fixture file (not resealed), must be refused; one that changes a tensor's
// bytes must be refused by the checksum.
static void flip_and_load(char *bytes, size_t len, size_t at, int bit, size_t data_from) {
    bytes[at] ^= (char)(1 << bit);
    write_bytes(path, bytes, len);
    bytes[at] ^= (char)(1 << bit);
    char why[64];
    snprintf(why, sizeof why, "byte %zu bit %d", at, bit);
    Load load;
    ptrdiff_t leaked = load_measured(&load, path);
    ck_assert_msg(!load.loaded, "%s: changing %s went unnoticed", arch_name(fixture_arch), why);
    ck_assert_msg(leaked == 0, "%s: %s: the failed load leaked %td bytes", arch_name(fixture_arch), why, leaked);
    ck_assert_msg(strstr(load.err.msg, path) != NULL, "%s: %s: %s", arch_name(fixture_arch), why, load.err.msg);
    if (at >= data_from)
        ck_assert_msg(strstr(load.err.msg, "checksum does not match") != NULL, "%s: %s: %s", arch_name(fixture_arch),
                      why, load.err.msg);
}

// Loop test: card and gpt. Every byte of the header (the checksum's own
// digits, the keys, the shapes, the padding) and every 61st byte of the
// data section (a prime, so each tensor is hit at every alignment), each
// with one bit flipped, the bit going round.
START_TEST(a_changed_byte_anywhere_is_refused) {
    fixture_of(_i);
    size_t len;
    char *bytes = slurp(path, &len);
    const size_t data_from = 8 + (size_t)length_at(bytes);
    for (size_t at = 8; at < data_from; at++) flip_and_load(bytes, len, at, (int)(at % 8), data_from);
    for (size_t at = data_from; at < len; at += 61) flip_and_load(bytes, len, at, (int)(at % 8), data_from);
    flip_and_load(bytes, len, len - 1, 7, data_from);
    free(bytes);
}
END_TEST

// A file written before checksums: format tinygpt-1, no "checksum" key.
START_TEST(a_file_from_before_the_checksum_still_loads) {
    Parts p = split();
    size_t at = find(&p, "\"checksum\":\"", 0);
    replace_span(&p, at, at + strlen("\"checksum\":\"0123456789abcdef\","), "");
    at = find(&p, "\"tinygpt-2\"", 0);
    replace_span(&p, at, at + strlen("\"tinygpt-2\""), "\"tinygpt-1\"");
    join(&p);  // nothing to reseal now
    free_parts(&p);
    Model m;
    Tokenizer t;
    ck_assert_int_eq(load_ok(&m, &t, 1, false), STEP);
    ck_assert_mem_eq(m.params_memory, model.params_memory, model.param_table.total * sizeof(float));
    model_free(&m);
    tokenizer_free(&t);
    // Today's format says it has a checksum: without one, the header is damaged.
    edit_header("\"tinygpt-1\"", "\"tinygpt-2\"");
    expect_rejected("carries a checksum, but its header has none");
}
END_TEST

// ---- A run's metadata (train --resume) --------------------------------------------
//
// checkpoint_save_run keeps a run's own keys (settings.c writes them; what
// they mean is tested in test_settings.c) after the model's, and
// checkpoint_read_header gives them back, every one, as strings.

// A run's metadata with values that JSON must escape or that are long.
static void example_run(Metadata *md) {
    memset(md, 0, sizeof *md);
    metadata_set(md, "batch_rng", "%llu", (unsigned long long)(UINT64_MAX - 1));
    metadata_set(md, "data_hash", "%llu", (unsigned long long)UINT64_MAX);
    metadata_set(md, "lr", "0.001");
    metadata_set_bytes(md, "note", "a \"quoted\"\\caf\xC3\xA9\n", 17);
}

// save_run: replace the fixture file with one that holds example_run().
static void save_run(void) {
    Metadata md;
    example_run(&md);
    Error err = {{0}};
    ck_assert_msg(checkpoint_save_run(&model, &tok, STEP, &md, path, &err), "%s", err.msg);
    metadata_free(&md);
}

// expect_header_rejected: checkpoint_read_header must fail naming the file and "needle".
static void expect_header_rejected(const char *needle) {
    CheckpointHeader h;
    Error err = {{0}};
    ck_assert_msg(!checkpoint_read_header(path, &h, &err), "a damaged header was read (wanted '%s')", needle);
    ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, needle) && !strchr(err.msg, '\n'),
                  "wanted '%s' and the path in one line: %s", needle, err.msg);
    ck_assert_int_eq(h.metadata.count, 0);
}

// in_memory: "file" as a stream in memory, as under mpirun the other ranks
// read rank 0's bytes (dist_fopen).
static FILE *in_memory(const char *file) {
    char *bytes;
    size_t len;
    Error err = {{0}};
    ck_assert_msg(read_file(file, &bytes, &len, &err), "%s", err.msg);
    FILE *f = fmemopen(NULL, len, "r+");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    rewind(f);
    free(bytes);
    return f;
}

// The readers' _stream forms, on a copy in memory, read what they read
// from the file, and refuse a damaged copy with the file's own message.
START_TEST(a_checkpoint_read_from_memory_gives_what_its_file_gives) {
    save_run();
    CheckpointHeader h;
    Error err = {{0}};
    ck_assert_msg(checkpoint_read_header_stream(in_memory(path), path, &h, &err), "%s", err.msg);
    ck_assert_int_eq(h.step, STEP);
    ck_assert_ptr_nonnull(metadata_get(&h.metadata, "batch_rng"));
    metadata_free(&h.metadata);
    Model m;
    Tokenizer t;
    long step = -1;
    ck_assert_msg(checkpoint_load_stream(in_memory(path), path, &m, &t, 1, false, &step, &err), "%s", err.msg);
    ck_assert_int_eq(step, STEP);
    ck_assert_int_eq(t.vocab_size, tok.vocab_size);
    ck_assert_mem_eq(m.params_memory, model.params_memory, model.param_table.total * sizeof(float));
    model_free(&m);
    tokenizer_free(&t);

    ck_assert_int_eq(truncate(path, 200), 0);
    Error from_file = {{0}};
    ck_assert(!checkpoint_load(path, &m, &t, 1, false, NULL, &from_file));
    ck_assert(!checkpoint_load_stream(in_memory(path), path, &m, &t, 1, false, NULL, &err));
    ck_assert_str_eq(err.msg, from_file.msg);
}
END_TEST

START_TEST(save_run_then_read_header_gives_back_every_key_byte_for_byte) {
    save_run();
    CheckpointHeader h;
    Error err = {{0}};
    ck_assert_msg(checkpoint_read_header(path, &h, &err), "%s", err.msg);
    ck_assert_int_eq(h.step, STEP);
    ck_assert_int_eq(h.config.n_embd, model.config.n_embd);
    ck_assert_int_eq(h.tokenizer, TOKENIZER_CHAR);
    Metadata want;
    example_run(&want);
    for (int i = 0; i < want.count; i++) {
        const MetadataItem *got = metadata_get(&h.metadata, want.items[i].key);
        ck_assert_msg(got != NULL, "no \"%s\"", want.items[i].key);
        ck_assert_uint_eq(got->len, want.items[i].len);
        ck_assert_mem_eq(got->value, want.items[i].value, got->len);
    }
    ck_assert_ptr_nonnull(metadata_get(&h.metadata, "format"));  // the model's keys too
    ck_assert_ptr_nonnull(metadata_get(&h.metadata, "vocab"));
    metadata_free(&want);
    metadata_free(&h.metadata);
}
END_TEST

START_TEST(a_checkpoint_with_a_run_still_loads_as_weights_for_sample_and_eval) {
    save_run();
    Model m;
    Tokenizer t;
    ck_assert_int_eq(load_ok(&m, &t, 1, false), STEP);
    ck_assert_mem_eq(m.params_memory, model.params_memory, model.param_table.total * sizeof(float));
    model_free(&m);
    tokenizer_free(&t);
}
END_TEST

START_TEST(read_header_of_a_checkpoint_without_a_run_says_to_use_init) {
    expect_header_rejected("holds no training state");
    expect_header_rejected("--init");
}
END_TEST

START_TEST(read_header_rejects_a_metadata_value_that_is_not_a_string) {
    save_run();
    edit_header("\"lr\":\"0.001\"", "\"lr\":0.001");
    expect_header_rejected("\"lr\" is a number, not a string");
    save_run();
    set_metadata("format", "tinygpt-3", 9);  // the model's own checks come first
    expect_header_rejected("this tinygpt reads \"tinygpt-2\"");
}
END_TEST

// The model's keys as a run's settings read them: every one, also those a
// file leaves out (a char model's tokenizer, the parts a whole gpt has).
START_TEST(model_metadata_names_every_key_of_the_model) {
    Metadata md = {0};
    checkpoint_model_metadata(&md, &model.config, TOKENIZER_CHAR);
    const char *keys[] = {"tokenizer", "vocab_size", "n_embd", "n_head", "block_size", "arch", "n_layer",
                          "no_layernorm", "no_mlp", "no_residual", "dropout"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(metadata_get(&md, keys[i]) != NULL, "no \"%s\"", keys[i]);
    ck_assert_str_eq(metadata_get(&md, "tokenizer")->value, "char");
    ck_assert_str_eq(metadata_get(&md, "no_mlp")->value, "0");
    metadata_free(&md);
}
END_TEST

START_TEST(save_into_the_current_directory_by_a_bare_file_name_works) {
    // The directory to flush after the rename is then ".".
    ck_assert_int_eq(chdir(dir), 0);
    Error err = {{0}};
    ck_assert_msg(checkpoint_save(&model, &tok, STEP, "bare.safetensors", &err), "%s", err.msg);
    struct stat st;
    ck_assert_int_eq(stat("bare.safetensors", &st), 0);
}
END_TEST

// ---- AdamW's state (optimizer.safetensors) ----------------------------------------
//
// The fixture: the model fixture, card or gpt, and an AdamW optimizer for it
// whose moments hold every kind of value a lossy round trip would change,
// saved to dir/optimizer.safetensors, which the editing helpers then damage.

// The fixture's update count: not STEP, as in a run that began with SGD.
static const long UPDATES = 1000;
static char opt_path[128];   // dir/optimizer.safetensors
static Optimizer optimizer;  // AdamW for "model", saved to opt_path

static OptimizerConfig adamw_config(void) {
    return (OptimizerConfig){.kind = OPT_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99};
}

// save_optimizer: (re)write opt_path from "optimizer", at training step STEP.
static void save_optimizer(void) {
    Error err = {{0}};
    ck_assert_msg(optimizer_state_save(&optimizer, &model, STEP, opt_path, &err), "%s", err.msg);
}

// setup_opt_arch: the model fixture of "arch" and its saved AdamW state: m
// with -0, the smallest denormal and +-FLT_MAX among small normal values, v
// (never negative) with 0, -0, the denormal and FLT_MAX.
static void setup_opt_arch(Arch arch) {
    fixture_tokenizer = TOKENIZER_CHAR;
    setup_arch(arch);
    snprintf(opt_path, sizeof opt_path, "%s/optimizer.safetensors", dir);
    edit_target = opt_path;
    OptimizerConfig cfg = adamw_config();
    optimizer_init(&optimizer, &cfg, &model);
    Rng rng;
    rng_init(&rng, 11);
    for (size_t i = 0; i < optimizer.size; i++) {
        optimizer.m[i] = 1e-3f * rng_normal(&rng);
        optimizer.v[i] = 1e-6f * rng_uniform(&rng);
    }
    optimizer.m[0] = -0.0f;
    optimizer.m[1] = 1e-45f;
    optimizer.m[2] = -FLT_MAX;
    optimizer.m[optimizer.size - 1] = FLT_MAX;
    optimizer.v[0] = 0.0f;
    optimizer.v[1] = -0.0f;
    optimizer.v[2] = 1e-45f;
    optimizer.v[optimizer.size - 1] = FLT_MAX;
    optimizer.step = UPDATES;
    save_optimizer();
}

static void setup_opt(void) { setup_opt_arch(ARCH_CARD); }

static void teardown_opt(void) {
    optimizer_free(&optimizer);
    teardown();
}

// opt_start_over: a fresh optimizer fixture of architecture "arch".
static void opt_start_over(Arch arch) {
    teardown_opt();
    setup_opt_arch(arch);
}

// The values a load's optimizer holds before the call; a failed load must
// leave them.
#define SENTINEL_M 0.5f
#define SENTINEL_V 0.25f
#define SENTINEL_UPDATES 77

// One optimizer_state_load call and what it returned.
typedef struct {
    const char *file;
    const Model *m;
    Optimizer opt;  // AdamW for m, holding the sentinels before the call
    long step;      // -1 before the call
    Error err;
    bool loaded;
} OptLoad;

static void *run_opt_load(void *arg) {
    OptLoad *load = arg;
    load->loaded = optimizer_state_load(&load->opt, load->m, load->file, &load->step, &load->err);
    return NULL;
}

// opt_load_measured: optimizer_state_load "file" for model "m" into a new
// optimizer (the caller frees load->opt) and return the bytes of heap the
// call left allocated.
static ptrdiff_t opt_load_measured(OptLoad *load, const Model *m, const char *file) {
    *load = (OptLoad){.file = file, .m = m, .step = -1};
    OptimizerConfig cfg = adamw_config();
    optimizer_init(&load->opt, &cfg, m);
    for (size_t i = 0; i < load->opt.size; i++) {
        load->opt.m[i] = SENTINEL_M;
        load->opt.v[i] = SENTINEL_V;
    }
    load->opt.step = SENTINEL_UPDATES;
    return heap_left_by(run_opt_load, load);
}

// expect_opt_rejected_for: loading "file" as AdamW's state of "m" must fail
// with one line that names the file and contains "needle", leave the
// optimizer and the step as they were, and leave nothing allocated.
static void expect_opt_rejected_for(const Model *m, const char *file, const char *needle) {
    OptLoad load;
    ptrdiff_t leaked = opt_load_measured(&load, m, file);
    const char *msg = load.err.msg;
    ck_assert_msg(!load.loaded, "a damaged optimizer state loaded (wanted '%s')", needle);
    ck_assert_msg(leaked == 0, "a failed load left %td bytes allocated (wanted '%s'): %s", leaked, needle, msg);
    ck_assert_msg(strstr(msg, file) != NULL, "the message must name the file: %s", msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "the message must mention '%s': %s", needle, msg);
    ck_assert_msg(strchr(msg, '\n') == NULL, "the message must be one line: %s", msg);
    ck_assert_int_eq(load.step, -1);
    ck_assert_int_eq(load.opt.step, SENTINEL_UPDATES);
    for (size_t i = 0; i < load.opt.size; i++)
        ck_assert_msg(load.opt.m[i] == SENTINEL_M && load.opt.v[i] == SENTINEL_V,
                      "a failed load changed element %zu of the moments (wanted '%s')", i, needle);
    optimizer_free(&load.opt);
}

// expect_opt_rejected: the same for the fixture model.
static void expect_opt_rejected(const char *file, const char *needle) {
    expect_opt_rejected_for(&model, file, needle);
}

// set_moment: overwrite element "index" of moment "k" (0: exp_avg, 1:
// exp_avg_sq) of parameter "name" in the saved optimizer state, where the
// saver put it: m's buffer, then v's.
static void set_moment(int k, const char *name, size_t index, float value) {
    Parts p = split();
    size_t at = (size_t)k * model.param_table.total * sizeof(float) + begin_of(index_of(name)) + index * sizeof value;
    memcpy(p.data + at, &value, sizeof value);
    join(&p);
    free_parts(&p);
}

// check_opt_round_trip: the saved state loads into a new optimizer bit for
// bit, with its step and update count, and saving that gives the same bytes.
static void check_opt_round_trip(void) {
    OptLoad load;
    ptrdiff_t leaked = opt_load_measured(&load, &model, opt_path);
    ck_assert_msg(load.loaded, "%s", load.err.msg);
    ck_assert_int_eq(leaked, 0);
    ck_assert_int_eq(load.step, STEP);
    ck_assert_int_eq(load.opt.step, UPDATES);
    ck_assert_uint_eq(load.opt.size, optimizer.size);
    ck_assert_mem_eq(load.opt.m, optimizer.m, optimizer.size * sizeof(float));
    ck_assert_mem_eq(load.opt.v, optimizer.v, optimizer.size * sizeof(float));

    char again[160];
    snprintf(again, sizeof again, "%s/again.safetensors", dir);
    Error err = {{0}};
    ck_assert_msg(optimizer_state_save(&load.opt, &model, load.step, again, &err), "%s", err.msg);
    size_t len1, len2;
    char *first = slurp(opt_path, &len1), *second = slurp(again, &len2);
    ck_assert_uint_eq(len1, len2);
    ck_assert_mem_eq(first, second, len1);
    free(first);
    free(second);
    optimizer_free(&load.opt);
}

START_TEST(optimizer_state_round_trips_m_v_step_and_updates_bit_for_bit_for_card_and_gpt) {
    check_opt_round_trip();
    opt_start_over(ARCH_GPT);
    check_opt_round_trip();
}
END_TEST

START_TEST(optimizer_state_load_accepts_a_null_step_pointer) {
    Optimizer o;
    OptimizerConfig cfg = adamw_config();
    optimizer_init(&o, &cfg, &model);
    Error err = {{0}};
    ck_assert_msg(optimizer_state_load(&o, &model, opt_path, NULL, &err), "%s", err.msg);
    ck_assert_int_eq(o.step, UPDATES);
    optimizer_free(&o);
}
END_TEST

// check_opt_file: the saved state is a plain safetensors file, parsed here
// by hand: the 8-byte length, the JSON header with four metadata strings,
// then "exp_avg.<name>" for every parameter in table order, then
// "exp_avg_sq.<name>" for every one, each F32 with the parameter's shape at
// consecutive offsets, and the data section m's floats, then v's.
static void check_opt_file(void) {
    size_t len;
    char *bytes = slurp(opt_path, &len);
    uint64_t n = length_at(bytes);
    ck_assert_uint_eq(bytes[8], '{');
    ck_assert_uint_eq((8 + n) % 8, 0);
    size_t total = model.param_table.total;
    ck_assert_uint_eq(len, 8 + n + 2 * total * sizeof(float));
    ck_assert_mem_eq(bytes + 8 + n, optimizer.m, total * sizeof(float));
    ck_assert_mem_eq(bytes + 8 + n + total * sizeof(float), optimizer.v, total * sizeof(float));

    JsonValue *root = NULL;
    Error err = {{0}};
    ck_assert_msg(json_parse(bytes + 8, (size_t)n, &root, &err), "%s", err.msg);
    const JsonValue *meta = &root->items[0];
    ck_assert_str_eq(meta->key, "__metadata__");
    ck_assert_uint_eq(meta->count, 5);
    ck_assert_str_eq(meta->items[0].key, "checksum");  // the container's, first
    ck_assert_str_eq(json_get(meta, "format")->string, "tinygpt-optimizer-2");
    ck_assert_str_eq(json_get(meta, "optimizer")->string, "adamw");
    ck_assert_str_eq(json_get(meta, "step")->string, "1234");
    ck_assert_str_eq(json_get(meta, "updates")->string, "1000");

    int count = model.param_table.count;
    ck_assert_uint_eq(root->count, 1 + 2 * (size_t)count);
    uint64_t expected_begin = 0;
    for (int k = 0; k < 2; k++) {
        for (int t = 0; t < count; t++) {
            const TensorSpec *spec = &model.param_table.specs[t];
            const JsonValue *entry = &root->items[1 + k * count + t];
            char name[64];
            snprintf(name, sizeof name, "%s%s", k == 0 ? "exp_avg." : "exp_avg_sq.", spec->name);
            ck_assert_str_eq(entry->key, name);
            ck_assert_str_eq(json_get(entry, "dtype")->string, "F32");
            const JsonValue *shape = json_get(entry, "shape");
            ck_assert_uint_eq(shape->count, (size_t)spec->ndim);
            for (int d = 0; d < spec->ndim; d++) ck_assert(shape->items[d].number == spec->shape[d]);
            const JsonValue *offsets = json_get(entry, "data_offsets");
            uint64_t begin, end;
            ck_assert(json_as_uint(&offsets->items[0], &begin) && json_as_uint(&offsets->items[1], &end));
            ck_assert_uint_eq(begin, expected_begin);
            ck_assert_uint_eq(end - begin, spec->size * sizeof(float));
            expected_begin = end;
        }
    }
    ck_assert_uint_eq(expected_begin, 2 * total * sizeof(float));

    // Two names written out, rather than built from the table as above.
    const JsonValue *tok_emb = json_get(json_get(root, "exp_avg.tok_emb.weight"), "shape");
    ck_assert_uint_eq(tok_emb->count, 2);
    ck_assert(tok_emb->items[0].number == model.config.vocab_size && tok_emb->items[1].number == 8);
    const char *last = fixture_arch == ARCH_CARD ? "exp_avg_sq.head.bias" : "exp_avg_sq.ln_f.weight";
    const JsonValue *last_shape = json_get(json_get(root, last), "shape");
    ck_assert_uint_eq(last_shape->count, 1);
    ck_assert(last_shape->items[0].number == (fixture_arch == ARCH_CARD ? model.config.vocab_size : 8));
    json_free(root);
    free(bytes);
}

START_TEST(optimizer_state_file_is_plain_safetensors_with_torch_adamw_names) {
    check_opt_file();
    opt_start_over(ARCH_GPT);
    check_opt_file();
}
END_TEST

START_TEST(optimizer_state_save_replaces_the_old_file_and_leaves_no_tmp_file) {
    optimizer.step = UPDATES + 1;
    optimizer.v[3] = 42.0f;
    Error err = {{0}};
    ck_assert_msg(optimizer_state_save(&optimizer, &model, STEP + 1, opt_path, &err), "%s", err.msg);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", opt_path);
    struct stat st;
    ck_assert_int_ne(stat(tmp, &st), 0);

    Optimizer o;
    OptimizerConfig cfg = adamw_config();
    optimizer_init(&o, &cfg, &model);
    long step = -1;
    ck_assert_msg(optimizer_state_load(&o, &model, opt_path, &step, &err), "%s", err.msg);
    ck_assert_int_eq(step, STEP + 1);
    ck_assert_int_eq(o.step, UPDATES + 1);
    ck_assert(o.v[3] == 42.0f);
    optimizer_free(&o);
}
END_TEST

START_TEST(optimizer_state_save_into_a_missing_directory_fails_naming_the_file) {
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/dir/optimizer.safetensors", dir);
    Error err = {{0}};
    ck_assert(!optimizer_state_save(&optimizer, &model, STEP, missing, &err));
    ck_assert_msg(strstr(err.msg, missing) != NULL, "%s", err.msg);
}
END_TEST

START_TEST(optimizer_state_load_accepts_tensors_stored_in_another_order) {
    // The data section rewritten with the tensors in reverse order.
    Parts p = split();
    char *data = xmalloc(p.data_len);
    size_t at = 0, moment_bytes = model.param_table.total * sizeof(float);
    for (int k = 1; k >= 0; k--) {
        for (int t = model.param_table.count - 1; t >= 0; t--) {
            size_t begin = k * moment_bytes + begin_of(t), bytes = end_of(t) - begin_of(t);
            char name[64];
            snprintf(name, sizeof name, "%s%s", k == 0 ? "exp_avg." : "exp_avg_sq.", model.param_table.specs[t].name);
            memcpy(data + at, p.data + begin, bytes);
            set_offsets_in(&p, name, at, at + bytes);
            at += bytes;
        }
    }
    free(p.data);
    p.data = data;
    join(&p);
    free_parts(&p);
    OptLoad load;
    ck_assert_int_eq(opt_load_measured(&load, &model, opt_path), 0);
    ck_assert_msg(load.loaded, "%s", load.err.msg);
    ck_assert_mem_eq(load.opt.m, optimizer.m, optimizer.size * sizeof(float));
    ck_assert_mem_eq(load.opt.v, optimizer.v, optimizer.size * sizeof(float));
    optimizer_free(&load.opt);
}
END_TEST

START_TEST(optimizer_state_read_from_memory_gives_what_its_file_gives) {
    Optimizer o;
    OptimizerConfig cfg = adamw_config();
    optimizer_init(&o, &cfg, &model);
    long step = -1;
    Error err = {{0}};
    ck_assert_msg(optimizer_state_load_stream(&o, &model, in_memory(opt_path), opt_path, &step, &err), "%s", err.msg);
    ck_assert_int_eq(step, STEP);
    ck_assert_int_eq(o.step, UPDATES);
    ck_assert_mem_eq(o.m, optimizer.m, optimizer.size * sizeof(float));
    ck_assert_mem_eq(o.v, optimizer.v, optimizer.size * sizeof(float));
    optimizer_free(&o);
}
END_TEST

START_TEST(optimizer_state_load_of_a_missing_file_says_what_to_do) {
    char missing[160];
    snprintf(missing, sizeof missing, "%s/missing/optimizer.safetensors", dir);
    expect_opt_rejected(missing, "no such file");
    expect_opt_rejected(missing, "start a new run from the weights with --init");
}
END_TEST

START_TEST(optimizer_state_load_rejects_the_file_truncated_at_every_length) {
    struct stat st;
    ck_assert_int_eq(stat(opt_path, &st), 0);
    size_t len = (size_t)st.st_size;
    for (size_t n = len; n-- > 0;) {
        ck_assert_int_eq(truncate(opt_path, (off_t)n), 0);
        OptLoad load;
        ptrdiff_t leaked = opt_load_measured(&load, &model, opt_path);
        ck_assert_msg(!load.loaded && strstr(load.err.msg, opt_path) != NULL && !strchr(load.err.msg, '\n'),
                      "cut at %zu of %zu bytes: loaded=%d, '%s'", n, len, load.loaded, load.err.msg);
        ck_assert_msg(leaked == 0, "cut at %zu of %zu bytes: the failed load left %td bytes allocated: %s", n, len,
                      leaked, load.err.msg);
        ck_assert_msg(load.opt.step == SENTINEL_UPDATES && load.opt.m[0] == SENTINEL_M &&
                          load.opt.v[load.opt.size - 1] == SENTINEL_V,
                      "cut at %zu of %zu bytes: the failed load changed the optimizer", n, len);
        optimizer_free(&load.opt);
    }
}
END_TEST

START_TEST(optimizer_state_load_rejects_another_format_or_optimizer) {
    set_metadata("format", "tinygpt-optimizer-3", 19);
    expect_opt_rejected(opt_path, "format is \"tinygpt-optimizer-3\" but this tinygpt reads \"tinygpt-optimizer-2\"");
    save_optimizer();
    set_metadata("optimizer", "sgd", 3);
    expect_opt_rejected(opt_path, "\"optimizer\" is \"sgd\"");
    save_optimizer();
    edit_header("\"format\":\"tinygpt-optimizer-2\",", "");
    expect_opt_rejected(opt_path, "no \"format\"");
    save_optimizer();
    edit_header("{\"__metadata__\":{", "{\"__metadata\":{");
    expect_opt_rejected(opt_path, "no \"__metadata__\"");
}
END_TEST

START_TEST(optimizer_state_load_rejects_a_missing_tensor) {
    remove_tensor("exp_avg_sq.blocks.0.attn.proj.bias");
    expect_opt_rejected(opt_path, "tensor 'exp_avg_sq.blocks.0.attn.proj.bias' is missing");
    save_optimizer();
    remove_tensor("exp_avg.tok_emb.weight");
    expect_opt_rejected(opt_path, "tensor 'exp_avg.tok_emb.weight' is missing");
}
END_TEST

START_TEST(optimizer_state_load_rejects_an_extra_tensor) {
    // amsgrad's third moment, which tinygpt's AdamW does not keep.
    add_tensor("max_exp_avg_sq.head.bias", "[1]", "exp_avg_sq.tok_emb.weight");
    expect_opt_rejected(opt_path, "it has a tensor 'max_exp_avg_sq.head.bias', which is not the optimizer's state");
    save_optimizer();
    add_tensor("exp_avg.blocks.1.attn.q.weight", "[8,8]", "exp_avg.pos_emb.weight");
    expect_opt_rejected(opt_path, "'exp_avg.blocks.1.attn.q.weight'");
}
END_TEST

START_TEST(optimizer_state_load_rejects_a_wrong_shape) {
    int V = model.config.vocab_size;
    char from[128], to[128], needle[128];
    snprintf(from, sizeof from, "\"exp_avg.tok_emb.weight\":{\"dtype\":\"F32\",\"shape\":[%d,8]", V);
    snprintf(to, sizeof to, "\"exp_avg.tok_emb.weight\":{\"dtype\":\"F32\",\"shape\":[8,%d]", V);
    edit_header(from, to);
    snprintf(needle, sizeof needle, "tensor 'exp_avg.tok_emb.weight' has shape [8,%d] but this model", V);
    expect_opt_rejected(opt_path, needle);
    snprintf(needle, sizeof needle, "needs [%d,8]", V);
    expect_opt_rejected(opt_path, needle);
    save_optimizer();
    edit_header("\"exp_avg_sq.head.bias\":{\"dtype\":\"F32\"", "\"exp_avg_sq.head.bias\":{\"dtype\":\"F16\"");
    expect_opt_rejected(opt_path, "tensor 'exp_avg_sq.head.bias' has dtype \"F16\"");
}
END_TEST

START_TEST(optimizer_state_of_another_model_is_rejected) {
    // The same architecture twice as wide: every name matches, no shape does.
    ModelConfig cfg = model.config;
    cfg.n_embd = 16;
    Model wide;
    model_init(&wide, &cfg, 1, false);
    expect_opt_rejected_for(&wide, opt_path, "tensor 'exp_avg.tok_emb.weight' has shape");
    model_free(&wide);
    // A gpt: the names differ.
    cfg = model.config;
    cfg.arch = ARCH_GPT;
    cfg.n_layer = 1;
    Model gpt;
    model_init(&gpt, &cfg, 1, false);
    expect_opt_rejected_for(&gpt, opt_path, "which is not the optimizer's state of this gpt model");
    model_free(&gpt);
}
END_TEST

START_TEST(optimizer_state_load_rejects_a_model_checkpoint) {
    expect_opt_rejected(path, "it is a model checkpoint (format \"tinygpt-2\"), not AdamW's state");
    // The model file with the optimizer's metadata: its names give it away.
    edit_target = path;
    edit_header("\"format\":\"tinygpt-2\"", "\"format\":\"tinygpt-optimizer-2\",\"optimizer\":\"adamw\",\"updates\":\"5\"");
    expect_opt_rejected(path, "it has a tensor 'tok_emb.weight', which is not the optimizer's state");
}
END_TEST

START_TEST(checkpoint_load_rejects_an_optimizer_state) {
    expect_file_rejected(opt_path, "it holds AdamW's state");
    expect_file_rejected(opt_path, "give the model.safetensors saved next to it");
}
END_TEST

START_TEST(optimizer_state_load_rejects_non_finite_or_negative_moments) {
    set_moment(0, "blocks.0.attn.q.weight", 3, NAN);
    expect_opt_rejected(opt_path, "tensor 'exp_avg.blocks.0.attn.q.weight' holds NaN at element 3");
    save_optimizer();
    set_moment(1, "head.bias", 2, INFINITY);
    expect_opt_rejected(opt_path, "tensor 'exp_avg_sq.head.bias' holds an infinity at element 2");
    save_optimizer();
    set_moment(0, "tok_emb.weight", 5, -INFINITY);
    expect_opt_rejected(opt_path, "tensor 'exp_avg.tok_emb.weight' holds an infinity at element 5");
    save_optimizer();
    set_moment(1, "pos_emb.weight", 1, -1e-30f);
    expect_opt_rejected(opt_path, "tensor 'exp_avg_sq.pos_emb.weight' holds -1e-30 at element 1, but a mean of squares cannot be negative");
}
END_TEST

START_TEST(optimizer_state_load_rejects_negative_missing_or_malformed_counts) {
    set_metadata("updates", "-1", 2);
    expect_opt_rejected(opt_path, "\"updates\" is \"-1\", not a whole number");
    save_optimizer();
    set_metadata("step", "12x", 3);
    expect_opt_rejected(opt_path, "\"step\" is \"12x\"");
    save_optimizer();
    edit_header(",\"updates\":\"1000\"", "");
    expect_opt_rejected(opt_path, "no \"updates\"");
}
END_TEST

START_TEST(optimizer_state_load_rejects_overlapping_or_out_of_file_offsets) {
    int tok_emb = index_of("tok_emb.weight");
    set_offsets("exp_avg_sq.tok_emb.weight", begin_of(tok_emb), end_of(tok_emb));
    expect_opt_rejected(opt_path, "overlaps the tensor before it");
    save_optimizer();
    size_t data = 2 * model.param_table.total * sizeof(float);
    int pos_emb = index_of("pos_emb.weight");
    set_offsets("exp_avg_sq.pos_emb.weight", data, data + end_of(pos_emb) - begin_of(pos_emb));
    expect_opt_rejected(opt_path, "the data section is only");
}
END_TEST


// ---- bpe --------------------------------------------------------------------------

START_TEST(a_bpe_checkpoint_loads_with_its_merges) {
    Model m;
    Tokenizer t;
    load_ok(&m, &t, 1, false);
    ck_assert_int_eq(t.kind, TOKENIZER_BPE);
    ck_assert_int_eq(t.vocab_size, BPE_BYTES + 3);
    char *saved = bpe_merges_text(&tok.bpe), *loaded = bpe_merges_text(&t.bpe);
    ck_assert_str_eq(loaded, saved);
    size_t len;
    char *bytes = slurp(path, &len);
    const char *tokenizer = "\"tokenizer\":\"bpe\",\"merges\":", *vocab = "\"vocab\":";
    ck_assert_ptr_nonnull(memmem(bytes, len, tokenizer, strlen(tokenizer)));
    ck_assert_ptr_null(memmem(bytes, len, vocab, strlen(vocab)));
    free(bytes);
    free(saved);
    free(loaded);
    tokenizer_free(&t);
    model_free(&m);
}
END_TEST

START_TEST(load_rejects_an_unknown_tokenizer_or_damaged_merges) {
    set_metadata("tokenizer", "words", 5);
    expect_rejected("\"tokenizer\" is \"words\", a tokenizer this tinygpt does not know");
    start_over();
    set_metadata("merges", "1 2 3", 5);
    expect_rejected("its merges");
    start_over();
    char *merges = bpe_merges_text(&tok.bpe);
    *strrchr(merges, ' ') = '\0';  // drop the last merge: "a b c d e"
    *strrchr(merges, ' ') = '\0';
    set_metadata("merges", merges, strlen(merges));
    expect_rejected("its merges make 258 tokens but vocab_size says 259");
    free(merges);
    start_over();
    edit_header("\"merges\":", "\"merges_\":");
    expect_rejected("merges");
}
END_TEST

Suite *checkpoint_suite(void) {
    Suite *s = suite_create("checkpoint");
    TCase *round_trip = tcase_create("round trip");
    tcase_add_checked_fixture(round_trip, setup, teardown);
    tcase_add_loop_test(round_trip, save_then_load_restores_every_weight_bit_exactly, 0, 3);
    tcase_add_loop_test(round_trip, save_then_load_restores_config_vocabulary_and_step, 0, 3);
    tcase_add_test(round_trip, load_accepts_a_null_step_pointer);
    tcase_add_loop_test(round_trip, saving_a_loaded_checkpoint_gives_identical_bytes, 0, 3);
    tcase_add_test(round_trip, save_leaves_no_tmp_file_behind);
    tcase_add_test(round_trip, save_replaces_an_existing_checkpoint);
    tcase_add_test(round_trip, save_over_a_directory_fails_and_removes_its_tmp_file);
    tcase_add_test(round_trip, save_into_a_missing_directory_fails_naming_the_file);
    suite_add_tcase(s, round_trip);

    TCase *layout = tcase_create("file layout");
    tcase_add_checked_fixture(layout, setup, teardown);
    tcase_add_test(layout, saved_file_has_the_safetensors_byte_layout);
    tcase_add_test(layout, saved_header_lists_each_tensor_with_its_shape_and_offsets);
    tcase_add_test(layout, saved_metadata_holds_strings_for_vocab_sizes_dropout_and_step);
    tcase_add_loop_test(layout, load_accepts_tensors_stored_in_another_order, 0, 2);
    tcase_add_test(layout, load_accepts_an_edited_header_with_no_padding);
    suite_add_tcase(s, layout);

    TCase *container = tcase_create("damaged container");
    tcase_add_checked_fixture(container, setup, teardown);
    tcase_set_timeout(container, 60);  // the every-length truncation test loads card ~3000 times, gpt ~9000
    tcase_add_test(container, load_of_a_missing_file_fails_naming_it);
    tcase_add_test(container, load_refuses_a_fifo_at_once_instead_of_waiting_for_a_writer);
    tcase_add_loop_test(container, load_rejects_the_file_truncated_at_every_length, 0, 2);
    tcase_add_test(container, load_rejects_a_wrong_header_length);
    tcase_add_test(container, load_rejects_a_file_shorter_than_the_length_field);
    tcase_add_test(container, load_rejects_a_header_that_is_not_json);
    tcase_add_test(container, load_rejects_a_tensor_named_twice);
    suite_add_tcase(s, container);

    TCase *tensors = tcase_create("damaged tensors");
    tcase_add_checked_fixture(tensors, setup, teardown);
    tcase_add_loop_test(tensors, load_rejects_a_missing_tensor, 0, 2);
    tcase_add_test(tensors, load_rejects_an_extra_tensor);
    tcase_add_test(tensors, load_rejects_a_dtype_other_than_f32);
    tcase_add_test(tensors, load_rejects_a_wrong_shape);
    tcase_add_test(tensors, load_rejects_offsets_outside_the_data_section);
    tcase_add_test(tensors, load_rejects_offsets_that_are_not_an_increasing_pair);
    tcase_add_test(tensors, load_rejects_a_byte_length_that_does_not_match_the_shape);
    tcase_add_test(tensors, load_rejects_overlapping_tensors);
    tcase_add_test(tensors, load_rejects_extra_bytes_after_the_last_tensor);
    tcase_add_loop_test(tensors, load_rejects_nan_or_infinite_weights_naming_the_tensor, 0, 2);
    tcase_add_test(tensors, load_rejects_weights_beyond_the_bound_naming_the_tensor);
    suite_add_tcase(s, tensors);

    TCase *metadata = tcase_create("damaged metadata");
    tcase_add_checked_fixture(metadata, setup, teardown);
    tcase_add_test(metadata, load_rejects_a_header_without_metadata);
    tcase_add_test(metadata, load_rejects_another_format);
    tcase_add_test(metadata, load_rejects_missing_or_non_string_metadata);
    tcase_add_test(metadata, load_rejects_metadata_that_is_not_a_number);
    tcase_add_test(metadata, load_rejects_metadata_that_contradicts_the_shapes);
    tcase_add_test(metadata, load_rejects_an_impossible_config);
    tcase_add_test(metadata, load_rejects_a_vocabulary_of_the_wrong_length);
    tcase_add_test(metadata, load_rejects_a_vocabulary_out_of_code_point_order);
    tcase_add_test(metadata, load_rejects_a_vocabulary_with_a_repeated_character);
    suite_add_tcase(s, metadata);

    TCase *card = tcase_create("card architecture");
    tcase_add_checked_fixture(card, setup, teardown);
    tcase_add_test(card, a_card_checkpoint_without_arch_or_n_layer_loads_as_card);
    tcase_add_test(card, load_rejects_an_unknown_arch);
    tcase_add_test(card, load_rejects_a_card_n_layer_other_than_one);
    tcase_add_test(card, load_rejects_a_card_file_that_says_it_is_gpt);
    suite_add_tcase(s, card);

    TCase *gpt = tcase_create("gpt");
    tcase_add_checked_fixture(gpt, setup_gpt, teardown);
    tcase_add_test(gpt, gpt_without_some_parts_saves_and_loads_which_parts_it_lacks);
    tcase_add_test(gpt, gpt_saved_header_lists_its_blocks_and_ln_f_but_no_head);
    tcase_add_test(gpt, gpt_load_rejects_a_file_without_n_layer);
    tcase_add_test(gpt, gpt_load_rejects_n_layer_out_of_range);
    tcase_add_test(gpt, gpt_load_rejects_tensors_of_a_block_past_n_layer);
    tcase_add_test(gpt, gpt_load_rejects_an_n_layer_larger_than_its_blocks);
    tcase_add_test(gpt, gpt_load_rejects_a_tensor_gpt_does_not_have);
    tcase_add_test(gpt, gpt_load_rejects_a_wrong_shape_naming_both_shapes);
    suite_add_tcase(s, gpt);

    TCase *bpe = tcase_create("bpe");
    tcase_add_checked_fixture(bpe, setup_bpe, teardown);
    tcase_add_test(bpe, a_bpe_checkpoint_loads_with_its_merges);
    tcase_add_test(bpe, load_rejects_an_unknown_tokenizer_or_damaged_merges);
    suite_add_tcase(s, bpe);

    TCase *checksum = tcase_create("checksum");
    tcase_add_checked_fixture(checksum, setup, teardown);
    tcase_set_timeout(checksum, 120);  // a load per byte of the header
    tcase_add_loop_test(checksum, a_changed_byte_anywhere_is_refused, 0, 2);
    tcase_add_test(checksum, a_file_from_before_the_checksum_still_loads);
    suite_add_tcase(s, checksum);

    TCase *state = tcase_create("a run's metadata");
    tcase_add_checked_fixture(state, setup, teardown);
    tcase_add_test(state, save_run_then_read_header_gives_back_every_key_byte_for_byte);
    tcase_add_test(state, a_checkpoint_read_from_memory_gives_what_its_file_gives);
    tcase_add_test(state, a_checkpoint_with_a_run_still_loads_as_weights_for_sample_and_eval);
    tcase_add_test(state, read_header_of_a_checkpoint_without_a_run_says_to_use_init);
    tcase_add_test(state, read_header_rejects_a_metadata_value_that_is_not_a_string);
    tcase_add_test(state, model_metadata_names_every_key_of_the_model);
    tcase_add_test(state, save_into_the_current_directory_by_a_bare_file_name_works);
    suite_add_tcase(s, state);

    TCase *adamw = tcase_create("optimizer state");
    tcase_add_checked_fixture(adamw, setup_opt, teardown_opt);
    tcase_set_timeout(adamw, 60);  // the every-length truncation test loads the file ~7000 times
    tcase_add_test(adamw, optimizer_state_round_trips_m_v_step_and_updates_bit_for_bit_for_card_and_gpt);
    tcase_add_test(adamw, optimizer_state_load_accepts_a_null_step_pointer);
    tcase_add_test(adamw, optimizer_state_file_is_plain_safetensors_with_torch_adamw_names);
    tcase_add_test(adamw, optimizer_state_save_replaces_the_old_file_and_leaves_no_tmp_file);
    tcase_add_test(adamw, optimizer_state_save_into_a_missing_directory_fails_naming_the_file);
    tcase_add_test(adamw, optimizer_state_load_accepts_tensors_stored_in_another_order);
    tcase_add_test(adamw, optimizer_state_read_from_memory_gives_what_its_file_gives);
    tcase_add_test(adamw, optimizer_state_load_of_a_missing_file_says_what_to_do);
    tcase_add_test(adamw, optimizer_state_load_rejects_the_file_truncated_at_every_length);
    tcase_add_test(adamw, optimizer_state_load_rejects_another_format_or_optimizer);
    tcase_add_test(adamw, optimizer_state_load_rejects_a_missing_tensor);
    tcase_add_test(adamw, optimizer_state_load_rejects_an_extra_tensor);
    tcase_add_test(adamw, optimizer_state_load_rejects_a_wrong_shape);
    tcase_add_test(adamw, optimizer_state_of_another_model_is_rejected);
    tcase_add_test(adamw, optimizer_state_load_rejects_a_model_checkpoint);
    tcase_add_test(adamw, checkpoint_load_rejects_an_optimizer_state);
    tcase_add_test(adamw, optimizer_state_load_rejects_non_finite_or_negative_moments);
    tcase_add_test(adamw, optimizer_state_load_rejects_negative_missing_or_malformed_counts);
    tcase_add_test(adamw, optimizer_state_load_rejects_overlapping_or_out_of_file_offsets);
    suite_add_tcase(s, adamw);
    return s;
}
