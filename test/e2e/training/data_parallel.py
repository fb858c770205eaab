#!/usr/bin/env python3
"""Data-parallel training under mpirun on emu against one process.

An ONNX MLP (Gemm, Relu, Gemm; cross-entropy on int64 labels, batch
dimension symbolic) is compiled four times: a plain `kilnc --train`
artifact for the global batch G = 8 (the reference), and `--data-parallel`
artifacts for per-rank batches 8, 4 and 2. Each trains one epoch of 80
samples (10 optimizer steps, every step a different shuffled global batch)
with SGD+momentum and, separately, AdamW:

- the reference: `kiln-train` alone;
- `--data-parallel`, batch 8, alone (no mpirun: world size 1);
- `mpirun -np 2` with batch 4 and `mpirun -np 4` with batch 2: each rank
  takes its slice of the same global batches, the gradients are averaged
  with MPI_Allreduce in three buckets (`--bucket-mb`), each as soon as the
  train_step launch that completes it has run, as NCCL would: a bucket
  reduced before its last write would be overwritten by that rank's own
  gradients, and the ranks' weights would part from the reference.

Checked, element by element, on the checkpoint rank 0 writes after step 10:
every weight and optimizer moment against the reference's, and the loss
history (the mean over the ranks) against the reference's.

Bound, plain fp32 all-reduce: |got - want| <= 1e-6 max|want| per tensor
(each weight tensor, each optimizer moment, the loss history), element by
element. The ranks compute the same per-sample terms; only the order of
the batch sum differs (each rank sums B/N samples, MPI adds N partial
means, the reference sums all B). That moves a gradient element by a few
ulps of the *terms* it sums, not of the result: an element whose terms
cancel to near zero gets the same absolute error as its neighbours, so a
bound relative to each element fails exactly there (measured: 1.9e-5
relative on a weight of -0.0062, an absolute 1.9e-8), while relative to
the tensor's scale the difference is ~1e-7 (ten steps of lr x a few
ulps of g). 1e-6 of the tensor's largest element is that with 10x of
margin; a wrong average (sum instead of mean, a rank's shard counted
twice) misses it by orders of magnitude (see the commit message).

Compressed all-reduce (--allreduce-dtype=bf16|fp16, momentum, 2 and 4
ranks) against the same fp32 one-process run: |got - want| <= 1e-2
max|want| (bf16) and 1e-3 max|want| (fp16) per tensor. Each rank's
gradient reaches the update with one rounding to the wire type (unit
roundoff u = 2^-8 for bf16's 8 significant bits, 2^-11 for fp16's 11),
and error feedback carries that rounding into the next step instead of
losing it, so the sum of what was sent stays within one rounding of the
sum of the gradients; the momentum buffer and the weights integrate those
telescoping differences, a few u of each tensor's scale at worst. The
bounds are ~2.5u (bf16) and ~2u (fp16); measured 2026-12-02: 6.9e-4
(0.18u) and 7.1e-5 (0.15u).

Also checked: the world-size-1 data-parallel artifact reproduces the
plain artifact (same bound), i.e. splitting train_step into train_step +
train_update changes nothing.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

IN, HID, C = 6, 16, 4
GLOBAL_BATCH = 8
SAMPLES = 80
RTOL = 1e-6  # of max|want| per tensor (docstring)
LAST_SAMPLES = 85  # 10 global batches of 8 and a last one of 5
BUCKET_MB = 0.0003  # 78 elements: the MLP's 180 gradients in three buckets
# Compressed all-reduce with error feedback (docstring): of max|want|.
COMPRESSED_RTOL = {"bf16": 1e-2, "fp16": 1e-3}

OPTIMIZERS = [
    ("momentum", "momentum:lr=0.1,momentum=0.9"),
    ("adamw", "adamw:lr=0.01,weight_decay=0.01"),
]


def mpirun(n):
    """The mpirun prefix for n ranks on this one machine (root, no network:
    shared memory only, one emulator thread per rank)."""
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n),
            "--mca", "btl", "self,vader", "-x", "KILN_EMU_THREADS=1"]


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


def prepare(work, seed=11):
    """The model and the data (x.npy, y.npy) in `work` that every
    data-parallel test trains (this script, zero1.py, powersgd_training.py,
    data_parallel_faults.py); returns the model's path."""
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(seed)
    model = make_model(work, rng)
    np.save(os.path.join(work, "x.npy"),
            rng.standard_normal((SAMPLES, IN)).astype(np.float32))
    np.save(os.path.join(work, "y.npy"),
            rng.integers(0, C, SAMPLES).astype(np.int64))
    return model


