#!/usr/bin/python3
"""ladder.py: from the attention card to a GPT, one ingredient at a time,
and on to the modern recipe, one swap at a time.

Trains a model per rung with tinygpt on the same text, for the same
training time (`train --time`, 60 s by default; or the same number of
steps with --steps), with the same batch (12), context (64), channels
(128), heads (4), dropout (0) and seed; each rung adds one thing to the
rung before (equal time is the fair measure: a rung that adds work per
step must earn it in fewer steps):

    1. card, SGD         the one-block attention model, plain SGD at lr 0.5
    2. + AdamW           nanoGPT's recipe: AdamW, warmup, cosine, clipping
    3. + MLP             a gpt block without residual stream or LayerNorm
    4. + residual        the block's branches added to a residual stream
    5. + LayerNorm       LayerNorm before each branch and the head
    6. 4 blocks          the default gpt
    7. + RMSNorm         RMSNorm in place of each LayerNorm (--norm rmsnorm)
    8. + ReLU^2          ReLU^2 in place of the MLP's GELU (--mlp relu2)
    9. + untied head     a head.weight of its own instead of tok_emb (--untied-head)
   10. + RoPE            rotary positions in place of pos_emb (--pos rope)
   11. + QK-norm         each head's q and k divided by its RMS (--qk-norm)
   12. SwiGLU            LLaMA's gated MLP in place of ReLU^2 (--mlp swiglu)
   13. + Muon            Muon for the blocks' matrices, AdamW for the rest (--optimizer muon)

then prints a markdown table (parameters, final validation loss, training
seconds, the start of a sample) and writes it to bench/ladder.md, and
draws every rung's validation curve: rungs 1-6 in bench/ladder.png, rung 6
and the modern recipe's in bench/ladder-recipe.png. A rung that
diverges (tinygpt stops on a NaN) is reported in the table; the others go on.

    /usr/bin/python3 scripts/ladder.py --tinygpt ./tinygpt [--data FILE] [--time S | --steps N]
                                       [--runs DIR] [--out FILE]

Python's standard library only (`make ladder` runs it).
"""

import argparse
import collections
import csv
import os
import re
import shlex
import subprocess
import sys
import time

# One rung: its directory name under --runs, its label in the picture and
# the table (no commas: `tinygpt plot --labels` splits on them), what it
# adds to the rung before, and its `tinygpt train` flags.
Rung = collections.namedtuple("Rung", "name label adds flags")


# The gpt of rungs 3-6, nanoGPT's (tinygpt's defaults until make sweep's
# recipe took their place): char tokens, LayerNorm, GELU, learned
# positions, a tied head, and batches of windows drawn at random, as card's
# (the gpt's default since make sweep's round 8 reads shuffled epochs; every
# rung reads its text alike, so each rung's gain is its model's). Rung 7 on
# swaps them one at a time (a flag given again, or a switch's opposite,
# holds over the one before).
NANOGPT_PARTS = ["--tokenizer", "char", "--norm", "layernorm", "--mlp", "gelu", "--pos", "learned",
                 "--tied-head", "--no-qk-norm", "--order", "random"]


