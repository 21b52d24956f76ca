// eval.h: the `tinygpt eval` command: how well a model predicts a text.
//
// Reading order: file 30. It cuts the text into consecutive windows of T+1
// tokens overlapping by one: window i reads tokens i*T .. i*T+T-1 and
// predicts tokens i*T+1 .. i*T+T, for every full window. The result is the
// mean cross-entropy in nats per predicted token and the perplexity
// exp(loss): the model is as unsure as a uniform choice among that many
// tokens. It also gives the loss in bits per byte of the text, which
// compares a char model with a bpe one (see bits_per_byte in data.h).
#ifndef TINYGPT_EVAL_H
#define TINYGPT_EVAL_H

#include <stddef.h>

#include "model.h"

// evaluate_tokens: the mean loss over every full window of tokens[n], in
// batches of up to m->max_batch windows, dropout off; "*predicted" gets the
// number of predicted positions (0 when n < T + 1, and the loss is NaN).
double evaluate_tokens(Model *m, const int *tokens, size_t n, size_t *predicted);

int cmd_eval(int argc, char **argv);

#endif
