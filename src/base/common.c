// common.c: checked allocation, checked file I/O, and error reporting.
// See common.h for why there are two failure mechanisms.
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool error_setv(Error *err, const char *prefix, const char *fmt, va_list args) {
    if (err) {
        int n = snprintf(err->msg, sizeof err->msg, "%s", prefix);
        if (n >= 0 && (size_t)n < sizeof err->msg) vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, args);
    }
    return false;
}

bool error_set(Error *err, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    error_setv(err, "", fmt, args);
    va_end(args);
    return false;
}

// show: one character at a time, so that a cut never splits a UTF-8
// sequence (a message must stay valid UTF-8 when the string was). Bytes
// that are not valid UTF-8 are copied as they are: they cannot break the
// line, and the terminal shows them as a replacement character.
Shown show(const char *s, size_t len) {
    enum { KEEP = 60 };  // bytes of "s" kept; "..." and the NUL fill the rest of text[64]
    _Static_assert(KEEP + sizeof "..." <= sizeof ((Shown *)0)->text, "Shown.text holds KEEP bytes, ... and NUL");
    Shown out;
    size_t n = 0, i = 0;
    while (i < len) {
        const unsigned char *c = (const unsigned char *)s + i;
        size_t bytes = 1;  // the character's length in "s"
        if (c[0] >= 0xC0)  // a lead byte: its continuation bytes (10xxxxxx) follow
            while (bytes < 4 && i + bytes < len && (c[bytes] & 0xC0) == 0x80) bytes++;
        // C0 controls and DEL are one byte; the C1 controls U+0080..U+009F
        // are the two bytes C2 80..C2 9F in UTF-8.
        bool control = c[0] < 0x20 || c[0] == 0x7F || (bytes == 2 && c[0] == 0xC2 && c[1] <= 0x9F);
        size_t shown = control ? 1 : bytes;
        if (n + shown > KEEP) break;
        if (control) out.text[n] = '?';
        else memcpy(out.text + n, c, bytes);
        n += shown;
        i += bytes;
    }
    if (i < len) {
        memcpy(out.text + n, "...", 3);
        n += 3;
    }
    out.text[n] = '\0';
    return out;
}

