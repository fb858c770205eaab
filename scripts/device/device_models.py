#!/usr/bin/env python3
"""The random models of the GPU check, made the same way here and there.

Usage: device_models.py make KIND BATCH OUT.onnx [--light DIR]
       device_models.py digest MODEL.onnx

KIND is one of the onnx package's light classifiers (resnet50, squeezenet,
shufflenet, inception_v1, inception_v2, densenet121, bvlc_alexnet, zfnet512,
vgg19: light_KIND.onnx with scripts/device/randomize_weights.py --portable
weights, then scripts/rebatch.py when BATCH is not 1), encoder
(make_encoder.py --portable --batch BATCH), encoder-small (the same,
hidden 64, 2 heads, ffn 128, seq 16, vocab 50), gemm-MxKxN (one MatMul:
input a [M, K] float, initializer b [K, N] from the portable generator,
N(0, 1/K) as randomize_weights.py draws a MatMul weight; BATCH is
ignored), lstm (issue 25's sequence model: a bidirectional 2-layer LSTM,
T 100, input 64, H 256, batch BATCH, weights uniform in +-1/sqrt(H) from
the portable generator as PyTorch initialises an LSTM; one output, layer
2's Y [T, 2, B, H]) or lstm-small (the same at T 6, input 8, H 16). The scripts are found beside this file (the copy in
device-check/scripts/) or in the source tree.

digest prints, as JSON, a SHA-256 per initializer over its dtype, shape and
bytes: scripts/device/prepare.sh records it for the models the artifacts are
compiled from, and scripts/device-check.sh refuses to bind weights that do
not match it.
"""
import hashlib
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# The onnx package's light classifiers (light_KIND.onnx).
LIGHT = {"resnet50", "squeezenet", "shufflenet", "inception_v1", "inception_v2",
         "densenet121", "bvlc_alexnet", "zfnet512", "vgg19"}
ENCODERS = {
    "encoder": [],
    "encoder-small": ["--hidden", "64", "--heads", "2", "--ffn", "128",
                      "--seq", "16", "--vocab", "50"],
}
# Recurrent models: (T, input size, H).
LSTMS = {"lstm": (100, 64, 256), "lstm-small": (6, 8, 16)}
KINDS = sorted(LIGHT | set(ENCODERS) | set(LSTMS)) + ["gemm-MxKxN"]
GEMM_ROWS = 512  # rows of b drawn per call (bounds temporary memory)


def script(name):
    """A helper script: beside this file, else in the source tree."""
    for path in (os.path.join(HERE, name),
                 os.path.join(HERE, "..", name),
                 os.path.join(HERE, "..", "..", "test", "Frontend", "ONNX", "models", name)):
        if os.path.exists(path):
            return path
    sys.exit(f"device_models.py: cannot find {name} near {HERE}")


def light_dir():
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def vocab(kind):
    """The token-id range of an encoder's input (None for images)."""
    if kind not in ENCODERS:
        return None
    args = ENCODERS[kind]
    return int(args[args.index("--vocab") + 1]) if "--vocab" in args else 1000


def gemm_shape(kind):
    """(M, K, N) of a gemm-MxKxN kind, or None."""
    m = re.fullmatch(r"gemm-(\d+)x(\d+)x(\d+)", kind)
    return tuple(int(g) for g in m.groups()) if m else None


def gemm_weight(k, n, seed=0):
    """The GEMM models' b [K, N]: portable N(0, 1/K) draws (uniform of that
    mean and variance), row block by row block (the same stream as one
    call: draws are consumed in order)."""
    import numpy as np
    sys.path.insert(0, HERE)
    from portable_random import PortableRandom
    rng = PortableRandom(seed)
    b = np.empty((k, n), dtype=np.float32)
    for r in range(0, k, GEMM_ROWS):
        rows = min(k, r + GEMM_ROWS) - r
        b[r:r + rows] = rng.normal(0.0, 1.0 / np.sqrt(k), (rows, n)).astype(np.float32)
    return b


