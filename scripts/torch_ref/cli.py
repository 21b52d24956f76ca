"""The command line of scripts/torch_reference.py: every subcommand's flags,
and the function that runs it.
"""

import argparse

from torch_ref.bench import (
    BENCH_CONFIGS, BENCH_ROUNDS, BENCH_SAMPLE_CONFIGS, BENCH_TIMED, BENCH_WARMUP, cmd_bench,
    cmd_bench_torch_worker)
from torch_ref.learn import cmd_learn, cmd_learn_torch_worker, LEARN_STEPS
from torch_ref.parity import cmd_parity
from torch_ref.products import (
    cmd_products, cmd_products_torch_worker, PRODUCT_ROUNDS, PRODUCT_SECONDS)
from torch_ref.selftest import cmd_selftest


def add_tinygpt_flag(parser):
    """--tinygpt, which every subcommand that runs tinygpt takes."""
    parser.add_argument("--tinygpt", required=True, help="path to the tinygpt binary")


def add_worker_input_flags(parser):
    """A PyTorch worker's text and the checkpoint whose vocabulary it uses."""
    parser.add_argument("--data", required=True)
    parser.add_argument("--vocab-from", required=True, help="a tinygpt checkpoint")


def main(description):
    """Parse the command line and run the subcommand; "description" is
    --help's first line."""
    parser = argparse.ArgumentParser(description=description)
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{parity,selftest,bench,products,learn}")

    parity = sub.add_parser("parity",
                            help="train with tinygpt and PyTorch, compare losses and weights")
    add_tinygpt_flag(parity)
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
    add_tinygpt_flag(bench)
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
    add_tinygpt_flag(products)
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
    add_tinygpt_flag(learn)
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
    add_worker_input_flags(learn_worker)
    learn_worker.add_argument("--log", required=True, help="write log.csv here")
    for flag in ("--threads", "--steps", "--eval-interval", "--eval-batches", "--seed"):
        learn_worker.add_argument(flag, type=int, required=True)
    learn_worker.add_argument("--quiet", action="store_true", help="no progress lines")
    learn_worker.set_defaults(func=cmd_learn_torch_worker)

    # Internal: one PyTorch measurement, started by `bench` in a fresh process.
    worker = sub.add_parser("bench-torch-worker")
    add_worker_input_flags(worker)
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
