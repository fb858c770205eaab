"""An ONNX graph evaluated in jax.numpy, op by op from the ONNX operator
definitions (opset 17), for float64 references that jax.grad differentiates.

Used by train_fuzz.py (the training-step differential fuzzer). It covers
the differentiable ops that fusion_fuzz.py's generator emits: Gather,
GatherElements, Slice, Pad (constant, reflect, edge; negative pads),
Concat, Split, Expand, Tile, Transpose, Reshape, Flatten, Squeeze,
Unsqueeze, Add, Sub, Mul, Min, Max, Relu, Sigmoid, Tanh, Neg, Clip (constant
bounds), MatMul,
Gemm, Conv (1-D and 2-D, groups, strides, dilations, explicit pads),
ReduceSum, ReduceMean, Softmax, LogSoftmax, LayerNormalization (with its
Mean and InvStdDev outputs), MaxPool and AveragePool (1-D and 2-D: explicit
pads, auto_pad, strides, dilations, ceil_mode, count_include_pad),
GlobalAveragePool, GlobalMaxPool, InstanceNormalization and
BatchNormalization (batch statistics or running ones, see run()). Integer operands (indices, shapes, axes) must
be initializers: they are read as numpy constants, never traced.

`run(model, params, feeds, hook=None)` returns every value by name. `hook`,
when given, is called as hook(name, value) on every float node result and
its return value is used instead (train_fuzz.py multiplies by noise there).
Nothing here knows about Kiln.
"""
import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh


class Unsupported(Exception):
    pass


def _attrs(node):
    return {a.name: oh.get_attribute_value(a) for a in node.attribute}


def _slice_indices(d, start, end, step):
    """The indices ONNX Slice takes along one axis of length d."""
    if start < 0:
        start += d
    if end < 0:
        end += d
    if step > 0:
        start = min(max(start, 0), d)
        end = min(max(end, 0), d)
    else:
        start = min(max(start, 0), d - 1)
        end = min(max(end, -1), d - 1)
    return np.arange(start, end, step, dtype=np.int64)


