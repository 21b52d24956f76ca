// bpe.c: a byte-level BPE tokenizer: merges into tables, encoding (see bpe.h);
// learning the merges is bpe_learn.c's.
//
// Reading order: file 22, after common.c; tokenizer.c (file 23) calls it.
//
// What it does: turns merges into the tables encoding needs (the
// bytes of each token, and pair -> merge number), encodes text the way GPT-2
// does, and writes and strictly reads the merges as text for checkpoints.
// What it leaves out: special tokens (no "end of text"), and GPT-2's mapping
// of bytes to printable characters (our pieces are the raw bytes; GPT-2's
// own tokenizer, gpt2_tokenizer.c, reads its files into a Bpe that chunks by
// GPT-2's rules and keeps its own numbering beside it).
//
// Encoding repeats GPT-2's loop inside each chunk: merge the adjacent pair
// with the lowest merge number until no pair has one. Text repeats its
// words, so each chunk's ids are cached, in a ByteMap (byte_map.h: a
// chunk's bytes as a hash-map key).
//
// Memory comes from xrealloc (stb_ds is routed to it in char_vocab.c, the one
// file that compiles stb_ds) and xmalloc: running out is reported, not a crash.
#include "bpe.h"
#include "byte_map.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <stb_ds.h>

// A suffix for every error in merges text, which only a damaged checkpoint has.
#define DAMAGED "; the checkpoint is damaged, train a new one"

// ---- Chunking ---------------------------------------------------------------

// bpe_chunk_len: tinygpt's rules (chunk.h), the ones learning always uses.
size_t bpe_chunk_len(const char *text, size_t len) {
    return chunk_len(text, len, CHUNK_RULES_BYTES);
}

// ---- The tables a list of merges defines ------------------------------------

typedef struct {
    uint64_t key;  // bpe_pair_key(left, right)
    int value;     // the merge number that joins them
} PairToRank;

// build_tables: from bpe->merges, the bytes of every token (piece_start,
// piece_bytes) and the pair -> merge number map. The piece of token
// 256 + i is the piece of its left token then that of its right. Fails,
// leaving the tables for bpe_free, on what only merges text can hold: an
// id that does not exist yet, a pair merged twice, a token too long.
static bool build_tables(Bpe *bpe, Error *err) {
    int V = bpe->vocab_size;
    bpe->piece_start = xmalloc(((size_t)V + 1) * sizeof *bpe->piece_start);
    for (int b = 0; b <= BPE_BYTES; b++) bpe->piece_start[b] = (size_t)b;
    PairToRank *ranks = NULL;
    for (int i = 0; i < bpe->n_merges; i++) {
        int left = bpe->merges[i].left, right = bpe->merges[i].right, exist = BPE_BYTES + i;
        if (left < 0 || left >= exist || right < 0 || right >= exist) {
            bpe->pair_rank = ranks;
            return error_set(err, "merges: merge %d joins %d and %d, but only ids below %d exist by then" DAMAGED, i,
                             left, right, exist);
        }
        ptrdiff_t earlier = hmgeti(ranks, bpe_pair_key(left, right));
        if (earlier >= 0) {
            int first = ranks[earlier].value;
            bpe->pair_rank = ranks;
            return error_set(err, "merges: merge %d joins %d and %d again (merge %d did)" DAMAGED, i, left, right,
                             first);
        }
        hmput(ranks, bpe_pair_key(left, right), i);
        size_t bytes = (bpe->piece_start[left + 1] - bpe->piece_start[left]) +
                       (bpe->piece_start[right + 1] - bpe->piece_start[right]);
        if (bytes > BPE_MAX_TOKEN_BYTES) {
            bpe->pair_rank = ranks;
            return error_set(err, "merges: merge %d makes a token of %zu bytes, more than %d" DAMAGED, i, bytes,
                             (int)BPE_MAX_TOKEN_BYTES);
        }
        bpe->piece_start[exist + 1] = bpe->piece_start[exist] + bytes;
    }
    bpe->pair_rank = ranks;

    bpe->piece_bytes = xmalloc(bpe->piece_start[V] > 0 ? bpe->piece_start[V] : 1);
    for (int b = 0; b < BPE_BYTES; b++) bpe->piece_bytes[b] = (unsigned char)b;
    for (int i = 0; i < bpe->n_merges; i++) {
        size_t left_len, right_len;
        const unsigned char *left = bpe_piece(bpe, bpe->merges[i].left, &left_len);
        const unsigned char *right = bpe_piece(bpe, bpe->merges[i].right, &right_len);
        unsigned char *out = bpe->piece_bytes + bpe->piece_start[BPE_BYTES + i];
        memcpy(out, left, left_len);
        memcpy(out + left_len, right, right_len);
    }
    return true;
}

