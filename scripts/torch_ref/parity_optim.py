"""parity's GPT trained by AdamW (torch.optim.AdamW, nanoGPT's schedule and
clipping) and by Muon (its blocks' matrices; AdamW the rest): tinygpt's run
against a float64 replay here, step by step (loss, learning rate, gradient
norm) and in the final weights, and that those weights are clearly not those
of a wrong split of the weight decay or of a Muon without its shape scale.
"""

import functools
import os

import torch

from torch_ref.data import sequential_batch
from torch_ref.model import gpt_forward
from torch_ref.optim import (
    adamw_param_groups, make_adamw, muon_update, nanogpt_lr, recipe_flags, set_lr, uses_muon)
from torch_ref.parity_setup import (
    DECAY_SEPARATION, float64_params, GRAD_NORM_TOLERANCE, init_model, largest_weight_difference,
    LOSS_TOLERANCE, LR_TOLERANCE, PARITY_ADAMW, PARITY_BATCH, PARITY_GPT_ARCH_FLAGS,
    PARITY_MODEL_FLAGS, PARITY_MUON, PARITY_MUON_LR, PARITY_RUN_FLAGS, parity_tokens, train_from,
    verdict, WEIGHT_TOLERANCE, weights_verdict)
from torch_ref.tinygpt import (
    check_metadata, NANOGPT_PARTS, ParityFailure, read_log_columns, read_safetensors,
    train_has_optimizer_flag)


def replay_recipe(params, recipe, steps, loss_fn, train_tokens, T, groups=None, muon_lr=None,
                  shape_scale=True):
    """Train "params" (name -> float64 tensor, requires_grad) in place for
    "steps" steps of "recipe" on sequential batches, as nanoGPT trains:
    forward, backward, clip_grad_norm_ (over every gradient), this step's
    nanogpt_lr, AdamW step. Returns one dict per step: loss (before the
    update), lr, grad_norm (before clipping).

    "groups"(named_params) gives AdamW's parameter groups (default
    adamw_param_groups: the 2-D tensors decay). With "muon_lr", Muon
    (muon_update) moves the blocks' matrices instead, at muon_lr times the
    step's lr / recipe.lr, as tinygpt scales it, and AdamW the rest;
    "shape_scale" False leaves Muon's sqrt(rows/cols) out (a wrong Muon).
    """
    if groups is None:
        groups = functools.partial(adamw_param_groups, weight_decay=recipe.weight_decay)
    muon_names = {n for n, p in params.items() if muon_lr is not None and uses_muon(n, p)}
    muon_named = [(n, p) for n, p in params.items() if n in muon_names]
    adam_named = [(n, p) for n, p in params.items() if n not in muon_names]
    optimizer = make_adamw(groups(adam_named), recipe)
    buffers = {n: torch.zeros_like(p) for n, p in muon_named}
    rows = []
    for step in range(steps):
        lr = nanogpt_lr(step, recipe, steps)
        set_lr(optimizer, lr)
        inputs, targets = sequential_batch(train_tokens, step, PARITY_BATCH, T)
        loss = loss_fn(params, inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        for _, p in muon_named:
            p.grad = None
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), recipe.grad_clip)
        optimizer.step()
        for n, p in muon_named:
            muon_update(p, p.grad, buffers[n], muon_lr * (lr / recipe.lr), shape_scale)
        rows.append({"loss": loss.item(), "lr": lr, "grad_norm": norm.item()})
    return rows


def train_with_recipe(args, workdir, data, name, flags):
    """The set-up the AdamW and Muon checks share: the initial GPT (the SGD
    check's, when it ran), tinygpt trained from it with "flags" (its
    optimizer's) into gpt-NAME-trained, and the GPT here. Returns (tinygpt's
    log.csv rows, its final tensors, the initial tensors, the reference's
    loss function, the training tokens, T)."""
    # 1. The initial GPT, as tinygpt initialises it (the SGD check's, if it ran).
    init_dir = os.path.join(workdir, "gpt-init")
    init_path = os.path.join(init_dir, "model.safetensors")
    if not os.path.exists(init_path):
        init_model(args, data, init_dir, ["--dropout", "0"] + PARITY_GPT_ARCH_FLAGS + NANOGPT_PARTS
                   + PARITY_MODEL_FLAGS + PARITY_RUN_FLAGS)
    init_tensors, meta = read_safetensors(init_path)
    vocab, n_head = check_metadata(init_tensors, meta, init_path)

    # 2. tinygpt trains it with the recipe.
    trained_dir = os.path.join(workdir, f"gpt-{name}-trained")
    log_path, final_path = train_from(args, data, init_path, args.steps, trained_dir,
                                      flags + PARITY_GPT_ARCH_FLAGS + PARITY_RUN_FLAGS)
    log = read_log_columns(log_path, ["step", "train_loss", "lr", "grad_norm"])
    final_tensors, _ = read_safetensors(final_path)
    if [int(r["step"]) for r in log] != list(range(args.steps)):
        raise ParityFailure(f"{trained_dir}/log.csv does not hold steps 0..{args.steps - 1}")

    # 3. The same model in float64 here.
    tokens, n_train = parity_tokens(data, vocab)

    def loss_fn(p, i, t):
        return gpt_forward(p, i, t, n_head)[0]
    return log, final_tensors, init_tensors, loss_fn, tokens[:n_train], int(meta["block_size"])


