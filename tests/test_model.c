// test_model.c: tests for src/model.c (the tables, the whole forward and
// backward pass, and SGD).
//
// In order: the parameter and activation tables are laid out as model.h
// says; model_check_config refuses bad sizes with a message naming the flag;
// every parameter's gradient matches central finite differences of the whole
// model's loss, with and without dropout; a forward pass smaller than the
// maximum (a prefix of every buffer) computes the same thing as a model
// built for exactly that size, and so does sampling's one-position-at-a-time
// forward pass; SGD learns a trivially predictable sequence;
// and training is bit-for-bit reproducible, for a seed and across thread
// counts (every sum runs in a fixed order).
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#endif

#include "common.h"
#include "gradcheck.h"
#include "model.h"
#include "rng.h"
#include "gradcheck_model.h"
#include "helpers.h"
#include "tests.h"

// The small model of the gradient tests: V=7, T=5, C=8, NH=2, batches of 2.
enum { SMALL_B = 2, SMALL_T = 5 };
static const ModelConfig SMALL = {.vocab_size = 7, .block_size = SMALL_T, .n_embd = 8, .n_head = 2, .dropout = 0.0f};

static void random_tokens(int *tokens, int n, int V, Rng *rng) {
    for (int i = 0; i < n; i++) tokens[i] = (int)rng_below(rng, (uint64_t)V);
}

// ---------------------------------------------------------------------------
// Tables

START_TEST(param_table_lists_every_tensor_contiguously_in_model_h_order) {
    const int V = SMALL.vocab_size, T = SMALL.block_size, C = SMALL.n_embd;
    const struct {
        const char *name;
        int ndim, rows, cols;
    } expected[NUM_PARAM_TENSORS] = {
        [PARAM_TOK_EMB] = {"tok_emb.weight", 2, V, C},
        [PARAM_POS_EMB] = {"pos_emb.weight", 2, T, C},
        [PARAM_Q_WEIGHT] = {"blocks.0.attn.q.weight", 2, C, C},
        [PARAM_K_WEIGHT] = {"blocks.0.attn.k.weight", 2, C, C},
        [PARAM_V_WEIGHT] = {"blocks.0.attn.v.weight", 2, C, C},
        [PARAM_PROJ_WEIGHT] = {"blocks.0.attn.proj.weight", 2, C, C},
        [PARAM_PROJ_BIAS] = {"blocks.0.attn.proj.bias", 1, C, 0},
        [PARAM_HEAD_WEIGHT] = {"head.weight", 2, V, C},
        [PARAM_HEAD_BIAS] = {"head.bias", 1, V, 0},
    };
    TensorSpec specs[NUM_PARAM_TENSORS];
    size_t total = param_table(&SMALL, specs);
    size_t offset = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        ck_assert_str_eq(specs[i].name, expected[i].name);
        ck_assert_int_eq(specs[i].ndim, expected[i].ndim);
        ck_assert_uint_eq(specs[i].shape[0], (size_t)expected[i].rows);
        if (expected[i].ndim == 2) ck_assert_uint_eq(specs[i].shape[1], (size_t)expected[i].cols);
        size_t size = (size_t)expected[i].rows * (expected[i].ndim == 2 ? (size_t)expected[i].cols : 1);
        ck_assert_uint_eq(specs[i].size, size);
        ck_assert_msg(specs[i].offset == offset, "%s starts at %zu, expected %zu (right after the previous one)",
                      specs[i].name, specs[i].offset, offset);
        offset += size;
    }
    ck_assert_uint_eq(total, offset);
    // tok_emb, pos_emb, q/k/v/proj weights, proj bias, head weight, head bias
    ck_assert_uint_eq(total, (size_t)(V * C + T * C + 4 * C * C + C + V * C + V));
}
END_TEST

