// gpt2_tokenizer.h: GPT-2's own tokenizer, read from its two files, and
// a byte-level bpe tokenizer written as those two files (for `tinygpt export`).
//
// Reading order: file 25b, after json.h (file 25), which reads vocab.json,
// and tokenizer.h (file 23), whose Tokenizer it fills as the kind gpt2.
//
// A Hugging Face GPT-2 directory (config.json, model.safetensors, vocab.json,
// merges.txt) holds the tokenizer in the last two, which are OpenAI's
// encoder.json and vocab.bpe under other names:
// - vocab.json: one JSON object, each token's text -> its id (50,257 of them:
//   the 256 bytes, the 50,000 merges, then "<|endoftext|>", 50256). A token's
//   text spells its bytes one printable character per byte (GPT-2's
//   bytes_to_unicode): the bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand
//   for themselves, and the 68 others (control bytes, the space, 0x7F..0xA0,
//   0xAD), in increasing order, for U+0100, U+0101, ...: so " the" is "Ġthe"
//   (the space is byte 0x20, the 33rd of those, U+0120).
// - merges.txt: a first line "#version: ...", then one merge per line, the
//   two tokens' texts separated by one space ("Ġ t"), lowest rank first.
//
// Reading checks everything a damaged or wrong file could hold, and says
// which file, line or key is wrong: every character of a token is one of
// the 256 byte characters, each merge joins tokens that exist by then and
// makes a new one, vocab.json numbers exactly the bytes, the merges and
// "<|endoftext|>", each once, 0 to V - 1.
#ifndef TINYGPT_GPT2_TOKENIZER_H
#define TINYGPT_GPT2_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "common.h"
#include "json.h"
#include "tokenizer.h"

// tokenizer_load_gpt2: GPT-2's tokenizer from "dir"/vocab.json and
// "dir"/merges.txt (the rest of the directory is not read). On failure
// "tok" is empty and "err" names the file, and the line or key, and what to do.
bool tokenizer_load_gpt2(Tokenizer *tok, const char *dir, Error *err);

// gpt2_tokenizer_from_text: the same from the two files' contents, already
// in memory ("vocab_json", "vocab_len" bytes; "merges_txt", "merges_len"
// bytes); "vocab_name" and "merges_name" name them in messages.
bool gpt2_tokenizer_from_text(Tokenizer *tok, const char *vocab_json, size_t vocab_len, const char *vocab_name,
                              const char *merges_txt, size_t merges_len, const char *merges_name, Error *err);

// gpt2_tokenizer_files: the other way: "tok" (bpe or gpt2) as the two files'
// contents, appended to "vocab_json" and "merges_txt" (start them empty;
// the caller frees them), for `tinygpt export`. A gpt2 tokenizer gives
// back GPT-2's numbering; a bpe one (tinygpt's own) keeps its ids (byte b
// is id b, merge i is 256 + i) and gains "<|endoftext|>" as id V, one past
// its last token, since GPT-2's readers (this file's, and Hugging Face's)
// expect it. Fails, naming both tokens, when two tokens have the same
// bytes (one string cannot be two keys of vocab.json), or on a char tokenizer.
bool gpt2_tokenizer_files(const Tokenizer *tok, JsonBuf *vocab_json, JsonBuf *merges_txt, Error *err);

#endif
