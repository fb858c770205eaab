#!/usr/bin/env python3
"""The encoder quantized by onnxruntime's quantize_dynamic, on emu (issue 26).

Usage: quantized_encoder.py WORKDIR [--kilnc K] [--kiln-run R] [--seed 0]
                            [--eval 2]

Builds the BERT-style encoder layer of test/Frontend/ONNX/models/
make_encoder.py (hidden 64, 2 heads, FFN 128, 16 tokens, seeded weights),
quantizes it with onnxruntime.quantization.quantize_dynamic (1.20.1: int8
weights; DynamicQuantizeLinear on each activation, MatMulInteger, the scales
multiplied back in f32), and compares, on EVAL seeded token sequences, the
quantized model's hidden states against the fp32 model's: onnxruntime's own
int8 run (graph optimizations off) and Kiln's on emu, with
quantized_zoo.py's rule (Kiln's relative L2 error within 1.25x
onnxruntime's; every element within 1.5x onnxruntime's largest deviation;
no output quantization step here: the output is float). One line:

  encoder dynamic: ort-int8 rel-l2 E | kiln-int8 rel-l2 E | worst element R
      of its bound | emu S s ok|FAIL
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import numerics  # noqa: E402

NORM_MARGIN = 1.25
ELEMENT_MARGIN = 1.5


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    fp32 = os.path.join(args.workdir, "encoder.onnx")
    quantized = os.path.join(args.workdir, "encoder-int8.onnx")
    subprocess.run([sys.executable, os.path.join(
        ROOT, "test", "Frontend", "ONNX", "models", "make_encoder.py"), fp32,
        "--hidden", "64", "--heads", "2", "--ffn", "128", "--seq", "16",
        "--vocab", "100"], check=True)
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(fp32, quantized, weight_type=QuantType.QInt8)

    reference = numerics.ort_session(fp32)
    ort = numerics.ort_session(quantized)
    name = reference.get_outputs()[0].name
    input_name = reference.get_inputs()[0].name
    rng = np.random.default_rng(args.seed + 300)
    evals = [rng.integers(0, 100, (1, 16)).astype(np.int64)
             for _ in range(args.eval)]
    want = [reference.run([name], {input_name: e})[0] for e in evals]
    ort_out = [ort.run([name], {input_name: e})[0] for e in evals]

    artifact = os.path.join(args.workdir, "encoder-int8.kiln")
    compiled = subprocess.run([args.kilnc, quantized, "-o", artifact],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        print("encoder dynamic: kilnc failed: " +
              (compiled.stderr.strip().splitlines() or ["?"])[0] + " FAIL")
        return 1
    got = []
    start = time.monotonic()
    for i, e in enumerate(evals):
        path = os.path.join(args.workdir, f"ids{i}.npy")
        np.save(path, e)
        out = os.path.join(args.workdir, f"out{i}")
        ran = subprocess.run([args.kiln_run, artifact, "--device", "emu",
                              "-i", f"{input_name}={path}", "-o", out],
                             capture_output=True, text=True)
        if ran.returncode != 0:
            print("encoder dynamic: kiln-run failed: " +
                  (ran.stderr.strip().splitlines() or ["?"])[0] + " FAIL")
            return 1
        got.append(np.load(os.path.join(out, name + ".npy")))
    seconds = time.monotonic() - start
    corrupt = os.environ.get("KILN_TEST_CORRUPT")
    if corrupt:
        flat = got[0].reshape(-1).astype(np.float64)
        flat[flat.size // 2] += float(corrupt) * math.sqrt(
            float(np.mean(flat ** 2)))
        got[0] = flat.reshape(got[0].shape).astype(got[0].dtype)

    def flat(xs):
        return np.concatenate([x.reshape(-1) for x in xs]).astype(np.float64)
    w = flat(want)
    e_ort = numerics.rel_l2(flat(ort_out), w)
    e_kiln = numerics.rel_l2(flat(got), w)
    bound = ELEMENT_MARGIN * float(np.max(np.abs(flat(ort_out) - w)))
    worst = float(np.max(np.abs(flat(got) - w))) / bound
    ok = e_kiln <= NORM_MARGIN * e_ort and worst <= 1.0
    print(f"encoder dynamic: ort-int8 rel-l2 {e_ort:.4g} | kiln-int8 rel-l2 "
          f"{e_kiln:.4g} | worst element {worst:.3f} of its bound | emu "
          f"{seconds:.1f} s {'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
