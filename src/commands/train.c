// train.c: the training loop and the `train` command (see train.h).
//
// Besides the loop, what keeps a long run safe: Ctrl-C or SIGTERM stops it
// after the current step with a checkpoint; --save-every saves one every N
// steps; a NaN or infinity stops it before it reaches a checkpoint; a log
// that cannot be written (a full disk) stops it with one; --resume DIR
// continues a run exactly where its checkpoint left it; and the run
// directory belongs to one run at a time (see "The run directory").
#include "train.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "checkpoint.h"
#include "data.h"
#include "json.h"
#include "model.h"
#include "optimizer.h"
#include "watch.h"

typedef struct {
    const char *data_path;
    const char *out_dir;
    const char *init_path;
    const char *order;
    const char *arch_name;   // --arch, as typed; "arch" once checked
    const char *tokenizer_name;  // --tokenizer: char or bpe
    int vocab_size;          // --vocab-size: tokens a bpe tokenizer learns
    Arch arch;
    long steps;
    int layers, batch, context, embd, heads;
    bool no_layernorm, no_mlp, no_residual;  // a gpt without these parts (make ladder)
    float dropout, lr, val_fraction;
    const char *optimizer_name;  // --optimizer: sgd or adamw
    const char *schedule_name;   // --lr-schedule: constant or cosine
    long warmup;                 // --warmup: steps of linear warmup
    double min_lr;               // --min-lr: where cosine ends; < 0 until set (default lr/10)
    double beta1, beta2, weight_decay, grad_clip;
    int eval_interval, eval_batches, threads;
    long seed;
    const char *resume_dir;  // --resume: continue the run saved in this directory
    long save_every;         // save a checkpoint every this many steps; 0 = only at the end
    long log_interval;       // a progress line every this many steps; 0 until set (default --eval-interval)
    bool force;              // --force: replace the run already in --out
    long stop_after;         // hidden, for tests: stop as if interrupted after this many steps
} TrainOptions;

// Everything one training run holds, built before the first step so the
// steps themselves allocate nothing.
typedef struct {
    Dataset data;
    Tokenizer tok;
    Model model;
    Optimizer optimizer;    // the update rule, and AdamW's moments
    int *inputs, *targets;  // [B,T] the current batch
    FILE *log;              // <out>/log.csv
    char log_path[4096];
    long log_rows;          // rows already in log.csv when it was opened (a resumed run's past steps)
    bool log_failed;        // a write to the log failed: run->fault says why, and the run stops
    char checkpoint_path[4096];
    char optimizer_path[4096];     // <out>/optimizer.safetensors: AdamW's moments
    char run_info_path[4096];      // <out>/run.json: where the training file is
    char data_absolute[4096];      // the training file's absolute path, for run.json; "" if not UTF-8
    char data_from_run[4096];      // with --resume and no FILE: the path run.json (or the checkpoint) gives
    bool run_info_saved;    // run.json is written by this process's first save; it does not change after
    int lock_fd;            // DIR/.lock, flock'ed for the whole run; -1 until then
    long start_step;        // 0, or the step a resumed run continues from
    Rng batch_rng;          // draws the random batches; saved in checkpoints
    TrainState state;       // with --resume: what the checkpoint said about its run
    char resume_checkpoint[4200];  // with --resume: DIR/model.safetensors
    uint64_t data_hash;     // dataset_hash of the text, saved in checkpoints
    long last_saved_step;   // the step of the newest checkpoint on disk, or -1
    Error fault;            // why training stopped early, when train_loop returns -1
} TrainRun;

// log.csv's columns: one row per step (README, "train"). lr is the rate the
// step used; grad_norm the gradients' norm before clipping.
// val_bpb is val_loss in bits per byte of text (bits_per_byte, data.h),
// which compares across tokenizers.
#define LOG_HEADER "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm,val_bpb\n"

// ---- Stopping on a signal -------------------------------------------------------
// A signal handler may only touch a volatile sig_atomic_t and call
// async-signal-safe functions (write, _exit), so the first SIGINT or SIGTERM
// only records itself and says what will happen; the loop checks after each
// step and saves. A second one exits at once: checkpoint_save writes a .tmp
// file and renames it only when complete, so the checkpoint on disk is the
// last whole one whatever that exit interrupts.

static volatile sig_atomic_t stop_signal;  // 0, or the first SIGINT/SIGTERM received

static void on_stop_signal(int sig) {
    if (stop_signal) _exit(128 + sig);
    stop_signal = sig;
    static const char msg[] = "\ntinygpt: stopping after this step to save a checkpoint (press Ctrl-C again to quit at once without saving)\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;  // nothing to do if stderr is gone
}

// catch_stop_signals: SA_RESTART, so a signal arriving inside fwrite or
// fsync does not make them fail with EINTR.
static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);  // each blocks the other while its handler runs, so the message is written whole
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// The mean loss over "n_batches" fixed windows of the validation split,
// dropout off. The windows are the same at every evaluation, so successive
// values are comparable.
static float validation_loss(TrainRun *run, int B, int T, int n_batches) {
    TokenSpan val_tokens = dataset_val(&run->data);
    double total = 0.0;
    for (int k = 0; k < n_batches; k++) {
        batch_sequential(val_tokens, k, B, T, run->inputs, run->targets);
        total += model_forward(&run->model, run->inputs, run->targets, B, T, false, 0);
    }
    return (float)(total / n_batches);
}

// ---- The run directory ---------------------------------------------------------------
//
// DIR (--out, or --resume's) belongs to one run at a time. What a run writes
// there is RUN_FILES: if any one of them is there, DIR holds a run, and a new
// run refuses it unless --resume says to continue that run or --force says to
// start over. --force removes them all first, so the directory never mixes
// two runs' files (say, an AdamW state beside an SGD run's model). Nothing is
// written into DIR before that check.
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

static const char *const RUN_FILES[] = {"model.safetensors", "optimizer.safetensors", "log.csv", "loss.png",
                                        "run.json"};
#define NUM_RUN_FILES (sizeof RUN_FILES / sizeof RUN_FILES[0])
#define LOCK_FILE ".lock"

// run_files_in: which of RUN_FILES "dir" holds, as "a, b" in "list" [cap];
// returns how many. A symlink by one of those names counts, wherever it points.
static int run_files_in(const char *dir, char *list, size_t cap) {
    int n = 0;
    list[0] = '\0';
    for (size_t i = 0; i < NUM_RUN_FILES; i++) {
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, RUN_FILES[i]);
        if (lstat(path, &st) != 0) continue;
        size_t len = strlen(list);
        snprintf(list + len, cap - len, "%s%s", n > 0 ? ", " : "", RUN_FILES[i]);
        n++;
    }
    return n;
}

static _Noreturn void refuse_run_dir(const Command *cmd, const char *dir, const char *files) {
    usage_error(cmd, "--out '%s' already holds a run (%s); continue it with --resume %s, start over with --force (which deletes those files), or pick another --out",
                dir, files, dir);
}

// lock_run_dir: flock DIR/.lock for this process, without waiting: held by
// another train, it is an error naming that process. Creates the file when
// "create"; otherwise writes nothing, and returns false if it is not there.
static bool lock_run_dir(TrainRun *run, const char *dir, bool create) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_FILE, dir);
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0666);
    if (fd < 0 && !create && errno == ENOENT) return false;
    if (fd < 0)
        die(EXIT_RUNTIME, "cannot open the lock file '%s': %s; check the permissions of '%s', or pick another --out", path,
            strerror(errno), dir);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) die(EXIT_RUNTIME, "cannot lock '%s': %s; pick another --out", path, strerror(errno));
        char pid[32];
        ssize_t got = pread(fd, pid, sizeof pid - 1, 0);
        pid[got > 0 ? got : 0] = '\0';
        pid[strspn(pid, "0123456789")] = '\0';  // empty if the holder has not written it yet
        die(EXIT_RUNTIME, "'%s' is in use by another tinygpt train (pid %s); wait for it to finish or stop it, or train into another --out",
            dir, pid[0] ? pid : "unknown");
    }
    run->lock_fd = fd;
    return true;
}

