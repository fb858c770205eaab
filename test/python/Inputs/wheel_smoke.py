"""The README's Python example against the installed wheel: compile a small
model with the wheel's own kilnc, run it on emu, compare with onnxruntime."""

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import kiln

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
want = ort.InferenceSession(model.SerializeToString(),
                            providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
# fp32, 8-term dot products: reordering error < 8 * 2^-24 * sum|terms|.
diff = float(np.max(np.abs(y - want)))
print(f"max abs difference vs onnxruntime: {diff:.3g}",
      "OK" if diff <= 1e-5 else "FAIL")
