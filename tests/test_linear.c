// test_linear.c: tests for src/layers/linear.c (y = x W^T + b), and through
// its fast versions (linear_fast.c) the engine they share, src/kernels/matmul.c.
//
// Three layers of evidence, in the order a reader would want them:
// 1. both forward versions give a hand-worked answer;
// 2. both backward versions match central finite differences of the loss
//    L = sum(out * R) for a fixed random R (so dL/dout = R), and add to the
//    gradients already there rather than overwrite them;
// 3. the fast (tiled, OpenMP) versions agree with the reference ones on many
//    shapes, most of them not multiples of matmul.c's blocking (tiles of
//    up to 6 rows by 64 columns, row chunks of 512 and k blocks up to 128
//    deep), so ragged edge tiles, several chunks and several k blocks all
//    run; and give the same bits at every k block depth.
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#endif

#include "common.h"
#include "fast.h"
#include "gradcheck.h"
#include "linear.h"
#include "matmul.h"
#include "rng.h"
#include "sanitized.h"
#include "helpers.h"
#include "tests.h"

// Fast vs reference: both add the same terms in the same order with fmaf,
// so today they agree to the bit (model_forward_position relies on that, and
// test_model.c checks it end to end). Here a tolerance keeps the test about
// the math: 1e-5, relative to max(1, |value|), allows a few float32
// roundings (6e-8 each) of a running sum, yet is far below any indexing or
// tiling mistake, which changes values by O(1).
static const double FAST_MATCHES_REFERENCE_RTOL = 1e-5;

// Assert that a[0..n) and b[0..n) agree within FAST_MATCHES_REFERENCE_RTOL.
// (`if` + ck_abort_msg rather than ck_assert per element: every passing
// ck_assert writes a message to Check's pipe, and here there are millions.)
// Unlike assert_all_close (helpers.h), neither side is the truth: the scale
// is the larger of the two, and the message names the shape.
static void assert_close(const char *what, const float *a, const float *b, size_t n, int N, int C, int OC) {
    for (size_t i = 0; i < n; i++) {
        double scale = fmax(1.0, fmax(fabs(a[i]), fabs(b[i])));
        if (!(fabs((double)a[i] - b[i]) <= FAST_MATCHES_REFERENCE_RTOL * scale))
            ck_abort_msg("%s[%zu] differs: fast %.9g vs reference %.9g (N=%d C=%d OC=%d)", what, i, (double)a[i],
                         (double)b[i], N, C, OC);
    }
}

// expect_same_bits: "a" and "b" (computed as "how_a" and "how_b" say: "on
// one thread", "on two") hold the same bits, element for element.
static void expect_same_bits(const char *what, const float *a, const char *how_a, const float *b, const char *how_b,
                             size_t n, int N, int C, int OC) {
    for (size_t j = 0; j < n; j++)
        if (memcmp(&a[j], &b[j], sizeof(float)) != 0)
            ck_abort_msg("N %d, C %d, OC %d: %s[%zu] %.9g %s, %.9g %s", N, C, OC, what, j, (double)a[j], how_a,
                         (double)b[j], how_b);
}

// ---------------------------------------------------------------------------
// 1. A hand-worked case: N=2 rows, C=3 inputs, OC=2 outputs. Every product
// and sum is a small dyadic number, exact in float32, so we compare with ==.

enum { HN = 2, HC = 3, HOC = 2 };
static const float HAND_INP[HN * HC] = {
    1, 2, 3,   // row 0
    -1, 0, 2,  // row 1
};
static const float HAND_WEIGHT[HOC * HC] = {
    1, 0, -1,           // output 0: x0 - x2
    0.5f, 0.5f, 0.5f,   // output 1: half the sum
};
static const float HAND_BIAS[HOC] = {10, -1};
// out[n,o] = bias[o] + sum_c inp[n,c] * weight[o,c]:
//   out[0,0] = 10 + 1 - 3            = 8     out[0,1] = -1 + 0.5 * (1 + 2 + 3)  = 2
//   out[1,0] = 10 + (-1) - 2         = 7     out[1,1] = -1 + 0.5 * (-1 + 0 + 2) = -0.5
static const float HAND_OUT[HN * HOC] = {8, 2, 7, -0.5f};
// Without the bias: subtract (10, -1) from each row.
static const float HAND_OUT_NO_BIAS[HN * HOC] = {-2, 3, -3, 0.5f};

