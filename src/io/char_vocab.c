// char_vocab.c: the char tokenizer's vocabulary (see char_vocab.h).
//
// Reading order: file 16, after utf8.c (file 15), whose utf8_decode reads
// every character here.
//
// What it does: checks that a text is strict UTF-8, finds every distinct code
// point in it, numbers them in increasing code point order, and converts
// characters to ids and back.
//
// This is the one file that compiles stb_ds's implementation. Its allocations
// go through our checked xrealloc, so running out of memory inside a hash map
// is reported like every other allocation instead of crashing on NULL.
#include "char_vocab.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#define STB_DS_IMPLEMENTATION
#define STBDS_REALLOC(context, ptr, size) xrealloc(ptr, size)
#define STBDS_FREE(context, ptr) free(ptr)
#include <stb_ds.h>

// next_char: decode the character at byte "pos" of "text" (a file or a prompt)
// into "*cp" and return its length in bytes. Returns 0 and fills "err"
// (naming "source" and the byte offset) if the bytes there are not valid
// UTF-8, or are a NUL byte: UTF-8 allows NUL, but a text file never needs
// one, and NULs are the usual sign of a binary file given by mistake.
static int next_char(const char *text, size_t len, size_t pos, uint32_t *cp, const char *source,
                     Error *err) {
    int n = utf8_decode((const unsigned char *)text + pos, len - pos, cp);
    if (n == 0) {
        error_set(err, "'%s' is not valid UTF-8 at byte %zu (0x%02X); convert it to UTF-8 (iconv -t UTF-8)",
                  source, pos, (unsigned char)text[pos]);
        return 0;
    }
    if (*cp == 0) {
        error_set(err, "'%s' has a NUL byte at byte %zu, so it looks like binary data; give a plain text file",
                  source, pos);
        return 0;
    }
    return n;
}

// char_vocab_check_text: next_char over the whole text, keeping nothing.
bool char_vocab_check_text(const char *text, size_t len, const char *source, Error *err) {
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        int n = next_char(text, len, pos, &cp, source, err);
        if (n == 0) return false;
        pos += (size_t)n;
    }
    return true;
}

// ---- Building the vocabulary ------------------------------------------------

// fill_utf8: each id's UTF-8 bytes, so char_vocab_piece can hand out a
// pointer as bpe does for its pieces.
static void fill_utf8(CharVocab *v) {
    v->utf8 = xmalloc((size_t)v->size * sizeof *v->utf8);
    for (int id = 0; id < v->size; id++) utf8_encode(v->codepoints[id], v->utf8[id]);
}

// index_codepoints: fill the hash map "v->to_id" from "v->codepoints",
// so that to_id[codepoints[id]] == id for every id.
static void index_codepoints(CharVocab *v) {
    for (int id = 0; id < v->size; id++) hmput(v->to_id, v->codepoints[id], id);
    fill_utf8(v);
}

// char_vocab_build: one pass over the text marks each code point seen in a
// bitmap with one bit per possible code point (0x110000 bits = 136 KiB).
// Reading the bitmap from bit 0 upwards then lists the distinct code points
// already sorted, which is exactly the id order we want: no sort needed.
bool char_vocab_build(CharVocab *v, const char *text, size_t len, const char *source, Error *err) {
    memset(v, 0, sizeof *v);
    if (len == 0) return error_set(err, "'%s' is empty; give a text file with some text in it", source);

    enum { WORD_BITS = 64 };
    size_t n_words = (MAX_CODEPOINT + 1) / WORD_BITS;
    uint64_t *seen = xcalloc(n_words, sizeof *seen);
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        int n = next_char(text, len, pos, &cp, source, err);
        if (n == 0) {
            free(seen);
            return false;
        }
        seen[cp / WORD_BITS] |= (uint64_t)1 << (cp % WORD_BITS);
        pos += (size_t)n;
    }

    // Word by word, skipping empty words: a text uses a few hundred of the
    // 17408, so this costs microseconds, not a test of all 1.1M bits (which
    // made the tokenizer fuzz target 30x slower).
    for (size_t w = 0; w < n_words; w++) {
        for (uint64_t bits = seen[w]; bits != 0; bits &= bits - 1)  // clears the lowest set bit
            arrput(v->codepoints, (uint32_t)(w * WORD_BITS) + (uint32_t)__builtin_ctzll(bits));
    }
    free(seen);
    v->size = (int)arrlen(v->codepoints);
    index_codepoints(v);
    return true;
}

