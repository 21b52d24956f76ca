// softmax.h: the softmax of a row, or of a block of rows at once (whose
// lane combinations overlap), in loops of vectors.
//
// Reading order: file 19, after fastexp.h. Used by the attention weights
// (attention_fast.c) and by the loss (crossentropy_fast.c, file 20):
//   out[j] = exp(in[j] - max) / sum over i of exp(in[i] - max),  j < n
// where max is the row's largest entry: subtracting it makes the largest
// exp() exactly 1, so nothing overflows, and leaves the result unchanged.
// Its backward, w * (dw - <w, dw>) from the Jacobian diag(w) - w w^T, is
// derived where it is used: in attention.c (attention_backward_reference),
// and, folded into the loss's, in crossentropy.c.
//
// The max and the sum run in 16 lanes (simd.h): lane i sees j = i, i+16,
// ..., and the lanes are combined at the end (the sums are simd.h's
// row_sum and row_dot). With one running max or sum, each step waits for
// the one before, and for the sum the compiler may not reorder float
// additions itself. A last partial vector is padded with -inf (for the max)
// or 0 (for the sum).
#ifndef TINYGPT_SOFTMAX_H
#define TINYGPT_SOFTMAX_H

#include <math.h>
#include <string.h>

#include "fastexp.h"
#include "simd.h"

// max_vec lane by lane over 16 lanes.
static inline Lanes16 lanes16_max(Lanes16 a, Lanes16 b) {
    for (int p = 0; p < LANE_PARTS; p++) a.part[p] = max_vec(a.part[p], b.part[p]);
    return a;
}

// The largest of x[0..n), in lanes (lane i: of x[i], x[i+16], ...)
static inline Lanes16 row_max_lanes(const float *x, int n) {
    Lanes16 lanes = lanes16_fill(-INFINITY);
    int j = 0;
    for (; j + 16 <= n; j += 16) lanes = lanes16_max(lanes, load16(x + j));
    if (j < n) lanes = lanes16_max(lanes, load_tail16(x + j, n - j, -INFINITY));
    return lanes;
}

// Softmax rows are handled in blocks of up to this many (see softmax_rows).
#define SOFTMAX_BLOCK 16

// softmax_row on a block of "rows" <= SOFTMAX_BLOCK rows, row r of length
// n0 + r * n_step (attention's causal rows grow by one; the loss's are all
// V long), reading in + r * ldi and writing out + r * ldo:
//   out_r[0..n) = softmax(scale * in_r[0..n)),  scale > 0
// Each row gets exactly softmax_row's bits. Why blocks: a row's max and sum
// end in a combination of its 16 lanes, a chain of dependent steps that
// takes longer than the rest of a short row; a block combines the lanes of
// all its rows side by side (sum16_rows), so the chains overlap.
// Since scale > 0, the largest scale * in[j] is scale * max, so the scale
// rides along in the exp's argument instead of costing a pass of its own.
// log_sum_exp[r], when asked (the loss), is log(sum over j of exp(scale * in_r[j])).
//
// "room" >= every n: the entries j < room of each row of in and out may be
// read and written, and n..room of out are left with garbage for the caller
// to overwrite (attention's masked weights). The exps and the division run
// up to the next multiple of 16 within it: a loop of whole vectors, where a
// row of length n would end in up to 15 single exps, one float at a time,
// which cost more than the vectors. The loss, without room, passes n.
static inline void softmax_rows(float *out, size_t ldo, const float *in, size_t ldi, int rows, int n0, int n_step,
                                int room, float scale, float *log_sum_exp) {
    Lanes16 lanes[SOFTMAX_BLOCK];
    float max[SOFTMAX_BLOCK], sum[SOFTMAX_BLOCK];
    // 1. each row's max: lanes first, then the lanes of a vector of rows at
    // once (lanes_by_row, as sum16_rows), lane 0 first
    for (int r = 0; r < rows; r++) lanes[r] = row_max_lanes(in + r * ldi, n0 + r * n_step);
    for (int r0 = 0; r0 < rows; r0 += VEC_FLOATS) {
        vec most = splat(0.0f);
        for (int p = 0; p < LANE_PARTS; p++) {
            vec block[VEC_FLOATS];
            lanes_by_row(block, lanes, r0, rows, p);
            for (int c = 0; c < VEC_FLOATS; c++) most = p == 0 && c == 0 ? block[0] : max_vec(block[c], most);
        }
        for (int k = 0; k < VEC_FLOATS && r0 + k < rows; k++) max[r0 + k] = most[k];
    }
    // 2. the exps and, in lanes, their sums
    for (int r = 0; r < rows; r++) {
        const float *in_r = in + r * ldi;
        float *out_r = out + r * ldo;
        const int n = n0 + r * n_step, whole = (n + 15) / 16 * 16 < room ? (n + 15) / 16 * 16 : room;
        for (int j = 0; j < whole; j += VEC_FLOATS) {
            const int count = lanes_left((size_t)whole, (size_t)j);
            store_upto(out_r + j, fast_exp_vec((load_upto(in_r + j, count) - max[r]) * scale), count);
        }
        lanes[r] = row_sum_lanes(out_r, n);
    }
    sum16_rows(sum, lanes, rows);
    // 3. each row divided by its sum
    for (int r = 0; r < rows; r++) {
        float *out_r = out + r * ldo;
        const int n = n0 + r * n_step, whole = (n + 15) / 16 * 16 < room ? (n + 15) / 16 * 16 : room;
        const float inv_sum = 1.0f / sum[r];
        for (int j = 0; j < whole; j++) out_r[j] *= inv_sum;
        if (log_sum_exp) log_sum_exp[r] = scale * max[r] + logf(sum[r]);
    }
}

// out[0..n) = softmax(scale * in[0..n)): one row (out may be in).
static inline void softmax_row(float *out, const float *in, int n, float scale, float *log_sum_exp) {
    softmax_rows(out, 0, in, 0, 1, n, 0, n, scale, log_sum_exp);
}

#endif
