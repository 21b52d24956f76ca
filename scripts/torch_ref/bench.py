"""`bench`: tinygpt's training and sampling speed against the same models in
PyTorch (modules.py), each run in a fresh process of its own, and the
markdown report (bench/results.md).
"""

import csv
import json
import os
import re
import shlex
import subprocess
import statistics
import sys
import tempfile
import time

import torch

from torch_ref.data import random_batch, read_ids
from torch_ref.measure import (
    bench_fail, default_bench_data, format_ratio, loaded_blas_libraries, measure_peak, percent_of,
    report_header, rss_reaper, run_measured, SCRIPT, torch_cpu_capability, torch_env, TORCH_WAITS,
    write_report)
from torch_ref.modules import BenchConfig, BenchGPT, BenchNanoGPT, forward_flops_per_token
from torch_ref.tinygpt import (
    card_arch_flags, force_flags, NANOGPT_PARTS, read_safetensors_metadata, sgd_flags,
    train_has_arch_flag)


# ---- benchmark ------------------------------------------------------------
#
# `bench` runs tinygpt and PyTorch on the same model, side by side, and writes
# a markdown report. Every measurement is a fresh process, so each one's peak
# resident memory (ru_maxrss, see rss_reaper) is its own:
#   tinygpt:  `tinygpt train ... --threads n`; per-step milliseconds from log.csv
#   PyTorch:  `torch_reference.py bench-torch-worker ... --threads n`, which
#             trains BenchGPT (modules.py) with torch.optim.SGD and prints JSON.

BENCH_CONFIGS = [
    BenchConfig("S", "card", 1, 64, 4, 32, 16, 0.1),
    BenchConfig("M", "card", 1, 128, 4, 64, 32, 0.1),
    BenchConfig("L", "card", 1, 256, 8, 128, 32, 0.1),
    BenchConfig("gpt", "gpt", 4, 128, 4, 64, 12, 0.0),
]
BENCH_THREADS = (1, 2)     # each implementation runs at each thread count
BENCH_LR = 0.1             # plain SGD
BENCH_WARMUP = 10          # steps run first and not counted
BENCH_TIMED = 50           # steps timed one by one after the warm-up
BENCH_ROUNDS = 3           # each run measured this many times, interleaved; the best kept
BENCH_SAMPLE_TOKENS = 2000
BENCH_SAMPLE_CONFIGS = ("L", "gpt")  # sampling uses these configs' trained tinygpt models