// char_vocab_from_text: the checkpoint stores the vocabulary as its
// characters concatenated in id order, so decoding the string character by
// character gives codepoints[] directly. The messages do not know the
// checkpoint's path; they start with "vocabulary" so the caller can prefix it.
bool char_vocab_from_text(CharVocab *v, const char *vocab, size_t len, Error *err) {
    memset(v, 0, sizeof *v);
    if (len == 0) return error_set(err, "vocabulary is empty; the checkpoint is damaged, train a new one");
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        int n = utf8_decode((const unsigned char *)vocab + pos, len - pos, &cp);
        if (n == 0 || cp == 0) {
            char_vocab_free(v);
            return error_set(err, "vocabulary has invalid UTF-8 or a NUL at byte %zu; the checkpoint is damaged, train a new one",
                             pos);
        }
        if (hmgeti(v->to_id, cp) >= 0) {
            char_vocab_free(v);
            return error_set(err, "vocabulary lists the character U+%04X twice (at byte %zu); the checkpoint is damaged, train a new one",
                             (unsigned)cp, pos);
        }
        // Ids are code points in increasing order (char_vocab_build), and a
        // reader of the file may rely on it to rebuild the vocabulary from a
        // text: a vocabulary out of order would load, and the weights of
        // one character would silently be used for another.
        if (v->size > 0 && cp < v->codepoints[v->size - 1]) {
            uint32_t before = v->codepoints[v->size - 1];
            char_vocab_free(v);
            return error_set(err, "vocabulary is not in increasing code point order (U+%04X comes after U+%04X, at byte %zu); the checkpoint is damaged or not written by tinygpt, train a new one",
                             (unsigned)cp, (unsigned)before, pos);
        }
        hmput(v->to_id, cp, v->size);
        arrput(v->codepoints, cp);
        v->size++;
        pos += (size_t)n;
    }
    fill_utf8(v);
    return true;
}

// char_vocab_utf8: the inverse of char_vocab_from_text. Each code point
// takes at most 4 bytes, so 4 * V + 1 bytes always suffice.
char *char_vocab_utf8(const CharVocab *v, size_t *len) {
    char *out = xmalloc(4 * (size_t)v->size + 1);
    size_t n = 0;
    for (int id = 0; id < v->size; id++) n += (size_t)utf8_encode(v->codepoints[id], out + n);
    out[n] = '\0';
    *len = n;
    return out;
}

// ---- Characters to ids and back ---------------------------------------------

// char_vocab_id: a hash map lookup. The plain hmgeti macro stores its result
// inside the map's header, so even a lookup writes to the map; hmgeti_ts
// writes to our local "index" instead, which keeps this function read-only
// (and so safe to call from several threads at once).
int char_vocab_id(const CharVocab *v, uint32_t cp) {
    assert(v->to_id != NULL);  // stb_ds would allocate on a lookup in a NULL map
    CodepointToId *map = v->to_id;
    ptrdiff_t index;
    (void)hmgeti_ts(map, cp, index);  // sets "index": a slot in "map", or -1
    return index < 0 ? -1 : map[index].value;
}

// char_vocab_next: decode the character at "*pos" and look up its id.
int char_vocab_next(const CharVocab *v, const char *text, size_t len, size_t *pos, const char *source,
                    Error *err) {
    uint32_t cp;
    int bytes = next_char(text, len, *pos, &cp, source, err);
    if (bytes == 0) return -1;
    int id = char_vocab_id(v, cp);
    if (id < 0) {
        // Show the character itself unless it is a control character (a
        // tab, a carriage return), which show() would turn into '?': then
        // the code point alone says which it is.
        Shown shown = show(text + *pos, (size_t)bytes);
        char quoted[sizeof shown.text + 3] = "";
        if (memcmp(shown.text, text + *pos, (size_t)bytes) == 0) snprintf(quoted, sizeof quoted, "'%s' ", shown.text);
        error_set(err, "'%s' has the character %s(U+%04X) at byte %zu, which is not in the model's vocabulary; remove it, or train a new model on this text",
                  source, quoted, (unsigned)cp, *pos);
        return -1;
    }
    *pos += (size_t)bytes;
    return id;
}

// char_vocab_piece: the bytes fill_utf8 stored; the first byte says how many.
const char *char_vocab_piece(const CharVocab *v, int id, size_t *len) {
    assert(id >= 0 && id < v->size);
    *len = (size_t)utf8_length_from_lead((unsigned char)v->utf8[id][0]);
    return v->utf8[id];
}

// char_vocab_free: release every structure; safe on a zeroed or freed vocabulary.
void char_vocab_free(CharVocab *v) {
    arrfree(v->codepoints);
    hmfree(v->to_id);
    free(v->utf8);
    v->utf8 = NULL;
    v->size = 0;
}
