// train.c: the `train` command: set a run up from its settings, run the
// training loop, save (see train.h).
//
// Reading order: file 28, after settings.c. The file from the bottom up:
// cmd_train settles the settings (settings.h: flags, --init's or
// --resume's checkpoint, defaults), setup_run builds what the run holds,
// train_loop runs the steps. Besides the loop, what keeps a long run safe:
// Ctrl-C or SIGTERM stops it after the current step with a checkpoint;
// --save-every saves one every N steps; a NaN or infinity stops it before
// it reaches a checkpoint; a log that cannot be written (a full disk) stops
// it with one; --resume DIR continues a run exactly where its checkpoint
// left it; and the run directory belongs to one run at a time (run_dir.h).
#include "train.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "csv_log.h"
#include "data.h"
#include "model.h"
#include "optimizer.h"
#include "run_dir.h"
#include "settings.h"
#include "watch.h"

// Everything one training run holds, built before the first step so the
// steps themselves allocate nothing.
typedef struct {
    TrainSettings s;
    Dataset data;
    Tokenizer tok;
    Model model;
    Model start;            // --init or --resume: the checkpoint's model, for its weights
    Optimizer optimizer;    // the update rule, and AdamW's moments
    int *inputs, *targets;  // [B,T] the current batch
    RunDir dir;             // --out, locked
    CsvLog log;             // <out>/log.csv
    char checkpoint_path[4200];    // <out>/model.safetensors
    char optimizer_path[4200];     // <out>/optimizer.safetensors: AdamW's moments
    char data_absolute[4096];      // the training file's absolute path, for run.json; "" if not UTF-8
    bool run_info_saved;    // run.json is written by this process's first save; it does not change after
    char start_path[4200];         // --resume: DIR/model.safetensors, its --init
    CheckpointHeader resumed;      // --resume: the checkpoint's header, its metadata the run's state
    Metadata run_info;      // --resume: run.json's keys (the settings' data_path may point into it)
    long start_step;        // 0, or the step a resumed run continues from
    Rng batch_rng;          // draws the random batches; saved in checkpoints
    uint64_t data_hash;     // dataset_hash of the text, saved in checkpoints
    long last_saved_step;   // the step of the newest checkpoint on disk, or -1
    Error fault;            // why training stopped early
} TrainRun;

// log.csv's columns: one row per step (README, "train"). lr is the rate the
// step used; grad_norm the gradients' norm before clipping.
// val_bpb is val_loss in bits per byte of text (bits_per_byte, data.h),
// which compares across tokenizers.
#define LOG_HEADER "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb\n"

// ---- Stopping on a signal -------------------------------------------------------
// A signal handler may only touch a volatile sig_atomic_t and call
// async-signal-safe functions (write, _exit), so the first SIGINT or SIGTERM
// only records itself and says what will happen; the loop checks after each
// step and saves. A second one exits at once: checkpoint_save writes a .tmp
// file and renames it only when complete, so the checkpoint on disk is the
// last whole one whatever that exit interrupts.

static volatile sig_atomic_t stop_signal;  // 0, or the first SIGINT/SIGTERM received

static void on_stop_signal(int sig) {
    if (stop_signal) _exit(128 + sig);
    stop_signal = sig;
    static const char msg[] = "\ntinygpt: stopping after this step to save a checkpoint (press Ctrl-C again to quit at once without saving)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;  // nothing to do if stderr is gone
}

// catch_stop_signals: SA_RESTART, so a signal arriving inside fwrite or
// fsync does not make them fail with EINTR.
static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);  // each blocks the other while its handler runs, so the message is written whole
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// ---- Saving -------------------------------------------------------------------

