#!/usr/bin/env python3
"""How long does kilnc take on the models issue 23 names, cold and warm?

Usage:
  scripts/bench-compile.py [--kilnc build/bin/kilnc] [--repeat 3]
                           [--cases resnet50-bf16,...] [--work DIR]

Each case is compiled --repeat times with a kernel cache of its own: the
first run with an empty cache ("cold": every template kernel through NVRTC
and every kernel through ptxas), the next ones with the cache the first run
filled ("warm"). The median wall time of the cold runs (each with a fresh
cache) and of the warm runs is printed per case, with the user+system CPU
time and kilnc --time-passes's phases of the last cold run (the share of
NVRTC and ptxas), and the machine's load average, which inflates every
number on a shared machine. The cases:

  resnet50-bf16        light_resnet50 --precision=bf16 (NHWC, wgmma: kilnc's
                       defaults for bf16)
  resnet50-fp32-nhwc   light_resnet50 --layout=nhwc (FFMA template convs)
  resnet50-fp32        light_resnet50 (NCHW, no templates: the floor)
  encoder              test/Frontend/ONNX/models/make_encoder.py's layer, fp32
  encoder-bf16         the same in bf16
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def light(name):
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test",
                        "data", "light", name)


def cases(work):
    encoder = os.path.join(work, "encoder.onnx")
    if not os.path.exists(encoder):
        subprocess.run([sys.executable, os.path.join(
            ROOT, "test", "Frontend", "ONNX", "models", "make_encoder.py"),
            encoder], check=True)
    resnet = light("light_resnet50.onnx")
    return {
        "resnet50-bf16": (resnet, ["--precision=bf16"]),
        "resnet50-fp32-nhwc": (resnet, ["--layout=nhwc"]),
        "resnet50-fp32": (resnet, []),
        "encoder": (encoder, []),
        "encoder-bf16": (encoder, ["--precision=bf16"]),
    }


def run(kilnc, model, flags, cache, out, timing=False):
    """Wall and CPU seconds of one compile (and its --time-passes report)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run([kilnc, model, "-o", out, "--kernel-cache", cache]
                          + flags + (["--time-passes"] if timing else []),
                          capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"kilnc failed: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stderr


def phases(report):
    """(name, wall seconds) of --time-passes's top-level and artifact rows
    ("  0.0192 (  1.4%)    0.0192 (  1.5%)  import": user time, then wall
    time, then the name)."""
    rows = []
    for line in report.splitlines():
        m = re.match(r"^\s*((?:[\d.]+\s+\(\s*[\d.]+%\)\s+)+)(\S.*)$", line)
        if not m:
            continue
        name = m.group(2).strip()
        wall = float(re.findall(r"([\d.]+)\s+\(", m.group(1))[-1])
        if name in ("import", "kiln", "graph", "linalg", "gpu", "llvm",
                    "ptx", "artifact", "template kernels (NVRTC)",
                    "ptxas", "Total"):
            rows.append((name, wall))
    return rows


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default="resnet50-bf16,resnet50-fp32-nhwc,"
                        "resnet50-fp32,encoder,encoder-bf16")
    parser.add_argument("--work")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kiln-bench-compile-")
    table = cases(work)
    print(f"load average before: {os.getloadavg()[0]:.1f} "
          f"({os.cpu_count()} CPUs)")
    print(f"{'case':20} {'cold wall s':>11} {'warm wall s':>11} "
          f"{'cold cpu s':>10} {'warm cpu s':>10}")
    for name in args.cases.split(","):
        model, flags = table[name]
        out = os.path.join(work, name + ".kiln")
        cold, warm = [], []
        report = ""
        for i in range(args.repeat):
            cache = os.path.join(work, f"cache-{name}-{i}")
            shutil.rmtree(cache, ignore_errors=True)
            wall, cpu, report = run(args.kilnc, model, flags, cache, out,
                                    timing=True)
            cold.append((wall, cpu))
            wall, cpu, _ = run(args.kilnc, model, flags, cache, out)
            warm.append((wall, cpu))
        med = lambda xs, k: statistics.median(x[k] for x in xs)
        print(f"{name:20} {med(cold, 0):11.2f} {med(warm, 0):11.2f} "
              f"{med(cold, 1):10.2f} {med(warm, 1):10.2f}")
        print("    cold phases: " + ", ".join(
            f"{n} {s:.2f}" for n, s in phases(report)))
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
