#!/usr/bin/env python3
"""Random-graph differential test of training steps: kilnc --train +
kiln-train --device emu against the same step in JAX (float64).

Usage:
  train_fuzz.py [--seed S] [--count N] [--jobs J] [--modes LIST]
                [--failures DIR] [--keep DIR] [--kilnc PATH] [--kiln-train PATH]
                [--strict] [--print-graph] [--verbose] [--focus windows]
  train_fuzz.py --minimize --seed S [--modes M]        # one generated model
  train_fuzz.py [--minimize] --model M.onnx [--modes M] # a saved model
  train_fuzz.py --repros test/e2e/train-fuzz-repros      # saved reproducers

Each seed S, S+1, ..., S+N-1 gives one random differentiable ONNX graph,
made by fusion_fuzz.py's generator restricted to the ops kiln-autodiff
differentiates (docs/passes.md, kiln-autodiff): Gather and GatherElements
with constant indices (negative ones included), embedding Gather from a
weight, Slice, Pad (constant, reflect, edge), Concat, Split, Expand, Tile,
Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Add/Sub/Mul/Min/Max with
broadcasting, Relu/Sigmoid/Tanh/Neg, MatMul, Gemm, Conv (1-D and 2-D,
groups, strides, dilations, pads), side-by-side MatMuls, MatMul into
Softmax, ReduceSum/ReduceMean, Softmax/LogSoftmax and LayerNormalization;
and, only in graphs whose input is an image [B, C, H, W] or a signal
[B, C, L] (so that the flat and sequence graphs of a seed are what they
were before these were added), fuzz_ops_pool_norm.py's windows and norms:
MaxPool and AveragePool (1-D and 2-D; explicit pads, auto_pad, strides,
MaxPool's dilations, ceil_mode, count_include_pad), GlobalAveragePool,
GlobalMaxPool, InstanceNormalization and BatchNormalization (over at
least two elements per channel). kiln-autodiff trains BatchNormalization
with the batch's statistics (ONNX training_mode=1): its running mean and
variance are state, not weights, and are updated by the step. `--focus
windows` draws only image and signal inputs (other seeds' graphs).
The graph has one float input x [B, ...] (kiln-train's --data) and one
output of shape [B, ...] (the one the loss reads, chosen as the value with
the most nodes behind it that depends on x); every float initializer is a
trainable weight (kilnc --train makes them all trainable) but a batch
norm's running statistics. The loss is
`cross_entropy` (integer labels over dimension 1, when the output has rank
>= 2 and at least two classes; half the time) or `mse` against a N(0, 1)
target; the loss kind is stored in the model (metadata `train_fuzz.loss`),
so a saved model reproduces alone.

Modes (--modes, comma-separated; default `rotate`): OPT, OPT-bf16 or
OPT-fp16, with OPT one of sgd (lr 0.1), momentum (lr 0.1, momentum 0.9),
nesterov (lr 0.1, momentum 0.9, weight decay 0.01: L2, added to the
gradient), adam (lr 0.01, weight decay 0.1 as L2, betas 0.9/0.999, eps
1e-8) and adamw (the same with decoupled weight decay); -bf16 adds
`--precision=bf16` (mixed precision: bf16 contraction operands forward and
backward, fp32 master weights, moments and update; docs/runtime.md), -fp16
`--precision=fp16 --loss-scale=dynamic --loss-scale-init=S` (the same in
fp16, the backward seeded with the loss scale S; see below). `rotate`
picks ROTATION[S % 15] = sgd, adamw, sgd-bf16, adamw-bf16, momentum,
momentum-bf16, nesterov, adam, nesterov-bf16, adam-bf16, sgd-fp16,
adamw-fp16, momentum-fp16, nesterov-fp16, adam-fp16, so any 15
consecutive seeds cover every mode.

Kiln side: `kilnc --train --loss=L --labels=fuzz_labels:SHAPE:DTYPE
--optimizer=...` then one `kiln-train` epoch over exactly one batch (N = B)
on emu with a checkpoint: the loss of the step comes from the history CSV,
the weights after the step and the optimizer moments from the checkpoint.

Reference side: onnx_jax.py evaluates the graph in jax.numpy from the ONNX
operator definitions, jax.value_and_grad gives the loss L and every
weight's gradient g in float64, and the optimizer's first step is applied
in float64 as PyTorch documents it (sgd: w - lr g; momentum: buf = g,
w - lr buf; nesterov: s = g + wd w, buf = s, w - lr (s + mu buf); adam:
s = g + wd w, then Adam with bias correction, so the first step is
lr s / (|s| + eps), m = (1 - b1) s, v = (1 - b2) s^2; adamw: w (1 - lr
wd), then Adam on g). A batch norm's running statistic r becomes
momentum r + (1 - momentum) times the batch's (mean, biased variance).
The JAX forward is checked against onnxruntime (fp32, graph optimizations
off) first, with BatchNormalization in inference form there (running
statistics, on both sides): a disagreement is a harness error, never
blamed on Kiln.

Comparison (scripts/numerics.py's rule, B the precision's norm bound:
fp32 1e-4, bf16 2e-2; see fusion_fuzz.py for why), element by element:
- the gradient Kiln used is bounded per element, as fusion_fuzz.py bounds
  an output: e_i = 6 B rms(g) + B |g_i| + s_i + B f, with f = 1e-2 times
  the backward's scale G (the error floor: a gradient that is exactly 0 in
  float64, such as a bias the loss's softmax ignores, comes out as
  rounding noise of that scale; G is the largest gradient element of the
  model, or max |dL/dy| max(1, max |y|) when larger) and s_i = 2 (u_P / p) D_i, D_i the
  largest change of g_i over PERTURB_DRAWS = 4 JAX runs in which every
  input, weight and node result is multiplied by 1 + p N(0, 1) and every
  node result's cotangent too (rounding in the forward and the backward);
  p = 1e-3 in fp32 (as fusion_fuzz), p = u_bf16 = 2^-8 in bf16 and
  u_fp16 = 2^-11 in fp16, so a relu, max or min that the low precision's
  rounding can flip flips in the draws as well;
- the loss: |a - b| <= 7 B |b| + 2 (u_P / p) D_L (the rule for a scalar);
- each weight after the step: the gradient bound carried through the
  update exactly: sgd and momentum lr e_i, nesterov lr (1 + mu) e_i; adam
  and adamw the largest change of lr s / (|s| + eps) over s in [s_i - e_i,
  s_i + e_i] (so a gradient that is zero within its bound may take a full
  step of either sign, as Adam does with rounding noise: the worst ratio
  of such an element is about 1 whatever kiln's error, and its m is the
  sharp check); plus ROUND = 8 fp32 roundings of the update
  (8 u_fp32 (|w| + lr |step|), and of the decay term);
- the moments: momentum's and nesterov's buffer (= s) e_i; adam's and
  adamw's m = (1 - b1) s within (1 - b1) e_i and v = (1 - b2) s^2 within
  (1 - b2) ((|s_i| + e_i)^2 - s_i^2), each plus ROUND fp32 roundings;
- each batch norm's running mean and variance: (1 - momentum) times the
  batch statistic's bound, which is an output's (6 B rms + B |v| + s_i,
  s_i from the same perturbation draws) plus the floor B 1e-2 m (mean)
  or B 1e-2 m^2 (variance), m the largest |x| the norm reads; plus ROUND
  fp32 roundings.

fp16 and the loss scale: a first step whose scaled gradient overflows is
skipped by design (docs/runtime.md: weights, moments and opt.step stay,
the scale halves; the running statistics still update). The reference
predicts it from M, the largest |dL/dv| in float64 over the results v of
the active MatMul/Gemm/Conv nodes (dL/dv times S is an fp16 operand of
their backward contractions; M' also over AveragePool results, whose
backward is a transposed convolution): the step must be skipped when
M S > 2 FP16_MAX, must be taken when M' S < FP16_MAX / 2, and either is
accepted in between. S is GradScaler's 65536 for a third of the models
(by seed) and otherwise the power of two that puts M S in [2, 4)
FP16_MAX (a skip) or in [1/8, 1/4) FP16_MAX (a taken step at a scale near
overflow), so both paths run. The checkpoint's loss scale state tells what
kiln did (S / 2 and 0 good steps: skipped; S and 1: taken; anything else
fails); a skipped step must leave every weight bit-identical, the moments
and the step counter zero; a taken one is compared as above. The summary
counts the fp16 steps taken and skipped.

Outcomes per (model, mode): pass; unsupported (kilnc exits 1 with one line
saying 'not supported'/'unsupported': counted, a failure with --strict);
fail: a kilnc crash, any other kilnc or kiln-train error, a missing value
or one over its bound. A failure prints the seed, the mode, the numbers and
the graph, and saves model.onnx (with its loss) and report.txt under
--failures DIR/seed<S>-<mode>/. `--minimize` shrinks one failing model
greedily while the same failure persists (same mode, same class): the
output's producer goes and one of its operands of shape [B, ...] becomes the
output; a node's results become trainable weights (N(0, 1)), and what only
fed it disappears; a node is bypassed (its users read an operand of the
same shape). The reduced model is saved under DIR/minimized/.

The float64 reference and the bounds live in train_fuzz_reference.py.

Exit status 0 when nothing failed. The last line reads 'train-fuzz: N
models, M runs: P pass, U unsupported, F fail, G generator errors (T s)'.
A failure's class names what disagreed: loss, weights, moments, running
stats or skip decision (fp16).
"""
import argparse
import collections
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.helper as oh  # noqa: E402
import onnx.numpy_helper as onh  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "training"),
                os.path.join(HERE, "..", "..", "scripts")]
