#!/usr/bin/python3
"""bench_gpt2.py: GPT-2 124M's size, tinygpt beside PyTorch, in one run.

`make bench-gpt2` (part of `make bench`) runs it. It writes a random model
of GPT-2 124M's shape in Hugging Face's layout (12 blocks, 768 channels,
12 heads, 1024 positions, 50,257 tokens; scripts/hf_gpt2.py random, with
GPT-2's own vocab.json and merges.txt), then measures, on THREADS threads:

- tinygpt: the time to load it (`sample --tokens 1`, the whole process),
  sampling with the key/value cache (`sample`'s own tokens/s line), and
  fine-tuning on DATA (`train --init DIR`, batch 4, context 256, AdamW;
  log.csv's ms per step after the first), each with its peak memory;
- PyTorch (1.13, Debian's): the same model as an ordinary nn.Module, a
  training step (forward, loss, backward, AdamW) on batch 4 x 256, and
  sampling one token at a time with a key/value cache, each in a process of
  its own with its peak memory;
- the machine: its FMA peak (`tinygpt peak`), for the training speed as a
  share of it, and its memory bandwidth (PyTorch summing a 512 MB tensor),
  for sampling's bound: a token must read every weight once, so no sampler
  runs faster than bandwidth / weight bytes.

The table goes to stdout and to bench/gpt2.md. Usage:

scripts/bench_gpt2.py --tinygpt ./tinygpt --data data/moby-dick.txt --tokenizer-dir build/gpt2-tokenizer/gpt2
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torch_ref.measure import machine_description, measure_peak, run_measured  # noqa: E402

SHAPE = {"layers": 12, "heads": 12, "embd": 768, "positions": 1024, "vocab": 50257}
B, T = 4, 256  # the fine-tuning batch the issue names


def fail(message):
    sys.exit(f"bench_gpt2: {message}")


def run_checked(command, env=None):
    """run_measured (torch_ref/measure.py), stopping the bench on failure; (rss_mb, stdout, stderr)."""
    status, rss_mb, out, err = run_measured(command, env)
    if status != 0:
        print("+ " + " ".join(command), file=sys.stderr)
        fail(f"{command[0]} exited with status {status}:\n" + "\n".join(err.splitlines()[-15:]))
    return rss_mb, out, err


# ---- The PyTorch side: workers, each in a process of its own ------------------------------------------------

def torch_model(torch):
    """GPT-2 124M as a PyTorch user writes it: nn.Linear, F.layer_norm with a bias, gelu (tanh), a tied head."""
    F = torch.nn.functional
    C, NH, L, V, P = SHAPE["embd"], SHAPE["heads"], SHAPE["layers"], SHAPE["vocab"], SHAPE["positions"]

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
            self.c_attn, self.c_proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
            self.c_fc, self.mlp_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

        def attend(self, x, cache=None):
            Bx, Tx, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(Bx, Tx, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            if cache is not None:  # one new position: append its key and value, attend to all
                if "k" in cache:
                    k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
                cache["k"], cache["v"] = k, v
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
            else:
                scores = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
                mask = torch.ones(Tx, Tx, dtype=torch.bool).tril()
                scores = scores.masked_fill(~mask, float("-inf"))
            y = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(Bx, Tx, C)
            return self.c_proj(y)

        def forward(self, x, cache=None):
            x = x + self.attend(x, cache)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = torch.nn.Embedding(V, C), torch.nn.Embedding(P, C)
            self.h = torch.nn.ModuleList(Block() for _ in range(L))
            self.ln_f = torch.nn.LayerNorm(C)

        def forward(self, idx, start=0, caches=None):
            x = self.wte(idx) + self.wpe(torch.arange(start, start + idx.shape[1]))
            for i, block in enumerate(self.h):
                x = block(x, caches[i] if caches is not None else None)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied head

    with torch.no_grad():
        model = GPT2()
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return model


def worker_train(args):
    """PyTorch: args.steps training steps on random ids; prints {"step_ms": [...]}."""
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torch_model(torch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step_ms = []
    for _ in range(args.steps):
        ids = torch.randint(SHAPE["vocab"], (B, T + 1))
        start = time.perf_counter()
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.view(B * T, -1), ids[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step_ms.append(1e3 * (time.perf_counter() - start))
    print(json.dumps({"step_ms": step_ms}))


def worker_sample(args):
    """PyTorch: args.tokens tokens one at a time with a key/value cache; prints {"tokens_per_s": x}."""
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = torch_model(torch).eval()
    caches = [{} for _ in range(SHAPE["layers"])]
    token = torch.tensor([[464]])
    with torch.no_grad():
        warm = 4  # the first calls allocate and start threads: not timed (tinygpt's count starts after loading)
        for t in range(warm + args.tokens):
            if t == warm:
                start = time.perf_counter()
            logits = model(token, t, caches)
            token = torch.multinomial(torch.softmax(logits[0, -1], -1), 1).view(1, 1)
        seconds = time.perf_counter() - start
    print(json.dumps({"tokens_per_s": args.tokens / seconds}))


def worker_bandwidth(args):
    """Memory read bandwidth: the best of a few sums of a 512 MB tensor; prints {"gb_per_s": x}."""
    import torch
    torch.set_num_threads(args.threads)
    x = torch.ones(128 * 1024 * 1024)
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        x.sum().item()
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"gb_per_s": x.numel() * 4 / best / 1e9}))


def torch_worker(kind, threads, **extra):
    """Run this script's worker "kind" in a process of its own; (its JSON, peak RSS in MB)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--threads", str(threads)]
    for key, value in extra.items():
        command += [f"--{key}", str(value)]
    rss_mb, out, _ = run_checked(command)
    return json.loads(out.strip().splitlines()[-1]), rss_mb


