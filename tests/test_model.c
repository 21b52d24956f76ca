// test_model.c: tests for src/model/model_tensors.c and model.c (the tables, the whole forward
// and backward pass, and SGD), for both architectures: card, the one-block
// attention model, and gpt, L blocks of LayerNorm, attention and MLP on a
// residual stream with the head tied to tok_emb.
//
// In order: the parameter, activation and activation-gradient tables are laid
// out as model.h says, and every view points at its table entry;
// model_check_config refuses bad sizes with a message naming the flag, and
// the architectures have their names; model_memory_bytes is what model_init
// allocates, and model_check_memory refuses what would not fit; the searches
// for a NaN, an infinity or a weight past the bound name the first tensor
// and element; each architecture's initialisation draws what model.h says;
// every parameter's gradient matches central finite differences of the
// whole model's loss, with and without dropout (and in gpts without some of
// their parts), and backward adds to the gradients; the first loss; dropout
// acts only in training; the loss's probs and gradient, written over the
// logits, are those of buffers of their own, and the head transposed in
// slices gives the whole head's logits; a forward pass smaller than
// the maximum (a prefix of every buffer) computes the same thing as a model
// built for exactly that size, and so does sampling's one-position-at-a-time forward pass;
// SGD learns a trivially predictable sequence; and training is bit-for-bit
// reproducible, for a seed and across thread counts (every sum runs in a
// fixed order).
//
// A test that holds for both architectures is one loop test over them
// (_i = 0 card, _i = 1 gpt) whose failures name the architecture; what only
// one has (gpt's blocks, ln_f and tied head, each one's init and first
// loss) has tests of its own.
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "crossentropy.h"
#include "fast.h"
#include "linear.h"
#include "gradcheck.h"
#include "helpers.h"
#include "model.h"
#include "rng.h"
#include "tests.h"

// The small models of the gradient tests: V=7, T=5, C=8, NH=2, batches of 2;
// card, and gpt with two blocks (so that a block reads another block's
// output and the stream's gradient passes through a whole block).
enum { SMALL_B = 2, SMALL_T = 5, SMALL_L = 2 };
static const ModelConfig SMALL = {.vocab_size = 7, .block_size = SMALL_T, .n_embd = 8, .n_head = 2, .dropout = 0.0f};
static const ModelConfig SMALL_GPT = {.vocab_size = 7, .block_size = SMALL_T, .n_embd = 8, .n_head = 2,
                                      .dropout = 0.0f, .arch = ARCH_GPT, .n_layer = SMALL_L};

static void random_tokens(int *tokens, int n, int V, Rng *rng) {
    for (int i = 0; i < n; i++) tokens[i] = (int)rng_below(rng, (uint64_t)V);
}

// table_index: the index in "t" of the tensor named "name" (which must exist).
static int table_index(const TensorTable *t, const char *name) {
    const TensorSpec *spec = table_find(t, name);
    ck_assert_msg(spec != NULL, "the table has no tensor named %s", name);
    return (int)(spec - t->specs);
}

// ---------------------------------------------------------------------------
// Tables

// What a table should hold, entry by entry: a name, and either a shape
// (ndim 1 or 2) or, with ndim 0, only a size (rows * cols floats).
enum { MAX_EXPECTED = 64 };
typedef struct {
    char name[48];
    int ndim;
    size_t rows, cols, size;
} ExpectedTensor;

typedef struct {
    ExpectedTensor tensors[MAX_EXPECTED];
    int count;
} ExpectedTable;

static void expect(ExpectedTable *x, int ndim, size_t rows, size_t cols, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void expect(ExpectedTable *x, int ndim, size_t rows, size_t cols, const char *fmt, ...) {
    ck_assert_int_lt(x->count, MAX_EXPECTED);
    ExpectedTensor *e = &x->tensors[x->count++];
    va_list args;
    va_start(args, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, args);
    va_end(args);
    e->ndim = ndim;
    e->rows = rows;
    e->cols = cols;
    e->size = ndim == 1 ? rows : rows * cols;
}

// assert_table_is: "t" lists exactly the tensors of "x", in that order, each
// right after the previous one, and its total is their sum. "what" (the
// architecture, and anything else that varies) begins every message.
static void assert_table_is(const char *what, const TensorTable *t, const ExpectedTable *x) {
    size_t offset = 0;
    for (int i = 0; i < t->count && i < x->count; i++) {
        const TensorSpec *s = &t->specs[i];
        const ExpectedTensor *e = &x->tensors[i];
        ck_assert_msg(strcmp(s->name, e->name) == 0, "%s: entry %d is %s, expected %s", what, i, s->name, e->name);
        if (e->ndim > 0) {
            ck_assert_msg(s->ndim == e->ndim, "%s: %s has %d dimensions, expected %d", what, s->name, s->ndim,
                          e->ndim);
            ck_assert_msg(s->shape[0] == e->rows, "%s: %s: shape[0] is %zu, expected %zu", what, s->name,
                          s->shape[0], e->rows);
            if (e->ndim == 2)
                ck_assert_msg(s->shape[1] == e->cols, "%s: %s: shape[1] is %zu, expected %zu", what, s->name,
                              s->shape[1], e->cols);
        }
        ck_assert_msg(s->size == e->size, "%s: %s has %zu floats, expected %zu", what, s->name, s->size, e->size);
        ck_assert_msg(s->offset == offset, "%s: %s starts at %zu, expected %zu (right after the previous one)", what,
                      s->name, s->offset, offset);
        offset += e->size;
    }
    ck_assert_msg(t->count == x->count, "%s: the table has %d entries, expected %d", what, t->count, x->count);
    ck_assert_msg(t->total == offset, "%s: the table's total is %zu floats, its entries add up to %zu", what, t->total,
                  offset);
}

START_TEST(param_table_lists_every_tensor_contiguously_in_model_h_order) {
    const size_t V = (size_t)SMALL.vocab_size, T = (size_t)SMALL.block_size, C = (size_t)SMALL.n_embd;
    ExpectedTable x = {0};
    expect(&x, 2, V, C, "tok_emb.weight");
    expect(&x, 2, T, C, "pos_emb.weight");
    expect(&x, 2, C, C, "blocks.0.attn.q.weight");
    expect(&x, 2, C, C, "blocks.0.attn.k.weight");
    expect(&x, 2, C, C, "blocks.0.attn.v.weight");
    expect(&x, 2, C, C, "blocks.0.attn.proj.weight");
    expect(&x, 1, C, 0, "blocks.0.attn.proj.bias");
    expect(&x, 2, V, C, "head.weight");
    expect(&x, 1, V, 0, "head.bias");
    TensorTable t;
    param_table(&t, &SMALL);
    assert_table_is("card", &t, &x);
    // tok_emb, pos_emb, q/k/v/proj weights, proj bias, head weight, head bias
    ck_assert_uint_eq(t.total, V * C + T * C + 4 * C * C + C + V * C + V);
    table_free(&t);

    // A card config that says n_layer = 1 (what model_init writes back) is the same model.
    ModelConfig one_layer = SMALL;
    one_layer.n_layer = 1;
    param_table(&t, &one_layer);
    assert_table_is("card with n_layer 1", &t, &x);
    table_free(&t);
}
END_TEST

START_TEST(gpt_param_table_lists_embeddings_then_each_block_then_ln_f_and_no_head) {
    const size_t V = (size_t)SMALL_GPT.vocab_size, T = (size_t)SMALL_GPT.block_size, C = (size_t)SMALL_GPT.n_embd;
    const size_t L = SMALL_L;
    ExpectedTable x = {0};
    expect(&x, 2, V, C, "tok_emb.weight");
    expect(&x, 2, T, C, "pos_emb.weight");
    for (size_t l = 0; l < L; l++) {
        expect(&x, 1, C, 0, "blocks.%zu.ln1.weight", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.q.weight", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.k.weight", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.v.weight", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.proj.weight", l);
        expect(&x, 1, C, 0, "blocks.%zu.ln2.weight", l);
        expect(&x, 2, 4 * C, C, "blocks.%zu.mlp.fc.weight", l);
        expect(&x, 2, C, 4 * C, "blocks.%zu.mlp.proj.weight", l);
    }
    expect(&x, 1, C, 0, "ln_f.weight");
    TensorTable t;
    param_table(&t, &SMALL_GPT);
    assert_table_is("gpt", &t, &x);
    // The head is tied to tok_emb: no tensor of its own.
    ck_assert_ptr_null(table_find(&t, "head.weight"));
    ck_assert_ptr_null(table_find(&t, "head.bias"));
    // tok_emb, pos_emb; per block ln1, q/k/v/proj, ln2, fc, mlp proj; ln_f
    ck_assert_uint_eq(t.total, V * C + T * C + L * (C + 4 * C * C + C + 8 * C * C) + C);
    table_free(&t);
}
END_TEST

// expected_acts: the activations of "cfg" for batches of B rows, in forward
// order (model.h, ActTensors and BlockActs).
static void expected_acts(ExpectedTable *x, const ModelConfig *cfg, size_t B) {
    const bool gpt = cfg->arch == ARCH_GPT;
    const size_t V = (size_t)cfg->vocab_size, T = (size_t)cfg->block_size, C = (size_t)cfg->n_embd;
    const size_t NH = (size_t)cfg->n_head, HS = C / NH, BT = B * T;
    expect(x, 0, BT, C, "encoded");
    for (int l = 0; l < (gpt ? cfg->n_layer : 1); l++) {
        if (gpt) {
            expect(x, 0, BT, C, "blocks.%d.ln1_out", l);
            expect(x, 0, BT, 1, "blocks.%d.ln1_mean", l);
            expect(x, 0, BT, 1, "blocks.%d.ln1_rstd", l);
        }
        expect(x, 0, BT, 3 * C, "blocks.%d.qkv", l);
        expect(x, 0, B * NH, T * T, "blocks.%d.attn_weights", l);
        if (cfg->dropout > 0.0f) expect(x, 0, B * NH, T * T, "blocks.%d.dropped_weights", l);
        expect(x, 0, B * NH, HS * T, "blocks.%d.keys_t", l);
        expect(x, 0, BT, C, "blocks.%d.attn_out", l);
        expect(x, 0, BT, C, "blocks.%d.res_attn", l);
        if (gpt) {
            expect(x, 0, BT, C, "blocks.%d.ln2_out", l);
            expect(x, 0, BT, 1, "blocks.%d.ln2_mean", l);
            expect(x, 0, BT, 1, "blocks.%d.ln2_rstd", l);
            expect(x, 0, BT, 4 * C, "blocks.%d.fc_out", l);
            expect(x, 0, BT, C, "blocks.%d.res_mlp", l);
        }
    }
    if (gpt) {
        expect(x, 0, BT, C, "branch_out");
        expect(x, 0, BT, 4 * C, "gelu_out");
        expect(x, 0, BT, C, "lnf_out");
        expect(x, 0, BT, 1, "lnf_mean");
        expect(x, 0, BT, 1, "lnf_rstd");
    }
    expect(x, 0, BT, V, "logits");  // probs are written over the logits: no table entry (model.h)
    expect(x, 0, BT, 1, "losses");
}

// Every block's activations, and the dropout masks' scales only when there
// is dropout. Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(act_table_sizes_every_activation_for_the_largest_batch) {
    enum { B = 3 };
    for (int with_dropout = 0; with_dropout <= 1; with_dropout++) {
        ModelConfig cfg = _i == 0 ? SMALL : SMALL_GPT;
        cfg.dropout = with_dropout ? 0.2f : 0.0f;
        char what[64];
        snprintf(what, sizeof what, "%s, dropout %g", arch_name(cfg.arch), (double)cfg.dropout);
        ExpectedTable x = {0};
        expected_acts(&x, &cfg, B);
        TensorTable t;
        act_table(&t, &cfg, B);
        assert_table_is(what, &t, &x);
        ck_assert_msg(with_dropout == (table_find(&t, "blocks.0.dropped_weights") != NULL),
                      "%s: blocks.0.dropped_weights is %s", what, with_dropout ? "missing" : "there");
        table_free(&t);
    }
}
END_TEST

