#!/usr/bin/python3
"""check_reading_order.py: can src/ be read in docs/reading-order.md's order?

docs/reading-order.md numbers the files of src/ in the order a
newcomer should read them (`1. base/common.h/.c: ...`; an entry may name
several files, and a file read between two numbers takes a letter: 3b).
This checks that the order is one a reader can follow:

- every .c and .h file of src/*/ is in the list exactly once, and every
  file the list names exists;
- the entries' numbers increase down the list;
- no forward reference: each `#include "x.h"` of a file names a header of
  src/ listed in the same entry or an earlier one (headers that are not in
  src/, such as the generated version.h, are not part of the reading);
- each header (and a .c file without one, such as main.c) says where it
  sits: a comment "Reading order: ... file N ..." whose first "file N" is
  its number in the list; a .c file that says it too must agree;
- a comment that gives another file's number ("json.h (file 16)") gives
  the list's.

Exit status: the number of problems found. Usage:
scripts/check_reading_order.py [--order docs/reading-order.md] [--src src]
Python's standard library only.
"""
import argparse
import os
import re
import sys

ENTRY_RE = re.compile(r"^(\d+)([a-z]?)\. (.*)$")
PATH_RE = re.compile(r"`([a-z0-9_]+/[a-z0-9_]+)\.(h/\.c|h|c)`")  # digits too: base/utf8
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
LABEL_RE = re.compile(r"\bfile (\d+[a-z]?)\b")
# Another file's number, as comments give it: "tokenizer.h (file 3b)".
MENTION_RE = re.compile(r"\b([a-z0-9_]+\.[ch]) \(file (\d+[a-z]?)\)")


def reading_list(text):
    """[(label, [paths])] of the list's numbered entries."""
    entries = []
    for line in text.splitlines():
        e = ENTRY_RE.match(line)
        if not e:
            continue
        paths = []
        for stem, ext in PATH_RE.findall(e.group(3)):
            paths += [stem + ".h", stem + ".c"] if ext == "h/.c" else [f"{stem}.{ext}"]
        entries.append(((int(e.group(1)), e.group(2)), paths))
    return entries


def stated_label(text):
    """The first "file N" of the file's "Reading order:" comment, or None if
    it has no such comment, or "" if the comment names no number."""
    m = re.search(r"Reading order:(.*\n.*)", text)
    if not m:
        return None
    label = LABEL_RE.search(m.group(1))
    return label.group(1) if label else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--order", default="docs/reading-order.md")
    ap.add_argument("--src", default="src")
    args = ap.parse_args()
    entries = reading_list(open(args.order, encoding="utf-8").read())
    where = args.order
    problems = []

    position, label_of = {}, {}  # path -> entry index; path -> "3b"
    for i, ((number, letter), paths) in enumerate(entries):
        if i > 0 and (number, letter) <= entries[i - 1][0]:
            prev = entries[i - 1][0]
            problems.append(f"{where}: entry {number}{letter} comes after {prev[0]}{prev[1]}: the numbers must increase")
        for p in paths:
            if p in position:
                problems.append(f"{where}: {p} is listed twice (entries {label_of[p]} and {number}{letter})")
            position[p], label_of[p] = i, f"{number}{letter}"

    files = sorted(os.path.relpath(os.path.join(d, f), args.src)
                   for d, _, fs in os.walk(args.src) for f in fs if f.endswith((".c", ".h")))
    for p in sorted(set(position) - set(files)):
        problems.append(f"{where}: the reading order names {p}, which is not in {args.src}/")
    for p in files:
        if p not in position:
            problems.append(f"{where}: {args.src}/{p} is missing from the reading order")

    header_of = {os.path.basename(p): p for p in files if p.endswith(".h")}
    for p in files:
        if p not in position:
            continue
        text = open(os.path.join(args.src, p), encoding="utf-8").read()
        for inc in INCLUDE_RE.findall(text):
            dep = header_of.get(os.path.basename(inc))
            if dep and dep in position and position[dep] > position[p]:
                problems.append(f"{args.src}/{p} (file {label_of[p]}) includes {inc}, which the reading order lists "
                                f"later (file {label_of[dep]}): a forward reference")
        for name, said in MENTION_RE.findall(text):
            other = next((q for q in position if os.path.basename(q) == name), None)
            if other and label_of[other] != said:
                problems.append(f"{args.src}/{p}: mentions {name} (file {said}), which the reading order lists as file {label_of[other]}")
        label = stated_label(text)
        has_header = p.endswith(".c") and p[:-2] + ".h" in position
        if label is None:
            if not has_header:
                problems.append(f"{args.src}/{p}: no 'Reading order: file {label_of[p]}' comment")
        elif label != label_of[p]:
            said = f"file {label}" if label else "no number"
            problems.append(f"{args.src}/{p}: its 'Reading order:' comment says {said}, the reading order file {label_of[p]}")

    for p in problems:
        print(p)
    print(f"check_reading_order: {len(files)} files in {len(entries)} entries, {len(problems)} problems")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
