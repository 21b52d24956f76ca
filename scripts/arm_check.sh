#!/usr/bin/env bash
# arm_check.sh: tinygpt built for aarch64 and run there, on an x86 machine
# (make arm-check, issue 44): the proof that the ARM build compiles and
# computes what the x86 one does.
#
#   scripts/arm_check.sh X86_TINYGPT      (make arm-check: ./tinygpt)
#
# 1. The target's libraries: Debian's arm64 packages of stb, check, xxhash
#    and utf8proc, with their dependencies (libc6, libgomp1, ...), unpacked
#    with dpkg-deb -x into build/arm/sysroot. apt-get downloads them with a
#    state, lists and cache of its own under build/arm/apt, from the host's
#    own sources lists: nothing of the host is installed, replaced or
#    reconfigured. (`dpkg --add-architecture arm64` would do it too, but
#    would change the host's dpkg and make every later `apt-get update` of
#    the machine fetch arm64's lists.) Done once; delete build/arm to redo.
# 2. The cross build: `make CC=aarch64-linux-gnu-gcc SYSROOT=...` into
#    build/arm/obj (tinygpt and the Check runner) and build/arm/reference
#    (REFERENCE=1's tinygpt, for the arch suite), at -O3 for armv8-a, the
#    cross compiler's default.
# 3. Suites under qemu-aarch64 (-L the sysroot: its ld.so and libraries),
#    two at a time: the kernels' (tile, linear's matmul), the layers', the
#    optimizers', the model's (its gradients against finite differences,
#    1 against 2 threads, sampling's cache, FLOP counts, no allocation in
#    a step), the golden runs of
#    tests/test_arch.c (card and gpt trained to the bits and the sample
#    recorded on x86: ARM must give the same) and its reference build; and
#    the cheap ones whose C could read bytes differently on ARM, where char
#    is unsigned (UTF-8, the tokenizers, the data, JSON, checkpoints). A
#    test that runs tinygpt runs build/arm/tinygpt-obj, a script that starts
#    it under qemu; Check's timeouts are stretched ten times
#    (CK_TIMEOUT_MULTIPLIER), as emulation is many times slower than the
#    CPU (data's 4 s default timed out).
#    Left out, as they measure time or depend on speed: timed, peak,
#    fma_peak, train and the faults suites (--time limits, kills at moments
#    chosen for native speed), cli and tokenize (hundreds of tinygpt runs:
#    many minutes under emulation). And gradcheck_model (its broken tinygpt
#    would be one more cross build) and the pictures (canvas, plot, watch,
#    walkthrough, attention_map), the same integer C on every CPU, which
#    make test covers.
# 4. The same short `train` on a small text (README.md) by X86_TINYGPT and
#    by the ARM build (the default gpt, 2 blocks), then `sample` from each:
#    the same bits, as on every x86 path (docs/cpus.md): every logged loss
#    (training and validation) the same, the trained weights the same to
#    the bit, the samples the same. (Until the FMAs of RMSNorm and RoPE were
#    written out, gcc fused other products on aarch64 than on x86, and the
#    weights came 1e-7 apart.)
#
# Exit status: 0 when everything passed; otherwise 1, the last line saying
# what failed and where its log is.
set -euo pipefail
cd "$(dirname "$0")/.."

x86=${1:?usage: scripts/arm_check.sh X86_TINYGPT}
[[ -x $x86 ]] || { echo "arm_check: $x86 is not an executable tinygpt: run make first" >&2; exit 1; }

# The ARM run gives x86's bits: the same losses (no tolerance), weights and
# sample. Where a compiler would otherwise choose which product of a*b + c*d
# to fuse, tinygpt says it (fmaf; fma_vec in the kernels), and the libm
# functions it calls (expf, logf, powf, sinf, cosf, sqrtf) gave the same bits
# under glibc on both. (Before RMSNorm's and RoPE's FMAs were written out,
# 2026-11-28, the losses agreed to their 6 printed decimals and the weights
# to 1.2e-7.)
LOSS_TOLERANCE=0

arm=$PWD/build/arm
sysroot=$arm/sysroot
triplet=aarch64-linux-gnu
# What pkg-config asks for (stb, check, libxxhash, libutf8proc) and what
# runs beneath tinygpt (libgomp1; libc6 comes as everyone's dependency).
packages=(libstb-dev check libxxhash-dev libutf8proc-dev libgomp1)

scripts/setup.sh --quiet --arm

