#!/usr/bin/env bash
#===- test.sh - Install, build and run every Kiln test ---------------------===#
#
# The README's test command. Runs the lit suites (dialect, frontend, tools,
# model imports, bad input) and the GoogleTest unit tests through one lit
# invocation, then prints "N passed, N failed, N skipped".
#
# Usage: scripts/test.sh [--full] [--sanitize=LIST]
#   --full  the nightly tier too: tests marked `REQUIRES: full` (the slow
#           light-zoo models; docs/testing.md "Tiers"), lit -Dkiln_full=1,
#           with a per-test timeout of 7200 s (VGG-19 in fp32 emulates for
#           ~30 minutes).
#   --sanitize=LIST  instead of the lit suites: the runtime's GoogleTest
#           suite (KilnRuntimeTests: the artifact reader and writer, the
#           emulator, sessions, kiln-run) built with clang-22 and
#           -fsanitize=LIST (address,undefined or thread) in build-fuzz/
#           (address,undefined, shared with scripts/fuzz.sh) or
#           build-sanitize-LIST/
#           (docs/reliability.md "Sanitizers"); KILN_SANITIZE_FILTER=PATTERN
#           passes a --gtest_filter. address,undefined then runs the emu
#           model tests (the lit tests that run kiln-run or kiln-train)
#           with those tools from the same ASan+UBSan build (or
#           KILN_SANITIZE_TOOLS_BUILD_DIR's) and kilnc from build/:
#           KILN_SANITIZE_MODELS=all, K/N (shard K of N), off, or rotate
#           (the default: one shard of 6, chosen by the commit count).
# Every test runs under a per-test timeout (test/lit_limits.py, 3600 s by
# default; KILN_TEST_TIMEOUT=N overrides it, 0 for none).
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
params=()
full_timeout=""
sanitize=""
for arg in "$@"; do
  case "$arg" in
    --full) params+=(-Dkiln_full=1); full_timeout=7200 ;;
    --sanitize=*) sanitize="${arg#--sanitize=}" ;;
    *) echo "usage: scripts/test.sh [--full] [--sanitize=LIST]" >&2; exit 1 ;;
  esac
done

#===- --sanitize: the runtime's tests under clang's sanitizers --------------===#
if [ -n "$sanitize" ]; then
  # address,undefined shares build-fuzz/ with scripts/fuzz.sh (the same
  # instrumentation plus libFuzzer's coverage counters): one clang build of
  # the runtime for both, in CI.
  sflags=(-DKILN_SANITIZE="$sanitize")
  sdefault="$root/build-sanitize-${sanitize//,/-}"
  if [ "$sanitize" = address,undefined ]; then
    sflags=(-DKILN_FUZZ=ON); sdefault="$root/build-fuzz"
  fi
  sbuild="${KILN_SANITIZE_BUILD_DIR:-$sdefault}"
  if [ ! -f "$sbuild/build.ninja" ]; then
    CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$sbuild" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo "${sflags[@]}" \
      -DKILN_BUILD_COMPILER=OFF -DKILN_BUILD_PYTHON=OFF >/dev/null
  fi
  # As many jobs as cores: ninja would run nproc + 2 (CI has 2 cores).
  ninja -j "$(nproc)" -C "$sbuild" KilnRuntimeTests kiln-run
  # halt_on_error and -fno-sanitize-recover: the first report fails the run.
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}"
  filter=()
  [ -z "${KILN_SANITIZE_FILTER:-}" ] || filter=(--gtest_filter="$KILN_SANITIZE_FILTER")
  "$sbuild/test/unittests/KilnRuntimeTests" "${filter[@]}"
  [ "$sanitize" = address,undefined ] || exit 0
  models="${KILN_SANITIZE_MODELS:-rotate}"
  [ "$models" != off ] || exit 0
  # The emu model tests: every lit test that runs kiln-run or kiln-train,
  # with those tools from this ASan+UBSan build, kilnc from the normal
  # build. KILN_SANITIZE_TOOLS_BUILD_DIR=DIR takes them from another one:
  # a build without libFuzzer's coverage counters (-DKILN_SANITIZE=
  # address,undefined, made here when DIR has none) runs the emulator twice
  # as fast, for long runs; CI saves its ~5 minutes of build instead. The
  # whole set is hours on 2 cores, so CI runs one of 6 shards (lexical
  # order), rotating with the number of commits: 6 consecutive commits
  # cover every test.
  [ -f "$build/test/lit.site.cfg.py" ] ||
    { echo "test.sh: --sanitize: the emu model tests need $build (scripts/build.sh)" >&2; exit 1; }
  tbuild="${KILN_SANITIZE_TOOLS_BUILD_DIR:-$sbuild}"
  if [ ! -f "$tbuild/build.ninja" ]; then
    CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$tbuild" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=address,undefined \
      -DKILN_BUILD_COMPILER=OFF -DKILN_BUILD_PYTHON=OFF >/dev/null
  fi
  ninja -j "$(nproc)" -C "$tbuild" kiln-run kiln-train kiln-tune-worker kiln-powersgd-check
  mapfile -t tests < <(cd "$root/test" && grep -rlE 'kiln-(run|train)' . \
    --include='*.test' --include='*.onnxtxt' --include='*.mlir' | sed 's|^\./||' | sort)
  shard=()
  case "$models" in
    all) ;;
    rotate) n=6; k=$(( $(git -C "$root" rev-list --count HEAD 2>/dev/null || echo 0) % n + 1 ))
            shard=(--num-shards "$n" --run-shard "$k") ;;
    */*) shard=(--num-shards "${models#*/}" --run-shard "${models%/*}") ;;
    *) echo "test.sh: KILN_SANITIZE_MODELS is all, off, rotate or K/N, not '$models'" >&2; exit 1 ;;
  esac
  echo "test.sh: the emu model tests with $tbuild/bin's runtime tools: ${#tests[@]} tests, ${shard[*]:-all}"
  exec /usr/lib/llvm-22/bin/lit -v -j "$(nproc)" --order=lexical "${shard[@]}" \
    -Dkiln_runtime_bin="$tbuild/bin" "${tests[@]/#/$build/test/}"
fi
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
