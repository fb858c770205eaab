#!/usr/bin/env python3
"""Random-graph differential test: kilnc + kiln-run --device emu vs onnxruntime.

Usage:
  fusion_fuzz.py [--seed S] [--count N] [--jobs J] [--variants LIST]
                 [--failures DIR] [--keep DIR] [--kilnc PATH] [--kiln-run PATH]
                 [--strict] [--print-graph] [--verbose]
  fusion_fuzz.py --minimize --seed S [--variants V]     # one generated graph
  fusion_fuzz.py --minimize --model M.onnx [--variants V]  # a saved model
  fusion_fuzz.py --repros test/e2e/fusion-fuzz-repros     # saved reproducers

Each seed S, S+1, ..., S+N-1 gives one small random ONNX graph (opset 17,
float32 activations, 3-12 nodes): data movement (Gather with 0-D/1-D/2-D
constant indices, negative ones included, on any axis, and with int64
indices from a graph input; Gather from a weight table (an embedding);
GatherElements; Slice with negative starts/ends/steps; Pad; Concat; Split;
Expand; Tile; Transpose; Reshape; Flatten; Squeeze; Unsqueeze), elementwise
ops with broadcasting (Add, Sub, Mul, Min, Max, Relu, Sigmoid, Tanh, Neg),
contractions (MatMul, Gemm, small Conv; MatMuls side by side on one input,
MatMul into Softmax), row ops (ReduceSum, ReduceMean, Softmax,
LogSoftmax, LayerNormalization) and scans, selections and N-d indexing
(CumSum with exclusive/reverse, TopK's values, GatherND with batch_dims,
ScatterND with reductions none/add/mul, Einsum transposes, sums and contractions,
LpPool with p = 1, 2, 3). Shapes are small, with one long dimension
(16 to 257) now and then for block-wide reductions.
The generator tracks every shape; the model then has to pass
onnx.checker (full check), strict onnx shape inference (which must agree
with the tracked shapes) and onnxruntime. Every dead end is a graph output,
and any other intermediate is one with probability 1/4.

For every graph, onnxruntime (CPU, fp32) computes the reference on seeded
inputs (floats ~ N(0, 1); indices uniform in [-d, d)), and each variant is
compiled by kilnc (KILN_PTXAS="": the emulator runs the PTX) and run by
kiln-run --device emu; every output is compared. Variants:

  fused, unfused    fp32, default layout, --fuse=true / --fuse=false
  P, P-nhwc         --precision=P (fp32, tf32, bf16, fp16), --layout=nhwc
                    for -nhwc; fused
  rotate            one of ROTATION, chosen by the seed: graph S runs
                    ROTATION[S % 7] = bf16-nhwc, tf32, fp16, fp32-nhwc, bf16,
                    tf32-nhwc, fp16-nhwc, so every precision and layout is
                    exercised over any 7 consecutive seeds
  P-nockern         --contraction-kernels=false: matmuls and convolutions
                    on the generic kernels instead of the tiled templates
  P-mma, P-wgmma    --wgmma=false / --wgmma=true: the mma.sync or the wgmma
                    tensor-core family (wgmma is sm_90's default; tf32,
                    bf16, fp16)
  rotate-kernels    one of KERNEL_ROTATION: graph S runs
                    KERNEL_ROTATION[S % 9] = bf16-mma, fp32-nockern,
                    tf32-mma, bf16-nockern, fp16-mma, tf32-nockern,
                    bf16-wgmma, fp16-nockern, tf32-wgmma

Suffixes combine (bf16-nhwc-mma). Each variant has its precision's bound
(below): the kernel family changes the order of the sums and, for tf32 on
wgmma, truncates the operands instead of rounding them (at most 2 u_P,
within the allowance's two rounding responses).
--variants is a comma-separated list of these (default fused,unfused,rotate).

Comparison, per output (scripts/numerics.py's rule, as every numerics test
in Kiln): b the reference, a Kiln's result, the precision's norm bound B
(fp32 1e-4: both sides compute in fp32 but associate sums differently -
warp-shuffle trees, FMA contraction, blocked GEMMs; with at most a few
hundred terms per sum the relative difference is ~1e-6, so 1e-4 leaves two
orders of margin while any indexing error moves an element by far more;
bf16 2e-2, fp16 and tf32 5e-3: docs/testing.md) and a per-element
allowance s_i for the graph's conditioning, which random graphs do not
control (LayerNormalization of a row of equal values, a dot product that
cancels):
  every element  |a_i - b_i| <= 6 B rms(b) + B |b_i| + s_i
  the norm       ||a - b|| / ||b|| <= B + ||s|| / ||b||
s_i is measured, element by element: onnxruntime also runs the graph
PERTURB_DRAWS = 4 times with every float input, weight and node result
multiplied by 1 + 1e-3 N(0, 1) elementwise (rounding at every op, so two
copies of one value differ, as they may in Kiln); D_i, the largest change
of element i, is what a relative error of 1e-3 at every op does to it, and
s_i = ALLOWANCE (u_P / 1e-3) D_i + B f, u_P the unit roundoff of the
variant's precision (Kiln rounds at most once per op to it) and f the
error floor (1e-2 times the largest |x| over the output and every value it
is computed from: an exact 0 from x - x may come out as 1e-7 when the two
x are computed by different code). A well-conditioned element gets almost
nothing; an ill-conditioned one what its own sensitivity says, and no
output is left out. The summary reports the worst per-element ratio over
every compared output (<= 1 passes) and the outputs' amplification k (the
largest relative change of an output's norm over 1e-3; informational).

Outcomes per (graph, variant): pass; unsupported (kilnc exits 1 with one
clean line that says 'not supported' or 'unsupported': counted and listed,
a failure with --strict); fail: a kilnc crash (signal, exit status other
than 0 and 1, or 'LLVM ERROR' / 'Assertion' / a stack dump on stderr), any
other kilnc error, a kiln-run error, a missing or mis-shaped output, or an
error over the bound. A failure prints the seed, variant, the graph in ONNX
textual syntax and the numbers, and saves model.onnx, inputs.npz and
report.txt under --failures DIR/seed<S>-<variant>/. --keep DIR keeps every
graph's work folder (models, artifacts, outputs).

--minimize greedily shrinks one failing graph while the same failure (same
variant, same class and, for crashes, the same signature) persists: it
drops graph outputs, truncates (an output's producer goes and one of its
operands becomes the output), cuts nodes (a node's results become fresh
graph inputs, and whatever only fed it disappears) and bypasses nodes
(their users read an input of the same shape), until nothing more can go;
then prints the reduced graph and saves it under --failures.

Exit status: 0 when no (graph, variant) failed, 1 otherwise. The last line
reads 'fusion-fuzz: N graphs, M runs: P pass, U unsupported, F fail'.
"""
import argparse
import collections
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.checker
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnx.parser
import onnx.printer
import onnx.shape_inference
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import numerics  # noqa: E402
from fuzz_campaign import Campaign, check_repros  # noqa: E402

OPSET = 17
MAX_ELEMS = 1024          # per tensor: keeps emu runs short
INT64_MAX = 2**63 - 1
INT64_MIN = -2**63

ROTATION = ["bf16-nhwc", "tf32", "fp16", "fp32-nhwc", "bf16", "tf32-nhwc",
            "fp16-nhwc"]
# Contraction kernel configurations (--variants rotate-kernels): the
# generic kernels (--contraction-kernels=false) and the tensor-core
# families, wgmma (sm_90's default) and mma.sync (--wgmma=false), in every
# precision that has them.
KERNEL_ROTATION = ["bf16-mma", "fp32-nockern", "tf32-mma", "bf16-nockern",
                   "fp16-mma", "tf32-nockern", "bf16-wgmma", "fp16-nockern",
                   "tf32-wgmma"]
BOUNDS = numerics.NORM_BOUND
PERTURB = 1e-3            # relative perturbation for the conditioning estimate
PERTURB_DRAWS = 4         # the largest amplification of this many draws counts
ALLOWANCE = 2.0           # s_i: this many first-order rounding responses
FLOOR_REL = 1e-2          # error floor: this fraction of the output's cone scale

CRASH_MARKERS = ("LLVM ERROR", "Assertion", "PLEASE submit a bug report",
                 "Stack dump", "UNREACHABLE", "Segmentation fault")
