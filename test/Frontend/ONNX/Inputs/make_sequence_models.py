"""Models for sequences.test (and test/Target/CUDA/sequences-emu.test):
sequence and optional ops between tensor inputs and outputs, and the
models each importer error needs. Usage: make_sequence_models.py DIR"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def const(name, values, dtype=np.int64):
    return numpy_helper.from_array(np.array(values, dtype), name)


def save(directory, name, nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, os.path.join(directory, name))


def tensor(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def main():
    d = sys.argv[1]
    # Optional's `type` attribute is the element's type.
    empty_optional = helper.make_tensor_type_proto(F, None)
    # SequenceMap's body: (e, u) -> (e + u, e * e).
    body = helper.make_graph(
        [helper.make_node("Add", ["e", "u"], ["sum"]),
         helper.make_node("Mul", ["e", "e"], ["square"])], "body",
        [tensor("e", [2, 4]), tensor("u", [2, 4])],
        [tensor("sum", [2, 4]), tensor("square", [2, 4])])
    # seq.onnx: x [6,4] split in 2-row chunks; t [2,4] inserted in front, the
    # last chunk erased: y = concat(t, x[0:2], x[2:4]); n = 3; a = t;
    # h = true (Optional(t)); e = false (an empty optional); g = t
    # (OptionalGetElement); s = stack of the three chunks; r = the rows of x
    # as a sequence (keepdims=0), the fifth of them, via an Identity;
    # m1, m2 = SequenceMap over the chunks with t: each chunk + t, each
    # chunk squared, concatenated.
    save(d, "seq.onnx", [
        helper.make_node("SplitToSequence", ["x", "two"], ["seq"], axis=0),
        helper.make_node("SequenceInsert", ["seq", "t", "zero"], ["seq2"]),
        helper.make_node("SequenceErase", ["seq2", "minus1"], ["seq3"]),
        helper.make_node("ConcatFromSequence", ["seq3"], ["y"], axis=0),
        helper.make_node("SequenceLength", ["seq3"], ["n"]),
        helper.make_node("SequenceAt", ["seq3", "zero"], ["a"]),
        helper.make_node("Optional", ["t"], ["o"]),
        helper.make_node("OptionalHasElement", ["o"], ["h"]),
        helper.make_node("Optional", [], ["eo"], type=empty_optional),
        helper.make_node("OptionalHasElement", ["eo"], ["e"]),
        helper.make_node("OptionalGetElement", ["o"], ["g"]),
        helper.make_node("ConcatFromSequence", ["seq"], ["s"], axis=0,
                         new_axis=1),
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0,
                         keepdims=0),
        helper.make_node("Identity", ["rows"], ["rows2"]),
        helper.make_node("SequenceAt", ["rows2", "four"], ["r"]),
        helper.make_node("SequenceEmpty", [], ["none"]),
        helper.make_node("SequenceConstruct", ["t", "t"], ["pair"]),
        helper.make_node("ConcatFromSequence", ["pair"], ["p"], axis=-1),
        helper.make_node("SequenceMap", ["seq", "t"], ["sums", "squares"],
                         body=body),
        helper.make_node("ConcatFromSequence", ["sums"], ["m1"], axis=0),
        helper.make_node("ConcatFromSequence", ["squares"], ["m2"], axis=0),
    ], [tensor("x", [6, 4]), tensor("t", [2, 4])],
        [tensor("y", [6, 4]), tensor("n", [], TensorProto.INT64),
         tensor("a", [2, 4]), tensor("h", [], TensorProto.BOOL),
         tensor("e", [], TensorProto.BOOL), tensor("g", [2, 4]),
         tensor("s", [3, 2, 4]), tensor("r", [4]), tensor("p", [2, 8]),
         tensor("m1", [6, 4]), tensor("m2", [6, 4])],
        [const("two", 2), const("zero", 0), const("minus1", -1),
         const("four", 4)])

    def seq_model(name, nodes, inputs, outputs, inits=()):
        save(d, name, [helper.make_node("SplitToSequence", ["x", "two"],
                                        ["seq"], axis=0)] + nodes,
             [tensor("x", [6, 4])] + inputs, outputs,
             [const("two", 2)] + list(inits))

    seq_model("dynamic-position.onnx",
              [helper.make_node("SequenceAt", ["seq", "p"], ["y"], name="at")],
              [tensor("p", [], TensorProto.INT64)], [tensor("y", [2, 4])])
    seq_model("out-of-range.onnx",
              [helper.make_node("SequenceAt", ["seq", "three"], ["y"],
                                name="at")],
              [], [tensor("y", [2, 4])], [const("three", 3)])
    seq_model("mixed.onnx",
              [helper.make_node("SequenceInsert", ["seq", "i"], ["s2"],
                                name="ins"),
               helper.make_node("SequenceLength", ["s2"], ["y"])],
              [tensor("i", [2, 4], TensorProto.INT64)],
              [tensor("y", [], TensorProto.INT64)])
    seq_model("map-lengths.onnx",
              [helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0),
               helper.make_node("SequenceMap", ["seq", "rows"], ["out"],
                                body=helper.make_graph(
                                    [helper.make_node("Identity", ["e"],
                                                      ["o"])], "body",
                                    [tensor("e", [2, 4]), tensor("v", [1, 4])],
                                    [tensor("o", [2, 4])]), name="map"),
               helper.make_node("SequenceLength", ["out"], ["y"])],
              [], [tensor("y", [], TensorProto.INT64)])
    seq_model("seq-to-relu.onnx",
              [helper.make_node("Relu", ["seq"], ["y"], name="relu")],
              [], [tensor("y", [2, 4])])
    save(d, "seq-output.onnx",
         [helper.make_node("SplitToSequence", ["x", "two"], ["seq"], axis=0)],
         [tensor("x", [6, 4])],
         [helper.make_tensor_sequence_value_info("seq", F, [2, 4])],
         [const("two", 2)])
    save(d, "seq-input.onnx",
         [helper.make_node("SequenceLength", ["seq"], ["y"])],
         [helper.make_tensor_sequence_value_info("seq", F, [2, 4])],
         [tensor("y", [], TensorProto.INT64)])
    save(d, "empty-optional.onnx",
         [helper.make_node("Optional", [], ["eo"], type=empty_optional),
          helper.make_node("OptionalGetElement", ["eo"], ["y"], name="get")],
         [], [tensor("y", [2])])
    # seq-io.onnx (test/Target/CUDA/sequence-io-emu.test): a sequence input
    # xs of [2,3] tensors and an optional input opt; outputs cat (xs
    # concatenated, +1 in parts), parts (a sequence of 2 and 4 rows), has
    # (OptionalHasElement) and opt_out (the optional itself).
    optional_23 = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(F, [2, 3]))
    save(d, "seq-io.onnx", [
        helper.make_node("ConcatFromSequence", ["xs"], ["cat"], axis=0),
        helper.make_node("Add", ["cat", "one"], ["cat1"]),
        helper.make_node("SplitToSequence", ["cat1", "sizes"], ["parts"],
                         axis=0),
        helper.make_node("OptionalHasElement", ["opt"], ["has"]),
        helper.make_node("Identity", ["opt"], ["opt_out"]),
    ], [helper.make_tensor_sequence_value_info("xs", F, [2, 3]),
        helper.make_value_info("opt", optional_23)],
        [tensor("cat", [6, 3]),
         helper.make_tensor_sequence_value_info("parts", F, None),
         tensor("has", [], TensorProto.BOOL),
         helper.make_value_info("opt_out", optional_23)],
        [numpy_helper.from_array(np.array(1, np.float32), "one"),
         const("sizes", [2, 4])])
    save(d, "bad-split.onnx",
         [helper.make_node("SplitToSequence", ["x", "sizes"], ["seq"],
                           axis=0, name="split"),
          helper.make_node("SequenceLength", ["seq"], ["y"])],
         [tensor("x", [6, 4])], [tensor("y", [], TensorProto.INT64)],
         [const("sizes", [2, 3])])


if __name__ == "__main__":
    main()