import fusion_fuzz as ff  # noqa: E402
from fuzz_campaign import Campaign, check_repros  # noqa: E402
import numerics  # noqa: E402
import onnx_jax  # noqa: E402
from whole_step import read_safetensors  # noqa: E402

from train_fuzz_reference import (  # noqa: E402
    ALLOWANCE, FP16_MAX, FP16_SCALE, LABELS, LOSS_KEY, OPTIMIZERS, PERTURB,
    ROTATION, SKIP_BAND, check_reference, expected_step, reference,
    scaled_cotangents)

FP16_STEPS = collections.Counter()  # fp16 first steps: 'skipped', 'taken'
FP16_LOCK = threading.Lock()


def parse_mode(name):
    """(optimizer, precision) of a mode name; ValueError when unknown."""
    opt, _, prec = name.partition("-")
    prec = prec or "fp32"
    if opt not in OPTIMIZERS or prec not in PERTURB:
        raise ValueError(f"unknown mode '{name}' (OPT, OPT-bf16 or OPT-fp16, OPT one of "
                         f"{', '.join(OPTIMIZERS)})")
    return opt, prec


def modes_for(seed, spec):
    out = []
    for name in spec:
        name = ROTATION[seed % len(ROTATION)] if name == "rotate" else name
        if name not in out:
            out.append(name)
    return out


