// data.h: a text file as a train/validation token stream, cut into batches.
//
// Reading order: file 4. The model learns to predict token t+1 from tokens
// 0..t, so a training example is a window of T+1 consecutive tokens: the
// first T are the inputs, the last T (shifted by one) are the targets.
#ifndef TINYGPT_DATA_H
#define TINYGPT_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "rng.h"
#include "tokenizer.h"

// A run of token ids, stored compactly: "width" bytes per id, the fewest
// that hold every id of the vocabulary (1 when V <= 256, 2 when V <= 65536,
// else 4). Most texts have fewer than 256 distinct characters, so their
// tokens take one byte each, no more memory than the file itself.
typedef struct {
    const void *ids;  // [n] ids of "width" bytes each: uint8_t, uint16_t or int32_t
    size_t n;
    int width;        // 1, 2 or 4
} TokenSpan;

// token_at: id number "i" of "span" (i < span.n).
static inline int token_at(TokenSpan span, size_t i) {
    if (span.width == 1) return ((const uint8_t *)span.ids)[i];
    if (span.width == 2) return ((const uint16_t *)span.ids)[i];
    return ((const int32_t *)span.ids)[i];
}

// token_width: the bytes per id for a vocabulary of "vocab_size" tokens.
static inline int token_width(int vocab_size) { return vocab_size <= 256 ? 1 : vocab_size <= 65536 ? 2 : 4; }

typedef struct {
    void *ids;        // [n_tokens] the whole file, encoded, "width" bytes per id
    int width;        // token_width(V)
    size_t n_tokens;
    size_t n_train;   // ids [0, n_train) train; [n_train, n_tokens) validation
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
// dataset_train / dataset_val: the two splits, as spans of the same ids.
TokenSpan dataset_train(const Dataset *ds);
TokenSpan dataset_val(const Dataset *ds);
// dataset_hash: a 64-bit fingerprint (FNV-1a) of the ids and their width,
// so a resumed run can check that it is given the same text.
uint64_t dataset_hash(const Dataset *ds);

// batch_random: B windows at starts drawn uniformly from [0, n - T).
// inputs[b,t] = tokens[start_b + t], targets[b,t] = tokens[start_b + t + 1].
// Needs n >= T + 1. inputs, targets: [B,T].
void batch_random(TokenSpan tokens, int B, int T, Rng *rng, int *inputs, int *targets);

// batch_sequential: batch number "step", row b starting at
// ((step*B + b) * T) mod (n - T), so another program can replay the batches.
void batch_sequential(TokenSpan tokens, long step, int B, int T, int *inputs, int *targets);

#endif
