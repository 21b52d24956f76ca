#!/usr/bin/python3
"""torch_reference.py: an independent PyTorch implementation of tinygpt's models.

It is written from the models' descriptions (README.md, src/model.h), not from
the C code, and checks the C program from the outside: it reads the
checkpoints tinygpt writes, replays the same training batches in float64 with
autograd, and compares the losses, the final weights and (for the GPT) the
loss `tinygpt eval` reports, also on a GPT checkpoint written here with
weights of order 1. `bench` times tinygpt against the same models
written as ordinary nn.Modules, and writes a markdown report.

    /usr/bin/python3 scripts/torch_reference.py parity --tinygpt ./tinygpt [--data FILE] [--only card|gpt]
    /usr/bin/python3 scripts/torch_reference.py selftest
    /usr/bin/python3 scripts/torch_reference.py bench --tinygpt ./tinygpt [--data FILE] [--out FILE]
                                                      [--configs S,M,L,gpt]

Run it with Debian's Python (/usr/bin/python3) and python3-torch; install them
with `scripts/setup.sh --python`.

Shape alphabet as in src/model.h: B batch, T context, C channels, NH heads,
HS = C / NH head size, V vocabulary, L layers.

The card model (`tinygpt train --arch card`):
    x      = tok_emb.weight[idx] + pos_emb.weight[:T]            [B,T,C]
    q,k,v  = x @ Wq^T, x @ Wk^T, x @ Wv^T  (no bias)              [B,T,C]
    per head h (channels h*HS .. (h+1)*HS):
      att  = softmax(causal_mask(q_h k_h^T / sqrt(HS)))          [B,NH,T,T]
      att  = dropout(att)   (inverted dropout, training only)
      y_h  = att @ v_h
    y      = heads concatenated                                   [B,T,C]
    out    = y @ Wproj^T + bproj                                  [B,T,C]
    logits = out @ Whead^T + bhead                                [B,T,V]
    loss   = mean cross-entropy over the B*T positions
No residual connection, no layer norm, no MLP.

The GPT (`tinygpt train --arch gpt`, nanoGPT with bias=False):
    x      = dropout(tok_emb.weight[idx] + pos_emb.weight[:T])   [B,T,C]
    for each block i in 0..L-1:
      x    = x + dropout(attn.proj(attention(ln1(x))))            the attention above, no bias
      x    = x + dropout(mlp.proj(gelu(mlp.fc(ln2(x)))))          fc [4C,C], proj [C,4C], no bias
    logits = ln_f(x) @ tok_emb.weight^T                          [B,T,V] tied head
    loss   = mean cross-entropy
LayerNorm has a weight and no bias (eps 1e-5); gelu is the exact one (erf).
Both are trained with plain SGD.
"""

import argparse
import array
import collections
import csv
import functools
import json
import math
import os
import random
import re
import shlex
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import torch

# The parameter tensors, in the checkpoint's names (the PyTorch names).
PARAM_NAMES = [
    "tok_emb.weight",             # [V,C]
    "pos_emb.weight",             # [block_size,C]
    "blocks.0.attn.q.weight",     # [C,C]
    "blocks.0.attn.k.weight",     # [C,C]
    "blocks.0.attn.v.weight",     # [C,C]
    "blocks.0.attn.proj.weight",  # [C,C]
    "blocks.0.attn.proj.bias",    # [C]
    "head.weight",                # [V,C]
    "head.bias",                  # [V]
]

# The parity run: model sizes and training settings, and what counts as a pass.
PARITY_MODEL_FLAGS = ["--context", "16", "--embd", "32", "--heads", "4"]
PARITY_GPT_ARCH_FLAGS = ["--arch", "gpt", "--layers", "2"]
PARITY_BATCH = 4
PARITY_LR = 0.1
PARITY_SEED = 1
PARITY_VAL_FRACTION = 0.1
LOSS_TOLERANCE = 1e-4    # largest allowed |tinygpt loss - reference loss| at any step
WEIGHT_TOLERANCE = 1e-3  # largest allowed |tinygpt weight - reference weight| at the end
EVAL_TOLERANCE = 1e-4    # largest allowed |tinygpt eval loss - reference eval loss|
# Largest allowed |tinygpt gradient - reference gradient| at step 0 on the GPT
# probe (below). tinygpt's gradient is read back as (w0 - w1) / lr from float32
# checkpoints, which alone costs up to ~1e-6 (7e-7 measured); a tanh GELU in
# place of the exact one shows as 1.7e-4.
GRAD_TOLERANCE = 1e-5
# The GPT probe: a checkpoint written here with weights of order 1, so that
# attention is far from uniform and the MLP far from linear (near tinygpt's
# initialisation both are almost trivial and hide mistakes there). tinygpt
# evaluates it and trains PROBE_STEPS steps from it.
PROBE_SEED = 3
PROBE_STEPS = 5


# ---- safetensors ----------------------------------------------------------

def read_safetensors(path):
    """Read a .safetensors file of F32 tensors.

    Format: 8 bytes little-endian header length N, N bytes of JSON, then the
    raw little-endian data. The JSON maps each tensor name to {"dtype",
    "shape", "data_offsets": [begin, end]} (offsets from the start of the
    data) and may hold a "__metadata__" object of strings.
    Returns (tensors, metadata): a dict name -> float32 tensor, and a dict.
    Raises ValueError, naming the file, when the file is malformed.
    """
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if header_len > len(blob) - 8:
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = blob[8 + header_len:]
    metadata = header.pop("__metadata__", {})

    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, expected F32")
        shape = list(info["shape"])
        begin, end = info["data_offsets"]
        count = math.prod(shape)
        if not 0 <= begin <= end <= len(data) or end - begin != 4 * count:
            raise ValueError(f"{path}: tensor {name} has bad data_offsets {begin},{end} "
                             f"for shape {shape} and {len(data)} data bytes")
        values = struct.unpack(f"<{count}f", data[begin:end])
        tensors[name] = torch.tensor(values, dtype=torch.float32).reshape(shape)
    return tensors, metadata


def write_safetensors(path, tensors, metadata):
    """Write "tensors" (name -> tensor, stored as F32) and "metadata" (strings).

    The self-test uses it to check read_safetensors on a known file, and
    parity to write the GPT probe checkpoint. The header is padded with spaces to a multiple of 8 bytes, as the format
    recommends.
    """
    header = {"__metadata__": metadata}
    chunks = []
    offset = 0
    for name, tensor in tensors.items():
        values = tensor.detach().to(torch.float32).flatten().tolist()
        chunk = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(chunk)]}
        chunks.append(chunk)
        offset += len(chunk)
    header_bytes = json.dumps(header).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for chunk in chunks:
            f.write(chunk)


# ---- the model ------------------------------------------------------------

def forward(params, idx, targets, n_head, dropout_keep=None, dropout=0.0):
    """The model's forward pass; returns (loss, logits).

    "params": name -> tensor (as in PARAM_NAMES); "idx", "targets": [B,T]
    token ids. "dropout_keep": None for no dropout (evaluation), or a [B,NH,T,T]
    tensor of 0/1 saying which attention weights survive; kept weights are
    scaled by 1 / (1 - "dropout") (inverted dropout).
    """
    B, T = idx.shape
    C = params["tok_emb.weight"].shape[1]
    HS = C // n_head

    # 1. Token plus position embedding.
    x = params["tok_emb.weight"][idx] + params["pos_emb.weight"][:T]           # [B,T,C]

    # 2. Queries, keys, values, split into heads: [B,T,C] -> [B,NH,T,HS].
    def heads(w):
        return (x @ w.T).view(B, T, n_head, HS).transpose(1, 2)
    q = heads(params["blocks.0.attn.q.weight"])
    k = heads(params["blocks.0.attn.k.weight"])
    v = heads(params["blocks.0.attn.v.weight"])

    # 3. Scaled scores, causal mask (position i sees j <= i), softmax.
    scores = q @ k.transpose(-2, -1) / math.sqrt(HS)                           # [B,NH,T,T]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(future, float("-inf"))
    att = torch.softmax(scores, dim=-1)

    # 4. Dropout on the attention weights.
    if dropout_keep is not None:
        att = att * dropout_keep / (1.0 - dropout)

    # 5. Weighted values, heads concatenated back: [B,NH,T,HS] -> [B,T,C].
    y = (att @ v).transpose(1, 2).reshape(B, T, C)

    # 6. Output projection, classification head, mean cross-entropy.
    out = y @ params["blocks.0.attn.proj.weight"].T + params["blocks.0.attn.proj.bias"]
    logits = out @ params["head.weight"].T + params["head.bias"]               # [B,T,V]
    loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
    return loss, logits


def forward_loops(params, idx, targets, n_head, dropout_keep=None, dropout=0.0):
    """The same forward pass, written position by position with Python loops.

    Slow; the self-test uses it to check forward()'s head splitting, masking
    and dropout against a version that can be read line by line.
    Returns (loss, logits) like forward().
    """
    B, T = idx.shape
    C = params["tok_emb.weight"].shape[1]
    HS = C // n_head
    Wq, Wk, Wv = (params[f"blocks.0.attn.{n}.weight"] for n in "qkv")
    logits = []
    total_loss = 0.0
    for b in range(B):
        row_logits = []
        x = [params["tok_emb.weight"][idx[b, t]] + params["pos_emb.weight"][t] for t in range(T)]
        for i in range(T):
            y = []
            for h in range(n_head):
                hs = slice(h * HS, (h + 1) * HS)
                q_i = Wq[hs] @ x[i]
                scores = [float((q_i @ (Wk[hs] @ x[j])) / math.sqrt(HS)) for j in range(i + 1)]
                top = max(scores)
                exps = [math.exp(s - top) for s in scores]
                y_h = torch.zeros(HS, dtype=x[i].dtype)
                for j in range(i + 1):
                    weight = exps[j] / sum(exps)
                    if dropout_keep is not None:
                        weight = weight * float(dropout_keep[b, h, i, j]) / (1.0 - dropout)
                    y_h = y_h + weight * (Wv[hs] @ x[j])
                y.append(y_h)
            out = (params["blocks.0.attn.proj.weight"] @ torch.cat(y)
                   + params["blocks.0.attn.proj.bias"])
            z = params["head.weight"] @ out + params["head.bias"]
            log_norm = float(z.max()) + math.log(float(torch.exp(z - z.max()).sum()))
            total_loss += log_norm - float(z[targets[b, i]])
            row_logits.append(z)
        logits.append(torch.stack(row_logits))
    return total_loss / (B * T), torch.stack(logits)


