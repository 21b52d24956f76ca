// fma_peak.c: the FMA loop, its timing on threads, cpuid, the L1 data
// cache's size and the products' k blocks set for it (see fma_peak.h).
#include "fma_peak.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "matmul.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

// One vector of the loop: simd.h's vec, one register of this build's
// path, so that the 12 accumulators are 12 registers. (Vectors twice as
// wide would be 24 AVX2 registers of the 16 there are: the compiler would
// spill them to memory, and the loop would measure the cache.)

// The loop, for every lane l of every accumulator i (a[i] a vector):
//     a[i][l] = start + (i * PEAK_VECTOR_FLOATS + l) / 1024
//     repeat "rounds" times:   a[i] = a[i] * mul + add      (one FMA per vector)
//     result  = sum over i, then l, of a[i][l]               (in double)
// Shapes: a [PEAK_ACCUMULATORS][PEAK_VECTOR_FLOATS], mul and add broadcast.
// The FLOPs: 2 x PEAK_ACCUMULATORS x PEAK_VECTOR_FLOATS a round.
//
// What makes it measure the FMA units and nothing else:
// - a round's 12 FMAs depend only on the previous round's, each on its own
//   chain, so 12 are always ready to start (fma_peak.h);
// - a[], mul and add are held in registers for the whole loop (the
//   unrolled inner loop names each a[i] directly): no loads, no stores.
//   gcc 12 -O3 -march=native compiles the round to 12 vfmadd132ps on zmm
//   registers, an increment and a branch (`objdump -d build/kernels/fma_peak.o`);
// - it is fused: fma_vec (simd.h) is one FMA instruction on the AVX-512,
//   AVX2 and NEON paths, and the generic vectors' a*b+c is one where the
//   CPU has FMA, by the Makefile's -ffp-contract=fast (tests/test_fma_peak.c
//   proves it: its bits are fmaf's);
// - the result is returned and its caller uses it (peak_measure refuses a
//   result that is not finite), and every FMA rounds, so the compiler may
//   neither drop a round nor fold two into one (it may not reassociate
//   float arithmetic without -ffast-math, which tinygpt never uses).
double peak_fma_loop(long rounds, float start) {
    vec a[PEAK_ACCUMULATORS];
    for (int i = 0; i < PEAK_ACCUMULATORS; i++)
        for (int l = 0; l < PEAK_VECTOR_FLOATS; l++) a[i][l] = start + (float)(i * PEAK_VECTOR_FLOATS + l) / 1024.0f;
    vec mul = splat(PEAK_MUL), add = splat(PEAK_ADD);
    for (long r = 0; r < rounds; r++) {
#pragma GCC unroll 12
        for (int i = 0; i < PEAK_ACCUMULATORS; i++) a[i] = fma_vec(a[i], mul, add);
    }
    double sum = 0.0;
    for (int i = 0; i < PEAK_ACCUMULATORS; i++)
        for (int l = 0; l < PEAK_VECTOR_FLOATS; l++) sum += (double)a[i][l];
    return sum;
}

// Rounds between two looks at the clock: 2^18 rounds are 3M FMAs of
// 16 floats, about 0.5 ms at 2 vector FMAs a cycle and 3 GHz; the look
// costs well under a microsecond, and a thread runs past the end by at
// most one such chunk.
#define PEAK_CHUNK_ROUNDS (1L << 18)

// run_for: every thread of a team of "threads" runs chunks of the loop until
// now_seconds() passes "deadline" (at least one chunk each); the rounds all
// ran, added up, go to "*rounds", and the sum of their results to
// "*checksum".
static void run_for(int threads, double deadline, double *rounds, double *checksum) {
    double total_rounds = 0.0, total = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : total_rounds, total)
    {
        // A different start for each thread and each chunk. The same call
        // twice would give the same result, and gcc knows it: with a
        // start fixed per thread, it ran the loop once and added its
        // result up at every look at the clock (3 million "GFLOP/s").
        const float thread_start = 1.0f + (float)omp_get_thread_num();
        for (long chunk = 0;; chunk++) {
            total += peak_fma_loop(PEAK_CHUNK_ROUNDS, thread_start + (float)(chunk % 8) / 8.0f);
            total_rounds += (double)PEAK_CHUNK_ROUNDS;
            if (now_seconds() >= deadline) break;
        }
    }
    *rounds = total_rounds;
    *checksum = total;
}

