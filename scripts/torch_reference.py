#!/usr/bin/python3
"""torch_reference.py: an independent PyTorch implementation of tinygpt's model.

It is written from the model's description (src/model.h), not from the C code,
and checks the C program from the outside: it reads the checkpoints tinygpt
writes, replays the same training batches in float64 with autograd, and
compares the losses and the final weights.

    /usr/bin/python3 scripts/torch_reference.py parity --tinygpt ./tinygpt [--data FILE]
    /usr/bin/python3 scripts/torch_reference.py selftest
    /usr/bin/python3 scripts/torch_reference.py bench --tinygpt ./tinygpt --data FILE  (stub)

Run it with Debian's Python (/usr/bin/python3) and python3-torch; install them
with `scripts/setup.sh --python`.

The model (shape alphabet as in src/model.h: B batch, T context, C channels,
NH heads, HS = C / NH head size, V vocabulary):
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
No residual connection, no layer norm, no MLP. Training is plain SGD.
"""

import argparse
import csv
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

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
PARITY_BATCH = 4
PARITY_LR = 0.1
PARITY_SEED = 1
PARITY_VAL_FRACTION = 0.1
LOSS_TOLERANCE = 1e-4    # largest allowed |tinygpt loss - reference loss| at any step
WEIGHT_TOLERANCE = 1e-3  # largest allowed |tinygpt weight - reference weight| at the end


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

    Only the self-test uses it, to check read_safetensors on a known file.
    The header is padded with spaces to a multiple of 8 bytes, as the format
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

def run(command):
    """Run "command" (a list), showing it; on failure print its output and exit 1."""
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        print(result.stdout, end="")
        sys.exit(f"parity: FAIL: {command[0]} exited with status {result.returncode}")


