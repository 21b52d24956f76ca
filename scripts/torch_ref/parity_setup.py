"""parity's settings and what counts as a pass, and the set-up its checks
share: the training text, tinygpt's initial model and its training from a
checkpoint, the reference's tokens and float64 weights, `tinygpt eval`,
replaying tinygpt's SGD steps, comparing weights, printing a verdict.
"""

import json
import math
import os

import torch

from torch_ref.data import read_tokens, sequential_batch, synthetic_text
from torch_ref.optim import Recipe
from torch_ref.tinygpt import read_safetensors, run


# The parity run: model sizes and training settings, and what counts as a pass.
PARITY_MODEL_FLAGS = ["--context", "16", "--embd", "32", "--heads", "4"]
# The gpt of parity's runs: a fresh model takes NANOGPT_PARTS too (and any
# swap after them); a run from --init takes its parts from the file.
PARITY_GPT_ARCH_FLAGS = ["--arch", "gpt", "--layers", "2"]
PARITY_BATCH = 4
PARITY_LR = 0.1
PARITY_SEED = 1
PARITY_VAL_FRACTION = 0.1
# Every parity run of tinygpt train takes these last (after the model's).
PARITY_RUN_FLAGS = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
                    "--val-fraction", str(PARITY_VAL_FRACTION)]
LOSS_TOLERANCE = 1e-4    # largest allowed |tinygpt loss - reference loss| at any step
WEIGHT_TOLERANCE = 1e-3  # largest allowed |tinygpt weight - reference weight| at the end
EVAL_TOLERANCE = 1e-4    # largest allowed |tinygpt eval loss - reference eval loss|
# Largest allowed |tinygpt gradient - reference gradient| at step 0 on the GPT
# probe (below; parity.py's gpt_probe). tinygpt's gradient is read back as
# (w0 - w1) / lr from float32 checkpoints, which alone costs up to ~1e-6
# (7e-7 measured); a tanh GELU in place of the exact one shows as 1.7e-4.
GRAD_TOLERANCE = 1e-5
# The GPT probe: a checkpoint written here with weights of order 1, so that
# attention is far from uniform and the MLP far from linear (near tinygpt's
# initialisation both are almost trivial and hide mistakes there). tinygpt
# evaluates it and trains PROBE_STEPS steps from it.
PROBE_SEED = 3
PROBE_STEPS = 5
# The GPT trained by AdamW (its recipe, PARITY_ADAMW, is below).
LR_TOLERANCE = 1e-7         # largest allowed |tinygpt lr - reference lr| at any step
GRAD_NORM_TOLERANCE = 1e-4  # largest allowed |tinygpt grad_norm / reference grad_norm - 1|
# Which tensors decay: tinygpt's final weights must be this many times
# further from a reference with a wrong split than from the right one.
DECAY_SEPARATION = 10

# parity's AdamW run: the same recipe with a 10-step warmup and a larger
# lr, so that 50 steps go through the warmup, most of the cosine and a real
# change of the weights. Clipping at 1.0 triggers: this model's gradient norm
# on parity's batches ranges from about 0.5 to 5 (measured), and 20 of the 50
# steps clip.
PARITY_ADAMW = Recipe("adamw", 3e-3, 0.9, 0.99, 0.1, 10, "cosine", 1e-4, 1.0)

# parity's Muon run: PARITY_ADAMW's schedule and clipping, with Muon for the
# blocks' matrices at --muon-lr (its default, 0.02) and AdamW for the rest.
PARITY_MUON = PARITY_ADAMW._replace(optimizer="muon")
PARITY_MUON_LR = 0.02


