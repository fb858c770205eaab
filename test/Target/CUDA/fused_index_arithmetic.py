#!/usr/bin/env python3
"""Fused index arithmetic against onnxruntime: one small model per pattern.

Usage: fused_index_arithmetic.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                                 [--only NAME,...] [--list]

Each model puts one data-movement op that kiln-fuse turns into indexing
(Gather with every index form, GatherElements, Slice with negative starts
and steps, Pad, Concat, Split, Expand, Tile, Transpose, Reshape) after a
computed producer, so that the op reads a tensor its fusion region computes
(the case that crashed or silently went wrong in issue 10). Every model is
compiled three ways, unfused fp32, fused fp32 and fused bf16 + NHWC, run on
the emulator and compared with onnxruntime fp32 on the same seeded inputs.
It prints one line per model and variant:

  <model> <variant>: kernels <k> rel-err <e> (bound <b>), worst element
                     <r> of its bound ... ok|FAIL

and exits 1 if any variant fails to compile, run, or meet its bound, or if
the fused fp32 variant has as many kernels as the unfused one (then nothing
was fused and the test would prove nothing).

Bounds, on the relative error of each output's norm, with the per-element
bounds that go with them (scripts/numerics.py): fp32 1e-4 (the same
arithmetic in another order: a few ulps per value, far below what a wrong
index does); bf16 2e-2 (the project's bf16 bound: matmul operands rounded
to 8 bits, fp32 accumulation; docs/passes.md "Precision").
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64
RNG = np.random.default_rng(7)


def weight(name, *shape):
    return numpy_helper.from_array(
        RNG.standard_normal(shape).astype(np.float32), name)


def ints(name, values, shape=None):
    array = np.array(values, np.int64)
    if shape is not None:
        array = array.reshape(shape)
    return numpy_helper.from_array(array, name)


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs], [],
        list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    # The outputs' shapes come from ONNX's own shape inference.
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    types = {v.name: v for v in inferred.graph.value_info}
    m.graph.output.extend(types[n] for n in outputs)
    onnx.checker.check_model(m, full_check=True)
    return m


def relu_gather(index, shape=None):
    return model([node("Relu", ["x"], ["r"]),
                  node("Gather", ["r", "j"], ["y"], axis=0)],
                 [("x", F, [16, 8])], ["y"], [ints("j", index, shape)])


MODELS = {
    # Issue 10's reproducer 1 and its variants.
    "relu-gather": lambda: relu_gather([2]),
    "relu-gather-negative": lambda: relu_gather([-2]),
    "relu-gather-scalar": lambda: relu_gather(5, ()),
    "relu-gather-2d": lambda: relu_gather([[0, -1, 3], [15, 2, -16]], (2, 3)),
    "concat-gather": lambda: model(
        [node("Concat", ["x", "x"], ["c"], axis=1),
         node("Gather", ["c", "j"], ["y"], axis=1)],
        [("x", F, [6, 5])], ["y"], [ints("j", [9, -1, 0, 4])]),
    "matmul-gather": lambda: model(
        [node("MatMul", ["x", "w"], ["m"]),
         node("Gather", ["m", "j"], ["y"], axis=0)],
        [("x", F, [7, 12])], ["y"], [weight("w", 12, 9), ints("j", [-3])]),
    "gather-gather": lambda: model(
        [node("Sigmoid", ["x"], ["s"]),
         node("Gather", ["s", "i"], ["a"], axis=0),
         node("Gather", ["a", "j"], ["b"], axis=2),
         node("Neg", ["b"], ["y"])],
        [("x", F, [5, 4, 6])], ["y"], [ints("i", [4, 0]), ints("j", [[1, -1]], (1, 2))]),
    "layernorm-gather-scalar": lambda: model(
        [node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
         node("Gather", ["n", "j"], ["y"], axis=1)],
        [("x", F, [3, 10, 16])], ["y"],
        [weight("g", 16), weight("b", 16), ints("j", -1, ())]),
    # Indices from data, negative ones included (Neg of [0, 16)).
    "data-indices-gather": lambda: model(
        [node("Tanh", ["x"], ["t"]),
         node("Neg", ["ids"], ["neg"]),
         node("Gather", ["t", "ids"], ["a"], axis=0),
         node("Gather", ["t", "neg"], ["b"], axis=0),
         node("Add", ["a", "b"], ["y"])],
        [("x", F, [16, 8]), ("ids", I64, [3, 2])], ["y"]),
    "embedding-layernorm": lambda: model(
        [node("Gather", ["table", "ids"], ["e"], axis=0),
         node("Add", ["e", "pos"], ["s"]),
         node("LayerNormalization", ["s", "g", "b"], ["y"], axis=-1)],
        [("ids", I64, [2, 5])], ["y"],
        [weight("table", 16, 32), weight("pos", 5, 32), weight("g", 32), weight("b", 32)]),
    "relu-gather-elements": lambda: model(
        [node("Relu", ["x"], ["r"]),
         node("GatherElements", ["r", "j"], ["y"], axis=1)],
        [("x", F, [4, 6])], ["y"], [ints("j", [[5, 0], [-1, 2], [3, 3], [-6, 1]], (4, 2))]),
    # Issue 10's reproducer 2 (min_13 was 56% off, fused only).
    "split-concat-gather-min": lambda: model(
        [node("MatMul", ["x", "w1"], ["matmul_2"]),
         node("Concat", ["matmul_2", "matmul_2"], ["concat_3"], axis=1),
         node("Split", ["matmul_2", "sp6"], ["split_4", "split_5"], axis=-1),
         node("Sub", ["split_4", "split_5"], ["sub_7"]),
         node("MatMul", ["split_5", "w8"], ["matmul_9"]),
         node("Gather", ["concat_3", "idx10"], ["gather_11"], axis=0),
         node("Min", ["w12", "gather_11"], ["min_13"]),
         node("Slice", ["sub_7", "st14", "en15", "ax16", "sp17"], ["slice_18"])],
        [("x", F, [3, 17])], ["matmul_9", "min_13", "slice_18"],
        [weight("w1", 17, 8), ints("sp6", [4, 4]), weight("w8", 4, 24),
         ints("idx10", [-1]), weight("w12", 1, 16), ints("st14", [1]),
         ints("en15", [2]), ints("ax16", [1]), ints("sp17", [1])]),
    # The bf16 + NHWC cases: Gather with Reshape, Pad and Gemm, and
    # with ReduceSum, LogSoftmax and MatMul.
    "reshape-pad-gemm-gather": lambda: model(
        [node("Reshape", ["x", "shape"], ["r"]),
         node("Pad", ["r", "pads"], ["p"]),
         node("Gemm", ["p", "w", "c"], ["m"], transB=1),
         node("Gather", ["m", "j"], ["y"], axis=1)],
        [("x", F, [4, 3, 4])], ["y", "m"],
        [ints("shape", [4, 12]), ints("pads", [0, 1, 0, 2]), weight("w", 10, 15),
         weight("c", 10), ints("j", [[9, -2], [0, 4]], (2, 2))]),
    "reduce-logsoftmax-matmul-gather": lambda: model(
        [node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
         node("LogSoftmax", ["s"], ["l"], axis=-1),
         node("MatMul", ["l", "w"], ["m"]),
         node("Gather", ["m", "j"], ["y"], axis=-1)],
        [("x", F, [2, 5, 7, 6])], ["y"],
        [ints("axes", [1]), weight("w", 6, 11), ints("j", [10, -11, 3])]),
    "conv-gather": lambda: model(
        [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         node("Relu", ["c"], ["r"]),
         node("Gather", ["r", "j"], ["y"], axis=1)],
        [("x", F, [1, 3, 6, 6])], ["y"], [weight("w", 4, 3, 3, 3), ints("j", [3, -4])]),
    # The other ops that become index arithmetic, each after a producer.
    "slice-negative": lambda: model(
        [node("Exp", ["x"], ["e"]),
         node("Slice", ["e", "st", "en", "ax", "sp"], ["y"])],
        [("x", F, [6, 9])], ["y"],
        [ints("st", [-1, -2]), ints("en", [-7, 0]), ints("ax", [0, 1]), ints("sp", [-2, -3])]),
    "pad": lambda: model(
        [node("Relu", ["x"], ["r"]), node("Pad", ["r", "pads", "v"], ["p"]),
         node("Add", ["p", "p"], ["y"])],
        [("x", F, [3, 4])], ["y"],
        [ints("pads", [1, 0, 2, 3]),
         numpy_helper.from_array(np.array(0.5, np.float32), "v")]),
    "concat-split": lambda: model(
        [node("Relu", ["x"], ["r"]), node("Neg", ["x"], ["n"]),
         node("Concat", ["r", "n", "r"], ["c"], axis=0),
         node("Split", ["c", "sp"], ["a", "b"], axis=0),
         node("Mul", ["b", "b"], ["y"])],
        [("x", F, [3, 5])], ["a", "y"], [ints("sp", [4, 5])]),
    "expand": lambda: model(
        [node("Sigmoid", ["x"], ["s"]), node("Expand", ["s", "shape"], ["e"]),
         node("Add", ["e", "z"], ["y"])],
        [("x", F, [3, 1]), ("z", F, [2, 3, 4])], ["y"], [ints("shape", [2, 1, 4])]),
    "tile": lambda: model(
        [node("Relu", ["x"], ["r"]), node("Tile", ["r", "reps"], ["t"]),
         node("Neg", ["t"], ["y"])],
        [("x", F, [2, 3])], ["y"], [ints("reps", [3, 2])]),
    "transpose-reshape": lambda: model(
        [node("MatMul", ["x", "w"], ["m"]),
         node("Transpose", ["m"], ["t"], perm=[2, 0, 1]),
         node("Reshape", ["t", "shape"], ["r"]),
         node("Relu", ["r"], ["y"])],
        [("x", F, [2, 3, 4])], ["y"], [weight("w", 4, 6), ints("shape", [12, 3])]),
}

VARIANTS = [
    ("unfused", ["--fuse=false"], 1e-4),
    ("fused", [], 1e-4),
    ("fused-bf16-nhwc", ["--precision=bf16", "--layout=nhwc"], 2e-2),
]


def inputs_for(m):
    rng = np.random.default_rng(0)
    feeds = {}
    for value in m.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == I64:
            # Every valid index of the axis the test gathers on (16 rows).
            feeds[value.name] = rng.integers(0, 16, size=shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def prepare(workdir, name, m):
    """Saves model `m` as WORKDIR/NAME/model.onnx; returns the path, its
    seeded inputs and onnxruntime's fp32 outputs for them."""
    os.makedirs(os.path.join(workdir, name), exist_ok=True)
    path = os.path.join(workdir, name, "model.onnx")
    onnx.save(m, path)
    feeds = inputs_for(m)
    session = numerics.ort_session(path)
    reference = dict(zip([o.name for o in session.get_outputs()],
                         session.run(None, feeds)))
    return path, feeds, reference


