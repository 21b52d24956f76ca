#!/usr/bin/env bash
# crash_check.sh: kill a training run at random moments, at least KILLS
# times, continuing it with --resume after each kill, and check that it ends
# exactly as the same run left alone: the same final model, byte for byte,
# and the same log (without its timings). `make crash-check` runs it.
#
#   scripts/crash_check.sh TINYGPT [KILLS]
#
# A kill lands wherever it lands: in a step, in a save, in the rename that
# commits a checkpoint, in removing the one before. tests/test_faults.c
# kills at every file operation of a short run, deterministically; this is
# the same promise tested the way it breaks in life, on a longer run.
set -euo pipefail
tinygpt=${1:?usage: scripts/crash_check.sh TINYGPT [KILLS]}
kills=${2:-50}
tinygpt=$(realpath "$tinygpt")
dir=$(mktemp -d /tmp/tinygpt_crash.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# A text with something to learn, and a run that saves often (so kills land
# in saves too) and takes a few seconds (so kills land everywhere else):
# about 3 s on one core of a 2-core Cascade Lake.
python3 -c "
import random
random.seed(1)
words = 'the a whale sea ship call me ishmael white deep wide captain'.split()
print('\n'.join(' '.join(random.choice(words) for _ in range(12)) for _ in range(3000)))" > "$dir/text.txt"
flags=(--layers 2 --embd 32 --heads 2 --context 32 --batch 8 --steps 700 --save-every 7 --eval-interval 50
       --eval-batches 2 --seed 3 --threads 1)

"$tinygpt" train "$dir/text.txt" --out "$dir/ref" "${flags[@]}" >/dev/null 2>"$dir/ref.err"
start=$(date +%s.%N)
"$tinygpt" train "$dir/text.txt" --out "$dir/timed" "${flags[@]}" >/dev/null 2>&1
seconds=$(python3 -c "print($(date +%s.%N) - $start)")

# Kill at random moments of the run: within its length, so most kills find
# it training or saving (a run that gets to its end before the kill is
# simply started over, and counts no kill).
done_kills=0 attempts=0
while ((done_kills < kills)); do
    ((attempts += 1))
    if ((attempts > 20 * kills)); then echo "crash_check: the run keeps finishing before its kill" >&2; exit 1; fi
    if [[ -d "$dir/run" ]] && ls "$dir/run" | grep -q '^checkpoint-[0-9]*$'; then
        args=(train --resume "$dir/run")
    else
        args=(train "$dir/text.txt" --out "$dir/run" --force "${flags[@]}")
    fi
    "$tinygpt" "${args[@]}" >/dev/null 2>"$dir/last.err" &
    pid=$!
    sleep "$(python3 -c "import random; print(random.uniform(0.02, 0.7 * $seconds))")"
    if kill -9 "$pid" 2>/dev/null; then
        wait "$pid" 2>/dev/null || true
        ((done_kills += 1))
    else
        # It ended before the kill: finished (or found it had, after a kill
        # that came after its last save). Start over, to kill it again.
        status=0
        wait "$pid" || status=$?
        if ((status != 0)) && ! grep -q "already at step" "$dir/last.err"; then
            echo "crash_check: a run failed after a kill (exit $status):" >&2
            cat "$dir/last.err" >&2
            exit 1
        fi
        rm -rf "$dir/run"
    fi
done

# Continue to the end, untouched.
if ls "$dir/run" 2>/dev/null | grep -q '^checkpoint-[0-9]*$'; then
    "$tinygpt" train --resume "$dir/run" >/dev/null 2>"$dir/last.err" ||
        { grep -q "already at step" "$dir/last.err" || { cat "$dir/last.err" >&2; exit 1; }; }
else
    "$tinygpt" train "$dir/text.txt" --out "$dir/run" --force "${flags[@]}" >/dev/null 2>&1
fi

cmp -s "$dir/ref/model.safetensors" "$dir/run/model.safetensors" ||
    { echo "crash_check: after $done_kills kills, the final model differs from the undisturbed run's" >&2; exit 1; }
numbers() { cut -d, -f1-4,7,8 "$1/log.csv"; }
diff <(numbers "$dir/ref") <(numbers "$dir/run") >/dev/null ||
    { echo "crash_check: after $done_kills kills, the log differs from the undisturbed run's" >&2; exit 1; }
echo "crash_check: $done_kills kills at random moments (in $attempts runs of a $(printf %.1f "$seconds")-second run); the run ended exactly as the undisturbed one"
