// test_train.c: what `tinygpt train` promises beyond training
// (src/commands/train.c):
// a stopped run resumes bit for bit; Ctrl-C and SIGTERM save a checkpoint
// and a second signal quits at once; a killed run loses at most the steps
// since its last periodic checkpoint; a diverging run stops before a NaN
// reaches a checkpoint; the run directory belongs to one run at a time and
// is never overwritten by accident; a log that cannot be written stops the
// run with a checkpoint; progress shows without validation and across a
// resume; and bad input gets a one-line error and the right exit status (2
// for the command line, 1 for a file).
//
// Each test runs the binary ($TINYGPT_BIN, default ./tinygpt) in a fresh
// directory, through fork and exec, so it can send signals to it. Runs are
// tiny (tens of milliseconds) except where a test needs a step slow enough
// to land a second signal inside it.
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "helpers.h"
#include "plot.h"
#include "run_dir.h"
#include "tests.h"

// stb_image decodes loss.png to compare pictures pixel by pixel. Only its
// PNG reader, static to this file. The functions it declares and this file
// does not call would warn, and gcc reports those at the end of the file,
// so the warning stays off to the end.
#pragma GCC diagnostic ignored "-Wunused-function"
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#include <stb_image.h>

// Runs are tiny, but a loaded 2-core machine (or a sanitizer) slows them down.
#define TEST_TIMEOUT_SECONDS 120
// How long a test waits for the binary to reach a point (a log row, a message).
#define WAIT_SECONDS 60.0

static char work_dir[256];
static char corpus[512];  // work_dir/corpus.txt: a few KB of rhythmic text

// in_work: "work_dir/name" (path_in, helpers.h: 8 rotating buffers).
static const char *in_work(const char *name) { return path_in(work_dir, name); }

// ---- Running the binary -------------------------------------------------------

// When not 0, the largest file the next spawned tinygpt may write, in bytes
// (RLIMIT_FSIZE): a write past it fails with EFBIG, as on a full disk, only
// for that process. SIGXFSZ, which would kill it instead, is ignored.
static rlim_t child_file_limit;

// spawn: start `tinygpt ARGS...` (a NULL-terminated list) with stdout and
// stderr going to work_dir/out.txt and err.txt; returns its pid.
static pid_t spawn_args(const char *const *args) {
    const char *argv[64] = {tinygpt_binary()};
    int argc = 1;
    for (; args[argc - 1]; argc++) {
        ck_assert_int_lt(argc, 63);
        argv[argc] = args[argc - 1];
    }
    argv[argc] = NULL;
    // Empty the output files here, not in the child: a test that waits for
    // output must not see the last run's, and signal a child that has not yet
    // become tinygpt (it still runs the test's own signal handlers).
    const char *out_path = in_work("out.txt"), *err_path = in_work("err.txt");
    ck_assert_int_eq(truncate(out_path, 0) == 0 || errno == ENOENT, 1);
    ck_assert_int_eq(truncate(err_path, 0) == 0 || errno == ENOENT, 1);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "r", stdin) || !freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr))
            _exit(126);
        struct rlimit limit = {child_file_limit, child_file_limit};
        if (child_file_limit > 0 && (signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &limit) != 0))
            _exit(125);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}
#define SPAWN(...) spawn_args((const char *const[]){__VA_ARGS__, NULL})

// finish: wait for "pid"; its exit status, or 128 + the signal that killed it.
static int finish(pid_t pid) {
    int raw;
    while (waitpid(pid, &raw, 0) < 0) ck_assert_int_eq(errno, EINTR);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
}
#define RUN(...) finish(SPAWN(__VA_ARGS__))

// The last run's stderr, in a buffer reused by each call.
static const char *last_err(void) {
    static char *text;
    free(text);
    text = slurp_or_empty(in_work("err.txt"), NULL);
    return text;
}

// expect_status: the last run exited with "status" and its stderr mentions
// "needle". An error status must come with exactly one error line (one that
// starts with "tinygpt"; a run that fails after it started training has also
// printed its "model:" and "memory:" lines), and that line says "needle".
// (expect_failure, helpers.h, wants stderr to be that one line alone.)
static void expect_status(int got, int status, const char *needle) {
    const char *err = last_err();
    ck_assert_msg(got == status, "exited %d, expected %d; stderr: %s", got, status, err);
    ck_assert_msg(strstr(err, needle) != NULL, "stderr does not mention '%s': %s", needle, err);
    if (status != 1 && status != 2) return;
    int error_lines = 0;
    for (const char *line = err; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line)) {
        if (strncmp(line, "tinygpt", 7) != 0) continue;
        error_lines++;
        const char *end = strchr(line, '\n');
        const char *found = strstr(line, needle);
        ck_assert_msg(found && (!end || found < end), "the error line does not say '%s': %s", needle, err);
    }
    ck_assert_msg(error_lines == 1, "%d error lines, not one: %s", error_lines, err);
}

// ---- Waiting for the binary -------------------------------------------------------

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// count_lines: newlines in "path" (0 if missing).
static int count_lines(const char *path) {
    char *text = slurp_or_empty(path, NULL);
    int n = 0;
    for (const char *p = text; (p = strchr(p, '\n')) != NULL; p++) n++;
    free(text);
    return n;
}

// still_running: fail (with its stderr) if "pid" has already exited.
static void still_running(pid_t pid) {
    int raw;
    ck_assert_msg(waitpid(pid, &raw, WNOHANG) == 0, "tinygpt exited early: %s", last_err());
}

// wait_for_lines: until "path" has at least "n" lines (the training status
// lines go to out.txt, flushed at each evaluation), while "pid" runs.
static void wait_for_lines(pid_t pid, const char *path, int n) {
    double deadline = now_seconds() + WAIT_SECONDS;
    while (count_lines(path) < n) {
        still_running(pid);
        ck_assert_msg(now_seconds() < deadline, "'%s' did not reach %d lines in %.0f s", path, n, WAIT_SECONDS);
        sleep_ms(2);
    }
}

// wait_for_text: until "path" contains "needle", while "pid" runs.
static void wait_for_text(pid_t pid, const char *path, const char *needle) {
    double deadline = now_seconds() + WAIT_SECONDS;
    for (;;) {
        char *text = slurp_or_empty(path, NULL);
        bool found = strstr(text, needle) != NULL;
        free(text);
        if (found) return;
        still_running(pid);
        ck_assert_msg(now_seconds() < deadline, "'%s' did not say '%s' in %.0f s", path, needle, WAIT_SECONDS);
        sleep_ms(1);
    }
}

// ---- Comparing runs -----------------------------------------------------------------

// expect_same_file: "name" in the two run directories, byte for byte; both
// missing counts as the same when "optional".
static void expect_same_file(const char *dir_a, const char *dir_b, const char *name, bool optional) {
    char path_a[600], path_b[600];
    snprintf(path_a, sizeof path_a, "%s/%s", dir_a, name);
    snprintf(path_b, sizeof path_b, "%s/%s", dir_b, name);
    if (optional && access(path_a, F_OK) != 0 && access(path_b, F_OK) != 0) return;
    size_t len_a, len_b;
    char *a = slurp_or_empty(path_a, &len_a), *b = slurp_or_empty(path_b, &len_b);
    ck_assert_msg(len_a > 0 && len_a == len_b && memcmp(a, b, len_a) == 0, "%s differs", name);
    free(a);
    free(b);
}

// newest_checkpoint: the directory of the newest checkpoint of the run in
// "dir" (run_dir.h), which must have one; "out" holds it.
static const char *newest_checkpoint(const char *dir, char *out, size_t cap) {
    long step;
    ck_assert_msg(run_dir_latest_checkpoint(dir, out, cap, &step), "'%s' holds no checkpoint", dir);
    return out;
}

// expect_same_run: two run directories hold the same log numbers and
// byte-identical newest checkpoints, of the same step: the model (weights,
// step and training state alike) and the optimizer state (AdamW's moments),
// and the same model.safetensors.
static void expect_same_run(const char *dir_a, const char *dir_b) {
    char *log_a = log_numbers(dir_a), *log_b = log_numbers(dir_b);
    ck_assert_msg(strlen(log_a) > 0 && strcmp(log_a, log_b) == 0, "the logs differ:\n%s\n---\n%s", log_a, log_b);
    free(log_a);
    free(log_b);
    expect_same_file(dir_a, dir_b, "model.safetensors", false);
    char a[4200], b[4200], name[600];
    ck_assert_str_eq(path_base(newest_checkpoint(dir_a, a, sizeof a)), path_base(newest_checkpoint(dir_b, b, sizeof b)));
    snprintf(name, sizeof name, "%s/model.safetensors", path_base(a));
    expect_same_file(dir_a, dir_b, name, false);
    snprintf(name, sizeof name, "%s/optimizer.safetensors", path_base(a));
    expect_same_file(dir_a, dir_b, name, true);
}