# --- The generator ------------------------------------------------------------


class TrainBuilder(ff.Builder):
    """fusion_fuzz's generator, restricted to differentiable ops, with one
    batch-major float input; indices are constants (kiln-train binds only
    the data and the labels)."""

    OPS = [(name, w) for name, w in ff.Builder.OPS if name in {
        "op_gather", "op_slice", "op_pad", "op_concat", "op_split",
        "op_expand", "op_tile", "op_transpose", "op_reshape", "op_flatten",
        "op_squeeze", "op_unsqueeze", "op_binary", "op_unary", "op_matmul",
        "op_gemm", "op_conv", "op_reduce", "op_softmax", "op_layernorm",
        "op_embedding", "op_twin_matmul", "op_attention",
        "op_gather_elements"}]
    # Windows and norms (fuzz_ops_pool_norm.py; kiln-autodiff's pool,
    # global_pool and norm rules), drawn only in graphs whose input is an
    # image or a signal, so that the flat and sequence graphs of a seed stay
    # what they were before these were added.
    WINDOW_OPS = [("op_maxpool", 2.0), ("op_avgpool", 2.0),
                  ("op_global_pool", 1.0), ("op_batchnorm", 1.0),
                  ("op_instancenorm", 1.0)]

    POOL_RANKS = (3, 4)  # fuzz_ops_pool_norm's pools, on [N, C, L] too

    def op_batchnorm(self):
        """fuzz_ops_pool_norm's BatchNormalization, on a value with at least
        two elements per channel: kiln-autodiff trains it with the batch's
        statistics, and a channel of one element has x - mean = 0 exactly."""
        return self.batchnorm_on(lambda v: v.rank >= 2 and v.shape[1] <= 64 and
                                 ff.nelems(v.shape) >= 2 * v.shape[1])
        return True

    def index_input(self, shape, dim):
        return self.const_i64(self.rng.integers(-dim, dim, size=shape), "j")

    def float_input(self, shape, prefix="x"):
        if self.inputs:  # a second "input" is a weight here
            return self.weight_value(shape, 1.0, "p")
        return super().float_input(shape, prefix)

    focus = None  # "windows": only image and signal inputs (--focus)

    def build(self):
        batch = self.choice([1, 2, 3, 4, 8], p=[1, 3, 2, 3, 1])
        if self.focus == "windows":
            form = self.choice(["image", "signal"], p=[2, 1])
        else:
            form = self.choice(["flat", "seq", "image", "signal"], p=[4, 3, 2, 1])
        if form == "flat":
            shape = (batch, self.choice([2, 3, 4, 6, 8, 16, 33]))
        elif form == "seq":
            shape = (batch, self.randint(1, 6), self.choice([2, 4, 5, 8]))
        elif form == "image":
            shape = (batch, self.randint(1, 4), self.randint(2, 6), self.randint(2, 6))
        else:
            shape = (batch, self.randint(1, 4), self.randint(3, 16))
        x = super().float_input(shape)
        target = self.randint(3, 12)
        ops = self.OPS + (self.WINDOW_OPS if form in ("image", "signal") else [])
        names = [n for n, _ in ops]
        weights = [w for _, w in ops]
        attempts = 0
        while len(self.nodes) < target and attempts < 200:
            attempts += 1
            getattr(self, self.choice(names, p=weights))()
        producer = {o: n for n in self.nodes for o in n.output}
        inits = {t.name for t in self.inits
                 if t.data_type == onnx.TensorProto.FLOAT}

        def cone(name, seen):
            if name in seen:
                return
            seen.add(name)
            node = producer.get(name)
            if node is not None:
                ins = list(node.input)
                if node.op_type == "LayerNormalization" and name != node.output[0]:
                    ins = ins[:1]  # Mean and InvStdDev ignore scale and bias
                if node.op_type == "BatchNormalization":
                    ins = ins[:3]  # batch statistics: the running ones unread
                for i in ins:
                    if i:
                        cone(i, seen)
        best = None
        for v in self.values:
            if v.name not in producer or v.rank == 0 or v.shape[0] != batch:
                continue
            seen = set()
            cone(v.name, seen)
            if x.name not in seen or not any(s in inits for s in seen):
                continue
            key = (sum(1 for s in seen if s in producer), len(seen))
            if best is None or key >= best[0]:
                best = (key, v)
        if best is None:
            return None
        out = best[1]
        loss = "mse"
        if out.rank >= 2 and out.shape[1] >= 2 and self.chance(0.5):
            loss = "cross_entropy"
        graph = oh.make_graph(
            self.nodes, "train_fuzz", self.inputs,
            [oh.make_tensor_value_info(out.name, onnx.TensorProto.FLOAT,
                                       list(out.shape))], self.inits)
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", ff.OPSET)])
        model.ir_version = 8
        set_loss(model, loss)
        model = ff.prune(model)
        return model if trainable(model) else None