# ---- The tinygpt side ----------------------------------------------------------------------------------------

def tinygpt_load_and_sample(args, model_dir, tokens):
    """`sample` of "tokens" tokens: (seconds of the whole process, sampling's tokens/s, peak RSS MB)."""
    command = [args.tinygpt, "sample", "--model", model_dir, "--prompt", "The", "--tokens", str(tokens),
               "--threads", str(args.threads), "--seed", "1"]
    start = time.perf_counter()
    rss_mb, _, err = run_checked(command)
    seconds = time.perf_counter() - start
    m = re.search(r"sampled \d+ tokens in [\d.]+ s \(([\d.]+) tokens/s\)", err)
    if not m:
        fail(f"no 'sampled N tokens' line from {' '.join(command)}:\n{err}")
    return seconds, float(m.group(1)), rss_mb


def tinygpt_finetune(args, model_dir, out_dir):
    """`train --init DIR` for args.steps steps of 4 x 256: (median ms per step after the first, FLOPs per token, RSS MB)."""
    command = [args.tinygpt, "train", args.data, "--init", model_dir, "--out", out_dir, "--force",
               "--batch", str(B), "--context", str(T), "--steps", str(args.steps), "--threads", str(args.threads),
               "--eval-interval", str(args.steps + 1), "--save-every", "0", "--sample-every", "0"]
    rss_mb, _, err = run_checked(command)
    m = re.search(r"speed: ([\d.]+) MFLOP per token", err)
    if not m:
        fail(f"no 'speed: ... MFLOP per token' line from {' '.join(command)}:\n{err}")
    with open(os.path.join(out_dir, "log.csv")) as f:
        ms = [float(row["ms"]) for row in csv.DictReader(f)]
    return statistics.median(ms[1:]), float(m.group(1)) * 1e6, rss_mb


# ---- The report ----------------------------------------------------------------------------------------------

