#!/usr/bin/env bash
#===- device-check.sh - Run the prepared artifacts on a GPU and compare -----===#
#
# Usage: scripts/device-check.sh [--dry-run] [device_check.py options] [MODEL...]
#
# Runs on the lent GPU machine (no LLVM there), from the repository root,
# over device-check/, which scripts/device/prepare.sh builds on the
# development machine and the device tool carries (carry ["device-check",
# "build/python"]: build/python for the Python package's check,
# scripts/device/python_check.py, which runs first, a few seconds).
# Then, when prepare.sh packed it, the product-surface check
# (scripts/device/surface_check.py, about 10 s: the digits example on the
# GPU against onnxruntime, kiln-run --bench --json and its throughput, exit
# status; table in $OUT/surface.txt).
# Then scripts/device/attention_bench.py (issue 12; about a minute): the
# fused attention kernel against torch SDPA (flash) at batch 8, 16 heads,
# seq 2048, d 128/64, causal and not, bf16/fp16, on the wgmma and the
# mma.sync kernel side by side, and the encoder at batch 32 with and
# without it ($OUT/attention.txt). Then the phases, in this order,
# each with its own time budget counted from its start (its remaining runs
# are skipped after it; runs in flight finish):
#
# 1. gemm (--gemm-budget 75 s; issue 11's speed table): single-MatMul
#    models C = A B, 4096^3 in bf16 (bf16 A and C in memory), fp32 (FFMA,
#    no TF32) and tf32, and 8192^3 in bf16. B is regenerated with the
#    portable generator and checked against its SHA-256; per precision
#    torch.matmul (cuBLAS; fp32 with allow_tf32=False) on the same operands,
#    then kiln-run once (-o: relative error of 256 sampled rows and the
#    column sums against float64 on the CPU; bounds bf16 1e-2, tf32 5e-3,
#    fp32 1e-4) and kiln-run --bench --profile: median ms, TFLOP/s, % of
#    cuBLAS, % of the dense peak (bf16 989), NVML energy.
# 2. bench (--budget 150 s): per model, regenerate its seeded random ONNX
#    model, check its initializers' SHA-256, export them for kiln-run
#    --weights, make a seeded input and the onnxruntime fp32 reference; then
#    per artifact (fp32/bf16, fused/unfused) kiln-run: relative error of the
#    output norm (bounds fp32 1e-4, bf16 2e-2) and the median of --bench N
#    (and energy); PyTorch eager fp32 (TF32 off) and bf16 (ResNet-50
#    channels_last) for ResNet-50 at batch 32 and 1 and the encoder layer
#    at batch 32. ResNet-50 bf16 fused at batch 32 also runs with --profile
#    (per-kernel times beside the emu estimate) and --trace.
# 3. top1 (--top1-budget 90 s; issue 5): the nine light classifiers at
#    batch 200, bf16/fp16/tf32, one run each: relative error and top-1
#    agreement with onnxruntime fp32 (bound 0.99), cheapest model first.
# 4. compile, only when asked for (--phase compile, --compile-budget 300 s):
#    torch.compile(mode="max-autotune") of ResNet-50 bf16 at batch 32, in its
#    own process group, killed at the budget.
#
# Prints the tables, also written to $OUT/table.txt (with results.json,
# kiln-run-logs.tar.gz: kiln-run's output, profiles and traces; and
# log.txt) after every phase, marked INCOMPLETE until the last, so a command
# stopped at the device tool's limit still returns the phases done. Not yet
# run on a GPU with the GEMM phase: about 4-5 minutes expected, bounded by
# the budgets to about 6.5 at worst, so give the device tool timeout_s 480
# (docs/benchmarks.md); `--phase gemm,bench` etc. runs a subset.
# Exits 1 if a run fails or an error or agreement is outside its bound.
#
# --dry-run: for this machine, after `scripts/device/prepare.sh --dry-run`:
# the emu device, --bench 1 --warmup 0, one run per GEMM, PyTorch on the CPU
# when torch is installed (its times are not comparable).
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/device-check"
export PYTHONUNBUFFERED=1
args=(--dir "$dir")
if [ "${1:-}" = --dry-run ]; then
  shift
  args+=(--device emu --runs 1 --warmup 0 --gemm-runs 1 --torch cpu --timeout 600
         --gemm-budget 1800 --budget 1800 --top1-budget 1800)
fi
if [ ! -f "$dir/manifest.json" ]; then
  echo "device-check.sh: $dir/manifest.json missing: run scripts/device/prepare.sh first" >&2
  exit 1
fi
[ -d "$dir/python" ] && python3 "$root/scripts/device/python_check.py" --dir "$dir/python" --device "$([[ " ${args[*]} " == *" --device emu "* ]] && echo emu || echo cuda)" 2>&1 | tee "${OUT:-/tmp}/python-check.txt" || echo "device-check.sh: python_check.py failed; going on" >&2  # the Python package over DLPack (scripts/device/python_check.py)
# The product surface first (about 10 s; scripts/device/surface_check.py).
[ ! -d "$dir/surface" ] || python3 "$dir/scripts/surface_check.py" "${args[@]}" || echo "device-check.sh: surface_check.py failed; going on" >&2
python3 "$dir/scripts/attention_bench.py" "${args[@]}" ${OUT:+--out "$OUT"} || echo "device-check.sh: attention_bench.py failed (rc $?); going on" >&2
[ ! -d "$dir/wgmma" ] || python3 "$dir/scripts/wgmma_bench.py" "${args[@]}" ${OUT:+--out "$OUT"} || echo "device-check.sh: wgmma_bench.py failed (rc $?); going on" >&2  # issue 11: bf16 GEMM wgmma vs mma.sync vs torch.matmul, 4096^3/8192^3; tf32 (wgmma, mma.sync) and fp32 (FFMA) 4096^3 vs torch.matmul with allow_tf32 on/off ($OUT/wgmma.txt; about 40 s)
python3 "$dir/scripts/membound_bench.py" "${args[@]}" "$@" || echo "device-check.sh: membound_bench.py failed; going on" >&2  # issue 12: memory-bound kernels vs the copy bandwidth ($OUT/membound.txt)
python3 "$root/scripts/device/train_bench.py" run --dir "$dir/train" "${args[@]:2:2}" || echo "device-check.sh: train_bench.py failed; going on" >&2  # training speed (issue 14); "--device emu" in --dry-run
python3 "$root/scripts/device/tune_bench.py" run --dir "$dir/tune" --kiln-run "$dir/bin/kiln-run" "${args[@]:2:2}" || echo "device-check.sh: tune_bench.py failed; going on" >&2  # issue 11: kilnc --tune's jobs on the GPU: tuning time, tuned vs heuristic ($OUT/tune.txt)
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  python3 "$dir/scripts/device_check.py" "${args[@]}" "$@" 2>&1 | tee "$OUT/log.txt"
else
  python3 "$dir/scripts/device_check.py" "${args[@]}" "$@"
fi
