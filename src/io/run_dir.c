// run_dir.c: the run directory: its checkpoints, its lock and --force (see
// run_dir.h); run.json and the checkpoints' log.json are run_info.c's.
//
// Reading order: file 31.
#include "run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const RUN_FILES[] = {"model.safetensors", "optimizer.safetensors", "best.safetensors", "log.csv",
                                 "loss.png", "run.json", NULL};
#define LOCK_FILE ".lock"
#define CHECKPOINT_PREFIX "checkpoint-"
#define REMOVED_SUFFIX ".old"  // a checkpoint being removed (remove_checkpoint)
// What a checkpoint directory may hold: its files, and their .tmp while a
// save is writing them.
static const char *const CHECKPOINT_FILES[] = {"model.safetensors", "optimizer.safetensors", LOG_MARK_FILE, NULL};

// ---- Checkpoint directories ------------------------------------------------------

// checkpoint_step: the step of a directory entry named
// "checkpoint-<digits><suffix>", or -1 for any other name.
static long checkpoint_step(const char *name, const char *suffix) {
    const size_t prefix = sizeof CHECKPOINT_PREFIX - 1;
    if (strncmp(name, CHECKPOINT_PREFIX, prefix) != 0) return -1;  // first: a shorter name ends before name + prefix
    const size_t digits = strspn(name + prefix, "0123456789");
    if (digits == 0 || digits > 18 || strcmp(name + prefix + digits, suffix) != 0) return -1;
    return strtol(name + prefix, NULL, 10);
}

static int compare_steps(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

// checkpoint_steps: the steps of DIR's entries named checkpoint-<step><suffix>,
// in increasing order, into "*steps" (freed by the caller); returns how many.
static int checkpoint_steps(const char *dir, const char *suffix, long **steps) {
    *steps = NULL;
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long step = checkpoint_step(e->d_name, suffix);
        if (step < 0) continue;
        *steps = xrealloc(*steps, (size_t)(n + 1) * sizeof **steps);
        (*steps)[n++] = step;
    }
    if (d) closedir(d);
    if (n > 0) qsort(*steps, (size_t)n, sizeof **steps, compare_steps);
    return n;
}

// remove_files: the directory "path" of a checkpoint being written or
// removed: its files, their .tmp, and the directory itself. A file tinygpt
// did not write stops it.
static int remove_files(const char *path, Error *err) {
    for (int i = 0; CHECKPOINT_FILES[i]; i++)
        for (int tmp = 0; tmp < 2; tmp++) {
            char file[4300];
            snprintf(file, sizeof file, "%s/%s%s", path, CHECKPOINT_FILES[i], tmp ? ATOMIC_TMP_SUFFIX : "");
            if (io_fault() || (unlink(file) != 0 && errno != ENOENT)) {
                error_set(err, "cannot remove '%s': %s; remove it yourself, or pick another --out", file, strerror(errno));
                return EXIT_RUNTIME;
            }
        }
    if (io_fault() || (rmdir(path) != 0 && errno != ENOENT)) {
        error_set(err, "cannot remove the old checkpoint '%s': %s; remove it yourself", path, strerror(errno));
        return EXIT_RUNTIME;
    }
    return 0;
}

// remove_checkpoint: the checkpoint "path" stops being one at once, by a
// rename to "path" + REMOVED_SUFFIX (a leftover the next run removes, never
// mistaken for a checkpoint, nor for one being written), and then its
// files go. A kill in the middle leaves a whole checkpoint or none, never a
// part of one under a checkpoint's name.
static int remove_checkpoint(const char *path, Error *err) {
    char gone[4300];
    snprintf(gone, sizeof gone, "%s" REMOVED_SUFFIX, path);
    int status = remove_files(gone, err);  // an earlier removal's, killed
    if (status) return status;
    if (io_fault() || rename(path, gone) != 0) {
        error_set(err, "cannot remove the old checkpoint '%s': %s; remove it yourself", path, strerror(errno));
        return EXIT_RUNTIME;
    }
    return remove_files(gone, err);
}

// remove_checkpoints: every DIR/checkpoint-<step><suffix> but the newest
// "keep" of them: the leftovers of killed saves (suffix ".tmp") or
// removals (".old"), or checkpoints (suffix "").
static int remove_checkpoints(const char *dir, const char *suffix, int keep, Error *err) {
    long *steps;
    int n = checkpoint_steps(dir, suffix, &steps), status = 0;
    for (int i = 0; i < n - keep && !status; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/" CHECKPOINT_PREFIX "%ld%s", dir, steps[i], suffix);
        status = suffix[0] ? remove_files(path, err) : remove_checkpoint(path, err);
    }
    free(steps);
    return status;
}

