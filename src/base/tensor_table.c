// tensor_table.c: named tensors in one buffer (see tensor_table.h).
//
// Reading order: file 11.
#include "tensor_table.h"

#include <assert.h>
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
