// optimizer.h: what training does with the gradients: clip their global
// norm, pick this step's learning rate from a schedule, and move the
// weights, by plain SGD, by AdamW, or by Muon (the blocks' matrices) with
// AdamW (the rest).
//
// Reading order: file 13, right after model.h's model_sgd_step, whose
// `w -= lr * g` is the simplest of the rules here; train.c (file 35) is
// its user. It leaves out everything PyTorch's optimizers offer beyond what
// nanoGPT uses: no momentum for SGD, no amsgrad, no parameter groups other
// than "decays" and "does not".
//
// Why each piece.
//
//   SGD, w -= lr * g. The gradient points where this batch's loss rises
//   fastest, so a small step against it lowers the loss. Two things limit
//   it: a batch is a noisy sample of the text, so each step's direction is
//   partly noise; and gradients differ in size by orders of magnitude from
//   one weight to the next, so one lr is too large for some weights and
//   too small for others. AdamW answers both, and adds three guards.
//
//   Momentum, m: a running mean of the gradients, m = beta1 m + (1 - beta1) g,
//   which weighs about the last 1 / (1 - beta1) steps (10 for beta1 = 0.9).
//   Noise that flips sign from batch to batch averages out; a direction
//   that persists adds up, and the weight moves along it.
//
//   A scale per weight, v: a running mean of g^2, so sqrt(v) is the typical
//   size of that weight's gradient. Stepping by lr * m / sqrt(v) makes
//   every weight's step about lr, whatever its gradient's scale: the
//   embedding of a rare token moves as readily as a busy matrix, and
//   multiplying the loss by 100 would change nothing. eps keeps the
//   division finite where v is 0.
//
//   Bias correction. m and v start at 0, so after t steps
//     m = (1 - beta1) (g_t + beta1 g_(t-1) + ... + beta1^(t-1) g_1),
//   a weighted mean whose weights add up to 1 - beta1^t, not 1: early on it
//   is pulled towards the zero it started from (after one step, m = 0.1 g).
//   Dividing m by 1 - beta1^t, and v by 1 - beta2^t, makes each a true
//   weighted mean from the first step; as t grows the divisors go to 1.
//   (The first step is then lr * g / |g|: lr, in the gradient's direction.)
//
//   Decoupled weight decay. Pulling weights towards 0 keeps them small, a
//   simpler model that overfits less. Adding weight_decay/2 * |w|^2 to the
//   loss (L2) would add weight_decay * w to g, which Adam then divides by
//   sqrt(v): weights with large gradients would hardly decay, those with
//   small ones would decay a lot. AdamW (Loshchilov and Hutter, "Decoupled
//   Weight Decay Regularization") takes lr * weight_decay * w off the weight
//   itself, outside the scaled step, so every decaying weight shrinks by the
//   same fraction each step. As in nanoGPT, only matrices and embeddings
//   decay: a LayerNorm weight is a gain whose neutral value is 1, not 0, and
//   the 1-D tensors hold almost none of the parameters.
//
//   Clipping. Now and then one batch gives a gradient many times larger
//   than usual, and a step along it can undo many steps of progress.
//   Scaling all the gradients by one factor, so that their joint norm is at
//   most grad_clip, keeps the step's direction and bounds its size.
//
//   The schedule. Warmup: in the first steps the weights are random and v
//   has seen few gradients, so a full step is a guess; lr grows to its peak
//   over the first steps. Cosine decay: near the end a smaller step lets
//   the weights settle, where a large one keeps them jumping about with the
//   batches' noise.
//
//   Muon (`--optimizer muon`; Keller Jordan 2024, the modded-nanoGPT
//   speedrun's optimizer). AdamW treats a matrix as a bag of numbers, each
//   scaled on its own. But a weight matrix W is a map, and what its update
//   dW does to the layer's output is dW x: the update's size that matters
//   is how much it can stretch an input, its spectral norm. The gradient of
//   a matrix is typically dominated by a few directions (its singular
//   values fall off fast: a few large, many tiny), so a step along it moves
//   the layer a lot along those few input directions and hardly at all
//   along the rest. Muon replaces the (momentum-averaged) gradient
//   G = U S V^T by its orthogonalisation U V^T: the same directions, every
//   singular value set to 1. Every direction the gradient names then moves
//   by the same amount, lr, and no single one can blow up.
//   Computing U V^T by an SVD is slow; Newton-Schulz iteration gets near it
//   with matrix products only. Scale X = G / |G|_F (so every singular
//   value is at most 1), then repeat
//     X <- a X + b (X X^T) X + c (X X^T)^2 X
//   which maps each singular value s of X to p(s) = a s + b s^3 + c s^5,
//   leaving U and V alone. For s -> 1 one wants p(p(...p(s))) -> 1 for
//   every s in (0, 1]; Keller Jordan's coefficients (3.4445, -4.7750,
//   2.0315) make p's slope at 0 large (a = 3.4, so small singular values
//   grow fast) at the price of not converging exactly: after 5 steps every
//   s lands somewhere in about [0.7, 1.2], which trains as well as exactly
//   1. The products are of the smaller side: X is turned to be wide ([m,n],
//   m <= n) so X X^T is [m,m].
//   Muon keeps plain momentum, with Nesterov's look-ahead (the update reads
//   the gradient plus beta times the new running mean, not the mean alone),
//   and scales each matrix's update by sqrt(max(1, rows/cols)): a tall
//   matrix's orthogonal update has entries 1/sqrt(rows) in size against a
//   square one's, and this gives them a comparable effect. It is for the 2-D
//   matrices inside the blocks only: the embedding and the head are
//   look-up tables and a classifier, whose rows are tokens, not directions
//   of a space (and the norms' weights and biases are vectors); those stay
//   with AdamW, at --lr, while the matrices take --muon-lr (0.02: an
//   orthogonal update has entries of ~1/sqrt(cols), much larger than
//   AdamW's per-weight steps of ~lr). Both follow the same schedule: the
//   Muon learning rate of a step is muon_lr times lr(step)/lr.
//
// How: each piece is PyTorch's (1.13) or nanoGPT's, step for step, so a run
// can be held against theirs (scripts/torch_reference.py):
//
//   clipping  torch.nn.utils.clip_grad_norm_(params, grad_clip)
//     norm = sqrt(sum over every gradient element of g^2)
//     g   *= min(1, grad_clip / (norm + 1e-6))          (grad_clip 0: off)
//   The norm is summed in double (torch sums in float32, so its norm can
//   differ in the 7th digit); the factor is then computed in float32, as
//   torch computes it.
//
//   schedule  nanoGPT's get_lr(it), it = 0, 1, ... the step about to be taken
//     it < warmup:             lr * (it + 1) / (warmup + 1)
//     constant, or cosine with it <= decay_steps:
//                              constant: lr
//                              cosine:   min_lr + 0.5 * (1 + cos(pi * r)) * (lr - min_lr),
//                                        r = (it - warmup) / (decay_steps - warmup)
//     cosine, it > decay_steps: min_lr
//   With a budget of time (train --time), the cosine's r is the larger of
//   the step's r and the fraction of the time spent, so it reaches min_lr
//   when the time runs out (or the steps, if they end first).
//
//   AdamW     torch.optim.AdamW(lr, betas=(beta1, beta2), eps=1e-8, weight_decay)
//     at update t = 1, 2, ..., for each weight w with gradient g:
//     w -= lr * weight_decay * w                         (matrices and embeddings only)
//     m  = beta1 * m + (1 - beta1) * g                   (the gradient's running mean)
//     v  = beta2 * v + (1 - beta2) * g^2                 (its running mean square)
//     w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//
//   Muon      Keller Jordan's muon.py (muon_update, zeropower_via_newtonschulz5),
//             momentum 0.95, nesterov, 5 steps, no weight decay; for each
//             matrix W [rows, cols] of a block, with gradient G and buffer B:
//     B  = B.lerp(G, 1 - beta)           B + (1 - beta)(G - B) = beta B + (1 - beta) G
//     U  = G.lerp(B, beta)               Nesterov: (1 - beta) G + beta B
//     X  = U / (|U|_F + 1e-7), turned wide (X^T) when rows > cols
//     5 times: A = X X^T;  X = a X + (b A + c A A) X        (a, b, c) = (3.4445, -4.7750, 2.0315)
//     W -= muon_lr(step) * sqrt(max(1, rows / cols)) * X (turned back)
//   muon.py runs the iteration in bfloat16 on a GPU; here it is float32.
//
// Hyperparameters are doubles, as they are in Python: rounding beta1 = 0.9
// to a float first would change 1 - beta1 in its eighth digit.
#ifndef TINYGPT_OPTIMIZER_H
#define TINYGPT_OPTIMIZER_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

