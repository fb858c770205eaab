#!/usr/bin/env python3
"""kilnc --precision=int8 --calibrate on a digits CNN, checked independently.

The model: a CNN trained here with JAX on scikit-learn's digits (1,797 8x8
images shipped with scikit-learn; a seeded 80/20 split): Conv 3x3 1->8 +
bias, Relu, MaxPool 2, Conv 3x3 8->16 + bias, Relu, MaxPool 2, Flatten, Gemm
64->10, written as an ONNX model with a fixed batch of 120. Calibration
data: the first 240 training images (two batches).

Checks, each against something kilnc did not compute:

- calibration ranges: each activation's min and max in the calibration
  cache against onnxruntime (graph optimizations off) running the float
  model over the same images with those activations as outputs; within
  1e-5 of the tensor's largest magnitude (fp32 convolutions of at most 72
  terms, summed in another order: a few ulps). The input's range is exact
  (it is the data).
- thresholds: --calibration=percentile:99.9 and entropy against numpy
  implementations here (the |x| histogram of 2048 bins over [0, amax];
  the percentile's bin edge, and TensorRT's KL-divergence search), within
  one bin width (a value on a bin edge may fall on either side).
- the int8 kernels: kiln's int8 logits on emu against onnxruntime running
  the QDQ model kilnc wrote (--save-quantized), element by element, in
  units of the output's quantization step. onnxruntime computes each QDQ
  conv in float and rounds; kiln accumulates int32 and requantizes with
  the f32 multiplier (s_x * s_w) / s_y. Both round the same real number,
  so they differ only where it lies within float error of a rounding
  boundary: at most 1 step per requantization, and a flipped step in a
  hidden layer moves a logit by at most sum |w| * step. The bound: every
  logit within 2 steps, and at least 99% exactly equal.
- the deployment bar (issue 26): int8 held-out accuracy within 1 point of
  the fp32 artifact's, both on emu, over the 360 held-out images.
- --stats: every quantized node runs an int8 tensor-core kernel (wgmma_s8
  on sm_90, kilnc's default; mma_s8 with --wgmma=false),
  no int8 fallback.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

BATCH = 120


def load_digits():
    from sklearn.datasets import load_digits as sk_digits
    from sklearn.model_selection import train_test_split
    d = sk_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None, :, :]
    return train_test_split(x, d.target.astype(np.int64), test_size=360,
                            random_state=0, stratify=d.target)


def train(x, y, steps=400, seed=0):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_platforms", "cpu")
    k = jax.random.split(jax.random.PRNGKey(seed), 3)
    he = lambda key, shape, fan: jax.random.normal(key, shape) * np.sqrt(2.0 / fan)
    params = {
        "w1": he(k[0], (8, 1, 3, 3), 9), "b1": jnp.zeros(8),
        "w2": he(k[1], (16, 8, 3, 3), 72), "b2": jnp.zeros(16),
        "w3": he(k[2], (64, 10), 64), "b3": jnp.zeros(10),
    }

    def conv(x, w, b):
        y = jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)))
        return y + b[None, :, None, None]

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2),
                                     (1, 1, 2, 2), "VALID")

    def logits(p, x):
        h = pool(jax.nn.relu(conv(x, p["w1"], p["b1"])))
        h = pool(jax.nn.relu(conv(h, p["w2"], p["b2"])))
        return h.reshape(h.shape[0], -1) @ p["w3"] + p["b3"]

    def loss(p, x, y):
        return -jnp.mean(jax.nn.log_softmax(logits(p, x))[jnp.arange(len(y)), y])

    @jax.jit
    def step(p, m, v, t, x, y):
        g = jax.grad(loss)(p, x, y)
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        p = jax.tree_util.tree_map(
            lambda p, m, v: p - 0.01 * (m / (1 - 0.9 ** t)) /
            (jnp.sqrt(v / (1 - 0.999 ** t)) + 1e-8), p, m, v)
        return p, m, v

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    m, v = zeros, zeros
    rng = np.random.default_rng(seed)
    for t in range(1, steps + 1):
        i = rng.choice(len(x), 64, replace=False)
        params, m, v = step(params, m, v, t, x[i], y[i])
    return {k: np.asarray(p, dtype=np.float32) for k, p in params.items()}


def random_params(seed=0):
    rng = np.random.default_rng(seed)
    shapes = {"w1": (8, 1, 3, 3), "b1": (8,), "w2": (16, 8, 3, 3),
              "b2": (16,), "w3": (64, 10), "b3": (10,)}
    return {n: (rng.standard_normal(s) * 0.3).astype(np.float32)
            for n, s in shapes.items()}


def export(params, path, opset=17):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(a, n) for n, a in params.items()]
    inits.append(numpy_helper.from_array(np.array([BATCH, 64], np.int64), "flat"))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p2", "flat"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], name="fc"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 1, 8, 8])]
    if opset < 13:
        # As old exporters wrote them (IR version 3's rule): every
        # initializer listed as a graph input too.
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                   for t in inits]
    graph = helper.make_graph(
        nodes, "digits_cnn", inputs,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def ort_session(path, extra_outputs=()):
    import onnx
    import onnxruntime as ort
    model = onnx.load(path)
    for name in extra_outputs:
        if name not in [o.name for o in model.graph.output]:
            model.graph.output.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, None))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r.stdout + r.stderr


def kiln_logits(kiln_run, artifact, x, work, tag):
    out = []
    for b in range(len(x) // BATCH):
        inp = os.path.join(work, f"{tag}-in{b}.npy")
        np.save(inp, x[b * BATCH:(b + 1) * BATCH])
        odir = os.path.join(work, f"{tag}-out{b}")
        run([kiln_run, artifact, "--device", "emu", "-i", f"x={inp}", "-o", odir])
        out.append(np.load(os.path.join(odir, "logits.npy")))
    return np.concatenate(out)


def percentile_ref(a, amax, p, bins=2048):
    h, _ = np.histogram(np.minimum(np.abs(a.astype(np.float64)) / amax * bins, bins - 1e-9),
                        bins=bins, range=(0, bins))
    c = np.cumsum(h)
    i = int(np.searchsorted(c, c[-1] * p / 100.0))
    return (i + 1) * amax / bins


def entropy_ref(a, amax, bins=2048, levels=128):
    h, _ = np.histogram(np.minimum(np.abs(a.astype(np.float64)) / amax * bins, bins - 1e-9),
                        bins=bins, range=(0, bins))
    h = h.astype(np.float64)
    best, best_i = np.inf, bins
    for i in range(levels, bins + 1):
        p = h[:i].copy()
        p[i - 1] += h[i:].sum()
        q = np.zeros(i)
        edges = [l * i // levels for l in range(levels + 1)]
        for l in range(levels):
            s, e = edges[l], edges[l + 1]
            seg = h[s:e]
            nz = seg != 0
            if nz.any():
                q[s:e][nz] = seg.sum() / nz.sum()
        if p.sum() == 0 or q.sum() == 0:
            continue
        pn, qn = p / p.sum(), q / q.sum()
        m = pn > 0
        qm = np.where(qn[m] > 0, qn[m], 1e-10)
        d = float(np.sum(pn[m] * np.log(pn[m] / qm)))
        if d < best:
            best, best_i = d, i
    return best_i * amax / bins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--write-inputs", action="store_true",
                    help="only write the model with seeded random weights "
                         "(model.onnx, and model11.onnx at opset 11 with "
                         "its initializers listed as inputs) and "
                         "calibration files (calib.npy: 240 samples; "
                         "batch.npy: 120; few.npy: 10; wrong.npy: 240 of "
                         "1x4x4) for the "
                         "error tests")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.write_inputs:
        p = random_params()
        export(p, os.path.join(a.work, "model.onnx"))
        export(p, os.path.join(a.work, "model11.onnx"), opset=11)
        rng = np.random.default_rng(1)
        np.save(os.path.join(a.work, "calib.npy"),
                rng.random((2 * BATCH, 1, 8, 8), dtype=np.float32))
        np.save(os.path.join(a.work, "batch.npy"),
                rng.random((BATCH, 1, 8, 8), dtype=np.float32))
        np.save(os.path.join(a.work, "few.npy"),
                rng.random((10, 1, 8, 8), dtype=np.float32))
        np.save(os.path.join(a.work, "wrong.npy"),
                rng.random((2 * BATCH, 1, 4, 4), dtype=np.float32))
        return 0
    failures = []

    def check(ok, what):
        print(("ok: " if ok else "FAIL: ") + what)
        if not ok:
            failures.append(what)

    xtr, xte, ytr, yte = load_digits()
    params = train(xtr, ytr)
    model = os.path.join(a.work, "digits.onnx")
    export(params, model)
    calib = os.path.join(a.work, "calib.npy")
    np.save(calib, xtr[:2 * BATCH])

    fp32 = os.path.join(a.work, "fp32.kiln")
    run([a.kilnc, model, "-o", fp32])
    int8 = os.path.join(a.work, "int8.kiln")
    cache = os.path.join(a.work, "minmax.json")
    qdq = os.path.join(a.work, "qdq.onnx")
    stats = run([a.kilnc, model, "--precision=int8", f"--calibrate={calib}",
                 f"--calibration-cache={cache}", f"--save-quantized={qdq}",
                 "--stats", "-o", int8])

    # Ranges against onnxruntime's float run.
    table = json.load(open(cache))["tensors"]
    print("calibrated tensors:", " ".join(sorted(table)))
    names = [n for n in table if n != "x"]
    sess = ort_session(model, names)
    acts = {n: [] for n in names}
    for b in range(2):
        outs = sess.run(names, {"x": xtr[b * BATCH:(b + 1) * BATCH]})
        for n, o in zip(names, outs):
            acts[n].append(o)
    acts = {n: np.concatenate(v) for n, v in acts.items()}
    acts["x"] = xtr[:2 * BATCH]
    check(table["x"]["min"] == float(acts["x"].min()) and
          table["x"]["max"] == float(acts["x"].max()),
          "input x range is the calibration data's exactly")
    worst = 0.0
    for n in names:
        amax = float(np.abs(acts[n]).max())
        err = max(abs(table[n]["min"] - float(acts[n].min())),
                  abs(table[n]["max"] - float(acts[n].max()))) / amax
        worst = max(worst, err)
        check(abs(table[n]["threshold"] - amax) <= 1e-5 * amax,
              f"minmax threshold of {n} is max |x| ({table[n]['threshold']:.6g} vs {amax:.6g})")
    check(worst <= 1e-5, f"activation ranges match onnxruntime (worst {worst:.2e} of max |x|)")

    # Percentile and entropy thresholds against numpy.
    for method, ref in (("percentile:99.9", lambda v, m: percentile_ref(v, m, 99.9)),
                        ("entropy", entropy_ref)):
        mcache = os.path.join(a.work, method.replace(":", "-") + ".json")
        run([a.kilnc, model, "--precision=int8", f"--calibrate={calib}",
             f"--calibration={method}", f"--calibration-cache={mcache}",
             "-o", os.path.join(a.work, "m.kiln")])
        mt = json.load(open(mcache))["tensors"]
        for n in ("x", "r1", "r2"):
            amax = float(np.abs(acts[n]).max())
            want = ref(acts[n], amax)
            got = mt[n]["threshold"]
            check(abs(got - want) <= amax / 2048 * 1.0001,
                  f"{method} threshold of {n}: {got:.6g} vs numpy {want:.6g}")

    import onnx
    import onnx.utils

    # The int8 kernels against onnxruntime on the QDQ model.
    ort_q = ort_session(qdq)
    ref = np.concatenate([ort_q.run(["logits"], {"x": xte[b * BATCH:(b + 1) * BATCH]})[0]
                          for b in range(3)])
    got = kiln_logits(a.kiln_run, int8, xte, a.work, "int8")
    from onnx import numpy_helper
    q = onnx.load(qdq)
    scale = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}["logits_scale"]
    steps = np.abs(got - ref) / scale
    exact = float(np.mean(steps < 0.5))
    print(f"int8 logits vs onnxruntime QDQ: max {steps.max():.2f} steps, {exact:.2%} equal")
    check(steps.max() <= 2.0 + 1e-3 and exact >= 0.99,
          "int8 logits within 2 steps of onnxruntime's, 99% equal")

    # The sensitivity report: each node quantized alone, against the same
    # computed by onnxruntime on the QDQ model's chain for that node alone
    # (onnx.utils.extract_model from the node's float input to its output),
    # fed onnxruntime's float activations. The two differ only by the rare
    # one-step flips above: within 5% of each other.
    sens_out = run([a.kilnc, model, "--precision=int8", f"--calibrate={calib}",
                    "--stats", "--auto-keep-float=1", "-o",
                    os.path.join(a.work, "keep.kiln")])
    reported = dict(re.findall(r"^    node '(\w+)': ([0-9.e+-]+)", sens_out, re.M))
    order = re.findall(r"^    node '(\w+)': ", sens_out, re.M)
    print("sensitivity:", ", ".join(f"{n} {reported[n]}" for n in order))
    chains = {"conv1": ("x", "r1"), "conv2": ("p1", "r2"), "fc": ("f", "logits")}
    for node, (src, dst) in chains.items():
        sub = os.path.join(a.work, f"chain-{node}.onnx")
        onnx.utils.extract_model(qdq, sub, [src], [dst])
        chain = ort_session(sub)
        got_q = np.concatenate([chain.run([dst], {src: acts[src][b * BATCH:(b + 1) * BATCH]})[0]
                                for b in range(2)])
        want = float(np.linalg.norm(got_q - acts[dst]) / np.linalg.norm(acts[dst]))
        have = float(reported.get(node, "nan"))
        check(abs(have - want) <= 0.05 * want,
              f"sensitivity of {node}: {have:.4g} vs onnxruntime {want:.4g}")
    kept = re.findall(r"^    node '(\w+)': [0-9.e+-]+ \(kept in float", sens_out, re.M)
    check(len(order) == 3 and kept == order[:1] and
          f"node '{order[0]}': --keep-float, kept in float" in sens_out,
          f"--auto-keep-float=1 keeps the most sensitive node ({order[:1]}) in float")

    # Accuracy: fp32 vs int8, both kiln on emu.
    f32 = kiln_logits(a.kiln_run, fp32, xte, a.work, "fp32")
    acc32 = float(np.mean(f32.argmax(1) == yte))
    acc8 = float(np.mean(got.argmax(1) == yte))
    acc_ort = float(np.mean(ref.argmax(1) == yte))
    print(f"held-out accuracy: fp32 {acc32:.2%}, int8 {acc8:.2%} "
          f"(onnxruntime QDQ {acc_ort:.2%}), top-1 agreement "
          f"{float(np.mean(f32.argmax(1) == got.argmax(1))):.2%}")
    check(acc32 >= 0.95, "the fp32 model learned the digits (>= 95%)")
    check(acc8 >= acc32 - 0.01, "int8 accuracy within 1 point of fp32")

    # --stats: three quantized nodes, each an int8 kernel.
    s8 = re.findall(r"^  (kiln_q\w+): (?:wgmma|mma)_s8 ", stats, re.M)
    check("int8 calibration: 3 nodes" in stats, "--stats lists 3 calibrated nodes")
    check(len(s8) == 3 and "int8 fallbacks" not in stats and
          "generic fallback" not in stats,
          f"every quantized node runs an int8 kernel ({', '.join(s8)}; "
          "no int8 or generic fallback)")
    print(f"calibrate-digits: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