void die(int status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fputs("tinygpt: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    exit(status);
}

// The allocators' one message: the request, the line that made it, and the
// flags that size the big buffers.
static _Noreturn void out_of_memory(size_t count, size_t size, const char *file, int line) {
    const char *fix = "try smaller --batch/--context/--embd";
    if (count == 1) die(EXIT_RUNTIME, "out of memory allocating %zu bytes (%s:%d); %s", size, file, line, fix);
    die(EXIT_RUNTIME, "out of memory allocating %zu x %zu bytes (%s:%d); %s", count, size, file, line, fix);
}

void *xmalloc_at(size_t size, const char *file, int line) {
    void *ptr = malloc(size ? size : 1);
    if (!ptr) out_of_memory(1, size, file, line);
    return ptr;
}

void *xcalloc_at(size_t count, size_t size, const char *file, int line) {
    void *ptr = calloc(count ? count : 1, size ? size : 1);
    if (!ptr) out_of_memory(count, size, file, line);
    return ptr;
}

// The big buffers start on a cache line (LINE_BYTES, one AVX-512 vector),
// so a vector load at a multiple of 16 floats into one reads one line, not
// two. calloc aligns to 16 bytes only, and glibc gives a large block a
// pointer 16 bytes past a page's start: every 64-byte load and store of the
// fast kernels straddled two lines. On a 2-core Intel Cascade Lake, aligned,
// card L's fastest steps were ~5% faster (69-71 ms to 65-67, four runs
// each, interleaved) and the baby gpt's ~8%, with the same bits. The block
// still comes from calloc, a line and a pointer larger, so pages the run
// never writes are never touched (posix_memalign would need a memset, and
// the memory the run holds grew by up to a fifth); the pointer calloc gave
// sits just below the aligned one, for xfree_lines.
#define LINE_BYTES 64

// A big buffer's whole 2 MB stretches are offered to the kernel as huge
// pages: a kernel that gives them only where asked ("madvise" in
// /sys/kernel/mm/transparent_hugepage/enabled, as on the machines this was
// measured on) otherwise maps 4 KB pages, and the training step, which walks
// ~60 MB of activations, missed the TLB on every product's first touch of
// its output and inputs. Paired runs on a 2-core Sapphire Rapids (with the
// single-item slice of matmul.c): the default gpt 1% faster a run on the
// AVX-512 path and 5% on AVX2, card L 0% and 4%; the same bits. Pages still
// come only as the run writes them, 2 MB at a time. The advice is a hint:
// where it is refused or unknown the pages stay small, so its result is not
// checked.
static void advise_huge_pages(unsigned char *block, size_t bytes) {
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    const uintptr_t from = ((uintptr_t)block + huge - 1) / huge * huge, to = ((uintptr_t)block + bytes) / huge * huge;
    if (to > from) (void)madvise((void *)from, to - from, MADV_HUGEPAGE);
#else
    (void)block, (void)bytes;
#endif
}

void *xcalloc_lines_at(size_t count, size_t size, const char *file, int line) {
    size_t bytes;
    unsigned char *raw = NULL;
    if (!__builtin_mul_overflow(count, size, &bytes) && bytes <= SIZE_MAX - LINE_BYTES - sizeof(void *))
        raw = calloc(1, bytes + LINE_BYTES + sizeof(void *));
    if (!raw) out_of_memory(count, size, file, line);
    advise_huge_pages(raw, bytes);
    // the first line boundary with room for one pointer before it
    const uintptr_t first = ((uintptr_t)raw + sizeof(void *) + LINE_BYTES - 1) / LINE_BYTES * LINE_BYTES;
    void **aligned = (void **)first;
    aligned[-1] = raw;
    return aligned;
}

void xfree_lines(void *ptr) {
    if (ptr) free(((void **)ptr)[-1]);
}

void *xrealloc_at(void *old, size_t size, const char *file, int line) {
    void *ptr = realloc(old, size ? size : 1);
    if (!ptr) out_of_memory(1, size, file, line);
    return ptr;
}

// file_kind: what a file that is not a regular file is, for a message.
static const char *file_kind(mode_t mode) {
    if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

// open_failed: the message for fopen or open failing with "errno": the
// common causes say what to do, the rest give the system's reason.
static FILE *open_failed(const char *path, bool reading, Error *err) {
    const char *what = reading ? "reading" : "writing";
    if (errno == ENOENT && reading)
        error_set(err, "cannot open '%s' for reading: no such file; check the name and the directory it is in", path);
    else if (errno == ENOENT)
        error_set(err, "cannot open '%s' for writing: no such directory; create it first (mkdir -p)", path);
    else if (errno == EACCES)
        error_set(err, "cannot open '%s' for %s: permission denied; check its permissions (ls -l)", path, what);
    else error_set(err, "cannot open '%s' for %s: %s", path, what, strerror(errno));
    return NULL;
}

// check_regular: true if the open "fd" (of "path") is a regular file;
// otherwise "err" says what it is instead.
static bool check_regular(int fd, const char *path, Error *err) {
    struct stat st;
    if (fstat(fd, &st) != 0) return error_set(err, "cannot read the type of '%s': %s", path, strerror(errno));
    if (S_ISREG(st.st_mode)) return true;
    if (S_ISDIR(st.st_mode)) return error_set(err, "'%s' is a directory; give the path of a file", path);
    return error_set(err, "'%s' is %s, not a regular file, and tinygpt reads only regular files (a pipe or a device can block or never end); save what you need to a file and give its path",
                     path, file_kind(st.st_mode));
}

// fopen_checked: a file to read is opened with O_NONBLOCK, so that opening
// a FIFO returns at once instead of waiting for a writer, and then checked
// with fstat on the open descriptor (checking the path with stat first
// would leave a moment in which it could be replaced by a FIFO). A file to
// write is created by fopen as usual.
FILE *fopen_checked(const char *path, const char *mode, Error *err) {
    if (mode[0] != 'r') {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            error_set(err, "'%s' is a directory; give the path of a file", path);
            return NULL;
        }
        FILE *f = io_fault() ? NULL : fopen(path, mode);
        return f ? f : open_failed(path, false, err);
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return open_failed(path, true, err);
    if (!check_regular(fd, path, err)) {
        close(fd);
        return NULL;
    }
    // Back to blocking reads, which is what stdio expects (for a regular
    // file the flag changes nothing, but say what we mean).
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ? fdopen(fd, mode) : NULL;
    if (!f) {
        error_set(err, "cannot open '%s' for reading: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

bool read_exact(void *buf, size_t size, FILE *f, const char *path, Error *err) {
    if (size == 0) return true;
    size_t got = fread(buf, 1, size, f);
    if (got == size) return true;
    if (ferror(f)) return error_set(err, "error reading '%s': %s", path, strerror(errno));
    return error_set(err, "'%s' is truncated: wanted %zu more bytes, found %zu", path, size, got);
}

// The count of io_fault's calls, the one to fail and the one to signal at
// (0: none), and the signal. Read from the environment at the first call.
static long io_calls, io_fail_at = -1, io_signal_at;
static int io_signal;

static void report_io_calls(void) { fprintf(stderr, "tinygpt: %ld checked file operations\n", io_calls); }

bool io_fault(void) {
    if (io_fail_at < 0) {
        const char *fail = getenv("TINYGPT_FAIL_AT"), *signal_at = getenv("TINYGPT_SIGNAL_AT");
        io_fail_at = fail ? strtol(fail, NULL, 10) : 0;
        if (signal_at && sscanf(signal_at, "%ld:%d", &io_signal_at, &io_signal) != 2) io_signal_at = 0;
        if (getenv("TINYGPT_COUNT_IO")) atexit(report_io_calls);
    }
    ++io_calls;
    if (io_calls == io_signal_at) raise(io_signal);
    if (io_calls != io_fail_at) return false;
    errno = EIO;
    return true;
}

bool write_exact(const void *buf, size_t size, FILE *f, const char *path, Error *err) {
    if (size == 0) return true;
    if (!io_fault() && fwrite(buf, 1, size, f) == size) return true;
    return error_set(err, "error writing '%s': %s (is the disk full?)", path, strerror(errno));
}

bool stream_size(FILE *f, const char *path, uint64_t *size, Error *err) {
    off_t at = ftello(f), end = -1;
    if (at >= 0 && fseeko(f, 0, SEEK_END) == 0) end = ftello(f);
    if (end < 0 || fseeko(f, at, SEEK_SET) != 0)
        return error_set(err, "cannot read the size of '%s': %s", path, strerror(errno));
    *size = (uint64_t)end;
    return true;
}

const char *path_base(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

bool path_dir(const char *path, char *out, size_t cap) {
    size_t len = (size_t)(path_base(path) - path);
    while (len > 1 && path[len - 1] == '/') len--;  // the separating '/'s, but not the root's
    int n = len == 0 ? snprintf(out, cap, ".") : snprintf(out, cap, "%.*s", (int)len, path);
    return n >= 0 && (size_t)n < cap;
}

// Some file systems cannot sync a directory and say EINVAL; there is
// nothing more to do on those.
bool sync_dir(const char *dir, Error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return error_set(err, "cannot open directory '%s' to flush it: %s", dir, strerror(errno));
    bool ok = !io_fault() && (fsync(fd) == 0 || errno == EINVAL);
    if (!ok) error_set(err, "error flushing directory '%s' to disk: %s", dir, strerror(errno));
    close(fd);
    return ok;
}

// sync_parent_dir: sync_dir of the directory holding "path".
static bool sync_parent_dir(const char *path, Error *err) {
    char dir[4096];
    if (!path_dir(path, dir, sizeof dir)) return error_set(err, "the directory of '%s' is too long a path", path);
    return sync_dir(dir, err);
}

bool atomic_open(AtomicFile *af, const char *path, Error *err) {
    size_t tmp_size = strlen(path) + sizeof ATOMIC_TMP_SUFFIX;
    af->path = path;
    af->sync = true;
    af->tmp = xmalloc(tmp_size);
    snprintf(af->tmp, tmp_size, "%s" ATOMIC_TMP_SUFFIX, path);
    af->f = fopen_checked(af->tmp, "wb", err);
    if (af->f) return true;
    free(af->tmp);
    af->tmp = NULL;
    return false;
}

// atomic_commit: fflush moves our buffer to the kernel, fsync the kernel's
// cache to the disk; only then the rename. The directory is synced last:
// until then a crash could lose the rename itself (the old file would
// survive, which is still whole).
bool atomic_commit(AtomicFile *af, bool ok, Error *err) {
    const char *tmp = af->tmp;
    if (ok && (io_fault() || fflush(af->f) != 0))
        ok = error_set(err, "error writing '%s': %s (is the disk full?)", tmp, strerror(errno));
    if (ok && af->sync && (io_fault() || fsync(fileno(af->f)) != 0))
        ok = error_set(err, "error flushing '%s' to disk: %s (is the disk full?)", tmp, strerror(errno));
    if ((fclose(af->f) != 0 || io_fault()) && ok)
        ok = error_set(err, "error closing '%s': %s (is the disk full?)", tmp, strerror(errno));
    if (ok && (io_fault() || rename(tmp, af->path) != 0))
        ok = error_set(err, "cannot rename '%s' to '%s': %s; check that '%s' is not a directory", tmp, af->path,
                       strerror(errno), af->path);
    if (!ok) remove(tmp);
    ok = ok && (!af->sync || sync_parent_dir(af->path, err));
    free(af->tmp);
    af->tmp = NULL;
    af->f = NULL;
    return ok;
}

bool write_file_atomic(const char *path, const void *data, size_t len, Error *err) {
    AtomicFile af;
    if (!atomic_open(&af, path, err)) return false;
    return atomic_commit(&af, write_exact(data, len, af.f, af.tmp, err), err);
}

bool read_file(const char *path, char **out, size_t *len, Error *err) {
    FILE *f = fopen_checked(path, "rb", err);
    if (!f) return false;
    bool ok = read_stream(f, path, SIZE_MAX, out, len, err);
    fclose(f);
    return ok;
}

const char *text_source_name(const char *path) { return strcmp(path, "-") == 0 ? "standard input" : path; }

bool read_text_source(const char *path, size_t max_bytes, char **out, size_t *len, Error *err) {
    if (strcmp(path, "-") == 0) return read_stream(stdin, text_source_name(path), max_bytes, out, len, err);
    return read_file(path, out, len, err);
}

bool read_stream(FILE *f, const char *path, size_t max_bytes, char **out, size_t *len, Error *err) {
    // A regular file's buffer is its size plus one byte (where fread finds
    // the end): one allocation of exactly the memory the text needs. A pipe
    // has no size, and a file can grow while we read it, so past that the
    // buffer grows geometrically.
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        // Say so plainly when the file cannot fit, rather than fail to allocate.
        size_t limit = memory_limit_bytes();
        if (limit > 0 && (uint64_t)st.st_size >= limit)
            return error_set(err, "'%s' is %.1f GB, more than the %.1f GB of memory here; use a part of it (head -c 1G '%s' > part.txt)",
                             path, (double)st.st_size / 1e9, (double)limit / 1e9, path);
        cap = (size_t)st.st_size + 1;
        max_bytes = SIZE_MAX;  // what it holds, even if it grows as we read
    } else if (fstat(fileno(f), &st) == 0 && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode) && !isatty(fileno(f))) {
        return error_set(err, "%s is %s, not text; give a file, or pipe the text in", path, file_kind(st.st_mode));
    }
    char *buf = xmalloc(cap + 1);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > max_bytes) {
            free(buf);
            return error_set(err, "%s holds more than %zu bytes (--max-bytes); give a file, or a larger --max-bytes", path,
                             max_bytes);
        }
        if (n < cap) break;
        cap = cap > max_bytes / 2 ? max_bytes + 1 : 2 * cap;  // one byte past the limit tells
        // Not xrealloc, whose message names the flags that size the model:
        // here the text is what does not fit, and --max-bytes, when the
        // caller has one, what let it (a file, read whole, has none).
        char *grown = realloc(buf, cap + 1);
        if (!grown) {
            free(buf);
            if (max_bytes == SIZE_MAX)
                return error_set(err, "out of memory reading %s: %zu bytes read; the text must fit in memory: use a part of it",
                                 path, n);
            return error_set(err, "out of memory reading %s: %zu bytes read, and --max-bytes %zu lets it go on; the text must fit in memory: give a smaller --max-bytes, or a file",
                             path, n, max_bytes);
        }
        buf = grown;
    }
    if (ferror(f)) {
        free(buf);
        return error_set(err, "error reading '%s': %s", path, strerror(errno));
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return true;
}

bool read_system_line(const char *path, char *text, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    const bool found = fgets(text, (int)cap, f) != NULL;
    fclose(f);
    return found;
}

// cgroup_limit: the number in the cgroup file "path" (a memory limit in
// bytes), or SIZE_MAX when the file is missing or says "max" (no limit).
static size_t cgroup_limit(const char *path) {
    char text[32];
    unsigned long long limit;
    const bool found = read_system_line(path, text, sizeof text) && sscanf(text, "%llu", &limit) == 1;
    return found && limit < SIZE_MAX ? (size_t)limit : SIZE_MAX;
}

size_t memory_limit_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return 0;
    size_t limit = (size_t)pages * (size_t)page_size;
    // A container sees the host's memory in sysconf, but its cgroup may
    // allow it much less: version 2, then version 1 (which says "no limit"
    // with a huge number, so the min() takes care of it).
    const char *cgroup_files[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof cgroup_files / sizeof cgroup_files[0]; i++) {
        size_t cgroup = cgroup_limit(cgroup_files[i]);
        if (cgroup < limit) limit = cgroup;
    }
    return limit;
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void make_dir(const char *path) {
    char partial[4096];
    if (strlen(path) >= sizeof partial) die(EXIT_USAGE, "--out '%.40s...' is too long; use a shorter path", path);
    strcpy(partial, path);
    // Each parent in turn (from partial + 1: a leading '/' is the root; "" has none).
    for (char *slash = partial[0] ? strchr(partial + 1, '/') : NULL; slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(partial, 0777) != 0 && errno != EEXIST)
            die(EXIT_RUNTIME, "cannot create directory '%s' for --out: %s; pick another --out", partial,
                strerror(errno));
        *slash = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        die(EXIT_RUNTIME, "cannot create output directory '%s': %s; pick another --out", path, strerror(errno));
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        die(EXIT_RUNTIME, "--out '%s' exists and is not a directory; pick another --out", path);
}

int name_index(const char *const *names, const char *name) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

// _exit, not exit: main's check at exit would find the same failure again.
void stdout_flush_or_die(const char *what) {
    int failed = fflush(stdout) != 0 ? errno : 0;
    if (!failed && !ferror(stdout)) return;
    fprintf(stderr, "tinygpt: cannot write %s%sto standard output: %s\n", what ? what : "", what ? " " : "",
            failed ? strerror(failed) : "an earlier write failed (is the disk full?)");
    _exit(EXIT_RUNTIME);
}
