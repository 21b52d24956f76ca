#!/usr/bin/python3
"""check_readme_flags.py: do README.md and docs/ document every flag tinygpt accepts?

The flag tables in src/commands/*.c print --help, so --help is the truth
and the documentation is what drifts. For every command `tinygpt --help`
lists, this reads `tinygpt COMMAND --help` and checks that command's flag
table (the markdown table right after a line `<!-- flags: COMMAND -->`, on
whichever page of README.md and docs/*.md holds it; one table per command):

- every flag --help shows is a row of the table, and every row is a flag
  --help shows (--help and --version are documented once, for all
  commands, in "Commands");
- a default --help states is in the row's default column, with the same
  numbers (1e-3 and 0.001 are the same number) and the same words in
  backquotes ("gpt 12, card 32" is `12 / 32`);
- a range the row states ("in [257, 65536]", "in [0, 1)") is the one
  tinygpt holds the flag to: just past a closed end and at an open end it
  refuses the value as out of range, at a closed end and just inside an
  open one it does not;
- each command has a row in README.md's Commands table, and a flag named
  in that row is one of its flags;
- no `--flag` anywhere in README.md or docs/ is unknown to every command, apart
  from the other programs' flags listed in OTHER_PROGRAMS and the flag the
  worked example of "Adding a setting" adds (EXAMPLE_FLAGS).

Exit status: the number of problems found (0: the documentation is true).
Usage: scripts/check_readme_flags.py [--tinygpt ./tinygpt] [--readme README.md] [--docs docs]
Python's standard library only.
"""
import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile

from doc_pages import pages

# Flags the documentation names that belong to other programs: scripts/setup.sh,
# scripts/torch_reference.py, scripts/ladder.py and scripts/hf_gpt2.py, valgrind, mpirun.
# The flag docs/contributing.md, "Adding a setting", shows how to add.
EXAMPLE_FLAGS = {"--adam-eps"}
OTHER_PROGRAMS = {"--python", "--quiet", "--sanitize", "--configs", "--rounds", "--tinygpt", "--data",
                  "--leak-check", "--mpi", "--arm", "--qemu", "--oversubscribe", "--hostfile", "--allow-run-as-root", "--bind-to",
                  "--map-by", "--dtype", "--positions", "--text", "--tokenizer-from", "--vocab"}
# Every command has these two; the README says so once, not per table.
EVERY_COMMAND = {"--help", "--version"}
# Numbers the probes' output directories, so a probe that trains starts afresh.
PROBES = itertools.count()

FLAG_RE = re.compile(r"--[a-z][a-z0-9-]*")
NUMBER_RE = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?")


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def commands(tinygpt):
    """The command names of `tinygpt --help`, in order."""
    out = run([tinygpt, "--help"]).stdout
    names, inside = [], False
    for line in out.splitlines():
        if line.startswith("commands:"):
            inside = True
        elif inside and re.match(r"^  [a-z]+  ", line):
            names.append(line.split()[0])
        elif inside and line.strip() == "":
            break
    return names


def help_flags(tinygpt, command):
    """{flag: default text or None} of `tinygpt COMMAND --help`."""
    out = run([tinygpt, command, "--help"]).stdout
    flags = {}
    for line in out.splitlines():
        m = re.match(r"^  (--[a-z0-9-]+)", line)
        if not m:
            continue
        d = re.search(r"\(default:? ((?:[^()]|\([^()]*\))*)\)\s*$", line)
        flags[m.group(1)] = d.group(1) if d else None
    return flags


def rejected(tinygpt, command, context, flag, value):
    """Whether `tinygpt COMMAND CONTEXT... FLAG VALUE` refuses VALUE as out of
    range. CONTEXT is what the command needs to get as far as checking it
    (train: a text and tiny sizes, so that an accepted value trains nothing
    for long; sample: a model); a flag in CONTEXT that is FLAG is left out."""
    args, i = [], 0
    while i < len(context):
        if context[i] == flag:
            i += 2
            continue
        args.append(context[i])
        i += 1
    args = [a.replace("{n}", str(next(PROBES))) for a in args]
    err = run([tinygpt, command, *args, flag, str(int(value)) if value.is_integer() else repr(value)]).stderr
    return flag in err and "out of range" in err


def cells(row):
    """The cells of a markdown table row; `\\|` is a pipe inside a cell."""
    parts = re.split(r"(?<!\\)\|", row.strip())
    return [p.strip() for p in parts[1:-1]]


def marked_tables(docs, problems):
    """{command: [("page:line", [cells])]} of every table after a marker, on
    any page of DOCS ([(path, text)]); a second table for one command is a
    problem."""
    tables, marker_at = {}, {}
    for path, text in docs:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"^<!-- flags: ([a-z]+) -->$", line.strip())
            if not m:
                continue
            if m.group(1) in marker_at:
                problems.append(f"{path}:{i + 1}: a second flag table for '{m.group(1)}' "
                                f"(the first is at {marker_at[m.group(1)]})")
                continue
            marker_at[m.group(1)] = f"{path}:{i + 1}"
            rows, j = [], i + 1
            while j < len(lines) and not lines[j].startswith("|"):
                j += 1
            for k in range(j + 2, len(lines)):  # skip the header and the |---| line
                if not lines[k].startswith("|"):
                    break
                rows.append((f"{path}:{k + 1}", cells(lines[k])))
            tables[m.group(1)] = rows
    return tables


def numbers(text):
    return sorted({float(x) for x in NUMBER_RE.findall(text)})


