// test_tokenizer.c: tests for src/io/tokenizer.c: UTF-8 (decoding, counting,
// and the stream that prints pieces cut inside a character), the character
// vocabulary (building, encoding, its saved form), and each token's piece,
// char or bpe (bpe itself: test_bpe.c).
//
// The multi-byte characters used below, with their UTF-8 bytes:
//   é  U+00E9   C3 A9          2 bytes
//   —  U+2014   E2 80 94       3 bytes (em dash)
//   ’  U+2019   E2 80 99       3 bytes (curly apostrophe)
//   😀 U+1F600  F0 9F 98 80    4 bytes (emoji)
#include <stdlib.h>
#include <string.h>

#include "tests.h"
#include "tokenizer.h"

#define EM_DASH "\xE2\x80\x94"
#define CURLY_APOSTROPHE "\xE2\x80\x99"
#define EMOJI "\xF0\x9F\x98\x80"

// decode_first: utf8_decode on the first character of "s" (at most "len"
// bytes): its length in bytes (0 if invalid), and its code point in "*cp".
static int decode_first(const char *s, size_t len, uint32_t *cp) {
    return utf8_decode((const unsigned char *)s, len, cp);
}

// ---- utf8_decode / utf8_encode ----------------------------------------------

START_TEST(utf8_decode_reads_one_to_four_byte_characters) {
    const struct {
        const char *bytes;
        int len;
        uint32_t cp;
    } cases[] = {
        {"A", 1, 0x41},
        {"\xC3\xA9", 2, 0xE9},
        {EM_DASH, 3, 0x2014},
        {EMOJI, 4, 0x1F600},
        {"\x7F", 1, 0x7F},               // largest 1-byte
        {"\xC2\x80", 2, 0x80},           // smallest 2-byte
        {"\xEF\xBF\xBF", 3, 0xFFFF},     // largest 3-byte
        {"\xF4\x8F\xBF\xBF", 4, 0x10FFFF},  // largest code point
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t cp = 0;
        int n = decode_first(cases[i].bytes, strlen(cases[i].bytes), &cp);
        ck_assert_msg(n == cases[i].len && cp == cases[i].cp, "case %zu: got %d bytes, U+%04X", i, n,
                      (unsigned)cp);
    }
}
END_TEST

START_TEST(utf8_encode_then_decode_round_trips_every_code_point) {
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates are not characters
        char buf[4];
        int n = utf8_encode(cp, buf);
        uint32_t back = 0;
        int m = utf8_decode((const unsigned char *)buf, (size_t)n, &back);
        // `if` + ck_abort_msg, not ck_assert_msg: every passing ck_assert
        // writes to Check's pipe, and a million of them took this test past
        // its timeout under the sanitizers on a busy machine.
        if (m != n || back != cp)
            ck_abort_msg("U+%04X encoded to %d bytes, decoded to U+%04X (%d bytes)", (unsigned)cp, n, (unsigned)back,
                         m);
    }
}
END_TEST

// Each class of invalid UTF-8, with examples; utf8_decode must return 0 on all.
static const struct {
    const char *name;
    const char *bytes;
} INVALID_UTF8[] = {
    {"stray continuation byte 0x80", "\x80"},
    {"stray continuation byte 0xBF", "\xBF"},
    {"overlong 2-byte '/' (C0 AF)", "\xC0\xAF"},
    {"overlong 2-byte U+007F (C1 BF)", "\xC1\xBF"},
    {"overlong 3-byte '/' (E0 80 AF)", "\xE0\x80\xAF"},
    {"overlong 3-byte U+07FF (E0 9F BF)", "\xE0\x9F\xBF"},
    {"overlong 4-byte U+FFFF (F0 8F BF BF)", "\xF0\x8F\xBF\xBF"},
    {"first surrogate U+D800 (ED A0 80)", "\xED\xA0\x80"},
    {"last surrogate U+DFFF (ED BF BF)", "\xED\xBF\xBF"},
    {"U+110000 (F4 90 80 80)", "\xF4\x90\x80\x80"},
    {"lead byte F5", "\xF5\x80\x80\x80"},
    {"byte FF", "\xFF"},
    {"3-byte sequence cut by the end", "\xE2\x80"},
    {"4-byte sequence cut by the end", "\xF0\x9F\x98"},
    {"2-byte sequence cut by an ASCII byte", "\xC3" "A"},
    {"3-byte sequence cut by a new lead byte", "\xE2\x80\xC3\xA9"},
};
enum { N_INVALID = sizeof INVALID_UTF8 / sizeof INVALID_UTF8[0] };

