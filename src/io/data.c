// data.c: load a text file as tokens, split it, and cut batches (see data.h).
//
// Reading order: file 24, after tokenizer.c.
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
// as soon as they exist. A bpe tokenizer's ids (2 bytes each for up to 65536
// tokens) likewise get a buffer of their own, grown as the text is encoded.
#include "data.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"  // utf8_count, utf8_prefix: the split counts characters

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
        ids = xmalloc(utf8_count(text, len) * (size_t)width);
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

// split_byte: where the last floor(n_chars * val_fraction) characters of
// "text" begin, in bytes; "*n_val_chars" gets their count. floor() of the
// product, as Python's int(n * val_fraction), so another program can compute
// the same split. Counts characters as utf8_count does: for invalid UTF-8
// the count is off, but then encoding fails anyway.
static size_t split_byte(const char *text, size_t len, double val_fraction, size_t *n_val_chars) {
    size_t n_chars = utf8_count(text, len);
    *n_val_chars = (size_t)floor((double)n_chars * val_fraction);
    return utf8_prefix(text, len, n_chars - *n_val_chars);
}

// encode_bpe_part: append the bpe ids of text[0, len) to the growing array
// "*ids" ("*n" ids of "width" bytes, room for "*cap"). The text goes to
// bpe_encode in blocks of about a megabyte that end on a chunk boundary, so
// the ids are those of one call on the whole text while the int buffer
// bpe_encode needs stays small.
// A gpt2 tokenizer's blocks end on its own (GPT-2's) chunk boundaries, and
// its ids are renumbered as GPT-2 numbers them (tokenizer.h).
static void encode_bpe_part(Tokenizer *tok, const char *text, size_t len, int width, void **ids, size_t *n,
                            size_t *cap) {
    size_t block_cap = 1 << 20;  // bytes per block, and so ids per block at most
    int *block_ids = xmalloc(block_cap * sizeof *block_ids);
    for (size_t begin = 0; begin < len;) {
        size_t end = begin;
        while (end < len && end - begin < (1 << 20)) end += chunk_len(text + end, len - end, tok->bpe.rules);
        // The last chunk can take a block past a megabyte (a chunk can be as
        // long as the text): make room for it.
        if (end - begin > block_cap) {
            block_cap = end - begin;
            block_ids = xrealloc(block_ids, block_cap * sizeof *block_ids);
        }
        size_t count = bpe_encode(&tok->bpe, text + begin, end - begin, block_ids);
        if (*n + count > *cap) {
            *cap = (*n + count) * 3 / 2;
            *ids = xrealloc(*ids, *cap * (size_t)width);
        }
        const bool gpt2 = tok->kind == TOKENIZER_GPT2;
        for (size_t i = 0; i < count; i++) store_id(*ids, width, (*n)++, gpt2 ? tok->gpt2_of_bpe[block_ids[i]] : block_ids[i]);
        begin = end;
    }
    free(block_ids);
}

// load_bpe: steps 3-5 of dataset_load for a bpe tokenizer: check the text,
// learn the merges from the training split (if "learn"), encode each split.
static void *load_bpe(Tokenizer *tok, const TokenizerSpec *learn, char *text, size_t len, size_t train_len,
                      size_t *n_tokens, size_t *n_train, const char *path, Error *err) {
    if (!tokenizer_check_text(text, len, path, err) ||
        (learn && !tokenizer_learn(tok, learn, text, train_len, path, err))) {
        free(text);
        return NULL;
    }
    int width = token_width(tok->vocab_size);
    void *ids = NULL;
    size_t n = 0, cap = 0;
    encode_bpe_part(tok, text, train_len, width, &ids, &n, &cap);
    *n_train = n;
    encode_bpe_part(tok, text + train_len, len - train_len, width, &ids, &n, &cap);
    free(text);
    *n_tokens = n;
    return ids;
}

