// test_export.c: src/commands/export.c (`tinygpt export`) and the writer of
// GPT-2's tokenizer files (gpt2_tokenizer_files, src/io/gpt2_tokenizer.c):
// which models are refused and why, each GPT-2 tensor made from the right
// tinygpt tensor in the right layout, the tokenizer files read back as the
// same tokenizer, and the command's files and errors. That the directory
// computes the model's logits is make export-check's (scripts/export_check.py).
#define _GNU_SOURCE  // memmem
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "export.h"
#include "gpt2_tokenizer.h"
#include "helpers.h"
#include "json.h"
#include "tests.h"

#define TIMEOUT_SECONDS 120

static const char TEXT[] = "the whale, the white whale; the sea and the whale's wake. "
                           "the whale, the white whale; the sea and the whale's wake.";

// gpt_parts: a tiny gpt of GPT-2's parts (the zeroed swaps) with "tok"'s vocabulary.
static ModelConfig gpt_parts(const Tokenizer *tok) {
    return (ModelConfig){.vocab_size = tok->vocab_size, .block_size = 4, .n_embd = 8, .n_head = 2, .arch = ARCH_GPT,
                         .n_layer = 2};
}

static void learn_bpe(Tokenizer *tok, int vocab_size) {
    TokenizerSpec spec = {TOKENIZER_BPE, vocab_size, false};
    Error err;
    ck_assert_msg(tokenizer_learn(tok, &spec, TEXT, sizeof TEXT - 1, "TEXT", &err), "%s", err.msg);
}