START_TEST(act_table_sizes_every_activation_for_the_largest_batch) {
    const int B = 3, V = SMALL.vocab_size, T = SMALL.block_size, C = SMALL.n_embd, NH = SMALL.n_head;
    const int HS = C / NH;
    const size_t expected[NUM_ACT_TENSORS] = {
        [ACT_ENCODED] = (size_t)B * T * C,
        [ACT_QKV] = (size_t)B * T * 3 * C,
        [ACT_ATTN_WEIGHTS] = (size_t)B * NH * T * T,
        [ACT_ATTN_OUT] = (size_t)B * T * C,
        [ACT_PROJ_OUT] = (size_t)B * T * C,
        [ACT_LOGITS] = (size_t)B * T * V,
        [ACT_PROBS] = (size_t)B * T * V,
        [ACT_LOSSES] = (size_t)B * T,
        [ACT_DROPOUT_SCALES] = (size_t)B * NH * T * T,
        [ACT_KEYS_T] = (size_t)B * NH * HS * T,
        [ACT_VALUES_T] = (size_t)B * NH * HS * T,
    };
    TensorSpec specs[NUM_ACT_TENSORS];
    size_t total = act_table(&SMALL, B, specs);
    size_t offset = 0;
    for (int i = 0; i < NUM_ACT_TENSORS; i++) {
        ck_assert_msg(specs[i].size == expected[i], "%s has %zu floats, expected %zu", specs[i].name,
                      specs[i].size, expected[i]);
        ck_assert_msg(specs[i].offset == offset, "%s starts at %zu, expected %zu", specs[i].name, specs[i].offset,
                      offset);
        offset += expected[i];
    }
    ck_assert_uint_eq(total, offset);
}
END_TEST

START_TEST(act_table_does_not_overflow_for_the_longest_context_check_config_allows) {
    // attn_weights holds B*NH*T*T floats: 2^35 here, far past INT_MAX. For
    // sizes model_check_config accepts, the count must come out right (in
    // size_t), or a model would be allocated too small (instead of failing
    // with "out of memory") and the forward pass would write past its end.
    // Only the table is computed; nothing is allocated.
    enum { B = 4 };
    ModelConfig cfg = {.vocab_size = 65, .block_size = 1 << 16, .n_embd = 8, .n_head = 2, .dropout = 0.0f};
    Error err = {{0}};
    if (!model_check_config(&cfg, &err)) return;  // refusing such a context would be a fine fix too
    TensorSpec specs[NUM_ACT_TENSORS];
    act_table(&cfg, B, specs);
    const size_t T = (size_t)cfg.block_size, expected = (size_t)B * cfg.n_head * T * T;
    ck_assert_msg(specs[ACT_ATTN_WEIGHTS].size == expected, "attn_weights has %zu floats for T=%zu, expected %zu",
                  specs[ACT_ATTN_WEIGHTS].size, T, expected);
    ck_assert_uint_eq(specs[ACT_DROPOUT_SCALES].size, expected);
}
END_TEST

