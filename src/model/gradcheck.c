// gradcheck.c: central finite differences (see gradcheck.h).
#include "gradcheck.h"

#include <math.h>

// h = 1e-2 keeps float32 round-off in f (about 1e-7 relative) small next to
// the difference it divides, while the O(h^2) truncation error stays < 1e-4.
const GradCheckTolerance GRADCHECK_FLOAT32 = {.h = 1e-2, .atol = 2e-3, .rtol = 2e-2};

GradCheckResult gradcheck(LossFn f, void *ctx, float *x, const float *analytic, size_t n,
                          GradCheckTolerance tol) {
    GradCheckResult r = {0};
    double worst_excess = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        float saved = x[i];
        x[i] = saved + (float)tol.h;
        double plus = f(ctx);
        x[i] = saved - (float)tol.h;
        double minus = f(ctx);
        x[i] = saved;
        // Divide by the step actually taken (float rounding of saved +- h).
        double step = (double)(saved + (float)tol.h) - (double)(saved - (float)tol.h);
        double numeric = (plus - minus) / step;
        double err = fabs((double)analytic[i] - numeric);
        double scale = fmax(fmax(fabs(numeric), fabs((double)analytic[i])), 1e-8);
        double excess = err - (tol.atol + tol.rtol * fabs(numeric));
        if (err > r.max_abs_err) r.max_abs_err = err;
        if (err / scale > r.max_rel_err) r.max_rel_err = err / scale;
        if (excess > 0 || !isfinite(err)) r.failures++;
        if (excess > worst_excess || !isfinite(err)) {
            worst_excess = isfinite(err) ? excess : INFINITY;
            r.worst_index = i;
            r.worst_analytic = analytic[i];
            r.worst_numeric = numeric;
        }
    }
    return r;
}
