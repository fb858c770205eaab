#!/usr/bin/env python3
"""Every epilogue op through both kernel generators, on special values
(issue 22).

Usage: epilogue_special_values.py WORKDIR [--kilnc K] [--kiln-run R]
                                  [--only NAME,...] [--precision fp32|bf16]

A contraction region's elementwise epilogue is CUDA C++ that
lib/Conversion/FusionToTemplates/EpilogueEmitter.cpp prints from the
element-level IR of lib/Conversion/KilnToLinalg/ScalarSemantics.cpp; a
generated kernel's body is built from the same IR (ElementwiseToLinalg.cpp).
They must mean the same, NaN and Inf included (by construction since issue
23, and by this test), and
what PyTorch and onnxruntime mean (NaN propagates through Relu, Clip, Max
and Min). For each op of the table below (every op the epilogue has a form
for that an ONNX graph reaches), one model

    a = MatMul(x, W)          x = ones [32, 16], W = e_0 rows: a = 1 exactly
    v = Mul(a, s)             s [32, 32]: the special values, exactly
    y = op(v [, t])           t [32, 32]: the second operand (binary ops)

is compiled twice: by default, where y is the epilogue of one template
kernel (kilnc --stats names a kiln_gemm_ kernel, else the case fails: it
would test nothing), and with --contraction-kernels=false, where the
generated kernel computes it. Both run on emu. s and t take every pair of
the values NaN, +-Inf, +-0, +-2^-149 and +-1e-40 (subnormal), 2^-126 (the
least normal), +-1, 0.5, -2.5, 3, -7, 6 (Clip's bound), +-20, +-100,
+-3.4e38, 1e-30 (576 pairs; the rest of the 1024 elements are N(0, 3)), and
the checks are, per element:

  agree     the two kernels give the same float, bit for bit (any NaN
            equals any NaN; the sign of a zero counts);
  numpy     (fp32) both equal numpy's float64 evaluation of the op's
            definition rounded to float32: the same NaN/Inf, and finite
            values within the op's error (ulps of the result, 0 for the
            correctly rounded +, -, *, /, sqrt and the exact ones; more
            for CUDA's transcendentals, and an absolute term where the
            float32 formula cancels, as 1 + erf(x) does in Gelu for x << 0;
            every bound is in the table). Zero signs are not compared with
            numpy for max/min/relu/clip (numpy's max(-0, +0) is -0, IEEE
            754-2019's maximum, which both kernels follow, is +0).

Softplus, elu, hard sigmoid, hard swish, floor, ceil, round, sin, cos
and atan gained epilogue forms when the epilogue came to be printed from
the scalar IR; before, they ran on generated kernels only. With --precision bf16 the models compile with --precision=bf16 (the
template is the sm_90a wgmma kernel): only `agree` is checked. One line
per op: "<op>: template <kernel>, agree ok|N differ, numpy ok|..." and
exits 1 on any failure.
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fused_index_arithmetic import contraction_report  # noqa: E402

M, K, N = 32, 16, 32
F32 = np.float32
SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 2.0 ** -149,
            -(2.0 ** -149), 1e-40, -1e-40, 2.0 ** -126, 1.0, -1.0, 0.5, -2.5,
            3.0, -7.0, 6.0, 20.0, -20.0, 100.0, -100.0, 3.4e38, -3.4e38, 1e-30]
ULP = 2.0 ** -23  # float32's ulp of 1


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu(x):
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi)
                                   * (x + 0.044715 * x ** 3)))


def where_nan(fn):
    """fn, but NaN wherever an operand is NaN (numpy's fmax-style helpers
    are not used: these are the propagating definitions)."""
    def wrapped(a, b):
        out = fn(a, b)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, out)
    return wrapped


# name -> (ONNX node builder, numpy float64 reference, ulps, absolute
# error term as a function of the inputs (or None), signed zeros compared
# with numpy). A builder gets (v, t, out) names and returns nodes plus
# initializers.
def node(op, inputs, **attrs):
    return lambda v, t, out: ([helper.make_node(
        op, [{"v": v, "t": t}.get(i, i) for i in inputs], [out], **attrs)], [])


def clip(lo, hi):
    def build(v, t, out):
        inits = []
        names = [v]
        for name, value in (("lo", lo), ("hi", hi)):
            if value is None:
                names.append("")
            else:
                names.append(name)
                inits.append(numpy_helper.from_array(np.array(value, F32), name))
        while names[-1] == "":
            names.pop()
        return [helper.make_node("Clip", names, [out])], inits
    return build


def rsqrt_pattern(v, t, out):
    return [helper.make_node("Sqrt", [v], ["sq"]),
            helper.make_node("Reciprocal", ["sq"], [out])], []


def select(v, t, out):
    return [helper.make_node("Where", ["c", v, t], [out])], []


def relu_ref(a, b):
    return np.where(np.isnan(a), np.nan, np.maximum(a, 0.0))


def clip_ref(lo, hi):
    def ref(a, b):
        out = a
        if lo is not None:
            out = np.where(np.isnan(out), np.nan, np.maximum(out, lo))
        if hi is not None:
            out = np.where(np.isnan(out), np.nan, np.minimum(out, hi))
        return out
    return ref


CASES = {
    # name: (builder, reference, ulps, atol(a, b) or None, zero signs)
    "neg": (node("Neg", ["v"]), lambda a, b: -a, 0, None, True),
    "abs": (node("Abs", ["v"]), lambda a, b: np.abs(a), 0, None, True),
    "relu": (node("Relu", ["v"]), relu_ref, 0, None, False),
    "leaky-relu": (node("LeakyRelu", ["v"], alpha=0.1),
                   lambda a, b: np.where(a >= 0, a, np.float64(F32(0.1)) * a),
                   1, None, True),
    "clip": (clip(0.0, 6.0), clip_ref(0.0, 6.0), 0, None, False),
    "clip-min": (clip(-1.0, None), clip_ref(-1.0, None), 0, None, False),
    "clip-max": (clip(None, 6.0), clip_ref(None, 6.0), 0, None, False),
    "exp": (node("Exp", ["v"]), lambda a, b: np.exp(a), 2, None, True),
    "log": (node("Log", ["v"]), lambda a, b: np.log(a), 2, None, True),
    "sqrt": (node("Sqrt", ["v"]), lambda a, b: np.sqrt(a), 0, None, True),
    "rsqrt": (rsqrt_pattern, lambda a, b: 1.0 / np.sqrt(a), 3, None, True),
    "reciprocal": (node("Reciprocal", ["v"]), lambda a, b: 1.0 / a, 0, None,
                   True),
    "tanh": (node("Tanh", ["v"]), lambda a, b: np.tanh(a), 2, None, True),
    "erf": (node("Erf", ["v"]), lambda a, b: erf(a), 2, None, True),
    "sigmoid": (node("Sigmoid", ["v"]),
                lambda a, b: 1.0 / (1.0 + np.exp(-a)), 4, None, True),
    # 1 + erf(x) (or 1 + tanh) cancels for x << 0: float32 loses ulp(1) of
    # it, times 0.5 |x|.
    "gelu": (node("Gelu", ["v"]), lambda a, b: gelu(a), 4,
             lambda a, b: ULP * np.abs(a), True),
    "gelu-tanh": (node("Gelu", ["v"], approximate="tanh"),
                  lambda a, b: gelu_tanh(a), 4,
                  lambda a, b: 2 * ULP * np.abs(a), True),
    "add": (node("Add", ["v", "t"]), lambda a, b: a + b, 0, None, True),
    "sub": (node("Sub", ["v", "t"]), lambda a, b: a - b, 0, None, True),
    "mul": (node("Mul", ["v", "t"]), lambda a, b: a * b, 0, None, True),
    "div": (node("Div", ["v", "t"]), lambda a, b: a / b, 0, None, True),
    "max": (node("Max", ["v", "t"]), where_nan(np.maximum), 0, None, False),
    "min": (node("Min", ["v", "t"]), where_nan(np.minimum), 0, None, False),
    "pow": (node("Pow", ["v", "t"]), lambda a, b: np.power(a, b), 8, None,
            True),
    "where": (select, lambda a, b, c=None: None, 0, None, True),
    # Activations that had no epilogue form before the epilogue was printed
    # from ScalarSemantics.h (issue 23): they ran on generated kernels only.
    "softplus": (node("Softplus", ["v"]), lambda a, b: np.logaddexp(0.0, a),
                 4, None, True),
    "elu": (node("Elu", ["v"], alpha=0.5),
            lambda a, b: np.where(a >= 0, a, 0.5 * np.expm1(a)), 4, None,
            True),
    "hard-sigmoid": (node("HardSigmoid", ["v"], alpha=0.2, beta=0.5),
                     lambda a, b: clip_ref(0.0, 1.0)(
                         np.float64(F32(0.2)) * a + 0.5, b), 2,
                     lambda a, b: ULP * np.abs(0.2 * a), False),
    "hard-swish": (node("HardSwish", ["v"]),
                   lambda a, b: a * clip_ref(0.0, 1.0)(
                       a * np.float64(F32(1.0 / 6)) + 0.5, b), 3,
                   lambda a, b: ULP * np.abs(a) * (np.abs(a) / 6 + 1), True),
    # And ops with no epilogue form before at all.
    "floor": (node("Floor", ["v"]), lambda a, b: np.floor(a), 0, None, True),
    "ceil": (node("Ceil", ["v"]), lambda a, b: np.ceil(a), 0, None, True),
    "round": (node("Round", ["v"]), lambda a, b: np.round(a), 0, None, True),
    # CUDA's sinf/cosf: 2 ulp (full range reduction, so 3.4e38 too).
    "sin": (node("Sin", ["v"]), lambda a, b: np.sin(a), 2, None, True),
    "cos": (node("Cos", ["v"]), lambda a, b: np.cos(a), 2, None, True),
    "atan": (node("Atan", ["v"]), lambda a, b: np.arctan(a), 2, None, True),
}


def inputs(rng):
    count = M * N
    L = len(SPECIALS)
    s = rng.normal(0, 3, count)
    t = rng.normal(0, 3, count)
    for i in range(L * L):
        s[i] = SPECIALS[i % L]
        t[i] = SPECIALS[i // L]
    c = (rng.random(count) < 0.5)
    return (s.astype(F32).reshape(M, N), t.astype(F32).reshape(M, N),
            c.reshape(M, N))


def case(name):
    return CASES[name]


def build(name):
    builder = case(name)[0]
    nodes, inits = builder("v", "t", "y")
    w = np.zeros((K, N), F32)
    w[0, :] = 1.0
    used = {i for n in nodes for i in n.input}
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["a"]),
         helper.make_node("Mul", ["a", "s"], ["v"])] + nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [M, N])]
        + [helper.make_tensor_value_info(n, kind, [M, N])
           for n, kind in (("t", TensorProto.FLOAT), ("c", TensorProto.BOOL))
           if n in used],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
        [numpy_helper.from_array(w, "W")] + inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model


def run_kilnc(args, path, artifact, flags):
    done = subprocess.run([args.kilnc, path, "-o", artifact, "--stats"] + flags,
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[:1]
    return done.stdout, None


def run_emu(args, artifact, feeds, out):
    command = [args.kiln_run, artifact, "--device", "emu", "-o", out]
    for name, data in feeds.items():
        path = out + "-" + name + ".npy"
        np.save(path, data)
        command += ["-i", f"{name}={path}"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[:1]
    return np.load(os.path.join(out, "y.npy")), None


def bits(a):
    """float32 bits with every NaN made one NaN."""
    a = np.ascontiguousarray(a, F32)
    out = a.view(np.uint32).copy()
    out[np.isnan(a)] = 0x7FC00000
    return out


def describe(i, s, t, got, want=None):
    text = (f"[{i // N}, {i % N}] v={s.flat[i]!r} t={t.flat[i]!r}: "
            f"{got.flat[i]!r}")
    return text + (f", want {want.flat[i]!r}" if want is not None else "")


def against_numpy(name, got, s, t, c):
    _, ref, ulps, atol, zero_signs = case(name)
    a, b = s.astype(np.float64), t.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "where":
            want = np.where(c, a, b)
        else:
            want = ref(a, b)
        want32 = want.astype(F32)
        extra = atol(a, b) if atol else 0.0
    g = got.astype(np.float64)
    w = want32.astype(np.float64)
    bad = np.isnan(g) != np.isnan(w)
    both = ~np.isnan(g) & ~np.isnan(w)
    inf = both & (np.isinf(g) | np.isinf(w))
    bad |= inf & (g != w)
    finite = both & ~inf
    with np.errstate(all="ignore"):
        tol = ulps * ULP * np.abs(w) + (ulps > 0) * 2.0 ** -126 + extra
        bad |= finite & (np.abs(g - w) > tol)
    if zero_signs:
        zero = finite & (g == 0) & (w == 0)
        bad |= zero & (np.signbit(g) != np.signbit(w))
    if bad.any():
        first = int(np.argmax(bad.reshape(-1)))
        return f"{int(bad.sum())} off numpy, first " + describe(
            first, s, t, got, want32)
    return None


def check(args, name, feeds):
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    model = build(name)
    onnx.checker.check_model(model)
    onnx.save(model, path)
    flags = [f"--precision={args.precision}"] if args.precision != "fp32" else []
    stats, error = run_kilnc(args, path, os.path.join(work, "t.kiln"), flags)
    if error:
        print(f"{name}: kilnc failed: {error} FAIL")
        return False
    report = contraction_report(stats)
    template = [line.split(": ", 1)[1].split(",")[0] for line in report
                if line.startswith("kiln_gemm_")]
    if len(template) != 1 or len(report) != 1:
        print(f"{name}: the op is not in a template kernel's epilogue "
              f"({template}) FAIL")
        return False
    _, error = run_kilnc(args, path, os.path.join(work, "g.kiln"),
                         flags + ["--contraction-kernels=false"])
    if error:
        print(f"{name}: kilnc --contraction-kernels=false failed: {error} FAIL")
        return False
    inputs_used = {i.name for i in model.graph.input}
    results = {}
    for kind in ("t", "g"):
        got, error = run_emu(args, os.path.join(work, f"{kind}.kiln"),
                             {k: v for k, v in feeds.items() if k in inputs_used},
                             os.path.join(work, f"out-{kind}"))
        if error:
            print(f"{name}: kiln-run failed: {error} FAIL")
            return False
        results[kind] = got
    s, t, c = feeds["s"], feeds["t"], feeds["c"]
    differ = bits(results["t"]) != bits(results["g"])
    ok = not differ.any()
    agree = "ok" if ok else (
        f"{int(differ.sum())} differ, first " + describe(
            int(np.argmax(differ.reshape(-1))), s, t, results["t"],
            results["g"]) + " (template, generated)")
    line = f"{name}: template {template[0].strip()}, agree {agree}"
    if args.precision == "fp32":
        for kind, label in (("t", "template"), ("g", "generated")):
            problem = against_numpy(name, results[kind], s, t, c)
            if problem:
                ok = False
                line += f", {label} vs numpy: {problem}"
        if ok:
            line += ", numpy ok"
    print(line + (" ok" if ok else " FAIL"), flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    s, t, c = inputs(np.random.default_rng(0))
    feeds = {"x": np.ones((M, K), F32), "s": s, "t": t, "c": c}
    names = args.only.split(",") if args.only else list(CASES)
    failures = sum(not check(args, name, feeds) for name in names)
    print(f"{len(names)} ops, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