UNSUPPORTED = re.compile(r"not supported|unsupported", re.I)


# --- Variants --------------------------------------------------------------


def variant_flags(name):
    """kilnc flags of a variant name (see the module docstring)."""
    if name == "fused":
        return []
    if name == "unfused":
        return ["--fuse=false"]
    parts = name.split("-")
    precision = parts[0]
    if precision not in BOUNDS:
        raise ValueError(f"unknown variant '{name}'")
    flags = [f"--precision={precision}"]
    for part in parts[1:]:
        if part == "nhwc":
            flags.append("--layout=nhwc")
        elif part == "nchw":
            flags.append("--layout=nchw")
        elif part == "unfused":
            flags.append("--fuse=false")
        elif part == "nockern":
            flags.append("--contraction-kernels=false")
        elif part == "mma":
            flags.append("--wgmma=false")
        elif part == "wgmma":
            flags.append("--wgmma=true")
        else:
            raise ValueError(f"unknown variant '{name}'")
    return flags


def variant_precision(name):
    head = name.split("-")[0]
    return head if head in BOUNDS else "fp32"


def variants_for(seed, spec):
    out = []
    for name in spec:
        if name == "rotate":
            name = ROTATION[seed % len(ROTATION)]
        elif name == "rotate-kernels":
            name = KERNEL_ROTATION[seed % len(KERNEL_ROTATION)]
        if name not in out:
            out.append(name)
    return out


# --- The generator -----------------------------------------------------------


class Value:
    __slots__ = ("name", "shape")

    def __init__(self, name, shape):
        self.name = name
        self.shape = tuple(int(d) for d in shape)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))


def nelems(shape):
    return int(np.prod(shape, dtype=np.int64))


