#!/usr/bin/env python3
"""Tiled transposes, column and whole-tensor reductions on emu (issue 12).

Usage: membound_kernels.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                           [--only NAME,...] [--flags "KILNC FLAGS"]
                           [--expect-kernels]

kiln-map-to-gpu's shared-memory tiled transposes (TiledTranspose.cpp) and
its column and two-pass whole-tensor reductions (SplitReductions.cpp), on
the shapes around their edges: transposes of 1x1, 33x65, 3x31x17 with perm
(2,0,1) and NCHW->NHWC with an odd C, in f32, bf16, f16, int8 and int64,
and with a fused elementwise op; Sum/Mean/Max/Min/L2/LogSumExp over axis 0
(reduced lengths 1, 31, 33, 1000, 4097) and over axes (0,1,2) of a 4-D
tensor, keepdims both ways; whole-tensor reductions of 1, 17, 1023 and
100003 elements, including a fused producer chain (ReduceSum(x*y+1)).
Each model is compiled (fused, the default) and run on the emulator, and
every output compared with numpy in float64 on seeded inputs. Per model:

  <model>: kernels <k> bar <b> shfl <s> rel-err <e> (bound <d>), worst
           element <r> of its bound ... ok|FAIL

(scripts/numerics.py's report; each element's bound is the absolute one
below, d max|want|, with no share for |want_i|)

<k> counts the PTX's kernels (.entry), <b> its bar.sync, <s> its
shfl.sync.bfly. With --expect-kernels, a model that should get a tiled
transpose or a column kernel must have a barrier (its shared-memory tile)
and a column kernel no shuffles (it combines partials through shared
memory, not a warp butterfly); a whole-tensor reduction over more than 8192
elements must be two kernels or more (pass 1, pass 2). Exits 1 on failure.

Bounds (err: max |got - want| / max(|want|), over each output):
  - data movement (transposes, also with a fused negation) is exact: 0;
    bf16/f16/int8/int64 values are moved bit for bit;
  - Max/Min pick an input: exact, 0;
  - Sum/Mean/L2/LogSumExp in fp32: inputs are rounded to fp32 once (2^-24
    relative) and summed in an order that differs from numpy's (slices,
    shared-memory partials, a second pass over the partials). Recursive
    summation of n terms is off by at most about (n - 1) * 2^-24 of the sum
    of |terms| (Higham, Accuracy and Stability, 4.2); the summed terms are
    positive (inputs in [0.5, 1.5); squares; exps), so that bounds the
    relative error: bound (n + 1) * 2^-24, n the reduced length (LogSumExp:
    log's absolute error is the sum's relative one, and its result is at
    least log(n) + 0.5 > 0.5 for these inputs, so the same bound holds
    relative to it within a factor of 2: bound 2 (n + 1) 2^-24). A wrong
    index, a lost slice or partial, or a stray identity is an O(1/n) error
    or worse, far above these bounds.
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

U = 2.0 ** -24  # fp32 unit roundoff

TYPES = {
    "f32": (TensorProto.FLOAT, np.float32),
    "bf16": (TensorProto.BFLOAT16, None),
    "f16": (TensorProto.FLOAT16, np.float16),
    "i8": (TensorProto.INT8, np.int8),
    "i64": (TensorProto.INT64, np.int64),
}


def model(nodes, inputs, outputs, inits=(), elem=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, elem, s) for n, s in inputs],
        [], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    types = {v.name: v for v in inferred.graph.value_info}
    m.graph.output.extend(types[n] for n in outputs)
    onnx.checker.check_model(m, full_check=True)
    return m


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)


# Each case: (model, reference(feeds) -> [outputs], bound, kind, inputs kind)
# kind: "tile" (tiled transpose or column kernel with shared memory),
# "column", "whole" (two-pass), or None (no expectation).
MODELS = {}


def transpose_case(dtype, shape, perm, fused=None):
    elem = TYPES[dtype][0]
    nodes = [node("Transpose", ["x"], ["t" if fused else "y"], perm=perm)]
    ref = lambda f: [np.transpose(f["x"], perm)]
    if fused == "neg":
        nodes.append(node("Neg", ["t"], ["y"]))
        ref = lambda f: [-np.transpose(f["x"], perm)]
    m = model(nodes, [("x", shape)], ["y"], elem=elem)
    shape_t = [shape[p] for p in perm]
    tiled = sum(1 for d in shape_t if d > 1) >= 2 and shape[-1] > 1 and shape_t[-1] > 1
    return m, ref, 0.0, "tile" if tiled else None


for dtype in TYPES:
    MODELS[f"transpose-{dtype}-1x1"] = transpose_case(dtype, [1, 1], [1, 0])
    MODELS[f"transpose-{dtype}-33x65"] = transpose_case(dtype, [33, 65], [1, 0])
    MODELS[f"transpose-{dtype}-3x31x17-p201"] = transpose_case(dtype, [3, 31, 17], [2, 0, 1])
    MODELS[f"nchw2nhwc-{dtype}-2x5x9x7"] = transpose_case(dtype, [2, 5, 9, 7], [0, 2, 3, 1])
MODELS["transpose-neg-f32-33x65"] = transpose_case("f32", [33, 65], [1, 0], "neg")
MODELS["nhwc2nchw-neg-f32-2x9x7x5"] = transpose_case("f32", [2, 9, 7, 5], [0, 3, 1, 2], "neg")


def reduce_ref(op, x, axes, keepdims):
    axes = tuple(axes) if axes is not None else None
    k = bool(keepdims)
    if op == "ReduceSum":
        return np.sum(x, axis=axes, keepdims=k)
    if op == "ReduceMean":
        return np.mean(x, axis=axes, keepdims=k)
    if op == "ReduceMax":
        return np.max(x, axis=axes, keepdims=k)
    if op == "ReduceMin":
        return np.min(x, axis=axes, keepdims=k)
    if op == "ReduceL2":
        return np.sqrt(np.sum(x * x, axis=axes, keepdims=k))
    if op == "ReduceLogSumExp":
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=k))
    raise ValueError(op)


def reduce_bound(op, n):
    if op in ("ReduceMax", "ReduceMin"):
        return 0.0
    return (2 if op == "ReduceLogSumExp" else 1) * (n + 1) * U


def reduce_case(op, shape, axes, keepdims, kind):
    inits = []
    ins = ["x"]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        ins.append("axes")
    m = model([node(op, ins, ["y"], keepdims=keepdims)], [("x", shape)], ["y"], inits)
    n = int(np.prod([shape[a] for a in axes])) if axes is not None else int(np.prod(shape))
    return (m, lambda f: [reduce_ref(op, f["x"], axes, keepdims)], reduce_bound(op, n),
            kind if n >= 32 else None)


OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp"]
for op in OPS:
    short = op[len("Reduce"):].lower()
    for n in (1, 31, 33, 1000, 4097):
        MODELS[f"{short}-axis0-{n}x45"] = reduce_case(op, [n, 45], [0], n % 2, "column")
    MODELS[f"{short}-nhw-4x6x5x7-keep"] = reduce_case(op, [4, 6, 5, 7], [0, 1, 2], 1, "column")
    MODELS[f"{short}-nhw-8x16x16x33"] = reduce_case(op, [8, 16, 16, 33], [0, 1, 2], 0, "column")
# Over H of NCHW (W kept innermost: a column reduction per (n, c)).
MODELS["max-h-nchw-2x3x50x37"] = reduce_case("ReduceMax", [2, 3, 50, 37], [2], 0, "column")
MODELS["mean-h-nchw-2x3x50x37-keep"] = reduce_case("ReduceMean", [2, 3, 50, 37], [2], 1,
                                                   "column")
for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceL2"):
    short = op[len("Reduce"):].lower()
    for n in (1, 17, 1023, 100003):
        m, ref, bound, _ = reduce_case(op, [n], None, 0, None)
        MODELS[f"{short}-all-{n}"] = (m, ref, bound, "whole" if n > 8192 else None)
MODELS["sum-all-keep-7x11x1301"] = (
    reduce_case("ReduceSum", [7, 11, 1301], None, 1, None)[:3] + ("whole",))


def chain_case(n):
    # ReduceSum(x * y + 1): the producers fuse into the reduction.
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    m = model([node("Mul", ["x", "z"], ["p"]), node("Add", ["p", "one"], ["q"]),
               node("ReduceSum", ["q"], ["y"], keepdims=0)],
              [("x", [n]), ("z", [n])], ["y"], [one])
    # Terms x*z+1 are in [1.25, 3.25): positive, the sum bound applies (each
    # term has two more fp32 roundings: +2u relative per term).
    return m, lambda f: [np.sum(f["x"] * f["z"] + 1)], (n + 3) * U, \
        "whole" if n > 8192 else None


for n in (17, 1023, 100003):
    MODELS[f"chain-sum-all-{n}"] = chain_case(n)


def inputs_for(m):
    rng = np.random.default_rng(0)
    feeds, f64 = {}, {}
    for value in m.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        elem = value.type.tensor_type.elem_type
        if elem in (TensorProto.INT8, TensorProto.INT64):
            dtype = np.int8 if elem == TensorProto.INT8 else np.int64
            data = rng.integers(-100, 100, size=shape).astype(dtype)
            feeds[value.name], f64[value.name] = data, data.astype(np.float64)
        elif elem == TensorProto.BFLOAT16:
            # bf16 bits: the top half of an f32 (values exactly representable).
            data = rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
            bits = (data.view(np.uint32) >> 16).astype(np.uint16)
            feeds[value.name] = bits.view("V2")
            f64[value.name] = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            dtype = np.float16 if elem == TensorProto.FLOAT16 else np.float32
            data = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
            feeds[value.name], f64[value.name] = data, data.astype(np.float64)
    return feeds, f64


def to_f64(a):
    if a.dtype.kind == "V":  # bf16
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def check(args, name, flags):
    m, reference, bound, kind = MODELS[name]
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    feeds, f64 = inputs_for(m)
    expected = reference(f64)
    text = compile_and_run(args, name, path, flags, feeds, work)
    if text is None:
        return False
    kernels = count(text, r"\.entry\b")
    barriers = count(text, r"\bbar\.sync\b")
    shuffles = count(text, r"\bshfl\.sync\.bfly\b")
    results = []
    for output, want in zip([o.name for o in m.graph.output], expected):
        want = np.asarray(want, np.float64)
        scale = max(np.max(np.abs(want)), 1e-30) if want.size else 1.0
        # The proven bound is absolute: |got - want| <= bound max|want|.
        tol = numerics.Tolerance(norm=bound, rtol=0.0, atol_rms=0.0,
                                 atol=bound * scale)
        results.append(numerics.compare(
            to_f64(np.load(os.path.join(work, f"{output}.npy"))), want, tol,
            output))
    result = numerics.combine(results)
    good = result.ok
    if args.expect_kernels:
        if kind in ("tile", "column") and barriers == 0:
            good = False
        if kind == "column" and shuffles > 0:
            good = False
        if kind == "whole" and kernels < 2:
            good = False
    print(f"{name}: kernels {kernels} bar {barriers} shfl {shuffles} "
          f"{result.figures()} {'ok' if good else 'FAIL'}")
    return good


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir")
    parser.add_argument("--kilnc", default="kilnc")
    parser.add_argument("--kiln-run", default="kiln-run")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--flags", default="", help="extra kilnc flags")
    parser.add_argument("--expect-kernels", action="store_true",
                        help="fail a model that does not get its kernel shape")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    failures = sum(not check(args, name, args.flags.split()) for name in names)
    print(f"{len(names)} models, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
