// data.h: a text file as a train/validation token stream, cut into batches.
//
// Reading order: file 24. The model learns to predict token t+1 from tokens
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
// else 4). Most texts have fewer than 256 distinct characters, so a char
// model's tokens take one byte each, no more memory than the file itself; a
// bpe vocabulary (257 tokens or more) takes two.
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
    size_t val_bytes; // the validation split's length in bytes of text (bits per byte)
} Dataset;

// Build a char tokenizer from the file (dataset_load's "learn").
static const TokenizerSpec LEARN_CHARS = {TOKENIZER_CHAR, 0, false};

// dataset_load: read and encode "path" ("-": standard input, at most
// "max_bytes" of it). If "learn" is not NULL, the
// tokenizer is built from the file as it says; otherwise "tok" already holds
// one (from a checkpoint), and for char a character outside its vocabulary is
// an error. The validation split is the last floor(n_chars * val_fraction)
// characters of the text, the same text for both kinds of tokenizer (for
// char, n_chars is n_tokens). char builds its vocabulary from the whole file
// (a character seen only in validation must have an id); bpe learns its
// merges from the training split only, and encodes the two splits apart, so
// no token spans the boundary. Fails (naming the file
// and the fix) when the file is missing, empty, invalid UTF-8, or when a
// non-empty split is shorter than one window of context + 1 tokens, or
// "val_fraction" is outside [0, 1). On failure nothing is left allocated:
// "ds" is empty, and a tokenizer built here has been freed again.
bool dataset_load(Dataset *ds, Tokenizer *tok, const TokenizerSpec *learn, const char *path, size_t max_bytes,
                  double val_fraction, int context, Error *err);
// dataset_free: release the tokens; safe on a zeroed or freed dataset.
void dataset_free(Dataset *ds);
// dataset_train / dataset_val: the two splits, as spans of the same ids.
TokenSpan dataset_train(const Dataset *ds);
TokenSpan dataset_val(const Dataset *ds);
// dataset_hash: a 64-bit fingerprint (FNV-1a) of the ids and their width,
// so a resumed run can check that it is given the same text.
uint64_t dataset_hash(const Dataset *ds);

// bits_per_byte: a loss of "nats_per_token" over a text of "tokens" tokens
// and "bytes" bytes, in bits per byte of text: nats * tokens / (bytes * ln 2).
// Tokenizers cut text differently, so per-token losses of a char and a bpe
// model do not compare; per byte of the same text they do.
double bits_per_byte(double nats_per_token, size_t tokens, size_t bytes);

// The three batch orders (train's --order): random windows, shuffled ones
// (every window once an epoch), or sequential ones that another program can
// replay. ORDER_NAMES: their names, indexed by BatchOrder, NULL-terminated.
typedef enum { ORDER_RANDOM, ORDER_SEQUENTIAL, ORDER_SHUFFLED } BatchOrder;
extern const char *const ORDER_NAMES[];

// batch_random: B windows at starts drawn uniformly from [0, n - T).
// inputs[b,t] = tokens[start_b + t], targets[b,t] = tokens[start_b + t + 1].
// Needs n >= T + 1. inputs, targets: [B,T].
void batch_random(TokenSpan tokens, int B, int T, Rng *rng, int *inputs, int *targets);

// batch_sequential: batch number "step", row b starting at
// ((step*B + b) * T) mod (n - T), so another program can replay the batches.
void batch_sequential(TokenSpan tokens, long step, int B, int T, int *inputs, int *targets);

// A part of a batch, for a step cut into micro-batches (--grad-accum) or
// split over processes (mpirun): each part holds exactly the rows the whole
// batch would have held there, so the parts together are the whole batch.
//
// batch_random_rows: rows "first" .. "first" + "rows" - 1 of batch_random's
// B-row batch: all B starts are drawn (the stream ends where the whole
// batch leaves it), the chosen rows are copied to inputs[0..rows).
// batch_sequential_rows: windows "window" .. "window" + "rows" - 1 in
// batch_sequential's numbering (row b of batch s is window s*B + b).
void batch_random_rows(TokenSpan tokens, int B, int first, int rows, int T, Rng *rng, int *inputs, int *targets);
void batch_sequential_rows(TokenSpan tokens, uint64_t window, int rows, int T, int *inputs, int *targets);

// The shuffled order: epochs. Windows drawn one at a time (batch_random)
// read some stretches of the text several times in an epoch's worth of
// steps and leave others unread; a shuffled order reads every window of the
// split once an epoch, in a new order each epoch (PyTorch's
// DataLoader(shuffle=True)). A model that sees its text several times over,
// as a minute on tiny Shakespeare does, learns more from it so.
//
// Epoch e lays its windows end to end from an offset phase_e in
// [0, phases), so that over the epochs a window's edges move through the
// text, and reads them in the order of a permutation of [0, windows). Both
// are drawn from (seed, e) alone, and the permutation is computed, not
// stored (a keyed bijection: shuffled_position in data.c): window number g
// (row b of batch s is window s*B + b, as in batch_sequential) is the same
// in a run that got there without stopping and in one resumed on the way,
// a checkpoint has nothing to keep, and a text of any size costs no memory
// for it (a stored permutation took 8 bytes a window: 100 MB for a 100 MB
// text in windows of 8).
typedef struct {
    size_t windows;  // windows an epoch reads: (n - phases) / T, every epoch as many
    size_t phases;   // offsets an epoch's windows are laid from: min(T, n - T)
    uint64_t seed;
    int half_bits;   // h: the permutation's network works on [0, 4^h) >= windows
} ShuffledOrder;

// shuffled_order: the order of "tokens"' windows of T for "seed" (n >= T + 1).
ShuffledOrder shuffled_order(TokenSpan tokens, int T, uint64_t seed);
// batch_shuffled_rows: windows "window" .. window + rows - 1 of the shuffled
// order into rows 0 .. rows - 1 (inputs, targets [rows,T]).
void batch_shuffled_rows(const ShuffledOrder *order, TokenSpan tokens, uint64_t window, int rows, int T, int *inputs,
                         int *targets);

// batch_spread: rows "first" .. "first" + B - 1 of "chosen" windows spread
// evenly over the span's whole windows, laid end to end (window k starts
// at k*T; there are (n - 1) / T of them, n >= T + 1): row r is window
// floor(r * windows / chosen). With chosen equal to that count: every
// whole window once, as `tinygpt eval` takes them.
size_t span_windows(TokenSpan tokens, int T);
void batch_spread(TokenSpan tokens, size_t first, int B, size_t chosen, int T, int *inputs, int *targets);

#endif
