// test_rng.c: tests for src/base/rng.c (the seeded stream and the dropout
// hash).
//
// The statistical tests use fixed seeds, so they are deterministic: each
// tolerance below is several standard errors wide, so a correct generator
// passes with any seed, and a broken one (a stuck bit, an off-by-one range)
// fails by far more than the tolerance.
#include <math.h>

#include "rng.h"
#include "tests.h"

// Samples per statistical test, and the tolerances they justify.
enum { N_SAMPLES = 200000 };
// Mean of N_SAMPLES uniforms: standard error sqrt(1/12 / N) = 0.00065.
static const double UNIFORM_MEAN_TOL = 0.005;
// Mean and variance of N_SAMPLES normals: standard errors 1/sqrt(N) = 0.0022
// and sqrt(2/N) = 0.0032.
static const double NORMAL_MOMENT_TOL = 0.02;
// Each of 10 buckets of rng_below(10) expects N/10 = 20000 draws, standard
// deviation about 134: allow 5%, about 7 standard deviations.
static const double BUCKET_REL_TOL = 0.05;
// Mean of DROPOUT_SAMPLES dropout uniforms: standard error 0.009.
enum { DROPOUT_SAMPLES = 1000 };
static const double DROPOUT_MEAN_TOL = 0.05;

START_TEST(the_same_seed_gives_the_same_stream) {
    Rng a, b;
    rng_init(&a, 1234);
    rng_init(&b, 1234);
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(rng_u64(&a), rng_u64(&b));
}
END_TEST

START_TEST(different_seeds_give_different_streams) {
    // Nearby seeds, including 0, must not give the same (or shifted) streams.
    const uint64_t seeds[] = {0, 1, 2, 3, 42, 1ull << 63};
    enum { N_SEEDS = sizeof seeds / sizeof seeds[0], N_DRAWS = 8 };
    uint64_t first[N_SEEDS][N_DRAWS];
    for (int s = 0; s < N_SEEDS; s++) {
        Rng rng;
        rng_init(&rng, seeds[s]);
        for (int i = 0; i < N_DRAWS; i++) first[s][i] = rng_u64(&rng);
    }
    for (int s = 0; s < N_SEEDS; s++)
        for (int t = s + 1; t < N_SEEDS; t++)
            for (int i = 0; i < N_DRAWS; i++)
                for (int j = 0; j < N_DRAWS; j++)
                    ck_assert_msg(first[s][i] != first[t][j], "seeds %d and %d share a draw", s, t);
}
END_TEST

START_TEST(seed_zero_gives_a_working_stream) {
    Rng rng;
    rng_init(&rng, 0);
    ck_assert_uint_ne(rng.state, 0);
    uint64_t any_bits = 0;
    for (int i = 0; i < 100; i++) any_bits |= rng_u64(&rng);
    ck_assert_uint_eq(any_bits, UINT64_MAX);  // every bit position is set at least once
}
END_TEST

START_TEST(uniform_stays_in_zero_one_with_mean_one_half) {
    Rng rng;
    rng_init(&rng, 7);
    double sum = 0;
    float lo = 1, hi = 0;
    for (int i = 0; i < N_SAMPLES; i++) {
        float u = rng_uniform(&rng);
        ck_assert_msg(u >= 0.0f && u < 1.0f, "draw %d is %.9g", i, (double)u);
        lo = fminf(lo, u);
        hi = fmaxf(hi, u);
        sum += u;
    }
    ck_assert_double_eq_tol(sum / N_SAMPLES, 0.5, UNIFORM_MEAN_TOL);
    ck_assert_float_lt(lo, 0.001f);  // it reaches both ends of the interval
    ck_assert_float_gt(hi, 0.999f);
}
END_TEST

