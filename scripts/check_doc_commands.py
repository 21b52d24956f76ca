#!/usr/bin/python3
"""check_doc_commands.py: does every command README.md and docs/ show run?

Reads every fenced code block (``` ... ```) of README.md and docs/*.md:

- A block tagged sh, shell, bash or console is shell. When any of its lines
  starts with "$ ", it is a transcript: those lines are its commands and
  the other lines their output, which is not compared. Otherwise every line
  is a command, blank lines and "# ..." comments aside. A line ending in
  "\\" goes on on the next.
- A block with any other tag, or none (text, python, c, ...), is not run.
  A line in it that reads as a tinygpt command ("tinygpt ...",
  "./tinygpt ...", "... | ./tinygpt ...", with or without "$ ") is a
  problem: tag the block sh so that it runs, or quote the command in prose
  as an excerpt.
- A command must exit 0, or N when the line ends in the comment "# exit N".
- `make ...` is not run (too slow): every target it names must be a
  target of the Makefile, and so must every target of a `make ...` quoted
  in the prose.
- No command, in a block or quoted in the prose as `tinygpt ...` or
  `make ...`, may name a file outside the repository: an absolute path
  (other than /dev/...), a path through "..", or one under "~".

Each block runs in a world of its own: a fresh copy, in a temporary
directory, of a stand-in made once:

- the repository's files (`git ls-files`, untracked ones included, ignored
  ones such as the fetched corpus left out);
- `./tinygpt`, and `tinygpt` on the PATH: the binary given by --tinygpt,
  through the adjustments below;
- `data/moby-dick.txt`: a stand-in for the corpus, about STANDIN_BYTES of
  lines of words, half of them from Moby-Dick's first sentence and half
  random letters (so bpe has pairs enough to learn 768 merges), drawn with
  a fixed seed, and last a line of every character of the real corpus
  (CORPUS_CHARS): a char model trained on it has the real one's 83 tokens,
  and knows the prompts it knows and refuses the ones it refuses;
- `runs/default`: the run `make run` leaves there, made small: a 1-block
  gpt (C 16, T 16) trained for 20 steps on the stand-in text
  (STANDIN_RUN), with its model.safetensors, best.safetensors, log.csv,
  loss.png, run.json and checkpoint-20/.

Its commands run in order, each by /bin/sh -c from the top of the world,
with standard input from /dev/null, no terminal, and at most TIMEOUT
seconds.

The adjustments, made by the `tinygpt` of the world (this script, run as
`check_doc_commands.py --wrap REAL ARGS...`), only shorten a run; nothing
else in a command is changed (tinygpt takes the last of a flag given
twice):

- `tinygpt train` without --resume: `--steps 5` is appended, unless the
  command asks for 5 steps or fewer;
- `tinygpt train --resume DIR --steps N`: `--steps S+5` is appended, S the
  step of DIR's newest checkpoint-<S>, when N is larger (without --steps,
  nothing is appended);
- `tinygpt train` without --peak: `--peak 100` is appended, so that it does
  not spend 0.1 s measuring the CPU's (the numbers are not compared);
- `tinygpt sample`: `--tokens 20` is appended, unless the command asks for
  20 tokens or fewer.

The blocks run two at a time (each in its own world), and their problems
are reported in the pages' order.

Exit status: the number of problems found. Usage:
scripts/check_doc_commands.py [--tinygpt ./tinygpt] [--readme README.md] [--docs docs] [--makefile Makefile]
Python's standard library only.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shlex
import shutil
import string
import subprocess
import sys
import tempfile

from doc_pages import pages

STANDIN_BYTES = 40000
OPENING = ("Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse, "
           "and nothing particular to interest me on shore, I thought I would sail about a little and see the "
           "watery part of the world.")
# Every character of data/moby-dick.txt (scripts/get_corpus.sh's), in code point order, but the newline.
CORPUS_CHARS = " !$&()*,-.0123456789:;?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz—‘’“”"
STANDIN_RUN = ["--steps", "20", "--layers", "1", "--embd", "16", "--heads", "2", "--context", "16",
               "--batch", "4", "--eval-interval", "10", "--eval-batches", "2"]
TRAIN_STEPS = 5       # a train command runs at most this many steps
RESUME_STEPS = 5      # a resumed one this many more
SAMPLE_TOKENS = 20    # a sample command generates at most this many tokens
PEAK_GFLOPS = 100     # the --peak a train command is given
WORKERS = 2           # blocks run at once
TIMEOUT = 120         # seconds, per command

SHELL_TAGS = {"sh", "shell", "bash", "console"}
FENCE_RE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")
TINYGPT_LINE_RE = re.compile(r"^(?:\$ )?(?:\w+=\S+\s+)*(?:\./)?tinygpt\s|\|\s*(?:\./)?tinygpt\s")
EXPECT_RE = re.compile(r"\s#\s*exit\s+(\d+)\b")
OPERATORS = {"|", "||", "&&", ";", "&", "|&", ";;"}
TINYGPT = {"tinygpt", "./tinygpt"}


# ---- the adjustments, made by the world's tinygpt ---------------------------

def last_value(args, flag):
    """The value of the last FLAG in ARGS as an int, or None."""
    value = None
    for i, a in enumerate(args[:-1]):
        if a == flag:
            try:
                value = int(args[i + 1])
            except ValueError:
                value = None
    return value


def newest_step(run_dir):
    steps = [int(d[11:]) for d in os.listdir(run_dir) if d.startswith("checkpoint-") and d[11:].isdigit()]
    return max(steps) if steps else None


def adjusted(args):
    """ARGS (a tinygpt command line after the program) with the flags that
    shorten its run appended, as the module's docstring says."""
    command = args[0] if args else ""
    if command == "train":
        if "--peak" not in args:
            args = args + ["--peak", str(PEAK_GFLOPS)]
        steps = last_value(args, "--steps")
        if "--resume" in args:
            run_dir = args[args.index("--resume") + 1] if args.index("--resume") + 1 < len(args) else ""
            start = newest_step(run_dir) if steps is not None and os.path.isdir(run_dir) else None
            if start is not None and steps > start + RESUME_STEPS:
                return args + ["--steps", str(start + RESUME_STEPS)]
        elif steps is None or steps > TRAIN_STEPS:
            return args + ["--steps", str(TRAIN_STEPS)]
    if command == "sample":
        tokens = last_value(args, "--tokens")
        if tokens is None or tokens > SAMPLE_TOKENS:
            return args + ["--tokens", str(SAMPLE_TOKENS)]
    return args


