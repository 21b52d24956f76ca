// attention.c: causal multi-head self-attention, the reference versions:
// the five steps of attention.h as written, forward and backward, with the
// backward derived. The fast versions are in attention_fast.c (file 19).
// Every pass runs one (batch, head) pair per OpenMP iteration: pairs read
// and write disjoint slices of every tensor.
#include "attention.h"

#include <math.h>
#include <stddef.h>

#include "rng.h"

// The factor dropout applies to the weight with flat index "index":
// 0 if dropped, 1/(1-p) if kept ("inverted" dropout keeps the expected
// value of each weight unchanged, so evaluation needs no rescaling).
static inline float dropout_scale(uint64_t key, float p, size_t index) {
    if (p == 0.0f) return 1.0f;
    return dropout_factor(key, index, p, 1.0f / (1.0f - p));
}

// ===========================================================================
// Reference versions.

void attention_forward_reference(float *attn_out, float *attn_weights, const float *qkv, int B, int T, int C,
                                 int NH, float dropout_p, uint64_t dropout_key, uint64_t dropout_first) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *qkv_b = qkv + (size_t)b * T * C3;
            for (int t = 0; t < T; t++) {
                const float *q_t = qkv_b + (size_t)t * C3 + h * HS;
                size_t row_index = (((size_t)b * NH + h) * T + t) * T;  // start of weights[b,h,t,:]
                float *weights_t = attn_weights + row_index;

                // 1-2. scaled scores for j <= t; the masked j > t are -inf,
                // and exp(-inf) = 0, so they are simply never computed.
                float max_score = -INFINITY;
                for (int j = 0; j <= t; j++) {
                    const float *k_j = qkv_b + (size_t)j * C3 + C + h * HS;
                    float dot = 0.0f;
                    for (int i = 0; i < HS; i++) dot += q_t[i] * k_j[i];
                    weights_t[j] = dot * scale;
                    if (weights_t[j] > max_score) max_score = weights_t[j];
                }
                // 3. softmax; subtracting the row's max keeps exp() from overflowing.
                float sum = 0.0f;
                for (int j = 0; j <= t; j++) {
                    weights_t[j] = expf(weights_t[j] - max_score);
                    sum += weights_t[j];
                }
                float inv_sum = 1.0f / sum;
                for (int j = 0; j <= t; j++) weights_t[j] *= inv_sum;
                for (int j = t + 1; j < T; j++) weights_t[j] = 0.0f;

                // 4-5. out_t = sum_j dropout(weights[t,j]) * v_j
                float *out_t = attn_out + ((size_t)b * T + t) * C + h * HS;
                for (int i = 0; i < HS; i++) out_t[i] = 0.0f;
                for (int j = 0; j <= t; j++) {
                    float w = weights_t[j] * dropout_scale(dropout_key, dropout_p, dropout_first + row_index + j);
                    const float *v_j = qkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    for (int i = 0; i < HS; i++) out_t[i] += w * v_j[i];
                }
            }
        }
    }
}