// The activation gradients are one block's worth (model.h): the same table
// for any number of blocks; dlogits is not in it (written over the probs,
// in the logits' memory). Nothing that has no gradient (probs, losses,
// what attention saves for backward) gets one.
START_TEST(grad_act_table_holds_one_block_s_gradients_whatever_the_depth) {
    enum { B = 3 };
    const size_t T = (size_t)SMALL.block_size, C = (size_t)SMALL.n_embd;
    const size_t NH = (size_t)SMALL.n_head, BT = B * T;
    ExpectedTable card = {0};
    expect(&card, 0, BT, C, "dresidual");
    expect(&card, 0, BT, C, "dattn_out");
    expect(&card, 0, BT, 3 * C, "dqkv");
    expect(&card, 0, B * NH, T * T, "dattn_weights");
    expect(&card, 0, B * NH, C / NH * T, "values_t");
    TensorTable t;
    grad_act_table(&t, &SMALL, B);
    assert_table_is("card", &t, &card);
    table_free(&t);

    ExpectedTable gpt = {0};
    expect(&gpt, 0, BT, C, "dresidual");
    expect(&gpt, 0, BT, C, "dln_out");
    expect(&gpt, 0, BT, C, "dbranch");
    expect(&gpt, 0, BT, C, "dattn_out");
    expect(&gpt, 0, BT, 3 * C, "dqkv");
    expect(&gpt, 0, B * NH, T * T, "dattn_weights");
    expect(&gpt, 0, B * NH, C / NH * T, "values_t");
    expect(&gpt, 0, BT, 4 * C, "dhidden");
    for (int L = 1; L <= 5; L += 2) {
        ModelConfig cfg = SMALL_GPT;
        cfg.n_layer = L;
        cfg.dropout = 0.1f;
        char what[32];
        snprintf(what, sizeof what, "gpt of %d blocks", L);
        grad_act_table(&t, &cfg, B);
        assert_table_is(what, &t, &gpt);
        table_free(&t);
    }
}
END_TEST

START_TEST(act_table_does_not_overflow_for_the_longest_context_check_config_allows) {
    // attn_weights holds B*NH*T*T floats: 2^35 here, far past INT_MAX. For
    // sizes model_check_config accepts, the count must come out right (in
    // size_t), or a model would be allocated too small (instead of failing
    // with "out of memory") and the forward pass would write past its end.
    // Only the tables are computed; nothing is allocated.
    enum { B = 4 };
    const ModelConfig configs[] = {
        {.vocab_size = 65, .block_size = 1 << 16, .n_embd = 8, .n_head = 2, .dropout = 0.1f},
        {.vocab_size = 65, .block_size = 1 << 16, .n_embd = 8, .n_head = 2, .dropout = 0.1f, .arch = ARCH_GPT,
         .n_layer = 2},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const ModelConfig *cfg = &configs[i];
        Error err = {{0}};
        if (!model_check_config(cfg, &err)) continue;  // refusing such a context would be a fine fix too
        const size_t T = (size_t)cfg->block_size, expected = (size_t)B * cfg->n_head * T * T;
        TensorTable acts, grad_acts;
        act_table(&acts, cfg, B);
        grad_act_table(&grad_acts, cfg, B);
        const char *names[] = {"blocks.0.attn_weights", "blocks.0.dropped_weights"};
        for (int n = 0; n < 2; n++) {
            const TensorSpec *spec = &acts.specs[table_index(&acts, names[n])];
            ck_assert_msg(spec->size == expected, "%s: %s has %zu floats for T=%zu, expected %zu",
                          arch_name(cfg->arch), spec->name, spec->size, T, expected);
        }
        ck_assert_uint_eq(grad_acts.specs[table_index(&grad_acts, "dattn_weights")].size, expected);
        table_free(&grad_acts);
        table_free(&acts);
    }
}
END_TEST

// assert_view: "view" points at the entry "name" of "t" inside "base", or is
// NULL when the table has no such entry.
static void assert_view(const float *view, const float *base, const TensorTable *t, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void assert_view(const float *view, const float *base, const TensorTable *t, const char *fmt, ...) {
    char name[64];
    va_list args;
    va_start(args, fmt);
    vsnprintf(name, sizeof name, fmt, args);
    va_end(args);
    const TensorSpec *spec = table_find(t, name);
    if (spec)
        ck_assert_msg(view == base + spec->offset, "the view of %s is %p, its table entry at %p (offset %zu)", name,
                      (const void *)view, (const void *)(base + spec->offset), spec->offset);
    else
        ck_assert_msg(view == NULL, "%s is not in the table, but its view is %p", name, (const void *)view);
}

// assert_model_views: every view of "m" (parameters, gradients, activations,
// activation gradients) at its table entry, q/k/v one [3C,C] matrix, and
// the head tied to tok_emb exactly when the architecture says so.
static void assert_model_views(const Model *m) {
    const TensorTable *pt = &m->param_table, *at = &m->act_table, *gt = &m->grad_act_table;
    const size_t CC = (size_t)m->config.n_embd * (size_t)m->config.n_embd;
    const bool tied = m->config.arch == ARCH_GPT;
    ck_assert_int_eq(m->n_layer, model_layers(&m->config));
    for (int g = 0; g <= 1; g++) {  // parameters, then gradients: the same layout
        const float *base = g ? m->grads_memory : m->params_memory;
        const ParamTensors *p = g ? &m->grads : &m->params;
        if (!base) {  // built without gradients: no views into them either
            ck_assert_ptr_null(p->tok_emb);
            ck_assert_ptr_null(p->head_weight);
            continue;
        }
        assert_view(p->tok_emb, base, pt, "tok_emb.weight");
        assert_view(p->pos_emb, base, pt, "pos_emb.weight");
        for (int l = 0; l < m->n_layer; l++) {
            const BlockParams *b = &p->blocks[l];
            assert_view(b->ln1_weight, base, pt, "blocks.%d.ln1.weight", l);
            assert_view(b->qkv_weight, base, pt, "blocks.%d.attn.q.weight", l);
            assert_view(b->proj_weight, base, pt, "blocks.%d.attn.proj.weight", l);
            assert_view(b->proj_bias, base, pt, "blocks.%d.attn.proj.bias", l);
            assert_view(b->ln2_weight, base, pt, "blocks.%d.ln2.weight", l);
            assert_view(b->fc_weight, base, pt, "blocks.%d.mlp.fc.weight", l);
            assert_view(b->mlp_proj_weight, base, pt, "blocks.%d.mlp.proj.weight", l);
        }
        assert_view(p->lnf_weight, base, pt, "ln_f.weight");
        assert_view(p->head_bias, base, pt, "head.bias");
        if (tied) {
            ck_assert_ptr_eq(p->head_weight, p->tok_emb);  // the head's gradient adds to tok_emb's
        } else {
            assert_view(p->head_weight, base, pt, "head.weight");
            ck_assert_ptr_nonnull(p->head_weight);
            ck_assert_ptr_ne(p->head_weight, p->tok_emb);
        }
    }
    for (int l = 0; l < m->n_layer; l++) {
        // q, k, v are one [3C,C] matrix only if they are adjacent.
        char q_name[48], k_name[48], v_name[48];
        snprintf(q_name, sizeof q_name, "blocks.%d.attn.q.weight", l);
        snprintf(k_name, sizeof k_name, "blocks.%d.attn.k.weight", l);
        snprintf(v_name, sizeof v_name, "blocks.%d.attn.v.weight", l);
        const size_t q_at = pt->specs[table_index(pt, q_name)].offset;
        ck_assert_uint_eq(pt->specs[table_index(pt, k_name)].offset, q_at + CC);
        ck_assert_uint_eq(pt->specs[table_index(pt, v_name)].offset, q_at + 2 * CC);
    }

    const float *base = m->acts_memory;
    const ActTensors *a = &m->acts;
    assert_view(a->encoded, base, at, "encoded");
    for (int l = 0; l < m->n_layer; l++) {
        const BlockActs *b = &a->blocks[l];
        assert_view(b->ln1_out, base, at, "blocks.%d.ln1_out", l);
        assert_view(b->ln1_mean, base, at, "blocks.%d.ln1_mean", l);
        assert_view(b->ln1_rstd, base, at, "blocks.%d.ln1_rstd", l);
        assert_view(b->qkv, base, at, "blocks.%d.qkv", l);
        assert_view(b->attn_weights, base, at, "blocks.%d.attn_weights", l);
        assert_view(b->dropped_weights, base, at, "blocks.%d.dropped_weights", l);
        assert_view(b->keys_t, base, at, "blocks.%d.keys_t", l);
        assert_view(b->attn_out, base, at, "blocks.%d.attn_out", l);
        assert_view(b->res_attn, base, at, "blocks.%d.res_attn", l);
        assert_view(b->ln2_out, base, at, "blocks.%d.ln2_out", l);
        assert_view(b->ln2_mean, base, at, "blocks.%d.ln2_mean", l);
        assert_view(b->ln2_rstd, base, at, "blocks.%d.ln2_rstd", l);
        assert_view(b->fc_out, base, at, "blocks.%d.fc_out", l);
        assert_view(b->res_mlp, base, at, "blocks.%d.res_mlp", l);
    }
    assert_view(a->branch_out, base, at, "branch_out");
    assert_view(a->act_out, base, at, "gelu_out");
    assert_view(a->lnf_out, base, at, "lnf_out");
    assert_view(a->lnf_mean, base, at, "lnf_mean");
    assert_view(a->lnf_rstd, base, at, "lnf_rstd");
    assert_view(a->logits, base, at, "logits");
    ck_assert_ptr_eq(a->probs, a->logits);  // the loss writes probs over the logits (model.h)
    assert_view(a->losses, base, at, "losses");

    if (!m->grad_acts_memory) return;
    base = m->grad_acts_memory;
    const GradActs *d = &m->grad_acts;
    assert_view(d->dresidual, base, gt, "dresidual");
    ck_assert_ptr_eq(d->dlogits, a->logits);  // and the backward dlogits over the probs
    assert_view(d->dln_out, base, gt, "dln_out");
    assert_view(d->dbranch, base, gt, "dbranch");
    assert_view(d->dattn_out, base, gt, "dattn_out");
    assert_view(d->dqkv, base, gt, "dqkv");
    assert_view(d->dattn_weights, base, gt, "dattn_weights");
    assert_view(d->values_t, base, gt, "values_t");
    assert_view(d->dhidden, base, gt, "dhidden");
}

// The model's tables are the ones param_table, act_table and grad_act_table
// build for its config.
static void assert_model_tables(const Model *m, const ModelConfig *cfg, int max_batch) {
    TensorTable t;
    param_table(&t, cfg);
    ck_assert_int_eq(m->param_table.count, t.count);
    ck_assert_uint_eq(m->param_table.total, t.total);
    table_free(&t);
    act_table(&t, cfg, max_batch);
    ck_assert_int_eq(m->act_table.count, t.count);
    ck_assert_uint_eq(m->act_table.total, t.total);
    table_free(&t);
    if (!m->grads_memory) return;
    grad_act_table(&t, cfg, max_batch);
    ck_assert_int_eq(m->grad_act_table.count, t.count);
    ck_assert_uint_eq(m->grad_act_table.total, t.total);
    table_free(&t);
}

START_TEST(model_init_points_each_view_at_its_table_entry) {
    ModelConfig cfg = SMALL;
    cfg.dropout = 0.1f;  // so that dropped_weights is there too
    Model m;
    model_init(&m, &cfg, SMALL_B, true);
    assert_model_tables(&m, &cfg, SMALL_B);
    assert_model_views(&m);
    // card has its projection bias and its own head, and no LayerNorm or MLP.
    ck_assert_ptr_nonnull(m.params.blocks[0].proj_bias);
    ck_assert_ptr_nonnull(m.params.head_bias);
    ck_assert_ptr_null(m.params.blocks[0].ln1_weight);
    ck_assert_ptr_null(m.params.blocks[0].fc_weight);
    ck_assert_ptr_null(m.params.lnf_weight);
    ck_assert_ptr_nonnull(m.acts.blocks[0].dropped_weights);
    model_free(&m);

    model_init(&m, &SMALL, SMALL_B, false);  // inference only: no gradient buffers
    ck_assert_ptr_null(m.grads_memory);
    ck_assert_ptr_null(m.grad_acts_memory);
    ck_assert_ptr_null(m.acts.blocks[0].dropped_weights);  // no dropout: no masks
    assert_model_views(&m);
    model_free(&m);
}
END_TEST

START_TEST(gpt_model_init_points_each_block_s_views_at_its_table_entries_and_ties_the_head_to_tok_emb) {
    ModelConfig cfg = SMALL_GPT;
    cfg.n_layer = 3;
    cfg.dropout = 0.1f;
    Model m;
    model_init(&m, &cfg, SMALL_B, true);
    ck_assert_int_eq(m.n_layer, 3);
    assert_model_tables(&m, &cfg, SMALL_B);
    assert_model_views(&m);
    ck_assert_ptr_eq(m.params.head_weight, m.params.tok_emb);
    ck_assert_ptr_eq(m.grads.head_weight, m.grads.tok_emb);
    ck_assert_ptr_null(m.params.head_bias);
    ck_assert_ptr_null(m.grads.head_bias);
    for (int l = 0; l < 3; l++) {
        ck_assert_ptr_nonnull(m.params.blocks[l].ln1_weight);
        ck_assert_ptr_nonnull(m.params.blocks[l].fc_weight);
        ck_assert_ptr_nonnull(m.params.blocks[l].mlp_proj_weight);
        ck_assert_ptr_null(m.params.blocks[l].proj_bias);
        ck_assert_ptr_nonnull(m.acts.blocks[l].res_mlp);
    }
    ck_assert_ptr_nonnull(m.params.lnf_weight);
    model_free(&m);

    model_init(&m, &cfg, SMALL_B, false);
    ck_assert_ptr_null(m.grads_memory);
    ck_assert_ptr_null(m.grad_acts_memory);
    assert_model_views(&m);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// model_check_config

START_TEST(check_config_accepts_a_valid_config) {
    Error err = {{0}};
    ck_assert_msg(model_check_config(&SMALL, &err), "%s", err.msg);
    ModelConfig with_dropout = SMALL;
    with_dropout.dropout = 0.5f;
    ck_assert_msg(model_check_config(&with_dropout, &err), "%s", err.msg);
    ModelConfig card_one_layer = SMALL;  // card's one block, said explicitly
    card_one_layer.n_layer = 1;
    ck_assert_msg(model_check_config(&card_one_layer, &err), "%s", err.msg);
    ck_assert_msg(model_check_config(&SMALL_GPT, &err), "%s", err.msg);
    ModelConfig gpt = SMALL_GPT;
    gpt.n_layer = 1;
    gpt.dropout = 0.5f;
    ck_assert_msg(model_check_config(&gpt, &err), "%s", err.msg);
}
END_TEST

// Loop test: _i = 0 on card, _i = 1 on gpt.
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
    const ModelConfig base = _i == 0 ? SMALL : SMALL_GPT;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ModelConfig cfg = base;
        switch (cases[i].field) {
        case FIELD_VOCAB: cfg.vocab_size = (int)cases[i].value; break;
        case FIELD_BLOCK: cfg.block_size = (int)cases[i].value; break;
        case FIELD_EMBD: cfg.n_embd = (int)cases[i].value; break;
        case FIELD_HEAD: cfg.n_head = (int)cases[i].value; break;
        case FIELD_DROPOUT: cfg.dropout = (float)cases[i].value; break;
        }
        Error err = {{0}};
        ck_assert_msg(!model_check_config(&cfg, &err), "%s, case %zu (%s = %g) was accepted", arch_name(cfg.arch), i,
                      cases[i].must_mention, cases[i].value);
        ck_assert_msg(strstr(err.msg, cases[i].must_mention) != NULL,
                      "%s, case %zu: message \"%s\" does not mention %s", arch_name(cfg.arch), i, err.msg,
                      cases[i].must_mention);
    }
}
END_TEST

