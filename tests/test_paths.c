// test_paths.c: every kernel path gives the same bits (issue 44).
//
// The kernels come in one form per vector width (simd.h): AVX-512, AVX2,
// NEON and generic. A tile adds its terms in increasing k with one FMA
// each and a lane sum has 16 lanes on every path, so the paths must agree
// to the bit. Here the card and the default gpt train a few steps, with
// the same flags and seed, on every x86 path this CPU can run:
//   - ./tinygpt, the build for this CPU (TINYGPT_BIN);
//   - the portable build (make PORTABLE=1, $TINYGPT_PORTABLE_BIN) capped
//     by TINYGPT_KERNELS to each path the CPU has: avx512, avx2;
//   - the generic kernels with this CPU's FMA ($TINYGPT_GENERIC_BIN: the
//     plain vectors of simd.h, compiled with -DTINYGPT_GENERIC);
// and each run's log.csv (all but its timings) and model.safetensors must
// be ./tinygpt's, byte for byte. The portable build's generic path is compiled for any x86-64,
// without FMA instructions: its products are rounded twice, so it is held
// only to agree within GENERIC_NO_FMA_TOLERANCE (and to train).
// Each run's banner must name the path it ran, so a launcher that picked
// the wrong copy cannot pass by accident. (On aarch64, whose one path is
// NEON, make arm-check holds the losses to x86's instead.)
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "sanitized.h"
#include "tests.h"

#define TEXT "tests/data/card_golden.txt"
#define TEST_TIMEOUT_SECONDS 240

// 10 steps of a product rounded twice against once: the losses of the
// runs below drift apart by ~1e-6; a wrong product moves them by 1e-2.
static const double GENERIC_NO_FMA_TOLERANCE = 1e-4;

typedef struct {
    const char *name;  // for the messages
    const char *flags;
} Model;

static const Model MODELS[] = {
    {"card", "--arch card --embd 48 --heads 4 --context 32 --batch 8 --seed 11"},
    {"gpt", "--arch gpt --layers 2 --embd 64 --heads 4 --context 32 --batch 4 --seed 5"},
};

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// train: "binary" (a command line, which may start with VAR=value) trains
// "model" for 10 steps on 2 threads into DIR/out; it must say it ran on
// "path" (NULL: any).
static void train(const char *binary, const Model *model, const char *out, const char *path) {
    char args[1024];
    snprintf(args, sizeof args, "train %s %s --steps 10 --threads 2 --peak 100 --eval-interval 5 --out %s/%s", TEXT,
             model->flags, dir, out);
    RunResult *r = run_binary(binary, dir, args);
    ck_assert_msg(r->status == 0, "%s: %s train failed (%d): %s", model->name, binary, r->status, r->err);
    if (path) {
        char banner[64];
        snprintf(banner, sizeof banner, "kernels: %s;", path);
        ck_assert_msg(strstr(r->err, banner), "%s: %s did not run the %s path: %s", model->name, binary, path, r->err);
    }
}

// log.csv's columns that are not timings: train_loss, val_loss, lr,
// grad_norm, val_bpb and the sample, as printed, row by row.
static void expect_same_log(const char *model, const char *a, const char *b) {
    static const int COLUMNS[] = {1, 2, 3, 6, 7, 10};
    char pa[512], pb[512], log_a[1 << 15], log_b[1 << 15];
    snprintf(pa, sizeof pa, "%s/%s/log.csv", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/log.csv", dir, b);
    read_text_file(pa, log_a, sizeof log_a);
    read_text_file(pb, log_b, sizeof log_b);
    for (int step = 0; step < 10; step++)
        for (int c = 0; c < (int)(sizeof COLUMNS / sizeof COLUMNS[0]); c++) {
            char cell_a[512], cell_b[512];
            log_cell(log_a, step, COLUMNS[c], cell_a, sizeof cell_a);
            log_cell(log_b, step, COLUMNS[c], cell_b, sizeof cell_b);
            ck_assert_msg(strcmp(cell_a, cell_b) == 0, "%s step %d column %d: %s has %s, %s has %s", model, step,
                          COLUMNS[c], a, cell_a, b, cell_b);
        }
}

static void expect_same_file(const char *model, const char *a, const char *b, const char *file) {
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s/%s", dir, a, file);
    snprintf(pb, sizeof pb, "%s/%s/%s", dir, b, file);
    size_t na, nb;
    char *da = slurp(pa, &na), *db = slurp(pb, &nb);
    ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s: %s differs between %s and %s", model, file, a, b);
    free(da);
    free(db);
}

// The train_loss column of DIR/out/log.csv, 10 steps.
static void losses(const char *out, double loss[10]) {
    char path[512], log[1 << 15];
    snprintf(path, sizeof path, "%s/%s/log.csv", dir, out);
    read_text_file(path, log, sizeof log);
    for (int step = 0; step < 10; step++) loss[step] = log_field(log, step, 1);
}

static const char *env_binary(const char *var) {
    const char *bin = getenv(var);
    ck_assert_msg(bin != NULL, "%s is not set: run the tests with `make test`", var);
    return bin;
}

#if defined(__x86_64__)
// The CPU has the avx512 and the avx2 path: the features of x86-64-v4 and
// -v3 that the launcher asks gcc for (launcher.c) and that clang 14, the
// sanitizer build's compiler, can name one by one.
static bool cpu_has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
}
static bool cpu_has_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
           __builtin_cpu_supports("bmi2");
}

