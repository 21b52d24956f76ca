// test_plot.c: tests for src/plot.c: the bounded loss history (every step
// kept until it is full, then neighbours merged into their means), reading
// a log.csv with and without validation rows, refusing what is not one with
// a message naming the file, and `tinygpt plot` writing a PNG of the stated
// size, or failing in one line with exit status 1.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "plot.h"
#include "tests.h"

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// in_dir: "dir/name", in one of 4 rotating buffers.
static const char *in_dir(const char *name) {
    static char buf[4][600];
    static int which;
    which = (which + 1) % 4;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
}

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
    write_log(in_dir("log.csv"), 95, 10);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, in_dir("log.csv"), &err), "%s", err.msg);
    ck_assert_uint_eq(h.train.n, 95);
    ck_assert_uint_eq(h.val.n, 11);  // steps 0, 10, ..., 90 and the last, 94
    ck_assert_double_eq(px(&h.val.points[10]), 94.0);
    ck_assert_double_eq_tol(py(&h.val.points[10]), 4.2 / 1.94, 1e-6);
    ck_assert_double_eq_tol(py(&h.train.points[50]), 4.0 / 1.5, 1e-6);
    loss_history_free(&h);
}
END_TEST

START_TEST(reading_a_log_without_validation_rows_gives_only_the_train_curve) {
    write_log(in_dir("log.csv"), 30, 0);
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, in_dir("log.csv"), &err), "%s", err.msg);
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
        write_text_file(in_dir(cases[i].name), cases[i].text);
        LossHistory h;
        loss_history_init(&h);
        Error err = {{0}};
        ck_assert_msg(!loss_history_read_csv(&h, in_dir(cases[i].name), &err), "%s was accepted", cases[i].name);
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
    ck_assert(!loss_history_read_csv(&h, in_dir("missing.csv"), &err));
    ck_assert_ptr_nonnull(strstr(err.msg, "missing.csv"));
    loss_history_free(&h);
}
END_TEST

START_TEST(windows_line_ends_are_accepted) {
    write_text_file(in_dir("crlf.csv"), "step,train_loss,val_loss,lr,ms,tokens_per_s\r\n0,1.5,1.6,0.5,1,1\r\n1,1.4,,0.5,1,1\r\n");
    LossHistory h;
    loss_history_init(&h);
    Error err;
    ck_assert_msg(loss_history_read_csv(&h, in_dir("crlf.csv"), &err), "%s", err.msg);
    ck_assert_uint_eq(h.train.n, 2);
    ck_assert_uint_eq(h.val.n, 1);
    loss_history_free(&h);
}
END_TEST

static void assert_png(const char *path, int width, int height) {
    char why[512];
    int w = 0, h = 0;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
    ck_assert_int_eq(w, width);
    ck_assert_int_eq(h, height);
}

START_TEST(plot_command_draws_a_log_with_validation_rows_next_to_it) {
    write_log(in_dir("log.csv"), 300, 50);
    char args[1024];
    snprintf(args, sizeof args, "plot %s", in_dir("log.csv"));
    RunResult *r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_ptr_nonnull(strstr(r->err, "300 train and 7 validation points"));
    assert_png(in_dir("loss.png"), PLOT_WIDTH, PLOT_HEIGHT);
}
END_TEST

START_TEST(plot_command_draws_a_log_without_validation_rows_where_out_says) {
    write_log(in_dir("log.csv"), 40, 0);
    char args[1024];
    snprintf(args, sizeof args, "plot %s --out %s", in_dir("log.csv"), in_dir("elsewhere.png"));
    RunResult *r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_msg(r->status == 0, "plot failed: %s", r->err);
    ck_assert_ptr_nonnull(strstr(r->err, "40 train and 0 validation points"));
    assert_png(in_dir("elsewhere.png"), PLOT_WIDTH, PLOT_HEIGHT);
}
END_TEST

START_TEST(plot_command_on_a_bad_log_fails_in_one_line_naming_the_file) {
    write_text_file(in_dir("notes.txt"), "these are not the losses you are looking for\n");
    char args[1024];
    snprintf(args, sizeof args, "plot %s", in_dir("notes.txt"));
    RunResult *r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_int_eq(r->status, 1);
    ck_assert_msg(strstr(r->err, "notes.txt") != NULL, "stderr does not name the file: %s", r->err);
    ck_assert_msg(stderr_is_one_line(r), "not one line: %s", r->err);
    snprintf(args, sizeof args, "plot %s", in_dir("absent.csv"));
    r = run_binary(tinygpt_binary(), dir, args);
    ck_assert_int_eq(r->status, 1);
    ck_assert_ptr_nonnull(strstr(r->err, "absent.csv"));
    ck_assert(stderr_is_one_line(r));
    r = run_binary(tinygpt_binary(), dir, "plot");  // no LOG.csv: a usage error
    ck_assert_int_eq(r->status, 2);
    ck_assert(stderr_is_one_line(r));
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
    tcase_add_test(history, windows_line_ends_are_accepted);
    suite_add_tcase(s, history);

    TCase *command = tcase_create("command");
    tcase_add_checked_fixture(command, setup, teardown);
    tcase_set_timeout(command, 30);  // runs the binary; a loaded machine can be slow to start it
    tcase_add_test(command, plot_command_draws_a_log_with_validation_rows_next_to_it);
    tcase_add_test(command, plot_command_draws_a_log_without_validation_rows_where_out_says);
    tcase_add_test(command, plot_command_on_a_bad_log_fails_in_one_line_naming_the_file);
    suite_add_tcase(s, command);
    return s;
}
