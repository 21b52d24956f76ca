// safetensors_list.c: another program's safetensors file (a Hugging Face
// GPT-2's), tensor by tensor: each listed with its dtype and shape, and read
// as floats from F32, F16 or BF16 (see safetensors.h).
//
// Reading order: file 26, after safetensors.c, whose open and checks it
// builds on; model/hf_gpt2.c (file 27b) reads GPT-2's weights with it.
#include "safetensors.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bytes;
} DTYPES[] = {
    [DTYPE_F32] = {"F32", 4}, [DTYPE_F16] = {"F16", 2}, [DTYPE_BF16] = {"BF16", 2}, [DTYPE_F64] = {"F64", 8},
    [DTYPE_I64] = {"I64", 8}, [DTYPE_I32] = {"I32", 4}, [DTYPE_I16] = {"I16", 2},   [DTYPE_I8] = {"I8", 1},
    [DTYPE_U8] = {"U8", 1},   [DTYPE_BOOL] = {"BOOL", 1},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

const char *dtype_name(Dtype d) { return DTYPES[d].name; }

// list_one: header entry "entry" as tensor "t": the checks of check_tensor,
// for any dtype and shape.
static bool list_one(SafetensorsFile *st, const JsonValue *entry, SafetensorsTensor *t) {
    const char *name = show(entry->key, entry->key_len).text;
    if (strlen(entry->key) != entry->key_len)
        return safetensors_reject(st, "tensor '%s' has a NUL in its name; the file is damaged", name);
    t->name = entry->key;
    if (entry->type != JSON_OBJECT)
        return safetensors_reject(st, "tensor '%s' is %s, not an object with dtype, shape and data_offsets; the file is damaged",
                                  name, json_type_name(entry->type));
    const JsonValue *dtype = json_get(entry, "dtype");
    size_t d = 0;
    while (d < N_DTYPES && !(dtype && dtype->type == JSON_STRING && json_string_is(dtype, DTYPES[d].name))) d++;
    if (d == N_DTYPES)
        return safetensors_reject(st, "tensor '%s' has no dtype tinygpt knows (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL); the file is damaged or of a newer safetensors",
                                  name);
    t->dtype = (Dtype)d;
    const JsonValue *shape = json_get(entry, "shape");
    if (!shape || shape->type != JSON_ARRAY || shape->count > SAFETENSORS_MAX_DIMS)
        return safetensors_reject(st, "tensor '%s' has no shape: an array of at most %d sizes; the file is damaged",
                                  name, SAFETENSORS_MAX_DIMS);
    t->ndim = (int)shape->count;
    t->count = 1;
    for (int i = 0; i < t->ndim; i++) {
        // Each size, and so the count, is bounded by the data section (a
        // tensor with a 0 size has no bytes): no product can overflow.
        if (!json_as_uint(&shape->items[i], &t->shape[i]) || t->shape[i] > st->data_size + 1)
            return safetensors_reject(st, "tensor '%s' has a shape size that is not a whole number the file could hold; the file is damaged",
                                      name);
        t->count = t->shape[i] == 0 ? 0 : t->count > (st->data_size + 1) / t->shape[i] ? st->data_size + 1
                                                                                       : t->count * t->shape[i];
    }
    const JsonValue *offsets = json_get(entry, "data_offsets");
    uint64_t begin, end;
    if (!offsets || offsets->type != JSON_ARRAY || offsets->count != 2 || !json_as_uint(&offsets->items[0], &begin) ||
        !json_as_uint(&offsets->items[1], &end) || begin > end)
        return safetensors_reject(st, "tensor '%s' has no data_offsets [begin, end] with begin <= end; the file is damaged",
                                  name);
    if (end > st->data_size)
        return safetensors_reject(st, "tensor '%s' has data_offsets [%llu, %llu] but the data section is only %llu bytes; the file is truncated (copy it again) or damaged",
                                  name, (unsigned long long)begin, (unsigned long long)end,
                                  (unsigned long long)st->data_size);
    if (t->count > st->data_size || end - begin != t->count * DTYPES[d].bytes)
        return safetensors_reject(st, "tensor '%s' spans %llu bytes but its shape of %s values needs %llu; the file is damaged",
                                  name, (unsigned long long)(end - begin), DTYPES[d].name,
                                  (unsigned long long)(t->count * DTYPES[d].bytes));
    t->begin = begin;
    return true;
}

static int compare_listed(const void *a, const void *b) {
    const SafetensorsTensor *x = *(const SafetensorsTensor *const *)a, *y = *(const SafetensorsTensor *const *)b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

bool safetensors_list(SafetensorsFile *st, SafetensorsTensor **tensors, size_t *count) {
    *tensors = xcalloc(st->root->count ? st->root->count : 1, sizeof **tensors);
    *count = 0;
    for (size_t i = 0; i < st->root->count; i++) {
        const JsonValue *entry = &st->root->items[i];
        if (safetensors_is_metadata(entry)) continue;
        if (!list_one(st, entry, &(*tensors)[*count])) return false;
        ++*count;
    }
    // They must tile the data section, as check_layout's; sorted by begin,
    // a pointer each, so the list keeps the header's order.
    SafetensorsTensor **order = xmalloc((*count ? *count : 1) * sizeof *order);
    for (size_t i = 0; i < *count; i++) order[i] = &(*tensors)[i];
    qsort(order, *count, sizeof *order, compare_listed);
    uint64_t expected = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < *count; i++) {
        if (order[i]->begin != expected)
            ok = safetensors_reject(st, "tensor '%s' starts at byte %llu of the data section, but %s; the file is damaged",
                                    order[i]->name, (unsigned long long)order[i]->begin,
                                    order[i]->begin < expected ? "that overlaps the tensor before it"
                                                               : "that leaves a gap before it");
        expected += order[i]->count * DTYPES[order[i]->dtype].bytes;
    }
    free(order);
    if (ok && expected != st->data_size)
        ok = safetensors_reject(st, "its tensors take %llu bytes but its data section has %llu; it has extra bytes at the end, so it is damaged",
                                (unsigned long long)expected, (unsigned long long)st->data_size);
    return ok;
}

// A float's bits, and bits as a float.
static float float_of_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

// bfloat16 is a float with its 16 low mantissa bits cut: put them back as 0.
float bf16_to_f32(uint16_t bits) { return float_of_bits((uint32_t)bits << 16); }

// IEEE half: sign s, exponent e (5 bits, bias 15), mantissa m (10 bits):
//   e = 31:        infinity (m = 0) or NaN
//   e = 1..30:     (-1)^s 2^(e - 15) (1 + m / 2^10)     normal: rebias e to float's 127
//   e = 0:         (-1)^s 2^-14 (m / 2^10)              subnormal (and zero): m 2^-24, exact in a float
float f16_to_f32(uint16_t bits) {
    const uint32_t sign = (uint32_t)(bits >> 15) << 31, e = (bits >> 10) & 0x1F, m = bits & 0x3FF;
    float magnitude;
    if (e == 31) magnitude = float_of_bits(0x7F800000u | (m << 13));        // inf, or NaN with its payload
    else if (e > 0) magnitude = float_of_bits(((e - 15 + 127) << 23) | (m << 13));
    else magnitude = (float)m * 0x1p-24f;                                    // m 2^-24: an exact product
    uint32_t out;
    memcpy(&out, &magnitude, sizeof out);
    return float_of_bits(out | sign);
}

bool safetensors_read_f32(SafetensorsFile *st, const SafetensorsTensor *t, float *out, float limit) {
    return safetensors_read_f32_range(st, t, 0, (size_t)t->count, out, limit);
}

bool safetensors_read_f32_range(SafetensorsFile *st, const SafetensorsTensor *t, uint64_t first, size_t n, float *out,
                                float limit) {
    const size_t width = DTYPES[t->dtype].bytes;
    assert(first + n <= t->count);
    if (t->dtype != DTYPE_F32 && t->dtype != DTYPE_F16 && t->dtype != DTYPE_BF16)
        return safetensors_reject(st, "tensor '%s' has dtype %s; tinygpt reads F32, F16 and BF16: convert it to one of them",
                                  t->name, DTYPES[t->dtype].name);
    off_t at = (off_t)(st->data_start + t->begin + first * width);
    if (fseeko(st->f, at, SEEK_SET) != 0) return error_set(st->err, "cannot seek in '%s': %s", st->path, strerror(errno));
    if (!read_exact(out, n * width, st->f, st->path, st->err)) return false;
    if (t->dtype != DTYPE_F32) {
        // Widened from the last value down: value i's 2 bytes sit at 2i, below
        // the 4 bytes at 4i it becomes, and below every value not yet widened.
        // memcpy reads them as bytes, which may alias the floats being written.
        const unsigned char *narrow = (const unsigned char *)out;
        for (size_t i = n; i-- > 0;) {
            uint16_t bits;
            memcpy(&bits, narrow + 2 * i, sizeof bits);
            out[i] = t->dtype == DTYPE_F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(out[i]))
            return safetensors_reject(st, "tensor '%s' holds %s at element %llu; the file is damaged", t->name,
                                      isnan(out[i]) ? "NaN" : "an infinity", (unsigned long long)(first + i));
        if (fabsf(out[i]) > limit)
            return safetensors_reject(st, "tensor '%s' holds %g at element %llu, beyond the %g a weight may have; the file is damaged",
                                      t->name, (double)out[i], (unsigned long long)(first + i), (double)limit);
    }
    return true;
}
