// json.c: a strict recursive-descent JSON parser (see json.h); the writer is
// json_write.c's.
//
// The parser has one function per grammar rule, with the rule (from RFC 8259)
// written above it. Each function starts at the first byte of its rule, moves
// "pos" past the last one, and on failure records the byte offset and stops:
// there is no error recovery, since a damaged header is rejected anyway.
//
// Memory: every node lives inside its parent's "items" array, and the root in
// one allocation of its own. A child slot is zeroed and counted *before* it is
// parsed, so when parsing fails half-way json_free still finds (and frees)
// everything allocated so far.
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"  // utf8_decode, utf8_encode

// The largest integer json_as_uint returns: every integer up to 2^53 is
// exactly representable as a double, so such a value means the same thing to
// every JSON reader.
#define JSON_MAX_UINT (UINT64_C(1) << 53)

typedef struct {
    const char *text;  // [len] the input, not necessarily NUL-terminated
    size_t len;
    size_t pos;        // the next byte to read
    Error *err;
} Parser;

// fail_at: record "invalid JSON at byte <pos>: <message>"; returns false.
__attribute__((format(printf, 3, 4)))
static bool fail_at(Parser *p, size_t pos, const char *fmt, ...) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "invalid JSON at byte %zu: ", pos);
    va_list args;
    va_start(args, fmt);
    error_setv(p->err, prefix, fmt, args);
    va_end(args);
    return false;
}

