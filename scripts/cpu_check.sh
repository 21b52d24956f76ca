#!/usr/bin/env bash
# cpu_check.sh: the portable binary (make PORTABLE=1) on CPUs without
# AVX-512, emulated on this machine (make cpu-check, issue 44): the proof
# that it picks its path from the CPU it finds, runs no instruction that CPU
# lacks, and computes there what it computes here.
#
#   scripts/cpu_check.sh PORTABLE_TINYGPT PLAIN_TINYGPT
#
# qemu-x86_64 runs an x86-64 program as the CPU model that -cpu names: cpuid
# answers as that model does, and an instruction the model lacks stops the
# program (SIGILL): any AVX-512 instruction on every model (qemu 7.2 does
# not emulate AVX-512), any AVX, AVX2 or FMA one on Nehalem. (Checked: the
# plain build of an AVX-512 machine stops so under Haswell, and the AVX2
# path's build under Nehalem.) The models, and the path each must get:
#   EPYC-Milan  AMD Zen 3, the CPU issue 44 was found on: AVX2, FMA   avx2
#   Haswell     Intel's first with AVX2 and FMA                       avx2
#   Nehalem     SSE4.2, no AVX                                        generic
# For each:
# 1. `tinygpt peak` under qemu names the path the launcher chose from cpuid
#    alone (TINYGPT_KERNELS unset).
# 2. A short train of a small gpt on 2 threads (the default split, so each
#    thread runs its own rows) and a sample from it, under qemu, give the
#    model file and the text that this machine's own run of the same binary
#    capped to that path (TINYGPT_KERNELS) gives, byte for byte.
# Then the plain build (make, for this CPU) under Nehalem, which lacks AVX:
# it must stop with cpu_guard.c's one line (exit 1) that says what to
# build, not at an illegal instruction.
# Emulation is hundreds of times slower than the CPU: a tiny model, a few
# steps; about a minute in all.
#
# Exit status: 0 when every model passed; otherwise 1, the last line saying
# which and where its log is.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/cpu_check.sh PORTABLE_TINYGPT PLAIN_TINYGPT"
bin=${1:?$usage} plain=${2:?$usage}
[[ -x $bin ]] || { echo "cpu_check: $bin is not an executable tinygpt: run make PORTABLE=1 first" >&2; exit 1; }
[[ -x $plain ]] || { echo "cpu_check: $plain is not an executable tinygpt: run make first" >&2; exit 1; }
command -v qemu-x86_64 >/dev/null || { echo "cpu_check: no qemu-x86_64: run scripts/setup.sh --qemu" >&2; exit 1; }

# tinygpt starts itself again once to set GOMP_SPINCOUNT for the OpenMP
# runtime (docs/model.md, "Threads"); under qemu-user that second start
# would run on this CPU, outside the emulation. Set, it starts once.
export GOMP_SPINCOUNT=1000
unset TINYGPT_KERNELS

work=build/cpu-check
rm -rf "$work" && mkdir -p "$work"
train_flags=(--tokenizer char --steps 6 --batch 4 --context 32 --embd 32 --heads 4 --layers 2 --seed 5
             --threads 2 --eval-interval 3 --eval-batches 2 --sample-every 0 --save-every 0 --peak 100)
sample_flags=(--seed 3 --tokens 40 --prompt "The ")

# emulated MODEL ARGS...: the portable tinygpt under qemu as CPU model
# MODEL, its warnings about features TCG cannot give (a model's pcid,
# x2apic, ...) left out of what it prints.
emulated() {
    local model=$1
    shift
    qemu-x86_64 -cpu "$model" "$@" 2> >(grep -v "warning: TCG doesn't support" >&2)
}