START_TEST(export_check_refuses_every_part_gpt2_lacks_naming_its_flag) {
    Tokenizer tok;
    learn_bpe(&tok, 270);
    const ModelConfig plain = gpt_parts(&tok);
    Error err;
    ck_assert_msg(export_check(&plain, TOKENIZER_BPE, &err), "%s", err.msg);
    struct {
        ModelConfig cfg;
        TokenizerKind kind;
        const char *needle;
    } refused[] = {
        {{.vocab_size = 270, .block_size = 4, .n_embd = 8, .n_head = 2, .arch = ARCH_CARD}, TOKENIZER_BPE, "a card model is not GPT-2"},
        {plain, TOKENIZER_CHAR, "--tokenizer bpe"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ck_assert(!export_check(&refused[i].cfg, refused[i].kind, &err));
        ck_assert_msg(strstr(err.msg, refused[i].needle), "'%s' lacks '%s'", err.msg, refused[i].needle);
    }
    const char *flags[] = {"--no-layernorm", "--no-mlp", "--no-residual", "--norm rmsnorm", "--mlp relu2",
                           "--mlp swiglu", "--untied-head", "--pos rope", "--qk-norm"};
    for (int i = 0; i < 9; i++) {
        ModelConfig c = plain;
        switch (i) {
        case 0: c.no_layernorm = true; break;
        case 1: c.no_mlp = true; break;
        case 2: c.no_residual = true; break;
        case 3: c.norm = NORM_RMSNORM; break;
        case 4: c.mlp = MLP_RELU2; break;
        case 5: c.mlp = MLP_SWIGLU; break;
        case 6: c.untied_head = true; break;
        case 7: c.pos = POS_ROPE; break;
        case 8: c.qk_norm = true; break;
        }
        ck_assert_msg(!export_check(&c, TOKENIZER_BPE, &err), "%s was exported", flags[i]);
        char want[64];
        snprintf(want, sizeof want, "trained with %s,", flags[i]);
        ck_assert_msg(strstr(err.msg, want), "'%s' does not name %s", err.msg, flags[i]);
    }
    tokenizer_free(&tok);
}
END_TEST

// value: the float at [r][c] of tensor "name" of "t" in "memory" (c 0 for a vector).
static float value(const TensorTable *t, const float *memory, const char *name, size_t r, size_t c) {
    const TensorSpec *s = table_find(t, name);
    ck_assert_msg(s != NULL, "no tensor %s", name);
    return memory[s->offset + r * (s->ndim == 2 ? s->shape[1] : 1) + c];
}

START_TEST(export_tensors_are_gpt2s_names_and_conv1d_layouts_of_the_models_weights) {
    Tokenizer tok;
    learn_bpe(&tok, 270);
    ModelConfig cfg = gpt_parts(&tok);
    Model m;
    model_init(&m, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 11);
    model_init_weights(&m, &rng);
    const TensorTable *p = &m.param_table;
    const float *w = m.params_memory;
    TensorTable t;
    float *hf = export_tensors(&m, &t);
    const size_t C = 8, V = (size_t)tok.vocab_size, T = 4;

    ck_assert_int_eq(t.count, 2 + 12 * 2 + 2);
    ck_assert_str_eq(t.specs[0].name, "wte.weight");
    ck_assert_str_eq(t.specs[2].name, "h.0.ln_1.weight");
    ck_assert_str_eq(t.specs[t.count - 1].name, "ln_f.bias");
    const TensorSpec *c_attn = table_find(&t, "h.1.attn.c_attn.weight");
    ck_assert(c_attn && c_attn->shape[0] == C && c_attn->shape[1] == 3 * C);
    const TensorSpec *c_fc = table_find(&t, "h.1.mlp.c_fc.weight");
    ck_assert(c_fc && c_fc->shape[0] == C && c_fc->shape[1] == 4 * C);
    const TensorSpec *proj = table_find(&t, "h.1.mlp.c_proj.weight");
    ck_assert(proj && proj->shape[0] == 4 * C && proj->shape[1] == C);

    for (size_t v = 0; v < V; v += 37)
        for (size_t c = 0; c < C; c++) ck_assert(value(&t, hf, "wte.weight", v, c) == value(p, w, "tok_emb.weight", v, c));
    for (size_t c = 0; c < C; c++) ck_assert(value(&t, hf, "wpe.weight", T - 1, c) == value(p, w, "pos_emb.weight", T - 1, c));
    // c_attn [in, 3C]: column j of q, k, v is row j of tinygpt's [out, in].
    const char *qkv[] = {"blocks.1.attn.q.weight", "blocks.1.attn.k.weight", "blocks.1.attn.v.weight"};
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < C; i++)
            for (size_t j = 0; j < C; j++)
                ck_assert(value(&t, hf, "h.1.attn.c_attn.weight", i, s * C + j) == value(p, w, qkv[s], j, i));
    for (size_t i = 0; i < C; i++)
        for (size_t j = 0; j < 4 * C; j++) {
            ck_assert(value(&t, hf, "h.0.mlp.c_fc.weight", i, j) == value(p, w, "blocks.0.mlp.fc.weight", j, i));
            ck_assert(value(&t, hf, "h.0.mlp.c_proj.weight", j, i) == value(p, w, "blocks.0.mlp.proj.weight", i, j));
        }
    for (size_t i = 0; i < C; i++)
        for (size_t j = 0; j < C; j++)
            ck_assert(value(&t, hf, "h.0.attn.c_proj.weight", i, j) == value(p, w, "blocks.0.attn.proj.weight", j, i));
    for (size_t c = 0; c < C; c++) ck_assert(value(&t, hf, "ln_f.weight", c, 0) == value(p, w, "ln_f.weight", c, 0));
    // The gpt has no biases: every one is zero (and there are 3C of c_attn's).
    const char *biases[] = {"h.0.ln_1.bias", "h.0.attn.c_attn.bias", "h.0.attn.c_proj.bias", "h.1.ln_2.bias",
                            "h.1.mlp.c_fc.bias", "h.1.mlp.c_proj.bias", "ln_f.bias"};
    for (size_t b = 0; b < sizeof biases / sizeof biases[0]; b++) {
        const TensorSpec *s = table_find(&t, biases[b]);
        ck_assert_msg(s && s->ndim == 1, "%s", biases[b]);
        for (size_t k = 0; k < s->size; k++) ck_assert(hf[s->offset + k] == 0.0f);
    }
    ck_assert_int_eq((int)table_find(&t, "h.0.attn.c_attn.bias")->size, 3 * 8);
    free(hf);
    table_free(&t);
    model_free(&m);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(a_bpe_tokenizer_written_as_gpt2s_files_reads_back_with_the_same_ids) {
    Tokenizer tok, back;
    learn_bpe(&tok, 277);
    JsonBuf vocab = {0}, merges = {0};
    Error err;
    ck_assert_msg(gpt2_tokenizer_files(&tok, &vocab, &merges, &err), "%s", err.msg);
    ck_assert_msg(strncmp(merges.data, "#version: 0.2\n", 14) == 0, "%s", merges.data);
    ck_assert_msg(strstr(vocab.data, "\"\\u0120\"") == NULL && strstr(vocab.data, "\"\xC4\xA0\": 32,"),
                  "the space is byte 32, spelled U+0120 as GPT-2 spells it");
    ck_assert_msg(gpt2_tokenizer_from_text(&back, vocab.data, vocab.len, "vocab.json", merges.data, merges.len, "merges.txt", &err),
                  "%s", err.msg);
    ck_assert_int_eq(back.vocab_size, tok.vocab_size + 1);  // and <|endoftext|>
    ck_assert_int_eq(back.end_of_text, tok.vocab_size);
    // ASCII text chunks alike by tinygpt's rules and GPT-2's.
    const char probe[] = "the white whale's wake, and the sea; 1851 whales!\n";
    int *a, *b;
    size_t na, nb;
    ck_assert(tokenizer_encode(&tok, probe, sizeof probe - 1, &a, &na, "probe", &err));
    ck_assert(tokenizer_encode(&back, probe, sizeof probe - 1, &b, &nb, "probe", &err));
    ck_assert_int_eq((int)na, (int)nb);
    ck_assert_int_lt((int)na, (int)sizeof probe - 1);  // merges were used
    for (size_t i = 0; i < na; i++) ck_assert_int_eq(a[i], b[i]);
    free(a);
    free(b);
    // And a gpt2 tokenizer writes itself back byte for byte.
    JsonBuf vocab2 = {0}, merges2 = {0};
    ck_assert_msg(gpt2_tokenizer_files(&back, &vocab2, &merges2, &err), "%s", err.msg);
    ck_assert_str_eq(vocab2.data, vocab.data);
    ck_assert_str_eq(merges2.data, merges.data);
    json_buf_free(&vocab);
    json_buf_free(&merges);
    json_buf_free(&vocab2);
    json_buf_free(&merges2);
    tokenizer_free(&back);

    // "abc" made twice, as ab+c (257) and a+bc (259): vocab.json cannot hold both.
    Tokenizer twice;
    const char merges_twice[] = "97 98 256 99 98 99 97 258";
    ck_assert_msg(tokenizer_from_bpe_merges(&twice, merges_twice, sizeof merges_twice - 1, &err), "%s", err.msg);
    ck_assert(!gpt2_tokenizer_files(&twice, &vocab, &merges, &err));
    ck_assert_msg(strstr(err.msg, "tokens 257 and 259 are the same bytes \"abc\""), "%s", err.msg);
    json_buf_free(&vocab);
    json_buf_free(&merges);
    tokenizer_free(&twice);

    Tokenizer chars;
    ck_assert(tokenizer_build(&chars, TEXT, sizeof TEXT - 1, "TEXT", &err));
    ck_assert(!gpt2_tokenizer_files(&chars, &vocab, &merges, &err));
    ck_assert_msg(strstr(err.msg, "char tokenizer has no vocab.json"), "%s", err.msg);
    json_buf_free(&vocab);
    json_buf_free(&merges);
    tokenizer_free(&chars);
    tokenizer_free(&tok);
}
END_TEST

static char work_dir[256];
static void setup(void) { scratch_dir_create(work_dir, sizeof work_dir); }
static void teardown(void) { scratch_dir_remove(work_dir); }

// save: a tiny model of "cfg" (vocab from "tok") as work_dir/"name".
static const char *save(const char *name, ModelConfig cfg, const Tokenizer *tok) {
    cfg.vocab_size = tok->vocab_size;
    Model m;
    model_init(&m, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 3);
    model_init_weights(&m, &rng);
    Error err;
    const char *path = path_in(work_dir, name);
    ck_assert_msg(checkpoint_save(&m, tok, 0, path, &err), "%s", err.msg);
    model_free(&m);
    return path;
}

START_TEST(export_writes_the_four_files_and_refuses_what_is_not_gpt2_in_one_line) {
    Tokenizer tok, chars;
    learn_bpe(&tok, 275);
    Error err;
    ck_assert(tokenizer_build(&chars, TEXT, sizeof TEXT - 1, "TEXT", &err));
    char good[512], rope[512], card[512], char_model[512], args[2048];
    snprintf(good, sizeof good, "%s", save("good.safetensors", gpt_parts(&tok), &tok));
    ModelConfig c = gpt_parts(&tok);
    c.pos = POS_ROPE;
    snprintf(rope, sizeof rope, "%s", save("rope.safetensors", c, &tok));
    snprintf(card, sizeof card, "%s", save("card.safetensors", (ModelConfig){.block_size = 4, .n_embd = 8, .n_head = 2}, &tok));
    snprintf(char_model, sizeof char_model, "%s", save("char.safetensors", gpt_parts(&chars), &chars));

    snprintf(args, sizeof args, "export --model %s --out %s", good, path_in(work_dir, "hf"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    const char *files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt"};
    for (int i = 0; i < 4; i++) {
        char file[64];
        snprintf(file, sizeof file, "hf/%s", files[i]);
        size_t n;
        char *bytes = slurp(path_in(work_dir, file), &n);
        ck_assert_msg(n > 0, "%s is empty", file);
        if (i == 0) {
            JsonValue *root;
            ck_assert_msg(json_parse(bytes, n, &root, &err), "config.json: %s", err.msg);
            uint64_t layers, vocab;
            ck_assert(json_as_uint(json_get(root, "n_layer"), &layers) && layers == 2);
            ck_assert(json_as_uint(json_get(root, "vocab_size"), &vocab) && vocab == 275);
            ck_assert(json_string_is(json_get(root, "activation_function"), "gelu"));
            json_free(root);
        }
        if (i == 1) ck_assert_msg(memmem(bytes, n, "\"format\":\"pt\"", 13), "Hugging Face's loader asks for format pt");
        free(bytes);
    }
    ck_assert(access(path_in(work_dir, "hf/model.safetensors.tmp"), F_OK) != 0);  // written through the atomic writer

    snprintf(args, sizeof args, "export --model %s --out %s", good, path_in(work_dir, "hf"));
    expect_run_fails(work_dir, args, 1, "is not an empty directory");
    snprintf(args, sizeof args, "export --model %s --out %s --force", good, path_in(work_dir, "hf"));
    ck_assert_int_eq(run_tinygpt(work_dir, args)->status, 0);
    snprintf(args, sizeof args, "export --model %s --out %s", rope, path_in(work_dir, "x"));
    expect_run_fails(work_dir, args, 1, "trained with --pos rope");
    snprintf(args, sizeof args, "export --model %s --out %s", card, path_in(work_dir, "x"));
    expect_run_fails(work_dir, args, 1, "a card model is not GPT-2");
    snprintf(args, sizeof args, "export --model %s --out %s", char_model, path_in(work_dir, "x"));
    expect_run_fails(work_dir, args, 1, "retrain with --tokenizer bpe");
    ck_assert(access(path_in(work_dir, "x"), F_OK) != 0);  // a refusal writes nothing
    expect_run_fails(work_dir, "export --out x", 2, "missing --model");
    tokenizer_free(&chars);
    tokenizer_free(&tok);
}
END_TEST

Suite *export_suite(void) {
    Suite *s = suite_create("export");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, export_check_refuses_every_part_gpt2_lacks_naming_its_flag);
    tcase_add_test(tc, export_tensors_are_gpt2s_names_and_conv1d_layouts_of_the_models_weights);
    tcase_add_test(tc, a_bpe_tokenizer_written_as_gpt2s_files_reads_back_with_the_same_ids);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_set_timeout(cli, TIMEOUT_SECONDS);
    tcase_add_test(cli, export_writes_the_four_files_and_refuses_what_is_not_gpt2_in_one_line);
    suite_add_tcase(s, cli);
    return s;
}
