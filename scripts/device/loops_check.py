#!/usr/bin/env python3
"""Device-side loops on the GPU, with and without graph replay.

    scripts/device/loops_check.py prepare --build build --out device-check/loops
        (here: compile test/Target/CUDA/device_loops.py's models for sm_90
        with ptxas, save each run's inputs and onnxruntime's outputs)
    scripts/device/loops_check.py run --dir device-check/loops
                                      [--device cuda|emu] [--kiln-run PATH]
        (on the lent GPU machine, from scripts/device-check.sh, phase
        "loops"; --device emu is the dry run here)

The models are device_loops.py's MODELS (a counted MLP loop, a while loop
whose body decides when to stop, two nested loops, 1,500 iterations, a
pass-through carried value, a body with its own weight), each compiled once
(kilnc --target=sm_90 --stats must list the expected number of device
loops) and run at each of its trip counts and conditions. Every run goes
through kiln-run twice: with --graph (graph replay: on a CUDA 12.4 driver
with a kiln_set_while cubin for the GPU the loops are conditional WHILE
nodes inside the graph) and without (the host reads each loop's flag before
every iteration). Each output is compared with onnxruntime's (graph
optimizations off, computed here) by scripts/numerics.py's fp32 rule.

One line per run:

    mlp M=5 graph: device loops: conditional graph nodes; rel-err ... ok
    mlp M=5 direct: rel-err ... ok

then "<runs> runs, <failures> failures; graph runs with conditional graph
nodes: N of M". kiln-run says how the loops ran only with --graph ("device
loops: ..."; docs/runtime.md "Device-side loops"). The set is the same for
the dry run (about 5 s on emu here). Writes $OUT/loops_check.json. Exits 1 when a run fails or an output is outside its
bound; 0 with "skipped" when the directory was not prepared.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import numerics  # noqa: E402

def safe(label):
    return label.replace(",", "_").replace("=", "")


def prepare(args):
    import numpy as np
    import onnx
    sys.path.insert(0, os.path.join(ROOT, "test", "Target", "CUDA"))
    import device_loops
    kilnc = os.path.join(args.build, "bin", "kilnc")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    manifest = {"target": "sm_90", "models": []}
    for name, make in device_loops.MODELS.items():
        model, loops, runs = make()
        work = os.path.join(args.out, name)
        os.makedirs(work)
        artifact = os.path.join(work, "m.kiln")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            onnx.save(model, path)
            compiled = subprocess.run(
                [kilnc, path, "--target=sm_90", "-o", artifact, "--stats"],
                capture_output=True, text=True)
        if compiled.returncode != 0:
            sys.exit(f"loops_check: kilnc failed on {name}: "
                     f"{compiled.stderr.strip()}")
        found = 0
        for line in compiled.stdout.splitlines():
            if line.startswith("device loops: "):
                found = int(line.split()[2])
        if found != loops:
            sys.exit(f"loops_check: {name}: kilnc --stats lists {found} "
                     f"device loops, expected {loops}")
        session = numerics.ort_session(model.SerializeToString())
        names = [o.name for o in session.get_outputs()]
        entry = {"name": name, "artifact": f"{name}/m.kiln", "loops": loops,
                 "runs": []}
        for label, feeds in runs:
            run_dir = os.path.join(work, safe(label))
            os.makedirs(os.path.join(run_dir, "ref"))
            inputs = {}
            for input_name, data in feeds.items():
                np.save(os.path.join(run_dir, f"{input_name}.npy"), data)
                inputs[input_name] = f"{name}/{safe(label)}/{input_name}.npy"
            outputs = {}
            for output, value in zip(names, session.run(None, feeds)):
                np.save(os.path.join(run_dir, "ref", f"{output}.npy"), value)
                outputs[output] = f"{name}/{safe(label)}/ref/{output}.npy"
            entry["runs"].append({"label": label, "inputs": inputs,
                                  "outputs": outputs})
        manifest["models"].append(entry)
        print(f"loops_check: prepared {name}: {loops} device loop(s), "
              f"{len(runs)} run(s)", flush=True)
    with open(os.path.join(args.out, "loops.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


def run_once(args, model, run, graph, out):
    """kiln-run on one run's inputs: (comparison, how the loops ran or '',
    seconds)."""
    import numpy as np
    command = [args.kiln_run, os.path.join(args.dir, model["artifact"]),
               "--device", args.device, "-o", out]
    if graph:
        command.append("--graph")
    for input_name, file in run["inputs"].items():
        command += ["-i", f"{input_name}={os.path.join(args.dir, file)}"]
    start = time.time()
    ran = subprocess.run(command, capture_output=True, text=True)
    seconds = time.time() - start
    label = f"{model['name']} {run['label']} {'graph' if graph else 'direct'}"
    if ran.returncode != 0:
        text = (ran.stderr or ran.stdout).strip()
        why = text.splitlines()[-1] if text else f"exit {ran.returncode}"
        failed = numerics.Comparison(name=label,
                                     tol=numerics.tolerance("fp32"),
                                     problem=f"kiln-run failed: {why}")
        return failed, "", seconds
    path = ""
    for line in ran.stdout.splitlines():
        if line.startswith("device loops: "):
            path = line[len("device loops: "):]
    results = []
    for output, file in run["outputs"].items():
        want = np.load(os.path.join(args.dir, file))
        got_file = os.path.join(out, f"{output}.npy")
        got = np.load(got_file) if os.path.exists(got_file) else None
        results.append(numerics.compare(got, want, "fp32", output))
    return numerics.combine(results, label), path, seconds


def run(args):
    manifest_path = os.path.join(args.dir, "loops.json")
    if not os.path.exists(manifest_path):
        print(f"loops_check: skipped ({args.dir} not prepared: "
              "loops_check.py prepare)")
        return 0
    if not args.kiln_run:
        args.kiln_run = os.path.join(args.dir, "..", "bin", "kiln-run")
    if not os.path.exists(args.kiln_run):
        print(f"loops_check: FAILED: no kiln-run at {args.kiln_run}")
        return 1
    with open(manifest_path) as f:
        manifest = json.load(f)
    out_root = os.environ.get("OUT", "/tmp")
    os.makedirs(out_root, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kiln-loops-")
    rows, failures, graph_runs, in_graph = [], 0, 0, 0
    try:
        for model in manifest["models"]:
            for run_entry in model["runs"]:
                for graph in (True, False):
                    out = os.path.join(work, model["name"],
                                       safe(run_entry["label"]),
                                       "graph" if graph else "direct")
                    comparison, path, seconds = run_once(
                        args, model, run_entry, graph, out)
                    line = comparison.line()
                    if graph:
                        graph_runs += 1
                        in_graph += path == "conditional graph nodes"
                        head = comparison.name + ": "
                        line = (head + f"device loops: {path or '?'}; "
                                + line[len(head):])
                    print(line, flush=True)
                    failures += not comparison.ok
                    rows.append({"model": model["name"],
                                 "run": run_entry["label"], "graph": graph,
                                 "device_loops": path, "ok": comparison.ok,
                                 "line": line, "seconds": round(seconds, 3)})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = (f"{len(rows)} runs, {failures} failures; graph runs with "
               f"conditional graph nodes: {in_graph} of {graph_runs}")
    print(summary)
    with open(os.path.join(out_root, "loops_check.json"), "w") as f:
        json.dump({"device": args.device, "runs": rows, "summary": summary},
                  f, indent=1)
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--build", required=True)
    pp.add_argument("--out", required=True)
    pr = sub.add_parser("run")
    pr.add_argument("--dir", required=True)
    pr.add_argument("--device", default="cuda")
    pr.add_argument("--kiln-run", default="",
                    help="default: DIR/../bin/kiln-run (device-check/bin)")
    args = p.parse_args()
    if args.command == "prepare":
        return prepare(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
