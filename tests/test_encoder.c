// test_encoder.c: tests for src/layers/encoder.c (token + position
// embedding).
//
// Forward is checked on a case small enough to add up by hand. Backward is
// checked twice: by hand, and against central finite differences of the
// scalar loss L = sum(encoded * R) for a fixed random R, so dL/dencoded = R.
// Both use a batch in which one token appears more than once: its gradient
// row must collect the sum over every position that used it. Backward adds
// to the gradients already there, and 1 and 2 threads give the plain
// loops' bits.
#include <string.h>

#include "encoder.h"
#include "gradcheck.h"
#include "helpers.h"
#include "rng.h"
#include "tests.h"

// Each forward element is one float addition of small dyadic numbers
// (halves, quarters, integers), which float32 represents exactly, so the
// hand-worked cases compare with ==.

// ---------------------------------------------------------------------------
// Hand-worked cases: B=2, T=2, C=2, V=3, and pos_emb has 3 rows (more than T).

enum { HB = 2, HT = 2, HC = 2, HV = 3, HROWS = 3 };
static const float HAND_TOK_EMB[HV * HC] = {
    1, 2,      // token 0
    10, 20,    // token 1
    100, 200,  // token 2
};
static const float HAND_POS_EMB[HROWS * HC] = {
    0.5f, -0.5f,    // position 0
    0.25f, -0.25f,  // position 1
    999, 999,       // position 2: beyond T, never read
};
// Token 2 appears twice: at (b=0, t=0) and (b=1, t=1).
static const int HAND_INPUTS[HB * HT] = {2, 0, 1, 2};

START_TEST(forward_adds_the_token_row_and_the_position_row) {
    float encoded[HB * HT * HC];
    encoder_forward(encoded, HAND_INPUTS, HAND_TOK_EMB, HAND_POS_EMB, HB, HT, HC);
    // encoded[b,t,:] = tok_emb[inputs[b,t]] + pos_emb[t]
    //   (0,0): token 2 + position 0 = (100 + 0.5, 200 - 0.5) = (100.5, 199.5)
    //   (0,1): token 0 + position 1 = (1 + 0.25, 2 - 0.25)   = (1.25, 1.75)
    //   (1,0): token 1 + position 0 = (10 + 0.5, 20 - 0.5)   = (10.5, 19.5)
    //   (1,1): token 2 + position 1 = (100.25, 199.75)
    const float expected[HB * HT * HC] = {100.5f, 199.5f, 1.25f, 1.75f, 10.5f, 19.5f, 100.25f, 199.75f};
    for (int i = 0; i < HB * HT * HC; i++) ck_assert_float_eq(encoded[i], expected[i]);
}
END_TEST

START_TEST(backward_sums_the_gradient_of_a_repeated_token) {
    const float dencoded[HB * HT * HC] = {1, 2, 3, 4, 5, 6, 7, 8};
    float dtok[HV * HC] = {0}, dpos[HROWS * HC] = {0};
    encoder_backward(dtok, dpos, dencoded, HAND_INPUTS, HB, HT, HC);
    // dtok_emb[inputs[b,t]] += dencoded[b,t]:
    //   token 0 at (0,1): (3, 4);   token 1 at (1,0): (5, 6)
    //   token 2 at (0,0) and (1,1): (1 + 7, 2 + 8) = (8, 10)
    const float expected_dtok[HV * HC] = {3, 4, 5, 6, 8, 10};
    // dpos_emb[t] += dencoded[b,t] summed over b:
    //   position 0: (1 + 5, 2 + 6) = (6, 8);  position 1: (3 + 7, 4 + 8) = (10, 12)
    //   position 2 is beyond T and keeps its zero gradient.
    const float expected_dpos[HROWS * HC] = {6, 8, 10, 12, 0, 0};
    for (int i = 0; i < HV * HC; i++) ck_assert_float_eq(dtok[i], expected_dtok[i]);
    for (int i = 0; i < HROWS * HC; i++) ck_assert_float_eq(dpos[i], expected_dpos[i]);
}
END_TEST

START_TEST(backward_adds_to_the_gradients_already_there) {
    const float dencoded[HB * HT * HC] = {1, 2, 3, 4, 5, 6, 7, 8};
    float once_tok[HV * HC] = {0}, once_pos[HROWS * HC] = {0};
    float twice_tok[HV * HC] = {0}, twice_pos[HROWS * HC] = {0};
    encoder_backward(once_tok, once_pos, dencoded, HAND_INPUTS, HB, HT, HC);
    encoder_backward(twice_tok, twice_pos, dencoded, HAND_INPUTS, HB, HT, HC);
    encoder_backward(twice_tok, twice_pos, dencoded, HAND_INPUTS, HB, HT, HC);
    // Small integers: doubling is exact.
    for (int i = 0; i < HV * HC; i++) ck_assert_float_eq(twice_tok[i], 2 * once_tok[i]);
    for (int i = 0; i < HROWS * HC; i++) ck_assert_float_eq(twice_pos[i], 2 * once_pos[i]);
}
END_TEST

// ---------------------------------------------------------------------------
// Finite differences on a random case: B=2, T=4, C=3, V=5, pos_emb with 6 rows.

enum { GB = 2, GT = 4, GC = 3, GV = 5, GROWS = 6 };
// Token 1 three times in row 0 and once in row 1; token 3 twice; token 2 never.
static const int GRAD_INPUTS[GB * GT] = {1, 3, 1, 1, 4, 0, 3, 1};