START_TEST(model_init_points_each_view_at_its_table_entry) {
    Model m;
    model_init(&m, &SMALL, SMALL_B, true);
    TensorSpec specs[NUM_PARAM_TENSORS];
    ck_assert_uint_eq(m.num_params, param_table(&SMALL, specs));
    const TensorSpec *ps = m.param_specs;
    const size_t CC = (size_t)SMALL.n_embd * SMALL.n_embd;
    for (int g = 0; g <= 1; g++) {  // parameters, then gradients: the same layout
        float *base = g ? m.grads_memory : m.params_memory;
        const ParamTensors *p = g ? &m.grads : &m.params;
        ck_assert_ptr_eq(p->tok_emb, base + ps[PARAM_TOK_EMB].offset);
        ck_assert_ptr_eq(p->pos_emb, base + ps[PARAM_POS_EMB].offset);
        ck_assert_ptr_eq(p->qkv_weight, base + ps[PARAM_Q_WEIGHT].offset);
        ck_assert_ptr_eq(p->proj_weight, base + ps[PARAM_PROJ_WEIGHT].offset);
        ck_assert_ptr_eq(p->proj_bias, base + ps[PARAM_PROJ_BIAS].offset);
        ck_assert_ptr_eq(p->head_weight, base + ps[PARAM_HEAD_WEIGHT].offset);
        ck_assert_ptr_eq(p->head_bias, base + ps[PARAM_HEAD_BIAS].offset);
    }
    // q, k, v are one [3C,C] matrix only if they are adjacent.
    ck_assert_uint_eq(ps[PARAM_K_WEIGHT].offset, ps[PARAM_Q_WEIGHT].offset + CC);
    ck_assert_uint_eq(ps[PARAM_V_WEIGHT].offset, ps[PARAM_Q_WEIGHT].offset + 2 * CC);
    // Activations: views at their offsets; everything after the logits
    // (probs, losses and what attention saves for backward) has no gradient.
    ck_assert_ptr_eq(m.acts.logits, m.acts_memory + m.act_specs[ACT_LOGITS].offset);
    ck_assert_ptr_eq(m.acts.losses, m.acts_memory + m.act_specs[ACT_LOSSES].offset);
    ck_assert_ptr_eq(m.acts.values_t, m.acts_memory + m.act_specs[ACT_VALUES_T].offset);
    ck_assert_ptr_eq(m.grad_acts.attn_weights, m.grad_acts_memory + m.act_specs[ACT_ATTN_WEIGHTS].offset);
    ck_assert_ptr_eq(m.grad_acts.logits, m.grad_acts_memory + m.act_specs[ACT_LOGITS].offset);
    ck_assert_ptr_null(m.grad_acts.probs);
    ck_assert_ptr_null(m.grad_acts.losses);
    ck_assert_ptr_null(m.grad_acts.dropout_scales);
    ck_assert_ptr_null(m.grad_acts.keys_t);
    ck_assert_ptr_null(m.grad_acts.values_t);
    model_free(&m);

    model_init(&m, &SMALL, SMALL_B, false);  // inference only: no gradient buffers
    ck_assert_ptr_null(m.grads_memory);
    ck_assert_ptr_null(m.grad_acts_memory);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// model_check_config

START_TEST(check_config_accepts_a_valid_config) {
    Error err = {{0}};
    ck_assert(model_check_config(&SMALL, &err));
    ModelConfig with_dropout = SMALL;
    with_dropout.dropout = 0.5f;
    ck_assert(model_check_config(&with_dropout, &err));
}
END_TEST

START_TEST(check_config_rejects_bad_sizes_naming_the_flag) {
    enum { FIELD_VOCAB, FIELD_BLOCK, FIELD_EMBD, FIELD_HEAD, FIELD_DROPOUT };
    const struct {
        int field;
        double value;
        const char *must_mention;  // the flag to fix (the vocabulary comes from the data, not a flag)
    } cases[] = {
        {FIELD_HEAD, 3, "--heads"},       // 3 does not divide 8
        {FIELD_HEAD, 16, "--heads"},      // more heads than channels
        {FIELD_HEAD, 0, "--heads"},       {FIELD_HEAD, -2, "--heads"},
        {FIELD_EMBD, 0, "--embd"},        {FIELD_EMBD, -8, "--embd"},
        {FIELD_BLOCK, 0, "--context"},    {FIELD_BLOCK, -1, "--context"},
        {FIELD_VOCAB, 0, "vocabulary"},   {FIELD_VOCAB, -5, "vocabulary"},
        {FIELD_DROPOUT, 1.0, "--dropout"}, {FIELD_DROPOUT, -0.1, "--dropout"},
        {FIELD_DROPOUT, NAN, "--dropout"}, {FIELD_DROPOUT, INFINITY, "--dropout"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ModelConfig cfg = SMALL;
        switch (cases[i].field) {
        case FIELD_VOCAB: cfg.vocab_size = (int)cases[i].value; break;
        case FIELD_BLOCK: cfg.block_size = (int)cases[i].value; break;
        case FIELD_EMBD: cfg.n_embd = (int)cases[i].value; break;
        case FIELD_HEAD: cfg.n_head = (int)cases[i].value; break;
        case FIELD_DROPOUT: cfg.dropout = (float)cases[i].value; break;
        }
        Error err = {{0}};
        ck_assert_msg(!model_check_config(&cfg, &err), "case %zu (%s = %g) was accepted", i, cases[i].must_mention,
                      cases[i].value);
        ck_assert_msg(strstr(err.msg, cases[i].must_mention) != NULL, "case %zu: message \"%s\" does not mention %s",
                      i, err.msg, cases[i].must_mention);
    }
}
END_TEST

START_TEST(memory_bytes_is_exactly_what_model_init_allocates) {
    const ModelConfig configs[] = {
        SMALL,
        {.vocab_size = 65, .block_size = 16, .n_embd = 12, .n_head = 3, .dropout = 0.1f},
        {.vocab_size = 3, .block_size = 4, .n_embd = 4, .n_head = 4, .dropout = 0.0f},  // V < 3C: scratch is 3C x C
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        for (int with_grads = 0; with_grads <= 1; with_grads++) {
            Model m;
            model_init(&m, &configs[i], 3, with_grads);
            size_t floats = m.num_params + m.num_acts + m.weight_scratch_size;
            if (with_grads) floats += m.num_params + m.act_specs[ACT_PROBS].offset;
            size_t ints = 2 * (size_t)m.max_batch * (size_t)configs[i].block_size;
            ck_assert_uint_eq(model_memory_bytes(&configs[i], 3, with_grads), floats * sizeof(float) + ints * sizeof(int));
            model_free(&m);
        }
    }
}
END_TEST

START_TEST(memory_bytes_saturates_instead_of_overflowing) {
    // The largest sizes the flags allow: B*NH*T*T = 2^20 * 2^16 * 2^32 = 2^68.
    const ModelConfig huge = {.vocab_size = 1 << 20, .block_size = 1 << 16, .n_embd = 1 << 16, .n_head = 1 << 16};
    ck_assert(model_check_config(&huge, NULL));
    ck_assert_uint_eq(model_memory_bytes(&huge, 1 << 20, true), SIZE_MAX);
    Error err = {{0}};
    ck_assert(!model_check_memory(&huge, 1 << 20, true, &err));
    ck_assert_msg(strstr(err.msg, "more than 18 EB"), "message was: %s", err.msg);
}
END_TEST

START_TEST(check_memory_refuses_a_model_larger_than_memory_naming_the_flags) {
    ck_assert_uint_gt(memory_limit_bytes(), 0);
    Error err = {{0}};
    ck_assert_msg(model_check_memory(&SMALL, 32, true, &err), "%s", err.msg);
    // 16 x 65536 x 65536 attention weights alone are 256 GiB of floats.
    const ModelConfig big = {.vocab_size = 65, .block_size = 1 << 16, .n_embd = 64, .n_head = 4};
    ck_assert(!model_check_memory(&big, 4, false, &err));
    ck_assert_msg(strstr(err.msg, "--batch 4 --context 65536 --embd 64 --heads 4") && strstr(err.msg, "GB") &&
                      strstr(err.msg, "use a smaller --batch, --context or --embd") && !strchr(err.msg, '\n'),
                  "message was: %s", err.msg);
}
END_TEST

START_TEST(find_nonfinite_names_the_first_tensor_and_element_holding_nan_or_infinity) {
    Model m;
    model_init(&m, &SMALL, SMALL_B, true);
    size_t element = 99;
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element), -1);
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), -1);
    m.params.head_bias[3] = INFINITY;
    m.params.proj_weight[5] = NAN;
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element), PARAM_PROJ_WEIGHT);
    ck_assert_uint_eq(element, 5);
    m.grads.head_weight[7] = -INFINITY;
    ck_assert_int_eq(model_find_nonfinite(&m, m.grads_memory, &element), PARAM_HEAD_WEIGHT);
    ck_assert_uint_eq(element, 7);
    m.acts.logits[2] = NAN;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), ACT_LOGITS);
    ck_assert_uint_eq(element, 2);
    model_free(&m);

    // The search tests blocks of 1024 first: a hit in the last number, and
    // one on a block boundary, of a tensor several blocks long.
    const ModelConfig wide = {.vocab_size = 65, .block_size = 16, .n_embd = 16, .n_head = 2};
    model_init(&m, &wide, 4, false);
    const size_t probs_size = m.act_specs[ACT_PROBS].size;
    ck_assert_uint_gt(probs_size, 2048);
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), -1);
    m.acts.probs[probs_size - 1] = -INFINITY;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), ACT_PROBS);
    ck_assert_uint_eq(element, probs_size - 1);
    m.acts.probs[1024] = NAN;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), ACT_PROBS);
    ck_assert_uint_eq(element, 1024);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// Whole-model gradient vs finite differences

