// json.h: a small JSON reader and a string-escaping writer, just big enough
// for a safetensors header.
//
// Reading order: file 25, before safetensors.h, its main user, and read just
// before it (run_info.c writes run.json with it too). Its strings are read and
// written with utf8_decode and utf8_encode from utf8.h (file 15).
//
// Reader: json_parse turns the text into a tree of JsonValue nodes. It is
// strict (RFC 8259): no comments, no trailing commas, no single quotes, no
// leading zeros, no raw control characters or invalid UTF-8 in strings.
// Beyond the RFC it also rejects, because a safetensors header never needs
// them and a damaged file often has them:
// - anything but whitespace after the value ("trailing garbage"),
// - arrays and objects nested more than JSON_MAX_DEPTH deep,
// - an object that names the same key twice (which value would win?),
// - numbers outside the range of a double (1e999).
//
// Writer: a growable byte buffer (JsonBuf) plus json_buf_string, which
// writes a string with the escapes JSON requires, so a vocabulary holding
// quotes, backslashes or newlines survives the round trip.
//
// What it leaves out: writing whole trees (the checkpoint writes its header
// with json_buf_printf), editing trees, and streaming input.
//
// Sharp edges:
// - Strings may contain NUL bytes (from "\u0000"): always use string_len,
//   and json_get cannot look up a key that contains one.
// - json_as_uint accepts only numbers spelled as plain digits: "12" yes,
//   "12.0", "1.2e1" and "-0" no. That is how safetensors writes sizes and
//   offsets, and it keeps "exactly this integer" free of rounding questions.
// - The parser recurses once per nesting level, so JSON_MAX_DEPTH bounds
//   its stack use.
#ifndef TINYGPT_JSON_H
#define TINYGPT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

// The deepest nesting of arrays and objects json_parse accepts.
#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

// One node of the tree. Which fields mean something depends on "type".
typedef struct JsonValue JsonValue;
struct JsonValue {
    JsonType type;
    bool boolean;          // JSON_BOOL: true or false
    double number;         // JSON_NUMBER: the value, as strtod reads it
    bool is_uint;          // JSON_NUMBER: spelled as plain digits, value <= 2^53
    uint64_t uint_value;   // JSON_NUMBER with is_uint: the exact value
    char *string;          // JSON_STRING: the decoded UTF-8, NUL-terminated
    size_t string_len;     // JSON_STRING: bytes in "string", without the terminator
    JsonValue *items;      // JSON_ARRAY: the elements; JSON_OBJECT: the members' values [count]
    size_t count;          // JSON_ARRAY, JSON_OBJECT: number of items
    char *key;             // a member of an object: its name, NUL-terminated; else NULL
    size_t key_len;        // a member of an object: bytes in "key"
};

// json_parse: parse "len" bytes of "text" (need not be NUL-terminated) into a
// new tree "*out"; the caller frees it with json_free. On failure returns
// false, sets "*out" to NULL and fills "err" with one line giving the byte
// offset and what was wrong ("invalid JSON at byte 12: expected ':' ...").
bool json_parse(const char *text, size_t len, JsonValue **out, Error *err);

// json_free: release a tree returned by json_parse; NULL is fine.
void json_free(JsonValue *root);

// json_get: the value of member "key" of "object", or NULL if "object" is
// not an object (or is NULL) or has no such member.
const JsonValue *json_get(const JsonValue *object, const char *key);

// json_as_uint: true, with the value in "*out", when "v" is a number
// spelled as plain decimal digits no larger than 2^53 (see the notes above).
bool json_as_uint(const JsonValue *v, uint64_t *out);

// json_string_is: whether "v" is a string exactly "text" (a JSON string
// may hold NULs, which strcmp would stop at).
bool json_string_is(const JsonValue *v, const char *text);

// json_type_name: "null", "a boolean", "a number", ... for error messages.
const char *json_type_name(JsonType type);

// ---- Writer -------------------------------------------------------------------

// A growable byte buffer; start it as `JsonBuf b = {0};`. "data" is kept
// NUL-terminated (once anything has been written) for printing and tests.
typedef struct {
    char *data;  // [cap] the bytes written so far, then a NUL
    size_t len;  // bytes written, without the NUL
    size_t cap;  // bytes allocated
} JsonBuf;

// json_buf_append: append "n" raw bytes.
void json_buf_append(JsonBuf *b, const char *bytes, size_t n);
// json_buf_printf: append printf-formatted text.
void json_buf_printf(JsonBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// json_buf_string: append "utf8" (valid UTF-8, "len" bytes, may hold NULs)
// as a quoted JSON string: '"' and '\' get a backslash, control characters
// become \n, \t, \r, \b, \f or \u00XX; all other bytes are copied as they are.
void json_buf_string(JsonBuf *b, const char *utf8, size_t len);
// json_buf_free: release the buffer and reset it to empty.
void json_buf_free(JsonBuf *b);

#endif
