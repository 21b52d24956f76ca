// matmul.c: the one matrix-multiply engine behind every fast product (see
// matmul.h): linear_fast.c's three products and attention_fast.c's score tiles.
#include "matmul.h"

#include <stdbool.h>
#include <stddef.h>

#include "common.h"

// One shape of loop serves every fast product in tinygpt:
//     out[n,m] (+)= sum over k of A(n,k) * Bmat[k,m]
// with Bmat row-major [K,M] and A read through strides, so A can be a matrix
// or a transposed one:
//     forward:  out = inp @ weight^T          A = inp [N,C]      Bmat = weight^T [C,OC]
//     dinp:     dinp = dout @ weight          A = dout [N,OC]    Bmat = weight [OC,C]
//     dweight:  dweight += dout^T @ inp       A = dout^T [OC,N]  Bmat = inp [N,C]
// The forward's Bmat is the weight read turned: its panels (below) are
// copied from the weight's rows, so no transposed copy of it is kept.
//
// Speed comes from three levels of reuse (the tiles' shapes are per kernel
// path, tile.h's TILE_SHAPES; the numbers below are AVX-512's):
// - registers: an EDGE_ROWS x EDGE_COLS block of out (4 x 64: 16 AVX-512
//   vectors) is held in registers while k runs, so each Bmat load feeds
//   EDGE_ROWS FMAs (the tile kernels are in tile.h). Where the column tile
//   is a full PANEL_COLS wide and A is read as it lies (the forward, dinp),
//   the tiles are TALL_ROWS = 6 rows high: 24 accumulators of the 32
//   registers, each Bmat load feeding 6 FMAs. A k of the 4-row tile is 28
//   instructions for 16 FMAs, 7 cycles of the 4 a cycle the front end
//   issues while the two FMA units take 8, so any stall shows; the 6-row tile's is 38 for 24 (9.5 against
//   12). One thread, Cascade Lake, `tinygpt peak --product` in 10-16 pairs
//   at the default's and card L's shapes: the input gradient 1-11% faster
//   (most 5-9%), the forward 1% slower to 6% faster. (Tiles of 5 and 6
//   rows, tried before the panels and the strips below, had changed
//   nothing.) A chunk's last rows go in pairs (8 accumulators, enough to
//   keep both FMA units busy), then singly;
// - cache: k runs in blocks of k_block, so the PANEL_COLS-wide slice of Bmat
//   for one block (k_block * PANEL_COLS floats) stays in L1 while all the
//   row tiles of a chunk use it: copied into a panel once per chunk, so the
//   fewer the chunks the fewer the copies. The block is as deep as lets the
//   panel fill two thirds of this CPU's L1 data cache, 128 at most (32 KB of
//   a 48 KB L1; matmul_k_block_for, below). Chunks of 512 rows (128
//   before) made card L's step ~3% faster
//   (29.3-30.2 ms against 30.0-35.1, four runs each, interleaved, on a
//   2-core Zen 5), where each thread multiplies 2048 rows alone (model.h's
//   slices). (A product one column tile wide, M <= 64, and at most 512 rows
//   is now one item, for one thread: only toy widths are that narrow.)
// - threads: a work item is one column tile of one CHUNK_ROWS-row chunk
//   (more tiles when A is transposed, below), handed out dynamically,
//   chunk after chunk: a chunk's column tiles come one after another, so
//   its rows of A (512 KB at card L: 512 rows of K = 256) stay in L2 (1-2
//   MB) for all of them. Column tile after column tile instead, a
//   thread's whole A (2 MB at card L) came back from L3 for each: card
//   L's step ~4% faster (fastest 56.1-61.6 -> 52.2-57.5 ms, eight
//   interleaved runs each, Cascade Lake). (A chunk too big for that, at
//   GPT-2's widths, shares each k block among its column tiles instead,
//   but in the forward: matmul_items.)
// When A is read transposed (dweight), the rows' numbers of A a tile
// needs for one k sit side by side in one cache line, but the next k is a
// whole row of dout further on, so every k costs a line. There the tiles
// are STRIP_ROWS = 8 rows by 32 columns instead (the same 16 accumulators),
// taking 8 numbers from each line: dweight at L went from ~74 to ~80 GFLOP/s. And
// before the tiles run, their numbers are copied into strips (pack_strips),
// reading dout row after row, in order, as the prefetcher likes it, once
// per k block for all the column tiles of an item: the tiles then read
// their A in order too. dweight's product on one thread (a slice's),
// Cascade Lake: [OC 768, C 256] over 2048 rows 66 -> 103 GFLOP/s.
// Each out element still adds its k terms in increasing order (the block
// boundaries only store and reload the partial sum), so the result does not
// depend on the number of threads, and matches the reference loops.

