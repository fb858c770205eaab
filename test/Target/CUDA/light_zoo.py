#!/usr/bin/env python3
"""The onnx package's light models on emu, in every precision, against
onnxruntime (issue 22).

Usage: light_zoo.py MODEL WORKDIR [--precisions fp32,tf32,bf16,fp16]
                    [--kilnc K] [--kiln-run R] [--seed 0] [--kilnc-arg F]

MODEL is a light model's name (squeezenet, shufflenet, bvlc_alexnet,
zfnet512, inception_v1, inception_v2, densenet121, resnet50, vgg19: the
files onnx/backend/test/data/light/light_<MODEL>.onnx). The light models
carry constant weights (ConstantOfShape), which would hide indexing bugs,
so the model is prepared first (WORKDIR/prepared.onnx, reused by later
runs with the same seed):

  1. scripts/device/randomize_weights.py --gain sqrt(2): seeded He-scaled
     random weights;
  2. the final Softmax is cut off and the logits are the output. With
     random weights the softmax saturates to a one-hot vector that equals
     onnxruntime's whatever the kernels did (relative error 0.0 on
     ResNet-50 and ShuffleNet, measured); logits carry every error;
  3. activations are kept in range on the seeded input (batch 1, N(0, 1)):
     in topological order, every BatchNormalization's mean and variance
     are set to its input's per-channel statistics, and every Conv, Gemm
     or MatMul's weights and bias are scaled so its output has an RMS of 1
     (onnxruntime computes each layer's input after the layers before it
     are set). The logits then have an RMS of 1, no activation comes near
     fp16's range (the largest is printed), and the classes are not
     decided by one dominating value.

Then, per precision: kilnc --precision=P, kiln-run --device emu on the
seeded input, onnxruntime (graph optimizations off) on the same input, and
scripts/numerics.py's comparison of the logits: the norm bound of P for a
network of amplification k, B = max(B_P, u_P k) (B_P: fp32 1e-4, tf32 and
fp16 5e-3, bf16 2e-2; u_P the unit roundoff; k, measured once per model
with onnxruntime by multiplying every Conv/Gemm weight by 1 + 1e-3 N(0, 1)
(numerics.amplification, the worst of two draws), is printed), and each
element within 6 B rms + B |want|. One line per precision:

  <model> <P>: rel-err E (bound B), worst element R of its bound ...,
      top-1 same|DIFFERENT (gap G = g x its bound), kernels K, emu S s ok|FAIL

The top-1 class is reported, not checked: when the gap between the two
largest logits exceeds the sum of their per-element bounds (g > 1) the
element check already implies it; below, a near-tie may flip
legitimately. The run fails when a precision fails its comparison, a tool
fails, or the logits prove nothing (their spread, std / rms, below 0.1).
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import numerics  # noqa: E402

PRECISIONS = ["fp32", "tf32", "bf16", "fp16"]
CONTRACTIONS = ("Conv", "Gemm", "MatMul")


def light_path(name):
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test",
                        "data", "light", f"light_{name}.onnx")


def cut_softmax(model):
    """Makes the final Softmax's input the graph output (the logits)."""
    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    output = graph.output[0].name
    node = producer.get(output)
    if node is None or node.op_type != "Softmax":
        return output
    graph.node.remove(node)
    logits = node.input[0]
    del graph.output[:]
    graph.output.append(onnx.helper.make_tensor_value_info(
        logits, onnx.TensorProto.FLOAT, None))
    return logits


def calibrate(model, feeds):
    """Sets BatchNormalization statistics and scales contraction weights
    in topological order (module docstring, step 3). Returns the largest
    |value| seen at a calibrated tensor."""
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer
             if t.data_type == onnx.TensorProto.FLOAT}
    targets = [n for n in graph.node
               if (n.op_type in CONTRACTIONS and len(n.input) > 1
                   and n.input[1] in inits) or n.op_type == "BatchNormalization"]
    tunable = sorted({name for n in targets for name in n.input[1:]
                      if name in inits})
    # A copy of the model whose tunable weights are graph inputs and whose
    # calibrated tensors are outputs: one session, fed the current values.
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    kept = [t for t in probe.graph.initializer if t.name not in tunable]
    del probe.graph.initializer[:]
    probe.graph.initializer.extend(kept)
    names = {i.name for i in probe.graph.input}
    for name in tunable:
        if name not in names:
            probe.graph.input.append(onnx.helper.make_tensor_value_info(
                name, onnx.TensorProto.FLOAT, list(inits[name].shape)))
    watched = []
    for n in targets:
        watched.append(n.input[0] if n.op_type == "BatchNormalization"
                       else n.output[0])
    del probe.graph.output[:]
    for name in dict.fromkeys(watched):
        probe.graph.output.append(onnx.helper.make_tensor_value_info(
            name, onnx.TensorProto.FLOAT, None))
    session = numerics.ort_session(probe)
    largest = 0.0
    for node, name in zip(targets, watched):
        value = session.run([name], {**feeds, **{k: inits[k] for k in tunable}})[0]
        value = value.astype(np.float64)
        largest = max(largest, float(np.max(np.abs(value))))
        if node.op_type == "BatchNormalization":
            axes = (0,) + tuple(range(2, value.ndim))
            mean = value.mean(axis=axes)
            var = np.maximum(value.var(axis=axes), 1e-3)
            inits[node.input[3]] = mean.astype(np.float32)
            inits[node.input[4]] = var.astype(np.float32)
        else:
            rms = math.sqrt(float(np.mean(value ** 2)))
            if rms > 0:
                for weight in node.input[1:3]:
                    if weight in inits:
                        inits[weight] = (inits[weight] / rms).astype(np.float32)
    for t in graph.initializer:
        if t.name in tunable:
            t.CopyFrom(numpy_helper.from_array(inits[t.name], t.name))
    return largest


