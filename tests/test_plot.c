// test_plot.c: tests for src/show/plot.c and for `tinygpt plot`
// (src/commands/plot_logs.c): the bounded loss history (every step kept
// until it is full, then neighbours merged into their means), reading a
// log.csv with and without validation rows, its columns found by name, with
// x the step or the training time so far, refusing what is not one with a
// message naming the file, a comparison drawing each run in its own colour,
// and `tinygpt plot` writing a PNG of the stated size for one log or
// several, or failing in one line with exit status 1 (2 for usage). Units:
// val_bpb read when the log has it, every picture naming its unit on its
// axes (one run in nats per token with bits per byte on the right; several
// compared in bits per byte, or in nats per token, said on stderr, when a
// log is too old to have val_bpb).
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "pictures.h"
#include "plot.h"
#include "tests.h"

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

static double px(const SeriesPoint *p) { return p->x_sum / (double)p->count; }
static double py(const SeriesPoint *p) { return p->y_sum / (double)p->count; }

// A log like train's: "steps" rows, validation every "every" steps (0: never).
static void write_log(const char *path, int steps, int every) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "step,train_loss,val_loss,lr,ms,tokens_per_s\n");
    for (int s = 0; s < steps; s++) {
        fprintf(f, "%d,%.6f,", s, 4.0 / (1.0 + 0.01 * s));
        if (every > 0 && (s % every == 0 || s == steps - 1)) fprintf(f, "%.6f", 4.2 / (1.0 + 0.01 * s));
        fprintf(f, ",0.5,1.234,50000\n");
    }
    fclose(f);
}

// A log like today's train writes: write_log's, with a val_bpb column of
// "bpb_per_nat" times each validation loss (empty where val_loss is).
static void write_bpb_log(const char *path, int steps, int every, double bpb_per_nat) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb\n");
    for (int s = 0; s < steps; s++) {
        double val = 4.2 / (1.0 + 0.01 * s);
        bool evaluated = s % every == 0 || s == steps - 1;
        fprintf(f, "%d,%.6f,", s, 4.0 / (1.0 + 0.01 * s));
        if (evaluated) fprintf(f, "%.6f", val);
        fprintf(f, ",0.5,1.234,50000,0.7,");
        if (evaluated) fprintf(f, "%.6f", val * bpb_per_nat);
        fprintf(f, "\n");
    }
    fclose(f);
}

START_TEST(the_history_keeps_every_step_until_it_is_full) {
    LossHistory h;
    loss_history_init(&h);
    for (int s = 0; s < SERIES_CAPACITY; s++) loss_history_add(&h, s, (float)s, s % 10 == 0 ? 1.0f : NAN);
    ck_assert_uint_eq(h.train.n, SERIES_CAPACITY);
    ck_assert_int_eq(h.train.per_point, 1);
    ck_assert_uint_eq(h.val.n, SERIES_CAPACITY / 10 + 1);  // NAN means "not evaluated": no point
    for (size_t i = 0; i < h.train.n; i++) {
        ck_assert_double_eq(px(&h.train.points[i]), (double)i);
        ck_assert_double_eq(py(&h.train.points[i]), (double)i);
    }
    loss_history_free(&h);
}
END_TEST

START_TEST(a_full_history_merges_neighbours_into_their_means) {
    LossHistory h;
    loss_history_init(&h);
    // 2.5 capacities of steps whose loss equals the step: after two merges
    // every point holds 4 consecutive steps, and their mean is the mean step.
    const long steps = SERIES_CAPACITY * 5L / 2;
    for (long s = 0; s < steps; s++) loss_history_add(&h, s, (float)s, NAN);
    ck_assert_int_eq(h.train.per_point, 4);
    ck_assert_uint_le(h.train.n, SERIES_CAPACITY);
    long total = 0;
    for (size_t i = 0; i < h.train.n; i++) {
        const SeriesPoint *p = &h.train.points[i];
        total += p->count;
        double first = (double)(i * 4);  // each full point: steps 4i .. 4i+3
        ck_assert_double_eq_tol(px(p), first + (p->count - 1) / 2.0, 1e-9);
        ck_assert_double_eq_tol(py(p), px(p), 1e-3);
    }
    ck_assert_int_eq(total, steps);  // no step lost or counted twice
    loss_history_free(&h);
}
END_TEST

