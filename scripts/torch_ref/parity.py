"""`parity`: tinygpt and the reference models (model.py) train from the same
checkpoint on the same batches and are compared: the card and the GPT by
plain SGD (losses, final weights, `tinygpt eval`, and a probe checkpoint with
weights of order 1, every tensor's step-0 gradient), the GPT with each of the
modern recipe's swaps, GPT-2; the GPT trained by AdamW and by Muon is in
parity_optim.py. cmd_parity runs them all.
"""

import math
import os
import tempfile

import torch

from torch_ref.data import sequential_batch
from torch_ref.model import (
    eval_loss, forward, gpt_forward, gpt_n_layer, model_swaps, PLAIN_GPT, random_gpt_params,
    swap_flags_meta)
from torch_ref.parity_optim import parity_gpt_adamw, parity_gpt_muon
from torch_ref.parity_setup import (
    arch_flags, EVAL_TOLERANCE, float64_params, GRAD_TOLERANCE, init_model,
    largest_weight_difference, LOSS_TOLERANCE, PARITY_BATCH, PARITY_GPT_ARCH_FLAGS, PARITY_LR,
    PARITY_MODEL_FLAGS, PARITY_RUN_FLAGS, parity_tokens, PROBE_SEED, PROBE_STEPS, replay_training,
    tinygpt_eval, train_from, verdict, WEIGHT_TOLERANCE, weights_verdict, write_parity_data)
from torch_ref.tinygpt import (
    card_arch_flags, check_metadata, expected_tensors, NANOGPT_PARTS, ParityFailure, read_log,
    read_safetensors, read_safetensors_header, sgd_flags, train_has_arch_flag, write_safetensors)


def replay_here(args, init_tensors, log, label, model, train_tokens, T):
    """3. tinygpt's training (its log) replayed in float64 here, from the
    init's tensors, with "model" (params, inputs, targets -> loss): the
    trained params, the (step, tinygpt's, torch's) losses, and the failures
    so far (a log of the wrong length, learning rates that differ)."""
    params = float64_params(init_tensors)
    failures = []
    if len(log) != args.steps:
        failures.append(f"{label} log.csv has {len(log)} rows, expected {args.steps}")
    losses, lr_failures = replay_training(label, params, log, model, train_tokens, T, args.verbose)
    return params, losses, failures + lr_failures


def parity_card(args, workdir, data):
    """The card model: tinygpt and model.py train it from the same checkpoint
    on the same batches; returns the list of failures."""
    # 1. The initial model, as tinygpt initialises it (0 steps: save and stop).
    arch = card_arch_flags(args.tinygpt)
    init_path, init_tensors, meta = init_model(
        args, data, os.path.join(workdir, "init"), arch + PARITY_MODEL_FLAGS + PARITY_RUN_FLAGS)
    vocab, n_head = check_metadata(init_tensors, meta, init_path)
    if meta.get("arch", "card") != "card":
        raise ParityFailure(f"{init_path}: arch {meta.get('arch')!r}, asked for card")

    # 2. tinygpt trains it: plain SGD, batches in order, no dropout.
    log_path, final_path = train_from(
        args, data, init_path, args.steps, os.path.join(workdir, "trained"),
        ["--lr", str(PARITY_LR)] + sgd_flags(args.tinygpt) + arch + PARITY_RUN_FLAGS)
    log = read_log(log_path)
    final_tensors, _ = read_safetensors(final_path)

    # 3. The same training in float64 here.
    tokens, n_train = parity_tokens(data, vocab)
    params, losses, failures = replay_here(args, init_tensors, log, "card", lambda p, i, t: forward(p, i, t, n_head)[0],
                                           tokens[:n_train], int(meta["block_size"]))
    worst_loss = max(((abs(c - r), step) for step, c, r in losses), default=(0.0, None))

    # 4. Compare.
    worst_weight = largest_weight_difference(final_tensors, params)
    print(f"parity card: {len(log)} steps; largest |loss difference| {worst_loss[0]:.2e} "
          f"(step {worst_loss[1]}, tolerance {LOSS_TOLERANCE:.0e})")
    print(f"parity card: largest |final weight difference| {worst_weight[0]:.2e} "
          f"({worst_weight[1]}, tolerance {WEIGHT_TOLERANCE:.0e})")
    if worst_loss[0] > LOSS_TOLERANCE:
        failures.append("card losses differ beyond tolerance")
    if worst_weight[0] > WEIGHT_TOLERANCE:
        failures.append("card final weights differ beyond tolerance")
    return failures


