#!/usr/bin/env python3
"""Replays kilnc's phases with kiln-opt, for print-pipeline.test.

  replay_pipeline.py KILNC KILN_OPT MODEL.onnx OUTDIR [kilnc flags...]

kilnc --print-pipeline prints each phase as a textual pipeline. Starting
from kilnc --emit=kiln, each of the graph, linalg and gpu phases is run by
kiln-opt --pass-pipeline on the previous phase's kilnc output, and the
result must equal kilnc --emit=PHASE byte for byte (both print the weights
in full; kiln-opt ends its output with one more newline, which is ignored). Prints "replayed PHASE" per phase, or exits 1 naming the first
phase that differs and the first differing line.
"""
import os
import subprocess
import sys


def run(args):
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"replay: {' '.join(args)} failed ({result.returncode}):\n"
                 f"{result.stderr}")
    return result.stdout


def main():
    kilnc, kiln_opt, model, outdir = sys.argv[1:5]
    flags = sys.argv[5:]
    os.makedirs(outdir, exist_ok=True)
    pipelines = {}
    for line in run([kilnc, "--print-pipeline"] + flags).splitlines():
        phase, _, pipeline = line.partition(": ")
        pipelines[phase] = pipeline
    previous = os.path.join(outdir, "kiln.mlir")
    run([kilnc, model, "--emit=kiln", "--print-weights", "-o", previous]
        + flags)
    for phase in ("graph", "linalg", "gpu"):
        expected = run([kilnc, model, f"--emit={phase}", "--print-weights",
                        "-o", "-"] + flags)
        replayed = run([kiln_opt, previous,
                        f"--pass-pipeline={pipelines[phase]}"])
        replayed, expected = replayed.rstrip("\n"), expected.rstrip("\n")
        if replayed != expected:
            for i, (a, b) in enumerate(zip(replayed.splitlines(),
                                           expected.splitlines())):
                if a != b:
                    sys.exit(f"replay: {phase} differs at line {i + 1}:\n"
                             f"  kiln-opt: {a}\n  kilnc:    {b}")
            sys.exit(f"replay: {phase} differs in length")
        previous = os.path.join(outdir, f"{phase}.mlir")
        with open(previous, "w") as f:
            f.write(expected + "\n")
        print(f"replayed {phase}")


if __name__ == "__main__":
    main()