def wrap(real, args):
    """Run as the world's tinygpt: note the adjusted command in
    $DOC_CHECK_LOG for the report, then become the real tinygpt."""
    args = adjusted(args)
    log = os.environ.get("DOC_CHECK_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(shlex.join(["tinygpt", *args]) + "\n")
    os.execv(real, [real, *args])


# ---- reading the pages -------------------------------------------------------

def fenced_blocks(text):
    """[(line number of the block's first line, tag, [lines])]."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, tag, body = m.group(1), m.group(2).lower(), []
        j = i + 1
        while j < len(lines) and not lines[j].startswith(fence[0] * len(fence)):
            body.append(lines[j])
            j += 1
        blocks.append((i + 2, tag, body))
        i = j + 1
    return blocks


def prose(text):
    """TEXT with its fenced blocks blanked out (lines kept, for numbering)."""
    out, inside = [], None
    for line in text.splitlines():
        m = FENCE_RE.match(line)
        if inside is None and m:
            inside = m.group(1)
            out.append("")
        elif inside is not None:
            if line.startswith(inside[0] * len(inside)):
                inside = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def shell_commands(body, first):
    """[(line number, command)] of a shell block."""
    transcript = any(line.startswith("$ ") for line in body)
    commands, pending = [], None
    for n, line in enumerate(body, first):
        if pending is None:
            if transcript:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pending = (n, "")
        text = pending[1] + line.rstrip()
        if text.endswith("\\"):
            pending = (pending[0], text[:-1] + " ")
            continue
        commands.append((pending[0], text.strip()))
        pending = None
    if pending is not None:
        commands.append((pending[0], pending[1].strip()))
    return commands


def segments(command):
    """The simple commands of a shell line: [[words]], split at | ; && ...,
    or None when the line does not parse (unbalanced quotes)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    out, current = [], []
    for t in tokens:
        if t in OPERATORS:
            out.append(current)
            current = []
        else:
            current.append(t)
    out.append(current)
    return [s for s in out if s]


def program(words):
    """(program, its arguments) of a simple command, past VAR=value words."""
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_]\w*=", words[i]):
        i += 1
    return (words[i], words[i + 1:]) if i < len(words) else ("", [])


