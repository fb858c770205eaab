#!/usr/bin/env python3
"""RNN, GRU and LSTM models on emu against onnxruntime.

Usage: recurrent_models.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                           [--kilnc-flag FLAG]... [--only NAME,...] [--list]

Each model is compiled by kilnc (fp32), run on emu and compared with
onnxruntime (CPU, graph optimizations off: scripts/numerics.py's
ort_session) on the same seeded inputs, every output element by element by
the project's fp32 rule (scripts/numerics.py: relative L2 <= 1e-4, each
element within 1e-4 |want| + 6e-4 rms(want)).

The small models (T 6, B 3, I 5, H 4) cover what the ONNX node tests do
not: both directions at once with sequence_lens, initial states, peepholes
and clip; every activation with alpha/beta; input_forget; GRU's
linear_before_reset; layout 1 (onnxruntime's CPU kernels refuse layout 1,
so its reference is the layout-0 model on the transposed input, the
outputs transposed back). The spec says activation_alpha and
activation_beta are consumed in the order of the activations; onnxruntime's
RNN kernel indexes them by direction instead, so the RNN models give lists
on which both readings agree. `lstm-2layer` is the issue's sequence model: a
bidirectional 2-layer LSTM, B 8, T 100, input 64, H 256; `lstm-batch40`
runs 40 sequences of their own lengths (the kernel's batch chunks).

One line per model:  <name>: persistent <N>, <figures> ok|FAIL, N the
persistent recurrence kernels kilnc --stats lists (0: the time loops were
unrolled, kilnc --recurrence=unroll).
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

F = TensorProto.FLOAT
I32 = TensorProto.INT32


def gates(op):
    return {"RNN": 1, "GRU": 3, "LSTM": 4}[op]


def recurrent(op, name, t, b, i, h, *, direction="forward", layout=0,
              bias=True, seq_lens=None, init_h=False, init_c=False,
              peepholes=False, outputs=("Y", "Y_h", "Y_c"), scale=0.5,
              seed=0, **attrs):
    """One recurrent node with weights as initializers; returns the model
    and its feeds (X, and the optional inputs that are graph inputs)."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = gates(op)
    inits = [
        numpy_helper.from_array(
            (scale * rng.standard_normal((d, g * h, i))).astype(np.float32), "W"),
        numpy_helper.from_array(
            (scale * rng.standard_normal((d, g * h, h))).astype(np.float32), "R"),
    ]
    inputs = ["X", "W", "R"]
    x_shape = [t, b, i] if layout == 0 else [b, t, i]
    state = [d, b, h] if layout == 0 else [b, d, h]
    feeds = {"X": rng.standard_normal(x_shape).astype(np.float32)}
    graph_inputs = [helper.make_tensor_value_info("X", F, x_shape)]
    optional = [("B", bias), ("sequence_lens", seq_lens is not None),
                ("initial_h", init_h)]
    if op == "LSTM":
        optional += [("initial_c", init_c), ("P", peepholes)]
    used = [k for k, (_, on) in enumerate(optional) if on]
    last = max(used) if used else -1
    for k, (input_name, on) in enumerate(optional):
        if k > last:
            break
        if not on:
            inputs.append("")
            continue
        inputs.append(input_name)
        if input_name == "B":
            inits.append(numpy_helper.from_array(
                (scale * rng.standard_normal((d, 2 * g * h))).astype(
                    np.float32), "B"))
        elif input_name == "sequence_lens":
            feeds[input_name] = np.array(seq_lens, np.int32)
            graph_inputs.append(helper.make_tensor_value_info(
                input_name, I32, [b]))
        elif input_name == "P":
            inits.append(numpy_helper.from_array(
                (scale * rng.standard_normal((d, 3 * h))).astype(np.float32),
                "P"))
        else:
            feeds[input_name] = rng.standard_normal(state).astype(np.float32)
            graph_inputs.append(helper.make_tensor_value_info(
                input_name, F, state))
    outs = [o for o in outputs if op == "LSTM" or o != "Y_c"]
    node = helper.make_node(op, inputs, outs, name=name, hidden_size=h,
                            direction=direction, **attrs)
    if layout:
        node.attribute.append(helper.make_attribute("layout", layout))
    graph = helper.make_graph([node], name, graph_inputs, [], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    types = {v.name: v for v in inferred.graph.value_info}
    m.graph.output.extend(types[o] for o in outs)
    onnx.checker.check_model(m, full_check=True)
    return m, feeds


def to_layout0(m, feeds):
    """The layout-0 twin of a layout-1 single-node model, its feeds, and how
    to bring its outputs back to layout 1."""
    twin = onnx.ModelProto()
    twin.CopyFrom(m)
    node = twin.graph.node[0]
    for a in node.attribute:
        if a.name == "layout":
            a.i = 0
    del twin.graph.output[:]
    for value in twin.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name == "X" or value.name.startswith("initial_"):
            d0, d1 = dims[0].dim_value, dims[1].dim_value
            dims[0].dim_value, dims[1].dim_value = d1, d0
    inferred = onnx.shape_inference.infer_shapes(twin, strict_mode=True)
    types = {v.name: v for v in inferred.graph.value_info}
    twin.graph.output.extend(types[o] for o in node.output)
    twin_feeds = {k: (np.ascontiguousarray(np.swapaxes(v, 0, 1))
                      if k == "X" or k.startswith("initial_") else v)
                  for k, v in feeds.items()}

    def back(name, value):
        if name == "Y":  # [T, D, B, H] -> [B, T, D, H]
            return np.transpose(value, (2, 0, 1, 3))
        return np.swapaxes(value, 0, 1)
    return twin, twin_feeds, back


def two_layer_lstm(t=100, b=8, i=64, h=256, seed=1):
    """Bidirectional 2-layer LSTM: layer 2 reads layer 1's Y as
    [T, B, 2H]. Outputs: layer 2's Y, and both layers' Y_h and Y_c."""
    rng = np.random.default_rng(seed)
    # Uniform(-1/sqrt(H), 1/sqrt(H)) as PyTorch initialises an LSTM.
    k = 1.0 / np.sqrt(h)

    def w(name, *shape):
        return numpy_helper.from_array(
            rng.uniform(-k, k, shape).astype(np.float32), name)
    inits = [w("W1", 2, 4 * h, i), w("R1", 2, 4 * h, h), w("B1", 2, 8 * h),
             w("W2", 2, 4 * h, 2 * h), w("R2", 2, 4 * h, h), w("B2", 2, 8 * h),
             numpy_helper.from_array(np.array([t, b, 2 * h], np.int64),
                                     "shape2")]
    nodes = [
        helper.make_node("LSTM", ["X", "W1", "R1", "B1"], ["Y1", "H1", "C1"],
                         name="lstm1", hidden_size=h,
                         direction="bidirectional"),
        helper.make_node("Transpose", ["Y1"], ["Y1t"], name="t1",
                         perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["Y1t", "shape2"], ["X2"], name="r1"),
        helper.make_node("LSTM", ["X2", "W2", "R2", "B2"], ["Y", "H2", "C2"],
                         name="lstm2", hidden_size=h,
                         direction="bidirectional"),
    ]
    graph = helper.make_graph(
        nodes, "lstm2layer", [helper.make_tensor_value_info("X", F, [t, b, i])],
        [], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    types = {v.name: v for v in inferred.graph.value_info}
    m.graph.output.extend(types[o] for o in ["Y", "H1", "C1", "H2", "C2"])
    onnx.checker.check_model(m, full_check=True)
    feeds = {"X": rng.standard_normal((t, b, i)).astype(np.float32)}
    return m, feeds


SMALL = dict(t=6, b=3, i=5, h=4)
MODELS = {
    "lstm-bidir-full": lambda: recurrent(
        "LSTM", "lstm_bidir_full", **SMALL, direction="bidirectional",
        seq_lens=[6, 2, 4], init_h=True, init_c=True, peepholes=True,
        clip=1.5, scale=0.8),
    "lstm-reverse-activations": lambda: recurrent(
        "LSTM", "lstm_rev_act", **SMALL, direction="reverse", init_h=True,
        activations=["HardSigmoid", "LeakyRelu", "ScaledTanh"],
        activation_alpha=[0.3, 0.2, 1.7], activation_beta=[0.4, 0.8]),
    "lstm-input-forget": lambda: recurrent(
        "LSTM", "lstm_if", **SMALL, input_forget=1, peepholes=True),
    "lstm-layout1": lambda: recurrent(
        "LSTM", "lstm_layout1", **SMALL, direction="bidirectional", layout=1,
        seq_lens=[5, 6, 1], init_h=True, init_c=True),
    "gru-bidir-lbr": lambda: recurrent(
        "GRU", "gru_bidir_lbr", **SMALL, direction="bidirectional",
        linear_before_reset=1, seq_lens=[3, 6, 5], init_h=True),
    "gru-reverse-clip": lambda: recurrent(
        "GRU", "gru_rev_clip", **SMALL, direction="reverse", clip=0.7,
        scale=1.0, init_h=True),
    "gru-activations": lambda: recurrent(
        "GRU", "gru_act", **SMALL, direction="bidirectional",
        activations=["Sigmoid", "Softsign", "HardSigmoid", "Elu"],
        activation_alpha=[0.25, 0.9], activation_beta=[0.45]),
    "gru-layout1": lambda: recurrent(
        "GRU", "gru_layout1", **SMALL, layout=1, seq_lens=[2, 6, 4],
        init_h=True),
    "rnn-bidir-activations": lambda: recurrent(
        "RNN", "rnn_bidir_act", **SMALL, direction="bidirectional",
        activations=["Relu", "Affine"], activation_alpha=[0.6, 0.6],
        activation_beta=[0.1, 0.1], seq_lens=[6, 1, 3], init_h=True),
    "rnn-thresholded-softplus": lambda: recurrent(
        "RNN", "rnn_thr", **SMALL, direction="bidirectional",
        activations=["ThresholdedRelu", "Softplus"],
        activation_alpha=[0.2, 0.2]),
    "rnn-reverse-elu": lambda: recurrent(
        "RNN", "rnn_rev_elu", **SMALL, direction="reverse",
        activations=["Elu"], activation_alpha=[0.5], bias=False),
    "lstm-2layer": two_layer_lstm,
    # 40 sequences: the persistent kernel cuts them into chunks of 16 rows
    # (three clusters, the last holding 8), each with its own lengths.
    "lstm-batch40": lambda: recurrent(
        "LSTM", "lstm_b40", t=8, b=40, i=16, h=32, direction="bidirectional",
        seq_lens=[(3 * k) % 9 for k in range(40)], init_h=True, init_c=True,
        scale=0.4),
}


def reference(m, feeds):
    layout = [a.i for a in m.graph.node[0].attribute if a.name == "layout"]
    if layout and layout[0] == 1:
        twin, twin_feeds, back = to_layout0(m, feeds)
        session = numerics.ort_session(twin.SerializeToString())
        names = [o.name for o in session.get_outputs()]
        return {n: back(n, v) for n, v in
                zip(names, session.run(None, twin_feeds))}
    session = numerics.ort_session(m.SerializeToString())
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def run_model(args, name, models=None):
    """Compiles and runs model `name` of `models` (default MODELS) on emu and
    compares it with onnxruntime: (report line, ok)."""
    m, feeds = (models or MODELS)[name]()
    work = os.path.join(args.workdir, name)
    os.makedirs(os.path.join(work, "out"), exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    want = reference(m, feeds)
    artifact = os.path.join(work, "m.kiln")
    flags = list(getattr(args, "kilnc_flag", None) or [])
    compiled = subprocess.run([args.kilnc, path, "-o", artifact, "--stats"]
                              + flags, capture_output=True, text=True)
    if compiled.returncode != 0:
        return f"{name}: kilnc failed: {compiled.stderr.strip()} FAIL", False
    # How the time loops were compiled: kilnc --stats lists the persistent
    # recurrence kernels (none when the loops are unrolled).
    persistent = 0
    for line in compiled.stdout.splitlines() + compiled.stderr.splitlines():
        if line.startswith("recurrences: "):
            persistent = int(line.split()[1])
    command = [args.kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(work, "out")]
    for input_name, data in feeds.items():
        file = os.path.join(work, f"{input_name}.npy")
        np.save(file, data)
        command += ["-i", f"{input_name}={file}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode != 0:
        return f"{name}: kiln-run failed: {ran.stderr.strip()} FAIL", False
    results = []
    for output, expected in want.items():
        out = os.path.join(work, "out", f"{output}.npy")
        got = np.load(out) if os.path.exists(out) else None
        results.append(numerics.compare(got, expected, "fp32", output))
    combined = numerics.combine(results, name)
    line = combined.line()
    if getattr(args, "kilnc_flag", None) is not None:
        line = line.replace(f"{name}: ", f"{name}: persistent {persistent}, ", 1)
    return line, combined.ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--kilnc-flag", action="append", default=[],
                    help="a kilnc flag for every model (repeatable), e.g. "
                    "--kilnc-flag=--recurrence=unroll")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    if args.list:
        print("\n".join(names))
        return 0
    failures = 0
    for name in names:
        line, ok = run_model(args, name)
        print(line, flush=True)
        failures += not ok
    print(f"{len(names)} models, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
