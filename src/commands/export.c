// export.c: `tinygpt export`: a model as a Hugging Face GPT-2 directory
// (see export.h).
//
// Reading order: file 37b, with export.h.
//
// What it does: GPT-2 and tinygpt's gpt are the same computation up to
// names and layout. GPT-2's linear layers are Hugging Face's Conv1D,
// y = x @ W + b with W [in, out], where tinygpt's are nn.Linear, y = x @ W^T
// with W [out, in]; GPT-2 computes q, k and v with one c_attn of width 3C,
// tinygpt keeps three [C, C] matrices; and GPT-2 has a bias in every linear
// layer and LayerNorm, tinygpt's gpt none. So each GPT-2 tensor is one row
// of HF_TENSORS below: the tinygpt tensors it is made of, joined, and
// whether it is transposed. A tensor the model does not have (a bias of the
// gpt) is written as zeros, which adds nothing: the same logits.
//
// A gpt2 (`--arch gpt2`, or a GPT-2 read from a directory) has every one
// of those biases: they are copied instead of zeroed, and its GELU may be
// GPT-2's tanh form ("gelu_new").
#include "export.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "checkpoint.h"
#include "gpt2_tokenizer.h"
#include "hf_gpt2.h"
#include "json.h"
#include "layernorm.h"

// ---- Which models are GPT-2 ---------------------------------------------------

// export_check: the gpt's parts one by one; each swap GPT-2 cannot compute
// is refused with the flag that made it.
bool export_check(const ModelConfig *cfg, TokenizerKind kind, Error *err) {
    if (cfg->arch == ARCH_CARD)
        return error_set(err, "a card model is not GPT-2 (one block of attention alone, no LayerNorm, no MLP); export a model trained with --arch gpt or gpt2");
    const struct {
        bool differs;
        const char *flag;
        const char *why;
    } swaps[] = {
        {cfg->no_layernorm, "--no-layernorm", "GPT-2 has its LayerNorms"},
        {cfg->no_mlp, "--no-mlp", "GPT-2 has an MLP in every block"},
        {cfg->no_residual, "--no-residual", "GPT-2's blocks add to a residual stream"},
        {cfg->norm != NORM_LAYERNORM, "--norm rmsnorm", "GPT-2's norms are LayerNorm"},
        {cfg->mlp == MLP_RELU2, "--mlp relu2", "GPT-2's MLP is GELU's"},
        {cfg->mlp == MLP_SWIGLU, "--mlp swiglu", "GPT-2's MLP is GELU's"},
        {cfg->untied_head, "--untied-head", "GPT-2's head is tied to its token embedding"},
        {cfg->pos == POS_ROPE, "--pos rope", "GPT-2 learns a table of positions"},
        {cfg->qk_norm, "--qk-norm", "GPT-2 does not normalise q and k"},
    };
    for (size_t i = 0; i < sizeof swaps / sizeof swaps[0]; i++)
        if (swaps[i].differs)
            return error_set(err, "this gpt was trained with %s, and %s; only a gpt of GPT-2's parts exports: retrain without %s (the modern recipe's defaults are switched off with --norm layernorm --mlp gelu --pos learned --tied-head --no-qk-norm)",
                             swaps[i].flag, swaps[i].why, swaps[i].flag);
    if (kind == TOKENIZER_CHAR)
        return error_set(err, "a char model's tokens are characters, but GPT-2's are byte-level bpe pieces (vocab.json and merges.txt); retrain with --tokenizer bpe");
    return true;
}

// activation_function: config.json's name of the MLP's GELU. tinygpt's gpt
// computes GELU exactly, on erf (gelu.h): Hugging Face's "gelu". GPT-2's own
// is "gelu_new", the tanh approximation, which the gpt2 architecture keeps.
static const char *activation_function(const ModelConfig *cfg) { return cfg->mlp == MLP_GELU_TANH ? "gelu_new" : "gelu"; }

// ---- GPT-2's tensors, each from tinygpt's ------------------------------------

// The sizes GPT-2's shapes are made of.
typedef enum { HF_NONE, HF_V, HF_T, HF_C, HF_3C, HF_4C } HfDim;

