// test_faults.c: no failing write and no kill at any point of a run leaves a
// run directory that --resume refuses or resumes wrongly (src/io/run_dir.c
// and run_info.c, src/commands/train.c and train_save.c, the checked writers
// of src/base/common.c).
//
// A short run makes K checked file operations (writes, flushes, fsyncs,
// renames, links, mkdirs: io_fault in common.h counts them). For each N in
// 1..K, the run is started again with the Nth one failing (TINYGPT_FAIL_AT),
// then again with the process killed there (TINYGPT_SIGNAL_AT=N:9, as a
// power cut would) and with a `kill` arriving there (N:15); after each, the
// run is continued with --resume (or, when it never saved, started over with
// --force, as its message says) until it finishes, and its final model and
// log must be those of an undisturbed run, byte for byte. Then the exit
// statuses: a failed write is 1 and says which file; a SIGTERM is 143 if it
// cut the run short and 0 if it arrived during the final save.
//
// And the other way round: a command that is refused leaves the run
// directory byte for byte as it was, and every changed byte of run.json,
// or of the log's rows a checkpoint saw, is caught before a resume goes on.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csv_log.h"
#include "helpers.h"
#include "run_dir.h"
#include "sanitized.h"
#include "tests.h"

// Every operation in the gcc build; under the sanitizers, whose processes
// start several times slower, every STRIDEth (each kind of operation still
// comes round: a save's are the same at every save).
static const long STRIDE = TINYGPT_SANITIZED ? 5 : 1;

#define TEST_TIMEOUT_SECONDS 600

static char dir[256];
static char corpus[300];

// The run: card, tiny, 6 steps, a checkpoint every 2: three saves, evaluations, loss.png.
static const char RUN_FLAGS[] = "--arch card --steps 6 --save-every 2 --batch 2 --context 8 --embd 8 --heads 2 "
                                "--eval-interval 3 --eval-batches 2 --seed 5 --threads 1";

static void setup(void) {
    scratch_dir_create(dir, sizeof dir);
    snprintf(corpus, sizeof corpus, "%s", path_in(dir, "corpus.txt"));
    write_corpus(corpus, 20);
}
static void teardown(void) { scratch_dir_remove(dir); }

// train: tinygpt train "args" with "env" (a shell prefix, "" for none),
// told a peak (--peak) so that it skips the 0.1 s probe of the CPU's: half
// of so short a run's time, and these tests start hundreds.
static RunResult *train(const char *env, const char *args) {
    char binary[512], line[2048];
    snprintf(binary, sizeof binary, "%s %s", env, tinygpt_binary());
    snprintf(line, sizeof line, "train %s --peak 100", args);
    return run_binary(binary, dir, line);
}

// finish: continue the run in "out" until it ends, as a user would after
// the failure: --resume, or, if it never saved, start over with --force.
static void finish(const char *out, const char *why) {
    for (int attempt = 0; attempt < 3; attempt++) {
        char newest[4200], args[1024];
        long step;
        bool saved = run_dir_latest_checkpoint(out, newest, sizeof newest, &step);
        if (saved && step == 6) return;  // the last checkpoint was whole: nothing to continue
        if (saved)
            snprintf(args, sizeof args, "--resume %s", out);
        else snprintf(args, sizeof args, "%s --out %s --force %s", corpus, out, RUN_FLAGS);
        RunResult *r = train("", args);
        if (r->status == 0) return;
        ck_assert_msg(false, "%s: the next run failed (%d): %s", why, r->status, r->err);
    }
}

// expect_undisturbed: run "out" ended as the undisturbed run "ref" did:
// the same model file, byte for byte, and the same log.
static void expect_undisturbed(const char *out, const char *ref, const char *why) {
    size_t len_a, len_b;
    char *a = slurp_or_empty(path_in(out, "model.safetensors"), &len_a);
    char *b = slurp_or_empty(path_in(ref, "model.safetensors"), &len_b);
    ck_assert_msg(len_a > 0 && len_a == len_b && memcmp(a, b, len_a) == 0, "%s: the final model differs", why);
    free(a);
    free(b);
    char *log_a = log_numbers(out), *log_b = log_numbers(ref);
    ck_assert_msg(strcmp(log_a, log_b) == 0, "%s: the log differs:\n%s\n---\n%s", why, log_a, log_b);
    free(log_a);
    free(log_b);
}

