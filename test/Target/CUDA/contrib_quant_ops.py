#!/usr/bin/env python3
"""com.microsoft quantized ops (and per-channel QLinearConv) on emu against
onnxruntime (issue 26).

Usage: contrib_quant_ops.py WORKDIR [--kilnc K] [--kiln-run R] [--seed 0]

The ONNX node tests have no com.microsoft ops, so this builds one small
model per op (seeded full-range int8/uint8 inputs, per-tensor scales and
zero points as initializers), runs it with onnxruntime 1.20.1 (graph
optimizations off; onnxruntime implements these ops) and with kilnc +
kiln-run --device emu, and compares:

  - quantized (integer) outputs: every element within one quantization
    step, and at most 1% of them off at all. Kiln's float intermediate runs
    in another order than MLAS's (and in f64 where MLAS uses f32), so a
    value within an ulp of a rounding tie may round the other way; any
    other difference is a bug;
  - float outputs (MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm
    without y_scale): scripts/numerics.py's fp32 rule.

One line per op: `<op>: <n> elements, <k> off by one[, rel-err ...] ok|FAIL`.
Teeth: KILN_TEST_CORRUPT_OP=<op> adds 2 to one element of that op's output.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import numerics  # noqa: E402

MS = "com.microsoft"


def scalar(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def cases(rng):
    """(name, node, inputs {name: array}, initializers, output type)."""
    i8 = lambda shape: rng.integers(-128, 128, shape).astype(np.int8)  # noqa: E731
    u8 = lambda shape: rng.integers(0, 256, shape).astype(np.uint8)  # noqa: E731
    # Weights of the u8 x s8 products in 7 bits, as onnxruntime's quantizer
    # makes them with reduce_range: MLAS multiplies u8 by s8 with AVX2's
    # vpmaddubsw on hosts without VNNI, which saturates each pair's sum to
    # int16 (255 * 128 * 2 > 32767), so full-range weights give a reference
    # that depends on the CPU (on this 2-core AVX2 machine MatMulIntegerToFloat
    # was off by 0.15 rel-err against an exact int64 product, Kiln's result).
    i7 = lambda shape: rng.integers(-64, 64, shape).astype(np.int8)  # noqa: E731
    out = []
    binary_inits = [scalar("as", 0.05, np.float32), scalar("az", 3, np.int8),
                    scalar("bs", 0.03, np.float32), scalar("bz", -5, np.int8),
                    scalar("cs", 0.07, np.float32), scalar("cz", 2, np.int8)]
    for op in ("QLinearAdd", "QLinearMul"):
        out.append((op, helper.make_node(
            op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"],
            domain=MS), {"a": i8((4, 33)), "b": i8((33,))},
            binary_inits if op == "QLinearAdd" else
            [scalar("as", 0.05, np.float32), scalar("az", 3, np.int8),
             scalar("bs", 0.03, np.float32), scalar("bz", -5, np.int8),
             scalar("cs", 0.9, np.float32), scalar("cz", 2, np.int8)],
            TensorProto.INT8))
    unary_inits = [scalar("xs", 0.06, np.float32), scalar("xz", 120, np.uint8),
                   scalar("ys", 1 / 255.0, np.float32),
                   scalar("yz", 0, np.uint8)]
    out.append(("QLinearSigmoid", helper.make_node(
        "QLinearSigmoid", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS),
        {"x": u8((8, 40))}, unary_inits, TensorProto.UINT8))
    out.append(("QLinearLeakyRelu", helper.make_node(
        "QLinearLeakyRelu", ["x", "xs", "xz", "ys2", "yz2"], ["y"],
        domain=MS, alpha=0.1), {"x": u8((8, 40))},
        unary_inits[:2] + [scalar("ys2", 0.04, np.float32),
                           scalar("yz2", 30, np.uint8)], TensorProto.UINT8))
    # A classifier's softmax as the quantizer writes it: the original
    # Softmax's opset and axis as attributes, u8 probabilities (1/256).
    for name, opset, axis in (("QLinearSoftmax", 13, -1),
                              ("QLinearSoftmaxOpset11", 11, 1)):
        out.append((name, helper.make_node(
            "QLinearSoftmax", ["x", "xs", "xz", "ys3", "yz"], ["y"],
            domain=MS, opset=opset, axis=axis), {"x": u8((8, 40))},
            unary_inits[:2] + [scalar("ys3", 1 / 256.0, np.float32),
                               scalar("yz", 0, np.uint8)], TensorProto.UINT8))
    out.append(("QLinearConcat", helper.make_node(
        "QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"],
        ["y"], domain=MS, axis=1), {"a": u8((2, 3, 5)), "b": u8((2, 4, 5))},
        [scalar("ys", 0.05, np.float32), scalar("yz", 128, np.uint8),
         scalar("as", 0.05, np.float32), scalar("az", 128, np.uint8),
         scalar("bs", 0.02, np.float32), scalar("bz", 100, np.uint8)],
        TensorProto.UINT8))
    out.append(("QLinearGlobalAveragePool", helper.make_node(
        "QLinearGlobalAveragePool", ["x", "xs", "xz", "ys2", "yz2"], ["y"],
        domain=MS, channels_last=0), {"x": u8((2, 6, 7, 7))},
        unary_inits[:2] + [scalar("ys2", 0.01, np.float32),
                           scalar("yz2", 10, np.uint8)], TensorProto.UINT8))
    out.append(("QLinearAveragePool", helper.make_node(
        "QLinearAveragePool", ["x", "xs", "xz", "ys2", "yz2"], ["y"],
        domain=MS, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        {"x": u8((1, 4, 9, 9))},
        unary_inits[:2] + [scalar("ys2", 0.05, np.float32),
                           scalar("yz2", 10, np.uint8)], TensorProto.UINT8))
    w = i7((24, 16))
    out.append(("MatMulIntegerToFloat", helper.make_node(
        "MatMulIntegerToFloat", ["a", "w", "as", "ws", "az", "wz", "bias"],
        ["y"], domain=MS), {"a": u8((5, 24))},
        [numpy_helper.from_array(w, "w"), scalar("as", 0.02, np.float32),
         numpy_helper.from_array(
             rng.uniform(0.001, 0.01, 16).astype(np.float32), "ws"),
         scalar("az", 120, np.uint8), scalar("wz", 0, np.int8),
         numpy_helper.from_array(rng.standard_normal(16).astype(np.float32),
                                 "bias")], TensorProto.FLOAT))
    out.append(("DynamicQuantizeMatMul", helper.make_node(
        "DynamicQuantizeMatMul", ["a", "w", "ws", "wz", "bias"], ["y"],
        domain=MS), {"a": rng.standard_normal((5, 24)).astype(np.float32)},
        [numpy_helper.from_array(w, "w"), scalar("ws", 0.01, np.float32),
         scalar("wz", 0, np.int8),
         numpy_helper.from_array(rng.standard_normal(16).astype(np.float32),
                                 "bias")], TensorProto.FLOAT))
    qa, qb = u8((6, 20)), i7((20, 12))
    out.append(("QGemm", helper.make_node(
        "QGemm", ["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"], ["y"],
        domain=MS, alpha=1.0), {"a": qa},
        [scalar("as", 0.02, np.float32), scalar("az", 110, np.uint8),
         numpy_helper.from_array(qb, "b"), scalar("bs", 0.01, np.float32),
         scalar("bz", 0, np.int8),
         numpy_helper.from_array(rng.integers(-500, 500, 12).astype(np.int32),
                                 "c"),
         scalar("ys", 0.05, np.float32), scalar("yz", 128, np.uint8)],
        TensorProto.UINT8))
    # QLinearConv (default domain) with per-output-channel weight scales,
    # which the node test (one scale) does not reach; 3x3, pad 1, stride 2.
    out.append(("QLinearConvPerChannel", helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
        ["y"], pads=[1, 1, 1, 1], strides=[2, 2]), {"x": u8((1, 8, 9, 9))},
        [scalar("xs", 0.02, np.float32), scalar("xz", 120, np.uint8),
         numpy_helper.from_array(i7((6, 8, 3, 3)), "w"),
         numpy_helper.from_array(
             rng.uniform(0.002, 0.02, 6).astype(np.float32), "ws"),
         numpy_helper.from_array(np.zeros(6, np.int8), "wz"),
         scalar("ys", 0.5, np.float32), scalar("yz", 100, np.uint8),
         numpy_helper.from_array(rng.integers(-2000, 2000, 6).astype(np.int32),
                                 "b")], TensorProto.UINT8))
    return out


def run_case(args, name, node, feeds, inits, out_type):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    inputs = [helper.make_tensor_value_info(
        k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
        for k, v in feeds.items()]
    graph = helper.make_graph([node], name, inputs,
                              [helper.make_tensor_value_info("y", out_type,
                                                             None)], inits)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    path = os.path.join(work, "model.onnx")
    onnx.save(model, path)
    want = numerics.ort_session(path).run(["y"], feeds)[0]
    artifact = os.path.join(work, "model.kiln")
    compiled = subprocess.run([args.kilnc, path, "-o", artifact],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        print(f"{name}: kilnc failed: {compiled.stderr.strip()} FAIL")
        return False
    command = [args.kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(work, "out")]
    for k, v in feeds.items():
        file = os.path.join(work, k + ".npy")
        np.save(file, v)
        command += ["-i", f"{k}={file}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode != 0:
        print(f"{name}: kiln-run failed: {ran.stderr.strip()} FAIL")
        return False
    got = np.load(os.path.join(work, "out", "y.npy"))
    if os.environ.get("KILN_TEST_CORRUPT_OP") == name:
        got = got.copy()
        got.reshape(-1)[got.size // 2] += 2
    if got.shape != want.shape or got.dtype != want.dtype:
        print(f"{name}: got {got.dtype}{list(got.shape)}, onnxruntime "
              f"{want.dtype}{list(want.shape)} FAIL")
        return False
    if np.issubdtype(want.dtype, np.integer):
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        off = int(np.count_nonzero(diff))
        ok = int(diff.max()) <= 1 and off <= 0.01 * diff.size
        print(f"{name}: {diff.size} elements, {off} off by one (largest "
              f"difference {int(diff.max())}) {'ok' if ok else 'FAIL'}")
        return ok
    result = numerics.compare(got, want, "fp32", name)
    print(f"{name}: {got.size} elements, {result.figures()} "
          f"{'ok' if result.ok else 'FAIL'}")
    return result.ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    failures = 0
    for case in cases(rng):
        failures += not run_case(args, *case)
    print(f"contrib quantized ops: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
