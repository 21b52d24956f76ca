// train_save.h: what keeps a long training run safe: a signal that stops
// it after the current step, the checkpoints it saves, and the numerical
// faults that stop it without one.
//
// Reading order: file 34b, after train_setup.h (the run it saves), before
// train_progress.h and train.c, which call it. Ctrl-C or SIGTERM stops the
// run after the current step with a checkpoint; --save-every saves one
// every N steps; a NaN or infinity stops it before it reaches a checkpoint;
// a log that cannot be written (a full disk) stops it with one; and the
// run directory keeps only whole checkpoints (run_dir.h).
#ifndef TINYGPT_TRAIN_SAVE_H
#define TINYGPT_TRAIN_SAVE_H

#include <signal.h>
#include <stdbool.h>

#include "train_setup.h"

// stop_signal: 0, or the first SIGINT, SIGTERM or SIGPIPE received (set by
// the handler catch_stop_signals installs; the loop reads it after each step).
extern volatile sig_atomic_t stop_signal;

// catch_stop_signals: the first SIGINT, SIGTERM or SIGPIPE sets stop_signal
// and says the run will stop after this step; a second exits at once.
void catch_stop_signals(void);

// run_seconds: the run's training time so far, across --resume: what --time
// counts and checkpoints keep.
double run_seconds(const TrainRun *run);

// log_failed: log.csv could not be written after "done" steps: the message
// on stderr, naming the last whole checkpoint (nothing is saved).
void log_failed(const TrainRun *run, long done);

// save_checkpoint: the run after "done" steps as DIR/checkpoint-<done>, and
// run.json; a save that fails stops the process (exit 1).
void save_checkpoint(TrainRun *run, long done);

// check_loss: false (with run->fault) if the loss of step "step" is NaN or
// infinite, naming the first activation that broke.
bool check_loss(TrainRun *run, long step, float loss);

// check_tensors: false (with run->fault) if "memory" (the gradients or the
// weights, named by "kind") holds a non-finite value, or a weight beyond
// MODEL_MAX_WEIGHT.
bool check_tensors(TrainRun *run, long step, const float *memory, const char *kind);

#endif
