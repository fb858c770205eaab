"""STRING host steps mixed with device kernels, on emu, against onnxruntime.

The model: strings `s` [2, 4] -> Cast to FLOAT -> Add(b) -> Relu -> `y`
(a device output) -> Cast to STRING -> StringConcat(" units") -> `label`;
and Equal(s, "0") -> `zero` (bool, on the host before the launches). So
host steps run before the first launch (Cast, Equal), kernels run in
between (Add, Relu), and host steps run after the last (Cast, StringConcat).

References and bounds, element by element:
  y       onnxruntime (graph optimizations off), exact: the strings parse
          to the same float32 (at most 7 significant digits, so no double
          rounding), and Add and Relu are single IEEE float32 operations on
          emu as on the CPU.
  zero    onnxruntime, exact.
  label   (a) NumPy's astype(str) of onnxruntime's y, plus " units",
          exactly: ONNX's reference Cast writes NumPy's spelling (the node
          tests' data), except INF/-INF/NaN, which the spec reserves; (b) onnxruntime's own label read back as float32
          equals ours read back: onnxruntime spells the same float32 as
          "%.8g" ("0.30000001" where NumPy writes "0.3"), so the text
          differs, the value may not.
Usage: string_host_steps.py WORKDIR [--break]  (--break perturbs one input
string after compiling, to show the checks fail)
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper


def build(path):
    nodes = [
        helper.make_node("Cast", ["s"], ["a"], name="parse", to=T.FLOAT),
        helper.make_node("Add", ["a", "b"], ["c"], name="add"),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
        helper.make_node("Cast", ["y"], ["ys"], name="format", to=T.STRING),
        helper.make_node("StringConcat", ["ys", "unit"], ["label"],
                         name="concat"),
        helper.make_node("Equal", ["s", "zero_text"], ["zero"], name="equal"),
    ]
    inits = [
        helper.make_tensor("unit", T.STRING, [], [b" units"]),
        helper.make_tensor("zero_text", T.STRING, [1], [b"0"]),
    ]
    graph = helper.make_graph(
        nodes, "strings", [
            helper.make_tensor_value_info("s", T.STRING, [2, 4]),
            helper.make_tensor_value_info("b", T.FLOAT, [2, 4]),
        ], [
            helper.make_tensor_value_info("y", T.FLOAT, [2, 4]),
            helper.make_tensor_value_info("label", T.STRING, [2, 4]),
            helper.make_tensor_value_info("zero", T.BOOL, [2, 4]),
        ], inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    workdir = sys.argv[1]
    breaking = "--break" in sys.argv
    os.makedirs(workdir, exist_ok=True)
    model = os.path.join(workdir, "strings.onnx")
    artifact = os.path.join(workdir, "strings.kiln")
    build(model)
    subprocess.run(["kilnc", model, "-o", artifact], check=True)

    s = np.array([["1.5", "-2", "0", "0.1"],
                  ["1e-5", "+INF", "-3.25", "123456.7"]])
    b = np.array([[0.25, 1, 0, 0.2], [0, 1, 3, -0.5]], np.float32)
    ours_s = s.copy()
    if breaking:
        ours_s[0, 0] = "1.25"
    np.save(os.path.join(workdir, "s.npy"), ours_s)
    np.save(os.path.join(workdir, "b.npy"), b)
    out = os.path.join(workdir, "out")
    subprocess.run(["kiln-run", artifact, "--device", "emu", "-o", out,
                    "-i", "s=" + os.path.join(workdir, "s.npy"),
                    "-i", "b=" + os.path.join(workdir, "b.npy")],
                   check=True, stdout=subprocess.DEVNULL)
    got = {name: np.load(os.path.join(out, name + ".npy"))
           for name in ("y", "label", "zero")}

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, options,
                                   providers=["CPUExecutionProvider"])
    want_y, want_label, want_zero = session.run(
        None, {"s": s.astype(object), "b": b})

    ok = True

    def report(name, good, detail):
        nonlocal ok
        ok &= good
        print(f"{name}: {'match' if good else 'MISMATCH ' + detail}")

    report("y", got["y"].dtype == np.float32 and
           np.array_equal(got["y"], want_y),
           f"{got['y'].tolist()} vs {want_y.tolist()}")
    report("zero", np.array_equal(got["zero"], want_zero),
           f"{got['zero'].tolist()} vs {want_zero.tolist()}")
    # NumPy writes inf and nan; the spec reserves INF, -INF and NaN.
    spelled = np.array([{"inf": "INF", "-inf": "-INF", "nan": "NaN"}.get(t, t)
                        for t in want_y.astype(np.str_).ravel().tolist()])
    numpy_label = np.char.add(spelled.reshape(want_y.shape), " units")
    report("label (NumPy spelling)",
           got["label"].shape == numpy_label.shape and
           got["label"].tolist() == numpy_label.tolist(),
           f"{got['label'].tolist()} vs {numpy_label.tolist()}")

    def value(labels):
        return np.array([t[:-len(" units")] for t in
                         np.asarray(labels).ravel().tolist()]).astype(
                             np.float32)
    report("label (onnxruntime value)",
           np.array_equal(value(got["label"]), value(want_label)),
           f"{got['label'].tolist()} vs {want_label.tolist()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
