#!/usr/bin/env python3
"""Writes a small conv net that exercises every kiln-assign-layout rule.

Usage: make_layout_net.py OUT.onnx [--seed 0]

A 3-channel input layer (channel padding), batch norm, max and average
pooling, a depthwise and a transposed convolution, a concat of two branches,
a channel shuffle, per-channel and full-rank broadcast operands, a channel
reduction broadcast back, a slice, a spatial pad, a softmax over channels,
LRN (no NHWC variant: transposes stay around it), global pooling with
flatten and Gemm, and a Gemm on a flattened [2, 24, 7, 7] activation.
Weights are seeded random initializers, so a wrong index shows in the
output.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("output")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    inits = []

    def weight(name, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = scale if scale is not None else 1.0 / np.sqrt(fan_in)
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", weight("w1", [16, 3, 3, 3]), weight("b1", [16], 0.1)],
          ["c1"], pads=[1, 1, 1, 1]),
        n("BatchNormalization",
          ["c1", const("s", rng.uniform(0.8, 1.2, 16).astype(np.float32)),
           weight("bb", [16], 0.1), weight("m", [16], 0.1),
           const("v", rng.uniform(0.5, 1.5, 16).astype(np.float32))],
          ["bn"]),
        n("Relu", ["bn"], ["r1"]),
        n("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        # Two branches, concatenated along channels.
        n("Conv", ["p1", weight("w2", [8, 16, 1, 1])], ["c2"]),
        n("Conv", ["p1", weight("w3", [16, 1, 3, 3])], ["dw"], group=16,
          pads=[1, 1, 1, 1]),
        n("Conv", ["dw", weight("w4", [8, 16, 3, 3])], ["c4"],
          pads=[1, 1, 1, 1]),
        n("Concat", ["c2", "c4"], ["cat0"], axis=1),
        # A channel shuffle (ShuffleNet's): split, swap the factors, merge.
        n("Reshape", ["cat0", const("split", np.array([2, 2, 8, 8, 8],
                                                      np.int64))], ["cs"]),
        n("Transpose", ["cs"], ["ct"], perm=[0, 2, 1, 3, 4]),
        n("Reshape", ["ct", const("merge", np.array([2, 16, 8, 8],
                                                    np.int64))], ["cat"]),
        # Per-channel [C, 1, 1] and full-rank [C, H, W] broadcast operands.
        n("Add", ["cat", weight("bias", [16, 1, 1], 0.1)], ["a1"]),
        n("Mul", ["a1", weight("full", [16, 8, 8], 1.0)], ["m1"]),
        # A channel reduction broadcast back over the channels.
        n("ReduceMean", ["m1"], ["mean"], axes=[1], keepdims=1),
        n("Sub", ["m1", "mean"], ["centred"]),
        n("Sigmoid", ["centred"], ["sg"]),
        n("AveragePool", ["sg"], ["ap"], kernel_shape=[3, 3], strides=[1, 1],
          pads=[1, 1, 1, 1], count_include_pad=0),
        n("Slice", ["ap", const("st", np.array([0, 1], np.int64)),
                    const("en", np.array([12, 7], np.int64)),
                    const("ax", np.array([1, 2], np.int64))], ["sl"]),
        n("Pad", ["sl", const("pads", np.array([0, 0, 1, 0, 0, 0, 1, 0],
                                               np.int64))], ["pd"]),
        n("ConvTranspose", ["pd", weight("wt", [12, 8, 2, 2])], ["up"],
          strides=[2, 2]),
        n("LRN", ["up"], ["lrn"], size=3),
        n("Softmax", ["lrn"], ["sm"], axis=1),
        n("Conv", ["sm", weight("w5", [24, 8, 3, 3])], ["c5"],
          strides=[2, 2]),
        n("Relu", ["c5"], ["r5"]),
        n("GlobalAveragePool", ["r5"], ["gp"]),
        n("Flatten", ["gp"], ["fl"]),
        n("Gemm", ["fl", weight("fc", [10, 24]), weight("fcb", [10], 0.1)],
          ["logits"], transB=1),
        n("ReduceMax", ["r5"], ["rmax"], axes=[2, 3], keepdims=0),
        # A classifier on the flattened [2, 24, 7, 7] activation.
        n("Flatten", ["r5"], ["fl2"]),
        n("Gemm", ["fl2", weight("fc2", [5, 1176])], ["head2"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "layout_net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10]),
         helper.make_tensor_value_info("rmax", TensorProto.FLOAT, [2, 24]),
         helper.make_tensor_value_info("sm", TensorProto.FLOAT,
                                       [2, 8, 16, 16]),
         helper.make_tensor_value_info("head2", TensorProto.FLOAT, [2, 5])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, args.output)


if __name__ == "__main__":
    main()