// operations: how many checked file operations the undisturbed run makes
// (run into "ref").
static long operations(const char *ref) {
    char args[1024];
    snprintf(args, sizeof args, "%s --out %s %s", corpus, ref, RUN_FLAGS);
    RunResult *r = train("TINYGPT_COUNT_IO=1", args);
    ck_assert_msg(r->status == 0, "the undisturbed run failed: %s", r->err);
    const char *at = strstr(r->err, "tinygpt: ");
    long k = -1;
    for (; at; at = strstr(at + 1, "tinygpt: "))
        if (sscanf(at, "tinygpt: %ld checked file operations", &k) == 1) break;
    ck_assert_msg(k > 50, "no count of operations (or too few): %s", r->err);
    return k;
}

// Every failing operation, in turn: the run stops (exit 1, naming the file)
// unless the failure was loss.png's, which it reports and goes on without,
// to exit 1 at the end; either way --resume finishes it as if nothing had
// happened.
START_TEST(a_failing_write_at_any_point_loses_nothing) {
    char ref[300], out[300];
    snprintf(ref, sizeof ref, "%s", path_in(dir, "ref"));
    snprintf(out, sizeof out, "%s", path_in(dir, "out"));
    long k = operations(ref);
    int stopped = 0;
    for (long n = 1; n <= k; n += STRIDE) {
        char env[64], args[1024], why[64];
        snprintf(env, sizeof env, "TINYGPT_FAIL_AT=%ld", n);
        snprintf(why, sizeof why, "the write %ld of %ld failing", n, k);
        snprintf(args, sizeof args, "%s --out %s %s", corpus, out, RUN_FLAGS);
        scratch_dir_remove(out);
        RunResult *r = train(env, args);
        ck_assert_msg(r->status == 1, "%s: exit %d, expected 1: %s", why, r->status, r->err);
        ck_assert_msg(strstr(r->err, dir) != NULL, "%s: the message names no file: %s", why, r->err);
        if (!strstr(r->err, "the run is saved, but")) stopped++;
        finish(out, why);
        expect_undisturbed(out, ref, why);
    }
    ck_assert_int_gt(stopped, k / STRIDE / 2);
}
END_TEST

// Killed at every operation, as by a power cut: whatever is on the disk
// lets --resume finish the run as if nothing had happened.
START_TEST(a_kill_at_any_point_loses_nothing) {
    char ref[300], out[300];
    snprintf(ref, sizeof ref, "%s", path_in(dir, "ref"));
    snprintf(out, sizeof out, "%s", path_in(dir, "out"));
    long k = operations(ref);
    for (long n = 1; n <= k; n += STRIDE) {
        char env[64], args[1024], why[64];
        snprintf(env, sizeof env, "TINYGPT_SIGNAL_AT=%ld:9", n);
        snprintf(why, sizeof why, "killed at operation %ld of %ld", n, k);
        snprintf(args, sizeof args, "%s --out %s %s", corpus, out, RUN_FLAGS);
        scratch_dir_remove(out);
        RunResult *r = train(env, args);
        ck_assert_msg(r->status == 128 + 9, "%s: exit %d: %s", why, r->status, r->err);
        finish(out, why);
        expect_undisturbed(out, ref, why);
    }
}
END_TEST

