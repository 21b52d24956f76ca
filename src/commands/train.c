// train.c: the `train` command: the training loop (see train.h).
//
// Reading order: file 35, after train_setup.c, which builds the run this
// file trains. From the bottom up: cmd_train sets the run up
// (train_setup), train_loop runs the steps (train_step is one) until
// --steps or the clock of --time ends them, printing progress (the losses,
// the speed as a share of the CPU's peak, a line of sample text), and
// save_checkpoint saves. Besides the loop, what keeps a long run safe:
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fma_peak.h"
#include "flops.h"
#include "train_setup.h"
#include "watch.h"

// How long the run's start measures the CPU's peak (fma_peak.h): long
// enough for a steady number (PEAK_WINDOWS windows of 10 ms, about twenty
// of the loop's chunks each), short beside any run worth measuring.
static const double PEAK_PROBE_SECONDS = 0.1;

// The probe only ever reads low, and sometimes much too low: when the host
// pauses one of a virtual machine's CPUs for those 0.1 s (on a 2-core Intel
// Cascade Lake, five starts in some two dozen read one thread's peak, 152 of
// ~300 GFLOP/s), every share of the peak the run then printed was twice the
// truth. So at an evaluation, at least PEAK_RECHECK_INTERVAL seconds after
// the last probe, the run measures again for PEAK_RECHECK_SECONDS (not
// counted in ms/step), and a reading PEAK_RAISE times the peak or more
// replaces it, with a line on stderr: the peak is the best seen, as
// `tinygpt peak` takes the best of its windows.
static const double PEAK_RECHECK_INTERVAL = 10.0, PEAK_RECHECK_SECONDS = 0.02, PEAK_RAISE = 1.1;

// ---- Stopping on a signal -------------------------------------------------------
// A signal handler may only touch a volatile sig_atomic_t and call
// async-signal-safe functions (write, _exit), so the first SIGINT or SIGTERM
// only records itself and says what will happen; the loop checks after each
// step and saves. A second one exits at once: a checkpoint becomes one only
// when it is whole (run_dir.h), so the last whole one is on disk whatever
// that exit interrupts. SIGPIPE (`train ... | head`, once head has quit)
// stops the run the same way, rather than kill it without a save.

static volatile sig_atomic_t stop_signal;  // 0, or the first SIGINT/SIGTERM/SIGPIPE received

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
    sigaddset(&sa.sa_mask, SIGPIPE);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
}

// ---- Saving -------------------------------------------------------------------

// run_seconds: the run's training time so far: the seconds before this
// process (a --resume's checkpoint kept them) and this process's since its
// first step. --time counts it; checkpoints keep it.
static double run_seconds(const TrainRun *run) { return run->seconds_before + (now_seconds() - run->clock_start); }

// last_checkpoint: where the run can continue from, for a message: "the
// last whole checkpoint (after 500 steps) is 'DIR/checkpoint-500'", or that
// there is none yet.
static bool last_checkpoint(const TrainRun *run, char *out, size_t cap) {
    char path[4200];
    long step;
    if (run_dir_latest_checkpoint(run->s.out_dir, path, sizeof path, &step)) {
        snprintf(out, cap, "the last whole checkpoint (saved after %ld steps) is '%s'", step, path);
        return true;
    }
    snprintf(out, cap, "no checkpoint was saved before it (see --save-every)");
    return false;
}

// log_failed: log.csv could not be written (run->fault says why) after
// "done" steps: say so, and that nothing was saved since the last
// checkpoint, whose steps the log holds every row of. Saving the steps since
// would leave a checkpoint whose log lacks rows, which --resume could only
// continue with a log that no longer tells the run's whole story.
static void log_failed(const TrainRun *run, long done) {
    char kept[4400];
    if (last_checkpoint(run, kept, sizeof kept))
        fprintf(stderr, "tinygpt: %s; training stopped after %ld steps without saving them, since the log lacks their rows, and %s; make room, then continue with: tinygpt train --resume %s\n",
                run->fault.msg, done, kept, run->s.out_dir);
    else
        fprintf(stderr, "tinygpt: %s; training stopped after %ld steps without saving them, since the log lacks their rows, and %s; make room, then start again with --force\n",
                run->fault.msg, done, kept);
}