double peak_measure(int threads, double seconds) {
    if (threads <= 0) threads = omp_get_max_threads();
    double rounds, checksum;
    // Warm-up: the threads created and the cores at full clock before the
    // timed run.
    const double warmup = fmin(0.1, seconds / 10);
    run_for(threads, now_seconds() + warmup, &rounds, &checksum);
    double best = 0.0;
    for (int window = 0; window < PEAK_WINDOWS; window++) {
        const double start = now_seconds();
        run_for(threads, start + seconds / PEAK_WINDOWS, &rounds, &checksum);
        const double elapsed = now_seconds() - start;
        // Every chain tends to 1 (fma_peak.h): anything not finite is a broken loop.
        if (!isfinite(checksum)) die(EXIT_RUNTIME, "the FMA loop's result is %g, not a finite number: src/kernels/fma_peak.c is broken", checksum);
        best = fmax(best, rounds * PEAK_FLOPS_PER_ROUND / elapsed / 1e9);
    }
    return best;
}

// ---- Which kernels -----------------------------------------------------------

// The paths of this kind of CPU, narrowest first.
#if defined(__x86_64__) || defined(__i386__)
static const char *const PATHS[] = {"generic", "avx2", "avx512", NULL};
#define PATH_LIST "avx512, avx2 or generic"
#elif defined(__aarch64__)
static const char *const PATHS[] = {"generic", "neon", NULL};
#define PATH_LIST "neon or generic"
#else
static const char *const PATHS[] = {"generic", NULL};
#define PATH_LIST "generic"
#endif

// Place of "name" in PATHS, or -1.
static int path_rank(const char *name) {
    for (int i = 0; PATHS[i]; i++)
        if (strcmp(PATHS[i], name) == 0) return i;
    return -1;
}

void kernel_path_check(void) {
    const char *cap = getenv("TINYGPT_KERNELS");
    if (!cap || !*cap) return;
    const int wanted = path_rank(cap);
    if (wanted < 0) die(EXIT_USAGE, "TINYGPT_KERNELS='%s' is no kernel path of this CPU's kind: give %s", cap, PATH_LIST);
    if (wanted < path_rank(KERNEL_PATH))
        die(EXIT_USAGE,
            "TINYGPT_KERNELS=%s: this tinygpt has only its %s kernels (built for this CPU); `make PORTABLE=1` "
            "builds one with every x86-64 path",
            cap, KERNEL_PATH);
}

// ---- What the CPU says of itself -------------------------------------------

// trim_spaces: "s" without its leading and trailing spaces (Intel's brand
// strings are right-aligned in their 48 bytes, with spaces before).
static void trim_spaces(char *s) {
    size_t start = strspn(s, " "), len = strlen(s);
    while (len > start && s[len - 1] == ' ') len--;
    memmove(s, s + start, len - start);
    s[len - start] = '\0';
}

void peak_cpu_info(CpuInfo *info) {
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "unknown");
    info->family = info->model = info->stepping = -1;
    info->vector_floats = PEAK_VECTOR_FLOATS;
    info->vector_bits = 32 * PEAK_VECTOR_FLOATS;
    info->instructions = PEAK_INSTRUCTIONS;
    info->kernel_path = KERNEL_PATH;
#if defined(__FP_FAST_FMAF)
    info->fused = true;  // the compiler's own word that fmaf, and a*b+c, is one instruction
