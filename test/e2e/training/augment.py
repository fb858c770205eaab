#!/usr/bin/env python3
"""kilnc --augment on emu against a numpy reference of the same decisions.

The model is y = x * Wt (Wt an initializer of x's shape, all ones) with an
MSE loss against zeros, compiled with kilnc --gradients --augment=SPEC: the
gradient of Wt is 2 * a^2 / numel, where a is the augmented batch, so the
artifact shows a exactly where the reference can check it. The reference
draws the per-sample decisions with philox_ref.py (streams 2^31, 2^31 + 1,
2^31 + 2 of kiln-augment, Passes.td), crops from a zero-padded copy, flips
and normalises in float64. Bound: relative 1e-5 per element (f32 rounding
of x, of the normalisation and of 2 a^2 / numel, a few ulp; a wrong crop
offset or flip moves whole rows and fails by orders of magnitude). Two
counters (steps) must draw different decisions.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from philox_ref import element_bits  # noqa: E402

N, C, H, W = 4, 2, 5, 6
PAD = 2
MEAN, STD = [0.5, 1.0], [2.0, 4.0]
SPEC = "crop:2,flip,normalize:0.5,1.0/2.0,4.0"
STREAM = 2**31


def signed_words(n, key, counter, stream):
    bits = element_bits((n,), key, counter, stream).astype(np.uint32)
    return bits.view(np.int32).astype(np.int64)


def reference(x, key, counter, nhwc=False):
    if nhwc:
        x = x.transpose(0, 3, 1, 2)
    dy = signed_words(N, key, counter, STREAM) % (2 * PAD + 1)
    dx = signed_words(N, key, counter, STREAM + 1) % (2 * PAD + 1)
    flip = signed_words(N, key, counter, STREAM + 2) < 0
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))
    out = np.stack([xp[n, :, dy[n]:dy[n] + H, dx[n]:dx[n] + W] for n in range(N)])
    out = np.stack([o[:, :, ::-1] if f else o for o, f in zip(out, flip)])
    out = (out - np.array(MEAN)[None, :, None, None]) / np.array(STD)[None, :, None, None]
    if nhwc:
        out = out.transpose(0, 2, 3, 1)
    return out, (dy.tolist(), dx.tolist(), flip.astype(int).tolist())


def build_model(path, shape):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "Wt"], ["y"])], "augment",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
        [numpy_helper.from_array(np.ones(shape, np.float32), "Wt")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(11)
    failures = 0
    for layout in ("nchw", "nhwc"):
        shape = (N, C, H, W) if layout == "nchw" else (N, H, W, C)
        d = os.path.join(args.work, layout)
        os.makedirs(d, exist_ok=True)
        model = os.path.join(d, "model.onnx")
        build_model(model, shape)
        art = os.path.join(d, "augment.kiln")
        dims = "x".join(str(v) for v in shape)
        run([args.kilnc, model, "--gradients", "--loss=mse",
             f"--labels=t:{dims}:float32", f"--augment={SPEC},layout:{layout}",
             "-o", art])
        x = rng.uniform(1, 2, shape).astype(np.float32)
        decisions = []
        for step in (3, 4):
            key, counter = [0x5eed, 0], [0, 0, step, 0]
            feeds = {"x": x, "t": np.zeros(shape, np.float32),
                     "rng.key": np.array(key, np.int32),
                     "rng.counter": np.array(counter, np.int32)}
            out = os.path.join(d, f"step{step}")
            os.makedirs(out, exist_ok=True)
            cmd = [args.kiln_run, art, "--device", "emu", "-o", out]
            for name, value in feeds.items():
                np.save(os.path.join(out, name + ".npy"), value)
                cmd += ["-i", f"{name}={os.path.join(out, name + '.npy')}"]
            run(cmd)
            grad = np.load(os.path.join(out, "grad.Wt.npy")).astype(np.float64)
            ref, decided = reference(x, key, counter, nhwc=layout == "nhwc")
            decisions.append(decided)
            want = 2 * ref**2 / ref.size
            # Each element within 1e-5 of itself (scripts/numerics.py).
            result = numerics.compare(
                grad, want, numerics.Tolerance.elementwise(1e-5, 0.0))
            err, ok = result.worst_ratio * 1e-5, result.ok
            failures += not ok
            print(f"{layout} step {step}: crop rows {decided[0]} cols {decided[1]} "
                  f"flip {decided[2]}: relative error {err:.1e} {'ok' if ok else 'MISMATCH'}")
        differ = decisions[0] != decisions[1]
        failures += not differ
        print(f"{layout}: the two steps draw {'different' if differ else 'THE SAME'} decisions")
    print(f"augment: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