START_TEST(losses_that_are_not_finite_are_left_out_of_the_history) {
    LossHistory h;
    loss_history_init(&h);
    loss_history_add(&h, 0, 3.0f, NAN);
    loss_history_add(&h, 1, NAN, INFINITY);
    loss_history_add(&h, 2, INFINITY, NAN);
    ck_assert_uint_eq(h.train.n, 1);
    ck_assert_uint_eq(h.val.n, 0);
    loss_history_free(&h);
}
END_TEST

START_TEST(reading_a_log_with_validation_rows_gives_both_curves) {
    write_log(path_in(dir, "log.csv"), 95, 10);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "log.csv"), &err), "%s", err.msg);
    ck_assert_uint_eq(h.train.n, 95);
    ck_assert_uint_eq(h.val.n, 11);  // steps 0, 10, ..., 90 and the last, 94
    ck_assert_double_eq(px(&h.val.points[10]), 94.0);
    ck_assert_double_eq_tol(py(&h.val.points[10]), 4.2 / 1.94, 1e-6);
    ck_assert_double_eq_tol(py(&h.train.points[50]), 4.0 / 1.5, 1e-6);
    loss_history_free(&h);
}
END_TEST

START_TEST(reading_a_log_without_validation_rows_gives_only_the_train_curve) {
    write_log(path_in(dir, "log.csv"), 30, 0);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "log.csv"), &err), "%s", err.msg);
    ck_assert_uint_eq(h.train.n, 30);
    ck_assert_uint_eq(h.val.n, 0);
    loss_history_free(&h);
}
END_TEST

START_TEST(a_file_that_is_not_a_log_is_refused_naming_the_file) {
    const struct {
        const char *name, *text, *must_mention;
    } cases[] = {
        {"empty.csv", "", "first line"},
        {"header.csv", "a,b,c\n1,2,3\n", "first line"},
        {"no_rows.csv", "step,train_loss,val_loss,lr,ms,tokens_per_s\n", "no rows"},
        {"bad_step.csv", "step,train_loss,val_loss,lr,ms,tokens_per_s\n0,1.5,,0.5,1,1\nx,1.4,,0.5,1,1\n", "line 3"},
        {"bad_loss.csv", "step,train_loss,val_loss,lr,ms,tokens_per_s\n0,abc,,0.5,1,1\n", "line 2"},
        {"bad_val.csv", "step,train_loss,val_loss,lr,ms,tokens_per_s\n0,1.5,2.5x,0.5,1,1\n", "line 2"},
        {"short_row.csv", "step,train_loss,val_loss\n0\n", "line 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text_file(path_in(dir, cases[i].name), cases[i].text);
        LossHistory h;
        loss_history_init(&h);
        Error err = {{0}};
        ck_assert_msg(!loss_history_read_csv(&h, path_in(dir, cases[i].name), &err), "%s was accepted", cases[i].name);
        ck_assert_msg(strstr(err.msg, cases[i].name) != NULL, "%s: message does not name the file: %s",
                      cases[i].name, err.msg);
        ck_assert_msg(strstr(err.msg, cases[i].must_mention) != NULL, "%s: message does not say '%s': %s",
                      cases[i].name, cases[i].must_mention, err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        loss_history_free(&h);
    }
    Error err = {{0}};
    LossHistory h;
    loss_history_init(&h);
    ck_assert(!loss_history_read_csv(&h, path_in(dir, "missing.csv"), &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "missing.csv"));
    loss_history_free(&h);
}
END_TEST

START_TEST(a_log_with_val_bpb_gives_the_bits_per_byte_curve_and_their_ratio_to_nats) {
    write_bpb_log(path_in(dir, "log.csv"), 95, 10, 0.75);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "log.csv"), &err), "%s", err.msg);
    ck_assert(h.has_bpb);
    ck_assert_uint_eq(h.val_bpb.n, 11);  // where val_loss is: steps 0, 10, ..., 90 and 94
    ck_assert_double_eq(px(&h.val_bpb.points[10]), 94.0);
    ck_assert_double_eq_tol(py(&h.val_bpb.points[10]), 0.75 * 4.2 / 1.94, 1e-6);
    ck_assert_double_eq_tol(h.bpb_per_nat, 0.75, 1e-6);
    loss_history_free(&h);
    // A log from before val_bpb: no column, no curve, no ratio.
    write_log(path_in(dir, "old.csv"), 30, 10);
    loss_history_init(&h);
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "old.csv"), &err), "%s", err.msg);
    ck_assert(!h.has_bpb);
    ck_assert_uint_eq(h.val_bpb.n, 0);
    ck_assert(h.bpb_per_nat == 0.0);
    loss_history_free(&h);
    // A val_bpb that is not a number is named, with its line.
    write_text_file(path_in(dir, "bad_bpb.csv"), "step,train_loss,val_loss,val_bpb\n0,1.5,1.6,2.3\n1,1.4,1.5,x\n");
    loss_history_init(&h);
    ck_assert(!loss_history_read_csv(&h, path_in(dir, "bad_bpb.csv"), &err));
    ck_assert_msg(strstr(err.msg, "'") && strstr(err.msg, "bad_bpb.csv' line 3 has no valid val_bpb"), "%s", err.msg);
    loss_history_free(&h);
}
END_TEST

