#!/usr/bin/env python3
"""Shape inputs taken at run time (issue 24; docs/runtime.md "Shape inputs
at run time"): small ONNX models whose shape-deciding input (ReduceSum's
axes, Reshape's shape, Tile's repeats) is a graph input, compiled by kilnc
without baking it and run by kiln-run with each value in turn. Accepted
values must match numpy element by element (exactly for data movement; the
float32 sums within 1e-6 relative, a few roundings of 4 terms); refused ones
must exit 1 with the guard's message, printed here for FileCheck. Clip's
bounds and Trilu's k are ordinary run-time data: any value, against numpy.

usage: shape_inputs.py WORKDIR --kilnc KILNC --kiln-run KILN_RUN
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

F, I = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, opset=18):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
        [helper.make_tensor_value_info(*o) for o in outputs])
    return helper.make_model(graph,
                             opset_imports=[helper.make_opsetid("", opset)])


def cases():
    """(name, model, {input: array} per run, reference(inputs) -> output)."""
    rng = np.random.default_rng(7)
    data = rng.standard_normal((3, 2, 2)).astype(np.float32)
    yield ("reduce-sum", model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="reduce")],
        [("x", F, [3, 2, 2]), ("axes", I, [1])], [("y", F, [3, 1, 2])]),
        [{"x": data, "axes": np.array([a])} for a in (1, -2, 0)],
        lambda v: v["x"].sum(axis=tuple(v["axes"]), keepdims=True))
    # Without keepdims, 3x2x2 to 3x2 is axis 1 or axis 2: both are built and
    # the input picks one on the device.
    yield ("reduce-sum-drop", model(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="reduce",
                          keepdims=0)],
        [("x", F, [3, 2, 2]), ("axes", I, [1])], [("y", F, [3, 2])]),
        [{"x": data, "axes": np.array([a])} for a in (1, 2, -1, 0)],
        lambda v: v["x"].sum(axis=tuple(v["axes"])))
    cs = rng.standard_normal((2, 3)).astype(np.float32)
    yield ("cumsum", model(
        [helper.make_node("CumSum", ["x", "axis"], ["y"], name="cumsum")],
        [("x", F, [2, 3]), ("axis", I, [])], [("y", F, [2, 3])], opset=14),
        [{"x": cs, "axis": np.array(a, np.int64)} for a in (0, 1, -1, 2)],
        lambda v: np.cumsum(v["x"], axis=int(v["axis"])))
    # An expanded ReduceL2: the declared shape is the CastLike's, after the
    # ReduceSum, found back through Sqrt and CastLike.
    yield ("reduce-l2-expanded", model(
        [helper.make_node("Mul", ["x", "x"], ["sq"]),
         helper.make_node("ReduceSum", ["sq", "axes"], ["s"], name="sum"),
         helper.make_node("Sqrt", ["s"], ["r"]),
         helper.make_node("CastLike", ["r", "x"], ["y"])],
        [("x", F, [3, 2, 2]), ("axes", I, [1])], [("y", F, [3, 2, 1])]),
        [{"x": data, "axes": np.array([2])}],
        lambda v: np.sqrt((v["x"] ** 2).sum(axis=tuple(v["axes"]),
                                            keepdims=True)))
    x = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    yield ("reshape", model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="flat")],
        [("x", F, [2, 3, 2]), ("shape", I, [2])], [("y", F, [2, 6])]),
        [{"x": x, "shape": np.array(s)} for s in ([2, -1], [0, 6], [3, 4])],
        lambda v: v["x"].reshape([d if d else v["x"].shape[i]
                                  for i, d in enumerate(v["shape"])]))
    t = np.arange(6, dtype=np.float32).reshape(2, 3)
    yield ("tile", model(
        [helper.make_node("Tile", ["x", "repeats"], ["y"], name="tile")],
        [("x", F, [2, 3]), ("repeats", I, [2])], [("y", F, [4, 3])]),
        [{"x": t, "repeats": np.array(r)} for r in ([2, 1], [1, 2])],
        lambda v: np.tile(v["x"], v["repeats"]))
    c = rng.standard_normal((3, 4)).astype(np.float32)
    yield ("clip", model(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")],
        [("x", F, [3, 4]), ("lo", F, []), ("hi", F, [])], [("y", F, [3, 4])],
        opset=13),
        [{"x": c, "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
         for lo, hi in ((-0.5, 0.25), (-2.0, 2.0), (1.0, 0.0))],
        lambda v: np.minimum(np.maximum(v["x"], v["lo"]), v["hi"]))
    m = rng.standard_normal((4, 5)).astype(np.float32)
    yield ("trilu", model(
        [helper.make_node("Trilu", ["x", "k"], ["y"], name="triu")],
        [("x", F, [4, 5]), ("k", I, [])], [("y", F, [4, 5])], opset=14),
        [{"x": m, "k": np.array(k, np.int64)} for k in (1, -2, 0, 9)],
        lambda v: np.triu(v["x"], int(v["k"])))
    # Range: the declared length is guarded; the device computes start +
    # i * delta from the bound values.
    yield ("range", model(
        [helper.make_node("Range", ["start", "limit", "delta"], ["y"],
                          name="range")],
        [("start", I, []), ("limit", I, []), ("delta", I, [])],
        [("y", I, [4])], opset=11),
        [{"start": np.array(a, np.int64), "limit": np.array(b, np.int64),
          "delta": np.array(d, np.int64)}
         for a, b, d in ((0, 4, 1), (10, 2, -2), (-3, 5, 2), (0, 5, 1))],
        lambda v: np.arange(v["start"], v["limit"], v["delta"]))
    # DFT-20's axis: every signal axis gives 1x4x5x2 here, so each is built
    # and the input picks one on the device.
    sig = rng.standard_normal((1, 4, 5, 1)).astype(np.float32)
    yield ("dft-axis", model(
        [helper.make_node("DFT", ["x", "", "axis"], ["y"], name="dft")],
        [("x", F, [1, 4, 5, 1]), ("axis", I, [])], [("y", F, [1, 4, 5, 2])],
        opset=20),
        [{"x": sig, "axis": np.array(a, np.int64)} for a in (1, -2, 0, 3)],
        lambda v: (lambda f: np.stack([f.real, f.imag], -1).astype(np.float32))(
            np.fft.fft(v["x"][..., 0].astype(np.float64),
                       axis=int(v["axis"]) % 4)))  # counted in rank 4
    # Dropout's training_mode and ratio as run-time data: ratio 0 keeps
    # every element exactly, training_mode false is the identity.
    dx = rng.standard_normal((3, 4)).astype(np.float32)
    yield ("dropout", model(
        [helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")],
        [("x", F, [3, 4]), ("r", F, []), ("t", TensorProto.BOOL, [])],
        [("y", F, [3, 4])], opset=13),
        [{"x": dx, "r": np.array(r, np.float32), "t": np.array(t)}
         for r, t in ((0.0, True), (0.0, False), (0.7, False))],
        lambda v: v["x"])


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check(cases, args, bound):
    """Compiles and runs each case (name, model, runs, reference); an
    output must match its reference within bound(name, want) element by
    element. Prints a line per run for FileCheck; returns the failures."""
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    for name, proto, runs, reference in cases:
        path = os.path.join(args.work, name + ".onnx")
        onnx.save(proto, path)
        artifact = os.path.join(args.work, name + ".kiln")
        compiled = run([args.kilnc, path, "-o", artifact, "--stats"])
        if compiled.returncode != 0:
            print(f"{name}: FAIL: kilnc: {compiled.stderr.strip()}")
            failures += 1
            continue
        for line in compiled.stdout.splitlines():
            if "checks shape input" in line:
                print(f"{name} stats: {line.strip()}")
        for k, values in enumerate(runs):
            flags, shown = [], []
            for input_name, array in values.items():
                npy = os.path.join(args.work, f"{name}-{k}-{input_name}.npy")
                np.save(npy, array)
                flags += ["-i", f"{input_name}={npy}"]
                if array.dtype == np.int64 or array.ndim <= 1:
                    shown.append(f"{input_name}={array.tolist()}")
            out = os.path.join(args.work, f"{name}-{k}")
            result = run([args.kiln_run, artifact, "--device", "emu", "-o",
                          out] + flags)
            label = f"{name} {' '.join(shown)}"
            if result.returncode != 0:
                print(f"{label}: exit {result.returncode}: "
                      f"{result.stderr.strip().splitlines()[-1]}")
                continue
            got = np.load(os.path.join(out, "y.npy"))
            want = reference(values)
            if got.shape != want.shape or np.any(
                    np.abs(got - want) > bound(name, want)):
                print(f"{label}: FAIL: got {got.tolist()}, want {want.tolist()}")
                failures += 1
            else:
                print(f"{label}: ok, shape {'x'.join(map(str, got.shape))}")
    return failures


def check_all(label, cases, bound):
    """Parses the command line, checks `cases` (see check) and prints the
    summary line; returns the exit status."""
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    failures = check(cases, ap.parse_args(), bound)
    print(f"{label}: {failures} failures")
    return 1 if failures else 0


def main():
    def bound(name, want):
        if name in ("reduce-sum", "reduce-sum-drop", "cumsum",
                    "reduce-l2-expanded"):
            return 1e-6 * np.abs(want) + 1e-7
        if name == "dft-axis":
            # An f32 twiddle matmul of at most 5 terms against numpy's f64
            # FFT: a few f32 roundings of the largest term.
            return 1e-5 * np.abs(want).max() + 1e-6
        return 0.0
    return check_all("shape inputs", cases(), bound)


if __name__ == "__main__":
    sys.exit(main())
