// test_cli.c: the tinygpt binary end to end (src/commands/main.c and the
// commands it runs): --help and --version; its errors for bad flags and
// files (one line, exit 2 for usage and 1 for a file: missing, binary, a
// FIFO or a device, broken weights); real (tiny) train -> sample -> eval
// round trips, of a card model and of a gpt; --init taking the sizes and
// the architecture from its checkpoint; the same seed giving the same
// losses; sampling's --top-p, --num-samples and prompt from a file or
// stdin; and the process's name after it restarts itself.
//
// These run ./tinygpt (or $TINYGPT_BIN) as a child process, the way a user
// does, so `make test` builds it first.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint.h"
#include "helpers.h"
#include "json.h"
#include "model.h"
#include "tests.h"
#include "tokenizer.h"
#include "utf8.h"

// The integration test trains for real: give it time on a busy 2-core machine.
#define TRAIN_TIMEOUT_SECONDS 120

static char work_dir[256];

// in_work: "work_dir/name" (path_in, helpers.h: 8 rotating buffers).
static const char *in_work(const char *name) { return path_in(work_dir, name); }

static void setup(void) {
    scratch_dir_create(work_dir, sizeof work_dir);
    write_corpus(in_work("corpus.txt"), 400);
}

static void teardown(void) { scratch_dir_remove(work_dir); }

START_TEST(help_lists_the_commands_and_exits_zero) {
    RunResult *r = run_tinygpt(work_dir, "--help");
    ck_assert_int_eq(r->status, 0);
    ck_assert_ptr_nonnull(strstr(r->out, "train"));
    ck_assert_ptr_nonnull(strstr(r->out, "sample"));
    ck_assert_ptr_nonnull(strstr(r->out, "eval"));
    r = run_tinygpt(work_dir, "train --help");
    ck_assert_int_eq(r->status, 0);
    ck_assert_ptr_nonnull(strstr(r->out, "--val-fraction"));
    ck_assert_ptr_nonnull(strstr(r->out, "--order"));
    ck_assert_msg(strstr(r->out, "--log-interval N") && strstr(r->out, "(default --eval-interval)"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "--force") != NULL, "%s", r->out);
    // The defaults that depend on the architecture show both.
    ck_assert_msg(strstr(r->out, "--arch ARCH") && strstr(r->out, "(default gpt)"), "%s", r->out);
    ck_assert_msg(strstr(r->out, "--layers L") != NULL, "%s", r->out);
    ck_assert_msg(strstr(r->out, "(default gpt 24, card 32)") != NULL, "no per-architecture --batch default: %s", r->out);
    ck_assert_msg(strstr(r->out, "(default gpt 2000, card 7000; with --time, no limit)") != NULL,
                  "no per-architecture --steps default: %.2000s", r->out);
}
END_TEST

START_TEST(version_is_printed_by_tinygpt_and_by_every_command_with_status_zero) {
    RunResult *r = run_tinygpt(work_dir, "--version");
    ck_assert_msg(r->status == 0 && strncmp(r->out, "tinygpt ", 8) == 0, "exit %d: %s%s", r->status, r->out, r->err);
    static char version[256];
    ck_assert_msg(strlen(r->out) < sizeof version, "%s", r->out);
    memcpy(version, r->out, strlen(r->out) + 1);
    ck_assert_msg(strchr(version, '\n') == version + strlen(version) - 1, "not one line: %s", version);
    const char *commands[] = {"train", "sample", "eval", "tokenize", "walkthrough", "attention", "gradcheck", "plot", "peak"};
    for (int i = 0; i < COUNT(commands); i++) {
        char args[64];
        snprintf(args, sizeof args, "%s --version", commands[i]);
        r = run_tinygpt(work_dir, args);
        ck_assert_msg(r->status == 0, "'%s' exited %d: %s", args, r->status, r->err);
        ck_assert_msg(strcmp(r->out, version) == 0, "'%s' printed '%s', not '%s'", args, r->out, version);
    }
    r = run_tinygpt(work_dir, "--help");
    ck_assert_msg(strstr(r->out, "--version") != NULL, "%s", r->out);
}
END_TEST

START_TEST(bad_flags_are_usage_errors_that_name_the_flag) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    expect_run_fails(work_dir, "frobnicate", 2, "frobnicate");
    snprintf(args, sizeof args, "train %s --bogus 3", corpus);
    expect_run_fails(work_dir, args, 2, "--bogus");
    snprintf(args, sizeof args, "train %s --steps", corpus);
    expect_run_fails(work_dir, args, 2, "--steps");
    snprintf(args, sizeof args, "train %s --steps ten", corpus);
    expect_run_fails(work_dir, args, 2, "--steps");
    snprintf(args, sizeof args, "train %s --batch 0", corpus);
    expect_run_fails(work_dir, args, 2, "--batch");
    snprintf(args, sizeof args, "train %s --embd 30 --heads 4", corpus);
    expect_run_fails(work_dir, args, 2, "--heads");
    snprintf(args, sizeof args, "train %s --dropout 1", corpus);
    expect_run_fails(work_dir, args, 2, "--dropout");
    snprintf(args, sizeof args, "train %s --lr nan", corpus);
    expect_run_fails(work_dir, args, 2, "--lr");
    snprintf(args, sizeof args, "train %s --order reversed", corpus);
    expect_run_fails(work_dir, args, 2, "--order");
    snprintf(args, sizeof args, "train %s --layers 0", corpus);
    expect_run_fails(work_dir, args, 2, "--layers");
    snprintf(args, sizeof args, "train %s --arch card --layers 2", corpus);
    expect_run_fails(work_dir, args, 2, "--layers");
    snprintf(args, sizeof args, "train %s --arch foo", corpus);
    expect_run_fails(work_dir, args, 2, "--arch 'foo'");
    snprintf(args, sizeof args, "train %s --arch card --no-mlp", corpus);
    expect_run_fails(work_dir, args, 2, "--no-mlp");
    snprintf(args, sizeof args, "train %s --optimizer rmsprop", corpus);
    expect_run_fails(work_dir, args, 2, "--optimizer 'rmsprop'");
    snprintf(args, sizeof args, "train %s --lr-schedule linear", corpus);
    expect_run_fails(work_dir, args, 2, "--lr-schedule 'linear'");
    snprintf(args, sizeof args, "train %s --optimizer sgd --beta1 0.8", corpus);
    expect_run_fails(work_dir, args, 2, "--beta1 is for --optimizer adamw");
    snprintf(args, sizeof args, "train %s --arch card --weight-decay 0.1", corpus);
    expect_run_fails(work_dir, args, 2, "--weight-decay is for --optimizer adamw");
    snprintf(args, sizeof args, "train %s --beta2 1", corpus);
    expect_run_fails(work_dir, args, 2, "--beta2");
    snprintf(args, sizeof args, "train %s --grad-clip -1", corpus);
    expect_run_fails(work_dir, args, 2, "--grad-clip");
    expect_run_fails(work_dir, "train", 2, "FILE");
    expect_run_fails(work_dir, "sample --tokens 5", 2, "--model");
}
END_TEST

START_TEST(bad_files_are_runtime_errors_that_name_the_file) {
    char args[4096];
    snprintf(args, sizeof args, "train %s/missing.txt --out %s", work_dir, in_work("out"));
    expect_run_fails(work_dir, args, 1, "missing.txt");
    snprintf(args, sizeof args, "train %s --out %s", work_dir, in_work("out"));
    expect_run_fails(work_dir, args, 1, "directory");
    snprintf(args, sizeof args, "sample --model %s/nope.safetensors", work_dir);
    expect_run_fails(work_dir, args, 1, "nope.safetensors");
    // A text file is not a checkpoint.
    snprintf(args, sizeof args, "sample --model %s", in_work("corpus.txt"));
    expect_run_fails(work_dir, args, 1, "corpus.txt");
    // Too short for one window of context + 1.
    FILE *f = fopen(in_work("short.txt"), "w");
    fputs("tiny", f);
    fclose(f);
    snprintf(args, sizeof args, "train %s --context 16 --out %s", in_work("short.txt"), in_work("out"));
    expect_run_fails(work_dir, args, 1, "short.txt");
}
END_TEST