// Whole-model gradients are small (0.02 to 0.3 here: the loss is a mean over
// B*T positions), so GRADCHECK_FLOAT32's atol of 2e-3 would let a 5% error
// through. The finite differences measure about 1e-5 off, so 1e-4 is tight
// and still safe.
static const GradCheckTolerance WHOLE_MODEL_TOLERANCE = {.h = 1e-2, .atol = 1e-4, .rtol = 1e-2};

// A random model sized for (max_batch, cfg->block_size), one forward and
// backward on a (B, T) batch, and every parameter tensor gradchecked against
// the loss of the whole model (model_gradcheck_case, which `tinygpt
// gradcheck` runs too).
static void check_model_gradients(const ModelConfig *cfg, int max_batch, int B, int T, uint64_t seed) {
    GradCheckResult results[NUM_PARAM_TENSORS];
    double loss = NAN;
    model_gradcheck_case(cfg, max_batch, B, T, seed, WHOLE_MODEL_TOLERANCE, results, &loss);
    ck_assert_msg(isfinite(loss) && loss > 0, "initial loss %g", loss);
    TensorSpec specs[NUM_PARAM_TENSORS];
    param_table(cfg, specs);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const GradCheckResult *r = &results[i];
        ck_assert_msg(r->failures == 0,
                      "dropout %g, B=%d T=%d: %s: %zu of %zu elements off; worst [%zu] analytic %.6g numeric %.6g",
                      (double)cfg->dropout, B, T, specs[i].name, r->failures, specs[i].size, r->worst_index,
                      r->worst_analytic, r->worst_numeric);
    }
}

