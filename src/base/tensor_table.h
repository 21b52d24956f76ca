// tensor_table.h: named tensors laid out one after another in one buffer.
//
// Reading order: file 11, after the layers and before model.h. The model keeps its
// parameters, their gradients, its activations and their gradients each in
// one contiguous buffer of floats; a table says where each named tensor
// sits in its buffer and what shape it has. The model builds its tables
// (model_tensors.c), the optimizer walks them, training searches them for a
// NaN, and a safetensors file (io/) is written from one and checked against one.
#ifndef TINYGPT_TENSOR_TABLE_H
#define TINYGPT_TENSOR_TABLE_H

#include <stdbool.h>
#include <stddef.h>

// One named tensor inside a contiguous buffer.
typedef struct {
    char name[48];     // the PyTorch / safetensors name, e.g. "blocks.3.mlp.fc.weight"
    int ndim;          // 1 or 2
    size_t shape[2];   // shape[1] unused when ndim == 1
    size_t offset;     // in floats, from the start of the buffer
    size_t size;       // number of floats
    int init;          // how the table's builder starts its values (model_tensors.c's ParamInit); 0 if unused
} TensorSpec;

// A table: the tensors of one buffer, in buffer order.
typedef struct {
    TensorSpec *specs;  // [count]
    int count;
    size_t total;       // floats in all (saturates at SIZE_MAX for absurd sizes)
} TensorTable;

// table_add: append a [rows, cols] tensor (1-D when cols == 0) named
// "name", right after the last one; "init" is stored as given.
void table_add(TensorTable *t, const char *name, size_t rows, size_t cols, int init);
// table_free: release the specs; the table is empty again.
void table_free(TensorTable *t);
// table_find: the entry named "name", or NULL.
const TensorSpec *table_find(const TensorTable *t, const char *name);
// table_find_beyond: the first tensor of "t", read in "memory" (the buffer
// the table lays out), that holds a NaN or a value beyond +-"limit": its
// index in t, with the element in "*element"; -1 if there is none.
int table_find_beyond(const TensorTable *t, const float *memory, float limit, size_t *element);

// Saturating size_t arithmetic: a size that does not fit becomes SIZE_MAX
// and stays there, and SIZE_MAX bytes never fit in memory, so an overflow
// is refused like any other model too large. (B*NH*T*T alone can reach
// 2^68 within the flags' ranges.)
size_t sat_mul(size_t a, size_t b);
size_t sat_add(size_t a, size_t b);

#endif
