#!/usr/bin/env python3
"""ZeRO stage 1 (kilnc --shard-optimizer=N) against plain data parallelism.

The data_parallel.py MLP, resized so that its 57 trainable elements
(Gemm 5 -> 6 -> 3) do not divide by 2 or 4: the gradients are padded
(S = 29 for 2 ranks, 15 for 4), and with --bucket-mb=0.0001 (26 floats)
each job has three buckets of shard columns, the last one short. For
SGD+momentum, AdamW, momentum with --grad-clip=0.1 (small enough to clip:
a per-shard norm fails this case, see the commit that added the file),
and (2 ranks) momentum in fp16 with dynamic loss scaling from 2^22 (four
overflowing steps skipped, then six trained), a --data-parallel artifact
and a --data-parallel --shard-optimizer=N artifact each train one epoch
of 80 samples (10 steps, global batch 8) under mpirun -np N, N = 2 and 4;
rank 0's checkpoints (every weight, the optimizer moments gathered whole,
the loss history) must agree element by element.

Bound: |zero - dp| <= 1e-6 max|dp| per tensor. Both runs compute the
same per-element f32 update on the same averaged gradient; what can
differ is the order in which MPI sums the ranks' gradients
(MPI_Reduce_scatter_block against MPI_Allreduce: a few ulps of a
gradient element for 4 ranks, identical for 2) and, with clipping, the
squared norm, summed per shard and then over the ranks instead of in one
device reduction (a relative few ulps in the clip factor). Ten steps of
lr x a few ulps of g are ~1e-7 of each tensor's scale: 1e-6 is that with
10x margin, the same bound data_parallel.py holds plain data parallelism
to against one process. A rank updating the wrong slice, a missing
all-gather, or a per-shard norm miss it by orders of magnitude (the
commit message shows one).

Also: an epoch, a checkpoint, --resume and a second epoch give the
2-epoch run's weights and moments bit for bit (the gathered moments go
back to the right ranks), and resuming that checkpoint with a
--shard-optimizer=4 artifact on 4 ranks is refused with one line. With
--python, kiln.Trainer.fit under mpirun -np 2 (every rank takes part in
the checkpoint's gather) writes kiln-train's checkpoint bit for bit.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_parallel as dp  # noqa: E402

dp.IN, dp.HID, dp.C = 5, 6, 3  # 57 weights: 30 + 6 + 18 + 3
BUCKET_MB = "0.0001"
CASES = [
    ("momentum", "momentum:lr=0.1,momentum=0.9", [], None),
    ("adamw", "adamw:lr=0.01,weight_decay=0.01", [], None),
    ("momentum clip", "momentum:lr=0.1,momentum=0.9", ["--grad-clip=0.1"],
     None),
    # fp16 with dynamic loss scaling from 2^22: the first four steps
    # overflow and are skipped (the scale halves to 2^18), the other six
    # train; the finite check reads the ranks' summed squared norm.
    ("momentum fp16 loss scaling", "momentum:lr=0.1,momentum=0.9",
     ["--precision=fp16", "--loss-scale-init=4194304"], [2]),
]


def compile_model(args, model, out, batch, spec, extra):
    subprocess.run([args.kilnc, model, f"--shape=x={batch}x{dp.IN}", "--train",
                    "--loss=cross_entropy", f"--labels=y:{batch}:int64",
                    "--optimizer=" + spec, "--data-parallel",
                    "--bucket-mb=" + BUCKET_MB, "-o", out] + extra, check=True)


def train(args, art, ck, ranks, epochs=1, resume=False, check=True):
    cmd = dp.mpirun(ranks) + [
        args.kiln_train, art, "--data", os.path.join(args.work, "x.npy"),
        "--labels", os.path.join(args.work, "y.npy"), "--epochs", str(epochs),
        "--device", "emu", "--quiet", "--checkpoint-dir", ck,
        "--collective-timeout", "120"] + (["--resume"] if resume else [])
    return subprocess.run(cmd, check=check, capture_output=not check,
                          text=True, env=dict(os.environ, KILN_EMU_THREADS="1"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--ranks", default="2,4")
    p.add_argument("--python", action="store_true",
                   help="also mpirun -np 2 python with kiln.Trainer (the kiln "
                        "package on PYTHONPATH): rank 0's checkpoint against "
                        "kiln-train's")
    args = p.parse_args()
    model = dp.prepare(args.work)
    failures = runs = 0
    for name, spec, extra, only in CASES:
        for n in [int(r) for r in args.ranks.split(",") if r]:
            if only and n not in only:
                continue
            batch = dp.GLOBAL_BATCH // n
            tag = f"{name.replace(' ', '-')}-{n}"
            plain = os.path.join(args.work, f"{tag}-dp.kiln")
            zero = os.path.join(args.work, f"{tag}-zero.kiln")
            compile_model(args, model, plain, batch, spec, extra)
            compile_model(args, model, zero, batch, spec,
                          extra + [f"--shard-optimizer={n}"])
            train(args, plain, os.path.join(args.work, f"{tag}-dp"), n)
            train(args, zero, os.path.join(args.work, f"{tag}-zero"), n)
            f, worst = dp.compare(f"{name} {n} ranks",
                                  os.path.join(args.work, f"{tag}-zero"),
                                  os.path.join(args.work, f"{tag}-dp"))
            failures += f
            runs += 1
            print(f"{name}: {n} ranks x batch {batch}, 10 steps, ZeRO-1 vs "
                  f"data parallel: worst difference {worst:.2g} of the "
                  f"tensor's scale {'ok' if not f else 'FAILED'}")

    # Checkpoints: 1 epoch + --resume + 1 epoch == 2 epochs, bit for bit.
    zero = os.path.join(args.work, "momentum-2-zero.kiln")
    straight = os.path.join(args.work, "resume-straight")
    resumed = os.path.join(args.work, "resume-resumed")
    train(args, zero, straight, 2, epochs=2)
    train(args, zero, resumed, 2, epochs=1)
    train(args, zero, resumed, 2, epochs=2, resume=True)
    got = dp.read_safetensors(os.path.join(resumed, "checkpoint.safetensors"))
    want = dp.read_safetensors(os.path.join(straight, "checkpoint.safetensors"))
    same = sorted(got) == sorted(want) and all(
        np.array_equal(got[k], want[k]) for k in want if k != "kiln.state.grad")
    moments = "kiln.state.opt.m" in want and want["kiln.state.opt.m"].shape == (57,)
    failures += not (same and moments)
    runs += 1
    print(f"resume: 1 + 1 epochs vs 2 epochs, 2 ranks: "
          f"{'bit-identical' if same else 'DIFFERENT'}, moments whole "
          f"{want.get('kiln.state.opt.m', np.zeros(0)).shape} "
          f"{'ok' if same and moments else 'FAILED'}")
    # Another world size cannot take the checkpoint's shards.
    four = os.path.join(args.work, "momentum-4-zero.kiln")
    out = train(args, four, resumed, 4, epochs=3, resume=True, check=False)
    refused = out.returncode != 0 and \
        "sharded over 2 ranks, this artifact's is sharded over 4 ranks" in out.stderr
    failures += not refused
    runs += 1
    print(f"resume with 4 ranks: {'refused' if refused else 'NOT refused'} "
          f"{'ok' if refused else 'FAILED: ' + out.stderr}")
    if args.python:
        # kiln.Trainer.fit saves on every rank of a ZeRO job (the gather is
        # a collective): the same checkpoint as kiln-train's, bit for bit.
        ck = os.path.join(args.work, "python-zero2")
        out = subprocess.run(
            dp.mpirun(2) + [sys.executable, os.path.join(
                os.path.dirname(os.path.abspath(__file__)),
                "data_parallel_trainer.py"), zero,
                os.path.join(args.work, "x.npy"),
                os.path.join(args.work, "y.npy"), ck],
            check=True, capture_output=True, text=True,
            env=dict(os.environ, KILN_EMU_THREADS="1")).stdout
        same = dp.same_checkpoint(ck, os.path.join(args.work,
                                                   "momentum-2-zero"))
        failures += not same
        runs += 1
        print(f"python: kiln.Trainer under mpirun -np 2: checkpoint "
              f"{'bit-identical to' if same else 'DIFFERS from'} kiln-train's "
              f"{'ok' if same else 'FAILED'} ({out.count('rank ')} ranks "
              f"reported)")
    print(f"zero1: {runs} checks, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
