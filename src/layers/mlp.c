// mlp.c: Linear(C, 4C) -> GELU -> Linear(4C, C), forward and backward (see mlp.h).
#include "mlp.h"

#include <stddef.h>

#include "gelu.h"
#include "linear.h"

void mlp_forward(float *out, float *fc_out, float *gelu_out, const float *inp, const float *fc_weight_t,
                 const float *proj_weight_t, int N, int C) {
    const int H = 4 * C;  // hidden width
    linear_forward_transposed(fc_out, inp, fc_weight_t, NULL, N, C, H);      // 1. widen
    gelu_forward(gelu_out, fc_out, (size_t)N * H);                           // 2. bend
    linear_forward_transposed(out, gelu_out, proj_weight_t, NULL, N, H, C);  // 3. project back
}

// Backward, derived. The MLP is three functions in a row, so its backward
// is theirs in reverse order, each turning the gradient of its output into
// that of its input (the chain rule for a composition), each derived in
// its own file:
//   3. out = gelu_out @ proj_weight^T    (linear.c)
//        dgelu_out = dout @ proj_weight;   dproj_weight += dout^T @ gelu_out
//   2. gelu_out = gelu(fc_out)           (gelu.c)
//        dfc_out = dgelu_out * (Phi(x) + x phi(x)),  x = fc_out
//   1. fc_out = inp @ fc_weight^T        (linear.c)
//        dinp = dfc_out @ fc_weight;       dfc_weight += dfc_out^T @ inp
// Step 3's weight gradient needs gelu_out, its input, which the model does
// not keep: step 2 runs again first.
void mlp_backward(float *dinp, float *dfc_weight, float *dproj_weight, float *dhidden, float *gelu_out,
                  const float *dout, const float *inp, const float *fc_out, const float *fc_weight,
                  const float *proj_weight, int N, int C) {
    const int H = 4 * C;
    gelu_forward(gelu_out, fc_out, (size_t)N * H);  // step 2 again: its output is step 3's input
    // 3. out = gelu_out @ proj_weight^T:  dhidden = dgelu_out (written), dproj_weight +=
    linear_backward(dhidden, dproj_weight, NULL, dout, gelu_out, proj_weight, N, H, C);
    // 2. gelu_out = gelu(fc_out):  dhidden becomes dfc_out, in place
    gelu_backward(dhidden, fc_out, dhidden, (size_t)N * H);
    // 1. fc_out = inp @ fc_weight^T:  dinp (written), dfc_weight +=
    linear_backward(dinp, dfc_weight, NULL, dhidden, inp, fc_weight, N, C, H);
}
