"""kiln.compile(precision="int8", calibration=...): Kiln's own post-training
quantization from Python (docs/architecture.md "Post-training
quantization"), run on emu.

The reference is onnxruntime (graph optimizations off) running the QDQ
model kilnc compiled (--save-quantized), element by element in units of
the output's quantization step: onnxruntime computes each QDQ MatMul in
float and rounds, Kiln's int8 kernel accumulates int32 and requantizes
with the f32 multiplier (s_x * s_w) / s_y. Both round the same real
number, so they differ only where float error puts it across a rounding
boundary; one flip in the hidden layer moves an output by at most
sum |W2| * step_h, a few output steps for this model. Bound: every output
within 3 steps, and at least 90% exactly equal (a wrong scale, zero point
or weight moves most outputs by many steps).
"""

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import kiln
from conftest import make_mlp, reference


def _steps(got, want, qdq_path, output):
    scales = {t.name: numpy_helper.to_array(t)
              for t in onnx.load(qdq_path).graph.initializer}
    return np.abs(got - want) / float(scales[f"{output}_scale"])


def test_int8_calibration_matches_onnxruntime_qdq(tmp_path, rng):
    model = make_mlp(batch=8)
    calibration = rng.standard_normal((64, 16)).astype(np.float32)
    qdq = tmp_path / "qdq.onnx"
    cache = tmp_path / "table.json"
    artifact = kiln.compile(model, precision="int8", calibration=calibration,
                            calibration_cache=str(cache),
                            extra_args=[f"--save-quantized={qdq}"])
    table = json.loads(cache.read_text())
    assert table["method"] == "minmax"
    # The input's range is the calibration data's, exactly.
    assert table["tensors"]["x"]["min"] == float(calibration.min())
    assert table["tensors"]["x"]["max"] == float(calibration.max())

    x = rng.standard_normal((8, 16)).astype(np.float32)
    got = kiln.Session(artifact, device="emu").run({"x": x})["y"]
    want = reference(onnx.load(qdq), {"x": x})["y"]
    steps = _steps(got, want, qdq, "y")
    assert steps.max() <= 3.0 + 1e-6, steps.max()
    assert np.mean(steps < 0.5) >= 0.9

    # Against the float model: int8 with 8-bit activations over their
    # calibrated range adds noise of ~step/sqrt(12) per value, ~1% of the
    # outputs' norm here; 5% would catch a wrong weight scale or a lost
    # bias, which the comparison above (the same QDQ model on both sides)
    # cannot.
    fp32 = reference(model, {"x": x})["y"]
    assert np.linalg.norm(got - fp32) / np.linalg.norm(fp32) < 0.05

    # The cache alone compiles the same artifact's numbers.
    again = kiln.compile(model, precision="int8", calibration_cache=str(cache))
    np.testing.assert_array_equal(
        kiln.Session(again, device="emu").run({"x": x})["y"], got)


def test_int8_calibration_by_input_name_and_method(tmp_path, rng):
    calibration = {"x": rng.standard_normal((16, 16)).astype(np.float32)}
    cache = tmp_path / "table.json"
    kiln.compile(make_mlp(batch=8), precision="int8", calibration=calibration,
                 calibration_method="percentile:99", calibration_cache=cache)
    table = json.loads(cache.read_text())
    assert table["method"] == "percentile:99"
    x = table["tensors"]["x"]
    assert 0 < x["threshold"] < max(abs(x["min"]), abs(x["max"]))


def test_int8_needs_calibration_data():
    with pytest.raises(kiln.CompileError, match="needs calibration data") as err:
        kiln.compile(make_mlp(batch=8), precision="int8")
    assert err.value.exit_code == 1
