// test_bpe.c: tests for src/io/bpe.c (byte-level BPE).
//
// Expected chunks and merges below are worked out by hand from GPT-2's
// regex and the learning rule in bpe.h, never copied from bpe.c's output.
// The random tests hold bpe.c to two naive twins written here: a learner
// that recounts every pair before each merge (bpe.c updates its counts as
// it goes) and an encoder that merges one pair at a time.
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "helpers.h"
#include "rng.h"
#include "tests.h"

// ---- Helpers -------------------------------------------------------------------

// decode_into: the bytes of "n" ids concatenated into "out"; returns the count.
static size_t decode_into(const Bpe *bpe, const int *ids, size_t n, unsigned char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const unsigned char *piece = bpe_piece(bpe, ids[i], &k);
        memcpy(out + len, piece, k);
        len += k;
    }
    return len;
}

// learn_ok: bpe_learn that must succeed.
static void learn_ok(Bpe *bpe, const char *text, size_t len, int vocab_size) {
    Error err = {0};
    ck_assert_msg(bpe_learn(bpe, text, len, vocab_size, "test", &err), "bpe_learn failed: %s", err.msg);
}

// merges_are: the merges as text equal "expected".
static void assert_merges(const Bpe *bpe, const char *expected) {
    char *text = bpe_merges_text(bpe);
    ck_assert_str_eq(text, expected);
    free(text);
}

// Pieces random texts are made of: multi-byte UTF-8, invalid UTF-8, NULs,
// digits, contractions, punctuation and every kind of whitespace run.
static const struct {
    const char *bytes;
    size_t len;
} PIECES[] = {
    {"the", 3}, {"a", 1}, {"ab", 2}, {"ba", 2}, {"aaa", 3}, {"Whale", 5}, {"caf\xC3\xA9", 5},
    {"\xE6\x97\xA5\xE6\x9C\xAC", 6}, {"\xE2\x80\x94", 3}, {"\xF0\x9F\x98\x80", 4}, {"\xFF", 1}, {"\xC3", 1},
    {"\x80\x80", 2}, {"\0", 1}, {"\0\0a", 3}, {"7", 1}, {"42", 2}, {"don't", 5}, {"'s", 2}, {"'LL", 3},
    {"'", 1}, {"...", 3}, {"!?", 2}, {" ", 1}, {"  ", 2}, {"   ", 3}, {"\t", 1}, {"\n", 1}, {"\r\n", 2},
    {" \n", 2}, {"\n ", 2}, {"\v\f", 2},
};

// random_text: "len" bytes of PIECES drawn at random (the last one cut).
static void random_text(Rng *rng, char *out, size_t len) {
    size_t n = 0;
    while (n < len) {
        size_t p = rng_below(rng, sizeof PIECES / sizeof PIECES[0]);
        size_t k = PIECES[p].len < len - n ? PIECES[p].len : len - n;
        memcpy(out + n, PIECES[p].bytes, k);
        n += k;
    }
}

// ---- Chunking ----------------------------------------------------------------------

