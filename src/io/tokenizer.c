// tokenizer.c: text <-> token ids (see tokenizer.h).
//
// Reading order: file 23, after bpe.c (file 22), the byte-pair encoder that
// the bpe kind hands its work to.
//
// What it does: checks that a text is strict UTF-8, finds every distinct code
// point in it, numbers them in increasing code point order, and converts text
// to token ids and back; for the bpe kind it checks the text the same way and
// lets bpe.c learn, encode and decode. What it leaves out: any normalisation
// (NFC/NFD), and the unused ids a larger tokenizer would reserve for
// "unknown" or "end of text".
//
// Two structures hold the vocabulary:
// - codepoints[id], an stb_ds array, answers "which character is this id?"
//   (decoding, and the checkpoint's vocab string).
// - to_id, an stb_ds hash map, answers "which id is this character?" (encoding).
//
// This is the one file that compiles stb_ds's implementation. Its allocations
// go through our checked xrealloc, so running out of memory inside a hash map
// is reported like every other allocation instead of crashing on NULL.
#include "tokenizer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

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

// tokenizer_check_text: next_char over the whole text, keeping nothing.
bool tokenizer_check_text(const char *text, size_t len, const char *source, Error *err) {
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        int n = next_char(text, len, pos, &cp, source, err);
        if (n == 0) return false;
        pos += (size_t)n;
    }
    return true;
}

const char *const TOKENIZER_NAMES[] = {"char", "bpe", NULL};

const char *tokenizer_kind_name(TokenizerKind kind) { return TOKENIZER_NAMES[kind]; }

// ---- Building the vocabulary ------------------------------------------------

// fill_utf8: each id's UTF-8 bytes, so tokenizer_piece can hand out a
// pointer for char tokens as it does for bpe pieces.
static void fill_utf8(Tokenizer *tok) {
    tok->utf8 = xmalloc((size_t)tok->vocab_size * sizeof *tok->utf8);
    for (int id = 0; id < tok->vocab_size; id++) utf8_encode(tok->codepoints[id], tok->utf8[id]);
}

// index_codepoints: fill the hash map "tok->to_id" from "tok->codepoints",
// so that to_id[codepoints[id]] == id for every id.
static void index_codepoints(Tokenizer *tok) {
    for (int id = 0; id < tok->vocab_size; id++) hmput(tok->to_id, tok->codepoints[id], id);
    fill_utf8(tok);
}

// tokenizer_build: one pass over the text marks each code point seen in a
// bitmap with one bit per possible code point (0x110000 bits = 136 KiB).
// Reading the bitmap from bit 0 upwards then lists the distinct code points
// already sorted, which is exactly the id order we want: no sort needed.
bool tokenizer_build(Tokenizer *tok, const char *text, size_t len, const char *source, Error *err) {
    memset(tok, 0, sizeof *tok);
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
            arrput(tok->codepoints, (uint32_t)(w * WORD_BITS) + (uint32_t)__builtin_ctzll(bits));
    }
    free(seen);
    tok->vocab_size = (int)arrlen(tok->codepoints);
    index_codepoints(tok);
    return true;
}

// tokenizer_from_vocab: the checkpoint stores the vocabulary as its
// characters concatenated in id order, so decoding the string character by
// character gives codepoints[] directly. The messages do not know the
// checkpoint's path; they start with "vocabulary" so the caller can prefix it.
bool tokenizer_from_vocab(Tokenizer *tok, const char *vocab, size_t len, Error *err) {
    memset(tok, 0, sizeof *tok);
    if (len == 0) return error_set(err, "vocabulary is empty; the checkpoint is damaged, train a new one");
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        int n = utf8_decode((const unsigned char *)vocab + pos, len - pos, &cp);
        if (n == 0 || cp == 0) {
            tokenizer_free(tok);
            return error_set(err, "vocabulary has invalid UTF-8 or a NUL at byte %zu; the checkpoint is damaged, train a new one",
                             pos);
        }
        if (hmgeti(tok->to_id, cp) >= 0) {
            tokenizer_free(tok);
            return error_set(err, "vocabulary lists the character U+%04X twice (at byte %zu); the checkpoint is damaged, train a new one",
                             (unsigned)cp, pos);
        }
        // Ids are code points in increasing order (tokenizer_build), and a
        // reader of the file may rely on it to rebuild the vocabulary from a
        // text: a vocabulary out of order would load, and the weights of
        // one character would silently be used for another.
        if (tok->vocab_size > 0 && cp < tok->codepoints[tok->vocab_size - 1]) {
            uint32_t before = tok->codepoints[tok->vocab_size - 1];
            tokenizer_free(tok);
            return error_set(err, "vocabulary is not in increasing code point order (U+%04X comes after U+%04X, at byte %zu); the checkpoint is damaged or not written by tinygpt, train a new one",
                             (unsigned)cp, (unsigned)before, pos);
        }
        hmput(tok->to_id, cp, tok->vocab_size);
        arrput(tok->codepoints, cp);
        tok->vocab_size++;
        pos += (size_t)n;
    }
    fill_utf8(tok);
    return true;
}

