// test_gpt2_tokenizer.c: tests for src/io/gpt2_tokenizer.c (GPT-2's
// vocab.json and merges.txt) and the gpt2 kind of tokenizer.c, on a tiny
// synthetic GPT-2 tokenizer written here: GPT-2's 256 byte tokens numbered as
// GPT-2 numbers them, three merges ("Ġ t", "h e", "Ġt he"), then
// <|endoftext|>. The byte characters are worked out here from GPT-2's
// bytes_to_unicode, independently of the loader.
//
// And the gpt2 kind in a checkpoint (train --tokenizer gpt2 --tokenizer-dir,
// eval, tokenize) and sample's stop at <|endoftext|>.
//
// `make gpt2-tokenizer-check` holds the real files to GPT-2's reference
// encoder; these tests pin the numbering and every error a bad file gets.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "common.h"
#include "gpt2_tokenizer.h"
#include "helpers.h"
#include "sample.h"
#include "tests.h"

#define TIMEOUT_SECONDS 30

// byte_order: the bytes in GPT-2's order, which is also their ids:
// first those that print as themselves, then the 68 others, in increasing order.
static int byte_order[256];
static uint32_t char_of_byte[256];  // each byte's character in a token's text

static void make_byte_order(void) {
    int n = 0;
    for (int b = '!'; b <= '~'; b++) byte_order[n++] = b;
    for (int b = 0xA1; b <= 0xAC; b++) byte_order[n++] = b;
    for (int b = 0xAE; b <= 0xFF; b++) byte_order[n++] = b;
    int printable = n;
    for (int b = 0; b < 256; b++) char_of_byte[b] = (uint32_t)b;
    for (int b = 0; b < 256; b++) {
        bool seen = false;
        for (int i = 0; i < printable; i++) seen |= byte_order[i] == b;
        if (seen) continue;
        char_of_byte[b] = 256 + (uint32_t)(n - printable);
        byte_order[n++] = b;
    }
    ck_assert_int_eq(n, 256);
}

// GPT-2's id of byte "b" in the synthetic vocabulary (as in GPT-2's own).
static int byte_id(int b) {
    for (int i = 0; i < 256; i++)
        if (byte_order[i] == b) return i;
    ck_abort();
    return -1;
}

static const char MERGES[] = "#version: 0.2\n\xC4\xA0 t\nh e\n\xC4\xA0t he\n";  // Ġ is U+0120, the space
enum { ID_G_T = 256, ID_HE = 257, ID_G_THE = 258, ID_END = 259 };

// vocab_json: the synthetic vocab.json, with "extra" (",\"key\": id" members
// or "") added before its end, and <|endoftext|> unless "no_end". The caller frees.
static char *vocab_json(const char *extra, bool no_end) {
    make_byte_order();
    size_t cap = 16384, n = 0;
    char *out = malloc(cap);
    n += (size_t)snprintf(out + n, cap - n, "{");
    for (int i = 0; i < 256; i++) {
        char utf8[4];
        int k = utf8_encode(char_of_byte[byte_order[i]], utf8);
        bool escape = k == 1 && (utf8[0] == '"' || utf8[0] == '\\');
        n += (size_t)snprintf(out + n, cap - n, "%s\"%s%.*s\": %d", i > 0 ? ", " : "", escape ? "\\" : "", k, utf8, i);
    }
    n += (size_t)snprintf(out + n, cap - n, ", \"\xC4\xA0t\": %d, \"he\": %d, \"\xC4\xA0the\": %d", ID_G_T, ID_HE,
                          ID_G_THE);
    if (!no_end) n += (size_t)snprintf(out + n, cap - n, ", \"<|endoftext|>\": %d", ID_END);
    snprintf(out + n, cap - n, "%s}", extra);
    return out;
}

// load: gpt2_tokenizer_from_text on "vocab" and "merges"; returns whether it worked.
static bool load(Tokenizer *tok, const char *vocab, const char *merges, Error *err) {
    return gpt2_tokenizer_from_text(tok, vocab, strlen(vocab), "dir/vocab.json", merges, strlen(merges),
                                    "dir/merges.txt", err);
}

static void encode_ok(Tokenizer *tok, const char *text, int **ids, size_t *n) {
    Error err;
    ck_assert_msg(tokenizer_encode(tok, text, strlen(text), ids, n, "test", &err), "%s", err.msg);
}

