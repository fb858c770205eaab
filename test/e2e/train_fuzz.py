#!/usr/bin/env python3
"""Random-graph differential test of training steps: kilnc --train +
kiln-train --device emu against the same step in JAX (float64).

Usage:
  train_fuzz.py [--seed S] [--count N] [--jobs J] [--modes LIST]
                [--failures DIR] [--keep DIR] [--kilnc PATH] [--kiln-train PATH]
                [--strict] [--print-graph] [--verbose]
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
Softmax, ReduceSum/ReduceMean, Softmax/LogSoftmax and LayerNormalization.
The graph has one float input x [B, ...] (kiln-train's --data) and one
output of shape [B, ...] (the one the loss reads, chosen as the value with
the most nodes behind it that depends on x); every float initializer is a
trainable weight (kilnc --train makes them all trainable). The loss is
`cross_entropy` (integer labels over dimension 1, when the output has rank
>= 2 and at least two classes; half the time) or `mse` against a N(0, 1)
target; the loss kind is stored in the model (metadata `train_fuzz.loss`),
so a saved model reproduces alone.

Modes (--modes, comma-separated; default `rotate`): OPT or OPT-bf16, with
OPT one of sgd (lr 0.1), momentum (lr 0.1, momentum 0.9) and adamw (lr
0.01, weight decay 0.1, betas 0.9/0.999, eps 1e-8); -bf16 adds
`--precision=bf16` (mixed precision: bf16 contraction operands forward and
backward, fp32 master weights, moments and update; docs/runtime.md). `rotate`
picks ROTATION[S % 6] = sgd, adamw, sgd-bf16, adamw-bf16, momentum,
momentum-bf16, so any six consecutive seeds cover every mode.

Kiln side: `kilnc --train --loss=L --labels=fuzz_labels:SHAPE:DTYPE
--optimizer=...` then one `kiln-train` epoch over exactly one batch (N = B)
on emu with a checkpoint: the loss of the step comes from the history CSV,
the weights after the step and the optimizer moments from the checkpoint.

Reference side: onnx_jax.py evaluates the graph in jax.numpy from the ONNX
operator definitions, jax.value_and_grad gives the loss L and every
weight's gradient g in float64, and the optimizer's first step is applied
in float64 as PyTorch documents it (sgd: w - lr g; momentum: buf = g,
w - lr buf; adamw: w (1 - lr wd), then Adam with bias correction, so the
first step is lr g / (|g| + eps)). The JAX forward is checked against
onnxruntime (fp32, graph optimizations off) first: a disagreement is a
harness error, never blamed on Kiln.

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
  p = 1e-3 in fp32 (as fusion_fuzz) and p = u_bf16 = 2^-8 in bf16, so a
  relu, max or min that bf16 rounding can flip flips in the draws as well;
- the loss: |a - b| <= 7 B |b| + 2 (u_P / p) D_L (the rule for a scalar);
- each weight after the step: the gradient bound carried through the
  update exactly: sgd and momentum lr e_i; adamw the largest change of
  lr g / (|g| + eps) over g in [g_i - e_i, g_i + e_i] (so a gradient that
  is zero within its bound may take a full step of either sign, as Adam
  does with rounding noise); plus ROUND = 8 fp32 roundings of the update
  (8 u_fp32 (|w| + lr |step|));
- the moments: momentum's buffer (= g) e_i; adamw's m = (1 - b1) g within
  (1 - b1) e_i and v = (1 - b2) g^2 within (1 - b2) ((|g_i| + e_i)^2 - g_i^2),
  each plus ROUND fp32 roundings.

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

Exit status 0 when nothing failed. The last line reads 'train-fuzz: N
models, M runs: P pass, U unsupported, F fail, G generator errors (T s)'.
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

OPTIMIZERS = {
    "sgd": ("sgd:lr=0.1", {"lr": 0.1}),
    "momentum": ("momentum:lr=0.1,momentum=0.9", {"lr": 0.1, "mu": 0.9}),
    "adamw": ("adamw:lr=0.01,weight_decay=0.1,beta1=0.9,beta2=0.999,eps=1e-8",
              {"lr": 0.01, "wd": 0.1, "b1": 0.9, "b2": 0.999, "eps": 1e-8}),
}
ROTATION = ["sgd", "adamw", "sgd-bf16", "adamw-bf16", "momentum", "momentum-bf16"]
PERTURB = {"fp32": 1e-3, "bf16": numerics.UNIT_ROUNDOFF["bf16"]}
PERTURB_DRAWS = 4
ALLOWANCE = ff.ALLOWANCE      # s_i: this many first-order rounding responses
FLOOR_REL = ff.FLOOR_REL      # gradient error floor: this fraction of max |g|
ROUND = 8                     # fp32 roundings allowed in the update chain
BIAS_ULPS = 4                 # ulps of 1 in each fp32 bias correction
U32 = numerics.UNIT_ROUNDOFF["fp32"]
LABELS = "fuzz_labels"
LOSS_KEY = "train_fuzz.loss"


def parse_mode(name):
    """(optimizer, precision) of a mode name; ValueError when unknown."""
    opt, _, prec = name.partition("-")
    prec = prec or "fp32"
    if opt not in OPTIMIZERS or prec not in PERTURB:
        raise ValueError(f"unknown mode '{name}' (OPT or OPT-bf16, OPT one of "
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

    def index_input(self, shape, dim):
        return self.const_i64(self.rng.integers(-dim, dim, size=shape), "j")

    def float_input(self, shape, prefix="x"):
        if self.inputs:  # a second "input" is a weight here
            return self.weight_value(shape, 1.0, "p")
        return super().float_input(shape, prefix)

    def build(self):
        batch = self.choice([1, 2, 3, 4, 8], p=[1, 3, 2, 3, 1])
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
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
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


def generate(seed):
    """The seed's model (a few sub-seeds are tried until one has an output
    of shape [B, ...] that depends on x and a weight)."""
    for attempt in range(16):
        model = TrainBuilder([seed, attempt]).build()
        if model is not None:
            ff.validate(model)
            return model
    raise ff.GeneratorError("no usable output in 16 attempts")


def trainable(model):
    """The weights kilnc --train trains, in the order of the flat `params`
    and moments: every float initializer (Importer.cpp) but the operands a
    handler reads as constants (a Pad's constant_value, Clip's bounds,
    Dropout's ratio), in the order the graph first reads them."""
    floats = {t.name for t in onnx_jax.float_params(model)}
    order, constants = [], set()
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name not in floats:
                continue
            if (node.op_type, i) in (("Pad", 2), ("Dropout", 1)) or \
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
        inits = {t.name: t for t in g.initializer}
        self.w0 = {n: onh.to_array(inits[n]).astype(np.float64)
                   for n in self.weights}
        self._refs = {}


# --- Reference ----------------------------------------------------------------


class Reference:
    """L, g (per weight) in float64 and their sensitivities D_L, D_g."""


def reference(case, precision):
    """The JAX reference of the case, perturbed at the precision's scale
    (cached per perturbation size)."""
    pert = PERTURB[precision]
    if pert in case._refs:
        return case._refs[pert]
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    @jax.custom_vjp
    def noisy(v, f, b):
        return v * f

    def noisy_fwd(v, f, b):
        return v * f, (f, b)

    def noisy_bwd(res, ct):
        f, b = res
        return ct * f * b, jnp.zeros_like(f), jnp.zeros_like(b)
    noisy.defvjp(noisy_fwd, noisy_bwd)

    x64 = case.x.astype(np.float64)
    labels = (case.labels.astype(np.float64) if case.loss == "mse"
              else case.labels)
    shapes = ff.value_shapes(case.model)
    noisy_names = [o for n in case.model.graph.node for o in n.output
                   if o and shapes.get(o, (0,))[0] == onnx.TensorProto.FLOAT]

    def loss_fn(params, x, noise):
        # noise: name -> (forward factor, backward factor), every node result
        # and the loss; all ones for the unperturbed reference.
        env = onnx_jax.run(case.model, params, {case.input: x},
                           lambda name, v: noisy(v, *noise[name]))
        y = env[case.output]
        if case.loss == "mse":
            loss = jnp.mean((y - labels) ** 2)
        else:
            z = y - jax.lax.stop_gradient(jnp.max(y, axis=1, keepdims=True))
            logp = z - jnp.log(jnp.sum(jnp.exp(z), axis=1, keepdims=True))
            picked = jnp.take_along_axis(logp, np.expand_dims(labels, 1), axis=1)
            loss = -jnp.mean(picked)
        return noisy(loss, *noise["fuzz_loss"]), y

    # One compile per case, PERTURB_DRAWS + 1 runs per precision.
    if not hasattr(case, "grad"):
        case.grad = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    grad = case.grad
    ones = {n: (np.ones(shapes[n][1]), np.ones(shapes[n][1])) for n in noisy_names}
    ones["fuzz_loss"] = (np.ones(()), np.ones(()))
    (L, y), g = grad(case.w0, x64, ones)
    r = Reference()
    r.loss = float(L)
    r.y = np.asarray(y)
    r.g = {n: np.asarray(v) for n, v in g.items()}
    # The scale of the backward's rounding: the largest gradient element, or
    # the loss's own cotangent dL/dy times the output's scale when every
    # gradient cancels to zero (a bias the softmax of the loss ignores).
    if case.loss == "mse":
        dldy = 2 * (r.y - labels) / r.y.size
    else:
        p = np.exp(r.y - np.max(r.y, axis=1, keepdims=True))
        p /= np.sum(p, axis=1, keepdims=True)
        onehot = np.zeros_like(p)
        np.put_along_axis(onehot, np.expand_dims(labels, 1), 1.0, axis=1)
        dldy = (p - onehot) / (r.y.size / r.y.shape[1])
    r.g_scale = max([float(np.max(np.abs(v))) for v in r.g.values() if v.size] +
                    [float(np.max(np.abs(dldy))) * max(1.0, float(np.max(np.abs(r.y))))])
    r.d_loss = 0.0
    r.d_y = np.zeros_like(r.y)
    r.d_g = {n: np.zeros_like(v) for n, v in r.g.items()}
    rng = np.random.default_rng(11)
    for _ in range(PERTURB_DRAWS):
        noise = {n: (1 + pert * rng.standard_normal(f.shape),
                     1 + pert * rng.standard_normal(f.shape))
                 for n, (f, _) in ones.items()}
        pw = {n: v * (1 + pert * rng.standard_normal(v.shape))
              for n, v in case.w0.items()}
        px = x64 * (1 + pert * rng.standard_normal(x64.shape))
        (pL, py), pg = grad(pw, px, noise)
        r.d_loss = max(r.d_loss, abs(float(pL) - r.loss))
        r.d_y = np.fmax(r.d_y, np.abs(np.asarray(py) - r.y))
        for n in r.d_g:
            r.d_g[n] = np.fmax(r.d_g[n], np.abs(np.asarray(pg[n]) - r.g[n]))
    case._refs[pert] = r
    return r


def check_reference(case, precision):
    """The JAX forward against onnxruntime fp32: '' or what disagrees
    (a harness or generator problem, not Kiln's)."""
    ref = reference(case, precision)
    model = ff.expand_layer_norms(case.model)
    try:
        ort = ff.ort_session(model).run([case.output], {case.input: case.x})[0]
    except Exception as e:  # noqa: BLE001
        return f"onnxruntime rejects the model: {str(e).splitlines()[0][:200]}"
    scale = float(np.max(np.abs(ref.y))) if ref.y.size else 0.0
    allowance = (ALLOWANCE * U32 / PERTURB[precision]) * ref.d_y + 1e-4 * FLOOR_REL * scale
    result = numerics.compare(ort, ref.y, "fp32", case.output, allowance)
    return "" if result.ok else f"jax forward vs onnxruntime: {result.figures()}"


def grad_bound(ref, name, precision):
    """e_i: the bound on each element of the gradient Kiln computes."""
    g = ref.g[name]
    B = numerics.NORM_BOUND[precision]
    s = ALLOWANCE * numerics.UNIT_ROUNDOFF[precision] / PERTURB[precision]
    rms = float(np.sqrt(np.mean(g ** 2))) if g.size else 0.0
    floor = FLOOR_REL * ref.g_scale
    return numerics.ELEMENT_TAIL * B * rms + B * np.abs(g) + s * ref.d_g[name] + B * floor


def expected_step(case, ref, opt, precision, trained):
    """{what: (want, allowance)} for every trained weight (in graph order,
    the order of the flat moments) and moment after one step of `opt`
    (float64)."""
    _, hp = OPTIMIZERS[opt]
    lr = hp["lr"]
    out = {}
    flat_m, flat_mb, flat_v, flat_vb = [], [], [], []
    for n in trained:
        w0, g = case.w0[n], ref.g[n]
        e = grad_bound(ref, n, precision)
        if opt in ("sgd", "momentum"):
            w1 = w0 - lr * g
            bound = lr * e + ROUND * U32 * (np.abs(w1) + lr * np.abs(g))
            if opt == "momentum":
                flat_m.append(g.ravel())
                flat_mb.append((e + ROUND * U32 * np.abs(g)).ravel())
        else:
            b1, b2, eps, wd = hp["b1"], hp["b2"], hp["eps"], hp["wd"]

            def step(gg):
                return lr * gg / (np.abs(gg) + eps)
            w1 = w0 * (1 - lr * wd) - step(g)
            moved = np.maximum(np.abs(step(g + e) - step(g)),
                               np.abs(step(g - e) - step(g)))
            # The bias corrections 1 - b^t are computed in fp32: a few ulps
            # of 1 relative to 1 - b (u / (1 - b2) = 6e-5 for b2 = 0.999;
            # the square root halves it), as in PyTorch's fp32 Adam.
            bc = BIAS_ULPS * U32 * (1 / (1 - b1) + 0.5 / (1 - b2))
            bound = moved + ROUND * U32 * np.abs(w1) + lr * (ROUND * U32 + bc)
            flat_m.append(((1 - b1) * g).ravel())
            flat_mb.append(((1 - b1) * (e + ROUND * U32 * np.abs(g))).ravel())
            v = (1 - b2) * g ** 2
            flat_v.append(v.ravel())
            flat_vb.append(((1 - b2) * ((np.abs(g) + e) ** 2 - g ** 2)
                            + ROUND * U32 * v).ravel())
        out[n] = (w1, bound)
    if flat_m:
        out["kiln.state.opt.m"] = (np.concatenate(flat_m), np.concatenate(flat_mb))
    if flat_v:
        out["kiln.state.opt.v"] = (np.concatenate(flat_v), np.concatenate(flat_vb))
    return out


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
    for what, (want, bound) in expected_step(case, ref, opt, precision,
                                             trained).items():
        got = tensors.get(what)
        if got is not None:
            got = got.reshape(want.shape) if got.size == want.size else got
        rows.append((what, numerics.compare(got, want, exact, what, bound)))
    return [(what, c.ok, c.figures(), None if c.problem else c.worst_ratio)
            for what, c in rows]


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
                            "moments" if r[0].startswith("kiln.state") else
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
        graph_text=ff.graph_text)
    return campaign.run(generate, lambda seed: modes_for(seed, spec))


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
    model = ff.load_model(args.model) if args.model else generate(args.seed)
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
