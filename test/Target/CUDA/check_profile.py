#!/usr/bin/env python3
"""Checks kiln-run's --profile-json and --trace files for kiln-run-profile.test.

  check_profile.py PROFILE.json TRACE.json [--launches N] [--registers]

The trace must be Chrome trace-event JSON with one complete ("X") slice per
launch, laid end to end on the emu (each slice starts where the previous
one ended), on named stream tracks; the profile's kernels must add up to its
total. --registers also requires ptxas's register counts in every kernel.
Prints "ok" and a one-line summary, or exits 1 naming the problem.
"""
import argparse
import json
import sys


def fail(message):
    print(f"check_profile: {message}")
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("profile")
    parser.add_argument("trace")
    parser.add_argument("--launches", type=int)
    parser.add_argument("--registers", action="store_true")
    args = parser.parse_args()

    with open(args.profile) as f:
        profile = json.load(f)
    with open(args.trace) as f:
        trace = json.load(f)

    if profile.get("format") != "kiln-profile" or profile.get("version") != 1:
        fail("not a version-1 kiln profile")
    kernels = profile["kernels"]
    total = profile["total"]
    if sum(k["launches"] for k in kernels) != total["launches"]:
        fail("kernel launches do not add up to the total")
    for key in ("thread_instructions", "warp_instructions", "dram_bytes"):
        if sum(k[key] for k in kernels) != total[key]:
            fail(f"kernel {key} do not add up to the total")
    estimated = sum(k["estimated_us"] for k in kernels)
    if abs(estimated - total["estimated_us"]) > 1e-6 * max(1.0, estimated):
        fail("kernel estimates do not add up to the total")
    for k in kernels:
        if k["thread_instructions"] <= 0:
            fail(f"kernel {k['kernel']} has no instructions")
        if not 0 < k["occupancy"] <= 1 or not 0 < k["achieved_occupancy"] <= 1:
            fail(f"kernel {k['kernel']}: occupancy out of (0, 1]")
        if args.registers and not (k.get("registers") or 0) > 0:
            fail(f"kernel {k['kernel']} has no register count")

    events = trace["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    if args.launches is not None and len(slices) != args.launches:
        fail(f"{len(slices)} slices, expected {args.launches}")
    if len(slices) != total["launches"]:
        fail("one slice per launch expected")
    end = 0.0
    for i, s in enumerate(slices):
        for key in ("name", "ts", "dur", "pid", "tid", "args"):
            if key not in s:
                fail(f"slice {i} has no '{key}'")
        if s["tid"] not in names:
            fail(f"slice {i} is on an unnamed track {s['tid']}")
        if s["args"]["launch"] != i:
            fail(f"slice {i} names launch {s['args']['launch']}")
        if "grid" not in s["args"] or "block" not in s["args"]:
            fail(f"slice {i} has no launch geometry")
        if abs(s["ts"] - end) > 1e-6 * max(1.0, end):
            fail(f"slice {i} starts at {s['ts']}, not at {end}")
        end = s["ts"] + s["dur"]
    print(f"ok: {len(kernels)} kernels, {len(slices)} slices on "
          f"{len(names)} track(s), {end:.2f} us estimated")


if __name__ == "__main__":
    main()
