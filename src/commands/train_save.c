// train_save.c: a training run kept safe: signals, checkpoints and
// numerical faults (see train_save.h).
//
// Reading order: file 34b. From the top: the signal handler, which only
// records the signal; save_checkpoint, which writes a checkpoint whole
// through run_dir.h (and, when the log cannot be flushed, log_failed
// instead); and the checks after each part of a step that stop the run
// when a value has become NaN or infinite.
#include "train_save.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// ---- Stopping on a signal -------------------------------------------------------
// A signal handler may only touch a volatile sig_atomic_t and call
// async-signal-safe functions (write, _exit), so the first SIGINT or SIGTERM
// only records itself and says what will happen; the loop checks after each
// step and saves. A second one exits at once: a checkpoint becomes one only
// when it is whole (run_dir.h), so the last whole one is on disk whatever
// that exit interrupts. SIGPIPE (`train ... | head`, once head has quit)
// stops the run the same way, rather than kill it without a save.

volatile sig_atomic_t stop_signal;  // 0, or the first SIGINT/SIGTERM/SIGPIPE received

static void on_stop_signal(int sig) {
    if (stop_signal) _exit(128 + sig);
    stop_signal = sig;
    static const char msg[] = "\ntinygpt: stopping after this step to save a checkpoint (press Ctrl-C again to quit at once without saving)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;  // nothing to do if stderr is gone
}

// catch_stop_signals: SA_RESTART, so a signal arriving inside fwrite or
// fsync does not make them fail with EINTR.
void catch_stop_signals(void) {
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
double run_seconds(const TrainRun *run) { return run->seconds_before + (now_seconds() - run->clock_start); }

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
void log_failed(const TrainRun *run, long done) {
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
// it. The log goes to disk first (csv_log_sync), so it always has a row
// for every step a checkpoint has seen, a power cut included: if that
// fails, nothing is saved (see log_failed).
// A save that fails stops the run, naming the checkpoint it can continue
// from.
void save_checkpoint(TrainRun *run, long done) {
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
    if (!csv_log_sync(&run->log, &run->fault)) {
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
    const LogMark mark = csv_log_mark(&run->log);  // the log has every row up to here, on disk: synced above
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
bool check_loss(TrainRun *run, long step, float loss) {
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

bool check_tensors(TrainRun *run, long step, const float *memory, const char *kind) {
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
