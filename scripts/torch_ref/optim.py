"""The optimizer: what `tinygpt train` does with the gradients each step.
nanoGPT's recipe (Recipe, AdamW's parameter groups, the learning-rate
schedule, clipping), written out beside torch's own, and Muon, written from
Keller Jordan's muon.py. parity replays tinygpt's training with these; learn
trains PyTorch's side with them.
"""

import collections
import math
import warnings

import torch

# ---- the optimizer: nanoGPT's recipe ----------------------------------------
#
# What `tinygpt train --optimizer adamw` does with the gradients each step, in
# nanoGPT's order: clip their global norm, take this step's learning rate from
# the schedule, and update the weights by AdamW. parity and learn use the
# library's own clip_grad_norm_ and torch.optim.AdamW (with nanogpt_lr and
# adamw_param_groups, which the library has no twin of); the written-out
# clip_gradients and adamw_update below say what those two compute, and the
# self-test holds them to the library's, and nanogpt_lr to torch's own
# lr_scheduler.

# A training recipe, each field as the `tinygpt train` flag of the same name
# (--optimizer, --lr, --beta1, --beta2, --weight-decay, --warmup,
# --lr-schedule, --min-lr, --grad-clip).
Recipe = collections.namedtuple(
    "Recipe", "optimizer lr beta1 beta2 weight_decay warmup schedule min_lr grad_clip")
# nanoGPT's CPU recipe for tiny Shakespeare, tinygpt's gpt defaults.
GPT_RECIPE = Recipe("adamw", 1e-3, 0.9, 0.99, 0.1, 100, "cosine", 1e-4, 1.0)
# torch.optim.AdamW's default eps, which tinygpt uses too.
ADAMW_EPS = 1e-8
# torch.nn.utils.clip_grad_norm_ adds this to the norm before dividing.
CLIP_EPS = 1e-6


def recipe_flags(recipe):
    """The `tinygpt train` flags that ask for "recipe" (a Recipe)."""
    return ["--optimizer", recipe.optimizer, "--lr", repr(recipe.lr),
            "--beta1", repr(recipe.beta1), "--beta2", repr(recipe.beta2),
            "--weight-decay", repr(recipe.weight_decay), "--warmup", str(recipe.warmup),
            "--lr-schedule", recipe.schedule, "--min-lr", repr(recipe.min_lr),
            "--grad-clip", repr(recipe.grad_clip)]


