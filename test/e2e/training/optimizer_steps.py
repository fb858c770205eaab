#!/usr/bin/env python3
"""Ten train steps of each optimizer on emu against a numpy float64 reference.

The model is a linear layer with an MSE loss, written as kiln IR with a
hand-derived @train_grad (the autodiff pipeline's contract: loss, then one
gradient per trainable global), so this tests kiln-optimizer, the training
artifact, the runtime's state and kiln-train, not autodiff. kilnc --train
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


def reference(c, W, b, x, y):
    """float64: the loss before each step, and the state after STEPS."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    w = np.concatenate([W.ravel(), b]).astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    losses = []
    opt = c["optimizer"]
    wd = c.get("weight_decay", 0.0)
    for t in range(1, STEPS + 1):
        Wm, bm = w[:I * O].reshape(I, O), w[I * O:]
        d = x @ Wm + bm - y
        losses.append(np.mean(d * d))
        dp = 2 * d / d.size
        g = np.concatenate([(x.T @ dp).ravel(), dp.sum(0)])
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


def spec(c):
    keys = [k for k in c if k not in ("optimizer", "grad_clip")]
    s = c["optimizer"]
    if keys:
        s += ":" + ",".join(f"{k}={c[k]}" for k in keys)
    return s


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
    for name, c in CONFIGS:
        if args.only and name != args.only:
            continue
        art = os.path.join(args.work, name + ".train.kiln")
        cmd = [args.kilnc, src, "--train", "--optimizer=" + spec(c), "-o", art]
        if c.get("grad_clip"):
            cmd.append(f"--grad-clip={c['grad_clip']}")
        subprocess.run(cmd, check=True)
        ck = os.path.join(args.work, name)
        subprocess.run([args.kiln_train, art, "--data", os.path.join(args.work, "x.npy"),
                        "--labels", os.path.join(args.work, "y.npy"),
                        "--epochs", str(STEPS), "--device", "emu", "--quiet",
                        "--checkpoint-dir", ck], check=True)
        tensors, meta = read_safetensors(os.path.join(ck, "checkpoint.safetensors"))
        hist = [l.split(",") for l in open(os.path.join(ck, "loss.csv")).read().splitlines()[1:]]
        losses = np.array([float(r[2]) for r in hist if r[2]])
        ref_loss, ref_w, ref_m, ref_v = reference(c, W, b, x, y)
        got_w = np.concatenate([tensors["W"].ravel(), tensors["b"]])
        checks = [("loss", losses, ref_loss), ("weights", got_w, ref_w)]
        if "kiln.state.opt.m" in tensors:
            checks.append(("opt.m", tensors["kiln.state.opt.m"], ref_m))
        if "kiln.state.opt.v" in tensors:
            checks.append(("opt.v", tensors["kiln.state.opt.v"], ref_v))
        checks.append(("opt.step", tensors["kiln.state.opt.step"].reshape(1),
                       np.array([STEPS], np.float64)))
        worst = 0.0
        for what, got, want in checks:
            err = np.max(np.abs(got - want) / (np.abs(want) + 1e-2))
            worst = max(worst, err)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                failures += 1
                print(f"FAIL {name} {what}: max |got-want| "
                      f"{np.max(np.abs(got - want)):.3g}\n got  {got}\n want {want}")
        print(f"{name}: {STEPS} steps, loss {losses[0]:.6f} -> {losses[-1]:.6f}, "
              f"ok" if not failures else f"{name}: failures")
    print(f"optimizer-steps: {len(CONFIGS)} configurations, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
