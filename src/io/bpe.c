// bpe.c: a byte-level BPE tokenizer: chunking, learning, encoding (see bpe.h).
//
// Reading order: file 22, after common.c; tokenizer.c (file 23) calls it.
//
// What it does: learns merges from the chunks of a text (cut by chunk.c,
// with tinygpt's rules), turns merges into the tables encoding needs (the
// bytes of each token, and pair -> merge number), encodes text the way GPT-2
// does, and writes and strictly reads the merges as text for checkpoints.
// What it leaves out: special tokens (no "end of text"), and GPT-2's mapping
// of bytes to printable characters (our pieces are the raw bytes; GPT-2's
// own tokenizer, gpt2_tokenizer.c, reads its files into a Bpe that chunks by
// GPT-2's rules and keeps its own numbering beside it).
//
// Three ideas carry the file:
// - A chunk's bytes as a hash-map key. stb_ds's string maps stop at a NUL,
//   and our text may hold any byte, so a ByteMap keys an stb_ds map on a
//   64-bit hash of the bytes and keeps, for each hash, a chain of entries
//   whose bytes are compared in full: two chunks that share a hash stay two
//   entries. Learning counts chunks with one; encoding caches chunks in one.
// - Learning counts each distinct chunk once, as a "word" with a count, and
//   keeps pair counts up to date as merges apply: a merge touches only the
//   words that contain its pair (each pair lists the words it occurs in),
//   never the whole text. A heap hands out the most frequent pair.
// - Encoding repeats GPT-2's loop inside each chunk: merge the adjacent pair
//   with the lowest merge number until no pair has one. Text repeats its
//   words, so each chunk's ids are cached.
//
// Memory comes from xrealloc (stb_ds is routed to it in char_vocab.c, the one
// file that compiles stb_ds) and xmalloc: running out is reported, not a crash.
#include "bpe.h"

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

// ---- Byte strings as hash-map keys ------------------------------------------

// An stb_ds hash map from a 64-bit hash of some bytes to the first entry
// with that hash.
typedef struct {
    uint64_t key;  // bytes_hash of the entry's bytes
    int value;     // index into ByteMap.entries
} HashToEntry;

typedef struct {
    size_t start, len;  // the bytes: base[start .. start + len) of the owner's buffer
    int next;           // the next entry with the same hash, or -1
} ByteEntry;

typedef struct {
    HashToEntry *first;  // stb_ds hash map
    ByteEntry *entries;  // stb_ds array
} ByteMap;

// bytes_hash: FNV-1a, 64 bits: one xor and one multiply per byte. Bits 31
// and 63 are cleared: stb_ds hashes an 8-byte key by shifting its bytes 3
// and 7 left by 24 as ints, undefined behaviour for a byte >= 0x80 (UBSan
// stops on it). 62 bits are plenty, and equal bytes are checked anyway.
static uint64_t bytes_hash(const unsigned char *s, size_t len) {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) hash = (hash ^ s[i]) * 0x100000001b3ull;
    return hash & 0x7FFFFFFF7FFFFFFFull;
}

// byte_map_find: the entry whose bytes (in "base") equal "s" ("len" bytes,
// with hash "hash"), or -1. Follows the chain of entries with that hash.
static int byte_map_find(const ByteMap *map, const unsigned char *base, const unsigned char *s, size_t len,
                         uint64_t hash) {
    if (map->first == NULL) return -1;  // stb_ds would allocate on a lookup in an empty map
    HashToEntry *first = map->first;
    ptrdiff_t slot;
    (void)hmgeti_ts(first, hash, slot);
    for (int e = slot < 0 ? -1 : first[slot].value; e >= 0; e = map->entries[e].next) {
        const ByteEntry *entry = &map->entries[e];
        if (entry->len == len && memcmp(base + entry->start, s, len) == 0) return e;
    }
    return -1;
}

// byte_map_add: a new entry for the bytes at "start" ("len" of them, hash
// "hash") of the owner's buffer, put at the head of its hash's chain;
// returns its index. The caller has checked that the bytes are not there yet.
static int byte_map_add(ByteMap *map, uint64_t hash, size_t start, size_t len) {
    int e = (int)arrlen(map->entries);
    ptrdiff_t slot = hmgeti(map->first, hash);
    ByteEntry entry = {start, len, slot < 0 ? -1 : map->first[slot].value};
    arrput(map->entries, entry);
    hmput(map->first, hash, e);
    return e;
}

static void byte_map_free(ByteMap *map) {
    hmfree(map->first);
    arrfree(map->entries);
}

// ---- Pairs as numbers -------------------------------------------------------

