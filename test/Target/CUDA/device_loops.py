#!/usr/bin/env python3
"""Loops that run on the device (a run-time trip count or condition) on emu
against onnxruntime.

Usage: device_loops.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                       [--only NAME,...]

Each model is compiled once (kilnc --stats must list its device loops, the
While regions of the launch list) and run on emu at several trip counts and
conditions chosen at run time; every output is compared with onnxruntime
(graph optimizations off) element by element by the project's fp32 rule
(scripts/numerics.py). The models:

  mlp          h = tanh(h W + b) + x for M iterations, M a graph input; W,
               b and x captured from the outer graph (M = 0, 1, 5);
  while        h = 1.25 h + 0.1 x while sum(h^2) < 1000 and i < M: the
               body decides when to stop (M and the first condition are
               inputs too, one run with it false);
  nested       a loop of M1 iterations around a loop of M2, the inner body
               reading the outer counter and a value of the main graph
               (M1 x M2 = 3 x 4, 0 x 4, 2 x 0, 1 x 1);
  long         M = 1500, a constant above the 1,024 iterations Kiln
               unrolls: the same device loop;
  pass-through one carried value the body returns unchanged (a copy in the
               body function) next to one it updates;
  body-weights a MatMul on a weight the body's own initializer holds and
               one captured from the main graph;
  greedy-decode a greedy decoder: the last token picks the next embedding
               (Gather), a tanh cell, ArgMax, stop at end-of-sequence or
               after M = 20 steps (three starting states);
  if-heavy     an If on a run-time bool, an LSTM in one branch and a
               MatMul in the other: each branch a device loop of at most
               one iteration, so only the chosen one runs (c true, false).

One line per run:  <name> <run>: device loops N, <figures> ok|FAIL, then
"<runs> runs, <failures> failures".
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import numerics  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, name, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def scalar(v, dtype=np.int64):
    return np.array(v, dtype)


def mlp():
    rng = np.random.default_rng(11)
    b, d = 4, 16
    inits = [numpy_helper.from_array(
                 (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
                 "W"),
             numpy_helper.from_array(rng.standard_normal(d).astype(np.float32),
                                     "bias")]
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "W"], ["hw"]),
         helper.make_node("Add", ["hw", "bias"], ["hb"]),
         helper.make_node("Tanh", ["hb"], ["ht"]),
         helper.make_node("Add", ["ht", "x"], ["h_next"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("h", F, [b, d])],
        [vi("cond_out", B, []), vi("h_next", F, [b, d])])
    m = model([helper.make_node("Loop", ["M", "", "h0"], ["h_final"],
                                name="loop", body=body)],
              "mlp", [vi("M", I64, []), vi("x", F, [b, d]),
                      vi("h0", F, [b, d])], [vi("h_final", F, [b, d])], inits)
    x = rng.standard_normal((b, d)).astype(np.float32)
    h0 = rng.standard_normal((b, d)).astype(np.float32)
    return m, 1, [(f"M={n}", {"M": scalar(n), "x": x, "h0": h0})
                  for n in (0, 1, 5)]


def while_loop():
    rng = np.random.default_rng(12)
    body = helper.make_graph(
        [helper.make_node("Mul", ["h", "growth"], ["hg"]),
         helper.make_node("Mul", ["x", "tenth"], ["xt"]),
         helper.make_node("Add", ["hg", "xt"], ["h_next"]),
         helper.make_node("Mul", ["h_next", "h_next"], ["sq"]),
         helper.make_node("ReduceSum", ["sq"], ["energy"], keepdims=0),
         helper.make_node("Less", ["energy", "limit"], ["cond_out"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("h", F, [3, 5])],
        [vi("cond_out", B, []), vi("h_next", F, [3, 5])],
        [numpy_helper.from_array(np.array(1.25, np.float32), "growth"),
         numpy_helper.from_array(np.array(0.1, np.float32), "tenth")])
    m = model([helper.make_node("Loop", ["M", "c0", "h0"], ["h_final"],
                                name="loop", body=body),
               helper.make_node("Mul", ["h_final", "x"], ["y"])],
              "while", [vi("M", I64, []), vi("c0", B, []), vi("x", F, [3, 5]),
                        vi("h0", F, [3, 5])], [vi("y", F, [3, 5])],
              [numpy_helper.from_array(np.array(1000, np.float32), "limit")])
    x = rng.standard_normal((3, 5)).astype(np.float32)
    h0 = rng.standard_normal((3, 5)).astype(np.float32)
    return m, 1, [(f"M={n},c0={c}", {"M": scalar(n), "c0": scalar(c, np.bool_),
                                     "x": x, "h0": h0})
                  for n, c in ((100, True), (2, True), (100, False))]


def nested():
    rng = np.random.default_rng(13)
    inner = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Cast", ["j"], ["fj"], to=F),
         helper.make_node("Mul", ["fi", "fj"], ["ij"]),
         helper.make_node("Mul", ["a", "decay"], ["ad"]),
         helper.make_node("Add", ["ad", "ij"], ["a1"]),
         helper.make_node("Add", ["a1", "x"], ["a_next"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "inner", [vi("j", I64, []), vi("c", B, []), vi("a", F, [6])],
        [vi("c_out", B, []), vi("a_next", F, [6])])
    outer = helper.make_graph(
        [helper.make_node("Loop", ["M2", "", "acc"], ["acc_in"], name="inner",
                          body=inner),
         helper.make_node("Sin", ["acc_in"], ["acc_next"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "outer", [vi("i", I64, []), vi("c", B, []), vi("acc", F, [6])],
        [vi("c_out", B, []), vi("acc_next", F, [6])])
    m = model([helper.make_node("Loop", ["M1", "", "acc0"], ["acc_final"],
                                name="outer", body=outer)],
              "nested", [vi("M1", I64, []), vi("M2", I64, []), vi("x", F, [6]),
                         vi("acc0", F, [6])], [vi("acc_final", F, [6])],
              [numpy_helper.from_array(np.array(0.5, np.float32), "decay")])
    x = rng.standard_normal(6).astype(np.float32)
    acc0 = rng.standard_normal(6).astype(np.float32)
    return m, 2, [(f"M1={p},M2={q}", {"M1": scalar(p), "M2": scalar(q),
                                      "x": x, "acc0": acc0})
                  for p, q in ((3, 4), (0, 4), (2, 0), (1, 1))]


def long_loop():
    rng = np.random.default_rng(14)
    body = helper.make_graph(
        [helper.make_node("Mul", ["y", "keep"], ["yk"]),
         helper.make_node("Mul", ["x", "step"], ["xs"]),
         helper.make_node("Add", ["yk", "xs"], ["y_next"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c", B, []), vi("y", F, [8])],
        [vi("c_out", B, []), vi("y_next", F, [8])],
        [numpy_helper.from_array(np.array(0.999, np.float32), "keep"),
         numpy_helper.from_array(np.array(0.001, np.float32), "step")])
    m = model([helper.make_node("Loop", ["M", "", "y0"], ["y_final"],
                                name="loop", body=body)],
              "long", [vi("x", F, [8]), vi("y0", F, [8])],
              [vi("y_final", F, [8])],
              [numpy_helper.from_array(np.array(1500, np.int64), "M")])
    feeds = {"x": rng.standard_normal(8).astype(np.float32),
             "y0": rng.standard_normal(8).astype(np.float32)}
    return m, 1, [("M=1500", feeds)]


def pass_through():
    rng = np.random.default_rng(15)
    body = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["a_next"]),
         helper.make_node("Add", ["b", "a"], ["b_next"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c", B, []), vi("a", F, [2, 3]),
                 vi("b", F, [2, 3])],
        [vi("c_out", B, []), vi("a_next", F, [2, 3]), vi("b_next", F, [2, 3])])
    m = model([helper.make_node("Loop", ["M", "", "a0", "b0"],
                                ["a_final", "b_final"], name="loop", body=body)],
              "pass_through", [vi("M", I64, []), vi("a0", F, [2, 3]),
                               vi("b0", F, [2, 3])],
              [vi("a_final", F, [2, 3]), vi("b_final", F, [2, 3])])
    feeds = {"M": scalar(3), "a0": rng.standard_normal((2, 3)).astype(np.float32),
             "b0": rng.standard_normal((2, 3)).astype(np.float32)}
    return m, 1, [("M=3", feeds)]


def body_weights():
    rng = np.random.default_rng(16)
    d = 8
    wb = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    wm = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "Wb"], ["h1"]),
         helper.make_node("Relu", ["h1"], ["h2"]),
         helper.make_node("MatMul", ["h2", "Wm"], ["h3"]),
         helper.make_node("Add", ["h3", "h"], ["h_next"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", [vi("i", I64, []), vi("c", B, []), vi("h", F, [2, d])],
        [vi("c_out", B, []), vi("h_next", F, [2, d])],
        [numpy_helper.from_array(wb, "Wb")])
    m = model([helper.make_node("Loop", ["M", "", "h0"], ["h_final"],
                                name="loop", body=body)],
              "body_weights", [vi("M", I64, []), vi("h0", F, [2, d])],
              [vi("h_final", F, [2, d])], [numpy_helper.from_array(wm, "Wm")])
    feeds = {"M": scalar(3), "h0": rng.standard_normal((2, d)).astype(np.float32)}
    return m, 1, [("M=3", feeds)]


def greedy_decode():
    """A greedy decoder as exported seq2seq models write it: the token the
    last step chose picks the next input embedding (Gather), a GRU-like
    cell updates h, ArgMax picks the next token, and the loop stops at the
    end-of-sequence token or after M steps. Carries an int64 token; the
    steps taken and the last token are data-dependent."""
    rng = np.random.default_rng(17)
    vocab, d = 12, 16
    emb = rng.standard_normal((vocab, d)).astype(np.float32)
    w = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    u = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    v = (rng.standard_normal((d, vocab)) * 2).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Gather", ["E", "tok"], ["e"], axis=0),
         helper.make_node("MatMul", ["e", "Wx"], ["ex"]),
         helper.make_node("MatMul", ["h", "Uh"], ["hu"]),
         helper.make_node("Add", ["ex", "hu"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_next"]),
         helper.make_node("MatMul", ["h_next", "Vo"], ["logits"]),
         helper.make_node("ArgMax", ["logits"], ["tok_next"], axis=1,
                          keepdims=0),
         helper.make_node("Equal", ["tok_next", "eos"], ["done"]),
         helper.make_node("Not", ["done"], ["go1"]),
         helper.make_node("Squeeze", ["go1"], ["cond_out"])],
        "step", [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, d]),
                 vi("tok", I64, [1])],
        [vi("cond_out", B, []), vi("h_next", F, [1, d]),
         vi("tok_next", I64, [1])])
    m = model([helper.make_node("Loop", ["M", "", "h0", "bos"],
                                ["h_final", "tok_final"], name="decode",
                                body=body)],
              "greedy", [vi("M", I64, []), vi("h0", F, [1, d])],
              [vi("h_final", F, [1, d]), vi("tok_final", I64, [1])],
              [numpy_helper.from_array(emb, "E"),
               numpy_helper.from_array(w, "Wx"),
               numpy_helper.from_array(u, "Uh"),
               numpy_helper.from_array(v, "Vo"),
               numpy_helper.from_array(np.array([0], np.int64), "bos"),
               numpy_helper.from_array(np.array([1], np.int64), "eos")])
    runs = []
    for seed in range(3):
        h0 = np.random.default_rng(100 + seed).standard_normal(
            (1, d)).astype(np.float32)
        runs.append((f"seed={seed}", {"M": scalar(20), "h0": h0}))
    return m, 1, runs


def if_heavy():
    """An If on a run-time bool whose branches hold heavy work, as speech
    models write it (an LSTM in one branch, a MatMul in the other): each
    branch is a device loop of at most one iteration, so only the chosen
    one runs; a captured weight and input in both."""
    rng = np.random.default_rng(18)
    t, b, d, h = 5, 2, 6, 8
    w = rng.standard_normal((1, 4 * h, d)).astype(np.float32) * 0.3
    r = rng.standard_normal((1, 4 * h, h)).astype(np.float32) * 0.3
    p = rng.standard_normal((d, h)).astype(np.float32) * 0.3
    then_branch = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R"], ["", "yh"], hidden_size=h),
         helper.make_node("Squeeze", ["yh", "zero"], ["out"])],
        "then", [], [vi("out", F, [b, h])])
    else_branch = helper.make_graph(
        [helper.make_node("ReduceMean", ["x"], ["xm"], axes=[0], keepdims=0),
         helper.make_node("MatMul", ["xm", "P"], ["xp"]),
         helper.make_node("Tanh", ["xp"], ["out2"])],
        "else", [], [vi("out2", F, [b, h])])
    m = model([helper.make_node("If", ["c"], ["y"], name="branch",
                                then_branch=then_branch,
                                else_branch=else_branch)],
              "if_heavy", [vi("c", B, []), vi("x", F, [t, b, d])],
              [vi("y", F, [b, h])],
              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"),
               numpy_helper.from_array(p, "P"),
               numpy_helper.from_array(np.array([0], np.int64), "zero")])
    x = rng.standard_normal((t, b, d)).astype(np.float32)
    return m, 2, [(f"c={c}", {"c": scalar(c, np.bool_), "x": x})
                  for c in (True, False)]


MODELS = {
    "mlp": mlp,
    "while": while_loop,
    "nested": nested,
    "long": long_loop,
    "pass-through": pass_through,
    "body-weights": body_weights,
    "greedy-decode": greedy_decode,
    "if-heavy": if_heavy,
}


def run(args, name):
    """Compiles model `name` once and runs it at each of its run-time
    settings: (report lines, failures)."""
    m, loops, runs = MODELS[name]()
    work = os.path.join(args.workdir, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    artifact = os.path.join(work, "m.kiln")
    compiled = subprocess.run([args.kilnc, path, "-o", artifact, "--stats"],
                              capture_output=True, text=True)
    if compiled.returncode != 0:
        return [f"{name}: kilnc failed: {compiled.stderr.strip()} FAIL"], 1
    found = 0
    for line in compiled.stdout.splitlines():
        if line.startswith("device loops: "):
            found = int(line.split()[2])
    session = numerics.ort_session(m.SerializeToString())
    names = [o.name for o in session.get_outputs()]
    lines, failures = [], 0
    for label, feeds in runs:
        want = dict(zip(names, session.run(None, feeds)))
        out = os.path.join(work, label.replace(",", "_").replace("=", ""))
        command = [args.kiln_run, artifact, "--device", "emu", "-o", out]
        for input_name, data in feeds.items():
            file = os.path.join(work, f"{input_name}.npy")
            np.save(file, data)
            command += ["-i", f"{input_name}={file}"]
        ran = subprocess.run(command, capture_output=True, text=True)
        if ran.returncode != 0:
            lines.append(f"{name} {label}: kiln-run failed: "
                         f"{ran.stderr.strip()} FAIL")
            failures += 1
            continue
        results = []
        for output, expected in want.items():
            file = os.path.join(out, f"{output}.npy")
            got = np.load(file) if os.path.exists(file) else None
            results.append(numerics.compare(got, expected, "fp32", output))
        combined = numerics.combine(results, f"{name} {label}")
        ok = combined.ok and found == loops
        line = combined.line().replace(
            f"{name} {label}: ", f"{name} {label}: device loops {found}, ", 1)
        if combined.ok and not ok:
            line = line[:line.rfind(" ok")] + f" (expected {loops}) FAIL"
        lines.append(line)
        failures += not ok
    return lines, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    total = failures = 0
    for name in names:
        lines, failed = run(args, name)
        for line in lines:
            print(line, flush=True)
        total += len(lines)
        failures += failed
    print(f"{total} runs, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
