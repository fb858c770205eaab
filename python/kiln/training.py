"""Training from Python: kiln.compile_training (kilnc --train) and
kiln.Trainer, which runs the loop kiln-train runs.

    artifact = kiln.compile_training("mlp.onnx", labels="labels:32:int64",
                                     loss="cross_entropy",
                                     optimizer="adamw", lr=1e-3)
    trainer = kiln.Trainer(artifact, device="emu")
    history = trainer.fit(x, y, epochs=5, val_data=xv, val_labels=yv)
    trainer.export("trained.onnx")

Trainer.fit is kiln-train's loop over the runtime's own pieces
(kiln/runtime/Trainer.h): the same dataset checks and messages, the same
sample order for a seed, the same checkpoint metadata and loss-history CSV.
A checkpoint written by one resumes in the other, and the same seed gives
the same weights.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Union)

import numpy as np

from . import _native
from .compiler import ModelLike, Shapes, compile
from .errors import CompileError, RuntimeError
from .runtime import Artifact, _native_call, load

_LOSSES = ("cross_entropy", "nll", "mse", "l1")
_OPTIMIZERS = ("sgd", "momentum", "nesterov", "adam", "adamw")


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CompileError(f"optimizer option {value!r} is not a number or a "
                           f"name")
    return repr(value) if isinstance(value, float) else str(value)


def compile_training(model: ModelLike, *, labels: Optional[str] = None,
                     loss: Optional[str] = None,
                     loss_on: Optional[str] = None,
                     loss_output: Optional[str] = None,
                     optimizer: str = "sgd",
                     grad_clip: float = 0.0,
                     freeze: Optional[str] = None,
                     shapes: Optional[Shapes] = None,
                     dims: Optional[Mapping[str, Any]] = None,
                     precision: str = "fp32",
                     target: str = "sm_90",
                     extra_args: Sequence[str] = (),
                     timeout: Optional[float] = None,
                     **optimizer_options: Any) -> Artifact:
    """Compiles a training artifact (kilnc --train): entry points train_step
    (forward, loss, backward, optimizer update) and eval, with the weights
    and optimizer state as persistent state.

    labels: the labels input, "NAME:SHAPE:DTYPE" (kilnc --labels), e.g.
      "labels:32:int64" (class indices) or "y:32x10:float32".
    loss: cross_entropy, nll, mse or l1 on `loss_on` (default: the only
      output); or loss_output: an output that already is the scalar loss.
    optimizer: sgd, momentum, nesterov, adam or adamw; its hyper-parameters
      and schedule as keywords, e.g. lr=1e-3, weight_decay=0.01,
      schedule="cosine", warmup_steps=100, total_steps=1000 (kilnc
      --optimizer=NAME:K=V,...).
    grad_clip: clip the global gradient norm (0: off). freeze: initializers
      whose name this regular expression matches in full do not train.
    shapes, dims, precision, target, extra_args, timeout: as for
    kiln.compile. With dims={"N": (1, 32)}, shapes={"x": "Nx..."} and
    labels "labels:N:int64", the batch is a run-time size: Trainer.fit runs
    an epoch's left-over samples as one smaller last batch (docs/runtime.md
    "Training with a run-time batch").
    Raises CompileError with kilnc's one-line message.
    """
    if (loss is None) == (loss_output is None):
        raise CompileError("compile_training needs exactly one of loss= and "
                           "loss_output=")
    if loss is not None and loss not in _LOSSES:
        raise CompileError(f"loss '{loss}' is not one of "
                           f"{', '.join(_LOSSES)}")
    if optimizer not in _OPTIMIZERS:
        raise CompileError(f"optimizer '{optimizer}' is not one of "
                           f"{', '.join(_OPTIMIZERS)}")
    spec = optimizer
    if optimizer_options:
        spec += ":" + ",".join(f"{key}={_number(value)}"
                               for key, value in optimizer_options.items())
    args = ["--train", f"--optimizer={spec}"]
    if loss is not None:
        args.append(f"--loss={loss}")
        if loss_on:
            args.append(f"--loss-on={loss_on}")
        if labels:
            args.append(f"--labels={labels}")
    else:
        args.append(f"--loss-output={loss_output}")
    if grad_clip:
        args.append(f"--grad-clip={grad_clip!r}")
    if freeze:
        args.append(f"--freeze={freeze}")
    return compile(model, shapes=shapes, dims=dims, precision=precision,
                   target=target, extra_args=[*args, *extra_args],
                   timeout=timeout)


@dataclass
class History:
    """What Trainer.fit did: the loss of every step, and per epoch the mean
    loss and the validation metric ("val_accuracy" for integer labels and
    a [B, C] output, else "val_mse"). `csv` is the loss history in
    kiln-train's format (scripts/plot-loss.py draws it)."""
    step_loss: List[float] = field(default_factory=list)
    epoch_loss: List[float] = field(default_factory=list)
    metric: Optional[str] = None
    metric_values: List[float] = field(default_factory=list)
    csv: str = _native.HISTORY_HEADER
    steps_per_second: float = 0.0
    #: With fp16 loss scaling: the scale after each step, and the steps
    #: skipped for an inf/NaN gradient.
    loss_scale: List[float] = field(default_factory=list)
    skipped_steps: int = 0


