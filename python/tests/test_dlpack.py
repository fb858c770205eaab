"""Tensors in and out through DLPack, with numpy (the only DLPack library
installed in CI; CUDA tensors are covered by the device check)."""

import ctypes

import numpy as np
import pytest

import kiln
from conftest import assert_close, reference



class DLPackOnly:
    """An object that speaks only the DLPack protocol (as a PyTorch or CuPy
    tensor does), so the extension must import it through __dlpack__."""

    def __init__(self, array):
        self.array = array
        self.exported = 0

    def __dlpack__(self, stream=None, **kwargs):
        self.exported += 1
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_input_and_numpy_output_round_trip(mlp_model, mlp_artifact, rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    wrapped = DLPackOnly(x)
    y = kiln.Session(mlp_artifact, device="emu").run({"x": wrapped})["y"]
    assert wrapped.exported >= 1
    assert_close(y, reference(mlp_model, {"x": x})["y"])
    # The output speaks DLPack too: numpy imports it without a copy.
    again = np.from_dlpack(y)
    assert again.ctypes.data == y.ctypes.data
    np.testing.assert_array_equal(again, y)
    assert y.__dlpack_device__() == (1, 0)  # kDLCPU


def test_outputs_stay_valid_after_later_runs(mlp_model, mlp_artifact, rng):
    # Each run's outputs own their memory: a later run (which reuses the
    # arena) must not change them.
    session = kiln.Session(mlp_artifact, device="emu")
    x1 = rng.standard_normal((4, 16)).astype(np.float32)
    x2 = rng.standard_normal((4, 16)).astype(np.float32)
    y1 = session.run({"x": x1})["y"]
    kept = y1.copy()
    session.run({"x": x2})
    del session
    np.testing.assert_array_equal(y1, kept)


def test_non_contiguous_numpy_is_made_contiguous(mlp_model, mlp_artifact, rng):
    base = rng.standard_normal((16, 4)).astype(np.float32)
    x = base.T  # a transposed view: strides (4, 64) bytes
    assert not x.flags.c_contiguous
    y = kiln.Session(mlp_artifact, device="emu").run({"x": x})["y"]
    assert_close(y, reference(mlp_model, {"x": np.ascontiguousarray(x)})["y"])


def test_non_contiguous_dlpack_tensor_is_refused(mlp_artifact, rng):
    x = rng.standard_normal((16, 4)).astype(np.float32).T
    with pytest.raises(kiln.RuntimeError, match="not contiguous") as err:
        kiln.Session(mlp_artifact, device="emu").run({"x": DLPackOnly(x)})
    assert err.value.tensor == "x"


def test_array_likes_are_converted(mlp_model, mlp_artifact, rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    session = kiln.Session(mlp_artifact, device="emu")
    # A list becomes a float64 array, which the f32 input refuses by name.
    with pytest.raises(kiln.RuntimeError,
                       match="input 'x': dtype f64 does not match the "
                             "signature's f32") as err:
        session.run({"x": x.tolist()})
    assert err.value.tensor == "x"
    y = session.run({"x": np.asarray(x.tolist(), dtype=np.float32)})["y"]
    assert_close(y, reference(mlp_model, {"x": x})["y"])


def _cuda_capsule(shape):
    """A DLPack capsule that claims to hold a CUDA tensor (device type 2).
    Its data pointer is never read: the session must refuse it first."""

    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                    ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", ctypes.c_void_p)]

    dims = (ctypes.c_int64 * len(shape))(*shape)
    managed = DLManagedTensor()
    managed.dl_tensor.data = 0x1000
    managed.dl_tensor.device = DLDevice(2, 0)
    managed.dl_tensor.ndim = len(shape)
    managed.dl_tensor.dtype = DLDataType(2, 32, 1)  # float32
    managed.dl_tensor.shape = dims
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.addressof(managed), b"dltensor", None)
    return capsule, (managed, dims)


class FakeCudaTensor:
    def __init__(self, shape):
        self.capsule, self._keep = _cuda_capsule(shape)

    def __dlpack__(self, stream=None, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (2, 0)


def test_cuda_tensor_on_emu_is_refused(mlp_artifact):
    with pytest.raises(kiln.RuntimeError, match="CUDA tensor") as err:
        kiln.Session(mlp_artifact, device="emu").run({"x": FakeCudaTensor((4, 16))})
    assert err.value.tensor == "x"


def test_device_outputs_need_cuda(mlp_artifact, rng):
    x = rng.standard_normal((4, 16)).astype(np.float32)
    with pytest.raises(kiln.RuntimeError, match="needs a cuda session"):
        kiln.Session(mlp_artifact, device="emu").run({"x": x}, outputs="device")
