// test_json.c: tests for src/io/json.c (the strict JSON reader, the string
// writer and its growing buffer).
//
// Characters used below, with their UTF-8 bytes:
//   é  U+00E9   C3 A9          (JSON "\u00e9")
//   €  U+20AC   E2 82 AC       (JSON "\u20AC")
//   😀 U+1F600  F0 9F 98 80    (JSON surrogate pair "\uD83D\uDE00")
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "json.h"
#include "tests.h"

// parse: json_parse on a NUL-terminated string; NULL if it was rejected.
static JsonValue *parse(const char *text) {
    JsonValue *root = NULL;
    Error err = {{0}};
    json_parse(text, strlen(text), &root, &err);
    return root;
}

// parse_error: the message json_parse gives for "text", which must be rejected.
static const char *parse_error(const char *text) {
    static Error err;
    JsonValue *root = (JsonValue *)1;
    memset(&err, 0, sizeof err);
    bool ok = json_parse(text, strlen(text), &root, &err);
    ck_assert_msg(!ok, "json_parse accepted %s", text);
    ck_assert_msg(root == NULL, "a rejected parse must set *out to NULL");
    ck_assert_msg(err.msg[0] != '\0' && strchr(err.msg, '\n') == NULL, "want a one-line message, got '%s'", err.msg);
    return err.msg;
}

// ---- Structure ------------------------------------------------------------------

START_TEST(parse_reads_nested_objects_and_arrays) {
    JsonValue *root = parse(" {\"a\": [1, true, false, null, \"s\", {}], \"b\": {\"c\": []}} ");
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(root->type, JSON_OBJECT);
    ck_assert_uint_eq(root->count, 2);
    const JsonValue *a = json_get(root, "a");
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->type, JSON_ARRAY);
    ck_assert_uint_eq(a->count, 6);
    ck_assert_int_eq(a->items[0].type, JSON_NUMBER);
    ck_assert(a->items[1].type == JSON_BOOL && a->items[1].boolean);
    ck_assert(a->items[2].type == JSON_BOOL && !a->items[2].boolean);
    ck_assert_int_eq(a->items[3].type, JSON_NULL);
    ck_assert_str_eq(a->items[4].string, "s");
    ck_assert(a->items[5].type == JSON_OBJECT && a->items[5].count == 0);
    const JsonValue *c = json_get(json_get(root, "b"), "c");
    ck_assert(c && c->type == JSON_ARRAY && c->count == 0);
    json_free(root);
}
END_TEST

START_TEST(parse_keeps_object_members_in_their_written_order) {
    JsonValue *root = parse("{\"z\":1,\"a\":2,\"m\":3}");
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(root->items[0].key, "z");
    ck_assert_str_eq(root->items[1].key, "a");
    ck_assert_str_eq(root->items[2].key, "m");
    json_free(root);
}
END_TEST

START_TEST(get_returns_null_for_missing_keys_and_non_objects) {
    JsonValue *root = parse("{\"a\":[1]}");
    ck_assert_ptr_nonnull(root);
    ck_assert_ptr_null(json_get(root, "b"));
    ck_assert_ptr_null(json_get(root, "A"));
    ck_assert_ptr_null(json_get(json_get(root, "a"), "a"));  // an array has no keys
    ck_assert_ptr_null(json_get(NULL, "a"));
    json_free(root);
}
END_TEST

START_TEST(parse_accepts_whitespace_around_the_value_and_tokens) {
    JsonValue *root = parse("\t\r\n { \"a\" \n:\t[ 1 , 2 ] } \n\n   ");
    ck_assert_ptr_nonnull(root);
    ck_assert_uint_eq(json_get(root, "a")->count, 2);
    json_free(root);
}
END_TEST

START_TEST(parse_rejects_trailing_garbage) {
    const char *cases[] = {"{} x", "{}{}", "[1]]", "1 2", "null,", "\"a\"\"b\""};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) parse_error(cases[i]);
    ck_assert_ptr_nonnull(strstr(parse_error("{}  x"), "byte 4"));
}
END_TEST

