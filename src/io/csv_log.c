// csv_log.c: train's log.csv, appended and continued (see csv_log.h).
//
// Reading order: file 32.
#include "csv_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

// hash_reset: the log's mark starts over at the "len" bytes of "text".
static void hash_reset(CsvLog *log, const char *text, size_t len) {
    if (!log->hash && !(log->hash = XXH3_createState())) die(EXIT_RUNTIME, "out of memory for a checksum's state");
    XXH3_64bits_reset(log->hash);
    XXH3_64bits_update(log->hash, text, len);
    log->bytes = len;
}

bool csv_log_create(CsvLog *log, const char *path, const char *header, Error *err) {
    memset(log, 0, sizeof *log);
    snprintf(log->path, sizeof log->path, "%s", path);
    log->f = fopen_checked(path, "w", err);
    if (log->f) fputs(header, log->f);  // checked with the first rows, at the first flush
    if (log->f) hash_reset(log, header, strlen(header));
    return log->f != NULL;
}

bool csv_log_prepare(CsvLog *log, const char *path, const char *header, long step, bool restart, const LogMark *mark,
                     Error *err) {
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
    // The rows the checkpoint saw, unchanged since.
    const bool marked = mark && mark->present && !restart;
    if (marked && (len < mark->bytes || XXH3_64bits(text, (size_t)mark->bytes) != mark->hash)) {
        free(text);
        return error_set(err, "'%s' is not the log the checkpoint of step %ld was saved with: %s; put the whole log back, or start a new log at step %ld with --restart-log",
                         path, step,
                         len < mark->bytes ? "it is shorter" : "a byte of its rows before that step changed since",
                         step);
    }
    // Keep the header line, then every row whose step is below "step": with
    // a mark, exactly the bytes it covers.
    size_t keep = 0;
    long lines = 0, last = -1;  // rows kept, the header among them; the last one's step
    for (size_t line = 0; marked && line < mark->bytes; line++)
        if (text[line] == '\n') lines++;
    if (marked) keep = (size_t)mark->bytes, last = step - 1;
    for (size_t line = 0; !marked && line < len; lines++) {
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
        if (ok) hash_reset(log, rewritten, len);
        free(rewritten);
    } else {
        ok = truncate(log->path, (off_t)log->keep) == 0;
        if (!ok) error_set(err, "cannot cut '%s' back to the checkpoint's step: %s", log->path, strerror(errno));
        if (ok) hash_reset(log, text, log->keep);
    }
    free(text);
    if (ok) log->f = fopen_checked(log->path, "a", err);
    return log->f != NULL;
}

LogMark csv_log_mark(const CsvLog *log) {
    return (LogMark){.present = true, .bytes = log->bytes, .hash = XXH3_64bits_digest(log->hash)};
}

// failed: false, with "err" naming the log and the reason in errno.
static bool failed(CsvLog *log, Error *err) {
    log->failed = true;
    return error_set(err, "cannot write '%s': %s", log->path, strerror(errno));
}

bool csv_log_row(CsvLog *log, Error *err, const char *fmt, ...) {
    // Formatted here first, so the mark hashes the bytes the file gets.
    char stack[1024], *row = stack;
    va_list args, again;
    va_start(args, fmt);
    va_copy(again, args);
    int len = vsnprintf(stack, sizeof stack, fmt, args);
    va_end(args);
    if (len >= (int)sizeof stack) {
        row = xmalloc((size_t)len + 1);
        vsnprintf(row, (size_t)len + 1, fmt, again);
    }
    va_end(again);
    bool written = len >= 0 && !io_fault() && fwrite(row, 1, (size_t)len, log->f) == (size_t)len;
    if (written) {
        XXH3_64bits_update(log->hash, row, (size_t)len);
        log->bytes += (uint64_t)len;
    }
    if (row != stack) free(row);
    if (!written || ferror(log->f)) return failed(log, err);
    return true;
}

bool csv_log_flush(CsvLog *log, Error *err) {
    if (io_fault() || fflush(log->f) != 0 || ferror(log->f)) return failed(log, err);
    return true;
}

bool csv_log_sync(CsvLog *log, Error *err) {
    if (!csv_log_flush(log, err)) return false;
    if (io_fault() || fsync(fileno(log->f)) != 0) return failed(log, err);
    return true;
}

void csv_log_close(CsvLog *log) {
    if (log->f) fclose(log->f);
    log->f = NULL;
    XXH3_freeState(log->hash);  // NULL is fine
    log->hash = NULL;
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
