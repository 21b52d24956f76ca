"""`selftest`: this package's pieces checked against each other and against
autograd: the safetensors reader and writer, the card's forward against a
loop version, the nn.Modules against the functions, gradients against finite
differences, the batches, the FLOP count, and the optimizer's written-out
pieces against torch's own.
"""

import os
import random
import tempfile

import torch

from torch_ref.data import sequential_batch, synthetic_text
from torch_ref.model import (
    eval_loss, eval_windows, forward, forward_loops, gelu, gpt_forward, gpt_param_shapes,
    layer_norm, LAYER_NORM_EPS, random_gpt_params, random_params)
from torch_ref.modules import BenchConfig, BenchGPT, BenchNanoGPT, forward_flops_per_token
from torch_ref.optim import (
    adamw_param_groups, adamw_update, clip_gradients, GPT_RECIPE, make_adamw, nanogpt_lr, set_lr,
    torch_scheduler_lrs)
from torch_ref.tinygpt import check_metadata, ParityFailure, read_safetensors, write_safetensors


def sees_no_future(logits_of, idx, V):
    """Causality: changing each row's last token of "idx" [B,T] (ids below V)
    changes the logits ("logits_of"(idx)) at the last position and at no
    earlier one."""
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    before, after = logits_of(idx), logits_of(changed)
    return torch.equal(before[:, :-1], after[:, :-1]) and not torch.equal(before, after)