START_TEST(utf8_decode_rejects_every_class_of_invalid_utf8) {
    for (int i = 0; i < N_INVALID; i++) {
        uint32_t cp = 0;
        int n = decode_first(INVALID_UTF8[i].bytes, strlen(INVALID_UTF8[i].bytes), &cp);
        ck_assert_msg(n == 0, "%s: accepted as %d bytes, U+%04X", INVALID_UTF8[i].name, n, (unsigned)cp);
    }
}
END_TEST

START_TEST(utf8_decode_accepts_the_neighbours_of_the_surrogates) {
    uint32_t cp = 0;
    ck_assert_int_eq(decode_first("\xED\x9F\xBF", 3, &cp), 3);
    ck_assert_uint_eq(cp, 0xD7FF);
    ck_assert_int_eq(decode_first("\xEE\x80\x80", 3, &cp), 3);
    ck_assert_uint_eq(cp, 0xE000);
}
END_TEST

START_TEST(utf8_decode_never_reads_past_len) {
    // A valid emoji, but only 3 of its bytes are offered.
    uint32_t cp = 0;
    ck_assert_int_eq(decode_first(EMOJI, 3, &cp), 0);
    ck_assert_int_eq(decode_first("A", 0, &cp), 0);
}
END_TEST

// ---- tokenizer_build --------------------------------------------------------

START_TEST(build_reports_each_invalid_utf8_class_with_its_byte_offset) {
    // The prefix "a—b" is 5 bytes but 3 characters: the offset counts bytes.
    for (int i = 0; i < N_INVALID; i++) {
        char text[64];
        int len = snprintf(text, sizeof text, "a" EM_DASH "b%scd", INVALID_UTF8[i].bytes);
        Tokenizer tok;
        Error err = {0};
        ck_assert_msg(!tokenizer_build(&tok, text, (size_t)len, "x.txt", &err), "%s: accepted",
                      INVALID_UTF8[i].name);
        ck_assert_msg(strstr(err.msg, "'x.txt' is not valid UTF-8 at byte 5") != NULL, "%s: message was: %s",
                      INVALID_UTF8[i].name, err.msg);
        ck_assert_msg(strstr(err.msg, "iconv") != NULL, "%s: no fix suggested: %s", INVALID_UTF8[i].name,
                      err.msg);
        ck_assert_int_eq(tok.vocab_size, 0);
        ck_assert_ptr_null(tok.codepoints);
    }
}
END_TEST

START_TEST(build_rejects_empty_text) {
    Tokenizer tok;
    Error err = {0};
    ck_assert(!tokenizer_build(&tok, "", 0, "empty.txt", &err));
    ck_assert_str_eq(err.msg, "'empty.txt' is empty; give a text file with some text in it");
}
END_TEST

START_TEST(build_rejects_a_nul_byte_as_binary_data) {
    const char text[] = "abc\0def";
    Tokenizer tok;
    Error err = {0};
    ck_assert(!tokenizer_build(&tok, text, sizeof text - 1, "model.bin", &err));
    ck_assert_msg(strstr(err.msg, "'model.bin'") && strstr(err.msg, "byte 3") && strstr(err.msg, "binary"),
                  "message was: %s", err.msg);
}
END_TEST

START_TEST(vocabulary_is_sorted_by_code_point_and_deduplicated) {
    const char *text = "banana" CURLY_APOSTROPHE EMOJI EM_DASH "ban" EM_DASH;
    Tokenizer tok;
    Error err = {0};
    ck_assert_msg(tokenizer_build(&tok, text, strlen(text), "t", &err), "%s", err.msg);
    const uint32_t want[] = {'a', 'b', 'n', 0x2014, 0x2019, 0x1F600};
    ck_assert_int_eq(tok.vocab_size, 6);
    for (int id = 0; id < 6; id++) {
        ck_assert_uint_eq(tok.codepoints[id], want[id]);
        ck_assert_int_eq(tokenizer_id(&tok, want[id]), id);
    }
    tokenizer_free(&tok);
}
END_TEST

