// csv_log.c: train's log.csv, appended and continued (see csv_log.h).
//
// Reading order: file 32.
#include "csv_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool csv_log_create(CsvLog *log, const char *path, const char *header, Error *err) {
    memset(log, 0, sizeof *log);
    snprintf(log->path, sizeof log->path, "%s", path);
    log->f = fopen_checked(path, "w", err);
    if (log->f) fputs(header, log->f);  // checked with the first rows, at the first flush
    return log->f != NULL;
}

bool csv_log_prepare(CsvLog *log, const char *path, const char *header, long step, bool restart, Error *err) {
    memset(log, 0, sizeof *log);
    snprintf(log->path, sizeof log->path, "%s", path);
    log->header = header;
    if (access(path, F_OK) != 0 && !restart)
        return error_set(err, "'%s' is missing, but the run is at step %ld: it held the rows of the steps before; put it back, or start a new log at step %ld with --restart-log",
                         path, step, step);
    if (access(path, F_OK) != 0) return true;  // a new log
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, err)) return false;
    // Keep the header line, then every row whose step is below "step".
    size_t keep = 0;
    long lines = 0, last = -1;  // rows kept, the header among them; the last one's step
    for (size_t line = 0; line < len; lines++) {
        const char *end = memchr(text + line, '\n', len - line);
        if (!end) break;  // a row cut short by a crash: drop it
        long row_step = line > 0 ? strtol(text + line, NULL, 10) : -1;
        if (row_step >= step) break;
        if (line > 0) last = row_step;
        line = keep = (size_t)(end - text) + 1;
    }
    log->rows = lines > 0 ? lines - 1 : 0;
    // Its last row must be the step just before the checkpoint's (the first
    // rows may be gone: a log restarted at a later step is whole from there).
    bool whole = step == 0 || last == step - 1;
    if (!whole && !restart) {
        free(text);
        return error_set(err, "'%s' has no row of step %ld, the last before the checkpoint's: it was cut short; put the whole log back, or start a new log at step %ld with --restart-log",
                         path, step - 1, step);
    }
    if (!whole) {
        free(text);
        log->rows = 0;
        return true;  // a new log
    }
    const char *header_end = memchr(text, '\n', len);
    size_t header_len = header_end ? (size_t)(header_end - text) + 1 : 0;
    log->text = text;
    log->keep = keep;
    log->new_header = keep > 0 && (header_len != strlen(header) || memcmp(text, header, header_len) != 0);
    return true;
}

bool csv_log_continue(CsvLog *log, Error *err) {
    if (!log->text) {
        long rows = log->rows;
        char path[sizeof log->path];
        snprintf(path, sizeof path, "%s", log->path);
        bool created = csv_log_create(log, path, log->header, err);
        log->rows = rows;
        return created;
    }
    char *text = log->text;
    log->text = NULL;
    bool ok;
    if (log->new_header) {
        // "header" and then the rows after the old one.
        const char *header_end = memchr(text, '\n', log->keep);
        size_t header_len = (size_t)(header_end - text) + 1, new_len = strlen(log->header);
        size_t len = new_len + log->keep - header_len;
        char *rewritten = xmalloc(len);
        memcpy(rewritten, log->header, new_len);
        memcpy(rewritten + new_len, text + header_len, log->keep - header_len);
        ok = write_file_atomic(log->path, rewritten, len, err);
        free(rewritten);
    } else {
        ok = truncate(log->path, (off_t)log->keep) == 0;
        if (!ok) error_set(err, "cannot cut '%s' back to the checkpoint's step: %s", log->path, strerror(errno));
    }
    free(text);
    if (ok) log->f = fopen_checked(log->path, "a", err);
    return log->f != NULL;
}

// failed: false, with "err" naming the log and the reason in errno.
static bool failed(CsvLog *log, Error *err) {
    log->failed = true;
    return error_set(err, "cannot write '%s': %s", log->path, strerror(errno));
}

bool csv_log_row(CsvLog *log, Error *err, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int written = io_fault() ? -1 : vfprintf(log->f, fmt, args);
    va_end(args);
    if (written < 0 || ferror(log->f)) return failed(log, err);
    return true;
}

bool csv_log_flush(CsvLog *log, Error *err) {
    if (io_fault() || fflush(log->f) != 0 || ferror(log->f)) return failed(log, err);
    return true;
}

void csv_log_close(CsvLog *log) {
    if (log->f) fclose(log->f);
    log->f = NULL;
    free(log->text);
    log->text = NULL;
}

void csv_quote(const char *text, char *out, size_t cap) {
    size_t n = 0;
    if (cap < 3) {
        if (cap > 0) out[0] = '\0';
        return;
    }
    out[n++] = '"';
    for (const char *c = text; *c && n + 3 < cap; c++) {  // room for this, a doubled quote, the closing one
        if (*c == '"') out[n++] = '"';
        out[n++] = *c;
    }
    out[n++] = '"';
    out[n] = '\0';
}
