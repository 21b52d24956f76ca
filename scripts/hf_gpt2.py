#!/usr/bin/env python3
"""hf_gpt2.py: an independent GPT-2 in PyTorch, with Hugging Face's GPT2LMHeadModel semantics.

    hf_gpt2.py logits DIR --tokens "ID ID ..."          the logits of one sequence, as JSON
    hf_gpt2.py loss DIR (--tokens "ID ..." | --text FILE) [--json]
                                                         mean cross-entropy, as `tinygpt eval` windows it
    hf_gpt2.py random DIR --layers L --heads NH --embd C --positions T --vocab V
                          [--dtype f32|f16|bf16] [--seed S] [--activation gelu_new|gelu]
                          [--tokenizer-from DIR2] [--prefix]
                                                         writes a synthetic Hugging Face GPT-2 directory

A Hugging Face GPT-2 directory is config.json, model.safetensors and, for
the tokenizer, vocab.json + merges.txt. `transformers` is not in Debian 12
(nor installed here), so this file is GPT-2 written out from its
architecture (OpenAI's gpt-2 model.py, and transformers' modeling_gpt2.py
that mirrors it), on nothing but torch, json and struct: the check that
tinygpt's export (and the gpt2 architecture's reader) mean by each tensor
what GPT-2 means.

GPT-2, as GPT2LMHeadModel computes it in eval mode:

    x = wte[ids] + wpe[0..T)
    for each block h.i:
        a = ln_1(x);  q, k, v = split(a @ c_attn.weight + c_attn.bias, 3)   Conv1D: W is [in, out]
        x = x + (causal softmax(q k^T / sqrt(HS)) v, heads joined) @ c_proj.weight + c_proj.bias
        m = ln_2(x);  x = x + act(m @ c_fc.weight + c_fc.bias) @ mlp.c_proj.weight + mlp.c_proj.bias
    logits = ln_f(x) @ wte^T                        the head is tied to wte (tie_word_embeddings)

LayerNorm has a weight and a bias and config's layer_norm_epsilon; act is
config's activation_function: "gelu_new" (GPT-2's own, the tanh
approximation; also "gelu_pytorch_tanh") or "gelu" (exact, erf). Everything
is computed in float64, whatever the file's dtype, so the reference adds no
rounding of its own worth comparing against float32.

Reading: model.safetensors is parsed by hand (8-byte header length, JSON
header, raw little-endian data): F32, F16 and BF16. Names may carry the
"transformer." prefix (what GPT2LMHeadModel.save_pretrained writes) or not
(the gpt2 repository's file); the causal-mask buffers h.{i}.attn.bias and
h.{i}.attn.masked_bias are skipped; lm_head.weight is read only when
config.json says tie_word_embeddings is false (tied, it is wte). Any other
name, a missing one or a wrong shape is an error naming the file and the
tensor.

`random` writes a directory of GPT-2's layout with weights drawn as GPT-2
initialises them (N(0, 0.02), LayerNorms at weight 1 and bias 0, here with
small random biases too so that every bias is exercised), in the dtype asked,
and, with --tokenizer-from, that directory's vocab.json and merges.txt
copied beside them (for example build/gpt2-tokenizer/gpt2, which `make
gpt2-tokenizer-check` fills with GPT-2's own files). The gpt2 architecture's
reader and the 124M benchmark build their test directories with it.
"""
import argparse
import json
import math
import os
import shutil
import struct
import sys

import torch

# safetensors' dtype names, and the bytes of each element.
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2}
DTYPE_OF_FLAG = {"f32": "F32", "f16": "F16", "bf16": "BF16"}


def fail(message):
    print(f"hf_gpt2.py: {message}", file=sys.stderr)
    sys.exit(1)


# ---- The safetensors container, by hand ---------------------------------------------------------------------


