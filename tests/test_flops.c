// test_flops.c: tests for src/model/flops.c, the FLOPs per token.
//
// Two ways: the formulas of flops.h worked out by hand for a small card
// and a small gpt (and the bench's default gpt, whose GFLOP/s the docs
// quote); and an independent count that knows nothing of the formulas:
// 2 FLOPs for every weight of every matrix a token is multiplied by, read
// from the model's own parameter table (the embeddings are looked up, not
// multiplied; the gpt's head is tok_emb again), plus attention's two
// products counted position by position and head by head.
#include <string.h>

#include "flops.h"
#include "helpers.h"
#include "model.h"
#include "tests.h"

START_TEST(card_counts_8c2_plus_2c_t_plus_1_plus_2cv_by_hand) {
    // V 7, T 5, C 8: 8 x 64 + 2 x 8 x 6 + 2 x 8 x 7 = 512 + 96 + 112 = 720.
    const ModelConfig card = {.vocab_size = 7, .block_size = 5, .n_embd = 8, .n_head = 2, .arch = ARCH_CARD};
    ck_assert_double_eq(model_forward_flops_per_token(&card), 720);
    ck_assert_double_eq(model_train_flops_per_token(&card), 3 * 720);
}
END_TEST

START_TEST(gpt_counts_l_times_24c2_plus_2c_t_plus_1_plus_2cv_by_hand) {
    // L 3, V 10, T 8, C 16: 3 x (24 x 256 + 2 x 16 x 9) + 2 x 16 x 10
    //                     = 3 x (6144 + 288) + 320 = 19296 + 320 = 19616.
    const ModelConfig gpt = {.vocab_size = 10, .block_size = 8, .n_embd = 16, .n_head = 4, .arch = ARCH_GPT, .n_layer = 3};
    ck_assert_double_eq(model_forward_flops_per_token(&gpt), 19616);
    ck_assert_double_eq(model_train_flops_per_token(&gpt), 3 * 19616);
    // The default gpt on tiny Shakespeare (V 65), `make bench`'s gpt row:
    // 4 x (24 x 128^2 + 2 x 128 x 65) + 2 x 128 x 65 = 1,656,064, which at
    // 42,726 tokens/s is the 212.3 GFLOP/s docs/speed-and-memory.md quotes.
    const ModelConfig bench = {.vocab_size = 65, .block_size = 64, .n_embd = 128, .n_head = 4, .arch = ARCH_GPT, .n_layer = 4};
    ck_assert_double_eq(model_forward_flops_per_token(&bench), 1656064);
}
END_TEST

// independent_count: 2 FLOPs per weight of each matrix of param_table
// (tok_emb and pos_emb aside; plus tok_emb once more as the tied head),
// and for each block, attention's scores (q . k) and weighted sum (w v)
// summed over the heads and the positions t < T a token at t sees (t + 1
// of them), divided by T: the mean token's share.
static double independent_count(const ModelConfig *cfg) {
    TensorTable table;
    param_table(&table, cfg);
    double flops = 0;
    bool own_head = false;
    for (int i = 0; i < table.count; i++) {
        const TensorSpec *spec = &table.specs[i];
        if (spec->ndim != 2 || strncmp(spec->name, "tok_emb", 7) == 0 || strncmp(spec->name, "pos_emb", 7) == 0) continue;
        flops += 2.0 * (double)spec->size;
        if (strcmp(spec->name, "head.weight") == 0) own_head = true;
    }
    table_free(&table);
    if (!own_head) flops += 2.0 * cfg->vocab_size * cfg->n_embd;  // the head tied to tok_emb
    const int T = cfg->block_size, NH = cfg->n_head, HS = cfg->n_embd / cfg->n_head;
    double attention = 0;  // one block's, over all T tokens
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) attention += 2.0 * (t + 1) * HS /* scores */ + 2.0 * (t + 1) * HS /* sum */;
    return flops + model_layers(cfg) * attention / T;
}

START_TEST(the_count_is_the_weights_each_token_meets_and_the_positions_it_sees) {
    const ModelConfig configs[] = {
        {.vocab_size = 65, .block_size = 32, .n_embd = 64, .n_head = 4, .arch = ARCH_CARD},    // bench's S
        {.vocab_size = 65, .block_size = 128, .n_embd = 256, .n_head = 8, .arch = ARCH_CARD},  // bench's L
        {.vocab_size = 83, .block_size = 64, .n_embd = 128, .n_head = 4, .arch = ARCH_GPT, .n_layer = 4},
        {.vocab_size = 50, .block_size = 7, .n_embd = 24, .n_head = 3, .arch = ARCH_GPT, .n_layer = 2},  // odd T
        {.vocab_size = 83, .block_size = 64, .n_embd = 128, .n_head = 4, .arch = ARCH_GPT, .n_layer = 1,
         .no_mlp = true, .no_layernorm = true, .no_residual = true},  // attention alone, as a gpt
        {.vocab_size = 83, .block_size = 64, .n_embd = 128, .n_head = 4, .arch = ARCH_GPT, .n_layer = 1,
         .no_layernorm = true},  // the ladder's rung 4
    };
    for (int i = 0; i < COUNT(configs); i++)
        ck_assert_msg(model_forward_flops_per_token(&configs[i]) == independent_count(&configs[i]),
                      "config %d: %.0f FLOPs by the formula, %.0f by the weights and positions", i,
                      model_forward_flops_per_token(&configs[i]), independent_count(&configs[i]));
}
END_TEST

// A gpt block without its MLP has card's products: what else differs (the
// biases, the LayerNorms, the residual add, a head of its own or tok_emb's)
// is either no product or one of the same size.
START_TEST(a_gpt_of_one_block_without_mlp_counts_as_card) {
    const ModelConfig card = {.vocab_size = 30, .block_size = 16, .n_embd = 32, .n_head = 4, .arch = ARCH_CARD};
    ModelConfig gpt = card;
    gpt.arch = ARCH_GPT;
    gpt.n_layer = 1;
    gpt.no_mlp = true;
    ck_assert_double_eq(model_forward_flops_per_token(&gpt), model_forward_flops_per_token(&card));
}
END_TEST

Suite *flops_suite(void) {
    Suite *s = suite_create("flops");
    TCase *tc = tcase_create("flops");
    tcase_add_test(tc, card_counts_8c2_plus_2c_t_plus_1_plus_2cv_by_hand);
    tcase_add_test(tc, gpt_counts_l_times_24c2_plus_2c_t_plus_1_plus_2cv_by_hand);
    tcase_add_test(tc, the_count_is_the_weights_each_token_meets_and_the_positions_it_sees);
    tcase_add_test(tc, a_gpt_of_one_block_without_mlp_counts_as_card);
    suite_add_tcase(s, tc);
    return s;
}
