// watch.h: what a person watching `tinygpt train` sees besides the plain
// progress lines: a live status line on the terminal and DIR/loss.png.
//
// Reading order: file 30, after plot.h (glue code). train.c calls watch_init (and,
// resuming, watch_load_log) before the first step, watch_step after every
// step, watch_clear_line before printing a plain line, watch_plot after it
// and at the end, and watch_free.
//
// - The status line (only when stderr is a terminal) is redrawn in place
//   with "\r", at most ten times a second:
//     [##########--------------------] 1234/3000 train 1.8734 val 1.9102 nats/tok 52140 tok/s 0:41 elapsed ETA 0:59
//   train is the mean loss of the last WATCH_RECENT steps, val the latest
//   validation loss, both in nats per token, tok/s the average over the
//   steps so far (compute time only, like the plain lines), the ETA assumes
//   the remaining steps take as long as the ones this process has done
//   (evaluations included: after a --resume, the steps since it, which are
//   all its clock has seen). It goes to stderr, so the plain lines on
//   stdout are exactly what they are without a terminal. The count is of
//   steps done, so the last step's line reads 2000/2000; watch_free leaves
//   that last line on screen.
// - loss.png (plot.h) is redrawn whenever train prints a plain line (at
//   every evaluation, every --log-interval steps and at the last step), and
//   at the end: nats per token, and bits per byte on a second axis, whose
//   ratio to nats the watch reads from log.csv's val_bpb once the first
//   validation row is there (train is not asked to pass it on). After a
//   --resume it shows the whole run: watch_load_log reads the earlier steps
//   back from log.csv.
//
// Everything is allocated in watch_init: a training step allocates nothing.
// Drawing loss.png does (stb_image_write's compression buffers), but only at
// evaluations.
#ifndef TINYGPT_WATCH_H
#define TINYGPT_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "canvas.h"
#include "plot.h"

enum { WATCH_RECENT = 100 };  // steps averaged into the status line's train loss

typedef struct {
    bool live;               // stderr is a terminal: draw the status line
    long first_step;         // the step this process started at: 0, or where --resume continued
    long total_steps;        // 0: no limit (a run of --time alone)
    double time_budget;      // --time: the run's seconds, 0 = none (watch_set_budget)
    double seconds_before;   // the seconds of the run before this process (a --resume)
    double tokens_per_step;  // B * T
    double start;            // now_seconds() at watch_init
    double last_draw;        // now_seconds() at the last redraw
    bool line_shown;         // the status line is on screen now
    double compute_seconds;  // sum of the steps' times
    long steps_done;
    long last_step;          // the latest step recorded (0-based)
    float recent[WATCH_RECENT];  // ring of the latest training losses
    float last_val;          // latest validation loss; NAN before the first
    LossHistory history;
    Canvas canvas;           // PLOT_WIDTH x PLOT_HEIGHT, reused for every redraw
    char plot_path[4096];    // DIR/loss.png
    char log_path[4096];     // DIR/log.csv, where the run's bits per byte are
    bool bpb_looked;         // log.csv was read once for them
    char source[256];        // the run's name in the plot's title
    bool plot_failed;        // a write failed once: warned, no more tries
} Watch;

// watch_init: for a run from step "first_step" (0, or a resumed run's) to
// "total_steps", of B*T = "tokens_per_step" tokens a step, writing into
// "out_dir". The status line is on when stderr is a terminal.
void watch_init(Watch *w, long first_step, long total_steps, double tokens_per_step, const char *out_dir);
// watch_set_budget: the run ends after "seconds" of training (--time), of
// which "seconds_before" were spent before this process: the bar and the
// ETA follow the time (or the steps, if they end first).
void watch_set_budget(Watch *w, double seconds, double seconds_before);
// watch_load_log: the steps before "first_step", read from the run's
// log.csv at "log_path", so loss.png shows the whole run. A log it cannot
// read is one warning, and the plot starts at "first_step".
void watch_load_log(Watch *w, const char *log_path);
// watch_step: record step "step" (its loss, its validation loss or NAN, and
// the seconds its forward, backward and update took) and redraw the status
// line if it is due.
void watch_step(Watch *w, long step, float train_loss, float val_loss, double seconds);
// watch_clear_line: erase the status line, so a plain line can be printed.
void watch_clear_line(Watch *w);
// watch_plot: redraw DIR/loss.png from everything recorded so far. A failed
// write prints one warning naming the file and is not retried; training
// goes on.
void watch_plot(Watch *w);
// watch_free: leave the last status line on screen (the step reached, the
// time taken), end it with a newline, and release everything.
void watch_free(Watch *w);

// watch_format_duration: "5:09", or "1:05:09" from an hour on (the status
// line's times; eval's progress line uses it too).
void watch_format_duration(char *buf, size_t cap, double seconds);

// How far a run has come: "fraction" of the way (the bar), "left" seconds
// to go (the ETA).
typedef struct {
    double fraction, left;
} WatchProgress;

// watch_progress: after "done" steps of "total" (0: no limit, a run of
// --time alone), "elapsed" seconds after this process started at step
// "first": by the steps, the remaining ones taking as long as this
// process's did (after a --resume, only its clock counts); with a budget of
// "budget" seconds (--time), of which "before" were spent before this
// process, by whichever of the steps and the time is further along.
WatchProgress watch_progress(long done, long first, long total, double elapsed, double budget, double before);

// watch_format_status: the status line after "done" steps of "total" (0:
// no limit), "elapsed" seconds after this process started, fitted into
// "columns" - 1 characters so it never wraps: the numbers (the losses
// named in their unit, nats per token; the ETA) first, then a progress bar
// as wide as the rest allows. "val_loss" may be NAN. Returns its length.
// ASCII only, so characters are columns.
int watch_format_status(char *buf, size_t cap, int columns, long done, long total, WatchProgress progress,
                        float train_loss, float val_loss, double tokens_per_s, double elapsed);

#endif