START_TEST(gpt2_tokenizer_numbers_tokens_as_vocab_json_does) {
    char *vocab = vocab_json("", false);
    Tokenizer tok;
    Error err;
    ck_assert_msg(load(&tok, vocab, MERGES, &err), "%s", err.msg);
    ck_assert_int_eq(tok.kind, TOKENIZER_GPT2);
    ck_assert_int_eq(tok.vocab_size, 260);
    ck_assert_int_eq(tok.end_of_text, ID_END);
    ck_assert_str_eq(tokenizer_kind_name(tok.kind), "gpt2");

    int *ids;
    size_t n;
    encode_ok(&tok, " the the", &ids, &n);  // chunks " the", " the": each one token
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], ID_G_THE);
    ck_assert_int_eq(ids[1], ID_G_THE);
    free(ids);
    encode_ok(&tok, "the\n", &ids, &n);  // "t" + "he", then the newline's byte
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], byte_id('t'));
    ck_assert_int_eq(ids[0], 83);  // as in GPT-2's own vocab.json
    ck_assert_int_eq(ids[1], ID_HE);
    ck_assert_int_eq(ids[2], byte_id('\n'));
    ck_assert_int_eq(ids[2], 198);
    free(ids);
    ck_assert_int_eq(tokenizer_id(&tok, '!'), 0);
    ck_assert_int_eq(tokenizer_id(&tok, 0xE9), -1);
    tokenizer_free(&tok);
    free(vocab);
}
END_TEST

START_TEST(gpt2_tokenizer_decodes_back_to_the_text_and_end_of_text_to_its_spelling) {
    char *vocab = vocab_json("", false);
    Tokenizer tok;
    Error err;
    ck_assert_msg(load(&tok, vocab, MERGES, &err), "%s", err.msg);
    const char *text = "the caf\xC3\xA9 \xE6\x97\xA5 <|endoftext|>\t\n";
    int *ids;
    size_t n, len;
    encode_ok(&tok, text, &ids, &n);
    for (size_t i = 0; i < n; i++) ck_assert_int_ne(ids[i], ID_END);  // spelled out, it is ordinary text
    char *back = tokenizer_decode(&tok, ids, n, &len);
    ck_assert_uint_eq(len, strlen(text));
    ck_assert_str_eq(back, text);
    free(back);
    free(ids);
    int end = ID_END;
    back = tokenizer_decode(&tok, &end, 1, &len);
    ck_assert_str_eq(back, "<|endoftext|>");
    free(back);
    tokenizer_free(&tok);
    tokenizer_free(&tok);  // twice is safe
    free(vocab);
}
END_TEST

// expect_load_error: loading fails, "tok" is left empty, and the message is
// one line holding every one of "needles" (NULL-terminated).
static void expect_load_error(const char *vocab, const char *merges, const char *const *needles) {
    Tokenizer tok;
    Error err;
    ck_assert_msg(!load(&tok, vocab, merges, &err), "loaded: %s", merges);
    ck_assert_int_eq(tok.vocab_size, 0);
    ck_assert_ptr_null(tok.gpt2_of_bpe);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "not one line: %s", err.msg);
    for (int i = 0; needles[i]; i++)
        ck_assert_msg(strstr(err.msg, needles[i]), "\"%s\" lacks \"%s\"", err.msg, needles[i]);
}

START_TEST(a_bad_merges_txt_is_refused_naming_the_file_and_line) {
    char *vocab = vocab_json("", false);
    expect_load_error(vocab, "\xC4\xA0 t\n", (const char *[]){"dir/merges.txt", "line 1", "#version", NULL});
    expect_load_error(vocab, "", (const char *[]){"dir/merges.txt", "line 1", NULL});
    expect_load_error(vocab, "#version: 0.2\n\xC4\xA0 t\nhe\n",
                      (const char *[]){"dir/merges.txt", "line 3", "not two tokens", NULL});
    expect_load_error(vocab, "#version: 0.2\n\xC4\xA0 t\n\nh e\n",
                      (const char *[]){"dir/merges.txt", "line 3", NULL});  // a blank line
    expect_load_error(vocab, "#version: 0.2\nh  e\n", (const char *[]){"line 2", "one space", NULL});
    expect_load_error(vocab, "#version: 0.2\nh ex\n",
                      (const char *[]){"dir/merges.txt", "line 2", "\"ex\" is not a token yet", NULL});
    expect_load_error(vocab, "#version: 0.2\nh e\r\n", (const char *[]){"line 2", "not a token yet", NULL});
    expect_load_error(vocab, "#version: 0.2\n\xC4\xA0 t\nh e\n\xC4\xA0 t\n",
                      (const char *[]){"line 4", "\"\xC4\xA0t\"", "line 2 made it", NULL});
    expect_load_error(vocab, "#version: 0.2\n\xC4\xA0t he\n", (const char *[]){"line 2", "not a token yet", NULL});
    free(vocab);
}
END_TEST