// remove_checkpoints_after: every DIR/checkpoint-<step> of a step after
// "step", the newest save: a run resumed from an older checkpoint has gone
// back over those steps, and its own are the run now (a --resume DIR that
// took one of those would mix two histories, and its log would no longer
// hold their rows).
static int remove_checkpoints_after(const char *dir, long step, Error *err) {
    long *steps;
    int n = checkpoint_steps(dir, "", &steps), status = 0;
    for (int i = n - 1; i >= 0 && steps[i] > step && !status; i--) {
        char path[4200];
        snprintf(path, sizeof path, "%s/" CHECKPOINT_PREFIX "%ld", dir, steps[i]);
        status = remove_checkpoint(path, err);
    }
    free(steps);
    return status;
}

bool run_dir_checkpoint_before(const char *dir, long before, char *out, size_t cap, long *step) {
    long *steps;
    int n = checkpoint_steps(dir, "", &steps);
    while (n > 0 && steps[n - 1] >= before) n--;
    if (n > 0) {
        *step = steps[n - 1];
        snprintf(out, cap, "%s/" CHECKPOINT_PREFIX "%ld", dir, *step);
    }
    free(steps);
    return n > 0;
}

bool run_dir_latest_checkpoint(const char *dir, char *out, size_t cap, long *step) {
    return run_dir_checkpoint_before(dir, LONG_MAX, out, cap, step);
}

bool run_dir_named_checkpoint(const char *path, char *dir, size_t cap, long *step) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;  // "DIR/checkpoint-20/"
    size_t base = len;
    while (base > 0 && path[base - 1] != '/') base--;
    char name[256];
    if (len - base >= sizeof name) return false;
    memcpy(name, path + base, len - base);
    name[len - base] = '\0';
    *step = checkpoint_step(name, "");
    if (*step < 0) return false;
    if (base == 0) snprintf(dir, cap, ".");
    else snprintf(dir, cap, "%.*s", base > 1 ? (int)base - 1 : 1, path);  // "/checkpoint-5": the root
    return true;
}

int run_dir_begin_checkpoint(const char *dir, long step, char *tmp_dir, size_t cap, Error *err) {
    snprintf(tmp_dir, cap, "%s/" CHECKPOINT_PREFIX "%ld" ATOMIC_TMP_SUFFIX, dir, step);
    int status = remove_files(tmp_dir, err);  // a killed save's
    if (!status && (io_fault() || mkdir(tmp_dir, 0777) != 0)) {
        error_set(err, "cannot make the directory '%s': %s (is the disk full?)", tmp_dir, strerror(errno));
        status = EXIT_RUNTIME;
    }
    return status;
}

// link_model: DIR/model.safetensors becomes the file "model" (of the
// newest checkpoint): a hard link made beside it and renamed over it, or,
// on a file system without hard links, a copy written the same way.
static int link_model(const char *dir, const char *model, Error *err) {
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s" ATOMIC_TMP_SUFFIX, path);
    unlink(tmp);  // a killed save's
    bool linked = !io_fault() && link(model, tmp) == 0;
    if (!linked && (errno == EXDEV || errno == EPERM || errno == ENOTSUP || errno == EMLINK)) {
        char *bytes;
        size_t len;
        if (!read_file(model, &bytes, &len, err)) return EXIT_RUNTIME;
        bool copied = write_file_atomic(path, bytes, len, err);
        free(bytes);
        return copied ? 0 : EXIT_RUNTIME;
    }
    if (!linked || io_fault() || rename(tmp, path) != 0) {
        error_set(err, "cannot make '%s' the model of '%s': %s (is the disk full?)", path, model, strerror(errno));
        unlink(tmp);
        return EXIT_RUNTIME;
    }
    return sync_dir(dir, err) ? 0 : EXIT_RUNTIME;
}

