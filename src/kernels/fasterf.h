// fasterf.h: erf(x) in plain arithmetic, a vector of floats at a time.
//
// Reading order: file 21, with gelu_fast.c, its one user. GELU needs erf once per
// element of the MLP's hidden layer, forward and backward: 4C numbers per
// position, millions a step. libm's erff is a function call the compiler
// cannot vectorise (without -ffast-math, which tinygpt does not use).
//
// The method: the rational approximation Eigen uses for float erf
// (generic_fast_erf_float; XLA and TVM use the same coefficients),
//   erf(x) = x P(x^2) / Q(x^2)   for |x| <= 4, P of degree 6 and Q of degree 4,
// and erf(x) = +-1 beyond: 1 - erf(4) = 1.5e-8 is below half a float's step
// at 1 (6e-8), so float32 cannot tell erf(4) from 1 anyway. It needs no exp,
// and being x times an even function it is odd and accurate near 0, as erf is.
// Max absolute error 4.4e-7 (about seven float steps at 1), measured against
// double-precision erf over every float in [-4.5, 4.5] (libm's erff: 5.8e-8).
// NaN stays NaN: every comparison with NaN is false, so it passes both clamps.
#ifndef TINYGPT_FASTERF_H
#define TINYGPT_FASTERF_H

#include "simd.h"

// erf(x) in each lane of a vector, written on vectors for the reason
// fast_exp_vec is (fastexp.h): from a loop of floats, gcc made the clamps
// blends, two or three instructions each on AVX2, and the AVX2 GELU took
// twice as long an element as it takes on these.
static inline vec fast_erf_vec(vec x) {
    x = clamp_vec(x, -4.0f, 4.0f);
    const vec x2 = x * x;
    vec p = splat(-2.72614225801306e-10f);  // P(x^2), by Horner's rule
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 + -2.10102402082508e-06f;
    p = p * x2 + -5.69250639462346e-05f;
    p = p * x2 + -7.34990630326855e-04f;
    p = p * x2 + -2.95459980854025e-03f;
    p = p * x2 + -1.60960333262415e-02f;
    vec q = splat(-1.45660718464996e-05f);  // Q(x^2)
    q = q * x2 + -2.13374055278905e-04f;
    q = q * x2 + -1.68282697438203e-03f;
    q = q * x2 + -7.37332916720468e-03f;
    q = q * x2 + -1.42647390514189e-02f;
    // Near |x| = 4 the fit overshoots 1 by up to 3.6e-7; clamped, 1 + erf(x)
    // (GELU's 2 Phi) can never be negative or above 2.
    return clamp_vec(x * p / q, -1.0f, 1.0f);
}

// One float's erf: a lane of fast_erf_vec, which computes each lane on its
// own (tests/test_tile.c holds every lane to it, whatever its neighbours).
static inline float fast_erff(float x) { return fast_erf_vec(splat(x))[0]; }

#endif
