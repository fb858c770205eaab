"""ai.onnx.ml TreeEnsembleRegressor (TreeEnsembleHandlers.cpp) through
kilnc and kiln-run on emu, for the ensembles scikit-learn trains, written
as sklearn-onnx writes them (nodes by (tree, node) id, BRANCH_LEQ with the
left child true, LEAF nodes with target_* entries), against onnxruntime
1.20.1 (graph optimizations off) and against scikit-learn's own predict,
element by element.

Cases: a random forest (AVERAGE, 2 targets) on float, double and int64
inputs (onnxruntime has no kernel for int64: scikit-learn only); gradient boosting (SUM, base_values = the initial prediction,
weights scaled by the learning rate) at opset 1 and at opset 3 with the
*_as_tensor attributes; the boosted sum through LOGISTIC (against scikit-learn only: onnxruntime
ignores LOGISTIC on a one-target regressor); NaN inputs with
nodes_missing_value_tracks_true on half the nodes (onnxruntime only:
scikit-learn's trees here have no missing-value rule); MIN and MAX over a
2-target forest whose leaves each drop a target at random (onnxruntime
only: a target no reached leaf scores is 0), and MIN over one target;
PROBIT on a one-tree forest of one target in (0, 1), against onnxruntime.

Bounds: each tree reaches the same leaf on both sides (X is compared in
float, or double for a double X, as onnxruntime does), so the only
difference is the order in which the trees' weights are added, in float:
trees * 2^-23 * (sum of |weight| over the trees) per element, with the
sum bounded by trees * max |weight| + |base|. Against scikit-learn, which
compares in float32 too (its trees are trained on float32 features) but
adds in float64, the same bound. LOGISTIC adds 4 * 2^-23. MIN and MAX
pick one leaf's weight: exact. PROBIT (one tree: the same score on both
sides) as tree_ensembles.py bounds it: 16 eps (1 + |z|) (1 + 1/|l|).
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_harness import onnxruntime_run, parse_args, run_model  # noqa: E402
from tree_ensembles import probit_parts  # noqa: E402


def encode_trees(trees, prefix, leaf_entries, tracks=lambda: 0):
    """sklearn-onnx's encoding of scikit-learn trees: nodes by (tree, node)
    id, BRANCH_LEQ with the left child true, LEAF nodes; each leaf's
    (target or class, weight) pairs from `leaf_entries(tree, t, i)` as
    `prefix`* entries ("target_" or "class_"); `tracks()` gives each
    branch's nodes_missing_value_tracks_true."""
    a = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids",
                         "nodes_modes", "nodes_values", "nodes_truenodeids",
                         "nodes_falsenodeids", "nodes_missing_value_tracks_true")}
    a.update({prefix + k: [] for k in ("treeids", "nodeids", "ids", "weights")})
    for t, tree in enumerate(trees):
        tr = tree.tree_
        for i in range(tr.node_count):
            leaf = tr.children_left[i] == -1
            a["nodes_treeids"].append(t)
            a["nodes_nodeids"].append(i)
            a["nodes_featureids"].append(0 if leaf else int(tr.feature[i]))
            a["nodes_modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            a["nodes_values"].append(0.0 if leaf else float(tr.threshold[i]))
            a["nodes_truenodeids"].append(0 if leaf else int(tr.children_left[i]))
            a["nodes_falsenodeids"].append(0 if leaf else int(tr.children_right[i]))
            a["nodes_missing_value_tracks_true"].append(0 if leaf else int(tracks()))
            if leaf:
                for k, w in leaf_entries(tree, t, i):
                    a[prefix + "treeids"].append(t)
                    a[prefix + "nodeids"].append(i)
                    a[prefix + "ids"].append(k)
                    a[prefix + "weights"].append(w)
    if not any(a["nodes_missing_value_tracks_true"]):
        a.pop("nodes_missing_value_tracks_true")
    return a


def ensemble_attrs(estimators, scale, targets, rng, tracks):
    """A regressor's trees: each leaf's value per target, times `scale`."""
    def leaf_entries(tree, t, i):
        v = tree.tree_.value[i].reshape(-1)
        return [(k, float(v[k]) * scale) for k in range(targets)]
    return encode_trees(estimators, "target_", leaf_entries,
                        lambda: tracks and rng.random() < 0.5)


def regressor_model(attrs, x_type, features, batch, targets, ml_opset, **extra):
    attrs = dict(attrs)
    attrs.update(extra)
    if ml_opset == 3:
        for key in ("nodes_values", "target_weights", "base_values"):
            if key in attrs:
                values = attrs.pop(key)
                attrs[key + "_as_tensor"] = helper.make_tensor(
                    key, TensorProto.FLOAT, [len(values)], values)
    node = helper.make_node("TreeEnsembleRegressor", ["X"], ["Y"],
                            domain="ai.onnx.ml", n_targets=targets, **attrs)
    graph = helper.make_graph(
        [node], "regressor",
        [helper.make_tensor_value_info("X", x_type, [batch, features])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, targets])])
    m = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 8
    return m


