// metadata.h: the "__metadata__" object of a safetensors file being
// written (keys and string values), and the strict spellings of a number in
// one: what tinygpt's checkpoints and run.json say about themselves.
//
// Reading order: file 26, after json.h: safetensors.h writes a Metadata
// into a file's header; checkpoint.c (file 27) and run_info.c fill one.
#ifndef TINYGPT_METADATA_H
#define TINYGPT_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The "__metadata__" object being written: keys and string values, in the
// order they were set.
typedef struct {
    char *key;
    char *value;  // "len" bytes, any UTF-8 (a char model's vocabulary may hold a NUL)
    size_t len;
} MetadataItem;

typedef struct {
    MetadataItem *items;
    int count;
} Metadata;

// metadata_set: "key" = the printf-style "fmt" (a key set twice keeps its
// first place and its last value). metadata_set_bytes: = "len" bytes.
void metadata_set(Metadata *md, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void metadata_set_bytes(Metadata *md, const char *key, const char *bytes, size_t len);
// metadata_get: the item "key", or NULL.
const MetadataItem *metadata_get(const Metadata *md, const char *key);
// metadata_u64: the value of "key" as parse_u64 reads it; false when
// absent or not that.
bool metadata_u64(const Metadata *md, const char *key, uint64_t *out);

// The strict spellings of a number in metadata, as tinygpt writes them,
// "len" bytes of "text": parse_u64, 1 to 20 decimal digits that fit in 64
// bits (no sign, no space, no "12abc"); parse_double, a finite decimal
// number with a digit first ("0.1", "1e-05"; not " 1", "+1", ".5" or "nan").
bool parse_u64(const char *text, size_t len, uint64_t *out);
bool parse_double(const char *text, size_t len, double *out);

// A checksum as tinygpt's files spell it (safetensors.h, run_dir.h): the
// XXH3-64 of the file, as 16 lowercase hex digits. format_checksum writes
// them and a NUL into "out"; parse_checksum reads the 16 characters at
// "text" (the caller has them), false unless each is such a digit.
#define CHECKSUM_DIGITS 16
void format_checksum(uint64_t sum, char out[CHECKSUM_DIGITS + 1]);
bool parse_checksum(const char *text, uint64_t *sum);
void metadata_free(Metadata *md);

#endif
