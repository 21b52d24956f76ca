// peak.c: `tinygpt peak` (see peak.h).
#include "peak.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "common.h"
#include "fma_peak.h"
#include "json.h"

// print_json: the result as one JSON object on a line (the keys are listed
// in docs/speed-and-memory.md, "The peak"). The CPU's name and vendor come
// from the CPU itself, so they go through json_buf_string's escapes.
static void print_json(const CpuInfo *cpu, int threads, double seconds, double one, double all) {
    JsonBuf b = {0};
    json_buf_printf(&b, "{\"cpu\": ");
    json_buf_string(&b, cpu->name, strlen(cpu->name));
    json_buf_printf(&b, ", \"vendor\": ");
    json_buf_string(&b, cpu->vendor, strlen(cpu->vendor));
    json_buf_printf(&b, ", \"family\": %d, \"model\": %d, \"stepping\": %d", cpu->family, cpu->model, cpu->stepping);
    json_buf_printf(&b, ", \"vector_bits\": %d, \"vector_floats\": %d, \"instructions\": ", cpu->vector_bits,
                    cpu->vector_floats);
    json_buf_string(&b, cpu->instructions, strlen(cpu->instructions));
    json_buf_printf(&b, ", \"fused\": %s, \"accumulators\": %d", cpu->fused ? "true" : "false", PEAK_ACCUMULATORS);
    json_buf_printf(&b, ", \"threads\": %d, \"seconds\": %g, \"gflops_1_thread\": %.3f, \"gflops_all_threads\": %.3f}\n",
                    threads, seconds, one, all);
    fwrite(b.data, 1, b.len, stdout);
    json_buf_free(&b);
}

int cmd_peak(int argc, char **argv) {
    double seconds = 1.0;  // each measurement's length: the command takes about 2.2 x this
    int threads = 0;       // the "all threads" measurement's team; 0 = OpenMP's default
    bool json = false;     // one JSON object instead of text
    Flag flags[] = {
        {"--seconds", FLAG_DOUBLE, &seconds, "S", "seconds each of the two measurements runs (1 thread, then all); longer is steadier", 0.01, 600, false, NULL, NULL},
        {"--threads", FLAG_INT, &threads, "N", "threads of the second measurement, 0 = OpenMP's default (all cores)", 0, 1024, false, NULL, NULL},
        {"--json", FLAG_SWITCH, &json, NULL, "print {\"cpu\", \"vendor\", \"family\", \"model\", \"stepping\", \"vector_bits\", \"vector_floats\", \"instructions\", \"fused\", \"accumulators\", \"threads\", \"seconds\", \"gflops_1_thread\", \"gflops_all_threads\"}", 0, 0, false, NULL, NULL},
    };
    Command cmd = {"peak", NULL,
                   "Measure this CPU's peak: GFLOP/s of a loop of fused multiply-adds that touches no memory, "
                   "on 1 thread and on all threads, at the widest vector this build uses; and name the CPU.",
                   "tinygpt peak --seconds 2 --json", flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    if (threads == 0) threads = omp_get_max_threads();

    CpuInfo cpu;
    peak_cpu_info(&cpu);
    const double one = peak_measure(1, seconds);
    // One thread is also "all" when there is one: measured once.
    const double all = threads == 1 ? one : peak_measure(threads, seconds);

    if (json) {
        print_json(&cpu, threads, seconds, one, all);
    } else {
        printf("cpu: %s (%s, family %d, model %d, stepping %d)\n", cpu.name, cpu.vendor[0] ? cpu.vendor : "unknown vendor",
               cpu.family, cpu.model, cpu.stepping);
        printf("vector: %d bits, %d floats (%s), %s; %d independent chains, no memory in the loop\n", cpu.vector_bits,
               cpu.vector_floats, cpu.instructions, cpu.fused ? "fused multiply-add" : "multiply then add (no FMA)",
               PEAK_ACCUMULATORS);
        char label[32];
        snprintf(label, sizeof label, "peak, %d thread%s:", threads, threads == 1 ? "" : "s");
        printf("%-18s %8.1f GFLOP/s\n", "peak, 1 thread:", one);
        if (threads != 1) printf("%-18s %8.1f GFLOP/s (%.2fx 1 thread)\n", label, all, all / one);
    }
    stdout_flush_or_die("the result");
    return 0;
}
