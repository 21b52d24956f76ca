#!/usr/bin/python3
"""check_learn_track.py: is the learner's track as short as it promises?

docs/learn.md walks a learner through the model in numbered stops; a stop
that starts "**Read**" names files of src/ by their links (../src/...), read
whole; from a line that says "*Look up*" to the stop's end, the files named
are tables to look names up in, not read, and not counted. Counting this page's lines down to a stop, then the lines of each
file it names, in order:

- the first derivation (the first "Backward, derived" a file holds) comes
  within FIRST_DERIVATION lines;
- the whole model, forward and backward (the stops above the comment
  "<!-- the whole model ends here -->"), within WHOLE_MODEL lines;
- every file the track names exists.

Exit status: the number of problems. Usage:
scripts/check_learn_track.py [--track docs/learn.md] [--root .]
Python's standard library only.
"""
import argparse
import os
import re
import sys

FIRST_DERIVATION = 300
WHOLE_MODEL = 2000
DERIVATION = "Backward, derived"
MODEL_END = "<!-- the whole model ends here -->"
LOOK_UP = "*Look up*"
STOP_RE = re.compile(r"^\s*\d+\. ")
LINK_RE = re.compile(r"\]\(\.\./(src/[^)#]+)\)")


def read_stops(track):
    """[(line number of the stop in the page, [files])] of the Read stops,
    and the page's line number of the model's end (or None)."""
    stops, model_end, current = [], None, None
    for number, line in enumerate(track.splitlines(), 1):
        if STOP_RE.match(line):
            current = None
            if line.split(". ", 1)[1].startswith("**Read**"):
                current = (number, [])
                stops.append(current)
        if MODEL_END in line and model_end is None:
            model_end = number
        if LOOK_UP in line:
            current = None
        if current is not None:
            current[1].extend(LINK_RE.findall(line))
    return stops, model_end


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--track", default="docs/learn.md")
    ap.add_argument("--root", default=".")
    args = ap.parse_args()
    stops, model_end = read_stops(open(args.track, encoding="utf-8").read())
    problems = []
    if not stops:
        problems.append(f"{args.track}: no stop starts with **Read**")
    if model_end is None:
        problems.append(f"{args.track}: no '{MODEL_END}'")
        model_end = 0

    read_so_far, first_derivation, whole_model = 0, None, None
    seen = set()
    for page_line, files in stops:
        if whole_model is None and page_line > model_end:
            whole_model = model_end + read_so_far
        for f in files:
            path = os.path.join(args.root, f)
            if not os.path.exists(path):
                problems.append(f"{args.track}: names {f}, which does not exist")
                continue
            if f in seen:
                continue
            seen.add(f)
            lines = open(path, encoding="utf-8").read().splitlines()
            if first_derivation is None:
                at = next((i for i, text in enumerate(lines, 1) if DERIVATION in text), None)
                if at is not None:
                    first_derivation = page_line + read_so_far + at
            read_so_far += len(lines)
    if whole_model is None:
        whole_model = model_end + read_so_far

    if first_derivation is None:
        problems.append(f"{args.track}: no file the track reads holds '{DERIVATION}'")
    elif first_derivation > FIRST_DERIVATION:
        problems.append(f"{args.track}: the first derivation comes {first_derivation} lines in, over {FIRST_DERIVATION}")
    if whole_model > WHOLE_MODEL:
        problems.append(f"{args.track}: the whole model takes {whole_model} lines, over {WHOLE_MODEL}")
    for p in problems:
        print(p)
    print(f"check_learn_track: the first derivation {first_derivation} lines in, the whole model {whole_model}; "
          f"{len(problems)} problems")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
