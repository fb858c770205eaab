"""Run-time sizes (kiln.compile(dims=...), issue 24): one artifact, any size
in the declared range of a separable dim, on emu against onnxruntime.

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
                          "reason": ""}}
    assert dynamic_mlp.stats["format_version"] == "1.6"


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