START_TEST(reference_forward_matches_a_hand_worked_case) {
    float out[HN * HOC];
    linear_forward_reference(out, HAND_INP, HAND_WEIGHT, HAND_BIAS, HN, HC, HOC);
    for (int i = 0; i < HN * HOC; i++) ck_assert_float_eq(out[i], HAND_OUT[i]);
    linear_forward_reference(out, HAND_INP, HAND_WEIGHT, NULL, HN, HC, HOC);
    for (int i = 0; i < HN * HOC; i++) ck_assert_float_eq(out[i], HAND_OUT_NO_BIAS[i]);
}
END_TEST

START_TEST(fast_forward_matches_the_same_hand_worked_case) {
    float out[HN * HOC];
    linear_forward(out, HAND_INP, HAND_WEIGHT, HAND_BIAS, HN, HC, HOC);
    for (int i = 0; i < HN * HOC; i++) ck_assert_float_eq(out[i], HAND_OUT[i]);
    linear_forward(out, HAND_INP, HAND_WEIGHT, NULL, HN, HC, HOC);
    for (int i = 0; i < HN * HOC; i++) ck_assert_float_eq(out[i], HAND_OUT_NO_BIAS[i]);
}
END_TEST

// ---------------------------------------------------------------------------
// 2. Finite differences: N=3, C=4, OC=5, random values.

enum { GN = 3, GC = 4, GOC = 5 };

typedef struct {
    float inp[GN * GC], weight[GOC * GC], bias[GOC];
    float out[GN * GOC];
    double R[GN * GOC];  // fixed random loss weights
    bool use_fast;       // which forward the loss runs
} LinearCase;

static void linear_case_init(LinearCase *lc, uint64_t seed, bool use_fast) {
    Rng rng;
    rng_init(&rng, seed);
    fill_uniform(lc->inp, GN * GC, &rng);
    fill_uniform(lc->weight, GOC * GC, &rng);
    fill_uniform(lc->bias, GOC, &rng);
    for (int i = 0; i < GN * GOC; i++) lc->R[i] = 2.0 * rng_uniform(&rng) - 1.0;
    lc->use_fast = use_fast;
}

// L = sum(out * R) in double.
static double linear_loss(void *ctx) {
    LinearCase *lc = ctx;
    if (lc->use_fast)
        linear_forward(lc->out, lc->inp, lc->weight, lc->bias, GN, GC, GOC);
    else
        linear_forward_reference(lc->out, lc->inp, lc->weight, lc->bias, GN, GC, GOC);
    double loss = 0;
    for (int i = 0; i < GN * GOC; i++) loss += lc->out[i] * lc->R[i];
    return loss;
}

// Run one backward with dout = R from zeroed gradients, then gradcheck each
// of inp, weight and bias.
static void check_linear_gradients(bool use_fast) {
    LinearCase lc;
    linear_case_init(&lc, use_fast ? 22 : 21, use_fast);
    float dout[GN * GOC];
    for (int i = 0; i < GN * GOC; i++) dout[i] = (float)lc.R[i];
    float dinp[GN * GC] = {0}, dweight[GOC * GC] = {0}, dbias[GOC] = {0};
    if (use_fast)
        linear_backward(dinp, dweight, dbias, dout, lc.inp, lc.weight, GN, GC, GOC);
    else
        linear_backward_reference(dinp, dweight, dbias, dout, lc.inp, lc.weight, GN, GC, GOC);
    // The finite differences run on one thread: for this tiny layer a
    // parallel region costs more than its arithmetic, and on a loaded
    // machine one descheduled thread stalls every barrier.
    int saved_threads = get_threads();
    set_threads(1);
    GradCheckResult r_inp = gradcheck(linear_loss, &lc, lc.inp, dinp, GN * GC, GRADCHECK_FLOAT32);
    GradCheckResult r_weight = gradcheck(linear_loss, &lc, lc.weight, dweight, GOC * GC, GRADCHECK_FLOAT32);
    GradCheckResult r_bias = gradcheck(linear_loss, &lc, lc.bias, dbias, GOC, GRADCHECK_FLOAT32);
    set_threads(saved_threads);
    assert_gradcheck_passes("inp", r_inp, GN * GC);
    assert_gradcheck_passes("weight", r_weight, GOC * GC);
    assert_gradcheck_passes("bias", r_bias, GOC);
}

