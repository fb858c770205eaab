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


def onnx_sce():
    """ONNX SoftmaxCrossEntropyLoss (ignore_index) as the model's own loss,
    with its log_prob output used by NegativeLogLikelihoodLoss too."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["s"]),
         helper.make_node("SoftmaxCrossEntropyLoss", ["s", "y"],
                          ["sce", "logp"], ignore_index=1),
         helper.make_node("NegativeLogLikelihoodLoss", ["logp", "y", "cw"],
                          ["nll"]),
         helper.make_node("Add", ["sce", "nll"], ["loss"])],
        [("x", TensorProto.FLOAT, [6, 4]), ("y", TensorProto.INT64, [6])],
        [("loss", TensorProto.FLOAT, [])],
        [weight("W", [4, 5]), weight("b", [5], 0.1),
         weight("cw", [5], 0.2, 1.0)])


def no_rule():
    """Floor has no gradient: kilnc --gradients names the node."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Floor", ["m"], ["y"], name="floor_1")],
        [("x", TensorProto.FLOAT, [4, 5])],
        [("y", TensorProto.FLOAT, [4, 3])],
        [weight("W", [5, 3])])


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


def conv():
    """Conv 2-D, stride 2, asymmetric padding, bias; then a grouped, dilated
    conv without bias; then a 1-D strided conv."""
    return model(
        [helper.make_node("Conv", ["x", "W1", "b1"], ["c1"], strides=[2, 2],
                          pads=[1, 0, 2, 1]),
         helper.make_node("Tanh", ["c1"], ["t"]),
         helper.make_node("Conv", ["t", "W2"], ["c2"], group=2,
                          dilations=[2, 1], pads=[2, 1, 2, 1]),
         helper.make_node("Reshape", ["c2", "shape"], ["r"]),
         helper.make_node("Conv", ["r", "W3", "b3"], ["y"], strides=[2],
                          pads=[1, 2])],
        [("x", TensorProto.FLOAT, [2, 3, 7, 6])],
        [("y", TensorProto.FLOAT, [2, 3, 9])],
        [weight("W1", [4, 3, 3, 3]), weight("b1", [4], 0.1),
         weight("W2", [6, 2, 3, 2]), weight("W3", [3, 6, 3], 0.3),
         weight("b3", [3], 0.1), const("shape", [2, 6, 16])])


def conv_transpose():
    """ConvTranspose with stride, asymmetric padding and output padding.
    (One group: onnx's reference evaluator, the float64 reference here,
    mis-slices grouped ConvTranspose; the conv model's data gradient runs a
    grouped conv_transpose.)"""
    return model(
        [helper.make_node("ConvTranspose", ["x", "W", "b"], ["y"],
                          strides=[2, 2], pads=[1, 0, 1, 1],
                          output_padding=[1, 0])],
        [("x", TensorProto.FLOAT, [1, 4, 3, 4])],
        [("y", TensorProto.FLOAT, [1, 4, 6, 8])],
        [weight("W", [4, 4, 3, 3]), weight("b", [4], 0.1)])


def pooling():
    """Conv, MaxPool (stride, padding), AveragePool (padding excluded, then
    included with ceil mode), GlobalAveragePool, Flatten, Gemm."""
    return model(
        [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[3, 3],
                          strides=[2, 2], pads=[1, 1, 1, 1]),
         helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[2, 2],
                          pads=[1, 0, 0, 1]),
         helper.make_node("AveragePool", ["a"], ["a2"], kernel_shape=[2, 2],
                          strides=[2, 2], pads=[1, 1, 0, 0],
                          count_include_pad=1, ceil_mode=1),
         helper.make_node("MaxPool", ["a2"], ["m2"], kernel_shape=[2, 1],
                          ceil_mode=1, strides=[2, 1]),
         helper.make_node("GlobalAveragePool", ["m2"], ["g"]),
         helper.make_node("Flatten", ["g"], ["f"]),
         helper.make_node("Gemm", ["f", "Wf"], ["y"])],
        [("x", TensorProto.FLOAT, [2, 2, 9, 9])],
        [("y", TensorProto.FLOAT, [2, 5])],
        [weight("W", [4, 2, 3, 3]), weight("Wf", [4, 5])])


def norms():
    """BatchNormalization (differentiated in training mode), Relu,
    InstanceNormalization, LayerNormalization over the last three axes (a bias broadcast)."""
    return model(
        [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization",
                          ["c", "bn_s", "bn_b", "bn_mean", "bn_var"], ["b"],
                          epsilon=1e-3, momentum=0.8),
         helper.make_node("Relu", ["b"], ["r"]),
         helper.make_node("InstanceNormalization", ["r", "in_s", "in_b"],
                          ["i"], epsilon=1e-4),
         helper.make_node("LayerNormalization", ["i", "ln_s", "ln_b"], ["y"],
                          axis=-3)],
        [("x", TensorProto.FLOAT, [3, 2, 4, 4])],
        [("y", TensorProto.FLOAT, [3, 3, 4, 4])],
        [weight("W", [3, 2, 3, 3]), weight("bn_s", [3], 0.2, 1.0),
         weight("bn_b", [3], 0.1), weight("bn_mean", [3], 0.1),
         numpy_helper.from_array(
             (RNG.random(3) + 0.5).astype(np.float32), "bn_var"),
         weight("in_s", [3], 0.2, 1.0), weight("in_b", [3], 0.1),
         weight("ln_s", [3, 4, 4], 0.2, 1.0), weight("ln_b", [4, 4], 0.1)])


