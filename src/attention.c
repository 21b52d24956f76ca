// attention.c: causal multi-head self-attention, forward and backward.
// See attention.h for the five steps. Both passes run one (batch, head) pair
// per OpenMP iteration: pairs read and write disjoint slices of every tensor.
#include "attention.h"

#include <math.h>
#include <stddef.h>

#include "rng.h"

// The factor dropout applies to weight (b,h,t,j): 0 if dropped, 1/(1-p) if kept.
static inline float dropout_scale(uint64_t key, float p, size_t index) {
    if (p == 0.0f) return 1.0f;
    return dropout_uniform(key, index) < p ? 0.0f : 1.0f / (1.0f - p);
}

void attention_forward(float *attn_out, float *attn_weights, const float *qkv, int B, int T, int C, int NH,
                       float dropout_p, uint64_t dropout_key) {
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
                    float w = weights_t[j] * dropout_scale(dropout_key, dropout_p, row_index + j);
                    const float *v_j = qkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    for (int i = 0; i < HS; i++) out_t[i] += w * v_j[i];
                }
            }
        }
    }
}

// Backward, the forward steps in reverse, for one row t (w = weights[t,:],
// m_j = dropout scale, s = scores):
//   5. out_t = sum_j w_j m_j v_j   ->  dv_j += w_j m_j dout_t;  dw_j = m_j (dout_t . v_j)
//   3. softmax                     ->  ds_j = w_j (dw_j - sum_i w_i dw_i)
//   1. s_j = q_t . k_j * scale     ->  dq_t += ds_j scale k_j;  dk_j += ds_j scale q_t
// The mask (step 2) needs nothing: masked scores have w_j = 0 and get no gradient.
void attention_backward(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                        const float *attn_weights, int B, int T, int C, int NH, float dropout_p,
                        uint64_t dropout_key) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *qkv_b = qkv + (size_t)b * T * C3;
            float *dqkv_b = dqkv + (size_t)b * T * C3;
            for (int t = 0; t < T; t++) {
                size_t row_index = (((size_t)b * NH + h) * T + t) * T;
                const float *weights_t = attn_weights + row_index;
                float *dweights_t = dweights + row_index;
                const float *dout_t = dattn_out + ((size_t)b * T + t) * C + h * HS;

                // step 5 backward: into v, and into the weights through dropout
                for (int j = 0; j <= t; j++) {
                    float m = dropout_scale(dropout_key, dropout_p, row_index + j);
                    const float *v_j = qkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    float *dv_j = dqkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    float dot = 0.0f;
                    for (int i = 0; i < HS; i++) {
                        dot += dout_t[i] * v_j[i];
                        dv_j[i] += weights_t[j] * m * dout_t[i];
                    }
                    dweights_t[j] += m * dot;
                }
                // step 3 backward: softmax's Jacobian applied to dweights
                float weighted_sum = 0.0f;
                for (int j = 0; j <= t; j++) weighted_sum += weights_t[j] * dweights_t[j];

                // step 1 backward: into q_t and every k_j
                const float *q_t = qkv_b + (size_t)t * C3 + h * HS;
                float *dq_t = dqkv_b + (size_t)t * C3 + h * HS;
                for (int j = 0; j <= t; j++) {
                    float dscore = weights_t[j] * (dweights_t[j] - weighted_sum) * scale;
                    const float *k_j = qkv_b + (size_t)j * C3 + C + h * HS;
                    float *dk_j = dqkv_b + (size_t)j * C3 + C + h * HS;
                    for (int i = 0; i < HS; i++) {
                        dq_t[i] += dscore * k_j[i];
                        dk_j[i] += dscore * q_t[i];
                    }
                }
            }
        }
    }
}
