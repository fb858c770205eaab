"""Shared pieces of the kiln package's tests: small ONNX models built here
(random weights, fixed seeds) and onnxruntime as the reference.

Run with scripts/test.sh (lit's test/python/pytest.test), or by hand:
  PYTHONPATH=build/python KILN_KILNC=build/bin/kilnc python3 -m pytest python/tests
"""

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import numerics  # noqa: E402  (the tests' comparison rule)

# fp32 against onnxruntime on these small models: sums of at most 32 terms
# of O(1) values in another order, ~2e-6 relative; a bound of 1e-5 on the
# relative L2 error, and per element 6e-5 rms + 1e-5 |want|
# (scripts/numerics.py), leaves a margin without hiding a wrong element (a
# wrong index or a missing bias moves an output by O(1)).
FP32 = numerics.tolerance(1e-5)


def assert_close(got, want, tol=FP32, name="output"):
    """scripts/numerics.py's comparison; raises with its report line."""
    return numerics.assert_close(got, want, tol, name)


def _model(nodes, inputs, outputs, initializers, name, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializers)
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # onnxruntime 1.20 reads IR up to 10
    onnx.checker.check_model(model)
    return model


def make_mlp(seed=0, batch="N"):
    """x[N,16] -> MatMul -> Add -> Relu -> MatMul -> y[N,8]."""
    rng = np.random.default_rng(seed)
    init = [
        numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "W1"),
        numpy_helper.from_array(rng.standard_normal((32,)).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "W2"], ["y"], name="mm2"),
    ]
    return _model(nodes,
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 8])],
                  init, "mlp")


def make_convnet(seed=1):
    """x[1,3,8,8] -> Conv 3x3 (4 filters, pad 1) -> Relu -> GlobalAveragePool
    -> y[1,4,1,1], and the Relu's output as a second output."""
    rng = np.random.default_rng(seed)
    init = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv",
                         pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["act"], name="relu"),
        helper.make_node("GlobalAveragePool", ["act"], ["y"], name="gap"),
    ]
    return _model(nodes,
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1]),
                   helper.make_tensor_value_info("act", TensorProto.FLOAT, [1, 4, 8, 8])],
                  init, "convnet")


def make_unsupported():
    """A graph whose only node Kiln refuses (ImageDecoder: no image codecs
    in the runtime)."""
    nodes = [helper.make_node("ImageDecoder", ["x"], ["y"], name="decode")]
    return _model(nodes,
                  [helper.make_tensor_value_info("x", TensorProto.UINT8, [64])],
                  [helper.make_tensor_value_info("y", TensorProto.UINT8,
                                                 [None, None, 3])],
                  [], "unsupported", opset=20)


def reference(model, feeds):
    """onnxruntime's outputs, by name (the independent reference; graph
    optimizations off)."""
    session = numerics.ort_session(model)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.fixture(scope="session")
def mlp_model():
    return make_mlp()


@pytest.fixture(scope="session")
def mlp_artifact(mlp_model):
    return kiln.compile(mlp_model, shapes={"x": (4, 16)})


@pytest.fixture(scope="session")
def convnet_model():
    return make_convnet()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
