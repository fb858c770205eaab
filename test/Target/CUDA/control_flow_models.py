#!/usr/bin/env python3
"""If and Loop models on emu against onnxruntime.

Usage: control_flow_models.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                              [--only NAME,...]

  loop-mlp      a Loop (trip count 4, a constant) around a small network:
                h = tanh(h W + b) + x, with W, b and x captured from the
                outer graph; outputs the final h and the per-iteration h
                stacked (a scan output);
  if-true/-false an If that chooses between two subgraphs (relu(x W1) and
                sigmoid(x) W2) by a bool graph input, run with the input
                true and false.

Each is compiled by kilnc (fp32), run on emu and compared with onnxruntime
(graph optimizations off) element by element by the project's fp32 rule
(scripts/numerics.py). One line per model:  <name>: <figures> ok|FAIL
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import recurrent_models  # noqa: E402

F = TensorProto.FLOAT


def finish(graph, outputs):
    """The model of `graph` with its outputs (name, shape) declared."""
    graph.output.extend(helper.make_tensor_value_info(name, F, shape)
                        for name, shape in outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def loop_mlp():
    rng = np.random.default_rng(3)
    b, d = 4, 16
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(d).astype(np.float32),
                                "bias"),
        numpy_helper.from_array(np.array(4, np.int64), "M"),
    ]
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "W"], ["hw"]),
         helper.make_node("Add", ["hw", "bias"], ["hb"]),
         helper.make_node("Tanh", ["hb"], ["ht"]),
         helper.make_node("Add", ["ht", "x"], ["h_next"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["h_next"], ["h_scan"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h", F, [b, d])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_next", F, [b, d]),
         helper.make_tensor_value_info("h_scan", F, [b, d])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "h0"], ["h_final", "h_all"],
                          name="loop", body=body)],
        "loop_mlp",
        [helper.make_tensor_value_info("x", F, [b, d]),
         helper.make_tensor_value_info("h0", F, [b, d])], [], inits)
    feeds = {"x": rng.standard_normal((b, d)).astype(np.float32),
             "h0": rng.standard_normal((b, d)).astype(np.float32)}
    return finish(graph, [("h_final", [b, d]), ("h_all", [4, b, d])]), feeds


def if_branches(cond):
    rng = np.random.default_rng(5)
    b, d = 4, 8
    inits = [numpy_helper.from_array(
        rng.standard_normal((d, d)).astype(np.float32), n) for n in ("W1", "W2")]
    then_branch = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["t0"]),
         helper.make_node("Relu", ["t0"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", F, [b, d])])
    else_branch = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["e0"]),
         helper.make_node("MatMul", ["e0", "W2"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", F, [b, d])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if",
                          then_branch=then_branch, else_branch=else_branch)],
        "if_branches",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", F, [b, d])], [], inits)
    feeds = {"c": np.array(cond, np.bool_),
             "x": rng.standard_normal((b, d)).astype(np.float32)}
    return finish(graph, [("y", [b, d])]), feeds


MODELS = {
    "loop-mlp": loop_mlp,
    "if-true": lambda: if_branches(True),
    "if-false": lambda: if_branches(False),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    failures = 0
    for name in names:
        line, ok = recurrent_models.run_model(args, name, MODELS)
        print(line, flush=True)
        failures += not ok
    print(f"{len(names)} models, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