def set_loss(model, loss):
    del model.metadata_props[:]
    oh.set_model_props(model, {LOSS_KEY: loss})


def get_loss(model):
    for p in model.metadata_props:
        if p.key == LOSS_KEY:
            return p.value
    return "mse"


def generate(seed, focus=None):
    """The seed's model (a few sub-seeds are tried until one has an output
    of shape [B, ...] that depends on x and a weight)."""
    for attempt in range(16):
        builder = TrainBuilder([seed, attempt])
        builder.focus = focus
        model = builder.build()
        if model is not None:
            ff.validate(model)
            return model
    raise ff.GeneratorError("no usable output in 16 attempts")


def trainable(model):
    """The weights kilnc --train trains, in the order of the flat `params`
    and moments: every float initializer (Importer.cpp) but the operands a
    handler reads as constants (a Pad's constant_value, Clip's bounds,
    Dropout's ratio) and a BatchNormalization's running mean and variance
    (state that the step updates), in the order the graph first reads
    them."""
    floats = {t.name for t in onnx_jax.float_params(model)}
    order, constants = [], set()
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name not in floats:
                continue
            if (node.op_type, i) in (("Pad", 2), ("Dropout", 1),
                                     ("BatchNormalization", 3),
                                     ("BatchNormalization", 4)) or \
                    node.op_type == "Clip":
                constants.add(name)
            elif name not in order:
                order.append(name)
    return [n for n in order if n not in constants]


class Case:
    """A model with its data: the input x, the labels, the loss."""

    def __init__(self, model, seed):
        self.model = model
        self.seed = seed
        self.loss = get_loss(model)
        g = model.graph
        inits = {t.name for t in g.initializer}
        ins = [v for v in g.input if v.name not in inits]
        if len(ins) != 1 or len(g.output) != 1:
            raise ff.GeneratorError("a training model has one input and one output")
        self.input = ins[0].name
        self.in_shape = tuple(d.dim_value for d in ins[0].type.tensor_type.shape.dim)
        self.output = g.output[0].name
        self.out_shape = tuple(d.dim_value for d in g.output[0].type.tensor_type.shape.dim)
        if not self.out_shape or self.out_shape[0] != self.in_shape[0]:
            raise ff.GeneratorError("the output's first dim is not the batch")
        rng = np.random.default_rng(seed + 2_000_003)
        self.x = rng.standard_normal(self.in_shape).astype(np.float32)
        if self.loss == "cross_entropy":
            lshape = self.out_shape[:1] + self.out_shape[2:]
            self.labels = rng.integers(0, self.out_shape[1], size=lshape).astype(np.int64)
            dtype = "int64"
        else:
            lshape = self.out_shape
            self.labels = rng.standard_normal(lshape).astype(np.float32)
            dtype = "f32"
        self.labels_flag = f"--labels={LABELS}:{'x'.join(map(str, lshape))}:{dtype}"
        self.weights = trainable(model)
        self.running = {n.input[i] for n in g.node
                        if n.op_type == "BatchNormalization" for i in (3, 4)}
        inits = {t.name: t for t in g.initializer}
        self.w0 = {n: onh.to_array(inits[n]).astype(np.float64)
                   for n in self.weights}
        self._refs = {}


# --- Running Kiln ---------------------------------------------------------------