// A `kill` (SIGTERM) at every operation: the run saves and says so, exit
// 143 when it cut the run short; when it arrives during the final save,
// every step ran and was saved: exit 0. Either way nothing is lost.
START_TEST(a_sigterm_at_any_point_saves_and_exits_as_it_should) {
    char ref[300], out[300];
    snprintf(ref, sizeof ref, "%s", path_in(dir, "ref"));
    snprintf(out, sizeof out, "%s", path_in(dir, "out"));
    long k = operations(ref);
    int finished = 0;
    for (long n = 1; n <= k; n += STRIDE) {
        char env[64], args[1024], why[64];
        snprintf(env, sizeof env, "TINYGPT_SIGNAL_AT=%ld:15", n);
        snprintf(why, sizeof why, "SIGTERM at operation %ld of %ld", n, k);
        snprintf(args, sizeof args, "%s --out %s %s", corpus, out, RUN_FLAGS);
        scratch_dir_remove(out);
        RunResult *r = train(env, args);
        ck_assert_msg(r->status == 0 || r->status == 128 + 15, "%s: exit %d: %s", why, r->status, r->err);
        if (r->status == 0) {
            ck_assert_msg(strstr(r->err, "checkpoint-6"), "%s: exit 0 without the last save: %s", why, r->err);
            finished++;
        } else {
            ck_assert_msg(strstr(r->err, "stopped after") && strstr(r->err, "--resume"), "%s: %s", why, r->err);
            finish(out, why);
        }
        expect_undisturbed(out, ref, why);
    }
    ck_assert_msg(finished > 0, "no SIGTERM arrived during the final save");
}
END_TEST

// ---- Refusals ----------------------------------------------------------------

// saved_run: the run "name" in the scratch directory, stopped after 4 of its
// 6 steps with --keep 2 (checkpoint-2 and checkpoint-4), into "out" [cap].
static void saved_run(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s", path_in(dir, name));
    char args[1024];
    snprintf(args, sizeof args, "%s --out %s %s --keep 2 --stop-after 4", corpus, out, RUN_FLAGS);
    RunResult *r = train("", args);
    ck_assert_msg(r->status == 0, "the run failed: %s", r->err);
}

// flip: byte "at" of the file "path" XOR "mask" (again: as it was).
static void flip(const char *path, size_t at, unsigned char mask) {
    size_t len;
    char *bytes = slurp(path, &len);
    ck_assert_uint_lt(at, len);
    bytes[at] ^= (char)mask;
    write_bytes(path, bytes, len);
    free(bytes);
}

// expect_refused_without_trace: "args" (a train command line, "%s" the
// run directory "run") exits with "status" in one line saying "needle",
// and leaves "run" as it was.
static void expect_refused_without_trace(const char *run, const char *format, int status, const char *needle) {
    char args[1024];
    snprintf(args, sizeof args, format, run);
    char *before = tree_snapshot(run);
    RunResult *r = train("", args);
    ck_assert_msg(r->status == status && strstr(r->err, needle) && stderr_is_one_line(r),
                  "train %s: exit %d (not %d), or its error does not say '%s' on one line: %s", args, r->status, status,
                  needle, r->err);
    expect_tree_unchanged(run, before, args);
}

// Every way a command on a run directory is refused, the directory is as it
// was after: no lock file made or written, no leftover of a killed save
// removed, no log cut. (A lock file left in a checkpoint once made every
// later save of the run fail.)
START_TEST(a_refused_command_leaves_the_run_directory_as_it_was) {
    char run[300], damaged[4300];
    saved_run("r", run, sizeof run);
    // A killed save's leftovers, which only a run that goes on removes.
    ck_assert_int_eq(mkdir(path_in(run, "checkpoint-9.tmp"), 0700), 0);
    write_text_file(path_in(run, "checkpoint-9.tmp/model.safetensors.tmp"), "half a checkpoint");
    write_text_file(path_in(run, "model.safetensors.tmp"), "half a link");
    const char *other = path_in(dir, "other.txt");
    write_corpus(other, 21);
    char other_args[600];
    snprintf(other_args, sizeof other_args, "%s --resume %%s", other);
    expect_refused_without_trace(run, "--resume %s --lr 0.1", 2, "cannot be changed when resuming");
    expect_refused_without_trace(run, "--resume %s --force", 2, "drop one of them");
    expect_refused_without_trace(run, "--resume %s --steps 4", 2, "already at step 4");
    expect_refused_without_trace(run, "--resume %s/checkpoint-2 --steps 2", 2, "already at step 2");
    expect_refused_without_trace(run, "--resume %s/checkpoint-3", 1, "has no checkpoint of step 3");
    expect_refused_without_trace(run, other_args, 1, "is not the text this run was trained on");
    char new_args[1024];
    snprintf(new_args, sizeof new_args, "%s --out %%s %s", corpus, RUN_FLAGS);
    expect_refused_without_trace(run, new_args, 2, "already holds a run");
    snprintf(new_args, sizeof new_args, "%s --out %%s --force %s", path_in(dir, "no-such.txt"), RUN_FLAGS);
    expect_refused_without_trace(run, new_args, 1, "no-such.txt");
    // Each damaged file in turn (and put back).
    const char *files[] = {"run.json", "log.csv", "checkpoint-4/log.json", "checkpoint-4/model.safetensors",
                           "checkpoint-4/optimizer.safetensors"};
    for (int i = 0; i < COUNT(files); i++) {
        snprintf(damaged, sizeof damaged, "%s", path_in(run, files[i]));
        if (access(damaged, F_OK) != 0) continue;  // SGD: no optimizer state
        flip(damaged, 20, 0x01);
        expect_refused_without_trace(run, "--resume %s", 1, files[i]);
        flip(damaged, 20, 0x01);
    }
    // Nothing stopped it: it finishes, and clears the leftovers.
    snprintf(new_args, sizeof new_args, "--resume %s", run);
    RunResult *r = train("", new_args);
    ck_assert_msg(r->status == 0, "the run did not resume: %s", r->err);
    ck_assert_int_ne(access(path_in(run, "checkpoint-9.tmp"), F_OK), 0);
}
END_TEST