def outside(word):
    """Whether WORD names a path outside the repository."""
    value = word.split("=", 1)[1] if re.match(r"^(--[\w-]+|[A-Za-z_]\w*)=", word) else word
    if value.startswith("/"):
        return not value.startswith("/dev/")
    return value.startswith("~") or ".." in value.split("/")


def make_targets(makefile):
    """The targets of the Makefile's rules (pattern and variable ones left out)."""
    targets = set()
    for line in open(makefile, encoding="utf-8"):
        m = re.match(r"^([^\s#=:][^=:]*?)\s*:(?!=)", line)
        if m:
            targets |= {t for t in m.group(1).split() if "$" not in t and "%" not in t}
    return targets


def check_make(where, args, targets, problems):
    for a in args:
        if not a.startswith("-") and "=" not in a and a not in targets:
            problems.append(f"{where}: `make {' '.join(args)}`: the Makefile has no target '{a}'")


def check_paths(where, words, problems):
    for w in words:
        if outside(w):
            problems.append(f"{where}: '{w}' is outside the repository: an example may use only its files "
                            f"and what earlier commands make")


# ---- the world ---------------------------------------------------------------

def repo_files(top):
    r = subprocess.run(["git", "-C", top, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, text=True)
    if r.returncode == 0:
        return [p for p in r.stdout.split("\0") if p]
    skip = {".git", "build", "runs", "bench", "tinygpt"}
    return [os.path.relpath(os.path.join(d, f), top) for d, ds, fs in os.walk(top)
            for f in fs if os.path.relpath(d, top).split(os.sep)[0] not in skip
            and not (os.path.relpath(d, top) == "data" and f.endswith(".txt"))
            and not (d == top and f in skip)]


def standin_text():
    rng, words, lines, size = random.Random(18), OPENING.split(), [], 0
    while size < STANDIN_BYTES:
        line = " ".join(rng.choice(words) if rng.random() < 0.5 else
                        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
                        for _ in range(rng.randint(6, 14)))
        lines.append(line[0].upper() + line[1:])
        size += len(lines[-1].encode("utf-8")) + 1
    return "\n".join(lines) + "\n" + CORPUS_CHARS + "\n"


def make_world(base, top, real, bin_dir):
    for p in repo_files(top):
        src, dst = os.path.join(top, p), os.path.join(base, p)
        if os.path.isfile(src) and not os.path.islink(src):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(src, dst)
    os.makedirs(bin_dir)
    wrapper = os.path.join(bin_dir, "tinygpt")
    with open(wrapper, "w", encoding="utf-8") as f:
        f.write(f"#!/bin/sh\nexec /usr/bin/python3 {shlex.quote(os.path.abspath(__file__))} --wrap "
                f"{shlex.quote(real)} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    os.symlink(wrapper, os.path.join(base, "tinygpt"))
    os.makedirs(os.path.join(base, "data"), exist_ok=True)
    with open(os.path.join(base, "data", "moby-dick.txt"), "w", encoding="utf-8") as f:
        f.write(standin_text())
    r = subprocess.run([real, "train", "data/moby-dick.txt", "--out", "runs/default", *STANDIN_RUN],
                       cwd=base, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_doc_commands: could not train the stand-in run:\n{r.stderr}")


def run_block(base, scratch, bin_dir, commands):
    """Run COMMANDS ([(where, command, expected status)]) in a fresh copy of
    the world BASE, made in the directory SCRATCH; the problems found."""
    problems = []
    os.makedirs(scratch)
    world = os.path.join(scratch, "world")
    shutil.copytree(base, world, symlinks=True)
    log = os.path.join(scratch, "adjusted")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINYGPT_")}
    env.update(PATH=bin_dir + os.pathsep + env.get("PATH", "/usr/bin:/bin"), DOC_CHECK_LOG=log)
    for where, command, expected in commands:
        open(log, "w").close()
        try:
            r = subprocess.run(["/bin/sh", "-c", command], cwd=world, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
            status, err = r.returncode, r.stderr
        except subprocess.TimeoutExpired:
            status, err = f"no exit in {TIMEOUT} s", ""
        if status != expected:
            ran = open(log, encoding="utf-8").read().strip()
            tail = "\n".join("    " + line for line in err.strip().splitlines()[-3:])
            problems.append(f"{where}: `{command}` exited {status}, expected {expected}"
                            + (f"\n  ran as: {ran}" if ran else "") + (f"\n{tail}" if tail else ""))
    shutil.rmtree(scratch)
    return problems


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--wrap":
        wrap(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tinygpt", default="./tinygpt")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--docs", default="docs", help="the folder of the other pages (*.md)")
    ap.add_argument("--makefile", default="Makefile")
    args = ap.parse_args()
    real = os.path.abspath(args.tinygpt)
    if not os.access(real, os.X_OK):
        sys.exit(f"check_doc_commands: no program '{args.tinygpt}'; build it first (make tinygpt)")
    top = os.path.dirname(os.path.abspath(args.makefile))
    targets = make_targets(args.makefile)
    docs = pages(args.readme, args.docs)
    problems, to_run, n_make = [], [], 0

    for path, text in docs:
        # The prose: `make ...` and `tinygpt ...` quoted inline.
        body = prose(text)
        for m in re.finditer(r"`([^`]+)`", body):
            where = f"{path}:{body.count(chr(10), 0, m.start()) + 1}"
            words = m.group(1).split()
            if words[:1] == ["make"]:
                n_make += 1
                check_make(where, words[1:], targets, problems)
            if words[:1] == ["make"] or words[:1] and words[0] in TINYGPT:
                check_paths(where, words, problems)
        # The blocks.
        for first, tag, lines in fenced_blocks(text):
            if tag not in SHELL_TAGS:
                for n, line in enumerate(lines, first):
                    if TINYGPT_LINE_RE.search(line):
                        problems.append(f"{path}:{n}: a tinygpt command in a block tagged '{tag or 'nothing'}', "
                                        "which is not run: tag the block sh, or quote it in prose as an excerpt")
                continue
            block = []
            for n, command in shell_commands(lines, first):
                where = f"{path}:{n}"
                simple = segments(command)
                if simple is None:
                    problems.append(f"{where}: `{command}` does not parse as a shell command")
                    continue
                check_paths(where, [w for s in simple for w in s], problems)
                makes = [rest for name, rest in map(program, simple) if name == "make"]
                for rest in makes:
                    n_make += 1
                    check_make(where, rest, targets, problems)
                if makes and len(makes) < len(simple):
                    problems.append(f"{where}: `{command}`: a make command, which is not run, must be a line of its own")
                if makes:
                    continue
                m = EXPECT_RE.search(command)
                block.append((where, command, int(m.group(1)) if m else 0))
            if block:
                to_run.append(block)

    tmp = tempfile.mkdtemp(prefix="check_doc_commands.")
    try:
        base, bin_dir = os.path.join(tmp, "base"), os.path.join(tmp, "bin")
        make_world(base, top, real, bin_dir)
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            found = pool.map(lambda i: run_block(base, os.path.join(tmp, f"block{i}"), bin_dir, to_run[i]),
                             range(len(to_run)))
            for block_problems in found:
                problems += block_problems
    finally:
        shutil.rmtree(tmp)
    for p in problems:
        print(p)
    n_run = sum(len(b) for b in to_run)
    print(f"check_doc_commands: {n_run} commands run in {len(to_run)} blocks of {len(docs)} pages, "
          f"{n_make} make commands checked, {len(problems)} problems")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