START_TEST(the_same_characters_in_any_order_give_the_same_vocabulary) {
    const char *one = "cab" EM_DASH, *two = EM_DASH "bca";
    Tokenizer a, b;
    ck_assert(tokenizer_build(&a, one, strlen(one), "one", NULL));
    ck_assert(tokenizer_build(&b, two, strlen(two), "two", NULL));
    ck_assert_int_eq(a.vocab_size, b.vocab_size);
    ck_assert_mem_eq(a.codepoints, b.codepoints, (size_t)a.vocab_size * sizeof a.codepoints[0]);
    tokenizer_free(&a);
    tokenizer_free(&b);
}
END_TEST

// ---- tokenizer_encode / tokenizer_piece -------------------------------------

START_TEST(encode_then_decode_round_trips_multibyte_characters) {
    const char *text = "Caf\xC3\xA9 " EM_DASH " it" CURLY_APOSTROPHE "s " EMOJI "!\n";
    size_t len = strlen(text);
    Tokenizer tok;
    Error err = {0};
    ck_assert_msg(tokenizer_build(&tok, text, len, "t", &err), "%s", err.msg);
    int *ids;
    size_t n;
    ck_assert_msg(tokenizer_encode(&tok, text, len, &ids, &n, "t", &err), "%s", err.msg);
    // 15 characters in 23 bytes: each multi-byte character is one token.
    ck_assert_uint_eq(len, 23);
    ck_assert_uint_eq(n, 15);
    char back[64];
    size_t back_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t piece_len;
        const char *piece = tokenizer_piece(&tok, ids[i], &piece_len);
        memcpy(back + back_len, piece, piece_len);
        back_len += piece_len;
    }
    ck_assert_uint_eq(back_len, len);
    ck_assert_mem_eq(back, text, len);
    free(ids);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(encode_gives_each_multibyte_character_one_token) {
    const char *text = EM_DASH EMOJI EM_DASH;
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, text, strlen(text), "t", NULL));
    int *ids;
    size_t n;
    ck_assert(tokenizer_encode(&tok, text, strlen(text), &ids, &n, "t", NULL));
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(ids[0], 0);  // U+2014 sorts before U+1F600
    ck_assert_int_eq(ids[1], 1);
    ck_assert_int_eq(ids[2], 0);
    free(ids);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(encode_of_empty_text_gives_no_tokens) {
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, "ab", 2, "t", NULL));
    int *ids = NULL;
    size_t n = 99;
    ck_assert(tokenizer_encode(&tok, "", 0, &ids, &n, "t", NULL));
    ck_assert_uint_eq(n, 0);
    free(ids);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(encode_rejects_an_unknown_character_naming_it_and_its_byte_offset) {
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, "abc", 3, "train.txt", NULL));
    const char *prompt = "ab" EM_DASH "c";
    int *ids;
    size_t n;
    Error err = {0};
    ck_assert(!tokenizer_encode(&tok, prompt, strlen(prompt), &ids, &n, "--prompt", &err));
    ck_assert_msg(strstr(err.msg, "'--prompt'") && strstr(err.msg, "'" EM_DASH "'") &&
                      strstr(err.msg, "U+2014") && strstr(err.msg, "at byte 2"),
                  "message was: %s", err.msg);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(encode_names_an_unknown_control_character_by_code_point_only) {
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, "abc", 3, "train.txt", NULL));
    int *ids;
    size_t n;
    Error err = {0};
    ck_assert(!tokenizer_encode(&tok, "a\tb", 3, &ids, &n, "new.txt", &err));
    ck_assert_msg(strstr(err.msg, "U+0009") && strstr(err.msg, "at byte 1"), "message was: %s", err.msg);
    ck_assert_msg(strchr(err.msg, '\t') == NULL, "raw tab in message: %s", err.msg);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(encode_reports_invalid_utf8_with_its_byte_offset) {
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, "abc", 3, "train.txt", NULL));
    int *ids;
    size_t n;
    Error err = {0};
    ck_assert(!tokenizer_encode(&tok, "abc\xFF", 4, &ids, &n, "val.txt", &err));
    ck_assert_msg(strstr(err.msg, "'val.txt' is not valid UTF-8 at byte 3"), "message was: %s", err.msg);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(encode_reports_binary_data_before_a_character_outside_the_vocabulary) {
    // The start of an ELF executable: 0x7F 'E' 'L' 'F' are valid UTF-8 but
    // not in this vocabulary, and the NUL that says "binary" comes later.
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, "abc", 3, "train.txt", NULL));
    const char elf[] = "\x7F" "ELF\x02\x01\x01\x00\x00";
    int *ids;
    size_t n;
    Error err = {0};
    ck_assert(!tokenizer_encode(&tok, elf, sizeof elf - 1, &ids, &n, "/bin/ls", &err));
    ck_assert_msg(strstr(err.msg, "'/bin/ls' has a NUL byte at byte 7, so it looks like binary data"),
                  "message was: %s", err.msg);
    tokenizer_free(&tok);
}
END_TEST