START_TEST(check_config_refuses_gpt_without_layers_and_card_with_more_than_one_naming_layers) {
    const struct {
        Arch arch;
        int n_layer;
    } cases[] = {
        {ARCH_GPT, 0}, {ARCH_GPT, -1}, {ARCH_GPT, INT_MAX},  // gpt needs at least one block, and not absurdly many
        {ARCH_CARD, 2}, {ARCH_CARD, 12},                     // card has exactly one
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ModelConfig cfg = cases[i].arch == ARCH_GPT ? SMALL_GPT : SMALL;
        cfg.n_layer = cases[i].n_layer;
        Error err = {{0}};
        ck_assert_msg(!model_check_config(&cfg, &err), "%s with n_layer %d was accepted", arch_name(cfg.arch),
                      cfg.n_layer);
        ck_assert_msg(strstr(err.msg, "--layers") != NULL,
                      "%s with n_layer %d: message \"%s\" does not mention --layers", arch_name(cfg.arch), cfg.n_layer,
                      err.msg);
        ck_assert_msg(!strchr(err.msg, '\n'), "message is not one line: %s", err.msg);
    }
    ModelConfig unknown = SMALL;
    unknown.arch = (Arch)7;
    ck_assert(!model_check_config(&unknown, NULL));
}
END_TEST

START_TEST(arch_names_are_card_gpt_and_gpt2) {
    Arch arch = (Arch)5;
    ck_assert(arch_from_name("gpt2", &arch));
    ck_assert_int_eq(arch, ARCH_GPT2);
    ck_assert_str_eq(arch_name(ARCH_GPT2), "gpt2");
    ck_assert(arch_from_name("gpt", &arch));
    ck_assert_int_eq(arch, ARCH_GPT);
    ck_assert(arch_from_name("card", &arch));
    ck_assert_int_eq(arch, ARCH_CARD);
    ck_assert(!arch_from_name("GPT", &arch));
    ck_assert(!arch_from_name("", &arch));
    ck_assert_str_eq(arch_name(ARCH_GPT), "gpt");
    ck_assert_str_eq(arch_name(ARCH_CARD), "card");
    ck_assert_int_eq(model_layers(&SMALL), 1);
    ck_assert_int_eq(model_layers(&SMALL_GPT), SMALL_L);
}
END_TEST

START_TEST(memory_bytes_is_exactly_what_model_init_allocates) {
    const ModelConfig configs[] = {
        SMALL,
        {.vocab_size = 65, .block_size = 16, .n_embd = 12, .n_head = 3, .dropout = 0.1f},
        {.vocab_size = 3, .block_size = 4, .n_embd = 4, .n_head = 4, .dropout = 0.0f},
        SMALL_GPT,
        {.vocab_size = 65, .block_size = 16, .n_embd = 12, .n_head = 3, .dropout = 0.1f, .arch = ARCH_GPT,
         .n_layer = 3},
        {.vocab_size = 3, .block_size = 4, .n_embd = 4, .n_head = 4, .dropout = 0.0f, .arch = ARCH_GPT,
         .n_layer = 1},
        {.vocab_size = 200, .block_size = 4, .n_embd = 8, .n_head = 2, .dropout = 0.0f, .arch = ARCH_GPT,
         .n_layer = 2},
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        const ModelConfig *cfg = &configs[i];
        for (int with_grads = 0; with_grads <= 1; with_grads++) {
            Model m;
            model_init(&m, cfg, 3, with_grads);
            size_t floats = m.param_table.total + m.act_table.total;
            if (with_grads) floats += m.param_table.total + m.grad_act_table.total;
            size_t ints = 2 * (size_t)m.max_batch * (size_t)cfg->block_size;
            ck_assert_msg(model_memory_bytes(cfg, 3, with_grads) == floats * sizeof(float) + ints * sizeof(int),
                          "config %zu (%s), with_grads %d: model_memory_bytes says %zu, model_init allocates %zu", i,
                          arch_name(cfg->arch), with_grads, model_memory_bytes(cfg, 3, with_grads),
                          floats * sizeof(float) + ints * sizeof(int));
            model_free(&m);
        }
    }
}
END_TEST

START_TEST(memory_bytes_saturates_instead_of_overflowing) {
    // The largest sizes the flags allow: B*NH*T*T = 2^20 * 2^16 * 2^32 = 2^68.
    const ModelConfig huge[] = {
        {.vocab_size = 1 << 20, .block_size = 1 << 16, .n_embd = 1 << 16, .n_head = 1 << 16},
        {.vocab_size = 1 << 20, .block_size = 1 << 16, .n_embd = 1 << 16, .n_head = 1 << 16, .arch = ARCH_GPT,
         .n_layer = 1024},
    };
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        ck_assert(model_check_config(&huge[i], NULL));
        ck_assert_uint_eq(model_memory_bytes(&huge[i], 1 << 20, true), SIZE_MAX);
        Error err = {{0}};
        ck_assert(!model_check_memory(&huge[i], 1 << 20, true, &err));
        ck_assert_msg(strstr(err.msg, "more than 18 EB"), "message was: %s", err.msg);
    }
}
END_TEST

START_TEST(check_memory_refuses_a_model_larger_than_memory_naming_its_sizes) {
    ck_assert_uint_gt(memory_limit_bytes(), 0);
    Error err = {{0}};
    ck_assert_msg(model_check_memory(&SMALL, 32, true, &err), "%s", err.msg);
    ck_assert_msg(model_check_memory(&SMALL_GPT, 32, true, &err), "%s", err.msg);
    // 16 x 65536 x 65536 attention weights alone are 256 GiB of floats.
    const ModelConfig big = {.vocab_size = 65, .block_size = 1 << 16, .n_embd = 64, .n_head = 4};
    ck_assert(!model_check_memory(&big, 4, false, &err));
    // The model names no flag: which flags make it smaller is each command's
    // (train: --batch, --context, --embd, --layers; eval: --batch).
    ck_assert_msg(strstr(err.msg, "L=1 blocks, C=64 channels, NH=4 heads, T=65536 positions and V=65 tokens, for 4 windows") &&
                      strstr(err.msg, "GB") && !strstr(err.msg, "--") && !strchr(err.msg, '\n'),
                  "message was: %s", err.msg);
    // Too deep: 1024 blocks of 12 x 4096^2 weights are 824 GB of parameters
    // alone, at a context and batch that are small.
    const ModelConfig deep = {.vocab_size = 65, .block_size = 64, .n_embd = 4096, .n_head = 4, .arch = ARCH_GPT,
                              .n_layer = 1024};
    ck_assert(model_check_config(&deep, NULL));
    ck_assert(!model_check_memory(&deep, 1, false, &err));
    ck_assert_msg(strstr(err.msg, "L=1024 blocks, C=4096 channels") && !strchr(err.msg, '\n'),
                  "message was: %s", err.msg);
}
END_TEST

START_TEST(find_nonfinite_names_the_first_tensor_and_element_holding_nan_or_infinity) {
    Model m;
    model_init(&m, &SMALL, SMALL_B, true);
    size_t element = 99;
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element), -1);
    ck_assert_int_eq(model_find_nonfinite(&m, m.grads_memory, &element), -1);
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), -1);
    m.params.head_bias[3] = INFINITY;
    m.params.blocks[0].proj_weight[5] = NAN;
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element),
                     table_index(&m.param_table, "blocks.0.attn.proj.weight"));
    ck_assert_uint_eq(element, 5);
    m.grads.head_weight[7] = -INFINITY;
    ck_assert_int_eq(model_find_nonfinite(&m, m.grads_memory, &element), table_index(&m.param_table, "head.weight"));
    ck_assert_uint_eq(element, 7);
    m.acts.logits[2] = NAN;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), table_index(&m.act_table, "logits"));
    ck_assert_uint_eq(element, 2);
    model_free(&m);

    // gpt: the first tensor in table order, across blocks; the second
    // block's tensors come after every one of the first's.
    model_init(&m, &SMALL_GPT, SMALL_B, true);
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element), -1);
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), -1);
    m.params.lnf_weight[1] = NAN;
    m.params.blocks[1].ln1_weight[6] = INFINITY;
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element),
                     table_index(&m.param_table, "blocks.1.ln1.weight"));
    ck_assert_uint_eq(element, 6);
    m.params.blocks[0].mlp_proj_weight[17] = NAN;
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element),
                     table_index(&m.param_table, "blocks.0.mlp.proj.weight"));
    ck_assert_uint_eq(element, 17);
    m.grads.blocks[1].qkv_weight[SMALL_GPT.n_embd * SMALL_GPT.n_embd + 1] = NAN;  // element 1 of k
    ck_assert_int_eq(model_find_nonfinite(&m, m.grads_memory, &element),
                     table_index(&m.param_table, "blocks.1.attn.k.weight"));
    ck_assert_uint_eq(element, 1);
    m.acts.blocks[1].fc_out[4] = INFINITY;
    m.acts.lnf_out[0] = NAN;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), table_index(&m.act_table, "blocks.1.fc_out"));
    ck_assert_uint_eq(element, 4);
    model_free(&m);

    // The search tests blocks of 1024 first: a hit in the last number, and
    // one on a block boundary, of a tensor several blocks long.
    const ModelConfig wide = {.vocab_size = 65, .block_size = 16, .n_embd = 16, .n_head = 2};
    model_init(&m, &wide, 4, false);
    const int probs = table_index(&m.act_table, "logits");  // the buffer of the probs too
    const size_t probs_size = m.act_table.specs[probs].size;
    ck_assert_uint_gt(probs_size, 2048);
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), -1);
    m.acts.probs[probs_size - 1] = -INFINITY;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), probs);
    ck_assert_uint_eq(element, probs_size - 1);
    m.acts.probs[1024] = NAN;
    ck_assert_int_eq(model_find_nonfinite_act(&m, &element), probs);
    ck_assert_uint_eq(element, 1024);
    model_free(&m);
}
END_TEST

