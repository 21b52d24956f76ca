// settings.c: the table of a training run's settings, and the loops over
// it (see settings.h).
//
// Reading order: file 33. The table first: one row per setting, in the
// order --help lists them. Then what train does with it, in the order it
// does it: make the flags and parse them; on --resume refuse the flags a
// run keeps; take settings from a checkpoint (--init, --resume) or
// run.json; apply the defaults and check what each needs; write them into
// a checkpoint's metadata.
#include "settings.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// ===========================================================================
// The table.

#define FIELD(field) #field, offsetof(TrainSettings, field)
#define SAME(text) .gpt_default = (text), .card_default = (text)
#define GPT_ONLY .needs = "arch", .needs_value = "gpt"
// gpt2 is GPT-2's model: of the gpt's parts it may choose only how many
// blocks and GELU's form (--mlp gelu or gelu_tanh: model_check_config).
#define GPT_OR_GPT2 .needs = "arch", .needs_value = "gpt", .needs_value_or = "gpt2"
// AdamW's settings: also Muon's, whose AdamW moves what Muon does not.
#define ADAMW_PART .needs = "optimizer", .needs_value = "adamw", .needs_value_or = "muon"

// The derived defaults: nanoGPT's min_lr = learning_rate / 10, and a
// progress line at every evaluation.
static void derive_min_lr(TrainSettings *s) { s->min_lr = s->lr / 10.0; }
static void derive_log_interval(TrainSettings *s) { s->log_interval = s->eval_interval; }
// Steps: gpt's 2000 and card's 7000 (its tutorial's run), or, with a
// budget of --time, as many as it allows.
static void derive_steps(TrainSettings *s) {
    s->steps = s->time > 0 ? STEPS_NO_LIMIT : s->arch == ARCH_CARD ? 7000 : 2000;
}
static void derive_sample_every(TrainSettings *s) { s->sample_every = s->eval_interval; }
// bpe's vocabulary: gpt's 2048 (make sweep's choice) is a ceiling, which a
// small text, whose pairs run out sooner, lowers to what it holds; card's
// 512 stays what it was.
static void derive_vocab_size(TrainSettings *s) {
    s->vocab_size = s->arch == ARCH_CARD ? 512 : 2048;
    s->vocab_size_at_most = s->arch != ARCH_CARD;
}
// A resumed run writes where it was: into its own directory.
static void derive_out_dir(TrainSettings *s) { s->out_dir = s->resume_dir ? s->resume_dir : "out"; }