START_TEST(parse_rejects_malformed_documents) {
    const char *cases[] = {
        "",           "   ",         "{",          "}",            "[1,]",        "[,1]",     "{\"a\"}",
        "{\"a\":}",   "{\"a\":1,}",  "{a:1}",      "{'a':1}",      "[1 2]",       "tru",      "nul",
        "True",       "\"abc",       "\"\\x\"",    "\"\\u12\"",    "\"\\u12G4\"", "+1",       "01",
        "-",          "1.",          ".5",         "1e",           "1e+",         "0x10",     "NaN",
        "Infinity",   "-Infinity",   "[1e999]",    "{\"a\":1 \"b\":2}", "/* c */ 1",  "\"\\\"",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) parse_error(cases[i]);
}
END_TEST

START_TEST(parse_reports_the_byte_offset_of_the_error) {
    ck_assert_ptr_nonnull(strstr(parse_error("{\"a\" 1}"), "at byte 5"));
    ck_assert_ptr_nonnull(strstr(parse_error("[1, 2, x]"), "at byte 7"));
}
END_TEST

START_TEST(parse_rejects_an_embedded_nul_byte_outside_strings) {
    const char text[] = "{}\0";
    JsonValue *root = NULL;
    Error err = {{0}};
    ck_assert(!json_parse(text, 3, &root, &err));  // length 3 includes the NUL
    ck_assert(json_parse(text, 2, &root, &err));   // the same bytes without it are fine
    json_free(root);
}
END_TEST

START_TEST(parse_accepts_nesting_up_to_64_deep_and_rejects_65) {
    char text[2 * 65 + 1];
    for (int depth = 64; depth <= 65; depth++) {
        memset(text, '[', (size_t)depth);
        memset(text + depth, ']', (size_t)depth);
        text[2 * depth] = '\0';
        JsonValue *root = parse(text);
        if (depth == 64) ck_assert_msg(root != NULL, "64 levels must be accepted");
        else ck_assert_ptr_nonnull(strstr(parse_error(text), "nested more than 64"));
        json_free(root);
    }
}
END_TEST

START_TEST(parse_survives_very_deep_nesting_without_recursing) {
    // A million '[' would overflow the stack if the depth limit did not stop
    // the recursion at 64.
    size_t n = 1000000;
    char *text = xmalloc(n + 1);
    memset(text, '[', n);
    text[n] = '\0';
    parse_error(text);
    free(text);
}
END_TEST

START_TEST(parse_rejects_duplicate_keys_anywhere) {
    ck_assert_ptr_nonnull(strstr(parse_error("{\"a\":1,\"b\":2,\"a\":3}"), "\"a\" twice"));
    parse_error("{\"x\":{\"k\":1,\"k\":1}}");
    parse_error("[{\"\\u0041\":1,\"A\":2}]");  // the same key, spelled two ways
    JsonValue *root = parse("{\"a\":1,\"A\":2,\"a \":3,\"b\":{\"a\":4}}");  // all different
    ck_assert_ptr_nonnull(root);
    json_free(root);
}
END_TEST

// ---- Strings --------------------------------------------------------------------

START_TEST(parse_decodes_every_escape) {
    JsonValue *root = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u0041\\u00e9\\u20AC \\uD83D\\uDE00\"");
    ck_assert_ptr_nonnull(root);
    ck_assert_int_eq(root->type, JSON_STRING);
    const char want[] = "q\" b\\ s/ \b\f\n\r\t A\xC3\xA9\xE2\x82\xAC \xF0\x9F\x98\x80";
    ck_assert_uint_eq(root->string_len, sizeof want - 1);
    ck_assert_mem_eq(root->string, want, sizeof want);  // including the terminating NUL
    json_free(root);
}
END_TEST

START_TEST(parse_keeps_u0000_as_a_nul_byte_counted_in_the_length) {
    JsonValue *root = parse("\"a\\u0000b\"");
    ck_assert_ptr_nonnull(root);
    ck_assert_uint_eq(root->string_len, 3);
    ck_assert_mem_eq(root->string, "a\0b", 4);
    json_free(root);
}
END_TEST

