#!/usr/bin/env python3
"""Runs a model on kiln-run --device emu and on onnxruntime, and compares.

Usage: emu_vs_onnxruntime.py MODEL.onnx MODEL.kiln WORKDIR [--kiln-run PATH]
                             [--bound 1e-4] [--seed 0] [--int-high N]
                             [--shape NAME=DxDx...]

Makes seeded random inputs (floats ~ N(0, 1); integers in [0, --int-high)),
saves them as .npy, runs both, and prints one line per output:
  "<name>: rel-err <e> (bound <b>), worst element <r> of its bound ... ok"
by scripts/numerics.py's rule: rel-err = ||emu - ort|| / ||ort|| <= --bound
and every element within 6 --bound rms + --bound |ort| (docs/testing.md,
"Comparing numbers"). Exits 1 when an output fails or is missing, 0
otherwise. It also prints the emulator's wall time. onnxruntime runs with
graph optimizations off. --shape gives an input's shape where the model
leaves dims unknown (as kilnc --shape does).
"""
import argparse
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

ORT_TO_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("artifact")
    ap.add_argument("workdir")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--bound", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--int-high", type=int, default=10)
    ap.add_argument("--shape", action="append", default=[],
                    help="NAME=DxDx...: an input's shape (repeatable)")
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    session = numerics.ort_session(args.model)
    rng = np.random.default_rng(args.seed)
    given = {}
    for spec in args.shape:
        name, dims = spec.split("=")
        given[name] = [int(d) for d in dims.split("x")]
    feeds = {}
    for value in session.get_inputs():
        shape = given.get(value.name, value.shape)
        dtype = ORT_TO_NUMPY[value.type]
        if np.issubdtype(dtype, np.integer):
            data = rng.integers(0, args.int_high, size=shape).astype(dtype)
        else:
            data = rng.standard_normal(shape).astype(dtype)
        feeds[value.name] = data

    command = [args.kiln_run, args.artifact, "--device", "emu", "-o",
               os.path.join(args.workdir, "out")]
    for i, (name, data) in enumerate(feeds.items()):
        path = os.path.join(args.workdir, f"input{i}.npy")
        np.save(path, data)
        command += ["-i", f"{name}={path}"]
    start = time.monotonic()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if run.returncode != 0:
        sys.stdout.write(run.stdout + run.stderr)
        print("kiln-run failed")
        return 1

    names = [o.name for o in session.get_outputs()]
    expected = session.run(names, feeds)
    failed = False
    for name, ref in zip(names, expected):
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
        path = os.path.join(args.workdir, "out", safe + ".npy")
        if not os.path.exists(path):
            print(f"{name}: missing")
            failed = True
            continue
        result = numerics.compare(np.load(path), ref, args.bound, name)
        failed |= not result.ok
        print(result.line())
    print(f"emu time: {seconds:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