const Setting TRAIN_SETTINGS[] = {
    // ---- Where the run reads and writes ----
    {FIELD(data_path), SETTING_PATH, "FILE", "FILE", NULL, .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN_JSON,
     .key = "data"},
    {FIELD(max_bytes), SETTING_LONG, "--max-bytes", "N", "with FILE -: the most text read from standard input; more is an error",
     SAME("1073741824"), .min = 1, .max = MAX_BYTES_MAX, .resume = RESUME_MAY_CHANGE},  // STDIN_MAX_BYTES, as sample's
    {FIELD(out_dir), SETTING_PATH, "--out", "DIR",
     "output directory for model.safetensors, log.csv and loss.png; one that holds a run is refused (see --resume, --force)",
     .derived = "out", .derive = derive_out_dir},
    {FIELD(force), SETTING_SWITCH, "--force", NULL,
     "start over in an --out that holds a run: its files are deleted first", .resume = RESUME_KEEPS},
    // ---- The model ----
    {FIELD(arch), SETTING_CHOICE, "--arch", "ARCH",
     "gpt (blocks of LayerNorm, attention and MLP on a residual stream), gpt2 (GPT-2's: the gpt with a bias in every linear layer and LayerNorm) or card (one attention block)",
     SAME("gpt"), .choices = ARCH_NAMES, .kept = KEPT_IN_MODEL, .key = "arch"},
    {FIELD(layers), SETTING_INT, "--layers", "L", "transformer blocks (gpt and gpt2: card has one)", .gpt_default = "3",
     .min = 1, .max = MODEL_MAX_LAYERS, GPT_OR_GPT2, .needs_why = "card has exactly one block", .kept = KEPT_IN_MODEL,
     .key = "n_layer"},
    {FIELD(tokenizer), SETTING_CHOICE, "--tokenizer", "NAME",
     "char (one token per character), bpe (byte pairs merged into pieces, learned from the training split) or gpt2 (GPT-2's own, read from --tokenizer-dir)",
     .gpt_default = "bpe", .card_default = "char", .choices = TOKENIZER_NAMES, .kept = KEPT_IN_MODEL,
     .key = "tokenizer", .if_absent = "char"},
    {FIELD(vocab_size), SETTING_INT, "--vocab-size", "N", "tokens of the bpe tokenizer: the 256 bytes + N - 256 merges (gpt's default a ceiling: merging stops at pairs seen once)",
     .derived = "gpt up to 2048, card 512", .derive = derive_vocab_size,
     .min = BPE_BYTES + 1, .max = BPE_MAX_VOCAB, .needs = "tokenizer", .needs_value = "bpe",
     .needs_why = "char takes one token per character of the text", .kept = KEPT_IN_MODEL, .key = "vocab_size"},
    {FIELD(tokenizer_dir), SETTING_PATH, "--tokenizer-dir", "DIR",
     "with --tokenizer gpt2: the GPT-2 directory whose vocab.json and merges.txt to read (the model keeps them)",
     .needs = "tokenizer", .needs_value = "gpt2",
     .needs_why = "char and bpe are learned from the text; only GPT-2's tokenizer is read from a directory",
     .resume = RESUME_KEEPS},
    {FIELD(no_layernorm), SETTING_SWITCH, "--no-layernorm", NULL, "gpt without its LayerNorms (ln1, ln2, ln_f)",
     GPT_ONLY, .needs_why = "card has no LayerNorm to remove, and gpt2 keeps GPT-2's", .kept = KEPT_IN_MODEL, .key = "no_layernorm"},
    {FIELD(no_mlp), SETTING_SWITCH, "--no-mlp", NULL, "gpt without the MLP in each block", GPT_ONLY,
     .needs_why = "card has no MLP to remove, and gpt2 keeps GPT-2's", .kept = KEPT_IN_MODEL, .key = "no_mlp"},
    {FIELD(no_residual), SETTING_SWITCH, "--no-residual", NULL,
     "gpt without the residual stream: each branch replaces its input", GPT_ONLY,
     .needs_why = "card has no residual stream to remove, and gpt2 keeps GPT-2's", .kept = KEPT_IN_MODEL, .key = "no_residual"},
    {FIELD(norm), SETTING_CHOICE, "--norm", "NAME",
     "gpt's norms: layernorm, or rmsnorm (x / sqrt(mean(x^2) + eps) * weight: no mean taken out)",
     .gpt_default = "rmsnorm", .card_default = "layernorm", .choices = NORM_NAMES, GPT_ONLY, .needs_why = "card has no norm, and gpt2's are GPT-2's LayerNorms",
     .kept = KEPT_IN_MODEL, .key = "norm", .if_absent = "layernorm"},
    {FIELD(mlp), SETTING_CHOICE, "--mlp", "NAME", "gpt's MLP: gelu, relu2 (max(x, 0)^2), swiglu (silu(x Wgate) * x Wup, hidden 8C/3), or gelu_tanh (GPT-2's tanh form of gelu; gpt2: gelu or gelu_tanh)",
     .gpt_default = "relu2", .card_default = "gelu", .gpt2_default = "gelu_tanh", .choices = MLP_NAMES, GPT_OR_GPT2, .needs_why = "card has no MLP", .kept = KEPT_IN_MODEL,
     .key = "mlp", .if_absent = "gelu"},
    {FIELD(untied_head), SETTING_SWITCH, "--untied-head", NULL,
     "gpt with a head.weight [V,C] of its own, instead of reusing tok_emb", .off_flag = "--tied-head",
     .off_help = "gpt whose head reuses tok_emb (nanoGPT's, and tinygpt's before the recipe of make sweep)",
     .gpt_default = "1", .card_default = "0", GPT_ONLY,
     .needs_why = "card's head is its own already, and gpt2's is GPT-2's, tied", .kept = KEPT_IN_MODEL, .key = "untied_head", .if_absent = "0"},
    {FIELD(pos), SETTING_CHOICE, "--pos", "NAME",
     "gpt's positions: learned (a pos_emb table) or rope (q and k rotated by position, base 10000)",
     .gpt_default = "rope", .card_default = "learned", .choices = POS_NAMES, GPT_ONLY, .needs_why = "card and gpt2 keep their learned positions",
     .kept = KEPT_IN_MODEL, .key = "pos", .if_absent = "learned"},
    {FIELD(qk_norm), SETTING_SWITCH, "--qk-norm", NULL,
     "gpt whose heads' q and k are divided by their RMS (no weight) before the scores", .off_flag = "--no-qk-norm",
     .off_help = "gpt whose q and k go into the scores as they are (nanoGPT's)", .gpt_default = "1",
     .card_default = "0", GPT_ONLY,
     .needs_why = "card's and gpt2's attention are unnormalised", .kept = KEPT_IN_MODEL, .key = "qk_norm",
     .if_absent = "0"},
    {FIELD(steps), SETTING_LONG, "--steps", "N", "number of training steps (0 saves the initial model)",
     .derived = "gpt 2000, card 7000; with --time, no limit", .derive = derive_steps, .max = 1e12,
     .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN, .key = "steps"},
    {FIELD(time), SETTING_DOUBLE, "--time", "SECONDS",
     "train for this long (evaluations and saves included), the schedule ending with it; with --steps, whichever ends first; 0 = no limit",
     SAME("0"), .max = 1e9, .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN, .key = "time", .if_absent = "0"},
    {FIELD(batch), SETTING_INT, "--batch", "B",
     "windows per step (per micro-batch with --grad-accum; under mpirun, over all processes)", .gpt_default = "24",
     .card_default = "32", .min = 1, .max = 1 << 20, .kept = KEPT_IN_RUN, .key = "batch"},
    {FIELD(grad_accum), SETTING_INT, "--grad-accum", "K",
     "micro-batches of --batch windows per step, their gradients added: a step sees batch x K windows", SAME("1"),
     .min = 1, .max = 1 << 20, .kept = KEPT_IN_RUN, .key = "grad_accum", .if_absent = "1"},
    {FIELD(context), SETTING_INT, "--context", "T", "tokens per window (the model's block size)", SAME("64"),
     .min = 1, .max = 1 << 16, .kept = KEPT_IN_MODEL, .key = "block_size"},
    {FIELD(embd), SETTING_INT, "--embd", "C", "embedding channels", SAME("128"), .min = 1, .max = 1 << 16,
     .kept = KEPT_IN_MODEL, .key = "n_embd"},
    {FIELD(heads), SETTING_INT, "--heads", "NH", "attention heads; must divide --embd", SAME("4"), .min = 1,
     .max = 1 << 16, .kept = KEPT_IN_MODEL, .key = "n_head"},
    {FIELD(dropout), SETTING_DOUBLE, "--dropout", "P",
     "dropout on attention weights (gpt: and on the embeddings and each branch), in [0, 1)", .gpt_default = "0.02",
     .card_default = "0.1", .max = 0.999, .init_may_change = true, .kept = KEPT_IN_MODEL, .key = "dropout"},
    // ---- The optimizer and its schedule ----
    {FIELD(optimizer), SETTING_CHOICE, "--optimizer", "NAME",
     "sgd (w -= lr * grad), adamw (torch.optim.AdamW), or muon (the blocks' matrices; AdamW the rest)",
     .gpt_default = "adamw", .card_default = "sgd", .choices = OPTIMIZER_NAMES, .kept = KEPT_IN_RUN,
     .key = "optimizer", .if_absent = "sgd"},
    {FIELD(lr), SETTING_DOUBLE, "--lr", "LR", "learning rate (the peak, after warmup)", .gpt_default = "2e-3",
     .card_default = "0.5", .max = 1e6, .kept = KEPT_IN_RUN, .key = "lr", .was_float = true},
    {FIELD(beta1), SETTING_DOUBLE, "--beta1", "B1", "AdamW's averaging rate of the gradient", SAME("0.9"),
     .max = 0.999999, ADAMW_PART, .kept = KEPT_IN_RUN, .key = "beta1",
     .if_absent = "0.9"},
    {FIELD(beta2), SETTING_DOUBLE, "--beta2", "B2", "AdamW's averaging rate of the squared gradient", SAME("0.99"),
     .max = 0.999999, ADAMW_PART, .kept = KEPT_IN_RUN, .key = "beta2",
     .if_absent = "0.99"},
    {FIELD(weight_decay), SETTING_DOUBLE, "--weight-decay", "WD",
     "AdamW's decoupled weight decay, on matrices and embeddings only", SAME("0.1"), .max = 1e6,
     ADAMW_PART, .kept = KEPT_IN_RUN, .key = "weight_decay", .if_absent = "0"},
    {FIELD(muon_lr), SETTING_DOUBLE, "--muon-lr", "LR",
     "Muon's learning rate for the blocks' matrices (the peak; the schedule scales it as --lr)", SAME("0.02"),
     .max = 1e6, .needs = "optimizer", .needs_value = "muon", .kept = KEPT_IN_RUN, .key = "muon_lr",
     .if_absent = "0.02"},
    {FIELD(warmup), SETTING_LONG, "--warmup", "N", "steps of linear warmup to --lr", .gpt_default = "100",
     .card_default = "0", .max = 1e12, .kept = KEPT_IN_RUN, .key = "warmup", .if_absent = "0"},
    {FIELD(lr_schedule), SETTING_CHOICE, "--lr-schedule", "NAME",
     "constant, or cosine: from --lr down to --min-lr at the last step", .gpt_default = "cosine",
     .card_default = "constant", .choices = LR_SCHEDULE_NAMES, .kept = KEPT_IN_RUN, .key = "lr_schedule",
     .if_absent = "constant"},
    {FIELD(min_lr), SETTING_DOUBLE, "--min-lr", "X", "where the cosine schedule ends", .derived = "lr/10", .derive = derive_min_lr, .max = 1e6,
     .kept = KEPT_IN_RUN, .key = "min_lr", .if_absent = "0"},
    {FIELD(grad_clip), SETTING_DOUBLE, "--grad-clip", "X", "clip the global L2 norm of the gradients to X; 0 = off",
     .gpt_default = "1", .card_default = "0", .max = 1e9, .kept = KEPT_IN_RUN, .key = "grad_clip", .if_absent = "0"},
    // ---- The data and the loop ----
    {FIELD(val_fraction), SETTING_DOUBLE, "--val-fraction", "F", "fraction of the text, at the end, for validation",
     SAME("0.1"), .max = 0.9, .kept = KEPT_IN_RUN, .key = "val_fraction", .was_float = true},
    {FIELD(eval_interval), SETTING_INT, "--eval-interval", "N", "steps between validation losses",
     .gpt_default = "250", .card_default = "500", .min = 1, .max = 1e9, .kept = KEPT_IN_RUN, .key = "eval_interval"},
    {FIELD(eval_batches), SETTING_INT, "--eval-batches", "N", "batches per validation loss", SAME("20"), .min = 1,
     .max = 1e6, .kept = KEPT_IN_RUN, .key = "eval_batches"},
    {FIELD(init_path), SETTING_PATH, "--init", "MODEL",
     "start from this .safetensors (a run directory: its model.safetensors), or a Hugging Face GPT-2 directory to fine-tune (architecture, sizes and tokenizer from it)", .resume = RESUME_KEEPS},
    {FIELD(order), SETTING_CHOICE, "--order", "ORDER",
     "random (each window drawn apart), shuffled (every window once an epoch, in a new order each epoch), or sequential: batch s row b starts at ((s*B+b)*T) mod (n_train-T)",
     .gpt_default = "shuffled", .card_default = "random",
     .choices = ORDER_NAMES, .kept = KEPT_IN_RUN, .key = "order"},
    {FIELD(seed), SETTING_LONG, "--seed", "S", "random seed (weights, batches, dropout)", SAME("1337"), .max = SEED_MAX,
     .kept = KEPT_IN_RUN, .key = "seed"},
    {FIELD(threads), SETTING_INT, "--threads", "N", "OpenMP threads, 0 = default", SAME("0"), .max = THREADS_MAX,
     .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN, .key = "threads", .if_absent = "0"},
    {FIELD(peak), SETTING_DOUBLE, "--peak", "GFLOPS",
     "the FMA peak of this process's threads that the progress lines' GFLOP/s are a share of (`tinygpt peak` measures it); 0 = measured as the run starts (0.1 s) and again at evaluations",
     SAME("0"), .max = 1e9, .resume = RESUME_MAY_CHANGE},
    {FIELD(resume_dir), SETTING_PATH, "--resume", "DIR", "continue the run saved in DIR (FILE may be left out)",
     .resume = RESUME_MAY_CHANGE},
    {FIELD(save_every), SETTING_LONG, "--save-every", "N", "save a checkpoint every N steps; 0 = only at the end",
     SAME("1000"), .max = 1e12, .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN, .key = "save_every"},
    {FIELD(patience), SETTING_INT, "--patience", "N",
     "evaluations without a better validation loss before a warning of overfitting; 0 = none", SAME("3"), .max = 1e6,
     .resume = RESUME_MAY_CHANGE},
    {FIELD(sample_every), SETTING_LONG, "--sample-every", "N",
     "print a one-line sample every N steps (and at the last), drawn with the same seed each time, also kept in log.csv; 0 = none",
     .derived = "--eval-interval", .derive = derive_sample_every, .max = 1e12, .resume = RESUME_MAY_CHANGE,
     .kept = KEPT_IN_RUN, .key = "sample_every", .if_absent = "0"},
    {FIELD(restart_log), SETTING_SWITCH, "--restart-log", NULL,
     "with --resume: a log.csv that is missing or cut short starts afresh at the checkpoint's step",
     .resume = RESUME_MAY_CHANGE},
    {FIELD(keep), SETTING_INT, "--keep", "N", "checkpoints kept in --out (checkpoint-<step>), the newest; 1 = the last",
     SAME("1"), .min = 1, .max = 1e6, .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN, .key = "keep", .if_absent = "1"},
    {FIELD(log_interval), SETTING_LONG, "--log-interval", "N",
     "print a progress line every N steps (and at every evaluation and the last step)",
     .derived = "--eval-interval", .derive = derive_log_interval, .min = 1, .max = 1e12, .resume = RESUME_MAY_CHANGE},
    {FIELD(stop_after), SETTING_LONG, "--stop-after", "N", NULL, .min = 1, .max = 1e12, .resume = RESUME_MAY_CHANGE},
};
const int NUM_TRAIN_SETTINGS = (int)(sizeof TRAIN_SETTINGS / sizeof TRAIN_SETTINGS[0]);