START_TEST(chunks_follow_gpt2_regex_on_bytes) {
    const struct {
        const char *text;
        const char *chunks;  // joined by '|'
    } cases[] = {
        {"Hello world", "Hello| world"},          // a leading space joins the word
        {"a\nb", "a|\n|b"},                       // a newline before a word is a chunk of its own
        {"a\n\nb", "a|\n|\n|b"},                  // the run gives back its last '\n', alone
        {"a\n b", "a|\n| b"},                     // ... or its last ' ', to the word
        {"a  b", "a| | b"},                       // two spaces: one stays, one joins "b"
        {"a    b", "a|   | b"},                   // four: three stay
        {"a \nb", "a| |\n|b"},
        {"\t\tx", "\t|\t|x"},
        {"  x", " | x"},
        {"x 123 45x", "x| 123| 45|x"},            // digits, with their space
        {"3.14", "3|.|14"},
        {"a1b", "a|1|b"},
        {"wait... what?!", "wait|...| what|?!"},  // punctuation runs
        {"x!!", "x|!!"},
        {" !x", " !|x"},
        {"don't", "don|'t"},                      // contractions
        {"they're we've I'll he'd I'm it's", "they|'re| we|'ve| I|'ll| he|'d| I|'m| it|'s"},
        {"DON'T", "DON|'|T"},                     // lowercase only
        {"'sup", "'s|up"},                        // a contraction ends its chunk
        {" 's", " '|s"},                          // with a space before it is punctuation
        {"''s", "''|s"},
        {"caf\xC3\xA9 na\xC3\xAFve", "caf\xC3\xA9| na\xC3\xAFve"},  // non-ASCII bytes are letters
        {"\xE6\x97\xA5\xE6\x9C\xAC text", "\xE6\x97\xA5\xE6\x9C\xAC| text"},
        {"a\xE2\x80\x94" "b", "a\xE2\x80\x94" "b"},                // so an em dash joins its words
        {"a  ", "a|  "},                          // spaces at the end are one chunk
        {"a \n", "a| \n"},
        {"   ", "   "},
        {" ", " "},
        {"x\n", "x|\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[128];
        chunks_joined(cases[i].text, strlen(cases[i].text), CHUNK_RULES_BYTES, got);
        ck_assert_msg(strcmp(got, cases[i].chunks) == 0, "case %zu \"%s\": got \"%s\", want \"%s\"", i, cases[i].text,
                      got, cases[i].chunks);
    }
}
END_TEST

START_TEST(chunks_treat_nul_bytes_as_punctuation) {
    const char text[] = "a\0b \0\0 c";  // a | \0 | b | " \0\0" | " c"
    const size_t want[] = {1, 1, 1, 3, 2};
    size_t len = sizeof text - 1, pos = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        size_t k = bpe_chunk_len(text + pos, len - pos);
        ck_assert_msg(k == want[i], "chunk %zu: %zu bytes, want %zu", i, k, want[i]);
        pos += k;
    }
    ck_assert_uint_eq(pos, len);
}
END_TEST

// ---- Learning -----------------------------------------------------------------------

START_TEST(learn_gives_the_merges_worked_out_by_hand) {
    // Chunks "ab", " ab", " ab", " cd". Pair counts: (a,b) 3, (' ',a) 2,
    // (' ',c) 1, (c,d) 1. Merge 0: (97,98) -> 256. Then (32,256) 2 -> 257.
    // Then (32,99) and (99,100) tie at 1: the smaller, (32,99) -> 258.
    // Then (258,100) -> 259.
    const char *text = "ab ab ab cd";
    Bpe bpe;
    learn_ok(&bpe, text, strlen(text), 260);
    assert_merges(&bpe, "97 98 32 256 32 99 258 100");
    ck_assert_int_eq(bpe.vocab_size, 260);
    ck_assert_int_eq(bpe.n_merges, 4);
    size_t len;
    const unsigned char *piece = bpe_piece(&bpe, 259, &len);
    ck_assert_uint_eq(len, 3);
    ck_assert(memcmp(piece, " cd", 3) == 0);
    bpe_free(&bpe);
}
END_TEST

START_TEST(learn_breaks_ties_by_the_smallest_pair) {
    // "ba", " ab": (98,97), (32,97), (97,98) all 1: (32,97) first; then
    // (98,97) and (256,98) tie: (98,97) first.
    Bpe bpe;
    learn_ok(&bpe, "ba ab", 5, 259);
    assert_merges(&bpe, "32 97 98 97 256 98");
    bpe_free(&bpe);
}
END_TEST

START_TEST(learn_counts_overlapping_pairs_and_merges_left_to_right) {
    // "aaaa": (a,a) counted 3 times; merging gives "X X" (X = 256), then (X,X).
    Bpe bpe;
    learn_ok(&bpe, "aaaa", 4, 258);
    assert_merges(&bpe, "97 97 256 256");
    int ids[8];
    size_t n = bpe_encode(&bpe, "aaaaa", 5, ids);  // "XX" + "a"
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 257);
    ck_assert_int_eq(ids[1], 97);
    n = bpe_encode(&bpe, "aaa", 3, ids);  // "X" + "a"
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 256);
    ck_assert_int_eq(ids[1], 97);
    bpe_free(&bpe);
}
END_TEST

START_TEST(learn_never_merges_across_chunks) {
    // "a b a b": chunks "a", " b", " a", " b": (a,' ') never forms.
    Bpe bpe;
    learn_ok(&bpe, "a b a b", 7, 258);
    assert_merges(&bpe, "32 98 32 97");
    bpe_free(&bpe);
}
END_TEST

