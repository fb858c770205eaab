#!/usr/bin/env bash
#===- prepare.sh - Build what the GPU check carries, on this machine -------===#
#
# Usage: scripts/device/prepare.sh [--dry-run] [--no-strip] [prepare.py options]
#
# The device machine has no LLVM/MLIR and no network, and the device tool
# carries at most 64 MiB (the working tree included): everything the GPU
# check needs is built here into device-check/ (git-ignored), without the
# weights. ResNet-50's random fp32 weights alone are ~100 MB, so the
# artifacts are compiled with `kilnc --strip-weights` and the check
# regenerates the seeded random models there with the portable generator
# (scripts/device/portable_random.py: the same bits under another numpy) and
# binds their initializers with `kiln-run --weights`. prepare.py records a
# SHA-256 per initializer, which the check verifies before binding.
#
# Contents (scripts/device/prepare.py says more): bin/kiln-run, scripts/,
# the light ONNX models used, manifest.json, and artifacts for the GEMM
# phase (4096^3 bf16/fp32/tf32, 8192^3 bf16, with emu estimates), ResNet-50
# and the encoder layer at batch 32 ({fp32, bf16} x {fused, unfused}),
# ResNet-50 at batch 1 (fp32, bf16), the batch-1 numerics of SqueezeNet,
# ShuffleNet and the encoder, and the top-1 phase's classifiers.
# --dry-run packs the small set that `scripts/device-check.sh --dry-run`
# runs on the emu device here.
#
# Both sets include device-side loops (loops_check.py: device_loops.py's
# models for sm_90, their inputs and onnxruntime's outputs, ~1 MiB).
# Without --dry-run it also builds the training set (train_bench.py) and the
# NCCL set (nccl_check.py), and packs device-check/ into
# device-pack/device-check.txz (xz; git-ignored): the unpacked set is about
# 300 MiB (the classifiers' artifacts are mostly PTX and cubins) and packs
# into about 42 MiB (2026-12-04). Fails if the
# pack and the Python packages together are over 52 MiB (the working tree,
# ~9 MiB, travels too).
#
# Then, with the device tool, carry ["device-pack", "build/python",
# "build-device-python/python"], two
# calls (docs/benchmarks.md, "Device time"):
#   bash scripts/device/run-group.sh kernels 450     (timeout_s 480)
#   bash scripts/device/run-group.sh models 330      (timeout_s 360)
# run-group.sh unpacks the pack when device-check/ is not there yet.
#
#===------------------------------------------------------------------------===#
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build="${KILN_BUILD_DIR:-$root/build}"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh" -j "${KILN_JOBS:-2}" kilnc kiln-run kiln-tune-worker
# kiln-run must run without LLVM there: it links libstdc++ statically and
# dlopens libcuda.so.1 (docs/runtime.md).
if ldd "$build/bin/kiln-run" | grep -Eq 'LLVM|MLIR|libstdc\+\+|libcuda'; then
  echo "prepare.sh: $build/bin/kiln-run links libraries the device machine lacks:" >&2
  ldd "$build/bin/kiln-run" >&2
  exit 1
fi
python3 "$root/scripts/device/prepare.py" --build "$build" "$@"
KILN_BUILD_DIR="$build" "$root/scripts/build.sh" kiln-python && python3 "$root/scripts/device/python_check.py" --prepare "$root/device-check/python"  # the Python package (carry build/python too)
python3 "$root/scripts/device/surface_check.py" --prepare --build "$build" "$@"
python3 "$root/scripts/device/membound_bench.py" --prepare --kilnc "$build/bin/kilnc" --out "$root/device-check" "$@"
python3 "$root/scripts/device/tune_bench.py" prepare --kilnc "$build/bin/kilnc" --worker "$build/bin/kiln-tune-worker" --out "$root/device-check/tune" $([[ " $* " == *" --dry-run "* ]] && echo --dry-run)  # issue 11: the tuning jobs (tune_bench.py)
python3 "$root/scripts/device/loops_check.py" prepare --build "$build" --out "$root/device-check/loops"  # device-side loops, --graph on and off (loops_check.py; ~1 MiB)
python3 "$root/scripts/device/quant_check.py" prepare --build "$build" --out "$root/device-check/quant" $([[ " $* " == *" --dry-run "* ]] && echo --dry-run)  # int8/fp8 GEMM kernels vs bf16 (quant_check.py; stripped artifacts, < 1 MiB)
python3 "$root/scripts/device/fault_check.py" prepare --build "$build" --out "$root/device-check/fault"  # issue 28: a kernel that faults on purpose (fault_check.py; ~40 KiB)
if [[ " $* " != *" --dry-run "* ]]; then
  KILN_BUILD_DIR="$build" "$root/scripts/build.sh" kiln-train
  python3 "$root/scripts/device/train_bench.py" prepare --build "$build" --out "$root/device-check/train"  # issue 14
  python3 "$root/scripts/device/nccl_check.py" prepare --build "$build" --out "$root/device-check/nccl"    # issue 27
  # The Python package for the device machine's CPython (3.12 there on
  # 2026-12-04; an extension loads only in its own minor version): built
  # with KILN_DEVICE_PYTHON (default: a python3.12 on PATH or under pyenv that
  # has nanobind) and
  # without RE2, whose shared library the device lacks. python_check.py
  # picks the build that matches its interpreter.
  dp="${KILN_DEVICE_PYTHON:-}"
  if [ -z "$dp" ]; then
    for candidate in python3.12 "$HOME"/.pyenv/versions/3.12.*/bin/python3; do
      if "$candidate" -c 'import nanobind' 2>/dev/null; then dp=$(command -v "$candidate"); break; fi
    done
  fi
  if [ -n "$dp" ] && { [ -f "$root/build-device-python/build.ninja" ] ||
       cmake -G Ninja -S "$root" -B "$root/build-device-python" -DCMAKE_BUILD_TYPE=Release \
         -DPython_EXECUTABLE="$dp" -DKILN_ENABLE_RE2=OFF > /dev/null; } &&
     ninja -C "$root/build-device-python" kiln-python > /dev/null; then
    echo "prepare.sh: the Python package for $("$dp" -V 2>&1) in build-device-python/python"
  else
    echo "prepare.sh: note: no Python package for the device's CPython 3.12 (set KILN_DEVICE_PYTHON to a python3.12 with nanobind): its check will skip" >&2
  fi
  mkdir -p "$root/device-pack"
  pack="$root/device-pack/device-check.txz"
  tar -C "$root" -cf - device-check | xz -T2 -6 > "$pack.tmp"
  mv "$pack.tmp" "$pack"
  mib=$(( ($(stat -c %s "$pack") + $(du -scb "$build/python" "$root/build-device-python/python" 2>/dev/null | tail -1 | cut -f1)) / 1048576 ))
  echo "prepare.sh: $pack and the Python packages: $mib MiB (limit 52 MiB)"
  if [ "$mib" -gt 52 ]; then
    echo "prepare.sh: the pack is over 52 MiB: the device tool carries 64 MiB with the working tree (~9 MiB)" >&2
    exit 1
  fi
fi
