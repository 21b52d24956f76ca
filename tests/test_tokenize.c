// test_tokenize.c: the bpe tokenizer end to end through the binary, and
// src/commands/tokenize.c (`tinygpt tokenize`): `train --tokenizer bpe`
// saves its merges in the checkpoint, and sample, eval, tokenize, --init and
// --resume read them from there; `tokenize` shows a text's pieces, and
// `tokenize --learn` its speed and first merges; the val_bpb column (added
// to an older log on resume) and eval's bits per byte; the tokenizer flags'
// errors.
#define _GNU_SOURCE  // memmem
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "tests.h"
#include "tokenizer.h"

// Tiny runs, but a loaded 2-core machine (or a sanitizer) slows them down.
#define TIMEOUT_SECONDS 120
// A tiny gpt that trains in well under a second.
#define TINY_GPT "--layers 1 --embd 16 --heads 2 --context 8 --batch 4 --warmup 2 --eval-interval 10 --seed 5 --tokenizer char"

static char work_dir[256];

// in_work: "work_dir/name" (path_in, helpers.h: 8 rotating buffers).
static const char *in_work(const char *name) { return path_in(work_dir, name); }

// The same rhythmic few KB as test_cli.c's corpus: words worth merging, and
// an em dash (3 bytes) so that pieces and characters differ.
static void setup(void) {
    scratch_dir_create(work_dir, sizeof work_dir);
    write_corpus(in_work("corpus.txt"), 400);
}

static void teardown(void) { scratch_dir_remove(work_dir); }

static void expect_ok(const RunResult *r, const char *what) {
    ck_assert_msg(r->status == 0, "%s exited %d: %s", what, r->status, r->err);
}

// file_has: "path" contains the bytes "needle" (a checkpoint is binary, so
// not read as a string).
static bool file_has(const char *path, const char *needle) {
    size_t n;
    char *bytes = slurp(path, &n);
    bool found = memmem(bytes, n, needle, strlen(needle)) != NULL;
    free(bytes);
    return found;
}

// train_bpe: a tiny bpe gpt of 300 tokens (44 merges) into work_dir/"name".
static void train_bpe(const char *name, const char *extra) {
    char args[2048];
    snprintf(args, sizeof args, "train %s " TINY_GPT " --tokenizer bpe --vocab-size 300 --steps 30 --out %s %s",
             in_work("corpus.txt"), in_work(name), extra);
    RunResult *r = run_tinygpt(work_dir, args);
    expect_ok(r, "train --tokenizer bpe");
    ck_assert_msg(strstr(r->err, "V=300") && strstr(r->err, "(bpe tokenizer)"), "the model line: %s", r->err);
}

START_TEST(a_bpe_model_keeps_its_merges_in_the_checkpoint_and_samples_whole_characters) {
    train_bpe("bpe", "");
    const char *model = in_work("bpe/model.safetensors");
    ck_assert(file_has(model, "\"tokenizer\":\"bpe\""));
    ck_assert(file_has(model, "\"merges\":"));
    ck_assert(!file_has(model, "\"vocab\":"));

    char args[2048];
    snprintf(args, sizeof args, "sample --model %s --prompt 'the whale' --tokens 40 --seed 3", model);
    RunResult *r = run_tinygpt(work_dir, args);
    expect_ok(r, "sample");
    ck_assert_int_eq(strncmp(r->out, "the whale", 9), 0);
    // Whatever bytes the model picks, stdout is valid UTF-8 (a byte that
    // cannot be one comes out as U+FFFD).
    Error err;
    ck_assert_msg(tokenizer_check_text(r->out, strlen(r->out), "sample", &err), "%s", err.msg);

    // attention labels each position with its piece.
    snprintf(args, sizeof args, "attention --model %s --prompt 'the white whale' --out %s", model, in_work("maps"));
    r = run_tinygpt(work_dir, args);
    expect_ok(r, "attention");
    ck_assert_msg(strstr(r->out, "␣whale") != NULL, "no ' whale' label: %s", r->out);
    int width, height;
    char why[256];
    ck_assert_msg(png_size(in_work("maps/attention_layer1.png"), &width, &height, why, sizeof why), "%s", why);
}
END_TEST

