// test_watch.c: tests for src/show/watch.c: the live status line's content and
// fit, and `tinygpt train` as a person watching it sees it: on a terminal
// (a pseudo-terminal here) one status line redrawn with "\r", left on screen
// at its last step; through a pipe only the plain lines, as before; and
// DIR/loss.png either way, its axes in nats per token and bits per byte
// (read back from the PNG), for a char run and a bpe run.
#include <errno.h>
#include <math.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "pictures.h"
#include "plot.h"
#include "tests.h"
#include "watch.h"

static char dir[256];

// A small corpus with something to learn.
static void setup(void) {
    scratch_dir_create(dir, sizeof dir);
    char path[512];
    snprintf(path, sizeof path, "%s/corpus.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 200; i++) fputs(i % 3 ? "the cat sat on the mat.\n" : "call me ishmael.\n", f);
    fclose(f);
}

static void teardown(void) { scratch_dir_remove(dir); }

// The training run of these tests: 30 steps of a tiny model, an evaluation
// every 10 steps, on one thread (a model this small gains nothing from two,
// and on a busy machine every parallel region can wait a scheduler tick).
#define TRAIN_ARGS "train %s/corpus.txt --out %s/run --steps 30 --batch 4 --context 8 --embd 8 --heads 2 --eval-interval 10 --threads 1 --tokenizer char"

// status: the status line of a run of steps, as draw_status makes it:
// after step "step" (0-based) of "total", this process having started at
// step "first" "elapsed" seconds ago.
static int status_of_steps(char *line, size_t cap, int columns, long step, long first, long total, float train, float val,
                  double tokens_per_s, double elapsed) {
    WatchProgress p = watch_progress(step + 1, first, total, elapsed, 0.0, 0.0);
    return watch_format_status(line, cap, columns, step + 1, total, p, train, val, tokens_per_s, elapsed);
}

START_TEST(status_line_shows_progress_losses_speed_elapsed_and_eta) {
    char line[512];
    // step 749 of 3000 (0-based): 750 done, a quarter; 30 s so far, so 90 s to go.
    int n = status_of_steps(line, sizeof line, 200, 749, 0, 3000, 1.87341f, 1.91024f, 52140.4, 30.2);
    ck_assert_int_eq(n, (int)strlen(line));
    ck_assert_msg(strstr(line, " 750/3000") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "train 1.8734") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "val 1.9102 nats/tok") != NULL, "the losses' unit is not named: %s", line);
    ck_assert_msg(strstr(line, "52140 tok/s") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "0:30 elapsed") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "ETA 1:31") != NULL, "%s", line);  // 30.2 / 750 * 2250 = 90.6 s
    // The bar: BAR_WIDTH (30) cells, a quarter of them filled.
    ck_assert_msg(strncmp(line, "[#######-----------------------] ", 33) == 0, "%s", line);
}
END_TEST

START_TEST(status_line_shows_a_dash_before_the_first_validation_and_hours_when_long) {
    char line[512];
    status_of_steps(line, sizeof line, 200, 0, 0, 100000, 4.5f, NAN, 1000.0, 4000.0);
    ck_assert_msg(strstr(line, "val -") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "1:06:40 elapsed") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "     1/100000") != NULL, "step is not padded to the width of the total: %s", line);
}
END_TEST

// After --resume the clock starts with this process: the ETA is the time per
// step of the steps since the resume, not that time spread over every step
// of the run (which made it ten times too short here).
START_TEST(status_line_eta_after_a_resume_uses_only_the_steps_since_it) {
    char line[512];
    // Resumed at step 900; step 999 done: 100 steps in 100 s, 1000 to go.
    status_of_steps(line, sizeof line, 200, 999, 900, 2000, 2.0f, 2.1f, 1e5, 100.0);
    ck_assert_msg(strstr(line, "ETA 16:40") != NULL, "%s", line);
    ck_assert_msg(strstr(line, "1000/2000") != NULL, "the progress is the run's: %s", line);
}
END_TEST

// With --time, the bar and the ETA follow the clock: 15 s of a 60 s budget
// spent (10 of them before a --resume) is a quarter, 45 s left, whatever
// the steps say; and a run of --time alone counts its steps without a total.
START_TEST(status_line_of_a_timed_run_follows_the_clock) {
    WatchProgress p = watch_progress(100, 50, 0, 5.0, 60.0, 10.0);
    ck_assert_double_eq_tol(p.fraction, 0.25, 1e-12);
    ck_assert_double_eq_tol(p.left, 45.0, 1e-12);
    char line[512];
    watch_format_status(line, sizeof line, 200, 100, 0, p, 2.0f, 2.1f, 1e5, 5.0);
    ck_assert_msg(strncmp(line, "[#######-----------------------] 100 train", 42) == 0, "%s", line);
    ck_assert_msg(strstr(line, "ETA 0:45") != NULL, "%s", line);
    // With --steps too, whichever ends first: 10 steps of 20 in 5 s leave
    // 5 s by the steps, fewer than the time's 45.
    p = watch_progress(10, 0, 20, 5.0, 60.0, 10.0);
    ck_assert_double_eq_tol(p.fraction, 0.5, 1e-12);
    ck_assert_double_eq_tol(p.left, 5.0, 1e-12);
    // The time further along than the steps: 1 step of 20, 50 s of 60.
    p = watch_progress(1, 0, 20, 50.0, 60.0, 0.0);
    ck_assert_double_eq_tol(p.fraction, 50.0 / 60.0, 1e-12);
    ck_assert_double_eq_tol(p.left, 10.0, 1e-12);
}
END_TEST

