#!/usr/bin/python3
"""torch_reference.py: an independent PyTorch implementation of tinygpt's models.

It is written from the models' descriptions (docs/model.md, src/model/model.h), not from
the C code, and checks the C program from the outside: it reads the
checkpoints tinygpt writes, replays the same training batches in float64 with
autograd, and compares the losses, the final weights and (for the GPT) the
loss `tinygpt eval` reports, also on a GPT checkpoint written here with
weights of order 1; then the GPT trained by AdamW (torch.optim.AdamW,
nanoGPT's learning-rate schedule, clip_grad_norm_), comparing the logged
learning rate and gradient norm too. `bench` times tinygpt against the same
models written as ordinary nn.Modules, and writes a markdown report.
`products` times a linear layer's three products alone on one thread,
tinygpt's beside torch.mm's. `learn` trains the default gpt with nanoGPT's
recipe in tinygpt and in PyTorch and compares the validation loss each
reaches in its training time.

    /usr/bin/python3 scripts/torch_reference.py parity --tinygpt ./tinygpt [--data FILE]
                                                       [--only card|gpt|adamw|recipe]
    /usr/bin/python3 scripts/torch_reference.py selftest
    /usr/bin/python3 scripts/torch_reference.py bench --tinygpt ./tinygpt [--data FILE] [--out FILE]
                                                      [--configs S,M,L,gpt]
    /usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt [--out FILE]
    /usr/bin/python3 scripts/torch_reference.py learn --tinygpt ./tinygpt [--data FILE] [--steps N]

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

The modern recipe's swaps (`tinygpt train --arch gpt` with --norm rmsnorm, ...;
docs/model.md), each kept in the checkpoint's metadata ("norm": "rmsnorm")
and read from there (model_swaps):
    --norm rmsnorm   ln1, ln2, ln_f: x / sqrt(mean(x^2) + eps) * weight (eps 1e-5, no bias)
    --mlp relu2      the MLP's activation: relu(x)^2 in place of gelu
    --mlp swiglu     the MLP is LLaMA's: (silu(h @ gate_proj^T) * (h @ up_proj^T)) @ down_proj^T,
                     gate/up [H,C], down [C,H], H = 8C/3 rounded down, then up to a multiple of 16
    --untied-head    logits = ln_f(x) @ head.weight^T, head.weight [V,C] its own tensor
    --pos rope       no pos_emb; each head's q and k rotated by position t: pair i =
                     channels (i, i + HS/2) (the GPT-NeoX/LLaMA half split) turns by
                     t * 10000^(-2i/HS)
    --qk-norm        each head's q and k divided by its RMS over HS (eps 1e-5, no weight),
                     before RoPE as in the modded-nanoGPT speedrun (tinygpt normalises
                     after it: a rotation keeps lengths, so the two orders agree)
parity's "recipe" check runs the GPT's checks once per swap, and once with
all of them.

GPT-2 (`tinygpt train --arch gpt2`): the GPT with a bias in every Linear
and LayerNorm (`blocks.{i}.ln1.bias`, `.attn.{q,k,v,proj}.bias`,
`.ln2.bias`, `.mlp.{fc,proj}.bias`, `ln_f.bias`), its LayerNorms here
torch's own F.layer_norm, and the MLP's GELU torch's F.gelu, exact or
(metadata "mlp": "gelu_tanh") approximate='tanh', GPT-2's. parity's "gpt2"
check runs the GPT's checks on it with each GELU.
parity trains both with plain SGD, and the GPT also with AdamW (see "the
optimizer" below) and with Muon (muon_update, written from Keller Jordan's
muon.py: the blocks' matrices by Muon, the rest by torch's AdamW); bench
times plain SGD; learn trains with AdamW.
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
import warnings

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
# nanoGPT's gpt (tinygpt's defaults before make sweep's recipe took their
# place): char tokens, LayerNorm, GELU, learned positions, a tied head, and
# nanoGPT's get_batch, windows drawn at random, as learn's PyTorch side
# draws them (the gpt's default until 2026-11-28); a swap given after one
# of these holds over it.
NANOGPT_PARTS = ["--tokenizer", "char", "--norm", "layernorm", "--mlp", "gelu", "--pos", "learned",
                 "--tied-head", "--no-qk-norm", "--order", "random"]
# The gpt of parity's runs: a fresh model takes NANOGPT_PARTS too (and any
# swap after them); a run from --init takes its parts from the file.
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
# The GPT trained by AdamW (its recipe, PARITY_ADAMW, is with the optimizer below).
LR_TOLERANCE = 1e-7         # largest allowed |tinygpt lr - reference lr| at any step
GRAD_NORM_TOLERANCE = 1e-4  # largest allowed |tinygpt grad_norm / reference grad_norm - 1|
# Which tensors decay: tinygpt's final weights must be this many times
# further from a reference with a wrong split than from the right one.
DECAY_SEPARATION = 10


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
    recommends. A tinygpt checkpoint's metadata copied here loses its checksum (tinygpt's own, XXH3-64, which Python's
    standard library cannot compute): the file says so as tinygpt's files from before checksums do, with format
    "tinygpt-1", which tinygpt loads without one.
    """
    metadata = {k: v for k, v in metadata.items() if k != "checksum"}
    if metadata.get("format") == "tinygpt-2":
        metadata["format"] = "tinygpt-1"
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


# The modern recipe's swaps a GPT may make: metadata key -> the value that
# means "not swapped" (a checkpoint without the key made no swap).
PLAIN_GPT = {"norm": "layernorm", "mlp": "gelu", "untied_head": "0", "pos": "learned", "qk_norm": "0"}


def model_swaps(meta):
    """The swaps of the GPT a checkpoint's metadata describes: key -> value,
    every key of PLAIN_GPT."""
    return {key: meta.get(key, plain) for key, plain in PLAIN_GPT.items()}


def swap_flags_meta(flags):
    """The metadata a list of swap flags asks for: ["--norm", "rmsnorm",
    "--untied-head"] -> {"norm": "rmsnorm", "untied_head": "1"} (a switch,
    a flag without a value, is "1")."""
    asked, i = {}, 0
    while i < len(flags):
        key = flags[i][2:].replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            asked[key], i = flags[i + 1], i + 2
        else:
            asked[key], i = "1", i + 1
    return asked


def swiglu_hidden(C, multiple=16):
    """SwiGLU's hidden width, LLaMA's rule: 2/3 of 4C (so its three
    matrices hold about as many numbers as GELU's two), rounded down, then
    up to a multiple of "multiple"."""
    hidden = 8 * C // 3
    return multiple * ((hidden + multiple - 1) // multiple)


def gpt_param_shapes(V, block_size, C, n_layer, swaps=None, biases=False):
    """The GPT's tensors, name -> shape, in the checkpoint's order; with
    "swaps" (model_swaps) untied_head "1", a head.weight of its own; with
    "biases" (gpt2), each Linear's and LayerNorm's bias after its weight."""
    shapes = {"tok_emb.weight": [V, C], "pos_emb.weight": [block_size, C]}
    if (swaps or {}).get("pos") == "rope":
        del shapes["pos_emb.weight"]
    for i in range(n_layer):
        shapes.update({
            f"blocks.{i}.ln1.weight": [C],
            f"blocks.{i}.attn.q.weight": [C, C],
            f"blocks.{i}.attn.k.weight": [C, C],
            f"blocks.{i}.attn.v.weight": [C, C],
            f"blocks.{i}.attn.proj.weight": [C, C],
            f"blocks.{i}.ln2.weight": [C],
        })
        if biases:
            shapes.update({f"blocks.{i}.{name}.bias": [C] for name in
                           ("ln1", "attn.q", "attn.k", "attn.v", "attn.proj", "ln2", "mlp.proj")})
            shapes[f"blocks.{i}.mlp.fc.bias"] = [4 * C]
        if (swaps or {}).get("mlp") == "swiglu":
            H = swiglu_hidden(C)
            shapes.update({f"blocks.{i}.mlp.gate_proj.weight": [H, C],
                           f"blocks.{i}.mlp.up_proj.weight": [H, C],
                           f"blocks.{i}.mlp.down_proj.weight": [C, H]})
        else:
            shapes.update({f"blocks.{i}.mlp.fc.weight": [4 * C, C],
                           f"blocks.{i}.mlp.proj.weight": [C, 4 * C]})
    shapes["ln_f.weight"] = [C]
    if biases:
        shapes["ln_f.bias"] = [C]
    if (swaps or {}).get("untied_head") == "1":
        shapes["head.weight"] = [V, C]
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


def rms_norm(x, weight):
    """RMSNorm over the last dimension, from Zhang and Sennrich (2019):
    x / sqrt(mean(x^2) + eps) * weight. No mean is taken out; eps as
    LayerNorm's. (Debian's PyTorch 1.13 has no nn.RMSNorm.)"""
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + LAYER_NORM_EPS) * weight


