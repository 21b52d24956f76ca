// char_vocab.h: the char tokenizer's vocabulary: one token per Unicode code
// point, numbered in increasing code point order.
//
// Reading order: file 16, after utf8.h (file 15), the last file of the
// model's part: the simplest tokenizer, met long before bpe.h (file 22),
// and put beside it by tokenizer.h (file 23).
// A token is one code point (so "—" and "’" are single tokens, not three
// bytes each). Ids are assigned in increasing code point order, so the same
// text always gives the same vocabulary. Text is read strictly: UTF-8 with
// no NUL byte, or an error that names the file and the byte offset.
//
// It leaves out: normalisation (NFC/NFD), and the unused ids a larger
// tokenizer would reserve for "unknown" or "end of text".
#ifndef TINYGPT_CHAR_VOCAB_H
#define TINYGPT_CHAR_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct {
    uint32_t key;  // code point
    int value;     // token id
} CodepointToId;

// Three structures hold the vocabulary, each answering one question:
typedef struct {
    int size;                 // V
    uint32_t *codepoints;     // [V] "which character is this id?", increasing (stb_ds array)
    CodepointToId *to_id;     // "which id is this character?" (stb_ds hash map)
    char (*utf8)[4];          // [V] each id's UTF-8 bytes (for char_vocab_piece)
} CharVocab;

// char_vocab_check_text: whether "text" ("len" bytes) is the contents of a
// text file: strict UTF-8 with no NUL byte. If not, "err" names "source" and
// the byte offset, and says it is not UTF-8 or looks like binary data. The
// one check of a text; char_vocab_build and char_vocab_next make it as they go.
bool char_vocab_check_text(const char *text, size_t len, const char *source, Error *err);

// char_vocab_build: the vocabulary of every code point in "text". "source"
// names the text in error messages (a file name). Fails on invalid UTF-8
// (reporting the byte offset) and on empty text.
bool char_vocab_build(CharVocab *v, const char *text, size_t len, const char *source, Error *err);
// char_vocab_from_text: rebuild from the concatenated code points in id
// order (the checkpoint's "vocab" metadata). Fails on invalid UTF-8, an
// empty vocab, a duplicated character or code points out of increasing
// order; the message starts with "vocabulary" and does not know the file,
// so the caller prefixes the checkpoint's path.
bool char_vocab_from_text(CharVocab *v, const char *vocab, size_t len, Error *err);
// char_vocab_utf8: the vocabulary's code points concatenated in id order,
// UTF-8, NUL-terminated; "*len" gets the byte count. The caller frees it.
char *char_vocab_utf8(const CharVocab *v, size_t *len);

// char_vocab_id: the id of code point "cp", or -1 if it is not in the
// vocabulary. Read-only, so safe to call from several threads at once.
int char_vocab_id(const CharVocab *v, uint32_t cp);
// char_vocab_next: the id of the character at byte "*pos" of "text" ("len"
// bytes), advancing "*pos" past it. Returns -1, with "*pos" unchanged and
// "err" naming "source", the character and its byte offset, on invalid
// UTF-8 or a character outside the vocabulary.
int char_vocab_next(const CharVocab *v, const char *text, size_t len, size_t *pos, const char *source,
                    Error *err);
// char_vocab_piece: the UTF-8 bytes of token "id", "*len" (1..4) of them.
const char *char_vocab_piece(const CharVocab *v, int id, size_t *len);

// char_vocab_free: release the vocabulary; safe on a zeroed or freed one.
// char_vocab_build and char_vocab_from_text leave nothing to free when they fail.
void char_vocab_free(CharVocab *v);

#endif
