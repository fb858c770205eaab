#!/usr/bin/env python3
"""Builds the small ONNX models that emu-vs-onnxruntime.test runs.

Usage: make_emu_models.py NAME OUTPUT.onnx

NAME is one of:
  elementwise     a chain of unary/binary elementwise ops with broadcasting
  matmul-softmax  MatMul + Add (bias) + Softmax over the last axis
  conv-relu-pool  Conv (3x3, pad 1) + Relu + MaxPool 2x2 + GlobalAveragePool
Weights are seeded random initializers.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def finish(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def elementwise(rng):
    scale = numpy_helper.from_array(
        rng.standard_normal((1, 64)).astype(np.float32), "scale")
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["a"]),
        helper.make_node("Add", ["a", "y"], ["b"]),
        helper.make_node("Tanh", ["b"], ["c"]),
        helper.make_node("Exp", ["c"], ["d"]),
        helper.make_node("Sqrt", ["d"], ["e"]),
        helper.make_node("Sigmoid", ["y"], ["s"]),
        helper.make_node("Div", ["e", "s"], ["g"]),
        helper.make_node("Sub", ["g", "x"], ["h"]),
        helper.make_node("Abs", ["h"], ["i"]),
        helper.make_node("Log", ["i"], ["j"]),
        helper.make_node("Relu", ["j"], ["out"]),
    ]
    return finish(nodes, [f32("x", [8, 64]), f32("y", [8, 64])],
                  [f32("out", [8, 64])], [scale])


def matmul_softmax(rng):
    w = numpy_helper.from_array(
        (rng.standard_normal((48, 40)) * 0.3).astype(np.float32), "w")
    b = numpy_helper.from_array(
        rng.standard_normal((40,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Softmax", ["a"], ["out"], axis=-1),
    ]
    return finish(nodes, [f32("x", [2, 12, 48])], [f32("out", [2, 12, 40])],
                  [w, b])


def conv_relu_pool(rng):
    w = numpy_helper.from_array(
        (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    b = numpy_helper.from_array(
        rng.standard_normal((8,)).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["out"]),
    ]
    return finish(nodes, [f32("x", [1, 3, 16, 16])], [f32("out", [1, 8, 1, 1])],
                  [w, b])


BUILDERS = {
    "elementwise": elementwise,
    "matmul-softmax": matmul_softmax,
    "conv-relu-pool": conv_relu_pool,
}


def main():
    name, path = sys.argv[1], sys.argv[2]
    onnx.save(BUILDERS[name](np.random.default_rng(0)), path)


if __name__ == "__main__":
    main()
