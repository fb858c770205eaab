#!/usr/bin/env python3
"""Ten whole training steps on emu against JAX in float64.

Two models, each with two optimizers (SGD+momentum; AdamW with weight
decay and a cosine schedule with warm-up), ten steps each, every step on a
different batch:

- a small CNN (cnn_model.py: conv 3x3, batch norm, relu, max pooling, conv,
  batch norm, relu, average pooling, flatten, linear) with cross-entropy;
- the BERT-style encoder layer (test/Frontend/ONNX/models/make_encoder.py,
  shrunk: embedding Gather, layer norms, attention with softmax, erf GELU)
  with a mean-squared-error loss against a random target.

With --only lstm,gru (test/Pipelines/Training/recurrent-step.test): a
bidirectional LSTM and a GRU (linear_before_reset 1), layout 1, with an MSE
loss on Y: backpropagation through time through the recurrence the importer
unrolls.

Kiln side: `kilnc --train` compiles the ONNX model; step k is one
`kiln-train` epoch over batch k (N = B; from step 2 on `--resume` from the
checkpoint of step k-1). The loss of each step comes from the history CSV,
the weights, optimizer moments, step counter and batch-norm running
statistics from the checkpoint after step 10.

Reference side: each model written again in jax.numpy from the ONNX
operator definitions (not from Kiln's IR), differentiated by jax.grad in
float64, and the optimizer rules written from PyTorch's documentation
(SGD with momentum: buf = mu*buf + g, w -= lr*buf; AdamW: w *= 1 - lr*wd,
then Adam with bias correction). Batch norm in training mode normalises
with the batch's mean and biased variance and updates the running
statistics as ONNX's BatchNormalization (training_mode=1) defines them:
running = momentum * running + (1 - momentum) * batch (biased variance, as
ONNX's reference implementation has it). After the last step `kiln-train
--export` writes the weights and running statistics into the ONNX model;
onnxruntime's output on it (inference-mode batch norm, so the running
statistics matter) must match Kiln's eval entry point (`--predict`) on the
same inputs.

Bound: every loss and every element of every weight, moment and running
statistic within 1e-4 relative (absolute floor 1e-6 for values near zero,
where relative error is meaningless). Kiln computes in fp32: one step's
rounding is ~1e-7 relative per op, a few hundred ops deep gives ~1e-6,
and ten steps compound it to ~1e-5 at worst (measured: the worst relative
error printed per configuration). The eval comparison uses the same bound:
both sides are fp32 inference of the same weights.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "Frontend", "ONNX", "models")]

STEPS = 10
RTOL, ATOL = 1e-4, 1e-6

OPTIMIZERS = [
    ("momentum", "momentum:lr=0.05,momentum=0.9",
     {"kind": "momentum", "lr": 0.05, "momentum": 0.9}),
    ("adamw", "adamw:lr=0.01,weight_decay=0.05,schedule=cosine,"
              "warmup_steps=3,total_steps=10,min_lr=0.001",
     {"kind": "adamw", "lr": 0.01, "wd": 0.05, "b1": 0.9, "b2": 0.999,
      "eps": 1e-8, "warmup": 3, "total": 10, "min_lr": 0.001}),
]


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        assert info["dtype"] == "F32", info
        out[name] = np.frombuffer(data[lo:hi], np.float32).reshape(info["shape"])
    return out


# --- The models in jax.numpy, from the ONNX operator definitions. ---------

def cnn_forward(jnp, lax, w, stats, x, momentum, eps=1e-5):
    """Returns (logits, new running statistics) in training mode."""
    new_stats = {}

    def conv(x, k):  # ONNX Conv, pads 1, stride 1, NCHW / OIHW, no bias
        return lax.conv_general_dilated(x, k, (1, 1), ((1, 1), (1, 1)),
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))

    def bn(x, p):  # BatchNormalization, training_mode=1
        mean = jnp.mean(x, axis=(0, 2, 3))
        var = jnp.mean((x - mean[None, :, None, None]) ** 2, axis=(0, 2, 3))
        new_stats[p + ".bn.mean"] = momentum * stats[p + ".bn.mean"] + (1 - momentum) * mean
        new_stats[p + ".bn.var"] = momentum * stats[p + ".bn.var"] + (1 - momentum) * var
        y = (x - mean[None, :, None, None]) / jnp.sqrt(var[None, :, None, None] + eps)
        return y * w[p + ".bn.scale"][None, :, None, None] + w[p + ".bn.bias"][None, :, None, None]

    def block(x, p):
        return jnp.maximum(bn(conv(x, w[p + ".weight"]), p), 0)

    h = block(x, "conv1")
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    h = block(h, "conv2")
    h = lax.reduce_window(h, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4
    h = h.reshape(h.shape[0], -1)
    return h @ w["fc.weight"].T + w["fc.bias"], new_stats


def cnn_eval(w, stats, x, eps=1e-5):
    """Inference-mode forward in numpy float64 (running statistics)."""
    import jax.numpy as jnp
    from jax import lax

    def block(x, p):
        c = lambda v: v[None, :, None, None]
        y = lax.conv_general_dilated(x, w[p + ".weight"], (1, 1), ((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        y = (y - c(stats[p + ".bn.mean"])) / jnp.sqrt(c(stats[p + ".bn.var"]) + eps)
        return jnp.maximum(y * c(w[p + ".bn.scale"]) + c(w[p + ".bn.bias"]), 0)
    h = block(x, "conv1")
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    h = block(h, "conv2")
    h = lax.reduce_window(h, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4
    return np.asarray(h.reshape(h.shape[0], -1) @ w["fc.weight"].T + w["fc.bias"])


def encoder_forward(jnp, jsp, w, const, ids, heads):
    """make_encoder.py's graph, op by op from the ONNX definitions."""
    def ln(x, p):  # LayerNormalization over the last axis, epsilon 1e-12
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-12) * w[p + ".gamma"] + w[p + ".beta"]

    def linear(x, p):
        return x @ w[p + ".weight"] + w[p + ".bias"]
    x = w["embeddings.word"][ids] + w["embeddings.position"]
    x = ln(x, "embeddings.norm")
    b, s, h = x.shape
    d = h // heads
    split = lambda t: t.reshape(b, s, heads, d).transpose(0, 2, 1, 3)
    q, k, v = (split(linear(x, "attention." + n)) for n in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / const["scale"]
    probs = jnp.exp(scores - scores.max(-1, keepdims=True))
    probs = probs / probs.sum(-1, keepdims=True)
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
    x = ln(linear(ctx, "attention.output") + x, "attention.norm")
    u = linear(x, "ffn.in")
    gelu = u * (jsp.erf(u / const["sqrt2"]) + const["one"]) * const["half"]
    return ln(linear(gelu, "ffn.out") + x, "ffn.norm")


# --- The optimizers, from PyTorch's documentation. ------------------------

def lr_at(t, o):
    if o["kind"] == "momentum":
        return o["lr"]
    warm, total, lo, lr = o["warmup"], o["total"], o["min_lr"], o["lr"]
    if t <= warm:
        return lr * t / warm
    p = min((t - warm) / (total - warm), 1.0)
    return lo + (lr - lo) / 2 * (1 + np.cos(np.pi * p))


def update(o, t, w, g, state):
    lr = lr_at(t, o)
    for n in w:
        if o["kind"] == "momentum":
            state["m"][n] = o["momentum"] * state["m"][n] + g[n]
            w[n] = w[n] - lr * state["m"][n]
        else:
            b1, b2 = o["b1"], o["b2"]
            w[n] = w[n] * (1 - lr * o["wd"])
            state["m"][n] = b1 * state["m"][n] + (1 - b1) * g[n]
            state["v"][n] = b2 * state["v"][n] + (1 - b2) * g[n] ** 2
            mhat = state["m"][n] / (1 - b1 ** t)
            vhat = state["v"][n] / (1 - b2 ** t)
            w[n] = w[n] - lr * mhat / (np.sqrt(vhat) + o["eps"])


# --- Driver. --------------------------------------------------------------

class Case:
    """One model: its ONNX file, kilnc flags, batches and JAX loss."""


def cnn_case(work, rng):
    import onnx
    from onnx import numpy_helper
    import cnn_model
    c = Case()
    c.name, c.batch, c.momentum = "cnn", 8, 0.8
    model = cnn_model.build(c1=4, c2=6, size=8, classes=5, seed=3,
                            momentum=c.momentum, stats=True)
    c.onnx = os.path.join(work, "cnn.onnx")
    onnx.save(model, c.onnx)
    inits = {i.name: numpy_helper.to_array(i).astype(np.float64)
             for i in model.graph.initializer}
    c.stats = {n: v for n, v in inits.items() if ".bn.mean" in n or ".bn.var" in n}
    c.weights = {n: v for n, v in inits.items() if n not in c.stats}
    c.flags = ["--shape", f"x={c.batch}x1x8x8", "--loss=cross_entropy",
               f"--labels=y:{c.batch}:int64"]
    c.batches = [(rng.standard_normal((c.batch, 1, 8, 8)).astype(np.float32),
                  rng.integers(0, 5, c.batch).astype(np.int64))
                 for _ in range(STEPS)]
    c.eval_x = rng.standard_normal((13, 1, 8, 8)).astype(np.float32)
    c.eval_labels = np.zeros(13, np.int64)
    c.input = "x"

    def loss_and_stats(jnp, lax, jsp, w, stats, x, y):
        logits, new = cnn_forward(jnp, lax, w, stats, x, c.momentum)
        logp = logits - jax_logsumexp(jnp, logits)
        return -jnp.mean(logp[jnp.arange(len(y)), y]), new
    c.loss_and_stats = loss_and_stats
    return c


def jax_logsumexp(jnp, z):
    m = z.max(-1, keepdims=True)
    return m + jnp.log(jnp.exp(z - m).sum(-1, keepdims=True))


def encoder_case(work, rng):
    import onnx
    from onnx import numpy_helper
    import make_encoder
    c = Case()
    c.name, c.batch = "encoder", 2
    hidden, heads, seq, vocab = 16, 2, 6, 12
    args = argparse.Namespace(hidden=hidden, heads=heads, ffn=32, vocab=vocab,
                              seq=seq, batch=c.batch, dynamic_batch=False,
                              portable=False)
    model = make_encoder.build(args)
    # make_encoder's weights have std 0.02: scale them up so every layer
    # (attention in particular) carries a signal the test can see.
    for init in model.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype == np.float32 and a.ndim == 2:
            init.CopyFrom(numpy_helper.from_array((a * 20).astype(np.float32), init.name))
    c.onnx = os.path.join(work, "encoder.onnx")
    onnx.save(model, c.onnx)
    constants = ["scale", "sqrt2", "one", "half"]
    # The key bias adds q.b to every score of a query's row, which softmax
    # ignores: its gradient is exactly zero, fp32 rounding makes it noise,
    # and Adam's m / sqrt(v) would turn that noise into full-size steps. It
    # is frozen: a constant of both artifacts, so not in the checkpoint.
    frozen = ["attention.key.bias"]
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    c.const = {n: float(inits[n]) for n in constants}
    c.frozen = {n: inits[n].astype(np.float64) for n in frozen}
    c.weights = {n: v.astype(np.float64) for n, v in inits.items()
                 if v.dtype == np.float32 and n not in constants + frozen}
    c.stats = {}
    c.heads = heads
    c.flags = ["--loss=mse", "--loss-on=hidden_states",
               f"--labels=target:{c.batch}x{seq}x{hidden}:f32",
               "--freeze=" + "|".join(constants + frozen).replace(".", "\\.")]
    c.batches = [(rng.integers(0, vocab, (c.batch, seq)).astype(np.int64),
                  rng.standard_normal((c.batch, seq, hidden)).astype(np.float32))
                 for _ in range(STEPS)]
    c.eval_x = None
    c.input = "input_ids"

    def loss_and_stats(jnp, lax, jsp, w, stats, ids, target):
        out = encoder_forward(jnp, jsp, {**w, **c.frozen}, c.const, ids, c.heads)
        return jnp.mean((out - target) ** 2), {}
    c.loss_and_stats = loss_and_stats
    return c


def recurrent_forward(jnp, kind, w, x, bidirectional):
    """ONNX LSTM (gates i, o, f, c) or GRU (z, r, h; linear_before_reset
    1, as PyTorch exports it), layout 1 (x [B, T, I]), zero initial
    state, default activations; returns Y as [B, T, D, H]."""
    sig = lambda v: 1 / (1 + jnp.exp(-v))
    ys_all = []
    for d in range(2 if bidirectional else 1):
        W, R, Bias = w["rnn.W"][d], w["rnn.R"][d], w["rnn.B"][d]
        hidden = R.shape[1]
        g = W.shape[0]
        batch, steps = x.shape[0], x.shape[1]
        h = jnp.zeros((batch, hidden))
        cell = jnp.zeros((batch, hidden))
        ys = [None] * steps
        for s in range(steps):
            t = steps - 1 - s if d == 1 else s
            xw = x[:, t] @ W.T + Bias[:g]
            hr = h @ R.T + Bias[g:]
            if kind == "lstm":
                pre = xw + hr
                i, o, f, cc = (pre[:, k * hidden:(k + 1) * hidden] for k in range(4))
                cell = sig(f) * cell + sig(i) * jnp.tanh(cc)
                h = sig(o) * jnp.tanh(cell)
            else:
                part = lambda v, k: v[:, k * hidden:(k + 1) * hidden]
                z = sig(part(xw, 0) + part(hr, 0))
                r = sig(part(xw, 1) + part(hr, 1))
                n = jnp.tanh(part(xw, 2) + r * part(hr, 2))
                h = (1 - z) * n + z * h
            ys[t] = h
        ys_all.append(jnp.stack(ys, axis=1))
    return jnp.stack(ys_all, axis=2)


def recurrent_case(kind):
    """A bidirectional LSTM or a forward GRU (linear_before_reset 1) on
    [B 4, T 5, I 3], H 6, with an MSE loss on Y against a random target:
    backpropagation through time through Kiln's unrolled recurrence."""
    def make(work, rng):
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        c = Case()
        c.name, c.batch = kind, 4
        steps, inputs, hidden = 5, 3, 6
        bidirectional = kind == "lstm"
        d = 2 if bidirectional else 1
        g = 4 if kind == "lstm" else 3
        k = 1 / np.sqrt(hidden)
        init = {"rnn.W": (d, g * hidden, inputs), "rnn.R": (d, g * hidden, hidden),
                "rnn.B": (d, 2 * g * hidden)}
        arrays = {n: rng.uniform(-k, k, shape).astype(np.float32) * 2
                  for n, shape in init.items()}
        attrs = dict(hidden_size=hidden, layout=1,
                     direction="bidirectional" if bidirectional else "forward")
        if kind == "gru":
            attrs["linear_before_reset"] = 1
        node = helper.make_node(kind.upper(), ["x", "rnn.W", "rnn.R", "rnn.B"],
                                ["y"], name="rnn", **attrs)
        graph = helper.make_graph(
            [node], kind,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                           [c.batch, steps, inputs])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                           [c.batch, steps, d, hidden])],
            [numpy_helper.from_array(a, n) for n, a in arrays.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
        model.ir_version = 8
        c.onnx = os.path.join(work, f"{kind}.onnx")
        onnx.save(model, c.onnx)
        c.weights = {n: a.astype(np.float64) for n, a in arrays.items()}
        c.stats = {}
        c.flags = ["--loss=mse", "--loss-on=y",
                   f"--labels=target:{c.batch}x{steps}x{d}x{hidden}:f32"]
        c.batches = [(rng.standard_normal((c.batch, steps, inputs)).astype(np.float32),
                      (0.5 * rng.standard_normal((c.batch, steps, d, hidden))).astype(np.float32))
                     for _ in range(STEPS)]
        c.eval_x = None
        c.input = "x"

        def loss_and_stats(jnp, lax, jsp, w, stats, x, target):
            y = recurrent_forward(jnp, kind, w, x, bidirectional)
            return jnp.mean((y - target) ** 2), {}
        c.loss_and_stats = loss_and_stats
        return c
    return make


def reference(c, o):
    import jax
    import jax.numpy as jnp
    import jax.scipy.special as jsp
    from jax import lax

    w = {n: np.array(v) for n, v in c.weights.items()}
    stats = {n: np.array(v) for n, v in c.stats.items()}
    state = {"m": {n: np.zeros_like(v) for n, v in w.items()},
             "v": {n: np.zeros_like(v) for n, v in w.items()}}

    def f(w, stats, x, y):
        return c.loss_and_stats(jnp, lax, jsp, w, stats, x, y)
    grad = jax.jit(jax.value_and_grad(f, has_aux=True))
    losses = []
    for t, (x, y) in enumerate(c.batches, start=1):
        x64 = x.astype(np.float64) if x.dtype == np.float32 else x
        y64 = y.astype(np.float64) if y.dtype == np.float32 else y
        (loss, new), g = grad(w, stats, x64, y64)
        losses.append(float(loss))
        g = {n: np.asarray(v) for n, v in g.items()}
        update(o, t, w, g, state)
        stats = {n: np.asarray(v) for n, v in new.items()}
    return np.array(losses), w, stats, state


def compare(what, got, want, report, atol=ATOL):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape:
        report.append(f"{what}: shape {got.shape}, reference {want.shape}")
        return 0.0
    err = float(np.max(np.abs(got - want) / (np.abs(want) + atol / RTOL))) if got.size else 0.0
    if not numerics.compare(got, want,
                            numerics.Tolerance.elementwise(RTOL, atol)).ok:
        i = np.unravel_index(np.argmax(np.abs(got - want) - RTOL * np.abs(want)), got.shape)
        report.append(f"{what}: at {tuple(int(k) for k in i)} kiln {got[i]:.9g}, "
                      f"jax {want[i]:.9g}")
    return err


def run_case(c, name, spec, o, args, work):
    art = os.path.join(work, f"{c.name}-{name}.train.kiln")
    subprocess.run([args.kilnc, c.onnx, "--train", "--optimizer=" + spec,
                    "-o", art] + c.flags, check=True)
    ck = os.path.join(work, f"{c.name}-{name}.ck")
    for k, (x, y) in enumerate(c.batches):
        xp, yp = (os.path.join(work, f"{c.name}-b{k}-{s}.npy") for s in "xy")
        np.save(xp, x)
        np.save(yp, y)
        cmd = [args.kiln_train, art, "--data", xp, "--labels", yp,
               "--epochs", str(k + 1), "--device", "emu", "--quiet",
               "--checkpoint-dir", ck] + (["--resume"] if k else [])
        if k == STEPS - 1 and c.eval_x is not None:
            ex, ey = (os.path.join(work, f"{c.name}-eval-{s}.npy") for s in "xy")
            np.save(ex, c.eval_x)
            np.save(ey, c.eval_labels)
            cmd += ["--val-data", ex, "--val-labels", ey,
                    "--predict", os.path.join(work, f"{c.name}-{name}-pred.npy"),
                    "--export", os.path.join(work, f"{c.name}-{name}.onnx")]
        subprocess.run(cmd, check=True)
    tensors = read_safetensors(os.path.join(ck, "checkpoint.safetensors"))
    hist = [l.split(",") for l in open(os.path.join(ck, "loss.csv")).read().splitlines()[1:]]
    losses = np.array([float(r[2]) for r in hist if r[2]])

    ref_loss, ref_w, ref_stats, ref_state = reference(c, o)
    report = []
    worst = compare("loss", losses, ref_loss, report)
    for n in ref_w:
        worst = max(worst, compare(n, tensors[n], ref_w[n], report))
    for n, v in getattr(c, "frozen", {}).items():
        if n in tensors:
            report.append(f"frozen {n} is in the checkpoint")
    for n in ref_stats:
        worst = max(worst, compare("running " + n, tensors[n], ref_stats[n], report))
    # The optimizer moments are flat, in the order of the trainable ONNX
    # initializers.
    flat = lambda d: np.concatenate([d[n].ravel() for n in c.weights])
    worst = max(worst, compare("opt.m", tensors["kiln.state.opt.m"], flat(ref_state["m"]), report))
    if o["kind"] == "adamw":
        worst = max(worst, compare("opt.v", tensors["kiln.state.opt.v"],
                                   flat(ref_state["v"]), report))
    worst = max(worst, compare("opt.step", tensors["kiln.state.opt.step"].reshape(()),
                               np.float64(STEPS), report))
    extra = ""
    if c.eval_x is not None:
        pred = np.load(os.path.join(work, f"{c.name}-{name}-pred.npy"))
        sess = numerics.ort_session(os.path.join(work, f"{c.name}-{name}.onnx"))
        ort_out = sess.run(None, {c.input: c.eval_x})[0]
        # A logit is a sum of terms as large as the largest logit, so its
        # rounding is relative to that scale, not to a logit near zero.
        scale = RTOL * float(np.max(np.abs(ort_out)))
        e = compare("eval vs onnxruntime", pred, ort_out, report, scale)
        # And the exported model is the trained one, running statistics too.
        e2 = compare("onnxruntime vs jax eval", ort_out,
                     cnn_eval(ref_w, ref_stats, c.eval_x.astype(np.float64)),
                     report, scale)
        extra = f", eval vs onnxruntime {e:.2g}, onnxruntime vs jax {e2:.2g}"
    for line in report:
        print(f"FAIL {c.name}-{name} {line}")
    print(f"{c.name}-{name}: {STEPS} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}, "
          f"worst relative error {worst:.2g}{extra}, "
          + ("ok" if not report else "FAILED"))
    return len(report)


# --run-time-batch: each step's batch size (cycled), the compiled batch
# the maximum; sizes below it are the last, smaller batch of an epoch.
RUN_TIME_SIZES = {"cnn": [8, 5, 1, 8, 3, 7, 2, 8, 6, 4],
                  "encoder": [2, 1, 2, 1, 1, 2, 1, 2, 2, 1]}


def with_run_time_batch(c):
    """Compiles c with its batch as a symbol N = 1..B (kilnc --dim) and
    gives step k a batch of RUN_TIME_SIZES[c.name][k] samples. The JAX
    reference runs on the same smaller batches: mean losses and batch
    norm statistics over the samples given, not over the compiled batch."""
    shapes = {"cnn": "x=Nx1x8x8", "encoder": "input_ids=Nx6"}
    flags = [f for i, f in enumerate(c.flags) if f != "--shape"
             and not f.startswith("--labels=")
             and not (i and c.flags[i - 1] == "--shape")]
    labels = next(f for f in c.flags if f.startswith("--labels="))
    name, dims, dtype = labels[len("--labels="):].split(":")
    dims = "x".join(["N"] + dims.split("x")[1:])
    c.flags = flags + ["--shape", shapes[c.name], "--dim", f"N=1..{c.batch}",
                       f"--labels={name}:{dims}:{dtype}"]
    c.batches = [(x[:n], y[:n]) for (x, y), n in
                 zip(c.batches, RUN_TIME_SIZES[c.name])]
    c.name += "-N"
    return c


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--only", help="run only these models, comma-separated "
                   "(cnn, encoder, lstm, gru; default cnn,encoder)")
    p.add_argument("--optimizer", choices=[o[0] for o in OPTIMIZERS],
                   help="run only this optimizer (default: both)")
    p.add_argument("--run-time-batch", action="store_true",
                   help="compile with --dim N=1..B and run smaller batches "
                   "(RUN_TIME_SIZES)")
    args = p.parse_args()
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    configs = 0
    cases = {"cnn": cnn_case, "encoder": encoder_case,
             "lstm": recurrent_case("lstm"), "gru": recurrent_case("gru")}
    for name in (args.only or "cnn,encoder").split(","):
        c = cases[name](args.work, np.random.default_rng(11))
        if args.run_time_batch:
            c = with_run_time_batch(c)
        for name, spec, o in OPTIMIZERS:
            if args.optimizer and name != args.optimizer:
                continue
            failures += run_case(c, name, spec, o, args, args.work)
            configs += 1
    print(f"whole-step: {configs} configurations, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
