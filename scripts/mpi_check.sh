#!/usr/bin/env bash
# mpi_check.sh: the promises of data-parallel training (docs/scaling.md),
# checked with 2 processes on this one machine. `make mpi-check` runs it.
#
#   scripts/mpi_check.sh TINYGPT_MPI [TINYGPT_PLAIN]
#
# TINYGPT_MPI is a `make MPI=1` build; TINYGPT_PLAIN, if given, the plain
# build of the same source. It checks that:
#  1. the MPI build run without mpirun trains exactly as the plain one (the
#     log's numbers, byte for byte);
#  2. `mpirun -np 2` gives the losses of one process with the same flags,
#     within 1e-4 at every one of 100 steps (dropout on, so the masks are
#     checked too), with one log, one voice (each progress line once) and
#     one checkpoint;
#  3. a run stopped under mpirun -np 2, resumed by one process, and resumed
#     again under mpirun -np 2, ends with the uninterrupted run's losses;
#  4. SIGINT to mpirun saves one checkpoint, from which --resume continues;
#  5. a rank killed outright ends the job, and --resume from the last
#     periodic checkpoint ends with the uninterrupted run's losses;
#  6. a --batch that 2 does not divide is refused in one line, naming it;
#  7. with a bpe tokenizer rank 0 learns and sends, each batch order
#     (sequential, random, shuffled) and --grad-accum 2, 2 processes still
#     give one process's losses.
#  8. only rank 0 need have the files: with each rank in a working
#     directory of its own and the text and the run only in rank 0's,
#     --resume and --init give one process's losses, the other rank's
#     directory stays empty, and a missing or damaged checkpoint ends both
#     ranks at once with rank 0's one line.
# Open MPI refuses root unless told, and 2 processes on 2 cores need
# --oversubscribe when the cores are counted as one slot each.
set -euo pipefail
mpi_bin=$(realpath "${1:?usage: scripts/mpi_check.sh TINYGPT_MPI [TINYGPT_PLAIN]}")
plain_bin=${2:+$(realpath "$2")}
dir=$(mktemp -d /tmp/tinygpt_mpi.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe --quiet -np 2)

fail() { echo "mpi-check: FAILED: $*" >&2; exit 1; }
"$mpi_bin" --version | grep -q '(mpi)' || fail "$mpi_bin --version does not say (mpi): not a make MPI=1 build"

# The default gpt's shape on a small text, dropout on, a step each ~20 ms.
# Random batches: the text is ~150 windows, which the shuffled order (the
# gpt's default) would read 16 times over in 100 steps, an overfitting model
# whose last steps magnify rounding past the 1e-4 below (1.4e-4 at step 92);
# 7 reads it shuffled for 30 steps.
python3 -c "
import random
random.seed(2)
words = 'the a whale sea ship call me ishmael white deep wide captain'.split()
print('\n'.join(' '.join(random.choice(words) for _ in range(12)) for _ in range(800)))" > "$dir/text.txt"
flags=(--steps 100 --dropout 0.1 --eval-interval 25 --seed 5 --threads 1 --sample-every 0 --order random)

# same_losses A B TOLERANCE: log.csv's train_loss and val_loss of the runs
# in A and B agree, row for row, within TOLERANCE (0: as text, exactly).
same_losses() {
    python3 - "$1/log.csv" "$2/log.csv" "$3" <<'EOF'
import csv, sys
a, b = (list(csv.DictReader(open(p))) for p in sys.argv[1:3])
tol = float(sys.argv[3])
if len(a) != len(b) or not a:
    sys.exit(f"{len(a)} and {len(b)} rows")
worst = 0.0
for ra, rb in zip(a, b):
    for key in ("train_loss", "val_loss"):
        if ra[key] == rb[key]:
            continue
        if tol == 0 or not ra[key] or not rb[key]:
            sys.exit(f"step {ra['step']}: {key} {ra[key]} and {rb[key]}")
        worst = max(worst, abs(float(ra[key]) - float(rb[key])))
        if worst > tol:
            sys.exit(f"step {ra['step']}: {key} {ra[key]} and {rb[key]} differ by more than {tol}")
print(f"{len(a)} steps, losses within {worst:.2g}")
EOF
}

echo "== 1. the MPI build without mpirun trains as one process"
"$mpi_bin" train "$dir/text.txt" --out "$dir/one" "${flags[@]}" >"$dir/one.out" 2>&1
if [[ -n "$plain_bin" ]]; then
    "$plain_bin" train "$dir/text.txt" --out "$dir/plain" "${flags[@]}" >/dev/null 2>&1
    same_losses "$dir/one" "$dir/plain" 0 || fail "the MPI build without mpirun differs from the plain build"
