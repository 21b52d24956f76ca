// attention_fast.c: causal multi-head self-attention, the fast versions
// (see attention.h).
//
// Reading order: file 19, after softmax.h and attention.c (file 5), whose
// reference loops these must match. Why the tricks change no result beyond
// rounding: they only regroup the same sums into tiles, skip products
// that the mask makes zero, and draw every dropout factor from the same
// pure function of its index (rng.h), once, multiplied into the weights
// after dropout that both passes read; the one approximation is exp
// (fast_expf, within about one unit in the last place of libm's expf,
// fastexp.h). The tests hold the two versions together.
//
// The same steps as products of whole matrices, each one
// cut into tile.h's register tiles. Per (batch, head), with Q K V dOut
// the head's [T,HS] slices, P the weights after dropout (the weights
// themselves without it) and dS the gradient of the scores:
//   T x T results:  scores = Q K^T,  dweights = dOut V^T
//       tiles 4 rows by up to 64 keys (matmul.c's matmul_tile_rows), reading the
//       keys and values transposed ([HS,T], filled by transpose_head);
//   T x HS results: out = P V,  dV = P^T dOut,  dK = dS^T Q,  dQ = dS K
//       tiles of HEAD_ROWS rows by the head or a piece of it (head_product below).
// Only tiles at or left of the diagonal are computed: a tile wholly right
// of it would be all masked.
#include <math.h>
#include <omp.h>
#include <stdbool.h>
#include <stddef.h>

#include "attention.h"
#include "fast.h"
#include "matmul.h"
#include "parallel.h"
#include "rng.h"
#include "softmax.h"
#include "tile.h"

// Width of the T x T tile at columns [j0, ...) for rows up to "last": up
// to 64, but no further than the diagonal needs, rounded up to whole
// vectors (a ragged tile is many times slower than a whole one; the extra
// masked entries are overwritten with zeros afterwards), and never past T.
static int causal_tile_cols(int j0, int last, int T) {
    int needed = (last + 1 - j0 + 15) / 16 * 16;
    int cols = needed < 64 ? needed : 64;
    return cols < T - j0 ? cols : T - j0;
}

// The head tile, HEAD_ROWS(COLS) rows by COLS columns of the head. On
// AVX-512 the whole head (COLS = HS, up to 64) in 16 accumulators, the
// most that leave registers for B's row and the broadcasts; elsewhere the
// head in pieces of the path's TALL tile (tile.h's TILE_SHAPES), so that
// no path keeps more accumulators than it has registers.
#if PATH_AVX512
#define HEAD_ROWS(COLS) (16 * VEC_FLOATS / (COLS))
#else
#define HEAD_ROWS(COLS) TALL_ROWS
#endif

// What the tiles of one head product share, given to head_tile by address
// (as matmul.c's BulkTiles: by value it was copied to the stack for every
// call and read back at once, a stall on every tile).
typedef struct {
    float *out;
    size_t ldo;
    StridedMatrix A;
    const float *B;
    size_t ldb;
    TileStart start;
} HeadTiles;

// One head tile, rows [n, n + HEAD_ROWS(COLS)), columns [m, m + COLS), k in
// [k0, k1). Compiled as a function of its own off AVX-512 (as matmul.c's
// TALL tile): inlined beside the rest, gcc 12 kept some of the AVX2 tile's
// accumulators on the stack.
#if PATH_AVX512
static inline __attribute__((always_inline)) void head_tile(const HeadTiles *h, int k0, int k1, int n, int m,
                                                            const int COLS) {
    tile_vec(h->out, h->ldo, h->A, h->B, h->ldb, k0, k1, n, m, h->start, HEAD_ROWS(COLS), COLS);
}
#else
static __attribute__((noinline)) void head_tile(const HeadTiles *h, int k0, int k1, int n, int m, int COLS) {
    (void)COLS;  // always TALL_COLS here
    tile_vec(h->out, h->ldo, h->A, h->B, h->ldb, k0, k1, n, m, h->start, HEAD_ROWS(TALL_COLS), TALL_COLS);
}
#endif

