// fast.h: the fast twins of the layers, declared: the same math as each
// layer's _reference functions, arranged for speed, which training runs
// (`make REFERENCE=1` trains with the references instead).
//
// Reading order: file 9d. A learner skips it: the layers' headers (files
// 4-9) hold the math and the loops; the model calls the functions below
// through which_kernels.h (file 12). Their bodies come in the second part
// of the reading order (files 17-21), each *_fast.c held to its reference
// by the tests.
#ifndef TINYGPT_FAST_H
#define TINYGPT_FAST_H

#include <stddef.h>
#include <stdint.h>

// ---- Linear (linear.h; linear_fast.c, file 17) -----------------------------

// Fast versions (linear_fast.c), the same sums as the reference's. The
// forward reads the weight as it lies, [OC,C], turning it into the engine's
// panels as it goes (matmul_turned in matmul.h); for fewer rows than the
// engine's register tile (sampling's one) it runs linear_forward_rows.
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);
void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC);
// linear_backward's two halves, for a caller with work between them
// (mlp_backward): dinp alone, then dweight and dbias, each with
// linear_backward's bits. (linear_backward runs the two products in one
// parallel region: one start and one wait of the threads, not two.)
void linear_backward_input(float *dinp, const float *dout, const float *weight, int N, int C, int OC);
void linear_backward_params(float *dweight, float *dbias, const float *dout, const float *inp, int N, int C, int OC);
// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC], exactly as linear_forward
// (every output the same chain of multiply-adds), one row at a time: each
// weight is read once a row, where the engine would copy all of it first.
void linear_forward_rows(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC);

// out[N,OC] = inp[N,C] @ weight_t[C,OC] + bias[OC], for a caller that holds
// the weight transposed already: Muon's products (optimizer.c) are plain
// a @ b. The engine reads weight_t where it lies.
void linear_forward_transposed(float *out, const float *inp, const float *weight_t, const float *bias, int N, int C,
                               int OC);

// weight_t[C,OC] = weight[OC,C]^T: not used by the layer itself, but where a
// matrix must be turned (Muon's tall matrices, GPT-2's Conv1D weights,
// which Hugging Face stores [in, out]). Inside a parallel region its
// threads share the work, with no barrier of their own (the region's end
// waits for it); outside one, the calling thread does it all.
void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC);

// ---- Attention (attention.h; attention_fast.c, file 19) --------------------

// The fast forward also fills:
//   dropped_weights[B,NH,T,T] P, the weights after dropout: attn_weights x
//                             0 (dropped) or 1/(1-p) (kept), zero above the
//                             diagonal; the fast backward reads it (for
//                             dV = P^T dOut, and for the factors: a weight is
//                             kept where P is not 0); unused when dropout_p = 0
//   keys_t[B,NH,HS,T]         scratch: each thread transposes the head at hand's
//                             keys into one [HS,T] slot of it (slot i,j = k_j[i]),
//                             which the scores' tiles read; the rest is untouched
//                             (sampling's key cache is the same tensor, laid out
//                             by cache_key)
void attention_forward(float *attn_out, float *attn_weights, float *dropped_weights, float *keys_t,
                       const float *qkv, int B, int T, int C, int NH, float dropout_p, uint64_t dropout_key,
                       uint64_t dropout_first);
// transpose_head: keys_t/values_t of head h of one sequence (qkv_b = its
//   [T,3C] slice), positions [first, last); each is a [HS,T] slice, and
//   either may be NULL (not wanted).
void transpose_head(float *keys_t, float *values_t, const float *qkv_b, int first, int last, int T, int C, int HS,
                    int h);
