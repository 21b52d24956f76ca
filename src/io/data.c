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
// Memory: a file of N bytes is read into one buffer of N bytes (sized from
// the file, not grown by doubling), and when the vocabulary has at most 256
// characters (nearly every text) the ids are written over the text in that
// same buffer: peak memory is the file's size. With a larger vocabulary the
// ids (2 or 4 bytes each) get a buffer of their own, and the text is freed
// as soon as they exist.
#include "data.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// ---- Loading ----------------------------------------------------------------

// store_id: write "id" as element "i" of an array of "width"-byte ids.
static void store_id(void *ids, int width, size_t i, int id) {
    if (width == 1) ((uint8_t *)ids)[i] = (uint8_t)id;
    else if (width == 2) ((uint16_t *)ids)[i] = (uint16_t)id;
    else ((int32_t *)ids)[i] = id;
}

// encode_compact: the ids of "text" ("len" bytes), "width" bytes each, in a
// buffer the caller frees; "text" is consumed (freed, or reused). NULL (with
// "err" set) on invalid UTF-8 or an unknown character.
//
// One-byte ids are written over the text itself: character k starts at byte
// k or later (every character takes at least one byte), so id k lands on a
// byte that has already been read. Wider ids get a buffer of their own, sized
// by the number of bytes that can start a character (every byte except
// continuation bytes 10xxxxxx), which is the number of characters when the
// text is valid UTF-8.
static void *encode_compact(const Tokenizer *tok, char *text, size_t len, int width, size_t *n_ids,
                            const char *path, Error *err) {
    void *ids = text;
    if (width > 1) {
        size_t starts = 0;
        for (size_t i = 0; i < len; i++) starts += ((unsigned char)text[i] & 0xC0) != 0x80;
        ids = xmalloc(starts * (size_t)width);
    }
    size_t n = 0;
    for (size_t pos = 0; pos < len;) {
        int id = tokenizer_next(tok, text, len, &pos, path, err);
        if (id < 0) {
            if (ids != text) free(ids);
            free(text);
            return NULL;
        }
        store_id(ids, width, n++, id);
    }
    if (ids != text) free(text);
    *n_ids = n;
    // No shrinking realloc: wider ids fill their buffer exactly (valid UTF-8
    // has exactly one starting byte per character), and one-byte ids leave
    // only the spare bytes of multi-byte characters, while some allocators
    // (AddressSanitizer's, for one) would copy the whole buffer to shrink it,
    // doubling the peak.
    return ids;
}

// dataset_load: the steps, in order:
//   1. read the whole file (fopen_checked names a missing file or a directory),
//   2. refuse an empty file,
//   3. build the vocabulary from the text, or keep the one given in "tok"
//      and check that the text is text (tokenizer_check_text),
//   4. encode the text to ids (in place when they fit in a byte, see
//      encode_compact) and free the text,
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
    // unknown characters with the file name and byte offset. Building the
    // vocabulary reads the whole text first, so it finds a binary file
    // before anything else; with a checkpoint's vocabulary, the text is
    // checked whole first too, or a binary file would be reported by its
    // first character the vocabulary lacks.
    bool text_ok = build_vocab ? tokenizer_build(tok, text, len, path, err) : tokenizer_check_text(text, len, path, err);
    if (!text_ok) {
        free(text);
        return false;
    }
    int width = token_width(tok->vocab_size);
    size_t n_tokens;
    void *ids = encode_compact(tok, text, len, width, &n_tokens, path, err);
    if (!ids) {
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
        free(ids);
        if (build_vocab) tokenizer_free(tok);
        return false;
    }

    ds->ids = ids;
    ds->width = width;
    ds->n_tokens = n_tokens;
    ds->n_train = n_train;
    return true;
}

// dataset_free: release the tokens; safe on a zeroed or freed dataset.
void dataset_free(Dataset *ds) {
    free(ds->ids);
    memset(ds, 0, sizeof *ds);
}

TokenSpan dataset_train(const Dataset *ds) { return (TokenSpan){ds->ids, ds->n_train, ds->width}; }

TokenSpan dataset_val(const Dataset *ds) {
    const char *first = (const char *)ds->ids + ds->n_train * (size_t)ds->width;
    return (TokenSpan){first, ds->n_tokens - ds->n_train, ds->width};
}

// dataset_hash: 64-bit FNV-1a over the width and then every byte of the ids.
// Not cryptographic: it only has to notice a different text given by mistake.
uint64_t dataset_hash(const Dataset *ds) {
    uint64_t h = 0xCBF29CE484222325ull;  // the FNV-1a offset basis
    const unsigned char *bytes = ds->ids;
    size_t n = ds->n_tokens * (size_t)ds->width;
    h = (h ^ (uint64_t)ds->width) * 0x100000001B3ull;  // the FNV prime
    for (size_t i = 0; i < n; i++) h = (h ^ bytes[i]) * 0x100000001B3ull;
    return h;
}

// ---- Batches ----------------------------------------------------------------

// copy_window: row "b" of the batch is the window starting at "start":
// inputs[b,:] = tokens[start .. start+T), targets[b,:] = tokens[start+1 .. start+T].
static void copy_window(TokenSpan tokens, size_t start, int b, int T, int *inputs, int *targets) {
    int *in_b = inputs + (size_t)b * (size_t)T;    // inputs[b,:]
    int *tgt_b = targets + (size_t)b * (size_t)T;  // targets[b,:]
    for (int t = 0; t < T; t++) {
        in_b[t] = token_at(tokens, start + (size_t)t);
        tgt_b[t] = token_at(tokens, start + (size_t)t + 1);
    }
}

// batch_random: each row starts at an independent uniform draw from
// [0, n - T); the largest start, n - T - 1, still leaves room for the last
// target at index n - 1.
void batch_random(TokenSpan tokens, int B, int T, Rng *rng, int *inputs, int *targets) {
    assert(B >= 1 && T >= 1 && tokens.n >= (size_t)T + 1);
    for (int b = 0; b < B; b++) {
        size_t start = (size_t)rng_below(rng, (uint64_t)(tokens.n - (size_t)T));
        copy_window(tokens, start, b, T, inputs, targets);
    }
}

// batch_sequential: row b of batch "step" is window number step*B + b, laid
// end to end (T tokens apart) and wrapped around the n - T possible starts.
// Unsigned 64-bit arithmetic, so the formula is the same on every platform
// and a replaying program can compute it exactly.
void batch_sequential(TokenSpan tokens, long step, int B, int T, int *inputs, int *targets) {
    assert(B >= 1 && T >= 1 && step >= 0 && tokens.n >= (size_t)T + 1);
    uint64_t n_starts = (uint64_t)tokens.n - (uint64_t)T;
    for (int b = 0; b < B; b++) {
        uint64_t window = (uint64_t)step * (uint64_t)B + (uint64_t)b;
        size_t start = (size_t)((window * (uint64_t)T) % n_starts);
        copy_window(tokens, start, b, T, inputs, targets);
    }
}