// save_checkpoint: the weights after "done" steps, with the run's settings
// and state (the text's length and fingerprint, the batch stream), to
// <out>/model.safetensors, and run.json beside it. The log is flushed
// first, so it always has a row for every step the checkpoint has seen; if
// that fails, the checkpoint is still saved, and run->log.failed stops the
// run.
static void save_checkpoint(TrainRun *run, long done) {
    Metadata md = {0};
    Error err;
    // run.json first: it belongs to no step. Then AdamW's moments, in their
    // own file; then the model, which names the step. A crash between the
    // two leaves files of different steps, which --resume refuses
    // (load_optimizer_state) rather than mix.
    if (!run->run_info_saved) {
        TrainSettings where = run->s;
        where.data_path = run->data_absolute;  // from any directory
        settings_to_metadata(&where, KEPT_IN_RUN_JSON, &md);
        if (!run_info_save(run->s.out_dir, &md, &err)) die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
        metadata_free(&md);
        run->run_info_saved = true;
    }
    if (run->optimizer.cfg.kind == OPT_ADAMW &&
        !optimizer_state_save(&run->optimizer, &run->model, done, run->optimizer_path, &err))
        die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
    if (!run->log.failed) csv_log_flush(&run->log, &run->fault);

    settings_to_metadata(&run->s, KEPT_IN_RUN, &md);
    metadata_set(&md, "data_tokens", "%zu", run->data.n_tokens);
    metadata_set(&md, "data_hash", "%llu", (unsigned long long)run->data_hash);
    metadata_set(&md, "batch_rng", "%llu", (unsigned long long)run->batch_rng.state);
    bool saved = checkpoint_save_run(&run->model, &run->tok, done, &md, run->checkpoint_path, &err);
    metadata_free(&md);
    if (!saved && run->last_saved_step >= 0)
        die(EXIT_RUNTIME, "%s; training stopped after %ld steps, and the last good checkpoint (after %ld steps) is still '%s'",
            err.msg, done, run->last_saved_step, run->checkpoint_path);
    if (!saved) die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
    run->last_saved_step = done;
}

// ---- Numerical faults -------------------------------------------------------------

// numerical_fault: false, with run->fault saying that training stops at
// "step" because "what" (the loss, a gradient, a weight) is not finite.
// Nothing is saved: those weights are useless, and the last good checkpoint
// stays as it was.
static bool numerical_fault(TrainRun *run, long step, const char *what) {
    char kept[4400];
    if (run->last_saved_step >= 0)
        snprintf(kept, sizeof kept, "the last good checkpoint (saved after %ld steps) is kept: '%s'", run->last_saved_step,
                 run->checkpoint_path);
    else snprintf(kept, sizeof kept, "no checkpoint was saved before it (see --save-every)");
    return error_set(&run->fault, "training diverged at step %ld: %s; nothing was saved, and %s; try a lower --lr (it is %g)",
                     step, what, kept, run->s.lr);
}

// check_loss / check_tensors: after each part of step "step", false (see
// numerical_fault) if a value has become NaN or infinite: the loss (then name
// the first activation that broke), the gradients, the weights after the update.
static bool check_loss(TrainRun *run, long step, float loss) {
    if (isfinite(loss)) return true;
    char what[160];
    size_t element;
    int t = model_find_nonfinite_act(&run->model, &element);
    if (t >= 0)
        snprintf(what, sizeof what, "the loss is %s, and activation '%s' first holds a non-finite value (element %zu)",
                 isnan(loss) ? "NaN" : "infinite", run->model.act_table.specs[t].name, element);
    else snprintf(what, sizeof what, "the loss is %s", isnan(loss) ? "NaN" : "infinite");
    // The first step's loss comes before any update, so --lr has done
    // nothing yet: the weights the run started from (an --init or --resume
    // checkpoint, which passed the loader's checks) are what overflows.
    if (step == run->start_step && run->s.init_path)
        return error_set(&run->fault, "training cannot start: at step %ld, before any update, %s, so the weights of '%s' overflow float arithmetic (--lr is not the cause); nothing was saved: start from another checkpoint",
                         step, what, run->s.init_path);
    return numerical_fault(run, step, what);
}

static bool check_tensors(TrainRun *run, long step, const float *memory, const char *kind) {
    size_t element;
    // The weights are also held within MODEL_MAX_WEIGHT, as the checkpoint
    // loader requires: a run never saves a file it could not load again.
    bool weights = memory == run->model.params_memory;
    int t = weights ? model_find_weight_beyond(&run->model, &element) : model_find_nonfinite(&run->model, memory, &element);
    if (t < 0) return true;
    char what[160];
    const TensorSpec *spec = &run->model.param_table.specs[t];
    float value = memory[spec->offset + element];
    if (isfinite(value))
        snprintf(what, sizeof what, "the %s of '%s' holds %g at element %zu, beyond the %g a weight may have", kind,
                 spec->name, (double)value, element, (double)MODEL_MAX_WEIGHT);
    else snprintf(what, sizeof what, "the %s of '%s' holds %s at element %zu", kind, spec->name,
                  isnan(value) ? "NaN" : "an infinity", element);
    return numerical_fault(run, step, what);
}

