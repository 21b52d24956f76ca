// test_tile.c: tests for src/kernels/tile.h, the register tile, and
// simd.h's transpose and lane sums, and the vector forms of fastexp.h's exp
// and fasterf.h's erf, on the kernel path this build has.
//
// tile_vec (vector registers, constant ROWS and COLS) and tile_tail (the
// columns past the whole vectors) must give exactly the bits of tile_any
// (plain loops): all add the same terms in the same order, each with one
// fused multiply-add. Checked for every shape the callers
// instantiate on this path (tile.h's TILE_SHAPES, attention's head tiles,
// and one row of each), for each way a
// tile starts (zeros, a bias row, the values already in out), with A read
// as a matrix and as a transposed one, on k ranges
// that start past 0, and with out and B slices of wider rows. tile_any in
// turn is checked against a sum in double precision, so the pair is not
// just two copies of one mistake.
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fasterf.h"
#include "fastexp.h"
#include "helpers.h"
#include "rng.h"
#include "sanitized.h"
#include "tests.h"
#include "tile.h"

// Room for the largest tile plus the offsets below.
enum { MAX_ROWS = 16, MAX_COLS = 64, K = 37, K0 = 5, PAD = 3, LDO = MAX_COLS + 2 * PAD, LDB = MAX_COLS + 7 };
// rows x K matrix A, stored either way round, with room for both layouts
enum { A_SIZE = (MAX_ROWS + 1) * (K + 1) };

// The instantiations the callers use on this path; tile_vec needs its
// shape as constants.
#define W VEC_FLOATS
#if PATH_AVX512
#define PATH_SHAPES(X)                                                                           \
    X(1, 16) X(4, 16) X(16, 16) X(1, 32) X(4, 32) X(8, 32) X(2, 64) X(1, 48) X(4, 48) X(5, 48) \
        X(1, 64) X(4, 64) X(6, 64)
#else
#define PATH_SHAPES(X)                                                                                       \
    X(1, W) X(EDGE_ROWS, W) X(1, EDGE_COLS) X(EDGE_ROWS, EDGE_COLS) X(2, PAIR_COLS) X(TALL_ROWS, TALL_COLS) \
        X(STRIP_ROWS, STRIP_COLS)
#endif

static void run_tile_vec(int rows, int cols, float *out, StridedMatrix A, const float *B, TileStart start) {
#define CASE(R, COLS)                                                    \
    if (rows == (R) && cols == (COLS)) {                                 \
        tile_vec(out, LDO, A, B, LDB, K0, K, 0, PAD, start, (R), (COLS)); \
        return;                                                          \
    }
    PATH_SHAPES(CASE)
#undef CASE
    ck_abort_msg("no tile_vec instance for rows %d, cols %d", rows, cols);
}

typedef struct {
    int rows, cols;
} TileShape;

#define SHAPE(R, COLS) {(R), (COLS)},
static const TileShape SHAPES[] = {PATH_SHAPES(SHAPE)};
#undef SHAPE
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

START_TEST(vector_tile_gives_the_bits_of_the_plain_tile) {
    const TileShape shape = SHAPES[_i];
    const int rows = shape.rows, cols = shape.cols;
    Rng rng;
    rng_init(&rng, 40 + (uint64_t)_i);
    static float a_data[A_SIZE], B[K * LDB], bias[LDO], start_out[MAX_ROWS * LDO];
    static float out_any[MAX_ROWS * LDO], out_vec[MAX_ROWS * LDO];
    fill_uniform(a_data, A_SIZE, &rng);
    fill_uniform(B, K * LDB, &rng);
    fill_uniform(bias, LDO, &rng);
    fill_uniform(start_out, MAX_ROWS * LDO, &rng);
    for (int transposed = 0; transposed <= 1; transposed++) {
        // A(n,k) at n*(K+1) + k, or at k*(MAX_ROWS+1) + n: strides wider than the shape
        StridedMatrix A = transposed ? (StridedMatrix){a_data, 1, MAX_ROWS + 1} : (StridedMatrix){a_data, K + 1, 1};
        for (int how = 0; how < 3; how++) {
            TileStart start = {how == 2, how == 1 ? bias : NULL};
            memcpy(out_any, start_out, sizeof out_any);
            memcpy(out_vec, start_out, sizeof out_vec);
            tile_any(out_any, LDO, A, B, LDB, K0, K, 0, rows, PAD, cols, start);
            run_tile_vec(rows, cols, out_vec, A, B, start);
            for (int i = 0; i < MAX_ROWS * LDO; i++) {
                // Outside the tile, neither may write; inside, the same
                // bits (to 1e-6 under the sanitizer: see sanitized.h).
                double x = out_any[i], y = out_vec[i];
                if (!same_or_close(out_vec[i], out_any[i]))
                    ck_abort_msg("rows %d cols %d transposed %d start %d: out[%d] plain %.9g vs vector %.9g", rows,
                                 cols, transposed, how, i, x, y);
            }
        }
    }
}
END_TEST