START_TEST(learn_stops_tokens_at_the_longest_allowed) {
    // 600 'a's in one chunk. Merges 0-7 double the token: 2, 4, ... 256
    // 'a's, leaving 256 256 64 16 8 (600 bytes). Joining the two 256s would
    // make 512: too long. Of the pairs left, all counted once, the smallest
    // go first: (16, 8) -> 24, then (64, 24) -> 88. Then every pair left
    // would pass 256 bytes, so there is no merge 10.
    char text[600];
    memset(text, 'a', sizeof text);
    Bpe bpe;
    learn_ok(&bpe, text, sizeof text, 256 + 10);
    const size_t want[10] = {2, 4, 8, 16, 32, 64, 128, 256, 24, 88};
    for (int i = 0; i < 10; i++) {
        size_t len;
        bpe_piece(&bpe, BPE_BYTES + i, &len);
        ck_assert_msg(len == want[i], "token %d: %zu bytes, want %zu", BPE_BYTES + i, len, want[i]);
    }
    bpe_free(&bpe);
    Error err = {0};
    ck_assert(!bpe_learn(&bpe, text, sizeof text, 256 + 11, "runs.txt", &err));
    ck_assert_msg(strstr(err.msg, "after 10"), "message was: %s", err.msg);
}
END_TEST

// bpe_learn_up_to, train's default: the vocabulary a text can fill. It
// stops before the first pair seen only once, and up to there its merges
// are bpe_learn's.
START_TEST(learn_up_to_stops_at_the_first_pair_seen_once) {
    // "ab", " ab", " ab", " cd": (a,b) 3 times, then (' ',ab) twice, then
    // only pairs seen once (' ',c), (c,d).
    const char text[] = "ab ab ab cd";
    Bpe up_to, exact;
    Error err = {0};
    ck_assert_msg(bpe_learn_up_to(&up_to, text, sizeof text - 1, 2048, "small.txt", &err), "%s", err.msg);
    ck_assert_int_eq(up_to.vocab_size, 258);
    ck_assert_int_eq(up_to.n_merges, 2);
    learn_ok(&exact, text, sizeof text - 1, 258);
    char *a = bpe_merges_text(&up_to), *b = bpe_merges_text(&exact);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    bpe_free(&exact);
    bpe_free(&up_to);
    // A ceiling the text can fill is learned exactly, as bpe_learn would.
    ck_assert(bpe_learn_up_to(&up_to, text, sizeof text - 1, 257, "small.txt", &err));
    ck_assert_int_eq(up_to.vocab_size, 257);
    bpe_free(&up_to);
    // No pair seen twice: not one merge to learn is an error naming the
    // file and the way out.
    ck_assert(!bpe_learn_up_to(&up_to, "ab cd", 5, 300, "tiny.txt", &err));
    ck_assert_msg(strstr(err.msg, "'tiny.txt'") && strstr(err.msg, "--tokenizer char") && !strchr(err.msg, '\n'),
                  "message was: %s", err.msg);
    ck_assert_ptr_null(up_to.merges);
}
END_TEST

START_TEST(learn_on_too_little_text_names_the_source_and_the_fix) {
    // "ab", " ab": (a,b) then (' ',X), then nothing is left.
    Bpe bpe;
    Error err = {0};
    ck_assert(!bpe_learn(&bpe, "ab ab", 5, 300, "tiny.txt", &err));
    ck_assert_msg(strstr(err.msg, "'tiny.txt'") && strstr(err.msg, "after 2") && strstr(err.msg, "--vocab-size") &&
                      strstr(err.msg, "at most 258") && !strchr(err.msg, '\n'),
                  "message was: %s", err.msg);
    ck_assert_int_eq(bpe.vocab_size, 0);
    ck_assert_ptr_null(bpe.merges);
    ck_assert(!bpe_learn(&bpe, "", 0, 257, "empty.txt", &err));
    ck_assert_msg(strstr(err.msg, "'empty.txt'"), "message was: %s", err.msg);
    ck_assert(!bpe_learn(&bpe, "a\nb", 3, 257, "single.txt", &err));  // only one-byte chunks
    ck_assert_msg(strstr(err.msg, "'single.txt'"), "message was: %s", err.msg);
}
END_TEST

