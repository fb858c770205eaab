#!/usr/bin/env bash
#===- emu-check.sh - Whole models on the emu device vs onnxruntime ---------===#
#
# Usage: scripts/emu-check.sh [MODEL...]   (default: every light model and the
#                                           encoder layer)
#
# The scheduled-length suite: each light model with seeded random weights
# (scripts/device/randomize_weights.py) and the BERT-style encoder layer is
# compiled with kilnc, run with kiln-run --device emu, and compared with
# onnxruntime fp32 on the same input: relative error on the output norm,
# bound 1e-4. Prints one row per model: error, emu wall time. Too slow for
# CI on 2 cores (ResNet-50 alone takes minutes); CI runs SqueezeNet and small
# models (test/Target/CUDA/emu-*.test).
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(squeezenet shufflenet resnet50 inception_v1 inception_v2
                                   densenet121 bvlc_alexnet zfnet512 vgg19 encoder)
"$root/scripts/build.sh" kilnc kiln-run > /dev/null
light=$(python3 -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light"))')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rows=()
for m in "${models[@]}"; do
  if [ "$m" = encoder ]; then
    python3 "$root/test/Frontend/ONNX/models/make_encoder.py" "$tmp/$m.onnx"
  else
    python3 "$root/scripts/device/randomize_weights.py" "$light/light_$m.onnx" "$tmp/$m.onnx" 2>/dev/null
  fi
  "$build/bin/kilnc" "$tmp/$m.onnx" -o "$tmp/$m.kiln" || { rows+=("$m compile-error"); continue; }
  start=$(date +%s.%N)
  result=$(python3 "$root/test/Target/CUDA/emu_vs_onnxruntime.py" "$tmp/$m.onnx" "$tmp/$m.kiln" \
           "$tmp/$m.run" --kiln-run "$build/bin/kiln-run" 2>&1 | grep -E "rel-err|error|FAIL" | tr "\n" " ")
  end=$(date +%s.%N)
  rows+=("$(printf '%-14s %-60s %8.1f s' "$m" "$result" "$(awk "BEGIN { print $end - $start }")")")
  echo "${rows[-1]}"
done
echo
printf '%s\n' "${rows[@]}"
