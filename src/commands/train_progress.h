// train_progress.h: what a training run says as it goes: the run described
// as it starts, a progress line every so often, and what each evaluation
// keeps (the best weights) and warns of (overfitting).
//
// Reading order: file 34c, after train_save.h, before train.c, which calls
// it. The progress lines give the losses, the speed as a share of the CPU's
// peak (measured as the run starts, fma_peak.h, and again at evaluations)
// and a line of sample text; log.csv (train_setup.h, LOG_HEADER) keeps the
// same numbers for every step.
#ifndef TINYGPT_TRAIN_PROGRESS_H
#define TINYGPT_TRAIN_PROGRESS_H

#include <stdbool.h>

#include "train_setup.h"

// print_run: what is about to train, on stderr (the model, the data, the
// memory, the optimizer, the speed's ceiling); sets run->flops_per_token
// and run->peak_gflops.
void print_run(TrainRun *run);

// note_evaluation: validation loss "val" at "step"; a new best is saved as
// DIR/best.safetensors. False (with run->fault) if it could not be written.
bool note_evaluation(TrainRun *run, long step, float val);

// warn_of_overfitting: once a run, on stderr, after --patience evaluations
// without a better validation loss.
void warn_of_overfitting(TrainRun *run, long step);

// recheck_peak: the CPU's peak measured again at an evaluation, if it is
// time, and raised if the new reading is clearly higher.
void recheck_peak(TrainRun *run, long step);

// print_progress: step "step"'s progress line on stdout (and its sample,
// if "sample" is not empty); false (with run->fault) if stdout failed.
bool print_progress(TrainRun *run, long step, double train_loss, float val_loss, double val_bpb, bool evaluate,
                    double ms_per_step, double tokens_per_s, const char *sample);

#endif