START_TEST(tokenizer_id_is_minus_one_for_a_character_outside_the_vocabulary) {
    Tokenizer tok;
    ck_assert(tokenizer_build(&tok, "abc", 3, "t", NULL));
    ck_assert_int_eq(tokenizer_id(&tok, 'b'), 1);
    ck_assert_int_eq(tokenizer_id(&tok, 'z'), -1);
    ck_assert_int_eq(tokenizer_id(&tok, 0x1F600), -1);
    tokenizer_free(&tok);
}
END_TEST

// ---- tokenizer_vocab_utf8 / tokenizer_from_vocab ------------------------------

START_TEST(vocab_utf8_then_from_vocab_round_trips) {
    const char *text = "the whale" EM_DASH "it" CURLY_APOSTROPHE "s " EMOJI;
    Tokenizer built, loaded;
    ck_assert(tokenizer_build(&built, text, strlen(text), "t", NULL));
    size_t len;
    char *vocab = tokenizer_vocab_utf8(&built, &len);
    ck_assert_uint_eq(strlen(vocab), len);
    Error err = {0};
    ck_assert_msg(tokenizer_from_vocab(&loaded, vocab, len, &err), "%s", err.msg);
    ck_assert_int_eq(loaded.vocab_size, built.vocab_size);
    for (int id = 0; id < built.vocab_size; id++) {
        ck_assert_uint_eq(loaded.codepoints[id], built.codepoints[id]);
        ck_assert_int_eq(tokenizer_id(&loaded, built.codepoints[id]), id);
    }
    free(vocab);
    tokenizer_free(&built);
    tokenizer_free(&loaded);
}
END_TEST

START_TEST(from_vocab_rejects_code_points_out_of_increasing_order) {
    // tokenizer_build numbers characters in code point order; a vocabulary
    // in another order would give each row of the embedding to another
    // character than the one it was trained for.
    const char *vocab = "ay" EM_DASH "z";
    Tokenizer tok;
    Error err = {0};
    ck_assert(!tokenizer_from_vocab(&tok, vocab, strlen(vocab), &err));
    ck_assert_msg(strstr(err.msg, "vocabulary is not in increasing code point order") &&
                      strstr(err.msg, "U+007A comes after U+2014, at byte 5"),
                  "message was: %s", err.msg);
    ck_assert_int_eq(tok.vocab_size, 0);
    ck_assert_ptr_null(tok.to_id);
}
END_TEST

START_TEST(from_vocab_rejects_a_duplicated_character) {
    const char *vocab = "abc" EM_DASH EM_DASH;
    Tokenizer tok;
    Error err = {0};
    ck_assert(!tokenizer_from_vocab(&tok, vocab, strlen(vocab), &err));
    ck_assert_msg(strstr(err.msg, "U+2014") && strstr(err.msg, "twice") && strstr(err.msg, "byte 6"),
                  "message was: %s", err.msg);
    ck_assert_int_eq(tok.vocab_size, 0);
    ck_assert_ptr_null(tok.to_id);
}
END_TEST

START_TEST(from_vocab_rejects_invalid_utf8_a_nul_and_an_empty_vocab) {
    Tokenizer tok;
    Error err = {0};
    ck_assert(!tokenizer_from_vocab(&tok, "ab\xC0\xAF", 4, &err));
    ck_assert_msg(strstr(err.msg, "byte 2"), "message was: %s", err.msg);
    ck_assert(!tokenizer_from_vocab(&tok, "a\0b", 3, &err));
    ck_assert_msg(strstr(err.msg, "byte 1"), "message was: %s", err.msg);
    ck_assert(!tokenizer_from_vocab(&tok, "", 0, &err));
    ck_assert_msg(strstr(err.msg, "empty"), "message was: %s", err.msg);
}
END_TEST


