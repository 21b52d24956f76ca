#!/usr/bin/python3
"""bench_mpi.py: one process x 2 threads against 2 processes x 1 thread.

`make bench-mpi` runs it. For each model (the default gpt, and GPT-2 124M: a
random model of its shape and tokenizer, written by hf_gpt2.py random and
fine-tuned with train --init), it trains the same steps twice on DATA:

- 1 process with --threads 2 (the MPI build run without mpirun, which is
  the plain program), and
- `mpirun -np 2` with --threads 1 (each rank on a core of its own),

and reports the median step time (log.csv's ms, the step alone: no
evaluation, no save; the first steps left out as warm-up), the allreduce's
time a step and its share (the line train prints at the end under
mpirun; it includes waiting for the slower rank), and the speed of 2
processes relative to 1. The table goes to stdout and to bench/mpi.md,
with the CPU and its peak (`tinygpt peak --json`) and the machine's load.
Python's standard library, and python3-torch for hf_gpt2.py. Usage:

scripts/bench_mpi.py --tinygpt build/mpi/tinygpt --data data/moby-dick.txt
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

GPT2_DIR = "{tmp}/gpt2-124M"  # written by hf_gpt2.py random (random_gpt2)
MODELS = [
    # name, flags, steps, warm-up steps left out
    ("default gpt (bpe, 3 blocks, C 128, T 64, batch 24)", [], 120, 10),
    ("GPT-2 124M (12 blocks, C 768, 12 heads, T 1024, 50,257 tokens, batch 2), fine-tuned from a random directory",
     ["--init", GPT2_DIR, "--batch", "2"], 4, 1),
]


def random_gpt2(tmp, tokenizer_dir):
    """A random GPT-2 124M in Hugging Face's layout, with GPT-2's own tokenizer, for `train --init`."""
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "hf_gpt2.py"), "random", GPT2_DIR.format(tmp=tmp),
                    "--layers", "12", "--heads", "12", "--embd", "768", "--positions", "1024", "--vocab", "50257",
                    "--tokenizer-from", tokenizer_dir], check=True)
MPIRUN = ["mpirun", "--oversubscribe", "--quiet", "--bind-to", "core", "-np", "2"]
REDUCE_RE = re.compile(r"allreduce took ([\d.]+) ms a step, ([\d.]+)% of the steps' ([\d.]+) ms")


def train(cmd, out_dir, data, flags, steps):
    """Runs one training; returns (median ms per step after warm-up is
    applied by the caller: the list of ms, stderr)."""
    args = cmd + ["train", data, "--out", out_dir, "--force", "--steps", str(steps), "--val-fraction", "0",
                  "--sample-every", "0", "--save-every", "0"] + flags
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"bench_mpi: {' '.join(args)} failed:\n{r.stderr}")
    with open(os.path.join(out_dir, "log.csv")) as f:
        ms = [float(row["ms"]) for row in csv.DictReader(f)]
    return ms, r.stderr


# The estimate past this machine: N machines like this one, each with the
# batch one machine takes (the global batch grows with N), so each step
# costs one machine's step plus the allreduce, which tinygpt does not
# overlap with the backward. A ring allreduce of G bytes over N machines
# sends and receives 2 (N-1)/N G bytes per machine, in 2 (N-1) messages of
# latency ALPHA each.
NODES = [4, 16, 64]
LINKS_GBIT = [10, 100]
ALPHA_SECONDS = 25e-6


def paper_table(measured):
    out = ["## On paper: N machines like this one, each a batch of its own", "",
           f"ring allreduce: 2 (N-1)/N x 4 bytes a parameter over the link, plus 2 (N-1) x {ALPHA_SECONDS * 1e6:.0f} us",
           "", "| model | machines | link | allreduce ms | step ms | efficiency | tokens/s, x one machine |",
           "|---|---|---|---|---|---|---|"]
    for name, params, compute_ms in measured:
        for n in NODES:
            for gbit in LINKS_GBIT:
                seconds = 2 * (n - 1) / n * 4 * params / (gbit * 1e9 / 8) + 2 * (n - 1) * ALPHA_SECONDS
                step = compute_ms + 1e3 * seconds
                out.append(f"| {name.split(' (')[0]} | {n} | {gbit} Gbit/s | {1e3 * seconds:.1f} | {step:.1f} | "
                           f"{compute_ms / step:.0%} | {n * compute_ms / step:.1f}x |")
    return out + [""]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", required=True, help="a make MPI=1 build")
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", default="bench/mpi.md")
    ap.add_argument("--tokenizer-dir", default="build/gpt2-tokenizer/gpt2",
                    help="GPT-2's vocab.json and merges.txt (make gpt2-tokenizer-check fetches them)")
    args = ap.parse_args()
    tinygpt = os.path.abspath(args.tinygpt)
    peak = json.loads(subprocess.run([tinygpt, "peak", "--json"], capture_output=True, text=True, check=True).stdout)
    lines = [
        "# 1 process x 2 threads against 2 processes x 1 thread (make bench-mpi)",
        "",
        f"CPU: {peak.get('cpu', '?')}; `tinygpt peak`: {json.dumps(peak)}",
        f"load average before the runs: {os.getloadavg()[0]:.2f}",
        "",
        "| model | parameters | 1 x 2 threads, ms/step | 2 x 1 thread, ms/step | allreduce ms/step | allreduce share | speed of 2 x 1 |",
        "|---|---|---|---|---|---|---|",
    ]
    measured = []  # (model, parameters, ms a step on one machine)
    with tempfile.TemporaryDirectory(prefix="tinygpt_bench_mpi.") as tmp:
        random_gpt2(tmp, args.tokenizer_dir)
        for name, flags, steps, warm in MODELS:
            flags = [flag.format(tmp=tmp) for flag in flags]
            one_ms, one_err = train([tinygpt], os.path.join(tmp, "one"), args.data, flags + ["--threads", "2"], steps)
            two_ms, two_err = train(MPIRUN + [tinygpt], os.path.join(tmp, "two"), args.data, flags + ["--threads", "1"],
                                    steps)
            params = re.search(r"(\d+) parameters", one_err).group(1)
            m = REDUCE_RE.search(two_err)
            if not m:
                sys.exit(f"bench_mpi: no allreduce line in:\n{two_err}")
            one, two = statistics.median(one_ms[warm:]), statistics.median(two_ms[warm:])
            row = (f"| {name} | {int(params):,} | {one:.1f} | {two:.1f} | {float(m.group(1)):.1f} | "
                   f"{float(m.group(2)):.1f}% | {one / two:.2f}x |")
            print(row, flush=True)
            lines.append(row)
            measured.append((name, int(params), one))
    lines += ["", f"load average after the runs: {os.getloadavg()[0]:.2f}", ""]
    lines += paper_table(measured)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
