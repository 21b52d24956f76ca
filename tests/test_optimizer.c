// test_optimizer.c: tests for src/model/optimizer.c: gradient clipping, the
// learning-rate schedule, and the SGD and AdamW updates.
//
// In order: AdamW's first and second updates against the textbook rule
// computed in double, and four updates against PyTorch's own numbers, bit
// for bit; its weight decay, on the 2-D tensors and never on the 1-D ones;
// the moments start at zero and SGD has none; the schedule at every corner
// of nanoGPT's get_lr, to the bit where rounding could differ, and the
// constant schedule's warmup; the gradient norm against a plain sum, and
// clipping below, above and off; one and two threads give the same bits;
// and SGD through optimizer_step is model_sgd_step, bit for bit. Muon: a
// rank-one gradient gives the update Newton-Schulz's quintic predicts for
// one singular value, in its direction, scaled for a tall matrix; what
// Muon does not move moves as AdamW moves it, to the bit; one and two
// threads give the same bits.
//
// The models are the smallest of each architecture (both have 2-D and 1-D
// tensors: gpt its LayerNorm weights, card its biases), with weights and
// gradients drawn uniform in [-1, 1) rather than from a forward pass, so
// every expected number is a function of the numbers put in.
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "model.h"
#include "optimizer.h"
#include "rng.h"
#include "tests.h"

// A float result against the same computation in double. Weights lie in
// [-1, 1), so a float32 rounding costs at most 6e-8 there; an update takes
// two roundings of the weight (the decay and the step) and a few relative
// errors of 1e-7 on a step of lr. 1e-6 covers two updates with room, and a
// wrong rule (no bias correction, decay on the wrong tensors, beta1 for
// beta2) moves some weight by 1e-4 or more at the lr and decay used here.
#define WEIGHT_TOLERANCE 1e-6
// A moment against the double formula. m and v are running means of g and
// g^2 with |g| < 1, whose terms round at 1e-8 or less in float32 (m may be
// small after cancelling, so the bound is absolute). Swapping beta1 and
// beta2 would move them by 1e-3 or more.
#define MOMENT_TOLERANCE 1e-7
// A learning rate against the closed form, relative: a few double roundings.
#define LR_RELATIVE_TOLERANCE 1e-12
// The gradient norm against a plain double sum, relative: the two add the
// same positive terms (up to 100k of them) in different orders, each
// addition rounding at 1e-16, which typically leaves them some 1e-14 apart.
#define NORM_RELATIVE_TOLERANCE 1e-12

static const ModelConfig TINY_GPT = {.vocab_size = 5, .block_size = 4, .n_embd = 8, .n_head = 2,
                                     .arch = ARCH_GPT, .n_layer = 1};
static const ModelConfig TINY_CARD = {.vocab_size = 5, .block_size = 4, .n_embd = 8, .n_head = 2,
                                      .arch = ARCH_CARD, .n_layer = 1};
// Large enough (about 100k parameters) that the norm, the clipping and the
// update all split their work between two threads.
static const ModelConfig THREADED_GPT = {.vocab_size = 11, .block_size = 16, .n_embd = 64, .n_head = 4,
                                         .arch = ARCH_GPT, .n_layer = 2};

// nanoGPT's shakespeare_char AdamW settings, with a larger lr so that a
// wrong rule shows: lr 1e-2, betas (0.9, 0.99), weight decay 0.1.
static const OptimizerConfig ADAMW = {.kind = OPT_ADAMW, .lr = 1e-2, .min_lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99,
                                      .weight_decay = 0.1, .schedule = LR_COSINE, .warmup_steps = 0,
                                      .decay_steps = 100};

static const ModelConfig *tiny_config(int arch) { return arch == ARCH_GPT ? &TINY_GPT : &TINY_CARD; }

// random_model: a model of "cfg" with weights and gradients uniform in [-1, 1).
static void random_model(Model *m, const ModelConfig *cfg, uint64_t seed) {
    model_init(m, cfg, 1, true);
    Rng rng;
    rng_init(&rng, seed);
    fill_uniform(m->params_memory, m->param_table.total, &rng);
    fill_uniform(m->grads_memory, m->param_table.total, &rng);
}

static float *copy_floats(const float *x, size_t n) {
    float *copy = malloc(n * sizeof *copy);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, x, n * sizeof *copy);
    return copy;
}

// ---------------------------------------------------------------------------
// The reference: the textbook AdamW for one weight, in double. Written as the
// paper writes it (m_hat and v_hat), not in torch's order, so that it checks
// the arithmetic rather than repeating it.

typedef struct {
    double w, m, v;
} AdamwReference;

static void adamw_reference_update(AdamwReference *r, double g, const OptimizerConfig *cfg, double lr, bool decays,
                                   long t) {
    if (decays) r->w -= lr * cfg->weight_decay * r->w;
    r->m = cfg->beta1 * r->m + (1.0 - cfg->beta1) * g;
    r->v = cfg->beta2 * r->v + (1.0 - cfg->beta2) * g * g;
    const double m_hat = r->m / (1.0 - pow(cfg->beta1, (double)t));
    const double v_hat = r->v / (1.0 - pow(cfg->beta2, (double)t));
    r->w -= lr * m_hat / (sqrt(v_hat) + OPTIMIZER_EPS);
}

