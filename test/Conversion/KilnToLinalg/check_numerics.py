#!/usr/bin/env python3
"""Runs kiln-lower-to-linalg's contraction and reduction lowerings on the CPU
and compares every result with numpy in float64.

Each case is a function with dense-constant inputs and one kiln op. All cases
go into one module: `kiln-opt -kiln-lower-to-linalg`, then upstream
`mlir-opt` (bufferize, linalg to loops, to LLVM) and `mlir-runner`. A `main`
added after lowering widens every result to i64 *bits* (floats are bitcast,
so nothing is lost to printing) and prints it with printMemrefI64.

Tolerances, per element: |got - ref| <= atol + rtol * |ref|, with
  f32: rtol 1e-5, atol 1e-5 (inputs lie in [-1, 1] unless a case says so)
  f16: rtol 5e-3, atol 5e-3 (accumulation is in the element type)
  integers and indices: exact.

Usage: check_numerics.py [--kiln-opt PATH] [--mlir-opt PATH] [--mlir-runner PATH]
                         [--lib-dir DIR] [-k SUBSTRING] [-v]
Exit status 0 when every case is within tolerance.
"""

import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

RNG = np.random.default_rng(20261129)

MLIR_TYPES = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16",
              np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}
TOLERANCES = {"f32": (1e-5, 1e-5), "f16": (5e-3, 5e-3)}


def tensor_type(shape, dtype):
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims + 'x' if dims else ''}{MLIR_TYPES[np.dtype(dtype)]}>"


def dense(array):
    """A dense elements literal that round-trips `array` exactly."""
    def fmt(v):
        if array.dtype.kind == "f":
            if np.isnan(v):
                return "0x7FC00000" if array.dtype == np.float32 else "0x7E00"
            return repr(float(v)) if np.isfinite(v) else ("0x7F800000" if v > 0 else "0xFF800000")
        return str(int(v))

    def nest(a):
        if a.ndim == 0:
            return fmt(a[()])
        return "[" + ", ".join(nest(x) for x in a) + "]"
    return f"dense<{nest(array)}>"


class Case:
    """One kiln op on constant inputs. `op` is the op's text with {0}, {1}, ...
    for the operands and {t0}, {t1}, ... for their types and {r} for the result
    type; `ref` computes the expected result from float64 copies of the inputs."""

    def __init__(self, name, inputs, op, ref, result_dtype=None):
        self.name, self.inputs, self.op, self.ref = name, inputs, op, ref
        self.expected = np.asarray(ref(*[x.astype(np.float64) if x.dtype.kind == "f" else x
                                         for x in inputs]))
        self.result_dtype = np.dtype(result_dtype or inputs[0].dtype)
        self.result_type = tensor_type(self.expected.shape, self.result_dtype)

    def function(self, index):
        lines = [f"func.func @case{index}() -> {self.result_type} {{"]
        names, types = [], []
        for i, x in enumerate(self.inputs):
            t = tensor_type(x.shape, x.dtype)
            lines.append(f"  %in{i} = arith.constant {dense(x)} : {t}")
            names.append(f"%in{i}")
            types.append(t)
        fields = {f"t{i}": t for i, t in enumerate(types)}
        op = self.op.format(*names, r=self.result_type, **fields)
        lines.append(f"  %result = {op}")
        lines.append(f"  return %result : {self.result_type}")
        lines.append("}")
        return "\n".join(lines)

    def printer(self, index):
        """main's part for this case: widen the result to i64 bits and print."""
        shape = self.expected.shape
        rank = len(shape)
        i64 = tensor_type(shape, np.int64)
        element = MLIR_TYPES[self.result_dtype]
        width = {"f32": 32, "f16": 16, "i32": 32, "i64": 64}[element]
        body = []
        value = "%in"
        if element.startswith("f"):
            body.append(f"      %bits = arith.bitcast %in : {element} to i{width}")
            value = "%bits"
        if width < 64:
            ext = "extui" if element.startswith("f") else "extsi"
            body.append(f"      %wide = arith.{ext} {value} : i{width} to i64")
            value = "%wide"
        dims = ", ".join(f"d{i}" for i in range(rank))
        identity = f"affine_map<({dims}) -> ({dims})>"
        iterators = ", ".join(['"parallel"'] * rank)
        return "\n".join([
            f"    %r{index} = call @case{index}() : () -> {self.result_type}",
            f"    %e{index} = tensor.empty() : {i64}",
            f"    %w{index} = linalg.generic {{indexing_maps = [{identity}, {identity}], "
            f"iterator_types = [{iterators}]}} ins(%r{index} : {self.result_type}) "
            f"outs(%e{index} : {i64}) {{",
            f"    ^bb0(%in: {element}, %out: i64):",
            *body,
            f"      linalg.yield {value} : i64",
            f"    }} -> {i64}",
            f"    %m{index} = bufferization.to_buffer %w{index} : {i64} to "
            f"memref<{i64[len('tensor<'):]}",
            f"    %u{index} = memref.cast %m{index} : memref<{i64[len('tensor<'):]} to memref<*xi64>",
            f"    call @printMemrefI64(%u{index}) : (memref<*xi64>) -> ()",
        ])

    def decode(self, numbers):
        bits = np.array(numbers, dtype=np.int64)
        element = MLIR_TYPES[self.result_dtype]
        if element == "f32":
            values = bits.astype(np.uint32).view(np.float32)
        elif element == "f16":
            values = bits.astype(np.uint16).view(np.float16)
        else:
            values = bits.astype(self.result_dtype)
        return values.reshape(self.expected.shape)

    def compare(self, got):
        """(ok, max abs error, max relative error)."""
        element = MLIR_TYPES[self.result_dtype]
        expected = self.expected
        if element not in TOLERANCES:
            return bool(np.array_equal(got, expected)), float(np.max(np.abs(
                got.astype(np.int64) - expected.astype(np.int64)), initial=0)), 0.0
        rtol, atol = TOLERANCES[element]
        got = got.astype(np.float64)
        same_nan = np.isnan(got) == np.isnan(expected)
        finite = ~np.isnan(expected)
        err = np.abs(got[finite] - expected[finite])
        err = np.where(np.isinf(expected[finite]) & (got[finite] == expected[finite]), 0, err)
        ok = same_nan.all() and bool(np.all(err <= atol + rtol * np.abs(expected[finite])))
        rel = err / np.maximum(np.abs(expected[finite]), 1e-30)
        return ok, float(np.max(err, initial=0)), float(np.max(rel, initial=0))


