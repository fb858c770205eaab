"""Kiln: compile ONNX models for NVIDIA GPUs and run them (on a GPU, or on
the CPU through Kiln's PTX emulator).

    import kiln, numpy as np
    artifact = kiln.compile("model.onnx", shapes={"x": (1, 3, 224, 224)})
    session = kiln.Session(artifact, device="emu")
    outputs = session.run({"x": np.zeros((1, 3, 224, 224), np.float32)})

    trainer = kiln.Trainer(kiln.compile_training("mlp.onnx", loss="mse",
                                                 labels="y:32x10:float32"),
                           device="emu")
    history = trainer.fit(x, y, epochs=3)

docs/python.md has the whole API.
"""

from .compiler import compile, kilnc_path
from .errors import CompileError, Error, RuntimeError
from .runtime import (Artifact, BenchResult, GroupSpec, Session, Signature,
                      TensorSpec, load)
from .training import History, Trainer, compile_training

__version__ = "0.1.0"

__all__ = [
    "Artifact", "BenchResult", "CompileError", "Error", "GroupSpec", "History",
    "RuntimeError", "Session", "Signature", "TensorSpec", "Trainer",
    "compile", "compile_training", "kilnc_path", "load",
]
