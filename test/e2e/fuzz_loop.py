"""Device-side loops for the random-graph fuzzer (fusion_fuzz.py --focus loop).

Seed S gives a model around one ONNX Loop whose trip count M is a graph
input (int64 scalar), so that kilnc keeps the body as code once and the
runtime repeats it (docs/architecture.md "Device-side loops"). LoopBuilder
(fuzz_generator.py's Builder, the same op generators) draws:

- the main graph: 1-3 float inputs and 0-3 nodes; 1-3 of its values
  (inputs or results, at most 512 elements) are the loop's initial values;
  sometimes a first condition, a bool graph input;
- the body: 2-7 random nodes over the carried values, values captured from
  the main graph (any of its values, read by name; a further float input
  or int64 index input an op asks for is a main-graph input the body
  reads), sometimes the iteration counter (Cast(i) * 0.25 as a [1]
  tensor), and the body's own constants and weights. Each carried value's
  next state is a body value of its shape, preferably one computed from
  the carried state, or another body value flattened, tiled or sliced and
  reshaped to it; the body's other dead ends are added in, so every body
  node reaches an output. The update stays bounded over iterations: tanh,
  sigmoid, h + 0.5 tanh(t) or a h + tanh(t) with a < 1;
- sometimes (40%) a data-dependent condition: ReduceSum of a carried value
  (before or after the update) compared with a threshold (Less or
  Greater, now and then And-ed with cond_in). The threshold is fitted to
  the seed's inputs by running the body's sums on onnxruntime: the loop
  stops after 1, 2 or 3 iterations or never, with every sum at least 5%
  of its value's L1 norm away from it, so that no precision's rounding
  flips the decision (fit_thresholds);
- sometimes (about a quarter of the bodies) a nested Loop carrying a body
  value, whose trip count is a main-graph input (run at 2), the outer
  loop's counter i (0, 1, 2, ... iterations), or a constant 2 (kilnc
  unrolls that one);
- sometimes 1-2 main-graph nodes after the loop reading its results.

Every loop result is a graph output. Scan outputs, carried sequences and
changing carried shapes are what kilnc refuses (a clear error each), so
the generator draws none.

Each variant is compiled ONCE (kilnc --stats, which must list the device
loops) and the artifact runs on emu at M = 0, 1 and 3 (configurations
VARIANT@M=0, @M=1, @M=3), and with a first-condition input also at M = 3
with it false (@M=3,cond=0); a nested loop's trip-count input is 2 in
every run. The reference is onnxruntime running the Loop model (graph
optimizations off; LayerNormalization expanded as fuzz_reference.py does,
inside bodies too). The per-element allowance is measured on the run's
unrolled twin (unroll: the loops written out for that run's M and
condition, a Where keeping the state once a data-dependent condition
stops it), where fuzz_reference.reference perturbs every op of every
iteration; the twin must agree with onnxruntime's Loop (else a harness
error). The rule and bounds are the static mode's.

The reducer (--minimize) shrinks bodies too (loop_candidates: drop a
carried value, the condition or the first condition; bypass or cut a body
node, a cut node's results becoming main-graph inputs the body reads).
Repro files (--repros) carry loop models as ONNX textual syntax; a model
with a Loop whose trip count is a graph input is run at the same M and
conditions, one status per variant (fails if any run fails). What the
textual syntax cannot carry is the seed's inputs: a repro runs on the
inputs of --seed (default 0), for which a fitted threshold may stop the
loop elsewhere than in the campaign, or closer to a sum.
"""
import collections
import copy
import os
import re
import threading

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnx.shape_inference

from fuzz_generator import Builder
from fuzz_graph import GeneratorError, Value, nelems, validate
from fuzz_kiln import compare, compile_variant, graph_text, run_artifact, variant_flags
from fuzz_reduce import prune, rename_reads, subgraph_reads
from fuzz_reference import expand_layer_norms, make_inputs, ort_session, reference

FLOAT, INT64, BOOL = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.BOOL

RUN_TRIPS = (0, 1, 3)     # the outer trip counts every artifact runs at
INNER_TRIPS = 2           # a nested loop's trip-count input, every run
MAX_CARRIED = 512         # elements per carried value: keeps emu runs short
MARGIN = 0.05             # a sum's distance from its threshold, over its L1 norm
ATTEMPTS = 8              # draws per seed before giving up (see generate_loop)
# How often a fitted threshold stops the loop after K iterations, among
# the outcomes the seed's sums allow.
STOP_WEIGHTS = {"after 1": 2, "after 2": 3, "after 3": 1, "never": 1}


def vinfo(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, list(shape))


# --- Generation -----------------------------------------------------------


class Scope:
    """What a body being drawn replaces in the builder: its nodes,
    initializers and visible values (the enclosing ones stay visible)."""

    def __init__(self, nodes, inits, values):
        self.nodes, self.inits, self.values = nodes, inits, values