// saved_step: the step of the checkpoint in "dir", which must load whole.
static long saved_step(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    Model m;
    Tokenizer tok;
    long step = -1;
    Error err = {{0}};
    ck_assert_msg(checkpoint_load(path, &m, &tok, 1, false, &step, &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
    return step;
}

// ---- Fixture ------------------------------------------------------------------------

// write_text: "text" into work_dir/name; returns the path.
static const char *write_text(const char *name, const char *text, size_t len) {
    const char *path = in_work(name);
    write_bytes(path, text, len);
    return path;
}

static void setup(void) {
    scratch_dir_create(work_dir, sizeof work_dir);
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", work_dir);
    FILE *f = fopen(corpus, "w");
    ck_assert_ptr_nonnull(f);
    const char *lines[] = {"the cat sat on the mat.\n", "a whale, a white whale!\n", "call me ishmael.\n",
                           "the sea is wide and deep.\n"};
    for (int i = 0; i < 400; i++) fputs(lines[(i * 7 + i / 3) % 4], f);
    fclose(f);
}

static void teardown(void) { scratch_dir_remove(work_dir); }

// The tiny model most tests train, a gpt of the default 4 blocks: about a
// millisecond per step. No samples: the tests that count progress lines
// count those alone (test_timed.c tests the samples). A peak given, so that
// the run skips its 0.1 s probe of the CPU's (test_timed.c tests the probe).
#define TINY "--batch", "4", "--context", "16", "--embd", "16", "--heads", "2", "--eval-interval", "10", "--seed", "9", \
             "--sample-every", "0", "--peak", "100"

// ---- Resuming ----------------------------------------------------------------------

START_TEST(a_run_stopped_and_resumed_twice_matches_an_uninterrupted_run_bit_for_bit) {
    const char *orders[] = {"random", "sequential", "shuffled", "random"};
    const char *archs[] = {"gpt", "gpt", "gpt", "card"};
    for (int i = 0; i < 4; i++) {
        char whole[300], parts[300], name[32];
        snprintf(name, sizeof name, "%s_%s_whole", archs[i], orders[i]);
        snprintf(whole, sizeof whole, "%s", in_work(name));
        snprintf(name, sizeof name, "%s_%s_parts", archs[i], orders[i]);
        snprintf(parts, sizeof parts, "%s", in_work(name));
        ck_assert_int_eq(RUN("train", corpus, "--out", whole, "--steps", "40", "--order", orders[i], "--arch", archs[i], TINY), 0);
        // Stop after 7 steps (not an evaluation step), then after 20 (one),
        // then finish; FILE is left out, so it comes from the checkpoint.
        int status = RUN("train", corpus, "--out", parts, "--steps", "40", "--order", orders[i], "--arch", archs[i], TINY,
                         "--stop-after", "7");
        expect_status(status, 0, "stopped after 7 of 40 steps");
        ck_assert_int_eq(saved_step(parts), 7);
        expect_status(RUN("train", "--resume", parts, "--stop-after", "20"), 0, "stopped after 20 of 40 steps");
        expect_status(RUN("train", "--resume", parts), 0, "saved");
        expect_same_run(whole, parts);
    }
}
END_TEST

// holds: whether bytes[0..len) contain "text".
static bool holds(const char *bytes, size_t len, const char *text) {
    const size_t n = strlen(text);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(bytes + i, text, n) == 0) return true;
    return false;
}

// Muon keeps a momentum buffer for each block matrix besides AdamW's
// moments for the rest; --resume must continue both exactly. With SwiGLU,
// so the matrices include gate_proj, up_proj and down_proj.
START_TEST(a_muon_run_stopped_and_resumed_matches_an_uninterrupted_run_bit_for_bit) {
    char whole[300], parts[300];  // in_work's buffer is reused by every call
    snprintf(whole, sizeof whole, "%s", in_work("muon_whole"));
    snprintf(parts, sizeof parts, "%s", in_work("muon_parts"));
    ck_assert_int_eq(RUN("train", corpus, "--out", whole, "--steps", "30", "--optimizer", "muon", "--mlp", "swiglu",
                         "--warmup", "3", TINY), 0);
    expect_status(RUN("train", corpus, "--out", parts, "--steps", "30", "--optimizer", "muon", "--mlp", "swiglu",
                      "--warmup", "3", TINY, "--stop-after", "7"),
                  0, "stopped after 7 of 30 steps");
    expect_status(RUN("train", "--resume", parts), 0, "saved");
    expect_same_run(whole, parts);
    // The state holds Muon's buffer for a block matrix, AdamW's moments for the embedding, and nothing else for either.
    char newest[4200], state[4400];
    snprintf(state, sizeof state, "%s/optimizer.safetensors", newest_checkpoint(whole, newest, sizeof newest));
    size_t len = 0;
    char *bytes = slurp_or_empty(state, &len);
    ck_assert(holds(bytes, len, "\"momentum_buffer.blocks.0.mlp.up_proj.weight\""));
    ck_assert(holds(bytes, len, "\"exp_avg.tok_emb.weight\""));
    ck_assert(!holds(bytes, len, "\"exp_avg.blocks.0.attn.q.weight\""));
    ck_assert(!holds(bytes, len, "\"momentum_buffer.tok_emb.weight\""));
    free(bytes);
}
END_TEST

START_TEST(resuming_drops_log_rows_written_after_the_checkpoint) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("whole"), "--steps", "30", TINY), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("parts"), "--steps", "30", TINY, "--stop-after", "12"), 0);
    // As if the run had gone on past its checkpoint and then crashed mid-row.
    FILE *log = fopen(in_work("parts/log.csv"), "a");
    ck_assert_ptr_nonnull(log);
    fputs("12,9.999,,0.5,1.0,100\n13,9.999,,0.5,1.0,100\n14,9.9", log);
    fclose(log);
    ck_assert_int_eq(RUN("train", corpus, "--resume", in_work("parts")), 0);
    expect_same_run(in_work("whole"), in_work("parts"));
}
END_TEST

// A constant learning rate: the cosine decays over the run's --steps, so a
// run that is extended follows another schedule than one planned long.
// expect_same_weights_at_step: the checkpoints at "path_a" and "path_b"
// are both of step "step" and hold the same weights, bit for bit.
static void expect_same_weights_at_step(const char *path_a, const char *path_b, long step) {
    Model a, b;
    Tokenizer ta, tb;
    Error err = {{0}};
    long step_a, step_b;
    ck_assert_msg(checkpoint_load(path_a, &a, &ta, 1, false, &step_a, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_load(path_b, &b, &tb, 1, false, &step_b, &err), "%s", err.msg);
    ck_assert_int_eq(step_a, step);
    ck_assert_int_eq(step_b, step);
    ck_assert_int_eq(a.param_table.total, b.param_table.total);
    ck_assert_mem_eq(a.params_memory, b.params_memory, a.param_table.total * sizeof(float));
    model_free(&a);
    model_free(&b);
    tokenizer_free(&ta);
    tokenizer_free(&tb);
}

START_TEST(resuming_with_a_larger_steps_trains_further_to_the_same_weights) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("long"), "--steps", "30", TINY, "--lr-schedule", "constant"), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("short"), "--steps", "20", TINY, "--lr-schedule", "constant"), 0);
    ck_assert_int_eq(RUN("train", "--resume", in_work("short"), "--steps", "30"), 0);
    // The logs differ (the 20-step run evaluated at its last step, 19), the
    // weights must not: validation draws no random numbers.
    expect_same_weights_at_step(in_work("long/model.safetensors"), in_work("short/model.safetensors"), 30);
}
END_TEST

// A run on 1 thread resumed without --threads goes on with 1: on the
// default (every core) a step's threads would each take rows of their own
// and change the last bits (model.h, "Slices"), and the resumed run would
// not end where the uninterrupted one does.
START_TEST(resuming_keeps_the_runs_threads) {
    // (Dropout makes the tiny model's activations big enough for slices.)
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("whole"), "--steps", "30", TINY, "--dropout", "0.1",
                         "--threads", "1"),
                     0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("part"), "--steps", "15", TINY, "--dropout", "0.1",
                         "--threads", "1"),
                     0);
    ck_assert_int_eq(RUN("train", "--resume", in_work("part"), "--steps", "30"), 0);
    expect_same_weights_at_step(in_work("whole/model.safetensors"), in_work("part/model.safetensors"), 30);
}
END_TEST

START_TEST(resume_refuses_flags_that_would_change_the_run) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "5", TINY), 0);
    const char *flags[][2] = {{"--lr", "0.1"},           {"--seed", "3"},     {"--batch", "8"}, {"--out", "elsewhere"},
                              {"--order", "sequential"}, {"--context", "8"}, {"--arch", "card"}, {"--layers", "2"},
                              {"--grad-accum", "2"}};
    char *before = tree_snapshot(in_work("r"));
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        expect_status(RUN("train", "--resume", in_work("r"), "--steps", "9", flags[i][0], flags[i][1]), 2, flags[i][0]);
    expect_tree_unchanged(in_work("r"), before, "resumes refused for their flags");
}
END_TEST

START_TEST(resume_of_a_finished_run_asks_for_a_larger_steps) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "5", TINY), 0);
    char *before = tree_snapshot(in_work("r"));
    expect_status(RUN("train", "--resume", in_work("r")), 2, "give a larger --steps");
    expect_status(RUN("train", "--resume", in_work("r"), "--steps", "3"), 2, "already at step 5");
    expect_tree_unchanged(in_work("r"), before, "resumes of a finished run");
}
END_TEST

START_TEST(resume_refuses_a_different_text) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "40", TINY, "--stop-after", "5"), 0);
    // The same characters, so the vocabulary accepts it: only the fingerprint can tell.
    char *text = slurp_or_empty(corpus, NULL);
    text[0] = text[0] == 'a' ? 'c' : 'a';
    const char *other = write_text("other.txt", text, strlen(text));
    free(text);
    char *before = tree_snapshot(in_work("r"));
    expect_status(RUN("train", other, "--resume", in_work("r")), 1, "is not the text this run was trained on");
    expect_tree_unchanged(in_work("r"), before, "a resume on another text");
}
END_TEST

// The weights and AdamW's moments must come from the same save. A save
// writes both into one checkpoint directory, so a crash cannot mix them;
// here a hand mixes them (--keep 2 keeps the older checkpoint to take the
// state from), and --resume refuses, naming both steps.
START_TEST(resume_refuses_an_optimizer_state_of_another_step_naming_both) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "40", TINY, "--stop-after", "5"), 0);
    ck_assert_int_eq(RUN("train", "--resume", in_work("r"), "--stop-after", "10", "--keep", "2"), 0);
    size_t len;
    char *older = slurp_or_empty(in_work("r/checkpoint-5/optimizer.safetensors"), &len);
    ck_assert_uint_gt(len, 0);
    write_text("r/checkpoint-10/optimizer.safetensors", older, len);
    free(older);
    char *before = tree_snapshot(in_work("r"));
    expect_status(RUN("train", "--resume", in_work("r")), 1, "holds the optimizer's state after step 5 but");
    ck_assert_ptr_nonnull(strstr(last_err(), "holds the weights after step 10"));
    expect_tree_unchanged(in_work("r"), before, "a resume refused for its optimizer state");
    // Without the file at all, it says what to do: go back to the checkpoint before.
    ck_assert_int_eq(unlink(in_work("r/checkpoint-10/optimizer.safetensors")), 0);
    before = tree_snapshot(in_work("r"));
    expect_status(RUN("train", "--resume", in_work("r")), 1, "--init");
    ck_assert_msg(strstr(last_err(), "tinygpt train --resume ") && strstr(last_err(), "r/checkpoint-5"),
                  "no way back to checkpoint-5: %s", last_err());
    expect_tree_unchanged(in_work("r"), before, "a resume refused for a missing optimizer state");
}
END_TEST

