#!/usr/bin/env python3
"""Every op kilnc imports, with every arity: a clean error or an import.

Usage: arity_sweep.py --kilnc PATH --work DIR [--jobs N] [--only RE]
                      [--fuzz-target PATH]

docs/reliability.md "Arity sweep". The ONNX fuzzer found a handler that
read an input's type before checking how many inputs the node had (finding
9); this checks every handler for that class of bug at once, instead of
waiting for the fuzzer to reach each one. For each op `kilnc
--list-onnx-ops` lists (domains included), one model per case, the node
alone in its graph, no attributes, every input a graph input float32
[2, 3] (a float op's usual operand; an op wanting another type must say
so in its error):

- k inputs, for k = 0 .. the schema's largest arity + 1 (onnx.defs; 0 .. 9
  for com.microsoft ops, which onnx does not define);
- the same with input 0 omitted (the empty name, as ONNX writes an absent
  optional input) when k >= 1, and with the last one omitted when k >= 2;
- no outputs at all, and one output more than the schema allows.

--edges keeps, per op, no inputs, one input more than the schema allows,
input 0 omitted (of one), no outputs and one output too many: about a
third of the cases (CI's default tier; the full tier sweeps all).

Each case runs `kilnc M.onnx --emit=kiln -o out.mlir` (the importer and the
dialect's verifiers, not the pipeline). A case passes when kilnc exits 0,
or exits 1 with exactly one line on stderr that starts with "kilnc: error:"
and names the model file. It fails on exit 2 (an internal error: a crash,
an assertion, a verifier error on what the importer built), on a signal,
on more than one line, and on a timeout (30 s).

--fuzz-target runs the cases through kiln-fuzz-onnx as well (the importer
and the full compile in memory, under ASan and UBSan; every case once).

The last line: "arity-sweep: N ops, C cases: I import, E clean errors, F
fail". Exit status 1 when a case fails.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

import onnx
import onnx.defs
import onnx.helper as oh

DOMAINS = ("ai.onnx.preview.training", "ai.onnx.ml", "com.microsoft")


def listed_ops(kilnc):
    text = subprocess.run([kilnc, "--list-onnx-ops"], capture_output=True,
                          text=True, check=True).stdout
    ops = []
    for line in text.splitlines():
        m = re.match(r"\| ([A-Za-z0-9_.]+) \| ([0-9, ]+) \|", line)
        if not m:
            continue
        name, versions = m.group(1), [int(v) for v in m.group(2).split(",")]
        domain = ""
        for d in DOMAINS:
            if name.startswith(d + "."):
                domain, name = d, name[len(d) + 1:]
        ops.append((domain, name, max(versions)))
    return ops


def arity(domain, name, version):
    """(most inputs, most outputs) the schema allows; None when unknown."""
    try:
        schema = onnx.defs.get_schema(name, version, domain)
    except Exception:
        return None
    most_in = min(schema.max_input, 8)
    most_out = min(schema.max_output, 8)
    return most_in, most_out


def opsets(domain, version):
    # The default domain is needed by every model (kilnc's rule: a model of
    # ml-domain ops alone needs none, but one more import does no harm).
    out = [oh.make_opsetid("", 18)]
    if domain:
        out.append(oh.make_opsetid(domain, version))
    return out


def model_for(domain, name, version, inputs, outputs):
    floats = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [2, 3])
              for n in inputs if n]
    outs = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
            for n in outputs]
    node = oh.make_node(name, inputs, outputs, domain=domain or None,
                        name="n")
    graph = oh.make_graph([node], "sweep", floats, outs)
    model = oh.make_model(graph, opset_imports=opsets(domain, version))
    model.ir_version = 8
    return model


def cases(domain, name, version, edges=False):
    """(label, inputs, outputs) of each case; with `edges`, only no inputs,
    one too many, input 0 omitted, no outputs and one output too many."""
    known = arity(domain, name, version)
    most_in, most_out = known if known else (9, 2)
    for k in range(0, most_in + 2):
        if edges and k not in (0, 1, most_in + 1):
            continue
        names = [f"x{i}" for i in range(k)]
        if not edges or k != 1:
            yield f"in{k}", names, ["y"]
        if k == 1 or (k >= 1 and not edges):
            yield f"in{k}-first-omitted", [""] + names[1:], ["y"]
        if k >= 2 and not edges:
            yield f"in{k}-last-omitted", names[:-1] + [""], ["y"]
    one = ["x0"] if most_in else []
    yield "out0", one, []
    yield f"out{most_out + 1}", one, [f"y{i}" for i in range(most_out + 1)]


def check(kilnc, work, case):
    label, path = case
    out = os.path.join(work, label + ".mlir")
    try:
        ran = subprocess.run([kilnc, path, "--emit=kiln", "-o", out],
                             capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return label, "fail", "timed out after 30 s"
    err = [line for line in ran.stderr.splitlines() if line.strip()]
    if ran.returncode == 0:
        return label, "import", ""
    if ran.returncode == 1 and len(err) == 1 and \
            err[0].startswith("kilnc: error: ") and os.path.basename(path) in err[0]:
        return label, "error", err[0]
    head = " | ".join(err[:3])
    return label, "fail", f"exit {ran.returncode}, {len(err)} lines: {head[:400]}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kilnc", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", default="", help="ops whose name matches RE")
    p.add_argument("--fuzz-target", default="")
    p.add_argument("--edges", action="store_true",
                   help="per op only: no inputs, one too many, input 0 "
                        "omitted, no outputs, one output too many")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ops = [op for op in listed_ops(args.kilnc)
           if not args.only or re.search(args.only, op[1])]
    todo = []
    for domain, name, version in ops:
        qualified = f"{domain}.{name}" if domain else name
        for label, inputs, outputs in cases(domain, name, version, args.edges):
            path = os.path.join(args.work, f"{qualified}-{label}.onnx")
            onnx.save(model_for(domain, name, version, inputs, outputs), path)
            todo.append((f"{qualified}-{label}", path))
    tally = {"import": 0, "error": 0, "fail": 0}
    failures = []
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for label, how, text in pool.map(lambda c: check(args.kilnc, args.work, c), todo):
            tally[how] += 1
            if how == "fail":
                failures.append(f"FAIL {label}: {text}")
    for line in failures:
        print(line)
    status = 1 if failures else 0
    if args.fuzz_target:
        ran = subprocess.run([args.fuzz_target, "-runs=0", "-rss_limit_mb=4096",
                              "-timeout=60"] + [path for _, path in todo],
                             capture_output=True, text=True)
        if ran.returncode != 0:
            report = [line for line in ran.stderr.splitlines()
                      if "ERROR" in line or "SUMMARY" in line or "Running:" in line]
            print("FAIL kiln-fuzz-onnx: " + " | ".join(report[-4:]))
            status = 1
        else:
            print(f"kiln-fuzz-onnx: {len(todo)} cases, no sanitizer report")
    print(f"arity-sweep: {len(ops)} ops, {len(todo)} cases: {tally['import']} "
          f"import, {tally['error']} clean errors, {tally['fail']} fail")
    return status


if __name__ == "__main__":
    sys.exit(main())
