#!/usr/bin/env python3
"""The int8 GEMM kernel's outputs against onnxruntime and numpy (issue 26).

KilnContractionKernelTests' CasesForOnnxruntime runs the int8 mma.sync
kernel (Family::MmaS8) on emu and writes each case's operands and output
to DIR (cases.txt lists them). For each, this script builds the ONNX node
onnxruntime would run (QLinearMatMul, or MatMulInteger for an int32 output)
with the same bytes (B transposed back to [K][N]), runs it on onnxruntime's
CPU provider with graph optimizations off, and computes a numpy int64
reference: acc = (a - za) @ (b - zb), then f32(acc) * f32(scale) (the
scale being (a_scale * b_scale) / y_scale in f32, left to right), clipped
to [lo - zy, hi - zy], rounded half to even (np.rint), + zy. Both must
equal the kernel's output exactly (integer outputs; no tolerance). The
script also counts the outputs where the f32 product is an exact .5 tie
that the float64 product would round the other way: the case with scale
0.1f must have some, or it tests nothing.

A "conv" line is an implicit-GEMM NHWC convolution (u8 image, s8 OIHW
filter with per-channel scales, int32 bias): onnxruntime runs QLinearConv
on the image transposed to NCHW, and the numpy reference is a direct
convolution whose padding adds nothing ((za - za) * w), as onnxruntime's.
Its filters are 7-bit: onnxruntime's u8 x s8 convolution on AVX2 without
VNNI adds pairs of products in saturating 16 bits (vpmaddubsw; its docs
recommend reduce_range there), so it is exact only when no pair can pass
32767.

KILN_TEST_CORRUPT=1 moves one kernel output by 1 first (the test's teeth).
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TYPES = {"uint8": (np.uint8, TensorProto.UINT8),
         "int8": (np.int8, TensorProto.INT8),
         "int32": (np.int32, TensorProto.INT32)}


def run_onnxruntime(node, inputs, inits, out_name, out_type, out_shape):
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, TYPES[str(v.dtype)][1], v.shape)
         for n, v in inputs.items()],
        [helper.make_tensor_value_info(out_name, TYPES[out_type][1],
                                       out_shape)],
        [numpy_helper.from_array(v, n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, inputs)[0]


def check_conv(directory, f):
    name = f[0]
    n, h, w, c, o, k, stride, pad = (int(v) for v in f[2:10])
    zx, zy = int(f[10]), int(f[11])
    x_scale = np.float32(float.fromhex(f[12]))
    y_scale = np.float32(float.fromhex(f[13]))
    w_scales = np.array([float.fromhex(v) for v in f[15:15 + int(f[14])]],
                        np.float32)
    path = os.path.join(directory, name)
    x = np.fromfile(path + ".x.bin", np.uint8).reshape(n, h, w, c)
    wt = np.fromfile(path + ".w.bin", np.int8).reshape(o, c, k, k)
    bias = np.fromfile(path + ".bias.bin", np.int32)
    p = (h + 2 * pad - k) // stride + 1
    q = (w + 2 * pad - k) // stride + 1
    got = np.fromfile(path + ".out.bin", np.uint8).reshape(n, p, q, o)
    if os.environ.get("KILN_TEST_CORRUPT"):
        got = got.copy()
        got[n // 2, p // 2, q // 2, o // 2] += 1

    # numpy: pad with the zero point (its x - zx is 0), then correlate.
    xs = np.pad(x.astype(np.int64) - zx, ((0, 0), (pad, pad), (pad, pad),
                                           (0, 0)))
    acc = np.zeros((n, p, q, o), np.int64)
    for i in range(k):
        for j in range(k):
            window = xs[:, i:i + stride * p:stride, j:j + stride * q:stride, :]
            acc += window @ wt[:, :, i, j].astype(np.int64).T
    acc += bias
    scale = ((x_scale * w_scales).astype(np.float32) / y_scale).astype(
        np.float32)
    product = acc.astype(np.int32).astype(np.float32) * scale
    clipped = np.clip(product, np.float32(0 - zy), np.float32(255 - zy))
    want = (np.rint(clipped).astype(np.int64) + zy).astype(np.uint8)

    node = helper.make_node(
        "QLinearConv",
        ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp",
         "bias"], ["y"], kernel_shape=[k, k], strides=[stride, stride],
        pads=[pad, pad, pad, pad])
    ref = run_onnxruntime(node, {"x": x.transpose(0, 3, 1, 2).copy()}, {
        "x_scale": np.array(x_scale, np.float32),
        "x_zp": np.array(zx, np.uint8), "w": wt, "w_scale": w_scales,
        "w_zp": np.zeros(o, np.int8), "y_scale": np.array(y_scale, np.float32),
        "y_zp": np.array(zy, np.uint8), "bias": bias}, "y", "uint8",
        [n, o, p, q]).transpose(0, 2, 3, 1)
    off_ort = int((got != ref).sum())
    off_numpy = int((got != want).sum())
    saturated = int(((got == 0) | (got == 255)).sum())
    ok = off_ort == 0 and off_numpy == 0
    print(f"{name}: {got.size} elements ({saturated} saturated), {off_ort} "
          f"differ from onnxruntime, {off_numpy} from numpy "
          f"{'ok' if ok else 'FAIL'}")
    return ok, 0


def check(directory, line):
    f = line.split()
    if f[1] == "conv":
        return check_conv(directory, f)
    name, m, n, k = f[0], int(f[1]), int(f[2]), int(f[3])
    a_type, b_type, out_type = f[4], f[5], f[6]
    za, zy, has_zb = int(f[7]), int(f[8]), f[9] == "1"
    a_scale, y_scale = np.float32(float.fromhex(f[10])), np.float32(float(f[11]))
    b_scales = np.array([float.fromhex(v) for v in f[13:13 + int(f[12])]],
                        np.float32)
    path = os.path.join(directory, name)
    a = np.fromfile(path + ".a.bin", TYPES[a_type][0]).reshape(m, k)
    b = np.fromfile(path + ".b.bin", TYPES[b_type][0]).reshape(n, k).T.copy()
    zb = np.fromfile(path + ".zb.bin", np.int32)
    got = np.fromfile(path + ".out.bin", TYPES[out_type][0]).reshape(m, n)
    if os.environ.get("KILN_TEST_CORRUPT"):
        got = got.copy()
        got[m // 2, n // 2] += 1

    acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb.astype(np.int64))
    a_zp = np.array(za, TYPES[a_type][0])
    b_zp = (zb.astype(TYPES[b_type][0]) if has_zb
            else np.array(0, TYPES[b_type][0]))
    ties = f64_differs = 0
    if out_type == "int32":
        want = acc.astype(np.int32)
        node = helper.make_node("MatMulInteger", ["a", "b", "a_zp", "b_zp"],
                                ["y"])
        ref = run_onnxruntime(node, {"a": a}, {"b": b, "a_zp": a_zp,
                                               "b_zp": b_zp}, "y", out_type,
                              [m, n])
    else:
        lo, hi = (0, 255) if out_type == "uint8" else (-128, 127)
        scale = ((a_scale * b_scales).astype(np.float32) / y_scale).astype(
            np.float32)
        product = acc.astype(np.int32).astype(np.float32) * scale
        assert product.dtype == np.float32
        tie = product - np.floor(product) == 0.5
        ties = int(tie.sum())
        exact = acc.astype(np.float64) * scale.astype(np.float64)
        f64_differs = int((tie & (np.rint(exact) != np.rint(
            product.astype(np.float64)))).sum())
        clipped = np.clip(product, np.float32(lo - zy), np.float32(hi - zy))
        want = (np.rint(clipped).astype(np.int64) + zy).astype(TYPES[out_type][0])
        b_scale = b_scales if b_scales.size > 1 else b_scales.reshape(())
        node = helper.make_node(
            "QLinearMatMul",
            ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "y_scale", "y_zp"],
            ["y"])
        ref = run_onnxruntime(node, {"a": a}, {
            "a_scale": np.array(a_scale, np.float32), "a_zp": a_zp, "b": b,
            "b_scale": b_scale.astype(np.float32), "b_zp": b_zp,
            "y_scale": np.array(y_scale, np.float32),
            "y_zp": np.array(zy, TYPES[out_type][0])}, "y", out_type, [m, n])
    off_ort = int((got != ref).sum())
    off_numpy = int((got != want).sum())
    ok = off_ort == 0 and off_numpy == 0
    info = np.iinfo(got.dtype)
    saturated = int(((got == info.min) | (got == info.max)).sum())
    print(f"{name}: {got.size} elements ({saturated} saturated), {off_ort} "
          f"differ from onnxruntime, {off_numpy} from numpy, {ties} f32 ties "
          f"({f64_differs} rounded otherwise in float64) "
          f"{'ok' if ok else 'FAIL'}")
    return ok, f64_differs


def main():
    directory = sys.argv[1]
    failures = 0
    differs = 0
    with open(os.path.join(directory, "cases.txt")) as cases:
        for line in cases:
            if line.strip():
                ok, d = check(directory, line)
                failures += not ok
                differs += d
    if differs == 0:
        print("no output exercised the f32 tie rule")
        failures += 1
    print(f"int8 gemm vs onnxruntime: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