START_TEST(learn_rejects_a_vocab_size_out_of_range) {
    Bpe bpe;
    Error err = {0};
    ck_assert(!bpe_learn(&bpe, "ab ab", 5, 256, "t", &err));
    ck_assert_msg(strstr(err.msg, "256"), "message was: %s", err.msg);
    ck_assert(!bpe_learn(&bpe, "ab ab", 5, 65537, "t", &err));
    ck_assert_msg(strstr(err.msg, "65537"), "message was: %s", err.msg);
}
END_TEST

// naive_learn: the learning rule as bpe.h states it, slowly: every chunk
// occurrence on its own, every pair recounted before every merge. Writes
// the merges into "merges" and returns how many it learned before no pair
// was left (at most "n_merges").
enum { NAIVE_MAX_VOCAB = 256 + 64 };
static int naive_learn(const char *text, size_t len, int n_merges, BpeMerge *merges) {
    int *tokens = malloc(len * sizeof *tokens);
    // chunk c is tokens[start[c] .. end[c])
    size_t *start = malloc(len * sizeof *start), *end = malloc(len * sizeof *end);
    ck_assert(tokens && start && end);
    size_t n_chunks = 0;
    for (size_t pos = 0; pos < len; n_chunks++) {
        start[n_chunks] = pos;
        pos += bpe_chunk_len(text + pos, len - pos);
        end[n_chunks] = pos;
    }
    for (size_t i = 0; i < len; i++) tokens[i] = (unsigned char)text[i];
    static long long counts[NAIVE_MAX_VOCAB][NAIVE_MAX_VOCAB];
    int token_len[NAIVE_MAX_VOCAB];
    for (int t = 0; t < 256; t++) token_len[t] = 1;
    int learned = 0;
    for (; learned < n_merges; learned++) {
        memset(counts, 0, sizeof counts);
        for (size_t c = 0; c < n_chunks; c++)
            for (size_t i = start[c]; i + 1 < end[c]; i++) counts[tokens[i]][tokens[i + 1]]++;
        int best_l = -1, best_r = -1;
        for (int l = 0; l < 256 + learned; l++)
            for (int r = 0; r < 256 + learned; r++)
                if (counts[l][r] > 0 && token_len[l] + token_len[r] <= BPE_MAX_TOKEN_BYTES &&
                    (best_l < 0 || counts[l][r] > counts[best_l][best_r]))
                    best_l = l, best_r = r;
        if (best_l < 0) break;
        int merged = 256 + learned;
        merges[learned] = (BpeMerge){best_l, best_r};
        token_len[merged] = token_len[best_l] + token_len[best_r];
        for (size_t c = 0; c < n_chunks; c++) {  // merge left to right, closing the gaps in place
            size_t out = start[c];
            for (size_t i = start[c]; i < end[c]; i++) {
                if (i + 1 < end[c] && tokens[i] == best_l && tokens[i + 1] == best_r) tokens[out++] = merged, i++;
                else tokens[out++] = tokens[i];
            }
            end[c] = out;
        }
    }
    free(tokens);
    free(start);
    free(end);
    return learned;
}

START_TEST(learn_matches_a_learner_that_recounts_every_pair) {
    enum { LEN = 3000, MERGES = 60 };
    static char text[LEN];
    for (uint64_t seed = 1; seed <= 6; seed++) {
        Rng rng;
        rng_init(&rng, seed);
        size_t len = 200 + rng_below(&rng, LEN - 200);
        random_text(&rng, text, len);
        BpeMerge want[MERGES];
        int n_want = naive_learn(text, len, MERGES, want);
        Bpe bpe;
        Error err = {0};
        bool ok = bpe_learn(&bpe, text, len, 256 + MERGES, "random", &err);
        ck_assert_msg(ok == (n_want == MERGES), "seed %llu: bpe_learn %s, the naive learner found %d merges: %s",
                      (unsigned long long)seed, ok ? "succeeded" : "failed", n_want, err.msg);
        if (!ok) continue;
        for (int i = 0; i < MERGES; i++)
            ck_assert_msg(bpe.merges[i].left == want[i].left && bpe.merges[i].right == want[i].right,
                          "seed %llu, merge %d: (%d, %d), the naive learner (%d, %d)", (unsigned long long)seed, i,
                          bpe.merges[i].left, bpe.merges[i].right, want[i].left, want[i].right);
        bpe_free(&bpe);
    }
}
END_TEST

// ---- Encoding ----------------------------------------------------------------------------

