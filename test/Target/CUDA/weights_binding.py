#!/usr/bin/env python3
"""Binding new weights into a compiled artifact (kiln-run --weights DIR) and
stripped artifacts (kilnc --strip-weights), on the emu device.

Usage: weights_binding.py WORKDIR --precision P [--layout L] [--groups G]
                          --kilnc K --kiln-run R

A small CNN (a 3-channel Conv, which NHWC pads to 8 channels; BatchNorm;
a second Conv, grouped with --groups G; global pooling; a Gemm with
transB=1; Softmax) is compiled with weights A. A second model B has new random values in every weight
(every initializer over 64 elements); the small ones (BatchNorm's 16 values,
compiled in as constants) are A's. Checks, each printing a line:

  bound     kiln-run A.kiln --weights B/ matches onnxruntime fp32 on B within
            the precision's bound (fp32 1e-4, bf16 2e-2, fp16 and tf32 5e-3,
            issue 5's, and the per-element bounds of scripts/numerics.py),
            and is far from onnxruntime on A (more than 10x the
            bound): the weights really were replaced, through every
            compile-time step the precision and layout apply (transposes,
            channel padding, bf16/f16 conversion, tf32 rounding; in NHWC
            with 16/G channels a group below the K chunk, the filter's
            channel pad for the convolution templates).
  stripped  kilnc --strip-weights writes an artifact smaller than the weights
            alone; kiln-run refuses it without --weights, naming the file;
            with --weights B/ its output equals the full artifact's, bit for
            bit.
  inlined   a changed BatchNorm scale (compiled in) is refused, naming it.
  shape     an initializer of the wrong shape is refused, naming it and both
            shapes.
Prints PASS at the end, or exits 1 naming the failed check.
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

BOUNDS = numerics.NORM_BOUND
SIZE = 12


def build(rng, small=None, groups=1, matmul_head=False, sibling_heads=False):
    """The CNN with random weights; `small` reuses another build's small
    initializers (name -> array). `matmul_head`: the head is a MatMul with
    a row-major [32, 10] weight and an Add (the logits, no Softmax) instead
    of the Gemm. `sibling_heads`: two MatMul + Add heads on the pooled
    features ([32, 72] and [32, 80], biases over 64 elements so they are
    weights), concatenated: kiln-fuse-sibling-contractions makes them one
    matmul against weights concatenated at compile time (a `concat` in the
    origins)."""
    def weight(name, shape, fan_in):
        return rng.normal(0, 1 / np.sqrt(fan_in), shape).astype(np.float32)

    arrays = {
        "w1": weight("w1", (16, 3, 3, 3), 27),
        "w2": weight("w2", (32, 16 // groups, 3, 3), 144 // groups),
        "fc": weight("fc", (32, 10) if matmul_head else (10, 32), 32),
        "bn_s": rng.uniform(0.8, 1.2, 16).astype(np.float32),
        "bn_b": rng.normal(0, 0.1, 16).astype(np.float32),
        "bn_m": rng.normal(0, 0.1, 16).astype(np.float32),
        "bn_v": rng.uniform(0.5, 1.5, 16).astype(np.float32),
        "fc_b": rng.normal(0, 0.1, 10).astype(np.float32),
    }
    if sibling_heads:
        arrays.update({
            "fc": weight("fc", (32, 72), 32),
            "fc_b": rng.normal(0, 0.1, 72).astype(np.float32),
            "fc2": weight("fc2", (32, 80), 32),
            "fc2_b": rng.normal(0, 0.1, 80).astype(np.float32),
        })
    if small is not None:
        arrays.update({k: v for k, v in small.items() if v.size <= 64})
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization",
                         ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1],
                         strides=[2, 2], group=groups),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=1),
    ]
    if matmul_head:  # no Softmax: the MatMul gets a region of its own
        nodes[-2:] = [helper.make_node("MatMul", ["flat", "fc"], ["mm"]),
                      helper.make_node("Add", ["mm", "fc_b"], ["prob"])]
    if sibling_heads:
        nodes[-2:] = [helper.make_node("MatMul", ["flat", "fc"], ["mm"]),
                      helper.make_node("Add", ["mm", "fc_b"], ["h1"]),
                      helper.make_node("MatMul", ["flat", "fc2"], ["mm2"]),
                      helper.make_node("Add", ["mm2", "fc2_b"], ["h2"]),
                      helper.make_node("Concat", ["h1", "h2"], ["prob"],
                                       axis=1)]
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       [2, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT,
                                       [2, 152 if sibling_heads else 10])],
        [numpy_helper.from_array(v, k) for k, v in arrays.items()])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, arrays


def export(arrays, directory):
    os.makedirs(directory, exist_ok=True)
    for name, value in arrays.items():
        np.save(os.path.join(directory, name + ".npy"), value)


def run(command):
    return subprocess.run(command, capture_output=True, text=True)


rel_err = numerics.rel_l2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--precision", required=True, choices=list(BOUNDS))
    ap.add_argument("--layout", default="")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--matmul-head", action="store_true")
    ap.add_argument("--sibling-heads", action="store_true")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    args = ap.parse_args()
    w = args.workdir
    os.makedirs(w, exist_ok=True)
    rng = np.random.default_rng(7)
    model_a, arrays_a = build(rng, groups=args.groups,
                              matmul_head=args.matmul_head,
                              sibling_heads=args.sibling_heads)
    model_b, arrays_b = build(rng, small=arrays_a, groups=args.groups,
                              matmul_head=args.matmul_head,
                              sibling_heads=args.sibling_heads)
    onnx.save(model_a, os.path.join(w, "a.onnx"))
    export(arrays_b, os.path.join(w, "b"))
    x = rng.standard_normal((2, 3, SIZE, SIZE)).astype(np.float32)
    np.save(os.path.join(w, "x.npy"), x)

    def reference(model):
        return numerics.ort_session(model).run(["prob"], {"x": x})[0]

    ref_a, ref_b = reference(model_a), reference(model_b)
    flags = [f"--precision={args.precision}"]
    if args.layout:
        flags.append(f"--layout={args.layout}")
    failed = []

    def check(name, ok, line):
        print(f"{name}: {line}{'' if ok else '  FAILED'}")
        if not ok:
            failed.append(name)

    def kiln_run(artifact, out, weights=None):
        command = [args.kiln_run, artifact, "--device", "emu", "-i",
                   "x=" + os.path.join(w, "x.npy"), "-o", out]
        if weights:
            command += ["--weights", weights]
        return run(command)

    full = os.path.join(w, "full.kiln")
    stripped = os.path.join(w, "stripped.kiln")
    for artifact, extra in ((full, []), (stripped, ["--strip-weights"])):
        compiled = run([args.kilnc, os.path.join(w, "a.onnx"), "-o", artifact]
                       + flags + extra)
        if compiled.returncode != 0:
            sys.exit(f"kilnc failed: {compiled.stderr.strip()}")

    bound = BOUNDS[args.precision]
    result = kiln_run(full, os.path.join(w, "out-full"), os.path.join(w, "b"))
    if result.returncode != 0:
        sys.exit(f"kiln-run --weights failed: {result.stderr.strip()}")
    got = np.load(os.path.join(w, "out-full", "prob.npy"))
    vs_b, err_a = numerics.compare(got, ref_b, args.precision), rel_err(got, ref_a)
    check("bound", vs_b.ok and err_a > 10 * bound,
          f"vs B {vs_b.figures()}; rel-err vs A {err_a:.2e} "
          f"(must exceed {10 * bound:g})")

    weight_bytes = sum(v.nbytes for v in arrays_a.values() if v.size > 64)
    size_full, size_stripped = os.path.getsize(full), os.path.getsize(stripped)
    refused = kiln_run(stripped, os.path.join(w, "out-none"))
    bound_run = kiln_run(stripped, os.path.join(w, "out-stripped"),
                         os.path.join(w, "b"))
    same = bound_run.returncode == 0 and np.array_equal(
        np.load(os.path.join(w, "out-stripped", "prob.npy")), got)
    check("stripped",
          size_full - size_stripped >= weight_bytes * 0.45 and same and
          refused.returncode == 1 and "stripped.kiln: its weights were "
          "stripped" in refused.stderr,
          f"{size_stripped} bytes vs {size_full} (weights {weight_bytes}); "
          f"without --weights: {refused.stderr.strip()}; with: "
          f"{'identical output' if same else 'DIFFERENT or failed'}")

    changed = dict(arrays_b, bn_s=arrays_b["bn_s"] * 2)
    export(changed, os.path.join(w, "changed"))
    result = kiln_run(full, os.path.join(w, "out-changed"),
                      os.path.join(w, "changed"))
    check("inlined", result.returncode == 1 and "initializer 'bn_s'" in
          result.stderr and "compiled into the kernels" in result.stderr,
          result.stderr.strip())

    group_channels = 16 // args.groups
    wrong = dict(arrays_b, w2=arrays_b["w2"][:, :group_channels // 2])
    export(wrong, os.path.join(w, "wrong"))
    result = kiln_run(full, os.path.join(w, "out-wrong"),
                      os.path.join(w, "wrong"))
    check("shape", result.returncode == 1 and "initializer 'w2' is f32 "
          f"[32, {group_channels // 2}, 3, 3], but the artifact was compiled "
          f"for f32 [32, {group_channels}, 3, 3]" in result.stderr,
          result.stderr.strip())
    print("FAIL: " + ", ".join(failed) if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
