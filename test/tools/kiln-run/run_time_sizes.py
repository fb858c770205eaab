#!/usr/bin/env python3
"""One artifact, any size in a declared range (issue 24, run-time sizes).

Usage: run_time_sizes.py WORKDIR --kilnc KILNC --kiln-run KILN_RUN
                         [--only NAME ...]

Each model is compiled once with `kilnc --dim N=MIN..MAX`, then run on emu
at several sizes of N with kiln-run (-i files of that size; the runtime pads
them to the compiled maximum and slices the outputs). Each output is
compared element by element with onnxruntime (CPU, every graph
optimization off) on the same inputs at the same size (encoder512, compiled
with --precision=bf16, by scripts/numerics.py's bf16 rule instead):

    |kiln - ort| <= 1e-4 + 1e-4 * |ort|

The bound is fp32's: both sides compute in fp32 but sum in different orders
(Kiln's tiled GEMM and convolution, ORT's MLAS), which moves a result by a
few ulps of the largest partial sum; these models' sums have at most 128
terms of magnitude <= 1, so a correct result is within ~1e-5 and a wrong row
(a padded row leaking in, a slice at the wrong offset) is off by O(0.1).

Models:
  mlp      MatMul+Add+Relu, MatMul+Add: x [N, 16] -> y [N, 8]
  cnn      Conv+Relu, MaxPool, GlobalAveragePool, Flatten, Gemm:
           x [N, 3, 8, 8] -> y [N, 10]
  encoder  test/Frontend/ONNX/models/make_encoder.py --dynamic-batch:
           input_ids [batch, 16] -> hidden_states [batch, 16, 64]
  encoder-seq  the same layer with --dynamic-seq --mean-pool --batch 2:
           input_ids [2, seq] -> hidden_states [2, seq, 64] and pooled
           [2, 64] (their mean over seq), seq in 1..16 (size masks: -inf on
           attention's softmax, a keep mask and a max / n scale on the
           mean)
and, with --only (launch-scaling.test), at N = 1, 7 and 64 of 1..64:
  cnn64    the cnn
  wide64   two 3x3 convolutions (3 -> 16 -> 32 channels), then the cnn's tail
  seq64    MatMul+Add+Relu, MatMul on x [N, 16, 32] -> y [N, 16, 8] (the GEMM
           template with M = N*16 rows)
  splitk16 MatMul x [N, 16, 512] @ w [512, 256], N in 1..16 at 1, 7, 16: the
           SIMT GEMM template with split-K 8 and its per-tile semaphores
  pair64   y = relu(x + z) [N, 4] and t = transpose(x + z) [4, N]
Prints one line per (model, size) and a final count; exits 1 on a failure.
"""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "scripts"))
import numerics  # noqa: E402
ENCODER = os.path.join(HERE, "..", "..", "Frontend", "ONNX", "models", "make_encoder.py")


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-test")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def make_mlp(path):
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (16, 32)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (32,)).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (32, 8)).astype(np.float32), "w2"),
        numpy_helper.from_array(rng.uniform(-0.5, 0.5, (8,)).astype(np.float32), "b2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="fc2"),
        helper.make_node("Add", ["h3", "b2"], ["y"], name="fc2_bias"),
    ]
    save(helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], inits), path)


def make_cnn(path):
    rng = np.random.default_rng(2)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (8, 3, 3, 3)).astype(np.float32), "cw"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (8,)).astype(np.float32), "cb"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (10, 8)).astype(np.float32), "fw"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (10,)).astype(np.float32), "fb"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    save(helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits), path)


def make_wide_cnn(path):
    # Convolutions wide enough for the implicit-GEMM template (M = N*8*8
    # pixel rows tiled along grid.x), then the cnn's tail.
    rng = np.random.default_rng(3)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (16, 3, 3, 3)).astype(np.float32), "c1w"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (16,)).astype(np.float32), "c1b"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, (32, 16, 3, 3)).astype(np.float32), "c2w"),
        numpy_helper.from_array(rng.uniform(-0.1, 0.1, (32,)).astype(np.float32), "c2b"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (10, 32)).astype(np.float32), "fw"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (10,)).astype(np.float32), "fb"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1w", "c1b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "c2w", "c2b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1),
    ]
    save(helper.make_graph(
        nodes, "wide_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits), path)


def make_seq_mlp(path):
    # MatMuls on [N, 16, 32]: the GEMM template's M = N*16 rows, 64 a
    # block along grid.x, so N = 7 needs 2 of 16 blocks.
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (32, 48)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (48,)).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.uniform(-0.3, 0.3, (48, 8)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["y"], name="fc2"),
    ]
    save(helper.make_graph(
        nodes, "seq_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 8])], inits), path)


def make_split_k(path):
    # One MatMul x [N, 16, 512] @ w [512, 256]: the SIMT GEMM template with
    # split-K 8 (its per-tile semaphores), M = N*16 rows along grid.x.
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(
        rng.uniform(-0.1, 0.1, (512, 256)).astype(np.float32), "w")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")]
    save(helper.make_graph(
        nodes, "split_k",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 256])], inits), path)


def make_pair(path):
    # test/tools/kiln-run/run-time-sizes.test's pair: y = relu(x + z) and
    # its transpose t [4, N], whose kernel has N on its inner loop.
    nodes = [
        helper.make_node("Add", ["x", "z"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
        helper.make_node("Transpose", ["s"], ["t"], name="transpose", perm=[1, 0]),
    ]
    save(helper.make_graph(
        nodes, "pair",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, "N"])], []), path)


def make_encoder(path):
    subprocess.run([sys.executable, ENCODER, path, "--dynamic-batch", "--hidden", "64",
                    "--heads", "2", "--ffn", "128", "--seq", "16", "--vocab", "50"],
                   check=True)