_Static_assert(sizeof TRAIN_SETTINGS / sizeof TRAIN_SETTINGS[0] <= NUM_TRAIN_SETTINGS_MAX,
               "Given has a place for every setting");
_Static_assert(sizeof(Arch) == sizeof(int) && sizeof(TokenizerKind) == sizeof(int) &&
                   sizeof(OptimizerKind) == sizeof(int) && sizeof(LrSchedule) == sizeof(int) &&
                   sizeof(BatchOrder) == sizeof(int) && sizeof(NormKind) == sizeof(int) &&
                   sizeof(MlpKind) == sizeof(int) && sizeof(PosKind) == sizeof(int),
               "a choice is stored through an int *");

const Setting *setting_named(const char *name) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (strcmp(TRAIN_SETTINGS[i].name, name) == 0) return &TRAIN_SETTINGS[i];
    assert(!"setting_named: no such setting");
    return NULL;
}

// field: where setting "st" of "s" is.
static void *field(const Setting *st, const TrainSettings *s) { return (char *)s + st->offset; }

// is_flag: "st" is given as a flag, not as the positional FILE.
static bool is_flag(const Setting *st) { return strncmp(st->flag, "--", 2) == 0; }

// typed_flag: the flag of "st" that the command line gave, for messages:
// the switch's off flag when that was one of them (--tied-head).
static const char *typed_flag(const Command *cmd, const Setting *st) {
    return st->off_flag && command_flag(cmd, st->off_flag)->seen ? st->off_flag : st->flag;
}