START_TEST(training_a_tiny_model_lowers_the_loss_and_the_model_samples_and_evaluates) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(args, sizeof args,
             "train %s --arch card --out %s --steps 300 --batch 8 --context 16 --embd 32 --heads 4 --lr 0.5 "
             "--eval-interval 100 --threads 2",
             corpus, in_work("run"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);

    char log[65536];
    read_text_file(in_work("run/log.csv"), log, sizeof log);
    ck_assert_ptr_nonnull(strstr(log, "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb,best_step,seconds,sample\n"));
    double first = log_field(log, 0, 1), last_val = log_field(log, 299, 2);
    double mean_last = 0;
    for (int i = 280; i < 300; i++) mean_last += log_field(log, i, 1) / 20;
    ck_assert_msg(isfinite(log_field(log, 0, 2)), "no validation loss at step 0");
    ck_assert_msg(isnan(log_field(log, 1, 2)), "validation loss at a step that is not an eval step");
    // The text has 27 distinct characters and a rigid rhythm: a model that
    // learns anything falls far below its starting loss.
    ck_assert_msg(mean_last < 0.5 * first, "loss fell only from %.3f to %.3f", first, mean_last);
    ck_assert_msg(last_val < 0.5 * first, "validation loss %.3f did not fall from %.3f", last_val, first);

    // Sampling: stdout is the prompt followed by exactly --tokens characters.
    snprintf(args, sizeof args, "sample --model %s --prompt 'the ' --tokens 40 --seed 3",
             in_work("run/model.safetensors"));
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "sample failed: %s", r->err);
    ck_assert_int_eq(strncmp(r->out, "the ", 4), 0);
    char first_sample[65536];
    strcpy(first_sample, r->out);
    r = run_tinygpt(work_dir, args);
    ck_assert_str_eq(r->out, first_sample);  // same seed, same text

    // A prompt character the model never saw is a clear error.
    snprintf(args, sizeof args, "sample --model %s --prompt 'Zebra'", in_work("run/model.safetensors"));
    expect_run_fails(work_dir, args, 2, "--prompt");

    // eval --json: loss close to the training loss on the same text.
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("run/model.safetensors"), corpus);
    r = run_tinygpt(work_dir, args);
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
             "--warmup 5 --out %s --threads 2 --tokenizer char --lr 1e-3",  // the default warmup, 100 steps, is longer than this run
             corpus, in_work("gpt"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train --arch gpt failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "arch=gpt layers=2") != NULL, "the model line does not say gpt, 2 layers: %s", r->err);
    char log[65536];
    read_text_file(in_work("gpt/log.csv"), log, sizeof log);
    double first = log_field(log, 0, 2), last = log_field(log, 59, 2);
    ck_assert_msg(isfinite(first) && isfinite(last) && last < first - 0.2,
                  "validation loss fell only from %.3f to %.3f", first, last);
    // The lr column is the schedule's (warmup 5 to 1e-3, cosine to 1e-4 at
    // step 60), and grad_norm the gradients' norm before clipping.
    ck_assert_double_eq_tol(log_field(log, 0, 3), 1e-3 * 1 / 6, 1e-9);
    ck_assert_double_eq_tol(log_field(log, 5, 3), 1e-3, 1e-9);
    ck_assert_double_eq_tol(log_field(log, 59, 3), 1e-4 + 0.5 * (1 + cos(M_PI * 54 / 55)) * 9e-4, 1e-9);
    for (int step = 0; step < 60; step++)
        ck_assert_msg(log_field(log, step, 6) > 0, "grad_norm of step %d is %g", step, log_field(log, step, 6));

    snprintf(args, sizeof args, "sample --model %s --prompt 'the ' --tokens 30 --seed 3", in_work("gpt/model.safetensors"));
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "sample of a gpt failed: %s", r->err);
    ck_assert_int_eq(strncmp(r->out, "the ", 4), 0);
    // UTF-8: every byte but the continuation bytes of '—' starts a
    // character. The prompt and 30 characters, and a newline after them
    // unless the last of them is one.
    int characters = 0;
    const char *last_char = NULL;  // the 34th character
    for (const char *p = r->out; *p; p++)
        if ((*p & 0xC0) != 0x80 && ++characters == 4 + 30) last_char = p;
    ck_assert_msg(last_char != NULL, "fewer than 34 characters: %s", r->out);
    ck_assert_int_eq(characters, 4 + 30 + (*last_char != '\n'));
    ck_assert_msg(r->out[strlen(r->out) - 1] == '\n', "no newline at the end: %s", r->out);
    static char cached[sizeof r->out];
    memcpy(cached, r->out, sizeof cached);
    strcat(args, " --no-cache");
    r = run_tinygpt(work_dir, args);
    ck_assert_str_eq(r->out, cached);  // the key/value cache of every block gives the same text

    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("gpt/model.safetensors"), corpus);
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "eval of a gpt failed: %s", r->err);
    double loss = NAN;
    ck_assert_int_eq(sscanf(r->out, "{\"loss\": %lf", &loss), 1);
    ck_assert_msg(fabs(loss - last) < 0.2, "eval loss %.3f, far from the last validation loss %.3f", loss, last);
}
END_TEST

// train's gpt defaults are make sweep's recipe, its bpe vocabulary a
// ceiling a small text lowers; nanoGPT's recipe, the defaults before, is
// NANOGPT_PARTS away; of a switch and its off flag the later one holds.
START_TEST(the_defaults_are_the_sweeps_recipe_and_the_old_ones_are_flags_away) {
    char args[4096];
    const char *tiny = "--steps 1 --embd 16 --heads 2 --context 8 --batch 4 --threads 1";
    snprintf(args, sizeof args, "train %s --out %s %s", in_work("corpus.txt"), in_work("new"), tiny);
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->err, "arch=gpt layers=3 norm=rmsnorm mlp=relu2 untied-head pos=rope qk-norm V=") &&
                      strstr(r->err, "(bpe tokenizer)"),
                  "%s", r->err);
    int vocab = 0;
    ck_assert_int_eq(sscanf(strstr(r->err, " V=") + 3, "%d", &vocab), 1);
    ck_assert_msg(vocab > 256 && vocab < 2048, "a small text's vocabulary of %d", vocab);
    snprintf(args, sizeof args, "train %s --out %s %s --layers 4 " NANOGPT_PARTS, in_work("corpus.txt"),
             in_work("old"), tiny);
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->err, "arch=gpt layers=4 V=") && strstr(r->err, "(char tokenizer)"), "%s", r->err);
    snprintf(args, sizeof args, "train %s --out %s %s --untied-head --tied-head --qk-norm", in_work("corpus.txt"),
             in_work("both"), tiny);
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->err, "pos=rope qk-norm V=") && !strstr(r->err, "untied-head"), "%s", r->err);
    snprintf(args, sizeof args, "train %s --out %s %s --arch card --no-qk-norm", in_work("corpus.txt"),
             in_work("card"), tiny);
    expect_run_fails(work_dir, args, 2, "--no-qk-norm is for --arch gpt");
}
END_TEST

