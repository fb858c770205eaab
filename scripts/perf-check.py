#!/usr/bin/env python3
"""Performance checks on the emulator's counters (issue 13, "Use it in CI").

usage: perf-check.py [MODEL ...] [--all] [--sample N] [--work DIR]
                     [--coalescing-threshold X] [--bank-threshold Y]
                     [--kilnc PATH] [--kiln-run PATH] [--distribution]

Each MODEL is compiled with kilnc, run with `kiln-run --device emu
--random-inputs --profile-sample N --profile-json`, and its kernels are
checked by name:

  coalescing   every memory-bound kernel (below) whose global coalescing
               efficiency (bytes requested / (32 x sectors touched)) is
               below --coalescing-threshold fails;
  bank         every tensor-core template kernel (kiln_gemm_*, kiln_attn_*) whose
               shared-memory bank-conflict replays per shared access exceed
               --bank-threshold fails.

A kernel is memory-bound when its memory term (the larger of its DRAM bytes
and its sector traffic through L2 over L2_OVER_DRAM, over the DRAM
bandwidth, with the model's occupancy scaling) is at least its compute term
(FLOPs / peak) and its issue term (warp-instructions / issue rate): the
model's `bound` with the per-launch overhead left out (at batch 1 the
overhead is the largest term of almost every kernel, and it says nothing
about how the kernel uses memory). The terms are recomputed here from the
profile's counts and runtime/targets/gpus.ini, as runtime/lib/PerformanceModel.cpp
computes them; a kernel whose profile `bound` is `memory` always counts.

MODEL is a light model of the onnx package (squeezenet, shufflenet,
resnet50, inception_v1, inception_v2, densenet121, bvlc_alexnet, zfnet512,
vgg19; compiled with seeded random weights, scripts/device/randomize_weights.py),
`encoder` (test/Frontend/ONNX/models/make_encoder.py, small config: hidden
128, 2 heads, ffn 512, seq 64), or a path to an .onnx, .onnxtxt or .kiln
file. NAME@FLAGS passes kilnc flags, comma-separated: `encoder@--precision=bf16`
compiles the encoder's matmuls to bf16 mma.sync template kernels.
Without MODEL: the CI set (CI_MODELS below); --all: every light model and
both encoder configs. docs/benchmarks.md, "Performance check", has the
thresholds, why, and the measurements.

Prints one line per kernel that fails ("FAIL model kernel: ..."), a summary
per model, with --distribution every memory-bound kernel's efficiency
(sorted) and every template kernel's replays, and ends with "perf-check:
ok" (exit 0) or "perf-check: N failure(s)" (exit 1).
"""
import argparse
import configparser
import os
import shutil
import subprocess
import sys
import tempfile
import time
import json

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIGHT = ["squeezenet", "shufflenet", "resnet50", "inception_v1", "inception_v2",
         "densenet121", "bvlc_alexnet", "zfnet512", "vgg19"]
ENCODER_SMALL = ["--hidden", "128", "--heads", "2", "--ffn", "512", "--seq", "64"]
# What the lit test (test/Target/CUDA/perf-check.test) runs: chosen by time,
# docs/benchmarks.md "Performance check" has the measurements.
CI_MODELS = ["squeezenet", "shufflenet", "resnet50", "encoder", "encoder@--precision=bf16"]
ALL_MODELS = LIGHT + ["encoder", "encoder@--precision=bf16"]

# Thresholds: what the code reaches today (docs/benchmarks.md). Raise the
# coalescing one as the bandwidth-kernel work lands.
COALESCING_THRESHOLD = 0.12
BANK_THRESHOLD = 0.35
# The tensor-core template kernels the bank-conflict check covers: the GEMMs
# and the fused attention kernel.
TEMPLATES = ("kiln_gemm_", "kiln_attn_")


def light_dir():
    import onnx
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{os.path.basename(cmd[0])} failed: {' | '.join(tail)}")
    return result


