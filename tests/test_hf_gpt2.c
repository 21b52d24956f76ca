// test_hf_gpt2.c: tests for src/model/hf_gpt2.c (a Hugging Face GPT-2
// directory read as a gpt2) and the F16/BF16 reading of src/io/safetensors.c.
//
// The directories are written here, from a gpt2 Model with random weights:
// config.json, vocab.json and merges.txt (GPT-2's 256 byte tokens and
// <|endoftext|>, no merges: V = 257), and model.safetensors under GPT-2's
// names and Conv1D layouts, its bytes written by this file's own writer
// (hf_write), its transposes by plain loops here, not by the reader's.
//
// 1. every tensor lands where the model keeps it, bit for bit: F32, with
//    "transformer." names, lm_head and the mask buffers, and in F16 and
//    BF16 (weights exact in both);
// 2. its logits are those of a `--arch gpt2` checkpoint of the same weights;
// 3. F16 and BF16 conversion of special values, and a tensor read in pieces;
// 4. each bad directory gets one line naming the file and the key;
// 5. sample, eval and attention take --model DIR.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "checkpoint.h"
#include "helpers.h"
#include "hf_gpt2.h"
#include "model.h"
#include "safetensors.h"
#include "tests.h"
#include "utf8.h"

#define TIMEOUT_SECONDS 30

// The model of the directories: V = 257 (GPT-2's tokenizer without merges),
// T = 8, C = 16, 2 heads, 2 blocks, GELU's tanh form ("gelu_new").
enum { V = 257, T = 8, C = 16, NH = 2, L = 2 };
static const ModelConfig HF_CFG = {.vocab_size = V, .block_size = T, .n_embd = C, .n_head = NH, .arch = ARCH_GPT2,
                                   .n_layer = L, .mlp = MLP_GELU_TANH};

static char dir[256];
static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// ---------------------------------------------------------------------------
// A safetensors writer of any dtype, independent of safetensors_save.

typedef struct {
    char name[96];
    Dtype dtype;
    int ndim;
    uint64_t shape[4];
    float *values;  // [count], as floats; written in "dtype"
    size_t count;
} HfTensor;

typedef struct {
    HfTensor t[96];
    int n;
} HfFile;

// hf_add: a tensor "name" of "dtype" and shape "dims" (ndim of them), its
// values copied from "values" (NULL: zeros).
static HfTensor *hf_add(HfFile *f, const char *name, Dtype dtype, int ndim, const uint64_t *dims, const float *values) {
    ck_assert(f->n < (int)(sizeof f->t / sizeof f->t[0]));
    HfTensor *t = &f->t[f->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->count = 1;
    for (int d = 0; d < ndim; d++) t->count *= (size_t)(t->shape[d] = dims[d]);
    t->values = xcalloc(t->count ? t->count : 1, sizeof(float));
    if (values) memcpy(t->values, values, t->count * sizeof(float));
    return t;
}

static HfTensor *hf_find(HfFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    ck_abort_msg("no tensor %s", name);
    return NULL;
}

// hf_remove: drop tensor "name" from the file.
static void hf_remove(HfFile *f, const char *name) {
    HfTensor *t = hf_find(f, name);
    free(t->values);
    *t = f->t[--f->n];
}

static void hf_free(HfFile *f) {
    for (int i = 0; i < f->n; i++) free(f->t[i].values);
    f->n = 0;
}

// The bits of float "x" as F16 or BF16, which must hold it exactly (the
// test's weights are chosen so): BF16 is a float's top half; F16 rebiases
// the exponent (127 -> 15) and keeps the top 10 mantissa bits, of a normal x.
static uint16_t narrow_bits(float x, Dtype dtype) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if (dtype == DTYPE_BF16) {
        ck_assert_msg((b & 0xFFFF) == 0, "%g is not a bfloat16", (double)x);
        return (uint16_t)(b >> 16);
    }
    if (x == 0.0f) return (uint16_t)(b >> 16);  // +-0
    const int e = (int)((b >> 23) & 0xFF) - 127 + 15;
    ck_assert_msg(e >= 1 && e <= 30 && (b & 0x1FFF) == 0, "%g is not a normal half", (double)x);
    return (uint16_t)(((b >> 16) & 0x8000) | ((uint32_t)e << 10) | ((b >> 13) & 0x3FF));
}

static const unsigned DTYPE_BYTES[] = {[DTYPE_F32] = 4, [DTYPE_F16] = 2, [DTYPE_BF16] = 2, [DTYPE_I32] = 4};

