#!/usr/bin/env python3
"""Quantized matmuls and convolutions routed to the int8 tensor-core kernel.

Usage: int8_routing.py WORKDIR [--kilnc K] [--kiln-run R] [--case NAME]
                        [--wgmma=false]

Seven seeded models, compiled by kilnc's default pipeline (where
kiln-fuse-quantized puts each quantized matmul chain into a
quantized_matmul region and, once kiln-assign-layout has made them NHWC,
each convolution chain into a quantized_conv region, and
kiln-match-contractions gives them an int8 tensor-core kernel: wgmma_s8 on
sm_90, kilnc's default target, or mma_s8 with --wgmma=false, which is
passed on to kilnc), run on emu, and checked element by element:

  qop  an MLP (x [2,16,64] -> MatMul 64x128 -> Add -> Relu -> MatMul
       128x40) quantized by onnxruntime's quantize_static in QOperator
       format (QLinearMatMul, u8 activations, s8 weights per tensor) with
       reduce_range (7-bit weights). Reference: onnxruntime's own run
       (graph optimizations off), which must agree bit for bit: its
       QLinearMatMul is MLAS's integer GEMM plus the same f32 requantize
       (MlasRequantizeOutput) the kernel implements, and 7-bit weights keep
       MLAS's AVX2 u8 x s8 pair sums (vpmaddubsw, saturating at int16) from
       saturating on hosts without VNNI.
  qdq  the same MLP in QDQ format with per-channel weights. onnxruntime
       (optimizations off) runs it unfused: DequantizeLinear, an f32 MatMul,
       QuantizeLinear, so its product is rounded in f32 before it is
       requantized, and the kernel's is the exact integer sum times the f32
       multiplier (a_scale * w_scale) / y_scale. Bound: every element within
       one output quantization step of onnxruntime's (the two products
       differ by f32 rounding, far below a step, and can only fall on
       opposite sides of a rounding boundary); the count of differing
       elements is printed.
  int  MatMulInteger with a constant u8 zero point for A and a per-column
       s8 zero point for B (the kernel's row sums), i32 output [24, 48],
       K = 96. Reference: the int64 sum in numpy, exact.
  cnn-qop, cnn-qdq
       a CNN (x [2,3,10,10] NCHW -> Conv 3->16 3x3 pad 1 + bias -> Relu ->
       Conv 16->24 3x3 stride 2 + bias -> Conv 24->8 1x1, whose filter
       transpose to NHWC is a reshape) quantized like qop and qdq; the
       same bounds and references (onnxruntime's QLinearConv is MLAS's
       integer convolution plus MlasRequantizeOutput, as the kernel;
       reduce_range for the same VNNI reason). The image is NCHW, so the
       compile also checks that the int8 model gets the NHWC layout.
  res-qdq
       a ResNet basic block (x [2,3,8,8] -> Conv 3->16 + Relu -> Conv
       16->16 + Relu -> Conv 16->16, added to the first Relu's output,
       Relu) quantized like qdq: onnxruntime's quantizer removes the Relus
       (folded into the u8 quantizations) and wraps the add in QDQ; the
       last convolution's kernel also runs that residual block (its
       dequantization, the add of the dequantized first activation and the
       quantization; --stats must show exactly one `+ residual`).
       Bound as qdq (the block itself is onnxruntime's f32 steps exactly).
  gemm-qdq
       a Gemm with transB = 1 and a bias (x [16,64], W [40,64]) quantized
       like qdq: the [N][K] weight is read as it is, and the dequantized
       bias added before the requantization becomes the kernel's int32
       bias. Bound as qdq.
  conv-int
       ConvInteger (u8 x [1,20,9,9] with zero point 5, s8 filter [32,20,3,3]
       with per-channel zero points, pad 1, stride 1), i32 output.
       Reference: the int64 sum in numpy over (x - 5) zero-padded, exact
       (the kernel reads the zero point in padding pixels).

For each it also checks that `kilnc --stats` shows every matmul on the
expected family and no int8 fallback, and that the PTX holds that
family's int8 instruction (wgmma m64nNk32 .s32 on 8-bit operands, or
mma.sync m16n8k32). One line per model: "<name>: ... ok|FAIL".
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import numerics  # noqa: E402


def save(graph, path, opset=13):
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)


def make_mlp(workdir):
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(128) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 40)) * 0.1).astype(np.float32)
    path = os.path.join(workdir, "mlp.onnx")
    save(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Add", ["h", "b1"], ["hb"]),
         helper.make_node("Relu", ["hb"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 40])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")]), path)
    return path


def quantize(fp32, out, fmt, per_channel, reduce_range, shape=(2, 16, 64)):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                          QuantType, quantize_static)

    class Batches(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(11)
            self.batches = iter(
                [{"x": rng.standard_normal(shape).astype(np.float32)}
                 for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(fp32, out, Batches(),
                    quant_format=getattr(QuantFormat, fmt),
                    activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=per_channel,
                    reduce_range=reduce_range)


def make_matmul_integer(workdir):
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (96, 48)).astype(np.int8)
    zb = rng.integers(-3, 4, 48).astype(np.int8)
    path = os.path.join(workdir, "int.onnx")
    save(helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "w", "za", "zb"], ["y"])],
        "matmul_integer",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [24, 96])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [24, 48])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array(7, np.uint8), "za"),
         numpy_helper.from_array(zb, "zb")]), path)
    return path, w, zb


def compile_and_run(args, name, model, feeds):
    """kilnc (with --stats) and kiln-run on emu; returns (outputs, notes)
    or raises with a one-line reason."""
    artifact = os.path.join(args.workdir, name + ".kiln")
    compiled = subprocess.run([args.kilnc, model, "-o", artifact, "--stats"]
                              + args.kilnc_flags,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        raise RuntimeError("kilnc failed: " + (
            compiled.stderr.strip().splitlines() or ["?"])[0])
    stats = compiled.stdout + compiled.stderr
    kernels = len(re.findall(r"kiln_q(?:gemm|conv)_\d+: " + args.family + " ",
                             stats))
    # Kernels whose epilogue also runs a QDQ residual block.
    args.residuals = len(re.findall(r"kiln_q(?:gemm|conv)_\d+: .*; \+ residual ",
                                    stats))
    if "int8 fallbacks:" in stats:
        raise RuntimeError("kilnc --stats lists int8 fallbacks")
    ptx = subprocess.run([args.kilnc, model, "--emit=ptx", "-o", "-"]
                         + args.kilnc_flags, capture_output=True, text=True)
    instruction = (r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.s32\."
                   r"[us]8\.[us]8" if args.family == "wgmma_s8" else
                   r"mma\.sync\.aligned\.m16n8k32\.row\.col\.s32\."
                   r"[us]8\.[us]8\.s32")
    mmas = len(re.findall(instruction, ptx.stdout))
    if ptx.returncode != 0 or mmas == 0:
        raise RuntimeError("the PTX has no " + args.family + " instruction")
    inputs = []
    for key, value in feeds.items():
        path = os.path.join(args.workdir, f"{name}.{key}.npy")
        np.save(path, value)
        inputs += ["-i", f"{key}={path}"]
    out = os.path.join(args.workdir, name + ".out")
    ran = subprocess.run([args.kiln_run, artifact, "--device", "emu", "-o",
                          out] + inputs, capture_output=True, text=True)
    if ran.returncode != 0:
        raise RuntimeError("kiln-run failed: " + (
            ran.stderr.strip().splitlines() or ["?"])[0])
    return out, kernels


def make_cnn(workdir):
    rng = np.random.default_rng(17)
    w1 = (rng.standard_normal((16, 3, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(16) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((24, 16, 3, 3)) * 0.1).astype(np.float32)
    b2 = (rng.standard_normal(24) * 0.1).astype(np.float32)
    w3 = (rng.standard_normal((8, 24, 1, 1)) * 0.2).astype(np.float32)
    path = os.path.join(workdir, "cnn.onnx")
    save(helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["h"], pads=[1] * 4),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Conv", ["r", "w2", "b2"], ["h2"], strides=[2, 2]),
         helper.make_node("Conv", ["h2", "w3"], ["y"])],
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 4, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2"),
         numpy_helper.from_array(w3, "w3")]),
        path)
    return path


def make_res(workdir):
    """A ResNet basic block: Conv-Relu, then Conv-Relu-Conv whose sum with
    the first Relu's output goes through Relu (x [2,3,8,8] -> [2,16,8,8])."""
    rng = np.random.default_rng(41)
    weights = {
        "w0": rng.standard_normal((16, 3, 3, 3)) * 0.3,
        "b0": rng.standard_normal(16) * 0.1,
        "w1": rng.standard_normal((16, 16, 3, 3)) * 0.15,
        "b1": rng.standard_normal(16) * 0.1,
        "w2": rng.standard_normal((16, 16, 3, 3)) * 0.15,
        "b2": rng.standard_normal(16) * 0.1}
    path = os.path.join(workdir, "res.onnx")
    save(helper.make_graph(
        [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1] * 4),
         helper.make_node("Relu", ["c0"], ["r0"]),
         helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1] * 4),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4),
         helper.make_node("Add", ["c2", "r0"], ["s"]),
         helper.make_node("Relu", ["s"], ["y"])],
        "res",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 8, 8])],
        [numpy_helper.from_array(v.astype(np.float32), k)
         for k, v in weights.items()]), path)
    return path


