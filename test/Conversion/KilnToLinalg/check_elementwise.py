#!/usr/bin/env python3
"""CPU numerics of the elementwise lowerings of kiln-lower-to-linalg.

Usage: check_elementwise.py KILN_OPT [--via-gpu] [-v] [--filter NAME]

Each case is one elementwise kiln op on function arguments (so nothing folds),
lowered and run on the CPU by check_data_movement.py's driver (mlir-opt,
mlir-runner), and compared with numpy computed in float64 and rounded to the
result type. Tolerances are absolute: 0 (exact) for integer, boolean and
exactly representable results; 2e-6 for float results of magnitude <= ~8
(a few float32 ulps, for transcendental functions, whose libm and numpy
implementations may differ in the last bit).
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_data_movement as harness  # noqa: E402
from check_data_movement import Case, mlir_type  # noqa: E402

RNG = np.random.default_rng(7)
TOL = 2e-6


def f32(*shape, low=-3.0, high=3.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def unary(name, text, x, ref, tol=TOL, out_dtype=None):
    expected = np.asarray(ref(x.astype(np.float64) if x.dtype.kind == "f" else x))
    expected = expected.astype(out_dtype or x.dtype)
    op = f"kiln.{text} {{0}}" if "{{" not in text else f"kiln.{text}"
    if "{{" in text:
        op = "kiln." + text.replace("OPERAND", "{0}")
    return Case(name, op + f" : {mlir_type(x)}", [x], [expected], tolerance=tol)


def binary(name, kind, a, b, ref, out_dtype=None, tol=TOL, attrs=""):
    wide = [v.astype(np.float64) if v.dtype.kind == "f" else v for v in (a, b)]
    expected = np.asarray(ref(*wide)).astype(out_dtype or a.dtype)
    return Case(name, f"kiln.{kind} {{0}}, {{1}}{attrs} : {{types}}", [a, b], [expected],
                tolerance=tol if expected.dtype.kind == "f" else 0.0)


def cases():
    out = []
    add = out.append
    x = f32(4, 33)
    pos = f32(4, 33, low=0.1, high=5.0)
    erf = np.vectorize(math.erf)
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731

    # Unary math.
    add(unary("neg", "neg", x, np.negative, 0.0))
    add(unary("abs", "abs", x, np.abs, 0.0))
    add(unary("exp", "exp", x, np.exp, 4e-6))
    add(unary("log", "log", pos, np.log))
    add(unary("sqrt", "sqrt", pos, np.sqrt))
    add(unary("rsqrt", "rsqrt", pos, lambda v: 1 / np.sqrt(v)))
    add(unary("reciprocal", "reciprocal", pos, lambda v: 1 / v))
    add(unary("tanh", "tanh", x, np.tanh))
    add(unary("sigmoid", "sigmoid", x, sigmoid))
    add(unary("erf", "erf", x, erf))
    add(unary("sin", "sin", x, np.sin))
    add(unary("cos", "cos", x, np.cos))
    unit = f32(4, 33, low=-0.95, high=0.95)
    add(unary("asin", "asin", unit, np.arcsin))
    add(unary("acos", "acos", unit, np.arccos))
    add(unary("atan", "atan", x, np.arctan))
    add(unary("sinh", "sinh", x, np.sinh, 2e-5))
    add(unary("cosh", "cosh", x, np.cosh, 2e-5))
    add(unary("asinh", "asinh", x, np.arcsinh))
    add(unary("acosh", "acosh", f32(4, 33, low=1.0, high=5.0), np.arccosh))
    add(unary("atanh", "atanh", unit, np.arctanh, 4e-6))
    halves = (RNG.integers(-12, 12, size=(4, 16)) * 0.5).astype(np.float32)
    add(unary("floor", "floor", x, np.floor, 0.0))
    add(unary("ceil", "ceil", x, np.ceil, 0.0))
    add(unary("round_ties_even", "round", halves, np.round, 0.0))
    add(unary("sign", "sign", halves, np.sign, 0.0))

    # Activations.
    add(unary("relu", "relu", x, lambda v: np.maximum(v, 0), 0.0))
    add(unary("softplus", "softplus", f32(4, 33, low=-30, high=30),
              lambda v: np.logaddexp(0, v), 8e-6))
    add(unary("hard_swish", "hard_swish", x, lambda v: v * np.clip(v / 6 + 0.5, 0, 1)))
    add(unary("leaky_relu", "leaky_relu OPERAND {{alpha = 1.000000e-01 : f32}}", x,
              lambda v: np.where(v >= 0, v, np.float32(0.1) * v)))
    add(unary("elu", "elu OPERAND {{alpha = 1.500000e+00 : f32}}", x,
              lambda v: np.where(v >= 0, v, 1.5 * np.expm1(v))))
    add(unary("gelu_exact", "gelu", x, lambda v: 0.5 * v * (1 + erf(v / math.sqrt(2)))))
    add(unary("gelu_tanh", "gelu OPERAND {{tanh}}", x,
              lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))))
    add(unary("hard_sigmoid", "hard_sigmoid OPERAND {{alpha = 2.000000e-01 : f32, "
              "beta = 5.000000e-01 : f32}}", x, lambda v: np.clip(0.2 * v + 0.5, 0, 1)))
    add(unary("clip", "clip OPERAND {{min = -1.0 : f64, max = 2.0 : f64}}", x,
              lambda v: np.clip(v, -1, 2), 0.0))

    # Integers.
    ints = RNG.integers(-50, 50, size=(3, 10)).astype(np.int64)
    add(unary("neg_i64", "neg", ints, np.negative, 0.0))
    add(unary("abs_i64", "abs", ints, np.abs, 0.0))
    add(unary("sign_i64", "sign", ints, np.sign, 0.0))
    add(unary("relu_i64", "relu", ints, lambda v: np.maximum(v, 0), 0.0))

    # Binary with numpy broadcasting.
    a, row, col = f32(4, 33), f32(33), f32(4, 1)
    add(binary("add_row", "add", a, row, np.add))
    add(binary("sub_col", "sub", a, col, np.subtract))
    add(binary("mul_row", "mul", a, row, np.multiply))
    add(binary("div_row", "div", a, f32(33, low=0.5, high=4), np.divide))
    add(binary("pow", "pow", f32(4, 33, low=0.1, high=3), f32(33, low=-2, high=2),
               np.power, tol=2e-5))
    add(binary("max_col", "max", a, col, np.maximum))
    add(binary("min_row", "min", a, row, np.minimum))
    add(binary("fmod", "mod", a, f32(33, low=0.5, high=2), np.fmod, attrs=" {{fmod}}"))
    ia = RNG.integers(-40, 40, size=(3, 10)).astype(np.int64)
    ib = RNG.choice([-7, -3, -2, 2, 3, 5], size=(10,)).astype(np.int64)
    add(binary("div_i64_trunc", "div", ia, ib, lambda p, q: np.fix(p / q).astype(np.int64)))
    add(binary("mod_i64_python", "mod", ia, ib, np.mod))
    add(binary("fmod_i64", "mod", ia, ib, np.fmod, attrs=" {{fmod}}"))
    add(binary("max_i64", "max", ia, ib, np.maximum))
    # Integer pow by squaring: exact, wrapping past the width like repeated
    # multiplication; a negative exponent truncates the real result.
    def int_pow(p, q):
        p, q = np.broadcast_arrays(p, q)
        out = np.empty(p.shape, dtype=p.dtype)
        for i in np.ndindex(p.shape):
            base, exp = int(p[i]), int(q[i])
            if exp >= 0:
                value = base ** exp
            else:
                value = 1 if base == 1 else (1 if exp % 2 == 0 else -1) if base == -1 else 0
            bits = 8 * p.dtype.itemsize
            value = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
            out[i] = value
        return out
    pa = RNG.integers(-9, 10, size=(3, 12)).astype(np.int64)
    pa[0, :4] = [1, -1, 0, 3]
    pb = RNG.integers(-3, 22, size=(12,)).astype(np.int64)
    pb[:4] = [-3, -3, 0, 40]  # 3^40 wraps in int64
    add(binary("pow_i64", "pow", pa, pb, int_pow))
    add(binary("pow_i32", "pow", pa.astype(np.int32), pb.astype(np.int32), int_pow))
    bools = RNG.integers(0, 2, size=(4, 8)).astype(np.bool_)
    bools2 = RNG.integers(0, 2, size=(8,)).astype(np.bool_)
    add(binary("and", "and", bools, bools2, np.logical_and))
    add(binary("or", "or", bools, bools2, np.logical_or))
    add(binary("xor", "xor", bools, bools2, np.logical_xor))
    b = a.copy()
    b[:, ::3] = row[::3]  # some equal elements
    for kind, fn in [("equal", np.equal), ("less", np.less), ("less_equal", np.less_equal),
                     ("greater", np.greater), ("greater_equal", np.greater_equal)]:
        add(binary(f"{kind}_f32", kind, b, row, fn, out_dtype=np.bool_))
    add(binary("less_i64", "less", ia, ib, np.less, out_dtype=np.bool_))

    # select and cast.
    add(Case("select", "kiln.select {0}, {1}, {2} : {types}", [bools, a[:, :8], row[:8]],
             [np.where(bools, a[:, :8], row[:8])]))
    add(Case("cast_f32_to_i32", "kiln.cast {0} : {types}", [x],
             [np.trunc(x).astype(np.int32)]))
    add(Case("cast_f32_to_i1", "kiln.cast {0} : {types}", [halves], [halves != 0]))
    add(Case("cast_i1_to_f32", "kiln.cast {0} : {types}", [bools],
             [bools.astype(np.float32)]))
    add(Case("cast_i64_to_f32", "kiln.cast {0} : {types}", [ints],
             [ints.astype(np.float32)]))
    add(Case("cast_i64_to_i32", "kiln.cast {0} : {types}", [ints],
             [ints.astype(np.int32)]))
    return out


if __name__ == "__main__":
    sys.exit(harness.main(cases))