def rope(x, base=10000.0):
    """Rotary position embedding (Su et al. 2021) of x [B,NH,T,HS], written
    from the formula: position t turns the pair (x[..., i], x[..., i + HS/2])
    (the GPT-NeoX/LLaMA half split) by the angle t * base^(-2i/HS)."""
    T, HS = x.shape[-2], x.shape[-1]
    half = HS // 2
    inv_freq = base ** (-2.0 * torch.arange(half, dtype=x.dtype) / HS)       # [HS/2]
    angle = torch.arange(T, dtype=x.dtype)[:, None] * inv_freq[None, :]       # [T,HS/2]
    c, s = torch.cos(angle), torch.sin(angle)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def gelu(x):
    """The exact GELU: x * Phi(x) = 0.5 * x * (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """GPT-2's GELU ("gelu_new"): PyTorch's own tanh approximation."""
    return torch.nn.functional.gelu(x, approximate="tanh")


def relu2(x):
    """ReLU squared (So et al. 2021, "Primer"): relu(x)^2."""
    return torch.relu(x) ** 2


def gpt_forward(params, idx, targets, n_head, swaps=None):
    """The GPT's forward pass, dropout off; returns (loss, logits).

    "params": name -> tensor (as in gpt_param_shapes); "idx": [B,T] token ids;
    "targets": [B,T] token ids, or None for logits only (loss None);
    "swaps": the modern recipe's (model_swaps), None for the plain GPT.
    """
    swaps = dict(PLAIN_GPT, **(swaps or {}))
    norm = rms_norm if swaps["norm"] == "rmsnorm" else layer_norm
    act = {"relu2": relu2, "gelu_tanh": gelu_tanh}.get(swaps["mlp"], gelu)
    if "ln_f.bias" in params:
        # gpt2: every LayerNorm and Linear has a bias, and LayerNorm is torch's own.
        def norm(x, weight, bias):
            return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, LAYER_NORM_EPS)

        def linear(x, w, name):
            return torch.nn.functional.linear(x, w[name + ".weight"], w[name + ".bias"])
    else:
        plain_norm = norm

        def norm(x, weight, bias):
            return plain_norm(x, weight)

        def linear(x, w, name):
            return x @ w[name + ".weight"].T
    B, T = idx.shape
    C = params["tok_emb.weight"].shape[1]
    HS = C // n_head
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)

    # 1. Token plus position embedding.
    x = params["tok_emb.weight"][idx]                                         # [B,T,C]
    if swaps["pos"] != "rope":
        x = x + params["pos_emb.weight"][:T]

    for i in range(gpt_n_layer(params)):
        w = {name[len(f"blocks.{i}."):]: t for name, t in params.items()
             if name.startswith(f"blocks.{i}.")}

        # 2. Attention on the normalised stream, added back to it.
        h = norm(x, w["ln1.weight"], w.get("ln1.bias"))                         # [B,T,C]
        q, k, v = (linear(h, w, f"attn.{n}").view(B, T, n_head, HS).transpose(1, 2)
                   for n in "qkv")                                             # [B,NH,T,HS]
        if swaps["qk_norm"] == "1":
            # The speedrun's order: F.rms_norm(q, (HS,)) (no weight; torch 1.13
            # has no rms_norm), then RoPE.
            q, k = rms_norm(q, 1.0), rms_norm(k, 1.0)
        if swaps["pos"] == "rope":
            q, k = rope(q), rope(k)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(HS)).masked_fill(future, float("-inf"))
        exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))           # [B,NH,T,T]
        att = exps / exps.sum(dim=-1, keepdim=True)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)                         # heads concatenated
        x = x + linear(y, w, "attn.proj")

        # 3. The MLP on the normalised stream, added back to it.
        h = norm(x, w["ln2.weight"], w.get("ln2.bias"))
        if swaps["mlp"] == "swiglu":
            gate = h @ w["mlp.gate_proj.weight"].T                             # [B,T,H]
            silu = gate / (1.0 + torch.exp(-gate))                             # gate * sigmoid(gate)
            x = x + (silu * (h @ w["mlp.up_proj.weight"].T)) @ w["mlp.down_proj.weight"].T
        else:
            x = x + linear(act(linear(h, w, "mlp.fc")), w, "mlp.proj")           # [B,T,4C] inside

    # 4. Final norm; the head is the token embedding, transposed (tied), or
    # with untied_head a weight of its own.
    head = params["head.weight"] if swaps["untied_head"] == "1" else params["tok_emb.weight"]
    logits = norm(x, params["ln_f.weight"], params.get("ln_f.bias")) @ head.T   # [B,T,V]
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
        if name.endswith(".bias"):  # gpt2's
            params[name] = 0.5 * noise
        elif len(shape) == 1:
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


# ---- the optimizer: nanoGPT's recipe ----------------------------------------
#
# What `tinygpt train --optimizer adamw` does with the gradients each step, in
# nanoGPT's order: clip their global norm, take this step's learning rate from
# the schedule, and update the weights by AdamW. parity and learn use the
# library's own clip_grad_norm_ and torch.optim.AdamW (with nanogpt_lr and
# adamw_param_groups, which the library has no twin of); the written-out
# clip_gradients and adamw_update below say what those two compute, and the
# self-test holds them to the library's, and nanogpt_lr to torch's own
# lr_scheduler.

# A training recipe, each field as the `tinygpt train` flag of the same name
# (--optimizer, --lr, --beta1, --beta2, --weight-decay, --warmup,
# --lr-schedule, --min-lr, --grad-clip).
Recipe = collections.namedtuple(
    "Recipe", "optimizer lr beta1 beta2 weight_decay warmup schedule min_lr grad_clip")
# nanoGPT's CPU recipe for tiny Shakespeare, tinygpt's gpt defaults.
GPT_RECIPE = Recipe("adamw", 1e-3, 0.9, 0.99, 0.1, 100, "cosine", 1e-4, 1.0)
# torch.optim.AdamW's default eps, which tinygpt uses too.
ADAMW_EPS = 1e-8
# torch.nn.utils.clip_grad_norm_ adds this to the norm before dividing.
CLIP_EPS = 1e-6
# parity's AdamW run: the same recipe with a 10-step warmup and a larger
# lr, so that 50 steps go through the warmup, most of the cosine and a real
# change of the weights. Clipping at 1.0 triggers: this model's gradient norm
# on parity's batches ranges from about 0.5 to 5 (measured), and 20 of the 50
# steps clip.
PARITY_ADAMW = Recipe("adamw", 3e-3, 0.9, 0.99, 0.1, 10, "cosine", 1e-4, 1.0)


def recipe_flags(recipe):
    """The `tinygpt train` flags that ask for "recipe" (a Recipe)."""
    return ["--optimizer", recipe.optimizer, "--lr", repr(recipe.lr),
            "--beta1", repr(recipe.beta1), "--beta2", repr(recipe.beta2),
            "--weight-decay", repr(recipe.weight_decay), "--warmup", str(recipe.warmup),
            "--lr-schedule", recipe.schedule, "--min-lr", repr(recipe.min_lr),
            "--grad-clip", repr(recipe.grad_clip)]


def nanogpt_lr(it, recipe, steps):
    """The learning rate of step "it" (from 0) of a run of "steps" steps: nanoGPT's get_lr.

    1. warmup: lr * (it + 1) / (warmup + 1), rising linearly to lr;
    2. constant schedule: lr from then on;
    3. cosine: from lr at it = warmup down to min_lr at it = steps
       (nanoGPT's lr_decay_iters), half a cosine wave; min_lr after that.
    """
    if it < recipe.warmup:
        return recipe.lr * (it + 1) / (recipe.warmup + 1)
    if recipe.schedule == "constant":
        return recipe.lr
    if it > steps:
        return recipe.min_lr
    decay_ratio = (it - recipe.warmup) / (steps - recipe.warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return recipe.min_lr + coeff * (recipe.lr - recipe.min_lr)


def adamw_param_groups(named_params, weight_decay):
    """torch.optim parameter groups split as nanoGPT's configure_optimizers
    splits them: the 2-D tensors (matrices and embeddings, tok_emb among them)
    decay by "weight_decay", the others (LayerNorm weights, biases) do not.

    "named_params": (name, tensor) pairs. Each group also carries "names", the
    tensors' names in order (torch ignores the extra key), so a caller can
    say which tensor went where.
    """
    pairs = list(named_params)
    decay = [(n, p) for n, p in pairs if p.dim() >= 2]
    no_decay = [(n, p) for n, p in pairs if p.dim() < 2]
    return [{"params": [p for _, p in group], "names": [n for n, _ in group],
             "weight_decay": wd}
            for group, wd in ((decay, weight_decay), (no_decay, 0.0))]


def make_adamw(param_groups, recipe):
    """torch.optim.AdamW over "param_groups" (adamw_param_groups' split, as a
    rule) with "recipe"'s betas, eps 1e-8; the caller sets each step's lr."""
    return torch.optim.AdamW(param_groups, lr=recipe.lr, betas=(recipe.beta1, recipe.beta2),
                             eps=ADAMW_EPS)


def set_lr(optimizer, lr):
    """Give every parameter group of "optimizer" the learning rate "lr" (as nanoGPT does)."""
    for group in optimizer.param_groups:
        group["lr"] = lr


def clip_gradients(grads, max_norm):
    """What torch.nn.utils.clip_grad_norm_ does, written out; returns the norm before clipping.

    1. norm = sqrt(sum of g^2 over every element of every gradient in "grads");
    2. every gradient, in place, *= min(1, max_norm / (norm + 1e-6)).
    """
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads))
    scale = min(1.0, max_norm / (norm + CLIP_EPS))
    for g in grads:
        g.mul_(scale)
    return norm


def adamw_update(params, grads, state, lr, recipe):
    """One AdamW update of torch.optim.AdamW, written out; "params" in place.

    "params", "grads": name -> tensor; "state": {} before the first update,
    then what this function keeps in it (t and each tensor's m and v).
    For each weight w with gradient g, at update t = 1, 2, ...:
      1. w -= lr * weight_decay * w        2-D tensors only (adamw_param_groups)
      2. m  = beta1 * m + (1 - beta1) * g   the gradient's running mean
      3. v  = beta2 * v + (1 - beta2) * g^2 its running mean square
      4. m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t): undo the pull
         of the zero start
      5. w -= lr * m_hat / (sqrt(v_hat) + eps)
    """
    state["t"] = t = state.get("t", 0) + 1
    for name, w in params.items():
        g = grads[name]
        m = state.setdefault("m." + name, torch.zeros_like(w))
        v = state.setdefault("v." + name, torch.zeros_like(w))
        if w.dim() >= 2:
            w.mul_(1.0 - lr * recipe.weight_decay)                               # 1.
        m.mul_(recipe.beta1).add_((1.0 - recipe.beta1) * g)                       # 2.
        v.mul_(recipe.beta2).add_((1.0 - recipe.beta2) * g * g)                   # 3.
        m_hat = m / (1.0 - recipe.beta1 ** t)                                     # 4.
        v_hat = v / (1.0 - recipe.beta2 ** t)
        w.sub_(lr * m_hat / (v_hat.sqrt() + ADAMW_EPS))                           # 5.


def torch_scheduler_lrs(recipe, steps):
    """nanoGPT's schedule built from torch.optim.lr_scheduler instead, for the
    self-test: LinearLR for the warmup (factor (it+1)/(warmup+1) at step it),
    then CosineAnnealingLR down to min_lr at "steps" (or ConstantLR, factor 1).
    Needs warmup >= 2. Returns the lr of steps 0 .. steps-1."""
    w = recipe.warmup
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=recipe.lr)
    schedulers = torch.optim.lr_scheduler
    warmup = schedulers.LinearLR(optimizer, start_factor=1 / (w + 1), end_factor=w / (w + 1),
                                 total_iters=w - 1)
    if recipe.schedule == "cosine":
        after = schedulers.CosineAnnealingLR(optimizer, T_max=steps - w, eta_min=recipe.min_lr)
    else:
        after = schedulers.ConstantLR(optimizer, factor=1.0, total_iters=0)
    schedule = schedulers.SequentialLR(optimizer, [warmup, after], milestones=[w])
    lrs = []
    with warnings.catch_warnings():
        # SequentialLR steps the second scheduler with an epoch number, which
        # torch 1.13 warns is deprecated; it is torch's own call.
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(steps):
            lrs.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
    return lrs


# ---- data -----------------------------------------------------------------

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
def train_help(tinygpt):
    """What `tinygpt train --help` prints (once per binary)."""
    result = subprocess.run([tinygpt, "train", "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return result.stdout


def train_has_arch_flag(tinygpt):
    """True when `tinygpt train --help` lists --arch (a tinygpt that has the GPT)."""
    return "--arch" in train_help(tinygpt)


def train_has_optimizer_flag(tinygpt):
    """True when `tinygpt train --help` lists --optimizer (a tinygpt that has AdamW)."""
    return "--optimizer" in train_help(tinygpt)


def sgd_flags(tinygpt):
    """The flags that ask `tinygpt train` for plain SGD at a constant learning rate.

    Once tinygpt has --optimizer, the gpt's default is AdamW with warmup,
    a cosine schedule and clipping, so the SGD checks say what they want. A
    tinygpt from before --optimizer trains by SGD only and would refuse the
    flags, so it gets none.
    """
    if not train_has_optimizer_flag(tinygpt):
        return []
    return ["--optimizer", "sgd", "--warmup", "0", "--lr-schedule", "constant",
            "--grad-clip", "0"]


def force_flags(tinygpt):
    """The flag that lets `tinygpt train` start over in an --out holding a run.

    ["--force"]: bench trains every config into the same directory once per
    round, and learn into runs/learn/tinygpt every time it runs, and a
    tinygpt with --force refuses an --out that holds a run without it. A
    tinygpt from before --force overwrote such a run by itself and would
    refuse the flag, so it gets none.
    """
    return ["--force"] if "--force" in train_help(tinygpt) else []


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


def read_log_columns(path, columns):
    """tinygpt's log.csv as a list of dicts, one per row, column name -> float
    (None where the cell is empty), for the named "columns" only. Columns are
    found by their names in the header. Raises ParityFailure naming any that
    is missing."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ParityFailure(f"{path} has no column {', '.join(missing)} "
                                f"(its header: {','.join(reader.fieldnames or [])})")
        return [{c: float(r[c]) if r[c] != "" else None for c in columns} for r in reader]


def expected_tensors(meta):
    """name -> shape of the tensors a checkpoint with metadata "meta" must hold.

    The metadata's "arch" says which model ("card" when it is missing: the
    checkpoints from before --arch); "n_layer" how many GPT blocks.
    """
    V, C, T = int(meta["vocab_size"]), int(meta["n_embd"]), int(meta["block_size"])
    arch = meta.get("arch", "card")
    if arch in ("gpt", "gpt2"):
        return gpt_param_shapes(V, T, C, int(meta["n_layer"]), model_swaps(meta), biases=arch == "gpt2")
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
         "--lr", str(PARITY_LR)] + sgd_flags(args.tinygpt) + arch + common)
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


def arch_flags(meta):
    """--arch and --layers as a checkpoint's metadata has them (a run from
    --init must repeat them or leave them out)."""
    return ["--arch", meta["arch"], "--layers", meta["n_layer"]]


def step0_gradients(args, data, init_path, init_tensors, model, train_tokens, T, workdir):
    """Every tensor's step-0 gradient, tinygpt's against autograd's, from "init_path".

    tinygpt trains one step from it; its gradient is (w0 - w1) / lr.
    "model"(params, inputs, targets) is the GPT's mean loss. Returns one row
    per tensor, largest difference first: (max |difference|, name, max
    |gradient|, index of the worst element, tinygpt's and autograd's value
    there).
    """
    one_dir = os.path.join(workdir, "gpt-one-step-" + os.path.basename(os.path.dirname(init_path)))
    _, meta = read_safetensors(init_path)
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", "1", "--out", one_dir, "--lr", str(PARITY_LR),
         "--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
         "--val-fraction", str(PARITY_VAL_FRACTION)]
        + sgd_flags(args.tinygpt) + arch_flags(meta))
    after, _ = read_safetensors(os.path.join(one_dir, "model.safetensors"))
    params = {name: t.to(torch.float64).requires_grad_() for name, t in init_tensors.items()}
    inputs, targets = sequential_batch(train_tokens, 0, PARITY_BATCH, T)
    model(params, inputs, targets).backward()
    rows = []
    for name, p in params.items():
        c_grad = (init_tensors[name].to(torch.float64) - after[name].to(torch.float64)) / PARITY_LR
        diff = (c_grad - p.grad).abs()
        where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        rows.append((diff.max().item(), name, p.grad.abs().max().item(), where,
                     c_grad[where].item(), p.grad[where].item()))
    return sorted(rows, reverse=True)