def prepare(args):
    path = os.path.join(args.workdir, f"prepared-{args.seed}.onnx")
    inputs = os.path.join(args.workdir, f"input-{args.seed}.npz")
    if os.path.exists(path) and os.path.exists(inputs):
        return path, dict(np.load(inputs)), None
    randomized = os.path.join(args.workdir, "randomized.onnx")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "device",
                                                 "randomize_weights.py"),
                    light_path(args.model), randomized, "--seed",
                    str(args.seed), "--gain", str(math.sqrt(2))],
                   check=True, capture_output=True)
    model = onnx.load(randomized)
    cut_softmax(model)
    model = shape_inference.infer_shapes(model)
    initialized = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(args.seed)
    feeds = {}
    for value in model.graph.input:
        if value.name in initialized:
            continue
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    start = time.monotonic()
    largest = calibrate(model, feeds)
    seconds = time.monotonic() - start
    onnx.save(model, path)
    np.savez(inputs, **feeds)
    return path, feeds, (largest, seconds)


def run_precision(args, path, feeds, reference, name, precision, k):
    work = os.path.join(args.workdir, precision)
    os.makedirs(work, exist_ok=True)
    artifact = os.path.join(work, "model.kiln")
    compiled = subprocess.run([args.kilnc, path, "-o", artifact,
                               f"--precision={precision}", "--stats"]
                              + args.kilnc_arg,
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        print(f"{args.model} {precision}: kilnc failed: "
              f"{compiled.stderr.strip().splitlines()[:1]} FAIL")
        return False
    kernels = next((line.split()[1] for line in compiled.stdout.splitlines()
                    if line.startswith("kernels:")), "?")
    command = [args.kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(work, "out")]
    for i, (input_name, data) in enumerate(feeds.items()):
        file = os.path.join(work, f"input{i}.npy")
        np.save(file, data)
        command += ["-i", f"{input_name}={file}"]
    start = time.monotonic()
    ran = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if ran.returncode != 0:
        print(f"{args.model} {precision}: kiln-run failed: "
              f"{ran.stderr.strip().splitlines()[:1]} FAIL")
        return False
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    got = np.load(os.path.join(work, "out", safe + ".npy"))
    result = numerics.compare(got, reference,
                              numerics.tolerance(precision, k), name)
    flat_got, flat_want = got.reshape(-1), reference.reshape(-1)
    top = np.argsort(-flat_want)[:2]
    rms = math.sqrt(float(np.mean(reference.astype(np.float64) ** 2)))
    bounds = [result.tol.atol_rms * rms + result.tol.rtol * abs(float(flat_want[i]))
              for i in top]
    gap = float(flat_want[top[0]] - flat_want[top[1]])
    same = int(np.argmax(flat_got)) == int(top[0])
    print(f"{args.model} {precision}: {result.figures()}, top-1 "
          f"{'same' if same else 'DIFFERENT'} (gap {gap:.3g} = "
          f"{gap / sum(bounds):.2f} x its bound), kernels {kernels}, emu "
          f"{seconds:.1f} s {'ok' if result.ok else 'FAIL'}", flush=True)
    return result.ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("workdir")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kilnc-arg", action="append", default=[],
                    help="extra kilnc flag (repeatable), e.g. --wgmma=false")
    args = ap.parse_args()
    if not os.path.exists(light_path(args.model)):
        sys.exit(f"light_zoo.py: no light model '{args.model}' "
                 f"({light_path(args.model)})")
    os.makedirs(args.workdir, exist_ok=True)
    path, feeds, prepared = prepare(args)
    session = numerics.ort_session(path)
    name = session.get_outputs()[0].name
    reference = session.run([name], feeds)[0]
    spread = float(np.std(reference) / max(np.sqrt(np.mean(
        reference.astype(np.float64) ** 2)), 1e-30))
    k = numerics.amplification(onnx.load(path), feeds, name)
    line = (f"{args.model}: logits '{name}' {list(reference.shape)}, spread "
            f"std/rms {spread:.2f}, amplification k {k:.2f}")
    if prepared:
        line += (f"; calibrated in {prepared[1]:.1f} s, largest calibrated "
                 f"activation {prepared[0]:.3g}")
    print(line, flush=True)
    if spread < 0.1:
        print(f"{args.model}: the logits barely vary (spread {spread:.3f} < "
              "0.1): a comparison would prove nothing FAIL")
        return 1
    failures = 0
    for precision in args.precisions.split(","):
        failures += not run_precision(args, path, feeds, reference, name,
                                      precision, k)
    print(f"{args.model}: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
