#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target> (committed; rerun to
regenerate). Sources: the test tree's artifacts and PTX, and small files
written here from the formats' specifications (numpy writes the .npy seeds;
the safetensors and tune-cache seeds follow docs/ and the format's public
description), so no seed is produced by the code under test.

Usage: fuzz/make-seeds.py [--kilnc build/bin/kilnc] [--only onnx]
  --kilnc  also adds the PTX of the kiln-run test model (kilnc --emit=ptx)
  --only onnx  only the ONNX seeds (the test tree's .onnxtxt models, parsed
           by onnx.parser, and a few of ONNX's node tests)
"""
import argparse
import io
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
corpus = os.path.join(root, "fuzz", "corpus")


def put(target, name, data):
    path = os.path.join(corpus, target, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def npy_seeds():
    arrays = {
        "f32-2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f16-4": np.array([1, -2, 0.5, 65504], dtype=np.float16),
        "i64-scalar": np.array(7, dtype=np.int64),
        "i32-empty": np.zeros((0, 3), dtype=np.int32),
        "u8-1x1x2": np.array([[[1, 2]]], dtype=np.uint8),
        "bool-3": np.array([True, False, True]),
        "f64-fortran": np.asfortranarray(np.arange(4.0).reshape(2, 2)),
        "i8-2x2": np.array([[-1, 2], [3, -4]], dtype=np.int8),
    }
    for name, array in arrays.items():
        buf = io.BytesIO()
        np.save(buf, array)
        put("npy", name + ".npy", buf.getvalue())
    # Format 2.0 (4-byte header length).
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ones(3, np.float32), version=(2, 0))
    put("npy", "f32-v2.npy", buf.getvalue())


def safetensors(tensors, metadata=None):
    header = {}
    data = b""
    for name, array in tensors.items():
        dtype = {"float32": "F32", "float16": "F16", "int64": "I64",
                 "int32": "I32", "uint8": "U8", "bool": "BOOL",
                 "float64": "F64", "int8": "I8"}[str(array.dtype)]
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    put("safetensors", "two.safetensors", safetensors(
        {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
         "step": np.array([3], dtype=np.int64)},
        {"kiln.fingerprint": "abc", "format": "pt"}))
    put("safetensors", "empty.safetensors", safetensors({}))
    put("safetensors", "scalar-f16.safetensors",
        safetensors({"s": np.array(1.5, dtype=np.float16)}))
    put("safetensors", "mixed.safetensors", safetensors(
        {"a": np.zeros((2, 0), np.int32), "b": np.ones(3, np.uint8),
         "c": np.array([[1.0]], np.float64)}))


def tune_seeds():
    problem = {"family": "mma_f16", "m": 64, "n": 128, "k": 32, "batch": 1,
               "input": "bf16", "output": "f32", "accumulator": "f32",
               "layout_a": "row", "layout_b": "col", "lda": 32, "ldb": 32,
               "ldc": 128, "batch_stride_a": 0, "batch_stride_b": 0,
               "batch_stride_c": 0, "align": [16, 16, 16]}
    config = {"family": "mma_f16", "block_m": 64, "block_n": 64,
              "block_k": 32, "warp_m": 32, "warp_n": 32, "thread_m": 0,
              "thread_n": 0, "stages": 3, "split_k": 1, "tma": False}
    entry = {"gpu": "NVIDIA H200", "compute_capability": 90, "device": "cuda",
             "key": "mma_f16 m=64 n=128 k=32", "problem": problem,
             "config": config, "time_us": 12.5, "heuristic_us": 14.0,
             "candidates": 8}
    conv = dict(problem, conv={"h": 8, "w": 8, "c": 16, "p": 8, "q": 8,
                               "kh": 3, "kw": 3, "stride": [1, 1],
                               "pad": [1, 1], "dilation": [1, 1],
                               "group_channels": 16,
                               "padded_group_channels": 16})
    simt = dict(config, family="simt_f32", thread_m=4, thread_n=4, tma=True)
    cache = {"format": "kiln-tune-cache", "format_version": 1,
             "kiln_version": "0.1.0",
             "entries": [entry, dict(entry, device="emu", problem=conv,
                                     config=simt, gpu="emu")]}
    put("tune-cache", "two-entries.json", json.dumps(cache, indent=1).encode())
    put("tune-cache", "empty.json", json.dumps(
        dict(cache, entries=[])).encode())


def copy_seeds(kilnc):
    for name in ("relu-format-1.2.kiln", "mlp-train-format-1.4.kiln",
                 "matmul-relu-tma-format-1.4.kiln"):
        shutil.copy(os.path.join(root, "test/tools/kiln-run/Inputs", name),
                    os.path.join(corpus, "artifact", name))
    for path in ("test/cutlass/Inputs/store-rank.ptx",
                 "test/unittests/runtime/Inputs/wgmma_tma_pipeline.ptx"):
        shutil.copy(os.path.join(root, path),
                    os.path.join(corpus, "ptx", os.path.basename(path)))
    if kilnc:
        import tempfile
        to_onnx = os.path.join(root, "test/Frontend/ONNX/onnx_from_text.py")
        for text in ("test/tools/kiln-run/Inputs/mlp.onnxtxt",
                     "test/Target/CUDA/Inputs/relu.onnxtxt",
                     "test/Target/CUDA/Inputs/matmul-relu.onnxtxt"):
            name = os.path.basename(text).replace(".onnxtxt", "")
            with tempfile.TemporaryDirectory() as tmp:
                model = os.path.join(tmp, name + ".onnx")
                subprocess.run([sys.executable, to_onnx, os.path.join(root, text),
                                "-o", model], check=True)
                subprocess.run([kilnc, model, "--emit=ptx", "-o",
                                os.path.join(corpus, "ptx", name + ".ptx")],
                               check=True)


# ONNX's own node tests (the onnx package's data, which the lit suite's
# light models come from too): op families the .onnxtxt tests have few of.
ONNX_NODE_TESTS = ("test_conv_with_strides_padding", "test_maxpool_2d_pads",
                   "test_averagepool_2d_same_upper", "test_gemm_all_attributes",
                   "test_batchnorm_example", "test_if", "test_loop11",
                   "test_scan9_sum", "test_resize_upsample_scales_linear",
                   "test_gather_elements_1", "test_einsum_batch_matmul",
                   "test_layer_normalization_4d_axis1",
                   "test_ai_onnx_ml_tree_ensemble_set_membership",
                   "test_ai_onnx_ml_tree_ensemble_single_tree")


def onnx_seeds():
    """The test tree's models in ONNX text syntax (test/**/*.onnxtxt), each
    parsed by onnx.parser as the lit tests do, and a few of ONNX's node
    tests: valid models written by ONNX's tools, not by Kiln."""
    import glob
    import onnx
    import onnx.parser
    for old in glob.glob(os.path.join(corpus, "onnx", "*.onnx")):
        os.remove(old)
    texts = sorted(glob.glob(os.path.join(root, "test", "**", "*.onnxtxt"),
                             recursive=True))
    for text in texts:
        # Its LSTM/GRU/RNN graphs compile for ~5 s (25 s instrumented on the
        # loaded machine): a fifth of CI's 60 s on one seed.
        if text.endswith("Frontend/ONNX/recurrent.onnxtxt"):
            continue
        with open(text) as f:
            try:
                model = onnx.parser.parse_model(f.read())
            except Exception:  # Some tests hold deliberately broken text.
                continue
        name = os.path.relpath(text, os.path.join(root, "test"))
        name = name.replace(os.sep, "-").replace(".onnxtxt", ".onnx")
        put("onnx", name, model.SerializeToString())
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test",
                        "data", "node")
    for test in ONNX_NODE_TESTS:
        path = os.path.join(data, test, "model.onnx")
        if os.path.exists(path):
            with open(path, "rb") as f:
                put("onnx", "onnx-node-" + test + ".onnx", f.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kilnc")
    parser.add_argument("--only", help="one target's seeds (e.g. onnx)")
    args = parser.parse_args()
    if args.only == "onnx":
        onnx_seeds()
        return
    for target in ("npy", "ptx", "safetensors", "artifact", "tune-cache",
                   "onnx"):
        os.makedirs(os.path.join(corpus, target), exist_ok=True)
    npy_seeds()
    safetensors_seeds()
    tune_seeds()
    copy_seeds(args.kilnc)
    onnx_seeds()


if __name__ == "__main__":
    sys.exit(main())
