#!/usr/bin/env bash
# valgrind_check.sh: run a short train, a stop and resume, sample and eval
# (char and bpe) under valgrind's memcheck; fail on any invalid access, use of
# uninitialised memory, or leak.       (make valgrind)
#
#   scripts/valgrind_check.sh TINYGPT_BINARY
#
# The binary should be built without -march=native (valgrind does not know
# AVX-512) and with -g for readable reports; `make valgrind` builds one into
# build/valgrind.
#
# OMP_NUM_THREADS=1: libgomp keeps its worker threads (and their stacks)
# alive until the process exits, and memcheck would report those stacks as
# "possibly lost". With one thread there are no workers; the code paths are
# the same (the OpenMP pragmas only split loops), and `make sanitize` covers
# two threads. libgomp's own bookkeeping, still reachable at exit by design,
# is suppressed in scripts/valgrind.supp (which says exactly what and why).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:?usage: $0 TINYGPT_BINARY}
if ! command -v valgrind >/dev/null; then
    echo "valgrind_check: needs valgrind; run scripts/setup.sh --sanitize" >&2
    exit 1
fi

dir=$(mktemp -d /tmp/tinygpt_valgrind_XXXXXX)
trap 'rm -rf "$dir"' EXIT

# A few KB of text with multi-byte characters.
for i in $(seq 120); do
    echo "the whale — a white whale, call me ishmael $((i % 7)). the sea is wide."
done >"$dir/text.txt"

export OMP_NUM_THREADS=1
# Set, so that tinygpt does not re-execute itself to set it (main.c): valgrind
# does not follow an exec, and would check nothing.
export OMP_WAIT_POLICY=passive
memcheck() {
    echo "valgrind_check: tinygpt $*"
    valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=all \
        --suppressions=scripts/valgrind.supp \
        --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes \
        "$bin" "$@" >"$dir/stdout" 2>"$dir/stderr" || {
        local status=$?
        # 99 is valgrind's verdict; any other status is tinygpt's own (some
        # runs below are meant to fail, and pass "expect=N" first).
        if ((status == 99)) || ((status != ${expect:-0})); then
            cat "$dir/stderr" >&2
            echo "valgrind_check: FAILED (exit status $status) for: tinygpt $*" >&2
            exit 1
        fi
    }
    if grep -q "==[0-9]*==" "$dir/stderr"; then  # a report, even one not counted as an error
        cat "$dir/stderr" >&2
        echo "valgrind_check: FAILED: valgrind reported something for: tinygpt $*" >&2
        exit 1
    fi
}

model="$dir/run/model.safetensors"
flags=(--batch 4 --context 16 --embd 16 --heads 2 --eval-interval 5 --eval-batches 2 --save-every 4)
# A two-block gpt (the default architecture) through every command, then
# the card model through training, sampling and attention.
memcheck train "$dir/text.txt" --out "$dir/run" --steps 12 --layers 2 --dropout 0.1 "${flags[@]}" --stop-after 6
memcheck train --resume "$dir/run"
memcheck sample --model "$model" --prompt "the " --tokens 40
memcheck sample --model "$model" --prompt "the " --tokens 40 --no-cache --top-k 5
memcheck eval --model "$model" "$dir/text.txt" --json
mkdir -p "$dir/maps"
memcheck attention --model "$model" --prompt "the whale" --out "$dir/maps"
memcheck train "$dir/text.txt" --out "$dir/card" --arch card --steps 6 "${flags[@]}"
memcheck sample --model "$dir/card/model.safetensors" --prompt "the " --tokens 40
memcheck attention --model "$dir/card/model.safetensors" --prompt "the whale" --out "$dir/maps"
# Error paths free what they allocated too.
# A bpe model: learning its merges, the checkpoint's merges, encoding and
# printing pieces as whole characters.
memcheck train "$dir/text.txt" --out "$dir/bpe" --tokenizer bpe --vocab-size 280 --steps 4 --layers 1 "${flags[@]}"
memcheck sample --model "$dir/bpe/model.safetensors" --prompt "the whale" --tokens 40
memcheck tokenize --model "$dir/bpe/model.safetensors" "the white whale"
memcheck attention --model "$dir/bpe/model.safetensors" --prompt "the whale" --out "$dir/maps"
expect=1 memcheck sample --model "$dir/text.txt"
expect=2 memcheck sample --model "$model" --prompt "Zebra"
expect=1 memcheck train "$dir/missing.txt" --out "$dir/x"
expect=1 memcheck train "$dir/text.txt" --out "$dir/x" --arch card --steps 50 --lr 100 "${flags[@]}"
echo "valgrind_check: no errors and no leaks"
