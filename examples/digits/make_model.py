#!/usr/bin/env python3
"""Trains the bundled example: a small CNN that reads handwritten digits.

The data is scikit-learn's copy of the UCI "optical recognition of
handwritten digits" test set (1797 8x8 grey images of digits 0-9 written by
43 people, bundled in the scikit-learn wheel, so nothing is downloaded). The
network is trained here with numpy (plain backpropagation, Adam, seeded), in
a few seconds on a CPU, and written as an ONNX model:

  image f32[N,1,8,8] (pixels / 16, in [0, 1])
    -> Conv 3x3, 16 channels, pad 1 -> Relu -> MaxPool 2x2
    -> Flatten -> Gemm 256x64 -> Relu -> Gemm 64x10 -> Softmax
    -> probabilities f32[N,10]

Usage: make_model.py OUTDIR [--batch 32]
Writes OUTDIR/digits_cnn.onnx, OUTDIR/images.npy (the first BATCH held-out
images, never seen in training), OUTDIR/labels.npy, and prints the held-out
accuracy that onnxruntime measures on the model.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 2026
HELD_OUT = 297  # the last images (of other writers' digits), for testing


def load_digits():
    try:
        from sklearn.datasets import load_digits as sk_load_digits
    except ImportError:
        sys.exit("make_model.py: scikit-learn is missing (it carries the digits "
                 "data set): run scripts/install-deps.sh")
    data = sk_load_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None, :, :]
    return images, data.target.astype(np.int64)


def im2col(x):
    """[N,1,8,8] -> [N*64, 9]: each output pixel's 3x3 neighbourhood (pad 1)."""
    n = x.shape[0]
    padded = np.pad(x[:, 0], ((0, 0), (1, 1), (1, 1)))
    cols = np.empty((n, 8, 8, 9), np.float32)
    for ky in range(3):
        for kx in range(3):
            cols[..., ky * 3 + kx] = padded[:, ky:ky + 8, kx:kx + 8]
    return cols.reshape(n * 64, 9)


def forward(params, x):
    wc, bc, w1, b1, w2, b2 = params
    n = x.shape[0]
    cols = im2col(x)
    conv = (cols @ wc + bc).reshape(n, 8, 8, 16).transpose(0, 3, 1, 2)  # NCHW
    act = np.maximum(conv, 0)
    windows = act.reshape(n, 16, 4, 2, 4, 2)
    pooled = windows.max(axis=(3, 5))
    flat = pooled.reshape(n, 256)
    h_pre = flat @ w1 + b1
    h = np.maximum(h_pre, 0)
    logits = h @ w2 + b2
    return logits, (cols, conv, windows, pooled, flat, h_pre, h)


def train(images, labels, epochs=40, batch=64, lr=3e-3):
    rng = np.random.default_rng(SEED)
    def init(fan_in, shape):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    params = [init(9, (9, 16)), np.zeros(16, np.float32),
              init(256, (256, 64)), np.zeros(64, np.float32),
              init(64, (64, 10)), np.zeros(10, np.float32)]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(images))
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            x, y = images[idx], labels[idx]
            n = len(idx)
            logits, (cols, conv, windows, pooled, flat, h_pre, h) = forward(params, x)
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            dlogits = p
            dlogits[np.arange(n), y] -= 1
            dlogits /= n
            wc, bc, w1, b1, w2, b2 = params
            dw2, db2 = h.T @ dlogits, dlogits.sum(0)
            dh = (dlogits @ w2.T) * (h_pre > 0)
            dw1, db1 = flat.T @ dh, dh.sum(0)
            dpooled = (dh @ w1.T).reshape(n, 16, 4, 1, 4, 1)
            # Max-pool backward: the gradient goes to the window's maximum.
            mask = windows == pooled.reshape(n, 16, 4, 1, 4, 1)
            dact = (mask * dpooled).reshape(n, 16, 8, 8)
            dconv = (dact * (conv > 0)).transpose(0, 2, 3, 1).reshape(n * 64, 16)
            dwc, dbc = cols.T @ dconv, dconv.sum(0)
            step += 1
            for i, g in enumerate([dwc, dbc, dw1, db1, dw2, db2]):
                m[i] = 0.9 * m[i] + 0.1 * g
                v[i] = 0.999 * v[i] + 0.001 * g * g
                mhat = m[i] / (1 - 0.9 ** step)
                vhat = v[i] / (1 - 0.999 ** step)
                params[i] = (params[i] - lr * mhat / (np.sqrt(vhat) + 1e-8)).astype(np.float32)
    return params


def to_onnx(params):
    wc, bc, w1, b1, w2, b2 = params
    # im2col column ky*3+kx holds the tap W[o, 0, ky, kx].
    conv_w = wc.T.reshape(16, 1, 3, 3)
    inits = [numpy_helper.from_array(a.astype(np.float32), name) for a, name in
             [(conv_w, "conv.weight"), (bc, "conv.bias"), (w1, "fc1.weight"),
              (b1, "fc1.bias"), (w2, "fc2.weight"), (b2, "fc2.bias")]]
    nodes = [
        helper.make_node("Conv", ["image", "conv.weight", "conv.bias"], ["conv"],
                         name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["conv.relu"], name="conv.relu"),
        helper.make_node("MaxPool", ["conv.relu"], ["pool"], name="pool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1"),
        helper.make_node("Relu", ["fc1"], ["fc1.relu"], name="fc1.relu"),
        helper.make_node("Gemm", ["fc1.relu", "fc2.weight", "fc2.bias"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln examples/digits/make_model.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    images, labels = load_digits()
    train_x, train_y = images[:-HELD_OUT], labels[:-HELD_OUT]
    test_x, test_y = images[-HELD_OUT:], labels[-HELD_OUT:]
    params = train(train_x, train_y)
    model = to_onnx(params)
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, "digits_cnn.onnx")
    onnx.save(model, path)
    np.save(os.path.join(args.outdir, "images.npy"), test_x[:args.batch])
    np.save(os.path.join(args.outdir, "labels.npy"), test_y[:args.batch])
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "scripts"))
    import numerics  # the one onnxruntime setup (optimizations off)
    session = numerics.ort_session(path)
    probs = session.run(None, {"image": test_x})[0]
    accuracy = float((probs.argmax(1) == test_y).mean())
    print(f"trained {path}: held-out accuracy (onnxruntime, {HELD_OUT} images "
          f"never seen in training): {accuracy:.3f}")


if __name__ == "__main__":
    main()
