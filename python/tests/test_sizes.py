"""Run-time sizes (kiln.compile(dims=...), issue 24): one artifact, any size
in the declared range of a separable dim, on emu against onnxruntime; a
softmax along the dim gets a size mask the runtime fills.

Tolerances: conftest.assert_close's fp32 rule (see test_compile_run.py);
a padded row leaking into the result or a slice at the wrong offset moves
outputs by O(1).
"""

import numpy as np
import pytest

import kiln
from conftest import assert_close, make_mlp, reference


@pytest.fixture(scope="module")
def mlp_model():
    return make_mlp()


@pytest.fixture(scope="module")
def dynamic_mlp(mlp_model):
    return kiln.compile(mlp_model, dims={"N": (1, 8)})


def test_stats_list_the_symbolic_dim(dynamic_mlp):
    dims = dynamic_mlp.stats["symbolic_dims"]
    assert dims == {"N": {"min": 1, "max": 8, "opt": 8, "separable": True,
                          "reason": "", "size_masks": []}}
    assert dynamic_mlp.stats["format_version"] == "1.12"


@pytest.mark.parametrize("n", [1, 3, 8])
def test_any_size_in_the_range_matches_onnxruntime(mlp_model, dynamic_mlp,
                                                   rng, n):
    session = kiln.Session(dynamic_mlp, device="emu")
    x = rng.standard_normal((n, 16)).astype(np.float32)
    got = session.run({"x": x})["y"]
    assert got.shape == (n, 8)
    assert_close(got, reference(mlp_model, {"x": x})["y"])


def test_one_session_changes_size_between_runs(mlp_model, dynamic_mlp, rng):
    session = kiln.Session(dynamic_mlp, device="emu")
    for n in (8, 2, 5):
        x = rng.standard_normal((n, 16)).astype(np.float32)
        assert_close(session.run({"x": x})["y"],
                     reference(mlp_model, {"x": x})["y"])


def test_out_of_range_is_an_error_naming_input_dim_range_and_value(
        dynamic_mlp):
    session = kiln.Session(dynamic_mlp, device="emu")
    with pytest.raises(kiln.RuntimeError) as info:
        session.run({"x": np.zeros((9, 16), np.float32)})
    assert info.value.message == (
        "input 'x': dim 0 (symbol 'N') is 9, outside its range 1..8")
    assert info.value.tensor == "x"


def test_dims_argument_is_checked(mlp_model):
    with pytest.raises(kiln.CompileError, match=r"dims\['N'\]: \[1\] is not"):
        kiln.compile(mlp_model, dims={"N": (1,)})


def test_inputs_sharing_a_symbol_must_agree():
    from onnx import TensorProto, helper
    from conftest import _model
    model = _model(
        [helper.make_node("Add", ["x", "z"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [], "pair")
    session = kiln.Session(kiln.compile(model, dims={"N": (1, 8)}), device="emu")
    x, z = np.ones((2, 4), np.float32), np.full((2, 4), 2, np.float32)
    np.testing.assert_array_equal(session.run({"x": x, "z": z})["y"], x + z)
    with pytest.raises(kiln.RuntimeError) as info:
        session.run({"x": np.ones((2, 4), np.float32),
                     "z": np.ones((3, 4), np.float32)})
    assert info.value.message == (
        "inputs 'x' and 'z' disagree on symbol 'N': 'x' has 2 (dim 0), "
        "'z' has 3 (dim 0)")


def test_a_dim_that_is_not_separable_runs_its_maximum_only():
    from onnx import TensorProto, helper
    from conftest import _model
    model = _model(
        [helper.make_node("ReduceProd", ["x"], ["m"], name="batch_prod",
                          axes=[0], keepdims=1),
         helper.make_node("Sub", ["x", "m"], ["y"], name="center")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [], "center")
    artifact = kiln.compile(model, dims={"N": (1, 8)})
    assert artifact.stats["symbolic_dims"]["N"]["separable"] is False
    session = kiln.Session(artifact, device="emu")
    x = 1 + 0.01 * np.arange(32, dtype=np.float32).reshape(8, 4)
    # A product of 8 values near 1 in f32: a few ulp.
    np.testing.assert_allclose(session.run({"x": x})["y"],
                               x - x.prod(axis=0, keepdims=True), atol=1e-5)
    with pytest.raises(kiln.RuntimeError, match=r"is 3, but this artifact runs "
                       r"N = 8 only: 'N' is not separable \(node 'batch_prod'"):
        session.run({"x": np.ones((3, 4), np.float32)})


def test_max_min_and_argmax_over_a_run_time_dim():
    """A max, a min, an argmax and an argmin over N: -inf (+inf for the
    min) at the padded rows, so that the zeros the runtime pads with never
    win; inputs all negative for the max and all positive for the min,
    where a zero would. Exact: a max or min rounds nothing."""
    from onnx import TensorProto, helper
    from conftest import _model
    model = _model(
        [helper.make_node("Neg", ["p"], ["n"], name="neg"),
         helper.make_node("ReduceMax", ["n"], ["mx"], name="batch_max",
                          axes=[0], keepdims=1),
         helper.make_node("Sub", ["n", "mx"], ["y"], name="center_max"),
         helper.make_node("ReduceMin", ["p"], ["mn"], name="batch_min",
                          axes=[0], keepdims=0),
         helper.make_node("ArgMax", ["n"], ["am"], name="arg_max", axis=0,
                          keepdims=0),
         helper.make_node("ArgMin", ["p"], ["an"], name="arg_min", axis=0,
                          keepdims=0)],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("mn", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("am", TensorProto.INT64, [4]),
         helper.make_tensor_value_info("an", TensorProto.INT64, [4])],
        [], "extremes")
    artifact = kiln.compile(model, dims={"N": (1, 8)})
    assert artifact.stats["symbolic_dims"]["N"]["separable"] is True
    session = kiln.Session(artifact, device="emu")
    rng = np.random.default_rng(3)
    for n in (1, 3, 8):
        p = rng.uniform(1, 2, (n, 4)).astype(np.float32)
        out = session.run({"p": p})
        np.testing.assert_array_equal(out["y"], -p - (-p).max(axis=0))
        np.testing.assert_array_equal(out["mn"], p.min(axis=0))
        np.testing.assert_array_equal(out["am"], (-p).argmax(axis=0))
        np.testing.assert_array_equal(out["an"], p.argmin(axis=0))


def test_a_softmax_along_the_dim_gets_a_size_mask_the_user_never_sees(rng):
    from onnx import TensorProto, helper
    from conftest import _model
    model = _model(
        [helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),
         helper.make_node("Softmax", ["s"], ["p"], name="over_keys", axis=-1),
         helper.make_node("MatMul", ["p", "v"], ["y"], name="mix")],
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, ["S", 8]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, [8, "S"]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, ["S", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["S", 8])],
        [], "attention")
    artifact = kiln.compile(model, dims={"S": (1, 12)})
    assert artifact.stats["symbolic_dims"]["S"]["size_masks"] == [
        "kiln.size_mask.S"]
    session = kiln.Session(artifact, device="emu")
    assert [spec.name for spec in artifact.signature.inputs] == ["q", "k", "v"]
    for n in (1, 5, 12):
        feeds = {"q": rng.standard_normal((n, 8)).astype(np.float32),
                 "k": rng.standard_normal((8, n)).astype(np.float32),
                 "v": rng.standard_normal((n, 8)).astype(np.float32)}
        got = session.run(feeds)["y"]
        assert got.shape == (n, 8)
        assert_close(got, reference(model, feeds)["y"])