class Builder:
    """Builds one random graph, tracking every value's shape."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.inputs = []          # ValueInfoProto
        self.values = []          # float Values usable as operands
        self.shapes = {}          # name -> shape, every float value
        self.used = collections.Counter()
        self.counter = 0
        # Non-float node outputs (TopK's indices): never graph outputs.
        self.int_outputs = set()

    # Names and constants.

    def fresh(self, prefix):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def choice(self, seq, p=None):
        if p is not None:
            p = np.asarray(p, dtype=np.float64)
            p = p / p.sum()
        return seq[int(self.rng.choice(len(seq), p=p))]

    def chance(self, p):
        return bool(self.rng.random() < p)

    def randint(self, lo, hi):
        """Uniform in [lo, hi] (inclusive)."""
        return int(self.rng.integers(lo, hi + 1))

    def const_i64(self, values, prefix="c"):
        name = self.fresh(prefix)
        arr = np.asarray(values, dtype=np.int64)
        self.inits.append(onh.from_array(arr, name))
        return name

    def weight(self, shape, scale=1.0, prefix="w"):
        name = self.fresh(prefix)
        arr = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(onh.from_array(arr, name))
        return name

    def weight_value(self, shape, scale=1.0, prefix="k"):
        return Value(self.weight(shape, scale, prefix), shape)

    def float_input(self, shape, prefix="x"):
        name = self.fresh(prefix)
        self.inputs.append(oh.make_tensor_value_info(
            name, onnx.TensorProto.FLOAT, list(shape)))
        v = Value(name, shape)
        self.values.append(v)
        self.shapes[name] = v.shape
        return v

    def index_input(self, shape, dim):
        name = self.fresh("idx")
        info = oh.make_tensor_value_info(name, onnx.TensorProto.INT64,
                                         list(shape))
        info.doc_string = f"indices in [{-dim}, {dim})"
        self.inputs.append(info)
        return name

    def emit(self, op, inputs, shapes, **attrs):
        """Adds a node with len(shapes) float results; returns their Values."""
        outs = [Value(self.fresh(op.lower()[:4]), s) for s in shapes]
        self.nodes.append(oh.make_node(op, list(inputs),
                                       [o.name for o in outs], **attrs))
        for name in inputs:
            if name:
                self.used[name] += 1
        for o in outs:
            self.values.append(o)
            self.shapes[o.name] = o.shape
        return outs

    # Operand selection: recent values more often, so graphs are deep.

    def pick(self, cond=lambda v: True):
        cands = [v for v in self.values if cond(v)]
        if not cands:
            return None
        if self.chance(0.5):
            return cands[-1]
        w = np.arange(1, len(cands) + 1, dtype=np.float64)
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def random_shape(self, max_rank=4):
        rank = self.choice([1, 2, 3, 4][:max_rank], p=[1, 3.5, 2.5, 3][:max_rank])
        while True:
            shape = [self.choice([1, 2, 3, 4, 5, 6, 8], p=[2, 2, 2, 2, 1, 1, 1])
                     for _ in range(rank)]
            if self.chance(0.2):  # one long dim: block-wide reductions
                shape[self.randint(0, rank - 1)] = self.choice([16, 33, 64, 100, 257])
            if nelems(shape) <= 512:
                return tuple(shape)

    def axis_attr(self, axis, rank):
        """Writes a normalized axis as itself or as its negative alias."""
        return axis - rank if self.chance(0.4) else axis

    # --- Data movement ---

    def op_gather(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank - 1)
        d = t.shape[axis]
        kind = self.choice(["0d", "1d", "2d", "input"], p=[2, 3, 2, 2])
        for _ in range(4):
            if kind == "0d":
                ishape = ()
            elif kind == "1d":
                ishape = (self.randint(1, 4),)
            elif kind == "2d":
                ishape = (self.randint(1, 3), self.randint(1, 3))
            else:
                ishape = self.choice([(), (self.randint(1, 4),),
                                      (self.randint(1, 3), self.randint(1, 3))])
            out = t.shape[:axis] + ishape + t.shape[axis + 1:]
            if nelems(out) <= MAX_ELEMS:
                break
            kind = "0d"
        else:
            return False
        if kind == "input":
            idx = self.index_input(ishape, d)
        else:
            vals = self.rng.integers(-d, d, size=ishape)
            idx = self.const_i64(vals, "j")
        self.emit("Gather", [t.name, idx], [out],
                  axis=self.axis_attr(axis, t.rank))
        return True

    def op_gather_elements(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank - 1)
        d = t.shape[axis]
        ishape = tuple(self.randint(1, 4) if i == axis else
                       self.randint(1, n) for i, n in enumerate(t.shape))
        if nelems(ishape) > MAX_ELEMS:
            return False
        if self.chance(0.3):
            idx = self.index_input(ishape, d)
        else:
            idx = self.const_i64(self.rng.integers(-d, d, size=ishape), "j")
        self.emit("GatherElements", [t.name, idx], [ishape],
                  axis=self.axis_attr(axis, t.rank))
        return True

    def op_embedding(self):
        """Gather from a weight table (an embedding), indices from an input
        or a constant."""
        rows = self.randint(2, 12)
        width = self.choice([1, 3, 4, 8, 16])
        ishape = self.choice([(self.randint(1, 6),), (self.randint(1, 2), self.randint(1, 5)), ()])
        table = self.weight((rows, width), 1.0, "emb")
        if self.chance(0.6):
            idx = self.index_input(ishape, rows)
        else:
            idx = self.const_i64(self.rng.integers(-rows, rows, size=ishape), "j")
        self.emit("Gather", [table, idx], [ishape + (width,)])
        return True

    def op_twin_matmul(self):
        """Two or three MatMuls reading one input, same result shape (QKV)."""
        a = self.pick(lambda v: v.rank >= 2)
        if a is None:
            return False
        K = a.shape[-1]
        N = self.randint(1, 8)
        out = a.shape[:-1] + (N,)
        if nelems(out) > MAX_ELEMS:
            return False
        for _ in range(self.randint(2, 3)):
            self.emit("MatMul", [a.name, self.weight((K, N), 1.0 / np.sqrt(K), "mw")],
                      [out])
        return True

    def op_attention(self):
        """Softmax(A @ B^T) (@ C): a short contraction into a softmax."""
        a = self.pick(lambda v: v.rank >= 2)
        if a is None:
            return False
        others = [v for v in self.values if v.rank == a.rank and
                  v.shape[:-2] == a.shape[:-2] and v.shape[-1] == a.shape[-1]]
        b = self.choice(others) if others and self.chance(0.7) else a
        perm = list(range(a.rank - 2)) + [a.rank - 1, a.rank - 2]
        bt = self.emit("Transpose", [b.name], [tuple(b.shape[p] for p in perm)],
                       perm=perm)[0]
        sshape = a.shape[:-1] + (b.shape[-2],)
        if nelems(sshape) > MAX_ELEMS:
            return False
        s = self.emit("MatMul", [a.name, bt.name], [sshape])[0]
        if self.chance(0.5):
            scale = self.weight((), 0.0, "sc")
            self.inits[-1].CopyFrom(onh.from_array(
                np.array(1.0 / np.sqrt(a.shape[-1]), np.float32), scale))
            s = self.emit("Mul", [s.name, scale], [sshape])[0]
        p = self.emit(self.choice(["Softmax", "Softmax", "LogSoftmax"]), [s.name],
                      [sshape], axis=-1)[0]
        if self.chance(0.5):
            out = np.matmul(np.zeros(sshape, np.float32),
                            np.zeros(b.shape, np.float32)).shape
            self.emit("MatMul", [p.name, b.name], [out])
        return True

    def op_slice(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        naxes = self.randint(1, t.rank)
        axes = [int(a) for a in self.rng.permutation(t.rank)[:naxes]]
        starts, ends, steps = [], [], []
        out = list(t.shape)
        for a in axes:
            d = t.shape[a]
            step = self.choice([1, 2, 3, -1, -2], p=[4, 1.5, 0.5, 2, 1])
            s = self.randint(0, d - 1)
            if step > 0:
                e = self.randint(s + 1, d)
                e_enc = (e - d if e < d and self.chance(0.5) else
                         INT64_MAX if e == d and self.chance(0.3) else e)
            else:
                e = self.randint(-1, s - 1)  # -1: through index 0
                if e == -1:
                    e_enc = self.choice([-d - 1, INT64_MIN, -d - 3])
                else:
                    e_enc = e - d if self.chance(0.5) else e
            s_enc = s - d if self.chance(0.4) else s
            starts.append(s_enc)
            ends.append(e_enc)
            steps.append(step)
            out[a] = len(range(s, e, step))
        inputs = [t.name, self.const_i64(starts, "st"), self.const_i64(ends, "en")]
        with_steps = any(x != 1 for x in steps) or self.chance(0.3)
        if with_steps or axes != list(range(t.rank)) or self.chance(0.5):
            inputs.append(self.const_i64(
                [self.axis_attr(a, t.rank) for a in axes], "ax"))
        if with_steps:
            inputs.append(self.const_i64(steps, "sp"))
        self.emit("Slice", inputs, [tuple(out)])
        return True

    def op_pad(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        mode = self.choice(["constant", "reflect", "edge"], p=[6, 2, 2])
        begin, end = [], []
        out = []
        for d in t.shape:
            lo_hi = []
            for _ in range(2):
                if mode == "reflect":
                    p = self.randint(0, min(2, d - 1))
                elif mode == "constant" and d >= 2 and self.chance(0.1):
                    p = -1
                else:
                    p = self.choice([0, 0, 1, 2])
                lo_hi.append(p)
            if d + lo_hi[0] + lo_hi[1] < 1:
                lo_hi = [0, 0]
            begin.append(lo_hi[0])
            end.append(lo_hi[1])
            out.append(d + lo_hi[0] + lo_hi[1])
        if nelems(out) > MAX_ELEMS or out == list(t.shape):
            return False
        inputs = [t.name, self.const_i64(begin + end, "pads")]
        if mode == "constant" and self.chance(0.5):
            name = self.fresh("pv")
            self.inits.append(onh.from_array(
                np.array(self.choice([0.5, -1.25, 3.0]), dtype=np.float32), name))
            inputs.append(name)
        self.emit("Pad", inputs, [tuple(out)], mode=mode)
        return True

    def op_concat(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank - 1)

        def compatible(v):
            return v.rank == t.rank and all(
                v.shape[i] == t.shape[i] for i in range(t.rank) if i != axis)
        others = [v for v in self.values if compatible(v) and v is not t]
        parts = [t]
        for _ in range(self.choice([1, 1, 2])):
            if others and self.chance(0.75):
                parts.append(self.choice(others))
            else:
                parts.append(t)
        if self.chance(0.5):
            self.rng.shuffle(parts)
        out = list(t.shape)
        out[axis] = sum(p.shape[axis] for p in parts)
        if nelems(out) > MAX_ELEMS:
            return False
        self.emit("Concat", [p.name for p in parts], [tuple(out)],
                  axis=self.axis_attr(axis, t.rank))
        return True

    def op_split(self):
        t = self.pick(lambda v: v.rank >= 1 and max(v.shape) >= 2)
        if t is None:
            return False
        axes = [a for a in range(t.rank) if t.shape[a] >= 2]
        axis = self.choice(axes)
        d = t.shape[axis]
        n = self.randint(2, min(3, d))
        explicit = d % n != 0 or self.chance(0.5)
        if explicit:
            cuts = sorted(int(c) for c in self.rng.choice(
                np.arange(1, d), size=n - 1, replace=False))
            sizes = [b - a for a, b in zip([0] + cuts, cuts + [d])]
        else:
            sizes = [d // n] * n
        shapes = []
        for s in sizes:
            shape = list(t.shape)
            shape[axis] = s
            shapes.append(tuple(shape))
        inputs = [t.name]
        if explicit:
            inputs.append(self.const_i64(sizes, "spl"))
        self.emit("Split", inputs, shapes, axis=self.axis_attr(axis, t.rank))
        return True

    def op_expand(self):
        t = self.pick(lambda v: v.rank <= 4)
        if t is None:
            return False
        lead = self.choice([0, 0, 1, 2]) if t.rank < 4 else 0
        target = [self.randint(1, 3) for _ in range(lead)]
        for d in t.shape:
            if d == 1:
                target.append(self.choice([1, 2, 3, 4]))
            else:
                target.append(self.choice([d, d, 1]))  # 1 keeps d
        out = tuple(np.broadcast_shapes(t.shape, tuple(target)))
        if nelems(out) > MAX_ELEMS:
            return False
        self.emit("Expand", [t.name, self.const_i64(target, "shp")], [out])
        return True

    def op_tile(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        reps = [self.choice([1, 1, 2, 3]) for _ in range(t.rank)]
        out = tuple(d * r for d, r in zip(t.shape, reps))
        if nelems(out) > MAX_ELEMS:
            return False
        self.emit("Tile", [t.name, self.const_i64(reps, "rep")], [out])
        return True

    def op_transpose(self):
        t = self.pick(lambda v: v.rank >= 2)
        if t is None:
            return False
        if self.chance(0.15):
            self.emit("Transpose", [t.name], [t.shape[::-1]])
            return True
        perm = [int(p) for p in self.rng.permutation(t.rank)]
        self.emit("Transpose", [t.name], [tuple(t.shape[p] for p in perm)],
                  perm=perm)
        return True

    def factorize(self, n, rank):
        dims = [1] * rank
        f = 2
        primes = []
        m = n
        while m > 1:
            while m % f == 0:
                primes.append(f)
                m //= f
            f += 1
        for p in primes:
            dims[self.randint(0, rank - 1)] *= p
        return dims

    def op_reshape(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        rank = self.randint(1, 4)
        dims = self.factorize(t.size, rank)
        enc = list(dims)
        for i in range(rank):
            if i < t.rank and dims[i] == t.shape[i] and self.chance(0.3):
                enc[i] = 0
        if self.chance(0.4):
            cand = [i for i in range(rank) if enc[i] != 0]
            if cand:
                enc[self.choice(cand)] = -1
        self.emit("Reshape", [t.name, self.const_i64(enc, "shp")], [tuple(dims)])
        return True

    def op_flatten(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank)
        out = (nelems(t.shape[:axis]), nelems(t.shape[axis:]))
        enc = axis - t.rank if axis < t.rank and self.chance(0.3) else axis
        self.emit("Flatten", [t.name], [out], axis=enc)
        return True

    def op_squeeze(self):
        t = self.pick(lambda v: 1 in v.shape)
        if t is None:
            return False
        ones = [i for i, d in enumerate(t.shape) if d == 1]
        if self.chance(0.25):
            self.emit("Squeeze", [t.name],
                      [tuple(d for d in t.shape if d != 1)])
            return True
        k = self.randint(1, len(ones))
        axes = sorted(int(a) for a in self.rng.choice(ones, size=k, replace=False))
        out = tuple(d for i, d in enumerate(t.shape) if i not in axes)
        self.emit("Squeeze", [t.name, self.const_i64(
            [self.axis_attr(a, t.rank) for a in axes], "ax")], [out])
        return True

    def op_unsqueeze(self):
        t = self.pick(lambda v: v.rank <= 3)
        if t is None:
            return False
        k = self.randint(1, 2) if t.rank <= 2 else 1
        r = t.rank + k
        axes = sorted(int(a) for a in self.rng.choice(r, size=k, replace=False))
        out = list(t.shape)
        for a in axes:
            out.insert(a, 1)
        enc = [self.axis_attr(a, r) for a in axes]
        self.emit("Unsqueeze", [t.name, self.const_i64(enc, "ax")], [tuple(out)])
        return True

    # --- Elementwise ---

    def broadcast_partner_shape(self, shape):
        """A shape that broadcasts against `shape` (a suffix, some dims 1)."""
        r = len(shape)
        # The suffix length: the whole shape most often, a scalar sometimes.
        k = self.choice(list(range(r + 1)), p=[1] * r + [3]) if r else 0
        suffix = list(shape[r - k:]) if k else []
        for i in range(len(suffix)):
            if self.chance(0.35):
                suffix[i] = 1
        if self.chance(0.1) and len(shape) < 4:  # grows the rank
            suffix = [self.randint(1, 2)] + list(shape)
        return tuple(suffix)

    def op_binary(self):
        a = self.pick()
        if a is None:
            return False
        op = self.choice(["Add", "Sub", "Mul", "Min", "Max"])
        mode = self.choice(["value", "const", "self", "input"], p=[5, 3, 0.5, 0.5])
        b = None
        if mode == "value":
            def fits(v):
                if v is a:
                    return False
                try:
                    s = np.broadcast_shapes(a.shape, v.shape)
                except ValueError:
                    return False
                return nelems(s) <= MAX_ELEMS
            cands = [v for v in self.values if fits(v)]
            if cands:
                b = self.choice(cands)
            else:
                mode = "const"
        if mode == "self":
            b = a
        elif mode == "const":
            b = self.weight_value(self.broadcast_partner_shape(a.shape))
        elif mode == "input":
            b = self.float_input(self.broadcast_partner_shape(a.shape))
        operands = [a, b]
        if op in ("Min", "Max") and self.chance(0.2):
            both = tuple(np.broadcast_shapes(a.shape, b.shape))
            operands.append(self.weight_value(self.broadcast_partner_shape(both)))
        if self.chance(0.5):
            operands.reverse()
        out = tuple(np.broadcast_shapes(*[o.shape for o in operands]))
        if nelems(out) > MAX_ELEMS:
            return False
        self.emit(op, [o.name for o in operands], [out])
        return True

    def op_unary(self):
        a = self.pick()
        if a is None:
            return False
        op = self.choice(["Relu", "Sigmoid", "Tanh", "Neg"], p=[3, 1.5, 1.5, 1])
        self.emit(op, [a.name], [a.shape])
        return True

    # --- Contractions ---

    def op_matmul(self):
        a = self.pick(lambda v: v.rank >= 1)
        if a is None:
            return False
        K = a.shape[-1]
        kind = self.choice(["weight", "value", "batched", "vector"], p=[5, 2, 1, 0.5])
        b = None
        if kind == "value":
            def fits(v):
                if v.rank < 2 or v.shape[-2] != K:
                    return False
                try:
                    s = np.matmul(np.zeros(a.shape, np.float32),
                                  np.zeros(v.shape, np.float32)).shape
                except ValueError:
                    return False
                return nelems(s) <= MAX_ELEMS
            cands = [v for v in self.values if fits(v)]
            if cands:
                b = self.choice(cands)
            else:
                kind = "weight"
        if b is None:
            if kind == "vector":
                bshape = (K,)
            elif kind == "batched" and a.rank >= 3:
                bshape = tuple(self.choice([d, 1]) for d in a.shape[:-2]) + (K, self.randint(1, 8))
            else:
                bshape = (K, self.randint(1, 8))
            b = Value(self.weight(bshape, 1.0 / np.sqrt(K), "mw"), bshape)
        try:
            out = np.matmul(np.zeros(a.shape, np.float32),
                            np.zeros(b.shape, np.float32)).shape
        except ValueError:
            return False
        if nelems(out) > MAX_ELEMS:
            return False
        operands = [a.name, b.name]
        self.emit("MatMul", operands, [out])
        return True

    def op_gemm(self):
        a = self.pick(lambda v: v.rank == 2)
        if a is None:
            return False
        trans_a = self.chance(0.3)
        M, K = (a.shape[1], a.shape[0]) if trans_a else a.shape
        trans_b = self.chance(0.4)
        N = self.randint(1, 8)
        if M * N > MAX_ELEMS:
            return False
        bshape = (N, K) if trans_b else (K, N)
        bname = None
        if self.chance(0.25):
            cands = [v for v in self.values if v.shape == bshape]
            if cands:
                bname = self.choice(cands).name
        if bname is None:
            bname = self.weight(bshape, 1.0 / np.sqrt(K), "gw")
        inputs = [a.name, bname]
        cshape = self.choice([None, (N,), (1, N), (M, N), (M, 1), ()])
        if cshape is not None:
            inputs.append(self.weight(cshape, 1.0, "gb"))
        attrs = {}
        if trans_a:
            attrs["transA"] = 1
        if trans_b:
            attrs["transB"] = 1
        if self.chance(0.3):
            attrs["alpha"] = self.choice([0.5, 2.0, -1.0])
        if cshape is not None and self.chance(0.3):
            attrs["beta"] = self.choice([0.5, 2.0, -1.0])
        self.emit("Gemm", inputs, [(M, N)], **attrs)
        return True

    def op_conv(self):
        x = self.pick(lambda v: v.rank in (3, 4) and v.shape[1] <= 8)
        if x is None:
            return False
        C = x.shape[1]
        spatial = x.shape[2:]
        groups = self.choice([g for g in (1, 2, 3, 4) if C % g == 0],
                             p=None) if self.chance(0.3) else 1
        O = groups * self.randint(1, max(1, 8 // groups))
        kernel, pads_b, pads_e, strides, dils, out = [], [], [], [], [], []
        for d in spatial:
            k = self.randint(1, min(3, d + 2))
            s = self.choice([1, 1, 2])
            dl = self.choice([1, 1, 1, 2])
            pb, pe = self.choice([0, 0, 1]), self.choice([0, 0, 1])
            span = dl * (k - 1) + 1
            if d + pb + pe < span:
                k, dl, span = 1, 1, 1
            o = (d + pb + pe - span) // s + 1
            kernel.append(k)
            strides.append(s)
            dils.append(dl)
            pads_b.append(pb)
            pads_e.append(pe)
            out.append(o)
        oshape = (x.shape[0], O) + tuple(out)
        if nelems(oshape) > MAX_ELEMS:
            return False
        fan_in = (C // groups) * nelems(kernel)
        w = self.weight((O, C // groups) + tuple(kernel), 1.0 / np.sqrt(fan_in), "cw")
        inputs = [x.name, w]
        if self.chance(0.6):
            inputs.append(self.weight((O,), 0.5, "cb"))
        attrs = {"kernel_shape": kernel}
        if any(pads_b + pads_e):
            attrs["pads"] = pads_b + pads_e
        if any(s != 1 for s in strides):
            attrs["strides"] = strides
        if any(dl != 1 for dl in dils):
            attrs["dilations"] = dils
        if groups != 1:
            attrs["group"] = groups
        self.emit("Conv", inputs, [oshape], **attrs)
        return True

    # --- Row ops ---

    def op_reduce(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        op = self.choice(["ReduceSum", "ReduceMean"])
        keep = self.chance(0.5)
        if self.chance(0.15):
            axes = list(range(t.rank))
            explicit = False
        else:
            k = self.randint(1, t.rank)
            axes = sorted(int(a) for a in self.rng.choice(t.rank, size=k, replace=False))
            explicit = True
        out = tuple((1 if i in axes else d) for i, d in enumerate(t.shape)
                    if keep or i not in axes)
        enc = [self.axis_attr(a, t.rank) for a in axes]
        attrs = {"keepdims": int(keep)}
        inputs = [t.name]
        if op == "ReduceSum":
            if explicit:
                inputs.append(self.const_i64(enc, "ax"))
        elif explicit:
            attrs["axes"] = enc
        self.emit(op, inputs, [out], **attrs)
        return True

    def op_softmax(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        op = self.choice(["Softmax", "LogSoftmax"])
        axis = self.randint(0, t.rank - 1)
        attrs = {}
        if axis != t.rank - 1 or self.chance(0.5):
            attrs["axis"] = self.axis_attr(axis, t.rank)
        self.emit(op, [t.name], [t.shape], **attrs)
        return True

    def op_layernorm(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank - 1)
        nshape = t.shape[axis:]
        if nelems(nshape) == 1:
            # One element: the result is exactly the bias, and x - mean is
            # the rounding difference of two computations of x times
            # 1/sqrt(epsilon) (Kiln may compute x twice, with and without
            # FMA contraction): noise no perturbation of onnxruntime sees.
            return False
        inputs = [t.name, self.weight(nshape, 1.0, "ls")]
        if self.chance(0.6):
            inputs.append(self.weight(nshape, 1.0, "lb"))
        shapes = [t.shape]
        if self.chance(0.2):
            stat = t.shape[:axis] + (1,) * (t.rank - axis)
            shapes += [stat, stat]
        attrs = {}
        if axis != t.rank - 1 or self.chance(0.3):
            attrs["axis"] = self.axis_attr(axis, t.rank)
        if self.chance(0.3):
            attrs["epsilon"] = 1e-3
        self.emit("LayerNormalization", inputs, shapes, **attrs)
        return True

    # --- Scans, selections, N-d indexing, einsum, Lp pooling ---

    def op_cumsum(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank - 1)
        attrs = {}
        if self.chance(0.3):
            attrs["exclusive"] = 1
        if self.chance(0.3):
            attrs["reverse"] = 1
        ax = self.fresh("cax")
        self.inits.append(onh.from_array(
            np.asarray(self.axis_attr(axis, t.rank), dtype=np.int64), ax))
        self.emit("CumSum", [t.name, ax], [t.shape], **attrs)
        return True

    def op_topk(self):
        """TopK's values; its indices output is left unused (not a graph
        output): in bf16/fp16 variants rounding may reorder near-ties, which
        moves an index but barely a value."""
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        axis = self.randint(0, t.rank - 1)
        k = self.randint(1, t.shape[axis])
        out = t.shape[:axis] + (k,) + t.shape[axis + 1:]
        attrs = {"axis": self.axis_attr(axis, t.rank)}
        if self.chance(0.3):
            attrs["largest"] = 0
        idx_name = self.fresh("topi")
        self.int_outputs.add(idx_name)
        values = Value(self.fresh("topk"), out)
        self.nodes.append(oh.make_node(
            "TopK", [t.name, self.const_i64([k], "k")],
            [values.name, idx_name], **attrs))
        self.used[t.name] += 1
        self.values.append(values)
        self.shapes[values.name] = values.shape
        return True

    def op_gathernd(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        batch = self.randint(0, min(1, t.rank - 1))
        q = self.randint(1, t.rank - batch)
        outer = t.shape[:batch] + tuple(self.randint(1, 3)
                                        for _ in range(self.randint(0, 1)))
        ishape = outer + (q,)
        out = outer + t.shape[batch + q:]
        if nelems(out) > MAX_ELEMS or nelems(ishape) == 0:
            return False
        vals = np.stack([self.rng.integers(-d, d, size=outer)
                         for d in t.shape[batch:batch + q]], axis=-1)
        self.emit("GatherND", [t.name, self.const_i64(vals, "nd")], [out],
                  batch_dims=batch)
        return True

    def op_scatternd(self):
        t = self.pick(lambda v: v.rank >= 1)
        if t is None:
            return False
        q = self.randint(1, t.rank)
        rows = self.randint(1, 3)
        # max and min arrived in ScatterND-18; the graphs are opset 17.
        reduction = self.choice(["none", "add", "mul"], p=[3, 2, 1])
        # Distinct targets for 'none' (ONNX leaves duplicates undefined).
        grid = list(np.ndindex(*t.shape[:q]))
        if reduction == "none":
            rows = min(rows, len(grid))
            picks = self.rng.choice(len(grid), size=rows, replace=False)
        else:
            picks = self.rng.integers(0, len(grid), size=rows)
        idx = np.array([grid[int(i)] for i in picks], dtype=np.int64)
        # Some indices negative (counted from the end).
        if self.chance(0.5):
            idx = idx - np.array(t.shape[:q]) * self.rng.integers(0, 2, size=idx.shape)
        ushape = (rows,) + t.shape[q:]
        updates = self.pick(lambda v: v.shape == ushape)
        uname = updates.name if updates is not None else self.weight(ushape, 1.0, "upd")
        attrs = {} if reduction == "none" else {"reduction": reduction}
        self.emit("ScatterND", [t.name, self.const_i64(idx, "si"), uname],
                  [t.shape], **attrs)
        return True

    def op_einsum(self):
        t = self.pick(lambda v: 2 <= v.rank <= 3)
        if t is None:
            return False
        letters = "abc"[:t.rank]
        form = self.choice(["transpose", "sum", "contract", "batch"])
        if form == "transpose":
            perm = list(self.rng.permutation(t.rank))
            out = "".join(letters[i] for i in perm)
            self.emit("Einsum", [t.name], [tuple(t.shape[i] for i in perm)],
                      equation=f"{letters}->{out}")
            return True
        if form == "sum":
            keep = sorted(self.rng.choice(t.rank, size=self.randint(0, t.rank - 1),
                                          replace=False))
            out = "".join(letters[i] for i in keep)
            self.emit("Einsum", [t.name], [tuple(t.shape[i] for i in keep)],
                      equation=f"{letters}->{out}")
            return True
        # Contract the last dim with a weight [k, n]: ...k,kn->...n, or a
        # batched product bij,bjk->bik with a second operand.
        k, n = t.shape[-1], self.randint(1, 6)
        if form == "batch" and t.rank == 3:
            w = self.weight((t.shape[0], k, n), 0.5, "ew")
            self.emit("Einsum", [t.name, w], [(t.shape[0], t.shape[1], n)],
                      equation="bij,bjk->bik")
            return True
        w = self.weight((k, n), 0.5, "ew")
        out = t.shape[:-1] + (n,)
        if nelems(out) > MAX_ELEMS:
            return False
        self.emit("Einsum", [t.name, w], [out], equation="...k,kn->...n")
        return True

    def op_lppool(self):
        t = self.pick(lambda v: v.rank == 4 and v.shape[2] >= 2 and v.shape[3] >= 2)
        if t is None:
            return False
        kh, kw = self.randint(1, min(3, t.shape[2])), self.randint(1, min(3, t.shape[3]))
        stride = self.randint(1, 2)
        p = self.choice([1, 2, 3])
        oh_ = (t.shape[2] - kh) // stride + 1
        ow_ = (t.shape[3] - kw) // stride + 1
        self.emit("LpPool", [t.name], [(t.shape[0], t.shape[1], oh_, ow_)],
                  kernel_shape=[kh, kw], strides=[stride, stride], p=p)
        return True

    OPS = [  # (generator, weight)
        ("op_gather", 4), ("op_slice", 1.5), ("op_pad", 1), ("op_concat", 1.2),
        ("op_split", 1), ("op_expand", 0.8), ("op_tile", 0.8),
        ("op_transpose", 1.2), ("op_reshape", 1), ("op_flatten", 0.6),
        ("op_squeeze", 0.6), ("op_unsqueeze", 0.6),
        ("op_binary", 3), ("op_unary", 2),
        ("op_matmul", 1.5), ("op_gemm", 0.8), ("op_conv", 1.2),
        ("op_reduce", 1), ("op_softmax", 1), ("op_layernorm", 0.8),
        ("op_embedding", 0.6), ("op_twin_matmul", 0.4), ("op_attention", 0.4),
        ("op_gather_elements", 0.8),
        ("op_cumsum", 0.5), ("op_topk", 0.5), ("op_gathernd", 0.5),
        ("op_scatternd", 0.5), ("op_einsum", 0.6), ("op_lppool", 0.4),
    ]

    def build(self):
        nin = self.choice([1, 2, 3], p=[5, 4, 1])
        for _ in range(nin):
            shape = self.random_shape()
            if self.chance(0.3):  # an image: N, C, H, W
                shape = (self.randint(1, 2), self.randint(1, 4),
                         self.randint(2, 6), self.randint(2, 6))
            self.float_input(shape)
        target = self.randint(3, 12)
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        attempts = 0
        while len(self.nodes) < target and attempts < 200:
            attempts += 1
            gen = getattr(self, self.choice(names, p=weights))
            gen()
        # Outputs: every dead end, plus intermediates at random.
        node_outputs = [o for n in self.nodes for o in n.output
                        if o not in self.int_outputs]
        outputs = [o for o in node_outputs
                   if self.used[o] == 0 or self.chance(0.25)]
        graph = oh.make_graph(
            self.nodes, "fuzz", self.inputs,
            [oh.make_tensor_value_info(o, onnx.TensorProto.FLOAT,
                                       list(self.shapes[o])) for o in outputs],
            self.inits)
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)])
        model.ir_version = 8
        return model


def generate(seed):
    """The seed's model; raises GeneratorError when it is not valid ONNX or
    the tracked shapes disagree with ONNX shape inference."""
    model = Builder(seed).build()
    validate(model)
    return model


class GeneratorError(Exception):
    pass


def validate(model, tracked=True):
    try:
        onnx.checker.check_model(model, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True,
                                                     strict_mode=True,
                                                     data_prop=True)
    except Exception as e:  # noqa: BLE001 - any checker complaint
        raise GeneratorError(f"onnx rejects the model: {str(e).splitlines()[0]}")
    if tracked:
        info = {v.name: v for v in list(inferred.graph.value_info) +
                list(inferred.graph.output)}
        for o in model.graph.output:
            want = [d.dim_value for d in o.type.tensor_type.shape.dim]
            got = info[o.name].type.tensor_type.shape
            gdims = [d.dim_value if d.HasField("dim_value") else None
                     for d in got.dim]
            if gdims != want:
                raise GeneratorError(
                    f"shape of '{o.name}': tracked {want}, onnx infers {gdims}")


# --- Reference and conditioning ---------------------------------------------


def make_inputs(model, seed):
    """Seeded feeds: floats ~ N(0, 1), indices uniform in their range."""
    rng = np.random.default_rng(seed + 1_000_003)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for v in model.graph.input:
        if v.name in inits:
            continue
        shape = [d.dim_value for d in v.type.tensor_type.shape.dim]
        if v.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            m = re.match(r"indices in \[(-?\d+), (-?\d+)\)", v.doc_string)
            lo, hi = (int(m.group(1)), int(m.group(2))) if m else (0, 1)
            feeds[v.name] = rng.integers(lo, hi, size=shape).astype(np.int64)
        else:
            feeds[v.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def ort_session(model):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # No graph rewrites: onnxruntime 1.20.1's GemmTransposeFusion turns
    # Gemm followed by an identity Transpose (perm [0, 1]) into a transposed
    # Gemm (found by this test); the plain kernels are the reference.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def expand_layer_norms(model):
    """A copy with every LayerNormalization replaced by its ONNX function
    body (two-pass: mean, then the mean of squared deviations). onnxruntime's
    own kernel computes the variance as E[x^2] - E[x]^2, which loses most
    digits on rows whose variance is small against their mean (found by
    this test: InvStdDev of a two-element row, off by 5e-3); Kiln computes
    it the function body's way, as the reference now does."""
    out = copy.deepcopy(model)
    nodes = []
    for node in out.graph.node:
        if node.op_type != "LayerNormalization":
            nodes.append(node)
            continue
        attrs = {a.name: oh.get_attribute_value(a) for a in node.attribute}
        rank = None
        for v in list(model.graph.input) + list(model.graph.value_info) + \
                list(model.graph.output):
            if v.name == node.input[0]:
                rank = len(v.type.tensor_type.shape.dim)
        if rank is None:
            rank = len(value_shapes(model)[node.input[0]][1])
        axis = attrs.get("axis", -1) % rank
        axes = list(range(axis, rank))
        eps = attrs.get("epsilon", 1e-5)
        p = f"fuzz_ln_{node.output[0]}_"
        outs = list(node.output) + [""] * (3 - len(node.output))
        mean = outs[1] or p + "mean"
        inv = outs[2] or p + "inv"
        out.graph.initializer.append(onh.from_array(
            np.array(eps, dtype=np.float32), p + "eps"))
        nodes += [
            oh.make_node("ReduceMean", [node.input[0]], [mean], axes=axes, keepdims=1),
            oh.make_node("Sub", [node.input[0], mean], [p + "d"]),
            oh.make_node("Mul", [p + "d", p + "d"], [p + "dd"]),
            oh.make_node("ReduceMean", [p + "dd"], [p + "var"], axes=axes, keepdims=1),
            oh.make_node("Add", [p + "var", p + "eps"], [p + "ve"]),
            oh.make_node("Sqrt", [p + "ve"], [p + "sd"]),
            oh.make_node("Reciprocal", [p + "sd"], [inv]),
            oh.make_node("Mul", [p + "d", inv], [p + "n"]),
        ]
        if len(node.input) > 2 and node.input[2]:
            nodes += [oh.make_node("Mul", [p + "n", node.input[1]], [p + "s"]),
                      oh.make_node("Add", [p + "s", node.input[2]], [outs[0]])]
        else:
            nodes.append(oh.make_node("Mul", [p + "n", node.input[1]], [outs[0]]))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def reference(model, feeds):
    """onnxruntime's outputs, each output's amplification (norm, max), its
    error floor, and D: each element's largest change under the 1e-3
    perturbation (float64 arrays)."""
    model = expand_layer_norms(model)
    names = [o.name for o in model.graph.output]
    try:
        ref = ort_session(model).run(names, feeds)
    except Exception as e:  # noqa: BLE001
        raise GeneratorError(f"onnxruntime rejects the model: "
                             f"{str(e).splitlines()[0][:300]}")
    scales, arrays = cone_scales(model, feeds)
    floors = [FLOOR_REL * max(scales[n], 1e-30) for n in names]
    amp = [(0.0, 0.0)] * len(ref)
    sens = [np.zeros(r.shape) for r in ref]
    rng = np.random.default_rng(7)
    for _ in range(PERTURB_DRAWS):
        pert = perturb_every_result(model, arrays, rng)
        for init in pert.graph.initializer:
            if init.name.startswith("fuzz_noise_"):
                continue
            if init.data_type == onnx.TensorProto.FLOAT:
                arr = onh.to_array(init)
                arr = np.asarray(arr * (1 + PERTURB * rng.standard_normal(arr.shape)),
                                 dtype=np.float32)
                init.CopyFrom(onh.from_array(arr, init.name))
        pfeeds = {}
        for k, v in feeds.items():
            if v.dtype == np.float32:
                v = np.asarray(v * (1 + PERTURB * rng.standard_normal(v.shape)),
                               dtype=np.float32)
            pfeeds[k] = v
        other = ort_session(pert).run(names, pfeeds)
        for i, (r, p) in enumerate(zip(ref, other)):
            r64, p64 = r.astype(np.float64), p.astype(np.float64)
            dn = np.linalg.norm(p64 - r64)
            dm = float(np.max(np.abs(p64 - r64))) if r.size else 0.0
            kn = dn / max(np.linalg.norm(r64), floors[i] * np.sqrt(max(r.size, 1))) / PERTURB
            km = dm / max(float(np.max(np.abs(r64))) if r.size else 0.0, floors[i]) / PERTURB
            amp[i] = (max(amp[i][0], kn), max(amp[i][1], km))
            if r.dtype.kind == "f":
                sens[i] = np.fmax(sens[i], np.abs(p64 - r64))
    return names, ref, amp, floors, sens


