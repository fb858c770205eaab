#!/usr/bin/env python3
"""Numerics of kilnc --precision=bf16|fp16|tf32 on the emu device.

Usage:
  emu_precision.py rounding WORKDIR --precision P [--kilnc K] [--kiln-run R]
  emu_precision.py classifier WORKDIR --precision P [--batch 200] [...]
  emu_precision.py model MODEL.onnx WORKDIR --precision P [--inputs N] [...]
  emu_precision.py margin MODEL.onnx WORKDIR --precision P --rel-err E
                   [--inputs 200]

rounding    MatMul of a [16, 64] input and a [64, 32] weight. The emu result
            must equal numpy's float64 product of the inputs rounded to the
            precision (rounding done here with frexp and numpy's
            round-half-even, independently of Kiln's bit tricks) within f32
            accumulation error (1e-6 relative), and must differ from the
            unrounded product by more than 1/4 of the precision's unit
            roundoff (so rounding really happened; fp32 skips this).
            tf32 on the sm_90a wgmma kernel (kilnc's default; --stats
            names the family) rounds the weight at compile time but hands
            the activation to the tensor core unrounded, which keeps its
            upper 19 bits: there the reference truncates x instead
            (truncation done here with a bit mask); with
            --kilnc-arg=--wgmma=false (mma.sync) both are rounded.
            With --io-precision fp16 the model takes and returns f16 and
            the bound is 1e-3 (the f16 output's own rounding).
classifier  A small CNN classifier with seeded random weights (Conv+BN+Relu,
            strided Conv+BN+Relu, residual Add, GlobalAveragePool, Gemm,
            Softmax over 10 classes) at batch --batch (200 by default) on
            --size x --size images (16) in one run: relative error of the output norm against onnxruntime fp32
            and the fraction of samples whose top-1 class agrees.
model       Any model: --inputs N seeded random inputs, one emu run each;
            relative error on the output norm of every run (the largest is
            reported) and top-1 agreement of the first output when it is a
            classifier output ([1, classes] or [1, classes, 1, 1]).
margin      For classifiers too slow to emulate on many inputs: onnxruntime
            fp32 on --inputs seeded random inputs (the same stream as model
            mode, so its first inputs are the emulated ones) gives each
            input's top-1 margin m = (y1 - y2) / (2 ||y||), y1 >= y2 the two
            largest outputs. An output error d can only change the top-1
            class if |d_1 - d_2| >= y1 - y2, and |d_1 - d_2| <= 2 ||d||, so the
            class is certain to agree wherever the relative error ||d|| /
            ||y|| stays below m. With E the worst relative error measured on
            emu, it prints the smallest m over the inputs and min(m) / E,
            and counts the inputs *at risk*: m < --safety x E (3 by default).
            The others agree unless their error exceeds 3x the measured
            worst (an argument, not a measurement: labelled so). With
            --emulate-at-risk the at-risk inputs run on emu and their top-1
            is compared directly. PASS when at least 99% agree.

Bounds (issue 5): relative error <= 2e-2 (bf16), 5e-3 (fp16, tf32),
1e-4 (fp32) and every element within its per-element bound, both by
scripts/numerics.py's rule (docs/testing.md, "Comparing numbers"); top-1
agreement >= 0.99. Prints one line per measurement and "PASS"/"FAIL" at the
end; exits 1 on a failed bound. onnxruntime runs with graph optimizations
off.
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

BOUNDS = numerics.NORM_BOUND
# Significand bits (with the implicit one) of each precision.
SIGNIFICAND = {"tf32": 11, "bf16": 8, "fp16": 11}
ORT_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


def round_to(x, precision):
    """x rounded to nearest even with the precision's significand (fp16's
    range is not modelled: the test data stays far inside it)."""
    if precision == "fp32":
        return x.astype(np.float32).astype(np.float64)
    if precision == "fp16":
        return x.astype(np.float16).astype(np.float64)
    m, e = np.frexp(x.astype(np.float64))  # x = m * 2^e, 0.5 <= |m| < 1
    bits = SIGNIFICAND[precision]
    return np.ldexp(np.round(m * 2.0**bits) / 2.0**bits, e)


def truncate_tf32(x):
    """What wgmma's tf32 inputs keep of an f32: its upper 19 bits."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def compile_model(args, model_path, artifact, stats=False):
    command = [args.kilnc, model_path, "-o", artifact,
               f"--precision={args.precision}"] + args.kilnc_arg
    if args.io_precision:
        command.append(f"--io-precision={args.io_precision}")
    if stats:
        command.append("--stats")
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stdout.write(run.stdout + run.stderr)
        raise SystemExit(f"kilnc failed: {' '.join(command)}")
    return run.stdout