// Loop test: _i = 0 the card, _i = 1 a gpt with the default recipe.
START_TEST(every_path_this_cpu_has_gives_the_same_bits) {
    if (TINYGPT_SANITIZED) return;  // clang -O1 fuses other multiply-adds (see test_arch.c)
    const Model *model = &MODELS[_i];
    train(tinygpt_binary(), model, "native", NULL);
    const char *portable = env_binary("TINYGPT_PORTABLE_BIN");
    const char *paths[] = {"avx512", "avx2"};
    const bool has[] = {cpu_has_avx512(), cpu_has_avx2()};
    for (int p = 0; p < 2; p++) {
        if (!has[p]) continue;
        char binary[512];
        snprintf(binary, sizeof binary, "TINYGPT_KERNELS=%s %s", paths[p], portable);
        train(binary, model, paths[p], paths[p]);
        expect_same_log(model->name, "native", paths[p]);
        expect_same_file(model->name, "native", paths[p], "model.safetensors");
    }
    if (__builtin_cpu_supports("fma")) {
        train(env_binary("TINYGPT_GENERIC_BIN"), model, "generic-fma", "generic");
        expect_same_log(model->name, "native", "generic-fma");
        expect_same_file(model->name, "native", "generic-fma", "model.safetensors");
    }
    char binary[512];
    snprintf(binary, sizeof binary, "TINYGPT_KERNELS=generic %s", portable);
    train(binary, model, "generic-no-fma", "generic");
    double want[10], got[10];
    losses("native", want);
    losses("generic-no-fma", got);
    for (int step = 0; step < 10; step++)
        ck_assert_msg(fabs(got[step] - want[step]) <= GENERIC_NO_FMA_TOLERANCE,
                      "%s step %d: generic without FMA %.6f, native %.6f", model->name, step, got[step], want[step]);
}
END_TEST
#endif

// The products' k blocks (matmul.c) are as deep as this CPU's L1 data cache
// lets them be; TINYGPT_K_BLOCK sets the depth. Shallower blocks split the
// models' sums (k = 48 to 256) at other places, which must not change a
// bit. Loop test, as above.
START_TEST(any_k_block_depth_gives_the_same_bits) {
    const Model *model = &MODELS[_i];
    char binary[512];
    snprintf(binary, sizeof binary, "TINYGPT_K_BLOCK=128 %s", tinygpt_binary());
    train(binary, model, "k-128", NULL);
    snprintf(binary, sizeof binary, "TINYGPT_K_BLOCK=48 %s", tinygpt_binary());
    train(binary, model, "k-48", NULL);
    expect_same_log(model->name, "k-128", "k-48");
    expect_same_file(model->name, "k-128", "k-48", "model.safetensors");
}
END_TEST

// TINYGPT_KERNELS is checked in every build: a name that is no path, and a
// path below what ./tinygpt carries, are refused with one line and exit 2.
START_TEST(a_kernel_path_that_is_not_there_is_refused) {
    char binary[512];
    snprintf(binary, sizeof binary, "TINYGPT_KERNELS=sse9 %s", tinygpt_binary());
    expect_failure(run_binary(binary, dir, "--version"), "TINYGPT_KERNELS=sse9", 2, "no kernel path of this CPU's kind");
    snprintf(binary, sizeof binary, "TINYGPT_K_BLOCK=129 %s", tinygpt_binary());
    expect_failure(run_binary(binary, dir, "--version"), "TINYGPT_K_BLOCK=129", 2, "from 1 to 128");
    snprintf(binary, sizeof binary, "TINYGPT_K_BLOCK=64k %s", tinygpt_binary());
    expect_failure(run_binary(binary, dir, "--version"), "TINYGPT_K_BLOCK=64k", 2, "no k block depth");
#if defined(__x86_64__)
    if (TINYGPT_SANITIZED) return;  // make sanitize builds no portable binary
    const char *portable = env_binary("TINYGPT_PORTABLE_BIN");
    snprintf(binary, sizeof binary, "TINYGPT_KERNELS=neon %s", portable);
    expect_failure(run_binary(binary, dir, "--version"), "TINYGPT_KERNELS=neon (portable)", 2,
                   "no kernel path of this CPU's kind");
    // ./tinygpt is built for this CPU: on one with AVX2 or AVX-512 it has
    // no generic kernels to run.
    snprintf(binary, sizeof binary, "TINYGPT_KERNELS=generic %s", tinygpt_binary());
    if (cpu_has_avx2())
        expect_failure(run_binary(binary, dir, "--version"), "TINYGPT_KERNELS=generic (native)", 2, "make PORTABLE=1");
#endif
}
END_TEST

Suite *paths_suite(void) {
    Suite *s = suite_create("paths");
    TCase *tc = tcase_create("bits");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT_SECONDS);
#if defined(__x86_64__)
    tcase_add_loop_test(tc, every_path_this_cpu_has_gives_the_same_bits, 0, 2);
#endif
    tcase_add_loop_test(tc, any_k_block_depth_gives_the_same_bits, 0, 2);
    tcase_add_test(tc, a_kernel_path_that_is_not_there_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
