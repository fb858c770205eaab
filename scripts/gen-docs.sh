#!/usr/bin/env bash
#===- gen-docs.sh - Regenerate the docs that come from code ----------------===#
#
# docs/onnx-ops.md from the importer's handler registry, docs/dialect/kiln-ops.md
# and docs/passes.md from the ODS/TableGen definitions. test/docs/docs-current.test fails when either is
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
{
  echo "# Kiln passes"
  echo
  echo "Generated from include/kiln/Conversion/Passes.td by scripts/gen-docs.sh;"
  echo "do not edit by hand. Pass order lives in lib/Pipelines/Pipelines.cpp"
  echo "(see docs/architecture.md)."
  echo
  /usr/lib/llvm-22/bin/mlir-tblgen -gen-pass-doc -I "$root/include" -I /usr/lib/llvm-22/include \
    "$root/include/kiln/Conversion/Passes.td"
} > "$root/docs/passes.md"
echo "regenerated docs/onnx-ops.md, docs/dialect/kiln-ops.md and docs/passes.md"