def step0_gradients(args, data, init_path, init_tensors, model, train_tokens, T, workdir):
    """Every tensor's step-0 gradient, tinygpt's against autograd's, from "init_path".

    tinygpt trains one step from it; its gradient is (w0 - w1) / lr.
    "model"(params, inputs, targets) is the GPT's mean loss. Returns one row
    per tensor, largest difference first: (max |difference|, name, max
    |gradient|, index of the worst element, tinygpt's and autograd's value
    there).
    """
    one_dir = os.path.join(workdir, "gpt-one-step-" + os.path.basename(os.path.dirname(init_path)))
    _, meta = read_safetensors(init_path)
    _, after_path = train_from(args, data, init_path, 1, one_dir, ["--lr", str(PARITY_LR)]
                               + PARITY_RUN_FLAGS + sgd_flags(args.tinygpt) + arch_flags(meta))
    after, _ = read_safetensors(after_path)
    params = float64_params(init_tensors)
    inputs, targets = sequential_batch(train_tokens, 0, PARITY_BATCH, T)
    model(params, inputs, targets).backward()
    rows = []
    for name, p in params.items():
        c_grad = (init_tensors[name].to(torch.float64) - after[name].to(torch.float64)) / PARITY_LR
        diff = (c_grad - p.grad).abs()
        where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        rows.append((diff.max().item(), name, p.grad.abs().max().item(), where,
                     c_grad[where].item(), p.grad[where].item()))
    return sorted(rows, reverse=True)


def print_gradient_rows(label, init_path, rows):
    """Print step0_gradients' rows, mark those beyond GRAD_TOLERANCE, and say
    where in the backward pass the first wrong one lies."""
    print(f"parity {label}: step-0 gradients from {init_path}, tinygpt's (w0 - w1)/lr against "
          "autograd's, worst first:")
    for diff, name, scale, where, c, r in rows:
        mark = "  <-- differs" if diff > GRAD_TOLERANCE else ""
        print(f"  {name:28s} max |diff| {diff:.2e} at {list(where)} (tinygpt {c:+.6f}, "
              f"torch {r:+.6f}; max |grad| {scale:.2e}){mark}")
    wrong_names = {name for diff, name, *_ in rows if diff > GRAD_TOLERANCE}
    # Backward visits the tensors in this order (tok_emb last, though the tied
    # head gives it a first share at the start; an untied head is first).
    names = {name for _, name, *_ in rows}
    n_layer = gpt_n_layer(dict.fromkeys(names))
    backward_order = ["head.weight", "ln_f.weight"] + [
        f"blocks.{i}.{n}" for i in reversed(range(n_layer))
        for n in ("mlp.proj.weight", "mlp.down_proj.weight", "mlp.fc.weight", "mlp.up_proj.weight",
                  "mlp.gate_proj.weight", "ln2.weight", "attn.proj.weight",
                  "attn.v.weight", "attn.k.weight", "attn.q.weight", "ln1.weight")
    ] + ["pos_emb.weight", "tok_emb.weight"]
    backward_order = [name for name in backward_order if name in names]
    wrong = [name for name in backward_order if name in wrong_names]
    if not wrong:
        print(f"parity {label}: no gradient differs by more than {GRAD_TOLERANCE:.0e}")
        return
    first = backward_order.index(wrong[0])
    last_good = backward_order[first - 1] if first > 0 else "the loss"
    print(f"parity {label}: {len(wrong)} of {len(backward_order)} gradients differ by more than "
          f"{GRAD_TOLERANCE:.0e}; in backward order the first is {wrong[0]} (after "
          f"{last_good}, which agrees): look between those two in the backward pass "
          "(if the step-0 loss also differs, the forward is wrong first)")


