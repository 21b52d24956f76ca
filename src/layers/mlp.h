// mlp.h: the transformer block's MLP: Linear(C, 4C) -> GELU -> Linear(4C, C),
// or with `--mlp relu2` ReLU^2 in GELU's place.
//
// Reading order: file 10, after gelu.h and relu2.h, the last of the block's
// layers. Attention moves information between positions; the MLP then works
// on each position alone, widening its C numbers to a hidden layer of 4C,
// bending them with the activation, and projecting back to C:
//   1. fc_out[N,4C]  = inp[N,C] @ fc_weight[4C,C]^T       (nanoGPT's c_fc)
//   2. act_out[N,4C] = gelu(fc_out), or relu2(fc_out)
//   3. out[N,C]      = act_out @ proj_weight[C,4C]^T      (nanoGPT's c_proj)
// Neither linear layer has a bias (nanoGPT with bias=False). Both passes
// are the fast linear.h and gelu.h (or relu2.h) calls in sequence; the tests
// hold them to the same steps built from the _reference versions.
#ifndef TINYGPT_MLP_H
#define TINYGPT_MLP_H

// The activation of step 2: GELU (gelu.h), or ReLU^2 (relu2.h, the modern
// recipe's `--mlp relu2`).
typedef enum { MLP_GELU = 0, MLP_RELU2 = 1 } MlpKind;

// fc_out[N,4C]  = inp[N,C] @ fc_weight[4C,C]^T
// act_out[N,4C] = gelu(fc_out) (or relu2(fc_out), as "act" says)
// out[N,C]      = act_out @ proj_weight[C,4C]^T
// The weights come TRANSPOSED ([in,out], see linear_forward_transposed in linear.h): fc_weight_t[C,4C],
// proj_weight_t[4C,C]. fc_out and act_out are written; backward reads fc_out.
void mlp_forward(float *out, float *fc_out, float *act_out, const float *inp, const float *fc_weight_t,
                 const float *proj_weight_t, int N, int C, MlpKind act);

// Backward, given dout[N,C], the steps in reverse:
//   dinp[N,C] written; dfc_weight[4C,C] and dproj_weight[C,4C] added to.
//   act_out[N,4C] is recomputed here from fc_out (the model does not keep one per layer: memory for compute, as
//   llm.c does), dhidden[N,4C] is scratch (the gradient of act_out, then in place of fc_out).
// The weights here are the untransposed ones, fc_weight[4C,C] and proj_weight[C,4C].
void mlp_backward(float *dinp, float *dfc_weight, float *dproj_weight, float *dhidden, float *act_out,
                  const float *dout, const float *inp, const float *fc_out, const float *fc_weight,
                  const float *proj_weight, int N, int C, MlpKind act);

#endif
