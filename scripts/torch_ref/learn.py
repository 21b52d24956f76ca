"""`learn`: the default gpt trained with nanoGPT's recipe by tinygpt and by
PyTorch (BenchNanoGPT and torch.optim.AdamW), each at its fastest thread
setting, and compared by the validation loss each reaches in its training
time (bench/learn.md, bench/learn.png).
"""

import csv
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from torch_ref.bench import bench_impls, BENCH_THREADS
from torch_ref.data import n_val_tokens, random_batch, read_ids, spread_windows
from torch_ref.measure import (
    default_bench_data, format_ratio, measure_peak, report_header, SCRIPT, torch_env, TORCH_WAITS,
    write_report)
from torch_ref.modules import BenchConfig, BenchNanoGPT
from torch_ref.optim import (
    ADAMW_EPS, adamw_param_groups, GPT_RECIPE, make_adamw, nanogpt_lr, recipe_flags, set_lr)
from torch_ref.tinygpt import (
    force_flags, NANOGPT_PARTS, read_safetensors_metadata, run, train_has_optimizer_flag)


LEARN_CONFIG = BenchConfig("learn", "gpt", 4, 128, 4, 64, 12, 0.0)  # tinygpt's gpt defaults
LEARN_STEPS = 2000
LEARN_EVAL_INTERVAL = 250
LEARN_EVAL_BATCHES = 20
LEARN_VAL_FRACTION = 0.1
LEARN_SEED = 1337
LEARN_TARGET_VAL = 1.92       # tinygpt's final validation loss: at most this
LEARN_TARGET_SPEEDUP = 2.5    # tinygpt's training time: at most PyTorch's / this
LEARN_PROMPT = "ROMEO:"
LEARN_SAMPLE_TOKENS = 300
# Each side trains at its fastest thread setting among bench's (tinygpt: 1
# or 2 threads; PyTorch: 1 thread, 2 waiting passively, 2 spinning briefly),
# each timed over this many steps in a fresh process before the real runs,
# the first LEARN_CALIBRATION_SKIP not counted.
LEARN_CALIBRATION_STEPS = 40
LEARN_CALIBRATION_SKIP = 10
LOG_HEADER = "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm"


def learn_model_flags(config):
    """The `tinygpt train` flags for the model and batch of "config"."""
    return ["--arch", config.arch, "--layers", str(config.layers), "--batch", str(config.B),
            "--context", str(config.T), "--embd", str(config.C), "--heads", str(config.NH),
            "--dropout", str(config.dropout)] + (NANOGPT_PARTS if config.arch == "gpt" else [])