def gpt_probe(args, workdir, data, init_path, meta, tokens, n_train, model, label):
    """The probe: tinygpt evaluates, and trains from, a GPT checkpoint written
    here with weights of order 1 (random_gpt_params): its eval loss, PROBE_STEPS
    training steps, and every tensor's step-0 gradient. "model"(params,
    inputs, targets) is the GPT's mean loss; "label" names the check in what
    it prints. Returns the failures.

    The file copies the metadata and the tensor order of tinygpt's own
    "init_path" (the loader may check either); the weights are rounded to
    float32 before this side uses them, so both start from the same numbers.
    """
    header = read_safetensors_header(init_path)
    order = sorted((n for n in header if n != "__metadata__"),
                   key=lambda n: header[n]["data_offsets"][0])
    probe = random_gpt_params(expected_tensors(meta), PROBE_SEED)
    probe = {name: probe[name].to(torch.float32) for name in order}
    probe_dir = os.path.join(workdir, label.replace(" ", "-") + "-probe")
    os.makedirs(probe_dir, exist_ok=True)
    probe_path = os.path.join(probe_dir, "model.safetensors")
    write_safetensors(probe_path, probe, meta)
    print(f"parity {label}: wrote a probe checkpoint, weights of order 1, to {probe_path}")
    T = int(meta["block_size"])
    failures = []

    # 1. tinygpt eval of the probe.
    result = tinygpt_eval(args, probe_path, data)
    stored = {name: t.to(torch.float64) for name, t in probe.items()}
    ref_loss, predicted = eval_loss(lambda i, t: model(stored, i, t), tokens, T)
    if not verdict(label, f"probe eval loss over {predicted} tokens",
                   abs(result["loss"] - ref_loss), EVAL_TOLERANCE,
                   f"; tinygpt {result['loss']:.6f}, torch {ref_loss:.6f}"):
        failures.append(f"{label} probe eval loss differs beyond tolerance")

    # 2. A few training steps from the probe.
    trained_dir = os.path.join(workdir, label.replace(" ", "-") + "-probe-trained")
    log_path, final_path = train_from(args, data, probe_path, PROBE_STEPS, trained_dir,
                                      ["--lr", str(PARITY_LR)] + PARITY_RUN_FLAGS
                                      + sgd_flags(args.tinygpt) + arch_flags(meta))
    log = read_log(log_path)
    final_tensors, _ = read_safetensors(final_path)
    params = {name: t.clone().requires_grad_() for name, t in stored.items()}
    losses, lr_failures = replay_training(
        f"{label} probe", params, log, model, tokens[:n_train], T, args.verbose)
    failures += lr_failures
    if len(log) != PROBE_STEPS:
        failures.append(f"{label} probe log.csv has {len(log)} rows, expected {PROBE_STEPS}")
    worst_loss = max(((abs(c - r), step) for step, c, r in losses), default=(0.0, None))
    if not verdict(label, f"probe losses over {len(losses)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}"):
        failures.append(f"{label} probe losses differ beyond tolerance")
    failures += weights_verdict(label, "probe final weights", final_tensors, params)

    # 3. The step-0 gradient of every tensor, from one step of tinygpt's.
    rows = step0_gradients(args, data, probe_path, probe, model, tokens[:n_train], T, workdir)
    if not verdict(label, "probe step-0 gradients, every tensor", rows[0][0], GRAD_TOLERANCE,
                   f"; worst in {rows[0][1]}"):
        failures.append(f"{label} probe gradients differ beyond tolerance")
        print_gradient_rows(label, probe_path, rows)
    return failures