def print_gradient_rows(label, init_path, rows):
    """Print step0_gradients' rows, mark those beyond GRAD_TOLERANCE, and say
    where in the backward pass the first wrong one lies."""
    print(f"parity {label}: step-0 gradients from {init_path}, tinygpt's (w0 - w1)/lr against "
          "autograd's, worst first:")
    for diff, name, scale, where, c, r in rows:
        mark = "  <-- differs" if diff > GRAD_TOLERANCE else ""
        print(f"  {name:28s} max |diff| {diff:.2e} at {list(where)} (tinygpt {c:+.6f}, "
              f"torch {r:+.6f}; max |grad| {scale:.2e}){mark}")
    wrong_names = {name for diff, name, *_ in rows if diff > GRAD_TOLERANCE}
    # Backward visits the tensors in this order (tok_emb last, though the tied
    # head gives it a first share at the start; an untied head is first).
    names = {name for _, name, *_ in rows}
    n_layer = gpt_n_layer(dict.fromkeys(names))
    backward_order = ["head.weight", "ln_f.weight"] + [
        f"blocks.{i}.{n}" for i in reversed(range(n_layer))
        for n in ("mlp.proj.weight", "mlp.down_proj.weight", "mlp.fc.weight", "mlp.up_proj.weight",
                  "mlp.gate_proj.weight", "ln2.weight", "attn.proj.weight",
                  "attn.v.weight", "attn.k.weight", "attn.q.weight", "ln1.weight")
    ] + ["pos_emb.weight", "tok_emb.weight"]
    backward_order = [name for name in backward_order if name in names]
    wrong = [name for name in backward_order if name in wrong_names]
    if not wrong:
        print(f"parity {label}: no gradient differs by more than {GRAD_TOLERANCE:.0e}")
        return
    first = backward_order.index(wrong[0])
    last_good = backward_order[first - 1] if first > 0 else "the loss"
    print(f"parity {label}: {len(wrong)} of {len(backward_order)} gradients differ by more than "
          f"{GRAD_TOLERANCE:.0e}; in backward order the first is {wrong[0]} (after "
          f"{last_good}, which agrees): look between those two in the backward pass "
          "(if the step-0 loss also differs, the forward is wrong first)")


def gpt_probe(args, workdir, data, init_path, meta, tokens, n_train, model, label):
    """The probe: tinygpt evaluates, and trains from, a GPT checkpoint written
    here with weights of order 1 (random_gpt_params): its eval loss, PROBE_STEPS
    training steps, and every tensor's step-0 gradient. "model"(params,
    inputs, targets) is the GPT's mean loss; "label" names the check in what
    it prints. Returns the failures.

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
    probe_dir = os.path.join(workdir, label.replace(" ", "-") + "-probe")
    os.makedirs(probe_dir, exist_ok=True)
    probe_path = os.path.join(probe_dir, "model.safetensors")
    write_safetensors(probe_path, probe, meta)
    print(f"parity {label}: wrote a probe checkpoint, weights of order 1, to {probe_path}")
    T = int(meta["block_size"])
    failures = []

    # 1. tinygpt eval of the probe.
    reply = run([args.tinygpt, "eval", "--model", probe_path, data, "--json"])
    result = json.loads([line for line in reply.splitlines() if line.startswith("{")][-1])
    stored = {name: t.to(torch.float64) for name, t in probe.items()}
    ref_loss, predicted = eval_loss(lambda i, t: model(stored, i, t), tokens, T)
    if not verdict(label, f"probe eval loss over {predicted} tokens",
                   abs(result["loss"] - ref_loss), EVAL_TOLERANCE,
                   f"; tinygpt {result['loss']:.6f}, torch {ref_loss:.6f}"):
        failures.append(f"{label} probe eval loss differs beyond tolerance")

    # 2. A few training steps from the probe.
    trained_dir = os.path.join(workdir, label.replace(" ", "-") + "-probe-trained")
    run([args.tinygpt, "train", data, "--init", probe_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(PROBE_STEPS), "--out", trained_dir,
         "--lr", str(PARITY_LR), "--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
         "--val-fraction", str(PARITY_VAL_FRACTION)] + sgd_flags(args.tinygpt)
        + arch_flags(meta))
    log = read_log(os.path.join(trained_dir, "log.csv"))
    final_tensors, _ = read_safetensors(os.path.join(trained_dir, "model.safetensors"))
    params = {name: t.clone().requires_grad_() for name, t in stored.items()}
    losses, lr_failures = replay_training(
        f"{label} probe", params, log, model, tokens[:n_train], T, args.verbose)
    failures += lr_failures
    if len(log) != PROBE_STEPS:
        failures.append(f"{label} probe log.csv has {len(log)} rows, expected {PROBE_STEPS}")
    worst_loss = max(((abs(c - r), step) for step, c, r in losses), default=(0.0, None))
    if not verdict(label, f"probe losses over {len(losses)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}"):
        failures.append(f"{label} probe losses differ beyond tolerance")
    worst_weight = largest_weight_difference(final_tensors, params)
    if not verdict(label, "probe final weights", worst_weight[0], WEIGHT_TOLERANCE,
                   f"; worst in {worst_weight[1]}"):
        failures.append(f"{label} probe final weights differ beyond tolerance")

    # 3. The step-0 gradient of every tensor, from one step of tinygpt's.
    rows = step0_gradients(args, data, probe_path, probe, model, tokens[:n_train], T, workdir)
    if not verdict(label, "probe step-0 gradients, every tensor", rows[0][0], GRAD_TOLERANCE,
                   f"; worst in {rows[0][1]}"):
        failures.append(f"{label} probe gradients differ beyond tolerance")
        print_gradient_rows(label, probe_path, rows)
    return failures


def parity_gpt(args, workdir, data, label="gpt", swap_flags=(), arch="gpt"):
    """The GPT: the same training check as the card model's, plus the step-0
    loss on its own, `tinygpt eval` of the trained model, and the probe
    (gpt_probe); returns the list of failures. On a failure it also prints
    every tensor's step-0 gradient from tinygpt's own init, to say where.

    "swap_flags" (--norm rmsnorm, ...) make the GPT one with the modern
    recipe's swaps; the model here reads them from the checkpoint's
    metadata, so the check also proves that tinygpt keeps them there.
    "label" names the check in what it prints, and its directories. "arch"
    "gpt2" checks GPT-2's model instead (parity_gpt2)."""
    if not train_has_arch_flag(args.tinygpt):
        raise ParityFailure(f"`{args.tinygpt} train --help` lists no --arch: this tinygpt has "
                            "no GPT (run with --only card to check the card model alone)")

    # 1. The initial GPT, as tinygpt initialises it.
    prefix = label.replace(" ", "-")
    init_dir, trained_dir = os.path.join(workdir, prefix + "-init"), os.path.join(workdir, prefix + "-trained")
    common = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
              "--val-fraction", str(PARITY_VAL_FRACTION)]
    # gpt2's parts are GPT-2's (it takes no --norm, --pos, ...); char tokens as the gpt's.
    parts = NANOGPT_PARTS if arch == "gpt" else ["--tokenizer", "char"]
    asked_arch = ["--arch", arch] + PARITY_GPT_ARCH_FLAGS[2:]
    run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0", "--dropout", "0"]
        + asked_arch + parts + list(swap_flags) + PARITY_MODEL_FLAGS + common)
    init_path = os.path.join(init_dir, "model.safetensors")
    init_tensors, meta = read_safetensors(init_path)
    if meta.get("arch") != arch:
        raise ParityFailure(f"{init_path}: metadata arch is {meta.get('arch')!r}, expected {arch!r}")
    vocab, n_head = check_metadata(init_tensors, meta, init_path)
    n_layer = int(meta["n_layer"])
    if str(n_layer) != PARITY_GPT_ARCH_FLAGS[3]:
        raise ParityFailure(f"{init_path}: n_layer {n_layer}, asked for {PARITY_GPT_ARCH_FLAGS[3]}")
    swaps = model_swaps(meta)
    asked = swap_flags_meta(swap_flags)
    for key in PLAIN_GPT:
        if swaps[key] != asked.get(key, PLAIN_GPT[key]):
            raise ParityFailure(f"{init_path}: metadata {key} is {swaps[key]!r}, asked for "
                                f"{' '.join(swap_flags) or 'the plain GPT'}")

    def model(p, i, t):
        return gpt_forward(p, i, t, n_head, swaps)[0]

    # 2. tinygpt trains it from that file.
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(args.steps), "--out", trained_dir,
         "--lr", str(PARITY_LR)] + sgd_flags(args.tinygpt) + asked_arch + common)
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
        failures.append(f"{label} log.csv has {len(log)} rows, expected {args.steps}")
    if not log or log[0][0] != 0:
        raise ParityFailure(f"{trained_dir}/log.csv does not start at step 0")
    losses, lr_failures = replay_training(
        label, params, log, model, tokens[:n_train], T, args.verbose)
    failures += lr_failures

    # 4. Compare: the step-0 loss (the forward pass alone, from the shared
    # init), every step's loss, the final weights.
    _, c0, r0 = losses[0]
    if not verdict(label, "step-0 loss", abs(c0 - r0), LOSS_TOLERANCE,
                   f"; tinygpt {c0:.6f}, torch {r0:.6f}"):
        failures.append(f"{label} step-0 loss differs beyond tolerance")
    worst_loss = max((abs(c - r), step) for step, c, r in losses)
    if not verdict(label, f"losses over {len(losses)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}; loss {losses[0][2]:.4f} -> "
                   f"{losses[-1][2]:.4f}"):
        failures.append(f"{label} losses differ beyond tolerance")
    worst_weight = largest_weight_difference(final_tensors, params)
    if not verdict(label, "final weights", worst_weight[0], WEIGHT_TOLERANCE,
                   f"; worst in {worst_weight[1]}"):
        failures.append(f"{label} final weights differ beyond tolerance")

    # 5. `tinygpt eval` of the trained model against the same windows here,
    # with the weights as stored (float32, widened).
    reply = run([args.tinygpt, "eval", "--model", final_path, data, "--json"])
    result = json.loads([line for line in reply.splitlines() if line.startswith("{")][-1])
    stored = {name: t.to(torch.float64) for name, t in final_tensors.items()}
    ref_loss, predicted = eval_loss(lambda i, t: model(stored, i, t), tokens, T)
    if int(result["tokens"]) != predicted:
        failures.append(f"tinygpt eval scored {result['tokens']} tokens, expected {predicted}")
    if not verdict(label, f"eval loss over {predicted} tokens", abs(result["loss"] - ref_loss),
                   EVAL_TOLERANCE, f"; tinygpt {result['loss']:.6f}, torch {ref_loss:.6f}"):
        failures.append(f"{label} eval loss differs beyond tolerance")
    if abs(result["perplexity"] - math.exp(result["loss"])) > 1e-5 * result["perplexity"] + 1e-6:
        failures.append(f"tinygpt eval perplexity {result['perplexity']} is not exp(loss)")

    # 6. The same on weights of order 1, where attention and the MLP are
    # far from trivial.
    failures += gpt_probe(args, workdir, data, init_path, meta, tokens, n_train, model, label)

    # Where a failure comes from: the gradients from tinygpt's own init.
    if failures:
        print_gradient_rows(label, init_path, step0_gradients(args, data, init_path, init_tensors,
                                                              model, tokens[:n_train], T, workdir))
    return failures


# The modern recipe's swaps parity checks: each alone, then all together.
RECIPE_SWAPS = [
    ("rmsnorm", ["--norm", "rmsnorm"]),
    ("relu2", ["--mlp", "relu2"]),
    ("untied-head", ["--untied-head"]),
    ("rope", ["--pos", "rope"]),
    ("qk-norm", ["--qk-norm"]),
    ("swiglu", ["--mlp", "swiglu"]),
]


def parity_recipe(args, workdir, data):
    """The GPT's checks (parity_gpt) on a GPT with each of the modern
    recipe's swaps, then with all of them; returns the list of failures.
    A GPT has one MLP: "all" takes the last of RECIPE_SWAPS' --mlp values
    (tinygpt refuses a flag given twice)."""
    failures = []
    chosen = {}
    for _, flags in RECIPE_SWAPS:
        chosen.update({flags[0]: flags})  # one entry per flag; a later --mlp replaces an earlier
    cases = RECIPE_SWAPS + [("all", [f for flags in chosen.values() for f in flags])]
    for name, flags in cases:
        failures += parity_gpt(args, workdir, data, label=f"gpt {name}", swap_flags=flags)
    return failures


