// safetensors.c: the safetensors container (see safetensors.h).
//
// Reading order: file 26, after json.c and metadata.c. The file in two
// parts: writing (the header, the data, atomically), then reading, in the
// order a reader calls the steps. Another program's file, tensor by tensor,
// is safetensors_list.c's.
#include "safetensors.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

// The data section is a float buffer's bytes as they sit in memory (fwrite
// out, fread back in). safetensors stores little-endian IEEE-754 floats, so
// that is only right on a little-endian machine: refuse to compile anywhere
// else rather than write files no one else can read.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors.c copies floats to and from the file as raw bytes, so it needs a little-endian machine");
_Static_assert(sizeof(float) == 4, "safetensors F32 is 4 bytes");

// The largest header accepted, the limit the safetensors library itself uses.
#define MAX_HEADER_BYTES (100u * 1000u * 1000u)
// The bytes before the header: N as a little-endian u64.
#define LENGTH_BYTES 8
// How a header with a checksum begins; its 16 hex digits follow at once.
#define CHECKSUM_PREFIX "{\"__metadata__\":{\"checksum\":\""
#define CHECKSUM_AT (sizeof CHECKSUM_PREFIX - 1)

// ===========================================================================
// Writing.


// build_header: {"__metadata__": {...}, then one entry per tensor of
// "groups", in order, at consecutive data offsets}, padded with spaces so
// that the data section (at byte 8 + N) starts on an 8-byte boundary, where a
// reader that memory-maps the file can use the floats in place.
static void build_header(JsonBuf *b, const Metadata *md, const TensorGroup *groups, int n_groups) {
    json_buf_printf(b, "%s0000000000000000\"", CHECKSUM_PREFIX);  // the checksum's place (safetensors_save)
    for (int i = 0; i < md->count; i++) {
        json_buf_append(b, ",", 1);
        json_buf_string(b, md->items[i].key, strlen(md->items[i].key));
        json_buf_append(b, ":", 1);
        json_buf_string(b, md->items[i].value, md->items[i].len);
    }
    json_buf_append(b, "}", 1);
    size_t begin = 0;
    for (int g = 0; g < n_groups; g++) {
        for (int i = 0; i < groups[g].table->count; i++) {
            const TensorSpec *spec = &groups[g].table->specs[i];
            size_t end = begin + spec->size * sizeof(float);
            char name[sizeof spec->name + 16];
            int len = snprintf(name, sizeof name, "%s%s", groups[g].prefix, spec->name);
            assert(len > 0 && (size_t)len < sizeof name);
            json_buf_append(b, ",", 1);
            json_buf_string(b, name, (size_t)len);
            json_buf_printf(b, ":{\"dtype\":\"F32\",\"shape\":[%zu", spec->shape[0]);
            if (spec->ndim == 2) json_buf_printf(b, ",%zu", spec->shape[1]);
            json_buf_printf(b, "],\"data_offsets\":[%zu,%zu]}", begin, end);
            begin = end;
        }
    }
    json_buf_append(b, "}", 1);
    while ((LENGTH_BYTES + b->len) % 8 != 0) json_buf_append(b, " ", 1);
}

bool safetensors_save(const char *path, const Metadata *md, const TensorGroup *groups, int n_groups, Error *err) {
    JsonBuf header = {0};
    build_header(&header, md, groups, n_groups);

    unsigned char length[LENGTH_BYTES];  // N, little-endian, whatever this machine's byte order
    for (int i = 0; i < LENGTH_BYTES; i++) length[i] = (unsigned char)((uint64_t)header.len >> (8 * i));

    // The checksum of the file as it will be, its own digits zeros, then
    // written into their place.
    XXH3_state_t *hash = XXH3_createState();
    if (!hash) die(EXIT_RUNTIME, "out of memory for a checksum's state");
    XXH3_64bits_reset(hash);
    XXH3_64bits_update(hash, length, sizeof length);
    XXH3_64bits_update(hash, header.data, header.len);
    for (int g = 0; g < n_groups; g++)
        for (int i = 0; i < groups[g].table->count; i++)
            XXH3_64bits_update(hash, groups[g].memory + groups[g].table->specs[i].offset,
                               groups[g].table->specs[i].size * sizeof(float));
    char digits[CHECKSUM_DIGITS + 1];
    format_checksum(XXH3_64bits_digest(hash), digits);
    XXH3_freeState(hash);
    memcpy(header.data + CHECKSUM_AT, digits, CHECKSUM_DIGITS);

    AtomicFile af;
    bool ok = atomic_open(&af, path, err);
    if (ok) {
        ok = write_exact(length, sizeof length, af.f, af.tmp, err);
        ok = ok && write_exact(header.data, header.len, af.f, af.tmp, err);
        for (int g = 0; g < n_groups; g++) {
            const TensorTable *table = groups[g].table;
            for (int i = 0; i < table->count; i++)
                ok = ok && write_exact(groups[g].memory + table->specs[i].offset,
                                       table->specs[i].size * sizeof(float), af.f, af.tmp, err);
        }
        ok = atomic_commit(&af, ok, err);
    }
    json_buf_free(&header);
    return ok;
}

