#!/usr/bin/env bash
# bench_paths.sh: make bench's training rows for card L and the baby gpt
# again on every x86 kernel path this CPU has (docs/cpus.md), tinygpt and
# PyTorch held to the same vectors: the portable tinygpt capped by
# TINYGPT_KERNELS, PyTorch's own kernels by ATEN_CPU_CAPABILITY and its
# BLAS (OpenBLAS) by OPENBLAS_CORETYPE. Each path's report, with its own
# peak (measured with that path's vectors) and every row's share of it,
# goes to OUT_DIR/results-PATH.md.
#
#   scripts/bench_paths.sh PORTABLE_TINYGPT DATA [OUT_DIR]   (make bench-paths)
#
# BENCH_PATHS picks some (default: avx512 avx2 generic). A path the CPU
# lacks is skipped with a line saying so. Extra flags for
# torch_reference.py bench may follow in BENCH_FLAGS (make bench-smoke's
# short runs).
set -euo pipefail
portable=${1:?usage: scripts/bench_paths.sh PORTABLE_TINYGPT DATA [OUT_DIR]}
data=${2:?usage: scripts/bench_paths.sh PORTABLE_TINYGPT DATA [OUT_DIR]}
out_dir=${3:-bench}
read -r -a extra <<<"${BENCH_FLAGS:-}"
mkdir -p "$out_dir"
for path in ${BENCH_PATHS:-avx512 avx2 generic}; do
    # The path the portable binary runs when capped to this one: the same,
    # or a narrower one when the CPU lacks it.
    ran=$(TINYGPT_KERNELS=$path "$portable" peak --json --seconds 0.01 --threads 1 |
          /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["kernel_path"])')
    if [[ $ran != "$path" ]]; then
        echo "bench_paths: this CPU has no $path (the portable tinygpt ran $ran): skipped"
        continue
    fi
    case $path in
        avx512) aten=avx512 blas=SkylakeX ;;
        avx2) aten=avx2 blas=Haswell ;;
        # x86-64's baseline: SSE2, no FMA (PyTorch's "default" kernels,
        # OpenBLAS's SSE-only Nehalem ones)
        generic) aten=default blas=Nehalem ;;
    esac
    echo "bench_paths: $path (tinygpt TINYGPT_KERNELS=$path; PyTorch ATEN_CPU_CAPABILITY=$aten, OPENBLAS_CORETYPE=$blas)"
    TINYGPT_KERNELS=$path ATEN_CPU_CAPABILITY=$aten OPENBLAS_CORETYPE=$blas \
        /usr/bin/python3 scripts/torch_reference.py bench --tinygpt "$portable" --data "$data" --configs L,gpt \
        --out "$out_dir/results-$path.md" "${extra[@]}"
done
