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
onnxruntime, the loss written in numpy (float64), and every gradient element
by central differences, (L(w + h) - L(w - h)) / 2h with h = 1e-6 max(1, |w|).

In float64 the difference quotient is accurate to about h^2 |L'''| + eps/h,
about 1e-10 relative here, so the reference error is negligible against the
bound. The bound is a relative error of 1e-4 on each gradient's norm
(||kiln - ref|| / ||ref||) and on the loss: Kiln computes in fp32, and
through a few layers of matmuls, softmax and reductions its rounding is a
few ulps per value, 1e-7 to 1e-5 relative; a wrong rule (a missing
transpose, a broadcast not summed back, a wrong sign or scale) is off by
O(1). One line per tensor: "<name>: rel-err <e> (bound <b>)"; exit 1 when
one exceeds the bound or is missing.
"""
import argparse
import copy
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, numpy_helper

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
    for node in g.node:
        for attr in node.attribute:
            if attr.name == "to" and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
            if attr.type == onnx.AttributeProto.TENSOR and \
                    attr.t.data_type == TensorProto.FLOAT:
                arr = numpy_helper.to_array(attr.t).astype(np.float64)
                attr.t.CopyFrom(numpy_helper.from_array(arr, attr.t.name))
    return m


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
    trainable = [i.name for i in model.graph.initializer
                 if i.data_type == TensorProto.FLOAT and
                 not (freeze and freeze.fullmatch(i.name))]
    weights = {i.name: numpy_helper.to_array(i).astype(np.float64)
               for i in model.graph.initializer if i.name in trainable}
    session = ort.InferenceSession(
        to_float64(model, set(trainable)).SerializeToString(),
        providers=["CPUExecutionProvider"])

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
        got = np.load(path).astype(np.float64)
        if got.shape != expected.shape:
            print(f"{key}: shape {got.shape}, expected {expected.shape}")
            failed = True
            continue
        err = np.linalg.norm(got - expected) / max(np.linalg.norm(expected),
                                                   1e-30)
        ok = err <= args.bound
        failed |= not ok
        print(f"{key}: rel-err {err:.3e} (bound {args.bound:g})"
              f"{'' if ok else ' EXCEEDED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