fi

echo "== 2. mpirun -np 2 gives one process's losses"
"${mpirun[@]}" "$mpi_bin" train "$dir/text.txt" --out "$dir/two" "${flags[@]}" >"$dir/two.out" 2>"$dir/two.err" ||
    { cat "$dir/two.err"; fail "mpirun -np 2 train failed"; }
same_losses "$dir/one" "$dir/two" 1e-4 || fail "2 processes do not give one process's losses"
[[ $(grep -c '^step' "$dir/two.out") == $(grep -c '^step' "$dir/one.out") ]] ||
    fail "2 processes printed $(grep -c '^step' "$dir/two.out") progress lines, one process $(grep -c '^step' "$dir/one.out")"
[[ $(grep -c '^saved' "$dir/two.err") == 1 ]] || fail "not exactly one 'saved' line: $(cat "$dir/two.err")"
grep -q '^2 processes: the gradients' "$dir/two.err" || fail "no allreduce share reported"
[[ $(ls -d "$dir"/two/checkpoint-* | wc -l) == 1 ]] || fail "not one checkpoint: $(ls "$dir/two")"

echo "== 3. stopped under mpirun -np 2, resumed by 1 process, then by 2"
"${mpirun[@]}" "$mpi_bin" train "$dir/text.txt" --out "$dir/resumed" "${flags[@]}" --stop-after 40 >/dev/null 2>&1 ||
    fail "the first part did not stop cleanly"
"$mpi_bin" train --resume "$dir/resumed" --stop-after 70 >/dev/null 2>&1 || fail "one process could not resume it"
"${mpirun[@]}" "$mpi_bin" train --resume "$dir/resumed" >/dev/null 2>"$dir/resumed.err" ||
    { cat "$dir/resumed.err"; fail "mpirun -np 2 could not resume it"; }
same_losses "$dir/one" "$dir/resumed" 1e-4 || fail "the resumed run does not end as the uninterrupted one"

echo "== 4. SIGINT to mpirun: rank 0 saves once, every rank exits"
"${mpirun[@]}" "$mpi_bin" train "$dir/text.txt" --out "$dir/stopped" "${flags[@]}" --steps 1000000 \
    >"$dir/stopped.out" 2>"$dir/stopped.err" &
pid=$!
for _ in $(seq 600); do grep -q '^step *25/' "$dir/stopped.out" 2>/dev/null && break; sleep 0.1; done
kill -INT "$pid"
status=0
wait "$pid" || status=$?
((status != 0)) || fail "mpirun exited 0 after SIGINT"
[[ $(grep -c '^stopped after' "$dir/stopped.err") == 1 ]] || fail "not one 'stopped after' line: $(cat "$dir/stopped.err")"
steps=$(sed -n 's/^stopped after \([0-9]*\) .*/\1/p' "$dir/stopped.err")
[[ -d "$dir/stopped/checkpoint-$steps" ]] || fail "no checkpoint-$steps: $(ls "$dir/stopped")"
"${mpirun[@]}" "$mpi_bin" train --resume "$dir/stopped" --steps $((steps + 5)) >/dev/null 2>&1 ||
    fail "the stopped run does not resume"
[[ -d "$dir/stopped/checkpoint-$((steps + 5))" ]] || fail "the resumed run saved no checkpoint-$((steps + 5))"

echo "== 5. a rank killed: the job ends, the last checkpoint resumes"
"${mpirun[@]}" "$mpi_bin" train "$dir/text.txt" --out "$dir/killed" "${flags[@]}" --save-every 20 \
    >"$dir/killed.out" 2>/dev/null &
pid=$!
for _ in $(seq 600); do [[ -d "$dir/killed/checkpoint-40" ]] && break; sleep 0.05; done
[[ -d "$dir/killed/checkpoint-40" ]] || fail "the run to kill saved no checkpoint-40"
for child in $(pgrep -P "$pid"); do
    if tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then kill -9 "$child"; fi
done
status=0
wait "$pid" || status=$?
((status != 0)) || fail "mpirun exited 0 after a rank was killed (did it finish first?)"
"${mpirun[@]}" "$mpi_bin" train --resume "$dir/killed" >/dev/null 2>"$dir/killed.err" ||
    { cat "$dir/killed.err"; fail "the killed run does not resume"; }
same_losses "$dir/one" "$dir/killed" 1e-4 || fail "the killed and resumed run does not end as the uninterrupted one"

