// settings_table.c: every setting of a training run, declared once: the
// table TRAIN_SETTINGS (see settings.h), one row per setting, in the order
// --help lists them; settings.c holds the loops over it.
//
// Reading order: file 33, after settings.h.
#include "settings.h"

#include <assert.h>
#include <stddef.h>
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

const char *const THREAD_SPLIT_NAMES[] = {"rows", "layers", NULL};

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
    {FIELD(thread_split), SETTING_CHOICE, "--thread-split", "HOW",
     "how the threads share a step: rows (each runs it on its own rows of the batch, when their count divides the rows: faster; the last bits depend on --threads) or layers (every layer shares its work among them: the same bits for any --threads, as releases before 2026-11-26 gave)",
     SAME("rows"), .choices = THREAD_SPLIT_NAMES, .resume = RESUME_MAY_CHANGE, .kept = KEPT_IN_RUN,
     .key = "thread_split", .if_absent = "rows"},
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
                   sizeof(MlpKind) == sizeof(int) && sizeof(PosKind) == sizeof(int) &&
                   sizeof(ThreadSplit) == sizeof(int),
               "a choice is stored through an int *");

const Setting *setting_named(const char *name) {
    for (int i = 0; i < NUM_TRAIN_SETTINGS; i++)
        if (strcmp(TRAIN_SETTINGS[i].name, name) == 0) return &TRAIN_SETTINGS[i];
    assert(!"setting_named: no such setting");
    return NULL;
}
