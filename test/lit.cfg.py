# -*- Python -*-
# lit configuration for Kiln: dialect, frontend and tool tests.

import os
import shutil
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "KILN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".onnxtxt"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "e2e"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%kiln_src", config.kiln_src_root))
config.substitutions.append(("%kiln_build", config.kiln_obj_root))
config.substitutions.append(
    ("%llvm_include", os.path.join(os.path.dirname(config.llvm_tools_dir), "include")))
python = config.python_executable or shutil.which("python3")
config.substitutions.append(("%python", python))
# lit itself, as this run invokes it (its interpreter has psutil for
# timeouts): lit-limits.test runs a suite of its own.
config.substitutions.append(("%lit", f"{sys.executable} {sys.argv[0]}"))
# Runs a command and checks its exact exit status (1: user error, 2: internal).
config.substitutions.append(
    ("%expect-exit",
     f"{python} {os.path.join(config.kiln_src_root, 'test', 'tools', 'expect_exit.py')}"))
# Builds an .onnx file from ONNX textual syntax (and optional weights).
config.substitutions.append(
    ("%onnx-from-text",
     f"{python} {os.path.join(config.kiln_src_root, 'test', 'Frontend', 'ONNX', 'onnx_from_text.py')}"))

# Tiers (-Dkiln_full=1 adds the `full` feature) and the per-test timeout
# (-Dkiln_timeout=N, default 3600 s): test/lit_limits.py.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lit_limits
lit_limits.apply(lit_config, config)

