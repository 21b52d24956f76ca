// cpu_guard.c: the plain x86-64 build's first act, before main: a check
// that this CPU has every instruction set the build was compiled for.
//
// Reading order: file 43c, after launcher.c: like it, about builds and
// CPUs, not the model.
//
// `make` compiles for the CPU it runs on (-march=native), and gcc then uses
// whatever that CPU has, anywhere: AVX-512 to clear a buffer, BMI2 to
// shift. The binary copied to an older CPU (built on a cluster's login node
// and run on its compute nodes, on a desktop and run on a laptop) stopped
// at the first such instruction, "Illegal instruction" and nothing more.
// This asks the CPU first (cpuid, through __builtin_cpu_supports, which for
// the vector registers also asks whether the operating system saves them)
// and, if a set is missing, says which and what to build instead.
//
// Only its one function is compiled for any x86-64 (target "arch=x86-64");
// the macros it reads (__AVX512F__, ...) are the build's. It prints its
// line itself: die() (common.c) is compiled for the build's CPU, and could
// be the instruction this CPU lacks. The Makefile links it into the plain
// x86-64 builds only: the portable binary carries a copy of the program
// per path, and its launcher picks the one the CPU can run.
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

// NEED(set): note "set" (a name __builtin_cpu_supports knows, in gcc 12
// and clang 14) if this CPU lacks it and nothing is noted yet.
#define NEED(set)                                                    \
    do {                                                             \
        if (!missing && !__builtin_cpu_supports(set)) missing = set; \
    } while (0)

__attribute__((constructor(101), target("arch=x86-64"))) static void refuse_a_cpu_without_the_builds_sets(void) {
    __builtin_cpu_init();  // a constructor may run before libgcc's own has
    const char *missing = NULL;
    // Each set the compiler was told of (its macro) and may use in plain C.
    // Left out: F16C, LZCNT and MOVBE, which every CPU with AVX2 has, and
    // AVX512-FP16 and AVX-VNNI, which clang 14 cannot ask for and which
    // only half floats and int8 dot products, none here, would use.
#ifdef __SSE4_2__
    NEED("sse4.2");
#endif
#ifdef __POPCNT__
    NEED("popcnt");
#endif
#ifdef __AVX__
    NEED("avx");
#endif
#ifdef __AVX2__
    NEED("avx2");
#endif
#ifdef __FMA__
    NEED("fma");
#endif
#ifdef __BMI__
    NEED("bmi");
#endif
#ifdef __BMI2__
    NEED("bmi2");
#endif
#ifdef __AVX512F__
    NEED("avx512f");
#endif
#ifdef __AVX512BW__
    NEED("avx512bw");
#endif
#ifdef __AVX512CD__
    NEED("avx512cd");
#endif
#ifdef __AVX512DQ__
    NEED("avx512dq");
#endif
#ifdef __AVX512VL__
    NEED("avx512vl");
#endif
#ifdef __AVX512VBMI__
    NEED("avx512vbmi");
#endif
#ifdef __AVX512VBMI2__
    NEED("avx512vbmi2");
#endif
#ifdef __AVX512VNNI__
    NEED("avx512vnni");
#endif
#ifdef __AVX512BITALG__
    NEED("avx512bitalg");
#endif
#ifdef __AVX512VPOPCNTDQ__
    NEED("avx512vpopcntdq");
#endif
#ifdef __AVX512IFMA__
    NEED("avx512ifma");
#endif
#ifdef __AVX512BF16__
    NEED("avx512bf16");
#endif
#ifdef __GFNI__
    NEED("gfni");
#endif
    if (!missing) return;
    fprintf(stderr,
            "tinygpt: this tinygpt was compiled for another CPU (make builds for the one it runs on), with %s, "
            "which this CPU lacks: run `make` here, or `make PORTABLE=1` for one binary that runs on any x86-64\n",
            missing);
    exit(EXIT_RUNTIME);
}
