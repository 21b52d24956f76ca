// data.c: load a text file as tokens, split it, and cut batches (see data.h).
//
// Reading order: file 4, after tokenizer.c.
//
// What it does: reads the whole file, encodes it with the tokenizer, keeps
// the first part for training and the last part for validation, and copies
// windows of T + 1 tokens into [B,T] input and target arrays. What it leaves
// out: streaming files larger than memory, shuffling the split, and any
// document boundaries (the file is one long stream of characters).
//
// Memory: during encoding the raw text (1 byte per ASCII character) and the
// ids (4 bytes per character) exist together; the text is freed as soon as
// the ids exist, so training holds only the ids.
#include "data.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- Loading ----------------------------------------------------------------

// dataset_load: the steps, in order:
//   1. read the whole file (fopen_checked names a missing file or a directory),
//   2. refuse an empty file,
//   3. build the vocabulary from the text, or keep the one given in "tok",
//   4. encode the text to ids and free the text,
//   5. split: the last floor(n_tokens * val_fraction) tokens are validation,
//   6. check that each non-empty split holds at least one window of
//      context + 1 tokens (T inputs and, shifted by one, T targets).
// On failure "ds" is left empty, and "tok" is freed only if it was built here.
bool dataset_load(Dataset *ds, Tokenizer *tok, bool build_vocab, const char *path,
                  double val_fraction, int context, Error *err) {
    assert(context >= 1);
    memset(ds, 0, sizeof *ds);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
        return error_set(err, "--val-fraction %g is outside [0, 1); use e.g. 0.1, or 0 for no validation split",
                         val_fraction);
    }

    // 1-2. Read, refuse an empty file.
    char *text;
    size_t len;
    if (!read_file(path, &text, &len, err)) return false;
    if (len == 0) {
        free(text);
        return error_set(err, "'%s' is empty; give a text file with some text in it", path);
    }

    // 3-4. Vocabulary, then ids. The tokenizer reports invalid UTF-8 and
    // unknown characters with the file name and byte offset.
    if (build_vocab && !tokenizer_build(tok, text, len, path, err)) {
        free(text);
        return false;
    }
    int *tokens;
    size_t n_tokens;
    bool encoded = tokenizer_encode(tok, text, len, &tokens, &n_tokens, path, err);
    free(text);
    if (!encoded) {
        if (build_vocab) tokenizer_free(tok);
        return false;
    }

    // 5. Split. floor() of the product, as Python's int(n * val_fraction),
    // so another program can compute the same split.
    size_t n_val = (size_t)floor((double)n_tokens * val_fraction);
    size_t n_train = n_tokens - n_val;
    size_t window = (size_t)context + 1;

    // 6. Each split must hold at least one window.
    bool ok = true;
    if (n_train < window) {
        ok = error_set(err, "'%s' has only %zu training tokens, fewer than one window of --context %d + 1; use a longer file or a smaller --context",
                       path, n_train, context);
    } else if (n_val > 0 && n_val < window) {
        ok = error_set(err, "'%s' has only %zu validation tokens (--val-fraction %g), fewer than one window of --context %d + 1; use a smaller --context, a larger --val-fraction, or --val-fraction 0",
                       path, n_val, val_fraction, context);
    }
    if (!ok) {
        free(tokens);
        if (build_vocab) tokenizer_free(tok);
        return false;
    }

    ds->tokens = tokens;
    ds->n_tokens = n_tokens;
    ds->n_train = n_train;
    return true;
}

// dataset_free: release the tokens; safe on a zeroed or freed dataset.
void dataset_free(Dataset *ds) {
    free(ds->tokens);
    memset(ds, 0, sizeof *ds);
}

// ---- Batches ----------------------------------------------------------------

// copy_window: row "b" of the batch is the window starting at "start":
// inputs[b,:] = tokens[start .. start+T), targets[b,:] = tokens[start+1 .. start+T].
static void copy_window(const int *tokens, size_t start, int b, int T, int *inputs, int *targets) {
    int *in_b = inputs + (size_t)b * (size_t)T;    // inputs[b,:]
    int *tgt_b = targets + (size_t)b * (size_t)T;  // targets[b,:]
    memcpy(in_b, tokens + start, (size_t)T * sizeof *in_b);
    memcpy(tgt_b, tokens + start + 1, (size_t)T * sizeof *tgt_b);
}

// batch_random: each row starts at an independent uniform draw from
// [0, n - T); the largest start, n - T - 1, still leaves room for the last
// target at index n - 1.
void batch_random(const int *tokens, size_t n, int B, int T, Rng *rng, int *inputs, int *targets) {
    assert(B >= 1 && T >= 1 && n >= (size_t)T + 1);
    for (int b = 0; b < B; b++) {
        size_t start = (size_t)rng_below(rng, (uint64_t)(n - (size_t)T));
        copy_window(tokens, start, b, T, inputs, targets);
    }
}

// batch_sequential: row b of batch "step" is window number step*B + b, laid
// end to end (T tokens apart) and wrapped around the n - T possible starts.
// Unsigned 64-bit arithmetic, so the formula is the same on every platform
// and a replaying program can compute it exactly.
void batch_sequential(const int *tokens, size_t n, long step, int B, int T, int *inputs, int *targets) {
    assert(B >= 1 && T >= 1 && step >= 0 && n >= (size_t)T + 1);
    uint64_t n_starts = (uint64_t)n - (uint64_t)T;
    for (int b = 0; b < B; b++) {
        uint64_t window = (uint64_t)step * (uint64_t)B + (uint64_t)b;
        size_t start = (size_t)((window * (uint64_t)T) % n_starts);
        copy_window(tokens, start, b, T, inputs, targets);
    }
}