// Every byte of run.json changed, each of 8 ways, is caught by its reader;
// every byte changed once is refused by --resume, naming the file.
START_TEST(every_changed_byte_of_run_json_is_caught) {
    char run[300], path[600];
    saved_run("r", run, sizeof run);
    snprintf(path, sizeof path, "%s", path_in(run, "run.json"));
    size_t len;
    char *good = slurp(path, &len);
    Metadata md;
    Error err;
    ck_assert_msg(run_info_read(fopen(path, "rb"), path, run, &md, &err) == 0, "%s", err.msg);
    metadata_free(&md);
    for (size_t at = 0; at < len; at++)
        for (int bit = 0; bit < 8; bit++) {
            good[at] ^= (char)(1 << bit);
            write_bytes(path, good, len);
            good[at] ^= (char)(1 << bit);
            int status = run_info_read(fopen(path, "rb"), path, run, &md, &err);
            if (status == 0) metadata_free(&md);
            ck_assert_msg(status != 0, "run.json with byte %zu XOR %d was read: %s", at, 1 << bit, good);
        }
    char args[700];
    snprintf(args, sizeof args, "--resume %s", run);
    for (size_t at = 0; at < len; at += STRIDE) {
        good[at] ^= 0x01;
        write_bytes(path, good, len);
        good[at] ^= 0x01;
        RunResult *r = train("", args);
        ck_assert_msg(r->status == 1 && strstr(r->err, "run.json' is damaged"), "byte %zu: exit %d: %s", at, r->status,
                      r->err);
    }
    // FILE given makes it unneeded, as the message says: the run goes on,
    // and its save writes run.json anew.
    good[len / 2] ^= 0x01;
    write_bytes(path, good, len);
    free(good);
    snprintf(args, sizeof args, "%s --resume %s", corpus, run);
    RunResult *r = train("", args);
    ck_assert_msg(r->status == 0, "a damaged run.json with FILE given: exit %d: %s", r->status, r->err);
    ck_assert_msg(run_info_read(fopen(path, "rb"), path, run, &md, &err) == 0, "%s", err.msg);
    metadata_free(&md);
}
END_TEST

