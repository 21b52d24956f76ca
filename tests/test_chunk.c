// test_chunk.c: tests for src/io/chunk.c, the one chunker, under GPT-2's
// rules (code points and their Unicode categories).
//
// tinygpt's byte rules are pinned by test_bpe.c (through bpe_chunk_len) and
// `make bpe-check`. Here every expected chunking is worked out by hand from
// GPT-2's regex,
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// and the characters' categories in the Unicode standard, never copied from
// chunk.c's output; `make gpt2-tokenizer-check` then holds the whole
// tokenizer to GPT-2's reference encoder on thousands of texts.
#include <string.h>

#include "chunk.h"
#include "rng.h"
#include "helpers.h"
#include "tests.h"

typedef struct {
    const char *text;
    const char *chunks;  // joined by '|'
} ChunkCase;

static void assert_cases(const ChunkCase *cases, size_t n, ChunkRules rules) {
    for (size_t i = 0; i < n; i++) {
        char got[256];
        ck_assert_uint_lt(2 * strlen(cases[i].text) + 1, sizeof got);
        chunks_joined(cases[i].text, strlen(cases[i].text), rules, got);
        ck_assert_msg(strcmp(got, cases[i].chunks) == 0, "case %zu \"%s\": got \"%s\", want \"%s\"", i,
                      cases[i].text, got, cases[i].chunks);
    }
}

START_TEST(gpt2_rules_keep_words_numbers_and_contractions_as_the_regex_does) {
    const ChunkCase cases[] = {
        {"Hello world", "Hello| world"},
        {"I'm here, they'll go", "I|'m| here|,| they|'ll| go"},
        {"don't DON'T 'sup ''s", "don|'t| DON|'|T| '|sup| ''|s"},  // lowercase only; a space before ' makes it other
        {"x 123 45x 3.14", "x| 123| 45|x| 3|.|14"},
        {"wait... what?!", "wait|...| what|?!"},
    };
    assert_cases(cases, sizeof cases / sizeof cases[0], CHUNK_RULES_GPT2);
}
END_TEST

