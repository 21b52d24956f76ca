// checkpoint.h: save and load the model as a standard .safetensors file.
//
// Reading order: file 16 (after model.h and json.h).
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian
// header length N; N bytes of JSON; then the raw little-endian F32 data.
// The JSON maps each tensor name (see the parameter table in model.h) to
// {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} and holds a
// "__metadata__" object of strings: vocab, n_embd, n_head, block_size,
// vocab_size, arch ("card" or "gpt"), n_layer (the number of blocks; 1 for
// card), dropout, step, and "format": "tinygpt-1"; from `train`, also the
// run's TrainState (below), which the loader ignores unless resuming. A file
// without "arch" (saved before gpt existed) is a card model with one block.
#ifndef TINYGPT_CHECKPOINT_H
#define TINYGPT_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "tokenizer.h"

// What `train --resume` needs besides the weights and the step to continue a
// run exactly as if it had never stopped: the flags that shape the run, the
// state of the random stream that draws the batches, and which text it
// trains on. (Plain SGD keeps no optimizer state, no momentum or moments: the
// weights are all of it. Dropout masks and validation batches are functions
// of the seed and the step, so they need nothing.) Saved in __metadata__ as
// strings under the keys in quotes; whole numbers in decimal.
typedef struct {
    char data_path[4096];   // "data": the training file's absolute path ("" if unknown)
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

#endif
