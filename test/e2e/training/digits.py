#!/usr/bin/env python3
"""Trains an MLP on scikit-learn's handwritten digits with kiln-train on emu.

The UCI digits ship with scikit-learn (1,797 8x8 images, no download). A
seeded 80/20 split; the model is an ONNX MLP (Gemm 64->64, Relu, Gemm
64->10) with seeded He initialisation, trained by `kilnc --train
--loss=cross_entropy` (autodiff + kiln-optimizer, Adam) and `kiln-train` for
15 epochs of batch 32. Checks:

- the held-out accuracy kiln-train reports after the last epoch is at least
  97% (the issue's bar; this seed reaches ~98.6%);
- `kiln-train --export` writes the trained weights into a copy of the ONNX
  model, which passes onnx.checker, and onnxruntime's accuracy on the same
  held-out set equals kiln-train's within one sample (the two compute the
  logits in fp32 in different orders, so a near-tie may flip);
- the export really holds new weights (the untrained model is at chance);
- with `--precision bf16 --against fp32/accuracy.txt` (mixed precision:
  fp32 master weights, bf16 matmul operands), the accuracy is within 0.5
  points of the fp32 run's (the issue's bar), and onnxruntime's on the
  export within 0.5 points of kiln-train's (kiln evaluates in bf16).

The compile uses --fuse=false: the fused 'matmul+log_softmax' row kernel
recomputes each row's logits in every thread, which the emulator runs ~25x
slower (a known cost of today's generic row kernels, not of training; the
fused path is covered by optimizer-steps.test). About 60 s of CPU.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--precision", default="fp32",
                   help="kilnc --precision for the training artifact")
    p.add_argument("--against",
                   help="accuracy.txt of an fp32 run: must be within 0.5 "
                        "points of it (mixed precision)")
    a = p.parse_args()
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from sklearn.datasets import load_digits

    os.makedirs(a.work, exist_ok=True)
    w = lambda name: os.path.join(a.work, name)
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    r = np.random.default_rng(0)
    idx = r.permutation(len(x))
    ntest = len(x) // 5
    te, tr = idx[:ntest], idx[ntest:]
    for name, arr in [("xtr", x[tr]), ("ytr", y[tr]), ("xte", x[te]), ("yte", y[te])]:
        np.save(w(name + ".npy"), arr)
    H = 64
    W1 = (r.standard_normal((64, H)) * np.sqrt(2 / 64)).astype(np.float32)
    W2 = (r.standard_normal((H, 10)) * np.sqrt(1 / H)).astype(np.float32)
    inits = [numpy_helper.from_array(W1, "fc1.weight"),
             numpy_helper.from_array(np.zeros(H, np.float32), "fc1.bias"),
             numpy_helper.from_array(W2, "fc2.weight"),
             numpy_helper.from_array(np.zeros(10, np.float32), "fc2.bias")]
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"]),
             helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["logits"])]
    g = helper.make_graph(
        nodes, "digits_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), w("mlp.onnx"))

    subprocess.run([a.kilnc, w("mlp.onnx"), "--shape", "x=32x64", "--train",
                    "--loss=cross_entropy", "--labels=y:32:int64",
                    "--optimizer=adam:lr=0.005", "--fuse=false",
                    "--precision=" + a.precision,
                    "-o", w("mlp.train.kiln")], check=True)
    run = subprocess.run([a.kiln_train, w("mlp.train.kiln"), "--data", w("xtr.npy"),
                          "--labels", w("ytr.npy"), "--val-data", w("xte.npy"),
                          "--val-labels", w("yte.npy"), "--epochs", str(a.epochs),
                          "--seed", "1", "--device", "emu", "--checkpoint-dir", w("ck"),
                          "--export", w("trained.onnx")],
                         check=True, capture_output=True, text=True)
    print(run.stdout, end="")
    accs = re.findall(r"val_accuracy ([0-9.]+)", run.stdout)
    kiln_acc = float(accs[-1])
    model = onnx.load(w("trained.onnx"))
    onnx.checker.check_model(model)
    xte, yte = np.load(w("xte.npy")), np.load(w("yte.npy"))
    ort_acc = (numerics.ort_session(w("trained.onnx")).run(None, {"x": xte})[0]
               .argmax(1) == yte).mean()
    untrained = (numerics.ort_session(w("mlp.onnx")).run(None, {"x": xte})[0]
                 .argmax(1) == yte).mean()
    print(f"digits: {len(tr)} train, {ntest} held out; kiln-train accuracy "
          f"{kiln_acc:.4f}, onnxruntime on the export {ort_acc:.4f}, "
          f"untrained {untrained:.4f}")
    # kiln-train evaluates in the artifact's precision, onnxruntime in fp32:
    # in bf16 the rounded logits may flip a few near-ties (0.5 points).
    export_bound = 1.0 / ntest if a.precision == "fp32" else 0.005
    ok = kiln_acc >= 0.97 and abs(ort_acc - kiln_acc) <= export_bound + 1e-9 \
        and untrained < 0.5
    with open(w("accuracy.txt"), "w") as f:
        f.write(f"{kiln_acc}\n")
    if a.against:
        ref = float(open(a.against).read())
        within = abs(kiln_acc - ref) <= 0.005 + 1e-9
        print(f"digits: {a.precision} accuracy {kiln_acc:.4f}, fp32 {ref:.4f}: "
              f"{'within' if within else 'NOT within'} 0.5 points")
        ok = ok and within
    print("digits: PASS" if ok else "digits: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