// note_lock_owner: our PID into the lock file we hold, for the message of
// the next train that finds it locked. Only informational: if the write
// fails (a full disk), that message says "pid unknown", and the lock holds.
static void note_lock_owner(const TrainRun *run) {
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    bool noted = ftruncate(run->lock_fd, 0) == 0 && pwrite(run->lock_fd, pid, (size_t)len, 0) == len;
    (void)noted;  // nothing to do either way
}

// remove_in_dir: DIR/<name><suffix>, if it is there.
static void remove_in_dir(const char *dir, const char *name, const char *suffix) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, suffix);
    if (unlink(path) != 0 && errno != ENOENT)
        die(EXIT_RUNTIME, "cannot remove '%s': %s; remove it yourself, or pick another --out", path, strerror(errno));
}

// check_out_dir: for a new run, before anything is loaded or written:
// --out is a directory (or not there yet: claim_run_dir makes it), no other
// train is using it, and, without --force, it holds no run. If DIR has a
// lock file, the lock is taken here and kept.
static void check_out_dir(const Command *cmd, TrainRun *run, const TrainOptions *opt) {
    struct stat st;
    if (stat(opt->out_dir, &st) != 0) return;
    if (!S_ISDIR(st.st_mode))
        usage_error(cmd, "--out '%s' is a file, not a directory; give a directory (it is created if missing)",
                    opt->out_dir);
    lock_run_dir(run, opt->out_dir, false);
    char files[256];
    if (!opt->force && run_files_in(opt->out_dir, files, sizeof files) > 0) refuse_run_dir(cmd, opt->out_dir, files);
}

// claim_run_dir: make DIR the run's own, just before it first writes there
// (a new run: once everything has loaded, so a mistyped FILE deletes
// nothing even with --force; --resume: before its checkpoint is read): DIR
// made if missing, its lock held, our PID in it, the atomic writer's
// leftovers removed, and with --force the old run's files. A run that
// appeared since check_out_dir (another train that ended in between) is
// refused as it would have been there.
static void claim_run_dir(const Command *cmd, TrainRun *run, const TrainOptions *opt) {
    if (!opt->resume_dir) make_dir(opt->out_dir);
    if (run->lock_fd < 0) lock_run_dir(run, opt->out_dir, true);
    note_lock_owner(run);
    char files[256];
    if (!opt->resume_dir && !opt->force && run_files_in(opt->out_dir, files, sizeof files) > 0)
        refuse_run_dir(cmd, opt->out_dir, files);
    for (size_t i = 0; i < NUM_RUN_FILES; i++) {
        remove_in_dir(opt->out_dir, RUN_FILES[i], ATOMIC_TMP_SUFFIX);
        if (opt->force) remove_in_dir(opt->out_dir, RUN_FILES[i], "");
    }
}

// ---- run.json: where the training file is ---------------------------------------------
//
// --resume without FILE needs the training file's path, but the model is a
// file people hand on, and it should not carry its trainer's paths. So the
// path lives in the run directory, in DIR/run.json, written with the first
// checkpoint of each process (write_file_atomic, like the checkpoint itself;
// a resume may have been given FILE at a new place):
//   {"format":"tinygpt-run-1","data":"/home/me/moby-dick.txt"}
// "data" is an absolute path, so the run resumes from any directory, and is
// left out when the path is not UTF-8 (JSON holds only UTF-8); resuming then
// asks for FILE. A run saved before run.json existed has the path in its
// model's metadata (TrainState.data_path), which resume_options falls back on.
#define RUN_INFO_FORMAT "tinygpt-run-1"

// absolute_utf8_path: "path" made absolute into "out" [cap], or "" when it
// is not valid UTF-8 or too long.
static void absolute_utf8_path(const char *path, char *out, size_t cap) {
    char *absolute = realpath(path, NULL);
    const char *p = absolute ? absolute : path;
    bool utf8 = strlen(p) < cap;
    for (size_t at = 0, n = strlen(p); utf8 && at < n;) {
        uint32_t cp;
        int bytes = utf8_decode((const unsigned char *)p + at, n - at, &cp);
        utf8 = bytes > 0;
        at += (size_t)bytes;
    }
    snprintf(out, cap, "%s", utf8 ? p : "");
    free(absolute);
}

// save_run_info: run.json for this run, whole or not at all.
static bool save_run_info(const TrainRun *run, Error *err) {
    JsonBuf b = {0};
    json_buf_printf(&b, "{\"format\":\"%s\"", RUN_INFO_FORMAT);
    if (run->data_absolute[0]) {
        json_buf_append(&b, ",\"data\":", 8);
        json_buf_string(&b, run->data_absolute, strlen(run->data_absolute));
    }
    json_buf_append(&b, "}\n", 2);
    bool ok = write_file_atomic(run->run_info_path, b.data, b.len, err);
    json_buf_free(&b);
    return ok;
}

