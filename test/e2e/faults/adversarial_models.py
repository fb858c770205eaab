#!/usr/bin/env python3
"""Writes the adversarial-size ONNX models of docs/reliability.md "Limits".

Generated here, never committed (some declare gigabytes; none holds them):

  big-input     a Relu on an input of 2^31 floats (8 GiB declared)
  chain-N       a chain of N Relus, each feeding the next (depth N)
  wide-N        N independent Relus of one input, N outputs (N nodes, depth 1)
  nested-if-N   If inside If, N deep; the innermost branches are Identity
  short-init    an initializer declaring 1000 floats and holding 1
  external-4g   an initializer of 2^30 floats (4 GiB) in external data whose
                file holds 16 bytes

Usage: adversarial_models.py --work DIR CASE...
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def save(model, path):
    # No checker: some of these are invalid on purpose, and the checker
    # would itself load the external data. Bytes pass through as they are.
    with open(path, "wb") as f:
        f.write(model if isinstance(model, bytes) else model.SerializeToString())


def big_input():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "big",
                          [vi("x", [1 << 31])], [vi("y", [1 << 31])])
    return helper.make_model(g, opset_imports=OPSET)


def chain(n):
    nodes = [helper.make_node("Relu", ["x" if i == 0 else f"t{i - 1}"],
                              ["y" if i == n - 1 else f"t{i}"]) for i in range(n)]
    g = helper.make_graph(nodes, "chain", [vi("x", [4])], [vi("y", [4])])
    return helper.make_model(g, opset_imports=OPSET)


def wide(n):
    nodes = [helper.make_node("Relu", ["x"], [f"y{i}"]) for i in range(n)]
    g = helper.make_graph(nodes, "wide", [vi("x", [4])],
                          [vi(f"y{i}", [4]) for i in range(n)])
    return helper.make_model(g, opset_imports=OPSET)


def field(number, payload):
    """A length-delimited protobuf field: tag, varint length, bytes."""
    out = bytearray()
    for value in (number << 3 | 2, len(payload)):
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out) + payload


def nested_if(n):
    """If inside If, n deep: each level's then-branch holds the next If,
    its else-branch an Identity of the outer x. The nesting is encoded by
    hand (GraphProto.node = 1, NodeProto.attribute = 5, AttributeProto.g =
    6): Python's protobuf refuses to build messages nested past ~100
    levels, three per If."""
    def attribute(name, graph_bytes):
        head = helper.make_attribute(name, 0)
        head.ClearField("i")
        head.type = onnx.AttributeProto.GRAPH
        return head.SerializeToString() + field(6, graph_bytes)

    def identity_graph(name, out):
        return helper.make_graph([helper.make_node("Identity", ["x"], [out])], name,
                                 [], [vi(out, [4])]).SerializeToString()

    graph = identity_graph(f"leaf{n}", f"o{n}")
    for level in range(n - 1, 0, -1):
        node = helper.make_node("If", ["c"], [f"o{level}"]).SerializeToString()
        node += field(5, attribute("then_branch", graph))
        node += field(5, attribute("else_branch",
                                   identity_graph(f"else{level}", f"e{level}")))
        if level == 1:
            break
        shell = helper.make_graph([], f"then{level}", [], [vi(f"o{level}", [4])])
        graph = shell.SerializeToString() + field(1, node)
    shell = helper.make_graph([], "nested", [vi("c", [], TensorProto.BOOL), vi("x", [4])],
                              [vi("o1", [4])])
    model = helper.make_model(shell, opset_imports=OPSET)
    body = model.graph.SerializeToString() + field(1, node)
    model.ClearField("graph")
    return model.SerializeToString() + field(7, body)  # ModelProto.graph = 7


def short_init():
    w = TensorProto()  # make_tensor would refuse it
    w.name, w.data_type, w.raw_data = "W", TensorProto.FLOAT, np.float32(1).tobytes()
    w.dims.append(1000)
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "short",
                          [vi("x", [1000])], [vi("y", [1000])], [w])
    return helper.make_model(g, opset_imports=OPSET)


def external_4g(work):
    with open(os.path.join(work, "external-4g.bin"), "wb") as f:
        f.write(np.ones(4, np.float32).tobytes())
    w = TensorProto()
    w.name = "W"
    w.data_type = TensorProto.FLOAT
    w.dims.extend([1 << 30])
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "external-4g.bin"), ("offset", "0"),
                       ("length", str(4 << 30))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "ext",
                          [vi("x", [1 << 30])], [vi("y", [1 << 30])], [w])
    return helper.make_model(g, opset_imports=OPSET)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("cases", nargs="+")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    for case in args.cases:
        kind, _, count = case.rpartition("-") if case[-1].isdigit() else (case, "", "")
        if case == "big-input":
            model = big_input()
        elif kind == "chain":
            model = chain(int(count))
        elif kind == "wide":
            model = wide(int(count))
        elif kind == "nested-if":
            model = nested_if(int(count))
        elif case == "short-init":
            model = short_init()
        elif case == "external-4g":
            model = external_4g(args.work)
        else:
            sys.exit(f"unknown case '{case}'")
        save(model, os.path.join(args.work, case + ".onnx"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