typedef struct {
    const char *name;      // GPT-2's name; a block's after "h.{i}."
    HfDim rows, cols;      // its shape; cols HF_NONE: a vector
    const char *from[3];   // tinygpt's tensors joined to make it (a block's after "blocks.{i}."); NULL-ended
    bool transpose;        // a Conv1D weight: each of "from" is nn.Linear's [out, in], joined along out, transposed
} HfTensor;

// The gpt2 repository's tensors, in its order. A vector whose tinygpt
// tensors are absent (the gpt's biases) is zeros; every matrix is there.
static const HfTensor HF_FRONT[] = {
    {"wte.weight", HF_V, HF_C, {"tok_emb.weight"}, false},
    {"wpe.weight", HF_T, HF_C, {"pos_emb.weight"}, false},
};
static const HfTensor HF_BLOCK[] = {
    {"ln_1.weight", HF_C, HF_NONE, {"ln1.weight"}, false},
    {"ln_1.bias", HF_C, HF_NONE, {"ln1.bias"}, false},
    {"attn.c_attn.weight", HF_C, HF_3C, {"attn.q.weight", "attn.k.weight", "attn.v.weight"}, true},
    {"attn.c_attn.bias", HF_3C, HF_NONE, {"attn.q.bias", "attn.k.bias", "attn.v.bias"}, false},
    {"attn.c_proj.weight", HF_C, HF_C, {"attn.proj.weight"}, true},
    {"attn.c_proj.bias", HF_C, HF_NONE, {"attn.proj.bias"}, false},
    {"ln_2.weight", HF_C, HF_NONE, {"ln2.weight"}, false},
    {"ln_2.bias", HF_C, HF_NONE, {"ln2.bias"}, false},
    {"mlp.c_fc.weight", HF_C, HF_4C, {"mlp.fc.weight"}, true},
    {"mlp.c_fc.bias", HF_4C, HF_NONE, {"mlp.fc.bias"}, false},
    {"mlp.c_proj.weight", HF_4C, HF_C, {"mlp.proj.weight"}, true},
    {"mlp.c_proj.bias", HF_C, HF_NONE, {"mlp.proj.bias"}, false},
};
static const HfTensor HF_BACK[] = {
    {"ln_f.weight", HF_C, HF_NONE, {"ln_f.weight"}, false},
    {"ln_f.bias", HF_C, HF_NONE, {"ln_f.bias"}, false},
};

static size_t hf_dim(HfDim d, const ModelConfig *cfg) {
    const size_t C = (size_t)cfg->n_embd;
    switch (d) {
    case HF_NONE: return 0;
    case HF_V: return (size_t)cfg->vocab_size;
    case HF_T: return (size_t)cfg->block_size;
    case HF_C: return C;
    case HF_3C: return 3 * C;
    case HF_4C: return 4 * C;
    }
    return 0;
}

static int n_from(const HfTensor *e) {
    int n = 0;
    while (n < 3 && e->from[n]) n++;
    return n;
}

// fill: GPT-2's tensor "e" into "out" from m's tensors named "prefix" +
// each of e->from. Each source is one n-th of the tensor (along its last
// dimension once transposed): for a Conv1D weight [in, out], source s is
// nn.Linear's [out/n, in] and fills columns [s*out/n, (s+1)*out/n).
static void fill(float *out, const HfTensor *e, const char *prefix, const Model *m) {
    const size_t rows = hf_dim(e->rows, &m->config), cols = hf_dim(e->cols, &m->config);
    const size_t size = rows * (cols ? cols : 1);
    const int n = n_from(e);
    for (int s = 0; s < n; s++) {
        char name[sizeof ((TensorSpec *)0)->name];
        snprintf(name, sizeof name, "%s%s", prefix, e->from[s]);
        const TensorSpec *spec = table_find(&m->param_table, name);
        const size_t share = size / (size_t)n;
        if (!spec) {  // a bias the gpt does not have: it adds zero
            assert(cols == 0);
            memset(out + (size_t)s * share, 0, share * sizeof *out);
            continue;
        }
        assert(spec->size == share);
        const float *src = m->params_memory + spec->offset;
        if (!e->transpose) {
            memcpy(out + (size_t)s * share, src, share * sizeof *out);
            continue;
        }
        const size_t in = rows, out_s = cols / (size_t)n;  // source [out_s, in]
        for (size_t r = 0; r < out_s; r++)
            for (size_t i = 0; i < in; i++) out[i * cols + (size_t)s * out_s + r] = src[r * in + i];
    }
}

