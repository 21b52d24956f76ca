// checkpoint.h: the model as a .safetensors file, and AdamW's state as
// another beside it: what tinygpt's files hold, in the container of
// io/safetensors.h.
//
// Reading order: file 27, after safetensors.h and the tokenizer.
//
// model.safetensors: the parameter table's tensors (model.h), F32, under
// their names, in table order, and a "__metadata__" of strings that says
// what the weights alone cannot: the tokenizer (a char model's "vocab"; a
// bpe model's "tokenizer": "bpe" and "merges"; a gpt2 model's "tokenizer":
// "gpt2" and the text of GPT-2's two files, "gpt2_vocab" and "gpt2_merges",
// gpt2_tokenizer.h), vocab_size, n_embd, n_head,
// block_size, arch ("card" or "gpt"), n_layer (the number of blocks; 1 for
// card), no_layernorm, no_mlp and no_residual ("1", only for a gpt with
// that part removed), norm ("rmsnorm", only for a gpt that swapped its
// LayerNorms for it), mlp ("relu2" or "swiglu", only for a gpt whose MLP is one),
// untied_head ("1", only for a gpt with a head.weight of its own), pos
// ("rope", only for a gpt with rotary positions and no pos_emb), qk_norm
// ("1", only for a gpt that normalises its heads' q and k), dropout, step, and "format": "tinygpt-2". From
// `train`, also the run's settings and state (settings.h), which only
// --resume reads. A file without "arch" (saved before gpt existed) is a
// card model with one block; one without "tokenizer" is a char model.
// docs/checkpoints.md, "Metadata keys", lists every key.
#ifndef TINYGPT_CHECKPOINT_H
#define TINYGPT_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "model.h"
#include "optimizer.h"
#include "safetensors.h"
#include "tokenizer.h"

// The value of "__metadata__"."format"; bump it if the meaning of the file
// changes. Version 2 carries a checksum (safetensors.h); files of version
// 1, written before it, have none and still load.
#define CHECKPOINT_FORMAT "tinygpt-2"
#define CHECKPOINT_FORMAT_1 "tinygpt-1"
// The same for AdamW's state (optimizer_state_save).
#define OPTIMIZER_FORMAT "tinygpt-optimizer-2"
#define OPTIMIZER_FORMAT_1 "tinygpt-optimizer-1"

// checkpoint_save: parameters, tokenizer and "step" to "path", whole or
// not at all (safetensors_save). checkpoint_save_run: the same, with the
// run's own metadata "run" (its settings and state, from train) after the
// model's keys.
bool checkpoint_save(const Model *m, const Tokenizer *tok, long step, const char *path, Error *err);
bool checkpoint_save_run(const Model *m, const Tokenizer *tok, long step, const Metadata *run, const char *path,
                         Error *err);

// checkpoint_load: validate "path" completely (header size, JSON, the
// architecture and n_layer, names: exactly the tensors param_table gives for
// the metadata's config, dtypes, shapes, offsets inside the file, metadata
// agreeing with the shapes, vocabulary, finite weights) and only then build
// "m" (model_init with "max_batch" and "with_grads"), its weights, and
// "tok". "*step" gets the saved step (may be NULL). On failure nothing is
// left allocated and "err" says what is wrong.
bool checkpoint_load(const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads, long *step,
                     Error *err);
// checkpoint_load_stream: the same on "f", a stream open for reading that
// it closes, "path" naming it in messages (a NULL "f" could not be opened,
// "err" saying why: safetensors_open_stream). checkpoint_read_header_stream
// and optimizer_state_load_stream below are the same for theirs: how train
// reads under mpirun, where "f" may be rank 0's bytes in memory (dist_fopen).
bool checkpoint_load_stream(FILE *f, const char *path, Model *m, Tokenizer *tok, int max_batch, bool with_grads,
                            long *step, Error *err);

// What --resume reads before the weights: the model's config and
// tokenizer kind, the step, and every metadata string of the file.
typedef struct {
    ModelConfig config;
    TokenizerKind tokenizer;
    long step;
    Metadata metadata;  // the file's "__metadata__" (the run's settings among them); metadata_free it
} CheckpointHeader;

