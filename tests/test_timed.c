// test_timed.c: how a run is measured out and watched
// (src/commands/train.c, and train_progress.c for the progress lines):
// 1. `--time SECONDS` ends the run when its time is spent, with its
//    schedule: the steps reached are recorded alike in the checkpoint,
//    log.csv and run.json; a --time that does not bind leaves the run to
//    its steps; --resume continues the budget where the checkpoint left it.
//    The progress lines give the speed as a share of the CPU's peak, and a
//    peak the start read low (its CPU busy) is raised when measured again.
// 2. `--sample-every N` prints a one-line sample under the progress line
//    and keeps it in log.csv: the very text `tinygpt sample` draws from the
//    same weights with the same seed.
// 3. The validation loss a run logs is the number `tinygpt eval --split
//    val` gives for the same weights (every window, when there are at most
//    --eval-batches x B of them), and batch_spread takes windows from the
//    whole split.
#define _GNU_SOURCE  // sched_getaffinity
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "helpers.h"
#include "tests.h"

#define TEST_TIMEOUT_SECONDS 120

static char dir[256];
static char corpus[512];

static void setup(void) {
    scratch_dir_create(dir, sizeof dir);
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", dir);
    write_corpus(corpus, 200);
}
static void teardown(void) { scratch_dir_remove(dir); }

// A tiny gpt: about a millisecond a step.
#define TINY "--batch 4 --context 16 --embd 16 --heads 2 --layers 2 --seed 9 --threads 1"

// rows: the data rows of a log.csv's text.
static int rows(const char *log) {
    int n = -1;  // the header
    for (const char *c = log; *c; c++) n += *c == '\n';
    return n;
}

// json_value: the string value of "key" in run.json's text (no escapes in
// the values these tests read), into out[cap].
static void json_value(const char *json, const char *key, char *out, size_t cap) {
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":\"", key);
    const char *at = strstr(json, needle);
    ck_assert_msg(at != NULL, "run.json has no \"%s\": %s", key, json);
    at += strlen(needle);
    size_t n = strcspn(at, "\"");
    ck_assert_uint_lt(n, cap);
    memcpy(out, at, n);
    out[n] = '\0';
}

// ---- 1. --time -----------------------------------------------------------------------

