// test_common.c: tests for src/base/common.c: the one error formatter, the
// one way to quote outside text in a message, the checked open that refuses
// what would hang or never end, the atomic writer, paths, and the big
// buffers' allocation (on a cache line, zeroed, or a clear exit); and for
// src/base/parallel.h: where RUN_SHARED starts a region.
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

#include "common.h"
#include "helpers.h"
#include "parallel.h"
#include "sanitized.h"
#include "tests.h"

// Opening a FIFO for reading waits for a writer: if fopen_checked ever does
// that again, the alarm ends the test (a failure) instead of a hang.
#define HANG_SECONDS 10

static char dir[256];

static void setup(void) { scratch_dir_create(dir, sizeof dir); }
static void teardown(void) { scratch_dir_remove(dir); }

// ---- error_set / error_setv ---------------------------------------------------

// prefixed: error_setv behind a printf-style helper, as the checkpoint
// loader's reject() and the JSON parser's fail_at() use it.
__attribute__((format(printf, 3, 4)))
static bool prefixed(Error *err, const char *prefix, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    bool result = error_setv(err, prefix, fmt, args);
    va_end(args);
    return result;
}

START_TEST(error_setv_writes_the_prefix_then_the_message_and_returns_false) {
    Error err = {{0}};
    ck_assert(!prefixed(&err, "'m.safetensors' is not valid: ", "tensor '%s' at %d", "head.bias", 3));
    ck_assert_str_eq(err.msg, "'m.safetensors' is not valid: tensor 'head.bias' at 3");
    ck_assert(!error_set(&err, "plain %s", "message"));
    ck_assert_str_eq(err.msg, "plain message");
    ck_assert(!prefixed(NULL, "ignored: ", "%s", "no Error to fill"));  // NULL is allowed, as for error_set
    // A message longer than Error.msg is cut, never overrun.
    char long_text[1000];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    prefixed(&err, "p: ", "%s", long_text);
    ck_assert_uint_eq(strlen(err.msg), sizeof err.msg - 1);
    ck_assert(strncmp(err.msg, "p: xxx", 6) == 0);
}
END_TEST

// ---- show -----------------------------------------------------------------------

START_TEST(show_replaces_control_characters_and_keeps_the_rest) {
    const char text[] = "a\nb\tc\0d\x7F" "e\r";
    ck_assert_str_eq(show(text, sizeof text - 1).text, "a?b?c?d?e?");
    // UTF-8 stays as it is; the C1 controls (U+0080..U+009F, C2 80..C2 9F,
    // which some terminals obey) do not.
    ck_assert_str_eq(show("caf\xC3\xA9 \xE2\x80\x94", 9).text, "caf\xC3\xA9 \xE2\x80\x94");
    ck_assert_str_eq(show("x\xC2\x9B" "1m", 5).text, "x?1m");
    ck_assert_str_eq(show("\xC2\xA0", 2).text, "\xC2\xA0");  // U+00A0, just past the C1 range
    ck_assert_str_eq(show("", 0).text, "");
}
END_TEST

START_TEST(show_cuts_a_long_string_at_a_character_boundary_and_says_so) {
    // 60 bytes fit whole; 61 give the first 60, then "...".
    char text[100];
    memset(text, 'a', 61);
    Shown s = show(text, 60);
    ck_assert_uint_eq(strlen(s.text), 60);
    ck_assert(strspn(s.text, "a") == 60);
    s = show(text, 61);
    ck_assert_uint_eq(strlen(s.text), 63);
    ck_assert(strcmp(s.text + 60, "...") == 0);
    // 59 ASCII bytes and an em dash (3 bytes): the dash would end at byte
    // 62, so it is left out whole rather than cut in half.
    memset(text, 'b', 59);
    memcpy(text + 59, "\xE2\x80\x94", 3);
    s = show(text, 62);
    ck_assert_uint_eq(strlen(s.text), 62);
    ck_assert(strncmp(s.text + 57, "bb...", 5) == 0);
}
END_TEST

// ---- fopen_checked and read_file --------------------------------------------------