# ---- 1. The sysroot ----------------------------------------------------------
stamp=$sysroot/.packages
if [[ ! -e $stamp || $(cat "$stamp") != "${packages[*]}" ]]; then
    echo "arm_check: downloading arm64 packages into $sysroot (${packages[*]} and their dependencies)"
    rm -rf "$arm/apt" "$sysroot"
    mkdir -p "$arm/apt/lists/partial" "$arm/apt/cache/archives/partial" "$sysroot"
    touch "$arm/apt/status"  # an empty status: apt takes nothing as installed
    apt_options=(-o APT::Architecture=arm64 -o APT::Architectures=arm64
                 -o Dir::State="$arm/apt" -o Dir::State::Lists="$arm/apt/lists"
                 -o Dir::State::status="$arm/apt/status" -o Dir::Cache="$arm/apt/cache"
                 -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    apt-get "${apt_options[@]}" update -qq ||
        { echo "arm_check: apt-get update of arm64's lists failed (is the network up? see above)" >&2; exit 1; }
    apt-get "${apt_options[@]}" install -qq -y --download-only --no-install-recommends "${packages[@]}" >/dev/null ||
        { echo "arm_check: downloading the arm64 packages failed (see above)" >&2; exit 1; }
    for deb in "$arm"/apt/cache/archives/*.deb; do dpkg-deb -x "$deb" "$sysroot"; done
    echo "${packages[*]}" >"$stamp"
fi

# ---- 2. The cross build ------------------------------------------------------
echo "arm_check: building tinygpt and the tests for aarch64 into $arm/obj"
make --no-print-directory -j"${JOBS:-2}" CC=$triplet-gcc SYSROOT="$sysroot" BUILD="$arm/obj" \
    "$arm/obj/tinygpt" "$arm/obj/run_tests"
make --no-print-directory -j"${JOBS:-2}" CC=$triplet-gcc SYSROOT="$sysroot" BUILD="$arm/reference" REFERENCE=1 \
    "$arm/reference/tinygpt"
# The NEON tiles keep their accumulators in registers, as make spill-check
# holds the x86 paths' to.
/usr/bin/python3 scripts/check_spills.py --objdump "$triplet-objdump" "$arm/obj/kernels/matmul.o" \
    "$arm/obj/layers/linear_fast.o" "$arm/obj/layers/attention_fast.o:head_"

# Scripts: build/arm/qemu runs an aarch64 program under qemu, with the
# sysroot as its / for the libraries; build/arm/tinygpt-obj and
# tinygpt-reference are the aarch64 tinygpts so run, for the tests that
# start tinygpt and for step 4.
# GOMP_SPINCOUNT: what tinygpt sets itself before it starts again
# (src/commands/main.c); set here, it does not try to (an aarch64 binary
# cannot exec itself without binfmt_misc).
cat >"$arm/qemu" <<EOF
#!/bin/sh
# An aarch64 program under qemu (written by scripts/arm_check.sh).
GOMP_SPINCOUNT=1000 exec qemu-aarch64 -L $sysroot "\$@"
EOF
for build in obj reference; do
    cat >"$arm/tinygpt-$build" <<EOF
#!/bin/sh
# The aarch64 tinygpt of build/arm/$build under qemu (written by scripts/arm_check.sh).
exec $arm/qemu $arm/$build/tinygpt "\$@"
EOF
done
chmod +x "$arm/qemu" "$arm/tinygpt-obj" "$arm/tinygpt-reference"

# ---- 3. The suites -----------------------------------------------------------
# The slowest first, so that the two processes end together.
suites=(model checkpoint arch linear optimizer attention hf_gpt2 mlp data rng gpt2_tokenizer steady_state gelu bpe common
        crossentropy chunk export layernorm residual settings rmsnorm encoder json relu2 sampler tokenizer args rope
        utf8 swiglu flops tile)
logs=$arm/logs
rm -rf "$logs" && mkdir -p "$logs"
# run_suite SUITE: one suite under qemu, its log in build/arm/logs; a line
# with Check's count and the seconds it took.
run_suite() {
    local start=$SECONDS status=0
    CK_RUN_SUITE="$1" CK_TIMEOUT_MULTIPLIER=10 \
        TINYGPT_BIN="$arm/tinygpt-obj" TINYGPT_REFERENCE_BIN="$arm/tinygpt-reference" \
        "$arm/qemu" "$arm/obj/run_tests" >"$logs/$1.log" 2>&1 || status=$?
    echo "arm_check: suite $1: $(grep -E '^[0-9]+%: Checks' "$logs/$1.log" || echo 'no result line'), $((SECONDS - start)) s"
    return "$status"
}
export -f run_suite
export arm logs
echo "arm_check: ${#suites[@]} suites under qemu-aarch64, two at a time"
# xargs -P 2: two at a time, each process taking the next suite when free.
failed=0
printf '%s\n' "${suites[@]}" | xargs -P 2 -I{} bash -c 'run_suite "$1"' _ {} || failed=1
if ((failed)); then
    grep -h -E '^[^:]+:[0-9]+:[FE]:' "$logs"/*.log | sed 's/^/arm_check: failed: /' >&2
    echo "arm_check: some suites failed under qemu-aarch64 (their logs: $logs)" >&2
    exit 1
fi

# ---- 4. The same run on x86 and ARM ------------------------------------------
run=$arm/run
rm -rf "$run" && mkdir -p "$run"
train_flags=(--steps 30 --batch 4 --context 32 --embd 32 --heads 4 --layers 2 --vocab-size 300 --seed 5
             --threads 2 --eval-interval 10 --save-every 0)
echo "arm_check: train ${train_flags[*]} on README.md, x86 and aarch64"
"$x86" train README.md "${train_flags[@]}" --out "$run/x86" >"$run/x86.log" 2>&1 ||
    { echo "arm_check: the x86 train failed: see $run/x86.log" >&2; exit 1; }
"$arm/tinygpt-obj" train README.md "${train_flags[@]}" --out "$run/arm" >"$run/arm.log" 2>&1 ||
    { echo "arm_check: the aarch64 train failed: see $run/arm.log" >&2; exit 1; }
sample_flags=(--seed 3 --tokens 60 --prompt "The ")
"$x86" sample --model "$run/x86/model.safetensors" "${sample_flags[@]}" >"$run/x86.sample" 2>/dev/null ||
    { echo "arm_check: the x86 sample failed" >&2; exit 1; }
"$arm/tinygpt-obj" sample --model "$run/arm/model.safetensors" "${sample_flags[@]}" >"$run/arm.sample" 2>"$run/arm.sample.err" ||
    { echo "arm_check: the aarch64 sample failed: see $run/arm.sample.err" >&2; exit 1; }
[[ -s $run/arm.sample ]] || { echo "arm_check: the aarch64 sample printed nothing" >&2; exit 1; }

/usr/bin/python3 - "$run" "$LOSS_TOLERANCE" <<'EOF'
# The two log.csv's losses (training and validation), step by step; the
# checkpoints' weights (the float32 tensor bytes after the safetensors
# header) and the samples compared whole.
import array, csv, struct, sys
run, tolerance = sys.argv[1], float(sys.argv[2])

def losses(which):
    with open(f"{run}/{which}/log.csv") as f:
        rows = list(csv.DictReader(f))
    return [float(row[key]) for row in rows for key in ("train_loss", "val_loss") if row[key]]

def weights(which):
    with open(f"{run}/{which}/model.safetensors", "rb") as f:
        data = f.read()
    return array.array("f", data[8 + struct.unpack("<Q", data[:8])[0]:])

x86, arm = losses("x86"), losses("arm")
if len(x86) != len(arm) or not x86:
    sys.exit(f"arm_check: x86 logged {len(x86)} losses, aarch64 {len(arm)}: see {run}")
worst = max(abs(a - b) for a, b in zip(x86, arm))
w86, warm = weights("x86"), weights("arm")
weights_note = ("identical to the bit" if w86.tobytes() == warm.tobytes() else
                f"apart by at most {max(abs(a - b) for a, b in zip(w86, warm)):.3g}")
same_sample = open(f"{run}/x86.sample", "rb").read() == open(f"{run}/arm.sample", "rb").read()
print(f"arm_check: {len(x86)} logged losses (6 decimals), aarch64 against x86: largest difference {worst:.3g} "
      f"(tolerance {tolerance:g}); the weights {weights_note}; the samples {'identical' if same_sample else 'different'}")
if not worst <= tolerance:
    sys.exit(f"arm_check: the aarch64 losses differ from x86's by {worst:.3g}, more than {tolerance:g}: see {run}")
if w86.tobytes() != warm.tobytes() or not same_sample:
    sys.exit(f"arm_check: the aarch64 weights or sample are not x86's, bit for bit: see {run}")
EOF
echo "arm_check: passed"
