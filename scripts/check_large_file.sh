#!/usr/bin/env bash
# check_large_file.sh: train on a generated 100 MB text file and check that
# tinygpt's peak memory stays close to the file's size.
#
#   scripts/check_large_file.sh [TINYGPT_BINARY]     (make large-file-check)
#
# The text is read into one buffer of the file's size and, with at most 256
# distinct characters, encoded in place into one-byte ids (src/data.c), so
# the peak should be the file plus a few MB for the program and a tiny
# model. Bound: 1.1 x the file's size. Before that work the peak was 4.9 x
# (a doubling read buffer, then 4-byte ids next to the text).
#
# Peak memory is GNU time's %M (maximum resident set size, KiB). The unit
# test loading_a_large_file_takes_about_its_own_size_in_memory
# (tests/test_data.c) checks the same thing on 16 MiB inside `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${1:-./tinygpt}
bytes=100000000       # the file: 100 MB
max_ratio_percent=110 # the bound: peak RSS <= 1.1 x the file's size

if [[ ! -x /usr/bin/time ]]; then
    echo "check_large_file: needs GNU time (/usr/bin/time); run scripts/setup.sh --sanitize" >&2
    exit 1
fi

dir=$(mktemp -d /tmp/tinygpt_large_XXXXXX)
trap 'rm -rf "$dir"' EXIT

# Lines of ordinary prose, repeated: 100 MB in well under a second. (`yes`
# dies of SIGPIPE when head has enough, which pipefail would call a failure.)
{ yes 'It is not down on any map; true places never are. Call me Ishmael.' || true; } | head -c "$bytes" >"$dir/large.txt"

# A tiny model and a single step: the data, not the model, should dominate.
# A char model, whose ids are written over the text (gpt's default, bpe,
# also keeps its learner's words and pair counts and two-byte ids: 157% of
# this file when measured on 2026-11-26).
/usr/bin/time -f '%M' -o "$dir/peak_kb" \
    "$bin" train "$dir/large.txt" --out "$dir/run" --steps 1 --batch 2 --context 8 --embd 8 --heads 1 \
    --tokenizer char --eval-batches 1 --threads 1 >"$dir/stdout" 2>"$dir/stderr" || {
    echo "check_large_file: tinygpt train failed:" >&2
    cat "$dir/stderr" >&2
    exit 1
}
peak_kb=$(tail -n 1 "$dir/peak_kb")
peak_bytes=$((peak_kb * 1024))
limit_bytes=$((bytes * max_ratio_percent / 100))
echo "check_large_file: a ${bytes}-byte file trained with a peak of $((peak_bytes / 1000000)) MB" \
     "($((100 * peak_bytes / bytes))% of the file; limit ${max_ratio_percent}%)"
if ((peak_bytes > limit_bytes)); then
    echo "check_large_file: FAILED: the peak is more than ${max_ratio_percent}% of the file's size" >&2
    exit 1
fi