// add_rows: the rows of "list" to "table" (named "prefix" + name), and,
// when "memory" is given, their values (at each one's offset).
static void add_rows(TensorTable *table, float *memory, const HfTensor *list, int count, const char *hf_prefix,
                     const char *tg_prefix, const Model *m) {
    for (int i = 0; i < count; i++) {
        char name[sizeof ((TensorSpec *)0)->name];
        snprintf(name, sizeof name, "%s%s", hf_prefix, list[i].name);
        table_add(table, name, hf_dim(list[i].rows, &m->config), hf_dim(list[i].cols, &m->config), 0);
        if (memory) fill(memory + table->specs[table->count - 1].offset, &list[i], tg_prefix, m);
    }
}

// walk: every row of the front, each block's, the back's, in order; the
// first pass (memory NULL) sizes the table, the second fills it.
static void walk(TensorTable *table, float *memory, const Model *m) {
    memset(table, 0, sizeof *table);
    add_rows(table, memory, HF_FRONT, (int)(sizeof HF_FRONT / sizeof HF_FRONT[0]), "", "", m);
    for (int l = 0; l < m->n_layer; l++) {
        char hf_prefix[32], tg_prefix[32];
        snprintf(hf_prefix, sizeof hf_prefix, "h.%d.", l);
        snprintf(tg_prefix, sizeof tg_prefix, "blocks.%d.", l);
        add_rows(table, memory, HF_BLOCK, (int)(sizeof HF_BLOCK / sizeof HF_BLOCK[0]), hf_prefix, tg_prefix, m);
    }
    add_rows(table, memory, HF_BACK, (int)(sizeof HF_BACK / sizeof HF_BACK[0]), "", "", m);
}

float *export_tensors(const Model *m, TensorTable *table) {
    walk(table, NULL, m);
    float *memory = xmalloc((table->total > 0 ? table->total : 1) * sizeof *memory);
    table_free(table);
    walk(table, memory, m);
    return memory;
}

// ---- The directory ------------------------------------------------------------

// config_json: GPT2Config's keys for "m". The three dropouts are the one
// tinygpt trained with (it drops attention weights and the stream's
// inputs, as GPT-2's attn_pdrop, resid_pdrop and embd_pdrop do); a gpt2
// tokenizer's <|endoftext|> is GPT-2's bos and eos, a bpe model has none
// the model knows (docs/export.md).
static void config_json(JsonBuf *b, const Model *m, const Tokenizer *tok) {
    const ModelConfig *c = &m->config;
    char eot[16] = "null";
    if (tok->kind == TOKENIZER_GPT2) snprintf(eot, sizeof eot, "%d", tok->end_of_text);
    json_buf_printf(b, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n");
    json_buf_printf(b, "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n", c->vocab_size, c->block_size,
                    c->block_size);
    json_buf_printf(b, "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_inner\": null,\n", c->n_embd,
                    m->n_layer, c->n_head);
    json_buf_printf(b, "  \"activation_function\": \"%s\",\n  \"layer_norm_epsilon\": %g,\n", activation_function(c),
                    (double)LAYERNORM_EPS);
    json_buf_printf(b, "  \"resid_pdrop\": %.9g,\n  \"embd_pdrop\": %.9g,\n  \"attn_pdrop\": %.9g,\n", (double)c->dropout,
                    (double)c->dropout, (double)c->dropout);
    json_buf_printf(b, "  \"initializer_range\": 0.02,\n  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n");
    json_buf_printf(b, "  \"bos_token_id\": %s,\n  \"eos_token_id\": %s,\n  \"torch_dtype\": \"float32\"\n}\n", eot, eot);
}

// write_in: "len" bytes as "dir"/"name", atomically.
static bool write_in(const char *dir, const char *name, const char *data, size_t len, Error *err) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return error_set(err, "the directory name '%s' is too long", dir);
    return write_file_atomic(path, data, len, err);
}