START_TEST(tokenize_shows_the_pieces_of_a_text_which_join_back_to_it) {
    train_bpe("bpe", "");
    char args[2048];
    snprintf(args, sizeof args, "tokenize --model %s 'the white whale sat on the mat'", in_work("bpe/model.safetensors"));
    RunResult *r = run_tinygpt(work_dir, args);
    expect_ok(r, "tokenize");
    // Line 1: |piece|piece|...| ; the pieces, joined, are the text.
    char joined[256];
    size_t joined_len = 0;
    int pieces = 0;
    for (const char *p = r->out; *p && *p != '\n' && joined_len < sizeof joined - 1; p++) {
        if (*p == '|') pieces++;
        else joined[joined_len++] = *p;
    }
    joined[joined_len] = '\0';
    ck_assert_str_eq(joined, "the white whale sat on the mat");
    pieces--;  // n pieces have n + 1 bars
    ck_assert_msg(pieces < 30, "no merge applied: %d pieces for 30 bytes: %s", pieces, r->out);
    ck_assert_msg(strstr(r->out, "| whale|") != NULL, "' whale' is not one piece: %s", r->out);
    int ids = 0;
    const char *ids_line = strstr(r->out, "\nids:");
    ck_assert_ptr_nonnull(ids_line);
    for (const char *p = ids_line + 5; *p && *p != '\n'; p++) ids += *p == ' ';
    ck_assert_int_eq(ids, pieces);

    // Standard input, and a char model's pieces are its characters.
    snprintf(args, sizeof args, "train %s " TINY_GPT " --steps 1 --out %s", in_work("corpus.txt"), in_work("char"));
    expect_ok(run_tinygpt(work_dir, args), "train char");
    write_text_file(in_work("text.txt"), "a\xE2\x80\x94" "c\n");
    snprintf(args, sizeof args, "'cat %s | %s tokenize --model %s -'", in_work("text.txt"), tinygpt_binary(),
             in_work("char/model.safetensors"));
    r = run_binary("sh -c", work_dir, args);
    expect_ok(r, "tokenize from stdin");
    const char *want = "|a|\xE2\x80\x94|c|\\n|\n";
    ck_assert_msg(strncmp(r->out, want, strlen(want)) == 0, "%s", r->out);
}
END_TEST

START_TEST(tokenize_learn_reports_its_speed_and_first_merges) {
    char args[2048];
    snprintf(args, sizeof args, "tokenize --learn %s --vocab-size 260 --json", in_work("corpus.txt"));
    RunResult *r = run_tinygpt(work_dir, args);
    expect_ok(r, "tokenize --learn --json");
    long bytes = 0, tokens = 0;
    int merges = 0;
    double learn = -1, encode = -1;
    ck_assert_int_eq(sscanf(r->out, "{\"bytes\": %ld, \"merges\": %d, \"learn_seconds\": %lf, \"encode_seconds\": %lf, \"tokens\": %ld}",
                            &bytes, &merges, &learn, &encode, &tokens), 5);
    ck_assert_int_eq(merges, 4);
    ck_assert(learn >= 0 && encode >= 0 && tokens > 0 && tokens < bytes);
    snprintf(args, sizeof args, "tokenize --learn %s --vocab-size 258", in_work("corpus.txt"));
    r = run_tinygpt(work_dir, args);
    expect_ok(r, "tokenize --learn");
    ck_assert_msg(strstr(r->out, "learned 2 merges") && strstr(r->out, "first merges: "), "%s", r->out);
    // "--learn -" learns from standard input: the same merges and tokens as
    // from the file (run_binary's own stdin is /dev/null: the pipe is sh's).
    snprintf(args, sizeof args, "-c \"cat %s | %s tokenize --learn - --vocab-size 260 --json\"", in_work("corpus.txt"),
             tinygpt_binary());
    r = run_binary("sh", work_dir, args);
    expect_ok(r, "tokenize --learn - --json");
    long piped_bytes = 0, piped_tokens = 0;
    int piped_merges = 0;
    ck_assert_int_eq(sscanf(r->out, "{\"bytes\": %ld, \"merges\": %d, \"learn_seconds\": %lf, \"encode_seconds\": %lf, \"tokens\": %ld}",
                            &piped_bytes, &piped_merges, &learn, &encode, &piped_tokens), 5);
    ck_assert(piped_bytes == bytes && piped_merges == merges && piped_tokens == tokens);
    snprintf(args, sizeof args, "tokenize --learn - -");
    expect_run_fails(work_dir, args, 2, "--learn - and TEXT - would both read standard input");
}
END_TEST