// A run of --time alone trains until its time is spent, evaluates its last
// step, ends its cosine there (near --min-lr), and records the steps it
// reached in all three places. Its budget in seconds, a number; BUDGET_TEXT
// is the same as text, the flag's value as train prints it.
#define BUDGET 1.5
#define TEXT_OF(x) #x
#define AS_TEXT(x) TEXT_OF(x)
#define BUDGET_TEXT AS_TEXT(BUDGET)
START_TEST(a_timed_run_ends_with_its_time_and_records_the_steps_reached) {
    char args[1024];
    snprintf(args, sizeof args,
             "train %s --out %s/run " TINY " --time " BUDGET_TEXT " --warmup 0 --lr 1e-3 --min-lr 1e-4", corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "train --time failed (%d): %s", r->status, r->err);
    ck_assert_msg(strstr(r->err, "of --time " BUDGET_TEXT) != NULL, "%s", r->err);
    ck_assert_msg(strstr(r->out, " left\n") != NULL, "the progress lines do not show the time left: %s", r->out);

    size_t len;
    char *log = slurp(path_in(dir, "run/log.csv"), &len);
    int n = rows(log);
    ck_assert_int_gt(n, 10);
    // It ends at the step the clock says is the last (is_last_step): the
    // first that could end past the budget if it took as long as the longest
    // step so far, from one step's start to the next, evaluations and the
    // plot included. So its time falls short of the budget by at most that
    // longest step. A row's time is taken mid-step (after the update, before
    // the progress line and the plot), so a step start to start lies within
    // two neighbouring rows' gaps (row 0's from the clock's start):
    // milliseconds here, but tenths of a second under the sanitizers on a
    // slow machine, where the first plot alone took 0.2 s.
    // The rows' times are printed to the millisecond, so a difference of two
    // of them may fall short of the true one by up to 1 ms: added to
    // "longest" (without it, on a busy machine, a run's last step once began
    // 60 us earlier than the rounded times allowed).
    double seconds = log_field(log, n - 1, 9), longest = 0.0, previous_gap = 0.0;
    for (int i = 0; i < n; i++) {
        const double gap = log_field(log, i, 9) - (i > 0 ? log_field(log, i - 1, 9) : 0.0);
        longest = fmax(longest, previous_gap + gap);
        previous_gap = gap;
    }
    longest += 1e-3;
    ck_assert_msg(longest < BUDGET / 2, "a step took up to %g s, half the budget: too slow to test --time", longest);
    ck_assert_msg(seconds >= BUDGET - longest && seconds < 30.0, "the run's time is %g s (its longest step at most %g s)",
                  seconds, longest);
    ck_assert_msg(!isnan(log_field(log, n - 1, 2)), "the last step was not evaluated");
    // The cosine ends with the time: the last step began within its longest
    // step of the end, so at a fraction of the budget f >= 1 - longest / BUDGET,
    // where the rate, 1e-4 + 9e-4 (1 + cos(pi f)) / 2, is near --min-lr (about
    // 1.6e-4 at most when a step takes milliseconds).
    double last_lr = log_field(log, n - 1, 3);
    const double f_min = 1.0 - longest / BUDGET, lr_bound = 1e-4 + 9e-4 * 0.5 * (1.0 + cos(M_PI * f_min));
    ck_assert_msg(last_lr <= lr_bound * (1.0 + 1e-6), "the last step's lr is %g, above %g: far from --min-lr 1e-4",
                  last_lr, lr_bound);
    for (int i = 1; i < n; i++)
        ck_assert_msg(log_field(log, i, 3) <= log_field(log, i - 1, 3), "lr rises at step %d", i);

    char *json = slurp(path_in(dir, "run/run.json"), &len), value[64], want[600];
    json_value(json, "steps_done", value, sizeof value);
    snprintf(want, sizeof want, "%d", n);
    ck_assert_str_eq(value, want);
    snprintf(want, sizeof want, "%s/run/checkpoint-%d", dir, n);
    ck_assert_msg(access(want, F_OK) == 0, "no %s", want);
    free(json);
    free(log);
}
END_TEST

// --steps and --time: whichever ends first. A budget far longer than the
// steps take ends nothing early, and the cosine follows the steps: the
// rates are the run's without it, but for the hair's breadth by which the
// time is further along at the first step after the warmup (the step's
// own fraction is then 0).
START_TEST(a_time_that_does_not_bind_leaves_the_run_to_its_steps) {
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s/steps " TINY " --steps 30 --warmup 5", corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    snprintf(args, sizeof args, "train %s --out %s/both " TINY " --steps 30 --warmup 5 --time 1000", corpus, dir);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->err, "stopped") == NULL, "%s", r->err);
    size_t len_a, len_b;
    char *a = slurp(path_in(dir, "steps/log.csv"), &len_a), *b = slurp(path_in(dir, "both/log.csv"), &len_b);
    ck_assert_int_eq(rows(a), 30);
    ck_assert_int_eq(rows(b), 30);
    for (int i = 0; i < 30; i++) {
        double lr_a = log_field(a, i, 3), lr_b = log_field(b, i, 3);
        ck_assert_msg(fabs(lr_a - lr_b) <= 1e-6 * lr_a, "step %d: lr %g without --time, %g with", i, lr_a, lr_b);
        // The same batches, and weights that differ by at most those hairs.
        double loss_a = log_field(a, i, 1), loss_b = log_field(b, i, 1);
        ck_assert_msg(fabs(loss_a - loss_b) < 1e-4, "step %d: loss %g without --time, %g with", i, loss_a, loss_b);
    }
    ck_assert_double_eq(log_field(b, 29, 3), log_field(a, 29, 3));  // the steps' cosine, to its end
    free(a);
    free(b);
}
END_TEST