bool export_model(const Model *m, const Tokenizer *tok, const char *dir, Error *err) {
    if (!export_check(&m->config, tok->kind, err)) return false;
    JsonBuf vocab = {0}, merges = {0}, config = {0};
    // The tokenizer first: it is the one part that can still be refused.
    bool ok = gpt2_tokenizer_files(tok, &vocab, &merges, err);
    if (ok) {
        config_json(&config, m, tok);
        ok = write_in(dir, "config.json", config.data, config.len, err);
    }
    if (ok) {
        TensorTable table;
        float *memory = export_tensors(m, &table);
        // Hugging Face's loader asks for "format": "pt" (PyTorch's tensors).
        Metadata md = {0};
        metadata_set(&md, "format", "pt");
        const TensorGroup group = {"", &table, memory};
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", dir) >= sizeof path)
            ok = error_set(err, "the directory name '%s' is too long", dir);
        else ok = safetensors_save(path, &md, &group, 1, err);
        metadata_free(&md);
        table_free(&table);
        free(memory);
    }
    if (ok) ok = write_in(dir, "vocab.json", vocab.data, vocab.len, err) && write_in(dir, "merges.txt", merges.data, merges.len, err);
    json_buf_free(&vocab);
    json_buf_free(&merges);
    json_buf_free(&config);
    return ok;
}

// ---- The command ----------------------------------------------------------------

// is_empty_or_absent: whether "dir" does not exist or holds nothing, so
// writing into it replaces nothing of the user's.
static bool is_empty_or_absent(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT;
    bool empty = true;
    for (struct dirent *e; empty && (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
    closedir(d);
    return empty;
}

int cmd_export(int argc, char **argv) {
    const char *model_path = NULL;  // the checkpoint to export (required)
    const char *out = NULL;         // the directory to write (required)
    bool force = false;             // write into a directory that holds files
    Flag flags[] = {
        model_flag(&model_path, "checkpoint written by 'tinygpt train' (or its run directory) (required): a gpt of GPT-2's parts with a bpe tokenizer"),
        {"--out", FLAG_STRING, &out, "DIR", "the Hugging Face GPT-2 directory to write (required): created if missing, and empty unless --force", 0, 0, false, NULL, NULL},
        {"--force", FLAG_SWITCH, &force, NULL, "write into a directory that holds files, replacing config.json, model.safetensors, vocab.json and merges.txt", 0, 0, false, NULL, NULL},
    };
    Command cmd = {"export", NULL,
                   "Write a model as a Hugging Face GPT-2 directory (config.json, model.safetensors, vocab.json, merges.txt) that GPT2LMHeadModel.from_pretrained reads.",
                   "tinygpt export --model runs/gpt2ish/model.safetensors --out runs/gpt2ish/hf", flags,
                   (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    char run_model[4200];  // a run directory's model.safetensors
    model_path = required_model_path(&cmd, model_path, run_model, sizeof run_model);
    if (!out) usage_error(&cmd, "missing --out DIR");

    Model model;
    Tokenizer tok;
    Error err;
    if (!checkpoint_load(model_path, &model, &tok, 1, false, NULL, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    if (!export_check(&model.config, tok.kind, &err)) die(EXIT_RUNTIME, "cannot export '%s': %s", model_path, err.msg);
    if (!force && !is_empty_or_absent(out))
        die(EXIT_RUNTIME, "--out '%s' is not an empty directory; give a new or empty one, or --force to replace its config.json, model.safetensors, vocab.json and merges.txt",
            out);
    make_dir(out);
    if (!export_model(&model, &tok, out, &err)) die(EXIT_RUNTIME, "cannot export '%s': %s", model_path, err.msg);
    printf("wrote %s: config.json, model.safetensors, vocab.json, merges.txt (GPT-2 of %d layers, %d heads, %d channels, %d positions, %d tokens)\n",
           out, model.n_layer, model.config.n_head, model.config.n_embd, model.config.block_size, model.config.vocab_size);
    tokenizer_free(&tok);
    model_free(&model);
    return 0;
}
