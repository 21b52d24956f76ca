// sample.h: generate text from a trained model, one character at a time.
//
// Reading order: file 14. To generate, the model reads the context (the
// prompt plus everything generated so far, at most block_size characters:
// older ones slide out), turns the logits at the last position into
// probabilities, and draws the next character from them.
#ifndef TINYGPT_SAMPLE_H
#define TINYGPT_SAMPLE_H

#include "model.h"
#include "rng.h"

// sample_token: pick a token id from logits[V].
//   temperature 0: the most likely token (greedy; ties go to the lowest id).
//   otherwise:     probs = softmax(logits / temperature); with top_k > 0 only
//                  tokens whose logit is at least the k-th largest can be drawn.
// "scratch" holds V floats. Consumes one rng draw unless greedy.
int sample_token(const float *logits, int V, float temperature, int top_k, Rng *rng, float *scratch);

// next_token_logits: run the model on the last min(len, block_size) tokens of
// "context" and return the logits [V] for the position after them. They live
// in m->acts and stay valid until the next forward pass.
const float *next_token_logits(Model *m, const int *context, int len);

// cmd_sample: the `tinygpt sample` command.
int cmd_sample(int argc, char **argv);

#endif