// ---- Merges as text ---------------------------------------------------------

// bpe_merges_text: "%d %d" per merge, joined by single spaces. An id has at
// most 5 digits, so a merge takes at most 12 bytes with its separator.
char *bpe_merges_text(const Bpe *bpe) {
    size_t cap = (size_t)bpe->n_merges * 12 + 1;
    char *out = xmalloc(cap);
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < bpe->n_merges; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%d %d", i > 0 ? " " : "", bpe->merges[i].left, bpe->merges[i].right);
    return out;
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

// parse_ids: the numbers of merges text, into the stb_ds array "*ids". The
// grammar, strictly, so that every tokenizer has exactly one spelling:
//
//   text   = number (" " number)*
//   number = "0" | [1-9] [0-9]*     (no sign, no leading zero, below BPE_MAX_VOCAB)
//
// and at most two numbers per possible merge.
static bool parse_ids(const char *text, size_t len, int **ids, Error *err) {
    const int max_ids = 2 * (BPE_MAX_VOCAB - BPE_BYTES);
    if (len == 0) return error_set(err, "merges: none (a BPE tokenizer has at least one)" DAMAGED);
    for (size_t pos = 0;;) {
        size_t start = pos;
        if (pos == len) return error_set(err, "merges: the text ends with a space at byte %zu" DAMAGED, pos - 1);
        if (text[pos] == '-' || text[pos] == '+')
            return error_set(err, "merges: a sign '%c' at byte %zu; ids are plain numbers" DAMAGED, text[pos], pos);
        if (!is_digit(text[pos]))
            return error_set(err, "merges: byte %zu is 0x%02X where a number belongs" DAMAGED, pos,
                             (unsigned char)text[pos]);
        if (text[pos] == '0' && pos + 1 < len && is_digit(text[pos + 1]))
            return error_set(err, "merges: the number at byte %zu has a leading zero" DAMAGED, pos);
        int value = 0;
        for (; pos < len && is_digit(text[pos]); pos++) {
            value = value * 10 + (text[pos] - '0');
            if (value >= BPE_MAX_VOCAB)
                return error_set(err, "merges: the number at byte %zu is larger than the largest id, %d" DAMAGED,
                                 start, BPE_MAX_VOCAB - 1);
        }
        if (arrlen(*ids) == max_ids)
            return error_set(err, "merges: more than %d, the most a vocabulary of %d has" DAMAGED, max_ids / 2,
                             (int)BPE_MAX_VOCAB);
        arrput(*ids, value);
        if (pos == len) return true;
        if (text[pos] != ' ')
            return error_set(err, "merges: byte %zu is 0x%02X where a space between numbers belongs" DAMAGED, pos,
                             (unsigned char)text[pos]);
        pos++;
    }
}

// bpe_from_merges_text: parse the numbers, pair them up into merges, and
// build the tables, which checks each merge against the ones before it.
bool bpe_from_merges_text(Bpe *bpe, const char *text, size_t len, Error *err) {
    memset(bpe, 0, sizeof *bpe);
    int *ids = NULL;
    if (!parse_ids(text, len, &ids, err)) {
        arrfree(ids);
        return false;
    }
    size_t n_ids = (size_t)arrlen(ids);
    if (n_ids % 2 != 0) {
        arrfree(ids);
        return error_set(err, "merges: %zu numbers, an odd count; each merge is two" DAMAGED, n_ids);
    }
    int n_merges = (int)(n_ids / 2);
    BpeMerge *merges = xmalloc((size_t)n_merges * sizeof *merges);
    for (int i = 0; i < n_merges; i++) merges[i] = (BpeMerge){ids[2 * i], ids[2 * i + 1]};
    arrfree(ids);
    return bpe_from_merges(bpe, merges, n_merges, CHUNK_RULES_BYTES, err);
}

// bpe_from_merges: build_tables checks each merge against the ones before it.
bool bpe_from_merges(Bpe *bpe, BpeMerge *merges, int n_merges, ChunkRules rules, Error *err) {
    memset(bpe, 0, sizeof *bpe);
    bpe->n_merges = n_merges;
    bpe->vocab_size = BPE_BYTES + n_merges;
    bpe->merges = merges;
    bpe->rules = rules;
    if (!build_tables(bpe, err)) {
        bpe_free(bpe);
        return false;
    }
    return true;
}

// ---- Encoding ---------------------------------------------------------------

// The rank of a pair no merge joins: more than any merge number.
enum { NO_MERGE = BPE_MAX_VOCAB };

// rank_of: the merge number of pair (left, right), or NO_MERGE. Uses
// hmgeti_ts, which leaves the map itself untouched.
static int rank_of(const Bpe *bpe, int left, int right) {
    PairToRank *ranks = bpe->pair_rank;
    if (ranks == NULL) return NO_MERGE;
    ptrdiff_t slot;
    (void)hmgeti_ts(ranks, bpe_pair_key(left, right), slot);
    return slot < 0 ? NO_MERGE : ranks[slot].value;
}

// encode_chunk: GPT-2's loop on one chunk ("len" bytes of "s") into "ids":
// start from the bytes; find the adjacent pair with the lowest merge
// number; merge every occurrence of it, left to right; repeat until no
// adjacent pair has a merge. Merging all occurrences at once is the same
// as one at a time: the new token's own pairs all have higher numbers, so
// the pair just merged stays the lowest. Returns the number of ids.
//
// "ranks" (room for "len") holds the merge number of each adjacent pair,
// ranks[i] for (ids[i], ids[i + 1]), NO_MERGE if none, so that a pass
// compares numbers and only the pairs beside a new token are looked up
// again; a long chunk then costs one scan per merge, not one hash lookup
// per pair per merge. The merge number names the pair, so ranks[i] ==
// best finds the places to merge.
static size_t encode_chunk(const Bpe *bpe, const unsigned char *s, size_t len, int *ids, int *ranks) {
    for (size_t i = 0; i < len; i++) ids[i] = s[i];
    for (size_t i = 0; i < len; i++) ranks[i] = i + 1 < len ? rank_of(bpe, ids[i], ids[i + 1]) : NO_MERGE;
    size_t n = len;
    for (;;) {
        int best = NO_MERGE;
        for (size_t i = 0; i < n; i++) best = ranks[i] < best ? ranks[i] : best;
        if (best == NO_MERGE) return n;
        int merged = BPE_BYTES + best;
        // Merge, carrying each kept pair's rank along; a rank next to a new
        // token is stale until the second loop.
        size_t out = 0;
        for (size_t i = 0; i < n; out++) {
            if (ranks[i] == best) {
                ids[out] = merged;
                i += 2;
            } else {
                ids[out] = ids[i];
                ranks[out] = ranks[i];
                i++;
            }
        }
        n = out;
        for (size_t i = 0; i < n; i++) {
            if (ids[i] != merged) continue;
            if (i > 0) ranks[i - 1] = rank_of(bpe, ids[i - 1], merged);
            ranks[i] = i + 1 < n ? rank_of(bpe, merged, ids[i + 1]) : NO_MERGE;
        }
    }
}

// The chunk cache: each chunk's bytes and its ids, found by its bytes.
// Two limits keep its memory small when a text hardly repeats (random
// data, where nearly every chunk is new): chunks longer than
// CACHE_MAX_CHUNK_BYTES (long runs of spaces or punctuation) are encoded
// each time, and once CACHE_MAX_CHUNKS chunks are in, no more are added.
// A text's frequent words come early, so they are in by then.
enum { CACHE_MAX_CHUNK_BYTES = 64, CACHE_MAX_CHUNKS = 1 << 20 };

typedef struct {
    size_t start;  // ChunkCache.ids[start .. start + n)
    size_t n;
} CachedIds;

typedef struct {
    ByteMap chunks;        // its bytes are in "bytes"
    unsigned char *bytes;  // stb_ds array: the cached chunks' bytes, one after another
    int *ids;              // stb_ds array: their ids, one after another
    CachedIds *entry_ids;  // stb_ds array: [entry] where its ids are
    int *ranks;            // stb_ds array: encode_chunk's scratch, as long as the longest chunk yet
} ChunkCache;

static void cache_free(ChunkCache *cache) {
    if (cache == NULL) return;
    byte_map_free(&cache->chunks);
    arrfree(cache->bytes);
    arrfree(cache->ids);
    arrfree(cache->entry_ids);
    arrfree(cache->ranks);
    free(cache);
}

// cache_add: remember that chunk "s" ("len" bytes, hash "hash") encodes to
// "ids" ("n" of them).
static void cache_add(ChunkCache *cache, const unsigned char *s, size_t len, uint64_t hash, const int *ids, size_t n) {
    size_t byte_start = (size_t)arrlen(cache->bytes);
    memcpy(arraddnptr(cache->bytes, len), s, len);
    byte_map_add(&cache->chunks, hash, byte_start, len);
    CachedIds where = {(size_t)arrlen(cache->ids), n};
    memcpy(arraddnptr(cache->ids, n), ids, n * sizeof *ids);
    arrput(cache->entry_ids, where);
}

// bpe_encode: chunk by chunk: copy the ids of a cached chunk, or encode it
// straight into "ids" and cache the result.
size_t bpe_encode(Bpe *bpe, const char *text, size_t len, int *ids) {
    if (bpe->chunk_cache == NULL) bpe->chunk_cache = xcalloc(1, sizeof(ChunkCache));
    ChunkCache *cache = bpe->chunk_cache;
    const unsigned char *s = (const unsigned char *)text;
    size_t count = 0;
    for (size_t pos = 0; pos < len;) {
        size_t n = chunk_len(text + pos, len - pos, bpe->rules);
        if ((size_t)arrlen(cache->ranks) < n) arrsetlen(cache->ranks, n);
        if (n > CACHE_MAX_CHUNK_BYTES) {
            count += encode_chunk(bpe, s + pos, n, ids + count, cache->ranks);
        } else {
            uint64_t hash = bytes_hash(s + pos, n);
            int e = byte_map_find(&cache->chunks, cache->bytes, s + pos, n, hash);
            if (e >= 0) {
                CachedIds where = cache->entry_ids[e];
                memcpy(ids + count, cache->ids + where.start, where.n * sizeof *ids);
                count += where.n;
            } else {
                size_t k = encode_chunk(bpe, s + pos, n, ids + count, cache->ranks);
                if (arrlen(cache->entry_ids) < CACHE_MAX_CHUNKS) cache_add(cache, s + pos, n, hash, ids + count, k);
                count += k;
            }
        }
        pos += n;
    }
    return count;
}

// ---- Pieces and freeing -----------------------------------------------------

// bpe_piece: token "id"'s slice of piece_bytes, which build_tables laid out.
const unsigned char *bpe_piece(const Bpe *bpe, int id, size_t *len) {
    assert(id >= 0 && id < bpe->vocab_size);
    *len = bpe->piece_start[id + 1] - bpe->piece_start[id];
    return bpe->piece_bytes + bpe->piece_start[id];
}

// bpe_free: free(NULL) and hmfree(NULL) do nothing, and the Bpe is zeroed
// afterwards, so a second call finds nothing to free.
void bpe_free(Bpe *bpe) {
    free(bpe->merges);
    free(bpe->piece_start);
    free(bpe->piece_bytes);
    PairToRank *ranks = bpe->pair_rank;
    hmfree(ranks);
    cache_free(bpe->chunk_cache);
    memset(bpe, 0, sizeof *bpe);
}