// A timed run stopped early (--stop-after, as a Ctrl-C would) resumes with
// the rest of its budget: the log goes on from the checkpoint's step, the
// time counts on from what the checkpoint recorded, and a finished run asks
// for a larger --time.
START_TEST(a_timed_run_resumes_with_the_rest_of_its_budget) {
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s/run " TINY " --time 2 --stop-after 20", corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->err, "stopped after 20 steps;") != NULL, "%s", r->err);
    size_t len;
    char *json = slurp(path_in(dir, "run/run.json"), &len), value[64];
    json_value(json, "train_seconds", value, sizeof value);
    double before = atof(value);
    ck_assert(before > 0 && before < 2.0);
    free(json);

    snprintf(args, sizeof args, "train --resume %s/run", dir);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "resume failed (%d): %s", r->status, r->err);
    char *log = slurp(path_in(dir, "run/log.csv"), &len);
    int n = rows(log);
    ck_assert_int_gt(n, 20);
    for (int i = 0; i < n; i++) ck_assert_int_eq((int)log_field(log, i, 0), i);  // no step twice, none missing
    // The time column goes on from the checkpoint's, and ends at the budget
    // (within about a step: see the first test).
    ck_assert_msg(log_field(log, 20, 9) >= log_field(log, 19, 9), "the clock restarted after the resume");
    ck_assert_msg(log_field(log, n - 1, 9) >= 1.7, "the run ended at %g s of 2", log_field(log, n - 1, 9));
    free(log);

    snprintf(args, sizeof args, "train --resume %s/run", dir);
    r = run_tinygpt(dir, args);
    expect_failure(r, args, 2, "give a larger --time");
    snprintf(args, sizeof args, "train %s --out %s/bad --time -1", corpus, dir);
    expect_run_fails(dir, args, 2, "--time");
}
END_TEST

// However the clock ends a run, its last checkpoint is the final one and
// counts the whole budget spent, also when a periodic save fell on the
// last step (--save-every 1: every step): resuming asks for more time.
START_TEST(a_run_the_clock_ended_asks_for_more_time_even_after_a_save_every_step) {
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s/run " TINY " --time 1 --save-every 1", corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    snprintf(args, sizeof args, "train --resume %s/run", dir);
    expect_run_fails(dir, args, 2, "give a larger --time");
}
END_TEST

// is_share_of: whether a progress line's "percent" of the peak is its
// "gflops" as a share of "peak", all three as printed, rounded to whole
// numbers: the share by up to 0.5 points; the GFLOP/s by up to 0.5, which
// moves 100 gflops / peak by up to 50 / peak points; and the peak by up to
// 0.5, which moves it by up to 50 gflops / peak^2 (a sanitized build's peak
// is small, so these are not small there).
static bool is_share_of(double percent, double gflops, double peak) {
    const double rounding = 0.5 + 50.0 / peak + 50.0 * (gflops + 0.5) / (peak * (peak - 0.5));
    return fabs(percent - 100.0 * gflops / peak) <= rounding + 1e-9;
}

// LineSpeed: what a progress line says of its step and speed.
typedef struct {
    long step;
    double tokens_per_s, gflops, percent;
} LineSpeed;

// line_speed: the step and speed of the progress line at "line" (past its
// newline, if it starts with one); the test fails if the line has none.
static LineSpeed line_speed(const char *line) {
    LineSpeed s;
    const char *t = strstr(line, "ms/step | ");
    ck_assert_msg(sscanf(line + (line[0] == '\n'), "step %ld", &s.step) == 1 && t &&
                      sscanf(t, "ms/step | %lf tokens/s | %lf GFLOP/s, %lf%% of peak", &s.tokens_per_s, &s.gflops,
                             &s.percent) == 3,
                  "no step or speed in: %.200s", line);
    return s;
}

