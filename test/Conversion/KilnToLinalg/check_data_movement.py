#!/usr/bin/env python3
"""Runs the kiln-lower-to-linalg lowering of every data-movement op and
compares the results with numpy.

FileCheck only sees the structure of the lowered IR; this script checks its
numbers. Each case is a small kiln function of one op, called from @main
with dense constants (as arguments, so that the op is lowered rather than
folded). All cases go into one module, which kiln-opt lowers to linalg,
upstream mlir-opt lowers to LLVM and mlir-runner executes on the CPU.
Results are printed as integers (floats as their bit patterns), so every
comparison is exact except linear and cubic resizing (within 1e-6 absolute).

usage: check_data_movement.py KILN_OPT [--mlir-bin DIR] [--keep DIR]
                              [--filter TEXT] [-v]
Prints one line per failing case and then "all N cases match" or
"K of N cases differ"; exits non-zero on any difference.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

RNG = np.random.default_rng(20240611)

MLIR_TYPES = {np.float32: "f32", np.float16: "f16", np.int64: "i64",
              np.int32: "i32", np.bool_: "i1"}

LOWER_TO_LLVM = [
    "--convert-elementwise-to-linalg",
    "--one-shot-bufferize=bufferize-function-boundaries",
    "--convert-linalg-to-loops", "--expand-strided-metadata", "--lower-affine",
    # (vector: kiln-map-to-gpu's vectorised elementwise kernels.)
    "--convert-scf-to-cf", "--convert-vector-to-llvm", "--finalize-memref-to-llvm",
    "--convert-math-to-llvm", "--convert-math-to-libm", "--convert-arith-to-llvm",
    "--convert-index-to-llvm", "--convert-func-to-llvm",
    "--convert-cf-to-llvm", "--reconcile-unrealized-casts",
]


# ---------------------------------------------------------------------------
# Building kiln IR
# ---------------------------------------------------------------------------

def mlir_type(array):
    element = MLIR_TYPES[array.dtype.type]
    return "tensor<" + "".join(f"{d}x" for d in array.shape) + element + ">"


def literal(array):
    def scalar(v):
        if array.dtype == np.bool_:
            return "true" if v else "false"
        if np.issubdtype(array.dtype, np.floating):
            if not np.isfinite(v):
                # MLIR has no NaN/inf literal: write the bits in hex.
                bits = np.array(v, array.dtype).view(f"u{array.dtype.itemsize}")
                return hex(int(bits))
            return repr(float(v))
        return str(int(v))

    def nested(a):
        if a.ndim == 0:
            return scalar(a[()])
        return "[" + ", ".join(nested(x) for x in a) + "]"
    body = nested(array) if array.size else ""
    return f"dense<{body}> : {mlir_type(array)}"


class Case:
    """One kiln op applied to constant inputs, with numpy's expected results.

    `op` is the op's text with {0}, {1}, ... for the inputs and {types} for
    its trailing type list; `expected` is one array per result.
    """

    def __init__(self, name, op, inputs, expected, tolerance=0.0):
        self.name = name
        self.op = op
        self.inputs = [np.asarray(x) for x in inputs]
        self.expected = [np.asarray(x) for x in expected]
        self.tolerance = tolerance

    def function(self, symbol):
        """The case as a function of its inputs, which print its results.

        Inputs arrive as arguments, not constants: the conversion driver
        folds an op whose operands are constants, and then this would check
        the folder instead of the lowering."""
        params = ", ".join(f"%in{i}: {mlir_type(x)}" for i, x in enumerate(self.inputs))
        lines = [f"func.func @{symbol}({params}) {{"]
        types = ", ".join(mlir_type(y) for y in self.expected)
        if self.inputs:
            types = ", ".join(mlir_type(x) for x in self.inputs) + " -> " + types
        results = ", ".join(f"%r{i}" for i in range(len(self.expected)))
        operands = [f"%in{i}" for i in range(len(self.inputs))]
        lines.append(f"  {results} = " + self.op.format(*operands, types=types))
        for i, y in enumerate(self.expected):
            lines += print_result(f"%r{i}", y, f"{symbol}_{i}")
        lines += ["  return", "}"]
        return "\n".join(lines)

    def call(self, symbol):
        """Lines of @main that call the case with its inputs as constants."""
        lines = []
        for i, x in enumerate(self.inputs):
            lines.append(f"  %{symbol}_in{i} = arith.constant {literal(x)}")
        args = ", ".join(f"%{symbol}_in{i}" for i in range(len(self.inputs)))
        types = ", ".join(mlir_type(x) for x in self.inputs)
        lines.append(f"  call @{symbol}({args}) : ({types}) -> ()")
        return lines


def print_result(value, like, tag):
    """Prints `value` (shaped and typed like `like`) as 32- or 64-bit ints."""
    shape = "".join(f"{d}x" for d in like.shape)
    element = MLIR_TYPES[like.dtype.type]
    lines = []
    if element == "i64":
        printed, kind = value, "i64"
    elif element == "i32":
        printed, kind = value, "i32"
    elif element == "f32":
        printed, kind = f"%bits_{tag}", "i32"
        lines.append(f"  {printed} = arith.bitcast {value} : tensor<{shape}f32> "
                     f"to tensor<{shape}i32>")
    elif element == "f16":
        lines.append(f"  %half_{tag} = arith.bitcast {value} : tensor<{shape}f16> "
                     f"to tensor<{shape}i16>")
        printed, kind = f"%bits_{tag}", "i32"
        lines.append(f"  {printed} = arith.extui %half_{tag} : tensor<{shape}i16> "
                     f"to tensor<{shape}i32>")
    else:  # i1
        printed, kind = f"%bits_{tag}", "i32"
        lines.append(f"  {printed} = arith.extui {value} : tensor<{shape}i1> "
                     f"to tensor<{shape}i32>")
    lines.append(f"  %unranked_{tag} = tensor.cast {printed} : tensor<{shape}{kind}> "
                 f"to tensor<*x{kind}>")
    lines.append(f"  call @printMemref{kind.upper()}(%unranked_{tag}) : "
                 f"(tensor<*x{kind}>) -> ()")
    return lines


def decode(numbers, like):
    """The printed integers back as an array of `like`'s type and shape."""
    if like.dtype == np.float32:
        data = np.array(numbers, dtype=np.int64).astype(np.uint32).view(np.float32)
    elif like.dtype == np.float16:
        data = np.array(numbers, dtype=np.int64).astype(np.uint16).view(np.float16)
    else:
        data = np.array(numbers, dtype=np.int64).astype(like.dtype)
    return data.reshape(like.shape)


