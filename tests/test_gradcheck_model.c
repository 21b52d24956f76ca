// test_gradcheck_model.c: tests for src/commands/gradcheck_model.c
// (`tinygpt gradcheck`): it passes on the real model, card and gpt, for
// several seeds, printing one line per parameter tensor; it checks the
// model train builds from the same flags (with none, train's default
// model), at its small sizes, and passes; it fails, with exit status 1, on
// a build whose softmax backward is deliberately wrong
// ($(BUILD)/tinygpt-broken, see the Makefile), naming the tensors whose
// gradient flows through that softmax (one loop test over card and gpt);
// and it refuses bad flags in one line.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck_model.h"
#include "helpers.h"
#include "tests.h"
#include "train_setup.h"

// The gpt of gradcheck_config(ARCH_GPT, 2), as gradcheck's flags.
#define PLAIN_GPT "--arch gpt --layers 2 " NANOGPT_MODEL

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// The line of tensor "name" in the command's output, or NULL.
static const char *line_of(const char *out, const char *name, char *line, size_t cap) {
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *p = strstr(out, needle);
    if (!p) return NULL;
    p++;
    size_t n = strcspn(p, "\n");
    snprintf(line, cap, "%.*s", (int)n, p);
    return line;
}

// Loop test: _i = 0 checks card, _i = 1 a gpt of 2 blocks, _i = 2 a gpt2
// of 2 blocks (GELU's tanh form), _i = 3 the same with the exact GELU.
START_TEST(model_gradcheck_passes_every_tensor_for_several_seeds) {
    const Arch archs[] = {ARCH_CARD, ARCH_GPT, ARCH_GPT2, ARCH_GPT2};
    ModelConfig cfg = gradcheck_config(archs[_i], 2);
    if (_i == 3) cfg.mlp = MLP_GELU;
    TensorTable table;
    param_table(&table, &cfg);
    GradCheckResult *results = xcalloc((size_t)table.count, sizeof *results);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        int failed = model_gradcheck(&cfg, seed, results);
        for (int i = 0; i < table.count; i++)
            ck_assert_msg(results[i].failures == 0, "%s, seed %llu, %s: %zu failures, worst analytic %g numeric %g",
                          arch_name(cfg.arch), (unsigned long long)seed, table.specs[i].name, results[i].failures,
                          results[i].worst_analytic, results[i].worst_numeric);
        ck_assert_int_eq(failed, 0);
    }
    free(results);
    table_free(&table);
}
END_TEST

// The modern recipe's swaps on the gpt the command checks (2 blocks,
// GRADCHECK_GPT's weights and tolerances): each alone, then all together
// (a model has one MLP: all together takes SwiGLU, the later of the two).
static ModelConfig recipe_gradcheck_config(int i) {
    ModelConfig cfg = gradcheck_config(ARCH_GPT, 2);
    const int n_alone = 6;  // --norm rmsnorm, --mlp relu2, --untied-head, --pos rope, --qk-norm, --mlp swiglu
    if (i == 0 || i == n_alone) cfg.norm = NORM_RMSNORM;
    if (i == 1) cfg.mlp = MLP_RELU2;
    if (i == 2 || i == n_alone) cfg.untied_head = true;
    if (i == 3 || i == n_alone) cfg.pos = POS_ROPE;
    if (i == 4 || i == n_alone) cfg.qk_norm = true;
    if (i == 5 || i == n_alone) cfg.mlp = MLP_SWIGLU;
    return cfg;
}

