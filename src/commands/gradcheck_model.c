// gradcheck_model.c: the whole model's gradient against finite differences
// (see gradcheck_model.h).
#include "gradcheck_model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "rng.h"

const ModelConfig GRADCHECK_MODEL = {.vocab_size = 7, .block_size = GRADCHECK_CONTEXT, .n_embd = 8, .n_head = 2, .dropout = 0.2f};

const GradCheckTolerance GRADCHECK_GPT = {.h = 3e-3, .atol = 2e-4, .rtol = 2e-2};

GradCheckTolerance gradcheck_tolerance(Arch arch) { return arch != ARCH_CARD ? GRADCHECK_GPT : GRADCHECK_FLOAT32; }

ModelConfig gradcheck_config(Arch arch, int n_layer) {
    ModelConfig cfg = GRADCHECK_MODEL;
    cfg.arch = arch;
    cfg.n_layer = arch != ARCH_CARD ? n_layer : 1;
    if (arch == ARCH_GPT2) cfg.mlp = MLP_GELU_TANH;
    return cfg;
}

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
                         GradCheckResult *results, double *loss) {
    GradCheckCase gc = {.B = B, .T = T};
    Rng rng;
    rng_init(&rng, seed);
    model_init(&gc.m, cfg, max_batch, true);
    model_init_weights(&gc.m, &rng);
    if (cfg->arch != ARCH_CARD)
        for (size_t i = 0; i < gc.m.param_table.total; i++)
            gc.m.params_memory[i] = GRADCHECK_GPT_WEIGHT * (2.0f * rng_uniform(&rng) - 1.0f);
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
    for (int i = 0; i < gc.m.param_table.count; i++) {
        const TensorSpec *spec = &gc.m.param_table.specs[i];
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

int model_gradcheck(const ModelConfig *cfg, uint64_t seed, GradCheckResult *results) {
    return model_gradcheck_case(cfg, GRADCHECK_BATCH, GRADCHECK_BATCH, GRADCHECK_CONTEXT, seed,
                                gradcheck_tolerance(cfg->arch), results, NULL);
}

int cmd_gradcheck(int argc, char **argv) {
    Arch arch = ARCH_CARD;           // the model checked: card, or a gpt (gpt2) of --layers blocks
    int layers = 2;                  // blocks of the gpt or gpt2
    long seed = 1;                   // weights, batch and dropout mask of the model checked
    Flag flags[] = {
        {"--arch", FLAG_CHOICE, &arch, "ARCH", "the model checked: card (one attention block), gpt, or gpt2 (GPT-2's biases and tanh GELU)", 0, 0, false, NULL, ARCH_NAMES},
        {"--layers", FLAG_INT, &layers, "L", "blocks of the gpt or gpt2 checked (not card)", 1, GRADCHECK_MAX_LAYERS, false, NULL, NULL},
        {"--seed", FLAG_LONG, &seed, "S", "random seed for the model's weights, batch and dropout mask", 0, 9.2e18, false, NULL, NULL},
    };
    Command cmd = {"gradcheck", NULL,
                   "Check every parameter's gradient from model_backward against central finite differences of "
                   "model_forward's loss, on a small random model; exit status 1 if any tensor fails.",
                   "tinygpt gradcheck --arch gpt --layers 2 --seed 7", flags, (int)(sizeof flags / sizeof flags[0])};
    parse_flags(&cmd, argc, argv);
    if (arch == ARCH_CARD && command_flag(&cmd, "--layers")->seen)
        usage_error(&cmd, "--layers is for --arch gpt or gpt2: card has exactly one block; drop --layers, or add --arch gpt");

    const ModelConfig cfg = gradcheck_config(arch, layers);
    const GradCheckTolerance tol = gradcheck_tolerance(arch);
    char model[64] = "";  // card's line is as it was before gpt existed
    if (arch != ARCH_CARD)
        snprintf(model, sizeof model, "%s, %d layer%s, weights U(-%g, %g), ", arch == ARCH_GPT ? "gpt" : "gpt2 (GELU tanh)",
                 layers, layers == 1 ? "" : "s", (double)GRADCHECK_GPT_WEIGHT, (double)GRADCHECK_GPT_WEIGHT);
    printf("gradcheck: random model %sV=%d T=%d C=%d heads=%d, dropout %g with a fixed mask, batch %d, seed %ld\n"
           "each element of each parameter: analytic (model_backward) vs numeric (f(x+h) - f(x-h)) / 2h, h = %g;\n"
           "it passes when |analytic - numeric| <= %g + %g |numeric|. The relative error is large only where\n"
           "the gradient itself is near 0, which the absolute tolerance is for.\n\n",
           model, cfg.vocab_size, cfg.block_size, cfg.n_embd, cfg.n_head, (double)cfg.dropout, GRADCHECK_BATCH, seed,
           tol.h, tol.atol, tol.rtol);
    TensorTable table;
    param_table(&table, &cfg);
    GradCheckResult *results = xcalloc((size_t)table.count, sizeof *results);
    int failed = model_gradcheck(&cfg, (uint64_t)seed, results);

    int width = 27;  // the name column: as wide as the longest name
    for (int i = 0; i < table.count; i++)
        if ((int)strlen(table.specs[i].name) >= width) width = (int)strlen(table.specs[i].name) + 1;
    printf("%-*s %-8s %12s %12s  %s\n", width, "tensor", "shape", "max abs err", "max rel err", "result");
    for (int i = 0; i < table.count; i++) {
        const TensorSpec *spec = &table.specs[i];
        char shape[32];
        if (spec->ndim == 2) snprintf(shape, sizeof shape, "[%zu, %zu]", spec->shape[0], spec->shape[1]);
        else snprintf(shape, sizeof shape, "[%zu]", spec->shape[0]);
        const GradCheckResult *r = &results[i];
        printf("%-*s %-8s %12.2e %12.2e  ", width, spec->name, shape, r->max_abs_err, r->max_rel_err);
        if (r->failures == 0) printf("PASS\n");
        else
            printf("FAIL (%zu of %zu elements; worst [%zu]: analytic %.6g, numeric %.6g)\n", r->failures, spec->size,
                   r->worst_index, r->worst_analytic, r->worst_numeric);
    }
    if (failed == 0) printf("\nall %d tensors pass: model_backward is the gradient of model_forward\n", table.count);
    else printf("\n%d of %d tensors FAIL: a backward pass does not match its forward pass\n", failed, table.count);
    free(results);
    table_free(&table);
    return failed == 0 ? 0 : EXIT_RUNTIME;
}