// tokenizer_learn: the text is checked first for both kinds, so a bpe model,
// which could encode any bytes, still refuses a binary file as char does.
bool tokenizer_learn(Tokenizer *tok, const TokenizerSpec *spec, const char *text, size_t len,
                     const char *source, Error *err) {
    memset(tok, 0, sizeof *tok);
    if (spec->kind == TOKENIZER_CHAR) return tokenizer_build(tok, text, len, source, err);
    if (len == 0) return error_set(err, "'%s' is empty; give a text file with some text in it", source);
    if (!tokenizer_check_text(text, len, source, err)) return false;
    if (!bpe_learn(&tok->bpe, text, len, spec->vocab_size, source, err)) return false;
    tok->kind = TOKENIZER_BPE;
    tok->vocab_size = tok->bpe.vocab_size;
    return true;
}

bool tokenizer_from_bpe_merges(Tokenizer *tok, const char *merges, size_t len, Error *err) {
    memset(tok, 0, sizeof *tok);
    if (!bpe_from_merges_text(&tok->bpe, merges, len, err)) return false;
    tok->kind = TOKENIZER_BPE;
    tok->vocab_size = tok->bpe.vocab_size;
    return true;
}

// tokenizer_vocab_utf8: the inverse of tokenizer_from_vocab. Each code point
// takes at most 4 bytes, so 4 * V + 1 bytes always suffice.
char *tokenizer_vocab_utf8(const Tokenizer *tok, size_t *len) {
    char *out = xmalloc(4 * (size_t)tok->vocab_size + 1);
    size_t n = 0;
    for (int id = 0; id < tok->vocab_size; id++) n += (size_t)utf8_encode(tok->codepoints[id], out + n);
    out[n] = '\0';
    *len = n;
    return out;
}

// ---- Encoding and decoding --------------------------------------------------

// tokenizer_id: a hash map lookup (for bpe, an ASCII character's byte). The plain hmgeti macro stores its result
// inside the map's header, so even a lookup writes to the map; hmgeti_ts
// writes to our local "index" instead, which keeps this function read-only
// (and so safe to call from several threads at once).
int tokenizer_id(const Tokenizer *tok, uint32_t cp) {
    if (tok->kind == TOKENIZER_BPE) return cp < 0x80 ? (int)cp : -1;  // an ASCII character is one byte
    assert(tok->to_id != NULL);  // stb_ds would allocate on a lookup in a NULL map
    CodepointToId *map = tok->to_id;
    ptrdiff_t index;
    (void)hmgeti_ts(map, cp, index);  // sets "index": a slot in "map", or -1
    return index < 0 ? -1 : map[index].value;
}

// tokenizer_next: decode the character at "*pos" and look up its id.
int tokenizer_next(const Tokenizer *tok, const char *text, size_t len, size_t *pos, const char *source,
                   Error *err) {
    uint32_t cp;
    int bytes = next_char(text, len, *pos, &cp, source, err);
    if (bytes == 0) return -1;
    int id = tokenizer_id(tok, cp);
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

// tokenizer_encode: first tokenizer_check_text, so that a binary file is
// reported as binary (an ELF file's first byte, 0x7F, is valid UTF-8 but
// not in a vocabulary, and would be reported instead), then one
// tokenizer_next per character, or (bpe) bpe_encode. A text has at most one
// token per byte, so "len" ids always fit; the buffer is shrunk to the real
// count at the end.
bool tokenizer_encode(Tokenizer *tok, const char *text, size_t len, int **ids, size_t *n,
                      const char *source, Error *err) {
    if (!tokenizer_check_text(text, len, source, err)) return false;
    if (tok->kind == TOKENIZER_BPE) {
        int *out = xmalloc((len > 0 ? len : 1) * sizeof *out);
        *n = bpe_encode(&tok->bpe, text, len, out);
        *ids = xrealloc(out, (*n > 0 ? *n : 1) * sizeof *out);
        return true;
    }
    int *out = xmalloc(len * sizeof *out);
    size_t count = 0;
    for (size_t pos = 0; pos < len;) {
        int id = tokenizer_next(tok, text, len, &pos, source, err);
        if (id < 0) {
            free(out);
            return false;
        }
        out[count++] = id;
    }
    *ids = xrealloc(out, count * sizeof *out);
    *n = count;
    return true;
}

// tokenizer_piece: bpe's own table of pieces, or the one fill_utf8 built for char.
const char *tokenizer_piece(const Tokenizer *tok, int id, size_t *len) {
    assert(id >= 0 && id < tok->vocab_size);
    if (tok->kind == TOKENIZER_BPE) return (const char *)bpe_piece(&tok->bpe, id, len);
    *len = (size_t)utf8_length_from_lead((unsigned char)tok->utf8[id][0]);
    return tok->utf8[id];
}

// tokenizer_free: release every structure; safe on a zeroed or freed tokenizer.
void tokenizer_free(Tokenizer *tok) {
    arrfree(tok->codepoints);
    hmfree(tok->to_id);
    free(tok->utf8);
    tok->utf8 = NULL;
    bpe_free(&tok->bpe);
    tok->vocab_size = 0;
    tok->kind = TOKENIZER_CHAR;
}
