#!/usr/bin/env python3
"""Replaces a model's constant weights with seeded random ones.

Usage: randomize_weights.py IN.onnx OUT.onnx [--seed 0] [--portable]

The light models build their weights with ConstantOfShape (every element the
same), which hides indexing bugs: a kernel that reads the wrong element of a
splat still gets the right value. This turns each ConstantOfShape output and
each float initializer into an initializer of seeded random values, scaled so
activations stay in range: weights ~ N(0, 1/fan_in), BatchNormalization
variances in [0.5, 1.5], scales near 1, biases and means small.

--portable draws from scripts/device/portable_random.py instead of numpy's
Generator: the same bits with any numpy version on any machine (the GPU check
regenerates the models there), with each normal distribution replaced by the
uniform one of the same mean and variance.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def role_of(model):
    """Maps a value name to (op_type, input_index) of its first consumer."""
    roles = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            roles.setdefault(name, (node.op_type, i))
    return roles


def random_tensor(rng, shape, role, gain=1.0):
    op, index = role
    if op == "BatchNormalization":
        if index == 4:  # variance
            return rng.uniform(0.5, 1.5, shape)
        if index == 1:  # scale
            return rng.uniform(0.8, 1.2, shape)
        return rng.normal(0.0, 0.1, shape)  # bias, mean
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:])) if op != "MatMul" else shape[0]
        if op == "Gemm":
            fan_in = shape[-1]
        return rng.normal(0.0, gain / np.sqrt(max(fan_in, 1)), shape)
    return rng.normal(0.0, 0.1, shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gain", type=float, default=1.0,
                    help="scale of the conv/matmul weights' std, "
                         "gain/sqrt(fan_in): sqrt(2) is He initialisation, "
                         "which keeps activations from fading through ReLU "
                         "layers (so outputs are not nearly constant)")
    ap.add_argument("--portable", action="store_true",
                    help="platform-independent generator (portable_random.py)")
    args = ap.parse_args()
    model = onnx.load(args.input)
    if args.portable:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from portable_random import PortableRandom
        rng = PortableRandom(args.seed)
    else:
        rng = np.random.default_rng(args.seed)
    roles = role_of(model)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}

    # ConstantOfShape with a constant shape becomes an initializer (and its
    # shape initializer is dropped if nothing else reads it).
    kept, replaced_shapes = [], set()
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            replaced_shapes.add(node.input[0])
            shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64).tolist()
            value = random_tensor(rng, shape, roles.get(node.output[0], ("", 0)),
                                  args.gain)
            graph.initializer.append(
                numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    still_read = {name for node in graph.node for name in node.input}
    unused = [t for t in graph.initializer
              if t.name in replaced_shapes and t.name not in still_read]
    for t in unused:
        graph.initializer.remove(t)
    # Old IR versions list initializers as graph inputs too; drop those.
    removed = {t.name for t in unused}
    for value in [v for v in graph.input if v.name in removed]:
        graph.input.remove(value)

    for t in list(graph.initializer):
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        array = numpy_helper.to_array(t)
        if array.size < 2:
            continue
        value = random_tensor(rng, list(array.shape), roles.get(t.name, ("", 0)),
                              args.gain)
        t.CopyFrom(numpy_helper.from_array(value.astype(np.float32), t.name))
    onnx.save(model, args.output)


if __name__ == "__main__":
    main()