// out[n, 0..HS) (+)= sum over k in [k0(n), k1(n)) of A(n, k) * B[k, 0..HS)
// for n in [n0, n0 + rows), in tiles COLS wide (COLS divides HS); per tile
// of rows, k runs over the union of its rows' ranges, given by the callers
// as the causal bounds of the tile: "lower" (P V, dS K: k <= n, so k in
// [0, last row]) or not (P^T dOut, dS^T Q: k >= n, so k in [first row,
// T)). Outside its own range a row's A is exactly zero (masked), so the
// extra terms add nothing.
static inline __attribute__((always_inline)) void head_product_cols(float *out, size_t ldo, StridedMatrix A,
                                                                    const float *B, size_t ldb, int n0, int rows,
                                                                    int T, bool lower, TileStart start, int HS,
                                                                    const int COLS) {
    const HeadTiles tiles = {out, ldo, A, B, ldb, start};
    int n = n0;
    for (; n + HEAD_ROWS(COLS) <= n0 + rows; n += HEAD_ROWS(COLS)) {
        int k0 = lower ? 0 : n, k1 = lower ? n + HEAD_ROWS(COLS) : T;
        for (int m = 0; m < HS; m += COLS) head_tile(&tiles, k0, k1, n, m, COLS);
    }
    for (; n < n0 + rows; n++)  // the last rows % HEAD_ROWS(COLS), one at a time
        for (int m = 0; m < HS; m += COLS)
            tile_vec(out, ldo, A, B, ldb, lower ? 0 : n, lower ? n + 1 : T, n, m, start, 1, COLS);
}

// head_product_cols with A's row stride written as the constant 1 when A is
// transposed, so the compiler addresses its rows' numbers as one pointer
// plus 0, 1, ... instead of keeping a register per row (as matmul.c does).
static inline __attribute__((always_inline)) void head_product_known(float *out, size_t ldo, StridedMatrix A,
                                                                     const float *B, size_t ldb, int n0, int rows,
                                                                     int T, bool lower, TileStart start, int HS,
                                                                     const int COLS) {
    if (A.row_stride == 1) {
        const StridedMatrix A_t = {A.data, 1, A.col_stride};
        head_product_cols(out, ldo, A_t, B, ldb, n0, rows, T, lower, start, HS, COLS);
    } else {
        head_product_cols(out, ldo, A, B, ldb, n0, rows, T, lower, start, HS, COLS);
    }
}