def random_params(V, block_size, C, dtype=torch.float64, seed=0):
    """Random parameters for a model of the given sizes (for the self-test)."""
    gen = torch.Generator().manual_seed(seed)
    shapes = {
        "tok_emb.weight": [V, C], "pos_emb.weight": [block_size, C],
        "blocks.0.attn.q.weight": [C, C], "blocks.0.attn.k.weight": [C, C],
        "blocks.0.attn.v.weight": [C, C], "blocks.0.attn.proj.weight": [C, C],
        "blocks.0.attn.proj.bias": [C], "head.weight": [V, C], "head.bias": [V],
    }
    return {name: torch.randn(shapes[name], generator=gen, dtype=dtype) for name in PARAM_NAMES}


# ---- the GPT --------------------------------------------------------------
#
# The same style as forward() above: a function of a dict of float64 tensors
# named as in the checkpoint, so that autograd gives every tensor's gradient
# and parity can compare them by name. The pieces a library would hide
# (layer norm, gelu, softmax, cross-entropy) are written out here; the
# benchmark's BenchNanoGPT uses the library's, and the self-test holds the two
# to each other.

LAYER_NORM_EPS = 1e-5


def gpt_param_shapes(V, block_size, C, n_layer):
    """The GPT's tensors, name -> shape, in the checkpoint's order."""
    shapes = {"tok_emb.weight": [V, C], "pos_emb.weight": [block_size, C]}
    for i in range(n_layer):
        shapes.update({
            f"blocks.{i}.ln1.weight": [C],
            f"blocks.{i}.attn.q.weight": [C, C],
            f"blocks.{i}.attn.k.weight": [C, C],
            f"blocks.{i}.attn.v.weight": [C, C],
            f"blocks.{i}.attn.proj.weight": [C, C],
            f"blocks.{i}.ln2.weight": [C],
            f"blocks.{i}.mlp.fc.weight": [4 * C, C],
            f"blocks.{i}.mlp.proj.weight": [C, 4 * C],
        })
    shapes["ln_f.weight"] = [C]
    return shapes


def gpt_n_layer(params):
    """The number of blocks in a dict of GPT tensors (from the blocks.{i}.* names)."""
    return len({name.split(".")[1] for name in params if name.startswith("blocks.")})


def layer_norm(x, weight):
    """LayerNorm over the last dimension, weight only: (x - mean) / sqrt(var + eps) * weight.

    var is the biased variance (divided by C), as nn.LayerNorm takes it.
    """
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + LAYER_NORM_EPS) * weight


def gelu(x):
    """The exact GELU: x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gpt_forward(params, idx, targets, n_head):
    """The GPT's forward pass, dropout off; returns (loss, logits).

    "params": name -> tensor (as in gpt_param_shapes); "idx": [B,T] token ids;
    "targets": [B,T] token ids, or None for logits only (loss None).
    """
    B, T = idx.shape
    C = params["tok_emb.weight"].shape[1]
    HS = C // n_head
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    # 1. Token plus position embedding.
    x = params["tok_emb.weight"][idx] + params["pos_emb.weight"][:T]          # [B,T,C]

    for i in range(gpt_n_layer(params)):
        w = {name[len(f"blocks.{i}."):]: t for name, t in params.items()
             if name.startswith(f"blocks.{i}.")}

        # 2. Attention on the normalised stream, added back to it.
        h = layer_norm(x, w["ln1.weight"])                                     # [B,T,C]
        q, k, v = ((h @ w[f"attn.{n}.weight"].T).view(B, T, n_head, HS).transpose(1, 2)
                   for n in "qkv")                                             # [B,NH,T,HS]
        scores = (q @ k.transpose(-2, -1) / math.sqrt(HS)).masked_fill(future, float("-inf"))
        exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))           # [B,NH,T,T]
        att = exps / exps.sum(dim=-1, keepdim=True)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)                         # heads concatenated
        x = x + y @ w["attn.proj.weight"].T

        # 3. The MLP on the normalised stream, added back to it.
        h = layer_norm(x, w["ln2.weight"])
        x = x + gelu(h @ w["mlp.fc.weight"].T) @ w["mlp.proj.weight"].T         # [B,T,4C] inside

    # 4. Final norm; the head is the token embedding, transposed (tied).
    logits = layer_norm(x, params["ln_f.weight"]) @ params["tok_emb.weight"].T  # [B,T,V]
    if targets is None:
        return None, logits

    # 5. Mean cross-entropy: logsumexp(logits) - logit[target].
    top = logits.amax(dim=-1, keepdim=True)
    log_norm = (top + torch.log(torch.exp(logits - top).sum(dim=-1, keepdim=True))).squeeze(-1)
    picked = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (log_norm - picked).mean(), logits


def random_gpt_params(shapes, seed):
    """Random weights of order 1 for a GPT of "shapes" (name -> shape): norm
    weights 1 + N(0, 0.2), embeddings N(0, 0.5), a Linear [out,in] N(0, 1.5^2/in),
    so every Linear's output has a standard deviation near 1.5. Attention is
    then far from uniform and the MLP far from linear, unlike at tinygpt's
    initialisation. float64."""
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in shapes.items():
        noise = torch.randn(shape, generator=gen, dtype=torch.float64)
        if len(shape) == 1:
            params[name] = 1.0 + 0.2 * noise
        elif name.endswith("_emb.weight"):
            params[name] = 0.5 * noise
        else:
            params[name] = 1.5 / math.sqrt(shape[1]) * noise
    return params


def eval_windows(tokens, T):
    """The windows `tinygpt eval` scores: window i is tokens i*T .. i*T+T-1 and
    predicts i*T+1 .. i*T+T, for every full window. Returns (inputs, targets) [W,T]."""
    windows = (len(tokens) - 1) // T if len(tokens) > T else 0
    data = torch.tensor(tokens[:windows * T + 1])
    return data[:windows * T].view(windows, T), data[1:windows * T + 1].view(windows, T)


def eval_loss(loss_fn, tokens, T, chunk=64):
    """Mean cross-entropy over eval_windows(tokens, T); returns (loss, predicted tokens).

    "loss_fn"(inputs, targets) gives the mean loss of a [W,T] batch; the
    windows go through it "chunk" at a time and the means are weighted back.
    """
    inputs, targets = eval_windows(tokens, T)
    total = 0.0
    with torch.no_grad():
        for first in range(0, len(inputs), chunk):
            batch = slice(first, first + chunk)
            total += loss_fn(inputs[batch], targets[batch]).item() * inputs[batch].numel()
    return total / inputs.numel(), inputs.numel()


# ---- data -----------------------------------------------------------------

def encode(text, vocab):
    """Token ids of "text": a character's id is its index in "vocab"."""
    to_id = {ch: i for i, ch in enumerate(vocab)}
    missing = sorted(set(text) - set(to_id))
    if missing:
        raise ValueError(f"characters not in the checkpoint's vocab: {missing[:10]}")
    return [to_id[ch] for ch in text]


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


# ---- parity ---------------------------------------------------------------

class ParityFailure(Exception):
    """A parity check cannot go on: a command failed, or a checkpoint is not
    what was asked for. The message says which."""


def run(command):
    """Run "command" (a list), showing it; return its stdout.

    On failure print its output and raise ParityFailure.
    """
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        print(result.stdout + result.stderr, end="")
        raise ParityFailure(f"`{' '.join(command[:2])}` exited with status {result.returncode}")
    return result.stdout