// What a picture's axes say. Text is drawn at scale 2 (14-pixel capitals).
static bool shows(const Canvas *c, const char *text) { return canvas_shows_text(c, text, 2); }

START_TEST(one_run_is_drawn_in_nats_per_token_with_bits_per_byte_on_the_right) {
    write_bpb_log(path_in(dir, "log.csv"), 95, 10, 0.75);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "log.csv"), &err), "%s", err.msg);
    Canvas c;
    canvas_init(&c, PLOT_WIDTH, PLOT_HEIGHT);
    plot_losses(&c, &h, "run");
    ck_assert_msg(shows(&c, "loss (nats per token)"), "the y axis does not say nats per token");
    ck_assert_msg(shows(&c, "validation bits per byte"), "no axis in bits per byte");
    ck_assert_msg(!shows(&c, "nats per character"), "a token is not always a character");
    // The text search finds only what is there.
    ck_assert(!shows(&c, "loss (bits per token)"));
    // In bits per byte: the validation curve alone, on one axis named so.
    plot_history(&c, &h, PLOT_BPB, "run");
    ck_assert(shows(&c, "validation bits per byte"));
    ck_assert(!shows(&c, "nats per token"));
    loss_history_free(&h);
    // Without val_bpb (an older log), no second axis.
    write_log(path_in(dir, "old.csv"), 30, 10);
    loss_history_init(&h);
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "old.csv"), &err), "%s", err.msg);
    plot_losses(&c, &h, "old");
    ck_assert(shows(&c, "loss (nats per token)"));
    ck_assert(!shows(&c, "bits per byte"));
    canvas_free(&c);
    loss_history_free(&h);
}
END_TEST

START_TEST(windows_line_ends_are_accepted) {
    write_text_file(path_in(dir, "crlf.csv"),
                    "step,train_loss,val_loss,lr,ms,tokens_per_s\r\n0,1.5,1.6,0.5,1,1\r\n1,1.4,,0.5,1,1\r\n");
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "crlf.csv"), &err), "%s", err.msg);
    ck_assert_uint_eq(h.train.n, 2);
    ck_assert_uint_eq(h.val.n, 1);
    loss_history_free(&h);
}
END_TEST

// A log like a later train's: columns in another order and an extra one at
// the end, step s taking ms_per_step * (s + 1) ms, validation every
// "every" steps and at the last; "rate" sets how fast the loss falls.
static void write_timed_log(const char *path, int steps, int every, double ms_per_step, double rate) {
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "step,lr,ms,train_loss,val_loss,tokens_per_s,grad_norm\n");
    for (int s = 0; s < steps; s++) {
        fprintf(f, "%d,0.5,%.3f,%.6f,", s, ms_per_step * (s + 1), 4.0 / (1.0 + rate * s));
        if (s % every == 0 || s == steps - 1) fprintf(f, "%.6f", 4.2 / (1.0 + rate * s));
        fprintf(f, ",50000,1.25\n");
    }
    fclose(f);
}