def parity_gpt2(args, workdir, data):
    """GPT-2's model (--arch gpt2): the GPT's checks (parity_gpt) with its
    biases, once with GPT-2's tanh GELU and once with the exact one; returns
    the list of failures. Its biases start at 0, so the trained weights and
    the probe (every bias N(0, 0.5^2)) are what put them in the sums."""
    failures = []
    for name, flags in (("gelu_tanh", ["--mlp", "gelu_tanh"]), ("gelu", ["--mlp", "gelu"])):
        failures += parity_gpt(args, workdir, data, label=f"gpt2 {name}", swap_flags=flags, arch="gpt2")
    return failures


def replay_adamw(params, recipe, steps, loss_fn, train_tokens, T, groups=None):
    """Train "params" (name -> float64 tensor, requires_grad) in place for
    "steps" steps of "recipe" on sequential batches, as nanoGPT trains:
    forward, backward, clip_grad_norm_, this step's nanogpt_lr, AdamW step.

    "groups"(named_params) gives the parameter groups (default
    adamw_param_groups: the 2-D tensors decay). Returns one dict per step:
    loss (before the update), lr, grad_norm (before clipping).
    """
    if groups is None:
        groups = functools.partial(adamw_param_groups, weight_decay=recipe.weight_decay)
    optimizer = make_adamw(groups(params.items()), recipe)
    rows = []
    for step in range(steps):
        lr = nanogpt_lr(step, recipe, steps)
        set_lr(optimizer, lr)
        inputs, targets = sequential_batch(train_tokens, step, PARITY_BATCH, T)
        loss = loss_fn(params, inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), recipe.grad_clip)
        optimizer.step()
        rows.append({"loss": loss.item(), "lr": lr, "grad_norm": norm.item()})
    return rows


# parity's Muon run: PARITY_ADAMW's schedule and clipping, with Muon for the
# blocks' matrices at --muon-lr (its default, 0.02) and AdamW for the rest.
PARITY_MUON = PARITY_ADAMW._replace(optimizer="muon")
PARITY_MUON_LR = 0.02
# Muon's constants (muon.py's): momentum, Newton-Schulz steps, the quintic's
# coefficients and the epsilon of the first scaling.
MUON_MOMENTUM = 0.95
MUON_NS_STEPS = 5
MUON_NS_COEFFS = (3.4445, -4.7750, 2.0315)
MUON_NS_EPS = 1e-7


def uses_muon(name, param):
    """Whether Muon moves a tensor: a 2-D tensor of a block."""
    return name.startswith("blocks.") and param.dim() == 2


def newton_schulz(g, steps=MUON_NS_STEPS):
    """Keller Jordan's zeropower_via_newtonschulz5, written from its formula:
    X = G / (|G|_F + eps), wide (X^T when G is tall), then "steps" times
    A = X X^T, X = a X + (b A + c A A) X, turned back. In "g"'s dtype (muon.py
    uses bfloat16 on a GPU; here float64)."""
    a, b, c = MUON_NS_COEFFS
    X = g / (g.norm() + MUON_NS_EPS)
    tall = g.shape[0] > g.shape[1]
    if tall:
        X = X.T
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X.T if tall else X


@torch.no_grad()
def muon_update(param, grad, buf, lr, shape_scale=True):
    """One Muon step of "param" (a matrix) from "grad", with its momentum
    buffer "buf" (muon.py's muon_update, nesterov, then p.add_(update,
    alpha=-lr)): buf = beta buf + (1 - beta) grad; u = (1 - beta) grad + beta buf;
    param -= lr * sqrt(max(1, rows/cols)) * newton_schulz(u). "shape_scale"
    False leaves the sqrt out (a wrong Muon, for the check that can tell)."""
    buf.mul_(MUON_MOMENTUM).add_(grad, alpha=1 - MUON_MOMENTUM)
    u = (1 - MUON_MOMENTUM) * grad + MUON_MOMENTUM * buf
    scale = max(1.0, param.shape[0] / param.shape[1]) ** 0.5 if shape_scale else 1.0
    param.add_(newton_schulz(u), alpha=-lr * scale)


def replay_muon(params, recipe, muon_lr, steps, loss_fn, train_tokens, T, shape_scale=True):
    """replay_adamw with Muon: torch's AdamW (nanoGPT's split) on the tensors
    Muon does not move, at each step's nanogpt_lr; Muon (muon_update) on the
    blocks' matrices at muon_lr times the same step's lr / recipe.lr, as
    tinygpt scales it. Clipping is over every gradient, before both."""
    adam_named = [(n, p) for n, p in params.items() if not uses_muon(n, p)]
    optimizer = make_adamw(adamw_param_groups(adam_named, recipe.weight_decay), recipe)
    muon_named = [(n, p) for n, p in params.items() if uses_muon(n, p)]
    buffers = {n: torch.zeros_like(p) for n, p in muon_named}
    rows = []
    for step in range(steps):
        lr = nanogpt_lr(step, recipe, steps)
        set_lr(optimizer, lr)
        inputs, targets = sequential_batch(train_tokens, step, PARITY_BATCH, T)
        loss = loss_fn(params, inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        for _, p in muon_named:
            p.grad = None
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), recipe.grad_clip)
        optimizer.step()
        step_muon_lr = muon_lr * (lr / recipe.lr)
        for n, p in muon_named:
            muon_update(p, p.grad, buffers[n], step_muon_lr, shape_scale)
        rows.append({"loss": loss.item(), "lr": lr, "grad_norm": norm.item()})
    return rows


def parity_gpt_muon(args, workdir, data):
    """The GPT trained by Muon (its blocks' matrices) and AdamW (the rest):
    tinygpt against replay_muon (float64) from the same init on the same
    sequential batches, with PARITY_MUON's schedule and clipping. Compares
    every step's loss, lr and gradient norm and the final weights, and that
    the final weights are clearly not those of a Muon without its
    sqrt(rows/cols) scale. Returns the failures."""
    recipe = PARITY_MUON
    init_dir = os.path.join(workdir, "gpt-init")
    common = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
              "--val-fraction", str(PARITY_VAL_FRACTION)]
    init_path = os.path.join(init_dir, "model.safetensors")
    if not os.path.exists(init_path):
        run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0", "--dropout", "0"]
            + PARITY_GPT_ARCH_FLAGS + NANOGPT_PARTS + PARITY_MODEL_FLAGS + common)
    init_tensors, meta = read_safetensors(init_path)
    vocab, n_head = check_metadata(init_tensors, meta, init_path)

    trained_dir = os.path.join(workdir, "gpt-muon-trained")
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(args.steps), "--out", trained_dir,
         "--muon-lr", repr(PARITY_MUON_LR)]
        + recipe_flags(recipe) + PARITY_GPT_ARCH_FLAGS + common)
    log = read_log_columns(os.path.join(trained_dir, "log.csv"),
                           ["step", "train_loss", "lr", "grad_norm"])
    final_tensors, _ = read_safetensors(os.path.join(trained_dir, "model.safetensors"))
    if [int(r["step"]) for r in log] != list(range(args.steps)):
        raise ParityFailure(f"{trained_dir}/log.csv does not hold steps 0..{args.steps - 1}")

    tokens = read_tokens(data, vocab)
    n_train = len(tokens) - math.floor(len(tokens) * PARITY_VAL_FRACTION)
    T = int(meta["block_size"])
    def loss_fn(p, i, t):
        return gpt_forward(p, i, t, n_head)[0]
    replays = {}
    for name, shape_scale in (("muon", True), ("muon without its shape scale", False)):
        params = {n: t.to(torch.float64).requires_grad_() for n, t in init_tensors.items()}
        rows = replay_muon(params, recipe, PARITY_MUON_LR, args.steps, loss_fn, tokens[:n_train], T,
                           shape_scale)
        replays[name] = (params, rows)
    params, rows = replays["muon"]
    print(f"parity gpt muon: Muon moves {', '.join(n for n, p in params.items() if uses_muon(n, p))}; "
          f"AdamW the rest")
    if args.verbose:
        for c, r in zip(log, rows):
            print(f"  gpt muon step {int(c['step']):3d}  loss tinygpt {c['train_loss']:.6f} "
                  f"torch {r['loss']:.6f}  grad_norm {c['grad_norm']:.6f}/{r['grad_norm']:.6f}")

    failures = []
    worst_loss = max((abs(c["train_loss"] - r["loss"]), s) for s, (c, r) in enumerate(zip(log, rows)))
    if not verdict("gpt muon", f"losses over {len(rows)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}; loss {rows[0]['loss']:.4f} -> "
                   f"{rows[-1]['loss']:.4f}"):
        failures.append("gpt muon losses differ beyond tolerance")
    worst_lr = max((abs(c["lr"] - r["lr"]), s) for s, (c, r) in enumerate(zip(log, rows)))
    if not verdict("gpt muon", "logged lr (warmup, then cosine)", worst_lr[0], LR_TOLERANCE,
                   f"; worst at step {worst_lr[1]}"):
        failures.append("gpt muon learning rates differ beyond tolerance")
    worst_norm = max((abs(c["grad_norm"] / r["grad_norm"] - 1), s)
                     for s, (c, r) in enumerate(zip(log, rows)))
    if not verdict("gpt muon", "logged grad_norm, relative", worst_norm[0], GRAD_NORM_TOLERANCE,
                   f"; worst at step {worst_norm[1]}"):
        failures.append("gpt muon gradient norms differ beyond tolerance")
    worst_weight = largest_weight_difference(final_tensors, params)
    if not verdict("gpt muon", "final weights", worst_weight[0], WEIGHT_TOLERANCE,
                   f"; worst in {worst_weight[1]}"):
        failures.append("gpt muon final weights differ beyond tolerance")
    # The tall matrices (mlp.fc, 4C x C) are where the shape scale acts.
    names = [n for n, p in params.items() if uses_muon(n, p) and p.shape[0] > p.shape[1]]
    right = max(largest_weight_difference(final_tensors, {n: params[n]})[0] for n in names)
    wrong_params = replays["muon without its shape scale"][0]
    off = max(largest_weight_difference(final_tensors, {n: wrong_params[n]})[0] for n in names)
    passed = right <= WEIGHT_TOLERANCE and off > DECAY_SEPARATION * right
    print(f"parity gpt muon: {'PASS' if passed else 'FAIL'} tall matrices scaled by sqrt(rows/cols): "
          f"tinygpt's {len(names)} within {right:.2e} of the reference, {off:.2e} from a Muon "
          f"without the scale (must be over {DECAY_SEPARATION}x)", flush=True)
    if not passed:
        failures.append("gpt muon: the shape scale does not hold")
    return failures


