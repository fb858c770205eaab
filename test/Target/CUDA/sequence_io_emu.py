"""sequence-io-emu.test: runs present.kiln and absent.kiln (seq-io.onnx
compiled with --sequence xs=3, and --absent opt) on emu and compares every
output with onnxruntime's, graph optimizations off, element by element.
Usage: sequence_io_emu.py DIR"""
import glob
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

d = sys.argv[1]
rng = np.random.default_rng(0)
xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
opt = rng.standard_normal((2, 3)).astype(np.float32)
files = []
for i, x in enumerate(xs):
    files.append(os.path.join(d, f"x{i}.npy"))
    np.save(files[-1], x)
np.save(os.path.join(d, "opt.npy"), opt)
# A tensor of the wrong shape for the error cases.
np.save(os.path.join(d, "cat.npy"), np.concatenate(xs, 0))

options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(os.path.join(d, "seq-io.onnx"), options,
                               providers=["CPUExecutionProvider"])


def same(got, want):
    return (got.dtype == want.dtype and got.shape == want.shape
            and np.array_equal(got, want))


for case, given in (("present", opt), ("absent", None)):
    cat, parts, has, opt_out = session.run(None, {"xs": xs, "opt": given})
    out = os.path.join(d, "out-" + case)
    command = ["kiln-run", os.path.join(d, case + ".kiln"), "--device", "emu",
               "-i", "xs=" + ",".join(files), "-o", out]
    if given is not None:
        command += ["-i", "opt=" + os.path.join(d, "opt.npy")]
    run = subprocess.run(command, check=True, capture_output=True, text=True)
    want = {"cat": cat, "has": has}
    for i, part in enumerate(parts):
        want[f"parts[{i}]"] = part
    got = {"cat": np.load(os.path.join(out, "cat.npy")),
           "has": np.load(os.path.join(out, "has.npy"))}
    written = sorted(glob.glob(os.path.join(out, "parts.*.npy")))
    for i in range(len(written)):
        got[f"parts[{i}]"] = np.load(os.path.join(out, f"parts.{i}.npy"))
    if len(written) != len(parts):
        print(f"{case} parts: MISMATCH {len(written)} tensors, onnxruntime "
              f"{len(parts)}")
    for name in ["cat"] + [f"parts[{i}]" for i in range(len(parts))] + ["has"]:
        ok = name in got and same(got[name], want[name])
        print(f"{case} {name}: {'exact' if ok else 'MISMATCH'}")
    opt_file = os.path.join(out, "opt_out.npy")
    if opt_out is None:
        print(f"{case} opt_out: " + ("absent as in onnxruntime"
                                     if not os.path.exists(opt_file)
                                     else "MISMATCH: written"))
        for line in run.stdout.splitlines():
            if "absent" in line:
                print(f"kiln-run {case}: {line}")
    else:
        ok = os.path.exists(opt_file) and same(np.load(opt_file), opt_out)
        print(f"{case} opt_out: {'exact' if ok else 'MISMATCH'}")