// tile_tail (the columns past a tile's whole vectors, matmul.c) gives
// tile_any's bits too, for every width below a vector and both row counts
// matmul uses, each start, A either way round; and it writes nothing past
// its columns (the lanes it masks off).
START_TEST(tail_tile_gives_the_bits_of_the_plain_tile) {
    Rng rng;
    rng_init(&rng, 60);
    static float a_data[A_SIZE], B[K * LDB], bias[LDO], start_out[MAX_ROWS * LDO];
    static float out_any[MAX_ROWS * LDO], out_tail[MAX_ROWS * LDO];
    fill_uniform(a_data, A_SIZE, &rng);
    fill_uniform(B, K * LDB, &rng);
    fill_uniform(bias, LDO, &rng);
    fill_uniform(start_out, MAX_ROWS * LDO, &rng);
    for (int cols = 1; cols < VEC_FLOATS; cols++)
        for (int rows = 1; rows <= 4; rows += 3)
            for (int transposed = 0; transposed <= 1; transposed++)
                for (int how = 0; how < 3; how++) {
                    StridedMatrix A = transposed ? (StridedMatrix){a_data, 1, MAX_ROWS + 1}
                                                 : (StridedMatrix){a_data, K + 1, 1};
                    TileStart start = {how == 2, how == 1 ? bias : NULL};
                    memcpy(out_any, start_out, sizeof out_any);
                    memcpy(out_tail, start_out, sizeof out_tail);
                    tile_any(out_any, LDO, A, B, LDB, K0, K, 0, rows, PAD, cols, start);
                    if (rows == 4) tile_tail(out_tail, LDO, A, B, LDB, K0, K, 0, PAD, cols, start, EDGE_ROWS);
                    else tile_tail(out_tail, LDO, A, B, LDB, K0, K, 0, PAD, cols, start, 1);
                    for (int i = 0; i < MAX_ROWS * LDO; i++) {
                        double x = out_any[i], y = out_tail[i];
                        if (!same_or_close(out_tail[i], out_any[i]))
                            ck_abort_msg("cols %d rows %d transposed %d start %d: out[%d] plain %.9g vs tail %.9g",
                                         cols, rows, transposed, how, i, x, y);
                    }
                }
}
END_TEST

// tile_any against the definition, summed in double, on one ragged shape.
START_TEST(plain_tile_matches_a_double_precision_sum) {
    enum { ROWS = 3, COLS = 7 };
    Rng rng;
    rng_init(&rng, 77);
    static float a_data[A_SIZE], B[K * LDB], start_out[MAX_ROWS * LDO], out[MAX_ROWS * LDO];
    fill_uniform(a_data, A_SIZE, &rng);
    fill_uniform(B, K * LDB, &rng);
    fill_uniform(start_out, MAX_ROWS * LDO, &rng);
    memcpy(out, start_out, sizeof out);
    StridedMatrix A = {a_data, 1, MAX_ROWS + 1};
    tile_any(out, LDO, A, B, LDB, K0, K, 1, ROWS, PAD, COLS, (TileStart){true, NULL});
    for (int n = 0; n < MAX_ROWS; n++) {
        for (int m = 0; m < LDO; m++) {
            double expected = start_out[n * LDO + m];
            if (n >= 1 && n < 1 + ROWS && m >= PAD && m < PAD + COLS)
                for (int k = K0; k < K; k++) {
                    size_t at = (size_t)k * (MAX_ROWS + 1) + (size_t)n;
                    expected += (double)a_data[at] * B[k * LDB + m];
                }
            // 32 terms of order 1: float32 round-off well below 1e-5
            if (!(fabs(out[n * LDO + m] - expected) <= 1e-5))
                ck_abort_msg("out[%d,%d] = %.9g, expected %.9g", n, m, (double)out[n * LDO + m], expected);
        }
    }
}
END_TEST