class LoopBuilder(Builder):
    """Builds one random model around a Loop (the module docstring)."""

    # A nested loop, in the outer body only.
    BODY_OPS = Builder.OPS + [("op_inner_loop", 2.0)]

    def build(self):
        self.main_inits = self.inits
        self.depth = 0            # 0: the main graph, 1: the loop's body, 2: nested
        self.frames = []          # the enclosing bodies' (iteration, condition) names
        self.inner_drawn = False
        self.stops = []           # data-dependent conditions for fit_thresholds
        self.draw_inputs()
        self.draw_ops(self.choice([0, 1, 2, 3], p=[3, 3, 2, 1]), Builder.OPS)
        pre = len(self.nodes)
        carried = self.draw_carried()
        trips = self.control_input("M", INT64)
        first = self.control_input("cond", BOOL) if self.chance(0.35) else ""
        results = self.emit_loop(trips, first, carried,
                                 data_cond=self.chance(0.4))
        post_start = len(self.nodes)
        if self.chance(0.4):
            self.draw_ops(self.randint(1, 2), Builder.OPS)
        outputs = [v.name for v in results]
        for node in self.nodes[post_start:]:
            outputs += [o for o in node.output
                        if o in self.shapes and o not in self.int_outputs
                        and self.used[o] == 0]
        for node in self.nodes[:pre]:
            outputs += [o for o in node.output
                        if o in self.shapes and o not in self.int_outputs
                        and self.chance(0.25)]
        graph = oh.make_graph(
            self.nodes, "fuzz_loop", self.inputs,
            [vinfo(o, FLOAT, self.shapes[o]) for o in dict.fromkeys(outputs)],
            self.inits)
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
        model.ir_version = 8
        return model

    def draw_ops(self, count, ops):
        """Draws `count` nodes from `ops` (name, weight) in the current scope."""
        names = [n for n, _ in ops]
        weights = [w for _, w in ops]
        target = len(self.nodes) + count
        attempts = 0
        while len(self.nodes) < target and attempts < 100:
            attempts += 1
            getattr(self, self.choice(names, p=weights))()

    def control_input(self, prefix, elem):
        name = self.fresh(prefix)
        self.inputs.append(vinfo(name, elem, []))
        return name

    def draw_carried(self):
        """1-3 distinct main-graph values to carry (recent ones first)."""
        out = []
        for _ in range(self.choice([1, 2, 3], p=[5, 3, 1])):
            v = self.pick(lambda v: v.rank >= 1 and 1 <= v.size <= MAX_CARRIED
                          and v not in out)
            if v is not None:
                out.append(v)
        return out

    def const_f32(self, value, prefix="f", main=False):
        name = self.fresh(prefix)
        (self.main_inits if main else self.inits).append(
            onh.from_array(np.array(value, dtype=np.float32), name))
        return name

    def node(self, op, inputs, output, **attrs):
        """A node whose one result the op generators do not pick (a
        condition, a sum, the counter before it is a [1] tensor)."""
        for name in inputs:
            if name:
                self.used[name] += 1
        self.nodes.append(oh.make_node(op, list(inputs), [output], **attrs))
        return output

    # The body.

    def enter(self):
        saved = Scope(self.nodes, self.inits, self.values)
        self.nodes, self.inits, self.values = [], [], list(self.values)
        self.depth += 1
        return saved

    def leave(self, saved):
        body = Scope(self.nodes, self.inits, self.values)
        self.nodes, self.inits, self.values = saved.nodes, saved.inits, saved.values
        self.depth -= 1
        return body

    def emit_loop(self, trips, first, carried, data_cond):
        """Adds a Loop carrying `carried` (Values) to the current scope;
        returns its results."""
        saved = self.enter()
        it, cond_in = self.fresh("iter"), self.fresh("cond")
        self.frames.append((it, cond_in))
        formal = [vinfo(it, INT64, []), vinfo(cond_in, BOOL, [])]
        states = []
        for v in carried:
            h = Value(self.fresh("h"), v.shape)
            self.shapes[h.name] = h.shape
            formal.append(vinfo(h.name, FLOAT, h.shape))
            states.append(h)
        start = len(self.values)
        counter = None
        if self.chance(0.5):
            fi = self.node("Cast", [it], self.fresh("fi"), to=FLOAT)
            scaled = self.node("Mul", [fi, self.const_f32(0.25, "quarter")],
                               self.fresh("fi"))
            counter = self.emit("Reshape", [scaled, self.const_i64([1], "shp")],
                                [(1,)])[0]
        self.values += states
        if counter is not None and self.chance(0.5):
            h = self.choice(states)
            self.emit("Add", [h.name, counter.name], [h.shape])
        ops = self.BODY_OPS if self.depth == 1 else Builder.OPS
        self.draw_ops(self.randint(2, 7) if self.depth == 1 else
                      self.randint(1, 4), ops)
        nexts = self.close_body(states, self.values[start:])
        if data_cond:
            cond_out = self.data_condition(cond_in, self.choice(
                [nexts, states], p=[2, 1]))
        else:
            cond_out = self.node("Identity", [cond_in], self.fresh("cond"))
        self.frames.pop()
        body = self.leave(saved)
        graph = oh.make_graph(
            body.nodes, self.fresh("body"), formal,
            [vinfo(cond_out, BOOL, [])] +
            [vinfo(v.name, FLOAT, v.shape) for v in nexts], body.inits)
        results = [Value(self.fresh("loop"), v.shape) for v in carried]
        self.node("Loop", [trips, first] + [v.name for v in carried],
                  results[0].name)
        self.nodes[-1].output.extend(r.name for r in results[1:])
        self.nodes[-1].attribute.append(oh.make_attribute("body", graph))
        self.nodes[-1].name = self.fresh("Loop")
        for r in results:
            self.values.append(r)
            self.shapes[r.name] = r.shape
        return results

    def close_body(self, states, drawn):
        """The carried values' next states: for each, a body value computed
        from the state (its shape if one has it), fitted to the shape, plus
        the body's dead ends, through a bounded update."""
        deps = {h.name for h in states}
        for node in self.nodes:
            if (set(node.input) | subgraph_reads(node)) & deps:
                deps.update(node.output)
        produced = [v for v in drawn if v.size >= 1 and v not in states]
        from_state = [v for v in produced if v.name in deps]
        dead = [v for v in produced if self.used[v.name] == 0]
        sources = []
        for h in states:
            exact = [v for v in from_state if v.shape == h.shape]
            if exact and self.chance(0.6):
                src = exact[-1] if self.chance(0.5) else self.choice(exact)
            elif from_state:
                src = from_state[-1] if self.chance(0.5) else self.choice(from_state)
            else:
                src = h
            sources.append(src)
        dead = [v for v in dead if v not in sources][:3]
        terms = [self.fit(src, h.shape) for src, h in zip(sources, states)]
        for v in dead:
            j = self.randint(0, len(states) - 1)
            terms[j] = self.emit("Add", [terms[j].name,
                                         self.fit(v, states[j].shape).name],
                                 [states[j].shape])[0]
        return [self.bounded(h, t) for h, t in zip(states, terms)]

    def fit(self, v, shape):
        """`v` as a value of `shape`: itself, or flattened, tiled, sliced
        and reshaped."""
        if v.shape == tuple(shape):
            return v
        n, want = v.size, nelems(shape)
        flat = v if v.rank == 1 else self.emit(
            "Reshape", [v.name, self.const_i64([-1], "shp")], [(n,)])[0]
        if n < want:
            reps = -(-want // n)
            flat = self.emit("Tile", [flat.name, self.const_i64([reps], "rep")],
                             [(n * reps,)])[0]
            n *= reps
        if n > want:
            off = self.randint(0, n - want)
            flat = self.emit("Slice", [flat.name, self.const_i64([off], "st"),
                                       self.const_i64([off + want], "en")],
                             [(want,)])[0]
        if tuple(shape) == (want,):
            return flat
        return self.emit("Reshape", [flat.name, self.const_i64(list(shape), "shp")],
                         [tuple(shape)])[0]

    def bounded(self, h, t):
        """The next state from state h and term t, bounded over iterations."""
        kind = self.choice(["tanh", "residual", "decay", "sigmoid"], p=[3, 3, 2, 1])
        if kind == "sigmoid":
            return self.emit("Sigmoid", [t.name], [h.shape])[0]
        th = self.emit("Tanh", [t.name], [h.shape])[0]
        if kind == "tanh":
            return th
        if kind == "residual":
            half = self.emit("Mul", [th.name, self.const_f32(0.5, "half")],
                             [h.shape])[0]
            return self.emit("Add", [h.name, half.name], [h.shape])[0]
        a = self.const_f32(self.choice([0.5, 0.75, 0.9]), "decay")
        ha = self.emit("Mul", [h.name, a], [h.shape])[0]
        return self.emit("Add", [ha.name, th.name], [h.shape])[0]

    def data_condition(self, cond_in, values):
        """cond_out = ReduceSum(v) < thr (or >), thr fitted later."""
        v = self.choice(values)
        total = self.node("ReduceSum", [v.name], self.fresh("sum"), keepdims=0)
        thr = self.const_f32(0.0, "thr", main=self.chance(0.5))
        op = self.choice(["Less", "Greater"])
        cond = self.node(op, [total, thr], self.fresh("cond"))
        if self.chance(0.3):
            cond = self.node("And", [cond_in, cond], self.fresh("cond"))
        self.stops.append({"sum": total, "value": v.name, "thr": thr, "op": op,
                           "cond_in": cond_in})
        return cond

    def op_inner_loop(self):
        """A Loop nested in the body, carrying one body value."""
        if self.depth != 1 or self.inner_drawn:
            return False
        v = self.pick(lambda v: v.rank >= 1 and 1 <= v.size <= 256)
        if v is None:
            return False
        self.inner_drawn = True
        it, cond_in = self.frames[-1]
        kind = self.choice(["input", "counter", "constant"], p=[2, 2, 1])
        if kind == "input":
            trips = self.control_input("Mi", INT64)
        elif kind == "counter":
            trips = it
        else:
            trips = self.const_i64(INNER_TRIPS, "mc")
        first = cond_in if self.chance(0.2) else ""
        self.emit_loop(trips, first, [v], data_cond=False)
        return True


def loop_nodes(graph, path=()):
    """(path, node) of every Loop, outermost first; path: node indices
    from the main graph down."""
    for k, node in enumerate(graph.node):
        if node.op_type == "Loop":
            yield path + (k,), node
            yield from loop_nodes(body_of(node), path + (k,))


def body_of(node):
    return next(a.g for a in node.attribute if a.name == "body")


def node_at(model, path):
    graph = model.graph
    for k in path[:-1]:
        graph = body_of(graph.node[k])
    return graph, graph.node[path[-1]]


def generate_loop(seed, builder=LoopBuilder):
    """The seed's loop model, valid ONNX, onnxruntime running it, its
    thresholds fitted: the first of up to ATTEMPTS draws (a draw whose
    shapes ONNX infers otherwise than tracked, or that onnxruntime
    rejects, is drawn again)."""
    error = None
    for attempt in range(ATTEMPTS):
        b = builder(seed if attempt == 0 else [seed, attempt])
        try:
            model = b.build()
            validate(model)
            props = fit_thresholds(model, b.stops, seed)
        except GeneratorError as e:
            error = e
            continue
        oh.set_model_props(model, {"fusion_fuzz.draws": str(attempt + 1),
                                   **props})
        return model
    raise error


# --- Runs -----------------------------------------------------------------


def loop_controls(model):
    """The graph inputs that steer loops: (trip counts of main-graph loops,
    first conditions, trip counts of nested loops)."""
    inputs = {v.name for v in model.graph.input}
    trips, conds, inner = [], [], []
    for path, node in loop_nodes(model.graph):
        if node.input[0] in inputs:
            (trips if len(path) == 1 else inner).append(node.input[0])
        if len(node.input) > 1 and node.input[1] in inputs:
            conds.append(node.input[1])
    inner = [n for n in inner if n not in trips]
    return list(dict.fromkeys(trips)), list(dict.fromkeys(conds)), \
        list(dict.fromkeys(inner))


def is_loop_model(model):
    return bool(loop_controls(model)[0])


def runs_for(model):
    """[(label, {control input: value})]: M = 0, 1, 3, and M = 3 with the
    first condition false where there is one."""
    trips, conds, inner = loop_controls(model)
    runs = [(f"M={m}", m, True) for m in RUN_TRIPS]
    if conds:
        runs.append((f"M={RUN_TRIPS[-1]},cond=0", RUN_TRIPS[-1], False))
    out = []
    for label, m, c in runs:
        feeds = {n: np.array(m, np.int64) for n in trips}
        feeds.update({n: np.array(c, np.bool_) for n in conds})
        feeds.update({n: np.array(INNER_TRIPS, np.int64) for n in inner})
        out.append((label, feeds))
    return out


def data_inputs(model, seed):
    """The seed's feeds of every input that is not a loop control."""
    controls = set(sum(loop_controls(model), []))
    stub = onnx.ModelProto()
    stub.graph.input.extend(v for v in model.graph.input if v.name not in controls)
    stub.graph.initializer.extend(model.graph.initializer)
    return make_inputs(stub, seed)


def run_feeds(model, data, controls):
    """The feeds of one run, in graph-input order."""
    merged = {**data, **controls}
    return {v.name: merged[v.name] for v in model.graph.input if v.name in merged}


def fit_thresholds(model, stops, seed):
    """Sets each data-dependent condition's threshold from the sums the
    seed's inputs give (onnxruntime, the loop run RUN_TRIPS[-1] times with
    the condition held true): the loop stops after a drawn 1, 2 or 3
    iterations, or never, the threshold at least MARGIN of each sum's L1
    norm from it. Runs the model once even without one (onnxruntime must
    accept it). Returns the outcome as model properties."""
    rng = np.random.default_rng([seed, 77])
    probe = copy.deepcopy(model)
    for stop in stops:
        loop = next(node for _, node in loop_nodes(probe.graph)
                    if any(n.output[0] == stop["sum"] for n in body_of(node).node))
        body = body_of(loop)
        l1, held = stop["sum"] + "_l1", stop["sum"] + "_held"
        body.node.extend([
            oh.make_node("ReduceL1", [stop["value"]], [l1], keepdims=0),
            oh.make_node("Identity", [stop["cond_in"]], [held])])
        body.output[0].CopyFrom(vinfo(held, BOOL, []))
        for name in (stop["sum"], l1):
            body.output.append(vinfo(name, FLOAT, []))
            loop.output.append(name + "_scan")
            probe.graph.output.append(oh.make_empty_tensor_value_info(name + "_scan"))
    controls = dict(runs_for(model))[f"M={RUN_TRIPS[-1]}"]
    feeds = run_feeds(probe, data_inputs(model, seed), controls)
    names = [o.name for o in probe.graph.output]
    try:
        outs = dict(zip(names, ort_session(probe, quiet=True).run(names, feeds)))
    except Exception as e:  # noqa: BLE001
        raise GeneratorError(f"onnxruntime rejects the model: "
                             f"{str(e).splitlines()[0][:300]}")
    props = {}
    for stop in stops:
        thr, outcome = choose_threshold(
            outs[stop["sum"] + "_scan"].astype(np.float64),
            outs[stop["sum"] + "_l1_scan"].astype(np.float64), stop["op"], rng)
        for init in iter_initializers(model.graph):
            if init.name == stop["thr"]:
                init.CopyFrom(onh.from_array(np.array(thr, np.float32), init.name))
        props["fusion_fuzz.loop_stop"] = outcome
    return props


def choose_threshold(sums, norms, op, rng):
    """(threshold, outcome): outcome 'after K' (the condition turns false
    in iteration K, so K iterations run) or 'never'."""
    if not np.all(np.isfinite(sums)) or not np.all(np.isfinite(norms)):
        return 0.0, "undetermined"
    margin = MARGIN * norms + 1e-3
    sign = 1.0 if op == "Less" else -1.0   # continue while sign * s < sign * thr
    s = sign * sums
    lo_all = s + margin        # continuing at j needs thr' > lo_all[j]
    hi_all = s - margin        # stopping at k needs thr' <= hi_all[k]
    options = []
    for k in range(len(s)):
        lo = max(lo_all[:k]) if k else -np.inf
        hi = hi_all[k]
        if lo < hi:
            mid = (lo + hi) / 2 if np.isfinite(lo) else hi - margin[k]
            options.append((f"after {k + 1}", mid))
    options.append(("never", max(lo_all) + float(np.max(margin))))
    # Stopping within the largest run (after 1 or 2 of 3) is the case to see.
    weights = np.array([STOP_WEIGHTS[o] for o, _ in options], np.float64)
    outcome, t = options[int(rng.choice(len(options), p=weights / weights.sum()))]
    return float(sign * t), outcome


def iter_initializers(graph):
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from iter_initializers(attr.g)


# --- The reference --------------------------------------------------------


def expand_body_layer_norms(model):
    """fuzz_reference.expand_layer_norms in every graph, bodies included
    (onnxruntime's own LayerNormalization kernel loses digits that Kiln's
    two-pass form keeps)."""
    model = expand_layer_norms(model)
    if not any(n.op_type == "LayerNormalization"
               for _, loop in loop_nodes(model.graph)
               for n in body_of(loop).node):
        return model
    # Ranks for the expansion: every value's inferred shape, from any scope;
    # a Loop's results have its initial values' (ONNX infers no shape for
    # a nested loop's results).
    inferred = onnx.shape_inference.infer_shapes(model)
    found = list(inferred.graph.input) + list(inferred.graph.value_info) + \
        list(inferred.graph.output)
    for _, loop in loop_nodes(inferred.graph):
        body = body_of(loop)
        found += list(body.input) + list(body.value_info) + list(body.output)
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in found
             if v.type.tensor_type.HasField("shape")}
    for _, loop in loop_nodes(model.graph):
        for out, init in zip(loop.output, loop.input[2:]):
            if init in ranks:
                ranks.setdefault(out, ranks[init])
    infos = [vinfo(name, FLOAT, [1] * rank) for name, rank in ranks.items()]

    def expand(graph):
        for node in graph.node:
            if node.op_type != "Loop":
                continue
            body = body_of(node)
            expand(body)
            tmp = onnx.ModelProto()
            tmp.graph.CopyFrom(body)
            tmp.graph.value_info.extend(infos)
            done = expand_layer_norms(tmp).graph
            del body.node[:]
            body.node.extend(done.node)
            del body.initializer[:]
            body.initializer.extend(done.initializer)
    expand(model.graph)
    return model