START_TEST(val_bpb_is_the_validation_loss_in_bits_per_byte_of_text) {
    // ASCII text: one byte per character, so a char model's bits per byte
    // is its loss in bits, val_loss / ln 2.
    FILE *f = fopen(in_work("ascii.txt"), "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 300; i++) fputs(i % 3 ? "the cat sat on the mat.\n" : "call me ishmael.\n", f);
    fclose(f);
    char args[2048];
    snprintf(args, sizeof args, "train %s " TINY_GPT " --steps 21 --out %s", in_work("ascii.txt"), in_work("a"));
    expect_ok(run_tinygpt(work_dir, args), "train char");
    static char log_text[1 << 16];
    read_text_file(in_work("a/log.csv"), log_text, sizeof log_text);
    ck_assert_int_eq(strncmp(log_text, "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb,", 62), 0);
    for (int row = 0; row <= 20; row += 10) {
        double val_loss = log_field(log_text, row, 2), val_bpb = log_field(log_text, row, 7);
        ck_assert_msg(fabs(val_bpb - val_loss / log(2.0)) < 1e-5, "row %d: val_bpb %g, val_loss %g", row, val_bpb,
                      val_loss);
    }
    ck_assert(isnan(log_field(log_text, 1, 7)));  // no evaluation at step 1

    // A bpe token covers more than a byte, so its bits per byte are below
    // its loss in bits per token; eval says the same of the whole file.
    train_bpe("bpe", "");
    read_text_file(in_work("bpe/log.csv"), log_text, sizeof log_text);
    double val_loss = log_field(log_text, 29, 2), val_bpb = log_field(log_text, 29, 7);
    ck_assert_msg(val_bpb > 0 && val_bpb < 0.9 * val_loss / log(2.0), "val_bpb %g, val_loss %g", val_bpb, val_loss);
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("bpe/model.safetensors"), in_work("corpus.txt"));
    RunResult *r = run_tinygpt(work_dir, args);
    expect_ok(r, "eval");
    double loss, perplexity, bpb;
    long tokens;
    ck_assert_int_eq(sscanf(r->out, "{\"loss\": %lf, \"perplexity\": %lf, \"tokens\": %ld, \"bits_per_byte\": %lf}",
                            &loss, &perplexity, &tokens, &bpb), 4);
    ck_assert_msg(bpb > 0 && bpb < 0.9 * loss / log(2.0), "eval: bits per byte %g, loss %g", bpb, loss);
}
END_TEST

START_TEST(a_bpe_run_resumes_bit_for_bit_and_init_keeps_the_merges) {
    train_bpe("whole", "");
    train_bpe("parts", "--stop-after 13");
    char args[2048];
    snprintf(args, sizeof args, "train --resume %s", in_work("parts"));
    expect_ok(run_tinygpt(work_dir, args), "train --resume");
    static char whole[1 << 16], parts[1 << 16];
    read_text_file(in_work("whole/log.csv"), whole, sizeof whole);
    read_text_file(in_work("parts/log.csv"), parts, sizeof parts);
    // The same losses, step by step (the ms and tokens/s columns differ).
    for (int row = 0; row < 30; row++)
        for (int column = 1; column <= 7; column += (column == 3 ? 3 : 1)) {
            double a = log_field(whole, row, column), b = log_field(parts, row, column);
            ck_assert_msg((isnan(a) && isnan(b)) || a == b, "row %d column %d: %g vs %g", row, column, a, b);
        }

    snprintf(args, sizeof args, "train %s --init %s --steps 2 --out %s", in_work("corpus.txt"),
             in_work("whole/model.safetensors"), in_work("init"));
    RunResult *r = run_tinygpt(work_dir, args);
    expect_ok(r, "train --init");
    ck_assert_msg(strstr(r->err, "V=300") && strstr(r->err, "(bpe tokenizer)"), "%s", r->err);
}
END_TEST

