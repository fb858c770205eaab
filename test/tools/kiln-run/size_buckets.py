#!/usr/bin/env python3
"""Size buckets end to end (kilnc --size-buckets, docs/runtime.md "Size buckets").

A transformer-style FFN, y = relu(x W1) W2 with x [N, 1024], W1 [1024, 4096]
and W2 [4096, 1024] (seeded), is compiled once in bf16 with N = 1..2048 and
buckets cut at 64 and 256 (`--size-buckets=64,256`), and once without
buckets (`--size-buckets=off`). Checked:

- `kilnc --stats` lists three buckets per GEMM (N=1..64, 65..256,
  257..2048) and the kernel of each;
- at N = 1, 64, 65, 256, 257 and 300 the runtime ran exactly the kernels of
  the bucket that holds N (`kiln-run --profile-json`: the launches it
  queued), every other launch skipped; the bucket is recomputed here from
  the cut points, not read from the artifact;
- every output matches a float64 NumPy reference by scripts/numerics.py's
  bf16 rule (the per-element bound of a bf16 matmul chain), at every size.

It prints, per size, the emulator model's estimate of the run with and
without buckets (estimates for an H200, not GPU measurements; the
--profile-sample option keeps ResNet-sized runs short but is not needed at
this size). Exits 1 on a failure.
"""
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import numerics  # noqa: E402

CUTS = [64, 256]
MAX = 2048
SIZES = [1, 64, 65, 256, 257, 300]
HIDDEN, FFN = 1024, 4096


def make_model(path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((HIDDEN, FFN)) / np.sqrt(HIDDEN)).astype(np.float32)
    w2 = (rng.standard_normal((FFN, HIDDEN)) / np.sqrt(FFN)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("MatMul", ["a", "w2"], ["y"])], "ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", HIDDEN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", HIDDEN])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return w1.astype(np.float64), w2.astype(np.float64)


def bucket_of(n):
    lo = 1
    for cut in CUTS + [MAX]:
        if n <= cut:
            return (lo, cut)
        lo = cut + 1
    raise ValueError(n)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-run", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "ffn.onnx")
    w1, w2 = make_model(model)
    failures = 0

    def compile_with(buckets, out):
        return subprocess.run(
            [args.kilnc, model, "--dim", f"N=1..{MAX}", "--precision=bf16",
             f"--size-buckets={buckets}", "--stats", "-o", out],
            check=True, capture_output=True, text=True).stdout

    bucketed = os.path.join(args.work, "buckets.kiln")
    plain = os.path.join(args.work, "plain.kiln")
    stats = compile_with(",".join(map(str, CUTS)), bucketed)
    compile_with("off", plain)
    # size bucket N=1..64: kiln_gemm_1 kiln_gemm_4
    kernels_of = {}
    for lo, hi, names in re.findall(r"size bucket N=(\d+)\.\.(\d+):(.*)", stats):
        kernels_of[(int(lo), int(hi))] = names.split()
        print(f"stats: size bucket N={lo}..{hi}: {len(names.split())} kernels")
    want_buckets = [bucket_of(c) for c in CUTS] + [bucket_of(MAX)]
    if sorted(kernels_of) != want_buckets or any(
            len(k) != 2 for k in kernels_of.values()):
        print(f"FAIL: --stats lists buckets {sorted(kernels_of)}, want "
              f"{want_buckets} with two GEMMs each")
        return 1
    guarded = {k for names in kernels_of.values() for k in names}

    rng = np.random.default_rng(9)
    for n in SIZES:
        x = rng.standard_normal((n, HIDDEN)).astype(np.float32)
        xpath = os.path.join(args.work, f"x{n}.npy")
        np.save(xpath, x)
        estimates = {}
        for name, art in (("buckets", bucketed), ("plain", plain)):
            out = os.path.join(args.work, f"{name}{n}")
            profile = os.path.join(args.work, f"{name}{n}.json")
            subprocess.run([args.kiln_run, art, "--device", "emu", "-i",
                            f"x={xpath}", "-o", out, "--profile-json", profile],
                           check=True, stdout=subprocess.DEVNULL)
            report = json.load(open(profile))
            estimates[name] = sum(l["duration_us"] for l in report["launches"])
            if name == "buckets":
                ran = {l["kernel"] for l in report["launches"]}
                want = set(kernels_of[bucket_of(n)])
                if (ran & guarded) != want:
                    failures += 1
                    print(f"N={n}: FAIL ran {sorted(ran & guarded)}, the bucket "
                          f"{bucket_of(n)} has {sorted(want)}")
            got = np.load(os.path.join(out, "y.npy"))
            ref = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
            result = numerics.compare(got, ref, "bf16", "y")
            if not result.ok:
                failures += 1
            print(f"N={n} {name}: bucket {bucket_of(n)[0]}..{bucket_of(n)[1]}"
                  f" {'ok' if result.ok else 'FAIL'} ({result.figures()})")
        print(f"N={n}: emu-model estimate {estimates['buckets']:.2f} us with "
              f"buckets, {estimates['plain']:.2f} us without "
              f"({estimates['plain'] / estimates['buckets']:.2f}x)")
    print(f"size buckets: {len(SIZES)} sizes, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
