#!/usr/bin/env bash
#===- run-example.sh - The README's main command ----------------------------===#
#
# Usage: scripts/run-example.sh [--device auto|cuda|emu]
#                               [--model MODEL.onnx [--shape name=dims ...]]
#
# Installs the dependencies, builds kilnc and kiln-run, then
# (examples/digits/run_example.py) trains the bundled example, a small CNN
# that reads handwritten digits (scikit-learn's copy of the UCI digits data
# set, trained here with numpy in seconds), compiles it to a .kiln file and
# runs it on held-out digits: on cuda when a GPU is present, else on emu.
# Prints the compile summary (kernels, arena, weights), the top-5 digits for
# the first image, the agreement with onnxruntime and, on a GPU, the run
# time. --model compiles and runs another ONNX model the same way, on a
# seeded random input. Exits 1 if Kiln and onnxruntime disagree.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"

"$root/scripts/install-deps.sh"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh" kilnc kiln-run

python3 "$root/examples/digits/run_example.py" --build-dir "$build" "$@"