// --resume of a directory with nothing to resume says why: no run at all,
// or a run that never saved (which --force starts over), and leaves it as
// it was.
START_TEST(resume_of_a_directory_without_a_checkpoint_says_why) {
    mkdir(in_work("empty"), 0700);
    char *before = tree_snapshot(in_work("empty"));
    expect_status(RUN("train", "--resume", in_work("empty")), 1,
                  "empty' holds no run (no checkpoint-<step> and no model.safetensors)");
    expect_tree_unchanged(in_work("empty"), before, "--resume of an empty directory");
    // A run stopped before its first save: its log, its picture, no checkpoint.
    ck_assert_int_eq(mkdir(in_work("unsaved"), 0700), 0);
    write_text("unsaved/log.csv", "step,train_loss,val_loss\n", 25);
    before = tree_snapshot(in_work("unsaved"));
    expect_status(RUN("train", "--resume", in_work("unsaved")), 1, "holds a run that never saved a checkpoint (log.csv)");
    ck_assert_ptr_nonnull(strstr(last_err(), "--force"));
    expect_tree_unchanged(in_work("unsaved"), before, "--resume of a run that never saved");
}
END_TEST

START_TEST(resume_from_a_checkpoint_without_training_state_says_to_use_init) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "5", TINY), 0);
    // Re-save it without the state, as an older tinygpt would have.
    Model m;
    Tokenizer tok;
    Error err = {{0}};
    const char *model = in_work("r/checkpoint-5/model.safetensors");
    ck_assert_msg(checkpoint_load(model, &m, &tok, 1, false, NULL, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_save(&m, &tok, 5, model, &err), "%s", err.msg);
    model_free(&m);
    tokenizer_free(&tok);
    expect_status(RUN("train", "--resume", in_work("r"), "--steps", "9"), 1, "--init");
}
END_TEST

// --keep is the run's: a run stopped and resumed without it keeps as many
// checkpoints as it was started with; given again, it changes.
START_TEST(resuming_keeps_the_runs_keep) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "40", TINY, "--save-every", "5", "--keep",
                         "3", "--stop-after", "10"),
                     0);
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "20"), 0, "stopped after 20 of 40 steps");
    const char *kept[] = {"r/checkpoint-10", "r/checkpoint-15", "r/checkpoint-20"};
    for (int i = 0; i < COUNT(kept); i++)
        ck_assert_msg(access(in_work(kept[i]), F_OK) == 0, "%s is gone: the resumed run forgot --keep 3", kept[i]);
    ck_assert_msg(access(in_work("r/checkpoint-5"), F_OK) != 0, "checkpoint-5, the fourth newest, is still there");
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "25", "--keep", "1"), 0, "stopped after 25");
    ck_assert_msg(access(in_work("r/checkpoint-20"), F_OK) != 0, "--keep 1 given again kept checkpoint-20");
    ck_assert_int_eq(access(in_work("r/checkpoint-25"), F_OK), 0);
}
END_TEST

// --resume DIR/checkpoint-N continues the run in DIR from step N, as if
// the steps after it had not run: to the weights and the log of an
// undisturbed run, bit for bit. It is the way back when the newest
// checkpoint is damaged, and --resume DIR's refusal says so.
START_TEST(resume_from_an_older_checkpoint_continues_that_step_bit_for_bit) {
    char whole[300], parts[300], older[400];
    snprintf(whole, sizeof whole, "%s", in_work("whole"));
    snprintf(parts, sizeof parts, "%s", in_work("parts"));
    snprintf(older, sizeof older, "%s/checkpoint-15", parts);
    ck_assert_int_eq(RUN("train", corpus, "--out", whole, "--steps", "30", TINY, "--save-every", "5", "--keep", "2"), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", parts, "--steps", "30", TINY, "--save-every", "5", "--keep", "2",
                         "--stop-after", "20"),
                     0);
    // A byte of the newest checkpoint's weights changes.
    size_t len;
    char *model = slurp_or_empty(in_work("parts/checkpoint-20/model.safetensors"), &len);
    ck_assert_uint_gt(len, 100);
    model[len - 5] ^= 0x40;
    write_text("parts/checkpoint-20/model.safetensors", model, len);
    free(model);
    char *before = tree_snapshot(parts);
    expect_status(RUN("train", "--resume", parts), 1, "checkpoint-20/model.safetensors");
    char way_back[600];
    snprintf(way_back, sizeof way_back, "tinygpt train --resume %s", older);
    ck_assert_msg(strstr(last_err(), way_back) != NULL, "the refusal does not say '%s': %s", way_back, last_err());
    expect_tree_unchanged(parts, before, "a resume of a damaged checkpoint");
    // The way back, as the message says (with a slash after it, as a shell completes it).
    char slashed[420];
    snprintf(slashed, sizeof slashed, "%s/", older);
    expect_status(RUN("train", "--resume", slashed), 0, "saved");
    expect_same_run(whole, parts);
}
END_TEST

START_TEST(train_without_file_or_resume_is_a_usage_error) {
    expect_status(RUN("train", "--steps", "5"), 2, "missing FILE");
}
END_TEST

// ---- Signals and crashes ---------------------------------------------------------------

// The tiny run, long enough to be interrupted: it never ends on its own
// within a test, and prints (and flushes) a status line every 10 steps.
#define LONG_TINY "--steps", "1000000", TINY

START_TEST(ctrl_c_saves_a_checkpoint_exits_130_and_the_run_resumes_to_an_uninterrupted_runs_weights) {
    pid_t pid = SPAWN("train", corpus, "--out", in_work("parts"), LONG_TINY);
    wait_for_lines(pid, in_work("out.txt"), 3);  // 20 steps or more
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    expect_status(finish(pid), 130, "saved");
    const char *err = last_err();
    ck_assert_msg(strstr(err, "stopping after this step"), "no notice of the stop: %s", err);
    ck_assert_msg(strstr(err, "continue with: tinygpt train --resume"), "no hint to resume: %s", err);
    long stopped = saved_step(in_work("parts"));
    ck_assert_int_ge(stopped, 20);

    // Resume for 25 more steps, and compare with a run that did them all at once.
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", stopped + 25);
    ck_assert_int_eq(RUN("train", "--resume", in_work("parts"), "--steps", steps), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("whole"), "--steps", steps, TINY), 0);
    expect_same_run(in_work("whole"), in_work("parts"));
}
END_TEST

START_TEST(sigterm_saves_a_checkpoint_and_exits_143) {
    pid_t pid = SPAWN("train", corpus, "--out", in_work("r"), LONG_TINY);
    wait_for_lines(pid, in_work("out.txt"), 2);
    ck_assert_int_eq(kill(pid, SIGTERM), 0);
    expect_status(finish(pid), 143, "saved");
    ck_assert_int_ge(saved_step(in_work("r")), 10);
}
END_TEST

START_TEST(a_second_ctrl_c_quits_at_once_and_leaves_the_last_checkpoint_as_it_was) {
    // Steps slow enough (~0.3 s: a wide batch of long windows, one thread)
    // that both signals land inside one step. The run saves at step 2, then
    // resumes without periodic saves, so the checkpoint on disk is step 2's.
    // (--eval-interval 1: a status line, flushed, after every step.)
    // card: the slowness comes from the long windows; gpt's blocks would only add to it.
    const char *slow[] = {"--arch", "card", "--batch", "64", "--context", "256", "--embd", "32", "--heads", "2",
                          "--eval-interval", "1", "--eval-batches", "1", "--threads", "1"};
    char *text = malloc(8001);
    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < 8000; i++) text[i] = "abcdefgh ijk\n"[(i * 7 + i / 5) % 13];
    const char *data = write_text("slow.txt", text, 8000);
    free(text);
    ck_assert_int_eq(RUN("train", data, "--out", in_work("r"), "--steps", "1000", slow[0], slow[1], slow[2], slow[3],
                         slow[4], slow[5], slow[6], slow[7], slow[8], slow[9], slow[10], slow[11], slow[12], slow[13],
                         slow[14], slow[15], "--stop-after", "2"),
                     0);
    size_t len_before, len_after;
    char *before = slurp_or_empty(in_work("r/model.safetensors"), &len_before);

    pid_t pid = SPAWN("train", "--resume", in_work("r"), "--save-every", "0", "--threads", "1");
    wait_for_lines(pid, in_work("out.txt"), 1);  // a step has just ended: the next one has begun
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    wait_for_text(pid, in_work("err.txt"), "stopping after this step");
    ck_assert_int_eq(kill(pid, SIGINT), 0);
    int status = finish(pid);
    const char *err = last_err();
    ck_assert_msg(status == 130, "exited %d, expected 130: %s", status, err);
    ck_assert_msg(strstr(err, "saved") == NULL, "it saved after the second Ctrl-C: %s", err);
    char *after = slurp_or_empty(in_work("r/model.safetensors"), &len_after);
    ck_assert_msg(len_before == len_after && memcmp(before, after, len_before) == 0, "the checkpoint changed");
    free(before);
    free(after);
}
END_TEST

START_TEST(a_killed_run_resumes_from_its_last_periodic_checkpoint_to_the_same_weights) {
    // SIGKILL cannot be caught: this is a crash, or the power going out.
    pid_t pid = SPAWN("train", corpus, "--out", in_work("parts"), LONG_TINY, "--save-every", "10");
    wait_for_lines(pid, in_work("out.txt"), 4);  // 30 steps or more: at least two periodic checkpoints
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(finish(pid), 128 + SIGKILL);
    long stopped = saved_step(in_work("parts"));  // whole, whatever the kill interrupted
    ck_assert_msg(stopped >= 20 && stopped % 10 == 0, "the checkpoint is at step %ld", stopped);

    char steps[32];
    snprintf(steps, sizeof steps, "%ld", stopped + 15);
    ck_assert_int_eq(RUN("train", "--resume", in_work("parts"), "--steps", steps), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("whole"), "--steps", steps, TINY, "--save-every", "10"), 0);
    expect_same_run(in_work("whole"), in_work("parts"));
}
END_TEST

// ---- Numerical faults --------------------------------------------------------------------

