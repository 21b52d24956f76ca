// mlp.h: the transformer block's MLP: Linear(C, 4C) -> GELU -> Linear(4C, C),
// or with `--mlp relu2` ReLU^2 in GELU's place, or with `--mlp swiglu`
// Linear(C, 2H) -> SwiGLU -> Linear(H, C).
//
// Reading order: file 10, after gelu.h, relu2.h and swiglu.h, the last of the block's
// layers. Attention moves information between positions; the MLP then works
// on each position alone, widening its C numbers to a hidden layer of 4C,
// bending them with the activation, and projecting back to C:
//   1. fc_out[N,4C]  = inp[N,C] @ fc_weight[4C,C]^T       (nanoGPT's c_fc)
//   2. act_out[N,4C] = gelu(fc_out), or relu2(fc_out)
//   3. out[N,C]      = act_out @ proj_weight[C,4C]^T      (nanoGPT's c_proj)
// In gpt neither linear layer has a bias (nanoGPT with bias=False); in
// gpt2 both have one (fc_bias [4C] added in step 1, proj_bias [C] in step
// 3), which the calls take as NULL or not, as linear.h's do. Both passes
// are the fast linear.h and gelu.h (or relu2.h) calls in sequence; the tests
// hold them to the same steps built from the _reference versions.
//
// SwiGLU (swiglu.h, LLaMA's MLP) has three matrices: gate and up, both
// [H,C], and down, [C,H]. gate and up are kept one after the other, so
// they are one [2H,C] matrix and step 1 is one product, as q, k and v are;
// step 2 is silu(gate half) * (up half), [N,H]; step 3 is down. Names:
//   1. fc_out[N,2H]  = inp @ [gate_proj; up_proj]^T     (fc_weight [2H,C])
//   2. act_out[N,H]  = silu(fc_out[:, :H]) * fc_out[:, H:]
//   3. out[N,C]      = act_out @ down_proj[C,H]^T       (proj_weight)
// Three matrices of H x C hold as many numbers as GELU's two of 4C x C
// when H = 8C/3. Like LLaMA, H is 8C/3 rounded down to a whole number,
// then up to a multiple (LLaMA's 256, a GPU's tile; here 16, simd.h's
// vector of floats, so each row of the hidden layer is whole vectors):
// for C = 128, 341 -> 352, 3 * 352 * 128 = 135168 parameters a block
// against GELU's 131072 (3% more).
#ifndef TINYGPT_MLP_H
#define TINYGPT_MLP_H

// The activation of step 2: GELU (gelu.h), ReLU^2 (relu2.h, the modern
// recipe's `--mlp relu2`), SwiGLU, or GELU's tanh approximation (gelu.h,
// GPT-2's, `--mlp gelu_tanh`).
typedef enum { MLP_GELU = 0, MLP_RELU2 = 1, MLP_SWIGLU = 2, MLP_GELU_TANH = 3 } MlpKind;

// The multiple SwiGLU's hidden width is rounded up to (see above).
#define MLP_SWIGLU_MULTIPLE 16

// mlp_hidden: H, the width of act_out: 4C, or with SwiGLU
// MLP_SWIGLU_MULTIPLE * ceil(floor(8C/3) / MLP_SWIGLU_MULTIPLE).
int mlp_hidden(int C, MlpKind act);
// mlp_fc_width: the width of fc_out (the rows of fc_weight): H, or with
// SwiGLU 2H (gate, then up).
int mlp_fc_width(int C, MlpKind act);
// mlp_dhidden_width: the width of mlp_backward's scratch dhidden: H, or with
// SwiGLU 3H (the gradient of fc_out, [N,2H], then that of act_out, [N,H]).
int mlp_dhidden_width(int C, MlpKind act);

// fc_out[N,4C]  = inp[N,C] @ fc_weight[4C,C]^T + fc_bias[4C]
// act_out[N,4C] = gelu(fc_out) (or relu2(fc_out), as "act" says)
// out[N,C]      = act_out @ proj_weight[C,4C]^T + proj_bias[C]
// (either bias NULL: none)
// (with SwiGLU: fc_out[N,2H], act_out[N,H], fc_weight [2H,C], proj_weight [C,H])
// fc_out and act_out are written; backward reads fc_out.
void mlp_forward(float *out, float *fc_out, float *act_out, const float *inp, const float *fc_weight,
                 const float *fc_bias, const float *proj_weight, const float *proj_bias, int N, int C, MlpKind act);

// Backward, given dout[N,C], the steps in reverse:
//   dinp[N,C] written; dfc_weight[4C,C] and dproj_weight[C,4C] added to, and
//   dfc_bias[4C] and dproj_bias[C] when not NULL (a model with biases).
//   act_out[N,4C] is recomputed here from fc_out (the model does not keep one per layer: memory for compute, as
//   llm.c does), dhidden[N,4C] is scratch (the gradient of act_out, then in place of fc_out; with SwiGLU
//   [N, mlp_dhidden_width]: fc_out's gradient in its first N*2H floats, act_out's in the N*H after).
void mlp_backward(float *dinp, float *dfc_weight, float *dfc_bias, float *dproj_weight, float *dproj_bias,
                  float *dhidden, float *act_out, const float *dout, const float *inp, const float *fc_out, const float *fc_weight,
                  const float *proj_weight, int N, int C, MlpKind act);

#endif