def parity_gpt_adamw(args, workdir, data):
    """The GPT trained by AdamW: tinygpt and torch.optim.AdamW (float64) from
    the same init on the same sequential batches, with PARITY_ADAMW's warmup,
    cosine schedule and clipping. Compares every step's loss, learning rate
    and gradient norm and the final weights, checks that clipping happened,
    and that the weight decay went to the 2-D tensors only. Returns the
    failures."""
    if not train_has_optimizer_flag(args.tinygpt):
        raise ParityFailure(f"`{args.tinygpt} train --help` lists no --optimizer: this tinygpt "
                            "has no AdamW (run with --only card or --only gpt)")
    recipe = PARITY_ADAMW

    # 1. The initial GPT, as tinygpt initialises it (the SGD check's, if it ran).
    init_dir = os.path.join(workdir, "gpt-init")
    common = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
              "--val-fraction", str(PARITY_VAL_FRACTION)]
    init_path = os.path.join(init_dir, "model.safetensors")
    if not os.path.exists(init_path):
        run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0", "--dropout", "0"]
            + PARITY_GPT_ARCH_FLAGS + NANOGPT_PARTS + PARITY_MODEL_FLAGS + common)
    init_tensors, meta = read_safetensors(init_path)
    vocab, n_head = check_metadata(init_tensors, meta, init_path)

    # 2. tinygpt trains it with the recipe.
    trained_dir = os.path.join(workdir, "gpt-adamw-trained")
    run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
         "--dropout", "0", "--steps", str(args.steps), "--out", trained_dir]
        + recipe_flags(recipe) + PARITY_GPT_ARCH_FLAGS + common)
    log = read_log_columns(os.path.join(trained_dir, "log.csv"),
                           ["step", "train_loss", "lr", "grad_norm"])
    final_tensors, _ = read_safetensors(os.path.join(trained_dir, "model.safetensors"))
    failures = []
    if [int(r["step"]) for r in log] != list(range(args.steps)):
        raise ParityFailure(f"{trained_dir}/log.csv does not hold steps 0..{args.steps - 1}")

    # 3. The same in float64 here: nanoGPT's split of the parameters, and two
    # wrong splits to show the weight comparison can tell them apart: every
    # tensor decaying (LayerNorm weights too), and minGPT's split, where the
    # embeddings do not decay.
    tokens = read_tokens(data, vocab)
    n_train = len(tokens) - math.floor(len(tokens) * PARITY_VAL_FRACTION)
    T = int(meta["block_size"])
    def loss_fn(p, i, t):
        return gpt_forward(p, i, t, n_head)[0]
    def split(decays):
        def groups(named_params):
            pairs = list(named_params)
            return [{"params": [p for n, p in pairs if decays(n, p)],
                     "weight_decay": recipe.weight_decay},
                    {"params": [p for n, p in pairs if not decays(n, p)], "weight_decay": 0.0}]
        return groups
    replays = {}
    for name, groups in (("nanoGPT", None),
                         ("every tensor decays", split(lambda n, p: True)),
                         ("embeddings do not decay",
                          split(lambda n, p: p.dim() >= 2 and "_emb." not in n))):
        params = {n: t.to(torch.float64).requires_grad_() for n, t in init_tensors.items()}
        rows = replay_adamw(params, recipe, args.steps, loss_fn, tokens[:n_train], T, groups)
        replays[name] = (params, rows)
    params, rows = replays["nanoGPT"]
    groups = adamw_param_groups(params.items(), recipe.weight_decay)
    print(f"parity gpt adamw: decays {', '.join(groups[0]['names'])}; "
          f"does not decay {', '.join(groups[1]['names'])}")
    if args.verbose:
        for c, r in zip(log, rows):
            print(f"  gpt adamw step {int(c['step']):3d}  loss tinygpt {c['train_loss']:.6f} "
                  f"torch {r['loss']:.6f}  lr {c['lr']:.6g}/{r['lr']:.6g}  "
                  f"grad_norm {c['grad_norm']:.6f}/{r['grad_norm']:.6f}")

    # 4. Compare, step by step, then the final weights.
    worst_loss = max((abs(c["train_loss"] - r["loss"]), s) for s, (c, r) in enumerate(zip(log, rows)))
    if not verdict("gpt adamw", f"losses over {len(rows)} steps", worst_loss[0], LOSS_TOLERANCE,
                   f"; worst at step {worst_loss[1]}; loss {rows[0]['loss']:.4f} -> "
                   f"{rows[-1]['loss']:.4f}"):
        failures.append("gpt adamw losses differ beyond tolerance")
    worst_lr = max((abs(c["lr"] - r["lr"]), s) for s, (c, r) in enumerate(zip(log, rows)))
    if not verdict("gpt adamw", "logged lr (warmup, then cosine)", worst_lr[0], LR_TOLERANCE,
                   f"; worst at step {worst_lr[1]}; lr {rows[0]['lr']:.3g} -> "
                   f"{max(r['lr'] for r in rows):.3g} -> {rows[-1]['lr']:.3g}"):
        failures.append("gpt adamw learning rates differ beyond tolerance")
    worst_norm = max((abs(c["grad_norm"] / r["grad_norm"] - 1), s)
                     for s, (c, r) in enumerate(zip(log, rows)))
    if not verdict("gpt adamw", "logged grad_norm, relative", worst_norm[0], GRAD_NORM_TOLERANCE,
                   f"; worst at step {worst_norm[1]}; norms "
                   f"{min(r['grad_norm'] for r in rows):.3f} .. "
                   f"{max(r['grad_norm'] for r in rows):.3f}"):
        failures.append("gpt adamw gradient norms differ beyond tolerance")
    worst_weight = largest_weight_difference(final_tensors, params)
    if not verdict("gpt adamw", "final weights", worst_weight[0], WEIGHT_TOLERANCE,
                   f"; worst in {worst_weight[1]}"):
        failures.append("gpt adamw final weights differ beyond tolerance")

    # 5. Clipping must have happened, or this check says nothing about it.
    clipped_c = sum(c["grad_norm"] > recipe.grad_clip for c in log)
    clipped_r = sum(r["grad_norm"] > recipe.grad_clip for r in rows)
    print(f"parity gpt adamw: clipping at {recipe.grad_clip:g}: tinygpt clipped {clipped_c} of "
          f"{len(log)} steps, the reference {clipped_r}")
    if clipped_c == 0 or clipped_r == 0:
        failures.append(f"gpt adamw: no step clipped at --grad-clip {recipe.grad_clip:g}, so "
                        "the check proves nothing about clipping; lower PARITY_ADAMW.grad_clip")

    # 6. Which tensors decay: tinygpt's final weights must be those of
    # nanoGPT's split, and clearly not those of either wrong one.
    for what, wrong, names in (
            ("LayerNorm weights do not decay", "every tensor decays",
             [n for n in params if params[n].dim() == 1]),
            ("embeddings decay", "embeddings do not decay",
             [n for n in params if "_emb." in n])):
        right = max(largest_weight_difference(final_tensors, {n: params[n]})[0] for n in names)
        wrong_params = replays[wrong][0]
        off = max(largest_weight_difference(final_tensors, {n: wrong_params[n]})[0]
                  for n in names)
        passed = right <= WEIGHT_TOLERANCE and off > DECAY_SEPARATION * right
        print(f"parity gpt adamw: {'PASS' if passed else 'FAIL'} {what}: tinygpt's "
              f"{len(names)} tensors within {right:.2e} of the reference, "
              f"{off:.2e} from \"{wrong}\" (must be over {DECAY_SEPARATION}x)", flush=True)
        if not passed:
            failures.append(f"gpt adamw: {what} does not hold")
    return failures


def cmd_parity(args):
    """Train with tinygpt and with this file's models on the same batches; compare."""
    with tempfile.TemporaryDirectory(prefix="tinygpt-parity-") as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        data = write_parity_data(args, workdir)
        checks = [("card", parity_card), ("gpt", parity_gpt), ("adamw", parity_gpt_adamw),
                  ("muon", parity_gpt_muon), ("recipe", parity_recipe), ("gpt2", parity_gpt2)]
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

    # 12. The optimizer's pieces against torch's own, on random tensors.
    gen = torch.Generator().manual_seed(12)
    shapes = {"a.weight": [5, 3], "b.weight": [4], "c.weight": [2, 6], "d.bias": [3]}
    def random_tensors(scale):
        return {n: scale * torch.randn(s, generator=gen, dtype=torch.float64)
                for n, s in shapes.items()}

    # 12a. clip_gradients against clip_grad_norm_, a limit below the norm
    # (clips) and above it (leaves the gradients alone).
    for max_norm in (0.5, 100.0):
        grads = random_tensors(1.0)
        mine = {n: g.clone() for n, g in grads.items()}
        norm = clip_gradients(list(mine.values()), max_norm)
        theirs = {n: torch.nn.Parameter(torch.zeros_like(g)) for n, g in grads.items()}
        for n, p in theirs.items():
            p.grad = grads[n].clone()
        torch_norm = torch.nn.utils.clip_grad_norm_(list(theirs.values()), max_norm).item()
        diff = max([abs(norm - torch_norm)] + [(mine[n] - theirs[n].grad).abs().max().item()
                                              for n in grads])
        report(f"clip_gradients matches clip_grad_norm_ (limit {max_norm:g}, norm {norm:.2f})",
               diff < 1e-12, f"(max diff {diff:.1e})")

    # 12b. adamw_update against torch.optim.AdamW (make_adamw: the 2-D
    # tensors decay), 6 updates with changing lr and gradients.
    recipe = GPT_RECIPE._replace(weight_decay=0.3)
    start = random_tensors(1.0)
    mine = {n: w.clone() for n, w in start.items()}
    theirs = {n: torch.nn.Parameter(w.clone()) for n, w in start.items()}
    optimizer = make_adamw(adamw_param_groups(theirs.items(), recipe.weight_decay), recipe)
    state = {}
    for t in range(6):
        grads = random_tensors(10.0 ** (t % 3 - 1))
        lr = 1e-2 * (t + 1)
        adamw_update(mine, grads, state, lr, recipe)
        for n, p in theirs.items():
            p.grad = grads[n].clone()
        set_lr(optimizer, lr)
        optimizer.step()
    diff = max((mine[n] - theirs[n].detach()).abs().max().item() for n in start)
    moved = min((mine[n] - start[n]).abs().max().item() for n in start)
    report("adamw_update matches torch.optim.AdamW (6 updates)", diff < 1e-12 and moved > 1e-3,
           f"(max diff {diff:.1e}, every tensor moved at least {moved:.1e})")

    # 12c. The split: 2-D tensors (tok_emb among them) decay, LayerNorm
    # weights do not.
    groups = adamw_param_groups(gpt_params.items(), 0.1)
    decays = dict.fromkeys(groups[0]["names"], True) | dict.fromkeys(groups[1]["names"], False)
    report("weight decay for the 2-D tensors only",
           decays["tok_emb.weight"] and decays["blocks.0.mlp.fc.weight"]
           and not decays["ln_f.weight"] and not decays["blocks.1.ln1.weight"]
           and groups[0]["weight_decay"] == 0.1 and groups[1]["weight_decay"] == 0.0
           and len(decays) == len(gpt_params),
           f"({len(groups[0]['names'])} decay, {len(groups[1]['names'])} do not)")

    # 12d. nanogpt_lr against the same schedule made of torch's lr_scheduler.
    for schedule, warmup, steps in (("cosine", 5, 40), ("constant", 3, 20)):
        r = GPT_RECIPE._replace(lr=3e-3, warmup=warmup, schedule=schedule)
        theirs = torch_scheduler_lrs(r, steps)
        ours = [nanogpt_lr(it, r, steps) for it in range(steps)]
        diff = max(abs(a - b) for a, b in zip(ours, theirs))
        report(f"nanogpt_lr matches torch's LinearLR + "
               f"{'CosineAnnealingLR' if schedule == 'cosine' else 'ConstantLR'}",
               diff < 1e-15 and ours[warmup] == r.lr and ours[0] == r.lr / (warmup + 1),
               f"(warmup {warmup}, {steps} steps, max diff {diff:.1e})")
    r = GPT_RECIPE._replace(lr=1.0, min_lr=0.1, warmup=0)
    report("nanogpt_lr: cosine halfway down at the middle, min_lr at it = steps and after",
           nanogpt_lr(10, r, 10) == 0.1 and abs(nanogpt_lr(5, r, 10) - 0.55) < 1e-15
           and nanogpt_lr(11, r, 10) == 0.1)

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
        return ["--arch", "gpt", "--layers", str(config.layers)] + NANOGPT_PARTS
    return card_arch_flags(args.tinygpt)


def bench_tinygpt_train(args, config, threads, out_dir):
    """Train "config" with tinygpt at "threads" threads; return a measurement dict.

    The dict holds step_ms (the timed steps, from log.csv), rss_mb, the first
    and last training loss, and memory_mb: the total from tinygpt's stderr
    line `memory: ... = X.X MB` (None when tinygpt does not print one).
    """
    command = [args.tinygpt, "train", args.data, "--out", out_dir] + force_flags(args.tinygpt) + [
               "--steps", str(args.warmup + args.timed)] + bench_arch_flags(args, config) + [
               "--batch", str(config.B), "--context", str(config.T), "--embd", str(config.C),
               "--heads", str(config.NH), "--dropout", str(config.dropout),
               "--lr", str(BENCH_LR), "--val-fraction", "0", "--threads", str(threads)]
    # PyTorch's side is torch.optim.SGD: so is tinygpt's (its gpt default is AdamW).
    command += sgd_flags(args.tinygpt)
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


def torch_cpu_capability():
    """The vectors PyTorch's own kernels use ("AVX512", "AVX2", ...), as it
    says (torch 2's get_cpu_capability), or as ATEN_CPU_CAPABILITY caps them
    (torch 1.13, Debian 12's, has no way to ask)."""
    ask = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
    if ask:
        return ask()
    cap = os.environ.get("ATEN_CPU_CAPABILITY")
    return f"ATEN_CPU_CAPABILITY={cap}" if cap else "its widest"