// ===========================================================================
// Reading.

bool safetensors_reject(SafetensorsFile *st, const char *fmt, ...) {
    char prefix[sizeof st->err->msg];
    snprintf(prefix, sizeof prefix, "'%s' is not a valid tinygpt %s: ", st->path, st->kind);
    va_list args;
    va_start(args, fmt);
    error_setv(st->err, prefix, fmt, args);
    va_end(args);
    return false;
}

// read_header: the 8-byte length N, checked against the limits and the file
// size before N bytes are allocated, then the header itself.
static bool read_header(SafetensorsFile *st) {
    if (!stream_size(st->f, st->path, &st->file_size, st->err)) return false;
    if (st->file_size < LENGTH_BYTES)
        return safetensors_reject(st, "it is only %llu bytes long, shorter than the 8-byte header length; it is truncated (copy it again) or not a %s",
                                  (unsigned long long)st->file_size, st->kind);

    unsigned char length[LENGTH_BYTES];
    if (!read_exact(length, sizeof length, st->f, st->path, st->err)) return false;
    uint64_t n = 0;
    for (int i = LENGTH_BYTES - 1; i >= 0; i--) n = (n << 8) | length[i];
    uint64_t after = st->file_size - LENGTH_BYTES;  // bytes after the length field
    if (n < 2)
        return safetensors_reject(st, "its header length is %llu bytes, too short for even \"{}\"; was it written by tinygpt train?",
                                  (unsigned long long)n);
    if (n > MAX_HEADER_BYTES)
        return safetensors_reject(st, "its header length is %llu bytes, more than the %u safetensors allows; it is damaged or not a safetensors file",
                                  (unsigned long long)n, MAX_HEADER_BYTES);
    if (n > after)
        return safetensors_reject(st, "its header length is %llu bytes but only %llu bytes follow; it is truncated (copy it again) or damaged",
                                  (unsigned long long)n, (unsigned long long)after);
    st->header_len = n;
    st->data_start = LENGTH_BYTES + n;
    st->data_size = after - n;
    st->header = xmalloc((size_t)n);
    return read_exact(st->header, (size_t)n, st->f, st->path, st->err);
}

// parse_header: the header as JSON. safetensors requires it to start with
// '{' (no leading whitespace), which also catches most files of other kinds.
static bool parse_header(SafetensorsFile *st) {
    if (st->header[0] != '{')
        return safetensors_reject(st, "its header does not start with '{', so it is not a safetensors file; was it written by tinygpt train?");
    Error json_err;
    if (!json_parse(st->header, (size_t)st->header_len, &st->root, &json_err))
        return safetensors_reject(st, "its header is damaged (%s); save it again or retrain", json_err.msg);
    const JsonValue *meta = json_get(st->root, "__metadata__");
    st->meta = meta && meta->type == JSON_OBJECT ? meta : NULL;
    // The checksum, when the header opens with one (see the top of safetensors.h).
    const char *digits = st->header + CHECKSUM_AT;
    st->has_checksum = st->header_len > CHECKSUM_AT + CHECKSUM_DIGITS &&
                       memcmp(st->header, CHECKSUM_PREFIX, CHECKSUM_AT) == 0 &&
                       parse_checksum(digits, &st->checksum) && digits[CHECKSUM_DIGITS] == '"';
    return true;
}

bool safetensors_open(SafetensorsFile *st, const char *path, const char *kind, Error *err) {
    return safetensors_open_stream(st, fopen_checked(path, "rb", err), path, kind, err);
}

bool safetensors_open_stream(SafetensorsFile *st, FILE *f, const char *path, const char *kind, Error *err) {
    memset(st, 0, sizeof *st);
    st->path = path;
    st->kind = kind;
    st->err = err;
    st->f = f;
    return st->f && read_header(st) && parse_header(st);
}

void safetensors_close(SafetensorsFile *st) {
    free(st->entries);
    free(st->begin);
    json_free(st->root);
    free(st->header);
    if (st->f) fclose(st->f);
    st->f = NULL;
}

