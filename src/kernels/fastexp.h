// fastexp.h: e^x in plain arithmetic, a vector of floats at a time.
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

#include "simd.h"

// e^x in each lane of a vector. Written on vectors rather than left to the
// compiler to vectorise from a loop of floats: from that, gcc made the two
// clamps into blends of precomputed results and the NaN case into a
// compare and a masked multiply, ~35 vector instructions an exp where
// these take ~22 (a 128 x 128 head's softmax 4.1 -> 3.3 us on AVX-512,
// 7.7 -> 5.3 on AVX2, one Sapphire Rapids core; the same bits).
static inline vec fast_exp_vec(vec x) {
    x = clamp_vec(x, -87.0f, 88.0f);
    // round to nearest by adding and subtracting 1.5 * 2^23
    const vec n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const vec r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    vec poly = splat(1.9875691500e-4f);
    poly = poly * r + 1.3981999507e-3f;
    poly = poly * r + 8.3334519073e-3f;
    poly = poly * r + 4.1665795894e-2f;
    poly = poly * r + 1.6666665459e-1f;
    poly = poly * r + 5.0000001201e-1f;
    const vec e_r = poly * r * r + r + 1.0f;
    // 2^n as a float: n + 127 in the exponent bits. A NaN x leaves n NaN,
    // which to_int_vec makes some integer; e_r is NaN, so NaN still comes out.
    return e_r * (vec)((to_int_vec(n) + 127) << 23);
}

// One float's e^x: a lane of fast_exp_vec, which computes each lane on its
// own (tests/test_tile.c holds every lane to it, whatever its neighbours).
static inline float fast_expf(float x) { return fast_exp_vec(splat(x))[0]; }

#endif