// hf_write: the file at "path": the 8-byte length, the header (the tensors
// in order, at consecutive offsets), padded to 8 bytes, then the data.
static void hf_write(const HfFile *f, const char *path) {
    size_t cap = 1 << 16, n = 0;
    char *header = xmalloc(cap);
    n += (size_t)snprintf(header + n, cap - n, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t offset = 0;
    for (int i = 0; i < f->n; i++) {
        const HfTensor *t = &f->t[i];
        n += (size_t)snprintf(header + n, cap - n, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name,
                              dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            n += (size_t)snprintf(header + n, cap - n, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
        const uint64_t bytes = t->count * DTYPE_BYTES[t->dtype];
        n += (size_t)snprintf(header + n, cap - n, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                              (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    n += (size_t)snprintf(header + n, cap - n, "}");
    while ((8 + n) % 8) header[n++] = ' ';
    ck_assert(n < cap);
    FILE *out = fopen(path, "wb");
    ck_assert_ptr_nonnull(out);
    unsigned char length[8];
    for (int i = 0; i < 8; i++) length[i] = (unsigned char)((uint64_t)n >> (8 * i));
    fwrite(length, 1, 8, out);
    fwrite(header, 1, n, out);
    for (int i = 0; i < f->n; i++) {
        const HfTensor *t = &f->t[i];
        for (size_t j = 0; j < t->count; j++) {
            if (t->dtype == DTYPE_F32) {
                fwrite(&t->values[j], 4, 1, out);
            } else if (t->dtype == DTYPE_I32) {
                const int32_t v = (int32_t)t->values[j];
                fwrite(&v, 4, 1, out);
            } else {
                const uint16_t bits = narrow_bits(t->values[j], t->dtype);
                fwrite(&bits, 2, 1, out);
            }
        }
    }
    ck_assert_int_eq(fclose(out), 0);
    free(header);
}

// ---------------------------------------------------------------------------
// The directory, from a Model.

// random_model: a gpt2 of HF_CFG, every weight k/128 with k in [-127, 127]
// (exact in F16 and BF16 alike), LayerNorm weights near 1.
static void random_model(Model *m, uint64_t seed) {
    model_init(m, &HF_CFG, 1, false);
    Rng rng;
    rng_init(&rng, seed);
    for (size_t i = 0; i < m->param_table.total; i++)
        m->params_memory[i] = (float)((int)rng_below(&rng, 255) - 127) / 128.0f;
    for (int l = 0; l < L; l++)
        for (int c = 0; c < C; c++) {
            m->params.blocks[l].ln1_weight[c] += 1.0f;
            m->params.blocks[l].ln2_weight[c] += 1.0f;
        }
}

// Conv1D: GPT-2's W [in, out] for our weight [out, in], written out by hand.
static float *conv1d_of(const float *weight, int out, int in) {
    float *w = xmalloc((size_t)out * in * sizeof(float));
    for (int o = 0; o < out; o++)
        for (int i = 0; i < in; i++) w[(size_t)i * out + o] = weight[(size_t)o * in + i];
    return w;
}

// Options of a written directory.
typedef struct {
    Dtype dtype;          // of every weight (F32 unless said)
    bool prefix;          // names with "transformer." in front
    bool lm_head;         // an lm_head.weight, equal to wte
    bool mask_buffers;    // h.{i}.attn.bias [1,1,T,T] and .masked_bias []
} HfOptions;

// hf_from_model: GPT-2's tensors of "m" into "f".
static void hf_from_model(HfFile *f, const Model *m, HfOptions o) {
    const char *pre = o.prefix ? "transformer." : "";
    char name[96];
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    const uint64_t vc[2] = {V, C}, tc[2] = {T, C}, c1[1] = {C}, c3[2] = {C, 3 * C}, c3b[1] = {3 * C};
    const uint64_t cc[2] = {C, C}, c4[2] = {C, 4 * C}, c4b[1] = {4 * C}, c4t[2] = {4 * C, C};
    hf_add(f, NAME("%swte.weight", pre), o.dtype, 2, vc, m->params.tok_emb);
    hf_add(f, NAME("%swpe.weight", pre), o.dtype, 2, tc, m->params.pos_emb);
    for (int l = 0; l < L; l++) {
        const BlockParams *p = &m->params.blocks[l];
        hf_add(f, NAME("%sh.%d.ln_1.weight", pre, l), o.dtype, 1, c1, p->ln1_weight);
        hf_add(f, NAME("%sh.%d.ln_1.bias", pre, l), o.dtype, 1, c1, p->ln1_bias);
        if (o.mask_buffers) {
            const uint64_t mask[4] = {1, 1, T, T};
            hf_add(f, NAME("%sh.%d.attn.bias", pre, l), DTYPE_F32, 4, mask, NULL);
            hf_add(f, NAME("%sh.%d.attn.masked_bias", pre, l), DTYPE_F32, 0, NULL, NULL);
        }
        float *w = conv1d_of(p->qkv_weight, 3 * C, C);  // [Wq;Wk;Wv] [3C,C] -> [C,3C]
        hf_add(f, NAME("%sh.%d.attn.c_attn.weight", pre, l), o.dtype, 2, c3, w);
        free(w);
        hf_add(f, NAME("%sh.%d.attn.c_attn.bias", pre, l), o.dtype, 1, c3b, p->qkv_bias);
        w = conv1d_of(p->proj_weight, C, C);
        hf_add(f, NAME("%sh.%d.attn.c_proj.weight", pre, l), o.dtype, 2, cc, w);
        free(w);
        hf_add(f, NAME("%sh.%d.attn.c_proj.bias", pre, l), o.dtype, 1, c1, p->proj_bias);
        hf_add(f, NAME("%sh.%d.ln_2.weight", pre, l), o.dtype, 1, c1, p->ln2_weight);
        hf_add(f, NAME("%sh.%d.ln_2.bias", pre, l), o.dtype, 1, c1, p->ln2_bias);
        w = conv1d_of(p->fc_weight, 4 * C, C);  // [4C,C] -> [C,4C]
        hf_add(f, NAME("%sh.%d.mlp.c_fc.weight", pre, l), o.dtype, 2, c4, w);
        free(w);
        hf_add(f, NAME("%sh.%d.mlp.c_fc.bias", pre, l), o.dtype, 1, c4b, p->fc_bias);
        w = conv1d_of(p->mlp_proj_weight, C, 4 * C);  // [C,4C] -> [4C,C]
        hf_add(f, NAME("%sh.%d.mlp.c_proj.weight", pre, l), o.dtype, 2, c4t, w);
        free(w);
        hf_add(f, NAME("%sh.%d.mlp.c_proj.bias", pre, l), o.dtype, 1, c1, p->mlp_proj_bias);
    }
    hf_add(f, NAME("%sln_f.weight", pre), o.dtype, 1, c1, m->params.lnf_weight);
    hf_add(f, NAME("%sln_f.bias", pre), o.dtype, 1, c1, m->params.lnf_bias);
    if (o.lm_head) hf_add(f, "lm_head.weight", o.dtype, 2, vc, m->params.tok_emb);
#undef NAME
}

static const char CONFIG[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1,\n"
    " \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 8, \"n_embd\": 16, \"n_head\": 2,\n"
    " \"n_inner\": null, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}\n";

// GPT-2's byte characters (bytes_to_unicode): '!'..'~', 0xA1..0xAC and
// 0xAE..0xFF as themselves, first, then the others as U+0100 on, in order.
static void write_tokenizer(const char *d) {
    int order[256], n = 0;
    uint32_t ch[256];
    bool printable[256] = {false};
    for (int b = 0; b < 256; b++) printable[b] = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    for (int b = 0; b < 256; b++)
        if (printable[b]) ch[b] = (uint32_t)b, order[n++] = b;
    for (int b = 0, extra = 0; b < 256; b++)
        if (!printable[b]) ch[b] = 256 + (uint32_t)extra++, order[n++] = b;
    char *vocab = xmalloc(16384);
    size_t len = (size_t)snprintf(vocab, 16384, "{");
    for (int i = 0; i < 256; i++) {
        char utf8[4];
        const int k = utf8_encode(ch[order[i]], utf8);
        const bool escape = k == 1 && (utf8[0] == '"' || utf8[0] == '\\');
        len += (size_t)snprintf(vocab + len, 16384 - len, "\"%s%.*s\": %d, ", escape ? "\\" : "", k, utf8, i);
    }
    snprintf(vocab + len, 16384 - len, "\"<|endoftext|>\": 256}");
    write_text_file(path_in(d, "vocab.json"), vocab);
    write_text_file(path_in(d, "merges.txt"), "#version: 0.2\n");
    free(vocab);
}

// write_dir: a whole directory of "m" in "d", with "config" as config.json.
static void write_dir(const char *d, const Model *m, HfOptions o, const char *config) {
    write_text_file(path_in(d, "config.json"), config);
    write_tokenizer(d);
    HfFile f = {0};
    hf_from_model(&f, m, o);
    hf_write(&f, path_in(d, "model.safetensors"));
    hf_free(&f);
}

// load_ok: hf_gpt2_load of "d", which must work.
static void load_ok(const char *d, Model *m, Tokenizer *tok) {
    Error err = {{0}};
    ck_assert_msg(hf_gpt2_load(d, m, tok, 2, false, &err), "%s", err.msg);
}

// ---------------------------------------------------------------------------
// 1. Every tensor where the model keeps it.

// Loop test: F32; F32 with "transformer." names, lm_head and the mask
// buffers; F16; BF16.
START_TEST(every_tensor_lands_where_the_model_keeps_it_bit_for_bit) {
    const HfOptions options[] = {{DTYPE_F32, false, false, false},
                                 {DTYPE_F32, true, true, true},
                                 {DTYPE_F16, true, true, false},
                                 {DTYPE_BF16, false, false, true}};
    Model want, got;
    Tokenizer tok;
    random_model(&want, 100 + (uint64_t)_i);
    write_dir(dir, &want, options[_i], CONFIG);
    load_ok(dir, &got, &tok);
    ck_assert_int_eq(got.config.arch, ARCH_GPT2);
    ck_assert_int_eq(got.config.mlp, MLP_GELU_TANH);
    ck_assert_int_eq(got.n_layer, L);
    ck_assert_int_eq(got.config.block_size, T);
    ck_assert_int_eq(tok.kind, TOKENIZER_GPT2);
    ck_assert_int_eq(tok.vocab_size, V);
    ck_assert_int_eq(got.param_table.count, want.param_table.count);
    for (int i = 0; i < want.param_table.count; i++) {
        const TensorSpec *s = &want.param_table.specs[i];
        const float *a = want.params_memory + s->offset, *b = got.params_memory + s->offset;
        for (size_t j = 0; j < s->size; j++)
            if (memcmp(&a[j], &b[j], sizeof(float)) != 0)
                ck_abort_msg("case %d: %s[%zu] read as %g, written as %g", _i, s->name, j, (double)b[j], (double)a[j]);
    }
    // A few by hand, against GPT-2's layout: c_attn's column C + 3 is k's row 3.
    ck_assert(got.params.blocks[1].qkv_weight[(size_t)(C + 3) * C + 5] == want.params.blocks[1].qkv_weight[(size_t)(C + 3) * C + 5]);
    tokenizer_free(&tok);
    model_free(&got);
    model_free(&want);
}
END_TEST

// activation_function "gelu" is the exact GELU; absent keys take Hugging
// Face's defaults (gelu_new, eps 1e-5).
START_TEST(activation_function_picks_gelu_s_form) {
    Model want, got;
    Tokenizer tok;
    random_model(&want, 7);
    const char *configs[] = {
        "{\"activation_function\": \"gelu\", \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}",
        "{\"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}",
    };
    const MlpKind expected[] = {MLP_GELU, MLP_GELU_TANH};
    for (int i = 0; i < 2; i++) {
        write_dir(dir, &want, (HfOptions){DTYPE_F32, false, false, false}, configs[i]);
        load_ok(dir, &got, &tok);
        ck_assert_int_eq(got.config.mlp, expected[i]);
        tokenizer_free(&tok);
        model_free(&got);
    }
    model_free(&want);
}
END_TEST

// ---------------------------------------------------------------------------
// 2. The logits of a `--arch gpt2` checkpoint of the same weights.

START_TEST(logits_equal_a_gpt2_checkpoint_s_with_the_same_weights) {
    Model want, from_dir, from_checkpoint;
    Tokenizer tok, bpe, loaded_bpe;
    random_model(&want, 11);
    write_dir(dir, &want, (HfOptions){DTYPE_F16, true, true, true}, CONFIG);
    load_ok(dir, &from_dir, &tok);
    // The checkpoint needs a tokenizer of 257 tokens: bpe with one merge.
    static const char TEXT[] = "abababab cdcd abab";
    Error err = {{0}};
    TokenizerSpec spec = {TOKENIZER_BPE, V, false};
    ck_assert_msg(tokenizer_learn(&bpe, &spec, TEXT, sizeof TEXT - 1, "TEXT", &err), "%s", err.msg);
    ck_assert_int_eq(bpe.vocab_size, V);
    const char *path = path_in(dir, "gpt2.safetensors");
    ck_assert_msg(checkpoint_save(&want, &bpe, 0, path, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_load(path, &from_checkpoint, &loaded_bpe, 2, false, NULL, &err), "%s", err.msg);
    ck_assert_int_eq(from_checkpoint.config.arch, ARCH_GPT2);
    ck_assert_int_eq(from_checkpoint.config.mlp, MLP_GELU_TANH);
    int inputs[2 * T];
    Rng rng;
    rng_init(&rng, 12);
    for (int i = 0; i < 2 * T; i++) inputs[i] = (int)rng_below(&rng, V);
    model_forward(&from_dir, inputs, NULL, 2, T, false, 0);
    model_forward(&from_checkpoint, inputs, NULL, 2, T, false, 0);
    const size_t bytes = (size_t)2 * T * V * sizeof(float);
    ck_assert_msg(memcmp(from_dir.acts.logits, from_checkpoint.acts.logits, bytes) == 0, "the logits differ");
    // And they are not trivially equal: the model gives different tokens different logits.
    ck_assert(from_dir.acts.logits[0] != from_dir.acts.logits[1]);
    tokenizer_free(&loaded_bpe);
    tokenizer_free(&bpe);
    tokenizer_free(&tok);
    model_free(&from_checkpoint);
    model_free(&from_dir);
    model_free(&want);
}
END_TEST

// ---------------------------------------------------------------------------
// 3. F16 and BF16.

START_TEST(f16_and_bf16_convert_every_kind_of_value_exactly) {
    const struct {
        uint16_t bits;
        float want;
    } halves[] = {
        {0x3C00, 1.0f},     {0xC000, -2.0f},          {0x7BFF, 65504.0f},          {0x0001, 0x1p-24f},
        {0x03FF, 0x3FFp-24f}, {0x0400, 0x1p-14f},     {0x3555, 0x1.554p-2f},       {0x0000, 0.0f},
    };
    for (size_t i = 0; i < sizeof halves / sizeof halves[0]; i++)
        ck_assert_msg(f16_to_f32(halves[i].bits) == halves[i].want, "f16 %04x: %a, want %a", halves[i].bits,
                      (double)f16_to_f32(halves[i].bits), (double)halves[i].want);
    ck_assert(signbit(f16_to_f32(0x8000)) && f16_to_f32(0x8000) == 0.0f);
    ck_assert(isinf(f16_to_f32(0x7C00)) && f16_to_f32(0x7C00) > 0);
    ck_assert(isinf(f16_to_f32(0xFC00)) && f16_to_f32(0xFC00) < 0);
    ck_assert(isnan(f16_to_f32(0x7E00)));
    ck_assert(bf16_to_f32(0x3F80) == 1.0f);
    ck_assert(bf16_to_f32(0x4049) == 3.140625f);
    ck_assert(bf16_to_f32(0x0001) == 0x1p-133f);  // a subnormal float
    ck_assert(isinf(bf16_to_f32(0xFF80)) && isnan(bf16_to_f32(0x7FC0)));
    // Every half: widened, then narrowed back by the test's own rule, where it applies.
    for (uint32_t b = 0x0400; b < 0x7C00; b++)
        ck_assert_int_eq(narrow_bits(f16_to_f32((uint16_t)b), DTYPE_F16), b);
}
END_TEST

// A mixed file, read whole and in pieces: the pieces of a narrow tensor
// widen in place as the whole does. (A NaN's refusal: BAD_CASES below.)
START_TEST(a_tensor_reads_whole_or_in_pieces_in_any_of_the_three_dtypes) {
    const uint64_t dims[1] = {37};
    float values[37];
    for (int i = 0; i < 37; i++) values[i] = (float)(i - 18) / 8.0f;
    HfFile f = {0};
    hf_add(&f, "a", DTYPE_F16, 1, dims, values);
    hf_add(&f, "b", DTYPE_BF16, 1, dims, values);
    hf_add(&f, "c", DTYPE_F32, 1, dims, values);
    const char *path = path_in(dir, "mixed.safetensors");
    hf_write(&f, path);
    SafetensorsFile st;
    Error err = {{0}};
    SafetensorsTensor *list;
    size_t n;
    ck_assert_msg(safetensors_open(&st, path, "test file", &err) && safetensors_list(&st, &list, &n), "%s", err.msg);
    ck_assert_uint_eq(n, 3);
    for (size_t t = 0; t < n; t++) {
        float whole[37], piece[37];
        ck_assert_msg(safetensors_read_f32(&st, &list[t], whole, 1e6f), "%s", err.msg);
        ck_assert_msg(memcmp(whole, values, sizeof values) == 0, "%s differs", list[t].name);
        ck_assert_msg(safetensors_read_f32_range(&st, &list[t], 30, 7, piece, 1e6f), "%s", err.msg);
        ck_assert_msg(memcmp(piece, values + 30, 7 * sizeof(float)) == 0, "%s's piece differs", list[t].name);
    }
    free(list);
    safetensors_close(&st);
    hf_free(&f);
}
END_TEST

// ---------------------------------------------------------------------------
// 4. Bad directories.

// A change to a good directory, and what its message must hold.
typedef struct {
    const char *what;
    void (*change)(HfFile *f);  // to model.safetensors' tensors (NULL: none)
    const char *config;         // config.json (NULL: CONFIG)
    const char *remove;         // a file to delete (NULL: none)
    const char *needles[3];     // in the message, up to a NULL
} BadCase;

static void unknown_tensor(HfFile *f) {
    const uint64_t c1[1] = {C};
    hf_add(f, "h.0.attn.c_attn.scale", DTYPE_F32, 1, c1, NULL);
}
static void transposed_fc(HfFile *f) {
    HfTensor *t = hf_find(f, "h.0.mlp.c_fc.weight");
    t->shape[0] = 4 * C, t->shape[1] = C;  // nn.Linear's layout, not Conv1D's
}
static void missing_bias(HfFile *f) { hf_remove(f, "h.1.ln_2.bias"); }
static void missing_final_bias(HfFile *f) { hf_remove(f, "ln_f.bias"); }
static void twice(HfFile *f) {
    const uint64_t c1[1] = {C};
    hf_add(f, "transformer.ln_f.bias", DTYPE_F32, 1, c1, NULL);
}
static void block_past_n_layer(HfFile *f) {
    const uint64_t c1[1] = {C};
    hf_add(f, "h.2.ln_1.weight", DTYPE_F32, 1, c1, NULL);
}
static void int_weights(HfFile *f) { hf_find(f, "wpe.weight")->dtype = DTYPE_I32; }
static void untied_head(HfFile *f) {
    const uint64_t vc[2] = {V, C};
    HfTensor *t = hf_add(f, "lm_head.weight", DTYPE_F32, 2, vc, hf_find(f, "wte.weight")->values);
    t->values[100] += 1.0f;
}
static void nan_weight(HfFile *f) { hf_find(f, "h.0.ln_1.weight")->values[3] = NAN; }

static const BadCase BAD_CASES[] = {
    {"no config.json", NULL, NULL, "config.json", {"has no config.json", NULL}},
    {"no model.safetensors", NULL, NULL, "model.safetensors", {"model.safetensors", NULL}},
    {"no vocab.json", NULL, NULL, "vocab.json", {"vocab.json", NULL}},
    {"config without n_layer", NULL, "{\"n_embd\": 16, \"n_head\": 2, \"n_positions\": 8, \"vocab_size\": 257}", NULL,
     {"config.json", "\"n_layer\" is missing", NULL}},
    {"config with a word for n_embd", NULL,
     "{\"n_embd\": \"sixteen\", \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}", NULL,
     {"config.json", "\"n_embd\"", NULL}},
    {"config with relu", NULL,
     "{\"activation_function\": \"relu\", \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}",
     NULL, {"config.json", "\"activation_function\"", NULL}},
    {"config with another eps", NULL,
     "{\"layer_norm_epsilon\": 1e-6, \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}",
     NULL, {"config.json", "\"layer_norm_epsilon\"", NULL}},
    {"config with 3 heads", NULL,
     "{\"n_embd\": 16, \"n_head\": 3, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}", NULL,
     {"config.json", "\"n_head\" 3 does not divide", NULL}},
    {"config of another model", NULL,
     "{\"model_type\": \"llama\", \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}",
     NULL, {"config.json", "\"model_type\"", NULL}},
    {"config with a wider MLP", NULL,
     "{\"n_inner\": 32, \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}", NULL,
     {"config.json", "\"n_inner\"", NULL}},
    {"config not JSON", NULL, "{\"n_layer\": 2,", NULL, {"config.json", "not JSON", NULL}},
    {"config with a head of its own", NULL,
     "{\"tie_word_embeddings\": false, \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 257}",
     NULL, {"config.json", "\"tie_word_embeddings\" is not true", "ties them"}},
    {"config's vocab_size not the weights'", NULL,
     "{\"n_embd\": 16, \"n_head\": 2, \"n_layer\": 2, \"n_positions\": 8, \"vocab_size\": 300}", NULL,
     {"model.safetensors", "'wte.weight' has shape [257,16]", "needs [300,16]"}},
    {"an unknown tensor", unknown_tensor, NULL, NULL, {"model.safetensors", "'h.0.attn.c_attn.scale'", NULL}},
    {"c_fc in nn.Linear's layout", transposed_fc, NULL, NULL,
     {"model.safetensors", "'h.0.mlp.c_fc.weight' has shape [64,16]", "needs [16,64]"}},
    {"a missing bias", missing_bias, NULL, NULL, {"model.safetensors", "'h.1.ln_2.bias'", "n_layer 2 needs it"}},
    {"a missing ln_f bias", missing_final_bias, NULL, NULL, {"model.safetensors", "'ln_f.bias'", "every GPT-2 has it"}},
    {"a weight given twice", twice, NULL, NULL, {"model.safetensors", "'ln_f.bias' and 'transformer.ln_f.bias'", NULL}},
    {"a block past n_layer", block_past_n_layer, NULL, NULL, {"model.safetensors", "'h.2.ln_1.weight'", "n_layer is 2"}},
    {"integer weights", int_weights, NULL, NULL, {"model.safetensors", "'wpe.weight' has dtype I32", NULL}},
    {"an untied head", untied_head, NULL, NULL, {"model.safetensors", "'lm_head.weight' differs", "element 100"}},
    {"a NaN", nan_weight, NULL, NULL, {"model.safetensors", "'h.0.ln_1.weight' holds NaN at element 3", NULL}},
};

START_TEST(a_bad_directory_gets_one_line_naming_the_file_and_the_key) {
    const BadCase *bad = &BAD_CASES[_i];
    Model want, got;
    Tokenizer tok;
    random_model(&want, 21);
    write_text_file(path_in(dir, "config.json"), bad->config ? bad->config : CONFIG);
    write_tokenizer(dir);
    HfFile f = {0};
    hf_from_model(&f, &want, (HfOptions){DTYPE_F32, false, false, false});
    if (bad->change) bad->change(&f);
    hf_write(&f, path_in(dir, "model.safetensors"));
    hf_free(&f);
    if (bad->remove) remove(path_in(dir, bad->remove));
    Error err = {{0}};
    ck_assert_msg(!hf_gpt2_load(dir, &got, &tok, 1, false, &err), "%s: loaded", bad->what);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "%s: more than one line: %s", bad->what, err.msg);
    for (int i = 0; i < 3 && bad->needles[i]; i++)
        ck_assert_msg(strstr(err.msg, bad->needles[i]) != NULL, "%s: no '%s' in: %s", bad->what, bad->needles[i],
                      err.msg);
    ck_assert_ptr_null(got.params_memory);  // left empty
    model_free(&want);
}
END_TEST

// A config.json of 200 MB is refused by its size, before it is read: the
// process grows by much less than the file.
START_TEST(a_huge_config_json_is_refused_without_being_read) {
    Model want, got;
    Tokenizer tok;
    random_model(&want, 23);
    write_dir(dir, &want, (HfOptions){DTYPE_F32, false, false, false}, CONFIG);
    model_free(&want);
    const char *config = path_in(dir, "config.json");
    ck_assert_int_eq(truncate(config, 200 << 20), 0);  // CONFIG, then zeros (a sparse file: no disk)
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    Error err = {{0}};
    ck_assert(!hf_gpt2_load(dir, &got, &tok, 1, false, &err));
    getrusage(RUSAGE_SELF, &after);
    ck_assert_msg(strstr(err.msg, "config.json' is 209715200 bytes"), "%s", err.msg);
    ck_assert_msg(after.ru_maxrss - before.ru_maxrss < 50 * 1024, "loading took %ld KB more", after.ru_maxrss - before.ru_maxrss);
}
END_TEST

// ---------------------------------------------------------------------------
// 5. The commands.

START_TEST(sample_eval_and_attention_take_a_gpt2_directory) {
    Model want;
    random_model(&want, 31);
    char model_dir[300];
    snprintf(model_dir, sizeof model_dir, "%s/gpt2", dir);
    make_dir(model_dir);
    write_dir(model_dir, &want, (HfOptions){DTYPE_BF16, true, true, true}, CONFIG);
    model_free(&want);
    write_text_file(path_in(dir, "text.txt"), "The whale, the whale! Call me Ishmael. Some years ago.\n");
    char args[768];
    snprintf(args, sizeof args, "sample --model %s --prompt 'The whale' --tokens 5 --seed 3", model_dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strncmp(r->out, "The whale", 9) == 0, "%s: %s%s", args, r->out, r->err);
    snprintf(args, sizeof args, "eval --model %s %s --json", model_dir, path_in(dir, "text.txt"));
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strstr(r->out, "\"loss\""), "%s: %s%s", args, r->out, r->err);
    snprintf(args, sizeof args, "attention --model %s --prompt 'The whale' --out %s", model_dir,
             path_in(dir, "attention.png"));
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: %s%s", args, r->out, r->err);
    // A directory without its config.json: that is what the message says
    // (not that its model.safetensors is a tinygpt file of the wrong format).
    char config[600];
    snprintf(config, sizeof config, "%s", path_in(model_dir, "config.json"));
    char *text = slurp(config, NULL);
    remove(config);
    snprintf(args, sizeof args, "sample --model %s", model_dir);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 1 && stderr_is_one_line(r) && strstr(r->err, "has no config.json"), "%s: %d %s", args,
                  r->status, r->err);
    write_text_file(config, text);
    free(text);
    // A directory without its weights: one line naming the file, exit 1.
    remove(path_in(model_dir, "model.safetensors"));
    snprintf(args, sizeof args, "sample --model %s", model_dir);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status != 0 && stderr_is_one_line(r) && strstr(r->err, "model.safetensors"), "%s: %d %s", args,
                  r->status, r->err);
}
END_TEST

// json_loss: the "loss" of `eval --json`'s output, as printed.
static double json_loss(const char *out) {
    const char *at = strstr(out, "\"loss\"");
    ck_assert_msg(at != NULL, "no loss in: %s", out);
    return strtod(strchr(at, ':') + 1, NULL);
}

// Fine-tuning (#21 item 4): train --init DIR starts from the directory's
// weights (0 steps save them: eval gives the directory's loss to the
// printed digit), then trains with any optimizer, on a context as long or
// shorter, into checkpoints that hold GPT-2's tokenizer, so sample and
// --resume need nothing else.
START_TEST(train_init_dir_fine_tunes_the_directory_s_model) {
    Model want;
    random_model(&want, 37);
    char model_dir[300], run0[300], run[300], args[1200];
    snprintf(model_dir, sizeof model_dir, "%s/gpt2", dir);
    snprintf(run0, sizeof run0, "%s/run0", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    make_dir(model_dir);
    write_dir(model_dir, &want, (HfOptions){DTYPE_F32, false, false, false}, CONFIG);
    model_free(&want);
    const char *text = path_in(dir, "text.txt");
    write_text_file(text, "The whale, the whale! Call me Ishmael. Some years ago, never mind how long precisely, "
                          "having little or no money in my purse, I thought I would sail about a little.\n");
    snprintf(args, sizeof args, "eval --model %s %s --json", model_dir, text);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    const double dir_loss = json_loss(r->out);

    snprintf(args, sizeof args, "train %s --init %s --out %s --steps 0 --batch 2 --context 8", text, model_dir, run0);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    snprintf(args, sizeof args, "eval --model %s/model.safetensors %s --json", run0, text);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    ck_assert_msg(json_loss(r->out) == dir_loss, "the start checkpoint's loss %g, the directory's %g", json_loss(r->out),
                  dir_loss);

    // A shorter context than the directory's 8 positions keeps the first 4.
    snprintf(args, sizeof args, "train %s --init %s --out %s --steps 6 --batch 2 --context 4 --optimizer sgd --lr 0.5 "
             "--warmup 0 --sample-every 0", text, model_dir, run);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strstr(r->err, "arch=gpt2") && strstr(r->err, " T=4 "), "%s: %s", args, r->err);
    snprintf(args, sizeof args, "eval --model %s/model.safetensors %s --json", run, text);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && json_loss(r->out) < dir_loss, "fine-tuned %s, the directory %g", r->out, dir_loss);
    snprintf(args, sizeof args, "sample --model %s/model.safetensors --prompt 'The whale' --tokens 5", run);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strncmp(r->out, "The whale", 9) == 0, "%s: %s%s", args, r->out, r->err);
    snprintf(args, sizeof args, "train --resume %s --steps 8", run);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strstr(r->out, "step      7/8"), "%s: %s%s", args, r->out, r->err);
}
END_TEST

Suite *hf_gpt2_suite(void) {
    Suite *s = suite_create("hf_gpt2");
    TCase *tc = tcase_create("hf_gpt2");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TIMEOUT_SECONDS);
    tcase_add_loop_test(tc, every_tensor_lands_where_the_model_keeps_it_bit_for_bit, 0, 4);
    tcase_add_test(tc, activation_function_picks_gelu_s_form);
    tcase_add_test(tc, logits_equal_a_gpt2_checkpoint_s_with_the_same_weights);
    tcase_add_test(tc, f16_and_bf16_convert_every_kind_of_value_exactly);
    tcase_add_test(tc, a_tensor_reads_whole_or_in_pieces_in_any_of_the_three_dtypes);
    tcase_add_loop_test(tc, a_bad_directory_gets_one_line_naming_the_file_and_the_key, 0,
                        (int)(sizeof BAD_CASES / sizeof BAD_CASES[0]));
    tcase_add_test(tc, a_huge_config_json_is_refused_without_being_read);
    tcase_add_test(tc, sample_eval_and_attention_take_a_gpt2_directory);
    tcase_add_test(tc, train_init_dir_fine_tunes_the_directory_s_model);
    suite_add_tcase(s, tc);
    return s;
}