START_TEST(train_creates_missing_parent_directories_of_out) {
    char args[4096];
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --context 8 --embd 8 --heads 2", in_work("corpus.txt"),
             in_work("runs/nested/deeper"));
    RunResult *r = run_tinygpt(work_dir, args);
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
    ck_assert_int_eq(run_tinygpt(work_dir, args)->status, 0);
    snprintf(args, sizeof args, "train %s --out %s --steps 3 --init %s", corpus, in_work("b"),
             in_work("a/model.safetensors"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train --init failed: %s", r->err);
    snprintf(args, sizeof args, "train %s --out %s --steps 3 --embd 32 --init %s", corpus, in_work("c"),
             in_work("a/model.safetensors"));
    expect_run_fails(work_dir, args, 2, "--embd");
}
END_TEST

START_TEST(init_takes_the_architecture_from_the_checkpoint_and_refuses_a_conflicting_one) {
    char args[4096];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --arch gpt --layers 2 --context 8 --embd 16 --heads 2",
             corpus, in_work("gpt"));
    ck_assert_int_eq(run_tinygpt(work_dir, args)->status, 0);
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --arch card --context 8 --embd 16 --heads 2", corpus,
             in_work("card"));
    ck_assert_int_eq(run_tinygpt(work_dir, args)->status, 0);
    // Without --arch, a gpt file trains on as a gpt of its own depth, with
    // gpt's defaults (--steps: the run stops after one step of 2000), and a
    // card file as card, with card's.
    snprintf(args, sizeof args, "train %s --out %s --stop-after 1 --init %s", corpus, in_work("b"),
             in_work("gpt/model.safetensors"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train --init of a gpt failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "arch=gpt layers=2") != NULL, "%s", r->err);
    ck_assert_msg(strstr(r->err, "stopped after 1 of 2000 steps") != NULL, "not gpt's default --steps: %s", r->err);
    snprintf(args, sizeof args, "train %s --out %s --stop-after 1 --init %s", corpus, in_work("c"),
             in_work("card/model.safetensors"));
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train --init of a card model failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "arch=card layers=1") != NULL, "%s", r->err);
    ck_assert_msg(strstr(r->err, "stopped after 1 of 7000 steps") != NULL, "not card's default --steps: %s", r->err);

    // A flag that disagrees with the file is an error naming both values.
    snprintf(args, sizeof args, "train %s --out %s --steps 2 --layers 3 --init %s", corpus, in_work("d"),
             in_work("gpt/model.safetensors"));
    expect_run_fails(work_dir, args, 2, "--layers 3 conflicts with the --init checkpoint, which was trained with --layers 2");
    snprintf(args, sizeof args, "train %s --out %s --steps 2 --arch card --init %s", corpus, in_work("d"),
             in_work("gpt/model.safetensors"));
    expect_run_fails(work_dir, args, 2, "--arch card conflicts with the --init checkpoint, which was trained with --arch gpt");
    snprintf(args, sizeof args, "train %s --out %s --steps 2 --layers 2 --init %s", corpus, in_work("d"),
             in_work("card/model.safetensors"));
    expect_run_fails(work_dir, args, 2, "--layers is for --arch gpt or gpt2 (card has exactly one block), and the checkpoint it starts from has --arch card");
}
END_TEST

START_TEST(the_same_seed_gives_the_same_losses_bit_for_bit) {
    char args[4096], log_a[65536], log_b[65536];
    char corpus[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "train %s --out %s --steps 40 --batch 4 --context 16 --embd 16 --heads 2 --seed 9",
                 corpus, in_work(i == 0 ? "s1" : "s2"));
        ck_assert_int_eq(run_tinygpt(work_dir, args)->status, 0);
    }
    read_text_file(in_work("s1/log.csv"), log_a, sizeof log_a);
    read_text_file(in_work("s2/log.csv"), log_b, sizeof log_b);
    for (int row = 0; row < 40; row++) ck_assert(log_field(log_a, row, 1) == log_field(log_b, row, 1));
}
END_TEST

// ---- sample's flags, on a small random model (no training) -----------------

static const char SAMPLE_CORPUS[] = "the quick brown fox jumps over the lazy dog\n";

// A random gpt over SAMPLE_CORPUS's characters, saved as work_dir/tiny.safetensors.
static void sample_setup(void) {
    setup();
    Tokenizer tok;
    Error err;
    ck_assert_msg(tokenizer_build(&tok, SAMPLE_CORPUS, strlen(SAMPLE_CORPUS), "corpus", &err), "%s", err.msg);
    const ModelConfig cfg = {.vocab_size = tok.vocab_size, .block_size = 8, .n_embd = 16, .n_head = 2,
                             .dropout = 0.0f, .arch = ARCH_GPT, .n_layer = 2};
    Model m;
    model_init(&m, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 5);
    model_init_weights(&m, &rng);
    ck_assert_msg(checkpoint_save(&m, &tok, 0, in_work("tiny.safetensors"), &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
}

// sample_text: stdout of `sample --model tiny.safetensors` with "flags", which must succeed.
static const char *sample_text(const char *flags) {
    static char out[8][4096];
    static int which;
    which = (which + 1) % 8;
    char args[4096];
    snprintf(args, sizeof args, "sample --model %s %s", in_work("tiny.safetensors"), flags);
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "'%s' exited %d: %s", args, r->status, r->err);
    size_t n = strlen(r->out);
    ck_assert_msg(n < sizeof out[which], "'%s' printed %zu bytes, more than the test keeps", args, n);
    memcpy(out[which], r->out, n + 1);
    return out[which];
}

START_TEST(top_p_one_samples_what_no_top_p_samples_and_a_small_p_samples_otherwise) {
    const char *plain = sample_text("--prompt 'the ' --tokens 60 --seed 5");
    ck_assert_str_eq(sample_text("--prompt 'the ' --tokens 60 --seed 5 --top-p 1"), plain);
    ck_assert_str_eq(sample_text("--prompt 'the ' --tokens 60 --seed 5 --top-p 0.3"),
                     sample_text("--prompt 'the ' --tokens 60 --seed 5 --top-p 0.3"));
    ck_assert_str_ne(sample_text("--prompt 'the ' --tokens 60 --seed 5 --top-p 0.3"), plain);
    char args[4096];
    const char *bad[] = {"0", "-0.5", "1.5", "nan"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "sample --model %s --top-p %s", in_work("tiny.safetensors"), bad[i]);
        expect_run_fails(work_dir, args, 2, "--top-p");
    }
}
END_TEST

// strip_final_newline: "text" without the newline sample ends its output
// with (which must be there), in place.
static char *strip_final_newline(char *text) {
    size_t n = strlen(text);
    ck_assert_msg(n > 0 && text[n - 1] == '\n', "the output does not end with a newline: '%s'", text);
    text[n - 1] = '\0';
    return text;
}

START_TEST(num_samples_prints_independent_samples_from_the_prompt_between_separator_lines) {
    static char three[4096], one[4096];
    snprintf(three, sizeof three, "%s", sample_text("--prompt 'the ' --tokens 20 --seed 8 --num-samples 3"));
    ck_assert_str_eq(sample_text("--prompt 'the ' --tokens 20 --seed 8 --num-samples 3"), three);  // same seed
    strip_final_newline(three);  // none of these samples ends in a newline of its own
    const char *samples[3];
    char *p = three;
    for (int i = 0; i < 3; i++) {
        samples[i] = p;
        char *sep = strstr(p, "\n---\n");
        ck_assert_msg((sep != NULL) == (i < 2), "sample %d: separator %s in: %s", i, sep ? "after the last" : "missing",
                      three);
        if (sep) *sep = '\0', p = sep + 5;
        ck_assert_msg(strncmp(samples[i], "the ", 4) == 0 && strlen(samples[i]) == 4 + 20, "sample %d: '%s'", i,
                      samples[i]);
    }
    // The first is what one sample with this seed gives; the others differ from it.
    snprintf(one, sizeof one, "%s", sample_text("--prompt 'the ' --tokens 20 --seed 8"));
    ck_assert_str_eq(samples[0], strip_final_newline(one));
    ck_assert_str_ne(samples[1], samples[0]);
    ck_assert_str_ne(samples[2], samples[1]);
    char args[4096];
    snprintf(args, sizeof args, "sample --model %s --num-samples 0", in_work("tiny.safetensors"));
    expect_run_fails(work_dir, args, 2, "--num-samples");
}
END_TEST

// Standard input is read only if it is text: a pipe or a terminal, never a
// device such as /dev/zero, and a pipe only up to --max-bytes, not until
// memory runs out.
START_TEST(standard_input_that_is_a_device_or_endless_is_refused) {
    char args[4096];
    snprintf(args, sizeof args, "-c \"%s tokenize --model %s < /dev/zero\"", tinygpt_binary(), in_work("tiny.safetensors"));
    expect_failure(run_binary("sh", work_dir, args), "tokenize < /dev/zero", 1, "standard input is a character device");
    snprintf(args, sizeof args, "-c \"%s sample --model %s --prompt-file - --tokens 3 < /dev/zero\"", tinygpt_binary(),
             in_work("tiny.safetensors"));
    expect_failure(run_binary("sh", work_dir, args), "sample --prompt-file - < /dev/zero", 1,
                   "standard input is a character device");
    snprintf(args, sizeof args, "-c \"yes the lazy dog | %s tokenize --model %s --max-bytes 100000\"", tinygpt_binary(),
             in_work("tiny.safetensors"));
    expect_failure(run_binary("sh", work_dir, args), "yes | tokenize", 1, "holds more than 100000 bytes (--max-bytes)");
    snprintf(args, sizeof args, "-c \"yes the lazy dog | head -c 99999 | %s tokenize --model %s --max-bytes 100000\"",
             tinygpt_binary(), in_work("tiny.safetensors"));
    RunResult *r = run_binary("sh", work_dir, args);
    ck_assert_msg(r->status == 0, "99999 bytes within --max-bytes 100000: %s", r->err);
}
END_TEST

