#!/usr/bin/env python3
"""Helpers for tune.test (kilnc --tune, --tune-cache).

Usage:
  tune_cache.py model OUT.onnx
      A model with two contraction regions of different shapes:
      y = relu(x @ w1 + b1) @ w2.
  tune_cache.py check-cache CACHE --entries N --device DEVICE
      Checks the cache's format and that every entry has the keys the
      lookup needs (gpu, compute capability, device, key, problem with its
      shapes, dtypes, layouts, strides and alignment, config, times).
  tune_cache.py edit CACHE OUT (--kiln-version V | --unsupported)
      A foreign copy (another Kiln version), or one whose first entry's
      config no longer passes the config checks (block_m 96: not a power of
      two).
  tune_cache.py compare MODEL ARTIFACT --kiln-run PATH
      Runs ARTIFACT on emu and onnxruntime on MODEL (fp32) with the same
      seeded input; the relative error of the output's norm must be within
      the bf16 bound, 2e-2 (the project's bf16 bound, docs/passes.md
      "Precision": 8-bit mantissas for x, the weights and the hidden
      activation, fp32 accumulation).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402


def make_model(path):
    rng = np.random.default_rng(5)
    w1 = rng.standard_normal((48, 40)).astype(np.float32) / 7
    b1 = rng.standard_normal((40,)).astype(np.float32)
    w2 = rng.standard_normal((40, 24)).astype(np.float32) / 6
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["m"]),
         helper.make_node("Add", ["m", "b1"], ["a"]),
         helper.make_node("Relu", ["a"], ["h"]),
         helper.make_node("MatMul", ["h", "w2"], ["y"])],
        "two_contractions",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 48])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 24])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def check_cache(path, entries, device):
    with open(path) as f:
        cache = json.load(f)
    problems = []
    for key in ("format", "format_version", "kiln_version", "entries"):
        if key not in cache:
            problems.append(f"no '{key}'")
    if cache.get("format") != "kiln-tune-cache":
        problems.append("format is not kiln-tune-cache")
    got = cache.get("entries", [])
    if len(got) != entries:
        problems.append(f"{len(got)} entries, expected {entries}")
    keys = set()
    for i, e in enumerate(got):
        for key in ("gpu", "compute_capability", "device", "key", "problem",
                    "config", "time_us", "heuristic_us", "candidates"):
            if key not in e:
                problems.append(f"entry {i}: no '{key}'")
        p = e.get("problem", {})
        for key in ("m", "n", "k", "batch", "input", "output", "layout_a",
                    "layout_b", "lda", "ldb", "ldc", "batch_stride_a",
                    "batch_stride_b", "batch_stride_c", "align", "family"):
            if key not in p:
                problems.append(f"entry {i}: problem has no '{key}'")
        c = e.get("config", {})
        for key in ("family", "block_m", "block_n", "block_k", "stages",
                    "split_k"):
            if key not in c:
                problems.append(f"entry {i}: config has no '{key}'")
        if e.get("device") != device:
            problems.append(f"entry {i}: device {e.get('device')}")
        if e.get("compute_capability") != 90:
            problems.append(f"entry {i}: compute capability "
                            f"{e.get('compute_capability')}")
        if not e.get("time_us", 0) > 0 or \
                e.get("time_us", 0) > e.get("heuristic_us", 0):
            problems.append(f"entry {i}: the winner ({e.get('time_us')} us) "
                            f"is not faster than or as fast as the "
                            f"heuristic ({e.get('heuristic_us')} us)")
        keys.add(e.get("key"))
    if len(keys) != len(got):
        problems.append("entries with the same key")
    shapes = sorted((e["problem"]["m"], e["problem"]["n"], e["problem"]["k"])
                    for e in got if "problem" in e)
    print("problems:", " ".join(f"{m}x{n}x{k}" for m, n, k in shapes))
    for problem in problems:
        print("FAIL:", problem)
    print("cache ok" if not problems else "cache FAIL")
    return 0 if not problems else 1


def edit(path, out, kiln_version, unsupported):
    with open(path) as f:
        cache = json.load(f)
    if kiln_version:
        cache["kiln_version"] = kiln_version
    if unsupported:
        cache["entries"][0]["config"]["block_m"] = 96
    with open(out, "w") as f:
        json.dump(cache, f, indent=2)
    return 0


def compare(model_path, artifact, kiln_run):
    x = np.random.default_rng(3).standard_normal((32, 48)).astype(np.float32)
    want = numerics.ort_session(model_path).run(None, {"x": x})[0]
    with tempfile.TemporaryDirectory() as work:
        np.save(os.path.join(work, "x.npy"), x)
        out = os.path.join(work, "out")
        ran = subprocess.run(
            [kiln_run, artifact, "--device", "emu", "-i",
             f"x={os.path.join(work, 'x.npy')}", "-o", out],
            capture_output=True, text=True)
        if ran.returncode != 0:
            print("FAIL: kiln-run:", ran.stderr.strip())
            return 1
        files = [f for f in os.listdir(out) if f.endswith(".npy")]
        got = np.load(os.path.join(out, files[0]))
    result = numerics.compare(got, want, "bf16")
    print(f"{result.figures()} {'ok' if result.ok else 'FAIL'}")
    return 0 if result.ok else 1


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("model")
    p.add_argument("out")
    p = sub.add_parser("check-cache")
    p.add_argument("cache")
    p.add_argument("--entries", type=int, required=True)
    p.add_argument("--device", required=True)
    p = sub.add_parser("edit")
    p.add_argument("cache")
    p.add_argument("out")
    p.add_argument("--kiln-version")
    p.add_argument("--unsupported", action="store_true")
    p = sub.add_parser("compare")
    p.add_argument("model")
    p.add_argument("artifact")
    p.add_argument("--kiln-run", default="kiln-run")
    args = parser.parse_args()
    if args.command == "model":
        make_model(args.out)
        return 0
    if args.command == "check-cache":
        return check_cache(args.cache, args.entries, args.device)
    if args.command == "edit":
        return edit(args.cache, args.out, args.kiln_version, args.unsupported)
    return compare(args.model, args.artifact, args.kiln_run)


if __name__ == "__main__":
    sys.exit(main())
