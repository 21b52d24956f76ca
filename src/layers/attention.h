// attention.h: multi-head causal self-attention with dropout on the weights.
//
// Reading order: file 5, the heart of the model. For every head h and every
// position t, with q, k, v the head's HS channels of qkv:
//   1. scores[t,j]  = q_t . k_j / sqrt(HS)        how well key j answers query t
//   2. mask:          scores[t,j] = -inf for j > t (a position may not read the future)
//   3. weights[t,:] = softmax(scores[t,:])         non-negative, sums to 1
//   4. dropout:       each weight zeroed with probability p, kept ones scaled by 1/(1-p)
//   5. out_t        = sum over j of dropped[t,j] * v_j
// and the heads' outputs are concatenated back into C channels.
//
// Whether weight (b,h,t,j) is dropped is a pure function of the step's
// dropout_key and the weight's flat index ((b*NH + h)*T + t)*T + j (see
// dropout_uniform in rng.h), so every version below, on any number of
// threads, drops exactly the same weights.
//
// Two versions, as in linear.h:
// - attention_*_reference (attention.c): the five steps as written, one dot
//   product at a time, recomputing the dropout mask where it is needed, and
//   the backward derived. Read these now.
// - attention_forward / attention_backward (fast.h; attention_fast.c, file 19): the
//   same math arranged so no inner loop stores to memory: the T x T
//   products (scores, and their gradient) run on matmul.h's register tiles
//   (matmul_tile_rows) over each head's keys and values transposed
//   ([HS,T]), only at or left of the diagonal; the T x HS products (the
//   weighted sum of values and three gradients) on tile.h's tiles directly,
//   several rows at a time; the dropout factors are computed once per step
//   and kept multiplied in, as the weights after dropout, which the
//   weighted sum and the backward read. Tests check that the two versions
//   agree.
#ifndef TINYGPT_ATTENTION_H
#define TINYGPT_ATTENTION_H

#include <stdint.h>

// attn_out[B,T,C], attn_weights[B,NH,T,T] (softmax before dropout; zero above
// the diagonal), qkv[B,T,3C] (channels [0,C) q, [C,2C) k, [2C,3C) v; head h
// uses channels [h*HS, (h+1)*HS) of each). dropout_p = 0 turns dropout off;
// weight i's mask is dropout_factor(dropout_key, dropout_first + i) (rng.h),
// "dropout_first" the flat index of weights[0,0,0,0] in the whole batch's
// tensor: 0, or, for a part of a batch, its first row times NH*T*T.
void attention_forward_reference(float *attn_out, float *attn_weights, const float *qkv, int B, int T, int C,
                                 int NH, float dropout_p, uint64_t dropout_key, uint64_t dropout_first);

// Backward, the five steps in reverse (derived in attention.c):
// dqkv[B,T,3C] = gradients of q, k, v (written, not added to: see
// crossentropy.h); dattn_out[B,T,C] is the incoming
// gradient; dweights[B,NH,T,T] is scratch for the gradient of the weights:
// the reference leaves dloss/dweights (before dropout) in it; the fast
// version uses one T x T slot of it per thread, for dloss/dweights and then
// dloss/dscores of the head at hand, and leaves the rest untouched.
void attention_backward_reference(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                                  const float *attn_weights, int B, int T, int C, int NH, float dropout_p,
                                  uint64_t dropout_key, uint64_t dropout_first);

#endif