// Loop test: _i = 0 without dropout, _i = 1 with dropout 0.2 (training, fixed key).
START_TEST(every_parameter_gradient_matches_finite_differences) {
    ModelConfig cfg = SMALL;
    cfg.dropout = _i == 0 ? 0.0f : 0.2f;
    check_model_gradients(&cfg, SMALL_B, SMALL_B, SMALL_T, 1 + (uint64_t)_i);
}
END_TEST

START_TEST(gradients_are_right_for_a_batch_smaller_than_the_maximum) {
    ModelConfig cfg = SMALL;
    cfg.dropout = 0.2f;
    check_model_gradients(&cfg, 3, 2, 3, 5);  // built for B=3, T=5; run with B=2, T=3
}
END_TEST

// ---------------------------------------------------------------------------
// Forward

START_TEST(first_loss_is_finite_and_positive) {
    // A random init does not promise a loss near ln V (N(0,1) embeddings can
    // make the first logits confident), only a finite, positive one.
    Model m;
    Rng rng;
    rng_init(&rng, 3);
    model_init(&m, &SMALL, SMALL_B, false);
    model_init_weights(&m, &rng);
    int inputs[SMALL_B * SMALL_T], targets[SMALL_B * SMALL_T];
    random_tokens(inputs, SMALL_B * SMALL_T, SMALL.vocab_size, &rng);
    random_tokens(targets, SMALL_B * SMALL_T, SMALL.vocab_size, &rng);
    float loss = model_forward(&m, inputs, targets, SMALL_B, SMALL_T, false, 0);
    ck_assert_msg(isfinite(loss) && loss > 0.0f, "first loss %g", (double)loss);
    model_free(&m);
}
END_TEST