// Whatever a command prints must reach standard output: a full device is
// an error (exit 1, one line), never a silent exit 0 having lost it.
START_TEST(output_that_cannot_be_written_is_an_error) {
    const char *commands[] = {"--help", "--version", "walkthrough", "train --help", "gradcheck", "tokenize --model %s the"};
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char command[512], args[4096];
        snprintf(command, sizeof command, commands[i], in_work("tiny.safetensors"));
        snprintf(args, sizeof args, "-c \"%s %s > /dev/full\"", tinygpt_binary(), command);
        expect_failure(run_binary("sh", work_dir, args), command, 1, "cannot write to standard output");
    }
}
END_TEST

START_TEST(the_prompt_can_come_from_a_file_or_from_stdin_through_a_pipe) {
    write_text_file(in_work("prompt.txt"), "the lazy ");
    const char *from_flag = sample_text("--prompt 'the lazy ' --tokens 30 --seed 2");
    char flags[2048];
    snprintf(flags, sizeof flags, "--prompt-file %s --tokens 30 --seed 2", in_work("prompt.txt"));
    ck_assert_str_eq(sample_text(flags), from_flag);
    // stdin: a pipe into tinygpt (run_binary's own stdin is /dev/null, so
    // the pipe is built inside a shell).
    char args[4096];
    snprintf(args, sizeof args, "-c \"printf 'the lazy ' | %s sample --model %s --prompt-file - --tokens 30 --seed 2\"",
             tinygpt_binary(), in_work("tiny.safetensors"));
    RunResult *r = run_binary("sh", work_dir, args);
    ck_assert_msg(r->status == 0, "stdin prompt failed: %s", r->err);
    ck_assert_str_eq(r->out, from_flag);
    // Not both; a missing file is named; a character outside the vocabulary names the file.
    snprintf(args, sizeof args, "sample --model %s --prompt the --prompt-file %s", in_work("tiny.safetensors"),
             in_work("prompt.txt"));
    expect_run_fails(work_dir, args, 2, "--prompt-file");
    snprintf(args, sizeof args, "sample --model %s --prompt-file %s", in_work("tiny.safetensors"), in_work("absent.txt"));
    expect_run_fails(work_dir, args, 1, "absent.txt");
    write_text_file(in_work("zebra.txt"), "Zebra");
    snprintf(args, sizeof args, "sample --model %s --prompt-file %s", in_work("tiny.safetensors"), in_work("zebra.txt"));
    expect_run_fails(work_dir, args, 2, "zebra.txt");
}
END_TEST

// The output ends with a newline, added only when the text does not end in
// one already; an empty output stays empty.
START_TEST(the_output_ends_with_one_newline_unless_the_text_ends_in_one) {
    // Greedy sampling of 21 tokens begins with the 20 of greedy sampling
    // of 20: so the text of 20 is known, and its newline can be told apart.
    static char longer[4096];
    snprintf(longer, sizeof longer, "%s", sample_text("--prompt 'the ' --tokens 21 --temperature 0"));
    const char *twenty = sample_text("--prompt 'the ' --tokens 20 --temperature 0");
    size_t n = 4 + 20;  // the prompt and 20 one-byte characters (SAMPLE_CORPUS is ASCII)
    ck_assert_msg(strlen(longer) >= n + 1 && strncmp(twenty, longer, n) == 0, "'%s' / '%s'", twenty, longer);
    ck_assert_msg(strlen(twenty) == n + (longer[n - 1] != '\n') && twenty[strlen(twenty) - 1] == '\n',
                  "20 tokens: '%s' (21 tokens: '%s')", twenty, longer);
    // The prompt alone: a newline after it, unless it ends in one.
    ck_assert_str_eq(sample_text("--prompt 'the dog' --tokens 0"), "the dog\n");
    write_text_file(in_work("line.txt"), "the dog\n");
    char flags[2048];
    snprintf(flags, sizeof flags, "--prompt-file %s --tokens 0", in_work("line.txt"));
    ck_assert_str_eq(sample_text(flags), "the dog\n");
    // Nothing at all: nothing, not a lone newline.
    ck_assert_str_eq(sample_text("--tokens 0"), "");
    // Whatever the text ends with, the output ends with exactly one more
    // newline than the text has: never two where the text has one.
    for (int seed = 1; seed <= 20; seed++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "--prompt 'the ' --tokens 6 --seed %d", seed);
        snprintf(b, sizeof b, "--prompt 'the ' --tokens 7 --seed %d", seed);
        static char six[256];
        snprintf(six, sizeof six, "%s", sample_text(a));
        const char *seven = sample_text(b);  // one draw per token: its first 10 characters are six's
        bool text_ends_line = seven[9] == '\n';
        ck_assert_msg(strncmp(six, seven, 10) == 0 && strlen(six) == 10u + !text_ends_line && six[strlen(six) - 1] == '\n',
                      "seed %d: '%s' / '%s'", seed, six, seven);
    }
}
END_TEST

// Writing to standard output fails: generation stops at once, exit 1, one
// line naming standard output. A closed pipe ends sample quickly: by
// SIGPIPE when it is the default, or, when SIGPIPE is ignored, by the
// EPIPE error the write returns: then exit 1 and one line, like any
// other failed write.
START_TEST(sample_stops_when_standard_output_cannot_be_written) {
    char args[4096];
    snprintf(args, sizeof args, "-c \"%s sample --model %s --tokens 100000 > /dev/full\"", tinygpt_binary(),
             in_work("tiny.safetensors"));
    double start = now_seconds();
    expect_failure(run_binary("sh", work_dir, args), "sample > /dev/full", 1,
                   "cannot write the sample to standard output: No space left on device");
    ck_assert_msg(now_seconds() - start < 20, "sample went on after its first failed write");
    // A pipe whose reader leaves: SIGPIPE (status 141 in the shell), quickly.
    snprintf(args, sizeof args, "-c 'timeout -s KILL 20 %s sample --model %s --tokens 100000000 | head -c 10'",
             tinygpt_binary(), in_work("tiny.safetensors"));
    RunResult *r = run_binary("bash", work_dir, args);
    ck_assert_msg(r->status == 0 && strlen(r->out) == 10, "exit %d, %zu bytes: %s", r->status, strlen(r->out), r->err);
    // SIGPIPE ignored: EPIPE, one line, exit 1.
    snprintf(args, sizeof args,
             "-c 'trap \"\" PIPE; set -o pipefail; timeout -s KILL 20 %s sample --model %s --tokens 100000000 | head -c 10 > /dev/null'",
             tinygpt_binary(), in_work("tiny.safetensors"));
    expect_failure(run_binary("bash", work_dir, args), "sample | head, SIGPIPE ignored", 1,
                   "cannot write the sample to standard output: Broken pipe");
}
END_TEST

// ---- Hostile files: what used to hang, or be accepted and give wrong answers ----

// run_bounded: run tinygpt with "args" under `timeout`, so a command that
// blocks (on a FIFO, say) is killed (status 128 + 9) and the test fails
// instead of hanging.
static RunResult *run_bounded(const char *args) {
    char binary[1024];
    snprintf(binary, sizeof binary, "timeout -s KILL 60 %s", tinygpt_binary());
    return run_binary(binary, work_dir, args);
}

// assert_bounded_fails: expect_run_fails with status 1, for run_bounded.
static void assert_bounded_fails(const char *args, const char *must_mention) {
    expect_failure(run_bounded(args), args, 1, must_mention);
}

// train_tiny: a tiny card model trained for "steps" steps (0: as initialised) into work_dir/"name".
static void train_tiny(const char *name, int steps) {
    char args[4096];
    snprintf(args, sizeof args, "train %s --arch card --out %s --steps %d --batch 2 --context 8 --embd 8 --heads 2",
             in_work("corpus.txt"), in_work(name), steps);
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);
}

