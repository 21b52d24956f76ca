// attention.h: multi-head causal self-attention with dropout on the weights.
//
// Reading order: file 7, the heart of the model. For every head h and every
// position t, with q, k, v the head's HS channels of qkv:
//   1. scores[t,j]  = q_t . k_j / sqrt(HS)        how well key j answers query t
//   2. mask:          scores[t,j] = -inf for j > t (a position may not read the future)
//   3. weights[t,:] = softmax(scores[t,:])         non-negative, sums to 1
//   4. dropout:       each weight zeroed with probability p, kept ones scaled by 1/(1-p)
//   5. out_t        = sum over j of dropped[t,j] * v_j
// and the heads' outputs are concatenated back into C channels.
//
// The dropout mask is not stored: element (b,h,t,j) is kept when
// dropout_uniform(dropout_key, ((b*NH + h)*T + t)*T + j) >= p, so backward
// recomputes exactly the mask forward used, for any number of threads.
#ifndef TINYGPT_ATTENTION_H
#define TINYGPT_ATTENTION_H

#include <stdint.h>

// attn_out[B,T,C], attn_weights[B,NH,T,T] (softmax before dropout; zero above
// the diagonal), qkv[B,T,3C] (channels [0,C) q, [C,2C) k, [2C,3C) v; head h
// uses channels [h*HS, (h+1)*HS) of each). dropout_p = 0 turns dropout off.
void attention_forward(float *attn_out, float *attn_weights, const float *qkv, int B, int T, int C, int NH,
                       float dropout_p, uint64_t dropout_key);

// Backward, step by step in reverse (see attention.c):
// dqkv[B,T,3C] += gradients of q, k, v; dweights[B,NH,T,T] receives
// dloss/dweights (before dropout); dattn_out[B,T,C] is the incoming gradient.
void attention_backward(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                        const float *attn_weights, int B, int T, int C, int NH, float dropout_p,
                        uint64_t dropout_key);

#endif