#define PANEL_COLS 64
#define CHUNK_ROWS 512
#define CHUNK_L2_BYTES (512 * 1024)  // half of a 1 MB L2 (Cascade Lake, Zen 4 and 5)

// The k blocks' depth. A deeper block stores and reloads each tile's
// partial sums fewer times, but its panel must stay in L1 beside the tile's
// rows of A and its out, or every row tile reads the panel from L2 again.
// One Sapphire Rapids core (48 KB of L1 data), `tinygpt peak --product` at
// 384,512,128, 2048,256,768 and 1024,768,768, the median of 5, AVX2 path:
// panels of 2/3 of the L1 (128 deep, 32 KB) the fastest; 1/2 (96 deep) 1-9%
// slower; 5/6 (160) 0-9%; the whole L1 (192) 2-9%; 1/3 (64) 1-12%. AVX-512
// path: 96 and 128 alike, 192 1-9% slower. Where the L1 is 32 KB (Zen 3 and
// 4, Skylake to Cascade Lake, Cortex-A72), 128 deep would fill all of it:
// cachegrind with Zen 3's L1 (32 KB, 8 ways) counts 3.1x the L1 read misses
// of 80-deep blocks over four baby gpt steps on the AVX2 path. (Not yet
// timed on such a CPU: docs/cpus.md.) Which blocks add which k terms does
// not change a sum's bits (see the end of the comment above).
#define K_BLOCK_STEP 16  // a multiple of every path's vector: pack_panel_turned turns whole blocks
// No shallower than 64, whatever the L1 reported: 64 deep was at most 12%
// slower than the best above, so a cache size a virtual machine misreports
// costs no more than that.
#define K_BLOCK_MIN 64

int matmul_k_block_for(long l1_data_bytes) {
    if (l1_data_bytes <= 0) return MATMUL_K_BLOCK_MAX;  // unknown: the depth a 48 KB L1 wants
    long depth = l1_data_bytes * 2 / 3 / (long)(PANEL_COLS * sizeof(float));
    depth -= depth % K_BLOCK_STEP;
    return depth < K_BLOCK_MIN ? K_BLOCK_MIN : depth > MATMUL_K_BLOCK_MAX ? MATMUL_K_BLOCK_MAX : (int)depth;
}

// Set once, before any product runs (as tinygpt starts, or by a test), and
// only read after: no thread writes it while products run.
static int k_block = MATMUL_K_BLOCK_MAX;

void matmul_set_k_block(int depth) {
    if (depth < 1 || depth > MATMUL_K_BLOCK_MAX)
        die(EXIT_RUNTIME, "matmul_set_k_block(%d): depths run from 1 to %d", depth, MATMUL_K_BLOCK_MAX);
    k_block = depth;
}

int matmul_k_block(void) { return k_block; }

// Whole vectors of columns [m0, m0 + cols) (cols a multiple of VEC_FLOATS,
// at most PANEL_COLS) of ROWS rows: EDGE_COLS at a time, then what is left
// in one tile of fewer vectors (tile_vec takes its shape as constants).
static inline __attribute__((always_inline)) void edge_tiles(float *out, size_t ldo, StridedMatrix A,
                                                             const float *Bmat, size_t ldb, int k0, int k1, int n0,
                                                             int m0, int cols, TileStart start, const int ROWS) {
    int m = 0;
    for (; m + EDGE_COLS <= cols; m += EDGE_COLS)
        tile_vec(out, ldo, A, Bmat, ldb, k0, k1, n0, m0 + m, start, ROWS, EDGE_COLS);
    switch ((cols - m) / VEC_FLOATS) {
    case 0:
        break;
#if EDGE_COLS / VEC_FLOATS > 3
    case 3:
        tile_vec(out, ldo, A, Bmat, ldb, k0, k1, n0, m0 + m, start, ROWS, 3 * VEC_FLOATS);
        break;
#endif
#if EDGE_COLS / VEC_FLOATS > 2
    case 2:
        tile_vec(out, ldo, A, Bmat, ldb, k0, k1, n0, m0 + m, start, ROWS, 2 * VEC_FLOATS);
        break;
#endif
    default:
        tile_vec(out, ldo, A, Bmat, ldb, k0, k1, n0, m0 + m, start, ROWS, VEC_FLOATS);
        break;
    }
}