START_TEST(utf8_count_and_prefix_count_the_bytes_that_start_a_character) {
    const char *text = "a" EM_DASH "b" EMOJI;  // 1 + 3 + 1 + 4 bytes, 4 characters
    ck_assert_uint_eq(utf8_count(text, strlen(text)), 4);
    const size_t want[] = {0, 1, 4, 5, 9, 9};  // the first 0..5 characters
    for (size_t k = 0; k < 6; k++) ck_assert_uint_eq(utf8_prefix(text, strlen(text), k), want[k]);
    ck_assert_uint_eq(utf8_count("", 0), 0);
}
END_TEST

// ---- Utf8Stream ---------------------------------------------------------------

// stream_pieces: what a Utf8Stream prints for "pieces" written one after the
// other, then finished; into "out" (a memory stream).
static void stream_pieces(const char *const *pieces, int n, char *out, size_t cap) {
    FILE *f = fmemopen(out, cap, "w");
    ck_assert_ptr_nonnull(f);
    Utf8Stream stream = {0};
    for (int i = 0; i < n; i++) utf8_stream_write(&stream, pieces[i], strlen(pieces[i]), f);
    utf8_stream_finish(&stream, f);
    fclose(f);
}

#define REPLACEMENT "\xEF\xBF\xBD"

START_TEST(stream_holds_a_character_split_between_pieces_until_it_is_whole) {
    // The emoji's 4 bytes arrive as 1 + 2 + 1; nothing of it may show early.
    char out[64];
    FILE *f = fmemopen(out, sizeof out, "w");
    ck_assert_ptr_nonnull(f);
    setvbuf(f, NULL, _IONBF, 0);
    Utf8Stream stream = {0};
    utf8_stream_write(&stream, "a\xF0", 2, f);
    ck_assert_int_eq(ftell(f), 1);
    utf8_stream_write(&stream, "\x9F\x98", 2, f);
    ck_assert_int_eq(ftell(f), 1);
    utf8_stream_write(&stream, "\x80" EM_DASH, 4, f);
    ck_assert_int_eq(ftell(f), 8);
    utf8_stream_finish(&stream, f);
    fclose(f);
    ck_assert_str_eq(out, "a" EMOJI EM_DASH);
}
END_TEST

START_TEST(stream_prints_bytes_that_cannot_be_utf8_as_the_replacement_character) {
    const struct {
        const char *pieces[3];
        int n;
        const char *want;
    } cases[] = {
        {{"a\x80", "b"}, 2, "a" REPLACEMENT "b"},                      // a stray continuation byte
        {{"\xE2\x80", "x"}, 2, REPLACEMENT REPLACEMENT "x"},          // cut short by an ASCII byte
        {{"\xFF", "\xC3", "\xA9"}, 3, REPLACEMENT "\xC3\xA9"},       // never valid, then a whole é
        {{"ok\xE2\x80"}, 1, "ok" REPLACEMENT},                        // the text ends inside a character
        {{"\xC0\xAF"}, 1, REPLACEMENT REPLACEMENT},                    // overlong "/"
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64] = "";
        stream_pieces(cases[i].pieces, cases[i].n, out, sizeof out);
        ck_assert_msg(strcmp(out, cases[i].want) == 0, "case %zu", i);
    }
}
END_TEST

// ---- bpe through the Tokenizer --------------------------------------------------

START_TEST(a_bpe_tokenizer_encodes_and_its_pieces_join_back_to_the_text) {
    const char *text = "the whale, the white whale" EM_DASH "the whale!\n";
    Tokenizer tok;
    Error err;
    TokenizerSpec spec = {TOKENIZER_BPE, 262};
    ck_assert_msg(tokenizer_learn(&tok, &spec, text, strlen(text), "t", &err), "%s", err.msg);
    ck_assert_int_eq(tok.kind, TOKENIZER_BPE);
    ck_assert_int_eq(tok.vocab_size, 262);
    int *ids;
    size_t n;
    ck_assert(tokenizer_encode(&tok, text, strlen(text), &ids, &n, "t", &err));
    ck_assert_uint_lt(n, strlen(text));
    char back[128];
    size_t back_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *piece = tokenizer_piece(&tok, ids[i], &len);
        memcpy(back + back_len, piece, len);
        back_len += len;
    }
    ck_assert_uint_eq(back_len, strlen(text));
    ck_assert_mem_eq(back, text, back_len);
    ck_assert_int_eq(tokenizer_id(&tok, '\n'), '\n');  // an ASCII character is its byte
    ck_assert_int_eq(tokenizer_id(&tok, 0x2014), -1);
    // A text a bpe model reads is checked like a char model's.
    free(ids);
    ck_assert(!tokenizer_encode(&tok, "a\0b", 3, &ids, &n, "prompt", &err) && strstr(err.msg, "NUL"));
    tokenizer_free(&tok);
    tokenizer_free(&tok);  // safe twice
}
END_TEST

