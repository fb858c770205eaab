#!/usr/bin/env bash
#===- gen-docs.sh - Regenerate the docs that come from code ----------------===#
#
# docs/onnx-ops.md from the importer's handler registry, docs/dialect/kiln-ops.md
# from the ODS definitions. test/docs/docs-current.test fails when either is
# stale.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
mkdir -p "$root/docs/dialect"
"$build/bin/kilnc" --list-onnx-ops > "$root/docs/onnx-ops.md"
/usr/lib/llvm-22/bin/mlir-tblgen -gen-op-doc -I "$root/include" -I /usr/lib/llvm-22/include \
  "$root/include/kiln/Dialect/Kiln/IR/KilnOps.td" > "$root/docs/dialect/kiln-ops.md"
echo "regenerated docs/onnx-ops.md and docs/dialect/kiln-ops.md"
