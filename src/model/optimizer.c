// optimizer.c: gradient clipping, the learning-rate schedule, and the SGD,
// AdamW and Muon updates (see optimizer.h for why each exists and the math
// of each).
//
// Reading order: file 13, after model.h's model_sgd_step. The file in
// three parts, in the order a training step uses them: the norm and the
// clipping, the schedule, the update.
//
// Where PyTorch computes something, this file computes it in the same order
// and at the same precision: a Python float (double) is turned into a float32
// scalar once, where torch does it, and each torch operation on a tensor is
// one rounding here. That keeps a float32 run as close to PyTorch's as two
// programs can be.
#include "optimizer.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fast.h"
#include "linear.h"

// Below this many elements, waking the other threads costs more than the
// work (as in residual.c).
#define MIN_PARALLEL_ELEMENTS (1 << 16)

// The gradient norm is summed in this many parts, fixed whatever the thread
// count, each part a fixed slice of the gradients: the threads share the
// parts out, and the parts' sums are added in order.
#define NORM_PARTS 64

// torch.nn.utils.clip_grad_norm_ adds this to the norm before dividing.
#define CLIP_NORM_EPS 1e-6

const char *const OPTIMIZER_NAMES[] = {"sgd", "adamw", "muon", NULL};
const char *const LR_SCHEDULE_NAMES[] = {"constant", "cosine", NULL};

void optimizer_init(Optimizer *opt, const OptimizerConfig *cfg, const Model *model) {
    memset(opt, 0, sizeof *opt);
    opt->cfg = *cfg;
    opt->size = model->param_table.total;
    if (cfg->kind == OPT_ADAMW || cfg->kind == OPT_MUON) {
        opt->m = xcalloc_lines(opt->size, sizeof *opt->m);
        opt->v = xcalloc_lines(opt->size, sizeof *opt->v);
    }
    if (cfg->kind == OPT_MUON) {
        opt->momentum = xcalloc_lines(opt->size, sizeof *opt->momentum);
        size_t scratch = 0;  // Newton-Schulz's X and X's next value [m,n], A and its square [m,m]
        for (int k = 0; k < model->param_table.count; k++) {
            const TensorSpec *spec = &model->param_table.specs[k];
            if (!optimizer_uses_muon(spec)) continue;
            const size_t m = spec->shape[0] < spec->shape[1] ? spec->shape[0] : spec->shape[1];
            const size_t n = spec->size / m;
            if (2 * m * n + 2 * m * m > scratch) scratch = 2 * m * n + 2 * m * m;
        }
        opt->ns_scratch = xcalloc_lines(scratch ? scratch : 1, sizeof *opt->ns_scratch);
    }
}

void optimizer_free(Optimizer *opt) {
    xfree_lines(opt->ns_scratch);
    xfree_lines(opt->momentum);
    xfree_lines(opt->v);
    xfree_lines(opt->m);
    opt->m = opt->v = opt->momentum = opt->ns_scratch = NULL;
}

// ===========================================================================
// The gradient norm and clipping.

// sum_of_squares: x[0]^2 + ... + x[n-1]^2 in double. Eight running sums
// (sum j takes x[j], x[j+8], x[j+16], ...) instead of one: the compiler may
// not reorder a single sum (that would change its rounding), but eight
// independent ones it can keep in one vector register. Then the eight are
// added in order, then the last n % 8 elements.
static double sum_of_squares(const float *x, size_t n) {
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] += (double)x[i + j] * x[i + j];
    double sum = 0.0;
    for (int j = 0; j < 8; j++) sum += lane[j];
    for (; i < n; i++) sum += (double)x[i] * x[i];
    return sum;
}

// part_begin: where part p of n elements cut into NORM_PARTS starts (the
// first n % NORM_PARTS parts are one element longer); part p ends where p+1
// begins.
static size_t part_begin(size_t n, int p) {
    const size_t q = n / NORM_PARTS, r = n % NORM_PARTS;
    return (size_t)p * q + ((size_t)p < r ? (size_t)p : r);
}

