#!/usr/bin/env bash
#===- run-example.sh - The README's main job --------------------------------===#
#
# Installs, builds, then compiles the bundled example (ResNet-50 from the onnx
# package's light model zoo) and prints its one-line kiln IR summary. Later
# issues extend this to compile to PTX and run it.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh" kilnc

model="${1:-$(python3 -c 'import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/light_resnet50.onnx"))')}"
"$build/bin/kilnc" "$model" --summary