# run_as MODEL PATH DEPTH: step 1 and 2 for one model; its output in
# $work/MODEL. DEPTH: the k blocks' depth the model's L1 data cache (as its
# cpuid tells it) must get (matmul.c): these models' 32 KB, 80 rows; the
# runs here, on this CPU's L1, may use another, which must not change a bit.
run_as() {
    local model=$1 path=$2 depth=$3 dir=$work/$1
    mkdir -p "$dir"
    emulated "$model" "$bin" peak --seconds 0.01 --threads 1 >"$dir/peak.out" 2>"$dir/peak.err" ||
        { echo "cpu_check: $model: tinygpt peak failed under qemu: see $dir/peak.err" >&2; return 1; }
    local chosen blocks
    chosen=$(sed -n 's/^kernels: //p' "$dir/peak.out")
    [[ $chosen == "$path" ]] ||
        { echo "cpu_check: $model: the portable binary chose '$chosen', not $path" >&2; return 1; }
    blocks=$(sed -n 's/^products: //p' "$dir/peak.out")
    [[ $blocks == "k blocks $depth deep ("* ]] ||
        { echo "cpu_check: $model: '$blocks', not k blocks $depth deep" >&2; return 1; }
    emulated "$model" "$bin" train README.md "${train_flags[@]}" --out "$dir/emulated" >"$dir/emulated.log" 2>&1 ||
        { echo "cpu_check: $model: train failed under qemu: see $dir/emulated.log" >&2; return 1; }
    emulated "$model" "$bin" sample --model "$dir/emulated/model.safetensors" "${sample_flags[@]}" >"$dir/emulated.sample" \
        2>"$dir/emulated.sample.err" ||
        { echo "cpu_check: $model: sample failed under qemu: see $dir/emulated.sample.err" >&2; return 1; }
    TINYGPT_KERNELS=$path "$bin" train README.md "${train_flags[@]}" --out "$dir/here" >"$dir/here.log" 2>&1 ||
        { echo "cpu_check: $model: train on this CPU (TINYGPT_KERNELS=$path) failed: see $dir/here.log" >&2; return 1; }
    TINYGPT_KERNELS=$path "$bin" sample --model "$dir/here/model.safetensors" "${sample_flags[@]}" >"$dir/here.sample" \
        2>/dev/null || { echo "cpu_check: $model: sample on this CPU failed" >&2; return 1; }
    [[ -s $dir/here.sample ]] || { echo "cpu_check: $model: the sample printed nothing" >&2; return 1; }
    cmp -s "$dir/emulated/model.safetensors" "$dir/here/model.safetensors" ||
        { echo "cpu_check: $model: the model trained under qemu is not this CPU's $path run's: see $dir" >&2; return 1; }
    cmp -s "$dir/emulated.sample" "$dir/here.sample" ||
        { echo "cpu_check: $model: the sample under qemu is not this CPU's $path run's: see $dir" >&2; return 1; }
    echo "cpu_check: $model: chose $path, $blocks; trained 6 steps on 2 threads and sampled, byte for byte as" \
        "$path here ($(TINYGPT_KERNELS=$path "$bin" peak --seconds 0.01 --threads 1 | sed -n 's/^products: //p'))"
}

failed=0
run_as EPYC-Milan avx2 80 || failed=1
run_as Haswell avx2 80 || failed=1
run_as Nehalem generic 80 || failed=1
# The plain build under Nehalem: cpu_guard.c's line, or nothing to refuse
# (a build for a CPU without AVX, which this check does not expect).
status=0
emulated Nehalem "$plain" --version >"$work/plain.out" 2>"$work/plain.err" || status=$?
if ((status == 0)); then
    echo "cpu_check: the plain build runs as Nehalem: it was compiled for no set Nehalem lacks, nothing to refuse"
elif ((status == 1)) && [[ $(wc -l <"$work/plain.err") -eq 1 ]] && grep -q 'make PORTABLE=1' "$work/plain.err"; then
    echo "cpu_check: the plain build as Nehalem stops with one line: $(cat "$work/plain.err")"
else
    echo "cpu_check: the plain build as Nehalem exited $status, not 1 with cpu_guard.c's line: see $work/plain.err" >&2
    failed=1
fi
if ((failed)); then
    echo "cpu_check: failed (the logs: $work)" >&2
    exit 1
fi
echo "cpu_check: passed"
