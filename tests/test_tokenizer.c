// test_tokenizer.c: tests for src/io/char_vocab.c on its own, then
// src/io/tokenizer.c: the character vocabulary (built, sorted, saved and
// loaded back), encoding and its errors (every class of invalid UTF-8
// reported at its byte offset, a NUL byte, a character outside the
// vocabulary), and bpe behind the same interface. UTF-8 itself is
// test_utf8.c's.
//
// The multi-byte characters used below, with their UTF-8 bytes:
//   é  U+00E9   C3 A9          2 bytes
//   —  U+2014   E2 80 94       3 bytes (em dash)
//   ’  U+2019   E2 80 99       3 bytes (curly apostrophe)
//   😀 U+1F600  F0 9F 98 80    4 bytes (emoji)
#include <stdlib.h>
#include <string.h>

#include "char_vocab.h"
#include "helpers.h"
#include "tests.h"
#include "tokenizer.h"

#define EM_DASH "\xE2\x80\x94"
#define CURLY_APOSTROPHE "\xE2\x80\x99"
#define EMOJI "\xF0\x9F\x98\x80"

// ---- char_vocab, without the Tokenizer around it ------------------------------

START_TEST(a_char_vocab_numbers_code_points_in_order_and_round_trips) {
    const char *text = "ba\xC3\xA9" "a";  // b a é a
    CharVocab v;
    Error err = {0};
    ck_assert_msg(char_vocab_build(&v, text, strlen(text), "t", &err), "%s", err.msg);
    const uint32_t want[] = {'a', 'b', 0xE9};
    const char *want_piece[] = {"a", "b", "\xC3\xA9"};
    ck_assert_int_eq(v.size, 3);
    for (int id = 0; id < 3; id++) {
        ck_assert_uint_eq(v.codepoints[id], want[id]);
        ck_assert_int_eq(char_vocab_id(&v, want[id]), id);
        size_t len;
        const char *piece = char_vocab_piece(&v, id, &len);
        ck_assert_uint_eq(len, strlen(want_piece[id]));
        ck_assert_mem_eq(piece, want_piece[id], len);
    }
    ck_assert_int_eq(char_vocab_id(&v, 'z'), -1);

    // The text read back one character at a time: b a é a.
    const int want_ids[] = {1, 0, 2, 0};
    size_t pos = 0;
    for (int i = 0; i < 4; i++) ck_assert_int_eq(char_vocab_next(&v, text, strlen(text), &pos, "t", &err), want_ids[i]);
    ck_assert_uint_eq(pos, strlen(text));

    size_t len;
    char *saved = char_vocab_utf8(&v, &len);
    ck_assert_str_eq(saved, "ab\xC3\xA9");
    ck_assert_uint_eq(len, 4);
    CharVocab loaded;
    ck_assert_msg(char_vocab_from_text(&loaded, saved, len, &err), "%s", err.msg);
    ck_assert_int_eq(loaded.size, v.size);
    ck_assert_mem_eq(loaded.codepoints, v.codepoints, (size_t)v.size * sizeof v.codepoints[0]);
    ck_assert_int_eq(char_vocab_id(&loaded, 0xE9), 2);
    free(saved);
    char_vocab_free(&loaded);
    char_vocab_free(&v);
    char_vocab_free(&v);  // safe twice
    ck_assert_int_eq(v.size, 0);
    ck_assert_ptr_null(v.to_id);
}
END_TEST

START_TEST(char_vocab_next_leaves_pos_where_it_was_on_a_character_it_lacks) {
    CharVocab v;
    ck_assert(char_vocab_build(&v, "ab", 2, "train.txt", NULL));
    const char *text = "a" EM_DASH;
    size_t pos = 1;
    Error err = {0};
    ck_assert_int_eq(char_vocab_next(&v, text, strlen(text), &pos, "prompt", &err), -1);
    ck_assert_uint_eq(pos, 1);
    ck_assert_msg(strstr(err.msg, "'prompt' has the character '" EM_DASH "' (U+2014) at byte 1"),
                  "message was: %s", err.msg);
    ck_assert(!char_vocab_check_text("a\0", 2, "x", &err));
    ck_assert_msg(strstr(err.msg, "'x' has a NUL byte at byte 1"), "message was: %s", err.msg);
    ck_assert(char_vocab_check_text(text, strlen(text), "x", &err));
    char_vocab_free(&v);
}
END_TEST

// ---- tokenizer_build --------------------------------------------------------

START_TEST(build_reports_each_invalid_utf8_class_with_its_byte_offset) {
    // The prefix "a—b" is 5 bytes but 3 characters: the offset counts bytes.
    for (int i = 0; i < N_INVALID_UTF8; i++) {
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
        ck_assert_ptr_null(tok.chars.codepoints);
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
        ck_assert_uint_eq(tok.chars.codepoints[id], want[id]);
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
    ck_assert_mem_eq(a.chars.codepoints, b.chars.codepoints, (size_t)a.vocab_size * sizeof a.chars.codepoints[0]);
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
        ck_assert_uint_eq(loaded.chars.codepoints[id], built.chars.codepoints[id]);
        ck_assert_int_eq(tokenizer_id(&loaded, built.chars.codepoints[id]), id);
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
    ck_assert_ptr_null(tok.chars.to_id);
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
    ck_assert_ptr_null(tok.chars.to_id);
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


// ---- bpe through the Tokenizer --------------------------------------------------

START_TEST(a_bpe_tokenizer_encodes_and_its_pieces_join_back_to_the_text) {
    const char *text = "the whale, the white whale" EM_DASH "the whale!\n";
    Tokenizer tok;
    Error err;
    TokenizerSpec spec = {TOKENIZER_BPE, 262, false};
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
    TCase *chars = tcase_create("char_vocab");
    tcase_add_test(chars, a_char_vocab_numbers_code_points_in_order_and_round_trips);
    tcase_add_test(chars, char_vocab_next_leaves_pos_where_it_was_on_a_character_it_lacks);
    suite_add_tcase(s, chars);

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
    tcase_add_test(pieces, a_bpe_tokenizer_encodes_and_its_pieces_join_back_to_the_text);
    tcase_add_test(pieces, tokenizer_piece_of_a_char_token_is_its_utf8);
    suite_add_tcase(s, pieces);
    return s;
}
