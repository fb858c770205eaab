#!/usr/bin/env bash
#===- test.sh - Install, build and run every Kiln test ---------------------===#
#
# The README's test command. Runs the lit suites (dialect, frontend, tools,
# model imports, bad input) and the GoogleTest unit tests through one lit
# invocation, then prints "N passed, N failed, N skipped".
#
# Usage: scripts/test.sh [--full]
#   --full  the nightly tier too: tests marked `REQUIRES: full` (the slow
#           light-zoo models; docs/testing.md "Tiers"), lit -Dkiln_full=1,
#           with a per-test timeout of 7200 s (VGG-19 in fp32 emulates for
#           ~30 minutes).
# Every test runs under a per-test timeout (test/lit_limits.py, 3600 s by
# default; KILN_TEST_TIMEOUT=N overrides it, 0 for none).
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
params=()
full_timeout=""
for arg in "$@"; do
  case "$arg" in
    --full) params+=(-Dkiln_full=1); full_timeout=7200 ;;
    *) echo "usage: scripts/test.sh [--full]" >&2; exit 1 ;;
  esac
done
timeout="${KILN_TEST_TIMEOUT:-$full_timeout}"
[ -z "$timeout" ] || params+=(-Dkiln_timeout="$timeout")

"$root/scripts/install-deps.sh"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh"

lit=/usr/lib/llvm-22/bin/lit
jobs=$(nproc)
set +e
"$lit" -sv -j "$jobs" "${params[@]}" "$build/test" 2>&1 | tee "$build/lit.log"
status=${PIPESTATUS[0]}
set -e
# lit's summary lines read "  Passed: 31 (100.00%)".
count() { sed -nE "s/^  $1 *: *([0-9]+).*/\1/p" "$build/lit.log" | head -1 | grep . || echo 0; }
passed=$(( $(count Passed) + $(count 'Expectedly Failed') ))
failed=$(( $(count Failed) + $(count 'Unexpectedly Passed') + $(count Unresolved) + $(count 'Timed Out') ))
skipped=$(( $(count Unsupported) + $(count Skipped) ))
echo "$passed passed, $failed failed, $skipped skipped"
exit "$status"
