"""tinygpt from the outside: running it (and stopping a parity check when a
command fails), the flags a given tinygpt binary knows, and what it writes:
its checkpoints (.safetensors, read and written here with the standard
library) and its log.csv.
"""

import csv
import functools
import json
import math
import struct
import subprocess

import torch

from torch_ref.model import card_param_shapes, gpt_param_shapes, model_swaps


# nanoGPT's gpt (tinygpt's defaults before make sweep's recipe took their
# place): char tokens, LayerNorm, GELU, learned positions, a tied head, and
# nanoGPT's get_batch, windows drawn at random, as learn's PyTorch side
# draws them (the gpt's default until 2026-11-28); a swap given after one
# of these holds over it.
NANOGPT_PARTS = ["--tokenizer", "char", "--norm", "layernorm", "--mlp", "gelu", "--pos", "learned",
                 "--tied-head", "--no-qk-norm", "--order", "random"]


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


def read_safetensors_header(path):
    """The JSON header of a .safetensors file (name -> dtype, shape and
    data_offsets, and "__metadata__"), reading only the header."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(header_len).decode("utf-8"))


def read_safetensors_metadata(path):
    """The "__metadata__" dict of a .safetensors file, reading only its header."""
    return read_safetensors_header(path).get("__metadata__", {})


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
    return card_param_shapes(V, T, C)


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