// norm = sqrt(sum over every gradient element of g^2). torch takes each
// tensor's norm in float32 and then the norm of those; one sum in double
// over the whole buffer is the same number, rounded less.
double optimizer_grad_norm(const Model *model) {
    const float *grad = model->grads_memory;
    const size_t n = model->param_table.total;
    double part_sum[NORM_PARTS];
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
    for (int p = 0; p < NORM_PARTS; p++) {
        const size_t begin = part_begin(n, p), end = part_begin(n, p + 1);
        part_sum[p] = sum_of_squares(grad + begin, end - begin);
    }
    double sum = 0.0;
    for (int p = 0; p < NORM_PARTS; p++) sum += part_sum[p];
    return sqrt(sum);
}

// Clipping bounds the step a single unusual batch can cause: every
// gradient is scaled by the same factor, so the step keeps its direction
// and its joint norm is at most max_norm. How: torch 1.13's
// clip_grad_norm_, whose total_norm is a float32 tensor:
//   clip_coef = max_norm / (total_norm + 1e-6)
//   clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
//   for g in grads: g.mul_(clip_coef_clamped)
// A Python float divided by a tensor is tensor.reciprocal() * float
// (Tensor.__rtruediv__), so the factor is computed here as torch does, in
// float32 from the norm rounded to float. torch multiplies even when the
// factor is 1 (which changes no bit), and so does this. A NaN norm gives a
// NaN factor (the clamp keeps NaN), so a broken gradient stays visibly
// broken for the NaN guard after the step.
void optimizer_scale_grads(Model *model, double norm, double max_norm) {
    if (max_norm > 0.0) {
        float scale = (1.0f / ((float)norm + (float)CLIP_NORM_EPS)) * (float)max_norm;
        if (scale > 1.0f) scale = 1.0f;
        float *grad = model->grads_memory;
        const size_t n = model->param_table.total;
#pragma omp parallel for schedule(static) if (n >= MIN_PARALLEL_ELEMENTS)
        for (size_t i = 0; i < n; i++) grad[i] *= scale;
    }
}

double optimizer_clip_grads(Model *model, double max_norm) {
    const double norm = optimizer_grad_norm(model);
    optimizer_scale_grads(model, norm, max_norm);
    return norm;
}

// ===========================================================================
// The learning-rate schedule.

// python_product: a * b rounded to a double, as Python rounds it before
// adding it to anything. gcc, told to fuse a * b + c into one multiply-add
// (-ffp-contract=fast, see the Makefile), would skip that rounding, and
// about one cosine lr in five would differ from nanoGPT's in its last bit.
// A volatile must be stored, so it is rounded.
static double python_product(double a, double b) {
    volatile double product = a * b;
    return product;
}

// The learning rate of step "it": a warmup from near 0 while the weights
// are random and AdamW's v has seen few gradients, then a slow cosine fall
// to min_lr so the last steps settle rather than jump about (optimizer.h).
// How: nanoGPT's get_lr, in its order of operations:
//   if it < warmup_iters: return learning_rate * (it + 1) / (warmup_iters + 1)
//   if it > lr_decay_iters: return min_lr
//   decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
//   coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
//   return min_lr + coeff * (learning_rate - min_lr)
// At it == decay_steps the cosine is exactly min_lr (cos(pi) = -1, so coeff
// = 0), which is why `>=` below changes nothing for nanoGPT's schedule; it
// also covers decay_steps <= warmup_steps, where nanoGPT would divide by zero.
//
// constant: the same warmup (none when warmup_steps is 0, nanoGPT's
// decay_lr = False), then lr for ever.
double optimizer_lr(const OptimizerConfig *cfg, long it) {
    if (it < cfg->warmup_steps) return cfg->lr * (double)(it + 1) / (double)(cfg->warmup_steps + 1);
    if (cfg->schedule == LR_CONSTANT) return cfg->lr;
    if (it >= cfg->decay_steps) return cfg->min_lr;
    const double decay_ratio = (double)(it - cfg->warmup_steps) / (double)(cfg->decay_steps - cfg->warmup_steps);
    const double coeff = 0.5 * (1.0 + cos(M_PI * decay_ratio));
    return cfg->min_lr + python_product(coeff, cfg->lr - cfg->min_lr);
}