def make_gemm(m, k, n, out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"], name="gemm")], "gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(gemm_weight(k, n), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what onnxruntime 1.30 reads
    onnx.save(model, out)


def make_lstm(kind, batch, out, seed=0):
    """The bidirectional 2-layer LSTM: layer 2 reads layer 1's Y as [T, B,
    2H]; the output is layer 2's Y."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    sys.path.insert(0, HERE)
    from portable_random import PortableRandom
    t, i, h = LSTMS[kind]
    rng = PortableRandom(seed)
    k = 1.0 / np.sqrt(h)

    def w(name, *shape):
        return numpy_helper.from_array(
            rng.uniform(-k, k, shape).astype(np.float32), name)
    inits = [w("W1", 2, 4 * h, i), w("R1", 2, 4 * h, h), w("B1", 2, 8 * h),
             w("W2", 2, 4 * h, 2 * h), w("R2", 2, 4 * h, h), w("B2", 2, 8 * h),
             numpy_helper.from_array(np.array([t, batch, 2 * h], np.int64), "shape2")]
    nodes = [
        helper.make_node("LSTM", ["x", "W1", "R1", "B1"], ["y1"], name="lstm1",
                         hidden_size=h, direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1t"], name="t1", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y1t", "shape2"], ["x2"], name="r1"),
        helper.make_node("LSTM", ["x2", "W2", "R2", "B2"], ["y"], name="lstm2",
                         hidden_size=h, direction="bidirectional"),
    ]
    graph = helper.make_graph(
        nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, batch, i])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [t, 2, batch, h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8  # what onnxruntime 1.30 reads
    onnx.save(model, out)


def make(kind, batch, out, light=None):
    """Writes model KIND at batch BATCH to OUT (an .onnx path)."""
    py = sys.executable
    if gemm_shape(kind):
        make_gemm(*gemm_shape(kind), out)
        return
    if kind in LSTMS:
        make_lstm(kind, batch, out)
        return
    if kind in ENCODERS:
        subprocess.run([py, script("make_encoder.py"), out, "--portable",
                        "--batch", str(batch)] + ENCODERS[kind], check=True)
        return
    # KIND-he: He-initialised weights (std sqrt(2 / fan_in)), whose outputs
    # are not nearly constant, unlike the default std 1 / sqrt(fan_in).
    he = kind.endswith("-he")
    kind = kind[:-3] if he else kind
    if kind not in LIGHT:
        sys.exit(f"device_models.py: unknown model '{kind}' (one of {', '.join(KINDS)})")
    src = os.path.join(light or light_dir(), f"light_{kind}.onnx")
    if not os.path.exists(src):
        sys.exit(f"device_models.py: {src} not found")
    randomized = out if batch == 1 else out + ".b1.onnx"
    subprocess.run([py, script("randomize_weights.py"), src, randomized, "--portable"]
                   + (["--gain", repr(2 ** 0.5)] if he else []), check=True)
    if batch != 1:
        subprocess.run([py, script("rebatch.py"), randomized, out, str(batch)], check=True)
        os.remove(randomized)


def digest_array(a):
    """sha256 hex of an array's dtype, shape and bytes."""
    import numpy as np
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")  # not ascontiguousarray: scalars stay 0-D
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.reshape(-1).view(np.uint8) if a.size else b"")
    return h.hexdigest()


def digest(path):
    """{initializer name: sha256 hex of dtype, shape and bytes}."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    result = {}
    for t in model.graph.initializer:
        # np.array(order="C"): scalars stay 0-D.
        result[t.name] = digest_array(np.array(numpy_helper.to_array(t), order="C"))
    return result


def main():
    argv = sys.argv[1:]
    light = None
    if "--light" in argv:
        i = argv.index("--light")
        light = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) == 4 and argv[0] == "make":
        make(argv[1], int(argv[2]), argv[3], light)
    elif len(argv) == 2 and argv[0] == "digest":
        json.dump(digest(argv[1]), sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        sys.exit(__doc__.strip().splitlines()[2] + "\n" + __doc__.strip().splitlines()[3])


if __name__ == "__main__":
    main()