// Loop test over recipe_gradcheck_config.
START_TEST(model_gradcheck_passes_every_tensor_of_a_gpt_with_the_recipe_s_swaps) {
    const ModelConfig cfg = recipe_gradcheck_config(_i);
    TensorTable table;
    param_table(&table, &cfg);
    GradCheckResult *results = xcalloc((size_t)table.count, sizeof *results);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        int failed = model_gradcheck(&cfg, seed, results);
        for (int i = 0; i < table.count; i++)
            ck_assert_msg(results[i].failures == 0, "recipe case %d, seed %llu, %s: %zu failures, worst analytic %g numeric %g",
                          _i, (unsigned long long)seed, table.specs[i].name, results[i].failures,
                          results[i].worst_analytic, results[i].worst_numeric);
        ck_assert_int_eq(failed, 0);
    }
    free(results);
    table_free(&table);
}
END_TEST

// The flags of train's model that the two tests below give gradcheck: none
// (train's default model), then a recipe swap or a ladder removal each,
// GPT-2's model and card. Model parts only: no sizes.
static const char *const MODEL_FLAGS[] = {"",
                                          "--norm layernorm",
                                          "--mlp swiglu --no-qk-norm",
                                          "--pos learned --tied-head",
                                          "--no-residual --no-layernorm",
                                          "--no-mlp --mlp gelu",
                                          "--arch gpt2",
                                          "--arch card"};

// split_args: "argv0" then "args" cut at spaces, into argv [max] (the
// words are copied into "buf" [cap]); returns argc.
static int split_args(const char *argv0, const char *args, char *buf, size_t cap, char **argv, int max) {
    snprintf(buf, cap, "%s %s", argv0, args);
    int argc = 0;
    char *save = NULL;
    for (char *word = strtok_r(buf, " ", &save); word && argc < max; word = strtok_r(NULL, " ", &save))
        argv[argc++] = word;
    return argc;
}

// train_model_small: the model `tinygpt train ARGS` would build, from
// train's own settings table and defaults, at gradcheck's small sizes
// (GRADCHECK_MODEL's, a gpt of GRADCHECK_LAYERS blocks): what `tinygpt
// gradcheck ARGS` must check.
static ModelConfig train_model_small(const char *args) {
    static TrainSettings s;
    static Flag flags[NUM_TRAIN_SETTINGS_MAX];
    Command cmd = {"train", "[FILE]", "Train.", "tinygpt train x.txt", NULL, 0};
    char buf[512], *argv[32];
    const int argc = split_args("train", args, buf, sizeof buf, argv, 32);
    Given given;
    memset(&s, 0, sizeof s);
    settings_command(&cmd, flags, &s);
    settings_parse(&cmd, argc, argv, &s, &given);
    settings_finish(&cmd, &s, &given, NULL);
    ModelConfig cfg = train_model_config(&s, GRADCHECK_MODEL.vocab_size);
    cfg.block_size = GRADCHECK_MODEL.block_size;
    cfg.n_embd = GRADCHECK_MODEL.n_embd;
    cfg.n_head = GRADCHECK_MODEL.n_head;
    cfg.dropout = GRADCHECK_MODEL.dropout;
    if (cfg.arch != ARCH_CARD) cfg.n_layer = GRADCHECK_LAYERS;
    return cfg;
}

// expect_same_model: every field of the two configurations is the same.
static void expect_same_model(const ModelConfig *got, const ModelConfig *want, const char *args) {
    const struct {
        const char *name;
        long got, want;
    } fields[] = {{"vocab_size", got->vocab_size, want->vocab_size}, {"block_size", got->block_size, want->block_size},
                  {"n_embd", got->n_embd, want->n_embd},             {"n_head", got->n_head, want->n_head},
                  {"arch", got->arch, want->arch},                   {"n_layer", got->n_layer, want->n_layer},
                  {"no_layernorm", got->no_layernorm, want->no_layernorm}, {"no_mlp", got->no_mlp, want->no_mlp},
                  {"no_residual", got->no_residual, want->no_residual}, {"norm", got->norm, want->norm},
                  {"mlp", got->mlp, want->mlp},                      {"untied_head", got->untied_head, want->untied_head},
                  {"pos", got->pos, want->pos},                      {"qk_norm", got->qk_norm, want->qk_norm}};
    for (int i = 0; i < COUNT(fields); i++)
        ck_assert_msg(fields[i].got == fields[i].want, "gradcheck %s: %s %ld, train's %ld", args, fields[i].name,
                      fields[i].got, fields[i].want);
    ck_assert_msg(got->dropout == want->dropout, "gradcheck %s: dropout %g, train's %g", args, (double)got->dropout,
                  (double)want->dropout);
}