// vocab_with: the synthetic vocab.json with its member "\"he\": 257"
// replaced by "member". The caller frees.
static char *vocab_with(const char *member) {
    char *vocab = vocab_json("", false);
    char *he = strstr(vocab, "\"he\": 257");
    size_t old_len = strlen("\"he\": 257"), len = strlen(vocab) + strlen(member) + 1;
    char *out = malloc(len);
    snprintf(out, len, "%.*s%s%s", (int)(he - vocab), vocab, member, he + old_len);
    free(vocab);
    return out;
}

START_TEST(a_bad_vocab_json_is_refused_naming_the_file_and_key) {
    char *vocab = vocab_json("", false);
    expect_load_error("{\"a\": 1", MERGES, (const char *[]){"dir/vocab.json", "invalid JSON", NULL});
    expect_load_error("[1, 2]", MERGES, (const char *[]){"dir/vocab.json", "an array", NULL});
    // One token too many, or too few (a merge vocab.json does not know, or no <|endoftext|>).
    char *bad = vocab_json(", \"xyz\": 260", false);
    expect_load_error(bad, MERGES, (const char *[]){"dir/vocab.json", "has 261 tokens", "makes 259", NULL});
    free(bad);
    expect_load_error(vocab, "#version: 0.2\n\xC4\xA0 t\nh e\n\xC4\xA0t he\nt h\n",
                      (const char *[]){"dir/vocab.json", "has 260 tokens", "makes 260 (256 bytes and 4 merges)", NULL});
    bad = vocab_json("", true);
    expect_load_error(bad, MERGES, (const char *[]){"dir/vocab.json", "has 259 tokens", "<|endoftext|>", NULL});
    free(bad);
    // As many keys, but one wrong.
    const struct {
        const char *member;
        const char *needle;
    } cases[] = {
        {"\"xyz\": 257", "\"xyz\" (id 257) is neither a byte's character, a token merges.txt makes, nor <|endoftext|>"},
        {"\"he\": 999", "\"he\" has 999, not an id in [0, 260)"},
        {"\"he\": \"7\"", "\"he\" has a string"},
        {"\"he\": 2.5", "\"he\" has 2.5, not an id"},
        {"\"he\": 256", "\"he\" has the id 256, which an earlier key has too"},
    };
    for (int i = 0; i < COUNT(cases); i++) {
        bad = vocab_with(cases[i].member);
        expect_load_error(bad, MERGES, (const char *[]){"dir/vocab.json", cases[i].needle, NULL});
        free(bad);
    }
    free(vocab);
}
END_TEST

START_TEST(a_gpt2_tokenizer_without_merges_encodes_bytes) {
    // Found by fuzz_gpt2_tokenizer: no merges at all once passed NULL to memcpy.
    char *vocab = vocab_json("", false);
    char *merges_start = strstr(vocab, ", \"\xC4\xA0t\": 256");
    snprintf(merges_start, strlen(merges_start) + 1, ", \"<|endoftext|>\": 256}");
    Tokenizer tok;
    Error err;
    ck_assert_msg(load(&tok, vocab, "#version: 0.2\n", &err), "%s", err.msg);
    ck_assert_int_eq(tok.vocab_size, 257);
    ck_assert_int_eq(tok.end_of_text, 256);
    int *ids;
    size_t n;
    encode_ok(&tok, " the", &ids, &n);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(ids[0], byte_id(' '));
    ck_assert_int_eq(ids[3], byte_id('e'));
    free(ids);
    tokenizer_free(&tok);
    free(vocab);
}
END_TEST

