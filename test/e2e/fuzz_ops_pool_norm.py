"""Window and normalisation generators of the random-graph builder.

Ops over spatial windows in every padding mode: Conv with auto_pad
(SAME_UPPER, SAME_LOWER, VALID; fuzz_ops_compute.py's op_conv has the
explicit pads), MaxPool (explicit pads, auto_pad, strides, ceil_mode,
dilations), AveragePool (the same, count_include_pad; no dilations before
opset 19), LpPool, GlobalAveragePool and GlobalMaxPool; and the
normalisations with per-channel parameters: BatchNormalization
(inference: running mean and variance as initializers) and
InstanceNormalization. fuzz_generator.py's Builder mixes them in.

Output sizes follow the ONNX operator definitions. Where onnxruntime and
the definitions part ways, the generator stays off the difference:
ceil_mode only with explicit pads and only when its extra window starts
inside the input or its head padding (implementations differ on one
that starts in the tail padding), pads smaller than the kernel
(onnxruntime refuses others), no dilations with SAME (onnxruntime's
pooling computes SAME's pads from the undilated kernel), SAME only with
a kernel at least as long as the stride (a negative total pad
otherwise), and windows that read at least one input element (one of
padding only is -inf in MaxPool, 0/0 in AveragePool).
"""
import numpy as np
import onnx.numpy_helper as onh

from fuzz_graph import MAX_ELEMS, nelems

AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