START_TEST(status_line_never_wraps_the_terminal) {
    char wide[512], line[512];
    status_of_steps(wide, sizeof wide, 1000, 10, 0, 3000, 2.0f, 2.1f, 1e5, 10);
    const char *numbers = strchr(wide, ']') + 2;  // everything after the bar
    for (int columns = 20; columns <= 140; columns++) {
        int n = status_of_steps(line, sizeof line, columns, 10, 0, 3000, 2.0f, 2.1f, 1e5, 10);
        ck_assert_msg(n <= columns - 1, "%d characters on a %d-column terminal: %s", n, columns, line);
        // The bar gives way first: the numbers are whole whenever they fit.
        if ((size_t)columns - 1 >= strlen(numbers))
            ck_assert_msg(strstr(line, numbers) != NULL, "%d columns cut the numbers: %s", columns, line);
    }
    // 80 columns hold the numbers, their unit included, but no bar; 110 both.
    status_of_steps(line, sizeof line, 80, 10, 0, 3000, 2.0f, 2.1f, 1e5, 10);
    ck_assert_msg(strcmp(line, numbers) == 0, "80 columns: %s", line);
    status_of_steps(line, sizeof line, 110, 10, 0, 3000, 2.0f, 2.1f, 1e5, 10);
    ck_assert_msg(line[0] == '[' && strstr(line, numbers) != NULL, "110 columns: %s", line);
}
END_TEST

// Run `tinygpt "args"` on a new pseudo-terminal "columns" wide; everything it
// writes to the terminal (stdout and stderr both) goes into "out".
static int run_on_terminal(const char *args, int columns, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "exec %s %s", tinygpt_binary(), args);
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)columns};
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    ck_assert_msg(pid >= 0, "forkpty failed: %s", strerror(errno));
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    size_t n = 0;
    for (;;) {  // until the child closes the terminal (EIO on Linux)
        ssize_t got = read(master, out + n, cap - 1 - n);
        if (got > 0) n += (size_t)got;
        else if (got < 0 && errno == EINTR) continue;
        else break;
        if (n == cap - 1) break;
    }
    out[n] = '\0';
    close(master);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

START_TEST(train_on_a_terminal_redraws_one_status_line_in_place) {
    static char out[1 << 16];
    char args[1024];
    snprintf(args, sizeof args, TRAIN_ARGS, dir, dir);
    int status = run_on_terminal(args, 120, out, sizeof out);
    ck_assert_msg(status == 0, "train failed: %s", out);
    // Redrawn with a carriage return and "erase to the end of the line".
    ck_assert_msg(strstr(out, "\r[") != NULL, "no status line: %s", out);
    ck_assert_ptr_nonnull(strstr(out, "\033[K"));
    ck_assert_msg(strstr(out, "ETA") != NULL && strstr(out, "tok/s") != NULL, "%s", out);
    // The last redraw shows the whole bar.
    ck_assert_msg(strstr(out, "##############################] 30/30") != NULL, "no full bar: %s", out);
    // The plain lines are still there, each on a line of its own.
    ck_assert_msg(strstr(out, "\r\033[Kstep      0/30 | train loss") != NULL, "plain line not cleanly printed: %s", out);
    const char *last_plain = strstr(out, "step     29/30");
    ck_assert_ptr_nonnull(last_plain);
    // After it, the status line of the last step stays on screen, ended by
    // a newline (the terminal's "\r\n"), before the run's last words.
    const char *final_line = strstr(last_plain, "\r[##############################] 30/30 train ");
    ck_assert_msg(final_line != NULL, "the status line does not end at 30/30: %s", last_plain);
    const char *end = strstr(final_line, "\033[K\r\n");
    ck_assert_msg(end != NULL && strncmp(end + 5, "saved ", 6) == 0, "the final status line is not kept: %s",
                  final_line);
    ck_assert_msg(strstr(final_line, "nats/tok") && strstr(final_line, "ETA 0:00") && end - final_line < 120,
                  "%s", final_line);
}
END_TEST

START_TEST(train_through_a_pipe_prints_only_the_plain_lines) {
    char args[1024];
    snprintf(args, sizeof args, TRAIN_ARGS, dir, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);
    ck_assert_msg(strchr(r->out, '\r') == NULL && strchr(r->err, '\r') == NULL, "a status line went to a file");
    ck_assert_ptr_null(strstr(r->err, "ETA"));
    // Exactly the lines of the evaluations (0, 10, 20) and the last step.
    int lines = 0;
    for (const char *p = r->out; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) lines += strncmp(p, "step ", 5) == 0;
    ck_assert_int_eq(lines, 4);
    ck_assert_ptr_nonnull(strstr(r->out, "step     20/30 | train loss"));
}
END_TEST

