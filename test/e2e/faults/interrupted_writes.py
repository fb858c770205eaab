#!/usr/bin/env python3
"""SIGKILL while Kiln's tools write their files: the old file or the new one,
never a torn one, and no temporaries piling up.

Three writers, each killed at seeded random points of its run, several of
them while its file is being written (the script polls the directory for
the writer's temporary file and kills the process the moment it appears):

- `kilnc M.onnx -o out.kiln` with a kernel cache (KILN_KERNEL_CACHE) in the
  work directory. `out.kiln` starts as the artifact of another model; after
  each kill it must be byte for byte that old artifact, or a new one of the
  new artifact's size that kiln-run loads and runs on emu (two compiles of
  one model differ in a few metadata bytes, so "the new bytes" cannot be
  compared). A final compile must sweep every temporary file the kills left
  (the artifact's `.out.kiln.tmp.*` and the cache's `tmp/*.tmp`), and its
  artifact, compiled through the cache the kills wrote, must run.
- `kiln-train --checkpoint-dir ck` (checkpoint after every epoch, loss.csv
  at the end). After each kill the checkpoint, if there is one yet, must
  load: `--resume` to the full epoch count must give the same checkpoint and
  loss history, byte for byte, as an uninterrupted run (resuming is
  bit-identical: test/Pipelines/Training/kiln-train-errors.test).
- `kiln-run --profile-json p.json` on emu. `p.json` starts as another run's
  profile; after each kill it must be that file or a complete JSON profile.

After every kill, the directory must hold at most one temporary file per
destination (the killed writer's own, which the next writer removes).

Usage: interrupted_writes.py --kilnc K --kiln-train T --kiln-run R --work DIR
       [--seed S] [--kills N]
Prints one line per writer and "interrupted writes: 0 failures".
"""
import argparse
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = 0


def fail(message):
    global failures
    failures += 1
    print("FAIL: " + message)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def temporaries(directory, base):
    """The AtomicFileWriter temporaries of `base` in `directory`."""
    return glob.glob(os.path.join(directory, "." + base + ".tmp.*"))


