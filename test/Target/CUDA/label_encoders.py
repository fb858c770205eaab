"""ai.onnx.ml LabelEncoder from numbers to numbers (MLHandlers.cpp)
through kilnc and kiln-run on emu, against onnxruntime 1.20.1 (graph
optimizations off), element by element and bit for bit: a lookup has no
rounding. onnxruntime has no LabelEncoder-4 from int32: that case is
checked against onnx's reference evaluator (a dict lookup).

Also from numbers to strings (HostPartition.cpp splits the node: the
device finds each key's position, a host step maps it to its string): int64
and float keys, and a classifier's ArgMax then class names (a host step
after the launch), compared string by string.

Cases: int64 keys to int64 and to float values, with the default and
without (ONNX's -1 and -0.0), a key listed twice (the first wins, as in
onnxruntime); float keys at opset 2 (NaN matches nothing) and at opset 4
with tensor keys (a NaN key matches NaN inputs; -0.0 and 0.0 keys both
present: x = 0.0 takes the first, as onnxruntime does, whatever the
opset's "bit-wise comparison" says); int32 keys to double values. Inputs
hit and miss keys, and include NaN, 0.0 and -0.0 where x is float.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_harness import onnxruntime_run, parse_args, run_model  # noqa: E402

NP = {TensorProto.INT64: np.int64, TensorProto.FLOAT: np.float32,
      TensorProto.INT32: np.int32, TensorProto.DOUBLE: np.float64}


def model(x_type, y_type, ml_opset, shape, **attrs):
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                            **attrs)
    graph = helper.make_graph(
        [node], "label",
        [helper.make_tensor_value_info("x", x_type, shape)],
        [helper.make_tensor_value_info("y", y_type, shape)])
    m = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 8
    return m


def classifier(ml_opset):
    """The classifier's tail as sklearn-onnx writes it: ArgMax over the
    scores (on the device), then LabelEncoder from the class index to its
    name (a host step after the launch)."""
    nodes = [
        helper.make_node("ArgMax", ["x"], ["index"], axis=1, keepdims=0),
        helper.make_node("LabelEncoder", ["index"], ["y"], domain="ai.onnx.ml",
                         keys_int64s=[0, 1, 2, 3],
                         values_strings=["cat", "dog", "", "bird"],
                         default_string="?"),
    ]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [6])])
    m = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 8
    return m


def tensor(name, elem, values):
    return helper.make_tensor(name, elem, [len(values)], values)


def cases(rng):
    ints = rng.integers(-3, 12, size=(4, 6)).astype(np.int64)
    floats = rng.choice(np.array([0.5, 1.5, 2.25, -4.0, 7.0, 0.0, -0.0, np.nan, 3.0],
                                 dtype=np.float32), size=(5, 7))
    yield ("int64-to-int64", model(TensorProto.INT64, TensorProto.INT64, 2, [4, 6],
                                   keys_int64s=[0, 3, 5, 11, -2, 3],
                                   values_int64s=[10, 30, 50, 110, -20, 33],
                                   default_int64=99), ints)
    yield ("int64-to-float-default", model(TensorProto.INT64, TensorProto.FLOAT, 2, [4, 6],
                                           keys_int64s=[1, 2, 7],
                                           values_floats=[0.25, -1.5, 1e30]), ints)
    yield ("float-to-int64-opset2", model(TensorProto.FLOAT, TensorProto.INT64, 2, [5, 7],
                                          keys_floats=[0.5, 2.25, 0.0, 7.0],
                                          values_int64s=[1, 2, 3, 4],
                                          default_int64=-7), floats)
    yield ("float-to-float-opset4-bitwise",
           model(TensorProto.FLOAT, TensorProto.FLOAT, 4, [5, 7],
                 keys_tensor=tensor("keys", TensorProto.FLOAT, [np.nan, -0.0, 0.0, 1.5, -4.0]),
                 values_tensor=tensor("values", TensorProto.FLOAT, [100.0, -1.0, 1.0, 15.0, -40.0]),
                 default_tensor=tensor("default", TensorProto.FLOAT, [-999.0])), floats)
    yield ("int32-to-double-opset4",
           model(TensorProto.INT32, TensorProto.DOUBLE, 4, [4, 6],
                 keys_tensor=tensor("keys", TensorProto.INT32, [3, 4, 9]),
                 values_tensor=tensor("values", TensorProto.DOUBLE, [0.1, 0.2, 0.3]),
                 default_tensor=tensor("default", TensorProto.DOUBLE, [-0.5])),
           ints.astype(np.int32))
    # To strings: the device finds each key's position, the host maps it.
    yield ("int64-to-strings", model(TensorProto.INT64, TensorProto.STRING, 2, [4, 6],
                                     keys_int64s=[0, 3, 5, 11],
                                     values_strings=["zero", "three", "five", "eleven"]),
           ints)
    yield ("float-to-strings-opset4",
           model(TensorProto.FLOAT, TensorProto.STRING, 4, [5, 7],
                 keys_tensor=tensor("keys", TensorProto.FLOAT, [np.nan, 1.5, 7.0, 1.5]),
                 values_tensor=helper.make_tensor("values", TensorProto.STRING, [4],
                                                  [b"missing", b"one and a half", b"seven", b"again"]),
                 default_tensor=helper.make_tensor("default", TensorProto.STRING, [1],
                                                   [b"other"])), floats)
    # Scores where class 4 (no key) wins some rows: the default.
    yield ("argmax-then-names", classifier(2),
           rng.normal(size=(6, 5)).astype(np.float32))


def main():
    args = parse_args()
    failures = count = 0
    for name, m, x in cases(np.random.default_rng(7)):
        count += 1
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        onnx.save(m, path)
        try:
            expected = onnxruntime_run(path, {"x": x})[0]
            reference = "onnxruntime"
        except ort.capi.onnxruntime_pybind11_state.NotImplemented:
            expected = ReferenceEvaluator(m).run(None, {"x": x})[0]
            reference = "onnx reference"
        results = run_model(args, name, path, {"x": x}, work, ["y"])
        if results is None:
            failures += 1
            continue
        got = results[0]
        if expected.dtype.kind in "OUS":
            got_text = [str(v) for v in got.ravel()]
            want = [v.decode() if isinstance(v, bytes) else str(v)
                    for v in expected.ravel()]
            off = sum(a != b for a, b in zip(got_text, want))
            same = got.shape == expected.shape and off == 0
            failures += not same
            print(f"{name}: strings {list(got.shape)} vs {reference}, equal "
                  f"{'ok' if same else f'FAIL ({off}/{expected.size} differ)'}")
            if not same:
                print("  got:", got_text[:12], "\n  expected:", want[:12])
            continue
        same = (got.dtype == expected.dtype and got.shape == expected.shape and
                np.array_equal(got.view(np.uint8), expected.view(np.uint8)))
        off = -1
        if got.shape == expected.shape and got.dtype == expected.dtype:
            size = got.dtype.itemsize
            off = int(np.any(got.view(np.uint8).reshape(-1, size) !=
                             expected.view(np.uint8).reshape(-1, size), axis=1).sum())
        failures += not same
        print(f"{name}: {got.dtype} {list(got.shape)} vs {reference}, bit-exact "
              f"{'ok' if same else f'FAIL ({off}/{expected.size} elements differ)'}")
        if not same:
            print("  x:", x.ravel()[:12], "\n  got:", got.ravel()[:12],
                  "\n  expected:", expected.ravel()[:12])
    print(f"label encoders: {count} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
