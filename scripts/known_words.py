#!/usr/bin/python3
"""known_words.py: how many of a sample's words are words of the corpus?

A first measure of whether a model writes the language of its text or
invents it: the sample's words (runs of letters, apostrophes inside a word
kept, compared without case), and the share of them that occur anywhere in
the corpus. `make run` prints it under its sample.

    /usr/bin/python3 scripts/known_words.py SAMPLE CORPUS [--prompt TEXT] [--json]

SAMPLE is a file, or - for standard input. The prompt's words, which the
model did not write, are left out when --prompt gives it (the sample
starts with it). Prints "N of M words (P%) occur in CORPUS" on stdout, or a
JSON object with "known", "words" and "percent". Python's standard library
only.
"""

import argparse
import json
import re
import sys

WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)*")


def words(text):
    """The words of "text", lower-cased, in order."""
    return [w.lower().replace("\u2019", "'") for w in WORD.findall(text)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sample")
    ap.add_argument("corpus")
    ap.add_argument("--prompt", default="", help="the text the sample starts with, not the model's")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        if args.sample == "-":
            sample = sys.stdin.read()
        else:
            with open(args.sample, encoding="utf-8", errors="replace") as f:
                sample = f.read()
        with open(args.corpus, encoding="utf-8", errors="replace") as f:
            vocabulary = set(words(f.read()))
    except OSError as e:
        sys.exit(f"known_words.py: {e.filename}: {e.strerror}")
    if args.prompt and sample.startswith(args.prompt):
        sample = sample[len(args.prompt):]
    written = words(sample)
    known = sum(w in vocabulary for w in written)
    percent = 100.0 * known / len(written) if written else 0.0
    if args.json:
        print(json.dumps({"known": known, "words": len(written), "percent": round(percent, 1)}))
    else:
        print(f"{known} of {len(written)} words ({percent:.0f}%) occur in {args.corpus}")


if __name__ == "__main__":
    main()
