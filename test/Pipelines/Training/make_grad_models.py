#!/usr/bin/env python3
"""Small ONNX models for the gradient tests (gradient_check.py).

Usage: make_grad_models.py NAME OUT.onnx

Weights are seeded random; divisors are kept away from zero so finite
differences stay well conditioned.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(7)


def weight(name, shape, scale=0.5, offset=0.0):
    data = (RNG.standard_normal(shape) * scale + offset).astype(np.float32)
    return numpy_helper.from_array(data, name)


def model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(
        nodes, "grad_test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        inits)
    return helper.make_model(graph,
                             opset_imports=[helper.make_opsetid("", opset)])


def mlp():
    """Gemm + Relu + Gemm(transB): a classifier head."""
    return model(
        [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1)],
        [("x", TensorProto.FLOAT, [4, 8])],
        [("y", TensorProto.FLOAT, [4, 10])],
        [weight("W1", [8, 16]), weight("b1", [16], 0.1),
         weight("W2", [10, 16]), weight("b2", [10], 0.1)])


def elementwise():
    """MatMul, broadcasting Add/Mul/Sub/Div, Sigmoid, Tanh, Reshape,
    Transpose: every operand shape broadcasts differently."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Sigmoid", ["a"], ["s"]),
         helper.make_node("Mul", ["s", "g"], ["p"]),
         helper.make_node("Sub", ["p", "c"], ["q"]),
         helper.make_node("Tanh", ["q"], ["t"]),
         helper.make_node("Div", ["t", "d"], ["u"]),
         helper.make_node("Mul", ["u", "u"], ["v"]),
         helper.make_node("Add", ["v", "t"], ["w"]),
         helper.make_node("Reshape", ["w", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
        [("x", TensorProto.FLOAT, [4, 6])],
        [("y", TensorProto.FLOAT, [12, 2])],
        [weight("W", [6, 6]), weight("b", [6], 0.1), weight("g", [1, 6]),
         weight("c", [4, 1]),
         weight("d", [6], 0.2, 1.5),
         numpy_helper.from_array(np.array([2, 12], np.int64), "shape")])


def batched_matmul():
    """Batched MatMul with a broadcast weight and a 1-D weight, then Relu."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Relu", ["m"], ["r"]),
         helper.make_node("MatMul", ["r", "v"], ["y"])],
        [("x", TensorProto.FLOAT, [3, 2, 5])],
        [("y", TensorProto.FLOAT, [3, 2])],
        [weight("W", [5, 4]), weight("v", [4])])


def own_loss():
    """A model that computes its own scalar loss (kilnc --loss-output)."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Sub", ["m", "t"], ["d"]),
         helper.make_node("Mul", ["d", "d"], ["sq"]),
         helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0),
         helper.make_node("Relu", ["m"], ["y"])],
        [("x", TensorProto.FLOAT, [4, 5]), ("t", TensorProto.FLOAT, [4, 3])],
        [("y", TensorProto.FLOAT, [4, 3]), ("loss", TensorProto.FLOAT, [])],
        [weight("W", [5, 3])])


def no_rule():
    """Floor has no gradient: kilnc --gradients names the node."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Floor", ["m"], ["y"], name="floor_1")],
        [("x", TensorProto.FLOAT, [4, 5])],
        [("y", TensorProto.FLOAT, [4, 3])],
        [weight("W", [5, 3])])


MODELS = {"mlp": mlp, "elementwise": elementwise,
          "batched-matmul": batched_matmul, "own-loss": own_loss,
          "no-rule": no_rule}

if __name__ == "__main__":
    onnx.save(MODELS[sys.argv[1]](), sys.argv[2])
