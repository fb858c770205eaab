#!/usr/bin/env python3
"""Mixed-precision training (kilnc --train --precision=bf16|fp16) on emu.

The model is an ONNX MLP (Gemm 6->7, Relu, Gemm 7->4, cross-entropy on int64
labels, batch 8); kiln-train runs one-batch epochs (N = B), so every step
sees the same batch. Each check compiles with kilnc, trains with kiln-train
and reads the loss history (loss, loss scale, skipped flag per step) and the
checkpoints (safetensors: weights, opt.*, loss_scale*).

The reference is numpy in float64 running the *same policy*, written from
the policy's description (docs/runtime.md "Mixed precision"), not from
Kiln's code: fp32 master weights; the operands of every matmul (forward and
backward) rounded to the low type (numpy's float16; bfloat16 by rounding the
float32 bits to nearest even), products accumulated without rounding;
everything else (bias, relu, log-softmax, the loss, bias gradients, the
update) unrounded; fp16 loss scaling as torch.cuda.amp.GradScaler: the
backward is seeded with the scale S, the gradients multiplied by 1/S, a
step with any inf/NaN gradient is skipped (weights, moments and step count
unchanged), the scale halves on a skip and doubles after `interval` finite
steps in a row.

Checks:
  policy-*   each step's loss and skipped flag, the scale, and the final
             weights and moments against the reference. The device rounds
             the operands from float32 values, the reference from float64
             ones, so an operand on a rounding boundary may round the other
             way (one low-precision ulp: 2^-11 relative in fp16, 2^-8 in
             bf16), and the device accumulates in float32. Bound: relative
             u with an absolute floor of u/10, u the low type's unit
             roundoff (fp16 4.9e-4, bf16 3.9e-3): one flipped operand
             changes a dot product by at most u of one term.
             The skipped flags must agree exactly, and the weights must be
             at least 4x closer to this reference than to the same run
             with fp32 operands (so the test sees where the roundings are).
  vs-fp32-*  bf16 and fp16 against the fp32 run of the same model and
             optimizer over 10 steps: every operand is rounded once (u), a
             product twice (2u); through 10 steps of lr 0.1 the differences
             add up to a few u of the loss. Bound: |loss - loss32| <= 8u *
             loss32 at every step and |w - w32| <= 8u * max|w32|.
  inject     an overflow injected at step 5: a batch with one input of 1e5
             (inf in fp16) trains epoch 5 through --resume. The checkpoint
             after it holds weights and moments bit-identical to the one
             before, the scale halved, the flag says skipped, and training
             resumed on the good batch keeps lowering the loss; the whole
             run matches the reference with the same injection.
  resume     the scale-driven run stopped right after a skipped step and
             resumed gives bit-identical state to the uninterrupted run
             (the loss scale and its counter are checkpointed state).
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

B, IN, HID, C = 8, 6, 7, 4
SHAPES = [(IN, HID), (HID,), (HID, C), (C,)]
NAMES = ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
UNIT = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "fp32": 2.0 ** -24}


def to_bf16(a):
    """float64 -> float32 -> bfloat16 (nearest even), back as float64."""
    bits = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    out = rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.where(np.isfinite(a), out, a)


def low(a, precision):
    with np.errstate(over="ignore", invalid="ignore"):
        if precision == "fp16":
            return np.asarray(a, np.float64).astype(np.float16).astype(np.float64)
        if precision == "bf16":
            return to_bf16(a)
    return np.asarray(a, np.float64)


def unflatten(w):
    parts, o = [], 0
    for shp in SHAPES:
        n = int(np.prod(shp))
        parts.append(w[o:o + n].reshape(shp))
        o += n
    return parts


def grad(w, x, labels, precision, seed):
    """The loss and the flat gradient scaled by `seed`, under the policy."""
    W1, b1, W2, b2 = unflatten(w)
    c = lambda a: low(a, precision)
    with np.errstate(over="ignore", invalid="ignore"):
        xh = c(x)
        h = xh @ c(W1) + b1
        a = np.maximum(h, 0)
        ah = c(a)
        W2h = c(W2)
        z = ah @ W2h + b2
        zs = z - z.max(1, keepdims=True)
        logp = zs - np.log(np.exp(zs).sum(1, keepdims=True))
        n = len(x)
        loss = -np.mean(logp[np.arange(n), labels])
        onehot = np.eye(C)[labels]
        dz = seed * (np.exp(logp) - onehot) / n
        dzh = c(dz)
        da = dzh @ W2h.T
        dh = np.where(h > 0, da, 0.0)
        dhh = c(dh)
        g = [xh.T @ dhh, dh.sum(0), ah.T @ dzh, dz.sum(0)]
    return loss, np.concatenate([t.ravel() for t in g])


def reference(cfg, w0, batches):
    """float64 policy run: per step (loss, skipped, scale after), and the
    final weights, moments, step count."""
    w = w0.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    step = 0
    scale = cfg.get("scale_init", 65536.0) if cfg.get("loss_scale") else 1.0
    good = 0
    rows = []
    for x, labels in batches:
        loss, g = grad(w, x, labels, cfg["precision"], scale)
        with np.errstate(over="ignore", invalid="ignore"):
            g = g * (1.0 / scale)
            finite = bool(np.all(np.isfinite(g)))
        if cfg.get("grad_clip") and finite:
            g = g * min(1.0, cfg["grad_clip"] / (np.linalg.norm(g) + 1e-6))
        if finite:
            t = step + 1
            lr = cfg["lr"]
            if cfg["optimizer"] == "momentum":
                m = 0.9 * m + g
                w = w - lr * m
            else:  # adamw
                wd, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
                w = w * (1 - lr * wd)
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
            step = t
        if cfg.get("loss_scale") == "dynamic":
            if finite:
                good += 1
                if good >= cfg["interval"]:
                    scale *= 2
                    good = 0
            else:
                scale /= 2
                good = 0
        rows.append((loss, not finite, scale))
    return rows, w, m, v, step


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            lo, hi = info["data_offsets"]
            out[name] = np.frombuffer(data[lo:hi], np.float32).reshape(info["shape"])
    return out


def history(path):
    lines = open(path).read().splitlines()
    head = lines[0].split(",")
    rows = [dict(zip(head, l.split(","))) for l in lines[1:]]
    return [r for r in rows if r["loss"]]


class Runner:
    def __init__(self, args, model):
        self.args, self.model, self.work = args, model, args.work

    def compile(self, name, cfg):
        art = os.path.join(self.work, name + ".train.kiln")
        opt = cfg["optimizer"] + f":lr={cfg['lr']}"
        if cfg["optimizer"] == "adamw":
            opt += ",weight_decay=0.01"
        cmd = [self.args.kilnc, self.model, "--train", "--loss=cross_entropy",
               f"--labels=y:{B}:int64", "--optimizer=" + opt,
               "--precision=" + cfg["precision"], "-o", art]
        if cfg.get("loss_scale") == "dynamic":
            cmd += ["--loss-scale=dynamic", f"--loss-scale-init={cfg['scale_init']}",
                    f"--loss-scale-growth-interval={cfg['interval']}"]
        elif cfg["precision"] == "fp16":
            cmd += ["--loss-scale=none"]
        if cfg.get("grad_clip"):
            cmd.append(f"--grad-clip={cfg['grad_clip']}")
        subprocess.run(cmd, check=True)
        return art

    def train(self, art, ck, epochs, data="x.npy", resume=False):
        cmd = [self.args.kiln_train, art, "--data", os.path.join(self.work, data),
               "--labels", os.path.join(self.work, "y.npy"), "--epochs", str(epochs),
               "--device", "emu", "--seed", "3", "--checkpoint-dir", ck]
        if resume:
            cmd.append("--resume")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return out


def close(got, want, rtol, atol):
    """Per element |got - want| <= atol + rtol |want|, NaN/Inf matched
    (scripts/numerics.py)."""
    return numerics.compare(got, want,
                            numerics.Tolerance.elementwise(rtol, atol)).ok


def compare_policy(name, cfg, ck, w0, batches):
    """Device run in `ck` against the float64 policy; the failure count."""
    rows = history(os.path.join(ck, "loss.csv"))
    t = read_safetensors(os.path.join(ck, "checkpoint.safetensors"))
    ref_rows, ref_w, ref_m, ref_v, ref_step = reference(cfg, w0, batches)
    u = UNIT[cfg["precision"]]
    fails = []
    got_skip = [r.get("skipped", "0") == "1" for r in rows]
    want_skip = [s for _, s, _ in ref_rows]
    if got_skip != want_skip:
        fails.append(f"skipped {got_skip} != {want_skip}")
    got_loss = np.array([float(r["loss"]) for r in rows])
    want_loss = np.array([l for l, _, _ in ref_rows])
    ok = np.isfinite(want_loss)
    if not np.array_equal(np.isfinite(got_loss), ok) or \
            not close(got_loss[ok], want_loss[ok], u, u / 10):
        fails.append(f"loss {got_loss} != {want_loss}")
    if cfg.get("loss_scale"):
        got_scale = [float(r["loss_scale"]) for r in rows]
        want_scale = [s for _, _, s in ref_rows]
        if got_scale != want_scale:
            fails.append(f"loss scale {got_scale} != {want_scale}")
        if float(t["kiln.state.loss_scale"].reshape(())) != want_scale[-1]:
            fails.append("checkpointed loss_scale differs")
    got_w = np.concatenate([t[n].ravel() for n in NAMES])
    if not close(got_w, ref_w, u, u / 10):
        fails.append(f"weights: max diff {np.max(np.abs(got_w - ref_w)):.3g}")
    if not close(t["kiln.state.opt.m"], ref_m, u, u / 10):
        fails.append("opt.m differs")
    if "kiln.state.opt.v" in t and not close(t["kiln.state.opt.v"], ref_v, 2 * u, u / 10):
        fails.append("opt.v differs")
    if float(t["kiln.state.opt.step"].reshape(())) != ref_step:
        fails.append(f"opt.step {t['kiln.state.opt.step']} != {ref_step}")
    worst = np.max(np.abs(got_w - ref_w) / (np.abs(ref_w) + u / 10)) / u
    # The bound alone would also pass an fp32 run (fp16 and fp32 differ by
    # less than u here): the device must be much closer to the reference of
    # its own policy than to the same run with every operand in fp32, i.e.
    # the roundings happen where the policy says.
    _, w32, _, _, _ = reference(dict(cfg, precision="fp32"), w0, batches)
    mine, other = np.max(np.abs(got_w - ref_w)), np.max(np.abs(got_w - w32))
    if not mine <= other / 4:
        fails.append(f"weights are {mine:.3g} from the {cfg['precision']} "
                     f"policy and {other:.3g} from fp32 compute")
    print(f"{name}: {len(rows)} steps, {sum(got_skip)} skipped, loss "
          f"{got_loss[0]:.5f} -> {got_loss[-1]:.5f}, weights within "
          f"{worst:.2g}u of the policy reference (bound 1u), {other / mine:.0f}x "
          f"closer to it than to fp32 compute (bound 4x) "
          + ("ok" if not fails else "FAILED"))
    for f in fails:
        print(f"FAIL {name}: {f}")
    return len(fails)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(11)
    vals = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in SHAPES]
    x = rng.standard_normal((B, IN)).astype(np.float32)
    y = rng.integers(0, C, B).astype(np.int64)
    bad = x.copy()
    bad[2, 3] = 1e5  # inf in fp16: the forward, the loss, every gradient
    for n, a in [("x", x), ("y", y), ("bad", bad)]:
        np.save(os.path.join(args.work, n + ".npy"), a)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["z"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, IN])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [B, C])],
        [numpy_helper.from_array(v, n) for v, n in zip(vals, NAMES)])
    model = os.path.join(args.work, "mlp.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    w0 = np.concatenate([v.ravel() for v in vals]).astype(np.float64)
    # kiln-train's shuffle permutes the one batch each epoch; the loss and
    # gradients are sums over it, so the reference uses the batch as is (the
    # order changes float32 rounding only).
    run = Runner(args, model)
    ck = lambda n: os.path.join(args.work, n)
    failures = 0

    # 1. fp16 with dynamic loss scaling, the scale driven into overflow: an
    # initial 2^20 makes the backward's fp16 copy of dL/dz (|.| up to S/8)
    # overflow, so it halves until the gradients fit, grows back after 3
    # finite steps, and overflows again.
    dyn = {"precision": "fp16", "optimizer": "momentum", "lr": 0.1,
           "loss_scale": "dynamic", "scale_init": 2.0 ** 20, "interval": 3}
    art = run.compile("fp16-dynamic", dyn)
    out = run.train(art, ck("fp16-dynamic"), 12)
    print(out.splitlines()[0])
    failures += compare_policy("policy-fp16-dynamic", dyn, ck("fp16-dynamic"),
                               w0, [(x, y)] * 12)

    # 2. The same stopped after a skipped step and resumed: bit-identical.
    rows = history(os.path.join(ck("fp16-dynamic"), "loss.csv"))
    stop = max(i + 1 for i, r in enumerate(rows[:11]) if r["skipped"] == "1")
    run.train(art, ck("fp16-resume"), stop)
    mid = read_safetensors(os.path.join(ck("fp16-resume"), "checkpoint.safetensors"))
    run.train(art, ck("fp16-resume"), 12, resume=True)
    a = read_safetensors(os.path.join(ck("fp16-dynamic"), "checkpoint.safetensors"))
    b = read_safetensors(os.path.join(ck("fp16-resume"), "checkpoint.safetensors"))
    same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    print(f"resume: stopped after step {stop} (skipped, loss scale "
          f"{float(mid['kiln.state.loss_scale'].reshape(())):g} in the "
          f"checkpoint), resumed to 12: " + ("bit-identical ok" if same else "FAILED"))
    failures += not same

    # 3. fp16 + dynamic scaling + grad clipping (the finite check and the
    # global norm share one reduction) + adamw, default scale 65536.
    clip = {"precision": "fp16", "optimizer": "adamw", "lr": 0.02,
            "loss_scale": "dynamic", "scale_init": 65536.0, "interval": 4,
            "grad_clip": 0.5}
    art = run.compile("fp16-clip", clip)
    run.train(art, ck("fp16-clip"), 10)
    failures += compare_policy("policy-fp16-clip-adamw", clip, ck("fp16-clip"),
                               w0, [(x, y)] * 10)

    # 4. bf16 (no loss scaling: bf16 has f32's range) against its policy.
    bf = {"precision": "bf16", "optimizer": "adamw", "lr": 0.02}
    art = run.compile("bf16", bf)
    run.train(art, ck("bf16"), 10)
    failures += compare_policy("policy-bf16-adamw", bf, ck("bf16"), w0,
                               [(x, y)] * 10)

    # 5. bf16 and fp16 against the fp32 run (momentum, 10 steps).
    base = {"optimizer": "momentum", "lr": 0.1}
    runs = {}
    for prec in ["fp32", "bf16", "fp16"]:
        cfg = dict(base, precision=prec)
        if prec == "fp16":
            cfg.update(loss_scale="dynamic", scale_init=65536.0, interval=2000)
        art = run.compile("cmp-" + prec, cfg)
        run.train(art, ck("cmp-" + prec), 10)
        t = read_safetensors(os.path.join(ck("cmp-" + prec), "checkpoint.safetensors"))
        runs[prec] = (np.array([float(r["loss"]) for r in
                                history(os.path.join(ck("cmp-" + prec), "loss.csv"))]),
                      np.concatenate([t[n].ravel() for n in NAMES]))
    l32, w32 = runs["fp32"]
    for prec in ["bf16", "fp16"]:
        u = UNIT[prec]
        lo, wo = runs[prec]
        dl = np.max(np.abs(lo - l32) / l32)
        dw = np.max(np.abs(wo - w32)) / np.max(np.abs(w32))
        ok = len(lo) == len(l32) == 10 and dl <= 8 * u and dw <= 8 * u
        print(f"vs-fp32-{prec}: 10 steps, loss {lo[0]:.5f} -> {lo[-1]:.5f} "
              f"(fp32 {l32[-1]:.5f}); loss within {dl / u:.2f}u, weights "
              f"within {dw / u:.2f}u of fp32 (bound 8u, u = {u:.2g}) "
              + ("ok" if ok else "FAILED"))
        failures += not ok

    # 6. An injected overflow at step 5 (a batch with an fp16 inf), through
    # checkpoints: skipped, weights bit-identical, the scale halves, and
    # training recovers on the good batch.
    inj = {"precision": "fp16", "optimizer": "momentum", "lr": 0.1,
           "loss_scale": "dynamic", "scale_init": 1024.0, "interval": 2}
    art = run.compile("inject", inj)
    run.train(art, ck("inject"), 4)
    before = read_safetensors(os.path.join(ck("inject"), "checkpoint.safetensors"))
    shutil.copy(os.path.join(ck("inject"), "checkpoint.safetensors"),
                os.path.join(args.work, "before.safetensors"))
    run.train(art, ck("inject"), 5, data="bad.npy", resume=True)
    after = read_safetensors(os.path.join(ck("inject"), "checkpoint.safetensors"))
    run.train(art, ck("inject"), 12, resume=True)
    rows = history(os.path.join(ck("inject"), "loss.csv"))
    kept = all(np.array_equal(before[k], after[k]) for k in
               NAMES + ["kiln.state.opt.m", "kiln.state.opt.step"])
    s0 = float(before["kiln.state.loss_scale"].reshape(()))
    s1 = float(after["kiln.state.loss_scale"].reshape(()))
    losses = [float(r["loss"]) for r in rows]
    recovers = all(losses[i + 1] < losses[i] for i in range(5, 11)) and \
        losses[-1] < losses[3]
    ok = kept and s1 == s0 / 2 and rows[4]["skipped"] == "1" and \
        not np.isfinite(losses[4]) and recovers
    print(f"inject: step 5 skipped ({rows[4]['skipped']}), weights and "
          f"moments bit-identical ({kept}), loss scale {s0:g} -> {s1:g}, loss "
          f"{losses[3]:.5f} before, {losses[5]:.5f} -> {losses[-1]:.5f} after "
          + ("ok" if ok else "FAILED"))
    failures += not ok
    failures += compare_policy("policy-inject", inj, ck("inject"), w0,
                               [(x, y)] * 4 + [(bad, y)] + [(x, y)] * 7)
    print(f"mixed-precision: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