START_TEST(gpt2_rules_class_characters_by_their_unicode_category) {
    const ChunkCase cases[] = {
        {"na\xC3\xAFve caf\xC3\xA9", "na\xC3\xAFve| caf\xC3\xA9"},                  // ï é: Ll
        {"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E text", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E| text"},  // 日本語: Lo
        {"a\xE2\x80\x94" "b", "a|\xE2\x80\x94|b"},                                 // em dash: Pd, not a letter
        {"x\xC2\xB2", "x|\xC2\xB2"},                                                // superscript two: No, a number
        {"\xD9\xA3\xD9\xA4 \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85", "\xD9\xA3\xD9\xA4| \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85"},  // ٣٤ (Nd) سلام (Lo)
        {"\xE2\x85\xAB\xC2\xBD", "\xE2\x85\xAB\xC2\xBD"},                           // Roman twelve (Nl), one half (No)
        {"cafe\xCC\x81s", "cafe|\xCC\x81|s"},                                       // a combining acute (Mn) is not a letter
        {"hi \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD!", "hi| \xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD!"},  // emoji (So), skin tone (Sk), '!'
        {"12\xE2\x82\xAC", "12|\xE2\x82\xAC"},                                      // the euro sign: Sc
    };
    assert_cases(cases, sizeof cases / sizeof cases[0], CHUNK_RULES_GPT2);
}
END_TEST

START_TEST(gpt2_rules_cut_white_space_runs_as_the_lookahead_does) {
    const ChunkCase cases[] = {
        {"a  b", "a| | b"},                        // the run gives its last ' ' to the word
        {"a\n\nb", "a|\n|\n|b"},                   // ... or its last '\n', alone
        {"a\t b", "a|\t| b"},
        {"a \tb", "a| |\t|b"},
        {"a  ", "a|  "},                           // at the end: all of it
        {"a\xE3\x80\x80" "b", "a|\xE3\x80\x80|b"},  // the ideographic space U+3000 is Zs
        {"a \xC2\xA0" "b", "a| |\xC2\xA0|b"},       // no-break space: white space, but ` ?` is ' ' only
        {"a\xE2\x80\xA8\xE2\x80\xA8" "b", "a|\xE2\x80\xA8|\xE2\x80\xA8|b"},  // line separator (Zl)
        {"x\xC2\x85!", "x|\xC2\x85|!"},             // NEL (U+0085) is White_Space, as in Python's regex
        {"x\xEF\xBB\xBF!", "x|\xEF\xBB\xBF!"},      // the BOM (U+FEFF, Cf) is not, unlike JavaScript's \s
        {"x\xE2\x80\x8B!", "x|\xE2\x80\x8B!"},      // nor is the zero width space (Cf)
    };
    assert_cases(cases, sizeof cases / sizeof cases[0], CHUNK_RULES_GPT2);
}
END_TEST

START_TEST(gpt2_rules_take_a_byte_that_is_not_utf8_as_one_other_character) {
    const ChunkCase cases[] = {
        {"a\xFF" "b", "a|\xFF|b"},
        {"a \xC3", "a| \xC3"},  // a character cut short by the end
    };
    assert_cases(cases, sizeof cases / sizeof cases[0], CHUNK_RULES_GPT2);
}
END_TEST

START_TEST(byte_rules_count_every_non_ascii_byte_as_a_letter) {
    // The same texts as above, under tinygpt's rules: what its checkpoints
    // were learned with, and must keep.
    const ChunkCase cases[] = {
        {"a\xE2\x80\x94" "b", "a\xE2\x80\x94" "b"},
        {"cafe\xCC\x81s", "cafe\xCC\x81s"},
        {"a\xE3\x80\x80" "b", "a\xE3\x80\x80" "b"},
        {"x\xC2\xB2", "x\xC2\xB2"},
    };
    assert_cases(cases, sizeof cases / sizeof cases[0], CHUNK_RULES_BYTES);
}
END_TEST

START_TEST(both_rules_agree_on_ascii_text) {
    // On ASCII the two rules give every character the same class, so any
    // difference would be a bug in the code they share or split.
    static const char ALPHABET[] = "ab Z09'sltmdrev.,!-\t\n\r\v\f  ";
    Rng rng;
    rng_init(&rng, 21);
    for (int trial = 0; trial < 2000; trial++) {
        char text[40], bytes[81], gpt2[81];
        size_t len = 1 + rng_below(&rng, sizeof text - 1);
        for (size_t i = 0; i < len; i++) text[i] = ALPHABET[rng_below(&rng, sizeof ALPHABET - 1)];
        text[len < sizeof text ? len : sizeof text - 1] = '\0';
        chunks_joined(text, strlen(text), CHUNK_RULES_BYTES, bytes);
        chunks_joined(text, strlen(text), CHUNK_RULES_GPT2, gpt2);
        ck_assert_msg(strcmp(bytes, gpt2) == 0, "\"%s\": bytes \"%s\", gpt2 \"%s\"", text, bytes, gpt2);
    }
}
END_TEST

Suite *chunk_suite(void) {
    Suite *s = suite_create("chunk");
    TCase *gpt2 = tcase_create("gpt2");
    tcase_add_test(gpt2, gpt2_rules_keep_words_numbers_and_contractions_as_the_regex_does);
    tcase_add_test(gpt2, gpt2_rules_class_characters_by_their_unicode_category);
    tcase_add_test(gpt2, gpt2_rules_cut_white_space_runs_as_the_lookahead_does);
    tcase_add_test(gpt2, gpt2_rules_take_a_byte_that_is_not_utf8_as_one_other_character);
    suite_add_tcase(s, gpt2);
    TCase *bytes = tcase_create("bytes");
    tcase_add_test(bytes, byte_rules_count_every_non_ascii_byte_as_a_letter);
    tcase_add_test(bytes, both_rules_agree_on_ascii_text);
    suite_add_tcase(s, bytes);
    return s;
}
