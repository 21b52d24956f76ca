"""The reference models, written from the models' descriptions (docs/model.md,
src/model/model.h), not from the C code: the card and the GPT (with the modern
recipe's swaps, and GPT-2's biases) as functions of a dict of tensors named as
in tinygpt's checkpoints, so that autograd gives every tensor's gradient and
parity can compare them by name; and the windows and loss of `tinygpt eval`.

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
parity trains both with plain SGD, and the GPT also with AdamW and with Muon
(optim.py's muon_update, written from Keller Jordan's muon.py: the blocks'
matrices by Muon, the rest by torch's AdamW); bench times plain SGD; learn
trains with AdamW.
"""

import math

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


def card_param_shapes(V, block_size, C):
    """The card's tensors, name -> shape."""
    return {
        "tok_emb.weight": [V, C], "pos_emb.weight": [block_size, C],
        "blocks.0.attn.q.weight": [C, C], "blocks.0.attn.k.weight": [C, C],
        "blocks.0.attn.v.weight": [C, C], "blocks.0.attn.proj.weight": [C, C],
        "blocks.0.attn.proj.bias": [C], "head.weight": [V, C], "head.bias": [V],
    }


def random_params(V, block_size, C, dtype=torch.float64, seed=0):
    """Random parameters for a model of the given sizes (for the self-test)."""
    gen = torch.Generator().manual_seed(seed)
    shapes = card_param_shapes(V, block_size, C)
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
