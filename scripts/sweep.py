#!/usr/bin/python3
"""sweep.py: which training recipe learns most in a fixed time?

Trains every candidate recipe (CANDIDATES: a name, what it changes, its
`tinygpt train` flags) for the same wall-clock budget (`train --time`) on
each text, then scores each final model in bits per byte on the text's
last 10% (`tinygpt eval --split val`: the validation split, which training
never saw), the number that compares runs of any tokenizer. Prints a
markdown table (one row per candidate, one column per text, their mean,
the steps each reached, the whole process's wall time, its share of the
cores and how many of a sample's words are the text's) and writes it to
bench/sweep.md. `make run` trains with the winner of this sweep on two
texts, checked on a third (docs/speed-and-memory.md, "Learning per
second", says which, and by how much).

    /usr/bin/python3 scripts/sweep.py --tinygpt ./tinygpt --data FILE [--data FILE ...]
                                      [--time SECONDS] [--only NAME,...] [--seeds S,...] [--runs DIR] [--out FILE]

With several --seeds, each candidate runs once with each seed (all the
candidates with the first, then with the next, ...) and its cell is the
mean, with the lowest and highest: a seed's luck (the weights it draws, the
windows and dropout masks it picks) moved the defaults' score on tiny
Shakespeare over 0.02 bits per byte, as much as most recipe changes
(docs/speed-and-memory.md).

The machine should be otherwise idle: every candidate gets the same
seconds, so a busy neighbour costs it steps. Python's standard library only
(`make sweep` runs it).
"""

import argparse
import collections
import functools
import json
import os
import resource
import shlex
import subprocess
import sys
import time

import known_words

Candidate = collections.namedtuple("Candidate", "name changes flags")

# Each candidate spells out what it changes from nanoGPT's CPU recipe on
# characters, tinygpt's defaults at the time of the sweep ("defaults" is
# tinygpt's defaults as they are: since the fourth round, r3 with dropout
# 0.05, "r3-drop0.05", and since the eighth, read in shuffled epochs with
# dropout 0.02); from
# "bpe1024" on, each row keeps the changes of the row before and makes one
# more, then the last kept recipe is varied one knob at a time. A flag
# given again, or a switch's opposite, holds over the one before.
NANOGPT = ["--tokenizer", "char", "--lr", "1e-3", "--layers", "4", "--embd", "128", "--heads", "4",
           "--context", "64", "--batch", "12", "--pos", "learned", "--mlp", "gelu", "--norm", "layernorm",
           "--tied-head", "--no-qk-norm", "--dropout", "0", "--order", "random"]
