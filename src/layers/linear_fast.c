// linear_fast.c: y = x W^T + b, the fast versions (see linear.h): the
// forward, and the three products of linear_backward_reference's
// derivation, (1) dinp = dout W, (2) dW += dout^T x and (3) db += the
// column sums of dout, on matmul.h's engine.
//
// Reading order: file 17, after matmul.c, the engine, and linear.c (file 4),
// the loops these must equal. Why the trick is exact: each output is the
// same fmaf chain over k, in the same order, as the reference's (tile.h), so
// the two agree to the bit (test_model.c checks it end to end).
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

#include "linear.h"
#include "fast.h"
#include "matmul.h"
#include "simd.h"

static inline int min_int(int a, int b) { return a < b ? a : b; }

// In 16 x 16 blocks: a plain row-by-row transpose writes each number a
// whole row of weight_t away from the last, a new cache line every time;
// within a block, the 16 lines read and the 16 written stay in L1.
// The blocks are shared among the threads of the caller's parallel region
// (an orphaned `omp for`; alone, one thread does them all), with no wait at
// the end.
#define TRANSPOSE_BLOCK 16
void linear_transpose_weight(float *weight_t, const float *weight, int C, int OC) {
#pragma omp for schedule(static) nowait
    for (int o0 = 0; o0 < OC; o0 += TRANSPOSE_BLOCK) {
        const int o1 = min_int(OC, o0 + TRANSPOSE_BLOCK);
        for (int c0 = 0; c0 < C; c0 += TRANSPOSE_BLOCK) {
            const int c1 = min_int(C, c0 + TRANSPOSE_BLOCK);
            for (int c = c0; c < c1; c++)
                for (int o = o0; o < o1; o++) weight_t[(size_t)c * OC + o] = weight[(size_t)o * C + c];
        }
    }
}

void linear_forward_transposed(float *out, const float *inp, const float *weight_t, const float *bias, int N, int C,
                               int OC) {
    StridedMatrix A = {inp, (size_t)C, 1};
    matmul(out, A, weight_t, N, C, OC, false, bias);
}

// One row of out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias[OC], outputs
// [o0, o0 + W), W = VEC_FLOATS, with the weight read where it lies. Each
// output is the engine's chain (tile.h): bias (or 0), then one multiply-add
// per c in increasing c. Lane j of "acc" is output o0 + j, so the chain
// needs, for each c, the W numbers weight[o0..o0+W, c]: a column of W rows.
// They come W columns at a time: W row pieces loaded and turned into W
// column vectors in registers (transpose_block, simd.h).
// Each of the W rows is read as a stream of its own, and 16 streams at
// once (AVX-512's) are more than the processor's prefetcher follows well:
// each load asks, too, for the line PREFETCH_AHEAD floats further on in
// its row (8 lines; past a row's end, the next row's start, the next
// group's after the last). On a 2-core Zen 5, 2 threads read GPT-2's
// [2304, 768] and [50257, 768] weights at 33-37 GB/s without it, 37-46 with
// it (4 to 16 lines ahead alike).
#define PREFETCH_AHEAD 128
static void row_times_vec_outputs(float *out_row, const float *inp_row, const float *weight, const float *bias, int C,
                                  int o0) {
    enum { W = VEC_FLOATS };
    vec acc = bias ? load_vec(bias + o0) : splat(0.0f);
    int c0 = 0;
    for (; c0 + W <= C; c0 += W) {
        vec columns[W];
#pragma GCC unroll 16
        for (int j = 0; j < W; j++) {
            __builtin_prefetch(weight + (size_t)(o0 + j) * C + c0 + PREFETCH_AHEAD, 0, 0);
            columns[j] = load_vec(weight + (size_t)(o0 + j) * C + c0);
        }
        transpose_block(columns);  // columns[k][j] = weight[o0 + j, c0 + k]
#pragma GCC unroll 16
        for (int k = 0; k < W; k++) acc = fma_vec(splat(inp_row[c0 + k]), columns[k], acc);
    }
    for (int c = c0; c < C; c++)  // C not a multiple of W: the last columns one by one
        for (int j = 0; j < W; j++) acc[j] = fmaf(inp_row[c], weight[(size_t)(o0 + j) * C + c], acc[j]);
    store_vec(out_row + o0, acc);
}

