#!/usr/bin/env python3
"""bpe_reference.py: an independent byte-level BPE, to check src/io/bpe.c.

    bpe_reference.py learn FILE VOCAB_SIZE     print the merges ("left right ...")
    bpe_reference.py check --dump BPE_DUMP     compare with tests/bpe_dump.c

Standard library only. It is written to be obviously right, not fast, and
in a different shape from the C code wherever that is possible:
- chunks come from GPT-2's own regular expression (Python's re on bytes),
  with the classes of bpe.h spelled out as byte ranges;
- learning recounts every pair from scratch before each merge (the C code
  updates its counts as merges apply);
- encoding merges one occurrence at a time, the leftmost of the lowest-ranked
  pair (the C code merges every occurrence of that pair in one pass).
`make bpe-check` runs `check`: a few small texts, two vocabulary sizes each,
the merges compared token for token and the ids id for id.
"""
import os
import random
import re
import subprocess
import sys
import tempfile

BYTES = 256
MAX_TOKEN_BYTES = 256  # bpe.h's BPE_MAX_TOKEN_BYTES

# GPT-2's pattern with its Unicode classes made byte classes, as bpe.h has
# them: a letter is A-Z, a-z or any byte >= 0x80; a digit 0-9; \s (for a
# bytes pattern) is exactly " \t\n\r\f\v"; punctuation is everything else.
LETTER = rb"[A-Za-z\x80-\xff]"
DIGIT = rb"[0-9]"
PUNCT = rb"[^\sA-Za-z\x80-\xff0-9]"
CHUNK = re.compile(
    rb"'s|'t|'re|'ve|'m|'ll|'d| ?" + LETTER + rb"+| ?" + DIGIT + rb"+| ?" + PUNCT + rb"+|\s+(?!\S)|\s+"
)


def chunks(data):
    """The chunks of `data` (bytes), in order; together they are all of it."""
    found = CHUNK.findall(data)
    assert b"".join(found) == data, "the pattern skipped some bytes"
    return found


def merge_tokens(tokens, pair, new):
    """`tokens` with every `pair`, scanning left to right, replaced by `new`."""
    out, i = [], 0
    while i < len(tokens):
        if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


def learn(data, vocab_size):
    """The merges learned from `data`: a list of (left, right). Raises
    ValueError when no pair is left before the last merge."""
    words = {}
    for chunk in chunks(data):
        words[chunk] = words.get(chunk, 0) + 1
    words = [(list(chunk), count) for chunk, count in words.items()]
    length = [1] * BYTES  # every token's length in bytes
    merges = []
    for i in range(vocab_size - BYTES):
        counts = {}
        for tokens, count in words:
            for pair in zip(tokens, tokens[1:]):
                counts[pair] = counts.get(pair, 0) + count
        candidates = [(-c, pair) for pair, c in counts.items()
                      if length[pair[0]] + length[pair[1]] <= MAX_TOKEN_BYTES]
        if not candidates:
            raise ValueError(f"no pair left after {i} merges")
        _, best = min(candidates)  # the largest count, then the smallest (left, right)
        new = BYTES + i
        merges.append(best)
        length.append(length[best[0]] + length[best[1]])
        words = [(merge_tokens(tokens, best, new), count) for tokens, count in words]
    return merges


def encode(data, merges):
    """The ids of `data`: per chunk, merge the leftmost occurrence of the
    adjacent pair with the lowest merge number until none has one."""
    rank = {pair: i for i, pair in enumerate(merges)}
    cache, ids = {}, []
    for chunk in chunks(data):
        if chunk not in cache:
            tokens = list(chunk)
            while True:
                ranked = [(rank[p], i) for i, p in enumerate(zip(tokens, tokens[1:])) if p in rank]
                if not ranked:
                    break
                r, i = min(ranked)
                tokens[i:i + 2] = [BYTES + r]
            cache[chunk] = tokens
        ids.extend(cache[chunk])
    return ids


def merges_text(merges):
    return " ".join(f"{left} {right}" for left, right in merges)


# ---- The texts `check` compares on -------------------------------------------

def english_like(rng, size):
    """A slice of data/moby-dick.txt if it is there, else made-up prose."""
    path = os.path.join(os.path.dirname(__file__), "..", "data", "moby-dick.txt")
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        start = len(data) // 3
        return data[start:start + size]
    syllables = "the wha le sea ship cap tain a hab whi te and of to in his was that it he with".split()
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(2000)]
    out = []
    while sum(map(len, out)) < size:
        word = rng.choice(words[:rng.randint(1, len(words))])  # earlier words are more frequent
        out.append(word + rng.choice([" ", " ", " ", ", ", ".\n", ";\n\n"]))
    return "".join(out).encode()[:size]