def softmax_reduce():
    """Softmax, ReduceSum/Mean/Max, LogSoftmax (then nll), broadcasting Max
    and Min, Pow, Sqrt, Exp, Log, Abs."""
    return model(
        [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Softmax", ["m"], ["s"], axis=1),
         helper.make_node("ReduceSum", ["s", "axes0"], ["rs"], keepdims=1),
         helper.make_node("ReduceMax", ["m"], ["rm"], axes=[1], keepdims=1),
         helper.make_node("ReduceMean", ["m"], ["rmean"], axes=[0],
                          keepdims=0),
         helper.make_node("Mul", ["s", "rs"], ["p"]),
         helper.make_node("Sub", ["p", "rm"], ["q"]),
         helper.make_node("Add", ["q", "rmean"], ["q2"]),
         helper.make_node("Max", ["q2", "lo"], ["mx"]),
         helper.make_node("Min", ["mx", "hi"], ["mn"]),
         helper.make_node("Abs", ["mn"], ["ab"]),
         helper.make_node("Add", ["ab", "one"], ["ab1"]),
         helper.make_node("Sqrt", ["ab1"], ["sq"]),
         helper.make_node("Pow", ["sq", "expo"], ["pw"]),
         helper.make_node("Log", ["pw"], ["lg"]),
         helper.make_node("Exp", ["lg"], ["ex"]),
         helper.make_node("LogSoftmax", ["ex"], ["y"], axis=1)],
        [("x", TensorProto.FLOAT, [4, 5])],
        [("y", TensorProto.FLOAT, [4, 6])],
        [weight("W", [5, 6]), weight("lo", [6], 0.3),
         weight("hi", [1, 6], 0.3, 0.5), weight("expo", [6], 0.2, 1.5),
         const("axes0", [0]),
         numpy_helper.from_array(np.array(1.0, np.float32), "one")],
        opset=13)


def data_movement():
    """Gather (repeated ids), Slice with steps (negative too),
    Concat, Split, Pad, Expand, Tile, Transpose."""
    return model(
        [helper.make_node("Gather", ["E", "ids"], ["e"], axis=0),
         helper.make_node("Slice", ["e", "st", "en", "ax", "sp"], ["s"]),
         helper.make_node("Split", ["e"], ["s1", "s2"], axis=2,
                          num_outputs=2),
         helper.make_node("Concat", ["s", "s1"], ["c"], axis=1),
         helper.make_node("Pad", ["c", "pads"], ["p"]),
         helper.make_node("Mul", ["p", "P"], ["pm"]),
         helper.make_node("Expand", ["B", "eshape"], ["bx"]),
         helper.make_node("Tile", ["T", "reps"], ["tt"]),
         helper.make_node("Add", ["pm", "bx"], ["a"]),
         helper.make_node("Mul", ["a", "tt"], ["at"]),
         helper.make_node("MatMul", ["at", "Wo"], ["o"]),
         helper.make_node("Transpose", ["s2"], ["s2t"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["s2", "s2t"], ["z"]),
         helper.make_node("Concat", ["o", "z"], ["y"], axis=1)],
        [("ids", TensorProto.INT64, [2, 5])],
        [("y", TensorProto.FLOAT, [2, 16, 5])],
        [weight("E", [7, 6]), weight("P", [11, 6]), weight("B", [1, 6]),
         weight("T", [1, 2]), weight("Wo", [6, 5], 0.3),
         const("st", [4, 5]), const("en", [-100, 0]), const("ax", [1, 2]),
         const("sp", [-2, -2]),
         const("pads", [0, 2, 0, 0, 1, 3]), const("eshape", [11, 1]),
         const("reps", [11, 3])],
        opset=18)


def pads():
    """Reflect then edge padding of a weight (asymmetric pads on H and W,
    as wide as reflect allows on one side), times a weight so every
    copied element weighs differently."""
    return model(
        [helper.make_node("Pad", ["W", "rpads"], ["r"], mode="reflect"),
         helper.make_node("Pad", ["r", "epads"], ["e"], mode="edge"),
         helper.make_node("Mul", ["e", "P"], ["m"]),
         helper.make_node("Add", ["m", "x"], ["y"])],
        [("x", TensorProto.FLOAT, [2, 3, 10, 12])],
        [("y", TensorProto.FLOAT, [2, 3, 10, 12])],
        [weight("W", [2, 3, 4, 5]), weight("P", [2, 3, 10, 12]),
         const("rpads", [0, 0, 3, 1, 0, 0, 1, 4]),
         const("epads", [0, 0, 2, 0, 0, 0, 0, 2])],
        opset=18)


MODELS = {"pads": pads, "mlp": mlp, "conv": conv, "conv-transpose": conv_transpose,
          "pooling": pooling, "norms": norms,
          "softmax-reduce": softmax_reduce, "data-movement": data_movement, "elementwise": elementwise,
          "batched-matmul": batched_matmul, "own-loss": own_loss, "onnx-sce": onnx_sce,
          "no-rule": no_rule}

if __name__ == "__main__":
    onnx.save(MODELS[sys.argv[1]](), sys.argv[2])