// The same for one output o: its chain as one float.
static void row_times_1_output(float *out_row, const float *inp_row, const float *weight, const float *bias, int C,
                               int o) {
    float sum = bias ? bias[o] : 0.0f;
    for (int c = 0; c < C; c++) sum = fmaf(inp_row[c], weight[(size_t)o * C + c], sum);
    out_row[o] = sum;
}

// The VEC_FLOATS-output groups of one row, shared among the threads of the
// caller's parallel region (an orphaned `omp for`), or all run on this
// thread outside one.
static void row_times_groups(float *out_row, const float *inp_row, const float *weight, const float *bias, int C,
                             int groups) {
#pragma omp for schedule(static)
    for (int g = 0; g < groups; g++) row_times_vec_outputs(out_row, inp_row, weight, bias, C, VEC_FLOATS * g);
}

// Sampling's products have one row: each weight is used once, so the time
// is the time to read it from memory, and the engine's panels would copy
// it first. From about GPT-2's size on, both threads read their share of
// the outputs' rows.
void linear_forward_rows(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    const int groups = OC / VEC_FLOATS;
    for (int n = 0; n < N; n++) {
        float *out_row = out + (size_t)n * OC;
        const float *inp_row = inp + (size_t)n * C;
        RUN_SHARED((size_t)C * OC, MIN_PARALLEL_WORK, row_times_groups(out_row, inp_row, weight, bias, C, groups));
        for (int o = VEC_FLOATS * groups; o < OC; o++) row_times_1_output(out_row, inp_row, weight, bias, C, o);
    }
}

// Below a register tile's rows (EDGE_ROWS = 4, tile.h) the engine would copy every
// weight into its panels for fewer uses than that copy costs.
#define ENGINE_MIN_ROWS 4
void linear_forward(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (N < ENGINE_MIN_ROWS) {
        linear_forward_rows(out, inp, weight, bias, N, C, OC);
        return;
    }
    StridedMatrix A = {inp, (size_t)C, 1};
    matmul_turned(out, A, weight, N, C, OC, bias);  // Bt = weight [OC,C]
}

// (3) dbias[o] += sum over n of dout[n,o], in runs of 64 outputs: each
// run reads dout row by row (a column at a time would touch a new cache
// line for every number) and adds across the run in vectors. The runs are
// an orphaned `omp for` (parallel.h).
static void bias_grad_runs(float *dbias, const float *dout, int N, int OC) {
#pragma omp for schedule(static)
    for (int o0 = 0; o0 < OC; o0 += 64) {
        const int width = min_int(OC - o0, 64);
        float sum[64];
        for (int o = 0; o < width; o++) sum[o] = dbias[o0 + o];
        for (int n = 0; n < N; n++)
            for (int o = 0; o < width; o++) sum[o] += dout[(size_t)n * OC + o0 + o];
        for (int o = 0; o < width; o++) dbias[o0 + o] = sum[o];
    }
}

// (3) for linear_backward and linear_backward_params alike: nothing when
// the layer has no bias, and a region of its own only when one pays.
static void bias_grad(float *dbias, const float *dout, int N, int OC) {
    if (dbias) RUN_SHARED((size_t)N * OC, MIN_PARALLEL_WORK / 64, bias_grad_runs(dbias, dout, N, OC));
}

void linear_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                     const float *weight, int N, int C, int OC) {
    StridedMatrix dout_rows = {dout, (size_t)OC, 1};  // dout as [N,OC]
    StridedMatrix dout_cols = {dout, 1, (size_t)OC};  // dout^T as [OC,N]
    matmul_pair(dinp, dout_rows, weight, N, OC, C, false,     // (1) dinp = dout @ weight
                dweight, dout_cols, inp, OC, N, C, true);    // (2) dweight += dout^T @ inp
    bias_grad(dbias, dout, N, OC);  // (3)
}

void linear_backward_input(float *dinp, const float *dout, const float *weight, int N, int C, int OC) {
    StridedMatrix dout_rows = {dout, (size_t)OC, 1};
    matmul(dinp, dout_rows, weight, N, OC, C, false, NULL);  // (1)
}

void linear_backward_params(float *dweight, float *dbias, const float *dout, const float *inp, int N, int C, int OC) {
    StridedMatrix dout_cols = {dout, 1, (size_t)OC};
    matmul(dweight, dout_cols, inp, OC, N, C, true, NULL);  // (2)
    bias_grad(dbias, dout, N, OC);  // (3)
}