def adamw_flags(steps):
    """nanoGPT's recipe (tinygpt's gpt defaults before make sweep's, spelled
    out so that card gets them too): AdamW lr 1e-3, betas 0.9 and 0.99, weight decay 0.1,
    warmup, a cosine down to 1e-4, gradients clipped at norm 1. The warmup
    is 100 steps, or a tenth of a shorter run (steps None: a run of time)."""
    warmup = 100 if steps is None else min(100, steps // 10)
    return ["--optimizer", "adamw", "--lr", "1e-3", "--beta1", "0.9", "--beta2", "0.99",
            "--weight-decay", "0.1", "--warmup", str(warmup),
            "--lr-schedule", "cosine", "--min-lr", "1e-4", "--grad-clip", "1.0"]


def rungs(steps):
    """The rungs for a run of "steps" steps, in order. From rung 7 on, each
    keeps the swaps of the rungs before it and makes one more."""
    sgd = ["--optimizer", "sgd", "--lr", "0.5", "--warmup", "0", "--lr-schedule", "constant",
           "--grad-clip", "0"]
    adamw = adamw_flags(steps)
    return [
        Rung("1-card-sgd", "1 card SGD", "the card model: one attention block, plain SGD "
             "at lr 0.5", ["--arch", "card"] + sgd),
        Rung("2-card-adamw", "2 +AdamW", "AdamW with warmup, cosine decay and clipping",
             ["--arch", "card"] + adamw),
        Rung("3-mlp", "3 +MLP", "a gpt block: attention then an MLP (no residual, no "
             "LayerNorm; tied head)", ["--arch", "gpt", "--layers", "1", "--no-residual",
                                       "--no-layernorm"] + NANOGPT_PARTS + adamw),
        Rung("4-residual", "4 +residual", "the residual stream",
             ["--arch", "gpt", "--layers", "1", "--no-layernorm"] + NANOGPT_PARTS + adamw),
        Rung("5-layernorm", "5 +LayerNorm", "LayerNorm before each branch and the head",
             ["--arch", "gpt", "--layers", "1"] + NANOGPT_PARTS + adamw),
        Rung("6-four-blocks", "6 4 blocks", "three more blocks (nanoGPT's baby gpt)",
             ["--arch", "gpt", "--layers", "4"] + NANOGPT_PARTS + adamw),
    ] + recipe_rungs(adamw)


def recipe_rungs(adamw):
    """The modern recipe's rungs: nanoGPT's baby gpt with one more swap each."""
    swaps = [("7-rmsnorm", "7 +RMSNorm", "RMSNorm in place of each LayerNorm",
              ["--norm", "rmsnorm"]),
             ("8-relu2", "8 +ReLU^2", "ReLU^2 in place of the MLP's GELU", ["--mlp", "relu2"]),
             ("9-untied-head", "9 +untied head", "a head weight of its own instead of tok_emb",
              ["--untied-head"]),
             ("10-rope", "10 +RoPE", "rotary position embeddings in place of pos_emb",
              ["--pos", "rope"]),
             ("11-qk-norm", "11 +QK-norm", "each head's q and k divided by its RMS before the scores",
              ["--qk-norm"]),
             ("12-swiglu", "12 SwiGLU", "LLaMA's gated MLP, SwiGLU, in place of ReLU^2",
              ["--mlp", "swiglu"]),
             ("13-muon", "13 +Muon", "Muon for the blocks' matrices (AdamW for the rest)",
              ["--optimizer", "muon"])]
    recipe, flags = [], ["--arch", "gpt", "--layers", "4"] + NANOGPT_PARTS
    for name, label, adds, swap in swaps:
        if len(swap) == 2 and swap[0] in flags:  # a choice given again (--mlp): the new value replaces the old
            at = flags.index(swap[0])
            flags = flags[:at] + flags[at + 2:]
        flags = flags + swap
        if "--optimizer" in swap and "--optimizer" in adamw:  # Muon in AdamW's place; its flags are for the rest
            at = adamw.index("--optimizer")
            adamw = adamw[:at] + adamw[at + 2:]
        recipe.append(Rung(name, label, adds, flags + adamw))
    return recipe


def common_flags(args):
    """The flags every rung shares: the budget, the sizes, the seed, evaluation."""
    budget = (["--steps", str(args.steps), "--eval-interval", str(max(1, args.steps // 8))]
              if args.steps is not None else ["--time", f"{args.time:g}", "--eval-interval", "100"])
    return budget + ["--batch", "12", "--context", "64", "--embd", "128",
                     "--heads", "4", "--dropout", "0", "--seed", "1337", "--val-fraction", "0.1",
                     "--eval-batches", "20", "--save-every", "0", "--sample-every", "0"]


def read_log(path):
    """A rung's log.csv summed up: (validation points [(step, loss)], training
    seconds (the sum of the ms column), rows); ([], 0, 0) when there is none.
    Columns are read by their names in the header."""
    if not os.path.exists(path):
        return [], 0.0, 0
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    evals = [(int(r["step"]), float(r["val_loss"])) for r in rows if r.get("val_loss")]
    return evals, sum(float(r["ms"]) for r in rows) / 1e3, len(rows)


def one_line(text, width):
    """The first "width" characters of "text" on one line: a newline shown as
    ⏎, and | escaped for a markdown table."""
    return text[:width].replace("\n", "\u23ce").replace("|", "\\|")


def train_rung(args, rung):
    """Train one rung into --runs/<name>; returns a result dict: rung,
    command, status, parameters (from tinygpt's `model:` line), evals,
    seconds, wall seconds, error (tinygpt's last stderr line on failure) and
    sample (the start of `sample --seed 1 --tokens 80`, or None)."""
    out_dir = os.path.join(args.runs, rung.name)
    # --force: a rung trained again replaces its last run (train refuses to
    # train into a directory holding one otherwise).
    command = ([args.tinygpt, "train", args.data, "--out", out_dir, "--force"] + rung.flags
               + common_flags(args))
    print(f"ladder: rung {rung.label}: + {shlex.join(command)}", flush=True)
    start = time.time()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.time() - start
    found = re.search(r"^model:.*?(\d+) parameters", result.stderr, re.MULTILINE)
    evals, seconds, steps_done = read_log(os.path.join(out_dir, "log.csv"))
    outcome = {"rung": rung, "command": command, "status": result.returncode,
               "parameters": int(found.group(1)) if found else None, "evals": evals,
               "seconds": seconds, "steps_done": steps_done, "wall": wall,
               "error": (result.stderr.strip().splitlines() or [""])[-1], "sample": None}
    if result.returncode != 0:
        print(f"ladder: rung {rung.label} stopped (status {result.returncode}): "
              f"{outcome['error']}", flush=True)
        return outcome
    for line in result.stdout.splitlines()[-1:]:
        print(f"ladder:   {line}", flush=True)
    sample = subprocess.run([args.tinygpt, "sample", "--model",
                             os.path.join(out_dir, "model.safetensors"), "--seed", "1",
                             "--tokens", "80"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    if sample.returncode == 0:
        outcome["sample"] = sample.stdout
    return outcome


def table(results, args):
    """The markdown table of "results" (train_rung's dicts), as a list of lines."""
    lines = ["| rung | what it adds | parameters | final val loss | seconds | sample "
             "(`sample --seed 1 --tokens 80`, first 60 characters) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        rung = r["rung"]
        params = f"{r['parameters']:,}" if r["parameters"] is not None else "?"
        if r["status"] == 0 and r["evals"]:
            loss = f"{r['evals'][-1][1]:.4f}"
        elif r["status"] == 0:
            loss = "(no validation)"
        else:
            last = (f"; last val {r['evals'][-1][1]:.4f} at step {r['evals'][-1][0]}"
                    if r["evals"] else "")
            loss = (f"**diverged** after {r['steps_done']} steps{last}: "
                    f"{one_line(r['error'], 120)}")
        sample = f"`{one_line(r['sample'], 60)}`" if r["sample"] else ""
        lines.append(f"| {rung.label} | {rung.adds} | {params} | {loss} | {r['seconds']:.1f} "
                     f"| {sample} |")
    return lines


def main():
    """Parse the command line, train every rung, print and write the table, draw the curves."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    parser.add_argument("--data", default="data/moby-dick.txt",
                        help="training text (default %(default)s)")
    parser.add_argument("--time", type=float, default=60.0,
                        help="training seconds of every rung (default %(default)s)")
    parser.add_argument("--steps", type=int,
                        help="instead of --time: training steps of every rung")
    parser.add_argument("--runs", default="runs/ladder",
                        help="each rung trains into DIR/<n>-<name> (default %(default)s)")
    parser.add_argument("--out", default="bench/ladder.md",
                        help="the table (default %(default)s); ladder.png and ladder-recipe.png go beside it")
    args = parser.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"ladder: {args.data} does not exist; fetch it with `make {args.data}` or "
                 "pass --data FILE")
    if args.steps is not None and args.steps < 1:
        sys.exit("ladder: --steps must be at least 1")
    if args.time <= 0:
        sys.exit("ladder: --time must be positive")

    began = time.time()
    load_before = os.getloadavg()[0]
    results = [train_rung(args, rung) for rung in rungs(args.steps)]
    load_after = os.getloadavg()[0]

    # Every rung that has a validation point gets a curve: rungs 1-6 (card
    # to gpt) in ladder.png, rung 6 and the modern recipe's in
    # ladder-recipe.png (`tinygpt plot` draws at most 8 curves).
    out_dir = os.path.dirname(args.out) or "."
    os.makedirs(out_dir, exist_ok=True)
    pictures = []  # (file name, caption) of each picture drawn
    n_gpt = len(rungs(args.steps)) - len(recipe_rungs([]))
    for name, caption, group in [("ladder.png", "validation loss of rungs 1-6", results[:n_gpt]),
                                 ("ladder-recipe.png", "validation loss of the modern recipe's rungs",
                                  results[n_gpt - 1:])]:
        drawn = [r for r in group if r["evals"]]
        picture = os.path.join(out_dir, name)
        plot = [args.tinygpt, "plot"] + [os.path.join(args.runs, r["rung"].name, "log.csv")
                                         for r in drawn]
        each = f"{args.steps} steps" if args.steps is not None else f"{args.time:g} s"
        plot += ["--labels", ",".join(r["rung"].label for r in drawn), "--out", picture,
                 "--title", f"validation loss, {each} each, {os.path.basename(args.data)}"]
        if args.steps is None:
            plot += ["--x", "time"]  # equal time: side by side in seconds
        print("ladder: + " + shlex.join(plot), flush=True)
        plotted = subprocess.run(plot, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if plotted.returncode != 0:
            print(f"ladder: plot failed (status {plotted.returncode}): {plotted.stdout.strip()}")
        else:
            pictures.append((name, caption))

    lines = ["# The ladder: from the attention card to a GPT", "",
             f"- command: `{shlex.join([sys.executable] + sys.argv)}`",
             f"- date: {time.strftime('%Y-%m-%d %H:%M:%S %Z', time.localtime(began))}",
             f"- data: {args.data}; every rung: {shlex.join(common_flags(args))}",
             f"- AdamW rungs: {shlex.join(adamw_flags(args.steps))}",
             f"- seconds: training time, the sum of log.csv's `ms` column (evaluation left "
             f"out); load average (1 min) {load_before:.2f} at the start, {load_after:.2f} at "
             f"the end, on {os.cpu_count()} logical CPUs (the machine is shared)",
             "- final val loss: at the last step, the mean loss of up to 240 windows (20 batches of 12) "
             "spread evenly over the validation split, the same at every evaluation",
             ""]
    lines += table(results, args)
    lines += [""] + [f"![{caption}]({name})" for name, caption in pictures]
    lines += ["" if pictures else "(no picture: `tinygpt plot` failed)", ""]
    report = "\n".join(lines)
    print(report, end="")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)
    print(f"ladder: wrote {args.out}" + "".join(f" and {os.path.join(out_dir, name)}"
                                               for name, _ in pictures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
