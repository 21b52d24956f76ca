// gradcheck_model.h: `tinygpt gradcheck`: proves, on a small random model,
// that model_backward computes the gradient of model_forward's loss.
//
// Reading order: after gradcheck.h (file 10), whose checker it runs, the
// same one the unit tests use. For every parameter tensor, each element is
// nudged by +-h and the loss recomputed; the slope (f(x+h) - f(x-h)) / 2h
// must match the gradient model_backward wrote for that element. A tensor
// passes when every element does (see gradcheck.h for the tolerance).
//
// The model has dropout on, with one fixed mask (a fixed dropout_key), so
// dropout's backward is checked too: for a fixed mask the loss is a smooth
// function of the weights.
#ifndef TINYGPT_GRADCHECK_MODEL_H
#define TINYGPT_GRADCHECK_MODEL_H

#include <stdint.h>

#include "gradcheck.h"
#include "model.h"

// The model checked: V=7, T=5, C=8, 2 heads, dropout 0.2; batches of 2.
// Small, so that the ~1000 forward passes take a few milliseconds.
enum { GRADCHECK_BATCH = 2, GRADCHECK_CONTEXT = 5 };
extern const ModelConfig GRADCHECK_MODEL;

// model_gradcheck_case: build a model of "cfg" for batches of "max_batch"
// rows, with weights, a [B,T] batch and a dropout mask drawn from "seed";
// run forward and backward once; check every parameter tensor against
// finite differences within "tol". results[i] is tensor i of the parameter
// table (model.h); "*loss" (may be NULL) gets the loss at the weights
// checked. Returns how many tensors fail. Runs on one OpenMP thread (a
// thousand tiny forward passes: threads would only add barriers) and puts
// the thread count back afterwards. The unit tests call it too.
int model_gradcheck_case(const ModelConfig *cfg, int max_batch, int B, int T, uint64_t seed, GradCheckTolerance tol,
                         GradCheckResult results[NUM_PARAM_TENSORS], double *loss);

// model_gradcheck: model_gradcheck_case on GRADCHECK_MODEL with batches of
// GRADCHECK_BATCH x GRADCHECK_CONTEXT and the float32 tolerances.
int model_gradcheck(uint64_t seed, GradCheckResult results[NUM_PARAM_TENSORS]);

// cmd_gradcheck: the `tinygpt gradcheck` command: one line per tensor,
// exit status 1 if any fails.
int cmd_gradcheck(int argc, char **argv);

#endif