// ===========================================================================
// A setting's value, as text and back. The defaults in the table and the
// values a checkpoint keeps are read by the same strict parser.

// value_size: the bytes of a setting's value in TrainSettings.
static size_t value_size(SettingType type) {
    switch (type) {
    case SETTING_INT:
    case SETTING_CHOICE: return sizeof(int);
    case SETTING_LONG: return sizeof(long);
    case SETTING_DOUBLE: return sizeof(double);
    case SETTING_SWITCH: return sizeof(bool);
    case SETTING_PATH: return sizeof(const char *);
    }
    return 0;
}

// parse_value: "text" ("len" bytes) as the value of "st", strictly: what
// settings_value_text writes and nothing else (digits only for a whole
// number, a digit first for a double, a choice's exact name, "0" or "1"
// for a switch), within the flag's range. False if it is not.
static bool parse_value(const Setting *st, const char *text, size_t len, TrainSettings *s) {
    if (strlen(text) != len || len == 0) return false;
    switch (st->type) {
    case SETTING_INT:
    case SETTING_LONG: {
        uint64_t x;
        if (!parse_u64(text, len, &x) || (double)x < st->min || (st->max > 0 && (double)x > st->max)) return false;
        if (st->type == SETTING_INT) *(int *)field(st, s) = (int)x;
        else *(long *)field(st, s) = (long)x;
        return true;
    }
    case SETTING_DOUBLE: {
        double x;
        if (!parse_double(text, len, &x) || x < st->min || (st->max > 0 && x > st->max)) return false;
        *(double *)field(st, s) = x;
        return true;
    }
    case SETTING_CHOICE: {
        int index = name_index(st->choices, text);
        if (index < 0) return false;
        *(int *)field(st, s) = index;
        return true;
    }
    case SETTING_SWITCH:
        if (strcmp(text, "0") != 0 && strcmp(text, "1") != 0) return false;
        *(bool *)field(st, s) = text[0] == '1';
        return true;
    case SETTING_PATH: *(const char **)field(st, s) = text; return true;
    }
    return false;
}

