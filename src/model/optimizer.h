// optimizer.h: what training does with the gradients: clip their global
// norm, pick this step's learning rate from a schedule, and move the
// weights, by plain SGD or by AdamW.
//
// Reading order: file 17, right after model.h's model_sgd_step, whose
// `w -= lr * g` is the simplest of the rules here; train.c (file 29) is
// its user. It leaves out everything PyTorch's optimizers offer beyond what
// nanoGPT uses: no momentum for SGD, no amsgrad, no parameter groups other
// than "decays" and "does not".
//
// Each piece is PyTorch's (1.13) or nanoGPT's, step for step, so a run can
// be held against theirs (scripts/torch_reference.py):
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
//
//   AdamW     torch.optim.AdamW(lr, betas=(beta1, beta2), eps=1e-8, weight_decay)
//     at update t = 1, 2, ..., for each weight w with gradient g:
//     w -= lr * weight_decay * w                         (matrices and embeddings only)
//     m  = beta1 * m + (1 - beta1) * g                   (the gradient's running mean)
//     v  = beta2 * v + (1 - beta2) * g^2                 (its running mean square)
//     w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
//   Dividing by sqrt(v) gives every weight a step of about lr whatever its
//   gradient's scale; the two divisions by 1 - beta^t undo the pull of m
//   and v towards their zero start in the first steps.
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

typedef enum { OPT_SGD = 0, OPT_ADAMW = 1 } OptimizerKind;
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
} Optimizer;

// optimizer_init: an optimizer for "model"'s parameters, at step 0, with
// AdamW's moments allocated and zeroed (SGD keeps no state). optimizer_free
// releases them. A checkpoint that is to resume AdamW exactly must save
// "step", "m" and "v" with the weights.
void optimizer_init(Optimizer *opt, const OptimizerConfig *cfg, const Model *model);
void optimizer_free(Optimizer *opt);

// optimizer_lr: the learning rate of step "it" (counted from 0) under
// "cfg"'s schedule. A cosine whose decay_steps <= warmup_steps has no
// cosine part: it jumps from the warmup to min_lr.
double optimizer_lr(const OptimizerConfig *cfg, long it);

// optimizer_decays: whether AdamW's weight decay applies to "spec": to the
// 2-D tensors (the matrices and the embeddings), never to the 1-D ones
// (LayerNorm weights, biases), as nanoGPT's configure_optimizers splits them.
bool optimizer_decays(const TensorSpec *spec);

// optimizer_grad_norm: the L2 norm of all of "model"'s gradients together,
// summed in double in an order that does not depend on the thread count.
double optimizer_grad_norm(const Model *model);
// optimizer_clip_grads: when "max_norm" > 0, scale every gradient by
// min(1, max_norm / (norm + 1e-6)); 0 leaves them alone. Returns the norm
// before clipping (computed either way, for the training log).
double optimizer_clip_grads(Model *model, double max_norm);

// optimizer_step: one update of "model"'s weights from its gradients with
// learning rate "lr" (SGD: exactly model_sgd_step's arithmetic at (float)lr;
// AdamW: the rule above), and opt->step += 1. Allocates nothing; elementwise,
// so the result does not depend on the thread count.
void optimizer_step(Optimizer *opt, Model *model, double lr);

#endif