START_TEST(below_stays_in_range_and_is_roughly_uniform) {
    enum { N_BUCKETS = 10 };
    Rng rng;
    rng_init(&rng, 99);
    long counts[N_BUCKETS] = {0};
    for (int i = 0; i < N_SAMPLES; i++) {
        uint64_t k = rng_below(&rng, N_BUCKETS);
        ck_assert_uint_lt(k, N_BUCKETS);
        counts[k]++;
    }
    double expected = (double)N_SAMPLES / N_BUCKETS;
    for (int k = 0; k < N_BUCKETS; k++) {
        ck_assert_msg(fabs((double)counts[k] - expected) <= BUCKET_REL_TOL * expected,
                      "bucket %d has %ld draws, expected about %.0f", k, counts[k], expected);
    }
}
END_TEST

START_TEST(below_handles_one_and_huge_ranges) {
    Rng rng;
    rng_init(&rng, 5);
    for (int i = 0; i < 100; i++) ck_assert_uint_eq(rng_below(&rng, 1), 0);
    // With n = 2^64 - 1 the top bit must still vary (no 32-bit truncation).
    uint64_t top_bits = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t k = rng_below(&rng, UINT64_MAX);
        ck_assert_uint_lt(k, UINT64_MAX);
        top_bits |= k >> 63;
    }
    ck_assert_uint_eq(top_bits, 1);
}
END_TEST

START_TEST(normal_has_mean_zero_and_variance_one) {
    Rng rng;
    rng_init(&rng, 2024);
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < N_SAMPLES; i++) {
        float z = rng_normal(&rng);
        ck_assert_msg(isfinite(z), "draw %d is %g", i, (double)z);
        sum += z;
        sum_sq += (double)z * z;
    }
    double mean = sum / N_SAMPLES;
    double variance = sum_sq / N_SAMPLES - mean * mean;
    ck_assert_double_eq_tol(mean, 0.0, NORMAL_MOMENT_TOL);
    ck_assert_double_eq_tol(variance, 1.0, NORMAL_MOMENT_TOL);
}
END_TEST

START_TEST(dropout_uniform_is_a_pure_function_of_key_and_index) {
    enum { N = DROPOUT_SAMPLES };
    const uint64_t key = 0xC0FFEE;
    float forward[N], backward[N];
    // The same (key, index) gives the same number whatever order we ask in,
    // which is what makes the dropout mask independent of the thread count.
    for (int i = 0; i < N; i++) forward[i] = dropout_uniform(key, (uint64_t)i);
    for (int i = N - 1; i >= 0; i--) backward[i] = dropout_uniform(key, (uint64_t)i);
    int same_as_next_key = 0;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        ck_assert_float_eq(forward[i], backward[i]);
        ck_assert_msg(forward[i] >= 0.0f && forward[i] < 1.0f, "index %d gives %.9g", i, (double)forward[i]);
        same_as_next_key += forward[i] == dropout_uniform(key + 1, (uint64_t)i);
        sum += forward[i];
    }
    ck_assert_int_le(same_as_next_key, 1);  // another key gives another mask
    ck_assert_double_eq_tol(sum / N, 0.5, DROPOUT_MEAN_TOL);
}
END_TEST

Suite *rng_suite(void) {
    Suite *s = suite_create("rng");
    TCase *stream = tcase_create("stream");
    tcase_add_test(stream, the_same_seed_gives_the_same_stream);
    tcase_add_test(stream, different_seeds_give_different_streams);
    tcase_add_test(stream, seed_zero_gives_a_working_stream);
    suite_add_tcase(s, stream);

    TCase *dist = tcase_create("distributions");
    tcase_add_test(dist, uniform_stays_in_zero_one_with_mean_one_half);
    tcase_add_test(dist, below_stays_in_range_and_is_roughly_uniform);
    tcase_add_test(dist, below_handles_one_and_huge_ranges);
    tcase_add_test(dist, normal_has_mean_zero_and_variance_one);
    tcase_add_test(dist, dropout_uniform_is_a_pure_function_of_key_and_index);
    suite_add_tcase(s, dist);
    return s;
}