EVALUATED = {"Identity": lambda a: a, "Not": np.logical_not,
             "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
             "And": np.logical_and, "Or": np.logical_or}


class Unroller:
    """A loop-free twin of a model for one run: each Loop written out for
    the run's trip counts and conditions (known at the run), every
    iteration's body a copy with its own names. Where a condition is only
    known from data, each later iteration's state is Where(active, next,
    state), active = active and cond_out: exactly ONNX's semantics, so
    onnxruntime's perturbed runs of the twin measure every op of every
    iteration (fuzz_reference.reference)."""

    def __init__(self, model, feeds):
        self.model = model
        self.nodes = []
        self.inits = list(iter_initializers(model.graph))  # hoisted: names are unique
        self.count = 0
        self.known = {}   # name -> np.ndarray: integers and bools fixed at this run
        for init in self.inits:
            if init.data_type in (INT64, BOOL):
                self.known[init.name] = onh.to_array(init)
        for name, v in feeds.items():
            if v.dtype.kind in "bi":
                self.known[name] = v
        self.true = None

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}__u{self.count}"

    def const(self, value, dtype, prefix):
        name = self.fresh(prefix)
        arr = np.array(value, dtype)
        self.inits.append(onh.from_array(arr, name))
        self.known[name] = arr
        return name

    def twin(self):
        self.expand(self.model.graph.node, {})
        g = self.model.graph
        reads = {i for n in self.nodes for i in n.input} | {o.name for o in g.output}
        inputs = [v for v in g.input if v.name in reads]
        inits = [t for t in self.inits if t.name in reads]
        graph = oh.make_graph(self.nodes, g.name + "_unrolled", inputs,
                              list(g.output), inits)
        model = oh.make_model(graph, opset_imports=list(self.model.opset_import))
        model.ir_version = self.model.ir_version
        return model

    def expand(self, nodes, names):
        for node in nodes:
            if node.op_type == "Loop":
                self.unroll(node, names)
                continue
            if any(a.HasField("g") or a.graphs for a in node.attribute):
                raise GeneratorError(f"the unroller cannot copy {node.op_type} "
                                     "(a subgraph)")
            new = copy.deepcopy(node)
            new.input[:] = [names.get(i, i) for i in node.input]
            new.output[:] = [names.get(o, o) for o in node.output]
            self.nodes.append(new)
            self.evaluate(new)

    def evaluate(self, node):
        fn = EVALUATED.get(node.op_type)
        args = [self.known.get(i) for i in node.input if i]
        if node.op_type == "Cast" and args and args[0] is not None:
            to = {INT64: np.int64, BOOL: np.bool_}.get(
                next(a.i for a in node.attribute if a.name == "to"))
            if to is not None:
                self.known[node.output[0]] = args[0].astype(to)
        elif fn is not None and args and all(a is not None for a in args):
            self.known[node.output[0]] = np.asarray(fn(*args))

    def unroll(self, node, names):
        body = body_of(node)
        if len(body.output) != len(node.input) - 1:
            raise GeneratorError("the unroller needs a Loop without scan outputs")
        trips = names.get(node.input[0], node.input[0]) if node.input[0] else ""
        if trips not in self.known:
            raise GeneratorError(f"the unroller needs Loop {node.name}'s trip "
                                 "count at compile time")
        m = int(self.known[trips])
        cond = names.get(node.input[1], node.input[1]) if len(node.input) > 1 else ""
        if not cond:
            active = True
        elif cond in self.known:
            active = bool(self.known[cond])
        else:
            active = cond
        state = [names.get(v, v) for v in node.input[2:]]
        formal = [v.name for v in body.input]
        for k in range(m):
            if active is False:
                break
            inner = dict(names)
            inner[formal[0]] = self.const(k, np.int64, formal[0])
            if active is True:
                if self.true is None:
                    self.true = self.const(True, np.bool_, "true")
                inner[formal[1]] = self.true
            else:
                inner[formal[1]] = active
            inner.update(zip(formal[2:], state))
            for n in body.node:
                for o in n.output:
                    if o:
                        inner[o] = self.fresh(o)
            self.expand(body.node, inner)
            outs = [inner.get(o.name, o.name) for o in body.output]
            if active is True:
                state = outs[1:]
            else:
                kept = []
                for nxt, old in zip(outs[1:], state):
                    kept.append(self.fresh("kept"))
                    self.nodes.append(oh.make_node("Where", [active, nxt, old],
                                                   [kept[-1]]))
                state = kept
            c = self.known.get(outs[0])
            if c is not None and not bool(c):
                active = False
            elif c is not None:
                pass           # true: active stays what it was
            elif active is True:
                active = outs[0]
            else:
                both = self.fresh("active")
                self.nodes.append(oh.make_node("And", [active, outs[0]], [both]))
                active = both
        for out, value in zip(node.output, state):
            self.nodes.append(oh.make_node("Identity", [value],
                                           [names.get(out, out)]))