# ---------------------------------------------------------------------------
# numpy references
# ---------------------------------------------------------------------------

def floats(*shape):
    """Distinct, exactly printable float32 values."""
    return (RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.25 - 3).astype(np.float32)


def slice_ref(x, starts, limits, steps):
    index = tuple(slice(s, None if l == -1 else l, st)
                  for s, l, st in zip(starts, limits, steps))
    return x[index]


def scatter_ref(x, indices, updates, axis, reduction):
    y = x.copy()
    for p in np.ndindex(*indices.shape):
        target = list(p)
        target[axis] = indices[p] + (x.shape[axis] if indices[p] < 0 else 0)
        target = tuple(target)
        old, new = y[target], updates[p]
        y[target] = {"none": new, "add": old + new, "mul": old * new,
                     "max": max(old, new), "min": min(old, new)}[reduction]
    return y


def gather_elements_ref(x, indices, axis):
    return np.take_along_axis(x, np.where(indices < 0, indices + x.shape[axis], indices),
                              axis)


def resize_coordinate(o, in_len, scale, mode, out_len=None, roi=(0.0, 1.0)):
    """ONNX's reference: the resized length is scale * input length."""
    resized_len = scale * in_len
    if mode == "tf_crop_and_resize":
        start, end = roi
        if resized_len == 1:
            return (end - start) * (in_len - 1) / 2 + start * (in_len - 1)
        return o * (end - start) * (in_len - 1) / (resized_len - 1) + start * (in_len - 1)
    if mode == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / resized_len)
        return offset + (o + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if resized_len != 1 else 0.0
    if mode == "align_corners":
        return 0.0 if resized_len == 1 else o * (in_len - 1) / (resized_len - 1)
    return o / scale  # asymmetric


def round_nearest(x, mode):
    """ONNX's rule: ties (x.5) go down for round_prefer_floor, up otherwise."""
    if mode == "floor":
        return np.floor(x)
    if mode == "ceil":
        return np.ceil(x)
    fraction = x - np.floor(x)
    up = fraction > 0.5 if mode == "round_prefer_floor" else fraction >= 0.5
    return np.floor(x) + up


def cubic_row(c, in_len, a, exclude_outside):
    """ONNX's cubic rule for one output: the 4 pixels nearest to c (ties to
    the lower index) of the input edge-padded by 2, the rightmost pixel at
    distance <= 1 taking the weight for ratio c - floor(c) in (0, 1]."""
    def kernel(d):
        d = abs(d)
        if d <= 1:
            return ((a + 2) * d - (a + 3)) * d * d + 1
        if d < 2:
            return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return 0.0
    padded = range(-2, in_len + 2)
    taps = sorted(sorted(padded, key=lambda i: (abs(c - i), i))[:4])
    coeffs = np.array([kernel(c - i) for i in taps])
    if exclude_outside:
        coeffs = np.where([0 <= i < in_len for i in taps], coeffs, 0)
        coeffs = coeffs / coeffs.sum()
    row = np.zeros(in_len)
    for i, w in zip(taps, coeffs):
        row[min(max(i, 0), in_len - 1)] += w
    return row


def resize_ref(x, out_shape, mode, coordinate_mode, nearest_mode, scales,
               cubic_a=-0.75, exclude_outside=False, roi=None, extrapolation=0.0):
    """ONNX Resize, one dimension at a time, coordinates in float64.
    tf_crop_and_resize: an output element any of whose coordinates falls
    outside the input is `extrapolation`."""
    y = x.astype(np.float64)
    outside = np.zeros(out_shape, dtype=bool)
    rank = x.ndim
    for d, (in_len, out_len) in enumerate(zip(x.shape, out_shape)):
        scale = scales[d] if scales else out_len / in_len
        region = (roi[d], roi[rank + d]) if roi else (0.0, 1.0)
        weights = np.zeros((out_len, in_len))
        identity = in_len == out_len and scale == 1 and region == (0.0, 1.0)
        if identity:
            weights = np.eye(in_len)
        for o in range(0 if identity else out_len):
            c = resize_coordinate(o, in_len, scale, coordinate_mode, out_len, region)
            if coordinate_mode == "tf_crop_and_resize" and not 0 <= c <= in_len - 1:
                index = [slice(None)] * rank
                index[d] = o
                outside[tuple(index)] = True
                continue
            if mode == "cubic":
                weights[o] = cubic_row(c, in_len, cubic_a, exclude_outside)
            elif mode == "nearest":
                weights[o, int(np.clip(round_nearest(c, nearest_mode), 0, in_len - 1))] = 1
            else:
                lo = np.floor(c)
                t = c - lo
                weights[o, int(np.clip(lo, 0, in_len - 1))] += 1 - t
                weights[o, int(np.clip(lo + 1, 0, in_len - 1))] += t
        y = np.moveaxis(np.tensordot(weights, np.moveaxis(y, d, 0), axes=1), 0, d)
    return np.where(outside, extrapolation, y).astype(x.dtype)


# ---------------------------------------------------------------------------
# The cases
# ---------------------------------------------------------------------------

def cases():
    out = []
    add = out.append
    x234 = floats(2, 3, 4)
    i234 = np.arange(24, dtype=np.int64).reshape(2, 3, 4) * 7 - 50

    # constant, iota
    add(Case("constant", "kiln.constant dense<[[1.5, -2.0], [0.25, 8.0]]> : {types}",
             [], [np.array([[1.5, -2.0], [0.25, 8.0]], np.float32)]))
    add(Case("constant_splat_i64", "kiln.constant dense<-3> : {types}", [],
             [np.full((2, 2), -3, np.int64)]))
    # An iota of up to 2^16 elements folds into a constant before it could
    # be lowered, so these are longer.
    n = (1 << 16) + 3
    add(Case("iota_f32", "kiln.iota {{start = -1.5 : f64, step = 0.1 : f64}} : {types}", [],
             [(-1.5 + np.arange(n) * 0.1).astype(np.float32)]))
    add(Case("iota_i64", "kiln.iota {{start = 3.0 : f64, step = -2.0 : f64}} : {types}", [],
             [3 - 2 * np.arange(n, dtype=np.int64)]))
    add(Case("iota_i32_fraction", "kiln.iota {{start = 0.5 : f64, step = 1.25 : f64}} : {types}",
             [], [(0.5 + np.arange(n) * 1.25).astype(np.int64).astype(np.int32)]))

    # reshape
    for name, shape in [("collapse", (6, 4)), ("flatten", (24,)), ("mixed", (6, 2, 2)),
                        ("regroup", (4, 3, 2)), ("unit_dims", (1, 2, 1, 12, 1))]:
        add(Case(f"reshape_{name}", "kiln.reshape {0} : {types}", [x234],
                 [x234.reshape(shape)]))
    add(Case("reshape_expand_i64", "kiln.reshape {0} : {types}", [i234.reshape(24)],
             [i234.reshape(2, 12)]))
    add(Case("reshape_to_scalar", "kiln.reshape {0} : {types}",
             [np.array([[4.5]], np.float32)], [np.array(4.5, np.float32)]))
    add(Case("reshape_from_scalar", "kiln.reshape {0} : {types}",
             [np.array(4.5, np.float32)], [np.array([[4.5]], np.float32)]))

    # transpose
    add(Case("transpose", "kiln.transpose {0} {{permutation = array<i64: 2, 0, 1>}} : {types}",
             [x234], [x234.transpose(2, 0, 1)]))
    half = floats(3, 5).astype(np.float16)
    add(Case("transpose_f16", "kiln.transpose {0} {{permutation = array<i64: 1, 0>}} : {types}",
             [half], [half.T]))
    add(Case("transpose_i64", "kiln.transpose {0} {{permutation = array<i64: 1, 0, 2>}} : {types}",
             [i234], [i234.transpose(1, 0, 2)]))

    # broadcast
    x31 = floats(3, 1)
    add(Case("broadcast_stretch", "kiln.broadcast {0} : {types}", [x31],
             [np.broadcast_to(x31, (2, 3, 4))]))
    x3 = floats(3)
    add(Case("broadcast_leading", "kiln.broadcast {0} : {types}", [x3],
             [np.broadcast_to(x3, (2, 4, 3))]))
    add(Case("broadcast_i64", "kiln.broadcast {0} : {types}", [i234[:, :1, :]],
             [np.broadcast_to(i234[:, :1, :], (2, 2, 3, 4))]))

    scalar = np.array(1.25, np.float32)
    add(Case("broadcast_scalar", "kiln.broadcast {0} : {types}", [scalar],
             [np.broadcast_to(scalar, (2, 3))]))

    # concat
    a, b, e = floats(2, 2, 4), floats(2, 3, 4), np.zeros((2, 0, 4), np.float32)
    add(Case("concat", "kiln.concat {0}, {1}, {2}, {3} {{axis = 1 : i64}} : {types}",
             [a, e, b, x234], [np.concatenate([a, e, b, x234], axis=1)]))
    add(Case("concat_i64_axis0", "kiln.concat {0}, {1} {{axis = 0 : i64}} : {types}",
             [i234, i234 + 100], [np.concatenate([i234, i234 + 100], axis=0)]))

    mask = np.array([[True, False, True], [False, False, True]])
    add(Case("concat_i1", "kiln.concat {0}, {1} {{axis = 1 : i64}} : {types}",
             [mask, ~mask], [np.concatenate([mask, ~mask], axis=1)]))

    # slice
    x610 = floats(6, 10)
    for name, starts, limits, steps in [
            ("unit", [1, 2], [5, 9], [1, 1]),
            ("strided", [0, 1], [6, 10], [2, 3]),
            ("reverse", [5, 9], [-1, -1], [-1, -1]),
            ("reverse_strided", [4, 8], [0, 1], [-2, -3]),
            ("mixed", [0, 9], [6, 2], [3, -2])]:
        attrs = (f"starts = array<i64: {', '.join(map(str, starts))}>, "
                 f"limits = array<i64: {', '.join(map(str, limits))}>, "
                 f"steps = array<i64: {', '.join(map(str, steps))}>")
        add(Case(f"slice_{name}", "kiln.slice {0} {{" + attrs + "}} : {types}", [x610],
                 [slice_ref(x610, starts, limits, steps)]))

    # split
    x29 = floats(2, 9)
    pieces = np.split(x29, [2, 2, 7], axis=1)
    add(Case("split", "kiln.split {0} {{axis = 1 : i64, sizes = array<i64: 2, 0, 5, 2>}} : {types}",
             [x29], pieces))

    # gather
    table = floats(5, 3)
    ids = np.array([[0, 4, -1], [2, -5, 3]], np.int64)
    add(Case("gather_rows", "kiln.gather {0}, {1} {{axis = 0 : i64}} : {types}",
             [table, ids], [np.take(table, ids, axis=0)]))
    ids32 = np.array([2, -2, 0, -3], np.int32)
    add(Case("gather_axis1_i32", "kiln.gather {0}, {1} {{axis = 1 : i64}} : {types}",
             [x234, ids32], [np.take(x234, ids32, axis=1)]))
    add(Case("gather_scalar_index", "kiln.gather {0}, {1} {{axis = 1 : i64}} : {types}",
             [i234, np.array(-1, np.int64)], [np.take(i234, -1, axis=1)]))

    add(Case("gather_no_indices", "kiln.gather {0}, {1} {{axis = 0 : i64}} : {types}",
             [table, np.zeros((0,), np.int64)], [np.take(table, np.zeros((0,), np.int64), axis=0)]))

    # gather_elements
    idx = np.array([[2, 0], [-1, 1], [0, -3]], np.int64)
    x33 = floats(3, 3)
    add(Case("gather_elements_axis1", "kiln.gather_elements {0}, {1} {{axis = 1 : i64}} : {types}",
             [x33, idx], [gather_elements_ref(x33, idx, 1)]))
    idx0 = np.array([[1, 2, 0], [-3, -1, 2]], np.int64)
    add(Case("gather_elements_axis0", "kiln.gather_elements {0}, {1} {{axis = 0 : i64}} : {types}",
             [x33, idx0], [gather_elements_ref(x33, idx0, 0)]))

    # scatter_elements: duplicates show the order; indices cover part of the
    # input in the non-axis dimension.
    x45 = floats(4, 5)
    sidx = np.array([[1, 3, 1], [-1, 0, 4], [2, 2, 2]], np.int64)
    # Some updates above and some below the values they meet, so that max
    # and min both change something.
    upd = np.array([[5.5, -4.0, 0.125], [-2.5, 9.0, -0.75], [3.25, -6.5, 1.5]], np.float32)
    for reduction in ["none", "add", "mul", "max", "min"]:
        add(Case(f"scatter_{reduction}",
                 "kiln.scatter_elements {0}, {1}, {2} {{axis = 1 : i64, "
                 f"reduction = #kiln.scatter_reduction<{reduction}>" + "}} : {types}",
                 [x45, sidx, upd], [scatter_ref(x45, sidx, upd, 1, reduction)]))
    sidx0 = np.array([[3, 0, 3, 1, -4], [3, 2, 0, 1, 0]], np.int64)
    upd_i = np.arange(10, dtype=np.int64).reshape(2, 5) - 4
    x45i = np.arange(20, dtype=np.int64).reshape(4, 5)
    add(Case("scatter_add_i64_axis0",
             "kiln.scatter_elements {0}, {1}, {2} {{axis = 0 : i64, "
             "reduction = #kiln.scatter_reduction<add>}} : {types}",
             [x45i, sidx0, upd_i], [scatter_ref(x45i, sidx0, upd_i, 0, "add")]))
    add(Case("scatter_default_axis0", "kiln.scatter_elements {0}, {1}, {2} {{axis = 0 : i64}} : {types}",
             [x45i, sidx0, upd_i], [scatter_ref(x45i, sidx0, upd_i, 0, "none")]))

    # pad
    x34 = floats(3, 4)
    for mode in ["constant", "reflect", "edge"]:
        # Reflect padding must stay below each dimension's size.
        pads = [(1, 1 if mode == "reflect" else 2), (2, 1), (0, 3)]
        attrs = (f"low = array<i64: {', '.join(str(p[0]) for p in pads)}>, "
                 f"high = array<i64: {', '.join(str(p[1]) for p in pads)}>")
        if mode == "constant":
            attrs += ", value = 2.5"
        kwargs = {"constant_values": 2.5} if mode == "constant" else {}
        add(Case(f"pad_{mode}", f"kiln.pad <{mode}> {{0}} {{{{{attrs}}}}} : {{types}}",
                 [x234], [np.pad(x234, pads, mode=mode, **kwargs)]))
    add(Case("pad_constant_i64", "kiln.pad <constant> {0} {{low = array<i64: 0, 1>, "
             "high = array<i64: 2, 0>, value = -7.0}} : {types}",
             [x45i], [np.pad(x45i, [(0, 2), (1, 0)], constant_values=-7)]))
    add(Case("pad_reflect_2d", "kiln.pad <reflect> {0} {{low = array<i64: 2, 3>, "
             "high = array<i64: 2, 3>}} : {types}",
             [x34], [np.pad(x34, [(2, 2), (3, 3)], mode="reflect")]))

    empty_rows = np.zeros((0, 3), np.float32)
    add(Case("pad_constant_empty_input", "kiln.pad <constant> {0} {{low = array<i64: 1, 0>, "
             "high = array<i64: 1, 1>, value = 4.0}} : {types}",
             [empty_rows], [np.pad(empty_rows, [(1, 1), (0, 1)], constant_values=4)]))

    # tile
    add(Case("tile", "kiln.tile {0} {{repeats = array<i64: 2, 1, 3>}} : {types}",
             [x234], [np.tile(x234, (2, 1, 3))]))
    add(Case("tile_unit_dim_i64", "kiln.tile {0} {{repeats = array<i64: 3, 2>}} : {types}",
             [i234[0, :1, :]], [np.tile(i234[0, :1, :], (3, 2))]))

    add(Case("tile_zero_repeat", "kiln.tile {0} {{repeats = array<i64: 0, 2>}} : {types}",
             [x34], [np.tile(x34, (0, 2))]))

    # resize: nearest under every coordinate and nearest mode, up and down;
    # linear under every coordinate mode, in two dimensions at once.
    # Values below 1, so that float32 rounding stays far below the tolerance.
    image = floats(1, 2, 4, 5) / 16
    shapes = {"up": (1, 2, 7, 10), "down": (1, 2, 3, 2)}
    coordinate_modes = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
    nearest_modes = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
    for direction, out_shape in shapes.items():
        for cm in coordinate_modes:
            for nm in nearest_modes:
                add(resize_case(f"resize_nearest_{direction}_{cm}_{nm}", image, out_shape,
                                "nearest", cm, nm, []))
            add(resize_case(f"resize_linear_{direction}_{cm}", image, out_shape,
                            "linear", cm, "round_prefer_floor", []))
    # Explicit scales (float32 values, as a model holds them) that differ from
    # the size ratio. With f32(1.6), output 4 maps to 2.49999996 in float64
    # but to exactly 2.5 in float32 arithmetic: a tie that only float64
    # coordinates resolve as ONNX's reference does.
    scales = [1.0, 1.0, float(np.float32(1.6)), float(np.float32(1.7))]
    for cm in coordinate_modes:
        add(resize_case(f"resize_linear_scales_{cm}", image, (1, 2, 6, 8), "linear", cm,
                        "round_prefer_floor", scales))
        for nm in ["round_prefer_floor", "round_prefer_ceil"]:
            add(resize_case(f"resize_nearest_scales_{cm}_{nm}", image, (1, 2, 6, 8),
                            "nearest", cm, nm, scales))
    # pytorch_half_pixel with an output length of 1.
    add(resize_case("resize_linear_to_one", image, (1, 2, 1, 3), "linear",
                    "pytorch_half_pixel", "round_prefer_floor", []))
    # Cubic under every coordinate mode, up and down, in two dimensions at
    # once; A = -0.5 with exclude_outside; half_pixel_symmetric with scales
    # whose output sizes round down.
    for direction, out_shape in shapes.items():
        for cm in coordinate_modes + ["half_pixel_symmetric"]:
            add(resize_case(f"resize_cubic_{direction}_{cm}", image, out_shape,
                            "cubic", cm, "round_prefer_floor", []))
        add(resize_case(f"resize_cubic_{direction}_exclude_outside", image, out_shape,
                        "cubic", "half_pixel", "round_prefer_floor", [], cubic_a=-0.5,
                        exclude_outside=True))
    add(resize_case("resize_cubic_scales_asymmetric", image, (1, 2, 6, 8), "cubic",
                    "asymmetric", "round_prefer_floor", scales))
    add(resize_case("resize_linear_half_pixel_symmetric", image, (1, 2, 6, 8), "linear",
                    "half_pixel_symmetric", "round_prefer_floor", scales))
    # tf_crop_and_resize: regions inside and partly outside the input
    # (extrapolated), every interpolation mode, an output length of 1.
    inside = [0.0, 0.0, 0.2, 0.4, 1.0, 1.0, 0.7, 0.9]
    beyond = [0.0, 0.5, -0.2, 0.3, 1.0, 1.0, 1.3, 1.6]
    for mode in ["nearest", "linear", "cubic"]:
        for name, roi in [("inside", inside), ("beyond", beyond)]:
            add(resize_case(f"resize_crop_{mode}_{name}", image, (1, 2, 5, 7), mode,
                            "tf_crop_and_resize", "round_prefer_floor", [], roi=roi,
                            extrapolation=0.75))
    add(resize_case("resize_crop_linear_to_one", image, (1, 2, 1, 3), "linear",
                    "tf_crop_and_resize", "round_prefer_floor", [], roi=inside))
    return out


def resize_case(name, x, out_shape, mode, coordinate_mode, nearest_mode, scales,
                cubic_a=-0.75, exclude_outside=False, roi=None, extrapolation=0.0):
    scales_attr = "array<f64" + (": " + ", ".join(map(repr, scales)) if scales else "") + ">"
    cubic_attrs = ""
    if mode == "cubic":
        cubic_attrs = f", cubic_coeff_a = {cubic_a!r} : f64"
        cubic_attrs += ", exclude_outside" if exclude_outside else ""
    if roi:
        cubic_attrs += (", roi = array<f64: " + ", ".join(map(repr, roi)) + ">"
                        + f", extrapolation_value = {extrapolation!r} : f64")
    op = ("kiln.resize {0} {{" + f"mode = #kiln.resize_mode<{mode}>, "
          f"coordinate_mode = #kiln.coordinate_mode<{coordinate_mode}>, "
          f"nearest_mode = #kiln.nearest_mode<{nearest_mode}>, scales = {scales_attr}"
          + cubic_attrs + "}} : {types}")
    expected = resize_ref(x, out_shape, mode, coordinate_mode, nearest_mode, scales,
                          cubic_a, exclude_outside, roi, extrapolation)
    return Case(name, op, [x], [expected],
                tolerance=1e-6 if mode in ("linear", "cubic") else 0.0)


# ---------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------

def module_text(selected):
    lines = [f"func.func private @printMemref{k}(tensor<*x{k.lower()}>) "
             "attributes {llvm.emit_c_interface}" for k in ("I32", "I64")]
    calls = []
    for i, case in enumerate(selected):
        lines.append(f"// {case.name}")
        lines.append(case.function(f"case{i}"))
        calls += case.call(f"case{i}")
    lines += ["func.func @main() {"] + calls + ["  return", "}"]
    return "\n".join(lines) + "\n"


def run(selected, tools, workdir, stem):
    """Lowers and runs `selected`; returns the printed memrefs' numbers or an
    error message."""
    source = os.path.join(workdir, stem + ".mlir")
    with open(source, "w") as f:
        f.write(module_text(selected))
    # --fused: each case's ops become kiln.fusion regions first, and each
    # region one generic computing at point (kiln-collapse-fusions).
    lower = ("--pass-pipeline=builtin.module(func.func(kiln-fuse, kiln-lower-to-linalg, "
             "kiln-collapse-fusions, canonicalize, cse))" if tools["fused"]
             else "-kiln-lower-to-linalg")
    steps = [[tools["kiln-opt"], source, lower]]
    if tools["via-gpu"]:
        # kiln-map-to-gpu's kernels, run as CPU loops (one thread at a
        # time: not the tiled transposes, whose threads meet at a barrier;
        # membound-kernels.test runs those on emu).
        steps += [[tools["kiln-opt"]] + LOWER_TO_LLVM[:2] + [
                      "--linalg-generalize-named-ops",
                      "--kiln-select-generic-kernels=tiled-transpose=false reduction-kernels=false",
                      "--kiln-map-to-gpu",
                      "--canonicalize", "--kiln-test-launch-to-loops"],
                  [tools["mlir-opt"]] + LOWER_TO_LLVM[2:]]
    else:
        steps += [[tools["mlir-opt"]] + LOWER_TO_LLVM]
    steps += [
        [tools["mlir-runner"], "-e", "main", "-entry-point-result=void",
         "-shared-libs=" + ",".join(tools["libs"])],
    ]
    data = None
    for step in steps:
        proc = subprocess.run(step, input=data, capture_output=True, text=True)
        if proc.returncode != 0:
            return None, f"{os.path.basename(step[0])} failed:\n{proc.stderr[-3000:]}"
        data = proc.stdout
    # Each memref prints as a header line with its sizes, then its data.
    parts = re.split(r"^Unranked Memref.*sizes = \[([\d, ]*)\].*$", data, flags=re.M)
    printed = []
    for sizes, block in zip(parts[1::2], parts[2::2]):
        shape = tuple(int(n) for n in re.findall(r"\d+", sizes))
        printed.append((shape, [int(n) for n in re.findall(r"-?\d+", block)]))
    return printed, None


def compare(case, printed):
    """A description of how `case`'s results differ, or None."""
    problems = []
    for i, expected in enumerate(case.expected):
        shape, numbers = printed[i]
        if shape != expected.shape:
            problems.append(f"result {i}: expected shape {expected.shape}, got {shape}")
            continue
        # The runtime's printer shows stray values for a zero-size memref.
        if expected.size == 0:
            continue
        got = decode(numbers, expected)
        if case.tolerance:
            ok = np.allclose(got, expected, rtol=0, atol=case.tolerance)
        else:
            ok = np.array_equal(got, expected)
        if not ok:
            problems.append(f"result {i}: expected\n{expected}\ngot\n{got}")
    return "\n".join(problems) or None


def find_tools(args):
    def tool(name):
        if args.mlir_bin:
            return os.path.join(args.mlir_bin, name)
        found = shutil.which(name) or os.path.join("/usr/lib/llvm-22/bin", name)
        return found
    runner = tool("mlir-runner")
    lib_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(runner))), "lib")
    libs = [os.path.join(lib_dir, f"lib{n}.so") for n in ("mlir_c_runner_utils", "mlir_runner_utils")]
    return {"kiln-opt": args.kiln_opt, "mlir-opt": tool("mlir-opt"), "mlir-runner": runner,
            "libs": libs}


