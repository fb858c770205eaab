#!/usr/bin/env python3
"""The error of kiln-run --profile-sample N against full emulation.

usage: sample-error.py ARTIFACT.kiln [--samples 1,2,4,8] [--full FULL.json]
                       [--kiln-run PATH] [--work DIR] [--kernels]

Profiles ARTIFACT on the emu device once with every block (or reads that
profile from --full, a --profile-json file of a full run) and once per N in
--samples, then prints per N: the wall and CPU time of the run and the
relative error of the sampled (scaled) counts against the full ones:

  total        the model's total thread-instructions, global sectors, DRAM
               bytes and estimated time;
  kernel max   the largest per-kernel relative error of each of those, and
               of the coalescing efficiency (an absolute difference, as it
               is a ratio already);
  kernel wmean the per-kernel error weighted by the kernel's full estimated
               time (what an error costs in the model's total).

--kernels also prints each kernel whose estimate is off by more than 10%.
--cap-from STATS.txt (the output of `kilnc MODEL --stats`, which lists each
kernel's bytes: every buffer it touches, once) also prints the DRAM error
when each kernel's sampled DRAM bytes are capped at that footprint (times
its launches): what a fix of the scaling would give (docs/emulator.md).
docs/emulator.md, "Sampling error", has the measurements.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COUNTS = [("thread_instructions", "instr"), ("global_sectors", "sectors"),
          ("dram_bytes", "dram"), ("estimated_us", "est-us")]


def profile(kiln_run, artifact, out, sample):
    cmd = [kiln_run, artifact, "--device", "emu", "--random-inputs", "--profile-json", out]
    if sample:
        cmd += ["--profile-sample", str(sample)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"sample-error: {' '.join(cmd)} failed: {result.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(out) as f:
        return json.load(f), wall, cpu


def rel(a, b):
    if b == 0:
        return 0.0 if a == 0 else float("inf")
    return abs(a - b) / abs(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact")
    ap.add_argument("--samples", default="1,2,4,8")
    ap.add_argument("--full", help="a --profile-json file of a full run of ARTIFACT")
    ap.add_argument("--kiln-run", default=os.path.join(
        os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "kiln-run"))
    ap.add_argument("--work")
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--cap-from", help="kilnc --stats output: cap DRAM bytes at each kernel's footprint")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="sample-error.")
    os.makedirs(work, exist_ok=True)
    stem = os.path.join(work, os.path.basename(args.artifact))

    if args.full:
        with open(args.full) as f:
            full = json.load(f)
        print(f"full: from {args.full}")
    else:
        full, wall, cpu = profile(args.kiln_run, args.artifact, stem + ".full.json", 0)
        print(f"full: wall {wall:.1f} s, cpu {cpu:.1f} s, estimate "
              f"{full['total']['estimated_us']:.1f} us, {len(full['kernels'])} kernels")
    fk = {k["kernel"]: k for k in full["kernels"]}
    weight = sum(k["estimated_us"] for k in full["kernels"])

    caps = {}
    if args.cap_from:
        with open(args.cap_from) as f:
            for line in f:
                words = line.split()
                if len(words) >= 3 and words[1] == "bytes" and words[2].isdigit():
                    caps[words[0]] = int(words[2])
    header = (f"{'N':>4} {'wall-s':>7} {'cpu-s':>7} | total: " +
              " ".join(f"{short:>7}" for _, short in COUNTS) + " | kernel max: " +
              " ".join(f"{short:>7}" for _, short in COUNTS) + f" {'coal':>6} | wmean est-us" +
              (" | capped dram: total, kernel max" if caps else ""))
    print(header)
    for n in [int(s) for s in args.samples.split(",") if s]:
        sampled, wall, cpu = profile(args.kiln_run, args.artifact, stem + f".s{n}.json", n)
        totals = [rel(sampled["total"][key], full["total"][key]) for key, _ in COUNTS]
        worst = [0.0] * len(COUNTS)
        worst_coal = 0.0
        weighted = 0.0
        off = []
        for k in sampled["kernels"]:
            f = fk[k["kernel"]]
            for i, (key, _) in enumerate(COUNTS):
                worst[i] = max(worst[i], rel(k[key], f[key]))
            if k["coalescing_efficiency"] is not None and f["coalescing_efficiency"] is not None:
                worst_coal = max(worst_coal, abs(k["coalescing_efficiency"] - f["coalescing_efficiency"]))
            e = rel(k["estimated_us"], f["estimated_us"])
            weighted += e * f["estimated_us"] / weight
            if e > 0.10:
                off.append((e, k["kernel"], k["estimated_us"], f["estimated_us"],
                            f["blocks_total"] // max(1, f["launches"])))
        capped_total, capped_worst = 0.0, 0.0
        for k in sampled["kernels"]:
            f = fk[k["kernel"]]
            cap = caps.get(k["kernel"])
            est = k["dram_bytes"] if cap is None else min(k["dram_bytes"], cap * f["launches"])
            capped_total += est
            capped_worst = max(capped_worst, rel(est, f["dram_bytes"]))
        capped_total = rel(capped_total, full["total"]["dram_bytes"])
        pct = lambda x: f"{100 * x:6.1f}%"
        print(f"{n:>4} {wall:7.1f} {cpu:7.1f} | total: " + " ".join(pct(x) for x in totals) +
              " | kernel max: " + " ".join(pct(x) for x in worst) + f" {worst_coal:6.3f} | " +
              pct(weighted) +
              (f" | {pct(capped_total)} {pct(capped_worst)}" if caps else ""))
        if args.kernels:
            for e, name, s_us, f_us, grid in sorted(off, reverse=True):
                print(f"       {name}: est {s_us:.2f} us vs {f_us:.2f} us ({100 * e:.0f}%), "
                      f"{min(n, grid)} of {grid} blocks per launch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