def _mt19937_64(seed):
    """std::mt19937_64's outputs (the standard's constants)."""
    mask = (1 << 64) - 1
    lower = (1 << 31) - 1
    mt = [seed & mask] + [0] * 311
    for i in range(1, 312):
        mt[i] = (6364136223846793005 * (mt[i - 1] ^ (mt[i - 1] >> 62)) + i) & mask
    while True:
        for i in range(312):
            x = (mt[i] & ~lower & mask) | (mt[(i + 1) % 312] & lower)
            mt[i] = mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
        for y in mt:
            y ^= (y >> 29) & 0x5555555555555555
            y ^= (y << 17) & 0x71D67FFFEDA60000
            y ^= (y << 37) & 0xFFF7EEE000000000
            yield (y ^ (y >> 43)) & mask


def epoch_order(count, seed=0, epoch=0):
    """kiln-train's sample order (runtime/lib/Trainer.cpp, epochOrder): a
    Fisher-Yates shuffle with std::mt19937_64(seed * 1000003 + epoch).
    The graphs mix samples (a MatMul over the batch axis), so the harness
    writes the data file in the order that makes the one batch exactly x."""
    order = list(range(count))
    rng = _mt19937_64(seed * 1000003 + epoch)
    for i in range(count, 1, -1):
        j = next(rng) % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def save_batch(path, arr):
    """Writes arr so that kiln-train's first batch (seed 0, epoch 0) is arr."""
    stored = np.empty_like(arr)
    stored[epoch_order(arr.shape[0])] = arr
    np.save(path, stored)


def run_mode(case, model_path, mode, workdir, tools):
    """kilnc --train and one kiln-train step. Returns (status, detail,
    loss, tensors)."""
    opt, precision = parse_mode(mode)
    art = os.path.join(workdir, f"{mode}.train.kiln")
    flags = [f"--loss={case.loss}", case.labels_flag,
             f"--optimizer={OPTIMIZERS[opt][0]}"]
    if precision != "fp32":
        flags.append(f"--precision={precision}")
    if precision == "fp16":
        flags += ["--loss-scale=dynamic",
                  f"--loss-scale-init={fp16_scale(case):.0f}"]
    env = dict(os.environ)
    env["KILN_PTXAS"] = ""
    cmd = [tools.kilnc, model_path, "--train", "-o", art] + flags
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=tools.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"kilnc ran past {tools.timeout} s", None, None
    text = (run.stderr + run.stdout).strip()
    if run.returncode not in (0, 1) or any(m in text for m in ff.CRASH_MARKERS):
        how = (f"signal {-run.returncode}" if run.returncode < 0
               else f"exit {run.returncode}")
        return "crash", f"kilnc {how}: {ff.crash_signature(text)}", None, None
    if run.returncode != 0:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) == 1 and ff.UNSUPPORTED.search(lines[0]):
            return "unsupported", lines[0].replace(model_path, "MODEL"), None, None
        return ("compile-error", " | ".join(lines[:3]).replace(model_path, "MODEL")[:400],
                None, None)
    ck = os.path.join(workdir, f"{mode}.ck")
    shutil.rmtree(ck, ignore_errors=True)
    cmd = [tools.kiln_train, art, "--data", os.path.join(workdir, "x.npy"),
           "--labels", os.path.join(workdir, "labels.npy"), "--epochs", "1",
           "--device", "emu", "--quiet", "--checkpoint-dir", ck]
    env = dict(os.environ)
    env.setdefault("KILN_EMU_THREADS", "1")
    env.setdefault("KILN_EMU_CHECK_SHARED", "1")
    env.setdefault("KILN_EMU_RANDOM_BLOCKS", str(case.seed % 1000 + 1))
    env.setdefault("KILN_EMU_MAX_STEPS", "200000000")
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=tools.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"kiln-train ran past {tools.timeout} s", None, None
    if run.returncode != 0:
        lines = [ln for ln in (run.stderr + run.stdout).splitlines() if ln.strip()]
        how = f"signal {-run.returncode}: " if run.returncode < 0 else ""
        return "runtime-error", (how + " | ".join(lines[:3]))[:400], None, None
    try:
        with open(os.path.join(ck, "loss.csv")) as f:
            rows = list(csv.DictReader(f))
        loss = float(rows[0]["loss"])
        tensors = read_safetensors(os.path.join(ck, "checkpoint.safetensors"))
    except (OSError, KeyError, IndexError, ValueError, AssertionError) as e:
        return "runtime-error", f"reading the step's results: {e}", None, None
    return "ok", "", loss, tensors


class Result:
    def __init__(self, seed):
        self.seed = seed
        self.statuses = {}     # mode -> 'pass' | 'unsupported' | 'fail'
        self.details = {}
        self.signatures = {}
        self.ratios = []       # (worst per-element ratio, mode, what)
        self.generator_error = None
        self.ops = collections.Counter()