START_TEST(find_weight_beyond_also_finds_finite_weights_past_the_bound) {
    Model m;
    model_init(&m, &SMALL_GPT, SMALL_B, false);
    size_t element = 99;
    // The bound itself is allowed, on both sides; the float past it is not.
    m.params.lnf_weight[1] = MODEL_MAX_WEIGHT;
    m.params.lnf_weight[2] = -MODEL_MAX_WEIGHT;
    ck_assert_int_eq(model_find_weight_beyond(&m, &element), -1);
    m.params.blocks[1].ln1_weight[6] = -nextafterf(MODEL_MAX_WEIGHT, INFINITY);
    ck_assert_int_eq(model_find_weight_beyond(&m, &element), table_index(&m.param_table, "blocks.1.ln1.weight"));
    ck_assert_uint_eq(element, 6);
    // ...which is finite, so model_find_nonfinite lets it be.
    ck_assert_int_eq(model_find_nonfinite(&m, m.params_memory, &element), -1);
    // A NaN or an infinity is beyond every bound.
    m.params.blocks[0].mlp_proj_weight[17] = NAN;
    ck_assert_int_eq(model_find_weight_beyond(&m, &element), table_index(&m.param_table, "blocks.0.mlp.proj.weight"));
    ck_assert_uint_eq(element, 17);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// Initialisation

// sample_moments: the mean and root mean square of x[0..n).
static void sample_moments(const float *x, size_t n, double *mean, double *rms) {
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        sum_sq += (double)x[i] * x[i];
    }
    *mean = sum / (double)n;
    *rms = sqrt(sum_sq / (double)n);
}

// The sample tolerance: the RMS of n draws of N(0, s^2) estimates s with a
// relative standard error of 1/sqrt(2n) (the variance of x^2 is 2 s^4), and
// their mean is 0 with a standard error of s/sqrt(n). Five standard errors
// (a false failure about once in 3 million) still tell 0.02 from
// 0.02/sqrt(2L) = 0.01 at L=2 apart for every tensor here (n >= 64*64, so
// 5/sqrt(2n) <= 5.5%).
static const double SAMPLE_SIGMAS = 5.0;

START_TEST(gpt_init_sets_layernorms_to_one_and_draws_matrices_with_std_0_02_shrunk_at_branch_ends) {
    enum { L = 2 };
    const ModelConfig cfg = {.vocab_size = 65, .block_size = 64, .n_embd = 64, .n_head = 4, .arch = ARCH_GPT,
                             .n_layer = L};
    Model m;
    Rng rng;
    rng_init(&rng, 21);
    model_init(&m, &cfg, 1, false);
    model_init_weights(&m, &rng);
    const double branch_end_std = 0.02 / sqrt(2.0 * L);
    int layernorms = 0, branch_ends = 0, others = 0;
    for (int i = 0; i < m.param_table.count; i++) {
        const TensorSpec *spec = &m.param_table.specs[i];
        const float *w = m.params_memory + spec->offset;
        if (spec->ndim == 1) {  // gpt's only 1-d parameters are LayerNorm weights
            for (size_t j = 0; j < spec->size; j++)
                ck_assert_msg(w[j] == 1.0f, "%s[%zu] is %g, expected 1", spec->name, j, (double)w[j]);
            layernorms++;
            continue;
        }
        const char *name = spec->name;
        const size_t len = strlen(name);
        const bool branch_end = (len > 16 && strcmp(name + len - 16, "attn.proj.weight") == 0) ||
                                (len > 15 && strcmp(name + len - 15, "mlp.proj.weight") == 0);
        const double std = branch_end ? branch_end_std : 0.02;
        branch_ends += branch_end;
        others += !branch_end;
        double mean, rms;
        sample_moments(w, spec->size, &mean, &rms);
        const double n = (double)spec->size;
        ck_assert_msg(fabs(rms / std - 1.0) <= SAMPLE_SIGMAS / sqrt(2.0 * n),
                      "%s: %zu weights with std %.5f, expected %.5f within %.1f%%", name, spec->size, rms, std,
                      100.0 * SAMPLE_SIGMAS / sqrt(2.0 * n));
        ck_assert_msg(fabs(mean) <= SAMPLE_SIGMAS * std / sqrt(n), "%s: mean %.6f, expected 0 within %.6f", name,
                      mean, SAMPLE_SIGMAS * std / sqrt(n));
    }
    ck_assert_int_eq(layernorms, 2 * L + 1);  // ln1, ln2 per block, and ln_f
    ck_assert_int_eq(branch_ends, 2 * L);     // attn.proj and mlp.proj per block
    ck_assert_int_eq(others, 2 + 4 * L);      // tok_emb, pos_emb; q, k, v, fc per block
    model_free(&m);
}
END_TEST

START_TEST(card_init_draws_embeddings_from_n_0_1_and_linear_layers_within_one_over_sqrt_c) {
    const ModelConfig cfg = {.vocab_size = 65, .block_size = 64, .n_embd = 64, .n_head = 4};
    Model m;
    Rng rng;
    rng_init(&rng, 22);
    model_init(&m, &cfg, 1, false);
    model_init_weights(&m, &rng);
    const float bound = 1.0f / sqrtf((float)cfg.n_embd);
    for (int i = 0; i < m.param_table.count; i++) {
        const TensorSpec *spec = &m.param_table.specs[i];
        const float *w = m.params_memory + spec->offset;
        const double n = (double)spec->size;
        double mean, rms;
        sample_moments(w, spec->size, &mean, &rms);
        if (strstr(spec->name, "_emb.")) {  // N(0, 1)
            ck_assert_msg(fabs(rms - 1.0) <= SAMPLE_SIGMAS / sqrt(2.0 * n), "%s: std %.4f", spec->name, rms);
            ck_assert_msg(fabs(mean) <= SAMPLE_SIGMAS / sqrt(n), "%s: mean %.4f", spec->name, mean);
            continue;
        }
        // U(-b, b): every value within the bound, and an RMS of b/sqrt(3)
        // (the variance of x^2 is 4 b^4/45, so the RMS's relative standard
        // error is sqrt(4/45 * 9 / 4n) = 1/sqrt(5n)).
        for (size_t j = 0; j < spec->size; j++)
            ck_assert_msg(fabsf(w[j]) <= bound, "%s[%zu] = %g is outside +-%g", spec->name, j, (double)w[j],
                          (double)bound);
        if (spec->size < 1000) continue;  // the biases: too few for the moments to say much
        ck_assert_msg(fabs(rms / (bound / sqrt(3.0)) - 1.0) <= SAMPLE_SIGMAS / sqrt(5.0 * n), "%s: rms %.5f",
                      spec->name, rms);
    }
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// Whole-model gradient vs finite differences

// Whole-model gradients are small (a tensor's largest is 0.001 to 1 here:
// the loss is a mean over B*T positions), so GRADCHECK_FLOAT32's atol of
// 2e-3 would let a large error through. The finite differences measure
// about 1e-5 off, so 1e-4 is tight and still safe.
static const GradCheckTolerance WHOLE_MODEL_TOLERANCE = {.h = 1e-2, .atol = 1e-4, .rtol = 1e-2};

// A tensor whose every gradient is within the tolerance of 0 would pass
// whatever backward wrote. Each tensor's largest gradient must be well
// above atol for its check to mean something.
static const double MEANINGFUL_GRADIENT = 10 * 1e-4;

// Without the residual stream a block's output is a LayerNorm-squashed
// function of its input, curved enough that h = 1e-2 misses by up to 10%
// (measured: h = 1e-2 and h = 1e-3, float32 rounding, both fail elements
// that h = 3e-3 passes, on a backward that agrees at h = 3e-3 everywhere).
static const GradCheckTolerance LADDER_TOLERANCE = {.h = 3e-3, .atol = 1e-4, .rtol = 1e-2};

typedef struct {
    Model m;
    int *inputs, *targets;  // [B,T]
    int B, T;
    uint64_t dropout_key;
} GradCase;

// The loss as a function of the parameters: a training forward pass, with
// the same dropout mask every time.
static double grad_case_loss(void *ctx) {
    GradCase *gc = ctx;
    return model_forward(&gc->m, gc->inputs, gc->targets, gc->B, gc->T, true, gc->dropout_key);
}

// gradcheck_weights: the weights the gradients are checked at: embeddings
// and 1-d weights (biases, LayerNorm gains) from U(-1, 1), and each matrix
// from U(-1, 1) / sqrt(its input width), PyTorch's nn.Linear scale. Larger
// than gpt's init (std 0.02), whose gradients would mostly be within atol
// of 0 and so checked nothing; not much larger: with matrices at U(-1, 1)
// gpt's loss curves so much that h = 1e-2's truncation error, O(h^2), was
// seen to reach 10 times the tolerance (in tok_emb, ln1 and ln2), shrinking
// as h^2 towards the analytic value (an error of the finite difference, not
// of the gradient). At this scale, over 8 seeds of each
// architecture with and without dropout, no element's error used more than
// 30% of its tolerance, and every tensor's largest gradient was above 1e-3.
static void gradcheck_weights(Model *m, Rng *rng) {
    for (int i = 0; i < m->param_table.count; i++) {
        const TensorSpec *spec = &m->param_table.specs[i];
        float *w = m->params_memory + spec->offset;
        fill_uniform(w, spec->size, rng);
        if (spec->ndim == 2 && !strstr(spec->name, "_emb.")) {
            const float scale = 1.0f / sqrtf((float)spec->shape[1]);
            for (size_t j = 0; j < spec->size; j++) w[j] *= scale;
        }
    }
}

// check_model_gradients: a model of "cfg" sized for (max_batch,
// cfg->block_size) at gradcheck_weights, one forward and backward on a
// random (B, T) batch with a fixed dropout mask, and every parameter tensor
// gradchecked against the loss of the whole model. In gpt that includes
// tok_emb, whose gradient is the sum of the tied head's and the
// embedding's, and so proves that the backward pass carries the stream's
// gradient past every block (the embedding's part passes through all of
// them). One thread: a few thousand tiny forward passes, where threads
// would only add barriers.
static void check_model_gradients(const ModelConfig *cfg, int max_batch, int B, int T, uint64_t seed,
                                  GradCheckTolerance tol) {
    GradCase gc = {.B = B, .T = T};
    Rng rng;
    rng_init(&rng, seed);
    model_init(&gc.m, cfg, max_batch, true);
    gradcheck_weights(&gc.m, &rng);
    gc.inputs = xmalloc((size_t)B * T * sizeof(int));
    gc.targets = xmalloc((size_t)B * T * sizeof(int));
    random_tokens(gc.inputs, B * T, cfg->vocab_size, &rng);
    random_tokens(gc.targets, B * T, cfg->vocab_size, &rng);
    gc.dropout_key = rng_u64(&rng);

    const int saved_threads = get_threads();
    set_threads(1);
    model_zero_grad(&gc.m);
    const double loss = grad_case_loss(&gc);
    ck_assert_msg(isfinite(loss) && loss > 0, "%s: initial loss %g", arch_name(cfg->arch), loss);
    model_backward(&gc.m);
    for (int i = 0; i < gc.m.param_table.count; i++) {
        const TensorSpec *spec = &gc.m.param_table.specs[i];
        const float *analytic = gc.m.grads_memory + spec->offset;
        GradCheckResult r = gradcheck(grad_case_loss, &gc, gc.m.params_memory + spec->offset, analytic, spec->size,
                                      tol);
        ck_assert_msg(r.failures == 0,
                      "%s, %d layers, dropout %g, B=%d T=%d: %s: %zu of %zu elements off; worst [%zu] analytic %.6g "
                      "numeric %.6g",
                      arch_name(cfg->arch), gc.m.n_layer, (double)cfg->dropout, B, T, spec->name, r.failures,
                      spec->size, r.worst_index, r.worst_analytic, r.worst_numeric);
        // A comparison, not fmax: Debian's gcc 12 for aarch64 crashes at -O3
        // vectorising an fmax reduction ("internal compiler error: in
        // vect_transform_reduction"). The same result: a NaN is skipped by both.
        double largest = 0;
        for (size_t j = 0; j < spec->size; j++) {
            const double size = fabs((double)analytic[j]);
            if (size > largest) largest = size;
        }
        ck_assert_msg(largest >= MEANINGFUL_GRADIENT, "%s: %s: the largest gradient is %g, too small to check",
                      arch_name(cfg->arch), spec->name, largest);
    }
    set_threads(saved_threads);
    free(gc.targets);
    free(gc.inputs);
    model_free(&gc.m);
}

// Loop test over four cases: card (_i = 0, 1), then gpt (_i = 2, 3), each
// without dropout and with dropout 0.2 (training, fixed key). In gpt that is
// every tensor of both blocks, ln_f, and tok_emb (embedding plus tied
// head); with dropout, the embedding's, both branches' and attention's
// masks.
static const struct {
    const ModelConfig *cfg;
    float dropout;
    uint64_t seed;
} EVERY_GRADIENT_CASES[] = {
    {&SMALL, 0.0f, 1}, {&SMALL, 0.2f, 2}, {&SMALL_GPT, 0.0f, 11}, {&SMALL_GPT, 0.2f, 12},
};
START_TEST(every_parameter_gradient_matches_finite_differences) {
    ModelConfig cfg = *EVERY_GRADIENT_CASES[_i].cfg;
    cfg.dropout = EVERY_GRADIENT_CASES[_i].dropout;
    check_model_gradients(&cfg, SMALL_B, SMALL_B, SMALL_T, EVERY_GRADIENT_CASES[_i].seed, WHOLE_MODEL_TOLERANCE);
}
END_TEST

// Loop test over the seven gpts with some parts removed (`make ladder`'s
// switches): _i's bits 0, 1, 2 remove the LayerNorms, the MLP and the
// residual stream. Each combination routes the gradient differently (the
// stream's gradient written or added, a branch's input the stream itself or
// a LayerNorm's output), and each must still be the true gradient, with
// dropout on. Without the residual stream one block: through two, the
// first block's gradients shrink below what finite differences can check
// (the vanishing gradient that the residual stream exists to prevent).
START_TEST(a_gpt_without_some_of_its_parts_has_the_right_gradient) {
    ModelConfig cfg = SMALL_GPT;
    cfg.no_layernorm = (_i & 1) != 0;
    cfg.no_mlp = (_i & 2) != 0;
    cfg.no_residual = (_i & 4) != 0;
    if (cfg.no_residual) cfg.n_layer = 1;
    cfg.dropout = 0.2f;
    check_model_gradients(&cfg, SMALL_B, SMALL_B, SMALL_T, 40 + (uint64_t)_i, LADDER_TOLERANCE);
}
END_TEST

// The modern recipe's swaps (docs/model.md, "The modern recipe"): each one
// alone, then all together, then all on a gpt without its residual stream
// (the ladder's routing and the swaps at once). A model has one MLP: all
// together takes ReLU^2, and all without the residual stream SwiGLU.
static ModelConfig recipe_case(int i) {
    ModelConfig cfg = SMALL_GPT;
    const int n_alone = 6;  // the swaps so far: --norm rmsnorm, --mlp relu2, --untied-head, --pos rope, --qk-norm,
                            // --mlp swiglu
    const bool all = i >= n_alone;
    if (i == 0 || all) cfg.norm = NORM_RMSNORM;
    if (i == 1 || i == n_alone) cfg.mlp = MLP_RELU2;
    if (i == 2 || all) cfg.untied_head = true;
    if (i == 3 || all) cfg.pos = POS_ROPE;
    if (i == 4 || all) cfg.qk_norm = true;
    if (i == 5 || i == n_alone + 1) cfg.mlp = MLP_SWIGLU;
    if (i == n_alone + 1) {
        cfg.no_residual = true;
        cfg.n_layer = 1;  // see a_gpt_without_some_of_its_parts_has_the_right_gradient
    }
    return cfg;
}
enum { RECIPE_CASES = 8 };

// Loop test over recipe_case, with dropout on: each swap's backward, in the
// whole model, is the gradient of its forward.
START_TEST(a_gpt_with_the_modern_recipe_s_swaps_has_the_right_gradient) {
    ModelConfig cfg = recipe_case(_i);
    cfg.dropout = 0.2f;
    check_model_gradients(&cfg, SMALL_B, SMALL_B, SMALL_T, 60 + (uint64_t)_i, LADDER_TOLERANCE);
}
END_TEST

// Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(gradients_are_right_for_a_batch_smaller_than_the_maximum) {
    ModelConfig cfg = _i == 0 ? SMALL : SMALL_GPT;
    cfg.dropout = 0.2f;
    check_model_gradients(&cfg, 3, 2, 3, 5, WHOLE_MODEL_TOLERANCE);  // built for B=3, T=5; run with B=2, T=3
}
END_TEST

