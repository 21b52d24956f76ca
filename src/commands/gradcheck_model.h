// gradcheck_model.h: `tinygpt gradcheck`: proves, on a small random model,
// that model_backward computes the gradient of model_forward's loss.
//
// Reading order: file 39, after gradcheck.h (file 14), whose checker it runs, the
// same one the unit tests use. For every parameter tensor, each element is
// nudged by +-h and the loss recomputed; the slope (f(x+h) - f(x-h)) / 2h
// must match the gradient model_backward wrote for that element. A tensor
// passes when every element does (see gradcheck.h for the tolerance).
//
// The model has dropout on, with one fixed mask (a fixed dropout_key), so
// dropout's backward is checked too: for a fixed mask the loss is a smooth
// function of the weights. The command takes every model flag train takes,
// from the same rows of train's settings table (settings.h,
// setting_shapes_model), with train's defaults: with no flags it checks
// the model `tinygpt train` would build (the gpt of the modern recipe),
// small; `--arch card` the card model; `--arch gpt2` GPT-2's biases and
// its tanh GELU; `--norm layernorm --mlp gelu ...` each part a gpt may
// have or lack.
#ifndef TINYGPT_GRADCHECK_MODEL_H
#define TINYGPT_GRADCHECK_MODEL_H

#include <stdint.h>

#include "gradcheck.h"
#include "model.h"
#include "settings.h"

// The sizes of the model checked, unless its flags say otherwise: V=7,
// T=5, C=8, 2 heads, dropout 0.2, and a gpt of GRADCHECK_LAYERS blocks;
// batches of 2. Small, so that the ~1000 forward passes of card take a few
// milliseconds. GRADCHECK_MODEL is card at these sizes.
enum { GRADCHECK_BATCH = 2, GRADCHECK_CONTEXT = 5, GRADCHECK_LAYERS = 2 };
extern const ModelConfig GRADCHECK_MODEL;

// gradcheck_config: GRADCHECK_MODEL as "arch", with the plain parts
// (LayerNorm, GELU, learned positions, a tied head, nothing removed) and
// "n_layer" blocks for gpt and gpt2; gpt2's GELU is GPT-2's tanh form (its
// config's "gelu_new"). The tests' starting point; `tinygpt gradcheck
// --arch gpt --norm layernorm --mlp gelu --pos learned --tied-head
// --no-qk-norm --layers L` checks the same gpt.
ModelConfig gradcheck_config(Arch arch, int n_layer);

// The weights of a gpt checked (see model_gradcheck_case): U(-0.5, 0.5).
#define GRADCHECK_GPT_WEIGHT 0.5f

// The tolerances for a gpt. GRADCHECK_FLOAT32's atol of 2e-3 is as large as
// many of a gpt's gradients here (0.01 or less), and let through most of the
// error of a broken softmax backward. With atol 2e-4, a step of h = 3e-3
// keeps the error of the finite differences themselves (which grows as h^2
// where a LayerNorm of 8 channels curves sharply, and which failed correct
// gradients with h = 1e-2) under that: measured over 100 seeds each of 1, 2
// and 4 blocks, the correct build used at most 40% of the tolerance, and
// the broken build (see the Makefile) failed on every seed with 2 or 4 blocks.
extern const GradCheckTolerance GRADCHECK_GPT;

// gradcheck_tolerance: GRADCHECK_FLOAT32 for card, GRADCHECK_GPT for gpt and gpt2.
GradCheckTolerance gradcheck_tolerance(Arch arch);

// model_gradcheck_case: build a model of "cfg" for batches of "max_batch"
// rows, with weights, a [B,T] batch and a dropout mask drawn from "seed";
// run forward and backward once; check every parameter tensor against
// finite differences within "tol". results[i] is tensor i of
// param_table(cfg): the caller provides that table's count of them.
// "*loss" (may be NULL) gets the loss at the weights checked. Returns how
// many tensors fail. Runs on one OpenMP thread (a thousand tiny forward
// passes: threads would only add barriers) and puts the thread count back
// afterwards. The unit tests call it too.
//
// The weights: card's are model_init_weights'. gpt's training init, N(0,
// 0.02) with LayerNorm weights 1, does not suit a check: every step h is a
// large part of a weight, the gradients are tiny, and a broken softmax
// backward passed GRADCHECK_FLOAT32 there. So every weight of a gpt (or
// gpt2), LayerNorm weights and biases included, is drawn from U(-GRADCHECK_GPT_WEIGHT,
// GRADCHECK_GPT_WEIGHT) instead. (U(-1, 1) made some correct gradients fail:
// LayerNorm and softmax curve too sharply there for finite differences.)
int model_gradcheck_case(const ModelConfig *cfg, int max_batch, int B, int T, uint64_t seed, GradCheckTolerance tol,
                         GradCheckResult *results, double *loss);

// model_gradcheck: model_gradcheck_case on "cfg" with batches of
// GRADCHECK_BATCH x cfg->block_size and its architecture's tolerances;
// results[param_table(cfg).count].
int model_gradcheck(const ModelConfig *cfg, uint64_t seed, GradCheckResult *results);

// What `tinygpt gradcheck` is asked to check.
typedef struct {
    TrainSettings settings;  // the model's settings as train reads them (its flags, else train's defaults)
    ModelConfig config;      // the model checked: train_model_config of those, at the sizes above unless given
    long seed;               // --seed: the weights, the batch and the dropout mask
} GradCheckRequest;

// gradcheck_request: the request of "argv" (argv[0] is "gradcheck"); a
// usage error (an unknown flag, a flag another setting rules out, sizes
// model_check_config refuses) exits 2, --help prints the flags and exits 0.
GradCheckRequest gradcheck_request(int argc, char **argv);

// cmd_gradcheck: the `tinygpt gradcheck` command: the model as its flags,
// then one line per tensor; exit status 1 if any fails.
int cmd_gradcheck(int argc, char **argv);

#endif
