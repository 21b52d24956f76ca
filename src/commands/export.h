// export.h: the `tinygpt export` command: a tinygpt model as a Hugging Face
// GPT-2 directory, which GPT2LMHeadModel.from_pretrained reads.
//
// Reading order: file 37b, after tokenize.h. `tinygpt export --model CKPT
// --out DIR` writes DIR/config.json, DIR/model.safetensors (F32, in GPT-2's
// names and layout) and, for a bpe model, DIR/vocab.json and DIR/merges.txt
// (gpt2_tokenizer.h writes them). Only a model GPT-2's architecture can
// compute is written: a gpt with learned positions, LayerNorm, a GELU MLP
// and its head tied to tok_emb, which is GPT-2 with every bias zero; any
// other (card, a char tokenizer, a ladder or modern-recipe swap) is refused
// with one line naming the flag that made it so. docs/export.md tells the rest.
#ifndef TINYGPT_EXPORT_H
#define TINYGPT_EXPORT_H

#include <stdbool.h>

#include "common.h"
#include "model.h"
#include "safetensors.h"
#include "tokenizer.h"

// export_check: whether a model of "cfg" with a tokenizer of "kind" can be
// written as GPT-2; if not, false and "err" says why, naming the flag.
bool export_check(const ModelConfig *cfg, TokenizerKind kind, Error *err);

// export_tensors: GPT-2's tensors made from "m"'s parameters (m must pass
// export_check): "*table" gets their names and shapes, in the gpt2
// repository's order, and the returned buffer (the caller frees it) their
// values: Conv1D's weights transposed to [in, out], q, k and v joined into
// c_attn, and zeros for every bias the model lacks.
float *export_tensors(const Model *m, TensorTable *table);

// export_model: "m" and "tok" as a Hugging Face GPT-2 directory "dir" (which
// must exist): config.json, model.safetensors, and for a bpe tokenizer
// vocab.json and merges.txt, each file written whole or not at all.
bool export_model(const Model *m, const Tokenizer *tok, const char *dir, Error *err);

int cmd_export(int argc, char **argv);

#endif
