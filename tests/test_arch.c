// test_arch.c: the two architectures (src/model/model.c) from the outside,
// through `tinygpt train`.
//
// 1. `--arch card` is the attention model exactly as it was before the gpt
//    architecture existed, and gpt trains as it did before the settings
//    table: the same flags and seed, on one thread (or on two, each layer
//    sharing its work: --thread-split layers) give the same log.csv
//    training losses, the same tensor bytes in the checkpoint and the same
//    sample. (The validation losses were recorded too, but what they
//    measure changed with issue 20: the first windows of the validation
//    split then, the whole split now, so only their steps are held here;
//    test_train.c holds each to `tinygpt eval` of the same weights.)
//    The expected values below (GOLDEN) were recorded with older tinygpts
//    on tests/data/card_golden.txt; they are not computed by the code under
//    test.
//    The recording is of the gcc -O3 build that `make` makes; the sanitizer
//    build (clang -O1) fuses multiply-adds in other places and differs in
//    the last digits, so there the test only checks that the run works.
// 2. The reference build (`make REFERENCE=1`: every product, attention,
//    LayerNorm and GELU by the plain `_reference` loops) trains: over 20
//    steps its losses stay within REFERENCE_LOSS_TOLERANCE of the fast
//    kernels', from the same initial checkpoint (one loop test over card and
//    gpt).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "sanitized.h"
#include "tests.h"

#define GOLDEN_TEXT "tests/data/card_golden.txt"
#define TEST_TIMEOUT_SECONDS 240

// A run recorded by an older tinygpt, to hold today's to: its flags,
// log.csv's train_loss column (printed with 6 decimals), the
// FNV-1a 64 of the checkpoint's tensor data (everything after the JSON
// header, so every weight is compared to the bit) and what
// `sample --seed 3 --tokens 80 --prompt "the "` prints from it.
typedef struct {
    const char *why;                 // what the recording holds today's run to
    const char *flags;               // after "train card_golden.txt"
    const char *train_losses[30];
    uint64_t tensor_hash;
    size_t tensor_bytes;
    const char *sample;
} Golden;

static const Golden GOLDEN[] = {
    // card, recorded at commit 5bf5f41, the last one before the gpt work.
    {"card as it was before gpt existed",
     "--arch card --steps 30 --batch 4 --context 16 --embd 32 --heads 4 --seed 7 --eval-interval 10 "
     "--save-every 0",
     {"3.104417", "3.021992", "2.969200", "2.906529", "2.841758", "2.903660", "2.844134", "2.773648",
      "2.852694", "2.776957", "2.658737", "2.692095", "2.655573", "2.647896", "2.679212", "2.593713",
      "2.662184", "2.553617", "2.464190", "2.633922", "2.754888", "2.663072", "2.400547", "2.590819",
      "2.489910", "2.464844", "2.583181", "2.510022", "2.422186", "2.513310"},
     0xe72ff8251e6ed8d4ull,
     24020,
     "the thne hnecl me rsmgecrsa umln sinearhe nenolioyetwsre aeoyeer mcnamseitdewialeetm"},
    // A 2-block gpt with AdamW, warmup, the cosine, clipping and dropout,
    // recorded at commit 82706cd, the last one before the settings table
    // (issue 17). Its --lr and --min-lr are powers of two, which a float
    // holds exactly: since then they are doubles (as in Python), and 1e-3
    // would have rounded differently.
    {"gpt as it was before the settings table",
     "--steps 30 --batch 4 --context 16 --embd 32 --heads 4 --layers 2 --dropout 0.1 --seed 7 "
     "--eval-interval 10 --save-every 0 --lr 0.0009765625 --min-lr 0.0001220703125 --warmup 5 " NANOGPT_PARTS,
     {"3.053640", "3.033793", "3.033685", "3.021549", "3.031114", "2.968349", "2.955918", "2.919261",
      "2.934176", "2.930150", "2.894733", "2.868959", "2.877969", "2.852997", "2.862495", "2.836808",
      "2.841539", "2.817738", "2.789659", "2.824179", "2.880795", "2.837811", "2.798642", "2.805548",
      "2.842222", "2.761490", "2.822504", "2.776968", "2.790507", "2.780208"},
     0x1df0d8bf082f0013ull,
     103680,
     "the uepicgolal\nnhdtuomlgstc\nwonp smolcsohamepsimpymvwtvneaeryeit\nndo nsenvahwh ielun"},
};

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// tensor_data_hash: FNV-1a 64 over the bytes after a safetensors header.
static uint64_t tensor_data_hash(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    unsigned char len_bytes[8];
    ck_assert_uint_eq(fread(len_bytes, 1, 8, f), 8);
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | len_bytes[i];
    ck_assert_int_eq(fseek(f, (long)header, SEEK_CUR), 0);
    uint64_t hash = 0xcbf29ce484222325ull;
    int c;
    *bytes = 0;
    while ((c = fgetc(f)) != EOF) {
        hash = (hash ^ (uint64_t)c) * 0x100000001b3ull;
        (*bytes)++;
    }
    fclose(f);
    return hash;
}

