// fma_peak.h: this CPU's peak: how many multiply-adds a second it can do at
// all, measured, so that a speed in GFLOP/s can be given as a share of it.
//
// Reading order: file 21b, the last of the fast kernels, with flops.h (the
// FLOPs a training step needs): read it after the kernels it is the ceiling
// of. It implements: a loop of fused multiply-adds (FMAs) that never
// touches memory, timed on one thread and on several, what the CPU says
// of itself (cpuid), and its L1 data cache's size, to which the products'
// k blocks are set (matmul.h). It leaves out: memory bandwidth (tinygpt's
// products are built to run from registers and L1, tile.h and matmul.c) and
// any theoretical number (clock x units x width): the clock moves with the
// load and the temperature, so the peak is measured, never computed.
//
// Why a loop of its own: a product can never beat the CPU's FMA rate, so
// that rate is the honest denominator. The loop is the register tile of
// tile.h with everything but the FMAs taken out: no loads, no stores, no
// broadcasts; just PEAK_ACCUMULATORS vectors, each updated by
//     acc = acc * mul + add
// once a round. One FMA takes ~4 cycles to give its result, and a core
// starts up to 2 a cycle, so 8 must be in flight to keep it busy; an FMA
// whose input is the previous one's output waits, which is why the loop
// has 12 independent chains (enough for 2 units of 6 cycles' latency; on
// this project's AMD EPYC, 8 chains measured ~10% lower than 12, and 16 no
// higher).
//
// Sharp edges:
// - The vector is the widest this build compiles for (the Makefile's
//   -march=native), not the widest the CPU has: a build without AVX-512
//   measures AVX2's peak, which is then the ceiling of its kernels too.
// - On a machine shared with other work the measurement only ever comes out
//   low: take the best of a few runs.
#ifndef TINYGPT_FMA_PEAK_H
#define TINYGPT_FMA_PEAK_H

#include <stdbool.h>

#include "simd.h"

// Independent chains of FMAs in the loop (see above): 12 vectors of
// accumulators plus mul and add fit the 16 registers of AVX2 and SSE, and
// AVX-512's 32.
#define PEAK_ACCUMULATORS 12

// The floats in one vector of the loop: one register of this build's kernel
// path (simd.h's vec), with the name of its instructions. The peak is the
// ceiling of that path's kernels, so it is measured with their vectors:
// TINYGPT_KERNELS=avx2 on an AVX-512 CPU measures AVX2's peak.
#define PEAK_VECTOR_FLOATS VEC_FLOATS
#if PATH_AVX512
#define PEAK_INSTRUCTIONS "AVX-512"
#elif PATH_AVX2
#define PEAK_INSTRUCTIONS "AVX2 and FMA"
#elif PATH_NEON
#define PEAK_INSTRUCTIONS "NEON"
#else
#define PEAK_INSTRUCTIONS "the compiler's own vectors"
#endif

// The multiply-add of each round: acc = acc * PEAK_MUL + PEAK_ADD. With
// |mul| < 1 every chain moves towards add / (1 - mul) = 1 and stays there:
// no overflow, and no subnormal numbers, which would make each FMA ~100x
// slower. mul = 0.999 keeps the values changing for thousands of rounds,
// so a short run's result depends on every one of its FMAs; and as neither
// number is a power of two, a multiply rounded and then an add rounded
// gives other bits than one FMA in most lanes within a few rounds, so a
// test can tell the two apart.
#define PEAK_MUL 0.999f
#define PEAK_ADD 0.001f

// What the CPU is and which vectors this build uses.
typedef struct {
    char vendor[13];       // cpuid's vendor: "AuthenticAMD", "GenuineIntel"; "" when unknown
    char name[49];         // the brand string, spaces trimmed ("Oxide Virtual Turin-like Processor" here); "unknown" when not said
    int family, model;     // the display family and model, extended fields added (AMD Zen 5: 26, 2); -1 when unknown
    int stepping;          // -1 when unknown
    int vector_floats;     // PEAK_VECTOR_FLOATS
    int vector_bits;       // 32 x vector_floats
    const char *instructions;  // PEAK_INSTRUCTIONS
    const char *kernel_path;   // KERNEL_PATH (simd.h): "avx512", "avx2", "neon" or "generic"
    bool fused;            // a*b+c is one fused instruction in this build (else a multiply, then an add)
} CpuInfo;

// kernel_path_check: TINYGPT_KERNELS, when set, caps the kernel path, as
// ONEDNN_MAX_CPU_ISA caps oneDNN's: a path at or above this build's lets it
// run; one below it is refused (exit 2, saying that `make PORTABLE=1` builds
// a tinygpt with every x86-64 path), and so is a name that is no path of
// this kind of CPU. (The portable build's launcher has picked a path within
// the cap before this runs.)
void kernel_path_check(void);

// peak_cpu_info: "info" filled from cpuid (x86; elsewhere name "unknown",
// family, model and stepping -1) and from how this file was compiled.
void peak_cpu_info(CpuInfo *info);

// l1_data_cache_bytes: one core's L1 data cache, from the C library (which
// asks the CPU on x86) or else from Linux's /sys (where aarch64's lists
// it); 0 when neither says.
long l1_data_cache_bytes(void);

// k_block_check: the products' k blocks (matmul.h) set as deep as this
// CPU's L1 data cache wants, or as TINYGPT_K_BLOCK says when it is set
// (for timing one depth against another on one CPU): a whole number from 1
// to MATMUL_K_BLOCK_MAX (128), or exit 2 naming it. main.c calls it as
// tinygpt starts.
void k_block_check(void);

// peak_fma_loop: "rounds" rounds of the loop above: PEAK_ACCUMULATORS x
// PEAK_VECTOR_FLOATS x rounds multiply-adds, 2 FLOPs each. Lane l of
// accumulator i starts at start + (i x PEAK_VECTOR_FLOATS + l) / 1024 (in
// float), so every chain computes something different. Returns every lane
// of every chain added up, in double, accumulator 0's lanes first, lane 0
// first: the result the compiler must compute, and a test can predict one
// float at a time.
double peak_fma_loop(long rounds, float start);

// PEAK_FLOPS_PER_ROUND: the FLOPs of one round of peak_fma_loop.
#define PEAK_FLOPS_PER_ROUND (2.0 * PEAK_ACCUMULATORS * PEAK_VECTOR_FLOATS)

// peak_measure: GFLOP/s (10^9 FLOPs a second) of "threads" OpenMP threads
// (0 or less: OpenMP's default, all of them) each running peak_fma_loop:
// the best of PEAK_WINDOWS windows that fill "seconds", each window's rate
// all the threads' FLOPs over the wall time from their start to the last
// one's end. The best, not the mean: the peak is what the cores can do,
// and whatever else runs on the machine (another process, the host of a
// virtual machine) only ever takes some away, so a window it touched reads
// low and one it left alone reads true. A short untimed run first (a
// tenth of "seconds", at most 0.1 s) wakes the threads and lets the clock
// rise. "seconds" must be positive. Takes about 1.1 x "seconds".
#define PEAK_WINDOWS 10
double peak_measure(int threads, double seconds);

#endif