def run_and_kill(cmd, env, delay, watch=None):
    """Starts cmd, kills it with SIGKILL after `delay` seconds, or the
    moment a file matching the glob `watch` appears (whichever is first).
    Returns (what happened, seconds run)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    how = "finished"
    while proc.poll() is None:
        elapsed = time.monotonic() - start
        if watch and glob.glob(watch):
            how = "killed while writing"
        elif elapsed >= delay:
            how = "killed"
        else:
            time.sleep(0.0005 if watch else 0.005)
            continue
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        break
    if how == "finished" and proc.returncode != 0:
        how = f"failed ({proc.returncode})"
    return how, time.monotonic() - start


def timed(cmd, env):
    start = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"setup failed: {' '.join(cmd)}: {r.stderr.strip()}")
    return time.monotonic() - start


def make_model(path, scale, n):
    """y = x * W + b, W of n floats: a write that takes a while."""
    rng = np.random.default_rng(int(scale * 10))
    w = (rng.standard_normal(n) * scale).astype(np.float32)
    b = np.float32(scale)
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "W"], ["t"]),
         helper.make_node("Add", ["t", "b"], ["y"])], "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.array(b), "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def check_kilnc(args, rng, work):
    env = dict(os.environ, KILN_KERNEL_CACHE=os.path.join(work, "kc"))
    # 4 MiB of weights: the artifact's write is long enough to be caught.
    n = 1 << 20
    make_model(os.path.join(work, "old.onnx"), 0.5, n)
    make_model(os.path.join(work, "new.onnx"), 2.0, n)
    nocache = dict(os.environ, KILN_KERNEL_CACHE="off")
    timed([args.kilnc, os.path.join(work, "old.onnx"), "-o",
           os.path.join(work, "old.kiln")], nocache)
    seconds = timed([args.kilnc, os.path.join(work, "new.onnx"), "-o",
                     os.path.join(work, "new.kiln")], nocache)
    old, new = read(os.path.join(work, "old.kiln")), read(os.path.join(work, "new.kiln"))
    out = os.path.join(work, "out.kiln")
    shutil.copyfile(os.path.join(work, "old.kiln"), out)
    outcomes = {}
    for i in range(args.kills):
        # Every other kill waits for the temporary file; the rest land at
        # random points of the compile.
        watch = os.path.join(work, ".out.kiln.tmp.*") if i % 2 == 0 else None
        how, _ = run_and_kill([args.kilnc, os.path.join(work, "new.onnx"), "-o", out],
                              env, rng.uniform(0, seconds * 1.1), watch)
        data = read(out)
        state = "old" if data == old else "new" if (
            len(data) == len(new) and runs(args, out)) else None
        if state is None:
            fail(f"kilnc kill {i} ({how}): out.kiln is neither artifact "
                 f"({len(data)} bytes)")
        if len(temporaries(work, "out.kiln")) > 1:
            fail(f"kilnc kill {i}: temporaries accumulate: "
                 f"{temporaries(work, 'out.kiln')}")
        outcomes[f"{how}, {state}"] = outcomes.get(f"{how}, {state}", 0) + 1
        if state == "new":  # back to the old one, so the next kill is seen
            shutil.copyfile(os.path.join(work, "old.kiln"), out)
    left = len(temporaries(work, "out.kiln")) + len(
        glob.glob(os.path.join(work, "kc", "tmp", "*.tmp")))
    r = subprocess.run([args.kilnc, os.path.join(work, "new.onnx"), "-o", out],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        fail("kilnc after the kills: " + r.stderr.strip())
    elif not runs(args, out):
        fail("kilnc after the kills (kernel cache): the artifact does not run")
    remaining = temporaries(work, "out.kiln") + glob.glob(
        os.path.join(work, "kc", "tmp", "*.tmp"))
    if remaining:
        fail(f"kilnc: temporaries left after a complete compile: {remaining}")
    print(f"kilnc: {args.kills} kills ({', '.join(f'{v} {k}' for k, v in sorted(outcomes.items()))}); "
          f"{left} temporaries left by kills, {len(remaining)} after the next compile")


def runs(args, artifact):
    """kiln-run loads the artifact and runs it on emu."""
    return subprocess.run(
        [args.kiln_run, artifact, "--device", "emu", "--random-inputs"],
        capture_output=True).returncode == 0


def safetensors_ok(path):
    blob = read(path)
    if len(blob) < 8:
        return False
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    return 8 + n + end == len(blob)


def check_kiln_train(args, rng, work):
    env = dict(os.environ, KILN_KERNEL_CACHE="off")
    B, In, Hd, C = 8, 6, 7, 4
    r = np.random.default_rng(3)
    shapes = [(In, Hd), (Hd,), (Hd, C), (C,)]
    names = ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["z"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, In])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [B, C])],
        [numpy_helper.from_array((r.standard_normal(s) * 0.5).astype(np.float32), nm)
         for s, nm in zip(shapes, names)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              os.path.join(work, "mlp.onnx"))
    np.save(os.path.join(work, "x.npy"), r.standard_normal((32, In)).astype(np.float32))
    np.save(os.path.join(work, "y.npy"), r.integers(0, C, 32).astype(np.int64))
    model = os.path.join(work, "mlp.train.kiln")
    timed([args.kilnc, os.path.join(work, "mlp.onnx"), "--train", "--optimizer=sgd",
           "--loss=cross_entropy", f"--labels=y:{B}:int64", "-o", model], env)
    epochs = 6

    def train(directory, resume=False):
        return [args.kiln_train, model, "--data", os.path.join(work, "x.npy"),
                "--labels", os.path.join(work, "y.npy"), "--device", "emu",
                "--epochs", str(epochs), "--seed", "5", "--quiet",
                "--checkpoint-dir", directory] + (["--resume"] if resume else [])

    straight = os.path.join(work, "straight")
    seconds = timed(train(straight), env)
    resumed = 0
    for i in range(args.kills):
        ck = os.path.join(work, f"ck{i}")
        watch = os.path.join(ck, ".checkpoint.safetensors.tmp.*") if i % 3 == 0 else None
        how, _ = run_and_kill(train(ck), env, rng.uniform(0, seconds), watch)
        path = os.path.join(ck, "checkpoint.safetensors")
        if len(temporaries(ck, "checkpoint.safetensors")) > 1:
            fail(f"kiln-train kill {i}: temporaries accumulate")
        if not os.path.exists(path):
            continue  # killed before the first checkpoint
        try:
            ok = safetensors_ok(path)
        except (ValueError, KeyError):
            ok = False
        if not ok:
            fail(f"kiln-train kill {i} ({how}): a torn checkpoint")
            continue
        r = subprocess.run(train(ck, resume=True), env=env, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"kiln-train kill {i} ({how}): --resume failed: {r.stderr.strip()}")
            continue
        resumed += 1
        for f in ("checkpoint.safetensors", "loss.csv"):
            if read(os.path.join(ck, f)) != read(os.path.join(straight, f)):
                fail(f"kiln-train kill {i} ({how}): resumed {f} differs from "
                     "an uninterrupted run's")
        if temporaries(ck, "checkpoint.safetensors") or temporaries(ck, "loss.csv"):
            fail(f"kiln-train kill {i}: temporaries left after --resume")
    print(f"kiln-train: {args.kills} kills, {resumed} resumed from their last "
          f"checkpoint to the uninterrupted run's checkpoint and loss.csv")


def check_kiln_run(args, rng, work):
    env = dict(os.environ, KILN_EMU_THREADS="1")
    model = os.path.join(work, "new.kiln")
    profile = os.path.join(work, "p.json")

    def cmd(path):
        return [args.kiln_run, model, "--device", "emu", "--random-inputs",
                "--profile-json", path]

    seconds = timed(cmd(os.path.join(work, "old.json")), env)
    old = read(os.path.join(work, "old.json"))
    shutil.copyfile(os.path.join(work, "old.json"), profile)
    kept = 0
    for i in range(args.kills):
        watch = os.path.join(work, ".p.json.tmp.*") if i % 2 == 0 else None
        how, _ = run_and_kill(cmd(profile), env, rng.uniform(0, seconds), watch)
        data = read(profile)
        if data == old:
            kept += 1
        else:
            try:
                json.loads(data)
            except ValueError:
                fail(f"kiln-run kill {i} ({how}): a torn profile ({len(data)} bytes)")
        if len(temporaries(work, "p.json")) > 1:
            fail(f"kiln-run kill {i}: temporaries accumulate")
    subprocess.run(cmd(profile), env=env, capture_output=True)
    if temporaries(work, "p.json"):
        fail("kiln-run: temporaries left after a complete run")
    print(f"kiln-run: {args.kills} kills, the old profile kept {kept} times, "
          "a complete new one otherwise")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--kiln-run", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kills", type=int, default=4, help="kills per writer")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = random.Random(args.seed)
    check_kilnc(args, rng, args.work)
    check_kiln_train(args, rng, args.work)
    check_kiln_run(args, rng, args.work)
    print(f"interrupted writes: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