// naive_encode: per chunk, find the adjacent pair with the lowest merge
// number (searching the merges in order), merge its leftmost occurrence
// only, repeat. Returns the number of ids.
static size_t naive_encode(const Bpe *bpe, const char *text, size_t len, int *ids) {
    size_t count = 0;
    for (size_t pos = 0; pos < len;) {
        size_t k = bpe_chunk_len(text + pos, len - pos);
        int *t = ids + count;
        size_t n = k;
        for (size_t i = 0; i < k; i++) t[i] = (unsigned char)text[pos + i];
        for (;;) {
            int best_rank = -1;
            size_t best_at = 0;
            for (size_t i = 0; i + 1 < n; i++)
                for (int m = 0; m < bpe->n_merges && (best_rank < 0 || m < best_rank); m++)
                    if (bpe->merges[m].left == t[i] && bpe->merges[m].right == t[i + 1]) best_rank = m, best_at = i;
            if (best_rank < 0) break;
            t[best_at] = BPE_BYTES + best_rank;
            memmove(t + best_at + 1, t + best_at + 2, (n - best_at - 2) * sizeof *t);
            n--;
        }
        count += n;
        pos += k;
    }
    return count;
}

START_TEST(encode_matches_an_encoder_that_merges_one_pair_at_a_time) {
    enum { LEN = 4000 };
    static char train[LEN], text[LEN];
    static int ids[LEN], want[LEN];
    for (uint64_t seed = 10; seed < 14; seed++) {
        Rng rng;
        rng_init(&rng, seed);
        random_text(&rng, train, LEN);
        random_text(&rng, text, LEN);
        Bpe bpe;
        learn_ok(&bpe, train, LEN, 256 + 100);
        size_t n = bpe_encode(&bpe, text, LEN, ids);
        size_t n_want = naive_encode(&bpe, text, LEN, want);
        ck_assert_uint_eq(n, n_want);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(ids[i] == want[i], "seed %llu, id %zu: %d, want %d", (unsigned long long)seed, i, ids[i],
                          want[i]);
        bpe_free(&bpe);
    }
}
END_TEST

START_TEST(decode_of_encode_gives_back_any_bytes) {
    enum { LEN = 5000 };
    static char train[LEN], text[LEN];
    static unsigned char back[LEN];
    static int ids[LEN], again[LEN];
    for (uint64_t seed = 20; seed < 26; seed++) {
        Rng rng;
        rng_init(&rng, seed);
        random_text(&rng, train, LEN);
        Bpe bpe;
        learn_ok(&bpe, train, LEN, 256 + 50 + (int)rng_below(&rng, 100));
        for (int round = 0; round < 4; round++) {
            size_t len = rng_below(&rng, LEN + 1);
            random_text(&rng, text, len);
            if (round == 3)  // raw random bytes too, not only the pieces
                for (size_t i = 0; i < len; i++) text[i] = (char)rng_below(&rng, 256);
            size_t n = bpe_encode(&bpe, text, len, ids);
            ck_assert_uint_le(n, len);
            for (size_t i = 0; i < n; i++) ck_assert(ids[i] >= 0 && ids[i] < bpe.vocab_size);
            ck_assert_uint_eq(decode_into(&bpe, ids, n, back), len);
            ck_assert_msg(memcmp(back, text, len) == 0, "seed %llu round %d: decode(encode(x)) != x",
                          (unsigned long long)seed, round);
            // Every chunk boundary is a token boundary.
            size_t token_end = 0, i = 0;
            for (size_t pos = 0; pos < len; pos += bpe_chunk_len(text + pos, len - pos)) {
                while (token_end < pos) {
                    size_t k;
                    bpe_piece(&bpe, ids[i++], &k);
                    token_end += k;
                }
                ck_assert_msg(token_end == pos, "seed %llu: a token crosses the chunk boundary at byte %zu",
                              (unsigned long long)seed, pos);
            }
            // The second time every chunk comes from the cache: the same ids.
            ck_assert_uint_eq(bpe_encode(&bpe, text, len, again), n);
            ck_assert(memcmp(ids, again, n * sizeof *ids) == 0);
        }
        bpe_free(&bpe);
    }
}
END_TEST

START_TEST(encode_of_empty_text_gives_no_ids) {
    Bpe bpe;
    learn_ok(&bpe, "ab ab", 5, 257);
    int ids[1];
    ck_assert_uint_eq(bpe_encode(&bpe, "", 0, ids), 0);
    bpe_free(&bpe);
}
END_TEST

