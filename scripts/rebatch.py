#!/usr/bin/env python3
"""Writes a copy of an ONNX model with batch size N.

The light models fix batch 1 in their input and output shapes and in the
shape constant of their Reshape (e.g. [1, 2048] before the classifier). This
sets dimension 0 of every graph input and output to N and, in each Reshape
shape initializer whose first entry is the old batch, writes 0 there ("copy
that dimension from the input"), so the model computes the same function on
N images.

usage: rebatch.py MODEL.onnx OUT.onnx N
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    model = onnx.load(src)
    graph = model.graph
    old = None
    # Old IR versions list initializers among the graph inputs too (the
    # light ResNet-50 has a [1, 1] one that nothing reads): those keep their
    # shape, or onnxruntime refuses the model.
    initializers = {i.name for i in graph.initializer}
    for value in [v for v in graph.input if v.name not in initializers] + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            old = old or dims[0].dim_value
            dims[0].dim_value = n
    inits = {i.name: i for i in graph.initializer}
    for node in graph.node:
        if node.op_type != "Reshape" or node.input[1] not in inits:
            continue
        shape = numpy_helper.to_array(inits[node.input[1]]).copy()
        if shape.size and shape[0] == old:
            shape[0] = 0
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(
                shape.astype(np.int64), node.input[1]))
    del graph.value_info[:]
    onnx.save(model, dst)


if __name__ == "__main__":
    main()
