"""Artifacts and sessions: the runtime (runtime/include/kiln/runtime) from
Python, through the kiln._native extension."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _native
from .errors import RuntimeError


class TensorSpec(NamedTuple):
    """A graph input or output: name, dtype ("f32", "bf16", "i64", ...) and
    static shape."""
    name: str
    dtype: str
    shape: Tuple[int, ...]


class Signature(NamedTuple):
    inputs: Tuple[TensorSpec, ...]
    outputs: Tuple[TensorSpec, ...]


class GroupSpec(NamedTuple):
    """A sequence or optional graph input or output (kilnc --sequence,
    --absent): kind "sequence", "optional" or "optional-sequence"; whether
    it was compiled present; its tensors are the signature's
    [first, first + count)."""
    name: str
    kind: str
    present: bool
    first: int
    count: int


def _native_call(function, *args):
    try:
        return function(*args)
    except _native.Error as err:
        raise RuntimeError(str(err)) from None


class Artifact:
    """A compiled model (.kiln): what kiln.compile returns and kiln.load
    reads. Sessions made from one Artifact share its weights on the host."""

    def __init__(self, native: "_native.Artifact"):
        self._native = native

    @property
    def signature(self) -> Signature:
        return Signature(
            tuple(TensorSpec(*t) for t in self._native.inputs),
            tuple(TensorSpec(*t) for t in self._native.outputs))

    @property
    def groups(self) -> Tuple[Tuple[GroupSpec, ...], Tuple[GroupSpec, ...]]:
        """(input groups, output groups): the model's sequence and optional
        inputs and outputs. Session.run takes a sequence as a list of arrays
        and returns one as a list; an absent optional output is None."""
        return (tuple(GroupSpec(*g) for g in self._native.input_groups),
                tuple(GroupSpec(*g) for g in self._native.output_groups))

    @property
    def stats(self) -> Dict[str, Any]:
        """kernels, launches, arena_bytes, weights, weight_bytes,
        stripped_weight_bytes, target, format_version, compiler_version,
        compiler_options."""
        return dict(self._native.stats)

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the artifact (a temporary file renamed into place, so a
        failure never leaves a partial file)."""
        _native_call(self._native.save, os.fspath(path))

    def to_bytes(self) -> bytes:
        return _native_call(self._native.to_bytes)

    @classmethod
    def from_bytes(cls, image: bytes, name: str = "<bytes>") -> "Artifact":
        return cls(_native_call(_native.Artifact.parse, bytes(image), name))

    def __repr__(self) -> str:
        s = self.stats
        return (f"<kiln.Artifact {s['target']}: {s['kernels']} kernels, "
                f"arena {s['arena_bytes']} B, weights {s['weight_bytes']} B>")


def _read_artifact(path: str) -> Artifact:
    return Artifact(_native_call(_native.Artifact.read, path))


def load(path: Union[str, "os.PathLike[str]"]) -> Artifact:
    """Reads a .kiln file, checking magic, version, checksums and bounds;
    raises kiln.RuntimeError naming the file and what is wrong."""
    return _read_artifact(os.fspath(path))


def _as_tensor(name: str, value: Any) -> Any:
    """What the extension imports through DLPack: the object itself when it
    speaks DLPack (PyTorch, CuPy, JAX, numpy), a contiguous numpy array
    otherwise."""
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    if hasattr(value, "__dlpack__"):
        return value
    try:
        return np.ascontiguousarray(np.asarray(value))
    except Exception as err:  # noqa: BLE001 - any failure means "not a tensor"
        raise RuntimeError(f"input '{name}': {type(value).__name__} is not "
                           f"an array ({err})") from None


@dataclass
class BenchResult:
    """Session.bench: per-run times of the whole launch list (input upload
    excluded), and per kernel the time of its launches in each run."""
    run_ms: list
    kernel_ms: Dict[str, list] = field(default_factory=dict)
    energy_joules: Optional[float] = None

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.run_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.run_ms)

    @property
    def min_ms(self) -> float:
        return min(self.run_ms)

    @property
    def throughput(self) -> float:
        """Runs (inferences of the compiled batch) per second, from the
        median."""
        return 1000.0 / self.median_ms if self.median_ms > 0 else float("inf")


