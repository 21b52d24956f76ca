// mlp.c: Linear(C, 4C) -> GELU (or ReLU^2) -> Linear(4C, C), forward and
// backward (see mlp.h).
#include "mlp.h"

#include <stddef.h>

#include "gelu.h"
#include "linear.h"
#include "relu2.h"

void mlp_forward(float *out, float *fc_out, float *act_out, const float *inp, const float *fc_weight_t,
                 const float *proj_weight_t, int N, int C, MlpKind act) {
    const int H = 4 * C;  // hidden width
    const size_t n = (size_t)N * H;
    linear_forward_transposed(fc_out, inp, fc_weight_t, NULL, N, C, H);  // 1. widen
    if (act == MLP_RELU2) relu2_forward(act_out, fc_out, n);              // 2. bend
    else gelu_forward(act_out, fc_out, n);
    linear_forward_transposed(out, act_out, proj_weight_t, NULL, N, H, C);  // 3. project back
}

// Backward, derived. The MLP is three functions in a row, so its backward
// is theirs in reverse order, each turning the gradient of its output into
// that of its input (the chain rule for a composition), each derived in
// its own file:
//   3. out = act_out @ proj_weight^T     (linear.c)
//        dact_out = dout @ proj_weight;    dproj_weight += dout^T @ act_out
//   2. act_out = gelu(fc_out)            (gelu.c; relu2.c for ReLU^2)
//        dfc_out = dact_out * (Phi(x) + x phi(x)),  x = fc_out
//        (ReLU^2: dfc_out = dact_out * 2 max(x, 0))
//   1. fc_out = inp @ fc_weight^T        (linear.c)
//        dinp = dfc_out @ fc_weight;       dfc_weight += dfc_out^T @ inp
// Step 3's weight gradient needs act_out, its input, which the model does
// not keep: step 2 runs again first.
void mlp_backward(float *dinp, float *dfc_weight, float *dproj_weight, float *dhidden, float *act_out,
                  const float *dout, const float *inp, const float *fc_out, const float *fc_weight,
                  const float *proj_weight, int N, int C, MlpKind act) {
    const int H = 4 * C;
    const size_t n = (size_t)N * H;
    // step 2 again: its output is step 3's input
    if (act == MLP_RELU2) relu2_forward(act_out, fc_out, n);
    else gelu_forward(act_out, fc_out, n);
    // 3. out = act_out @ proj_weight^T:  dhidden = dact_out (written), dproj_weight +=
    linear_backward(dhidden, dproj_weight, NULL, dout, act_out, proj_weight, N, H, C);
    // 2. act_out = act(fc_out):  dhidden becomes dfc_out, in place
    if (act == MLP_RELU2) relu2_backward(dhidden, fc_out, dhidden, n);
    else gelu_backward(dhidden, fc_out, dhidden, n);
    // 1. fc_out = inp @ fc_weight^T:  dinp (written), dfc_weight +=
    linear_backward(dinp, dfc_weight, NULL, dhidden, inp, fc_weight, N, C, H);
}