def compare_step(case, mode, loss, tensors):
    """[(what, ok, text, ratio)] for the loss, every weight and moment."""
    opt, precision = parse_mode(mode)
    ref = reference(case, precision)
    B = numerics.NORM_BOUND[precision]
    s = ALLOWANCE * numerics.UNIT_ROUNDOFF[precision] / PERTURB[precision]
    rows = []
    r = numerics.compare(np.float64(loss), np.float64(ref.loss), B, "loss",
                         s * ref.d_loss)
    rows.append(("loss", r))
    exact = numerics.Tolerance.elementwise(0.0, 0.0)
    # A weight whose float64 gradient is exactly zero everywhere may be
    # left out of training altogether (the importer drops what no output
    # reads: a LayerNormalization's scale when only InvStdDev is used).
    trained = [n for n in case.weights
               if n in tensors or np.any(ref.g[n] != 0)]
    expected = expected_step(case, ref, opt, precision, trained)
    if precision == "fp16":
        skip, problem, where = fp16_skip(case, tensors)
        rows.append(("kiln.state.loss_scale", (not problem, (
            problem or ("skipped" if skip else "taken")) + f" ({where})")))
        if skip:
            # A skipped step changes no weight, moment or step counter
            # (only the scale, and the batch norms' running statistics).
            for what in list(expected):
                if what in trained:
                    expected[what] = (case.w0[what], np.zeros(case.w0[what].shape))
                elif what.startswith("kiln.state.opt."):
                    expected[what] = (np.zeros_like(expected[what][0]),
                                      np.zeros(expected[what][0].shape))
            expected["kiln.state.opt.step"] = (np.float64(0), np.float64(0))
    for what, (want, bound) in expected.items():
        got = tensors.get(what)
        if got is not None:
            got = got.reshape(want.shape) if got.size == want.size else got
        rows.append((what, numerics.compare(got, want, exact, what, bound)))
    return [(what, c[0], c[1], None) if isinstance(c, tuple) else
            (what, c.ok, c.figures(), None if c.problem else c.worst_ratio)
            for what, c in rows]


def fp16_scale(case):
    """The fp16 runs' initial loss scale S: a third of the models (by seed)
    use GradScaler's 65536; the others a power of two that puts the largest
    scaled cotangent M_sure S in [2, 4) FP16_MAX (the step must be
    skipped) or in [1/8, 1/4) FP16_MAX (it must be taken, at a scale near
    overflow). 65536 when no contraction is active."""
    sure, _ = scaled_cotangents(case)
    pick = int(np.random.default_rng(case.seed + 7).integers(3))
    if sure <= 0 or pick == 0:
        return FP16_SCALE
    k = int(np.floor(np.log2(FP16_MAX / sure))) + (2 if pick == 1 else -2)
    return float(2.0 ** min(max(k, 0), 40))


def fp16_skip(case, tensors):
    """(skipped, problem, figures): whether kiln skipped the fp16 step (its loss
    scale state halved from FP16_SCALE; kept when the step was taken), and
    '' or why that is wrong. The step overflows when a scaled cotangent
    that is an fp16 contraction operand passes FP16_MAX: it must be skipped
    when M_sure S > SKIP_BAND FP16_MAX, must be taken when M_maybe S <
    FP16_MAX / SKIP_BAND, and may be either in between (rounding, and
    which values kiln keeps in fp16)."""
    sure, maybe = scaled_cotangents(case)
    S = fp16_scale(case)
    scale = tensors.get("kiln.state.loss_scale")
    good = tensors.get("kiln.state.loss_scale.good_steps")
    if scale is None or good is None:
        return False, "the checkpoint has no loss scale state", ""
    scale, good = float(np.ravel(scale)[0]), float(np.ravel(good)[0])
    where = (f"initial scale {S:g}, now {scale:g}, good steps {good:g}; "
             f"largest scaled cotangent {sure * S:.4g} (with pools "
             f"{maybe * S:.4g}), fp16 max {FP16_MAX:g}")
    if (scale, good) == (S / 2, 0):
        skipped = True
    elif (scale, good) == (S, 1):
        skipped = False
    else:
        return False, "loss scale state not one of a first step's", where
    if skipped and maybe * S < FP16_MAX / SKIP_BAND:
        return True, "skipped a step that cannot overflow", where
    if not skipped and sure * S > FP16_MAX * SKIP_BAND:
        return False, "took a step that overflows", where
    with FP16_LOCK:
        FP16_STEPS["skipped" if skipped else "taken"] += 1
    return skipped, "", where


