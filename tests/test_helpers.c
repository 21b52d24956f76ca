// test_helpers.c: small helpers several test files share (see tests.h).
#include <omp.h>

#include "tests.h"

void set_threads(int n) { omp_set_num_threads(n); }

int get_threads(void) { return omp_get_max_threads(); }

void fill_uniform(float *x, size_t n, Rng *rng) {
    for (size_t i = 0; i < n; i++) x[i] = 2.0f * rng_uniform(rng) - 1.0f;
}
