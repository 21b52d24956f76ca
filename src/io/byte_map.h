// byte_map.h: byte strings of any content as hash-map keys.
//
// Reading order: file 22, with chunk.h and bpe.h: bpe.c caches encoded
// chunks in a ByteMap, and bpe_learn.c counts the text's chunks in one.
//
// stb_ds's string maps stop at a NUL, and a text may hold any byte, so a
// ByteMap keys an stb_ds map on a 64-bit hash of the bytes and keeps, for
// each hash, a chain of entries whose bytes are compared in full: two
// strings that share a hash stay two entries. The bytes themselves stay in
// the owner's buffer ("base"); an entry holds where they are.
#ifndef TINYGPT_BYTE_MAP_H
#define TINYGPT_BYTE_MAP_H

#include <stddef.h>
#include <stdint.h>

// An stb_ds hash map from a 64-bit hash of some bytes to the first entry
// with that hash.
typedef struct {
    uint64_t key;  // bytes_hash of the entry's bytes
    int value;     // index into ByteMap.entries
} HashToEntry;

typedef struct {
    size_t start, len;  // the bytes: base[start .. start + len) of the owner's buffer
    int next;           // the next entry with the same hash, or -1
} ByteEntry;

typedef struct {
    HashToEntry *first;  // stb_ds hash map
    ByteEntry *entries;  // stb_ds array
} ByteMap;

// bytes_hash: FNV-1a of "len" bytes, 62 bits of it (see byte_map.c).
uint64_t bytes_hash(const unsigned char *s, size_t len);
// byte_map_find: the entry whose bytes (in "base") equal "s" ("len" bytes,
// with hash "hash"), or -1.
int byte_map_find(const ByteMap *map, const unsigned char *base, const unsigned char *s, size_t len, uint64_t hash);
// byte_map_add: a new entry for the bytes at "start" ("len" of them, hash
// "hash") of the owner's buffer; returns its index. The caller has checked
// that the bytes are not there yet.
int byte_map_add(ByteMap *map, uint64_t hash, size_t start, size_t len);
void byte_map_free(ByteMap *map);

#endif
