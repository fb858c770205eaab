#!/usr/bin/env bash
#===- bench-import.sh - Time `kilnc --summary` on the light models ---------===#
#
# Prints the median wall time of N imports (default 5) per model: the issue's
# target is ResNet-50 under 2 s on the 2-core development machine.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
runs="${1:-5}"
light=$(python3 -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light"))')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$root/test/Frontend/ONNX/models/make_encoder.py" "$tmp/encoder.onnx"
python3 "$root/test/Frontend/ONNX/models/make_encoder.py" "$tmp/bert_base_layer.onnx" \
  --hidden 768 --heads 12 --ffn 3072 --vocab 30522

printf '%-28s %10s\n' model "median s"
for model in "$light"/light_*.onnx "$tmp/encoder.onnx" "$tmp/bert_base_layer.onnx"; do
  times=()
  for _ in $(seq "$runs"); do
    start=$(date +%s.%N)
    "$build/bin/kilnc" "$model" --summary > /dev/null
    end=$(date +%s.%N)
    times+=("$(awk "BEGIN { print $end - $start }")")
  done
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-28s %10.3f\n' "$(basename "$model" .onnx)" "$median"
done
