// swiglu.c: SwiGLU, silu(g) * u, the reference versions: forward, and the
// backward derived (see swiglu.h). The fast versions are in swiglu_fast.c (file 21a).
#include "swiglu.h"

#include <math.h>
#include <stddef.h>

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

void swiglu_forward_reference(float *out, const float *fc_out, int N, int H) {
    for (int n = 0; n < N; n++) {
        const float *g = fc_out + (size_t)n * 2 * H, *u = g + H;  // this row's gate and up halves
        float *out_n = out + (size_t)n * H;
        for (int c = 0; c < H; c++) out_n[c] = g[c] * sigmoid(g[c]) * u[c];
    }
}

// Backward, derived, for one channel with s = sigmoid(g):
//   out = silu(g) u,  silu(g) = g s
// u enters as a factor:
//   d out / d u = silu(g)                          ->  du = dout silu(g)
// g enters through silu, whose slope is the product rule on g s, with
// d s / d g = s (1 - s) (the sigmoid's own slope):
//   d silu / d g = s + g s (1 - s) = s (1 + g (1 - s))
//   d out / d g  = u s (1 + g (1 - s))              ->  dg = dout u s (1 + g (1 - s))
// Each output has one g and one u, so nothing sums: dfc_out is written.
void swiglu_backward_reference(float *dfc_out, const float *dout, const float *fc_out, int N, int H) {
    for (int n = 0; n < N; n++) {
        const float *g = fc_out + (size_t)n * 2 * H, *u = g + H;
        const float *dout_n = dout + (size_t)n * H;
        float *dg = dfc_out + (size_t)n * 2 * H, *du = dg + H;
        for (int c = 0; c < H; c++) {
            const float s = sigmoid(g[c]);
            dg[c] = dout_n[c] * u[c] * s * (1.0f + g[c] * (1.0f - s));
            du[c] = dout_n[c] * g[c] * s;
        }
    }
}