def _host(name: str, value: Any) -> np.ndarray:
    try:
        return np.ascontiguousarray(np.asarray(value))
    except Exception as err:  # noqa: BLE001 - any failure means "not an array"
        raise RuntimeError(f"{name}: {type(value).__name__} is not an array "
                           f"({err})") from None


class Trainer:
    """A training session: the artifact's weights and optimizer state on a
    device ("cuda", "cuda:N" or "emu"), trained by `step` (one batch you
    give) or `fit` (kiln-train's loop over a dataset).

    Calls on one Trainer from several threads run one at a time.

    Under `mpirun -np N python train.py` with a `kilnc --train
    --data-parallel` artifact, each process is one rank (read from MPI's
    environment): `step` averages the gradients (and the loss) over the
    ranks, `fit` gives each rank its shard of every global batch of N x
    batch samples, and only rank 0 validates, prints and writes
    checkpoints. "cuda" means GPU `local rank` there. A collective that
    waits longer than `collective_timeout` seconds ends the process
    (docs/runtime.md "Data-parallel training"). `collective_engine` is
    kiln-train's --collective-engine: "auto" (NCCL on cuda when
    libnccl.so.2 loads, else MPI), "mpi" or "nccl" (never run on a GPU
    yet)."""

    def __init__(self, artifact: Union[Artifact, str, "os.PathLike[str]"],
                 device: str = "cuda", collective_timeout: float = 300.0,
                 collective_engine: str = "auto"):
        name = "<artifact>"
        if not isinstance(artifact, Artifact):
            name = os.fspath(artifact)
            artifact = load(artifact)
        self.artifact = artifact
        self.device = device
        self._native = _native_call(_native.Trainer, artifact._native, device,
                                    name, collective_timeout,
                                    collective_engine)

    @property
    def rank(self) -> int:
        """This process's rank in a data-parallel job (0 alone)."""
        return self._native.rank

    @property
    def world_size(self) -> int:
        """The number of ranks (1 without mpirun)."""
        return self._native.world_size

    @property
    def device_name(self) -> str:
        return self._native.device_name

    @property
    def state_names(self) -> List[str]:
        """The persistent state: "params", the optimizer's ("opt.m", ...),
        "opt.step"."""
        return list(self._native.state_names)

    @property
    def step_count(self) -> int:
        """Optimizer steps taken (state "opt.step")."""
        return _native_call(self._native.step_count)

    def step(self, batch: Mapping[str, Any]) -> float:
        """One train_step on `batch` ({input name: array}, the labels
        included); returns its loss. Inputs not given keep their last value."""
        _native_call(self._native.bind,
                     {k: _host(f"input '{k}'", v) for k, v in batch.items()})
        return _native_call(self._native.step)

    def evaluate(self, inputs: Optional[Mapping[str, Any]] = None
                 ) -> Dict[str, np.ndarray]:
        """Runs eval (inference on the current weights) on `inputs`."""
        if inputs:
            _native_call(self._native.bind, {k: _host(f"input '{k}'", v)
                                             for k, v in inputs.items()})
        return _native_call(self._native.evaluate)

    def fit(self, data: Any, labels: Any, *, epochs: int = 1, seed: int = 0,
            val_data: Any = None, val_labels: Any = None,
            checkpoint_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
            resume: bool = False, verbose: bool = False,
            callback: Optional[Callable[[int, int, float], None]] = None
            ) -> History:
        """kiln-train's loop: `epochs` epochs of floor(N / batch) batches in
        the order kiln-train draws for `seed`, validation after each epoch,
        and with `checkpoint_dir` a checkpoint (DIR/checkpoint.safetensors)
        after each; `resume` continues from it (kiln-train --resume reads
        the same files). `callback(epoch, step, loss)` runs after every
        step; `verbose` prints kiln-train's per-epoch lines."""
        if epochs < 0 or seed < 0:
            raise RuntimeError("epochs and seed must be non-negative")
        if (val_data is None) != (val_labels is None):
            raise RuntimeError("val_data and val_labels go together")
        if resume and checkpoint_dir is None:
            raise RuntimeError("resume needs checkpoint_dir")
        data_name, labels_name, batch, _, min_batch = _native_call(
            self._native.batch_signature)
        count = _native_call(self._native.set_dataset, "train",
                             _host("data", data), _host("labels", labels),
                             "data", "labels")
        if val_data is not None:
            _native_call(self._native.set_dataset, "val",
                         _host("val_data", val_data),
                         _host("val_labels", val_labels), "val_data",
                         "val_labels")
        checkpoint = None
        leader = self.rank == 0
        verbose = verbose and leader
        if checkpoint_dir is not None:
            os.makedirs(checkpoint_dir, exist_ok=True)
            checkpoint = os.path.join(os.fspath(checkpoint_dir),
                                      "checkpoint.safetensors")
        history = History()
        scales_loss = self._native.scales_loss
        if scales_loss:
            history.csv = _HISTORY_HEADER_LOSS_SCALED
        first_epoch = 0
        if resume:
            if not os.path.exists(checkpoint):
                raise RuntimeError(f"{checkpoint}: no checkpoint to resume")
            meta = _native_call(self._native.load_checkpoint, checkpoint)
            if (_native.META_EPOCHS_DONE not in meta
                    or _native.META_SEED not in meta):
                raise RuntimeError(f"{checkpoint}: not written by kiln-train "
                                   f"or kiln.Trainer (no epoch)")
            if meta[_native.META_SEED] != str(seed):
                raise RuntimeError(
                    f"{checkpoint}: written with seed {meta[_native.META_SEED]}"
                    f", this run has seed {seed}")
            first_epoch = int(meta[_native.META_EPOCHS_DONE])
            history.csv = meta.get(_native.META_HISTORY, history.csv)
        # A global batch is one batch from every rank; rank r takes
        # samples [r*batch, (r+1)*batch) of it (kiln-train's sharding).
        global_batch = batch * self.world_size
        # kilnc --train --dim: the samples left over are a smaller last
        # global batch when every rank gets at least the symbol's minimum
        # of them (rank r: left_over // N, one more for r < left_over % N;
        # each rank's gradients and loss weighted by its share).
        left_over = count % global_batch
        last_batch = (left_over if min_batch < batch
                      and left_over // self.world_size >= min_batch else 0)
        if count < global_batch and not last_batch:
            raise RuntimeError(f"data: {count} samples, fewer than one "
                               f"global batch of {global_batch} "
                               f"({self.world_size} ranks x {batch})")
        steps = count // global_batch + (1 if last_batch else 0)
        step_seconds, steps_run = 0.0, 0
        for epoch in range(first_epoch, epochs):
            order = _native.epoch_order(count, seed, epoch)
            losses = []
            epoch_skipped = 0
            for s in range(steps):
                start = time.perf_counter()
                first = s * global_batch + self.rank * batch
                size, share = batch, 0
                if last_batch and s + 1 == steps:
                    offset, size = _native.last_share(
                        last_batch, self.rank, self.world_size)
                    first = s * global_batch + offset
                    share = last_batch
                loss = _native_call(self._native.step_on,
                                    order[first:first + size], share)
                step_seconds += time.perf_counter() - start
                steps_run += 1
                losses.append(loss)
                history.step_loss.append(loss)
                history.csv += (f"{self.step_count},{epoch + 1},"
                                f"{_g9(loss)},,")
                if scales_loss:
                    scale, skipped = _native_call(self._native.loss_scaling)
                    history.loss_scale.append(scale)
                    history.skipped_steps += int(skipped)
                    epoch_skipped += int(skipped)
                    history.csv += f",{_g9(scale)},{int(skipped)}"
                history.csv += "\n"
                if callback is not None:
                    callback(epoch, s, loss)
            mean = math.fsum(losses) / max(len(losses), 1)
            history.epoch_loss.append(mean)
            line = f"epoch {epoch + 1}/{epochs}: mean loss {mean:.6f}"
            if scales_loss:
                line += (f", loss scale {history.loss_scale[-1]:g}, "
                         f"skipped steps {epoch_skipped}")
            if val_data is not None and leader:
                name, value = _native_call(self._native.validate)
                history.metric = name
                history.metric_values.append(value)
                history.csv += f",{epoch + 1},,{name},{_g9(value)}\n"
                line += f", {name} {value:.6f}"
            if verbose:
                print(line, file=sys.stderr)
            # ZeRO (kilnc --shard-optimizer): every rank gathers the
            # optimizer state, rank 0 writes it.
            if checkpoint is not None and (
                    leader or self._native.shards_optimizer):
                _native_call(self._native.save_checkpoint, checkpoint, {
                    _native.META_EPOCHS_DONE: str(epoch + 1),
                    _native.META_SEED: str(seed),
                    _native.META_HISTORY: history.csv})
        if steps_run and step_seconds > 0:
            history.steps_per_second = steps_run / step_seconds
        return history

    def weights(self) -> Dict[str, np.ndarray]:
        """Each trained weight by its ONNX initializer name."""
        return _native_call(self._native.weights)

    def state(self, name: str) -> np.ndarray:
        return _native_call(self._native.state, name)

    def set_state(self, name: str, value: Any) -> None:
        _native_call(self._native.set_state, name, _host(f"state '{name}'",
                                                         value))

    def save_checkpoint(self, path: Union[str, "os.PathLike[str]"],
                        metadata: Optional[Mapping[str, str]] = None) -> None:
        """Every state tensor as safetensors (a temporary file, fsynced and
        renamed: a failure never leaves a partial file)."""
        _native_call(self._native.save_checkpoint, os.fspath(path),
                     dict(metadata or {}))

    def load_checkpoint(self, path: Union[str, "os.PathLike[str]"]
                        ) -> Dict[str, str]:
        """Restores the state from a checkpoint of this artifact (checked
        before any state changes); returns its metadata."""
        return dict(_native_call(self._native.load_checkpoint,
                                 os.fspath(path)))

    def export(self, path: Union[str, "os.PathLike[str]"],
               onnx_model: Optional[Union[str, "os.PathLike[str]"]] = None
               ) -> None:
        """Writes the ONNX model with the trained weights (kiln-train
        --export). onnx_model: the model the artifact was compiled from
        (default: the .onnx file in its recorded compiler options, which a
        model given to compile_training as bytes does not have)."""
        model = os.fspath(onnx_model) if onnx_model else self._onnx_model()
        _native_call(self._native.export_onnx, model, os.fspath(path))

    def _onnx_model(self) -> str:
        options = self.artifact.stats["compiler_options"].split(" ")
        for word in options:
            if word.endswith(".onnx") and not word.startswith("-") \
                    and os.path.exists(word):
                return word
        raise RuntimeError("the artifact does not name an ONNX model that "
                           "exists here: give onnx_model=")

    def __repr__(self) -> str:
        return f"<kiln.Trainer on {self.device} ({self.device_name})>"


# kiln-train's history header for an artifact with loss scaling.
_HISTORY_HEADER_LOSS_SCALED = "step,epoch,loss,metric,value,loss_scale,skipped\n"


def _g9(value: float) -> str:
    """C's %.9g, as kiln-train writes its CSV."""
    return f"{value:.9g}"
