// sample.h: generate text from a trained model, one character at a time.
//
// Reading order: file 19. To generate, the model reads the context (the
// prompt plus everything generated so far), turns the logits at the last
// position into probabilities, and draws the next character from them.
//
// The context window: the model sees at most block_size (T) characters.
// When the text outgrows the window, the window drops its oldest half and
// keeps the newest T/2 characters (rounded up), then grows again. That is
// what lets the key/value cache work: within one window, each new character
// only adds one row to every block's cached activations (O(L (T*C + C*C))
// work for L blocks), and only a jump of the window (every T/2 characters)
// recomputes them, so the average cost stays O(L (T*C + C*C)) per character. (A window that slid by one
// character every time would change every position's embedding, and so
// every cached key and value, at every step.) Without the cache (--no-cache),
// each step runs a full forward pass over the same window: the same
// numbers, bit for bit, T/2 to T times the work.
#ifndef TINYGPT_SAMPLE_H
#define TINYGPT_SAMPLE_H

#include <stdbool.h>

#include "model.h"
#include "rng.h"

// sample_token: pick a token id from logits[V].
//   temperature 0: the most likely token (greedy; ties go to the lowest id).
//   otherwise:     probs = softmax(logits / temperature); with top_k > 0 only
//                  tokens whose logit is at least the k-th largest can be drawn.
// "scratch" holds V floats. Consumes one rng draw unless greedy.
int sample_token(const float *logits, int V, float temperature, int top_k, Rng *rng, float *scratch);

// A text being generated, and the window of it the model sees.
typedef struct {
    Model *model;      // built with max_batch 1
    int *tokens;       // [capacity] the prompt and everything generated so far
    int len, capacity;
    int window_start;  // the model sees tokens[window_start, len)
    int cached;        // with the cache: positions of the window already computed
    bool use_cache;
    TransposedWeights weights_t;  // with the cache: the model's weights, transposed once
} Generator;

// generator_init: an empty text of up to "capacity" tokens; generator_free.
void generator_init(Generator *g, Model *m, int capacity, bool use_cache);
void generator_free(Generator *g);
// generator_push: append a token (the prompt's, or a generated one).
void generator_push(Generator *g, int token);
// generator_logits: logits[V] for the token after the text so far (at least
// one token pushed). Valid until the next call.
const float *generator_logits(Generator *g);

// cmd_sample: the `tinygpt sample` command.
int cmd_sample(int argc, char **argv);

#endif