def unroll(model, feeds):
    return Unroller(model, feeds).twin()


def agree(a, b):
    """Whether onnxruntime's Loop and its unrolled twin computed the same
    numbers (the same kernels on the same values: equal up to a few ulps)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a64), np.isnan(b64)):
        return False
    fin = np.isfinite(b64)
    if not np.array_equal(a64[~fin], b64[~fin]):
        return False
    rms = float(np.sqrt(np.mean(b64[fin] ** 2))) if fin.any() else 0.0
    return bool(np.all(np.abs(a64[fin] - b64[fin]) <= 1e-5 * (rms + np.abs(b64[fin]))))


# --- One model, all variants and runs ---------------------------------------


class LoopResult:
    def __init__(self, seed):
        self.seed = seed
        self.statuses = {}     # 'variant@M=3' -> pass | unsupported | fail
        self.details = {}
        self.signatures = {}
        self.amps = []
        self.ratios = []
        self.generator_error = None
        self.ops = collections.Counter()
        self.feeds = {}        # run label -> feeds
        self.device_loops = {}  # variant -> the loops kilnc --stats lists


DEVICE_LOOPS = re.compile(r"^device loops: (\d+)", re.M)


def all_ops(graph):
    ops = collections.Counter(n.op_type for n in graph.node)
    for _, loop in loop_nodes(graph):
        ops.update(n.op_type for n in body_of(loop).node)
    return ops


def check_loop(model, seed, variants, tools, workdir):
    """Compiles each variant once and runs it at every run of runs_for."""
    res = LoopResult(seed)
    res.model = model
    res.ops = all_ops(model.graph)
    data = data_inputs(model, seed)
    runs = runs_for(model)
    expanded = expand_body_layer_norms(model)
    names = [o.name for o in model.graph.output]
    refs = {}
    try:
        session = ort_session(expanded, quiet=True)
        for label, controls in runs:
            feeds = run_feeds(model, data, controls)
            res.feeds[label] = feeds
            try:
                want = session.run(names, feeds)
            except Exception as e:  # noqa: BLE001
                raise GeneratorError(f"onnxruntime rejects the model: "
                                     f"{str(e).splitlines()[0][:300]}")
            twin = unroll(expanded, feeds)
            twin_inputs = {v.name for v in twin.graph.input}
            _, got, amp, floors, sens = reference(
                twin, {k: v for k, v in feeds.items() if k in twin_inputs})
            for name, a, b in zip(names, got, want):
                if not agree(a, b):
                    raise GeneratorError(
                        f"harness: at {label} the unrolled twin's '{name}' "
                        f"differs from onnxruntime's Loop")
            refs[label] = (want, amp, floors, sens)
    except GeneratorError as e:
        res.generator_error = str(e)
        return res
    res.amps = [max(a) for want, amp, _, _ in refs.values() for a in amp]
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    files = {}
    for r, (label, _) in enumerate(runs):
        files[label] = []
        for i, (name, arr) in enumerate(res.feeds[label].items()):
            f = os.path.join(workdir, f"in{i}-run{r}.npy")
            np.save(f, arr)
            files[label].append((name, f))
    for variant in variants:
        status, detail, artifact, text = compile_variant(
            path, variant, workdir, tools, extra=["--stats"])
        detail = detail.replace(path, "MODEL")   # one class across seeds
        if status != "ok":
            for label, _ in runs:
                key = f"{variant}@{label}"
                res.statuses[key] = "unsupported" if status == "unsupported" else "fail"
                res.details[key] = detail
                res.signatures[key] = (f"{status}: {detail}" if status != "crash"
                                       else detail)
            continue
        m = DEVICE_LOOPS.search(text)
        res.device_loops[variant] = int(m.group(1)) if m else 0
        for r, (label, _) in enumerate(runs):
            key = f"{variant}@{label}"
            want, amp, floors, sens = refs[label]
            status, detail, outs = run_artifact(
                artifact, files[label], names,
                os.path.join(workdir, f"{variant}-run{r}.out"), tools, seed)
            if status != "ok":
                res.statuses[key] = "fail"
                res.details[key] = detail
                res.signatures[key] = f"{status}: {detail}"
                continue
            rows = compare(names, want, amp, floors, sens, outs, variant)
            res.ratios += [(row[3], key, row[0]) for row in rows if row[3] is not None]
            res.details[key] = "\n".join(
                f"  {row[0]} {list(want[names.index(row[0])].shape)}: {row[2]}"
                for row in rows)
            bad = [row for row in rows if not row[1]]
            if bad:
                res.statuses[key] = "fail"
                kinds = sorted({"mismatch" if "rel-err" in row[2] else row[2].split()[0]
                                for row in bad})
                res.signatures[key] = "wrong output: " + ",".join(kinds)
            else:
                res.statuses[key] = "pass"
    return res


def controls_text(res, label):
    feeds = res.feeds.get(label, {})
    controls = set(sum(loop_controls(res.model), []))
    return " ".join(f"-i {k}={int(v)}" for k, v in feeds.items() if k in controls)


def failure_report(res, key):
    variant, label = key.split("@")
    flags = " ".join(variant_flags(variant))
    return (f"FAIL seed {res.seed} variant {variant} at {label} "
            f"(kilnc {flags or '(defaults)'}; kiln-run {controls_text(res, label)}): "
            f"{res.signatures[key]}\n{res.details[key]}\n{graph_text(res.model)}\n")


def save_failure(res, key, fail_dir):
    variant, label = key.split("@")
    d = os.path.join(fail_dir, f"seed{res.seed}-{variant}-"
                     + re.sub(r"[^A-Za-z0-9]+", "", label))
    os.makedirs(d, exist_ok=True)
    onnx.save(res.model, os.path.join(d, "model.onnx"))
    np.savez(os.path.join(d, "inputs.npz"), **res.feeds.get(label, {}))
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write(failure_report(res, key))
    return d


def by_variant(res, variants):
    """The runs of each variant as one status (--repros: a file names
    variants): fail if any run fails, else unsupported if any is, else
    pass."""
    out = LoopResult(res.seed)
    out.model, out.generator_error = res.model, res.generator_error
    for v in variants:
        keys = [k for k in res.statuses if k.split("@")[0] == v]
        statuses = [res.statuses[k] for k in keys]
        for status in ("fail", "unsupported", "pass"):
            if status in statuses:
                out.statuses[v] = status
                break
        bad = [k for k in keys if res.statuses[k] != "pass"]
        if bad:
            out.signatures[v] = f"{bad[0].split('@')[1]}: {res.signatures[bad[0]]}"
        out.details[v] = "\n".join(
            f"  at {k.split('@')[1]}: {res.statuses[k]}" +
            (f"\n{res.details.get(k, '')}" if res.statuses[k] != "pass" else "")
            for k in keys)
    return out


class LoopKinds:
    """Per-model counts for the summary (check_loop runs on a pool)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.stops = collections.Counter()
        self.inner = collections.Counter()
        self.compiles = collections.Counter()

    def check(self, model, seed, variants, tools, workdir):
        res = check_loop(model, seed, variants, tools, workdir)
        props = {p.key: p.value for p in model.metadata_props}
        top = {v.name for v in model.graph.input}
        controls = set(sum(loop_controls(model), []))
        with self.lock:
            self.counts["models"] += 1
            self.counts["draws"] += int(props.get("fusion_fuzz.draws", 1))
            if "fusion_fuzz.loop_stop" in props:
                self.stops[props["fusion_fuzz.loop_stop"]] += 1
            if loop_controls(model)[1]:
                self.counts["first condition"] += 1
            for path, loop in loop_nodes(model.graph):
                body = body_of(loop)
                if len(path) > 1:
                    outer = body_of(node_at(model, path[:-1])[1])
                    trips = loop.input[0]
                    self.inner["input" if trips in top else
                               "counter" if trips == outer.input[0].name
                               else "constant"] += 1
                else:
                    self.counts["carried"] += len(loop.input) - 2
                    if any(body.input[0].name in n.input for n in body.node):
                        self.counts["counter"] += 1
                    local = ({v.name for v in body.input} |
                             {t.name for t in body.initializer} |
                             {o for n in body.node for o in n.output} | controls)
                    if any(i and i not in local for n in body.node for i in n.input):
                        self.counts["captures"] += 1
            for n in res.device_loops.values():
                self.compiles[n] += 1
        return res

    def lines(self):
        c = self.counts
        stops = ", ".join(f"{k} {v}" for k, v in sorted(self.stops.items()))
        inner = ", ".join(f"{k} {v}" for k, v in sorted(self.inner.items()))
        return [
            f"loops: {c['models']} models from {c['draws']} draws, "
            f"{c['carried']} carried values; {c['captures']} bodies capture "
            f"main-graph values, {c['counter']} read the counter; "
            f"{c['first condition']} first-condition inputs; "
            f"{sum(self.stops.values())} data-dependent conditions "
            f"({stops or 'none'}); {sum(self.inner.values())} nested "
            f"(trip count: {inner or 'none'})",
            "device loops per compile (kilnc --stats): " + ", ".join(
                f"{k}: {v}" for k, v in sorted(self.compiles.items()))]