def compare_steps(label, log, rows, final_tensors, params, lr_note="", norm_note=""):
    """tinygpt's log.csv rows against the replay's ("rows"), step by step
    (loss, lr, grad_norm), then the final weights; prints a verdict for each
    ("lr_note" and "norm_note" end those two lines) and returns the failures."""
    failures = []
    steps = list(enumerate(zip(log, rows)))
    worst_loss = max((abs(c["train_loss"] - r["loss"]), s) for s, (c, r) in steps)
    if not verdict(label, f"losses over {len(rows)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}; loss {rows[0]['loss']:.4f} -> "
                   f"{rows[-1]['loss']:.4f}"):
        failures.append(f"{label} losses differ beyond tolerance")
    worst_lr = max((abs(c["lr"] - r["lr"]), s) for s, (c, r) in steps)
    if not verdict(label, "logged lr (warmup, then cosine)", worst_lr[0], LR_TOLERANCE,
                   f"; worst at step {worst_lr[1]}{lr_note}"):
        failures.append(f"{label} learning rates differ beyond tolerance")
    worst_norm = max((abs(c["grad_norm"] / r["grad_norm"] - 1), s) for s, (c, r) in steps)
    if not verdict(label, "logged grad_norm, relative", worst_norm[0], GRAD_NORM_TOLERANCE,
                   f"; worst at step {worst_norm[1]}{norm_note}"):
        failures.append(f"{label} gradient norms differ beyond tolerance")
    return failures + weights_verdict(label, "final weights", final_tensors, params)


def separation(final_tensors, params, wrong_params, names):
    """How far tinygpt's final tensors "names" are from the reference's
    ("right") and from a wrong reference's ("off"): (right, off, passed),
    passed when right is within WEIGHT_TOLERANCE and off over
    DECAY_SEPARATION times right."""
    right = max(largest_weight_difference(final_tensors, {n: params[n]})[0] for n in names)
    off = max(largest_weight_difference(final_tensors, {n: wrong_params[n]})[0] for n in names)
    return right, off, right <= WEIGHT_TOLERANCE and off > DECAY_SEPARATION * right


def parity_gpt_muon(args, workdir, data):
    """The GPT trained by Muon (its blocks' matrices) and AdamW (the rest):
    tinygpt against replay_recipe (float64) from the same init on the same
    sequential batches, with PARITY_MUON's schedule and clipping. Compares
    every step's loss, lr and gradient norm and the final weights, and that
    the final weights are clearly not those of a Muon without its
    sqrt(rows/cols) scale. Returns the failures."""
    recipe = PARITY_MUON
    log, final_tensors, init_tensors, loss_fn, train_tokens, T = train_with_recipe(
        args, workdir, data, "muon", ["--muon-lr", repr(PARITY_MUON_LR)] + recipe_flags(recipe))
    replays = {}
    for name, shape_scale in (("muon", True), ("muon without its shape scale", False)):
        params = float64_params(init_tensors)
        rows = replay_recipe(params, recipe, args.steps, loss_fn, train_tokens, T,
                             muon_lr=PARITY_MUON_LR, shape_scale=shape_scale)
        replays[name] = (params, rows)
    params, rows = replays["muon"]
    print(f"parity gpt muon: Muon moves {', '.join(n for n, p in params.items() if uses_muon(n, p))}; "
          f"AdamW the rest")
    if args.verbose:
        for c, r in zip(log, rows):
            print(f"  gpt muon step {int(c['step']):3d}  loss tinygpt {c['train_loss']:.6f} "
                  f"torch {r['loss']:.6f}  grad_norm {c['grad_norm']:.6f}/{r['grad_norm']:.6f}")

    failures = compare_steps("gpt muon", log, rows, final_tensors, params)
    # The tall matrices (mlp.fc, 4C x C) are where the shape scale acts.
    names = [n for n, p in params.items() if uses_muon(n, p) and p.shape[0] > p.shape[1]]
    right, off, passed = separation(final_tensors, params,
                                    replays["muon without its shape scale"][0], names)
    print(f"parity gpt muon: {'PASS' if passed else 'FAIL'} tall matrices scaled by sqrt(rows/cols): "
          f"tinygpt's {len(names)} within {right:.2e} of the reference, {off:.2e} from a Muon "
          f"without the scale (must be over {DECAY_SEPARATION}x)", flush=True)
    if not passed:
        failures.append("gpt muon: the shape scale does not hold")
    return failures


