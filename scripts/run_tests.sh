#!/usr/bin/env bash
# run_tests.sh: run the Check suites of RUN_TESTS in two processes at once,
# each on half the suites (TINYGPT_TEST_SHARD, tests/test_main.c), so both
# cores work; each process's report is printed whole once both have ended.
#
#   scripts/run_tests.sh RUN_TESTS        (make test, make sanitize)
#
# Exit status: 0 when both passed; otherwise 1. The environment (the
# binaries the tests run, sanitizer options) passes through to both.
set -uo pipefail

bin=${1:?usage: scripts/run_tests.sh RUN_TESTS}
logs=$(mktemp -d /tmp/tinygpt_tests_XXXXXX)
trap 'rm -rf "$logs"' EXIT

TINYGPT_TEST_SHARD=0/2 "$bin" >"$logs/0" 2>&1 &
first=$!
TINYGPT_TEST_SHARD=1/2 "$bin" >"$logs/1" 2>&1 &
second=$!
status=0
wait "$first" || status=1
wait "$second" || status=1
cat "$logs/0" "$logs/1"
exit "$status"