static void head_product(float *out, size_t ldo, StridedMatrix A, const float *B, size_t ldb, int n0, int rows, int T,
                         bool lower, TileStart start, int HS) {
#if VEC_FLOATS == 16
    switch (HS % 16 == 0 ? HS / 16 : 0) {
    case 1: head_product_known(out, ldo, A, B, ldb, n0, rows, T, lower, start, HS, 16); return;
    case 2: head_product_known(out, ldo, A, B, ldb, n0, rows, T, lower, start, HS, 32); return;
    case 3: head_product_known(out, ldo, A, B, ldb, n0, rows, T, lower, start, HS, 48); return;
    case 4: head_product_known(out, ldo, A, B, ldb, n0, rows, T, lower, start, HS, 64); return;
#else
    switch (HS % TALL_COLS == 0 ? 1 : 0) {
    case 1: head_product_known(out, ldo, A, B, ldb, n0, rows, T, lower, start, HS, TALL_COLS); return;
#endif
    default:  // other sizes: tiles of 4 rows by up to 64 columns, whole vectors then the rest (matmul.h)
        for (int n = n0; n < n0 + rows; n += 4) {
            const int tile_rows = n0 + rows - n < 4 ? n0 + rows - n : 4;
            for (int m0 = 0; m0 < HS; m0 += 64)
                matmul_tile_strided(out, ldo, A, B, ldb, lower ? 0 : n, lower ? n + tile_rows : T, n, tile_rows, m0,
                                    HS - m0 < 64 ? HS - m0 : 64, start);
        }
    }
}

// keys_t[i,j] = k_j[i] and values_t[i,j] = v_j[i] for one (batch, head),
// positions j in [first, last); T is the row length of keys_t and values_t;
// a NULL one is skipped.
void transpose_head(float *keys_t, float *values_t, const float *qkv_b, int first, int last, int T, int C, int HS,
                    int h) {
    const size_t C3 = 3 * (size_t)C;
    const float *keys = qkv_b + C + h * HS, *values = keys + C;
    // In blocks of W = VEC_FLOATS positions: a block's keys and values (W x
    // HS each, a few KB) stay in L1 while each channel's W entries are
    // written as one contiguous run. (One position at a time, every store
    // would land in a different cache line, T floats from the last.)
    enum { W = VEC_FLOATS };
    for (int j0 = first; j0 < last; j0 += W) {
        const int j1 = last - j0 < W ? last : j0 + W;
        if (j1 - j0 == W && HS % W == 0) {  // whole W x W blocks: in registers (simd.h)
            for (int which = 0; which < 2; which++) {  // keys, then values: W vectors each
                const float *from = which == 0 ? keys : values;
                float *to = which == 0 ? keys_t : values_t;
                if (!to) continue;
                for (int i0 = 0; i0 < HS; i0 += W) {
                    vec block[W];
                    for (int r = 0; r < W; r++) block[r] = load_vec(from + (size_t)(j0 + r) * C3 + i0);
                    transpose_block(block);
                    for (int c = 0; c < W; c++) store_vec(to + (size_t)(i0 + c) * T + j0, block[c]);
                }
            }
            continue;
        }
        for (int i = 0; i < HS; i++) {
            for (int j = j0; j < j1; j++) {
                if (keys_t) keys_t[(size_t)i * T + j] = keys[(size_t)j * C3 + i];
                if (values_t) values_t[(size_t)i * T + j] = values[(size_t)j * C3 + i];
            }
        }
    }
}

// Asks for the cache lines of rows [first, first + rows) of an output
// piece "width" floats wide, its rows row_stride floats apart, ahead of the
// tiles that write it. A head's outputs (its piece of attn_out, its three
// of dqkv) are HS floats of rows C or 3C floats long: a new 4 KB page every
// row or two, a pattern the processor's prefetchers do not follow, and a
// store to a line not in cache waits for the line to be read first. The
// tiles store whole blocks of such lines at once: card L's dV, dK and dQ
// took ~1.8x as long as with their lines asked for first (one thread,
// AVX-512). The heads' loops ask for a block's rows as they start on the
// block (its scores and softmax, or its softmax backward), whose work runs
// meanwhile. Only the lines move earlier; no result changes.
#define LINE_FLOATS 16  // floats in a 64-byte cache line
static void prefetch_for_write(float *piece, size_t row_stride, int first, int rows, int width) {
    for (int r = first; r < first + rows; r++) {
        float *row = piece + (size_t)r * row_stride;
        for (int i = 0; i < width; i += LINE_FLOATS) __builtin_prefetch(row + i, 1);
        __builtin_prefetch(row + width - 1, 1);  // a piece not starting on a line ends in one more
    }
}

// dropped[0..T) = weights[0..T) x the dropout factors of the weights with
// flat indices first_index + j (P, the weights after dropout), for the n =
// t + 1 visible j; zeros for the masked ones. A plain loop over a pure
// function: it vectorises.
static void drop_row(float *dropped, const float *weights, int n, int T, uint64_t key, size_t first_index, float p) {
    const float keep = 1.0f / (1.0f - p);
    for (int j = 0; j < n; j++) dropped[j] = weights[j] * dropout_factor(key, first_index + j, p, keep);
    for (int j = n; j < T; j++) dropped[j] = 0.0f;
}

// Steps 1-4 for the rows [t0, t0+rows) of one head, rows <= SOFTMAX_BLOCK:
// the score tiles, 4 rows by up to 64 keys, at or left of the diagonal;
// then the block's softmaxes at once (softmax_rows: row t over its t + 1
// visible keys), the masked j > t set to zero, and the weights after dropout.
static void attention_weights_rows(float *attn_weights, float *dropped_weights, const float *keys_t_bh,
                                   const float *qkv, int b, int h, int t0, int rows, int T, int C, int NH,
                                   float dropout_p, uint64_t dropout_key, uint64_t dropout_first) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const size_t head = (size_t)b * NH + h;
    const float *qkv_b = qkv + (size_t)b * T * C3;
    float *weights_bh = attn_weights + head * T * T;
    // Step 1: raw scores q_t . k_j; the softmax overwrites the masked
    // entries of a tile that straddles the diagonal with zeros.
    for (int r0 = t0; r0 < t0 + rows; r0 += 4) {
        const int tile_rows = t0 + rows - r0 < 4 ? t0 + rows - r0 : 4;
        const int last = r0 + tile_rows - 1;  // the last row's keys reach furthest
        for (int j0 = 0; j0 <= last; j0 += 64)
            matmul_tile_rows(weights_bh, qkv_b + h * HS, C3, keys_t_bh, T, HS, r0, tile_rows, j0,
                             causal_tile_cols(j0, last, T));
    }
    // Steps 2-3: row t's softmax over its t + 1 visible scores, in place
    float *weights_t0 = weights_bh + (size_t)t0 * T;
    softmax_rows(weights_t0, (size_t)T, weights_t0, (size_t)T, rows, t0 + 1, 1, T, 1.0f / sqrtf((float)HS), NULL);
    for (int t = t0; t < t0 + rows; t++) {
        const size_t row_index = (head * T + t) * T;
        for (int j = t + 1; j < T; j++) attn_weights[row_index + j] = 0.0f;
        if (dropout_p > 0.0f)  // step 4
            drop_row(dropped_weights + row_index, attn_weights + row_index, t + 1, T, dropout_key,
                     dropout_first + row_index, dropout_p);
    }
}

