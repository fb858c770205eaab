#!/usr/bin/env python3
"""kiln-train --trace on emu: the modelled timeline of one data-parallel step.

The digits-style CNN of cnn_model.py is compiled with --data-parallel and
small buckets (three), and kiln-train trains one step on emu with --trace,
modelling a ring of --trace-ranks 4 at a given link bandwidth and latency.
Everything the trace claims is recomputed here, independently of
StepTimeline.cpp, from the trace's own per-launch durations and the
buckets `kilnc --stats` lists (elements and afterLaunch):

- the train_step kernels lie end to end from 0 on the "compute" track;
- all-reduce i starts at max(end of its afterLaunch kernel, end of
  all-reduce i-1) and lasts 2(N-1)/N x bytes / bandwidth + latency x
  2(N-1) (bytes = 4 x elements), on the "collectives" track;
- train_update's kernels start after train_step's last kernel and the last
  all-reduce, end to end;
- every slice says it is modelled.

Times are compared within 1e-6 us + 1e-9 relative (JSON round-trips
doubles exactly; the slack only absorbs the summation order of the
starts). Overlap: the number of all-reduce slices that overlap a
train_step kernel must equal the number of buckets the schedule starts
before train_step's last kernel ends (kilnc writes each bucket as soon as its
gradients are computed, so buckets complete before the last launch:
docs/runtime.md "The step timeline"), and must not be zero.

A second run without --link-gbps/--link-latency-us must take the target's
collective_bandwidth_gbps / collective_latency_us from
runtime/targets/gpus.ini (read here as plain text).
"""
import argparse
import configparser
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_model  # noqa: E402

RANKS, GBPS, LATENCY_US = 4, 0.05, 2.0
BATCH = 4


def close(a, b):
    return abs(a - b) <= 1e-6 + 1e-9 * max(abs(a), abs(b))


def check(cond, what):
    if not cond:
        print(f"step-trace: FAILED: {what}")
        sys.exit(1)


def ring_us(nbytes, ranks, gbps, lat_us):
    n = ranks
    return 2 * (n - 1) / n * nbytes / (gbps * 1e9) * 1e6 + lat_us * 2 * (n - 1)