START_TEST(a_diverging_run_stops_naming_the_step_and_tensor_and_keeps_the_last_good_checkpoint) {
    // --lr 100 overflows card within a few steps; a checkpoint every 2
    // steps. (A gpt does not overflow even at --lr 1e6: its LayerNorms undo
    // any growth of the weights before the logits.)
    int status = RUN("train", corpus, "--out", in_work("r"), "--steps", "100", "--arch", "card", TINY, "--lr", "100",
                     "--save-every", "2");
    expect_status(status, 1, "training diverged at step ");
    const char *err = last_err();
    long step = -1, kept = -1;
    const char *at = strstr(err, "diverged at step ");
    ck_assert(sscanf(at, "diverged at step %ld", &step) == 1);
    ck_assert_msg(strstr(err, "activation '") || strstr(err, "gradient of '") || strstr(err, "weight of '"),
                  "no tensor named: %s", err);
    at = strstr(err, "the last whole checkpoint (saved after ");
    ck_assert_msg(at != NULL && sscanf(at, "the last whole checkpoint (saved after %ld", &kept) == 1,
                  "no last good checkpoint named: %s", err);
    ck_assert_msg(strstr(err, "--lr"), "no advice: %s", err);
    ck_assert_msg(kept % 2 == 0 && kept >= 2 && kept <= step, "checkpoint after %ld steps, fault at step %ld", kept, step);
    ck_assert_int_eq(saved_step(in_work("r")), kept);  // whole and finite: it loads
}
END_TEST

START_TEST(a_run_stops_rather_than_save_weights_the_loader_would_refuse) {
    // Two SGD steps at --lr 1e6 take card's weights far past
    // MODEL_MAX_WEIGHT (to about 1e18) while they and the loss are still
    // finite: saved, they would be a model that no command could load.
    int status = RUN("train", corpus, "--out", in_work("r"), "--steps", "2", "--arch", "card", TINY, "--lr", "1000000");
    expect_status(status, 1, "training diverged at step 1: the weight of '");
    ck_assert_msg(strstr(last_err(), "beyond the 1e+06 a weight may have"), "%s", last_err());
    ck_assert_int_eq(access(in_work("r/model.safetensors"), F_OK), -1);
}
END_TEST

// ---- Bad input -------------------------------------------------------------------------

START_TEST(train_rejects_an_unreadable_file_naming_it) {
    // /proc/self/mem opens, but reading its first page fails (EIO), even for root.
    expect_status(RUN("train", "/proc/self/mem", "--out", in_work("o")), 1, "error reading '/proc/self/mem'");
    const char *locked = write_text("locked.txt", "some text\n", 10);
    ck_assert_int_eq(chmod(locked, 0), 0);
    if (geteuid() == 0) return;  // root reads it anyway: nothing more to check
    expect_status(RUN("train", locked, "--out", in_work("o")), 1, "Permission denied");
}
END_TEST

START_TEST(train_rejects_binary_data_naming_the_file_and_byte) {
    // The start of an ELF executable: its first NUL is byte 7.
    const char *elf = write_text("a.out", "\x7f" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0", 16);
    expect_status(RUN("train", elf, "--out", in_work("o")), 1, "has a NUL byte at byte 7");
    // Bytes that are not UTF-8 at all: the first bad one is named.
    const char *noise = write_text("noise.bin", "ok\xff\xfe\x80", 5);
    expect_status(RUN("train", noise, "--out", in_work("o")), 1, "is not valid UTF-8 at byte 2 (0xFF)");
}
END_TEST

START_TEST(train_rejects_latin1_text_with_the_byte_offset) {
    const char *latin1 = write_text("latin1.txt", "caf\xe9 au lait\n", 13);
    expect_status(RUN("train", latin1, "--out", in_work("o")), 1, "not valid UTF-8 at byte 3");
    expect_status(RUN("train", latin1, "--out", in_work("o")), 1, "iconv");
}
END_TEST

START_TEST(train_rejects_an_empty_file_and_a_text_shorter_than_one_window) {
    expect_status(RUN("train", write_text("empty.txt", "", 0), "--out", in_work("o")), 1, "is empty");
    // 40 characters: enough for --context 16 without validation, not for --context 64.
    const char *short_text = write_text("short.txt", "0123456789012345678901234567890123456789", 40);
    expect_status(RUN("train", short_text, "--out", in_work("o"), "--context", "64", "--val-fraction", "0",
                      "--tokenizer", "char"),
                  1, "smaller --context");
    expect_status(RUN("train", short_text, "--out", in_work("o"), "--context", "16", "--embd", "8", "--heads", "2",
                      "--tokenizer", "char"),
                  1, "--val-fraction");
}
END_TEST

START_TEST(train_rejects_bad_sizes_and_rates_as_usage_errors_naming_the_flag) {
    const char *cases[][3] = {
        {"--embd", "-8", "--embd -8 is out of range"},      {"--batch", "0", "--batch 0 is out of range"},
        {"--context", "-1", "--context -1 is out of range"}, {"--heads", "3", "--heads 3 does not divide --embd "},
        {"--dropout", "-0.1", "--dropout -0.1"},             {"--dropout", "1", "--dropout 1 is out of range"},
        {"--lr", "inf", "--lr expects a finite number"},     {"--lr", "nan", "--lr expects a finite number"},
        {"--steps", "1e3", "--steps expects a whole number"}, {"--save-every", "-5", "--save-every -5"},
        {"--eval-interval", "0", "--eval-interval 0"},       {"--layers", "0", "--layers 0 is out of range"},
        {"--arch", "foo", "--arch 'foo' is not one of"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_status(RUN("train", corpus, "--out", in_work("o"), cases[i][0], cases[i][1]), 2, cases[i][2]);
}
END_TEST

START_TEST(train_refuses_a_model_too_large_for_memory_before_allocating_it) {
    // 2^20 windows of 16 with 65536 channels: about 60 TB. Refused in
    // milliseconds; allocating (or the OOM killer) would take much longer.
    double start = now_seconds();
    int status = RUN("train", corpus, "--out", in_work("o"), "--batch", "1048576", "--context", "16", "--embd", "65536",
                     "--heads", "1", "--tokenizer", "char");
    expect_status(status, 2, "use a smaller --batch, --context, --embd or --layers");
    ck_assert_msg(now_seconds() - start < 10, "the refusal took %.1f s", now_seconds() - start);
    expect_status(status, 2, "C=65536 channels, NH=1 heads, T=16 positions and V=19 tokens, for 1048576 windows");
}
END_TEST

// ---- The run directory ----------------------------------------------------------------

START_TEST(a_new_run_refuses_an_out_that_holds_a_run_naming_its_files_and_the_ways_on) {
    char r[300];  // in_work's buffers are reused
    snprintf(r, sizeof r, "%s", in_work("r"));
    ck_assert_int_eq(RUN("train", corpus, "--out", r, "--steps", "5", TINY), 0);
    char *before = tree_snapshot(r);
    expect_status(RUN("train", corpus, "--out", r, "--steps", "9", TINY), 2, "already holds a run");
    const char *err = last_err();
    const char *wanted[] = {r, "model.safetensors", "1 checkpoint", "log.csv", "loss.png", "--resume", "--force"};
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++)
        ck_assert_msg(strstr(err, wanted[i]) != NULL, "the error does not say '%s': %s", wanted[i], err);
    expect_tree_unchanged(r, before, "a new run into it");  // not even log.csv, which a run used to empty as it started
    // Any one file of a run is enough; an empty directory is fine.
    ck_assert_int_eq(mkdir(in_work("only_log"), 0700), 0);
    write_text("only_log/log.csv", "step,train_loss,val_loss\n", 25);
    expect_status(RUN("train", corpus, "--out", in_work("only_log"), "--steps", "2", TINY), 2,
                  "holds a run that never saved a checkpoint (log.csv), so there is nothing to resume; start over with --force");
    ck_assert_int_eq(mkdir(in_work("empty"), 0700), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("empty"), "--steps", "2", TINY), 0);
}
END_TEST

START_TEST(an_out_that_is_a_file_is_a_usage_error) {
    const char *file = write_text("notes.txt", "my notes\n", 9);
    expect_status(RUN("train", corpus, "--out", file, "--steps", "2", TINY), 2, "is a file, not a directory");
    char *text = slurp_or_empty(file, NULL);
    ck_assert_str_eq(text, "my notes\n");
    free(text);
}
END_TEST

// --force starts over: nothing of the old run stays, not even a file the
// new run would not write (an SGD run keeps no AdamW state).
START_TEST(force_replaces_the_run_and_leaves_no_file_of_the_old_one) {
    char r[300];  // in_work's buffers are reused
    snprintf(r, sizeof r, "%s", in_work("r"));
    ck_assert_int_eq(RUN("train", corpus, "--out", r, "--steps", "12", TINY, "--optimizer", "adamw"), 0);
    ck_assert_int_eq(access(in_work("r/checkpoint-12/optimizer.safetensors"), F_OK), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", r, "--steps", "3", TINY, "--optimizer", "sgd", "--force"), 0);
    ck_assert_msg(access(in_work("r/checkpoint-12"), F_OK) != 0, "the old checkpoint is still there");
    ck_assert_msg(access(in_work("r/checkpoint-3/optimizer.safetensors"), F_OK) != 0, "an SGD run saved an AdamW state");
    ck_assert_int_eq(saved_step(r), 3);
    ck_assert_int_eq(count_lines(in_work("r/log.csv")), 1 + 3);  // the header and the new run's rows only
    // It resumes as the SGD run it is.
    ck_assert_int_eq(RUN("train", "--resume", r, "--steps", "5"), 0);
    ck_assert_int_eq(saved_step(r), 5);
    expect_status(RUN("train", "--resume", r, "--steps", "9", "--force"), 2, "--force");
}
END_TEST

// --force deletes only once everything has loaded: a mistyped FILE leaves
// the old run as it was.
START_TEST(force_with_a_file_that_fails_to_load_deletes_nothing) {
    char r[300];  // in_work's buffers are reused
    snprintf(r, sizeof r, "%s", in_work("r"));
    ck_assert_int_eq(RUN("train", corpus, "--out", r, "--steps", "3", TINY), 0);
    char *before = tree_snapshot(r);
    expect_status(RUN("train", in_work("no-such.txt"), "--out", r, "--force", TINY), 1, "no-such.txt");
    expect_tree_unchanged(r, before, "--force with a missing FILE");
}
END_TEST

// lock_holder: the PID the lock file of "dir" names.
static long lock_holder(const char *dir) {
    char path[600];
    snprintf(path, sizeof path, "%s/.lock", dir);
    char *text = slurp_or_empty(path, NULL);
    long pid = strtol(text, NULL, 10);
    free(text);
    return pid;
}

START_TEST(a_second_train_into_a_directory_in_use_stops_at_once_naming_the_pid) {
    char r[300];  // in_work's buffers are reused
    snprintf(r, sizeof r, "%s", in_work("r"));
    // SGD: AdamW's state is saved just before the model, and a kill between
    // the two would make --resume refuse (rightly) below.
    pid_t first = SPAWN("train", corpus, "--out", r, LONG_TINY, "--save-every", "10", "--optimizer", "sgd");
    wait_for_lines(first, in_work("out.txt"), 3);  // past its first checkpoint
    char pid_text[64];
    snprintf(pid_text, sizeof pid_text, "(pid %ld)", (long)first);
    ck_assert_int_eq(lock_holder(r), first);
    // A second one, however it asks, while the first trains. (They share
    // out.txt and err.txt: only err.txt is read, and the first writes no
    // more to it until it stops.)
    expect_status(RUN("train", corpus, "--out", r, TINY, "--steps", "5", "--force"), 1, "is in use by another tinygpt train");
    ck_assert_msg(strstr(last_err(), pid_text) != NULL, "the error does not name %s: %s", pid_text, last_err());
    expect_status(RUN("train", "--resume", r, "--steps", "1000000"), 1, pid_text);
    expect_status(RUN("train", corpus, "--out", r, TINY), 1, pid_text);
    still_running(first);

    // kill -9 leaves the lock file, and maybe a save's .tmp files: neither
    // stops the next run, which removes the .tmp files.
    ck_assert_int_eq(kill(first, SIGKILL), 0);
    ck_assert_int_eq(finish(first), 128 + SIGKILL);
    write_text("r/model.safetensors.tmp", "half a link", 11);
    ck_assert_int_eq(mkdir(in_work("r/checkpoint-999.tmp"), 0700), 0);
    write_text("r/checkpoint-999.tmp/model.safetensors.tmp", "half a checkpoint", 17);
    write_text("r/checkpoint-999.tmp/optimizer.safetensors", "a state", 7);
    long stopped = saved_step(r);
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", stopped + 5);
    pid_t second = SPAWN("train", "--resume", r, "--steps", steps);
    expect_status(finish(second), 0, "saved");
    ck_assert_int_eq(lock_holder(r), second);
    ck_assert_msg(access(in_work("r/model.safetensors.tmp"), F_OK) != 0, "the stale model .tmp is still there");
    ck_assert_msg(access(in_work("r/checkpoint-999.tmp"), F_OK) != 0, "the half-saved checkpoint is still there");
    ck_assert_int_eq(saved_step(r), stopped + 5);
}
END_TEST

// The lock file says nothing about a run being there: a directory holding
// only one, from a run that failed to start, takes a new run.
START_TEST(a_directory_with_only_a_stale_lock_file_takes_a_new_run) {
    ck_assert_int_eq(RUN("train", in_work("no-such.txt"), "--out", in_work("r"), TINY), 1);
    ck_assert_int_eq(mkdir(in_work("r"), 0700), 0);
    write_text("r/.lock", "999999999\n", 10);  // no such process: the kernel holds no lock for it
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "3", TINY), 0);
    ck_assert_int_eq(saved_step(in_work("r")), 3);
}
END_TEST

