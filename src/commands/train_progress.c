// train_progress.c: what a training run says as it goes (see
// train_progress.h).
//
// Reading order: file 34c. From the top: print_run, the run described as
// it starts (with the CPU's peak, the ceiling of the speed's share);
// note_evaluation and warn_of_overfitting, what an evaluation keeps and
// warns of; recheck_peak, the peak measured again; print_progress, the
// plain progress line.
#include "train_progress.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "fma_peak.h"
#include "flops.h"
#include "train_save.h"
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
void print_run(TrainRun *run) {
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
bool note_evaluation(TrainRun *run, long step, float val) {
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
void warn_of_overfitting(TrainRun *run, long step) {
    const TrainSettings *s = &run->s;
    long evaluations = (step - run->best_step) / s->eval_interval;
    if (s->patience == 0 || evaluations < s->patience || run->warned_overfit) return;
    fprintf(stderr, "tinygpt: validation loss has not improved for %ld evaluations (best %.4f at step %ld, kept in %s/best.safetensors): the model may be learning its training text by heart (more text, more --dropout or a smaller model help), or --lr is too high\n",
            evaluations, (double)run->best_val, run->best_step, s->out_dir);
    run->warned_overfit = true;
}

// recheck_peak: the peak measured again, if it is time (see
// PEAK_RECHECK_INTERVAL), and raised if the new reading is clearly higher;
// a peak given by --peak stands. Only the writer calls it: it prints the
// shares (and made the start's probe).
void recheck_peak(TrainRun *run, long step) {
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
bool print_progress(TrainRun *run, long step, double train_loss, float val_loss, double val_bpb, bool evaluate,
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