// ---- The metadata ------------------------------------------------------------

bool safetensors_meta_has(const SafetensorsFile *st, const char *key) { return json_get(st->meta, key) != NULL; }

const JsonValue *safetensors_meta_string(SafetensorsFile *st, const char *key) {
    const JsonValue *v = json_get(st->meta, key);
    if (!v) safetensors_reject(st, "its __metadata__ has no \"%s\"; was it written by tinygpt train?", key);
    else if (v->type != JSON_STRING)
        safetensors_reject(st, "its __metadata__ \"%s\" is %s, not a string; was it written by tinygpt train?", key,
                           json_type_name(v->type));
    return v && v->type == JSON_STRING ? v : NULL;
}

bool safetensors_meta_long(SafetensorsFile *st, const char *key, long max, long *out) {
    const JsonValue *v = safetensors_meta_string(st, key);
    if (!v) return false;
    uint64_t value;
    if (!parse_u64(v->string, v->string_len, &value) || value > (uint64_t)max)
        return safetensors_reject(st, "its __metadata__ \"%s\" is \"%s\", not a whole number in [0, %ld]; the file is damaged, retrain",
                                  key, show(v->string, v->string_len).text, max);
    *out = (long)value;
    return true;
}

bool safetensors_meta_double(SafetensorsFile *st, const char *key, double *out) {
    const JsonValue *v = safetensors_meta_string(st, key);
    if (!v) return false;
    if (!parse_double(v->string, v->string_len, out))
        return safetensors_reject(st, "its __metadata__ \"%s\" is \"%s\", not a decimal number; the file is damaged, retrain",
                                  key, show(v->string, v->string_len).text);
    return true;
}

// ---- The tensors -------------------------------------------------------------

// safetensors_is_metadata: a key may hold NULs, so its length is compared too.
bool safetensors_is_metadata(const JsonValue *entry) {
    const char *name = "__metadata__";
    return entry->key_len == strlen(name) && memcmp(entry->key, name, entry->key_len) == 0;
}

// A table entry's name and index, for looking names up by binary search:
// a header may hold millions of entries, and a table thousands.
typedef struct {
    const char *name;
    int index;
} NamedIndex;

static int compare_names(const void *a, const void *b) {
    return strcmp(((const NamedIndex *)a)->name, ((const NamedIndex *)b)->name);
}

// check_names: every tensor in the header must be one of "table"'s, and
// every one of "table"'s must be there (the JSON reader has already refused
// a name given twice). Records each tensor's entry in st->entries.
static bool check_names(SafetensorsFile *st, const TensorTable *table, const TensorExpectations *expect) {
    int n = table->count;
    NamedIndex *sorted = xmalloc((size_t)n * sizeof *sorted);
    for (int t = 0; t < n; t++) sorted[t] = (NamedIndex){table->specs[t].name, t};
    qsort(sorted, (size_t)n, sizeof *sorted, compare_names);

    bool ok = true;
    for (size_t i = 0; ok && i < st->root->count; i++) {
        const JsonValue *entry = &st->root->items[i];
        if (safetensors_is_metadata(entry)) continue;
        NamedIndex key = {entry->key, 0};
        const NamedIndex *found = strlen(entry->key) == entry->key_len
                                      ? bsearch(&key, sorted, (size_t)n, sizeof *sorted, compare_names)
                                      : NULL;
        if (found) st->entries[found->index] = entry;
        else ok = expect->name_problem(st, entry->key, entry->key_len, false, expect->ctx);
    }
    free(sorted);

    for (int t = 0; ok && t < n; t++)
        if (!st->entries[t])
            ok = expect->name_problem(st, table->specs[t].name, strlen(table->specs[t].name), true, expect->ctx);
    return ok;
}

// format_dims: "[a,b]" from "n" dimensions, for messages.
static void format_dims(char *buf, size_t size, const uint64_t *dims, int n) {
    if (n == 1) snprintf(buf, size, "[%llu]", (unsigned long long)dims[0]);
    else snprintf(buf, size, "[%llu,%llu]", (unsigned long long)dims[0], (unsigned long long)dims[1]);
}

