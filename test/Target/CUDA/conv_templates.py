#!/usr/bin/env python3
"""Convolution regions on the implicit-GEMM templates, against onnxruntime.

Usage: conv_templates.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                         [--only NAME,...] [--list] [--wgmma true|false]

Each model is one convolution shape the templates must cover (1x1, 3x3 with
pad 1, stride 2 with pads, the 7x7 stride-2 stem on 3 channels, dilation 2,
groups 2 with 3 channels per group, odd channel counts, depthwise ones on
their CUDA-core kernel, a MobileNetV2 block), most with the
epilogue a CNN gives it (bias, batch norm, residual add, relu), plus a
residual block whose add reads the block's input inside the second
convolution's region. Every model is compiled in NHWC in four precisions,
run on the emulator and compared with onnxruntime fp32 on the same seeded
input. It prints one line per model and precision:

  <model> <precision>: <configs> rel-err <e> (bound <b>), worst element
                       <r> of its bound ... ok|FAIL

with the kernel configs of its convolution regions (kilnc --stats lists
each region's kernel). It exits 1 if a variant fails to compile, run or
meet its bound, or if a region keeps a generic kernel.

Bounds, on the relative error of the output's norm (docs/passes.md,
"Precision"), with the per-element bounds that go with them
(scripts/numerics.py): fp32 1e-4 (FFMA, the same sums in another order); tf32 and
fp16 5e-3 (10-bit mantissas); bf16 2e-2 (8-bit mantissas). Operands are
rounded, products accumulate in fp32.

--wgmma true|false compiles bf16, fp16 and tf32 only, with kilnc
--wgmma=true|false, and fails a variant whose regions are not all on the sm_90a wgmma kernels
(true) or all on mma.sync (false); depthwise regions are on their CUDA-core
kernel (dw_simt) either way.
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_index_arithmetic import (  # noqa: E402
    compile_with_stats, contraction_report, emu_compare, model, node, prepare)

F = TensorProto.FLOAT
RNG = np.random.default_rng(11)


def weight(name, *shape):
    # He-style scale keeps activations O(1) through the blocks.
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return numpy_helper.from_array(
        (RNG.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name)


def batch_norm(prefix, channels):
    return [
        numpy_helper.from_array(
            (RNG.random(channels) + 0.5).astype(np.float32), prefix + "_s"),
        numpy_helper.from_array(
            (0.1 * RNG.standard_normal(channels)).astype(np.float32), prefix + "_o"),
        numpy_helper.from_array(
            (0.1 * RNG.standard_normal(channels)).astype(np.float32), prefix + "_m"),
        numpy_helper.from_array(
            (RNG.random(channels) + 0.5).astype(np.float32), prefix + "_v"),
    ]


def bn_node(x, prefix, y):
    return node("BatchNormalization",
                [x, prefix + "_s", prefix + "_o", prefix + "_m", prefix + "_v"], [y])


def conv_bn_relu(x_shape, o, k, residual=False, bias=True, **conv):
    """Conv (+ bias) -> BatchNormalization [-> Add residual input] -> Relu."""
    c = x_shape[1] // conv.get("group", 1)
    inits = [weight("w", o, c, k, k)] + batch_norm("bn", o)
    inputs = ["x", "w"]
    if bias:
        inits.append(weight("b", o))
        inputs.append("b")
    nodes = [node("Conv", inputs, ["c"], kernel_shape=[k, k], **conv),
             bn_node("c", "bn", "n")]
    graph_inputs = [("x", F, x_shape)]
    last = "n"
    if residual:
        nodes.append(node("Add", ["n", "x"], ["a"]))
        last = "a"
    nodes.append(node("Relu", [last], ["y"]))
    return model(nodes, graph_inputs, ["y"], inits)


def residual_block():
    """A stem convolution, then ResNet's basic block: its add reads the
    stem's output in NHWC, inside the second convolution's region."""
    inits = ([weight("w0", 16, 8, 1, 1), weight("w1", 16, 16, 3, 3),
              weight("w2", 16, 16, 3, 3)] + batch_norm("bn0", 16) +
             batch_norm("bn1", 16) + batch_norm("bn2", 16))
    nodes = [node("Conv", ["x", "w0"], ["c0"]),
             bn_node("c0", "bn0", "n0"), node("Relu", ["n0"], ["x0"]),
             node("Conv", ["x0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             bn_node("c1", "bn1", "n1"), node("Relu", ["n1"], ["r1"]),
             node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             bn_node("c2", "bn2", "n2"), node("Add", ["n2", "x0"], ["a"]),
             node("Relu", ["a"], ["r2"]),
             node("GlobalAveragePool", ["r2"], ["y"])]
    return model(nodes, [("x", F, [2, 8, 8, 8])], ["y"], inits)


def inverted_residual():
    """MobileNetV2's block: 1x1 expand + BN + Clip(0, 6), depthwise 3x3 +
    BN + Clip, 1x1 project + BN, residual add."""
    clip = [numpy_helper.from_array(np.array(0, np.float32), "lo"),
            numpy_helper.from_array(np.array(6, np.float32), "hi")]
    inits = ([weight("we", 24, 8, 1, 1), weight("wd", 24, 1, 3, 3),
              weight("wp", 8, 24, 1, 1)] + batch_norm("bne", 24) +
             batch_norm("bnd", 24) + batch_norm("bnp", 8) + clip)
    nodes = [node("Conv", ["x", "we"], ["ce"]), bn_node("ce", "bne", "ne"),
             node("Clip", ["ne", "lo", "hi"], ["re"]),
             node("Conv", ["re", "wd"], ["cd"], group=24, pads=[1, 1, 1, 1],
                  kernel_shape=[3, 3]),
             bn_node("cd", "bnd", "nd"),
             node("Clip", ["nd", "lo", "hi"], ["rd"]),
             node("Conv", ["rd", "wp"], ["cp"]), bn_node("cp", "bnp", "np"),
             node("Add", ["np", "x"], ["y"])]
    return model(nodes, [("x", F, [2, 8, 7, 7])], ["y"], inits)


MODELS = {
    "1x1": lambda: conv_bn_relu([1, 16, 6, 6], 24, 1),
    "3x3-pad1": lambda: conv_bn_relu([2, 8, 7, 7], 16, 3, pads=[1, 1, 1, 1]),
    "stride2-pad": lambda: conv_bn_relu([1, 8, 9, 9], 8, 3, strides=[2, 2],
                                        pads=[1, 0, 1, 2]),
    "7x7-stem": lambda: conv_bn_relu([1, 3, 20, 20], 16, 7, bias=False,
                                     strides=[2, 2], pads=[3, 3, 3, 3]),
    "dilation2": lambda: conv_bn_relu([1, 8, 10, 10], 8, 3, dilations=[2, 2],
                                      pads=[2, 2, 2, 2], residual=True),
    "groups2": lambda: conv_bn_relu([1, 6, 8, 8], 6, 3, group=2,
                                    pads=[1, 1, 1, 1], residual=True),
    "odd-channels": lambda: conv_bn_relu([1, 5, 7, 7], 7, 3, pads=[1, 1, 1, 1]),
    "residual-block": residual_block,
    # Depthwise (groups = channels): the CUDA-core kernel, 16-byte vectors
    # where the channels allow (16), narrower ones (12: 4 a thread in
    # bf16), scalar (5), with strides, uneven pads, dilation, a residual.
    "depthwise-3x3": lambda: conv_bn_relu([2, 16, 9, 9], 16, 3, group=16,
                                          pads=[1, 1, 1, 1]),
    "depthwise-stride2": lambda: conv_bn_relu([1, 12, 11, 10], 12, 3,
                                              group=12, strides=[2, 2],
                                              pads=[1, 0, 1, 2]),
    "depthwise-5x5-dilated": lambda: conv_bn_relu([1, 5, 12, 12], 5, 5,
                                                  group=5, dilations=[2, 2],
                                                  pads=[4, 4, 4, 4],
                                                  residual=True),
    "depthwise-multiplier2": lambda: conv_bn_relu([1, 8, 6, 6], 16, 3,
                                                  group=8, pads=[1, 1, 1, 1]),
    "inverted-residual": inverted_residual,
}

VARIANTS = [
    ("fp32", 1e-4),
    ("tf32", 5e-3),
    ("bf16", 2e-2),
    ("fp16", 5e-3),
]


def run_variant(args, name, path, feeds, reference, precision, bound):
    work = os.path.join(args.workdir, name, precision)
    os.makedirs(work, exist_ok=True)
    artifact = os.path.join(work, "m.kiln")
    flags = ["--layout=nhwc", f"--precision={precision}"]
    if args.wgmma:
        flags.append(f"--wgmma={args.wgmma}")
    stats, error = compile_with_stats(args.kilnc, path, artifact, flags)
    if error:
        print(f"{name} {precision}: {error} FAIL")
        return False
    report = contraction_report(stats)
    configs = sorted({line.split(": ")[1].split(",")[0] for line in report
                      if line.startswith(("kiln_conv_", "kiln_dwconv_"))})
    if not configs or any(line.startswith("generic") for line in report):
        print(f"{name} {precision}: not on template kernels: {report} FAIL")
        return False
    family = {"true": "wgmma_", "false": "mma_"}.get(args.wgmma)
    if family:
        family += "tf32" if precision == "tf32" else "f16"
    # Depthwise regions have their own CUDA-core kernel in every mode.
    if family and not all(c.startswith((family, "dw_simt")) for c in configs):
        print(f"{name} {precision}: not all on {family} kernels: {configs} FAIL")
        return False
    result, error = emu_compare(args.kiln_run, artifact, work, feeds,
                                reference, bound)
    if error:
        print(f"{name} {precision}: {error} FAIL")
        return False
    print(f"{name} {precision}: {'; '.join(configs)} {result.figures()} "
          f"{'ok' if result.ok else 'FAIL'}")
    return result.ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--wgmma", choices=["true", "false"])
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    names = args.only.split(",") if args.only else list(MODELS)
    failed = 0
    for name in names:
        path, feeds, reference = prepare(args.workdir, name, MODELS[name]())
        for precision, bound in VARIANTS:
            if args.wgmma and precision not in ("bf16", "fp16", "tf32"):
                continue
            failed += not run_variant(args, name, path, feeds, reference,
                                      precision, bound)
    print(f"{len(names)} models, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
