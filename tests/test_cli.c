// test_cli.c: the tinygpt binary end to end: its errors for bad flags and
// files, and real (tiny) train -> sample -> eval round trips, of a card
// model and of a gpt.
//
// These run ./tinygpt (or $TINYGPT_BIN) as a child process, the way a user
// does, so `make test` builds it first.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "tests.h"

// The integration test trains for real: give it time on a busy 2-core machine.
#define TRAIN_TIMEOUT_SECONDS 120

static char work_dir[256];

// run: tinygpt with "args" (a shell fragment), capturing stdout and stderr.
static RunResult *run(const char *args) { return run_binary(tinygpt_binary(), work_dir, args); }

// The error line must be one line, say which flag or file, and exit as told.
static void assert_fails(const char *args, int status, const char *must_mention) {
    RunResult *r = run(args);
    ck_assert_msg(r->status == status, "'%s' exited %d, expected %d (stderr: %s)", args, r->status, status, r->err);
    ck_assert_msg(strstr(r->err, must_mention) != NULL, "'%s' error does not mention '%s': %s", args, must_mention, r->err);
    ck_assert_msg(strchr(r->err, '\n') == r->err + strlen(r->err) - 1, "'%s' error is not one line: %s", args, r->err);
}

// A few KB of text with structure to learn: short words in a fixed rhythm.
static void write_corpus(const char *path, int repeats) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    const char *lines[] = {"the cat sat on the mat.\n", "a whale — a white whale!\n", "call me ishmael.\n",
                           "the sea is wide and deep.\n"};
    for (int i = 0; i < repeats; i++) fputs(lines[(i * 7 + i / 3) % 4], f);
    fclose(f);
}

static void setup(void) {
    snprintf(work_dir, sizeof work_dir, "/tmp/tinygpt_cli_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(work_dir));
    char path[512];
    snprintf(path, sizeof path, "%s/corpus.txt", work_dir);
    write_corpus(path, 400);
}

static void teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", work_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", work_dir);
}

// in_work: "work_dir/name". The result lives in one of 8 rotating buffers,
// enough for every path one command line needs; copy it to keep it longer.
static const char *in_work(const char *name) {
    static char buf[8][1024];
    static int which;
    which = (which + 1) % 8;
    snprintf(buf[which], sizeof buf[which], "%s/%s", work_dir, name);
    return buf[which];
}

START_TEST(help_lists_the_commands_and_exits_zero) {
    RunResult *r = run("--help");
    ck_assert_int_eq(r->status, 0);
    ck_assert_ptr_nonnull(strstr(r->out, "train"));
    ck_assert_ptr_nonnull(strstr(r->out, "sample"));
    ck_assert_ptr_nonnull(strstr(r->out, "eval"));
    r = run("train --help");
    ck_assert_int_eq(r->status, 0);
    ck_assert_ptr_nonnull(strstr(r->out, "--val-fraction"));
    ck_assert_ptr_nonnull(strstr(r->out, "--order"));
    ck_assert_msg(strstr(r->out, "--log-interval N") && strstr(r->out, "(default --eval-interval)"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "--force") != NULL, "%s", r->out);
    // The defaults that depend on the architecture show both.
    ck_assert_msg(strstr(r->out, "--arch ARCH") && strstr(r->out, "(default gpt)"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "--layers L") != NULL, "%s", r->out);
    ck_assert_msg(strstr(r->out, "(default gpt 12, card 32)") != NULL, "no per-architecture --batch default: %s", r->out);
    ck_assert_msg(strstr(r->out, "(default gpt 2000, card 7000)") != NULL, "no per-architecture --steps default: %s",
                  r->out);
}
END_TEST

