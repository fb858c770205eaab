"""Bad input from Python: one-line messages (as the CLIs print them) in
kiln.CompileError / kiln.RuntimeError, with what they name as attributes,
and no file left behind."""

import numpy as np
import pytest

import kiln
from conftest import make_mlp, make_unsupported


def test_garbage_model_bytes():
    with pytest.raises(kiln.CompileError) as err:
        kiln.compile(b"this is not an ONNX model")
    assert err.value.exit_code == 1
    assert "\n" not in err.value.message
    assert str(err.value) == err.value.message
    # The temporary folder does not leak into the message.
    assert "kiln-compile-" not in err.value.message


def test_unsupported_op_names_the_node():
    with pytest.raises(kiln.CompileError) as err:
        kiln.compile(make_unsupported())
    assert err.value.node == "decode"
    assert err.value.op_type == "ImageDecoder"
    assert err.value.message.startswith("unsupported.onnx: ")


def test_dynamic_dimension_names_the_input():
    with pytest.raises(kiln.CompileError,
                       match="symbolic dimension 'N'.*--dim N=MIN..MAX") as err:
        kiln.compile(make_mlp())
    assert err.value.tensor == "x"
    assert "--shape x=1x16" in err.value.message


def test_bad_options():
    with pytest.raises(kiln.CompileError, match="precision 'fp8'"):
        kiln.compile(make_mlp(), precision="fp8")
    with pytest.raises(kiln.CompileError, match="layout 'nwhc'"):
        kiln.compile(make_mlp(), layout="nwhc")
    with pytest.raises(kiln.CompileError, match="--target 'sm_70'"):
        kiln.compile(make_mlp(), shapes={"x": (1, 16)}, target="sm_70")
    with pytest.raises(kiln.CompileError, match="not a sequence of integers"):
        kiln.compile(make_mlp(), shapes={"x": (1.5, 16)})
    with pytest.raises(kiln.CompileError, match="path, bytes or an onnx.ModelProto"):
        kiln.compile(12)


def test_missing_model_file(tmp_path):
    with pytest.raises(kiln.CompileError) as err:
        kiln.compile(tmp_path / "absent.onnx")
    assert "absent.onnx" in err.value.message


def test_corrupt_artifact(tmp_path, mlp_artifact):
    image = bytearray(mlp_artifact.to_bytes())
    image[len(image) // 2] ^= 0xFF
    path = tmp_path / "bad.kiln"
    path.write_bytes(bytes(image))
    with pytest.raises(kiln.RuntimeError) as err:
        kiln.load(path)
    assert "bad.kiln" in err.value.message and "\n" not in err.value.message
    with pytest.raises(kiln.RuntimeError, match="bad.kiln"):
        kiln.Session(path, device="emu")
    with pytest.raises(kiln.RuntimeError):
        kiln.Artifact.from_bytes(b"KILN")


def test_save_into_a_missing_folder_leaves_nothing(tmp_path, mlp_artifact):
    with pytest.raises(kiln.RuntimeError):
        mlp_artifact.save(tmp_path / "no" / "such" / "dir" / "m.kiln")
    assert list(tmp_path.iterdir()) == []


def test_input_errors_name_the_tensor(mlp_artifact):
    session = kiln.Session(mlp_artifact, device="emu")
    with pytest.raises(kiln.RuntimeError, match="input 'x' is not bound") as err:
        session.run({})
    assert err.value.tensor == "x"
    with pytest.raises(kiln.RuntimeError, match="shape \\[4, 15\\] does not match") as err:
        session.run({"x": np.zeros((4, 15), np.float32)})
    assert err.value.tensor == "x"
    with pytest.raises(kiln.RuntimeError, match="no input named 'q'") as err:
        session.run({"q": np.zeros((4, 16), np.float32)})
    assert err.value.tensor == "q"
    with pytest.raises(kiln.RuntimeError, match="outputs='gpu'"):
        session.run({"x": np.zeros((4, 16), np.float32)}, outputs="gpu")
    with pytest.raises(kiln.RuntimeError, match="at least 1 run"):
        session.bench(0)


def test_unknown_device(mlp_artifact):
    with pytest.raises(kiln.RuntimeError) as err:
        kiln.Session(mlp_artifact, device="tpu")
    assert "tpu" in err.value.message


def test_cuda_without_a_gpu(mlp_artifact):
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("a CUDA driver is present")
    except OSError:
        pass
    with pytest.raises(kiln.RuntimeError, match="no CUDA driver"):
        kiln.Session(mlp_artifact, device="cuda")


def test_errors_are_kiln_errors():
    assert issubclass(kiln.CompileError, kiln.Error)
    assert issubclass(kiln.RuntimeError, kiln.Error)
    assert issubclass(kiln.RuntimeError, RuntimeError)