START_TEST(reference_backward_matches_finite_differences) {
    check_linear_gradients(false);
}
END_TEST

START_TEST(fast_backward_matches_finite_differences) {
    check_linear_gradients(true);
}
END_TEST

// ---------------------------------------------------------------------------
// 3. Fast vs reference over a grid of shapes. One loop-test iteration per N,
// so each runs (and is timed) in its own forked process.

// matmul.c cuts rows into chunks of CHUNK_ROWS = 512 and k into blocks of
// K_BLOCK = 128; linear_forward runs fewer than 4 rows on
// linear_forward_rows, more on the engine.
// N: one row, ragged row tiles (the engine's tiles are 6 rows high, the
// rows left go in pairs, then one: 12 is two tiles, 17 two tiles, two pairs
// and a row), 130 (the dweight k: two k blocks) and 515 = two row chunks,
// the second of 3 rows (which the forward's turned weight must still be
// packed for).
static const int ROW_COUNTS[] = {1, 3, 5, 12, 17, 130, 515};
// C: the forward k (129 = two k blocks) and the dinp column tiles.
static const int IN_WIDTHS[] = {1, 7, 64, 65, 129};
// OC: column tiles around multiples of 64, and the dinp k (129 and 200: two
// k blocks).
static const int OUT_WIDTHS[] = {1, 3, 63, 64, 65, 129, 200};

// All the buffers one shape needs; "start" holds the gradients' starting
// values, non-zero so the tests see that backward adds to dweight and dbias
// (and writes dinp whatever it held).
typedef struct {
    float *inp, *weight, *bias, *dout;
    float *out_ref, *out_fast;
    float *dinp_ref, *dweight_ref, *dbias_ref;
    float *dinp_fast, *dweight_fast, *dbias_fast;
    float *dinp_start, *dweight_start, *dbias_start;
} Shape;

static Shape shape_new(int N, int C, int OC, Rng *rng) {
    Shape s;
    size_t nc = (size_t)N * C, oc = (size_t)OC * C, no = (size_t)N * OC;
    s.inp = xmalloc(nc * sizeof(float));
    s.weight = xmalloc(oc * sizeof(float));
    s.bias = xmalloc((size_t)OC * sizeof(float));
    s.dout = xmalloc(no * sizeof(float));
    s.out_ref = xmalloc(no * sizeof(float));
    s.out_fast = xmalloc(no * sizeof(float));
    s.dinp_ref = xmalloc(nc * sizeof(float));
    s.dinp_fast = xmalloc(nc * sizeof(float));
    s.dinp_start = xmalloc(nc * sizeof(float));
    s.dweight_ref = xmalloc(oc * sizeof(float));
    s.dweight_fast = xmalloc(oc * sizeof(float));
    s.dweight_start = xmalloc(oc * sizeof(float));
    s.dbias_ref = xmalloc((size_t)OC * sizeof(float));
    s.dbias_fast = xmalloc((size_t)OC * sizeof(float));
    s.dbias_start = xmalloc((size_t)OC * sizeof(float));
    fill_uniform(s.inp, nc, rng);
    fill_uniform(s.weight, oc, rng);
    fill_uniform(s.bias, (size_t)OC, rng);
    fill_uniform(s.dout, no, rng);
    fill_uniform(s.dinp_start, nc, rng);
    fill_uniform(s.dweight_start, oc, rng);
    fill_uniform(s.dbias_start, (size_t)OC, rng);
    return s;
}

static void shape_free(Shape *s) {
    float *all[] = {s->inp,        s->weight,      s->bias,       s->dout,      s->out_ref,
                    s->out_fast,   s->dinp_ref,    s->dinp_fast,  s->dinp_start,   s->dweight_ref,
                    s->dweight_fast, s->dweight_start, s->dbias_ref, s->dbias_fast, s->dbias_start};
    for (int i = 0; i < COUNT(all); i++) free(all[i]);
}