START_TEST(a_smaller_batch_gives_the_logits_of_a_model_built_for_that_size) {
    // Big: built for B=3, T=6. Exact: built for B=2, T=4, with the same
    // parameters (pos_emb's first 4 rows). Both run the same (N, C, OC)
    // matmuls and the same attention loops, so the results are bitwise equal.
    enum { B = 2, T = 4 };
    ModelConfig big_cfg = SMALL, exact_cfg = SMALL;
    big_cfg.block_size = 6;
    exact_cfg.block_size = T;
    big_cfg.dropout = exact_cfg.dropout = 0.2f;  // and the same dropout mask
    Model big, exact;
    Rng rng;
    rng_init(&rng, 4);
    model_init(&big, &big_cfg, 3, false);
    model_init(&exact, &exact_cfg, B, false);
    model_init_weights(&big, &rng);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++)  // pos_emb: a prefix; the others: whole
        memcpy(exact.params_memory + exact.param_specs[i].offset, big.params_memory + big.param_specs[i].offset,
               exact.param_specs[i].size * sizeof(float));
    int inputs[B * T], targets[B * T];
    random_tokens(inputs, B * T, SMALL.vocab_size, &rng);
    random_tokens(targets, B * T, SMALL.vocab_size, &rng);
    for (int training = 0; training <= 1; training++) {
        float big_loss = model_forward(&big, inputs, targets, B, T, training, 42);
        float exact_loss = model_forward(&exact, inputs, targets, B, T, training, 42);
        ck_assert(memcmp(big.acts.logits, exact.acts.logits, (size_t)B * T * SMALL.vocab_size * sizeof(float)) ==
                  0);
        ck_assert_float_eq(big_loss, exact_loss);
    }
    model_free(&exact);
    model_free(&big);
}
END_TEST

START_TEST(dropout_changes_only_training_and_zero_dropout_changes_nothing) {
    enum { B = SMALL_B, T = SMALL_T };
    ModelConfig with_dropout = SMALL;
    with_dropout.dropout = 0.3f;
    Model plain, dropped;
    Rng rng;
    rng_init(&rng, 6);
    model_init(&plain, &SMALL, B, false);
    model_init(&dropped, &with_dropout, B, false);
    model_init_weights(&plain, &rng);
    memcpy(dropped.params_memory, plain.params_memory, plain.num_params * sizeof(float));
    int inputs[B * T], targets[B * T];
    random_tokens(inputs, B * T, SMALL.vocab_size, &rng);
    random_tokens(targets, B * T, SMALL.vocab_size, &rng);
    const size_t logits_bytes = (size_t)B * T * SMALL.vocab_size * sizeof(float);
    float *reference = xmalloc(logits_bytes);

    model_forward(&plain, inputs, targets, B, T, false, 0);  // evaluation, no dropout
    memcpy(reference, plain.acts.logits, logits_bytes);
    model_forward(&plain, inputs, targets, B, T, true, 7);  // training, but p = 0
    ck_assert_msg(memcmp(reference, plain.acts.logits, logits_bytes) == 0, "training with p = 0 changed the logits");
    model_forward(&dropped, inputs, targets, B, T, false, 7);  // p = 0.3, evaluation
    ck_assert_msg(memcmp(reference, dropped.acts.logits, logits_bytes) == 0, "dropout acted outside training");
    model_forward(&dropped, inputs, targets, B, T, true, 7);  // p = 0.3, training
    ck_assert_msg(memcmp(reference, dropped.acts.logits, logits_bytes) != 0, "dropout did nothing while training");
    free(reference);
    model_free(&dropped);
    model_free(&plain);
}
END_TEST

// Under the sanitizers (helpers.h, TINYGPT_SANITIZED) the two paths may
// differ by FMA rounding, a few units in the last place; 1e-6 still catches
// a wrong row or a missing term.
static const float SANITIZED_LOGIT_TOLERANCE = 1e-6f;

START_TEST(forward_position_by_position_gives_the_logits_of_a_full_forward_pass) {
    // model.h: model_forward_position "computes only row t ... The arithmetic,
    // and so every bit of the result, is the same as model_forward's".
    enum { T = 12 };
    const ModelConfig cfg = {.vocab_size = 11, .block_size = T, .n_embd = 32, .n_head = 4, .dropout = 0.1f};
    Model full, cached;
    Rng rng;
    rng_init(&rng, 14);
    model_init(&full, &cfg, 1, false);
    model_init(&cached, &cfg, 1, false);
    model_init_weights(&full, &rng);
    memcpy(cached.params_memory, full.params_memory, full.num_params * sizeof(float));
    int inputs[T];
    random_tokens(inputs, T, cfg.vocab_size, &rng);
    model_forward(&full, inputs, NULL, 1, T, false, 0);
    TransposedWeights weights_t;
    transposed_weights_init(&weights_t, &cached);
    for (int t = 0; t < T; t++) {
        const float *logits_t = model_forward_position(&cached, &weights_t, inputs[t], t);
        const float *expected = full.acts.logits + (size_t)t * cfg.vocab_size;
        for (int v = 0; v < cfg.vocab_size; v++)
            if (TINYGPT_SANITIZED ? fabsf(logits_t[v] - expected[v]) > SANITIZED_LOGIT_TOLERANCE
                                  : logits_t[v] != expected[v])
                ck_abort_msg("position %d, logit %d: %.9g one position at a time, %.9g in a full pass", t, v,
                             (double)logits_t[v], (double)expected[v]);
    }
    transposed_weights_free(&weights_t);
    model_free(&cached);
    model_free(&full);
}
END_TEST

