"""kiln.compile: ONNX model to Artifact, by running the bundled kilnc.

The compiler runs as a subprocess (as iree.compiler.tools runs iree-compile):
the GIL is free while it works, a crash in it cannot take the interpreter
down, and MLIR/LLVM never share the process with PyTorch's or onnxruntime's
copies of them. docs/python.md has the reasoning.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np

from .errors import CompileError
from .runtime import Artifact, _read_artifact

ModelLike = Union[str, "os.PathLike[str]", bytes, "onnx.ModelProto"]  # noqa: F821
Shapes = Mapping[str, Union[str, Sequence[int]]]

_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "int8")
_LAYOUTS = ("auto", "nchw", "nhwc")


def kilnc_path() -> str:
    """The kilnc executable: $KILN_KILNC, else the one in the package
    (kiln/bin/kilnc, in the wheel), else kilnc on PATH."""
    env = os.environ.get("KILN_KILNC")
    if env:
        return env
    bundled = Path(__file__).resolve().parent / "bin" / "kilnc"
    if bundled.is_file():
        return str(bundled)
    found = shutil.which("kilnc")
    if found:
        return found
    raise CompileError(
        "kilnc not found: not in the package (kiln/bin/kilnc), not on PATH, "
        "and KILN_KILNC is not set", exit_code=1)


def _shape_flag(name: str, dims: Union[str, Sequence[int]]) -> str:
    if isinstance(dims, str):
        text = dims
    else:
        dims = list(dims)
        if any(not isinstance(d, int) or isinstance(d, bool) for d in dims):
            raise CompileError(
                f"shapes['{name}']: {dims!r} is not a sequence of integers")
        text = "x".join(str(d) for d in dims) if dims else "scalar"
    return f"--shape={name}={text}"


def _write_model(model: ModelLike, workdir: str) -> str:
    """A path kilnc can read: the model's own path, or a file in workdir."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, name = bytes(model), "model"
    elif hasattr(model, "SerializeToString") and hasattr(model, "graph"):
        data = model.SerializeToString()
        name = model.graph.name or "model"
    else:
        raise CompileError(
            f"model must be a path, bytes or an onnx.ModelProto, not "
            f"{type(model).__name__}")
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    path = os.path.join(workdir, f"{safe}.onnx")
    with open(path, "wb") as f:
        f.write(data)
    return path


def _dim_flag(name: str, bounds: Any) -> str:
    if isinstance(bounds, str):
        return f"--dim={name}={bounds}"
    bounds = list(bounds)
    if len(bounds) not in (2, 3) or any(
            not isinstance(b, int) or isinstance(b, bool) for b in bounds):
        raise CompileError(f"dims['{name}']: {bounds!r} is not (min, max) or "
                           f"(min, max, opt)")
    text = f"{bounds[0]}..{bounds[1]}"
    return f"--dim={name}={text}" + (f":{bounds[2]}" if len(bounds) == 3 else "")


def compile(model: ModelLike, *, shapes: Optional[Shapes] = None,
            dims: Optional[Mapping[str, Any]] = None,
            sequences: Optional[Mapping[str, int]] = None,
            absent: Sequence[str] = (),
            precision: str = "fp32", layout: str = "auto",
            target: str = "sm_90", strip_weights: bool = False,
            io_precision: Optional[str] = None,
            calibration: Any = None,
            calibration_method: str = "minmax",
            calibration_cache: Optional[str] = None,
            extra_args: Sequence[str] = (),
            timeout: Optional[float] = None) -> Artifact:
    """Compiles an ONNX model into an Artifact (kilnc MODEL -o X.kiln ...).

    model: a path to an .onnx file, its bytes, or an onnx.ModelProto.
    shapes: fixes inputs' unknown dimensions, {name: (1, 3, 224, 224)} or
      {name: "1x3x224x224"} (kilnc --shape).
    dims: ranges of symbolic dimensions, {name: (min, max)} or
      {name: (min, max, opt)} or {name: "1..64"} (kilnc --dim). The artifact
      runs any size in the range where the dim is separable
      (Artifact.stats["symbolic_dims"]).
    sequences: lengths of sequence inputs, {name: N} (kilnc --sequence): the
      session then takes that input as a list of N arrays.
    absent: optional inputs compiled absent (kilnc --absent); the others are
      compiled present.
    precision, layout, target, strip_weights, io_precision: kilnc's
      --precision, --layout, --target, --strip-weights, --io-precision.
    calibration: with precision="int8", the calibration data: one array
      (a model with one input) or {input name: array}, samples along the
      first dim (kilnc --calibrate). calibration_method: "minmax",
      "percentile:P" or "entropy" (--calibration); calibration_cache: a
      JSON file read when it exists, written otherwise
      (--calibration-cache). docs/architecture.md "Post-training
      quantization".
    extra_args: more kilnc flags, passed as they are.
    Raises CompileError with kilnc's one-line message.
    """
    if precision not in _PRECISIONS:
        raise CompileError(f"precision '{precision}' is not one of "
                           f"{', '.join(_PRECISIONS)}")
    if layout not in _LAYOUTS:
        raise CompileError(
            f"layout '{layout}' is not one of {', '.join(_LAYOUTS)}")
    with tempfile.TemporaryDirectory(prefix="kiln-compile-") as workdir:
        source = _write_model(model, workdir)
        output = os.path.join(workdir, "model.kiln")
        command = [kilnc_path(), source, "-o", output, f"--target={target}",
                   f"--precision={precision}", f"--layout={layout}"]
        for name, shape in (shapes or {}).items():
            command.append(_shape_flag(name, shape))
        for name, bounds in (dims or {}).items():
            command.append(_dim_flag(name, bounds))
        for name, length in (sequences or {}).items():
            command.append(f"--sequence={name}={length}")
        for name in absent:
            command.append(f"--absent={name}")
        if strip_weights:
            command.append("--strip-weights")
        if io_precision:
            command.append(f"--io-precision={io_precision}")
        if calibration is not None:
            named = (calibration.items() if isinstance(calibration, Mapping)
                     else [(None, calibration)])
            for i, (name, data) in enumerate(named):
                path = os.path.join(workdir, f"calibration-{i}.npy")
                np.save(path, np.ascontiguousarray(data))
                command.append(f"--calibrate={name}={path}" if name
                               else f"--calibrate={path}")
        if calibration_method != "minmax":
            command.append(f"--calibration={calibration_method}")
        if calibration_cache:
            command.append(f"--calibration-cache={os.fspath(calibration_cache)}")
        command.extend(extra_args)
        # subprocess waits without the GIL.
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CompileError(f"{source}: kilnc ran past the {timeout} s "
                               f"timeout") from None
        if done.returncode != 0:
            raise CompileError(_error_line(done.stderr, workdir, done.returncode),
                               exit_code=done.returncode)
        # The artifact is mapped; the mapping outlives the deleted file.
        return _read_artifact(output)


def _error_line(stderr: str, workdir: str, returncode: int) -> str:
    """kilnc's "kilnc: error: ..." line without the prefix, the temporary
    folder left out of paths."""
    lines = [l for l in stderr.splitlines() if l.strip()]
    message = next((l.split("error: ", 1)[1] for l in lines
                    if l.startswith("kilnc: error: ")), None)
    if message is None:
        tail = lines[-1] if lines else "no message"
        what = (f"killed by signal {-returncode}" if returncode < 0
                else f"exit status {returncode}")
        message = f"kilnc failed ({what}): {tail}"
    return message.replace(workdir + os.sep, "")