// One tile of out[n0.., m0..], rows <= EDGE_ROWS by cols <= PANEL_COLS, with
// the fastest tile.h kernels that fit, in registers, one row at a time if
// fewer than EDGE_ROWS are left: the tile's whole vectors of columns, then
// the columns past them (a V = 65 head's last one) in a vector of their own.
static inline __attribute__((always_inline)) void matmul_tile(float *out, size_t ldo, StridedMatrix A,
                                                              const float *Bmat, size_t ldb, int k0, int k1, int n0,
                                                              int rows, int m0, int cols, TileStart start) {
    const int whole_cols = cols / VEC_FLOATS * VEC_FLOATS, tail = cols - whole_cols;
    for (int r = 0; r < rows; r += rows == EDGE_ROWS ? EDGE_ROWS : 1) {
        const bool whole = rows == EDGE_ROWS;
        if (tail > 0) {
            if (whole) tile_tail(out, ldo, A, Bmat, ldb, k0, k1, n0 + r, m0 + whole_cols, tail, start, EDGE_ROWS);
            else tile_tail(out, ldo, A, Bmat, ldb, k0, k1, n0 + r, m0 + whole_cols, tail, start, 1);
        }
        if (whole_cols == 0) continue;
        if (whole) edge_tiles(out, ldo, A, Bmat, ldb, k0, k1, n0 + r, m0, whole_cols, start, EDGE_ROWS);
        else edge_tiles(out, ldo, A, Bmat, ldb, k0, k1, n0 + r, m0, whole_cols, start, 1);
    }
}

static inline int min_int(int a, int b) { return a < b ? a : b; }

// The bulk of every product: the TALL and STRIP tiles. Off AVX-512 each is
// compiled as a function of its own: inlined into matmul_items beside the
// other tiles, the AVX2 build kept half of the TALL tile's 12 accumulators
// on the stack (gcc 12 left registers to values of the other tiles), and
// alone each has the registers to itself. AVX-512's 32 registers leave
// room, and there the calls cost 3-8% of the forward's speed.
// What the tiles of one column tile and k block share comes as one
// BulkTiles, by its address: passed by value, the StridedMatrix and the
// TileStart were copied to the stack for every call and read back at once,
// and the loads waited on the stores (~9% of an AVX2 step).
typedef struct {
    float *out;        // the column tile's out, at column m0
    size_t ldo;
    StridedMatrix A;   // from this k block's first column (TALL)
    const float *B;    // the panel, or Bmat where it lies
    size_t ldb;
    int depth;         // k1 - k0
    TileStart start;
} BulkTiles;

#if PATH_AVX512
#define BULK_TILE static inline __attribute__((always_inline))
#else
#define BULK_TILE static __attribute__((noinline))
#endif
// The TALL tile at rows [n0, n0 + TALL_ROWS), columns [m, m + TALL_COLS) of the column tile.
BULK_TILE void tall_tile(const BulkTiles *t, int n0, int m) {
    tile_vec(t->out, t->ldo, t->A, t->B, t->ldb, 0, t->depth, n0, m, t->start, TALL_ROWS, TALL_COLS);
}
// The STRIP tile of rows [n0, n0 + STRIP_ROWS), read from "strip".
BULK_TILE void strip_tile(const BulkTiles *t, const float *strip, int n0, int m) {
    const StridedMatrix A_strip = {strip, 1, STRIP_ROWS};  // row stride 1: a constant the compiler sees
    tile_vec(t->out + (size_t)n0 * t->ldo, t->ldo, A_strip, t->B, t->ldb, 0, t->depth, 0, m, t->start, STRIP_ROWS,
             STRIP_COLS);
}

// Each thread's copy of the Bmat block its tiles are reading, rows
// PANEL_COLS floats apart (see matmul).
static _Thread_local float b_panel[MATMUL_K_BLOCK_MAX * PANEL_COLS] __attribute__((aligned(64)));

// panel[k - k0, 0..cols) = Bmat[k, m0..m0+cols) for k in [k0, k1)
static void pack_panel(float *panel, const float *Bmat, size_t M, int k0, int k1, int m0, int cols) {
    for (int k = k0; k < k1; k++)
        for (int j = 0; j < cols; j++) panel[(size_t)(k - k0) * PANEL_COLS + j] = Bmat[(size_t)k * M + m0 + j];
}

