// test_tile.c: tests for src/kernels/tile.h, the register tile, and its
// 16 x 16 transpose.
//
// tile_vec (vector registers, constant ROWS and NV) and tile_tail (the
// columns past the whole vectors) must give exactly the bits of tile_any
// (plain loops): all add the same terms in the same order, each with one
// fused multiply-add. Checked for every shape the callers
// instantiate (rows 1, 4 and 16/NV by NV = 1..4 vectors), for each way a
// tile starts (zeros, a bias row, the values already in out), with A read
// as a matrix and as a transposed one, on k ranges
// that start past 0, and with out and B slices of wider rows. tile_any in
// turn is checked against a sum in double precision, so the pair is not
// just two copies of one mistake.
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "helpers.h"
#include "rng.h"
#include "sanitized.h"
#include "tests.h"
#include "tile.h"

// Room for the largest tile plus the offsets below.
enum { MAX_ROWS = 16, MAX_COLS = 64, K = 37, K0 = 5, PAD = 3, LDO = MAX_COLS + 2 * PAD, LDB = MAX_COLS + 7 };
// rows x K matrix A, stored either way round, with room for both layouts
enum { A_SIZE = (MAX_ROWS + 1) * (K + 1) };

// The instantiations the callers use; tile_vec needs its shape as constants.
static void run_tile_vec(int rows, int nv, float *out, StridedMatrix A, const float *B, TileStart start) {
#define CASE(R, NV)                                                          \
    if (rows == (R) && nv == (NV)) {                                         \
        tile_vec(out, LDO, A, B, LDB, K0, K, 0, PAD, start, (R), (NV));      \
        return;                                                              \
    }
    CASE(1, 1) CASE(4, 1) CASE(16, 1)
    CASE(1, 2) CASE(4, 2) CASE(8, 2)
    CASE(1, 3) CASE(4, 3) CASE(5, 3)
    CASE(1, 4) CASE(4, 4)
#undef CASE
    ck_abort_msg("no tile_vec instance for rows %d, nv %d", rows, nv);
}

typedef struct {
    int rows, nv;
} TileShape;

static const TileShape SHAPES[] = {{1, 1}, {4, 1}, {16, 1}, {1, 2}, {4, 2}, {8, 2},
                                   {1, 3}, {4, 3}, {5, 3},  {1, 4}, {4, 4}};
#define N_SHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

START_TEST(vector_tile_gives_the_bits_of_the_plain_tile) {
    const TileShape shape = SHAPES[_i];
    const int rows = shape.rows, cols = 16 * shape.nv;
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
            run_tile_vec(rows, shape.nv, out_vec, A, B, start);
            for (int i = 0; i < MAX_ROWS * LDO; i++) {
                // Outside the tile, neither may write; inside, the same
                // bits (to 1e-6 under the sanitizer: see sanitized.h).
                double x = out_any[i], y = out_vec[i];
                if (!same_or_close(out_vec[i], out_any[i]))
                    ck_abort_msg("rows %d nv %d transposed %d start %d: out[%d] plain %.9g vs vector %.9g", rows,
                                 shape.nv, transposed, how, i, x, y);
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
    for (int cols = 1; cols < 16; cols++)
        for (int rows = 1; rows <= 4; rows += 3)
            for (int transposed = 0; transposed <= 1; transposed++)
                for (int how = 0; how < 3; how++) {
                    StridedMatrix A = transposed ? (StridedMatrix){a_data, 1, MAX_ROWS + 1}
                                                 : (StridedMatrix){a_data, K + 1, 1};
                    TileStart start = {how == 2, how == 1 ? bias : NULL};
                    memcpy(out_any, start_out, sizeof out_any);
                    memcpy(out_tail, start_out, sizeof out_tail);
                    tile_any(out_any, LDO, A, B, LDB, K0, K, 0, rows, PAD, cols, start);
                    if (rows == 4) tile_tail(out_tail, LDO, A, B, LDB, K0, K, 0, PAD, cols, start, 4);
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

// simd.h's in-register transpose (attention's keys and values): every
// number lands at its mirrored place, and transposing twice gives back the
// block. Distinct values, so a swap of any two entries would show.
START_TEST(transpose16x16_moves_every_entry_to_its_mirror_image) {
    vec16 rows[16];
    float values[16][16];
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) values[r][c] = (float)(r * 16 + c);
    for (int r = 0; r < 16; r++) rows[r] = load16(values[r]);
    transpose16x16(rows);
    for (int r = 0; r < 16; r++) {
        float out[16];
        store16(out, rows[r]);
        for (int c = 0; c < 16; c++)
            ck_assert_msg(out[c] == values[c][r], "[%d][%d] holds %g, not %g", r, c, (double)out[c],
                          (double)values[c][r]);
    }
    transpose16x16(rows);
    for (int r = 0; r < 16; r++) {
        float out[16];
        store16(out, rows[r]);
        ck_assert_mem_eq(out, values[r], sizeof out);
    }
}
END_TEST

Suite *tile_suite(void) {
    Suite *s = suite_create("tile");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, vector_tile_gives_the_bits_of_the_plain_tile, 0, N_SHAPES);
    tcase_add_test(tc, tail_tile_gives_the_bits_of_the_plain_tile);
    tcase_add_test(tc, plain_tile_matches_a_double_precision_sum);
    tcase_add_test(tc, transpose16x16_moves_every_entry_to_its_mirror_image);
    suite_add_tcase(s, tc);
    return s;
}