def same_checkpoint(a, b, ignore=()):
    """Whether two checkpoint folders hold the same tensors, bit for bit
    (`ignore`: names left out of the comparison)."""
    got = read_safetensors(os.path.join(a, "checkpoint.safetensors"))
    want = read_safetensors(os.path.join(b, "checkpoint.safetensors"))
    return sorted(got) == sorted(want) and all(
        np.array_equal(got[k], want[k]) for k in want if k not in ignore)


def make_model(work, rng):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    shapes = [(IN, HID), (HID,), (HID, C), (C,)]
    names = ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
    vals = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["z"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", C])],
        [numpy_helper.from_array(v, n) for v, n in zip(vals, names)])
    path = os.path.join(work, "mlp.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              path)
    return path


def compile_model(args, model, out, batch, spec, data_parallel, wire="fp32",
                  run_time_batch=False):
    if run_time_batch:
        # The batch a run-time size N = 1..batch (kilnc --train --dim).
        shape = [f"--shape=x=Nx{IN}", "--dim", f"N=1..{batch}",
                 "--labels=y:N:int64"]
    else:
        shape = [f"--shape=x={batch}x{IN}", f"--labels=y:{batch}:int64"]
    cmd = [args.kilnc, model] + shape + [
        "--train", "--loss=cross_entropy", "--optimizer=" + spec, "-o", out]
    if data_parallel:
        # Three gradient buckets (W1; b1; W2 and b2), each reduced as soon
        # as the launch that completes it has run (docs/runtime.md).
        cmd += ["--data-parallel", f"--bucket-mb={BUCKET_MB}"]
    if wire != "fp32":
        cmd.append("--allreduce-dtype=" + wire)
    subprocess.run(cmd, check=True)


def train(args, art, ck, ranks, data="x.npy", labels="y.npy"):
    cmd = [args.kiln_train, art, "--data", os.path.join(args.work, data),
           "--labels", os.path.join(args.work, labels), "--epochs", "1",
           "--device", "emu", "--quiet", "--checkpoint-dir", ck,
           "--collective-timeout", "120"]
    if ranks:
        cmd = mpirun(ranks) + cmd
    start = time.time()
    subprocess.run(cmd, check=True, env=dict(os.environ, KILN_EMU_THREADS="1"))
    return time.time() - start


def losses(ck):
    rows = [l.split(",") for l in
            open(os.path.join(ck, "loss.csv")).read().splitlines()[1:]]
    return np.array([float(r[2]) for r in rows if r[2]])


def compare(name, ck, ref_ck, rtol=None):
    rtol = RTOL if rtol is None else rtol
    got, want = read_safetensors(os.path.join(ck, "checkpoint.safetensors")), \
        read_safetensors(os.path.join(ref_ck, "checkpoint.safetensors"))
    failures = 0
    worst = 0.0
    pairs = [("loss", losses(ck), losses(ref_ck))]
    for key in sorted(want):
        # The gradients (one state, or one per bucket): this step's, not
        # state that lasts.
        if key == "kiln.state.grad" or key.startswith("kiln.state.grad."):
            continue
        pairs.append((key, got[key], want[key]))
    for what, g, w in pairs:
        g = np.asarray(g, np.float64)
        w = np.asarray(w, np.float64)
        if g.shape != w.shape:
            print(f"FAIL {name} {what}: shape {g.shape} vs {w.shape}")
            failures += 1
            continue
        scale = float(np.max(np.abs(w), initial=0))
        worst = max(worst, float(np.max(np.abs(g - w), initial=0)) / max(scale, 1e-30))
        bad = np.abs(g - w) > rtol * scale
        if bad.any():
            i = int(np.argmax(bad.ravel()))
            print(f"FAIL {name} {what}: {int(bad.sum())} of {bad.size} elements "
                  f"outside {rtol:g} x max|want| ({rtol * scale:.3g}); first at "
                  f"{i}: got {g.ravel()[i]!r} want {w.ravel()[i]!r}")
            failures += 1
    return failures, worst


def last_batch_runs(args, model, ranks):
    """An epoch of LAST_SAMPLES samples with SGD+momentum and a run-time
    batch (kilnc --train --dim N=1..B): 10 global batches of 8, then the 5
    left over as one smaller last batch. One process runs it as a batch of
    5; 2 ranks split it 3 + 2 and 4 ranks 2 + 1 + 1 + 1, each rank's
    gradients and loss weighted by N x its share / 5 before the mean over
    the ranks (TrainingSession::setBatchShare), which makes the average the
    mean over the 5 samples, as the one process computes it: the same
    bound as the full batches. Without the weights the uneven shares
    average to another gradient (the 2-rank run: (g3 + g2) / 2 instead of
    (3 g3 + 2 g2) / 5). Then kiln.Trainer under mpirun -np 2 on the same
    artifact and data, bit-identical to kiln-train's 2-rank run."""
    rng = np.random.default_rng(29)
    np.save(os.path.join(args.work, "x-last.npy"),
            rng.standard_normal((LAST_SAMPLES, IN)).astype(np.float32))
    np.save(os.path.join(args.work, "y-last.npy"),
            rng.integers(0, C, LAST_SAMPLES).astype(np.int64))
    spec = dict(OPTIMIZERS)["momentum"]
    data = ("x-last.npy", "y-last.npy")
    ref_art = os.path.join(args.work, "last-ref.kiln")
    compile_model(args, model, ref_art, GLOBAL_BATCH, spec, False,
                  run_time_batch=True)
    ref_ck = os.path.join(args.work, "last-ref")
    train(args, ref_art, ref_ck, 0, *data)
    steps = len(losses(ref_ck))
    failures = runs = 0
    for n in ranks:
        art = os.path.join(args.work, f"last-dp{n}.kiln")
        compile_model(args, model, art, GLOBAL_BATCH // n, spec, True,
                      run_time_batch=True)
        ck = os.path.join(args.work, f"last-dp{n}")
        seconds = train(args, art, ck, n, *data)
        f, worst = compare(f"last batch {n} ranks", ck, ref_ck)
        shares = [LAST_SAMPLES % GLOBAL_BATCH // n +
                  (r < LAST_SAMPLES % GLOBAL_BATCH % n) for r in range(n)]
        failures += f
        runs += 1
        print(f"last batch: {n} rank(s) x batch 1..{GLOBAL_BATCH // n}, "
              f"{steps} steps (the last split {' + '.join(map(str, shares))})"
              f", worst difference {worst:.2g} of the tensor's scale "
              f"({seconds:.1f} s) {'ok' if not f else 'FAILED'}")
        # ZeRO-1 weights its part of each reduce-scatter the same way: the
        # same numbers as plain data parallelism, bit for bit.
        zero = os.path.join(args.work, f"last-zero{n}.kiln")
        subprocess.run([args.kilnc, model, f"--shape=x=Nx{IN}", "--dim",
                        f"N=1..{GLOBAL_BATCH // n}", "--labels=y:N:int64",
                        "--train", "--loss=cross_entropy",
                        "--optimizer=" + spec, "--data-parallel",
                        f"--shard-optimizer={n}", "-o", zero], check=True)
        zck = os.path.join(args.work, f"last-zero{n}")
        train(args, zero, zck, n, *data)
        # (The gradient states differ in layout: ZeRO's one padded `grad`,
        # plain data parallelism's buckets; neither lasts past a step.)
        got = read_safetensors(os.path.join(zck, "checkpoint.safetensors"))
        want = read_safetensors(os.path.join(ck, "checkpoint.safetensors"))
        kept = [k for k in want if not k.startswith("kiln.state.grad")]
        same = bool(kept) and all(
            k in got and np.array_equal(got[k], want[k]) for k in kept)
        failures += not same
        runs += 1
        print(f"last batch: ZeRO-1 on {n} ranks "
              f"{'bit-identical to' if same else 'DIFFERS from'} data "
              f"parallelism {'ok' if same else 'FAILED'}")
    if args.python and 2 in ranks:
        ck = os.path.join(args.work, "python-last-dp2")
        subprocess.run(
            mpirun(2) + [sys.executable, os.path.join(
                os.path.dirname(os.path.abspath(__file__)),
                "data_parallel_trainer.py"),
                os.path.join(args.work, "last-dp2.kiln"),
                os.path.join(args.work, data[0]),
                os.path.join(args.work, data[1]), ck],
            check=True, capture_output=True, text=True,
            env=dict(os.environ, KILN_EMU_THREADS="1"))
        same = same_checkpoint(ck, os.path.join(args.work, "last-dp2"))
        failures += not same
        runs += 1
        print(f"python: kiln.Trainer, last batch under mpirun -np 2: "
              f"checkpoint {'bit-identical to' if same else 'DIFFERS from'} "
              f"kiln-train's {'ok' if same else 'FAILED'}")
    return failures, runs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--optimizers", default="momentum,adamw")
    p.add_argument("--compress", default="bf16,fp16",
                   help="wire types to check with 2 and 4 ranks (momentum)")
    p.add_argument("--last-batch", action="store_true",
                   help="also the smaller last batch of a run-time-batch "
                        "artifact split over the ranks (LAST_SAMPLES)")
    p.add_argument("--python", action="store_true",
                   help="also mpirun -np 2 python with kiln.Trainer (the kiln "
                        "package on PYTHONPATH) and compare with kiln-train")
    args = p.parse_args()
    model = prepare(args.work)
    ranks = [int(r) for r in args.ranks.split(",") if r]
    failures = 0
    runs = 0
    for opt, spec in OPTIMIZERS:
        if opt not in args.optimizers.split(","):
            continue
        ref_art = os.path.join(args.work, f"{opt}-ref.kiln")
        compile_model(args, model, ref_art, GLOBAL_BATCH, spec, False)
        ref_ck = os.path.join(args.work, f"{opt}-ref")
        train(args, ref_art, ref_ck, 0)
        for n in [1] + ranks:
            art = os.path.join(args.work, f"{opt}-dp{n}.kiln")
            compile_model(args, model, art, GLOBAL_BATCH // n, spec, True)
            ck = os.path.join(args.work, f"{opt}-dp{n}")
            seconds = train(args, art, ck, n if n > 1 else 0)
            f, worst = compare(f"{opt} {n} ranks", ck, ref_ck)
            failures += f
            runs += 1
            print(f"{opt}: {n} rank(s) x batch {GLOBAL_BATCH // n}, 10 steps, "
                  f"worst difference {worst:.2g} of the tensor's scale "
                  f"({seconds:.1f} s) {'ok' if not f else 'FAILED'}")
    # Compressed gradients (--allreduce-dtype): the same runs with 16-bit
    # values on the wire, against the plain fp32 one-process run.
    for wire in [w for w in args.compress.split(",") if w]:
        if "momentum" not in args.optimizers.split(","):
            break
        model_spec = dict(OPTIMIZERS)["momentum"]
        ref_ck = os.path.join(args.work, "momentum-ref")
        for n in ranks:
            art = os.path.join(args.work, f"momentum-dp{n}-{wire}.kiln")
            compile_model(args, model, art, GLOBAL_BATCH // n, model_spec, True,
                          wire)
            ck = os.path.join(args.work, f"momentum-dp{n}-{wire}")
            seconds = train(args, art, ck, n)
            f, worst = compare(f"momentum {wire} {n} ranks", ck, ref_ck,
                               COMPRESSED_RTOL[wire])
            failures += f
            runs += 1
            print(f"momentum {wire} all-reduce: {n} rank(s) x batch "
                  f"{GLOBAL_BATCH // n}, 10 steps, worst difference "
                  f"{worst:.2g} of the tensor's scale ({seconds:.1f} s) "
                  f"{'ok' if not f else 'FAILED'}")
    if args.last_batch and "momentum" in args.optimizers.split(","):
        f, r = last_batch_runs(args, model, ranks)
        failures += f
        runs += r
    if args.python and 2 in ranks and "momentum" in args.optimizers.split(","):
        # The same job through kiln.Trainer: the same loop, so the same
        # numbers as kiln-train's 2-rank run, bit for bit.
        ck = os.path.join(args.work, "python-dp2")
        art = os.path.join(args.work, "momentum-dp2.kiln")
        out = subprocess.run(
            mpirun(2) + [sys.executable, os.path.join(
                os.path.dirname(os.path.abspath(__file__)),
                "data_parallel_trainer.py"), art,
                os.path.join(args.work, "x.npy"),
                os.path.join(args.work, "y.npy"), ck],
            check=True, capture_output=True, text=True,
            env=dict(os.environ, KILN_EMU_THREADS="1")).stdout
        same = same_checkpoint(ck, os.path.join(args.work, "momentum-dp2"))
        ranks_seen = sorted(l.split(" of ")[0] for l in out.splitlines()
                            if l.startswith("rank "))
        ok = same and ranks_seen == ["rank 0", "rank 1"]
        failures += not ok
        runs += 1
        print(f"python: kiln.Trainer under mpirun -np 2, {', '.join(ranks_seen)}: "
              f"checkpoint {'bit-identical to' if same else 'DIFFERS from'} "
              f"kiln-train's {'ok' if ok else 'FAILED'}")
    print(f"data-parallel: {runs} runs, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
