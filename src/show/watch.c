// watch.c: the live status line and loss.png while training (see watch.h).
#include "watch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum { BAR_WIDTH = 30 };  // the most columns the progress bar takes
static const double REDRAW_SECONDS = 0.1;  // a redraw costs a write(2): ten a second is plenty for the eye

void watch_format_duration(char *buf, size_t cap, double seconds) {
    long s = seconds > 0 && isfinite(seconds) ? lrint(seconds) : 0;
    if (s >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, "%ld:%02ld", s / 60, s % 60);
}

WatchProgress watch_progress(long done, long first, long total, double elapsed, double budget, double before) {
    long done_here = done - first;  // "elapsed" is the time of these
    WatchProgress p = {total > 0 ? (double)done / (double)total : 1.0,
                       total > 0 && done_here > 0 ? elapsed / (double)done_here * (double)(total - done) : 0.0};
    if (budget > 0) {
        double spent = before + elapsed, time_left = fmax(budget - spent, 0.0);
        p.fraction = total > 0 ? fmax(p.fraction, spent / budget) : spent / budget;
        p.left = total > 0 ? fmin(p.left, time_left) : time_left;
    }
    return p;
}

int watch_format_status(char *buf, size_t cap, int columns, long done, long total, WatchProgress progress,
                        float train_loss, float val_loss, double tokens_per_s, double elapsed) {
    char val[32], spent[32], remaining[32], count[64], numbers[256];
    if (isnan(val_loss)) snprintf(val, sizeof val, "-");
    else snprintf(val, sizeof val, "%.4f", (double)val_loss);
    watch_format_duration(spent, sizeof spent, elapsed);
    watch_format_duration(remaining, sizeof remaining, progress.left);
    if (total > 0) snprintf(count, sizeof count, "%*ld/%ld", snprintf(NULL, 0, "%ld", total), done, total);
    else snprintf(count, sizeof count, "%ld", done);
    int n = snprintf(numbers, sizeof numbers, "%s train %.4f val %s nats/tok %.0f tok/s %s elapsed ETA %s", count,
                     (double)train_loss, val, tokens_per_s, spent, remaining);
    // The numbers come first; the bar gets the columns left over (none on a
    // very narrow terminal), up to BAR_WIDTH.
    int bar_width = columns - 1 - n - 3;
    if (bar_width > BAR_WIDTH) bar_width = BAR_WIDTH;
    char bar[BAR_WIDTH + 4] = "";
    if (bar_width >= 5) {
        int filled = (int)(fmin(fmax(progress.fraction, 0.0), 1.0) * bar_width);
        bar[0] = '[';
        for (int i = 0; i < bar_width; i++) bar[1 + i] = i < filled ? '#' : '-';
        memcpy(bar + 1 + bar_width, "] ", 3);
    }
    n = snprintf(buf, cap, "%s%s", bar, numbers);
    if (n < 0) n = 0;
    if ((size_t)n >= cap) n = (int)cap - 1;
    if (columns > 1 && n > columns - 1) n = columns - 1;  // still too wide: cut, never wrap
    buf[n] = '\0';
    return n;
}