START_TEST(a_fifo_or_a_device_is_refused_at_once_as_text_model_or_resume_data) {
    ck_assert_int_eq(mkfifo(in_work("fifo"), 0600), 0);
    const char *fifo_says = "is a named pipe (FIFO), not a regular file";
    char args[4096];
    snprintf(args, sizeof args, "train %s --out %s", in_work("fifo"), in_work("out"));
    assert_bounded_fails(args, fifo_says);
    snprintf(args, sizeof args, "train /dev/zero --out %s", in_work("out"));
    assert_bounded_fails(args, "'/dev/zero' is a character device, not a regular file");
    snprintf(args, sizeof args, "eval --model %s %s", in_work("fifo"), in_work("corpus.txt"));
    assert_bounded_fails(args, fifo_says);
    snprintf(args, sizeof args, "sample --model %s", in_work("fifo"));
    assert_bounded_fails(args, fifo_says);

    // --resume reads the text the run was trained on again: replace it by a FIFO.
    write_text_file(in_work("text.txt"), "");
    char copy[4096];
    snprintf(copy, sizeof copy, "cp %s %s", in_work("corpus.txt"), in_work("text.txt"));
    ck_assert_int_eq(system(copy), 0);
    snprintf(args, sizeof args, "train %s --arch card --out %s --steps 4 --stop-after 2 --batch 2 --context 8 --embd 8 --heads 2",
             in_work("text.txt"), in_work("run"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);
    ck_assert_int_eq(unlink(in_work("text.txt")), 0);
    ck_assert_int_eq(mkfifo(in_work("text.txt"), 0600), 0);
    snprintf(args, sizeof args, "train --resume %s", in_work("run"));
    assert_bounded_fails(args, fifo_says);
}
END_TEST

START_TEST(eval_says_a_binary_file_looks_binary_as_train_does) {
    train_tiny("m", 0);
    // An executable's first bytes: 0x7F "ELF" are valid UTF-8 (and 0x7F is
    // in no vocabulary), and the NUL that marks binary data comes after.
    const char elf[] = "\x7F" "ELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00";
    FILE *f = fopen(in_work("program"), "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(elf, 1, sizeof elf - 1, f);
    fclose(f);
    char args[4096];
    snprintf(args, sizeof args, "eval --model %s %s", in_work("m/model.safetensors"), in_work("program"));
    expect_run_fails(work_dir, args, 1, "program' has a NUL byte at byte 7, so it looks like binary data");
    snprintf(args, sizeof args, "train %s --out %s", in_work("program"), in_work("t"));
    expect_run_fails(work_dir, args, 1, "program' has a NUL byte at byte 7, so it looks like binary data");
}
END_TEST

START_TEST(a_missing_file_says_there_is_no_such_file_and_what_to_do) {
    const char *says = "no such file; check the name and the directory it is in";
    char args[4096];
    snprintf(args, sizeof args, "train %s --out %s", in_work("missing.txt"), in_work("out"));
    expect_run_fails(work_dir, args, 1, says);
    snprintf(args, sizeof args, "eval --model %s %s", in_work("missing.safetensors"), in_work("corpus.txt"));
    expect_run_fails(work_dir, args, 1, says);
    snprintf(args, sizeof args, "sample --model %s", in_work("missing.safetensors"));
    expect_run_fails(work_dir, args, 1, says);
    train_tiny("m", 0);
    snprintf(args, sizeof args, "eval --model %s %s", in_work("m/model.safetensors"), in_work("missing.txt"));
    expect_run_fails(work_dir, args, 1, says);
}
END_TEST

// set_every_weight: the checkpoint "from" with every weight set to
// "value", saved as "to".
static void set_every_weight(const char *from, const char *to, float value) {
    Model m;
    Tokenizer tok;
    Error err = {{0}};
    ck_assert_msg(checkpoint_load(from, &m, &tok, 1, false, NULL, &err), "%s", err.msg);
    for (size_t i = 0; i < m.param_table.total; i++) m.params_memory[i] = value;
    ck_assert_msg(checkpoint_save(&m, &tok, 0, to, &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
}

START_TEST(broken_weights_fail_eval_and_train_init_without_blaming_lr) {
    train_tiny("m", 0);
    char args[4096];
    // Beyond the loader's bound: eval and train --init fail at load, naming the tensor.
    set_every_weight(in_work("m/model.safetensors"), in_work("absurd.safetensors"), 1e30f);
    snprintf(args, sizeof args, "eval --model %s %s", in_work("absurd.safetensors"), in_work("corpus.txt"));
    expect_run_fails(work_dir, args, 1, "tensor 'tok_emb.weight' holds 1e+30 at element 0, beyond the 1e+06");
    snprintf(args, sizeof args, "train %s --init %s --out %s", in_work("corpus.txt"), in_work("absurd.safetensors"),
             in_work("t1"));
    expect_run_fails(work_dir, args, 1, "tensor 'tok_emb.weight' holds 1e+30 at element 0, beyond the 1e+06");
    ck_assert_msg(!strstr(run_tinygpt(work_dir, args)->err, "lower --lr"), "%s", run_tinygpt(work_dir, args)->err);

    // Within the bound, but a gpt without LayerNorm whose every weight is
    // 1e6 overflows float within a few blocks: eval must not print a NaN
    // loss with status 0, and training from it must not blame --lr.
    snprintf(args, sizeof args, "train %s --out %s --steps 0 --no-layernorm --layers 4 --batch 2 --context 8 --embd 8 --heads 2",
             in_work("corpus.txt"), in_work("g"));
    ck_assert_int_eq(run_tinygpt(work_dir, args)->status, 0);
    set_every_weight(in_work("g/model.safetensors"), in_work("overflow.safetensors"), MODEL_MAX_WEIGHT);
    snprintf(args, sizeof args, "eval --model %s %s", in_work("overflow.safetensors"), in_work("corpus.txt"));
    expect_run_fails(work_dir, args, 1, "overflow float arithmetic, so it cannot be evaluated");
    snprintf(args, sizeof args, "train %s --init %s --out %s --batch 2", in_work("corpus.txt"),
             in_work("overflow.safetensors"), in_work("t2"));
    RunResult *r = run_tinygpt(work_dir, args);  // stderr starts with the model's summary: the message is its last line
    ck_assert_msg(r->status == 1 && strstr(r->err, "tinygpt: training cannot start: at step 0, before any update") &&
                      strstr(r->err, "(--lr is not the cause)") && !strstr(r->err, "lower --lr"),
                  "exit %d: %s", r->status, r->err);
}
END_TEST

// The kernel names a process after the file it was started from. tinygpt
// starts itself again at once (main.c, for OpenMP's spin setting), and
// must come back as "tinygpt", not "exe", or ps, top and pgrep lose it.
START_TEST(the_process_is_still_called_tinygpt_after_it_restarts_itself) {
    char cmd[8192], pid_path[1024];
    snprintf(pid_path, sizeof pid_path, "%s", in_work("pid"));
    // A run long enough to look at (killed below); without GOMP_SPINCOUNT
    // and OMP_WAIT_POLICY, so that it does restart.
    snprintf(cmd, sizeof cmd,
             "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY %s train %s --arch card --out %s --steps 100000000 --batch 1 "
             "--context 8 --embd 8 --heads 2 --threads 1 >/dev/null 2>&1 & echo $! > %s",
             tinygpt_binary(), in_work("corpus.txt"), in_work("long"), pid_path);
    ck_assert_int_eq(system(cmd), 0);
    char text[64];
    read_text_file(pid_path, text, sizeof text);
    pid_t pid = (pid_t)atol(text);
    ck_assert_int_gt(pid, 0);

    // The restarted process has GOMP_SPINCOUNT in its initial environment
    // (/proc/PID/environ); the first one never does. Wait for that, so the
    // name read below is the restarted process's.
    char environ_path[64], comm_path[64], comm[64] = "";
    snprintf(environ_path, sizeof environ_path, "/proc/%d/environ", (int)pid);
    snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)pid);
    bool restarted = false;
    for (int tries = 0; tries < 1000 && !restarted; tries++) {
        static char env[1 << 16];
        FILE *f = fopen(environ_path, "rb");
        size_t n = f ? fread(env, 1, sizeof env - 1, f) : 0;
        if (f) fclose(f);
        for (size_t at = 0; at < n && !restarted; at += strlen(env + at) + 1) {
            env[n] = '\0';
            restarted = strcmp(env + at, "GOMP_SPINCOUNT=1000") == 0;
        }
        if (restarted) read_text_file(comm_path, comm, sizeof comm);
        else usleep(10000);
    }
    kill(pid, SIGKILL);
    ck_assert_msg(restarted, "process %d did not restart itself with GOMP_SPINCOUNT=1000 within 10 s", (int)pid);
    // comm is the file's name, cut to 15 characters, and a newline.
    char want[32];
    snprintf(want, sizeof want, "%.15s\n", path_base(tinygpt_binary()));
    ck_assert_str_eq(comm, want);
}
END_TEST

// ---- eval: --split val, JSON that is always JSON, refusals -------------------------

// Eval's results as its --json prints them, read by the project's strict
// JSON reader (RFC 8259: no NaN, no Infinity, nothing after the object).
typedef struct {
    double loss, perplexity, bits_per_byte, val_fraction;  // perplexity NAN for null; val_fraction NAN if absent
    long tokens;
    char split[8];
} EvalJson;

static EvalJson eval_json(const char *args) {
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "'%s' exited %d: %s", args, r->status, r->err);
    JsonValue *root;
    Error err;
    ck_assert_msg(json_parse(r->out, strlen(r->out), &root, &err), "'%s' printed invalid JSON (%s): %s", args, err.msg,
                  r->out);
    ck_assert_msg(root->type == JSON_OBJECT && r->out[strlen(r->out) - 1] == '\n', "%s", r->out);
    EvalJson e = {.val_fraction = NAN};
    const char *numbers[4] = {"loss", "perplexity", "bits_per_byte", "tokens"};
    double *into[4] = {&e.loss, &e.perplexity, &e.bits_per_byte, NULL};
    for (int i = 0; i < 4; i++) {
        const JsonValue *v = json_get(root, numbers[i]);
        ck_assert_msg(v != NULL, "no \"%s\" in %s", numbers[i], r->out);
        if (i == 1 && v->type == JSON_NULL) {
            e.perplexity = NAN;
            continue;
        }
        ck_assert_msg(v->type == JSON_NUMBER, "\"%s\" is not a number in %s", numbers[i], r->out);
        if (into[i]) *into[i] = v->number;
        else e.tokens = (long)v->number;
    }
    const JsonValue *split = json_get(root, "split"), *fraction = json_get(root, "val_fraction");
    ck_assert_msg(split && split->type == JSON_STRING && split->string_len < sizeof e.split, "%s", r->out);
    memcpy(e.split, split->string, split->string_len + 1);
    if (fraction) {
        ck_assert_msg(fraction->type == JSON_NUMBER, "%s", r->out);
        e.val_fraction = fraction->number;
    }
    json_free(root);
    return e;
}

// write_tail: the last floor(n_chars * fraction) characters of "from" into
// "to": the validation split train cuts.
static void write_tail(const char *from, double fraction, const char *to) {
    size_t len;
    char *text = slurp(from, &len);
    size_t n_chars = utf8_count(text, len), n_val = (size_t)floor((double)n_chars * fraction);
    size_t start = utf8_prefix(text, len, n_chars - n_val);
    write_bytes(to, text + start, len - start);
    free(text);
}

// A tiny gpt of "flags" trained for 20 steps on corpus.txt into work_dir/"name".
static void train_eval_model(const char *name, const char *flags) {
    char args[4096];
    snprintf(args, sizeof args,
             "train %s --out %s --steps 20 --layers 1 --embd 8 --heads 2 --context 8 --batch 4 --warmup 2 "
             "--eval-interval 10 --threads 1 --tokenizer char %s",
             in_work("corpus.txt"), in_work(name), flags);
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "'%s' failed: %s", args, r->err);
}