// The recordings ran on one thread. The releases before 2026-11-26 shared
// every layer's work among the threads, with every sum in one order, and so
// gave one thread's bits on any number; --thread-split layers still does
// (the default, rows, gives each thread rows of its own: model.h,
// "Slices"). Each recording is held on both.
static const char *const GOLDEN_THREADS[] = {"--threads 1", "--threads 2 --thread-split layers"};

// Loop test: _i / 2 picks the recording, _i % 2 the threads.
START_TEST(training_is_bit_identical_to_the_recorded_runs) {
    const Golden *g = &GOLDEN[_i / 2];
    const char *threads = GOLDEN_THREADS[_i % 2];
    char args[1024];
    snprintf(args, sizeof args, "train %s %s %s --out %s/run", GOLDEN_TEXT, g->flags, threads, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s, %s: train failed (%d): %s", g->why, threads, r->status, r->err);
    if (TINYGPT_SANITIZED) return;  // another compiler's roundings: see the top of the file

    char path[512], log[1 << 14];
    snprintf(path, sizeof path, "%s/run/log.csv", dir);
    read_text_file(path, log, sizeof log);
    int val_seen = 0;
    for (int step = 0; step < 30; step++) {
        char loss[32], val[32];
        log_cell(log, step, 1, loss, sizeof loss);
        log_cell(log, step, 2, val, sizeof val);
        ck_assert_msg(strcmp(loss, g->train_losses[step]) == 0, "%s, %s: step %d: train loss %s, recorded %s", g->why,
                      threads, step, loss, g->train_losses[step]);
        if (val[0]) {
            static const int EVALUATED[4] = {0, 10, 20, 29};
            ck_assert_int_lt(val_seen, 4);
            ck_assert_msg(step == EVALUATED[val_seen], "%s, %s: a validation loss at step %d", g->why, threads, step);
            val_seen++;
        }
    }
    ck_assert_int_eq(val_seen, 4);

    snprintf(path, sizeof path, "%s/run/model.safetensors", dir);
    size_t bytes;
    uint64_t hash = tensor_data_hash(path, &bytes);
    ck_assert_uint_eq(bytes, g->tensor_bytes);
    ck_assert_msg(hash == g->tensor_hash, "%s, %s: tensor data hash %016llx, recorded %016llx", g->why, threads,
                  (unsigned long long)hash, (unsigned long long)g->tensor_hash);

    snprintf(args, sizeof args, "sample --model %s --seed 3 --tokens 80 --prompt \"the \"", path);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s, %s: sample failed (%d): %s", g->why, threads, r->status, r->err);
    // The text as recorded, and the newline sample now ends its output with
    // (the recordings end in none of their own).
    char want[512];
    snprintf(want, sizeof want, "%s\n", g->sample);
    ck_assert_str_eq(r->out, want);
}
END_TEST

// ---- The reference build trains like the fast one ----------------------------

// The two builds add the same terms, but not always in the same order (the
// reference attention takes its dot products one at a time, the fast one in
// tiles; GELU's fast erf differs from libm's by ~1e-6), so their losses
// drift apart by float32 rounding, step after step. 20 steps of SGD keep
// that drift far below 2e-3, while any real difference in the math (a
// missing term, a wrong scale) moves the loss by more than 1e-2 at once.
static const double REFERENCE_LOSS_TOLERANCE = 2e-3;

static const char *reference_binary(void) {
    const char *bin = getenv("TINYGPT_REFERENCE_BIN");
    ck_assert_msg(bin != NULL, "TINYGPT_REFERENCE_BIN is not set: run the tests with `make test`");
    return bin;
}

// train_losses: run "binary" for 20 steps from "init" (made with the flags
// "arch_flags", for the message) and read log.csv's train_loss column into
// losses[20].
static void train_losses(const char *binary, const char *arch_flags, const char *init, const char *out,
                         double losses[20]) {
    char args[1024];
    snprintf(args, sizeof args,
             "train %s --init %s --steps 20 --order sequential --seed 5 --batch 4 --save-every 0 --out %s/%s",
             GOLDEN_TEXT, init, dir, out);
    RunResult *r = run_binary(binary, dir, args);
    ck_assert_msg(r->status == 0, "%s: %s train failed (%d): %s", arch_flags, binary, r->status, r->err);
    char path[512], log[1 << 14];
    snprintf(path, sizeof path, "%s/%s/log.csv", dir, out);
    read_text_file(path, log, sizeof log);
    for (int step = 0; step < 20; step++) losses[step] = log_field(log, step, 1);
}

static void check_reference_agrees(const char *arch_flags) {
    char args[1024];
    snprintf(args, sizeof args, "train %s %s --steps 0 --seed 11 --out %s/init", GOLDEN_TEXT, arch_flags, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s: init failed (%d): %s", arch_flags, r->status, r->err);
    char init[512];
    snprintf(init, sizeof init, "%s/init/model.safetensors", dir);
    double fast[20], reference[20];
    train_losses(tinygpt_binary(), arch_flags, init, "fast", fast);
    train_losses(reference_binary(), arch_flags, init, "reference", reference);
    for (int step = 0; step < 20; step++)
        ck_assert_msg(fabs(fast[step] - reference[step]) <= REFERENCE_LOSS_TOLERANCE,
                      "%s step %d: fast loss %.6f, reference %.6f", arch_flags, step, fast[step], reference[step]);
    ck_assert_msg(fast[19] < fast[0], "%s: the loss did not fall (%.4f -> %.4f)", arch_flags, fast[0], fast[19]);
}

// Loop test: _i = 0 trains card, _i = 1 a gpt of 2 blocks, _i = 2 a gpt2 of
// 2 blocks with the tanh GELU (the flags, which begin every message, say which).
START_TEST(the_reference_build_trains_each_architecture_like_the_fast_one) {
    static const char *const arch_flags[] = {
        "--arch card --context 16 --embd 32 --heads 4 --dropout 0.1 --lr 0.5",
        "--arch gpt --layers 2 --context 16 --embd 32 --heads 4 --dropout 0.1 --lr 0.1",
        "--arch gpt2 --mlp gelu_tanh --layers 2 --context 16 --embd 32 --heads 4 --dropout 0.1 --lr 0.1",
    };
    check_reference_agrees(arch_flags[_i]);
}
END_TEST

Suite *arch_suite(void) {
    Suite *s = suite_create("arch");
    TCase *tc = tcase_create("golden");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT_SECONDS);
    tcase_add_loop_test(tc, training_is_bit_identical_to_the_recorded_runs, 0, 4);
    suite_add_tcase(s, tc);
    tc = tcase_create("reference_build");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT_SECONDS);
    tcase_add_loop_test(tc, the_reference_build_trains_each_architecture_like_the_fast_one, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}