// The same panel when Bmat comes as its transpose, Bt[M,K] (a linear
// layer's weight [OC,C]): panel[k - k0, j] = Bt[m0 + j, k]. Bt's rows are
// the panel's columns, so it is turned as it is copied, VEC_FLOATS x
// VEC_FLOATS floats at a time in registers (transpose_block, simd.h): a
// load of a row piece each, a store of a panel row piece each. What no
// whole block covers (a head of V = 65 columns, K not a multiple of the
// vector) goes one float at a time.
static void pack_panel_turned(float *panel, const float *Bt, size_t K, int k0, int k1, int m0, int cols) {
    enum { W = VEC_FLOATS };
    int j0 = 0;
    for (; j0 + W <= cols; j0 += W) {
        int k = k0;
        for (; k + W <= k1; k += W) {
            vec block[W];
            for (int r = 0; r < W; r++) block[r] = load_vec(Bt + (size_t)(m0 + j0 + r) * K + k);
            transpose_block(block);  // block[c][r] = Bt[m0 + j0 + r, k + c]
            for (int c = 0; c < W; c++) store_vec(panel + (size_t)(k - k0 + c) * PANEL_COLS + j0, block[c]);
        }
        for (; k < k1; k++)
            for (int j = j0; j < j0 + W; j++) panel[(size_t)(k - k0) * PANEL_COLS + j] = Bt[(size_t)(m0 + j) * K + k];
    }
    for (int j = j0; j < cols; j++)
        for (int k = k0; k < k1; k++) panel[(size_t)(k - k0) * PANEL_COLS + j] = Bt[(size_t)(m0 + j) * K + k];
}

// Each thread's copy of A's numbers for its tiles when A comes transposed:
// strip s holds rows [n0 + STRIP_ROWS s, +STRIP_ROWS) for k in [k0, k1), k
// after k, the rows' numbers side by side (see pack_strips). The strips lie
// 16 floats more than a multiple of 4 KB apart (AVX-512's 8-row strips:
// 4 KB apart, the 64 strips a row of dout is copied into would all fall in
// one set of the L1 cache, 8 lines). A block shallower than MATMUL_K_BLOCK_MAX
// leaves the end of each strip unused.
#define STRIP_STRIDE (MATMUL_K_BLOCK_MAX * STRIP_ROWS + 16)
static _Thread_local float a_strips[CHUNK_ROWS / STRIP_ROWS * STRIP_STRIDE] __attribute__((aligned(64)));

// strips[s, k - k0, r] = A(n0 + STRIP_ROWS s + r, k) for k in [k0, k1) ("A"
// starting at k0, "depth" = k1 - k0; "count" strips), when A is transposed
// (row stride 1): A's numbers for one k are a row of the matrix in memory,
// read in order.
static void pack_strips(float *strips, StridedMatrix A, int n0, int count, int depth) {
    for (int k = 0; k < depth; k++) {
        const float *from = A.data + (size_t)k * A.col_stride + n0;
        for (int s = 0; s < count; s++)
#pragma GCC unroll 8
            for (int r = 0; r < STRIP_ROWS; r++)
                strips[(size_t)s * STRIP_STRIDE + k * STRIP_ROWS + r] = from[STRIP_ROWS * s + r];
    }
}

// A with its column k0 as column 0: a k block's view of it.
static inline StridedMatrix from_column(StridedMatrix A, int k0) {
    return (StridedMatrix){A.data + (size_t)k0 * A.col_stride, A.row_stride, A.col_stride};
}

// One product, as matmul_items is given it: out[N,M] (+)= A(N,K) @ Bmat[K,M],
// or, when "turned", A(N,K) @ Bt[M,K]^T with "Bmat" pointing at Bt. (N is
// the work items' business, not a tile's.)
typedef struct {
    float *out;
    StridedMatrix A;
    const float *Bmat;
    bool turned;
    int K, M;
} Product;