def cases(rng):
    features, batch = 5, 64
    train = rng.normal(size=(400, features)).astype(np.float32)
    y2 = np.stack([train[:, 0] * 2 + np.sin(train[:, 1]), train[:, 2] * train[:, 3]], 1)
    forest = RandomForestRegressor(n_estimators=6, max_depth=6, random_state=0).fit(train, y2)
    boost = GradientBoostingRegressor(n_estimators=12, max_depth=3, learning_rate=0.2,
                                      random_state=0).fit(train, y2[:, 0])
    test = rng.normal(size=(batch, features)).astype(np.float32)
    forest_attrs = ensemble_attrs(forest.estimators_, 1.0, 2, rng, False)
    for name, x_type, x in (("forest-float", TensorProto.FLOAT, test),
                            ("forest-double", TensorProto.DOUBLE, test.astype(np.float64)),
                            ("forest-int64", TensorProto.INT64,
                             np.round(test * 2).astype(np.int64))):
        m = regressor_model(forest_attrs, x_type, features, batch, 2, 1,
                            aggregate_function="AVERAGE")
        skl = forest.predict(x.astype(np.float32))
        yield name, m, x, skl, len(forest.estimators_), 0.0, False
    init = float(boost.init_.constant_.reshape(-1)[0])
    boost_attrs = ensemble_attrs(boost.estimators_[:, 0], boost.learning_rate, 1, rng, False)
    for name, opset in (("boost-opset1", 1), ("boost-opset3", 3)):
        m = regressor_model(boost_attrs, TensorProto.FLOAT, features, batch, 1, opset,
                            aggregate_function="SUM", base_values=[init])
        yield name, m, test, boost.predict(test).reshape(-1, 1), boost.n_estimators, init, False
    m = regressor_model(boost_attrs, TensorProto.FLOAT, features, batch, 1, 1,
                        aggregate_function="SUM", base_values=[init],
                        post_transform="LOGISTIC")
    logistic = 1 / (1 + np.exp(-boost.predict(test).reshape(-1, 1)))
    yield "boost-logistic", m, test, logistic, boost.n_estimators, init, "logistic"
    nan_test = test.copy()
    nan_test[rng.random(size=test.shape) < 0.15] = np.nan
    m = regressor_model(ensemble_attrs(forest.estimators_, 1.0, 2, rng, True),
                        TensorProto.FLOAT, features, batch, 2, 1,
                        aggregate_function="AVERAGE")
    yield "forest-nan-tracks", m, nan_test, None, len(forest.estimators_), 0.0, False

    def some_targets(tree, t, i):
        # Target 1 is rare: about half the rows reach no leaf scoring it.
        v = tree.tree_.value[i].reshape(-1)
        keep = [k for k, p in ((0, 0.6), (1, 0.1)) if rng.random() < p]
        return [(k, float(v[k])) for k in keep]
    sparse_attrs = encode_trees(forest.estimators_, "target_", some_targets)
    for aggregate in ("MIN", "MAX"):
        m = regressor_model(sparse_attrs, TensorProto.FLOAT, features, batch, 2, 1,
                            aggregate_function=aggregate)
        yield (f"forest-{aggregate.lower()}-sparse", m, test, None,
               len(forest.estimators_), 0.0, "exact")
    m = regressor_model(boost_attrs, TensorProto.FLOAT, features, batch, 1, 1,
                        aggregate_function="MIN")
    yield "boost-min", m, test, None, boost.n_estimators, 0.0, "exact"
    unit = 1 / (1 + np.exp(-y2[:, 0]))
    one = RandomForestRegressor(n_estimators=1, max_depth=7, random_state=3).fit(train, unit)
    m = regressor_model(ensemble_attrs(one.estimators_, 1.0, 1, rng, False),
                        TensorProto.FLOAT, features, batch, 1, 1,
                        aggregate_function="AVERAGE", post_transform="PROBIT")
    yield "forest-probit", m, test, None, 1, 0.0, "probit"