// ---- The training loop --------------------------------------------------------------

// The mean loss over "n_batches" fixed windows of the validation split,
// dropout off. The windows are the same at every evaluation, so successive
// values are comparable.
static float validation_loss(TrainRun *run, int B, int T, int n_batches) {
    TokenSpan val_tokens = dataset_val(&run->data);
    double total = 0.0;
    for (int k = 0; k < n_batches; k++) {
        batch_sequential(val_tokens, k, B, T, run->inputs, run->targets);
        total += model_forward(&run->model, run->inputs, run->targets, B, T, false, 0);
    }
    return (float)(total / n_batches);
}

// print_run: what is about to train, on stderr: the model and the data,
// the memory it takes, the optimizer.
static void print_run(const TrainRun *run) {
    const Model *m = &run->model;
    const ModelConfig *cfg = &m->config;
    fprintf(stderr, "model: arch=%s layers=%d%s%s%s V=%d T=%d C=%d heads=%d dropout=%g, %zu parameters; data: %zu train + %zu val tokens (%s tokenizer)\n",
            arch_name(cfg->arch), m->n_layer, cfg->no_layernorm ? " (no layernorm)" : "", cfg->no_mlp ? " (no mlp)" : "",
            cfg->no_residual ? " (no residual)" : "", cfg->vocab_size, cfg->block_size, cfg->n_embd, cfg->n_head,
            (double)cfg->dropout, m->param_table.total, run->data.n_train, run->data.n_tokens - run->data.n_train,
            tokenizer_kind_name(run->tok.kind));
    // Counted in floats (an int, of the model's inputs and targets, is as big).
    double mb = sizeof(float) / 1e6;
    double params = (double)m->param_table.total, acts = (double)m->act_table.total;
    double grad_acts = (double)m->grad_act_table.total;
    double scratch = (double)(m->weight_scratch_size + 2 * (size_t)m->max_batch * cfg->block_size);
    double moments = run->optimizer.m ? 2.0 * params : 0.0;  // AdamW's m and v
    fprintf(stderr, "memory: parameters %.1f MB + gradients %.1f MB + optimizer %.1f MB + activations %.1f MB + activation gradients %.1f MB + scratch %.1f MB = %.1f MB\n",
            params * mb, params * mb, moments * mb, acts * mb, grad_acts * mb, scratch * mb,
            (2.0 * params + moments + acts + grad_acts + scratch) * mb);
    const OptimizerConfig *o = &run->optimizer.cfg;
    fprintf(stderr, "optimizer: %s, lr %g", OPTIMIZER_NAMES[o->kind], o->lr);
    if (o->warmup_steps > 0) fprintf(stderr, " after %ld warmup steps", o->warmup_steps);
    if (o->schedule == LR_COSINE) fprintf(stderr, ", cosine to %g at step %ld", o->min_lr, o->decay_steps);
    if (o->kind == OPT_ADAMW)
        fprintf(stderr, ", betas %g %g, weight decay %g", o->beta1, o->beta2, o->weight_decay);
    fprintf(stderr, o->grad_clip > 0 ? ", gradients clipped at norm %g\n" : ", no clipping\n", o->grad_clip);
}

// train_step: one step: forward, backward, clip, update; false (with
// run->fault) when a value became NaN or infinite. "*loss" and
// "*grad_norm" get what the log records.
static bool train_step(TrainRun *run, long step, double lr, float *loss, double *grad_norm) {
    const int B = run->s.batch, T = run->model.config.block_size;
    uint64_t dropout_key = mix64(mix64((uint64_t)run->s.seed) + (uint64_t)step);
    *loss = model_forward(&run->model, run->inputs, run->targets, B, T, true, dropout_key);
    if (!check_loss(run, step, *loss)) return false;
    model_zero_grad(&run->model);
    model_backward(&run->model);
    if (!check_tensors(run, step, run->model.grads_memory, "gradient")) return false;
    *grad_norm = optimizer_clip_grads(&run->model, run->optimizer.cfg.grad_clip);
    optimizer_step(&run->optimizer, &run->model, lr);
    return check_tensors(run, step, run->model.params_memory, "weight");
}