// For a forward pass one position at a time (sampling with a key/value
// cache, model.h), the same steps in two pieces:
// cache_key: sampling's key/value cache keeps the values in qkv and each
//   head's keys in keys_cache[NH, HS, T], in blocks of positions (see
//   attention_fast.c): this adds position t's key of head h (from qkv[T,3C]).
// attention_forward_position: steps 1-3 and 5 (no dropout: sampling) for
//   position t of one sequence, head h, reading its keys 0..t from
//   keys_cache and their values from qkv[T,3C] itself. The head's HS
//   outputs go in out_row[C] (at h * HS) and its weights in weights_row[T]
//   (entries 0..t; the rest is scratch): one row each, wherever the caller
//   keeps it. Each number is the one attention_forward gives row t.
void cache_key(float *keys_cache, const float *qkv, int h, int t, int T, int C, int NH);
void attention_forward_position(float *out_row, float *weights_row, const float *keys_cache, const float *qkv, int h,
                                int t, int T, int C, int NH);

// The fast backward: "dweights" as the reference's, one T x T slot per
// thread; "values_t" [B,NH,HS,T] likewise, one [HS,T] slot per thread for
// the head at hand's values transposed, which it fills itself (a copy per
// block kept from the forward pass would cost L times the memory).
void attention_backward(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                        const float *attn_weights, const float *dropped_weights, float *values_t, int B, int T,
                        int C, int NH, float dropout_p);

// ---- Softmax and the loss (crossentropy.h; crossentropy_fast.c, file 20) ---

// The same on softmax.h's rows (crossentropy_fast.c, file 20), which
// training runs; tests hold the two together.
float crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int N, int V);

// softmax_forward (crossentropy_fast.c): probs[N,V] = softmax(logits[N,V])
// row by row, without a loss (`tinygpt walkthrough` uses it; sampling has
// its own, in sample.c).
void softmax_forward(float *probs, const float *logits, int N, int V);

// ---- LayerNorm (layernorm.h; layernorm_fast.c, file 18) --------------------

// The fast versions (layernorm_fast.c, file 18), which training runs: the
// same, with each row's sums in 16 lanes (another order of additions, so
// they agree to float rounding, not to the bit) and rows and channels split
// over threads; tests hold the two together, and `make REFERENCE=1` trains
// with the reference ones.
void layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *weight, int N, int C);
void layernorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                        const float *mean, const float *rstd, int N, int C);

// ---- RMSNorm and QK-norm (rmsnorm.h; rmsnorm_fast.c, file 18b) ------------

// The fast versions (rmsnorm_fast.c), which training runs: the reference's
// numbers to the bit (each row's sum the same one chain, several rows'
// chains at once in a vector's lanes), the same arguments.
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C);
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C);
void qk_norm_forward(float *qkv, float *rstd, int N, int C, int NH);
void qk_norm_backward(float *dqkv, const float *qkv, const float *rstd, int N, int C, int NH);

// ---- GELU (gelu.h; gelu_fast.c, file 21) -----------------------------------

// The fast versions (gelu_fast.c), which training runs: the forward, and
// the backward together with the forward again, in one pass, for
// mlp_backward, which needs GELU's output once more (the model does not
// keep it) just as it takes the backward: out = gelu(inp) (gelu_forward's
// bits) and dinp = dout * gelu'(inp), Phi(x) computed once for the two.
// dinp may be dout (in place).
void gelu_forward(float *out, const float *inp, size_t n);
void gelu_forward_backward(float *out, float *dinp, const float *inp, const float *dout, size_t n);

// The fast versions (gelu_fast.c): 0.5 (1 + tanh u) is the logistic
// sigmoid of 2u, 1 / (1 + e^(-2u)), which fast_exp_vec (fastexp.h) computes
// a vector at a time. Within 5e-7 max(1, |x|) of the reference forward and
// 2e-6 max(1, |dout|) backward (the tests hold them to that).
void gelu_tanh_forward(float *out, const float *inp, size_t n);
void gelu_tanh_forward_backward(float *out, float *dinp, const float *inp, const float *dout, size_t n);

// ---- SwiGLU (swiglu.h; swiglu_fast.c, file 21a) ---------------------------

// The fast versions (swiglu_fast.c), the reference's formulas on
// fast_exp_vec; the same arguments as swiglu_forward_reference and
// swiglu_backward_reference (dfc_out written, not overlapping dout).
void swiglu_forward(float *out, const float *fc_out, int N, int H);
void swiglu_backward(float *dfc_out, const float *dout, const float *fc_out, int N, int H);

#endif
