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
                                                       [--only card|gpt|adamw|muon|recipe|gpt2]
    /usr/bin/python3 scripts/torch_reference.py selftest
    /usr/bin/python3 scripts/torch_reference.py bench --tinygpt ./tinygpt [--data FILE] [--out FILE]
                                                      [--configs S,M,L,gpt]
    /usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt [--out FILE]
    /usr/bin/python3 scripts/torch_reference.py learn --tinygpt ./tinygpt [--data FILE] [--steps N]

Run it with Debian's Python (/usr/bin/python3) and python3-torch; install them
with `scripts/setup.sh --python`.

Its parts are in scripts/torch_ref/, one file a role (torch_ref/__init__.py
lists them): the reference models (model.py, and as nn.Modules modules.py),
the optimizer (optim.py), parity (parity.py, parity_optim.py and the set-up
they share, parity_setup.py), selftest, bench, products and learn (one file
each), the command line (cli.py). This file is what the Makefile and the docs
run; bench, products and learn start their PyTorch workers through it too.
"""

import sys

from torch_ref.cli import main

if __name__ == "__main__":
    sys.exit(main(__doc__.split("\n")[0]))
