// metadata.c: the "__metadata__" strings being written, and the strict
// spellings of a number in them (see metadata.h).
#include "metadata.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static MetadataItem *metadata_slot(Metadata *md, const char *key) {
    for (int i = 0; i < md->count; i++)
        if (strcmp(md->items[i].key, key) == 0) {
            free(md->items[i].value);
            return &md->items[i];
        }
    md->items = xrealloc(md->items, (size_t)(md->count + 1) * sizeof *md->items);
    MetadataItem *item = &md->items[md->count++];
    size_t key_len = strlen(key);
    item->key = xmalloc(key_len + 1);
    memcpy(item->key, key, key_len + 1);
    return item;
}

void metadata_set_bytes(Metadata *md, const char *key, const char *bytes, size_t len) {
    MetadataItem *item = metadata_slot(md, key);
    item->value = xmalloc(len + 1);
    memcpy(item->value, bytes, len);
    item->value[len] = '\0';
    item->len = len;
}

void metadata_set(Metadata *md, const char *key, const char *fmt, ...) {
    char value[128];
    va_list args;
    va_start(args, fmt);
    int len = vsnprintf(value, sizeof value, fmt, args);
    va_end(args);
    assert(len >= 0 && (size_t)len < sizeof value && "metadata_set is for short values; use metadata_set_bytes");
    metadata_set_bytes(md, key, value, (size_t)len);
}

const MetadataItem *metadata_get(const Metadata *md, const char *key) {
    for (int i = 0; i < md->count; i++)
        if (strcmp(md->items[i].key, key) == 0) return &md->items[i];
    return NULL;
}

// strspn stops at a NUL (a JSON string may hold one): comparing its count
// with "len" refuses that too.
bool parse_u64(const char *text, size_t len, uint64_t *out) {
    bool digits = len >= 1 && len <= 20 && strspn(text, "0123456789") == len;
    errno = 0;
    unsigned long long value = digits ? strtoull(text, NULL, 10) : 0;
    if (!digits || errno == ERANGE) return false;
    *out = value;
    return true;
}

// strtod alone would also skip leading spaces and read "nan" or "inf": ask
// for a digit first.
bool parse_double(const char *text, size_t len, double *out) {
    if (len == 0 || !(text[0] >= '0' && text[0] <= '9') || strlen(text) != len) return false;
    char *end;
    double value = strtod(text, &end);
    if (end != text + len || !isfinite(value)) return false;
    *out = value;
    return true;
}

void format_checksum(uint64_t sum, char out[CHECKSUM_DIGITS + 1]) {
    snprintf(out, CHECKSUM_DIGITS + 1, "%016llx", (unsigned long long)sum);
}

bool parse_checksum(const char *text, uint64_t *sum) {
    uint64_t value = 0;
    for (int i = 0; i < CHECKSUM_DIGITS; i++) {
        const char c = text[i];
        const bool digit = c >= '0' && c <= '9', letter = c >= 'a' && c <= 'f';
        if (!digit && !letter) return false;
        value = value << 4 | (uint64_t)(digit ? c - '0' : c - 'a' + 10);
    }
    *sum = value;
    return true;
}

bool metadata_u64(const Metadata *md, const char *key, uint64_t *out) {
    const MetadataItem *item = metadata_get(md, key);
    return item && parse_u64(item->value, item->len, out);
}

void metadata_free(Metadata *md) {
    for (int i = 0; i < md->count; i++) {
        free(md->items[i].key);
        free(md->items[i].value);
    }
    free(md->items);
    memset(md, 0, sizeof *md);
}