START_TEST(a_log_from_before_val_bpb_gets_todays_header_when_its_run_resumes) {
    char args[2048];
    snprintf(args, sizeof args, "train %s " TINY_GPT " --steps 20 --stop-after 10 --out %s", in_work("corpus.txt"),
             in_work("old"));
    expect_ok(run_tinygpt(work_dir, args), "train --stop-after");
    // As an older tinygpt wrote it: no val_bpb column (nor best_step,
    // seconds and sample, which came later), in the header or the rows:
    // each line cut before its 7th comma.
    static char log_text[1 << 16], old[1 << 16];
    read_text_file(in_work("old/log.csv"), log_text, sizeof log_text);
    size_t n = 0;
    for (const char *line = log_text, *end; (end = strchr(line, '\n')) != NULL; line = end + 1) {
        const char *cut = line;
        for (int commas = 0; cut < end && !(*cut == ',' && ++commas == 7); cut++) continue;
        n += (size_t)snprintf(old + n, sizeof old - n, "%.*s\n", (int)(cut - line), line);
    }
    write_text_file(in_work("old/log.csv"), old);
    ck_assert_int_eq(strncmp(old, "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm\n", 54), 0);
    // Nor did it record the log in its checkpoints (log.json, which would
    // rightly refuse this log as changed).
    ck_assert_int_eq(remove(in_work("old/checkpoint-10/log.json")), 0);

    snprintf(args, sizeof args, "train --resume %s", in_work("old"));
    expect_ok(run_tinygpt(work_dir, args), "train --resume");
    read_text_file(in_work("old/log.csv"), log_text, sizeof log_text);
    const char header[] = "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb,best_step,seconds,sample\n";
    ck_assert_int_eq(strncmp(log_text, header, sizeof header - 1), 0);
    ck_assert_msg(strstr(log_text, old + 54) == log_text + sizeof header - 1, "the old rows are not kept as they were");
    ck_assert(isfinite(log_field(log_text, 10, 7)));  // step 10 was evaluated after the resume
}
END_TEST

START_TEST(tokenizer_flags_that_cannot_work_are_refused) {
    const char *corpus = in_work("corpus.txt");
    char args[2048];
    snprintf(args, sizeof args, "train %s --tokenizer char --vocab-size 300 --out %s", corpus, in_work("x"));
    expect_run_fails(work_dir, args, 2, "--vocab-size is for --tokenizer bpe");
    snprintf(args, sizeof args, "train %s --tokenizer words --out %s", corpus, in_work("x"));
    expect_run_fails(work_dir, args, 2, "--tokenizer 'words' is not one of: char, bpe");
    snprintf(args, sizeof args, "train %s --tokenizer bpe --vocab-size 256 --out %s", corpus, in_work("x"));
    expect_run_fails(work_dir, args, 2, "--vocab-size");
    // More merges than the text has pairs to merge: the file and the fix.
    snprintf(args, sizeof args, "train %s --tokenizer bpe --vocab-size 60000 --out %s", corpus, in_work("x"));
    expect_run_fails(work_dir, args, 1, "use a --vocab-size of at most 300");
    train_bpe("bpe", "");
    snprintf(args, sizeof args, "train %s --init %s --tokenizer char --out %s", corpus, in_work("bpe/model.safetensors"),
             in_work("x"));
    expect_run_fails(work_dir, args, 2,
                     "--tokenizer char conflicts with the --init checkpoint, which was trained with --tokenizer bpe");
    snprintf(args, sizeof args, "train --resume %s --tokenizer char", in_work("bpe"));
    expect_run_fails(work_dir, args, 2, "--tokenizer cannot be changed when resuming");
    expect_run_fails(work_dir, "tokenize 'x'", 2, "give one of --model PATH or --learn FILE");
}
END_TEST

Suite *tokenize_suite(void) {
    Suite *s = suite_create("tokenize");
    TCase *tc = tcase_create("tokenize");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TIMEOUT_SECONDS);
    tcase_add_test(tc, a_bpe_model_keeps_its_merges_in_the_checkpoint_and_samples_whole_characters);
    tcase_add_test(tc, tokenize_shows_the_pieces_of_a_text_which_join_back_to_it);
    tcase_add_test(tc, tokenize_learn_reports_its_speed_and_first_merges);
    tcase_add_test(tc, val_bpb_is_the_validation_loss_in_bits_per_byte_of_text);
    tcase_add_test(tc, a_bpe_run_resumes_bit_for_bit_and_init_keeps_the_merges);
    tcase_add_test(tc, tokenizer_flags_that_cannot_work_are_refused);
    tcase_add_test(tc, a_log_from_before_val_bpb_gets_todays_header_when_its_run_resumes);
    suite_add_tcase(s, tc);
    return s;
}