def report(r, peak, load_before):
    tokens = B * T
    lines = [
        "# GPT-2 124M's size: tinygpt and PyTorch",
        "",
        f"Measured by `make bench-gpt2` (scripts/bench_gpt2.py) on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{machine_description()}; {peak['cpu']}, FMA peak {peak['gflops_all_threads']:.0f} GFLOP/s on "
        f"{peak['threads']} threads (`tinygpt peak`); memory read bandwidth {r['gb_per_s']:.1f} GB/s (PyTorch, "
        f"the sum of a 512 MB tensor); load average {load_before[0]:.2f} at the start. A random model of "
        f"GPT-2 124M's shape in Hugging Face's layout ({r['params'] / 1e6:.1f}M parameters, "
        f"{r['weight_mb']:.0f} MB of float32 weights), {r['threads']} threads.",
        "",
        "| | tinygpt | PyTorch | tinygpt / PyTorch |",
        "|---|---|---|---|",
        f"| load (`sample --tokens 1`, the whole process) | {r['load_s']:.2f} s | | |",
        f"| sampling with the key/value cache | {r['tg_sample']:.1f} tokens/s | {r['pt_sample']:.1f} tokens/s | "
        f"{r['tg_sample'] / r['pt_sample']:.2f}x |",
        f"| sampling's bound (bandwidth / weight bytes) | {r['bound']:.1f} tokens/s | | "
        f"tinygpt at {100 * r['tg_sample'] / r['bound']:.0f}% of it |",
        f"| sampling, peak memory | {r['tg_sample_rss']:.0f} MB | {r['pt_sample_rss']:.0f} MB | |",
        f"| fine-tuning (batch {B} x {T}, AdamW) | {tokens / (r['tg_ms'] / 1e3):.0f} tokens/s "
        f"({r['tg_ms'] / 1e3:.2f} s a step) | {tokens / (r['pt_ms'] / 1e3):.0f} tokens/s "
        f"({r['pt_ms'] / 1e3:.2f} s a step) | {r['pt_ms'] / r['tg_ms']:.2f}x |",
        f"| fine-tuning, share of the FMA peak | {100 * r['tg_gflops'] / peak['gflops_all_threads']:.0f}% "
        f"({r['tg_gflops']:.0f} GFLOP/s) | {100 * r['pt_gflops'] / peak['gflops_all_threads']:.0f}% "
        f"({r['pt_gflops']:.0f} GFLOP/s) | |",
        f"| fine-tuning, peak memory | {r['tg_train_rss']:.0f} MB | {r['pt_train_rss']:.0f} MB | |",
        "",
        f"FLOPs are tinygpt's count for a trained token ({r['flops_per_token'] / 1e6:.0f} MFLOP, forward and "
        "backward; the same model, so the same count for PyTorch). Steps: the median after the first.",
    ]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=["train", "sample", "bandwidth"], help=argparse.SUPPRESS)
    parser.add_argument("--tinygpt", default="./tinygpt")
    parser.add_argument("--data", default="data/moby-dick.txt")
    parser.add_argument("--tokenizer-dir", default="build/gpt2-tokenizer/gpt2",
                        help="GPT-2's vocab.json and merges.txt (make gpt2-tokenizer-check fetches them)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--steps", type=int, default=4, help="fine-tuning steps (the first is left out)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens sampled")
    parser.add_argument("--out", default="bench/gpt2.md")
    args = parser.parse_args()
    if args.worker == "train":
        return worker_train(args)
    if args.worker == "sample":
        return worker_sample(args)
    if args.worker == "bandwidth":
        return worker_bandwidth(args)

    for path in ("vocab.json", "merges.txt"):
        if not os.path.exists(os.path.join(args.tokenizer_dir, path)):
            fail(f"no {path} in '{args.tokenizer_dir}': run `make gpt2-tokenizer-check` first, or give --tokenizer-dir")
    load_before = os.getloadavg()
    peak = measure_peak(args.tinygpt, args.threads)
    r = {"threads": args.threads}
    C, L, V, P = SHAPE["embd"], SHAPE["layers"], SHAPE["vocab"], SHAPE["positions"]
    r["params"] = V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C
    r["weight_mb"] = r["params"] * 4 / 1e6
    with tempfile.TemporaryDirectory(prefix="tinygpt-bench-gpt2-") as tmp:
        model_dir = os.path.join(tmp, "gpt2-124M")
        print("bench_gpt2: writing a random GPT-2 124M directory", file=sys.stderr, flush=True)
        run_checked([sys.executable, os.path.join(HERE, "hf_gpt2.py"), "random", model_dir,
                     "--layers", str(L), "--heads", str(SHAPE["heads"]), "--embd", str(C), "--positions", str(P),
                     "--vocab", str(V), "--dtype", "f32", "--tokenizer-from", args.tokenizer_dir])
        print("bench_gpt2: tinygpt: load, sample, fine-tune", file=sys.stderr, flush=True)
        r["load_s"], _, _ = tinygpt_load_and_sample(args, model_dir, 1)
        _, r["tg_sample"], r["tg_sample_rss"] = tinygpt_load_and_sample(args, model_dir, args.tokens)
        r["tg_ms"], r["flops_per_token"], r["tg_train_rss"] = tinygpt_finetune(args, model_dir,
                                                                               os.path.join(tmp, "run"))
    print("bench_gpt2: PyTorch: train, sample; the memory bandwidth", file=sys.stderr, flush=True)
    pt_train, r["pt_train_rss"] = torch_worker("train", args.threads, steps=args.steps)
    r["pt_ms"] = statistics.median(pt_train["step_ms"][1:])
    pt_sample, r["pt_sample_rss"] = torch_worker("sample", args.threads, tokens=args.tokens)
    r["pt_sample"] = pt_sample["tokens_per_s"]
    r["gb_per_s"] = torch_worker("bandwidth", args.threads)[0]["gb_per_s"]
    r["bound"] = r["gb_per_s"] * 1e9 / (r["params"] * 4)
    tokens = B * T
    r["tg_gflops"] = tokens / (r["tg_ms"] / 1e3) * r["flops_per_token"] / 1e9
    r["pt_gflops"] = tokens / (r["pt_ms"] / 1e3) * r["flops_per_token"] / 1e9
    text = report(r, peak, load_before)
    print(text)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
