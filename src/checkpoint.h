// checkpoint.h: save and load the model as a standard .safetensors file.
//
// Reading order: file 12 (after model.h and json.h).
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian
// header length N; N bytes of JSON; then the raw little-endian F32 data.
// The JSON maps each tensor name (see the parameter table in model.h) to
// {"dtype":"F32","shape":[...],"data_offsets":[begin,end]} and holds a
// "__metadata__" object of strings: vocab, n_embd, n_head, block_size,
// vocab_size, dropout, step, and "format": "tinygpt-1".
#ifndef TINYGPT_CHECKPOINT_H
#define TINYGPT_CHECKPOINT_H

#include <stdbool.h>

#include "common.h"
#include "model.h"
#include "tokenizer.h"

// checkpoint_save: write parameters, vocabulary and "step" to "path". Writes
// "path".tmp, flushes it to disk (fsync), then renames it over "path", so a
// crash leaves either the old file or the new one, never half of one.
bool checkpoint_save(const Model *m, const Tokenizer *tok, long step, const char *path, Error *err);

// checkpoint_load: validate "path" completely (header size, JSON, names,
// dtypes, shapes, offsets inside the file, metadata agreeing with the shapes,
// vocabulary) and only then build "m" (model_init with "max_batch" and
// "with_grads"), its weights, and "tok". "*step" gets the saved step (may be
// NULL). On failure nothing is left allocated and "err" says what is wrong.
bool checkpoint_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads,
                     long *step, Error *err);

#endif