// Step 5 for the rows [t0, t0+rows) of one head: out_t = sum over j <= t
// of P[t,j] * v_j, that is out = P V (P: "weights", after dropout if any).
static void attention_values_rows(float *attn_out, const float *weights, const float *qkv, int b, int h, int t0,
                                  int rows, int T, int C, int NH) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const size_t head = (size_t)b * NH + h;
    StridedMatrix P = {weights + head * T * T, (size_t)T, 1};
    const float *values = qkv + (size_t)b * T * C3 + 2 * C + h * HS;
    float *out = attn_out + (size_t)b * T * C + h * HS;
    head_product(out, (size_t)C, P, values, C3, t0, rows, T, true, (TileStart){false, NULL}, HS);
}

// Sampling's cache of a head's keys, [HS, T] in all, in blocks of
// KEY_BLOCK positions: block b holds positions [b * KEY_BLOCK, +width),
// width = KEY_BLOCK but for a last, shorter block, as a [HS, width] matrix
// (each channel's keys side by side, as the scores' tiles read them). Laid
// out as one [HS, T] matrix instead, one position's key would touch HS rows
// T floats apart, a page each: the first token of a sample faulted in the
// whole cache (37 MB at GPT-2's size, ~160 ms here) and every sample kept it.
#define KEY_BLOCK 64
static size_t key_block_at(int b, int HS) { return (size_t)b * KEY_BLOCK * HS; }
static int key_block_width(int b, int T) { return T - b * KEY_BLOCK < KEY_BLOCK ? T - b * KEY_BLOCK : KEY_BLOCK; }

void cache_key(float *keys_cache, const float *qkv, int h, int t, int T, int C, int NH) {
    const int HS = C / NH, b = t / KEY_BLOCK, width = key_block_width(b, T);
    const float *key = qkv + (size_t)t * 3 * C + C + h * HS;
    float *block = keys_cache + (size_t)h * HS * T + key_block_at(b, HS);
    for (int i = 0; i < HS; i++) block[(size_t)i * width + t - b * KEY_BLOCK] = key[i];
}

// The same kernels as the two functions above, on row t alone: the score
// tiles with one row (the query's own, n0 = 0), a block of keys each, its
// softmax, and P V with the weights as a matrix whose every row is
// weights_row (row stride 0) and whose output rows all land in out_row (ldo
// 0), so that head_product, asked for row t, sums over keys 0..t as it does
// for row t of the whole window.
void attention_forward_position(float *out_row, float *weights_row, const float *keys_cache, const float *qkv, int h,
                                int t, int T, int C, int NH) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float *query = qkv + (size_t)t * C3 + h * HS, *values = qkv + 2 * C + h * HS;
    for (int b = 0; b * KEY_BLOCK <= t; b++) {
        const int width = key_block_width(b, T);
        matmul_tile_rows(weights_row + b * KEY_BLOCK, query, C3, keys_cache + (size_t)h * HS * T + key_block_at(b, HS),
                         width, HS, 0, 1, 0, width);
    }
    softmax_rows(weights_row, (size_t)T, weights_row, (size_t)T, 1, t + 1, 1, T, 1.0f / sqrtf((float)HS), NULL);
    const StridedMatrix weights = {weights_row, 0, 1};
    head_product(out_row + h * HS, 0, weights, values, C3, t, 1, T, true, (TileStart){false, NULL}, HS);
}

