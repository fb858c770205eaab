"""float8 storage types on emu, bit for bit against independent references.

Builds small ONNX models, compiles them with kilnc, runs them with
`kiln-run --device emu` and compares every element:

  decode   all 256 codes of each float8 type (a graph input, so the
           conversion runs in the kernel, not in the compiler's folder) to
           FLOAT and FLOAT16, against onnx.numpy_helper's float8*_to_float32;
  encode   FLOAT (every float16 value widened, 20,000 random float32 bit
           patterns, +-Inf, NaN, +-0 and the values around each type's
           largest finite one) and FLOAT16 (every bit pattern) to each type:
           saturate=1 against onnx.helper's float32_to_float8* (the reference
           that wrote the node tests' data); saturate=0 against ml_dtypes'
           astype, which follows the spec's table: ONNX's reference maps
           E4M3FN's [480, 496) to 448 and E5M2's (57344, ...) just past the
           rounding edge to NaN where the table says NaN and Inf;
  move     Transpose, Reshape, Concat and Identity of float8 tensors against
           numpy on the codes.

NaN matches NaN (any NaN code of the type). The bound is exact equality:
each conversion has one correctly rounded answer.
Usage: float8_casts.py WORKDIR [--break]  (prints one line per case)
"""
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TYPES = {
    "FLOAT8E4M3FN": (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn,
                     lambda v, s: helper.float32_to_float8e4m3(v, saturate=s),
                     lambda c: numpy_helper.float8e4m3_to_float32(c), 448.0),
    "FLOAT8E4M3FNUZ": (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz,
                       lambda v, s: helper.float32_to_float8e4m3(
                           v, uz=True, saturate=s),
                       lambda c: numpy_helper.float8e4m3_to_float32(
                           c, uz=True), 240.0),
    "FLOAT8E5M2": (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2,
                   lambda v, s: helper.float32_to_float8e5m2(v, saturate=s),
                   lambda c: numpy_helper.float8e5m2_to_float32(c), 57344.0),
    "FLOAT8E5M2FNUZ": (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz,
                       lambda v, s: helper.float32_to_float8e5m2(
                           v, fn=True, uz=True, saturate=s),
                       lambda c: numpy_helper.float8e5m2_to_float32(
                           c, fn=True, uz=True), 57344.0),
}


def is_nan_code(name, codes):
    if name == "FLOAT8E4M3FN":
        return (codes & 0x7F) == 0x7F
    if name == "FLOAT8E5M2":
        return (codes & 0x7F) > 0x7C
    return codes == 0x80


def save_model(path, nodes, inputs, outputs):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, path)


def run(workdir, stem, feeds):
    model = os.path.join(workdir, stem + ".onnx")
    artifact = os.path.join(workdir, stem + ".kiln")
    subprocess.run(["kilnc", model, "-o", artifact], check=True)
    args = ["kiln-run", artifact, "--device", "emu", "-o",
            os.path.join(workdir, stem + "-out")]
    for name, array in feeds.items():
        path = os.path.join(workdir, f"{stem}-{name}.npy")
        np.save(path, array)
        args += ["-i", f"{name}={path}"]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return lambda out: np.load(os.path.join(workdir, stem + "-out", out + ".npy"))


def same_floats(got, want):
    got = np.asarray(got, np.float32)
    want = np.asarray(want, np.float32)
    return np.all((got.view(np.uint32) == want.view(np.uint32))
                  | (np.isnan(got) & np.isnan(want)))


def same_codes(name, got, want):
    return got.shape == want.shape and np.all(
        (got == want) | (is_nan_code(name, got) & is_nan_code(name, want)))


def encode_inputs(limit):
    rng = np.random.default_rng(0)
    halfs = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    random = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(
        np.uint32).view(np.float32)
    edges = []
    for m in (448.0, 240.0, 57344.0):
        for k in range(-40, 80):
            edges.append(np.float32(m) + np.float32(k) * np.float32(m / 256))
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-7, -1e-7],
                       np.float32)
    x = np.concatenate([halfs, random, np.array(edges, np.float32), special])
    return x[:limit] if limit else x