static void assert_same_result(EvalJson a, EvalJson b, const char *what) {
    ck_assert_msg(a.loss == b.loss && a.tokens == b.tokens && a.bits_per_byte == b.bits_per_byte,
                  "%s: loss %.6f / %.6f, tokens %ld / %ld, bits per byte %.6f / %.6f", what, a.loss, b.loss, a.tokens,
                  b.tokens, a.bits_per_byte, b.bits_per_byte);
}

// Loop test: _i = 0 a char model, _i = 1 a bpe model (which encodes the
// split on its own, as train does).
START_TEST(eval_split_val_scores_the_split_train_held_out_and_nothing_else) {
    const char *kind = _i == 0 ? "char" : "bpe";
    train_eval_model("m", _i == 0 ? "" : "--tokenizer bpe --vocab-size 270");
    write_tail(in_work("corpus.txt"), 0.1, in_work("tail.txt"));
    char args[4096];
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("m/model.safetensors"), in_work("tail.txt"));
    EvalJson tail = eval_json(args);
    ck_assert_str_eq(tail.split, "all");
    ck_assert_msg(isnan(tail.val_fraction), "val_fraction with --split all");
    snprintf(args, sizeof args, "eval --model %s %s --json --split val", in_work("m/model.safetensors"),
             in_work("corpus.txt"));
    EvalJson val = eval_json(args);
    ck_assert_str_eq(val.split, "val");
    ck_assert_double_eq(val.val_fraction, 0.1);  // from the checkpoint
    assert_same_result(val, tail, kind);
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("m/model.safetensors"), in_work("corpus.txt"));
    EvalJson all = eval_json(args);
    ck_assert_msg(all.tokens > 5 * val.tokens, "%s: --split all scored %ld tokens, val %ld", kind, all.tokens,
                  val.tokens);
    // The plain line says what it scored.
    snprintf(args, sizeof args, "eval --model %s %s --split val", in_work("m/model.safetensors"), in_work("corpus.txt"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0 && r->err[0] == '\0', "%s: exit %d: %s", kind, r->status, r->err);
    ck_assert_msg(strstr(r->out, "of the validation split (the last ") && strstr(r->out, "characters, --val-fraction 0.1)\n"),
                  "%s: %s", kind, r->out);
}
END_TEST

// "-" names standard input, as Unix tools do: train and eval read the text
// from a pipe as from the file, run.json keeps "-", and a resumed run
// reads its text from standard input again (and still checks it is the
// run's). run_binary's own stdin is /dev/null, so each pipe is built in sh.
START_TEST(train_and_eval_read_the_text_from_standard_input_given_as_a_dash) {
    const char *flags = "--layers 1 --embd 8 --heads 2 --context 8 --batch 4 --warmup 2 --eval-interval 10 --threads 1 "
                        "--tokenizer char";
    char args[3 * 4096];  // room for the binary's absolute path and the flags
    snprintf(args, sizeof args, "train %s --out %s --steps 12 %s", in_work("corpus.txt"), in_work("file"), flags);
    ck_assert_msg(run_tinygpt(work_dir, args)->status == 0, "%s", args);
    // A file named "-" where it runs is not what "-" means.
    write_text_file(in_work("-"), "not the text\n");
    char binary[4096];
    ck_assert_msg(realpath(tinygpt_binary(), binary) != NULL, "%s", tinygpt_binary());
    snprintf(args, sizeof args, "-c \"cd %s && cat corpus.txt | %s train - --out pipe --steps 12 %s\"", work_dir,
             binary, flags);
    RunResult *r = run_binary("sh", work_dir, args);
    ck_assert_msg(r->status == 0, "train - failed: %s", r->err);
    char run_json[512];
    read_text_file(in_work("pipe/run.json"), run_json, sizeof run_json);
    ck_assert_msg(strstr(run_json, "\"data\":\"-\""), "run.json: %s", run_json);
    // The same weights: the same loss on the file, to the bit.
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("file/model.safetensors"), in_work("corpus.txt"));
    EvalJson from_file = eval_json(args);
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("pipe/model.safetensors"), in_work("corpus.txt"));
    assert_same_result(eval_json(args), from_file, "trained from a pipe");
    // eval - reads the text from a pipe: the same line as from the file.
    snprintf(args, sizeof args, "eval --model %s %s --split val", in_work("file/model.safetensors"), in_work("corpus.txt"));
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    char *file_line = strdup(r->out);
    snprintf(args, sizeof args, "-c \"cat %s | %s eval - --model %s --split val\"", in_work("corpus.txt"),
             tinygpt_binary(), in_work("file/model.safetensors"));
    r = run_binary("sh", work_dir, args);
    ck_assert_msg(r->status == 0, "eval - failed: %s", r->err);
    ck_assert_str_eq(r->out, file_line);
    free(file_line);
    // Resumed, each from where its text comes from: the same model again.
    snprintf(args, sizeof args, "train --resume %s --steps 16", in_work("file"));
    ck_assert_msg(run_tinygpt(work_dir, args)->status == 0, "%s", args);
    snprintf(args, sizeof args, "-c \"cat %s | %s train --resume %s --steps 16\"", in_work("corpus.txt"),
             tinygpt_binary(), in_work("pipe"));
    r = run_binary("sh", work_dir, args);
    ck_assert_msg(r->status == 0, "train --resume from a pipe failed: %s", r->err);
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("file/model.safetensors"), in_work("corpus.txt"));
    from_file = eval_json(args);
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("pipe/model.safetensors"), in_work("corpus.txt"));
    assert_same_result(eval_json(args), from_file, "resumed from a pipe");
    // Another text on standard input is refused by the name it came by;
    // nothing, or a device, is no text.
    snprintf(args, sizeof args, "-c \"head -c 300 %s | %s train --resume %s --steps 20\"", in_work("corpus.txt"),
             tinygpt_binary(), in_work("pipe"));
    expect_failure(run_binary("sh", work_dir, args), "train --resume from another text", 1,
                   "'standard input' is not the text this run was trained on");
    snprintf(args, sizeof args, "-c \"printf '' | %s train - --out %s %s\"", tinygpt_binary(), in_work("empty"), flags);
    expect_failure(run_binary("sh", work_dir, args), "train - from an empty pipe", 1, "'standard input' is empty");
    snprintf(args, sizeof args, "-c \"%s eval - --model %s < /dev/zero\"", tinygpt_binary(),
             in_work("file/model.safetensors"));
    expect_failure(run_binary("sh", work_dir, args), "eval - < /dev/zero", 1, "standard input is a character device");
    // More than --max-bytes is refused (an endless pipe ends there), as by sample and tokenize.
    snprintf(args, sizeof args, "-c \"cat %s | %s train - --out %s --max-bytes 1000 %s\"", in_work("corpus.txt"),
             tinygpt_binary(), in_work("big"), flags);
    expect_failure(run_binary("sh", work_dir, args), "train - --max-bytes 1000", 1,
                   "standard input holds more than 1000 bytes (--max-bytes)");
    snprintf(args, sizeof args, "-c \"yes the lazy dog | %s eval - --model %s --max-bytes 1000\"", tinygpt_binary(),
             in_work("file/model.safetensors"));
    expect_failure(run_binary("sh", work_dir, args), "yes | eval - --max-bytes 1000", 1,
                   "standard input holds more than 1000 bytes (--max-bytes)");
}
END_TEST

