#!/usr/bin/python3
"""kernel_split.py: where a training step's time goes, kernel by kernel.

Trains a model with tinygpt under `perf record` (sampling the CPU 1999
times a second; no change to tinygpt, whose own timings stay as they are),
then sums the samples by function and groups the functions into the parts
of a step: the products (matmul, linear), attention, the norms, the MLP's
activation, the loss, the embeddings, the optimizer, OpenMP (threads
waiting for each other or for work) and the kernel. Prints a markdown table of each
part's share of the run and writes it to bench/kernels.md. Loading the
text and learning a tokenizer are in the run too, and show as "other":
train long enough (--steps) for them to be small.

    /usr/bin/python3 scripts/kernel_split.py --tinygpt ./tinygpt --data FILE [--steps N]
                                             [--out FILE] [-- TRAIN_FLAGS...]

Needs perf (Debian's linux-perf) and the right to use it (root, or
kernel.perf_event_paranoid <= 1). Python's standard library only
(`make bench` runs it for the default gpt when perf is there).
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

# A function's part of the step, by its name (OpenMP's outlined bodies are
# named after their function: "matmul_forward._omp_fn.0"). First match wins.
PARTS = [
    ("products (matmul, linear, the head)", r"matmul|linear|tile|gemm|transpose|head_product"),
    ("attention (scores, softmax, weighted sums)", r"attention|softmax|rope|qk_norm"),
    ("norms (LayerNorm, RMSNorm)", r"layernorm|rmsnorm|square_sums"),
    ("MLP activation (GELU, ReLU^2, SwiGLU)", r"gelu|relu2|swiglu|erf"),
    ("loss (cross-entropy)", r"crossentropy|cross_entropy"),
    ("embeddings and residual", r"encoder|embedding|residual"),
    ("optimizer (clip, update, checks)", r"adamw|sgd|muon|optimizer|clip|nonfinite|beyond|zero_grad"),
    ("the peak probe (as train starts, and its rechecks)", r"peak_fma"),
    ("memory copies and clears", r"memset|memcpy|memmove"),
]


def part_of(dso, kernel, symbol):
    """The part of the step of "symbol" in library or program "dso"."""
    if "libgomp" in dso:
        return "OpenMP (threads waiting and waking)"
    if kernel:
        return "the kernel (interrupts, scheduling, page faults)"
    for part, pattern in PARTS:
        if re.search(pattern, symbol, re.IGNORECASE):
            return part
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", default="./tinygpt")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default="bench/kernels.md")
    ap.add_argument("train_flags", nargs="*", help="more `tinygpt train` flags (after --)")
    args = ap.parse_args()
    if not shutil.which("perf"):
        sys.exit("kernel_split.py: perf is not installed (Debian: apt-get install linux-perf)")
    tmp = tempfile.mkdtemp(prefix="kernel_split.")
    try:
        data = os.path.join(tmp, "perf.data")
        train = [args.tinygpt, "train", args.data, "--out", os.path.join(tmp, "run"), "--steps", str(args.steps),
                 "--eval-interval", str(args.steps + 1), "--sample-every", "0", "--save-every", "0"]
        train += args.train_flags
        r = subprocess.run(["perf", "record", "-F", "1999", "-o", data, "--"] + train,
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"kernel_split.py: perf record failed ({r.returncode}): {r.stderr.strip()[-400:]}")
        r = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso,symbol", "--no-children",
                            "--percent-limit", "0", "-q"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"kernel_split.py: perf report failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    shares, top = collections.Counter(), collections.defaultdict(list)
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[([.k])\]\s+(\S+)", line)
        if not m:
            continue
        percent, dso, symbol = float(m.group(1)), m.group(2), m.group(4)
        part = part_of(dso, m.group(3) == "k", symbol)
        shares[part] += percent
        top[part].append((percent, symbol))
    lines = [f"Where the time of `{' '.join(train[1:2] + train[2:3])} ... --steps {args.steps} "
             f"{' '.join(args.train_flags)}` went (`perf record`, share of the samples, by function):", "",
             "| part of the step | share | its largest functions |", "|---|---|---|"]
    for part, share in shares.most_common():
        biggest = ", ".join(f"`{s}` {p:.1f}%" for p, s in sorted(top[part], reverse=True)[:3])
        lines.append(f"| {part} | {share:.1f}% | {biggest} |")
    report = "\n".join(lines) + "\n"
    print(report)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)


if __name__ == "__main__":
    main()
