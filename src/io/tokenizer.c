// tokenizer.c: text <-> token ids (see tokenizer.h).
//
// Reading order: file 4, after bpe.c (file 3), the byte-pair encoder that
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

// The largest Unicode code point; code points run from 0 to this inclusive.
#define MAX_CODEPOINT 0x10FFFFu

// ---- UTF-8 ------------------------------------------------------------------
// A code point is stored in 1 to 4 bytes. The first byte says how many:
//
//   bytes  code points        byte 1    byte 2    byte 3    byte 4
//   1      U+0000..U+007F     0xxxxxxx
//   2      U+0080..U+07FF     110xxxxx  10xxxxxx
//   3      U+0800..U+FFFF     1110xxxx  10xxxxxx  10xxxxxx
//   4      U+10000..U+10FFFF  11110xxx  10xxxxxx  10xxxxxx  10xxxxxx
//
// "Strict" means every code point has exactly one spelling. We reject:
// - a continuation byte (10xxxxxx) where a first byte belongs ("stray"),
// - a sequence cut short by the end of the text or by a non-continuation byte,
// - an overlong form (e.g. "/" spelled as 0xC0 0xAF in 2 bytes instead of 1),
// - the UTF-16 surrogates U+D800..U+DFFF, which are not characters,
// - anything above U+10FFFF.

// utf8_length_from_lead: how many bytes a character starting with "lead"
// takes (the table at the top), or 0 if no character starts with it.
static int utf8_length_from_lead(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 0;
}

// utf8_decode: read the first byte to learn the length, gather the payload
// bits from the continuation bytes, then reject the forms listed above.
int utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
    if (len == 0) return 0;
    int n = utf8_length_from_lead(s[0]);  // sequence length in bytes
    if (n == 0) return 0;                 // a stray continuation byte 10xxxxxx, or 0xF8..0xFF (never valid)
    if (len < (size_t)n) return 0;        // truncated by the end of the text
    if (n == 1) {
        *cp = s[0];
        return 1;
    }
    // The smallest code point that needs n bytes (below it: overlong).
    static const uint32_t MIN_FOR_LENGTH[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t value = s[0] & (0x7Fu >> n);  // the lead byte's payload: 110xxxxx, 1110xxxx, 11110xxx
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;  // truncated by a byte that does not continue it
        value = (value << 6) | (s[i] & 0x3F);
    }
    if (value < MIN_FOR_LENGTH[n]) return 0;          // overlong
    if (value >= 0xD800 && value <= 0xDFFF) return 0; // surrogate
    if (value > MAX_CODEPOINT) return 0;              // beyond Unicode
    *cp = value;
    return n;
}

// utf8_encode: the table above, read from left to right. "cp" must be a valid
// code point (not a surrogate, at most U+10FFFF); the vocabulary only ever
// holds code points that came out of utf8_decode.
int utf8_encode(uint32_t cp, char out[4]) {
    assert(cp <= MAX_CODEPOINT && !(cp >= 0xD800 && cp <= 0xDFFF));
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// utf8_count and utf8_prefix: a byte starts a character unless it is 10xxxxxx.
size_t utf8_count(const char *text, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

size_t utf8_prefix(const char *text, size_t len, size_t chars) {
    size_t seen = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80 && seen++ == chars) return i;
    return len;
}

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

// ---- Printing pieces as whole characters ------------------------------------

static const char REPLACEMENT_CHARACTER[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// utf8_stream_byte: one more byte. Once the held bytes are as many as their
// lead byte announces, they are printed if they decode, or else the lead
// byte becomes U+FFFD and the bytes after it are looked at again (one of them
// may start the next character). A byte that cannot continue the held ones
// ends them the same way.
static void utf8_stream_byte(Utf8Stream *s, unsigned char byte, FILE *out) {
    s->held[s->n_held++] = byte;
    while (s->n_held > 0) {
        int need = utf8_length_from_lead(s->held[0]);
        bool continues = need > 0;
        for (int i = 1; i < s->n_held && continues; i++) continues = (s->held[i] & 0xC0) == 0x80;
        if (continues && s->n_held < need) return;  // wait for the rest
        uint32_t cp;
        if (continues && utf8_decode(s->held, (size_t)s->n_held, &cp) == need) {
            fwrite(s->held, 1, (size_t)need, out);
            s->n_held = 0;
            return;
        }
        fputs(REPLACEMENT_CHARACTER, out);
        memmove(s->held, s->held + 1, (size_t)--s->n_held);
    }
}

void utf8_stream_write(Utf8Stream *s, const char *bytes, size_t len, FILE *out) {
    for (size_t i = 0; i < len; i++) utf8_stream_byte(s, (unsigned char)bytes[i], out);
}

void utf8_stream_finish(Utf8Stream *s, FILE *out) {
    if (s->n_held > 0) fputs(REPLACEMENT_CHARACTER, out);
    s->n_held = 0;
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