static void assert_close(double got, double expected, double tolerance, const char *what, const char *tensor,
                         size_t i) {
    ck_assert_msg(fabs(got - expected) <= tolerance, "%s of %s[%zu] is %.9g, expected %.9g (tolerance %g)", what,
                  tensor, i, got, expected, tolerance);
}

// ---------------------------------------------------------------------------
// AdamW

// At t = 1, m_hat = g and v_hat = g^2, so with no decay the first update is
// lr * g / (|g| + eps): a step of lr against the gradient's sign, whatever
// its size.
START_TEST(first_adamw_step_moves_every_weight_by_lr_against_the_sign_of_its_gradient) {
    Model m;
    random_model(&m, tiny_config(_i), 1);
    OptimizerConfig cfg = ADAMW;
    cfg.weight_decay = 0.0;
    Optimizer opt;
    optimizer_init(&opt, &cfg, &m);
    const size_t n = m.param_table.total;
    float *w0 = copy_floats(m.params_memory, n);
    const double lr = 1e-2;

    optimizer_step(&opt, &m, lr);

    for (int k = 0; k < m.param_table.count; k++) {
        const TensorSpec *spec = &m.param_table.specs[k];
        for (size_t j = 0; j < spec->size; j++) {
            const size_t i = spec->offset + j;
            const double g = m.grads_memory[i];
            assert_close(m.params_memory[i], w0[i] - lr * g / (fabs(g) + OPTIMIZER_EPS), WEIGHT_TOLERANCE, "weight",
                         spec->name, j);
            assert_close(opt.m[i], (1.0 - cfg.beta1) * g, MOMENT_TOLERANCE, "m", spec->name, j);
            assert_close(opt.v[i], (1.0 - cfg.beta2) * g * g, MOMENT_TOLERANCE, "v", spec->name, j);
        }
    }
    ck_assert_int_eq(opt.step, 1);
    free(w0);
    optimizer_free(&opt);
    model_free(&m);
}
END_TEST

// Two updates with different gradients, weight decay on and lrs from the
// cosine schedule: the second update's bias corrections (t = 2) and its
// moments built on the first's.
START_TEST(two_adamw_steps_match_the_textbook_rule_computed_in_double) {
    Model m;
    random_model(&m, tiny_config(_i), 2);
    Optimizer opt;
    optimizer_init(&opt, &ADAMW, &m);
    const size_t n = m.param_table.total;
    AdamwReference *ref = calloc(n, sizeof *ref);
    ck_assert_ptr_nonnull(ref);
    for (size_t i = 0; i < n; i++) ref[i].w = m.params_memory[i];
    Rng rng;
    rng_init(&rng, 3);

    for (long step = 0; step < 2; step++) {
        if (step > 0) fill_uniform(m.grads_memory, n, &rng);  // a new gradient for the second update
        const double lr = optimizer_lr(&ADAMW, step);
        for (int k = 0; k < m.param_table.count; k++) {
            const TensorSpec *spec = &m.param_table.specs[k];
            for (size_t i = spec->offset; i < spec->offset + spec->size; i++)
                adamw_reference_update(&ref[i], m.grads_memory[i], &ADAMW, lr, spec->ndim == 2, step + 1);
        }
        optimizer_step(&opt, &m, lr);
    }

    for (int k = 0; k < m.param_table.count; k++) {
        const TensorSpec *spec = &m.param_table.specs[k];
        for (size_t j = 0; j < spec->size; j++) {
            const size_t i = spec->offset + j;
            assert_close(m.params_memory[i], ref[i].w, WEIGHT_TOLERANCE, "weight", spec->name, j);
            assert_close(opt.m[i], ref[i].m, MOMENT_TOLERANCE, "m", spec->name, j);
            assert_close(opt.v[i], ref[i].v, MOMENT_TOLERANCE, "v", spec->name, j);
        }
    }
    ck_assert_int_eq(opt.step, 2);
    free(ref);
    optimizer_free(&opt);
    model_free(&m);
}
END_TEST

// With zero gradients the Adam part moves nothing (m = v = 0, a step of
// 0 / eps), which leaves the decay alone to see: every weight of a 2-D
// tensor is multiplied by exactly (float)(1 - lr * weight_decay), every
// weight of a 1-D tensor keeps its bits.
START_TEST(weight_decay_shrinks_matrices_and_embeddings_and_leaves_one_dimensional_tensors_alone) {
    Model m;
    random_model(&m, tiny_config(_i), 4);
    memset(m.grads_memory, 0, m.param_table.total * sizeof *m.grads_memory);
    Optimizer opt;
    optimizer_init(&opt, &ADAMW, &m);
    float *w0 = copy_floats(m.params_memory, m.param_table.total);
    const double lr = 1e-2;
    const float decay = (float)(1.0 - lr * ADAMW.weight_decay);

    optimizer_step(&opt, &m, lr);

    int matrices = 0, vectors = 0;
    for (int k = 0; k < m.param_table.count; k++) {
        const TensorSpec *spec = &m.param_table.specs[k];
        if (spec->ndim == 2) matrices++;
        else vectors++;
        for (size_t j = 0; j < spec->size; j++) {
            const size_t i = spec->offset + j;
            const float expected = spec->ndim == 2 ? w0[i] * decay : w0[i];
            ck_assert_msg(m.params_memory[i] == expected, "%s[%zu] is %.9g, expected %.9g (%s)", spec->name, j,
                          (double)m.params_memory[i], (double)expected,
                          spec->ndim == 2 ? "decayed" : "a 1-D tensor, not decayed");
        }
    }
    ck_assert_msg(matrices > 0 && vectors > 0, "the model should have both 2-D and 1-D tensors");
    free(w0);
    optimizer_free(&opt);
    model_free(&m);
}
END_TEST

