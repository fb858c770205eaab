"""Attention generators of the random-graph builder, written the way
exporters write scaled dot-product attention.

op_sdpa draws one attention block:
  - Q, K and V: projections (MatMul with a weight) of a picked value or of
    a fresh input [B, S, E] (self-attention; K and V from a second value
    with another sequence length: cross-attention), or fresh [B, H, S, D]
    inputs (an exported SDPA's operands);
  - heads: none ([B, S, D] or [S, D]), split by Reshape [B, S, H, D] and
    Transpose [B, H, S, D] (merged back after P V by Transpose and
    Reshape, then an output projection now and then), or flattened to
    [B*H, S, D]; K and V with fewer heads now and then (GQA/MQA: Unsqueeze,
    Expand and Reshape, as Llama's repeat_kv);
  - a KV cache: past K and V (graph inputs [B, Hkv, P, D]) concatenated
    with the new ones along the sequence axis, so Sq != Skv;
  - Q K^T: a Transpose of K at the product, or K transposed to [B, H, D, S]
    where the heads are split (GPT-2's permute(0, 2, 3, 1));
  - the scale: Mul by 1/sqrt(D) or Div by sqrt(D) on the scores, Q
    pre-scaled, Q and K each by D^-1/4, or none;
  - masks before the softmax: an additive float input (a bias, N(0, 1):
    the fuzzer's feeds), an additive constant padding mask [B, 1, 1, Skv]
    or causal triangle [Sq, Skv] / [1, 1, Sq, Skv] holding 0 and a large
    negative, or Where on a constant boolean triangle with a fill;
  - Softmax over the last axis, MatMul with V.

Numerics. No row is ever fully masked (onnxruntime's softmax of an all
-inf row is NaN): the causal triangle keeps keys j <= i + Skv - Sq and a
padding mask keeps each batch's first length_b >= 1 keys, so key 0 is
always kept. Fills are finite and fp16-safe: -1e4 and -3e4 (BERT's and
exporters' choice) and -30 (a soft mask, drawn most often), and for
Where only, now and then, -1e30: the fill at or below which Kiln's
matcher lets the kernel skip key tiles past the diagonal (causalSkip).
The fuzzer's error floor is 1e-2 times the largest |x| in an output's
cone (fuzz_reference.py), so a mask loosens the per-element bound of
everything after it to about B * |fill| / 100: fp32 still catches a mask
that lets one more key through per row at every finite fill, bf16 mostly
only at -30, and a -1e30 fill makes those graphs a check of crashes,
shapes and NaN only (their masked scores are never graph outputs).
Finite fills within fp16's range (and no fully masked row) are all the
16-bit variants need.

Sizes hit and miss the flash-attention matcher (MatchAttention.cpp): head
dims that are multiples of 16 (the bf16/fp16 kernels' condition) or not,
Sq from 1 (decode) to 80 (one or two blocks of 64 query rows), Skv up
to 96 (one or two tiles of 64 keys, skipped or not past a causal
diagonal), 1-4 heads, batch 1-2. Intermediates of the chain become graph
outputs by the builder's usual 1/4 rule only in some graphs (the others
protect them, so that the region fuses): a score read elsewhere splits
the attention region.

Not in Builder.OPS (the graphs the other fuzz tests pin would change):
`fusion_fuzz.py --focus attention` adds it (fuzz_generator.py's
focused), and test/Pipelines/fusion-fuzz-attention.test runs it.
"""
import numpy as np
import onnx.numpy_helper as onh

from fuzz_graph import nelems

SCORE_ELEMS = 4096        # B * H * Sq * Skv: the emu runs stay short
OPERAND_ELEMS = 2048      # any other tensor of the block