@functools.lru_cache(maxsize=None)
def train_has_arch_flag(tinygpt):
    """True when `tinygpt train --help` lists --arch (a tinygpt that has the GPT)."""
    result = subprocess.run([tinygpt, "train", "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return "--arch" in result.stdout


def card_arch_flags(tinygpt):
    """The flags that ask `tinygpt train` for the card model.

    ["--arch", "card"]: once tinygpt has --arch its default is the GPT. A
    tinygpt from before --arch knows only the card model and would refuse the
    flag, so it gets none.
    """
    return ["--arch", "card"] if train_has_arch_flag(tinygpt) else []


def read_log(path):
    """tinygpt's log.csv as a list of (step, train_loss, lr), in file order."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["train_loss"]), float(r["lr"])) for r in rows]


def expected_tensors(meta):
    """name -> shape of the tensors a checkpoint with metadata "meta" must hold.

    The metadata's "arch" says which model ("card" when it is missing: the
    checkpoints from before --arch); "n_layer" how many GPT blocks.
    """
    V, C, T = int(meta["vocab_size"]), int(meta["n_embd"]), int(meta["block_size"])
    arch = meta.get("arch", "card")
    if arch == "gpt":
        return gpt_param_shapes(V, T, C, int(meta["n_layer"]))
    if arch != "card":
        raise ParityFailure(f"unknown arch {arch!r} in the checkpoint's metadata")
    return {
        "tok_emb.weight": [V, C], "pos_emb.weight": [T, C],
        "blocks.0.attn.q.weight": [C, C], "blocks.0.attn.k.weight": [C, C],
        "blocks.0.attn.v.weight": [C, C], "blocks.0.attn.proj.weight": [C, C],
        "blocks.0.attn.proj.bias": [C], "head.weight": [V, C], "head.bias": [V],
    }


def check_metadata(tensors, meta, path):
    """Check the checkpoint holds exactly its model's tensors, with shapes
    agreeing with its metadata; return (vocab, n_head). Raises ParityFailure."""
    vocab = meta["vocab"]
    V, n_head = int(meta["vocab_size"]), int(meta["n_head"])
    expected = expected_tensors(meta)
    missing, unexpected = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ParityFailure(f"{path} ({meta.get('arch', 'card')}): missing tensors {missing}, "
                            f"unexpected tensors {unexpected}")
    for name, shape in expected.items():
        if list(tensors[name].shape) != shape:
            raise ParityFailure(f"{path}: {name} has shape {list(tensors[name].shape)}, "
                                f"expected {shape} from the metadata")
    if len(vocab) != V:
        raise ParityFailure(f"{path}: vocab has {len(vocab)} characters, vocab_size is {V}")
    return vocab, n_head


def read_tokens(path, vocab):
    """The token ids of text file "path" in "vocab"."""
    # newline="": keep "\r\n" as two tokens, as tinygpt reads the raw bytes.
    with open(path, encoding="utf-8", newline="") as f:
        return encode(f.read(), vocab)


def replay_training(label, params, log, loss_fn, train_tokens, T, verbose):
    """Replay tinygpt's logged steps on "params" (float64, requires_grad) in place.

    Step s trains on sequential batch s with plain SGD, lr PARITY_LR.
    "loss_fn"(params, inputs, targets) is the model's mean loss. Returns
    (per-step list of (step, tinygpt loss, reference loss), list of failures).
    """
    failures, losses = [], []
    for step, c_loss, c_lr in log:
        if abs(c_lr - PARITY_LR) > 1e-6 * PARITY_LR:
            failures.append(f"step {step}: tinygpt logged lr {c_lr}, expected {PARITY_LR}")
        inputs, targets = sequential_batch(train_tokens, step, PARITY_BATCH, T)
        loss = loss_fn(params, inputs, targets)
        loss.backward()
        with torch.no_grad():
            for p in params.values():
                p -= PARITY_LR * p.grad
                p.grad = None
        losses.append((step, c_loss, loss.item()))
        if verbose:
            print(f"  {label} step {step:3d}  tinygpt {c_loss:.6f}  torch {loss.item():.6f}"
                  f"  |diff| {abs(c_loss - loss.item()):.2e}")
    return losses, failures


def largest_weight_difference(final_tensors, params):
    """(largest |tinygpt weight - reference weight|, the tensor it is in)."""
    worst = (0.0, None)
    for name, p in params.items():
        diff = (final_tensors[name].to(torch.float64) - p.detach()).abs().max().item()
        if diff >= worst[0]:
            worst = (diff, name)
    return worst


def verdict(label, what, diff, tolerance, detail=""):
    """Print one PASS/FAIL line for a difference against its tolerance; True on PASS."""
    passed = diff <= tolerance
    print(f"parity {label}: {'PASS' if passed else 'FAIL'} {what}: |diff| {diff:.2e} "
          f"(tolerance {tolerance:.0e}){detail}", flush=True)
    return passed


def write_parity_data(args, workdir):
    """The training text: --data, or a synthetic corpus written into "workdir"."""
    if args.data is not None:
        return args.data
    data = os.path.join(workdir, "synthetic.txt")
    with open(data, "w", encoding="utf-8", newline="") as f:
        f.write(synthetic_text())
    print(f"parity: wrote a synthetic corpus to {data}")
    return data


def parity_card(args, workdir, data):
    """The card model: tinygpt and this file train it from the same checkpoint
    on the same batches; returns the list of failures."""
    # 1. The initial model, as tinygpt initialises it (0 steps: save and stop).
    init_dir, trained_dir = os.path.join(workdir, "init"), os.path.join(workdir, "trained")
    arch = card_arch_flags(args.tinygpt)
    common = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
              "--val-fraction", str(PARITY_VAL_FRACTION)]
    run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0"]
        + arch + PARITY_MODEL_FLAGS + common)
    init_path = os.path.join(init_dir, "model.safetensors")
    init_tensors, meta = read_safetensors(init_path)
    vocab, n_head = check_metadata(init_tensors, meta, init_path)
    if meta.get("arch", "card") != "card":
        raise ParityFailure(f"{init_path}: arch {meta.get('arch')!r}, asked for card")

    # 2. tinygpt trains it: plain SGD, batches in order, no dropout.
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(args.steps), "--out", trained_dir,
         "--lr", str(PARITY_LR)] + arch + common)
    log = read_log(os.path.join(trained_dir, "log.csv"))
    final_path = os.path.join(trained_dir, "model.safetensors")
    final_tensors, _ = read_safetensors(final_path)

    # 3. The same training in float64 here.
    tokens = read_tokens(data, vocab)
    n_train = len(tokens) - math.floor(len(tokens) * PARITY_VAL_FRACTION)
    T = int(meta["block_size"])
    params = {name: t.to(torch.float64).requires_grad_() for name, t in init_tensors.items()}
    failures = []
    if len(log) != args.steps:
        failures.append(f"log.csv has {len(log)} rows, expected {args.steps}")
    losses, lr_failures = replay_training(
        "card", params, log, lambda p, i, t: forward(p, i, t, n_head)[0], tokens[:n_train], T,
        args.verbose)
    failures += lr_failures
    worst_loss = max(((abs(c - r), step) for step, c, r in losses), default=(0.0, None))

    # 4. Compare.
    worst_weight = largest_weight_difference(final_tensors, params)
    print(f"parity card: {len(log)} steps; largest |loss difference| {worst_loss[0]:.2e} "
          f"(step {worst_loss[1]}, tolerance {LOSS_TOLERANCE:.0e})")
    print(f"parity card: largest |final weight difference| {worst_weight[0]:.2e} "
          f"({worst_weight[1]}, tolerance {WEIGHT_TOLERANCE:.0e})")
    if worst_loss[0] > LOSS_TOLERANCE:
        failures.append("card losses differ beyond tolerance")
    if worst_weight[0] > WEIGHT_TOLERANCE:
        failures.append("card final weights differ beyond tolerance")
    return failures


def step0_gradients(args, data, init_path, init_tensors, n_head, train_tokens, T, workdir):
    """Every tensor's step-0 gradient, tinygpt's against autograd's, from "init_path".

    tinygpt trains one step from it; its gradient is (w0 - w1) / lr. Returns
    one row per tensor, largest difference first: (max |difference|, name,
    max |gradient|, index of the worst element, tinygpt's and autograd's
    value there).
    """
    one_dir = os.path.join(workdir, "gpt-one-step-" + os.path.basename(os.path.dirname(init_path)))
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", "1", "--out", one_dir, "--lr", str(PARITY_LR),
         "--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
         "--val-fraction", str(PARITY_VAL_FRACTION)] + PARITY_GPT_ARCH_FLAGS)
    after, _ = read_safetensors(os.path.join(one_dir, "model.safetensors"))
    params = {name: t.to(torch.float64).requires_grad_() for name, t in init_tensors.items()}
    inputs, targets = sequential_batch(train_tokens, 0, PARITY_BATCH, T)
    gpt_forward(params, inputs, targets, n_head)[0].backward()
    rows = []
    for name, p in params.items():
        c_grad = (init_tensors[name].to(torch.float64) - after[name].to(torch.float64)) / PARITY_LR
        diff = (c_grad - p.grad).abs()
        where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        rows.append((diff.max().item(), name, p.grad.abs().max().item(), where,
                     c_grad[where].item(), p.grad[where].item()))
    return sorted(rows, reverse=True)


def print_gradient_rows(init_path, rows):
    """Print step0_gradients' rows, mark those beyond GRAD_TOLERANCE, and say
    where in the backward pass the first wrong one lies."""
    print(f"parity gpt: step-0 gradients from {init_path}, tinygpt's (w0 - w1)/lr against "
          "autograd's, worst first:")
    for diff, name, scale, where, c, r in rows:
        mark = "  <-- differs" if diff > GRAD_TOLERANCE else ""
        print(f"  {name:28s} max |diff| {diff:.2e} at {list(where)} (tinygpt {c:+.6f}, "
              f"torch {r:+.6f}; max |grad| {scale:.2e}){mark}")
    wrong_names = {name for diff, name, *_ in rows if diff > GRAD_TOLERANCE}
    # Backward visits the tensors in this order (tok_emb last, though the tied
    # head gives it a first share at the start).
    n_layer = gpt_n_layer({name: None for _, name, *_ in rows})
    backward_order = ["ln_f.weight"] + [
        f"blocks.{i}.{n}" for i in reversed(range(n_layer))
        for n in ("mlp.proj.weight", "mlp.fc.weight", "ln2.weight", "attn.proj.weight",
                  "attn.v.weight", "attn.k.weight", "attn.q.weight", "ln1.weight")
    ] + ["pos_emb.weight", "tok_emb.weight"]
    wrong = [name for name in backward_order if name in wrong_names]
    if not wrong:
        print(f"parity gpt: no gradient differs by more than {GRAD_TOLERANCE:.0e}")
        return
    first = backward_order.index(wrong[0])
    last_good = backward_order[first - 1] if first > 0 else "the loss"
    print(f"parity gpt: {len(wrong)} of {len(backward_order)} gradients differ by more than "
          f"{GRAD_TOLERANCE:.0e}; in backward order the first is {wrong[0]} (after "
          f"{last_good}, which agrees): look between those two in the backward pass "
          "(if the step-0 loss also differs, the forward is wrong first)")


def gpt_probe(args, workdir, data, init_path, meta, tokens, n_train, n_head):
    """The probe: tinygpt evaluates, and trains from, a GPT checkpoint written
    here with weights of order 1 (random_gpt_params): its eval loss, PROBE_STEPS
    training steps, and every tensor's step-0 gradient. Returns the failures.

    The file copies the metadata and the tensor order of tinygpt's own
    "init_path" (the loader may check either); the weights are rounded to
    float32 before this side uses them, so both start from the same numbers.
    """
    with open(init_path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len).decode("utf-8"))
    order = sorted((n for n in header if n != "__metadata__"),
                   key=lambda n: header[n]["data_offsets"][0])
    probe = random_gpt_params(expected_tensors(meta), PROBE_SEED)
    probe = {name: probe[name].to(torch.float32) for name in order}
    probe_dir = os.path.join(workdir, "gpt-probe")
    os.makedirs(probe_dir, exist_ok=True)
    probe_path = os.path.join(probe_dir, "model.safetensors")
    write_safetensors(probe_path, probe, meta)
    print(f"parity gpt: wrote a probe checkpoint, weights of order 1, to {probe_path}")
    T = int(meta["block_size"])
    failures = []

    # 1. tinygpt eval of the probe.
    reply = run([args.tinygpt, "eval", "--model", probe_path, data, "--json"])
    result = json.loads([line for line in reply.splitlines() if line.startswith("{")][-1])
    stored = {name: t.to(torch.float64) for name, t in probe.items()}
    ref_loss, predicted = eval_loss(lambda i, t: gpt_forward(stored, i, t, n_head)[0], tokens, T)
    if not verdict("gpt", f"probe eval loss over {predicted} tokens",
                   abs(result["loss"] - ref_loss), EVAL_TOLERANCE,
                   f"; tinygpt {result['loss']:.6f}, torch {ref_loss:.6f}"):
        failures.append("gpt probe eval loss differs beyond tolerance")

    # 2. A few training steps from the probe.
    trained_dir = os.path.join(workdir, "gpt-probe-trained")
    run([args.tinygpt, "train", data, "--init", probe_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(PROBE_STEPS), "--out", trained_dir,
         "--lr", str(PARITY_LR), "--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
         "--val-fraction", str(PARITY_VAL_FRACTION)] + PARITY_GPT_ARCH_FLAGS)
    log = read_log(os.path.join(trained_dir, "log.csv"))
    final_tensors, _ = read_safetensors(os.path.join(trained_dir, "model.safetensors"))
    params = {name: t.clone().requires_grad_() for name, t in stored.items()}
    losses, lr_failures = replay_training(
        "gpt probe", params, log, lambda p, i, t: gpt_forward(p, i, t, n_head)[0],
        tokens[:n_train], T, args.verbose)
    failures += lr_failures
    if len(log) != PROBE_STEPS:
        failures.append(f"gpt probe log.csv has {len(log)} rows, expected {PROBE_STEPS}")
    worst_loss = max(((abs(c - r), step) for step, c, r in losses), default=(0.0, None))
    if not verdict("gpt", f"probe losses over {len(losses)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}"):
        failures.append("gpt probe losses differ beyond tolerance")
    worst_weight = largest_weight_difference(final_tensors, params)
    if not verdict("gpt", "probe final weights", worst_weight[0], WEIGHT_TOLERANCE,
                   f"; worst in {worst_weight[1]}"):
        failures.append("gpt probe final weights differ beyond tolerance")

    # 3. The step-0 gradient of every tensor, from one step of tinygpt's.
    rows = step0_gradients(args, data, probe_path, probe, n_head, tokens[:n_train], T, workdir)
    if not verdict("gpt", "probe step-0 gradients, every tensor", rows[0][0], GRAD_TOLERANCE,
                   f"; worst in {rows[0][1]}"):
        failures.append("gpt probe gradients differ beyond tolerance")
        print_gradient_rows(probe_path, rows)
    return failures


def parity_gpt(args, workdir, data):
    """The GPT: the same training check as the card model's, plus the step-0
    loss on its own, `tinygpt eval` of the trained model, and the probe
    (gpt_probe); returns the list of failures. On a failure it also prints
    every tensor's step-0 gradient from tinygpt's own init, to say where."""
    if not train_has_arch_flag(args.tinygpt):
        raise ParityFailure(f"`{args.tinygpt} train --help` lists no --arch: this tinygpt has "
                            "no GPT (run with --only card to check the card model alone)")

    # 1. The initial GPT, as tinygpt initialises it.
    init_dir, trained_dir = os.path.join(workdir, "gpt-init"), os.path.join(workdir, "gpt-trained")
    common = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
              "--val-fraction", str(PARITY_VAL_FRACTION)]
    run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0", "--dropout", "0"]
        + PARITY_GPT_ARCH_FLAGS + PARITY_MODEL_FLAGS + common)
    init_path = os.path.join(init_dir, "model.safetensors")
    init_tensors, meta = read_safetensors(init_path)
    if meta.get("arch") != "gpt":
        raise ParityFailure(f"{init_path}: metadata arch is {meta.get('arch')!r}, expected 'gpt'")
    vocab, n_head = check_metadata(init_tensors, meta, init_path)
    n_layer = int(meta["n_layer"])
    if str(n_layer) != PARITY_GPT_ARCH_FLAGS[3]:
        raise ParityFailure(f"{init_path}: n_layer {n_layer}, asked for {PARITY_GPT_ARCH_FLAGS[3]}")

    # 2. tinygpt trains it from that file.
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(args.steps), "--out", trained_dir,
         "--lr", str(PARITY_LR)] + PARITY_GPT_ARCH_FLAGS + common)
    log = read_log(os.path.join(trained_dir, "log.csv"))
    final_path = os.path.join(trained_dir, "model.safetensors")
    final_tensors, final_meta = read_safetensors(final_path)
    check_metadata(final_tensors, final_meta, final_path)

    # 3. The same training in float64 here.
    tokens = read_tokens(data, vocab)
    n_train = len(tokens) - math.floor(len(tokens) * PARITY_VAL_FRACTION)
    T = int(meta["block_size"])
    params = {name: t.to(torch.float64).requires_grad_() for name, t in init_tensors.items()}
    failures = []
    if len(log) != args.steps:
        failures.append(f"gpt log.csv has {len(log)} rows, expected {args.steps}")
    if not log or log[0][0] != 0:
        raise ParityFailure(f"{trained_dir}/log.csv does not start at step 0")
    losses, lr_failures = replay_training(
        "gpt", params, log, lambda p, i, t: gpt_forward(p, i, t, n_head)[0], tokens[:n_train], T,
        args.verbose)
    failures += lr_failures

    # 4. Compare: the step-0 loss (the forward pass alone, from the shared
    # init), every step's loss, the final weights.
    _, c0, r0 = losses[0]
    if not verdict("gpt", "step-0 loss", abs(c0 - r0), LOSS_TOLERANCE,
                   f"; tinygpt {c0:.6f}, torch {r0:.6f}"):
        failures.append("gpt step-0 loss differs beyond tolerance")
    worst_loss = max((abs(c - r), step) for step, c, r in losses)
    if not verdict("gpt", f"losses over {len(losses)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}; loss {losses[0][2]:.4f} -> "
                   f"{losses[-1][2]:.4f}"):
        failures.append("gpt losses differ beyond tolerance")
    worst_weight = largest_weight_difference(final_tensors, params)
    if not verdict("gpt", "final weights", worst_weight[0], WEIGHT_TOLERANCE,
                   f"; worst in {worst_weight[1]}"):
        failures.append("gpt final weights differ beyond tolerance")

    # 5. `tinygpt eval` of the trained model against the same windows here,
    # with the weights as stored (float32, widened).
    reply = run([args.tinygpt, "eval", "--model", final_path, data, "--json"])
    result = json.loads([line for line in reply.splitlines() if line.startswith("{")][-1])
    stored = {name: t.to(torch.float64) for name, t in final_tensors.items()}
    ref_loss, predicted = eval_loss(lambda i, t: gpt_forward(stored, i, t, n_head)[0], tokens, T)
    if int(result["tokens"]) != predicted:
        failures.append(f"tinygpt eval scored {result['tokens']} tokens, expected {predicted}")
    if not verdict("gpt", f"eval loss over {predicted} tokens", abs(result["loss"] - ref_loss),
                   EVAL_TOLERANCE, f"; tinygpt {result['loss']:.6f}, torch {ref_loss:.6f}"):
        failures.append("gpt eval loss differs beyond tolerance")
    if abs(result["perplexity"] - math.exp(result["loss"])) > 1e-5 * result["perplexity"] + 1e-6:
        failures.append(f"tinygpt eval perplexity {result['perplexity']} is not exp(loss)")

    # 6. The same on weights of order 1, where attention and the MLP are
    # far from trivial.
    failures += gpt_probe(args, workdir, data, init_path, meta, tokens, n_train, n_head)

    # Where a failure comes from: the gradients from tinygpt's own init.
    if failures:
        print_gradient_rows(init_path, step0_gradients(args, data, init_path, init_tensors,
                                                       n_head, tokens[:n_train], T, workdir))
    return failures


def cmd_parity(args):
    """Train with tinygpt and with this file's models on the same batches; compare."""
    with tempfile.TemporaryDirectory(prefix="tinygpt-parity-") as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        data = write_parity_data(args, workdir)
        checks = [("card", parity_card), ("gpt", parity_gpt)]
        failures = []
        for label, check in checks:
            if args.only not in (None, label):
                continue
            try:
                failures += check(args, workdir, data)
            except ParityFailure as e:
                print(f"parity {label}: FAIL: {e}")
                failures.append(f"{label}: {e}")
        if failures:
            print("parity: FAIL: " + "; ".join(dict.fromkeys(failures)))
            return 1
        print("parity: PASS: tinygpt matches the PyTorch reference")
        return 0


# ---- self-test ------------------------------------------------------------

def cmd_selftest(args):
    """Check this file's pieces against each other and against autograd."""
    torch.manual_seed(0)
    ok = True

    def report(name, passed, detail=""):
        nonlocal ok
        ok = ok and passed
        print(f"selftest: {'ok  ' if passed else 'FAIL'} {name} {detail}")

    # 1. safetensors: write a known file, read it back.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.safetensors")
        params = random_params(V=7, block_size=5, C=8, dtype=torch.float32)
        meta = {"vocab": "ab\u2014c\u2019d\n", "vocab_size": "7", "n_embd": "8",
                "n_head": "2", "block_size": "5", "dropout": "0.1", "step": "3"}
        write_safetensors(path, params, meta)
        tensors, meta_back = read_safetensors(path)
        same = (meta_back == meta and list(tensors) == list(params)
                and all(torch.equal(tensors[n], params[n]) for n in params))
        report("safetensors round trip", same)
        try:
            check_metadata(tensors, meta_back, path)
            report("check_metadata accepts the card model's tensors", True)
        except ParityFailure as e:
            report("check_metadata accepts the card model's tensors", False, f"({e})")
        with open(path, "rb") as f:
            blob = f.read()
        with open(path, "wb") as f:
            f.write(blob[:-4])
        try:
            read_safetensors(path)
            report("safetensors rejects a truncated file", False)
        except ValueError as e:
            report("safetensors rejects a truncated file", True, f"({e})")

    # 2. forward() against the loop version, with and without dropout.
    V, T, C, NH, B, p = 6, 5, 8, 2, 2, 0.3
    params = random_params(V, T, C)
    idx = torch.randint(V, (B, T))
    targets = torch.randint(V, (B, T))
    keep = (torch.rand(B, NH, T, T) >= p).to(torch.float64)
    for name, mask in (("no dropout", None), ("dropout", keep)):
        loss, logits = forward(params, idx, targets, NH, mask, p)
        loss_loops, logits_loops = forward_loops(params, idx, targets, NH, mask, p)
        diff = max(abs(loss.item() - loss_loops), (logits - logits_loops).abs().max().item())
        report(f"forward matches the loop version ({name})", diff < 1e-12, f"(max diff {diff:.1e})")

    # 2b. The benchmark's nn.Module computes the same (dropout off).
    module = BenchGPT(V, T, C, NH, p).double()
    module.load_reference(params)
    module.eval()
    loss_m, logits_m = module(idx, targets)
    loss, logits = forward(params, idx, targets, NH)
    diff = max(abs(loss_m.item() - loss.item()), (logits_m - logits).abs().max().item())
    report("BenchGPT matches forward()", diff < 1e-12, f"(max diff {diff:.1e})")

    # 3. Causality: changing a later token must not change earlier logits.
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    _, before = forward(params, idx, targets, NH)
    _, after = forward(params, changed, targets, NH)
    report("earlier positions do not see later tokens",
           torch.equal(before[:, :-1], after[:, :-1]) and not torch.equal(before, after))

    # 4. Gradients: autograd against finite differences, every tensor at once.
    names = list(params)
    for name, mask in (("no dropout", None), ("dropout", keep)):
        def loss_of(*tensors, mask=mask):
            return forward(dict(zip(names, tensors)), idx, targets, NH, mask, p)[0]
        inputs = tuple(params[n].clone().requires_grad_() for n in names)
        passed = torch.autograd.gradcheck(loss_of, inputs, eps=1e-6, atol=1e-6, rtol=1e-5,
                                          raise_exception=False)
        report(f"gradcheck ({name})", passed)

    # 5. Batches: row b of batch s starts at ((s*B + b) * T) mod (n - T).
    tokens = list(range(100))
    inputs, targets = sequential_batch(tokens, 3, 4, 16)
    starts = [((3 * 4 + b) * 16) % (100 - 16) for b in range(4)]
    report("sequential batches", inputs[:, 0].tolist() == starts
           and torch.equal(targets, inputs + 1))

    # 6. The synthetic corpus is deterministic and has multi-byte characters.
    text = synthetic_text()
    report("synthetic text", text == synthetic_text() and "\u2014" in text and len(text) > 5000,
           f"({len(text)} characters, {len(set(text))} distinct)")

    # 7. The GPT's checkpoint: tensors written in a shuffled order are read by
    # name, and check_metadata knows the GPT's names and shapes.
    V, T, C, NH, L, B = 7, 5, 8, 2, 2, 3
    gpt_params = random_gpt_params(gpt_param_shapes(V, T, C, L), seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "gpt.safetensors")
        names = list(gpt_params)
        random.Random(5).shuffle(names)
        meta = {"vocab": "ab\u2014c\u2019d\n", "vocab_size": str(V), "n_embd": str(C),
                "n_head": str(NH), "block_size": str(T), "arch": "gpt", "n_layer": str(L),
                "dropout": "0", "step": "0"}
        write_safetensors(path, {n: gpt_params[n].float() for n in names}, meta)
        tensors, meta_back = read_safetensors(path)
        same = (meta_back == meta and sorted(tensors) == sorted(gpt_params)
                and all(torch.equal(tensors[n], gpt_params[n].float()) for n in gpt_params))
        report("GPT safetensors round trip (shuffled order)", same)
        try:
            check_metadata(tensors, meta_back, path)
            report("check_metadata accepts the GPT's tensors", True)
        except ParityFailure as e:
            report("check_metadata accepts the GPT's tensors", False, f"({e})")
        try:
            check_metadata({n: t for n, t in tensors.items() if n != "ln_f.weight"}, meta_back, path)
            report("check_metadata rejects a GPT without ln_f.weight", False)
        except ParityFailure as e:
            report("check_metadata rejects a GPT without ln_f.weight", True, f"({e})")

        # 7b. eval on a checkpoint written here: eval_loss over the windows
        # equals the loss of one forward over all of them.
        stored = {n: t.to(torch.float64) for n, t in tensors.items()}
        tokens = [random.Random(6).randrange(V) for _ in range(4 * T + 3)]
        def loss_fn(i, t):
            return gpt_forward(stored, i, t, NH)[0]
        loss, predicted = eval_loss(loss_fn, tokens, T, chunk=3)
        inputs, targets = eval_windows(tokens, T)
        whole = loss_fn(inputs, targets).item()
        report("eval windows and eval_loss", predicted == 4 * T and abs(loss - whole) < 1e-12
               and inputs[1, 0].item() == tokens[T] and targets[3, -1].item() == tokens[4 * T]
               and eval_windows(tokens[:T + 1], T)[0].shape == (1, T)
               and eval_windows(tokens[:T], T)[0].shape == (0, T),
               f"({predicted} tokens, |diff| {abs(loss - whole):.1e})")

    # 8. gpt_forward against BenchNanoGPT (library layer norm, gelu, softmax,
    # cross-entropy, fused qkv), the same weights, dropout off.
    idx = torch.randint(V, (B, T))
    targets = torch.randint(V, (B, T))
    module = BenchNanoGPT(V, T, C, NH, L, dropout=0.3).double()
    module.load_reference(gpt_params)
    module.eval()
    loss_m, logits_m = module(idx, targets)
    loss, logits = gpt_forward(gpt_params, idx, targets, NH)
    diff = max(abs(loss_m.item() - loss.item()), (logits_m - logits).abs().max().item())
    report("BenchNanoGPT matches gpt_forward()", diff < 1e-12, f"(max diff {diff:.1e})")
    x = torch.randn(3, C, dtype=torch.float64)
    w = gpt_params["ln_f.weight"]
    diff = max((layer_norm(x, w) - torch.nn.functional.layer_norm(x, (C,), w, None,
                                                                  LAYER_NORM_EPS)).abs().max(),
               (gelu(x) - torch.nn.functional.gelu(x)).abs().max()).item()
    report("layer_norm and gelu match torch's", diff < 1e-12, f"(max diff {diff:.1e})")
    module.train()
    trained_mode = module(idx, targets)[0].item()
    report("BenchNanoGPT applies dropout in training mode", trained_mode != loss.item())

    # 9. Causality, and the head is tied: no head.* tensor, tok_emb gets the
    # gradient of both uses.
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    _, before = gpt_forward(gpt_params, idx, None, NH)
    _, after = gpt_forward(gpt_params, changed, None, NH)
    report("GPT: earlier positions do not see later tokens",
           torch.equal(before[:, :-1], after[:, :-1]) and not torch.equal(before, after))

    # 10. GPT gradients: autograd against finite differences, every tensor.
    names = list(gpt_params)
    def gpt_loss_of(*tensors):
        return gpt_forward(dict(zip(names, tensors)), idx, targets, NH)[0]
    inputs = tuple(gpt_params[n].clone().requires_grad_() for n in names)
    passed = torch.autograd.gradcheck(gpt_loss_of, inputs, eps=1e-6, atol=1e-6, rtol=1e-5,
                                      raise_exception=False)
    report(f"GPT gradcheck ({L} layers, {sum(t.numel() for t in inputs)} parameters)", passed)

    # 11. The FLOP count's matmul term is 2 x the weights each token goes
    # through: BenchNanoGPT's Linear weights plus the tied head.
    cfg = BenchConfig("t", "gpt", L, C, NH, T, B, 0.0)
    matmul_weights = sum(m.weight.numel() for m in module.modules()
                         if isinstance(m, torch.nn.Linear)) + V * C
    attention = L * 2 * 2 * C * (T + 1) / 2
    report("GPT FLOP count", forward_flops_per_token(cfg, V) == 2 * matmul_weights + attention,
           f"({forward_flops_per_token(cfg, V):.0f} per token)")

    print("selftest: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


# ---- benchmark ------------------------------------------------------------
#
# `bench` runs tinygpt and PyTorch on the same model, side by side, and writes
# a markdown report. Every measurement is a fresh process, so each one's peak
# resident memory (ru_maxrss, see rss_reaper) is its own:
#   tinygpt:  `tinygpt train ... --threads n`; per-step milliseconds from log.csv
#   PyTorch:  `torch_reference.py bench-torch-worker ... --threads n`, which
#             trains BenchGPT (below) with torch.optim.SGD and prints JSON.

# One benchmarked model: its name (for --configs), the architecture (card or
# gpt), L layers (1 for card), C channels, NH heads, T context, B batch, and
# the dropout probability (card: on the attention weights; gpt: everywhere
# nanoGPT puts it). Training mode throughout.
BenchConfig = collections.namedtuple("BenchConfig", "name arch layers C NH T B dropout")
BENCH_CONFIGS = [
    BenchConfig("S", "card", 1, 64, 4, 32, 16, 0.1),
    BenchConfig("M", "card", 1, 128, 4, 64, 32, 0.1),
    BenchConfig("L", "card", 1, 256, 8, 128, 32, 0.1),
    BenchConfig("gpt", "gpt", 4, 128, 4, 64, 12, 0.0),
]
BENCH_THREADS = (1, 2)     # each implementation runs at each thread count
BENCH_LR = 0.1             # plain SGD
BENCH_WARMUP = 10          # steps run first and not counted
BENCH_TIMED = 50           # steps timed one by one after the warm-up
BENCH_ROUNDS = 3           # each run measured this many times, interleaved; the best kept
BENCH_SAMPLE_TOKENS = 2000
BENCH_SAMPLE_CONFIGS = ("L", "gpt")  # sampling uses these configs' trained tinygpt models
# MB as tinygpt's `memory:` line counts them: 10^6 bytes.
MB = 1e6


class BenchGPT(torch.nn.Module):
    """The model as an ordinary nanoGPT-style nn.Module, for the speed comparison.

    The same computation as forward() above, written the way a PyTorch user
    would: nn.Embedding and nn.Linear layers, q, k and v fused into one
    nn.Linear(C, 3C) (as in nanoGPT, and as tinygpt stores them), and the
    attention spelled out (masked_fill, softmax, F.dropout). The self-test
    checks that it computes what forward() computes.
    """

    def __init__(self, V, block_size, C, n_head, dropout):
        """A model with vocabulary V, context block_size, C channels, n_head heads."""
        super().__init__()
        self.n_head = n_head
        self.dropout = dropout
        self.tok_emb = torch.nn.Embedding(V, C)
        self.pos_emb = torch.nn.Embedding(block_size, C)
        self.qkv = torch.nn.Linear(C, 3 * C, bias=False)
        self.proj = torch.nn.Linear(C, C)
        self.head = torch.nn.Linear(C, V)
        # future[i, j]: position i may not see position j (j > i).
        future = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("future", future)

    def forward(self, idx, targets):
        """Mean cross-entropy loss and logits [B,T,V] for token ids idx, targets [B,T]."""
        B, T = idx.shape
        C = self.tok_emb.embedding_dim
        HS = C // self.n_head
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))                  # [B,T,C]
        q, k, v = (t.view(B, T, self.n_head, HS).transpose(1, 2)                # [B,NH,T,HS]
                   for t in self.qkv(x).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))                 # [B,NH,T,T]
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        att = torch.nn.functional.softmax(att, dim=-1)
        att = torch.nn.functional.dropout(att, self.dropout, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)                # [B,T,C]
        logits = self.head(self.proj(y))                                        # [B,T,V]
        loss = torch.nn.functional.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return loss, logits

    def load_reference(self, params):
        """Copy in parameters named as in PARAM_NAMES (a dict name -> tensor)."""
        with torch.no_grad():
            self.tok_emb.weight.copy_(params["tok_emb.weight"])
            self.pos_emb.weight.copy_(params["pos_emb.weight"])
            self.qkv.weight.copy_(torch.cat([params[f"blocks.0.attn.{n}.weight"] for n in "qkv"]))
            self.proj.weight.copy_(params["blocks.0.attn.proj.weight"])
            self.proj.bias.copy_(params["blocks.0.attn.proj.bias"])
            self.head.weight.copy_(params["head.weight"])
            self.head.bias.copy_(params["head.bias"])


