"""The README's Python example against the installed wheel: compile a small
model with the wheel's own kilnc, run it on emu, compare with onnxruntime."""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import kiln

# The tests' comparison rule and onnxruntime setup (graph optimizations off).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402

rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["h"]),
     helper.make_node("Relu", ["h"], ["y"])], "smoke",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8

print("kilnc:", kiln.kilnc_path())
artifact = kiln.compile(model)
print("kernels:", artifact.stats["kernels"])
x = rng.standard_normal((2, 8)).astype(np.float32)
y = kiln.Session(artifact, device="emu").run({"x": x})["y"]
want = numerics.ort_session(model).run(None, {"x": x})[0]
# fp32, 8-term dot products: reordering error < 8 * 2^-24 * sum|terms|,
# within 1e-5 on the norm and 6e-5 rms + 1e-5 |want| per element.
result = numerics.compare(y, want, 1e-5, "y")
print(f"vs onnxruntime: {result.figures()}", "OK" if result.ok else "FAIL")
