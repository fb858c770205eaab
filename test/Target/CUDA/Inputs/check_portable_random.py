#!/usr/bin/env python3
"""Checks scripts/device/portable_random.py against a plain-Python SplitMix64.

Usage: check_portable_random.py stream
       check_portable_random.py randomized LIGHT_MODEL.onnx RANDOMIZED.onnx
       check_portable_random.py encoder ENCODER.onnx

The reference here is independent of the numpy code under test: Python
integers for SplitMix64 (Vigna's splitmix64.c), itself checked against the
published test vector, Python floats for the affine map and struct for the
float32 rounding. Each subcommand prints "ok: ..." lines or exits 1.
"""
import math
import os
import struct
import sys

import numpy as np

MASK = (1 << 64) - 1

# rand_xoshiro's SplitMix64 test ("produced with the reference implementation
# http://xoshiro.di.unimi.it/splitmix64.c"): seed 1477776061723855037.
PUBLISHED_SEED = 1477776061723855037
PUBLISHED = [1985237415132408290, 2979275885539914483, 13511426838097143398,
             8488337342461049707, 15141737807933549159]


def splitmix64(seed, n, skip=0):
    state = (seed + skip * 0x9E3779B97F4A7C15) & MASK
    out = []
    for _ in range(n):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def to_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def uniform_f32(seed, n, lo, hi, skip=0):
    return [to_f32(lo + (hi - lo) * ((z >> 11) * 2.0 ** -53))
            for z in splitmix64(seed, n, skip)]


def normal_f32(seed, n, mean, std, skip=0):
    half = std * math.sqrt(3.0)
    return uniform_f32(seed, n, mean - half, mean + half, skip)


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def same_bits(what, got, want):
    got = np.asarray(got, dtype=np.float32).ravel()
    want = np.asarray(want, dtype=np.float32)
    if got.shape != want.shape or got.view(np.uint32).tolist() != want.view(np.uint32).tolist():
        bad = next((i for i in range(min(len(got), len(want)))
                    if got[i].view(np.uint32) != want[i].view(np.uint32)), None)
        fail(f"{what}: differs from the plain-Python reference "
             f"(first at {bad}: {got[bad] if bad is not None else got.shape} vs "
             f"{want[bad] if bad is not None else want.shape})")
    print(f"ok: {what}: {len(want)} values bit-identical")


def portable():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "..", "scripts", "device"))
    import portable_random
    return portable_random


def check_stream():
    if splitmix64(PUBLISHED_SEED, 5) != PUBLISHED:
        fail("plain-Python SplitMix64 does not give the published vector")
    print("ok: plain-Python SplitMix64 gives the published vector")
    pr = portable()
    got = pr.PortableRandom(PUBLISHED_SEED).bits(5).tolist()
    if got != PUBLISHED:
        fail(f"PortableRandom bits {got} != published {PUBLISHED}")
    print("ok: PortableRandom gives the published vector")
    # Several calls, across block boundaries, and extreme seeds.
    for seed in (0, 1, MASK, 0x0123456789ABCDEF):
        rng = pr.PortableRandom(seed)
        rng.chunk = 7
        got = []
        for n in (3, 10, 1, 20):
            got += rng.bits(n).tolist()
        if got != splitmix64(seed, 34):
            fail(f"seed {seed:#x}: drawn in pieces differs from one stream")
    print("ok: streams drawn in pieces and blocks match, 4 seeds")
    rng = pr.PortableRandom(7)
    same_bits("uniform(-0.3, 0.7)", rng.uniform(-0.3, 0.7, (4, 25)).astype(np.float32),
              uniform_f32(7, 100, -0.3, 0.7))
    same_bits("normal(0.25, 0.1) after 100 draws",
              rng.normal(0.25, 0.1, (50,)).astype(np.float32),
              normal_f32(7, 50, 0.25, 0.1, skip=100))
    # Mean and variance of the normal() stand-in (10^5 draws: the standard
    # error of the mean is 3e-3 * std).
    x = pr.PortableRandom(3).normal(2.0, 0.5, (100000,))
    if abs(x.mean() - 2.0) > 0.01 or abs(x.std() - 0.5) > 0.01:
        fail(f"normal(2, 0.5): mean {x.mean()}, std {x.std()}")
    print("ok: normal(2, 0.5) has mean 2 and std 0.5 (+-0.01)")


def arrays(path):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    return model, {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def expected(role, shape, size, skip):
    """randomize_weights.py's rule for a tensor read as input role[1] of a
    role[0] node, with --portable's uniform stand-ins for the normals."""
    op, index = role
    if op == "BatchNormalization" and index == 4:
        return uniform_f32(0, size, 0.5, 1.5, skip)
    if op == "BatchNormalization" and index == 1:
        return uniform_f32(0, size, 0.8, 1.2, skip)
    if op != "BatchNormalization" and len(shape) >= 2:
        fan_in = shape[0] if op == "MatMul" else size // shape[0]
        if op == "Gemm":
            fan_in = shape[-1]
        return normal_f32(0, size, 0.0, 1.0 / math.sqrt(fan_in), skip)
    return normal_f32(0, size, 0.0, 0.1, skip)


def check_randomized(light, randomized):
    """randomize_weights.py draws from one stream, seed 0: first a value for
    every ConstantOfShape output (in node order, made initializers and
    appended), then again for every float initializer of two or more
    elements in list order, the appended ones included (their second values
    are the ones kept). Checks the first two kept tensors and the first
    appended one."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(light)
    inits = {t.name: t for t in model.graph.initializer}
    consumer = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            consumer.setdefault(name, (node.op_type, i))
    made = []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]])]
            made.append((node.output[0], shape))
    drawn = sum(int(np.prod(shape)) for _, shape in made)
    kept = [(t.name, list(t.dims)) for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT and int(np.prod(t.dims)) >= 2]
    _, got = arrays(randomized)
    order = kept + made
    picks = {0, 1, len(kept)}
    for i, (name, shape) in enumerate(order):
        size = int(np.prod(shape))
        if i in picks:
            role = consumer.get(name, ("", 0))
            same_bits(f"{name} ({role[0]} input {role[1]}, {shape})", got[name],
                      expected(role, shape, size, drawn))
        drawn += size
    if len(order) <= len(kept) or len(kept) < 2:
        fail(f"{light}: needs two float initializers and a ConstantOfShape weight")


def check_encoder(path):
    _, got = arrays(path)
    word = got["embeddings.word"]
    same_bits("embeddings.word[:4]", word[:4], normal_f32(0, 4 * word.shape[1], 0.0, 0.02))
    pos = got["embeddings.position"]
    same_bits("embeddings.position[:2]", pos[:2],
              normal_f32(0, 2 * pos.shape[1], 0.0, 0.02, skip=word.size))


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "stream" and len(sys.argv) == 2:
        check_stream()
    elif what == "randomized" and len(sys.argv) == 4:
        check_randomized(sys.argv[2], sys.argv[3])
    elif what == "encoder" and len(sys.argv) == 3:
        check_encoder(sys.argv[2])
    else:
        sys.exit(__doc__.strip().splitlines()[2])


if __name__ == "__main__":
    main()
