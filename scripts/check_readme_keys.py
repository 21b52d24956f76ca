#!/usr/bin/python3
"""check_readme_keys.py: do the docs list every key tinygpt writes?

Trains tiny runs of one step (a char gpt with every part removed,
so the no_* keys appear, a bpe gpt, for tokenizer and merges, a gpt
with every swap of the modern recipe, so their keys appear, and one on
GPT-2's tokenizer, read from a directory `tinygpt export` wrote, for the
gpt2_* keys; all with
AdamW, so optimizer.safetensors is written), reads the metadata keys of
their newest checkpoint's (checkpoint-<step>/) model.safetensors and
optimizer.safetensors and the keys of run.json and of the checkpoint's
log.json, and compares them with the tables of the section "### Metadata keys" (on
the one page of README.md and docs/*.md that has it), in order: the
model's keys, the run state's (both in model.safetensors),
optimizer.safetensors', run.json's, log.json's. A key a file holds and its table lacks
is a problem; so is a key a table lists that no file holds, unless it is
one tinygpt only reads (READ_ONLY: kept for files written by older
versions).

Exit status: the number of problems. Usage:
scripts/check_readme_keys.py [--tinygpt ./tinygpt] [--readme README.md] [--docs docs]
(README.md is also the text of the tiny runs.)
Python's standard library only.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from doc_pages import pages

# model.safetensors keys that tinygpt reads but no longer writes.
READ_ONLY = {"data"}
TINY = ["--steps", "1", "--embd", "8", "--heads", "1", "--context", "8", "--layers", "1", "--batch", "1",
        "--eval-batches", "1"]


def metadata(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return set(json.loads(f.read(n))["__metadata__"])


def key_tables(docs):
    """(page, the sets of backquoted names in the first column of each table
    of the section "### Metadata keys", in order). DOCS is [(path, text)];
    exactly one page must have the section, which ends at the next heading
    of level 2 or 3, or at the end of the page."""
    found = [(path, m) for path, text in docs
             for m in re.finditer(r"^### Metadata keys\n(.*?)(?=^##|\Z)", text, re.M | re.S)]
    if len(found) != 1:
        where = ", ".join(path for path, _ in found) or "none of " + ", ".join(path for path, _ in docs)
        sys.exit(f"check_readme_keys: {len(found)} sections '### Metadata keys' ({where}); expected one")
    page, m = found[0]
    tables, current = [], None
    for line in m.group(1).splitlines():
        if line.startswith("|"):
            if current is None:
                current = set()
                tables.append(current)
            first = line.split("|")[1]
            current |= set(re.findall(r"`([^`]+)`", first))
        else:
            current = None
    return page, tables


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", default="./tinygpt")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--docs", default="docs", help="the folder of the other pages (*.md)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="check_readme_keys.")
    # The bpe run has a budget of time too (its one step ends it first), for
    # the keys only a run of --time writes.
    # "char": nanoGPT's recipe, the gpt's defaults before make sweep's;
    # "defaults": today's (bpe up to 2048, RoPE, RMSNorm, ReLU², QK-norm,
    # untied head).
    # "nanogpt": a bpe gpt of GPT-2's parts, which `tinygpt export` writes
    # as a GPT-2 directory, whose tokenizer the "gpt2" run reads
    # (--tokenizer gpt2), for the gpt2_* keys.
    gpt2_dir = os.path.join(tmp, "gpt2-dir")
    runs = {"char": ["--tokenizer", "char", "--pos", "learned", "--tied-head", "--no-qk-norm", "--no-layernorm",
                     "--no-mlp", "--no-residual"],
            "bpe": ["--tokenizer", "bpe", "--vocab-size", "260", "--time", "600"],
            "defaults": [],
            "muon": ["--optimizer", "muon", "--mlp", "swiglu"],
            "nanogpt": ["--vocab-size", "260", "--norm", "layernorm", "--mlp", "gelu", "--pos", "learned",
                        "--tied-head", "--no-qk-norm"],
            "gpt2": ["--tokenizer", "gpt2", "--tokenizer-dir", gpt2_dir]}
    model, optimizer, run_info, log_mark = set(), set(), set(), set()
    for name, extra in runs.items():
        if name == "gpt2":
            r = subprocess.run([args.tinygpt, "export", "--model", os.path.join(tmp, "nanogpt", "model.safetensors"),
                                "--out", gpt2_dir], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"check_readme_keys: tinygpt export failed:\n{r.stderr}")
        out = os.path.join(tmp, name)
        r = subprocess.run([args.tinygpt, "train", args.readme, "--out", out, *TINY, *extra],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"check_readme_keys: the tiny {name} run failed:\n{r.stderr}")
        # The run's newest checkpoint: a directory checkpoint-<step>.
        newest = max((d for d in os.listdir(out) if d.startswith("checkpoint-") and d[11:].isdigit()),
                     key=lambda d: int(d[11:]))
        model |= metadata(os.path.join(out, newest, "model.safetensors"))
        optimizer |= metadata(os.path.join(out, newest, "optimizer.safetensors"))
        with open(os.path.join(out, "run.json"), encoding="utf-8") as f:
            run_info |= set(json.load(f))
        with open(os.path.join(out, newest, "log.json"), encoding="utf-8") as f:
            log_mark |= set(json.load(f))
    shutil.rmtree(tmp)

    page, tables = key_tables(pages(args.readme, args.docs))
    if len(tables) != 5:
        sys.exit(f"check_readme_keys: {page}, '### Metadata keys' has {len(tables)} tables; expected 5 "
                 "(model, run state, optimizer.safetensors, run.json, log.json)")
    problems = []
    for what, written, listed, read_only in [("model.safetensors", model, tables[0] | tables[1], READ_ONLY),
                                             ("optimizer.safetensors", optimizer, tables[2], set()),
                                             ("run.json", run_info, tables[3], set()),
                                             ("log.json", log_mark, tables[4], set())]:
        listed = listed - {"key"}
        for k in sorted(written - listed):
            problems.append(f"{page}, Metadata keys: {what} holds '{k}', which its table does not list")
        for k in sorted(listed - written - read_only):
            problems.append(f"{page}, Metadata keys: the {what} table lists '{k}', which tinygpt does not write")
    for p in problems:
        print(p)
    print(f"check_readme_keys: {len(model)} + {len(optimizer)} + {len(run_info)} + {len(log_mark)} keys, "
          f"{len(problems)} problems")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
