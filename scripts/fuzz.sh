#!/usr/bin/env bash
#===- fuzz.sh - Build and run Kiln's libFuzzer targets ---------------------===#
#
# Usage: scripts/fuzz.sh [--seconds N] [--jobs N] [--ci] [--build-only] [target...]
#   targets: npy ptx safetensors artifact tune-cache onnx (default: all)
#   --seconds N   run each target for N seconds (default 60)
#   --jobs N      run N targets at a time (default 1; CI uses 2)
#   --ci          the gate CI runs: from the committed seeds and regressions
#                 only (no working corpus), seed 1, a fixed number of
#                 executions per target (the table below; --seconds caps
#                 each); the onnx target only replays its seeds and
#                 regressions. Exploring is the plain mode's job (random
#                 seed, the corpus kept); docs/reliability.md says why.
#   --build-only  configure and build, run nothing
#
# Builds once (ccache) into build-fuzz/ with clang-22 and
# -fsanitize=fuzzer,address,undefined (CMake option KILN_FUZZ; the compiler
# is not built there; the onnx target links the compiler's libraries from
# the normal build, KILN_BUILD_DIR (default build/), which it brings up to
# date first). Each target starts from its seed corpus in
# fuzz/corpus/<target> (committed, small) and grows a working corpus under
# build-fuzz/corpus/<target> (git-ignored, kept between runs); crashes,
# hangs and sanitizer reports are saved as build-fuzz/crashes/<target>/
# crash-*, timeout-*, oom-*, leak-*, and the script exits non-zero.
# Environment: KILN_FUZZ_BUILD_DIR (default build-fuzz), KILN_FUZZ_NICE
# (default 19). docs/reliability.md has the targets and the findings.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds=60
build_only=0
ci=0
jobs=1
targets=()
all_targets=(npy ptx safetensors artifact tune-cache onnx)
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    --ci) ci=1; shift ;;
    -h|--help) sed -n 4,23p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1'" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [ -d "$root/fuzz/corpus/$t" ] || { echo "fuzz.sh: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
done

# kiln-fuzz-onnx links the gcc build's compiler libraries (fuzz/CMakeLists.txt):
# they are built, or brought up to date, first.
compiler_build="${KILN_BUILD_DIR:-$root/build}"
if [[ " ${targets[*]} " == *" onnx "* ]]; then
  [ -f "$compiler_build/build.ninja" ] || KILN_BUILD_DIR="$compiler_build" "$root/scripts/build.sh" -j "${KILN_FUZZ_JOBS:-2}" kilnc
  nice -n "${KILN_FUZZ_NICE:-19}" ninja -C "$compiler_build" -j "${KILN_FUZZ_JOBS:-2}" kilnc
fi
if [ ! -f "$build/build.ninja" ] ||
   { [[ " ${targets[*]} " == *" onnx "* ]] && ! grep -q kiln-fuzz-onnx "$build/build.ninja"; }; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
    -DKILN_BUILD_COMPILER=OFF -DKILN_BUILD_PYTHON=OFF \
    -DKILN_COMPILER_BUILD_DIR="$compiler_build" >/dev/null
fi
bins=()
for t in "${targets[@]}"; do bins+=("kiln-fuzz-$t"); done
nice -n "${KILN_FUZZ_NICE:-19}" ninja -C "$build" -j "${KILN_FUZZ_JOBS:-2}" "${bins[@]}"
[ "$build_only" = 0 ] || exit 0

# --ci's executions per target: 30-70 s each here, two targets at a time
# (measured 2026-12-03, docs/reliability.md "What CI runs"). onnx: 0, a
# replay of its seeds and regressions (libFuzzer runs those before any
# mutation).
ci_runs() {
  case "$1" in
    npy) echo 3000000 ;; safetensors) echo 500000 ;; tune-cache) echo 1000000 ;;
    ptx) echo 100000 ;; artifact) echo 20000 ;; onnx) echo 0 ;;
  esac
}

run_target() {
  local t="$1"
  corpus="$build/corpus/$t"
  crashes="$build/crashes/$t"
  # --ci starts from the committed seeds alone, in a fresh directory.
  determinism=()
  if [ "$ci" = 1 ]; then
    corpus="$build/corpus-ci/$t"
    rm -rf "$corpus"
    determinism=(-seed=1 -runs="$(ci_runs "$t")")
  fi
  mkdir -p "$corpus" "$crashes"
  log="$build/fuzz-$t.log"
  # -rss_limit_mb: the artifact target may allocate a 64 MiB arena and
  # weights; ASan's shadow roughly doubles that. -timeout: one input that
  # runs longer than 25 s is a hang.
  # The PTX parser runs ~0.5 MB/s instrumented: mutating the 78 kB seed
  # whole would give ~5 executions a second, so inputs are cut at 8 kB.
  max_len=()
  [ "$t" != ptx ] || max_len=(-max_len=8192)
  # ONNX seeds are up to 4 kB; mutations may grow them (the target rejects
  # more than 1 MiB itself).
  [ "$t" != onnx ] || max_len=(-max_len=65536)
  # One ONNX input is a whole compile: seconds for the larger seeds on a
  # loaded machine; a hang is a compile of more than 60 s.
  timeout=25
  [ "$t" != onnx ] || timeout=60
  # Inputs that once crashed a target run first, every time.
  extra=()
  [ ! -d "$root/fuzz/regressions/$t" ] || extra=("$root/fuzz/regressions/$t")
  set +e
  nice -n "${KILN_FUZZ_NICE:-19}" "$build/bin/kiln-fuzz-$t" \
    -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=4096 \
    -artifact_prefix="$crashes/" -print_final_stats=1 \
    -dict="$root/fuzz/dict/$t.dict" "${max_len[@]}" "${determinism[@]}" \
    "$corpus" "$root/fuzz/corpus/$t" "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    echo "fuzz.sh: $t: FAILED after ${execs:-?} executions (log: $log; inputs: $crashes)"
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error)" "$log" | head -5 || true
    return 1
  fi
  echo "fuzz.sh: $t: ${execs:-?} executions in at most ${seconds} s, no crash (corpus: $(ls "$corpus" | wc -l) inputs)"
}

# --jobs N targets at a time (each fuzzer is one process on one core).
status=0
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
exit $status