def parity_gpt(args, workdir, data, label="gpt", swap_flags=(), arch="gpt"):
    """The GPT: the same training check as the card model's, plus the step-0
    loss on its own, `tinygpt eval` of the trained model, and the probe
    (gpt_probe); returns the list of failures. On a failure it also prints
    every tensor's step-0 gradient from tinygpt's own init, to say where.

    "swap_flags" (--norm rmsnorm, ...) make the GPT one with the modern
    recipe's swaps; the model here reads them from the checkpoint's
    metadata, so the check also proves that tinygpt keeps them there.
    "label" names the check in what it prints, and its directories. "arch"
    "gpt2" checks GPT-2's model instead (parity_gpt2)."""
    if not train_has_arch_flag(args.tinygpt):
        raise ParityFailure(f"`{args.tinygpt} train --help` lists no --arch: this tinygpt has "
                            "no GPT (run with --only card to check the card model alone)")

    # 1. The initial GPT, as tinygpt initialises it.
    prefix = label.replace(" ", "-")
    # gpt2's parts are GPT-2's (it takes no --norm, --pos, ...); char tokens as the gpt's.
    parts = NANOGPT_PARTS if arch == "gpt" else ["--tokenizer", "char"]
    asked_arch = ["--arch", arch] + PARITY_GPT_ARCH_FLAGS[2:]
    init_path, init_tensors, meta = init_model(
        args, data, os.path.join(workdir, prefix + "-init"),
        ["--dropout", "0"] + asked_arch + parts + list(swap_flags) + PARITY_MODEL_FLAGS
        + PARITY_RUN_FLAGS)
    if meta.get("arch") != arch:
        raise ParityFailure(f"{init_path}: metadata arch is {meta.get('arch')!r}, expected {arch!r}")
    vocab, n_head = check_metadata(init_tensors, meta, init_path)
    n_layer = int(meta["n_layer"])
    if str(n_layer) != PARITY_GPT_ARCH_FLAGS[3]:
        raise ParityFailure(f"{init_path}: n_layer {n_layer}, asked for {PARITY_GPT_ARCH_FLAGS[3]}")
    swaps = model_swaps(meta)
    asked = swap_flags_meta(swap_flags)
    for key in PLAIN_GPT:
        if swaps[key] != asked.get(key, PLAIN_GPT[key]):
            raise ParityFailure(f"{init_path}: metadata {key} is {swaps[key]!r}, asked for "
                                f"{' '.join(swap_flags) or 'the plain GPT'}")

    def model(p, i, t):
        return gpt_forward(p, i, t, n_head, swaps)[0]

    # 2. tinygpt trains it from that file.
    trained_dir = os.path.join(workdir, prefix + "-trained")
    log_path, final_path = train_from(
        args, data, init_path, args.steps, trained_dir,
        ["--lr", str(PARITY_LR)] + sgd_flags(args.tinygpt) + asked_arch + PARITY_RUN_FLAGS)
    log = read_log(log_path)
    final_tensors, final_meta = read_safetensors(final_path)
    check_metadata(final_tensors, final_meta, final_path)

    # 3. The same training in float64 here.
    tokens, n_train = parity_tokens(data, vocab)
    T = int(meta["block_size"])
    if not log or log[0][0] != 0:
        raise ParityFailure(f"{trained_dir}/log.csv does not start at step 0")
    params, losses, failures = replay_here(args, init_tensors, log, label, model, tokens[:n_train], T)

    # 4. Compare: the step-0 loss (the forward pass alone, from the shared
    # init), every step's loss, the final weights.
    _, c0, r0 = losses[0]
    if not verdict(label, "step-0 loss", abs(c0 - r0), LOSS_TOLERANCE,
                   f"; tinygpt {c0:.6f}, torch {r0:.6f}"):
        failures.append(f"{label} step-0 loss differs beyond tolerance")
    worst_loss = max((abs(c - r), step) for step, c, r in losses)
    if not verdict(label, f"losses over {len(losses)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}; loss {losses[0][2]:.4f} -> "
                   f"{losses[-1][2]:.4f}"):
        failures.append(f"{label} losses differ beyond tolerance")
    failures += weights_verdict(label, "final weights", final_tensors, params)

    # 5. `tinygpt eval` of the trained model against the same windows here,
    # with the weights as stored (float32, widened).
    result = tinygpt_eval(args, final_path, data)
    stored = {name: t.to(torch.float64) for name, t in final_tensors.items()}
    ref_loss, predicted = eval_loss(lambda i, t: model(stored, i, t), tokens, T)
    if int(result["tokens"]) != predicted:
        failures.append(f"tinygpt eval scored {result['tokens']} tokens, expected {predicted}")
    if not verdict(label, f"eval loss over {predicted} tokens", abs(result["loss"] - ref_loss),
                   EVAL_TOLERANCE, f"; tinygpt {result['loss']:.6f}, torch {ref_loss:.6f}"):
        failures.append(f"{label} eval loss differs beyond tolerance")
    if abs(result["perplexity"] - math.exp(result["loss"])) > 1e-5 * result["perplexity"] + 1e-6:
        failures.append(f"tinygpt eval perplexity {result['perplexity']} is not exp(loss)")

    # 6. The same on weights of order 1, where attention and the MLP are
    # far from trivial.
    failures += gpt_probe(args, workdir, data, init_path, meta, tokens, n_train, model, label)

    # Where a failure comes from: the gradients from tinygpt's own init.
    if failures:
        print_gradient_rows(label, init_path, step0_gradients(args, data, init_path, init_tensors,
                                                              model, tokens[:n_train], T, workdir))
    return failures


