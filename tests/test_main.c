// test_main.c: runs every suite; the exit status is the number of failures.
//
// This process must run no OpenMP code before srunner_run_all: Check forks
// each test, and a child forked from a process whose OpenMP thread pool
// exists hangs in its first parallel region (see ../shared/STYLE.md).
#include <stdlib.h>

#include "tests.h"

int main(void) {
    Suite *(*const suites[])(void) = {
        common_suite, rng_suite, utf8_suite, tokenizer_suite, chunk_suite, bpe_suite, gpt2_tokenizer_suite, data_suite,  encoder_suite,    tile_suite, linear_suite,
        attention_suite, layernorm_suite, rmsnorm_suite, residual_suite, gelu_suite, relu2_suite, swiglu_suite, mlp_suite, rope_suite, crossentropy_suite, model_suite, optimizer_suite,
        fma_peak_suite, flops_suite, json_suite, checkpoint_suite,
        sampler_suite, cli_suite,
        canvas_suite, plot_suite, watch_suite, walkthrough_suite, attention_map_suite, gradcheck_model_suite,
        args_suite, settings_suite, train_suite, steady_state_suite, arch_suite, tokenize_suite, faults_suite, timed_suite,
        peak_suite,
    };
    SRunner *runner = srunner_create(NULL);
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) srunner_add_suite(runner, suites[i]());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? EXIT_SUCCESS : (failed < 255 ? failed : 255);
}
