// test_sampler.c: temperature / top-k sampling and the sliding context.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "sample.h"
#include "tests.h"

// With 20000 draws, a frequency's standard error is at most 0.0035; 0.015 is
// over four of them, so a correct sampler fails this about never.
#define FREQUENCY_TOLERANCE 0.015
#define DRAWS 20000

START_TEST(greedy_sampling_picks_the_largest_logit_without_drawing) {
    float logits[5] = {0.1f, 2.0f, -1.0f, 1.9f, 2.0f};
    float scratch[5];
    Rng rng;
    rng_init(&rng, 7);
    Rng before = rng;
    ck_assert_int_eq(sample_token(logits, 5, 0.0f, 0, &rng, scratch), 1);  // first of the tied maxima
    ck_assert(rng.state == before.state);
}
END_TEST

START_TEST(sampling_frequencies_match_the_softmax_of_logits_over_temperature) {
    float logits[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    float scratch[4];
    const float temperature = 0.7f;
    double expected[4], total = 0.0;
    for (int v = 0; v < 4; v++) total += expected[v] = exp(logits[v] / temperature);
    int counts[4] = {0};
    Rng rng;
    rng_init(&rng, 42);
    for (int i = 0; i < DRAWS; i++) counts[sample_token(logits, 4, temperature, 0, &rng, scratch)]++;
    for (int v = 0; v < 4; v++)
        ck_assert_double_eq_tol((double)counts[v] / DRAWS, expected[v] / total, FREQUENCY_TOLERANCE);
}
END_TEST

START_TEST(top_k_never_draws_outside_the_k_likeliest_tokens) {
    float logits[6] = {0.5f, 3.0f, 0.1f, 2.5f, -2.0f, 2.9f};
    float scratch[6];
    int counts[6] = {0};
    Rng rng;
    rng_init(&rng, 3);
    for (int i = 0; i < DRAWS; i++) counts[sample_token(logits, 6, 1.0f, 3, &rng, scratch)]++;
    ck_assert_int_eq(counts[0] + counts[2] + counts[4], 0);
    ck_assert_int_gt(counts[1], 0);
    ck_assert_int_gt(counts[3], 0);
    ck_assert_int_gt(counts[5], 0);
    // Renormalised over the three kept tokens.
    double z = exp(3.0) + exp(2.5) + exp(2.9);
    ck_assert_double_eq_tol((double)counts[3] / DRAWS, exp(2.5) / z, FREQUENCY_TOLERANCE);
}
END_TEST

START_TEST(the_same_seed_draws_the_same_tokens_and_another_seed_does_not) {
    float logits[8] = {0, 0.2f, 0.4f, 0.1f, 0.3f, 0.05f, 0.25f, 0.15f};
    float scratch[8];
    int first[64], second[64], other[64];
    Rng a, b, c;
    rng_init(&a, 11);
    rng_init(&b, 11);
    rng_init(&c, 12);
    for (int i = 0; i < 64; i++) {
        first[i] = sample_token(logits, 8, 1.0f, 0, &a, scratch);
        second[i] = sample_token(logits, 8, 1.0f, 0, &b, scratch);
        other[i] = sample_token(logits, 8, 1.0f, 0, &c, scratch);
    }
    ck_assert_mem_eq(first, second, sizeof first);
    ck_assert(memcmp(first, other, sizeof first) != 0);
}
END_TEST

// A tiny random model for the context tests.
static void tiny_model(Model *m) {
    ModelConfig cfg = {.vocab_size = 6, .block_size = 4, .n_embd = 8, .n_head = 2, .dropout = 0.0f};
    model_init(m, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 5);
    model_init_weights(m, &rng);
}

START_TEST(a_context_longer_than_the_block_slides_to_its_last_block_size_tokens) {
    Model m;
    tiny_model(&m);
    int context[7] = {1, 2, 3, 4, 5, 0, 2};
    float slid[6], tail[6];
    memcpy(slid, next_token_logits(&m, context, 7), sizeof slid);
    memcpy(tail, next_token_logits(&m, context + 3, 4), sizeof tail);
    ck_assert_mem_eq(slid, tail, sizeof slid);
    // and the first tokens really are forgotten: changing them changes nothing
    context[0] = 5;
    ck_assert_mem_eq(next_token_logits(&m, context, 7), tail, sizeof tail);
    model_free(&m);
}
END_TEST

START_TEST(next_token_logits_are_the_last_position_of_a_full_forward_pass) {
    Model m;
    tiny_model(&m);
    int context[3] = {4, 0, 3};
    float logits[6];
    memcpy(logits, next_token_logits(&m, context, 3), sizeof logits);
    model_forward(&m, context, NULL, 1, 3, false, 0);
    ck_assert_mem_eq(logits, m.acts.logits + 2 * 6, sizeof logits);
    model_free(&m);
}
END_TEST

Suite *sampler_suite(void) {
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_add_test(tc, greedy_sampling_picks_the_largest_logit_without_drawing);
    tcase_add_test(tc, sampling_frequencies_match_the_softmax_of_logits_over_temperature);
    tcase_add_test(tc, top_k_never_draws_outside_the_k_likeliest_tokens);
    tcase_add_test(tc, the_same_seed_draws_the_same_tokens_and_another_seed_does_not);
    tcase_add_test(tc, a_context_longer_than_the_block_slides_to_its_last_block_size_tokens);
    tcase_add_test(tc, next_token_logits_are_the_last_position_of_a_full_forward_pass);
    suite_add_tcase(s, tc);
    return s;
}
