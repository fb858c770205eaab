#!/usr/bin/env python3
"""int8 vs bf16 ResNet-50 at batch 32 under the emulator's performance model.

Usage: int8-resnet50-estimate.py WORKDIR [--build build]

Builds the model docs/benchmarks.md "int8 ResNet-50" uses: the onnx
package's light ResNet-50 with seeded weights (randomize_weights.py --seed 0
--gain sqrt(2)), at batch 32 (rebatch.py), run through onnxruntime's
quant_pre_process (BatchNormalization folded into the convolutions) and
quantize_static (QDQ, per-channel s8 weights, u8 activations, two
calibration batches of np.random.default_rng(0) normals). Then, side by
side with the same binaries: kilnc (KILN_KERNEL_CACHE=off) for the int8
model (wgmma_s8, sm_90's default), the int8 model with --wgmma=false
(mma_s8) and the preprocessed fp32 model with --precision=bf16, and
`kiln-run --device emu --random-inputs --profile --profile-sample 8` on
each. Prints one line per model: launches, the estimated total, the
contraction kernels' share and the rest, and the ratio to bf16. These are
emulator-model estimates for an H200, not GPU measurements. About two
minutes here.
"""
import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np
import onnx

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def build(work):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat,
                                          QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test",
                         "data", "light", "light_resnet50.onnx")
    randomized = os.path.join(work, "randomized.onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "device",
                                                 "randomize_weights.py"),
                    light, randomized, "--seed", "0", "--gain",
                    str(math.sqrt(2))], check=True, capture_output=True)
    b32 = os.path.join(work, "r50b32.onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "rebatch.py"),
                    randomized, b32, "32"], check=True)
    pre = os.path.join(work, "r50b32.pre.onnx")
    quant_pre_process(b32, pre)
    name = onnx.load(pre).graph.input[0].name

    class Batches(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.batches = iter([{name: rng.standard_normal(
                (32, 3, 224, 224)).astype(np.float32)} for _ in range(2)])

        def get_next(self):
            return next(self.batches, None)

    qdq = os.path.join(work, "r50b32.qdq.onnx")
    quantize_static(pre, qdq, Batches(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    return pre, qdq


def estimate(args, name, model, flags):
    """(launches, total us, contractions us, rest us, residual blocks)."""
    artifact = os.path.join(args.workdir, name + ".kiln")
    env = dict(os.environ, KILN_KERNEL_CACHE="off")
    compiled = subprocess.run([os.path.join(args.build, "bin", "kilnc"), model,
                               "-o", artifact, "--stats"] + flags, env=env,
                              capture_output=True, text=True, check=True)
    residuals = len(re.findall(r"; \+ residual ", compiled.stdout))
    ran = subprocess.run([os.path.join(args.build, "bin", "kiln-run"), artifact,
                          "--device", "emu", "--random-inputs", "--profile",
                          "--profile-sample", "8"],
                         capture_output=True, text=True, check=True)
    launches = total = contractions = rest = 0.0
    for line in ran.stdout.splitlines():
        fields = line.split()
        if len(fields) < 4 or not re.fullmatch(r"[a-z_0-9]+\*?", fields[0]):
            continue
        if not fields[1].isdigit():
            continue
        # A kernel's row ends in "est-us bound meas-us", the total's in
        # "est-us meas-us".
        if fields[0] in ("total*", "total"):
            launches, total = int(fields[1]), float(fields[-2])
            continue
        us = float(fields[-3])
        if re.match(r"kiln_(q?gemm|q?conv)", fields[0]):
            contractions += us
        else:
            rest += us
    return int(launches), total, contractions, rest, residuals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    pre, qdq = build(args.workdir)
    rows = [("int8 wgmma_s8", qdq, []),
            ("int8 mma_s8", qdq, ["--wgmma=false"]),
            ("bf16", pre, ["--precision=bf16"])]
    results = [(name,) + estimate(args, name.replace(" ", "-"), model, flags)
               for name, model, flags in rows]
    bf16 = results[-1][2]
    for name, launches, total, contractions, rest, residuals in results:
        print(f"{name}: {launches} launches, est. {total:.2f} us (emu model), "
              f"contractions {contractions:.1f} us, the rest {rest:.1f} us, "
              f"{residuals} residual blocks in epilogues, "
              f"{bf16 / total:.2f}x bf16's speed")


if __name__ == "__main__":
    main()
