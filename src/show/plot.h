// plot.h: the loss curves: a bounded loss history, read from a log.csv or
// filled step by step, and the pictures drawn from it: one run's curves, or
// the validation curves of several runs on one picture.
//
// Reading order: file 30, after canvas.h (glue code). `train` keeps a LossHistory
// and redraws DIR/loss.png at every evaluation (watch.h); `tinygpt plot
// LOG.csv` (plot_logs.h (file 41), the command) reads the same numbers back
// from the log and draws the same picture; `tinygpt plot A/log.csv B/log.csv
// ...` draws one validation curve per log, against step or against training
// time.
//
// Units. The loss train minimises is in nats per token (a token is a
// character for char models, a piece of text for bpe ones), so one run's
// picture shows its train and validation losses in nats per token, and, on
// a second axis on the right, the same heights in bits per byte of the
// validation text (log.csv's val_bpb is val_loss times a constant of the
// run: its validation tokens over its validation bytes, over ln 2). Runs
// with different tokenizers are compared on bits per byte only: a loss per
// token is a loss per character for one run and per piece of about two
// characters for another.
//
// A history never allocates after loss_history_init, however long training
// runs: each curve holds at most SERIES_CAPACITY points, and when it is
// full, neighbouring points are merged in pairs (each point is then the mean
// of twice as many steps). The plot is 800 pixels wide, so 4096 points lose
// nothing visible; the default gpt run's 2000 steps keep every step, and
// card's 7000 are merged once, into points of 2 steps.
#ifndef TINYGPT_PLOT_H
#define TINYGPT_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "canvas.h"
#include "common.h"

enum { PLOT_WIDTH = 800, PLOT_HEIGHT = 500 };  // pixels of loss.png
enum { SERIES_CAPACITY = 4096 };              // points per curve; even
enum { PLOT_MAX_LOGS = 8 };                   // logs one comparison holds: a colour each

// One point of a curve: the mean of "count" (x, y) samples.
typedef struct {
    double x_sum, y_sum;
    long count;
} SeriesPoint;

typedef struct {
    SeriesPoint *points;  // [SERIES_CAPACITY]
    size_t n;             // points in use; the last may still be filling
    long per_point;       // samples per full point: 1, then 2, 4, ... once full
} Series;

// What a point's x is: the step, or the training seconds so far: the sum of
// the log's ms column over every row up to and including that step's (time
// spent evaluating is not in it). train measures a row's validation loss
// before that step trains, so its point sits one step's time late: a few
// milliseconds, invisible at a plot's scale.
typedef enum { PLOT_X_STEP, PLOT_X_TIME } PlotX;
// PLOT_X_NAMES: "step" and "time", indexed by PlotX, NULL-terminated (plot's --x).
extern const char *const PLOT_X_NAMES[];

// What y is: nats per token, or bits per byte of text. PLOT_UNIT_NAMES:
// "nats" and "bpb", indexed by PlotUnit, NULL-terminated (plot's --unit).
typedef enum { PLOT_NATS, PLOT_BPB } PlotUnit;
extern const char *const PLOT_UNIT_NAMES[];

typedef struct {
    Series train;    // x (see PlotX), y = that step's training loss, nats per token
    Series val;      // x, y = validation loss, nats per token, at evaluated steps only
    Series val_bpb;  // x, y = validation bits per byte (log.csv's val_bpb), where the log has it
    PlotX x;         // what x is: the step after loss_history_init
    bool has_bpb;    // read from a log with a val_bpb column (older logs have none)
    // bits per byte per nat per token of this run's validation text (the
    // val_bpb / val_loss of its rows), for the right-hand axis; 0: unknown.
    double bpb_per_nat;
} LossHistory;

// loss_history_init / loss_history_free: the only allocation and its release.
void loss_history_init(LossHistory *h);
void loss_history_free(LossHistory *h);
// loss_history_add: record one step (h->x must be PLOT_X_STEP); "val_loss"
// is NAN when not evaluated. Allocates nothing.
void loss_history_add(LossHistory *h, long step, float train_loss, float val_loss);

// loss_history_read_csv: fill "h" (already initialised; set h->x first for
// PLOT_X_TIME) from a log.csv whose header names its columns: step,
// train_loss and val_loss (empty when not evaluated) are required, ms only
// for PLOT_X_TIME, val_bpb read when there is one (h->has_bpb, and
// h->bpb_per_nat from the rows that have both), and any other column is
// ignored, wherever each one is. False with a one-line message naming the
// file (and line) if it is not a log, or has no ms column for PLOT_X_TIME.
bool loss_history_read_csv(LossHistory *h, const char *path, Error *err);

// plot_losses: draw both curves onto "c" (PLOT_WIDTH x PLOT_HEIGHT): axes
// with numbered ticks, step (or training time) on x, loss in nats per token
// on y, bits per byte on a second y axis on the right when h->bpb_per_nat
// is known, and a legend. "source" names the run in the title, "loss:
// SOURCE". plot_history: the same picture under a title of the caller's
// ("tinygpt plot --title"), in "unit": PLOT_NATS is plot_losses's picture;
// PLOT_BPB draws the validation bits per byte alone (a log has no training
// bits per byte).
void plot_losses(Canvas *c, const LossHistory *h, const char *source);
void plot_history(Canvas *c, const LossHistory *h, PlotUnit unit, const char *title);

// plot_compare: the validation curves of "n" runs (1..PLOT_MAX_LOGS, all
// read with the same x) onto "c", in "unit" (PLOT_BPB: every run's
// val_bpb, so each must have has_bpb): runs[i] in plot_run_colors[i], a dot
// at each evaluation and lines between them, named labels[i] in the legend,
// under "title". The axes, ticks and legend are plot_losses's.
void plot_compare(Canvas *c, const LossHistory *runs, const char *const *labels, int n, PlotUnit unit,
                  const char *title);
extern const Rgb plot_run_colors[PLOT_MAX_LOGS];

#endif