// simd.h's in-register transpose (attention's keys and values, the
// weight's panels): every number lands at its mirrored place, and
// transposing twice gives back the block. Distinct values, so a swap of any
// two entries would show.
START_TEST(transpose_block_moves_every_entry_to_its_mirror_image) {
    vec rows[W];
    float values[W][W];
    for (int r = 0; r < W; r++)
        for (int c = 0; c < W; c++) values[r][c] = (float)(r * W + c);
    for (int r = 0; r < W; r++) rows[r] = load_vec(values[r]);
    transpose_block(rows);
    for (int r = 0; r < W; r++) {
        float out[W];
        store_vec(out, rows[r]);
        for (int c = 0; c < W; c++)
            ck_assert_msg(out[c] == values[c][r], "[%d][%d] holds %g, not %g", r, c, (double)out[c],
                          (double)values[c][r]);
    }
    transpose_block(rows);
    for (int r = 0; r < W; r++) {
        float out[W];
        store_vec(out, rows[r]);
        ck_assert_mem_eq(out, values[r], sizeof out);
    }
}
END_TEST

// The lane sums give the bits of their definition written out in scalars:
// lane i adds x[i], x[i+16], ... in order (a tail padded with 0), the
// lanes then added lane 0 first. The definition has no vector width in it,
// so every path gives these bits.
START_TEST(lane_sums_add_in_the_order_of_their_definition) {
    Rng rng;
    rng_init(&rng, 81);
    float a[83], b[83];
    fill_uniform(a, 83, &rng);
    fill_uniform(b, 83, &rng);
    for (int n = 1; n <= 83; n++) {
        float lane_sum[16] = {0}, lane_dot[16] = {0};
        for (int j = 0; j < n; j++) {
            lane_sum[j % 16] += a[j];
            lane_dot[j % 16] = fmaf(a[j], b[j], lane_dot[j % 16]);
        }
        float sum = 0.0f, dot = 0.0f;
        for (int i = 0; i < 16; i++) sum += lane_sum[i];
        for (int i = 0; i < 16; i++) dot += lane_dot[i];
        ck_assert_msg(same_or_close(row_sum(a, n), sum), "n %d: row_sum %.9g, definition %.9g", n,
                      (double)row_sum(a, n), (double)sum);
        ck_assert_msg(same_or_close(row_dot(a, b, n), dot), "n %d: row_dot %.9g, definition %.9g", n,
                      (double)row_dot(a, b, n), (double)dot);
    }
}
END_TEST

// sum16_rows, a block of rows' lanes combined a vector of rows at a time,
// gives each row sum16's bits (lane 0 first), for every block size.
START_TEST(lane_sums_of_a_block_of_rows_give_each_row_s_own) {
    Rng rng;
    rng_init(&rng, 82);
    Lanes16 lanes[16];
    for (int r = 0; r < 16; r++)
        for (int p = 0; p < LANE_PARTS; p++)
            for (int i = 0; i < VEC_FLOATS; i++) lanes[r].part[p][i] = rng_normal(&rng) * (float)(1 << (i % 12));
    for (int rows = 1; rows <= 16; rows++) {
        float sums[16];
        sum16_rows(sums, lanes, rows);
        for (int r = 0; r < rows; r++)
            ck_assert_msg(same_or_close(sums[r], sum16(lanes[r])), "rows %d: row %d %.9g, sum16 %.9g", rows, r,
                          (double)sums[r], (double)sum16(lanes[r]));
    }
}
END_TEST

