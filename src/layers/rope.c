// rope.c: rotary position embeddings, forward and backward derived (see
// rope.h).
#include "rope.h"

#include <math.h>
#include <stddef.h>

// rotate: the pairs (i, i + HS/2) of every head of the q and k parts of
// rows[N,3C], each by its angle theta(t, i), times "direction" (+1 the
// forward rotation, -1 its inverse). Row r sits at position
// t = first_pos + r % T, so the rows of one position (one in each of the
// B windows) share their angles: each cos and sin is computed once for
// all of them, into cos_t and sin_t, and the positions are shared among
// the threads. The loop over a head's pairs then reads and writes
// consecutive floats, which the compiler turns into vector instructions.
// Each rotated number is one product rounded and one fused multiply-add,
// said (fmaf): left to -ffp-contract=fast, x1 c - x2 s could fuse either
// product, and gcc fused another for aarch64 than for x86 (make arm-check).
static void rotate(float *rows, int N, int T, int first_pos, int C, int NH, float direction) {
    const int HS = C / NH, half = HS / 2;
    const int positions = N < T ? N : T;
#pragma omp parallel for schedule(static) if ((size_t)N * C >= (1 << 15))
    for (int t0 = 0; t0 < positions; t0++) {
        const int t = first_pos + t0;
        float cos_t[half], sin_t[half];
        for (int i = 0; i < half; i++) {
            const float inv_freq = powf(ROPE_BASE, -2.0f * (float)i / (float)HS);  // base^(-2i/HS)
            const float angle = (float)t * inv_freq;
            cos_t[i] = cosf(angle);
            sin_t[i] = direction * sinf(angle);
        }
        for (int r = t0; r < N; r += T) {
            float *row = rows + (size_t)r * 3 * C;
            for (int head = 0; head < 2 * NH; head++) {  // q's NH heads, then k's: the first 2C columns
                float *x = row + (size_t)head * HS;
                for (int i = 0; i < half; i++) {
                    const float x1 = x[i], x2 = x[i + half];  // 1.
                    x[i] = fmaf(x1, cos_t[i], -(x2 * sin_t[i]));  // 2.
                    x[i + half] = fmaf(x1, sin_t[i], x2 * cos_t[i]);
                }
            }
        }
    }
}

void rope_forward(float *qkv, int N, int T, int first_pos, int C, int NH) {
    rotate(qkv, N, T, first_pos, C, NH, 1.0f);
}

// Backward, derived. Each pair is a 2x2 rotation of its own two inputs:
//   [y1]   [c  -s] [x1]
//   [y2] = [s   c] [x2]  = R [x1, x2]^T
// so d loss / d x = R^T d loss / d y (the chain rule for a linear map is
// its transpose), and the transpose of a rotation is the rotation by the
// opposite angle (cos(-a) = c, sin(-a) = -s):
//   dx1 =  c dy1 + s dy2
//   dx2 = -s dy1 + c dy2
// which is the forward's loop with s negated. The gradient is written over
// dqkv's q and k parts, in place: each pair reads its two gradients before
// it writes them.
void rope_backward(float *dqkv, int N, int T, int first_pos, int C, int NH) {
    rotate(dqkv, N, T, first_pos, C, NH, -1.0f);
}
