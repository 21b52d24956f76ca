// test_peak.c: tests for src/commands/peak.c (`tinygpt peak`), run as a
// child process the way a user runs it: its JSON, read back by the
// project's strict parser, with every key documented; the text; --threads
// 1 measuring once; --product's three speeds; bad flags as one-line usage
// errors (exit 2); and a failed write to standard output as exit 1.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fma_peak.h"
#include "helpers.h"
#include "json.h"
#include "matmul.h"
#include "tests.h"

static char work_dir[256];

static void setup(void) { scratch_dir_create(work_dir, sizeof work_dir); }
static void teardown(void) { scratch_dir_remove(work_dir); }

// number: the member "key" of "root", which must be a number.
static double number(const JsonValue *root, const char *key) {
    const JsonValue *v = json_get(root, key);
    ck_assert_msg(v && v->type == JSON_NUMBER, "\"%s\" is %s", key, v ? json_type_name(v->type) : "missing");
    return v->number;
}

// string: the member "key" of "root", which must be a string.
static const char *string(const JsonValue *root, const char *key) {
    const JsonValue *v = json_get(root, key);
    ck_assert_msg(v && v->type == JSON_STRING, "\"%s\" is %s", key, v ? json_type_name(v->type) : "missing");
    return v->string;
}

// run_json: `tinygpt ARGS` (a --json run of peak), which must exit 0 and
// print one JSON object; parsed into "*root" (json_free it). Returns the
// run, for its output in messages.
static RunResult *run_json(const char *args, JsonValue **root) {
    RunResult *r = run_tinygpt(work_dir, args);
    ck_assert_msg(r->status == 0, "exit %d: %s", r->status, r->err);
    Error err;
    ck_assert_msg(json_parse(r->out, strlen(r->out), root, &err), "invalid JSON (%s): %s", err.msg, r->out);
    ck_assert_int_eq((*root)->type, JSON_OBJECT);
    return r;
}

// expect_help_names_keys: every key of "object" is in `peak --help` (the
// --json flag's line), so the help documents them all.
static void expect_help_names_keys(const JsonValue *object) {
    RunResult *help = run_tinygpt(work_dir, "peak --help");
    for (size_t i = 0; i < object->count; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", object->items[i].key);
        ck_assert_msg(strstr(help->out, quoted), "--help does not name %s: %s", quoted, help->out);
    }
}

START_TEST(json_is_one_object_with_every_key_the_help_lists) {
    JsonValue *root;
    RunResult *r = run_json("peak --json --seconds 0.05 --threads 2", &root);
    ck_assert_msg(strchr(r->out, '\n') == r->out + strlen(r->out) - 1, "not one line: %s", r->out);
    ck_assert_msg(strlen(string(root, "cpu")) > 0, "%s", r->out);
    string(root, "vendor");
    ck_assert_str_eq(string(root, "instructions"), PEAK_INSTRUCTIONS);
    ck_assert_str_eq(string(root, "kernel_path"), KERNEL_PATH);
    const JsonValue *fused = json_get(root, "fused");
    ck_assert_msg(fused && fused->type == JSON_BOOL, "%s", r->out);
    number(root, "family");
    number(root, "model");
    number(root, "stepping");
    ck_assert_double_eq(number(root, "vector_floats"), PEAK_VECTOR_FLOATS);
    ck_assert_double_eq(number(root, "vector_bits"), 32 * PEAK_VECTOR_FLOATS);
    ck_assert_double_eq(number(root, "accumulators"), PEAK_ACCUMULATORS);
    ck_assert_double_eq(number(root, "threads"), 2);
    ck_assert_double_eq(number(root, "seconds"), 0.05);
    const double one = number(root, "gflops_1_thread"), all = number(root, "gflops_all_threads");
    ck_assert_msg(one > 0 && isfinite(one) && all > 0 && isfinite(all), "%s", r->out);
    // The products' k blocks: as deep as the L1 this CPU reports wants them.
    const double l1 = number(root, "l1_data_bytes");
    ck_assert_msg(l1 >= 0, "%s", r->out);
    ck_assert_double_eq(number(root, "k_block"), matmul_k_block_for((long)l1));
    ck_assert_int_eq((int)root->count, 17);  // no key the help does not name

    expect_help_names_keys(root);
    json_free(root);
}
END_TEST

// TINYGPT_K_BLOCK sets the depth whatever the L1, and the text says it.
START_TEST(tinygpt_k_block_sets_the_depth_of_the_products_k_blocks) {
    char command[512];
    snprintf(command, sizeof command, "TINYGPT_K_BLOCK=48 %s", tinygpt_binary());
    RunResult *r = run_binary(command, work_dir, "peak --json --seconds 0.02 --threads 1");
    ck_assert_msg(r->status == 0, "exit %d: %s", r->status, r->err);
    ck_assert_msg(strstr(r->out, "\"k_block\": 48,"), "%s", r->out);
    r = run_binary(command, work_dir, "peak --seconds 0.02 --threads 1");
    ck_assert_msg(strstr(r->out, "products: k blocks 48 deep (L1 data cache: "), "%s", r->out);
}
END_TEST