// A vector kernel computes each lane on its own: every lane gives the bits
// of its value computed alone (the scalar form, a lane of a splat), for
// floats of every exponent (bit patterns 65521 apart, NaNs and infinities
// among them), the clamps' edges and the special values, each in every lane
// position, beside a NaN.
static void check_vector_form(const char *name, vec (*vector)(vec), float (*scalar)(float)) {
    static const float SPECIAL[] = {0.0f,     -0.0f,      1.0f,   -1.0f,  -87.0f,     88.0f,  -87.00001f, 88.00001f,
                                    -86.999f, 87.999f,    4.0f,   -4.0f,  4.0000005f, -4.00001f, 1e-40f, -1e-40f,
                                    0.3465736f, -0.3465736f, 1e30f, -1e30f};
    enum { N_SPECIAL = sizeof SPECIAL / sizeof SPECIAL[0] };
    float x[VEC_FLOATS];
    int filled = 0;
    uint32_t bits = 0;
    for (long step = 0; step < 65600 + N_SPECIAL + VEC_FLOATS; step++) {
        if (step < N_SPECIAL) x[filled++] = SPECIAL[step];
        else {
            memcpy(&x[filled++], &bits, sizeof bits);
            bits += 65521u;
        }
        if (filled < VEC_FLOATS) continue;
        filled = 0;
        const vec y = vector(load_vec(x));
        for (int i = 0; i < VEC_FLOATS; i++) {
            const float expected = scalar(x[i]);
            if (isnan(expected)) ck_assert_msg(isnan(y[i]), "%s(%.9g): %.9g, not NaN", name, (double)x[i], (double)y[i]);
            else ck_assert_msg(same_or_close(y[i], expected), "%s(%.9g): vector %.9g, scalar %.9g", name,
                               (double)x[i], (double)y[i], (double)expected);
        }
    }
    for (int at = 0; at < VEC_FLOATS; at++) {
        for (int i = 0; i < VEC_FLOATS; i++) x[i] = SPECIAL[(at + i) % N_SPECIAL];
        x[at] = NAN;
        const vec y = vector(load_vec(x));
        ck_assert_msg(isnan(y[at]), "%s(NaN) in lane %d: %.9g", name, at, (double)y[at]);
        for (int i = 0; i < VEC_FLOATS; i++)
            if (i != at) ck_assert(same_or_close(y[i], scalar(x[i])));
    }
}

// Addresses of the static inline kernels, to hand to check_vector_form.
static vec exp_vec_of(vec x) { return fast_exp_vec(x); }
static float exp_of(float x) { return fast_expf(x); }
static vec erf_vec_of(vec x) { return fast_erf_vec(x); }
static float erf_of(float x) { return fast_erff(x); }

START_TEST(vector_exp_and_erf_compute_each_lane_on_its_own) {
    check_vector_form("exp", exp_vec_of, exp_of);
    check_vector_form("erf", erf_vec_of, erf_of);
}
END_TEST

// fastexp.h's stated bound: relative error below 1e-7 against
// double-precision exp over [-87, 88] (steps of 1e-4); NaN stays NaN.
START_TEST(exp_keeps_its_stated_error_bound) {
    for (long i = -870000; i <= 880000; i++) {
        const float x = (float)(1e-4 * (double)i);
        const double want = exp((double)x), err = fabs((double)fast_expf(x) - want) / want;
        if (!(err < 1e-7)) ck_abort_msg("fast_expf(%.9g) is off by %.3g relative", (double)x, err);
    }
    ck_assert(isnan(fast_expf(NAN)));
}
END_TEST

Suite *tile_suite(void) {
    Suite *s = suite_create("tile");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, vector_tile_gives_the_bits_of_the_plain_tile, 0, N_SHAPES);
    tcase_add_test(tc, tail_tile_gives_the_bits_of_the_plain_tile);
    tcase_add_test(tc, plain_tile_matches_a_double_precision_sum);
    tcase_add_test(tc, transpose_block_moves_every_entry_to_its_mirror_image);
    tcase_add_test(tc, lane_sums_add_in_the_order_of_their_definition);
    tcase_add_test(tc, lane_sums_of_a_block_of_rows_give_each_row_s_own);
    tcase_add_test(tc, vector_exp_and_erf_compute_each_lane_on_its_own);
    tcase_add_test(tc, exp_keeps_its_stated_error_bound);
    suite_add_tcase(s, tc);
    return s;
}
