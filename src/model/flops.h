// flops.h: the arithmetic a model does per token, counted from its sizes:
// what turns tokens/s into GFLOP/s, and so into a share of the CPU's peak
// (fma_peak.h).
//
// Reading order: file 21b, with fma_peak.h, after the model (model.h, file 12)
// whose products it counts. It implements the count docs/speed-and-memory.md
// states and `make bench` (scripts/torch_reference.py,
// forward_flops_per_token) uses, so the GFLOP/s of both agree. It leaves
// out what is not a product (embeddings, LayerNorm, GELU, softmax,
// dropout, the loss, the optimizer's update): a few FLOPs per number each,
// where a product spends C or more, so few FLOPs, though not little time.
//
// The count, per token (a multiply-add is 2 FLOPs; shapes in model.h):
//   each block:  qkv [C -> 3C]           2 x 3C^2
//                attn.proj [C -> C]      2 x C^2
//                mlp.fc [C -> 4C]        2 x 4C^2   (gpt; not --no-mlp)
//                mlp.proj [4C -> C]      2 x 4C^2   (gpt; not --no-mlp)
//                scores q.k and the weighted sum of v: a token at position
//                t sees t + 1 positions, (T + 1) / 2 on average, and each
//                costs C multiply-adds (over all heads) in each of the two:
//                                        2 x 2C (T + 1) / 2 = 2C (T + 1)
//   the head:    [C -> V]                2 x CV
// so card's forward is 8C^2 + 2C(T+1) + 2CV and the gpt's is
// L (24C^2 + 2C(T+1)) + 2CV, with T the model's block_size, the context
// training runs at.
//
// A training step is 3 x the forward: each product y = x W of the forward
// has two in the backward (dx = dy W^T and dW = x^T dy), of the same size.
#ifndef TINYGPT_FLOPS_H
#define TINYGPT_FLOPS_H

#include "model.h"

// model_forward_flops_per_token: the FLOPs of one token's forward pass
// through a model of "cfg" (the count above). A whole number, exact in a
// double for any model model_check_config accepts.
double model_forward_flops_per_token(const ModelConfig *cfg);

// model_train_flops_per_token: the FLOPs of one token of a training step,
// forward and backward: 3 x model_forward_flops_per_token. GFLOP/s of a run
// = this x tokens/s / 1e9.
double model_train_flops_per_token(const ModelConfig *cfg);

#endif