def parity_gpt_adamw(args, workdir, data):
    """The GPT trained by AdamW: tinygpt and torch.optim.AdamW (float64) from
    the same init on the same sequential batches, with PARITY_ADAMW's warmup,
    cosine schedule and clipping. Compares every step's loss, learning rate
    and gradient norm and the final weights, checks that clipping happened,
    and that the weight decay went to the 2-D tensors only. Returns the
    failures."""
    if not train_has_optimizer_flag(args.tinygpt):
        raise ParityFailure(f"`{args.tinygpt} train --help` lists no --optimizer: this tinygpt "
                            "has no AdamW (run with --only card or --only gpt)")
    recipe = PARITY_ADAMW
    log, final_tensors, init_tensors, loss_fn, train_tokens, T = train_with_recipe(
        args, workdir, data, "adamw", recipe_flags(recipe))

    # nanoGPT's split of the parameters, and two wrong splits to show the
    # weight comparison can tell them apart: every tensor decaying (LayerNorm
    # weights too), and minGPT's split, where the embeddings do not decay.
    def split(decays):
        def groups(named_params):
            pairs = list(named_params)
            return [{"params": [p for n, p in pairs if decays(n, p)],
                     "weight_decay": recipe.weight_decay},
                    {"params": [p for n, p in pairs if not decays(n, p)], "weight_decay": 0.0}]
        return groups
    replays = {}
    for name, groups in (("nanoGPT", None),
                         ("every tensor decays", split(lambda n, p: True)),
                         ("embeddings do not decay",
                          split(lambda n, p: p.dim() >= 2 and "_emb." not in n))):
        params = float64_params(init_tensors)
        rows = replay_recipe(params, recipe, args.steps, loss_fn, train_tokens, T, groups)
        replays[name] = (params, rows)
    params, rows = replays["nanoGPT"]
    groups = adamw_param_groups(params.items(), recipe.weight_decay)
    print(f"parity gpt adamw: decays {', '.join(groups[0]['names'])}; "
          f"does not decay {', '.join(groups[1]['names'])}")
    if args.verbose:
        for c, r in zip(log, rows):
            print(f"  gpt adamw step {int(c['step']):3d}  loss tinygpt {c['train_loss']:.6f} "
                  f"torch {r['loss']:.6f}  lr {c['lr']:.6g}/{r['lr']:.6g}  "
                  f"grad_norm {c['grad_norm']:.6f}/{r['grad_norm']:.6f}")

    # Compare, step by step, then the final weights.
    failures = compare_steps(
        "gpt adamw", log, rows, final_tensors, params,
        lr_note=f"; lr {rows[0]['lr']:.3g} -> {max(r['lr'] for r in rows):.3g} -> "
                f"{rows[-1]['lr']:.3g}",
        norm_note=f"; norms {min(r['grad_norm'] for r in rows):.3f} .. "
                  f"{max(r['grad_norm'] for r in rows):.3f}")

    # Clipping must have happened, or this check says nothing about it.
    clipped_c = sum(c["grad_norm"] > recipe.grad_clip for c in log)
    clipped_r = sum(r["grad_norm"] > recipe.grad_clip for r in rows)
    print(f"parity gpt adamw: clipping at {recipe.grad_clip:g}: tinygpt clipped {clipped_c} of "
          f"{len(log)} steps, the reference {clipped_r}")
    if clipped_c == 0 or clipped_r == 0:
        failures.append(f"gpt adamw: no step clipped at --grad-clip {recipe.grad_clip:g}, so "
                        "the check proves nothing about clipping; lower PARITY_ADAMW.grad_clip")

    # Which tensors decay: tinygpt's final weights must be those of
    # nanoGPT's split, and clearly not those of either wrong one.
    for what, wrong, names in (
            ("LayerNorm weights do not decay", "every tensor decays",
             [n for n in params if params[n].dim() == 1]),
            ("embeddings decay", "embeddings do not decay",
             [n for n in params if "_emb." in n])):
        right, off, passed = separation(final_tensors, params, replays[wrong][0], names)
        print(f"parity gpt adamw: {'PASS' if passed else 'FAIL'} {what}: tinygpt's "
              f"{len(names)} tensors within {right:.2e} of the reference, "
              f"{off:.2e} from \"{wrong}\" (must be over {DECAY_SEPARATION}x)", flush=True)
        if not passed:
            failures.append(f"gpt adamw: {what} does not hold")
    return failures