// dataset_load: the steps, in order:
//   1. read the whole file (fopen_checked names a missing file or a directory),
//   2. refuse an empty file, and find the split (split_byte),
//   3. build the tokenizer from the text (if "learn"), or keep "tok" and
//      check that the text is text (tokenizer_check_text),
//   4. encode the text to ids (char: in place when they fit in a byte, see
//      encode_compact; bpe: each split apart) and free the text,
//   5. split: the ids of the last floor(n_chars * val_fraction) characters
//      are validation,
//   6. check that each non-empty split holds at least one window of
//      context + 1 tokens (T inputs and, shifted by one, T targets).
// On failure "ds" is left empty, and "tok" is freed only if it was built here.
bool dataset_load(Dataset *ds, Tokenizer *tok, const TokenizerSpec *learn, const char *path, size_t max_bytes,
                  double val_fraction, int context, Error *err) {
    assert(context >= 1);
    memset(ds, 0, sizeof *ds);
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
        return error_set(err, "--val-fraction %g is outside [0, 1); use e.g. 0.1, or 0 for no validation split",
                         val_fraction);
    }

    // 1-2. Read, refuse an empty file, find the split.
    char *text;
    size_t len;
    if (!read_text_source(path, max_bytes, &text, &len, err)) return false;
    path = text_source_name(path);  // "-" is "standard input" in what follows
    if (len == 0) {
        free(text);
        return error_set(err, "'%s' is empty; give a text file with some text in it", path);
    }
    size_t n_val_chars;
    size_t train_len = split_byte(text, len, val_fraction, &n_val_chars);

    // 3-5. Tokenizer, then ids. The tokenizer reports invalid UTF-8 and
    // unknown characters with the file name and byte offset. Building a char
    // vocabulary reads the whole text first, so it finds a binary file
    // before anything else; with a checkpoint's vocabulary, the text is
    // checked whole first too, or a binary file would be reported by its
    // first character the vocabulary lacks (load_bpe checks it likewise).
    const TokenizerKind kind = learn ? learn->kind : tok->kind;
    bool bpe = kind == TOKENIZER_BPE || kind == TOKENIZER_GPT2;  // byte-level: bpe's, or GPT-2's, never learned here
    size_t n_tokens, n_train;
    void *ids;
    if (bpe) {
        ids = load_bpe(tok, learn, text, len, train_len, &n_tokens, &n_train, path, err);
    } else {
        bool text_ok = learn ? tokenizer_build(tok, text, len, path, err) : tokenizer_check_text(text, len, path, err);
        if (!text_ok) {
            free(text);
            return false;
        }
        ids = encode_compact(tok, text, len, token_width(tok->vocab_size), &n_tokens, path, err);
        n_train = n_tokens - n_val_chars;  // one token per character
    }
    if (!ids) {
        if (learn) tokenizer_free(tok);
        return false;
    }
    size_t n_val = n_tokens - n_train;
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
        if (learn) tokenizer_free(tok);
        return false;
    }

    ds->ids = ids;
    ds->width = token_width(tok->vocab_size);
    ds->n_tokens = n_tokens;
    ds->n_train = n_train;
    ds->val_bytes = len - train_len;
    return true;
}