class BenchBlock(torch.nn.Module):
    """One nanoGPT block, bias=False: attention and MLP, each on a layer-normed
    copy of the stream and added back to it."""

    def __init__(self, block_size, C, n_head, dropout):
        """A block of C channels and n_head heads for contexts up to block_size."""
        super().__init__()
        self.n_head = n_head
        self.dropout = dropout
        self.ln1 = torch.nn.Parameter(torch.ones(C))
        self.qkv = torch.nn.Linear(C, 3 * C, bias=False)
        self.proj = torch.nn.Linear(C, C, bias=False)
        self.ln2 = torch.nn.Parameter(torch.ones(C))
        self.fc = torch.nn.Linear(C, 4 * C, bias=False)
        self.mlp_proj = torch.nn.Linear(4 * C, C, bias=False)
        future = torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("future", future)

    def forward(self, x):
        """x [B,T,C] -> x [B,T,C]."""
        B, T, C = x.shape
        HS = C // self.n_head
        F = torch.nn.functional
        # x = x + dropout(attn.proj(attention(ln1(x))))
        h = F.layer_norm(x, (C,), self.ln1, None, LAYER_NORM_EPS)
        q, k, v = (t.view(B, T, self.n_head, HS).transpose(1, 2)                # [B,NH,T,HS]
                   for t in self.qkv(h).split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))                 # [B,NH,T,T]
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        att = F.dropout(F.softmax(att, dim=-1), self.dropout, self.training)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.dropout(self.proj(y), self.dropout, self.training)
        # x = x + dropout(mlp.proj(gelu(mlp.fc(ln2(x)))))
        h = F.layer_norm(x, (C,), self.ln2, None, LAYER_NORM_EPS)
        return x + F.dropout(self.mlp_proj(F.gelu(self.fc(h))), self.dropout, self.training)


