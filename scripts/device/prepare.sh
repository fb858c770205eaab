#!/usr/bin/env bash
#===- prepare.sh - Build what the GPU check carries, on this machine -------===#
#
# Usage: scripts/device/prepare.sh [MODEL...]   (default: the set that fits)
#
# The device machine has no LLVM/MLIR and no network: everything it needs is
# built here into device-check/ (git-ignored): kiln-run, one artifact per
# model compiled from seeded random weights, a seeded input, and the
# onnxruntime (CPU, fp32) reference output on that input. The device tool
# carries at most 64 MiB, which rules out VGG-19, AlexNet and ZFNet-512 (their
# weights alone exceed it); the default set is ResNet-50, SqueezeNet,
# ShuffleNet and the encoder layer (~62 MB).
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
out="$root/device-check"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(resnet50 squeezenet shufflenet encoder)

"$root/scripts/build.sh" kilnc kiln-run
rm -rf "$out" && mkdir -p "$out/bin" "$out/models"
cp "$build/bin/kiln-run" "$out/bin/"
cp "$root/scripts/device/compare.py" "$out/"
light=$(python3 -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light"))')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for m in "${models[@]}"; do
  if [ "$m" = encoder ]; then
    python3 "$root/test/Frontend/ONNX/models/make_encoder.py" "$tmp/$m.onnx"
  else
    python3 "$root/scripts/device/randomize_weights.py" "$light/light_$m.onnx" "$tmp/$m.onnx"
  fi
  mkdir -p "$out/models/$m"
  "$build/bin/kilnc" "$tmp/$m.onnx" -o "$out/models/$m/model.kiln"
  python3 "$root/scripts/device/make_reference.py" "$tmp/$m.onnx" "$out/models/$m"
  echo "prepared $m"
done
du -sh "$out"
