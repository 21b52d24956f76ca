// settings.h: every setting of a training run, declared once.
//
// Reading order: file 33, after args.h, run_dir.h and csv_log.h, before
// train_setup.c, which sets a run up from it. A run is what `train` is told: the
// text, the model's sizes, the optimizer, the schedule, how often to
// evaluate and save. Each setting is one row of the table in settings_table.c
// (TRAIN_SETTINGS): its name, type and flag, its help line, its default for
// gpt and for card, its range or its choices, the architecture or
// tokenizer it needs, whether --resume may change it, and the key that
// keeps it in a checkpoint or in run.json. Everything train does with its
// settings is a loop over that table: the flags and --help (args.h), the
// defaults, the checks, --init's and --resume's rules, the checkpoint's
// metadata and run.json; `tinygpt gradcheck` takes the model's rows as its
// flags the same way.
//
// Adding a setting is one row there, a field in TrainSettings below, and
// the code that uses it (docs/contributing.md, "Adding a setting", has an
// example).
#ifndef TINYGPT_SETTINGS_H
#define TINYGPT_SETTINGS_H

#include <stdbool.h>

#include "args.h"
#include "data.h"
#include "model.h"
#include "optimizer.h"
#include "safetensors.h"
#include "tokenizer.h"

// How the threads share a training step (model.h, "Slices"; docs/model.md,
// "Threads"): SPLIT_ROWS, each thread the whole step on its own rows of the
// batch (where their count divides the rows), whose sums are ordered by
// thread; SPLIT_LAYERS, every layer shares its work among them, and every
// sum keeps one order whatever their count. THREAD_SPLIT_NAMES: their
// names, indexed by ThreadSplit, NULL-terminated.
typedef enum { SPLIT_ROWS, SPLIT_LAYERS } ThreadSplit;
extern const char *const THREAD_SPLIT_NAMES[];

// The value of every setting of one run, as the table fills it in. Choices
// are held as the index of the name in their list, which is the value of
// the enum they name (ARCH_NAMES[ARCH_GPT] is "gpt").
typedef struct {
    // Where the run reads and writes.
    const char *data_path;   // FILE: the training text ("-": standard input)
    long max_bytes;          // --max-bytes: the most text read from standard input
    const char *out_dir;     // --out
    bool force;              // --force: replace the run already in --out
    const char *init_path;   // --init: start from these weights
    const char *resume_dir;  // --resume: continue the run saved there
    // The model.
    Arch arch;
    TokenizerKind tokenizer;
    int vocab_size;          // bpe: tokens to learn
    const char *tokenizer_dir;  // gpt2: the GPT-2 directory whose vocab.json and merges.txt to read
    bool vocab_size_at_most; // ... or fewer, if the text runs out of pairs seen twice (gpt's default)
    int layers, context, embd, heads;
    bool no_layernorm, no_mlp, no_residual;  // a gpt without these parts (make ladder)
    NormKind norm;           // the modern recipe: LayerNorm or RMSNorm
    MlpKind mlp;             // ... the MLP's activation: GELU or ReLU^2
    bool untied_head;        // ... a head.weight of its own, not tok_emb
    PosKind pos;             // ... learned positions or rotary ones
    bool qk_norm;            // ... each head's q and k RMS-normalised
    double dropout;
    // The optimizer and its schedule.
    OptimizerKind optimizer;
    double lr, beta1, beta2, weight_decay;
    double muon_lr;          // --optimizer muon: the blocks' matrices' peak learning rate
    long warmup;
    LrSchedule lr_schedule;
    double min_lr, grad_clip;
    // The data and the loop.
    long steps;              // STEPS_NO_LIMIT: as many as --time allows
    double time;             // --time: seconds of training, the schedule's length; 0 = none
    int batch;               // windows per micro-batch (split over the ranks under mpirun)
    int grad_accum;          // --grad-accum: micro-batches per optimizer step
    double val_fraction;
    int eval_interval, eval_batches;
    BatchOrder order;
    long seed;
    int threads;
    ThreadSplit thread_split;  // --thread-split
    double peak;             // --peak: the FMA peak in GFLOP/s the speed is a share of; 0 = measure it
    long save_every, log_interval;
    int keep;                // checkpoints kept in --out
    int patience;            // evaluations without a better validation loss before train warns
    long sample_every;       // steps between one-line samples on stdout and in log.csv; 0 = none
    bool restart_log;        // --resume with a log.csv missing or cut short: start it afresh
    long stop_after;         // hidden, for tests: stop as if interrupted after this many steps
} TrainSettings;

// --steps when only --time ends the run: more steps than any run takes
// (the flag's own limit).
#define STEPS_NO_LIMIT 1000000000000L

// Where a setting is kept after the run, so that --init, --resume and
// anyone reading the files find it.
typedef enum {
    KEPT_NOWHERE,   // in this process only (--threads, --out, ...)
    KEPT_IN_MODEL,  // in the model's own metadata (model/checkpoint.c writes those keys): it shapes the weights
    KEPT_IN_RUN,    // in the checkpoint's metadata, beside the model's, written from this table
    KEPT_IN_RUN_JSON,  // in the run directory's run.json
} Kept;

// What --resume does with a setting.
typedef enum {
    RESUME_KEEPS,   // the checkpoint's value, always; giving the flag is an error
    RESUME_MAY_CHANGE,  // the flag may be given again (--steps to train further); else the kept value, if any
} ResumeRule;

typedef enum { SETTING_INT, SETTING_LONG, SETTING_DOUBLE, SETTING_CHOICE, SETTING_SWITCH, SETTING_PATH } SettingType;

