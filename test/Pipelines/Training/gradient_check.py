#!/usr/bin/env python3
"""Checks kilnc --gradients against central finite differences in float64.

Usage: gradient_check.py MODEL.onnx ARTIFACT.kiln WORKDIR
           (--loss KIND [--loss-on OUTPUT] --labels NAME:SHAPE:DTYPE
            | --loss-output NAME) [--freeze REGEX]
           [--kiln-run PATH] [--seed 0] [--bound 1e-4]

The artifact (kilnc --gradients) returns the loss and one grad.<initializer>
per trainable initializer. This script makes seeded random inputs and labels,
runs the artifact on kiln-run --device emu, and computes the reference
independently of Kiln: the ONNX model converted to float64 and run by
onnxruntime (or by onnx's numpy reference evaluator where onnxruntime has
no float64 kernel: Conv, ConvTranspose, pooling), the loss written in numpy (float64), and every gradient element
by central differences, (L(w + h) - L(w - h)) / 2h with h = 1e-6 max(1, |w|).

In float64 the difference quotient is accurate to about h^2 |L'''| + eps/h,
about 1e-10 relative here, so the reference error is negligible against the
bound. The bound is a relative error of 1e-4 on each gradient's norm
(||kiln - ref|| / ||ref||) and on the loss: Kiln computes in fp32, and
through a few layers of matmuls, softmax and reductions its rounding is a
few ulps per value, 1e-7 to 1e-5 relative; a wrong rule (a missing
transpose, a broadcast not summed back, a wrong sign or scale) is off by
O(1). Batch norms are differentiated in training mode (batch statistics),
and their new running statistics (outputs update.<initializer>) are
checked against momentum * running + (1 - momentum) * batch statistic.
One line per tensor: "<name>: rel-err <e> (bound <b>), worst element <r>
of its bound ... ok|FAIL" (scripts/numerics.py's rule at --bound: the norm
and the per-element bounds that go with it); exit 1 when one fails or is
missing.
"""
import argparse
import copy
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

DTYPES = {"int64": np.int64, "i64": np.int64, "int32": np.int32,
          "i32": np.int32, "float32": np.float32, "f32": np.float32}


def to_float64(model, trainable):
    """The model in float64, with the `trainable` initializers as inputs."""
    m = copy.deepcopy(model)
    g = m.graph

    def fix_type(vi):
        t = vi.type.tensor_type
        if t.elem_type == TensorProto.FLOAT:
            t.elem_type = TensorProto.DOUBLE

    for vi in list(g.input) + list(g.output) + list(g.value_info):
        fix_type(vi)
    inits = []
    for init in g.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype == np.float32:
            arr = arr.astype(np.float64)
        if init.name in trainable:
            g.input.append(onnx.helper.make_tensor_value_info(
                init.name, onnx.helper.np_dtype_to_tensor_dtype(arr.dtype),
                arr.shape))
        else:
            inits.append(numpy_helper.from_array(arr, init.name))
    del g.initializer[:]
    g.initializer.extend(inits)
    batch_norms_in_training_mode(m)
    for node in g.node:
        for attr in node.attribute:
            if attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
            if attr.type == onnx.AttributeProto.TENSOR and \
                    attr.t.data_type == TensorProto.FLOAT:
                arr = numpy_helper.to_array(attr.t).astype(np.float64)
                attr.t.CopyFrom(numpy_helper.from_array(arr, attr.t.name))
    return m