START_TEST(fopen_checked_refuses_a_fifo_at_once_naming_it) {
    const char *fifo = path_in(dir, "pipe.txt");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    alarm(HANG_SECONDS);
    Error err = {{0}};
    ck_assert_ptr_null(fopen_checked(fifo, "rb", &err));
    ck_assert_msg(strstr(err.msg, fifo) && strstr(err.msg, "is a named pipe (FIFO), not a regular file") &&
                      strstr(err.msg, "save what you need to a file") && !strchr(err.msg, '\n'),
                  "message was: %s", err.msg);
    char *text = NULL;
    size_t len;
    ck_assert(!read_file(fifo, &text, &len, &err));
    ck_assert_ptr_null(text);
    alarm(0);
}
END_TEST

START_TEST(read_file_refuses_a_device_that_never_ends) {
    alarm(HANG_SECONDS);  // /dev/zero would be read until memory runs out
    Error err = {{0}};
    char *text = NULL;
    size_t len;
    ck_assert(!read_file("/dev/zero", &text, &len, &err));
    ck_assert_msg(strstr(err.msg, "'/dev/zero' is a character device, not a regular file"), "message was: %s",
                  err.msg);
    alarm(0);
}
END_TEST

START_TEST(fopen_checked_says_what_to_do_about_a_missing_file_or_directory) {
    Error err = {{0}};
    ck_assert_ptr_null(fopen_checked(path_in(dir, "missing.txt"), "rb", &err));
    ck_assert_msg(strstr(err.msg, "missing.txt' for reading: no such file; check the name"), "message was: %s",
                  err.msg);
    ck_assert_ptr_null(fopen_checked(path_in(dir, "no/such/dir/log.csv"), "w", &err));
    ck_assert_msg(strstr(err.msg, "log.csv' for writing: no such directory; create it first"), "message was: %s",
                  err.msg);
    ck_assert_ptr_null(fopen_checked(dir, "rb", &err));
    ck_assert_msg(strstr(err.msg, "is a directory; give the path of a file"), "message was: %s", err.msg);
    ck_assert_ptr_null(fopen_checked(dir, "wb", &err));
    ck_assert_msg(strstr(err.msg, "is a directory; give the path of a file"), "message was: %s", err.msg);
}
END_TEST

START_TEST(read_file_reads_a_regular_file_and_a_link_to_one) {
    write_text_file(path_in(dir, "a.txt"), "hello\n");
    char target[512];
    snprintf(target, sizeof target, "%s", path_in(dir, "a.txt"));
    ck_assert_int_eq(symlink(target, path_in(dir, "link.txt")), 0);
    const char *names[] = {"a.txt", "link.txt"};
    for (int i = 0; i < 2; i++) {
        Error err = {{0}};
        char *text;
        size_t len;
        ck_assert_msg(read_file(path_in(dir, names[i]), &text, &len, &err), "%s", err.msg);
        ck_assert_uint_eq(len, 6);
        ck_assert_str_eq(text, "hello\n");
        free(text);
    }
}
END_TEST

// A system file (a cgroup's memory.max, /sys's cache sizes) gives its first
// line, cut to the buffer; one that is not there gives false, and no
// message: the machine not saying is an answer.
START_TEST(read_system_line_gives_the_first_line_or_false_when_missing) {
    write_text_file(path_in(dir, "size"), "48K\nsecond line\n");
    char text[16];
    ck_assert(read_system_line(path_in(dir, "size"), text, sizeof text));
    ck_assert_str_eq(text, "48K\n");
    char small[3];
    ck_assert(read_system_line(path_in(dir, "size"), small, sizeof small));
    ck_assert_str_eq(small, "48");
    write_text_file(path_in(dir, "empty"), "");
    ck_assert(!read_system_line(path_in(dir, "empty"), text, sizeof text));
    ck_assert(!read_system_line(path_in(dir, "missing"), text, sizeof text));
}
END_TEST

// ---- Paths -------------------------------------------------------------------------

// A stream read without a bound (max_bytes SIZE_MAX: a file read whole)
// that outgrows memory says so, and names no --max-bytes, which only a
// caller that has one (standard input's) can point to.
START_TEST(read_stream_out_of_memory_without_a_bound_names_no_flag) {
    if (TINYGPT_SANITIZED) return;  // the sanitizers reserve more address space than the limit below
    const struct rlimit memory = {400u << 20, 400u << 20};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &memory), 0);  // this test's own process (check forks each)
    void *volatile beyond = malloc(500u << 20);  // volatile: kept, not elided with its free
    if (beyond) {  // qemu-user (make arm-check) takes the limit and does not enforce it
        free(beyond);
        fprintf(stderr, "common: skipped read_stream out of memory: this process's address-space limit is not enforced\n");
        return;
    }
    FILE *zeros = popen("head -c 600000000 /dev/zero", "r");
    ck_assert_ptr_nonnull(zeros);
    char *text = NULL;
    size_t len = 0;
    Error err = {{0}};
    ck_assert(!read_stream(zeros, "zeros", SIZE_MAX, &text, &len, &err));
    pclose(zeros);
    ck_assert_msg(strstr(err.msg, "out of memory reading zeros") && !strstr(err.msg, "--max-bytes"), "%s", err.msg);
}
END_TEST

