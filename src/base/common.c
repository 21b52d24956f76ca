// common.c: checked allocation, checked file I/O, and error reporting.
// See common.h for why there are two failure mechanisms.
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool error_set(Error *err, const char *fmt, ...) {
    if (err) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, args);
        va_end(args);
    }
    return false;
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

void *xmalloc_at(size_t size, const char *file, int line) {
    void *ptr = malloc(size ? size : 1);
    if (!ptr) die(EXIT_RUNTIME, "out of memory allocating %zu bytes (%s:%d); try smaller --batch/--context/--embd", size, file, line);
    return ptr;
}

void *xcalloc_at(size_t count, size_t size, const char *file, int line) {
    void *ptr = calloc(count ? count : 1, size ? size : 1);
    if (!ptr) die(EXIT_RUNTIME, "out of memory allocating %zu x %zu bytes (%s:%d); try smaller --batch/--context/--embd", count, size, file, line);
    return ptr;
}

void *xrealloc_at(void *old, size_t size, const char *file, int line) {
    void *ptr = realloc(old, size ? size : 1);
    if (!ptr) die(EXIT_RUNTIME, "out of memory growing a buffer to %zu bytes (%s:%d)", size, file, line);
    return ptr;
}

FILE *fopen_checked(const char *path, const char *mode, Error *err) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        error_set(err, "'%s' is a directory; give the path of a file", path);
        return NULL;
    }
    FILE *f = fopen(path, mode);
    if (!f) {
        const char *what = mode[0] == 'r' ? "reading" : "writing";
        error_set(err, "cannot open '%s' for %s: %s", path, what, strerror(errno));
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

bool write_exact(const void *buf, size_t size, FILE *f, const char *path, Error *err) {
    if (size == 0) return true;
    if (fwrite(buf, 1, size, f) == size) return true;
    return error_set(err, "error writing '%s': %s (is the disk full?)", path, strerror(errno));
}

// sync_parent_dir: fsync the directory holding "path", which makes a rename
// into it durable. Some file systems cannot sync a directory and say EINVAL;
// there is nothing more to do on those.
static bool sync_parent_dir(const char *path, Error *err) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return error_set(err, "cannot open directory '%s' to flush it: %s", dir, strerror(errno));
    bool ok = fsync(fd) == 0 || errno == EINVAL;
    if (!ok) error_set(err, "error flushing directory '%s' to disk: %s", dir, strerror(errno));
    close(fd);
    return ok;
}

bool atomic_open(AtomicFile *af, const char *path, Error *err) {
    size_t tmp_size = strlen(path) + sizeof ATOMIC_TMP_SUFFIX;
    af->path = path;
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
    if (ok && fflush(af->f) != 0)
        ok = error_set(err, "error writing '%s': %s (is the disk full?)", tmp, strerror(errno));
    if (ok && fsync(fileno(af->f)) != 0)
        ok = error_set(err, "error flushing '%s' to disk: %s (is the disk full?)", tmp, strerror(errno));
    if (fclose(af->f) != 0 && ok)
        ok = error_set(err, "error closing '%s': %s (is the disk full?)", tmp, strerror(errno));
    if (ok && rename(tmp, af->path) != 0)
        ok = error_set(err, "cannot rename '%s' to '%s': %s; check that '%s' is not a directory", tmp, af->path,
                       strerror(errno), af->path);
    if (!ok) remove(tmp);
    ok = ok && sync_parent_dir(af->path, err);
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
    // A regular file's buffer is its size plus one byte (where fread finds
    // the end): one allocation of exactly the memory the text needs. A pipe
    // has no size, and a file can grow while we read it, so past that the
    // buffer grows geometrically.
    size_t cap = 1 << 16, n = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
        // Say so plainly when the file cannot fit, rather than fail to allocate.
        size_t limit = memory_limit_bytes();
        if (limit > 0 && (uint64_t)st.st_size >= limit) {
            fclose(f);
            return error_set(err, "'%s' is %.1f GB, more than the %.1f GB of memory here; use a part of it (head -c 1G '%s' > part.txt)",
                             path, (double)st.st_size / 1e9, (double)limit / 1e9, path);
        }
        cap = (size_t)st.st_size + 1;
    }
    char *buf = xmalloc(cap + 1);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        cap *= 2;
        buf = xrealloc(buf, cap + 1);
    }
    bool ok = !ferror(f);
    if (!ok) error_set(err, "error reading '%s': %s", path, strerror(errno));
    fclose(f);
    if (!ok) {
        free(buf);
        return false;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return true;
}

// cgroup_limit: the number in the cgroup file "path" (a memory limit in
// bytes), or SIZE_MAX when the file is missing or says "max" (no limit).
static size_t cgroup_limit(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return SIZE_MAX;
    unsigned long long limit;
    bool found = fscanf(f, "%llu", &limit) == 1;
    fclose(f);
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