# The locale too: ccache hashes LANG and LC_ALL/LC_CTYPE/LC_MESSAGES, so a
# test that builds (python/wheel.test: pip builds build-wheel/) without the
# locale build/ was compiled with misses every object (948 s instead of 27 s).
llvm_config.with_system_environment(
    ["HOME", "PYTHONPATH", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"])
# kilnc keeps compiled kernels in ~/.cache/kiln/kernels by default: the
# tests must not fill (or read) the user's cache. Tests of the cache itself
# name a directory of their own (--kernel-cache=%t/...).
config.environment["KILN_KERNEL_CACHE"] = "off"
llvm_config.use_default_substitutions()

tool_dirs = [config.kiln_tools_dir, config.llvm_tools_dir]
# -Dkiln_runtime_bin=DIR: the runtime's tools (kiln-run, kiln-train, ...)
# come from DIR, another build of the runtime: `scripts/test.sh
# --sanitize=address,undefined` runs the emu model tests with the ASan+UBSan
# build's (docs/reliability.md "Sanitizers"); kilnc stays this build's.
# Tests that cannot run that way say `UNSUPPORTED: sanitized-runtime`.
runtime_tools = ["kiln-run", "kiln-train", "kiln-tune-worker", "kiln-powersgd-check"]
runtime_bin = lit_config.params.get("kiln_runtime_bin")
if runtime_bin:
    runtime_bin = os.path.abspath(runtime_bin)
    missing = [t for t in runtime_tools if not os.path.exists(os.path.join(runtime_bin, t))]
    if missing:
        lit_config.fatal(f"kiln_runtime_bin={runtime_bin} lacks {', '.join(missing)}")
    config.available_features.add("sanitized-runtime")
    llvm_config.add_tool_substitutions(runtime_tools, [runtime_bin])
    # The sanitizers' options reach the tools (the first report fails the
    # test), and tests that call a tool by name find this one first.
    llvm_config.with_system_environment(["ASAN_OPTIONS", "UBSAN_OPTIONS"])
    # LeakSanitizer: Open MPI's allocations are suppressed (test/sanitizers/
    # lsan.supp), through an mpirun that turns on the slow unwinder.
    sanitizers = os.path.join(config.kiln_src_root, "test", "sanitizers")
    config.environment["LSAN_OPTIONS"] = \
        f"suppressions={os.path.join(sanitizers, 'lsan.supp')}"
else:
    llvm_config.add_tool_substitutions(runtime_tools, tool_dirs)
llvm_config.add_tool_substitutions(["kiln-opt", "kilnc", "mlir-tblgen"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kiln_tools_dir, append_path=True)
if runtime_bin:  # before this build's tools (each call goes to the front)
    llvm_config.with_environment(
        "PATH", [runtime_bin, os.path.join(sanitizers, "bin")], append_path=True)

# Test models are built with the `onnx` Python package, in the interpreter
# CMake found (lit itself may run under another one).
import subprocess
onnx_dir = subprocess.run(
    [python, "-c", "import onnx, os; print(os.path.dirname(onnx.__file__))"],
    capture_output=True, text=True).stdout.strip()
if subprocess.call([python, "-c", "import onnxruntime"], stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("onnxruntime")
if subprocess.call([python, "-c", "import sklearn"], stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("sklearn")  # test-only (install-deps.sh)
if subprocess.call([python, "-c", "import jax"], stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("jax")  # test-only (install-deps.sh)
if onnx_dir:
    config.available_features.add("onnx")
    # The "light" model zoo shipped in the onnx package.
    config.substitutions.append(
        ("%onnx_light", os.path.join(onnx_dir, "backend", "test", "data", "light")))

# NVRTC compiles the template kernels (kiln-match-contractions); without it
# those regions keep generic kernels and the tests that need it skip.
cuda_lib = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64")
if os.environ.get("KILN_NVRTC_LIBRARY") or any(
        f.startswith("libnvrtc.so") for f in (os.listdir(cuda_lib) if os.path.isdir(cuda_lib) else [])):
    config.available_features.add("nvrtc")

# CUTLASS's kernels, compiled by nvcc at build time from the pinned
# nvidia-cutlass wheel (test/cutlass/CMakeLists.txt), run on the emulator.
config.substitutions.append(
    ("%cutlass_bin", os.path.join(config.kiln_obj_root, "test", "cutlass")))
if getattr(config, "kiln_cutlass_kernels", "OFF") == "ON":
    config.available_features.add("cutlass")

# ptxas validates emitted PTX when the CUDA Toolkit is installed.
ptxas = shutil.which("ptxas") or (
    "/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# Splits `kilnc --emit=ptx` output into one file per kernel module and runs
# ptxas on each.
config.substitutions.append(
    ("%check-ptx", f"{python} {os.path.join(config.kiln_src_root, 'test', 'Pipelines', 'check_ptx.py')}"))

# Open MPI (mpirun and libmpi.so.40, which the runtime dlopens) runs the
# data-parallel training tests (test/Pipelines/Training/data-parallel*).
if shutil.which("mpirun"):
    try:
        import ctypes as _ctypes
        _ctypes.CDLL("libmpi.so.40")
        config.available_features.add("mpi")
    except OSError:
        pass

# NCCL (libnccl.so.2, or KILN_NCCL_LIBRARY, which the runtime dlopens) for
# the NCCL engine's tests; `gpus-2` where the driver sees two GPUs (the
# 2-process NCCL test: NCCL allows one rank per GPU).
try:
    import ctypes as _ctypes
    _ctypes.CDLL(os.environ.get("KILN_NCCL_LIBRARY") or "libnccl.so.2")
    config.available_features.add("nccl")
except OSError:
    pass
try:
    import ctypes as _ctypes
    _cuda = _ctypes.CDLL("libcuda.so.1")
    _count = _ctypes.c_int(0)
    if _cuda.cuInit(0) == 0 and _cuda.cuDeviceGetCount(_ctypes.byref(_count)) == 0 \
            and _count.value >= 2:
        config.available_features.add("gpus-2")
except OSError:
    pass
for _name in ("KILN_NCCL_LIBRARY",):
    if _name in os.environ:
        config.environment[_name] = os.environ[_name]

# A CUDA driver (and so maybe a GPU) is present: tests that expect kiln-run
# to report "no CUDA driver" do not apply.
import ctypes
try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass

# The kiln Python package: its extension built into <build>/python/kiln, and
# what `pip wheel .` needs to build it without a network (build isolation
# off).
import glob
if glob.glob(os.path.join(config.kiln_obj_root, "python", "kiln", "_native*.so")):
    config.available_features.add("python-package")
if subprocess.call([python, "-c", "import nanobind, scikit_build_core, pytest"],
                   stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("python-build")
