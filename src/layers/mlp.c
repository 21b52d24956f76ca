// mlp.c: Linear(C, 4C) -> GELU (or ReLU^2) -> Linear(4C, C), or
// Linear(C, 2H) -> SwiGLU -> Linear(H, C), forward and backward (see mlp.h).
#include "mlp.h"

#include <stddef.h>

#include "fast.h"
#include "gelu.h"
#include "linear.h"
#include "relu2.h"
#include "swiglu.h"

int mlp_hidden(int C, MlpKind act) {
    if (act != MLP_SWIGLU) return 4 * C;
    const int third = 8 * C / 3;  // 8C/3 rounded down, then up to the multiple
    return (third + MLP_SWIGLU_MULTIPLE - 1) / MLP_SWIGLU_MULTIPLE * MLP_SWIGLU_MULTIPLE;
}
int mlp_fc_width(int C, MlpKind act) { return act == MLP_SWIGLU ? 2 * mlp_hidden(C, act) : mlp_hidden(C, act); }
int mlp_dhidden_width(int C, MlpKind act) {
    return act == MLP_SWIGLU ? 3 * mlp_hidden(C, act) : mlp_hidden(C, act);
}

// activation: step 2, act_out[N,H] from fc_out.
static void activation(float *act_out, const float *fc_out, int N, int H, MlpKind act) {
    const size_t n = (size_t)N * H;
    if (act == MLP_SWIGLU) swiglu_forward(act_out, fc_out, N, H);
    else if (act == MLP_RELU2) relu2_forward(act_out, fc_out, n);
    else if (act == MLP_GELU_TANH) gelu_tanh_forward(act_out, fc_out, n);
    else gelu_forward(act_out, fc_out, n);
}

void mlp_forward(float *out, float *fc_out, float *act_out, const float *inp, const float *fc_weight,
                 const float *fc_bias, const float *proj_weight, const float *proj_bias, int N, int C, MlpKind act) {
    const int H = mlp_hidden(C, act), FC = mlp_fc_width(C, act);  // hidden width; fc_out's
    linear_forward(fc_out, inp, fc_weight, fc_bias, N, C, FC);   // 1. widen
    activation(act_out, fc_out, N, H, act);                      // 2. bend (or gate)
    linear_forward(out, act_out, proj_weight, proj_bias, N, H, C);  // 3. project back
}

// Backward, derived. The MLP is three functions in a row, so its backward
// is theirs in reverse order, each turning the gradient of its output into
// that of its input (the chain rule for a composition), each derived in
// its own file:
//   3. out = act_out @ proj_weight^T (+ proj_bias)    (linear.c)
//        dact_out = dout @ proj_weight;    dproj_weight += dout^T @ act_out
//        (dproj_bias += dout summed over the rows)
//   2. act_out = gelu(fc_out)            (gelu.c; relu2.c for ReLU^2)
//        dfc_out = dact_out * (Phi(x) + x phi(x)),  x = fc_out
//        (the tanh form's slope for gelu_tanh, gelu.c)
//        (ReLU^2: dfc_out = dact_out * 2 max(x, 0); SwiGLU, swiglu.c, from
//        dact_out [N,H] to dfc_out [N,2H], so not in place)
//   1. fc_out = inp @ fc_weight^T (+ fc_bias)         (linear.c)
//        dinp = dfc_out @ fc_weight;       dfc_weight += dfc_out^T @ inp
//        (dfc_bias += dfc_out summed over the rows)
// Step 3's weight gradient needs act_out, its input, which the model does
// not keep: step 2 runs again. Step 3's input gradient does not need it,
// so it comes first, and then step 2 runs both ways, in one pass where
// the activation allows (fc_out read once; for GELU, whose erf is dear, one
// call of it an element instead of two; SwiGLU's two run one after the
// other), and step 3 ends with its weight's gradient.
void mlp_backward(float *dinp, float *dfc_weight, float *dfc_bias, float *dproj_weight, float *dproj_bias,
                  float *dhidden, float *act_out, const float *dout, const float *inp, const float *fc_out, const float *fc_weight,
                  const float *proj_weight, int N, int C, MlpKind act) {
    const int H = mlp_hidden(C, act), FC = mlp_fc_width(C, act);
    const size_t n = (size_t)N * H;
    // dact_out: dhidden itself, made dfc_out in place; with SwiGLU the N*H
    // floats after dfc_out's N*2H
    float *dact = act == MLP_SWIGLU ? dhidden + (size_t)N * FC : dhidden;
    // 3, first half. out = act_out @ proj_weight^T:  dact_out (written)
    linear_backward_input(dact, dout, proj_weight, N, H, C);
    // 2. act_out = act(fc_out) again (step 3's input), and dhidden becomes dfc_out
    if (act == MLP_GELU) {
        gelu_forward_backward(act_out, dhidden, fc_out, dhidden, n);
    } else if (act == MLP_GELU_TANH) {
        gelu_tanh_forward_backward(act_out, dhidden, fc_out, dhidden, n);
    } else if (act == MLP_RELU2) {
        relu2_forward_backward(act_out, dhidden, fc_out, dhidden, n);
    } else {
        swiglu_forward(act_out, fc_out, N, H);
        swiglu_backward(dhidden, dact, fc_out, N, H);
    }
    // 3, second half:  dproj_weight += dout^T @ act_out  (and dproj_bias +=)
    linear_backward_params(dproj_weight, dproj_bias, dout, act_out, N, H, C);
    // 1. fc_out = inp @ fc_weight^T:  dinp (written), dfc_weight +=
    linear_backward(dinp, dfc_weight, dfc_bias, dhidden, inp, fc_weight, N, C, FC);
}