def odd_text(rng, size):
    """Multi-byte UTF-8, invalid bytes, NULs, digits, contractions in both
    cases, punctuation runs and every kind of whitespace run."""
    pieces = [
        b"word", b"Words", b"caf\xc3\xa9", b"na\xc3\xafve", b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",
        b"\xe2\x80\x94", b"\xf0\x9f\x98\x80", b"\xff", b"\xc3", b"\x80\x80", b"\x00", b"\x00\x00a",
        b"1", b"42", b"2026", b"3.14", b"don't", b"it's", b"we're", b"I'LL", b"you've", b"'m", b"'d",
        b"''", b"'x", b"...", b"?!", b"--", b"(a)", b"\"q\"", b" ", b"  ", b"   ", b"\t", b"\n", b"\r\n",
        b"\n\n", b" \n", b"\n ", b"\t ", b" \t", b"\x0b", b"\x0c", b"=" * 40, b"#",
    ]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(pieces)
        if rng.random() < 0.5:
            out += b" "
    return bytes(out[:size]) + b"  \n "  # ends in a whitespace run


def tiny_alphabet(rng, size):
    """Few distinct letters: many pairs share a count, so ties decide."""
    return b" ".join(bytes(rng.choice(b"abc") for _ in range(rng.randint(1, 6)))
                     for _ in range(size // 4))[:size]


def long_runs(rng, size):
    """Lines of 1000 '=': the tokens grow to BPE_MAX_TOKEN_BYTES and stop."""
    out = bytearray()
    while len(out) < size:
        out += b"=" * 1000 + b"\n" + english_like(rng, 200) + b"\n"
    return bytes(out[:size])


def run_dump(dump, path, vocab_size):
    result = subprocess.run([dump, path, str(vocab_size)], capture_output=True)
    return result.returncode, result.stdout.decode(), result.stderr.decode()


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(dump, name, data, vocab_size, tmp):
    """Learn and encode `data` both ways; a list of what differs (empty if all agree)."""
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    status, out, err = run_dump(dump, path, vocab_size)
    try:
        merges = learn(data, vocab_size)
    except ValueError as e:
        refused = str(e)  # "no pair left after N merges"
        if status != 0 and f"after {refused.split()[-2]};" in err:
            return []  # both refuse, after the same number of merges
        return [f"{name} vocab {vocab_size}: Python refuses ({refused}), bpe_dump says ({status}): {err.strip()}"]
    if status != 0:
        return [f"{name} vocab {vocab_size}: bpe_dump failed ({status}): {err.strip()}"]
    c_merges_text, c_ids_text = out.split("\n")[:2]
    problems = []
    if c_merges_text != merges_text(merges):
        c_merges = [tuple(map(int, c_merges_text.split()[i:i + 2])) for i in range(0, len(c_merges_text.split()), 2)]
        i = first_difference(c_merges, merges)
        problems.append(f"{name} vocab {vocab_size}: merge {i} differs: C {c_merges[i:i + 3]}, Python {merges[i:i + 3]}"
                        f" ({len(c_merges)} and {len(merges)} merges)")
        return problems
    ids = encode(data, merges)
    c_ids = list(map(int, c_ids_text.split()))
    if c_ids != ids:
        i = first_difference(c_ids, ids)
        problems.append(f"{name} vocab {vocab_size}: id {i} of {len(ids)} differs: C {c_ids[i:i + 5]}, Python {ids[i:i + 5]}")
    return problems


def check(dump):
    rng = random.Random(13)
    texts = [
        ("english", english_like(rng, 60_000)),
        ("odd", odd_text(rng, 40_000)),
        ("tiny_alphabet", tiny_alphabet(rng, 4_000)),
        ("long_runs", long_runs(rng, 30_000)),
    ]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in texts:
            for vocab_size in (300, 400):
                found = compare(dump, name, data, vocab_size, tmp)
                print(f"bpe-check: {name} ({len(data)} bytes), vocab {vocab_size}: {'DIFFERS' if found else 'same merges, same ids'}")
                problems += found
        # Too little text: both must refuse, and the C message names the file.
        path = os.path.join(tmp, "too_small.txt")
        with open(path, "wb") as f:
            f.write(b"ab ab ba")
        status, _, err = run_dump(dump, path, 300)
        try:
            learn(b"ab ab ba", 300)
            problems.append("too_small: Python learned 44 merges from 8 bytes")
        except ValueError:
            pass
        if status == 0 or path not in err:
            problems.append(f"too_small: bpe_dump should fail naming {path}, got status {status}: {err.strip()}")
    for p in problems:
        print("bpe-check: MISMATCH: " + p, file=sys.stderr)
    if problems:
        return 1
    print("bpe-check: the C and Python BPE agree")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "learn":
        with open(argv[2], "rb") as f:
            print(merges_text(learn(f.read(), int(argv[3]))))
        return 0
    if len(argv) == 4 and argv[1] == "check" and argv[2] == "--dump":
        return check(argv[3])
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