def _window_geometry(d, k, s, dl, pb, pe, auto_pad, ceil):
    """(pad begin, pad end, output size) of one spatial dim of a window op
    (ONNX MaxPool/AveragePool: explicit pads with floor or ceil rounding,
    where a last window that would start past the input and its head
    padding is dropped; SAME_UPPER/SAME_LOWER; VALID)."""
    span = dl * (k - 1) + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-d // s)
        total = max(0, (out - 1) * s + span - d)
        small = total // 2
        pb, pe = ((small, total - small) if auto_pad == "SAME_UPPER"
                  else (total - small, small))
        return pb, pe, out
    if auto_pad == "VALID":
        return 0, 0, (d - span) // s + 1
    room = d + pb + pe - span
    out = (-(-room // s) if ceil else room // s) + 1
    if ceil and (out - 1) * s >= d + pb:
        out -= 1
    return pb, pe, out


def _pool(op, x, a, jnp):
    """MaxPool or AveragePool over the spatial dims of [N, C, D...]."""
    nsp = x.ndim - 2
    kernel = list(a["kernel_shape"])
    strides = list(a.get("strides", [1] * nsp))
    dils = list(a.get("dilations", [1] * nsp))
    pads = list(a.get("pads", [0] * (2 * nsp)))
    auto_pad = a.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    ceil = bool(a.get("ceil_mode", 0))
    include_pad = bool(a.get("count_include_pad", 0))
    geo = [_window_geometry(x.shape[i + 2], kernel[i], strides[i], dils[i],
                            pads[i], pads[i + nsp], auto_pad, ceil)
           for i in range(nsp)]
    # Padded so that every window lies inside: the head pad, the input,
    # then up to the last window's end (at least the tail pad).
    widths = [(0, 0), (0, 0)]
    for i, (pb, pe, out) in enumerate(geo):
        need = (out - 1) * strides[i] + dils[i] * (kernel[i] - 1) + 1
        widths.append((pb, max(pe, need - x.shape[i + 2] - pb)))
    if op == "MaxPool":
        xp = jnp.pad(x, widths, constant_values=-np.inf)
    else:
        xp = jnp.pad(x, widths)
        # The count of each window: the input's elements, or with
        # count_include_pad the explicit padding's too (not what lies
        # past the tail pad in ceil mode).
        mask = np.zeros([w0 + n + w1 for (w0, w1), n in zip(widths, x.shape)])
        inner = tuple(slice(None) if i < 2 else
                      (slice(0, geo[i - 2][0] + x.shape[i] + geo[i - 2][1])
                       if include_pad else
                       slice(geo[i - 2][0], geo[i - 2][0] + x.shape[i]))
                      for i in range(x.ndim))
        mask[inner] = 1.0
    windows, counts = [], []
    for flat in range(int(np.prod(kernel))):
        idx, rest = [], flat
        for i in reversed(range(nsp)):
            idx.append(rest % kernel[i])
            rest //= kernel[i]
        idx = idx[::-1]
        sl = (slice(None), slice(None)) + tuple(
            slice(idx[i] * dils[i],
                  idx[i] * dils[i] + (geo[i][2] - 1) * strides[i] + 1, strides[i])
            for i in range(nsp))
        windows.append(xp[sl])
        if op == "AveragePool":
            counts.append(mask[sl])
    stack = jnp.stack(windows)
    if op == "MaxPool":
        return jnp.max(stack, axis=0)
    return jnp.sum(stack, axis=0) / np.sum(counts, axis=0)


def run(model, params, feeds, hook=None, bn_training=True, stats=None):
    """Evaluates `model`'s graph; params: float initializers (traced),
    feeds: graph inputs. Returns a dict of every value.

    BatchNormalization normalises with the batch's statistics when
    `bn_training` (as kiln-autodiff trains it; its running mean and
    variance are then unused, and `stats`, a dict when given, gets each
    node's (batch mean, biased batch variance) per channel under its
    output's name), else with its running statistics (ONNX inference, what
    onnxruntime computes)."""
    import jax.numpy as jnp
    from jax import lax

    env = {}
    consts = {}
    for init in model.graph.initializer:
        arr = onh.to_array(init)
        if init.name in params:
            env[init.name] = params[init.name]
        else:
            consts[init.name] = arr
            env[init.name] = jnp.asarray(arr)
    env.update(feeds)

    def const(name):
        if name not in consts:
            raise Unsupported(f"'{name}' must be a constant initializer")
        return consts[name]

    def axis_of(a, rank):
        return a + rank if a < 0 else a

    for node in model.graph.node:
        op, a = node.op_type, _attrs(node)
        x = [env[i] if i else None for i in node.input]
        outs = None
        if op in ("Add", "Sub", "Mul"):
            f = {"Add": jnp.add, "Sub": jnp.subtract, "Mul": jnp.multiply}[op]
            outs = [f(x[0], x[1])]
        elif op in ("Min", "Max"):
            f = jnp.minimum if op == "Min" else jnp.maximum
            r = x[0]
            for v in x[1:]:
                r = f(r, v)
            outs = [r]
        elif op == "Relu":
            outs = [jnp.where(x[0] > 0, x[0], 0.0)]  # derivative 0 at 0
        elif op == "Sigmoid":
            outs = [1 / (1 + jnp.exp(-x[0]))]
        elif op == "Tanh":
            outs = [jnp.tanh(x[0])]
        elif op == "Neg":
            outs = [-x[0]]
        elif op == "Clip":
            y = x[0]
            if len(node.input) > 1 and node.input[1]:
                y = jnp.maximum(y, const(node.input[1]))
            if len(node.input) > 2 and node.input[2]:
                y = jnp.minimum(y, const(node.input[2]))
            outs = [y]
        elif op == "MatMul":
            outs = [jnp.matmul(x[0], x[1])]
        elif op == "Gemm":
            A = x[0].T if a.get("transA", 0) else x[0]
            B = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2 and x[2] is not None:
                y = y + a.get("beta", 1.0) * x[2]
            outs = [y]
        elif op == "Conv":
            nsp = x[0].ndim - 2
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise Unsupported("Conv auto_pad")
            pads = a.get("pads", [0] * (2 * nsp))
            spec = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW")}[nsp]
            y = lax.conv_general_dilated(
                x[0], x[1], tuple(a.get("strides", [1] * nsp)),
                [(pads[i], pads[i + nsp]) for i in range(nsp)],
                rhs_dilation=tuple(a.get("dilations", [1] * nsp)),
                dimension_numbers=spec,
                feature_group_count=a.get("group", 1))
            if len(x) > 2 and x[2] is not None:
                y = y + x[2].reshape((1, -1) + (1,) * nsp)
            outs = [y]
        elif op in ("ReduceSum", "ReduceMean"):
            rank = x[0].ndim
            if op == "ReduceSum":
                axes = (const(node.input[1]).tolist()
                        if len(node.input) > 1 and node.input[1] else None)
            else:
                axes = a.get("axes")
            axes = (tuple(range(rank)) if not axes else
                    tuple(sorted(axis_of(int(v), rank) for v in axes)))
            f = jnp.sum if op == "ReduceSum" else jnp.mean
            outs = [f(x[0], axis=axes, keepdims=bool(a.get("keepdims", 1)))]
        elif op in ("Softmax", "LogSoftmax"):
            axis = a.get("axis", -1)
            z = x[0] - lax.stop_gradient(jnp.max(x[0], axis=axis, keepdims=True))
            lse = jnp.log(jnp.sum(jnp.exp(z), axis=axis, keepdims=True))
            outs = [jnp.exp(z - lse) if op == "Softmax" else z - lse]
        elif op == "LayerNormalization":
            rank = x[0].ndim
            axis = axis_of(a.get("axis", -1), rank)
            axes = tuple(range(axis, rank))
            mean = jnp.mean(x[0], axis=axes, keepdims=True)
            d = x[0] - mean
            var = jnp.mean(d * d, axis=axes, keepdims=True)
            inv = 1 / jnp.sqrt(var + a.get("epsilon", 1e-5))
            y = d * inv * x[1]
            if len(x) > 2 and x[2] is not None:
                y = y + x[2]
            outs = [y, mean, inv]
        elif op == "Gather":
            data = x[0]
            axis = axis_of(a.get("axis", 0), data.ndim)
            idx = const(node.input[1]) % data.shape[axis]
            outs = [jnp.take(data, idx, axis=axis)]
        elif op == "GatherElements":
            data = x[0]
            axis = axis_of(a.get("axis", 0), data.ndim)
            idx = const(node.input[1]) % data.shape[axis]
            # The indices may be shorter than the data in the other dims
            # (ONNX), where numpy would broadcast them: cut the data first.
            data = data[tuple(slice(None) if i == axis else slice(0, n)
                              for i, n in enumerate(idx.shape))]
            outs = [jnp.take_along_axis(data, idx, axis=axis)]
        elif op == "Slice":
            data = x[0]
            starts = const(node.input[1]).tolist()
            ends = const(node.input[2]).tolist()
            axes = (const(node.input[3]).tolist()
                    if len(node.input) > 3 and node.input[3]
                    else list(range(len(starts))))
            steps = (const(node.input[4]).tolist()
                     if len(node.input) > 4 and node.input[4] else [1] * len(starts))
            y = data
            for s, e, ax, st in zip(starts, ends, axes, steps):
                ax = axis_of(ax, data.ndim)
                y = jnp.take(y, _slice_indices(data.shape[ax], s, e, st), axis=ax)
            outs = [y]
        elif op == "Pad":
            data = x[0]
            pads = const(node.input[1]).tolist()
            r = data.ndim
            mode = a.get("mode", b"constant")
            mode = mode.decode() if isinstance(mode, bytes) else mode
            # Negative pads crop first.
            y = data
            for ax in range(r):
                lo, hi = pads[ax], pads[ax + r]
                n = y.shape[ax]
                y = lax.slice_in_dim(y, max(-lo, 0), n - max(-hi, 0), axis=ax)
            widths = [(max(pads[i], 0), max(pads[i + r], 0)) for i in range(r)]
            if mode == "constant":
                # value * (1 in the padding): differentiable in the value.
                mask = np.pad(np.zeros(y.shape), widths, constant_values=1.0)
                y = jnp.pad(y, widths)
                if len(x) > 2 and x[2] is not None:
                    y = y + x[2] * mask
            else:
                y = jnp.pad(y, widths, mode={"reflect": "reflect", "edge": "edge"}[mode])
            outs = [y]
        elif op == "Concat":
            outs = [jnp.concatenate(x, axis=a["axis"])]
        elif op == "Split":
            data = x[0]
            axis = axis_of(a.get("axis", 0), data.ndim)
            if len(node.input) > 1 and node.input[1]:
                sizes = const(node.input[1]).tolist()
            else:
                n = len(node.output)
                sizes = [data.shape[axis] // n] * n
            cuts = np.cumsum(sizes)[:-1].tolist()
            outs = jnp.split(data, cuts, axis=axis)
        elif op == "Expand":
            shape = np.broadcast_shapes(tuple(x[0].shape),
                                        tuple(const(node.input[1]).tolist()))
            outs = [jnp.broadcast_to(x[0], shape)]
        elif op == "Tile":
            outs = [jnp.tile(x[0], tuple(const(node.input[1]).tolist()))]
        elif op == "Transpose":
            perm = a.get("perm", list(range(x[0].ndim))[::-1])
            outs = [jnp.transpose(x[0], perm)]
        elif op == "Reshape":
            shape = const(node.input[1]).tolist()
            shape = [x[0].shape[i] if v == 0 else v for i, v in enumerate(shape)]
            outs = [jnp.reshape(x[0], shape)]
        elif op == "Flatten":
            axis = axis_of(a.get("axis", 1), x[0].ndim)
            s = x[0].shape
            outs = [jnp.reshape(x[0], (int(np.prod(s[:axis])), int(np.prod(s[axis:]))))]
        elif op == "Squeeze":
            if len(node.input) > 1 and node.input[1]:
                axes = tuple(axis_of(int(v), x[0].ndim) for v in const(node.input[1]))
            else:
                axes = tuple(i for i, d in enumerate(x[0].shape) if d == 1)
            outs = [jnp.squeeze(x[0], axis=axes)]
        elif op == "Unsqueeze":
            r = x[0].ndim + len(const(node.input[1]))
            axes = sorted(axis_of(int(v), r) for v in const(node.input[1]))
            y = x[0]
            for ax in axes:
                y = jnp.expand_dims(y, ax)
            outs = [y]
        elif op in ("MaxPool", "AveragePool"):
            outs = [_pool(op, x[0], a, jnp)]
        elif op in ("GlobalAveragePool", "GlobalMaxPool"):
            axes = tuple(range(2, x[0].ndim))
            f = jnp.mean if op == "GlobalAveragePool" else jnp.max
            outs = [f(x[0], axis=axes, keepdims=True)]
        elif op in ("InstanceNormalization", "BatchNormalization"):
            r = x[0].ndim
            eps = a.get("epsilon", 1e-5)
            shape = (1, -1) + (1,) * (r - 2)
            if op == "BatchNormalization" and not bn_training:
                mean = x[3].reshape(shape)
                var = x[4].reshape(shape)
                d = x[0] - mean
            else:
                # Instance: over the spatial dims; batch (training mode,
                # as kiln-autodiff trains it): over all but the channels,
                # the biased variance.
                axes = tuple(range(2, r)) if op == "InstanceNormalization" \
                    else (0,) + tuple(range(2, r))
                mean = jnp.mean(x[0], axis=axes, keepdims=True)
                d = x[0] - mean
                var = jnp.mean(d * d, axis=axes, keepdims=True)
                if op == "BatchNormalization" and stats is not None:
                    stats[node.output[0]] = (mean.reshape(-1), var.reshape(-1))
            y = d / jnp.sqrt(var + eps)
            outs = [y * x[1].reshape(shape) + x[2].reshape(shape)]
        else:
            raise Unsupported(f"no jax rule for {op}")
        for name, v in zip(node.output, outs):
            if not name:
                continue
            if hook is not None and jnp.issubdtype(v.dtype, jnp.floating):
                v = hook(name, v)
            env[name] = v
    return env


def float_params(model):
    """The float initializers, in graph order: the weights kilnc --train
    makes trainable (it imports every float initializer as a global)."""
    return [t for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT]