# --- Reduction (--minimize) -------------------------------------------------


def loop_candidates(model):
    """Smaller loop models: fuzz_reduce.candidates' steps inside bodies."""
    shapes = all_shapes(model)
    for path, _ in list(loop_nodes(model.graph)):
        _, loop = node_at(model, path)
        body = body_of(loop)
        carried = len(loop.input) - 2
        # Drop a carried value.
        for j in range(carried if carried > 1 else 0):
            m = copy.deepcopy(model)
            graph, node = node_at(m, path)
            b = body_of(node)
            out = node.output[j]
            if any(out in n.input or out in subgraph_reads(n) for n in graph.node) \
                    or len(path) > 1 and out in {o.name for o in graph.output}:
                continue
            del node.input[2 + j], node.output[j], b.input[2 + j], b.output[1 + j]
            if len(path) == 1:
                keep = [o for o in m.graph.output if o.name != out]
                if not keep:
                    continue
                del m.graph.output[:]
                m.graph.output.extend(keep)
            yield f"drop carried value {j} of {loop.name}", prune_all(m)
        # The condition: held, and no first condition.
        producer = {o: n for n in body.node for o in n.output}
        cond_out = body.output[0].name
        made = producer.get(cond_out)
        if made is None or made.op_type != "Identity" or \
                made.input[0] != body.input[1].name:
            m = copy.deepcopy(model)
            b = body_of(node_at(m, path)[1])
            held = cond_out + "_held"
            b.node.append(oh.make_node("Identity", [b.input[1].name], [held]))
            b.output[0].name = held
            yield f"hold the condition of {loop.name}", prune_all(m)
        if len(loop.input) > 1 and loop.input[1]:
            m = copy.deepcopy(model)
            node_at(m, path)[1].input[1] = ""
            yield f"drop the first condition of {loop.name}", prune_all(m)
        # Bypass a body node: its users read an input of its shape.
        outputs = {o.name for o in body.output}
        formal = {v.name for v in body.input}
        for k, n in enumerate(body.node):
            if len(n.output) != 1 or n.op_type == "Identity" and n.output[0] in outputs:
                continue
            out = n.output[0]
            for inp in n.input:
                if not inp or shapes.get(inp) != shapes.get(out) or inp in outputs:
                    continue
                m = copy.deepcopy(model)
                b = body_of(node_at(m, path)[1])
                if out in outputs and (inp in formal or inp not in producer):
                    b.node[k].CopyFrom(oh.make_node("Identity", [inp], [out]))
                else:
                    del b.node[k]
                    rename_reads(b, out, inp)
                yield f"bypass {n.op_type} ({out}) in {loop.name}", prune_all(m)
                break
        # Cut a body node: its results become main-graph inputs the body reads.
        for k, n in enumerate(body.node):
            if any(o in outputs or o not in shapes or shapes[o][0] != FLOAT
                   for o in n.output if o) or n.op_type == "Loop":
                continue
            m = copy.deepcopy(model)
            b = body_of(node_at(m, path)[1])
            del b.node[k]
            for o in n.output:
                if o:
                    m.graph.input.append(vinfo(o, FLOAT, shapes[o][1]))
            yield f"cut {n.op_type} ({n.output[0]}) in {loop.name}", prune_all(m)