class PoolNormOps:
    """Mixed into Builder (fuzz_generator.py), which provides GraphCore."""

    def window_dim(self, d, auto_pad, *, max_k=3, dilate=False):
        """One spatial dim of a window op: (kernel, stride, dilation, pad
        begin, pad end, output size, output size with ceil_mode or None
        where ceil_mode's extra window would start past the input), or
        None when no window of that mode fits `d`. Every window reads at
        least one element of the input."""
        for _ in range(4):
            k = self.randint(1, max_k)
            s = self.choice([1, 1, 2, 3], p=[3, 1, 2, 0.5])
            dl = self.choice([1, 2]) if dilate and auto_pad in ("NOTSET", "VALID") \
                else 1
            span = dl * (k - 1) + 1
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                if k < s:
                    continue
                out = -(-d // s)
                total = max(0, (out - 1) * s + span - d)
                small = total // 2
                pb, pe = ((small, total - small) if auto_pad == "SAME_UPPER"
                          else (total - small, small))
                up = None
            elif auto_pad == "VALID":
                if span > d:
                    continue
                pb = pe = 0
                out, up = (d - span) // s + 1, None
            else:
                pb = min(self.choice([0, 0, 1, 2]), k - 1)
                pe = min(self.choice([0, 0, 1, 2]), k - 1)
                if d + pb + pe < span:
                    continue
                room = d + pb + pe - span
                out = room // s + 1
                up = -(-room // s) + 1
                # Implementations differ on an extra window that starts
                # past the input (in the tail padding or beyond it).
                if (up - 1) * s >= d + pb:
                    up = None
            if all(any(0 <= o * s - pb + j * dl < d for j in range(k))
                   for o in range(max(out, up or 0))):
                return k, s, dl, pb, pe, out, up
        return None

    def window_attrs(self, auto_pad, dims, ceil=False):
        """The attributes of a window op from window_dim's results."""
        kernel = [w[0] for w in dims]
        strides = [w[1] for w in dims]
        dils = [w[2] for w in dims]
        attrs = {"kernel_shape": kernel}
        if auto_pad != "NOTSET":
            attrs["auto_pad"] = auto_pad
        elif any(w[3] or w[4] for w in dims) or self.chance(0.2):
            attrs["pads"] = [w[3] for w in dims] + [w[4] for w in dims]
        if any(s != 1 for s in strides) or self.chance(0.2):
            attrs["strides"] = strides
        if any(dl != 1 for dl in dils):
            attrs["dilations"] = dils
        if ceil:
            attrs["ceil_mode"] = 1
        return attrs

    def op_conv_auto_pad(self):
        """Conv with auto_pad SAME_UPPER, SAME_LOWER or VALID (1-D and 2-D)."""
        x = self.pick(lambda v: v.rank in (3, 4) and v.shape[1] <= 8)
        if x is None:
            return False
        C = x.shape[1]
        auto_pad = self.choice(AUTO_PADS[1:])
        dims = [self.window_dim(d, auto_pad, dilate=True) for d in x.shape[2:]]
        if None in dims:
            return False
        groups = self.choice([g for g in (1, 2, 4) if C % g == 0]) \
            if self.chance(0.3) else 1
        O = groups * self.randint(1, max(1, 8 // groups))
        oshape = (x.shape[0], O) + tuple(w[5] for w in dims)
        if nelems(oshape) > MAX_ELEMS:
            return False
        kernel = [w[0] for w in dims]
        fan_in = (C // groups) * nelems(kernel)
        inputs = [x.name, self.weight((O, C // groups) + tuple(kernel),
                                      1.0 / np.sqrt(fan_in), "cw")]
        if self.chance(0.6):
            inputs.append(self.weight((O,), 0.5, "cb"))
        attrs = self.window_attrs(auto_pad, dims)
        if groups != 1:
            attrs["group"] = groups
        self.emit("Conv", inputs, [oshape], **attrs)
        return True

    POOL_RANKS = (4,)  # the training generator pools [N, C, L] too

    def pool2d(self, op):
        t = self.pick(lambda v: v.rank in self.POOL_RANKS)
        if t is None:
            return False
        auto_pad = self.choice(AUTO_PADS, p=[4, 2, 2, 2])
        dims = [self.window_dim(d, auto_pad, dilate=(op == "MaxPool"))
                for d in t.shape[2:]]
        if None in dims:
            return False
        # ceil_mode rounds every dim up: only where each dim allows it.
        ceil = (auto_pad == "NOTSET" and self.chance(0.35) and
                all(w[6] is not None for w in dims))
        out = t.shape[:2] + tuple(w[6] if ceil else w[5] for w in dims)
        if nelems(out) > MAX_ELEMS:
            return False
        attrs = self.window_attrs(auto_pad, dims, ceil)
        if op == "AveragePool" and self.chance(0.4):
            attrs["count_include_pad"] = 1
        self.emit(op, [t.name], [out], **attrs)
        return True

    def op_maxpool(self):
        return self.pool2d("MaxPool")

    def op_avgpool(self):
        return self.pool2d("AveragePool")

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

    def op_global_pool(self):
        t = self.pick(lambda v: v.rank in (3, 4))
        if t is None:
            return False
        op = self.choice(["GlobalAveragePool", "GlobalMaxPool"])
        self.emit(op, [t.name], [t.shape[:2] + (1,) * (t.rank - 2)])
        return True

    # --- Normalisation ---

    def op_batchnorm(self):
        """BatchNormalization in inference mode: Y only, the running
        statistics as initializers (variance positive)."""
        return self.batchnorm_on(lambda v: v.rank >= 2 and v.shape[1] <= 64)

    def batchnorm_on(self, fits):
        """A BatchNormalization of a value `fits` accepts (the training
        generator asks for more)."""
        t = self.pick(fits)
        if t is None:
            return False
        C = t.shape[1]
        inputs = [t.name, self.weight((C,), 1.0, "bns"), self.weight((C,), 1.0, "bnb"),
                  self.weight((C,), 0.5, "bnm")]
        var = self.fresh("bnv")
        self.inits.append(onh.from_array(
            (np.abs(self.rng.standard_normal(C)) + 0.1).astype(np.float32), var))
        inputs.append(var)
        attrs = {}
        if self.chance(0.3):
            attrs["epsilon"] = 1e-3
        if self.chance(0.2):
            attrs["momentum"] = 0.8  # ignored in inference
        self.emit("BatchNormalization", inputs, [t.shape], **attrs)
        return True

    def op_instancenorm(self):
        """InstanceNormalization over the spatial dims of [N, C, D...]."""
        t = self.pick(lambda v: v.rank >= 3 and v.shape[1] <= 64 and
                      nelems(v.shape[2:]) >= 2)
        if t is None:
            # One spatial element: the result is exactly the bias, and
            # x - mean is rounding noise (as op_layernorm says).
            return False
        C = t.shape[1]
        inputs = [t.name, self.weight((C,), 1.0, "ins"), self.weight((C,), 1.0, "inb")]
        attrs = {"epsilon": 1e-3} if self.chance(0.3) else {}
        self.emit("InstanceNormalization", inputs, [t.shape], **attrs)
        return True