def perturb_every_result(model, arrays, rng):
    """A copy of the model whose every float node result is multiplied by
    1 + PERTURB * N(0, 1), elementwise: rounding at every op, so that copies
    of one value (Concat(m, m), Expand, Tile) differ as they may in Kiln."""
    pert = copy.deepcopy(model)
    nodes = []
    for node in pert.graph.node:
        extra = []
        for k, o in enumerate(node.output):
            a = arrays.get(o)
            if not o or a is None or a.dtype != np.float32:
                continue
            raw, noise = f"fuzz_raw_{o}", f"fuzz_noise_{o}"
            node.output[k] = raw
            factor = (1 + PERTURB * rng.standard_normal(a.shape)).astype(np.float32)
            pert.graph.initializer.append(onh.from_array(np.asarray(factor), noise))
            extra.append(oh.make_node("Mul", [raw, noise], [o]))
        nodes += [node] + extra
    del pert.graph.node[:]
    pert.graph.node.extend(nodes)
    return pert


def cone_scales(model, feeds):
    """For every value: the largest |x| over it and everything it is computed
    from (inputs, weights, intermediates): the scale of its rounding errors."""
    full = copy.deepcopy(model)
    have = {o.name for o in full.graph.output}
    for node in full.graph.node:
        for o in node.output:
            if o and o not in have:
                full.graph.output.append(oh.make_empty_tensor_value_info(o))
                have.add(o)
    names = [o.name for o in full.graph.output]
    arrays = dict(zip(names, ort_session(full).run(names, feeds)))
    arrays.update(feeds)
    for init in model.graph.initializer:
        arrays[init.name] = onh.to_array(init)

    def own(name):
        a = arrays.get(name)
        if a is None or a.size == 0 or a.dtype.kind != "f":
            return 0.0
        return float(np.max(np.abs(a)))
    producer = {o: n for n in model.graph.node for o in n.output}
    scale = {}

    def visit(name):
        if name in scale:
            return scale[name]
        s = own(name)
        node = producer.get(name)
        if node is not None:
            for i in node.input:
                if i:
                    s = max(s, visit(i))
        scale[name] = s
        return s
    for name in names:
        visit(name)
    return scale, arrays