// Backward ADDS to the parameter gradients (model.h): two backward passes
// of the same forward pass leave twice the gradient of one; zero_grad
// clears them. Loop test: _i = 0 on card, _i = 1 on gpt (whose tok_emb
// gets the head's part and the embedding's part, both added).
START_TEST(backward_adds_to_the_parameter_gradients_and_zero_grad_clears_them) {
    ModelConfig cfg = _i == 0 ? SMALL : SMALL_GPT;
    cfg.dropout = 0.2f;
    Model m;
    Rng rng;
    rng_init(&rng, 30);
    model_init(&m, &cfg, SMALL_B, true);
    gradcheck_weights(&m, &rng);
    int inputs[SMALL_B * SMALL_T], targets[SMALL_B * SMALL_T];
    random_tokens(inputs, SMALL_B * SMALL_T, cfg.vocab_size, &rng);
    random_tokens(targets, SMALL_B * SMALL_T, cfg.vocab_size, &rng);
    const size_t n = m.param_table.total;
    float *once = xmalloc(n * sizeof(float));
    model_zero_grad(&m);
    model_forward(&m, inputs, targets, SMALL_B, SMALL_T, true, 3);
    model_backward(&m);
    memcpy(once, m.grads_memory, n * sizeof(float));
    model_forward(&m, inputs, targets, SMALL_B, SMALL_T, true, 3);
    model_backward(&m);
    for (int i = 0; i < m.param_table.count; i++) {
        const TensorSpec *spec = &m.param_table.specs[i];
        for (size_t j = 0; j < spec->size; j++) {
            const float g1 = once[spec->offset + j], g2 = m.grads_memory[spec->offset + j];
            ck_assert_msg(fabsf(g2 - 2.0f * g1) <= 1e-6f + 1e-5f * fabsf(g1),
                          "%s, %s[%zu]: %.9g after one backward pass, %.9g after two", arch_name(cfg.arch),
                          spec->name, j, (double)g1, (double)g2);
        }
    }
    model_zero_grad(&m);
    for (size_t j = 0; j < n; j++) ck_assert_msg(m.grads_memory[j] == 0.0f, "gradient %zu not cleared", j);
    free(once);
    model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------
// Forward

// first_loss: the loss of a freshly initialised model of "cfg" on a random batch.
static float first_loss(const ModelConfig *cfg) {
    Model m;
    Rng rng;
    rng_init(&rng, 3);
    model_init(&m, cfg, SMALL_B, false);
    model_init_weights(&m, &rng);
    int inputs[SMALL_B * SMALL_T], targets[SMALL_B * SMALL_T];
    random_tokens(inputs, SMALL_B * SMALL_T, cfg->vocab_size, &rng);
    random_tokens(targets, SMALL_B * SMALL_T, cfg->vocab_size, &rng);
    float loss = model_forward(&m, inputs, targets, SMALL_B, SMALL_T, false, 0);
    model_free(&m);
    return loss;
}

START_TEST(first_loss_is_finite_and_positive) {
    // A random init does not promise a loss near ln V (N(0,1) embeddings can
    // make the first logits confident), only a finite, positive one.
    float loss = first_loss(&SMALL);
    ck_assert_msg(isfinite(loss) && loss > 0.0f, "first loss %g", (double)loss);
}
END_TEST

START_TEST(gpt_first_loss_is_close_to_ln_v) {
    // nanoGPT's init makes the first prediction nearly uniform: ln_f's output
    // has unit variance per channel and tok_emb is N(0, 0.02), so each logit
    // is about N(0, 0.02^2 C), std 0.06 at C=8. A position's cross-entropy
    // logsumexp(z) - z_target is within max z - min z of ln V, and the mean
    // over B*T positions much closer; 0.1 is several standard deviations.
    float loss = first_loss(&SMALL_GPT);
    ck_assert_msg(fabs(loss - log(SMALL_GPT.vocab_size)) < 0.1, "first loss %g, ln V = %g", (double)loss,
                  log(SMALL_GPT.vocab_size));
}
END_TEST

// smaller_batch_matches_exact_model: big is built for B=3, T=6; exact for
// B=2, T=4, with the same parameters (pos_emb's first 4 rows). Both run the
// same (N, C, OC) matmuls and the same attention loops, so the results are
// bitwise equal, in evaluation and in training (the same dropout masks).
static void smaller_batch_matches_exact_model(const ModelConfig *cfg) {
    enum { B = 2, T = 4 };
    ModelConfig big_cfg = *cfg, exact_cfg = *cfg;
    big_cfg.block_size = 6;
    exact_cfg.block_size = T;
    big_cfg.dropout = exact_cfg.dropout = 0.2f;
    Model big, exact;
    Rng rng;
    rng_init(&rng, 4);
    model_init(&big, &big_cfg, 3, false);
    model_init(&exact, &exact_cfg, B, false);
    model_init_weights(&big, &rng);
    ck_assert_msg(big.param_table.count == exact.param_table.count, "%s: %d tensors for T=6, %d for T=4",
                  arch_name(cfg->arch), big.param_table.count, exact.param_table.count);
    for (int i = 0; i < exact.param_table.count; i++) {  // pos_emb: a prefix; the others: whole
        const TensorSpec *from = &big.param_table.specs[i], *to = &exact.param_table.specs[i];
        ck_assert_msg(strcmp(from->name, to->name) == 0, "%s: tensor %d is %s for T=6, %s for T=4",
                      arch_name(cfg->arch), i, from->name, to->name);
        memcpy(exact.params_memory + to->offset, big.params_memory + from->offset, to->size * sizeof(float));
    }
    int inputs[B * T], targets[B * T];
    random_tokens(inputs, B * T, cfg->vocab_size, &rng);
    random_tokens(targets, B * T, cfg->vocab_size, &rng);
    const size_t logits_bytes = (size_t)B * T * cfg->vocab_size * sizeof(float);
    for (int training = 0; training <= 1; training++) {
        // The logits without targets: with them, their softmax is written over them (model.h).
        model_forward(&big, inputs, NULL, B, T, training, 42);
        model_forward(&exact, inputs, NULL, B, T, training, 42);
        ck_assert_msg(memcmp(big.acts.logits, exact.acts.logits, logits_bytes) == 0,
                      "%s, training %d: the logits differ", arch_name(cfg->arch), training);
        float big_loss = model_forward(&big, inputs, targets, B, T, training, 42);
        float exact_loss = model_forward(&exact, inputs, targets, B, T, training, 42);
        ck_assert_msg(memcmp(big.acts.probs, exact.acts.probs, logits_bytes) == 0,
                      "%s, training %d: the probabilities differ", arch_name(cfg->arch), training);
        ck_assert_msg(big_loss == exact_loss, "%s, training %d: loss %.9g built for T=6, %.9g for T=4",
                      arch_name(cfg->arch), training, (double)big_loss, (double)exact_loss);
    }
    model_free(&exact);
    model_free(&big);
}

// Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(a_smaller_batch_gives_the_logits_of_a_model_built_for_that_size) {
    smaller_batch_matches_exact_model(_i == 0 ? &SMALL : &SMALL_GPT);
}
END_TEST