def read_log(path):
    """tinygpt's log.csv as a list of (step, train_loss, lr), in file order."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["train_loss"]), float(r["lr"])) for r in rows]


def check_metadata(tensors, meta, path):
    """Check the checkpoint holds exactly the model's tensors, with shapes
    agreeing with its metadata; return (vocab, n_head)."""
    vocab = meta["vocab"]
    V, C, T = int(meta["vocab_size"]), int(meta["n_embd"]), int(meta["block_size"])
    n_head = int(meta["n_head"])
    expected = {
        "tok_emb.weight": [V, C], "pos_emb.weight": [T, C],
        "blocks.0.attn.q.weight": [C, C], "blocks.0.attn.k.weight": [C, C],
        "blocks.0.attn.v.weight": [C, C], "blocks.0.attn.proj.weight": [C, C],
        "blocks.0.attn.proj.bias": [C], "head.weight": [V, C], "head.bias": [V],
    }
    if sorted(tensors) != sorted(expected):
        sys.exit(f"parity: FAIL: {path} holds tensors {sorted(tensors)}, "
                 f"expected {sorted(expected)}")
    for name, shape in expected.items():
        if list(tensors[name].shape) != shape:
            sys.exit(f"parity: FAIL: {path}: {name} has shape {list(tensors[name].shape)}, "
                     f"expected {shape} from the metadata")
    if len(vocab) != V:
        sys.exit(f"parity: FAIL: {path}: vocab has {len(vocab)} characters, vocab_size is {V}")
    return vocab, n_head


def cmd_parity(args):
    """Train with tinygpt and with this file's model on the same batches; compare."""
    with tempfile.TemporaryDirectory(prefix="tinygpt-parity-") as tmp:
        workdir = args.workdir or tmp
        os.makedirs(workdir, exist_ok=True)
        data = args.data
        if data is None:
            data = os.path.join(workdir, "synthetic.txt")
            with open(data, "w", encoding="utf-8", newline="") as f:
                f.write(synthetic_text())
            print(f"parity: wrote a synthetic corpus to {data}")

        # 1. The initial model, as tinygpt initialises it (0 steps: save and stop).
        init_dir, trained_dir = os.path.join(workdir, "init"), os.path.join(workdir, "trained")
        common = ["--batch", str(PARITY_BATCH), "--seed", str(PARITY_SEED),
                  "--val-fraction", str(PARITY_VAL_FRACTION)]
        run([args.tinygpt, "train", data, "--out", init_dir, "--steps", "0"]
            + PARITY_MODEL_FLAGS + common)
        init_path = os.path.join(init_dir, "model.safetensors")
        init_tensors, meta = read_safetensors(init_path)
        vocab, n_head = check_metadata(init_tensors, meta, init_path)

        # 2. tinygpt trains it: plain SGD, batches in order, no dropout.
        run([args.tinygpt, "train", data, "--init", init_path, "--order", "sequential",
             "--dropout", "0", "--steps", str(args.steps), "--out", trained_dir,
             "--lr", str(PARITY_LR)] + common)
        log = read_log(os.path.join(trained_dir, "log.csv"))
        final_path = os.path.join(trained_dir, "model.safetensors")
        final_tensors, _ = read_safetensors(final_path)

        # 3. The same training in float64 here.
        # newline="": keep "\r\n" as two tokens, as tinygpt reads the raw bytes.
        with open(data, encoding="utf-8", newline="") as f:
            tokens = encode(f.read(), vocab)
        n_train = len(tokens) - math.floor(len(tokens) * PARITY_VAL_FRACTION)
        T = int(meta["block_size"])
        params = {name: t.to(torch.float64).requires_grad_() for name, t in init_tensors.items()}
        failures = []
        if len(log) != args.steps:
            failures.append(f"log.csv has {len(log)} rows, expected {args.steps}")
        worst_loss = (0.0, None)  # (|difference|, step)
        for step, c_loss, c_lr in log:
            if abs(c_lr - PARITY_LR) > 1e-6 * PARITY_LR:
                failures.append(f"step {step}: tinygpt logged lr {c_lr}, expected {PARITY_LR}")
            inputs, targets = sequential_batch(tokens[:n_train], step, PARITY_BATCH, T)
            loss, _ = forward(params, inputs, targets, n_head)
            loss.backward()
            with torch.no_grad():
                for p in params.values():
                    p -= PARITY_LR * p.grad
                    p.grad = None
            diff = abs(c_loss - loss.item())
            if args.verbose:
                print(f"  step {step:3d}  tinygpt {c_loss:.6f}  torch {loss.item():.6f}"
                      f"  |diff| {diff:.2e}")
            if diff >= worst_loss[0]:
                worst_loss = (diff, step)

        # 4. Compare.
        worst_weight = (0.0, None)  # (|difference|, tensor name)
        for name, p in params.items():
            diff = (final_tensors[name].to(torch.float64) - p.detach()).abs().max().item()
            if diff >= worst_weight[0]:
                worst_weight = (diff, name)
        print(f"parity: {len(log)} steps; largest |loss difference| {worst_loss[0]:.2e} "
              f"(step {worst_loss[1]}, tolerance {LOSS_TOLERANCE:.0e})")
        print(f"parity: largest |final weight difference| {worst_weight[0]:.2e} "
              f"({worst_weight[1]}, tolerance {WEIGHT_TOLERANCE:.0e})")
        if worst_loss[0] > LOSS_TOLERANCE:
            failures.append("losses differ beyond tolerance")
        if worst_weight[0] > WEIGHT_TOLERANCE:
            failures.append("final weights differ beyond tolerance")
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
        check_metadata(tensors, meta_back, path)
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

    print("selftest: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


# ---- benchmark ------------------------------------------------------------

def cmd_bench(args):
    """Compare tinygpt's training speed with PyTorch's.

    TODO: waits for the lead to specify what to measure and how.
    """
    print("bench: not implemented yet", file=sys.stderr)
    return 1


def main():
    """Parse the command line and run the subcommand."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    parity = sub.add_parser("parity",
                            help="train with tinygpt and PyTorch, compare losses and weights")
    parity.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    parity.add_argument("--data", help="training text (default: a generated synthetic text)")
    parity.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    parity.add_argument("--workdir",
                        help="keep the checkpoints and logs here (default: a temporary directory)")
    parity.add_argument("--verbose", action="store_true", help="print both losses at every step")
    parity.set_defaults(func=cmd_parity)

    selftest = sub.add_parser("selftest", help="check the reader, the model and its gradients")
    selftest.set_defaults(func=cmd_selftest)

    bench = sub.add_parser("bench", help="speed comparison (not implemented yet)")
    bench.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")
    bench.add_argument("--data", required=True, help="training text")
    bench.set_defaults(func=cmd_bench)

    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
