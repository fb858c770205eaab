#!/usr/bin/env bash
#===- emu-check.sh - Whole models on the emu device vs onnxruntime ---------===#
#
# Usage: scripts/emu-check.sh [--precision P] [--inputs N] [MODEL...]
#        (default: fp32, 1 input, every light model and the encoder layer)
#
# --precision bf16|fp16|tf32 compiles with kilnc --precision=P and checks
# issue 5's bounds instead (test/Target/CUDA/emu_precision.py): relative
# error on the output norm <= 2e-2 (bf16) or 5e-3 (fp16, tf32), worst over
# --inputs N seeded random inputs, and for the classifiers the same top-1
# class as onnxruntime fp32 on >= 99% of them.
#
# The scheduled-length suite: each light model with seeded random weights
# (scripts/device/randomize_weights.py) and the BERT-style encoder layer is
# compiled with kilnc, run with kiln-run --device emu, and compared with
# onnxruntime fp32 on the same input: relative error on the output norm,
# bound 1e-4. Prints one row per model: error, emu wall time. Too slow for
# CI on 2 cores (ResNet-50 alone takes minutes). The light zoo's tests
# (test/Target/CUDA/light-zoo-*.test, light_zoo.py: calibrated weights, the
# logits compared element by element in every precision; docs/testing.md
# "The light zoo") run in CI and in the nightly tier.
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
precision=""
inputs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --precision) precision="$2"; shift 2 ;;
    --precision=*) precision="${1#*=}"; shift ;;
    --inputs) inputs="$2"; shift 2 ;;
    --inputs=*) inputs="${1#*=}"; shift ;;
    *) break ;;
  esac
done
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
  start=$(date +%s.%N)
  if [ -n "$precision" ]; then
    result=$(python3 "$root/test/Target/CUDA/emu_precision.py" model "$tmp/$m.onnx" "$tmp/$m.run" \
             --precision "$precision" --inputs "$inputs" --kilnc "$build/bin/kilnc" \
             --kiln-run "$build/bin/kiln-run" 2>&1 | grep -E "rel-err|error|failed|FAIL" | tr "\n" " ")
  else
    "$build/bin/kilnc" "$tmp/$m.onnx" -o "$tmp/$m.kiln" || { rows+=("$m compile-error"); continue; }
    result=$(python3 "$root/test/Target/CUDA/emu_vs_onnxruntime.py" "$tmp/$m.onnx" "$tmp/$m.kiln" \
             "$tmp/$m.run" --kiln-run "$build/bin/kiln-run" 2>&1 | grep -E "rel-err|error|FAIL" | tr "\n" " ")
  fi
  end=$(date +%s.%N)
  rows+=("$(printf '%-14s %-60s %8.1f s' "$m" "$result" "$(awk "BEGIN { print $end - $start }")")")
  echo "${rows[-1]}"
done
echo
printf '%s\n' "${rows[@]}"
