// crossentropy.h: softmax over the vocabulary + cross-entropy loss.
//
// Reading order: file 6, the model's last layer. For each of the N = B*T
// positions, logits[n,:] scores every possible next token:
//   probs[n,v]  = exp(logits[n,v]) / sum_u exp(logits[n,u])
//   losses[n]   = -log probs[n, target[n]]
//               = logsumexp(logits[n,:]) - logits[n, target[n]]
//   loss        = mean of losses over the N positions
// The second form of losses stays finite even when probs[n,target] would
// underflow to 0 in float32 (logits of +-1e4, say).
#ifndef TINYGPT_CROSSENTROPY_H
#define TINYGPT_CROSSENTROPY_H

#include <stddef.h>

// probs[N,V], losses[N], logits[N,V], targets[N]; returns the mean loss.
// probs may be logits itself: the softmax is then written over the logits
// (each row's target logit is read first). Training does that (model.c):
// at GPT-2's V = 50257, a [B,T,V] buffer for a batch of 4 x 256 is 206 MB,
// and the logits are not needed once the loss has them.
// The definition as plain loops (crossentropy.c), with libm's expf (the
// same on softmax.h's rows, which training runs, is in fast.h):
float crossentropy_forward_reference(float *losses, float *probs, const float *logits, const int *targets, int N,
                                     int V);

// Softmax and cross-entropy together have a famously simple gradient
// (derived in crossentropy.c):
//   dlogits[n,v] = (probs[n,v] - [v == target[n]]) / N
// It is written, not added to: the logits feed only this layer, so their
// gradient has one source. So is every layer's input gradient but the
// norms' (LayerNorm's and RMSNorm's), whose input, the residual stream,
// also feeds the skip path (layernorm.h, rmsnorm.h); gradients of
// parameters are added to (see
// model_zero_grad). dlogits may be probs itself: each number is read
// once, before its gradient is written over it.
//
// "count" is the number of positions the loss is the mean of: N when these
// N rows are the whole batch; more when they are one part of it (a
// micro-batch of --grad-accum, one process's rows under mpirun), so that
// the parts' gradients add up to the whole batch's.
void crossentropy_backward(float *dlogits, const float *probs, const int *targets, int N, int V, size_t count);

#endif
