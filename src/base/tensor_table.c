// tensor_table.c: named tensors in one buffer (see tensor_table.h).
//
// Reading order: file 11.
#include "tensor_table.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

size_t sat_mul(size_t a, size_t b) {
    size_t product;
    return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}

size_t sat_add(size_t a, size_t b) {
    size_t sum;
    return __builtin_add_overflow(a, b, &sum) ? SIZE_MAX : sum;
}

// The specs grow by doubling: a table is built once, when a model is made.
void table_add(TensorTable *t, const char *name, size_t rows, size_t cols, int init) {
    if ((t->count & (t->count - 1)) == 0)  // 0, 1, 2, 4, ...: full
        t->specs = xrealloc(t->specs, (size_t)(t->count ? 2 * t->count : 1) * sizeof *t->specs);
    TensorSpec *spec = &t->specs[t->count++];
    memset(spec, 0, sizeof *spec);
    size_t len = strlen(name);
    assert(len < sizeof spec->name);
    memcpy(spec->name, name, len + 1);
    spec->ndim = cols > 0 ? 2 : 1;
    spec->shape[0] = rows;
    spec->shape[1] = cols;
    spec->offset = t->total;
    spec->size = sat_mul(rows, cols > 0 ? cols : 1);
    spec->init = init;
    t->total = sat_add(t->total, spec->size);
}

void table_free(TensorTable *t) {
    free(t->specs);
    memset(t, 0, sizeof *t);
}

const TensorSpec *table_find(const TensorTable *t, const char *name) {
    for (int i = 0; i < t->count; i++)
        if (strcmp(t->specs[i].name, name) == 0) return &t->specs[i];
    return NULL;
}

// first_beyond: the index of the first value of x[n] that is NaN or beyond
// +-"limit" (with limit FLT_MAX: the first NaN or infinity), or n.
// Training asks twice a step and almost always finds nothing, so blocks of
// 1024 are first tested with a loop that vectorises (an OR of "not
// |x| <= limit", which is also true for NaN; a loop that stops at the first
// hit cannot be vectorised), and only a block that holds one is searched
// number by number.
static size_t first_beyond(const float *x, size_t n, float limit) {
    for (size_t block = 0; block < n; block += 1024) {
        size_t end = n - block < 1024 ? n : block + 1024;
        int found = 0;
        for (size_t i = block; i < end; i++) found |= !(fabsf(x[i]) <= limit);
        if (found)
            for (size_t i = block; i < end; i++)
                if (!(fabsf(x[i]) <= limit)) return i;
    }
    return n;
}

int table_find_beyond(const TensorTable *t, const float *memory, float limit, size_t *element) {
    for (int i = 0; i < t->count; i++) {
        const TensorSpec *spec = &t->specs[i];
        size_t at = first_beyond(memory + spec->offset, spec->size, limit);
        if (at < spec->size) {
            *element = at;
            return i;
        }
    }
    return -1;
}
