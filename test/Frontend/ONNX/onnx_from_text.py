#!/usr/bin/env python3
"""Builds an .onnx file from a model in ONNX textual syntax.

Usage: onnx_from_text.py INPUT.onnxtxt -o OUTPUT.onnx [--no-check]

Lines starting with '#' are comments to the ONNX parser, so lit RUN/CHECK
lines can live in the same file as the model. The textual syntax cannot name
nodes, so a string attribute `_name` becomes the node's name:
`y = Relu <_name = "relu1"> (x)`. --no-check skips the ONNX
checker, for tests that feed deliberately broken models to kilnc.
"""
import argparse
import sys

import onnx
import onnx.parser


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    with open(args.input) as f:
        text = f.read()
    model = onnx.parser.parse_model(text)
    for node in model.graph.node:
        for i, attr in enumerate(node.attribute):
            if attr.name == "_name":
                node.name = attr.s.decode()
                del node.attribute[i]
                break
    if not args.no_check:
        onnx.checker.check_model(model)
    onnx.save(model, args.output)


if __name__ == "__main__":
    sys.exit(main())
