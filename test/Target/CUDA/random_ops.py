#!/usr/bin/env python3
"""ONNX's random ops through kilnc and kiln-run on emu, checked two ways.

Kiln draws RandomUniform[Like], RandomNormal[Like], Bernoulli and
training-mode Dropout from Philox-4x32-10 (RandomHandlers.cpp), so the ONNX
node tests' expected outputs (numpy's generator) cannot match; these checks
replace them (docs/conformance.md lists those tests as random).

1. Bits: RandomUniform(0, 1) must equal, element for element, the top 24
   bits of the Philox words a numpy Philox (test/e2e/training/
   philox_ref.py, itself checked against Random123's known answers) draws
   for the node's key (its seed), counter 0 and stream (FNV-1a of its
   output name, doubled). Exact: the kernel's u = bits * 2^-24 is exact in
   f32 and times 1, plus 0, stays so.
2. Statistics on N = 65536 draws, each bound a tail probability below 1e-4
   so a correct generator fails about once in 10^4 runs (the draws are
   fixed by the seed, so in practice never):
   - uniform(low, high) and normal(mean, scale): Kolmogorov-Smirnov
     distance to the target CDF < 2.2 / sqrt(N) (P < 1e-4 asymptotically);
     mean within 4.5 standard errors; variance within 4.5 of its standard
     errors ((sqrt(2) sigma^2 / sqrt(N) for the normal, sqrt(1/180) (b-a)^2 /
     sqrt(N) for the uniform).
   - Bernoulli(p) for p in {0, 0.1, 0.5, 0.9, 1}: the frequency of ones
     within 4.5 binomial standard errors of p (exact for 0 and 1).
   - Dropout(ratio 0.3, training): kept fraction within 4.5 standard errors
     of 0.7; kept values equal x / 0.7 to 1 ulp; the mask output marks
     exactly the kept elements.
   - Two random nodes of one model (different output names) and the same
     node under two seeds: correlation below 4.5 / sqrt(N).
   - Reproducible: a second run gives the same bits.

usage: random_ops.py WORKDIR --kilnc KILNC --kiln-run KILN_RUN
Prints one line per check and "random ops: N checks, F failures".
"""
import argparse
import math
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "e2e", "training"))
import philox_ref  # noqa: E402

N = 65536
SHAPE = [256, 256]
FAILURES = []
CHECKS = [0]


def check(name, ok, detail):
    CHECKS[0] += 1
    print(f"{name}: {detail} {'ok' if ok else 'FAIL'}")
    if not ok:
        FAILURES.append(name)


def fnv1a_stream(name):
    """Composer::philoxStream."""
    h = 2166136261
    for ch in name.encode():
        h ^= ch
        h = (h * 16777619) & 0xFFFFFFFF
    return (h & 0x3FFFFFFF) * 2


