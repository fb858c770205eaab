#!/usr/bin/env python3
"""Writes a seeded input for every graph input, and onnxruntime's outputs.

Usage: make_reference.py MODEL.onnx OUTDIR
Creates OUTDIR/inputs/<name>.npy and OUTDIR/reference/<name>.npy, with names
sanitised the way kiln-run names its output files.
"""
import os
import re
import sys

import numpy as np
import onnxruntime as ort

TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64}


def safe(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def main():
    model, outdir = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(1234)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {}
    os.makedirs(os.path.join(outdir, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(outdir, "reference"), exist_ok=True)
    for i in session.get_inputs():
        dtype = TYPES[i.type]
        if dtype == np.int64:  # token ids
            x = rng.integers(0, 1000, i.shape).astype(np.int64)
        else:
            x = rng.standard_normal(i.shape).astype(np.float32)
        feeds[i.name] = x
        np.save(os.path.join(outdir, "inputs", safe(i.name) + ".npy"), x)
        with open(os.path.join(outdir, "inputs", "names.txt"), "a") as f:
            f.write(f"{i.name}\t{safe(i.name)}.npy\n")
    for o, value in zip(session.get_outputs(), session.run(None, feeds)):
        np.save(os.path.join(outdir, "reference", safe(o.name) + ".npy"), value)


if __name__ == "__main__":
    main()