START_TEST(parse_copies_raw_utf8_and_rejects_invalid_utf8) {
    JsonValue *root = parse("\"\xC3\xA9\xF0\x9F\x98\x80\"");
    ck_assert_ptr_nonnull(root);
    ck_assert_str_eq(root->string, "\xC3\xA9\xF0\x9F\x98\x80");
    json_free(root);
    parse_error("\"\xFF\"");              // never valid
    parse_error("\"\xC3\"");              // cut short by the closing quote
    parse_error("\"\xC0\xAF\"");          // overlong '/'
    parse_error("\"\xED\xA0\x80\"");      // a surrogate written directly
    parse_error("{\"\x80\":1}");          // in a key too
}
END_TEST

START_TEST(parse_rejects_raw_control_characters_in_strings) {
    ck_assert_ptr_nonnull(strstr(parse_error("\"a\nb\""), "control character 0x0A"));
    parse_error("\"\t\"");
    parse_error("\"\x1F\"");
    JsonValue *root = parse("\"\x7F\"");  // DEL is not a JSON control character
    ck_assert_ptr_nonnull(root);
    json_free(root);
}
END_TEST

START_TEST(parse_rejects_lone_or_misordered_surrogates) {
    ck_assert_ptr_nonnull(strstr(parse_error("\"\\uD83D\""), "high surrogate"));
    parse_error("\"\\uD83Dx\"");
    parse_error("\"\\uD83D\\u0041\"");   // high followed by a non-surrogate
    parse_error("\"\\uD83D\\uD83D\"");   // high followed by another high
    ck_assert_ptr_nonnull(strstr(parse_error("\"\\uDE00\""), "low surrogate"));
    parse_error("\"\\uDE00\\uD83D\"");   // the pair in the wrong order
}
END_TEST

// ---- Numbers ------------------------------------------------------------------

