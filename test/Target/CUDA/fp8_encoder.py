#!/usr/bin/env python3
"""kilnc --precision=fp8 on the encoder, on emu (issue 26).

Usage: fp8_encoder.py WORKDIR [--kilnc K] [--kiln-run R] [--seed 0]
                      [--eval 2]

Builds the BERT-style encoder layer of test/Frontend/ONNX/models/
make_encoder.py (hidden 64, 2 heads, FFN 128, 16 tokens, seeded weights),
raises it to opset 19 (float8 QuantizeLinear) with onnx's version
converter, and compiles it with Kiln's own fp8 post-training quantization
for sm_90: `kilnc --precision=fp8 --calibrate calib.npy --target=sm_90
--save-quantized` over 8 seeded token sequences. Every MatMul with a
constant weight must run on the fp8 wgmma kernel (--stats: one wgmma_f8
line each).

On EVAL other seeded sequences the hidden states are compared with two
independent references, element by element:
  - onnxruntime (graph optimizations off) running the very QDQ model Kiln
    compiled (--save-quantized): the same quantization, so the two may
    differ only by f32 summation order and the rare e4m3 rounding flip
    that order causes in a requantized activation; bound: every element
    within 1e-3 of the output's largest magnitude (an e4m3 step of one
    activation moves an output by ~2^-4 of that activation's share, far
    below it only where it flips);
  - the fp32 model (onnxruntime): Kiln's relative L2 error within 1.25x
    onnxruntime's fp8 run's, every element within 1.5x onnxruntime's
    largest deviation (quantized_zoo.py's rule), and the relative L2
    error below 2^-4 (e4m3 keeps 3 mantissa bits: a relative step of
    2^-4 per rounded value; errors of independent roundings partly cancel
    over a 64-term dot product, so the whole layer stays below one step).
One line:

  encoder fp8: N wgmma_f8 kernels | vs ort-fp8: worst element R of its
      bound | fp32: ort-fp8 rel-l2 E, kiln-fp8 rel-l2 E, worst element R
      of its bound | emu S s ok|FAIL

KILN_TEST_CORRUPT=X moves one output element by X times the output's rms
(the checks' teeth).
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
SAME_MODEL_BOUND = 1e-3
FP8_STEP = 2.0 ** -4


def fail(message):
    print("encoder fp8: " + message + " FAIL")
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    import onnx
    from onnx import version_converter

    fp32 = os.path.join(args.workdir, "encoder.onnx")
    subprocess.run([sys.executable, os.path.join(
        ROOT, "test", "Frontend", "ONNX", "models", "make_encoder.py"), fp32,
        "--hidden", "64", "--heads", "2", "--ffn", "128", "--seq", "16",
        "--vocab", "100"], check=True)
    opset19 = os.path.join(args.workdir, "encoder-19.onnx")
    onnx.save(version_converter.convert_version(onnx.load(fp32), 19), opset19)

    rng = np.random.default_rng(args.seed + 1)
    calib = os.path.join(args.workdir, "calib.npy")
    np.save(calib, rng.integers(0, 100, (8, 16)).astype(np.int64))
    artifact = os.path.join(args.workdir, "encoder-fp8.kiln")
    saved = os.path.join(args.workdir, "encoder-fp8.onnx")
    compiled = subprocess.run(
        [args.kilnc, opset19, "--precision=fp8", "--calibrate", calib,
         "--target=sm_90", "--save-quantized", saved, "--stats", "-o",
         artifact], capture_output=True, text=True)
    if compiled.returncode != 0:
        return fail("kilnc failed: " +
                    (compiled.stderr.strip().splitlines() or ["?"])[0])
    kernels = [l for l in compiled.stdout.splitlines()
               if "kiln_f8gemm_" in l and ": wgmma_f8 " in l]
    matmuls = sum(1 for n in onnx.load(fp32).graph.node
                  if n.op_type == "MatMul")
    if len(kernels) != matmuls:
        return fail(f"{len(kernels)} wgmma_f8 kernels for {matmuls} MatMuls")

    reference = numerics.ort_session(opset19)
    ort = numerics.ort_session(saved)
    name = reference.get_outputs()[0].name
    input_name = reference.get_inputs()[0].name
    rng = np.random.default_rng(args.seed + 300)
    evals = [rng.integers(0, 100, (1, 16)).astype(np.int64)
             for _ in range(args.eval)]
    want = [reference.run([name], {input_name: e})[0] for e in evals]
    ort_out = [ort.run([name], {input_name: e})[0] for e in evals]

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
            return fail("kiln-run failed: " +
                        (ran.stderr.strip().splitlines() or ["?"])[0])
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
    w, o, k = flat(want), flat(ort_out), flat(got)
    same_bound = SAME_MODEL_BOUND * float(np.max(np.abs(o)))
    same_worst = float(np.max(np.abs(k - o))) / same_bound
    e_ort = numerics.rel_l2(o, w)
    e_kiln = numerics.rel_l2(k, w)
    bound = ELEMENT_MARGIN * float(np.max(np.abs(o - w)))
    worst = float(np.max(np.abs(k - w))) / bound
    ok = (same_worst <= 1.0 and e_kiln <= NORM_MARGIN * e_ort and
          worst <= 1.0 and e_kiln <= FP8_STEP)
    print(f"encoder fp8: {len(kernels)} wgmma_f8 kernels | vs ort-fp8: worst "
          f"element {same_worst:.3f} of its bound | fp32: ort-fp8 rel-l2 "
          f"{e_ort:.4g}, kiln-fp8 rel-l2 {e_kiln:.4g}, worst element "
          f"{worst:.3f} of its bound | emu {seconds:.1f} s "
          f"{'ok' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
