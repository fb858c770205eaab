"""Shrinking a failing model (fusion_fuzz.py --minimize): smaller
candidate models, most reducing first, and the greedy loop that keeps a
candidate while the same failure persists. A Loop's body reads values of
the enclosing graphs by name: prune keeps them and bypass renames them
(fuzz_loop.py's loop_candidates shrink the bodies themselves).
"""
import onnx
import onnx.helper as oh

from fuzz_reference import value_shapes


def subgraph_reads(node):
    """The names a node's subgraphs (a Loop's body, recursively) read or
    return: their own values and those of enclosing graphs."""
    names = set()
    for attr in node.attribute:
        for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
            for n in g.node:
                names.update(i for i in n.input if i)
                names |= subgraph_reads(n)
            names.update(o.name for o in g.output)
    return names


def rename_reads(graph, old, new):
    """Every read of `old` in `graph`'s nodes and their subgraphs, and a
    graph output named `old`, reads `new`."""
    for n in graph.node:
        n.input[:] = [new if i == old else i for i in n.input]
        for attr in n.attribute:
            if attr.HasField("g"):
                rename_reads(attr.g, old, new)
    for o in graph.output:
        if o.name == old:
            o.name = new


def prune(model):
    """Drops nodes no output depends on, and unused inputs/initializers."""
    g = model.graph
    needed = {o.name for o in g.output}
    keep = []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
            needed |= subgraph_reads(node)
    keep.reverse()
    new = onnx.ModelProto()
    new.CopyFrom(model)
    del new.graph.node[:]
    new.graph.node.extend(keep)
    ins = [v for v in g.input if v.name in needed]
    del new.graph.input[:]
    new.graph.input.extend(ins)
    inits = [t for t in g.initializer if t.name in needed]
    del new.graph.initializer[:]
    new.graph.initializer.extend(inits)
    del new.graph.value_info[:]
    return new



def candidates(model):
    """Smaller models to try, most reducing first."""
    g = model.graph
    shapes = value_shapes(model)
    outs = [o.name for o in g.output]
    # 1. Drop one graph output.
    if len(outs) > 1:
        for name in outs:
            m = onnx.ModelProto()
            m.CopyFrom(model)
            keep = [o for o in m.graph.output if o.name != name]
            del m.graph.output[:]
            m.graph.output.extend(keep)
            yield f"drop output {name}", prune(m)
    nodes = list(g.node)
    producer = {o: n for n in nodes for o in n.output}
    graph_inputs = {v.name for v in g.input}
    # 2. Truncate: an output's producer goes, one of its operands is the output.
    for name in outs:
        node = producer.get(name)
        if node is None:
            continue
        for inp in node.input:
            if not inp or inp in graph_inputs or inp in outs or \
                    inp not in shapes or inp not in producer:
                continue
            m = onnx.ModelProto()
            m.CopyFrom(model)
            for o in m.graph.output:
                if o.name == name:
                    et, dims = shapes[inp]
                    o.CopyFrom(oh.make_tensor_value_info(inp, et, dims))
            yield f"truncate {node.op_type} ({name} -> {inp})", prune(m)
    # 3. Cut a node: its results become graph inputs.
    for idx, node in enumerate(nodes):
        if any(o in outs for o in node.output):
            continue
        m = onnx.ModelProto()
        m.CopyFrom(model)
        del m.graph.node[idx]
        for o in node.output:
            if o and o in shapes:
                et, dims = shapes[o]
                m.graph.input.append(oh.make_tensor_value_info(o, et, dims))
        yield f"cut {node.op_type} ({node.output[0]})", prune(m)
    # 4. Bypass a node: its users read an input with the same shape.
    for idx, node in enumerate(nodes):
        if len(node.output) != 1:
            continue
        out = node.output[0]
        for inp in node.input:
            if inp and inp in shapes and shapes[inp] == shapes.get(out) and \
                    inp not in outs:
                m = onnx.ModelProto()
                m.CopyFrom(model)
                del m.graph.node[idx]
                for n in m.graph.node:
                    for k, name in enumerate(n.input):
                        if name == out:
                            n.input[k] = inp
                    for attr in n.attribute:   # a body reading it by name
                        if attr.HasField("g"):
                            rename_reads(attr.g, out, inp)
                renamed = False
                for o in m.graph.output:
                    if o.name == out:
                        o.name = inp
                        renamed = True
                if renamed and any(v.name == inp for v in m.graph.input):
                    continue  # an output may not be a graph input
                yield f"bypass {node.op_type} ({out})", prune(m)
                break



def shrink(model, same_failure, more=None):
    """Greedy reduction: takes the first candidate on which
    `same_failure(candidate)` holds, until none does. `more(model)` yields
    further candidates, tried after candidates(model)'s."""
    import itertools
    changed = True
    while changed:
        changed = False
        for what, cand in itertools.chain(candidates(model),
                                          more(model) if more else ()):
            if len(cand.graph.node) == 0 or len(cand.graph.output) == 0:
                continue
            if same_failure(cand):
                print(f"  minimize: {what} -> {len(cand.graph.node)} nodes",
                      flush=True)
                model = cand
                changed = True
                break
    return model
