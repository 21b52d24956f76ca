// tokenizer.c: text <-> token ids (see tokenizer.h).
//
// Reading order: file 23, after char_vocab.c (file 16) and bpe.c (file 22),
// the two kinds it hands its work to.
//
// What it does: one interface over the kinds. Each function checks the
// kind and calls char_vocab.c or bpe.c; what is its own is the order of the
// work: a text is checked (strict UTF-8, no NUL) before any kind learns
// from it or encodes it, "vocab_size" is set from whichever kind built
// the tokenizer, and gpt2's ids are translated to and from bpe.c's.
#include "tokenizer.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

// tokenizer_check_text: the same check for both kinds, char_vocab.c's.
bool tokenizer_check_text(const char *text, size_t len, const char *source, Error *err) {
    return char_vocab_check_text(text, len, source, err);
}

const char *const TOKENIZER_NAMES[] = {"char", "bpe", "gpt2", NULL};

const char *tokenizer_kind_name(TokenizerKind kind) { return TOKENIZER_NAMES[kind]; }

bool tokenizer_fits_model(const Tokenizer *tok, int model_vocab) {
    if (tok->vocab_size == model_vocab) return true;
    return tok->kind == TOKENIZER_GPT2 && tok->vocab_size == model_vocab + 1 && tok->end_of_text == model_vocab;
}

// The spelling of GPT-2's <|endoftext|>, its piece.
static const char END_OF_TEXT_TEXT[] = "<|endoftext|>";

// ---- Building the vocabulary ------------------------------------------------

// tokenizer_build and tokenizer_from_vocab: char's vocabulary, built from a
// text or read back from a checkpoint, whose size becomes the tokenizer's.
bool tokenizer_build(Tokenizer *tok, const char *text, size_t len, const char *source, Error *err) {
    memset(tok, 0, sizeof *tok);
    if (!char_vocab_build(&tok->chars, text, len, source, err)) return false;
    tok->vocab_size = tok->chars.size;
    return true;
}

bool tokenizer_from_vocab(Tokenizer *tok, const char *vocab, size_t len, Error *err) {
    memset(tok, 0, sizeof *tok);
    if (!char_vocab_from_text(&tok->chars, vocab, len, err)) return false;
    tok->vocab_size = tok->chars.size;
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
    const bool learned = spec->vocab_size_at_most
                             ? bpe_learn_up_to(&tok->bpe, text, len, spec->vocab_size, source, err)
                             : bpe_learn(&tok->bpe, text, len, spec->vocab_size, source, err);
    if (!learned) return false;
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

// tokenizer_vocab_utf8: the inverse of tokenizer_from_vocab.
char *tokenizer_vocab_utf8(const Tokenizer *tok, size_t *len) { return char_vocab_utf8(&tok->chars, len); }

// ---- Encoding and decoding --------------------------------------------------

// tokenizer_id: for bpe, an ASCII character's byte; for char, a lookup that
// writes nothing (char_vocab_id), so threads may share the tokenizer.
int tokenizer_id(const Tokenizer *tok, uint32_t cp) {
    if (tok->kind == TOKENIZER_BPE) return cp < 0x80 ? (int)cp : -1;  // an ASCII character is one byte
    if (tok->kind == TOKENIZER_GPT2) return cp < 0x80 ? tok->gpt2_of_bpe[cp] : -1;
    return char_vocab_id(&tok->chars, cp);
}

// tokenizer_next: char only, so char_vocab_next.
int tokenizer_next(const Tokenizer *tok, const char *text, size_t len, size_t *pos, const char *source,
                   Error *err) {
    return char_vocab_next(&tok->chars, text, len, pos, source, err);
}

// tokenizer_encode: first tokenizer_check_text, so that a binary file is
// reported as binary (an ELF file's first byte, 0x7F, is valid UTF-8 but
// not in a vocabulary, and would be reported instead), then one
// char_vocab_next per character, or (bpe, gpt2) bpe_encode, whose ids gpt2
// then renumbers as GPT-2 does. A text has at most one token per byte, so
// "len" ids always fit; the buffer is shrunk to the real count at the end.
bool tokenizer_encode(Tokenizer *tok, const char *text, size_t len, int **ids, size_t *n,
                      const char *source, Error *err) {
    if (!tokenizer_check_text(text, len, source, err)) return false;
    if (tok->kind == TOKENIZER_BPE || tok->kind == TOKENIZER_GPT2) {
        int *out = xmalloc((len > 0 ? len : 1) * sizeof *out);
        *n = bpe_encode(&tok->bpe, text, len, out);
        if (tok->kind == TOKENIZER_GPT2)
            for (size_t i = 0; i < *n; i++) out[i] = tok->gpt2_of_bpe[out[i]];
        *ids = xrealloc(out, (*n > 0 ? *n : 1) * sizeof *out);
        return true;
    }
    int *out = xmalloc(len * sizeof *out);
    size_t count = 0;
    for (size_t pos = 0; pos < len;) {
        int id = char_vocab_next(&tok->chars, text, len, &pos, source, err);
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

// tokenizer_piece: bpe's own table of pieces (through GPT-2's numbering for
// gpt2, where <|endoftext|> is no bpe token but its spelling), or char's.
const char *tokenizer_piece(const Tokenizer *tok, int id, size_t *len) {
    assert(id >= 0 && id < tok->vocab_size);
    if (tok->kind == TOKENIZER_GPT2 && id == tok->end_of_text) {
        *len = sizeof END_OF_TEXT_TEXT - 1;
        return END_OF_TEXT_TEXT;
    }
    if (tok->kind == TOKENIZER_GPT2) return (const char *)bpe_piece(&tok->bpe, tok->bpe_of_gpt2[id], len);
    if (tok->kind == TOKENIZER_BPE) return (const char *)bpe_piece(&tok->bpe, id, len);
    return char_vocab_piece(&tok->chars, id, len);
}

// tokenizer_decode: two passes over the pieces, to size the buffer, then to fill it.
char *tokenizer_decode(const Tokenizer *tok, const int *ids, size_t n, size_t *len) {
    size_t total = 0, piece_len;
    for (size_t i = 0; i < n; i++) {
        tokenizer_piece(tok, ids[i], &piece_len);
        total += piece_len;
    }
    char *out = xmalloc(total + 1);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        const char *piece = tokenizer_piece(tok, ids[i], &piece_len);
        memcpy(out + pos, piece, piece_len);
        pos += piece_len;
    }
    out[pos] = '\0';
    *len = pos;
    return out;
}

// tokenizer_free: release every kind's structures; safe on a zeroed or freed tokenizer.
void tokenizer_free(Tokenizer *tok) {
    char_vocab_free(&tok->chars);
    bpe_free(&tok->bpe);
    free(tok->gpt2_of_bpe);
    free(tok->bpe_of_gpt2);
    tok->gpt2_of_bpe = tok->bpe_of_gpt2 = NULL;
    tok->vocab_size = 0;
    tok->kind = TOKENIZER_CHAR;
}