class BenchNanoGPT(torch.nn.Module):
    """The GPT as an ordinary nanoGPT-style nn.Module, for the speed comparison.

    nanoGPT with bias=False, written the way a PyTorch user would:
    nn.Embedding, nn.Linear (q, k, v fused into one C x 3C layer), the
    library's layer_norm (weight only: torch 1.13's nn.LayerNorm has no
    bias=False), gelu, softmax and cross_entropy, and the head tied to the
    token embedding. Initialised as nanoGPT does (N(0, 0.02), the residual
    projections N(0, 0.02/sqrt(2L)), norm weights 1). The self-test checks
    that it computes what gpt_forward() computes.
    """

    def __init__(self, V, block_size, C, n_head, n_layer, dropout):
        """A model with vocabulary V, context block_size, C channels, n_head heads, n_layer blocks."""
        super().__init__()
        self.dropout = dropout
        self.tok_emb = torch.nn.Embedding(V, C)
        self.pos_emb = torch.nn.Embedding(block_size, C)
        self.blocks = torch.nn.ModuleList(BenchBlock(block_size, C, n_head, dropout)
                                          for _ in range(n_layer))
        self.ln_f = torch.nn.Parameter(torch.ones(C))
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") else 0.02
                    p.normal_(0.0, std)

    def forward(self, idx, targets):
        """Mean cross-entropy loss and logits [B,T,V] for token ids idx, targets [B,T]."""
        B, T = idx.shape
        C = self.tok_emb.embedding_dim
        F = torch.nn.functional
        x = F.dropout(self.tok_emb(idx) + self.pos_emb(torch.arange(T)), self.dropout,
                      self.training)                                            # [B,T,C]
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, (C,), self.ln_f, None, LAYER_NORM_EPS)
        logits = F.linear(x, self.tok_emb.weight)                               # [B,T,V] tied
        loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
        return loss, logits

    def load_reference(self, params):
        """Copy in parameters named as in gpt_param_shapes (a dict name -> tensor)."""
        with torch.no_grad():
            self.tok_emb.weight.copy_(params["tok_emb.weight"])
            self.pos_emb.weight.copy_(params["pos_emb.weight"])
            for i, block in enumerate(self.blocks):
                p = f"blocks.{i}."
                block.ln1.copy_(params[p + "ln1.weight"])
                block.qkv.weight.copy_(torch.cat([params[f"{p}attn.{n}.weight"] for n in "qkv"]))
                block.proj.weight.copy_(params[p + "attn.proj.weight"])
                block.ln2.copy_(params[p + "ln2.weight"])
                block.fc.weight.copy_(params[p + "mlp.fc.weight"])
                block.mlp_proj.weight.copy_(params[p + "mlp.proj.weight"])
            self.ln_f.copy_(params["ln_f.weight"])