// The (batch, head) pairs, an orphaned `omp for`: in a region of their own
// unless one runs them already (a slice's, parallel.h).
static void attention_forward_heads(float *attn_out, float *attn_weights, float *dropped_weights, float *keys_t,
                                    const float *qkv, int B, int T, int C, int NH, float dropout_p,
                                    uint64_t dropout_key, uint64_t dropout_first) {
    const int HS = C / NH;
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const float *qkv_b = qkv + (size_t)b * T * 3 * (size_t)C;
            // This head's keys, transposed, in this thread's [HS,T] slot of
            // keys_t, reused head after head, so they stay in cache (as the
            // backward's values_t: a thread gets work only if its number is
            // below the B*NH heads, so its slot is in the buffer).
            float *keys_t_bh = keys_t + (size_t)omp_get_thread_num() * HS * T;
            transpose_head(keys_t_bh, NULL, qkv_b, 0, T, T, C, HS, h);
            float *out_bh = attn_out + (size_t)b * T * C + h * HS;
            for (int t0 = 0; t0 < T; t0 += SOFTMAX_BLOCK) {
                const int rows = T - t0 < SOFTMAX_BLOCK ? T - t0 : SOFTMAX_BLOCK;
                prefetch_for_write(out_bh, (size_t)C, t0, rows, HS);  // for P V, below
                attention_weights_rows(attn_weights, dropped_weights, keys_t_bh, qkv, b, h, t0, rows, T, C, NH,
                                       dropout_p, dropout_key, dropout_first);
            }
            attention_values_rows(attn_out, dropout_p > 0.0f ? dropped_weights : attn_weights, qkv, b, h, 0, T, T, C,
                                  NH);
        }
    }
}

void attention_forward(float *attn_out, float *attn_weights, float *dropped_weights, float *keys_t,
                       const float *qkv, int B, int T, int C, int NH, float dropout_p, uint64_t dropout_key,
                       uint64_t dropout_first) {
    RUN_SHARED((size_t)B * NH, 2,
               attention_forward_heads(attn_out, attn_weights, dropped_weights, keys_t, qkv, B, T, C, NH, dropout_p,
                                       dropout_key, dropout_first));
}