void settings_value_text(const Setting *st, const TrainSettings *s, char *out, size_t cap) {
    const void *value = field(st, s);
    switch (st->type) {
    case SETTING_INT: snprintf(out, cap, "%d", *(const int *)value); break;
    case SETTING_LONG: snprintf(out, cap, "%ld", *(const long *)value); break;
    case SETTING_DOUBLE: {
        // The shortest of 15, 16 or 17 significant digits that reads back
        // as the same double: "0.001", not "0.0010000000000000000208".
        const double x = *(const double *)value;
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(out, cap, "%.*g", digits, x);
            if (strtod(out, NULL) == x) break;
        }
        break;
    }
    case SETTING_CHOICE: snprintf(out, cap, "%s", st->choices[*(const int *)value]); break;
    case SETTING_SWITCH: snprintf(out, cap, "%s", *(const bool *)value ? "1" : "0"); break;
    case SETTING_PATH: snprintf(out, cap, "%s", *(const char *const *)value ? *(const char *const *)value : ""); break;
    }
}

bool setting_needs_met(const Setting *st, const TrainSettings *s) {
    if (!st->needs) return true;
    const Setting *other = setting_named(st->needs);
    const char *has = other->choices[*(const int *)field(other, s)];
    return strcmp(has, st->needs_value) == 0 || (st->needs_value_or && strcmp(has, st->needs_value_or) == 0);
}

