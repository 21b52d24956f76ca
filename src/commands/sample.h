// sample.h: generate text from a trained model, one token at a time (a
// character, or a bpe piece).
//
// Reading order: file 29. To generate, the model reads the context (the
// prompt plus everything generated so far), turns the logits at the last
// position into probabilities, and draws the next token from them.
//
// The context window: the model sees at most block_size (T) tokens.
// When the text outgrows the window, the window drops its oldest half and
// keeps the newest T/2 tokens (rounded up), then grows again. That is
// what lets the key/value cache work: within one window, each new token
// only adds one row to every block's cached activations (O(L (T*C + C*C))
// work for L blocks), and only a jump of the window (every T/2 tokens)
// recomputes them, so the average cost stays O(L (T*C + C*C)) per token.
// (A window that slid by one token every time would change every
// position's embedding, and so every cached key and value, at every step.)
// Without the cache (--no-cache), each step runs a full forward pass over
// the same window: the same numbers, bit for bit, T/2 to T times the work.
//
// A model on GPT-2's tokenizer ends a sample when it draws <|endoftext|>,
// the token GPT-2 saw between documents (as Hugging Face's generate ends
// at eos); --past-end-of-text goes on, printing its spelling.
#ifndef TINYGPT_SAMPLE_H
#define TINYGPT_SAMPLE_H

#include <stdbool.h>

#include "model.h"
#include "rng.h"
#include "tokenizer.h"

// How the next token is drawn from the logits, in the order the steps
// apply (as in llama2.c and Hugging Face's generate): temperature, then
// top-k, then top-p.
typedef struct {
    float temperature;  // 0: greedy (the likeliest token, no draw); else logits / temperature
    int top_k;          // > 0: only the k likeliest tokens can be drawn; 0 = off
    float top_p;        // in (0, 1]: only the smallest set of the likeliest tokens whose
                        // probabilities add up to at least top_p; 1 = off
} SamplerConfig;

// sampling_weights: the distribution sample_token draws from when the
// temperature is > 0, unnormalised: weights[V] gets exp((logit - max) /
// temperature) for each token that survives top-k and top-p and 0 for the
// others; returns their sum (divide by it for the probabilities). Top-p
// keeps, besides the smallest set, any token whose weight ties with the
// smallest one kept. "scratch" holds V floats.
double sampling_weights(const float *logits, int V, const SamplerConfig *s, float *weights, float *scratch);

// sample_token: pick a token id from logits[V] as "s" says (greedy ties go
// to the lowest id). "scratch" holds 2V floats. Consumes one rng draw
// unless greedy.
int sample_token(const float *logits, int V, const SamplerConfig *s, Rng *rng, float *scratch);

// A text being generated, and the window of it the model sees.
typedef struct {
    Model *model;      // built with max_batch 1
    int *tokens;       // [capacity] the prompt and everything generated so far
    int len, capacity;
    int window_start;  // the model sees tokens[window_start, len)
    int cached;        // with the cache: positions of the window already computed
    bool use_cache;
} Generator;

// generator_init: an empty text of up to "capacity" tokens; generator_free.
void generator_init(Generator *g, Model *m, int capacity, bool use_cache);
void generator_free(Generator *g);
// generator_reset: empty the text (and the cache) to start another one.
void generator_reset(Generator *g);
// generator_push: append a token (the prompt's, or a generated one).
void generator_push(Generator *g, int token);
// generator_logits: logits[V] for the token after the text so far (at least
// one token pushed). Valid until the next call.
const float *generator_logits(Generator *g);

// sample_line: what `tinygpt sample --seed "seed" --tokens "tokens"` (no
// prompt) prints from the generator's model, as one line for a progress
// report: each newline shown as "↵", into out[cap] (cut short, whole
// characters, if it does not fit), ending where sample would at GPT-2's
// <|endoftext|>. "scratch" holds 2V floats. train calls it at each
// --sample-every step.
void sample_line(Generator *g, const Tokenizer *tok, long seed, int tokens, float *scratch, char *out, size_t cap);

// cmd_sample: the `tinygpt sample` command.
int cmd_sample(int argc, char **argv);

#endif
