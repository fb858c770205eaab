"""Run-time sizes for the random-graph fuzzer (fusion_fuzz.py --dynamic-batch).

Seed S gives a graph whose float inputs share a leading batch dim B
(3, 4, 5, 6 or 8; BatchBuilder: fuzz_generator.py's Builder with batched
inputs; a second float operand the ops ask for is a weight instead). Each
variant is compiled ONCE with the batch symbolic,

  kilnc model.onnx --shape x=Nx... [--shape ...] --dim N=1..B

and the artifact runs at three sizes, N = 1, (B + 1) // 2 and B (the
configurations VARIANT@min, @mid and @max), each on the first N rows of
the seed's inputs, compared element by element with onnxruntime running
the same graph with N symbolic on those rows, by the static mode's rule
and bounds (the allowance measured at that size).

A draw that fixes the batch is drawn again (up to ATTEMPTS times;
generate_batched): onnxruntime, running the graph with N symbolic,
rejects some N in 1..B (a Reshape, Expand or weight that names B, an
index past a smaller batch), so ONNX itself does not define it at every
size and Kiln's result there has nothing to match. About one draw in
three is defined at every N.

What is skipped, counted and listed by reason, and not a failure:
- a graph still fixing the batch after ATTEMPTS draws;
- the sizes below B of an artifact for which kilnc found N not separable
  (its warning `--dim: 'N' is not separable (node ... reduces over it)`:
  the artifact runs N = B only, and the max run is still checked);
- a compile that kilnc refuses with one line naming --dim or --shape.
Everything else (a crash, another compile error, a run error, an output
of the wrong shape, an element over its bound) fails.
"""
import collections
import concurrent.futures
import copy
import multiprocessing
import os
import re
import threading

import numpy as np
import onnx
import onnx.helper as oh

from fuzz_generator import Builder
from fuzz_graph import MAX_ELEMS, GeneratorError, nelems, validate
from fuzz_kiln import (compare, compile_variant, graph_text, run_artifact,
                       variant_flags)
from fuzz_reference import (expand_layer_norms, make_inputs, ort_session,
                            reference)

SYMBOL = "N"
ATTEMPTS = 16
BATCHES = [3, 4, 5, 6, 8]
SIZE_ROLES = ("min", "mid", "max")