# --- Running Kiln ------------------------------------------------------------


class Tools:
    def __init__(self, kilnc, kiln_run, timeout):
        self.kilnc = kilnc
        self.kiln_run = kiln_run
        self.timeout = timeout


def crash_signature(text):
    """A short name for a crash: the assertion / LLVM ERROR text, or the
    first Kiln frame of the stack dump."""
    for line in text.splitlines():
        if "Assertion" in line or "LLVM ERROR" in line or "UNREACHABLE" in line:
            return re.sub(r"\s+", " ", line.strip())[:200]
    for line in text.splitlines():
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ (.*)", line)
        if m and ("kiln" in m.group(1).lower() or "anonymous namespace" in m.group(1)
                  or "Kiln" in m.group(1)):
            frame = re.sub(r"\(/[^)]*\)", "", m.group(1))
            return "crash in " + frame.strip()[:200]
    for line in text.splitlines():
        if line.strip() and not line.startswith(("PLEASE", "Stack dump", " ")):
            return line.strip()[:200]
    return "crash"


def run_variant(model_path, feeds, names, variant, workdir, tools, seed):
    """Compiles and runs one variant. Returns (status, detail, outputs):
    status 'ok' (outputs: name -> array), 'unsupported', 'crash',
    'compile-error', 'runtime-error' or 'timeout'."""
    os.makedirs(workdir, exist_ok=True)
    artifact = os.path.join(workdir, f"{variant}.kiln")
    env = dict(os.environ)
    env["KILN_PTXAS"] = ""
    cmd = [tools.kilnc, model_path, "-o", artifact] + variant_flags(variant)
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=tools.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"kilnc ran past {tools.timeout} s", None
    text = (run.stderr + run.stdout).strip()
    crashed = (run.returncode not in (0, 1) or
               any(m in text for m in CRASH_MARKERS))
    if crashed:
        how = (f"signal {-run.returncode}" if run.returncode < 0
               else f"exit {run.returncode}")
        return "crash", f"kilnc {how}: {crash_signature(text)}", None
    if run.returncode != 0:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) == 1 and UNSUPPORTED.search(lines[0]):
            return "unsupported", lines[0].replace(model_path, "MODEL"), None
        message = " | ".join(lines[:3]).replace(model_path, "MODEL")
        return "compile-error", message[:400], None
    outdir = os.path.join(workdir, f"{variant}.out")
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [tools.kiln_run, artifact, "--device", "emu", "-o", outdir]
    for i, name in enumerate(feeds):
        cmd += ["-i", f"{name}={os.path.join(workdir, f'in{i}.npy')}"]
    env = dict(os.environ)
    env.setdefault("KILN_EMU_THREADS", "1")
    env.setdefault("KILN_EMU_CHECK_SHARED", "1")
    env.setdefault("KILN_EMU_RANDOM_BLOCKS", str(seed % 1000 + 1))
    env.setdefault("KILN_EMU_MAX_STEPS", "200000000")
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=tools.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"kiln-run ran past {tools.timeout} s", None
    if run.returncode != 0:
        text = (run.stderr + run.stdout).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        how = (f"signal {-run.returncode}: " if run.returncode < 0 else "")
        return "runtime-error", how + " | ".join(lines[:3])[:400], None
    outs = {}
    for name in names:
        path = os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")
        outs[name] = np.load(path) if os.path.exists(path) else None
    return "ok", "", outs


