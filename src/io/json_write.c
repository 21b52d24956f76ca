// json_write.c: JSON written: a growable byte buffer and a string escaper
// (see json.h, "Writer").
//
// Reading order: file 25, after json.c.
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// reserve: make room for "extra" more bytes plus the NUL, growing by doubling
// so a long run of small appends costs linear time.
static void reserve(JsonBuf *b, size_t extra) {
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

// json_buf_append: copy the bytes in and keep the NUL after them.
void json_buf_append(JsonBuf *b, const char *bytes, size_t n) {
    reserve(b, n);
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
}

// json_buf_printf: format into the room left; if the text did not fit,
// vsnprintf has told us its length, so grow to that and format again.
void json_buf_printf(JsonBuf *b, const char *fmt, ...) {
    reserve(b, 0);
    size_t room = b->cap - b->len;
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(b->data + b->len, room, fmt, args);
    va_end(args);
    if (n < 0) return;
    if ((size_t)n >= room) {
        reserve(b, (size_t)n);
        va_start(args, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, args);
        va_end(args);
    }
    b->len += (size_t)n;
}

// json_buf_string: JSON requires escaping exactly '"', '\' and the control
// characters U+0000..U+001F. The common ones have short forms; the rest are
// written \u00XX. Everything else, including multi-byte UTF-8, is copied as
// it is, so a vocabulary of accented letters stays readable in the header.
void json_buf_string(JsonBuf *b, const char *utf8, size_t len) {
    json_buf_append(b, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)utf8[i];
        switch (c) {
        case '"': json_buf_append(b, "\\\"", 2); break;
        case '\\': json_buf_append(b, "\\\\", 2); break;
        case '\b': json_buf_append(b, "\\b", 2); break;
        case '\f': json_buf_append(b, "\\f", 2); break;
        case '\n': json_buf_append(b, "\\n", 2); break;
        case '\r': json_buf_append(b, "\\r", 2); break;
        case '\t': json_buf_append(b, "\\t", 2); break;
        default:
            if (c < 0x20) json_buf_printf(b, "\\u%04X", c);
            else json_buf_append(b, (const char *)&c, 1);
        }
    }
    json_buf_append(b, "\"", 1);
}

// json_buf_free: release the bytes; the buffer is empty and reusable after.
void json_buf_free(JsonBuf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
