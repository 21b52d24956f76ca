#!/usr/bin/python3
"""walkthrough_torch.py: `tinygpt walkthrough --backward`'s example in PyTorch.

The same six tokens, weights and loss, built from plain tensor operations;
loss.backward() computes every gradient that the walkthrough's steps 7-11
derive by hand, and they are printed in the same form (the "d" rows), so
the two can be read side by side:

    ./tinygpt walkthrough --backward | less
    /usr/bin/python3 scripts/walkthrough_torch.py | less

The numbers are copied from src/commands/walkthrough.c and
walkthrough_backward.c; make test runs both and holds every printed number
equal (tests/test_walkthrough.c). Weights are in the textbook's layout,
W [in, out], used as x @ W, as the walkthrough prints them (tinygpt's
layers keep W^T, [out, in]: its step 7 says where the layout turns).
PyTorch's autograd only; nothing of tinygpt is imported.
"""
import signal

import torch

signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` or `| less` ends it quietly

TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
X = [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
     [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]
# Each head's [d_in, d_out] projections: head 1's (the textbook's), head 2's.
W_QUERY = ([[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]], [[0.9, -0.4], [-0.6, 0.2], [0.3, 0.8]])
W_KEY = ([[0.1366, 0.1025], [0.1841, 0.7264], [0.3153, 0.6871]], [[0.8, 0.1], [-0.7, 0.5], [0.2, -0.3]])
W_VALUE = ([[0.0756, 0.1966], [0.3164, 0.4017], [0.1186, 0.8274]], [[0.5, -0.3], [0.2, 0.4], [-0.1, 0.6]])
W_OUT = [[0.3, -0.1, 0.2, 0.0], [0.1, 0.4, -0.2, 0.3], [-0.2, 0.1, 0.5, 0.1], [0.0, 0.3, 0.1, -0.4]]
B_OUT = [0.1, 0.0, -0.1, 0.05]
NORM_WEIGHT = [1.0, 0.8, 1.2, 0.9]  # RMSNorm's g
W_HEAD = [[0.5, -0.3, 0.8, -0.6, 0.2, 0.4], [-0.4, 0.7, -0.2, 0.3, 0.9, -0.5],
          [0.6, 0.1, -0.7, 0.5, -0.3, 0.2], [-0.2, -0.6, 0.4, 0.1, 0.7, -0.8]]
B_HEAD = [0.05, -0.1, 0.0, 0.1, -0.05, 0.02]
TARGETS = [1, 2, 3, 4, 5, 0]  # each token's next; after "step", "Your" again
T, HEADS, D = 6, 2, 2  # tokens, heads, channels per head
DIMS = ["d1", "d2", "d3"]
HEAD_DIMS = ["h1.d1", "h1.d2", "h2.d1", "h2.d2"]
OUT_DIMS = ["o1", "o2", "o3", "o4"]


def leaf(rows):
    """A float32 tensor whose gradient we want: autograd fills its .grad."""
    return torch.tensor(rows, dtype=torch.float32, requires_grad=True)


def both_heads(pair):
    """Head 1's [3, 2] and head 2's side by side: [3, 4], as (11a-c) print them."""
    return leaf([a + b for a, b in zip(*pair)])


x, w_query, w_key, w_value = leaf(X), both_heads(W_QUERY), both_heads(W_KEY), both_heads(W_VALUE)
w_out, b_out, g = leaf(W_OUT), leaf(B_OUT), leaf(NORM_WEIGHT)
w_head, b_head = leaf(W_HEAD), leaf(B_HEAD)

# The forward pass, steps 2-6. Autograd fills .grad for leaves only, so
# each intermediate whose gradient is printed asks for it (retain_grad).
queries, keys, values = x @ w_query, x @ w_key, x @ w_value  # [T, 4]: head 1's 2 channels | head 2's
future = torch.ones(T, T).triu(1).bool()  # above the diagonal: the tokens after t
scores, weights, contexts = [], [], []
for h in range(HEADS):
    cols = slice(h * D, (h + 1) * D)
    s = (queries[:, cols] @ keys[:, cols].T / D**0.5).masked_fill(future, float("-inf"))
    w = torch.softmax(s, dim=1)
    scores.append(s)
    weights.append(w)
    contexts.append(w @ values[:, cols])
context = torch.cat(contexts, dim=1)  # [T, 4]
output = context @ w_out + b_out  # the output projection
stream = context + output  # the residual: a skip path around the projection
rms = (stream.pow(2).mean(dim=1, keepdim=True) + 1e-5).sqrt()
normed = stream / rms * g  # RMSNorm
logits = normed @ w_head + b_head
loss = torch.nn.functional.cross_entropy(logits, torch.tensor(TARGETS))  # the mean over the rows

for t in [queries, keys, values, *scores, *weights, context, output, stream, normed, logits]:
    t.retain_grad()
loss.backward()


def show(tag, title, grad, rows, cols, causal=False):
    """One gradient as the walkthrough prints it: the title and shape, the
    column labels, then per row its label, "d" and 5 decimals ("." above
    the diagonal of the [T, T] ones, which no token reads)."""
    print(f"{tag} {title} [{len(rows)} x {len(cols)}]")
    print(" " * 13 + " ".join(f" {c:>9}" for c in cols))
    for r, label in enumerate(rows):
        cells = ["." if causal and c > r else f"{grad[r, c].item():.5f}" for c in range(len(cols))]
        print(f"  {label:<8}{'d':>3}" + " ".join(f" {v:>9}" for v in cells))
    print()


print(f"loss = {loss.item():.4f}\n")
show("(7a)", "d logits", logits.grad, TOKENS, TOKENS)
show("(7b)", "d normed", normed.grad, TOKENS, OUT_DIMS)
show("(7c)", "d W_head", w_head.grad, OUT_DIMS, TOKENS)
show("(7d)", "d b_head", b_head.grad[None], ["bias"], TOKENS)
show("(8a)", "d stream", stream.grad, TOKENS, OUT_DIMS)
show("(8b)", "d g", g.grad[None], ["g"], OUT_DIMS)
show("(9a)", "d output", output.grad, TOKENS, OUT_DIMS)
show("(9b)", "d W_out", w_out.grad, HEAD_DIMS, OUT_DIMS)
show("(9c)", "d b_out", b_out.grad[None], ["bias"], OUT_DIMS)
show("(9d)", "d context", context.grad, TOKENS, HEAD_DIMS)
for h, tags in enumerate([("(10a)", "(10b)"), ("(10c)", "(10d)")]):
    show(tags[0], f"head {h + 1}: d weights", weights[h].grad, TOKENS, TOKENS, causal=True)
    show(tags[1], f"head {h + 1}: d scores", scores[h].grad, TOKENS, TOKENS, causal=True)
show("(10e)", "d queries", queries.grad, TOKENS, HEAD_DIMS)
show("(10f)", "d keys", keys.grad, TOKENS, HEAD_DIMS)
show("(10g)", "d values", values.grad, TOKENS, HEAD_DIMS)
show("(11a)", "d W_query", w_query.grad, DIMS, HEAD_DIMS)
show("(11b)", "d W_key", w_key.grad, DIMS, HEAD_DIMS)
show("(11c)", "d W_value", w_value.grad, DIMS, HEAD_DIMS)
show("(11d)", "d X", x.grad, TOKENS, DIMS)
