// attention.c: causal multi-head self-attention, forward and backward.
// See attention.h for the five steps. Every pass runs one (batch, head) pair
// per OpenMP iteration: pairs read and write disjoint slices of every tensor.
#include "attention.h"

#include <math.h>
#include <stddef.h>

#include "rng.h"

// The factor dropout applies to the weight with flat index "index":
// 0 if dropped, 1/(1-p) if kept ("inverted" dropout keeps the expected
// value of each weight unchanged, so evaluation needs no rescaling).
static inline float dropout_scale(uint64_t key, float p, size_t index) {
    if (p == 0.0f) return 1.0f;
    return dropout_uniform(key, index) < p ? 0.0f : 1.0f / (1.0f - p);
}

// ===========================================================================
// Reference versions.

void attention_forward_reference(float *attn_out, float *attn_weights, const float *qkv, int B, int T, int C,
                                 int NH, float dropout_p, uint64_t dropout_key) {
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
void attention_backward_reference(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
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
                    dweights_t[j] = m * dot;
                }
                for (int j = t + 1; j < T; j++) dweights_t[j] = 0.0f;
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

// ===========================================================================
// Fast versions: the same steps, with every inner loop over contiguous
// memory so that the compiler turns it into vector instructions.

// keys_t[i,j] = k_j[i] and values_t[i,j] = v_j[i] for one (batch, head),
// positions j in [first, last); T is the row length of keys_t and values_t.
void transpose_head(float *keys_t, float *values_t, const float *qkv_b, int first, int last, int T, int C, int HS,
                    int h) {
    const size_t C3 = 3 * (size_t)C;
    for (int j = first; j < last; j++) {
        const float *k_j = qkv_b + (size_t)j * C3 + C + h * HS;
        const float *v_j = k_j + C;
        for (int i = 0; i < HS; i++) {
            keys_t[(size_t)i * T + j] = k_j[i];
            values_t[(size_t)i * T + j] = v_j[i];
        }
    }
}

// scales[0..n): the dropout factors of the weights with flat indices
// first_index + j. A plain loop over a pure function: it vectorises.
static void dropout_scales_row(float *scales, int n, uint64_t key, size_t first_index, float p) {
    const float keep = 1.0f / (1.0f - p);
    for (int j = 0; j < n; j++) scales[j] = dropout_uniform(key, first_index + j) < p ? 0.0f : keep;
}

// One row of steps 1-3: weights_t[j] = softmax_j(q_t . k_j * scale) for
// j <= t, and 0 after. The dot products run "sideways": for each channel i,
// add q_t[i] * keys_t[i, 0..t] to the whole row at once.
static void softmax_scores_row(float *weights_t, const float *q_t, const float *keys_t, int t, int T, int HS,
                               float scale) {
    for (int j = 0; j <= t; j++) weights_t[j] = 0.0f;
    for (int i = 0; i < HS; i++) {
        const float q_scaled = q_t[i] * scale;
        const float *keys_i = keys_t + (size_t)i * T;
        for (int j = 0; j <= t; j++) weights_t[j] += q_scaled * keys_i[j];
    }
    float max_score = -INFINITY;
    for (int j = 0; j <= t; j++) max_score = weights_t[j] > max_score ? weights_t[j] : max_score;
    float sum = 0.0f;
    for (int j = 0; j <= t; j++) {
        weights_t[j] = expf(weights_t[j] - max_score);
        sum += weights_t[j];
    }
    const float inv_sum = 1.0f / sum;
    for (int j = 0; j <= t; j++) weights_t[j] *= inv_sum;
    for (int j = t + 1; j < T; j++) weights_t[j] = 0.0f;
}

void attention_forward_row(float *attn_out, float *attn_weights, float *dropout_scales, const float *keys_t,
                           const float *qkv, int b, int h, int t, int T, int C, int NH, float dropout_p,
                           uint64_t dropout_key) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const size_t head = (size_t)b * NH + h;
    const size_t row_index = (head * T + t) * T;
    const float *qkv_b = qkv + (size_t)b * T * C3;
    const float *keys_t_bh = keys_t + head * HS * T;
    float *weights_t = attn_weights + row_index;
    const float *q_t = qkv_b + (size_t)t * C3 + h * HS;
    softmax_scores_row(weights_t, q_t, keys_t_bh, t, T, HS, 1.0f / sqrtf((float)HS));  // steps 1-3

    // steps 4-5: out_t = sum_j weights[t,j] * scales[t,j] * v_j
    float *out_t = attn_out + ((size_t)b * T + t) * C + h * HS;
    float *scales_t = dropout_p > 0.0f ? dropout_scales + row_index : NULL;
    if (scales_t) dropout_scales_row(scales_t, t + 1, dropout_key, row_index, dropout_p);
    for (int i = 0; i < HS; i++) out_t[i] = 0.0f;
    for (int j = 0; j <= t; j++) {
        const float w = scales_t ? weights_t[j] * scales_t[j] : weights_t[j];
        const float *v_j = qkv_b + (size_t)j * C3 + 2 * C + h * HS;
        for (int i = 0; i < HS; i++) out_t[i] += w * v_j[i];
    }
}