double bits_per_byte(double nats_per_token, size_t tokens, size_t bytes) {
    return nats_per_token * (double)tokens / ((double)bytes * log(2.0));
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

const char *const ORDER_NAMES[] = {"random", "sequential", "shuffled", NULL};

// batch_random: each row starts at an independent uniform draw from
// [0, n - T); the largest start, n - T - 1, still leaves room for the last
// target at index n - 1.
void batch_random(TokenSpan tokens, int B, int T, Rng *rng, int *inputs, int *targets) {
    batch_random_rows(tokens, B, 0, B, T, rng, inputs, targets);
}

// batch_random_rows: one draw per row, kept or not, so that a part's rows
// are the whole batch's, whichever part asks (a draw is a few
// instructions; a copied window is T tokens).
void batch_random_rows(TokenSpan tokens, int B, int first, int rows, int T, Rng *rng, int *inputs, int *targets) {
    assert(B >= 1 && T >= 1 && tokens.n >= (size_t)T + 1 && first >= 0 && rows >= 0 && first + rows <= B);
    for (int b = 0; b < B; b++) {
        size_t start = (size_t)rng_below(rng, (uint64_t)(tokens.n - (size_t)T));
        if (b >= first && b < first + rows) copy_window(tokens, start, b - first, T, inputs, targets);
    }
}

// batch_sequential: row b of batch "step" is window number step*B + b, laid
// end to end (T tokens apart) and wrapped around the n - T possible starts.
// Unsigned 64-bit arithmetic, so the formula is the same on every platform
// and a replaying program can compute it exactly.
void batch_sequential(TokenSpan tokens, long step, int B, int T, int *inputs, int *targets) {
    assert(B >= 1 && step >= 0);
    batch_sequential_rows(tokens, (uint64_t)step * (uint64_t)B, B, T, inputs, targets);
}

void batch_sequential_rows(TokenSpan tokens, uint64_t window, int rows, int T, int *inputs, int *targets) {
    assert(rows >= 0 && T >= 1 && tokens.n >= (size_t)T + 1);
    uint64_t n_starts = (uint64_t)tokens.n - (uint64_t)T;
    for (int b = 0; b < rows; b++) {
        size_t start = (size_t)(((window + (uint64_t)b) * (uint64_t)T) % n_starts);
        copy_window(tokens, start, b, T, inputs, targets);
    }
}

// The windows' offsets: up to T of them, fewer when the split is shorter
// than two windows (n - T offsets leave room for a window and its last
// target); then (n - phases) / T >= 1 windows fit from any offset:
// the last starts at most at (windows - 1) T + phases - 1 <= n - T - 1.
ShuffledOrder shuffled_order(TokenSpan tokens, int T, uint64_t seed) {
    assert(T >= 1 && tokens.n >= (size_t)T + 1);
    ShuffledOrder order = {.seed = seed, .half_bits = 1};
    const size_t starts = tokens.n - (size_t)T;
    order.phases = starts < (size_t)T ? starts : (size_t)T;
    order.windows = (tokens.n - order.phases) / (size_t)T;
    while (((uint64_t)1 << (2 * order.half_bits)) < order.windows) order.half_bits++;
    return order;
}

// feistel: a bijection of [0, 4^h) chosen by "key": x's high and low h bits
// are halves L and R, and each of four rounds makes (L, R) into
// (R, L xor f(R)), f a hash of R and the round's key. A round can be undone
// (its output holds R, so f(R), so L), so the whole is a permutation
// whatever f is; four rounds of a good hash make it look like a random one
// (Luby and Rackoff).
static uint64_t feistel(uint64_t x, int h, uint64_t key) {
    const uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t left = x >> h, right = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
        const uint64_t mixed = left ^ (mix64(right ^ mix64(key + round)) & mask);
        left = right;
        right = mixed;
    }
    return left << h | right;
}

// shuffled_position: the window read at position p < windows of the epoch
// keyed "key": the feistel permutation of [0, 4^h), applied again while
// it lands past the last window ("cycle walking": p's cycle holds p, so it
// comes back below windows; 4^h is at most 4 windows, so at most 4 tries
// on average). A permutation of [0, windows) with no table.
static size_t shuffled_position(const ShuffledOrder *order, uint64_t key, uint64_t p) {
    do p = feistel(p, order->half_bits, key);
    while (p >= order->windows);
    return (size_t)p;
}

void batch_shuffled_rows(const ShuffledOrder *order, TokenSpan tokens, uint64_t window, int rows, int T, int *inputs,
                         int *targets) {
    assert(rows >= 0 && T >= 1 && order->windows >= 1);
    for (int b = 0; b < rows; b++) {
        const uint64_t g = window + (uint64_t)b, epoch = g / order->windows;
        const uint64_t key = mix64(order->seed ^ mix64(epoch ^ 0xC2B2AE3D27D4EB4Full));  // a stream apart from the others
        const size_t phase = (size_t)(((unsigned __int128)mix64(key) * order->phases) >> 64);  // in [0, phases)
        const size_t start = shuffled_position(order, key, g % order->windows) * (size_t)T + phase;
        copy_window(tokens, start, b, T, inputs, targets);
    }
}

size_t span_windows(TokenSpan tokens, int T) { return (tokens.n - 1) / (size_t)T; }

// 128-bit products, so r * windows cannot overflow for any text.
void batch_spread(TokenSpan tokens, size_t first, int B, size_t chosen, int T, int *inputs, int *targets) {
    const size_t windows = span_windows(tokens, T);
    assert(B >= 1 && T >= 1 && windows >= 1 && chosen <= windows && first + (size_t)B <= chosen);
    for (int b = 0; b < B; b++) {
        size_t window = (size_t)((unsigned __int128)(first + (size_t)b) * windows / chosen);
        copy_window(tokens, window * (size_t)T, b, T, inputs, targets);
    }
}