START_TEST(fast_forward_matches_reference_on_ragged_shapes) {
    int N = ROW_COUNTS[_i];
    Rng rng;
    rng_init(&rng, 100 + (uint64_t)N);
    for (int ci = 0; ci < COUNT(IN_WIDTHS); ci++) {
        for (int oi = 0; oi < COUNT(OUT_WIDTHS); oi++) {
            int C = IN_WIDTHS[ci], OC = OUT_WIDTHS[oi];
            Shape s = shape_new(N, C, OC, &rng);
            for (int with_bias = 0; with_bias <= 1; with_bias++) {
                const float *bias = with_bias ? s.bias : NULL;
                linear_forward_reference(s.out_ref, s.inp, s.weight, bias, N, C, OC);
                linear_forward(s.out_fast, s.inp, s.weight, bias, N, C, OC);
                assert_close(with_bias ? "out (bias)" : "out (no bias)", s.out_fast, s.out_ref, (size_t)N * OC,
                             N, C, OC);
            }
            shape_free(&s);
        }
    }
}
END_TEST

// Sampling's one-row products (linear_forward_rows) read the weight as it
// lies, training's the engine's panels (matmul_turned); model_forward_position's
// bits equal model_forward's only if every output is the same chain of
// multiply-adds in both. The ragged shapes cover the 16-output groups and
// the outputs and columns left over; the last, GPT-2's q/k/v product, runs
// on two threads.
static void expect_rows_kernel_gives_the_engine_s_bits(int N, int C, int OC, Rng *rng) {
    Shape s = shape_new(N, C, OC, rng);
    for (int with_bias = 0; with_bias <= 1; with_bias++) {
        const float *bias = with_bias ? s.bias : NULL;
        matmul_turned(s.out_ref, (StridedMatrix){s.inp, (size_t)C, 1}, s.weight, N, C, OC, bias);
        linear_forward_rows(s.out_fast, s.inp, s.weight, bias, N, C, OC);
        if (TINYGPT_SANITIZED) {  // sanitized.h: no bit-for-bit promise there
            assert_close("rows kernel", s.out_fast, s.out_ref, (size_t)N * OC, N, C, OC);
            continue;
        }
        for (size_t i = 0; i < (size_t)N * OC; i++)
            if (memcmp(&s.out_fast[i], &s.out_ref[i], sizeof(float)) != 0)
                ck_abort_msg("N %d, C %d, OC %d, bias %d: out[%zu] %.9g on the weight as it lies, %.9g by the engine", N,
                             C, OC, with_bias, i, (double)s.out_fast[i], (double)s.out_ref[i]);
    }
    shape_free(&s);
}

START_TEST(rows_kernel_gives_the_engine_s_bits) {
    Rng rng;
    rng_init(&rng, 77);
    const int saved_threads = get_threads();
    set_threads(2);
    for (int n = 1; n <= 3; n += 2)
        for (int ci = 0; ci < COUNT(IN_WIDTHS); ci++)
            for (int oi = 0; oi < COUNT(OUT_WIDTHS); oi++)
                expect_rows_kernel_gives_the_engine_s_bits(n, IN_WIDTHS[ci], OUT_WIDTHS[oi], &rng);
    expect_rows_kernel_gives_the_engine_s_bits(1, 768, 3 * 768, &rng);
    set_threads(saved_threads);
}
END_TEST

