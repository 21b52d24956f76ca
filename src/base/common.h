// common.h: the checked helpers every other file uses.
//
// Reading order: this is file 1 of src/ (see docs/reading-order.md).
// It implements: error reporting that names the file or flag, allocation and
// file I/O that never fail silently. It leaves out: everything model-specific.
//
// Two kinds of failure, two mechanisms:
// - Running out of memory or an I/O error on an already-open file cannot be
//   recovered from, so the x* helpers print one line naming the file, size and
//   source location, and exit(1).
// - Bad input (a malformed checkpoint, invalid UTF-8, a bad flag) is reported
//   through an Error filled in by the function that found it, so tests can
//   check the message and the command line can decide the exit status.
#ifndef TINYGPT_COMMON_H
#define TINYGPT_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// Exit statuses: 2 for a usage error (bad flag), 1 for anything at run time.
enum { EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

// An error message, filled in by the function that detected the problem.
// The message is one line, names the file or flag, and says what to do.
typedef struct {
    char msg[512];
} Error;

// error_set: printf into "err" (if not NULL); always returns false so callers
// can write `return error_set(err, "...")`.
bool error_set(Error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// error_setv: the one place an Error is formatted: "prefix" (plain text, ""
// for none) followed by "fmt" with "args". For helpers of their own that
// take printf arguments and add a prefix (the checkpoint loader's "'<file>'
// is not a valid tinygpt checkpoint: "). Returns false, like error_set.
bool error_setv(Error *err, const char *prefix, const char *fmt, va_list args) __attribute__((format(printf, 3, 0)));

// Shown: a string from outside (a flag's value, a name or value read from a
// file) made safe to quote in a one-line message. It can hold anything, a
// newline or a terminal escape included, which would split or garble the
// message: control characters (C0, DEL and the C1 range U+0080..U+009F)
// become '?', and a string longer than 60 bytes is cut, at a character
// boundary, and ends in "...". (For messages: a token's piece is shown by
// tokenize's print_piece, every byte, or attention_label, with signs.)
typedef struct {
    char text[64];
} Shown;

// show: "len" bytes of "s" as Shown. Use the result within one statement:
// show(s, n).text lives until the end of it.
Shown show(const char *s, size_t len);

// die: print "tinygpt: <message>" to stderr and exit with "status".
_Noreturn void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Checked allocation. On failure: one line naming size and call site, exit(1).
// Memory from xmalloc/xcalloc is released with plain free().
void *xmalloc_at(size_t size, const char *file, int line);
void *xcalloc_at(size_t count, size_t size, const char *file, int line);
void *xrealloc_at(void *ptr, size_t size, const char *file, int line);
#define xmalloc(size) xmalloc_at((size), __FILE__, __LINE__)
#define xcalloc(count, size) xcalloc_at((count), (size), __FILE__, __LINE__)
#define xrealloc(ptr, size) xrealloc_at((ptr), (size), __FILE__, __LINE__)

// xcalloc_lines: xcalloc for the big numeric buffers the fast kernels read
// in vectors (the model's weights, gradients and activations, the
// optimizer's state): zeroed, starting on a 64-byte cache line (common.c
// says why), released with xfree_lines (NULL is fine), never with free().
void *xcalloc_lines_at(size_t count, size_t size, const char *file, int line);
void xfree_lines(void *ptr);
#define xcalloc_lines(count, size) xcalloc_lines_at((count), (size), __FILE__, __LINE__)

// fopen_checked: like fopen, but on failure fills "err" with the path, the
// reason and what to do, and returns NULL. Directories are refused too, and
// for reading ("r" modes) anything but a regular file: a named pipe (FIFO)
// would block forever, and a device such as /dev/zero never ends.
FILE *fopen_checked(const char *path, const char *mode, Error *err);

// stdout_flush_or_die: push what is buffered to standard output; if any
// write to it failed (a full disk; a closed pipe when SIGPIPE is ignored),
// say so, naming "what" ("the sample", or NULL), and exit 1 at once: output nobody
// received is no result. Every command's output is checked so at exit
// (main.c); a command that streams checks as it goes.
void stdout_flush_or_die(const char *what);

// ---- Injected faults, for the tests ----
// io_fault: true, with errno set to EIO, when this call is the Nth of the
// process and its environment holds TINYGPT_FAIL_AT=N; false otherwise.
// Every write, flush, fsync, close, rename, link, unlink and mkdir that
// tinygpt makes of a file it writes asks it first, and fails as the real
// call would if it says so, so a test can fail each of them in turn
// (tests/test_faults.c). TINYGPT_SIGNAL_AT=N:SIG raises signal SIG at the
// Nth instead (9 kills the process there, as a power cut would; 15 is a
// `kill` arriving just then), and the call goes on if the process does.
// With TINYGPT_COUNT_IO set, the process prints how many there were to
// stderr when it exits.
bool io_fault(void);

// read_exact / write_exact: transfer exactly "size" bytes or fill "err"
// naming "path" (a short read is reported as a truncated file).
bool read_exact(void *buf, size_t size, FILE *f, const char *path, Error *err);
bool write_exact(const void *buf, size_t size, FILE *f, const char *path, Error *err);
// stream_size: the length in bytes of "f", a file or a stream in memory
// (fmemopen, which has no file to fstat), found by seeking to its end and
// back to where it was; false with "err" naming "path" if it cannot be.
bool stream_size(FILE *f, const char *path, uint64_t *size, Error *err);

// ---- Writing a file whole or not at all ----
// Every file tinygpt must never leave half-written (checkpoints, AdamW's
// state, a run's run.json) is written to "<path>.tmp" and renamed over
// "path" only once it is complete and on the disk. rename is atomic, so a
// crash at any moment leaves either the old file or the new one. A killed
// writer can leave its .tmp behind; `train` removes those it knows of when it
// next starts in the directory (ATOMIC_TMP_SUFFIX names them).
#define ATOMIC_TMP_SUFFIX ".tmp"

typedef struct {
    FILE *f;           // "<path>.tmp", open for writing
    const char *path;  // the file it becomes (the caller's string)
    char *tmp;         // "<path>.tmp"
    bool sync;         // fsync the file and its directory (see atomic_open)
} AtomicFile;

// atomic_open: start writing "path": create (or empty) "<path>.tmp" and
// open it in "af->f". False, with "err" naming it, if it cannot be created.
// It sets "af->sync": the new file is on the disk when atomic_commit
// returns. A caller may clear it for a file that is cheap to make again and
// rewritten often (loss.png, redrawn from log.csv at every progress line):
// the rename alone still keeps a reader from ever seeing half of it; only a
// crash of the machine could then leave the old picture, or none.
bool atomic_open(AtomicFile *af, const char *path, Error *err);
// atomic_commit: finish what atomic_open started. If "ok" (every write to
// af->f succeeded): fflush, fsync (if af->sync), fclose, rename over "path",
// and fsync the directory (if af->sync), each checked, since a full disk may
// only show up at any of them. If "ok" is false, or any of those fails, the
// .tmp is removed and "path" is left as it was. Returns whether "path" is the new file; on a
// failure here "err" says why (a false "ok" keeps the caller's message).
bool atomic_commit(AtomicFile *af, bool ok, Error *err);
// write_file_atomic: "len" bytes of "data" as the new "path", through
// atomic_open and atomic_commit.
bool write_file_atomic(const char *path, const void *data, size_t len, Error *err);

// read_file: the whole file in a new buffer ("*out", NUL-terminated for
// convenience, "*len" bytes without the NUL). The caller frees "*out". It
// must be a regular file (fopen_checked); it takes one allocation of its
// size + 2 bytes.
bool read_file(const char *path, char **out, size_t *len, Error *err);
// read_stream: read_file on a stream already open ("f", read to its end and
// left open; "path" names it in errors), such as stdin. A stream that is not
// a regular file is read only while it holds at most "max_bytes" (a pipe
// that never ends is refused, not read until memory runs out), and only if
// it is a pipe or a terminal: a device such as /dev/zero is refused at once.
bool read_stream(FILE *f, const char *path, size_t max_bytes, char **out, size_t *len, Error *err);

// The --max-bytes default of the commands that read standard input: ten
// times the largest text the tests train on (large-file-check's 100 MB,
// docs/guarantees.md, "Large files").
#define STDIN_MAX_BYTES ((size_t)1 << 30)

// read_text_source: the whole text "path" names, as read_file reads it,
// where "-" names standard input (read_stream, at most "max_bytes" from a
// pipe or a terminal). text_source_name: how errors name it: the path, or
// "standard input".
bool read_text_source(const char *path, size_t max_bytes, char **out, size_t *len, Error *err);
const char *text_source_name(const char *path);

// sync_dir: fsync the directory "dir", which makes a rename or a new file
// in it durable (a file system that cannot sync a directory is let be).
bool sync_dir(const char *dir, Error *err);

// path_base: the last component of "path", what follows its last '/'
// ("runs/a/log.csv" -> "log.csv"; "log.csv" itself when it has none): a
// pointer into "path".
const char *path_base(const char *path);
// path_dir: the directory of the file "path" into "out" [cap], like
// dirname(1): what comes before its last component, without the '/' that
// end it ("runs/a//log.csv" -> "runs/a"), "." when it has no '/', and "/"
// for a file at the root ("/x" -> "/"). False if "out" is too small (it
// then holds as much as fits).
bool path_dir(const char *path, char *out, size_t cap);

// make_dir: create the --out directory "path" and any missing parents, like
// `mkdir -p` (train and attention both do). A path that cannot be created,
// or exists and is not a directory, is one line naming it and exit 1.
void make_dir(const char *path);

// read_system_line: the first line of a file the system provides (Linux's
// /sys, a cgroup's limits) into "text", or false when there is none. What
// the machine does not say is an answer there, not an error, so unlike the
// project's other reads this one reports nothing.
bool read_system_line(const char *path, char *text, size_t cap);

// memory_limit_bytes: how much memory this process may use: the machine's
// physical memory, or less if a cgroup (a container) limits it; 0 when
// unknown. Used to refuse a model that cannot fit before allocating it.
size_t memory_limit_bytes(void);

// name_index: the index of "name" in "names" (NULL-terminated), or -1: how a
// choice's text ("gpt", "adamw") becomes the enum it names, wherever it is
// read (a flag, a checkpoint's metadata).
int name_index(const char *const *names, const char *name);

// now_seconds: monotonic wall-clock time, for ms/step and tokens/s.
double now_seconds(void);

#endif