def batch_norms_in_training_mode(model):
    """Rewrites each BatchNormalization into batch statistics (mean and
    biased variance over all but the channels, ONNX training_mode=1), as
    kiln-autodiff differentiates it, and adds outputs __bn_mean_i and
    __bn_var_i holding the batch statistics ([C])."""
    g = model.graph
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    shapes = {}
    inferred = onnx.shape_inference.infer_shapes(model)
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input):
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    nodes = []
    for i, node in enumerate(g.node):
        if node.op_type != "BatchNormalization":
            nodes.append(node)
            continue
        x, scale, bias = node.input[0], node.input[1], node.input[2]
        rank = len(shapes[x])
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        axes = [0] + list(range(2, rank))
        p = f"__bn{i}_"

        if opset >= 18:
            g.initializer.append(numpy_helper.from_array(
                np.array(axes, np.int64), p + "axes"))

        def reduce_mean(src, dst):
            if opset >= 18:
                return onnx.helper.make_node("ReduceMean", [src, p + "axes"],
                                             [dst], keepdims=1)
            return onnx.helper.make_node("ReduceMean", [src], [dst],
                                         axes=axes, keepdims=1)
        g.initializer.extend([
            numpy_helper.from_array(np.array([-1] + [1] * (rank - 2), np.int64),
                                    p + "cshape"),
            numpy_helper.from_array(np.array([-1], np.int64), p + "flat"),
            numpy_helper.from_array(np.array(eps, np.float64), p + "eps"),
        ])
        mk = onnx.helper.make_node
        nodes += [
            reduce_mean(x, p + "mean"),
            mk("Sub", [x, p + "mean"], [p + "d"]),
            mk("Mul", [p + "d", p + "d"], [p + "sq"]),
        ]
        nodes.append(reduce_mean(p + "sq", p + "var"))
        nodes += [
            mk("Add", [p + "var", p + "eps"], [p + "ve"]),
            mk("Sqrt", [p + "ve"], [p + "sd"]),
            mk("Div", [p + "d", p + "sd"], [p + "n"]),
            mk("Reshape", [scale, p + "cshape"], [p + "s"]),
            mk("Reshape", [bias, p + "cshape"], [p + "b"]),
            mk("Mul", [p + "n", p + "s"], [p + "ns"]),
            mk("Add", [p + "ns", p + "b"], [node.output[0]]),
            mk("Reshape", [p + "mean", p + "flat"], [f"__bn_mean_{i}"]),
            mk("Reshape", [p + "var", p + "flat"], [f"__bn_var_{i}"]),
        ]
        for stat in ("mean", "var"):
            g.output.append(onnx.helper.make_tensor_value_info(
                f"__bn_{stat}_{i}", TensorProto.DOUBLE, None))
    del g.node[:]
    g.node.extend(nodes)


class _Evaluator:
    """onnx's reference evaluator behind onnxruntime's run() signature."""

    def __init__(self, model):
        from onnx.reference import ReferenceEvaluator
        self.evaluator = ReferenceEvaluator(model)

    def run(self, names, feeds):
        return self.evaluator.run(names, feeds)


def reference_session(model64):
    """onnxruntime (graph optimisations off: its fused kernels are float
    only) or, for ops it has no float64 kernel for (Conv, ConvTranspose,
    pooling), onnx's numpy reference evaluator."""
    try:
        return numerics.ort_session(model64)
    except Exception:  # NOT_IMPLEMENTED: no float64 kernel
        return _Evaluator(model64)


def log_softmax(x, axis):
    x = x - x.max(axis=axis, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=axis, keepdims=True))