// Backward, derived: attention.h's five steps in reverse, for one head and
// one row t. Write w_j = weights[t,j] (the softmax's output, j <= t), m_j
// its dropout factor (0 or 1/(1-p); 1 without dropout), s_j = scores[t,j],
// and dout = the head's part of dattn_out[t].
//   5. out_t = sum over j of P_j v_j, with P_j = w_j m_j the dropped weight.
//      out_t moves with v_j at slope P_j and with P_j at slope v_j, so
//        dv_j += P_j dout         (added to: v_j is read by every row t >= j)
//        dP_j  = dout . v_j
//   4. P_j = w_j m_j:   dw_j = m_j dP_j      (a dropped weight passes nothing back)
//   3. w = softmax(s). From w_j = exp(s_j) / sum over i of exp(s_i):
//        d w_j / d s_k = w_j ([j == k] - w_k),   the Jacobian J = diag(w) - w w^T
//      J is symmetric, so ds = J dw, row by row:
//        ds_k = sum over j of dw_j w_j ([j == k] - w_k)
//             = w_k dw_k - w_k sum over j of w_j dw_j
//             = w_k (dw_k - <w, dw>)        <w, dw> is weighted_sum below
//   2. the mask: the s_j with j > t are the constant -inf, so w_j = 0 there
//      and no gradient reaches them.
//   1. s_j = scale * (q_t . k_j), scale = 1/sqrt(HS):
//        dq_t += scale ds_j k_j     summed over j <= t
//        dk_j += scale ds_j q_t     (added to: k_j is read by every row t >= j)
//      dscore below is scale * ds_j, the gradient of the plain dot product.
// The same in matrix form, for one head without dropout: Q, K, V [T,HS],
// S = scale Q K^T [T,T], W = softmax(S) row by row (masked), O = W V; with
// * the elementwise product and rowsum(X) each row's sum, as a column:
//   dV = W^T dO     dW = dO V^T     dS = W * (dW - rowsum(W * dW))
//   dQ = scale dS K                 dK = scale dS^T Q
// (rowsum(W * dW) is <w, dw> of step 3, one number per row t.)
void attention_backward_reference(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                                  const float *attn_weights, int B, int T, int C, int NH, float dropout_p,
                                  uint64_t dropout_key, uint64_t dropout_first) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *qkv_b = qkv + (size_t)b * T * C3;
            float *dqkv_b = dqkv + (size_t)b * T * C3;
            // This head's q, k and v gradients start from zero; the loops add.
            for (int t = 0; t < T; t++)
                for (int part = 0; part < 3; part++)
                    for (int i = 0; i < HS; i++) dqkv_b[(size_t)t * C3 + part * C + h * HS + i] = 0.0f;
            for (int t = 0; t < T; t++) {
                size_t row_index = (((size_t)b * NH + h) * T + t) * T;
                const float *weights_t = attn_weights + row_index;
                float *dweights_t = dweights + row_index;
                const float *dout_t = dattn_out + ((size_t)b * T + t) * C + h * HS;

                // steps 5 and 4 backward: into v, and into the weights through dropout
                for (int j = 0; j <= t; j++) {
                    float m = dropout_scale(dropout_key, dropout_p, dropout_first + row_index + j);
                    const float *v_j = qkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    float *dv_j = dqkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    float dot = 0.0f;
                    for (int i = 0; i < HS; i++) {
                        dot += dout_t[i] * v_j[i];                // 5. dP_j = dout . v_j
                        dv_j[i] += weights_t[j] * m * dout_t[i];  // 5. dv_j += P_j dout
                    }
                    dweights_t[j] = m * dot;  // 4. dw_j = m_j dP_j
                }
                for (int j = t + 1; j < T; j++) dweights_t[j] = 0.0f;  // 2. masked: nothing
                // step 3 backward: softmax's Jacobian applied to dweights
                float weighted_sum = 0.0f;  // <w, dw>
                for (int j = 0; j <= t; j++) weighted_sum += weights_t[j] * dweights_t[j];

                // step 1 backward: into q_t and every k_j
                const float *q_t = qkv_b + (size_t)t * C3 + h * HS;
                float *dq_t = dqkv_b + (size_t)t * C3 + h * HS;
                for (int j = 0; j <= t; j++) {
                    float dscore = weights_t[j] * (dweights_t[j] - weighted_sum) * scale;  // 3., times scale
                    const float *k_j = qkv_b + (size_t)j * C3 + C + h * HS;
                    float *dk_j = dqkv_b + (size_t)j * C3 + C + h * HS;
                    for (int i = 0; i < HS; i++) {
                        dq_t[i] += dscore * k_j[i];  // 1. dq_t += scale ds_j k_j
                        dk_j[i] += dscore * q_t[i];  // 1. dk_j += scale ds_j q_t
                    }
                }
            }
        }
    }
}
