// optimizer_state.c: the optimizer's state, DIR/optimizer.safetensors (see
// checkpoint.h): the model file's container.
//
// Reading order: file 27, after checkpoint.c, whose format check and
// tensor messages it shares. What is its own: the metadata, the names (each
// parameter's, behind "exp_avg." and "exp_avg_sq.", and with Muon
// "momentum_buffer."), and one more check, that exp_avg_sq is never negative.
#include "checkpoint.h"

#include <assert.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

// What the file is called in messages.
#define OPTIMIZER_FILE "optimizer state"

// The names of the state's buffers, torch's (AdamW's two moments, Muon's
// momentum buffer), in the order its file holds them: every
// "exp_avg.<parameter>" (m), then every "exp_avg_sq.<parameter>" (v), of
// the parameters AdamW moves; then, with Muon, every
// "momentum_buffer.<parameter>" of the matrices Muon moves; each in
// parameter-table order.
enum { N_STATE_PREFIXES = 3 };
static const char *const MOMENT_PREFIX[N_STATE_PREFIXES] = {"exp_avg.", "exp_avg_sq.", "momentum_buffer."};

// has_state: whether buffer k (MOMENT_PREFIX[k]) of an optimizer of "kind"
// holds parameter "p": AdamW's moments every parameter AdamW moves (with
// Muon, those Muon does not), Muon's buffer each of its matrices.
static bool has_state(OptimizerKind kind, int k, const TensorSpec *p) {
    const bool muon_moves = kind == OPT_MUON && optimizer_uses_muon(p);
    return k < 2 ? !muon_moves : muon_moves;
}

// state_buffer: where buffer k of "opt" is, laid out as the parameters.
static float *state_buffer(const Optimizer *opt, int k) { return k == 0 ? opt->m : k == 1 ? opt->v : opt->momentum; }

// state_params: the parameters of "params" that buffer k holds, each at its
// offset in the parameters' layout (a view for safetensors_save, not laid
// out anew); the caller frees its specs.
static void state_params(TensorTable *t, const TensorTable *params, OptimizerKind kind, int k) {
    memset(t, 0, sizeof *t);
    t->specs = xmalloc(((size_t)params->count + 1) * sizeof *t->specs);
    for (int i = 0; i < params->count; i++)
        if (has_state(kind, k, &params->specs[i])) t->specs[t->count++] = params->specs[i];
    t->total = params->total;
}

bool optimizer_state_save(const Optimizer *opt, const Model *m, long step, const char *path, Error *err) {
    assert(opt->cfg.kind != OPT_SGD && opt->m && opt->v && opt->size == m->param_table.total);
    assert(step >= 0 && opt->step >= 0);
    Metadata md = {0};
    metadata_set(&md, "format", OPTIMIZER_FORMAT);
    metadata_set(&md, "optimizer", "%s", OPTIMIZER_NAMES[opt->cfg.kind]);
    metadata_set(&md, "step", "%ld", step);
    metadata_set(&md, "updates", "%ld", opt->step);
    const int n_buffers = opt->cfg.kind == OPT_MUON ? 3 : 2;
    TensorTable tables[N_STATE_PREFIXES];
    TensorGroup groups[N_STATE_PREFIXES];
    for (int k = 0; k < n_buffers; k++) {
        state_params(&tables[k], &m->param_table, opt->cfg.kind, k);
        groups[k] = (TensorGroup){MOMENT_PREFIX[k], &tables[k], state_buffer(opt, k)};
    }
    bool ok = safetensors_save(path, &md, groups, n_buffers, err);
    for (int k = 0; k < n_buffers; k++) table_free(&tables[k]);
    metadata_free(&md);
    return ok;
}

// moment_table: the tensors of the state of an optimizer of "kind" for
// parameters "params", as optimizer_state_save writes them (MOMENT_PREFIX's
// order, has_state's parameters), each with its parameter's shape, laid out
// one after another: with AdamW, m then v, 2 * params->total floats.
static void moment_table(TensorTable *t, const TensorTable *params, OptimizerKind kind) {
    memset(t, 0, sizeof *t);
    for (int k = 0; k < (kind == OPT_MUON ? 3 : 2); k++) {
        for (int i = 0; i < params->count; i++) {
            const TensorSpec *p = &params->specs[i];
            if (!has_state(kind, k, p)) continue;
            char name[sizeof p->name];
            int len = snprintf(name, sizeof name, "%s%s", MOMENT_PREFIX[k], p->name);
            assert(len > 0 && (size_t)len < sizeof name);  // the longest, "momentum_buffer.blocks.1023.mlp.down_proj.weight", fits
            table_add(t, name, p->shape[0], p->ndim == 2 ? p->shape[1] : 0, 0);
        }
    }
}