def loss_of(kind, out, labels):
    """The mean loss, as docs/passes.md (kiln-autodiff) defines it."""
    if kind in ("cross_entropy", "nll"):
        logp = log_softmax(out, 1) if kind == "cross_entropy" else out
        if np.issubdtype(labels.dtype, np.integer):
            picked = np.take_along_axis(logp, np.expand_dims(labels, 1), 1)
            return -picked.mean()
        positions = out.size // out.shape[1]
        return -(logp * labels).sum() / positions
    diff = out - labels.astype(np.float64)
    return (diff * diff).mean() if kind == "mse" else np.abs(diff).mean()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("artifact")
    ap.add_argument("workdir")
    ap.add_argument("--loss")
    ap.add_argument("--loss-on")
    ap.add_argument("--labels")
    ap.add_argument("--loss-output")
    ap.add_argument("--freeze")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bound", type=float, default=1e-4)
    ap.add_argument("--int-high", type=int, default=None,
                    help="integer model inputs in [0, N) (default 10)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    model = onnx.load(args.model)
    freeze = re.compile(args.freeze) if args.freeze else None
    # Batch norms' running statistics are state, updated, not trained.
    running = {}  # initializer -> (node index, "mean" | "var", momentum)
    for i, node in enumerate(model.graph.node):
        if node.op_type == "BatchNormalization":
            momentum = next((a.f for a in node.attribute
                             if a.name == "momentum"), 0.9)
            running[node.input[3]] = (i, "mean", momentum)
            running[node.input[4]] = (i, "var", momentum)
    trainable = [i.name for i in model.graph.initializer
                 if i.data_type == TensorProto.FLOAT and
                 i.name not in running and
                 not (freeze and freeze.fullmatch(i.name))]
    weights = {i.name: numpy_helper.to_array(i).astype(np.float64)
               for i in model.graph.initializer if i.name in trainable}
    model64 = to_float64(model, set(trainable))
    session = reference_session(model64)

    rng = np.random.default_rng(args.seed)
    init_names = {i.name for i in model.graph.initializer}
    feeds = {}
    for value in model.graph.input:
        if value.name in init_names:
            continue
        t = value.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        np_type = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        if np.issubdtype(np_type, np.integer):
            feeds[value.name] = rng.integers(
                0, args.int_high or 10, size=shape).astype(np_type)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np_type)
    output_names = [o.name for o in model.graph.output]
    if args.loss_output:
        loss_index = output_names.index(args.loss_output)
        labels = None
    else:
        loss_index = output_names.index(args.loss_on) if args.loss_on else 0
        name, dims, dtype = args.labels.rsplit(":", 2)
        shape = [] if dims == "scalar" else [int(d) for d in dims.split("x")]
        dtype = DTYPES[dtype]
        out_shape = [d.dim_value for d in
                     model.graph.output[loss_index].type.tensor_type.shape.dim]
        if np.issubdtype(dtype, np.integer):
            labels = rng.integers(0, out_shape[1], size=shape).astype(dtype)
        elif args.loss in ("cross_entropy", "nll"):
            p = rng.random(shape) + 0.1
            labels = (p / p.sum(axis=1, keepdims=True)).astype(dtype)
        else:
            labels = rng.standard_normal(shape).astype(dtype)

    # Kiln on the emulator.
    command = [args.kiln_run, args.artifact, "--device", "emu", "-o",
               os.path.join(args.workdir, "out")]
    bound = dict(feeds)
    if labels is not None:
        bound[name] = labels
    for i, (input_name, data) in enumerate(bound.items()):
        path = os.path.join(args.workdir, f"input{i}.npy")
        np.save(path, data)
        command += ["-i", f"{input_name}={path}"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stdout.write(run.stdout + run.stderr)
        print("kiln-run failed")
        return 1

    # The float64 reference.
    feeds64 = {k: (v.astype(np.float64) if v.dtype == np.float32 else v)
               for k, v in feeds.items()}

    def loss(ws):
        out = session.run(None, {**feeds64, **ws})
        if labels is None:
            return float(np.asarray(out[loss_index]).reshape(()))
        return float(loss_of(args.loss, out[loss_index], labels))

    ref = {"loss": np.array(loss(weights))}
    if running:
        names64 = [o.name for o in model64.graph.output]
        values = dict(zip(names64, session.run(None, {**feeds64, **weights})))
        inits = {i.name: numpy_helper.to_array(i).astype(np.float64)
                 for i in model.graph.initializer}
        for name, (i, stat, momentum) in running.items():
            ref["update." + name] = (momentum * inits[name] + (1 - momentum) *
                                     values[f"__bn_{stat}_{i}"])
    for wname in trainable:
        w = weights[wname]
        grad = np.zeros_like(w)
        flat = w.reshape(-1)
        for j in range(flat.size):
            h = 1e-6 * max(1.0, abs(flat[j]))
            plus = flat.copy()
            plus[j] += h
            minus = flat.copy()
            minus[j] -= h
            lp = loss({**weights, wname: plus.reshape(w.shape)})
            lm = loss({**weights, wname: minus.reshape(w.shape)})
            grad.reshape(-1)[j] = (lp - lm) / (2 * h)
        ref["grad." + wname] = grad

    failed = False
    for key, expected in ref.items():
        path = os.path.join(args.workdir, "out",
                            re.sub(r"[^A-Za-z0-9._-]", "_", key) + ".npy")
        if not os.path.exists(path):
            print(f"{key}: missing")
            failed = True
            continue
        result = numerics.compare(np.load(path), expected, args.bound, key)
        failed |= not result.ok
        print(result.line())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