def uniform(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def integers(*shape, low=-5, high=6, dtype=np.float32):
    return RNG.integers(low, high, size=shape).astype(dtype)


def arr(values):
    if not values:
        return "array<i64>"
    return "array<i64: " + ", ".join(str(v) for v in values) + ">"


#===------------------------------------------------------------------------===#
# numpy references
#===------------------------------------------------------------------------===#

def to_channels_first(x):
    return np.moveaxis(x, -1, 1)


def to_channels_last(x):
    return np.moveaxis(x, 1, -1)


def conv_ref(x, w, b, strides, dilations, pads, groups, nhwc=False):
    if nhwc:
        x, w = to_channels_first(x), to_channels_first(w)
    spatial = x.ndim - 2
    lo, hi = pads[:spatial], pads[spatial:]
    x = np.pad(x, [(0, 0), (0, 0)] + list(zip(lo, hi)))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    kernel = w.shape[2:]
    out = [(x.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(spatial)]
    y = np.zeros([n, o] + out)
    og = o // groups
    for k in itertools.product(*[range(s) for s in kernel]):
        window = tuple(slice(k[i] * dilations[i],
                             k[i] * dilations[i] + strides[i] * (out[i] - 1) + 1, strides[i])
                       for i in range(spatial))
        xs = x[(slice(None), slice(None)) + window]
        for g in range(groups):
            y[:, g * og:(g + 1) * og] += np.einsum(
                "nc...,oc->no...", xs[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og][(slice(None), slice(None)) + k])
    if b is not None:
        y += b.reshape([1, -1] + [1] * spatial)
    return to_channels_last(y) if nhwc else y


def conv_transpose_ref(x, w, b, strides, dilations, pads, output_padding, groups, nhwc=False):
    """Scatter form: every input element adds w * x at i * stride + k * dilation."""
    if nhwc:
        x, w = to_channels_first(x), to_channels_first(w)
    spatial = x.ndim - 2
    n, c = x.shape[:2]
    og = w.shape[1]
    cg = c // groups
    kernel = w.shape[2:]
    ins = x.shape[2:]
    full = [(ins[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 + output_padding[i]
            for i in range(spatial)]
    y = np.zeros([n, og * groups] + full)
    for k in itertools.product(*[range(s) for s in kernel]):
        target = tuple(slice(k[i] * dilations[i],
                             k[i] * dilations[i] + strides[i] * (ins[i] - 1) + 1, strides[i])
                       for i in range(spatial))
        for g in range(groups):
            contribution = np.einsum("nc...,co->no...", x[:, g * cg:(g + 1) * cg],
                                     w[g * cg:(g + 1) * cg][(slice(None), slice(None)) + k])
            y[(slice(None), slice(g * og, (g + 1) * og)) + target] += contribution
    crop = tuple(slice(pads[i], full[i] - pads[spatial + i]) for i in range(spatial))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y += b.reshape([1, -1] + [1] * spatial)
    return to_channels_last(y) if nhwc else y


def window_out(size, k, s, d, lo, hi, ceil):
    span = size + lo + hi - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + lo:
        out -= 1
    return out


def pool_ref(x, kind, kernel, strides, dilations, pads, count_include_pad=False,
             ceil=False, nhwc=False):
    """Direct definition: a tap counts if it lies in the input; average
    divides by the taps inside the input, or (count_include_pad) by every tap
    of the window, including those past the padded input that ceil mode
    adds (ONNX's reference pads those with zeros as well)."""
    if nhwc:
        x = to_channels_first(x)
    spatial = x.ndim - 2
    ins = x.shape[2:]
    out = [window_out(ins[i], kernel[i], strides[i], dilations[i], pads[i],
                      pads[spatial + i], ceil) for i in range(spatial)]
    y = np.zeros(list(x.shape[:2]) + out)
    for pos in itertools.product(*[range(o) for o in out]):
        acc = np.full(x.shape[:2], -np.inf if kind == "max" else 0.0)
        inside, padded = 0, 1
        for i in range(spatial):
            taps = [pos[i] * strides[i] - pads[i] + k * dilations[i] for k in range(kernel[i])]
            padded *= len(taps)
        for k in itertools.product(*[range(s) for s in kernel]):
            taps = [pos[i] * strides[i] - pads[i] + k[i] * dilations[i] for i in range(spatial)]
            if all(0 <= t < ins[i] for i, t in enumerate(taps)):
                inside += 1
                v = x[(slice(None), slice(None)) + tuple(taps)]
                acc = np.maximum(acc, v) if kind == "max" else acc + v
        if kind == "avg":
            acc = acc / (padded if count_include_pad else inside)
        y[(slice(None), slice(None)) + pos] = acc
    return to_channels_last(y) if nhwc else y


def normalize_ref(x, axes, eps, scale, bias):
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * scale
    return y + bias if bias is not None else y


def channel(v, rank, dim):
    shape = [1] * rank
    shape[dim] = -1
    return v.reshape(shape)


def lrn_ref(x, size, alpha, beta, bias):
    c = x.shape[1]
    sq = x ** 2
    s = np.zeros_like(x)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + (size - 1) - (size - 1) // 2)
        s[:, ch] = sq[:, lo:hi + 1].sum(axis=1)
    return x / (bias + alpha / size * s) ** beta


def arg_ref(x, axis, kind, keepdims, last):
    f = np.argmax if kind == "max" else np.argmin
    if last:
        n = x.shape[axis]
        idx = n - 1 - f(np.flip(x, axis=axis), axis=axis)
    else:
        idx = f(x, axis=axis)
    idx = idx.astype(np.int64)
    return np.expand_dims(idx, axis) if keepdims else idx


def softmax_ref(x, axis, log):
    shifted = x - x.max(axis=axis, keepdims=True)
    total = np.exp(shifted).sum(axis=axis, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


#===------------------------------------------------------------------------===#
# Cases
#===------------------------------------------------------------------------===#

def matmul(name, lhs, rhs, result_dtype=None):
    return Case(name, [lhs, rhs], "kiln.matmul {0}, {1} : {t0}, {t1} -> {r}",
                lambda a, b: np.matmul(a, b), result_dtype)


def conv(name, x, w, b, strides, dilations, pads, groups=1, nhwc=False):
    inputs = [x, w] + ([b] if b is not None else [])
    operands = "{0}, {1}" + (", {2}" if b is not None else "")
    types = ", ".join("{t%d}" % i for i in range(len(inputs)))
    fmt = "nhwc" if nhwc else "nchw"
    op = (f"kiln.conv {operands} {{{{strides = {arr(strides)}, "
          f"dilations = {arr(dilations)}, padding = {arr(pads)}, groups = {groups} : i64, "
          f"data_format = #kiln.data_format<{fmt}>}}}} : ({types}) -> {{r}}")
    return Case(name, inputs, op,
                lambda *a: conv_ref(a[0], a[1], a[2] if b is not None else None,
                                    strides, dilations, pads, groups, nhwc))


def conv_transpose(name, x, w, b, strides, dilations, pads, output_padding, groups=1,
                   nhwc=False):
    inputs = [x, w] + ([b] if b is not None else [])
    operands = "{0}, {1}" + (", {2}" if b is not None else "")
    types = ", ".join("{t%d}" % i for i in range(len(inputs)))
    fmt = "nhwc" if nhwc else "nchw"
    op = (f"kiln.conv_transpose {operands} {{{{strides = {arr(strides)}, "
          f"dilations = {arr(dilations)}, padding = {arr(pads)}, "
          f"output_padding = {arr(output_padding)}, groups = {groups} : i64, "
          f"data_format = #kiln.data_format<{fmt}>}}}} : ({types}) -> {{r}}")
    return Case(name, inputs, op,
                lambda *a: conv_transpose_ref(a[0], a[1], a[2] if b is not None else None,
                                              strides, dilations, pads, output_padding,
                                              groups, nhwc))


def reduce(name, x, kind, axes, keepdims):
    fns = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
    op = (f"kiln.reduce <{kind}> {{0}} {{{{axes = {arr(axes)}, "
          f"keepdims = {str(keepdims).lower()}}}}} : {{t0}} -> {{r}}")

    def ref(a):
        if not axes:
            return a
        out = fns[kind](a, axis=tuple(axes), keepdims=keepdims)
        if a.dtype.kind == "i" and kind == "mean":
            # Integer mean truncates (arith.divsi).
            total = np.sum(a, axis=tuple(axes), keepdims=keepdims)
            count = np.prod([a.shape[i] for i in axes])
            out = np.trunc(total / count).astype(a.dtype)
        return out.astype(a.dtype) if a.dtype.kind == "i" else out
    return Case(name, [x], op, ref)


def arg(name, x, kind, axis, keepdims, last):
    attrs = f"axis = {axis} : i64, keepdims = {str(keepdims).lower()}"
    if last:
        attrs += ", select_last_index"
    op = f"kiln.arg{kind} {{0}} {{{{{attrs}}}}} : {{t0}} -> {{r}}"
    return Case(name, [x], op,
                lambda a: arg_ref(a, axis if axis >= 0 else axis + a.ndim, kind, keepdims, last),
                np.int64)


def softmax(name, x, axis, log):
    mnemonic = "log_softmax" if log else "softmax"
    op = f"kiln.{mnemonic} {{0}} {{{{axis = {axis} : i64}}}} : {{t0}}"
    return Case(name, [x], op, lambda a: softmax_ref(a, axis, log))


def pool(name, x, kind, kernel, strides, dilations, pads, count_include_pad=False,
         ceil=False, nhwc=False):
    attrs = (f"kernel = {arr(kernel)}, strides = {arr(strides)}, "
             f"dilations = {arr(dilations)}, padding = {arr(pads)}")
    if count_include_pad:
        attrs += ", count_include_pad"
    if ceil:
        attrs += ", ceil_mode"
    attrs += f", data_format = #kiln.data_format<{'nhwc' if nhwc else 'nchw'}>"
    op = f"kiln.pool <{kind}> {{0}} {{{{{attrs}}}}} : {{t0}} -> {{r}}"
    return Case(name, [x], op,
                lambda a: pool_ref(a, kind, kernel, strides, dilations, pads,
                                   count_include_pad, ceil, nhwc))


def cases():
    f16 = np.float16
    c = []
    # matmul: named ops, the broadcasting generic, 1-D operands, integers, f16.
    c.append(matmul("matmul_2d", uniform(5, 7), uniform(7, 3)))
    c.append(matmul("matmul_batch", uniform(2, 4, 6), uniform(2, 6, 3)))
    c.append(matmul("matmul_broadcast_batch", uniform(2, 1, 3, 4), uniform(5, 4, 6)))
    c.append(matmul("matmul_3d_by_2d", uniform(2, 3, 4), uniform(4, 5)))
    c.append(matmul("matmul_vec_mat", uniform(4), uniform(2, 4, 5)))
    c.append(matmul("matmul_mat_vec", uniform(3, 4), uniform(4)))
    c.append(matmul("matmul_vec_vec", uniform(6), uniform(6)))
    c.append(matmul("matmul_i32", integers(3, 4, dtype=np.int32), integers(4, 2, dtype=np.int32)))
    c.append(matmul("matmul_f16", uniform(4, 8, dtype=f16), uniform(8, 3, dtype=f16)))

    # conv: 1-3 spatial dims, strides, dilations, asymmetric padding, groups, formats.
    c.append(conv("conv1d_stride_pad", uniform(2, 3, 11), uniform(4, 3, 3), uniform(4),
                  [2], [1], [1, 2]))
    c.append(conv("conv2d_basic", uniform(1, 3, 6, 6), uniform(4, 3, 3, 3), None,
                  [1, 1], [1, 1], [0, 0, 0, 0]))
    c.append(conv("conv2d_group_dilate", uniform(2, 4, 9, 8), uniform(6, 2, 3, 2), uniform(6),
                  [2, 1], [2, 3], [1, 0, 2, 1], groups=2))
    c.append(conv("conv2d_depthwise", uniform(1, 4, 7, 7), uniform(4, 1, 3, 3), uniform(4),
                  [2, 2], [1, 1], [1, 1, 1, 1], groups=4))
    c.append(conv("conv2d_nhwc_group", uniform(2, 7, 6, 4), uniform(6, 3, 2, 2), uniform(6),
                  [1, 2], [1, 1], [1, 1, 0, 1], groups=2, nhwc=True))
    c.append(conv("conv3d", uniform(1, 2, 5, 4, 6), uniform(3, 2, 2, 3, 2), uniform(3),
                  [1, 1, 2], [1, 1, 1], [1, 0, 1, 0, 1, 1]))
    c.append(conv("conv1d_nhwc", uniform(1, 9, 3), uniform(2, 3, 3), None,
                  [1], [2], [2, 2], nhwc=True))

    # conv_transpose: zero insertion, output_padding, groups, padding beyond the border.
    c.append(conv_transpose("convT2d_stride_outpad_group", uniform(1, 4, 3, 3),
                            uniform(4, 3, 3, 3), uniform(6), [2, 2], [1, 1], [1, 1, 1, 1],
                            [1, 1], groups=2))
    c.append(conv_transpose("convT2d_dilate_asym", uniform(2, 3, 4, 5), uniform(3, 2, 3, 2),
                            None, [2, 3], [2, 1], [0, 2, 1, 0], [1, 2]))
    c.append(conv_transpose("convT1d_pad_beyond_kernel", uniform(1, 2, 6), uniform(2, 3, 2),
                            uniform(3), [1], [1], [2, 2], [0]))
    c.append(conv_transpose("convT2d_nhwc", uniform(1, 3, 4, 4), uniform(4, 2, 2, 3),
                            uniform(6), [2, 1], [1, 1], [0, 1, 1, 0], [1, 0], groups=2,
                            nhwc=True))
    c.append(conv_transpose("convT3d", uniform(1, 2, 2, 3, 2), uniform(2, 2, 2, 2, 3), None,
                            [2, 1, 2], [1, 1, 1], [0, 0, 1, 1, 0, 0], [0, 0, 1]))

    # reduce: every kind, keepdims, all axes, no axes, integers.
    x = uniform(2, 3, 4)
    for kind in ["sum", "mean", "max", "min", "prod"]:
        c.append(reduce(f"reduce_{kind}_keep", x, kind, [1], True))
    c.append(reduce("reduce_sum_0_2_drop", x, "sum", [0, 2], False))
    c.append(reduce("reduce_mean_all_drop", x, "mean", [0, 1, 2], False))
    c.append(reduce("reduce_max_all_keep", x, "max", [0, 1, 2], True))
    c.append(reduce("reduce_no_axes", x, "sum", [], True))
    xi = integers(3, 5, dtype=np.int32, low=-20, high=20)
    c.append(reduce("reduce_i32_sum", xi, "sum", [1], False))
    c.append(reduce("reduce_i32_mean", xi, "mean", [1], False))
    c.append(reduce("reduce_i32_min", xi, "min", [0], True))

    # argmax/argmin with ties (small integers as floats) and NaN.
    t = integers(3, 6, 4, low=-2, high=3)
    c.append(arg("argmax_first", t, "max", 1, False, False))
    c.append(arg("argmax_last", t, "max", 1, True, True))
    c.append(arg("argmin_first", t, "min", -1, True, False))
    c.append(arg("argmin_last", t, "min", 0, False, True))
    tn = t.copy()
    tn[1, 2, :] = np.nan
    tn[2, 4, 1] = np.nan
    c.append(arg("argmax_nan", tn, "max", 1, False, False))
    c.append(arg("argmax_i32_last", integers(4, 5, dtype=np.int32, low=0, high=3), "max", 1,
                 False, True))

    # softmax / log_softmax: large inputs must not overflow.
    big = uniform(2, 3, 5, low=-1000, high=1000)
    c.append(softmax("softmax_last", uniform(3, 7, low=-4, high=4), -1, False))
    c.append(softmax("softmax_axis0_large", big, 0, False))
    c.append(softmax("log_softmax_last_large", big, -1, True))
    c.append(softmax("log_softmax_axis1", uniform(2, 4, 3, low=-4, high=4), 1, True))

    # Normalisation.
    x = uniform(2, 3, 8, low=-3, high=5)
    c.append(Case("layer_norm_last_bias", [x, uniform(8), uniform(8)],
                  "kiln.layer_norm {0}, {1}, {2} {{axis = -1 : i64, epsilon = 1.0e-05 : f32}}"
                  " : ({t0}, {t1}, {t2}) -> {r}",
                  lambda a, s, b: normalize_ref(a, (2,), 1e-5, s, b)))
    c.append(Case("layer_norm_axis1_noBias", [x, uniform(1, 8)],
                  "kiln.layer_norm {0}, {1} {{axis = 1 : i64, epsilon = 1.0e-03 : f32}}"
                  " : ({t0}, {t1}) -> {r}",
                  lambda a, s: normalize_ref(a, (1, 2), np.float32(1e-3), s, None)))
    xb = uniform(2, 4, 3, 3, low=-2, high=2)
    bn_params = [uniform(4), uniform(4), uniform(4), uniform(4, low=0.1, high=2)]
    c.append(Case("batch_norm_nchw", [xb] + bn_params,
                  "kiln.batch_norm {0}, {1}, {2}, {3}, {4} {{epsilon = 1.0e-05 : f32}}"
                  " : ({t0}, {t1}, {t2}, {t3}, {t4}) -> {r}",
                  lambda a, s, b, m, v: (a - channel(m, 4, 1)) / np.sqrt(
                      channel(v, 4, 1) + np.float32(1e-5)) * channel(s, 4, 1) + channel(b, 4, 1)))
    xl = uniform(2, 3, 5, 4, low=-2, high=2)
    c.append(Case("batch_norm_nhwc", [xl] + bn_params,
                  "kiln.batch_norm {0}, {1}, {2}, {3}, {4} {{epsilon = 1.0e-05 : f32, "
                  "data_format = #kiln.data_format<nhwc>}}"
                  " : ({t0}, {t1}, {t2}, {t3}, {t4}) -> {r}",
                  lambda a, s, b, m, v: (a - m) / np.sqrt(v + np.float32(1e-5)) * s + b))
    c.append(Case("instance_norm_2d", [xb, uniform(4), uniform(4)],
                  "kiln.instance_norm {0}, {1}, {2} {{epsilon = 1.0e-05 : f32}}"
                  " : ({t0}, {t1}, {t2}) -> {r}",
                  lambda a, s, b: normalize_ref(a, (2, 3), np.float32(1e-5),
                                                channel(s, 4, 1), channel(b, 4, 1))))
    c.append(Case("instance_norm_1d", [uniform(2, 3, 7), uniform(3), uniform(3)],
                  "kiln.instance_norm {0}, {1}, {2} {{epsilon = 1.0e-05 : f32}}"
                  " : ({t0}, {t1}, {t2}) -> {r}",
                  lambda a, s, b: normalize_ref(a, (2,), np.float32(1e-5),
                                                channel(s, 3, 1), channel(b, 3, 1))))
    for size in (3, 4):
        c.append(Case(f"lrn_size{size}", [uniform(2, 7, 3, 2, low=-3, high=3)],
                      f"kiln.lrn {{0}} {{{{size = {size} : i64, alpha = 1.0e-01 : f32, "
                      "beta = 7.5e-01 : f32, bias = 2.0 : f32}} : {t0}",
                      lambda a, size=size: lrn_ref(a, size, np.float32(0.1), 0.75, 2.0)))

    # Pooling.
    p = uniform(2, 3, 7, 8)
    c.append(pool("maxpool_pad_stride", p, "max", [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]))
    c.append(pool("maxpool_ceil_dilate", p, "max", [2, 3], [2, 2], [2, 1], [0, 1, 1, 0],
                  ceil=True))
    c.append(pool("avgpool_exclude_pad", p, "avg", [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]))
    c.append(pool("avgpool_include_pad", p, "avg", [3, 3], [2, 2], [1, 1], [1, 1, 1, 1],
                  count_include_pad=True))
    c.append(pool("avgpool_ceil_exclude", p, "avg", [3, 2], [2, 3], [1, 1], [1, 0, 0, 1],
                  ceil=True))
    c.append(pool("avgpool_ceil_include", p, "avg", [3, 2], [2, 3], [1, 1], [1, 0, 0, 1],
                  count_include_pad=True, ceil=True))
    c.append(pool("avgpool_nopad_uniform", p, "avg", [2, 2], [2, 2], [1, 1], [0, 0, 0, 0]))
    c.append(pool("avgpool_nhwc_dilate", uniform(1, 7, 6, 3), "avg", [2, 2], [1, 2], [2, 1],
                  [1, 0, 1, 1], nhwc=True))
    c.append(pool("maxpool1d_nhwc", uniform(2, 9, 3), "max", [3], [2], [1], [1, 1], nhwc=True))
    c.append(pool("avgpool3d", uniform(1, 2, 4, 5, 3), "avg", [2, 3, 2], [2, 2, 1], [1, 1, 1],
                  [1, 1, 0, 0, 1, 1]))
    c.append(pool("avgpool_f16", uniform(1, 2, 5, 5, dtype=f16), "avg", [3, 3], [2, 2], [1, 1],
                  [1, 1, 1, 1]))
    for kind in ("avg", "max"):
        c.append(Case(f"global_{kind}pool_nchw", [uniform(2, 3, 4, 5)],
                      f"kiln.global_pool <{kind}> {{0}} : {{t0}} -> {{r}}",
                      lambda a, kind=kind: (a.mean if kind == "avg" else a.max)(
                          axis=(2, 3), keepdims=True)))
    c.append(Case("global_avgpool_nhwc", [uniform(2, 4, 5, 3)],
                  "kiln.global_pool <avg> {0} {{data_format = #kiln.data_format<nhwc>}}"
                  " : {t0} -> {r}",
                  lambda a: a.mean(axis=(1, 2), keepdims=True)))

    # Long rows: kiln-map-to-gpu gives these a block per output and a
    # block-wide all-reduce (run with --via-gpu), including rows that are
    # not a power of two and rows longer than a 256-thread block.
    c.append(matmul("long_matmul_k700", uniform(3, 700), uniform(700, 5)))
    c.append(reduce("long_reduce_sum_1000", uniform(4, 1000), "sum", [1], False))
    c.append(reduce("long_reduce_max_333", uniform(3, 333), "max", [1], True))
    c.append(reduce("long_reduce_mean_2axes", uniform(2, 3, 40), "mean", [1, 2], True))
    c.append(reduce("long_reduce_min_2048", uniform(2, 2048), "min", [1], False))
    c.append(softmax("long_softmax_300", uniform(3, 300, low=-6, high=6), -1, False))
    c.append(softmax("long_log_softmax_97", uniform(5, 97, low=-6, high=6), -1, True))
    xn = uniform(2, 4, 512, low=-3, high=5)
    c.append(Case("long_layer_norm_512", [xn, uniform(512), uniform(512)],
                  "kiln.layer_norm {0}, {1}, {2} {{axis = -1 : i64, epsilon = 1.0e-05 : f32}}"
                  " : ({t0}, {t1}, {t2}) -> {r}",
                  lambda a, s, b: normalize_ref(a, (2,), 1e-5, s, b)))
    c.append(arg("long_argmax_500", uniform(2, 500), "max", 1, False, False))
    return c


#===------------------------------------------------------------------------===#
# Driver
#===------------------------------------------------------------------------===#

LOWER_TO_LLVM = [
    "--one-shot-bufferize=bufferize-function-boundaries",
    "--convert-linalg-to-loops", "--lower-affine", "--convert-scf-to-cf",
    # (vector: kiln-map-to-gpu's vectorised elementwise kernels.)
    "--convert-vector-to-llvm", "--expand-strided-metadata", "--finalize-memref-to-llvm",
    "--convert-math-to-llvm", "--convert-arith-to-llvm", "--convert-func-to-llvm",
    "--convert-cf-to-llvm", "--reconcile-unrealized-casts",
]


# row-kernels=false: the warp row kernels exchange values between lanes with
# gpu.shuffle, which kiln-test-launch-to-loops (one thread at a time) cannot
# run; they are checked on the emulator instead (test/Target/CUDA/
# row-kernels.test, the PTX itself), and here the block-per-row kernels.
# Likewise tiled-transpose=false reduction-kernels=false: their threads meet
# at barriers over shared memory (checked on emu: membound-kernels.test).
GPU_MAPPING_ON_CPU = [
    "--linalg-generalize-named-ops",
    "--kiln-select-generic-kernels=row-kernels=false tiled-transpose=false reduction-kernels=false",
    "--kiln-map-to-gpu",
    "--canonicalize",
    "--kiln-test-launch-to-loops",
]


FUSED_PIPELINE = ("--pass-pipeline=builtin.module(func.func(kiln-fuse, kiln-lower-to-linalg, "
                  "kiln-collapse-fusions, canonicalize, cse))")


def run(tools, selected, workdir):
    """Lowers and runs `selected` cases; returns the decoded results or raises
    RuntimeError with the failing stage's output."""
    kiln_module = "\n\n".join(case.function(i) for i, case in enumerate(selected))
    kiln_path = os.path.join(workdir, "cases.mlir")
    with open(kiln_path, "w") as f:
        f.write(kiln_module + "\n")
    # --fused: each case's ops become kiln.fusion regions first, and each
    # region one generic computing at point (kiln-collapse-fusions).
    lower = ([FUSED_PIPELINE] if tools.fused else ["-kiln-lower-to-linalg"])
    lowered = subprocess.run([tools.kiln_opt, kiln_path] + lower,
                             capture_output=True, text=True)
    if lowered.returncode != 0:
        raise RuntimeError("kiln-opt failed:\n" + lowered.stderr)
    text = lowered.stdout.rstrip()
    assert text.endswith("}"), "expected a module"
    main = "\n".join(
        ["  func.func private @printMemrefI64(memref<*xi64>) attributes {llvm.emit_c_interface}",
         "  func.func @main() {"]
        + [case.printer(i) for i, case in enumerate(selected)]
        + ["    return", "  }"])
    full_path = os.path.join(workdir, "lowered.mlir")
    with open(full_path, "w") as f:
        f.write(text[:-1] + main + "\n}\n")
    if tools.via_gpu:
        # kiln-map-to-gpu's kernels, run as CPU loops: checks the GPU mapping
        # (indexing, block reductions) with the same cases.
        mapped = subprocess.run([tools.kiln_opt, full_path] + LOWER_TO_LLVM[:1]
                                + GPU_MAPPING_ON_CPU, capture_output=True, text=True)
        if mapped.returncode != 0:
            raise RuntimeError("kiln-opt (GPU mapping) failed:\n" + mapped.stderr[-4000:])
        with open(full_path, "w") as f:
            f.write(mapped.stdout)
        llvm = subprocess.run([tools.mlir_opt, full_path] + LOWER_TO_LLVM[1:],
                              capture_output=True, text=True)
    else:
        llvm = subprocess.run([tools.mlir_opt, full_path] + LOWER_TO_LLVM,
                              capture_output=True, text=True)
    if llvm.returncode != 0:
        raise RuntimeError("mlir-opt failed:\n" + llvm.stderr[-4000:])
    libs = ",".join(os.path.join(tools.lib_dir, lib) for lib in
                    ["libmlir_c_runner_utils.so", "libmlir_runner_utils.so"])
    ran = subprocess.run([tools.mlir_runner, "-e", "main", "-entry-point-result=void",
                          f"-shared-libs={libs}"], input=llvm.stdout,
                         capture_output=True, text=True)
    if ran.returncode != 0:
        raise RuntimeError("mlir-runner failed:\n" + ran.stderr[-4000:])
    chunks = ran.stdout.split("Unranked Memref")[1:]
    if len(chunks) != len(selected):
        raise RuntimeError(f"expected {len(selected)} printed results, got {len(chunks)}")
    results = []
    for case, chunk in zip(selected, chunks):
        data = chunk.split("data =", 1)[1]
        results.append(case.decode([int(v) for v in re.findall(r"-?\d+", data)]))
    return results


def find_tool(name, explicit):
    """`explicit` (a path, or a name on PATH); else `name` on PATH or in LLVM 22."""
    path = shutil.which(explicit or name)
    if not path and not explicit:
        path = shutil.which(os.path.join("/usr/lib/llvm-22/bin", name))
    if not path:
        sys.exit(f"error: cannot find {explicit or name}")
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kiln-opt")
    parser.add_argument("--mlir-opt")
    parser.add_argument("--mlir-runner")
    parser.add_argument("--lib-dir", help="where libmlir_runner_utils.so lives")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    parser.add_argument("-v", action="store_true", help="print every case")
    parser.add_argument("--via-gpu", action="store_true",
                        help="run through kiln-map-to-gpu's kernels (as CPU loops)")
    parser.add_argument("--fused", action="store_true",
                        help="fuse each case (kiln-fuse, kiln-collapse-fusions) first")
    args = parser.parse_args()
    tools = argparse.Namespace(kiln_opt=find_tool("kiln-opt", args.kiln_opt),
                               mlir_opt=find_tool("mlir-opt", args.mlir_opt),
                               mlir_runner=find_tool("mlir-runner", args.mlir_runner))
    tools.lib_dir = args.lib_dir or os.path.join(
        os.path.dirname(os.path.dirname(os.path.realpath(tools.mlir_runner))), "lib")

    tools.via_gpu = args.via_gpu
    tools.fused = args.fused
    selected = [case for case in cases() if args.k in case.name]
    with tempfile.TemporaryDirectory() as workdir:
        try:
            results = run(tools, selected, workdir)
        except RuntimeError as batch_error:
            # Find the culprit: run the cases one at a time.
            print(f"batch run failed; running cases one by one\n{batch_error}")
            results = []
            for case in selected:
                try:
                    results.append(run(tools, [case], workdir)[0])
                except RuntimeError as error:
                    print(f"FAIL {case.name}: {error}")
                    results.append(None)

    failures = 0
    for case, got in zip(selected, results):
        if got is None:
            failures += 1
            continue
        ok, abs_err, rel_err = case.compare(got)
        failures += not ok
        if args.v or not ok:
            element = MLIR_TYPES[case.result_dtype]
            print(f"{'PASS' if ok else 'FAIL'} {case.name:32s} {element:4s} "
                  f"max abs err {abs_err:.3e}  max rel err {rel_err:.3e}")
        if not ok:
            print(f"  expected {case.expected.ravel()[:16]}\n  got      {got.ravel()[:16]}")
    print(f"numerics: {len(selected)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