def compare(names, ref, amp, floors, sens, outs, variant):
    """Per output: (name, ok, text, worst per-element ratio)."""
    precision = variant_precision(variant)
    tol = numerics.tolerance(precision)
    scale = ALLOWANCE * numerics.UNIT_ROUNDOFF[precision] / PERTURB
    rows = []
    for name, b, (kn, km), floor, d in zip(names, ref, amp, floors, sens):
        a = outs.get(name)
        if a is None:
            rows.append((name, False, "missing", None))
            continue
        if a.dtype != b.dtype:
            rows.append((name, False, f"dtype {a.dtype}", None))
            continue
        allowance = scale * d + tol.norm * floor
        result = numerics.compare(a, b, tol, name, allowance)
        text = (result.figures() + f", amplification {kn:.1f}/{km:.1f}")
        if not result.ok and not result.problem:
            text = "mismatch: " + text
        rows.append((name, result.ok, text,
                     None if result.problem else result.worst_ratio))
    return rows


def graph_text(model):
    try:
        return onnx.printer.to_text(model.graph)
    except Exception:  # noqa: BLE001
        return onnx.helper.printable_graph(model.graph)


# --- One graph, all variants ---------------------------------------------------


class Result:
    def __init__(self, seed):
        self.seed = seed
        self.statuses = {}     # variant -> 'pass' | 'unsupported' | 'fail'
        self.details = {}      # variant -> text
        self.signatures = {}   # variant -> failure class
        self.amps = []
        self.ratios = []       # (worst per-element ratio, variant, output)
        self.generator_error = None
        self.nodes = 0
        self.ops = collections.Counter()