// same_output: "command" run with "--model PATH" for each of two paths
// prints the same, and succeeds.
static void same_output(const char *command, const char *model_a, const char *model_b) {
    char args[4096];
    snprintf(args, sizeof args, command, model_a);
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "'%s' exited %d: %s", args, r->status, r->err);
    char *first = strdup(r->out);
    snprintf(args, sizeof args, command, model_b);
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "'%s' exited %d: %s", args, r->status, r->err);
    ck_assert_msg(strcmp(first, r->out) == 0, "'%s' printed\n%s\nwhere the file gave\n%s", args, r->out, first);
    free(first);
}

// A run directory given as --model stands for its model.safetensors in
// every command that takes one, and as train's --init; a directory that
// is neither a run nor a Hugging Face GPT-2 directory is refused, saying
// what it lacks.
START_TEST(a_run_directory_given_as_model_is_its_model_safetensors) {
    train_eval_model("m", "");
    const char *dir = in_work("m"), *file = in_work("m/model.safetensors");
    char eval[512];
    snprintf(eval, sizeof eval, "eval --model %%s %s --split val", in_work("corpus.txt"));
    same_output(eval, file, dir);
    same_output("sample --model %s --prompt 'the ' --tokens 20 --seed 3", file, dir);
    same_output("tokenize --model %s 'the cat sat'", file, dir);
    // attention draws into the checkpoint's directory: the run's own.
    char args[4096];
    snprintf(args, sizeof args, "attention --model %s --prompt 'the cat'", dir);
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "%s: %s", args, r->err);
    struct stat info;
    ck_assert_msg(stat(in_work("m/attention_layer1.png"), &info) == 0, "no m/attention_layer1.png: %s", r->err);
    // export reads it too (and refuses this char model for its tokenizer, naming the file).
    snprintf(args, sizeof args, "export --model %s --out %s", dir, in_work("exported"));
    expect_run_fails(work_dir, args, 1, "cannot export '");
    ck_assert_msg(strstr(run_tinygpt(work_dir, args)->err, "m/model.safetensors"), "export did not read the run's model");
    // train --init DIR starts from the run's weights: at step 0, its model.
    snprintf(args, sizeof args, "train %s --init %s --out %s --steps 0 --threads 1", in_work("corpus.txt"), dir,
             in_work("again"));
    ck_assert_msg(run_tinygpt(work_dir, args)->status == 0, "%s", args);
    same_output(eval, file, in_work("again"));
    ck_assert_int_eq(mkdir(in_work("empty"), 0700), 0);
    snprintf(args, sizeof args, "sample --model %s", in_work("empty"));
    expect_run_fails(work_dir, args, 1, "neither a tinygpt run (no model.safetensors) nor a Hugging Face GPT-2 directory");
    snprintf(args, sizeof args, "train %s --init %s --out %s", in_work("corpus.txt"), in_work("empty"), in_work("none"));
    expect_run_fails(work_dir, args, 1, "neither a tinygpt run (no model.safetensors) nor a Hugging Face GPT-2 directory");
}
END_TEST

START_TEST(eval_split_val_takes_a_given_fraction_or_else_trains_default_and_says_so) {
    train_eval_model("m", "");
    char args[4096];
    // A given fraction wins over the run's, with a note.
    write_tail(in_work("corpus.txt"), 0.25, in_work("tail25.txt"));
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("m/model.safetensors"), in_work("tail25.txt"));
    EvalJson tail25 = eval_json(args);
    snprintf(args, sizeof args, "eval --model %s %s --json --split val --val-fraction 0.25",
             in_work("m/model.safetensors"), in_work("corpus.txt"));
    assert_same_result(eval_json(args), tail25, "--val-fraction 0.25");
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(strstr(r->err, "trained with --val-fraction 0.1; scoring the last 25% of the characters instead"),
                  "%s", r->err);
    // A checkpoint that does not record its run (saved by checkpoint_save,
    // as sample's tests do): 0.1, train's default, with a note.
    Model m;
    Tokenizer tok;
    Error err;
    ck_assert_msg(checkpoint_load(in_work("m/model.safetensors"), &m, &tok, 1, false, NULL, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_save(&m, &tok, 0, in_work("bare.safetensors"), &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
    write_tail(in_work("corpus.txt"), 0.1, in_work("tail10.txt"));
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("bare.safetensors"), in_work("tail10.txt"));
    EvalJson tail10 = eval_json(args);
    snprintf(args, sizeof args, "eval --model %s %s --json --split val", in_work("bare.safetensors"),
             in_work("corpus.txt"));
    assert_same_result(eval_json(args), tail10, "a checkpoint without val_fraction");
    r = run_tinygpt(work_dir, args);
    ck_assert_msg(strstr(r->err, "does not record its run's --val-fraction; scoring the last 10% of the characters") &&
                      strstr(r->err, "(--val-fraction 0.1, train's default)"),
                  "%s", r->err);
    // A run without validation has no split to score, unless one is given.
    train_eval_model("noval", "--val-fraction 0");
    snprintf(args, sizeof args, "eval --model %s %s --split val", in_work("noval/model.safetensors"),
             in_work("corpus.txt"));
    expect_run_fails(work_dir, args, 1, "was trained with --val-fraction 0: its run had no validation split; give --val-fraction F");
    strcat(args, " --val-fraction 0.1 --json");
    EvalJson given = eval_json(args);
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("noval/model.safetensors"), in_work("tail10.txt"));
    assert_same_result(given, eval_json(args), "--val-fraction 0.1 for a run without validation");
    // A split shorter than one window.
    write_text_file(in_work("short.txt"), "the cat sat on the mat. the sea is wide and deep.\n");  // 51 characters
    snprintf(args, sizeof args, "eval --model %s %s --split val", in_work("m/model.safetensors"), in_work("short.txt"));
    expect_run_fails(work_dir, args, 1, "the validation split of");
    ck_assert_msg(strstr(run_tinygpt(work_dir, args)->err, "(its last 5 characters, --val-fraction 0.1) has 5 tokens, fewer than one window of 8 + 1"),
                  "%s", run_tinygpt(work_dir, args)->err);
    // Usage errors.
    const char *model = in_work("m/model.safetensors"), *corpus = in_work("corpus.txt");
    snprintf(args, sizeof args, "eval --model %s %s --val-fraction 0.2", model, corpus);
    expect_run_fails(work_dir, args, 2, "--val-fraction is for --split val");
    snprintf(args, sizeof args, "eval --model %s %s --split val --val-fraction 0", model, corpus);
    expect_run_fails(work_dir, args, 2, "--val-fraction 0 is out of range (0, 0.9]");
    snprintf(args, sizeof args, "eval --model %s %s --split val --val-fraction 0.95", model, corpus);
    expect_run_fails(work_dir, args, 2, "--val-fraction");
    snprintf(args, sizeof args, "eval --model %s %s --split test", model, corpus);
    expect_run_fails(work_dir, args, 2, "--split 'test' is not one of: all, val");
}
END_TEST