// Loop test: _i = 0 on card, _i = 1 on gpt (where dropout also acts on the
// embedding and on both branches of every block).
START_TEST(dropout_changes_only_training_and_zero_dropout_changes_nothing) {
    enum { B = SMALL_B, T = SMALL_T };
    const ModelConfig base = _i == 0 ? SMALL : SMALL_GPT;
    ModelConfig with_dropout = base;
    with_dropout.dropout = 0.3f;
    Model plain, dropped;
    Rng rng;
    rng_init(&rng, 6);
    model_init(&plain, &base, B, false);
    model_init(&dropped, &with_dropout, B, false);
    model_init_weights(&plain, &rng);
    ck_assert_uint_eq(plain.param_table.total, dropped.param_table.total);
    memcpy(dropped.params_memory, plain.params_memory, plain.param_table.total * sizeof(float));
    int inputs[B * T];
    random_tokens(inputs, B * T, base.vocab_size, &rng);
    const size_t logits_bytes = (size_t)B * T * base.vocab_size * sizeof(float);
    float *reference = xmalloc(logits_bytes);

    // Without targets, so that the logits stay (model.h).
    model_forward(&plain, inputs, NULL, B, T, false, 0);  // evaluation, no dropout
    memcpy(reference, plain.acts.logits, logits_bytes);
    model_forward(&plain, inputs, NULL, B, T, true, 7);  // training, but p = 0
    ck_assert_msg(memcmp(reference, plain.acts.logits, logits_bytes) == 0, "training with p = 0 changed the logits");
    model_forward(&dropped, inputs, NULL, B, T, false, 7);  // p = 0.3, evaluation
    ck_assert_msg(memcmp(reference, dropped.acts.logits, logits_bytes) == 0, "dropout acted outside training");
    model_forward(&dropped, inputs, NULL, B, T, true, 7);  // p = 0.3, training
    ck_assert_msg(memcmp(reference, dropped.acts.logits, logits_bytes) != 0, "dropout did nothing while training");
    free(reference);
    model_free(&dropped);
    model_free(&plain);
}
END_TEST

// The loss's probs and their gradient live in the logits' buffer (model.h,
// ActTensors): after a forward with targets it holds the bits
// crossentropy_forward writes into a buffer of its own, and after the
// backward those crossentropy_backward writes into another, from which the
// head's backward then read. (This binary is the fast build: the model's
// loss is crossentropy_forward.) Loop test: _i = 0 on card, _i = 1 on gpt.
START_TEST(probs_and_dlogits_written_over_the_logits_are_those_of_separate_buffers) {
    enum { B = SMALL_B, T = SMALL_T };
    const ModelConfig cfg = _i == 0 ? SMALL : SMALL_GPT;
    const int V = cfg.vocab_size, BT = B * T;
    Model m;
    Rng rng;
    rng_init(&rng, 23);
    model_init(&m, &cfg, B, true);
    model_init_weights(&m, &rng);
    int inputs[BT], targets[BT];
    random_tokens(inputs, BT, V, &rng);
    random_tokens(targets, BT, V, &rng);
    float *logits = xmalloc((size_t)BT * V * sizeof(float)), *probs = xmalloc((size_t)BT * V * sizeof(float));
    float *dlogits = xmalloc((size_t)BT * V * sizeof(float)), losses[BT];
    model_forward(&m, inputs, NULL, B, T, true, 0);
    memcpy(logits, m.acts.logits, (size_t)BT * V * sizeof(float));
    const float expected_loss = crossentropy_forward(losses, probs, logits, targets, BT, V);
    crossentropy_backward(dlogits, probs, targets, BT, V, (size_t)BT);

    const float loss = model_forward(&m, inputs, targets, B, T, true, 0);
    ck_assert_msg(memcmp(&loss, &expected_loss, sizeof loss) == 0, "%s: loss %.9g, separately %.9g",
                  arch_name(cfg.arch), (double)loss, (double)expected_loss);
    ck_assert_msg(memcmp(m.acts.losses, losses, sizeof losses) == 0, "%s: the losses differ", arch_name(cfg.arch));
    ck_assert_msg(memcmp(m.acts.probs, probs, (size_t)BT * V * sizeof(float)) == 0, "%s: the probabilities differ",
                  arch_name(cfg.arch));
    model_zero_grad(&m);
    model_backward(&m);
    ck_assert_msg(memcmp(m.grad_acts.dlogits, dlogits, (size_t)BT * V * sizeof(float)) == 0,
                  "%s: the gradients of the logits differ", arch_name(cfg.arch));
    free(dlogits);
    free(probs);
    free(logits);
    model_free(&m);
}
END_TEST


// Under the sanitizers (helpers.h, TINYGPT_SANITIZED) the two paths may
// differ by FMA rounding, a few units in the last place; 1e-6 still catches
// a wrong row or a missing term.
static const float SANITIZED_LOGIT_TOLERANCE = 1e-6f;

// randomize_biases: every tensor of "m" named "*.bias" (card's head and
// projection, gpt2's all) filled from U(-1, 1): gpt2's start at 0, where a
// bias added in the wrong row or left out would change nothing.
static void randomize_biases(Model *m, Rng *rng) {
    for (int i = 0; i < m->param_table.count; i++) {
        const TensorSpec *spec = &m->param_table.specs[i];
        const size_t len = strlen(spec->name);
        if (len > 5 && strcmp(spec->name + len - 5, ".bias") == 0)
            fill_uniform(m->params_memory + spec->offset, spec->size, rng);
    }
}

static size_t count_nonzero(const float *x, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++) count += x[i] != 0.0f;
    return count;
}

// position_by_position_matches_full_pass: model.h: model_forward_position
// "runs the same block_forward as model_forward, on one row, so every bit
// of the result is the same".
static void position_by_position_matches_full_pass(const ModelConfig *cfg) {
    const int T = cfg->block_size, V = cfg->vocab_size;
    Model full, cached;
    Rng rng;
    rng_init(&rng, 14);
    model_init(&full, cfg, 1, false);
    model_init(&cached, cfg, 1, false);
    model_init_weights(&full, &rng);
    randomize_biases(&full, &rng);
    memcpy(cached.params_memory, full.params_memory, full.param_table.total * sizeof(float));
    int *inputs = xmalloc((size_t)T * sizeof(int));
    random_tokens(inputs, T, V, &rng);
    model_forward(&full, inputs, NULL, 1, T, false, 0);
    for (int t = 0; t < T; t++) {
        const float *logits_t = model_forward_position(&cached, inputs[t], t);
        const float *expected = full.acts.logits + (size_t)t * V;
        if (!TINYGPT_SANITIZED && memcmp(logits_t, expected, (size_t)V * sizeof(float)) == 0) continue;
        for (int v = 0; v < V; v++)
            if (TINYGPT_SANITIZED ? !(fabsf(logits_t[v] - expected[v]) <= SANITIZED_LOGIT_TOLERANCE)
                                  : memcmp(&logits_t[v], &expected[v], sizeof(float)) != 0)
                ck_abort_msg("%s, %d layers: position %d, logit %d: %.9g one position at a time, %.9g in a full pass",
                             arch_name(cfg->arch), full.n_layer, t, v, (double)logits_t[v], (double)expected[v]);
    }
    // model.h: only the cache (qkv) has a row per position; every other
    // activation, the logits and a block's output included, is written in
    // row 0 (the rest of these calloc'd buffers is still zero).
    const int C = cfg->n_embd;
    const size_t rest = (size_t)(T - 1) * C;
    for (int l = 0; l < cached.n_layer; l++) {
        const BlockActs *a = &cached.acts.blocks[l];
        ck_assert_msg(count_nonzero(a->qkv + (size_t)(T - 1) * 3 * C, 3 * (size_t)C) > 0, "block %d: no cache row",
                      l);
        ck_assert_msg(count_nonzero(a->attn_out + C, rest) == 0 && count_nonzero(a->res_attn + C, rest) == 0,
                      "block %d: a position's activations written past row 0", l);
    }
    ck_assert_msg(count_nonzero(cached.acts.logits + V, (size_t)(T - 1) * V) == 0, "logits written past row 0");
    free(inputs);
    model_free(&cached);
    model_free(&full);
}

// Loop test: _i = 0 on card, _i = 1 on a gpt of 3 blocks, _i = 2 on a gpt2
// of 3 blocks (tanh GELU; its biases made random by the helper).
START_TEST(forward_position_by_position_gives_the_logits_of_a_full_forward_pass) {
    static const ModelConfig configs[] = {
        {.vocab_size = 11, .block_size = 12, .n_embd = 32, .n_head = 4, .dropout = 0.1f},
        {.vocab_size = 11, .block_size = 12, .n_embd = 32, .n_head = 4, .dropout = 0.1f, .arch = ARCH_GPT,
         .n_layer = 3},
        {.vocab_size = 11, .block_size = 12, .n_embd = 32, .n_head = 4, .dropout = 0.1f, .arch = ARCH_GPT2,
         .n_layer = 3, .mlp = MLP_GELU_TANH},
    };
    position_by_position_matches_full_pass(&configs[_i]);
}
END_TEST

// Loop test over recipe_case, at the sizes above: sampling runs the swaps
// one position at a time, with the same bits.
START_TEST(forward_position_by_position_with_the_recipe_s_swaps_gives_the_logits_of_a_full_pass) {
    ModelConfig cfg = recipe_case(_i);
    cfg.vocab_size = 11, cfg.block_size = 12, cfg.n_embd = 32, cfg.n_head = 4, cfg.dropout = 0.1f;
    position_by_position_matches_full_pass(&cfg);
}
END_TEST

// ---------------------------------------------------------------------------
// Training

// learns_repeating_sequence: "abcabc..." as token ids 0, 1, 2: the next
// token is a function of the current one, so even a model that ignores
// position can learn it exactly. The loss must fall below 20% of where it
// started: a clear margin.
static void learns_repeating_sequence(const ModelConfig *cfg, int steps, float lr) {
    enum { B = 2, T = 8 };
    const double required_fraction = 0.2;
    ck_assert_msg(cfg->block_size == T, "%s: block_size %d, the sequence needs %d", arch_name(cfg->arch),
                  cfg->block_size, (int)T);
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
    model_init(&m, cfg, B, true);
    model_init_weights(&m, &rng);
    // One thread: a few hundred steps of ~20 tiny parallel regions each would
    // spend their time in barriers, which on a loaded machine can each wait a
    // scheduler tick. Threads change no bits (see the last tests).
    int saved_threads = get_threads();
    set_threads(1);
    float first = 0, last = 0;
    for (int step = 0; step < steps; step++) {
        model_zero_grad(&m);
        last = model_forward(&m, inputs, targets, B, T, true, (uint64_t)step);
        if (step == 0) first = last;
        model_backward(&m);
        model_sgd_step(&m, lr);
    }
    set_threads(saved_threads);
    ck_assert_msg(isfinite(last) && last < required_fraction * first, "%s: loss went from %g to %g in %d steps",
                  arch_name(cfg->arch), (double)first, (double)last, steps);
    model_free(&m);
}

// Loop test: _i = 0 on card, _i = 1 on a gpt of 2 blocks.
START_TEST(sgd_learns_a_repeating_sequence) {
    static const ModelConfig configs[] = {
        {.vocab_size = 3, .block_size = 8, .n_embd = 16, .n_head = 2, .dropout = 0.0f},
        {.vocab_size = 3, .block_size = 8, .n_embd = 16, .n_head = 2, .dropout = 0.0f, .arch = ARCH_GPT,
         .n_layer = 2},
    };
    learns_repeating_sequence(&configs[_i], 300, 0.5f);
}
END_TEST

