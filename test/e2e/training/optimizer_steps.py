#!/usr/bin/env python3
"""Ten train steps of each optimizer on emu against a numpy float64 reference.

First a linear layer with an MSE loss, written as kiln IR with a
hand-derived @train_grad (the autodiff pipeline's contract: loss, then one
gradient per trainable global), so the optimizers are tested apart from
autodiff; then an ONNX MLP (Gemm, Relu, Gemm, cross-entropy) through the
whole compiler (kiln-autodiff + kiln-optimizer) with SGD+momentum and AdamW. kilnc --train
builds train_step + eval; kiln-train runs 10 epochs of one batch (N = B, so
the shuffle cannot change the batch); the checkpoint's weights, optimizer
state and step counter, and the loss history, are compared with the same
update rules computed in float64 by numpy (written from the PyTorch
documentation of each optimizer, not from Kiln's code).

Tolerance: relative 1e-4 with an absolute floor of 1e-6. The device computes
in fp32 (matmul, the reductions and the update): after 10 steps the rounding
is ~1e-6 relative; the floor covers weights and moments that pass near zero,
where a relative bound is meaningless.
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

B, I, O = 4, 8, 5
STEPS = 10


def mlir_module(W, b):
    def dense(a):
        return np.array2string(a, separator=", ", precision=9,
                               max_line_width=10**6, threshold=10**6,
                               floatmode="unique")
    k = 2.0 / (B * O)
    return f"""module {{
  ml_program.global private @W(dense<{dense(W)}> : tensor<{I}x{O}xf32>) : tensor<{I}x{O}xf32> {{kiln.origin = "initializer f32 {I}x{O} W"}}
  ml_program.global private @b(dense<{dense(b)}> : tensor<{O}xf32>) : tensor<{O}xf32> {{kiln.origin = "initializer f32 {O} b"}}
  func.func @main(%x: tensor<{B}x{I}xf32> {{kiln.name = "x"}}) -> (tensor<{B}x{O}xf32> {{kiln.name = "y"}}) {{
    %W = ml_program.global_load_const @W : tensor<{I}x{O}xf32>
    %b = ml_program.global_load_const @b : tensor<{O}xf32>
    %0 = kiln.matmul %x, %W : tensor<{B}x{I}xf32>, tensor<{I}x{O}xf32> -> tensor<{B}x{O}xf32>
    %1 = kiln.add %0, %b : tensor<{B}x{O}xf32>, tensor<{O}xf32> -> tensor<{B}x{O}xf32>
    return %1 : tensor<{B}x{O}xf32>
  }}
  func.func @train_grad(%x: tensor<{B}x{I}xf32> {{kiln.name = "x"}}, %t: tensor<{B}x{O}xf32> {{kiln.name = "labels"}}) -> (tensor<f32>, tensor<{I}x{O}xf32>, tensor<{O}xf32>) attributes {{kiln.gradients = [@W, @b]}} {{
    %W = ml_program.global_load_const @W : tensor<{I}x{O}xf32>
    %b = ml_program.global_load_const @b : tensor<{O}xf32>
    %0 = kiln.matmul %x, %W : tensor<{B}x{I}xf32>, tensor<{I}x{O}xf32> -> tensor<{B}x{O}xf32>
    %1 = kiln.add %0, %b : tensor<{B}x{O}xf32>, tensor<{O}xf32> -> tensor<{B}x{O}xf32>
    %d = kiln.sub %1, %t : tensor<{B}x{O}xf32>, tensor<{B}x{O}xf32> -> tensor<{B}x{O}xf32>
    %sq = kiln.mul %d, %d : tensor<{B}x{O}xf32>, tensor<{B}x{O}xf32> -> tensor<{B}x{O}xf32>
    %loss = kiln.reduce <mean> %sq {{axes = array<i64: 0, 1>, keepdims = false}} : tensor<{B}x{O}xf32> -> tensor<f32>
    %k = kiln.constant dense<{k:.9g}> : tensor<f32>
    %dp = kiln.mul %d, %k : tensor<{B}x{O}xf32>, tensor<f32> -> tensor<{B}x{O}xf32>
    %xt = kiln.transpose %x {{permutation = array<i64: 1, 0>}} : tensor<{B}x{I}xf32> -> tensor<{I}x{B}xf32>
    %dW = kiln.matmul %xt, %dp : tensor<{I}x{B}xf32>, tensor<{B}x{O}xf32> -> tensor<{I}x{O}xf32>
    %db = kiln.reduce <sum> %dp {{axes = array<i64: 0>, keepdims = false}} : tensor<{B}x{O}xf32> -> tensor<{O}xf32>
    return %loss, %dW, %db : tensor<f32>, tensor<{I}x{O}xf32>, tensor<{O}xf32>
  }}
}}
"""


def lr_at(t, c):
    lr = c.get("lr", 0.01)
    sched = c.get("schedule", "constant")
    warm = c.get("warmup_steps", 0)
    if sched == "step":
        rate = lr * c.get("gamma", 0.1) ** np.floor((t - 1) / c["step_size"])
    elif sched == "cosine":
        total, lo = c["total_steps"], c.get("min_lr", 0.0)
        p = min((t - warm) / (total - warm), 1.0)
        rate = lo + (lr - lo) / 2 * (1 + np.cos(np.pi * p))
    else:
        rate = lr
    if warm > 0 and t <= warm:
        rate = lr * t / warm
    return rate


def linear_grad(x, y):
    """The linear model's float64 loss and flat gradient at flat weights w."""
    x, y = x.astype(np.float64), y.astype(np.float64)

    def grad(w):
        Wm, bm = w[:I * O].reshape(I, O), w[I * O:]
        d = x @ Wm + bm - y
        dp = 2 * d / d.size
        return np.mean(d * d), np.concatenate([(x.T @ dp).ravel(), dp.sum(0)])
    return grad