START_TEST(parse_reads_numbers_in_every_json_spelling) {
    const struct {
        const char *text;
        double value;
    } cases[] = {
        {"0", 0.0},         {"-0", -0.0},      {"7", 7.0},         {"-12", -12.0},  {"1.5", 1.5},
        {"-0.25", -0.25},   {"1e3", 1000.0},   {"2E-2", 0.02},     {"1.5e+2", 150.0}, {"123456789", 123456789.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        JsonValue *root = parse(cases[i].text);
        ck_assert_msg(root && root->type == JSON_NUMBER && root->number == cases[i].value, "%s", cases[i].text);
        json_free(root);
    }
}
END_TEST

START_TEST(as_uint_accepts_plain_integers_up_to_2_to_the_53) {
    const struct {
        const char *text;
        uint64_t value;
    } cases[] = {
        {"0", 0}, {"1", 1}, {"4096", 4096}, {"9007199254740991", 9007199254740991ull},
        {"9007199254740992", 9007199254740992ull},  // 2^53 itself
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        JsonValue *root = parse(cases[i].text);
        uint64_t got = 0;
        ck_assert_msg(root && json_as_uint(root, &got) && got == cases[i].value, "%s", cases[i].text);
        json_free(root);
    }
}
END_TEST

START_TEST(as_uint_rejects_fractions_negatives_exponents_and_huge_values) {
    const char *cases[] = {
        "1.5", "1.0", "-1", "-0", "1e3", "10E0",
        "9007199254740993",      // 2^53 + 1: a double would round it to 2^53
        "18446744073709551616",  // 2^64
        "100000000000000000000000000000",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        JsonValue *root = parse(cases[i]);
        uint64_t got = 12345;
        ck_assert_msg(root != NULL, "%s is valid JSON", cases[i]);
        ck_assert_msg(!json_as_uint(root, &got), "%s must not be read as an exact integer", cases[i]);
        ck_assert_uint_eq(got, 12345);  // left untouched
        json_free(root);
    }
    JsonValue *root = parse("\"5\"");
    uint64_t got;
    ck_assert(!json_as_uint(root, &got));  // a string is not a number
    ck_assert(!json_as_uint(NULL, &got));
    json_free(root);
}
END_TEST

// ---- Writer -------------------------------------------------------------------

START_TEST(buf_string_escapes_quotes_backslashes_and_control_characters) {
    JsonBuf b = {0};
    const char in[] = "a\"b\\c\nd\te\r\b\f\x01\x1F\x7F/\xC3\xA9";
    json_buf_string(&b, in, sizeof in - 1);
    ck_assert_str_eq(b.data, "\"a\\\"b\\\\c\\nd\\te\\r\\b\\f\\u0001\\u001F\x7F/\xC3\xA9\"");
    ck_assert_uint_eq(b.len, strlen(b.data));
    json_buf_free(&b);
    ck_assert_ptr_null(b.data);
}
END_TEST

START_TEST(buf_string_then_parse_gives_back_every_byte) {
    // Every ASCII byte including NUL, then some multi-byte characters.
    char in[128 + 16];
    size_t n = 0;
    for (int c = 0; c < 128; c++) in[n++] = (char)c;
    const char multi[] = "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    memcpy(in + n, multi, sizeof multi - 1);
    n += sizeof multi - 1;

    JsonBuf b = {0};
    json_buf_string(&b, in, n);
    JsonValue *root = NULL;
    Error err = {{0}};
    ck_assert_msg(json_parse(b.data, b.len, &root, &err), "%s", err.msg);
    ck_assert_int_eq(root->type, JSON_STRING);
    ck_assert_uint_eq(root->string_len, n);
    ck_assert_mem_eq(root->string, in, n);
    json_free(root);
    json_buf_free(&b);
}
END_TEST

START_TEST(buf_printf_and_append_grow_the_buffer) {
    JsonBuf b = {0};
    for (int i = 0; i < 1000; i++) json_buf_printf(&b, "%d,", i % 10);
    json_buf_append(&b, "end", 3);
    ck_assert_uint_eq(b.len, 2003);
    ck_assert_uint_eq(strlen(b.data), 2003);
    ck_assert(strncmp(b.data, "0,1,2,", 6) == 0);
    ck_assert_str_eq(b.data + 2000, "end");
    json_buf_free(&b);
}
END_TEST

Suite *json_suite(void) {
    Suite *s = suite_create("json");
    TCase *structure = tcase_create("structure");
    tcase_add_test(structure, parse_reads_nested_objects_and_arrays);
    tcase_add_test(structure, parse_keeps_object_members_in_their_written_order);
    tcase_add_test(structure, get_returns_null_for_missing_keys_and_non_objects);
    tcase_add_test(structure, parse_accepts_whitespace_around_the_value_and_tokens);
    tcase_add_test(structure, parse_rejects_trailing_garbage);
    tcase_add_test(structure, parse_rejects_malformed_documents);
    tcase_add_test(structure, parse_reports_the_byte_offset_of_the_error);
    tcase_add_test(structure, parse_rejects_an_embedded_nul_byte_outside_strings);
    tcase_add_test(structure, parse_accepts_nesting_up_to_64_deep_and_rejects_65);
    tcase_add_test(structure, parse_survives_very_deep_nesting_without_recursing);
    tcase_add_test(structure, parse_rejects_duplicate_keys_anywhere);
    suite_add_tcase(s, structure);

    TCase *strings = tcase_create("strings");
    tcase_add_test(strings, parse_decodes_every_escape);
    tcase_add_test(strings, parse_keeps_u0000_as_a_nul_byte_counted_in_the_length);
    tcase_add_test(strings, parse_copies_raw_utf8_and_rejects_invalid_utf8);
    tcase_add_test(strings, parse_rejects_raw_control_characters_in_strings);
    tcase_add_test(strings, parse_rejects_lone_or_misordered_surrogates);
    suite_add_tcase(s, strings);

    TCase *numbers = tcase_create("numbers");
    tcase_add_test(numbers, parse_reads_numbers_in_every_json_spelling);
    tcase_add_test(numbers, as_uint_accepts_plain_integers_up_to_2_to_the_53);
    tcase_add_test(numbers, as_uint_rejects_fractions_negatives_exponents_and_huge_values);
    suite_add_tcase(s, numbers);

    TCase *writer = tcase_create("writer");
    tcase_add_test(writer, buf_string_escapes_quotes_backslashes_and_control_characters);
    tcase_add_test(writer, buf_string_then_parse_gives_back_every_byte);
    tcase_add_test(writer, buf_printf_and_append_grow_the_buffer);
    suite_add_tcase(s, writer);
    return s;
}
