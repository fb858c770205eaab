"""kiln.compile + kiln.Session on emu, against onnxruntime.

Tolerances (scripts/numerics.py's rule, conftest.assert_close): emu
executes the PTX with IEEE fp32 arithmetic (FMA contraction, Kiln's own
summation order), onnxruntime sums in its own order. For dot products of
K <= 32 terms of O(1) values the reordering error is ~2e-6 relative; the
norm bound 1e-5 and its per-element bounds (6e-5 rms + 1e-5 |want|) leave a
margin without hiding a wrong element (a wrong index or a missing bias
moves outputs by O(1)). bf16 rounds each matmul operand to 8 significant
bits (relative error up to 2^-9 each), and the error adds up over two
layers: the project's bf16 rule (norm 2e-2, per element 0.12 rms +
2e-2 |want|; this model measures ~4e-3), while a wrong result is off by
O(1).
"""

import os

import numpy as np
import pytest

import kiln
from conftest import assert_close, make_convnet, make_mlp, reference



def test_mlp_matches_onnxruntime(mlp_model, mlp_artifact, rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    session = kiln.Session(mlp_artifact, device="emu")
    got = session.run({"x": x})
    want = reference(mlp_model, {"x": x})
    assert set(got) == {"y"}
    assert isinstance(got["y"], np.ndarray)
    assert got["y"].dtype == np.float32 and got["y"].shape == (4, 8)
    assert_close(got["y"], want["y"])


def test_repeated_runs_use_the_new_inputs(mlp_model, mlp_artifact, rng):
    session = kiln.Session(mlp_artifact, device="emu")
    for _ in range(3):
        x = rng.standard_normal((4, 16)).astype(np.float32)
        assert_close(session.run({"x": x})["y"],
                                   reference(mlp_model, {"x": x})["y"])


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_convnet_two_outputs(layout, rng):
    model = make_convnet()
    artifact = kiln.compile(model, layout=layout)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    got = kiln.Session(artifact, device="emu").run({"x": x})
    want = reference(model, {"x": x})
    assert set(got) == {"y", "act"}
    for name in want:
        assert_close(got[name], want[name])


def test_bf16_precision(mlp_model, rng):
    artifact = kiln.compile(mlp_model, shapes={"x": "4x16"}, precision="bf16")
    x = rng.standard_normal((4, 16)).astype(np.float32)
    got = kiln.Session(artifact, device="emu").run({"x": x})["y"]
    want = reference(mlp_model, {"x": x})["y"]
    assert_close(got, want, "bf16")


def test_model_as_path_bytes_and_proto(tmp_path, mlp_model, rng):
    path = tmp_path / "mlp.onnx"
    path.write_bytes(mlp_model.SerializeToString())
    x = rng.standard_normal((2, 16)).astype(np.float32)
    want = reference(mlp_model, {"x": x})["y"]
    for model in (str(path), path, path.read_bytes(), mlp_model):
        artifact = kiln.compile(model, shapes={"x": [2, 16]})
        got = kiln.Session(artifact, device="emu").run({"x": x})["y"]
        assert_close(got, want)


def test_signature_stats_save_and_load(tmp_path, mlp_artifact, mlp_model, rng):
    sig = mlp_artifact.signature
    assert sig.inputs == (kiln.TensorSpec("x", "f32", (4, 16)),)
    assert sig.outputs == (kiln.TensorSpec("y", "f32", (4, 8)),)
    stats = mlp_artifact.stats
    assert stats["kernels"] >= 1 and stats["launches"] >= stats["kernels"]
    # W1, b1, W2 in f32: 16*32 + 32 + 32*8 floats, at least (alignment pads).
    assert stats["weight_bytes"] >= (16 * 32 + 32 + 32 * 8) * 4
    assert stats["arena_bytes"] > 0 and stats["target"] == "sm_90"
    assert "--shape=x=4x16" in stats["compiler_options"]

    path = tmp_path / "mlp.kiln"
    mlp_artifact.save(path)
    loaded = kiln.load(path)
    assert loaded.signature == sig
    assert loaded.to_bytes() == mlp_artifact.to_bytes()
    assert kiln.Artifact.from_bytes(path.read_bytes()).signature == sig
    x = rng.standard_normal((4, 16)).astype(np.float32)
    # A Session also takes the path.
    got = kiln.Session(str(path), device="emu").run({"x": x})["y"]
    assert_close(got, reference(mlp_model, {"x": x})["y"])


def test_strip_weights_then_bind_them(mlp_model, rng):
    artifact = kiln.compile(mlp_model, shapes={"x": (4, 16)},
                            strip_weights=True)
    assert artifact.stats["stripped_weight_bytes"] > 0
    with pytest.raises(kiln.RuntimeError, match="stripped"):
        kiln.Session(artifact, device="emu")
    from onnx import numpy_helper
    weights = {t.name: numpy_helper.to_array(t)
               for t in mlp_model.graph.initializer}
    session = kiln.Session(artifact, device="emu", weights=weights)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    assert_close(session.run({"x": x})["y"],
                               reference(mlp_model, {"x": x})["y"])
    # New values for the matrices change the results. The bias is small
    # enough to be compiled into the kernels: a new value for it is refused.
    other = make_mlp(seed=7)
    new = {t.name: numpy_helper.to_array(t) for t in other.graph.initializer}
    with pytest.raises(kiln.RuntimeError, match="cannot be rebound") as err:
        kiln.Session(artifact, device="emu", weights=new)
    assert err.value.tensor == "b1"
    new["b1"] = weights["b1"]
    del other.graph.initializer[:]
    other.graph.initializer.extend(
        numpy_helper.from_array(v, k) for k, v in new.items())
    session = kiln.Session(artifact, device="emu", weights=new)
    assert_close(session.run({"x": x})["y"],
                               reference(other, {"x": x})["y"])


def test_bench_on_emu(mlp_artifact, rng):
    session = kiln.Session(mlp_artifact, device="emu")
    x = rng.standard_normal((4, 16)).astype(np.float32)
    result = session.bench(3, {"x": x}, warmup=1)
    assert len(result.run_ms) == 3 and all(t > 0 for t in result.run_ms)
    assert result.min_ms <= result.median_ms
    assert result.throughput == pytest.approx(1000.0 / result.median_ms)
    assert result.kernel_ms and all(len(v) == 3 for v in result.kernel_ms.values())


def test_kilnc_is_found():
    assert os.access(kiln.kilnc_path(), os.X_OK)
