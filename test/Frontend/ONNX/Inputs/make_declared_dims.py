#!/usr/bin/env python3
"""Writes small models whose declared dims are what exporters really write.

Usage: make_declared_dims.py KIND OUTPUT.onnx, KIND one of:
  minus-one     x: [-1, 3] in, y: [-1, -1] out (-1 for "unknown")
  missing       x: [<no value, no name>, 3] in, y: [<missing>, 3] out
  wrong-output  x: [2, 3] in, y declared [3, 2] (Relu keeps 2x3)
  wrong-rank    x: [2, 3] in, y declared [6]
The text format cannot write -1 or a dim with neither value nor name, so
these are built with the helper API.
"""
import sys

import onnx
from onnx import TensorProto, helper


def dims(values):
    shape = onnx.TensorShapeProto()
    for v in values:
        d = shape.dim.add()
        if v is not None:
            d.dim_value = v
    return shape


def value(name, shape):
    info = helper.make_tensor_value_info(name, TensorProto.FLOAT, None)
    info.type.tensor_type.shape.CopyFrom(dims(shape))
    return info


KINDS = {
    "minus-one": ([-1, 3], [-1, -1]),
    "missing": ([None, 3], [None, 3]),
    "wrong-output": ([2, 3], [3, 2]),
    "wrong-rank": ([2, 3], [6]),
}


def main():
    kind, path = sys.argv[1], sys.argv[2]
    x, y = KINDS[kind]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")],
                              "g", [value("x", x)], [value("y", y)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


if __name__ == "__main__":
    main()