// One column tile [m0, m0 + cols) of the product's rows [n0, chunk_end) for
// the k block [k0, k1) ("start" where its sums start): its Bmat panel packed
// (or not, see below), then its row tiles (tile.h's TILE_SHAPES): of a full
// column tile, TALL high where A is read as it lies, the rows left in
// pairs; STRIP high from "strips" (pack_strips, packed for these rows and
// this k block) where A is transposed; the rows left, and a narrower column
// tile, in matmul_tile's EDGE tiles.
static inline __attribute__((always_inline)) void column_tile_block(const Product *p, const float *strips, int n0,
                                                                    int chunk_end, int k0, int k1, int m0, int cols,
                                                                    TileStart start) {
    float *out = p->out;
    const size_t ldo = (size_t)p->M;
    const StridedMatrix A = from_column(p->A, k0);
    // The panel pays for its copy only when several row tiles reuse it; a
    // few rows read Bmat where it lies. Bt cannot be read so: its panel is
    // always turned into place.
    const bool packed = p->turned || chunk_end - n0 > EDGE_ROWS;
    if (p->turned) pack_panel_turned(b_panel, p->Bmat, (size_t)p->K, k0, k1, m0, cols);
    else if (packed) pack_panel(b_panel, p->Bmat, (size_t)p->M, k0, k1, m0, cols);
    const float *b_block = packed ? b_panel : p->Bmat + (size_t)k0 * p->M + m0;
    const size_t ldb = packed ? PANEL_COLS : (size_t)p->M;
    const int depth = k1 - k0;
    const BulkTiles bulk = {out + m0, ldo, A, b_block, ldb, depth, start};
    if (strips && cols == PANEL_COLS) {
        // A transposed: each tile reads its STRIP_ROWS x depth numbers in
        // order from a strip (row stride 1, column stride STRIP_ROWS).
        for (const float *strip = strips; n0 + STRIP_ROWS <= chunk_end; n0 += STRIP_ROWS, strip += STRIP_STRIDE)
            for (int m = 0; m < PANEL_COLS; m += STRIP_COLS)
                strip_tile(&bulk, strip, n0, m);
    } else if (cols == PANEL_COLS) {
        // A read as it lies (forward, dinp): tiles TALL_ROWS high, the rows
        // left in pairs (see above).
        for (; n0 + TALL_ROWS <= chunk_end; n0 += TALL_ROWS)
            for (int m = 0; m < PANEL_COLS; m += TALL_COLS)
                tall_tile(&bulk, n0, m);
        for (; n0 + 2 <= chunk_end; n0 += 2)
            for (int m = 0; m < PANEL_COLS; m += PAIR_COLS)
                tile_vec(out + m0, ldo, A, b_block, ldb, 0, depth, n0, m, start, 2, PAIR_COLS);
    }
    for (; n0 < chunk_end; n0 += EDGE_ROWS)
        matmul_tile(out + m0, ldo, A, b_block, ldb, 0, depth, n0, min_int(EDGE_ROWS, chunk_end - n0), 0, cols, start);
}