// A short training run with dropout, where each step draws its batch
// windows from a random corpus: losses[RUN_STEPS] receives every step's loss,
// and the parameters at the end are returned (the caller frees them). A few
// steps suffice: any difference in one step's sums changes every later step.
// Sizes big enough that every layer splits its work between two threads:
// B*T = 128 rows (one chunk of matmul.c), 3C = 96 columns (two 64-wide
// tiles, so two work items; gpt's 4C = 128 too), B*NH = 16 attention (batch, head) pairs.
enum { RUN_B = 4, RUN_T = 32, RUN_STEPS = 8, RUN_CORPUS = 500 };
static const ModelConfig RUN_CFG = {.vocab_size = 11, .block_size = RUN_T, .n_embd = 32, .n_head = 4,
                                    .dropout = 0.2f};
static const ModelConfig RUN_GPT_CFG = {.vocab_size = 11, .block_size = RUN_T, .n_embd = 32, .n_head = 4,
                                        .dropout = 0.2f, .arch = ARCH_GPT, .n_layer = 2};

static float *train_run(const ModelConfig *cfg, float losses[RUN_STEPS], uint64_t seed) {
    Model m;
    Rng rng;
    rng_init(&rng, seed);
    model_init(&m, cfg, RUN_B, true);
    model_init_weights(&m, &rng);
    int corpus[RUN_CORPUS], inputs[RUN_B * RUN_T], targets[RUN_B * RUN_T];
    random_tokens(corpus, RUN_CORPUS, cfg->vocab_size, &rng);
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
    float *params = xmalloc(m.param_table.total * sizeof(float));
    memcpy(params, m.params_memory, m.param_table.total * sizeof(float));
    model_free(&m);
    return params;
}

static void assert_runs_identical(const ModelConfig *cfg, const float a[RUN_STEPS], const float b[RUN_STEPS],
                                  const float *params_a, const float *params_b, const char *what) {
    for (int step = 0; step < RUN_STEPS; step++)
        ck_assert_msg(memcmp(&a[step], &b[step], sizeof(float)) == 0, "%s, %s: step %d loss %.9g vs %.9g",
                      arch_name(cfg->arch), what, step, (double)a[step], (double)b[step]);
    TensorTable t;
    param_table(&t, cfg);
    for (int i = 0; i < t.count; i++)
        ck_assert_msg(memcmp(params_a + t.specs[i].offset, params_b + t.specs[i].offset,
                             t.specs[i].size * sizeof(float)) == 0,
                      "%s, %s: final %s differs", arch_name(cfg->arch), what, t.specs[i].name);
    table_free(&t);
}

static void same_seed_runs_are_identical(const ModelConfig *cfg) {
    float first[RUN_STEPS], second[RUN_STEPS];
    float *params_first = train_run(cfg, first, 9);
    float *params_second = train_run(cfg, second, 9);
    assert_runs_identical(cfg, first, second, params_first, params_second, "same seed");
    free(params_second);
    free(params_first);
}

static void thread_counts_give_identical_runs(const ModelConfig *cfg) {
    float one[RUN_STEPS], two[RUN_STEPS];
    int saved_threads = get_threads();
    set_threads(1);
    float *params_one = train_run(cfg, one, 10);
    set_threads(2);
    float *params_two = train_run(cfg, two, 10);
    set_threads(saved_threads);
    assert_runs_identical(cfg, one, two, params_one, params_two, "1 vs 2 threads");
    free(params_two);
    free(params_one);
}

// Loop tests: _i = 0 on card, _i = 1 on gpt.
START_TEST(the_same_seed_gives_bitwise_identical_losses) {
    same_seed_runs_are_identical(_i == 0 ? &RUN_CFG : &RUN_GPT_CFG);
}
END_TEST

START_TEST(one_and_two_threads_give_bitwise_identical_losses) {
    thread_counts_give_identical_runs(_i == 0 ? &RUN_CFG : &RUN_GPT_CFG);
}
END_TEST

// ---------------------------------------------------------------------------
// gpt2: the gpt with a bias in every linear layer and LayerNorm.

static const ModelConfig SMALL_GPT2 = {.vocab_size = 7, .block_size = SMALL_T, .n_embd = 8, .n_head = 2,
                                       .dropout = 0.0f, .arch = ARCH_GPT2, .n_layer = SMALL_L, .mlp = MLP_GELU_TANH};

