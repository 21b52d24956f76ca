// test_gradcheck_model.c: tests for src/gradcheck_model.c (`tinygpt
// gradcheck`): it passes on the real model, for several seeds, printing one
// line per parameter tensor; and it fails, with exit status 1, on a build
// whose softmax backward is deliberately wrong ($(BUILD)/tinygpt-broken, see
// the Makefile), naming exactly the tensors whose gradient flows through
// that softmax.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck_model.h"
#include "helpers.h"
#include "tests.h"

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// The line of tensor "name" in the command's output, or NULL.
static const char *line_of(const char *out, const char *name, char *line, size_t cap) {
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *p = strstr(out, needle);
    if (!p) return NULL;
    p++;
    size_t n = strcspn(p, "\n");
    snprintf(line, cap, "%.*s", (int)n, p);
    return line;
}

START_TEST(model_gradcheck_passes_every_tensor_for_several_seeds) {
    for (uint64_t seed = 1; seed <= 4; seed++) {
        GradCheckResult results[NUM_PARAM_TENSORS];
        int failed = model_gradcheck(seed, results);
        for (int i = 0; i < NUM_PARAM_TENSORS; i++)
            ck_assert_msg(results[i].failures == 0, "seed %llu, tensor %d: %zu failures, worst analytic %g numeric %g",
                          (unsigned long long)seed, i, results[i].failures, results[i].worst_analytic,
                          results[i].worst_numeric);
        ck_assert_int_eq(failed, 0);
    }
}
END_TEST

START_TEST(gradcheck_command_prints_a_passing_line_per_tensor_and_exits_zero) {
    RunResult *r = run_binary(tinygpt_binary(), dir, "gradcheck --seed 3");
    ck_assert_msg(r->status == 0, "gradcheck failed (%d): %s%s", r->status, r->out, r->err);
    TensorSpec specs[NUM_PARAM_TENSORS];
    param_table(&GRADCHECK_MODEL, specs);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        char line[512];
        ck_assert_msg(line_of(r->out, specs[i].name, line, sizeof line) != NULL, "no line for %s", specs[i].name);
        ck_assert_msg(strstr(line, "PASS") != NULL, "%s", line);
        char shape[32];
        if (specs[i].ndim == 2) snprintf(shape, sizeof shape, "[%zu, %zu]", specs[i].shape[0], specs[i].shape[1]);
        else snprintf(shape, sizeof shape, "[%zu]", specs[i].shape[0]);
        ck_assert_msg(strstr(line, shape) != NULL, "no shape %s: %s", shape, line);
    }
    ck_assert_ptr_nonnull(strstr(r->out, "all 9 tensors pass"));
}
END_TEST

START_TEST(gradcheck_command_fails_on_a_build_with_a_broken_softmax_backward) {
    const char *broken = getenv("TINYGPT_BROKEN_BIN");
    if (!broken) broken = "build/tinygpt-broken";
    RunResult *r = run_binary(broken, dir, "gradcheck");
    ck_assert_msg(r->status == 1, "the broken build's gradcheck exited %d (is %s built? `make test` builds it): %s",
                  r->status, broken, r->err);
    // Zeroing softmax's "- weighted_sum" term corrupts the gradient of the
    // scores, so of q and k, and through them of the embeddings; v, the
    // projection and the head never see it.
    const char *fail[] = {"tok_emb.weight", "pos_emb.weight", "blocks.0.attn.q.weight", "blocks.0.attn.k.weight"};
    const char *pass[] = {"blocks.0.attn.v.weight", "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias",
                          "head.weight", "head.bias"};
    char line[512];
    for (size_t i = 0; i < sizeof fail / sizeof fail[0]; i++) {
        ck_assert_msg(line_of(r->out, fail[i], line, sizeof line) != NULL, "no line for %s", fail[i]);
        ck_assert_msg(strstr(line, "FAIL") != NULL, "%s", line);
    }
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        ck_assert_msg(line_of(r->out, pass[i], line, sizeof line) != NULL, "no line for %s", pass[i]);
        ck_assert_msg(strstr(line, "PASS") != NULL, "%s", line);
    }
    ck_assert_ptr_nonnull(strstr(r->out, "4 of 9 tensors FAIL"));
}
END_TEST

START_TEST(gradcheck_command_refuses_a_bad_seed) {
    RunResult *r = run_binary(tinygpt_binary(), dir, "gradcheck --seed minus-one");
    ck_assert_int_eq(r->status, 2);
    ck_assert_msg(strstr(r->err, "--seed") != NULL && stderr_is_one_line(r), "%s", r->err);
}
END_TEST

Suite *gradcheck_model_suite(void) {
    Suite *s = suite_create("gradcheck_model");
    TCase *tc = tcase_create("gradcheck_model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);  // runs the binary on a shared machine
    tcase_add_test(tc, model_gradcheck_passes_every_tensor_for_several_seeds);
    tcase_add_test(tc, gradcheck_command_prints_a_passing_line_per_tensor_and_exits_zero);
    tcase_add_test(tc, gradcheck_command_fails_on_a_build_with_a_broken_softmax_backward);
    tcase_add_test(tc, gradcheck_command_refuses_a_bad_seed);
    suite_add_tcase(s, tc);
    return s;
}
