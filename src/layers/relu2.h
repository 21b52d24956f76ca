// relu2.h: the ReLU^2 activation (`--mlp relu2`), forward and backward:
// relu(x)^2 in place of the MLP's GELU.
//
// Reading order: file 9b, after gelu.h (file 9), the activation it
// replaces, and before mlp.h, which calls either. So et al. (2021,
// "Primer: Searching for Efficient Transformers for Language Modeling")
// found squaring ReLU's output the best of the activations their search
// tried in the feed-forward layer, and the modded-nanoGPT speedrun uses it:
//   relu2(x) = max(x, 0)^2
// It is 0 for x <= 0, like ReLU, but grows like x^2 above it, and its
// slope, 2 max(x, 0), does not jump at 0 (ReLU's jumps from 0 to 1 there);
// it has a corner there instead, its own slope jumping from 0 to 2.
// No erf, no exp: two multiplies an element. A NaN stays NaN both ways, as
// in torch.relu, so a broken input reaches the loss.
//
// One version, plain loops, that training and `make REFERENCE=1` both run:
// each element's result depends on that element alone, so a row alone
// (sampling) gives the same bits as inside a batch (training), on any
// thread count.
#ifndef TINYGPT_RELU2_H
#define TINYGPT_RELU2_H

#include <stddef.h>

// out[i] = max(x, 0)^2,  x = inp[i], for i < n
void relu2_forward(float *out, const float *inp, size_t n);
// Given dout = dloss/dout (derived in relu2.c):
// dinp[i] = dout[i] * 2 max(x, 0),  x = inp[i]
// Written, not added to; dinp may be the same buffer as dout (in place).
void relu2_backward(float *dinp, const float *inp, const float *dout, size_t n);
// Both in one pass: out as relu2_forward, dinp as relu2_backward, the same
// bits (the MLP's backward, which needs the output again); in place too.
void relu2_forward_backward(float *out, float *dinp, const float *inp, const float *dout, size_t n);

#endif