START_TEST(train_writes_loss_png_of_the_plot_size) {
    char args[1024], path[512], why[512];
    snprintf(args, sizeof args, TRAIN_ARGS, dir, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);
    snprintf(path, sizeof path, "%s/run/loss.png", dir);
    int w = 0, h = 0;
    ck_assert_msg(png_size(path, &w, &h, why, sizeof why), "%s", why);
    ck_assert_int_eq(w, PLOT_WIDTH);
    ck_assert_int_eq(h, PLOT_HEIGHT);
}
END_TEST

// loss.png names its units: nats per token on the left, bits per byte on
// the right (the ratio read from log.csv), never "per character", for a
// char run as for a bpe one, whose token is a piece of text.
START_TEST(loss_png_is_in_nats_per_token_with_bits_per_byte_on_the_right) {
    const char *tokenizers[2] = {"", " --tokenizer bpe --vocab-size 270"};
    for (int i = 0; i < 2; i++) {
        char args[1024], path[512];
        snprintf(args, sizeof args, TRAIN_ARGS "%s --force", dir, dir, tokenizers[i]);
        RunResult *r = run_tinygpt(dir, args);
        ck_assert_msg(r->status == 0, "train%s failed: %s", tokenizers[i], r->err);
        snprintf(path, sizeof path, "%s/run/loss.png", dir);
        Canvas c;
        ck_assert_msg(png_read(path, &c), "cannot read %s", path);
        ck_assert_msg(canvas_shows_text(&c, "loss (nats per token)", 2), "train%s: no nats per token", tokenizers[i]);
        ck_assert_msg(canvas_shows_text(&c, "validation bits per byte", 2), "train%s: no bits per byte axis",
                      tokenizers[i]);
        ck_assert(!canvas_shows_text(&c, "per character", 2));
        canvas_free(&c);
    }
    // Without validation there is no val_bpb, so no second axis.
    char args[1024], path[512];
    snprintf(args, sizeof args, TRAIN_ARGS " --val-fraction 0 --force", dir, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "train --val-fraction 0 failed: %s", r->err);
    snprintf(path, sizeof path, "%s/run/loss.png", dir);
    Canvas c;
    ck_assert_msg(png_read(path, &c), "cannot read %s", path);
    ck_assert(canvas_shows_text(&c, "loss (nats per token)", 2));
    ck_assert(!canvas_shows_text(&c, "bits per byte", 2));
    canvas_free(&c);
}
END_TEST

// eval on a terminal shows how far it is on stderr, and erases that line
// before the result; through a pipe stderr stays empty.
START_TEST(eval_shows_its_progress_on_a_terminal_only) {
    char args[1024];
    snprintf(args, sizeof args, TRAIN_ARGS, dir, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "train failed: %s", r->err);
    snprintf(args, sizeof args, "eval --model %s/run/model.safetensors %s/corpus.txt --batch 1", dir, dir);
    static char out[1 << 16];
    int status = run_on_terminal(args, 100, out, sizeof out);
    ck_assert_msg(status == 0, "eval failed: %s", out);
    // 4331 characters: (4331 - 1) / 8 = 541 windows of the model's 8.
    ck_assert_msg(strstr(out, "\reval:   0% (1 of 541 windows) ETA ") != NULL, "no progress line: %s", out);
    ck_assert_msg(strstr(out, "\reval: 100% (541 of 541 windows) ETA 0:00\033[K") != NULL, "no final progress: %s", out);
    ck_assert_msg(strstr(out, "\r\033[Kloss ") != NULL, "the result is not on a line of its own: %s", out);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0 && r->err[0] == '\0' && strncmp(r->out, "loss ", 5) == 0, "through a pipe: %s%s",
                  r->out, r->err);
}
END_TEST

Suite *watch_suite(void) {
    Suite *s = suite_create("watch");
    TCase *status = tcase_create("status line");
    tcase_add_test(status, status_line_shows_progress_losses_speed_elapsed_and_eta);
    tcase_add_test(status, status_line_shows_a_dash_before_the_first_validation_and_hours_when_long);
    tcase_add_test(status, status_line_eta_after_a_resume_uses_only_the_steps_since_it);
    tcase_add_test(status, status_line_of_a_timed_run_follows_the_clock);
    tcase_add_test(status, status_line_never_wraps_the_terminal);
    suite_add_tcase(s, status);

    TCase *training = tcase_create("training");
    tcase_add_checked_fixture(training, setup, teardown);
    tcase_set_timeout(training, 60);  // real (tiny) training runs on a shared machine
    tcase_add_test(training, train_on_a_terminal_redraws_one_status_line_in_place);
    tcase_add_test(training, train_through_a_pipe_prints_only_the_plain_lines);
    tcase_add_test(training, train_writes_loss_png_of_the_plot_size);
    tcase_add_test(training, loss_png_is_in_nats_per_token_with_bits_per_byte_on_the_right);
    tcase_add_test(training, eval_shows_its_progress_on_a_terminal_only);
    suite_add_tcase(s, training);
    return s;
}