// Backward for one (batch, head), as four products (P = the weights after
// dropout, dS = gradient of the scores, Q K V dOut this head's [T,HS] slices):
//   dweights = dOut V^T, masked, times the dropout factors   (tiles, as the scores)
//   dS       = softmax backward of dweights, times scale     (row by row, in place)
//   dV       = P^T dOut;  dQ = dS K;  dK = dS^T Q             (head_product)
static void attention_backward_heads(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                                     const float *attn_weights, const float *dropped_weights, float *values_t, int B,
                                     int T, int C, int NH, float dropout_p) {
    const int HS = C / NH;
    const size_t C3 = 3 * (size_t)C;
    const float scale = 1.0f / sqrtf((float)HS);
    const float keep = 1.0f / (1.0f - dropout_p);  // a kept weight's factor, as dropout_factor's
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t head = (size_t)b * NH + h;
            const float *qkv_b = qkv + (size_t)b * T * C3;
            float *dqkv_b = dqkv + (size_t)b * T * C3;
            const float *dout_bh = dattn_out + (size_t)b * T * C + h * HS;
            const float *weights_bh = attn_weights + head * T * T;
            const float *dropped_bh = dropout_p > 0.0f ? dropped_weights + head * T * T : NULL;
            // Scratch for this head's dweights and then dS: one T x T slot per
            // thread, reused head after head, so it stays in cache instead of
            // streaming B*NH*T*T floats out to memory. (A thread gets work
            // only if its number is below the B*NH heads, so its slot is in
            // the buffer.)
            float *dscores_bh = dweights + (size_t)omp_get_thread_num() * T * T;
            // The same for this head's values, transposed: [HS,T].
            float *values_t_bh = values_t + (size_t)omp_get_thread_num() * HS * T;
            transpose_head(NULL, values_t_bh, qkv_b, 0, T, T, C, HS, h);

            // dweights[t,j] = dout_t . v_j, the tiles at or left of the diagonal
            for (int t0 = 0; t0 < T; t0 += 4) {
                const int rows = T - t0 < 4 ? T - t0 : 4, last = t0 + rows - 1;
                for (int j0 = 0; j0 <= last; j0 += 64)
                    matmul_tile_rows(dscores_bh, dout_bh, (size_t)C, values_t_bh, T, HS, t0, rows,
                                     j0, causal_tile_cols(j0, last, T));
            }
            // row by row: through dropout (x m_j), then the softmax:
            // dS[t,j] = w_j (dw_j - sum_i w_i dw_i) * scale, in place.
            // The factor m_j is read off P: a weight is an exp, positive,
            // so P[t,j] = w_j m_j is 0 exactly where m_j is, but for a w_j
            // that underflowed to 0, whose dS is 0 whatever m_j (up to the
            // sign of that 0).
            // (steps 4 and 3 of the derivation above
            // attention_backward_reference).
            // In blocks of rows: each row's sum ends in a chain of 16
            // dependent additions of its lanes, and a block's chains run
            // side by side (sum16_rows). Each row's loops run in whole
            // vectors, up to the next multiple of 16 (the tiles computed that
            // far); the masked j > t are set to zero afterwards.
            for (int t0 = 0; t0 < T; t0 += SOFTMAX_BLOCK) {
                const int rows = T - t0 < SOFTMAX_BLOCK ? T - t0 : SOFTMAX_BLOCK;
                for (int part = 0; part < 3; part++)  // dQ, dK, dV's rows, for the products below
                    prefetch_for_write(dqkv_b + (size_t)part * C + h * HS, C3, t0, rows, HS);
                Lanes16 lanes[SOFTMAX_BLOCK];
                float weighted_sum[SOFTMAX_BLOCK];
                for (int r = 0; r < rows; r++) {
                    const int t = t0 + r, whole = (t + 16) / 16 * 16 < T ? (t + 16) / 16 * 16 : T;
                    float *dscores_t = dscores_bh + (size_t)t * T;
                    if (dropped_bh)
                        for (int j = 0; j < whole; j++)
                            dscores_t[j] *= dropped_bh[(size_t)t * T + j] != 0.0f ? keep : 0.0f;
                    lanes[r] = row_dot_lanes(weights_bh + (size_t)t * T, dscores_t, t + 1);
                }
                sum16_rows(weighted_sum, lanes, rows);
                for (int r = 0; r < rows; r++) {
                    const int t = t0 + r, whole = (t + 16) / 16 * 16 < T ? (t + 16) / 16 * 16 : T;
                    const float *weights_t = weights_bh + (size_t)t * T;
                    float *dscores_t = dscores_bh + (size_t)t * T;
#ifdef TINYGPT_BREAK_SOFTMAX_BACKWARD
                    // Only in the test build $(BUILD)/tinygpt-broken (see the Makefile):
                    // a classic slip, softmax's backward without its "- weighted_sum"
                    // term, so tests can watch `tinygpt gradcheck` catch a wrong backward.
                    weighted_sum[r] = 0.0f;
#endif
                    for (int j = 0; j < whole; j++)
                        dscores_t[j] = weights_t[j] * (dscores_t[j] - weighted_sum[r]) * scale;
                    for (int j = t + 1; j < T; j++) dscores_t[j] = 0.0f;
                }
            }
            // dV = P^T dOut and dK = dS^T Q: row j of each sums over t >= j
            StridedMatrix P_transposed = {dropped_bh ? dropped_bh : weights_bh, 1, (size_t)T};
            StridedMatrix dscores_transposed = {dscores_bh, 1, (size_t)T};
            const TileStart write = {false, NULL};  // each row of each is written by one tile
            head_product(dqkv_b + 2 * C + h * HS, C3, P_transposed, dout_bh, (size_t)C, 0, T, T, false, write, HS);
            head_product(dqkv_b + C + h * HS, C3, dscores_transposed, qkv_b + h * HS, C3, 0, T, T, false, write, HS);
            // dQ = dS K: row t sums over j <= t
            StridedMatrix dscores = {dscores_bh, (size_t)T, 1};
            head_product(dqkv_b + h * HS, C3, dscores, qkv_b + C + h * HS, C3, 0, T, T, true, write, HS);
        }
    }
}

void attention_backward(float *dqkv, float *dweights, const float *dattn_out, const float *qkv,
                        const float *attn_weights, const float *dropped_weights, float *values_t, int B, int T,
                        int C, int NH, float dropout_p) {
    RUN_SHARED((size_t)B * NH, 2,
               attention_backward_heads(dqkv, dweights, dattn_out, qkv, attn_weights, dropped_weights, values_t, B, T,
                                        C, NH, dropout_p));
}
