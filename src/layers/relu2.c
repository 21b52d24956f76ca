// relu2.c: ReLU^2, forward and backward derived (see relu2.h).
#include "relu2.h"

#include <stddef.h>

// Below this many elements (one row of the hidden layer when sampling, say),
// waking the other threads costs more than the work.
#define MIN_PARALLEL_ELEMENTS (1 << 16)

// relu(x) = max(x, 0), written so that a NaN stays NaN, as in torch.relu
// (NaN < 0 is false): the one definition the three loops below share.
static inline float relu(float x) { return x < 0.0f ? 0.0f : x; }

void relu2_forward(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        const float r = relu(inp[i]);
        out[i] = r * r;
    }
}

// Backward, derived. Each output depends on its own input only:
//   relu2(x) = r^2,  r = relu(x) = max(x, 0)
// (1) the chain rule through the square: d relu2 / dx = 2 r * dr/dx
// (2) dr/dx is 1 for x > 0 and 0 for x < 0; at x = 0, where ReLU has its
//     corner, r = 0 makes the product 0 whichever slope is taken, so
//       relu2'(x) = 2 r dr/dx = 2 max(x, 0)   for every x
// (3) dinp[i] = dout[i] * 2 max(x, 0)
// Written, not added to: fc_out, the activation's input, feeds nothing else.
// In place (dinp == dout) is safe: element i reads dout[i] before it
// writes dinp[i], and reads no other element.
void relu2_backward(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        const float r = relu(inp[i]);
        dinp[i] = dout[i] * 2.0f * r;
    }
}

// The forward again and the backward, in one pass (mlp_backward needs
// both: the forward's output for the projection's weight gradient), so
// fc_out is read once, not twice. Its two lines are relu2_forward's and
// relu2_backward's, so the bits are theirs. In place (dinp == dout) is
// safe, as in relu2_backward.
void relu2_forward_backward(float *out, float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        const float r = relu(inp[i]);
        out[i] = r * r;
        dinp[i] = dout[i] * 2.0f * r;
    }
}