int run_dir_commit_checkpoint(const char *dir, long step, int keep, Error *err) {
    char tmp[4200], final[4200], model[4300];
    snprintf(tmp, sizeof tmp, "%s/" CHECKPOINT_PREFIX "%ld" ATOMIC_TMP_SUFFIX, dir, step);
    snprintf(final, sizeof final, "%s/" CHECKPOINT_PREFIX "%ld", dir, step);
    // The same step saved before (a run that went back to an older
    // checkpoint by hand): the new one replaces it.
    // DIR/model.safetensors first: once the checkpoint is whole, a kill may
    // leave old checkpoints to remove, but never a model one save behind
    // the run (and a kill before makes the next run redo this step).
    snprintf(model, sizeof model, "%s/model.safetensors", tmp);
    struct stat st;
    int status = link_model(dir, model, err);
    if (!status && lstat(final, &st) == 0) status = remove_checkpoint(final, err);
    if (status) return status;
    if (!sync_dir(tmp, err)) return EXIT_RUNTIME;
    if (io_fault() || rename(tmp, final) != 0) {
        error_set(err, "cannot rename '%s' to '%s': %s", tmp, final, strerror(errno));
        return EXIT_RUNTIME;
    }
    if (!sync_dir(dir, err)) return EXIT_RUNTIME;
    status = remove_checkpoints_after(dir, step, err);
    if (!status) status = remove_checkpoints(dir, "", keep, err);
    char old_optimizer[4200];  // from before checkpoints were directories
    snprintf(old_optimizer, sizeof old_optimizer, "%s/optimizer.safetensors", dir);
    if (!status && unlink(old_optimizer) != 0 && errno != ENOENT) {
        error_set(err, "cannot remove '%s': %s; remove it yourself", old_optimizer, strerror(errno));
        status = EXIT_RUNTIME;
    }
    return status;
}

// run_files_in: which of RUN_FILES "dir" holds, and its checkpoints, as
// "a, b" in "list" [cap]; returns how many. A symlink by one of those names
// counts, wherever it points.
static int run_files_in(const char *dir, char *list, size_t cap) {
    int n = 0;
    list[0] = '\0';
    for (int i = 0; RUN_FILES[i]; i++) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, RUN_FILES[i]);
        if (lstat(path, &st) != 0) continue;
        size_t len = strlen(list);
        snprintf(list + len, cap - len, "%s%s", n > 0 ? ", " : "", RUN_FILES[i]);
        n++;
    }
    long *steps;
    int checkpoints = checkpoint_steps(dir, "", &steps);
    free(steps);
    if (checkpoints > 0) {
        size_t len = strlen(list);
        snprintf(list + len, cap - len, "%s%d checkpoint%s", n > 0 ? ", " : "", checkpoints, checkpoints == 1 ? "" : "s");
    }
    return n + checkpoints;
}

// refuse_run: the usage error for a DIR that holds a run already: one that
// --resume can continue, or one that was stopped before it saved anything.
static int refuse_run(const char *dir, const char *files, Error *err) {
    char model[4200], newest[4200];
    long step;
    struct stat st;
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    if (!run_dir_latest_checkpoint(dir, newest, sizeof newest, &step) && lstat(model, &st) != 0)
        error_set(err, "--out '%s' holds a run that never saved a checkpoint (%s), so there is nothing to resume; start over with --force (which deletes those files), or pick another --out",
                  dir, files);
    else
        error_set(err, "--out '%s' already holds a run (%s); continue it with --resume %s, start over with --force (which deletes those files), or pick another --out",
                  dir, files, dir);
    return EXIT_USAGE;
}

// note_lock_owner: our PID into the lock file we hold, for the message of
// the next train that finds it locked. Only informational: if the write
// fails (a full disk), that message says "pid unknown", and the lock holds.
static void note_lock_owner(const RunDir *rd) {
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    bool noted = ftruncate(rd->lock_fd, 0) == 0 && pwrite(rd->lock_fd, pid, (size_t)len, 0) == len;
    (void)noted;  // nothing to do either way
}

// lock_holder: the PID in the lock file "fd", when it is a live process's;
// 0 when the file names none. A holder writes its PID just after it takes
// the lock, so the file can still name the one before it, which is gone:
// look again a few times before saying "unknown".
static long lock_holder(int fd) {
    for (int attempt = 0; attempt < 20; attempt++) {
        char text[32];
        ssize_t got = pread(fd, text, sizeof text - 1, 0);
        text[got > 0 ? got : 0] = '\0';
        long pid = strspn(text, "0123456789") > 0 ? strtol(text, NULL, 10) : 0;
        if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) return pid;
        usleep(5000);
    }
    return 0;
}

// lock: flock DIR/.lock for this process, without waiting: held by another
// train, it is an error naming that process. Creates the file when
// "create"; otherwise leaves rd->lock_fd at -1 if the file is not there.
// Writes nothing into it: run_dir_claim writes our PID, once the run is
// sure to go on, so a command refused before then leaves the file as it was.
static int lock(RunDir *rd, bool create, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_FILE, rd->path);
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
    if (fd < 0 && !create && errno == ENOENT) return 0;
    if (fd < 0) {
        error_set(err, "cannot open the lock file '%s': %s; check the permissions of '%s', or pick another --out", path,
                  strerror(errno), rd->path);
        return EXIT_RUNTIME;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int flock_errno = errno;
        long holder = flock_errno == EWOULDBLOCK ? lock_holder(fd) : 0;
        close(fd);
        if (flock_errno != EWOULDBLOCK) {
            error_set(err, "cannot lock '%s': %s; pick another --out", path, strerror(flock_errno));
            return EXIT_RUNTIME;
        }
        char pid[32] = "unknown";
        if (holder > 0) snprintf(pid, sizeof pid, "%ld", holder);
        error_set(err, "'%s' is in use by another tinygpt train (pid %s); wait for it to finish or stop it, or train into another --out",
                  rd->path, pid);
        return EXIT_RUNTIME;
    }
    rd->lock_fd = fd;
    return 0;
}