// train_loop: steps from run->start_step until --steps, or until a signal,
// --stop-after or a failed write to the log (run->log.failed) stops it;
// returns the number of steps done, or -1 (with run->fault) when a value
// became NaN or infinite. A plain progress line at every evaluation, every
// --log-interval steps and at the last step; loss.png redrawn with each, and
// once more at the end if steps were done since.
static long train_loop(TrainRun *run) {
    const TrainSettings *s = &run->s;
    const int B = s->batch, T = run->model.config.block_size;
    const bool has_val = run->data.n_tokens > run->data.n_train;
    print_run(run);
    double interval_loss = 0.0, interval_seconds = 0.0;
    int interval_steps = 0;
    Watch watch;  // the live status line on a terminal, and loss.png (watch.h)
    watch_init(&watch, run->start_step, s->steps, (double)B * T, s->out_dir);
    if (run->log.rows > 0) watch_load_log(&watch, run->log.path);  // a resumed run's plot shows its whole history
    bool plotted = false;   // loss.png shows every step done so far
    long result = s->steps;  // what the loop returns unless it stops early
    for (long step = run->start_step; step < s->steps; step++) {
        bool evaluate = has_val && (step % s->eval_interval == 0 || step == s->steps - 1);
        float val_loss = evaluate ? validation_loss(run, B, T, s->eval_batches) : NAN;

        if (s->order == ORDER_SEQUENTIAL) batch_sequential(dataset_train(&run->data), step, B, T, run->inputs, run->targets);
        else batch_random(dataset_train(&run->data), B, T, &run->batch_rng, run->inputs, run->targets);

        double start = now_seconds();
        const double lr = optimizer_lr(&run->optimizer.cfg, step);
        float loss;
        double grad_norm;
        if (!train_step(run, step, lr, &loss, &grad_norm)) {
            result = -1;
            break;
        }
        double seconds = now_seconds() - start;

        long done = step + 1;
        double val_bpb = bits_per_byte(val_loss, run->data.n_tokens - run->data.n_train, run->data.val_bytes);
        watch_step(&watch, step, loss, val_loss, seconds);
        plotted = false;
        // The step's row; val_loss and val_bpb empty when not evaluated. The
        // step is done, its row is not on disk: stop with a checkpoint.
        char val[32] = "", bpb[32] = "";
        if (!isnan(val_loss)) snprintf(val, sizeof val, "%.6f", (double)val_loss);
        if (!isnan(val_bpb)) snprintf(bpb, sizeof bpb, "%.6f", val_bpb);
        if (!csv_log_row(&run->log, &run->fault, "%ld,%.6f,%s,%.9g,%.3f,%.0f,%.9g,%s\n", step, (double)loss, val, lr,
                         1e3 * seconds, (double)B * T / seconds, grad_norm, bpb)) {
            result = done;
            break;
        }

        interval_loss += loss;
        interval_seconds += seconds;
        interval_steps++;
        if (evaluate || step % s->log_interval == 0 || step == s->steps - 1) {
            watch_clear_line(&watch);
            printf("step %6ld/%ld | train loss %.4f", step, s->steps, interval_loss / interval_steps);
            if (evaluate) printf(" | val loss %.4f (%.3f bits/byte)", (double)val_loss, val_bpb);
            printf(" | %.2f ms/step | %.0f tokens/s\n", 1e3 * interval_seconds / interval_steps,
                   (double)B * T * interval_steps / interval_seconds);
            fflush(stdout);
            if (!csv_log_flush(&run->log, &run->fault)) {
                result = done;
                break;
            }
            watch_plot(&watch);
            plotted = true;
            interval_loss = interval_seconds = 0.0;
            interval_steps = 0;
        }

        if (stop_signal || done == s->stop_after) {
            result = done;
            break;
        }
        if (s->save_every > 0 && done % s->save_every == 0 && done < s->steps) {
            save_checkpoint(run, done);
            if (run->log.failed) {
                result = done;
                break;
            }
        }
    }
    // The picture of the whole run, also of --steps 0 (axes, no curve yet)
    // and of a run stopped between two progress lines. Not after the log
    // failed: the disk is likely full, and the checkpoint matters more.
    if (!plotted && !run->log.failed) watch_plot(&watch);
    watch_free(&watch);
    return result;
}

// ---- Setting the run up -----------------------------------------------------------