// fnv1a: a 64-bit FNV-1a hash of the bits of x[n], to compare a whole
// buffer with numbers recorded elsewhere.
static uint64_t fnv1a(const float *x, size_t n) {
    uint64_t hash = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        hash = (hash ^ bits) * 0x100000001b3u;
    }
    return hash;
}

// PyTorch's own numbers, to the bit: the tolerance tests above cannot see
// a rounding moved (gcc fusing a multiply into an add where torch rounds
// between them), and PyTorch parity rests on exactly that. The weights,
// gradients and lrs are exact binary fractions, so Python builds the same
// inputs; the hashes were printed by torch 1.13.1 (Debian's, CPU) running
// four steps of
//   w[i] = ((i*37) % 101 - 50) / 64, at step s g[i] = ((i*53 + s*29) % 97 - 48) / 128
//   torch.optim.AdamW([{2-D tensors, weight_decay 0.1}, {1-D, 0}], lr=1e-2, betas=(0.9, 0.99))
//   lr of step s: nanoGPT's get_lr(s) with lr 1e-2, min_lr 1e-3, warmup 1, decay 4
// on the card model's tensors in param_table order (the flat index i runs
// through them all), and fnv1a over each buffer in that order.
START_TEST(four_adamw_steps_give_pytorch_s_weights_and_moments_bit_for_bit) {
    Model m;
    model_init(&m, &TINY_CARD, 1, true);
    const size_t n = m.param_table.total;
    ck_assert_uint_eq(n, 381);
    for (size_t i = 0; i < n; i++) m.params_memory[i] = (float)((long)(i * 37 % 101) - 50) / 64.0f;
    const OptimizerConfig cfg = {.kind = OPT_ADAMW, .lr = 1e-2, .min_lr = 1e-3, .beta1 = 0.9, .beta2 = 0.99,
                                 .weight_decay = 0.1, .schedule = LR_COSINE, .warmup_steps = 1, .decay_steps = 4};
    Optimizer opt;
    optimizer_init(&opt, &cfg, &m);
    for (long step = 0; step < 4; step++) {
        for (size_t i = 0; i < n; i++)
            m.grads_memory[i] = (float)((long)((i * 53 + (size_t)step * 29) % 97) - 48) / 128.0f;
        optimizer_step(&opt, &m, optimizer_lr(&cfg, step));
    }
    ck_assert_msg(fnv1a(m.params_memory, n) == 0xb3c77f6ecd79348cu,
                  "the weights differ from PyTorch's (weight 0 is %a, PyTorch's -0x1.858cd6p-1)",
                  (double)m.params_memory[0]);
    ck_assert_msg(fnv1a(opt.m, n) == 0xeeb583a124327682u, "m differs from PyTorch's exp_avg");
    ck_assert_msg(fnv1a(opt.v, n) == 0x463c3997f0a09f7fu, "v differs from PyTorch's exp_avg_sq");
    optimizer_free(&opt);
    model_free(&m);
}
END_TEST

