// eval.h: the `tinygpt eval` command: how well a model predicts a text.
//
// Reading order: file 36. It cuts the text into consecutive windows of T+1
// tokens overlapping by one: window i reads tokens i*T .. i*T+T-1 and
// predicts tokens i*T+1 .. i*T+T, for every full window. The result is the
// mean cross-entropy in nats per predicted token and the perplexity
// exp(loss): the model is as unsure as a uniform choice among that many
// tokens. It also gives the loss in bits per byte of the text, which
// compares a char model with a bpe one (see bits_per_byte in data.h).
// --split val scores only the validation split of the text the model
// trained on, with the --val-fraction its checkpoint records. On a
// terminal, a progress line on stderr shows how far it is.
//
// Every result it prints is a number: a loss that is not finite, or a
// character a char model does not know, is an error (exit 1), and a
// perplexity too large for a double is null in JSON (which has no
// infinity), so --json always prints valid JSON.
#ifndef TINYGPT_EVAL_H
#define TINYGPT_EVAL_H

#include <stddef.h>

#include "model.h"

// What eval scores (--split): every full window of the text, or only those
// of its validation split as train cut it (the last floor(n_chars *
// val_fraction) characters; bpe encodes them on their own, as train does).
// EVAL_SPLIT_NAMES: "all" and "val", NULL-terminated.
typedef enum { EVAL_ALL, EVAL_VAL } EvalSplit;
extern const char *const EVAL_SPLIT_NAMES[];

// EvalProgress: told after each batch that "done" of "total" windows are
// scored ("ctx" is the caller's).
typedef void (*EvalProgress)(size_t done, size_t total, void *ctx);

// evaluate_tokens: the mean loss over every full window of tokens[n], in
// batches of up to m->max_batch windows, dropout off; "*predicted" gets the
// number of predicted positions (0 when n < T + 1, and the loss is NaN).
// "progress" (may be NULL) is called after every batch.
double evaluate_tokens(Model *m, const int *tokens, size_t n, size_t *predicted, EvalProgress progress, void *ctx);

int cmd_eval(int argc, char **argv);

#endif