// ---- Merges text --------------------------------------------------------------------------

START_TEST(merges_text_round_trips) {
    enum { LEN = 4000 };
    static char text[LEN];
    Rng rng;
    rng_init(&rng, 7);
    random_text(&rng, text, LEN);
    Bpe learned, loaded;
    learn_ok(&learned, text, LEN, 256 + 80);
    char *merges = bpe_merges_text(&learned);
    Error err = {0};
    ck_assert_msg(bpe_from_merges_text(&loaded, merges, strlen(merges), &err), "%s", err.msg);
    ck_assert_int_eq(loaded.vocab_size, learned.vocab_size);
    ck_assert_int_eq(loaded.n_merges, learned.n_merges);
    ck_assert(memcmp(loaded.merges, learned.merges, (size_t)learned.n_merges * sizeof *learned.merges) == 0);
    for (int id = 0; id < learned.vocab_size; id++) {
        size_t a, b;
        const unsigned char *pa = bpe_piece(&learned, id, &a), *pb = bpe_piece(&loaded, id, &b);
        ck_assert(a == b && memcmp(pa, pb, a) == 0);
    }
    char *again = bpe_merges_text(&loaded);
    ck_assert_str_eq(again, merges);
    free(again);
    free(merges);
    bpe_free(&learned);
    bpe_free(&loaded);
}
END_TEST

START_TEST(from_merges_text_rebuilds_the_pieces) {
    Bpe bpe;
    Error err = {0};
    ck_assert_msg(bpe_from_merges_text(&bpe, "104 105 256 33 0 255", 20, &err), "%s", err.msg);
    ck_assert_int_eq(bpe.vocab_size, 259);
    size_t len;
    const unsigned char *piece = bpe_piece(&bpe, 257, &len);
    ck_assert(len == 3 && memcmp(piece, "hi!", 3) == 0);
    piece = bpe_piece(&bpe, 258, &len);
    ck_assert(len == 2 && piece[0] == 0 && piece[1] == 255);
    piece = bpe_piece(&bpe, 'x', &len);
    ck_assert(len == 1 && piece[0] == 'x');
    int ids[8];
    ck_assert_uint_eq(bpe_encode(&bpe, "hi!", 3, ids), 2);  // "hi" then "!": a chunk boundary in between
    ck_assert_int_eq(ids[0], 256);
    ck_assert_int_eq(ids[1], '!');
    bpe_free(&bpe);
}
END_TEST

#define TEXT(literal) literal, sizeof literal - 1