def safe(name):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def prepare(spec, work, args):
    """Returns (label, path of the .kiln artifact, seconds to prepare)."""
    name, _, flags = spec.partition("@")
    kilnc_flags = [f for f in flags.split(",") if f]
    label = os.path.basename(name) + (f"@{flags}" if flags else "")
    stem = os.path.join(work, safe(label))
    start = time.monotonic()
    if name.endswith(".kiln"):
        return label, name, 0.0
    if name.endswith(".onnx"):
        onnx_path = name
    elif name.endswith(".onnxtxt"):
        onnx_path = stem + ".onnx"
        run([sys.executable, os.path.join(ROOT, "test", "Frontend", "ONNX", "onnx_from_text.py"),
             name, "-o", onnx_path])
    elif name == "encoder":
        onnx_path = os.path.join(work, "encoder.onnx")
        if not os.path.exists(onnx_path):
            run([sys.executable, os.path.join(ROOT, "test", "Frontend", "ONNX", "models",
                                              "make_encoder.py"), onnx_path] + ENCODER_SMALL)
    elif name in LIGHT:
        onnx_path = os.path.join(work, name + ".onnx")
        if not os.path.exists(onnx_path):
            run([sys.executable, os.path.join(ROOT, "scripts", "device", "randomize_weights.py"),
                 os.path.join(light_dir(), f"light_{name}.onnx"), onnx_path])
    else:
        raise RuntimeError(f"unknown model '{name}' (a light model, encoder, or an "
                           ".onnx/.onnxtxt/.kiln path)")
    kiln = stem + ".kiln"
    if not (args.reuse and os.path.exists(kiln)):
        run([args.kilnc, onnx_path, "-o", kiln] + kilnc_flags)
    return label, kiln, time.monotonic() - start


# L2 bandwidth over DRAM bandwidth on an H100/H200-class part (about 2.5x;
# to calibrate with the next GPU run, like the figures in gpus.ini).
L2_OVER_DRAM = 2.5


def load_targets():
    parser = configparser.ConfigParser(inline_comment_prefixes=None)
    parser.read(os.path.join(ROOT, "runtime", "targets", "gpus.ini"))
    return parser


def terms(kernel, target):
    """The performance model's memory, compute and issue terms (seconds),
    as runtime/lib/PerformanceModel.cpp's estimateLaunch computes them."""
    f = lambda key: float(target[key])
    achieved = max(kernel.get("achieved_occupancy") or 0.0, 1e-9)
    bw_scale = min(1.0, achieved / f("occupancy_for_peak_bandwidth"))
    compute_scale = min(1.0, achieved / f("occupancy_for_peak_compute"))
    issue_scale = min(1.0, achieved * f("max_warps_per_sm") / f("schedulers_per_sm"))
    # The traffic the kernel asks of the memory system: DRAM bytes (each
    # sector once per launch), or its sectors through L2, served at about
    # L2_OVER_DRAM x the DRAM bandwidth, when that is more: an uncoalesced
    # kernel whose data fits L2 still pays for every sector it touches.
    # (Sampled profiles cap DRAM bytes at the launch's footprint.)
    traffic = max(kernel["dram_bytes"], 32 * kernel["global_sectors"] / L2_OVER_DRAM)
    memory = traffic / (f("dram_bandwidth_gbps") * 1e9 * bw_scale)
    peak = {"tf32": "tf32_tflops", "f16": "fp16_tflops", "fp16": "fp16_tflops",
            "int8": "int8_tops"}.get(
        kernel.get("mma_type") or "", "bf16_tflops")
    mma = kernel["mma_flops"] / (f(peak) * 1e12) if kernel["mma_flops"] else 0.0
    fma = kernel["fma_flops"] / (f("fp32_tflops") * 1e12)
    compute = (mma + fma) / compute_scale
    issue = (kernel["warp_instructions"] /
             (f("sm_count") * f("schedulers_per_sm") * f("clock_ghz") * 1e9) / issue_scale)
    return memory, compute, issue


