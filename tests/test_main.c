// test_main.c: runs every suite; the exit status is the number of failures.
//
// TINYGPT_TEST_SHARD=K/N runs only the suites whose place in the list is K
// modulo N, so that N processes can share the suites between the cores
// (scripts/run_tests.sh, which make test and make sanitize use).
//
// This process must run no OpenMP code before srunner_run_all: Check forks
// each test, and a child forked from a process whose OpenMP thread pool
// exists hangs in its first parallel region (see ../shared/STYLE.md).
#include <stdio.h>
#include <stdlib.h>

#include "tests.h"

int main(void) {
    Suite *(*const suites[])(void) = {
        common_suite, rng_suite, utf8_suite, tokenizer_suite, chunk_suite, bpe_suite, gpt2_tokenizer_suite, hf_gpt2_suite, data_suite,  encoder_suite,    tile_suite, linear_suite,
        attention_suite, layernorm_suite, rmsnorm_suite, residual_suite, gelu_suite, relu2_suite, swiglu_suite, mlp_suite, rope_suite, crossentropy_suite, model_suite, optimizer_suite,
        fma_peak_suite, flops_suite, json_suite, checkpoint_suite,
        sampler_suite, cli_suite,
        canvas_suite, plot_suite, watch_suite, walkthrough_suite, attention_map_suite, gradcheck_model_suite,
        args_suite, settings_suite, train_suite, steady_state_suite, arch_suite, tokenize_suite, faults_suite, timed_suite,
        peak_suite, export_suite,
    };
    unsigned shard = 0, shards = 1;
    const char *spec = getenv("TINYGPT_TEST_SHARD");
    if (spec && (sscanf(spec, "%u/%u", &shard, &shards) != 2 || shards == 0 || shard >= shards)) {
        fprintf(stderr, "run_tests: TINYGPT_TEST_SHARD='%s' is not K/N with K < N\n", spec);
        return EXIT_FAILURE;
    }
    SRunner *runner = srunner_create(NULL);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (i % shards == shard) srunner_add_suite(runner, suites[i]());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : (failed < 255 ? failed : 255);
}