START_TEST(decay_applies_to_matrices_and_embeddings_and_never_to_layernorm_weights_or_biases) {
    Model gpt, card;
    model_init(&gpt, &TINY_GPT, 1, false);
    model_init(&card, &TINY_CARD, 1, false);
    const struct {
        const Model *model;
        const char *name;
        bool decays;
    } cases[] = {
        {&gpt, "tok_emb.weight", true},           {&gpt, "pos_emb.weight", true},
        {&gpt, "blocks.0.ln1.weight", false},     {&gpt, "blocks.0.attn.q.weight", true},
        {&gpt, "blocks.0.mlp.fc.weight", true},   {&gpt, "blocks.0.ln2.weight", false},
        {&gpt, "ln_f.weight", false},             {&card, "blocks.0.attn.proj.weight", true},
        {&card, "blocks.0.attn.proj.bias", false}, {&card, "head.weight", true},
        {&card, "head.bias", false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const TensorSpec *spec = table_find(&cases[c].model->param_table, cases[c].name);
        ck_assert_msg(spec != NULL, "no tensor named %s", cases[c].name);
        ck_assert_msg(optimizer_decays(spec) == cases[c].decays, "%s should %sdecay", cases[c].name,
                      cases[c].decays ? "" : "not ");
    }
    model_free(&card);
    model_free(&gpt);
}
END_TEST

START_TEST(adamw_starts_with_zero_moments_and_sgd_keeps_none) {
    Model m;
    model_init(&m, &TINY_GPT, 1, true);
    Optimizer adamw, sgd;
    optimizer_init(&adamw, &ADAMW, &m);
    optimizer_init(&sgd, &(OptimizerConfig){.kind = OPT_SGD, .lr = 0.1}, &m);
    ck_assert_uint_eq(adamw.size, m.param_table.total);
    ck_assert_int_eq(adamw.step, 0);
    for (size_t i = 0; i < adamw.size; i++) ck_assert(adamw.m[i] == 0.0f && adamw.v[i] == 0.0f);
    ck_assert_ptr_null(sgd.m);
    ck_assert_ptr_null(sgd.v);
    optimizer_free(&sgd);
    optimizer_free(&adamw);
    ck_assert_ptr_null(adamw.m);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// The schedule

static void assert_lr(const OptimizerConfig *cfg, long it, double expected) {
    const double lr = optimizer_lr(cfg, it);
    ck_assert_msg(fabs(lr - expected) <= LR_RELATIVE_TOLERANCE * fabs(expected), "lr at step %ld is %.17g, expected %.17g",
                  it, lr, expected);
}

// Warmup 10, decay over steps 10..110 from 1e-3 to 1e-4.
static const OptimizerConfig COSINE = {.kind = OPT_ADAMW, .lr = 1e-3, .min_lr = 1e-4, .schedule = LR_COSINE,
                                       .warmup_steps = 10, .decay_steps = 110};

START_TEST(cosine_schedule_warms_up_linearly_in_steps_of_lr_over_warmup_plus_one) {
    assert_lr(&COSINE, 0, 1e-3 / 11);
    assert_lr(&COSINE, 4, 1e-3 * 5 / 11);
    assert_lr(&COSINE, 9, 1e-3 * 10 / 11);
}
END_TEST

START_TEST(cosine_schedule_falls_from_lr_through_the_midpoint_to_min_lr_and_stays_there) {
    assert_lr(&COSINE, 10, 1e-3);                 // ratio 0: the peak
    assert_lr(&COSINE, 60, (1e-3 + 1e-4) / 2);    // ratio 1/2: cos = 0, halfway
    assert_lr(&COSINE, 35, 1e-4 + 0.5 * (1.0 + cos(M_PI / 4)) * (1e-3 - 1e-4));
    ck_assert(optimizer_lr(&COSINE, 110) == 1e-4);  // ratio 1: exactly min_lr
    ck_assert(optimizer_lr(&COSINE, 111) == 1e-4);
    ck_assert(optimizer_lr(&COSINE, 1000000) == 1e-4);
    for (long it = 10; it < 110; it++)
        ck_assert_msg(optimizer_lr(&COSINE, it + 1) <= optimizer_lr(&COSINE, it), "lr rises at step %ld", it + 1);
}
END_TEST

// With --time: fraction 0 is the steps' schedule to the bit; the warmup
// counts steps whatever the clock says; after it the cosine follows
// whichever of the steps and the time is further along, and the time's end
// is min_lr. A run of --time alone has decay_steps out of reach.
START_TEST(timed_schedule_follows_the_steps_or_the_clock_whichever_is_further_along) {
    for (long it = 0; it < 200; it++) ck_assert(optimizer_lr_timed(&COSINE, it, 0.0) == optimizer_lr(&COSINE, it));
    ck_assert(optimizer_lr_timed(&COSINE, 4, 0.9) == optimizer_lr(&COSINE, 4));  // warming up
    // Step 35 has ratio 1/4; a clock at 1/2 is further along: the midpoint.
    ck_assert_double_eq_tol(optimizer_lr_timed(&COSINE, 35, 0.5), (1e-3 + 1e-4) / 2, 1e-15);
    // Step 60 has ratio 1/2; a clock at 1/4 is behind it: the steps decide.
    ck_assert(optimizer_lr_timed(&COSINE, 60, 0.25) == optimizer_lr(&COSINE, 60));
    ck_assert(optimizer_lr_timed(&COSINE, 20, 1.0) == 1e-4);
    const OptimizerConfig timed = {.kind = OPT_ADAMW, .lr = 1e-3, .min_lr = 1e-4, .schedule = LR_COSINE,
                                   .warmup_steps = 10, .decay_steps = 1000000000000L};
    assert_lr(&timed, 10, 1e-3);
    ck_assert_double_eq_tol(optimizer_lr_timed(&timed, 500, 0.5), (1e-3 + 1e-4) / 2, 1e-15);
    ck_assert(optimizer_lr_timed(&timed, 500, 1.0) == 1e-4);
    // A constant rate stays constant.
    const OptimizerConfig constant = {.kind = OPT_ADAMW, .lr = 1e-3, .schedule = LR_CONSTANT, .warmup_steps = 10};
    ck_assert(optimizer_lr_timed(&constant, 50, 0.99) == 1e-3);
}
END_TEST

// nanoGPT's get_lr(it) printed by Python (float.hex) for lr 1e-3, min_lr
// 1e-4, warmup 100, decay 5000: at these steps, computing
// min_lr + coeff * (lr - min_lr) as one fused multiply-add instead of
// rounding the product first gives a number one bit away.
START_TEST(cosine_schedule_gives_nanogpt_s_lr_to_the_bit) {
    const OptimizerConfig cfg = {.kind = OPT_ADAMW, .lr = 1e-3, .min_lr = 1e-4, .schedule = LR_COSINE,
                                 .warmup_steps = 100, .decay_steps = 5000};
    const struct {
        long it;
        double lr;
    } python[] = {{117, 0x1.062311fb772b3p-10}, {1001, 0x1.e601710538987p-11}, {4013, 0x1.887251e068b46p-13}};
    for (size_t i = 0; i < sizeof python / sizeof python[0]; i++)
        ck_assert_msg(optimizer_lr(&cfg, python[i].it) == python[i].lr, "lr at step %ld is %a, Python's %a",
                      python[i].it, optimizer_lr(&cfg, python[i].it), python[i].lr);
}
END_TEST

// nanoGPT divides by decay_steps - warmup_steps; with no steps to decay
// over, the schedule goes from the end of the warmup straight to min_lr.
START_TEST(cosine_schedule_with_no_steps_to_decay_over_jumps_to_min_lr_without_dividing_by_zero) {
    for (long decay_steps = 5; decay_steps <= 10; decay_steps += 5) {  // below, then equal to the warmup
        OptimizerConfig cfg = COSINE;
        cfg.decay_steps = decay_steps;
        assert_lr(&cfg, 9, 1e-3 * 10 / 11);
        ck_assert_msg(optimizer_lr(&cfg, 10) == 1e-4, "decay_steps %ld: lr at 10 is %g", decay_steps,
                      optimizer_lr(&cfg, 10));
        ck_assert(optimizer_lr(&cfg, 11) == 1e-4);
    }
}
END_TEST

START_TEST(cosine_schedule_without_warmup_starts_at_lr) {
    OptimizerConfig cfg = COSINE;
    cfg.warmup_steps = 0;
    assert_lr(&cfg, 0, 1e-3);
    assert_lr(&cfg, 55, (1e-3 + 1e-4) / 2);
}
END_TEST

// constant: the same warmup as cosine, then lr for ever, whatever min_lr
// and decay_steps say; without warmup, lr from the first step (nanoGPT's
// decay_lr = False).
START_TEST(constant_schedule_warms_up_like_cosine_then_holds_lr) {
    OptimizerConfig cfg = COSINE;
    cfg.schedule = LR_CONSTANT;
    assert_lr(&cfg, 0, 1e-3 / 11);
    assert_lr(&cfg, 9, 1e-3 * 10 / 11);
    ck_assert(optimizer_lr(&cfg, 10) == 1e-3);
    ck_assert(optimizer_lr(&cfg, 110) == 1e-3);
    ck_assert(optimizer_lr(&cfg, 1000000) == 1e-3);
    cfg.warmup_steps = 0;
    ck_assert(optimizer_lr(&cfg, 0) == 1e-3);
}
END_TEST

// ---------------------------------------------------------------------------
// The gradient norm and clipping

// gradients_with_norm_5: all zero but a 3 in the first tensor and a 4 in the
// last, so that the norm, exactly 5, spans the whole table.
static void gradients_with_norm_5(Model *m) {
    memset(m->grads_memory, 0, m->param_table.total * sizeof *m->grads_memory);
    m->grads_memory[1] = 3.0f;
    m->grads_memory[m->param_table.total - 2] = -4.0f;
}

START_TEST(grad_norm_is_the_square_root_of_the_sum_of_every_gradient_squared) {
    const ModelConfig *configs[] = {&TINY_CARD, &TINY_GPT, &THREADED_GPT};
    Model m;
    random_model(&m, configs[_i], 5);
    double sum = 0.0;
    for (size_t i = 0; i < m.param_table.total; i++) sum += (double)m.grads_memory[i] * m.grads_memory[i];
    const double norm = optimizer_grad_norm(&m);
    ck_assert_msg(fabs(norm - sqrt(sum)) <= NORM_RELATIVE_TOLERANCE * sqrt(sum), "norm %.17g, expected %.17g", norm,
                  sqrt(sum));
    model_free(&m);
}
END_TEST

// train_step searches the gradients for a NaN or an infinity only when
// their norm is not finite: so the norm must be finite exactly when every
// gradient is, even one at FLT_MAX (whose square overflows a float).
START_TEST(grad_norm_is_finite_exactly_when_every_gradient_is) {
    Model m;
    random_model(&m, &TINY_GPT, 9);
    float *g = m.grads_memory;
    const size_t last = m.param_table.total - 1;
    ck_assert(isfinite(optimizer_grad_norm(&m)));
    g[last] = FLT_MAX;
    g[0] = -FLT_MAX;
    ck_assert(isfinite(optimizer_grad_norm(&m)));
    const float broken[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++) {
        g[last / 2] = broken[b];
        ck_assert_msg(!isfinite(optimizer_grad_norm(&m)), "gradient %g, norm %g", (double)broken[b],
                      optimizer_grad_norm(&m));
    }
    model_free(&m);
}
END_TEST

START_TEST(clipping_below_the_threshold_returns_the_norm_and_leaves_the_gradients_alone) {
    Model m;
    random_model(&m, &TINY_GPT, 6);
    gradients_with_norm_5(&m);
    float *g0 = copy_floats(m.grads_memory, m.param_table.total);
    ck_assert(optimizer_clip_grads(&m, 10.0) == 5.0);
    ck_assert(memcmp(m.grads_memory, g0, m.param_table.total * sizeof *g0) == 0);
    free(g0);
    model_free(&m);
}
END_TEST

// Above it, every gradient is multiplied by max_norm / (norm + 1e-6), in
// float32 as torch computes it, (1 / (norm + 1e-6)) * max_norm; that leaves
// the norm a hair under max_norm.
START_TEST(clipping_above_the_threshold_scales_every_gradient_down_to_max_norm) {
    Model m;
    random_model(&m, &TINY_GPT, 7);
    gradients_with_norm_5(&m);
    float *g0 = copy_floats(m.grads_memory, m.param_table.total);
    ck_assert(optimizer_clip_grads(&m, 1.0) == 5.0);
    const float scale = (1.0f / (5.0f + 1e-6f)) * 1.0f;
    for (size_t i = 0; i < m.param_table.total; i++)
        ck_assert_msg(m.grads_memory[i] == g0[i] * scale, "gradient %zu is %.9g, expected %.9g", i,
                      (double)m.grads_memory[i], (double)(g0[i] * scale));
    const double clipped = optimizer_grad_norm(&m);
    ck_assert_msg(fabs(clipped - 1.0) <= 1e-6, "the clipped norm is %.9g, expected 1", clipped);
    free(g0);
    model_free(&m);
}
END_TEST

START_TEST(clipping_at_zero_is_off_but_still_returns_the_norm) {
    Model m;
    random_model(&m, &TINY_GPT, 8);
    gradients_with_norm_5(&m);
    float *g0 = copy_floats(m.grads_memory, m.param_table.total);
    ck_assert(optimizer_clip_grads(&m, 0.0) == 5.0);
    ck_assert(memcmp(m.grads_memory, g0, m.param_table.total * sizeof *g0) == 0);
    free(g0);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// Threads, and SGD

// clip_and_step: three steps of clipping (at a norm below the gradients',
// so that it scales) and AdamW on THREADED_GPT with "threads" threads; the
// weights, moments and norms are left in "m", "opt" and "norms".
static void clip_and_step(Model *m, Optimizer *opt, double *norms, int threads) {
    set_threads(threads);
    random_model(m, &THREADED_GPT, 9);
    OptimizerConfig cfg = ADAMW;
    cfg.grad_clip = 1.0;
    optimizer_init(opt, &cfg, m);
    Rng rng;
    rng_init(&rng, 10);
    for (long step = 0; step < 3; step++) {
        if (step > 0) fill_uniform(m->grads_memory, m->param_table.total, &rng);
        norms[step] = optimizer_clip_grads(m, cfg.grad_clip);
        ck_assert_msg(norms[step] > cfg.grad_clip, "the test needs gradients that are clipped");
        optimizer_step(opt, m, optimizer_lr(&cfg, step));
    }
}

START_TEST(one_and_two_threads_give_bitwise_identical_norms_weights_and_moments) {
    Model m1, m2;
    Optimizer opt1, opt2;
    double norms1[3], norms2[3];
    clip_and_step(&m1, &opt1, norms1, 1);
    clip_and_step(&m2, &opt2, norms2, 2);
    const size_t bytes = m1.param_table.total * sizeof(float);
    ck_assert(memcmp(norms1, norms2, sizeof norms1) == 0);
    ck_assert(memcmp(m1.params_memory, m2.params_memory, bytes) == 0);
    ck_assert(memcmp(opt1.m, opt2.m, bytes) == 0);
    ck_assert(memcmp(opt1.v, opt2.v, bytes) == 0);
    optimizer_free(&opt2);
    optimizer_free(&opt1);
    model_free(&m2);
    model_free(&m1);
}
END_TEST

// The lr is a double here and a float in model_sgd_step; 0.05 is not a
// float, so this also checks that the step rounds it to one first.
START_TEST(sgd_through_optimizer_step_is_bit_identical_to_model_sgd_step) {
    Model a, b;
    random_model(&a, tiny_config(_i), 11);
    random_model(&b, tiny_config(_i), 11);
    Optimizer opt;
    optimizer_init(&opt, &(OptimizerConfig){.kind = OPT_SGD, .lr = 0.05}, &b);
    model_sgd_step(&a, 0.05f);
    optimizer_step(&opt, &b, 0.05);
    ck_assert(memcmp(a.params_memory, b.params_memory, a.param_table.total * sizeof(float)) == 0);
    ck_assert_int_eq(opt.step, 1);
    optimizer_free(&opt);
    model_free(&b);
    model_free(&a);
}
END_TEST

// ---------------------------------------------------------------------------
// Muon

// Muon's lr and the rest's: a constant schedule without warmup, so step 0
// runs at exactly these.
static const OptimizerConfig MUON = {.kind = OPT_MUON, .lr = 1e-2, .muon_lr = 0.02, .beta1 = 0.9, .beta2 = 0.99,
                                     .weight_decay = 0.1, .schedule = LR_CONSTANT};

// The rank-one update, relative to its largest entry. The gradient in
// float32 is rank one only up to rounding: its other singular values are
// ~1e-8 of the first, and so is what each Newton-Schulz product rounds
// off. Small singular values are what the quintic grows fastest (its slope
// at 0 is a = 3.4, 3.4^5 = 480 over five steps), so the update carries
// ~1e-5 of them, spread over the matrix's entries: up to a few 1e-4 of the
// largest entry (2e-4 measured). The singular value itself is stable (the
// five slopes of p along its orbit from 1 multiply to about 1). A wrong
// scale (no sqrt(rows/cols), one step too few or many, the transpose
// skipped) is off by 10% or more.
#define MUON_RANK_ONE_RTOL 1e-3

// A gradient g = u v^T of rank one has one singular value, |u| |v|, and
// U V^T = (u/|u|)(v/|v|)^T. Muon's first step: buf = (1 - beta) g, the
// Nesterov direction (1 - beta) g + beta buf = (1 - beta^2) g, scaled to
// singular value s0 = n / (n + 1e-7), n its norm; Newton-Schulz maps s to
// p(s) = a s + b s^3 + c s^5 five times; and mlp.fc.weight [4C, C] is tall,
// so the step is muon_lr sqrt(4) p^5(s0) (u/|u|)(v/|v|)^T. The other block
// matrices have zero gradients and must not move.
START_TEST(muon_turns_a_rank_one_gradient_into_its_direction_at_the_quintic_s_singular_value) {
    Model m;
    random_model(&m, &TINY_GPT, 21);
    memset(m.grads_memory, 0, m.param_table.total * sizeof(float));
    const TensorSpec *fc = table_find(&m.param_table, "blocks.0.mlp.fc.weight");
    ck_assert_ptr_nonnull(fc);
    const int rows = (int)fc->shape[0], cols = (int)fc->shape[1];
    ck_assert_int_gt(rows, cols);
    double u[64], v[64], uu = 0, vv = 0;
    Rng rng;
    rng_init(&rng, 22);
    for (int r = 0; r < rows; r++) {
        u[r] = 2.0 * rng_uniform(&rng) - 1.0;
        uu += u[r] * u[r];
    }
    for (int c = 0; c < cols; c++) {
        v[c] = 2.0 * rng_uniform(&rng) - 1.0;
        vv += v[c] * v[c];
    }
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) m.grads_memory[fc->offset + (size_t)r * cols + c] = (float)(u[r] * v[c]);
    float *w0 = copy_floats(m.params_memory, m.param_table.total);
    Optimizer opt;
    optimizer_init(&opt, &MUON, &m);
    optimizer_step(&opt, &m, MUON.lr);

    const double norm = (1.0 - MUON_MOMENTUM * MUON_MOMENTUM) * sqrt(uu) * sqrt(vv);
    double s = norm / (norm + MUON_NS_EPS);
    for (int k = 0; k < MUON_NS_STEPS; k++) s = MUON_NS_A * s + MUON_NS_B * pow(s, 3) + MUON_NS_C * pow(s, 5);
    const double scale = -MUON.muon_lr * sqrt((double)rows / cols) * s / (sqrt(uu) * sqrt(vv));
    double largest = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) largest = fmax(largest, fabs(scale * u[r] * v[c]));
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const size_t i = fc->offset + (size_t)r * cols + c;
            assert_close(m.params_memory[i] - w0[i], scale * u[r] * v[c], MUON_RANK_ONE_RTOL * largest,
                         "the step", fc->name, i - fc->offset);
        }
    for (int k = 0; k < m.param_table.count; k++) {
        const TensorSpec *spec = &m.param_table.specs[k];
        if (spec == fc || !optimizer_uses_muon(spec)) continue;
        ck_assert_msg(memcmp(m.params_memory + spec->offset, w0 + spec->offset, spec->size * sizeof(float)) == 0,
                      "%s moved without a gradient", spec->name);
    }
    free(w0);
    optimizer_free(&opt);
    model_free(&m);
}
END_TEST

