// run_dir.h: the directory a training run writes into: one run at a time,
// its lock, starting over (--force), and run.json.
//
// Reading order: file 31, after the pictures (file 30), with csv_log.h: the
// files train keeps besides the checkpoint. run.json holds the same kind of
// key/value strings as a checkpoint's metadata (safetensors.h). run_dir.c
// implements the directory's life (the lock, --force, the checkpoints);
// run_info.c the records beside them (run.json, a checkpoint's log.json).
//
// DIR (train's --out, or --resume's) belongs to one run at a time. What a
// run writes there is RUN_FILES: if any one of them is there, DIR holds a
// run, and a new run refuses it unless --resume says to continue that run
// or --force says to start over. --force removes them all first, so the
// directory never mixes two runs' files (say, an AdamW state beside an SGD
// run's model). Nothing is written into DIR before that check.
//
// While it trains, a run holds an exclusive flock on DIR/.lock, so a second
// `train` into the same DIR stops at once, naming the first one's PID, which
// the holder writes into the file (for people: the flock is the lock). The
// kernel releases a flock when its process ends, however it ends, so the
// file a killed run leaves behind blocks nothing: the next run locks it
// again. It is never removed (two processes could then lock two different
// files of one name), and it is not one of RUN_FILES: it does not mean that
// a run is there. A killed run can also leave the .tmp of a save it was in
// the middle of (atomic_open, common.h); the next run removes those.
//
// The functions below return 0, or the exit status of the failure (common.h:
// EXIT_USAGE when the user's flags ask for what cannot be, EXIT_RUNTIME
// for what went wrong on the disk) with "err" saying what to do.
#ifndef TINYGPT_RUN_DIR_H
#define TINYGPT_RUN_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "safetensors.h"

// The files a run writes into its directory (and its checkpoints, below).
extern const char *const RUN_FILES[];

typedef struct {
    const char *path;  // DIR
    int lock_fd;       // DIR/.lock, flock'ed until the process ends; -1 until then
} RunDir;

// run_dir_open: for --resume, before anything is read: DIR is a
// directory, and no other train is using it: its lock is taken if it has a
// lock file (a run from before locks has none; run_dir_claim makes it).
// Writes nothing: a resume refused before run_dir_claim leaves DIR as it was.
int run_dir_open(RunDir *rd, const char *dir, Error *err);

// run_dir_check: for a new run, before anything is loaded or written: DIR
// is a directory (or not there yet: run_dir_claim makes it), no other train
// is using it, and, without "force", it holds no run. If DIR has a lock
// file, the lock is taken here and kept.
int run_dir_check(RunDir *rd, const char *dir, bool force, Error *err);

// run_dir_claim: make DIR the run's own, just before it first writes there,
// once everything has loaded and been checked (so a mistyped FILE deletes
// nothing even with --force, and a refused command leaves no trace): DIR
// made if missing ("new_run"), its lock held, our PID in it, the atomic
// writer's leftovers removed, and with "force" the old run's files.
// A run that appeared since run_dir_check (another train that ended in
// between) is refused as it would have been there.
int run_dir_claim(RunDir *rd, const char *dir, bool new_run, bool force, Error *err);

// ---- Checkpoints ----------------------------------------------------------------
//
// A checkpoint is a directory, DIR/checkpoint-<step>, that holds everything
// a run needs to continue from that step: model.safetensors (the weights,
// the run's settings and state) and, for AdamW, optimizer.safetensors. It
// is written as DIR/checkpoint-<step>.tmp, each file flushed to the disk,
// and becomes the checkpoint with one rename, then DIR itself is flushed:
// at every instant DIR holds whole checkpoints only, and a half-written one
// is never mistaken for one. The newest --keep of them are kept; an older
// one is removed only once a newer one is whole. DIR/model.safetensors is
// the newest checkpoint's model, for sample, eval and --init (a second name
// for the same file, or a copy where the file system has no hard links).

// run_dir_begin_checkpoint: an empty DIR/checkpoint-<step>.tmp (made
// afresh: a killed save's is removed) into "tmp_dir" [cap].
int run_dir_begin_checkpoint(const char *dir, long step, char *tmp_dir, size_t cap, Error *err);

// run_dir_commit_checkpoint: the checkpoint begun for "step", its files
// written: DIR/model.safetensors made its model, then the directory
// flushed, renamed to DIR/checkpoint-<step>, DIR flushed; then all but the
// newest "keep" checkpoints removed (with a run's file from before
// checkpoints were directories: optimizer.safetensors).
int run_dir_commit_checkpoint(const char *dir, long step, int keep, Error *err);