echo "== 6. a --batch that 2 does not divide"
status=0
"${mpirun[@]}" "$mpi_bin" train "$dir/text.txt" --out "$dir/odd" --batch 5 --steps 1 >/dev/null 2>"$dir/odd.err" ||
    status=$?
((status != 0)) || fail "--batch 5 on 2 processes was not refused"
[[ $(grep -c '^tinygpt' "$dir/odd.err") == 1 ]] && grep -q -- '--batch 5 does not split evenly over 2 processes' "$dir/odd.err" ||
    fail "not one line naming --batch: $(cat "$dir/odd.err")"
[[ ! -e "$dir/odd/log.csv" ]] || fail "a refused run wrote a log"

echo "== 7. bpe, each batch order and --grad-accum 2, on 1 process and on 2"
head -c 60000 "$dir/text.txt" >"$dir/short.txt"
for order in sequential random shuffled; do
    more=(--steps 30 --tokenizer bpe --vocab-size 300 --order "$order" --grad-accum 2 --batch 6 --dropout 0.1
          --eval-interval 10 --seed 5 --threads 1 --sample-every 0)
    "$mpi_bin" train "$dir/short.txt" --out "$dir/bpe1-$order" "${more[@]}" >/dev/null 2>&1 ||
        fail "the one-process bpe run ($order) failed"
    "${mpirun[@]}" "$mpi_bin" train "$dir/short.txt" --out "$dir/bpe2-$order" "${more[@]}" >/dev/null 2>&1 ||
        fail "the 2-process bpe run ($order) failed"
    same_losses "$dir/bpe1-$order" "$dir/bpe2-$order" 1e-4 ||
        fail "2 processes with bpe, --order $order and --grad-accum do not give one process's losses"
done

echo "== 8. only rank 0 has the text and the run: --resume, --init, a missing or damaged checkpoint"
# mpirun's MPMD form (A : B) starts rank 0 in A and rank 1 in B, as on two
# machines of which only the first has the files; every path is relative.
mkdir "$dir/A" "$dir/B"
cp "$dir/text.txt" "$dir/A/"
on_two_machines() {
    timeout 120 mpirun --oversubscribe --quiet -np 1 --wdir "$dir/A" "$mpi_bin" "$@" : -np 1 --wdir "$dir/B" "$mpi_bin" "$@"
}
(cd "$dir/A" && "$mpi_bin" train text.txt --out run "${flags[@]}" --stop-after 70 >/dev/null 2>&1) ||
    fail "the one-process run to resume failed"
on_two_machines train --resume run >/dev/null 2>"$dir/split.err" ||
    { cat "$dir/split.err"; fail "2 ranks with the run only in rank 0's directory could not resume it"; }
same_losses "$dir/one" "$dir/A/run" 1e-4 || fail "the run resumed with the files only on rank 0 does not end as the uninterrupted one"
init=(--init run/model.safetensors --steps 20 --dropout 0.1 --eval-interval 10 --seed 5 --threads 1 --sample-every 0)
(cd "$dir/A" && "$mpi_bin" train text.txt --out init1 "${init[@]}" >/dev/null 2>&1) || fail "the one-process --init run failed"
on_two_machines train text.txt --out init2 "${init[@]}" >/dev/null 2>"$dir/split.err" ||
    { cat "$dir/split.err"; fail "2 ranks with the --init checkpoint only in rank 0's directory failed"; }
same_losses "$dir/A/init1" "$dir/A/init2" 1e-4 || fail "--init with the file only on rank 0 does not give one process's losses"
[[ -z $(ls -A "$dir/B") ]] || fail "rank 1 wrote into its directory: $(ls -A "$dir/B")"
# A run directory without a checkpoint, and one whose checkpoint is cut short.
mkdir "$dir/A/empty"
cp -r "$dir/A/init2" "$dir/A/damaged"
truncate -s 1000 "$dir/A/damaged/checkpoint-20/model.safetensors"
for bad in "empty:'empty' holds no run" "damaged:is not a valid tinygpt checkpoint"; do
    status=0
    on_two_machines train --resume "${bad%%:*}" >/dev/null 2>"$dir/bad.err" || status=$?
    ((status != 0 && status != 124)) || fail "--resume ${bad%%:*} exited $status (124: it hung)"
    [[ $(grep -c '^tinygpt' "$dir/bad.err") == 1 ]] && grep -q -- "${bad#*:}" "$dir/bad.err" ||
        fail "--resume ${bad%%:*}: not one line saying '${bad#*:}': $(cat "$dir/bad.err")"
done

echo "mpi-check: all passed"
