"""The random ONNX graph generator the fuzzers share (fusion_fuzz.py,
train_fuzz.py's TrainBuilder).

Builder draws one graph per seed: 1-3 float inputs of small random shapes
(an image N, C, H, W now and then), then 3-12 nodes, each from an op
generator drawn by its weight in OPS (the generators live by family in
fuzz_ops_movement.py, fuzz_ops_compute.py and fuzz_ops_pool_norm.py).
Every dead end is a graph output, and any other intermediate one with
probability 1/4. generate(seed) returns the validated model.
"""
import onnx
import onnx.helper as oh

from fuzz_graph import OPSET, GraphCore, validate
from fuzz_ops_attention import AttentionOps
from fuzz_ops_compute import ComputeOps
from fuzz_ops_movement import MovementOps
from fuzz_ops_pool_norm import PoolNormOps
from fuzz_ops_recurrent import RecurrentOps


class Builder(GraphCore, MovementOps, ComputeOps, PoolNormOps, RecurrentOps,
              AttentionOps):
    """Builds one random graph, tracking every value's shape."""

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
        ("op_conv_auto_pad", 0.4), ("op_maxpool", 0.5), ("op_avgpool", 0.5),
        ("op_global_pool", 0.3), ("op_batchnorm", 0.4), ("op_instancenorm", 0.3),
    ]  # op_recurrent: only with --focus recurrent (fuzz_ops_recurrent.py);
    # op_sdpa: only with --focus attention (fuzz_ops_attention.py)

    def build(self):
        self.draw_inputs()
        self.draw_nodes()
        return self.finish()

    def draw_inputs(self):
        nin = self.choice([1, 2, 3], p=[5, 4, 1])
        for _ in range(nin):
            shape = self.random_shape()
            if self.chance(0.3):  # an image: N, C, H, W
                shape = (self.randint(1, 2), self.randint(1, 4),
                         self.randint(2, 6), self.randint(2, 6))
            self.float_input(shape)

    def draw_nodes(self):
        target = self.randint(3, 12)
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        attempts = 0
        while len(self.nodes) < target and attempts < 200:
            attempts += 1
            gen = getattr(self, self.choice(names, p=weights))
            gen()

    def finish(self):
        """The model: every dead end is an output, and intermediates at
        random."""
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

FAMILIES = {"movement": MovementOps, "compute": ComputeOps,
            "pool-norm": PoolNormOps, "recurrent": RecurrentOps,
            "attention": AttentionOps}
FOCUS = 12                # --focus: a family's generators this many times as often


def focused(base, family):
    """`base` (a Builder class) with the generators of one family of
    FAMILIES drawn FOCUS times as often (fusion_fuzz.py --focus); a
    family's generators that `base` does not draw (the recurrent layers,
    attention blocks) join with weight FOCUS."""
    if family is None:
        return base
    ops = sorted(n for n in vars(FAMILIES[family]) if n.startswith("op_"))
    known = {n for n, _ in base.OPS}
    return type(f"{base.__name__}Focused", (base,), {"OPS": [
        (n, w * FOCUS if n in ops else w) for n, w in base.OPS] + [
        (n, FOCUS) for n in ops if n not in known]})


def generate(seed, builder=Builder):
    """The seed's model; raises GeneratorError when it is not valid ONNX or
    the tracked shapes disagree with ONNX shape inference."""
    model = builder(seed).build()
    validate(model)
    return model