typedef struct {
    float tok_emb[GV * GC];
    float pos_emb[GROWS * GC];
    float encoded[GB * GT * GC];
    double R[GB * GT * GC];  // the fixed random weights of the loss
} EncoderCase;

static void encoder_case_init(EncoderCase *ec, uint64_t seed) {
    Rng rng;
    rng_init(&rng, seed);
    for (int i = 0; i < GV * GC; i++) ec->tok_emb[i] = rng_normal(&rng);
    for (int i = 0; i < GROWS * GC; i++) ec->pos_emb[i] = rng_normal(&rng);
    for (int i = 0; i < GB * GT * GC; i++) ec->R[i] = 2.0 * rng_uniform(&rng) - 1.0;
}

// L = sum over all elements of encoded * R, in double.
static double encoder_loss(void *ctx) {
    EncoderCase *ec = ctx;
    encoder_forward(ec->encoded, GRAD_INPUTS, ec->tok_emb, ec->pos_emb, GB, GT, GC);
    double loss = 0;
    for (int i = 0; i < GB * GT * GC; i++) loss += ec->encoded[i] * ec->R[i];
    return loss;
}

START_TEST(backward_matches_finite_differences_for_both_tables) {
    EncoderCase ec;
    encoder_case_init(&ec, 11);
    float dencoded[GB * GT * GC];
    for (int i = 0; i < GB * GT * GC; i++) dencoded[i] = (float)ec.R[i];  // dL/dencoded = R
    float dtok[GV * GC] = {0}, dpos[GROWS * GC] = {0};
    encoder_backward(dtok, dpos, dencoded, GRAD_INPUTS, GB, GT, GC);

    assert_gradcheck_passes("tok_emb", gradcheck(encoder_loss, &ec, ec.tok_emb, dtok, GV * GC, GRADCHECK_FLOAT32),
                            GV * GC);
    assert_gradcheck_passes("pos_emb",
                            gradcheck(encoder_loss, &ec, ec.pos_emb, dpos, GROWS * GC, GRADCHECK_FLOAT32),
                            GROWS * GC);
    // The unused token and the positions past T get exactly no gradient.
    for (int c = 0; c < GC; c++) ck_assert_float_eq(dtok[2 * GC + c], 0.0f);
    for (int i = GT * GC; i < GROWS * GC; i++) ck_assert_float_eq(dpos[i], 0.0f);
}
END_TEST

// ---------------------------------------------------------------------------
// Threads: at a size where the forward pass splits its work between threads
// (2^18 additions and more), one and two threads give exactly the bits of
// the plain loops written here, which add each position in order.

enum { TB = 8, TT = 64, TC = 520, TV = 7 };

START_TEST(one_and_two_threads_give_the_plain_loops_bits) {
    static float tok_emb[TV * TC], pos_emb[TT * TC], dencoded[TB * TT * TC];
    static float encoded[TB * TT * TC], expected_encoded[TB * TT * TC];
    static float dtok[TV * TC], dpos[TT * TC], expected_dtok[TV * TC], expected_dpos[TT * TC];
    static int inputs[TB * TT];
    Rng rng;
    rng_init(&rng, 8);
    fill_uniform(tok_emb, TV * TC, &rng);
    fill_uniform(pos_emb, TT * TC, &rng);
    fill_uniform(dencoded, TB * TT * TC, &rng);
    for (int i = 0; i < TB * TT; i++) inputs[i] = (int)rng_below(&rng, TV);
    memset(expected_dtok, 0, sizeof expected_dtok);
    memset(expected_dpos, 0, sizeof expected_dpos);
    for (int n = 0; n < TB * TT; n++) {
        for (int c = 0; c < TC; c++) {
            expected_encoded[n * TC + c] = tok_emb[inputs[n] * TC + c] + pos_emb[(n % TT) * TC + c];
            expected_dtok[inputs[n] * TC + c] += dencoded[n * TC + c];
            expected_dpos[(n % TT) * TC + c] += dencoded[n * TC + c];
        }
    }
    int saved_threads = get_threads();
    for (int threads = 1; threads <= 2; threads++) {
        set_threads(threads);
        memset(dtok, 0, sizeof dtok);
        memset(dpos, 0, sizeof dpos);
        encoder_forward(encoded, inputs, tok_emb, pos_emb, TB, TT, TC);
        encoder_backward(dtok, dpos, dencoded, inputs, TB, TT, TC);
        ck_assert_msg(memcmp(encoded, expected_encoded, sizeof encoded) == 0, "encoded differs, %d threads", threads);
        ck_assert_msg(memcmp(dtok, expected_dtok, sizeof dtok) == 0, "dtok_emb differs, %d threads", threads);
        ck_assert_msg(memcmp(dpos, expected_dpos, sizeof dpos) == 0, "dpos_emb differs, %d threads", threads);
    }
    set_threads(saved_threads);
}
END_TEST

Suite *encoder_suite(void) {
    Suite *s = suite_create("encoder");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, forward_adds_the_token_row_and_the_position_row);
    tcase_add_test(tc, backward_sums_the_gradient_of_a_repeated_token);
    tcase_add_test(tc, backward_adds_to_the_gradients_already_there);
    tcase_add_test(tc, backward_matches_finite_differences_for_both_tables);
    tcase_add_test(tc, one_and_two_threads_give_the_plain_loops_bits);
    suite_add_tcase(s, tc);
    return s;
}
