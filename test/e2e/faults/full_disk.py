#!/usr/bin/env python3
"""A full disk while Kiln's tools write: one error line, no partial file.

Without root there is no tmpfs to fill, so each writer runs under
RLIMIT_FSIZE (`ulimit -f`) with SIGXFSZ ignored: a write past the limit
then fails with EFBIG ("File too large"), as a write to a full disk fails
with ENOSPC, through the same error paths. The limit sits between what
the tool writes on the way (ptxas's files, the probe of the checkpoint
directory) and the file under test.

Each case checks: a non-zero exit status, one line on stderr naming the
file and the system's reason, the previous file untouched (or no file)
and no temporary file left in the directory.

Usage: full_disk.py --kilnc K --kiln-train T --kiln-run R --work DIR
Prints one line per case ("CASE: status N: <the error line>") for
FileCheck, and "full disk: N failures".
"""
import argparse
import glob
import os
import resource
import signal
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = 0


def fail(message):
    global failures
    failures += 1
    print("FAIL: " + message)


def limited(limit):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def case(name, cmd, limit, path, previous=None, env=None):
    """Runs cmd under a file-size limit; `path` is the file it must not
    leave half-written (`previous`: its bytes before, or None: absent)."""
    r = subprocess.run(cmd, preexec_fn=limited(limit), capture_output=True,
                       text=True, env=env)
    lines = r.stderr.strip().splitlines()
    print(f"{name}: status {r.returncode}: {lines[-1] if lines else ''}")
    if r.returncode != 1:
        fail(f"{name}: exit status {r.returncode}, not 1")
    if len(lines) != 1:
        fail(f"{name}: {len(lines)} lines on stderr: {r.stderr!r}")
    if previous is None and os.path.exists(path):
        fail(f"{name}: {path} was left behind ({os.path.getsize(path)} bytes)")
    if previous is not None and open(path, "rb").read() != previous:
        fail(f"{name}: the previous {path} was changed")
    directory, base = os.path.split(path)
    left = glob.glob(os.path.join(directory, "." + base + ".tmp.*")) + glob.glob(
        os.path.join(directory, base + ".temp-stream-*"))
    if left:
        fail(f"{name}: temporary files left: {left}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--kiln-run", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    work = args.work
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, KILN_KERNEL_CACHE="off")

    # y = x * W: 1 MiB of weights, so the artifact (and the output) is
    # larger than the 256 KiB limit and ptxas's files are far smaller.
    n = 1 << 18
    w = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "W"], ["y"])], "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        [numpy_helper.from_array(w, "W")])
    model = os.path.join(work, "scale.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    limit = 256 << 10

    out = os.path.join(work, "scale.kiln")
    case("kilnc -o", [args.kilnc, model, "-o", out], limit, out, env=env)
    # The previous artifact stays when the new one does not fit.
    subprocess.run([args.kilnc, model, "-o", out], env=env, check=True)
    before = open(out, "rb").read()
    case("kilnc -o over an artifact", [args.kilnc, model, "-o", out], limit, out,
         previous=before, env=env)
    # Text output (--emit): 1 KiB leaves no room for the IR with its weights.
    mlir = os.path.join(work, "scale.mlir")
    case("kilnc --emit=kiln", [args.kilnc, model, "--emit=kiln", "--print-weights",
                                "-o", mlir], 1024, mlir, env=env)

    # A full temporary directory under kilnc: 300 bytes do not hold the PTX
    # kilnc hands to ptxas (in $TMPDIR, here the work directory). The
    # machine's fault, so status 1, and the artifact is not written.
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    second = os.path.join(work, "second.kiln")
    case("kilnc ptxas input", [args.kilnc, model, "-o", second], 300, second,
         env=dict(env, TMPDIR=tmp))
    if os.listdir(tmp):
        fail(f"kilnc ptxas input: left in TMPDIR: {os.listdir(tmp)}")

    # kiln-run -o: the output y.npy (1 MiB) does not fit.
    outputs = os.path.join(work, "outputs")
    os.makedirs(outputs, exist_ok=True)
    case("kiln-run -o", [args.kiln_run, out, "--device", "emu", "--random-inputs",
                         "-o", outputs], limit, os.path.join(outputs, "y.npy"))

    # kiln-train: the first checkpoint (fc1.w alone is 64 KiB) does not fit
    # in 32 KiB.
    B, In, Hd, C = 8, 64, 256, 4
    r = np.random.default_rng(1)
    shapes = [(In, Hd), (Hd,), (Hd, C), (C,)]
    names = ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["z"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, In])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [B, C])],
        [numpy_helper.from_array((r.standard_normal(s) * 0.1).astype(np.float32), nm)
         for s, nm in zip(shapes, names)])
    mlp = os.path.join(work, "mlp.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), mlp)
    np.save(os.path.join(work, "x.npy"), r.standard_normal((8, In)).astype(np.float32))
    np.save(os.path.join(work, "y.npy"), r.integers(0, C, 8).astype(np.int64))
    train = os.path.join(work, "mlp.train.kiln")
    subprocess.run([args.kilnc, mlp, "--train", "--optimizer=sgd", "--loss=cross_entropy",
                    f"--labels=y:{B}:int64", "-o", train], env=env, check=True)
    ck = os.path.join(work, "ck")
    case("kiln-train checkpoint",
         [args.kiln_train, train, "--data", os.path.join(work, "x.npy"), "--labels",
          os.path.join(work, "y.npy"), "--device", "emu", "--epochs", "1", "--quiet",
          "--checkpoint-dir", ck], 32 << 10, os.path.join(ck, "checkpoint.safetensors"))
    print(f"full disk: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
