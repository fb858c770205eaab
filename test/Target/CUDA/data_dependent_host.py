"""Data-dependent shapes as host steps (HostPartition.cpp,
runtime/lib/HostDataOps.cpp) through kilnc and kiln-run on emu, against
onnxruntime 1.20.1 (graph optimizations off), element by element.

Each model computes on the device, then ends in ops whose output shape
depends on the data: NonZero (with the Transpose torch.nonzero exports),
Compress with and without an axis, Unique (sorted with an axis, unsorted
without, all four outputs), and a detector's tail: NonMaxSuppression on
device-computed boxes and scores, the selected box indices taken with
Gather and the boxes gathered by them (corner boxes over two batches and
center boxes), plus numeric Cast and Slice on the host.

Bounds: exact. Every device op here is exact in float32 (additions of
values on a 2^-4 grid, multiplications by powers of two, Abs, Relu,
Floor), so the device results equal onnxruntime's bit for bit, and the
host steps pick, compare and count (NonMaxSuppression's intersection over
union is computed from those same bits in float32 as onnxruntime does).
Each case also checks that the data-dependent node ran as a host step
(`kilnc --stats` counts them).
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_harness import onnxruntime_run, parse_args, run_model  # noqa: E402

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def grid(rng, shape, scale=4.0):
    """Values on a 2^-4 grid: sums and doublings of them are exact."""
    return (np.round(rng.normal(size=shape) * scale * 16) / 16).astype(np.float32)


def cases(rng):
    x = grid(rng, (4, 6))
    yield ("nonzero-transpose", model(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("NonZero", ["r"], ["nz"]),
         helper.make_node("Transpose", ["nz"], ["where"], perm=[1, 0])],
        [("x", F, [4, 6])], [("where", I64, None), ("r", F, [4, 6])]),
        {"x": x}, ["where", "r"])

    x = grid(rng, (5, 4))
    cond = np.array([True, False, True, True, False])
    yield ("compress", model(
        [helper.make_node("Add", ["x", "x"], ["y"]),
         helper.make_node("Compress", ["y", "c"], ["rows"], axis=0),
         helper.make_node("Greater", ["y", "zero"], ["pos"]),
         helper.make_node("Reshape", ["pos", "flat"], ["pos1"]),
         helper.make_node("Compress", ["y", "pos1"], ["positives"])],
        [("x", F, [5, 4]), ("c", BOOL, [5])],
        [("rows", F, None), ("positives", F, None)],
        [("zero", np.zeros((), np.float32)), ("flat", np.array([-1], np.int64))]),
        {"x": x, "c": cond}, ["rows", "positives"])

    ints = rng.integers(0, 3, size=(5, 3)).astype(np.int64)
    ints[3] = ints[1]
    yield ("unique-sorted-axis", model(
        [helper.make_node("Unique", ["x"], ["y", "first", "inverse", "counts"],
                          axis=0, sorted=1)],
        [("x", I64, [5, 3])],
        [("y", I64, None), ("first", I64, None), ("inverse", I64, None),
         ("counts", I64, None)]),
        {"x": ints}, ["y", "first", "inverse", "counts"])

    x = grid(rng, (3, 7), 2.0)
    yield ("unique-unsorted", model(
        [helper.make_node("Floor", ["x"], ["f"]),
         helper.make_node("Unique", ["f"], ["y", "", "inverse"], sorted=0)],
        [("x", F, [3, 7])], [("y", F, None), ("inverse", I64, None)]),
        {"x": x}, ["y", "inverse"])

    for name, batches, centered in (("nms-corners", 2, 0), ("nms-centers", 1, 1)):
        n, classes = 40, 3
        anchors = (rng.integers(0, 16, size=(batches, n, 4)) * 2.0).astype(np.float32)
        if centered:
            anchors[..., 2:] = np.abs(anchors[..., 2:]) + 4
        deltas = grid(rng, (batches, n, 4), 2.0)
        logits = grid(rng, (batches, classes, n), 1.0)
        nodes = [
            helper.make_node("Add", ["anchors", "deltas"], ["boxes"]),
            helper.make_node("Abs", ["logits"], ["a"]),
            helper.make_node("Mul", ["a", "quarter"], ["scores"]),
            helper.make_node("NonMaxSuppression",
                             ["boxes", "scores", "max", "iou", "threshold"],
                             ["selected"], center_point_box=centered),
            helper.make_node("Gather", ["selected", "two"], ["box"], axis=1),
            helper.make_node("Gather", ["selected", "zero"], ["batch"], axis=1),
            helper.make_node("Slice", ["selected", "s0", "s1", "s2"], ["bc"]),
            helper.make_node("Cast", ["box"], ["box32"], to=TensorProto.INT32),
            helper.make_node("Gather", ["boxes", "batch"], ["perbatch"], axis=0),
        ]
        inits = [("quarter", np.array(0.25, np.float32)),
                 ("max", np.array([4], np.int64)),
                 ("iou", np.array([0.3], np.float32)),
                 ("threshold", np.array([0.1], np.float32)),
                 ("two", np.array(2, np.int64)), ("zero", np.array(0, np.int64)),
                 ("s0", np.array([0], np.int64)), ("s1", np.array([2], np.int64)),
                 ("s2", np.array([1], np.int64))]
        yield (name, model(
            nodes,
            [("anchors", F, [batches, n, 4]), ("deltas", F, [batches, n, 4]),
             ("logits", F, [batches, classes, n])],
            [("selected", I64, None), ("box32", TensorProto.INT32, None),
             ("bc", I64, None), ("perbatch", F, None)], inits),
            {"anchors": anchors, "deltas": deltas, "logits": logits},
            ["selected", "box32", "bc", "perbatch"])


def host_steps(kilnc, path):
    stats = subprocess.run([kilnc, path, "--stats", "-o", os.devnull],
                           capture_output=True, text=True)
    for line in (stats.stdout + stats.stderr).splitlines():
        if line.strip().startswith("host steps:"):
            return line.strip()
    return "host steps: none"


def main():
    args = parse_args()
    failures = count = 0
    for name, m, feeds, outputs in cases(np.random.default_rng(7)):
        count += 1
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        onnx.save(m, path)
        expected = onnxruntime_run(path, feeds)
        got = run_model(args, name, path, feeds, work, outputs)
        if got is None:
            failures += 1
            continue
        line, bad = f"{name}:", False
        for output, g, e in zip(outputs, got, expected):
            same = g.shape == e.shape and g.dtype == e.dtype and np.array_equal(g, e)
            bad |= not same
            line += f" {output} {list(g.shape)}{'' if same else ' DIFFERS from ' + str(list(e.shape))}"
        steps = host_steps(args.kilnc, path)
        bad |= steps == "host steps: none"
        failures += bad
        print(line, "|", steps, "FAIL" if bad else "ok")
    print(f"data-dependent host steps: {count} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
