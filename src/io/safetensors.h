// safetensors.h: the safetensors container, read and written with every
// check and nothing about what the tensors mean.
//
// Reading order: file 26, after json.h and metadata.h.
//
// Format (https://github.com/huggingface/safetensors):
//
//   [0, 8)          N, the header length, as a little-endian u64
//   [8, 8+N)        the header: JSON, padded with spaces to make 8+N a multiple of 8
//   [8+N, end)      the data section: each tensor's bytes, little-endian
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets"},
// where data_offsets = [begin, end) in bytes from the start of the data
// section, and may hold "__metadata__", an object of strings (safetensors
// allows only strings there). A safetensors reader in any language
// (Python's safetensors.torch.load_file, for one) opens what this writes.
//
// tinygpt's files carry a checksum: the metadata's first key, "checksum",
// is the XXH3-64 (xxHash, libxxhash-dev: the field's fast checksum) of the
// whole file, as 16 hex digits, computed with those 16 digits written as
// zeros. A reader checks it when it reads the tensors, so one changed bit,
// in the header or in any tensor, is caught; a file written before it
// (or by another program) has none, and its schema decides whether that may
// be (SafetensorsFile.has_checksum).
//
// What a file holds is the business of its schema: model/checkpoint.c
// (the model, and AdamW's state beside it) says which tensors, which
// metadata keys and what each means. Here is only the container: the
// header and its length, the metadata's strings, each tensor's dtype,
// shape and offsets, the data section tiled with no gap and no overlap
// (safetensors' own rule), and the floats themselves, written whole or not
// at all. tinygpt writes and reads its own files in F32; another program's
// (a Hugging Face GPT-2's, model/hf_gpt2.c) are listed tensor by tensor and
// read as F32, F16 or BF16, each converted to float (the end of this file;
// safetensors_list.c).
// What it leaves out: writing other dtypes, big-endian machines, and
// memory-mapping the file.
//
// Reading trusts nothing: every size, name, shape and offset is checked
// against the others and against the file's real size before anything is
// allocated by size, so a damaged or hostile file gives a one-line message,
// never a crash, a hang or a huge allocation.
#ifndef TINYGPT_SAFETENSORS_H
#define TINYGPT_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common.h"
#include "json.h"
#include "metadata.h"
#include "tensor_table.h"

// ---- Writing ------------------------------------------------------------------

// One group of tensors in a file: those of "table", in table order, each
// named "prefix" followed by its name in the table, its floats at "memory" +
// its offset. A model checkpoint is one group (the parameters, no prefix);
// AdamW's state is two ("exp_avg." and "exp_avg_sq.").
typedef struct {
    const char *prefix;
    const TensorTable *table;
    const float *memory;
} TensorGroup;

// safetensors_save: the header (the checksum, "md", then one entry per
// tensor of "groups", in order, at consecutive offsets) and the groups' F32
// data, written whole or not at all (atomic_open and atomic_commit, common.h:
// "<path>.tmp", flushed to disk, renamed over "path", the directory synced).
bool safetensors_save(const char *path, const Metadata *md, const TensorGroup *groups, int n_groups, Error *err);

// ---- Reading ------------------------------------------------------------------
//
// A reader runs these steps on one SafetensorsFile, each failing with a
// one-line message in st->err (see safetensors_reject):
//   safetensors_open            the length, the header, its JSON
//   safetensors_meta_*          the metadata values the schema asks for
//   safetensors_check_tensors   the header's tensors against the table the
//                               file must hold: names, dtypes, shapes,
//                               offsets, and the data section tiled
//   safetensors_read_tensors    their floats, each finite and within a bound
//   safetensors_close           always, whatever happened

typedef struct {
    const char *path;          // for messages
    const char *kind;          // what the file is called in messages: "checkpoint", "optimizer state"
    Error *err;
    FILE *f;
    uint64_t file_size;        // bytes
    uint64_t header_len;       // N
    uint64_t data_start;       // 8 + N: where the data section begins in the file
    uint64_t data_size;        // bytes in the data section: file_size - 8 - N
    char *header;              // [N] the JSON text
    JsonValue *root;           // the parsed header
    const JsonValue *meta;     // root's "__metadata__" object, or NULL
    const JsonValue **entries; // [table->count] each expected tensor's entry in "root" (check_tensors)
    uint64_t *begin;           // [table->count] where each one starts in the data section, in bytes
    bool has_checksum;         // the header opens with a "checksum" (see the top of this file)
    uint64_t checksum;         // its value
} SafetensorsFile;

// safetensors_open: open "path" and read and parse its header. "kind"
// names the file in messages ("'<path>' is not a valid tinygpt <kind>: ...").
// False (with "err") if it cannot be opened, or is no safetensors file;
// either way, call safetensors_close.
bool safetensors_open(SafetensorsFile *st, const char *path, const char *kind, Error *err);
// safetensors_open_stream: the same on "f", a stream already open for
// reading ("path" names it in messages), such as rank 0's bytes in memory
// under mpirun (dist_fopen, dist.h); safetensors_close closes it. A NULL
// "f" is a file that could not be opened, "err" already saying why.
bool safetensors_open_stream(SafetensorsFile *st, FILE *f, const char *path, const char *kind, Error *err);
void safetensors_close(SafetensorsFile *st);

