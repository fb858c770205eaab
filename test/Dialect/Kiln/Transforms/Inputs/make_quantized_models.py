#!/usr/bin/env python3
"""Seeded models quantized by onnxruntime's quantize_static, for
kiln-fuse-quantized-models.test: an MLP (MatMul, Add, Relu, MatMul) and a
CNN (Conv with bias, Relu, Conv stride 2), each in QDQ format with
per-channel weights and in QOperator format with per-tensor weights,
written to OUT_DIR as {mlp,cnn}.{qdq,qop}.onnx."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                      QuantType, quantize_static)


class Batches(CalibrationDataReader):
    def __init__(self, shape, seed):
        rng = np.random.default_rng(seed)
        self.batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)}
                             for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(128) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 32)) * 0.1).astype(np.float32)
    save(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 32])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")]), os.path.join(out, "mlp.onnx"))
    c1 = (rng.standard_normal((8, 3, 3, 3)) * 0.2).astype(np.float32)
    cb = (rng.standard_normal(8) * 0.1).astype(np.float32)
    c2 = (rng.standard_normal((16, 8, 3, 3)) * 0.1).astype(np.float32)
    save(helper.make_graph(
        [helper.make_node("Conv", ["x", "c1", "cb"], ["a"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("Conv", ["r", "c2"], ["y"], strides=[2, 2])], "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 5, 5])],
        [numpy_helper.from_array(c1, "c1"), numpy_helper.from_array(cb, "cb"),
         numpy_helper.from_array(c2, "c2")]), os.path.join(out, "cnn.onnx"))
    for name, shape in (("mlp", (8, 64)), ("cnn", (1, 3, 12, 12))):
        for fmt, per_channel, suffix in ((QuantFormat.QDQ, True, "qdq"),
                                         (QuantFormat.QOperator, False, "qop")):
            quantize_static(os.path.join(out, name + ".onnx"),
                            os.path.join(out, f"{name}.{suffix}.onnx"),
                            Batches(shape, 11), quant_format=fmt,
                            activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8,
                            per_channel=per_channel)


if __name__ == "__main__":
    main()