def main():
    workdir = sys.argv[1]
    broken = "--break" in sys.argv  # flips one expected bit: must fail
    os.makedirs(workdir, exist_ok=True)

    # decode
    for name, (code, _, _, to_float, _) in TYPES.items():
        stem = "decode-" + name
        save_model(os.path.join(workdir, stem + ".onnx"),
                   [helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
                    helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)],
                   [helper.make_tensor_value_info("x", code, [256])],
                   [helper.make_tensor_value_info("f", TensorProto.FLOAT, [256]),
                    helper.make_tensor_value_info("h", TensorProto.FLOAT16, [256])])
        codes = np.arange(256, dtype=np.uint8)
        out = run(workdir, stem, {"x": codes.view(np.dtype("V1"))})
        want = np.array([to_float(int(c)) for c in codes], np.float32)
        if broken:
            want[56] = np.nextafter(want[56], np.float32(np.inf))
        ok = same_floats(out("f"), want) and same_floats(
            out("h").astype(np.float32), want)
        print(f"decode {name}: {'bit-exact' if ok else 'MISMATCH'}")

    # encode
    x = encode_inputs(0)
    halfs = np.arange(65536, dtype=np.uint16).view(np.float16)
    for name, (code, mltype, to_f8, _, _) in TYPES.items():
        for saturate in (1, 0):
            stem = f"encode-{name}-sat{saturate}"
            save_model(os.path.join(workdir, stem + ".onnx"),
                       [helper.make_node("Cast", ["x"], ["y"], to=code,
                                         saturate=saturate),
                        helper.make_node("Cast", ["h"], ["z"], to=code,
                                         saturate=saturate)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      [x.size]),
                        helper.make_tensor_value_info("h", TensorProto.FLOAT16,
                                                      [halfs.size])],
                       [helper.make_tensor_value_info("y", code, [x.size]),
                        helper.make_tensor_value_info("z", code, [halfs.size])])
            out = run(workdir, stem, {"x": x, "h": halfs})
            got_y = out("y").view(np.uint8)
            got_z = out("z").view(np.uint8)
            wide = halfs.astype(np.float32)
            if saturate:
                want_y = np.array([to_f8(float(v), True) for v in x], np.uint8)
                want_z = np.array([to_f8(float(v), True) for v in wide], np.uint8)
            else:
                with np.errstate(invalid="ignore", over="ignore"):
                    want_y = x.astype(mltype).view(np.uint8)
                    want_z = wide.astype(mltype).view(np.uint8)
            if broken:
                want_y = want_y.copy()
                want_y[1234] ^= 1
            ok = same_codes(name, got_y, want_y) and same_codes(name, got_z, want_z)
            print(f"encode {name} saturate={saturate}: "
                  f"{'bit-exact' if ok else 'MISMATCH'} ({x.size + halfs.size} values)")

    # data movement
    name = "FLOAT8E5M2"
    code = TYPES[name][0]
    stem = "move"
    save_model(os.path.join(workdir, stem + ".onnx"),
               [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                helper.make_node("Reshape", ["t", "shape"], ["r"]),
                helper.make_node("Concat", ["r", "r"], ["c"], axis=0),
                helper.make_node("Identity", ["c"], ["y"])],
               [helper.make_tensor_value_info("x", code, [4, 6])],
               [helper.make_tensor_value_info("y", code, [4, 12])])
    model = onnx.load(os.path.join(workdir, stem + ".onnx"))
    model.graph.initializer.append(
        numpy_helper.from_array(np.array([2, 12], np.int64), "shape"))
    onnx.save(model, os.path.join(workdir, stem + ".onnx"))
    codes = np.random.default_rng(1).integers(0, 256, (4, 6)).astype(np.uint8)
    out = run(workdir, stem, {"x": codes.view(np.dtype("V1"))})
    r = codes.T.reshape(2, 12)
    want = np.concatenate([r, r], 0)
    if broken:
        want[0, 0] ^= 1
    ok = np.array_equal(out("y").view(np.uint8), want)
    print(f"move {name}: {'bit-exact' if ok else 'MISMATCH'}")


if __name__ == "__main__":
    main()