class AttentionOps:
    """Mixed into Builder (fuzz_generator.py), which provides GraphCore."""

    # --- helpers ------------------------------------------------------------

    def _scalar(self, value, prefix="sc"):
        name = self.fresh(prefix)
        shape = () if self.chance(0.7) else (1,)
        self.inits.append(onh.from_array(
            np.full(shape, value, dtype=np.float32), name))
        return name

    def _hide(self, v, protect):
        """Keeps `v` out of other generators' operands; `protect`: never a
        graph output either."""
        if v in self.values:
            self.values.remove(v)
        if protect:
            self.int_outputs.add(v.name)
        return v

    def _reshape(self, v, shape):
        enc = list(shape)
        if self.chance(0.4):  # exporters write 0 (copy) and -1 (infer)
            for i in range(min(len(shape), v.rank)):
                if shape[i] == v.shape[i] and self.chance(0.5):
                    enc[i] = 0
            free = [i for i in range(len(shape)) if enc[i] != 0]
            if free and self.chance(0.5):
                enc[self.choice(free)] = -1
        return self.emit("Reshape", [v.name, self.const_i64(enc, "shp")],
                         [tuple(shape)])[0]

    def _transpose(self, v, perm):
        return self.emit("Transpose", [v.name],
                         [tuple(v.shape[p] for p in perm)], perm=list(perm))[0]

    def _project(self, x, width):
        """x [.., E] @ W [E, width]."""
        w = self.weight((x.shape[-1], width), 1.0 / np.sqrt(x.shape[-1]), "wp")
        return self.emit("MatMul", [x.name, w], [x.shape[:-1] + (width,)])[0]

    # --- the generator --------------------------------------------------------

    def op_sdpa(self):
        d = self.choice([4, 8, 16, 32, 64, 5, 12], p=[1, 2, 4, 3, 1.5, 0.7, 0.7])
        dv = d if self.chance(0.85) else self.choice([8, 16, 32])
        heads = self.choice([1, 2, 3, 4], p=[2, 3, 1, 2])
        kv_heads = heads
        if heads > 1 and self.chance(0.25):  # GQA / MQA
            kv_heads = self.choice([h for h in (1, 2) if heads % h == 0 and h < heads])
        form = self.choice(["split", "bhsd", "single", "flat"], p=[4, 3, 2, 1])
        if form in ("single",):
            heads = kv_heads = 1
        if form == "flat":
            kv_heads = heads
        batch = self.choice([1, 2], p=[3, 1])
        sq = self.choice([1, 2, 3, 4, 5, 8, 16, 33, 64, 80],
                         p=[2, 1, 1, 2, 1, 3, 3, 1, 1, 0.5])
        past = (self.choice([1, 3, 8, 16, 31, 48, 64, 80])
                if self.chance(0.4) else 0)
        cross = form != "bhsd" and self.chance(0.15)
        skv_new = sq if not cross else self.choice([2, 4, 7, 16, 40])
        skv = skv_new + past
        if batch * heads * sq * skv > SCORE_ELEMS or skv > 96:
            return False
        if max(batch * heads * max(sq, skv) * max(d, dv),
               batch * max(sq, skv) * heads * max(d, dv)) > OPERAND_ELEMS:
            return False
        rank2 = form == "single" and batch == 1 and self.chance(0.3)

        scale = self.choice(["mul", "div", "preq", "qk", "none"], p=[4, 2, 2, 1, 1])
        # K transposed at the head split, [B, S, H, D] -> [B, H, D, S]
        # (GPT-2's permute(0, 2, 3, 1)), instead of at the product.
        k_pre = (form == "split" and not past and kv_heads == heads and
                 scale != "qk" and self.chance(0.4))
        # Q, K, V in [B, H, S, D] (or [B, S, D] / [S, D] / [B*H, S, D]).
        if form == "bhsd":
            q = self.float_input((batch, heads, sq, d), "q")
            k = self.float_input((batch, kv_heads, skv_new, d), "k")
            v = self.float_input((batch, kv_heads, skv_new, dv), "v")
        else:
            x = self._source((batch, sq), rank2)
            y = self._source((batch, skv_new), rank2) if cross else x
            if x is None or y is None:
                return False
            if form == "single":
                q, k, v = (self._project(x, d), self._project(y, d),
                           self._project(y, dv))
            else:
                q = self._heads(self._project(x, heads * d), heads, d)
                k = self._heads(self._project(y, kv_heads * d), kv_heads, d,
                                k_pre)
                v = self._heads(self._project(y, kv_heads * dv), kv_heads, dv)
                if form == "flat":
                    q, k, v = (self._reshape(t, (batch * heads,) + t.shape[2:])
                               for t in (q, k, v))
        # The KV cache: past K/V inputs concatenated along the sequence axis.
        if past:
            seq_axis = k.rank - 2
            pk = self.float_input(k.shape[:seq_axis] + (past, d), "pastk")
            pv = self.float_input(v.shape[:seq_axis] + (past, dv), "pastv")
            k = self.emit("Concat", [pk.name, k.name],
                          [k.shape[:seq_axis] + (skv, d)], axis=self._seq_axis(k))[0]
            v = self.emit("Concat", [pv.name, v.name],
                          [v.shape[:seq_axis] + (skv, dv)], axis=self._seq_axis(v))[0]
        # GQA: repeat K/V heads (Unsqueeze, Expand, Reshape).
        if kv_heads != heads:
            k, v = self._repeat_kv(k, heads), self._repeat_kv(v, heads)
        # The scale.
        if scale == "preq":
            q = self.emit("Mul", self._order(q.name, self._scalar(1 / np.sqrt(d))),
                          [q.shape])[0]
        elif scale == "qk":
            f = float(d) ** -0.25
            q = self.emit("Mul", [q.name, self._scalar(f)], [q.shape])[0]
            k = self.emit("Mul", [k.name, self._scalar(f)], [k.shape])[0]
        # Q K^T.
        if k_pre:
            kt = k
        else:
            kt = self._transpose(k, list(range(k.rank - 2)) +
                                 [k.rank - 1, k.rank - 2])
        sshape = q.shape[:-1] + (skv,)
        s = self.emit("MatMul", [q.name, kt.name], [sshape])[0]
        protect = self.chance(0.6)
        chain = [s]
        if scale == "mul":
            s = self.emit("Mul", self._order(s.name, self._scalar(1 / np.sqrt(d))),
                          [sshape])[0]
            chain.append(s)
        elif scale == "div":
            s = self.emit("Div", [s.name, self._scalar(np.sqrt(d))], [sshape])[0]
            chain.append(s)
        # Masks.
        huge = False
        for kind in self._mask_kinds(past, sq):
            s, big = self._mask(kind, s, batch, sq, skv, past)
            huge |= big
            chain.append(s)
        if huge and self.chance(0.5) and scale != "mul":
            # A positive scale after the causal select keeps the skip.
            s = self.emit("Mul", [s.name, self._scalar(1 / np.sqrt(d))], [sshape])[0]
            chain.append(s)
        axis = {0: -1, 1: len(sshape) - 1, 2: None}[self.choice([0, 1, 2])]
        attrs = {} if axis is None else {"axis": axis}
        p = self.emit("Softmax", [s.name], [sshape], **attrs)[0]
        for c in chain:
            self._hide(c, protect or huge)
        if protect:
            self._hide(p, True)
        out = self.emit("MatMul", [p.name, v.name], [sshape[:-1] + (dv,)])[0]
        # Heads back: [B, H, Sq, Dv] -> [B, Sq, H, Dv] -> [B, Sq, H * Dv].
        if form in ("split", "bhsd") and self.chance(0.8):
            out = self._transpose(out, [0, 2, 1, 3])
            out = self._reshape(out, (batch, sq, heads * dv))
        elif form == "flat" and self.chance(0.7):
            out = self._reshape(out, (batch, heads, sq, dv))
            out = self._transpose(out, [0, 2, 1, 3])
            out = self._reshape(out, (batch, sq, heads * dv))
        if out.rank <= 3 and self.chance(0.4):
            width = self.choice([4, 8, 16])
            if nelems(out.shape[:-1]) * width <= OPERAND_ELEMS:
                self._project(out, width)
        return True

    # --- parts ----------------------------------------------------------------

    def _order(self, a, b):
        return [a, b] if self.chance(0.7) else [b, a]

    def _seq_axis(self, v):
        axis = v.rank - 2
        return axis - v.rank if self.chance(0.3) else axis

    def _source(self, lead, rank2):
        """A value [B, S, E] ([S, E] when rank2): a picked one with these
        leading dims, or a fresh input."""
        want = lead[1:] if rank2 else lead
        found = self.pick(lambda v: v.rank == len(want) + 1 and
                          v.shape[:-1] == tuple(want) and v.shape[-1] <= 64)
        if found is not None and self.chance(0.7):
            return found
        e = self.choice([4, 8, 16, 24, 32])
        return self.float_input(tuple(want) + (e,), "x")

    def _heads(self, t, heads, d, pre_transposed=False):
        """[B, S, H*D] -> [B, S, H, D] -> [B, H, S, D] ([B, H, D, S] when
        pre_transposed)."""
        b, s = t.shape[0], t.shape[1]
        t = self._reshape(t, (b, s, heads, d))
        return self._transpose(t, [0, 2, 3, 1] if pre_transposed else [0, 2, 1, 3])

    def _repeat_kv(self, t, heads):
        b, hkv, s, dd = t.shape
        g = heads // hkv
        u = self.emit("Unsqueeze", [t.name, self.const_i64([2], "ax")],
                      [(b, hkv, 1, s, dd)])[0]
        e = self.emit("Expand", [u.name, self.const_i64([b, hkv, g, s, dd], "es")],
                      [(b, hkv, g, s, dd)])[0]
        return self._reshape(e, (b, heads, s, dd))

    def _mask_kinds(self, past, sq):
        kinds = []
        r = self.rng.random()
        if r < 0.2:
            return kinds
        if r < 0.45:
            kinds.append("causal-add")
        elif r < 0.7:
            kinds.append("causal-where")
        if self.chance(0.35):
            kinds.append(self.choice(["pad-add", "bias"], p=[2, 1]))
        if kinds and self.chance(0.3):
            kinds.reverse()
        return kinds

    def _fill(self, where):
        fills = [-1e4, -3e4, -30.0] + ([-1e30] if where else [])
        return float(self.choice(fills, p=[2, 1, 3] + ([1] if where else [])))

    def _mask(self, kind, s, batch, sq, skv, past):
        """One mask on the scores s [.., Sq, Skv]; returns (masked, whether
        the fill is below -1e29)."""
        sshape = s.shape
        # Query i sees keys j <= i + off: the new queries are the last Sq
        # of Skv positions (a KV cache); cross-attention with Sq > Skv
        # aligns them at the start, so that no row is fully masked.
        off = max(skv - sq, 0)
        keep = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + off
        if kind == "bias":
            per_batch, rows = self.chance(0.5), self.chance(0.5)
            shape = self._mask_shape(sshape, batch, per_batch, rows)
            m = self.float_input(shape, "bias")
            return self._add(s, m.name, sshape), False
        fill = self._fill(kind == "causal-where")
        if kind == "pad-add":
            lens = self.rng.integers(1, skv + 1, size=batch)
            arr = np.where(np.arange(skv)[None, :] < lens[:, None], 0.0, fill)
            shape = self._mask_shape(sshape, batch, True, False)
            if len(sshape) == 3 and sshape[0] != batch:  # [B*H, Sq, Skv]
                arr = np.repeat(arr, sshape[0] // batch, axis=0)
            name = self.fresh("pad")
            self.inits.append(onh.from_array(
                arr.reshape(shape).astype(np.float32), name))
            return self._add(s, name, sshape), False
        shape = self._mask_shape(sshape, batch, False, True)
        if kind == "causal-add":
            arr = np.where(keep, 0.0, fill)
            name = self.fresh("causal")
            self.inits.append(onh.from_array(
                arr.reshape(shape).astype(np.float32), name))
            return self._add(s, name, sshape), False
        # causal-where: Where(keep, s, fill) or Where(masked, fill, s).
        direct = self.chance(0.6)
        cond = keep if direct else ~keep
        name = self.fresh("tri")
        self.inits.append(onh.from_array(cond.reshape(shape).astype(np.bool_), name))
        f = self._scalar(fill, "fill")
        ins = [name, s.name, f] if direct else [name, f, s.name]
        out = self.emit("Where", ins, [sshape])[0]
        return out, fill < -1e29

    def _mask_shape(self, sshape, batch, per_batch, rows):
        """A mask shape that broadcasts to the scores [.., Sq, Skv]: per
        batch ([B, 1, 1, Skv] on [B, H, ..], [B, 1, Skv] on [B, ..] and
        [B*H, 1, Skv] on [B*H, ..]) or not, per query row or not; leading
        1s now and then dropped."""
        sq, skv = sshape[-2], sshape[-1]
        lead = [1] * (len(sshape) - 2)
        if per_batch and lead:
            lead[0] = sshape[0]
        shape = tuple(lead) + ((sq if rows else 1), skv)
        while len(shape) > 2 and shape[0] == 1 and self.chance(0.4):
            shape = shape[1:]
        return shape

    def _add(self, s, mask, sshape):
        return self.emit("Add", self._order(s.name, mask), [sshape])[0]
