#!/usr/bin/env bash
#===- device-check.sh - Run the prepared artifacts on a GPU and compare -----===#
#
# Runs on the lent GPU machine (no LLVM there) over device-check/, which
# scripts/device/prepare.sh builds on the development machine and the device
# tool carries. For each model: kiln-run on cuda with the seeded input,
# relative error of the output norm against onnxruntime fp32 (bound 1e-4),
# then --bench for the median latency. Ends with one table row per model.
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="${1:-$root/device-check}"
runs="${KILN_BENCH_RUNS:-20}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
rows=()
for model in "$dir"/models/*/; do
  m=$(basename "$model")
  args=()
  while IFS=$'\t' read -r name file; do
    args+=(-i "$name=$model/inputs/$file")
  done < "$model/inputs/names.txt"
  rm -rf "$model/out"
  if ! "$dir/bin/kiln-run" "$model/model.kiln" --device cuda "${args[@]}" -o "$model/out" \
       > "$model/run.log" 2>&1; then
    rows+=("$(printf '%-12s %-10s %-12s %s' "$m" FAIL - "$(tail -1 "$model/run.log")")")
    continue
  fi
  err=$(python3 "$dir/compare.py" "$model/reference" "$model/out")
  status=$(python3 -c "print('ok' if float('$err') <= 1e-4 else 'MISMATCH')")
  "$dir/bin/kiln-run" "$model/model.kiln" --device cuda "${args[@]}" --bench "$runs" \
    > "$model/bench.log" 2>&1
  median=$(grep -m1 -oE 'median [0-9.]+ ms' "$model/bench.log" | head -1)
  rows+=("$(printf '%-12s %-10s %-12s %s' "$m" "$status" "$err" "${median:-?}")")
done
echo
printf '%-12s %-10s %-12s %s\n' model status "rel err" "median/run"
printf '%s\n' "${rows[@]}"
