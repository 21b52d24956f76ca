// train_setup.h: a training run set up from its settings, ready for its
// first step: what `train` holds while it trains.
//
// Reading order: file 34, after settings.h, before train.c, which runs the
// steps. train_setup settles the run's settings (the command line, then
// --init's or --resume's checkpoint and run.json, then the defaults), then
// builds what the run holds: the tokenizer and the data, the model and its
// first weights, the optimizer, the batch buffers, the claimed run
// directory and its log. A resumed run continues exactly where its
// checkpoint left it: the same text (checked), the batch stream, AdamW's
// moments, the log cut back to the checkpoint's step.
#ifndef TINYGPT_TRAIN_SETUP_H
#define TINYGPT_TRAIN_SETUP_H

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "checkpoint.h"
#include "csv_log.h"
#include "data.h"
#include "dist.h"
#include "model.h"
#include "optimizer.h"
#include "run_dir.h"
#include "sample.h"
#include "settings.h"

// The one-line samples of --sample-every: this many tokens, at most this
// many bytes of text.
enum { SAMPLE_LINE_TOKENS = 64, SAMPLE_LINE_BYTES = 256 };

// Everything one training run holds, built before the first step so the
// steps themselves allocate nothing.
typedef struct {
    Command cmd;            // train's flags (settings_command), for usage errors
    Flag flags[NUM_TRAIN_SETTINGS_MAX];
    TrainSettings s;
    Dist dist;              // the run's processes: 1, or mpirun's N (rank 0 prints and writes)
    bool writer;            // this process prints and writes: rank 0
    int rows;               // this rank's rows of each micro-batch: --batch / N
    Dataset data;
    Tokenizer tok;
    Model model;            // its rows [0, rows / n_slices) are the first slice's
    int n_slices;           // threads that each run the whole step on their rows (build_slices), or 1
    Model *slices;          // [n_slices - 1] the other threads' slices of model (model.h)
    size_t slice_bytes;     // what each of those owns (model_slice_bytes)
    Model start;            // --init or --resume: the checkpoint's model, for its weights
    Optimizer optimizer;    // the update rule, and AdamW's moments
    int *inputs, *targets;  // [rows,T] this rank's part of the current micro-batch
    RunDir dir;             // --out, locked
    CsvLog log;             // <out>/log.csv
    char checkpoint_path[4200];    // <out>/model.safetensors: the newest checkpoint's model (run_dir.h)
    char data_absolute[4096];      // the training file's absolute path, for run.json; "" if not UTF-8
    char init_file[4200];          // --init of a run directory: its model.safetensors (run_model_path)
    char resume_dir[4200];         // --resume DIR/checkpoint-<step>: DIR, the run's directory
    long resume_step;              // that <step>; -1 for --resume DIR (its newest checkpoint)
    struct {                       // --resume: the files it reads, as rank 0 found them in DIR
        char checkpoint[4200];     // the checkpoint it continues from (DIR itself for a run from before checkpoint directories)
        char model[4300];          // the checkpoint's model, its --init
        char optimizer[4300];      // AdamW's or Muon's state beside it
        char run_info[4300];       // DIR/run.json, or "" for a run saved before run.json existed
    } resume_files;
    CheckpointHeader resumed;      // --resume: the checkpoint's header, its metadata the run's state
    Metadata run_info;      // --resume: run.json's keys (the settings' data_path may point into it)
    long start_step;        // 0, or the step a resumed run continues from
    double seconds_before;  // the run's training seconds before this process (--resume), for --time
    double clock_start;     // now_seconds() as this process's first step began
    double steps_seconds;   // this process's time in train_step (no evaluations or saves), for the allreduce's share
    double longest_step;    // this process's longest step so far, evaluation, sample, log and save included, for --time
    Rng batch_rng;          // draws the random batches; saved in checkpoints
    ShuffledOrder shuffled; // --order shuffled: the windows' order, a function of the seed and the window (not saved)
    uint64_t data_hash;     // dataset_hash of the text, saved in checkpoints
    long last_saved_step;   // the step of the newest checkpoint on disk, or -1
    double flops_per_token; // a training step's FLOPs per token (flops.h), for the speed as a share of the peak
    double peak_gflops;     // this CPU's FMA peak on the run's threads: --peak, or measured as the run starts (fma_peak.h) and raised if a later check reads clearly higher
    double peak_measured_at; // now_seconds() of its last measurement
    Generator preview;      // the one-line samples of --sample-every, on run->model (no cache)
    float *preview_scratch; // [2V] sample_token's
    float best_val;         // the lowest validation loss so far (INFINITY before the first); kept in checkpoints
    long best_step;         // the step it was measured at (-1 before): DIR/best.safetensors holds those weights
    bool finished;          // the loop ran every step, or the --time budget out (not stopped early)
    bool time_up;           // the clock of --time ended the loop (its checkpoint counts the whole budget spent)
    bool warned_overfit;    // the warning that validation stopped improving was given (once a run)
    bool plot_failed;       // loss.png could not be written: the run goes on, and exits 1
    bool write_failed;      // standard output could not be written: stop, save, exit 1 (a failed log.csv: CsvLog.failed)
    Error fault;            // why training stopped early
} TrainRun;

// log.csv's columns: one row per step (docs/training.md, "What it prints,
// and log.csv"). lr is the rate the step used; grad_norm the gradients'
// norm before clipping.
// val_bpb is val_loss in bits per byte of text (bits_per_byte, data.h),
// which compares across tokenizers.
// best_step, on the rows of an evaluation, is the step of the best
// validation loss so far: when it stays behind, validation has stopped
// improving (see --patience).
// seconds is the run's training time when the step ended (all of it,
// evaluations and saves included, as --time counts it; across --resume).
// sample, on the rows of a --sample-every step, is the one-line sample
// printed there, quoted as CSV quotes text.
#define LOG_HEADER "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb,best_step,seconds,sample\n"

// train_setup: the run of "argv" (argv[0] is "train"), ready for its first
// step; a usage error exits 2, anything else that stops it exits 1, each
// with one line saying why.
void train_setup(TrainRun *run, int argc, char **argv);

// train_model_config: the model a fresh run of settings "s" builds: their
// architecture, parts and sizes, and the tokenizer's "vocab_size"
// (`tinygpt gradcheck` checks the model it gives).
ModelConfig train_model_config(const TrainSettings *s, int vocab_size);

// train_free: everything train_setup built. The lock is released as the
// process ends (closing it here would let another train in while this one
// still prints its last words).
void train_free(TrainRun *run);

#endif
