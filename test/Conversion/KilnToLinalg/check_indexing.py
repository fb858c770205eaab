#!/usr/bin/env python3
"""Runs the kiln-lower-to-linalg lowering of the indexing, scan, pooling-index
and bitwise ops (gather_nd, scatter_nd, cumsum, top_k, pool_indices,
bitwise_*, shift_*) on the CPU and
compares the results with numpy references written here, element by element.

Same machinery and options as check_data_movement.py (whose Case, running
and comparison this reuses): --via-gpu runs kiln-map-to-gpu's kernels as CPU
loops, --fused fuses each case first. Integers and top-k selections are
compared exactly; float cumsums within 1e-5 absolute (the reference sums in
float64, the kernel in f32; with at most 5 terms of magnitude below 4 that is
a few roundings of at most 2^-24 * 16 = 1e-6 each).

usage: check_indexing.py KILN_OPT [--mlir-bin DIR] [--keep DIR]
                         [--filter TEXT] [--via-gpu] [--fused] [-v]
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_data_movement as dm  # noqa: E402
from check_data_movement import Case  # noqa: E402

RNG = np.random.default_rng(20261202)


def gather_nd_ref(x, indices, batch_dims):
    """ONNX GatherND, written from the spec (negative indices wrap)."""
    q = indices.shape[-1]
    out_shape = indices.shape[:-1] + x.shape[batch_dims + q:]
    y = np.zeros(out_shape, dtype=x.dtype)
    for o in np.ndindex(*indices.shape[:-1]):
        t = [int(v) for v in indices[o]]
        t = [v + x.shape[batch_dims + k] if v < 0 else v for k, v in enumerate(t)]
        y[o] = x[tuple(o[:batch_dims]) + tuple(t)]
    return y


def scatter_nd_ref(x, indices, updates, reduction):
    y = x.copy()
    q = indices.shape[-1]
    for u in np.ndindex(*indices.shape[:-1]):
        t = tuple(int(v) + (x.shape[k] if v < 0 else 0) for k, v in enumerate(indices[u]))
        old, new = y[t], updates[u]
        y[t] = {"none": new, "add": old + new, "mul": old * new,
                "max": np.maximum(old, new), "min": np.minimum(old, new)}[reduction]
    return y


def cumsum_ref(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    s = np.cumsum(y.astype(np.float64 if x.dtype.kind == "f" else x.dtype), axis=axis)
    if exclusive:
        s = np.concatenate([np.zeros_like(np.take(s, [0], axis)),
                            np.take(s, range(s.shape[axis] - 1), axis)], axis)
    if reverse:
        s = np.flip(s, axis)
    return s.astype(x.dtype)


def top_k_ref(x, axis, k, smallest):
    """Sorted by value (largest or smallest first); ties by lower position;
    NaN counts as the largest value."""
    moved = np.moveaxis(x, axis, -1)
    values = np.empty(moved.shape[:-1] + (k,), x.dtype)
    indices = np.empty(moved.shape[:-1] + (k,), np.int64)
    for p in np.ndindex(*moved.shape[:-1]):
        line = moved[p]
        keyed = []
        for j, v in enumerate(line):
            nan = isinstance(v, np.floating) and np.isnan(v)
            # Sort key: NaN above numbers; ties by position.
            big = (1 if nan else 0, 0.0 if nan else float(v))
            key = big if smallest else (-big[0], -big[1])
            keyed.append((key, j))
        keyed.sort()
        chosen = [j for _, j in keyed[:k]]
        values[p] = line[chosen]
        indices[p] = chosen
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


def pool_indices_ref(x, kernel, strides, pads, dilations, column_major):
    """MaxPool's Indices per ONNX's reference: the first strict maximum of
    each window in row-major scan order, padding never chosen, as a flat
    index into x (spatial part column-major with column_major)."""
    n, c, h, w = x.shape
    oh = (h + pads[0] + pads[2] - dilations[0] * (kernel[0] - 1) - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - dilations[1] * (kernel[1] - 1) - 1) // strides[1] + 1
    out = np.zeros((n, c, oh, ow), np.int64)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        best, where = None, None
        for ki in range(kernel[0]):
            for kj in range(kernel[1]):
                y = i * strides[0] - pads[0] + ki * dilations[0]
                z = j * strides[1] - pads[1] + kj * dilations[1]
                if 0 <= y < h and 0 <= z < w and (best is None or x[b, ch, y, z] > best):
                    best, where = x[b, ch, y, z], (y, z)
        y, z = where
        spatial = z * h + y if column_major else y * w + z
        out[b, ch, i, j] = (b * c + ch) * h * w + spatial
    return out


def typestr(x):
    return dm.mlir_type(x)


def cases():
    out = []
    add = out.append
    f234 = dm.floats(2, 3, 4)

    # gather_nd: tuples of length 1..rank, negative indices, batch_dims 1.
    for name, indices, batch_dims in [
        ("gather_nd_rows", np.array([[1], [0], [-1]], np.int64), 0),
        ("gather_nd_pairs", np.array([[[0, 2]], [[1, -1]]], np.int64), 0),
        ("gather_nd_points", np.array([[0, 1, 3], [1, 2, 0]], np.int64), 0),
        ("gather_nd_batch", np.array([[2], [0]], np.int64), 1),
        ("gather_nd_batch_i32", np.array([[1, 3], [-3, 0]], np.int32), 1),
    ]:
        expected = gather_nd_ref(f234, indices, batch_dims)
        add(Case(name, "kiln.gather_nd {0}, {1} {{batch_dims = %d : i64}} : {types}"
                 % batch_dims, [f234, indices], [expected]))

    # scatter_nd: each reduction, repeated targets (the later update wins or
    # combines last), a negative index, an integer tensor.
    data = dm.floats(4, 3)
    for reduction in ["none", "add", "mul", "max", "min"]:
        indices = np.array([[1], [3], [1], [-4]], np.int64)
        updates = dm.floats(4, 3)
        attr = "" if reduction == "none" else \
            f" {{{{reduction = #kiln.scatter_reduction<{reduction}>}}}}"
        add(Case(f"scatter_nd_{reduction}",
                 "kiln.scatter_nd {0}, {1}, {2}" + attr + " : {types}",
                 [data, indices, updates],
                 [scatter_nd_ref(data, indices, updates, reduction)]))
    idata = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    iidx = np.array([[0, 2, 1], [1, 0, 3], [0, 2, 1]], np.int64)
    iupd = np.array([100, -5, 7], np.int64)
    add(Case("scatter_nd_points_add_i64",
             "kiln.scatter_nd {0}, {1}, {2} {{reduction = #kiln.scatter_reduction<add>}} : {types}",
             [idata, iidx, iupd], [scatter_nd_ref(idata, iidx, iupd, "add")]))

    # cumsum along each axis, every flag combination, and on integers.
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    for axis in (0, 1):
        for exclusive in (False, True):
            for reverse in (False, True):
                flags = "".join([", exclusive" if exclusive else "",
                                 ", reverse" if reverse else ""])
                name = f"cumsum_axis{axis}{'_excl' if exclusive else ''}{'_rev' if reverse else ''}"
                add(Case(name, "kiln.cumsum {0} {{axis = %d : i64%s}} : %s"
                         % (axis, flags, typestr(x)),
                         [x], [cumsum_ref(x, axis, exclusive, reverse)], tolerance=1e-5))
    xi = RNG.integers(-50, 50, (2, 7)).astype(np.int32)
    add(Case("cumsum_i32", "kiln.cumsum {0} {{axis = 1 : i64, reverse}} : " + typestr(xi),
             [xi], [cumsum_ref(xi, 1, False, True)]))

    # top_k: ties (lower position first), NaN, smallest, k = extent.
    t = np.array([[3, 1, 3, 2, 5, 5], [0, -1, 4, 4, 4, 2]], np.float32)
    tn = np.array([[1, np.nan, 3, 2], [np.nan, 0, np.nan, -1]], np.float32)
    for name, arr, axis, k, smallest in [
        ("top_k_ties", t, 1, 4, False),
        ("top_k_ties_smallest", t, 1, 3, True),
        ("top_k_axis0", t, 0, 1, False),
        ("top_k_all", t, 1, 6, False),
        ("top_k_nan", tn, 1, 3, False),
        ("top_k_nan_smallest", tn, 1, 3, True),
        ("top_k_i64", np.array([[7, -2, 7, 9, 0]], np.int64), 1, 3, False),
    ]:
        values, indices = top_k_ref(arr, axis, k, smallest)
        attrs = f"axis = {axis} : i64, k = {k} : i64" + (", smallest" if smallest else "")
        # top_k's type list is `input -> values, indices`.
        add(Case(name, "kiln.top_k {0} {{" + attrs + "}} : {types}", [arr],
                 [values, indices]))

    # pool_indices: padding, strides, dilation, ties (first wins), column
    # major, a window whose only in-bounds values are -inf.
    px = RNG.integers(-3, 4, (2, 2, 5, 6)).astype(np.float32)  # many ties
    px[1, 1, 0, :2] = -np.inf
    for name, kernel, strides, pads, dilations, column_major in [
        ("pool_indices_pad", (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),
        ("pool_indices_stride_col", (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),
        ("pool_indices_dilated", (2, 3), (1, 2), (1, 0, 0, 1), (2, 1), False),
    ]:
        expected = pool_indices_ref(px, kernel, strides, pads, dilations, column_major)
        attrs = (f"kernel = array<i64: {kernel[0]}, {kernel[1]}>, strides = array<i64: "
                 f"{strides[0]}, {strides[1]}>, dilations = array<i64: {dilations[0]}, "
                 f"{dilations[1]}>, padding = array<i64: {', '.join(map(str, pads))}>"
                 + (", column_major" if column_major else ""))
        add(Case(name, "kiln.pool_indices {0} {{" + attrs + "}} : {types}", [px],
                 [expected]))

    # Bitwise ops with broadcasting and shift amounts past the width.
    a = RNG.integers(-2**31, 2**31 - 1, (2, 3), dtype=np.int64).astype(np.int32)
    b = RNG.integers(-2**31, 2**31 - 1, (3,), dtype=np.int64).astype(np.int32)
    add(Case("bitwise_and", "kiln.bitwise_and {0}, {1} : {types}", [a, b], [a & b]))
    add(Case("bitwise_or", "kiln.bitwise_or {0}, {1} : {types}", [a, b], [a | b]))
    add(Case("bitwise_xor", "kiln.bitwise_xor {0}, {1} : {types}", [a, b], [a ^ b]))
    add(Case("bitwise_not", "kiln.bitwise_not {0} : " + typestr(a), [a], [~a]))
    v = np.array([1, -8, 255, -1, 12345, 7], np.int64)
    s = np.array([0, 1, 7, 63, 64, -1], np.int64)

    def shifted(left):
        r = []
        for x_, n_ in zip(v.tolist(), s.tolist()):
            if n_ < 0 or n_ >= 64:
                r.append(0 if left or x_ >= 0 else -1)
            elif left:
                r.append(((x_ << n_) + 2**63) % 2**64 - 2**63)
            else:
                r.append(x_ >> n_)
        return np.array(r, np.int64)
    add(Case("shift_left_i64", "kiln.shift_left {0}, {1} : {types}", [v, s], [shifted(True)]))
    add(Case("shift_right_i64", "kiln.shift_right {0}, {1} : {types}", [v, s], [shifted(False)]))
    return out


def compare(case, printed):
    """check_data_movement's comparison, with NaN equal to NaN (top_k)."""
    problems = []
    for i, expected in enumerate(case.expected):
        shape, numbers = printed[i]
        if shape != expected.shape:
            problems.append(f"result {i}: expected shape {expected.shape}, got {shape}")
            continue
        if expected.size == 0:
            continue
        got = dm.decode(numbers, expected)
        if case.tolerance:
            ok = np.allclose(got, expected, rtol=0, atol=case.tolerance, equal_nan=True)
        else:
            ok = np.array_equal(got, expected,
                                equal_nan=expected.dtype.kind == "f")
        if not ok:
            problems.append(f"result {i}: expected\n{expected}\ngot\n{got}")
    return "\n".join(problems) or None


if __name__ == "__main__":
    dm.compare = compare
    sys.exit(dm.main(cases))
