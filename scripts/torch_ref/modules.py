"""The models again as ordinary nanoGPT-style nn.Modules, written the way a
PyTorch user would (nn.Embedding, nn.Linear, the library's layer_norm, gelu,
softmax and cross_entropy): `bench` times them against tinygpt, `learn` trains
BenchNanoGPT, and the self-test holds them to model.py's functions. Also what
a benchmarked model is (BenchConfig) and its FLOP count.
"""

import collections
import math

import torch

from torch_ref.model import LAYER_NORM_EPS


# One benchmarked model: its name (for --configs), the architecture (card or
# gpt), L layers (1 for card), C channels, NH heads, T context, B batch, and
# the dropout probability (card: on the attention weights; gpt: everywhere
# nanoGPT puts it). Training mode throughout.
BenchConfig = collections.namedtuple("BenchConfig", "name arch layers C NH T B dropout")


class BenchGPT(torch.nn.Module):
    """The model as an ordinary nanoGPT-style nn.Module, for the speed comparison.

    The same computation as model.py's forward(), written the way a PyTorch user
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