START_TEST(bad_flags_are_usage_errors_that_name_the_flag) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    assert_fails("frobnicate", 2, "frobnicate");
    snprintf(args, sizeof args, "train %s --bogus 3", corpus);
    assert_fails(args, 2, "--bogus");
    snprintf(args, sizeof args, "train %s --steps", corpus);
    assert_fails(args, 2, "--steps");
    snprintf(args, sizeof args, "train %s --steps ten", corpus);
    assert_fails(args, 2, "--steps");
    snprintf(args, sizeof args, "train %s --batch 0", corpus);
    assert_fails(args, 2, "--batch");
    snprintf(args, sizeof args, "train %s --embd 30 --heads 4", corpus);
    assert_fails(args, 2, "--heads");
    snprintf(args, sizeof args, "train %s --dropout 1", corpus);
    assert_fails(args, 2, "--dropout");
    snprintf(args, sizeof args, "train %s --lr nan", corpus);
    assert_fails(args, 2, "--lr");
    snprintf(args, sizeof args, "train %s --order shuffled", corpus);
    assert_fails(args, 2, "--order");
    snprintf(args, sizeof args, "train %s --layers 0", corpus);
    assert_fails(args, 2, "--layers");
    snprintf(args, sizeof args, "train %s --arch card --layers 2", corpus);
    assert_fails(args, 2, "--layers");
    snprintf(args, sizeof args, "train %s --arch foo", corpus);
    assert_fails(args, 2, "--arch 'foo'");
    snprintf(args, sizeof args, "train %s --arch card --no-mlp", corpus);
    assert_fails(args, 2, "--no-mlp");
    snprintf(args, sizeof args, "train %s --optimizer rmsprop", corpus);
    assert_fails(args, 2, "--optimizer 'rmsprop'");
    snprintf(args, sizeof args, "train %s --lr-schedule linear", corpus);
    assert_fails(args, 2, "--lr-schedule 'linear'");
    snprintf(args, sizeof args, "train %s --optimizer sgd --beta1 0.8", corpus);
    assert_fails(args, 2, "--beta1 is for --optimizer adamw");
    snprintf(args, sizeof args, "train %s --arch card --weight-decay 0.1", corpus);
    assert_fails(args, 2, "--weight-decay is for --optimizer adamw");
    snprintf(args, sizeof args, "train %s --beta2 1", corpus);
    assert_fails(args, 2, "--beta2");
    snprintf(args, sizeof args, "train %s --grad-clip -1", corpus);
    assert_fails(args, 2, "--grad-clip");
    assert_fails("train", 2, "FILE");
    assert_fails("sample --tokens 5", 2, "--model");
}
END_TEST

START_TEST(bad_files_are_runtime_errors_that_name_the_file) {
    char args[4096];
    snprintf(args, sizeof args, "train %s/missing.txt --out %s", work_dir, in_work("out"));
    assert_fails(args, 1, "missing.txt");
    snprintf(args, sizeof args, "train %s --out %s", work_dir, in_work("out"));
    assert_fails(args, 1, "directory");
    snprintf(args, sizeof args, "sample --model %s/nope.safetensors", work_dir);
    assert_fails(args, 1, "nope.safetensors");
    // A text file is not a checkpoint.
    snprintf(args, sizeof args, "sample --model %s", in_work("corpus.txt"));
    assert_fails(args, 1, "corpus.txt");
    // Too short for one window of context + 1.
    FILE *f = fopen(in_work("short.txt"), "w");
    fputs("tiny", f);
    fclose(f);
    snprintf(args, sizeof args, "train %s --context 16 --out %s", in_work("short.txt"), in_work("out"));
    assert_fails(args, 1, "short.txt");
}
END_TEST

// Column "column" (0-based) of data row "row" of a log.csv, or NAN if empty.
static double log_value(const char *log, int row, int column) {
    const char *p = strchr(log, '\n');  // skip the header
    for (int r = 0; p && r < row; r++) p = strchr(p + 1, '\n');
    if (!p) return NAN;
    p++;
    for (int c = 0; c < column; c++) p = strchr(p, ',') + 1;
    return (*p == ',' || *p == '\n') ? NAN : atof(p);
}

START_TEST(training_a_tiny_model_lowers_the_loss_and_the_model_samples_and_evaluates) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(args, sizeof args,
             "train %s --arch card --out %s --steps 300 --batch 8 --context 16 --embd 32 --heads 4 --lr 0.5 "
             "--eval-interval 100 --threads 2",
             corpus, in_work("run"));
    RunResult *r = run(args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);

    char log[65536];
    read_text_file(in_work("run/log.csv"), log, sizeof log);
    ck_assert_ptr_nonnull(strstr(log, "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm\n"));
    double first = log_value(log, 0, 1), last_val = log_value(log, 299, 2);
    double mean_last = 0;
    for (int i = 280; i < 300; i++) mean_last += log_value(log, i, 1) / 20;
    ck_assert_msg(isfinite(log_value(log, 0, 2)), "no validation loss at step 0");
    ck_assert_msg(isnan(log_value(log, 1, 2)), "validation loss at a step that is not an eval step");
    // The text has 27 distinct characters and a rigid rhythm: a model that
    // learns anything falls far below its starting loss.
    ck_assert_msg(mean_last < 0.5 * first, "loss fell only from %.3f to %.3f", first, mean_last);
    ck_assert_msg(last_val < 0.5 * first, "validation loss %.3f did not fall from %.3f", last_val, first);

    // Sampling: stdout is the prompt followed by exactly --tokens characters.
    snprintf(args, sizeof args, "sample --model %s --prompt 'the ' --tokens 40 --seed 3",
             in_work("run/model.safetensors"));
    r = run(args);
    ck_assert_msg(r->status == 0, "sample failed: %s", r->err);
    ck_assert_int_eq(strncmp(r->out, "the ", 4), 0);
    char first_sample[65536];
    strcpy(first_sample, r->out);
    r = run(args);
    ck_assert_str_eq(r->out, first_sample);  // same seed, same text

    // A prompt character the model never saw is a clear error.
    snprintf(args, sizeof args, "sample --model %s --prompt 'Zebra'", in_work("run/model.safetensors"));
    assert_fails(args, 2, "--prompt");

    // eval --json: loss close to the training loss on the same text.
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("run/model.safetensors"), corpus);
    r = run(args);
    ck_assert_msg(r->status == 0, "eval failed: %s", r->err);
    double loss = NAN, perplexity = NAN;
    size_t tokens = 0;
    ck_assert_int_eq(sscanf(r->out, "{\"loss\": %lf, \"perplexity\": %lf, \"tokens\": %zu}", &loss, &perplexity, &tokens), 3);
    ck_assert_double_eq_tol(perplexity, exp(loss), 1e-3 * perplexity);
    ck_assert_msg(loss < 0.5 * first, "eval loss %.3f is not below half the first loss %.3f", loss, first);
    ck_assert_int_eq(tokens % 16, 0);
}
END_TEST

