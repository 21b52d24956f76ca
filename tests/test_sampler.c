// test_sampler.c: tests for src/commands/sample.c: temperature, top-k and
// top-p sampling (statistics, and determinism per seed), and the generator's
// sliding context, with and without the key/value cache, for card and gpt.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "sample.h"
#include "sanitized.h"
#include "tests.h"

// With 20000 draws, a frequency's standard error is at most 0.0035; 0.015 is
// over four of them, so a correct sampler fails this about never.
#define FREQUENCY_TOLERANCE 0.015
#define DRAWS 20000

START_TEST(greedy_sampling_picks_the_largest_logit_without_drawing) {
    float logits[5] = {0.1f, 2.0f, -1.0f, 1.9f, 2.0f};
    float scratch[2 * 5];
    Rng rng;
    rng_init(&rng, 7);
    Rng before = rng;
    ck_assert_int_eq(sample_token(logits, 5, &(SamplerConfig){0.0f, 0, 1.0f}, &rng, scratch), 1);  // first of the tied maxima
    ck_assert(rng.state == before.state);
}
END_TEST

START_TEST(sampling_frequencies_match_the_softmax_of_logits_over_temperature) {
    float logits[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    float scratch[2 * 4];
    const float temperature = 0.7f;
    double expected[4], total = 0.0;
    for (int v = 0; v < 4; v++) total += expected[v] = exp(logits[v] / temperature);
    int counts[4] = {0};
    Rng rng;
    rng_init(&rng, 42);
    for (int i = 0; i < DRAWS; i++) counts[sample_token(logits, 4, &(SamplerConfig){temperature, 0, 1.0f}, &rng, scratch)]++;
    for (int v = 0; v < 4; v++)
        ck_assert_double_eq_tol((double)counts[v] / DRAWS, expected[v] / total, FREQUENCY_TOLERANCE);
}
END_TEST

START_TEST(top_k_never_draws_outside_the_k_likeliest_tokens) {
    float logits[6] = {0.5f, 3.0f, 0.1f, 2.5f, -2.0f, 2.9f};
    float scratch[2 * 6];
    int counts[6] = {0};
    Rng rng;
    rng_init(&rng, 3);
    for (int i = 0; i < DRAWS; i++) counts[sample_token(logits, 6, &(SamplerConfig){1.0f, 3, 1.0f}, &rng, scratch)]++;
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
    float scratch[2 * 8];
    const SamplerConfig plain = {1.0f, 0, 1.0f};
    int first[64], second[64], other[64];
    Rng a, b, c;
    rng_init(&a, 11);
    rng_init(&b, 11);
    rng_init(&c, 12);
    for (int i = 0; i < 64; i++) {
        first[i] = sample_token(logits, 8, &plain, &a, scratch);
        second[i] = sample_token(logits, 8, &plain, &b, scratch);
        other[i] = sample_token(logits, 8, &plain, &c, scratch);
    }
    ck_assert_mem_eq(first, second, sizeof first);
    ck_assert(memcmp(first, other, sizeof first) != 0);
}
END_TEST

// ---- top-p ---------------------------------------------------------------

// A hand-made distribution: logits log(p) for p = .05 .40 .10 .30 .15, so
// at temperature 1 the probabilities are p (to float rounding).
static const float HAND_P[5] = {0.05f, 0.40f, 0.10f, 0.30f, 0.15f};
#define PROB_TOLERANCE 1e-5

// kept_probs: the normalised distribution sampling_weights gives.
static void kept_probs(const SamplerConfig *s, double probs[5]) {
    float logits[5], weights[5], scratch[5];
    for (int v = 0; v < 5; v++) logits[v] = logf(HAND_P[v]);
    double total = sampling_weights(logits, 5, s, weights, scratch);
    for (int v = 0; v < 5; v++) probs[v] = weights[v] / total;
}

// expect_kept: exactly the tokens of "kept" (a 0/1 mask) survive, with the
// probabilities "expected" (renormalised over them).
static void expect_kept(const SamplerConfig *s, const int kept[5], const double expected[5]) {
    double probs[5];
    kept_probs(s, probs);
    for (int v = 0; v < 5; v++) {
        if (!kept[v]) ck_assert_msg(probs[v] == 0.0, "T %g k %d p %g: token %d kept (%g)", (double)s->temperature,
                                    s->top_k, (double)s->top_p, v, probs[v]);
        else ck_assert_msg(fabs(probs[v] - expected[v]) < PROB_TOLERANCE, "T %g k %d p %g: token %d has %g, want %g",
                           (double)s->temperature, s->top_k, (double)s->top_p, v, probs[v], expected[v]);
    }
}

START_TEST(top_p_keeps_the_smallest_set_of_likeliest_tokens_that_reaches_p) {
    // .40 alone reaches .35; .40 + .30 = .70 reaches .65; .85 reaches .75.
    expect_kept(&(SamplerConfig){1.0f, 0, 0.35f}, (const int[]){0, 1, 0, 0, 0}, (const double[]){0, 1, 0, 0, 0});
    expect_kept(&(SamplerConfig){1.0f, 0, 0.65f}, (const int[]){0, 1, 0, 1, 0},
                (const double[]){0, 0.4 / 0.7, 0, 0.3 / 0.7, 0});
    expect_kept(&(SamplerConfig){1.0f, 0, 0.75f}, (const int[]){0, 1, 0, 1, 1},
                (const double[]){0, 0.4 / 0.85, 0, 0.3 / 0.85, 0.15 / 0.85});
    expect_kept(&(SamplerConfig){1.0f, 0, 0.99f}, (const int[]){1, 1, 1, 1, 1},
                (const double[]){0.05, 0.4, 0.1, 0.3, 0.15});
}
END_TEST

START_TEST(top_p_applies_after_the_temperature_and_after_top_k) {
    // Temperature 0.5 squares the probabilities: .16 .09 .0225 ... of .285,
    // so the first holds .561 and alone reaches p = .55 (at temperature 1
    // it would need the second too).
    expect_kept(&(SamplerConfig){0.5f, 0, 0.55f}, (const int[]){0, 1, 0, 0, 0}, (const double[]){0, 1, 0, 0, 0});
    // Top-k 2 first leaves .4/.7 = .571 and .3/.7 = .429: p = .5 keeps the
    // first only (top-p first would have kept .40 and .30), p = .6 both.
    expect_kept(&(SamplerConfig){1.0f, 2, 0.5f}, (const int[]){0, 1, 0, 0, 0}, (const double[]){0, 1, 0, 0, 0});
    expect_kept(&(SamplerConfig){1.0f, 2, 0.6f}, (const int[]){0, 1, 0, 1, 0},
                (const double[]){0, 0.4 / 0.7, 0, 0.3 / 0.7, 0});
}
END_TEST

START_TEST(top_p_draws_only_the_kept_tokens_in_their_renormalised_proportions) {
    float logits[5], scratch[2 * 5];
    for (int v = 0; v < 5; v++) logits[v] = logf(HAND_P[v]);
    int counts[5] = {0};
    Rng rng;
    rng_init(&rng, 17);
    for (int i = 0; i < DRAWS; i++) counts[sample_token(logits, 5, &(SamplerConfig){1.0f, 0, 0.65f}, &rng, scratch)]++;
    ck_assert_int_eq(counts[0] + counts[2] + counts[4], 0);
    ck_assert_double_eq_tol((double)counts[1] / DRAWS, 0.4 / 0.7, FREQUENCY_TOLERANCE);
}
END_TEST

// The sampler as it was before top-p: softmax(logits / temperature) walked
// against one uniform draw. P = 1 must draw exactly these tokens.
static int plain_softmax_draw(const float *logits, int V, float temperature, Rng *rng) {
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    float w[16];
    double total = 0.0;
    for (int v = 0; v < V; v++) total += w[v] = expf((logits[v] - logits[best]) / temperature);
    double target = rng_uniform(rng) * total, cumulative = 0.0;
    for (int v = 0; v < V; v++)
        if (target < (cumulative += w[v])) return v;
    return best;
}

START_TEST(top_p_of_one_draws_the_same_tokens_as_no_top_p_bit_for_bit) {
    float logits[12], scratch[2 * 12];
    Rng init, a, b;
    rng_init(&init, 4);
    for (int v = 0; v < 12; v++) logits[v] = 3.0f * rng_uniform(&init) - 1.5f;
    rng_init(&a, 99);
    rng_init(&b, 99);
    for (int i = 0; i < 2000; i++) {
        int with_p = sample_token(logits, 12, &(SamplerConfig){0.8f, 0, 1.0f}, &a, scratch);
        int plain = plain_softmax_draw(logits, 12, 0.8f, &b);
        ck_assert_msg(with_p == plain, "draw %d: top-p 1 gave %d, plain softmax %d", i, with_p, plain);
    }
    ck_assert(a.state == b.state);
}
END_TEST

// A tiny random model for the context tests: block size 4; card, or
// (_i = 1 in the loop tests) a gpt of 2 blocks.
enum { TINY_V = 6, TINY_T = 4 };
static void tiny_model(Model *m, Arch arch) {
    ModelConfig cfg = {.vocab_size = TINY_V, .block_size = TINY_T, .n_embd = 8, .n_head = 2, .dropout = 0.0f,
                       .arch = arch, .n_layer = arch == ARCH_GPT ? 2 : 1};
    model_init(m, &cfg, 1, false);
    Rng rng;
    rng_init(&rng, 5);
    model_init_weights(m, &rng);
}

// The logits a plain forward pass gives for the last of tokens[0..n).
static void forward_last_logits(Model *m, const int *tokens, int n, float logits[TINY_V]) {
    model_forward(m, tokens, NULL, 1, n, false, 0);
    memcpy(logits, m->acts.logits + (size_t)(n - 1) * TINY_V, TINY_V * sizeof(float));
}

// got[0..n) is want's, bit for bit; within 1e-5 in a sanitized build, whose
// instrumented loops need not fuse the same multiply-adds (sanitized.h):
// the cache's one-row products and the full pass's are two loops.
static void expect_same_logits(const float *got, const float *want, int n) {
    if (!TINYGPT_SANITIZED) {
        ck_assert_mem_eq(got, want, (size_t)n * sizeof(float));
        return;
    }
    for (int v = 0; v < n; v++)
        ck_assert_msg(fabsf(got[v] - want[v]) <= 1e-5f * fmaxf(1.0f, fabsf(want[v])), "logit %d: %.9g, want %.9g", v,
                      (double)got[v], (double)want[v]);
}

START_TEST(within_the_block_the_generator_sees_the_whole_text) {
    Model m, reference;
    tiny_model(&m, _i == 0 ? ARCH_CARD : ARCH_GPT);
    tiny_model(&reference, _i == 0 ? ARCH_CARD : ARCH_GPT);
    const int text[TINY_T] = {4, 0, 3, 1};
    for (int cache = 0; cache < 2; cache++) {
        Generator g;
        generator_init(&g, &m, 16, cache);
        for (int n = 1; n <= TINY_T; n++) {
            generator_push(&g, text[n - 1]);
            float expected[TINY_V];
            forward_last_logits(&reference, text, n, expected);
            expect_same_logits(generator_logits(&g), expected, TINY_V);
        }
        generator_free(&g);
    }
    model_free(&reference);
    model_free(&m);
}
END_TEST

START_TEST(a_text_longer_than_the_block_keeps_the_newest_half_then_grows_again) {
    Model m, reference;
    tiny_model(&m, ARCH_CARD);
    tiny_model(&reference, ARCH_CARD);
    const int text[7] = {1, 2, 3, 4, 5, 0, 2};
    Generator g;
    generator_init(&g, &m, 16, false);
    for (int n = 0; n < 5; n++) generator_push(&g, text[n]);
    // 5 tokens > block 4: the window jumps to the newest (4+1)/2 = 2 tokens.
    float expected[TINY_V];
    forward_last_logits(&reference, text + 3, 2, expected);
    ck_assert_mem_eq(generator_logits(&g), expected, sizeof expected);
    ck_assert_int_eq(g.window_start, 3);
    // and then grows back to the full block before jumping again
    generator_push(&g, text[5]);
    generator_push(&g, text[6]);
    forward_last_logits(&reference, text + 3, 4, expected);
    ck_assert_mem_eq(generator_logits(&g), expected, sizeof expected);
    generator_free(&g);
    model_free(&reference);
    model_free(&m);
}
END_TEST

// Generate with and without the key/value cache from the same prompt and
// seed, far past several window jumps: every logit and so every token must
// be identical, bit for bit. _i = 0: card; _i = 1: a gpt of 3 blocks, each
// with its own cache.
START_TEST(cached_and_uncached_generation_give_identical_logits_and_tokens) {
    ModelConfig cfg = {.vocab_size = 11, .block_size = 9, .n_embd = 12, .n_head = 3, .dropout = 0.1f,
                       .arch = _i == 0 ? ARCH_CARD : ARCH_GPT, .n_layer = _i == 0 ? 1 : 3};
    Model cached_model, plain_model;
    Rng init;
    rng_init(&init, 21);
    model_init(&cached_model, &cfg, 1, false);
    model_init_weights(&cached_model, &init);
    model_init(&plain_model, &cfg, 1, false);
    memcpy(plain_model.params_memory, cached_model.params_memory, cached_model.param_table.total * sizeof(float));

    enum { STEPS = 60 };
    Generator cached, plain;
    generator_init(&cached, &cached_model, STEPS + 2, true);
    generator_init(&plain, &plain_model, STEPS + 2, false);
    generator_push(&cached, 3);
    generator_push(&plain, 3);
    Rng rng_cached, rng_plain;
    rng_init(&rng_cached, 8);
    rng_init(&rng_plain, 8);
    float scratch[2 * 11];
    const SamplerConfig sampler = {1.0f, 0, 1.0f};
    for (int i = 0; i < STEPS; i++) {
        const float *a = generator_logits(&cached);
        const float *b = generator_logits(&plain);
        expect_same_logits(a, b, 11);
        int next_a = sample_token(a, 11, &sampler, &rng_cached, scratch);
        int next_b = sample_token(b, 11, &sampler, &rng_plain, scratch);
        if (TINYGPT_SANITIZED) next_b = next_a;  // a draw may fall either side of a last-bit difference
        ck_assert_int_eq(next_a, next_b);
        generator_push(&cached, next_a);
        generator_push(&plain, next_b);
    }
    ck_assert_mem_eq(cached.tokens, plain.tokens, (STEPS + 1) * sizeof(int));
    generator_free(&plain);
    generator_free(&cached);
    model_free(&plain_model);
    model_free(&cached_model);
}
END_TEST

Suite *sampler_suite(void) {
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    // The cached-vs-uncached test runs 60 full forward passes; on a machine
    // loaded to ~6 it once took longer than Check's 4 s default.
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, greedy_sampling_picks_the_largest_logit_without_drawing);
    tcase_add_test(tc, sampling_frequencies_match_the_softmax_of_logits_over_temperature);
    tcase_add_test(tc, top_k_never_draws_outside_the_k_likeliest_tokens);
    tcase_add_test(tc, the_same_seed_draws_the_same_tokens_and_another_seed_does_not);
    tcase_add_test(tc, top_p_keeps_the_smallest_set_of_likeliest_tokens_that_reaches_p);
    tcase_add_test(tc, top_p_applies_after_the_temperature_and_after_top_k);
    tcase_add_test(tc, top_p_draws_only_the_kept_tokens_in_their_renormalised_proportions);
    tcase_add_test(tc, top_p_of_one_draws_the_same_tokens_as_no_top_p_bit_for_bit);
    tcase_add_loop_test(tc, within_the_block_the_generator_sees_the_whole_text, 0, 2);
    tcase_add_test(tc, a_text_longer_than_the_block_keeps_the_newest_half_then_grows_again);
    tcase_add_loop_test(tc, cached_and_uncached_generation_give_identical_logits_and_tokens, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}