// A finite loss above ln(DBL_MAX) has no perplexity a double holds: JSON
// says null, never inf (not JSON), and the text says so; a loss that is
// not finite and a character outside the vocabulary are errors, with
// nothing on stdout.
START_TEST(eval_json_is_valid_json_and_a_loss_it_cannot_measure_is_an_error) {
    train_tiny("m", 0);  // card: a head with a bias
    Model m;
    Tokenizer tok;
    Error err;
    ck_assert_msg(checkpoint_load(in_work("m/model.safetensors"), &m, &tok, 1, false, NULL, &err), "%s", err.msg);
    // Every weight 0 but token 0's head bias, 1000: every other target costs
    // about 1000 nats.
    for (size_t i = 0; i < m.param_table.total; i++) m.params_memory[i] = 0.0f;
    m.params_memory[table_find(&m.param_table, "head.bias")->offset] = 1000.0f;
    ck_assert_msg(checkpoint_save(&m, &tok, 0, in_work("huge.safetensors"), &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
    char args[4096];
    snprintf(args, sizeof args, "eval --model %s %s --json", in_work("huge.safetensors"), in_work("corpus.txt"));
    EvalJson e = eval_json(args);
    ck_assert_msg(e.loss > 710 && e.loss < 1000 && isnan(e.perplexity), "loss %g, perplexity %g", e.loss, e.perplexity);
    ck_assert_msg(isfinite(e.bits_per_byte) && e.bits_per_byte > 0, "%g", e.bits_per_byte);
    snprintf(args, sizeof args, "eval --model %s %s", in_work("huge.safetensors"), in_work("corpus.txt"));
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0 && strstr(r->out, "| perplexity above 1.8e308 |") && !strstr(r->out, "inf"), "%s",
                  r->out);
    // Python's json module agrees (parse_constant refuses NaN and Infinity).
    snprintf(args, sizeof args,
             "-c \"%s eval --model %s %s --json | python3 -c 'import json, sys; "
             "json.loads(sys.stdin.read(), parse_constant=lambda c: sys.exit(\\\"not JSON: \\\" + c))'\"",
             tinygpt_binary(), in_work("huge.safetensors"), in_work("corpus.txt"));
    r = run_binary("sh", work_dir, args);
    ck_assert_msg(r->status == 0, "python3's json: %s", r->err);

    // A character the char model does not know: exit 1, naming the file and the fix.
    write_text_file(in_work("zebra.txt"), "the cat sat on the mat.\nZebras sat on the mat.\nthe cat sat on the mat.\n");
    const char *splits[2] = {"", " --split val"};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "eval --model %s %s --json%s", in_work("m/model.safetensors"), in_work("zebra.txt"),
                 splits[i]);
        r = run_tinygpt(work_dir, args);
        expect_failure(r, args, 1, "zebra.txt' has the character 'Z' (U+005A) at byte 24, which is not in the model's vocabulary; remove it, or train a new model on this text");
        ck_assert_msg(r->out[0] == '\0', "printed %s", r->out);
    }
}
END_TEST

// A write to standard output that fails stops the command with exit 1 and
// one line naming standard output: eval's result, plain or JSON, and
// attention's matrices (sample's are in the sample tests).
START_TEST(eval_and_attention_fail_when_standard_output_cannot_be_written) {
    train_tiny("m", 0);
    const struct {
        const char *command, *says;
    } cases[] = {
        {"eval --model %s %s", "cannot write the result to standard output: No space left on device"},
        {"eval --model %s %s --json", "cannot write the result to standard output: No space left on device"},
        {"attention --model %s --prompt 'the cat' --out %s/maps",
         "cannot write the attention weights to standard output: No space left on device"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char command[2048], args[4096];
        snprintf(command, sizeof command, cases[i].command, in_work("m/model.safetensors"),
                 i < 2 ? in_work("corpus.txt") : work_dir);
        snprintf(args, sizeof args, "-c \"%s %s > /dev/full\"", tinygpt_binary(), command);
        expect_failure(run_binary("sh", work_dir, args), command, 1, cases[i].says);
    }
}
END_TEST

Suite *cli_suite(void) {
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TRAIN_TIMEOUT_SECONDS);
    tcase_add_test(tc, help_lists_the_commands_and_exits_zero);
    tcase_add_test(tc, version_is_printed_by_tinygpt_and_by_every_command_with_status_zero);
    tcase_add_test(tc, bad_flags_are_usage_errors_that_name_the_flag);
    tcase_add_test(tc, bad_files_are_runtime_errors_that_name_the_file);
    tcase_add_test(tc, training_a_tiny_model_lowers_the_loss_and_the_model_samples_and_evaluates);
    tcase_add_test(tc, a_tiny_gpt_trains_from_the_command_line_and_samples_and_evaluates);
    tcase_add_test(tc, the_defaults_are_the_sweeps_recipe_and_the_old_ones_are_flags_away);
    tcase_add_test(tc, train_creates_missing_parent_directories_of_out);
    tcase_add_test(tc, init_takes_sizes_from_the_checkpoint_and_refuses_conflicting_ones);
    tcase_add_test(tc, init_takes_the_architecture_from_the_checkpoint_and_refuses_a_conflicting_one);
    tcase_add_test(tc, the_same_seed_gives_the_same_losses_bit_for_bit);
    tcase_add_test(tc, a_fifo_or_a_device_is_refused_at_once_as_text_model_or_resume_data);
    tcase_add_test(tc, eval_says_a_binary_file_looks_binary_as_train_does);
    tcase_add_test(tc, a_missing_file_says_there_is_no_such_file_and_what_to_do);
    tcase_add_test(tc, broken_weights_fail_eval_and_train_init_without_blaming_lr);
    tcase_add_test(tc, the_process_is_still_called_tinygpt_after_it_restarts_itself);
    suite_add_tcase(s, tc);
    TCase *eval = tcase_create("eval");
    tcase_add_checked_fixture(eval, setup, teardown);
    tcase_set_timeout(eval, 60);  // trains tiny models
    tcase_add_loop_test(eval, eval_split_val_scores_the_split_train_held_out_and_nothing_else, 0, 2);
    tcase_add_test(eval, eval_split_val_takes_a_given_fraction_or_else_trains_default_and_says_so);
    tcase_add_test(eval, eval_json_is_valid_json_and_a_loss_it_cannot_measure_is_an_error);
    tcase_add_test(eval, eval_and_attention_fail_when_standard_output_cannot_be_written);
    tcase_add_test(eval, train_and_eval_read_the_text_from_standard_input_given_as_a_dash);
    tcase_add_test(eval, a_run_directory_given_as_model_is_its_model_safetensors);
    suite_add_tcase(s, eval);
    TCase *sample = tcase_create("sample");
    tcase_add_checked_fixture(sample, sample_setup, teardown);
    tcase_add_test(sample, standard_input_that_is_a_device_or_endless_is_refused);
    tcase_add_test(sample, output_that_cannot_be_written_is_an_error);
    tcase_set_timeout(sample, 30);  // runs the binary a few dozen times
    tcase_add_test(sample, top_p_one_samples_what_no_top_p_samples_and_a_small_p_samples_otherwise);
    tcase_add_test(sample, num_samples_prints_independent_samples_from_the_prompt_between_separator_lines);
    tcase_add_test(sample, the_prompt_can_come_from_a_file_or_from_stdin_through_a_pipe);
    tcase_add_test(sample, the_output_ends_with_one_newline_unless_the_text_ends_in_one);
    tcase_add_test(sample, sample_stops_when_standard_output_cannot_be_written);
    suite_add_tcase(s, sample);
    return s;
}
