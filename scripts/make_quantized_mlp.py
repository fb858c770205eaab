#!/usr/bin/env python3
"""A transformer-FFN-shaped MLP, fp32 and quantized, for int8 measurements.

Usage: make_quantized_mlp.py OUT_DIR [--tokens 512] [--hidden 512]
                             [--ffn 2048] [--seed 0]

Writes OUT_DIR/mlp.onnx (x [tokens, hidden] -> MatMul hidden x ffn -> Add
-> Relu -> MatMul ffn x hidden, seeded weights) and its quantize_static
versions (onnxruntime's own quantizer, 4 seeded calibration batches, u8
activations, s8 weights): mlp.qdq.onnx (QDQ, per-channel weights) and
mlp.qop.onnx (QOperator, per-tensor). docs/benchmarks.md "int8 matmuls"
compiles them with kilnc and compares emu-model estimates.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    t, h, f = args.tokens, args.hidden, args.ffn
    w1 = (rng.standard_normal((h, f)) / np.sqrt(h)).astype(np.float32)
    b1 = (rng.standard_normal(f) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((f, h)) / np.sqrt(f)).astype(np.float32)
    fp32 = os.path.join(args.out, "mlp.onnx")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"]),
         helper.make_node("Add", ["a", "b1"], ["ab"]),
         helper.make_node("Relu", ["ab"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [t, h])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")]),
        opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, fp32)

    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                          QuantType, quantize_static)

    class Batches(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(args.seed + 1)
            self.batches = iter([{"x": r.standard_normal((t, h)).astype(
                np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    for fmt, per_channel, name in ((QuantFormat.QDQ, True, "qdq"),
                                   (QuantFormat.QOperator, False, "qop")):
        quantize_static(fp32, os.path.join(args.out, f"mlp.{name}.onnx"),
                        Batches(), quant_format=fmt,
                        activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=per_channel)


if __name__ == "__main__":
    main()
