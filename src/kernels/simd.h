// simd.h: 16-float vectors for the one kernel that chooses its own
// instructions, the register tile of tile.h.
//
// Reading order: with linear.h (file 6). The type is GCC/clang's vector
// extension: arithmetic on a vec16 is element-wise, a float operand is
// broadcast, and the compiler emits AVX-512 (or two AVX2 halves) for it.
// Everywhere else tinygpt leaves vectorisation to the compiler.
#ifndef TINYGPT_SIMD_H
#define TINYGPT_SIMD_H

#include <string.h>

typedef float vec16 __attribute__((vector_size(64)));

// Unaligned load and store; memcpy is how C says "these bytes, any alignment".
static inline vec16 load16(const float *p) {
    vec16 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void store16(float *p, vec16 v) { memcpy(p, &v, sizeof v); }

// KEEP_IN_REGISTER: an empty asm statement that the compiler must assume
// reads and changes "v". It stops gcc from folding a vector's load into
// every multiply-add that uses it, which multiplies the loads and halves the
// matmul's speed. Only with AVX-512, where a vec16 fits one register.
#if defined(__AVX512F__)
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#define KEEP_IN_REGISTER(v) ((void)0)
#endif

#endif
