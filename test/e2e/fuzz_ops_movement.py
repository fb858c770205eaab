"""Data movement and indexing generators of the random-graph builder.

Gather (0-D/1-D/2-D constant indices, negative ones included, any axis;
int64 indices from a graph input; a weight table, as an embedding),
GatherElements, GatherND, ScatterND, Slice, Pad, Concat, Split, Expand,
Tile, Transpose, Reshape, Flatten, Squeeze and Unsqueeze. Each op_* method
adds one node (or returns False when no operand fits) and tracks its
result's shape; fuzz_generator.py's Builder mixes them in.
"""
import numpy as np
import onnx.numpy_helper as onh

from fuzz_graph import INT64_MAX, INT64_MIN, MAX_ELEMS, nelems


class MovementOps:
    """Mixed into Builder (fuzz_generator.py), which provides GraphCore."""

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