// run_dir_latest_checkpoint: the newest checkpoint of DIR into "out" [cap]
// (its directory) and its step into "*step"; false if there is none.
// run_dir_checkpoint_before: the same for the newest of a step below "before".
bool run_dir_latest_checkpoint(const char *dir, char *out, size_t cap, long *step);
bool run_dir_checkpoint_before(const char *dir, long before, char *out, size_t cap, long *step);

// run_dir_named_checkpoint: whether "path" names a checkpoint directory
// (its last part checkpoint-<step>, as `--resume DIR/checkpoint-20`); if
// so its run directory into "dir" [cap] and its step into "*step".
bool run_dir_named_checkpoint(const char *path, char *dir, size_t cap, long *step);

// run_dir_resume_checkpoint: the checkpoint --resume DIR continues from,
// into "out" [cap]: DIR/checkpoint-<step> for "step" >= 0 (--resume
// DIR/checkpoint-<step>), else the newest, else DIR itself for a run saved
// before checkpoints were directories. None is an error that says why: a
// run that never saved (offering --force), or no run at all.
int run_dir_resume_checkpoint(const char *dir, long step, char *out, size_t cap, Error *err);

// ---- The log's mark: a checkpoint's log.json ---------------------------------
//
// log.csv as it was when a checkpoint was saved: its length and the XXH3-64
// of those bytes (csv_log.h). --resume from that checkpoint checks the log
// against it, so a changed byte of the rows it continues from is caught;
// the rows after it, which a resume cuts off, are not covered. In the
// checkpoint directory and not in model.safetensors, whose bytes a resumed
// run must reproduce exactly, while the log holds each step's timings.
typedef struct {
    bool present;   // false: a checkpoint from before log.json, nothing to check
    uint64_t bytes; // the log's length then
    uint64_t hash;  // XXH3-64 of its first "bytes" bytes
} LogMark;

// LOG_MARK_FILE: the mark's name in its checkpoint's directory: one of the
// files a checkpoint holds (run_dir.c removes it with the checkpoint;
// run_info.c writes and reads it).
#define LOG_MARK_FILE "log.json"

// run_dir_save_log_mark: "mark" as "checkpoint"/log.json (checksummed, as
// run.json below), whole or not at all. run_dir_read_log_mark: the mark of
// "checkpoint" (mark->present false if it has no log.json); a damaged
// log.json is an error naming it.
bool run_dir_save_log_mark(const char *checkpoint, const LogMark *mark, Error *err);
bool run_dir_read_log_mark(const char *checkpoint, LogMark *mark, Error *err);

// ---- run.json -------------------------------------------------------------------
//
// The run's settings that belong to this machine rather than to the model
// (settings.h, KEPT_IN_RUN_JSON: the training file's path), in DIR/run.json,
// written before each checkpoint, whole or not at all, with a checksum:
//   {"checksum":"3f0c...","format":"tinygpt-run-2","data":"/home/me/moby-dick.txt",...}
// (the XXH3-64 of the file with its own 16 digits as zeros, as a
// checkpoint's). A run.json of format tinygpt-run-1 (older) has none and is
// still read. A model is a file people hand on, and should not carry its
// trainer's paths.

// run_info_save: run.json = the checksum, "format" and then "md"'s keys.
bool run_info_save(const char *dir, const Metadata *md, Error *err);
// run_info_find: DIR/run.json's path into "path" [cap]; false, and "path"
// "", when DIR has none (a run saved before run.json existed).
bool run_info_find(const char *dir, char *path, size_t cap);
// run_info_read: the keys (every value a string) of DIR's run.json "path",
// read from "f", open for reading and closed here (train's dist_fopen: under
// mpirun, rank 0's bytes; a NULL "f" could not be opened, "err" says why),
// into "md". A damaged one (its checksum wrong, or not run.json at all) is
// an error saying to give FILE, which makes it unneeded.
int run_info_read(FILE *f, const char *path, const char *dir, Metadata *md, Error *err);

// absolute_utf8_path: "path" made absolute into "out" [cap], or "" when it
// is not valid UTF-8 (JSON holds only UTF-8) or too long.
void absolute_utf8_path(const char *path, char *out, size_t cap);

#endif
