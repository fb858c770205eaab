#!/usr/bin/env python3
"""Light models quantized by onnxruntime's own tools, run on emu (issue 26).

Usage: quantized_zoo.py MODEL WORKDIR [--formats qdq,qoperator,kiln]
                        [--kilnc K] [--kiln-run R] [--seed 0]
                        [--calibration 8] [--eval 2] [--kilnc-arg F]

MODEL is a light model (light_zoo.py prepares it: seeded He-scaled weights,
the final Softmax cut off, every layer calibrated to an RMS of 1 on the
seeded input). Then, per FORMAT:

  1. onnxruntime.quantization.quantize_static (1.20.1, pinned) quantizes
     the prepared fp32 model with a seeded calibration set (CALIBRATION
     batches of N(0, 1) inputs, MinMax) in QDQ or QOperator format: int8
     activations and weights, per-tensor (onnxruntime's defaults);
  2. onnxruntime (graph optimizations off: numerics.ort_session) runs the
     fp32 model and the quantized one on EVAL seeded inputs that are not in
     the calibration set;
  3. kilnc compiles the quantized model (no --precision: the quantized ops
     say what they compute) and kiln-run --device emu runs it on the same
     inputs.

FORMAT `kiln` is Kiln's own post-training quantization instead: kilnc
--precision=int8 --calibrate on the fp32 model with the same calibration
inputs (MinMax; per-channel weights, uint8 after a Relu), checked against
onnxruntime's QDQ int8 run as the others are.

One line per format, side by side:

  <model> <format>: ort-int8 rel-l2 E_ort top-1 T_ort/EVAL | kiln-int8
      rel-l2 E_kiln top-1 T_kiln/EVAL | worst element R | emu S s ok|FAIL

rel-l2 is ||int8 - fp32|| / ||fp32|| over every eval input's logits, top-1
how many eval inputs keep the fp32 model's class. The run fails unless
Kiln's error is no worse than onnxruntime's own int8 run, in norm
(E_kiln <= 1.25 E_ort) and element by element (every |kiln - fp32| <= 1.5
times the largest |ort - fp32| plus one output quantization step): Kiln's
float sums run in another order than onnxruntime's, so a value that lands
near a rounding tie of a QuantizeLinear may go to the other integer, one
step of that layer's scale, and such flips propagate; they must stay
rare enough not to move the norm by more than a quarter.
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import light_zoo  # noqa: E402
from light_zoo import numerics  # noqa: E402

NORM_MARGIN = 1.25
ELEMENT_MARGIN = 1.5


def seeded_inputs(feeds, count, seed):
    rng = np.random.default_rng(seed)
    return [{k: rng.standard_normal(v.shape).astype(np.float32)
             for k, v in feeds.items()} for _ in range(count)]


def quantize(path, out, fmt, calibration):
    from onnxruntime import quantization as q

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.items = iter(calibration)

        def get_next(self):
            return next(self.items, None)

    q.quantize_static(
        path, out, Reader(),
        quant_format=q.QuantFormat.QDQ if fmt == "qdq"
        else q.QuantFormat.QOperator,
        activation_type=q.QuantType.QInt8, weight_type=q.QuantType.QInt8,
        calibrate_method=q.CalibrationMethod.MinMax)


def run_kiln(args, model, work, evals, name, extra=()):
    artifact = os.path.join(work, "model.kiln")
    compiled = subprocess.run([args.kilnc, model, "-o", artifact, "--stats"]
                              + list(extra) + args.kilnc_arg,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return None, ("kilnc failed: " +
                      (compiled.stderr.strip().splitlines() or ["?"])[0])
    outs = []
    start = time.monotonic()
    for e, feeds in enumerate(evals):
        command = [args.kiln_run, artifact, "--device", "emu", "-o",
                   os.path.join(work, f"out{e}")]
        for i, (input_name, data) in enumerate(feeds.items()):
            file = os.path.join(work, f"input{e}-{i}.npy")
            np.save(file, data)
            command += ["-i", f"{input_name}={file}"]
        ran = subprocess.run(command, capture_output=True, text=True)
        if ran.returncode != 0:
            return None, ("kiln-run failed: " +
                          (ran.stderr.strip().splitlines() or ["?"])[0])
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
        outs.append(np.load(os.path.join(work, f"out{e}", safe + ".npy")))
    return (outs, time.monotonic() - start), None


def figures(got, want):
    g = np.concatenate([x.reshape(-1) for x in got]).astype(np.float64)
    w = np.concatenate([x.reshape(-1) for x in want]).astype(np.float64)
    top = sum(int(np.argmax(a)) == int(np.argmax(b)) for a, b in zip(got, want))
    return numerics.rel_l2(g, w), top, np.abs(g - w)


def output_step(model_path, name):
    """The scale of the QuantizeLinear (or QLinear op) that produces the
    logits' int8 value, i.e. one step of the output; 0 when none."""
    model = onnx.load(model_path)
    inits = {t.name: onnx.numpy_helper.to_array(t)
             for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    node = producer.get(name)
    while node is not None and node.op_type == "DequantizeLinear":
        scale = inits.get(node.input[1])
        return float(np.max(scale)) if scale is not None else 0.0
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("workdir")
    ap.add_argument("--formats", default="qdq,qoperator")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibration", type=int, default=8)
    ap.add_argument("--eval", type=int, default=2)
    ap.add_argument("--kilnc-arg", action="append", default=[])
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    path, feeds, _ = light_zoo.prepare(args)
    calibration = seeded_inputs(feeds, args.calibration, args.seed + 100)
    evals = seeded_inputs(feeds, args.eval, args.seed + 200)
    fp32 = numerics.ort_session(path)
    name = fp32.get_outputs()[0].name
    reference = [fp32.run([name], f)[0] for f in evals]
    failures = 0
    for fmt in args.formats.split(","):
        work = os.path.join(args.workdir, fmt)
        os.makedirs(work, exist_ok=True)
        qpath = os.path.join(work, "quantized.onnx")
        # "kiln": Kiln's own calibration (kilnc --precision=int8
        # --calibrate) of the fp32 model on the same calibration inputs,
        # against onnxruntime's QDQ int8 run.
        quantize(path, qpath, "qdq" if fmt == "kiln" else fmt, calibration)
        ort = numerics.ort_session(qpath)
        ort_out = [ort.run([name], f)[0] for f in evals]
        e_ort, top_ort, d_ort = figures(ort_out, reference)
        line = (f"{args.model} {fmt}: ort-int8 rel-l2 {e_ort:.4g} top-1 "
                f"{top_ort}/{len(evals)}")
        extra, compiled_model = [], qpath
        if fmt == "kiln":
            for input_name in feeds:
                file = os.path.join(work, f"calibration-{len(extra)}.npy")
                np.save(file, np.concatenate([c[input_name] for c in calibration]))
                extra.append(f"--calibrate={input_name}={file}")
            extra += ["--precision=int8",
                      f"--save-quantized={os.path.join(work, 'kiln-qdq.onnx')}"]
            compiled_model = path
            qpath = os.path.join(work, "kiln-qdq.onnx")
        result, error = run_kiln(args, compiled_model, work, evals, name, extra)
        if error:
            print(f"{line} | kiln {error} FAIL", flush=True)
            failures += 1
            continue
        outs, seconds = result
        corrupt = os.environ.get("KILN_TEST_CORRUPT")
        if corrupt:
            # Teeth (docs/testing.md): one logit moved by D rms.
            flat = outs[0].reshape(-1).astype(np.float64)
            flat[flat.size // 2] += float(corrupt) * math.sqrt(
                float(np.mean(flat ** 2)))
            outs[0] = flat.reshape(outs[0].shape).astype(outs[0].dtype)
        e_kiln, top_kiln, d_kiln = figures(outs, reference)
        step = output_step(qpath, name)
        bound = ELEMENT_MARGIN * float(np.max(d_ort)) + step
        worst = float(np.max(d_kiln)) / bound if bound > 0 else math.inf
        ok = e_kiln <= NORM_MARGIN * e_ort and worst <= 1.0
        print(f"{line} | kiln-int8 rel-l2 {e_kiln:.4g} top-1 "
              f"{top_kiln}/{len(evals)} | worst element {worst:.3f} of its "
              f"bound | emu {seconds:.1f} s {'ok' if ok else 'FAIL'}",
              flush=True)
        failures += not ok
    print(f"{args.model}: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