def check_default(command, flags, help_defaults, default_cell, where, problems):
    stated = [d for d in help_defaults if d is not None]
    if not stated:
        return
    if not default_cell:
        problems.append(f"{where}: {command} {', '.join(flags)}: --help gives a default ({'; '.join(stated)}), the table none")
        return
    want = sorted({x for d in stated for x in numbers(d)})
    if numbers(default_cell) != want:
        problems.append(f"{where}: {command} {', '.join(flags)}: default '{default_cell}' in the table, "
                        f"'{'; '.join(stated)}' in --help")
    help_words = set(re.findall(r"[\w./-]+", " ".join(stated)))
    quoted = " ".join(re.findall(r"`([^`]+)`", default_cell))
    for word in re.findall(r"[\w./-]+", quoted):
        if word not in help_words and not numbers(word):
            problems.append(f"{where}: {command} {', '.join(flags)}: default `{word}` in the table is not in "
                            f"--help's '{'; '.join(stated)}'")


def check_range(tinygpt, command, context, flag, meaning, where, problems):
    """A range "in [a, b]" a table states must be the one tinygpt holds the
    flag to: a value just past a closed end, and an open end itself, are
    refused as out of range; a closed end itself, and a value just inside an
    open one, are not (the command may still stop on something else, or run:
    CONTEXT keeps that short)."""
    m = re.search(r"\bin ([\[(])\s*(-?[\d.e]+),\s*(-?[\d.e]+)\s*([\])])", meaning)
    if not m:
        return
    lo, hi = float(m.group(2)), float(m.group(3))
    step = 1.0 if lo.is_integer() and hi.is_integer() else 1e-3
    open_lo, open_hi = m.group(1) == "(", m.group(4) == ")"
    outside = [lo if open_lo else lo - step, hi if open_hi else hi + step]
    inside = [lo + step if open_lo else lo, hi - step if open_hi else hi]
    for value in outside:
        if not rejected(tinygpt, command, context, flag, value):
            problems.append(f"{where}: {command} {flag}: the table says {m.group(0)[3:]}, but {value:g} is not refused as out of range")
    for value in inside:
        if rejected(tinygpt, command, context, flag, value):
            problems.append(f"{where}: {command} {flag}: the table says {m.group(0)[3:]}, but {value:g} is refused as out of range")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", default="./tinygpt")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--docs", default="docs", help="the folder of the other pages (*.md)")
    args = ap.parse_args()
    docs = pages(args.readme, args.docs)
    readme = docs[0][1]
    everything = "\n".join(text for _, text in docs)
    problems = []
    tables = marked_tables(docs, problems)
    known = set(EVERY_COMMAND)
    tmp = tempfile.mkdtemp(prefix="check_readme_flags.")
    tiny = ["--steps", "0", "--embd", "8", "--heads", "1", "--context", "8", "--layers", "1", "--batch", "1",
            "--eval-batches", "1"]
    model_dir = os.path.join(tmp, "model")
    made = run([args.tinygpt, "train", args.readme, "--out", model_dir, *tiny])
    if made.returncode != 0:
        sys.exit(f"check_readme_flags: could not train the tiny model the sample probes need:\n{made.stderr}")
    contexts = {"train": [args.readme, "--out", os.path.join(tmp, "probe{n}"), *tiny],
                "sample": ["--model", os.path.join(model_dir, "model.safetensors"), "--tokens", "1"]}
    names = commands(args.tinygpt)
    if not names:
        sys.exit(f"check_readme_flags: '{args.tinygpt} --help' lists no commands; build it first (make tinygpt)")
    for command in names:
        flags = help_flags(args.tinygpt, command)
        known |= set(flags)
        documented = set(flags) - EVERY_COMMAND
        if command not in tables:
            problems.append(f"{args.readme}, {args.docs}/*.md: no flag table for '{command}' "
                            f"(a table after '<!-- flags: {command} -->')")
            continue
        seen = set()
        for where, row in tables[command]:
            row_flags = FLAG_RE.findall(row[0]) if row else []
            for f in row_flags:
                if f not in flags:
                    problems.append(f"{where}: {command} has no flag {f} (not in '{command} --help'): remove the row or fix its name")
            row_flags = [f for f in row_flags if f in flags]
            seen |= set(row_flags)
            if len(row) < 3 or not row_flags:
                continue
            check_default(command, row_flags, [flags[f] for f in row_flags], row[1], where, problems)
            for f in row_flags:
                check_range(args.tinygpt, command, contexts.get(command, []), f, row[2], where, problems)
        for f in sorted(documented - seen):
            problems.append(f"{command} {f} (in --help) has no row in the {command} flag table "
                            f"(after '<!-- flags: {command} -->')")
        synopsis = [line for line in readme.splitlines() if line.startswith(f"| `tinygpt {command} ")]
        if not synopsis:
            problems.append(f"{args.readme}: the Commands table has no row for 'tinygpt {command}'")
        for line in synopsis:
            for f in FLAG_RE.findall(cells(line)[0]):
                if f not in flags:
                    problems.append(f"{args.readme}: the Commands row of {command} names {f}, which '{command} --help' does not list")
    for f in EVERY_COMMAND:
        if f not in everything:
            problems.append(f"{args.readme}, {args.docs}/*.md: {f} (every command has it) is not mentioned")
    for path, text in docs:
        for f in sorted(set(FLAG_RE.findall(text)) - known - OTHER_PROGRAMS - EXAMPLE_FLAGS):
            problems.append(f"{path}: {f} is no flag of any command (renamed or removed?)")
    shutil.rmtree(tmp)
    for p in problems:
        print(p)
    print(f"check_readme_flags: {len(names)} commands, {len(problems)} problems")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
