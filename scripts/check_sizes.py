#!/usr/bin/python3
"""check_sizes.py: is every room of the house still of a livable size?

A reader meets the README first and opens src/'s files one at a time, so
each is kept small enough to read in a sitting:

- README.md is at most 15 KB (15,360 bytes): the rest lives in docs/;
- no .c or .h file of src/ is over 500 lines, but the kernels' (src/kernels/:
  vector code that is read once, as a whole, by whoever tunes it);
- no script of scripts/ (and its folders) is over 800 lines.

Exit status: the number of rooms over their size. Usage:
scripts/check_sizes.py [--root .]
Python's standard library only.
"""
import argparse
import os
import sys

README_BYTES = 15 * 1024
SRC_LINES = 500
SCRIPT_LINES = 800


def lines(path):
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def files(top, endings, skip=()):
    for d, dirs, names in os.walk(top):
        dirs[:] = sorted(x for x in dirs if os.path.join(d, x) not in skip and x != "__pycache__")
        for name in sorted(names):
            if name.endswith(endings):
                yield os.path.join(d, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    root = ap.parse_args().root
    problems = []
    readme = os.path.join(root, "README.md")
    size = os.path.getsize(readme)
    if size > README_BYTES:
        problems.append(f"README.md: {size} bytes, over {README_BYTES}: move a section to docs/")
    src = os.path.join(root, "src")
    for path in files(src, (".c", ".h"), skip=(os.path.join(src, "kernels"),)):
        n = lines(path)
        if n > SRC_LINES:
            problems.append(f"{os.path.relpath(path, root)}: {n} lines, over {SRC_LINES}: split it by concept")
    for path in files(os.path.join(root, "scripts"), (".py", ".sh")):
        n = lines(path)
        if n > SCRIPT_LINES:
            problems.append(f"{os.path.relpath(path, root)}: {n} lines, over {SCRIPT_LINES}: split it by role")
    for p in problems:
        print(p)
    print(f"check_sizes: README.md {size} bytes; {len(problems)} rooms over their size")
    sys.exit(min(len(problems), 100))


if __name__ == "__main__":
    main()