// Every byte of the log's rows that checkpoint-4 saw, changed, is caught
// before a resume cuts or appends anything; a byte of a row after them (as
// a run killed after its save leaves) is not checked, and the resume cuts
// that row off.
START_TEST(every_changed_byte_of_the_logs_checked_rows_is_caught) {
    char run[300], log_path[600], checkpoint[600];
    saved_run("r", run, sizeof run);
    snprintf(log_path, sizeof log_path, "%s", path_in(run, "log.csv"));
    snprintf(checkpoint, sizeof checkpoint, "%s", path_in(run, "checkpoint-4"));
    LogMark mark;
    Error err;
    ck_assert_msg(run_dir_read_log_mark(checkpoint, &mark, &err), "%s", err.msg);
    size_t len;
    char *good = slurp(log_path, &len);
    ck_assert_msg(mark.present && mark.bytes == len, "the mark covers %llu bytes of %zu", (unsigned long long)mark.bytes, len);
    // A row of step 4, after the checkpoint's, as a killed run leaves it.
    const char row[] = "4,9.999,,0.5,1.0,100,1,,,0.1,\n";
    good = xrealloc(good, len + sizeof row);
    memcpy(good + len, row, sizeof row);
    const size_t whole = len + sizeof row - 1;
    char header[512];  // the log's own header: the one the run writes
    snprintf(header, sizeof header, "%.*s", (int)(strchr(good, '\n') - good + 1), good);
    for (size_t at = 0; at < whole; at++)
        for (int bit = 0; bit < 8; bit++) {
            good[at] ^= (char)(1 << bit);
            write_bytes(log_path, good, whole);
            good[at] ^= (char)(1 << bit);
            CsvLog log;
            bool taken = csv_log_prepare(&log, log_path, header, 4, false, &mark, &err);
            if (taken) ck_assert_uint_eq(log.keep, len);  // a changed row after the checkpoint's: cut off
            csv_log_close(&log);
            ck_assert_msg(taken == (at >= len), "log.csv with byte %zu (of %zu checked) XOR %d: %s", at, len, 1 << bit,
                          taken ? "taken" : err.msg);
        }
    free(good);
}
END_TEST

// The same through --resume, for a spread of the checked bytes: each is
// refused, naming the log, and leaves it as it was; the log put back, the
// run resumes.
START_TEST(a_resume_refuses_a_log_with_a_changed_byte_in_its_checked_rows) {
    char run[300], log_path[600], args[700];
    saved_run("r", run, sizeof run);
    snprintf(log_path, sizeof log_path, "%s", path_in(run, "log.csv"));
    snprintf(args, sizeof args, "--resume %s", run);
    size_t len;
    char *good = slurp(log_path, &len);  // every byte of it: the run saved at its last step
    for (size_t at = 0; at < len; at += 7 * STRIDE) {
        good[at] ^= 0x01;
        write_bytes(log_path, good, len);
        good[at] ^= 0x01;
        RunResult *r = train("", args);
        ck_assert_msg(r->status == 1 && strstr(r->err, "log.csv' is not the log the checkpoint of step 4 was saved with"),
                      "byte %zu: exit %d: %s", at, r->status, r->err);
    }
    write_bytes(log_path, good, len);
    RunResult *r = train("", args);
    ck_assert_msg(r->status == 0, "the run did not resume: %s", r->err);
    free(good);
}
END_TEST

// Three suites, one test each, so that two processes can run them side by
// side (each starts a few hundred runs).
static Suite *faults_suite(const char *name, const TTest *test) {
    Suite *s = suite_create(name);
    TCase *tc = tcase_create("every operation");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT_SECONDS);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
    return s;
}
Suite *faults_failing_write_suite(void) {
    return faults_suite("faults_failing_write", a_failing_write_at_any_point_loses_nothing);
}
Suite *faults_kill_suite(void) { return faults_suite("faults_kill", a_kill_at_any_point_loses_nothing); }
Suite *faults_refusals_suite(void) {
    Suite *s = faults_suite("faults_refusals", a_refused_command_leaves_the_run_directory_as_it_was);
    TCase *tc = tcase_create("changed bytes");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, TEST_TIMEOUT_SECONDS);
    tcase_add_test(tc, every_changed_byte_of_run_json_is_caught);
    tcase_add_test(tc, every_changed_byte_of_the_logs_checked_rows_is_caught);
    tcase_add_test(tc, a_resume_refuses_a_log_with_a_changed_byte_in_its_checked_rows);
    suite_add_tcase(s, tc);
    return s;
}
Suite *faults_sigterm_suite(void) {
    return faults_suite("faults_sigterm", a_sigterm_at_any_point_saves_and_exits_as_it_should);
}
