// utf8.h: UTF-8, the encoding of every text tinygpt reads and writes: one
// code point decoded and encoded, characters counted and cut, and bytes that
// arrive in pieces printed as whole characters.
//
// Reading order: file 15, once the model is whole, before char_vocab.h
// (file 16), which turns the characters it decodes into ids. The strings
// read by json.h (file 25) and the labels drawn by canvas.h (file 30) are
// UTF-8 too, so this sits in base/, under all of them, and knows only bytes
// and code points: what a token is, is the tokenizer's business.
//
// It leaves out: any other encoding, normalisation (NFC/NFD), and what a
// character looks like (a wide character counts as one, as a combining
// accent does).
#ifndef TINYGPT_UTF8_H
#define TINYGPT_UTF8_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// The largest Unicode code point; code points run from 0 to this inclusive.
#define MAX_CODEPOINT 0x10FFFFu

// utf8_length_from_lead: how many bytes (1..4) a character whose first byte
// is "lead" takes, or 0 if no character starts with it (a continuation byte
// 10xxxxxx, or 0xF8..0xFF). Says nothing of whether the bytes after it fit.
int utf8_length_from_lead(unsigned char lead);
// utf8_decode: decode one code point from "s" (at most "len" bytes) into
// "*cp". Returns the number of bytes used (1..4), or 0 for invalid UTF-8
// (overlong forms, surrogates, > U+10FFFF, truncated or stray bytes).
int utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);
// utf8_encode: write code point "cp" as UTF-8 into "out"; returns 1..4 bytes.
int utf8_encode(uint32_t cp, char out[4]);
// utf8_count: the characters in text[0, len), counted as the bytes that can
// start one (every byte but continuation bytes 10xxxxxx): for valid UTF-8,
// its code points. No decoding, so it is a fast first pass over a file.
size_t utf8_count(const char *text, size_t len);
// utf8_prefix: the length in bytes of the first "chars" characters of
// text[0, len) (counted as utf8_count counts), or "len" if it has fewer.
size_t utf8_prefix(const char *text, size_t len, size_t chars);

// Utf8Stream: prints bytes that arrive in pieces (bpe tokens) as whole
// UTF-8 characters: a character split between two tokens is held back until
// its last byte comes, and a byte that cannot be part of valid UTF-8 (a model
// can put bytes in any order) is printed as U+FFFD, the replacement character.
typedef struct {
    unsigned char held[4];  // the start of a character still waiting for bytes
    int n_held;
} Utf8Stream;
// utf8_stream_write: print "bytes" ("len" of them) to "out", holding back an
// incomplete last character.
void utf8_stream_write(Utf8Stream *s, const char *bytes, size_t len, FILE *out);
// utf8_stream_finish: the text ended: a held-back incomplete character is
// printed as U+FFFD.
void utf8_stream_finish(Utf8Stream *s, FILE *out);

#endif