# The modern recipe's swaps parity checks: each alone, then all together.
RECIPE_SWAPS = [
    ("rmsnorm", ["--norm", "rmsnorm"]),
    ("relu2", ["--mlp", "relu2"]),
    ("untied-head", ["--untied-head"]),
    ("rope", ["--pos", "rope"]),
    ("qk-norm", ["--qk-norm"]),
    ("swiglu", ["--mlp", "swiglu"]),
]


def parity_recipe(args, workdir, data):
    """The GPT's checks (parity_gpt) on a GPT with each of the modern
    recipe's swaps, then with all of them; returns the list of failures.
    A GPT has one MLP: "all" takes the last of RECIPE_SWAPS' --mlp values
    (tinygpt refuses a flag given twice)."""
    failures = []
    chosen = {}
    for _, flags in RECIPE_SWAPS:
        chosen.update({flags[0]: flags})  # one entry per flag; a later --mlp replaces an earlier
    cases = RECIPE_SWAPS + [("all", [f for flags in chosen.values() for f in flags])]
    for name, flags in cases:
        failures += parity_gpt(args, workdir, data, label=f"gpt {name}", swap_flags=flags)
    return failures


def parity_gpt2(args, workdir, data):
    """GPT-2's model (--arch gpt2): the GPT's checks (parity_gpt) with its
    biases, once with GPT-2's tanh GELU and once with the exact one; returns
    the list of failures. Its biases start at 0, so the trained weights and
    the probe (every bias N(0, 0.5^2)) are what put them in the sums."""
    failures = []
    for name, flags in (("gelu_tanh", ["--mlp", "gelu_tanh"]), ("gelu", ["--mlp", "gelu"])):
        failures += parity_gpt(args, workdir, data, label=f"gpt2 {name}", swap_flags=flags, arch="gpt2")
    return failures


def cmd_parity(args):
    """Train with tinygpt and with model.py's models on the same batches; compare."""
    with tempfile.TemporaryDirectory(prefix="tinygpt-parity-") as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        data = write_parity_data(args, workdir)
        checks = [("card", parity_card), ("gpt", parity_gpt), ("adamw", parity_gpt_adamw),
                  ("muon", parity_gpt_muon), ("recipe", parity_recipe), ("gpt2", parity_gpt2)]
        failures = []
        for label, check in checks:
            if args.only not in (None, label):
                continue
            try:
                failures += check(args, workdir, data)
            except ParityFailure as e:
                print(f"parity {label}: FAIL: {e}")
                failures.append(f"{label}: {e}")
        if failures:
            print("parity: FAIL: " + "; ".join(dict.fromkeys(failures)))
            return 1
        print("parity: PASS: tinygpt matches the PyTorch reference")
        return 0
