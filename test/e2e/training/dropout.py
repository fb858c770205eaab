#!/usr/bin/env python3
"""Dropout through Philox on emu, against independent references.

1. Known answers: kiln.philox compiled by kilnc and run by kiln-run on emu
   gives the Random123 known-answer vectors for philox4x32_10 (kat_vectors,
   the three philox4x32 10 lines), bit for bit; philox_ref.py (numpy, from
   the paper) gives them too, and then serves as the reference below.
2. Element mapping: a [8, 5] kiln.philox with stream 3 and a [64, 256]
   kiln.dropout_mask (ratio 0.3) equal philox_ref exactly (integers and the
   two values 0 and 1/0.7 in f32: no tolerance).
3. Keep rate: the mask keeps k of n = 16384 elements; |k - n p| must be
   within 5 binomial standard deviations, sqrt(n p (1 - p)) (a fair draw
   fails this with probability below 1e-6).
4. Forward/backward agreement: an ONNX model with two dropouts, compiled
   with kilnc --gradients (rng.key and rng.counter become inputs), against
   central finite differences in float64 of a numpy forward using the same
   masks (philox_ref; the mask is fixed, so the loss is smooth in the
   weights). Bound: max |g - g_fd| / max |g_fd| <= 1e-4 per weight (f32
   rounding of a 50-parameter model is ~1e-6; FD truncation with h = 1e-4
   in float64 is ~1e-8); the loss within 1e-5 relative.
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
from philox_ref import dropout_mask, element_bits, philox4x32_10  # noqa: E402

KAT = [  # counter (4 words), key (2 words), expected (4 words)
    ([0, 0, 0, 0], [0, 0],
     [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([0xffffffff] * 4, [0xffffffff] * 2,
     [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
     [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
]

RNG_MODULE = """module {
  func.func @main(%key: tensor<2xi32> {kiln.name = "key"},
                  %counter: tensor<4xi32> {kiln.name = "counter"})
      -> (tensor<4xi32> {kiln.name = "kat"}, tensor<8x5xi32> {kiln.name = "bits"},
          tensor<64x256xf32> {kiln.name = "mask"}) {
    %0 = kiln.philox %key, %counter : tensor<2xi32>, tensor<4xi32> -> tensor<4xi32>
    %1 = kiln.philox %key, %counter {stream = 3} : tensor<2xi32>, tensor<4xi32> -> tensor<8x5xi32>
    %2 = kiln.dropout_mask %key, %counter {ratio = 0.3 : f32} : tensor<2xi32>, tensor<4xi32> -> tensor<64x256xf32>
    return %0, %1, %2 : tensor<4xi32>, tensor<8x5xi32>, tensor<64x256xf32>
  }
}
"""


def as_i32(words):
    return np.array([w & 0xFFFFFFFF for w in words], np.uint32).view(np.int32)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def check_rng(args):
    failures = 0
    for ctr, key, want in KAT:
        ref = [int(w) for w in philox4x32_10(ctr, key)]
        if ref != want:
            sys.exit(f"philox_ref disagrees with the known answers: {ref}")
    src = os.path.join(args.work, "rng.mlir")
    with open(src, "w") as f:
        f.write(RNG_MODULE)
    art = os.path.join(args.work, "rng.kiln")
    run([args.kilnc, src, "-o", art])
    for n, (ctr, key, want) in enumerate(KAT):
        d = os.path.join(args.work, f"kat{n}")
        os.makedirs(d, exist_ok=True)
        np.save(os.path.join(d, "key.npy"), as_i32(key))
        np.save(os.path.join(d, "counter.npy"), as_i32(ctr))
        run([args.kiln_run, art, "--device", "emu",
             "-i", "key=" + os.path.join(d, "key.npy"),
             "-i", "counter=" + os.path.join(d, "counter.npy"), "-o", d])
        got = [int(w) for w in np.load(os.path.join(d, "kat.npy")).view(np.uint32)]
        ok = got == want
        failures += not ok
        print(f"kat {n}: {' '.join(f'{w:08x}' for w in got)} {'ok' if ok else 'MISMATCH'}")
        bits = np.load(os.path.join(d, "bits.npy")).view(np.uint32).astype(np.uint64)
        ok = np.array_equal(bits, element_bits((8, 5), key, ctr, stream=3))
        failures += not ok
        print(f"bits {n}: [8, 5] stream 3 {'ok' if ok else 'MISMATCH'}")
        mask = np.load(os.path.join(d, "mask.npy"))
        ref = dropout_mask((64, 256), key, ctr, 0.3).astype(np.float32)
        ok = np.array_equal(mask, ref)
        failures += not ok
        n_all, p = mask.size, 0.7
        kept = int(np.count_nonzero(mask))
        sigma = np.sqrt(n_all * p * (1 - p))
        within = abs(kept - n_all * p) <= 5 * sigma
        failures += not within
        print(f"mask {n}: equal to reference {'ok' if ok else 'MISMATCH'}, "
              f"kept {kept}/{n_all} ({(kept - n_all * p) / sigma:+.2f} sigma) "
              f"{'ok' if within else 'OUT OF BOUND'}")
    return failures


def build_grad_model(path, rng):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    W = rng.standard_normal((6, 5)).astype(np.float32) * 0.5
    b = rng.standard_normal(5).astype(np.float32) * 0.1
    W2 = rng.standard_normal((5, 3)).astype(np.float32) * 0.5
    ratio1 = numpy_helper.from_array(np.array(0.5, np.float32), "ratio1")
    ratio2 = numpy_helper.from_array(np.array(0.25, np.float32), "ratio2")
    training = numpy_helper.from_array(np.array(True), "training")
    nodes = [
        helper.make_node("Gemm", ["x", "W", "b"], ["h"]),
        helper.make_node("Dropout", ["h", "ratio1", "training"], ["hd"], name="drop1"),
        helper.make_node("Tanh", ["hd"], ["a"]),
        helper.make_node("Dropout", ["a", "ratio2", "training"], ["ad"], name="drop2"),
        helper.make_node("MatMul", ["ad", "W2"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "dropout_grad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(W2, "W2"), ratio1, ratio2, training])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return {"W": W, "b": b, "W2": W2}


def check_gradients(args):
    rng = np.random.default_rng(7)
    d = os.path.join(args.work, "grad")
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "model.onnx")
    weights = build_grad_model(model, rng)
    art = os.path.join(d, "grad.kiln")
    run([args.kilnc, model, "--gradients", "--loss=mse", "--labels=t:4x3:float32",
         "-o", art])
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t = rng.standard_normal((4, 3)).astype(np.float32)
    key, counter = [0x1234, 0xbeef], [0, 0, 17, 0]
    feeds = {"x": x, "t": t, "rng.key": as_i32(key), "rng.counter": as_i32(counter)}
    cmd = [args.kiln_run, art, "--device", "emu", "-o", d]
    for name, value in feeds.items():
        np.save(os.path.join(d, name + ".npy"), value)
        cmd += ["-i", f"{name}={os.path.join(d, name + '.npy')}"]
    run(cmd)
    m1 = dropout_mask((4, 5), key, counter, 0.5, stream=0)
    m2 = dropout_mask((4, 5), key, counter, 0.25, stream=1)

    def loss(w):
        h = x.astype(np.float64) @ w["W"] + w["b"]
        y = (np.tanh(h * m1) * m2) @ w["W2"]
        return np.mean((y - t) ** 2)

    w64 = {k: v.astype(np.float64) for k, v in weights.items()}
    failures = 0
    got_loss = float(np.load(os.path.join(d, "loss.npy")))
    ref_loss = loss(w64)
    ok = abs(got_loss - ref_loss) <= 1e-5 * abs(ref_loss)
    failures += not ok
    print(f"grad: loss {got_loss:.6f} vs {ref_loss:.6f} {'ok' if ok else 'MISMATCH'}")
    h = 1e-4
    for name in weights:
        fd = np.zeros_like(w64[name])
        for idx in np.ndindex(fd.shape):
            plus = {k: v.copy() for k, v in w64.items()}
            minus = {k: v.copy() for k, v in w64.items()}
            plus[name][idx] += h
            minus[name][idx] -= h
            fd[idx] = (loss(plus) - loss(minus)) / (2 * h)
        got = np.load(os.path.join(d, f"grad.{name}.npy")).astype(np.float64)
        # Each element within 1e-4 of the largest finite difference
        # (scripts/numerics.py, an absolute atol).
        scale = max(np.max(np.abs(fd)), 1e-12)
        result = numerics.compare(
            got, fd, numerics.Tolerance.elementwise(0.0, 1e-4 * scale))
        err, ok = result.worst_ratio * 1e-4, result.ok
        failures += not ok
        print(f"grad.{name}: relative error {err:.1e} {'ok' if ok else 'OVER 1e-4'}")
    # Both masks drop something, or the test would not see them.
    print(f"grad: masks drop {int((m1 == 0).sum())}/20 and {int((m2 == 0).sum())}/20")
    return failures


def make_train(args):
    """An MLP with dropout (Gemm, Relu, Dropout 0.5, Gemm; cross-entropy
    on 3 classes), 16 samples, for the kiln-train runs of dropout.test."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array((rng.standard_normal((6, 16)) * 0.4).astype(np.float32), "W1"),
             numpy_helper.from_array(np.zeros(16, np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((16, 3)) * 0.4).astype(np.float32), "W2"),
             numpy_helper.from_array(np.zeros(3, np.float32), "b2"),
             numpy_helper.from_array(np.array(0.5, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "training")]
    nodes = [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Dropout", ["r", "ratio", "training"], ["d"], name="drop"),
             helper.make_node("Gemm", ["d", "W2", "b2"], ["y"])]
    g = helper.make_graph(
        nodes, "dropout_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 3])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              os.path.join(args.work, "mlp.onnx"))
    x = rng.standard_normal((16, 6)).astype(np.float32)
    y = (np.argmax(x[:, :3], axis=1)).astype(np.int64)
    np.save(os.path.join(args.work, "x.npy"), x)
    np.save(os.path.join(args.work, "y.npy"), y)
    print("make-train: mlp.onnx, x.npy, y.npy")
    return 0


def show_key(path):
    """Prints the checkpoint's RNG state (kiln.state.rng.key)."""
    import json
    import struct
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    info = header["kiln.state.rng.key"]
    lo, hi = info["data_offsets"]
    words = np.frombuffer(blob[8 + n + lo:8 + n + hi], np.int32)
    print(f"rng.key: {info['dtype']} {info['shape']} {words.tolist()}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--work", required=True)
    ap.add_argument("--part", choices=["rng", "gradients", "all", "make-train"],
                    default="all")
    ap.add_argument("--show-key", metavar="CHECKPOINT")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.show_key:
        return show_key(args.show_key)
    if args.part == "make-train":
        return make_train(args)
    failures = 0
    if args.part in ("rng", "all"):
        failures += check_rng(args)
    if args.part in ("gradients", "all"):
        failures += check_gradients(args)
    print(f"dropout: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
