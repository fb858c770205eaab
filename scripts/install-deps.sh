#!/usr/bin/env bash
#===- install-deps.sh - Bring every build and test dependency of Kiln ------===#
#
# Idempotent: safe to run again; does nothing slow when everything is present.
# Targets Debian 12 (bookworm) as root (or with sudo). The CUDA Toolkit is not a
# Debian package: it must already be at /usr/local/cuda (or $CUDA_HOME); when it
# is missing this script says so and stops.
#
#===------------------------------------------------------------------------===#
set -euo pipefail

LLVM_VERSION=22
DEB_PACKAGES=(
  cmake ninja-build ccache pkg-config python3 python3-pip
  # psutil for lit's per-test timeout (test/lit.cfg.py): lit runs under
  # Debian's /usr/bin/python3, so the Debian package, not pip's.
  python3-psutil
  "llvm-${LLVM_VERSION}-dev" "libmlir-${LLVM_VERSION}-dev"
  "mlir-${LLVM_VERSION}-tools" "llvm-${LLVM_VERSION}-tools" "clang-${LLVM_VERSION}"
  # clang's sanitizer and libFuzzer runtimes, for scripts/fuzz.sh and
  # scripts/test.sh --sanitize (docs/reliability.md).
  "libclang-rt-${LLVM_VERSION}-dev"
  libfmt-dev libgtest-dev libgmock-dev
  # Formats: nlohmann-json3-dev (3.11, header-only) writes and reads every
  # JSON file of the runtime; libinih-dev (r55, its static archive) reads
  # runtime/targets/gpus.ini. docs/runtime.md "Formats" says why these two.
  nlohmann-json3-dev libinih-dev
  # RE2 runs RegexFullMatch on the host (docs/runtime.md "Host steps");
  # configure with -DKILN_ENABLE_RE2=OFF to build without it.
  libre2-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  zlib1g-dev libzstd-dev libedit-dev libxml2-dev libcurl4-openssl-dev
  # Data-parallel training (docs/runtime.md "Data-parallel training"):
  # Open MPI 4.1 launches the ranks (mpirun) and its libmpi.so.40, which
  # the runtime dlopens (never links), averages the gradients on emu.
  # libopenmpi-dev is not needed to build; it is for users' MPI programs
  # and the issue's stated dependency set.
  openmpi-bin libopenmpi-dev
)
# Python packages, pinned so results are reproducible: onnx, onnxruntime
# and pytest for tests; numpy for tests and the kiln package; nanobind and
# scikit-build-core build the kiln package (pyproject.toml pins the same);
# scikit-learn for the main example (scripts/run-example.sh), which trains
# its digits model on the handwritten-digits data set bundled in
# scikit-learn's wheel (nothing is downloaded at run time); jax and jaxlib
# (CPU, test-only) for the float64 whole-step training reference
# (test/Pipelines/Training/whole-step.test): a 102 MB jaxlib wheel, 370 MB
# installed, about a minute of pip.
PY_PACKAGES=(onnx==1.17.0 onnxruntime==1.20.1 numpy==1.26.4 pytest==9.2.0
  nanobind==3.1.0 scikit-build-core==1.1.2 scikit-learn==1.5.2
  jax==0.4.38 jaxlib==0.4.38)
# nvidia-cutlass (test-only) for the C++ source its wheel carries under
# cutlass_library/source (CUTLASS's headers, util and examples): nvcc
# builds CUTLASS's own kernels from it and the emulator runs them
# (test/cutlass, docs/emulator.md "Checked against CUTLASS"). Installed
# --no-deps: nothing of its Python side is used, and its dependencies
# (cuda-python, scipy, networkx, ...) would come unpinned. 40 MB.
PY_NO_DEPS_PACKAGES=(nvidia-cutlass==4.2.0.0)

say() { printf 'install-deps: %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { say "need root or sudo to install Debian packages"; exit 1; }
  SUDO=sudo
fi

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$CUDA_HOME/bin/ptxas" ] || [ ! -f "$CUDA_HOME/include/cuda.h" ]; then
  say "MISSING: CUDA Toolkit (expected ptxas and cuda.h under $CUDA_HOME)."
  say "Install the CUDA Toolkit 12.x/13.x (no driver needed) or set CUDA_HOME."
  exit 1
fi

PY="${PYTHON:-python3}"
if ! "$PY" - "${PY_PACKAGES[@]}" "${PY_NO_DEPS_PACKAGES[@]}" <<'PYEOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
PYEOF
then
  say "installing Python packages: ${PY_PACKAGES[*]}"
  "$PY" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}" ||
    "$PY" -m pip install -q --disable-pip-version-check --break-system-packages "${PY_PACKAGES[@]}"
  say "installing Python packages without their dependencies: ${PY_NO_DEPS_PACKAGES[*]}"
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "${PY_NO_DEPS_PACKAGES[@]}" ||
    "$PY" -m pip install -q --disable-pip-version-check --no-deps --break-system-packages "${PY_NO_DEPS_PACKAGES[@]}"
fi

say "all dependencies present (LLVM/MLIR ${LLVM_VERSION}, CUDA at $CUDA_HOME, $("$PY" --version))"