// ---------------------------------------------------------------------------
// Training

// "abcabc..." as token ids 0, 1, 2: the next token is a function of the
// current one, so even a model that ignores position can learn it exactly.
START_TEST(sgd_learns_a_repeating_sequence) {
    enum { B = 2, T = 8, STEPS = 300 };
    const float lr = 0.5f;
    // A clear margin: the loss must fall below 20% of where it started.
    const double required_fraction = 0.2;
    const ModelConfig cfg = {.vocab_size = 3, .block_size = T, .n_embd = 16, .n_head = 2, .dropout = 0.0f};
    int inputs[B * T], targets[B * T];
    for (int b = 0; b < B; b++) {  // row b starts at offset b: "abcabcab", "bcabcabc"
        for (int t = 0; t < T; t++) {
            inputs[b * T + t] = (b + t) % 3;
            targets[b * T + t] = (b + t + 1) % 3;
        }
    }
    Model m;
    Rng rng;
    rng_init(&rng, 8);
    model_init(&m, &cfg, B, true);
    model_init_weights(&m, &rng);
    // One thread: 300 steps of ~20 tiny parallel regions each would spend
    // their time in barriers, which on a loaded machine can each wait a
    // scheduler tick. Threads change no bits (see the last test).
    int saved_threads = get_threads();
    set_threads(1);
    float first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        model_zero_grad(&m);
        last = model_forward(&m, inputs, targets, B, T, true, (uint64_t)step);
        if (step == 0) first = last;
        model_backward(&m);
        model_sgd_step(&m, lr);
    }
    set_threads(saved_threads);
    ck_assert_msg(isfinite(last) && last < required_fraction * first, "loss went from %g to %g in %d steps",
                  (double)first, (double)last, STEPS);
    model_free(&m);
}
END_TEST

// A short training run with dropout, where each step draws its batch
// windows from a random corpus: losses[RUN_STEPS] receives every step's loss,
// and the parameters at the end are returned (the caller frees them). A few
// steps suffice: any difference in one step's sums changes every later step.
// Sizes big enough that every layer splits its work between two threads:
// B*T = 128 rows (two 64-row chunks in linear.c), 3C = 96 columns (two
// 64-wide tiles), B*NH = 16 attention (batch, head) pairs.
enum { RUN_B = 4, RUN_T = 32, RUN_STEPS = 8, RUN_CORPUS = 500 };
static const ModelConfig RUN_CFG = {.vocab_size = 11, .block_size = RUN_T, .n_embd = 32, .n_head = 4,
                                    .dropout = 0.2f};

static float *train_run(float losses[RUN_STEPS], uint64_t seed) {
    Model m;
    Rng rng;
    rng_init(&rng, seed);
    model_init(&m, &RUN_CFG, RUN_B, true);
    model_init_weights(&m, &rng);
    int corpus[RUN_CORPUS], inputs[RUN_B * RUN_T], targets[RUN_B * RUN_T];
    random_tokens(corpus, RUN_CORPUS, RUN_CFG.vocab_size, &rng);
    for (int step = 0; step < RUN_STEPS; step++) {
        for (int b = 0; b < RUN_B; b++) {
            int start = (int)rng_below(&rng, RUN_CORPUS - RUN_T);
            memcpy(inputs + b * RUN_T, corpus + start, RUN_T * sizeof(int));
            memcpy(targets + b * RUN_T, corpus + start + 1, RUN_T * sizeof(int));
        }
        model_zero_grad(&m);
        losses[step] = model_forward(&m, inputs, targets, RUN_B, RUN_T, true, rng_u64(&rng));
        model_backward(&m);
        model_sgd_step(&m, 0.1f);
    }
    float *params = xmalloc(m.num_params * sizeof(float));
    memcpy(params, m.params_memory, m.num_params * sizeof(float));
    model_free(&m);
    return params;
}