// save_checkpoint: the run after "done" steps, as one checkpoint
// (run_dir.h): DIR/checkpoint-<done> with the model, its settings and
// state (the text's length and fingerprint, the batch stream), AdamW's
// moments and the log's mark (its length and hash, which a resume checks
// it against), made whole before it replaces the last one; run.json beside
// it. The log is flushed first, so it always has a row for every step a
// checkpoint has seen: if that fails, nothing is saved (see log_failed).
// A save that fails stops the run, naming the checkpoint it can continue
// from.
static void save_checkpoint(TrainRun *run, long done) {
    const TrainSettings *s = &run->s;
    if (!run->writer) {  // under mpirun, rank 0 saves for every rank: they hold the same weights
        run->last_saved_step = done;
        return;
    }
    Metadata md = {0};
    Error err;
    // A run the clock has ended counts its whole budget as spent, though
    // its last step may have ended a little before: resuming it is then
    // asking for more time, as resuming a finished run of steps is asking
    // for more steps.
    const double seconds = run->time_up ? fmax(run_seconds(run), s->time) : run_seconds(run);
    if (!csv_log_flush(&run->log, &run->fault)) {
        log_failed(run, done);
        exit(EXIT_RUNTIME);
    }
    // run.json: what the run is, and how far it has come (with --time, in
    // seconds too).
    TrainSettings where = *s;
    where.data_path = run->data_absolute;  // from any directory
    settings_to_metadata(&where, KEPT_IN_RUN_JSON, &md);
    metadata_set(&md, "steps_done", "%ld", done);
    if (s->time > 0) metadata_set(&md, "train_seconds", "%.3f", seconds);
    if (!run_info_save(s->out_dir, &md, &err)) die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
    metadata_free(&md);

    settings_to_metadata(s, KEPT_IN_RUN, &md);
    metadata_set(&md, "data_tokens", "%zu", run->data.n_tokens);
    metadata_set(&md, "data_hash", "%llu", (unsigned long long)run->data_hash);
    metadata_set(&md, "batch_rng", "%llu", (unsigned long long)run->batch_rng.state);
    // The clock, which only --time reads: a run of steps alone stays the
    // same to the byte, however long it took.
    if (s->time > 0) metadata_set(&md, "train_seconds", "%.17g", seconds);
    if (run->best_step >= 0) {
        metadata_set(&md, "best_val_loss", "%.9g", (double)run->best_val);
        metadata_set(&md, "best_step", "%ld", run->best_step);
    }
    char dir[4200], model[4300], optimizer[4300];
    bool ok = run_dir_begin_checkpoint(s->out_dir, done, dir, sizeof dir, &err) == 0;
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    snprintf(optimizer, sizeof optimizer, "%s/optimizer.safetensors", dir);
    ok = ok && (run->optimizer.cfg.kind == OPT_SGD ||
                optimizer_state_save(&run->optimizer, &run->model, done, optimizer, &err));
    ok = ok && checkpoint_save_run(&run->model, &run->tok, done, &md, model, &err);
    const LogMark mark = csv_log_mark(&run->log);  // the log has every row up to here: flushed above
    ok = ok && run_dir_save_log_mark(dir, &mark, &err);
    ok = ok && run_dir_commit_checkpoint(s->out_dir, done, s->keep, &err) == 0;
    metadata_free(&md);
    if (!ok) {
        char kept[4400];
        last_checkpoint(run, kept, sizeof kept);
        die(EXIT_RUNTIME, "%s; training stopped after %ld steps, and %s", err.msg, done, kept);
    }
    run->last_saved_step = done;
}

// ---- Numerical faults -------------------------------------------------------------