def profile(label, kiln, work, args):
    out = os.path.join(work, safe(label) + ".profile.json")
    cmd = [args.kiln_run, kiln, "--device", "emu", "--random-inputs", "--profile-json", out]
    if args.sample:
        cmd += ["--profile-sample", str(args.sample)]
    start = time.monotonic()
    run(cmd)
    with open(out) as f:
        return json.load(f), time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*")
    ap.add_argument("--all", action="store_true", help="every light model and both encoder configs")
    ap.add_argument("--sample", type=int, default=4,
                    help="kiln-run --profile-sample N (0: full emulation); default 4")
    ap.add_argument("--coalescing-threshold", type=float, default=COALESCING_THRESHOLD)
    ap.add_argument("--bank-threshold", type=float, default=BANK_THRESHOLD,
                    help="bank-conflict replays per shared access, kiln_gemm_*/kiln_attn_* kernels")
    ap.add_argument("--work", help="directory for models, artifacts and profiles (kept)")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse artifacts already in --work instead of recompiling")
    ap.add_argument("--distribution", action="store_true",
                    help="print every memory-bound kernel's efficiency and every template kernel's replays")
    ap.add_argument("--build", default=os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build")))
    ap.add_argument("--kilnc")
    ap.add_argument("--kiln-run")
    args = ap.parse_args()
    args.kilnc = args.kilnc or os.path.join(args.build, "bin", "kilnc")
    args.kiln_run = args.kiln_run or os.path.join(args.build, "bin", "kiln-run")
    models = args.models or (ALL_MODELS if args.all else CI_MODELS)

    work = args.work or tempfile.mkdtemp(prefix="perf-check.")
    os.makedirs(work, exist_ok=True)
    targets = load_targets()
    failures = []
    coalescing = []  # (efficiency, label, kernel, bound)
    banks = []       # (replays per access, label, kernel)
    try:
        for spec in models:
            try:
                label, kiln, prep_s = prepare(spec, work, args)
                prof, run_s = profile(label, kiln, work, args)
            except RuntimeError as e:
                failures.append(f"{spec}: {e}")
                print(f"FAIL {spec}: {e}")
                continue
            target = targets[prof["target"]]
            checked = 0
            model_fail = 0
            for k in prof["kernels"]:
                name = k["kernel"]
                memory, compute, issue = terms(k, target)
                eff = k.get("coalescing_efficiency")
                memory_bound = k.get("bound") == "memory" or memory >= max(compute, issue)
                if memory_bound and eff is not None and k["global_accesses"]:
                    checked += 1
                    coalescing.append((eff, label, name, k.get("bound")))
                    if eff < args.coalescing_threshold:
                        model_fail += 1
                        failures.append(f"{label} {name}")
                        print(f"FAIL {label} {name}: coalescing efficiency {eff:.3f} < "
                              f"{args.coalescing_threshold:.3f} (memory-bound: memory "
                              f"{memory * 1e6:.2f} us, compute {compute * 1e6:.2f} us, issue "
                              f"{issue * 1e6:.2f} us; {k['global_bytes_requested']} bytes in "
                              f"{k['global_sectors']} sectors)")
                if name.startswith(TEMPLATES):
                    # A kernel without ld/st.shared (the wgmma attention
                    # kernel: cp.async writes and wgmma descriptor reads,
                    # which the counters do not split into banks) has none.
                    accesses = k["shared_accesses"]
                    per_access = (k["shared_bank_conflict_replays"] / accesses
                                  if accesses else 0.0)
                    banks.append((per_access, label, name + ("" if accesses else
                                                             " (no ld/st.shared)")))
                    if per_access > args.bank_threshold:
                        model_fail += 1
                        failures.append(f"{label} {name}")
                        print(f"FAIL {label} {name}: {per_access:.3f} bank-conflict replays per "
                              f"shared access > {args.bank_threshold:.3f} "
                              f"({k['shared_bank_conflict_replays']} replays, "
                              f"{k['shared_accesses']} accesses)")
            templates = sum(1 for k in prof["kernels"] if k["kernel"].startswith(TEMPLATES))
            print(f"{label}: {len(prof['kernels'])} kernels, {checked} memory-bound checked, "
                  f"{templates} template; {model_fail} failing; prepare {prep_s:.1f} s, "
                  f"profile {run_s:.1f} s (sample {args.sample or 'full'})")
        if args.distribution:
            print("memory-bound kernels by coalescing efficiency:")
            for eff, label, name, bound in sorted(coalescing):
                print(f"  {eff:7.3f}  {label} {name} ({bound})")
            print("template kernels by bank-conflict replays per shared access:")
            for per, label, name in sorted(banks, reverse=True):
                print(f"  {per:7.3f}  {label} {name}")
        if coalescing:
            eff, label, name, _ = min(coalescing)
            print(f"lowest coalescing efficiency of a memory-bound kernel: {eff:.3f} "
                  f"({label} {name}); threshold {args.coalescing_threshold:.3f}")
        if banks:
            per, label, name = max(banks)
            print(f"most bank-conflict replays per shared access of a template kernel: "
                  f"{per:.3f} ({label} {name}); threshold {args.bank_threshold:.3f}")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"perf-check: {len(failures)} failure(s)")
        return 1
    print("perf-check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