def replay_training(label, params, log, loss_fn, train_tokens, T, verbose):
    """Replay tinygpt's logged steps on "params" (float64, requires_grad) in place.

    Step s trains on sequential batch s with plain SGD, lr PARITY_LR.
    "loss_fn"(params, inputs, targets) is the model's mean loss. Returns
    (per-step list of (step, tinygpt loss, reference loss), list of failures).
    """
    failures, losses = [], []
    for step, c_loss, c_lr in log:
        if abs(c_lr - PARITY_LR) > 1e-6 * PARITY_LR:
            failures.append(f"step {step}: tinygpt logged lr {c_lr}, expected {PARITY_LR}")
        inputs, targets = sequential_batch(train_tokens, step, PARITY_BATCH, T)
        loss = loss_fn(params, inputs, targets)
        loss.backward()
        with torch.no_grad():
            for p in params.values():
                p -= PARITY_LR * p.grad
                p.grad = None
        losses.append((step, c_loss, loss.item()))
        if verbose:
            print(f"  {label} step {step:3d}  tinygpt {c_loss:.6f}  torch {loss.item():.6f}"
                  f"  |diff| {abs(c_loss - loss.item()):.2e}")
    return losses, failures


def largest_weight_difference(final_tensors, params):
    """(largest |tinygpt weight - reference weight|, the tensor it is in)."""
    worst = (0.0, None)
    for name, p in params.items():
        diff = (final_tensors[name].to(torch.float64) - p.detach()).abs().max().item()
        if diff >= worst[0]:
            worst = (diff, name)
    return worst


def verdict(label, what, diff, tolerance, detail=""):
    """Print one PASS/FAIL line for a difference against its tolerance; True on PASS."""
    passed = diff <= tolerance
    print(f"parity {label}: {'PASS' if passed else 'FAIL'} {what}: |diff| {diff:.2e} "
          f"(tolerance {tolerance:.0e}){detail}", flush=True)
    return passed


def weights_verdict(label, what, final_tensors, params):
    """verdict on tinygpt's final weights against the reference's ("what"
    names them); returns the failures, none or one."""
    worst_weight = largest_weight_difference(final_tensors, params)
    if verdict(label, what, worst_weight[0], WEIGHT_TOLERANCE, f"; worst in {worst_weight[1]}"):
        return []
    return [f"{label} {what} differ beyond tolerance"]


def write_parity_data(args, workdir):
    """The training text: --data, or a synthetic corpus written into "workdir"."""
    if args.data is not None:
        return args.data
    data = os.path.join(workdir, "synthetic.txt")
    with open(data, "w", encoding="utf-8", newline="") as f:
        f.write(synthetic_text())
    print(f"parity: wrote a synthetic corpus to {data}")
    return data


def arch_flags(meta):
    """--arch and --layers as a checkpoint's metadata has them (a run from
    --init must repeat them or leave them out)."""
    return ["--arch", meta["arch"], "--layers", meta["n_layer"]]


def init_model(args, data, init_dir, flags):
    """tinygpt's initial model: `tinygpt train` for 0 steps (save and stop)
    into "init_dir", "flags" after the text's. Returns (its path, its tensors,
    its metadata)."""
    run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0"] + flags)
    init_path = os.path.join(init_dir, "model.safetensors")
    init_tensors, meta = read_safetensors(init_path)
    return init_path, init_tensors, meta


def train_from(args, data, init_path, steps, out_dir, flags):
    """tinygpt trains "steps" steps from the checkpoint "init_path" on
    sequential batches, dropout off, into "out_dir", "flags" after those.
    Returns the paths of its log.csv and of its final model."""
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(steps), "--out", out_dir] + flags)
    return os.path.join(out_dir, "log.csv"), os.path.join(out_dir, "model.safetensors")


def tinygpt_eval(args, model_path, data):
    """`tinygpt eval --json` of "model_path" on "data": its JSON answer (loss,
    perplexity, tokens) as a dict."""
    reply = run([args.tinygpt, "eval", "--model", model_path, data, "--json"])
    return json.loads([line for line in reply.splitlines() if line.startswith("{")][-1])


def parity_tokens(data, vocab):
    """The text's token ids, and how many of them tinygpt trains on (those
    before its validation split): (tokens, n_train)."""
    tokens = read_tokens(data, vocab)
    return tokens, len(tokens) - math.floor(len(tokens) * PARITY_VAL_FRACTION)


def float64_params(tensors):
    """A checkpoint's tensors as the reference trains them: float64 leaves
    that autograd follows, name -> tensor."""
    return {name: t.to(torch.float64).requires_grad_() for name, t in tensors.items()}
