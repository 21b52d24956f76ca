#!/usr/bin/python3
"""tokenizers.py: how fast tinygpt's bpe tokenizer learns and encodes, and
what it buys a model, measured with tinygpt itself.

    speed   Learn a 512-token bpe tokenizer (`tinygpt tokenize --learn`) from
            the first 1 MB of DATA and from DATA repeated to 10 and 100 MB,
            and encode each: seconds to learn, MB/s to encode, and the time
            per MB, which stays about flat if learning is linear in the text.
    learn   Train the default gpt twice on DATA, with --tokenizer char and with
            --tokenizer bpe (512 tokens), for the same training time: the char
            run takes the gpt default of 2000 steps, and the bpe run as many
            steps as fit in the same time (both step times measured first in
            short runs). Compares the validation loss in bits per byte of
            text, the one measure that means the same for both tokenizers.

Writes a markdown table to --out (bench/tokenizers.md, or
bench/tokenizers-speed.md for `speed` alone) and prints it.

    /usr/bin/python3 scripts/tokenizers.py {speed,learn,all} --tinygpt ./tinygpt
                                           [--data FILE] [--out FILE]

Python's standard library only (`make tokenizers` runs `all`; `make bench`
runs `speed`). Repeating the text makes the 10 and 100 MB files hold the same
words as the 1 MB one, so the counting pass grows with the text while the
merging pass (over distinct chunks) does not: the linear part is the part
measured.
"""

import argparse
import csv
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

VOCAB_SIZE = 512
SIZES_MB = (1, 10, 100)
CHAR_STEPS = 2000          # the gpt default
CALIBRATION_STEPS = 40     # steps timed to learn each tokenizer's step time
CALIBRATION_SKIP = 10      # the first, slower steps not counted
LEARN_FLAGS = ["--val-fraction", "0.1", "--eval-interval", "250", "--eval-batches", "20",
               "--seed", "1337", "--save-every", "0"]


