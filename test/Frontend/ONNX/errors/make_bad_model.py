#!/usr/bin/env python3
"""Writes deliberately broken models for kilnc's bad-input tests.

Usage: make_bad_model.py KIND OUTPUT
  random          4 KiB of seeded random bytes
  truncated       a valid model cut in half
  missing-data    a model whose external-data file is absent
  short-data      a model whose external-data range is past the file's end
  string-input    a graph input of element type STRING
  complex-weight  an initializer of element type COMPLEX64
  no-graph        a ModelProto with no graph
  huge-dims-raw   an initializer declaring 2^33 x 8 floats in 128 raw bytes
  huge-dims-typed the same with the values in float_data
  overflow-dims   an initializer whose element count overflows 64 bits
  float-indices   Gather(Shape(x), float initializer): indices must be ints
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def relu_model(initializers=(), input_type=TensorProto.FLOAT):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", input_type, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def external_weight_model(path, length=None):
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    entries = {"location": os.path.basename(path) + ".data", "offset": "0"}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        w.external_data.add(key=k, value=v)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "random":
        data = np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    elif kind == "truncated":
        data = relu_model([numpy_helper.from_array(np.ones(1000, np.float32), "unused")]) \
            .SerializeToString()
        data = data[: len(data) // 2]
    elif kind == "missing-data":
        data = external_weight_model(out).SerializeToString()
    elif kind == "short-data":
        data = external_weight_model(out, length=64 * 64 * 4).SerializeToString()
        with open(out + ".data", "wb") as f:
            f.write(b"\0" * 100)
    elif kind == "string-input":
        data = relu_model(input_type=TensorProto.STRING).SerializeToString()
    elif kind == "complex-weight":
        w = helper.make_tensor("cw", TensorProto.COMPLEX64, [1], [1 + 2j])
        graph = helper.make_graph(
            [helper.make_node("Identity", ["cw"], ["y"], name="id")], "g", [],
            [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [1])], [w])
        data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
            .SerializeToString()
    elif kind in ("huge-dims-raw", "huge-dims-typed", "overflow-dims"):
        # A buggy exporter's dims that disagree with the bytes carried.
        if kind == "huge-dims-typed":
            w = helper.make_tensor("w", TensorProto.FLOAT, [4, 8], [1.0] * 32)
        else:
            w = numpy_helper.from_array(np.ones((4, 8), np.float32), "w")
        w.dims[:] = [2**40, 2**40] if kind == "overflow-dims" else [2**33, 8]
        graph = helper.make_graph(
            [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
        data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
            .SerializeToString()
    elif kind == "float-indices":
        graph = helper.make_graph(
            [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "j"], ["t"], name="gather"),
             helper.make_node("Reshape", ["x", "t"], ["y"], name="reshape")], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 8])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.array([1.0, 0.0], np.float32), "j")])
        data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]) \
            .SerializeToString()
    elif kind == "no-graph":
        data = onnx.ModelProto(ir_version=8).SerializeToString()
    else:
        sys.exit(f"unknown kind {kind}")
    with open(out, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