// Muon moves the blocks' matrices; everything else (the embeddings, the
// LayerNorm weights, card's biases and head) is AdamW's, at lr, and must
// get AdamW's bits, moments included, over two steps.
START_TEST(muon_leaves_everything_but_the_block_matrices_to_adamw_bit_for_bit) {
    Model a, b;
    random_model(&a, tiny_config(_i), 23);
    random_model(&b, tiny_config(_i), 23);
    OptimizerConfig adamw = MUON;
    adamw.kind = OPT_ADAMW;
    Optimizer muon, plain;
    optimizer_init(&muon, &MUON, &a);
    optimizer_init(&plain, &adamw, &b);
    for (int step = 0; step < 2; step++) {
        optimizer_step(&muon, &a, MUON.lr);
        optimizer_step(&plain, &b, MUON.lr);
    }
    int n_muon = 0, n_adamw = 0;
    for (int k = 0; k < a.param_table.count; k++) {
        const TensorSpec *spec = &a.param_table.specs[k];
        const size_t bytes = spec->size * sizeof(float);
        const bool same = memcmp(a.params_memory + spec->offset, b.params_memory + spec->offset, bytes) == 0;
        if (optimizer_uses_muon(spec)) {
            n_muon++;
            ck_assert_msg(!same, "%s moved as AdamW moves it", spec->name);
            ck_assert_msg(strncmp(spec->name, "blocks.", 7) == 0 && spec->ndim == 2, "%s is not a block matrix",
                          spec->name);
        } else {
            n_adamw++;
            ck_assert_msg(same, "%s did not get AdamW's step", spec->name);
            ck_assert(memcmp(muon.m + spec->offset, plain.m + spec->offset, bytes) == 0);
            ck_assert(memcmp(muon.v + spec->offset, plain.v + spec->offset, bytes) == 0);
        }
    }
    ck_assert_int_gt(n_muon, 0);
    ck_assert_int_gt(n_adamw, 0);
    optimizer_free(&plain);
    optimizer_free(&muon);
    model_free(&b);
    model_free(&a);
}
END_TEST