// checkpoint_read_header: the header steps of checkpoint_load (the config
// checked as it checks it), and the metadata, each value a string. Fails,
// saying to use --init instead, when the file holds no training state (it
// was saved by `sample`'s tests or an older tinygpt: no "batch_rng").
bool checkpoint_read_header(const char *path, CheckpointHeader *h, Error *err);
bool checkpoint_read_header_stream(FILE *f, const char *path, CheckpointHeader *h, Error *err);

// checkpoint_model_metadata: the model's own keys for "cfg" and tokenizer
// "kind", every one of them ("tokenizer", and the no_* parts as "0" or "1",
// which a saved file leaves out when they say nothing): the values a run's
// settings that shape the model take (settings.h, KEPT_IN_MODEL).
void checkpoint_model_metadata(Metadata *md, const ModelConfig *cfg, TokenizerKind kind);

// What the two files share (checkpoint.c, for optimizer_state.c):
// checkpoint_check_format: the metadata's "format" must be "want", or
// "older" (the version before checksums); the other file of the pair is
// named as the likely mix-up. checkpoint_expectations: what a file's
// tensor messages say about "cfg" (safetensors.h, TensorExpectations).
bool checkpoint_check_format(SafetensorsFile *st, const char *want, const char *older);
TensorExpectations checkpoint_expectations(const ModelConfig *cfg, const char *source, const char *fix,
                                          bool (*name_problem)(SafetensorsFile *, const char *, size_t, bool,
                                                               const void *));

// ---- The optimizer's state: DIR/optimizer.safetensors, next to DIR/model.safetensors ----
// (optimizer_state.c)
//
// The model file stays a model that sample, eval and PyTorch read alone;
// AdamW's moments (as large as the weights, twice) go in a file of their own,
// also a standard safetensors file. It holds, all F32 with the parameter's
// shape: "exp_avg.<name>" (m) for every parameter <name> of param_table, in
// table order, then "exp_avg_sq.<name>" (v) for every one, in the same order
// (torch.optim.AdamW's names for the two moments), so its data section is m's
// buffer followed by v's. Its "__metadata__" strings: "format":
// "tinygpt-optimizer-1", "optimizer": "adamw", "step": the training step the
// state belongs to (the "step" of the model checkpoint saved with it), and
// "updates": how many AdamW updates made it (Optimizer.step, AdamW's t; equal
// to "step" for a run that used AdamW from its first step). With Muon
// ("optimizer": "muon") the AdamW tensors are those of the parameters AdamW
// moves (not the blocks' matrices), followed by "momentum_buffer.<name>" for
// each matrix Muon moves; a tensor's data then sits in file order, not at its
// parameter's offset.

// optimizer_state_save: opt's moments and update count, belonging to the
// weights of training step "step", to "path". Written as checkpoints are
// (path.tmp, fsync, rename, directory sync), so a crash leaves the old file
// or the new one. "opt" must be AdamW or Muon, built for "m" (optimizer_init).
bool optimizer_state_save(const Optimizer *opt, const Model *m, long step, const char *path, Error *err);

// optimizer_state_load: validate "path" completely against m's parameter
// table (header size, JSON, format, names: none missing, none extra; shapes;
// dtypes; offsets inside the file and not overlapping; finite values,
// exp_avg_sq >= 0; updates >= 0) and only then fill opt->m, opt->v and
// opt->step, and Muon's opt->momentum ("opt" must be AdamW or Muon, optimizer_init'ed for "m"). "*step" gets
// the saved training step (may be NULL). On failure "opt" and "*step" are
// unchanged, nothing stays allocated, and "err" is one line naming the file,
// what is wrong and what to do.
bool optimizer_state_load(Optimizer *opt, const Model *m, const char *path, long *step, Error *err);
bool optimizer_state_load_stream(Optimizer *opt, const Model *m, FILE *f, const char *path, long *step, Error *err);

#endif
