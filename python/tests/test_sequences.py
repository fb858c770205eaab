"""Sequence and optional graph inputs and outputs (kiln.compile(sequences=,
absent=), issue 25): a sequence is a list of arrays in and out, an absent
optional output is None; on emu against onnxruntime.

The model only concatenates, splits and adds 1 in f32 (one rounding, the
same in both), so the outputs must be equal element for element.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from conftest import reference

F = TensorProto.FLOAT


@pytest.fixture(scope="module")
def seq_model():
    optional = helper.make_optional_type_proto(
        helper.make_tensor_type_proto(F, [2, 3]))
    graph = helper.make_graph([
        helper.make_node("ConcatFromSequence", ["xs"], ["cat"], axis=0),
        helper.make_node("Add", ["cat", "one"], ["cat1"]),
        helper.make_node("SplitToSequence", ["cat1", "sizes"], ["parts"],
                         axis=0),
        helper.make_node("OptionalHasElement", ["opt"], ["has"]),
        helper.make_node("Identity", ["opt"], ["opt_out"]),
    ], "seq", [helper.make_tensor_sequence_value_info("xs", F, [2, 3]),
               helper.make_value_info("opt", optional)],
        [helper.make_tensor_value_info("cat", F, [6, 3]),
         helper.make_tensor_sequence_value_info("parts", F, None),
         helper.make_tensor_value_info("has", TensorProto.BOOL, []),
         helper.make_value_info("opt_out", optional)],
        [numpy_helper.from_array(np.array(1, np.float32), "one"),
         numpy_helper.from_array(np.array([2, 4], np.int64), "sizes")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def equal(got, want):
    return (got.dtype == want.dtype and got.shape == want.shape
            and np.array_equal(got, want))


@pytest.mark.parametrize("present", [True, False])
def test_lists_in_and_out_match_onnxruntime(seq_model, rng, present):
    artifact = kiln.compile(seq_model, sequences={"xs": 3},
                            absent=() if present else ("opt",))
    groups = artifact.groups
    assert [(g.name, g.kind, g.present, g.count) for g in groups[0]] == [
        ("xs", "sequence", True, 3), ("opt", "optional", present, int(present))]
    xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    opt = rng.standard_normal((2, 3)).astype(np.float32)
    want = reference(seq_model, {"xs": xs, "opt": opt if present else None})
    inputs = {"xs": xs}
    if present:
        inputs["opt"] = opt
    got = kiln.Session(artifact, device="emu").run(inputs)
    assert equal(got["cat"], want["cat"])
    assert len(got["parts"]) == len(want["parts"]) == 2
    for g, w in zip(got["parts"], want["parts"]):
        assert equal(g, w)
    assert equal(got["has"], want["has"])
    if present:
        assert equal(got["opt_out"], want["opt_out"])
    else:
        assert got["opt_out"] is None and want["opt_out"] is None


def test_a_wrong_count_names_the_input(seq_model):
    artifact = kiln.compile(seq_model, sequences={"xs": 3}, absent=("opt",))
    session = kiln.Session(artifact, device="emu")
    with pytest.raises(kiln.RuntimeError) as info:
        session.run({"xs": [np.zeros((2, 3), np.float32)] * 2})
    assert info.value.message == (
        "input 'xs' is a sequence of 3 tensors (kilnc --sequence xs=3); "
        "2 given")


def test_a_sequence_needs_its_length(seq_model):
    with pytest.raises(kiln.CompileError) as info:
        kiln.compile(seq_model)
    assert "input 'xs' is a sequence of unknown length: give it with " \
           "--sequence xs=N" in str(info.value)
