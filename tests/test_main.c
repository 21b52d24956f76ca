// test_main.c: runs every suite; the exit status is the number of failures.
//
// TINYGPT_TEST_QUEUE=FILE shares the suites between processes started
// together (scripts/run_tests.sh, which make test and make sanitize use, runs
// one per core): FILE holds the place in the list of the next suite no
// process has taken, and each process, whenever it is free, takes that one
// and moves the number on (under a lock). So the processes end together
// however long each suite runs, and the list starts with the slowest suites
// (a long one taken last would keep one core busy alone).
// Without it, this process runs them all.
//
// This process must run no OpenMP code before srunner_run_all: Check forks
// each test, and a child forked from a process whose OpenMP thread pool
// exists hangs in its first parallel region (see ../shared/STYLE.md).
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>

#include "tests.h"

// take_next: the next suite's place from the queue file "queue" (and the
// number there moved on), or -1 if the file cannot be read or locked.
static long take_next(const char *queue) {
    FILE *f = fopen(queue, "r+");
    if (!f) return -1;
    long next = -1;
    if (flock(fileno(f), LOCK_EX) == 0 && fscanf(f, "%ld", &next) == 1) {
        rewind(f);
        if (fprintf(f, "%ld\n", next + 1) < 0 || fflush(f) != 0) next = -1;
    } else next = -1;
    fclose(f);  // and with it the lock
    return next;
}

// run_suite: "suite" run and freed; the number of its failed tests.
static int run_suite(Suite *suite) {
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    const int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed;
}

// exit_status: the number of failed tests, as an exit status (0 to 255).
static int exit_status(int failed) { return failed < 255 ? failed : 255; }

int main(void) {
    Suite *(*const suites[])(void) = {
        // The slowest first (the three faults suites start a few hundred runs each).
        faults_failing_write_suite, faults_kill_suite, faults_sigterm_suite, faults_refusals_suite, train_suite, gradcheck_model_suite,
        timed_suite, cli_suite, model_suite, tokenize_suite, paths_suite,
        // The rest in the order of src/.
        common_suite, rng_suite, utf8_suite, tokenizer_suite, chunk_suite, bpe_suite, gpt2_tokenizer_suite, hf_gpt2_suite, data_suite,  encoder_suite,    tile_suite, linear_suite,
        attention_suite, layernorm_suite, rmsnorm_suite, residual_suite, gelu_suite, relu2_suite, swiglu_suite, mlp_suite, rope_suite, crossentropy_suite, optimizer_suite,
        fma_peak_suite, flops_suite, json_suite, checkpoint_suite,
        sampler_suite,
        canvas_suite, plot_suite, watch_suite, walkthrough_suite, attention_map_suite,
        args_suite, settings_suite, steady_state_suite, arch_suite,
        peak_suite, export_suite,
    };
    const long count = (long)(sizeof suites / sizeof suites[0]);
    const char *queue = getenv("TINYGPT_TEST_QUEUE");
    if (!queue) {  // one runner for all: Check's CK_RUN_SUITE picks among them
        SRunner *runner = srunner_create(NULL);
        for (long i = 0; i < count; i++) srunner_add_suite(runner, suites[i]());
        srunner_run_all(runner, CK_NORMAL);
        const int failed = srunner_ntests_failed(runner);
        srunner_free(runner);
        return exit_status(failed);
    }
    int failed = 0;
    for (long i; (i = take_next(queue)) < count;) {
        if (i < 0) {
            fprintf(stderr, "run_tests: TINYGPT_TEST_QUEUE='%s' cannot be read, locked or written: it must hold a number\n", queue);
            return EXIT_FAILURE;
        }
        failed += run_suite(suites[i]());
    }
    return exit_status(failed);
}
