#!/usr/bin/env python3
"""export_check.py: `tinygpt export` against an independent GPT-2 (make export-check, part of make parity).

    export_check.py --tinygpt ./tinygpt --gpt2-dir build/gpt2-tokenizer/gpt2

Trains a tiny gpt of GPT-2's parts (LayerNorm, GELU, learned positions, a
tied head, a bpe tokenizer) for a few steps on tests/data's fixture, exports
it, and holds the Hugging Face directory to the checkpoint:

- scripts/hf_gpt2.py (GPT2LMHeadModel's computation, written from GPT-2's
  architecture, reading the directory by hand) gives the loss `tinygpt eval`
  gives on the same text, to 1e-5, over the same number of tokens. Its
  tokens come from the exported vocab.json and merges.txt through GPT-2's
  encoder.py algorithm (gpt2_tokenizer_check.py's python_encoder), so the
  tokenizer files are checked too: a wrong id would change the loss.
- `tinygpt eval --model DIR` (the directory read back) gives the
  checkpoint's loss, and so does a gpt2 (`--arch gpt2 --mlp gelu_tanh`,
  biases and GPT-2's GELU), exported as "gelu_new", by hf_gpt2.py too.
- `tinygpt tokenize --model DIR` (GPT-2's tokenizer, read from the exported
  files) gives the checkpoint's ids on the text.
- A tiny gpt on GPT-2's own tokenizer (--tokenizer gpt2, from --gpt2-dir,
  which make gpt2-tokenizer-check fills with GPT-2's files): its export's
  vocab.json and merges.txt are GPT-2's (the same tokens, ids and merges),
  and hf_gpt2.py gives eval's loss on it too.
- hf_gpt2.py's reader: a synthetic directory (hf_gpt2.py random) gives the
  same loss with and without the "transformer." prefix, and within
  rounding in F16 and BF16; and refuses a tensor too many, one missing and
  one of the wrong shape, naming it.

Exit status 1 on any difference. Needs python3-torch and python3-regex.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "..", "tests", "data", "card_golden.txt")
# The tiny gpt: GPT-2's parts, which the default recipe swaps out.
MODEL_FLAGS = ["--norm", "layernorm", "--mlp", "gelu", "--pos", "learned", "--tied-head", "--no-qk-norm",
               "--layers", "2", "--embd", "32", "--heads", "2", "--context", "16", "--batch", "4", "--seed", "3"]
TRAIN_FLAGS = MODEL_FLAGS + ["--steps", "30", "--vocab-size", "300"]
TOLERANCE = 1e-5  # eval prints 6 decimals; float32 against float64 differ far less


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"export_check: {' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def hf(*args):
    return run([sys.executable, os.path.join(HERE, "hf_gpt2.py"), *args])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tinygpt", required=True)
    parser.add_argument("--gpt2-dir", required=True, help="a directory holding GPT-2's vocab.json and merges.txt")
    args = parser.parse_args()
    tinygpt = os.path.abspath(args.tinygpt)
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        failures += not ok

    with tempfile.TemporaryDirectory() as tmp:
        run_dir, out = os.path.join(tmp, "run"), os.path.join(tmp, "hf")
        run([tinygpt, "train", TEXT, "--out", run_dir, *TRAIN_FLAGS])
        model = os.path.join(run_dir, "model.safetensors")
        print(run([tinygpt, "export", "--model", model, "--out", out]).strip())

        ours = json.loads(run([tinygpt, "eval", "--model", model, TEXT, "--json"]))
        theirs = json.loads(hf("loss", out, "--text", TEXT, "--json"))
        check(ours["tokens"] == theirs["tokens"], f"the same tokens predicted: tinygpt eval {ours['tokens']}, hf_gpt2.py {theirs['tokens']}")
        diff = abs(ours["loss"] - theirs["loss"])
        check(diff <= TOLERANCE, f"the same loss: tinygpt eval {ours['loss']:.6f}, hf_gpt2.py on the export {theirs['loss']:.6f} (difference {diff:.1e}, at most {TOLERANCE:g})")

        back = json.loads(run([tinygpt, "eval", "--model", out, TEXT, "--json"]))
        diff = abs(ours["loss"] - back["loss"])
        check(diff <= TOLERANCE, f"read back: tinygpt eval of the directory {back['loss']:.6f}, of the checkpoint {ours['loss']:.6f}")

        # A gpt2 (GPT-2's own model: biases, GELU's tanh form), out and back.
        run_arch, out_arch = os.path.join(tmp, "run-arch"), os.path.join(tmp, "hf-arch")
        run([tinygpt, "train", TEXT, "--out", run_arch, "--arch", "gpt2", "--mlp", "gelu_tanh", "--layers", "2",
             "--embd", "32", "--heads", "2", "--context", "16", "--batch", "4", "--seed", "3", "--steps", "30",
             "--vocab-size", "300"])
        model_arch = os.path.join(run_arch, "model.safetensors")
        run([tinygpt, "export", "--model", model_arch, "--out", out_arch])
        with open(os.path.join(out_arch, "config.json"), encoding="utf-8") as f:
            check(json.load(f)["activation_function"] == "gelu_new", "a gpt2 with --mlp gelu_tanh exports as gelu_new")
        ours = json.loads(run([tinygpt, "eval", "--model", model_arch, TEXT, "--json"]))
        theirs = json.loads(hf("loss", out_arch, "--text", TEXT, "--json"))
        back = json.loads(run([tinygpt, "eval", "--model", out_arch, TEXT, "--json"]))
        for who, loss in [("hf_gpt2.py", theirs["loss"]), ("tinygpt eval of the directory", back["loss"])]:
            diff = abs(ours["loss"] - loss)
            check(diff <= TOLERANCE, f"gpt2: {who} {loss:.6f}, tinygpt eval of the checkpoint {ours['loss']:.6f} (difference {diff:.1e})")

        with open(TEXT, encoding="utf-8") as f:
            text = f.read()[:2000]
        ids_ckpt = run([tinygpt, "tokenize", "--model", model, text]).splitlines()[-2]
        ids_dir = run([tinygpt, "tokenize", "--model", out, text]).splitlines()[-2]
        check(ids_ckpt == ids_dir, "tinygpt tokenize: the exported vocab.json and merges.txt give the checkpoint's ids")

        # GPT-2's own tokenizer, through a checkpoint and out again.
        run_gpt2, out_gpt2 = os.path.join(tmp, "run-gpt2"), os.path.join(tmp, "hf-gpt2")
        run([tinygpt, "train", TEXT, "--out", run_gpt2, *MODEL_FLAGS, "--steps", "5", "--tokenizer", "gpt2",
             "--tokenizer-dir", args.gpt2_dir])
        model_gpt2 = os.path.join(run_gpt2, "model.safetensors")
        run([tinygpt, "export", "--model", model_gpt2, "--out", out_gpt2])
        for name, read in [("vocab.json", json.load), ("merges.txt", lambda f: f.read().split("\n")[1:])]:
            with open(os.path.join(args.gpt2_dir, name), encoding="utf-8") as f:
                original = read(f)
            with open(os.path.join(out_gpt2, name), encoding="utf-8") as f:
                exported = read(f)
            check(original == exported, f"a gpt2-tokenizer model exports GPT-2's own {name} ({len(original)} entries)")
        ours = json.loads(run([tinygpt, "eval", "--model", model_gpt2, TEXT, "--json"]))
        theirs = json.loads(hf("loss", out_gpt2, "--text", TEXT, "--json"))
        diff = abs(ours["loss"] - theirs["loss"])
        check(ours["tokens"] == theirs["tokens"] and diff <= TOLERANCE,
              f"GPT-2's tokenizer: tinygpt eval {ours['loss']:.6f} over {ours['tokens']} tokens, hf_gpt2.py {theirs['loss']:.6f} over {theirs['tokens']}")

        losses = {}
        tokens = " ".join(str((7 * i) % 300) for i in range(49))
        for name, extra in [("f32", []), ("f32 transformer.", ["--prefix"]), ("f16", ["--dtype", "f16"]),
                            ("bf16", ["--dtype", "bf16", "--prefix"])]:
            d = os.path.join(tmp, name.replace(" ", "_"))
            hf("random", d, "--layers", "2", "--heads", "2", "--embd", "32", "--positions", "16", "--vocab", "300",
               "--seed", "5", *extra)
            losses[name] = json.loads(hf("loss", d, "--tokens", tokens, "--json"))["loss"]
        check(losses["f32"] == losses["f32 transformer."], f"hf_gpt2.py reads names with and without 'transformer.' alike ({losses['f32']:.6f})")
        for name, bound in [("f16", 1e-3), ("bf16", 1e-2)]:
            diff = abs(losses[name] - losses["f32"])
            check(0 < diff <= bound, f"hf_gpt2.py reads {name}: loss {losses[name]:.6f}, {diff:.1e} from F32's (rounded, so not 0; at most {bound:g})")

        # A tensor too many, one missing, one of the wrong shape: each refused, naming it.
        sys.path.insert(0, HERE)
        import hf_gpt2
        d = os.path.join(tmp, "f32")
        good = hf_gpt2.read_safetensors(os.path.join(d, "model.safetensors"))
        extra = dict(good, **{"h.0.attn.extra": good["ln_f.bias"]})
        missing = {k: v for k, v in good.items() if k != "h.1.mlp.c_fc.bias"}
        wrong = dict(good, **{"wpe.weight": good["wpe.weight"][:8]})
        for what, tensors, needle in [("an unknown tensor", extra, "'h.0.attn.extra' is not one of GPT-2's"),
                                      ("a missing tensor", missing, "'h.1.mlp.c_fc.bias' is missing"),
                                      ("a wrong shape", wrong, "'wpe.weight' has shape [8, 32]")]:
            hf_gpt2.write_safetensors(os.path.join(d, "model.safetensors"), tensors, "F32")
            r = subprocess.run([sys.executable, os.path.join(HERE, "hf_gpt2.py"), "loss", d, "--tokens", tokens],
                               capture_output=True, text=True)
            check(r.returncode == 1 and needle in r.stderr, f"hf_gpt2.py refuses {what}: {r.stderr.strip()}")
    if failures:
        sys.exit(f"export_check: {failures} failed")
    print("export_check: all passed")


if __name__ == "__main__":
    main()
