#!/usr/bin/env python3
"""Builds a BERT-style transformer encoder layer as an ONNX model.

Usage: make_encoder.py OUTPUT.onnx [--hidden 256 --heads 4 --ffn 1024
                                    --vocab 1000 --seq 128 --batch 1]
                                   [--external-data] [--dynamic-batch]
                                   [--dynamic-seq] [--mean-pool]
                                   [--portable]

The graph is what exporters emit for one encoder layer: token embedding
(Gather) plus position embedding, LayerNormalization, Q/K/V projections
(MatMul + Add), head split through the Shape -> Gather -> Unsqueeze -> Concat
-> Reshape subgraph, scaled dot-product attention with Softmax, head merge
with Reshape [0, 0, -1], output projection, residual Add, LayerNormalization,
and a feed-forward block with the exact (Erf) GELU. Weights are seeded random
initializers; --external-data stores them in OUTPUT.onnx.data next to the
model. --dynamic-batch and --dynamic-seq make the batch and the sequence
length symbolic dims ("batch", "seq"); with --dynamic-seq the position
embedding is a table of --seq rows sliced to the input's length through
Shape -> Gather -> Unsqueeze -> Slice, as exporters write it. --mean-pool
adds a second output, `pooled` [batch, hidden]: the mean of the hidden
states over the sequence (a sentence embedding's ReduceMean). --portable draws them from scripts/device/portable_random.py (the same
bits with any numpy, on any machine; uniform in place of normal, same mean
and variance) instead of numpy's Generator.
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def portable_rng(seed):
    """scripts/device/portable_random.py, found beside this file (as the GPU
    check's copy has it) or in the source tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [here, os.path.join(here, "..", "..", "..", "..", "scripts", "device")]
    from portable_random import PortableRandom
    return PortableRandom(seed)


def build(args):
    rng = portable_rng(0) if args.portable else np.random.default_rng(0)

    def normal(shape, std):
        if args.portable:
            return rng.normal(0.0, std, shape)
        return rng.standard_normal(shape) * std
    h, heads, ffn = args.hidden, args.heads, args.ffn
    head_dim = h // heads
    inits = []
    nodes = []

    def weight(name, shape, scale=0.02):
        inits.append(numpy_helper.from_array(normal(shape, scale).astype(np.float32), name))
        return name

    def const_i64(name, values):
        inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node(op, inputs, outputs=None, **attrs):
        name = f"{op.lower()}_{len(nodes)}"
        outputs = outputs or [name + "_out"]
        nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0]

    def linear(x, n_in, n_out, prefix):
        y = node("MatMul", [x, weight(prefix + ".weight", (n_in, n_out))])
        return node("Add", [y, weight(prefix + ".bias", (n_out,))])

    def layer_norm(x, prefix):
        inits.append(numpy_helper.from_array(
            (1 + normal((h,), 0.1)).astype(np.float32), prefix + ".gamma"))
        return node("LayerNormalization", [x, prefix + ".gamma",
                                           weight(prefix + ".beta", (h,))],
                    axis=-1, epsilon=1e-12)

    # Embeddings.
    tok = node("Gather", [weight("embeddings.word", (args.vocab, h)), "input_ids"], axis=0)
    position = weight("embeddings.position", (args.seq, h))
    if getattr(args, "dynamic_seq", False):
        length = node("Gather", [node("Shape", ["input_ids"]), const_i64("seq_index", 1)],
                      axis=0)
        length = node("Unsqueeze", [length, const_i64("seq_axes", [0])])
        position = node("Slice", [position, const_i64("seq_starts", [0]), length,
                                  const_i64("seq_slice_axes", [0])])
    x = node("Add", [tok, position])
    x = layer_norm(x, "embeddings.norm")

    # Head split the way exporters write it: shape arithmetic on Shape(x).
    shape = node("Shape", [x])
    batch = node("Gather", [shape, const_i64("idx0", 0)], axis=0)
    seq = node("Gather", [shape, const_i64("idx1", 1)], axis=0)
    axes0 = const_i64("axes0", [0])
    split_shape = node("Concat", [node("Unsqueeze", [batch, axes0]),
                                  node("Unsqueeze", [seq, axes0]),
                                  const_i64("heads", [heads]),
                                  const_i64("head_dim", [head_dim])], axis=0)

    def heads_of(t, perm):
        return node("Transpose", [node("Reshape", [t, split_shape])], perm=perm)

    q = heads_of(linear(x, h, h, "attention.query"), [0, 2, 1, 3])
    k = heads_of(linear(x, h, h, "attention.key"), [0, 2, 3, 1])
    v = heads_of(linear(x, h, h, "attention.value"), [0, 2, 1, 3])
    inits.append(numpy_helper.from_array(np.array(math.sqrt(head_dim), np.float32), "scale"))
    scores = node("Div", [node("MatMul", [q, k]), "scale"])
    probs = node("Softmax", [scores], axis=-1)
    ctx = node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    ctx = node("Reshape", [ctx, const_i64("merge_shape", [0, 0, -1])])
    attn = linear(ctx, h, h, "attention.output")
    x = layer_norm(node("Add", [attn, x]), "attention.norm")

    # Feed-forward with exact GELU: 0.5 * u * (1 + erf(u / sqrt(2))).
    u = linear(x, h, ffn, "ffn.in")
    inits.append(numpy_helper.from_array(np.array(math.sqrt(2.0), np.float32), "sqrt2"))
    inits.append(numpy_helper.from_array(np.array(1.0, np.float32), "one"))
    inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "half"))
    erf = node("Erf", [node("Div", [u, "sqrt2"])])
    gelu = node("Mul", [node("Mul", [u, node("Add", [erf, "one"])]), "half"])
    y = linear(gelu, ffn, h, "ffn.out")
    node("LayerNormalization", [node("Add", [y, x]), "ffn.norm.gamma", "ffn.norm.beta"],
         outputs=["hidden_states"], axis=-1, epsilon=1e-12)
    if getattr(args, "mean_pool", False):
        node("ReduceMean", ["hidden_states"], outputs=["pooled"], axes=[1], keepdims=0)
    inits.append(numpy_helper.from_array(np.ones(h, np.float32), "ffn.norm.gamma"))
    inits.append(numpy_helper.from_array(np.zeros(h, np.float32), "ffn.norm.beta"))

    batch_dim = "batch" if args.dynamic_batch else args.batch
    seq_dim = "seq" if getattr(args, "dynamic_seq", False) else args.seq
    graph = helper.make_graph(
        nodes, "bert_encoder_layer",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch_dim, seq_dim])],
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                       [batch_dim, seq_dim, h])]
        + ([helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [batch_dim, h])]
           if getattr(args, "mean_pool", False) else []),
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-test")
    # IR 8 (opset 17's): a newer onnx package writes its own newest IR
    # version, which an older onnxruntime refuses to load.
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--external-data", action="store_true")
    ap.add_argument("--dynamic-batch", action="store_true")
    ap.add_argument("--dynamic-seq", action="store_true")
    ap.add_argument("--mean-pool", action="store_true")
    ap.add_argument("--portable", action="store_true")
    args = ap.parse_args()
    model = build(args)
    if args.external_data:
        location = os.path.basename(args.output) + ".data"
        onnx.save(model, args.output, save_as_external_data=True,
                  all_tensors_to_one_file=True, location=location, size_threshold=1024)
    else:
        onnx.save(model, args.output)


if __name__ == "__main__":
    main()