START_TEST(columns_are_found_by_their_names_in_the_header) {
    write_timed_log(path_in(dir, "log.csv"), 25, 10, 2.0, 0.01);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "log.csv"), &err), "%s", err.msg);
    ck_assert_uint_eq(h.train.n, 25);
    ck_assert_uint_eq(h.val.n, 4);  // steps 0, 10, 20 and the last, 24
    const double val_steps[4] = {0, 10, 20, 24};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_double_eq(px(&h.val.points[i]), val_steps[i]);
        ck_assert_double_eq_tol(py(&h.val.points[i]), 4.2 / (1.0 + 0.01 * val_steps[i]), 1e-6);
    }
    ck_assert_double_eq_tol(py(&h.train.points[7]), 4.0 / 1.07, 1e-6);
    loss_history_free(&h);
}
END_TEST

START_TEST(time_x_is_the_sum_of_ms_up_to_and_including_each_step) {
    write_timed_log(path_in(dir, "log.csv"), 25, 10, 2.0, 0.01);
    LossHistory h;
    loss_history_init(&h);
    h.x = PLOT_X_TIME;
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, path_in(dir, "log.csv"), &err), "%s", err.msg);
    // Step s took 2 (s + 1) ms, so steps 0..s took (s + 1)(s + 2) ms.
    const double val_steps[4] = {0, 10, 20, 24};
    ck_assert_uint_eq(h.val.n, 4);
    for (size_t i = 0; i < 4; i++) {
        double s = val_steps[i], seconds = (s + 1) * (s + 2) / 1e3;
        ck_assert_double_eq_tol(px(&h.val.points[i]), seconds, 1e-9);
        ck_assert_double_eq_tol(py(&h.val.points[i]), 4.2 / (1.0 + 0.01 * s), 1e-6);
    }
    ck_assert_uint_eq(h.train.n, 25);
    ck_assert_double_eq_tol(px(&h.train.points[24]), 25 * 26 / 1e3, 1e-9);
    loss_history_free(&h);
}
END_TEST

