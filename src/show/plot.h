// plot.h: the loss curves: a bounded loss history, the picture drawn from
// it, and the `tinygpt plot` command that redraws it from a log.csv.
//
// Reading order: after canvas.h (glue code). `train` keeps a LossHistory
// and redraws DIR/loss.png at every evaluation (watch.h); `tinygpt plot
// LOG.csv` reads the same numbers back from the log and draws the same
// picture.
//
// A history never allocates after loss_history_init, however long training
// runs: each curve holds at most SERIES_CAPACITY points, and when it is
// full, neighbouring points are merged in pairs (each point is then the mean
// of twice as many steps). The plot is 800 pixels wide, so 4096 points lose
// nothing visible; the default 3000 steps keep every step.
#ifndef TINYGPT_PLOT_H
#define TINYGPT_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "canvas.h"
#include "common.h"

enum { PLOT_WIDTH = 800, PLOT_HEIGHT = 500 };  // pixels of loss.png
enum { SERIES_CAPACITY = 4096 };              // points per curve; even

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

typedef struct {
    Series train;  // x = step, y = that step's training loss
    Series val;    // x = step, y = validation loss, at evaluated steps only
} LossHistory;

// loss_history_init / loss_history_free: the only allocation and its release.
void loss_history_init(LossHistory *h);
void loss_history_free(LossHistory *h);
// loss_history_add: record one step; "val_loss" is NAN when not evaluated.
// Allocates nothing.
void loss_history_add(LossHistory *h, long step, float train_loss, float val_loss);

// loss_history_read_csv: fill "h" (already initialised) from a log.csv with
// columns step,train_loss,val_loss,... (val_loss empty when not evaluated).
// False with a one-line message naming the file (and line) if it is not one.
bool loss_history_read_csv(LossHistory *h, const char *path, Error *err);

// plot_losses: draw both curves onto "c" (PLOT_WIDTH x PLOT_HEIGHT): axes
// with numbered ticks, step on x, loss on y, and a legend. "source" names
// the run in the title.
void plot_losses(Canvas *c, const LossHistory *h, const char *source);

// cmd_plot: the `tinygpt plot` command.
int cmd_plot(int argc, char **argv);

#endif
