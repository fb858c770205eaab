"""Shape inputs at run time (issue 24; docs/runtime.md "Shape inputs at run
time"): a ReduceSum whose axes are a graph input and whose declared output
(3x2, no keepdims, from 3x2x2) allows axis 1 or axis 2. The artifact builds
both and the device picks by the input; any other value is refused by the
ShapeGuard before the launches. The sums are checked against numpy within
fp32 rounding of two-term sums (exactly, on these small integers).
Teeth: before the integer-identity fix of 2026-12-04 (an i64 ReduceMin
started from INT64_MIN) the choice's condition was always false and axis
1 gave axis 2's sums (seen by hand on the same model).
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln


@pytest.fixture(scope="module")
def reduce_artifact():
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], name="r",
                          keepdims=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 2]),
         helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 18)])
    return kiln.compile(model)


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_the_input_picks_the_axis(reduce_artifact, axis):
    session = kiln.Session(reduce_artifact, device="emu")
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    got = session.run({"x": x, "axes": np.array([axis])})["y"]
    np.testing.assert_array_equal(got, x.sum(axis=axis))


def test_another_axis_is_refused_naming_the_node(reduce_artifact):
    session = kiln.Session(reduce_artifact, device="emu")
    x = np.zeros((3, 2, 2), np.float32)
    with pytest.raises(kiln.RuntimeError,
                       match=r"node 'r' \(ReduceSum\): input 'axes' \(axes\) "
                             r"is \[0\], which names axes \[0\]; this "
                             r"artifact was compiled for axes \[1\] or \[2\]"):
        session.run({"x": x, "axes": np.array([0])})
