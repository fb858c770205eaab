#!/usr/bin/env python3
"""The random models of the GPU check, made the same way here and there.

Usage: device_models.py make KIND BATCH OUT.onnx [--light DIR]
       device_models.py digest MODEL.onnx

KIND is one of the onnx package's light classifiers (resnet50, squeezenet,
shufflenet, inception_v1, inception_v2, densenet121, bvlc_alexnet, zfnet512,
vgg19: light_KIND.onnx with scripts/device/randomize_weights.py --portable
weights, then scripts/rebatch.py when BATCH is not 1), encoder
(make_encoder.py --portable --batch BATCH) or encoder-small (the same,
hidden 64, 2 heads, ffn 128, seq 16, vocab 50). The scripts are found beside this file (the copy in
device-check/scripts/) or in the source tree.

digest prints, as JSON, a SHA-256 per initializer over its dtype, shape and
bytes: scripts/device/prepare.sh records it for the models the artifacts are
compiled from, and scripts/device-check.sh refuses to bind weights that do
not match it.
"""
import hashlib
import json
import os
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
KINDS = sorted(LIGHT | set(ENCODERS))


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


def make(kind, batch, out, light=None):
    """Writes model KIND at batch BATCH to OUT (an .onnx path)."""
    py = sys.executable
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


def digest(path):
    """{initializer name: sha256 hex of dtype, shape and bytes}."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    result = {}
    for t in model.graph.initializer:
        a = np.array(numpy_helper.to_array(t), order="C")  # scalars stay 0-D
        h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
        result[t.name] = h.hexdigest()
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