// remove_in_dir: DIR/<name><suffix>, if it is there.
static int remove_in_dir(const char *dir, const char *name, const char *suffix, Error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, suffix);
    if (!io_fault() && (unlink(path) == 0 || errno == ENOENT)) return 0;
    error_set(err, "cannot remove '%s': %s; remove it yourself, or pick another --out", path, strerror(errno));
    return EXIT_RUNTIME;
}

int run_dir_check(RunDir *rd, const char *dir, bool force, Error *err) {
    rd->path = dir;
    rd->lock_fd = -1;
    struct stat st;
    if (stat(dir, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) {
        error_set(err, "--out '%s' is a file, not a directory; give a directory (it is created if missing)", dir);
        return EXIT_USAGE;
    }
    int status = lock(rd, false, err);
    if (status) return status;
    char files[256];
    if (!force && run_files_in(dir, files, sizeof files) > 0) return refuse_run(dir, files, err);
    return 0;
}

int run_dir_open(RunDir *rd, const char *dir, Error *err) {
    rd->path = dir;
    rd->lock_fd = -1;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        error_set(err, "--resume '%s' is not a directory; give the --out directory of an earlier run", dir);
        return EXIT_RUNTIME;
    }
    return lock(rd, false, err);
}

int run_dir_resume_checkpoint(const char *dir, long step, char *out, size_t cap, Error *err) {
    struct stat st;
    if (step >= 0) {
        snprintf(out, cap, "%s/" CHECKPOINT_PREFIX "%ld", dir, step);
        if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
        error_set(err, "'%s' has no checkpoint of step %ld (no '%s'); give one it has, or the run directory itself for its newest",
                  dir, step, out);
        return EXIT_RUNTIME;
    }
    if (run_dir_latest_checkpoint(dir, out, cap, &step)) return 0;
    // A run saved before checkpoints were directories: its model in DIR.
    snprintf(out, cap, "%s/model.safetensors", dir);
    if (lstat(out, &st) == 0) {
        snprintf(out, cap, "%s", dir);
        return 0;
    }
    char files[256];
    if (run_files_in(dir, files, sizeof files) > 0) {
        error_set(err, "--resume '%s' holds a run that never saved a checkpoint (%s), so there is nothing to resume; start over with: tinygpt train FILE --out %s --force (which deletes those files)",
                  dir, files, dir);
        return EXIT_RUNTIME;
    }
    error_set(err, "--resume '%s' holds no run (no checkpoint-<step> and no model.safetensors); give the --out directory of an earlier run",
              dir);
    return EXIT_RUNTIME;
}

int run_dir_claim(RunDir *rd, const char *dir, bool new_run, bool force, Error *err) {
    if (rd->path != dir) {  // not checked first (a resumed run)
        rd->path = dir;
        rd->lock_fd = -1;
    }
    if (new_run) make_dir(dir);
    int status = rd->lock_fd < 0 ? lock(rd, true, err) : 0;
    if (status) return status;
    note_lock_owner(rd);
    char files[256];
    if (new_run && !force && run_files_in(dir, files, sizeof files) > 0) return refuse_run(dir, files, err);
    // --force: the model and the checkpoints go first, the newest last, so a
    // kill in the middle leaves the old run resumable, or nothing to resume.
    if (force) status = remove_in_dir(dir, "model.safetensors", "", err);
    if (!status && force) status = remove_checkpoints(dir, "", 0, err);
    for (int i = 0; RUN_FILES[i] && !status; i++) {
        status = remove_in_dir(dir, RUN_FILES[i], ATOMIC_TMP_SUFFIX, err);
        if (force && !status) status = remove_in_dir(dir, RUN_FILES[i], "", err);
    }
    if (!status) status = remove_checkpoints(dir, ATOMIC_TMP_SUFFIX, 0, err);  // killed saves'
    if (!status) status = remove_checkpoints(dir, REMOVED_SUFFIX, 0, err);     // killed removals'
    return status;
}