START_TEST(fast_backward_matches_reference_on_ragged_shapes) {
    int N = ROW_COUNTS[_i];
    Rng rng;
    rng_init(&rng, 200 + (uint64_t)N);
    for (int ci = 0; ci < COUNT(IN_WIDTHS); ci++) {
        for (int oi = 0; oi < COUNT(OUT_WIDTHS); oi++) {
            int C = IN_WIDTHS[ci], OC = OUT_WIDTHS[oi];
            size_t nc = (size_t)N * C, oc = (size_t)OC * C;
            Shape s = shape_new(N, C, OC, &rng);
            for (int with_bias = 0; with_bias <= 1; with_bias++) {
                // Both start from the same non-zero gradients.
                memcpy(s.dinp_ref, s.dinp_start, nc * sizeof(float));
                memcpy(s.dinp_fast, s.dinp_start, nc * sizeof(float));
                memcpy(s.dweight_ref, s.dweight_start, oc * sizeof(float));
                memcpy(s.dweight_fast, s.dweight_start, oc * sizeof(float));
                memcpy(s.dbias_ref, s.dbias_start, (size_t)OC * sizeof(float));
                memcpy(s.dbias_fast, s.dbias_start, (size_t)OC * sizeof(float));
                linear_backward_reference(s.dinp_ref, s.dweight_ref, with_bias ? s.dbias_ref : NULL, s.dout, s.inp,
                                          s.weight, N, C, OC);
                linear_backward(s.dinp_fast, s.dweight_fast, with_bias ? s.dbias_fast : NULL, s.dout, s.inp,
                                s.weight, N, C, OC);
                assert_close("dinp", s.dinp_fast, s.dinp_ref, nc, N, C, OC);
                assert_close("dweight", s.dweight_fast, s.dweight_ref, oc, N, C, OC);
                if (with_bias) {
                    assert_close("dbias", s.dbias_fast, s.dbias_ref, (size_t)OC, N, C, OC);
                } else {  // dbias NULL: nothing may write it
                    ck_assert(memcmp(s.dbias_fast, s.dbias_start, (size_t)OC * sizeof(float)) == 0);
                }
            }
            shape_free(&s);
        }
    }
}
END_TEST

// dweight's A is dout read transposed: matmul.c copies it into strips of 8
// rows, once per k block for a group of column tiles (all of them on one
// thread, fewer on two). Shapes with two row chunks (OC 605: 512 rows, then
// 11 strips and 5 rows left over), two k blocks (N 130) and four column
// tiles, the last 8 wide (C 200), or three row chunks and a last tile 1
// wide (C 129): the same bits on one thread as on two, close to the reference.
START_TEST(dweight_on_strips_is_the_same_on_one_thread_and_two) {
    static const int SHAPES[][3] = {{130, 200, 605}, {130, 129, 1030}};
    Rng rng;
    rng_init(&rng, 400);
    const int saved_threads = get_threads();
    for (int i = 0; i < COUNT(SHAPES); i++) {
        const int N = SHAPES[i][0], C = SHAPES[i][1], OC = SHAPES[i][2];
        const size_t oc = (size_t)OC * C;
        Shape s = shape_new(N, C, OC, &rng);
        float *dweight_two = xmalloc(oc * sizeof(float));
        memcpy(s.dweight_ref, s.dweight_start, oc * sizeof(float));
        memcpy(s.dweight_fast, s.dweight_start, oc * sizeof(float));
        memcpy(dweight_two, s.dweight_start, oc * sizeof(float));
        linear_backward_reference(s.dinp_ref, s.dweight_ref, NULL, s.dout, s.inp, s.weight, N, C, OC);
        set_threads(1);
        linear_backward_params(s.dweight_fast, NULL, s.dout, s.inp, N, C, OC);
        set_threads(2);
        linear_backward_params(dweight_two, NULL, s.dout, s.inp, N, C, OC);
        assert_close("dweight (one thread)", s.dweight_fast, s.dweight_ref, oc, N, C, OC);
        expect_same_bits("dweight", s.dweight_fast, "on one thread", dweight_two, "on two", oc, N, C, OC);
        free(dweight_two);
        shape_free(&s);
    }
    set_threads(saved_threads);
}
END_TEST

