"""Elementwise, contraction and row-op generators of the random-graph builder.

Elementwise ops with broadcasting (Add, Sub, Mul, Min, Max; Relu,
Sigmoid, Tanh, Neg); contractions (MatMul, Gemm, Conv with explicit pads,
MatMuls side by side on one input, MatMul into Softmax, Einsum); row ops
and scans (ReduceSum, ReduceMean, Softmax, LogSoftmax, LayerNormalization,
CumSum, TopK's values). fuzz_generator.py's Builder mixes them in.
"""
import numpy as np
import onnx.helper as oh
import onnx.numpy_helper as onh

from fuzz_graph import MAX_ELEMS, Value, nelems


class ComputeOps:
    """Mixed into Builder (fuzz_generator.py), which provides GraphCore."""

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

    # --- Row ops and scans ---

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