def build(nodes, inputs, outputs, opset=22):
    graph = oh.make_graph(nodes, "random", inputs, outputs)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def run_model(args, model, feeds, tag):
    work = os.path.join(args.workdir, tag)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "m.onnx")
    onnx.save(model, path)
    artifact = os.path.join(work, "m.kiln")
    env = dict(os.environ, KILN_PTXAS="")
    built = subprocess.run([args.kilnc, path, "-o", artifact],
                           capture_output=True, text=True, env=env)
    if built.returncode:
        raise RuntimeError(f"kilnc: {built.stderr.strip()}")
    command = [args.kiln_run, artifact, "--device", "emu", "-o", work]
    for name, data in feeds.items():
        file = os.path.join(work, f"in_{name}.npy")
        np.save(file, data)
        command += ["-i", f"{name}={file}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode:
        raise RuntimeError(f"kiln-run: {ran.stderr.strip()}")
    return {o.name: np.load(os.path.join(work, f"{o.name}.npy"))
            for o in model.graph.output}


def float_out(name, shape=SHAPE, elem=onnx.TensorProto.FLOAT):
    return oh.make_tensor_value_info(name, elem, shape)


def ks_distance(samples, cdf):
    x = np.sort(samples.astype(np.float64).ravel())
    n = x.size
    f = cdf(x)
    upper = np.arange(1, n + 1) / n - f
    lower = f - np.arange(0, n) / n
    return float(max(upper.max(), lower.max()))


def normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workdir")
    parser.add_argument("--kilnc", default="kilnc")
    parser.add_argument("--kiln-run", default="kiln-run")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    sqrt_n = math.sqrt(N)

    # 1. Bits, and 2. uniform statistics, reproducibility, independence.
    model = build(
        [oh.make_node("RandomUniform", [], ["u"], shape=SHAPE, seed=7.0),
         oh.make_node("RandomUniform", [], ["v"], shape=SHAPE, seed=7.0),
         oh.make_node("RandomUniform", [], ["w"], shape=SHAPE, seed=8.0,
                      low=-2.0, high=3.0)],
        [], [float_out("u"), float_out("v"), float_out("w")])
    out = run_model(args, model, {}, "uniform")
    again = run_model(args, model, {}, "uniform-again")
    bits = philox_ref.element_bits(SHAPE, (7, 0), (0, 0, 0, 0),
                                   fnv1a_stream("u"))
    expected = ((bits >> np.uint64(8)).astype(np.float64) *
                2.0 ** -24).astype(np.float32)
    wrong = int(np.sum(out["u"] != expected))
    check("uniform bits", wrong == 0,
          f"{wrong}/{N} elements differ from numpy Philox")
    check("uniform reproducible", np.array_equal(out["u"], again["u"]) and
          np.array_equal(out["w"], again["w"]), "second run identical")
    u, w = out["u"], out["w"]
    d = ks_distance(u, lambda x: np.clip(x, 0, 1))
    check("uniform(0,1) KS", d < 2.2 / sqrt_n, f"D = {d:.5f} (< {2.2 / sqrt_n:.5f})")
    d = ks_distance(w, lambda x: np.clip((x + 2) / 5, 0, 1))
    check("uniform(-2,3) KS", d < 2.2 / sqrt_n, f"D = {d:.5f}")
    mean_err = abs(w.mean(dtype=np.float64) - 0.5) / (5 / math.sqrt(12) / sqrt_n)
    check("uniform(-2,3) mean", mean_err < 4.5, f"{mean_err:.2f} standard errors")
    var_err = abs(w.var(dtype=np.float64) - 25 / 12) / (25 * math.sqrt(1 / 180) / sqrt_n)
    check("uniform(-2,3) variance", var_err < 4.5, f"{var_err:.2f} standard errors")
    check("uniform range", bool(u.min() >= 0 and u.max() < 1 and w.min() >= -2
                                and w.max() < 3), "u in [0, 1), w in [-2, 3)")
    r = abs(np.corrcoef(u.ravel(), out["v"].ravel())[0, 1])
    check("two nodes independent", r < 4.5 / sqrt_n, f"|corr| = {r:.5f}")
    r = abs(np.corrcoef(u.ravel(), w.ravel())[0, 1])
    check("two seeds independent", r < 4.5 / sqrt_n, f"|corr| = {r:.5f}")

    # Normal and NormalLike.
    like = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, SHAPE)
    model = build(
        [oh.make_node("RandomNormal", [], ["z"], shape=SHAPE, seed=3.0,
                      mean=1.5, scale=2.0),
         oh.make_node("RandomNormalLike", ["x"], ["zl"], seed=4.0)],
        [like], [float_out("z"), float_out("zl")])
    out = run_model(args, model, {"x": np.zeros(SHAPE, np.float32)}, "normal")
    z, zl = out["z"], out["zl"]
    d = ks_distance(z, lambda x: normal_cdf((x - 1.5) / 2.0))
    check("normal(1.5,2) KS", d < 2.2 / sqrt_n, f"D = {d:.5f}")
    mean_err = abs(z.mean(dtype=np.float64) - 1.5) / (2.0 / sqrt_n)
    check("normal(1.5,2) mean", mean_err < 4.5, f"{mean_err:.2f} standard errors")
    var_err = abs(z.var(dtype=np.float64) - 4.0) / (math.sqrt(2) * 4.0 / sqrt_n)
    check("normal(1.5,2) variance", var_err < 4.5, f"{var_err:.2f} standard errors")
    d = ks_distance(zl, normal_cdf)
    check("normal-like(0,1) KS", d < 2.2 / sqrt_n, f"D = {d:.5f}")
    check("normal finite", bool(np.isfinite(z).all() and np.isfinite(zl).all()),
          "no inf or NaN")

    # Bernoulli over a probability grid.
    probs = np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32)
    grid = np.repeat(probs[:, None], N, axis=1)
    model = build([oh.make_node("Bernoulli", ["p"], ["b"], seed=5.0)],
                  [oh.make_tensor_value_info("p", onnx.TensorProto.FLOAT,
                                             [5, N])],
                  [float_out("b", [5, N])])
    b = run_model(args, model, {"p": grid}, "bernoulli")["b"]
    check("bernoulli values", bool(np.isin(b, [0.0, 1.0]).all()), "only 0 and 1")
    for p, row in zip(probs, b):
        freq = float(row.mean(dtype=np.float64))
        if p in (0.0, 1.0):
            check(f"bernoulli p={p:g}", freq == p, f"frequency {freq}")
        else:
            err = abs(freq - p) / math.sqrt(p * (1 - p) / N)
            check(f"bernoulli p={p:g}", err < 4.5, f"{err:.2f} standard errors")

    # Training-mode dropout with its mask output.
    ratio = np.array(0.3, np.float32)
    mode = np.array(True)
    model = build(
        [oh.make_node("Dropout", ["x", "r", "t"], ["y", "m"], seed=11)],
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, SHAPE)],
        [float_out("y"), float_out("m", elem=onnx.TensorProto.BOOL)])
    model.graph.initializer.extend([onnx.numpy_helper.from_array(ratio, "r"),
                                    onnx.numpy_helper.from_array(mode, "t")])
    x = np.random.default_rng(1).uniform(1, 2, SHAPE).astype(np.float32)
    out = run_model(args, model, {"x": x}, "dropout")
    y, m = out["y"], out["m"]
    kept = float(m.mean(dtype=np.float64))
    err = abs(kept - 0.7) / math.sqrt(0.7 * 0.3 / N)
    check("dropout keep rate", err < 4.5, f"{kept:.4f}, {err:.2f} standard errors")
    scaled = (x / np.float32(0.7)).astype(np.float32)
    ulps = np.abs(y[m].astype(np.float64) - scaled[m]) / np.spacing(scaled[m])
    check("dropout kept values", bool(ulps.max() <= 1.0 and (y[~m] == 0).all()),
          f"kept within {ulps.max():.1f} ulp of x / 0.7, dropped exactly 0")

    print(f"random ops: {CHECKS[0]} checks, {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