// The work items of out[N,M] (+)= A(N,K) @ Bmat[K,M], or, when "turned",
// of out[N,M] = A(N,K) @ Bt[M,K]^T ("Bmat" then points at Bt), shared among the
// threads of the parallel region the caller is in: an orphaned `omp for`,
// which binds to that region, or runs them all when there is none. "nowait":
// no barrier after them; the region's end is the barrier, so a region can
// run two independent products back to back (matmul_pair) and a thread done
// with the first starts on the second.
// An item is one CHUNK_ROWS-row chunk by one column tile, or, when A is
// transposed, by as many column tiles as still leave two items a thread
// (all of them on one thread, a slice's): its strips, packed once per k
// block, serve them all.
// (One copy of it, called by matmul and matmul_pair alike, with the tile kernels
// compiled into it: left to itself gcc made two copies and called
// matmul_tile as a function, ~2% slower.)
static __attribute__((noinline)) void matmul_items(float *out, StridedMatrix A, const float *Bmat, bool turned, int N,
                                                   int K, int M, bool accumulate, const float *init_row) {
    const Product product = {out, A, Bmat, turned, K, M};
    const int row_chunks = (N + CHUNK_ROWS - 1) / CHUNK_ROWS, col_tiles = (M + PANEL_COLS - 1) / PANEL_COLS;
    const bool transposed = A.row_stride == 1 && A.col_stride != 1;
    // A chunk's rows of A, all K of them, too big to stay in L2 while each
    // column tile reads them (a GPT-2 layer's dinp: 512 rows of K = 3072,
    // 6 MB): the item's column tiles then share each k block of A instead,
    // as the strips do (see above). One thread, Cascade Lake: the input
    // gradient at GPT-2's shapes (`tinygpt peak --product 1024,768,3072`,
    // `512,768,2304`) 64-85 -> 84-96 GFLOP/s; a gpt 768 wide (T 256, B 8)
    // 7-15% faster a step. Not for the forward (Bt turned into panels):
    // there it ran no faster, or slower.
    const bool chunk_past_l2 = (size_t)min_int(N, CHUNK_ROWS) * (size_t)K * sizeof(float) > CHUNK_L2_BYTES;
    // Two items a thread let a team even out its work; a team of one (a
    // slice's) has nothing to even out, and each more item packs the same
    // strips again: one item then (a slice's dweight at the default gpt's
    // shapes ~5% faster, AVX2 path).
    int tiles_per_item = 1;
    if (transposed || (chunk_past_l2 && !turned)) {
        const int threads = omp_get_num_threads();
        const int groups_wanted = threads == 1 ? 1 : (2 * threads + row_chunks - 1) / row_chunks;
        tiles_per_item = groups_wanted >= col_tiles ? 1 : (col_tiles + groups_wanted - 1) / groups_wanted;
    }
    const int groups = (col_tiles + tiles_per_item - 1) / tiles_per_item;
    // Dynamic scheduling: work items differ in cost (a ragged edge tile of
    // the head, V = 65 columns, is one column wide), and a static split can
    // hand one thread all the full tiles. Which thread computes a tile does
    // not change its bits.
#pragma omp for collapse(2) schedule(dynamic) nowait
    for (int rc = 0; rc < row_chunks; rc++) {
        for (int group = 0; group < groups; group++) {
            const int n0 = rc * CHUNK_ROWS, chunk_end = min_int(N, n0 + CHUNK_ROWS);
            const int ct_end = min_int(col_tiles, (group + 1) * tiles_per_item);
            // Only whole column tiles read strips: none, if the group's first
            // tile is the ragged last one (or M < PANEL_COLS).
            const bool strips = transposed && M - group * tiles_per_item * PANEL_COLS >= PANEL_COLS;
            for (int k0 = 0; k0 < K || k0 == 0; k0 += k_block) {
                const int k1 = min_int(K, k0 + k_block);
                if (strips) pack_strips(a_strips, from_column(A, k0), n0, (chunk_end - n0) / STRIP_ROWS, k1 - k0);
                for (int ct = group * tiles_per_item; ct < ct_end; ct++) {
                    const int m0 = ct * PANEL_COLS;
                    const TileStart start = {accumulate || k0 > 0, init_row ? init_row + m0 : NULL};
                    column_tile_block(&product, strips ? a_strips : NULL, n0, chunk_end, k0, k1, m0,
                                      min_int(PANEL_COLS, M - m0), start);
                }
            }
        }
    }
}

// Small products, and those a region runs already (a slice's), start no
// region of their own (parallel.h): a sampled token's one-row products
// spent most of their time starting and ending teams of one.
void matmul(float *out, StridedMatrix A, const float *Bmat, int N, int K, int M, bool accumulate,
            const float *init_row) {
    RUN_SHARED((size_t)N * K * M, MIN_PARALLEL_WORK, matmul_items(out, A, Bmat, false, N, K, M, accumulate, init_row));
}

void matmul_turned(float *out, StridedMatrix A, const float *Bt, int N, int K, int M, const float *init_row) {
    RUN_SHARED((size_t)N * K * M, MIN_PARALLEL_WORK, matmul_items(out, A, Bt, true, N, K, M, false, init_row));
}

void matmul_pair(float *out1, StridedMatrix A1, const float *Bmat1, int N1, int K1, int M1, bool accumulate1,
                 float *out2, StridedMatrix A2, const float *Bmat2, int N2, int K2, int M2, bool accumulate2) {
    RUN_SHARED((size_t)N1 * K1 * M1 + (size_t)N2 * K2 * M2, MIN_PARALLEL_WORK, {
        matmul_items(out1, A1, Bmat1, false, N1, K1, M1, accumulate1, NULL);
        matmul_items(out2, A2, Bmat2, false, N2, K2, M2, accumulate2, NULL);
    });
}

void matmul_tile_rows(float *out, const float *A, size_t lda, const float *Bmat, int M, int K, int n0, int rows,
                      int m0, int cols) {
    StridedMatrix a = {A, lda, 1};
    matmul_tile(out, (size_t)M, a, Bmat, (size_t)M, 0, K, n0, rows, m0, cols, (TileStart){false, NULL});
}

void matmul_tile_strided(float *out, size_t ldo, StridedMatrix A, const float *B, size_t ldb, int k0, int k1, int n0,
                         int rows, int m0, int cols, TileStart start) {
    matmul_tile(out, ldo, A, B, ldb, k0, k1, n0, rows, m0, cols, start);
}