def cmd_learn_torch_worker(args):
    """PyTorch's side of `learn`, in a process of its own: BenchNanoGPT (fp32)
    trained by torch.optim.AdamW with GPT_RECIPE, clip_grad_norm_ and
    nanogpt_lr on random windows; validation as tinygpt's (see the section's
    comment). Writes args.log in tinygpt's log.csv format, prints a line at
    each evaluation, and prints "data: N train + M val tokens" on stderr.
    """
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config, recipe = LEARN_CONFIG, GPT_RECIPE
    B, T = config.B, config.T
    vocab = read_safetensors_metadata(args.vocab_from)["vocab"]
    ids = read_ids(args.data, vocab)
    n_train = len(ids) - n_val_tokens(len(ids), LEARN_VAL_FRACTION)
    print(f"data: {n_train} train + {len(ids) - n_train} val tokens", file=sys.stderr)
    train_tokens = torch.frombuffer(ids, dtype=torch.int32)[:n_train]
    val_tokens = ids[n_train:].tolist()
    val_batches = spread_windows(val_tokens, args.eval_batches * B, B, T)

    model = BenchNanoGPT(len(vocab), T, config.C, config.NH, config.layers, config.dropout)
    optimizer = make_adamw(adamw_param_groups(model.named_parameters(), recipe.weight_decay),
                           recipe)

    def validation_loss():
        """Mean loss per token over the fixed validation windows, dropout off."""
        model.eval()
        with torch.no_grad():
            total = sum(model(i, t)[0].item() * len(i) for i, t in val_batches)
        model.train()
        return total / sum(len(i) for i, _ in val_batches)

    model.train()
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    with open(args.log, "w") as log:
        log.write(LOG_HEADER + "\n")
        interval_loss, interval_ms, interval_steps = 0.0, 0.0, 0
        for step in range(args.steps):
            evaluate = step % args.eval_interval == 0 or step == args.steps - 1
            val_loss = validation_loss() if evaluate else None
            inputs, targets = random_batch(train_tokens, B, T)
            lr = nanogpt_lr(step, recipe, args.steps)
            set_lr(optimizer, lr)

            start = time.perf_counter()
            loss, _ = model(inputs, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            optimizer.step()
            ms = 1e3 * (time.perf_counter() - start)

            loss = loss.item()
            if not math.isfinite(loss):
                sys.exit(f"learn-torch-worker: the loss is {loss} at step {step}")
            log.write(f"{step},{loss:.6f},{'' if val_loss is None else f'{val_loss:.6f}'},"
                      f"{lr:g},{ms:.3f},{B * T / ms * 1e3:.0f},{norm.item():.6f}\n")
            interval_loss, interval_ms, interval_steps = (interval_loss + loss,
                                                          interval_ms + ms, interval_steps + 1)
            if evaluate and not args.quiet:
                print(f"step {step:6d}/{args.steps} | train loss "
                      f"{interval_loss / interval_steps:.4f} | val loss {val_loss:.4f} | "
                      f"{interval_ms / interval_steps:.2f} ms/step | "
                      f"{B * T * interval_steps / interval_ms * 1e3:.0f} tokens/s", flush=True)
                interval_loss, interval_ms, interval_steps = 0.0, 0.0, 0
    return 0


def learn_torch_command(args, vocab_from, threads, steps, log_path, quiet):
    """The command line of one learn-torch-worker run."""
    command = [sys.executable, SCRIPT, "learn-torch-worker",
               "--data", args.data, "--vocab-from", vocab_from, "--threads", str(threads),
               "--steps", str(steps), "--eval-interval", str(LEARN_EVAL_INTERVAL),
               "--eval-batches", str(LEARN_EVAL_BATCHES), "--seed", str(LEARN_SEED),
               "--log", log_path]
    return command + (["--quiet"] if quiet else [])


def read_learn_log(path):
    """A log.csv (tinygpt's or learn-torch-worker's) summed up: a dict of
    steps, evals (list of (step, val_loss)), final_val (the last one),
    train_seconds (the sum of the ms column), median_ms (the median step) and
    tokens_per_s (over the training time)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    evals = [(int(r["step"]), float(r["val_loss"])) for r in rows if r["val_loss"] != ""]
    ms = [float(r["ms"]) for r in rows]
    return {"steps": len(rows), "evals": evals, "final_val": evals[-1][1] if evals else None,
            "train_seconds": sum(ms) / 1e3, "median_ms": statistics.median(ms),
            "tokens_per_s": len(rows) * LEARN_CONFIG.B * LEARN_CONFIG.T / (sum(ms) / 1e3)}


def learn_tinygpt_command(args, out_dir, threads, steps):
    """learn's `tinygpt train` command: the model, the recipe's flags spelled
    out (they are tinygpt's gpt defaults), the evaluation protocol."""
    return ([args.tinygpt, "train", args.data, "--out", out_dir] + force_flags(args.tinygpt)
            + ["--save-every", "0", "--threads", str(threads)] + learn_model_flags(LEARN_CONFIG)
            + recipe_flags(GPT_RECIPE)
            + ["--steps", str(steps), "--eval-interval", str(LEARN_EVAL_INTERVAL),
               "--eval-batches", str(LEARN_EVAL_BATCHES),
               "--val-fraction", str(LEARN_VAL_FRACTION), "--seed", str(LEARN_SEED)])


def learn_calibrate(args, workdir):
    """Time each side at each of bench's settings for LEARN_CALIBRATION_STEPS
    steps, in a fresh process each: tinygpt at 1 and 2 threads, PyTorch at 1
    and 2 (and at 2 spinning, see TORCH_WAITS). Returns (timings, vocab_from):
    a list of (implementation, threads, median ms/step), and a tinygpt
    checkpoint of the text (its vocabulary is PyTorch's)."""
    timings = []
    vocab_from = os.path.join(workdir, "tinygpt-1", "model.safetensors")
    for threads in BENCH_THREADS:
        for impl in bench_impls(threads):
            log_path = os.path.join(workdir, f"{impl.replace(' ', '-')}-{threads}", "log.csv")
            if impl == "tinygpt":
                command, env = learn_tinygpt_command(args, os.path.dirname(log_path), threads,
                                                     LEARN_CALIBRATION_STEPS), None
            else:
                command = learn_torch_command(args, vocab_from, threads,
                                              LEARN_CALIBRATION_STEPS, log_path, quiet=True)
                env = torch_env(impl, threads)
            result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            if result.returncode != 0:
                print(result.stderr, end="", file=sys.stderr)
                sys.exit(f"learn: FAIL: {shlex.join(command)} exited with status "
                         f"{result.returncode}")
            with open(log_path, newline="") as f:
                ms = [float(r["ms"]) for r in csv.DictReader(f)][LEARN_CALIBRATION_SKIP:]
            timings.append((impl, threads, statistics.median(ms)))
            print(f"learn: calibrating {impl}, {threads} thread(s): {timings[-1][2]:.2f} ms/step "
                  f"(median of {len(ms)} steps)", flush=True)
    return timings, vocab_from


def fastest(timings, implementations):
    """(implementation, threads) of the fastest of "timings" among "implementations"."""
    impl, threads, _ = min((t for t in timings if t[0] in implementations), key=lambda t: t[2])
    return impl, threads


def run_timed(command, env=None, env_note=""):
    """Run "command" in "env", its stdout shown as it comes and its stderr
    captured (and then shown); "env_note" is shown before the command, to say
    what "env" sets. Returns (stderr, wall seconds, (load average before,
    after))."""
    print(f"+ {env_note}{shlex.join(command)}", flush=True)
    load_before = os.getloadavg()[0]
    start = time.time()
    result = subprocess.run(command, env=env, stderr=subprocess.PIPE, text=True)
    wall = time.time() - start
    print(result.stderr, end="", file=sys.stderr)
    if result.returncode != 0:
        sys.exit(f"learn: FAIL: {command[0]} exited with status {result.returncode}")
    return result.stderr, wall, (load_before, os.getloadavg()[0])


def learn_report(info, tg, pt, targets, sample):
    """bench/learn.md as a string: "info" (key, value) pairs, the two logs
    summed up (read_learn_log), "targets" (what, value, met), the sample."""
    lines = ["# Learning: tinygpt against PyTorch, nanoGPT's recipe", ""]
    lines += [f"- {key}: {value}" for key, value in info]
    lines += ["", "## Results", "",
              "| | tinygpt | PyTorch |", "| --- | --- | --- |",
              f"| final validation loss (step {tg['evals'][-1][0]}) | {tg['final_val']:.4f} "
              f"| {pt['final_val']:.4f} |",
              f"| best validation loss | {min(v for _, v in tg['evals']):.4f} "
              f"| {min(v for _, v in pt['evals']):.4f} |",
              f"| training seconds (sum of `ms`) | {tg['train_seconds']:.1f} "
              f"| {pt['train_seconds']:.1f} |",
              f"| training tokens/s | {tg['tokens_per_s']:,.0f} | {pt['tokens_per_s']:,.0f} |",
              f"| median ms/step | {tg['median_ms']:.1f} | {pt['median_ms']:.1f} |",
              f"| wall seconds (with evaluation and start-up) | {tg['wall_seconds']:.1f} "
              f"| {pt['wall_seconds']:.1f} |",
              "", f"Speed ratio, PyTorch's training time / tinygpt's: "
              f"**{format_ratio(pt['train_seconds'] / tg['train_seconds'])}** (by the median "
              f"step, which a burst of other jobs on the machine moves less: "
              f"{format_ratio(pt['median_ms'] / tg['median_ms'])}).",
              "", "## Targets", "", "| target | measured | met |", "| --- | --- | --- |"]
    lines += [f"| {what} | {value} | {'**met**' if met else '**not met**'} |"
              for what, value, met in targets]
    lines += ["", "## Validation loss at each evaluation", "",
              "| step | tinygpt | PyTorch |", "| --- | --- | --- |"]
    pt_at = dict(pt["evals"])
    lines += [f"| {step} | {val:.4f} | {pt_at[step]:.4f} |" if step in pt_at
              else f"| {step} | {val:.4f} | |" for step, val in tg["evals"]]
    lines += ["", "Against training time: ![validation loss against training time](learn.png)",
              "", "## A sample from tinygpt's model", "", "```text", sample, "```", ""]
    return "\n".join(lines)


def cmd_learn(args):
    """Train nanoGPT's recipe with tinygpt and with PyTorch; report and plot both."""
    began = time.time()
    if args.data is None:
        args.data = default_bench_data()
    if not os.path.exists(args.data):
        sys.exit(f"learn: {args.data} does not exist; pass --data FILE (make learn DATA=FILE)")
    if args.steps < 1:
        sys.exit("learn: --steps must be at least 1")
    if not train_has_optimizer_flag(args.tinygpt):
        sys.exit(f"learn: `{args.tinygpt} train --help` lists no --optimizer: this tinygpt "
                 "has no AdamW, so it cannot train nanoGPT's recipe")
    with open(args.data, encoding="utf-8", newline="") as f:
        n_chars = len(f.read())
    # The CPU's peak, named in the report's header as bench names it.
    peak = measure_peak(args.tinygpt, max(BENCH_THREADS))
    config, recipe = LEARN_CONFIG, GPT_RECIPE
    tg_dir, pt_dir = os.path.join(args.out_dir, "tinygpt"), os.path.join(args.out_dir, "pytorch")
    loads = {}

    # 1. Each side's fastest thread setting.
    with tempfile.TemporaryDirectory(prefix="tinygpt-learn-") as tmp:
        timings, vocab_from = learn_calibrate(args, tmp)
        vocab = read_safetensors_metadata(vocab_from)["vocab"]
    _, tg_threads = fastest(timings, ["tinygpt"])
    pt_impl, pt_threads = fastest(timings, TORCH_WAITS)

    # 2. tinygpt trains.
    tg_command = learn_tinygpt_command(args, tg_dir, tg_threads, args.steps)
    stderr, tg_wall, loads["tinygpt"] = run_timed(tg_command)
    found = re.search(r"(\d+) parameters; data: (\d+) train \+ (\d+) val tokens", stderr)
    n_params = int(found.group(1)) if found else None
    tg_split = (int(found.group(2)), int(found.group(3))) if found else None
    model_path = os.path.join(tg_dir, "model.safetensors")

    # 3. PyTorch trains, from its own init, on its own random windows; the
    # same validation windows.
    pt_log = os.path.join(pt_dir, "log.csv")
    stderr, pt_wall, loads["PyTorch"] = run_timed(
        learn_torch_command(args, model_path, pt_threads, args.steps, pt_log, quiet=False),
        torch_env(pt_impl, pt_threads),
        "".join(f"{k}={v} " for k, v in TORCH_WAITS[pt_impl].items())
        + f"OMP_NUM_THREADS={pt_threads} ")
    found = re.search(r"data: (\d+) train \+ (\d+) val tokens", stderr)
    pt_split = (int(found.group(1)), int(found.group(2))) if found else None
    if tg_split != pt_split:
        sys.exit(f"learn: FAIL: the splits differ: tinygpt {tg_split}, PyTorch {pt_split} "
                 "(train, val tokens); the validation losses would not be comparable")

    # 4. The curves against training time, and a sample.
    tg = dict(read_learn_log(os.path.join(tg_dir, "log.csv")), wall_seconds=tg_wall)
    pt = dict(read_learn_log(pt_log), wall_seconds=pt_wall)
    picture = os.path.join(os.path.dirname(args.out) or ".", "learn.png")
    os.makedirs(os.path.dirname(picture) or ".", exist_ok=True)
    run([args.tinygpt, "plot", os.path.join(tg_dir, "log.csv"), pt_log, "--x", "time",
         "--labels", "tinygpt,PyTorch", "--out", picture,
         "--title", f"validation loss against training time, {os.path.basename(args.data)}"])
    prompt = LEARN_PROMPT if set(LEARN_PROMPT) <= set(vocab) else None
    sample = run([args.tinygpt, "sample", "--model", model_path, "--seed", "1",
                  "--tokens", str(LEARN_SAMPLE_TOKENS)]
                 + (["--prompt", prompt] if prompt else []))

    # 5. The report.
    ratio = pt["train_seconds"] / tg["train_seconds"]
    median_ratio = pt["median_ms"] / tg["median_ms"]
    targets = [
        (f"tinygpt final validation loss <= {LEARN_TARGET_VAL}", f"{tg['final_val']:.4f}",
         tg["final_val"] <= LEARN_TARGET_VAL),
        (f"tinygpt training time <= PyTorch's / {LEARN_TARGET_SPEEDUP}",
         f"{tg['train_seconds']:.1f} s vs {pt['train_seconds']:.1f} s / {LEARN_TARGET_SPEEDUP} "
         f"= {pt['train_seconds'] / LEARN_TARGET_SPEEDUP:.1f} s (ratio {format_ratio(ratio)}; "
         f"by median step time {format_ratio(median_ratio)})",
         tg["train_seconds"] <= pt["train_seconds"] / LEARN_TARGET_SPEEDUP),
    ]
    calibration = "; ".join(f"{i} {t} thr {ms:.1f}" for i, t, ms in timings)
    info = report_header(began, peak) + [
        ("load average (1 min) before / after each run",
         ", ".join(f"{k} {a:.2f} / {b:.2f}" for k, (a, b) in loads.items())
         + " (the machine is shared: a load above the core count slows both)"),
        ("PyTorch version", f"{torch.__version__} (Python {sys.version.split()[0]})"),
        ("data", f"{args.data} ({n_chars:,} characters; {tg_split[0]:,} train + "
                 f"{tg_split[1]:,} validation tokens, the last {LEARN_VAL_FRACTION:g})"),
        ("model", f"gpt, {config.layers} layers, {config.NH} heads, embd {config.C}, context "
                  f"{config.T}, batch {config.B}, dropout {config.dropout:g}; "
                  f"{n_params:,} parameters" if n_params else "gpt (no `model:` line)"),
        ("recipe", f"AdamW lr {recipe.lr:g}, betas ({recipe.beta1:g}, {recipe.beta2:g}), eps "
                   f"{ADAMW_EPS:g}, weight decay {recipe.weight_decay:g} on the 2-D tensors; "
                   f"warmup {recipe.warmup} steps, {recipe.schedule} to {recipe.min_lr:g} at "
                   f"step {args.steps}; gradient norm clipped at {recipe.grad_clip:g}; "
                   f"{args.steps} steps on random windows, seed {LEARN_SEED}"),
        ("validation", f"every {LEARN_EVAL_INTERVAL} steps and at the last, before the "
                       f"step's update: the mean loss over {LEARN_EVAL_BATCHES} fixed batches "
                       "of the validation split (batch k of `--order sequential` over it), "
                       "the same windows on both sides"),
        ("training time", "the sum of the per-step times (forward, backward, clipping, "
                          "update); evaluation and batch making left out"),
        ("tinygpt side", f"`{shlex.join(['tinygpt'] + tg_command[1:])}` (the recipe's "
                         "flags are its gpt defaults, spelled out)"),
        ("PyTorch side", "BenchNanoGPT (nanoGPT's blocks, bias=False, tied head; fp32), "
                         "torch.optim.AdamW, clip_grad_norm_, nanoGPT's get_lr; "
                         f"{pt_impl}, {pt_threads} thread(s)"),
        ("threads", f"each side at its fastest setting: tinygpt {tg_threads} thread(s), "
                    f"{pt_impl} {pt_threads} thread(s), from {LEARN_CALIBRATION_STEPS} steps "
                    f"of each setting first (median ms/step after {LEARN_CALIBRATION_SKIP}): "
                    f"{calibration}"),
    ]
    report = learn_report(info, tg, pt, targets, sample)
    write_report(args.out, report)
    print(report, end="")
    for what, value, met in targets:
        print(f"learn: target {'MET' if met else 'NOT MET'}: {what} (measured {value})")
    print(f"learn: wrote {args.out} and {picture}")
    return 0