// AdamW's eps, torch's default: keeps the step finite where v is 0.
#define OPTIMIZER_EPS 1e-8

typedef enum { OPT_SGD = 0, OPT_ADAMW = 1, OPT_MUON = 2 } OptimizerKind;

// Muon's constants, muon.py's: momentum, Newton-Schulz steps and their
// quintic's coefficients, and the epsilon of the first scaling.
#define MUON_MOMENTUM 0.95
#define MUON_NS_STEPS 5
#define MUON_NS_A 3.4445
#define MUON_NS_B (-4.7750)
#define MUON_NS_C 2.0315
#define MUON_NS_EPS 1e-7
typedef enum { LR_CONSTANT = 0, LR_COSINE = 1 } LrSchedule;
// Their names, indexed by the enums, NULL-terminated: the --optimizer and
// --lr-schedule values and the checkpoint's "optimizer" and "lr_schedule".
extern const char *const OPTIMIZER_NAMES[];
extern const char *const LR_SCHEDULE_NAMES[];

typedef struct {
    OptimizerKind kind;
    double lr;            // the peak learning rate (after warmup)
    double min_lr;        // cosine: where it ends; unused by constant
    double beta1, beta2;  // AdamW: averaging rates of m and v, in [0, 1)
    double weight_decay;  // AdamW: fraction of lr taken off matrices and embeddings each step
    double muon_lr;       // Muon: the blocks' matrices' peak learning rate (the rest take lr)
    double grad_clip;     // the largest gradient norm let through; 0: no clipping
    LrSchedule schedule;
    long warmup_steps;    // steps 0 .. warmup_steps-1 ramp up to lr (both schedules)
    long decay_steps;     // cosine: the step at which lr has fallen to min_lr
} OptimizerConfig;

