// gradcheck_model.c: the whole model's gradient against finite differences
// (see gradcheck_model.h).
#include "gradcheck_model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "rng.h"

const ModelConfig GRADCHECK_MODEL = {.vocab_size = 7, .block_size = GRADCHECK_CONTEXT, .n_embd = 8, .n_head = 2, .dropout = 0.2f};

typedef struct {
    Model m;
    int *inputs, *targets;  // [B,T]
    int B, T;
    uint64_t dropout_key;
} GradCheckCase;

// The loss as a function of the parameters: a training forward pass (the
// same dropout mask every time).
static double case_loss(void *ctx) {
    GradCheckCase *gc = ctx;
    return model_forward(&gc->m, gc->inputs, gc->targets, gc->B, gc->T, true, gc->dropout_key);
}

int model_gradcheck_case(const ModelConfig *cfg, int max_batch, int B, int T, uint64_t seed, GradCheckTolerance tol,
                         GradCheckResult results[NUM_PARAM_TENSORS], double *loss) {
    GradCheckCase gc = {.B = B, .T = T};
    Rng rng;
    rng_init(&rng, seed);
    model_init(&gc.m, cfg, max_batch, true);
    model_init_weights(&gc.m, &rng);
    gc.inputs = xmalloc((size_t)B * T * sizeof(int));
    gc.targets = xmalloc((size_t)B * T * sizeof(int));
    for (int i = 0; i < B * T; i++) {
        gc.inputs[i] = (int)rng_below(&rng, (uint64_t)cfg->vocab_size);
        gc.targets[i] = (int)rng_below(&rng, (uint64_t)cfg->vocab_size);
    }
    gc.dropout_key = rng_u64(&rng);

    int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    // The analytic gradient, once. gradcheck then runs forward passes only,
    // which leave m.grads as they are.
    model_zero_grad(&gc.m);
    double initial_loss = case_loss(&gc);
    if (loss) *loss = initial_loss;
    model_backward(&gc.m);
    int failed = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const TensorSpec *spec = &gc.m.param_specs[i];
        results[i] = gradcheck(case_loss, &gc, gc.m.params_memory + spec->offset, gc.m.grads_memory + spec->offset,
                               spec->size, tol);
        failed += results[i].failures > 0;
    }
    omp_set_num_threads(saved_threads);
    free(gc.targets);
    free(gc.inputs);
    model_free(&gc.m);
    return failed;
}

int model_gradcheck(uint64_t seed, GradCheckResult results[NUM_PARAM_TENSORS]) {
    return model_gradcheck_case(&GRADCHECK_MODEL, GRADCHECK_BATCH, GRADCHECK_BATCH, GRADCHECK_CONTEXT, seed,
                                GRADCHECK_FLOAT32, results, NULL);
}

int cmd_gradcheck(int argc, char **argv) {
    long seed = 1;  // weights, batch and dropout mask of the model checked
    Flag flags[] = {
        {"--seed", FLAG_LONG, &seed, "S", "random seed for the model's weights, batch and dropout mask", 0, 9.2e18, false},
    };
    Command cmd = {"gradcheck", NULL,
                   "Check every parameter's gradient from model_backward against central finite differences of "
                   "model_forward's loss, on a small random model; exit status 1 if any tensor fails.",
                   "tinygpt gradcheck --seed 7", flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);

    const ModelConfig *cfg = &GRADCHECK_MODEL;
    const GradCheckTolerance tol = GRADCHECK_FLOAT32;
    printf("gradcheck: random model V=%d T=%d C=%d heads=%d, dropout %g with a fixed mask, batch %d, seed %ld\n"
           "each element of each parameter: analytic (model_backward) vs numeric (f(x+h) - f(x-h)) / 2h, h = %g;\n"
           "it passes when |analytic - numeric| <= %g + %g |numeric|. The relative error is large only where\n"
           "the gradient itself is near 0, which the absolute tolerance is for.\n\n",
           cfg->vocab_size, cfg->block_size, cfg->n_embd, cfg->n_head, (double)cfg->dropout, GRADCHECK_BATCH, seed,
           tol.h, tol.atol, tol.rtol);
    GradCheckResult results[NUM_PARAM_TENSORS];
    int failed = model_gradcheck((uint64_t)seed, results);

    TensorSpec specs[NUM_PARAM_TENSORS];
    param_table(cfg, specs);
    printf("%-27s %-8s %12s %12s  %s\n", "tensor", "shape", "max abs err", "max rel err", "result");
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        char shape[32];
        if (specs[i].ndim == 2) snprintf(shape, sizeof shape, "[%zu, %zu]", specs[i].shape[0], specs[i].shape[1]);
        else snprintf(shape, sizeof shape, "[%zu]", specs[i].shape[0]);
        const GradCheckResult *r = &results[i];
        printf("%-27s %-8s %12.2e %12.2e  ", specs[i].name, shape, r->max_abs_err, r->max_rel_err);
        if (r->failures == 0) printf("PASS\n");
        else
            printf("FAIL (%zu of %zu elements; worst [%zu]: analytic %.6g, numeric %.6g)\n", r->failures,
                   specs[i].size, r->worst_index, r->worst_analytic, r->worst_numeric);
    }
    if (failed == 0) printf("\nall %d tensors pass: model_backward is the gradient of model_forward\n", NUM_PARAM_TENSORS);
    else printf("\n%d of %d tensors FAIL: a backward pass does not match its forward pass\n", failed, NUM_PARAM_TENSORS);
    return failed == 0 ? 0 : EXIT_RUNTIME;
}