def read_safetensors(path):
    """{name: float32 tensor} from a safetensors file of F32, F16 or BF16 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        fail(f"'{path}' is shorter than a safetensors header length; is it a safetensors file?")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        fail(f"'{path}': its header length {n} runs past the end of the file ({len(data)} bytes)")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    body = data[8 + n :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPE_BYTES:
            fail(f"'{path}': tensor '{name}' is {dtype}; this reader knows F32, F16 and BF16")
        count = math.prod(shape)
        if end - begin != count * DTYPE_BYTES[dtype] or end > len(body):
            fail(f"'{path}': tensor '{name}''s data_offsets [{begin}, {end}) do not hold its shape {shape} of {dtype}")
        raw = bytearray(body[begin:end])
        if dtype == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32) if count else torch.zeros(0)
        elif dtype == "F16":
            t = torch.frombuffer(raw, dtype=torch.float16).float() if count else torch.zeros(0)
        else:  # BF16 is the top half of an F32: put it back there
            halves = torch.frombuffer(raw, dtype=torch.int16).to(torch.int32) & 0xFFFF
            t = (halves << 16).view(torch.float32)
        tensors[name] = t.reshape(shape).clone()
    return tensors


def write_safetensors(path, tensors, dtype):
    """tensors ({name: tensor}, in that order) as one safetensors file of "dtype" (F32, F16 or BF16),
    with the metadata {"format": "pt"} that Hugging Face's loader asks for."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.detach().to(torch.float32).contiguous()
        if dtype == "F32":
            blob = t.numpy().tobytes()
        elif dtype == "F16":
            blob = t.to(torch.float16).numpy().tobytes()
        else:  # BF16: torch rounds to nearest even; its bits as int16
            blob = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


# ---- The model -----------------------------------------------------------------------------------------------


def block_names(i):
    """The tensors of block i (without any prefix) and their shapes, in the gpt2 repository's layout."""
    return {
        f"h.{i}.ln_1.weight": ["C"], f"h.{i}.ln_1.bias": ["C"],
        f"h.{i}.attn.c_attn.weight": ["C", "3C"], f"h.{i}.attn.c_attn.bias": ["3C"],
        f"h.{i}.attn.c_proj.weight": ["C", "C"], f"h.{i}.attn.c_proj.bias": ["C"],
        f"h.{i}.ln_2.weight": ["C"], f"h.{i}.ln_2.bias": ["C"],
        f"h.{i}.mlp.c_fc.weight": ["C", "4C"], f"h.{i}.mlp.c_fc.bias": ["4C"],
        f"h.{i}.mlp.c_proj.weight": ["4C", "C"], f"h.{i}.mlp.c_proj.bias": ["C"],
    }


def expected_shapes(cfg):
    """Every tensor GPT2Model holds for config "cfg", name -> shape."""
    C, V, T, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
    size = {"C": C, "3C": 3 * C, "4C": cfg.get("n_inner") or 4 * C}
    shapes = {"wte.weight": [V, C], "wpe.weight": [T, C]}
    for i in range(L):
        shapes.update({name: [size[d] for d in dims] for name, dims in block_names(i).items()})
    shapes.update({"ln_f.weight": [C], "ln_f.bias": [C]})
    return shapes


def load(directory):
    """(config, {name: float64 tensor}) from a Hugging Face GPT-2 directory, every name and shape checked."""
    config_path = os.path.join(directory, "config.json")
    weights_path = os.path.join(directory, "model.safetensors")
    for path in (config_path, weights_path):
        if not os.path.isfile(path):
            fail(f"'{path}' is missing; a Hugging Face GPT-2 directory holds config.json and model.safetensors")
    with open(config_path, encoding="utf-8") as f:
        cfg = json.load(f)
    for key in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size"):
        if not isinstance(cfg.get(key), int) or cfg[key] < 1:
            fail(f"'{config_path}': \"{key}\" is {cfg.get(key)!r}, not a positive whole number")
    tied = cfg.get("tie_word_embeddings", True)
    raw = read_safetensors(weights_path)
    shapes = expected_shapes(cfg)
    if not tied:
        shapes["lm_head.weight"] = [cfg["vocab_size"], cfg["n_embd"]]
    weights = {}
    for name, t in raw.items():
        short = name[len("transformer.") :] if name.startswith("transformer.") else name
        if short.endswith(".attn.bias") or short.endswith(".attn.masked_bias"):
            continue  # the causal mask, a buffer, not a weight
        if short == "lm_head.weight" and tied:
            continue  # tied: the head is wte
        if short not in shapes:
            fail(f"'{weights_path}': tensor '{name}' is not one of GPT-2's for this config.json")
        if short in weights:
            fail(f"'{weights_path}': tensor '{short}' is there twice (with and without 'transformer.')")
        if list(t.shape) != shapes[short]:
            fail(f"'{weights_path}': tensor '{name}' has shape {list(t.shape)}, config.json makes it {shapes[short]}")
        weights[short] = t.double()
    missing = [name for name in shapes if name not in weights]
    if missing:
        fail(f"'{weights_path}': tensor '{missing[0]}' is missing ({len(missing)} missing in all)")
    return cfg, weights


