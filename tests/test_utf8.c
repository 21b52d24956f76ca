// test_utf8.c: tests for src/base/utf8.c: utf8_decode on one- to four-byte
// characters and on every class of invalid UTF-8 (helpers.h's INVALID_UTF8),
// utf8_encode round-tripping every code point, utf8_count and utf8_prefix,
// and the Utf8Stream that prints pieces as whole characters.
//
// The multi-byte characters used below, with their UTF-8 bytes:
//   é  U+00E9   C3 A9          2 bytes
//   —  U+2014   E2 80 94       3 bytes (em dash)
//   😀 U+1F600  F0 9F 98 80    4 bytes (emoji)
#include <stdio.h>
#include <string.h>

#include "helpers.h"
#include "tests.h"
#include "utf8.h"

#define EM_DASH "\xE2\x80\x94"
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

START_TEST(utf8_decode_rejects_every_class_of_invalid_utf8) {
    for (int i = 0; i < N_INVALID_UTF8; i++) {
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

Suite *utf8_suite(void) {
    Suite *s = suite_create("utf8");
    TCase *code_points = tcase_create("code_points");
    tcase_add_test(code_points, utf8_decode_reads_one_to_four_byte_characters);
    tcase_add_test(code_points, utf8_encode_then_decode_round_trips_every_code_point);
    tcase_add_test(code_points, utf8_decode_rejects_every_class_of_invalid_utf8);
    tcase_add_test(code_points, utf8_decode_accepts_the_neighbours_of_the_surrogates);
    tcase_add_test(code_points, utf8_decode_never_reads_past_len);
    tcase_add_test(code_points, utf8_count_and_prefix_count_the_bytes_that_start_a_character);
    suite_add_tcase(s, code_points);

    TCase *stream = tcase_create("stream");
    tcase_add_test(stream, stream_holds_a_character_split_between_pieces_until_it_is_whole);
    tcase_add_test(stream, stream_prints_bytes_that_cannot_be_utf8_as_the_replacement_character);
    suite_add_tcase(s, stream);
    return s;
}
