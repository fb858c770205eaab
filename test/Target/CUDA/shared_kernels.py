#!/usr/bin/env python3
"""Runs shared-kernels.onnxtxt's artifact on emu and checks every output
against numpy float64.

Usage: shared_kernels.py ARTIFACT WORKDIR --kiln-run PATH

Two of the model's matmul regions are the same kernel (same shapes, same
epilogue), which the artifact holds once and launches twice with different
operands; the third is a split-K GEMM (two entries in one module). The
inputs are seeded integers in [-2, 2], exact in bf16 and in every product
and partial sum of fp32, so each output must match float64 exactly up to
fp32's rounding of sums below 2^24 (it is exact here): the bound is 0.
"""
import argparse
import os
import subprocess

import numpy as np


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("artifact")
    parser.add_argument("work")
    parser.add_argument("--kiln-run", required=True)
    args = parser.parse_args()
    rng = np.random.default_rng(23)
    shapes = {"a": (64, 128), "b": (128, 32), "c": (64, 128), "d": (128, 32),
              "e": (8, 2048), "f": (2048, 16)}
    feeds = {k: rng.integers(-2, 3, size=s).astype(np.float32)
             for k, s in shapes.items()}
    os.makedirs(args.work, exist_ok=True)
    command = [args.kiln_run, args.artifact, "--device", "emu", "-o", args.work]
    for name, data in feeds.items():
        path = os.path.join(args.work, name + ".npy")
        np.save(path, data)
        command += ["-i", f"{name}={path}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode:
        raise SystemExit(f"kiln-run failed: {ran.stderr.strip()}")
    f64 = {k: v.astype(np.float64) for k, v in feeds.items()}
    reference = {
        "y1": np.maximum(f64["a"] @ f64["b"], 0),
        "y2": np.maximum(f64["c"] @ f64["d"], 0),
        "y3": f64["e"] @ f64["f"],
    }
    for name, ref in reference.items():
        out = np.load(os.path.join(args.work, name + ".npy")).astype(np.float64)
        worst = float(np.max(np.abs(out - ref)))
        print(f"{name}: max abs error {worst:g} {'ok' if worst == 0 else 'FAIL'}")


if __name__ == "__main__":
    main()
