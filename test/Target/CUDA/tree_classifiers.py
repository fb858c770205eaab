"""ai.onnx.ml TreeEnsembleClassifier (TreeEnsembleHandlers.cpp) through
kilnc and kiln-run on emu, for classifiers scikit-learn trains, encoded as
sklearn-onnx does (tree_regressors.py's node encoding, class_* leaves),
against onnxruntime 1.20.1 (graph optimizations off) and scikit-learn's
predict and predict_proba, element by element.

Cases: a random forest of 3 classes with int64 labels (10, 20, 30; each
leaf scores every class with its class fractions over the number of trees,
post_transform NONE: the scores are predict_proba); a binary forest with
string labels ("no", "yes": the device finds the label's position, a host
step maps it), both classes scored (labels against scikit-learn only:
onnxruntime labels those by "second score above 0"); gradient boosting
over 3 classes (one tree per class per stage, base_values the log priors,
SOFTMAX); the 3-class forest under SOFTMAX_ZERO, against onnxruntime only
(its classes no tree votes for score 0 and stay 0).

Two classes with the first only scored, as sklearn-onnx writes binary
models (onnxruntime's rule, TreeEnsembleHandlers.cpp): a forest whose
leaves hold P(second class) (Z = [1 - s, s], the second label if s > 0.5),
against onnxruntime and predict_proba; boosting with base_values the
initial log-odds under LOGISTIC (Z = [sigmoid(-s), sigmoid(s)]), against
onnxruntime and predict_proba, and under NONE (Z = [-s, s]) against
onnxruntime and [-d, d] of scikit-learn's decision_function d; the label
is the second if s > 0, as predict's.

PROBIT on a one-tree forest of 3 classes, against onnxruntime: the
probabilities 0 and 1 give -inf and inf on both sides.

Bounds: the scores as tree_regressors.py (the same leaves, the trees added
in another order in float: trees * 2^-23 * (trees * max |weight| +
max |base|)), plus 4 * 2^-23 for SOFTMAX, SOFTMAX_ZERO, LOGISTIC and 1 - s;
PROBIT (one tree: the same scores on both sides) as tree_ensembles.py
bounds it, 16 eps (1 + |z|) (1 + 1/|l|); labels exactly.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_harness import onnxruntime_run, parse_args, run_model  # noqa: E402
from tree_ensembles import probit_parts  # noqa: E402
from tree_regressors import encode_trees  # noqa: E402


def encode(trees, classes, weight_of):
    """sklearn-onnx's encoding (tree_regressors.encode_trees) with class_*
    leaves; `weight_of(tree, t, leaf)` gives a leaf's (class, weight)
    pairs."""
    return encode_trees(trees, "class_", weight_of)


def classifier_model(attrs, features, batch, classes, label_type, **extra):
    attrs = dict(attrs)
    attrs.update(extra)
    node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "scores"],
                            domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph(
        [node], "classifier",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, features])],
        [helper.make_tensor_value_info("label", label_type, [batch]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [batch, classes])])
    m = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 8
    return m


def forest_weights(n_trees):
    def weight_of(tree, t, i):
        v = tree.tree_.value[i].reshape(-1)
        v = v / v.sum()
        return [(c, float(v[c]) / n_trees) for c in range(len(v))]
    return weight_of


def cases(rng):
    features, batch = 4, 48
    train = rng.normal(size=(500, features)).astype(np.float32)
    three = (np.digitize(train[:, 0] + 0.5 * train[:, 1] * train[:, 2], [-0.5, 0.5])).astype(np.int64)
    test = rng.normal(size=(batch, features)).astype(np.float32)

    forest = RandomForestClassifier(n_estimators=7, max_depth=6, random_state=0).fit(train, three)
    attrs = encode(forest.estimators_, 3, forest_weights(len(forest.estimators_)))
    labels = np.array([10, 20, 30], dtype=np.int64)
    m = classifier_model(attrs, features, batch, 3, TensorProto.INT64,
                         classlabels_int64s=labels.tolist())
    yield ("forest-3-classes", m, test, labels[forest.predict(test)],
           forest.predict_proba(test), len(forest.estimators_), 0.0, False)
    # SOFTMAX_ZERO: a class no tree votes for scores exactly 0 and stays 0.
    m = classifier_model(attrs, features, batch, 3, TensorProto.INT64,
                         classlabels_int64s=labels.tolist(), post_transform="SOFTMAX_ZERO")
    yield ("forest-3-classes-softmax-zero", m, test, None, None,
           len(forest.estimators_), 0.0, True)

    two = (train[:, 0] * train[:, 1] > 0).astype(np.int64)
    binary = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=1).fit(train, two)
    attrs = encode(binary.estimators_, 2, forest_weights(len(binary.estimators_)))
    names = np.array(["no", "yes"])
    m = classifier_model(attrs, features, batch, 2, TensorProto.STRING,
                         classlabels_strings=names.tolist())
    yield ("forest-binary-strings", m, test, names[binary.predict(test)],
           binary.predict_proba(test), len(binary.estimators_), 0.0, False)

    boost = GradientBoostingClassifier(n_estimators=6, max_depth=3, learning_rate=0.3,
                                       random_state=0).fit(train, three)
    stages = boost.estimators_  # [stages, classes]
    trees, owner = [], []
    for stage in stages:
        for c, tree in enumerate(stage):
            trees.append(tree)
            owner.append(c)

    def boost_weight(tree, t, i):
        return [(owner[t], float(tree.tree_.value[i].reshape(-1)[0]) * boost.learning_rate)]
    attrs = encode(trees, 3, boost_weight)
    prior = np.log(boost.init_.class_prior_)
    m = classifier_model(attrs, features, batch, 3, TensorProto.INT64,
                         classlabels_int64s=[0, 1, 2], base_values=prior.tolist(),
                         post_transform="SOFTMAX")
    yield ("boost-3-classes-softmax", m, test, boost.predict(test),
           boost.predict_proba(test), len(trees), float(np.max(np.abs(prior))), True)

    # Binary, the first class only scored (sklearn-onnx's encoding).
    def second_probability(tree, t, i):
        v = tree.tree_.value[i].reshape(-1)
        return [(0, float(v[1] / v.sum()) / len(binary.estimators_))]
    attrs = encode(binary.estimators_, 2, second_probability)
    labels = np.array([3, 7], dtype=np.int64)
    m = classifier_model(attrs, features, batch, 2, TensorProto.INT64,
                         classlabels_int64s=labels.tolist())
    yield ("forest-binary-one-score", m, test, labels[binary.predict(test)],
           binary.predict_proba(test), len(binary.estimators_), 0.0, True)

    boost2 = GradientBoostingClassifier(n_estimators=8, max_depth=3, learning_rate=0.3,
                                        random_state=0).fit(train, two)
    attrs = encode(boost2.estimators_[:, 0], 2,
                   lambda tree, t, i: [(0, float(tree.tree_.value[i].reshape(-1)[0]) *
                                        boost2.learning_rate)])
    init = float(boost2._raw_predict_init(test[:1]).reshape(-1)[0])
    d = boost2.decision_function(test)
    for post, proba in (("LOGISTIC", boost2.predict_proba(test)),
                        ("NONE", np.stack([-d, d], axis=1))):
        m = classifier_model(attrs, features, batch, 2, TensorProto.INT64,
                             classlabels_int64s=[0, 1], base_values=[init],
                             post_transform=post)
        yield (f"boost-binary-{post.lower()}", m, test, boost2.predict(test), proba,
               boost2.n_estimators, abs(init), True)

    one = RandomForestClassifier(n_estimators=1, max_depth=8, random_state=2).fit(train, three)
    attrs = encode(one.estimators_, 3, forest_weights(1))
    m = classifier_model(attrs, features, batch, 3, TensorProto.INT64,
                         classlabels_int64s=[10, 20, 30], post_transform="PROBIT")
    # The probabilities (not a reference: the PROBIT bound's l).
    yield ("forest-3-classes-probit", m, test, None, one.predict_proba(test), 1, 0.0,
           "probit")


def main():
    args = parse_args()
    failures = count = 0
    eps = 2.0 ** -23
    for name, m, x, skl_label, skl_proba, trees, base, softmax in cases(
            np.random.default_rng(11)):
        count += 1
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        onnx.save(m, path)
        ort_label, ort_scores = onnxruntime_run(path, {"X": x})
        results = run_model(args, name, path, {"X": x}, work, ["label", "scores"])
        if results is None:
            failures += 1
            continue
        label, scores = results[0], results[1].astype(np.float64)
        weights = np.abs(np.array(m.graph.node[0].attribute[
            [a.name for a in m.graph.node[0].attribute].index("class_weights")].floats))
        bound = trees * eps * (trees * float(weights.max()) + base)
        if softmax == "probit":
            z, log = probit_parts(np.asarray(skl_proba, dtype=np.float64))
            with np.errstate(divide="ignore", invalid="ignore"):
                bound = 16 * eps * (1 + np.abs(z)) * (1 + 1 / np.abs(log))
        elif softmax:
            bound += 4 * eps
        line, bad = f"{name}:", False
        references = [("onnxruntime", ort_label, ort_scores)]
        if name == "forest-binary-strings":
            # Two classes both scored: onnxruntime labels every row whose
            # second score is above 0 with the second label; Kiln takes the
            # top class, as the operator says (and scikit-learn predicts).
            references = [("onnxruntime", None, ort_scores)]
        if skl_label is not None:
            references.append(("sklearn", skl_label, skl_proba))
        for ref_name, ref_label, ref_scores in references:
            labels_off = 0 if ref_label is None else int(np.sum(
                np.array([str(v) for v in label.ravel()]) !=
                np.array([v.decode() if isinstance(v, bytes) else str(v)
                          for v in np.asarray(ref_label).ravel()])))
            ref_scores = np.asarray(ref_scores, dtype=np.float64)
            with np.errstate(invalid="ignore"):
                error = np.where(scores == ref_scores, 0.0, np.abs(scores - ref_scores))
            off = int(np.sum(~(error <= bound)))
            bad |= labels_off != 0 or off != 0
            line += (f" vs {ref_name}: labels {labels_off}/{label.size} differ, scores "
                     f"{off}/{scores.size} off (max abs err {float(error.max()):.3g})")
        failures += bad
        print(line, "FAIL" if bad else "ok")
    print(f"tree classifiers: {count} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
