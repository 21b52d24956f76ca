// attention.c: causal multi-head self-attention, forward and backward.
// See attention.h for the five steps. Every pass runs one (batch, head) pair
// per OpenMP iteration: pairs read and write disjoint slices of every tensor.
#include "attention.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "fastexp.h"
#include "linear.h"
#include "rng.h"
#include "simd.h"

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
// Fast versions: the same steps, arranged so that no inner loop writes to
// memory. Two building blocks do almost all the work:
// - the matmul tile of linear.c (matmul_tile_rows) for the products with
//   T x T results: scores = Q K^T and dweights = dOut V^T, reading each
//   head's keys and values transposed ([HS,T], filled by transpose_head);
// - weighted_row_sum, out += sum_n c_n row_n, for the products with
//   T x HS results, its HS-wide accumulator held in vector registers.

// out[0,HS) (+)= sum over n < count of c_n * rows[n * row_stride + 0..HS),
// where c_n = weights[n * coeff_stride], times scales[n * coeff_stride]
// when scales is not NULL (the dropout factors); "+=" when "accumulate",
// "=" otherwise.
// NV = HS / 16 vectors; always inlined with a constant NV so the
// accumulators stay in registers. Terms go round-robin into LANES separate
// accumulators, summed at the end: with one, every multiply-add would wait
// for the previous one's result (4 cycles) instead of overlapping.
#define LANES 4
static inline __attribute__((always_inline)) void weighted_row_sum_vec(float *out, const float *weights,
                                                                       const float *scales, size_t coeff_stride,
                                                                       const float *rows, size_t row_stride,
                                                                       int count, bool accumulate, const int NV) {
    vec16 acc[LANES][4] = {{{0}}};
    int n = 0;
    for (; n + LANES <= count; n += LANES) {
        for (int lane = 0; lane < LANES; lane++) {
            float c = weights[(n + lane) * coeff_stride];
            if (scales) c *= scales[(n + lane) * coeff_stride];
            const float *row = rows + (n + lane) * row_stride;
            for (int v = 0; v < NV; v++) acc[lane][v] += c * load16(row + 16 * v);
        }
    }
    for (; n < count; n++) {  // the last count % LANES terms
        float c = weights[n * coeff_stride];
        if (scales) c *= scales[n * coeff_stride];
        for (int v = 0; v < NV; v++) acc[0][v] += c * load16(rows + n * row_stride + 16 * v);
    }
    for (int v = 0; v < NV; v++) {
        vec16 sum = acc[0][v];
        for (int lane = 1; lane < LANES; lane++) sum += acc[lane][v];
        store16(out + 16 * v, accumulate ? load16(out + 16 * v) + sum : sum);
    }
}

static void weighted_row_sum(float *out, const float *weights, const float *scales, size_t coeff_stride,
                             const float *rows, size_t row_stride, int count, bool accumulate, int HS) {
    switch (HS % 16 == 0 ? HS / 16 : 0) {
    case 1: weighted_row_sum_vec(out, weights, scales, coeff_stride, rows, row_stride, count, accumulate, 1); return;
    case 2: weighted_row_sum_vec(out, weights, scales, coeff_stride, rows, row_stride, count, accumulate, 2); return;
    case 3: weighted_row_sum_vec(out, weights, scales, coeff_stride, rows, row_stride, count, accumulate, 3); return;
    case 4: weighted_row_sum_vec(out, weights, scales, coeff_stride, rows, row_stride, count, accumulate, 4); return;
    default:  // other head sizes: the same sums, one channel at a time
        for (int i = 0; i < HS; i++) {
            float sum = 0.0f;
            for (int n = 0; n < count; n++) {
                float c = weights[n * coeff_stride];
                if (scales) c *= scales[n * coeff_stride];
                sum += c * rows[n * row_stride + i];
            }
            out[i] = accumulate ? out[i] + sum : sum;
        }
    }
}

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

// Steps 2-3 for one row whose raw dot products q_t . k_j are already in
// weights_t[0..t]: scale, softmax over j <= t, zero the masked j > t.
// The exponentials get a loop of their own: with the running sum in the
// same loop, the compiler would not vectorise fast_expf.
static void softmax_row(float *weights_t, int t, int T, float scale) {
    const int n = t + 1;
    float max_score = -INFINITY;
    for (int j = 0; j < n; j++) {
        weights_t[j] *= scale;
        max_score = weights_t[j] > max_score ? weights_t[j] : max_score;
    }
    for (int j = 0; j < n; j++) weights_t[j] = fast_expf(weights_t[j] - max_score);
    float sum = 0.0f;
    for (int j = 0; j < n; j++) sum += weights_t[j];
    const float inv_sum = 1.0f / sum;
    for (int j = 0; j < n; j++) weights_t[j] *= inv_sum;
    for (int j = n; j < T; j++) weights_t[j] = 0.0f;
}

