// helpers.h: what several test files share: a scratch directory, running
// the tinygpt binary as a child process, reading a PNG's header, the
// OpenMP thread count, and random test data.
#ifndef TINYGPT_TEST_HELPERS_H
#define TINYGPT_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>

#include "rng.h"
#include "sanitized.h"

// scratch_dir_create: a new empty directory under /tmp, its path in "dir";
// scratch_dir_remove deletes it and everything in it.
void scratch_dir_create(char *dir, size_t cap);
void scratch_dir_remove(const char *dir);

typedef struct {
    int status;          // exit status (128 + signal if killed)
    char out[1 << 17];   // stdout
    char err[1 << 13];   // stderr
} RunResult;

// run_binary: run "binary args" (args is a shell fragment) with stdout and
// stderr captured through files in "dir" and stdin from /dev/null. The
// result lives in static storage, valid until the next call.
RunResult *run_binary(const char *binary, const char *dir, const char *args);
// tinygpt_binary: $TINYGPT_BIN, or ./tinygpt (what `make test` builds).
const char *tinygpt_binary(void);
// stderr_is_one_line: the message is exactly one line, ending in '\n'.
bool stderr_is_one_line(const RunResult *r);

// png_size: check that "path" starts with the 8-byte PNG signature followed
// by an IHDR chunk, and read its width and height. False (with the reason
// in "why") otherwise.
bool png_size(const char *path, int *width, int *height, char *why, size_t why_cap);

// write_text_file: create "path" holding "text" (asserts on failure).
void write_text_file(const char *path, const char *text);
// read_text_file: up to cap-1 bytes of "path" into "buf", NUL-terminated
// (empty when the file cannot be read).
void read_text_file(const char *path, char *buf, size_t cap);

// The thread count matters to tests that prove results do not depend on it,
// and to finite-difference loops that run thousands of tiny passes, where a
// parallel region costs more than its arithmetic.
void set_threads(int n);
int get_threads(void);
// fill_uniform: x[0..n) uniform in [-1, 1).
void fill_uniform(float *x, size_t n, Rng *rng);

#endif