// make_old_run: the run in work_dir/"name" as a tinygpt from before
// checkpoint directories, checksums and run.json left one: its newest
// checkpoint's model.safetensors and optimizer.safetensors in the
// directory itself, in format 1 (no checksum; settings written as before
// settings_format), the training file's path as "data" in the model's
// metadata, and no run.json. The header's length changes by a multiple of
// 8, so the data stays aligned.
static void make_old_run(const char *name, const char *data_path) {
    char dir[600], newest[4200], path[4300];
    snprintf(dir, sizeof dir, "%s", in_work(name));
    newest_checkpoint(dir, newest, sizeof newest);
    snprintf(path, sizeof path, "%s/model.safetensors", newest);
    size_t len;
    char *bytes = slurp_or_empty(path, &len);
    ck_assert_uint_gt(len, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | (unsigned char)bytes[i];
    // The old header: {"__metadata__":{"data":"<path>", then what the new one
    // holds after its checksum, with format 1 and no settings_format.
    char *header = strndup(bytes + 8, (size_t)n), *out = malloc(len + 1024);
    ck_assert_ptr_nonnull(out);
    const char *rest = strstr(header, "\"format\"");
    ck_assert_ptr_nonnull(rest);
    char *at = out + 8;
    at += sprintf(at, "{\"__metadata__\":{\"data\":\"%s\",", data_path);
    for (const char *p = rest; *p;) {
        if (strncmp(p, "\"tinygpt-2\"", 11) == 0) at += sprintf(at, "\"tinygpt-1\""), p += 11;
        else if (strncmp(p, ",\"settings_format\":\"2\"", 23) == 0) p += 23;
        else *at++ = *p++;
    }
    while (at > out + 8 && at[-1] == ' ') at--;  // the new padding, redone below
    while ((size_t)(at - out) % 8 != 0) *at++ = ' ';
    uint64_t new_n = (uint64_t)(at - out - 8);
    for (int i = 0; i < 8; i++) out[i] = (char)(new_n >> (8 * i));
    memcpy(at, bytes + 8 + n, len - 8 - n);
    at += len - 8 - n;
    ck_assert_int_eq(unlink(in_work("r/model.safetensors")), 0);  // it is a second name of the checkpoint's
    write_bytes(in_work("r/model.safetensors"), out, (size_t)(at - out));
    snprintf(path, sizeof path, "%s/optimizer.safetensors", newest);
    if (access(path, F_OK) == 0) ck_assert_int_eq(rename(path, in_work("r/optimizer.safetensors")), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", newest);
    ck_assert_int_eq(unlink(path), 0);
    snprintf(path, sizeof path, "%s/log.json", newest);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(newest), 0);
    unlink(in_work("r/run.json"));
    free(out);
    free(header);
    free(bytes);
}

START_TEST(the_model_holds_no_file_path_and_resume_finds_the_text_in_run_json) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "20", TINY, "--stop-after", "5"), 0);
    size_t len;
    char *model = slurp_or_empty(in_work("r/model.safetensors"), &len);
    bool has_path = false;  // the header is text; the weights after it could hold any bytes, but not these
    for (size_t i = 0; i + strlen(work_dir) <= len; i++) has_path |= memcmp(model + i, work_dir, strlen(work_dir)) == 0;
    ck_assert_msg(!has_path, "the model holds a path of the trainer's, %s", work_dir);
    free(model);
    char *info = slurp_or_empty(in_work("r/run.json"), NULL);
    ck_assert_msg(strstr(info, corpus) != NULL, "run.json does not name %s: %s", corpus, info);
    free(info);
    ck_assert_int_eq(RUN("train", "--resume", in_work("r"), "--stop-after", "10"), 0);

    // An older run directory: no checkpoint directory, no run.json, the
    // path in the model, a file without a checksum.
    make_old_run("r", corpus);
    ck_assert_int_eq(saved_step(in_work("r")), 10);
    expect_status(RUN("train", "--resume", in_work("r")), 0, "saved");
    ck_assert_int_eq(saved_step(in_work("r")), 20);
    char newest[4200];
    ck_assert_str_eq(path_base(newest_checkpoint(in_work("r"), newest, sizeof newest)), "checkpoint-20");
    ck_assert_msg(access(in_work("r/optimizer.safetensors"), F_OK) != 0, "the old layout's AdamW state is left");
}
END_TEST

// ---- The log and the progress ------------------------------------------------------------

// A full disk, for this process only: log.csv cannot grow past 32 KB (about
// 750 rows of a tiny card model's; its 4 KB checkpoints and the one-point
// loss.png of step 0 fit). The run must stop and say why; it saves nothing
// past its last checkpoint, whose steps the log holds every row of, so
// --resume continues from there with a whole log.
START_TEST(a_log_that_cannot_be_written_stops_the_run_at_its_last_checkpoint) {
    child_file_limit = 32 * 1024;
    int status = RUN("train", corpus, "--out", in_work("r"), "--arch", "card", "--batch", "2", "--context", "8",
                     "--embd", "8", "--heads", "2", "--val-fraction", "0", "--steps", "5000", "--eval-interval", "100000",
                     "--seed", "1", "--save-every", "100");
    child_file_limit = 0;
    expect_status(status, 1, "cannot write '");
    const char *err = last_err();
    ck_assert_msg(strstr(err, "r/log.csv': File too large") != NULL, "the reason is not named: %s", err);
    long stopped = -1, kept = -1;
    const char *at = strstr(err, "training stopped after ");
    ck_assert_msg(at && sscanf(at, "training stopped after %ld steps", &stopped) == 1, "%s", err);
    ck_assert_msg(stopped > 100 && stopped < 5000, "stopped after %ld steps", stopped);
    at = strstr(err, "the last whole checkpoint (saved after ");
    ck_assert_msg(at && sscanf(at, "the last whole checkpoint (saved after %ld", &kept) == 1, "%s", err);
    ck_assert_msg(kept % 100 == 0 && kept < stopped && stopped - kept <= 100, "kept %ld, stopped %ld", kept, stopped);
    ck_assert_int_eq(saved_step(in_work("r")), kept);
    ck_assert_msg(strstr(err, "--resume") != NULL, "no way on: %s", err);
    // With room again, it continues, its log whole.
    expect_status(RUN("train", "--resume", in_work("r"), "--steps", "2000"), 0, "saved");
    ck_assert_int_eq(count_lines(in_work("r/log.csv")), 1 + 2000);
}
END_TEST