// next_step_line: the progress line after "line" in a run's stdout "out"
// (the first one when "line" is NULL), or NULL past the last. A line the
// capture cut off (run_binary keeps the first 128 KB: a fast CPU fills it
// in a long run) has no newline after it, and is not one.
static const char *next_step_line(const char *out, const char *line) {
    const char *next = line ? strstr(line + 1, "\nstep ") : strstr(out, "step ");
    return next && strchr(next + 1, '\n') ? next : NULL;
}

// The speed as a share of the peak: the run's start names its FLOPs per
// token (the count docs/speed-and-memory.md gives: a gpt's forward pass
// L (24C^2 + 2C(T+1)) + 2CV, a training step 3x that) and this CPU's
// measured peak; each progress line's GFLOP/s is its tokens/s times that
// count, and its share is of that peak.
START_TEST(progress_lines_give_gflops_as_a_share_of_the_measured_peak) {
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s/run " TINY " --steps 21 --eval-interval 10", corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    const char *model = strstr(r->err, " V=");
    ck_assert_ptr_nonnull(model);
    const double V = atof(model + 3), L = 2, C = 16, T = 16;
    const double want = 3 * (L * (24 * C * C + 2 * C * (T + 1)) + 2 * C * V);
    const char *speed = strstr(r->err, "speed: ");
    ck_assert_msg(speed != NULL, "%s", r->err);
    double mflop = atof(speed + strlen("speed: "));
    ck_assert_msg(fabs(mflop * 1e6 - want) <= 1e-3 * want, "%g MFLOP per token, the count is %g", mflop, want / 1e6);
    const char *at = strstr(speed, "GFLOP/s");
    ck_assert_ptr_nonnull(at);
    while (at > speed && at[-1] == ' ') at--;
    while (at > speed && (at[-1] == '.' || (at[-1] >= '0' && at[-1] <= '9'))) at--;
    double peak = atof(at);
    ck_assert_msg(peak > 1.0, "peak %g GFLOP/s", peak);
    int lines = 0;
    for (const char *line = next_step_line(r->out, NULL); line; line = next_step_line(r->out, line)) {
        const LineSpeed at_line = line_speed(line);
        ck_assert_msg(fabs(at_line.gflops - at_line.tokens_per_s * mflop * 1e6 / 1e9) <= 0.5 + 1e-3 * at_line.gflops,
                      "%.200s", line);
        ck_assert_msg(is_share_of(at_line.percent, at_line.gflops, peak), "%.200s", line);
        lines++;
    }
    ck_assert_int_eq(lines, 3);  // steps 0, 10, 20
}
END_TEST

