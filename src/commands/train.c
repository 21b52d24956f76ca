// train.c: the `train` command: the training loop (see train.h).
//
// Reading order: file 35, after train_setup.c, which builds the run this
// file trains, and train_save.c and train_progress.c, the run's
// bookkeeping. From the bottom up: cmd_train sets the run up
// (train_setup), train_loop runs the steps (train_step is one: a batch
// forward and backward, then clip and update) until --steps or the clock
// of --time ends them, measuring the validation loss (validation_loss) and
// printing progress (train_progress.h) on the way, and save_checkpoint
// saves (train_save.h). --resume DIR continues a run exactly where its
// checkpoint left it, and the run directory belongs to one run at a time
// (run_dir.h).
#include "train.h"

#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>

#include "train_progress.h"
#include "train_save.h"
#include "train_setup.h"
#include "watch.h"

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

// What one step did, for its row of log.csv and its progress line.
typedef struct {
    long step;
    bool evaluated;        // a validation loss was measured before the step
    float loss, val_loss;  // val_loss NAN when not evaluated
    double val_bpb;        // NAN likewise
    double lr, seconds, grad_norm;
    long best_step;        // when evaluated: the best validation loss's step so far
    const char *sample;    // the one-line sample, or "" for none
} StepReport;

// log_step: the step's row of log.csv, val_loss, val_bpb and best_step
// empty when it was not evaluated. False (run->fault) if the write failed.
static bool log_step(TrainRun *run, const StepReport *r, double step_tokens) {
    char val[32] = "", bpb[32] = "", best[32] = "", quoted[2 * SAMPLE_LINE_BYTES + 3] = "";
    if (!isnan(r->val_loss)) snprintf(val, sizeof val, "%.6f", (double)r->val_loss);
    if (!isnan(r->val_bpb)) snprintf(bpb, sizeof bpb, "%.6f", r->val_bpb);
    if (r->evaluated) snprintf(best, sizeof best, "%ld", r->best_step);
    if (r->sample[0]) csv_quote(r->sample, quoted, sizeof quoted);
    return csv_log_row(&run->log, &run->fault, "%ld,%.6f,%s,%.9g,%.3f,%.0f,%.9g,%s,%s,%.3f,%s\n", r->step,
                       (double)r->loss, val, r->lr, 1e3 * r->seconds, step_tokens / r->seconds, r->grad_norm, bpb, best,
                       run_seconds(run), quoted);
}

// The steps since the last progress line, whose means it prints.
typedef struct {
    double loss, seconds;
    int steps;
} Interval;

// report_progress: the progress line of the interval that ends with step
// "r", after the warnings an evaluation may bring; log.csv flushed and
// loss.png redrawn with it. False (run->write_failed, or run->fault for
// the log) if stdout or the log could not be written.
static bool report_progress(TrainRun *run, Watch *watch, Interval *interval, const StepReport *r, double step_tokens) {
    watch_clear_line(watch);
    if (r->evaluated) warn_of_overfitting(run, r->step);
    if (r->evaluated) recheck_peak(run, r->step);
    if (!print_progress(run, r->step, interval->loss / interval->steps, r->val_loss, r->val_bpb, r->evaluated,
                        1e3 * interval->seconds / interval->steps, step_tokens * interval->steps / interval->seconds,
                        r->sample))
        run->write_failed = true;
    if (run->write_failed || !csv_log_flush(&run->log, &run->fault)) return false;
    watch_plot(watch);
    *interval = (Interval){0.0, 0.0, 0};
    return true;
}

// stopped_early: the run ends after "done" steps, before its last: a
// signal, --stop-after, or a failed write. It is not finished.
static long stopped_early(TrainRun *run, long done) {
    run->finished = false;
    return done;
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
    Interval interval = {0.0, 0.0, 0};
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
            result = stopped_early(run, step);
            break;
        }
        // The sample: the same draws every time, so only the model changes it.
        char sample[SAMPLE_LINE_BYTES] = "";
        if (run->writer && s->sample_every > 0 && (step % s->sample_every == 0 || last))
            sample_line(&run->preview, &run->tok, s->seed, SAMPLE_LINE_TOKENS, run->preview_scratch, sample,
                        sizeof sample);

        double start = now_seconds();
        StepReport report = {
            .step = step, .evaluated = evaluate, .val_loss = val_loss, .best_step = run->best_step, .sample = sample};
        report.lr = optimizer_lr_timed(&run->optimizer.cfg, step, timed ? fmin(spent / s->time, 1.0) : 0.0);
        if (!train_step(run, step, report.lr, &report.loss, &report.grad_norm)) {
            result = -1;
            break;
        }
        report.seconds = now_seconds() - start;
        run->steps_seconds += report.seconds;

        long done = step + 1;
        report.val_bpb = bits_per_byte(val_loss, run->data.n_tokens - run->data.n_train, run->data.val_bytes);
        watch_step(&watch, step, report.loss, val_loss, report.seconds);
        plotted = false;
        // The step is done, its row is not on disk: stop with a checkpoint.
        if (run->writer && !log_step(run, &report, step_tokens)) {
            result = stopped_early(run, done);
            break;
        }

        interval.loss += report.loss;
        interval.seconds += report.seconds;
        interval.steps++;
        if (run->writer && (evaluate || sample[0] || step % s->log_interval == 0 || last)) {
            if (!report_progress(run, &watch, &interval, &report, step_tokens)) {
                result = stopped_early(run, done);
                break;
            }
            plotted = true;
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
            result = stopped_early(run, done);
            break;
        }
        if (s->save_every > 0 && done % s->save_every == 0) {
            save_checkpoint(run, done);
            if (run->write_failed) {
                result = stopped_early(run, done);
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
