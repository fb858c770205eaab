#!/usr/bin/env python3
"""ONNX's Gradient operator (ai.onnx.preview.training) on emu against JAX.

Each case is an ONNX model whose graph asks for gradients with Gradient
nodes. Kilnc compiles it as an ordinary inference model (the importer
makes kiln.gradient, kiln-expand-gradients the backward ops); kiln-run
runs it on the emulator with seeded random inputs. The reference is the
same function written in jax.numpy from the ONNX operator definitions
(not from Kiln's IR) and differentiated by jax.grad / jax.vjp in float64.
The Gradient operator's output for a non-scalar y is the vector-Jacobian
product with ones, the gradient of sum(y): ONNX's own former node tests
(gradient_of_add: both outputs ones) define it so.

Cases: the two graphs of ONNX's former node tests (Add; Add then Mul); an
MLP (Gemm, Relu, Softmax, ReduceMean) differentiated with respect to its
weights, with the input as a `zs` tensor; the gradient with respect to an
intermediate tensor (the operator documentation's H); a convolution with
bias, stride and padding; a second derivative (Gradient of a Gradient's
output); and x that y does not depend on (zeros).

Bound: every output within 1e-4 relative on its norm (||kiln - ref|| /
||ref||, absolute 1e-6 for an all-zero reference). Kiln computes in fp32;
these graphs are a few ops deep, so rounding is ~1e-6 relative, and a
wrong rule (a missing transpose, an unsummed broadcast, a wrong sign) is
off by O(1).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402
import onnx
from onnx import TensorProto, helper, numpy_helper

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

RTOL, ATOL = 1e-4, 1e-6
TRAINING = "ai.onnx.preview.training"


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(v.astype(np.float32), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid(TRAINING, 1)])


def gradient(xs, y, outputs, zs=()):
    node = helper.make_node("Gradient", list(xs) + list(zs), outputs,
                            domain=TRAINING, xs=list(xs), y=y)
    if zs:
        node.attribute.append(helper.make_attribute("zs", list(zs)))
    return node


def case_add(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    m = model([helper.make_node("Add", ["a", "b"], ["c"]),
               gradient(["a", "b"], "c", ["dc_da", "dc_db"])],
              [("a", [3, 4]), ("b", [3, 4])], ["c", "dc_da", "dc_db"])
    da, db = jax.grad(lambda a, b: jnp.sum(a + b), (0, 1))(a, b)
    return m, {"a": a, "b": b}, {"c": a + b, "dc_da": da, "dc_db": db}


def case_add_mul(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    m = model([helper.make_node("Add", ["a", "b"], ["c"]),
               helper.make_node("Mul", ["a", "c"], ["d"]),
               gradient(["a", "b"], "d", ["dd_da", "dd_db"])],
              [("a", [3, 4]), ("b", [3, 4])], ["d", "dd_da", "dd_db"])
    da, db = jax.grad(lambda a, b: jnp.sum(a * (a + b)), (0, 1))(a, b)
    return m, {"a": a, "b": b}, {"d": a * (a + b), "dd_da": da, "dd_db": db}


def softmax(z, axis=-1):
    e = jnp.exp(z - jnp.max(z, axis=axis, keepdims=True))
    return e / jnp.sum(e, axis=axis, keepdims=True)


def case_mlp(rng):
    # y = mean(softmax(relu(x W1 + b1) W2) * c): c weights the classes (the
    # mean of softmax rows alone is constant, with gradient zero).
    x = rng.standard_normal((5, 8))
    w1, b1 = rng.standard_normal((8, 6)) * 0.5, rng.standard_normal(6) * 0.1
    w2, c = rng.standard_normal((6, 4)) * 0.5, np.arange(1.0, 5.0)
    m = model([helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
               helper.make_node("Relu", ["h"], ["r"]),
               helper.make_node("MatMul", ["r", "w2"], ["z"]),
               helper.make_node("Softmax", ["z"], ["p"], axis=-1),
               helper.make_node("Mul", ["p", "c"], ["pc"]),
               helper.make_node("ReduceMean", ["pc"], ["loss"], keepdims=0),
               gradient(["w1", "b1", "w2"], "loss", ["dw1", "db1", "dw2"],
                        zs=["x"])],
              [("x", [5, 8])], ["loss", "dw1", "db1", "dw2"],
              [("w1", w1), ("b1", b1), ("w2", w2), ("c", c)])
    # The weights rounded to fp32, as the model stores them.
    w1, b1, w2 = (v.astype(np.float32).astype(np.float64) for v in (w1, b1, w2))
    x = x.astype(np.float32).astype(np.float64)

    def f(w1, b1, w2):
        return jnp.mean(softmax(jnp.maximum(x @ w1 + b1, 0) @ w2) * c)

    g = jax.grad(f, (0, 1, 2))(w1, b1, w2)
    return m, {"x": x}, {"loss": f(w1, b1, w2), "dw1": g[0], "dw2": g[2],
                         "db1": g[1]}


def case_intermediate(rng):
    # The operator documentation's dY/dH: H = Tanh(X W), Y = sum(H Z).
    x, z = rng.standard_normal((4, 3)), rng.standard_normal((5, 2))
    w = rng.standard_normal((3, 5))
    m = model([helper.make_node("MatMul", ["x", "w"], ["hw"]),
               helper.make_node("Tanh", ["hw"], ["h"]),
               helper.make_node("MatMul", ["h", "z"], ["y"]),
               gradient(["h", "z"], "y", ["dy_dh", "dy_dz"])],
              [("x", [4, 3]), ("z", [5, 2])], ["dy_dh", "dy_dz"],
              [("w", w)])
    w = w.astype(np.float32).astype(np.float64)
    h = jnp.tanh(x @ w)
    dh, dz = jax.grad(lambda h, z: jnp.sum(h @ z), (0, 1))(h, z)
    return m, {"x": x, "z": z}, {"dy_dh": dh, "dy_dz": dz}


def case_conv(rng):
    x = rng.standard_normal((2, 3, 7, 7))
    w, b = rng.standard_normal((4, 3, 3, 3)) * 0.3, rng.standard_normal(4)
    m = model([helper.make_node("Conv", ["x", "w", "b"], ["c"],
                                strides=[2, 2], pads=[1, 0, 1, 1]),
               helper.make_node("Sigmoid", ["c"], ["s"]),
               gradient(["x", "w", "b"], "s", ["dx", "dw", "db"])],
              [("x", [2, 3, 7, 7])], ["dx", "dw", "db"],
              [("w", w), ("b", b)])
    w, b = (v.astype(np.float32).astype(np.float64) for v in (w, b))

    def f(x, w, b):
        c = jax.lax.conv_general_dilated(
            x, w, window_strides=(2, 2), padding=((1, 1), (0, 1)),
            dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jnp.sum(jax.nn.sigmoid(c + b[None, :, None, None]))

    g = jax.grad(f, (0, 1, 2))(x, w, b)
    return m, {"x": x}, {"dx": g[0], "dw": g[1], "db": g[2]}


def case_second_order(rng):
    # y = sum(x * x * x); g = dy/dx = 3x^2; h = d sum(g) / dx = 6x.
    x = rng.standard_normal((6,))
    m = model([helper.make_node("Mul", ["x", "x"], ["x2"]),
               helper.make_node("Mul", ["x2", "x"], ["x3"]),
               helper.make_node("ReduceSum", ["x3"], ["y"], keepdims=0),
               gradient(["x"], "y", ["g"]),
               gradient(["x"], "g", ["h"])],
              [("x", [6])], ["g", "h"])
    f = lambda x: jnp.sum(x * x * x)  # noqa: E731
    g = jax.grad(f)(x)
    h = jax.grad(lambda x: jnp.sum(jax.grad(f)(x)))(x)
    return m, {"x": x}, {"g": g, "h": h}


def case_independent(rng):
    # y does not depend on b: its gradient is zeros.
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((4,))
    m = model([helper.make_node("Exp", ["a"], ["y"]),
               gradient(["a", "b"], "y", ["da", "db"])],
              [("a", [2, 3]), ("b", [4])], ["da", "db"])
    return m, {"a": a, "b": b}, {"da": np.exp(a), "db": np.zeros(4)}


CASES = [("add", case_add), ("add-mul", case_add_mul), ("mlp", case_mlp),
         ("intermediate", case_intermediate), ("conv", case_conv),
         ("second-order", case_second_order),
         ("independent", case_independent)]


def run_case(name, build, args, rng):
    m, inputs, expected = build(rng)
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    artifact = os.path.join(work, "model.kiln")
    compile_ = subprocess.run([args.kilnc, path, "-o", artifact],
                              capture_output=True, text=True)
    if compile_.returncode != 0:
        print(f"{name}: kilnc failed: {compile_.stderr.strip()}")
        return False
    command = [args.kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(work, "out")]
    for input_name, value in inputs.items():
        npy = os.path.join(work, input_name + ".npy")
        np.save(npy, np.asarray(value, np.float32))
        command += ["-i", f"{input_name}={npy}"]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{name}: kiln-run failed: {run.stderr.strip()}")
        return False
    ok = True
    worst = 0.0
    for output, ref in expected.items():
        ref = np.asarray(ref, np.float64)
        # scripts/numerics.py's rule at RTOL (an all-zero reference: each
        # element within ATOL).
        tol = (numerics.tolerance(RTOL) if np.any(ref) else
               numerics.Tolerance(ATOL, 0.0, 0.0, ATOL))
        result = numerics.compare(
            np.load(os.path.join(work, "out", output + ".npy")), ref, tol,
            output)
        worst = max(worst, result.rel_l2)
        if not result.ok:
            print(f"{name}: {result.line()}")
            ok = False
    print(f"{name}: {len(expected)} outputs, worst rel-err {worst:.2g}, "
          f"{'ok' if ok else 'FAILED'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    failures = sum(not run_case(n, b, args, rng) for n, b in CASES)
    print(f"onnx-gradient: {len(CASES)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