// ===========================================================================
// Parsing the command line: the flags are made from the table, and args.c
// parses them as it parses every command's.

static FlagType flag_type(SettingType type) {
    switch (type) {
    case SETTING_INT: return FLAG_INT;
    case SETTING_LONG: return FLAG_LONG;
    case SETTING_DOUBLE: return FLAG_DOUBLE;
    case SETTING_CHOICE: return FLAG_CHOICE;
    case SETTING_SWITCH: return FLAG_SWITCH;
    case SETTING_PATH: return FLAG_STRING;
    }
    return FLAG_STRING;
}

// default_text: what --help shows as the default of "st": "64", "gpt 12,
// card 32", "lr/10"; "" for none. "out" holds the text.
static const char *default_text(const Setting *st, char *out, size_t cap) {
    if (st->type == SETTING_SWITCH) {
        // A switch on by default says so; off is what a switch means unsaid.
        const bool on = st->gpt_default && strcmp(st->gpt_default, "1") == 0;
        snprintf(out, cap, "%s", on ? "on" : "");
        return out;
    }
    // A gpt-only setting's card default only keeps the card's fields as
    // they were; card never reads it, and --help does not show it.
    const bool gpt_only = st->needs && strcmp(st->needs, "arch") == 0;
    if (st->derived) snprintf(out, cap, "%s", st->derived);
    else if (!st->gpt_default) snprintf(out, cap, "%s", "");
    else if (st->gpt2_default) snprintf(out, cap, "%s; gpt2 %s", st->gpt_default, st->gpt2_default);
    else if (!st->card_default || gpt_only || strcmp(st->gpt_default, st->card_default) == 0)
        snprintf(out, cap, "%s", st->gpt_default);
    else snprintf(out, cap, "gpt %s, card %s", st->gpt_default, st->card_default);
    return out;
}

// Each flag's --help default, one buffer per setting.
static char default_texts[NUM_TRAIN_SETTINGS_MAX][64];

bool setting_shapes_model(const Setting *st) {
    return st->kept == KEPT_IN_MODEL && strcmp(st->name, "tokenizer") != 0 &&
           !(st->needs && strcmp(st->needs, "tokenizer") == 0);
}

// is_flag_of: "st" is a flag of train (every row but the positional FILE),
// or, "model_only", of gradcheck (setting_shapes_model).
static bool is_flag_of(const Setting *st, bool model_only) {
    return is_flag(st) && (!model_only || setting_shapes_model(st));
}

