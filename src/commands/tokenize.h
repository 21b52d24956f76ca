// tokenize.h: the `tinygpt tokenize` command: what the model sees of a text.
//
// Reading order: file 37, after eval.h. With --model it prints a text as
// the model's tokens: each piece between bars, then the ids, so a learner sees
// how a char model spells every letter and a bpe model reads " whale" as one
// token. --model DIR reads GPT-2's own tokenizer from a Hugging Face GPT-2
// directory (gpt2_tokenizer.h) instead of a checkpoint's. With --learn FILE it learns a bpe tokenizer from FILE, as `train
// --tokenizer bpe` does, and says how long learning and encoding took and the
// first merges it made.
#ifndef TINYGPT_TOKENIZE_H
#define TINYGPT_TOKENIZE_H

int cmd_tokenize(int argc, char **argv);

#endif