def mlp_grad(x, labels, shapes):
    """Gemm(64->H) + Relu + Gemm(H->C) with mean cross-entropy on integer
    labels, in float64; w is laid out as shapes (W1, b1, W2, b2)."""
    x = x.astype(np.float64)

    def grad(w):
        parts, o = [], 0
        for shp in shapes:
            n = int(np.prod(shp))
            parts.append(w[o:o + n].reshape(shp))
            o += n
        W1, b1, W2, b2 = parts
        h = x @ W1 + b1
        a = np.maximum(h, 0)
        z = a @ W2 + b2
        z = z - z.max(1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        n = len(x)
        loss = -np.mean(np.log(p[np.arange(n), labels]))
        dz = p.copy()
        dz[np.arange(n), labels] -= 1
        dz /= n
        dh = (dz @ W2.T) * (h > 0)
        g = [x.T @ dh, dh.sum(0), a.T @ dz, dz.sum(0)]
        return loss, np.concatenate([t.ravel() for t in g])
    return grad


def reference(c, w0, grad):
    """float64: the loss before each step, and the state after STEPS."""
    w = w0.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    losses = []
    opt = c["optimizer"]
    wd = c.get("weight_decay", 0.0)
    for t in range(1, STEPS + 1):
        loss, g = grad(w)
        losses.append(loss)
        if c.get("grad_clip", 0) > 0:
            g = g * min(1.0, c["grad_clip"] / (np.linalg.norm(g) + 1e-6))
        lr = lr_at(t, c)
        if opt == "sgd":
            w = w - lr * (g + wd * w)
        elif opt in ("momentum", "nesterov"):
            gp = g + wd * w
            mu = c.get("momentum", 0.9)
            m = mu * m + gp
            w = w - lr * (gp + mu * m if opt == "nesterov" else m)
        else:
            b1, b2, eps = c.get("beta1", 0.9), c.get("beta2", 0.999), c.get("eps", 1e-8)
            gp = g + wd * w if opt == "adam" else g
            if opt == "adamw":
                w = w * (1 - lr * wd)
            m = b1 * m + (1 - b1) * gp
            v = b2 * v + (1 - b2) * gp * gp
            w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return np.array(losses), w, m, v


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
    return out, header.get("__metadata__", {})


CONFIGS = [
    ("sgd", {"optimizer": "sgd", "lr": 0.1}),
    ("sgd-wd-step", {"optimizer": "sgd", "lr": 0.1, "weight_decay": 0.01,
                     "schedule": "step", "step_size": 3, "gamma": 0.5}),
    ("momentum", {"optimizer": "momentum", "lr": 0.05, "momentum": 0.9}),
    ("momentum-clip", {"optimizer": "momentum", "lr": 0.05, "momentum": 0.9,
                       "grad_clip": 0.5, "weight_decay": 1e-3}),
    ("nesterov", {"optimizer": "nesterov", "lr": 0.05, "momentum": 0.8}),
    ("adam", {"optimizer": "adam", "lr": 0.01, "weight_decay": 1e-3}),
    ("adamw-cosine", {"optimizer": "adamw", "lr": 0.02, "weight_decay": 0.05,
                      "beta1": 0.8, "beta2": 0.95, "eps": 1e-7,
                      "schedule": "cosine", "warmup_steps": 3,
                      "total_steps": 12, "min_lr": 0.001}),
]


MLP_CONFIGS = [
    ("mlp-momentum", {"optimizer": "momentum", "lr": 0.1, "momentum": 0.9}),
    ("mlp-adamw", {"optimizer": "adamw", "lr": 0.01, "weight_decay": 0.01}),
]


def spec(c):
    keys = [k for k in c if k not in ("optimizer", "grad_clip")]
    s = c["optimizer"]
    if keys:
        s += ":" + ",".join(f"{k}={c[k]}" for k in keys)
    return s


def check(name, c, cmd_model, extra, work, args, weights, order, w0, grad):
    """Compiles, trains STEPS one-batch epochs, compares; the failure count."""
    art = os.path.join(work, name + ".train.kiln")
    cmd = [args.kilnc, cmd_model, "--train", "--optimizer=" + spec(c), "-o", art] + extra
    if c.get("grad_clip"):
        cmd.append(f"--grad-clip={c['grad_clip']}")
    subprocess.run(cmd, check=True)
    ck = os.path.join(work, name)
    subprocess.run([args.kiln_train, art, "--data", os.path.join(work, weights[0]),
                    "--labels", os.path.join(work, weights[1]),
                    "--epochs", str(STEPS), "--device", "emu", "--quiet",
                    "--checkpoint-dir", ck], check=True)
    tensors, meta = read_safetensors(os.path.join(ck, "checkpoint.safetensors"))
    hist = [l.split(",") for l in open(os.path.join(ck, "loss.csv")).read().splitlines()[1:]]
    losses = np.array([float(r[2]) for r in hist if r[2]])
    ref_loss, ref_w, ref_m, ref_v = reference(c, w0, grad)
    got_w = np.concatenate([tensors[n].ravel() for n in order])
    checks = [("loss", losses, ref_loss), ("weights", got_w, ref_w)]
    if "kiln.state.opt.m" in tensors:
        checks.append(("opt.m", tensors["kiln.state.opt.m"], ref_m))
    if "kiln.state.opt.v" in tensors:
        checks.append(("opt.v", tensors["kiln.state.opt.v"], ref_v))
    checks.append(("opt.step", tensors["kiln.state.opt.step"].reshape(1),
                   np.array([STEPS], np.float64)))
    failures = 0
    worst = 0.0
    for what, got, want in checks:
        worst = max(worst, float(np.max(np.abs(got - want) / (np.abs(want) + 1e-6))))
        if not numerics.compare(got, want,
                                numerics.Tolerance.elementwise(1e-4, 1e-6)).ok:
            failures += 1
            print(f"FAIL {name} {what}: max |got-want| "
                  f"{np.max(np.abs(got - want)):.3g}\n got  {got}\n want {want}")
    print(f"{name}: {STEPS} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}, "
          + ("ok" if not failures else "FAILED"))
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--only", help="run one configuration (by name)")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(7)
    W = (rng.standard_normal((I, O)) * 0.5).astype(np.float32)
    b = (rng.standard_normal(O) * 0.1).astype(np.float32)
    x = rng.standard_normal((B, I)).astype(np.float32)
    y = rng.standard_normal((B, O)).astype(np.float32)
    src = os.path.join(args.work, "linear.mlir")
    with open(src, "w") as f:
        f.write(mlir_module(W, b))
    np.save(os.path.join(args.work, "x.npy"), x)
    np.save(os.path.join(args.work, "y.npy"), y)
    failures = 0
    count = 0
    w0 = np.concatenate([W.ravel(), b])
    for name, c in CONFIGS:
        if args.only and name != args.only:
            continue
        count += 1
        failures += check(name, c, src, [], args.work, args, ("x.npy", "y.npy"),
                          ["W", "b"], w0, linear_grad(x, y))

    # The same through the whole compiler: an ONNX MLP whose gradients come
    # from kiln-autodiff (cross-entropy on int64 labels).
    if not args.only:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
        Bm, In, Hd, C = 8, 6, 7, 4
        shapes = [(In, Hd), (Hd,), (Hd, C), (C,)]
        names = ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
        vals = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]
        xm = rng.standard_normal((Bm, In)).astype(np.float32)
        ym = rng.integers(0, C, Bm).astype(np.int64)
        np.save(os.path.join(args.work, "xm.npy"), xm)
        np.save(os.path.join(args.work, "ym.npy"), ym)
        g = helper.make_graph(
            [helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"]),
             helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["z"])], "mlp",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [Bm, In])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [Bm, C])],
            [numpy_helper.from_array(v, n) for v, n in zip(vals, names)])
        model = os.path.join(args.work, "mlp.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
        mw0 = np.concatenate([v.ravel() for v in vals])
        for name, c in MLP_CONFIGS:
            count += 1
            failures += check(name, c, model,
                              ["--loss=cross_entropy", f"--labels=y:{Bm}:int64"],
                              args.work, args, ("xm.npy", "ym.npy"), names, mw0,
                              mlp_grad(xm, ym, shapes))
    print(f"optimizer-steps: {count} configurations, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
