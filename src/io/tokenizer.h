// tokenizer.h: character-level tokenizer over UTF-8 code points.
//
// Reading order: file 3. A token is one Unicode code point (so "—" and "’"
// are single tokens, not three bytes each). Ids are assigned in increasing
// code point order, so the same text always gives the same vocabulary.
// The code point -> id lookup is an stb_ds hash map.
#ifndef TINYGPT_TOKENIZER_H
#define TINYGPT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct {
    uint32_t key;  // code point
    int value;     // token id
} CodepointToId;

typedef struct {
    int vocab_size;           // V
    uint32_t *codepoints;     // [V] code point of each id, increasing (stb_ds array)
    CodepointToId *to_id;     // stb_ds hash map: code point -> id
} Tokenizer;

// utf8_decode: decode one code point from "s" (at most "len" bytes) into
// "*cp". Returns the number of bytes used (1..4), or 0 for invalid UTF-8
// (overlong forms, surrogates, > U+10FFFF, truncated or stray bytes).
int utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);
// utf8_encode: write code point "cp" as UTF-8 into "out"; returns 1..4 bytes.
int utf8_encode(uint32_t cp, char out[4]);

// tokenizer_check_text: whether "text" ("len" bytes) is the contents of a
// text file: strict UTF-8 with no NUL byte. If not, "err" names "source" and
// the byte offset, and says it is not UTF-8 or looks like binary data. The
// one check of a text; tokenizer_build and tokenizer_next make it as they go.
bool tokenizer_check_text(const char *text, size_t len, const char *source, Error *err);
// tokenizer_build: the vocabulary of every code point in "text". "source"
// names the text in error messages (a file name). Fails on invalid UTF-8
// (reporting the byte offset) and on empty text.
bool tokenizer_build(Tokenizer *tok, const char *text, size_t len, const char *source, Error *err);
// tokenizer_from_vocab: rebuild from the concatenated code points in id order
// (the checkpoint's "vocab" metadata). Fails on invalid UTF-8, an empty vocab,
// a duplicated character or code points out of increasing order; the message starts with "vocabulary" and does
// not know the file, so the caller prefixes the checkpoint's path.
bool tokenizer_from_vocab(Tokenizer *tok, const char *vocab, size_t len, Error *err);
// tokenizer_vocab_utf8: the vocabulary's code points concatenated in id order,
// UTF-8, NUL-terminated; "*len" gets the byte count. The caller frees it.
char *tokenizer_vocab_utf8(const Tokenizer *tok, size_t *len);
// tokenizer_id: the id of code point "cp", or -1 if it is not in the vocabulary.
// Read-only, so safe to call from several threads at once.
int tokenizer_id(const Tokenizer *tok, uint32_t cp);
// tokenizer_next: the id of the character at byte "*pos" of "text" ("len"
// bytes), advancing "*pos" past it. Returns -1, with "*pos" unchanged and
// "err" naming "source", the character and its byte offset, on invalid UTF-8
// or a character outside the vocabulary. For callers that store ids their
// own way (data.c packs them into 1 or 2 bytes).
int tokenizer_next(const Tokenizer *tok, const char *text, size_t len, size_t *pos, const char *source,
                   Error *err);
// tokenizer_encode: text -> ids, "*ids" newly allocated (caller frees) with
// "*n" entries. Fails on a text tokenizer_check_text refuses (checked first,
// over the whole text), then on a character outside the vocabulary, naming
// "source", the character and its byte offset.
bool tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, int **ids, size_t *n,
                      const char *source, Error *err);
// tokenizer_decode: the UTF-8 bytes of token "id" into "out"; returns 1..4.
int tokenizer_decode(const Tokenizer *tok, int id, char out[4]);
// tokenizer_free: release the vocabulary; safe on a zeroed or freed tokenizer.
// tokenizer_build and tokenizer_from_vocab leave nothing to free when they fail.
void tokenizer_free(Tokenizer *tok);

#endif