// With --time, the step's own decay ratio is what optimizer_lr computes;
// the time's is the fraction spent. A run of --time alone has decay_steps
// far beyond any step it will reach, so there the time alone decides.
double optimizer_lr_timed(const OptimizerConfig *cfg, long it, double time_fraction) {
    if (time_fraction <= 0.0 || it < cfg->warmup_steps || cfg->schedule == LR_CONSTANT) return optimizer_lr(cfg, it);
    double ratio = it >= cfg->decay_steps ? 1.0
                                          : (double)(it - cfg->warmup_steps) / (double)(cfg->decay_steps - cfg->warmup_steps);
    if (time_fraction > ratio) ratio = time_fraction;
    if (ratio >= 1.0) return cfg->min_lr;
    const double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return cfg->min_lr + python_product(coeff, cfg->lr - cfg->min_lr);
}

// ===========================================================================
// The update.

bool optimizer_decays(const TensorSpec *spec) { return spec->ndim == 2; }

bool optimizer_uses_muon(const TensorSpec *spec) {
    return spec->ndim == 2 && strncmp(spec->name, "blocks.", strlen("blocks.")) == 0;
}

// SGD: w -= lr * g, model_sgd_step's loop (torch.optim.SGD without momentum:
// param.add_(grad, alpha=-lr), one fused multiply-add per weight, as gcc
// compiles this line).
static void sgd_step(Model *model, float lr) {
    float *w = model->params_memory;
    const float *grad = model->grads_memory;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < model->param_table.total; i++) w[i] -= lr * grad[i];
}

// The numbers AdamW's update t shares between all weights. torch computes
// them in Python (double) and each becomes a float32 scalar when it meets a
// tensor; here each is computed in double and rounded to float once.
typedef struct {
    float beta1, one_minus_beta1;      // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    float beta2, one_minus_beta2;      // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    float bias_correction2_sqrt;       // sqrt(1 - beta2^t)
    float eps;
    float minus_step_size;             // -lr / (1 - beta1^t)
} AdamwScalars;

// AdamW's five steps, each with what it is for (optimizer.h says why):
//   1. w *= 1 - lr * weight_decay          decoupled decay, outside the scaled step
//   2. m = beta1 m + (1 - beta1) g          momentum: the gradients' running mean
//   3. v = beta2 v + (1 - beta2) g^2        their running mean square: each weight's scale
//   4. denom = sqrt(v / (1 - beta2^t)) + eps        v bias-corrected; its root is g's typical size
//   5. w -= lr / (1 - beta1^t) * m / denom          m bias-corrected, over that size: a step of about lr
// How: in the order of torch 1.13's _single_tensor_adamw, one line per
// operation on a tensor:
//   1. param.mul_(1 - lr * weight_decay)
//   2. exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
//   3. exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
//   4. denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
//   5. param.addcdiv_(exp_avg, denom, value=-step_size)
// Each operation rounds its result to float32, and so must this code. gcc
// fuses a * b + c into one multiply-add, which skips the rounding of a * b
// (-ffp-contract=fast, see the Makefile), and decides for itself where:
//   - step 1 is its own loop (adamw_decay), so that its product is stored,
//     and rounded, before step 5 adds to it. In one loop gcc fused the two
//     (w * decay + step) and a third of the weights differed from torch's
//     in their last bits after a few steps;
//   - steps 2 and 3 are fused in torch too: its CPU add_ with alpha is
//     fmadd(grad, alpha, self), and addcmul's self + (value * grad) * grad
//     is compiled (by gcc) to the same; fmaf says so here rather than
//     leaving it to the compiler.
// Both functions are worksharing loops without their own parallel region:
// the threads of the caller's region split them, and a caller with no
// region runs them whole.

// adamw_decay: step 1 on a tensor that decays: w[n] *= 1 - lr * weight_decay.
static void adamw_decay(float *w, size_t n, float decay) {
#pragma omp for schedule(static) nowait
    for (size_t i = 0; i < n; i++) w[i] *= decay;
}

// adamw_update: steps 2-5 on one tensor's n weights w, gradients g, moments
// m and v. gcc vectorises it only when told that errno does not matter
// (-fno-math-errno, which changes no result; PyTorch is built with it):
// sqrtf of a negative number sets errno, a side effect no vector
// instruction has. Without it the update runs one weight at a time, about
// six times slower (2.5 ms against 0.4 ms for 0.8M weights on one core).
static void adamw_update(float *restrict w, const float *restrict g, float *restrict m, float *restrict v, size_t n,
                         const AdamwScalars *s) {
    const AdamwScalars c = *s;  // a local copy: no store in the loop can change it
#pragma omp for schedule(static) nowait
    for (size_t i = 0; i < n; i++) {
        m[i] = fmaf(g[i], c.one_minus_beta1, m[i] * c.beta1);                // 2.
        v[i] = fmaf(c.one_minus_beta2 * g[i], g[i], v[i] * c.beta2);         // 3.
        const float denom = sqrtf(v[i]) / c.bias_correction2_sqrt + c.eps;   // 4.
        w[i] = w[i] + c.minus_step_size * m[i] / denom;                      // 5.
    }
}