#endif
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    // Leaf 0: the vendor, 12 characters in ebx, edx, ecx (in that order).
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
        memcpy(info->vendor, &ebx, 4);
        memcpy(info->vendor + 4, &edx, 4);
        memcpy(info->vendor + 8, &ecx, 4);
        info->vendor[12] = '\0';
    }
    // Leaf 1, eax: stepping in bits 0-3, model 4-7, family 8-11, extended
    // model 16-19, extended family 20-27. Family 15 adds the extended
    // family (every AMD since the K8 of 2003: Zen 5 is 15 + 11 = 26);
    // families 6 and 15 put the extended model above the model's four
    // bits. Linux decodes them the same way for /proc/cpuinfo.
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        const int base_family = (int)(eax >> 8 & 0xf);
        int family = base_family, model = (int)(eax >> 4 & 0xf);
        if (base_family == 15) family += (int)(eax >> 20 & 0xff);
        if (base_family == 6 || base_family == 15) model += (int)(eax >> 16 & 0xf) << 4;
        info->family = family;
        info->model = model;
        info->stepping = (int)(eax & 0xf);
    }
    // Leaves 0x80000002-4: the brand string, 16 bytes each, when the CPU
    // has them (leaf 0x80000000 says the highest extended leaf).
    if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000004u) {
        unsigned regs[12];
        for (unsigned leaf = 0; leaf < 3; leaf++)
            __get_cpuid(0x80000002 + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2],
                        &regs[4 * leaf + 3]);
        char brand[49];
        memcpy(brand, regs, 48);
        brand[48] = '\0';
        trim_spaces(brand);
        if (brand[0]) memcpy(info->name, brand, strlen(brand) + 1);
    }
#endif
}

// sysfs_cache_line: the first line of /sys's file "name" of cache "index"
// of CPU 0 into "text", or false when there is none (not Linux, or no such
// cache).
static bool sysfs_cache_line(int index, const char *name, char *text, size_t cap) {
    char path[96];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/%s", index, name);
    return read_system_line(path, text, cap);
}

long l1_data_cache_bytes(void) {
#ifdef _SC_LEVEL1_DCACHE_SIZE
    const long bytes = sysconf(_SC_LEVEL1_DCACHE_SIZE);  // glibc: cpuid on x86, 0 on aarch64
    if (bytes > 0) return bytes;
#endif
    // Linux lists each cache of a CPU as /sys/.../cache/indexN: its level,
    // its type ("Data", "Instruction" or "Unified") and its size ("48K").
    for (int index = 0; index < 4; index++) {
        char level[16], type[16], size[16];
        if (!sysfs_cache_line(index, "level", level, sizeof level) ||
            !sysfs_cache_line(index, "type", type, sizeof type) || !sysfs_cache_line(index, "size", size, sizeof size))
            continue;
        if (atoi(level) != 1 || strncmp(type, "Data", 4) != 0) continue;
        char *unit;
        const long count = strtol(size, &unit, 10);
        const long scale = *unit == 'K' ? 1024 : *unit == 'M' ? 1024 * 1024 : 1;
        return count > 0 ? count * scale : 0;
    }
    return 0;
}

// ---- The products' k blocks -----------------------------------------------

void k_block_check(void) {
    const char *wanted = getenv("TINYGPT_K_BLOCK");
    if (!wanted || !*wanted) {
        matmul_set_k_block(matmul_k_block_for(l1_data_cache_bytes()));
        return;
    }
    char *end;
    const long depth = strtol(wanted, &end, 10);
    if (*end != '\0' || depth < 1 || depth > MATMUL_K_BLOCK_MAX)
        die(EXIT_USAGE,
            "TINYGPT_K_BLOCK='%s' is no k block depth: give a whole number from 1 to %d (multiples of 16 run "
            "fastest), or unset it",
            show(wanted, strlen(wanted)).text, MATMUL_K_BLOCK_MAX);
    matmul_set_k_block((int)depth);
}
