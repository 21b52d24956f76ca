// byte_map.c: byte strings as hash-map keys (see byte_map.h).
#include "byte_map.h"

#include <string.h>

#include <stb_ds.h>

// bytes_hash: FNV-1a, 64 bits: one xor and one multiply per byte. Bits 31
// and 63 are cleared: stb_ds hashes an 8-byte key by shifting its bytes 3
// and 7 left by 24 as ints, undefined behaviour for a byte >= 0x80 (UBSan
// stops on it). 62 bits are plenty, and equal bytes are checked anyway.
uint64_t bytes_hash(const unsigned char *s, size_t len) {
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) hash = (hash ^ s[i]) * 0x100000001b3ull;
    return hash & 0x7FFFFFFF7FFFFFFFull;
}

// byte_map_find: the entry whose bytes (in "base") equal "s" ("len" bytes,
// with hash "hash"), or -1. Follows the chain of entries with that hash.
int byte_map_find(const ByteMap *map, const unsigned char *base, const unsigned char *s, size_t len,
                         uint64_t hash) {
    if (map->first == NULL) return -1;  // stb_ds would allocate on a lookup in an empty map
    HashToEntry *first = map->first;
    ptrdiff_t slot;
    (void)hmgeti_ts(first, hash, slot);
    for (int e = slot < 0 ? -1 : first[slot].value; e >= 0; e = map->entries[e].next) {
        const ByteEntry *entry = &map->entries[e];
        if (entry->len == len && memcmp(base + entry->start, s, len) == 0) return e;
    }
    return -1;
}

// byte_map_add: a new entry for the bytes at "start" ("len" of them, hash
// "hash") of the owner's buffer, put at the head of its hash's chain;
// returns its index. The caller has checked that the bytes are not there yet.
int byte_map_add(ByteMap *map, uint64_t hash, size_t start, size_t len) {
    int e = (int)arrlen(map->entries);
    ptrdiff_t slot = hmgeti(map->first, hash);
    ByteEntry entry = {start, len, slot < 0 ? -1 : map->first[slot].value};
    arrput(map->entries, entry);
    hmput(map->first, hash, e);
    return e;
}

void byte_map_free(ByteMap *map) {
    hmfree(map->first);
    arrfree(map->entries);
}