def compile_with_stats(kilnc, path, artifact, flags):
    """kilnc PATH -o ARTIFACT --stats FLAGS: its stdout, or None after
    printing nothing (the caller reports `error`)."""
    compiled = subprocess.run([kilnc, path, "-o", artifact, "--stats"] + flags,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return None, (f"kilnc failed ({compiled.returncode}): "
                      f"{compiled.stderr.strip().splitlines()[:1]}")
    return compiled.stdout, None


def kernel_count(stats):
    for line in stats.splitlines():
        if line.startswith("kernels:"):
            return int(line.split()[1])
    raise RuntimeError("kilnc --stats printed no kernel count")


def contraction_report(stats):
    """The lines kilnc --stats prints under "contraction regions:"."""
    lines = stats.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if line.startswith("contraction regions:")), len(lines))
    return [line.strip() for line in lines[start + 1:] if line.startswith("  ")]


def emu_compare(kiln_run, artifact, work, feeds, reference, tol):
    """Runs ARTIFACT on emu with FEEDS and compares every output with
    REFERENCE by scripts/numerics.py's rule at `tol` (a precision or a norm
    bound): one numerics.Comparison over all outputs (None and what went
    wrong when the run fails)."""
    command = [kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(work, "out")]
    for input_name, data in feeds.items():
        file = os.path.join(work, f"{input_name}.npy")
        np.save(file, data)
        command += ["-i", f"{input_name}={file}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode != 0:
        return None, f"kiln-run failed: {ran.stderr.strip().splitlines()[:1]}"
    results = []
    for output, expected in reference.items():
        path = os.path.join(work, "out", f"{output}.npy")
        got = np.load(path) if os.path.exists(path) else None
        results.append(numerics.compare(got, expected, tol, output))
    return numerics.combine(results), None


def run_variant(args, name, feeds, reference, variant, flags, bound):
    work = os.path.join(args.workdir, name, variant)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(args.workdir, name, "model.onnx")
    artifact = os.path.join(work, "m.kiln")
    stats, error = compile_with_stats(args.kilnc, path, artifact, flags)
    if error:
        print(f"{name} {variant}: {error} FAIL")
        return False, 0
    kernels = kernel_count(stats)
    result, error = emu_compare(args.kiln_run, artifact, work, feeds,
                                reference, bound)
    if error:
        print(f"{name} {variant}: {error} FAIL")
        return False, kernels
    print(f"{name} {variant}: kernels {kernels} {result.figures()} "
          f"{'ok' if result.ok else 'FAIL'}")
    return result.ok, kernels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    names = args.only.split(",") if args.only else list(MODELS)
    failed = 0
    for name in names:
        m = MODELS[name]()
        _, feeds, reference = prepare(args.workdir, name, m)
        kernels = {}
        for variant, flags, bound in VARIANTS:
            ok, kernels[variant] = run_variant(args, name, feeds, reference,
                                               variant, flags, bound)
            failed += not ok
        if kernels["fused"] and kernels["fused"] >= kernels["unfused"]:
            print(f"{name}: fused has {kernels['fused']} kernels, unfused "
                  f"{kernels['unfused']}: nothing was fused FAIL")
            failed += 1
    print(f"{len(names)} models, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
