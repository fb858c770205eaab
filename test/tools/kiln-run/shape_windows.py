#!/usr/bin/env python3
"""Slice, Pad and Resize values taken at run time (issue 24; docs/runtime.md
"Shape inputs at run time"): the values still decide which elements are
read (a 2-row Slice may start at row 0 or row 3), so kilnc computes the
indices on the device, and a ShapeGuard checks that the values give the
compiled shape. Each case runs with several values; an accepted one must
match an independent reference element by element: numpy slicing and
np.pad (exact: data movement), onnx.reference's Resize (within 2e-6
relative + 1e-6: kiln blends in f32, the reference in f64 and rounds
once). Refused values must exit 1 with the guard's message.

usage: shape_windows.py WORKDIR --kilnc KILNC --kiln-run KILN_RUN
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shape_inputs import check_all, model  # noqa: E402

F, I = TensorProto.FLOAT, TensorProto.INT64


def np_slice(v):
    x = v["x"]
    index = [slice(None)] * x.ndim
    axes = v.get("axes", np.arange(len(v["starts"])))
    steps = v.get("steps", np.ones(len(v["starts"]), np.int64))
    for s, e, a, t in zip(v["starts"], v["ends"], axes, steps):
        index[int(a)] = slice(int(s), int(e), int(t))
    return x[tuple(index)]


def np_pad(x, pads, mode, value=0.0, axes=None):
    """ONNX Pad by numpy: negative pads crop first, then np.pad pads."""
    axes = list(range(x.ndim)) if axes is None else [int(a) % x.ndim
                                                     for a in axes]
    k = len(axes)
    index = [slice(None)] * x.ndim
    widths = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        before, after = int(pads[i]), int(pads[i + k])
        index[a] = slice(max(-before, 0), x.shape[a] - max(-after, 0))
        widths[a] = (max(before, 0), max(after, 0))
    cropped = x[tuple(index)]
    if mode == "constant":
        return np.pad(cropped, widths, mode, constant_values=value)
    return np.pad(cropped, widths, mode)


def reference_resize(proto):
    evaluator = ReferenceEvaluator(proto)
    return lambda v: evaluator.run(None, v)[0]


def cases():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 4)).astype(np.float32)
    i1 = lambda *v: np.array(v, np.int64)  # noqa: E731
    yield ("slice", model(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"],
                          ["y"], name="rows")],
        [("x", F, [4, 4]), ("starts", I, [1]), ("ends", I, [1]),
         ("axes", I, [1]), ("steps", I, [1])], [("y", F, [2, 4])]),
        [{"x": x, "starts": i1(s), "ends": i1(e), "axes": i1(a),
          "steps": i1(t)}
         for s, e, a, t in ((0, 2, 0, 1), (3, 1, 0, -1), (-1, -10, -2, -2),
                            (1, 3, 1, 1), (0, 3, 0, 1))],
        np_slice)
    # An empty result reads nothing: only the guard runs.
    yield ("slice-empty", model(
        [helper.make_node("Slice", ["x", "starts", "ends"], ["y"],
                          name="none")],
        [("x", F, [4, 4]), ("starts", I, [1]), ("ends", I, [1])],
        [("y", F, [0, 4])]),
        [{"x": x, "starts": i1(s), "ends": i1(e)} for s, e in ((9, 12),
                                                               (2, 1))],
        np_slice)
    p = rng.standard_normal((3, 4)).astype(np.float32)
    for mode in ("constant", "edge", "reflect", "wrap"):
        yield (f"pad-{mode}", model(
            [helper.make_node("Pad", ["x", "pads", "value"], ["y"],
                              name="pad", mode=mode)],
            [("x", F, [3, 4]), ("pads", I, [4]), ("value", F, [])],
            [("y", F, [5, 5])], opset=19),
            [{"x": p, "pads": i1(*pads), "value": np.array(2.5, np.float32)}
             for pads in ((1, 0, 1, 1), (2, 1, 0, 0), (0, -1, 2, 2),
                          (1, 1, 1, 1))],
            lambda v, mode=mode: np_pad(v["x"], v["pads"], mode,
                                        float(v["value"])))
    yield ("pad-axes", model(
        [helper.make_node("Pad", ["x", "pads", "", "axes"], ["y"],
                          name="pad")],
        [("x", F, [3, 4]), ("pads", I, [2]), ("axes", I, [1])],
        [("y", F, [3, 6])], opset=18),
        [{"x": p, "pads": i1(*pads), "axes": i1(a)}
         for pads, a in (((1, 1), 1), ((2, 0), -1), ((1, 1), 0))],
        lambda v: np_pad(v["x"], v["pads"], "constant", 0.0, v["axes"]))

    r = rng.standard_normal((1, 1, 4, 6)).astype(np.float32)
    f1 = lambda *v: np.array(v, np.float32)  # noqa: E731
    scaled = model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], name="down",
                          mode="linear", antialias=1)],
        [("x", F, [1, 1, 4, 6]), ("scales", F, [4])], [("y", F, [1, 1, 2, 3])])
    yield ("resize-scales", scaled,
           [{"x": r, "scales": f1(1, 1, s, t)}
            for s, t in ((0.5, 0.5), (0.6, 0.6), (0.7, 0.55), (1, 1))],
           reference_resize(scaled))
    fitted = model(
        [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="fit",
                          mode="nearest", axes=[2, 3],
                          keep_aspect_ratio_policy="not_larger")],
        [("x", F, [1, 1, 4, 6]), ("sizes", I, [2])], [("y", F, [1, 1, 2, 3])])
    yield ("resize-sizes", fitted,
           [{"x": r, "sizes": i1(*s)} for s in ((2, 5), (3, 3), (4, 6))],
           reference_resize(fitted))
    crop = model(
        [helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"],
                          name="crop", mode="linear",
                          coordinate_transformation_mode="tf_crop_and_resize",
                          extrapolation_value=10.0)],
        [("x", F, [1, 1, 4, 6]), ("roi", F, [8])], [("y", F, [1, 1, 3, 3])])
    crop.graph.initializer.append(
        helper.make_tensor("sizes", I, [4], [1, 1, 3, 3]))
    yield ("resize-roi", crop,
           [{"x": r, "roi": f1(0, 0, 0.2, 0.1, 1, 1, 0.8, 0.9)},
            {"x": r, "roi": f1(0, 0, -0.5, 0, 1, 1, 1.5, 1)}],
           reference_resize(crop))
    u = rng.standard_normal((1, 1, 2, 2)).astype(np.float32)
    upsample = model(
        [helper.make_node("Upsample", ["x", "scales"], ["y"], name="up")],
        [("x", F, [1, 1, 2, 2]), ("scales", F, [4])], [("y", F, [1, 1, 4, 6])],
        opset=9)
    yield ("upsample", upsample,
           [{"x": u, "scales": f1(1, 1, 2, 3)},
            {"x": u, "scales": f1(1, 1, 2.4, 3.1)},
            {"x": u, "scales": f1(1, 1, 3, 3)}],
           # Upsample-9's nearest: asymmetric, rounded down.
           lambda v: v["x"][:, :, (np.arange(4) / v["scales"][2]).astype(int)]
           [:, :, :, (np.arange(6) / v["scales"][3]).astype(int)])


def main():
    def bound(name, want):
        if name.startswith("resize"):
            return 2e-6 * np.abs(want) + 1e-6
        return 0.0
    return check_all("shape windows", cases(), bound)


if __name__ == "__main__":
    sys.exit(main())