void attention_forward(float *attn_out, float *attn_weights, float *dropout_scales, float *keys_t,
                       float *values_t, const float *qkv, int B, int T, int C, int NH, float dropout_p,
                       uint64_t dropout_key) {
    const int HS = C / NH;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t head = (size_t)b * NH + h;
            const float *qkv_b = qkv + (size_t)b * T * 3 * (size_t)C;
            transpose_head(keys_t + head * HS * T, values_t + head * HS * T, qkv_b, 0, T, T, C, HS, h);
            for (int t = 0; t < T; t++)
                attention_forward_row(attn_out, attn_weights, dropout_scales, keys_t, qkv, b, h, t, T, C, NH,
                                      dropout_p, dropout_key);
        }
    }
}

// The reference backward's three steps for one row t, each loop contiguous:
// dweights_t[j] = m_j (dout_t . v_j) runs sideways over values_t, like the
// scores in the forward pass.
void attention_backward(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                        const float *attn_weights, const float *dropout_scales, const float *values_t, int B,
                        int T, int C, int NH, float dropout_p) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t head = (size_t)b * NH + h;
            const float *qkv_b = qkv + (size_t)b * T * C3;
            float *dqkv_b = dqkv + (size_t)b * T * C3;
            const float *values_t_bh = values_t + head * HS * T;
            for (int t = 0; t < T; t++) {
                const size_t row_index = (head * T + t) * T;
                const float *weights_t = attn_weights + row_index;
                const float *scales_t = dropout_p > 0.0f ? dropout_scales + row_index : NULL;
                float *dweights_t = dweights + row_index;
                const float *dout_t = dattn_out + ((size_t)b * T + t) * C + h * HS;

                // step 5 backward, into the weights: dweights_t[j] = m_j (dout_t . v_j)
                for (int j = 0; j < T; j++) dweights_t[j] = 0.0f;
                for (int i = 0; i < HS; i++) {
                    const float dout_i = dout_t[i];
                    const float *values_i = values_t_bh + (size_t)i * T;
                    for (int j = 0; j <= t; j++) dweights_t[j] += dout_i * values_i[j];
                }
                if (scales_t)
                    for (int j = 0; j <= t; j++) dweights_t[j] *= scales_t[j];
                // step 5 backward, into the values: dv_j += w_j m_j dout_t
                for (int j = 0; j <= t; j++) {
                    const float w = scales_t ? weights_t[j] * scales_t[j] : weights_t[j];
                    float *dv_j = dqkv_b + (size_t)j * C3 + 2 * C + h * HS;
                    for (int i = 0; i < HS; i++) dv_j[i] += w * dout_t[i];
                }
                // step 3 backward
                float weighted_sum = 0.0f;
                for (int j = 0; j <= t; j++) weighted_sum += weights_t[j] * dweights_t[j];
#ifdef TINYGPT_BREAK_SOFTMAX_BACKWARD
                // Only in the test build $(BUILD)/tinygpt-broken (see the Makefile):
                // a classic slip, softmax's backward without its "- weighted_sum"
                // term, so tests can watch `tinygpt gradcheck` catch a wrong backward.
                weighted_sum = 0.0f;
#endif
                // step 1 backward
                const float *q_t = qkv_b + (size_t)t * C3 + h * HS;
                float *dq_t = dqkv_b + (size_t)t * C3 + h * HS;
                for (int j = 0; j <= t; j++) {
                    const float dscore = weights_t[j] * (dweights_t[j] - weighted_sum) * scale;
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