def check_model(model, seed, modes, tools, workdir):
    res = Result(seed)
    res.model = model
    res.ops.update(n.op_type for n in model.graph.node)
    try:
        case = Case(model, seed)
        problem = check_reference(case, parse_mode(modes[0])[1])
    except (ff.GeneratorError, onnx_jax.Unsupported) as e:
        res.generator_error = str(e)
        return res
    if problem:
        res.generator_error = problem
        return res
    res.case = case
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    save_batch(os.path.join(workdir, "x.npy"), case.x)
    save_batch(os.path.join(workdir, "labels.npy"), case.labels)
    for mode in modes:
        status, detail, loss, tensors = run_mode(case, path, mode, workdir, tools)
        if status == "ok":
            rows = compare_step(case, mode, loss, tensors)
            res.ratios += [(r[3], mode, r[0]) for r in rows if r[3] is not None]
            bad = [r for r in rows if not r[1]]
            res.details[mode] = "\n".join(f"  {r[0]}: {r[2]}" for r in rows)
            if bad:
                res.statuses[mode] = "fail"
                res.signatures[mode] = "wrong " + ",".join(
                    sorted({"loss" if r[0] == "loss" else
                            "skip decision" if r[0] == "kiln.state.loss_scale" else
                            "moments" if r[0].startswith("kiln.state") else
                            "running stats" if r[0] in case.running else
                            "weights" for r in bad}))
            else:
                res.statuses[mode] = "pass"
        elif status == "unsupported":
            res.statuses[mode] = "unsupported"
            res.details[mode] = res.signatures[mode] = detail
        else:
            res.statuses[mode] = "fail"
            res.details[mode] = detail
            res.signatures[mode] = detail if status == "crash" else f"{status}: {detail}"
    return res


def failure_report(res, mode):
    opt, precision = parse_mode(mode)
    flags = f"--optimizer={OPTIMIZERS[opt][0]}" + (
        f" --precision={precision}" if precision != "fp32" else "")
    case = getattr(res, "case", None)
    if precision == "fp16" and case:
        flags += f" --loss-scale=dynamic --loss-scale-init={fp16_scale(case):.0f}"
    loss = f"--loss={case.loss} {case.labels_flag}" if case else ""
    return (f"FAIL seed {res.seed} mode {mode} (kilnc --train {loss} {flags}): "
            f"{res.signatures[mode]}\n{res.details[mode]}\n"
            f"{ff.graph_text(res.model)}\n")