// check_tensor: tensor "t" of "table": an object with dtype "F32", the
// table's shape, and data_offsets [begin, end) inside the data section
// holding exactly 4 bytes per element. Saves begin in st->begin[t].
static bool check_tensor(SafetensorsFile *st, const TensorTable *table, int t, const TensorExpectations *expect) {
    const TensorSpec *spec = &table->specs[t];
    const JsonValue *entry = st->entries[t];
    if (entry->type != JSON_OBJECT)
        return safetensors_reject(st, "tensor '%s' is %s, not an object with dtype, shape and data_offsets; was it written by tinygpt train?",
                                  spec->name, json_type_name(entry->type));

    const JsonValue *dtype = json_get(entry, "dtype");
    if (!dtype || dtype->type != JSON_STRING)
        return safetensors_reject(st, "tensor '%s' has no dtype string; was it written by tinygpt train?", spec->name);
    if (!json_string_is(dtype, "F32"))
        return safetensors_reject(st, "tensor '%s' has dtype \"%s\" but tinygpt reads only F32; convert the weights to float32",
                                  spec->name, show(dtype->string, dtype->string_len).text);

    // The shape: compare each dimension with the table's, as numbers.
    uint64_t want[2] = {(uint64_t)spec->shape[0], (uint64_t)spec->shape[1]}, got[2] = {0, 0};
    const JsonValue *shape = json_get(entry, "shape");
    bool same = shape && shape->type == JSON_ARRAY && shape->count == (size_t)spec->ndim;
    for (int d = 0; same && d < spec->ndim; d++)
        same = json_as_uint(&shape->items[d], &got[d]) && got[d] == want[d];
    if (!same) {
        char wanted[48], found[48] = "something else";
        format_dims(wanted, sizeof wanted, want, spec->ndim);
        bool readable = shape && shape->type == JSON_ARRAY && (shape->count == 1 || shape->count == 2) &&
                        json_as_uint(&shape->items[0], &got[0]) &&
                        (shape->count == 1 || json_as_uint(&shape->items[1], &got[1]));
        if (readable) format_dims(found, sizeof found, got, (int)shape->count);
        return safetensors_reject(st, "tensor '%s' has shape %s but %s needs %s; %s", spec->name, found,
                                  expect->shape_source, wanted, expect->shape_fix);
    }

    // The offsets: inside the data section, and exactly the right length.
    const JsonValue *offsets = json_get(entry, "data_offsets");
    uint64_t begin, end;
    if (!offsets || offsets->type != JSON_ARRAY || offsets->count != 2 || !json_as_uint(&offsets->items[0], &begin) ||
        !json_as_uint(&offsets->items[1], &end) || begin > end)
        return safetensors_reject(st, "tensor '%s' has no data_offsets [begin, end] with begin <= end; was it written by tinygpt train?",
                                  spec->name);
    if (end > st->data_size)
        return safetensors_reject(st, "tensor '%s' has data_offsets [%llu, %llu] but the data section is only %llu bytes; the file is truncated (copy it again) or damaged",
                                  spec->name, (unsigned long long)begin, (unsigned long long)end,
                                  (unsigned long long)st->data_size);
    if (end - begin != (uint64_t)spec->size * sizeof(float))
        return safetensors_reject(st, "tensor '%s' spans %llu bytes but its %zu F32 values need %zu; the file is damaged, retrain",
                                  spec->name, (unsigned long long)(end - begin), spec->size, spec->size * sizeof(float));
    st->begin[t] = begin;
    return true;
}

// A tensor's index in the table and where it begins in the data section,
// for sorting by begin.
typedef struct {
    uint64_t begin;
    int index;
} Placed;

static int compare_begins(const void *a, const void *b) {
    const Placed *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);  // ties in table order, for a stable message
}

// check_layout: "table"'s tensors must tile the data section: sorted by
// begin, each starts where the previous one ended, the first at 0, the last
// ending at the end of the file. (Their lengths are already checked, so
// comparing begins is enough.) Without this, two tensors could share bytes,
// or junk could hide between them.
static bool check_layout(SafetensorsFile *st, const TensorTable *table) {
    int n = table->count;
    Placed *order = xmalloc((size_t)n * sizeof *order);
    for (int t = 0; t < n; t++) order[t] = (Placed){st->begin[t], t};
    qsort(order, (size_t)n, sizeof *order, compare_begins);
    uint64_t expected = 0;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        const TensorSpec *spec = &table->specs[order[i].index];
        if (order[i].begin != expected)
            ok = safetensors_reject(st, "tensor '%s' starts at byte %llu of the data section, but %s; the file is damaged, retrain",
                                    spec->name, (unsigned long long)order[i].begin,
                                    order[i].begin < expected ? "that overlaps the tensor before it"
                                                              : "that leaves a gap before it");
        expected += spec->size * sizeof(float);
    }
    free(order);
    if (ok && expected != st->data_size)
        ok = safetensors_reject(st, "its tensors take %llu bytes but its data section has %llu; it has extra bytes at the end, so it is damaged",
                                (unsigned long long)expected, (unsigned long long)st->data_size);
    return ok;
}

