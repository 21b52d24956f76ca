// launcher.c: the main of the portable build (`make PORTABLE=1`): one x86-64
// binary that carries the whole program three times, each copy compiled for
// one kernel path, and runs the widest this CPU has:
//   avx512   x86-64-v4 (AVX-512 F, BW, CD, DQ, VL)   tinygpt_main_avx512
//   avx2     x86-64-v3 (AVX2, FMA, BMI2, ...)        tinygpt_main_avx2
//   generic  any x86-64 (SSE2)                       tinygpt_main_generic
// or the widest at or below TINYGPT_KERNELS, which caps it (as
// ONEDNN_MAX_CPU_ISA caps oneDNN's), so that one AVX-512 machine runs and
// tests every path.
//
// Reading order: file 43b, after main.c, and only for packagers: the
// Makefile links each copy into one object whose only global symbol is its
// main, renamed (objcopy), so the three copies' functions never meet.
// This file is compiled for any x86-64 and must stay so: it runs before
// anything has checked what the CPU can do.
#include <stdlib.h>
#include <string.h>

int tinygpt_main_avx512(int argc, char **argv);
int tinygpt_main_avx2(int argc, char **argv);
int tinygpt_main_generic(int argc, char **argv);

typedef struct {
    const char *name;
    int (*main)(int argc, char **argv);
    int cpu_has_it;
} KernelPath;

int main(int argc, char **argv) {
    // Widest first. __builtin_cpu_supports asks cpuid, and for the vector
    // registers also whether the operating system saves them (xgetbv).
    const KernelPath paths[] = {
        {"avx512", tinygpt_main_avx512, __builtin_cpu_supports("x86-64-v4")},
        {"avx2", tinygpt_main_avx2, __builtin_cpu_supports("x86-64-v3")},
        {"generic", tinygpt_main_generic, 1},
    };
    const int count = (int)(sizeof paths / sizeof paths[0]);
    // The cap's place in the list; a name that is no path here leaves it at
    // the widest, whose copy then refuses it with the one message every
    // build gives (kernel_path_check, fma_peak.c).
    const char *cap = getenv("TINYGPT_KERNELS");
    int first = 0;
    for (int i = 0; cap && i < count; i++)
        if (strcmp(cap, paths[i].name) == 0) first = i;
    for (int i = first; i < count; i++)
        if (paths[i].cpu_has_it) return paths[i].main(argc, argv);
    return paths[count - 1].main(argc, argv);  // not reached: generic runs anywhere
}