def save_failure(res, mode, fail_dir):
    d = os.path.join(fail_dir, f"seed{res.seed}-{mode}")
    os.makedirs(d, exist_ok=True)
    onnx.save(res.model, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write(failure_report(res, mode))
    return d


# --- Minimization -----------------------------------------------------------------


def candidates(model, seed):
    """Smaller models, most reducing first (the graph keeps its one input
    and one output of shape [B, ...])."""
    g = model.graph
    shapes = ff.value_shapes(model)
    out = g.output[0].name
    inits = {t.name for t in g.initializer}
    data = [v.name for v in g.input if v.name not in inits][0]
    batch = shapes[data][1][0]
    nodes = list(g.node)
    producer = {o: n for n in nodes for o in n.output}
    rng = np.random.default_rng(seed + 5)

    def keeps_input(m):
        return any(data in n.input for n in m.graph.node)
    # 1. Truncate: the output's producer goes, an operand becomes the output.
    node = producer.get(out)
    if node is not None:
        for inp in node.input:
            if inp not in producer or inp not in shapes:
                continue
            et, dims = shapes[inp]
            if et != onnx.TensorProto.FLOAT or not dims or dims[0] != batch:
                continue
            m = onnx.ModelProto()
            m.CopyFrom(model)
            m.graph.output[0].CopyFrom(oh.make_tensor_value_info(inp, et, dims))
            if get_loss(m) == "cross_entropy" and (len(dims) < 2 or dims[1] < 2):
                set_loss(m, "mse")
            m = ff.prune(m)
            if keeps_input(m):
                yield f"truncate {node.op_type} ({out} -> {inp})", m
    # 2. Cut a node: its float results become trainable weights.
    for idx, node in enumerate(nodes):
        if out in node.output:
            continue
        if any(o and (o not in shapes or shapes[o][0] != onnx.TensorProto.FLOAT)
               for o in node.output):
            continue
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.node[idx]
        for o in node.output:
            if o:
                arr = rng.standard_normal(shapes[o][1]).astype(np.float32)
                m.graph.initializer.append(onh.from_array(arr, o))
        m = ff.prune(m)
        if keeps_input(m) and m.graph.node:
            yield f"cut {node.op_type} ({node.output[0]})", m
    # 3. Bypass a node: its users read an operand of the same shape.
    for idx, node in enumerate(nodes):
        if len(node.output) != 1:
            continue
        o = node.output[0]
        for inp in node.input:
            if inp and inp in shapes and shapes[inp] == shapes.get(o) and \
                    inp not in inits:
                m = onnx.ModelProto()
                m.CopyFrom(model)
                del m.graph.node[idx]
                for n in m.graph.node:
                    for k, name in enumerate(n.input):
                        if name == o:
                            n.input[k] = inp
                if m.graph.output[0].name == o:
                    if inp == data:
                        continue
                    m.graph.output[0].name = inp
                m = ff.prune(m)
                if keeps_input(m) and m.graph.node:
                    yield f"bypass {node.op_type} ({o})", m
                break


def minimize(model, seed, mode, tools, workdir, signature):
    def same_failure(m):
        try:
            ff.validate(m, tracked=False)
        except ff.GeneratorError:
            return False
        r = check_model(m, seed, [mode], tools, workdir)
        return (not r.generator_error and r.statuses.get(mode) == "fail"
                and r.signatures[mode] == signature)
    changed = True
    while changed:
        changed = False
        for what, cand in candidates(model, seed):
            if same_failure(cand):
                print(f"  minimize: {what} -> {len(cand.graph.node)} nodes", flush=True)
                model = cand
                changed = True
                break
    return model


# --- Driver ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=240)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--modes", default="rotate")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-train", default="kiln-train")
    ap.add_argument("--failures", default="train-fuzz-failures")
    ap.add_argument("--keep", help="keep every model's work folder here")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--strict", action="store_true",
                    help="count 'unsupported' compile errors as failures")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--model", help="this saved model instead of generated ones")
    ap.add_argument("--repros", metavar="DIR",
                    help="check every DIR/*.onnxtxt (ONNX textual syntax; a "
                    "'# modes: a,b' line names its modes, a '# loss: L' line "
                    "its loss, mse by default) instead")
    ap.add_argument("--print-graph", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--focus", choices=["windows"],
                    help="windows: every input an image or a signal, so that "
                    "pooling and normalisation are drawn in every graph")
    args = ap.parse_args()
    tools = ff.Tools(args.kilnc, None, args.timeout)
    tools.kiln_train = args.kiln_train
    spec = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in spec:
        if m != "rotate":
            parse_mode(m)
    if args.repros:
        return repros_main(args, tools)
    if args.minimize or args.model:
        return minimize_main(args, tools, spec)

    campaign = Campaign(
        args, tool="train-fuzz", unit="models", config="mode",
        compared="tensors", make_result=Result,
        check=lambda model, seed, modes, workdir: check_model(
            model, seed, modes, tools, workdir),
        save_failure=save_failure, failure_report=failure_report,
        graph_text=ff.graph_text,
        summary_lines=lambda: [
            f"fp16 first steps: {FP16_STEPS['taken']} taken, "
            f"{FP16_STEPS['skipped']} skipped (overflow), each as predicted"]
        if FP16_STEPS else [])
    return campaign.run(lambda seed: generate(seed, args.focus),
                        lambda seed: modes_for(seed, spec))


def repros_main(args, tools):
    """Checks saved reproducers: each must pass every mode it names (and
    train with the loss its '# loss: L' line names, mse without one)."""
    def load(path, text):
        model = ff.load_model(path)
        m = re.search(r"^#\s*loss:\s*(\S+)", text, re.M)
        set_loss(model, m.group(1) if m else "mse")
        return model
    return check_repros(
        args.repros, tool="train-fuzz", config="mode",
        default_configs=["sgd", "adamw"], load=load,
        check=lambda model, modes, work: check_model(
            model, args.seed, modes, tools, work),
        failure_report=failure_report)


def minimize_main(args, tools, spec):
    model = ff.load_model(args.model) if args.model else generate(args.seed,
                                                                  args.focus)
    seed = args.seed
    modes = modes_for(seed, spec)
    work = tempfile.mkdtemp(prefix="train-fuzz-min-")
    res = check_model(model, seed, modes, tools, work)
    if res.generator_error:
        print(f"the model is not usable: {res.generator_error}")
        shutil.rmtree(work, ignore_errors=True)
        return 1
    failing = [m for m in modes if res.statuses.get(m) == "fail"]
    for m in modes:
        print(f"seed {seed} {m}: {res.statuses[m]}"
              + (f": {res.signatures[m]}" if m in res.signatures else ""))
    if not args.minimize or not failing:
        for m in failing:
            print(failure_report(res, m))
        if args.minimize:
            print("nothing to minimize: no mode fails")
        shutil.rmtree(work, ignore_errors=True)
        return 1 if failing else 0
    for mode in failing:
        sig = res.signatures[mode]
        print(f"minimizing seed {seed} {mode}: {sig} ({len(model.graph.node)} nodes)",
              flush=True)
        small = minimize(model, seed, mode, tools, work, sig)
        r = check_model(small, seed, [mode], tools, work)
        d = save_failure(r, mode, os.path.join(args.failures, "minimized"))
        print(failure_report(r, mode) + f"saved to {d}\n", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