// `train ... | head -1`: once head has quit, the next progress line meets a
// closed pipe. The run stops as for Ctrl-C: it saves, exits 128 + SIGPIPE,
// and resumes.
START_TEST(a_closed_pipe_on_stdout_stops_the_run_with_a_save) {
    char line[2048];
    snprintf(line, sizeof line, "%s train %s --out %s --steps 100000 %s --log-interval 1 2>%s | head -1 >/dev/null; "
                                "exit ${PIPESTATUS[0]}",
             tinygpt_binary(), corpus, in_work("r"), "--layers 1 --batch 2 --context 16 --embd 16 --heads 2",
             in_work("err.txt"));
    char cmd[2300];
    snprintf(cmd, sizeof cmd, "bash -c '%s'", line);
    int raw = system(cmd);
    int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    const char *err = last_err();
    ck_assert_msg(status == 128 + SIGPIPE, "exit %d, not %d: %s", status, 128 + SIGPIPE, err);
    ck_assert_msg(strstr(err, "stopped after") && strstr(err, "--resume"), "%s", err);
    long saved = saved_step(in_work("r"));
    ck_assert_int_gt(saved, 0);
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", saved + 3);
    expect_status(RUN("train", "--resume", in_work("r"), "--steps", steps), 0, "saved");
}
END_TEST

// Standard output on a full disk (/dev/full): the run stops with a save and
// says so in one error line, not a second one from the check at exit.
START_TEST(a_full_disk_on_stdout_stops_the_run_with_one_error_line) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s train %s --out %s --steps 20 --batch 4 --context 16 --embd 16 --heads 2 --peak 100 >/dev/full 2>%s",
             tinygpt_binary(), corpus, in_work("r"), in_work("err.txt"));
    int raw = system(cmd);
    expect_status(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 1, "cannot write to standard output");
    ck_assert_msg(strstr(last_err(), "--resume") != NULL, "no way on: %s", last_err());
}
END_TEST

// A text from standard input too big for memory, which a huge --max-bytes
// let through: the message names --max-bytes, not the model's sizes.
START_TEST(text_too_big_for_memory_names_max_bytes) {
    if (TINYGPT_SANITIZED) return;  // the sanitizers reserve more address space than the limit below
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "head -c 600000000 /dev/zero | (ulimit -v 400000; %s train - --out %s --max-bytes 1000000000000 --batch 4 --context 16 --embd 16 --heads 2 --peak 100) 2>%s",
             tinygpt_binary(), in_work("r"), in_work("err.txt"));
    int raw = system(cmd);
    expect_status(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 1, "out of memory reading standard input");
    ck_assert_msg(strstr(last_err(), "give a smaller --max-bytes") && !strstr(last_err(), "--batch"), "%s", last_err());
}
END_TEST

// A log that is gone, or cut short, at --resume is not quietly started
// over: it is an error naming the file, unless --restart-log says to.
START_TEST(resume_refuses_a_log_that_is_missing_or_cut_short_unless_told_to_restart_it) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "40", TINY, "--stop-after", "10"), 0);
    char *log = slurp_or_empty(in_work("r/log.csv"), NULL);
    strstr(log, "\n9,")[1] = '\0';  // the row of step 9 and after: gone
    write_text("r/log.csv", log, strlen(log));
    free(log);
    // The checkpoint's mark of the log (log.json) catches it; without one (a
    // checkpoint from before log.json), the rows do.
    char *before = tree_snapshot(in_work("r"));
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "20"), 1,
                  "r/log.csv' is not the log the checkpoint of step 10 was saved with: it is shorter");
    ck_assert_ptr_nonnull(strstr(last_err(), "--restart-log"));
    expect_tree_unchanged(in_work("r"), before, "a resume refused for its log");
    ck_assert_int_eq(unlink(in_work("r/checkpoint-10/log.json")), 0);
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "20"), 1, "r/log.csv' has no row of step 9");
    ck_assert_ptr_nonnull(strstr(last_err(), "--restart-log"));
    ck_assert_int_eq(unlink(in_work("r/log.csv")), 0);
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "20"), 1, "r/log.csv' is missing");
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "20", "--restart-log"), 0, "saved");
    char *text = slurp_or_empty(in_work("r/log.csv"), NULL);
    ck_assert_msg(strncmp(strchr(text, '\n') + 1, "10,", 3) == 0, "the new log starts at %s", strchr(text, '\n') + 1);
    free(text);
    // From then on the log is whole again: it resumes without being told.
    expect_status(RUN("train", "--resume", in_work("r"), "--stop-after", "25"), 0, "saved");
    expect_status(RUN("train", corpus, "--out", in_work("new"), "--restart-log", TINY), 2, "goes with --resume");
}
END_TEST

// A train that holds the lock writes its PID at once, but a second train
// can still read the file between the two, or a dead run's PID: it names
// only a live process, or says "pid unknown".
START_TEST(the_lock_message_names_no_dead_process) {
    ck_assert_int_eq(mkdir(in_work("r"), 0700), 0);
    write_text("r/.lock", "999999999\n", 10);  // no such process
    int fd = open(in_work("r/.lock"), O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);  // held, by this test, whose PID it does not hold
    expect_status(RUN("train", corpus, "--out", in_work("r"), "--steps", "3", TINY), 1, "(pid unknown)");
    ck_assert_ptr_null(strstr(last_err(), "999999999"));
    close(fd);
}
END_TEST

// tensor_bytes: the data section of the safetensors file "path" (after
// its header), in "*len" bytes; the caller frees it.
static char *tensor_bytes(const char *path, size_t *len) {
    size_t n;
    char *bytes = slurp_or_empty(path, &n);
    ck_assert_uint_gt(n, 8);
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = header << 8 | (unsigned char)bytes[i];
    *len = n - 8 - (size_t)header;
    memmove(bytes, bytes + 8 + header, *len);
    return bytes;
}

// The weights of the best validation loss so far are kept as
// best.safetensors: they are the weights of the step log.csv's best_step
// names, which is the step of the lowest val_loss so far on every
// evaluation's row, also across a resume.
START_TEST(the_best_validation_weights_are_kept_as_best_safetensors) {
    // Evaluations every 10 steps, and at the last, step 200; a checkpoint
    // after every 10, so each evaluation's weights are one.
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "201", TINY, "--save-every", "10",
                         "--keep", "100", "--stop-after", "90"),
                     0);
    ck_assert_int_eq(RUN("train", "--resume", in_work("r"), "--keep", "100"), 0);
    char *log = slurp_or_empty(in_work("r/log.csv"), NULL);
    ck_assert_msg(strstr(log, ",val_bpb,best_step,") != NULL, "no best_step column: %.80s", log);
    double best = INFINITY;
    long best_step = -1, evaluations = 0;
    for (int row = 0; row < 201; row++) {
        double val = log_field(log, row, 2);
        if (isnan(val)) continue;
        if (val < best) best = val, best_step = row;
        evaluations++;
        ck_assert_msg(log_field(log, row, 8) == best_step, "row %d: best_step %g, the best so far is at %ld", row,
                      log_field(log, row, 8), best_step);
    }
    free(log);
    ck_assert_int_gt(evaluations, 10);
    char at_best[600];
    snprintf(at_best, sizeof at_best, "r/checkpoint-%ld/model.safetensors", best_step);
    size_t len_a, len_b;
    char *a = tensor_bytes(in_work("r/best.safetensors"), &len_a), *b = tensor_bytes(in_work(at_best), &len_b);
    ck_assert_msg(len_a == len_b && memcmp(a, b, len_a) == 0, "best.safetensors is not the weights of step %ld",
                  best_step);
    free(a);
    free(b);
}
END_TEST

// Validation that has not improved for --patience evaluations is warned of,
// once, naming the best and where it is kept. (--lr 0: the weights never
// change, so no evaluation after the first is better.)
START_TEST(validation_that_stops_improving_is_warned_of_once) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "100", TINY, "--optimizer", "sgd",
                         "--lr", "0", "--patience", "3"),
                     0);
    const char *err = last_err();
    const char *at = strstr(err, "validation loss has not improved for 3 evaluations (best ");
    ck_assert_msg(at != NULL, "no warning: %s", err);
    ck_assert_msg(strstr(at, "at step 0, kept in ") && strstr(at, "r/best.safetensors"), "%s", err);
    ck_assert_msg(strstr(at + 20, "has not improved") == NULL, "warned twice: %s", err);
    char *out = slurp_or_empty(in_work("out.txt"), NULL);
    ck_assert_msg(strstr(out, "| best ") && strstr(out, " at step 0 |"), "no best on the progress lines: %s", out);
    free(out);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("quiet"), "--steps", "100", TINY, "--optimizer", "sgd",
                         "--lr", "0", "--patience", "0"),
                     0);
    ck_assert_ptr_null(strstr(last_err(), "has not improved"));
}
END_TEST

// count_progress_lines: the "step N/M | ..." lines in the last run's stdout.
static int count_progress_lines(void) {
    char *out = slurp_or_empty(in_work("out.txt"), NULL);
    int n = 0;
    for (const char *line = out; *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : line + strlen(line))
        n += strncmp(line, "step ", 5) == 0;
    free(out);
    return n;
}

START_TEST(without_validation_progress_lines_come_every_log_interval_steps) {
    // By default every --eval-interval (10 in TINY) steps, as with validation: 0, 10, 20 and the last, 29.
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("a"), "--steps", "30", TINY, "--val-fraction", "0"), 0);
    ck_assert_int_eq(count_progress_lines(), 4);
    // --log-interval 4: 0, 4, ..., 28 and 29.
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("b"), "--steps", "30", TINY, "--val-fraction", "0",
                         "--log-interval", "4"), 0);
    ck_assert_int_eq(count_progress_lines(), 9);
    char *out = slurp_or_empty(in_work("out.txt"), NULL);
    ck_assert_msg(strstr(out, "step      4/30 | train loss") != NULL, "%s", out);
    free(out);
    // It does not change the run, so a resume may change it too.
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("c"), "--steps", "30", TINY, "--stop-after", "10"), 0);
    ck_assert_int_eq(RUN("train", "--resume", in_work("c"), "--log-interval", "5", "--stop-after", "20"), 0);
    ck_assert_int_eq(count_progress_lines(), 2);  // 10 (an evaluation) and 15
}
END_TEST