// The flags: the rows is_flag_of takes, in table order, a switch's off
// flag after it. "flags" has room for NUM_TRAIN_SETTINGS_MAX.
static void make_flags(Command *cmd, Flag *flags, TrainSettings *s, bool model_only) {
    int n = 0;
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (!is_flag_of(st, model_only)) continue;
        const char *dflt = default_text(st, default_texts[i], sizeof default_texts[i]);
        assert(n + 2 <= NUM_TRAIN_SETTINGS_MAX && "room for the flags: raise NUM_TRAIN_SETTINGS_MAX");
        if (st->off_flag)
            flags[n + 1] = (Flag){.name = st->off_flag, .type = FLAG_SWITCH_OFF, .value = field(st, s),
                                  .help = st->off_help};
        flags[n++] = (Flag){.name = st->flag,
                            .type = flag_type(st->type),
                            .value = field(st, s),
                            .metavar = st->metavar,
                            .help = st->help,
                            .min = st->min,
                            .max = st->max,
                            .default_text = dflt[0] ? dflt : NULL,
                            .choices = st->choices};
        if (st->off_flag) n++;
    }
    cmd->flags = flags;
    cmd->n_flags = n;
}
void settings_command(Command *cmd, Flag *flags, TrainSettings *s) { make_flags(cmd, flags, s, false); }
void settings_model_command(Command *cmd, Flag *flags, TrainSettings *s) { make_flags(cmd, flags, s, true); }

// apply_default: setting "st" of "s" from its default text for "arch".
// gpt2 takes gpt's defaults, but for the parts of a gpt (the settings that
// need an architecture), where card's column holds the plain gpt's parts,
// which are GPT-2's: LayerNorm, learned positions, a tied head; and GELU,
// in the tanh form GPT-2 was trained with (its own column).
static void apply_default(const Setting *st, TrainSettings *s, Arch arch) {
    const bool model_part = st->needs && strcmp(st->needs, "arch") == 0;
    const bool card_column = arch == ARCH_CARD || (arch == ARCH_GPT2 && model_part);
    const char *text = card_column && st->card_default ? st->card_default : st->gpt_default;
    if (arch == ARCH_GPT2 && st->gpt2_default) text = st->gpt2_default;
    if (!text) return;  // none (--init), or not a card setting
    bool parsed = parse_value(st, text, strlen(text), s);
    assert(parsed && "a default in TRAIN_SETTINGS reads as its flag would");
    (void)parsed;
}

// gpt's defaults and the derived ones go in at once, so that the settings
// that do not depend on the architecture (--out) hold theirs before a
// checkpoint is read; settings_finish sets them all again once the
// architecture is settled. A row that is not the command's flag
// (make_flags) is not given.
static void parse_rows(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given, bool model_only) {
    memset(given, 0, sizeof *given);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) apply_default(&TRAIN_SETTINGS[i], s, ARCH_GPT);
    s->data_path = parse_flags(cmd, argc, argv);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (is_flag(st) && !is_flag_of(st, model_only)) continue;
        // A switch and its off flag both given: the later one holds, as for
        // any flag given twice (the parser set the value in their order).
        const bool off = st->off_flag && command_flag(cmd, st->off_flag)->seen;
        given->given[i] = is_flag(st) ? command_flag(cmd, st->flag)->seen || off : s->data_path != NULL;
    }
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (TRAIN_SETTINGS[i].derive && !given->given[i]) TRAIN_SETTINGS[i].derive(s);
}
void settings_parse(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given) {
    parse_rows(cmd, argc, argv, s, given, false);
}
void settings_model_parse(Command *cmd, int argc, char **argv, TrainSettings *s, Given *given) {
    parse_rows(cmd, argc, argv, s, given, true);
}

// ===========================================================================
// Resuming: the flags a run keeps cannot be given again.

void settings_refuse_on_resume(const Command *cmd, const Given *given) {
    // "--steps, --threads, --save-every and --log-interval": the flags a
    // resumed run may be given, as the table lists them.
    const char *names[NUM_TRAIN_SETTINGS_MAX];
    int n = 0;
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->resume == RESUME_MAY_CHANGE && st->help && is_flag(st) &&
            st != setting_named("resume_dir"))
            names[n++] = st->flag;
    }
    char may[256] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(may);
        snprintf(may + len, sizeof may - len, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", names[i]);
    }
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (given->given[i] && TRAIN_SETTINGS[i].resume == RESUME_KEEPS)
            usage_error(cmd, "%s cannot be changed when resuming: the run's flags come from its checkpoint; drop it (only %s may be given)",
                        typed_flag(cmd, &TRAIN_SETTINGS[i]), may);
}

// ===========================================================================
// Settings from a checkpoint or run.json.