// muon_steps: THREADED_GPT's weights after three Muon steps on "threads"
// threads, into "m" and "opt".
static void muon_steps(Model *m, Optimizer *opt, int threads) {
    set_threads(threads);
    random_model(m, &THREADED_GPT, 24);
    optimizer_init(opt, &MUON, m);
    Rng rng;
    rng_init(&rng, 25);
    for (long step = 0; step < 3; step++) {
        if (step > 0) fill_uniform(m->grads_memory, m->param_table.total, &rng);
        optimizer_step(opt, m, MUON.lr);
    }
}

START_TEST(muon_gives_the_same_bits_on_one_and_two_threads) {
    Model m1, m2;
    Optimizer opt1, opt2;
    muon_steps(&m1, &opt1, 1);
    muon_steps(&m2, &opt2, 2);
    const size_t bytes = m1.param_table.total * sizeof(float);
    ck_assert(memcmp(m1.params_memory, m2.params_memory, bytes) == 0);
    ck_assert(memcmp(opt1.momentum, opt2.momentum, bytes) == 0);
    optimizer_free(&opt2);
    optimizer_free(&opt1);
    model_free(&m2);
    model_free(&m1);
}
END_TEST

Suite *optimizer_suite(void) {
    Suite *s = suite_create("optimizer");
    // Loop tests run once per architecture: _i is ARCH_CARD (0), then ARCH_GPT (1).
    TCase *adamw = tcase_create("adamw");
    tcase_add_loop_test(adamw, first_adamw_step_moves_every_weight_by_lr_against_the_sign_of_its_gradient, 0, 2);
    tcase_add_loop_test(adamw, two_adamw_steps_match_the_textbook_rule_computed_in_double, 0, 2);
    tcase_add_loop_test(adamw, weight_decay_shrinks_matrices_and_embeddings_and_leaves_one_dimensional_tensors_alone,
                        0, 2);
    tcase_add_test(adamw, four_adamw_steps_give_pytorch_s_weights_and_moments_bit_for_bit);
    tcase_add_test(adamw, decay_applies_to_matrices_and_embeddings_and_never_to_layernorm_weights_or_biases);
    tcase_add_test(adamw, adamw_starts_with_zero_moments_and_sgd_keeps_none);
    suite_add_tcase(s, adamw);

    TCase *schedule = tcase_create("schedule");
    tcase_add_test(schedule, cosine_schedule_warms_up_linearly_in_steps_of_lr_over_warmup_plus_one);
    tcase_add_test(schedule, cosine_schedule_falls_from_lr_through_the_midpoint_to_min_lr_and_stays_there);
    tcase_add_test(schedule, cosine_schedule_gives_nanogpt_s_lr_to_the_bit);
    tcase_add_test(schedule, timed_schedule_follows_the_steps_or_the_clock_whichever_is_further_along);
    tcase_add_test(schedule, cosine_schedule_with_no_steps_to_decay_over_jumps_to_min_lr_without_dividing_by_zero);
    tcase_add_test(schedule, cosine_schedule_without_warmup_starts_at_lr);
    tcase_add_test(schedule, constant_schedule_warms_up_like_cosine_then_holds_lr);
    suite_add_tcase(s, schedule);

    TCase *clipping = tcase_create("clipping");
    tcase_add_loop_test(clipping, grad_norm_is_the_square_root_of_the_sum_of_every_gradient_squared, 0, 3);
    tcase_add_test(clipping, grad_norm_is_finite_exactly_when_every_gradient_is);
    tcase_add_test(clipping, clipping_below_the_threshold_returns_the_norm_and_leaves_the_gradients_alone);
    tcase_add_test(clipping, clipping_above_the_threshold_scales_every_gradient_down_to_max_norm);
    tcase_add_test(clipping, clipping_at_zero_is_off_but_still_returns_the_norm);
    suite_add_tcase(s, clipping);

    TCase *threads = tcase_create("threads and sgd");
    // Two-thread parallel regions; under a sanitizer on a busy machine a
    // barrier can wait a scheduler tick (see test_model.c).
    tcase_set_timeout(threads, 30);
    tcase_add_test(threads, one_and_two_threads_give_bitwise_identical_norms_weights_and_moments);
    tcase_add_loop_test(threads, sgd_through_optimizer_step_is_bit_identical_to_model_sgd_step, 0, 2);
    suite_add_tcase(s, threads);

    TCase *muon = tcase_create("muon");
    tcase_set_timeout(muon, 30);  // two threads, as above
    tcase_add_test(muon, muon_turns_a_rank_one_gradient_into_its_direction_at_the_quintic_s_singular_value);
    tcase_add_loop_test(muon, muon_leaves_everything_but_the_block_matrices_to_adamw_bit_for_bit, 0, 2);
    tcase_add_test(muon, muon_gives_the_same_bits_on_one_and_two_threads);
    suite_add_tcase(s, muon);
    return s;
}