def make_encoder_seq(path):
    subprocess.run([sys.executable, ENCODER, path, "--dynamic-seq", "--mean-pool", "--batch", "2",
                    "--hidden", "64", "--heads", "2", "--ffn", "128", "--seq", "16",
                    "--vocab", "50"], check=True)


def make_encoder_seq512(path):
    subprocess.run([sys.executable, ENCODER, path, "--dynamic-seq", "--mean-pool",
                    "--hidden", "256", "--heads", "4", "--ffn", "1024", "--seq", "512",
                    "--vocab", "1000"], check=True)


# Models compiled with other kilnc flags, and compared by scripts/numerics.py's
# rule for that precision instead of the fp32 bound above.
PRECISION = {"encoder512": "bf16"}


# name: (builder, --dim, sizes, input maker)
MODELS = {
    "mlp": (make_mlp, "N=1..16", [1, 5, 16],
            lambda rng, n: {"x": rng.uniform(-1, 1, (n, 16)).astype(np.float32)}),
    "cnn": (make_cnn, "N=1..16", [1, 5, 16],
            lambda rng, n: {"x": rng.uniform(-1, 1, (n, 3, 8, 8)).astype(np.float32)}),
    "encoder": (make_encoder, "batch=1..4", [1, 3, 4],
                lambda rng, n: {"input_ids": rng.integers(0, 50, (n, 16)).astype(np.int64)}),
    # Sequence length: attention's softmax masked at the padded positions.
    "encoder-seq": (make_encoder_seq, "seq=1..16", [1, 5, 16],
                    lambda rng, n: {"input_ids": rng.integers(0, 50, (2, n)).astype(np.int64)}),
    # The encoder layer at BERT-base's sequence length, in bf16 on the
    # tensor-core kernels (wgmma GEMMs and flash attention), one compile for
    # seq in 1..512, run at 1, 77 and 512 (issue 24's done-when): only with
    # --only (run-time-sizes-encoder512.test).
    "encoder512": (make_encoder_seq512, "seq=1..512", [1, 77, 512],
                   lambda rng, n: {"input_ids": rng.integers(0, 1000, (1, n)).astype(np.int64)}),
    # Launch scaling (launch-scaling.test): run only with --only.
    "cnn64": (make_cnn, "N=1..64", [1, 7, 64],
              lambda rng, n: {"x": rng.uniform(-1, 1, (n, 3, 8, 8)).astype(np.float32)}),
    "wide64": (make_wide_cnn, "N=1..64", [1, 7, 64],
               lambda rng, n: {"x": rng.uniform(-1, 1, (n, 3, 8, 8)).astype(np.float32)}),
    "seq64": (make_seq_mlp, "N=1..64", [1, 7, 64],
              lambda rng, n: {"x": rng.uniform(-1, 1, (n, 16, 32)).astype(np.float32)}),
    "splitk16": (make_split_k, "N=1..16", [1, 7, 16],
                 lambda rng, n: {"x": rng.uniform(-1, 1, (n, 16, 512)).astype(np.float32)}),
    "pair64": (make_pair, "N=1..64", [1, 7, 64],
               lambda rng, n: {"x": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
                               "z": rng.uniform(-1, 1, (n, 4)).astype(np.float32)}),
}
OPT_IN = {"cnn64", "wide64", "seq64", "splitk16", "pair64", "encoder512"}


def ort_outputs(model, feeds):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    runs = failures = 0
    for name, (build, dim, sizes, inputs) in MODELS.items():
        if (args.only and name not in args.only) or (not args.only and name in OPT_IN):
            continue
        model = os.path.join(args.workdir, name + ".onnx")
        artifact = os.path.join(args.workdir, name + ".kiln")
        build(model)
        precision = PRECISION.get(name, "fp32")
        flags = [] if precision == "fp32" else [f"--precision={precision}"]
        subprocess.run([args.kilnc, model, "--dim", dim, "-o", artifact] + flags, check=True)
        rng = np.random.default_rng(7)
        for n in sizes:
            feeds = inputs(rng, n)
            run_dir = os.path.join(args.workdir, f"{name}-{n}")
            os.makedirs(run_dir, exist_ok=True)
            command = [args.kiln_run, artifact, "--device", "emu", "-o", run_dir]
            for input_name, value in feeds.items():
                path = os.path.join(run_dir, "in-" + input_name + ".npy")
                np.save(path, value)
                command += ["-i", f"{input_name}={path}"]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            expected = ort_outputs(model, feeds)
            for out_name, want in expected.items():
                got = np.load(os.path.join(run_dir, out_name + ".npy"))
                runs += 1
                if got.shape != want.shape:
                    failures += 1
                    print(f"{name} {dim.split('=')[0]}={n} {out_name}: FAIL shape "
                          f"{got.shape}, onnxruntime {want.shape}")
                    continue
                err = np.abs(got.astype(np.float64) - want.astype(np.float64))
                if precision == "fp32":
                    bound = 1e-4 + 1e-4 * np.abs(want.astype(np.float64))
                    bad = int(np.count_nonzero(err > bound))
                else:
                    result = numerics.compare(got, want, precision, out_name)
                    bad = 0 if result.ok else max(1, result.elements_over)
                verdict = "ok" if bad == 0 else f"FAIL ({bad} elements over the bound)"
                if precision != "fp32":
                    verdict = f"({precision}: {result.figures()}) " + verdict
                failures += bad != 0
                print(f"{name} {dim.split('=')[0]}={n} {out_name}: shape "
                      f"{'x'.join(map(str, got.shape))} max-abs-err {err.max():.2e} {verdict}")
    print(f"{runs} runs, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
