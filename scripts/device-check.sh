#!/usr/bin/env bash
#===- device-check.sh - Run the prepared artifacts on a GPU and compare -----===#
#
# Usage: scripts/device-check.sh [--dry-run] [device_check.py options] [MODEL...]
#
# Runs on the lent GPU machine (no LLVM there), from the repository root,
# over device-check/, which scripts/device/prepare.sh builds on the
# development machine and the device tool carries (carry ["device-check"]).
# For each model: regenerate its seeded random ONNX model with the portable
# generator and check its initializers against the SHA-256 recorded when the
# artifacts were compiled; export them for `kiln-run --weights`; make a
# seeded input and the onnxruntime fp32 reference; then per artifact
# (fp32/bf16, fused/unfused) kiln-run on cuda: relative error of the output
# norm against the reference (bounds fp32 1e-4, bf16 2e-2) and the median of
# --bench N; for ResNet-50 and the encoder layer at batch 32, PyTorch eager
# fp32 (TF32 off) and bf16 (ResNet-50 channels_last) on the same input and
# weights. Then the top-1 phase (issue 5): the nine light classifiers at
# batch 200, compiled with --precision=bf16, fp16 and tf32, each run once on
# one seeded N(0, 1) batch: relative error of the output norm (bounds bf16
# 2e-2, fp16 and tf32 5e-3) and top-1 agreement with onnxruntime fp32
# (bound 0.99). Prints two tables, also written to $OUT/table.txt (with
# results.json, kiln-run-logs.tar.gz and log.txt) when $OUT is set. Each
# phase has its own time budget, after which its remaining runs are skipped
# (--budget 240 s for the benchmarks, --top1-budget 150 s for the top-1
# phase, counted from its start; runs in flight finish). Not yet run on a
# GPU: the budgets and per-run timeouts bound it to about 8 minutes at worst,
# so give the device tool timeout_s 590, or run the phases as two calls
# (--phase bench, --phase top1). $OUT/table.txt is written after the
# benchmarks too, marked incomplete, in case the call is stopped.
# Exits 1 if a run fails or an error or agreement is outside its bound.
#
# --dry-run: for this machine, after `scripts/device/prepare.sh --dry-run`:
# the emu device, --bench 1 --warmup 0, PyTorch on the CPU when torch is
# installed (its times are not comparable).
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/device-check"
export PYTHONUNBUFFERED=1
args=(--dir "$dir")
if [ "${1:-}" = --dry-run ]; then
  shift
  args+=(--device emu --runs 1 --warmup 0 --torch cpu --timeout 600 --budget 1800
         --top1-budget 1800)
fi
if [ ! -f "$dir/manifest.json" ]; then
  echo "device-check.sh: $dir/manifest.json missing: run scripts/device/prepare.sh first" >&2
  exit 1
fi
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  python3 "$dir/scripts/device_check.py" "${args[@]}" "$@" 2>&1 | tee "$OUT/log.txt"
else
  python3 "$dir/scripts/device_check.py" "${args[@]}" "$@"
fi
