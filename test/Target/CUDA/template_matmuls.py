#!/usr/bin/env python3
"""Matmul regions on the template kernels, through the whole compiler.

Usage: template_matmuls.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                           [--only NAME,...] [--wgmma true|false]
                           [--tma true|false]

Each model is a matmul region that kiln-match-contractions turns into a
tiled kernel from the CUDA C++ templates (test/unittests/
ContractionKernelsTest.cpp checks the kernels alone against float64; this
checks what the compiler makes of real ONNX graphs: operand layouts, folded
batches, generated epilogues, split-K, split-off producers). Shapes hit the
edges: M, N and K off every tile, N = 1, K below one tile, a long K (split-K),
broadcast and full batches, transposed operands, bias, residual and
activation epilogues, a bf16 output. Each is compiled in fp32 (the FFMA
kernel), tf32, bf16 and fp16 (tensor cores), run on emu and compared with
onnxruntime fp32. It prints one line per model and precision:

  <model> <precision>: <kernel configs> rel-err <e> (bound <b>), worst
                       element <r> of its bound ... ok|FAIL

and exits 1 if a variant fails, exceeds its bound, or did not run on a
template kernel (kilnc --stats lists each matmul region's kernel).

Bounds (relative error of the output norm, the project's precision
bounds, docs/passes.md "Precision", with the per-element bounds that go
with them, scripts/numerics.py): fp32 1e-4 (fp32 FMAs in another
order), tf32 and fp16 5e-3 (10-bit mantissas, fp32 accumulation), bf16 2e-2
(8-bit mantissa).

--wgmma true|false compiles bf16, fp16 and tf32 only, with kilnc
--wgmma=true|false, and fails a variant whose matmuls are not all on the sm_90a wgmma kernels
(true) or all on mma.sync (false).

--tma true|false (with --wgmma true) compiles with kilnc --tma=true|false
and fails a variant whose wgmma regions do not all report the TMA producer
(true; except the models in NO_TMA, whose strides TMA cannot take: they
must report cp.async) or all the cp.async producer (false).
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
    return numpy_helper.from_array(
        RNG.standard_normal(shape).astype(np.float32), name)


MODELS = {
    "bias-relu": lambda: model(
        [node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "b"], ["a"]),
         node("Relu", ["a"], ["y"])],
        [("x", F, [100, 72])], ["y"], [weight("w", 72, 40), weight("b", 40)]),
    "batch-folded-tanh": lambda: model(
        [node("MatMul", ["x", "w"], ["m"]), node("Add", ["m", "b"], ["a"]),
         node("Tanh", ["a"], ["y"])],
        [("x", F, [3, 17, 48])], ["y"], [weight("w", 48, 80), weight("b", 80)]),
    "batched-residual-sigmoid": lambda: model(
        [node("MatMul", ["x", "z"], ["m"]), node("Add", ["m", "r"], ["a"]),
         node("Sigmoid", ["a"], ["y"])],
        [("x", F, [2, 33, 40]), ("z", F, [2, 40, 24]), ("r", F, [2, 33, 24])],
        ["y"]),
    "gemm-transposed-alpha-beta": lambda: model(
        [node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
        [("x", F, [9, 64])], ["y"], [weight("w", 30, 64), weight("c", 30)]),
    "split-k": lambda: model(
        [node("MatMul", ["x", "w"], ["y"])],
        [("x", F, [8, 2048])], ["y"], [weight("w", 2048, 16)]),
    # Two long-K GEMMs in a row, each split-K and finished in its own
    # launch by each tile's last split: they share the per-tile semaphores,
    # so the second finds them zero only if the first left them so; the
    # first's bias-relu epilogue runs on the full sum.
    "split-k-chain": lambda: model(
        [node("MatMul", ["x", "w1"], ["m"]), node("Add", ["m", "b1"], ["a"]),
         node("Relu", ["a"], ["h"]), node("MatMul", ["h", "w2"], ["y"])],
        [("x", F, [4, 1024])], ["y"],
        [weight("w1", 1024, 512), weight("b1", 512), weight("w2", 512, 16)]),
    "n-is-1": lambda: model(
        [node("MatMul", ["x", "w"], ["y"])],
        [("x", F, [5, 37])], ["y"], [weight("w", 37, 1)]),
    "k-below-tile": lambda: model(
        [node("MatMul", ["x", "w"], ["y"])],
        [("x", F, [130, 5])], ["y"], [weight("w", 5, 67)]),
    "transposed-activation": lambda: model(
        [node("Transpose", ["z"], ["zt"], perm=[0, 2, 1]),
         node("MatMul", ["x", "zt"], ["y"])],
        [("x", F, [2, 19, 32]), ("z", F, [2, 23, 32])], ["y"]),
    "side-by-side": lambda: model(
        [node("MatMul", ["x", "wq"], ["q"]), node("MatMul", ["x", "wk"], ["k"]),
         node("Add", ["q", "bq"], ["qb"]), node("Add", ["k", "bk"], ["kb"])],
        [("x", F, [24, 32])], ["qb", "kb"],
        [weight("wq", 32, 16), weight("wk", 32, 16), weight("bq", 16),
         weight("bk", 16)]),
}

# Operand rows that are not a multiple of 16 bytes, which TMA cannot
# address, so the kernel keeps the cp.async producer: A's K = 37 and 5 in
# bf16; B reaches the kernel row-major [K][N] (the transpose folded into the
# weight, or computed in a region of its own) with N = 30 and 23.
NO_TMA = {"n-is-1", "k-below-tile", "gemm-transposed-alpha-beta",
          "transposed-activation"}

VARIANTS = [
    ("fp32", [], 1e-4),
    ("tf32", ["--precision=tf32"], 5e-3),
    ("bf16", ["--precision=bf16"], 2e-2),
    ("fp16", ["--precision=fp16"], 5e-3),
]


def run(args, name, path, feeds, reference, precision, flags, bound):
    work = os.path.join(args.workdir, name, precision)
    os.makedirs(work, exist_ok=True)
    artifact = os.path.join(work, "m.kiln")
    if args.wgmma:
        flags = flags + [f"--wgmma={args.wgmma}"]
    if args.tma:
        flags = flags + [f"--tma={args.tma}"]
    stats, error = compile_with_stats(args.kilnc, path, artifact, flags)
    if error:
        print(f"{name} {precision}: {error} FAIL")
        return False
    report = contraction_report(stats)
    configs = sorted({line.split(": ")[1].split(",")[0] for line in report
                      if line.startswith("kiln_gemm_")})
    if not report or any(line.startswith("generic") for line in report):
        print(f"{name} {precision}: not on a template kernel: {report} FAIL")
        return False
    family = {"true": "wgmma_", "false": "mma_"}.get(args.wgmma)
    if family:
        family += "tf32" if precision == "tf32" else "f16"
    if family and not all(c.startswith(family) for c in configs):
        print(f"{name} {precision}: not all on {family} kernels: {configs} FAIL")
        return False
    if args.tma:
        tma = args.tma == "true" and name not in NO_TMA
        want = "producer TMA" if tma else "producer cp.async"
        wrong = [line for line in report if line.startswith("kiln_gemm_")
                 and "wgmma_f16" in line and want not in line]
        if wrong:
            print(f"{name} {precision}: not all with the {want}: {wrong} FAIL")
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
    ap.add_argument("--wgmma", choices=["true", "false"])
    ap.add_argument("--tma", choices=["true", "false"])
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    failed = 0
    for name in names:
        path, feeds, reference = prepare(args.workdir, name, MODELS[name]())
        for precision, flags, bound in VARIANTS:
            if args.wgmma and precision not in ("bf16", "fp16", "tf32"):
                continue
            failed += not run(args, name, path, feeds, reference, precision,
                              flags, bound)
    print(f"{len(names)} models, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
