// utf8.c: UTF-8 decoding, encoding, counting, and the stream that prints
// pieces as whole characters (see utf8.h).
//
// Reading order: file 15, with utf8.h. Nothing here knows of files, tokens
// or errors: a caller that must say where a text goes wrong (char_vocab.c's
// next_char, json's strings) decodes with utf8_decode and reports it itself.
#include "utf8.h"

#include <assert.h>
#include <stdbool.h>
#include <string.h>

// ---- UTF-8 ------------------------------------------------------------------
// A code point is stored in 1 to 4 bytes. The first byte says how many:
//
//   bytes  code points        byte 1    byte 2    byte 3    byte 4
//   1      U+0000..U+007F     0xxxxxxx
//   2      U+0080..U+07FF     110xxxxx  10xxxxxx
//   3      U+0800..U+FFFF     1110xxxx  10xxxxxx  10xxxxxx
//   4      U+10000..U+10FFFF  11110xxx  10xxxxxx  10xxxxxx  10xxxxxx
//
// "Strict" means every code point has exactly one spelling. We reject:
// - a continuation byte (10xxxxxx) where a first byte belongs ("stray"),
// - a sequence cut short by the end of the text or by a non-continuation byte,
// - an overlong form (e.g. "/" spelled as 0xC0 0xAF in 2 bytes instead of 1),
// - the UTF-16 surrogates U+D800..U+DFFF, which are not characters,
// - anything above U+10FFFF.

// utf8_length_from_lead: the first byte's high bits, read against the table
// above.
int utf8_length_from_lead(unsigned char lead) {
    if (lead < 0x80) return 1;
    if ((lead & 0xE0) == 0xC0) return 2;
    if ((lead & 0xF0) == 0xE0) return 3;
    if ((lead & 0xF8) == 0xF0) return 4;
    return 0;
}

// utf8_decode: read the first byte to learn the length, gather the payload
// bits from the continuation bytes, then reject the forms listed above.
int utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
    if (len == 0) return 0;
    int n = utf8_length_from_lead(s[0]);  // sequence length in bytes
    if (n == 0) return 0;                 // a stray continuation byte 10xxxxxx, or 0xF8..0xFF (never valid)
    if (len < (size_t)n) return 0;        // truncated by the end of the text
    if (n == 1) {
        *cp = s[0];
        return 1;
    }
    // The smallest code point that needs n bytes (below it: overlong).
    static const uint32_t MIN_FOR_LENGTH[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t value = s[0] & (0x7Fu >> n);  // the lead byte's payload: 110xxxxx, 1110xxxx, 11110xxx
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;  // truncated by a byte that does not continue it
        value = (value << 6) | (s[i] & 0x3F);
    }
    if (value < MIN_FOR_LENGTH[n]) return 0;          // overlong
    if (value >= 0xD800 && value <= 0xDFFF) return 0; // surrogate
    if (value > MAX_CODEPOINT) return 0;              // beyond Unicode
    *cp = value;
    return n;
}

// utf8_encode: the table above, read from left to right. "cp" must be a valid
// code point (not a surrogate, at most U+10FFFF); the vocabulary only ever
// holds code points that came out of utf8_decode.
int utf8_encode(uint32_t cp, char out[4]) {
    assert(cp <= MAX_CODEPOINT && !(cp >= 0xD800 && cp <= 0xDFFF));
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// utf8_count and utf8_prefix: a byte starts a character unless it is 10xxxxxx.
size_t utf8_count(const char *text, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)text[i] & 0xC0) != 0x80;
    return n;
}

size_t utf8_prefix(const char *text, size_t len, size_t chars) {
    size_t seen = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80 && seen++ == chars) return i;
    return len;
}

// ---- Printing pieces as whole characters ------------------------------------

static const char REPLACEMENT_CHARACTER[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// utf8_stream_byte: one more byte. Once the held bytes are as many as their
// lead byte announces, they are printed if they decode, or else the lead
// byte becomes U+FFFD and the bytes after it are looked at again (one of them
// may start the next character). A byte that cannot continue the held ones
// ends them the same way.
static void utf8_stream_byte(Utf8Stream *s, unsigned char byte, FILE *out) {
    s->held[s->n_held++] = byte;
    while (s->n_held > 0) {
        int need = utf8_length_from_lead(s->held[0]);
        bool continues = need > 0;
        for (int i = 1; i < s->n_held && continues; i++) continues = (s->held[i] & 0xC0) == 0x80;
        if (continues && s->n_held < need) return;  // wait for the rest
        uint32_t cp;
        if (continues && utf8_decode(s->held, (size_t)s->n_held, &cp) == need) {
            fwrite(s->held, 1, (size_t)need, out);
            s->n_held = 0;
            return;
        }
        fputs(REPLACEMENT_CHARACTER, out);
        memmove(s->held, s->held + 1, (size_t)--s->n_held);
    }
}

void utf8_stream_write(Utf8Stream *s, const char *bytes, size_t len, FILE *out) {
    for (size_t i = 0; i < len; i++) utf8_stream_byte(s, (unsigned char)bytes[i], out);
}

void utf8_stream_finish(Utf8Stream *s, FILE *out) {
    if (s->n_held > 0) fputs(REPLACEMENT_CHARACTER, out);
    s->n_held = 0;
}
