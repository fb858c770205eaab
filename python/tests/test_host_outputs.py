"""Outputs that host steps make (docs/runtime.md "Host steps"): a
data-dependent shape (NonMaxSuppression on boxes the device computed, the
selected boxes gathered) comes back as a numpy array of the run's shape,
and a STRING output as a numpy array of str (dtype object); device results
only host steps read stay hidden. On emu against onnxruntime.

The device ops are exact in float32 (additions of values on a 2^-4 grid, a
multiplication by 0.25, Abs, ArgMax), so both sides select and gather the
same bits: the outputs must be equal element for element.
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import kiln
from conftest import reference

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def grid(rng, shape):
    return (np.round(rng.standard_normal(shape) * 32) / 16).astype(np.float32)


def make_detector():
    graph = helper.make_graph([
        helper.make_node("Add", ["anchors", "deltas"], ["boxes"]),
        helper.make_node("Abs", ["logits"], ["a"]),
        helper.make_node("Mul", ["a", "quarter"], ["scores"]),
        helper.make_node("NonMaxSuppression",
                         ["boxes", "scores", "max", "iou", "threshold"],
                         ["selected"]),
        helper.make_node("Gather", ["selected", "two"], ["box"], axis=1),
        helper.make_node("Squeeze", ["boxes", "zero1"], ["boxes0"]),
        helper.make_node("Gather", ["boxes0", "box"], ["kept"], axis=0),
    ], "detector", [
        helper.make_tensor_value_info("anchors", F, [1, 30, 4]),
        helper.make_tensor_value_info("deltas", F, [1, 30, 4]),
        helper.make_tensor_value_info("logits", F, [1, 2, 30])],
        [helper.make_tensor_value_info("selected", I64, None),
         helper.make_tensor_value_info("kept", F, None),
         helper.make_tensor_value_info("scores", F, [1, 2, 30])],
        [numpy_helper.from_array(np.array(0.25, np.float32), "quarter"),
         numpy_helper.from_array(np.array([5], np.int64), "max"),
         numpy_helper.from_array(np.array([0.4], np.float32), "iou"),
         numpy_helper.from_array(np.array([0.2], np.float32), "threshold"),
         numpy_helper.from_array(np.array(2, np.int64), "two"),
         numpy_helper.from_array(np.array([0], np.int64), "zero1")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_detectors_tail_returns_the_runs_shapes(rng):
    model = make_detector()
    anchors = (rng.integers(0, 16, size=(1, 30, 4)) * 2.0).astype(np.float32)
    feeds = {"anchors": anchors, "deltas": grid(rng, (1, 30, 4)),
             "logits": grid(rng, (1, 2, 30))}
    want = reference(model, feeds)
    got = kiln.Session(kiln.compile(model), device="emu").run(feeds)
    # 'boxes' feeds only host steps: hidden, not an output.
    assert set(got) == set(want) == {"selected", "kept", "scores"}
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        assert got[name].shape == want[name].shape, name
        assert np.array_equal(got[name], want[name]), name
    assert 0 < want["selected"].shape[0] <= 10


def test_string_outputs_are_str_arrays(rng):
    graph = helper.make_graph([
        helper.make_node("ArgMax", ["x"], ["best"], axis=1, keepdims=0),
        helper.make_node("LabelEncoder", ["best"], ["label"], domain="ai.onnx.ml",
                         keys_int64s=[0, 1, 2], values_strings=["cat", "dog", "emu"],
                         default_string="none"),
    ], "labels", [helper.make_tensor_value_info("x", F, [5, 3])],
        [helper.make_tensor_value_info("label", TensorProto.STRING, [5])])
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)])
    model.ir_version = 8
    feeds = {"x": grid(rng, (5, 3))}
    want = reference(model, feeds)["label"]
    got = kiln.Session(kiln.compile(model), device="emu").run(feeds)["label"]
    assert got.dtype == object and got.shape == (5,)
    assert got.tolist() == [str(v) for v in want.tolist()]