def check_model(model, seed, variants, tools, workdir):
    """Runs every variant of one model; returns a Result (model and feeds
    are attached as .model and .feeds)."""
    res = Result(seed)
    res.model = model
    res.nodes = len(model.graph.node)
    res.ops.update(n.op_type for n in model.graph.node)
    feeds = make_inputs(model, seed)
    res.feeds = feeds
    try:
        names, ref, amp, floors, sens = reference(model, feeds)
    except GeneratorError as e:
        res.generator_error = str(e)
        return res
    res.amps = [max(a) for a in amp]
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    for i, arr in enumerate(feeds.values()):  # run_variant passes these
        np.save(os.path.join(workdir, f"in{i}.npy"), arr)
    for variant in variants:
        status, detail, outs = run_variant(path, feeds, names, variant,
                                           workdir, tools, seed)
        if status == "ok":
            rows = compare(names, ref, amp, floors, sens, outs, variant)
            res.ratios += [(r[3], variant, r[0]) for r in rows
                           if r[3] is not None]
            bad = [r for r in rows if not r[1]]
            lines = [f"  {r[0]} {list(ref[names.index(r[0])].shape)}: {r[2]}"
                     for r in rows]
            res.details[variant] = "\n".join(lines)
            if bad:
                res.statuses[variant] = "fail"
                kinds = sorted({"mismatch" if "rel-err" in r[2]
                                else r[2].split()[0] for r in bad})
                res.signatures[variant] = "wrong output: " + ",".join(kinds)
            else:
                res.statuses[variant] = "pass"
        elif status == "unsupported":
            res.statuses[variant] = "unsupported"
            res.details[variant] = detail
            res.signatures[variant] = detail
        else:
            res.statuses[variant] = "fail"
            res.details[variant] = detail
            res.signatures[variant] = (f"{status}: {detail}" if status != "crash"
                                       else detail)
    return res