START_TEST(steps_0_writes_a_loss_png_too) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("r"), "--steps", "0", TINY), 0);
    int w = 0, h = 0;
    char why[600];
    ck_assert_msg(png_size(in_work("r/loss.png"), &w, &h, why, sizeof why), "%s", why);
    ck_assert_int_eq(w, PLOT_WIDTH);
    ck_assert_int_eq(h, PLOT_HEIGHT);
}
END_TEST

// differing_pixels: how many pixels of the two PNGs differ by more than a
// shade (a loss read back from log.csv, rounded to 6 decimals, can move an
// anti-aliased edge by a level or two).
static long differing_pixels(const char *a_path, const char *b_path) {
    int wa, ha, wb, hb, n;
    unsigned char *a = stbi_load(a_path, &wa, &ha, &n, 3), *b = stbi_load(b_path, &wb, &hb, &n, 3);
    ck_assert_msg(a && b && wa == wb && ha == hb, "cannot compare %s and %s", a_path, b_path);
    long differ = 0;
    for (long i = 0; i < (long)wa * ha; i++)
        for (int c = 0; c < 3; c++)
            if (abs(a[3 * i + c] - b[3 * i + c]) > 8) {
                differ++;
                break;
            }
    stbi_image_free(a);
    stbi_image_free(b);
    return differ;
}

// After a resume, loss.png is the whole run's: the picture `tinygpt plot`
// draws from the whole log, not one of the resumed steps alone.
START_TEST(after_a_resume_loss_png_shows_the_whole_run) {
    char r[300];  // in_work's buffers are reused
    snprintf(r, sizeof r, "%s", in_work("r"));
    ck_assert_int_eq(RUN("train", corpus, "--out", r, "--steps", "60", TINY, "--stop-after", "30"), 0);
    ck_assert_int_eq(RUN("train", "--resume", r), 0);
    // The resumed steps' rows alone, as a log.
    char *log = slurp_or_empty(in_work("r/log.csv"), NULL);
    char *row30 = strstr(log, "\n30,");
    ck_assert_ptr_nonnull(row30);
    char *only = malloc(strlen(log) + 1);
    ck_assert_ptr_nonnull(only);
    size_t header = (size_t)(strchr(log, '\n') - log) + 1;
    memcpy(only, log, header);
    strcpy(only + header, row30 + 1);
    write_text("resumed.csv", only, strlen(only));
    free(only);
    free(log);
    char title[600];
    snprintf(title, sizeof title, "loss: %s", r);
    ck_assert_int_eq(RUN("plot", in_work("r/log.csv"), "--title", title, "--out", in_work("whole.png")), 0);
    ck_assert_int_eq(RUN("plot", in_work("resumed.csv"), "--title", title, "--out", in_work("resumed.png")), 0);
    long from_whole = differing_pixels(in_work("r/loss.png"), in_work("whole.png"));
    long from_resumed = differing_pixels(in_work("r/loss.png"), in_work("resumed.png"));
    ck_assert_msg(from_whole < 50 && from_resumed > 1000,
                  "loss.png differs from the whole log's picture in %ld pixels, from the resumed steps' in %ld",
                  from_whole, from_resumed);
}
END_TEST

// ---- Gradient accumulation -----------------------------------------------------------

// max_weight_difference: the largest |a - b| over the weights of the
// models of two run directories.
static double max_weight_difference(const char *dir_a, const char *dir_b) {
    char path_a[600], path_b[600];
    snprintf(path_a, sizeof path_a, "%s/model.safetensors", dir_a);
    snprintf(path_b, sizeof path_b, "%s/model.safetensors", dir_b);
    Model a, b;
    Tokenizer ta, tb;
    Error err = {{0}};
    ck_assert_msg(checkpoint_load(path_a, &a, &ta, 1, false, NULL, &err), "%s", err.msg);
    ck_assert_msg(checkpoint_load(path_b, &b, &tb, 1, false, NULL, &err), "%s", err.msg);
    ck_assert_uint_eq(a.param_table.total, b.param_table.total);
    double most = 0.0;
    // A comparison, not fmax: Debian's gcc 12 for aarch64 crashes at -O3
    // vectorising an fmax reduction ("internal compiler error: in
    // vect_transform_reduction"). The same result: a NaN is skipped by both.
    for (size_t i = 0; i < a.param_table.total; i++) {
        const double difference = fabs((double)a.params_memory[i] - b.params_memory[i]);
        if (difference > most) most = difference;
    }
    model_free(&a);
    model_free(&b);
    tokenizer_free(&ta);
    tokenizer_free(&tb);
    return most;
}

// How close a step of micro-batches stays to the one step on all their
// rows: only the order of the sums differs (float32, 30 steps of AdamW).
#define ACCUM_TOLERANCE 1e-4

// The promise of --grad-accum: K micro-batches of B rows are one step on
// B x K rows: the same windows, the same dropout masks, the same loss and
// the same update, to rounding; with dropout on, in both batch orders and
// both architectures. And the log counts a step's B x K x T tokens.
START_TEST(a_step_of_k_micro_batches_is_one_step_on_k_times_the_rows) {
    const char *cases[][4] = {{"--order", "random", "--arch", "gpt"},
                              {"--order", "sequential", "--arch", "gpt"},
                              {"--order", "shuffled", "--arch", "gpt"},
                              {"--order", "random", "--arch", "card"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char whole[64], parts[64];
        snprintf(whole, sizeof whole, "whole%zu", c);
        snprintf(parts, sizeof parts, "parts%zu", c);
        ck_assert_int_eq(RUN("train", corpus, "--out", in_work(whole), "--steps", "30", TINY, "--batch", "12",
                             "--dropout", "0.1", cases[c][0], cases[c][1], cases[c][2], cases[c][3]),
                         0);
        ck_assert_int_eq(RUN("train", corpus, "--out", in_work(parts), "--steps", "30", TINY, "--batch", "4",
                             "--grad-accum", "3", "--dropout", "0.1", cases[c][0], cases[c][1], cases[c][2],
                             cases[c][3]),
                         0);
        char path_whole[600], path_parts[600];
        snprintf(path_whole, sizeof path_whole, "%s/log.csv", in_work(whole));
        snprintf(path_parts, sizeof path_parts, "%s/log.csv", in_work(parts));
        char *log_whole = slurp(path_whole, NULL), *log_parts = slurp(path_parts, NULL);
        for (int row = 0; row < 30; row++) {
            double a = log_field(log_whole, row, 1), b = log_field(log_parts, row, 1);
            ck_assert_msg(fabs(a - b) <= ACCUM_TOLERANCE, "%s: step %d's loss is %.6f with --batch 12, %.6f with --batch 4 --grad-accum 3",
                          cases[c][3], row, a, b);
            // tokens_per_s = B x K x T tokens per ms (both rounded in the log)
            double ms = log_field(log_parts, row, 4), tokens_per_s = log_field(log_parts, row, 5);
            ck_assert_msg(fabs(tokens_per_s - 12 * 16 * 1e3 / ms) <= 0.01 * tokens_per_s + 1,
                          "step %d: %g tokens/s in %g ms, not 12 x 16 tokens a step", row, tokens_per_s, ms);
        }
        free(log_whole);
        free(log_parts);
        double diff = max_weight_difference(in_work(whole), in_work(parts));
        ck_assert_msg(diff <= ACCUM_TOLERANCE, "%s: the weights differ by up to %g", cases[c][3], diff);
    }
}
END_TEST

// The check above could pass if --grad-accum did nothing at all; so a step
// of 3 micro-batches of 4 rows must differ from a step on 4 rows.
START_TEST(grad_accum_changes_what_a_step_sees) {
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("four"), "--steps", "10", TINY), 0);
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("twelve"), "--steps", "10", TINY, "--grad-accum", "3"), 0);
    ck_assert_double_gt(max_weight_difference(in_work("four"), in_work("twelve")), 1e-4);
}
END_TEST

// The promise of the slices (model.h): two threads each running the whole
// step on half the rows give one thread's losses and weights, to rounding
// (only the order of the gradient's sums differs); with dropout on, for
// gpt and card. The memory line says the slices were used, so the check
// cannot pass by their being skipped; a batch two threads cannot halve
// runs unsliced, each layer sharing its rows.
START_TEST(threads_that_each_run_the_step_on_their_rows_give_one_threads_losses) {
    const char *archs[] = {"gpt", "card"};
    for (int a = 0; a < 2; a++) {
        for (int batch = 4; batch <= 5; batch++) {
            char one[64], two[64], batch_text[8];
            snprintf(one, sizeof one, "one-%s-%d", archs[a], batch);
            snprintf(two, sizeof two, "two-%s-%d", archs[a], batch);
            snprintf(batch_text, sizeof batch_text, "%d", batch);
            ck_assert_int_eq(RUN("train", corpus, "--out", in_work(one), "--steps", "30", TINY, "--batch", batch_text,
                                 "--dropout", "0.1", "--arch", archs[a], "--threads", "1"),
                             0);
            ck_assert_int_eq(RUN("train", corpus, "--out", in_work(two), "--steps", "30", TINY, "--batch", batch_text,
                                 "--dropout", "0.1", "--arch", archs[a], "--threads", "2"),
                             0);
            const bool sliced = strstr(last_err(), "each of 2 threads runs the step on 2 of the 4 rows") != NULL;
            ck_assert_msg(sliced == (batch == 4), "%s --batch %d: %s", archs[a], batch, last_err());
            char path_one[600], path_two[600];
            snprintf(path_one, sizeof path_one, "%s/log.csv", in_work(one));
            snprintf(path_two, sizeof path_two, "%s/log.csv", in_work(two));
            char *log_one = slurp(path_one, NULL), *log_two = slurp(path_two, NULL);
            for (int row = 0; row < 30; row++) {
                double x = log_field(log_one, row, 1), y = log_field(log_two, row, 1);
                ck_assert_msg(fabs(x - y) <= ACCUM_TOLERANCE, "%s --batch %d: step %d's loss is %.6f on 1 thread, %.6f on 2",
                              archs[a], batch, row, x, y);
            }
            free(log_one);
            free(log_two);
            double diff = max_weight_difference(in_work(one), in_work(two));
            ck_assert_msg(diff <= ACCUM_TOLERANCE, "%s --batch %d: the weights differ by up to %g", archs[a], batch, diff);
        }
    }
}
END_TEST

