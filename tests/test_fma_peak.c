// test_fma_peak.c: tests for src/kernels/fma_peak.c, the CPU's FMA peak.
//
// The loop is proven to do the multiply-adds it counts: for short runs its
// result is exactly (bit for bit) what one float at a time predicts with
// fmaf, each lane its own chain of "rounds" FMAs; and a check that it is
// able to fail: a multiply followed by an add, or one round fewer, gives
// other bits. The timed measurement can only be held to what no load on
// the machine can break: a number of GFLOP/s that is finite and within what
// any core can do, and all threads at least a good part of one thread's.
// The CPU's family and model are checked against Linux's /proc/cpuinfo,
// which decodes the same cpuid fields in its own code.
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "fma_peak.h"
#include "helpers.h"
#include "sanitized.h"
#include "tests.h"

// multiply_then_add: x * PEAK_MUL rounded to a float, then + PEAK_ADD
// rounded again: the loop without its fusion. The volatile keeps the
// Makefile's -ffp-contract=fast from fusing the two back into one FMA.
static float multiply_then_add(float x) {
    volatile float product = x * PEAK_MUL;
    return product + PEAK_ADD;
}

// predicted: peak_fma_loop("rounds", "start") one float at a time: each lane
// of each accumulator from its own start through "rounds" steps of fmaf (or
// of multiply_then_add when "fused" is false), added up in the loop's order.
static double predicted(long rounds, float start, bool fused) {
    double sum = 0.0;
    for (int i = 0; i < PEAK_ACCUMULATORS; i++)
        for (int l = 0; l < PEAK_VECTOR_FLOATS; l++) {
            float x = start + (float)(i * PEAK_VECTOR_FLOATS + l) / 1024.0f;
            for (long r = 0; r < rounds; r++) x = fused ? fmaf(x, PEAK_MUL, PEAK_ADD) : multiply_then_add(x);
            sum += (double)x;
        }
    return sum;
}

static const long ROUNDS[] = {0, 1, 2, 7, 100, 1000, 4099};

START_TEST(the_fma_loop_gives_the_bits_that_one_float_at_a_time_predicts) {
    // The sanitizer build (clang -O1) leaves some vector a*b+c unfused where
    // gcc -O3 fuses them (as test_arch.c notes), so its bits are another
    // compiler's; the loop is held to the bit in the build `make` makes.
    if (TINYGPT_SANITIZED) return;
    CpuInfo cpu;
    peak_cpu_info(&cpu);
    for (int k = 0; k < COUNT(ROUNDS); k++)
        for (float start = 0.5f; start < 4.0f; start += 1.25f) {
            const double got = peak_fma_loop(ROUNDS[k], start), want = predicted(ROUNDS[k], start, cpu.fused);
            ck_assert_msg(got == want, "%ld rounds from %g: the loop gives %.17g, one float at a time %.17g", ROUNDS[k],
                          (double)start, got, want);
        }
}
END_TEST

// The check above has teeth: a multiply and then an add, or one round more
// or fewer, gives other bits than the loop should.
START_TEST(a_multiply_then_an_add_or_a_round_missing_would_give_other_bits) {
    CpuInfo cpu;
    peak_cpu_info(&cpu);
    for (int k = 1; k < COUNT(ROUNDS); k++) {
        const long rounds = ROUNDS[k];
        const double want = predicted(rounds, 1.0f, cpu.fused);
        if (cpu.fused)
            ck_assert_msg(predicted(rounds, 1.0f, false) != want, "%ld rounds: multiply then add gives the FMA's bits",
                          rounds);
        ck_assert_msg(predicted(rounds - 1, 1.0f, cpu.fused) != want, "%ld rounds give %ld's bits", rounds - 1, rounds);
        ck_assert_msg(predicted(rounds + 1, 1.0f, cpu.fused) != want, "%ld rounds give %ld's bits", rounds + 1, rounds);
    }
}
END_TEST

// A core of today does at most 2 FMAs of 16 floats a cycle, 2 FLOPs each:
// 384 GFLOP/s at 6 GHz; the upper bound is 5 times that. A number above it
// is a loop the compiler skipped (it once ran the loop once per thread and
// counted it at every look at the clock: 3 million "GFLOP/s"). The lower
// bound is a small part of any core's, even one scalar float at a time,
// even shared with several other jobs.
static const double MAX_GFLOPS_PER_THREAD = 2000.0;
static const double MIN_GFLOPS_PER_THREAD = 1.0;

