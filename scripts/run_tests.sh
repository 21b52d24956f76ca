#!/usr/bin/env bash
# run_tests.sh: run the Check suites of RUN_TESTS in two processes at once,
# so both cores work: whenever one is free it takes the next suite neither
# has taken (TINYGPT_TEST_QUEUE, tests/test_main.c), so they end together.
# Each process's report is printed whole once both have ended, then the
# count of suites, checks and failures, and the failures again (a CI log
# that keeps only its tail still names them).
#
#   scripts/run_tests.sh RUN_TESTS        (make test, make sanitize)
#
# Exit status: 0 when both passed; otherwise 1. The environment (the
# binaries the tests run, sanitizer options) passes through to both.
set -uo pipefail

bin=${1:?usage: scripts/run_tests.sh RUN_TESTS}
logs=$(mktemp -d /tmp/tinygpt_tests_XXXXXX)
trap 'rm -rf "$logs"' EXIT
echo 0 >"$logs/queue"

TINYGPT_TEST_QUEUE="$logs/queue" "$bin" >"$logs/0" 2>&1 &
first=$!
TINYGPT_TEST_QUEUE="$logs/queue" "$bin" >"$logs/1" 2>&1 &
second=$!
status=0
wait "$first" || status=1
wait "$second" || status=1
cat "$logs/0" "$logs/1"
# The sum of Check's lines "N%: Checks: C, Failures: F, Errors: E".
cat "$logs/0" "$logs/1" | awk -F'[:,] *' '/^[0-9]+%: Checks:/ { suites++; checks += $3; failed += $5 + $7 }
    END { printf "run_tests: %d suites, %d checks, %d failed\n", suites, checks, failed }'
# Check's line for a failed or errored test: "FILE:LINE:F:SUITE:TEST:I: why".
grep -h -E '^[^:]+:[0-9]+:[FE]:' "$logs/0" "$logs/1" | sed 's/^/run_tests: failed: /'
exit "$status"