def cmd_selftest(args):
    """Check this package's pieces against each other and against autograd."""
    torch.manual_seed(0)
    ok = True

    def report(name, passed, detail=""):
        nonlocal ok
        ok = ok and passed
        print(f"selftest: {'ok  ' if passed else 'FAIL'} {name} {detail}")

    def expect(name, call, error, refused):
        """call() must raise "error" when "refused", and must return without it otherwise."""
        try:
            call()
            report(name, not refused)
        except error as e:
            report(name, refused, f"({e})")

    # 1. safetensors: write a known file, read it back.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.safetensors")
        params = random_params(V=7, block_size=5, C=8, dtype=torch.float32)
        meta = {"vocab": "ab\u2014c\u2019d\n", "vocab_size": "7", "n_embd": "8",
                "n_head": "2", "block_size": "5", "dropout": "0.1", "step": "3"}
        write_safetensors(path, params, meta)
        tensors, meta_back = read_safetensors(path)
        same = (meta_back == meta and list(tensors) == list(params)
                and all(torch.equal(tensors[n], params[n]) for n in params))
        report("safetensors round trip", same)
        expect("check_metadata accepts the card model's tensors",
               lambda: check_metadata(tensors, meta_back, path), ParityFailure, refused=False)
        with open(path, "rb") as f:
            blob = f.read()
        with open(path, "wb") as f:
            f.write(blob[:-4])
        expect("safetensors rejects a truncated file", lambda: read_safetensors(path), ValueError, refused=True)

    # 2. forward() against the loop version, with and without dropout.
    V, T, C, NH, B, p = 6, 5, 8, 2, 2, 0.3
    params = random_params(V, T, C)
    idx = torch.randint(V, (B, T))
    targets = torch.randint(V, (B, T))
    keep = (torch.rand(B, NH, T, T) >= p).to(torch.float64)
    for name, mask in (("no dropout", None), ("dropout", keep)):
        loss, logits = forward(params, idx, targets, NH, mask, p)
        loss_loops, logits_loops = forward_loops(params, idx, targets, NH, mask, p)
        diff = max(abs(loss.item() - loss_loops), (logits - logits_loops).abs().max().item())
        report(f"forward matches the loop version ({name})", diff < 1e-12, f"(max diff {diff:.1e})")

    # 2b. The benchmark's nn.Module computes the same (dropout off).
    module = BenchGPT(V, T, C, NH, p).double()
    module.load_reference(params)
    module.eval()
    loss_m, logits_m = module(idx, targets)
    loss, logits = forward(params, idx, targets, NH)
    diff = max(abs(loss_m.item() - loss.item()), (logits_m - logits).abs().max().item())
    report("BenchGPT matches forward()", diff < 1e-12, f"(max diff {diff:.1e})")

    # 3. Causality: changing a later token must not change earlier logits.
    report("earlier positions do not see later tokens",
           sees_no_future(lambda i: forward(params, i, targets, NH)[1], idx, V))

    # 4. Gradients: autograd against finite differences, every tensor at once.
    names = list(params)
    for name, mask in (("no dropout", None), ("dropout", keep)):
        def loss_of(*tensors, mask=mask):
            return forward(dict(zip(names, tensors)), idx, targets, NH, mask, p)[0]
        inputs = tuple(params[n].clone().requires_grad_() for n in names)
        passed = torch.autograd.gradcheck(loss_of, inputs, eps=1e-6, atol=1e-6, rtol=1e-5,
                                          raise_exception=False)
        report(f"gradcheck ({name})", passed)

    # 5. Batches: row b of batch s starts at ((s*B + b) * T) mod (n - T).
    tokens = list(range(100))
    inputs, targets = sequential_batch(tokens, 3, 4, 16)
    starts = [((3 * 4 + b) * 16) % (100 - 16) for b in range(4)]
    report("sequential batches", inputs[:, 0].tolist() == starts
           and torch.equal(targets, inputs + 1))

    # 6. The synthetic corpus is deterministic and has multi-byte characters.
    text = synthetic_text()
    report("synthetic text", text == synthetic_text() and "\u2014" in text and len(text) > 5000,
           f"({len(text)} characters, {len(set(text))} distinct)")

    # 7. The GPT's checkpoint: tensors written in a shuffled order are read by
    # name, and check_metadata knows the GPT's names and shapes.
    V, T, C, NH, L, B = 7, 5, 8, 2, 2, 3
    gpt_params = random_gpt_params(gpt_param_shapes(V, T, C, L), seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt.safetensors")
        names = list(gpt_params)
        random.Random(5).shuffle(names)
        meta = {"vocab": "ab\u2014c\u2019d\n", "vocab_size": str(V), "n_embd": str(C),
                "n_head": str(NH), "block_size": str(T), "arch": "gpt", "n_layer": str(L),
                "dropout": "0", "step": "0"}
        write_safetensors(path, {n: gpt_params[n].float() for n in names}, meta)
        tensors, meta_back = read_safetensors(path)
        same = (meta_back == meta and sorted(tensors) == sorted(gpt_params)
                and all(torch.equal(tensors[n], gpt_params[n].float()) for n in gpt_params))
        report("GPT safetensors round trip (shuffled order)", same)
        expect("check_metadata accepts the GPT's tensors",
               lambda: check_metadata(tensors, meta_back, path), ParityFailure, refused=False)
        without_ln_f = {n: t for n, t in tensors.items() if n != "ln_f.weight"}
        expect("check_metadata rejects a GPT without ln_f.weight",
               lambda: check_metadata(without_ln_f, meta_back, path), ParityFailure, refused=True)

        # 7b. eval on a checkpoint written here: eval_loss over the windows
        # equals the loss of one forward over all of them.
        stored = {n: t.to(torch.float64) for n, t in tensors.items()}
        tokens = [random.Random(6).randrange(V) for _ in range(4 * T + 3)]
        def loss_fn(i, t):
            return gpt_forward(stored, i, t, NH)[0]
        loss, predicted = eval_loss(loss_fn, tokens, T, chunk=3)
        inputs, targets = eval_windows(tokens, T)
        whole = loss_fn(inputs, targets).item()
        report("eval windows and eval_loss", predicted == 4 * T and abs(loss - whole) < 1e-12
               and inputs[1, 0].item() == tokens[T] and targets[3, -1].item() == tokens[4 * T]
               and eval_windows(tokens[:T + 1], T)[0].shape == (1, T)
               and eval_windows(tokens[:T], T)[0].shape == (0, T),
               f"({predicted} tokens, |diff| {abs(loss - whole):.1e})")

    # 8. gpt_forward against BenchNanoGPT (library layer norm, gelu, softmax,
    # cross-entropy, fused qkv), the same weights, dropout off.
    idx = torch.randint(V, (B, T))
    targets = torch.randint(V, (B, T))
    module = BenchNanoGPT(V, T, C, NH, L, dropout=0.3).double()
    module.load_reference(gpt_params)
    module.eval()
    loss_m, logits_m = module(idx, targets)
    loss, logits = gpt_forward(gpt_params, idx, targets, NH)
    diff = max(abs(loss_m.item() - loss.item()), (logits_m - logits).abs().max().item())
    report("BenchNanoGPT matches gpt_forward()", diff < 1e-12, f"(max diff {diff:.1e})")
    x = torch.randn(3, C, dtype=torch.float64)
    w = gpt_params["ln_f.weight"]
    diff = max((layer_norm(x, w) - torch.nn.functional.layer_norm(x, (C,), w, None,
                                                                  LAYER_NORM_EPS)).abs().max(),
               (gelu(x) - torch.nn.functional.gelu(x)).abs().max()).item()
    report("layer_norm and gelu match torch's", diff < 1e-12, f"(max diff {diff:.1e})")
    module.train()
    trained_mode = module(idx, targets)[0].item()
    report("BenchNanoGPT applies dropout in training mode", trained_mode != loss.item())

    # 9. Causality, and the head is tied: no head.* tensor, tok_emb gets the
    # gradient of both uses.
    report("GPT: earlier positions do not see later tokens",
           sees_no_future(lambda i: gpt_forward(gpt_params, i, None, NH)[1], idx, V))

    # 10. GPT gradients: autograd against finite differences, every tensor.
    names = list(gpt_params)
    def gpt_loss_of(*tensors):
        return gpt_forward(dict(zip(names, tensors)), idx, targets, NH)[0]
    inputs = tuple(gpt_params[n].clone().requires_grad_() for n in names)
    passed = torch.autograd.gradcheck(gpt_loss_of, inputs, eps=1e-6, atol=1e-6, rtol=1e-5,
                                      raise_exception=False)
    report(f"GPT gradcheck ({L} layers, {sum(t.numel() for t in inputs)} parameters)", passed)

    # 11. The FLOP count's matmul term is 2 x the weights each token goes
    # through: BenchNanoGPT's Linear weights plus the tied head.
    cfg = BenchConfig("t", "gpt", L, C, NH, T, B, 0.0)
    matmul_weights = sum(m.weight.numel() for m in module.modules()
                         if isinstance(m, torch.nn.Linear)) + V * C
    attention = L * 2 * 2 * C * (T + 1) / 2
    report("GPT FLOP count", forward_flops_per_token(cfg, V) == 2 * matmul_weights + attention,
           f"({forward_flops_per_token(cfg, V):.0f} per token)")

    # 12. The optimizer's pieces against torch's own, on random tensors.
    gen = torch.Generator().manual_seed(12)
    shapes = {"a.weight": [5, 3], "b.weight": [4], "c.weight": [2, 6], "d.bias": [3]}
    def random_tensors(scale):
        return {n: scale * torch.randn(s, generator=gen, dtype=torch.float64)
                for n, s in shapes.items()}

    # 12a. clip_gradients against clip_grad_norm_, a limit below the norm
    # (clips) and above it (leaves the gradients alone).
    for max_norm in (0.5, 100.0):
        grads = random_tensors(1.0)
        mine = {n: g.clone() for n, g in grads.items()}
        norm = clip_gradients(list(mine.values()), max_norm)
        theirs = {n: torch.nn.Parameter(torch.zeros_like(g)) for n, g in grads.items()}
        for n, p in theirs.items():
            p.grad = grads[n].clone()
        torch_norm = torch.nn.utils.clip_grad_norm_(list(theirs.values()), max_norm).item()
        diff = max([abs(norm - torch_norm)] + [(mine[n] - theirs[n].grad).abs().max().item()
                                              for n in grads])
        report(f"clip_gradients matches clip_grad_norm_ (limit {max_norm:g}, norm {norm:.2f})",
               diff < 1e-12, f"(max diff {diff:.1e})")

    # 12b. adamw_update against torch.optim.AdamW (make_adamw: the 2-D
    # tensors decay), 6 updates with changing lr and gradients.
    recipe = GPT_RECIPE._replace(weight_decay=0.3)
    start = random_tensors(1.0)
    mine = {n: w.clone() for n, w in start.items()}
    theirs = {n: torch.nn.Parameter(w.clone()) for n, w in start.items()}
    optimizer = make_adamw(adamw_param_groups(theirs.items(), recipe.weight_decay), recipe)
    state = {}
    for t in range(6):
        grads = random_tensors(10.0 ** (t % 3 - 1))
        lr = 1e-2 * (t + 1)
        adamw_update(mine, grads, state, lr, recipe)
        for n, p in theirs.items():
            p.grad = grads[n].clone()
        set_lr(optimizer, lr)
        optimizer.step()
    diff = max((mine[n] - theirs[n].detach()).abs().max().item() for n in start)
    moved = min((mine[n] - start[n]).abs().max().item() for n in start)
    report("adamw_update matches torch.optim.AdamW (6 updates)", diff < 1e-12 and moved > 1e-3,
           f"(max diff {diff:.1e}, every tensor moved at least {moved:.1e})")

    # 12c. The split: 2-D tensors (tok_emb among them) decay, LayerNorm
    # weights do not.
    groups = adamw_param_groups(gpt_params.items(), 0.1)
    decays = dict.fromkeys(groups[0]["names"], True) | dict.fromkeys(groups[1]["names"], False)
    report("weight decay for the 2-D tensors only",
           decays["tok_emb.weight"] and decays["blocks.0.mlp.fc.weight"]
           and not decays["ln_f.weight"] and not decays["blocks.1.ln1.weight"]
           and groups[0]["weight_decay"] == 0.1 and groups[1]["weight_decay"] == 0.0
           and len(decays) == len(gpt_params),
           f"({len(groups[0]['names'])} decay, {len(groups[1]['names'])} do not)")

    # 12d. nanogpt_lr against the same schedule made of torch's lr_scheduler.
    for schedule, warmup, steps in (("cosine", 5, 40), ("constant", 3, 20)):
        r = GPT_RECIPE._replace(lr=3e-3, warmup=warmup, schedule=schedule)
        theirs = torch_scheduler_lrs(r, steps)
        ours = [nanogpt_lr(it, r, steps) for it in range(steps)]
        diff = max(abs(a - b) for a, b in zip(ours, theirs))
        report(f"nanogpt_lr matches torch's LinearLR + "
               f"{'CosineAnnealingLR' if schedule == 'cosine' else 'ConstantLR'}",
               diff < 1e-15 and ours[warmup] == r.lr and ours[0] == r.lr / (warmup + 1),
               f"(warmup {warmup}, {steps} steps, max diff {diff:.1e})")
    r = GPT_RECIPE._replace(lr=1.0, min_lr=0.1, warmup=0)
    report("nanogpt_lr: cosine halfway down at the middle, min_lr at it = steps and after",
           nanogpt_lr(10, r, 10) == 0.1 and abs(nanogpt_lr(5, r, 10) - 0.55) < 1e-15
           and nanogpt_lr(11, r, 10) == 0.1)

    print("selftest: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1
