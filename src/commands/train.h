// train.h: the `tinygpt train` command: the training loop.
//
// Reading order: file 35. Each step: draw a batch, run the model forward to
// get the loss, zero the gradients, run it backward, and move every weight
// a little against its gradient (optimizer.h: SGD, AdamW or Muon). Every
// --eval-interval steps it measures the loss on held-out validation text,
// which is the honest measure: the training loss can fall by memorising.
#ifndef TINYGPT_TRAIN_H
#define TINYGPT_TRAIN_H

int cmd_train(int argc, char **argv);

#endif