def read_safetensors_metadata(path):
    """The "__metadata__" dict of a .safetensors file, reading only its header."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(header_len).decode("utf-8")).get("__metadata__", {})


def loaded_blas_libraries():
    """Real paths of the BLAS libraries mapped into this process (from /proc/self/maps)."""
    found = set()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and "blas" in os.path.basename(fields[5]).lower():
                found.add(os.path.realpath(fields[5]))
    return sorted(found)


def cmd_bench_torch_worker(args):
    """One PyTorch measurement, in a process of its own (`bench` starts it).

    Trains BenchGPT (--arch card) or BenchNanoGPT (--arch gpt) with
    torch.optim.SGD on random windows of the text, the vocabulary taken from
    a tinygpt checkpoint: args.warmup steps, then
    args.timed steps each timed with time.perf_counter around forward, loss,
    zero_grad, backward and optimizer.step. Prints one JSON object.
    """
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vocab = read_safetensors_metadata(args.vocab_from)["vocab"]
    to_id = {ch: i for i, ch in enumerate(vocab)}
    with open(args.data, encoding="utf-8", newline="") as f:
        # int32, like tinygpt's token array: a Python list would add tens of MB.
        ids = array.array("i", (to_id[ch] for ch in f.read()))
    tokens = torch.frombuffer(ids, dtype=torch.int32)
    B, T = args.batch, args.context

    if args.arch == "gpt":
        model = BenchNanoGPT(len(vocab), T, args.embd, args.heads, args.layers, args.dropout)
    else:
        model = BenchGPT(len(vocab), T, args.embd, args.heads, args.dropout)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step_ms, losses = [], []
    for _ in range(args.warmup + args.timed):
        # The batch: B random windows of T+1 tokens (made outside the timing,
        # as tinygpt makes its batch outside its timing).
        starts = torch.randint(len(tokens) - T, (B, 1))
        window = tokens[starts + torch.arange(T + 1)].long()
        inputs, targets = window[:, :-1].contiguous(), window[:, 1:].contiguous()

        start = time.perf_counter()
        loss, _ = model(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        seconds = time.perf_counter() - start
        step_ms.append(1e3 * seconds)
        losses.append(loss.item())
    print(json.dumps({
        "step_ms": step_ms[args.warmup:],
        "loss_first": losses[0], "loss_last": losses[-1],
        "threads": torch.get_num_threads(),
        "blas": loaded_blas_libraries(),
    }))
    return 0


# A child of this process starts with this process's resident size (PyTorch
# loaded: over 200 MB) as its ru_maxrss: exec keeps the high-water mark of the
# memory it replaces. So each measured command runs under a small reaper that
# starts it, waits for it with wait4 and writes its ru_maxrss (KiB) to a file.
# GNU time does that; where it is missing, this Python one does (python3 -I -S).
PYTHON_REAPER = """\
import os, sys
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def rss_reaper(rss_file):
    """The command prefix that runs a command and writes its peak RSS in KiB to "rss_file".

    A command reads at least the reaper's own size (about 1 MB for GNU time,
    8 MB for the Python reaper): the report shows /bin/true's reading.
    """
    if os.access("/usr/bin/time", os.X_OK):
        return ["/usr/bin/time", "-f", "%M", "-o", rss_file]
    return [sys.executable, "-I", "-S", "-c", PYTHON_REAPER, rss_file]


def run_measured(command, env=None):
    """Run "command" to completion under rss_reaper, output captured.

    Returns (exit status, peak resident memory in MB or None, stdout, stderr).
    """
    with tempfile.TemporaryDirectory() as tmp, \
            tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        rss_file = os.path.join(tmp, "maxrss")
        status = subprocess.run(rss_reaper(rss_file) + command, stdout=out, stderr=err,
                                env=env, text=True).returncode
        try:
            with open(rss_file) as f:
                # GNU time puts "Command exited with non-zero status N" first on failure.
                rss_mb = int(f.read().split()[-1]) * 1024 / MB  # KiB on Linux
        except (OSError, ValueError, IndexError):
            rss_mb = None
        out.seek(0)
        err.seek(0)
        return status, rss_mb, out.read(), err.read()


def bench_fail(command, status, stderr):
    """Stop the benchmark: "command" exited with "status"; show its stderr's end."""
    print("+ " + shlex.join(command), file=sys.stderr)
    print("\n".join(stderr.splitlines()[-20:]), file=sys.stderr)
    sys.exit(f"bench: FAIL: {command[0]} exited with status {status}")


def bench_arch_flags(args, config):
    """The `tinygpt train` flags that choose "config"'s model."""
    if config.arch == "gpt":
        return ["--arch", "gpt", "--layers", str(config.layers)]
    return card_arch_flags(args.tinygpt)


