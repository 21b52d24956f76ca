// tokenizer.h: text <-> token ids, by characters or by learned BPE pieces.
//
// Reading order: file 23, after char_vocab.h (file 16) and bpe.h (file 22),
// the two kinds it puts behind one interface:
// - char (the default): a token is one Unicode code point, numbered in
//   increasing code point order (char_vocab.h holds the vocabulary).
// - bpe: byte-level byte-pair encoding learned from the training text
//   (bpe.h): ids 0..255 are bytes, the rest are merged pieces like " the".
// - gpt2: GPT-2's own tokenizer, read from its vocab.json and merges.txt
//   (gpt2_tokenizer.h, file 25b): a Bpe that chunks by GPT-2's rules
//   (chunk.h), with GPT-2's numbering of the tokens kept beside it.
// Every function below works for every kind unless it says "char only".
#ifndef TINYGPT_TOKENIZER_H
#define TINYGPT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "char_vocab.h"
#include "common.h"
#include "utf8.h"  // utf8_decode and the rest: whoever reads tokens reads characters too

typedef enum { TOKENIZER_CHAR, TOKENIZER_BPE, TOKENIZER_GPT2 } TokenizerKind;

typedef struct {
    TokenizerKind kind;
    int vocab_size;   // V, of whichever kind is in use
    CharVocab chars;  // char's vocabulary (empty for bpe and gpt2)
    Bpe bpe;          // bpe's and gpt2's merges and pieces (empty for char)
    // gpt2 only. GPT-2 numbers its tokens its own way (its 256 bytes in
    // another order, then the merges, then <|endoftext|>); "bpe" keeps
    // bpe.h's numbering (bytes, then merge i as 256 + i), these translate.
    int *gpt2_of_bpe;  // [bpe.vocab_size] GPT-2's id of each bpe token
    int *bpe_of_gpt2;  // [vocab_size] bpe's id of each GPT-2 token; -1 for <|endoftext|>
    int end_of_text;   // GPT-2's id of <|endoftext|> (GPT2_END_OF_TEXT in GPT-2's own files)
} Tokenizer;

// <|endoftext|>'s id in GPT-2's vocab.json: the last of its 50,257 tokens.
// GPT-2 put it between documents in training; a text that spells it out is
// still encoded as ordinary text, as GPT-2's reference encoder does.
enum { GPT2_END_OF_TEXT = 50256 };

// What to build from a training text: the kind, and for bpe the vocabulary
// size to learn (at least BPE_BYTES + 1): exactly, or at most
// (bpe_learn_up_to).
typedef struct {
    TokenizerKind kind;
    int vocab_size;
    bool vocab_size_at_most;
} TokenizerSpec;

// TOKENIZER_NAMES: "char", "bpe" and "gpt2", indexed by TokenizerKind,
// NULL-terminated (the --tokenizer values and the checkpoint's "tokenizer"
// metadata); tokenizer_kind_name: one of them. gpt2 is never learned: train
// reads it from a GPT-2 directory (--tokenizer-dir), and a checkpoint keeps
// its two files' text (model/checkpoint.c).
extern const char *const TOKENIZER_NAMES[];
const char *tokenizer_kind_name(TokenizerKind kind);

// tokenizer_fits_model: whether "tok" is the tokenizer of a model with
// "model_vocab" rows of tok_emb: as many tokens, or, for gpt2, one more,
// when that last one is <|endoftext|>. tinygpt's export of a bpe model adds
// <|endoftext|> after its tokens, as GPT-2's readers expect one; the model
// never predicts it, and no text encodes to it (GPT-2's encoder reads the
// string as text), so every id the model sees or samples is below model_vocab.
bool tokenizer_fits_model(const Tokenizer *tok, int model_vocab);

// tokenizer_check_text: whether "text" ("len" bytes) is the contents of a
// text file: strict UTF-8 with no NUL byte (char_vocab_check_text, for
// both kinds). If not, "err" names "source" and the byte offset, and says it
// is not UTF-8 or looks like binary data. The one check of a text;
// tokenizer_build and tokenizer_next make it as they go.
bool tokenizer_check_text(const char *text, size_t len, const char *source, Error *err);