START_TEST(load_gpt2_reads_a_directory_and_names_a_missing_file) {
    char dir[256];
    scratch_dir_create(dir, sizeof dir);
    char *vocab = vocab_json("", false);
    write_text_file(path_in(dir, "vocab.json"), vocab);
    Tokenizer tok;
    Error err;
    ck_assert(!tokenizer_load_gpt2(&tok, dir, &err));
    ck_assert_msg(strstr(err.msg, "merges.txt") && strstr(err.msg, "a GPT-2 directory holds"), "%s", err.msg);
    write_text_file(path_in(dir, "merges.txt"), MERGES);
    ck_assert_msg(tokenizer_load_gpt2(&tok, dir, &err), "%s", err.msg);
    ck_assert_int_eq(tok.vocab_size, 260);
    tokenizer_free(&tok);

    // The command a learner types, and its error on a directory without the files.
    char args[512];
    snprintf(args, sizeof args, "tokenize --model %s ' the the'", dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->out, "ids: 258 258\n") && strstr(r->out, "gpt2 tokenizer of 260 tokens"), "%s", r->out);
    remove(path_in(dir, "vocab.json"));
    snprintf(args, sizeof args, "tokenize --model %s ' the'", dir);
    expect_run_fails(dir, args, 1, "vocab.json");
    free(vocab);
    scratch_dir_remove(dir);
}
END_TEST

// synthetic_dir: the synthetic tokenizer's two files in a new scratch "dir".
static void synthetic_dir(char *dir, size_t cap) {
    scratch_dir_create(dir, cap);
    char *vocab = vocab_json("", false);
    write_text_file(path_in(dir, "vocab.json"), vocab);
    write_text_file(path_in(dir, "merges.txt"), MERGES);
    free(vocab);
}

START_TEST(a_checkpoint_keeps_a_gpt2_tokenizer_with_gpt2s_numbering) {
    char dir[256];
    synthetic_dir(dir, sizeof dir);
    Tokenizer tok, back;
    Error err;
    ck_assert_msg(tokenizer_load_gpt2(&tok, dir, &err), "%s", err.msg);
    ModelConfig cfg = {.vocab_size = tok.vocab_size, .block_size = 4, .n_embd = 8, .n_head = 2, .arch = ARCH_GPT, .n_layer = 1};
    Model m, loaded;
    model_init(&m, &cfg, 1, false);
    const char *path = path_in(dir, "model.safetensors");
    ck_assert_msg(checkpoint_save(&m, &tok, 7, path, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_load(path, &loaded, &back, 1, false, NULL, &err), "%s", err.msg);
    ck_assert_int_eq(back.kind, TOKENIZER_GPT2);
    ck_assert_int_eq(back.vocab_size, 260);
    ck_assert_int_eq(back.end_of_text, ID_END);
    int *ids;
    size_t n;
    encode_ok(&back, " the!", &ids, &n);  // "!" is byte 33, GPT-2's id 0
    ck_assert_int_eq((int)n, 2);
    ck_assert_int_eq(ids[0], ID_G_THE);
    ck_assert_int_eq(ids[1], byte_id('!'));
    free(ids);
    model_free(&loaded);
    model_free(&m);
    tokenizer_free(&back);
    tokenizer_free(&tok);
    scratch_dir_remove(dir);
}
END_TEST

START_TEST(train_reads_gpt2s_tokenizer_from_a_directory_and_eval_and_tokenize_use_it) {
    char dir[256];
    synthetic_dir(dir, sizeof dir);
    FILE *f = fopen(path_in(dir, "text.txt"), "w");
    for (int i = 0; i < 200; i++) fputs("the then there! he the thee; ", f);
    fclose(f);
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s --tokenizer gpt2 --tokenizer-dir %s --layers 1 --embd 8 --heads 2 --context 8 --batch 2 --steps 3",
             path_in(dir, "text.txt"), path_in(dir, "run"), dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    ck_assert_msg(strstr(r->err, "V=260") && strstr(r->err, "(gpt2 tokenizer)"), "%s", r->err);
    const char *model = path_in(dir, "run/model.safetensors");
    snprintf(args, sizeof args, "tokenize --model %s ' the the'", model);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strstr(r->out, "ids: 258 258\n"), "%s%s", r->out, r->err);
    snprintf(args, sizeof args, "eval --model %s %s --json", model, path_in(dir, "text.txt"));
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && strstr(r->out, "\"bits_per_byte\": "), "%s%s", r->out, r->err);

    // The tokenizer comes from the directory, and with --init from the checkpoint.
    snprintf(args, sizeof args, "train %s --out %s --tokenizer gpt2", path_in(dir, "text.txt"), path_in(dir, "x"));
    expect_run_fails(dir, args, 2, "give --tokenizer-dir DIR");
    snprintf(args, sizeof args, "train %s --out %s --tokenizer-dir %s", path_in(dir, "text.txt"), path_in(dir, "x"), dir);
    expect_run_fails(dir, args, 2, "--tokenizer-dir is for --tokenizer gpt2");
    snprintf(args, sizeof args, "train %s --out %s --init %s --tokenizer-dir %s", path_in(dir, "text.txt"),
             path_in(dir, "x"), model, dir);
    expect_run_fails(dir, args, 2, "with --init the tokenizer is the checkpoint's");
    scratch_dir_remove(dir);
}
END_TEST

