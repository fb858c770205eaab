"""Compile an ONNX model with kilnc, count what its PTX does, run it on emu.

Shared by the kernel-mapping tests (row_kernels.py, membound_kernels.py,
vectorized_kernels.py):
each builds a model, asks for its artifact and PTX with the flags under
test, runs the artifact on the emulator with its inputs, and compares the
outputs with its own float64 reference.
"""
import os
import re
import subprocess

import numpy as np


def parse_args():
    """The work directory and the tools, as every emu test script takes
    them."""
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("--kilnc", default="kilnc")
    parser.add_argument("--kiln-run", dest="kiln_run", default="kiln-run")
    return parser.parse_args()


def onnxruntime_run(path, feeds):
    """The model's outputs from onnxruntime with graph optimizations off
    (the project's reference setting). Raises onnxruntime's NotImplemented
    where it has no kernel."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options).run(None, feeds)


def run(command):
    return subprocess.run(command, capture_output=True, text=True)


def compile_and_run(args, name, path, flags, feeds, work):
    """kilnc `path` with `flags` into work/m.ptx and work/m.kiln, then
    kiln-run on emu with `feeds` (name -> array), outputs into `work` as
    <output>.npy. Returns the PTX text, or None after printing
    "<name>: ... FAIL" when a tool fails."""
    ptx = os.path.join(work, "m.ptx")
    emitted = run([args.kilnc, path, "--emit=ptx", "-o", ptx] + flags)
    if emitted.returncode:
        print(f"{name}: kilnc failed: {emitted.stderr.strip().splitlines()[:1]} FAIL")
        return None
    if run_model(args, name, path, feeds, work, [], flags) is None:
        return None
    return open(ptx).read()


def run_model(args, name, path, feeds, work, outputs, flags=()):
    """kilnc `path` (with `flags`) into work/m.kiln and kiln-run it on emu
    with `feeds` (name -> array). Returns the arrays of `outputs`, in order,
    or None after printing "<name>: ... FAIL" when a tool fails."""
    artifact = os.path.join(work, "m.kiln")
    built = run([args.kilnc, path, "-o", artifact] + list(flags))
    if built.returncode:
        print(f"{name}: kilnc failed: {built.stderr.strip().splitlines()[:1]} FAIL")
        return None
    command = [args.kiln_run, artifact, "--device", "emu", "-o", work]
    for input_name, data in feeds.items():
        file = os.path.join(work, f"{input_name}.npy")
        np.save(file, data)
        command += ["-i", f"{input_name}={file}"]
    ran = run(command)
    if ran.returncode:
        print(f"{name}: kiln-run failed: {ran.stderr.strip().splitlines()[:1]} FAIL")
        return None
    return [np.load(os.path.join(work, f"{o}.npy")) for o in outputs]


def count(ptx, pattern):
    """How often the regular expression `pattern` occurs in `ptx`."""
    return len(re.findall(pattern, ptx))
