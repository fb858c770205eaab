#!/usr/bin/env python3
"""Transformer layers whose attention runs on the fused attention kernel.

Usage: attention_models.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                           [--only NAME,...] [--wgmma true|false]

The encoder layer the other tests use (hidden 256, 4 heads, seq 128:
test/Frontend/ONNX/models/make_encoder.py) and a BERT-base-sized layer
(hidden 768, 12 heads of 64, FFN 3072, seq 128), each compiled in fp32 and
bf16, run on emu and compared with onnxruntime fp32 on the same input ids.
kilnc --stats must show the attention region on one kiln_attn_ kernel (no
generic kernel for it). On kilnc's default sm_90 target bf16 runs the
wgmma attention kernel; --wgmma true|false compiles bf16 only, with kilnc
--wgmma=true|false, and fails a model whose attention kernel is not the
wgmma (true) or mma.sync (false) one. One line per model and precision:

  <model> <precision>: <kernel config> rel-err <e> (bound <b>), worst
                       element <r> of its bound ... ok|FAIL

Bounds on the relative error of the output norm (the project's model
bounds): fp32 1e-4, bf16 2e-2, with the per-element bounds that go with
them (scripts/numerics.py).
"""
import argparse
import os
import subprocess
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fused_index_arithmetic import (  # noqa: E402
    compile_with_stats, contraction_report, emu_compare, prepare)

MAKE_ENCODER = os.path.join(HERE, "..", "..", "Frontend", "ONNX", "models",
                            "make_encoder.py")
MODELS = {
    "encoder": [],
    "bert-base": ["--hidden", "768", "--heads", "12", "--ffn", "3072"],
}
PRECISIONS = [("fp32", [], 1e-4), ("bf16", ["--precision=bf16"], 2e-2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    ap.add_argument("--wgmma", choices=["true", "false"])
    args = ap.parse_args()
    family = {"true": "attn_wgmma_f16", "false": "attn_mma_f16"}.get(args.wgmma)
    names = args.only.split(",") if args.only else list(MODELS)
    os.makedirs(args.workdir, exist_ok=True)
    failed = runs = 0
    for name in names:
        source = os.path.join(args.workdir, name + "-src.onnx")
        subprocess.run([sys.executable, MAKE_ENCODER, source] + MODELS[name],
                       check=True)
        path, feeds, reference = prepare(args.workdir, name, onnx.load(source))
        for precision, flags, bound in PRECISIONS:
            if args.wgmma and precision != "bf16":
                continue
            if args.wgmma:
                flags = flags + [f"--wgmma={args.wgmma}"]
            runs += 1
            work = os.path.join(args.workdir, name, precision)
            os.makedirs(work, exist_ok=True)
            artifact = os.path.join(work, "m.kiln")
            stats, error = compile_with_stats(args.kilnc, path, artifact, flags)
            report = contraction_report(stats) if stats else []
            attention = [line.split(": ", 1)[1].split(",")[0] for line in report
                         if line.startswith("kiln_attn_")]
            if not error and (len(attention) != 1 or any(
                    "softmax" in line or "attention split" in line
                    for line in report)):
                error = f"attention not on one fused kernel: {report}"
            if not error and family and not attention[0].startswith(family + " "):
                error = f"{attention[0]} is not {family}"
            result = None
            if not error:
                result, error = emu_compare(args.kiln_run, artifact, work,
                                            feeds, reference, bound)
            if error:
                print(f"{name} {precision}: {error} FAIL")
                failed += 1
                continue
            failed += not result.ok
            print(f"{name} {precision}: {attention[0]} {result.figures()} "
                  f"{'ok' if result.ok else 'FAIL'}")
    print(f"{runs} runs, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