def run_trace(args, art, trace, extra):
    cmd = [args.kiln_train, art, "--data", os.path.join(args.work, "x.npy"),
           "--labels", os.path.join(args.work, "y.npy"), "--epochs", "1",
           "--device", "emu", "--quiet", "--trace", trace,
           "--trace-ranks", str(RANKS)] + extra
    subprocess.run(cmd, check=True)
    with open(trace) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--gpus-ini", required=True)
    args = p.parse_args()
    import onnx
    model = os.path.join(args.work, "cnn.onnx")
    onnx.save(cnn_model.build(c1=2, c2=None), model)
    rng = np.random.default_rng(0)
    np.save(os.path.join(args.work, "x.npy"),
            rng.standard_normal((BATCH, 1, 8, 8)).astype(np.float32))
    np.save(os.path.join(args.work, "y.npy"),
            rng.integers(0, 10, BATCH).astype(np.int64))
    art = os.path.join(args.work, "dp.kiln")
    stats = subprocess.run(
        [args.kilnc, model, f"--shape=x={BATCH}x1x8x8", "--train",
         "--loss=cross_entropy", f"--labels=y:{BATCH}:int64",
         "--optimizer=momentum", "--data-parallel", "--bucket-mb=0.00125",
         "--stats", "-o", art],
        check=True, capture_output=True, text=True).stdout
    step_kernels = int(re.search(r"train_step: (\d+) kernels", stats).group(1))
    update_kernels = int(re.search(r"train_update: (\d+) kernels",
                                   stats).group(1))
    buckets = [(int(lo), int(hi), int(after)) for lo, hi, after in re.findall(
        r"bucket \d+: all-reduce-mean of state grad(?:\.\d+)? elements "
        r"\[(\d+), (\d+)\)"
        r" \(\d+ bytes\) after launch (\d+)", stats)]
    check(len(buckets) == 3, f"three buckets in --stats, got {buckets}")

    trace = run_trace(args, art, os.path.join(args.work, "step.json"),
                      ["--link-gbps", str(GBPS),
                       "--link-latency-us", str(LATENCY_US)])
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    process = [e for e in events if e["name"] == "process_name"][0]
    check("modelled" in process["args"]["name"], "the process says modelled")
    slices = [e for e in events if e["ph"] == "X"]
    check(all(e["args"]["time_source"] == "modelled" for e in slices),
          "every slice is labelled modelled")
    compute = sorted((e for e in slices if names[e["tid"]] == "compute"),
                     key=lambda e: e["ts"])
    comms = sorted((e for e in slices if names[e["tid"]] == "collectives"),
                   key=lambda e: e["args"]["collective"])
    step = [e for e in compute if e["args"]["entry"] == "train_step"]
    update = [e for e in compute if e["args"]["entry"] == "train_update"]
    check(len(step) == step_kernels and len(update) == update_kernels,
          f"{len(step)}+{len(update)} kernels, --stats says "
          f"{step_kernels}+{update_kernels}")
    end_of = {}
    clock = 0.0
    for e in step:
        check(close(e["ts"], clock), f"launch {e['args']['launch']} starts "
              f"at {e['ts']}, the previous ends at {clock}")
        check(e["dur"] > 0, f"launch {e['args']['launch']} takes time")
        clock = e["ts"] + e["dur"]
        end_of[e["args"]["launch"]] = clock
    step_end = clock
    check(len(comms) == len(buckets), "one all-reduce slice per bucket")
    link_free = 0.0
    starts = []
    for i, (e, (lo, hi, after)) in enumerate(zip(comms, buckets)):
        start = max(end_of[after], link_free)
        dur = ring_us(4 * (hi - lo), RANKS, GBPS, LATENCY_US)
        check(close(e["ts"], start), f"bucket {i} starts at {e['ts']}, the "
              f"model says {start}")
        check(close(e["dur"], dur), f"bucket {i} lasts {e['dur']}, the "
              f"formula says {dur}")
        check(e["args"]["bytes"] == 4 * (hi - lo), f"bucket {i}'s bytes")
        link_free = start + dur
        starts.append(start)
    clock = max(step_end, link_free)
    for e in update:
        check(close(e["ts"], clock), f"train_update launch "
              f"{e['args']['launch']} starts at {e['ts']}, expected {clock}")
        clock = e["ts"] + e["dur"]
    last = max(end_of)
    overlapping = sum(
        1 for c in comms
        if any(c["ts"] < k["ts"] + k["dur"] and k["ts"] < c["ts"] + c["dur"]
               and c["dur"] > 0 for k in step))
    # An all-reduce overlaps the backward pass when the schedule above
    # starts it before train_step's last kernel ends.
    expected = sum(1 for start in starts if start < step_end)
    check(expected > 0, "a bucket completes before train_step's last launch")
    check(overlapping == expected,
          f"{overlapping} all-reduce slices overlap train_step kernels, the "
          f"buckets' afterLaunch says {expected}")
    print(f"step-trace: {len(step)} train_step kernels, {len(comms)} "
          f"all-reduces, {len(update)} train_update kernels: schedule and "
          f"ring formula ok")
    print(f"step-trace: overlap: {overlapping} of {len(comms)} all-reduces "
          f"overlap train_step kernels (expected {expected}: the buckets "
          f"follow launches {sorted(set(a for _, _, a in buckets))}, "
          f"train_step's last is {last})")
    print(f"step-trace: modelled step {clock:.3f} us, train_step "
          f"{step_end:.3f} us, all-reduces end at {link_free:.3f} us")

    # The link from gpus.ini when no flag gives it.
    ini = configparser.ConfigParser(inline_comment_prefixes=("#",))
    ini.read(args.gpus_ini)
    default = run_trace(args, art, os.path.join(args.work, "default.json"), [])
    other = default["otherData"]
    section = [s for s in ini.sections() if s == other["subject"]]
    check(section, f"target {other['subject']} in gpus.ini")
    want_gbps = float(ini[section[0]]["collective_bandwidth_gbps"])
    want_lat = float(ini[section[0]]["collective_latency_us"])
    check(other["link_gbps"] == want_gbps and
          other["link_latency_us"] == want_lat,
          f"the default link is {other['link_gbps']} GB/s, "
          f"{other['link_latency_us']} us; gpus.ini says {want_gbps}, "
          f"{want_lat}")
    first = [e for e in default["traceEvents"]
             if e["ph"] == "X" and e["cat"] == "collective"][0]
    check(close(first["dur"], ring_us(first["args"]["bytes"], RANKS,
                                      want_gbps, want_lat)),
          "the default link's all-reduce time")
    print(f"step-trace: default link of {other['subject']}: {want_gbps:g} "
          f"GB/s, {want_lat:g} us ok")

    # The measured timeline's plumbing (events; on emu the emulator's host
    # time): every kernel once, in launch order, one after another, the
    # host work between the entry points, labelled measured.
    measured = run_trace(args, art, os.path.join(args.work, "measured.json"),
                         ["--trace-times", "measured"])
    check("measured" in measured["traceEvents"][0]["args"]["name"],
          "the measured process name")
    xs = [e for e in measured["traceEvents"] if e["ph"] == "X"]
    check(all(e["args"]["time_source"] == "measured" for e in xs),
          "every measured slice is labelled measured")
    launches = [e["args"]["launch"] for e in xs if "launch" in e["args"]]
    check(launches == list(range(step_kernels + update_kernels)),
          f"measured launches {launches}")
    ordered = sorted(xs, key=lambda e: e["ts"])
    for a, b in zip(ordered, ordered[1:]):
        check(a["dur"] >= 0 and close(a["ts"] + a["dur"], b["ts"]),
              f"{a['name']} ends at {a['ts'] + a['dur']}, {b['name']} "
              f"starts at {b['ts']}")
    host = [e for e in xs if e["args"]["entry"] == "host"]
    check(len(host) == 1 and host[0]["name"] == "host: state update",
          f"one host slice between the entry points: {host}")
    print(f"step-trace: measured (emu host time): {len(launches)} launches "
          f"and the host slice in order ok")


if __name__ == "__main__":
    main()
