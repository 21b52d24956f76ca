"""torch_ref: the parts of scripts/torch_reference.py, an independent PyTorch
implementation of tinygpt's models, one file a role.

    model.py          the reference models (the card, the GPT and its swaps, GPT-2),
                      functions of a dict of tensors, and `tinygpt eval`'s loss
    modules.py        the same models as ordinary nn.Modules (bench and learn train
                      them), their configs and FLOP count
    optim.py          the optimizer: nanoGPT's recipe (AdamW, schedule, clipping) and Muon
    data.py           texts, token ids and tinygpt's batches
    tinygpt.py        tinygpt from the outside: running it, the flags it knows, its
                      checkpoints (safetensors) and its log.csv
    measure.py        timing and memory of whole processes, the machine and its peak
    parity_setup.py   parity's settings and tolerances, and the set-up its checks share
    parity.py         `parity`: the card and the GPT trained by SGD, the probe, the swaps
    parity_optim.py   parity's GPT trained by AdamW and by Muon
    selftest.py       `selftest`: this package's pieces against each other and autograd
    bench.py          `bench`: training and sampling speed, tinygpt against PyTorch
    products.py       `products`: a linear layer's three products alone
    learn.py          `learn`: nanoGPT's recipe, validation loss against training time
    cli.py            the command line: every subcommand's flags

Run it through scripts/torch_reference.py (see its docstring).
"""