// safetensors_reject: st->err = "'<path>' is not a valid tinygpt <kind>: "
// followed by "fmt" (which should end by saying what to do); returns false.
bool safetensors_reject(SafetensorsFile *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The metadata, key by key. Each is strict on purpose (no sign, no spaces,
// no "12abc", no "nan"), and a missing key, a value that is not a string
// or does not parse is a rejection naming the key.
// safetensors_meta_has: whether the key is there at all (for keys that
// older files lack).
bool safetensors_meta_has(const SafetensorsFile *st, const char *key);
// safetensors_meta_string: the value as a JSON string (it may hold NULs), or NULL.
const JsonValue *safetensors_meta_string(SafetensorsFile *st, const char *key);
// safetensors_meta_long: decimal digits, as a number in [0, "max"].
bool safetensors_meta_long(SafetensorsFile *st, const char *key, long max, long *out);
// safetensors_meta_double: a non-negative decimal number ("0.1", "1e-05").
bool safetensors_meta_double(SafetensorsFile *st, const char *key, double *out);

// What a file's schema adds to the messages of safetensors_check_tensors:
// where the shapes come from and what to do about a wrong one, and the
// message for a wrong name: name_problem is called with a name of the file
// that the table lacks ("missing" false; "len" bytes, it may hold a NUL) or
// one of the table that the file lacks ("missing" true), and rejects it
// (safetensors_reject), returning false.
typedef struct {
    char shape_source[160];  // "the metadata (vocab_size 65, n_embd 32, block_size 16)"
    const char *shape_fix;   // "the file is damaged, retrain"
    bool (*name_problem)(SafetensorsFile *st, const char *name, size_t len, bool missing, const void *ctx);
    const void *ctx;
} TensorExpectations;

// safetensors_is_metadata: whether a header entry is "__metadata__", the one
// that is not a tensor.
bool safetensors_is_metadata(const JsonValue *entry);

// safetensors_check_tensors: the header's tensors are exactly "table"'s
// (a name given twice was already refused by the JSON reader), each an F32
// object of the table's shape whose data_offsets lie inside the data
// section and span its floats, together tiling the data section. "table"
// must be bounded by the caller (a model's by its n_layer) before it is
// built from a file's metadata.
bool safetensors_check_tensors(SafetensorsFile *st, const TensorTable *table, const TensorExpectations *expect);

// safetensors_read_tensors: each tensor of "table" (checked above) into
// "memory" + its offset; every value must be finite and at most "limit" in
// magnitude, and the file's checksum, if it has one, must match.
bool safetensors_read_tensors(SafetensorsFile *st, const TensorTable *table, float *memory, float limit);

// ---- Another program's file, tensor by tensor -----------------------------------
//
// A file whose names, shapes and layouts are another program's, which its
// reader maps onto its own (model/hf_gpt2.c): safetensors_open, then
// safetensors_list to see every tensor, then safetensors_read_f32 for each
// one wanted (safetensors_list.c). No checksum: such files have none.


// The dtypes a file may hold (safetensors' names), with their sizes, so that
// every tensor's bytes can be checked, even one the reader skips; F32, F16
// and BF16 read as floats.
typedef enum { DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_F64, DTYPE_I64, DTYPE_I32, DTYPE_I16, DTYPE_I8, DTYPE_U8,
               DTYPE_BOOL } Dtype;
// dtype_name: "F32", ... as the header spells it.
const char *dtype_name(Dtype d);

#define SAFETENSORS_MAX_DIMS 8
// One tensor of the header.
typedef struct {
    const char *name;       // the header's key (NUL-terminated; safetensors_list refuses a name with a NUL)
    Dtype dtype;
    int ndim;               // 0 (a scalar) to SAFETENSORS_MAX_DIMS
    uint64_t shape[SAFETENSORS_MAX_DIMS];
    uint64_t count;         // elements: the product of the shape (1 for a scalar)
    uint64_t begin;         // its bytes in the data section: [begin, begin + count * the dtype's size)
} SafetensorsTensor;

// safetensors_list: every tensor of the header but "__metadata__", in the
// header's order, into "*tensors" ("*count" of them; the caller frees the
// array, whose names point into st), each checked as safetensors_check_tensors
// checks tinygpt's (an object, a known dtype, a shape, data_offsets spanning
// exactly its bytes) and together tiling the data section.
bool safetensors_list(SafetensorsFile *st, SafetensorsTensor **tensors, size_t *count);

// safetensors_read_f32: tensor "t" (from safetensors_list; F32, F16 or
// BF16) into out[t->count] as floats, converted exactly (every F16 and
// BF16 value is a float); every value must be finite and at most "limit" in
// magnitude. The narrower dtypes are read into the first bytes of "out" and
// widened in place, from the last value down: no second buffer.
bool safetensors_read_f32(SafetensorsFile *st, const SafetensorsTensor *t, float *out, float limit);
// safetensors_read_f32_range: the same for its values [first, first + n)
// only, into out[n] (first + n <= t->count): a large tensor in pieces.
bool safetensors_read_f32_range(SafetensorsFile *st, const SafetensorsTensor *t, uint64_t first, size_t n, float *out,
                                float limit);

// f16_to_f32, bf16_to_f32: one IEEE half-precision value (1 sign, 5
// exponent, 10 mantissa bits) or one bfloat16 (a float's top 16 bits), as
// the float it is exactly; infinities and NaN stay what they are.
float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);

#endif