def cmd_bench_torch_worker(args):
    """One PyTorch measurement, in a process of its own (`bench` starts it).

    Trains BenchGPT (--arch card) or BenchNanoGPT (--arch gpt) with
    torch.optim.SGD on random windows of the text, the vocabulary taken from
    a tinygpt checkpoint: args.warmup steps, then
    args.timed steps each timed with time.perf_counter around forward, loss,
    zero_grad, backward and optimizer.step. Prints one JSON object.
    """
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab = read_safetensors_metadata(args.vocab_from)["vocab"]
    tokens = torch.frombuffer(read_ids(args.data, vocab), dtype=torch.int32)
    B, T = args.batch, args.context

    if args.arch == "gpt":
        model = BenchNanoGPT(len(vocab), T, args.embd, args.heads, args.layers, args.dropout)
    else:
        model = BenchGPT(len(vocab), T, args.embd, args.heads, args.dropout)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step_ms, losses = [], []
    for _ in range(args.warmup + args.timed):
        # The batch, made outside the timing, as tinygpt makes its batch
        # outside its timing.
        inputs, targets = random_batch(tokens, B, T)

        start = time.perf_counter()
        loss, _ = model(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        seconds = time.perf_counter() - start
        step_ms.append(1e3 * seconds)
        losses.append(loss.item())
    print(json.dumps({
        "step_ms": step_ms[args.warmup:],
        "loss_first": losses[0], "loss_last": losses[-1],
        "threads": torch.get_num_threads(),
        "blas": loaded_blas_libraries(),
    }))
    return 0


def bench_arch_flags(args, config):
    """The `tinygpt train` flags that choose "config"'s model."""
    if config.arch == "gpt":
        return ["--arch", "gpt", "--layers", str(config.layers)] + NANOGPT_PARTS
    return card_arch_flags(args.tinygpt)


def bench_tinygpt_train(args, config, threads, out_dir):
    """Train "config" with tinygpt at "threads" threads; return a measurement dict.

    The dict holds step_ms (the timed steps, from log.csv), rss_mb, the first
    and last training loss, and memory_mb: the total from tinygpt's stderr
    line `memory: ... = X.X MB` (None when tinygpt does not print one).
    """
    command = [args.tinygpt, "train", args.data, "--out", out_dir] + force_flags(args.tinygpt) + [
               "--steps", str(args.warmup + args.timed)] + bench_arch_flags(args, config) + [
               "--batch", str(config.B), "--context", str(config.T), "--embd", str(config.C),
               "--heads", str(config.NH), "--dropout", str(config.dropout),
               "--lr", str(BENCH_LR), "--val-fraction", "0", "--threads", str(threads)]
    # PyTorch's side is torch.optim.SGD: so is tinygpt's (its gpt default is AdamW).
    command += sgd_flags(args.tinygpt)
    status, rss_mb, _, stderr = run_measured(command)
    if status != 0:
        bench_fail(command, status, stderr)
    with open(os.path.join(out_dir, "log.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    timed = [row for row in rows if int(row["step"]) >= args.warmup]
    if len(timed) != args.timed:
        sys.exit(f"bench: FAIL: {out_dir}/log.csv has {len(timed)} steps after the warm-up, "
                 f"expected {args.timed}")
    claim = re.search(r"^memory:.*=\s*([0-9.]+)\s*MB\s*$", stderr, re.MULTILINE)
    return {"step_ms": [float(row["ms"]) for row in timed], "rss_mb": rss_mb,
            "loss_first": float(rows[0]["train_loss"]), "loss_last": float(rows[-1]["train_loss"]),
            "memory_mb": float(claim.group(1)) if claim else None}


def bench_impls(threads):
    """The runs at "threads" threads; with one thread there is no one to wait for."""
    return ["tinygpt", "PyTorch"] + (["PyTorch spin"] if threads > 1 else [])


def bench_torch_train(args, config, threads, vocab_from, impl="PyTorch"):
    """Train "config" with PyTorch at "threads" threads, in a fresh process.

    The worker runs with the waiting of TORCH_WAITS[impl] and the OpenMP/BLAS
    thread counts set to "threads" (and calls torch.set_num_threads). Returns
    a measurement dict like bench_tinygpt_train's, plus the BLAS it loaded.
    """
    command = [sys.executable, SCRIPT, "bench-torch-worker",
               "--data", args.data, "--vocab-from", vocab_from, "--arch", config.arch,
               "--layers", str(config.layers), "--batch", str(config.B),
               "--context", str(config.T), "--embd", str(config.C), "--heads", str(config.NH),
               "--dropout", str(config.dropout), "--lr", str(BENCH_LR),
               "--threads", str(threads), "--warmup", str(args.warmup), "--timed", str(args.timed)]
    status, rss_mb, stdout, stderr = run_measured(command, torch_env(impl, threads))
    if status != 0:
        bench_fail(command, status, stderr)
    result = json.loads(stdout)
    result["rss_mb"] = rss_mb
    result["memory_mb"] = None
    return result


def bench_sample(args, model_path, threads, cache):
    """tinygpt's generation speed in tokens/s (its own stderr report) and peak RSS (MB).

    "cache" False adds --no-cache (recompute every position for every token).
    """
    command = [args.tinygpt, "sample", "--model", model_path, "--tokens", str(BENCH_SAMPLE_TOKENS),
               "--seed", "1", "--temperature", "1", "--threads", str(threads)]
    if not cache:
        command.append("--no-cache")
    status, rss_mb, _, stderr = run_measured(command)
    if status != 0:
        bench_fail(command, status, stderr)
    found = re.search(r"sampled (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\)", stderr)
    if not found:
        sys.exit(f"bench: FAIL: no 'sampled N tokens in X s (Y tokens/s)' line from: "
                 f"{shlex.join(command)}")
    return float(found.group(3)), rss_mb


def sample_has_no_cache_flag(tinygpt):
    """True when `tinygpt sample --help` lists --no-cache."""
    result = subprocess.run([tinygpt, "sample", "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return "--no-cache" in result.stdout


def throughput(step_ms, tokens_per_step):
    """(median, min, max) tokens/s over the timed steps."""
    rates = sorted(tokens_per_step / (ms / 1e3) for ms in step_ms)
    return statistics.median(rates), rates[0], rates[-1]


def bench_model_name(config):
    """"card" or "gpt, 4 layers": the model a config trains."""
    return "card" if config.arch == "card" else f"{config.arch}, {config.layers} layers"


def k_block_sentence(peak):
    """The depth of tinygpt's k blocks and the L1 it was chosen for, from
    `tinygpt peak --json` (docs/cpus.md), as a sentence; "" from a tinygpt
    too old to say."""
    if "k_block" not in peak:
        return ""
    l1 = peak.get("l1_data_bytes", 0)
    cache = f"for an L1 data cache of {l1 // 1024} KB a core" if l1 else "the L1 data cache not known"
    return f" tinygpt's products ran in k blocks {peak['k_block']} deep ({cache}; docs/cpus.md)."


def bench_report(info, results, samples, no_cache_supported, peak=None):
    """The markdown report, as a string.

    "info": header facts (strings). "results": one dict per config with keys
    config, V, runs (a list of (implementation, threads, measurement)).
    "samples": a list of (config, mode, threads, tokens/s, rss_mb).
    "peak": measure_peak's result at max(BENCH_THREADS) threads, or None
    (then no column gives a share of it).
    """
    lines = ["# tinygpt vs PyTorch: training and sampling speed", ""]
    lines += [f"- {key}: {value}" for key, value in info]
    lines += ["", "## FLOP count", "",
              "Per token, the forward pass costs (a multiply-add is 2 FLOPs)",
              ""]
    if any(r["config"].arch == "card" for r in results):
        lines += ["    card: F = 2*C*3C (q, k, v) + 2*C*C (proj) + 2*C*V (head) + 4*C*(T+1)/2",
                  "              (scores and weighted sum over the (T+1)/2 visible positions "
                  "on average)",
                  "            = 8*C^2 + 2*C*V + 2*C*(T+1)",
                  ""]
    if any(r["config"].arch == "gpt" for r in results):
        lines += ["    gpt:  F = L * (2*C*3C (q, k, v) + 2*C*C (attn.proj) + 2*C*4C (mlp.fc) "
                  "+ 2*4C*C (mlp.proj)",
                  "                   + 2*2*C*(T+1)/2 (scores and weighted sum))",
                  "              + 2*C*V (tied head)",
                  "            = L * (24*C^2 + 2*C*(T+1)) + 2*C*V",
                  ""]
    lines += ["and a training step costs 3 x forward (backward costs twice the forward): "
              "3*F*B*T FLOPs per step, so GFLOP/s = 3*F * tokens/s / 10^9. Embeddings, "
              "layer norms, gelu, softmax, dropout, the loss and the SGD update are not counted.",
              ""]
    if peak:
        lines += ["## The CPU's peak", "",
                  f"`tinygpt peak --json --threads {peak['threads']}`, run first: "
                  f"{'fused multiply-adds' if peak.get('fused', True) else 'multiplies and adds (no FMA on this path)'} "
                  f"on {peak['vector_bits']}-bit vectors ({peak['instructions']}) held in registers, "
                  f"{peak['seconds']:g} s on 1 thread and {peak['seconds']:g} s on "
                  f"{peak['threads']}, on {peak['cpu']} (family {peak['family']}, model "
                  f"{peak['model']}): **{peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, "
                  f"{peak['gflops_all_threads']:.1f} on {peak['threads']}**. No product runs faster; "
                  f"a row's \"% of peak\" is its GFLOP/s over the peak of {peak['threads']} threads "
                  "(and, for 1 thread, of 1 thread)." + k_block_sentence(peak), ""]
    all_threads = peak["threads"] if peak else None

    lines += ["## Training", "",
              "tokens/s = B*T / step time, over the timed steps: median (min-max). "
              "GFLOP/s from the median. Peak RSS: the process's ru_maxrss, MB = 10^6 bytes.", "",
              "| config | implementation | threads | tokens/s median (min-max) | ms/step | GFLOP/s "
              + (f"| % of {all_threads}-thread peak | % of 1-thread peak " if peak else "")
              + "| peak RSS MB | loss first -> last |",
              "| --- | --- | --- | --- | --- | --- | " + ("--- | --- | " if peak else "")
              + "--- | --- |"]
    for r in results:
        config = r["config"]
        B, T = config.B, config.T
        step_flops = 3 * forward_flops_per_token(config, r["V"]) * B * T
        for impl, threads, m in r["runs"]:
            med, lo, hi = throughput(m["step_ms"], B * T)
            gflops = step_flops / (B * T) * med / 1e9
            shares = ""
            if peak:
                one = percent_of(gflops, peak["gflops_1_thread"]) if threads == 1 else ""
                shares = f"| {percent_of(gflops, peak['gflops_all_threads'])} | {one} "
            lines.append(f"| {config.name} | {impl} | {threads} | {med:,.0f} ({lo:,.0f}-{hi:,.0f}) "
                         f"| {B * T / med * 1e3:.2f} | {gflops:.1f} {shares}"
                         f"| {m['rss_mb']:.1f} | {m['loss_first']:.3f} -> {m['loss_last']:.3f} |")

    lines += ["", "## Summary", "",
              "Ratios of median tokens/s. \"best\" is the fastest of 1 and 2 threads (and, for "
              "PyTorch, of both ways of waiting).", "",
              "| config | model | B | T | C | NH | V | dropout | GFLOP/step "
              "| tinygpt best / PyTorch best "
              "| tinygpt 2 threads / PyTorch best | tinygpt 2 threads / 1 thread "
              "| tinygpt best GFLOP/s" + (f" (% of {all_threads}-thread peak)" if peak else "") + " |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        config = r["config"]
        B, T = config.B, config.T
        rate = {(impl, threads): throughput(m["step_ms"], B * T)[0]
                for impl, threads, m in r["runs"]}
        tg_best, tg_threads = max((v, t) for (i, t), v in rate.items() if i == "tinygpt")
        pt_best, pt_threads, pt_impl = max((v, t, i) for (i, t), v in rate.items() if i in TORCH_WAITS)
        step_gflop = 3 * forward_flops_per_token(config, r["V"]) * B * T / 1e9
        best_gflops = step_gflop / (B * T) * tg_best
        best_share = f" ({percent_of(best_gflops, peak['gflops_all_threads'])})" if peak else ""
        lines.append(f"| {config.name} | {bench_model_name(config)} | {B} | {T} | {config.C} "
                     f"| {config.NH} | {r['V']} | {config.dropout:g} | {step_gflop:.3f} "
                     f"| {format_ratio(tg_best / pt_best)} (tinygpt {tg_threads} thr, "
                     f"{pt_impl} {pt_threads} thr) "
                     f"| {format_ratio(rate['tinygpt', 2] / pt_best)} "
                     f"| {format_ratio(rate['tinygpt', 2] / rate['tinygpt', 1])} "
                     f"| {best_gflops:.1f}{best_share} |")

    lines += ["", "## tinygpt memory: its own count against the measured peak", "",
              "The count is the total of the `memory:` line tinygpt train prints on stderr; "
              "the peak RSS also holds the program, the C library, OpenMP and the corpus.", "",
              "| config | threads | `memory:` total MB | peak RSS MB | RSS - count MB |",
              "| --- | --- | --- | --- | --- |"]
    for r in results:
        for impl, threads, m in r["runs"]:
            if impl != "tinygpt":
                continue
            if m["memory_mb"] is None:
                lines.append(f"| {r['config'].name} | {threads} | (no `memory:` line) "
                             f"| {m['rss_mb']:.1f} | |")
            else:
                lines.append(f"| {r['config'].name} | {threads} | {m['memory_mb']:.1f} "
                             f"| {m['rss_mb']:.1f} | {m['rss_mb'] - m['memory_mb']:+.1f} |")

    if not samples:
        return "\n".join(lines) + "\n"
    lines += ["", "## Sampling", "",
              f"`tinygpt sample --model M --tokens {BENCH_SAMPLE_TOKENS} --seed 1 --temperature 1 "
              f"--threads N [--no-cache]`, M each model below after its training run above; "
              f"tokens/s as tinygpt reports it.", ""]
    if not no_cache_supported:
        lines += ["`tinygpt sample` does not accept `--no-cache` yet, so only the default "
                  "mode is measured.", ""]
    lines += ["| config | model | context | threads | mode | tokens/s | peak RSS MB "
              "| cache / no cache |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for config, mode, threads, rate, rss_mb in samples:
        speedup = ""
        if mode == "cache":
            no_cache = [r for c, m, t, r, _ in samples
                        if c == config and m == "no cache" and t == threads]
            speedup = format_ratio(rate / no_cache[0]) if no_cache else ""
        lines.append(f"| {config.name} | {bench_model_name(config)} | {config.T} | {threads} "
                     f"| {mode} | {rate:,.0f} | {rss_mb:.1f} | {speedup} |")
    return "\n".join(lines) + "\n"


def cmd_bench(args):
    """Measure tinygpt and PyTorch training the same models; write a markdown report."""
    began = time.time()
    load_before = os.getloadavg()
    if args.data is None:
        args.data = default_bench_data()
    if not os.path.exists(args.data):
        sys.exit(f"bench: {args.data} does not exist; fetch it with `make {args.data}` "
                 "or pass --data FILE")
    if args.timed < 1 or args.warmup < 0 or args.rounds < 1:
        sys.exit("bench: --timed and --rounds must be at least 1 and --warmup at least 0")
    names = [c.name for c in BENCH_CONFIGS]
    wanted = [n for n in args.configs.split(",") if n]
    unknown = [n for n in wanted if n not in names]
    if unknown or not wanted:
        sys.exit(f"bench: --configs {args.configs!r}: give a comma-separated list of "
                 f"{','.join(names)}")
    configs = [c for c in BENCH_CONFIGS if c.name in wanted]
    if any(c.arch == "gpt" for c in configs) and not train_has_arch_flag(args.tinygpt):
        sys.exit(f"bench: `{args.tinygpt} train --help` lists no --arch, so this tinygpt has no "
                 "GPT; leave gpt out of --configs")
    with open(args.data, encoding="utf-8", newline="") as f:
        n_chars = len(f.read())
    # The CPU's peak, first, on as many threads as the most a run uses: the
    # denominator of every "% of peak" in the report.
    peak = measure_peak(args.tinygpt, max(BENCH_THREADS))
    if peak:
        print(f"bench: peak of {peak['cpu']}: {peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, "
              f"{peak['gflops_all_threads']:.1f} on {peak['threads']}", file=sys.stderr, flush=True)
    else:
        print(f"bench: {args.tinygpt} has no `peak` command: no share of the peak in the report",
              file=sys.stderr, flush=True)

    results, samples, blas = [], [], set()
    with tempfile.TemporaryDirectory(prefix="tinygpt-bench-") as tmp:
        sample_models = []  # (config, checkpoint)
        # Each run (config, implementation, threads) is measured once per
        # round, the rounds one after another, and the round with the highest
        # median kept: a machine shared with other jobs only ever slows a run
        # down, and interleaving gives both sides the same chances.
        best = {}
        for round_number in range(1, args.rounds + 1):
            for config in configs:
                name, B, T = config.name, config.B, config.T
                for threads in BENCH_THREADS:
                    out_dir = os.path.join(tmp, f"{name}-{threads}")
                    for impl in bench_impls(threads):
                        if impl == "tinygpt":
                            m = bench_tinygpt_train(args, config, threads, out_dir)
                        else:
                            m = bench_torch_train(args, config, threads,
                                                  os.path.join(out_dir, "model.safetensors"), impl)
                            blas.update(m["blas"])
                        med, _, _ = throughput(m["step_ms"], B * T)
                        key = (name, impl, threads)
                        if key not in best or med > throughput(best[key]["step_ms"], B * T)[0]:
                            best[key] = m
                        print(f"bench: round {round_number}/{args.rounds} {name} {impl:12s} "
                              f"{threads} thread(s): {med:10,.0f} tokens/s, "
                              f"peak RSS {m['rss_mb']:.1f} MB", file=sys.stderr, flush=True)
        for config in configs:
            name = config.name
            runs = [(impl, threads, best[name, impl, threads])
                    for threads in BENCH_THREADS
                    for impl in bench_impls(threads)]
            checkpoint = os.path.join(tmp, f"{name}-1", "model.safetensors")
            V = int(read_safetensors_metadata(checkpoint)["vocab_size"])
            results.append({"config": config, "V": V, "runs": runs})
            if name in BENCH_SAMPLE_CONFIGS:
                sample_models.append((config, checkpoint))

        no_cache_supported = sample_has_no_cache_flag(args.tinygpt)
        modes = [("cache", True), ("no cache", False)]
        if not no_cache_supported:
            modes = [("default", True)]
        for config, sample_model in sample_models:
            for threads in BENCH_THREADS:
                for mode, cache in modes:
                    rate, rss_mb = bench_sample(args, sample_model, threads, cache)
                    samples.append((config, mode, threads, rate, rss_mb))
                    print(f"bench: sample {config.name} {mode:8s} {threads} thread(s): "
                          f"{rate:10,.0f} tokens/s", file=sys.stderr, flush=True)

    _, floor_mb, _, _ = run_measured(["/bin/true"])
    blas_note = ", ".join(sorted(blas)) or "none found"
    if any("/blas/libblas" in path for path in blas):
        blas_note += (" -- **the reference (netlib) BLAS: slow, single-threaded matmuls; "
                      "PyTorch is not at its best. Install OpenBLAS (Debian: "
                      "libopenblas0-pthread) and run again.**")
    info = report_header(began, peak) + [
        ("kernel path",
         f"tinygpt: {peak.get('kernel_path', 'not said (a tinygpt from before the paths)')}"
         f"{' (TINYGPT_KERNELS=' + os.environ['TINYGPT_KERNELS'] + ')' if os.environ.get('TINYGPT_KERNELS') else ''}; "
         f"PyTorch: {torch_cpu_capability()}"
         f"{', OPENBLAS_CORETYPE=' + os.environ['OPENBLAS_CORETYPE'] if os.environ.get('OPENBLAS_CORETYPE') else ''}"
         if peak else "not said"),
        ("load average (1 min) at start / end",
         f"{load_before[0]:.2f} / {os.getloadavg()[0]:.2f}"),
        ("PyTorch version", f"{torch.__version__} (Python {sys.version.split()[0]})"),
        ("BLAS loaded by PyTorch", blas_note),
        ("data", f"{args.data} ({n_chars:,} characters); both use the vocabulary in "
                 "tinygpt's checkpoint metadata"),
        ("training", f"fp32, plain SGD lr {BENCH_LR}, dropout as in the summary's column (card: "
                     f"on the attention weights; gpt: nanoGPT's places), "
                     f"training mode, random windows; {args.warmup} warm-up steps "
                     f"dropped, then {args.timed} steps timed one by one; every run measured "
                     f"{args.rounds} times, interleaved, and the one with the highest median kept"),
        ("tinygpt side", f"`{args.tinygpt} train DATA --steps {args.warmup + args.timed} "
                         f"{'--arch A [--layers L] ' if train_has_arch_flag(args.tinygpt) else ''}"
                         f"--batch B --context T --embd C --heads NH --dropout P "
                         f"--lr {BENCH_LR} --val-fraction 0 --threads n`; step times from its "
                         "log.csv (forward, zero_grad, backward, SGD update)"),
        ("PyTorch side", "an nn.Module (nn.Embedding, nn.Linear with q, k, v fused into "
                         "one C x 3C layer, attention written out; for gpt nanoGPT's blocks "
                         "with bias=False: F.layer_norm with a weight and no bias, F.gelu, "
                         "the head tied to the token embedding), torch.optim.SGD; each step "
                         "timed with time.perf_counter around forward, loss, "
                         "zero_grad(set_to_none=True), backward, optimizer.step; each "
                         "measurement in a fresh process with torch.set_num_threads(n), "
                         "with OMP_WAIT_POLICY=PASSIVE (\"PyTorch\") and, at 2 threads, "
                         "also with GOMP_SPINCOUNT=1000 (\"PyTorch spin\"), tinygpt's own "
                         "default"),
        ("peak RSS", f"ru_maxrss of each measured process, through `{rss_reaper('F')[0]}` "
                     f"(a reaper waits for it); /bin/true measured the same way reads "
                     f"{floor_mb:.1f} MB, the floor"),
        ("total benchmark time", f"{time.time() - began:.0f} s"),
    ]
    report = bench_report(info, results, samples, no_cache_supported, peak)
    print(report, end="")
    write_report(args.out, report)
    print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0
