"""A small CNN as an ONNX model, for the whole-step and digits tests.

    x [N, 1, H, W]
    -> Conv 3x3 pad 1 (C1) -> BatchNormalization -> Relu -> MaxPool 2x2
    -> Conv 3x3 pad 1 (C2) -> BatchNormalization -> Relu -> AveragePool 2x2
    -> Flatten -> Gemm (transB) -> logits [N, classes]

or, with c2=None, one block: Conv, BatchNormalization, Relu, MaxPool,
Flatten, Gemm (the digits CNN).

The convolutions have no bias, as exporters write a conv before a batch
norm: the norm subtracts the batch mean, so a bias there has a gradient of
exactly zero, which fp32 rounding turns into noise that Adam's
normalisation (m / sqrt(v)) would amplify to full-size steps.

Batch norm is in inference form (training_mode 0, as exporters write it):
kilnc --train differentiates it in training mode and keeps its running
statistics as state. Weights: seeded He initialisation; the running means
and variances start at 0 and 1 unless `stats` perturbs them (the whole-step
test does, so a momentum bug cannot hide behind zeros).
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper


def build(c1=4, c2=8, size=8, classes=10, seed=0, momentum=0.9,
          stats=False, batch="N"):
    r = np.random.default_rng(seed)
    inits = []

    def init(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def conv_bn(x, cin, cout, prefix):
        fan = cin * 9
        init(prefix + ".weight", r.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / fan))
        init(prefix + ".bn.scale", 1 + r.standard_normal(cout) * 0.1)
        init(prefix + ".bn.bias", r.standard_normal(cout) * 0.1)
        init(prefix + ".bn.mean", r.standard_normal(cout) * 0.2 if stats else np.zeros(cout))
        init(prefix + ".bn.var", r.uniform(0.5, 1.5, cout) if stats else np.ones(cout))
        return [
            helper.make_node("Conv", [x, prefix + ".weight"],
                             [prefix + ".conv"], kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization",
                             [prefix + ".conv", prefix + ".bn.scale",
                              prefix + ".bn.bias", prefix + ".bn.mean",
                              prefix + ".bn.var"], [prefix + ".norm"],
                             epsilon=1e-5, momentum=momentum),
            helper.make_node("Relu", [prefix + ".norm"], [prefix + ".relu"]),
        ]

    nodes = conv_bn("x", 1, c1, "conv1")
    nodes.append(helper.make_node("MaxPool", ["conv1.relu"], ["pool1"],
                                  kernel_shape=[2, 2], strides=[2, 2]))
    if c2 is None:
        last, features = "pool1", c1 * (size // 2) ** 2
    else:
        nodes += conv_bn("pool1", c1, c2, "conv2")
        nodes.append(helper.make_node("AveragePool", ["conv2.relu"], ["pool2"],
                                      kernel_shape=[2, 2], strides=[2, 2]))
        last, features = "pool2", c2 * (size // 4) ** 2
    nodes.append(helper.make_node("Flatten", [last], ["flat"], axis=1))
    init("fc.weight", r.standard_normal((classes, features)) * np.sqrt(1 / features))
    init("fc.bias", np.zeros(classes))
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"],
                                  ["logits"], transB=1))
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-test")
    model.ir_version = 8  # opset 17's, which every onnxruntime loads
    return model