// dinp's A is dout, [N, OC]: when a row chunk of it (up to 512 rows of all
// OC) passes matmul.c's L2 budget, 512 KB, an item takes a group of column
// tiles that share each k block. Shapes past it: two row chunks, three k
// blocks and a last column tile 8 wide (N 700, OC 300, C 200), or one
// chunk, nine k blocks and a last tile 1 wide (N 130, OC 1100, C 129):
// close to the reference, and the same bits on one thread as on two.
START_TEST(dinp_past_the_l2_budget_is_the_same_on_one_thread_and_two) {
    static const int SHAPES[][3] = {{700, 200, 300}, {130, 129, 1100}};
    Rng rng;
    rng_init(&rng, 500);
    const int saved_threads = get_threads();
    for (int i = 0; i < COUNT(SHAPES); i++) {
        const int N = SHAPES[i][0], C = SHAPES[i][1], OC = SHAPES[i][2];
        const size_t nc = (size_t)N * C;
        Shape s = shape_new(N, C, OC, &rng);
        float *dinp_two = xmalloc(nc * sizeof(float));
        linear_backward_reference(s.dinp_ref, s.dweight_ref, NULL, s.dout, s.inp, s.weight, N, C, OC);
        set_threads(1);
        linear_backward_input(s.dinp_fast, s.dout, s.weight, N, C, OC);
        set_threads(2);
        linear_backward_input(dinp_two, s.dout, s.weight, N, C, OC);
        assert_close("dinp (one thread)", s.dinp_fast, s.dinp_ref, nc, N, C, OC);
        expect_same_bits("dinp", s.dinp_fast, "on one thread", dinp_two, "on two", nc, N, C, OC);
        free(dinp_two);
        shape_free(&s);
    }
    set_threads(saved_threads);
}
END_TEST

// The k blocks' depth follows the L1 data cache (matmul.c): the panel, 64
// columns of 4 bytes a row, at most two thirds of it, in steps of 16 rows,
// from 64 to 128; an unknown cache (0) gets 128.
START_TEST(k_block_depth_fills_two_thirds_of_the_l1) {
    static const long L1_BYTES[] = {49152, 32768, 40960, 65536, 131072, 16384, 4096, 0, -1};
    static const int DEPTH[] = {128, 80, 96, 128, 128, 64, 64, 128, 128};
    for (int i = 0; i < COUNT(L1_BYTES); i++)
        ck_assert_msg(matmul_k_block_for(L1_BYTES[i]) == DEPTH[i], "L1 of %ld bytes: k blocks %d deep, want %d",
                      L1_BYTES[i], matmul_k_block_for(L1_BYTES[i]), DEPTH[i]);
}
END_TEST

// A k block only ends one run of a tile's sums and starts the next from
// what it stored: whatever the depth, every product gives the bits it gives
// at 128. The forward (K = C = 200), the input gradient (K = OC = 300) and
// the weight gradient on strips (K = N = 130), at depths that split them
// into blocks of 80 (the 32 KB L1's), 48 and 37 (no multiple of a vector),
// and 1, against 128's.
START_TEST(products_give_the_same_bits_at_every_k_block_depth) {
    enum { N = 130, C = 200, OC = 300 };
    static const int DEPTHS[] = {80, 48, 37, 1};
    const size_t no = (size_t)N * OC, nc = (size_t)N * C, oc = (size_t)OC * C;
    Rng rng;
    rng_init(&rng, 600);
    Shape s = shape_new(N, C, OC, &rng);
    const int saved_depth = matmul_k_block();
    matmul_set_k_block(MATMUL_K_BLOCK_MAX);
    linear_forward(s.out_ref, s.inp, s.weight, s.bias, N, C, OC);
    memcpy(s.dweight_ref, s.dweight_start, oc * sizeof(float));
    linear_backward(s.dinp_ref, s.dweight_ref, NULL, s.dout, s.inp, s.weight, N, C, OC);
    for (int d = 0; d < COUNT(DEPTHS); d++) {
        matmul_set_k_block(DEPTHS[d]);
        linear_forward(s.out_fast, s.inp, s.weight, s.bias, N, C, OC);
        memcpy(s.dweight_fast, s.dweight_start, oc * sizeof(float));
        linear_backward(s.dinp_fast, s.dweight_fast, NULL, s.dout, s.inp, s.weight, N, C, OC);
        char depth[32];
        snprintf(depth, sizeof depth, "in k blocks %d deep", DEPTHS[d]);
        expect_same_bits("out", s.out_ref, "in k blocks 128 deep", s.out_fast, depth, no, N, C, OC);
        expect_same_bits("dinp", s.dinp_ref, "in k blocks 128 deep", s.dinp_fast, depth, nc, N, C, OC);
        expect_same_bits("dweight", s.dweight_ref, "in k blocks 128 deep", s.dweight_fast, depth, oc, N, C, OC);
    }
    matmul_set_k_block(saved_depth);
    shape_free(&s);
}
END_TEST