START_TEST(path_dir_is_the_directory_of_a_file_as_dirname_says) {
    const char *cases[][2] = {
        {"runs/a/log.csv", "runs/a"}, {"log.csv", "."},  {"./log.csv", "."},          {"../log.csv", ".."},
        {"/x", "/"},                  {"//x", "/"},      {"runs/a//log.csv", "runs/a"}, {"/a/b", "/a"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        ck_assert_msg(path_dir(cases[i][0], out, sizeof out), "'%s' did not fit", cases[i][0]);
        ck_assert_msg(strcmp(out, cases[i][1]) == 0, "path_dir('%s') is '%s', not '%s'", cases[i][0], out, cases[i][1]);
    }
    char small[4];
    ck_assert(!path_dir("runs/a/log.csv", small, sizeof small));
    ck_assert_str_eq(small, "run");
}
END_TEST

START_TEST(path_base_is_what_follows_the_last_slash) {
    ck_assert_str_eq(path_base("runs/a/log.csv"), "log.csv");
    ck_assert_str_eq(path_base("log.csv"), "log.csv");
    ck_assert_str_eq(path_base("/x"), "x");
    ck_assert_str_eq(path_base("runs/a/"), "");
}
END_TEST

// ---- The atomic writer ---------------------------------------------------------------

// A file written without sync (loss.png) still replaces the old one whole,
// and a failed write leaves the old one; neither leaves its .tmp.
START_TEST(atomic_commit_without_sync_replaces_the_file_whole_or_not_at_all) {
    const char *path = path_in(dir, "picture.png");
    char tmp[600], text[64];
    snprintf(tmp, sizeof tmp, "%s" ATOMIC_TMP_SUFFIX, path);
    write_text_file(path, "old");
    for (int ok = 0; ok <= 1; ok++) {
        AtomicFile af;
        Error err = {{0}};
        ck_assert_msg(atomic_open(&af, path, &err), "%s", err.msg);
        ck_assert(af.sync);  // the default: on the disk
        af.sync = false;
        fputs("new", af.f);
        ck_assert_int_eq(atomic_commit(&af, ok, &err), ok);
        read_text_file(path, text, sizeof text);
        ck_assert_str_eq(text, ok ? "new" : "old");
        ck_assert_msg(access(tmp, F_OK) != 0, "the .tmp is left (ok = %d)", ok);
    }
}
END_TEST

// ---------------------------------------------------------------------------
// parallel.h

enum { LOOP_ITERATIONS = 1000 };

// A loop as the fast kernels write theirs: an orphaned `omp for`. Counts
// the iterations it ran (every thread's) and, once, the team's size.
static void shared_loop(int *iterations, int *team) {
#pragma omp for schedule(static)
    for (int i = 0; i < LOOP_ITERATIONS; i++) {
#pragma omp atomic
        (*iterations)++;
    }
#pragma omp single
    *team = omp_get_num_threads();
}

START_TEST(run_shared_starts_a_region_only_outside_one_and_for_work_that_pays) {
    // Outside any region, work that pays: a region of all the threads,
    // which share the iterations (each runs once).
    int iterations = 0, team = 0;
    RUN_SHARED(100, 10, shared_loop(&iterations, &team));
    ck_assert_int_eq(iterations, LOOP_ITERATIONS);
    ck_assert_int_eq(team, omp_get_max_threads());
    // Work too small: no region, this thread alone.
    iterations = team = 0;
    RUN_SHARED(5, 10, shared_loop(&iterations, &team));
    ck_assert_int_eq(iterations, LOOP_ITERATIONS);
    ck_assert_int_eq(team, 1);
    // Two slices, each in a team of one of its own (train.c's model_pass):
    // neither starts a region (a nested team of one, each time, is the cost
    // parallel.h avoids), and each runs every iteration itself.
    int slice_iterations[2] = {0, 0}, slice_team[2] = {0, 0}, pays[2] = {1, 1};
#pragma omp parallel num_threads(2)
    {
        const int j = omp_get_thread_num();
#pragma omp parallel num_threads(1)
        {
            pays[j] = own_region_pays(100, 10) || omp_get_num_threads() != 1;
            RUN_SHARED(100, 10, shared_loop(&slice_iterations[j], &slice_team[j]));
        }
    }
    for (int j = 0; j < 2; j++) {
        if (omp_get_max_threads() < 2 && j == 1) break;  // one core: the outer team had one thread
        ck_assert_msg(!pays[j], "slice %d would start a region of its own", j);
        ck_assert_int_eq(slice_iterations[j], LOOP_ITERATIONS);
        ck_assert_int_eq(slice_team[j], 1);
    }
}
END_TEST

// ---- xcalloc_lines -------------------------------------------------------------------

// Small blocks and large ones alike (glibc serves a large one from its own
// pages, with calloc's pointer 16 bytes past a page's start: the case that
// was misaligned) start on a 64-byte line, are zero throughout and can be
// written throughout; xfree_lines gives them back (valgrind and ASan would
// see a wrong pointer freed, or a leak).
START_TEST(xcalloc_lines_starts_on_a_cache_line_and_is_zeroed) {
    const size_t sizes[] = {1, 100, 4096, 1 << 20, 64 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        float *block = xcalloc_lines(sizes[i], sizeof(float));
        ck_assert_msg((uintptr_t)block % 64 == 0, "xcalloc_lines(%zu, 4) gave %p", sizes[i], (void *)block);
        size_t first_nonzero = 0;
        while (first_nonzero < sizes[i] && block[first_nonzero] == 0.0f) first_nonzero++;
        ck_assert_msg(first_nonzero == sizes[i], "element %zu of %zu is not 0", first_nonzero, sizes[i]);
        memset(block, 0xAB, sizes[i] * sizeof(float));
        xfree_lines(block);
    }
    xfree_lines(NULL);
}
END_TEST

// A count times a size past SIZE_MAX is not a small block: it is an exit
// with the out-of-memory message.
START_TEST(xcalloc_lines_exits_when_count_times_size_overflows) {
    (void)xcalloc_lines(SIZE_MAX / 2, 4);
}
END_TEST

Suite *common_suite(void) {
    Suite *s = suite_create("common");
    TCase *errors = tcase_create("errors");
    tcase_add_test(errors, error_setv_writes_the_prefix_then_the_message_and_returns_false);
    tcase_add_test(errors, show_replaces_control_characters_and_keeps_the_rest);
    tcase_add_test(errors, show_cuts_a_long_string_at_a_character_boundary_and_says_so);
    suite_add_tcase(s, errors);

    TCase *files = tcase_create("files");
    tcase_add_checked_fixture(files, setup, teardown);
    tcase_add_test(files, fopen_checked_refuses_a_fifo_at_once_naming_it);
    tcase_add_test(files, read_file_refuses_a_device_that_never_ends);
    tcase_add_test(files, fopen_checked_says_what_to_do_about_a_missing_file_or_directory);
    tcase_add_test(files, read_file_reads_a_regular_file_and_a_link_to_one);
    tcase_add_test(files, read_system_line_gives_the_first_line_or_false_when_missing);
    tcase_add_test(files, read_stream_out_of_memory_without_a_bound_names_no_flag);
    tcase_add_test(files, atomic_commit_without_sync_replaces_the_file_whole_or_not_at_all);
    suite_add_tcase(s, files);

    TCase *paths = tcase_create("paths");
    tcase_add_test(paths, path_dir_is_the_directory_of_a_file_as_dirname_says);
    tcase_add_test(paths, path_base_is_what_follows_the_last_slash);
    suite_add_tcase(s, paths);

    TCase *memory = tcase_create("memory");
    tcase_add_test(memory, xcalloc_lines_starts_on_a_cache_line_and_is_zeroed);
    tcase_add_exit_test(memory, xcalloc_lines_exits_when_count_times_size_overflows, EXIT_RUNTIME);
    suite_add_tcase(s, memory);

    TCase *parallel = tcase_create("parallel");
    tcase_add_test(parallel, run_shared_starts_a_region_only_outside_one_and_for_work_that_pays);
    suite_add_tcase(s, parallel);
    return s;
}
