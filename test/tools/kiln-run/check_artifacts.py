#!/usr/bin/env python3
"""Checks for artifact-compatibility.test's kept artifacts.

  check_artifacts.py header FILE.kiln MINOR KIND...
      the header's format version is 1.MINOR and the section table holds
      every listed section kind (10 training, 11 tensor-maps:
      docs/artifact-format.md); prints "FILE: format 1.m, sections ...".
  check_artifacts.py gemm A.npy B.npy Y.npy
      Y = relu(A B) with A and B rounded to bf16 (nearest even) and f32
      accumulation: numpy float64 of the rounded operands, by
      scripts/numerics.py's rule at 1e-5 (the f32 sums of 128 terms).
  check_artifacts.py train MODEL.onnx X.npy LABELS.npy LOSS.csv TRAINED.onnx LR
      one SGD step of softmax cross-entropy (mean over the batch) on the
      linear model y = x W + b: the logged loss and the trained W and b
      against numpy float64, each element within 1e-5 relative + 1e-6.
"""
import csv
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402


def header(path, minor, kinds):
    data = open(path, "rb").read()
    assert data[:8] == b"KILN\r\n\x1a\n", f"{path}: not an artifact"
    major, got_minor = struct.unpack_from("<II", data, 8)
    count = struct.unpack_from("<I", data, 20)[0]
    table = struct.unpack_from("<Q", data, 24)[0]
    present = [struct.unpack_from("<I", data, table + 32 * i)[0]
               for i in range(count)]
    missing = [k for k in kinds if k not in present]
    print(f"{os.path.basename(path)}: format {major}.{got_minor}, sections "
          f"{present}" + (f", MISSING {missing}" if missing else ""))
    return 0 if (major, got_minor) == (1, minor) and not missing else 1


def to_bf16(x):
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def gemm(a, b, y):
    want = np.maximum(to_bf16(np.load(a)) @ to_bf16(np.load(b)), 0.0)
    result = numerics.compare(np.load(y), want, 1e-5, "y")
    print(result.line())
    return 0 if result.ok else 1


def train(model_path, x_path, labels_path, loss_csv, trained_path, lr):
    import onnx
    from onnx import numpy_helper
    def weights(path):
        return {t.name: numpy_helper.to_array(t).astype(np.float64)
                for t in onnx.load(path).graph.initializer}
    w0, w1 = weights(model_path), weights(trained_path)
    x = np.load(x_path).astype(np.float64)
    labels = np.load(labels_path)
    logits = x @ w0["W"] + w0["b"]
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    n = len(labels)
    loss = float(-np.log(p[np.arange(n), labels]).mean())
    d = p.copy()
    d[np.arange(n), labels] -= 1
    d /= n
    want = {"W": w0["W"] - lr * x.T @ d, "b": w0["b"] - lr * d.sum(axis=0)}
    rows = list(csv.DictReader(open(loss_csv)))
    tol = numerics.Tolerance.elementwise(1e-5, 1e-6)
    results = [numerics.compare(np.array([float(rows[0]["loss"])]),
                                np.array([loss]), tol, "loss")]
    results += [numerics.compare(w1[k], want[k], tol, k) for k in ("W", "b")]
    for r in results:
        print(r.line())
    return 0 if all(r.ok for r in results) else 1


def float8(artifact, workdir):
    """cast-float8-format-1.6.kiln: y = Cast<FLOAT>(x: FLOAT8E4M3FN[16]),
    z = Cast<FLOAT8E5M2>(f: FLOAT[16]); both against ml_dtypes bit for bit
    (f stays inside E5M2's range, where saturation changes nothing)."""
    import subprocess
    import ml_dtypes
    os.makedirs(workdir, exist_ok=True)
    codes = (np.arange(16, dtype=np.uint32) * 15 + 3).astype(np.uint8)
    f = np.linspace(-300.0, 300.0, 16, dtype=np.float32)
    np.save(os.path.join(workdir, "x.npy"), codes.view(np.dtype("V1")))
    np.save(os.path.join(workdir, "f.npy"), f)
    subprocess.run(["kiln-run", artifact, "--device", "emu",
                    "-i", "x=" + os.path.join(workdir, "x.npy"),
                    "-i", "f=" + os.path.join(workdir, "f.npy"),
                    "-o", os.path.join(workdir, "out")], check=True,
                   stdout=subprocess.DEVNULL)
    y = np.load(os.path.join(workdir, "out", "y.npy"))
    z = np.load(os.path.join(workdir, "out", "z.npy")).view(np.uint8)
    want_y = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    want_z = f.astype(ml_dtypes.float8_e5m2).view(np.uint8)
    ok_y = np.array_equal(y.view(np.uint32), want_y.view(np.uint32))
    ok_z = np.array_equal(z, want_z)
    print(f"y: {'bit-exact' if ok_y else 'MISMATCH'}; "
          f"z: {'bit-exact' if ok_z else 'MISMATCH'}")
    return 0 if ok_y and ok_z else 1


def main():
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "float8":
        return float8(*rest)
    if mode == "header":
        return header(rest[0], int(rest[1]), [int(k) for k in rest[2:]])
    if mode == "gemm":
        return gemm(*rest)
    if mode == "train":
        return train(*rest[:5], float(rest[5]))
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