START_TEST(from_merges_text_reports_each_error_class_in_one_line) {
    const struct {
        const char *text;
        size_t len;   // TEXT(s) gives both, so a text may hold a NUL
        const char *says;
    } cases[] = {
        {TEXT(""), "none"},
        {TEXT("97"), "odd"},
        {TEXT("97 98 256"), "odd"},
        {TEXT("-1 98"), "sign"},
        {TEXT("+97 98"), "sign"},
        {TEXT("97 -98"), "sign"},
        {TEXT("x97 98"), "byte 0 is 0x78"},
        {TEXT(" 97 98"), "byte 0 is 0x20"},
        {TEXT("97  98"), "byte 3 is 0x20"},
        {TEXT("97 98 "), "ends with a space"},
        {TEXT("97,98"), "byte 2 is 0x2C"},
        {TEXT("97 98\n"), "byte 5 is 0x0A"},
        {TEXT("97\0 98"), "byte 2 is 0x00"},
        {TEXT("097 98"), "leading zero"},
        {TEXT("97 00"), "leading zero"},
        {TEXT("65536 1"), "larger than the largest id"},
        {TEXT("99999999999999999999999 1"), "larger than the largest id"},
        {TEXT("256 97"), "only ids below 256"},
        {TEXT("97 98 257 97"), "only ids below 257"},
        {TEXT("97 98 97 98"), "again"},
        // tokens of 2, 4, ... 256 bytes, then 512
        {TEXT("97 97 256 256 257 257 258 258 259 259 260 260 261 261 262 262 263 263"), "512 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Bpe bpe;
        Error err = {0};
        ck_assert_msg(!bpe_from_merges_text(&bpe, cases[i].text, cases[i].len, &err), "case %zu accepted", i);
        ck_assert_msg(strncmp(err.msg, "merges", 6) == 0 && strstr(err.msg, cases[i].says) && !strchr(err.msg, '\n'),
                      "case %zu: message was: %s", i, err.msg);
        ck_assert_int_eq(bpe.vocab_size, 0);
        ck_assert_ptr_null(bpe.merges);
        ck_assert_ptr_null(bpe.pair_rank);
    }
}
END_TEST

// every_pair_of_bytes: "0 0 0 1 ... " for "n" merges, merge k = (k / 256, k % 256).
static char *every_pair_of_bytes(int n, size_t *len) {
    char *text = malloc((size_t)n * 8 + 1);
    ck_assert_ptr_nonnull(text);
    size_t k = 0;
    for (int i = 0; i < n; i++) k += (size_t)sprintf(text + k, "%s%d %d", i ? " " : "", i / 256, i % 256);
    *len = k;
    return text;
}

START_TEST(from_merges_text_takes_up_to_the_largest_vocabulary) {
    size_t len;
    char *text = every_pair_of_bytes(BPE_MAX_VOCAB - BPE_BYTES, &len);
    Bpe bpe;
    Error err = {0};
    ck_assert_msg(bpe_from_merges_text(&bpe, text, len, &err), "%s", err.msg);
    ck_assert_int_eq(bpe.vocab_size, BPE_MAX_VOCAB);
    bpe_free(&bpe);
    free(text);
    text = every_pair_of_bytes(BPE_MAX_VOCAB - BPE_BYTES + 1, &len);
    ck_assert(!bpe_from_merges_text(&bpe, text, len, &err));
    ck_assert_msg(strncmp(err.msg, "merges: more than 65280", 23) == 0, "message was: %s", err.msg);
    free(text);
}
END_TEST

START_TEST(free_is_safe_on_a_zeroed_and_on_a_freed_bpe) {
    Bpe bpe = {0};
    bpe_free(&bpe);
    learn_ok(&bpe, "ab ab", 5, 257);
    int ids[5];
    bpe_encode(&bpe, "ab ab", 5, ids);  // fills the cache
    bpe_free(&bpe);
    bpe_free(&bpe);
    ck_assert_ptr_null(bpe.chunk_cache);
}
END_TEST

Suite *bpe_suite(void) {
    Suite *s = suite_create("bpe");
    TCase *chunk = tcase_create("chunk");
    tcase_add_test(chunk, chunks_follow_gpt2_regex_on_bytes);
    tcase_add_test(chunk, chunks_treat_nul_bytes_as_punctuation);
    suite_add_tcase(s, chunk);

    TCase *learn = tcase_create("learn");
    tcase_set_timeout(learn, 30);  // the naive learner, slower under the sanitizers
    tcase_add_test(learn, learn_gives_the_merges_worked_out_by_hand);
    tcase_add_test(learn, learn_breaks_ties_by_the_smallest_pair);
    tcase_add_test(learn, learn_counts_overlapping_pairs_and_merges_left_to_right);
    tcase_add_test(learn, learn_never_merges_across_chunks);
    tcase_add_test(learn, learn_stops_tokens_at_the_longest_allowed);
    tcase_add_test(learn, learn_up_to_stops_at_the_first_pair_seen_once);
    tcase_add_test(learn, learn_on_too_little_text_names_the_source_and_the_fix);
    tcase_add_test(learn, learn_rejects_a_vocab_size_out_of_range);
    tcase_add_test(learn, learn_matches_a_learner_that_recounts_every_pair);
    suite_add_tcase(s, learn);

    TCase *encode = tcase_create("encode");
    tcase_set_timeout(encode, 30);
    tcase_add_test(encode, encode_matches_an_encoder_that_merges_one_pair_at_a_time);
    tcase_add_test(encode, decode_of_encode_gives_back_any_bytes);
    tcase_add_test(encode, encode_of_empty_text_gives_no_ids);
    suite_add_tcase(s, encode);

    TCase *merges = tcase_create("merges");
    tcase_add_test(merges, merges_text_round_trips);
    tcase_add_test(merges, from_merges_text_rebuilds_the_pieces);
    tcase_add_test(merges, from_merges_text_reports_each_error_class_in_one_line);
    tcase_add_test(merges, from_merges_text_takes_up_to_the_largest_vocabulary);
    tcase_add_test(merges, free_is_safe_on_a_zeroed_and_on_a_freed_bpe);
    suite_add_tcase(s, merges);
    return s;
}