def measure_peak(tinygpt, threads):
    """`tinygpt peak --json --threads "threads"`, parsed: the CPU's name and
    numbers and its peak GFLOP/s on 1 thread ("gflops_1_thread") and on
    "threads" ("gflops_all_threads"); the keys are listed in
    docs/speed-and-memory.md, "The peak". None when this tinygpt has no
    `peak` command (one built before it existed)."""
    command = [tinygpt, "peak", "--json", "--threads", str(threads)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode == 2 and "unknown command" in result.stderr:
        return None
    if result.returncode != 0:
        bench_fail(command, result.returncode, result.stderr)
    return json.loads(result.stdout)


def percent_of(gflops, peak_gflops):
    """"gflops" as a share of "peak_gflops", such as 87%."""
    return f"{100 * gflops / peak_gflops:.0f}%"


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
    """The default --data: the repository's default corpus, data/moby-dick.txt
    (relative to the current directory; `make data/moby-dick.txt` fetches it).
    Nothing outside the repository: a fresh clone runs bench and learn as they are."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.relpath(os.path.join(repo, "data", "moby-dick.txt"))


def format_ratio(x):
    """A speed ratio such as 1.23x."""
    return f"{x:.2f}x"


def bench_model_name(config):
    """"card" or "gpt, 4 layers": the model a config trains."""
    return "card" if config.arch == "card" else f"{config.arch}, {config.layers} layers"


def bench_report(info, results, samples, no_cache_supported, peak=None):
    """The markdown report, as a string.

    "info": header facts (strings). "results": one dict per config with keys
    config, V, runs (a list of (implementation, threads, measurement)).
    "samples": a list of (config, mode, threads, tokens/s, rss_mb).
    "peak": measure_peak's result at max(BENCH_THREADS) threads, or None
    (then no column gives a share of it).
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
    if peak:
        lines += ["## The CPU's peak", "",
                  f"`tinygpt peak --json --threads {peak['threads']}`, run first: fused multiply-adds "
                  f"on {peak['vector_bits']}-bit vectors ({peak['instructions']}) held in registers, "
                  f"{peak['seconds']:g} s on 1 thread and {peak['seconds']:g} s on "
                  f"{peak['threads']}, on {peak['cpu']} (family {peak['family']}, model "
                  f"{peak['model']}): **{peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, "
                  f"{peak['gflops_all_threads']:.1f} on {peak['threads']}**. No product runs faster; "
                  f"a row's \"% of peak\" is its GFLOP/s over the peak of {peak['threads']} threads "
                  "(and, for 1 thread, of 1 thread).", ""]
    all_threads = peak["threads"] if peak else None

    lines += ["## Training", "",
              "tokens/s = B*T / step time, over the timed steps: median (min-max). "
              "GFLOP/s from the median. Peak RSS: the process's ru_maxrss, MB = 10^6 bytes.", "",
              "| config | implementation | threads | tokens/s median (min-max) | ms/step | GFLOP/s "
              + (f"| % of {all_threads}-thread peak | % of 1-thread peak " if peak else "")
              + "| peak RSS MB | loss first -> last |",
              "| --- | --- | --- | --- | --- | --- | " + ("--- | --- | " if peak else "")
              + "--- | --- |"]
    for r in results:
        config = r["config"]
        B, T = config.B, config.T
        step_flops = 3 * forward_flops_per_token(config, r["V"]) * B * T
        for impl, threads, m in r["runs"]:
            med, lo, hi = throughput(m["step_ms"], B * T)
            gflops = step_flops / (B * T) * med / 1e9
            shares = ""
            if peak:
                one = percent_of(gflops, peak["gflops_1_thread"]) if threads == 1 else ""
                shares = f"| {percent_of(gflops, peak['gflops_all_threads'])} | {one} "
            lines.append(f"| {config.name} | {impl} | {threads} | {med:,.0f} ({lo:,.0f}-{hi:,.0f}) "
                         f"| {B * T / med * 1e3:.2f} | {gflops:.1f} {shares}"
                         f"| {m['rss_mb']:.1f} | {m['loss_first']:.3f} -> {m['loss_last']:.3f} |")

    lines += ["", "## Summary", "",
              "Ratios of median tokens/s. \"best\" is the fastest of 1 and 2 threads (and, for "
              "PyTorch, of both ways of waiting).", "",
              "| config | model | B | T | C | NH | V | dropout | GFLOP/step "
              "| tinygpt best / PyTorch best "
              "| tinygpt 2 threads / PyTorch best | tinygpt 2 threads / 1 thread "
              "| tinygpt best GFLOP/s" + (f" (% of {all_threads}-thread peak)" if peak else "") + " |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        config = r["config"]
        B, T = config.B, config.T
        rate = {(impl, threads): throughput(m["step_ms"], B * T)[0]
                for impl, threads, m in r["runs"]}
        tg_best, tg_threads = max((v, t) for (i, t), v in rate.items() if i == "tinygpt")
        pt_best, pt_threads, pt_impl = max((v, t, i) for (i, t), v in rate.items() if i in TORCH_WAITS)
        step_gflop = 3 * forward_flops_per_token(config, r["V"]) * B * T / 1e9
        best_gflops = step_gflop / (B * T) * tg_best
        best_share = f" ({percent_of(best_gflops, peak['gflops_all_threads'])})" if peak else ""
        lines.append(f"| {config.name} | {bench_model_name(config)} | {B} | {T} | {config.C} "
                     f"| {config.NH} | {r['V']} | {config.dropout:g} | {step_gflop:.3f} "
                     f"| {format_ratio(tg_best / pt_best)} (tinygpt {tg_threads} thr, "
                     f"{pt_impl} {pt_threads} thr) "
                     f"| {format_ratio(rate['tinygpt', 2] / pt_best)} "
                     f"| {format_ratio(rate['tinygpt', 2] / rate['tinygpt', 1])} "
                     f"| {best_gflops:.1f}{best_share} |")

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
    # The CPU's peak, first, on as many threads as the most a run uses: the
    # denominator of every "% of peak" in the report.
    peak = measure_peak(args.tinygpt, max(BENCH_THREADS))
    if peak:
        print(f"bench: peak of {peak['cpu']}: {peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, "
              f"{peak['gflops_all_threads']:.1f} on {peak['threads']}", file=sys.stderr, flush=True)
    else:
        print(f"bench: {args.tinygpt} has no `peak` command: no share of the peak in the report",
              file=sys.stderr, flush=True)

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
        ("CPU's peak (`tinygpt peak`)",
         f"{peak['cpu']}, {peak['vector_bits']}-bit {peak['instructions']}: "
         f"{peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, {peak['gflops_all_threads']:.1f} on "
         f"{peak['threads']}" if peak else "not measured (this tinygpt has no `peak` command)"),
        ("kernel path",
         f"tinygpt: {peak.get('kernel_path', 'not said (a tinygpt from before the paths)')}"
         f"{' (TINYGPT_KERNELS=' + os.environ['TINYGPT_KERNELS'] + ')' if os.environ.get('TINYGPT_KERNELS') else ''}; "
         f"PyTorch: {torch_cpu_capability()}"
         f"{', OPENBLAS_CORETYPE=' + os.environ['OPENBLAS_CORETYPE'] if os.environ.get('OPENBLAS_CORETYPE') else ''}"
         if peak else "not said"),
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
    report = bench_report(info, results, samples, no_cache_supported, peak)
    print(report, end="")
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)
    print(f"bench: wrote {args.out}", file=sys.stderr)
    return 0


# ---- products: tinygpt's products alone, beside PyTorch's BLAS ---------------
#
# How near the CPU's peak can a training step come? The products do almost
# all its FLOPs, so the question starts with them, alone, at the shapes the
# step multiplies: `tinygpt peak --product ROWS,IN,OUT` times a linear
# layer's three (forward, input gradient, weight gradient) on one thread, as
# each thread runs its slice of the batch; `products-torch-worker` times the
# same three with torch.mm on one thread (its BLAS, OpenBLAS from Debian),
# in a fresh process with every thread count set to 1. Each side reports
# the best of its runs over --seconds; the shapes are measured --rounds
# times, interleaved, and each side's best kept.

PRODUCT_SHAPES = [  # (rows, in, out, what): a thread's slice at 2 threads
    (2048, 256, 768, "card L (B 32, T 128): q, k, v"),
    (2048, 256, 256, "card L: attention's projection"),
    (384, 128, 384, "baby gpt (B 12, T 64): q, k, v"),
    (384, 128, 512, "baby gpt: MLP in"),
    (384, 512, 128, "baby gpt: MLP out"),
    (768, 128, 2048, "the default gpt (B 24, T 64): the head, V 2048"),
    (512, 768, 3072, "GPT-2 124M fine-tuned (B 4, T 256, make bench-gpt2): MLP in"),
    (512, 3072, 768, "GPT-2 124M: MLP out"),
]
PRODUCT_SECONDS = 0.5
PRODUCT_ROUNDS = 2
PRODUCT_KINDS = ("forward", "input_gradient", "weight_gradient")


def cmd_products_torch_worker(args):
    """PyTorch's three products of one linear layer on one thread, each the
    best of its runs over args.seconds; prints their GFLOP/s as JSON."""
    torch.set_num_threads(1)
    N, C, OC = args.rows, args.inp, args.out
    generator = torch.Generator().manual_seed(1)
    inp, weight, dout = (torch.rand(shape, generator=generator) - 0.5 for shape in ((N, C), (OC, C), (N, OC)))
    out, dinp, dweight = torch.empty(N, OC), torch.empty(N, C), torch.zeros(OC, C)
    runs = {
        "forward": lambda: torch.mm(inp, weight.t(), out=out),
        "input_gradient": lambda: torch.mm(dout, weight, out=dinp),
        "weight_gradient": lambda: dweight.addmm_(dout.t(), inp),
    }
    result = {}
    for kind in PRODUCT_KINDS:
        best, start, count = None, time.perf_counter(), 0
        while count < 3 or time.perf_counter() - start < args.seconds:
            t = time.perf_counter()
            runs[kind]()
            t = time.perf_counter() - t
            best = t if best is None else min(best, t)
            count += 1
        result[kind] = 2.0 * N * C * OC / best / 1e9
    print(json.dumps(result))


def products_tinygpt(tinygpt, shape, seconds):
    """`tinygpt peak --product` at "shape": its "product" object."""
    rows, inp, out, _ = shape
    command = [tinygpt, "peak", "--json", "--threads", "1", "--seconds", str(seconds),
               "--product", f"{rows},{inp},{out}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        bench_fail(command, result.returncode, result.stderr)
    return json.loads(result.stdout)["product"]


def products_torch(shape, seconds):
    """products-torch-worker at "shape", in a fresh process on one thread."""
    rows, inp, out, _ = shape
    command = [sys.executable, os.path.abspath(__file__), "products-torch-worker", "--rows", str(rows),
               "--inp", str(inp), "--out", str(out), "--seconds", str(seconds)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        bench_fail(command, result.returncode, result.stderr)
    return json.loads(result.stdout)


def products_report(args, peak, best, seconds):
    """The markdown report of `products`, as a string."""
    one = peak["gflops_1_thread"]
    lines = ["# tinygpt's products alone, beside PyTorch's", "",
             "- command: `/usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt`",
             f"- date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
             f"- machine: {machine_description()}",
             f"- CPU's peak (`tinygpt peak`): {peak['cpu']} (family {peak['family']}, model {peak['model']}), "
             f"{peak['vector_bits']}-bit {peak['instructions']}: **{one:.1f} GFLOP/s on 1 thread**",
             f"- PyTorch {torch.__version__}, its products through torch.mm on 1 thread "
             "(OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS 1, torch.set_num_threads(1))",
             f"- each product the best of its runs over {args.seconds:g} s; every shape measured "
             f"{args.rounds} time(s), interleaved, and each side's best kept; {seconds:.0f} s in all",
             "",
             "A linear layer's three products at the shapes a training step multiplies (one thread's "
             "slice of the batch at 2 threads): forward out[N,OC] = inp[N,C] @ weight[OC,C]^T, "
             "input gradient dinp = dout @ weight, weight gradient dweight += dout^T @ inp, each "
             "2 N C OC FLOPs. GFLOP/s, and in brackets the share of 1 thread's peak; the last "
             "column is PyTorch's time for the three over tinygpt's.", "",
             "| N x C -> OC | what | forward tinygpt / PyTorch | input gradient | weight gradient | "
             "tinygpt faster by |",
             "| --- | --- | --- | --- | --- | --- |"]
    for shape in PRODUCT_SHAPES:
        rows, inp, out, what = shape
        mine, theirs = best[(shape, "tinygpt")], best[(shape, "PyTorch")]
        cells = [f"{mine[k]:.1f} ({100 * mine[k] / one:.0f}%) / {theirs[k]:.1f} ({100 * theirs[k] / one:.0f}%)"
                 for k in PRODUCT_KINDS]
        ratio = sum(1 / theirs[k] for k in PRODUCT_KINDS) / sum(1 / mine[k] for k in PRODUCT_KINDS)
        lines.append(f"| {rows} x {inp} -> {out} | {what} | " + " | ".join(cells) + f" | {format_ratio(ratio)} |")
    return "\n".join(lines) + "\n"


def cmd_products(args):
    """Time tinygpt's products and PyTorch's side by side; write a markdown report."""
    began = time.time()
    if args.seconds <= 0 or args.rounds < 1:
        sys.exit("products: --seconds must be above 0 and --rounds at least 1")
    peak = measure_peak(args.tinygpt, 1)
    if peak is None:
        sys.exit(f"products: {args.tinygpt} has no `peak` command")
    best = {}
    for round_number in range(1, args.rounds + 1):
        for shape in PRODUCT_SHAPES:
            for side, measure in (("tinygpt", lambda: products_tinygpt(args.tinygpt, shape, args.seconds)),
                                  ("PyTorch", lambda: products_torch(shape, args.seconds))):
                m = measure()
                kept = best.get((shape, side))
                best[(shape, side)] = {k: max(m[k], kept[k]) if kept else m[k] for k in PRODUCT_KINDS}
                print(f"products: round {round_number}/{args.rounds} {shape[0]} x {shape[1]} -> {shape[2]} "
                      f"{side:8s}: " + ", ".join(f"{k} {m[k]:.1f}" for k in PRODUCT_KINDS) + " GFLOP/s",
                      file=sys.stderr, flush=True)
    report = products_report(args, peak, best, time.time() - began)
    print(report)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)
    print(f"products: wrote {args.out}", file=sys.stderr)


# ---- learn: nanoGPT's recipe, tinygpt and PyTorch side by side -------------
#
# `learn` trains the default gpt with nanoGPT's recipe (GPT_RECIPE) twice on
# the same text: with tinygpt, and with BenchNanoGPT and torch.optim.AdamW
# in fp32 (`learn-torch-worker`, a fresh process, so that its OpenMP settings
# take effect). It compares what a user sees in the end: the validation loss
# each reaches, and the training time it takes to get there.
#
# The validation protocol is tinygpt's (train.c, validation_loss): at every
# LEARN_EVAL_INTERVAL-th step and at the last, before that step's update,
# the mean loss per token over fixed windows of the validation split (the
# last floor(N * 0.1) tokens), dropout off: of its W = (n_val - 1) // T
# whole windows laid end to end, K = min(W, LEARN_EVAL_BATCHES * B), row r
# being window floor(r * W / K) (spread_windows). Training windows are random, each side
# drawing its own. Training time is the sum of the steps' times (forward,
# backward, clipping, update), evaluation and batch making left out, as in
# tinygpt's `ms` column.

LEARN_CONFIG = BenchConfig("learn", "gpt", 4, 128, 4, 64, 12, 0.0)  # tinygpt's gpt defaults
LEARN_STEPS = 2000
LEARN_EVAL_INTERVAL = 250
LEARN_EVAL_BATCHES = 20
LEARN_VAL_FRACTION = 0.1
LEARN_SEED = 1337
LEARN_TARGET_VAL = 1.92       # tinygpt's final validation loss: at most this
LEARN_TARGET_SPEEDUP = 2.5    # tinygpt's training time: at most PyTorch's / this
LEARN_PROMPT = "ROMEO:"
LEARN_SAMPLE_TOKENS = 300
# Each side trains at its fastest thread setting among bench's (tinygpt: 1
# or 2 threads; PyTorch: 1 thread, 2 waiting passively, 2 spinning briefly),
# each timed over this many steps in a fresh process before the real runs,
# the first LEARN_CALIBRATION_SKIP not counted.
LEARN_CALIBRATION_STEPS = 40
LEARN_CALIBRATION_SKIP = 10
LOG_HEADER = "step,train_loss,val_loss,lr,ms,tokens_per_s,grad_norm"


def learn_model_flags(config):
    """The `tinygpt train` flags for the model and batch of "config"."""
    return ["--arch", config.arch, "--layers", str(config.layers), "--batch", str(config.B),
            "--context", str(config.T), "--embd", str(config.C), "--heads", str(config.NH),
            "--dropout", str(config.dropout)] + (NANOGPT_PARTS if config.arch == "gpt" else [])


def cmd_learn_torch_worker(args):
    """PyTorch's side of `learn`, in a process of its own: BenchNanoGPT (fp32)
    trained by torch.optim.AdamW with GPT_RECIPE, clip_grad_norm_ and
    nanogpt_lr on random windows; validation as tinygpt's (see the section's
    comment). Writes args.log in tinygpt's log.csv format, prints a line at
    each evaluation, and prints "data: N train + M val tokens" on stderr.
    """
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config, recipe = LEARN_CONFIG, GPT_RECIPE
    B, T = config.B, config.T
    vocab = read_safetensors_metadata(args.vocab_from)["vocab"]
    to_id = {ch: i for i, ch in enumerate(vocab)}
    with open(args.data, encoding="utf-8", newline="") as f:
        ids = array.array("i", (to_id[ch] for ch in f.read()))
    n_train = len(ids) - n_val_tokens(len(ids), LEARN_VAL_FRACTION)
    print(f"data: {n_train} train + {len(ids) - n_train} val tokens", file=sys.stderr)
    train_tokens = torch.frombuffer(ids, dtype=torch.int32)[:n_train]
    val_tokens = ids[n_train:].tolist()
    val_batches = spread_windows(val_tokens, args.eval_batches * B, B, T)

    model = BenchNanoGPT(len(vocab), T, config.C, config.NH, config.layers, config.dropout)
    optimizer = make_adamw(adamw_param_groups(model.named_parameters(), recipe.weight_decay),
                           recipe)

    def validation_loss():
        """Mean loss per token over the fixed validation windows, dropout off."""
        model.eval()
        with torch.no_grad():
            total = sum(model(i, t)[0].item() * len(i) for i, t in val_batches)
        model.train()
        return total / sum(len(i) for i, _ in val_batches)

    model.train()
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)
    with open(args.log, "w") as log:
        log.write(LOG_HEADER + "\n")
        interval_loss, interval_ms, interval_steps = 0.0, 0.0, 0
        for step in range(args.steps):
            evaluate = step % args.eval_interval == 0 or step == args.steps - 1
            val_loss = validation_loss() if evaluate else None
            starts = torch.randint(n_train - T, (B, 1))
            window = train_tokens[starts + torch.arange(T + 1)].long()
            inputs, targets = window[:, :-1].contiguous(), window[:, 1:].contiguous()
            lr = nanogpt_lr(step, recipe, args.steps)
            set_lr(optimizer, lr)

            start = time.perf_counter()
            loss, _ = model(inputs, targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            optimizer.step()
            ms = 1e3 * (time.perf_counter() - start)

            loss = loss.item()
            if not math.isfinite(loss):
                sys.exit(f"learn-torch-worker: the loss is {loss} at step {step}")
            log.write(f"{step},{loss:.6f},{'' if val_loss is None else f'{val_loss:.6f}'},"
                      f"{lr:g},{ms:.3f},{B * T / ms * 1e3:.0f},{norm.item():.6f}\n")
            interval_loss, interval_ms, interval_steps = (interval_loss + loss,
                                                          interval_ms + ms, interval_steps + 1)
            if evaluate and not args.quiet:
                print(f"step {step:6d}/{args.steps} | train loss "
                      f"{interval_loss / interval_steps:.4f} | val loss {val_loss:.4f} | "
                      f"{interval_ms / interval_steps:.2f} ms/step | "
                      f"{B * T * interval_steps / interval_ms * 1e3:.0f} tokens/s", flush=True)
                interval_loss, interval_ms, interval_steps = 0.0, 0.0, 0
    return 0


def learn_torch_command(args, vocab_from, threads, steps, log_path, quiet):
    """The command line of one learn-torch-worker run."""
    command = [sys.executable, os.path.abspath(__file__), "learn-torch-worker",
               "--data", args.data, "--vocab-from", vocab_from, "--threads", str(threads),
               "--steps", str(steps), "--eval-interval", str(LEARN_EVAL_INTERVAL),
               "--eval-batches", str(LEARN_EVAL_BATCHES), "--seed", str(LEARN_SEED),
               "--log", log_path]
    return command + (["--quiet"] if quiet else [])


def torch_env(impl, threads):
    """The environment of a PyTorch process: the waiting of TORCH_WAITS[impl]
    and every OpenMP/BLAS thread count set to "threads" (as bench runs it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(TORCH_WAITS[impl], OMP_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    return env


def read_learn_log(path):
    """A log.csv (tinygpt's or learn-torch-worker's) summed up: a dict of
    steps, evals (list of (step, val_loss)), final_val (the last one),
    train_seconds (the sum of the ms column), median_ms (the median step) and
    tokens_per_s (over the training time)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    evals = [(int(r["step"]), float(r["val_loss"])) for r in rows if r["val_loss"] != ""]
    ms = [float(r["ms"]) for r in rows]
    return {"steps": len(rows), "evals": evals, "final_val": evals[-1][1] if evals else None,
            "train_seconds": sum(ms) / 1e3, "median_ms": statistics.median(ms),
            "tokens_per_s": len(rows) * LEARN_CONFIG.B * LEARN_CONFIG.T / (sum(ms) / 1e3)}


def learn_tinygpt_command(args, out_dir, threads, steps):
    """learn's `tinygpt train` command: the model, the recipe's flags spelled
    out (they are tinygpt's gpt defaults), the evaluation protocol."""
    return ([args.tinygpt, "train", args.data, "--out", out_dir] + force_flags(args.tinygpt)
            + ["--save-every", "0", "--threads", str(threads)] + learn_model_flags(LEARN_CONFIG)
            + recipe_flags(GPT_RECIPE)
            + ["--steps", str(steps), "--eval-interval", str(LEARN_EVAL_INTERVAL),
               "--eval-batches", str(LEARN_EVAL_BATCHES),
               "--val-fraction", str(LEARN_VAL_FRACTION), "--seed", str(LEARN_SEED)])


def learn_calibrate(args, workdir):
    """Time each side at each of bench's settings for LEARN_CALIBRATION_STEPS
    steps, in a fresh process each: tinygpt at 1 and 2 threads, PyTorch at 1
    and 2 (and at 2 spinning, see TORCH_WAITS). Returns (timings, vocab_from):
    a list of (implementation, threads, median ms/step), and a tinygpt
    checkpoint of the text (its vocabulary is PyTorch's)."""
    timings = []
    vocab_from = os.path.join(workdir, "tinygpt-1", "model.safetensors")
    for threads in BENCH_THREADS:
        for impl in bench_impls(threads):
            log_path = os.path.join(workdir, f"{impl.replace(' ', '-')}-{threads}", "log.csv")
            if impl == "tinygpt":
                command, env = learn_tinygpt_command(args, os.path.dirname(log_path), threads,
                                                     LEARN_CALIBRATION_STEPS), None
            else:
                command = learn_torch_command(args, vocab_from, threads,
                                              LEARN_CALIBRATION_STEPS, log_path, quiet=True)
                env = torch_env(impl, threads)
            result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            if result.returncode != 0:
                print(result.stderr, end="", file=sys.stderr)
                sys.exit(f"learn: FAIL: {shlex.join(command)} exited with status "
                         f"{result.returncode}")
            with open(log_path, newline="") as f:
                ms = [float(r["ms"]) for r in csv.DictReader(f)][LEARN_CALIBRATION_SKIP:]
            timings.append((impl, threads, statistics.median(ms)))
            print(f"learn: calibrating {impl}, {threads} thread(s): {timings[-1][2]:.2f} ms/step "
                  f"(median of {len(ms)} steps)", flush=True)
    return timings, vocab_from


def fastest(timings, implementations):
    """(implementation, threads) of the fastest of "timings" among "implementations"."""
    impl, threads, _ = min((t for t in timings if t[0] in implementations), key=lambda t: t[2])
    return impl, threads


def run_timed(command, env=None, env_note=""):
    """Run "command" in "env", its stdout shown as it comes and its stderr
    captured (and then shown); "env_note" is shown before the command, to say
    what "env" sets. Returns (stderr, wall seconds, (load average before,
    after))."""
    print(f"+ {env_note}{shlex.join(command)}", flush=True)
    load_before = os.getloadavg()[0]
    start = time.time()
    result = subprocess.run(command, env=env, stderr=subprocess.PIPE, text=True)
    wall = time.time() - start
    print(result.stderr, end="", file=sys.stderr)
    if result.returncode != 0:
        sys.exit(f"learn: FAIL: {command[0]} exited with status {result.returncode}")
    return result.stderr, wall, (load_before, os.getloadavg()[0])


def learn_report(info, tg, pt, targets, sample):
    """bench/learn.md as a string: "info" (key, value) pairs, the two logs
    summed up (read_learn_log), "targets" (what, value, met), the sample."""
    lines = ["# Learning: tinygpt against PyTorch, nanoGPT's recipe", ""]
    lines += [f"- {key}: {value}" for key, value in info]
    lines += ["", "## Results", "",
              "| | tinygpt | PyTorch |", "| --- | --- | --- |",
              f"| final validation loss (step {tg['evals'][-1][0]}) | {tg['final_val']:.4f} "
              f"| {pt['final_val']:.4f} |",
              f"| best validation loss | {min(v for _, v in tg['evals']):.4f} "
              f"| {min(v for _, v in pt['evals']):.4f} |",
              f"| training seconds (sum of `ms`) | {tg['train_seconds']:.1f} "
              f"| {pt['train_seconds']:.1f} |",
              f"| training tokens/s | {tg['tokens_per_s']:,.0f} | {pt['tokens_per_s']:,.0f} |",
              f"| median ms/step | {tg['median_ms']:.1f} | {pt['median_ms']:.1f} |",
              f"| wall seconds (with evaluation and start-up) | {tg['wall_seconds']:.1f} "
              f"| {pt['wall_seconds']:.1f} |",
              "", f"Speed ratio, PyTorch's training time / tinygpt's: "
              f"**{format_ratio(pt['train_seconds'] / tg['train_seconds'])}** (by the median "
              f"step, which a burst of other jobs on the machine moves less: "
              f"{format_ratio(pt['median_ms'] / tg['median_ms'])}).",
              "", "## Targets", "", "| target | measured | met |", "| --- | --- | --- |"]
    lines += [f"| {what} | {value} | {'**met**' if met else '**not met**'} |"
              for what, value, met in targets]
    lines += ["", "## Validation loss at each evaluation", "",
              "| step | tinygpt | PyTorch |", "| --- | --- | --- |"]
    pt_at = dict(pt["evals"])
    lines += [f"| {step} | {val:.4f} | {pt_at[step]:.4f} |" if step in pt_at
              else f"| {step} | {val:.4f} | |" for step, val in tg["evals"]]
    lines += ["", "Against training time: ![validation loss against training time](learn.png)",
              "", "## A sample from tinygpt's model", "", "```text", sample, "```", ""]
    return "\n".join(lines)


def cmd_learn(args):
    """Train nanoGPT's recipe with tinygpt and with PyTorch; report and plot both."""
    began = time.time()
    if args.data is None:
        args.data = default_bench_data()
    if not os.path.exists(args.data):
        sys.exit(f"learn: {args.data} does not exist; pass --data FILE (make learn DATA=FILE)")
    if args.steps < 1:
        sys.exit("learn: --steps must be at least 1")
    if not train_has_optimizer_flag(args.tinygpt):
        sys.exit(f"learn: `{args.tinygpt} train --help` lists no --optimizer: this tinygpt "
                 "has no AdamW, so it cannot train nanoGPT's recipe")
    with open(args.data, encoding="utf-8", newline="") as f:
        n_chars = len(f.read())
    # The CPU's peak, named in the report's header as bench names it.
    peak = measure_peak(args.tinygpt, max(BENCH_THREADS))
    config, recipe = LEARN_CONFIG, GPT_RECIPE
    tg_dir, pt_dir = os.path.join(args.out_dir, "tinygpt"), os.path.join(args.out_dir, "pytorch")
    loads = {}

    # 1. Each side's fastest thread setting.
    with tempfile.TemporaryDirectory(prefix="tinygpt-learn-") as tmp:
        timings, vocab_from = learn_calibrate(args, tmp)
        vocab = read_safetensors_metadata(vocab_from)["vocab"]
    _, tg_threads = fastest(timings, ["tinygpt"])
    pt_impl, pt_threads = fastest(timings, TORCH_WAITS)

    # 2. tinygpt trains.
    tg_command = learn_tinygpt_command(args, tg_dir, tg_threads, args.steps)
    stderr, tg_wall, loads["tinygpt"] = run_timed(tg_command)
    found = re.search(r"(\d+) parameters; data: (\d+) train \+ (\d+) val tokens", stderr)
    n_params = int(found.group(1)) if found else None
    tg_split = (int(found.group(2)), int(found.group(3))) if found else None
    model_path = os.path.join(tg_dir, "model.safetensors")

    # 3. PyTorch trains, from its own init, on its own random windows; the
    # same validation windows.
    pt_log = os.path.join(pt_dir, "log.csv")
    stderr, pt_wall, loads["PyTorch"] = run_timed(
        learn_torch_command(args, model_path, pt_threads, args.steps, pt_log, quiet=False),
        torch_env(pt_impl, pt_threads),
        "".join(f"{k}={v} " for k, v in TORCH_WAITS[pt_impl].items())
        + f"OMP_NUM_THREADS={pt_threads} ")
    found = re.search(r"data: (\d+) train \+ (\d+) val tokens", stderr)
    pt_split = (int(found.group(1)), int(found.group(2))) if found else None
    if tg_split != pt_split:
        sys.exit(f"learn: FAIL: the splits differ: tinygpt {tg_split}, PyTorch {pt_split} "
                 "(train, val tokens); the validation losses would not be comparable")

    # 4. The curves against training time, and a sample.
    tg = dict(read_learn_log(os.path.join(tg_dir, "log.csv")), wall_seconds=tg_wall)
    pt = dict(read_learn_log(pt_log), wall_seconds=pt_wall)
    picture = os.path.join(os.path.dirname(args.out) or ".", "learn.png")
    os.makedirs(os.path.dirname(picture) or ".", exist_ok=True)
    run([args.tinygpt, "plot", os.path.join(tg_dir, "log.csv"), pt_log, "--x", "time",
         "--labels", "tinygpt,PyTorch", "--out", picture,
         "--title", f"validation loss against training time, {os.path.basename(args.data)}"])
    prompt = LEARN_PROMPT if set(LEARN_PROMPT) <= set(vocab) else None
    sample = run([args.tinygpt, "sample", "--model", model_path, "--seed", "1",
                  "--tokens", str(LEARN_SAMPLE_TOKENS)]
                 + (["--prompt", prompt] if prompt else []))

    # 5. The report.
    ratio = pt["train_seconds"] / tg["train_seconds"]
    median_ratio = pt["median_ms"] / tg["median_ms"]
    targets = [
        (f"tinygpt final validation loss <= {LEARN_TARGET_VAL}", f"{tg['final_val']:.4f}",
         tg["final_val"] <= LEARN_TARGET_VAL),
        (f"tinygpt training time <= PyTorch's / {LEARN_TARGET_SPEEDUP}",
         f"{tg['train_seconds']:.1f} s vs {pt['train_seconds']:.1f} s / {LEARN_TARGET_SPEEDUP} "
         f"= {pt['train_seconds'] / LEARN_TARGET_SPEEDUP:.1f} s (ratio {format_ratio(ratio)}; "
         f"by median step time {format_ratio(median_ratio)})",
         tg["train_seconds"] <= pt["train_seconds"] / LEARN_TARGET_SPEEDUP),
    ]
    calibration = "; ".join(f"{i} {t} thr {ms:.1f}" for i, t, ms in timings)
    info = [
        ("command", "`" + shlex.join([sys.executable] + sys.argv) + "`"),
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(began))),
        ("machine", machine_description()),
        ("CPU's peak (`tinygpt peak`)",
         f"{peak['cpu']}, {peak['vector_bits']}-bit {peak['instructions']}: "
         f"{peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, {peak['gflops_all_threads']:.1f} on "
         f"{peak['threads']}" if peak else "not measured (this tinygpt has no `peak` command)"),
        ("load average (1 min) before / after each run",
         ", ".join(f"{k} {a:.2f} / {b:.2f}" for k, (a, b) in loads.items())
         + " (the machine is shared: a load above the core count slows both)"),
        ("PyTorch version", f"{torch.__version__} (Python {sys.version.split()[0]})"),
        ("data", f"{args.data} ({n_chars:,} characters; {tg_split[0]:,} train + "
                 f"{tg_split[1]:,} validation tokens, the last {LEARN_VAL_FRACTION:g})"),
        ("model", f"gpt, {config.layers} layers, {config.NH} heads, embd {config.C}, context "
                  f"{config.T}, batch {config.B}, dropout {config.dropout:g}; "
                  f"{n_params:,} parameters" if n_params else "gpt (no `model:` line)"),
        ("recipe", f"AdamW lr {recipe.lr:g}, betas ({recipe.beta1:g}, {recipe.beta2:g}), eps "
                   f"{ADAMW_EPS:g}, weight decay {recipe.weight_decay:g} on the 2-D tensors; "
                   f"warmup {recipe.warmup} steps, {recipe.schedule} to {recipe.min_lr:g} at "
                   f"step {args.steps}; gradient norm clipped at {recipe.grad_clip:g}; "
                   f"{args.steps} steps on random windows, seed {LEARN_SEED}"),
        ("validation", f"every {LEARN_EVAL_INTERVAL} steps and at the last, before the "
                       f"step's update: the mean loss over {LEARN_EVAL_BATCHES} fixed batches "
                       "of the validation split (batch k of `--order sequential` over it), "
                       "the same windows on both sides"),
        ("training time", "the sum of the per-step times (forward, backward, clipping, "
                          "update); evaluation and batch making left out"),
        ("tinygpt side", f"`{shlex.join(['tinygpt'] + tg_command[1:])}` (the recipe's "
                         "flags are its gpt defaults, spelled out)"),
        ("PyTorch side", "BenchNanoGPT (nanoGPT's blocks, bias=False, tied head; fp32), "
                         "torch.optim.AdamW, clip_grad_norm_, nanoGPT's get_lr; "
                         f"{pt_impl}, {pt_threads} thread(s)"),
        ("threads", f"each side at its fastest setting: tinygpt {tg_threads} thread(s), "
                    f"{pt_impl} {pt_threads} thread(s), from {LEARN_CALIBRATION_STEPS} steps "
                    f"of each setting first (median ms/step after {LEARN_CALIBRATION_SKIP}): "
                    f"{calibration}"),
    ]
    report = learn_report(info, tg, pt, targets, sample)
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(report)
    print(report, end="")
    for what, value, met in targets:
        print(f"learn: target {'MET' if met else 'NOT MET'}: {what} (measured {value})")
    print(f"learn: wrote {args.out} and {picture}")
    return 0