bool settings_read_kept(TrainSettings *saved, const Metadata *md, Kept kept, const char *path, Error *err) {
    const bool exact = metadata_get(md, "settings_format") != NULL;  // see Setting.was_float
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != kept || !setting_needs_met(st, saved)) continue;
        const MetadataItem *item = metadata_get(md, st->key);
        if (!item && st->type == SETTING_PATH) continue;  // a path is left out when it is not UTF-8
        const char *text = item ? item->value : st->if_absent ? st->if_absent : st->type == SETTING_SWITCH ? "0" : NULL;
        if (!text)
            return error_set(err, "'%s' has no \"%s\" (%s) in its metadata, which a run needs to continue; the file is damaged: start a new run from its weights with --init",
                             path, st->key, st->flag);
        size_t len = item ? item->len : strlen(text);
        if (!parse_value(st, text, len, saved))
            return error_set(err, "'%s' holds \"%s\" as its \"%s\" (%s), which is not a value %s takes; the file is damaged: start a new run from its weights with --init",
                             path, show(text, len).text, st->key, st->flag, st->flag);
        if (st->was_float && !exact) {
            double *x = field(st, saved);
            *x = (float)*x;
        }
    }
    return true;
}

void settings_take_kept(const Command *cmd, TrainSettings *s, const Given *given, const TrainSettings *saved, Kept kept,
                        bool check_given, Given *from_file) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != kept || !setting_needs_met(st, saved)) continue;
        char mine[64], theirs[64];
        settings_value_text(st, s, mine, sizeof mine);
        settings_value_text(st, saved, theirs, sizeof theirs);
        if (!given->given[i]) {
            memcpy(field(st, s), field(st, saved), value_size(st->type));
            from_file->given[i] = true;
        } else if (check_given && !st->init_may_change && strcmp(mine, theirs) != 0) {
            usage_error(cmd, "%s %s conflicts with the --init checkpoint, which was trained with %s %s; drop the flag",
                        st->flag, mine, st->flag, theirs);
        }
    }
}

// ===========================================================================
// Defaults, derived values and what each setting needs.

void settings_finish(const Command *cmd, TrainSettings *s, const Given *given, const Given *from_file) {
    const Setting *arch = setting_named("arch");
    const int arch_index = (int)(arch - TRAIN_SETTINGS);
    if (!given->given[arch_index] && !(from_file && from_file->given[arch_index])) apply_default(arch, s, ARCH_GPT);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (!given->given[i] && !(from_file && from_file->given[i])) apply_default(&TRAIN_SETTINGS[i], s, s->arch);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (TRAIN_SETTINGS[i].derive && !given->given[i] && !(from_file && from_file->given[i]))
            TRAIN_SETTINGS[i].derive(s);
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (!given->given[i] || setting_needs_met(st, s)) continue;
        const Setting *other = setting_named(st->needs);
        const int other_index = (int)(other - TRAIN_SETTINGS);
        const char *has = other->choices[*(const int *)field(other, s)];
        char why[96] = "", wanted[64];
        if (st->needs_why) snprintf(why, sizeof why, " (%s)", st->needs_why);
        snprintf(wanted, sizeof wanted, "%s%s%s", st->needs_value, st->needs_value_or ? " or " : "",
                 st->needs_value_or ? st->needs_value_or : "");
        if (from_file && from_file->given[other_index])
            usage_error(cmd, "%s is for %s %s%s, and the checkpoint it starts from has %s %s; drop %s",
                        typed_flag(cmd, st), other->flag, wanted, why, other->flag, has, typed_flag(cmd, st));
        usage_error(cmd, "%s is for %s %s%s; drop it, or add %s %s", typed_flag(cmd, st), other->flag, wanted, why,
                    other->flag, st->needs_value);
    }
}

// ===========================================================================
// Settings into a checkpoint's metadata (and run.json).

void settings_to_metadata(const TrainSettings *s, Kept kept, Metadata *md) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++) {
        const Setting *st = &TRAIN_SETTINGS[i];
        if (st->kept != kept) continue;
        if (st->type == SETTING_PATH) {
            const char *path = *(const char *const *)field(st, s);
            if (path && path[0]) metadata_set_bytes(md, st->key, path, strlen(path));
            continue;
        }
        char text[64];
        settings_value_text(st, s, text, sizeof text);
        metadata_set(md, st->key, "%s", text);
    }
    if (kept == KEPT_IN_RUN) metadata_set(md, "settings_format", "2");
}