def bench_tinygpt_train(args, config, threads, out_dir):
    """Train "config" with tinygpt at "threads" threads; return a measurement dict.

    The dict holds step_ms (the timed steps, from log.csv), rss_mb, the first
    and last training loss, and memory_mb: the total from tinygpt's stderr
    line `memory: ... = X.X MB` (None when tinygpt does not print one).
    """
    command = [args.tinygpt, "train", args.data, "--out", out_dir,
               "--steps", str(args.warmup + args.timed)] + bench_arch_flags(args, config) + [
               "--batch", str(config.B), "--context", str(config.T), "--embd", str(config.C),
               "--heads", str(config.NH), "--dropout", str(config.dropout),
               "--lr", str(BENCH_LR), "--val-fraction", "0", "--threads", str(threads)]
    status, rss_mb, _, stderr = run_measured(command)
    if status != 0:
        bench_fail(command, status, stderr)
    with open(os.path.join(out_dir, "log.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    timed = [row for row in rows if int(row["step"]) >= args.warmup]
    if len(timed) != args.timed:
        sys.exit(f"bench: FAIL: {out_dir}/log.csv has {len(timed)} steps after the warm-up, "
                 f"expected {args.timed}")
    claim = re.search(r"^memory:.*=\s*([0-9.]+)\s*MB\s*$", stderr, re.MULTILINE)
    return {"step_ms": [float(row["ms"]) for row in timed], "rss_mb": rss_mb,
            "loss_first": float(rows[0]["train_loss"]), "loss_last": float(rows[-1]["train_loss"]),
            "memory_mb": float(claim.group(1)) if claim else None}


# How PyTorch's OpenMP threads wait between parallel loops: passive (sleep at
# once; without it, its spinning threads fight and it runs up to 2.6x slower
# here), and the short spin tinygpt itself uses by default (src/main.c), so
# that PyTorch gets whatever that is worth too.
TORCH_WAITS = {"PyTorch": {"OMP_WAIT_POLICY": "PASSIVE"},
               "PyTorch spin": {"GOMP_SPINCOUNT": "1000"}}


def bench_impls(threads):
    """The runs at "threads" threads; with one thread there is no one to wait for."""
    return ["tinygpt", "PyTorch"] + (["PyTorch spin"] if threads > 1 else [])


def bench_torch_train(args, config, threads, vocab_from, impl="PyTorch"):
    """Train "config" with PyTorch at "threads" threads, in a fresh process.

    The worker runs with the waiting of TORCH_WAITS[impl] and the OpenMP/BLAS
    thread counts set to "threads" (and calls torch.set_num_threads). Returns
    a measurement dict like bench_tinygpt_train's, plus the BLAS it loaded.
    """
    command = [sys.executable, os.path.abspath(__file__), "bench-torch-worker",
               "--data", args.data, "--vocab-from", vocab_from, "--arch", config.arch,
               "--layers", str(config.layers), "--batch", str(config.B),
               "--context", str(config.T), "--embd", str(config.C), "--heads", str(config.NH),
               "--dropout", str(config.dropout), "--lr", str(BENCH_LR),
               "--threads", str(threads), "--warmup", str(args.warmup), "--timed", str(args.timed)]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(TORCH_WAITS[impl], OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    status, rss_mb, stdout, stderr = run_measured(command, env)
    if status != 0:
        bench_fail(command, status, stderr)
    result = json.loads(stdout)
    result["rss_mb"] = rss_mb
    result["memory_mb"] = None
    return result


def bench_sample(args, model_path, threads, cache):
    """tinygpt's generation speed in tokens/s (its own stderr report) and peak RSS (MB).

    "cache" False adds --no-cache (recompute every position for every token).
    """
    command = [args.tinygpt, "sample", "--model", model_path, "--tokens", str(BENCH_SAMPLE_TOKENS),
               "--seed", "1", "--temperature", "1", "--threads", str(threads)]
    if not cache:
        command.append("--no-cache")
    status, rss_mb, _, stderr = run_measured(command)
    if status != 0:
        bench_fail(command, status, stderr)
    found = re.search(r"sampled (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tokens/s\)", stderr)
    if not found:
        sys.exit(f"bench: FAIL: no 'sampled N tokens in X s (Y tokens/s)' line from: "
                 f"{shlex.join(command)}")
    return float(found.group(3)), rss_mb


def sample_has_no_cache_flag(tinygpt):
    """True when `tinygpt sample --help` lists --no-cache."""
    result = subprocess.run([tinygpt, "sample", "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return "--no-cache" in result.stdout


def forward_flops_per_token(config, V):
    """Forward-pass FLOPs per token of "config"'s model with vocabulary V
    (multiply-adds count 2), as the report states. A training step costs 3
    times the forward.

    card: 2*C*3C (q, k, v) + 2*C*C (proj) + 2*C*V (head) + 4*C*(T+1)/2 (scores
    and the weighted sum of values, over the (T+1)/2 positions a token sees
    on average).
    gpt, per layer: 2*C*3C (q, k, v) + 2*C*C (attn.proj) + 2*C*4C (mlp.fc)
    + 2*4C*C (mlp.proj) = 24*C^2 for the linears, plus 2*2*C*(T+1)/2 for
    the scores and the weighted sum; then 2*C*V for the tied head.
    Embeddings, layer norms, gelu, softmax and the loss are not counted.
    """
    C, T = config.C, config.T
    attention = 2 * 2 * C * (T + 1) / 2
    if config.arch == "gpt":
        return config.layers * (24 * C * C + attention) + 2 * C * V
    return 2 * C * 3 * C + 2 * C * C + 2 * C * V + attention


def throughput(step_ms, tokens_per_step):
    """(median, min, max) tokens/s over the timed steps."""
    rates = sorted(tokens_per_step / (ms / 1e3) for ms in step_ms)
    return statistics.median(rates), rates[0], rates[-1]


def machine_description():
    """A line naming the CPU (from /proc/cpuinfo) and the number of cores."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    usable = len(os.sched_getaffinity(0))
    return f"{model}, {os.cpu_count()} logical CPUs ({usable} usable by this process)"


def default_bench_data():
    """The default --data: ../shared/data/tinyshakespeare.txt beside the repository
    if it exists, else data/moby-dick.txt (both relative to the current directory)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shared = os.path.join(repo, "..", "shared", "data", "tinyshakespeare.txt")
    if os.path.exists(shared):
        return os.path.relpath(shared)
    return os.path.relpath(os.path.join(repo, "data", "moby-dick.txt"))


def format_ratio(x):
    """A speed ratio such as 1.23x."""
    return f"{x:.2f}x"


def bench_model_name(config):
    """"card" or "gpt, 4 layers": the model a config trains."""
    return "card" if config.arch == "card" else f"{config.arch}, {config.layers} layers"


def bench_report(info, results, samples, no_cache_supported):
    """The markdown report, as a string.

    "info": header facts (strings). "results": one dict per config with keys
    config, V, runs (a list of (implementation, threads, measurement)).
    "samples": a list of (config, mode, threads, tokens/s, rss_mb).
    """
    lines = ["# tinygpt vs PyTorch: training and sampling speed", ""]
    lines += [f"- {key}: {value}" for key, value in info]
    lines += ["", "## FLOP count", "",
              "Per token, the forward pass costs (a multiply-add is 2 FLOPs)",
              ""]
    if any(r["config"].arch == "card" for r in results):
        lines += ["    card: F = 2*C*3C (q, k, v) + 2*C*C (proj) + 2*C*V (head) + 4*C*(T+1)/2",
                  "              (scores and weighted sum over the (T+1)/2 visible positions "
                  "on average)",
                  "            = 8*C^2 + 2*C*V + 2*C*(T+1)",
                  ""]
    if any(r["config"].arch == "gpt" for r in results):
        lines += ["    gpt:  F = L * (2*C*3C (q, k, v) + 2*C*C (attn.proj) + 2*C*4C (mlp.fc) "
                  "+ 2*4C*C (mlp.proj)",
                  "                   + 2*2*C*(T+1)/2 (scores and weighted sum))",
                  "              + 2*C*V (tied head)",
                  "            = L * (24*C^2 + 2*C*(T+1)) + 2*C*V",
                  ""]
    lines += ["and a training step costs 3 x forward (backward costs twice the forward): "
              "3*F*B*T FLOPs per step, so GFLOP/s = 3*F * tokens/s / 10^9. Embeddings, "
              "layer norms, gelu, softmax, dropout, the loss and the SGD update are not counted.",
              ""]

    lines += ["## Training", "",
              "tokens/s = B*T / step time, over the timed steps: median (min-max). "
              "GFLOP/s from the median. Peak RSS: the process's ru_maxrss, MB = 10^6 bytes.", "",
              "| config | implementation | threads | tokens/s median (min-max) | ms/step | GFLOP/s "
              "| peak RSS MB | loss first -> last |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        config = r["config"]
        B, T = config.B, config.T
        step_flops = 3 * forward_flops_per_token(config, r["V"]) * B * T
        for impl, threads, m in r["runs"]:
            med, lo, hi = throughput(m["step_ms"], B * T)
            lines.append(f"| {config.name} | {impl} | {threads} | {med:,.0f} ({lo:,.0f}-{hi:,.0f}) "
                         f"| {B * T / med * 1e3:.2f} | {step_flops / (B * T) * med / 1e9:.1f} "
                         f"| {m['rss_mb']:.1f} | {m['loss_first']:.3f} -> {m['loss_last']:.3f} |")

    lines += ["", "## Summary", "",
              "Ratios of median tokens/s. \"best\" is the fastest of 1 and 2 threads (and, for "
              "PyTorch, of both ways of waiting).", "",
              "| config | model | B | T | C | NH | V | dropout | GFLOP/step "
              "| tinygpt best / PyTorch best "
              "| tinygpt 2 threads / PyTorch best | tinygpt 2 threads / 1 thread |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        config = r["config"]
        B, T = config.B, config.T
        rate = {(impl, threads): throughput(m["step_ms"], B * T)[0]
                for impl, threads, m in r["runs"]}
        tg_best, tg_threads = max((v, t) for (i, t), v in rate.items() if i == "tinygpt")
        pt_best, pt_threads, pt_impl = max((v, t, i) for (i, t), v in rate.items() if i in TORCH_WAITS)
        step_gflop = 3 * forward_flops_per_token(config, r["V"]) * B * T / 1e9
        lines.append(f"| {config.name} | {bench_model_name(config)} | {B} | {T} | {config.C} "
                     f"| {config.NH} | {r['V']} | {config.dropout:g} | {step_gflop:.3f} "
                     f"| {format_ratio(tg_best / pt_best)} (tinygpt {tg_threads} thr, "
                     f"{pt_impl} {pt_threads} thr) "
                     f"| {format_ratio(rate['tinygpt', 2] / pt_best)} "
                     f"| {format_ratio(rate['tinygpt', 2] / rate['tinygpt', 1])} |")

    lines += ["", "## tinygpt memory: its own count against the measured peak", "",
              "The count is the total of the `memory:` line tinygpt train prints on stderr; "
              "the peak RSS also holds the program, the C library, OpenMP and the corpus.", "",
              "| config | threads | `memory:` total MB | peak RSS MB | RSS - count MB |",
              "| --- | --- | --- | --- | --- |"]
    for r in results:
        for impl, threads, m in r["runs"]:
            if impl != "tinygpt":
                continue
            if m["memory_mb"] is None:
                lines.append(f"| {r['config'].name} | {threads} | (no `memory:` line) "
                             f"| {m['rss_mb']:.1f} | |")
            else:
                lines.append(f"| {r['config'].name} | {threads} | {m['memory_mb']:.1f} "
                             f"| {m['rss_mb']:.1f} | {m['rss_mb'] - m['memory_mb']:+.1f} |")

    if not samples:
        return "\n".join(lines) + "\n"
    lines += ["", "## Sampling", "",
              f"`tinygpt sample --model M --tokens {BENCH_SAMPLE_TOKENS} --seed 1 --temperature 1 "
              f"--threads N [--no-cache]`, M each model below after its training run above; "
              f"tokens/s as tinygpt reports it.", ""]
    if not no_cache_supported:
        lines += ["`tinygpt sample` does not accept `--no-cache` yet, so only the default "
                  "mode is measured.", ""]
    lines += ["| config | model | context | threads | mode | tokens/s | peak RSS MB "
              "| cache / no cache |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for config, mode, threads, rate, rss_mb in samples:
        speedup = ""
        if mode == "cache":
            no_cache = [r for c, m, t, r, _ in samples
                        if c == config and m == "no cache" and t == threads]
            speedup = format_ratio(rate / no_cache[0]) if no_cache else ""
        lines.append(f"| {config.name} | {bench_model_name(config)} | {config.T} | {threads} "
                     f"| {mode} | {rate:,.0f} | {rss_mb:.1f} | {speedup} |")
    return "\n".join(lines) + "\n"


def cmd_bench(args):
    """Measure tinygpt and PyTorch training the same models; write a markdown report."""
    began = time.time()
    load_before = os.getloadavg()
    if args.data is None:
        args.data = default_bench_data()
    if not os.path.exists(args.data):
        sys.exit(f"bench: {args.data} does not exist; fetch it with `make {args.data}` "
                 "or pass --data FILE")
    if args.timed < 1 or args.warmup < 0 or args.rounds < 1:
        sys.exit("bench: --timed and --rounds must be at least 1 and --warmup at least 0")
    names = [c.name for c in BENCH_CONFIGS]
    wanted = [n for n in args.configs.split(",") if n]
    unknown = [n for n in wanted if n not in names]
    if unknown or not wanted:
        sys.exit(f"bench: --configs {args.configs!r}: give a comma-separated list of "
                 f"{','.join(names)}")
    configs = [c for c in BENCH_CONFIGS if c.name in wanted]
    if any(c.arch == "gpt" for c in configs) and not train_has_arch_flag(args.tinygpt):
        sys.exit(f"bench: `{args.tinygpt} train --help` lists no --arch, so this tinygpt has no "
                 "GPT; leave gpt out of --configs")
    with open(args.data, encoding="utf-8", newline="") as f:
        n_chars = len(f.read())

    results, samples, blas = [], [], set()
    with tempfile.TemporaryDirectory(prefix="tinygpt-bench-") as tmp:
        sample_models = []  # (config, checkpoint)
        # Each run (config, implementation, threads) is measured once per
        # round, the rounds one after another, and the round with the highest
        # median kept: a machine shared with other jobs only ever slows a run
        # down, and interleaving gives both sides the same chances.
        best = {}
        for round_number in range(1, args.rounds + 1):
            for config in configs:
                name, B, T = config.name, config.B, config.T
                for threads in BENCH_THREADS:
                    out_dir = os.path.join(tmp, f"{name}-{threads}")
                    for impl in bench_impls(threads):
                        if impl == "tinygpt":
                            m = bench_tinygpt_train(args, config, threads, out_dir)
                        else:
                            m = bench_torch_train(args, config, threads,
                                                  os.path.join(out_dir, "model.safetensors"), impl)
                            blas.update(m["blas"])
                        med, _, _ = throughput(m["step_ms"], B * T)
                        key = (name, impl, threads)
                        if key not in best or med > throughput(best[key]["step_ms"], B * T)[0]:
                            best[key] = m
                        print(f"bench: round {round_number}/{args.rounds} {name} {impl:12s} "
                              f"{threads} thread(s): {med:10,.0f} tokens/s, "
                              f"peak RSS {m['rss_mb']:.1f} MB", file=sys.stderr, flush=True)
        for config in configs:
            name = config.name
            runs = [(impl, threads, best[name, impl, threads])
                    for threads in BENCH_THREADS
                    for impl in bench_impls(threads)]
            checkpoint = os.path.join(tmp, f"{name}-1", "model.safetensors")
            V = int(read_safetensors_metadata(checkpoint)["vocab_size"])
            results.append({"config": config, "V": V, "runs": runs})
            if name in BENCH_SAMPLE_CONFIGS:
                sample_models.append((config, checkpoint))

        no_cache_supported = sample_has_no_cache_flag(args.tinygpt)
        modes = [("cache", True), ("no cache", False)]
        if not no_cache_supported:
            modes = [("default", True)]
        for config, sample_model in sample_models:
            for threads in BENCH_THREADS:
                for mode, cache in modes:
                    rate, rss_mb = bench_sample(args, sample_model, threads, cache)
                    samples.append((config, mode, threads, rate, rss_mb))
                    print(f"bench: sample {config.name} {mode:8s} {threads} thread(s): "
                          f"{rate:10,.0f} tokens/s", file=sys.stderr, flush=True)

    _, floor_mb, _, _ = run_measured(["/bin/true"])
    blas_note = ", ".join(sorted(blas)) or "none found"
    if any("/blas/libblas" in path for path in blas):
        blas_note += (" -- **the reference (netlib) BLAS: slow, single-threaded matmuls; "
                      "PyTorch is not at its best. Install OpenBLAS (Debian: "
                      "libopenblas0-pthread) and run again.**")
    info = [
        ("command", "`" + shlex.join([sys.executable] + sys.argv) + "`"),
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(began))),
        ("machine", machine_description()),
        ("load average (1 min) at start / end",
         f"{load_before[0]:.2f} / {os.getloadavg()[0]:.2f}"),
        ("PyTorch version", f"{torch.__version__} (Python {sys.version.split()[0]})"),
        ("BLAS loaded by PyTorch", blas_note),
        ("data", f"{args.data} ({n_chars:,} characters); both use the vocabulary in "
                 "tinygpt's checkpoint metadata"),
        ("training", f"fp32, plain SGD lr {BENCH_LR}, dropout as in the summary's column (card: "
                     f"on the attention weights; gpt: nanoGPT's places), "
                     f"training mode, random windows; {args.warmup} warm-up steps "
                     f"dropped, then {args.timed} steps timed one by one; every run measured "
                     f"{args.rounds} times, interleaved, and the one with the highest median kept"),
        ("tinygpt side", f"`{args.tinygpt} train DATA --steps {args.warmup + args.timed} "
                         f"{'--arch A [--layers L] ' if train_has_arch_flag(args.tinygpt) else ''}"
                         f"--batch B --context T --embd C --heads NH --dropout P "
                         f"--lr {BENCH_LR} --val-fraction 0 --threads n`; step times from its "
                         "log.csv (forward, zero_grad, backward, SGD update)"),
        ("PyTorch side", "an nn.Module (nn.Embedding, nn.Linear with q, k, v fused into "
                         "one C x 3C layer, attention written out; for gpt nanoGPT's blocks "
                         "with bias=False: F.layer_norm with a weight and no bias, F.gelu, "
                         "the head tied to the token embedding), torch.optim.SGD; each step "
                         "timed with time.perf_counter around forward, loss, "
                         "zero_grad(set_to_none=True), backward, optimizer.step; each "
                         "measurement in a fresh process with torch.set_num_threads(n), "
                         "with OMP_WAIT_POLICY=PASSIVE (\"PyTorch\") and, at 2 threads, "
                         "also with GOMP_SPINCOUNT=1000 (\"PyTorch spin\"), tinygpt's own "
                         "default"),
        ("peak RSS", f"ru_maxrss of each measured process, through `{rss_reaper('F')[0]}` "
                     f"(a reaper waits for it); /bin/true measured the same way reads "
                     f"{floor_mb:.1f} MB, the floor"),
        ("total benchmark time", f"{time.time() - began:.0f} s"),
    ]
    report = bench_report(info, results, samples, no_cache_supported)
    print(report, end="")
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)
    print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0


def main():
    """Parse the command line and run the subcommand."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{parity,selftest,bench}")

    parity = sub.add_parser("parity",
                            help="train with tinygpt and PyTorch, compare losses and weights")
    parity.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    parity.add_argument("--data", help="training text (default: a generated synthetic text)")
    parity.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    parity.add_argument("--workdir",
                        help="keep the checkpoints and logs here (default: a temporary directory)")
    parity.add_argument("--verbose", action="store_true", help="print both losses at every step")
    parity.add_argument("--only", choices=["card", "gpt"],
                        help="check only this model (default: the card model, then the GPT)")
    parity.set_defaults(func=cmd_parity)

    selftest = sub.add_parser("selftest", help="check the reader, the model and its gradients")
    selftest.set_defaults(func=cmd_selftest)

    bench = sub.add_parser("bench", help="training and sampling speed: tinygpt against PyTorch")
    bench.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    bench.add_argument("--data", help="training text (default: ../shared/data/tinyshakespeare.txt "
                       "beside the repository if it exists, else data/moby-dick.txt)")
    bench.add_argument("--out", default="bench/results.md",
                       help="write the markdown report here too (default bench/results.md)")
    bench.add_argument("--warmup", type=int, default=BENCH_WARMUP,
                       help=f"untimed steps first (default {BENCH_WARMUP})")
    bench.add_argument("--rounds", type=int, default=BENCH_ROUNDS,
                       help="measure every run this many times, interleaved, and keep each run's "
                            "fastest (default %(default)s)")
    bench.add_argument("--timed", type=int, default=BENCH_TIMED,
                       help=f"timed steps (default {BENCH_TIMED})")
    bench.add_argument("--configs", default=",".join(c.name for c in BENCH_CONFIGS),
                       help="comma-separated configs to run (default %(default)s); sampling "
                            f"runs for those among {','.join(BENCH_SAMPLE_CONFIGS)}")
    bench.set_defaults(func=cmd_bench)

    # Internal: one PyTorch measurement, started by `bench` in a fresh process.
    worker = sub.add_parser("bench-torch-worker")
    worker.add_argument("--data", required=True)
    worker.add_argument("--vocab-from", required=True, help="a tinygpt checkpoint")
    worker.add_argument("--arch", choices=["card", "gpt"], default="card")
    worker.add_argument("--layers", type=int, default=1)
    for flag in ("--batch", "--context", "--embd", "--heads", "--threads", "--warmup", "--timed"):
        worker.add_argument(flag, type=int, required=True)
    worker.add_argument("--dropout", type=float, required=True)
    worker.add_argument("--lr", type=float, required=True)
    worker.add_argument("--seed", type=int, default=1)
    worker.set_defaults(func=cmd_bench_torch_worker)

    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