// The terminal's width, so the line can be cut before it wraps (a wrapped
// line cannot be redrawn with "\r").
static int terminal_columns(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

void watch_init(Watch *w, long first_step, long total_steps, double tokens_per_step, const char *out_dir) {
    memset(w, 0, sizeof *w);
    w->live = isatty(STDERR_FILENO);
    w->first_step = first_step;
    w->total_steps = total_steps;
    w->tokens_per_step = tokens_per_step;
    w->start = w->last_draw = now_seconds();
    w->last_val = NAN;
    loss_history_init(&w->history);
    canvas_init(&w->canvas, PLOT_WIDTH, PLOT_HEIGHT);
    snprintf(w->plot_path, sizeof w->plot_path, "%s/loss.png", out_dir);
    snprintf(w->log_path, sizeof w->log_path, "%s/log.csv", out_dir);
    snprintf(w->source, sizeof w->source, "%s", out_dir);
}

void watch_set_budget(Watch *w, double seconds, double seconds_before) {
    w->time_budget = seconds;
    w->seconds_before = seconds_before;
}

void watch_load_log(Watch *w, const char *log_path) {
    Error err;
    if (loss_history_read_csv(&w->history, log_path, &err)) return;
    // It may have read some rows before the bad one: start clean instead.
    loss_history_free(&w->history);
    loss_history_init(&w->history);
    fprintf(stderr, "tinygpt: warning: %s; loss.png shows only the steps from here on\n", err.msg);
}

// draw_status: the status line of step "step" (0-based), in place of the
// one on screen.
static void draw_status(Watch *w, long step) {
    long n = w->steps_done < WATCH_RECENT ? w->steps_done : WATCH_RECENT;
    double recent = 0.0;
    for (long i = 0; i < n; i++) recent += w->recent[i];
    char line[512];
    double tokens_per_s = w->compute_seconds > 0 ? w->tokens_per_step * (double)w->steps_done / w->compute_seconds : 0;
    long done = step + 1;
    double elapsed = now_seconds() - w->start;
    WatchProgress p = watch_progress(done, w->first_step, w->total_steps, elapsed, w->time_budget, w->seconds_before);
    int len = watch_format_status(line + 1, sizeof line - 8, terminal_columns(), done, w->total_steps, p,
                                  (float)(recent / (double)n), w->last_val, tokens_per_s, elapsed);
    // "\r" back to column 0, the line, then "erase to the end of the line"
    // in case the previous one was longer: one write, so it never flickers.
    line[0] = '\r';
    memcpy(line + 1 + len, "\033[K", 4);
    fputs(line, stderr);
    w->line_shown = true;
}

void watch_step(Watch *w, long step, float train_loss, float val_loss, double seconds) {
    loss_history_add(&w->history, step, train_loss, val_loss);
    w->last_step = step;
    w->recent[w->steps_done % WATCH_RECENT] = train_loss;
    w->steps_done++;
    w->compute_seconds += seconds;
    if (!isnan(val_loss)) w->last_val = val_loss;
    if (!w->live) return;
    double now = now_seconds();
    if (!w->line_shown || now - w->last_draw >= REDRAW_SECONDS || step == w->total_steps - 1) {
        w->last_draw = now;
        draw_status(w, step);
    }
}

void watch_clear_line(Watch *w) {
    if (!w->line_shown) return;
    fputs("\r\033[K", stderr);
    w->line_shown = false;
}

// learn_bpb_per_nat: loss.png's axis in bits per byte needs the run's ratio
// of val_bpb to val_loss, which train writes into log.csv, not to the
// watch: read it back from the log, once, as soon as there is a validation
// loss (train has flushed the log's rows before it draws). A log it cannot
// read just leaves the axis out.
static void learn_bpb_per_nat(Watch *w) {
    if (w->history.bpb_per_nat > 0 || w->history.val.n == 0 || w->bpb_looked) return;
    w->bpb_looked = true;
    LossHistory logged;
    loss_history_init(&logged);
    Error err;
    if (loss_history_read_csv(&logged, w->log_path, &err)) w->history.bpb_per_nat = logged.bpb_per_nat;
    loss_history_free(&logged);
}

void watch_plot(Watch *w) {
    if (w->plot_failed) return;
    learn_bpb_per_nat(w);
    plot_losses(&w->canvas, &w->history, w->source);
    Error err;
    if (!canvas_write_png(&w->canvas, w->plot_path, &err)) {
        fprintf(stderr, "tinygpt: warning: %s; training goes on without loss.png\n", err.msg);
        w->plot_failed = true;
    }
}

void watch_free(Watch *w) {
    // The last status line stays on screen, ended by a newline: the run's
    // final state (2000/2000 when it finished), after the last plain line.
    if (w->live && w->steps_done > 0) {
        draw_status(w, w->last_step);
        fputs("\n", stderr);
        w->line_shown = false;
    }
    canvas_free(&w->canvas);
    loss_history_free(&w->history);
}
