#!/usr/bin/env python3
"""Builds a reproduction of torchvision's Swin-T as the TorchScript exporter
writes it, as an ONNX model (no PyTorch here: the graph is written with the
onnx helper API, node for node in the exporter's patterns).

Usage: make_swin.py OUTPUT.onnx [--size 40 --dim 32 --heads 2 --window 7]
                                [--declared-dims minus-one|wrong-output]

What it reproduces (torchvision/models/swin_transformer.py at a static
input shape, exported with torch.onnx.export, opset 17):
  - patch embedding: Conv 4x4 stride 4, Transpose to NHWC, LayerNorm;
  - two Swin blocks (shift 0, then shift window//2), each:
    * window padding: pad_r = (w - W % w) % w and pad_b likewise, computed
      from Shape -> Gather -> Mod -> Sub -> Mod, the pad list built by
      Unsqueeze + Concat, then the exporter's _prepare_onnx_paddings chain
      (ConstantOfShape, Concat, Reshape [-1, 2], Slice with step -1,
      Transpose, Reshape [-1], Cast) into Pad;
    * cyclic shift (torch.roll): Slice + Concat on H then W;
    * window partition: Reshape with a shape from Shape arithmetic (Div,
      Mul, Concat), Transpose, Reshape;
    * attention: MatMul qkv, Reshape/Transpose into heads, scale, MatMul,
      relative position bias (Gather of the bias table by a constant index,
      Reshape, Transpose, Unsqueeze), the shifted-window mask (region ids
      from Range over the padded size, GreaterOrEqual, Cast, Mul, Add,
      Sub of Unsqueezes, Equal/Not/Where), Softmax, MatMul, projection;
    * window reverse, reverse roll, and the unpad Slice whose ends are
      Gathers of the input's Shape;
    * LayerNorm and an MLP with the exact (Erf) GELU, residual Adds;
  - patch merging: pad by H % 2 and W % 2 (Mod), the four strided Slices,
    Concat, LayerNorm, and the reduction MatMul.
Weights are seeded (numpy default_rng(0)). --declared-dims minus-one writes
-1 for the input's batch dim and for every output dim (what some exporters
do for "unknown"); --declared-dims wrong-output declares a wrong output
shape (the inferred one must be used, with a warning).
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INT64_MAX = 9223372036854775807


class Builder:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.consts = {}

    def node(self, op, inputs, n_out=1, **attrs):
        name = f"{op.lower()}_{len(self.nodes)}"
        outs = [f"{name}_out{i}" if n_out > 1 else f"{name}_out"
                for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def i64(self, values):
        """A constant int64 tensor (a Constant node, as the exporter writes
        scalars and lists)."""
        arr = np.array(values, dtype=np.int64)
        key = (arr.shape, tuple(arr.ravel()))
        if key not in self.consts:
            name = f"const_{len(self.consts)}"
            self.nodes.append(helper.make_node(
                "Constant", [], [name], name=name + "_node",
                value=numpy_helper.from_array(arr, name)))
            self.consts[key] = name
        return self.consts[key]

    def f32(self, value):
        arr = np.array(value, dtype=np.float32)
        key = ("f", arr.shape, tuple(arr.ravel()))
        if key not in self.consts:
            name = f"fconst_{len(self.consts)}"
            self.nodes.append(helper.make_node(
                "Constant", [], [name], name=name + "_node",
                value=numpy_helper.from_array(arr, name)))
            self.consts[key] = name
        return self.consts[key]

    def weight(self, name, shape, std=0.05, mean=0.0):
        data = mean + self.rng.standard_normal(shape) * std
        self.inits.append(numpy_helper.from_array(data.astype(np.float32), name))
        return name

    # Shape helpers in the exporter's style.
    def dim(self, x, axis):
        """x.size(axis): Shape -> Gather(scalar index) -> a 0-d int64."""
        return self.node("Gather", [self.node("Shape", [x]), self.i64(axis)],
                         axis=0)

    def unsq(self, scalar):
        return self.node("Unsqueeze", [scalar, self.i64([0])])

    def shape_of(self, *parts):
        """A shape list of scalars (0-d tensors) and Python ints, as
        prim::ListConstruct exports: Unsqueeze each and Concat."""
        items = [self.i64([p]) if isinstance(p, int) else self.unsq(p)
                 for p in parts]
        return self.node("Concat", items, axis=0)

    def linear(self, x, n_in, n_out, prefix):
        y = self.node("MatMul", [x, self.weight(prefix + ".weight", (n_in, n_out))])
        return self.node("Add", [y, self.weight(prefix + ".bias", (n_out,), 0.02)])

    def layer_norm(self, x, c, prefix):
        g = self.weight(prefix + ".weight", (c,), 0.1, 1.0)
        b = self.weight(prefix + ".bias", (c,), 0.02)
        return self.node("LayerNormalization", [x, g, b], axis=-1, epsilon=1e-5)

    def gelu(self, u):
        erf = self.node("Erf", [self.node("Div", [u, self.f32(1.4142135381698608)])])
        return self.node("Mul", [self.node("Mul", [u, self.node("Add", [erf, self.f32(1.0)])]),
                                 self.f32(0.5)])

    def pad_nhwc(self, x, pad_r, pad_b):
        """F.pad(x, (0, 0, 0, pad_r, 0, pad_b)) through the exporter's
        _prepare_onnx_paddings: the torch pad list (last dim first, begin/end
        pairs) turned into ONNX pads (all begins, then all ends)."""
        pad = self.shape_of(0, 0, 0, pad_r, 0, pad_b)              # 6 values
        rank = 4
        pad_len = self.node("Gather", [self.node("Shape", [pad]), self.i64(0)], axis=0)
        extension = self.node("Sub", [self.node("Mul", [self.i64(rank), self.i64(2)]), pad_len])
        pad = self.node("Cast", [pad], to=TensorProto.INT64)
        zeros = self.node("ConstantOfShape", [self.unsq(extension)],
                          value=numpy_helper.from_array(np.array([0], np.int64)))
        paddings = self.node("Concat", [pad, zeros], axis=0)
        paddings = self.node("Reshape", [paddings, self.i64([-1, 2])])
        paddings = self.node("Slice", [paddings, self.i64([-1]), self.i64([-INT64_MAX]),
                                       self.i64([0]), self.i64([-1])])
        paddings = self.node("Transpose", [paddings], perm=[1, 0])
        paddings = self.node("Reshape", [paddings, self.i64([-1])])
        paddings = self.node("Cast", [paddings], to=TensorProto.INT64)
        return self.node("Pad", [x, paddings, self.f32(0.0)], mode="constant")

    def roll(self, x, shifts, axes):
        """torch.roll: per dim, Concat(Slice(x, -s, INT_MAX), Slice(x, 0, -s))."""
        for s, axis in zip(shifts, axes):
            if s == 0:
                continue
            a = self.node("Slice", [x, self.i64([-s]), self.i64([INT64_MAX]), self.i64([axis])])
            b = self.node("Slice", [x, self.i64([0]), self.i64([-s]), self.i64([axis])])
            x = self.node("Concat", [a, b], axis=axis)
        return x


def relative_position_index(w):
    coords = np.stack(np.meshgrid(np.arange(w), np.arange(w), indexing="ij"))
    flat = coords.reshape(2, -1)
    rel = (flat[:, :, None] - flat[:, None, :]).transpose(1, 2, 0)
    rel[:, :, 0] += w - 1
    rel[:, :, 1] += w - 1
    rel[:, :, 0] *= 2 * w - 1
    return rel.sum(-1).reshape(-1).astype(np.int64)


def swin_block(m, x, c, heads, w, shift, prefix):
    """torchvision's SwinTransformerBlock: x + attn(norm1(x)), then
    x + mlp(norm2(x)); x is [B, H, W, C]."""
    y = m.layer_norm(x, c, prefix + ".norm1")
    B, H, W = m.dim(y, 0), m.dim(y, 1), m.dim(y, 2)
    ws = m.i64(w)
    pad_r = m.node("Mod", [m.node("Sub", [ws, m.node("Mod", [W, ws])]), ws])
    pad_b = m.node("Mod", [m.node("Sub", [ws, m.node("Mod", [H, ws])]), ws])
    y = m.pad_nhwc(y, pad_r, pad_b)
    pad_H, pad_W = m.dim(y, 1), m.dim(y, 2)
    if shift:
        y = m.roll(y, (-shift, -shift), (1, 2))
    nh = m.node("Div", [pad_H, ws])
    nw = m.node("Div", [pad_W, ws])
    num_windows = m.node("Mul", [nh, nw])
    y = m.node("Reshape", [y, m.shape_of(B, nh, w, nw, w, c)])
    y = m.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5])
    y = m.node("Reshape", [y, m.shape_of(m.node("Mul", [B, num_windows]), w * w, c)])
    # Attention inside each window.
    hd = c // heads
    qkv = m.linear(y, c, 3 * c, prefix + ".attn.qkv")
    n0, n1 = m.dim(y, 0), m.dim(y, 1)
    qkv = m.node("Reshape", [qkv, m.shape_of(n0, n1, 3, heads, hd)])
    qkv = m.node("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q = m.node("Gather", [qkv, m.i64(0)], axis=0)
    k = m.node("Gather", [qkv, m.i64(1)], axis=0)
    v = m.node("Gather", [qkv, m.i64(2)], axis=0)
    q = m.node("Mul", [q, m.f32(hd ** -0.5)])
    attn = m.node("MatMul", [q, m.node("Transpose", [k], perm=[0, 1, 3, 2])])
    table = m.weight(prefix + ".attn.relative_position_bias_table",
                     ((2 * w - 1) ** 2, heads), 0.02)
    index = prefix + ".attn.relative_position_index"
    m.inits.append(numpy_helper.from_array(relative_position_index(w), index))
    bias = m.node("Gather", [table, index], axis=0)
    bias = m.node("Reshape", [bias, m.i64([w * w, w * w, -1])])
    bias = m.node("Transpose", [bias], perm=[2, 0, 1])
    bias = m.node("Unsqueeze", [bias, m.i64([0])])
    attn = m.node("Add", [attn, bias])
    if shift:
        # The mask: region ids over the padded plane, computed from its size
        # (h >= pad_H - w) + (h >= pad_H - s), likewise for W.
        def regions(size):
            r = m.node("Range", [m.i64(0), size, m.i64(1)])
            lo = m.node("Cast", [m.node("GreaterOrEqual", [r, m.node("Sub", [size, ws])])],
                        to=TensorProto.FLOAT)
            hi = m.node("Cast", [m.node("GreaterOrEqual", [r, m.node("Sub", [size, m.i64(shift)])])],
                        to=TensorProto.FLOAT)
            return m.node("Add", [lo, hi])
        rh = m.node("Unsqueeze", [regions(pad_H), m.i64([1])])
        rw = m.node("Unsqueeze", [regions(pad_W), m.i64([0])])
        mask = m.node("Add", [m.node("Mul", [rh, m.f32(3.0)]), rw])       # [pad_H, pad_W]
        mask = m.node("Reshape", [mask, m.shape_of(nh, w, nw, w)])
        mask = m.node("Transpose", [mask], perm=[0, 2, 1, 3])
        mask = m.node("Reshape", [mask, m.shape_of(num_windows, w * w)])
        mask = m.node("Sub", [m.node("Unsqueeze", [mask, m.i64([1])]),
                              m.node("Unsqueeze", [mask, m.i64([2])])])
        nonzero = m.node("Not", [m.node("Equal", [mask, m.f32(0.0)])])
        mask = m.node("Where", [nonzero, m.f32(-100.0), mask])
        attn = m.node("Reshape", [attn, m.shape_of(m.node("Div", [n0, num_windows]),
                                                   num_windows, heads, n1, n1)])
        mask = m.node("Unsqueeze", [mask, m.i64([0, 2])])
        attn = m.node("Add", [attn, mask])
        attn = m.node("Reshape", [attn, m.shape_of(-1, heads, n1, n1)])
    attn = m.node("Softmax", [attn], axis=-1)
    y = m.node("Transpose", [m.node("MatMul", [attn, v])], perm=[0, 2, 1, 3])
    y = m.node("Reshape", [y, m.shape_of(n0, n1, c)])
    y = m.linear(y, c, c, prefix + ".attn.proj")
    # Window reverse, reverse roll, unpad.
    y = m.node("Reshape", [y, m.shape_of(B, nh, nw, w, w, c)])
    y = m.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5])
    y = m.node("Reshape", [y, m.shape_of(B, pad_H, pad_W, c)])
    if shift:
        y = m.roll(y, (shift, shift), (1, 2))
    y = m.node("Slice", [y, m.i64([0, 0]), m.shape_of(H, W), m.i64([1, 2])])
    x = m.node("Add", [x, y])
    z = m.layer_norm(x, c, prefix + ".norm2")
    z = m.linear(m.gelu(m.linear(z, c, 4 * c, prefix + ".mlp.0")), 4 * c, c, prefix + ".mlp.3")
    return m.node("Add", [x, z])


def patch_merging(m, x, c, prefix):
    H, W = m.dim(x, 1), m.dim(x, 2)
    two = m.i64(2)
    x = m.pad_nhwc(x, m.node("Mod", [W, two]), m.node("Mod", [H, two]))
    parts = []
    for h0, w0 in ((0, 0), (1, 0), (0, 1), (1, 1)):
        parts.append(m.node("Slice", [x, m.i64([h0, w0]), m.i64([INT64_MAX, INT64_MAX]),
                                      m.i64([1, 2]), m.i64([2, 2])]))
    x = m.node("Concat", parts, axis=-1)
    x = m.layer_norm(x, 4 * c, prefix + ".norm")
    return m.node("MatMul", [x, m.weight(prefix + ".reduction.weight", (4 * c, 2 * c))])


def build(args):
    m = Builder()
    c = args.dim
    x = m.node("Conv", ["image", m.weight("features.0.0.weight", (c, 3, 4, 4), 0.2),
                        m.weight("features.0.0.bias", (c,), 0.02)],
               kernel_shape=[4, 4], strides=[4, 4])
    x = m.node("Transpose", [x], perm=[0, 2, 3, 1])
    x = m.layer_norm(x, c, "features.0.2")
    x = swin_block(m, x, c, args.heads, args.window, 0, "features.1.0")
    x = swin_block(m, x, c, args.heads, args.window, args.window // 2, "features.1.1")
    x = patch_merging(m, x, c, "features.2")
    m.nodes[-1].output[0] = "features"

    side = args.size // 4
    out_side = (side + 1) // 2
    in_shape = [1, 3, args.size, args.size]
    out_shape = [1, out_side, out_side, 2 * c]
    if args.declared_dims == "minus-one":
        in_shape[0] = -1
        out_shape = [-1] * 4
    elif args.declared_dims == "wrong-output":
        out_shape = [1, out_side + 3, out_side, c]
    graph = helper.make_graph(
        m.nodes, "swin_t_reproduction",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, out_shape)],
        m.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-test")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output")
    ap.add_argument("--size", type=int, default=40)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--window", type=int, default=7)
    ap.add_argument("--declared-dims", choices=["minus-one", "wrong-output"])
    args = ap.parse_args()
    onnx.save(build(args), args.output)


if __name__ == "__main__":
    main()