def run(command, capture=True):
    """Run "command" (a list); its stdout. Exit with its stderr on failure."""
    print("tokenizers: $ " + shlex.join(command), file=sys.stderr, flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE if capture else None,
                            stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(f"tokenizers: {shlex.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def make_sized_file(data, mb, path):
    """The first "mb" MB of "data" repeated, cut at a line end."""
    with open(data, "rb") as f:
        text = f.read()
    want = mb * 1000 * 1000
    out = bytearray()
    while len(out) < want:
        out += text[:want - len(out)]
    cut = out.rfind(b"\n", 0, want)
    with open(path, "wb") as f:
        f.write(out[:cut + 1 if cut > 0 else want])


def speed(args, tmp):
    """Rows of (MB, bytes, learn s, s per MB, encode MB/s, bytes/token)."""
    rows = []
    for mb in SIZES_MB:
        path = os.path.join(tmp, f"text-{mb}mb.txt")
        make_sized_file(args.data, mb, path)
        out = run([args.tinygpt, "tokenize", "--learn", path, "--vocab-size", str(VOCAB_SIZE), "--json"])
        r = json.loads(out)
        os.remove(path)
        mb_real = r["bytes"] / 1e6
        rows.append((mb, r["bytes"], r["learn_seconds"], r["learn_seconds"] / mb_real,
                     mb_real / r["encode_seconds"] if r["encode_seconds"] > 0 else float("inf"),
                     r["bytes"] / r["tokens"]))
    return rows


def speed_table(rows):
    lines = [f"| text | learn {VOCAB_SIZE} tokens | learning time per MB | encode | bytes per token |",
             "|---|---|---|---|---|"]
    for mb, n, learn, per_mb, encode, bpt in rows:
        lines.append(f"| {mb} MB ({n:,} bytes) | {learn:.3f} s | {per_mb:.3f} s | {encode:.1f} MB/s | {bpt:.2f} |")
    return "\n".join(lines)


def read_log(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def step_ms(args, tmp, tokenizer_flags, name):
    """The median step time of a short run of the default gpt."""
    out_dir = os.path.join(tmp, f"calibrate-{name}")
    run([args.tinygpt, "train", args.data, "--out", out_dir, "--steps", str(CALIBRATION_STEPS),
         "--val-fraction", "0.1", "--save-every", "0"] + tokenizer_flags)
    times = sorted(float(r["ms"]) for r in read_log(os.path.join(out_dir, "log.csv"))[CALIBRATION_SKIP:])
    return times[len(times) // 2]


def train(args, tmp, tokenizer_flags, name, steps):
    """One training run; (final row of its log, training seconds, sample)."""
    out_dir = os.path.join(tmp, name)
    began = time.time()
    run([args.tinygpt, "train", args.data, "--out", out_dir, "--steps", str(steps)] + LEARN_FLAGS +
        tokenizer_flags, capture=False)
    wall = time.time() - began
    log = read_log(os.path.join(out_dir, "log.csv"))
    train_seconds = sum(float(r["ms"]) for r in log) / 1e3
    evals = [r for r in log if r["val_bpb"]]
    sample = run([args.tinygpt, "sample", "--model", os.path.join(out_dir, "model.safetensors"),
                  "--prompt", "ROMEO:", "--tokens", "120", "--seed", "7"])
    return evals[-1], train_seconds, wall, sample


def learn(args, tmp):
    bpe_flags = ["--tokenizer", "bpe", "--vocab-size", str(VOCAB_SIZE)]
    char_ms = step_ms(args, tmp, [], "char")
    bpe_ms = step_ms(args, tmp, bpe_flags, "bpe")
    bpe_steps = max(1, round(CHAR_STEPS * char_ms / bpe_ms))
    runs = []
    for name, flags, steps in (("char", [], CHAR_STEPS), ("bpe", bpe_flags, bpe_steps)):
        last, seconds, wall, sample = train(args, tmp, flags, name, steps)
        runs.append((name, steps, last, seconds, wall, sample))
    lines = ["| tokenizer | steps | training time | val loss (nats/token) | val bits per byte |",
             "|---|---|---|---|---|"]
    for name, steps, last, seconds, wall, _ in runs:
        lines.append(f"| {name}{f' ({VOCAB_SIZE} tokens)' if name == 'bpe' else ''} | {steps} | "
                     f"{seconds:.1f} s ({wall:.0f} s wall) | {float(last['val_loss']):.3f} | "
                     f"**{float(last['val_bpb']):.3f}** |")
    samples = "\n".join(f"{name}:\n\n```\n{sample.strip()}\n```\n" for name, _, _, _, _, sample in runs)
    note = (f"Step times measured first ({CALIBRATION_STEPS} steps each): char {char_ms:.1f} ms, "
            f"bpe {bpe_ms:.1f} ms; bpe gets {bpe_steps} steps to match char's {CHAR_STEPS}.")
    return "\n".join(lines), note, samples, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["speed", "learn", "all"])
    parser.add_argument("--tinygpt", default="./tinygpt")
    parser.add_argument("--data", default="data/moby-dick.txt",
                        help="the text (default %(default)s)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"tokenizers: {args.data} does not exist; fetch it with `make {args.data}` "
                 "or pass --data FILE")
    out = args.out or ("bench/tokenizers-speed.md" if args.what == "speed" else "bench/tokenizers.md")
    began = time.time()
    parts = [f"# tinygpt's tokenizers on {args.data}\n",
             f"{time.strftime('%Y-%m-%d %H:%M %Z')}, load average at start {os.getloadavg()[0]:.2f}\n"]
    with tempfile.TemporaryDirectory(prefix="tinygpt-tokenizers-") as tmp:
        if args.what in ("speed", "all"):
            parts += ["## Learning and encoding speed\n", speed_table(speed(args, tmp)), ""]
        if args.what in ("learn", "all"):
            table, note, samples, _ = learn(args, tmp)
            parts += ["## char vs bpe at the same training time (default gpt)\n", table, "", note, "",
                      samples]
    parts.append(f"total time {time.time() - began:.0f} s\n")
    report = "\n".join(parts)
    print(report)
    if os.path.dirname(out):
        os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(report)
    print(f"tokenizers: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