// tokenizer_learn: build a tokenizer of kind "spec" from "text": char's
// vocabulary of its code points (tokenizer_build), or bpe's merges learned
// from it (bpe_learn). Fails as those do, and on text that
// tokenizer_check_text refuses (a bpe model could encode any bytes, but a
// binary file given by mistake is refused as char refuses it).
bool tokenizer_learn(Tokenizer *tok, const TokenizerSpec *spec, const char *text, size_t len,
                     const char *source, Error *err);
// tokenizer_from_bpe_merges: a bpe tokenizer from the checkpoint's "merges"
// metadata (bpe_from_merges_text; messages start with "merges").
bool tokenizer_from_bpe_merges(Tokenizer *tok, const char *merges, size_t len, Error *err);

// tokenizer_build (char only): the vocabulary of every code point in
// "text" (char_vocab_build). "source" names the text in error messages (a
// file name). Fails on invalid UTF-8 (reporting the byte offset) and on
// empty text.
bool tokenizer_build(Tokenizer *tok, const char *text, size_t len, const char *source, Error *err);
// tokenizer_from_vocab (char only): rebuild from the concatenated code
// points in id order (the checkpoint's "vocab" metadata;
// char_vocab_from_text). Fails on invalid UTF-8, an empty vocab, a
// duplicated character or code points out of increasing order; the message
// starts with "vocabulary" and does not know the file, so the caller
// prefixes the checkpoint's path.
bool tokenizer_from_vocab(Tokenizer *tok, const char *vocab, size_t len, Error *err);
// tokenizer_vocab_utf8 (char only): the vocabulary's code points
// concatenated in id order, UTF-8, NUL-terminated; "*len" gets the byte
// count. The caller frees it.
char *tokenizer_vocab_utf8(const Tokenizer *tok, size_t *len);
// tokenizer_id: the id of code point "cp", or -1 if it is not in the
// vocabulary (bpe and gpt2: the id of an ASCII character's byte; -1 for others).
// Read-only, so safe to call from several threads at once.
int tokenizer_id(const Tokenizer *tok, uint32_t cp);
// tokenizer_next (char only): the id of the character at byte "*pos" of
// "text" ("len" bytes), advancing "*pos" past it. Returns -1, with "*pos"
// unchanged and "err" naming "source", the character and its byte offset,
// on invalid UTF-8 or a character outside the vocabulary. For callers that
// store ids their own way (data.c packs them into 1 or 2 bytes).
int tokenizer_next(const Tokenizer *tok, const char *text, size_t len, size_t *pos, const char *source,
                   Error *err);
// tokenizer_encode: text -> ids, "*ids" newly allocated (caller frees) with
// "*n" entries. Fails on a text tokenizer_check_text refuses (checked first,
// over the whole text), then (char) on a character outside the vocabulary,
// naming "source", the character and its byte offset. Not thread-safe for
// bpe and gpt2 (the chunk cache grows).
bool tokenizer_encode(Tokenizer *tok, const char *text, size_t len, int **ids, size_t *n,
                      const char *source, Error *err);
// tokenizer_piece: the bytes of token "id", "*len" of them. A bpe piece can
// end in the middle of a UTF-8 character (its next bytes come in the next
// token), so a printer of pieces must hold incomplete characters back
// (utf8.h's Utf8Stream does).
const char *tokenizer_piece(const Tokenizer *tok, int id, size_t *len);
// tokenizer_decode: the bytes of "n" ids (each in [0, vocab_size)), their
// pieces one after another, in a new NUL-terminated buffer (the caller
// frees it) of "*len" bytes. GPT-2's <|endoftext|> decodes to its spelling.
char *tokenizer_decode(const Tokenizer *tok, const int *ids, size_t n, size_t *len);

// tokenizer_free: release the vocabulary; safe on a zeroed or freed tokenizer.
// tokenizer_build and tokenizer_from_vocab leave nothing to free when they fail.
void tokenizer_free(Tokenizer *tok);

#endif
