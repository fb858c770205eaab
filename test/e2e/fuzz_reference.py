"""The onnxruntime reference of the random-graph fuzzer and each output's
per-element allowance for the graph's conditioning (fusion_fuzz.py's
docstring has the rule; train_fuzz.py reuses the session and the
LayerNormalization expansion).
"""
import copy
import re

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnx.shape_inference
import onnxruntime as ort

from fuzz_graph import GeneratorError

PERTURB = 1e-3            # relative perturbation for the conditioning estimate
PERTURB_DRAWS = 4         # the largest amplification of this many draws counts
ALLOWANCE = 2.0           # s_i: this many first-order rounding responses
FLOOR_REL = 1e-2          # error floor: this fraction of the output's cone scale


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


def ort_session(model, quiet=False):
    """quiet: no error log either (for probes that expect rejections)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4 if quiet else 3
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


def value_shapes(model):
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for v in list(inferred.graph.value_info) + list(inferred.graph.output) + \
            list(inferred.graph.input):
        tt = v.type.tensor_type
        shapes[v.name] = (tt.elem_type, [d.dim_value for d in tt.shape.dim])
    return shapes