// Loop test over MODEL_FLAGS: gradcheck's model is train's, flag for flag;
// with no flags (_i = 0) train's default model, not card.
START_TEST(gradcheck_checks_the_model_train_builds_from_the_same_flags) {
    char buf[512], *argv[32];
    const int argc = split_args("gradcheck", MODEL_FLAGS[_i], buf, sizeof buf, argv, 32);
    const GradCheckRequest req = gradcheck_request(argc, argv);
    const ModelConfig want = train_model_small(MODEL_FLAGS[_i]);
    expect_same_model(&req.config, &want, MODEL_FLAGS[_i]);
    if (_i == 0) ck_assert_int_eq(req.config.arch, ARCH_GPT);
}
END_TEST

// expect_a_passing_line_per_tensor: "out" has a PASS line, with the shape,
// for every tensor of the parameter table of "cfg", and the closing count.
static void expect_a_passing_line_per_tensor(const char *out, const ModelConfig *cfg) {
    TensorTable table;
    param_table(&table, cfg);
    for (int i = 0; i < table.count; i++) {
        const TensorSpec *spec = &table.specs[i];
        char line[512];
        ck_assert_msg(line_of(out, spec->name, line, sizeof line) != NULL, "no line for %s: %s", spec->name, out);
        ck_assert_msg(strstr(line, "PASS") != NULL, "%s", line);
        char shape[32];
        if (spec->ndim == 2) snprintf(shape, sizeof shape, "[%zu, %zu]", spec->shape[0], spec->shape[1]);
        else snprintf(shape, sizeof shape, "[%zu]", spec->shape[0]);
        ck_assert_msg(strstr(line, shape) != NULL, "no shape %s: %s", shape, line);
    }
    char all[64];
    snprintf(all, sizeof all, "all %d tensors pass", table.count);
    ck_assert_msg(strstr(out, all) != NULL, "no '%s': %s", all, out);
    table_free(&table);
}

START_TEST(gradcheck_command_prints_a_passing_line_per_tensor_and_exits_zero) {
    RunResult *r = run_tinygpt(dir, "gradcheck --arch card --seed 3");
    ck_assert_msg(r->status == 0, "gradcheck failed (%d): %s%s", r->status, r->out, r->err);
    expect_a_passing_line_per_tensor(r->out, &GRADCHECK_MODEL);
    ck_assert_ptr_nonnull(strstr(r->out, "all 9 tensors pass"));
}
END_TEST