def all_shapes(model):
    """name -> (elem type, dims) for every value of every scope."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception:  # noqa: BLE001 - no shapes, fewer candidates
        return {}
    infos = list(inferred.graph.input) + list(inferred.graph.value_info) + \
        list(inferred.graph.output)
    for _, loop in loop_nodes(inferred.graph):
        body = body_of(loop)
        infos += list(body.input) + list(body.value_info) + list(body.output)
    shapes = {}
    for v in infos:
        tt = v.type.tensor_type
        shapes[v.name] = (tt.elem_type, [d.dim_value for d in tt.shape.dim])
    return shapes


def prune_body(body):
    """Drops body nodes no body output needs, and unused initializers."""
    needed = {o.name for o in body.output}
    keep = []
    for n in reversed(list(body.node)):
        if any(o in needed for o in n.output):
            keep.append(n)
            needed.update(i for i in n.input if i)
            needed |= subgraph_reads(n)
    keep.reverse()
    del body.node[:]
    body.node.extend(keep)
    inits = [t for t in body.initializer if t.name in needed]
    del body.initializer[:]
    body.initializer.extend(inits)


def prune_all(model):
    """fuzz_reduce.prune, after pruning every body (innermost first)."""
    for path, _ in reversed(list(loop_nodes(model.graph))):
        prune_body(body_of(node_at(model, path)[1]))
    return prune(model)
