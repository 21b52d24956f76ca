// rmsnorm_fast.c: RMSNorm and QK-norm, the fast versions (see rmsnorm.h):
// rmsnorm.c's numbers, bit for bit, VEC_FLOATS rows at a time.
//
// Reading order: file 18b, after layernorm_fast.c and rmsnorm.c (file 7b),
// the loops these must give. What was slow there: a row's sum runs in
// one chain, each multiply-add waiting ~4 cycles for the one before, so a
// row of C = 128 took ~500 cycles to sum 128 numbers (most of the layer's
// time: the default gpt spent ~8% of its step in RMSNorm and QK-norm on a
// Sapphire Rapids, AVX-512 path, and ~4% with this file). LayerNorm's fast version cuts its chain into 16 lanes, which
// changes the order of the sum. Here each row keeps its one chain, in
// increasing c, and VEC_FLOATS rows' chains run side by side, one in
// each lane: the rows' numbers are turned (transpose_block, simd.h) so that
// lane r of one vector holds row r's number c. A lane's multiply-add is
// the scalar one, so every row's sum is rmsnorm.c's to the bit, on every
// path (the tests compare them bit for bit); the rest of each row (the
// scale, the output, dx) is rmsnorm.c's own code, called once a row's sum
// is known (rmsnorm_scale_row, rmsnorm_dx_row, qk_norm_dx_row).
#include <stddef.h>

#include "fast.h"
#include "parallel.h"
#include "rmsnorm.h"
#include "simd.h"

#define MIN_PARALLEL_WORK (1 << 15)  // as rmsnorm.c's: below it, one thread

enum { W = VEC_FLOATS };  // rows a group sums at once: a vector's lanes

// A group of W rows, each a pointer to its first number (rows past the
// last real one repeat it: their sums are made and not used).
typedef struct {
    const float *row[W];
} RowGroup;

// lane r of turned[j] = g.row[r][c + j], for j < W
static inline void load_turned(vec turned[W], RowGroup g, int c) {
    for (int r = 0; r < W; r++) turned[r] = load_vec(g.row[r] + c);
    transpose_block(turned);
}

// lane r = g.row[r][c]: one column of the group (a row's last numbers,
// past its whole vectors)
static inline vec column(RowGroup g, int c) {
    vec v;
    for (int r = 0; r < W; r++) v[r] = g.row[r][c];
    return v;
}

// lane r = sum over c < C of row r's x[c]^2, each lane one chain of
// multiply-adds in increasing c (rmsnorm_row's "squares")
static vec square_sums(RowGroup x, int C) {
    vec squares = splat(0.0f);
    int c = 0;
    for (; c + W <= C; c += W) {
        vec xs[W];
        load_turned(xs, x, c);
        for (int j = 0; j < W; j++) squares = fma_vec(xs[j], xs[j], squares);
    }
    for (; c < C; c++) {
        const vec xc = column(x, c);
        squares = fma_vec(xc, xc, squares);
    }
    return squares;
}

// n, or "last" past it: a group's rows past the last real one repeat it
static inline int row_or_last(int n, int last) { return n < last ? n : last; }

// The rows [n0, n0 + W) of inp[N,C] (past N: row N - 1 again), "stride"
// floats apart.
static RowGroup rows_from(const float *inp, size_t stride, int n0, int N) {
    RowGroup g;
    for (int r = 0; r < W; r++) g.row[r] = inp + (size_t)row_or_last(n0 + r, N - 1) * stride;
    return g;
}

// The groups of each function below are an orphaned `omp for`, in a region
// of their own only when one pays (parallel.h).
static void rmsnorm_forward_groups(float *out, float *rstd, const float *inp, const float *weight, int N, int C) {
#pragma omp for schedule(static)
    for (int n0 = 0; n0 < N; n0 += W) {
        const vec squares = square_sums(rows_from(inp, (size_t)C, n0, N), C);
        for (int r = 0; r < W && n0 + r < N; r++)
            rstd[n0 + r] = rmsnorm_scale_row(out + (size_t)(n0 + r) * C, inp + (size_t)(n0 + r) * C, weight,
                                             squares[r], C);
    }
}

// out[N,C] = inp[N,C] * rstd[N] * weight[C] (weight NULL: none), as
// rmsnorm_forward_reference
void rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C) {
    RUN_SHARED((size_t)N * C, MIN_PARALLEL_WORK, rmsnorm_forward_groups(out, rstd, inp, weight, N, C));
}