def main():
    """Parse the command line and run the subcommand."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{parity,selftest,bench,products,learn}")

    parity = sub.add_parser("parity",
                            help="train with tinygpt and PyTorch, compare losses and weights")
    parity.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    parity.add_argument("--data", help="training text (default: a generated synthetic text)")
    parity.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    parity.add_argument("--workdir",
                        help="keep the checkpoints and logs here (default: a temporary directory)")
    parity.add_argument("--verbose", action="store_true", help="print both losses at every step")
    parity.add_argument("--only", choices=["card", "gpt", "adamw", "muon", "recipe", "gpt2"],
                        help="check only this (default: the card model, the GPT, the GPT "
                             "trained by AdamW, by Muon, then the GPT with each of the modern "
                             "recipe's swaps)")
    parity.set_defaults(func=cmd_parity)

    selftest = sub.add_parser("selftest", help="check the reader, the model and its gradients")
    selftest.set_defaults(func=cmd_selftest)

    bench = sub.add_parser("bench", help="training and sampling speed: tinygpt against PyTorch")
    bench.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    bench.add_argument("--data", help="training text (default: the corpus, data/moby-dick.txt)")
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

    products = sub.add_parser("products", help="a linear layer's three products, alone on one thread: "
                                               "tinygpt against PyTorch's BLAS")
    products.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    products.add_argument("--out", default="bench/products.md",
                          help="write the markdown report here too (default %(default)s)")
    products.add_argument("--seconds", type=float, default=PRODUCT_SECONDS,
                          help="each product's runs last this long, the best kept (default %(default)s)")
    products.add_argument("--rounds", type=int, default=PRODUCT_ROUNDS,
                          help="measure every shape this many times, interleaved (default %(default)s)")
    products.set_defaults(func=cmd_products)

    # Internal: PyTorch's products at one shape, started by `products` in a fresh process.
    products_worker = sub.add_parser("products-torch-worker")
    for flag in ("--rows", "--inp", "--out"):
        products_worker.add_argument(flag, type=int, required=True)
    products_worker.add_argument("--seconds", type=float, required=True)
    products_worker.set_defaults(func=cmd_products_torch_worker)

    learn = sub.add_parser("learn", help="nanoGPT's recipe trained by tinygpt and by PyTorch: "
                                         "validation loss against training time")
    learn.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    learn.add_argument("--data", help="training text (default: as bench's)")
    learn.add_argument("--steps", type=int, default=LEARN_STEPS,
                       help="training steps (default %(default)s; fewer for a quick check)")
    learn.add_argument("--out-dir", default="runs/learn",
                       help="the two runs go to DIR/tinygpt and DIR/pytorch (default %(default)s)")
    learn.add_argument("--out", default="bench/learn.md",
                       help="the report (default %(default)s); learn.png goes beside it")
    learn.set_defaults(func=cmd_learn)

    # Internal: PyTorch's run of `learn`, in a fresh process.
    learn_worker = sub.add_parser("learn-torch-worker")
    learn_worker.add_argument("--data", required=True)
    learn_worker.add_argument("--vocab-from", required=True, help="a tinygpt checkpoint")
    learn_worker.add_argument("--log", required=True, help="write log.csv here")
    for flag in ("--threads", "--steps", "--eval-interval", "--eval-batches", "--seed"):
        learn_worker.add_argument(flag, type=int, required=True)
    learn_worker.add_argument("--quiet", action="store_true", help="no progress lines")
    learn_worker.set_defaults(func=cmd_learn_torch_worker)

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
