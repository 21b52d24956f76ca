// csv_log.h: a CSV log that a run appends one row per step to, and that a
// resumed run continues: train's log.csv.
//
// Reading order: file 32, after run_dir.h.
//
// The log is written through stdio's buffer, so a full disk shows up at
// whichever call happens to empty the buffer: every write and flush is
// checked, and ferror catches a failure an earlier call left behind. The
// caller stops on the first failure (CsvLog.failed): training on with a log
// that silently stopped mid-row would leave a run whose history no longer
// matches its weights.
#ifndef TINYGPT_CSV_LOG_H
#define TINYGPT_CSV_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include "common.h"
#include "run_dir.h"

typedef struct {
    FILE *f;
    char path[4200];
    long rows;    // rows already there when it was opened (a resumed run's past steps)
    bool failed;  // a write failed; the first failure's message is in csv_log_row's or csv_log_flush's "err"
    // What the file holds, as written through this log (its mark, run_dir.h):
    // its length, and the XXH3-64 state of those bytes.
    uint64_t bytes;
    struct XXH3_state_s *hash;
    // Between csv_log_prepare and csv_log_continue: what the log becomes.
    char *text;        // the log as read, or NULL: a new log
    size_t keep;       // its first bytes that stay
    bool new_header;   // they get "header" in place of their first line
    const char *header;
} CsvLog;

// csv_log_create: a new log at "path" holding "header" (a line, ending in
// a newline).
bool csv_log_create(CsvLog *log, const char *path, const char *header, Error *err);

// csv_log_prepare: what resuming does to the log at "path", worked out and
// checked without writing anything (a refused resume leaves it as it was);
// csv_log_continue then does it and opens the log to append to. The log is
// kept up to the rows of steps below "step" (the first column): rows from
// later steps (written after the checkpoint, before a crash) are cut off,
// since the resumed run writes those steps again; a row cut short by a
// crash too: with the checkpoint's mark (run_dir.h), the log is cut back
// to exactly the mark->bytes it covers. A log whose header is not
// "header" (written before a column was added) gets it, so appended rows
// match it. A log that is missing, whose first mark->bytes bytes are not
// those the mark recorded (a changed byte, or a log cut short), or, with
// no mark (a checkpoint from before log.json), whose last row is not of
// step "step" - 1, is an error naming it, never silently a new log: with
// "restart" it starts afresh instead.
bool csv_log_prepare(CsvLog *log, const char *path, const char *header, long step, bool restart, const LogMark *mark,
                     Error *err);
bool csv_log_continue(CsvLog *log, Error *err);

// csv_log_mark: the log's length and hash as written so far (flush it
// first for the file to hold them).
LogMark csv_log_mark(const CsvLog *log);

// csv_log_row: one row, printf-style ("fmt" ends in a newline). False
// (log->failed, and "err" naming the file) if the write failed.
bool csv_log_row(CsvLog *log, Error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// csv_quote: "text" as one CSV field (RFC 4180): in double quotes, each
// double quote in it doubled, into out[cap] (2 * strlen(text) + 3 always
// fits; a longer text is cut). For text on one line: a reader that splits
// lines first (tinygpt plot does) would cut a field with a newline.
void csv_quote(const char *text, char *out, size_t cap);
// csv_log_flush: every row written so far onto the file, checked.
bool csv_log_flush(CsvLog *log, Error *err);
// csv_log_sync: csv_log_flush, and then those rows on the disk (fsync),
// before a checkpoint records the log's mark: flushed alone, they could sit
// in the kernel's cache past the checkpoint's own fsyncs, and a power cut
// then leave a checkpoint whose log is shorter than its mark, which
// --resume refuses (without --restart-log, which starts the log afresh).
bool csv_log_sync(CsvLog *log, Error *err);
// csv_log_close: the last rows were flushed (and checked) before, so fclose
// has nothing left to fail on. Frees what the log holds.
void csv_log_close(CsvLog *log);

#endif
