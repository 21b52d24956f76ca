"""Texts and token ids as tinygpt reads them, and its batches: sequential
batches (--order sequential), its validation windows, its validation split,
and the synthetic text parity trains on when given none.
"""

import array
import math
import random
import struct

import torch


def encode(text, vocab):
    """Token ids of "text": a character's id is its index in "vocab"."""
    to_id = {ch: i for i, ch in enumerate(vocab)}
    missing = sorted(set(text) - set(to_id))
    if missing:
        raise ValueError(f"characters not in the checkpoint's vocab: {missing[:10]}")
    return [to_id[ch] for ch in text]


def float32(x):
    """"x" rounded to the nearest float32, as tinygpt holds its float flags."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def read_tokens(path, vocab):
    """The token ids of text file "path" in "vocab"."""
    # newline="": keep "\r\n" as two tokens, as tinygpt reads the raw bytes.
    with open(path, encoding="utf-8", newline="") as f:
        return encode(f.read(), vocab)


def read_ids(path, vocab):
    """The token ids of text file "path" in "vocab" as an array of int32, like
    tinygpt's token array (a Python list would add tens of MB)."""
    to_id = {ch: i for i, ch in enumerate(vocab)}
    with open(path, encoding="utf-8", newline="") as f:
        return array.array("i", (to_id[ch] for ch in f.read()))


def random_batch(tokens, B, T):
    """B windows of T+1 tokens at random places of "tokens" (a 1-D tensor),
    as nanoGPT's get_batch draws them; returns (inputs, targets) [B,T]."""
    starts = torch.randint(len(tokens) - T, (B, 1))
    window = tokens[starts + torch.arange(T + 1)].long()
    return window[:, :-1].contiguous(), window[:, 1:].contiguous()


def n_val_tokens(n_tokens, val_fraction):
    """How many tokens, at the end of the text, tinygpt keeps for validation:
    floor(n_tokens * F), F being --val-fraction as the float32 it is parsed to."""
    return math.floor(n_tokens * float32(val_fraction))


def spread_windows(tokens, most, B, T):
    """tinygpt's validation windows (train.c, validation_loss; data.c,
    batch_spread): of the W = (n - 1) // T whole windows of "tokens" laid end
    to end, K = min(W, most), row r being window floor(r * W / K); as
    batches of up to B rows [(inputs, targets)], the last one shorter."""
    windows = (len(tokens) - 1) // T
    chosen = min(windows, most)
    starts = [(r * windows // chosen) * T for r in range(chosen)]
    batches = []
    for first in range(0, chosen, B):
        rows = starts[first:first + B]
        batches.append((torch.tensor([tokens[s:s + T] for s in rows]),
                        torch.tensor([tokens[s + 1:s + T + 1] for s in rows])))
    return batches


def sequential_batch(train_tokens, step, B, T):
    """Batch number "step" of tinygpt's --order sequential; returns (inputs, targets) [B,T].

    Row b starts at ((step*B + b) * T) mod (n_train - T).
    """
    n = len(train_tokens)
    inputs, targets = [], []
    for b in range(B):
        start = ((step * B + b) * T) % (n - T)
        inputs.append(train_tokens[start:start + T])
        targets.append(train_tokens[start + 1:start + T + 1])
    return torch.tensor(inputs), torch.tensor(targets)


def synthetic_text(n_chars=6000, seed=1234):
    """A deterministic English-like text of about "n_chars" characters.

    Sentences of words from a fixed list, with a seeded random.Random, so
    the parity check needs neither the network nor a corpus on disk. A few
    em-dashes and curly apostrophes make some tokens multi-byte UTF-8.
    """
    words = ("the sea whale ship captain sailed over a dark and quiet night "
             "when all hands stood on deck to watch white water rise far "
             "beyond old harbour men said it was strange but true that no "
             "one ever saw such wind again").split()
    rng = random.Random(seed)
    lines, line = [], ""
    while sum(len(l) + 1 for l in lines) < n_chars:
        sentence = [rng.choice(words) for _ in range(rng.randint(4, 12))]
        sentence[0] = sentence[0].capitalize()
        if rng.random() < 0.2:
            sentence[rng.randrange(len(sentence))] += "\u2019s"       # ’s
        if rng.random() < 0.2:
            sentence.insert(rng.randrange(1, len(sentence)), "\u2014")  # —
        for word in " ".join(sentence).split(" ") + ["."]:
            if word == ".":
                line += "."
            elif len(line) + 1 + len(word) > 70:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines) + "\n"