// --thread-split layers: every layer shares its work among the threads and
// each sum keeps one order, so 1, 2 and 3 threads give the same weights,
// bit for bit, with dropout, for gpt and card, on a batch of 6 that 2
// threads split by rows would slice (said on the memory line, so the check
// cannot pass by the split being ignored); and the split is the run's: a
// run of 2 threads resumed without the flag keeps it, and ends on one
// thread's bits.
START_TEST(threads_that_split_the_layers_give_one_threads_bits) {
    const char *archs[] = {"gpt", "card"};
    for (int a = 0; a < 2; a++) {
        char one[64], by_rows[64];
        snprintf(one, sizeof one, "one-%s", archs[a]);
        snprintf(by_rows, sizeof by_rows, "rows-%s", archs[a]);
        ck_assert_int_eq(RUN("train", corpus, "--out", in_work(one), "--steps", "20", TINY, "--batch", "6",
                             "--dropout", "0.1", "--arch", archs[a], "--threads", "1"),
                         0);
        ck_assert_int_eq(RUN("train", corpus, "--out", in_work(by_rows), "--steps", "1", TINY, "--batch", "6",
                             "--dropout", "0.1", "--arch", archs[a], "--threads", "2"),
                         0);
        ck_assert_msg(strstr(last_err(), "each of 2 threads runs the step on 3 of the 6 rows") != NULL,
                      "%s: 2 threads split by rows did not slice the batch: %s", archs[a], last_err());
        for (int threads = 2; threads <= 3; threads++) {
            char out[64], threads_text[8];
            snprintf(out, sizeof out, "layers-%s-%d", archs[a], threads);
            snprintf(threads_text, sizeof threads_text, "%d", threads);
            ck_assert_int_eq(RUN("train", corpus, "--out", in_work(out), "--steps", threads == 2 ? "10" : "20", TINY,
                                 "--batch", "6", "--dropout", "0.1", "--arch", archs[a], "--threads", threads_text,
                                 "--thread-split", "layers"),
                             0);
            ck_assert_msg(strstr(last_err(), "more thread") == NULL, "%s: sliced with --thread-split layers: %s",
                          archs[a], last_err());
            if (threads == 2) ck_assert_int_eq(RUN("train", "--resume", in_work(out), "--steps", "20"), 0);
            char one_model[600], model[600];
            snprintf(one_model, sizeof one_model, "%s/model.safetensors", in_work(one));
            snprintf(model, sizeof model, "%s/model.safetensors", in_work(out));
            expect_same_weights_at_step(one_model, model, 20);
        }
    }
}
END_TEST

// OMP_THREAD_LIMIT below the threads asked for: the step runs on the
// threads there are, unsliced, and learns what one thread does (a team
// short of its slices once left half the rows out and summed a loss nobody
// wrote).
START_TEST(a_thread_limit_below_the_threads_asked_gives_one_threads_run) {
    // (--batch 4 with dropout: two threads without a limit slice it, as above.)
    ck_assert_int_eq(RUN("train", corpus, "--out", in_work("one"), "--steps", "10", TINY, "--batch", "4", "--dropout",
                         "0.1", "--threads", "1"),
                     0);
    ck_assert_int_eq(setenv("OMP_THREAD_LIMIT", "1", 1), 0);
    const int status = RUN("train", corpus, "--out", in_work("limited"), "--steps", "10", TINY, "--batch", "4",
                           "--dropout", "0.1", "--threads", "2");
    unsetenv("OMP_THREAD_LIMIT");
    ck_assert_int_eq(status, 0);
    ck_assert_msg(strstr(last_err(), "more thread") == NULL, "sliced under OMP_THREAD_LIMIT=1: %s", last_err());
    ck_assert_double_eq(max_weight_difference(in_work("one"), in_work("limited")), 0.0);
}
END_TEST

Suite *train_suite(void) {
    Suite *s = suite_create("train");
    TCase *resume = tcase_create("resume");
    tcase_add_checked_fixture(resume, setup, teardown);
    tcase_set_timeout(resume, TEST_TIMEOUT_SECONDS);
    tcase_add_test(resume, a_run_stopped_and_resumed_twice_matches_an_uninterrupted_run_bit_for_bit);
    tcase_add_test(resume, a_muon_run_stopped_and_resumed_matches_an_uninterrupted_run_bit_for_bit);
    tcase_add_test(resume, resuming_drops_log_rows_written_after_the_checkpoint);
    tcase_add_test(resume, resuming_with_a_larger_steps_trains_further_to_the_same_weights);
    tcase_add_test(resume, resuming_keeps_the_runs_threads);
    tcase_add_test(resume, resume_refuses_flags_that_would_change_the_run);
    tcase_add_test(resume, resume_of_a_finished_run_asks_for_a_larger_steps);
    tcase_add_test(resume, resume_refuses_a_different_text);
    tcase_add_test(resume, resume_refuses_an_optimizer_state_of_another_step_naming_both);
    tcase_add_test(resume, resume_of_a_directory_without_a_checkpoint_says_why);
    tcase_add_test(resume, resume_from_a_checkpoint_without_training_state_says_to_use_init);
    tcase_add_test(resume, train_without_file_or_resume_is_a_usage_error);
    tcase_add_test(resume, resuming_keeps_the_runs_keep);
    tcase_add_test(resume, resume_from_an_older_checkpoint_continues_that_step_bit_for_bit);
    suite_add_tcase(s, resume);

    TCase *accum = tcase_create("gradient accumulation");
    tcase_add_checked_fixture(accum, setup, teardown);
    tcase_set_timeout(accum, TEST_TIMEOUT_SECONDS);
    tcase_add_test(accum, threads_that_each_run_the_step_on_their_rows_give_one_threads_losses);
    tcase_add_test(accum, threads_that_split_the_layers_give_one_threads_bits);
    tcase_add_test(accum, a_thread_limit_below_the_threads_asked_gives_one_threads_run);
    tcase_add_test(accum, a_step_of_k_micro_batches_is_one_step_on_k_times_the_rows);
    tcase_add_test(accum, grad_accum_changes_what_a_step_sees);
    suite_add_tcase(s, accum);

    TCase *signals = tcase_create("signals");
    tcase_add_checked_fixture(signals, setup, teardown);
    tcase_set_timeout(signals, TEST_TIMEOUT_SECONDS);
    tcase_add_test(signals, ctrl_c_saves_a_checkpoint_exits_130_and_the_run_resumes_to_an_uninterrupted_runs_weights);
    tcase_add_test(signals, sigterm_saves_a_checkpoint_and_exits_143);
    tcase_add_test(signals, a_second_ctrl_c_quits_at_once_and_leaves_the_last_checkpoint_as_it_was);
    tcase_add_test(signals, a_killed_run_resumes_from_its_last_periodic_checkpoint_to_the_same_weights);
    suite_add_tcase(s, signals);

    TCase *run_dir = tcase_create("run directory");
    tcase_add_checked_fixture(run_dir, setup, teardown);
    tcase_set_timeout(run_dir, TEST_TIMEOUT_SECONDS);
    tcase_add_test(run_dir, a_new_run_refuses_an_out_that_holds_a_run_naming_its_files_and_the_ways_on);
    tcase_add_test(run_dir, an_out_that_is_a_file_is_a_usage_error);
    tcase_add_test(run_dir, force_replaces_the_run_and_leaves_no_file_of_the_old_one);
    tcase_add_test(run_dir, force_with_a_file_that_fails_to_load_deletes_nothing);
    tcase_add_test(run_dir, a_second_train_into_a_directory_in_use_stops_at_once_naming_the_pid);
    tcase_add_test(run_dir, a_directory_with_only_a_stale_lock_file_takes_a_new_run);
    tcase_add_test(run_dir, the_lock_message_names_no_dead_process);
    tcase_add_test(run_dir, the_model_holds_no_file_path_and_resume_finds_the_text_in_run_json);
    suite_add_tcase(s, run_dir);

    TCase *progress = tcase_create("log and progress");
    tcase_add_checked_fixture(progress, setup, teardown);
    tcase_set_timeout(progress, TEST_TIMEOUT_SECONDS);
    tcase_add_test(progress, a_log_that_cannot_be_written_stops_the_run_at_its_last_checkpoint);
    tcase_add_test(progress, without_validation_progress_lines_come_every_log_interval_steps);
    tcase_add_test(progress, steps_0_writes_a_loss_png_too);
    tcase_add_test(progress, a_closed_pipe_on_stdout_stops_the_run_with_a_save);
    tcase_add_test(progress, a_full_disk_on_stdout_stops_the_run_with_one_error_line);
    tcase_add_test(progress, text_too_big_for_memory_names_max_bytes);
    tcase_add_test(progress, the_best_validation_weights_are_kept_as_best_safetensors);
    tcase_add_test(progress, validation_that_stops_improving_is_warned_of_once);
    tcase_add_test(progress, resume_refuses_a_log_that_is_missing_or_cut_short_unless_told_to_restart_it);
    tcase_add_test(progress, after_a_resume_loss_png_shows_the_whole_run);
    suite_add_tcase(s, progress);

    TCase *faults = tcase_create("faults");
    tcase_add_checked_fixture(faults, setup, teardown);
    tcase_set_timeout(faults, TEST_TIMEOUT_SECONDS);
    tcase_add_test(faults, a_diverging_run_stops_naming_the_step_and_tensor_and_keeps_the_last_good_checkpoint);
    tcase_add_test(faults, a_run_stops_rather_than_save_weights_the_loader_would_refuse);
    suite_add_tcase(s, faults);

    TCase *bad = tcase_create("bad input");
    tcase_add_checked_fixture(bad, setup, teardown);
    tcase_set_timeout(bad, TEST_TIMEOUT_SECONDS);
    tcase_add_test(bad, train_rejects_an_unreadable_file_naming_it);
    tcase_add_test(bad, train_rejects_binary_data_naming_the_file_and_byte);
    tcase_add_test(bad, train_rejects_latin1_text_with_the_byte_offset);
    tcase_add_test(bad, train_rejects_an_empty_file_and_a_text_shorter_than_one_window);
    tcase_add_test(bad, train_rejects_bad_sizes_and_rates_as_usage_errors_naming_the_flag);
    tcase_add_test(bad, train_refuses_a_model_too_large_for_memory_before_allocating_it);
    suite_add_tcase(s, bad);
    return s;
}