def main():
    args = parse_args()
    failures = count = 0
    eps = 2.0 ** -23
    for name, m, x, skl, trees, base, logistic in cases(np.random.default_rng(5)):
        count += 1
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        onnx.save(m, path)
        if logistic == "probit":
            plain = onnx.ModelProto()
            plain.CopyFrom(m)
            for a in plain.graph.node[0].attribute:
                if a.name == "post_transform":
                    a.s = b"NONE"
            onnx.save(plain, os.path.join(work, "none.onnx"))
        try:
            expected = onnxruntime_run(path, {"X": x})[0]
        except ort.capi.onnxruntime_pybind11_state.NotImplemented:
            expected = None  # onnxruntime has no int64 X: scikit-learn only
        if logistic == "logistic":
            # onnxruntime 1.20.1 applies no post_transform but PROBIT to a
            # one-target regressor (its write_scores), whatever the node
            # says; the operator's definition applies it: checked against
            # scikit-learn's prediction through the logistic function.
            expected = None
        results = run_model(args, name, path, {"X": x}, work, ["Y"])
        if results is None:
            failures += 1
            continue
        got = results[0].astype(np.float64)
        weights = [w for w in m.graph.node[0].attribute
                   if w.name.startswith("target_weights")][0]
        w = np.array(weights.floats or onnx.numpy_helper.to_array(weights.t))
        bound = trees * eps * (trees * float(np.max(np.abs(w))) + abs(base))
        if logistic == "logistic":
            bound += 4 * eps
        elif logistic == "exact":
            bound = 0.0
        elif logistic == "probit":
            # The leaf's weight, the score both sides transform.
            scores = onnxruntime_run(path.replace("model.onnx", "none.onnx"), {"X": x})[0]
            z, log = probit_parts(scores.astype(np.float64))
            with np.errstate(divide="ignore"):
                bound = 16 * eps * (1 + np.abs(z)) * (1 + 1 / np.abs(log))
        line = f"{name}:"
        for label, ref in (("onnxruntime", expected), ("sklearn", skl)):
            if ref is None:
                continue
            ref = np.asarray(ref, dtype=np.float64).reshape(got.shape)
            with np.errstate(invalid="ignore"):
                error = np.where(got == ref, 0.0, np.abs(got - ref))
            off = int(np.sum(~(error <= bound)))
            failures += off != 0
            line += (f" vs {label} {off}/{ref.size} off (max abs err "
                     f"{float(np.max(error)):.3g}, bound {float(np.max(bound)):.3g})")
        bad = any(not part.split(" ", 1)[1].startswith("0/")
                  for part in line.split(" vs ")[1:])
        print(line, "FAIL" if bad else "ok")
    print(f"tree regressors: {count} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