BPE = NANOGPT + ["--tokenizer", "bpe", "--vocab-size", "1024", "--lr", "2e-3"]
RECIPE = BPE + ["--pos", "rope", "--mlp", "relu2", "--norm", "rmsnorm", "--untied-head"]
R3 = RECIPE + ["--vocab-size", "2048", "--layers", "3", "--qk-norm", "--batch", "24"]
CANDIDATES = [
    Candidate("defaults", "tinygpt's defaults as they are", []),
    Candidate("char", "nanoGPT's CPU recipe: char tokens, 4 blocks of C 128, T 64, B 12, lr 1e-3, learned "
              "positions, GELU, LayerNorm, tied head",
              NANOGPT),
    Candidate("bpe1024", "bpe tokens (1024), lr 2e-3", BPE),
    Candidate("+rope", "rotary positions", BPE + ["--pos", "rope"]),
    Candidate("+relu2", "ReLU^2 MLP", BPE + ["--pos", "rope", "--mlp", "relu2"]),
    Candidate("+rmsnorm", "RMSNorm", BPE + ["--pos", "rope", "--mlp", "relu2", "--norm", "rmsnorm"]),
    Candidate("+untied", "an untied head: the recipe", RECIPE),
    Candidate("recipe-lr3e-3", "the recipe at lr 3e-3", RECIPE + ["--lr", "3e-3"]),
    Candidate("recipe-v2048", "the recipe with 2048 bpe tokens", RECIPE + ["--vocab-size", "2048"]),
    Candidate("recipe-L3", "the recipe with 3 blocks", RECIPE + ["--layers", "3"]),
    Candidate("recipe-B24", "the recipe with batch 24", RECIPE + ["--batch", "24"]),
    # The second round: the first round's three gains together, and around them.
    Candidate("r2", "the recipe with 2048 bpe tokens and 3 blocks", RECIPE + ["--vocab-size", "2048", "--layers", "3"]),
    Candidate("r2-B24", "r2 with batch 24", RECIPE + ["--vocab-size", "2048", "--layers", "3", "--batch", "24"]),
    Candidate("r2-v4096", "r2 with 4096 bpe tokens", RECIPE + ["--vocab-size", "4096", "--layers", "3"]),
    Candidate("r2-C192", "r2 with C 192 (6 heads) and 2 blocks",
              RECIPE + ["--vocab-size", "2048", "--layers", "2", "--embd", "192", "--heads", "6"]),
    Candidate("r2-lr1.5e-3", "r2 at lr 1.5e-3", RECIPE + ["--vocab-size", "2048", "--layers", "3", "--lr", "1.5e-3"]),
    Candidate("r2-qknorm", "r2 with QK-norm", RECIPE + ["--vocab-size", "2048", "--layers", "3", "--qk-norm"]),
    Candidate("r2-qknorm-lr3e-3", "r2 with QK-norm at lr 3e-3",
              RECIPE + ["--vocab-size", "2048", "--layers", "3", "--qk-norm", "--lr", "3e-3"]),
    Candidate("r2-swiglu", "r2 with a SwiGLU MLP", RECIPE + ["--vocab-size", "2048", "--layers", "3", "--mlp", "swiglu"]),
    # The third round: the second round's two gains together, and Muon.
    Candidate("r3", "r2 with QK-norm and batch 24", R3),
    Candidate("r3-muon", "r3 with Muon for the blocks' matrices (lr 0.02)", R3 + ["--optimizer", "muon"]),
    Candidate("r3-muon-lr0.04", "r3 with Muon at lr 0.04", R3 + ["--optimizer", "muon", "--muon-lr", "0.04"]),
    Candidate("r2-qknorm-muon", "r2 with QK-norm and Muon", RECIPE + ["--vocab-size", "2048", "--layers", "3",
                                                                    "--qk-norm", "--optimizer", "muon"]),
    # The fourth round: the kernels grew ~50% faster after round 3, and r3's
    # 60 s on tiny Shakespeare went from ~1230 steps to ~1860, ~9 passes over
    # its training split: room for dropout, or for a wider or deeper model.
    Candidate("r3-drop0.1", "r3 with dropout 0.1", R3 + ["--dropout", "0.1"]),
    Candidate("r3-drop0.2", "r3 with dropout 0.2", R3 + ["--dropout", "0.2"]),
    Candidate("r3-C192", "r3 with C 192 (6 heads)", R3 + ["--embd", "192", "--heads", "6"]),
    Candidate("r3-C192-drop0.1", "r3 with C 192 (6 heads) and dropout 0.1",
              R3 + ["--embd", "192", "--heads", "6", "--dropout", "0.1"]),
    Candidate("r3-L4-drop0.1", "r3 with 4 blocks and dropout 0.1", R3 + ["--layers", "4", "--dropout", "0.1"]),
    Candidate("r3-drop0.05", "r3 with dropout 0.05", R3 + ["--dropout", "0.05"]),
    Candidate("r3-min0", "r3 with the cosine down to 0", R3 + ["--min-lr", "0"]),
    Candidate("r3-drop0.1-min0", "r3 with dropout 0.1 and the cosine down to 0", R3 + ["--dropout", "0.1", "--min-lr", "0"]),
    Candidate("r3-lr3e-3-min0", "r3 at lr 3e-3 with the cosine down to 0", R3 + ["--lr", "3e-3", "--min-lr", "0"]),
    # The fifth round: the context, which no round had varied, on a slower
    # CPU (a 2-core Cascade Lake, ~900 steps in a minute where the Zen 5 ran
    # ~1750): the same tokens a step in longer or shorter windows.
    Candidate("d-T128-B12", "the defaults with T 128 and batch 12", ["--context", "128", "--batch", "12"]),
    Candidate("d-T128", "the defaults with T 128", ["--context", "128"]),
    Candidate("d-T32-B48", "the defaults with T 32 and batch 48", ["--context", "32", "--batch", "48"]),
    # and, with half the Zen 5's steps, less regularisation or fewer blocks:
    Candidate("d-drop0", "the defaults without dropout", ["--dropout", "0"]),
    Candidate("d-L2", "the defaults with 2 blocks", ["--layers", "2"]),
    Candidate("d-lr3e-3", "the defaults at lr 3e-3", ["--lr", "3e-3"]),
    # The sixth round, on the same slower CPU: what no round had varied, the
    # optimizer's settings and the warmup (100 steps are ~12% of its minute),
    # and a smaller vocabulary or batch for more steps a minute.
    Candidate("d-warmup50", "the defaults with 50 warmup steps", ["--warmup", "50"]),
    Candidate("d-beta2-0.95", "the defaults with AdamW's beta2 0.95", ["--beta2", "0.95"]),
    Candidate("d-wd0", "the defaults without weight decay", ["--weight-decay", "0"]),
    Candidate("d-v1024", "the defaults with 1024 bpe tokens", ["--vocab-size", "1024"]),
    Candidate("d-B16", "the defaults with batch 16", ["--batch", "16"]),
    Candidate("d-B12", "the defaults with batch 12", ["--batch", "12"]),
    Candidate("d-B16-v1024", "the defaults with batch 16 and 1024 bpe tokens", ["--batch", "16", "--vocab-size", "1024"]),
    # The eighth round: how the text is read. ~1100 steps of 24 windows read
    # tiny Shakespeare's training split ~5 times over; windows drawn one at a
    # time read some stretches more often than that and others less.
    Candidate("d-random", "the defaults with windows drawn at random (nanoGPT's, the default before)",
              ["--order", "random"]),
    # and how much dropout a minute wants, now that it reads its text evenly:
    # ~1100 steps (a Zen 4's minute) or ~1750 (a Zen 5's).
    Candidate("d-drop0.05", "the defaults with dropout 0.05 (the default before)", ["--dropout", "0.05"]),
]


