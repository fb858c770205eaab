"""kiln.compile_training and kiln.Trainer on emu.

References: a numpy float64 SGD step of a softmax classifier (written here
from the math, not from Kiln), kiln-train itself (Trainer.fit must be its
loop: the same weights bit for bit, the same history, checkpoints either one
resumes), and onnxruntime on the exported model.
"""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from conftest import _model, assert_close, numerics, reference

BATCH, FEATURES, CLASSES = 8, 6, 4


def make_classifier(seed=0):
    """x[8,6] -> MatMul W[6,4] -> Add b[4] -> y[8,4] (logits)."""
    rng = np.random.default_rng(seed)
    init = [
        numpy_helper.from_array(
            (0.5 * rng.standard_normal((FEATURES, CLASSES))).astype(np.float32),
            "W"),
        numpy_helper.from_array(
            (0.1 * rng.standard_normal((CLASSES,))).astype(np.float32), "b"),
    ]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["y"], name="add")]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                       [BATCH, FEATURES])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [BATCH, CLASSES])],
        init, "classifier")


def dataset(count, seed):
    """Separable-ish clusters: labels from a fixed random linear map."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, FEATURES)).astype(np.float32)
    w = rng.standard_normal((FEATURES, CLASSES))
    y = np.argmax(x.astype(np.float64) @ w, axis=1).astype(np.int64)
    return x, y


@pytest.fixture(scope="module")
def classifier_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("train") / "classifier.onnx"
    path.write_bytes(make_classifier().SerializeToString())
    return path


@pytest.fixture(scope="module")
def sgd_artifact(classifier_file):
    return kiln.compile_training(classifier_file, loss="cross_entropy",
                                 labels=f"labels:{BATCH}:int64",
                                 optimizer="sgd", lr=0.5)


def kiln_train():
    path = Path(kiln.kilnc_path()).parent / "kiln-train"
    if not path.is_file():
        pytest.skip(f"{path}: no kiln-train next to kilnc")
    return str(path)


def test_one_sgd_step_matches_numpy(sgd_artifact):
    model = make_classifier()
    w = numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)
    b = numpy_helper.to_array(model.graph.initializer[1]).astype(np.float64)
    x, y = dataset(BATCH, seed=5)

    # The reference: mean cross-entropy of softmax(xW + b) and one SGD step,
    # in float64.
    logits = x.astype(np.float64) @ w + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(p[np.arange(BATCH), y]))
    d_logits = p.copy()
    d_logits[np.arange(BATCH), y] -= 1
    d_logits /= BATCH
    w_next = w - 0.5 * (x.astype(np.float64).T @ d_logits)
    b_next = b - 0.5 * d_logits.sum(axis=0)

    trainer = kiln.Trainer(sgd_artifact, device="emu")
    assert trainer.step_count == 0
    got = trainer.step({"x": x, "labels": y})
    assert trainer.step_count == 1
    # fp32 over sums of 8 and 6 terms of O(1) values: a few ulp of 1e-7
    # each; 1e-5 relative leaves a wide margin yet catches any wrong term.
    assert got == pytest.approx(loss, rel=1e-5)
    weights = trainer.weights()
    # Per element 1e-6 + 1e-5 |want| (an absolute atol: the weights are
    # O(0.1-1)), and 1e-5 on the norm (scripts/numerics.py).
    step = numerics.Tolerance(norm=1e-5, rtol=1e-5, atol_rms=0.0, atol=1e-6)
    assert_close(weights["W"], w_next, step, "W")
    assert_close(weights["b"], b_next, step, "b")
    assert set(trainer.state_names) >= {"params", "opt.step"}


def test_fit_is_kiln_train(tmp_path, sgd_artifact):
    x, y = dataset(50, seed=7)   # 6 batches of 8, 2 samples left over
    xv, yv = dataset(13, seed=8)
    for name, value in {"x": x, "y": y, "xv": xv, "yv": yv}.items():
        np.save(tmp_path / f"{name}.npy", value)
    artifact_path = tmp_path / "model.train.kiln"
    sgd_artifact.save(artifact_path)

    # kiln-train, 2 epochs straight.
    subprocess.run([kiln_train(), str(artifact_path), "--data",
                    str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
                    "--val-data", str(tmp_path / "xv.npy"), "--val-labels",
                    str(tmp_path / "yv.npy"), "--epochs", "2", "--seed", "3",
                    "--device", "emu", "--quiet", "--checkpoint-dir",
                    str(tmp_path / "cli")], check=True)

    # kiln.Trainer, 2 epochs straight: the same weights bit for bit and
    # the same history file.
    trainer = kiln.Trainer(artifact_path, device="emu")
    seen = []
    history = trainer.fit(x, y, epochs=2, seed=3, val_data=xv, val_labels=yv,
                          checkpoint_dir=tmp_path / "py",
                          callback=lambda e, s, loss: seen.append((e, s)))
    assert seen == [(e, s) for e in range(2) for s in range(6)]
    assert len(history.step_loss) == 12 and len(history.epoch_loss) == 2
    assert history.metric == "val_accuracy"
    assert history.csv == (tmp_path / "cli" / "loss.csv").read_text()
    cli = kiln.Trainer(artifact_path, device="emu")
    meta = cli.load_checkpoint(tmp_path / "cli" / "checkpoint.safetensors")
    assert meta["kiln-train.epochs_done"] == "2"
    for name, value in trainer.weights().items():
        np.testing.assert_array_equal(value, cli.weights()[name], err_msg=name)

    # The validation metric is eval's argmax accuracy, recomputed here.
    logits = np.concatenate([
        trainer.evaluate({"x": np.resize(xv[i:i + BATCH], (BATCH, FEATURES))})
        ["y"][:min(BATCH, 13 - i)] for i in range(0, 13, BATCH)])
    assert history.metric_values[-1] == pytest.approx(
        np.mean(np.argmax(logits, axis=1) == yv))

    # One epoch in Python, resumed by kiln-train to two: the same weights.
    half = kiln.Trainer(artifact_path, device="emu")
    half.fit(x, y, epochs=1, seed=3, val_data=xv, val_labels=yv,
             checkpoint_dir=tmp_path / "mixed")
    subprocess.run([kiln_train(), str(artifact_path), "--data",
                    str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
                    "--val-data", str(tmp_path / "xv.npy"), "--val-labels",
                    str(tmp_path / "yv.npy"), "--epochs", "2", "--seed", "3",
                    "--device", "emu", "--quiet", "--resume",
                    "--checkpoint-dir", str(tmp_path / "mixed")], check=True)
    resumed = kiln.Trainer(artifact_path, device="emu")
    resumed.load_checkpoint(tmp_path / "mixed" / "checkpoint.safetensors")
    for name, value in trainer.weights().items():
        np.testing.assert_array_equal(value, resumed.weights()[name],
                                      err_msg=name)
    assert (tmp_path / "mixed" / "loss.csv").read_text() == history.csv


def test_fit_runs_the_last_smaller_batch(tmp_path, classifier_file):
    """kilnc --train --dim N=1..8: an epoch of 21 samples is three steps,
    batches of 8, 8 and 5, each the mean loss over its own samples and an
    SGD step on its gradient (numpy float64, in the order kiln-train
    shuffles the samples), and kiln-train runs the same three steps."""
    artifact = kiln.compile_training(
        classifier_file, loss="cross_entropy", labels="labels:N:int64",
        shapes={"x": "Nx6"}, dims={"N": (1, BATCH)}, optimizer="sgd", lr=0.5)
    x, y = dataset(21, seed=9)
    trainer = kiln.Trainer(artifact, device="emu")
    history = trainer.fit(x, y, epochs=1, seed=4)
    assert len(history.step_loss) == 3

    model = make_classifier()
    w = numpy_helper.to_array(model.graph.initializer[0]).astype(np.float64)
    b = numpy_helper.to_array(model.graph.initializer[1]).astype(np.float64)
    order = np.asarray(kiln._native.epoch_order(21, 4, 0))
    losses = []
    for first, size in ((0, 8), (8, 8), (16, 5)):
        idx = order[first:first + size]
        xb, yb = x[idx].astype(np.float64), y[idx]
        logits = xb @ w + b
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        losses.append(-np.mean(np.log(p[np.arange(size), yb])))
        d = p.copy()
        d[np.arange(size), yb] -= 1
        d /= size  # the mean over the batch given, not over 8
        w, b = w - 0.5 * (xb.T @ d), b - 0.5 * d.sum(axis=0)
    # As in test_one_sgd_step_matches_numpy: fp32 sums of a few terms.
    np.testing.assert_allclose(history.step_loss, losses, rtol=1e-5)
    step = numerics.Tolerance(norm=1e-5, rtol=1e-5, atol_rms=0.0, atol=1e-6)
    assert_close(trainer.weights()["W"], w, step, "W")
    assert_close(trainer.weights()["b"], b, step, "b")

    # kiln-train's loop: the same three steps, the same weights.
    artifact_path = tmp_path / "model.train.kiln"
    artifact.save(artifact_path)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    subprocess.run([kiln_train(), str(artifact_path), "--data",
                    str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"),
                    "--seed", "4", "--device", "emu", "--quiet",
                    "--checkpoint-dir", str(tmp_path / "cli")], check=True)
    assert (tmp_path / "cli" / "loss.csv").read_text() == history.csv
    cli = kiln.Trainer(artifact_path, device="emu")
    cli.load_checkpoint(tmp_path / "cli" / "checkpoint.safetensors")
    for name, value in trainer.weights().items():
        np.testing.assert_array_equal(value, cli.weights()[name], err_msg=name)


def test_fp16_loss_scaling_is_kiln_train(tmp_path, classifier_file):
    """fp16 training with dynamic loss scaling from a scale so large that
    the first steps overflow: Trainer.fit skips the same steps and halves
    the scale as kiln-train does, and ends at the same weights."""
    artifact = kiln.compile_training(
        classifier_file, loss="cross_entropy", labels=f"labels:{BATCH}:int64",
        optimizer="sgd", lr=0.5, precision="fp16",
        extra_args=["--loss-scale-init=1e30", "--loss-scale-growth-interval=3"])
    path = tmp_path / "fp16.train.kiln"
    artifact.save(path)
    x, y = dataset(48, seed=9)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    subprocess.run([kiln_train(), str(path), "--data", str(tmp_path / "x.npy"),
                    "--labels", str(tmp_path / "y.npy"), "--epochs", "2",
                    "--device", "emu", "--quiet", "--checkpoint-dir",
                    str(tmp_path / "cli")], check=True)
    trainer = kiln.Trainer(path, device="emu")
    history = trainer.fit(x, y, epochs=2)
    # 1e30 overflows fp16's range at once: the first steps are skipped.
    assert history.skipped_steps >= 1
    assert history.loss_scale[0] < 1e30
    assert history.csv == (tmp_path / "cli" / "loss.csv").read_text()
    cli = kiln.Trainer(path, device="emu")
    cli.load_checkpoint(tmp_path / "cli" / "checkpoint.safetensors")
    for name, value in trainer.weights().items():
        np.testing.assert_array_equal(value, cli.weights()[name], err_msg=name)


def test_training_learns_and_exports(tmp_path, classifier_file):
    artifact = kiln.compile_training(classifier_file, loss="cross_entropy",
                                     labels=f"labels:{BATCH}:int64",
                                     optimizer="adamw", lr=0.05,
                                     weight_decay=0.01)
    x, y = dataset(200, seed=11)
    trainer = kiln.Trainer(artifact, device="emu")
    history = trainer.fit(x, y, epochs=6, val_data=x[:64], val_labels=y[:64])
    # A linear map labels the data, so a linear classifier learns it.
    assert history.epoch_loss[-1] < 0.5 * history.epoch_loss[0]
    assert history.metric_values[-1] >= 0.85
    trainer.export(tmp_path / "trained.onnx", onnx_model=classifier_file)
    import onnx
    trained = onnx.load(tmp_path / "trained.onnx")
    batch = x[:BATCH]
    ours = trainer.evaluate({"x": batch})["y"]
    theirs = reference(trained, {"x": batch})["y"]
    # The same fp32 weights and a 6-term dot product: ulp-level agreement.
    assert_close(ours, theirs, numerics.Tolerance(
        norm=1e-5, rtol=1e-5, atol_rms=0.0, atol=1e-5), "y")


def test_errors(tmp_path, sgd_artifact, mlp_artifact, mlp_model,
                classifier_file):
    trainer = kiln.Trainer(sgd_artifact, device="emu")
    x, y = dataset(16, seed=1)
    with pytest.raises(kiln.RuntimeError, match="labels: the labels have shape"):
        trainer.fit(x, y[:, None])
    with pytest.raises(kiln.RuntimeError, match="out of range"):
        trainer.fit(x, np.full(16, CLASSES, np.int64))
    bad = x.copy()
    bad[3, 2] = np.nan
    with pytest.raises(kiln.RuntimeError, match="must be finite"):
        trainer.fit(bad, y)
    with pytest.raises(kiln.RuntimeError, match="fewer than one batch"):
        trainer.fit(x[:5], y[:5])
    with pytest.raises(kiln.RuntimeError, match="labels are f32"):
        trainer.fit(x, y.astype(np.float32))
    with pytest.raises(kiln.RuntimeError, match="no checkpoint to resume"):
        trainer.fit(x, y, checkpoint_dir=tmp_path / "none", resume=True)
    with pytest.raises(kiln.RuntimeError, match="go together"):
        trainer.fit(x, y, val_data=x)
    with pytest.raises(kiln.RuntimeError, match="no 'train_step' entry point"):
        kiln.Trainer(mlp_artifact, device="emu")
    with pytest.raises(kiln.RuntimeError,
                       match="collective_engine 'gloo' is not auto, mpi or "
                             "nccl"):
        kiln.Trainer(sgd_artifact, device="emu", collective_engine="gloo")
    with pytest.raises(kiln.RuntimeError,
                       match="collective_engine 'nccl' reduces GPU memory: "
                             "device 'emu' uses the MPI engine"):
        kiln.Trainer(sgd_artifact, device="emu", collective_engine="nccl")
    with pytest.raises(kiln.CompileError, match="exactly one of loss"):
        kiln.compile_training(classifier_file)
    with pytest.raises(kiln.CompileError, match="optimizer 'lion'"):
        kiln.compile_training(classifier_file, loss="mse", optimizer="lion")
    with pytest.raises(kiln.CompileError):
        kiln.compile_training(classifier_file, loss="cross_entropy",
                              labels="labels:3:int64")  # wrong batch
    # A checkpoint of another model is refused and the state is unchanged.
    other = tmp_path / "other.safetensors"
    kiln.Trainer(kiln.compile_training(
        mlp_model, loss="mse", labels="labels:4x8:float32",
        shapes={"x": (4, 16)}), device="emu").save_checkpoint(other)
    before = trainer.weights()
    with pytest.raises(kiln.RuntimeError, match="other.safetensors"):
        trainer.load_checkpoint(other)
    for name, value in trainer.weights().items():
        np.testing.assert_array_equal(value, before[name])
