// encoder.h: token embedding + learned positional embedding.
//
// Reading order: file 3, the model's first layer. Each token id selects a
// row of tok_emb (what the token is); each position t adds row t of pos_emb
// (where it is). Attention by itself is blind to order: pos_emb is the only
// way the model can tell "ab" from "ba" (but for a gpt with --pos rope,
// which passes no pos_emb and rotates q and k by position instead: rope.h).
#ifndef TINYGPT_ENCODER_H
#define TINYGPT_ENCODER_H

// encoded[b,t,:] = tok_emb[inputs[b,t], :] + pos_emb[t, :]
// encoded[B,T,C], inputs[B,T], tok_emb[V,C], pos_emb[>=T,C] (NULL: no position table, nothing added)
void encoder_forward(float *encoded, const int *inputs, const float *tok_emb, const float *pos_emb, int B,
                     int T, int C);

// The forward pass copies rows, so the gradient flows back to the same rows
// (derived in encoder.c):
// dtok_emb[inputs[b,t], :] += dencoded[b,t,:];  dpos_emb[t, :] += dencoded[b,t,:]
// A token that appears several times collects the sum of its gradients.
// dpos_emb NULL: no position table (--pos rope), so no gradient for it.
void encoder_backward(float *dtok_emb, float *dpos_emb, const float *dencoded, const int *inputs, int B, int T,
                      int C);

#endif
