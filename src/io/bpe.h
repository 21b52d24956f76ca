// bpe.h: a byte-level BPE tokenizer, learned from the training text.
//
// Reading order: file 22, before tokenizer.h (file 23), which holds a Bpe as
// its second kind of tokenizer and puts both kinds behind one interface.
//
// Byte-level, as GPT-2: ids 0..255 are the 256 bytes, so every input
// encodes and no character is unknown. Merge number i (0-based) joins two
// existing tokens, "left" then "right", into the new token 256 + i; a
// tokenizer of vocab_size V has V - 256 merges.
//
// Before learning or encoding, text is cut into chunks (chunk.h) and merges
// never cross a chunk boundary, so a token never spans two words. Learning
// and tinygpt's own checkpoints use tinygpt's rules (CHUNK_RULES_BYTES);
// GPT-2's tokenizer builds its Bpe with GPT-2's (bpe_from_merges).
//
// Learning (bpe_learn, in bpe_learn.c): count every adjacent pair of tokens inside the
// chunks, merge the most frequent pair, repeat. Ties go to the smallest
// (left, right), compared as numbers, so the result is deterministic.
// Encoding (bpe_encode): within each chunk, repeatedly apply the merge with
// the lowest number among the adjacent pairs, as GPT-2 does.
#ifndef TINYGPT_BPE_H
#define TINYGPT_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunk.h"
#include "common.h"

enum { BPE_BYTES = 256 };  // ids below this are single bytes

typedef struct {
    int left, right;  // the two tokens joined, in order
} BpeMerge;

typedef struct {
    int vocab_size;        // V = BPE_BYTES + n_merges
    int n_merges;
    BpeMerge *merges;      // [n_merges] merge i makes token BPE_BYTES + i
    ChunkRules rules;      // how bpe_encode cuts text: tinygpt's (the zero value) or GPT-2's
    // The bytes of every token (its "piece"): token t is
    // piece_bytes[piece_start[t] .. piece_start[t+1]).
    size_t *piece_start;   // [V + 1]
    unsigned char *piece_bytes;
    // Private to bpe.c: the lookup tables encoding needs (stb_ds hash
    // maps: pair -> merge number, and a cache of encoded chunks).
    void *pair_rank;
    void *chunk_cache;
} Bpe;

// bpe_chunk_len: the length in bytes of the chunk that starts at "text"
// ("len" >= 1 bytes left) by tinygpt's rules: chunk_len(text, len,
// CHUNK_RULES_BYTES), which chunk.h spells out. Always >= 1.
size_t bpe_chunk_len(const char *text, size_t len);

// bpe_learn: learn vocab_size - 256 merges from "text" ("len" bytes).
// vocab_size must be in [257, BPE_MAX_VOCAB]. Fewer pairs than merges
// (a tiny text) is an error naming "source". On failure "bpe" is empty.
// A pair whose token would be longer than BPE_MAX_TOKEN_BYTES is never
// merged (it only happens in long runs of one character): this bounds the
// memory of the token table, learned or read from merges text.
enum { BPE_MAX_VOCAB = 65536, BPE_MAX_TOKEN_BYTES = 256 };
bool bpe_learn(Bpe *bpe, const char *text, size_t len, int vocab_size, const char *source, Error *err);
// bpe_learn_up_to: as bpe_learn, but "max_vocab_size" is a ceiling: it
// stops early, with a smaller vocabulary, where the next pair would be one
// seen only once (a merge that would learn one spot of the text, not a
// piece of its language) or none is left. train's default (--vocab-size
// not given), so a small text gets the vocabulary it can fill; a text
// without one pair seen twice is an error naming "source".
bool bpe_learn_up_to(Bpe *bpe, const char *text, size_t len, int max_vocab_size, const char *source, Error *err);

// bpe_merges_text: the merges as text for a checkpoint's metadata:
// "left right" pairs in merge order, numbers separated by single spaces
// ("104 101 256 108" is two merges). NUL-terminated; the caller frees.
char *bpe_merges_text(const Bpe *bpe);
// bpe_from_merges_text: rebuild from bpe_merges_text's output. Fails, with a
// message starting "merges" that the caller prefixes with the file, on
// anything else: a non-number, an odd count, an id that does not exist yet
// when its merge is made (>= 256 + i), a pair merged twice, more than
// BPE_MAX_VOCAB - 256 merges, a token longer than BPE_MAX_TOKEN_BYTES, and
// no merges at all (empty text: a BPE tokenizer has at least one merge).
// Numbers have no sign and no leading zero. On failure "bpe" is empty.
bool bpe_from_merges_text(Bpe *bpe, const char *text, size_t len, Error *err);
// bpe_from_merges: build from "n_merges" merges already in memory (ids as
// above), whose encoding cuts text by "rules"; takes "merges" (an xmalloc'd
// array) over, freed by bpe_free, also on failure. Fails as
// bpe_from_merges_text does on what the merges hold (an id that does not
// exist yet, a pair merged twice, a token too long); a caller reading its
// own format checks those first, to name its file and line.
bool bpe_from_merges(Bpe *bpe, BpeMerge *merges, int n_merges, ChunkRules rules, Error *err);

// bpe_pair_key: a pair of ids as one number, left in the high half, so that
// keys order as pairs do: the key of bpe.c's and bpe_learn.c's maps of pairs.
// Ids are below 65536, so no byte of it reaches 0x80 (see byte_map.c's
// bytes_hash, on stb_ds's hashing of 8-byte keys).
static inline uint64_t bpe_pair_key(int left, int right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

// bpe_encode: the ids of "text" ("len" bytes, any bytes) into "ids", which
// has room for "len" ids (a token is at least one byte); returns the count.
// Not thread-safe (it fills the chunk cache).
size_t bpe_encode(Bpe *bpe, const char *text, size_t len, int *ids);

// bpe_piece: the bytes of token "id" (0 <= id < vocab_size), "*len" of them.
const unsigned char *bpe_piece(const Bpe *bpe, int id, size_t *len);

// bpe_free: release everything; safe on a zeroed or freed Bpe.
void bpe_free(Bpe *bpe);

#endif
