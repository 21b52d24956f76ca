// chunk.c: GPT-2's chunking rule, on bytes (tinygpt's bpe) or on Unicode
// code points (GPT-2's tokenizer) (see chunk.h).
//
// Reading order: file 22, with chunk.h; bpe.c calls it.
//
// Why utf8proc: GPT-2's rule needs each code point's general category (is it
// a letter? a number?), which is a table of the whole of Unicode. utf8proc
// (Debian's libutf8proc-dev, the library Julia and PostgreSQL use) answers
// exactly that question, one call per code point, and nothing more; ICU
// would bring a regex engine and 30 MB of data we do not need, and
// libunistring has the categories but a heavier interface. Its Unicode
// version is the Debian package's (utf8proc_unicode_version()).
//
// The regex's alternatives become three steps, in its order: a contraction;
// an optional ' ' and a run of one class; a run of spaces. The run of spaces
// is the subtle one: "\s+(?!\S)" wants spaces NOT followed by a non-space,
// so before a word it gives back its last space, and a lone space before a
// word, which can give nothing back, is taken by "\s+" alone.
#include "chunk.h"

#include <assert.h>
#include <stdint.h>

#include <utf8proc.h>

#include "utf8.h"

typedef enum { LETTER, DIGIT, SPACE, OTHER } CharClass;

// byte_class: tinygpt's rules, a byte at a time.
static CharClass byte_class(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return LETTER;
    if (c >= '0' && c <= '9') return DIGIT;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') return SPACE;
    return OTHER;
}

// code_point_class: GPT-2's rules: \p{L}, \p{N} and \s (Unicode's
// White_Space: the separators Zs Zl Zp, plus five ASCII controls and NEL,
// U+0085, which are category Cc).
static CharClass code_point_class(uint32_t cp) {
    utf8proc_category_t category = utf8proc_category((utf8proc_int32_t)cp);
    if (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO) return LETTER;
    if (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO) return DIGIT;
    if (category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP)
        return SPACE;
    if ((cp >= '\t' && cp <= '\r') || cp == 0x85) return SPACE;
    return OTHER;
}

// char_at: the character at "s" ("len" >= 1 bytes): its class into
// "*class", its length in bytes returned.
static inline size_t char_at(const unsigned char *s, size_t len, ChunkRules rules, CharClass *class) {
    if (rules == CHUNK_RULES_BYTES || s[0] < 0x80) {
        *class = byte_class(s[0]);  // ASCII is the same under both rules
        return 1;
    }
    uint32_t cp;
    int n = utf8_decode(s, len, &cp);
    if (n == 0) {
        *class = OTHER;  // not UTF-8: one byte, neither letter, number nor space
        return 1;
    }
    *class = code_point_class(cp);
    return (size_t)n;
}

// run_len: how many bytes from "s" ("len" of them) are characters of class
// "class"; "*last" gets the byte length of the last of them.
static size_t run_len(const unsigned char *s, size_t len, ChunkRules rules, CharClass class, size_t *last) {
    size_t n = 0;
    *last = 0;
    while (n < len) {
        CharClass c;
        size_t k = char_at(s + n, len - n, rules, &c);
        if (c != class) break;
        n += k;
        *last = k;
    }
    return n;
}

// contraction_len: 2 or 3 if "s" starts with 's 't 'm 'd or 're 've 'll
// (lowercase only, as GPT-2), else 0. A contraction ends its chunk even
// inside a word: "'sa" is "'s" then "a", as the regex has it.
static size_t contraction_len(const unsigned char *s, size_t len) {
    if (len < 2 || s[0] != '\'') return 0;
    if (s[1] == 's' || s[1] == 't' || s[1] == 'm' || s[1] == 'd') return 2;
    if (len < 3) return 0;
    if ((s[1] == 'r' && s[2] == 'e') || (s[1] == 'v' && s[2] == 'e') || (s[1] == 'l' && s[2] == 'l')) return 3;
    return 0;
}

// chunk_len: the alternatives of the regex, in its order.
size_t chunk_len(const char *text, size_t len, ChunkRules rules) {
    assert(len >= 1);
    const unsigned char *s = (const unsigned char *)text;
    size_t contraction = contraction_len(s, len);
    if (contraction > 0) return contraction;

    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": a ' ' joins the run after it.
    CharClass first, class;
    size_t first_len = char_at(s, len, rules, &first), last;
    size_t start = 0;
    class = first;
    if (s[0] == ' ' && len >= 2) {
        CharClass next;
        char_at(s + 1, len - 1, rules, &next);
        if (next != SPACE) start = 1, class = next;
    }
    if (class != SPACE) return start + run_len(s + start, len - start, rules, class, &last);

    // "\s+(?!\S)" then "\s+". A run that reaches the end of the text is not
    // followed by a non-space: all of it. Otherwise the run minus its last
    // space; a run of one (a '\n' before a word) can give nothing back, so
    // "\s+" takes it alone.
    size_t spaces = run_len(s, len, rules, SPACE, &last);
    if (spaces == len || spaces == first_len) return spaces;
    return spaces - last;
}
