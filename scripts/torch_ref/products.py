"""`products`: a linear layer's three products (forward, input gradient,
weight gradient) alone on one thread, tinygpt's (`tinygpt peak --product`)
beside PyTorch's torch.mm, at the shapes the bench's models multiply, each
as a share of the CPU's peak (bench/products.md).
"""

import json
import os
import subprocess
import sys
import time

import torch

from torch_ref.measure import (
    bench_fail, format_ratio, machine_description, measure_peak, SCRIPT, write_report)


# ---- products: tinygpt's products alone, beside PyTorch's BLAS ---------------
#
# How near the CPU's peak can a training step come? The products do almost
# all its FLOPs, so the question starts with them, alone, at the shapes the
# step multiplies: `tinygpt peak --product ROWS,IN,OUT` times a linear
# layer's three (forward, input gradient, weight gradient) on one thread, as
# each thread runs its slice of the batch; `products-torch-worker` times the
# same three with torch.mm on one thread (its BLAS, OpenBLAS from Debian),
# in a fresh process with every thread count set to 1. Each side reports
# the best of its runs over --seconds; the shapes are measured --rounds
# times, interleaved, and each side's best kept.

PRODUCT_SHAPES = [  # (rows, in, out, what): a thread's slice at 2 threads
    (2048, 256, 768, "card L (B 32, T 128): q, k, v"),
    (2048, 256, 256, "card L: attention's projection"),
    (384, 128, 384, "baby gpt (B 12, T 64): q, k, v"),
    (384, 128, 512, "baby gpt: MLP in"),
    (384, 512, 128, "baby gpt: MLP out"),
    (768, 128, 2048, "the default gpt (B 24, T 64): the head, V 2048"),
    (512, 768, 3072, "GPT-2 124M fine-tuned (B 4, T 256, make bench-gpt2): MLP in"),
    (512, 3072, 768, "GPT-2 124M: MLP out"),
]
PRODUCT_SECONDS = 0.5
PRODUCT_ROUNDS = 2
PRODUCT_KINDS = ("forward", "input_gradient", "weight_gradient")


def cmd_products_torch_worker(args):
    """PyTorch's three products of one linear layer on one thread, each the
    best of its runs over args.seconds; prints their GFLOP/s as JSON."""
    torch.set_num_threads(1)
    N, C, OC = args.rows, args.inp, args.out
    generator = torch.Generator().manual_seed(1)
    inp, weight, dout = (torch.rand(shape, generator=generator) - 0.5 for shape in ((N, C), (OC, C), (N, OC)))
    out, dinp, dweight = torch.empty(N, OC), torch.empty(N, C), torch.zeros(OC, C)
    runs = {
        "forward": lambda: torch.mm(inp, weight.t(), out=out),
        "input_gradient": lambda: torch.mm(dout, weight, out=dinp),
        "weight_gradient": lambda: dweight.addmm_(dout.t(), inp),
    }
    result = {}
    for kind in PRODUCT_KINDS:
        best, start, count = None, time.perf_counter(), 0
        while count < 3 or time.perf_counter() - start < args.seconds:
            t = time.perf_counter()
            runs[kind]()
            t = time.perf_counter() - t
            best = t if best is None else min(best, t)
            count += 1
        result[kind] = 2.0 * N * C * OC / best / 1e9
    print(json.dumps(result))