static void rmsnorm_dx_groups(float *dinp, const float *dout, const float *inp, const float *weight,
                              const float *rstd, int N, int C) {
#pragma omp for schedule(static)
    for (int n0 = 0; n0 < N; n0 += W) {
        const RowGroup x = rows_from(inp, (size_t)C, n0, N), dy = rows_from(dout, (size_t)C, n0, N);
        vec r_lanes;  // lane r: row r's rstd
        for (int r = 0; r < W; r++) r_lanes[r] = rstd[row_or_last(n0 + r, N - 1)];
        // lane r: row r's sum of dxhat xhat, one chain in increasing c
        vec sums = splat(0.0f);
        int c = 0;
        for (; c + W <= C; c += W) {
            vec xs[W], dys[W];
            load_turned(xs, x, c);
            load_turned(dys, dy, c);
            for (int j = 0; j < W; j++) sums = fma_vec(dys[j] * weight[c + j], xs[j] * r_lanes, sums);
        }
        for (; c < C; c++) sums = fma_vec(column(dy, c) * weight[c], column(x, c) * r_lanes, sums);
        for (int r = 0; r < W && n0 + r < N; r++)
            rmsnorm_dx_row(dinp + (size_t)(n0 + r) * C, x.row[r], dy.row[r], weight, r_lanes[r], sums[r], C);
    }
}

// dinp += rstd (dxhat - xhat mean(dxhat xhat)), dxhat = dout weight, and
// dweight += sum over rows of dout xhat, as rmsnorm_backward_reference
void rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                      const float *rstd, int N, int C) {
    RUN_SHARED((size_t)N * C, MIN_PARALLEL_WORK, rmsnorm_dx_groups(dinp, dout, inp, weight, rstd, N, C));
    rmsnorm_weight_grad(dweight, dout, inp, rstd, N, C);
}

// Each row's 2NH heads of q and k are rows of HS numbers: head i (of all
// N * 2NH) starts at qkv + (i / 2NH) * 3C + (i % 2NH) * HS.
static RowGroup heads_from(const float *qkv, int i0, int N, int C, int NH) {
    const int heads = 2 * NH, last = N * heads - 1, HS = C / NH;
    RowGroup g;
    for (int r = 0; r < W; r++) {
        const int i = row_or_last(i0 + r, last);
        g.row[r] = qkv + (size_t)(i / heads) * 3 * C + (size_t)(i % heads) * HS;
    }
    return g;
}

static void qk_norm_forward_groups(float *qkv, float *rstd, int N, int C, int NH) {
    const int HS = C / NH, count = N * 2 * NH;
#pragma omp for schedule(static)
    for (int i0 = 0; i0 < count; i0 += W) {
        const RowGroup heads = heads_from(qkv, i0, N, C, NH);
        const vec squares = square_sums(heads, HS);
        for (int r = 0; r < W && i0 + r < count; r++) {
            float *x = (float *)heads.row[r];  // qkv's own numbers, written in place
            rstd[i0 + r] = rmsnorm_scale_row(x, x, NULL, squares[r], HS);
        }
    }
}

// q and k of qkv[N,3C], each head divided by its root mean square, in
// place, as qk_norm_forward_reference
void qk_norm_forward(float *qkv, float *rstd, int N, int C, int NH) {
    RUN_SHARED((size_t)N * C, MIN_PARALLEL_WORK, qk_norm_forward_groups(qkv, rstd, N, C, NH));
}

static void qk_norm_backward_groups(float *dqkv, const float *qkv, const float *rstd, int N, int C, int NH) {
    const int HS = C / NH, count = N * 2 * NH;
#pragma omp for schedule(static)
    for (int i0 = 0; i0 < count; i0 += W) {
        const RowGroup y = heads_from(qkv, i0, N, C, NH), d = heads_from(dqkv, i0, N, C, NH);
        vec sums = splat(0.0f);  // lane r: head r's sum of d y, in increasing c
        int c = 0;
        for (; c + W <= HS; c += W) {
            vec ys[W], ds[W];
            load_turned(ys, y, c);
            load_turned(ds, d, c);
            for (int j = 0; j < W; j++) sums = fma_vec(ds[j], ys[j], sums);
        }
        for (; c < HS; c++) sums = fma_vec(column(d, c), column(y, c), sums);
        for (int r = 0; r < W && i0 + r < count; r++)
            qk_norm_dx_row((float *)d.row[r], y.row[r], rstd[i0 + r], sums[r], HS);  // dqkv's own numbers
    }
}

// dq and dk of dqkv[N,3C] in place: d = rstd (d - y mean(d y)) per head,
// y the forward's output, as qk_norm_backward_reference
void qk_norm_backward(float *dqkv, const float *qkv, const float *rstd, int N, int C, int NH) {
    RUN_SHARED((size_t)N * C, MIN_PARALLEL_WORK, qk_norm_backward_groups(dqkv, qkv, rstd, N, C, NH));
}
