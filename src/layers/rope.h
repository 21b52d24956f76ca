// rope.h: rotary position embeddings (`--pos rope`): each head's queries
// and keys rotated by angles that grow with the position.
//
// Reading order: file 10b, after mlp.h, the last of the layers the model
// calls. Su et al. (2021, "RoFormer") replace the learned position table
// (pos_emb, added to the stream once, at the bottom) with a rotation of q
// and k inside every attention layer. Cut a head's HS channels into HS/2
// pairs; pair i of the vector at position t turns by the angle
//   theta(t, i) = t * base^(-2i/HS),   base 10000,  i = 0 .. HS/2 - 1
// (pair 0 fastest, one radian a position; the last slowest). A rotation
// keeps lengths, and two rotations compose by adding their angles, so
// q_t . k_j, the score, depends on the positions only through t - j:
// attention sees how far apart two tokens are, not where they are.
//
// Which channels make a pair: the GPT-NeoX / LLaMA (Hugging Face) "half
// split", pair i = channels (i, i + HS/2) of the head, not the original
// paper's interleaved (2i, 2i + 1). Both are the same model up to an order
// of the channels; the weights of one do not load as the other.
//   1. x1 = x[i], x2 = x[i + HS/2],  c = cos theta(t, i), s = sin theta(t, i)
//   2. y[i]        = x1 c - x2 s
//      y[i + HS/2] = x1 s + x2 c
// v is not rotated; nor is anything outside attention. No parameters.
//
// One version, plain loops, that training and `make REFERENCE=1` both run.
// Each angle is computed from t and i alone (cosf, sinf of a float), so a
// row alone (sampling) gives the bits it gives inside a batch (training).
#ifndef TINYGPT_ROPE_H
#define TINYGPT_ROPE_H

#define ROPE_BASE 10000.0f

// In place on the q and k parts of qkv[N,3C] (columns [0,C) q, [C,2C) k,
// each NH heads of HS = C/NH channels; v, [2C,3C), is left as it is): row
// r is position first_pos + r % T, for N rows of sequences of T positions.
// HS must be even.
void rope_forward(float *qkv, int N, int T, int first_pos, int C, int NH);

// Backward, in place on dqkv[N,3C] (derived in rope.c): the gradient of
// the rotated q and k becomes that of the unrotated ones, by the opposite
// rotation:
//   dx1 =  dy1 c + dy2 s
//   dx2 = -dy1 s + dy2 c
// The v part is left as it is.
void rope_backward(float *dqkv, int N, int T, int first_pos, int C, int NH);

#endif