START_TEST(tokenizer_piece_of_a_char_token_is_its_utf8) {
    Tokenizer tok;
    const char *text = "a" EMOJI EM_DASH;
    ck_assert(tokenizer_build(&tok, text, strlen(text), "t", NULL));
    size_t len;
    const char *piece = tokenizer_piece(&tok, 0, &len);
    ck_assert_uint_eq(len, 1);
    ck_assert_mem_eq(piece, "a", 1);
    piece = tokenizer_piece(&tok, 1, &len);  // U+2014 sorts before U+1F600
    ck_assert_uint_eq(len, 3);
    ck_assert_mem_eq(piece, EM_DASH, 3);
    piece = tokenizer_piece(&tok, 2, &len);
    ck_assert_uint_eq(len, 4);
    ck_assert_mem_eq(piece, EMOJI, 4);
    tokenizer_free(&tok);
}
END_TEST

Suite *tokenizer_suite(void) {
    Suite *s = suite_create("tokenizer");
    TCase *utf8 = tcase_create("utf8");
    tcase_add_test(utf8, utf8_decode_reads_one_to_four_byte_characters);
    tcase_add_test(utf8, utf8_encode_then_decode_round_trips_every_code_point);
    tcase_add_test(utf8, utf8_decode_rejects_every_class_of_invalid_utf8);
    tcase_add_test(utf8, utf8_decode_accepts_the_neighbours_of_the_surrogates);
    tcase_add_test(utf8, utf8_decode_never_reads_past_len);
    tcase_add_test(utf8, utf8_count_and_prefix_count_the_bytes_that_start_a_character);
    suite_add_tcase(s, utf8);

    TCase *build = tcase_create("build");
    tcase_add_test(build, build_reports_each_invalid_utf8_class_with_its_byte_offset);
    tcase_add_test(build, build_rejects_empty_text);
    tcase_add_test(build, build_rejects_a_nul_byte_as_binary_data);
    tcase_add_test(build, vocabulary_is_sorted_by_code_point_and_deduplicated);
    tcase_add_test(build, the_same_characters_in_any_order_give_the_same_vocabulary);
    suite_add_tcase(s, build);

    TCase *encode = tcase_create("encode");
    tcase_add_test(encode, encode_then_decode_round_trips_multibyte_characters);
    tcase_add_test(encode, encode_gives_each_multibyte_character_one_token);
    tcase_add_test(encode, encode_of_empty_text_gives_no_tokens);
    tcase_add_test(encode, encode_rejects_an_unknown_character_naming_it_and_its_byte_offset);
    tcase_add_test(encode, encode_names_an_unknown_control_character_by_code_point_only);
    tcase_add_test(encode, encode_reports_invalid_utf8_with_its_byte_offset);
    tcase_add_test(encode, encode_reports_binary_data_before_a_character_outside_the_vocabulary);
    tcase_add_test(encode, tokenizer_id_is_minus_one_for_a_character_outside_the_vocabulary);
    suite_add_tcase(s, encode);

    TCase *vocab = tcase_create("vocab");
    tcase_add_test(vocab, vocab_utf8_then_from_vocab_round_trips);
    tcase_add_test(vocab, from_vocab_rejects_code_points_out_of_increasing_order);
    tcase_add_test(vocab, from_vocab_rejects_a_duplicated_character);
    tcase_add_test(vocab, from_vocab_rejects_invalid_utf8_a_nul_and_an_empty_vocab);
    suite_add_tcase(s, vocab);

    TCase *pieces = tcase_create("pieces");
    tcase_add_test(pieces, stream_holds_a_character_split_between_pieces_until_it_is_whole);
    tcase_add_test(pieces, stream_prints_bytes_that_cannot_be_utf8_as_the_replacement_character);
    tcase_add_test(pieces, a_bpe_tokenizer_encodes_and_its_pieces_join_back_to_the_text);
    tcase_add_test(pieces, tokenizer_piece_of_a_char_token_is_its_utf8);
    suite_add_tcase(s, pieces);
    return s;
}