// The names are the ones `tinygpt export` and the Hugging Face reader map
// GPT-2's onto: each bias right after its weight, q's, k's and v's after the
// three weights, so that they are one [3C] vector as the weights are one
// [3C,C] matrix.
START_TEST(gpt2_param_table_puts_each_bias_after_its_weight_and_q_k_v_s_in_one_view) {
    const size_t V = (size_t)SMALL_GPT2.vocab_size, T = (size_t)SMALL_GPT2.block_size, C = (size_t)SMALL_GPT2.n_embd;
    const size_t L = SMALL_L;
    ExpectedTable x = {0};
    expect(&x, 2, V, C, "tok_emb.weight");
    expect(&x, 2, T, C, "pos_emb.weight");
    for (size_t l = 0; l < L; l++) {
        expect(&x, 1, C, 0, "blocks.%zu.ln1.weight", l);
        expect(&x, 1, C, 0, "blocks.%zu.ln1.bias", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.q.weight", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.k.weight", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.v.weight", l);
        expect(&x, 1, C, 0, "blocks.%zu.attn.q.bias", l);
        expect(&x, 1, C, 0, "blocks.%zu.attn.k.bias", l);
        expect(&x, 1, C, 0, "blocks.%zu.attn.v.bias", l);
        expect(&x, 2, C, C, "blocks.%zu.attn.proj.weight", l);
        expect(&x, 1, C, 0, "blocks.%zu.attn.proj.bias", l);
        expect(&x, 1, C, 0, "blocks.%zu.ln2.weight", l);
        expect(&x, 1, C, 0, "blocks.%zu.ln2.bias", l);
        expect(&x, 2, 4 * C, C, "blocks.%zu.mlp.fc.weight", l);
        expect(&x, 1, 4 * C, 0, "blocks.%zu.mlp.fc.bias", l);
        expect(&x, 2, C, 4 * C, "blocks.%zu.mlp.proj.weight", l);
        expect(&x, 1, C, 0, "blocks.%zu.mlp.proj.bias", l);
    }
    expect(&x, 1, C, 0, "ln_f.weight");
    expect(&x, 1, C, 0, "ln_f.bias");
    TensorTable t;
    param_table(&t, &SMALL_GPT2);
    assert_table_is("gpt2", &t, &x);
    ck_assert_ptr_null(table_find(&t, "head.weight"));  // tied, as the gpt's
    // the gpt's, a block's biases (ln1 C, qkv 3C, proj C, ln2 C, fc 4C, mlp proj C: 11C), and ln_f's
    ck_assert_uint_eq(t.total, V * C + T * C + L * (2 * C + 12 * C * C) + C + L * 11 * C + C);
    table_free(&t);

    Model m;
    model_init(&m, &SMALL_GPT2, 1, true);
    for (int l = 0; l < m.n_layer; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.q.bias", l);
        const TensorSpec *q = table_find(&m.param_table, name);
        snprintf(name, sizeof name, "blocks.%d.attn.v.bias", l);
        const TensorSpec *v = table_find(&m.param_table, name);
        ck_assert_ptr_eq(m.params.blocks[l].qkv_bias, m.params_memory + q->offset);
        ck_assert_ptr_eq(m.grads.blocks[l].qkv_bias, m.grads_memory + q->offset);
        ck_assert_uint_eq(v->offset, q->offset + 2 * C);  // [bq; bk; bv], one [3C] vector
        ck_assert_ptr_nonnull(m.params.blocks[l].mlp_proj_bias);
        ck_assert_ptr_nonnull(m.grads.blocks[l].ln2_bias);
    }
    ck_assert_ptr_eq(m.params.head_weight, m.params.tok_emb);
    ck_assert_ptr_nonnull(m.params.lnf_bias);
    model_free(&m);
    // A gpt has none of these views.
    model_init(&m, &SMALL_GPT, 1, true);
    ck_assert_ptr_null(m.params.blocks[0].qkv_bias);
    ck_assert_ptr_null(m.params.blocks[0].ln1_bias);
    ck_assert_ptr_null(m.params.blocks[0].proj_bias);
    ck_assert_ptr_null(m.params.lnf_bias);
    model_free(&m);
}
END_TEST

// gpt2 is GPT-2's model: the gpt's ladder removals and recipe swaps are
// refused, each with the one message that says what gpt2 is; GELU's two
// forms are taken.
START_TEST(check_config_refuses_a_gpt2_with_the_gpt_s_removals_or_swaps) {
    for (int i = 0; i < 9; i++) {
        ModelConfig cfg = SMALL_GPT2;
        if (i == 0) cfg.no_layernorm = true;
        if (i == 1) cfg.no_mlp = true;
        if (i == 2) cfg.no_residual = true;
        if (i == 3) cfg.untied_head = true;
        if (i == 4) cfg.norm = NORM_RMSNORM;
        if (i == 5) cfg.pos = POS_ROPE;
        if (i == 6) cfg.qk_norm = true;
        if (i == 7) cfg.mlp = MLP_RELU2;
        if (i == 8) cfg.mlp = MLP_SWIGLU;
        Error err = {{0}};
        ck_assert_msg(!model_check_config(&cfg, &err), "case %d accepted", i);
        ck_assert_msg(strstr(err.msg, "gpt2 is GPT-2's model") != NULL, "case %d: %s", i, err.msg);
    }
    ModelConfig cfg = SMALL_GPT2;
    ck_assert(model_check_config(&cfg, NULL));
    cfg.mlp = MLP_GELU;
    ck_assert(model_check_config(&cfg, NULL));
    cfg.n_layer = 0;
    ck_assert(!model_check_config(&cfg, NULL));
}
END_TEST

// GPT-2's init: the gpt's, drawn from the same stream in the same order, and
// every bias 0, drawing nothing: a gpt2 starts as its gpt twin.
START_TEST(gpt2_init_is_the_gpt_s_weights_with_every_bias_zero) {
    const ModelConfig gpt = {.vocab_size = 65, .block_size = 16, .n_embd = 32, .n_head = 4, .arch = ARCH_GPT,
                             .n_layer = 3};
    ModelConfig gpt2 = gpt;
    gpt2.arch = ARCH_GPT2;
    Model a, b;
    Rng rng;
    model_init(&a, &gpt, 1, false);
    model_init(&b, &gpt2, 1, false);
    rng_init(&rng, 21);
    model_init_weights(&a, &rng);
    rng_init(&rng, 21);
    model_init_weights(&b, &rng);
    int biases = 0;
    for (int i = 0; i < b.param_table.count; i++) {
        const TensorSpec *spec = &b.param_table.specs[i];
        const float *w = b.params_memory + spec->offset;
        const TensorSpec *twin = table_find(&a.param_table, spec->name);
        if (twin) {
            ck_assert_msg(memcmp(w, a.params_memory + twin->offset, spec->size * sizeof(float)) == 0,
                          "%s differs from the gpt's", spec->name);
            continue;
        }
        ck_assert_msg(strstr(spec->name, ".bias") != NULL, "%s is neither the gpt's nor a bias", spec->name);
        biases++;
        for (size_t j = 0; j < spec->size; j++)
            ck_assert_msg(w[j] == 0.0f, "%s[%zu] = %g, not 0", spec->name, j, (double)w[j]);
    }
    ck_assert_int_eq(biases, 3 * 8 + 1);  // ln1, q, k, v, proj, ln2, fc, mlp proj in each block; ln_f
    model_free(&b);
    model_free(&a);
}
END_TEST

// A bias of 0 adds nothing, and gpt2's block is the gpt's with its bias
// pointers set: with every bias 0 and the exact GELU, gpt2 computes the
// gpt's loss, logits and weight gradients to the bit, dropout on (the same
// masks), and its biases get gradients the gpt has no tensor for.
START_TEST(gpt2_with_zero_biases_and_exact_gelu_computes_the_gpt_bit_for_bit) {
    ModelConfig gpt = SMALL_GPT, gpt2 = SMALL_GPT2;
    gpt.dropout = gpt2.dropout = 0.2f;
    gpt2.mlp = MLP_GELU;
    Model a, b;
    Rng rng;
    model_init(&a, &gpt, SMALL_B, true);
    model_init(&b, &gpt2, SMALL_B, true);
    rng_init(&rng, 22);
    model_init_weights(&a, &rng);
    rng_init(&rng, 22);
    model_init_weights(&b, &rng);
    int inputs[SMALL_B * SMALL_T], targets[SMALL_B * SMALL_T];
    random_tokens(inputs, SMALL_B * SMALL_T, gpt.vocab_size, &rng);
    random_tokens(targets, SMALL_B * SMALL_T, gpt.vocab_size, &rng);
    model_zero_grad(&a);
    model_zero_grad(&b);
    const size_t logits = (size_t)SMALL_B * SMALL_T * gpt.vocab_size * sizeof(float);
    model_forward(&a, inputs, NULL, SMALL_B, SMALL_T, true, 99);  // no targets: the logits stay (model.h)
    model_forward(&b, inputs, NULL, SMALL_B, SMALL_T, true, 99);
    ck_assert_msg(memcmp(a.acts.logits, b.acts.logits, logits) == 0, "the logits differ");
    const float loss_a = model_forward(&a, inputs, targets, SMALL_B, SMALL_T, true, 99);
    const float loss_b = model_forward(&b, inputs, targets, SMALL_B, SMALL_T, true, 99);
    ck_assert_msg(memcmp(&loss_a, &loss_b, sizeof loss_a) == 0, "loss: gpt %.9g, gpt2 %.9g", (double)loss_a,
                  (double)loss_b);
    ck_assert_msg(memcmp(a.acts.probs, b.acts.probs, logits) == 0, "the probabilities differ");
    model_backward(&a);
    model_backward(&b);
    for (int i = 0; i < a.param_table.count; i++) {
        const TensorSpec *spec = &a.param_table.specs[i], *twin = table_find(&b.param_table, spec->name);
        ck_assert_msg(memcmp(a.grads_memory + spec->offset, b.grads_memory + twin->offset,
                             spec->size * sizeof(float)) == 0, "the gradient of %s differs", spec->name);
    }
    float largest = 0.0f;
    for (size_t j = 0; j < (size_t)gpt.n_embd; j++) largest = fmaxf(largest, fabsf(b.grads.lnf_bias[j]));
    ck_assert_msg(largest > 1e-4f, "ln_f.bias has no gradient (largest %g)", (double)largest);
    model_free(&b);
    model_free(&a);
}
END_TEST

// ---------------------------------------------------------------------------
// Slices (model.h): two threads, each the whole pass on half the rows.

// sliced_pass: "m" and its slices s[0..n-2] on rows [0, R), [R, 2R), ...
// of "inputs" (R = B/n), as train.c's model_pass runs them (a thread each,
// the forward passes, then the backward passes, each in a team of its
// own), and then the slices' remaining gradients added to m's in turn.
static void sliced_pass(Model *m, Model *s, int n, const int *inputs, const int *targets, int B, int T) {
    const int R = B / n;
    for (int j = 0; j < n; j++) {
        Model *mine = j == 0 ? m : &s[j - 1];
        mine->loss_rows = (size_t)B;
        mine->batch_first = (size_t)j * R;
        model_zero_grad(mine);
    }
#pragma omp parallel num_threads(n)
    {
        const int j = omp_get_thread_num();
        Model *mine = j == 0 ? m : &s[j - 1];
#pragma omp parallel num_threads(1)
        model_forward(mine, inputs + (size_t)j * R * T, targets + (size_t)j * R * T, R, T, true, 5);
#pragma omp barrier
#pragma omp parallel num_threads(1)
        model_backward(mine);
    }
    for (int j = 1; j < n; j++) model_add_grads(m, &s[j - 1]);
}

// Slices that hand each block's gradients on as their backward ends keep
// one block's worth each instead of
// all of them, and the gradients they leave in the model are, bit for bit,
// those of slices that keep them all to the end: every sum is the model's
// rows' gradient plus the first slice's plus the next's, whichever way. On
// card (one block, a bias in the head), gpt with dropout and gpt2 (a bias
// everywhere), in 2 and in 3 slices (more threads than this machine's
// cores is fine: each waits for the one before).
START_TEST(slices_that_hand_their_blocks_gradients_on_leave_the_same_gradients_in_less_memory) {
    ModelConfig cfg = _i % 3 == 0 ? SMALL : _i % 3 == 1 ? SMALL_GPT : SMALL_GPT2;
    cfg.dropout = 0.2f;
    const int n = _i < 3 ? 2 : 3, B = 2 * n, T = SMALL_T;
    omp_set_max_active_levels(1);
    Model keep, hand, keep_slices[2], hand_slices[2];
    Rng rng;
    model_init(&keep, &cfg, B, true);
    model_init(&hand, &cfg, B, true);
    rng_init(&rng, 31);
    model_init_weights(&keep, &rng);
    memcpy(hand.params_memory, keep.params_memory, keep.param_table.total * sizeof(float));
    for (int k = 1; k < n; k++) {
        model_slice_init(&keep_slices[k - 1], &keep, 2 * k, 2, NULL);
        model_slice_init(&hand_slices[k - 1], &hand, 2 * k, 2, k == 1 ? &hand : &hand_slices[k - 2]);
    }
    int inputs[6 * SMALL_T], targets[6 * SMALL_T];
    for (int step = 0; step < 2; step++) {  // the second pass finds the first's counts
        random_tokens(inputs, B * T, cfg.vocab_size, &rng);
        random_tokens(targets, B * T, cfg.vocab_size, &rng);
        sliced_pass(&keep, keep_slices, n, inputs, targets, B, T);
        sliced_pass(&hand, hand_slices, n, inputs, targets, B, T);
        for (int i = 0; i < keep.param_table.count; i++) {
            const TensorSpec *spec = &keep.param_table.specs[i];
            ck_assert_msg(memcmp(keep.grads_memory + spec->offset, hand.grads_memory + spec->offset,
                                 spec->size * sizeof(float)) == 0, "%d slices, pass %d: the gradient of %s differs",
                          n, step, spec->name);
        }
    }
    // A slice's gradients: everything but the blocks', and one block's worth.
    const size_t total = keep.param_table.total, L = (size_t)keep.n_layer;
    size_t blocks = 0;
    for (int i = 0; i < keep.param_table.count; i++)
        if (strncmp(keep.param_table.specs[i].name, "blocks.", 7) == 0) blocks += keep.param_table.specs[i].size;
    const Model *h = &hand_slices[0];
    ck_assert_uint_eq(h->grads_size, total - blocks + blocks / L);
    ck_assert_uint_eq(model_slice_bytes(&hand, true), h->grads_size * sizeof(float));
    ck_assert_uint_eq(model_slice_bytes(&keep, false), total * sizeof(float));
    for (int k = 1; k < n; k++) {
        model_slice_free(&hand_slices[k - 1]);
        model_slice_free(&keep_slices[k - 1]);
    }
    model_free(&hand);
    model_free(&keep);
}
END_TEST

Suite *model_suite(void) {
    Suite *s = suite_create("model");
    TCase *tables = tcase_create("tables");
    tcase_add_test(tables, param_table_lists_every_tensor_contiguously_in_model_h_order);
    tcase_add_test(tables, gpt_param_table_lists_embeddings_then_each_block_then_ln_f_and_no_head);
    tcase_add_loop_test(tables, act_table_sizes_every_activation_for_the_largest_batch, 0, 2);
    tcase_add_test(tables, grad_act_table_holds_one_block_s_gradients_whatever_the_depth);
    tcase_add_test(tables, act_table_does_not_overflow_for_the_longest_context_check_config_allows);
    tcase_add_test(tables, model_init_points_each_view_at_its_table_entry);
    tcase_add_test(tables, gpt_model_init_points_each_block_s_views_at_its_table_entries_and_ties_the_head_to_tok_emb);
    tcase_add_test(tables, check_config_accepts_a_valid_config);
    tcase_add_loop_test(tables, check_config_rejects_bad_sizes_naming_the_flag, 0, 2);
    tcase_add_test(tables, check_config_refuses_gpt_without_layers_and_card_with_more_than_one_naming_layers);
    tcase_add_test(tables, arch_names_are_card_gpt_and_gpt2);
    tcase_add_test(tables, gpt2_param_table_puts_each_bias_after_its_weight_and_q_k_v_s_in_one_view);
    tcase_add_test(tables, check_config_refuses_a_gpt2_with_the_gpt_s_removals_or_swaps);
    tcase_add_test(tables, memory_bytes_is_exactly_what_model_init_allocates);
    tcase_add_test(tables, memory_bytes_saturates_instead_of_overflowing);
    tcase_add_test(tables, check_memory_refuses_a_model_larger_than_memory_naming_its_sizes);
    tcase_add_test(tables, find_nonfinite_names_the_first_tensor_and_element_holding_nan_or_infinity);
    tcase_add_test(tables, find_weight_beyond_also_finds_finite_weights_past_the_bound);
    suite_add_tcase(s, tables);

    TCase *init = tcase_create("init");
    tcase_add_test(init, gpt_init_sets_layernorms_to_one_and_draws_matrices_with_std_0_02_shrunk_at_branch_ends);
    tcase_add_test(init, card_init_draws_embeddings_from_n_0_1_and_linear_layers_within_one_over_sqrt_c);
    tcase_add_test(init, gpt2_init_is_the_gpt_s_weights_with_every_bias_zero);
    suite_add_tcase(s, init);

    TCase *passes = tcase_create("passes");
    // The finite-difference tests run a few thousand tiny forward passes
    // (gpt: about 3400, some 0.2 s); under a sanitizer they are several times
    // slower, past Check's default 4 s.
    tcase_set_timeout(passes, 30);
    tcase_add_loop_test(passes, every_parameter_gradient_matches_finite_differences, 0, 4);
    tcase_add_loop_test(passes, a_gpt_without_some_of_its_parts_has_the_right_gradient, 1, 8);
    tcase_add_loop_test(passes, a_gpt_with_the_modern_recipe_s_swaps_has_the_right_gradient, 0, RECIPE_CASES);
    tcase_add_loop_test(passes, gradients_are_right_for_a_batch_smaller_than_the_maximum, 0, 2);
    tcase_add_loop_test(passes, backward_adds_to_the_parameter_gradients_and_zero_grad_clears_them, 0, 2);
    tcase_add_test(passes, first_loss_is_finite_and_positive);
    tcase_add_test(passes, gpt_first_loss_is_close_to_ln_v);
    tcase_add_loop_test(passes, a_smaller_batch_gives_the_logits_of_a_model_built_for_that_size, 0, 2);
    tcase_add_loop_test(passes, dropout_changes_only_training_and_zero_dropout_changes_nothing, 0, 2);
    tcase_add_loop_test(passes, probs_and_dlogits_written_over_the_logits_are_those_of_separate_buffers, 0, 2);
    tcase_add_loop_test(passes, forward_position_by_position_gives_the_logits_of_a_full_forward_pass, 0, 3);
    tcase_add_test(passes, gpt2_with_zero_biases_and_exact_gelu_computes_the_gpt_bit_for_bit);
    tcase_add_loop_test(passes, forward_position_by_position_with_the_recipe_s_swaps_gives_the_logits_of_a_full_pass, 0,
                        RECIPE_CASES);
    suite_add_tcase(s, passes);

    TCase *training = tcase_create("training");
    // These take about 0.1 s each, but run a few hundred two-thread parallel
    // regions; under a sanitizer on a busy 2-core machine each barrier can
    // wait a scheduler tick, which was seen to take them past Check's 4 s.
    tcase_set_timeout(training, 30);
    tcase_add_loop_test(training, sgd_learns_a_repeating_sequence, 0, 2);
    tcase_add_loop_test(training, the_same_seed_gives_bitwise_identical_losses, 0, 2);
    tcase_add_loop_test(training, one_and_two_threads_give_bitwise_identical_losses, 0, 2);
    tcase_add_loop_test(training, slices_that_hand_their_blocks_gradients_on_leave_the_same_gradients_in_less_memory, 0,
                        6);
    suite_add_tcase(s, training);
    return s;
}
