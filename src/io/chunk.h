// chunk.h: text cut into chunks before byte-pair encoding, by GPT-2's rule.
//
// Reading order: file 22, with bpe.h, the one user: a BPE merges only
// inside a chunk, so a token never spans two words.
//
// GPT-2 cuts text with one regular expression, whose first alternative that
// matches at the current position wins, taking as many characters as it can:
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Read in words: a contraction; else an optional ' ' and a run of letters,
// of digits, or of "other" characters; else a run of spaces (white space),
// which, when a non-space follows it, gives back its last space to start
// the next chunk (" a" if it is ' ', or a chunk of its own if it is a '\n').
//
// One chunker with two sets of rules, which differ only in what a character
// is and which class it has:
// - CHUNK_RULES_BYTES, tinygpt's own bpe (--tokenizer bpe): a character is a
//   byte; a letter is an ASCII letter or any byte >= 0x80 (so every
//   non-ASCII character counts as a letter), a digit is 0-9, a space is one
//   of " \t\n\v\f\r". Every checkpoint tinygpt's bpe wrote was learned with
//   these rules, so they stay exactly as they are.
// - CHUNK_RULES_GPT2, GPT-2's own tokenizer: a character is a code point, its
//   class from Unicode's general categories as utf8proc reads them: \p{L}
//   is L* (Lu Ll Lt Lm Lo), \p{N} is N* (Nd Nl No), \s is Unicode's
//   White_Space (Zs Zl Zp, \t \n \v \f \r and U+0085), as in the Python
//   `regex` module GPT-2's encoder.py uses. A byte that does not start valid
//   UTF-8 counts as one "other" character (text is checked before it gets
//   here; this only keeps the chunker total).
#ifndef TINYGPT_CHUNK_H
#define TINYGPT_CHUNK_H

#include <stddef.h>

// The zero value is tinygpt's rules, so a zeroed Bpe chunks as it always did.
typedef enum { CHUNK_RULES_BYTES = 0, CHUNK_RULES_GPT2 } ChunkRules;

// chunk_len: the length in bytes of the chunk that starts at "text" ("len"
// >= 1 bytes left) under "rules"; always >= 1 and <= "len", and never ends
// inside a character that started in it.
size_t chunk_len(const char *text, size_t len, ChunkRules rules);

#endif