START_TEST(time_x_needs_an_ms_column_holding_durations) {
    const struct {
        const char *name, *text, *must_mention;
    } cases[] = {
        {"no_ms.csv", "step,train_loss,val_loss\n0,1.5,1.6\n", "no ms column"},
        {"bad_ms.csv", "step,train_loss,val_loss,ms\n0,1.5,1.6,3\n1,1.4,,fast\n", "line 3 has no valid ms"},
        {"empty_ms.csv", "step,train_loss,val_loss,ms\n0,1.5,1.6,\n", "line 2 has no valid ms"},
        {"negative_ms.csv", "step,train_loss,val_loss,ms\n0,1.5,1.6,-2\n", "line 2 has no valid ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_text_file(path_in(dir, cases[i].name), cases[i].text);
        LossHistory h;
        loss_history_init(&h);
        h.x = PLOT_X_TIME;
        Error err = {{0}};
        ck_assert_msg(!loss_history_read_csv(&h, path_in(dir, cases[i].name), &err), "%s was accepted", cases[i].name);
        ck_assert_msg(strstr(err.msg, cases[i].name) != NULL, "does not name the file: %s", err.msg);
        ck_assert_msg(strstr(err.msg, cases[i].must_mention) != NULL, "%s: message does not say '%s': %s",
                      cases[i].name, cases[i].must_mention, err.msg);
        ck_assert_ptr_null(strchr(err.msg, '\n'));
        loss_history_free(&h);
        // Against the step, the ms column is not read at all.
        loss_history_init(&h);
        ck_assert_msg(loss_history_read_csv(&h, path_in(dir, cases[i].name), &err), "%s", err.msg);
        loss_history_free(&h);
    }
}
END_TEST

// count_color: pixels of "c" exactly "color".
static long count_color(const Canvas *c, Rgb color) {
    long n = 0;
    for (int i = 0; i < c->width * c->height; i++) {
        const unsigned char *p = &c->pixels[3 * i];
        n += p[0] == color.r && p[1] == color.g && p[2] == color.b;
    }
    return n;
}

START_TEST(a_comparison_draws_each_run_in_its_own_colour) {
    for (int i = 0; i < PLOT_MAX_LOGS; i++)
        for (int j = 0; j < i; j++) {
            Rgb a = plot_run_colors[i], b = plot_run_colors[j];
            ck_assert_msg(abs(a.r - b.r) + abs(a.g - b.g) + abs(a.b - b.b) > 60, "colours %d and %d look alike", j, i);
        }
    enum { RUNS = 3 };
    LossHistory runs[RUNS];
    const char *labels[RUNS] = {"small", "medium", "large"};
    for (int r = 0; r < RUNS; r++) {
        char name[32];
        snprintf(name, sizeof name, "run%d.csv", r);
        write_timed_log(path_in(dir, name), 200, 20, 1.0 + r, 0.01 * (r + 1));
        loss_history_init(&runs[r]);
        Error err;
        ck_assert_msg(loss_history_read_csv(&runs[r], path_in(dir, name), &err), "%s", err.msg);
    }
    Canvas c;
    canvas_init(&c, PLOT_WIDTH, PLOT_HEIGHT);
    plot_compare(&c, runs, labels, RUNS, PLOT_NATS, "three runs");
    // Each run's curve and dots (and legend entry) are in its colour; the
    // colours of runs that are not there are not.
    for (int r = 0; r < PLOT_MAX_LOGS; r++) {
        long n = count_color(&c, plot_run_colors[r]);
        if (r < RUNS) ck_assert_msg(n > 200, "run %d: only %ld pixels of its colour", r, n);
        else ck_assert_msg(n == 0, "colour %d drawn for a run that is not there (%ld pixels)", r, n);
    }
    canvas_free(&c);
    for (int r = RUNS - 1; r >= 0; r--) loss_history_free(&runs[r]);
}
END_TEST

static void assert_png(const char *path, int width, int height) {
    char why[512];
    int w = 0, h = 0;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
    ck_assert_int_eq(w, width);
    ck_assert_int_eq(h, height);
}

// png_shows: whether the PNG at "path" shows "text" (at the plots' scale).
static bool png_shows(const char *path, const char *text) {
    Canvas c;
    ck_assert_msg(png_read(path, &c), "cannot read %s", path);
    bool found = shows(&c, text);
    canvas_free(&c);
    return found;
}

START_TEST(plot_command_draws_a_log_with_validation_rows_next_to_it) {
    write_log(path_in(dir, "log.csv"), 300, 50);
    char args[1024];
    snprintf(args, sizeof args, "plot %s", path_in(dir, "log.csv"));
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_ptr_nonnull(strstr(r->err, "300 train and 7 validation points"));
    assert_png(path_in(dir, "loss.png"), PLOT_WIDTH, PLOT_HEIGHT);
}
END_TEST

START_TEST(plot_command_draws_a_log_without_validation_rows_where_out_says) {
    write_log(path_in(dir, "log.csv"), 40, 0);
    char args[1024];
    snprintf(args, sizeof args, "plot %s --out %s", path_in(dir, "log.csv"), path_in(dir, "elsewhere.png"));
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_ptr_nonnull(strstr(r->err, "40 train and 0 validation points"));
    assert_png(path_in(dir, "elsewhere.png"), PLOT_WIDTH, PLOT_HEIGHT);
}
END_TEST

START_TEST(plot_command_on_a_bad_log_fails_in_one_line_naming_the_file) {
    write_text_file(path_in(dir, "notes.txt"), "these are not the losses you are looking for\n");
    char args[1024];
    snprintf(args, sizeof args, "plot %s", path_in(dir, "notes.txt"));
    expect_run_fails(dir, args, 1, "notes.txt");
    snprintf(args, sizeof args, "plot %s", path_in(dir, "absent.csv"));
    expect_run_fails(dir, args, 1, "absent.csv");
    expect_run_fails(dir, "plot", 2, "missing LOG.csv");  // a usage error
}
END_TEST

// run_here: run "tinygpt args" with the scratch directory as the current
// directory (where several logs' compare.png goes by default).
static RunResult *run_here(const char *args) {
    char binary[PATH_MAX], cmd[PATH_MAX + 700];
    ck_assert_ptr_nonnull(realpath(tinygpt_binary(), binary));
    snprintf(cmd, sizeof cmd, "cd %s && %s", dir, binary);
    return run_binary(cmd, dir, args);
}

// make_runs: logs dir/run1/log.csv .. dir/runN/log.csv, and "list", their
// paths relative to dir separated by spaces.
static void make_runs(int n, char *list, size_t cap) {
    list[0] = '\0';
    for (int r = 1; r <= n; r++) {
        char sub[32], path[700];
        snprintf(sub, sizeof sub, "run%d", r);
        snprintf(path, sizeof path, "mkdir -p %s", path_in(dir, sub));
        ck_assert_int_eq(system(path), 0);
        snprintf(path, sizeof path, "%s/log.csv", path_in(dir, sub));
        write_timed_log(path, 100 * r, 25, 1.5 * r, 0.01 * r);
        size_t used = strlen(list);
        snprintf(list + used, cap - used, "%s%s/log.csv", r > 1 ? " " : "", sub);
    }
}

START_TEST(plot_command_compares_several_logs_in_compare_png_here) {
    char logs[1024];
    make_runs(3, logs, sizeof logs);
    char args[1200];
    snprintf(args, sizeof args, "plot %s", logs);
    RunResult *r = run_here(args);
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "3 validation curves of 5, 9, 13 points") != NULL, "%s", r->err);
    assert_png(path_in(dir, "compare.png"), PLOT_WIDTH, PLOT_HEIGHT);
    // Against time, with names, a title and a place of its own.
    snprintf(args, sizeof args, "plot %s --x time --labels 'a,b,c' --title 'three runs' --out %s", logs,
             path_in(dir, "time.png"));
    r = run_here(args);
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    assert_png(path_in(dir, "time.png"), PLOT_WIDTH, PLOT_HEIGHT);
    // One log against time is the one-log picture, next to the log.
    r = run_here("plot run1/log.csv --x time");
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_ptr_nonnull(strstr(r->err, "100 train and 5 validation points"));
    assert_png(path_in(dir, "run1/loss.png"), PLOT_WIDTH, PLOT_HEIGHT);
}
END_TEST

