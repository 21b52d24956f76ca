// bpe_learn.c: learning a byte-level BPE's merges from a text (see bpe.h).
//
// Reading order: file 22, after bpe.c, whose bpe_from_merges turns the
// learned merges into the tables encoding needs.
//
// Learning counts each distinct chunk of the text (cut by chunk.c, with
// tinygpt's rules) once, as a "word" with a count, in a ByteMap
// (byte_map.h), and keeps pair counts up to date as merges apply: a merge
// touches only the words that contain its pair (each pair lists the words
// it occurs in), never the whole text. A heap hands out the most frequent
// pair.
//
// Memory comes from xrealloc (stb_ds is routed to it in char_vocab.c) and
// xmalloc: running out is reported, not a crash.
#include "bpe.h"
#include "byte_map.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <stb_ds.h>

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
    uint64_t key;          // bpe_pair_key(left, right)
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
    uint64_t key = bpe_pair_key(left, right);
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
    assert(learner->pairs[hmgeti(learner->pairs, bpe_pair_key(left, right))].count == 0);
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

// ---- Learning ---------------------------------------------------------------

// learn: collect the words, count their pairs, then per merge: take the
// best pair, record it, merge it in the words that hold it. The tables are
// built from the merges at the end by bpe_from_merges, as for merges read. "up_to":
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

    bool built = bpe_from_merges(bpe, merges, n_merges, CHUNK_RULES_BYTES, err);
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
