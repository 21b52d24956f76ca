// data.h: a text file as a train/validation token stream, cut into batches.
//
// Reading order: file 4. The model learns to predict token t+1 from tokens
// 0..t, so a training example is a window of T+1 consecutive tokens: the
// first T are the inputs, the last T (shifted by one) are the targets.
#ifndef TINYGPT_DATA_H
#define TINYGPT_DATA_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"
#include "rng.h"
#include "tokenizer.h"

typedef struct {
    int *tokens;      // [n_tokens] the whole file, encoded
    size_t n_tokens;
    size_t n_train;   // tokens[0, n_train) train; tokens[n_train, n_tokens) validation
} Dataset;

// dataset_load: read and encode "path". If "build_vocab", the tokenizer is
// built from the file; otherwise "tok" already holds a vocabulary (from a
// checkpoint) and a character outside it is an error. The validation split
// is the last floor(n_tokens * val_fraction) tokens. Fails (naming the file
// and the fix) when the file is missing, empty, invalid UTF-8, or when a
// non-empty split is shorter than one window of context + 1 tokens, or
// "val_fraction" is outside [0, 1). On failure nothing is left allocated:
// "ds" is empty, and a tokenizer built here has been freed again.
bool dataset_load(Dataset *ds, Tokenizer *tok, bool build_vocab, const char *path,
                  double val_fraction, int context, Error *err);
// dataset_free: release the tokens; safe on a zeroed or freed dataset.
void dataset_free(Dataset *ds);

// batch_random: B windows at starts drawn uniformly from [0, n - T).
// inputs[b,t] = tokens[start_b + t], targets[b,t] = tokens[start_b + t + 1].
// Needs n >= T + 1. inputs, targets: [B,T].
void batch_random(const int *tokens, size_t n, int B, int T, Rng *rng, int *inputs, int *targets);

// batch_sequential: batch number "step", row b starting at
// ((step*B + b) * T) mod (n - T), so another program can replay the batches.
void batch_sequential(const int *tokens, size_t n, long step, int B, int T, int *inputs, int *targets);

#endif