// For both versions: dweight and dbias from a start equal start + what
// they are from zero; dinp is written whatever it held (NaN here).
START_TEST(backward_adds_to_parameter_gradients_and_writes_dinp) {
    enum { N = 5, C = 7, OC = 65 };  // ragged in every direction
    Rng rng;
    rng_init(&rng, 300);
    Shape s = shape_new(N, C, OC, &rng);
    float from_zero_inp[N * C], from_zero_weight[OC * C], from_zero_bias[OC];
    for (int fast = 0; fast <= 1; fast++) {
        // From zero...
        memset(from_zero_inp, 0, sizeof from_zero_inp);
        memset(from_zero_weight, 0, sizeof from_zero_weight);
        memset(from_zero_bias, 0, sizeof from_zero_bias);
        // ...and from the non-zero start (NaN for dinp).
        for (int i = 0; i < N * C; i++) s.dinp_fast[i] = NAN;
        memcpy(s.dweight_fast, s.dweight_start, sizeof from_zero_weight);
        memcpy(s.dbias_fast, s.dbias_start, sizeof from_zero_bias);
        if (fast) {
            linear_backward(from_zero_inp, from_zero_weight, from_zero_bias, s.dout, s.inp, s.weight, N, C, OC);
            linear_backward(s.dinp_fast, s.dweight_fast, s.dbias_fast, s.dout, s.inp, s.weight, N, C, OC);
        } else {
            linear_backward_reference(from_zero_inp, from_zero_weight, from_zero_bias, s.dout, s.inp, s.weight, N,
                                      C, OC);
            linear_backward_reference(s.dinp_fast, s.dweight_fast, s.dbias_fast, s.dout, s.inp, s.weight, N, C,
                                      OC);
        }
        // expected = start + from_zero (dinp: from_zero), reusing the _ref buffers.
        for (int i = 0; i < N * C; i++) s.dinp_ref[i] = from_zero_inp[i];
        for (int i = 0; i < OC * C; i++) s.dweight_ref[i] = s.dweight_start[i] + from_zero_weight[i];
        for (int i = 0; i < OC; i++) s.dbias_ref[i] = s.dbias_start[i] + from_zero_bias[i];
        assert_close(fast ? "dinp (fast)" : "dinp (reference)", s.dinp_fast, s.dinp_ref, N * C, N, C, OC);
        assert_close(fast ? "dweight (fast)" : "dweight (reference)", s.dweight_fast, s.dweight_ref, OC * C, N,
                     C, OC);
        assert_close(fast ? "dbias (fast)" : "dbias (reference)", s.dbias_fast, s.dbias_ref, OC, N, C, OC);
    }
    shape_free(&s);
}
END_TEST

Suite *linear_suite(void) {
    Suite *s = suite_create("linear");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, reference_forward_matches_a_hand_worked_case);
    tcase_add_test(tc, fast_forward_matches_the_same_hand_worked_case);
    tcase_add_test(tc, reference_backward_matches_finite_differences);
    tcase_add_test(tc, fast_backward_matches_finite_differences);
    tcase_add_test(tc, backward_adds_to_parameter_gradients_and_writes_dinp);
    suite_add_tcase(s, tc);

    TCase *shapes = tcase_create("shapes");
    // About 0.2 s each alone, but a few hundred two-thread parallel regions:
    // on a busy 2-core machine each barrier can wait a scheduler tick, which
    // was seen to take one iteration to 2 s, near Check's default of 4.
    tcase_set_timeout(shapes, 30);
    tcase_add_loop_test(shapes, fast_forward_matches_reference_on_ragged_shapes, 0, COUNT(ROW_COUNTS));
    tcase_add_loop_test(shapes, fast_backward_matches_reference_on_ragged_shapes, 0, COUNT(ROW_COUNTS));
    tcase_add_test(shapes, rows_kernel_gives_the_engine_s_bits);
    tcase_add_test(shapes, dweight_on_strips_is_the_same_on_one_thread_and_two);
    tcase_add_test(shapes, dinp_past_the_l2_budget_is_the_same_on_one_thread_and_two);
    tcase_add_test(shapes, k_block_depth_fills_two_thirds_of_the_l1);
    tcase_add_test(shapes, products_give_the_same_bits_at_every_k_block_depth);
    suite_add_tcase(s, shapes);
    return s;
}