// model_config: the model a fresh run builds: the settings' sizes, the
// tokenizer's vocabulary.
static ModelConfig model_config(const TrainSettings *s, int vocab_size) {
    return (ModelConfig){.vocab_size = vocab_size,
                         .block_size = s->context,
                         .n_embd = s->embd,
                         .n_head = s->heads,
                         .dropout = (float)s->dropout,
                         .arch = s->arch,
                         .n_layer = s->arch == ARCH_GPT ? s->layers : 1,
                         .no_layernorm = s->no_layernorm,
                         .no_mlp = s->no_mlp,
                         .no_residual = s->no_residual};
}

// optimizer_config: the settings as the optimizer takes them. The cosine
// decays over the whole run (--steps, also after a resume), as nanoGPT's
// lr_decay_iters = max_iters.
static OptimizerConfig optimizer_config(const TrainSettings *s) {
    return (OptimizerConfig){.kind = s->optimizer,
                             .lr = s->lr,
                             .min_lr = s->min_lr,
                             .beta1 = s->beta1,
                             .beta2 = s->beta2,
                             .weight_decay = s->weight_decay,
                             .grad_clip = s->grad_clip,
                             .schedule = s->lr_schedule,
                             .warmup_steps = s->warmup,
                             .decay_steps = s->steps};
}

// build_model: run->model for "cfg", with gradients, for batches of --batch
// rows, and its first weights: the start checkpoint's, or drawn from --seed;
// a usage error if the sizes are invalid or do not fit in memory.
static void build_model(TrainRun *run, const Command *cmd, const ModelConfig *cfg) {
    Error err;
    if (!model_check_config(cfg, &err)) usage_error(cmd, "%s", err.msg);
    if (!model_check_memory(cfg, run->s.batch, true, &err)) usage_error(cmd, "%s", err.msg);
    model_init(&run->model, cfg, run->s.batch, true);
    if (run->s.init_path) {
        memcpy(run->model.params_memory, run->start.params_memory, run->start.param_table.total * sizeof(float));
        model_free(&run->start);
    } else {
        Rng init_rng;
        rng_init(&init_rng, (uint64_t)run->s.seed);
        model_init_weights(&run->model, &init_rng);
    }
}