class Session:
    """One model instance on a device: "cuda" (the first GPU), "cuda:N", or
    "emu" (Kiln's PTX emulator, on the CPU).

    Not meant for concurrent calls: calls on one Session from several threads
    run one at a time; use a Session per thread to run in parallel.
    weights: {initializer name: array} for an artifact compiled with
    strip_weights=True (kiln-run --weights).
    """

    def __init__(self, artifact: Union[Artifact, str, "os.PathLike[str]"],
                 device: str = "cuda", *, use_graph: bool = False,
                 weights: Optional[Mapping[str, Any]] = None):
        if not isinstance(artifact, Artifact):
            artifact = load(artifact)
        self.artifact = artifact
        self.device = device
        host_weights = {k: np.ascontiguousarray(np.asarray(v))
                        for k, v in (weights or {}).items()}
        self._native = _native_call(_native.Session, artifact._native, device,
                                    use_graph, host_weights)
        self._bf16 = {t.name for t in artifact.signature.outputs
                      if t.dtype == "bf16"}

    @property
    def device_name(self) -> str:
        return self._native.device_name

    def _tensors(self, inputs: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
        sequences = {g.name for g in self.artifact.groups[0]
                     if g.kind.endswith("sequence")}
        tensors = {}
        for name, value in (inputs or {}).items():
            if name in sequences and isinstance(value, (list, tuple)):
                _native_call(self.artifact._native.check_sequence_input,
                             name, len(value))
                for i, element in enumerate(value):
                    tensors[f"{name}[{i}]"] = _as_tensor(f"{name}[{i}]",
                                                         element)
            else:
                tensors[name] = _as_tensor(name, value)
        return tensors

    def _grouped(self, result: Dict[str, Any]) -> Dict[str, Any]:
        """Sequence outputs as lists, absent optionals as None."""
        outputs = self.artifact.signature.outputs
        for group in self.artifact.groups[1]:
            tensors = [result.pop(outputs[group.first + i].name)
                       for i in range(group.count)]
            if group.kind.endswith("sequence") and group.present:
                result[group.name] = tensors
            else:
                result[group.name] = tensors[0] if tensors else None
        return result

    def run(self, inputs: Mapping[str, Any], *,
            outputs: str = "auto") -> Dict[str, Any]:
        """Runs once: {input name: array} -> {output name: array}.

        Inputs are any DLPack tensors (numpy, PyTorch, CuPy, ...) or array
        likes. On cuda a CUDA tensor is copied on the GPU, never through the
        host. outputs: "host" (numpy arrays), "device" (DLPack tensors in GPU
        memory: torch.from_dlpack / cupy.from_dlpack take them without a
        copy), or "auto": device when an input was a CUDA tensor, else host.
        Host bf16 outputs come back as float32 (exact; numpy has no bf16).
        Host inputs left out keep the value of the previous run; CUDA
        inputs must be given on every run (the session keeps only their
        address).
        """
        result = _native_call(self._native.run, self._tensors(inputs), outputs)
        for name in self._bf16:
            value = result[name]
            if isinstance(value, np.ndarray):
                result[name] = (value.astype(np.uint32) << 16).view(np.float32)
        return self._grouped(result)

    def bench(self, n: int = 100, inputs: Optional[Mapping[str, Any]] = None,
              *, warmup: int = 3) -> BenchResult:
        """`warmup` untimed runs, then `n` timed runs (and `n` timed kernel
        by kernel). Uses `inputs` if given, else those of the last run."""
        if n < 1:
            raise RuntimeError("bench expects at least 1 run")
        raw = _native_call(self._native.bench, n, warmup, self._tensors(inputs))
        return BenchResult(list(raw["run_ms"]),
                           {k: list(v) for k, v in raw["kernel_ms"].items()},
                           raw.get("energy_joules"))

    def __repr__(self) -> str:
        return f"<kiln.Session on {self.device} ({self.device_name})>"
