// hf_gpt2.h: a Hugging Face GPT-2 directory, read as a tinygpt gpt2.
//
// Reading order: file 27b, after checkpoint.h (file 27): the other way a
// model reaches tinygpt, from OpenAI's GPT-2 as Hugging Face keeps it (its
// `gpt2` repository's files, or what GPT2LMHeadModel.save_pretrained
// writes). The directory holds:
//   config.json        the sizes: n_layer, n_head, n_embd, n_positions (T),
//                      vocab_size, layer_norm_epsilon (must be 1e-5, tinygpt's
//                      LayerNorm's), activation_function ("gelu_new" or
//                      "gelu_pytorch_tanh": GELU's tanh form; "gelu": exact)
//   model.safetensors  the weights, in F32, F16 or BF16, under GPT-2's names
//   vocab.json, merges.txt   its tokenizer (gpt2_tokenizer.h)
//
// GPT-2 wrote its linear layers as Conv1D: y = x @ W + b with W [in, out],
// the transpose of nn.Linear's [out, in], which tinygpt keeps. So:
//   wte.weight [V,C]                    tok_emb.weight (and so the tied head)
//   wpe.weight [T,C]                    pos_emb.weight
//   h.{i}.ln_1.weight, .bias [C]        blocks.{i}.ln1.weight, .bias
//   h.{i}.attn.c_attn.weight [C,3C]     transposed: [Wq;Wk;Wv] [3C,C], attn.{q,k,v}.weight
//   h.{i}.attn.c_attn.bias [3C]         attn.{q,k,v}.bias, one [3C] vector already
//   h.{i}.attn.c_proj.weight [C,C]      transposed: attn.proj.weight; .bias [C] as is
//   h.{i}.ln_2.weight, .bias [C]        ln2.weight, .bias
//   h.{i}.mlp.c_fc.weight [C,4C]        transposed: mlp.fc.weight [4C,C]; .bias [4C]
//   h.{i}.mlp.c_proj.weight [4C,C]      transposed: mlp.proj.weight [C,4C]; .bias [C]
//   ln_f.weight, .bias [C]              ln_f.weight, .bias
// each also with "transformer." in front (save_pretrained's names), and
//   lm_head.weight [V,C]                the head: it must equal wte.weight (GPT-2 ties them)
// h.{i}.attn.bias and h.{i}.attn.masked_bias, the causal mask that some
// versions saved as buffers, are skipped: attention masks by position
// itself (attention.h). Any other name, a shape other than config.json's,
// a tensor missing or given twice, a missing file or a bad config value is
// refused in one line naming the file and the key.
//
// Each weight is read straight into the model's parameter buffer, converted
// to float in place; a Conv1D weight goes through a scratch buffer the
// size of the largest one (4C^2 floats) to be transposed. No second copy of
// the model is made.
#ifndef TINYGPT_HF_GPT2_H
#define TINYGPT_HF_GPT2_H

#include <stdbool.h>

#include "common.h"
#include "model.h"
#include "tokenizer.h"

// hf_gpt2_load: the GPT-2 of Hugging Face directory "dir" into "m" (built
// here, for batches of up to "max_batch" rows, with gradients when
// "with_grads"; free it with model_free) and its tokenizer into "tok"
// (tokenizer_free). On failure both are left empty and "err" says which
// file and key, and what to do.
bool hf_gpt2_load(const char *dir, Model *m, Tokenizer *tok, int max_batch, bool with_grads, Error *err);

// model_load: a model from "path": a Hugging Face GPT-2 directory
// (hf_gpt2_load) when it is a directory, else a tinygpt checkpoint
// (checkpoint_load, without its step): what `--model` names in sample,
// eval and attention, once run_model_path has taken a run directory for
// its model.safetensors.
bool model_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads, Error *err);

// path_is_directory: whether "path" names a directory (a --model that is
// one is a Hugging Face GPT-2's).
bool path_is_directory(const char *path);

// run_model_path: what a --model that names a run directory means. A
// directory that holds model.safetensors and no config.json is a tinygpt
// run (`train --out DIR`): it stands for DIR/model.safetensors, written
// into "buf" [cap]. Anything else (a checkpoint, a Hugging Face GPT-2
// directory, a path that is not there) is "path" itself, for the loader
// to read or to refuse. The commands that take --model call it first.
const char *run_model_path(const char *path, char *buf, size_t cap);

#endif
