#!/usr/bin/python3
"""check_spills.py: do the register tiles keep their accumulators in registers?

A register tile (src/kernels/tile.h) is fast only while every accumulator
is a register: one kept on the stack turns each multiply-add into a load, a
multiply-add and a store, and the product runs at a few percent of the
peak (issue 44: vec16 accumulators on an AVX2 build, 13,039 stack moves).
This disassembles each object given (objdump, or OBJDUMP for another
architecture's) and finds its innermost loops that hold a fused
multiply-add (vfmadd on x86, fmla on aarch64; in a build without FMA, a
vector multiply): a backward branch with no
other backward branch inside. In each it counts the vector moves to or from
the stack (%rsp, or %rbp where it is the frame pointer, on x86; sp or x29
on aarch64) and fails on any.

Usage: scripts/check_spills.py [--objdump PROGRAM] OBJECT[:FUNCTIONS]...
where FUNCTIONS, a regular expression, limits the check to the functions
whose names it matches (attention_fast.o's head tiles, not the loops the
compiler vectorised around them).
Exit status: the number of loops with stack moves (0: clean). Python's
standard library only.
"""
import argparse
import re
import subprocess
import sys

BRANCH_RE = re.compile(r"^(j\w+|b\.\w+|b|cbn?z|tbn?z)\s+.*?([0-9a-f]+) <")
FMA_RE = re.compile(r"^(vfn?m(add|sub)|fml[as]\b|fmla|fmadd)")
# A build without FMA instructions (the portable build's x86-64 baseline)
# multiplies, then adds: its tiles are the loops with a vector multiply.
MULTIPLY_RE = re.compile(r"^v?mulps\b")
STACK_RE = re.compile(r"\(%rsp\)|\[(sp|x29)\b")
# %rbp is the stack's frame only in a function that sets it up so; -O3
# code elsewhere uses it as one more pointer (to B's rows, say).
FRAME_RE = re.compile(r"\(%rbp\)")
VECTOR_RE = re.compile(r"%[xyz]mm\d+|\bq\d+\b|\bv\d+\.")


def instructions(objdump, path):
    """[(address, text, function)] of the object's code."""
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", path], capture_output=True, text=True, check=True).stdout
    found, function = [], None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            function = m.group(2)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(.*)$", line)
        if m:
            found.append((int(m.group(1), 16), m.group(2).strip(), function))
    return found


def backward_target(address, text):
    m = BRANCH_RE.match(text)
    if m and int(m.group(2), 16) < address:
        return int(m.group(2), 16)
    return None


def framed_functions(code):
    """The functions that make %rbp their frame pointer (mov %rsp,%rbp)."""
    return {function for _, text, function in code if re.match(r"mov\s+%rsp,%rbp$", text)}


def innermost_loops(code, pattern):
    """[(function, start, end, body)] of the innermost loops holding an
    instruction that matches "pattern"."""
    loops = []
    for i, (address, text, function) in enumerate(code):
        start = backward_target(address, text)
        if start is None:
            continue
        body = [(a, t) for a, t, _ in code if start <= a <= address]
        inner = any(backward_target(a, t) is not None and backward_target(a, t) >= start for a, t in body[:-1])
        if inner or not any(pattern.match(t) for _, t in body):
            continue
        loops.append((function, start, address, [t for _, t in body]))
    return loops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objdump", default="objdump")
    parser.add_argument("objects", nargs="+")
    args = parser.parse_args()
    bad = 0
    for spec in args.objects:
        path, _, only = spec.partition(":")
        code = [(a, t, f) for a, t, f in instructions(args.objdump, path) if not only or re.match(only, f or "")]
        framed = framed_functions(code)
        loops, kind = innermost_loops(code, FMA_RE), "FMA"
        if not loops:
            loops, kind = innermost_loops(code, MULTIPLY_RE), "multiply (no FMA)"
        spilled = 0
        for function, start, end, body in loops:
            on_stack = lambda t: STACK_RE.search(t) or (function in framed and FRAME_RE.search(t))
            moves = [t for t in body if on_stack(t) and VECTOR_RE.search(t)]
            if moves:
                spilled += 1
                print(f"check_spills: {path}: {function} {start:x}-{end:x}: {len(moves)} vector moves to or from "
                      f"the stack in a loop of {len(body)} instructions, e.g. {moves[0]}", file=sys.stderr)
        if not loops:
            print(f"check_spills: {path}: no loop with a vector multiply: not a kernel's object?", file=sys.stderr)
            spilled += 1
        print(f"check_spills: {path}: {len(loops)} innermost {kind} loops, {spilled} with vector stack moves")
        bad += spilled
    return min(bad, 125)


if __name__ == "__main__":
    sys.exit(main())