// pair_key: the pair as one number, left in the high half, so that keys
// order as pairs do. Ids are below 65536, so no byte of it reaches 0x80
// (see bytes_hash).
static uint64_t pair_key(int left, int right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

// ---- Learning: words and pair counts ----------------------------------------
// A word is a distinct chunk of the text, held as tokens (its bytes at
// first) with the number of times the chunk occurs. A pair's count is the
// sum, over the words, of word count x how often the pair is adjacent in
// the word (overlaps count: "a a a" holds (a, a) twice).

typedef struct {
    size_t start;   // the word's tokens: Learner.tokens[start .. start + len)
    size_t len;     // shrinks as merges apply
    int64_t count;  // how often the chunk occurs in the text
} Word;

// One entry of the pair-count map (stb_ds hash map keyed on pair_key).
typedef struct {
    uint64_t key;          // pair_key(left, right)
    int64_t count;         // occurrences over all words
    int *words;            // stb_ds array: the words the pair has occurred in (some may have lost it since)
    int64_t count_before;  // "count" when the current merge first touched it
    int touched_in;        // the merge that last touched it (Learner.round)
    bool too_long;         // its token would pass BPE_MAX_TOKEN_BYTES: never merged
} PairCount;

// A heap entry proposes a pair with the count it had when pushed; if the
// count has changed since, a newer entry exists and this one is skipped.
typedef struct {
    int64_t count;
    uint64_t key;
} HeapEntry;

typedef struct {
    int *tokens;        // stb_ds array: every word's tokens, word after word
    Word *words;        // stb_ds array
    PairCount *pairs;   // stb_ds hash map: pair -> its count and words
    HeapEntry *heap;    // stb_ds array: a binary max-heap (heap_before)
    int *touched;       // stb_ds array: the pairs the current merge changed (indices in "pairs")
    int round;          // 1 for the first count, then one more per merge
    int *token_bytes;   // [vocab_size] each token's length in bytes
} Learner;

// collect_words: count every distinct chunk of "text" once, then make each
// chunk of two bytes or more a word (a one-byte chunk holds no pair).
static void collect_words(Learner *learner, const unsigned char *text, size_t len) {
    ByteMap chunks = {0};  // its bytes are in "text" itself
    int64_t *counts = NULL;  // stb_ds array: [entry] occurrences
    for (size_t pos = 0; pos < len;) {
        size_t n = bpe_chunk_len((const char *)text + pos, len - pos);
        uint64_t hash = bytes_hash(text + pos, n);
        int e = byte_map_find(&chunks, text, text + pos, n, hash);
        if (e < 0) {
            e = byte_map_add(&chunks, hash, pos, n);
            arrput(counts, 0);
        }
        counts[e]++;
        pos += n;
    }
    for (int e = 0; e < (int)arrlen(chunks.entries); e++) {
        const ByteEntry *chunk = &chunks.entries[e];
        if (chunk->len < 2) continue;
        Word word = {(size_t)arrlen(learner->tokens), chunk->len, counts[e]};
        for (size_t i = 0; i < chunk->len; i++) arrput(learner->tokens, text[chunk->start + i]);
        arrput(learner->words, word);
    }
    arrfree(counts);
    byte_map_free(&chunks);
}

// heap_before: whether "a" comes out of the heap before "b": the larger
// count, then the smaller (left, right), which pair_key orders as numbers.
static bool heap_before(HeapEntry a, HeapEntry b) {
    return a.count > b.count || (a.count == b.count && a.key < b.key);
}

// heap_push: append, then swap upwards while it beats its parent.
static void heap_push(Learner *learner, HeapEntry entry) {
    arrput(learner->heap, entry);
    HeapEntry *heap = learner->heap;
    for (size_t i = (size_t)arrlen(heap) - 1; i > 0 && heap_before(heap[i], heap[(i - 1) / 2]); i = (i - 1) / 2) {
        HeapEntry parent = heap[(i - 1) / 2];
        heap[(i - 1) / 2] = heap[i];
        heap[i] = parent;
    }
}

// heap_pop: take the top, move the last entry there and swap it downwards
// with its better child while that child beats it.
static HeapEntry heap_pop(Learner *learner) {
    HeapEntry *heap = learner->heap;
    HeapEntry top = heap[0];
    heap[0] = arrpop(learner->heap);
    size_t n = (size_t)arrlen(heap);
    for (size_t i = 0;;) {
        size_t best = i, left = 2 * i + 1, right = 2 * i + 2;
        if (left < n && heap_before(heap[left], heap[best])) best = left;
        if (right < n && heap_before(heap[right], heap[best])) best = right;
        if (best == i) break;
        HeapEntry swap = heap[i];
        heap[i] = heap[best];
        heap[best] = swap;
        i = best;
    }
    return top;
}

// add_to_pair: add "delta" to the count of (left, right), creating it at 0
// if new, and remember that this round touched it. If "word" >= 0, the pair
// now occurs in that word: append it to the pair's word list (not twice in
// a row, which is all the repetition one word's update can cause).
static void add_to_pair(Learner *learner, int left, int right, int64_t delta, int word) {
    uint64_t key = pair_key(left, right);
    ptrdiff_t p = hmgeti(learner->pairs, key);
    if (p < 0) {
        PairCount fresh = {.key = key};
        hmputs(learner->pairs, fresh);
        p = hmgeti(learner->pairs, key);
    }
    PairCount *pair = &learner->pairs[p];
    if (pair->touched_in != learner->round) {
        pair->touched_in = learner->round;
        pair->count_before = pair->count;
        arrput(learner->touched, (int)p);
    }
    pair->count += delta;
    if (word >= 0 && (arrlen(pair->words) == 0 || arrlast(pair->words) != word)) arrput(pair->words, word);
}

// push_changed_pairs: end of a round: every pair whose count changed gets a
// heap entry with its new count (its older entries are now stale).
static void push_changed_pairs(Learner *learner) {
    for (int i = 0; i < (int)arrlen(learner->touched); i++) {
        const PairCount *pair = &learner->pairs[learner->touched[i]];
        if (pair->count != pair->count_before && pair->count > 0)
            heap_push(learner, (HeapEntry){pair->count, pair->key});
    }
    if (arrlen(learner->touched) > 0) arrdeln(learner->touched, 0, arrlen(learner->touched));  // empty, memory kept
}

// count_all_pairs: the first round: every pair of every word.
static void count_all_pairs(Learner *learner) {
    learner->round = 1;
    for (int w = 0; w < (int)arrlen(learner->words); w++) {
        const Word *word = &learner->words[w];
        const int *t = learner->tokens + word->start;
        for (size_t i = 0; i + 1 < word->len; i++) add_to_pair(learner, t[i], t[i + 1], word->count, w);
    }
    push_changed_pairs(learner);
}

// merge_in_word: apply merge (left, right) -> "merged" to word "w",
// scanning left to right (so "a a a" with the pair (a, a) becomes
// "merged a"), and fix the pair counts at each place it applies. With
// "x" before and "y" after, "x left right y" becomes "x merged y":
// (x, left), (left, right) and (right, y) lose one count each (times the
// word's count), (x, merged) and (merged, y) gain one.
// "x" is the token already written to the left, which may itself be a
// "merged" of the place before: in "a b a b" the second place turns
// (merged, a) back into (merged, merged). Every other pair of the word is
// untouched. The gained pairs are new to the word, so they list it.
static void merge_in_word(Learner *learner, int w, int left, int right, int merged) {
    Word *word = &learner->words[w];
    int *t = learner->tokens + word->start;
    int64_t k = word->count;
    size_t out = 0;  // tokens written back; out <= i, so t[i + 2] is still unread
    for (size_t i = 0; i < word->len;) {
        if (i + 1 < word->len && t[i] == left && t[i + 1] == right) {
            if (out > 0) {
                add_to_pair(learner, t[out - 1], left, -k, -1);
                add_to_pair(learner, t[out - 1], merged, k, w);
            }
            add_to_pair(learner, left, right, -k, -1);
            if (i + 2 < word->len) {
                add_to_pair(learner, right, t[i + 2], -k, -1);
                add_to_pair(learner, merged, t[i + 2], k, w);
            }
            t[out++] = merged;
            i += 2;
        } else {
            t[out++] = t[i++];
        }
    }
    word->len = out;
}

// apply_merge: merge pair "p" into the new token "merged" in every word it
// occurs in, then push the counts that changed. Afterwards the pair occurs
// nowhere (the left-to-right scan leaves no (left, right) behind) and can
// never occur again (only pairs with "merged" are created), so its word
// list is freed.
static void apply_merge(Learner *learner, ptrdiff_t p, int merged) {
    learner->round++;
    int left = (int)(learner->pairs[p].key >> 32), right = (int)(learner->pairs[p].key & 0xFFFFFFFFu);
    int *words = learner->pairs[p].words;  // detached: the map may move while we add pairs
    learner->pairs[p].words = NULL;
    for (int i = 0; i < (int)arrlen(words); i++) merge_in_word(learner, words[i], left, right, merged);
    arrfree(words);
    assert(learner->pairs[hmgeti(learner->pairs, pair_key(left, right))].count == 0);
    push_changed_pairs(learner);
}

// best_pair: the pair to merge next: the top of the heap, skipping stale
// entries (the pair's count has changed since) and pairs whose token would
// be longer than BPE_MAX_TOKEN_BYTES. Returns its index in "pairs", or -1
// when no pair is left.
static ptrdiff_t best_pair(Learner *learner) {
    while (arrlen(learner->heap) > 0) {
        HeapEntry top = heap_pop(learner);
        ptrdiff_t p = hmgeti(learner->pairs, top.key);
        PairCount *pair = &learner->pairs[p];
        if (pair->count != top.count || pair->too_long) continue;
        int left = (int)(top.key >> 32), right = (int)(top.key & 0xFFFFFFFFu);
        if (learner->token_bytes[left] + learner->token_bytes[right] > BPE_MAX_TOKEN_BYTES) {
            pair->too_long = true;
            continue;
        }
        return p;
    }
    return -1;
}

static void learner_free(Learner *learner) {
    for (ptrdiff_t p = 0; p < hmlen(learner->pairs); p++) arrfree(learner->pairs[p].words);
    hmfree(learner->pairs);
    arrfree(learner->tokens);
    arrfree(learner->words);
    arrfree(learner->heap);
    arrfree(learner->touched);
    free(learner->token_bytes);
    free(learner);
}

// ---- The tables a list of merges defines ------------------------------------

typedef struct {
    uint64_t key;  // pair_key(left, right)
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
        ptrdiff_t earlier = hmgeti(ranks, pair_key(left, right));
        if (earlier >= 0) {
            int first = ranks[earlier].value;
            bpe->pair_rank = ranks;
            return error_set(err, "merges: merge %d joins %d and %d again (merge %d did)" DAMAGED, i, left, right,
                             first);
        }
        hmput(ranks, pair_key(left, right), i);
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

// ---- Learning ---------------------------------------------------------------

// learn: collect the words, count their pairs, then per merge: take the
// best pair, record it, merge it in the words that hold it. The tables are
// built from the merges at the end, as bpe_from_merges_text does. "up_to":
// stop early, without an error, at the first pair seen fewer than twice
// (bpe_learn_up_to).
static bool learn(Bpe *bpe, const char *text, size_t len, int vocab_size, bool up_to, const char *source,
                  Error *err) {
    memset(bpe, 0, sizeof *bpe);
    if (vocab_size <= BPE_BYTES || vocab_size > BPE_MAX_VOCAB)
        return error_set(err, "a BPE vocabulary size must be in [%d, %d], not %d", BPE_BYTES + 1, (int)BPE_MAX_VOCAB,
                         vocab_size);
    int n_merges = vocab_size - BPE_BYTES;
    Learner *learner = xcalloc(1, sizeof *learner);
    learner->token_bytes = xmalloc((size_t)vocab_size * sizeof *learner->token_bytes);
    for (int b = 0; b < BPE_BYTES; b++) learner->token_bytes[b] = 1;
    collect_words(learner, (const unsigned char *)text, len);
    count_all_pairs(learner);

    BpeMerge *merges = xmalloc((size_t)n_merges * sizeof *merges);
    for (int i = 0; i < n_merges; i++) {
        ptrdiff_t p = best_pair(learner);
        if (up_to && (p < 0 || learner->pairs[p].count < 2)) {
            if (i == 0) {
                learner_free(learner);
                free(merges);
                return error_set(err, "'%s' has too little text for bpe: no pair of tokens occurs twice; use --tokenizer char",
                                 source);
            }
            n_merges = i;
            vocab_size = BPE_BYTES + i;
            break;
        }
        if (p < 0) {
            learner_free(learner);
            free(merges);
            return error_set(err, "'%s' has too little text to learn %d merges: no pair of tokens is left to merge after %d; use a --vocab-size of at most %d",
                             source, n_merges, i, BPE_BYTES + i);
        }
        int left = (int)(learner->pairs[p].key >> 32), right = (int)(learner->pairs[p].key & 0xFFFFFFFFu);
        merges[i] = (BpeMerge){left, right};
        learner->token_bytes[BPE_BYTES + i] = learner->token_bytes[left] + learner->token_bytes[right];
        apply_merge(learner, p, BPE_BYTES + i);
    }
    learner_free(learner);

    bpe->vocab_size = vocab_size;
    bpe->n_merges = n_merges;
    bpe->merges = merges;
    bool built = build_tables(bpe, err);
    assert(built);  // learned merges are valid by construction
    (void)built;
    return true;
}

bool bpe_learn(Bpe *bpe, const char *text, size_t len, int vocab_size, const char *source, Error *err) {
    return learn(bpe, text, len, vocab_size, false, source, err);
}

bool bpe_learn_up_to(Bpe *bpe, const char *text, size_t len, int max_vocab_size, const char *source, Error *err) {
    return learn(bpe, text, len, max_vocab_size, true, source, err);
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
    (void)hmgeti_ts(ranks, pair_key(left, right), slot);
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
