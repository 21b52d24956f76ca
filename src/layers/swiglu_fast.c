// swiglu_fast.c: SwiGLU, the fast versions (see swiglu.h): swiglu.c's
// formulas, term for term, on fast_exp_vec, a vector of channels at a time.
//
// Reading order: file 21a, after gelu_fast.c, which runs GELU the same
// way, and swiglu.c (file 9c), the formulas these must match. The one
// approximation is exp's (within about 1e-7 relative, fastexp.h); the
// reference calls libm's expf once a channel, a call the compiler cannot
// vectorise, and spent ~11% of an AVX2 step of the default gpt with
// `--mlp swiglu` in it.
//
// Each row's H channels run in pieces of a vector (simd.h's lanes_left),
// the last perhaps shorter: a channel's bits do not depend on the piece.
// Rows are independent: each pass's loop over them is an orphaned `omp
// for`, in a region of its own only when one pays (parallel.h), as GELU's.
#include <stddef.h>

#include "fast.h"
#include "fastexp.h"
#include "parallel.h"
#include "simd.h"

// Below this many channels (one row when sampling, say), waking the other
// threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

// sigmoid(g) = 1 / (1 + e^-g) in each lane
static inline vec sigmoid_vec(vec g) { return 1.0f / (1.0f + fast_exp_vec(-g)); }

// out[N,H] = silu(g) * u, g and u each row's two halves of fc_out[N,2H]
static void swiglu_forward_rows(float *out, const float *fc_out, int N, int H) {
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = fc_out + (size_t)n * 2 * H, *u = g + H;  // this row's gate and up halves
        float *out_n = out + (size_t)n * H;
        for (int c = 0; c < H; c += VEC_FLOATS) {
            const int count = lanes_left((size_t)H, (size_t)c);
            const vec g_c = load_upto(g + c, count);
            store_upto(out_n + c, g_c * sigmoid_vec(g_c) * load_upto(u + c, count), count);
        }
    }
}

void swiglu_forward(float *out, const float *fc_out, int N, int H) {
    RUN_SHARED((size_t)N * H, MIN_PARALLEL_ELEMENTS, swiglu_forward_rows(out, fc_out, N, H));
}

// dg = dout u s (1 + g (1 - s)) and du = dout g s, s = sigmoid(g), as
// swiglu.c derives them
static void swiglu_backward_rows(float *dfc_out, const float *dout, const float *fc_out, int N, int H) {
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *g = fc_out + (size_t)n * 2 * H, *u = g + H;
        const float *dout_n = dout + (size_t)n * H;
        float *dg = dfc_out + (size_t)n * 2 * H, *du = dg + H;
        for (int c = 0; c < H; c += VEC_FLOATS) {
            const int count = lanes_left((size_t)H, (size_t)c);
            const vec g_c = load_upto(g + c, count), d_c = load_upto(dout_n + c, count);
            const vec s = sigmoid_vec(g_c);
            store_upto(dg + c, d_c * load_upto(u + c, count) * s * (1.0f + g_c * (1.0f - s)), count);
            store_upto(du + c, d_c * g_c * s, count);
        }
    }
}

void swiglu_backward(float *dfc_out, const float *dout, const float *fc_out, int N, int H) {
    RUN_SHARED((size_t)N * H, MIN_PARALLEL_ELEMENTS, swiglu_backward_rows(dfc_out, dout, fc_out, N, H));
}