// A start whose probe read low is corrected: the run is confined to one of
// this process's CPUs (taskset), where four busy loops share it with the
// run's two threads until its start has measured the peak (the `speed:`
// line on stderr), so the probe gets a third of the CPU or so; when it is
// measured again, at an evaluation 10 s on (train_progress.c's
// PEAK_RECHECK_INTERVAL), the loops are gone and the reading is clearly
// higher (the other test process, `make test` runs two, may share the CPU
// throughout: it lowers both readings). The run says so on stderr, and the
// progress lines from that step on give their share of the new peak. (The
// loops end after a minute in any case, should the test be stopped.)
START_TEST(a_peak_the_start_read_low_is_raised_when_measured_again) {
    cpu_set_t allowed;
    ck_assert_int_eq(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &allowed)) cpu++;
    char args[2048];
    snprintf(args, sizeof args,
             "-c 'for i in 1 2 3 4; do timeout 60 taskset -c %d sh -c \"while :; do :; done\" & loops=\"$loops $!\"; done; "
             "taskset -c %d %s train %s --out %s/run --batch 4 --context 16 --embd 16 --heads 2 --layers 2 "
             "--seed 9 --threads 2 --time 13 --eval-interval 100 & run=$!; "
             "while kill -0 $run 2>/dev/null && ! grep -q \"FMA peak on\" %s/stderr.txt; do sleep 0.05; done; "
             "kill $loops; wait $run'",
             cpu, cpu, tinygpt_binary(), corpus, dir, dir);
    RunResult *r = run_binary("sh", dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    const char *at = strstr(r->err, "FMA peak on 2 threads: ");
    ck_assert_msg(at != NULL, "%s", r->err);
    const double start_peak = atof(at + strlen("FMA peak on 2 threads: "));
    at = strstr(r->err, "measured again at step ");
    ck_assert_msg(at != NULL, "the peak was not raised (the start read %g GFLOP/s beside the busy loops): %s",
                  start_peak, r->err);
    long raised_at;
    double raised, before;
    ck_assert_int_eq(sscanf(at, "measured again at step %ld: %lf GFLOP/s, not the %lf of before", &raised_at, &raised,
                            &before), 3);
    ck_assert_msg(fabs(before - start_peak) <= 1.0 && raised >= 1.1 * start_peak - 1.0, "%s", r->err);
    int after = 0;
    for (const char *line = next_step_line(r->out, NULL); line; line = next_step_line(r->out, line)) {
        const LineSpeed at_line = line_speed(line);
        ck_assert_msg(is_share_of(at_line.percent, at_line.gflops, at_line.step < raised_at ? start_peak : raised),
                      "%.200s", line);
        after += at_line.step >= raised_at;
    }
    ck_assert_int_gt(after, 0);
}
END_TEST

// A peak given by --peak is the one the shares are of, from the first line
// to the last (of those the capture keeps: next_step_line): the start says
// so, and past PEAK_RECHECK_INTERVAL (10 s) the run measures nothing again.
// 7 GFLOP/s is far below any reading of this CPU's (a measurement would
// raise it at the first check, as above).
START_TEST(a_peak_given_by_flag_is_the_one_the_shares_are_of_throughout) {
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s/run " TINY " --time 11 --eval-interval 50 --sample-every 0 --peak 7",
             corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->err, "FMA peak on 1 threads: 7 GFLOP/s (--peak)"), "%s", r->err);
    ck_assert_msg(!strstr(r->err, "measured again"), "%s", r->err);
    int lines = 0;
    for (const char *line = next_step_line(r->out, NULL); line; line = next_step_line(r->out, line)) {
        const LineSpeed at_line = line_speed(line);
        ck_assert_msg(is_share_of(at_line.percent, at_line.gflops, 7.0), "%.200s", line);
        lines++;
    }
    ck_assert_int_gt(lines, 2);
}
END_TEST

// ---- 2. --sample-every -----------------------------------------------------------------

// csv_field_unquoted: the CSV field that starts at "field" (quoted, as
// csv_quote writes it) into out[cap].
static void csv_field_unquoted(const char *field, char *out, size_t cap) {
    ck_assert_msg(field[0] == '"', "the sample is not a quoted field: %.40s", field);
    size_t n = 0;
    for (const char *c = field + 1; *c; c++) {
        if (*c == '"' && c[1] != '"') break;
        if (*c == '"') c++;
        ck_assert_uint_lt(n + 1, cap);
        out[n++] = *c;
    }
    out[n] = '\0';
}

// row_sample: log.csv's sample column of step "step" ("" when it has none).
static void row_sample(const char *log, int step, char *out, size_t cap) {
    const char *line = log;
    for (int i = 0; i <= step; i++) line = strchr(line, '\n') + 1;  // past the header and "step" rows
    const char *field = line;
    for (int column = 0; column < 10; column++) field = strchr(field, ',') + 1;
    out[0] = '\0';
    if (*field != '\n') csv_field_unquoted(field, out, cap);
}

