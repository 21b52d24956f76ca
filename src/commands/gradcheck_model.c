// gradcheck_model.c: the whole model's gradient against finite differences
// (see gradcheck_model.h): the check, then the command.
#include "gradcheck_model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "rng.h"
#include "train_setup.h"

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
    return model_gradcheck_case(cfg, GRADCHECK_BATCH, GRADCHECK_BATCH, cfg->block_size, seed,
                                gradcheck_tolerance(cfg->arch), results, NULL);
}

// ===========================================================================
// The command: train's model flags, from its settings table.

// The sizes the command line did not give are GRADCHECK_MODEL's (and
// GRADCHECK_LAYERS blocks), not train's: finite differences run two
// forward passes per weight, and at train's sizes a gpt has half a
// million. small_size: size i of N_SMALL_SIZES, its setting, and its value
// as it would be typed, into "text" [16].
enum { N_SMALL_SIZES = 5 };
static const Setting *small_size(int i, char *text) {
    const struct {
        const char *name;
        double value;
    } sizes[N_SMALL_SIZES] = {{"layers", GRADCHECK_LAYERS},     {"context", GRADCHECK_MODEL.block_size},
                              {"embd", GRADCHECK_MODEL.n_embd}, {"heads", GRADCHECK_MODEL.n_head},
                              {"dropout", GRADCHECK_MODEL.dropout}};
    snprintf(text, 16, "%g", sizes[i].value);
    return setting_named(sizes[i].name);
}

// show_small_sizes: those sizes as the --help defaults of "flags" [n].
static void show_small_sizes(Flag *flags, int n) {
    static char texts[N_SMALL_SIZES][16];
    for (int i = 0; i < N_SMALL_SIZES; i++) {
        const Setting *st = small_size(i, texts[i]);
        for (int j = 0; j < n; j++)
            if (strcmp(flags[j].name, st->flag) == 0) flags[j].default_text = texts[i];
    }
}

// apply_small_sizes: those sizes into "s", each not "given", as if typed
// (--dropout 0.2: the double 0.2).
static void apply_small_sizes(TrainSettings *s, const Given *given) {
    for (int i = 0; i < N_SMALL_SIZES; i++) {
        char text[16];
        const Setting *st = small_size(i, text);
        if (given->given[st - TRAIN_SETTINGS]) continue;
        void *field = (char *)s + st->offset;
        if (st->type == SETTING_INT) *(int *)field = atoi(text);
        else *(double *)field = strtod(text, NULL);
    }
}

GradCheckRequest gradcheck_request(int argc, char **argv) {
    GradCheckRequest req = {.seed = 1};
    Flag flags[NUM_TRAIN_SETTINGS_MAX + 1];
    Command cmd = {"gradcheck", NULL,
                   "Check every parameter's gradient from model_backward against central finite differences of "
                   "model_forward's loss, on a small random model: train's (its flags and defaults; its sizes "
                   "small unless given); exit status 1 if any tensor fails.",
                   "tinygpt gradcheck --norm layernorm --mlp gelu --seed 7", NULL, 0};
    settings_model_command(&cmd, flags, &req.settings);
    flags[cmd.n_flags++] = (Flag){"--seed", FLAG_LONG, &req.seed, "S",
                                  "random seed for the model's weights, batch and dropout mask", 0, 9.2e18, false,
                                  NULL, NULL};
    show_small_sizes(flags, cmd.n_flags);
    Given given;
    settings_model_parse(&cmd, argc, argv, &req.settings, &given);
    settings_finish(&cmd, &req.settings, &given, NULL);
    apply_small_sizes(&req.settings, &given);
    req.config = train_model_config(&req.settings, GRADCHECK_MODEL.vocab_size);
    Error err;
    if (!model_check_config(&req.config, &err)) usage_error(&cmd, "%s", err.msg);
    return req;
}

// print_model: the model checked, as the flags that give it, on one line.
static void print_model(const GradCheckRequest *req, GradCheckTolerance tol) {
    printf("gradcheck: random model");
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (!setting_shapes_model(st) || !setting_needs_met(st, &req->settings)) continue;
        char value[64];
        settings_value_text(st, &req->settings, value, sizeof value);
        if (st->type != SETTING_SWITCH) printf(" %s %s", st->flag, value);
        else if (value[0] == '1') printf(" %s", st->flag);
        else if (st->off_flag) printf(" %s", st->off_flag);
    }
    const ModelConfig *cfg = &req->config;
    printf(", V=%d", cfg->vocab_size);
    if (cfg->arch != ARCH_CARD) printf(", weights U(-%g, %g)", (double)GRADCHECK_GPT_WEIGHT, (double)GRADCHECK_GPT_WEIGHT);
    printf("; dropout with a fixed mask, batch %d, seed %ld\n"
           "each element of each parameter: analytic (model_backward) vs numeric (f(x+h) - f(x-h)) / 2h, h = %g;\n"
           "it passes when |analytic - numeric| <= %g + %g |numeric|. The relative error is large only where\n"
           "the gradient itself is near 0, which the absolute tolerance is for.\n\n",
           GRADCHECK_BATCH, req->seed, tol.h, tol.atol, tol.rtol);
}

int cmd_gradcheck(int argc, char **argv) {
    const GradCheckRequest req = gradcheck_request(argc, argv);
    const ModelConfig *cfg = &req.config;
    const GradCheckTolerance tol = gradcheck_tolerance(cfg->arch);
    print_model(&req, tol);
    TensorTable table;
    param_table(&table, cfg);
    GradCheckResult *results = xcalloc((size_t)table.count, sizeof *results);
    int failed = model_gradcheck(cfg, (uint64_t)req.seed, results);

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
