// checkpoint.h: save and load the model as a standard .safetensors file,
// and AdamW's state as another, beside it (at the end of this header).
//
// Reading order: file 18, after model.h, and after json.h, read first in
// the same entry.
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian
// header length N; N bytes of JSON; then the raw little-endian F32 data.
// The JSON maps each tensor name (see the parameter table in model.h) to
// {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} and holds a
// "__metadata__" object of strings: the tokenizer (a char model's "vocab";
// a bpe model's "tokenizer": "bpe" and "merges"), vocab_size, n_embd,
// n_head, block_size, arch ("card" or "gpt"), n_layer (the number of
// blocks; 1 for card), no_layernorm, no_mlp and no_residual ("1", only for
// a gpt with that part removed), dropout, step, and "format": "tinygpt-1";
// from `train`, also the run's TrainState (below), which the loader ignores
// unless resuming, and which holds no file path. A file without "arch"
// (saved before gpt existed) is a card model with one block; one without
// "tokenizer" is a char model. README.md, "Checkpoint format", lists every
// key.
#ifndef TINYGPT_CHECKPOINT_H
#define TINYGPT_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "optimizer.h"
#include "tokenizer.h"

// What `train --resume` needs besides the weights and the step to continue a
// run exactly as if it had never stopped: the flags that shape the run, the
// state of the random stream that draws the batches, which text it trains
// on (its length and fingerprint), and how the optimizer is set (AdamW's
// moments are too large for metadata: they go in their own file, see
// optimizer_state_save; plain SGD keeps no state. Dropout masks and
// validation batches are functions of the seed and the step, so they need
// nothing.) Saved in __metadata__ as strings under the keys in quotes; whole
// numbers in decimal.
//
// Where the text is on this machine is not in the model: a model handed on
// must not carry its trainer's file paths. `train` keeps the path in the run
// directory's run.json instead (train.c). Files saved before that have it
// under "data", which checkpoint_read_state still reads, so their runs resume.
typedef struct {
    char data_path[4096];   // "data", read only: the training file's path in an older file ("" if none); never saved
    uint64_t data_tokens;   // "data_tokens": how many tokens it had
    uint64_t data_hash;     // "data_hash": dataset_hash of those tokens
    uint64_t seed;          // "seed"
    uint64_t batch_rng;     // "batch_rng": the batch Rng's state after "step" steps (never 0)
    long steps;             // "steps": --steps, the step the run ends at
    int batch;              // "batch": --batch
    float lr;               // "lr": --lr, to 9 digits, which round-trip a float exactly
    float val_fraction;     // "val_fraction": --val-fraction, likewise
    int eval_interval;      // "eval_interval"
    int eval_batches;       // "eval_batches"
    long save_every;        // "save_every": --save-every
    char order[16];         // "order": "random" or "sequential"
    // The optimizer's flags ("optimizer" "sgd"/"adamw", "lr_schedule"
    // "constant"/"cosine", "warmup", "min_lr", "grad_clip", "beta1", "beta2",
    // "weight_decay"); a checkpoint older than them trained with plain SGD
    // at a constant rate, and reads as that. lr is "lr" above; decay_steps
    // is "steps".
    OptimizerConfig optimizer;
} TrainState;

// checkpoint_save: write parameters, vocabulary and "step" to "path". Writes
// "path".tmp, flushes it to disk (fsync), renames it over "path" and flushes
// the directory, so a crash leaves either the old file or the new one, never
// half of one. "state" (may be NULL) is the run's TrainState.
bool checkpoint_save(const Model *m, const Tokenizer *tok, long step, const char *path, Error *err);
bool checkpoint_save_with_state(const Model *m, const Tokenizer *tok, long step, const TrainState *state,
                                const char *path, Error *err);

// checkpoint_read_state: the TrainState and step saved in "path", reading
// and checking only its header (the weights are checkpoint_load's job). Fails,
// saying to use --init instead, when the file holds no training state (it was
// written by an older tinygpt), and on any damaged or out-of-range value.
bool checkpoint_read_state(const char *path, TrainState *state, long *step, Error *err);

// checkpoint_load: validate "path" completely (header size, JSON, the
// architecture and n_layer, names: exactly the tensors param_table gives for
// the metadata's config, dtypes, shapes, offsets inside the file, metadata
// agreeing with the shapes, vocabulary, finite weights) and only then build
// "m" (model_init with "max_batch" and "with_grads"), its weights, and "tok". "*step" gets the saved step (may be
// NULL). On failure nothing is left allocated and "err" says what is wrong.
bool checkpoint_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads,
                     long *step, Error *err);

// ---- AdamW's state: DIR/optimizer.safetensors, next to DIR/model.safetensors ----
//
// The model file stays a model that sample, eval and PyTorch read alone;
// AdamW's moments (as large as the weights, twice) go in a file of their own,
// also a standard safetensors file. It holds, all F32 with the parameter's
// shape: "exp_avg.<name>" (m) for every parameter <name> of param_table, in
// table order, then "exp_avg_sq.<name>" (v) for every one, in the same order
// (torch.optim.AdamW's names for the two moments), so its data section is m's
// buffer followed by v's. Its "__metadata__" strings: "format":
// "tinygpt-optimizer-1", "optimizer": "adamw", "step": the training step the
// state belongs to (the "step" of the model checkpoint saved with it), and
// "updates": how many AdamW updates made it (Optimizer.step, AdamW's t; equal
// to "step" for a run that used AdamW from its first step).

// optimizer_state_save: opt's moments and update count, belonging to the
// weights of training step "step", to "path". Written as checkpoints are
// (path.tmp, fsync, rename, directory sync), so a crash leaves the old file
// or the new one. "opt" must be AdamW, built for "m" (optimizer_init).
bool optimizer_state_save(const Optimizer *opt, const Model *m, long step, const char *path, Error *err);

// optimizer_state_load: validate "path" completely against m's parameter
// table (header size, JSON, format, names: none missing, none extra; shapes;
// dtypes; offsets inside the file and not overlapping; finite values,
// exp_avg_sq >= 0; updates >= 0) and only then fill opt->m, opt->v and
// opt->step ("opt" must be AdamW, optimizer_init'ed for "m"). "*step" gets
// the saved training step (may be NULL). On failure "opt" and "*step" are
// unchanged, nothing stays allocated, and "err" is one line naming the file,
// what is wrong and what to do.
bool optimizer_state_load(Optimizer *opt, const Model *m, const char *path, long *step, Error *err);

#endif