def run(cmd, log):
    """Run "cmd", its output appended to "log"; (exit status, seconds, the
    share of the machine's cores it had: its CPU time over the wall time
    times the cores, under 1 when other work took some)."""
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "a") as f:
        f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
        f.flush()
        status = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = time.monotonic() - start
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return status, seconds, cpu / (seconds * (os.cpu_count() or 1))


@functools.lru_cache(maxsize=None)
def text_words(data):
    """The set of the words of the text at "data", read once per text,
    not once per candidate."""
    with open(data, encoding="utf-8", errors="replace") as f:
        return frozenset(known_words.words(f.read()))


def train_and_score(args, candidate, data, seed, out_dir):
    """One candidate on one text with one seed: a dict of bpb (None if it
    failed), steps and the process's seconds."""
    log = os.path.join(out_dir + ".txt")
    cmd = [args.tinygpt, "train", data, "--out", out_dir, "--force", "--time", str(args.time),
           "--save-every", "0", "--sample-every", "0", "--seed", str(seed)] + candidate.flags
    status, seconds, share = run(cmd, log)
    result = {"bpb": None, "steps": None, "seconds": seconds, "share": share, "known": None}
    if status != 0:
        return result
    with open(os.path.join(out_dir, "run.json"), encoding="utf-8") as f:
        result["steps"] = int(json.load(f)["steps_done"])
    r = subprocess.run([args.tinygpt, "eval", "--model", os.path.join(out_dir, "model.safetensors"), "--split", "val",
                        "--json", data], capture_output=True, text=True)
    if r.returncode == 0:
        result["bpb"] = json.loads(r.stdout)["bits_per_byte"]
    # And how much of what it writes is the text's words (known_words.py):
    # 400 tokens, as `make run` samples them.
    r = subprocess.run([args.tinygpt, "sample", "--model", os.path.join(out_dir, "model.safetensors"), "--tokens",
                        "400"], capture_output=True, text=True)
    if r.returncode == 0:
        vocabulary = text_words(data)
        written = known_words.words(r.stdout)
        result["known"] = 100.0 * sum(w in vocabulary for w in written) / len(written) if written else 0.0
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", default="./tinygpt")
    ap.add_argument("--data", action="append", required=True, help="a text to train on (give several)")
    ap.add_argument("--time", type=float, default=60.0, help="seconds of training per run")
    ap.add_argument("--only", help="comma-separated candidate names")
    ap.add_argument("--seeds", default="1337", help="comma-separated --seed values, each a run of every candidate "
                    "(default 1337, train's own)")
    ap.add_argument("--runs", default="runs/sweep")
    ap.add_argument("--out", default="bench/sweep.md")
    args = ap.parse_args()
    candidates = CANDIDATES
    if args.only:
        names = args.only.split(",")
        unknown = [n for n in names if n not in {c.name for c in CANDIDATES}]
        if unknown:
            sys.exit(f"sweep.py: no candidate {', '.join(unknown)}; the candidates: "
                     + ", ".join(c.name for c in CANDIDATES))
        candidates = [c for c in CANDIDATES if c.name in names]
    texts = [os.path.splitext(os.path.basename(d))[0] for d in args.data]
    try:
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        sys.exit(f"sweep.py: --seeds {args.seeds}: not a comma-separated list of integers (e.g. 1337,1,2)")

    results = collections.defaultdict(list)  # (candidate, text): a result per seed
    for data, text in zip(args.data, texts):
        os.makedirs(os.path.join(args.runs, text), exist_ok=True)
        for seed in seeds:
            for c in candidates:
                run_name = c.name if len(seeds) == 1 else f"{c.name}-seed{seed}"
                r = train_and_score(args, c, data, seed, os.path.join(args.runs, text, run_name))
                results[(c.name, text)].append(r)
                bpb = "failed" if r["bpb"] is None else f"{r['bpb']:.3f} bits/byte"
                known = "-" if r["known"] is None else f"{r['known']:.0f}%"
                print(f"{text} {c.name} seed {seed}: {bpb}, {r['steps']} steps, {r['seconds']:.1f} s, "
                      f"{100 * r['share']:.0f}% of the cores, {known} known words", file=sys.stderr, flush=True)

    def mean_of(values):
        """Their mean, or None if any is None (a run that failed)."""
        return None if None in values else sum(values) / len(values)

    def text_mean(name, text):
        """The candidate's bpb on the text, over the seeds."""
        return mean_of([r["bpb"] for r in results[(name, text)]])

    def mean(name):
        return mean_of([text_mean(name, t) for t in texts])

    def cell(name, text):
        """One table cell: the score (with several seeds, their mean and
        range), then the steps, seconds, share of the cores and known words
        (with several seeds, their means; the share, the lowest)."""
        runs = results[(name, text)]
        m = text_mean(name, text)
        if m is None:
            return "failed"
        avg = lambda key: sum(r[key] for r in runs) / len(runs)
        known = "-" if None in [r["known"] for r in runs] else f"{avg('known'):.0f}%"
        spread = "" if len(runs) == 1 else f"{min(r['bpb'] for r in runs):.3f}-{max(r['bpb'] for r in runs):.3f}; "
        return (f"{m:.3f} ({spread}{avg('steps'):.0f}, {avg('seconds'):.0f}, "
                f"{100 * min(r['share'] for r in runs):.0f}%, {known})")

    ranked = sorted(candidates, key=lambda c: (mean(c.name) is None, mean(c.name) or 0.0))
    seeds_said = (f"with --seed {seeds[0]}" if len(seeds) == 1 else
                  f"once with each --seed of {', '.join(map(str, seeds))} (a score is their mean, the lowest and "
                  f"highest in brackets; steps, seconds and known words are means, the share of the cores the lowest)")
    lines = [f"Each recipe trained for `--time {args.time:g}` on each text {seeds_said}, scored by "
             f"`tinygpt eval --split val` "
             f"(bits per byte of the text's last 10%, lower is better); best first. After each score: the steps "
             f"the run reached, the whole process's seconds (tokenizer and final save included), and the share of "
             f"the machine's cores it had (its CPU time over the wall time: under 100% when other work ran), and "
             f"the share of the words of a 400-token sample that occur in the text (scripts/known_words.py).", "",
             "| recipe | what it changes | "
             + " | ".join(f"{t} bits/byte ({'' if len(seeds) == 1 else 'lowest-highest; '}steps, s, % of cores, "
                          f"% known words)" for t in texts)
             + " | mean |", "|---|---|" + "---|" * len(texts) + "---|"]
    for c in ranked:
        cells = [cell(c.name, t) for t in texts]
        m = mean(c.name)
        lines.append(f"| {c.name} | {c.changes} | " + " | ".join(cells) + f" | {'-' if m is None else f'{m:.3f}'} |")
    report = "\n".join(lines) + "\n"
    print(report)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)


if __name__ == "__main__":
    main()
