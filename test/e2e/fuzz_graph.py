"""Graph assembly for the random-model generators (fuzz_generator.py).

GraphCore holds one graph while it is drawn: the seeded random stream, the
nodes, initializers and graph inputs, every float value with its tracked
shape, and the helpers the op generators (fuzz_ops_*.py) share: fresh
names, constants and weights, operand picking (recent values more often,
so graphs are deep), random shapes and axis spelling. validate() is the
check every generated or reduced model passes: onnx.checker (full check)
and strict ONNX shape inference, which must agree with the tracked shapes.
"""
import collections

import numpy as np
import onnx
import onnx.checker
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnx.shape_inference

OPSET = 17
MAX_ELEMS = 1024          # per tensor: keeps emu runs short
INT64_MAX = 2**63 - 1
INT64_MIN = -2**63


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



class GraphCore:
    """One random graph being built, tracking every value's shape."""

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