static void assert_runs_identical(const float a[RUN_STEPS], const float b[RUN_STEPS], const float *params_a,
                                  const float *params_b, const char *what) {
    for (int step = 0; step < RUN_STEPS; step++)
        ck_assert_msg(memcmp(&a[step], &b[step], sizeof(float)) == 0, "%s: step %d loss %.9g vs %.9g", what, step,
                      (double)a[step], (double)b[step]);
    TensorSpec specs[NUM_PARAM_TENSORS];
    size_t n = param_table(&RUN_CFG, specs);
    ck_assert_msg(memcmp(params_a, params_b, n * sizeof(float)) == 0, "%s: final parameters differ", what);
}

START_TEST(the_same_seed_gives_bitwise_identical_losses) {
    float first[RUN_STEPS], second[RUN_STEPS];
    float *params_first = train_run(first, 9);
    float *params_second = train_run(second, 9);
    assert_runs_identical(first, second, params_first, params_second, "same seed");
    free(params_second);
    free(params_first);
}
END_TEST

START_TEST(one_and_two_threads_give_bitwise_identical_losses) {
    float one[RUN_STEPS], two[RUN_STEPS];
    int saved_threads = get_threads();
    set_threads(1);
    float *params_one = train_run(one, 10);
    set_threads(2);
    float *params_two = train_run(two, 10);
    set_threads(saved_threads);
    assert_runs_identical(one, two, params_one, params_two, "1 vs 2 threads");
    free(params_two);
    free(params_one);
}
END_TEST

Suite *model_suite(void) {
    Suite *s = suite_create("model");
    TCase *tables = tcase_create("tables");
    tcase_add_test(tables, param_table_lists_every_tensor_contiguously_in_model_h_order);
    tcase_add_test(tables, act_table_sizes_every_activation_for_the_largest_batch);
    tcase_add_test(tables, act_table_does_not_overflow_for_the_longest_context_check_config_allows);
    tcase_add_test(tables, model_init_points_each_view_at_its_table_entry);
    tcase_add_test(tables, check_config_accepts_a_valid_config);
    tcase_add_test(tables, check_config_rejects_bad_sizes_naming_the_flag);
    tcase_add_test(tables, memory_bytes_is_exactly_what_model_init_allocates);
    tcase_add_test(tables, memory_bytes_saturates_instead_of_overflowing);
    tcase_add_test(tables, check_memory_refuses_a_model_larger_than_memory_naming_the_flags);
    tcase_add_test(tables, find_nonfinite_names_the_first_tensor_and_element_holding_nan_or_infinity);
    suite_add_tcase(s, tables);

    TCase *passes = tcase_create("passes");
    tcase_add_loop_test(passes, every_parameter_gradient_matches_finite_differences, 0, 2);
    tcase_add_test(passes, gradients_are_right_for_a_batch_smaller_than_the_maximum);
    tcase_add_test(passes, first_loss_is_finite_and_positive);
    tcase_add_test(passes, a_smaller_batch_gives_the_logits_of_a_model_built_for_that_size);
    tcase_add_test(passes, dropout_changes_only_training_and_zero_dropout_changes_nothing);
    tcase_add_test(passes, forward_position_by_position_gives_the_logits_of_a_full_forward_pass);
    suite_add_tcase(s, passes);

    TCase *training = tcase_create("training");
    // These take about 0.1 s each, but run a few hundred two-thread parallel
    // regions; under a sanitizer on a busy 2-core machine each barrier can
    // wait a scheduler tick, which was seen to take them past Check's 4 s.
    tcase_set_timeout(training, 30);
    tcase_add_test(training, sgd_learns_a_repeating_sequence);
    tcase_add_test(training, the_same_seed_gives_bitwise_identical_losses);
    tcase_add_test(training, one_and_two_threads_give_bitwise_identical_losses);
    suite_add_tcase(s, training);
    return s;
}