def activation(name):
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    if name == "gelu":
        return lambda x: torch.nn.functional.gelu(x)
    fail(f"config.json's activation_function \"{name}\" is not gelu_new, gelu_pytorch_tanh or gelu")


def forward(cfg, w, ids):
    """logits [B, T, V] (float64) of ids [B, T], GPT2LMHeadModel's forward in eval mode (no dropout)."""
    B, T = ids.shape
    C, NH = cfg["n_embd"], cfg["n_head"]
    HS = C // NH
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = activation(cfg.get("activation_function", "gelu_new"))

    def ln(x, prefix):
        return torch.nn.functional.layer_norm(x, (C,), w[prefix + ".weight"], w[prefix + ".bias"], eps)

    def conv1d(x, prefix):  # Hugging Face's Conv1D: y = x @ W + b, W [in, out]
        return x @ w[prefix + ".weight"] + w[prefix + ".bias"]

    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(cfg["n_layer"]):
        h = f"h.{i}"
        q, k, v = conv1d(ln(x, h + ".ln_1"), h + ".attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in (q, k, v))  # [B, NH, T, HS]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        scores = scores.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(y, h + ".attn.c_proj")
        x = x + conv1d(act(conv1d(ln(x, h + ".ln_2"), h + ".mlp.c_fc")), h + ".mlp.c_proj")
    head = w["wte.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    return ln(x, "ln_f") @ head.T


def window_loss(cfg, w, tokens):
    """(mean loss, tokens predicted) over every full window of n_positions + 1 tokens, the windows
    side by side and not overlapping: `tinygpt eval`'s windows (evaluate_tokens, src/commands/eval.c)."""
    T = cfg["n_positions"]
    windows = (len(tokens) - 1) // T if len(tokens) > T else 0
    if windows == 0:
        fail(f"{len(tokens)} tokens are fewer than one window of {T} + 1")
    total = 0.0
    for start in range(0, windows, 16):
        rows = [tokens[(start + b) * T : (start + b) * T + T + 1] for b in range(min(16, windows - start))]
        batch = torch.tensor(rows, dtype=torch.long)
        logits = forward(cfg, w, batch[:, :-1])
        total += torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="sum").item()
    return total / (windows * T), windows * T


def text_tokens(directory, path):
    """The ids of a text file by the directory's vocab.json and merges.txt, as GPT-2's encoder.py does
    it (gpt2_tokenizer_check.py's python_encoder, which `make gpt2-tokenizer-check` holds to GPT-2's)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpt2_tokenizer_check import python_encoder

    with open(path, encoding="utf-8") as f:
        return python_encoder(directory)(f.read())


# ---- A synthetic directory -----------------------------------------------------------------------------------


def random_directory(args):
    cfg = {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "n_layer": args.layers, "n_head": args.heads, "n_embd": args.embd, "n_positions": args.positions,
        "n_ctx": args.positions, "vocab_size": args.vocab, "n_inner": None,
        "activation_function": args.activation, "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
        "bos_token_id": args.vocab - 1, "eos_token_id": args.vocab - 1,
        "tie_word_embeddings": True, "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[args.dtype],
    }
    if args.embd % args.heads:
        fail(f"--embd {args.embd} is not a multiple of --heads {args.heads}")
    gen = torch.Generator().manual_seed(args.seed)
    tensors = {}
    for name, shape in expected_shapes(cfg).items():
        if ".ln_" in name or name.startswith("ln_f"):  # LayerNorm: weight near 1, bias near 0
            base = 1.0 if name.endswith(".weight") else 0.0
            t = base + 0.1 * torch.randn(shape, generator=gen)
        elif name.endswith(".bias"):
            t = 0.02 * torch.randn(shape, generator=gen)
        else:
            t = 0.02 * torch.randn(shape, generator=gen)
        prefix = "transformer." if args.prefix else ""
        tensors[prefix + name] = t
    os.makedirs(args.dir, exist_ok=True)
    if args.prefix:  # what save_pretrained writes: the tied head too, and (older versions) the mask buffers
        tensors["lm_head.weight"] = tensors["transformer.wte.weight"]
        for i in range(args.layers):
            mask = torch.tril(torch.ones(args.positions, args.positions)).view(1, 1, args.positions, args.positions)
            tensors[f"transformer.h.{i}.attn.bias"] = mask
            tensors[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    write_safetensors(os.path.join(args.dir, "model.safetensors"), tensors, DTYPE_OF_FLAG[args.dtype])
    with open(os.path.join(args.dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    if args.tokenizer_from:
        for name in ("vocab.json", "merges.txt"):
            shutil.copyfile(os.path.join(args.tokenizer_from, name), os.path.join(args.dir, name))


def parse_tokens(text):
    try:
        return [int(t) for t in text.split()]
    except ValueError:
        fail(f"--tokens '{text}' is not whole numbers separated by spaces")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("logits", help="the logits of one sequence, as JSON [[...V floats...] per position]")
    p.add_argument("dir")
    p.add_argument("--tokens", required=True, help="the ids, separated by spaces")
    p = sub.add_parser("loss", help="mean cross-entropy over full windows of n_positions, as tinygpt eval")
    p.add_argument("dir")
    p.add_argument("--tokens", help="the ids, separated by spaces")
    p.add_argument("--text", help="a text file, tokenized by the directory's vocab.json and merges.txt")
    p.add_argument("--json", action="store_true", help='print {"loss": ..., "tokens": ...}')
    p = sub.add_parser("random", help="write a synthetic Hugging Face GPT-2 directory")
    p.add_argument("dir")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--embd", type=int, required=True)
    p.add_argument("--positions", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--dtype", choices=sorted(DTYPE_OF_FLAG), default="f32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--activation", choices=["gelu_new", "gelu"], default="gelu_new")
    p.add_argument("--tokenizer-from", help="a directory whose vocab.json and merges.txt to copy in")
    p.add_argument("--prefix", action="store_true", help="names with 'transformer.' and an lm_head.weight, as save_pretrained writes them")
    args = parser.parse_args()

    if args.command == "random":
        random_directory(args)
        return
    cfg, w = load(args.dir)
    if args.command == "logits":
        tokens = parse_tokens(args.tokens)
        if not tokens or len(tokens) > cfg["n_positions"] or min(tokens) < 0 or max(tokens) >= cfg["vocab_size"]:
            fail(f"--tokens: give 1 to {cfg['n_positions']} ids in [0, {cfg['vocab_size']})")
        logits = forward(cfg, w, torch.tensor([tokens]))[0]
        json.dump(logits.tolist(), sys.stdout)
        print()
        return
    if (args.tokens is None) == (args.text is None):
        fail("loss: give one of --tokens or --text")
    tokens = parse_tokens(args.tokens) if args.tokens is not None else text_tokens(args.dir, args.text)
    loss, predicted = window_loss(cfg, w, tokens)
    if args.json:
        print(json.dumps({"loss": loss, "tokens": predicted}))
    else:
        print(f"loss {loss:.6f} over {predicted} tokens")


if __name__ == "__main__":
    main()