// one_line: "text" with each newline as the sign the samples use, U+21B5.
static void one_line(const char *text, char *out, size_t cap) {
    size_t n = 0;
    for (const char *c = text; *c; c++) {
        const char *piece = *c == '\n' ? "\xe2\x86\xb5" : (char[2]){*c, 0};
        size_t len = strlen(piece);
        ck_assert_uint_lt(n + len, cap);
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
}

START_TEST(the_sample_at_a_step_is_what_tinygpt_sample_draws_from_its_weights) {
    char args[1024];
    snprintf(args, sizeof args,
             "train %s --out %s/run " TINY " --steps 21 --sample-every 10 --save-every 10 --keep 3 --seed 5", corpus,
             dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    int printed = 0;
    for (const char *c = r->out; (c = strstr(c, "\n  sample: ")); c++) printed++;
    ck_assert_int_eq(printed, 3);  // steps 0, 10 and the last, 20
    char *train_out = strdup(r->out);

    size_t len;
    char *log = slurp(path_in(dir, "run/log.csv"), &len);
    char logged[1024], none[1024];
    row_sample(log, 1, none, sizeof none);
    ck_assert_str_eq(none, "");
    // Step 10's sample was drawn from the weights after 10 steps, which
    // checkpoint-10 holds: `sample` draws the same text (64 tokens, the
    // run's --seed, no prompt).
    row_sample(log, 10, logged, sizeof logged);
    ck_assert_uint_gt(strlen(logged), 0);
    snprintf(args, sizeof args, "sample --model %s/run/checkpoint-10/model.safetensors --seed 5 --tokens 64", dir);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    char drawn[1024];
    size_t n = strlen(r->out);
    if (n > 0 && r->out[n - 1] == '\n') r->out[n - 1] = '\0';  // the newline sample ends its output with
    one_line(r->out, drawn, sizeof drawn);
    // (If the text itself ended in a newline, sample added none.)
    char drawn_nl[1100];
    snprintf(drawn_nl, sizeof drawn_nl, "%s\xe2\x86\xb5", drawn);
    ck_assert_msg(strcmp(logged, drawn) == 0 || strcmp(logged, drawn_nl) == 0, "logged '%s', sample drew '%s'",
                  logged, drawn);
    // The printed line is the logged one.
    char printed_line[1200];
    snprintf(printed_line, sizeof printed_line, "\n  sample: %s\n", logged);
    ck_assert_msg(strstr(train_out, printed_line) != NULL, "'%s' is not printed: %s", logged, train_out);
    free(train_out);
    free(log);

    // 0: no samples at all.
    snprintf(args, sizeof args, "train %s --out %s/quiet " TINY " --steps 21 --sample-every 0", corpus, dir);
    r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    ck_assert_msg(strstr(r->out, "sample:") == NULL, "%s", r->out);
}
END_TEST

// ---- 3. The validation loss ------------------------------------------------------------

// The corpus's validation split (10%: ~420 tokens) holds 26 windows of 16:
// fewer than --eval-batches 20 x B 4, so every window is scored and the
// logged loss is eval's, to float rounding (the two sum in other orders).
START_TEST(the_logged_validation_loss_is_evals_number_for_the_same_weights) {
    char args[1024];
    snprintf(args, sizeof args, "train %s --out %s/run " TINY " --steps 21 --eval-interval 10 --save-every 10 --keep 3",
             corpus, dir);
    RunResult *r = run_tinygpt(dir, args);
    ck_assert_msg(r->status == 0, "%s", r->err);
    size_t len;
    char *log = slurp(path_in(dir, "run/log.csv"), &len);
    for (int step = 10; step <= 20; step += 10) {
        snprintf(args, sizeof args, "eval --model %s/run/checkpoint-%d/model.safetensors --split val --json %s", dir,
                 step, corpus);
        r = run_tinygpt(dir, args);
        ck_assert_msg(r->status == 0, "%s", r->err);
        const char *loss = strstr(r->out, "\"loss\":");
        ck_assert_msg(loss != NULL, "%s", r->out);
        double evaluated = atof(loss + strlen("\"loss\":"));
        double logged = log_field(log, step, 2);
        ck_assert_msg(fabs(logged - evaluated) < 2e-5, "step %d: train logged %.6f, eval gives %.6f", step, logged,
                      evaluated);
    }
    free(log);
}
END_TEST

// batch_spread: K windows of a span's W, row r the window floor(r W / K),
// from every part of the span; with K = W every window once, end to end.
START_TEST(batch_spread_takes_windows_from_the_whole_span) {
    enum { N = 101, T = 4, B = 3 };
    unsigned char ids[N];
    for (int i = 0; i < N; i++) ids[i] = (unsigned char)i;
    TokenSpan span = {ids, N, 1};
    ck_assert_uint_eq(span_windows(span, T), 25);  // (101 - 1) / 4
    int inputs[B * T], targets[B * T];
    // 6 of 25, in two batches of 3: windows 0, 4, 8, 12, 16, 20.
    for (size_t first = 0; first < 6; first += B) {
        batch_spread(span, first, B, 6, T, inputs, targets);
        for (int b = 0; b < B; b++) {
            int window = (int)((first + (size_t)b) * 25 / 6);
            for (int t = 0; t < T; t++) {
                ck_assert_int_eq(inputs[b * T + t], window * T + t);
                ck_assert_int_eq(targets[b * T + t], window * T + t + 1);
            }
        }
    }
    // All 25: window k starts at 4k, the last ends at token 100.
    for (size_t first = 0; first < 24; first += B) {
        batch_spread(span, first, B, 25, T, inputs, targets);
        for (int b = 0; b < B; b++) ck_assert_int_eq(inputs[b * T], (int)(first + (size_t)b) * T);
    }
    batch_spread(span, 24, 1, 25, T, inputs, targets);
    ck_assert_int_eq(targets[T - 1], 100);
}
END_TEST

Suite *timed_suite(void) {
    Suite *s = suite_create("timed");
    TCase *time = tcase_create("time");
    tcase_add_checked_fixture(time, setup, teardown);
    tcase_set_timeout(time, TEST_TIMEOUT_SECONDS);
    tcase_add_test(time, a_timed_run_ends_with_its_time_and_records_the_steps_reached);
    tcase_add_test(time, a_time_that_does_not_bind_leaves_the_run_to_its_steps);
    tcase_add_test(time, a_timed_run_resumes_with_the_rest_of_its_budget);
    tcase_add_test(time, a_run_the_clock_ended_asks_for_more_time_even_after_a_save_every_step);
    tcase_add_test(time, progress_lines_give_gflops_as_a_share_of_the_measured_peak);
    tcase_add_test(time, a_peak_the_start_read_low_is_raised_when_measured_again);
    tcase_add_test(time, a_peak_given_by_flag_is_the_one_the_shares_are_of_throughout);
    suite_add_tcase(s, time);

    TCase *samples = tcase_create("samples");
    tcase_add_checked_fixture(samples, setup, teardown);
    tcase_set_timeout(samples, TEST_TIMEOUT_SECONDS);
    tcase_add_test(samples, the_sample_at_a_step_is_what_tinygpt_sample_draws_from_its_weights);
    suite_add_tcase(s, samples);

    TCase *validation = tcase_create("validation");
    tcase_add_checked_fixture(validation, setup, teardown);
    tcase_set_timeout(validation, TEST_TIMEOUT_SECONDS);
    tcase_add_test(validation, the_logged_validation_loss_is_evals_number_for_the_same_weights);
    tcase_add_test(validation, batch_spread_takes_windows_from_the_whole_span);
    suite_add_tcase(s, validation);
    return s;
}