START_TEST(one_thread_is_measured_once_and_the_text_names_the_cpu_and_the_vector) {
    JsonValue *root;
    RunResult *r = run_json("peak --json --seconds 0.05 --threads 1", &root);
    ck_assert_double_eq(number(root, "gflops_1_thread"), number(root, "gflops_all_threads"));
    json_free(root);

    r = run_tinygpt(work_dir, "peak --seconds 0.05 --threads 2");
    ck_assert_msg(r->status == 0, "exit %d: %s", r->status, r->err);
    char vector[64];
    snprintf(vector, sizeof vector, "vector: %d bits, %d floats (%s)", 32 * PEAK_VECTOR_FLOATS, PEAK_VECTOR_FLOATS,
             PEAK_INSTRUCTIONS);
    ck_assert_msg(strncmp(r->out, "cpu: ", 5) == 0 && strstr(r->out, vector), "%s", r->out);
    ck_assert_msg(strstr(r->out, "peak, 1 thread:") && strstr(r->out, "peak, 2 threads:"), "%s", r->out);
    ck_assert_msg(r->err[0] == '\0', "stderr: %s", r->err);
}
END_TEST

// --product: the three products' speeds at the shape asked for (sizes no
// tile divides, so the ragged edges run too), in the JSON and the text.
START_TEST(product_reports_the_three_products_at_the_shape_asked_for) {
    JsonValue *root;
    RunResult *r = run_json("peak --json --seconds 0.02 --threads 2 --product 70,40,130", &root);
    ck_assert_int_eq((int)root->count, 18);
    const JsonValue *product = json_get(root, "product");
    ck_assert_msg(product && product->type == JSON_OBJECT && product->count == 6, "%s", r->out);
    ck_assert_double_eq(number(product, "rows"), 70);
    ck_assert_double_eq(number(product, "in"), 40);
    ck_assert_double_eq(number(product, "out"), 130);
    const char *speeds[] = {"forward", "input_gradient", "weight_gradient"};
    for (int i = 0; i < 3; i++) {
        const double gflops = number(product, speeds[i]);
        ck_assert_msg(gflops > 0 && isfinite(gflops), "%s: %s", speeds[i], r->out);
    }
    expect_help_names_keys(product);
    json_free(root);

    r = run_tinygpt(work_dir, "peak --seconds 0.02 --product 70,40,130");
    ck_assert_msg(r->status == 0, "exit %d: %s", r->status, r->err);
    ck_assert_msg(strstr(r->out, "product inp[70,40] @ weight[130,40]^T, 1 thread: forward ") &&
                      strstr(r->out, "input gradient") && strstr(r->out, "weight gradient"),
                  "%s", r->out);
}
END_TEST

START_TEST(bad_flags_are_one_line_usage_errors_that_name_the_flag) {
    expect_run_fails(work_dir, "peak --seconds 0", 2, "--seconds");
    expect_run_fails(work_dir, "peak --seconds 601", 2, "--seconds");
    expect_run_fails(work_dir, "peak --seconds soon", 2, "--seconds");
    expect_run_fails(work_dir, "peak --threads -1", 2, "--threads");
    expect_run_fails(work_dir, "peak --threads", 2, "--threads");
    expect_run_fails(work_dir, "peak --fast", 2, "--fast");
    expect_run_fails(work_dir, "peak now", 2, "now");
    expect_run_fails(work_dir, "peak --product 70,40", 2, "--product '70,40'");
    expect_run_fails(work_dir, "peak --product 70,0,130", 2, "--product '70,0,130'");
    expect_run_fails(work_dir, "peak --product 70,40,130,1", 2, "--product");
    expect_run_fails(work_dir, "peak --product 70,40,130x", 2, "--product");
    expect_run_fails(work_dir, "peak --product 70,40,65537", 2, "--product");
    expect_run_fails(work_dir, "peak --product 16384,16384,16384", 2, "6144 MB");
}
END_TEST

START_TEST(a_result_that_cannot_be_written_is_an_error) {
    char args[1024];
    snprintf(args, sizeof args, "-c \"%s peak --seconds 0.02 --json > /dev/full\"", tinygpt_binary());
    expect_failure(run_binary("sh", work_dir, args), "peak > /dev/full", 1,
                   "cannot write the result to standard output: No space left on device");
}
END_TEST

Suite *peak_suite(void) {
    Suite *s = suite_create("peak");
    TCase *tc = tcase_create("peak");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);  // runs the binary a dozen times
    tcase_add_test(tc, json_is_one_object_with_every_key_the_help_lists);
    tcase_add_test(tc, one_thread_is_measured_once_and_the_text_names_the_cpu_and_the_vector);
    tcase_add_test(tc, tinygpt_k_block_sets_the_depth_of_the_products_k_blocks);
    tcase_add_test(tc, product_reports_the_three_products_at_the_shape_asked_for);
    tcase_add_test(tc, bad_flags_are_one_line_usage_errors_that_name_the_flag);
    tcase_add_test(tc, a_result_that_cannot_be_written_is_an_error);
    suite_add_tcase(s, tc);
    return s;
}