def nanogpt_lr(it, recipe, steps):
    """The learning rate of step "it" (from 0) of a run of "steps" steps: nanoGPT's get_lr.

    1. warmup: lr * (it + 1) / (warmup + 1), rising linearly to lr;
    2. constant schedule: lr from then on;
    3. cosine: from lr at it = warmup down to min_lr at it = steps
       (nanoGPT's lr_decay_iters), half a cosine wave; min_lr after that.
    """
    if it < recipe.warmup:
        return recipe.lr * (it + 1) / (recipe.warmup + 1)
    if recipe.schedule == "constant":
        return recipe.lr
    if it > steps:
        return recipe.min_lr
    decay_ratio = (it - recipe.warmup) / (steps - recipe.warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return recipe.min_lr + coeff * (recipe.lr - recipe.min_lr)


def adamw_param_groups(named_params, weight_decay):
    """torch.optim parameter groups split as nanoGPT's configure_optimizers
    splits them: the 2-D tensors (matrices and embeddings, tok_emb among them)
    decay by "weight_decay", the others (LayerNorm weights, biases) do not.

    "named_params": (name, tensor) pairs. Each group also carries "names", the
    tensors' names in order (torch ignores the extra key), so a caller can
    say which tensor went where.
    """
    pairs = list(named_params)
    decay = [(n, p) for n, p in pairs if p.dim() >= 2]
    no_decay = [(n, p) for n, p in pairs if p.dim() < 2]
    return [{"params": [p for _, p in group], "names": [n for n, _ in group],
             "weight_decay": wd}
            for group, wd in ((decay, weight_decay), (no_decay, 0.0))]


def make_adamw(param_groups, recipe):
    """torch.optim.AdamW over "param_groups" (adamw_param_groups' split, as a
    rule) with "recipe"'s betas, eps 1e-8; the caller sets each step's lr."""
    return torch.optim.AdamW(param_groups, lr=recipe.lr, betas=(recipe.beta1, recipe.beta2),
                             eps=ADAMW_EPS)


def set_lr(optimizer, lr):
    """Give every parameter group of "optimizer" the learning rate "lr" (as nanoGPT does)."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def clip_gradients(grads, max_norm):
    """What torch.nn.utils.clip_grad_norm_ does, written out; returns the norm before clipping.

    1. norm = sqrt(sum of g^2 over every element of every gradient in "grads");
    2. every gradient, in place, *= min(1, max_norm / (norm + 1e-6)).
    """
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
    scale = min(1.0, max_norm / (norm + CLIP_EPS))
    for g in grads:
        g.mul_(scale)
    return norm


def adamw_update(params, grads, state, lr, recipe):
    """One AdamW update of torch.optim.AdamW, written out; "params" in place.

    "params", "grads": name -> tensor; "state": {} before the first update,
    then what this function keeps in it (t and each tensor's m and v).
    For each weight w with gradient g, at update t = 1, 2, ...:
      1. w -= lr * weight_decay * w        2-D tensors only (adamw_param_groups)
      2. m  = beta1 * m + (1 - beta1) * g   the gradient's running mean
      3. v  = beta2 * v + (1 - beta2) * g^2 its running mean square
      4. m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t): undo the pull
         of the zero start
      5. w -= lr * m_hat / (sqrt(v_hat) + eps)
    """
    state["t"] = t = state.get("t", 0) + 1
    for name, w in params.items():
        g = grads[name]
        m = state.setdefault("m." + name, torch.zeros_like(w))
        v = state.setdefault("v." + name, torch.zeros_like(w))
        if w.dim() >= 2:
            w.mul_(1.0 - lr * recipe.weight_decay)                               # 1.
        m.mul_(recipe.beta1).add_((1.0 - recipe.beta1) * g)                       # 2.
        v.mul_(recipe.beta2).add_((1.0 - recipe.beta2) * g * g)                   # 3.
        m_hat = m / (1.0 - recipe.beta1 ** t)                                     # 4.
        v_hat = v / (1.0 - recipe.beta2 ** t)
        w.sub_(lr * m_hat / (v_hat.sqrt() + ADAMW_EPS))                           # 5.


def torch_scheduler_lrs(recipe, steps):
    """nanoGPT's schedule built from torch.optim.lr_scheduler instead, for the
    self-test: LinearLR for the warmup (factor (it+1)/(warmup+1) at step it),
    then CosineAnnealingLR down to min_lr at "steps" (or ConstantLR, factor 1).
    Needs warmup >= 2. Returns the lr of steps 0 .. steps-1."""
    w = recipe.warmup
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=recipe.lr)
    schedulers = torch.optim.lr_scheduler
    warmup = schedulers.LinearLR(optimizer, start_factor=1 / (w + 1), end_factor=w / (w + 1),
                                 total_iters=w - 1)
    if recipe.schedule == "cosine":
        after = schedulers.CosineAnnealingLR(optimizer, T_max=steps - w, eta_min=recipe.min_lr)
    else:
        after = schedulers.ConstantLR(optimizer, factor=1.0, total_iters=0)
    schedule = schedulers.SequentialLR(optimizer, [warmup, after], milestones=[w])
    lrs = []
    with warnings.catch_warnings():
        # SequentialLR steps the second scheduler with an epoch number, which
        # torch 1.13 warns is deprecated; it is torch's own call.
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(steps):
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
    return lrs


# Muon's constants (muon.py's): momentum, Newton-Schulz steps, the quintic's
# coefficients and the epsilon of the first scaling.
MUON_MOMENTUM = 0.95
MUON_NS_STEPS = 5
MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)
MUON_NS_EPS = 1e-7


def uses_muon(name, param):
    """Whether Muon moves a tensor: a 2-D tensor of a block."""
    return name.startswith("blocks.") and param.dim() == 2


def newton_schulz(g, steps=MUON_NS_STEPS):
    """Keller Jordan's zeropower_via_newtonschulz5, written from its formula:
    X = G / (|G|_F + eps), wide (X^T when G is tall), then "steps" times
    A = X X^T, X = a X + (b A + c A A) X, turned back. In "g"'s dtype (muon.py
    uses bfloat16 on a GPU; here float64)."""
    a, b, c = MUON_NS_COEFFS
    X = g / (g.norm() + MUON_NS_EPS)
    tall = g.shape[0] > g.shape[1]
    if tall:
        X = X.T
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X.T if tall else X


@torch.no_grad()
def muon_update(param, grad, buf, lr, shape_scale=True):
    """One Muon step of "param" (a matrix) from "grad", with its momentum
    buffer "buf" (muon.py's muon_update, nesterov, then p.add_(update,
    alpha=-lr)): buf = beta buf + (1 - beta) grad; u = (1 - beta) grad + beta buf;
    param -= lr * sqrt(max(1, rows/cols)) * newton_schulz(u). "shape_scale"
    False leaves the sqrt out (a wrong Muon, for the check that can tell)."""
    buf.mul_(MUON_MOMENTUM).add_(grad, alpha=1 - MUON_MOMENTUM)
    u = (1 - MUON_MOMENTUM) * grad + MUON_MOMENTUM * buf
    scale = max(1.0, param.shape[0] / param.shape[1]) ** 0.5 if shape_scale else 1.0
    param.add_(newton_schulz(u), alpha=-lr * scale)