def sizes_for(batch):
    """(role, N) for the three runs of an artifact compiled for 1..batch."""
    return list(zip(SIZE_ROLES, (1, (batch + 1) // 2, batch)))


class BatchBuilder(Builder):
    """Builder whose float inputs share a leading batch dim."""

    batch = None
    inputs_done = False

    def draw_inputs(self):
        self.batch = self.choice(BATCHES, p=[1, 2, 1, 1, 1])
        for _ in range(self.choice([1, 2], p=[3, 1])):
            if self.chance(0.35):  # an image: N, C, H, W
                rest = (self.randint(1, 4), self.randint(2, 6), self.randint(2, 6))
            else:
                for _ in range(8):
                    rest = self.random_shape(max_rank=3)
                    if nelems(rest) * self.batch <= MAX_ELEMS:
                        break
                else:
                    rest = (self.randint(1, 8),)
            super().float_input((self.batch,) + tuple(rest))
        self.inputs_done = True

    def float_input(self, shape, prefix="x"):
        if self.inputs_done:  # op_binary's 'input' mode
            return self.weight_value(shape, 1.0, "p")
        return super().float_input(shape, prefix)


def generate_batched(seed, builder=BatchBuilder):
    """The seed's batched graph: the first of up to ATTEMPTS draws that
    ONNX defines at every N in 1..B (onnxruntime runs it at each), else
    the last draw (check_dynamic then skips it as fixing the batch)."""
    for attempt in range(ATTEMPTS):
        model = builder([seed, attempt]).build()
        validate(model)
        batched, batch = batched_inputs(model)
        sym = symbolic_model(model, batched)
        if not fixed_batch(sym, make_inputs(model, seed), batched, batch):
            break
    oh.set_model_props(model, {"fusion_fuzz.draws": str(attempt + 1)})
    return model


def batched_inputs(model):
    """The float graph inputs (each batched) and the batch B."""
    inits = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in inits and
             v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT]
    dims = {v.name: v.type.tensor_type.shape.dim[0].dim_value
            for v in model.graph.input if v.name in names}
    return names, dims[names[0]]


def symbolic_model(model, batched):
    """The graph with dim 0 of every batched input the symbol N and the
    outputs' shapes left open (LayerNormalization expanded as the static
    reference does)."""
    sym = copy.deepcopy(expand_layer_norms(model))
    for v in sym.graph.input:
        if v.name in batched:
            v.type.tensor_type.shape.dim[0].dim_param = SYMBOL
    for o in sym.graph.output:
        o.type.tensor_type.ClearField("shape")
    return sym


def feeds_at(feeds, batched, n):
    return {k: (v[:n] if k in batched else v) for k, v in feeds.items()}


def fixed_batch(sym, feeds, batched, batch):
    """Why the graph is not defined at every N in 1..batch (onnxruntime
    rejects one), or None. The runs happen in a child process:
    onnxruntime 1.20.1 dies of SIGFPE on some empty values a small N
    gives (GatherND with batch_dims=1 over an empty batch), which counts
    as a rejection here."""
    probe = getattr(_local, "probe", None)
    if probe is None:
        probe = _local.probe = concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn"))
    try:
        return probe.submit(probe_sizes, sym.SerializeToString(), feeds,
                            batched, batch).result()
    except concurrent.futures.process.BrokenProcessPool:
        _local.probe = None
        return "onnxruntime crashes at some N < B (an empty value)"


_local = threading.local()   # each campaign thread's probe process


def probe_sizes(model_bytes, feeds, batched, batch):
    """fixed_batch's runs (in the probe process)."""
    sym = onnx.load_from_string(model_bytes)
    names = [o.name for o in sym.graph.output]
    try:
        session = ort_session(sym, quiet=True)
    except Exception as e:  # noqa: BLE001
        return f"onnxruntime rejects the graph with N symbolic: {str(e)[:120]}"
    for n in range(1, batch + 1):
        try:
            session.run(names, feeds_at(feeds, batched, n))
        except Exception as e:  # noqa: BLE001
            m = re.search(r"running (\w+) node", str(e))
            op = m.group(1) if m else "a node"
            return f"the graph fixes the batch (onnxruntime's {op} rejects some N < B)"
    return None


NOT_SEPARABLE = re.compile(
    r"--dim: '\w+' is not separable \((.*?)\): the artifact runs")


def separability(kilnc_text):
    """None when kilnc found the symbol separable, else its reason with the
    node's name left out (so that reasons group)."""
    m = NOT_SEPARABLE.search(kilnc_text)
    if not m:
        return None
    return re.sub(r"node '[^']*' ", "", m.group(1))


def dim_flags(model, batched, batch):
    flags = []
    for v in model.graph.input:
        if v.name in batched:
            dims = [d.dim_value for d in v.type.tensor_type.shape.dim]
            flags.append(f"--shape={v.name}=" +
                         "x".join([SYMBOL] + [str(d) for d in dims[1:]]))
    return flags + [f"--dim={SYMBOL}=1..{batch}"]


class DynamicResult:
    def __init__(self, seed):
        self.seed = seed
        self.statuses = {}     # 'variant@role' -> pass | unsupported | fail | skipped
        self.details = {}
        self.signatures = {}
        self.amps = []
        self.ratios = []
        self.generator_error = None
        self.ops = collections.Counter()
        self.sizes = {}        # role -> N
        self.flags = []        # kilnc's --shape/--dim flags
        self.kind = None       # 'fixed batch' when skipped for that
        self.separable = {}    # variant -> whether kilnc found N separable


def check_dynamic(model, seed, variants, tools, workdir):
    res = DynamicResult(seed)
    res.model = model
    res.ops.update(n.op_type for n in model.graph.node)
    feeds = make_inputs(model, seed)
    res.feeds = feeds
    batched, batch = batched_inputs(model)
    sizes = sizes_for(batch)
    res.sizes = dict(sizes)
    res.flags = dim_flags(model, batched, batch)
    configs = [(v, role, n) for v in variants for role, n in sizes]
    sym = symbolic_model(model, batched)
    why = fixed_batch(sym, feeds, batched, batch)
    if why:
        res.kind = "fixed batch"
        for v, role, n in configs:
            res.statuses[f"{v}@{role}"] = "skipped"
            res.details[f"{v}@{role}"] = why
        return res
    refs = {}
    for role, n in sizes:
        try:
            refs[role] = reference(sym, feeds_at(feeds, batched, n))
        except GeneratorError as e:
            res.generator_error = f"N={n}: {e}"
            return res
    res.amps = [max(a) for role, _ in sizes for a in refs[role][2]]
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    inputs = {}
    for role, n in sizes:
        inputs[role] = []
        for i, (name, arr) in enumerate(feeds_at(feeds, batched, n).items()):
            f = os.path.join(workdir, f"in{i}-{role}.npy")
            np.save(f, arr)
            inputs[role].append((name, f))
    for variant in variants:
        status, detail, artifact, text = compile_variant(
            path, variant, workdir, tools, extra=res.flags)
        if status == "compile-error" and "|" not in detail and \
                re.search(r"--dim|--shape", detail):
            status = "skipped"
        if status != "ok":
            for role, _ in sizes:
                key = f"{variant}@{role}"
                res.statuses[key] = ("fail" if status not in ("unsupported", "skipped")
                                     else status)
                res.details[key] = detail
                res.signatures[key] = (f"{status}: {detail}" if status != "crash"
                                       else detail)
            continue
        reason = separability(text)
        res.separable[variant] = reason is None
        for role, n in sizes:
            key = f"{variant}@{role}"
            if reason is not None and n != batch:
                res.statuses[key] = "skipped"
                res.details[key] = f"not separable: {reason}"
                continue
            names, ref, amp, floors, sens = refs[role]
            status, detail, outs = run_artifact(
                artifact, inputs[role], names,
                os.path.join(workdir, f"{variant}-{role}.out"), tools, seed)
            if status != "ok":
                res.statuses[key] = "fail"
                res.details[key] = detail
                res.signatures[key] = f"{status}: {detail}"
                continue
            rows = compare(names, ref, amp, floors, sens, outs, variant)
            res.ratios += [(r[3], key, r[0]) for r in rows if r[3] is not None]
            res.details[key] = "\n".join(
                f"  {r[0]} {list(ref[names.index(r[0])].shape)}: {r[2]}" for r in rows)
            bad = [r for r in rows if not r[1]]
            if bad:
                res.statuses[key] = "fail"
                kinds = sorted({"mismatch" if "rel-err" in r[2] else r[2].split()[0]
                                for r in bad})
                res.signatures[key] = "wrong output: " + ",".join(kinds)
            else:
                res.statuses[key] = "pass"
    return res


def failure_report(res, key):
    variant, role = key.split("@")
    flags = " ".join(variant_flags(variant) + res.flags)
    return (f"FAIL seed {res.seed} variant {variant} at N={res.sizes[role]} "
            f"(kilnc {flags}; kiln-run at N={res.sizes[role]}): "
            f"{res.signatures[key]}\n{res.details[key]}\n{graph_text(res.model)}\n")


def save_failure(res, key, fail_dir):
    variant, role = key.split("@")
    n = res.sizes[role]
    d = os.path.join(fail_dir, f"seed{res.seed}-{variant}-N{n}")
    os.makedirs(d, exist_ok=True)
    onnx.save(res.model, os.path.join(d, "model.onnx"))
    batched, _ = batched_inputs(res.model)
    np.savez(os.path.join(d, "inputs.npz"), **feeds_at(res.feeds, batched, n))
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write(failure_report(res, key))
    return d


class GraphKinds:
    """Per-graph counts for the summary (check_dynamic runs on a pool)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()

    def check(self, model, seed, variants, tools, workdir):
        res = check_dynamic(model, seed, variants, tools, workdir)
        props = {p.key: p.value for p in model.metadata_props}
        with self.lock:
            self.counts["draws"] += int(props.get("fusion_fuzz.draws", 1))
            if res.generator_error:
                pass
            elif res.kind == "fixed batch":
                self.counts["fixed"] += 1
            else:
                self.counts["polymorphic"] += 1
                for ok in res.separable.values():
                    self.counts["separable" if ok else "not separable"] += 1
        return res

    def lines(self):
        c = self.counts
        return [f"dynamic batch: {c['polymorphic'] + c['fixed']} graphs from "
                f"{c['draws']} draws (a draw that fixes the batch is drawn "
                f"again, up to {ATTEMPTS} times): {c['polymorphic']} defined "
                f"at every N, {c['fixed']} fixing the batch (skipped); "
                f"compiles: {c['separable']} separable, {c['not separable']} "
                f"not separable (run at the maximum only)"]