def run_emu(args, artifact, feeds, workdir):
    os.makedirs(workdir, exist_ok=True)
    command = [args.kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(workdir, "out")]
    for i, (name, data) in enumerate(feeds.items()):
        path = os.path.join(workdir, f"input{i}.npy")
        np.save(path, data)
        command += ["-i", f"{name}={path}"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        sys.stdout.write(run.stdout + run.stderr)
        raise SystemExit("kiln-run failed")
    return lambda name: np.load(os.path.join(
        workdir, "out", re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy"))


rel_err = numerics.rel_l2


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, path)


def rounding(args):
    rng = np.random.default_rng(args.seed)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(args.workdir, "matmul.onnx")
    save(model, path)
    artifact = os.path.join(args.workdir, f"matmul-{args.precision}.kiln")
    stats = compile_model(args, path, artifact, stats=True)
    wgmma_tf32 = args.precision == "tf32" and "wgmma_tf32" in stats
    x = rng.standard_normal((16, 64)).astype(np.float32)
    # --io-precision=fp16: the model takes and returns f16; the output's own
    # rounding to f16 (2^-11 relative per element) then dominates.
    io16 = args.io_precision == "fp16"
    if io16:
        x = x.astype(np.float16)
    got = run_emu(args, artifact, {"x": x}, os.path.join(
        args.workdir, f"matmul-{args.precision}"))("y")
    if io16 and got.dtype != np.float16:
        print(f"output dtype {got.dtype}, expected float16")
        return False
    xr = truncate_tf32(x) if wgmma_tf32 else round_to(x, args.precision)
    rounded = xr @ round_to(w, args.precision)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    bound = 1e-3 if io16 else 1e-6
    vs_rounded = numerics.compare(got, rounded, bound)
    err_exact = rel_err(got, exact)
    print(f"rounding {args.precision}{' io fp16' if io16 else ''}"
          f"{' (wgmma: x truncated)' if wgmma_tf32 else ''}: vs "
          f"rounded-input product {vs_rounded.figures()}; rel-err "
          f"vs exact product {err_exact:.3e}")
    ok = vs_rounded.ok
    if io16:
        return ok
    if args.precision != "fp32":
        floor = 2.0**-SIGNIFICAND[args.precision] / 4
        print(f"rounding {args.precision}: exact-product error must exceed "
              f"{floor:.3e}")
        ok &= err_exact > floor
    return ok


def classifier(args):
    rng = np.random.default_rng(args.seed)
    n = args.batch

    def weight(name, shape, fan_in):
        return numpy_helper.from_array(
            rng.normal(0, 1 / np.sqrt(fan_in), shape).astype(np.float32), name)

    def bn_params(prefix, c):
        return [
            numpy_helper.from_array(
                rng.uniform(0.8, 1.2, c).astype(np.float32), prefix + "_s"),
            numpy_helper.from_array(
                rng.normal(0, 0.1, c).astype(np.float32), prefix + "_b"),
            numpy_helper.from_array(
                rng.normal(0, 0.1, c).astype(np.float32), prefix + "_m"),
            numpy_helper.from_array(
                rng.uniform(0.5, 1.5, c).astype(np.float32), prefix + "_v"),
        ]

    inits = [weight("w1", (16, 3, 3, 3), 27), weight("w2", (16, 16, 3, 3), 144),
             weight("w3", (32, 16, 3, 3), 144), weight("fc", (10, 32), 32),
             numpy_helper.from_array(
                 rng.normal(0, 0.1, 10).astype(np.float32), "fc_b")]
    inits += bn_params("bn1", 16) + bn_params("bn2", 16) + bn_params("bn3", 32)

    def conv_bn_relu(i, x, w, stride, relu=True):
        out = [helper.make_node("Conv", [x, w], [f"c{i}"], pads=[1, 1, 1, 1],
                                strides=[stride, stride]),
               helper.make_node("BatchNormalization",
                                [f"c{i}", f"bn{i}_s", f"bn{i}_b", f"bn{i}_m",
                                 f"bn{i}_v"], [f"n{i}"])]
        if relu:
            out.append(helper.make_node("Relu", [f"n{i}"], [f"r{i}"]))
        return out

    nodes = conv_bn_relu(1, "x", "w1", 1) + conv_bn_relu(2, "r1", "w2", 1,
                                                          relu=False)
    nodes += [helper.make_node("Add", ["n2", "r1"], ["res"]),
              helper.make_node("Relu", ["res"], ["r2"])]
    nodes += conv_bn_relu(3, "r2", "w3", 2)
    nodes += [helper.make_node("GlobalAveragePool", ["r3"], ["gap"]),
              helper.make_node("Flatten", ["gap"], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["logits"],
                               transB=1),
              helper.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    graph = helper.make_graph(
        nodes, "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       [n, 3, args.size, args.size])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [n, 10])],
        inits)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(args.workdir, "classifier.onnx")
    save(model, path)
    artifact = os.path.join(args.workdir, f"classifier-{args.precision}.kiln")
    compile_model(args, path, artifact)
    x = rng.standard_normal((n, 3, args.size, args.size)).astype(np.float32)
    start = time.monotonic()
    got = run_emu(args, artifact, {"x": x}, os.path.join(
        args.workdir, f"classifier-{args.precision}"))("prob")
    seconds = time.monotonic() - start
    ref = numerics.ort_session(path).run(["prob"], {"x": x})[0]
    return report(args, "classifier",
                  [numerics.compare(got, ref, args.precision, "prob")],
                  np.argmax(got, 1) == np.argmax(ref, 1), seconds)


def model_inputs(session, rng, int_high):
    feeds = {}
    for value in session.get_inputs():
        dtype = ORT_TO_NUMPY[value.type]
        if np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, int_high, size=value.shape
                                             ).astype(dtype)
        else:
            feeds[value.name] = rng.standard_normal(value.shape).astype(dtype)
    return feeds


def whole_model(args):
    name = os.path.splitext(os.path.basename(args.model))[0]
    artifact = os.path.join(args.workdir, f"{name}-{args.precision}.kiln")
    compile_model(args, args.model, artifact)
    session = numerics.ort_session(args.model)
    output = session.get_outputs()[0].name
    rng = np.random.default_rng(args.seed)
    errors, agree = [], []
    start = time.monotonic()
    for i in range(args.inputs):
        feeds = model_inputs(session, rng, args.int_high)
        got = run_emu(args, artifact, feeds, os.path.join(
            args.workdir, f"{name}-{args.precision}-{i}"))(output)
        ref = session.run([output], feeds)[0]
        errors.append(numerics.compare(got, ref, args.precision,
                                       f"input {i}"))
        if ref.size == ref.shape[1]:  # [1, classes(, 1, 1)]
            agree.append(np.argmax(got) == np.argmax(ref))
        if args.progress:
            print(f"  input {i}: {errors[-1].figures()}"
                  + (f", top-1 {'same' if agree[-1] else 'DIFFERENT'}"
                     if agree else ""), flush=True)
    seconds = (time.monotonic() - start) / max(args.inputs, 1)
    return report(args, name, errors, np.array(agree, dtype=bool), seconds)


def margin(args):
    name = os.path.splitext(os.path.basename(args.model))[0]
    session = numerics.ort_session(args.model)
    output = session.get_outputs()[0].name
    rng = np.random.default_rng(args.seed)
    margins, at_risk = [], []
    threshold = args.safety * args.rel_err
    for i in range(args.inputs):
        feeds = model_inputs(session, rng, args.int_high)
        ref = session.run([output], feeds)[0]
        y = np.sort(ref.astype(np.float64).reshape(-1))[::-1]
        margins.append((y[0] - y[1]) / (2 * np.linalg.norm(y)))
        if margins[-1] < threshold:
            at_risk.append((i, feeds, ref))
    smallest = min(margins)
    print(f"{name} {args.precision}: top-1 margin min {smallest:.3e} over "
          f"{len(margins)} inputs; measured worst rel-err {args.rel_err:.3e}: "
          f"the top-1 class cannot change on any of them unless its error "
          f"exceeds {smallest / args.rel_err:.1f}x the measured worst "
          f"(implied, not measured)")
    print(f"{name} {args.precision}: {len(at_risk)} of {len(margins)} inputs "
          f"have a margin below {args.safety:g}x the measured error"
          + (f" (inputs {', '.join(str(i) for i, _, _ in at_risk)})"
             if at_risk else ""))
    agree = len(margins) - len(at_risk)
    if args.emulate_at_risk and at_risk:
        artifact = os.path.join(args.workdir, f"{name}-{args.precision}.kiln")
        compile_model(args, args.model, artifact)
        for i, feeds, ref in at_risk:
            got = run_emu(args, artifact, feeds, os.path.join(
                args.workdir, f"{name}-{args.precision}-{i}"))(output)
            same = np.argmax(got) == np.argmax(ref)
            agree += same
            print(f"  input {i}: emu rel-err {rel_err(got, ref):.3e}, top-1 "
                  f"{'same' if same else 'DIFFERENT'}", flush=True)
        print(f"{name} {args.precision}: top-1 agreement {agree}/"
              f"{len(margins)} ({len(at_risk)} at-risk inputs emulated, the "
              f"rest implied by their margin)")
    elif at_risk:
        print(f"{name} {args.precision}: at least {agree}/{len(margins)} agree "
              f"(the at-risk inputs not emulated: --emulate-at-risk)")
    return agree >= 0.99 * len(margins)


def report(args, name, comparisons, agree, seconds):
    """comparisons: one numerics.Comparison per run."""
    worst = numerics.combine(comparisons)
    ok = worst.ok
    line = (f"{name} {args.precision}: {worst.figures()} (worst of "
            f"{len(comparisons)})")
    if agree.size:
        fraction = agree.mean()
        ok &= fraction >= 0.99
        line += (f", top-1 agreement {fraction:.3f} on {agree.size} inputs "
                 f"(bound 0.99)")
    print(line + f", emu {seconds:.1f} s per run"
          f"{'' if ok else ' EXCEEDED'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode",
                    choices=["rounding", "classifier", "model", "margin"])
    ap.add_argument("paths", nargs="+", help="[MODEL.onnx] WORKDIR")
    ap.add_argument("--precision", required=True, choices=list(BOUNDS))
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--kilnc-arg", action="append", default=[],
                    help="extra kilnc flag (repeatable), e.g. --fuse=false")
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--io-precision", default="",
                    help="kilnc --io-precision (rounding mode: fp16 only)")
    ap.add_argument("--inputs", type=int, default=1)
    ap.add_argument("--rel-err", type=float, default=0.0,
                    help="margin mode: the worst relative error measured")
    ap.add_argument("--safety", type=float, default=3.0,
                    help="margin mode: inputs whose margin is below this "
                         "many times --rel-err are at risk")
    ap.add_argument("--emulate-at-risk", action="store_true",
                    help="margin mode: run the at-risk inputs on emu")
    ap.add_argument("--progress", action="store_true",
                    help="model mode: a line per input as it completes")
    ap.add_argument("--int-high", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.mode in ("model", "margin"):
        if len(args.paths) != 2:
            ap.error(f"{args.mode} mode takes MODEL.onnx WORKDIR")
        if args.mode == "margin" and args.rel_err <= 0:
            ap.error("margin mode needs --rel-err E > 0")
        args.model, args.workdir = args.paths
    else:
        if len(args.paths) != 1:
            ap.error(f"{args.mode} mode takes WORKDIR")
        args.workdir = args.paths[0]
    os.makedirs(args.workdir, exist_ok=True)
    ok = {"rounding": rounding, "classifier": classifier,
          "model": whole_model, "margin": margin}[args.mode](args)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
