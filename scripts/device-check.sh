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
# weights. Prints one table, also written to $OUT/table.txt (with
# results.json, kiln-run-logs.tar.gz and log.txt) when $OUT is set. Runs in
# well under 5 minutes on an H200 (remaining runs are skipped after --budget
# seconds, 240 by default). Exits 1 if a run fails or an error is over its
# bound.
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
  args+=(--device emu --runs 1 --warmup 0 --torch cpu --timeout 600 --budget 1800)
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
