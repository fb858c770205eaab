#!/usr/bin/env python3
"""Row, reduction and transpose kernels against numpy float64 (issue 12).

Usage: row_kernels.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                      [--only NAME,...] [--flags "KILNC FLAGS"]

Each model is a softmax, log-softmax, layer norm, reduction or transpose
(alone or behind a fused producer chain) on row lengths around the edges
of kiln-map-to-gpu's row kernels: 1, 31, 32, 33 (shorter than, exactly and
just over a warp), 1000, 1024, 1025 (the last warp row, the first block
row) and 4097; reductions over a non-innermost axis, with and without
keepdims; whole-tensor reductions of odd sizes; transposes of odd shapes.
Each is compiled (fused: the default) and run on the emulator, and every
output compared with numpy in float64 on the same seeded inputs. It prints
per model:

  <model>: shfl <n> bar <m> rel-err <e> (bound <b>), worst element <r> of
           its bound ... ok|FAIL

where <n> and <m> count the PTX's shfl.sync.bfly and bar.sync instructions.
With --expect-row-kernels, a row of 32 to 1024 with rows for every SM must
be a warp row kernel (shuffles and no barrier: the block-per-row kernel of
--row-kernels=false needs barriers for its shared-memory all-reduce) and
any other row of 32 or more must have shuffles. Exits 1 if anything fails.

Bound, on the relative error of each output's norm against float64, with
the per-element bounds that go with it (scripts/numerics.py):
fp32 1e-5. Every kernel computes in fp32: the inputs and each op's result
are rounded to fp32 (unit roundoff 6e-8) and sums over at most 4097 terms
run in a different order than numpy's (per-thread strips, then a butterfly
or tree), which moves the sum by ~sqrt(n) ulps, 1e-6 relative for sums of
same-signed terms (the reduction inputs are positive where a sum could
cancel). A wrong index, a lost tail position or a lane that folds the
identity wrongly is an O(1e-2) error or worse. bf16 cases (--precision=bf16
rounds activations to 8 significant bits, 2^-8 = 3.9e-3 per rounding, a few
roundings in sequence): 2e-2, the bound of docs/passes.md, "Precision".
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from emu_harness import compile_and_run, count

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

F = TensorProto.FLOAT


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs], [],
        list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    types = {v.name: v for v in inferred.graph.value_info}
    m.graph.output.extend(types[n] for n in outputs)
    onnx.checker.check_model(m, full_check=True)
    return m


# --- float64 references ----------------------------------------------------

def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def layer_norm(x, scale, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


# --- models: name -> (onnx model, reference(inputs) -> outputs, kernel) ----
# kernel: "warp" (a warp row kernel), "block" (a block row kernel) or None.

def row_kind(rows, length):
    # sm_90 has 132 SMs: a warp per row needs at least that many rows.
    if length < 32:
        return None
    return "warp" if length <= 1024 and rows >= 132 else "block"


def softmax_case(rows, length, op="Softmax"):
    m = model([node(op, ["x"], ["y"], axis=-1)], [("x", [rows, length])], ["y"])
    ref = softmax if op == "Softmax" else log_softmax
    return m, lambda f: [ref(f["x"])], row_kind(rows, length)


def layer_norm_case(rows, length):
    rng = np.random.default_rng(length)
    scale = rng.standard_normal(length).astype(np.float32)
    bias = rng.standard_normal(length).astype(np.float32)
    m = model([node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1,
                    epsilon=1e-5)],
              [("x", [rows, length])], ["y"],
              [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    return m, lambda f: [layer_norm(f["x"], scale.astype(np.float64),
                                    bias.astype(np.float64))], row_kind(rows, length)


def reduce_case(op, shape, axes, keepdims, positive=False):
    m = model([node(op, ["x", "axes"], ["y"], keepdims=keepdims)],
              [("x", shape)], ["y"], [ints("axes", axes)])
    fn = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max,
          "ReduceMin": np.min}[op]
    return m, lambda f: [fn(f["x"], axis=tuple(axes), keepdims=bool(keepdims))], None


def transpose_case(shape, perm):
    m = model([node("Transpose", ["x"], ["t"], perm=perm), node("Neg", ["t"], ["y"])],
              [("x", shape)], ["y"])
    return m, lambda f: [-np.transpose(f["x"], perm)], None


def matmul_softmax_case(rows, k, length, op="Softmax"):
    rng = np.random.default_rng(k)
    w = (rng.standard_normal((k, length)) / np.sqrt(k)).astype(np.float32)
    m = model([node("MatMul", ["x", "w"], ["s"]), node(op, ["s"], ["y"], axis=-1)],
              [("x", [rows, k])], ["y"], [numpy_helper.from_array(w, "w")])
    ref = softmax if op == "Softmax" else log_softmax
    return m, lambda f: [ref(f["x"] @ w.astype(np.float64))], row_kind(rows, length)


def chain_softmax_case(rows, length):
    # (x * 0.5 + z) -> Softmax: the producers are fused into the row kernel.
    half = numpy_helper.from_array(np.array(0.5, np.float32), "h")
    m = model([node("Mul", ["x", "h"], ["a"]), node("Add", ["a", "z"], ["b"]),
               node("Softmax", ["b"], ["y"], axis=-1)],
              [("x", [rows, length]), ("z", [rows, length])], ["y"], [half])
    return m, lambda f: [softmax(f["x"] * 0.5 + f["z"])], row_kind(rows, length)


MODELS = {}
# 141 rows: a warp each (rows for all 132 SMs, 2 rows per block, the last
# block half empty); 13, 9 and 6 rows: fewer rows than SMs, a block each.
for rows, n in ((13, 1), (13, 31), (141, 32), (141, 33), (141, 1000), (141, 1024),
                (13, 1000), (13, 1025), (13, 4097)):
    MODELS[f"softmax-{rows}x{n}"] = softmax_case(rows, n)
for rows, n in ((6, 33), (141, 1024), (6, 1025)):
    MODELS[f"logsoftmax-{rows}x{n}"] = softmax_case(rows, n, "LogSoftmax")
for rows, n in ((9, 31), (141, 32), (141, 1000), (9, 4097)):
    MODELS[f"layernorm-{rows}x{n}"] = layer_norm_case(rows, n)
MODELS["reducesum-keep-7x33"] = reduce_case("ReduceSum", [7, 33], [1], 1, positive=True)
MODELS["reducemean-5x1025"] = reduce_case("ReduceMean", [5, 1025], [1], 0, positive=True)
MODELS["reducemax-3x5x100"] = reduce_case("ReduceMax", [3, 5, 100], [2], 0)
MODELS["reducemin-keep-4x1000"] = reduce_case("ReduceMin", [4, 1000], [-1], 1)
MODELS["reducesum-axis0-67x45"] = reduce_case("ReduceSum", [67, 45], [0], 1, positive=True)
MODELS["reducemean-nhw-4x6x5x7"] = reduce_case("ReduceMean", [4, 6, 5, 7], [0, 2, 3], 1,
                                               positive=True)
MODELS["reducesum-all-37x41"] = reduce_case("ReduceSum", [37, 41], [0, 1], 0, positive=True)
MODELS["reducemax-all-3x7x11x13"] = reduce_case("ReduceMax", [3, 7, 11, 13], [0, 1, 2, 3], 1)
MODELS["transpose-33x47"] = transpose_case([33, 47], [1, 0])
MODELS["transpose-3x5x7"] = transpose_case([3, 5, 7], [2, 0, 1])
MODELS["matmul-softmax-141x64x200"] = matmul_softmax_case(141, 64, 200)
MODELS["matmul-logsoftmax-5x48x1030"] = matmul_softmax_case(5, 48, 1030, "LogSoftmax")
MODELS["chain-softmax-141x77"] = chain_softmax_case(141, 77)

POSITIVE = {name for name in MODELS if name.startswith(("reducesum", "reducemean"))}


def inputs_for(name, m):
    rng = np.random.default_rng(0)
    feeds = {}
    for value in m.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        data = (rng.uniform(0.5, 1.5, size=shape) if name in POSITIVE
                else 2 * rng.standard_normal(shape))
        feeds[value.name] = data.astype(np.float32)
    return feeds


def check(args, name, flags, bound):
    m, reference, kind = MODELS[name]
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    feeds = inputs_for(name, m)
    expected = reference({k: v.astype(np.float64) for k, v in feeds.items()})
    text = compile_and_run(args, name, path, flags, feeds, work)
    if text is None:
        return False
    shuffles = count(text, r"\bshfl\.sync\.bfly\b")
    barriers = count(text, r"\bbar\.sync\b")
    result = numerics.combine(
        numerics.compare(np.load(os.path.join(work, f"{output}.npy")),
                         np.asarray(want, np.float64), bound, output)
        for output, want in zip([o.name for o in m.graph.output], expected))
    good = result.ok
    if args.expect_row_kernels and kind and (
            shuffles == 0 or (kind == "warp" and barriers > 0)):
        good = False
    print(f"{name}: shfl {shuffles} bar {barriers} {result.figures()} "
          f"{'ok' if good else 'FAIL'}")
    return good


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--kilnc", default="kilnc")
    parser.add_argument("--kiln-run", default="kiln-run")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--flags", default="", help="extra kilnc flags")
    parser.add_argument("--expect-row-kernels", action="store_true",
                        help="fail a row model (rows >= 32) whose PTX has no shuffles")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    flags = args.flags.split()
    bound = 2e-2 if "--precision=bf16" in flags else 1e-5
    failures = sum(not check(args, name, flags, bound) for name in names)
    print(f"{len(names)} models, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
