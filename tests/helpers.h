// helpers.h: what several test files share: a scratch directory and paths
// in it, running the tinygpt binary as a child process and checking how it
// failed, reading and writing whole files, a log.csv's fields, a PNG's
// header, the OpenMP thread count, random test data, every class of invalid
// UTF-8, and the two checks of a layer's numbers that its tests share (a
// tolerance, a gradcheck).
#ifndef TINYGPT_TEST_HELPERS_H
#define TINYGPT_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunk.h"
#include "gradcheck.h"
#include "rng.h"
#include "sanitized.h"

// COUNT: the number of elements of an array (not a pointer).
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// The gpt's tokens and parts before make sweep's recipe became train's
// defaults (2026-11-26): nanoGPT's, on characters, and its windows drawn
// at random (the gpt's default until 2026-11-28). Tests that count
// characters, or replay runs recorded before, ask for them by name.
// NANOGPT_MODEL: the parts alone, the flags of the model (gradcheck's too).
#define NANOGPT_MODEL "--norm layernorm --mlp gelu --pos learned --tied-head --no-qk-norm"
#define NANOGPT_PARTS "--tokenizer char " NANOGPT_MODEL " --order random"

// scratch_dir_create: a new empty directory under /tmp, its path in "dir";
// scratch_dir_remove deletes it and everything in it (made writable first:
// some tests take the permissions away).
void scratch_dir_create(char *dir, size_t cap);
void scratch_dir_remove(const char *dir);
// path_in: "dir/name", in one of 8 rotating buffers: enough for every path
// one command line needs; copy a path to keep it longer.
const char *path_in(const char *dir, const char *name);

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
// run_tinygpt: run_binary of tinygpt_binary().
RunResult *run_tinygpt(const char *dir, const char *args);
// stderr_is_one_line: the message is exactly one line, ending in '\n'.
bool stderr_is_one_line(const RunResult *r);
// expect_failure: the run "r" of "args" exited with "status", and its
// stderr is one line that mentions "needle": what every error of tinygpt's
// must be. expect_run_fails: the same for tinygpt run with "args" in "dir".
void expect_failure(const RunResult *r, const char *args, int status, const char *needle);
void expect_run_fails(const char *dir, const char *args, int status, const char *needle);

// log_cell: the text of field "column" (0-based) of data row "row" (0 =
// the first after the header) of a log.csv's text, into "out" [cap] ("" for
// an empty field). The row and the column must be there. log_field: the
// same field as a number, NaN if it is empty.
void log_cell(const char *log, int row, int column, char *out, size_t cap);
double log_field(const char *log, int row, int column);
// log_numbers: DIR/log.csv ("" if missing) without its timings (ms,
// tokens_per_s and seconds, the 5th, 6th and 10th columns): what a run must
// reproduce exactly. The caller frees it.
char *log_numbers(const char *dir);

// png_size: check that "path" starts with the 8-byte PNG signature followed
// by an IHDR chunk, and read its width and height. False (with the reason
// in "why") otherwise.
bool png_size(const char *path, int *width, int *height, char *why, size_t why_cap);

// write_corpus: "path" holding a few KB of text with structure to learn:
// "repeats" lines of short words in a fixed rhythm, one of them with an em
// dash (3 bytes in UTF-8, so that bytes, characters and bpe pieces differ).
void write_corpus(const char *path, int repeats);
// write_bytes: create (or replace) "path" holding "len" bytes of "bytes";
// write_text_file: the same for a string. Both assert on failure.
void write_bytes(const char *path, const void *bytes, size_t len);
// reseal: give a safetensors file that tinygpt wrote (and a test then
// edited) the checksum of its new contents, as safetensors.h defines it:
// XXH3-64 of the whole file with the checksum's 16 hex digits as zeros,
// written in their place. A test that edits a file to reach a later check
// reseals it; one that checks the checksum does not. Written here apart
// from safetensors.c, so the two must agree on the rule. Returns whether the
// file has a checksum to reseal.
bool reseal(char *bytes, size_t len);
void write_text_file(const char *path, const char *text);
// read_text_file: up to cap-1 bytes of "path" into "buf", NUL-terminated
// (empty when the file cannot be read): for text of a known bound, without
// an allocation (run_binary's output).
void read_text_file(const char *path, char *buf, size_t cap);
// slurp: the whole of "path" (which must be there) in a new buffer,
// NUL-terminated, its length in "*len" (may be NULL); the caller frees it.
// slurp_or_empty: "" for a file that is not there (yet).
char *slurp(const char *path, size_t *len);
char *slurp_or_empty(const char *path, size_t *len);

// tree_snapshot: everything under "dir", hidden entries too, in name
// order, one line each: its path, and for a file its size and the XXH3-128
// of its bytes (a directory, a symlink or another kind: its path and kind).
// The caller frees it. expect_tree_unchanged: "dir" is now as "before" (a
// tree_snapshot, freed here) saw it, byte for byte; else the test fails
// saying "why" (the command that changed it) and both listings.
char *tree_snapshot(const char *dir);
void expect_tree_unchanged(const char *dir, char *before, const char *why);

// The thread count matters to tests that prove results do not depend on it,
// and to finite-difference loops that run thousands of tiny passes, where a
// parallel region costs more than its arithmetic.
void set_threads(int n);
int get_threads(void);
// fill_uniform: x[0..n) uniform in [-1, 1).
void fill_uniform(float *x, size_t n, Rng *rng);

// INVALID_UTF8: an example of each class of invalid UTF-8, named, for
// test_utf8.c (utf8_decode refuses every one) and test_tokenizer.c (the
// tokenizer reports every one at its byte offset).
typedef struct {
    const char *name;
    const char *bytes;
} InvalidUtf8;
enum { N_INVALID_UTF8 = 16 };
extern const InvalidUtf8 INVALID_UTF8[];  // [N_INVALID_UTF8]

// assert_all_close: every got[i] within "rtol" of want[i], relative to
// max(1, |want[i]|); the first that is not fails the test, named "what[i]".
void assert_all_close(const char *what, const float *got, const float *want, size_t n, double rtol);
// assert_gradcheck_passes: no element of the "n" that "r" checked failed;
// else the test fails with the worst one.
void assert_gradcheck_passes(const char *what, GradCheckResult r, size_t n);

// expect_backward_adds: a norm's backward adds to its two gradients, dinp
// (the residual stream's, which has two consumers) and dweight: "backward"
// (its test's case in "ctx") run on zeros gives g; run on random start
// values (drawn with "seed"), it must give start + g, within "rtol".
typedef void (*NormBackward)(void *ctx, float *dinp, float *dweight);
void expect_backward_adds(NormBackward backward, void *ctx, size_t n_inp, size_t n_weight, uint64_t seed,
                          double rtol);

// chunks_joined: the chunks of "text" ("len" bytes) under "rules", joined by
// '|', into "out" (room for 2 * len + 1 bytes), NUL-terminated; each chunk
// is checked to be at least a byte and no longer than what is left.
void chunks_joined(const char *text, size_t len, ChunkRules rules, char *out);

#endif