// optimizer_name_problem: a wrong tensor name in AdamW's state.
static bool optimizer_name_problem(SafetensorsFile *st, const char *name, size_t len, bool missing, const void *ctx) {
    const ModelConfig *cfg = ctx;
    Shown shown = show(name, len);
    if (missing)
        return safetensors_reject(st, "tensor '%s' is missing; give the optimizer.safetensors saved with this model",
                                  shown.text);
    return safetensors_reject(st, "it has a tensor '%s', which is not the optimizer's state of this %s model (exp_avg.<parameter> and exp_avg_sq.<parameter> of each parameter AdamW moves, momentum_buffer.<parameter> of each Muon moves); give the optimizer.safetensors saved with this model",
                              shown.text, arch_name(cfg->arch));
}

// read_state_metadata: the format marker, "optimizer" (which must be
// "kind"'s), the training "step" the state belongs to and the number of
// "updates" that made it, both whole numbers >= 0.
static bool read_state_metadata(SafetensorsFile *st, OptimizerKind kind, long *step, long *updates) {
    if (!st->meta)
        return safetensors_reject(st, "its header has no \"__metadata__\" object with the format and the step; was it written by tinygpt train?");
    if (!checkpoint_check_format(st, OPTIMIZER_FORMAT, OPTIMIZER_FORMAT_1)) return false;
    const JsonValue *name = safetensors_meta_string(st, "optimizer");
    if (!name) return false;
    if (!json_string_is(name, OPTIMIZER_NAMES[kind]))
        return safetensors_reject(st, "its __metadata__ \"optimizer\" is \"%s\" but the run trains with \"%s\"; the file is damaged: start a new run from the weights with --init",
                                  show(name->string, name->string_len).text, OPTIMIZER_NAMES[kind]);
    return safetensors_meta_long(st, "step", LONG_MAX, step) && safetensors_meta_long(st, "updates", LONG_MAX, updates);
}

// check_second_moments: every exp_avg_sq value (of "moments", read into
// "memory") is a running mean of squares, so it is >= 0 (-0 included); the
// square root of a negative one would make the next update NaN.
static bool check_second_moments(SafetensorsFile *st, const TensorTable *moments, const float *memory) {
    for (int t = 0; t < moments->count; t++) {
        const TensorSpec *spec = &moments->specs[t];
        if (strncmp(spec->name, MOMENT_PREFIX[1], strlen(MOMENT_PREFIX[1])) != 0) continue;
        const float *v = memory + spec->offset;
        for (size_t i = 0; i < spec->size; i++)
            if (v[i] < 0.0f)
                return safetensors_reject(st, "tensor '%s' holds %g at element %zu, but a mean of squares cannot be negative; the file is damaged: start a new run from the weights with --init",
                                          spec->name, (double)v[i], i);
    }
    return true;
}

// optimizer_state_load: the container's steps against moment_table of m's
// parameters, reading m and v into a buffer of its own (AdamW's moments are
// only checked to be finite: a mean of squared gradients may be large and
// still right); only when all of it has passed are they copied into "opt".
bool optimizer_state_load(Optimizer *opt, const Model *m, const char *path, long *step, Error *err) {
    return optimizer_state_load_stream(opt, m, fopen_checked(path, "rb", err), path, step, err);
}

bool optimizer_state_load_stream(Optimizer *opt, const Model *m, FILE *f, const char *path, long *step, Error *err) {
    assert(opt->cfg.kind != OPT_SGD && opt->m && opt->v && opt->size == m->param_table.total);
    SafetensorsFile st;
    if (!safetensors_open_stream(&st, f, path, OPTIMIZER_FILE, err)) {
        if (!st.f) {  // not there, or not readable
            Error open_err = *err;
            error_set(err, "%s; an --optimizer adamw or muon run saves its state there with each checkpoint: resume a run that has them, or start a new run from the weights with --init",
                      open_err.msg);
        }
        safetensors_close(&st);
        return false;
    }

    long saved_step = 0, updates = 0;
    TensorTable moments = {0};
    float *read = NULL;  // [2 * opt->size] m, then v, as read from the file
    bool ok = read_state_metadata(&st, opt->cfg.kind, &saved_step, &updates);
    if (ok) {
        moment_table(&moments, &m->param_table, opt->cfg.kind);
        TensorExpectations expect = checkpoint_expectations(&m->config, "this model", "give the optimizer.safetensors saved with this model",
                                                 optimizer_name_problem);
        ok = safetensors_check_tensors(&st, &moments, &expect);
    }
    if (ok) {
        read = xmalloc(moments.total * sizeof *read);
        ok = safetensors_read_tensors(&st, &moments, read, FLT_MAX) && check_second_moments(&st, &moments, read);
    }
    if (ok) {  // each tensor from the file's order to its parameter's place
        const float *from = read;
        for (int k = 0; k < (opt->cfg.kind == OPT_MUON ? 3 : 2); k++)
            for (int i = 0; i < m->param_table.count; i++) {
                const TensorSpec *p = &m->param_table.specs[i];
                if (!has_state(opt->cfg.kind, k, p)) continue;
                memcpy(state_buffer(opt, k) + p->offset, from, p->size * sizeof *from);
                from += p->size;
            }
        opt->step = updates;
        if (step) *step = saved_step;
    }
    free(read);
    table_free(&moments);
    safetensors_close(&st);
    return ok;
}