// describe_byte: the byte at "pos" written for a message: 'x', end of input,
// or its hex value when it would not print.
static const char *describe_byte(const Parser *p, size_t pos, char buf[16]) {
    if (pos >= p->len) return "the end of the input";
    unsigned char c = (unsigned char)p->text[pos];
    if (c >= 0x20 && c < 0x7F) snprintf(buf, 16, "'%c'", c);
    else snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

// ws = *( " " / "\t" / "\n" / "\r" )
static void skip_whitespace(Parser *p) {
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

// expect: consume the character "c" (after whitespace) or fail, saying what
// was found instead and what "context" it was needed for.
static bool expect(Parser *p, char c, const char *context) {
    skip_whitespace(p);
    if (p->pos < p->len && p->text[p->pos] == c) {
        p->pos++;
        return true;
    }
    char buf[16];
    return fail_at(p, p->pos, "expected '%c' %s, found %s", c, context, describe_byte(p, p->pos, buf));
}

// ---- Strings ----------------------------------------------------------------

// hex4: the value of the 4 hex digits at "s", or -1 if any is not a hex digit.
static long hex4(const char *s) {
    long value = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
        if (digit < 0) return -1;
        value = value * 16 + digit;
    }
    return value;
}

// unicode_escape: decode "\uXXXX" at p->pos (and its partner "\uXXXX" when the
// first is a high surrogate) into the code point "*cp".
//
// JSON spells characters beyond U+FFFF as a UTF-16 surrogate pair:
//   high in D800..DBFF, then low in DC00..DFFF,
//   cp = 0x10000 + (high - 0xD800) * 0x400 + (low - 0xDC00).
// A surrogate on its own is not a character and cannot be written as UTF-8,
// so a lone high or low surrogate is an error.
static bool unicode_escape(Parser *p, size_t end, uint32_t *cp) {
    size_t start = p->pos;
    long high = start + 6 <= end ? hex4(p->text + start + 2) : -1;
    if (high < 0) return fail_at(p, start, "\\u must be followed by 4 hex digits");
    p->pos += 6;
    if (high >= 0xDC00 && high <= 0xDFFF)
        return fail_at(p, start, "lone low surrogate \\u%04lX (it must follow a high surrogate \\uD800..\\uDBFF)",
                       high);
    if (high < 0xD800 || high > 0xDBFF) {
        *cp = (uint32_t)high;
        return true;
    }
    long low = p->pos + 6 <= end && p->text[p->pos] == '\\' && p->text[p->pos + 1] == 'u'
                   ? hex4(p->text + p->pos + 2)
                   : -1;
    if (low < 0xDC00 || low > 0xDFFF)
        return fail_at(p, start, "high surrogate \\u%04lX is not followed by a low surrogate \\uDC00..\\uDFFF",
                       high);
    p->pos += 6;
    *cp = 0x10000 + (uint32_t)(high - 0xD800) * 0x400 + (uint32_t)(low - 0xDC00);
    return true;
}

// string = quotation-mark *char quotation-mark
// char   = unescaped / "\" ( '"' / "\" / "/" / "b" / "f" / "n" / "r" / "t" / "u" 4HEXDIG )
//
// Two passes: the first finds the closing quote (skipping the character after
// each backslash), the second decodes. Every escape is at least as long as the
// UTF-8 it stands for ("\u00e9" is 6 bytes for 2), so the decoded string fits
// in as many bytes as the escaped one and one allocation suffices.
static bool parse_string(Parser *p, char **out, size_t *out_len) {
    size_t start = p->pos;
    if (p->pos >= p->len || p->text[p->pos] != '"') {
        char buf[16];
        return fail_at(p, p->pos, "expected a string, found %s", describe_byte(p, p->pos, buf));
    }
    size_t end = start + 1;  // becomes the index of the closing quote
    while (end < p->len && p->text[end] != '"') end += p->text[end] == '\\' ? 2 : 1;
    if (end >= p->len) return fail_at(p, start, "the string starting here has no closing quote");

    char *s = xmalloc(end - start);
    size_t n = 0;
    p->pos = start + 1;
    while (p->pos < end) {
        unsigned char c = (unsigned char)p->text[p->pos];
        if (c == '\\') {
            // The one-letter escapes, and the byte each stands for.
            static const char letters[] = "\"\\/bfnrt";
            static const char decoded[] = "\"\\/\b\f\n\r\t";
            char escape = p->text[p->pos + 1];
            const char *simple = escape != '\0' ? strchr(letters, escape) : NULL;
            if (simple) {
                s[n++] = decoded[simple - letters];
                p->pos += 2;
            } else if (escape == 'u') {
                uint32_t cp = 0;
                if (!unicode_escape(p, end, &cp)) {
                    free(s);
                    return false;
                }
                n += (size_t)utf8_encode(cp, s + n);
            } else {
                free(s);
                char buf[16];
                return fail_at(p, p->pos, "unknown escape '\\' followed by %s", describe_byte(p, p->pos + 1, buf));
            }
        } else if (c < 0x20) {
            free(s);
            return fail_at(p, p->pos, "raw control character 0x%02X in a string (it must be escaped, e.g. \\n or \\u%04X)",
                           c, c);
        } else {
            // One character, copied as it is once we know it is valid UTF-8.
            uint32_t cp;
            int k = utf8_decode((const unsigned char *)p->text + p->pos, end - p->pos, &cp);
            if (k == 0) {
                free(s);
                return fail_at(p, p->pos, "invalid UTF-8 (byte 0x%02X) in a string", c);
            }
            memcpy(s + n, p->text + p->pos, (size_t)k);
            n += (size_t)k;
            p->pos += (size_t)k;
        }
    }
    p->pos = end + 1;
    s[n] = '\0';
    *out = s;
    *out_len = n;
    return true;
}

// ---- Numbers ----------------------------------------------------------------

// skip_digits: move past a run of decimal digits; returns how many there were.
static size_t skip_digits(Parser *p) {
    size_t start = p->pos;
    while (p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9') p->pos++;
    return p->pos - start;
}

// number = [ "-" ] int [ frac ] [ exp ]
// int    = "0" / ( digit1-9 *DIGIT )
// frac   = "." 1*DIGIT
// exp    = ( "e" / "E" ) [ "-" / "+" ] 1*DIGIT
//
// The grammar is checked here, by hand, because strtod is more lenient
// ("0x1p3", "inf", ".5", leading spaces). Once the spelling is known to be
// valid JSON, strtod computes the value. (strtod follows the C locale's
// decimal point; tinygpt never calls setlocale, so that is '.'.)
static bool parse_number(Parser *p, JsonValue *v) {
    size_t start = p->pos;
    bool plain = true;  // no sign, fraction or exponent: a candidate for is_uint
    if (p->text[p->pos] == '-') {
        p->pos++;
        plain = false;
    }
    size_t int_start = p->pos;
    size_t int_digits = skip_digits(p);
    if (int_digits == 0) return fail_at(p, start, "a number needs a digit after its sign");
    if (int_digits > 1 && p->text[int_start] == '0') return fail_at(p, start, "numbers may not have leading zeros");
    if (p->pos < p->len && p->text[p->pos] == '.') {
        p->pos++;
        plain = false;
        if (skip_digits(p) == 0) return fail_at(p, start, "a number needs a digit after its decimal point");
    }
    if (p->pos < p->len && (p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
        p->pos++;
        plain = false;
        if (p->pos < p->len && (p->text[p->pos] == '+' || p->text[p->pos] == '-')) p->pos++;
        if (skip_digits(p) == 0) return fail_at(p, start, "a number needs a digit in its exponent");
    }

    // strtod needs a NUL-terminated copy: the input need not have a NUL.
    size_t n = p->pos - start;
    char *copy = xmalloc(n + 1);
    memcpy(copy, p->text + start, n);
    copy[n] = '\0';
    v->type = JSON_NUMBER;
    v->number = strtod(copy, NULL);
    free(copy);
    if (!isfinite(v->number)) return fail_at(p, start, "the number is too large for a double");

    // Plain digits: also compute the exact integer, stopping past 2^53.
    if (plain) {
        uint64_t value = 0;
        for (size_t i = int_start; i < p->pos && value <= JSON_MAX_UINT; i++)
            value = value * 10 + (uint64_t)(p->text[i] - '0');
        v->is_uint = value <= JSON_MAX_UINT;
        v->uint_value = v->is_uint ? value : 0;
    }
    return true;
}

// ---- Arrays, objects, values ------------------------------------------------

static bool parse_value(Parser *p, JsonValue *v, int depth);

// add_item: a new zeroed slot at the end of "v->items", already counted (see
// the note on memory at the top of this file). "*cap" is the allocated length.
static JsonValue *add_item(JsonValue *v, size_t *cap) {
    if (v->count == *cap) {
        *cap = *cap ? 2 * *cap : 4;
        v->items = xrealloc(v->items, *cap * sizeof *v->items);
    }
    JsonValue *item = &v->items[v->count++];
    memset(item, 0, sizeof *item);
    return item;
}

// array = "[" ws [ value *( ws "," ws value ) ] ws "]"
static bool parse_array(Parser *p, JsonValue *v, int depth) {
    v->type = JSON_ARRAY;
    size_t cap = 0;
    p->pos++;  // past "["
    skip_whitespace(p);
    if (p->pos < p->len && p->text[p->pos] == ']') {
        p->pos++;
        return true;
    }
    for (;;) {
        skip_whitespace(p);
        if (!parse_value(p, add_item(v, &cap), depth + 1)) return false;
        skip_whitespace(p);
        if (p->pos < p->len && p->text[p->pos] == ']') {
            p->pos++;
            return true;
        }
        if (!expect(p, ',', "or ']' after an array element")) return false;
    }
}

// compare_keys: qsort order on members by key bytes (keys may hold NULs,
// so memcmp over the shorter length, then the shorter key first).
static int compare_keys(const void *a, const void *b) {
    const JsonValue *x = *(const JsonValue *const *)a, *y = *(const JsonValue *const *)b;
    int c = memcmp(x->key, y->key, x->key_len < y->key_len ? x->key_len : y->key_len);
    if (c != 0) return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

// check_unique_keys: fail if two members of "v" share a key. Sorting pointers
// to the members makes equal keys neighbours, in O(n log n), so even a huge
// hostile object cannot make this quadratic. The object itself keeps its order.
static bool check_unique_keys(Parser *p, const JsonValue *v, size_t start) {
    if (v->count < 2) return true;
    const JsonValue **sorted = xmalloc(v->count * sizeof *sorted);
    for (size_t i = 0; i < v->count; i++) sorted[i] = &v->items[i];
    qsort(sorted, v->count, sizeof *sorted, compare_keys);
    const JsonValue *dup = NULL;
    for (size_t i = 1; i < v->count && !dup; i++)
        if (compare_keys(&sorted[i - 1], &sorted[i]) == 0) dup = sorted[i];
    free(sorted);
    if (!dup) return true;
    return fail_at(p, start, "the object starting here has the key \"%s\" twice", show(dup->key, dup->key_len).text);
}

// object = "{" ws [ member *( ws "," ws member ) ] ws "}"
// member = string ws ":" ws value
static bool parse_object(Parser *p, JsonValue *v, int depth) {
    size_t start = p->pos;
    v->type = JSON_OBJECT;
    size_t cap = 0;
    p->pos++;  // past "{"
    skip_whitespace(p);
    if (p->pos < p->len && p->text[p->pos] == '}') {
        p->pos++;
        return true;
    }
    for (;;) {
        skip_whitespace(p);
        JsonValue *member = add_item(v, &cap);
        if (!parse_string(p, &member->key, &member->key_len)) return false;
        if (!expect(p, ':', "after an object key")) return false;
        skip_whitespace(p);
        if (!parse_value(p, member, depth + 1)) return false;
        skip_whitespace(p);
        if (p->pos < p->len && p->text[p->pos] == '}') {
            p->pos++;
            return check_unique_keys(p, v, start);
        }
        if (!expect(p, ',', "or '}' after an object member")) return false;
    }
}

// literal: match the word "word" (true, false or null) at p->pos.
static bool literal(Parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0) return false;
    p->pos += n;
    return true;
}

// value = object / array / string / number / "true" / "false" / "null"
//
// "v" is an already-zeroed slot; its "key" (if it is an object member) has
// been filled in by the caller and is left alone. "depth" counts the arrays
// and objects around this value.
static bool parse_value(Parser *p, JsonValue *v, int depth) {
    char buf[16];
    if (p->pos >= p->len) return fail_at(p, p->pos, "expected a value, found the end of the input");
    char c = p->text[p->pos];
    if ((c == '[' || c == '{') && depth >= JSON_MAX_DEPTH)
        return fail_at(p, p->pos, "arrays and objects are nested more than %d deep", JSON_MAX_DEPTH);
    if (c == '{') return parse_object(p, v, depth);
    if (c == '[') return parse_array(p, v, depth);
    if (c == '"') {
        v->type = JSON_STRING;
        return parse_string(p, &v->string, &v->string_len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    if (literal(p, "true")) {
        v->type = JSON_BOOL;
        v->boolean = true;
        return true;
    }
    if (literal(p, "false")) {
        v->type = JSON_BOOL;
        return true;
    }
    if (literal(p, "null")) {
        v->type = JSON_NULL;
        return true;
    }
    return fail_at(p, p->pos, "expected a value, found %s", describe_byte(p, p->pos, buf));
}

// free_contents: release what "v" points to (not "v" itself, which lives in
// its parent's items array). Recursion depth is bounded by JSON_MAX_DEPTH.
static void free_contents(JsonValue *v) {
    for (size_t i = 0; i < v->count; i++) free_contents(&v->items[i]);
    free(v->items);
    free(v->string);
    free(v->key);
}

// json_parse: JSON-text = ws value ws, and nothing after it.
bool json_parse(const char *text, size_t len, JsonValue **out, Error *err) {
    Parser p = {.text = text, .len = len, .pos = 0, .err = err};
    JsonValue *root = xcalloc(1, sizeof *root);
    skip_whitespace(&p);
    bool ok = parse_value(&p, root, 0);
    if (ok) {
        skip_whitespace(&p);
        char buf[16];
        if (p.pos != len)
            ok = fail_at(&p, p.pos, "unexpected %s after the end of the JSON value", describe_byte(&p, p.pos, buf));
    }
    if (!ok) {
        json_free(root);
        root = NULL;
    }
    *out = root;
    return ok;
}

// json_free: the children first (free_contents), then the root's own allocation.
void json_free(JsonValue *root) {
    if (!root) return;
    free_contents(root);
    free(root);
}

// json_get: a linear search; safetensors headers have about ten keys.
const JsonValue *json_get(const JsonValue *object, const char *key) {
    if (!object || object->type != JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < object->count; i++) {
        const JsonValue *member = &object->items[i];
        if (member->key_len == n && memcmp(member->key, key, n) == 0) return member;
    }
    return NULL;
}

// json_as_uint: parse_number already worked out whether the spelling is an
// exact integer; this only reports it.
bool json_as_uint(const JsonValue *v, uint64_t *out) {
    if (!v || v->type != JSON_NUMBER || !v->is_uint) return false;
    *out = v->uint_value;
    return true;
}

// json_type_name: with the article, to read well in "... is a string, not ...".
bool json_string_is(const JsonValue *v, const char *text) {
    return v->type == JSON_STRING && v->string_len == strlen(text) && memcmp(v->string, text, v->string_len) == 0;
}

const char *json_type_name(JsonType type) {
    switch (type) {
    case JSON_NULL: return "null";
    case JSON_BOOL: return "a boolean";
    case JSON_NUMBER: return "a number";
    case JSON_STRING: return "a string";
    case JSON_ARRAY: return "an array";
    case JSON_OBJECT: return "an object";
    }
    return "an unknown type";
}
