#!/usr/bin/env python3
"""Memory-bound kernels before/after vectorisation, on the emulator's model.

usage: membound-estimate.py [MODEL ...] [--work DIR] [--sample N]
                            [--kilnc PATH] [--kiln-run PATH]
                            [--compare vectorize|row-kernels|
                                       tiled-transpose|reduction-kernels]

For each MODEL, compiles it twice (kilnc --vectorize=false: a thread per
element; and the default, kiln-map-to-gpu's vectorised kernels), profiles
both on the emulator (kiln-run --device emu --random-inputs
--profile-sample N --profile-json) and sums over the generated kernels (the
tensor-core template kernels kiln_gemm_* / kiln_conv_* are left out: they
are issue 11's) the estimated time, the DRAM bytes, the coalescing
efficiency and the achieved fraction of the target's DRAM bandwidth
(DRAM bytes / estimated time / dram_bandwidth_gbps of
runtime/targets/gpus.ini), and the warp-instructions and global warp
accesses the emulator counted (with --profile-sample, scaled from the
sampled blocks). Prints one line per model and variant.

MODEL is what scripts/perf-check.py accepts (a light model such as
resnet50, `encoder`, a path, NAME@FLAGS), or one of the 64 MB models built
here: ew64 (Relu(x * y + z) over 4096 x 4096 f32: 192 MB read, 64 MB
written), layernorm64, softmax64 (over rows of 4096), transpose64 (4096 x
4096). Without MODEL: encoder, encoder@--precision=bf16, resnet50 and the
four 64 MB models (docs/benchmarks.md "Memory-bound kernels" has the
numbers). --compare row-kernels compiles with --row-kernels=false (the
block-per-row kernels) and the default (warp / block row kernels, the row
in registers) instead; --compare tiled-transpose and reduction-kernels
likewise with --tiled-transpose=false / --reduction-kernels=false (issue
12's shared-memory transposes, column and whole-tensor reductions; models
nchw2nhwc64, colsum64, bnstats64, sum64 as in membound_bench.py). The
`bank-repl` column is the shared-memory bank-conflict replays per shared
access over the generated kernels.
"""
import argparse
import importlib.util
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "perf_check", os.path.join(ROOT, "scripts", "perf-check.py"))
perf_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(perf_check)

BIG = {
    "ew64": "Relu(x * y + z)",
    "layernorm64": "LayerNormalization(x), axis -1",
    "softmax64": "Softmax(x), axis -1",
    "transpose64": "Transpose(x)",
    "nchw2nhwc64": "Transpose(x), perm (0, 2, 3, 1), 64^4",
    "colsum64": "ReduceSum(x), axis 0",
    "bnstats64": "ReduceMean(x), axes (0, 1, 2) of NHWC 64^4",
    "sum64": "ReduceSum(x), all of 16M",
}
DEFAULT = ["encoder", "encoder@--precision=bf16", "resnet50"] + list(BIG)


def big_model(name, work):
    """Writes the 64 MB model NAME (4096 x 4096 f32 tensors): the same
    models the GPU benchmark times (scripts/device/membound_bench.py)."""
    spec = importlib.util.spec_from_file_location(
        "membound_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "device", "membound_bench.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    path = os.path.join(work, name + ".onnx")
    bench.build_model(name, 4096, path)
    return path


def generated(kernel):
    return not kernel["kernel"].startswith(("kiln_gemm", "kiln_conv"))


def summarise(profile, target):
    kernels = [k for k in profile["kernels"] if generated(k)]
    us = sum(k["estimated_us"] for k in kernels)
    dram = sum(k["dram_bytes"] for k in kernels)
    requested = sum(k["global_bytes_requested"] for k in kernels)
    sectors = sum(k["global_sectors"] for k in kernels)
    bandwidth = float(target["dram_bandwidth_gbps"]) * 1e9
    fraction = dram / (us * 1e-6) / bandwidth if us else 0.0
    coalescing = requested / (32 * sectors) if sectors else 0.0
    warp_instructions = sum(k["warp_instructions"] for k in kernels)
    accesses = sum(k["global_accesses"] for k in kernels)
    shared = sum(k["shared_accesses"] for k in kernels)
    replays = sum(k["shared_bank_conflict_replays"] for k in kernels)
    return (len(kernels), us, dram, coalescing, fraction, warp_instructions, accesses,
            replays / shared if shared else 0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--work")
    parser.add_argument("--sample", type=int, default=4)
    parser.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    parser.add_argument("--kiln-run", default=os.path.join(ROOT, "build", "bin", "kiln-run"))
    parser.add_argument("--compare", choices=["vectorize", "row-kernels", "tiled-transpose",
                                              "reduction-kernels"],
                        default="vectorize")
    args = parser.parse_args()
    variants = {
        "vectorize": (("scalar", ["--vectorize=false"]), ("vector", [])),
        "row-kernels": (("rows-off", ["--row-kernels=false"]), ("rows-on", [])),
        "tiled-transpose": (("tiles-off", ["--tiled-transpose=false"]), ("tiles-on", [])),
        "reduction-kernels": (("red-off", ["--reduction-kernels=false"]), ("red-on", [])),
    }[args.compare]
    args.reuse = False
    work = args.work or tempfile.mkdtemp(prefix="membound-")
    os.makedirs(work, exist_ok=True)
    targets = perf_check.load_targets()
    print(f"{'model':<28} {'variant':<10} {'kernels':>7} {'est-us':>10} "
          f"{'dram-MB':>9} {'coalesced':>9} {'of-DRAM-bw':>10} {'warp-instr':>10} "
          f"{'gl-accesses':>11} {'bank-repl':>9}")
    for model in args.models or DEFAULT:
        for variant, flags in variants:
            name, _, extra = model.partition("@")
            if name in BIG:
                name = big_model(name, work)
            spec = name + "@" + ",".join(([extra] if extra else []) + flags)
            label, kiln, _ = perf_check.prepare(spec, work, args)
            profile, _ = perf_check.profile(label, kiln, work, args)
            target = targets[profile["target"]]
            count, us, dram, coalescing, fraction, instr, accesses, replays = \
                summarise(profile, target)
            print(f"{model:<28} {variant:<10} {count:>7} {us:>10.1f} "
                  f"{dram / 1e6:>9.1f} {coalescing:>9.2f} {fraction:>10.2f} "
                  f"{instr:>10} {accesses:>11} {replays:>9.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
