#!/usr/bin/env bash
#===- device-check.sh - Run the prepared artifacts on a GPU and compare -----===#
#
# Usage: scripts/device-check.sh [--dry-run] [--group kernels|models|all]
#                                [device_check.py options] [MODEL...]
#
# Runs on the lent GPU machine (no LLVM there), from the repository root,
# over device-check/, which scripts/device/prepare.sh builds on the
# development machine and packs into device-pack/device-check.txz, which
# the device tool carries (carry ["device-pack", "build/python",
# "build-device-python/python"]: the Python package for its check,
# scripts/device/python_check.py, which runs first, a few seconds) and
# scripts/device/run-group.sh unpacks there.
# Then, when prepare.sh packed it, the product-surface check
# (scripts/device/surface_check.py, about 10 s: the digits example on the
# GPU against onnxruntime, kiln-run --bench --json and its throughput, exit
# status; table in $OUT/surface.txt).
# Then scripts/device/attention_bench.py (issue 12; about a minute): the
# fused attention kernel against torch SDPA (flash) at batch 8, 16 heads,
# seq 2048, d 128/64, causal and not, bf16/fp16, on the wgmma and the
# mma.sync kernel side by side, and the encoder at batch 32 with and
# without it ($OUT/attention.txt; about 125 s on the H200, 2026-12-04). Then the phases, in this order,
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
#    per artifact (fp32/bf16, fused/unfused; ResNet-50 at batch 32 also
#    int8, Kiln's own calibration, its int8 weights derived from the fp32
#    ones: bound 0.1 and top-1 agreement 0.9) kiln-run: relative error of the
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
# stopped at the device tool's limit still returns the phases done.
#
# The benchmark scripts before device_check.py run under a time budget each
# (`timeout`; 20x in --dry-run, on emu), killed past it so the next phase
# still runs; $OUT/phases.txt says how long each took and how it ended.
# Everything together is more than one device call allows (600 s), so
# `--group` splits it in two calls (5-6 minutes each on 2026-12-04)
# (docs/benchmarks.md, "Device time"):
#   kernels: attention 200 s, wgmma 90 s, membound 90 s, quant 60 s,
#            tune 120 s, then device_check.py --phase gemm (75 s);
#   models:  python 60 s, surface 60 s, train 120 s, nccl 60 s, loops 40 s,
#            fault 20 s,
#            then device_check.py --phase bench,top1 (150 s + 90 s).
# On the device, run it through scripts/device/run-group.sh (one tarball
# back: the tool returns at most 8 files). `--phase gemm,bench` etc.
# (device_check.py's own option) runs a subset of its phases.
# Exits 1 if a run fails or an error or agreement is outside its bound.
#
# --dry-run: for this machine, after `scripts/device/prepare.sh --dry-run`:
# the emu device, --bench 1 --warmup 0, one run per GEMM, PyTorch on the CPU
# when torch is installed (its times are not comparable).
#
#===------------------------------------------------------------------------===#
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# DEVICE_CHECK_DIR: another prepared directory (the lit test of this
# script's phase logic uses a stub one).
dir="${DEVICE_CHECK_DIR:-$root/device-check}"
export PYTHONUNBUFFERED=1
args=(--dir "$dir")
dry=0
group=all
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --group) group="${2:-}"; shift 2 ;;
    *) break ;;
  esac
done
case "$group" in
  kernels|models|all) ;;
  *) echo "device-check.sh: --group '$group' is not kernels, models or all" >&2; exit 2 ;;
esac
if [ $dry = 1 ]; then
  args+=(--device emu --runs 1 --warmup 0 --gemm-runs 1 --torch cpu --timeout 600
         --gemm-budget 1800 --budget 1800 --top1-budget 1800)
fi
if [ ! -f "$dir/manifest.json" ]; then
  echo "device-check.sh: $dir/manifest.json missing: run scripts/device/prepare.sh first" >&2
  exit 1
fi
out="${OUT:-/tmp}"
mkdir -p "$out"
: > "$out/phases.txt"
device=$([ $dry = 1 ] && echo emu || echo cuda)
# The budgets in percent (DEVICE_CHECK_BUDGET_PERCENT; 2000 in --dry-run:
# emu is slow).
percent=${DEVICE_CHECK_BUDGET_PERCENT:-$([ $dry = 1 ] && echo 2000 || echo 100)}

# phase NAME GROUP BUDGET_S COMMAND...: runs COMMAND when GROUP is asked
# for, killed after BUDGET_S (scaled by $percent); a failure or a timeout
# is reported and the check goes on.
phase() {
  local name=$1 in_group=$2 budget=$3
  shift 3
  [ "$group" = all ] || [ "$group" = "$in_group" ] || return 0
  budget=$((budget * percent / 100))
  [ "$budget" -ge 1 ] || budget=1
  local start=$SECONDS rc=0
  timeout --kill-after=10 "$budget" "$@" || rc=$?
  local how=ok
  if [ $rc = 124 ] || [ $rc = 137 ]; then
    how="stopped at its ${budget} s budget"
  elif [ $rc != 0 ]; then
    how="failed (rc $rc)"
  fi
  printf '%-10s %4d s  %s\n' "$name" $((SECONDS - start)) "$how" >> "$out/phases.txt"
  [ "$how" = ok ] || echo "device-check.sh: $name $how; going on" >&2
}