// numerical_fault: false, with run->fault saying that training stops at
// "step" because "what" (the loss, a gradient, a weight) is not finite.
// Nothing is saved: those weights are useless, and the last good checkpoint
// stays as it was.
static bool numerical_fault(TrainRun *run, long step, const char *what) {
    char kept[4400];
    last_checkpoint(run, kept, sizeof kept);
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

// slice_of: thread k's slice of the model: the model itself for k = 0.
static Model *slice_of(TrainRun *run, int k) { return k == 0 ? &run->model : &run->slices[k - 1]; }

// model_pass: the model on the first "rows" rows of run->inputs and
// run->targets, the rows "batch_first" onwards of the whole batch; in
// training, forward and backward (unless the loss is not finite), else
// forward alone. Returns the sum of the rows' losses (each row's mean times
// one). On all of this rank's rows with N slices (build_slices), thread j
// runs slice j on its rows/N rows, one team for the whole pass, and a loss
// that is not finite in any slice stops every slice's backward. Otherwise
// the model runs on all the rows, each layer sharing them among the threads.
static double model_pass(TrainRun *run, int rows, bool training, uint64_t dropout_key, size_t batch_first) {
    const int N = rows == run->rows ? run->n_slices : 1, R = rows / N, T = run->model.config.block_size;
    float losses[N];
#pragma omp parallel num_threads(N) if (N > 1)
    {
        const int j = omp_get_thread_num();
        Model *m = slice_of(run, j);
        const size_t at = (size_t)j * R * T;
        m->loss_rows = run->model.loss_rows;
        m->batch_first = batch_first + (size_t)j * R;  // dropout masks: the whole batch's rows
        // Each pass in a team of one of its own: a layer's loop that shares
        // its work among "the threads of the region it is in" (an orphaned
        // `omp for`) must find only this thread there, not the N slices.
#pragma omp parallel num_threads(1)
        losses[j] = model_forward(m, run->inputs + at, run->targets + at, R, T, training, dropout_key);
#pragma omp barrier
        bool finite = true;
        for (int i = 0; i < N; i++) finite = finite && isfinite(losses[i]);
#pragma omp parallel num_threads(1)
        if (training && finite) model_backward(m);
    }
    double sum = 0.0;
    for (int j = 0; j < N; j++) sum += (double)losses[j] * R;
    return sum;
}

// validation_loss: the mean loss per token over windows of the validation
// split, dropout off. Every whole window (T + 1 tokens, laid end to end, as
// `tinygpt eval --split val` lays them) when there are at most
// "n_batches" x B of them, so the number is eval's; else that many, spread
// evenly over the whole split, so it estimates the whole split's loss
// rather than its first pages'. The same windows at every evaluation, so
// successive values are comparable. Under mpirun the windows go in pieces
// of this rank's rows to the ranks in turn, and their sums are added.
static float validation_loss(TrainRun *run, int B, int T, int n_batches) {
    TokenSpan val_tokens = dataset_val(&run->data);
    size_t windows = span_windows(val_tokens, T), most = (size_t)n_batches * (size_t)B;
    size_t chosen = windows < most ? windows : most;
    const size_t R = (size_t)run->rows;  // B with one process
    double total = 0.0;  // the sum of every position's loss
    size_t piece = 0;
    for (size_t first = 0; first < chosen; first += R, piece++) {
        if (piece % (size_t)run->dist.size != (size_t)run->dist.rank) continue;  // another rank's
        int rows = chosen - first < R ? (int)(chosen - first) : (int)R;
        batch_spread(val_tokens, first, rows, chosen, T, run->inputs, run->targets);
        total += model_pass(run, rows, false, 0, 0);
    }
    dist_sum_doubles(&run->dist, &total, 1);
    return (float)(total / (double)chosen);
}

// recipe_text: the modern recipe's swaps "cfg" makes, as " norm=rmsnorm"
// and so on, into "out"; "" for none (every card, the plain gpt).
static const char *recipe_text(const ModelConfig *cfg, char *out, size_t cap) {
    out[0] = '\0';
    if (cfg->norm != NORM_LAYERNORM) snprintf(out + strlen(out), cap - strlen(out), " norm=%s", NORM_NAMES[cfg->norm]);
    if (cfg->mlp != MLP_GELU) snprintf(out + strlen(out), cap - strlen(out), " mlp=%s", MLP_NAMES[cfg->mlp]);
    if (cfg->untied_head) snprintf(out + strlen(out), cap - strlen(out), " untied-head");
    if (cfg->pos != POS_LEARNED) snprintf(out + strlen(out), cap - strlen(out), " pos=%s", POS_NAMES[cfg->pos]);
    if (cfg->qk_norm) snprintf(out + strlen(out), cap - strlen(out), " qk-norm");
    return out;
}

// print_run: what is about to train, on stderr: the model and the data,
// the memory it takes, the optimizer.
static void print_run(TrainRun *run) {
    const Model *m = &run->model;
    const ModelConfig *cfg = &m->config;
    char recipe[128];
    fprintf(stderr, "model: arch=%s layers=%d%s%s%s%s V=%d T=%d C=%d heads=%d dropout=%g, %zu parameters; data: %zu train + %zu val tokens (%s tokenizer)\n",
            arch_name(cfg->arch), m->n_layer, cfg->no_layernorm ? " (no layernorm)" : "", cfg->no_mlp ? " (no mlp)" : "",
            cfg->no_residual ? " (no residual)" : "", recipe_text(cfg, recipe, sizeof recipe), cfg->vocab_size, cfg->block_size, cfg->n_embd, cfg->n_head,
            (double)cfg->dropout, m->param_table.total, run->data.n_train, run->data.n_tokens - run->data.n_train,
            tokenizer_kind_name(run->tok.kind));
    // Counted in floats (an int, of the model's inputs and targets, is as big).
    double mb = sizeof(float) / 1e6;
    // The activations include the batch's inputs and targets, the tokens the model reads first.
    double params = (double)m->param_table.total;
    double acts = (double)m->act_table.total + 2.0 * (double)m->max_batch * cfg->block_size;
    double grad_acts = (double)m->grad_act_table.total;
    double moments = run->optimizer.m ? 2.0 * params : 0.0;  // AdamW's m and v
    // The other threads' slices: each its own gradients.
    double slices = (double)(run->n_slices - 1) * (double)(run->slice_bytes / sizeof(float));
    fprintf(stderr, "memory: parameters %.1f MB + gradients %.1f MB + optimizer %.1f MB + activations %.1f MB + activation gradients %.1f MB",
            params * mb, params * mb, moments * mb, acts * mb, grad_acts * mb);
    if (run->n_slices > 1)
        fprintf(stderr, " + gradients of %d more thread%s %.1f MB (each of %d threads runs the step on %d of the %d rows)",
                run->n_slices - 1, run->n_slices > 2 ? "s" : "", slices * mb, run->n_slices, run->rows / run->n_slices,
                run->rows);
    fprintf(stderr, " = %.1f MB\n", (2.0 * params + moments + acts + grad_acts + slices) * mb);
    const OptimizerConfig *o = &run->optimizer.cfg;
    fprintf(stderr, "optimizer: %s, lr %g", OPTIMIZER_NAMES[o->kind], o->lr);
    if (o->warmup_steps > 0) fprintf(stderr, " after %ld warmup steps", o->warmup_steps);
    const TrainSettings *s = &run->s;
    if (o->schedule == LR_COSINE && s->time > 0 && s->steps == STEPS_NO_LIMIT)
        fprintf(stderr, ", cosine to %g at the end of --time %g s", o->min_lr, s->time);
    else if (o->schedule == LR_COSINE && s->time > 0)
        fprintf(stderr, ", cosine to %g at step %ld or the end of --time %g s, whichever comes first", o->min_lr,
                o->decay_steps, s->time);
    else if (o->schedule == LR_COSINE) fprintf(stderr, ", cosine to %g at step %ld", o->min_lr, o->decay_steps);
    if (o->kind == OPT_MUON)
        fprintf(stderr, " (muon lr %g for the blocks' matrices, momentum %g nesterov)", o->muon_lr, MUON_MOMENTUM);
    if (o->kind == OPT_ADAMW || o->kind == OPT_MUON)
        fprintf(stderr, ", betas %g %g, weight decay %g", o->beta1, o->beta2, o->weight_decay);
    fprintf(stderr, o->grad_clip > 0 ? ", gradients clipped at norm %g\n" : ", no clipping\n", o->grad_clip);
    // The ceiling the progress lines' GFLOP/s are a share of: measured
    // briefly here (`tinygpt peak` measures it longer), on the run's threads,
    // unless --peak gives it (a run of a second or two spends a tenth of it
    // here: sweeps and tests of many short runs give it once).
    run->flops_per_token = model_train_flops_per_token(cfg);
    run->peak_gflops = s->peak > 0 ? s->peak : peak_measure(0, PEAK_PROBE_SECONDS);
    run->peak_measured_at = now_seconds();
    fprintf(stderr, "speed: %.4g MFLOP per token trained (forward and backward); kernels: %s; this CPU's FMA peak on %d threads: %.0f GFLOP/s%s",
            run->flops_per_token / 1e6, KERNEL_PATH, omp_get_max_threads(), run->peak_gflops, s->peak > 0 ? " (--peak)" : "");
    // Under mpirun the run's ceiling is every process's (rank 0's, times N:
    // the machines are taken to be alike).
    if (run->dist.size > 1) {
        run->peak_gflops *= run->dist.size;
        fprintf(stderr, ", x %d processes: %.0f GFLOP/s", run->dist.size, run->peak_gflops);
    }
    fputc('\n', stderr);
}

// note_evaluation: validation loss "val" measured at "step" (the weights
// after that many steps). A new best is kept as DIR/best.safetensors (the
// model alone, for sample and eval), whole or not at all. False (with
// run->fault) if it could not be written.
static bool note_evaluation(TrainRun *run, long step, float val) {
    const TrainSettings *s = &run->s;
    if (val < run->best_val) {
        run->best_val = val;
        run->best_step = step;
        if (!run->writer) return true;
        char path[4200];
        snprintf(path, sizeof path, "%s/best.safetensors", s->out_dir);
        return checkpoint_save(&run->model, &run->tok, step, path, &run->fault);
    }
    return true;
}

// warn_of_overfitting: once a run, after --patience evaluations at "step"
// without a better validation loss than the best's.
static void warn_of_overfitting(TrainRun *run, long step) {
    const TrainSettings *s = &run->s;
    long evaluations = (step - run->best_step) / s->eval_interval;
    if (s->patience == 0 || evaluations < s->patience || run->warned_overfit) return;
    fprintf(stderr, "tinygpt: validation loss has not improved for %ld evaluations (best %.4f at step %ld, kept in %s/best.safetensors): the model may be learning its training text by heart (more text, more --dropout or a smaller model help), or --lr is too high\n",
            evaluations, (double)run->best_val, run->best_step, s->out_dir);
    run->warned_overfit = true;
}

// next_batch: this rank's rows of micro-batch "k" of step "step", into
// run->inputs and run->targets. A step's batch is --batch x --grad-accum
// windows; micro-batch k is the k-th --batch of them, and this rank's rows
// are rows "first" .. first + run->rows - 1 of it: the very windows one
// process drawing the whole step's batch at once has there, so neither
// --grad-accum nor the number of ranks changes which windows a step sees.
static void next_batch(TrainRun *run, long step, int k, int first) {
    const TrainSettings *s = &run->s;
    const int B = s->batch, T = run->model.config.block_size;
    TokenSpan train = dataset_train(&run->data);
    const uint64_t window = ((uint64_t)step * (uint64_t)s->grad_accum + (uint64_t)k) * (uint64_t)B + (uint64_t)first;
    if (s->order == ORDER_SEQUENTIAL) batch_sequential_rows(train, window, run->rows, T, run->inputs, run->targets);
    else if (s->order == ORDER_SHUFFLED)
        batch_shuffled_rows(&run->shuffled, train, window, run->rows, T, run->inputs, run->targets);
    else batch_random_rows(train, B, first, run->rows, T, &run->batch_rng, run->inputs, run->targets);
}

// train_step: one optimizer step: for each of the K = --grad-accum
// micro-batches, this rank's rows forward and backward, each backward
// adding its rows' share of the step's mean loss to the gradients (the
// loss is the mean over all batch x K windows: model.loss_rows); then the
// gradients summed over the ranks (nothing to do with one process), clip,
// update; false (with run->fault) when a value became NaN or infinite.
// "*loss" and "*grad_norm" get what the log records. With K = 1 and one
// process: forward, backward, clip, update, as it always was.
static bool train_step(TrainRun *run, long step, double lr, float *loss, double *grad_norm) {
    const int B = run->s.batch, K = run->s.grad_accum, R = run->rows;
    const int first = run->dist.rank * R;  // this rank's first row of each micro-batch
    uint64_t dropout_key = mix64(mix64((uint64_t)run->s.seed) + (uint64_t)step);
    run->model.loss_rows = (size_t)B * (size_t)K;
    for (int j = 0; j < run->n_slices; j++) model_zero_grad(slice_of(run, j));
    double loss_sum = 0.0;  // this rank's rows' losses: each micro-batch's mean times its rows
    for (int k = 0; k < K; k++) {
        next_batch(run, step, k, first);
        loss_sum += model_pass(run, R, true, dropout_key, (size_t)k * (size_t)B + (size_t)first);
        // A loss that is not finite stops here: check_loss then names the
        // first activation that broke, as this forward left them. The sums
        // below still run, on every rank, so that every rank sees it.
        if (!isfinite(loss_sum)) break;
    }
    for (int j = 1; j < run->n_slices; j++) model_add_grads(&run->model, slice_of(run, j));
    dist_sum_floats(&run->dist, run->model.grads_memory, run->model.param_table.total);
    dist_sum_doubles(&run->dist, &loss_sum, 1);
    *loss = (float)(loss_sum / ((double)B * K));  // with K = 1 and one process, exactly the forward's
    if (!check_loss(run, step, *loss)) return false;
    // The gradients are searched for the tensor to name only when their
    // norm says one broke (optimizer_grad_norm): a pass saved a step.
    *grad_norm = optimizer_grad_norm(&run->model);
    if (!isfinite(*grad_norm) && !check_tensors(run, step, run->model.grads_memory, "gradient")) return false;
    optimizer_scale_grads(&run->model, *grad_norm, run->optimizer.cfg.grad_clip);
    optimizer_step(&run->optimizer, &run->model, lr);
    return check_tensors(run, step, run->model.params_memory, "weight");
}

// recheck_peak: the peak measured again, if it is time (see
// PEAK_RECHECK_INTERVAL), and raised if the new reading is clearly higher;
// a peak given by --peak stands. Only the writer calls it: it prints the
// shares (and made the start's probe).
static void recheck_peak(TrainRun *run, long step) {
    if (run->s.peak > 0 || now_seconds() - run->peak_measured_at < PEAK_RECHECK_INTERVAL) return;
    const double measured = peak_measure(0, PEAK_RECHECK_SECONDS) * run->dist.size;
    run->peak_measured_at = now_seconds();
    if (measured < PEAK_RAISE * run->peak_gflops) return;
    fprintf(stderr, "speed: the FMA peak measured again at step %ld: %.0f GFLOP/s, not the %.0f of before (a CPU was busy or held up then); shares of the peak are of %.0f from here on\n",
            step, measured, run->peak_gflops, measured);
    run->peak_gflops = measured;
}

// print_progress: the plain line of step "step" on stdout, and under it
// the step's sample, if it drew one ("sample" not empty). False (with
// run->fault) if standard output could not be written; a closed pipe is
// SIGPIPE's (a stop, see catch_stop_signals), not a failure.
static bool print_progress(TrainRun *run, long step, double train_loss, float val_loss, double val_bpb, bool evaluate,
                           double ms_per_step, double tokens_per_s, const char *sample) {
    const TrainSettings *s = &run->s;
    if (s->steps == STEPS_NO_LIMIT) printf("step %6ld", step);
    else printf("step %6ld/%ld", step, s->steps);
    printf(" | train loss %.4f", train_loss);
    if (evaluate) printf(" | val loss %.4f (%.3f bits/byte)", (double)val_loss, val_bpb);
    if (evaluate && run->best_step != step) printf(" | best %.4f at step %ld", (double)run->best_val, run->best_step);
    double gflops = tokens_per_s * run->flops_per_token / 1e9;
    printf(" | %.2f ms/step | %.0f tokens/s | %.0f GFLOP/s, %.0f%% of peak", ms_per_step, tokens_per_s, gflops,
           100.0 * gflops / run->peak_gflops);
    if (s->time > 0) {
        char left[32];
        watch_format_duration(left, sizeof left, s->time - run_seconds(run));
        printf(" | %s left", left);
    }
    putchar('\n');
    if (sample[0]) printf("  sample: %s\n", sample);
    if ((fflush(stdout) != 0 || ferror(stdout)) && !stop_signal) {
        error_set(&run->fault, "cannot write to standard output: %s", strerror(errno));
        return false;
    }
    return true;
}

// is_last_step: whether step "step" is the run's last: the last of --steps,
// or, with --time, the one the clock says is: it might end past the budget,
// if it took as long as this process's longest step so far (evaluations
// and saves included). The last step is evaluated and sampled, so the run
// ends on a validation loss of its final weights, give or take that step.
// (At the average pace, one slow step on a busy machine ran past the budget
// before the clock had called any step the last, and the run ended without
// its final evaluation.)
static bool is_last_step(const TrainRun *run, long step, double spent) {
    const TrainSettings *s = &run->s;
    if (step == s->steps - 1) return true;
    if (s->time <= 0 || step == run->start_step) return false;
    return spent + run->longest_step >= s->time;
}

// train_loop: steps from run->start_step until --steps or --time ends the
// run (run->finished), or until a signal, --stop-after or a failed write
// (run->write_failed, run->log.failed) stops it; returns the number of
// steps done, or -1 (with run->fault) when a value became NaN or infinite.
// A plain progress line at every evaluation, every --log-interval steps,
// every --sample-every steps and at the last step; loss.png redrawn with
// each, and once more at the end if steps were done since.
static long train_loop(TrainRun *run) {
    const TrainSettings *s = &run->s;
    const int B = s->batch, T = run->model.config.block_size;
    const double step_tokens = (double)B * s->grad_accum * T;  // the tokens of one optimizer step
    const bool has_val = run->data.n_tokens > run->data.n_train;
    const bool timed = s->time > 0;
    if (run->writer) print_run(run);
    double interval_loss = 0.0, interval_seconds = 0.0;
    int interval_steps = 0;
    Watch watch;  // the live status line on a terminal, and loss.png (watch.h)
    watch_init(&watch, run->start_step, s->steps == STEPS_NO_LIMIT ? 0 : s->steps, step_tokens, s->out_dir);
    if (timed) watch_set_budget(&watch, s->time, run->seconds_before);
    // a resumed run's plot shows its whole history
    if (run->writer && run->log.rows > 0) watch_load_log(&watch, run->log.path);
    bool plotted = false;   // loss.png shows every step done so far
    long result = s->steps;  // what the loop returns unless it stops early
    run->finished = true;    // unless it stops early
    run->clock_start = now_seconds();
    double previous_spent = run_seconds(run);
    for (long step = run->start_step; step < s->steps; step++) {
        const double spent = run_seconds(run);
        run->longest_step = fmax(run->longest_step, spent - previous_spent);
        previous_spent = spent;
        const bool last = dist_rank0_says(&run->dist, is_last_step(run, step, spent));  // every rank's clock differs
        bool evaluate = has_val && (step % s->eval_interval == 0 || last);
        float val_loss = evaluate ? validation_loss(run, B, T, s->eval_batches) : NAN;
        if (evaluate && !note_evaluation(run, step, val_loss)) {
            run->write_failed = true;
            run->finished = false;
            result = step;
            break;
        }
        // The sample: the same draws every time, so only the model changes it.
        char sample[SAMPLE_LINE_BYTES] = "";
        if (run->writer && s->sample_every > 0 && (step % s->sample_every == 0 || last))
            sample_line(&run->preview, &run->tok, s->seed, SAMPLE_LINE_TOKENS, run->preview_scratch, sample,
                        sizeof sample);

        double start = now_seconds();
        const double lr = optimizer_lr_timed(&run->optimizer.cfg, step, timed ? fmin(spent / s->time, 1.0) : 0.0);
        float loss;
        double grad_norm;
        if (!train_step(run, step, lr, &loss, &grad_norm)) {
            result = -1;
            break;
        }
        double seconds = now_seconds() - start;
        run->steps_seconds += seconds;

        long done = step + 1;
        double val_bpb = bits_per_byte(val_loss, run->data.n_tokens - run->data.n_train, run->data.val_bytes);
        watch_step(&watch, step, loss, val_loss, seconds);
        plotted = false;
        // The step's row; val_loss and val_bpb empty when not evaluated. The
        // step is done, its row is not on disk: stop with a checkpoint.
        char val[32] = "", bpb[32] = "", best[32] = "", quoted[2 * SAMPLE_LINE_BYTES + 3] = "";
        if (!isnan(val_loss)) snprintf(val, sizeof val, "%.6f", (double)val_loss);
        if (!isnan(val_bpb)) snprintf(bpb, sizeof bpb, "%.6f", val_bpb);
        if (evaluate) snprintf(best, sizeof best, "%ld", run->best_step);
        if (sample[0]) csv_quote(sample, quoted, sizeof quoted);
        if (run->writer && !csv_log_row(&run->log, &run->fault, "%ld,%.6f,%s,%.9g,%.3f,%.0f,%.9g,%s,%s,%.3f,%s\n", step,
                                        (double)loss, val, lr, 1e3 * seconds, step_tokens / seconds, grad_norm, bpb,
                                        best, run_seconds(run), quoted)) {
            run->finished = false;
            result = done;
            break;
        }

        interval_loss += loss;
        interval_seconds += seconds;
        interval_steps++;
        if (run->writer && (evaluate || sample[0] || step % s->log_interval == 0 || last)) {
            watch_clear_line(&watch);
            if (evaluate) warn_of_overfitting(run, step);
            if (evaluate) recheck_peak(run, step);
            if (!print_progress(run, step, interval_loss / interval_steps, val_loss, val_bpb, evaluate,
                                1e3 * interval_seconds / interval_steps, step_tokens * interval_steps / interval_seconds,
                                sample))
                run->write_failed = true;
            if (run->write_failed || !csv_log_flush(&run->log, &run->fault)) {
                run->finished = false;
                result = done;
                break;
            }
            watch_plot(&watch);
            plotted = true;
            interval_loss = interval_seconds = 0.0;
            interval_steps = 0;
        }

        // The loop's last step, or the clock's: the one it said would be, or
        // one that ran past the budget. Checked before a periodic save, so
        // the checkpoint of a run the clock ended is always the final one
        // (and counts the whole budget spent).
        if (last || (timed && dist_rank0_says(&run->dist, run_seconds(run) >= s->time))) {
            run->time_up = timed && step != s->steps - 1;
            result = done;
            break;
        }
        // A signal may reach the ranks at different steps: they stop
        // together, at the first step any of them has seen one.
        stop_signal = dist_max_int(&run->dist, stop_signal);
        if (stop_signal || done == s->stop_after) {
            run->finished = false;
            result = done;
            break;
        }
        if (s->save_every > 0 && done % s->save_every == 0) {
            save_checkpoint(run, done);
            if (run->write_failed) {
                run->finished = false;
                result = done;
                break;
            }
        }
    }
    // The picture of the whole run, also of --steps 0 (axes, no curve yet)
    // and of a run stopped between two progress lines. Not after the log
    // failed: the disk is likely full, and the checkpoint matters more.
    if (run->writer && !plotted && !run->write_failed && !run->log.failed) watch_plot(&watch);
    run->plot_failed = watch.plot_failed;
    watch_free(&watch);
    return result;
}

// dist_abort_others: under mpirun, rank 0 ends the job after a failed
// write it has reported (and saved, if it could): the other ranks, which
// know nothing of it, would otherwise wait for its next step forever.
static void dist_abort_others(TrainRun *run) {
    if (run->dist.size > 1) dist_abort(&run->dist, EXIT_RUNTIME);
}

// The exit status says how the run ended: 0 when every step ran and was
// saved (a signal during the final save changes nothing), 128 + the signal
// when one cut it short and it saved, 1 when a write failed (it saved if
// it could) or the numbers broke.
int cmd_train(int argc, char **argv) {
    TrainRun run;
    catch_stop_signals();  // before the setup, whose first writes a signal may meet
    train_setup(&run, argc, argv);
    const TrainSettings *s = &run.s;
    long done = train_loop(&run);
    if (done < 0) {
        fprintf(stderr, "tinygpt: %s\n", run.fault.msg);
        train_free(&run);
        return EXIT_RUNTIME;
    }

    if (run.log.failed) {
        log_failed(&run, done);
        dist_abort_others(&run);
        train_free(&run);
        return EXIT_RUNTIME;
    }
    if (run.last_saved_step != done) save_checkpoint(&run, done);
    // Stopped by a closed pipe, or by standard output that cannot be
    // written (a full disk): what stdout still holds cannot go anywhere, and
    // main's check at exit would report again the failure reported below
    // (or call the closed pipe one).
    if (stop_signal == SIGPIPE || run.write_failed) {
        FILE *quiet = freopen("/dev/null", "w", stdout);
        (void)quiet;  // if even that fails, main's check says so
    }
    char saved[4400];
    snprintf(saved, sizeof saved, "%s/checkpoint-%ld (the model: %s)", s->out_dir, done, run.checkpoint_path);
    if (run.write_failed) {
        fprintf(stderr, "tinygpt: %s; training stopped after %ld steps and saved %s; make room, then continue with: tinygpt train --resume %s\n",
                run.fault.msg, done, saved, s->out_dir);
        dist_abort_others(&run);
        train_free(&run);
        return EXIT_RUNTIME;
    }
    if (!run.finished) {
        char of[64] = "";
        if (s->steps != STEPS_NO_LIMIT) snprintf(of, sizeof of, " of %ld", s->steps);
        fprintf(stderr, "stopped after %ld%s steps; saved %s; continue with: tinygpt train --resume %s\n", done, of,
                saved, s->out_dir);
    } else if (s->time > 0) {
        fprintf(stderr, "trained %ld steps in %.1f s of --time %g; saved %s\n", done, run_seconds(&run), s->time, saved);
    } else fprintf(stderr, "saved %s\n", saved);
    // What the processes cost each other: the allreduce's time (which
    // includes waiting for the slowest rank) as a share of the steps'.
    if (run.dist.size > 1 && done > run.start_step)
        fprintf(stderr, "%d processes: the gradients' allreduce took %.2f ms a step, %.1f%% of the steps' %.2f ms\n",
                run.dist.size, 1e3 * run.dist.reduce_seconds / (double)(done - run.start_step),
                100.0 * run.dist.reduce_seconds / run.steps_seconds,
                1e3 * run.steps_seconds / (double)(done - run.start_step));
    train_free(&run);
    // The picture is the one output it trained on without: a failure to
    // write it is still one (the warning above says why).
    if (run.plot_failed) {
        fprintf(stderr, "tinygpt: the run is saved, but %s/loss.png could not be written\n", s->out_dir);
        return EXIT_RUNTIME;
    }
    return stop_signal && !run.finished ? 128 + stop_signal : 0;
}