START_TEST(one_thread_measures_a_finite_number_of_gflops_that_a_core_can_do) {
    const double one = peak_measure(1, 0.2);
    ck_assert_msg(isfinite(one) && one > MIN_GFLOPS_PER_THREAD && one < MAX_GFLOPS_PER_THREAD,
                  "1 thread: %g GFLOP/s", one);
}
END_TEST

// All threads do at least a good part of what one does. Not "at least
// one's": on a shared machine another job may hold every core but one
// while they run. A quarter still fails a count of one thread's FLOPs
// spread over 4 or fewer, or a wall time multiplied by the threads.
START_TEST(all_threads_measure_at_least_a_good_part_of_what_one_thread_does) {
    const double one = peak_measure(1, 0.2), all = peak_measure(0, 0.2);
    ck_assert_msg(isfinite(all) && all > 0.25 * one, "all threads: %g GFLOP/s, 1 thread: %g", all, one);
    ck_assert_msg(all < 1024 * MAX_GFLOPS_PER_THREAD, "all threads: %g GFLOP/s", all);
    // Two threads asked for, on a machine of one core or more: the same bounds.
    const double two = peak_measure(2, 0.2);
    ck_assert_msg(isfinite(two) && two > 0.25 * one && two < 2 * MAX_GFLOPS_PER_THREAD, "2 threads: %g GFLOP/s", two);
}
END_TEST

#if defined(__x86_64__) || defined(__i386__)  // x86's /proc/cpuinfo alone has these keys
// proc_cpuinfo_number: the number after "key" (a line "key<tabs>: N") of
// the first processor in /proc/cpuinfo, or -1 when there is none.
static int proc_cpuinfo_number(const char *key) {
    Error err;
    FILE *f = fopen_checked("/proc/cpuinfo", "r", &err);
    if (!f) return -1;
    char line[512];
    int value = -1;
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) != 0) continue;
        const char *rest = line + n + strspn(line + n, " \t");  // "model name" is not "model"
        if (*rest != ':') continue;
        if (sscanf(rest + 1, "%d", &value) != 1) value = -1;
        break;
    }
    fclose(f);
    return value;
}
#endif

START_TEST(the_cpu_is_named_and_its_family_and_model_are_linuxs) {
    CpuInfo cpu;
    peak_cpu_info(&cpu);
    ck_assert_msg(cpu.name[0] != '\0' && cpu.name[0] != ' ' && cpu.name[strlen(cpu.name) - 1] != ' ', "name '%s'",
                  cpu.name);
    ck_assert_int_eq(cpu.vector_floats, PEAK_VECTOR_FLOATS);
    ck_assert_int_eq(cpu.vector_bits, 32 * cpu.vector_floats);
    ck_assert_str_eq(cpu.instructions, PEAK_INSTRUCTIONS);
    ck_assert_str_eq(cpu.kernel_path, KERNEL_PATH);
#if PATH_AVX512
    ck_assert_int_eq(cpu.vector_floats, 16);  // one AVX-512 register
#endif
#if defined(__x86_64__) || defined(__i386__)
    ck_assert_msg(strlen(cpu.vendor) == 12, "vendor '%s'", cpu.vendor);
    ck_assert_msg(cpu.family > 0 && cpu.model >= 0 && cpu.stepping >= 0, "family %d model %d stepping %d", cpu.family,
                  cpu.model, cpu.stepping);
    const int family = proc_cpuinfo_number("cpu family"), model = proc_cpuinfo_number("model");
    if (family >= 0) ck_assert_int_eq(cpu.family, family);
    if (model >= 0) ck_assert_int_eq(cpu.model, model);
#endif
}
END_TEST

Suite *fma_peak_suite(void) {
    Suite *s = suite_create("fma_peak");
    TCase *tc = tcase_create("fma_peak");
    tcase_set_timeout(tc, 30);  // three tests time the loop for 0.2 s or more, on a shared machine
    tcase_add_test(tc, the_fma_loop_gives_the_bits_that_one_float_at_a_time_predicts);
    tcase_add_test(tc, a_multiply_then_an_add_or_a_round_missing_would_give_other_bits);
    tcase_add_test(tc, one_thread_measures_a_finite_number_of_gflops_that_a_core_can_do);
    tcase_add_test(tc, all_threads_measure_at_least_a_good_part_of_what_one_thread_does);
    tcase_add_test(tc, the_cpu_is_named_and_its_family_and_model_are_linuxs);
    suite_add_tcase(s, tc);
    return s;
}