# The Python package over DLPack (scripts/device/python_check.py).
[ ! -d "$dir/python" ] || phase python models 60 \
  bash -c 'python3 "$1" --dir "$2" --device "$3" 2>&1 | tee "$4"' _ \
  "$root/scripts/device/python_check.py" "$dir/python" "$device" "$out/python-check.txt"
# The product surface (about 10 s; scripts/device/surface_check.py).
[ ! -d "$dir/surface" ] || phase surface models 60 python3 "$dir/scripts/surface_check.py" "${args[@]}"
# Issue 12: fused attention (wgmma and mma.sync) vs torch SDPA ($OUT/attention.txt).
[ ! -f "$dir/scripts/attention_bench.py" ] || phase attention kernels 200 python3 "$dir/scripts/attention_bench.py" "${args[@]}" ${OUT:+--out "$OUT"}
# Issue 11: bf16 GEMM wgmma vs mma.sync vs torch.matmul, 4096^3/8192^3; tf32
# (wgmma, mma.sync) and fp32 (FFMA) 4096^3 vs torch.matmul with allow_tf32
# on/off ($OUT/wgmma.txt; about 40 s).
[ ! -d "$dir/wgmma" ] || phase wgmma kernels 90 python3 "$dir/scripts/wgmma_bench.py" "${args[@]}" ${OUT:+--out "$OUT"}
# Issue 12: memory-bound kernels vs the copy bandwidth ($OUT/membound.txt).
[ ! -f "$dir/scripts/membound_bench.py" ] || phase membound kernels 90 python3 "$dir/scripts/membound_bench.py" "${args[@]}" "$@"
# Issue 14: training speed; "--device emu" in --dry-run.
phase train models 120 python3 "$root/scripts/device/train_bench.py" run --dir "$dir/train" "${args[@]:2:2}"
# Issue 27: the NCCL engine at world size 1, weights after 10 steps against
# the host path (nccl_check.py; the host path twice in --dry-run).
[ ! -d "$dir/nccl" ] || phase nccl models 60 python3 "$root/scripts/device/nccl_check.py" run --dir "$dir/nccl" "${args[@]:2:2}"
# Device-side loops (test/Target/CUDA/device_loops.py's models) through
# kiln-run with --graph (conditional WHILE nodes where the driver has them)
# and without (host-read flags), against onnxruntime (loops_check.py;
# $OUT/loops_check.json).
[ ! -d "$dir/loops" ] || phase loops models 40 python3 "$root/scripts/device/loops_check.py" run --dir "$dir/loops" --kiln-run "$dir/bin/kiln-run" "${args[@]:2:2}"
# A kernel that stores to address 0 (issue 28): kiln-run exits 2 naming the
# fault (and the kernel with CUDA_LAUNCH_BLOCKING=1), no hang, and the next
# process runs (fault_check.py; $OUT/fault_check.json).
[ ! -d "$dir/fault" ] || phase fault models 20 python3 "$root/scripts/device/fault_check.py" run --dir "$dir/fault" --kiln-run "$dir/bin/kiln-run" "${args[@]:2:2}"
# The quantized GEMM kernels (issue 26): int8 on wgmma_s8 and mma_s8, fp8 on
# wgmma_f8, at 4096^3 against onnxruntime and beside the bf16 kernel and
# torch._int_mm/_scaled_mm (quant_check.py; $OUT/quant.txt; ~30 s); before
# tune, whose time on the GPU is not known yet.
[ ! -d "$dir/quant" ] || phase quant kernels 60 python3 "$root/scripts/device/quant_check.py" run --dir "$dir/quant" --kiln-run "$dir/bin/kiln-run" "${args[@]:2:2}"
# Issue 11: kilnc --tune's jobs on the GPU: tuning time, tuned vs heuristic ($OUT/tune.txt).
phase tune kernels 120 python3 "$root/scripts/device/tune_bench.py" run --dir "$dir/tune" --kiln-run "$dir/bin/kiln-run" "${args[@]:2:2}"

# device_check.py: the GEMM table (kernels) and the whole models (models),
# under its own per-phase budgets.
check=(python3 "$dir/scripts/device_check.py" "${args[@]}")
case "$group" in
  kernels) check+=(--phase gemm) ;;
  models) check+=(--phase bench,top1) ;;
esac
if [ -n "${OUT:-}" ]; then
  "${check[@]}" "$@" 2>&1 | tee "$OUT/log.txt"
  status=${PIPESTATUS[0]}
else
  "${check[@]}" "$@"
  status=$?
fi
echo "phase times ($out/phases.txt):"
cat "$out/phases.txt"
exit "$status"