START_TEST(plot_command_compares_runs_in_bits_per_byte_and_older_logs_in_nats_per_token) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s %s", path_in(dir, "char"), path_in(dir, "bpe"), path_in(dir, "old"));
    ck_assert_int_eq(system(cmd), 0);
    write_bpb_log(path_in(dir, "char/log.csv"), 100, 25, 1.44);
    write_bpb_log(path_in(dir, "bpe/log.csv"), 100, 25, 0.75);
    write_log(path_in(dir, "old/log.csv"), 100, 25);
    // Several logs with val_bpb: compared in bits per byte.
    RunResult *r = run_here("plot char/log.csv bpe/log.csv");
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "2 validation curves of 5, 5 points, in bits per byte\n") != NULL, "%s", r->err);
    ck_assert_msg(!strstr(r->err, "note:"), "%s", r->err);
    ck_assert(png_shows(path_in(dir, "compare.png"), "validation bits per byte"));
    ck_assert(!png_shows(path_in(dir, "compare.png"), "nats per token"));
    // One without it: every run in nats per token, and a note naming that log.
    r = run_here("plot char/log.csv old/log.csv --out mixed.png");
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "note: 'old/log.csv' has no val_bpb column") &&
                      strstr(r->err, "comparing validation loss in nats per token instead"),
                  "%s", r->err);
    ck_assert_msg(strstr(r->err, "in nats per token\n") != NULL, "%s", r->err);
    ck_assert(png_shows(path_in(dir, "mixed.png"), "validation loss (nats per token)"));
    ck_assert(!png_shows(path_in(dir, "mixed.png"), "bits per byte"));
    // Asked for bits per byte, such a log is an error naming it.
    expect_failure(run_here("plot char/log.csv old/log.csv --unit bpb"), "--unit bpb", 1, "'old/log.csv' has no val_bpb column");
    expect_failure(run_here("plot old/log.csv --unit bpb"), "--unit bpb", 1, "use --unit nats");
    // --unit nats compares in nats per token without a note.
    r = run_here("plot char/log.csv bpe/log.csv --unit nats --out nats.png");
    ck_assert_msg(r->status == 0 && !strstr(r->err, "note:") && strstr(r->err, "in nats per token\n"), "%s", r->err);
    ck_assert(png_shows(path_in(dir, "nats.png"), "validation loss (nats per token)"));
    // One log: nats per token, bits per byte on the right; or bits per byte alone.
    r = run_here("plot char/log.csv");
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_msg(strstr(r->err, "100 train and 5 validation points, in nats per token (and bits per byte on the right)"),
                  "%s", r->err);
    ck_assert(png_shows(path_in(dir, "char/loss.png"), "loss (nats per token)"));
    ck_assert(png_shows(path_in(dir, "char/loss.png"), "validation bits per byte"));
    r = run_here("plot char/log.csv --unit bpb --out one_bpb.png");
    ck_assert_msg(r->status == 0 && strstr(r->err, "5 validation points, in bits per byte"), "%s", r->err);
    ck_assert(png_shows(path_in(dir, "one_bpb.png"), "validation bits per byte"));
    ck_assert(!png_shows(path_in(dir, "one_bpb.png"), "nats per token"));
    expect_failure(run_here("plot char/log.csv --unit bits"), "--unit bits", 2, "--unit 'bits' is not one of: nats, bpb");
}
END_TEST