START_TEST(a_tiny_gpt_trains_from_the_command_line_and_samples_and_evaluates) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(args, sizeof args,
             "train %s --arch gpt --layers 2 --embd 16 --heads 2 --context 8 --batch 4 --steps 60 --eval-interval 20 "
             "--warmup 5 --out %s --threads 2",  // the default warmup, 100 steps, is longer than this run
             corpus, in_work("gpt"));
    RunResult *r = run(args);
    ck_assert_msg(r->status == 0, "train --arch gpt failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "arch=gpt layers=2") != NULL, "the model line does not say gpt, 2 layers: %s", r->err);
    char log[65536];
    read_text_file(in_work("gpt/log.csv"), log, sizeof log);
    double first = log_value(log, 0, 2), last = log_value(log, 59, 2);
    ck_assert_msg(isfinite(first) && isfinite(last) && last < first - 0.2,
                  "validation loss fell only from %.3f to %.3f", first, last);
    // The lr column is the schedule's (warmup 5 to 1e-3, cosine to 1e-4 at
    // step 60), and grad_norm the gradients' norm before clipping.
    ck_assert_double_eq_tol(log_value(log, 0, 3), 1e-3 * 1 / 6, 1e-9);
    ck_assert_double_eq_tol(log_value(log, 5, 3), 1e-3, 1e-9);
    ck_assert_double_eq_tol(log_value(log, 59, 3), 1e-4 + 0.5 * (1 + cos(M_PI * 54 / 55)) * 9e-4, 1e-9);
    for (int step = 0; step < 60; step++)
        ck_assert_msg(log_value(log, step, 6) > 0, "grad_norm of step %d is %g", step, log_value(log, step, 6));

    snprintf(args, sizeof args, "sample --model %s --prompt 'the ' --tokens 30 --seed 3", in_work("gpt/model.safetensors"));
    r = run(args);
    ck_assert_msg(r->status == 0, "sample of a gpt failed: %s", r->err);
    ck_assert_int_eq(strncmp(r->out, "the ", 4), 0);
    int characters = 0;  // UTF-8: every byte but the continuation bytes of '—' starts one
    for (const char *p = r->out; *p; p++) characters += (*p & 0xC0) != 0x80;
    ck_assert_int_eq(characters, 4 + 30);
    static char cached[sizeof r->out];
    memcpy(cached, r->out, sizeof cached);
    strcat(args, " --no-cache");
    r = run(args);
    ck_assert_str_eq(r->out, cached);  // the key/value cache of every block gives the same text

    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("gpt/model.safetensors"), corpus);
    r = run(args);
    ck_assert_msg(r->status == 0, "eval of a gpt failed: %s", r->err);
    double loss = NAN;
    ck_assert_int_eq(sscanf(r->out, "{\"loss\": %lf", &loss), 1);
    ck_assert_msg(fabs(loss - last) < 0.2, "eval loss %.3f, far from the last validation loss %.3f", loss, last);
}
END_TEST

START_TEST(train_creates_missing_parent_directories_of_out) {
    char args[4096];
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --context 8 --embd 8 --heads 2", in_work("corpus.txt"),
             in_work("runs/nested/deeper"));
    RunResult *r = run(args);
    ck_assert_msg(r->status == 0, "train into a missing parent failed: %s", r->err);
    char path[1024];
    snprintf(path, sizeof path, "%s/runs/nested/deeper/model.safetensors", work_dir);
    ck_assert_int_eq(access(path, R_OK), 0);
}
END_TEST