// Steps 1-5 for the rows [t0, t0+rows) of one head, rows <= 4: the score
// tiles at or left of the diagonal (a tile wholly right of it would be all
// masked), then each row's softmax, dropout and weighted sum of values.
static void attention_forward_rows(float *attn_out, float *attn_weights, float *dropout_scales,
                                   const float *keys_t, const float *qkv, int b, int h, int t0, int rows, int T,
                                   int C, int NH, float dropout_p, uint64_t dropout_key) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const size_t head = (size_t)b * NH + h;
    const float *qkv_b = qkv + (size_t)b * T * C3;
    float *weights_bh = attn_weights + head * T * T;
    const int last = t0 + rows - 1;  // the last row's keys reach furthest
    // Step 1: raw scores q_t . k_j, in tiles 64 keys wide. A tile that
    // straddles the diagonal is computed whole (as long as it fits in T),
    // because a full tile is many times faster than a ragged one; the
    // softmax overwrites its masked entries with zeros.
    for (int j0 = 0; j0 <= last; j0 += 64)
        matmul_tile_rows(weights_bh, qkv_b + h * HS, C3, keys_t + head * HS * T, T, HS, t0, rows, j0,
                         T - j0 < 64 ? T - j0 : 64);
    for (int t = t0; t <= last; t++) {
        const size_t row_index = (head * T + t) * T;
        float *weights_t = attn_weights + row_index;
        softmax_row(weights_t, t, T, 1.0f / sqrtf((float)HS));  // steps 2-3
        float *scales_t = dropout_p > 0.0f ? dropout_scales + row_index : NULL;
        if (scales_t) dropout_scales_row(scales_t, t + 1, dropout_key, row_index, dropout_p);  // step 4
        float *out_t = attn_out + ((size_t)b * T + t) * C + h * HS;  // step 5
        weighted_row_sum(out_t, weights_t, scales_t, 1, qkv_b + 2 * C + h * HS, C3, t + 1, false, HS);
    }
}

void attention_forward_row(float *attn_out, float *attn_weights, float *dropout_scales, const float *keys_t,
                           const float *qkv, int b, int h, int t, int T, int C, int NH, float dropout_p,
                           uint64_t dropout_key) {
    attention_forward_rows(attn_out, attn_weights, dropout_scales, keys_t, qkv, b, h, t, 1, T, C, NH, dropout_p,
                           dropout_key);
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
            for (int t0 = 0; t0 < T; t0 += 4)
                attention_forward_rows(attn_out, attn_weights, dropout_scales, keys_t, qkv, b, h, t0,
                                       T - t0 < 4 ? T - t0 : 4, T, C, NH, dropout_p, dropout_key);
        }
    }
}

// Backward for one (batch, head), as four products (P = dropped weights,
// dS = gradient of the scores, Q K V dOut this head's [T,HS] slices):
//   dweights = dOut V^T, masked, times the dropout factors   (tiles, as the scores)
//   dS       = softmax backward of dweights, times scale     (row by row, in place)
//   dV      += P^T dOut;  dQ += dS K;  dK += dS^T Q          (weighted_row_sum)
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
            const float *dout_bh = dattn_out + (size_t)b * T * C + h * HS;
            const float *weights_bh = attn_weights + head * T * T;
            const float *scales_bh = dropout_p > 0.0f ? dropout_scales + head * T * T : NULL;
            float *dscores_bh = dweights + head * T * T;

            // dweights[t,j] = dout_t . v_j, the tiles at or left of the diagonal
            for (int t0 = 0; t0 < T; t0 += 4) {
                const int rows = T - t0 < 4 ? T - t0 : 4, last = t0 + rows - 1;
                for (int j0 = 0; j0 <= last; j0 += 64)  // whole tiles, as for the scores
                    matmul_tile_rows(dscores_bh, dout_bh, (size_t)C, values_t + head * HS * T, T, HS, t0, rows,
                                     j0, T - j0 < 64 ? T - j0 : 64);
            }
            // row by row: through dropout (x m_j), then the softmax:
            // dS[t,j] = w_j (dw_j - sum_i w_i dw_i) * scale, in place
            for (int t = 0; t < T; t++) {
                const float *weights_t = weights_bh + (size_t)t * T;
                float *dscores_t = dscores_bh + (size_t)t * T;
                if (scales_bh)
                    for (int j = 0; j <= t; j++) dscores_t[j] *= scales_bh[(size_t)t * T + j];
                float weighted_sum = 0.0f;
                for (int j = 0; j <= t; j++) weighted_sum += weights_t[j] * dscores_t[j];
#ifdef TINYGPT_BREAK_SOFTMAX_BACKWARD
                // Only in the test build $(BUILD)/tinygpt-broken (see the Makefile):
                // a classic slip, softmax's backward without its "- weighted_sum"
                // term, so tests can watch `tinygpt gradcheck` catch a wrong backward.
                weighted_sum = 0.0f;
#endif
                for (int j = 0; j <= t; j++) dscores_t[j] = weights_t[j] * (dscores_t[j] - weighted_sum) * scale;
                for (int j = t + 1; j < T; j++) dscores_t[j] = 0.0f;
            }
            for (int j = 0; j < T; j++) {
                // dv_j += sum over t >= j of P[t,j] dout_t;  dk_j += sum over t >= j of dS[t,j] q_t
                const size_t tj = (size_t)j * T + j;  // element [t=j, j]
                weighted_row_sum(dqkv_b + (size_t)j * C3 + 2 * C + h * HS, weights_bh + tj,
                                 scales_bh ? scales_bh + tj : NULL, (size_t)T, dout_bh + (size_t)j * C, (size_t)C,
                                 T - j, true, HS);
                weighted_row_sum(dqkv_b + (size_t)j * C3 + C + h * HS, dscores_bh + tj, NULL, (size_t)T,
                                 qkv_b + (size_t)j * C3 + h * HS, C3, T - j, true, HS);
            }
            for (int t = 0; t < T; t++)  // dq_t += sum over j <= t of dS[t,j] k_j
                weighted_row_sum(dqkv_b + (size_t)t * C3 + h * HS, dscores_bh + (size_t)t * T, NULL, 1,
                                 qkv_b + C + h * HS, C3, t + 1, true, HS);
        }
    }
}