START_TEST(plot_command_refuses_bad_comparisons_in_one_line) {
    char logs[1024], args[2400];
    make_runs(9, logs, sizeof logs);
    write_text_file(path_in(dir, "notes.txt"), "not a log\n");
    write_text_file(path_in(dir, "no_ms.csv"), "step,train_loss,val_loss\n0,1.5,1.6\n");
    const struct {
        const char *args, *must_mention;
        int status;
    } cases[] = {
        {logs, "at most 8 LOG.csv", 2},  // nine logs
        {"run1/log.csv run2/log.csv --labels 'a,b,c'", "--labels has 3 names for 2 logs", 2},
        {"run1/log.csv run2/log.csv --labels a", "--labels has 1 name for 2 logs", 2},
        {"run1/log.csv run2/log.csv --x wall", "--x 'wall' is not one of: step, time", 2},
        {"run1/log.csv notes.txt", "notes.txt", 1},
        {"run1/log.csv no_ms.csv --x time", "'no_ms.csv' has no ms column", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "plot %s", cases[i].args);
        expect_failure(run_here(args), args, cases[i].status, cases[i].must_mention);
    }
    ck_assert_int_ne(access(path_in(dir, "compare.png"), F_OK), 0);  // nothing drawn
}
END_TEST

Suite *plot_suite(void) {
    Suite *s = suite_create("plot");
    TCase *history = tcase_create("history");
    tcase_add_checked_fixture(history, setup, teardown);
    tcase_add_test(history, the_history_keeps_every_step_until_it_is_full);
    tcase_add_test(history, a_full_history_merges_neighbours_into_their_means);
    tcase_add_test(history, losses_that_are_not_finite_are_left_out_of_the_history);
    tcase_add_test(history, reading_a_log_with_validation_rows_gives_both_curves);
    tcase_add_test(history, reading_a_log_without_validation_rows_gives_only_the_train_curve);
    tcase_add_test(history, a_file_that_is_not_a_log_is_refused_naming_the_file);
    tcase_add_test(history, a_log_with_val_bpb_gives_the_bits_per_byte_curve_and_their_ratio_to_nats);
    tcase_add_test(history, one_run_is_drawn_in_nats_per_token_with_bits_per_byte_on_the_right);
    tcase_add_test(history, windows_line_ends_are_accepted);
    tcase_add_test(history, columns_are_found_by_their_names_in_the_header);
    tcase_add_test(history, time_x_is_the_sum_of_ms_up_to_and_including_each_step);
    tcase_add_test(history, time_x_needs_an_ms_column_holding_durations);
    tcase_add_test(history, a_comparison_draws_each_run_in_its_own_colour);
    suite_add_tcase(s, history);

    TCase *command = tcase_create("command");
    tcase_add_checked_fixture(command, setup, teardown);
    tcase_set_timeout(command, 30);  // runs the binary; a loaded machine can be slow to start it
    tcase_add_test(command, plot_command_draws_a_log_with_validation_rows_next_to_it);
    tcase_add_test(command, plot_command_draws_a_log_without_validation_rows_where_out_says);
    tcase_add_test(command, plot_command_on_a_bad_log_fails_in_one_line_naming_the_file);
    tcase_add_test(command, plot_command_compares_several_logs_in_compare_png_here);
    tcase_add_test(command, plot_command_compares_runs_in_bits_per_byte_and_older_logs_in_nats_per_token);
    tcase_add_test(command, plot_command_refuses_bad_comparisons_in_one_line);
    suite_add_tcase(s, command);
    return s;
}
