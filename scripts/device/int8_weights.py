#!/usr/bin/env python3
"""The int8 weights of a `kilnc --precision=int8 --strip-weights` artifact.

Usage: int8_weights.py derive MANIFEST_VARIANT.json WEIGHTS_DIR
       int8_weights.py list ARTIFACT.kiln

Kiln's post-training quantization (lib/Compiler/QdqRewrite.cpp,
appendNode; docs/architecture.md "Post-training quantization") replaces
each quantized Conv/MatMul/Gemm weight W by a NEW initializer named
W_quantized (fresh(): W_quantized_N should that name be taken): int8,
symmetric, one scale per output channel (axis 0 for Conv, and for Gemm
with transB; axis 1 for MatMul and Gemm without transB). An artifact
compiled with --strip-weights lists those new initializers, not W, so the
GPU check cannot bind the regenerated fp32 weights as they are: it derives
the int8 ones from them with the same rule, all in float32:

  s_c = max |W| over channel c / 127  (s_c = 1 where that max is 0)
  Q   = clamp(nearbyint(W / s_c), -127, 127) as int8

numpy's float32 division is C++'s float division (IEEE, correctly
rounded), and np.rint rounds half to even as std::nearbyint does in the
default rounding mode. The per-channel scales and the int32 biases (in
units of s_x * s_c) are compile-time constants of the artifact, not
weights: they follow from the same W, which the check verifies by its
SHA-256 before deriving anything.

prepare.py checks the rule bit for bit against the QDQ model kilnc wrote
(--save-quantized) and records, per derived weight, its source, axis and
the SHA-256 of the result (device_models.digest_array); device_check.py
derives them on the device (`derive`) and refuses a digest that differs.
`list` prints the initializers the artifact's weights are rebuilt from
("initializer DTYPE SHAPE NAME", its weight origins: docs/artifact-format.md),
which prepare.py compares with what the check will bind.
"""
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import device_models  # noqa: E402

LEVELS = np.float32(127.0)
SUFFIX = re.compile(r"^(?P<source>.+)_quantized(?:_\d+)?$")
ORIGIN = re.compile(rb"initializer ([a-z0-9]+) ([0-9x]*) ([^\n\x00]+)")  # one line


def safe(name):
    """kiln-run's file name for an initializer (export_initializers.py)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def quantize(w, axis):
    """Kiln's int8 weight rule (QdqRewrite.cpp appendNode): int8 values."""
    w = np.asarray(w, dtype=np.float32)
    channels = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    amax = np.max(np.abs(channels), axis=1) if channels.shape[1] else \
        np.zeros(w.shape[axis], np.float32)
    scale = np.where(amax > 0, amax / LEVELS, np.float32(1.0)).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.rint(w / scale.reshape(shape))
    assert q.dtype == np.float32
    return np.clip(q, -127.0, 127.0).astype(np.int8)


def from_qdq(qdq_path, source_names):
    """The int8 weights of kilnc's --save-quantized model: [(name, source,
    axis, int8 array)], the source found by the fresh() naming rule."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(qdq_path)
    inits = {t.name: t for t in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear" or node.input[0] not in inits:
            continue
        t = inits[node.input[0]]
        if t.data_type != onnx.TensorProto.INT8 or len(t.dims) < 2:
            continue  # activation zero points, int32 biases
        m = SUFFIX.match(t.name)
        if not m or m.group("source") not in source_names:
            raise ValueError(f"int8 weight '{t.name}' names no initializer of the "
                             "fp32 model (W_quantized[_N])")
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        found.append((t.name, m.group("source"), int(axis) % len(t.dims),
                      numpy_helper.to_array(t)))
    return found


def artifact_initializers(path):
    """{name: (dtype, shape)} of the initializers an artifact's weights are
    rebuilt from (the first line of each weight origin)."""
    with open(path, "rb") as f:
        data = f.read()
    found = {}
    for m in ORIGIN.finditer(data):
        # Each origin is a string with a 32-bit little-endian length before
        # it; its first line names the initializer.
        start = m.start()
        size = int.from_bytes(data[start - 4:start], "little") if start >= 4 else 0
        if not 0 < size <= len(data) - start:
            continue
        first = data[start:start + size].split(b"\n", 1)[0].decode()
        words = first.split(" ", 3)
        if len(words) == 4 and ORIGIN.fullmatch(first.encode()):
            found[words[3]] = (words[1], words[2])
    return found


def derive(derived, weights_dir, exported=()):
    """Writes each derived weight beside the exported fp32 initializers
    (names `exported`); returns a list of problems (empty: all digests as
    prepared)."""
    problems = []
    taken = {safe(n) for n in exported}
    for d in derived:
        src = os.path.join(weights_dir, safe(d["source"]) + ".npy")
        if not os.path.exists(src):
            problems.append(f"{d['name']}: source {d['source']} not exported")
            continue
        q = quantize(np.load(src), d["axis"])
        got = device_models.digest_array(q)
        if got != d["sha256"]:
            problems.append(f"{d['name']}: derived int8 weight differs from the compiled one "
                            f"(sha256 {got[:12]}, want {d['sha256'][:12]})")
            continue
        if safe(d["name"]) in taken:
            problems.append(f"{d['name']}: an fp32 initializer has its file name "
                            f"{safe(d['name'])}.npy")
            continue
        np.save(os.path.join(weights_dir, safe(d["name"]) + ".npy"), q)
    return problems


def main():
    argv = sys.argv[1:]
    if len(argv) == 3 and argv[0] == "derive":
        with open(argv[1]) as f:
            variant = json.load(f)
        problems = derive(variant["derived_weights"], argv[2])
        for p in problems:
            print(p)
        print(f"derived {len(variant['derived_weights']) - len(problems)} of "
              f"{len(variant['derived_weights'])} int8 weights")
        sys.exit(1 if problems else 0)
    if len(argv) == 2 and argv[0] == "list":
        for name, (dtype, shape) in artifact_initializers(argv[1]).items():
            print(f"initializer {dtype} {shape} {name}")
        return
    sys.exit("\n".join(__doc__.strip().splitlines()[2:4]))


if __name__ == "__main__":
    main()
