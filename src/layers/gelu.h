// gelu.h: the GELU activation of the transformer's MLP, forward and backward.
//
// Reading order: file 9, after residual.h, the last piece the MLP (file
// 10) needs. mlp.c calls the fast versions; which_kernels.h calls the reference ones
// itself in `make REFERENCE=1` builds, which run the MLP's steps one by one.
// GELU (Gaussian Error Linear Unit) weighs each number by the chance that a
// standard normal sample falls below it:
//   gelu(x) = x Phi(x),   Phi(x) = 0.5 (1 + erf(x / sqrt 2))   the normal CDF
// so it passes large positive x unchanged, silences large negative x, and
// bends smoothly in between (where ReLU has a corner at 0).
// This is the exact (erf) form, PyTorch's nn.GELU() default. GPT-2 used a
// tanh approximation of it ("gelu_new" in Hugging Face's config.json, PyTorch's
// nn.GELU(approximate='tanh')), which `--arch gpt2` may take (`--mlp gelu_tanh`):
//   gelu_tanh(x) = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
// within 5e-4 of the exact form everywhere (tanh stands in for erf; the cubic
// term fits the curve), and cheaper where erf was dear. Its own pair below.
//
// Two versions of each pass, as in linear.h:
// - gelu_*_reference (gelu.c): the formula with libm's erff and expf, and
//   the backward derived. Read these now.
// - gelu_forward / gelu_forward_backward (fast.h; gelu_fast.c, file 21): the same formula with fast_erff
//   (fasterf.h) and fast_expf (fastexp.h), in their vector forms,
//   spread over OpenMP threads for large n. Within 5e-7 max(1, |x|) of the
//   reference forward and 5e-7 max(1, |dout|) backward (measured 2.4e-7);
//   the tests hold them to that.
// Element i's result depends only on element i: a row alone (sampling)
// gives the same bits as inside a batch (training), on any thread count.
// NaN in gives NaN out. Infinite x gives a NaN gradient in both versions
// (x phi(x) is inf * 0); no finite x does.
#ifndef TINYGPT_GELU_H
#define TINYGPT_GELU_H

#include <stddef.h>

// The constants of the normal distribution both versions use.
#define GELU_INV_SQRT2 0.70710678118654752f     // 1 / sqrt(2)
#define GELU_INV_SQRT_2PI 0.39894228040143268f  // 1 / sqrt(2 pi)

// out[i] = 0.5 * x * (1 + erf(x / sqrt(2))),  x = inp[i], for i < n
void gelu_forward_reference(float *out, const float *inp, size_t n);
// The derivative of x Phi(x) is Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi)
// the normal density (derived in gelu.c), so given dout = dloss/dout:
// dinp[i] = dout[i] * (Phi(x) + x * phi(x)),  x = inp[i]
// Written, not added to; dinp may be the same buffer as dout (in place).
void gelu_backward_reference(float *dinp, const float *inp, const float *dout, size_t n);

// GPT-2's tanh approximation, the same four functions.
#define GELU_SQRT_2_OVER_PI 0.79788456080286536f  // sqrt(2 / pi)
#define GELU_TANH_CUBIC 0.044715f                 // GPT-2's coefficient of x^3
// out[i] = 0.5 * x * (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3),  x = inp[i]
void gelu_tanh_forward_reference(float *out, const float *inp, size_t n);
// dinp[i] = dout[i] * (0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'),
//   u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)      (derived in gelu.c)
// Written, not added to; dinp may be the same buffer as dout (in place).
// Beyond |x| = 1e19, x^2 overflows and the slope is not finite.
void gelu_tanh_backward_reference(float *dinp, const float *inp, const float *dout, size_t n);

#endif