// read_run_info: the training file's path from DIR/run.json into "data"
// [cap]; false (and "") when there is no run.json or it records no path.
// A damaged one is an error saying to give FILE, which makes it unneeded.
static bool read_run_info(const char *dir, char *data, size_t cap) {
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    data[0] = '\0';
    if (access(path, F_OK) != 0) return false;
    char *text;
    size_t len;
    Error err;
    JsonValue *root = NULL;
    if (!read_file(path, &text, &len, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    bool parsed = json_parse(text, len, &root, &err);
    free(text);
    const JsonValue *format = json_get(root, "format"), *value = json_get(root, "data");
    if (!parsed || !format || format->type != JSON_STRING || strcmp(format->string, RUN_INFO_FORMAT) != 0 ||
        (value && (value->type != JSON_STRING || value->string_len >= cap || strlen(value->string) != value->string_len)))
        die(EXIT_RUNTIME, "'%s' is not a run.json that tinygpt train wrote; give the training file instead: tinygpt train FILE --resume %s",
            path, dir);
    if (value) memcpy(data, value->string, value->string_len + 1);
    json_free(root);
    return data[0] != '\0';
}

// ---- Defaults that depend on the architecture ------------------------------------

// The flags whose defaults differ between the architectures. gpt's are
// nanoGPT's CPU recipe for tiny Shakespeare (AdamW at 1e-3, 100 warmup
// steps, cosine to 1e-4, clipping at 1); card's are the values it has
// always had, so a `--arch card` run is bit for bit what it was. Set after
// parsing, for each flag not given (arch_defaults), and shown by --help as
// "(default gpt 12, card 32)" (arch_default_texts).
static const struct {
    const char *flag;
    double gpt, card;                 // a number flag's value (an int, a long, a float or a double)
    const char *gpt_text, *card_text; // a string flag's
} ARCH_DEFAULTS[] = {
    {"--steps", 2000, 7000, NULL, NULL},  // card: about a minute on 2 cores
    {"--batch", 12, 32, NULL, NULL},
    {"--dropout", 0.0f, 0.1f, NULL, NULL},
    {"--optimizer", 0, 0, "adamw", "sgd"},
    {"--lr", 1e-3f, 0.5f, NULL, NULL},
    {"--warmup", 100, 0, NULL, NULL},
    {"--lr-schedule", 0, 0, "cosine", "constant"},
    {"--grad-clip", 1.0, 0.0, NULL, NULL},
    {"--eval-interval", 250, 500, NULL, NULL},
};
#define NUM_ARCH_DEFAULTS (sizeof ARCH_DEFAULTS / sizeof ARCH_DEFAULTS[0])

// arch_defaults: give each flag of ARCH_DEFAULTS that is not on the command
// line its default for "arch".
static void arch_defaults(const Command *cmd, Arch arch) {
    for (size_t i = 0; i < NUM_ARCH_DEFAULTS; i++) {
        const Flag *f = command_flag(cmd, ARCH_DEFAULTS[i].flag);
        if (f->seen) continue;
        double x = arch == ARCH_GPT ? ARCH_DEFAULTS[i].gpt : ARCH_DEFAULTS[i].card;
        switch (f->type) {
        case FLAG_INT: *(int *)f->value = (int)x; break;
        case FLAG_LONG: *(long *)f->value = (long)x; break;
        case FLAG_FLOAT: *(float *)f->value = (float)x; break;
        case FLAG_DOUBLE: *(double *)f->value = x; break;
        case FLAG_STRING:
            *(const char **)f->value = arch == ARCH_GPT ? ARCH_DEFAULTS[i].gpt_text : ARCH_DEFAULTS[i].card_text;
            break;
        case FLAG_SWITCH: assert(!"ARCH_DEFAULTS holds no switches");
        }
    }
}

// arch_default_texts: point each flag of ARCH_DEFAULTS at its --help text,
// written into texts[i].
static void arch_default_texts(Command *cmd, char texts[][48]) {
    for (size_t i = 0; i < NUM_ARCH_DEFAULTS; i++) {
        if (ARCH_DEFAULTS[i].gpt_text)
            snprintf(texts[i], 48, "gpt %s, card %s", ARCH_DEFAULTS[i].gpt_text, ARCH_DEFAULTS[i].card_text);
        else snprintf(texts[i], 48, "gpt %g, card %g", ARCH_DEFAULTS[i].gpt, ARCH_DEFAULTS[i].card);
        for (int j = 0; j < cmd->n_flags; j++)
            if (strcmp(cmd->flags[j].name, ARCH_DEFAULTS[i].flag) == 0) cmd->flags[j].default_text = texts[i];
    }
}

// check_arch_flags: --arch names an architecture, and --layers goes only
// with gpt. Called before the architecture of an --init file is known, so
// only an explicit --arch card refuses --layers here (check_init_conflicts
// does the rest).
static void check_arch_flags(const Command *cmd, TrainOptions *opt) {
    if (!arch_from_name(opt->arch_name, &opt->arch))
        usage_error(cmd, "--arch '%s' is not one of: gpt, card", opt->arch_name);
    if (command_flag(cmd, "--arch")->seen && opt->arch == ARCH_CARD && command_flag(cmd, "--layers")->seen)
        usage_error(cmd, "--layers is for --arch gpt: card has exactly one block; drop --layers, or use --arch gpt");
}

// check_tokenizer_flags: a known --tokenizer, and --vocab-size only for bpe.
static void check_tokenizer_flags(const Command *cmd, const TrainOptions *opt) {
    if (strcmp(opt->tokenizer_name, "char") != 0 && strcmp(opt->tokenizer_name, "bpe") != 0)
        usage_error(cmd, "--tokenizer '%s' is not one of: char, bpe", opt->tokenizer_name);
    if (strcmp(opt->tokenizer_name, "char") == 0 && command_flag(cmd, "--vocab-size")->seen)
        usage_error(cmd, "--vocab-size is for --tokenizer bpe (char takes one token per character of the text); drop it, or add --tokenizer bpe");
}

// With --init, the architecture and sizes come from the checkpoint: a flag
// for them given too must agree with it.
static void check_init_conflicts(const Command *cmd, const ModelConfig *cfg, const Tokenizer *tok) {
    const Flag *tokenizer = command_flag(cmd, "--tokenizer");
    const char *saved_tokenizer = tokenizer_kind_name(tok->kind);
    if (tokenizer->seen && strcmp(*(const char *const *)tokenizer->value, saved_tokenizer) != 0)
        usage_error(cmd, "--tokenizer %s conflicts with the --init checkpoint, whose tokenizer is %s; drop the flag",
                    *(const char *const *)tokenizer->value, saved_tokenizer);
    if (command_flag(cmd, "--vocab-size")->seen)
        usage_error(cmd, "--vocab-size cannot change the --init checkpoint's tokenizer (%d tokens); drop the flag",
                    tok->vocab_size);
    const char *saved_arch = arch_name(cfg->arch);
    const Flag *arch = command_flag(cmd, "--arch");
    if (arch->seen && strcmp(*(const char *const *)arch->value, saved_arch) != 0)
        usage_error(cmd, "--arch %s conflicts with the --init checkpoint, which is %s; drop the flag",
                    *(const char *const *)arch->value, saved_arch);
    const Flag *layers = command_flag(cmd, "--layers");
    if (layers->seen && cfg->arch == ARCH_CARD)
        usage_error(cmd, "--layers %d conflicts with the --init checkpoint, which is card (one block); drop the flag",
                    *(const int *)layers->value);
    struct {
        const char *flag;
        int saved;
    } sizes[] = {{"--layers", model_layers(cfg)}, {"--context", cfg->block_size}, {"--embd", cfg->n_embd},
                 {"--heads", cfg->n_head}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const Flag *f = command_flag(cmd, sizes[i].flag);
        int given = *(const int *)f->value;
        if (f->seen && given != sizes[i].saved)
            usage_error(cmd, "%s %d conflicts with the --init checkpoint, which has %d; drop the flag", f->name, given,
                        sizes[i].saved);
    }
    const struct {
        const char *flag;
        bool removed;  // in the checkpoint's model
    } parts[] = {{"--no-layernorm", cfg->no_layernorm}, {"--no-mlp", cfg->no_mlp}, {"--no-residual", cfg->no_residual}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (command_flag(cmd, parts[i].flag)->seen && !parts[i].removed)
            usage_error(cmd, "%s conflicts with the --init checkpoint, whose model has that part; drop the flag",
                        parts[i].flag);
}

// check_optimizer_flags: names that exist, AdamW's flags only with AdamW,
// and --min-lr's default. Called once the architecture's defaults are set.
static void check_optimizer_flags(const Command *cmd, TrainOptions *opt) {
    if (opt->optimizer_name && strcmp(opt->optimizer_name, "sgd") != 0 && strcmp(opt->optimizer_name, "adamw") != 0)
        usage_error(cmd, "--optimizer '%s' is not one of: sgd, adamw", opt->optimizer_name);
    if (opt->schedule_name && strcmp(opt->schedule_name, "constant") != 0 && strcmp(opt->schedule_name, "cosine") != 0)
        usage_error(cmd, "--lr-schedule '%s' is not one of: constant, cosine", opt->schedule_name);
    const char *adamw_only[] = {"--beta1", "--beta2", "--weight-decay"};
    for (size_t i = 0; i < sizeof adamw_only / sizeof adamw_only[0]; i++)
        if (opt->optimizer_name && strcmp(opt->optimizer_name, "sgd") == 0 && command_flag(cmd, adamw_only[i])->seen)
            usage_error(cmd, "%s is for --optimizer adamw; drop it, or use adamw", adamw_only[i]);
    if (opt->min_lr < 0) opt->min_lr = opt->lr / 10.0f;
}

// ---- Resuming ---------------------------------------------------------------------

// The flags whose values make a run what it is: with --resume they come from
// the checkpoint, and giving one is an error rather than a silent change.
static const char *const RUN_FLAGS[] = {
    "--out", "--arch", "--layers", "--no-layernorm", "--no-mlp", "--no-residual", "--batch", "--context", "--embd", "--heads", "--dropout",
    "--lr", "--optimizer", "--beta1", "--beta2", "--weight-decay", "--warmup", "--lr-schedule", "--min-lr",
    "--grad-clip", "--val-fraction", "--eval-interval", "--eval-batches", "--init", "--order", "--seed",
    "--tokenizer", "--vocab-size",
};

// resume_options: with --resume DIR, lock DIR (claim_run_dir), read its
// checkpoint state and take the run's flags from it, as if they had been
// typed again. --steps (to train further), --save-every, --log-interval and
// --threads may change: they do not change the numbers. FILE may be left
// out: run.json knows the training file (or, in a run saved before it
// existed, the checkpoint).
static void resume_options(const Command *cmd, TrainOptions *opt, TrainRun *run) {
    for (size_t i = 0; i < sizeof RUN_FLAGS / sizeof RUN_FLAGS[0]; i++)
        if (command_flag(cmd, RUN_FLAGS[i])->seen)
            usage_error(cmd, "%s cannot be changed when resuming: the run's flags come from its checkpoint; drop it (only --steps, --save-every, --log-interval and --threads may be given)",
                        RUN_FLAGS[i]);
    struct stat dir_st;
    if (stat(opt->resume_dir, &dir_st) != 0 || !S_ISDIR(dir_st.st_mode))
        die(EXIT_RUNTIME, "--resume '%s' is not a directory; give the --out directory of an earlier run",
            opt->resume_dir);
    opt->out_dir = opt->resume_dir;
    claim_run_dir(cmd, run, opt);
    char *checkpoint = run->resume_checkpoint;
    snprintf(checkpoint, sizeof run->resume_checkpoint, "%s/model.safetensors", opt->resume_dir);
    TrainState *st = &run->state;
    Error err;
    if (!checkpoint_read_state(checkpoint, st, &run->start_step, &err)) die(EXIT_RUNTIME, "%s", err.msg);
    if (!opt->data_path) {
        if (!read_run_info(opt->resume_dir, run->data_from_run, sizeof run->data_from_run))
            snprintf(run->data_from_run, sizeof run->data_from_run, "%s", st->data_path);
        if (run->data_from_run[0] == '\0')
            usage_error(cmd, "the run in '%s' does not record its training file; give it: tinygpt train FILE --resume %s",
                        opt->resume_dir, opt->resume_dir);
        opt->data_path = run->data_from_run;
    }
    opt->init_path = checkpoint;  // the weights, vocabulary, architecture and sizes load as with --init
    opt->order = st->order;
    opt->seed = (long)st->seed;
    opt->batch = st->batch;
    opt->lr = st->lr;
    const OptimizerConfig *o = &st->optimizer;
    opt->optimizer_name = o->kind == OPT_ADAMW ? "adamw" : "sgd";
    opt->schedule_name = o->schedule == LR_COSINE ? "cosine" : "constant";
    opt->warmup = o->warmup_steps;
    opt->min_lr = o->min_lr;
    opt->beta1 = o->beta1;
    opt->beta2 = o->beta2;
    opt->weight_decay = o->weight_decay;
    opt->grad_clip = o->grad_clip;
    opt->val_fraction = st->val_fraction;
    opt->eval_interval = st->eval_interval;
    opt->eval_batches = st->eval_batches;
    if (!command_flag(cmd, "--steps")->seen) opt->steps = st->steps;
    if (!command_flag(cmd, "--save-every")->seen) opt->save_every = st->save_every;
    if (run->start_step >= opt->steps)
        usage_error(cmd, "the run in '%s' is already at step %ld of --steps %ld; give a larger --steps to train further",
                    opt->resume_dir, run->start_step, opt->steps);
}

// continue_from_state: after the data is loaded: check that it is the text
// the run was trained on, and restore the batch stream.
static void continue_from_state(TrainRun *run, const TrainOptions *opt) {
    const TrainState *st = &run->state;
    if (run->data.n_tokens != st->data_tokens || run->data_hash != st->data_hash)
        die(EXIT_RUNTIME, "'%s' is not the text this run was trained on (%zu tokens; the checkpoint's had %llu, with another fingerprint); give the original file, or start a new run from these weights with --init",
            opt->data_path, run->data.n_tokens, (unsigned long long)st->data_tokens);
    run->batch_rng.state = st->batch_rng;
    run->last_saved_step = run->start_step;
}

// rewrite_log_header: "path" as LOG_HEADER and then "rows" ("len" bytes). A
// log written before the val_bpb column existed gets today's header, so the
// rows a resumed run appends match it (the old rows leave the new column
// out, which a reader by column name takes as empty).
static bool rewrite_log_header(const char *path, const char *rows, size_t len, Error *err) {
    size_t header_len = strlen(LOG_HEADER);
    char *text = xmalloc(header_len + len);
    memcpy(text, LOG_HEADER, header_len);
    memcpy(text + header_len, rows, len);
    bool written = write_file_atomic(path, text, header_len + len, err);
    free(text);
    return written;
}

// reopen_log: log.csv, to append to after its rows for the steps before
// "start_step" ("*rows" of them). Rows from later steps (written after the
// checkpoint, before a crash) are cut off, since the resumed run writes
// those steps again. A missing log starts afresh with its header.
static FILE *reopen_log(const char *path, long start_step, long *rows, Error *err) {
    char *text;
    size_t len;
    *rows = 0;
    if (access(path, F_OK) != 0) {
        FILE *f = fopen_checked(path, "w", err);
        if (f) fputs(LOG_HEADER, f);  // checked with the first rows, at the first flush
        return f;
    }
    if (!read_file(path, &text, &len, err)) return NULL;
    // Keep the header line, then every row whose step is below start_step.
    size_t keep = 0;
    long lines = 0;  // kept, the header among them
    for (size_t line = 0; line < len; lines++) {
        const char *end = memchr(text + line, '\n', len - line);
        if (!end) break;  // a row cut short by a crash: drop it
        if (line > 0 && strtol(text + line, NULL, 10) >= start_step) break;
        line = keep = (size_t)(end - text) + 1;
    }
    *rows = lines > 0 ? lines - 1 : 0;
    const char *header_end = memchr(text, '\n', len);
    size_t header_len = header_end ? (size_t)(header_end - text) + 1 : 0;
    if (keep > 0 && (header_len != strlen(LOG_HEADER) || memcmp(text, LOG_HEADER, header_len) != 0)) {
        bool written = rewrite_log_header(path, text + header_len, keep - header_len, err);
        free(text);
        return written ? fopen_checked(path, "a", err) : NULL;
    }
    free(text);
    if (truncate(path, (off_t)keep) != 0) {
        error_set(err, "cannot cut '%s' back to step %ld: %s", path, start_step, strerror(errno));
        return NULL;
    }
    return fopen_checked(path, "a", err);
}

// ---- Writing the log ---------------------------------------------------------------
//
// log.csv is written through stdio's buffer, so a full disk shows up at
// whichever call happens to empty the buffer: every fprintf and fflush is
// checked, and ferror catches a failure an earlier call left behind. A
// failure stops the run (run->log_failed, run->fault) after a checkpoint:
// training on with a log that silently stopped mid-row would leave a run
// whose history no longer matches its weights.

// log_error: false, with run->fault naming the log and the reason in errno.
static bool log_error(TrainRun *run) {
    run->log_failed = true;
    return error_set(&run->fault, "cannot write '%s': %s", run->log_path, strerror(errno));
}

// write_log_row: step "step"'s row (README, "train"); val_loss and val_bpb
// NAN when not evaluated.
static bool write_log_row(TrainRun *run, long step, float loss, float val_loss, double lr, double seconds,
                          double tokens_per_s, double grad_norm, double val_bpb) {
    char val[32] = "", bpb[32] = "";
    if (!isnan(val_loss)) snprintf(val, sizeof val, "%.6f", (double)val_loss);
    if (!isnan(val_bpb)) snprintf(bpb, sizeof bpb, "%.6f", val_bpb);
    if (fprintf(run->log, "%ld,%.6f,%s,%.9g,%.3f,%.0f,%.9g,%s\n", step, (double)loss, val, lr, 1e3 * seconds,
                tokens_per_s, grad_norm, bpb) < 0 || ferror(run->log))
        return log_error(run);
    return true;
}

static bool flush_log(TrainRun *run) {
    if (fflush(run->log) != 0 || ferror(run->log)) return log_error(run);
    return true;
}

// save_checkpoint: the weights after "done" steps, with the run's state, to
// <out>/model.safetensors, and run.json beside it. The log is flushed
// first, so it always has a row for every step the checkpoint has seen; if
// that fails, the checkpoint is still saved, and run->log_failed stops the
// run.
static void save_checkpoint(TrainRun *run, const TrainOptions *opt, long done) {
    TrainState st;
    memset(&st, 0, sizeof st);
    st.data_tokens = run->data.n_tokens;
    st.data_hash = run->data_hash;
    st.seed = (uint64_t)opt->seed;
    st.batch_rng = run->batch_rng.state;
    st.steps = opt->steps;
    st.batch = opt->batch;
    st.lr = opt->lr;
    st.val_fraction = opt->val_fraction;
    st.eval_interval = opt->eval_interval;
    st.eval_batches = opt->eval_batches;
    st.save_every = opt->save_every;
    snprintf(st.order, sizeof st.order, "%s", opt->order);
    st.optimizer = run->optimizer.cfg;

    Error err;
    // run.json first: it belongs to no step. Then AdamW's moments, in their
    // own file; then the model, which names the step. A crash between the
    // two leaves files of different steps, which --resume refuses
    // (load_optimizer_state) rather than mix.
    if (!run->run_info_saved && !save_run_info(run, &err))
        die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
    run->run_info_saved = true;
    if (run->optimizer.cfg.kind == OPT_ADAMW &&
        !optimizer_state_save(&run->optimizer, &run->model, done, run->optimizer_path, &err))
        die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
    if (!run->log_failed) flush_log(run);
    if (!checkpoint_save_with_state(&run->model, &run->tok, done, &st, run->checkpoint_path, &err)) {
        if (run->last_saved_step >= 0)
            die(EXIT_RUNTIME, "%s; training stopped after %ld steps, and the last good checkpoint (after %ld steps) is still '%s'",
                err.msg, done, run->last_saved_step, run->checkpoint_path);
        die(EXIT_RUNTIME, "%s; training stopped after %ld steps", err.msg, done);
    }
    run->last_saved_step = done;
}

// ---- Numerical faults -------------------------------------------------------------

// numerical_fault: false, with run->fault saying that training stops at
// "step" because "what" (the loss, a gradient, a weight) is not finite.
// Nothing is saved: those weights are useless, and the last good checkpoint
// stays as it was.
static bool numerical_fault(TrainRun *run, const TrainOptions *opt, long step, const char *what) {
    char kept[4200];
    if (run->last_saved_step >= 0)
        snprintf(kept, sizeof kept, "the last good checkpoint (saved after %ld steps) is kept: '%s'", run->last_saved_step,
                 run->checkpoint_path);
    else snprintf(kept, sizeof kept, "no checkpoint was saved before it (see --save-every)");
    return error_set(&run->fault, "training diverged at step %ld: %s; nothing was saved, and %s; try a lower --lr (it is %g)",
                     step, what, kept, (double)opt->lr);
}

// check_loss / check_tensors: after each part of step "step", false (see
// numerical_fault) if a value has become NaN or infinite: the loss (then name
// the first activation that broke), the gradients, the weights after the update.
static bool check_loss(TrainRun *run, const TrainOptions *opt, long step, float loss) {
    if (isfinite(loss)) return true;
    char what[160];
    size_t element;
    int t = model_find_nonfinite_act(&run->model, &element);
    if (t >= 0)
        snprintf(what, sizeof what, "the loss is %s, and activation '%s' first holds a non-finite value (element %zu)",
                 isnan(loss) ? "NaN" : "infinite", run->model.act_table.specs[t].name, element);
    else snprintf(what, sizeof what, "the loss is %s", isnan(loss) ? "NaN" : "infinite");
    // The first step's loss comes before any update, so --lr has done
    // nothing yet: the weights the run started from (an --init or --resume
    // checkpoint, which passed the loader's checks) are what overflows.
    if (step == run->start_step && opt->init_path)
        return error_set(&run->fault, "training cannot start: at step %ld, before any update, %s, so the weights of '%s' overflow float arithmetic (--lr is not the cause); nothing was saved: start from another checkpoint",
                         step, what, opt->init_path);
    return numerical_fault(run, opt, step, what);
}

static bool check_tensors(TrainRun *run, const TrainOptions *opt, long step, const float *memory, const char *kind) {
    size_t element;
    // The weights are also held within MODEL_MAX_WEIGHT, as the checkpoint
    // loader requires: a run never saves a file it could not load again.
    bool weights = memory == run->model.params_memory;
    int t = weights ? model_find_weight_beyond(&run->model, &element) : model_find_nonfinite(&run->model, memory, &element);
    if (t < 0) return true;
    char what[160];
    const TensorSpec *spec = &run->model.param_table.specs[t];
    float value = memory[spec->offset + element];
    if (isfinite(value))
        snprintf(what, sizeof what, "the %s of '%s' holds %g at element %zu, beyond the %g a weight may have", kind,
                 spec->name, (double)value, element, (double)MODEL_MAX_WEIGHT);
    else snprintf(what, sizeof what, "the %s of '%s' holds %s at element %zu", kind, spec->name,
                  isnan(value) ? "NaN" : "an infinity", element);
    return numerical_fault(run, opt, step, what);
}

// build_model: run->model for "cfg", with gradients, for batches of --batch
// rows; a usage error if the sizes are invalid or do not fit in memory.
static void build_model(TrainRun *run, const TrainOptions *opt, const Command *cmd, const ModelConfig *cfg) {
    Error err;
    if (!model_check_config(cfg, &err)) usage_error(cmd, "%s", err.msg);
    if (!model_check_memory(cfg, opt->batch, true, &err)) usage_error(cmd, "%s", err.msg);
    model_init(&run->model, cfg, opt->batch, true);
}

// optimizer_config: the flags as the optimizer takes them. The cosine
// decays over the whole run (--steps, also after a resume), as nanoGPT's
// lr_decay_iters = max_iters.
static OptimizerConfig optimizer_config(const TrainOptions *opt) {
    return (OptimizerConfig){.kind = strcmp(opt->optimizer_name, "adamw") == 0 ? OPT_ADAMW : OPT_SGD,
                             .lr = opt->lr,
                             .min_lr = opt->min_lr,
                             .beta1 = opt->beta1,
                             .beta2 = opt->beta2,
                             .weight_decay = opt->weight_decay,
                             .grad_clip = opt->grad_clip,
                             .schedule = strcmp(opt->schedule_name, "cosine") == 0 ? LR_COSINE : LR_CONSTANT,
                             .warmup_steps = opt->warmup,
                             .decay_steps = opt->steps};
}

// load_optimizer_state: with --resume of an AdamW run, its moments, which
// must belong to the same step as the weights.
static void load_optimizer_state(TrainRun *run) {
    Error err;
    long saved_step;
    if (!optimizer_state_load(&run->optimizer, &run->model, run->optimizer_path, &saved_step, &err))
        die(EXIT_RUNTIME, "%s", err.msg);
    if (saved_step != run->start_step)
        die(EXIT_RUNTIME, "'%s' holds AdamW's state after step %ld but '%s' holds the weights after step %ld; they must come from the same save, so this run cannot continue exactly: start a new run from the weights with --init",
            run->optimizer_path, saved_step, run->checkpoint_path, run->start_step);
}

// Build the model, tokenizer and data: from a checkpoint (--init, or
// --resume's) or fresh. A checkpoint's architecture decides the defaults of
// the flags in ARCH_DEFAULTS, and --batch decides the size of the model's
// activations, so the file is loaded first for one row, then the model is
// built for --batch rows and given its weights.
static void setup_run(TrainRun *run, TrainOptions *opt, const Command *cmd) {
    Error err;
    if (opt->init_path) {
        Model saved;
        long saved_step;
        if (!checkpoint_load(opt->init_path, &saved, &run->tok, 1, false, &saved_step, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
        check_init_conflicts(cmd, &saved.config, &run->tok);
        if (!opt->resume_dir) arch_defaults(cmd, saved.config.arch);  // resume_options set them all
        check_optimizer_flags(cmd, opt);
        ModelConfig cfg = saved.config;
        // Dropout is not a size: the flag, when given, overrides the file's.
        if (command_flag(cmd, "--dropout")->seen) cfg.dropout = opt->dropout;
        build_model(run, opt, cmd, &cfg);
        memcpy(run->model.params_memory, saved.params_memory, saved.param_table.total * sizeof(float));
        model_free(&saved);
        opt->context = cfg.block_size;
        if (!dataset_load(&run->data, &run->tok, NULL, opt->data_path, opt->val_fraction, opt->context, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
    } else {
        arch_defaults(cmd, opt->arch);
        check_optimizer_flags(cmd, opt);
        TokenizerSpec spec = {strcmp(opt->tokenizer_name, "bpe") == 0 ? TOKENIZER_BPE : TOKENIZER_CHAR,
                              opt->vocab_size};
        if (!dataset_load(&run->data, &run->tok, &spec, opt->data_path, opt->val_fraction, opt->context, &err))
            die(EXIT_RUNTIME, "%s", err.msg);
        ModelConfig cfg = {.vocab_size = run->tok.vocab_size,
                           .block_size = opt->context,
                           .n_embd = opt->embd,
                           .n_head = opt->heads,
                           .dropout = opt->dropout,
                           .arch = opt->arch,
                           .n_layer = opt->arch == ARCH_GPT ? opt->layers : 1,
                           .no_layernorm = opt->no_layernorm,
                           .no_mlp = opt->no_mlp,
                           .no_residual = opt->no_residual};
        build_model(run, opt, cmd, &cfg);
        Rng init_rng;
        rng_init(&init_rng, (uint64_t)opt->seed);
        model_init_weights(&run->model, &init_rng);
    }
    OptimizerConfig ocfg = optimizer_config(opt);
    optimizer_init(&run->optimizer, &ocfg, &run->model);
    size_t positions = (size_t)opt->batch * opt->context;
    run->inputs = xmalloc(positions * sizeof(int));
    run->targets = xmalloc(positions * sizeof(int));
    run->data_hash = dataset_hash(&run->data);
    rng_init(&run->batch_rng, (uint64_t)opt->seed ^ 0x5851F42D4C957F2Dull);  // a stream apart from init's
    run->last_saved_step = -1;
    if (opt->resume_dir) continue_from_state(run, opt);
    if (opt->log_interval == 0) opt->log_interval = opt->eval_interval;
    absolute_utf8_path(opt->data_path, run->data_absolute, sizeof run->data_absolute);

    // Everything has loaded: the first write into DIR (a resumed run has
    // claimed it already, before reading its checkpoint).
    if (!opt->resume_dir) claim_run_dir(cmd, run, opt);
    snprintf(run->log_path, sizeof run->log_path, "%s/log.csv", opt->out_dir);
    snprintf(run->checkpoint_path, sizeof run->checkpoint_path, "%s/model.safetensors", opt->out_dir);
    snprintf(run->optimizer_path, sizeof run->optimizer_path, "%s/optimizer.safetensors", opt->out_dir);
    snprintf(run->run_info_path, sizeof run->run_info_path, "%s/run.json", opt->out_dir);
    if (opt->resume_dir && ocfg.kind == OPT_ADAMW) load_optimizer_state(run);
    if (opt->resume_dir) {
        run->log = reopen_log(run->log_path, run->start_step, &run->log_rows, &err);
    } else {
        run->log = fopen_checked(run->log_path, "w", &err);
        if (run->log) fputs(LOG_HEADER, run->log);  // checked with the first rows, at the first flush
    }
    if (!run->log) die(EXIT_RUNTIME, "%s", err.msg);
}

// free_run: everything setup_run built. The log's last rows were flushed,
// and checked, by the last save, so its fclose has nothing left to fail on.
// The lock is released as the process ends (closing it here would let
// another train in while this one still prints its last words).
static void free_run(TrainRun *run) {
    if (run->log) fclose(run->log);
    optimizer_free(&run->optimizer);
    free(run->targets);
    free(run->inputs);
    model_free(&run->model);
    dataset_free(&run->data);
    tokenizer_free(&run->tok);
}

// train_loop: steps from run->start_step until opt->steps, or until a signal,
// --stop-after or a failed write to the log (run->log_failed) stops it;
// returns the number of steps done, or -1 (with run->fault) when a value
// became NaN or infinite. A plain progress line at every evaluation, every
// --log-interval steps and at the last step; loss.png redrawn with each, and
// once more at the end if steps were done since.
static long train_loop(TrainRun *run, const TrainOptions *opt) {
    const ModelConfig *cfg = &run->model.config;
    const int B = opt->batch, T = cfg->block_size;
    const bool sequential = strcmp(opt->order, "sequential") == 0;
    const bool has_val = run->data.n_tokens > run->data.n_train;

    const Model *m = &run->model;
    fprintf(stderr, "model: arch=%s layers=%d%s%s%s V=%d T=%d C=%d heads=%d dropout=%g, %zu parameters; data: %zu train + %zu val tokens (%s tokenizer)\n",
            arch_name(cfg->arch), m->n_layer, cfg->no_layernorm ? " (no layernorm)" : "", cfg->no_mlp ? " (no mlp)" : "",
            cfg->no_residual ? " (no residual)" : "", cfg->vocab_size, T, cfg->n_embd, cfg->n_head,
            (double)cfg->dropout, m->param_table.total, run->data.n_train, run->data.n_tokens - run->data.n_train,
            tokenizer_kind_name(run->tok.kind));
    // Counted in floats (an int, of the model's inputs and targets, is as big).
    double mb = sizeof(float) / 1e6;
    double params = (double)m->param_table.total, acts = (double)m->act_table.total;
    double grad_acts = (double)m->grad_act_table.total;
    double scratch = (double)(m->weight_scratch_size + 2 * (size_t)m->max_batch * T);
    double moments = run->optimizer.m ? 2.0 * params : 0.0;  // AdamW's m and v
    fprintf(stderr, "memory: parameters %.1f MB + gradients %.1f MB + optimizer %.1f MB + activations %.1f MB + activation gradients %.1f MB + scratch %.1f MB = %.1f MB\n",
            params * mb, params * mb, moments * mb, acts * mb, grad_acts * mb, scratch * mb,
            (2.0 * params + moments + acts + grad_acts + scratch) * mb);
    const OptimizerConfig *o = &run->optimizer.cfg;
    fprintf(stderr, "optimizer: %s, lr %g", o->kind == OPT_ADAMW ? "adamw" : "sgd", o->lr);
    if (o->warmup_steps > 0) fprintf(stderr, " after %ld warmup steps", o->warmup_steps);
    if (o->schedule == LR_COSINE) fprintf(stderr, ", cosine to %g at step %ld", o->min_lr, o->decay_steps);
    if (o->kind == OPT_ADAMW)
        fprintf(stderr, ", betas %g %g, weight decay %g", o->beta1, o->beta2, o->weight_decay);
    fprintf(stderr, o->grad_clip > 0 ? ", gradients clipped at norm %g\n" : ", no clipping\n", o->grad_clip);
    double interval_loss = 0.0, interval_seconds = 0.0;
    int interval_steps = 0;
    Watch watch;  // the live status line on a terminal, and loss.png (watch.h)
    watch_init(&watch, run->start_step, opt->steps, (double)B * T, opt->out_dir);
    if (run->log_rows > 0) watch_load_log(&watch, run->log_path);  // a resumed run's plot shows its whole history
    bool plotted = false;      // loss.png shows every step done so far
    long result = opt->steps;  // what the loop returns unless it stops early
    for (long step = run->start_step; step < opt->steps; step++) {
        bool evaluate = has_val && (step % opt->eval_interval == 0 || step == opt->steps - 1);
        float val_loss = evaluate ? validation_loss(run, B, T, opt->eval_batches) : NAN;

        if (sequential) batch_sequential(dataset_train(&run->data), step, B, T, run->inputs, run->targets);
        else batch_random(dataset_train(&run->data), B, T, &run->batch_rng, run->inputs, run->targets);

        double start = now_seconds();
        const double lr = optimizer_lr(&run->optimizer.cfg, step);
        uint64_t dropout_key = mix64(mix64((uint64_t)opt->seed) + (uint64_t)step);
        float loss = model_forward(&run->model, run->inputs, run->targets, B, T, true, dropout_key);
        if (!check_loss(run, opt, step, loss)) {
            result = -1;
            break;
        }
        model_zero_grad(&run->model);
        model_backward(&run->model);
        if (!check_tensors(run, opt, step, run->model.grads_memory, "gradient")) {
            result = -1;
            break;
        }
        const double grad_norm = optimizer_clip_grads(&run->model, run->optimizer.cfg.grad_clip);
        optimizer_step(&run->optimizer, &run->model, lr);
        if (!check_tensors(run, opt, step, run->model.params_memory, "weight")) {
            result = -1;
            break;
        }
        double seconds = now_seconds() - start;

        double tokens_per_s = (double)B * T / seconds;
        long done = step + 1;
        double val_bpb = bits_per_byte(val_loss, run->data.n_tokens - run->data.n_train, run->data.val_bytes);
        watch_step(&watch, step, loss, val_loss, seconds);
        plotted = false;
        // The step is done, its row is not on disk: stop with a checkpoint.
        if (!write_log_row(run, step, loss, val_loss, lr, seconds, tokens_per_s, grad_norm, val_bpb)) {
            result = done;
            break;
        }

        interval_loss += loss;
        interval_seconds += seconds;
        interval_steps++;
        if (evaluate || step % opt->log_interval == 0 || step == opt->steps - 1) {
            watch_clear_line(&watch);
            printf("step %6ld/%ld | train loss %.4f", step, opt->steps, interval_loss / interval_steps);
            if (evaluate) printf(" | val loss %.4f (%.3f bits/byte)", (double)val_loss, val_bpb);
            printf(" | %.2f ms/step | %.0f tokens/s\n", 1e3 * interval_seconds / interval_steps,
                   (double)B * T * interval_steps / interval_seconds);
            fflush(stdout);
            if (!flush_log(run)) {
                result = done;
                break;
            }
            watch_plot(&watch);
            plotted = true;
            interval_loss = interval_seconds = 0.0;
            interval_steps = 0;
        }

        if (stop_signal || done == opt->stop_after) {
            result = done;
            break;
        }
        if (opt->save_every > 0 && done % opt->save_every == 0 && done < opt->steps) {
            save_checkpoint(run, opt, done);
            if (run->log_failed) {
                result = done;
                break;
            }
        }
    }
    // The picture of the whole run, also of --steps 0 (axes, no curve yet)
    // and of a run stopped between two progress lines. Not after the log
    // failed: the disk is likely full, and the checkpoint matters more.
    if (!plotted && !run->log_failed) watch_plot(&watch);
    watch_free(&watch);
    return result;
}

int cmd_train(int argc, char **argv) {
    // The defaults; steps, batch, dropout, lr and eval_interval depend on the
    // architecture and are set after parsing (ARCH_DEFAULTS).
    TrainOptions opt = {
        .out_dir = "out",        // where model.safetensors and log.csv go
        .init_path = NULL,       // start from these weights instead of random ones
        .order = "random",       // batch order: random windows, or sequential (replayable)
        .arch_name = "gpt",      // gpt: L blocks on a residual stream; card: one attention block
        .tokenizer_name = "char",  // char: one token per character; bpe: learned pieces
        .vocab_size = 512,       // bpe: 256 bytes + 256 merges
        .layers = 4,             // L: blocks (gpt)
        .context = 64,           // T: tokens per window
        .embd = 128,             // C: channels
        .heads = 4,              // NH: attention heads
        .val_fraction = 0.1f,    // last 10% of the text is validation
        .eval_batches = 20,      // validation batches per evaluation
        .threads = 0,            // 0 = OpenMP's default
        .seed = 1337,
        .save_every = 1000,      // a checkpoint every 1000 steps
        .beta1 = 0.9,            // AdamW: nanoGPT's betas for small models
        .beta2 = 0.99,
        .weight_decay = 0.1,     // AdamW: nanoGPT's
        .min_lr = -1.0,          // not given: --lr / 10 (set after parsing)
    };
    Flag flags[] = {
        {"--out", FLAG_STRING, &opt.out_dir, "DIR", "output directory for model.safetensors, log.csv and loss.png; one that holds a run is refused (see --resume, --force)", 0, 0, false, NULL},
        {"--force", FLAG_SWITCH, &opt.force, NULL, "start over in an --out that holds a run: its files are deleted first", 0, 0, false, NULL},
        {"--arch", FLAG_STRING, &opt.arch_name, "ARCH", "gpt (blocks of LayerNorm, attention and MLP on a residual stream) or card (one attention block)", 0, 0, false, NULL},
        {"--layers", FLAG_INT, &opt.layers, "L", "transformer blocks (gpt only: card has one)", 1, 1 << 16, false, NULL},
        {"--tokenizer", FLAG_STRING, &opt.tokenizer_name, "NAME", "char (one token per character) or bpe (byte pairs merged into pieces, learned from the training split)", 0, 0, false, NULL},
        {"--vocab-size", FLAG_INT, &opt.vocab_size, "N", "tokens of the bpe tokenizer: the 256 bytes + N - 256 merges", BPE_BYTES + 1, BPE_MAX_VOCAB, false, NULL},
        {"--no-layernorm", FLAG_SWITCH, &opt.no_layernorm, NULL, "gpt without its LayerNorms (ln1, ln2, ln_f)", 0, 0, false, NULL},
        {"--no-mlp", FLAG_SWITCH, &opt.no_mlp, NULL, "gpt without the MLP in each block", 0, 0, false, NULL},
        {"--no-residual", FLAG_SWITCH, &opt.no_residual, NULL, "gpt without the residual stream: each branch replaces its input", 0, 0, false, NULL},
        {"--steps", FLAG_LONG, &opt.steps, "N", "number of training steps (0 saves the initial model)", 0, 1e12, false, NULL},
        {"--batch", FLAG_INT, &opt.batch, "B", "windows per step", 1, 1 << 20, false, NULL},
        {"--context", FLAG_INT, &opt.context, "T", "tokens per window (the model's block size)", 1, 1 << 16, false, NULL},
        {"--embd", FLAG_INT, &opt.embd, "C", "embedding channels", 1, 1 << 16, false, NULL},
        {"--heads", FLAG_INT, &opt.heads, "NH", "attention heads; must divide --embd", 1, 1 << 16, false, NULL},
        {"--dropout", FLAG_FLOAT, &opt.dropout, "P", "dropout on attention weights (gpt: and on the embeddings and each branch), in [0, 1)", 0, 0.999f, false, NULL},
        {"--optimizer", FLAG_STRING, &opt.optimizer_name, "NAME", "sgd (w -= lr * grad) or adamw (torch.optim.AdamW)", 0, 0, false, NULL},
        {"--lr", FLAG_FLOAT, &opt.lr, "LR", "learning rate (the peak, after warmup)", 0, 1e6, false, NULL},
        {"--beta1", FLAG_DOUBLE, &opt.beta1, "B1", "AdamW's averaging rate of the gradient", 0, 0.999999, false, NULL},
        {"--beta2", FLAG_DOUBLE, &opt.beta2, "B2", "AdamW's averaging rate of the squared gradient", 0, 0.999999, false, NULL},
        {"--weight-decay", FLAG_DOUBLE, &opt.weight_decay, "WD", "AdamW's decoupled weight decay, on matrices and embeddings only", 0, 1e6, false, NULL},
        {"--warmup", FLAG_LONG, &opt.warmup, "N", "steps of linear warmup to --lr", 0, 1e12, false, NULL},
        {"--lr-schedule", FLAG_STRING, &opt.schedule_name, "NAME", "constant, or cosine: from --lr down to --min-lr at the last step", 0, 0, false, NULL},
        {"--min-lr", FLAG_DOUBLE, &opt.min_lr, "X", "where the cosine schedule ends", 0, 1e6, false, "lr/10"},
        {"--grad-clip", FLAG_DOUBLE, &opt.grad_clip, "X", "clip the global L2 norm of the gradients to X; 0 = off", 0, 1e9, false, NULL},
        {"--val-fraction", FLAG_FLOAT, &opt.val_fraction, "F", "fraction of the text, at the end, for validation", 0, 0.9, false, NULL},
        {"--eval-interval", FLAG_INT, &opt.eval_interval, "N", "steps between validation losses", 1, 1e9, false, NULL},
        {"--eval-batches", FLAG_INT, &opt.eval_batches, "N", "batches per validation loss", 1, 1e6, false, NULL},
        {"--init", FLAG_STRING, &opt.init_path, "MODEL", "start from this .safetensors (architecture, sizes and vocabulary from it)", 0, 0, false, NULL},
        {"--order", FLAG_STRING, &opt.order, "ORDER", "random, or sequential: batch s row b starts at ((s*B+b)*T) mod (n_train-T)", 0, 0, false, NULL},
        {"--seed", FLAG_LONG, &opt.seed, "S", "random seed (weights, batches, dropout)", 0, 9.2e18, false, NULL},
        {"--threads", FLAG_INT, &opt.threads, "N", "OpenMP threads, 0 = default", 0, 1024, false, NULL},
        {"--resume", FLAG_STRING, &opt.resume_dir, "DIR", "continue the run saved in DIR (FILE may be left out)", 0, 0, false, NULL},
        {"--save-every", FLAG_LONG, &opt.save_every, "N", "save a checkpoint every N steps; 0 = only at the end", 0, 1e12, false, NULL},
        {"--log-interval", FLAG_LONG, &opt.log_interval, "N", "print a progress line every N steps (and at every evaluation and the last step)", 1, 1e12, false, "--eval-interval"},
        {"--stop-after", FLAG_LONG, &opt.stop_after, "N", NULL, 1, 1e12, false, NULL},  // for tests: as if interrupted (no --help line)
    };
    Command cmd = {"train", "[FILE]", "Train a GPT (--arch gpt) or the one-block attention model (--arch card) on a UTF-8 text file; writes DIR/model.safetensors, DIR/log.csv, DIR/loss.png and DIR/run.json (and DIR/optimizer.safetensors with AdamW).",
                   "tinygpt train data/moby-dick.txt --out runs/moby --layers 2 --steps 1000",
                   flags, (int)(sizeof flags / sizeof flags[0])};
    char default_texts[NUM_ARCH_DEFAULTS][48];
    arch_default_texts(&cmd, default_texts);
    opt.data_path = parse_flags(&cmd, argc, argv);
    check_arch_flags(&cmd, &opt);
    check_tokenizer_flags(&cmd, &opt);
    TrainRun run;
    memset(&run, 0, sizeof run);
    run.lock_fd = -1;
    if (opt.force && opt.resume_dir)
        usage_error(&cmd, "--force starts a new run over the one in --out, and --resume continues one; drop one of them");
    if (opt.resume_dir) resume_options(&cmd, &opt, &run);
    else if (!opt.data_path) usage_error(&cmd, "missing FILE");
    if (strcmp(opt.order, "random") != 0 && strcmp(opt.order, "sequential") != 0)
        usage_error(&cmd, "--order '%s' is not one of: random, sequential", opt.order);
    if (!opt.resume_dir) check_out_dir(&cmd, &run, &opt);
    if (opt.threads > 0) omp_set_num_threads(opt.threads);

    setup_run(&run, &opt, &cmd);
    catch_stop_signals();
    long done = train_loop(&run, &opt);
    if (done < 0) {
        fprintf(stderr, "tinygpt: %s\n", run.fault.msg);
        free_run(&run);
        return EXIT_RUNTIME;
    }

    if (run.last_saved_step != done) save_checkpoint(&run, &opt, done);
    if (run.log_failed) {
        fprintf(stderr, "tinygpt: %s; training stopped after %ld steps and saved '%s' (the log may lack its last rows); make room, then continue with: tinygpt train --resume %s\n",
                run.fault.msg, done, run.checkpoint_path, opt.out_dir);
        free_run(&run);
        return EXIT_RUNTIME;
    }
    if (done < opt.steps)
        fprintf(stderr, "stopped after %ld of %ld steps; saved %s; continue with: tinygpt train --resume %s\n", done,
                opt.steps, run.checkpoint_path, opt.out_dir);
    else fprintf(stderr, "saved %s\n", run.checkpoint_path);
    free_run(&run);
    return stop_signal ? 128 + stop_signal : 0;
}