def save_failure(res, variant, fail_dir):
    d = os.path.join(fail_dir, f"seed{res.seed}-{variant}")
    os.makedirs(d, exist_ok=True)
    onnx.save(res.model, os.path.join(d, "model.onnx"))
    np.savez(os.path.join(d, "inputs.npz"), **res.feeds)
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write(failure_report(res, variant))
    return d


def failure_report(res, variant):
    flags = " ".join(variant_flags(variant))
    return (f"FAIL seed {res.seed} variant {variant} (kilnc {flags or '(defaults)'}): "
            f"{res.signatures[variant]}\n{res.details[variant]}\n"
            f"{graph_text(res.model)}\n")


# --- Minimization -------------------------------------------------------------


def prune(model):
    """Drops nodes no output depends on, and unused inputs/initializers."""
    g = model.graph
    needed = {o.name for o in g.output}
    keep = []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    new = onnx.ModelProto()
    new.CopyFrom(model)
    del new.graph.node[:]
    new.graph.node.extend(keep)
    ins = [v for v in g.input if v.name in needed]
    del new.graph.input[:]
    new.graph.input.extend(ins)
    inits = [t for t in g.initializer if t.name in needed]
    del new.graph.initializer[:]
    new.graph.initializer.extend(inits)
    del new.graph.value_info[:]
    return new


def value_shapes(model):
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for v in list(inferred.graph.value_info) + list(inferred.graph.output) + \
            list(inferred.graph.input):
        tt = v.type.tensor_type
        shapes[v.name] = (tt.elem_type, [d.dim_value for d in tt.shape.dim])
    return shapes


def candidates(model):
    """Smaller models to try, most reducing first."""
    g = model.graph
    shapes = value_shapes(model)
    outs = [o.name for o in g.output]
    # 1. Drop one graph output.
    if len(outs) > 1:
        for name in outs:
            m = onnx.ModelProto()
            m.CopyFrom(model)
            keep = [o for o in m.graph.output if o.name != name]
            del m.graph.output[:]
            m.graph.output.extend(keep)
            yield f"drop output {name}", prune(m)
    nodes = list(g.node)
    producer = {o: n for n in nodes for o in n.output}
    graph_inputs = {v.name for v in g.input}
    # 2. Truncate: an output's producer goes, one of its operands is the output.
    for name in outs:
        node = producer.get(name)
        if node is None:
            continue
        for inp in node.input:
            if not inp or inp in graph_inputs or inp in outs or \
                    inp not in shapes or inp not in producer:
                continue
            m = onnx.ModelProto()
            m.CopyFrom(model)
            for o in m.graph.output:
                if o.name == name:
                    et, dims = shapes[inp]
                    o.CopyFrom(oh.make_tensor_value_info(inp, et, dims))
            yield f"truncate {node.op_type} ({name} -> {inp})", prune(m)
    # 3. Cut a node: its results become graph inputs.
    for idx, node in enumerate(nodes):
        if any(o in outs for o in node.output):
            continue
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.node[idx]
        for o in node.output:
            if o and o in shapes:
                et, dims = shapes[o]
                m.graph.input.append(oh.make_tensor_value_info(o, et, dims))
        yield f"cut {node.op_type} ({node.output[0]})", prune(m)
    # 4. Bypass a node: its users read an input with the same shape.
    for idx, node in enumerate(nodes):
        if len(node.output) != 1:
            continue
        out = node.output[0]
        for inp in node.input:
            if inp and inp in shapes and shapes[inp] == shapes.get(out) and \
                    inp not in outs:
                m = onnx.ModelProto()
                m.CopyFrom(model)
                del m.graph.node[idx]
                for n in m.graph.node:
                    for k, name in enumerate(n.input):
                        if name == out:
                            n.input[k] = inp
                renamed = False
                for o in m.graph.output:
                    if o.name == out:
                        o.name = inp
                        renamed = True
                if renamed and any(v.name == inp for v in m.graph.input):
                    continue  # an output may not be a graph input
                yield f"bypass {node.op_type} ({out})", prune(m)
                break


def minimize(model, seed, variant, tools, workdir, signature):
    """Greedy reduction while (variant, signature) persists."""
    def same_failure(m):
        try:
            validate(m, tracked=False)
        except GeneratorError:
            return False
        r = check_model(m, seed, [variant], tools, workdir)
        if r.generator_error or r.statuses.get(variant) != "fail":
            return False
        return r.signatures[variant] == signature

    steps = 0
    changed = True
    while changed:
        changed = False
        for what, cand in candidates(model):
            if len(cand.graph.node) == 0 or len(cand.graph.output) == 0:
                continue
            if same_failure(cand):
                print(f"  minimize: {what} -> {len(cand.graph.node)} nodes",
                      flush=True)
                model = cand
                steps += 1
                changed = True
                break
    return model


# --- Driver ----------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--variants", default="fused,unfused,rotate")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--failures", default="fuzz-failures",
                    help="where failing models are saved")
    ap.add_argument("--keep", help="keep every graph's work folder here")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--strict", action="store_true",
                    help="count 'unsupported' compile errors as failures")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--model", help="with --minimize (or alone): this model "
                    "instead of a generated one")
    ap.add_argument("--repros", metavar="DIR",
                    help="check every DIR/*.onnxtxt (ONNX textual syntax; a "
                    "'# variants: a,b' line names its variants) instead")
    ap.add_argument("--print-graph", action="store_true",
                    help="print every graph (textual syntax)")
    ap.add_argument("--verbose", action="store_true",
                    help="print every (graph, variant) result")
    args = ap.parse_args()

    tools = Tools(args.kilnc, args.kiln_run, args.timeout)
    spec = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in spec:
        if v not in ("rotate", "rotate-kernels"):
            variant_flags(v)  # validates

    if args.repros:
        return repros_main(args, tools)
    if args.minimize or args.model:
        return minimize_main(args, tools, spec)

    campaign = Campaign(
        args, tool="fusion-fuzz", unit="graphs", config="variant",
        compared="outputs", make_result=Result,
        check=lambda model, seed, variants, workdir: check_model(
            model, seed, variants, tools, workdir),
        save_failure=save_failure, failure_report=failure_report,
        graph_text=graph_text)
    return campaign.run(generate, lambda seed: variants_for(seed, spec))


def load_model(path):
    """An .onnx file, or ONNX textual syntax ('#' lines are comments)."""
    if path.endswith(".onnx"):
        return onnx.load(path)
    with open(path) as f:
        return onnx.parser.parse_model(f.read())


def repros_main(args, tools):
    """Checks saved reproducers: each must pass every variant it names."""
    return check_repros(
        args.repros, tool="fusion-fuzz", config="variant",
        default_configs=["fused", "unfused"],
        load=lambda path, text: load_model(path),
        check=lambda model, variants, work: check_model(
            model, args.seed, variants, tools, work),
        failure_report=failure_report)


def minimize_main(args, tools, spec):
    if args.model:
        model = load_model(args.model)
        seed = args.seed
    else:
        model = generate(args.seed)
        seed = args.seed
    variants = variants_for(seed, spec)
    work = tempfile.mkdtemp(prefix="fusion-fuzz-min-")
    res = check_model(model, seed, variants, tools, work)
    if res.generator_error:
        print(f"onnxruntime rejects the model: {res.generator_error}")
        return 1
    failing = [v for v in variants if res.statuses.get(v) == "fail"]
    for v in variants:
        print(f"seed {seed} {v}: {res.statuses[v]}"
              + (f": {res.signatures[v]}" if v in res.signatures else ""))
    if not args.minimize:
        for v in failing:
            print(failure_report(res, v))
        shutil.rmtree(work, ignore_errors=True)
        return 1 if failing else 0
    if not failing:
        print("nothing to minimize: no variant fails")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    for variant in failing:
        sig = res.signatures[variant]
        print(f"minimizing seed {seed} {variant}: {sig} "
              f"({len(model.graph.node)} nodes)", flush=True)
        small = minimize(model, seed, variant, tools, work, sig)
        r = check_model(small, seed, [variant], tools, work)
        d = save_failure(r, variant, os.path.join(args.failures, "minimized"))
        print(failure_report(r, variant) + f"saved to {d}\n", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
