// fastexp.h: e^x in plain arithmetic, so a loop of them vectorises.
//
// Reading order: file 19, with softmax.h and attention_fast.c. The softmaxes call exp once per
// attention weight and once per vocabulary entry per position: about two
// million calls a step at the L size of `make bench`. libm's expf is a
// function call the compiler cannot vectorise (without -ffast-math, which
// tinygpt does not use), so the softmax loops spent most of their time in it.
//
// The method (Cody and Waite, with the polynomial of Cephes' expf):
//   1. n = round(x / ln 2), r = x - n ln 2, so |r| <= ln(2)/2 and e^x = 2^n e^r
//      (ln 2 in two parts, so that n ln 2 is subtracted almost exactly);
//   2. e^r from its degree-7 Taylor-like polynomial, fitted for that range;
//   3. 2^n written straight into a float's exponent bits.
// Relative error below 1e-7 (about one unit in the last place; measured
// 8e-8 over [-87, 88]); below -87 the result is about 1e-38 instead of 0,
// which no softmax sum can tell apart from 0. NaN stays NaN.
#ifndef TINYGPT_FASTEXP_H
#define TINYGPT_FASTEXP_H

#include <stdint.h>
#include <string.h>

#include "simd.h"

static inline float fast_expf(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    // round to nearest by adding and subtracting 1.5 * 2^23
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float poly = 1.9875691500e-4f;
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const float e_r = poly * r * r + r + 1.0f;
    // 2^n as a float. A NaN x leaves n NaN, and converting NaN to an integer
    // is undefined: convert 0 instead; e_r is NaN, so NaN still comes out.
    const int32_t bits = ((int32_t)(n == n ? n : 0.0f) + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return e_r * two_n;
}

// fast_expf in each lane of a vector, step for step, so with its bits on
// every path (the same expressions, which the compiler fuses into the same
// multiply-adds; tests/test_tile.c holds the two together): written out
// for the softmaxes' loops, where gcc made fast_expf's two clamps into
// blends of precomputed results and the NaN guard into a compare and a
// masked multiply, ~35 vector instructions where these take ~22. A 128 x 128
// head's softmax 4.1 -> 3.3 us on AVX-512, 7.7 -> 5.3 on AVX2 (one Sapphire
// Rapids core).
static inline vec fast_exp_vec(vec x) {
    x = clamp_vec(x, -87.0f, 88.0f);
    const vec n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const vec r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    vec poly = splat(1.9875691500e-4f);
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const vec e_r = poly * r * r + r + 1.0f;
    return e_r * (vec)((to_int_vec(n) + 127) << 23);  // times 2^n
}

#endif
