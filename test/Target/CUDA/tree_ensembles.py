"""ai.onnx.ml TreeEnsemble (opset 5) through kilnc and kiln-run on emu,
against onnx's reference evaluator (onnx.reference), element by element.

Each case is a random ensemble (seeded): several trees of random shape,
every node mode (BRANCH_LEQ ... BRANCH_MEMBER), NaN inputs with and
without nodes_missing_value_tracks_true, some inputs equal to a split (so
LEQ and LT differ), one-leaf trees, and each aggregate function.

Bounds: the leaf each tree reaches must be the same (the comparisons are
exact in X's type on both sides), so MIN and MAX must match exactly. SUM
and AVERAGE add the trees' weights in another order than the reference
(which adds tree by tree, in X's type): the bound per element is
trees * eps * (sum of |weight| over the trees), eps of X's type, the
worst case of reordering that many rounded additions. onnx's reference
ignores post_transform; for LOGISTIC, SOFTMAX and SOFTMAX_ZERO the
reference's NONE output goes through numpy's transform in float64, and
the bound adds 4 eps of X's type (the transcendental's error in the
kernel). PROBIT (onnxruntime's, Winitzki's erfinv: `probit` below) runs
on one tree, so both sides transform the same scores (0 for a target the
leaf does not score, whose PROBIT is -inf on both); its bound is
16 eps (1 + |z|) (1 + 1/|l|), l = log((1 - x)(1 + x)) with x = 2y - 1:
the formula's square roots halve a relative error in l, and an error of a
few eps in the log's argument or result is that many eps over |l|
relative (large near y = 0.5, where l -> 0; at exactly 0.5 both give 0).
SOFTMAX_ZERO is onnxruntime's too (`softmax_zero`).

The reference reads membership_values in depth-first order and stops a set
at a 0.0 member (its `while (m := next(it)) and not isnan(m)`): sets here
hold nonzero members and nodes are numbered depth first, so the spec's node
order and the reference's agree.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_harness import parse_args, run_model  # noqa: E402


def random_ensemble(rng, features, trees, max_depth, with_member,
                    unit_weights=False):
    """The node and leaf arrays of `trees` random trees, nodes numbered
    depth first (true branch first)."""
    nodes = dict(featureids=[], modes=[], splits=[], truenodeids=[],
                 falsenodeids=[], trueleafs=[], falseleafs=[], tracks=[])
    members = []
    leaves_target, leaves_weight = [], []
    roots = []

    def leaf(targets):
        leaves_target.append(int(rng.integers(targets)))
        if unit_weights:  # in (0, 1), for PROBIT
            leaves_weight.append(float(np.round(rng.uniform(0.001, 0.999), 3)))
        else:
            leaves_weight.append(float(np.round(rng.normal() * 10, 3)))
        return len(leaves_target) - 1

    def node(depth, targets):
        i = len(nodes["featureids"])
        mode = int(rng.integers(7 if with_member else 6))
        nodes["featureids"].append(int(rng.integers(features)))
        nodes["modes"].append(mode)
        nodes["splits"].append(float(rng.integers(1, 7)) + rng.choice([0.0, 0.5]))
        nodes["tracks"].append(int(rng.integers(2)))
        if mode == 6:
            members.extend(sorted(set(int(v) for v in rng.integers(1, 7, size=3))))
            members.append(float("nan"))
        for key in ("truenodeids", "falsenodeids", "trueleafs", "falseleafs"):
            nodes[key].append(0)
        for side in ("true", "false"):
            if depth + 1 >= max_depth or rng.random() < 0.3:
                nodes[f"{side}leafs"][i] = 1
                nodes[f"{side}nodeids"][i] = leaf(targets)
            else:
                nodes[f"{side}leafs"][i] = 0
                nodes[f"{side}nodeids"][i] = node(depth + 1, targets)
        return i

    return nodes, members, leaves_target, leaves_weight, roots, node, leaf


def build(rng, case):
    features, trees, targets = case["features"], case["trees"], case["targets"]
    nodes, members, lt, lw, roots, node, leaf = random_ensemble(
        rng, features, trees, case["depth"], case["member"],
        case.get("unit_weights", False))
    for t in range(trees):
        if case.get("leaf_tree") and t == 0:
            # onnx's one-leaf tree: a root whose two children are one leaf.
            i = len(nodes["featureids"])
            for key, v in (("featureids", 0), ("modes", 0), ("splits", 0.0),
                           ("tracks", 0), ("trueleafs", 1), ("falseleafs", 1)):
                nodes[key].append(v)
            j = leaf(targets)
            nodes["truenodeids"].append(j)
            nodes["falsenodeids"].append(j)
            roots.append(i)
        else:
            roots.append(node(0, targets))
    dtype = case["dtype"]
    onnx_type = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE}[dtype]
    attrs = dict(
        nodes_featureids=nodes["featureids"],
        nodes_modes=helper.make_tensor("nodes_modes", TensorProto.UINT8,
                                       [len(nodes["modes"])], nodes["modes"]),
        nodes_splits=helper.make_tensor("nodes_splits", onnx_type,
                                        [len(nodes["splits"])], nodes["splits"]),
        nodes_truenodeids=nodes["truenodeids"],
        nodes_falsenodeids=nodes["falsenodeids"],
        nodes_trueleafs=nodes["trueleafs"],
        nodes_falseleafs=nodes["falseleafs"],
        leaf_targetids=lt,
        leaf_weights=helper.make_tensor("leaf_weights", onnx_type, [len(lw)], lw),
        tree_roots=roots,
        n_targets=targets,
        aggregate_function=case["aggregate"],
        post_transform=case["post"],
    )
    if case["tracks"]:
        attrs["nodes_missing_value_tracks_true"] = nodes["tracks"]
    if members:
        attrs["membership_values"] = helper.make_tensor(
            "membership_values", onnx_type, [len(members)], members)
    n = case["batch"]
    graph = helper.make_graph(
        [helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", **attrs)],
        "ensemble",
        [helper.make_tensor_value_info("X", onnx_type, [n, features])],
        [helper.make_tensor_value_info("Y", onnx_type, [n, targets])])
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = 10
    # Inputs: integers and halves around the splits (some equal to one),
    # NaNs in a tenth of them.
    x = (rng.integers(0, 8, size=(n, features)) +
         rng.choice([0.0, 0.5], size=(n, features))).astype(dtype)
    x[rng.random(size=x.shape) < 0.1] = np.nan
    # The largest |weight|: trees * max|w| bounds the docstring's sum.
    weight_abs = float(np.max(np.abs(lw))) if lw else 0.0
    return model, x, weight_abs


def softmax_zero(y):
    """onnxruntime's SOFTMAX_ZERO (ml_common.h ComputeSoftmaxZero), row by
    row: scores within 1e-7 of 0 are scaled by exp(-max), not
    exponentiated, and left out of the sum."""
    m = y.max(axis=1, keepdims=True)
    away = np.abs(y) > 1e-7
    e = np.where(away, np.exp(y - m), y * np.exp(-m))
    return e / np.where(away, e, 0.0).sum(axis=1, keepdims=True)


def probit_parts(y):
    """onnxruntime's PROBIT (ml_common.h ComputeProbit: sqrt(2) erfinv(2y
    - 1), erfinv by Winitzki's approximation, a = 0.147) and the log it
    takes, l."""
    x = 2.0 * y - 1.0
    sign = np.where(x < 0, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.log((1.0 - x) * (1.0 + x))
        v = 2.0 / (np.pi * 0.147) + 0.5 * log
        v2 = log / 0.147
        z = np.sqrt(2.0) * sign * np.sqrt(-v + np.sqrt(v * v - v2))
    return z, log


def transform(y, post):
    y = y.astype(np.float64)
    if post == 1:
        e = np.exp(y - y.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if post == 2:
        return 1.0 / (1.0 + np.exp(-y))
    if post == 3:
        return softmax_zero(y)
    if post == 4:
        return probit_parts(y)[0]
    return y


CASES = [
    dict(name="sum-f32", dtype=np.float32, aggregate=1, post=0, trees=5),
    dict(name="sum-f64-member", dtype=np.float64, aggregate=1, post=0, trees=4, member=True),
    dict(name="average-f32", dtype=np.float32, aggregate=0, post=0, trees=6),
    dict(name="min-f32-member", dtype=np.float32, aggregate=2, post=0, trees=5, member=True),
    dict(name="max-f64", dtype=np.float64, aggregate=3, post=0, trees=5),
    dict(name="sum-no-missing", dtype=np.float32, aggregate=1, post=0, trees=3, tracks=False),
    dict(name="sum-leaf-tree", dtype=np.float32, aggregate=1, post=0, trees=3, leaf_tree=True),
    dict(name="logistic-f32", dtype=np.float32, aggregate=1, post=2, trees=4, targets=1),
    dict(name="softmax-f32", dtype=np.float32, aggregate=1, post=1, trees=4),
    dict(name="deep-f32", dtype=np.float32, aggregate=1, post=0, trees=2, depth=9),
    dict(name="softmax-zero-f32", dtype=np.float32, aggregate=1, post=3, trees=3),
    dict(name="probit-f32", dtype=np.float32, aggregate=1, post=4, trees=1,
         depth=7, unit_weights=True),
]


def main():
    args = parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    for index, base in enumerate(CASES):
        case = dict(features=4, targets=3, depth=5, batch=64, member=False,
                    tracks=True)
        case.update(base)
        rng = np.random.default_rng(1000 + index)
        model, x, weight_abs = build(rng, case)
        work = os.path.join(args.work, case["name"])
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        onnx.save(model, path)
        reference = ReferenceEvaluator(model).run(None, {"X": x})[0]
        expected = transform(reference, case["post"])
        results = run_model(args, case["name"], path, {"X": x}, work, ["Y"])
        if results is None:
            failures += 1
            continue
        got = results[0].astype(np.float64)
        eps = float(np.finfo(case["dtype"]).eps)
        trees = case["trees"]
        if case["aggregate"] in (2, 3):
            bound = np.zeros_like(expected)
        else:
            bound = np.full_like(expected, trees * trees * eps * weight_abs)
        if case["post"] == 4:
            z, log = probit_parts(reference.astype(np.float64))
            with np.errstate(divide="ignore"):
                bound = 16 * eps * (1 + np.abs(z)) * (1 + 1 / np.abs(log))
        elif case["post"]:
            bound = bound + 4 * eps
        with np.errstate(invalid="ignore"):
            error = np.where(got == expected, 0.0, np.abs(got - expected))
        off = int(np.sum(~(error <= bound)))
        verdict = "ok" if off == 0 and got.shape == expected.shape else "FAIL"
        failures += verdict != "ok"
        print(f"{case['name']}: {off}/{expected.size} elements off, "
              f"max abs err {float(np.max(error)):.3g} {verdict}")
    print(f"tree ensembles: {len(CASES)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
