// gradcheck.h: compare an analytic gradient with central finite differences.
//
// Reading order: file 14. The unit tests prove every backward pass with it,
// and `tinygpt gradcheck` runs it on a whole model.
//
// For each element x[i]:   numeric[i] = (f(x + h e_i) - f(x - h e_i)) / 2h
// and it passes when      |analytic[i] - numeric[i]| <= atol + rtol * |numeric[i]|.
#ifndef TINYGPT_GRADCHECK_H
#define TINYGPT_GRADCHECK_H

#include <stdbool.h>
#include <stddef.h>

// A scalar function of some parameters; "ctx" is the caller's state.
typedef double (*LossFn)(void *ctx);

typedef struct {
    double h;     // finite-difference step
    double atol;  // absolute tolerance
    double rtol;  // relative tolerance
} GradCheckTolerance;

typedef struct {
    double max_abs_err;  // largest |analytic - numeric|
    double max_rel_err;  // largest |analytic - numeric| / max(|numeric|, |analytic|, 1e-8)
    size_t worst_index;  // element with the largest excess over the tolerance
    double worst_analytic, worst_numeric;
    size_t failures;     // elements outside the tolerance
} GradCheckResult;

// Tolerances that fit float32 kernels with a loss of order 1.
extern const GradCheckTolerance GRADCHECK_FLOAT32;

// gradcheck: perturb each of "x[0..n)" in turn (restoring it afterwards) and
// compare against "analytic[0..n)". "f" must recompute the loss from x.
GradCheckResult gradcheck(LossFn f, void *ctx, float *x, const float *analytic, size_t n,
                          GradCheckTolerance tol);

#endif