// adamw_step: AdamW on every tensor, or with "skip_muon" on every tensor
// Muon does not move.
static void adamw_step(Optimizer *opt, Model *model, double lr, bool skip_muon) {
    const OptimizerConfig *cfg = &opt->cfg;
    const double t = (double)opt->step + 1.0;  // torch's state['step'], after its += 1
    const double bias_correction1 = 1.0 - pow(cfg->beta1, t);
    const double bias_correction2 = 1.0 - pow(cfg->beta2, t);
    const AdamwScalars s = {
        .beta1 = (float)cfg->beta1,
        .one_minus_beta1 = (float)(1.0 - cfg->beta1),
        .beta2 = (float)cfg->beta2,
        .one_minus_beta2 = (float)(1.0 - cfg->beta2),
        .bias_correction2_sqrt = (float)sqrt(bias_correction2),
        .eps = (float)OPTIMIZER_EPS,
        .minus_step_size = (float)-(lr / bias_correction1),
    };
    const float decay = (float)(1.0 - python_product(lr, cfg->weight_decay));
    const TensorTable *table = &model->param_table;
    // One parallel region for both passes. Within a pass, each tensor's loop
    // is shared out without waiting at its end, since tensors do not
    // overlap; between the passes every thread waits, so that no weight is
    // updated before it has decayed. (The static schedule gives each thread
    // the same slice of a tensor in both passes, so it would be safe without
    // the wait too; one wait a step buys not having to know that.)
#pragma omp parallel if (opt->size >= MIN_PARALLEL_ELEMENTS)
    {
        for (int k = 0; k < table->count; k++) {
            const TensorSpec *spec = &table->specs[k];
            if (skip_muon && optimizer_uses_muon(spec)) continue;
            if (optimizer_decays(spec)) adamw_decay(model->params_memory + spec->offset, spec->size, decay);
        }
#pragma omp barrier
        for (int k = 0; k < table->count; k++) {
            const TensorSpec *spec = &table->specs[k];
            if (skip_muon && optimizer_uses_muon(spec)) continue;
            adamw_update(model->params_memory + spec->offset, model->grads_memory + spec->offset,
                         opt->m + spec->offset, opt->v + spec->offset, spec->size, &s);
        }
    }
}

// ---- Muon ------------------------------------------------------------------
// optimizer.h says why; here is how, for one matrix W [rows, cols] at a time.
// Each product is a matrix times a matrix, which is what the linear layer
// computes (linear.h), so Muon runs on the same fast,
// thread-count-independent engine as the model.

// matmul_into: out[N,M] = a[N,K] @ b[K,M] (b as the linear layer's weight
// already transposed).
static void matmul_into(float *out, const float *a, const float *b, int N, int K, int M) {
    linear_forward_transposed(out, a, b, NULL, N, K, M);
}

// newton_schulz: X [m,n] (m <= n, scaled to |X|_F <= 1) pushed towards the
// orthogonal U V^T of its SVD, in place, by MUON_NS_STEPS steps of
//   A = X X^T;  B = b A + c A A;  X = a X + B X
// which is X -> a X + b (X X^T) X + c (X X^T)^2 X: each singular value s of
// X goes to a s + b s^3 + c s^5 and U, V stay (X X^T = U S^2 U^T).
// "scratch" holds the next X [m,n], then A and A A [m,m].
static void newton_schulz(float *X, int m, int n, float *scratch) {
    const size_t mn = (size_t)m * n, mm = (size_t)m * m;
    float *BX = scratch, *A = BX + mn, *B = A + mm;
    const float a = (float)MUON_NS_A, b = (float)MUON_NS_B, c = (float)MUON_NS_C;
    for (int step = 0; step < MUON_NS_STEPS; step++) {
        linear_forward(A, X, X, NULL, m, n, m);  // A = X X^T, [m,m], symmetric (X as the layer's input and weight)
        matmul_into(B, A, A, m, m, m);           // A A
        for (size_t i = 0; i < mm; i++) B[i] = b * A[i] + c * B[i];  // B = b A + c A A
        matmul_into(BX, B, X, m, m, n);        // B X, [m,n]
        for (size_t i = 0; i < mn; i++) X[i] = a * X[i] + BX[i];     // X = a X + B X
    }
}