START_TEST(sample_stops_at_end_of_text_unless_told_to_go_past_it) {
    char dir[256];
    synthetic_dir(dir, sizeof dir);
    Tokenizer tok;
    Error err;
    ck_assert_msg(tokenizer_load_gpt2(&tok, dir, &err), "%s", err.msg);
    // A model that always predicts <|endoftext|>: every block's weights
    // zero (the stream passes through), each position's embedding e (mean
    // 0, variance 1, so ln_f(x) = e), and <|endoftext|>'s embedding 10 e,
    // so its logit is 80 and every other token's 0.
    const int C = 8;
    ModelConfig cfg = {.vocab_size = tok.vocab_size, .block_size = 8, .n_embd = C, .n_head = 2, .arch = ARCH_GPT, .n_layer = 1};
    Model m;
    model_init(&m, &cfg, 1, false);
    for (int c = 0; c < C; c++) {
        const float e = c % 2 ? -1.0f : 1.0f;
        for (int t = 0; t < cfg.block_size; t++) m.params.pos_emb[t * C + c] = e;
        m.params.tok_emb[ID_END * C + c] = 10.0f * e;
        m.params.lnf_weight[c] = 1.0f;
    }
    const char *path = path_in(dir, "eot.safetensors");
    ck_assert_msg(checkpoint_save(&m, &tok, 0, path, &err), "%s", err.msg);
    char args[1024];
    snprintf(args, sizeof args, "sample --model %s --prompt ' the' --tokens 5 --temperature 0", path);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_str_eq(r->out, " the\n");
    ck_assert_msg(strstr(r->err, "sampled 1 tokens"), "%s", r->err);
    snprintf(args, sizeof args, "sample --model %s --prompt ' the' --tokens 3 --temperature 0 --past-end-of-text", path);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_str_eq(r->out, " the<|endoftext|><|endoftext|><|endoftext|>\n");
    // train's one-line preview (sample_line) ends there too: here at once.
    Generator g;
    generator_init(&g, &m, 6, true);
    float *scratch = xmalloc(2 * (size_t)cfg.vocab_size * sizeof(float));
    char line[64] = "not written";
    sample_line(&g, &tok, 1, 5, scratch, line, sizeof line);
    ck_assert_str_eq(line, "");
    free(scratch);
    generator_free(&g);
    model_free(&m);
    tokenizer_free(&tok);
    scratch_dir_remove(dir);
}
END_TEST

Suite *gpt2_tokenizer_suite(void) {
    Suite *s = suite_create("gpt2_tokenizer");
    TCase *tc = tcase_create("gpt2_tokenizer");
    tcase_set_timeout(tc, TIMEOUT_SECONDS);
    tcase_add_test(tc, gpt2_tokenizer_numbers_tokens_as_vocab_json_does);
    tcase_add_test(tc, gpt2_tokenizer_decodes_back_to_the_text_and_end_of_text_to_its_spelling);
    tcase_add_test(tc, a_bad_merges_txt_is_refused_naming_the_file_and_line);
    tcase_add_test(tc, a_bad_vocab_json_is_refused_naming_the_file_and_key);
    tcase_add_test(tc, a_gpt2_tokenizer_without_merges_encodes_bytes);
    tcase_add_test(tc, load_gpt2_reads_a_directory_and_names_a_missing_file);
    suite_add_tcase(s, tc);
    TCase *ckpt = tcase_create("checkpoint");
    tcase_set_timeout(ckpt, 120);
    tcase_add_test(ckpt, a_checkpoint_keeps_a_gpt2_tokenizer_with_gpt2s_numbering);
    tcase_add_test(ckpt, train_reads_gpt2s_tokenizer_from_a_directory_and_eval_and_tokenize_use_it);
    tcase_add_test(ckpt, sample_stops_at_end_of_text_unless_told_to_go_past_it);
    suite_add_tcase(s, ckpt);
    return s;
}