def make_gemm(workdir):
    rng = np.random.default_rng(37)
    w = (rng.standard_normal((40, 64)) * 0.1).astype(np.float32)
    b = (rng.standard_normal(40) * 0.1).astype(np.float32)
    path = os.path.join(workdir, "gemm.onnx")
    save(helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], "gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 40])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]),
        path)
    return path


def make_conv_integer(workdir):
    rng = np.random.default_rng(29)
    w = rng.integers(-128, 128, (32, 20, 3, 3)).astype(np.int8)
    zw = rng.integers(-3, 4, 32).astype(np.int8)
    path = os.path.join(workdir, "conv-int.onnx")
    save(helper.make_graph(
        [helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"],
                          pads=[1] * 4)],
        "conv_integer",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 20, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 32, 9, 9])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array(5, np.uint8), "zx"),
         numpy_helper.from_array(zw, "zw")]), path)
    return path, w, zw


def conv_int64(x, w, pad):
    """Stride-1 convolution of int64 NCHW x with int64 OIHW w, zero
    padded: the reference, by the definition (one shifted product per tap)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), np.int64)
    xp[:, :, pad:pad + h, pad:pad + wd] = x
    p, q = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, o, p, q), np.int64)
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + p, j:j + q],
                           w[:, :, i, j])
    return y


def check_mlp(args, fmt):
    res = fmt.startswith("res-")
    conv = fmt.startswith("cnn-") or res
    gemm = fmt.startswith("gemm-")
    kind = fmt.split("-")[-1]
    base = "res" if res else "cnn" if conv else "gemm" if gemm else "mlp"
    name = fmt
    shape = ((2, 3, 8, 8) if res else (2, 3, 10, 10) if conv else
             (16, 64) if gemm else (2, 16, 64))
    fp32 = {"cnn": make_cnn, "gemm": make_gemm, "mlp": make_mlp,
            "res": make_res}[base](args.workdir)
    model = os.path.join(args.workdir, f"{base}.{kind}.onnx")
    quantize(fp32, model, "QOperator" if kind == "qop" else "QDQ",
             per_channel=kind == "qdq", reduce_range=kind == "qop",
             shape=shape)
    x = np.random.default_rng(23).standard_normal(shape).astype(np.float32)
    out, kernels = compile_and_run(args, name, model, {"x": x})
    got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
    want = numerics.ort_session(model).run(["y"], {"x": x})[0].astype(
        np.float64)
    if os.environ.get("KILN_TEST_CORRUPT"):
        got.reshape(-1)[got.size // 2] += float(os.environ["KILN_TEST_CORRUPT"])
    # The output's step: the last DequantizeLinear's scale.
    graph = onnx.load(model).graph
    dq = [n for n in graph.node if n.op_type == "DequantizeLinear"
          and n.output[0] == "y"][0]
    init = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    step = float(init[dq.input[1]])
    diff = np.abs(got - want)
    differing = int(np.count_nonzero(diff))
    if kind == "qop":
        ok = differing == 0
        bound = "bit-exact"
    else:
        ok = bool(np.all(diff <= step * (1 + 1e-6)))
        bound = f"<= 1 step ({step:.3g})"
    ok = ok and kernels == (3 if conv else 1 if gemm else 2)
    # The basic block's add, Relu and quantization run in the last
    # convolution's epilogue.
    ok = ok and args.residuals == (1 if res else 0)
    residual = f" ({args.residuals} with the residual block)" if res else ""
    print(f"{name}: {kernels} {args.family} kernels{residual}, {differing} of {got.size} "
          f"elements differ from onnxruntime, max {diff.max() / step:.2f} "
          f"steps, bound {bound} {'ok' if ok else 'FAIL'}")
    return ok


def exact_against(args, name, out, kernels, want):
    """The i32 output in `out` equals the int64 reference `want` exactly,
    on one int8 kernel; one line, as the other cases print."""
    got = np.load(os.path.join(out, "y.npy")).astype(np.int64)
    if os.environ.get("KILN_TEST_CORRUPT"):
        got.reshape(-1)[got.size // 2] += 1
    differing = int(np.count_nonzero(got != want))
    ok = differing == 0 and kernels == 1
    print(f"{name}: {kernels} {args.family} kernel, {differing} of {got.size} "
          f"elements differ from the int64 reference, bound exact "
          f"{'ok' if ok else 'FAIL'}")
    return ok


def check_integer(args):
    model, w, zb = make_matmul_integer(args.workdir)
    x = np.random.default_rng(9).integers(0, 256, (24, 96)).astype(np.uint8)
    out, kernels = compile_and_run(args, "int", model, {"x": x})
    want = (x.astype(np.int64) - 7) @ (w.astype(np.int64) -
                                       zb.astype(np.int64))
    return exact_against(args, "int", out, kernels, want)


def check_conv_integer(args):
    model, w, zw = make_conv_integer(args.workdir)
    x = np.random.default_rng(31).integers(0, 256, (1, 20, 9, 9)).astype(
        np.uint8)
    out, kernels = compile_and_run(args, "conv-int", model, {"x": x})
    want = conv_int64(x.astype(np.int64) - 5,
                      w.astype(np.int64) - zw.astype(np.int64)[:, None, None,
                                                               None], 1)
    return exact_against(args, "conv-int", out, kernels, want)


CASES = ["qop", "qdq", "int", "gemm-qdq", "cnn-qop", "cnn-qdq", "res-qdq",
         "conv-int"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--case", choices=CASES, action="append")
    ap.add_argument("--wgmma", choices=["true", "false"], default="true",
                    help="passed to kilnc: false routes to mma_s8")
    args = ap.parse_args()
    args.family = "wgmma_s8" if args.wgmma == "true" else "mma_s8"
    args.kilnc_flags = [] if args.wgmma == "true" else ["--wgmma=false"]
    os.makedirs(args.workdir, exist_ok=True)
    failures = 0
    for case in args.case or CASES:
        try:
            ok = (check_integer(args) if case == "int" else
                  check_conv_integer(args) if case == "conv-int" else
                  check_mlp(args, case))
        except RuntimeError as e:
            print(f"{case}: {e} FAIL")
            ok = False
        failures += not ok
    print(f"int8 routing: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
