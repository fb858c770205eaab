#!/usr/bin/env python3
"""Writes a seeded input for every graph input, and onnxruntime's outputs.

Usage: make_reference.py MODEL.onnx OUTDIR [--int-high N] [--provider cpu|auto]

Creates OUTDIR/inputs/<name>.npy (float inputs standard normal, integer ones
uniform in [0, N), N = 1000 by default; numpy seed 1234), OUTDIR/inputs/
names.txt (graph name, file) and OUTDIR/reference/<name>.npy, with names
sanitised the way kiln-run names its output files. The reference is
onnxruntime fp32 on the CPU; --provider auto uses the CUDA execution
provider when this onnxruntime has one, with TF32 off (a TF32 reference
would be ~1e-3 off, ten times the fp32 bound), else the CPU. Either way
every graph optimization is off (scripts/numerics.py's ort_session).
"""
import argparse
import os
import re
import sys

import numpy as np
import onnxruntime as ort

HERE_NUMERICS = os.path.dirname(os.path.abspath(__file__))
# scripts/numerics.py: next to this file in the device pack, one folder up
# in the source tree.
sys.path[:0] = [HERE_NUMERICS, os.path.join(HERE_NUMERICS, "..")]
import numerics  # noqa: E402

TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64}


def safe(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def session(model, provider):
    if provider == "auto" and "CUDAExecutionProvider" in ort.get_available_providers():
        try:
            s = numerics.ort_session(
                model, providers=[("CUDAExecutionProvider", {"use_tf32": "0"}),
                                  "CPUExecutionProvider"])
            if s.get_providers()[0] == "CUDAExecutionProvider":
                return s
        except Exception as e:  # an onnxruntime without the use_tf32 option
            print(f"make_reference.py: CUDA execution provider unusable ({e}); using the CPU")
    return numerics.ort_session(model)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("outdir")
    ap.add_argument("--int-high", type=int, default=1000)
    ap.add_argument("--provider", choices=["cpu", "auto"], default="cpu")
    args = ap.parse_args()
    rng = np.random.default_rng(1234)
    s = session(args.model, args.provider)
    feeds = {}
    os.makedirs(os.path.join(args.outdir, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(args.outdir, "reference"), exist_ok=True)
    names = []
    for i in s.get_inputs():
        dtype = TYPES[i.type]
        if dtype == np.int64:  # token ids
            x = rng.integers(0, args.int_high, i.shape).astype(np.int64)
        else:
            x = rng.standard_normal(i.shape).astype(np.float32)
        feeds[i.name] = x
        np.save(os.path.join(args.outdir, "inputs", safe(i.name) + ".npy"), x)
        names.append(f"{i.name}\t{safe(i.name)}.npy\n")
    with open(os.path.join(args.outdir, "inputs", "names.txt"), "w") as f:
        f.writelines(names)
    for o, value in zip(s.get_outputs(), s.run(None, feeds)):
        np.save(os.path.join(args.outdir, "reference", safe(o.name) + ".npy"), value)
    print(f"reference: onnxruntime {ort.__version__} on {s.get_providers()[0]}")


if __name__ == "__main__":
    main()
