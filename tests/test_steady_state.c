// test_steady_state.c: the training step (src/model/model.c's passes and
// src/model/optimizer.c's clipping, schedule and update) allocates nothing
// once it runs, for card with SGD and gpt with AdamW.
//
// This file defines malloc, calloc and realloc for the whole test program,
// counting the calls and passing them on to glibc's own (__libc_malloc and
// friends), so a test can see whether anything allocated in a stretch of
// code, in tinygpt or in the libraries it calls (OpenMP included). Under
// AddressSanitizer, which owns malloc, the file defines nothing and the
// test is skipped (sanitized.h).
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "common.h"
#include "helpers.h"
#include "model.h"
#include "optimizer.h"
#include "rng.h"
#include "sanitized.h"
#include "tests.h"

#if !TINYGPT_SANITIZED
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t size);

static atomic_long allocations;

void *malloc(size_t size) {
    atomic_fetch_add(&allocations, 1);
    return __libc_malloc(size);
}
void *calloc(size_t count, size_t size) {
    atomic_fetch_add(&allocations, 1);
    return __libc_calloc(count, size);
}
void *realloc(void *p, size_t size) {
    atomic_fetch_add(&allocations, 1);
    return __libc_realloc(p, size);
}
#endif

// Sizes at which every layer splits its work between two threads (as in
// test_model.c's thread tests), with dropout on: card with SGD, a gpt
// of 2 blocks with AdamW, its schedule and clipping (the train loop's step),
// and that gpt with every swap of the modern recipe, trained by Muon.
enum { SB = 4, ST = 32, STEPS = 5 };
static const ModelConfig STEADY_CFG[3] = {
    {.vocab_size = 11, .block_size = ST, .n_embd = 32, .n_head = 4, .dropout = 0.2f, .arch = ARCH_CARD, .n_layer = 1},
    {.vocab_size = 11, .block_size = ST, .n_embd = 32, .n_head = 4, .dropout = 0.2f, .arch = ARCH_GPT, .n_layer = 2},
    {.vocab_size = 11, .block_size = ST, .n_embd = 32, .n_head = 4, .dropout = 0.2f, .arch = ARCH_GPT, .n_layer = 2,
     .norm = NORM_RMSNORM, .mlp = MLP_SWIGLU, .untied_head = true, .pos = POS_ROPE, .qk_norm = true},
};
enum { MUON_CASE = 2 };

static void train_steps(Model *m, Optimizer *opt, Rng *rng, const int *inputs, const int *targets, int steps) {
    for (int step = 0; step < steps; step++) {
        const double lr = optimizer_lr(&opt->cfg, opt->step);
        model_forward(m, inputs, targets, SB, ST, true, rng_u64(rng));
        model_zero_grad(m);
        model_backward(m);
        optimizer_clip_grads(m, opt->cfg.grad_clip);
        optimizer_step(opt, m, lr);
        size_t element;
        model_find_nonfinite(m, m->grads_memory, &element);
        model_find_nonfinite(m, m->params_memory, &element);
    }
}

// Loop test: _i indexes STEADY_CFG.
START_TEST(a_training_step_allocates_nothing_after_the_first) {
#if TINYGPT_SANITIZED
    return;  // AddressSanitizer's malloc cannot be counted here
#else
    const ModelConfig *cfg = &STEADY_CFG[_i];
    int saved_threads = get_threads();
    set_threads(2);
    Model m;
    Rng rng;
    rng_init(&rng, 3);
    model_init(&m, cfg, SB, true);
    model_init_weights(&m, &rng);
    const OptimizerConfig sgd = {.kind = OPT_SGD, .lr = 0.1, .schedule = LR_CONSTANT};
    const OptimizerConfig adamw = {.kind = OPT_ADAMW, .lr = 1e-3, .min_lr = 1e-4, .beta1 = 0.9, .beta2 = 0.99,
                                   .weight_decay = 0.1, .grad_clip = 1.0, .schedule = LR_COSINE, .warmup_steps = 2,
                                   .decay_steps = 10};
    OptimizerConfig muon = adamw;
    muon.kind = OPT_MUON;
    muon.muon_lr = 0.02;
    Optimizer opt;
    optimizer_init(&opt, _i == MUON_CASE ? &muon : cfg->arch == ARCH_GPT ? &adamw : &sgd, &m);
    int inputs[SB * ST], targets[SB * ST];
    for (int i = 0; i < SB * ST; i++) {
        inputs[i] = (int)rng_below(&rng, cfg->vocab_size);
        targets[i] = (int)rng_below(&rng, cfg->vocab_size);
    }
    train_steps(&m, &opt, &rng, inputs, targets, 2);  // OpenMP starts its threads here
    long before = atomic_load(&allocations);
    train_steps(&m, &opt, &rng, inputs, targets, STEPS);
    long during = atomic_load(&allocations) - before;
    // The counter works: a malloc of ours is seen.
    free(xmalloc(16));
    long probe = atomic_load(&allocations) - before - during;
    optimizer_free(&opt);
    model_free(&m);
    set_threads(saved_threads);
    ck_assert_msg(probe == 1, "the malloc counter saw %ld calls for one xmalloc", probe);
    ck_assert_msg(during == 0, "%d training steps of %s made %ld allocations", STEPS, arch_name(cfg->arch), during);
#endif
}
END_TEST

Suite *steady_state_suite(void) {
    Suite *s = suite_create("steady_state");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, a_training_step_allocates_nothing_after_the_first, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}