// continue_from_state: --resume, once the data is loaded: it must be the
// text the run was trained on; then the batch stream, AdamW's moments and
// the log continue where the checkpoint left them.
static void continue_from_state(TrainRun *run) {
    const Metadata *md = &run->resumed.metadata;
    const char *path = run->s.init_path;
    uint64_t tokens, hash, batch_rng;
    if (!metadata_u64(md, "data_tokens", &tokens) || !metadata_u64(md, "data_hash", &hash) ||
        !metadata_u64(md, "batch_rng", &batch_rng) || batch_rng == 0)
        die(EXIT_RUNTIME, "'%s' is not a valid tinygpt checkpoint: its __metadata__ \"data_tokens\", \"data_hash\" and \"batch_rng\" must be whole numbers below 2^64 (batch_rng not 0); the file is damaged: start a new run from its weights with --init",
            path);
    if (run->data.n_tokens != tokens || run->data_hash != hash)
        die(EXIT_RUNTIME, "'%s' is not the text this run was trained on (%zu tokens; the checkpoint's had %llu, with another fingerprint); give the original file, or start a new run from these weights with --init",
            run->s.data_path, run->data.n_tokens, (unsigned long long)tokens);
    run->batch_rng.state = batch_rng;
    run->last_saved_step = run->start_step;
    Error err;
    long saved_step;
    if (run->optimizer.cfg.kind == OPT_ADAMW) {
        if (!optimizer_state_load(&run->optimizer, &run->model, run->optimizer_path, &saved_step, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
        if (saved_step != run->start_step)
            die(EXIT_RUNTIME, "'%s' holds AdamW's state after step %ld but '%s' holds the weights after step %ld; they must come from the same save, so this run cannot continue exactly: start a new run from the weights with --init",
                run->optimizer_path, saved_step, run->checkpoint_path, run->start_step);
    }
}

// setup_run: the tokenizer and the data (a checkpoint's tokenizer, or one
// built from the text), the model, the optimizer and the batch buffers; then
// the run directory is claimed and the log opened.
static void setup_run(TrainRun *run, const Command *cmd) {
    TrainSettings *s = &run->s;
    Error err;
    TokenizerSpec learn = {s->tokenizer, s->vocab_size};
    if (!dataset_load(&run->data, &run->tok, s->init_path ? NULL : &learn, s->data_path, s->val_fraction, s->context,
                      &err))
        die(EXIT_RUNTIME, "%s", err.msg);
    ModelConfig cfg = s->init_path ? run->start.config : model_config(s, run->tok.vocab_size);
    cfg.dropout = (float)s->dropout;  // with --init, the flag overrides the file's: dropout is not a size
    build_model(run, cmd, &cfg);
    OptimizerConfig ocfg = optimizer_config(s);
    optimizer_init(&run->optimizer, &ocfg, &run->model);
    size_t positions = (size_t)s->batch * s->context;
    run->inputs = xmalloc(positions * sizeof(int));
    run->targets = xmalloc(positions * sizeof(int));
    run->data_hash = dataset_hash(&run->data);
    rng_init(&run->batch_rng, (uint64_t)s->seed ^ 0x5851F42D4C957F2Dull);  // a stream apart from init's
    run->last_saved_step = -1;
    absolute_utf8_path(s->data_path, run->data_absolute, sizeof run->data_absolute);

    // Everything has loaded: the first write into DIR (a resumed run has
    // claimed it already, before reading its checkpoint).
    if (!s->resume_dir) {
        int status = run_dir_claim(&run->dir, s->out_dir, true, s->force, &err);
        if (status == EXIT_USAGE) usage_error(cmd, "%s", err.msg);
        if (status) die(status, "%s", err.msg);
    }
    snprintf(run->checkpoint_path, sizeof run->checkpoint_path, "%s/model.safetensors", s->out_dir);
    snprintf(run->optimizer_path, sizeof run->optimizer_path, "%s/optimizer.safetensors", s->out_dir);
    char log_path[4200];
    snprintf(log_path, sizeof log_path, "%s/log.csv", s->out_dir);
    if (s->resume_dir) continue_from_state(run);
    bool opened = s->resume_dir ? csv_log_continue(&run->log, log_path, LOG_HEADER, run->start_step, &err)
                                : csv_log_create(&run->log, log_path, LOG_HEADER, &err);
    if (!opened) die(EXIT_RUNTIME, "%s", err.msg);
}

// free_run: everything setup_run built. The lock is released as the
// process ends (closing it here would let another train in while this one
// still prints its last words).
static void free_run(TrainRun *run) {
    csv_log_close(&run->log);
    optimizer_free(&run->optimizer);
    free(run->targets);
    free(run->inputs);
    model_free(&run->model);
    dataset_free(&run->data);
    tokenizer_free(&run->tok);
    metadata_free(&run->resumed.metadata);
    metadata_free(&run->run_info);
}

// ---- The settings ------------------------------------------------------------------

// load_start: the checkpoint a run starts from (--init, or --resume's), for
// one row (build_model copies its weights into the model built for
// --batch), and the settings that shape its model: "cmd"'s flags for them
// must agree with it (--init; --resume refused them already).
static void load_start(TrainRun *run, const Command *cmd, const Given *given, Given *from_file) {
    Error err;
    if (!checkpoint_load(run->s.init_path, &run->start, &run->tok, 1, false, NULL, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    Metadata md = {0};
    checkpoint_model_metadata(&md, &run->start.config, run->tok.kind);
    TrainSettings saved = run->s;
    if (!settings_read_kept(&saved, &md, KEPT_IN_MODEL, run->s.init_path, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    settings_take_kept(cmd, &run->s, given, &saved, KEPT_IN_MODEL, true, from_file);
    metadata_free(&md);
}

// resume_settings: with --resume DIR: lock DIR (run_dir_claim), read its
// checkpoint's header and take the run's settings from it, and the
// training file's path from run.json (or, in a run saved before it
// existed, the checkpoint), as if they had been typed again. The flags
// that may change (--steps to train further, ...) do not change the numbers.
static void resume_settings(TrainRun *run, const Command *cmd, const Given *given, Given *from_file) {
    TrainSettings *s = &run->s;
    settings_refuse_on_resume(cmd, given);
    struct stat dir_st;
    if (stat(s->resume_dir, &dir_st) != 0 || !S_ISDIR(dir_st.st_mode))
        die(EXIT_RUNTIME, "--resume '%s' is not a directory; give the --out directory of an earlier run", s->resume_dir);
    s->out_dir = s->resume_dir;
    Error err;
    int status = run_dir_claim(&run->dir, s->out_dir, false, false, &err);
    if (status) die(status, "%s", err.msg);
    char *checkpoint = run->start_path;
    snprintf(checkpoint, sizeof run->start_path, "%s/model.safetensors", s->resume_dir);
    if (!checkpoint_read_header(checkpoint, &run->resumed, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    run->start_step = run->resumed.step;
    if (run_info_read(s->resume_dir, &run->run_info, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    TrainSettings saved = *s;
    if (!settings_read_kept(&saved, &run->resumed.metadata, KEPT_IN_RUN, checkpoint, &err) ||
        !settings_read_kept(&saved, &run->run_info, KEPT_IN_RUN_JSON, checkpoint, &err))
        die(EXIT_RUNTIME, "%s", err.msg);
    settings_take_kept(cmd, s, given, &saved, KEPT_IN_RUN, false, from_file);
    settings_take_kept(cmd, s, given, &saved, KEPT_IN_RUN_JSON, false, from_file);
    // A run saved before run.json existed has the path in its checkpoint.
    const MetadataItem *old_path = metadata_get(&run->resumed.metadata, "data");
    if (!s->data_path && old_path && old_path->value[0] && strlen(old_path->value) == old_path->len)
        s->data_path = old_path->value;
    if (!s->data_path)
        usage_error(cmd, "the run in '%s' does not record its training file; give it: tinygpt train FILE --resume %s",
                    s->resume_dir, s->resume_dir);
    s->init_path = checkpoint;  // the weights, vocabulary, architecture and sizes load as with --init
}

int cmd_train(int argc, char **argv) {
    TrainRun run;
    memset(&run, 0, sizeof run);
    TrainSettings *s = &run.s;
    Flag flags[64];
    Command cmd = {"train", "[FILE]", "Train a GPT (--arch gpt) or the one-block attention model (--arch card) on a UTF-8 text file; writes DIR/model.safetensors, DIR/log.csv, DIR/loss.png and DIR/run.json (and DIR/optimizer.safetensors with AdamW).",
                   "tinygpt train data/moby-dick.txt --out runs/moby --layers 2 --steps 1000", NULL, 0};
    settings_command(&cmd, flags, s);
    Given given, from_file;
    memset(&from_file, 0, sizeof from_file);
    settings_parse(&cmd, argc, argv, s, &given);

    if (s->force && s->resume_dir)
        usage_error(&cmd, "--force starts a new run over the one in --out, and --resume continues one; drop one of them");
    if (s->resume_dir) {
        resume_settings(&run, &cmd, &given, &from_file);
    } else {
        if (!s->data_path) usage_error(&cmd, "missing FILE");
        Error err;
        int status = run_dir_check(&run.dir, s->out_dir, s->force, &err);
        if (status == EXIT_USAGE) usage_error(&cmd, "%s", err.msg);
        if (status) die(status, "%s", err.msg);
    }
    if (s->init_path) load_start(&run, &cmd, &given, &from_file);
    settings_finish(&cmd, s, &given, &from_file);
    if (s->resume_dir && run.start_step >= s->steps)
        usage_error(&cmd, "the run in '%s' is already at step %ld of --steps %ld; give a larger --steps to train further",
                    s->resume_dir, run.start_step, s->steps);
    if (s->threads > 0) omp_set_num_threads(s->threads);

    setup_run(&run, &cmd);
    catch_stop_signals();
    long done = train_loop(&run);
    if (done < 0) {
        fprintf(stderr, "tinygpt: %s\n", run.fault.msg);
        free_run(&run);
        return EXIT_RUNTIME;
    }

    if (run.last_saved_step != done) save_checkpoint(&run, done);
    if (run.log.failed) {
        fprintf(stderr, "tinygpt: %s; training stopped after %ld steps and saved '%s' (the log may lack its last rows); make room, then continue with: tinygpt train --resume %s\n",
                run.fault.msg, done, run.checkpoint_path, s->out_dir);
        free_run(&run);
        return EXIT_RUNTIME;
    }
    if (done < s->steps)
        fprintf(stderr, "stopped after %ld of %ld steps; saved %s; continue with: tinygpt train --resume %s\n", done,
                s->steps, run.checkpoint_path, s->out_dir);
    else fprintf(stderr, "saved %s\n", run.checkpoint_path);
    free_run(&run);
    return stop_signal ? 128 + stop_signal : 0;
}