def main(case_source=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kiln_opt", help="path of kiln-opt")
    parser.add_argument("--mlir-bin", help="directory of mlir-opt and mlir-runner")
    parser.add_argument("--keep", help="write the generated modules here")
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--via-gpu", action="store_true",
                        help="run through kiln-map-to-gpu's kernels (as CPU loops)")
    parser.add_argument("--fused", action="store_true",
                        help="fuse each case (kiln-fuse, kiln-collapse-fusions) first")
    args = parser.parse_args()
    tools = find_tools(args)
    tools["via-gpu"] = args.via_gpu
    tools["fused"] = args.fused
    selected = [c for c in (case_source or cases)() if args.filter in c.name]
    workdir = args.keep or tempfile.mkdtemp(prefix="kiln-data-movement-")
    os.makedirs(workdir, exist_ok=True)

    printed, error = run(selected, tools, workdir, "all")
    failures = []
    if error is None and len(printed) != sum(len(c.expected) for c in selected):
        error = f"expected {sum(len(c.expected) for c in selected)} printed results, got {len(printed)}"
    if error is None:
        for case in selected:
            mine, printed = printed[:len(case.expected)], printed[len(case.expected):]
            problem = compare(case, mine)
            if problem:
                failures.append((case.name, problem))
            elif args.verbose:
                print(f"ok: {case.name}")
    else:
        # Something did not lower or run: find which cases, one at a time.
        print(f"the combined module failed ({error.splitlines()[0]}); running cases one by one")
        for i, case in enumerate(selected):
            mine, case_error = run([case], tools, workdir, f"case{i}")
            problem = case_error or compare(case, mine)
            if problem:
                failures.append((case.name, problem))
    for name, problem in failures:
        print(f"FAIL: {name}\n{problem}\n")
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print(f"{len(failures)} of {len(selected)} cases differ")
        return 1
    print(f"all {len(selected)} cases match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