bool safetensors_check_tensors(SafetensorsFile *st, const TensorTable *table, const TensorExpectations *expect) {
    st->entries = xcalloc((size_t)table->count, sizeof *st->entries);
    st->begin = xcalloc((size_t)table->count, sizeof *st->begin);
    bool ok = check_names(st, table, expect);
    for (int t = 0; ok && t < table->count; t++) ok = check_tensor(st, table, t, expect);
    return ok && check_layout(st, table);
}

// read_in_order: the tensors of "table" in the order they lie in the file
// ("order", sorted by begin), each into "memory" + its offset, every byte
// also into "hash". check_layout has found them to tile the data section,
// so the hash sees the whole data section, in order.
static bool read_in_order(SafetensorsFile *st, const TensorTable *table, const Placed *order, float *memory,
                          XXH3_state_t *hash) {
    for (int i = 0; i < table->count; i++) {
        const TensorSpec *spec = &table->specs[order[i].index];
        float *w = memory + spec->offset;
        off_t at = (off_t)(st->data_start + order[i].begin);
        if (fseeko(st->f, at, SEEK_SET) != 0)
            return error_set(st->err, "cannot seek in '%s': %s", st->path, strerror(errno));
        if (!read_exact(w, spec->size * sizeof(float), st->f, st->path, st->err)) return false;
        XXH3_64bits_update(hash, w, spec->size * sizeof(float));
    }
    return true;
}

// check_values: every value read is finite and at most "limit" in
// magnitude. Training stops before it saves anything else, so another
// value means the file is damaged or was not written by tinygpt: say so,
// rather than let eval print a NaN loss or a new run blame its --lr.
static bool check_values(SafetensorsFile *st, const TensorTable *table, const float *memory, float limit) {
    for (int t = 0; t < table->count; t++) {
        const TensorSpec *spec = &table->specs[t];
        const float *w = memory + spec->offset;
        for (size_t i = 0; i < spec->size; i++) {
            if (!isfinite(w[i]))
                return safetensors_reject(st, "tensor '%s' holds %s at element %zu, which training never saves; the file is damaged or not from tinygpt: use another checkpoint, or retrain",
                                          spec->name, isnan(w[i]) ? "NaN" : "an infinity", i);
            if (fabsf(w[i]) > limit)
                return safetensors_reject(st, "tensor '%s' holds %g at element %zu, beyond the %g a weight may have; the file is damaged or not from tinygpt: use another checkpoint, or retrain",
                                          spec->name, (double)w[i], i, (double)limit);
        }
    }
    return true;
}

// The hash is of the whole file as it was written: the length, the header
// with the checksum's own digits as zeros, then the data section.
bool safetensors_read_tensors(SafetensorsFile *st, const TensorTable *table, float *memory, float limit) {
    Placed *order = xmalloc((size_t)table->count * sizeof *order);
    for (int t = 0; t < table->count; t++) order[t] = (Placed){st->begin[t], t};
    qsort(order, (size_t)table->count, sizeof *order, compare_begins);
    XXH3_state_t *hash = XXH3_createState();
    if (!hash) die(EXIT_RUNTIME, "out of memory for a checksum's state");
    XXH3_64bits_reset(hash);
    unsigned char length[LENGTH_BYTES];
    for (int i = 0; i < LENGTH_BYTES; i++) length[i] = (unsigned char)(st->header_len >> (8 * i));
    XXH3_64bits_update(hash, length, sizeof length);
    if (st->has_checksum) {
        XXH3_64bits_update(hash, st->header, CHECKSUM_AT);
        XXH3_64bits_update(hash, "0000000000000000", CHECKSUM_DIGITS);
        XXH3_64bits_update(hash, st->header + CHECKSUM_AT + CHECKSUM_DIGITS,
                           (size_t)st->header_len - CHECKSUM_AT - CHECKSUM_DIGITS);
    }
    bool ok = read_in_order(st, table, order, memory, hash);
    if (ok && st->has_checksum && XXH3_64bits_digest(hash) != st->checksum)
        ok = safetensors_reject(st, "its checksum does not match its contents, so a byte of it changed after it was saved; the file is damaged: use another checkpoint, or retrain");
    XXH3_freeState(hash);
    free(order);
    return ok && check_values(st, table, memory, limit);
}