START_TEST(gradcheck_command_checks_a_gpt_of_two_blocks_tensor_by_tensor) {
    RunResult *r = run_tinygpt(dir, "gradcheck " PLAIN_GPT);
    ck_assert_msg(r->status == 0, "gradcheck --arch gpt failed (%d): %s%s", r->status, r->out, r->err);
    const ModelConfig cfg = gradcheck_config(ARCH_GPT, 2);
    expect_a_passing_line_per_tensor(r->out, &cfg);
    // Both blocks, each with every part, and the final LayerNorm; no head of its own (it is tok_emb).
    const char *names[] = {"blocks.0.ln1.weight", "blocks.0.mlp.proj.weight", "blocks.1.attn.q.weight",
                           "blocks.1.ln2.weight", "blocks.1.mlp.fc.weight",   "ln_f.weight"};
    char line[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(line_of(r->out, names[i], line, sizeof line) != NULL, "no line for %s", names[i]);
    ck_assert_ptr_null(line_of(r->out, "head.weight", line, sizeof line));
    ck_assert_ptr_nonnull(strstr(r->out, "all 19 tensors pass"));
}
END_TEST

// gpt2: every bias of both blocks and ln_f's has its passing line, beside
// the gpt's weights.
START_TEST(gradcheck_command_checks_a_gpt2_s_biases_tensor_by_tensor) {
    RunResult *r = run_tinygpt(dir, "gradcheck --arch gpt2 --layers 2");
    ck_assert_msg(r->status == 0, "gradcheck --arch gpt2 failed (%d): %s%s", r->status, r->out, r->err);
    const ModelConfig cfg = gradcheck_config(ARCH_GPT2, 2);
    expect_a_passing_line_per_tensor(r->out, &cfg);
    const char *names[] = {"blocks.0.ln1.bias", "blocks.0.attn.q.bias", "blocks.0.attn.k.bias", "blocks.0.attn.v.bias",
                           "blocks.0.attn.proj.bias", "blocks.1.ln2.bias", "blocks.1.mlp.fc.bias",
                           "blocks.1.mlp.proj.bias", "ln_f.bias"};
    char line[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ck_assert_msg(line_of(r->out, names[i], line, sizeof line) != NULL, "no line for %s", names[i]);
    // 19 of the gpt, 8 biases a block and ln_f's
    ck_assert_ptr_nonnull(strstr(r->out, "all 36 tensors pass"));
    ck_assert_ptr_nonnull(strstr(r->out, "--arch gpt2 --layers 2 --mlp gelu_tanh "));
}
END_TEST

// Loop test over MODEL_FLAGS: the command checks, and passes on, every
// tensor of the model train builds from the same flags; with none, train's
// default model (a gpt of the modern recipe: its own head, no pos_emb).
START_TEST(gradcheck_command_passes_on_the_model_train_builds_from_the_same_flags) {
    char args[256];
    snprintf(args, sizeof args, "gradcheck %s", MODEL_FLAGS[_i]);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s failed (%d): %s%s", args, r->status, r->out, r->err);
    const ModelConfig cfg = train_model_small(MODEL_FLAGS[_i]);
    expect_a_passing_line_per_tensor(r->out, &cfg);
}
END_TEST

// expect_verdicts: gradcheck's output "out" (of the command "args", for
// the messages) has a line for each of "names", up to a NULL, and each says
// "verdict" (PASS or FAIL).
static void expect_verdicts(const char *args, const char *out, const char *const *names, const char *verdict) {
    char line[512];
    for (size_t i = 0; names[i]; i++) {
        ck_assert_msg(line_of(out, names[i], line, sizeof line) != NULL, "%s: no line for %s", args, names[i]);
        ck_assert_msg(strstr(line, verdict) != NULL, "%s: %s, not %s", args, line, verdict);
    }
}

// What the broken build's gradcheck must say, per architecture.
static const struct {
    const char *args;
    const char *fail[9], *pass[7];  // each up to a NULL
    const char *summary;
} BROKEN_SOFTMAX[] = {
    // card: zeroing softmax's "- weighted_sum" term corrupts the gradient of
    // the scores, so of q and k, and through them of the embeddings; v, the
    // projection and the head never see it.
    {"gradcheck --arch card",
     {"tok_emb.weight", "pos_emb.weight", "blocks.0.attn.q.weight", "blocks.0.attn.k.weight", NULL},
     {"blocks.0.attn.v.weight", "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias", "head.weight", "head.bias",
      NULL},
     "4 of 9 tensors FAIL"},
    // gpt: each block's softmax corrupts the gradient of its q and k, and of
    // everything before them: its ln1, the blocks before it and the
    // embeddings. Block 0's v, projection and MLP reach only block 1's
    // softmax, where the error they get may stay within the tolerance (with
    // this seed it does for v and the projection), so they are not checked.
    // After the last softmax's q and k, nothing sees it: block 1's v,
    // projection and MLP, and ln_f.
    {"gradcheck " PLAIN_GPT,
     {"tok_emb.weight", "pos_emb.weight", "blocks.0.ln1.weight", "blocks.0.attn.q.weight", "blocks.0.attn.k.weight",
      "blocks.1.ln1.weight", "blocks.1.attn.q.weight", "blocks.1.attn.k.weight", NULL},
     {"blocks.1.attn.v.weight", "blocks.1.attn.proj.weight", "blocks.1.ln2.weight", "blocks.1.mlp.fc.weight",
      "blocks.1.mlp.proj.weight", "ln_f.weight", NULL},
     "tensors FAIL"},
};

// Loop test: _i = 0 on card, _i = 1 on a gpt of 2 blocks.
START_TEST(gradcheck_command_fails_on_a_build_with_a_broken_softmax_backward) {
    const char *broken = getenv("TINYGPT_BROKEN_BIN");
    if (!broken) broken = "build/tinygpt-broken";
    const char *args = BROKEN_SOFTMAX[_i].args;
    RunResult *r = run_binary(broken, dir, args);
    ck_assert_msg(r->status == 1, "the broken build's %s exited %d (is %s built? `make test` builds it): %s%s", args,
                  r->status, broken, r->out, r->err);
    expect_verdicts(args, r->out, BROKEN_SOFTMAX[_i].fail, "FAIL");
    expect_verdicts(args, r->out, BROKEN_SOFTMAX[_i].pass, "PASS");
    ck_assert_msg(strstr(r->out, BROKEN_SOFTMAX[_i].summary) != NULL, "%s: no '%s': %s", args,
                  BROKEN_SOFTMAX[_i].summary, r->out);
}
END_TEST

START_TEST(gradcheck_command_refuses_bad_flags_in_one_line) {
    const char *cases[][2] = {{"gradcheck --seed minus-one", "--seed"},
                              {"gradcheck --arch transformer", "--arch"},
                              {"gradcheck --arch card --layers 2", "--layers"},  // card has one block
                              {"gradcheck --arch gpt2 --norm rmsnorm", "--norm"},  // gpt2 is GPT-2's
                              {"gradcheck --heads 3", "--heads"},                  // 3 does not divide C = 8
                              {"gradcheck --tokenizer char", "--tokenizer"},       // the text's, not the model's
                              {"gradcheck --arch gpt --layers 0", "--layers"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        expect_run_fails(dir, cases[i][0], 2, cases[i][1]);
    }
}
END_TEST

Suite *gradcheck_model_suite(void) {
    Suite *s = suite_create("gradcheck_model");
    TCase *tc = tcase_create("gradcheck_model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);  // runs the binary on a shared machine
    tcase_add_loop_test(tc, model_gradcheck_passes_every_tensor_for_several_seeds, 0, 4);
    tcase_add_loop_test(tc, model_gradcheck_passes_every_tensor_of_a_gpt_with_the_recipe_s_swaps, 0, 7);
    tcase_add_loop_test(tc, gradcheck_checks_the_model_train_builds_from_the_same_flags, 0, COUNT(MODEL_FLAGS));
    tcase_add_test(tc, gradcheck_command_prints_a_passing_line_per_tensor_and_exits_zero);
    tcase_add_test(tc, gradcheck_command_checks_a_gpt_of_two_blocks_tensor_by_tensor);
    tcase_add_test(tc, gradcheck_command_checks_a_gpt2_s_biases_tensor_by_tensor);
    tcase_add_loop_test(tc, gradcheck_command_passes_on_the_model_train_builds_from_the_same_flags, 0,
                        COUNT(MODEL_FLAGS));
    tcase_add_loop_test(tc, gradcheck_command_fails_on_a_build_with_a_broken_softmax_backward, 0, 2);
    tcase_add_test(tc, gradcheck_command_refuses_bad_flags_in_one_line);
    suite_add_tcase(s, tc);
    return s;
}