START_TEST(init_takes_sizes_from_the_checkpoint_and_refuses_conflicting_ones) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --context 8 --embd 16 --heads 2", corpus, in_work("a"));
    ck_assert_int_eq(run(args)->status, 0);
    snprintf(args, sizeof args, "train %s --out %s --steps 3 --init %s", corpus, in_work("b"),
             in_work("a/model.safetensors"));
    RunResult *r = run(args);
    ck_assert_msg(r->status == 0, "train --init failed: %s", r->err);
    snprintf(args, sizeof args, "train %s --out %s --steps 3 --embd 32 --init %s", corpus, in_work("c"),
             in_work("a/model.safetensors"));
    assert_fails(args, 2, "--embd");
}
END_TEST

START_TEST(init_takes_the_architecture_from_the_checkpoint_and_refuses_a_conflicting_one) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --arch gpt --layers 2 --context 8 --embd 16 --heads 2",
             corpus, in_work("gpt"));
    ck_assert_int_eq(run(args)->status, 0);
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --arch card --context 8 --embd 16 --heads 2", corpus,
             in_work("card"));
    ck_assert_int_eq(run(args)->status, 0);
    // Without --arch, a gpt file trains on as a gpt of its own depth, with
    // gpt's defaults (--steps: the run stops after one step of 2000), and a
    // card file as card, with card's.
    snprintf(args, sizeof args, "train %s --out %s --stop-after 1 --init %s", corpus, in_work("b"),
             in_work("gpt/model.safetensors"));
    RunResult *r = run(args);
    ck_assert_msg(r->status == 0, "train --init of a gpt failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "arch=gpt layers=2") != NULL, "%s", r->err);
    ck_assert_msg(strstr(r->err, "stopped after 1 of 2000 steps") != NULL, "not gpt's default --steps: %s", r->err);
    snprintf(args, sizeof args, "train %s --out %s --stop-after 1 --init %s", corpus, in_work("c"),
             in_work("card/model.safetensors"));
    r = run(args);
    ck_assert_msg(r->status == 0, "train --init of a card model failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "arch=card layers=1") != NULL, "%s", r->err);
    ck_assert_msg(strstr(r->err, "stopped after 1 of 7000 steps") != NULL, "not card's default --steps: %s", r->err);

    // A flag that disagrees with the file is an error naming both values.
    snprintf(args, sizeof args, "train %s --out %s --steps 2 --layers 3 --init %s", corpus, in_work("d"),
             in_work("gpt/model.safetensors"));
    assert_fails(args, 2, "--layers 3 conflicts with the --init checkpoint, which has 2");
    snprintf(args, sizeof args, "train %s --out %s --steps 2 --arch card --init %s", corpus, in_work("d"),
             in_work("gpt/model.safetensors"));
    assert_fails(args, 2, "--arch card conflicts with the --init checkpoint, which is gpt");
    snprintf(args, sizeof args, "train %s --out %s --steps 2 --layers 2 --init %s", corpus, in_work("d"),
             in_work("card/model.safetensors"));
    assert_fails(args, 2, "--layers 2 conflicts with the --init checkpoint, which is card");
}
END_TEST

START_TEST(the_same_seed_gives_the_same_losses_bit_for_bit) {
    char args[4096], log_a[65536], log_b[65536];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "train %s --out %s --steps 40 --batch 4 --context 16 --embd 16 --heads 2 --seed 9",
                 corpus, in_work(i == 0 ? "s1" : "s2"));
        ck_assert_int_eq(run(args)->status, 0);
    }
    read_text_file(in_work("s1/log.csv"), log_a, sizeof log_a);
    read_text_file(in_work("s2/log.csv"), log_b, sizeof log_b);
    for (int row = 0; row < 40; row++) ck_assert(log_value(log_a, row, 1) == log_value(log_b, row, 1));
}
END_TEST

Suite *cli_suite(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TRAIN_TIMEOUT_SECONDS);
    tcase_add_test(tc, help_lists_the_commands_and_exits_zero);
    tcase_add_test(tc, bad_flags_are_usage_errors_that_name_the_flag);
    tcase_add_test(tc, bad_files_are_runtime_errors_that_name_the_file);
    tcase_add_test(tc, training_a_tiny_model_lowers_the_loss_and_the_model_samples_and_evaluates);
    tcase_add_test(tc, a_tiny_gpt_trains_from_the_command_line_and_samples_and_evaluates);
    tcase_add_test(tc, train_creates_missing_parent_directories_of_out);
    tcase_add_test(tc, init_takes_sizes_from_the_checkpoint_and_refuses_conflicting_ones);
    tcase_add_test(tc, init_takes_the_architecture_from_the_checkpoint_and_refuses_a_conflicting_one);
    tcase_add_test(tc, the_same_seed_gives_the_same_losses_bit_for_bit);
    suite_add_tcase(s, tc);
    return s;
}