// One row of the table.
typedef struct {
    const char *name;        // the field's name, for messages and tests: "lr"
    size_t offset;           // offsetof(TrainSettings, <name>)
    SettingType type;
    const char *flag;        // "--lr"; "FILE" for the positional argument
    const char *metavar;     // "LR"
    const char *help;        // one line for --help; NULL hides the flag (a hook for tests)
    // A switch on by default has a second flag that turns it off
    // (--tied-head for --untied-head), with its own help line.
    const char *off_flag, *off_help;
    // The default, as it would be typed, for each architecture. NULL: no
    // default (a path not given), or, for card, not a card setting (see
    // needs). derived: computed from other settings when not given
    // (settings_finish, settings.c), with this text in --help instead.
    // gpt2 takes gpt's, or card's for the parts of a gpt (see apply_default),
    // but gpt2_default where GPT-2 differs from both (GELU's tanh form).
    const char *gpt_default, *card_default, *gpt2_default;
    const char *derived;
    void (*derive)(TrainSettings *s);
    double min, max;                 // inclusive range of a number (both 0: any)
    const char *const *choices;      // a choice's names, NULL-terminated, in enum order
    // The setting means something only when another setting (named here)
    // has the value "needs_value" (or "needs_value_or", when set): --layers
    // needs arch gpt; --beta1 optimizer adamw or muon. Giving it otherwise is
    // an error.
    const char *needs, *needs_value, *needs_value_or;
    const char *needs_why;           // said in that error: "card has exactly one block"
    ResumeRule resume;
    bool init_may_change;            // KEPT_IN_MODEL, yet --init may change it: dropout is not a size
    Kept kept;
    const char *key;                 // the checkpoint metadata key (KEPT_IN_MODEL, KEPT_IN_RUN) or run.json's
    // Kept in a checkpoint written before the key existed: what its absence
    // means (a run saved before AdamW trained with "sgd"); NULL: required.
    const char *if_absent;
    // A double that tinygpt saved as a float, to 9 digits, before
    // "settings_format" 2: read back as that float, so an old run resumes
    // bit for bit.
    bool was_float;
} Setting;

extern const Setting TRAIN_SETTINGS[];
extern const int NUM_TRAIN_SETTINGS;

// setting_named: the row of "name" (which must exist).
const Setting *setting_named(const char *name);

// Which settings the command line gave: given[i] for TRAIN_SETTINGS[i].
#define NUM_TRAIN_SETTINGS_MAX 64
typedef struct {
    bool given[NUM_TRAIN_SETTINGS_MAX];
} Given;

// settings_parse: TrainSettings from argv (argv[0] is "train"), defaults not
// yet applied; usage errors exit 2 (parse_flags). "cmd" is train's Command,
// whose flags the table makes (settings_command).
void settings_command(Command *cmd, Flag *flags, TrainSettings *s);
void settings_parse(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given);

// settings_model_command, settings_model_parse: the same for `tinygpt
// gradcheck`, whose flags are the rows that shape the model
// (setting_shapes_model) and no others; then settings_finish as for train.
void settings_model_command(Command *cmd, Flag *flags, TrainSettings *s);
void settings_model_parse(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given);
// setting_shapes_model: "st" is one of the model's own settings: kept in
// the model (KEPT_IN_MODEL), and not the tokenizer's (the text's, which
// gradcheck has none of).
bool setting_shapes_model(const Setting *st);
// setting_needs_met: whether setting "st" means something in "s": what it
// needs has the value it needs, or it needs nothing (--layers of a card
// model does not).
bool setting_needs_met(const Setting *st, const TrainSettings *s);

// settings_refuse_on_resume: with --resume, a usage error for the first
// given setting that RESUME_KEEPS.
void settings_refuse_on_resume(const Command *cmd, const Given *given);

// settings_read_kept: into "saved", each setting kept "kept" that "md"
// holds under its key, read strictly (what settings_to_metadata writes:
// no spaces, signs or hex) and held to the flag's range; a key "md" lacks
// takes its if_absent (a switch: off; a path: none), and is an error
// without one. A
// setting whose "needs" is not met in "saved" (--layers of a card model) is
// skipped, so "saved" should hold the settings already read (the model's
// before the run's). False, with "err" naming "path" and the key, on a
// damaged value. "md" must outlive "saved" (a path points into it).
bool settings_read_kept(TrainSettings *saved, const Metadata *md, Kept kept, const char *path, Error *err);

// settings_take_kept: each setting kept "kept" whose needs "saved" meets,
// from "saved" into "s", except those given on the command line; marked in
// "from_file". With "check_given" (--init and the model), a given one must
// hold the saved value, unless it is init_may_change: otherwise a usage
// error ("--layers 3 conflicts with the --init checkpoint, which was
// trained with --layers 2").
void settings_take_kept(const Command *cmd, TrainSettings *s, const Given *given, const TrainSettings *saved, Kept kept,
                        bool check_given, Given *from_file);

// settings_finish: the defaults of every setting neither given nor taken
// from a file, for the run's architecture (which is settled first), then
// the derived ones (--min-lr lr/10), then each given setting's "needs"
// ("--layers is for --arch gpt"), a usage error when not met.
void settings_finish(const Command *cmd, TrainSettings *s, const Given *given, const Given *from_file);

// settings_to_metadata: every setting kept "kept", under its key, as text
// that reads back exactly (settings_value_text); for KEPT_IN_RUN also
// "settings_format": "2", which marks that (see Setting.was_float). A path
// that is NULL or "" is left out.
void settings_to_metadata(const TrainSettings *s, Kept kept, Metadata *md);

// settings_value_text: one setting's value as text: a whole number in
// decimal, a double in the fewest digits that read back as the same
// double, a choice's name, a switch as "0" or "1", a path as it is.
void settings_value_text(const Setting *st, const TrainSettings *s, char *out, size_t cap);

#endif