typedef struct {
    OptimizerConfig cfg;
    long step;    // updates taken so far; AdamW's next update is t = step + 1
    size_t size;  // floats in m and v: the param_table.total of the model it was built for
    float *m;     // [size] AdamW's first moment (torch's exp_avg); NULL for SGD
    float *v;     // [size] AdamW's second moment (torch's exp_avg_sq); NULL for SGD
    // Muon: the momentum buffer of its matrices (torch's momentum_buffer),
    // laid out as the parameters (other tensors' places stay 0), and the
    // Newton-Schulz scratch, sized for the largest matrix; NULL otherwise.
    // AdamW's m and v are kept for the rest.
    float *momentum;     // [size]
    float *ns_scratch;   // [2 m n + 2 m^2] for the largest matrix, m <= n its sides
} Optimizer;

// optimizer_init: an optimizer for "model"'s parameters, at step 0, with
// AdamW's moments allocated and zeroed (SGD keeps no state), and Muon's
// buffer and scratch. optimizer_free releases them. A checkpoint that is to
// resume AdamW exactly must save "step", "m" and "v" with the weights (and
// Muon's, "momentum").
void optimizer_init(Optimizer *opt, const OptimizerConfig *cfg, const Model *model);
void optimizer_free(Optimizer *opt);

// optimizer_lr: the learning rate of step "it" (counted from 0) under
// "cfg"'s schedule. A cosine whose decay_steps <= warmup_steps has no
// cosine part: it jumps from the warmup to min_lr.
double optimizer_lr(const OptimizerConfig *cfg, long it);
// optimizer_lr_timed: the same for a run with a budget of time, of which
// "time_fraction" (in [0, 1]) is spent: the warmup still counts steps (it
// protects the first updates, however long they take), and the cosine
// follows whichever of the steps and the time is further along. With
// time_fraction 0 it is optimizer_lr, to the bit.
double optimizer_lr_timed(const OptimizerConfig *cfg, long it, double time_fraction);

// optimizer_decays: whether AdamW's weight decay applies to "spec": to the
// 2-D tensors (the matrices and the embeddings), never to the 1-D ones
// (LayerNorm weights, biases), as nanoGPT's configure_optimizers splits them.
bool optimizer_decays(const TensorSpec *spec);
// optimizer_uses_muon: whether Muon (when it is the optimizer) moves
// "spec": the 2-D tensors of the blocks ("blocks.{i}.*"), not the
// embeddings, the head or any 1-D tensor, which AdamW moves.
bool optimizer_uses_muon(const TensorSpec *spec);

// optimizer_grad_norm: the L2 norm of all of "model"'s gradients together,
// summed in double in an order that does not depend on the thread count.
// It is finite exactly when every gradient is: a float's square cannot
// overflow a double, and a NaN or an infinity carries into the sum.
double optimizer_grad_norm(const Model *model);
// optimizer_scale_grads: when "max_norm" > 0, scale every gradient by
// min(1, max_norm / (norm + 1e-6)), "norm" being optimizer_grad_norm's;
// 0 leaves them alone.
void optimizer_scale_grads(Model *model, double norm, double max_norm);
// optimizer_clip_grads: the two above; returns the norm before clipping
// (computed either way, for the training log).
double optimizer_clip_grads(Model *model, double max_norm);

// optimizer_step: one update of "model"'s weights from its gradients with
// learning rate "lr" (SGD: exactly model_sgd_step's arithmetic at (float)lr;
// AdamW: the rule above; Muon: the rule above on the blocks' matrices at
// muon_lr * lr / cfg.lr, AdamW on the rest at lr), and opt->step += 1.
// Allocates nothing; the result does not depend on the thread count.
void optimizer_step(Optimizer *opt, Model *model, double lr);

#endif
