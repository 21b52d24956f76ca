// tests.h: one Check suite per module of src/, collected by test_main.c.
#ifndef TINYGPT_TESTS_H
#define TINYGPT_TESTS_H

#include <check.h>
#include <stddef.h>

#include "rng.h"

Suite *rng_suite(void);
Suite *tokenizer_suite(void);
Suite *data_suite(void);
Suite *encoder_suite(void);
Suite *linear_suite(void);
Suite *attention_suite(void);
Suite *crossentropy_suite(void);
Suite *model_suite(void);
Suite *json_suite(void);
Suite *checkpoint_suite(void);
Suite *sampler_suite(void);
Suite *cli_suite(void);

// Shared helpers (test_helpers.c). The thread count matters to tests that
// prove results do not depend on it, and to finite-difference loops that
// run thousands of tiny passes, where a parallel region costs more than its
// arithmetic.
void set_threads(int n);
int get_threads(void);
// fill_uniform: x[0..n) uniform in [-1, 1).
void fill_uniform(float *x, size_t n, Rng *rng);

#endif