def products_tinygpt(tinygpt, shape, seconds):
    """`tinygpt peak --product` at "shape": its "product" object."""
    rows, inp, out, _ = shape
    command = [tinygpt, "peak", "--json", "--threads", "1", "--seconds", str(seconds),
               "--product", f"{rows},{inp},{out}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        bench_fail(command, result.returncode, result.stderr)
    return json.loads(result.stdout)["product"]


def products_torch(shape, seconds):
    """products-torch-worker at "shape", in a fresh process on one thread."""
    rows, inp, out, _ = shape
    command = [sys.executable, SCRIPT, "products-torch-worker", "--rows", str(rows),
               "--inp", str(inp), "--out", str(out), "--seconds", str(seconds)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        bench_fail(command, result.returncode, result.stderr)
    return json.loads(result.stdout)


def products_report(args, peak, best, seconds):
    """The markdown report of `products`, as a string."""
    one = peak["gflops_1_thread"]
    lines = ["# tinygpt's products alone, beside PyTorch's", "",
             "- command: `/usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt`",
             f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
             f"- machine: {machine_description()}",
             f"- CPU's peak (`tinygpt peak`): {peak['cpu']} (family {peak['family']}, model {peak['model']}), "
             f"{peak['vector_bits']}-bit {peak['instructions']}: **{one:.1f} GFLOP/s on 1 thread**",
             f"- PyTorch {torch.__version__}, its products through torch.mm on 1 thread "
             "(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS 1, torch.set_num_threads(1))",
             f"- each product the best of its runs over {args.seconds:g} s; every shape measured "
             f"{args.rounds} time(s), interleaved, and each side's best kept; {seconds:.0f} s in all",
             "",
             "A linear layer's three products at the shapes a training step multiplies (one thread's "
             "slice of the batch at 2 threads): forward out[N,OC] = inp[N,C] @ weight[OC,C]^T, "
             "input gradient dinp = dout @ weight, weight gradient dweight += dout^T @ inp, each "
             "2 N C OC FLOPs. GFLOP/s, and in brackets the share of 1 thread's peak; the last "
             "column is PyTorch's time for the three over tinygpt's.", "",
             "| N x C -> OC | what | forward tinygpt / PyTorch | input gradient | weight gradient | "
             "tinygpt faster by |",
             "| --- | --- | --- | --- | --- | --- |"]
    for shape in PRODUCT_SHAPES:
        rows, inp, out, what = shape
        mine, theirs = best[(shape, "tinygpt")], best[(shape, "PyTorch")]
        cells = [f"{mine[k]:.1f} ({100 * mine[k] / one:.0f}%) / {theirs[k]:.1f} ({100 * theirs[k] / one:.0f}%)"
                 for k in PRODUCT_KINDS]
        ratio = sum(1 / theirs[k] for k in PRODUCT_KINDS) / sum(1 / mine[k] for k in PRODUCT_KINDS)
        lines.append(f"| {rows} x {inp} -> {out} | {what} | " + " | ".join(cells) + f" | {format_ratio(ratio)} |")
    return "\n".join(lines) + "\n"


def cmd_products(args):
    """Time tinygpt's products and PyTorch's side by side; write a markdown report."""
    began = time.time()
    if args.seconds <= 0 or args.rounds < 1:
        sys.exit("products: --seconds must be above 0 and --rounds at least 1")
    peak = measure_peak(args.tinygpt, 1)
    if peak is None:
        sys.exit(f"products: {args.tinygpt} has no `peak` command")
    best = {}
    for round_number in range(1, args.rounds + 1):
        for shape in PRODUCT_SHAPES:
            for side, measure in (("tinygpt", lambda: products_tinygpt(args.tinygpt, shape, args.seconds)),
                                  ("PyTorch", lambda: products_torch(shape, args.seconds))):
                m = measure()
                kept = best.get((shape, side))
                best[(shape, side)] = {k: max(m[k], kept[k]) if kept else m[k] for k in PRODUCT_KINDS}
                print(f"products: round {round_number}/{args.rounds} {shape[0]} x {shape[1]} -> {shape[2]} "
                      f"{side:8s}: " + ", ".join(f"{k} {m[k]:.1f}" for k in PRODUCT_KINDS) + " GFLOP/s",
                      file=sys.stderr, flush=True)
    report = products_report(args, peak, best, time.time() - began)
    print(report)
    write_report(args.out, report)
    print(f"products: wrote {args.out}", file=sys.stderr)


# ---- learn: nanoGPT's recipe, tinygpt and PyTorch side by side -------------
#
# `learn` trains the default gpt with nanoGPT's recipe (GPT_RECIPE) twice on
# the same text: with tinygpt, and with BenchNanoGPT and torch.optim.AdamW
# in fp32 (`learn-torch-worker`, a fresh process, so that its OpenMP settings
# take effect). It compares what a user sees in the end: the validation loss
# each reaches, and the training time it takes to get there.
#
# The validation protocol is tinygpt's (train.c, validation_loss): at every
# LEARN_EVAL_INTERVAL-th step and at the last, before that step's update,
# the mean loss per token over fixed windows of the validation split (the
# last floor(N * 0.1) tokens), dropout off: of its W = (n_val - 1) // T
# whole windows laid end to end, K = min(W, LEARN_EVAL_BATCHES * B), row r
# being window floor(r * W / K) (spread_windows). Training windows are random, each side
# drawing its own. Training time is the sum of the steps' times (forward,
# backward, clipping, update), evaluation and batch making left out, as in
# tinygpt's `ms` column.