// muon_matrix: one Muon update of W [rows, cols] from its gradient g, with
// its momentum buffer "buf", at learning rate "lr" (optimizer.h's rule):
//   1. buf = beta buf + (1 - beta) g       momentum: the gradients' running mean (torch: buf.lerp_(g, 1 - beta))
//   2. u = (1 - beta) g + beta buf         Nesterov: look ahead along the new mean (g.lerp_(buf, beta))
//   3. X = u / (|u|_F + eps)               every singular value now <= 1
//   4. X wide: X^T when rows > cols        so that X X^T is the small square
//   5. Newton-Schulz: X ~ U V^T            every singular value ~1
//   6. W -= lr sqrt(max(1, rows/cols)) X   (X turned back first)
static void muon_matrix(float *w, const float *g, float *buf, int rows, int cols, double lr, float *scratch) {
    const size_t n_all = (size_t)rows * cols;
    const float beta = (float)MUON_MOMENTUM, one_minus_beta = (float)(1.0 - MUON_MOMENTUM);
    const bool tall = rows > cols;
    const int m = tall ? cols : rows, n = tall ? rows : cols;  // X is [m,n], m <= n
    float *X = scratch, *ns = scratch + n_all;
    // 1-2. The update direction u, in X (in W's layout for now), and its norm.
    double sum_sq = 0.0;
    for (size_t i = 0; i < n_all; i++) {
        buf[i] = buf[i] + one_minus_beta * (g[i] - buf[i]);  // 1.
        X[i] = g[i] + beta * (buf[i] - g[i]);                 // 2.
        sum_sq += (double)X[i] * X[i];
    }
    // 3. Scale to Frobenius norm 1 (the largest singular value is at most
    // the Frobenius norm, so now at most 1: inside p's range).
    const float inv_norm = (float)(1.0 / (sqrt(sum_sq) + MUON_NS_EPS));
    for (size_t i = 0; i < n_all; i++) X[i] *= inv_norm;
    // 4. Tall: work on X^T, [cols, rows]; ns (Newton-Schulz's scratch, free
    // until step 5) holds the copy while it is turned.
    if (tall) {
        memcpy(ns, X, n_all * sizeof *X);
        linear_transpose_weight(X, ns, cols, rows);  // X[cols,rows] = (u [rows,cols])^T
    }
    newton_schulz(X, m, n, ns);  // 5.
    // 6. The step, scaled for the matrix's shape, from X turned back.
    const float step = (float)(-lr * sqrt(rows > cols ? (double)rows / cols : 1.0));
    if (tall) {
        linear_transpose_weight(ns, X, rows, cols);  // ns[rows,cols] = X^T
        X = ns;
    }
    for (size_t i = 0; i < n_all; i++) w[i] += step * X[i];
}

// muon_step: AdamW (at lr) on what Muon does not move, then Muon on each
// block matrix at this step's share of muon_lr (the schedule's lr / peak lr).
static void muon_step(Optimizer *opt, Model *model, double lr) {
    adamw_step(opt, model, lr, true);
    const double muon_lr = opt->cfg.lr > 0.0 ? opt->cfg.muon_lr * (lr / opt->cfg.lr) : 0.0;
    const TensorTable *table = &model->param_table;
    for (int k = 0; k < table->count; k++) {
        const TensorSpec *spec = &table->specs[k];
        if (!optimizer_uses_muon(spec)) continue;
        muon_matrix(model->params_memory + spec->offset, model->grads_memory + spec->offset,
                    opt->momentum + spec->offset, (int)spec->shape[0], (int)spec->shape[1], muon_lr,
                    opt->ns_scratch);
    }
}

void optimizer_step(Optimizer *opt, Model *model, double lr) {
    assert(opt->size == model->param_table.total);
    if (opt->cfg.kind == OPT_ADAMW) adamw_step(opt, model, lr, false);
    else if (opt->cfg.kind == OPT_MUON) muon_step(opt, model, lr);
    else sgd_step(model, (float)lr);
    opt->step++;
}
