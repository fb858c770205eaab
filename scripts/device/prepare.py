#!/usr/bin/env python3
"""Packs device-check/ for scripts/device-check.sh (called by prepare.sh).

Usage: prepare.py --build DIR [--out DIR] [--dry-run] [--no-strip]
                  [--limit-mib 400] [--top1-batch 200] [--models NAME...]
                  [--variants NAME...] [--nhwc] [--no-estimates]

Writes OUT (default device-check/ in the source tree):
  bin/kiln-run               the runtime's command-line runner (no LLVM)
  scripts/                   the scripts that regenerate the models and run
                             the check there (a copy: the working tree that
                             travels may change after this)
  light/light_*.onnx         the onnx package's light models used (tiny)
  models/NAME/VARIANT.kiln   artifacts, compiled with --strip-weights (no
                             initializer bytes: device-check.sh regenerates
                             the weights there and binds them with
                             kiln-run --weights)
  manifest.json              per model: how to regenerate it, the SHA-256 of
                             each initializer, its artifacts and bounds
  attention/                 scripts/device/attention_bench.py's set (issue
                             12: attention alone, no weights, and the
                             encoder at batch 32 with and without the fused
                             attention kernel; small with --dry-run)

The full set, in the order the check runs it: the GEMM phase (issue 11):
gemm-4096 (C = A B, 4096^3) in bf16 (--precision=bf16 --io-precision=bf16:
A and C bf16 in memory), fp32 (the FFMA kernel, no TF32) and tf32, and
gemm-8192 in bf16, each with an emu estimate (kiln-run --profile
--profile-sample 8 --profile-json: models/NAME/VARIANT.estimate.json,
--no-estimates skips it). Then the benchmarks: ResNet-50 at batch 32 ({fp32,
bf16} x {fused, unfused}; bf16 fused also profiled on the GPU, with an emu
estimate; and int8, issue 26: kilnc --precision=int8 calibrated here, see
INT8 below), ResNet-50 at batch 1 (fp32 and bf16 fused), both against PyTorch
eager, the encoder layer at batch 32 (the four variants, against PyTorch;
bf16 fused profiled like ResNet-50's),
and the batch-1 numerics of SqueezeNet, ShuffleNet and the encoder (fp32,
fused); ResNet-50 at batch 32 also in fp32 fused NHWC (--layout=nhwc: the
FFMA implicit-GEMM convolutions, profiled, with an emu estimate). --nhwc
adds bf16 fused with --layout=nhwc (what auto picks in bf16 today). Then
the top-1 phase (issue 5): each of the nine light classifiers (KIND-b200) at
batch --top1-batch (200), compiled with --precision=bf16, fp16 and tf32
(default layout), which device_check.py runs once each on one seeded input
batch: relative error of the output norm (bounds bf16 2e-2, fp16 and tf32
5e-3) and top-1 agreement with onnxruntime fp32 (bound 0.99). The manifest
also records the H200's dense peaks from runtime/targets/gpus.ini. --dry-run
packs a set small enough for `scripts/device-check.sh --dry-run` on the emu
device: the GEMM phase at 128x64x96 (the three precisions), a small encoder
layer at batch 2 (the four variants), SqueezeNet at batch 1 (fp32 fused
and int8), and SqueezeNet
bf16 at batch 2 for the top-1 phase. --no-strip keeps the weights in the
artifacts (for a kilnc without --strip-weights; the full set then does not
fit). --models keeps only the named models of the set (and --variants only
the named variants, e.g. "fp32 fused"). Fails when OUT is over --limit-mib
unpacked (prepare.sh then packs it and checks the packed size against the
device tool's 64 MiB).
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import device_models  # noqa: E402

FP32, BF16 = 1e-4, 2e-2
FOUR = [
    ("fp32 unfused", ["--fuse=false"], FP32),
    ("fp32 fused", [], FP32),
    ("bf16 unfused", ["--precision=bf16", "--fuse=false"], BF16),
    ("bf16 fused", ["--precision=bf16"], BF16),
]
FUSED32 = [FOUR[1]]
# The recurrent model: the persistent kernels (profiled, with an emu
# estimate, for the calibration) and the same model unrolled
# (--recurrence=unroll: two launches per step and direction, 1,200 in all).
LSTM = [FOUR[1] + (dict(profile=True, estimate=True),),
        ("fp32 unrolled", ["--recurrence=unroll"], FP32)]
BF16_FUSED = [FOUR[3]]
# ResNet-50 and the encoder at batch 32: bf16 fused also gets kiln-run
# --profile on the GPU (issue 13: measured per-kernel times), beside an emu
# estimate made here; device_check.py's calibration compares the two.
PROFILED = [FOUR[0], FOUR[1], FOUR[2],
            FOUR[3] + (dict(profile=True, estimate=True),)]
# kilnc --residual-precision=low: skip connections stored in bf16 only, as
# PyTorch autocast keeps them (the emu model's estimate: 1215 -> 972 us for
# ResNet-50 at batch 32; the first GPU run measures it).
LOW_RESIDUALS = [("bf16 fused low-residuals",
                  ["--precision=bf16", "--residual-precision=low"], BF16)]
# fp32 in NHWC: the convolutions on the FFMA implicit-GEMM kernel
# (`--layout=auto` keeps fp32 in NCHW, on the scalar kernels: 51.1 ms on the
# H200 on 2026-12-04 against PyTorch's 11.2 ms; the emu model estimates
# 25.3 ms NCHW, 7.9 ms NHWC), profiled so the calibration judges the FFMA
# convolutions too. The next GPU run decides whether auto should pick NHWC
# in fp32.
FP32_NHWC = [("fp32 fused nhwc", ["--layout=nhwc"], FP32,
              dict(profile=True, estimate=True))]
NHWC = [("bf16 fused nhwc", ["--precision=bf16", "--layout=nhwc"], BF16)]
# Issue 26: Kiln's own post-training int8 quantization (kilnc
# --precision=int8 --calibrate; int8 tensor-core kernels, the rest fp32),
# against the same onnxruntime fp32 reference as the float variants. The
# artifact's weights are new int8 initializers (W_quantized); prepare.py
# records how to derive them and their SHA-256s, device_check.py derives
# them from the regenerated fp32 weights (int8_weights.py).
# Calibration (calibration_cache): INT8_CALIBRATION seeded N(0, 1) images
# (the check's input distribution, make_reference.py's seed 1234; these
# are numpy's seed INT8_SEED: they never leave this machine, so the
# portable generator is not needed, and its uniform "normal" would clip the
# check's Gaussian inputs at sqrt(3)), MinMax, the fp32 model run at batch 1
# on emu here (ResNet-50: about 80 s an image on this 2-core machine, 6.5
# minutes for the 4; a batch of 32 would take 40), the table then read by
# every batch's compile with --calibration-cache (MinMax ranges do not
# depend on how the samples are batched).
# The bounds, on the relative L2 error of the output (a softmax) against
# onnxruntime fp32 and on every element by scripts/numerics.py's rule
# (6 B rms + B |ref|), are measured, not derived: int8 moves each operand
# by up to half a step of its range, and the network amplifies that
# (docs/benchmarks.md "Quantized models": 69 times for the light zoo's
# calibrated ResNet-50). Measured on emu on 2026-12-05 with this calibration, one image at
# a time at batch 1, the first 8 images of the check's seeded batch-32
# input (make_reference.py, seed 1234), against onnxruntime fp32:
# - ResNet-50: rel. L2 2.4e-2 to 4.3e-2 (mean 3.1e-2), worst element 0.29
#   to 0.44 of its bound at B = 0.1, top-1 8 of 8. The bound 0.1 leaves 2.3x
#   over the worst image (the batch's figure is about their rms); a wrong
#   output is ~1 away (the reference's softmax is peaked: ||ref - mean|| /
#   ||ref|| = 0.985).
# - SqueezeNet (the dry run): rel. L2 3.4e-4 on all 8 (its random-weight
#   output is nearly flat: ||ref - mean|| / ||ref|| = 0.080, so a constant
#   output would pass 0.1); the bound 2e-3 is 6x that and 40x under 0.080.
# The GPU's int8 kernels sum in int32 exactly as emu's do; what differs is
# the f32 around them (BatchNormalization, the residual adds, the
# requantization's multiply), where a value near a rounding tie of the
# next QuantizeLinear may land one step off: within the margins above.
# Top-1 agreement with fp32 (INT8_TOP1, at most 3 of 32 images off) is the
# other half: random-weight classifiers give most images the same class
# (compare.py), so it catches a broken int8 path, not a 1% accuracy loss.
INT8_RESNET50, INT8_SQUEEZENET, INT8_TOP1 = 0.1, 2e-3, 0.9
INT8_CALIBRATION, INT8_SEED = 4, 26


def int8(bound):
    return [("int8", ["--precision=int8"], bound, dict(int8=True, top1_bound=INT8_TOP1))]
# The top-1 phase: issue 5's bounds (the default layout, fused).
TOP1_AGREEMENT = 0.99
LOW = [
    ("bf16", ["--precision=bf16"], BF16),
    ("fp16", ["--precision=fp16"], 5e-3),
    ("tf32", ["--precision=tf32"], 5e-3),
]
# The nine light classifiers, cheapest first: when the phase's time budget
# runs out, the costly ones are the ones skipped.
TOP1_KINDS = ["shufflenet", "squeezenet", "bvlc_alexnet", "zfnet512", "inception_v1",
              "inception_v2", "densenet121", "resnet50", "vgg19"]

# The GEMM phase (issue 11's speed table): C = A B with A [M, K] the input
# and B [K, N] a weight. bf16 keeps A and C bf16 in memory
# (--io-precision=bf16, as torch.matmul on bf16 tensors); fp32 is the FFMA
# kernel (no TF32); tf32 the tf32 mma. Bounds against float64 of the
# operands the kernel sees (gemm_check.py: bf16 output rounding alone is
# ~1.8e-3). Each variant gets an emu estimate here (kiln-run --profile
# --profile-sample 8) and --profile on the GPU.
GEMM_EST = dict(profile=True, estimate=True)
GEMM_BF16 = ("bf16", ["--precision=bf16", "--io-precision=bf16"], 1e-2,
             dict(GEMM_EST, precision="bf16"))
GEMM_FP32 = ("fp32", [], FP32, dict(GEMM_EST, precision="fp32"))
GEMM_TF32 = ("tf32", ["--precision=tf32"], 5e-3, dict(GEMM_EST, precision="tf32"))
GEMM3 = [GEMM_BF16, GEMM_FP32, GEMM_TF32]

# (name, kind, batch, variants, PyTorch baseline kind or None, phase); a
# variant is (name, kilnc flags, bound[, extras]).
FULL = [
    ("gemm-4096", "gemm-4096x4096x4096", 1, GEMM3, None, "gemm"),
    ("gemm-8192", "gemm-8192x8192x8192", 1, [GEMM_BF16], None, "gemm"),
    ("resnet50-b32", "resnet50", 32, PROFILED + int8(INT8_RESNET50) + LOW_RESIDUALS, "resnet50",
     "bench"),
    ("resnet50-b1", "resnet50", 1, FUSED32 + BF16_FUSED, "resnet50", "bench"),
    ("encoder-b32", "encoder", 32, PROFILED, "encoder", "bench"),
    ("squeezenet-b1", "squeezenet", 1, FUSED32, None, "bench"),
    ("shufflenet-b1", "shufflenet", 1, FUSED32, None, "bench"),
    ("encoder-b1", "encoder", 1, FUSED32, None, "bench"),
    # Issue 25's sequence model: four persistent recurrence kernels
    # (clusters of 8 on sm_90, distributed shared memory), against cuDNN's
    # LSTM through PyTorch. The first hardware run of cluster kernels.
    ("lstm-b8", "lstm", 8, LSTM, "lstm", "bench"),
]
DRY = [
    ("gemm-small", "gemm-128x64x96", 1, GEMM3, None, "gemm"),
    ("encoder-small-b2", "encoder-small", 2, FOUR, "encoder", "bench"),
    ("squeezenet-b1", "squeezenet", 1, FUSED32 + int8(INT8_SQUEEZENET), None, "bench"),
    ("squeezenet-b2", "squeezenet", 2, LOW[:1], None, "top1"),
    ("lstm-small-b2", "lstm-small", 2, FUSED32, "lstm", "bench"),
]

SCRIPTS = [
    "scripts/device/portable_random.py",
    "scripts/device/randomize_weights.py",
    "scripts/device/device_models.py",
    "scripts/device/export_initializers.py",
    "scripts/device/int8_weights.py",
    "scripts/device/make_reference.py",
    "scripts/device/compare.py",
    "scripts/numerics.py",
    "scripts/device/attention_bench.py",
    "scripts/device/wgmma_bench.py",
    "scripts/device/gemm_check.py",
    "scripts/device/bench_cli.py",
    "scripts/device/device_check.py",
    "scripts/device/calibration.py",
    "runtime/targets/gpus.ini",  # calibration.py's current figures
    "scripts/device/torch_baselines.py",
    "scripts/device/membound_bench.py",
    "scripts/rebatch.py",
    "test/Frontend/ONNX/models/make_encoder.py",
]


# The models whose torch.compile baseline the (opt-in) compile phase times.
COMPILE = {"resnet50-b32"}


def peaks(target="sm_90-h200"):
    """Dense peaks in TFLOP/s from runtime/targets/gpus.ini (the GEMM table's
    '% of peak')."""
    result, section = {}, None
    with open(os.path.join(ROOT, "runtime", "targets", "gpus.ini")) as f:
        for line in f:
            line = line.split("#")[0].strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == target and "=" in line:
                key, value = (t.strip() for t in line.split("=", 1))
                if key.endswith("_tflops"):
                    result[key[:-len("_tflops")]] = float(value)
    return result


def estimate(kiln_run, artifact, weights, out_json):
    """An emu estimate of the artifact on the H200 (kiln-run --profile
    --profile-sample 8 --profile-json): total ms, or None."""
    cmd = [kiln_run, artifact, "--device", "emu", "--random-inputs", "--profile-sample", "8",
           "--profile-json", out_json]
    if weights:
        cmd += ["--weights", weights]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(f"prepare.py: no estimate for {artifact}: {p.stdout.strip().splitlines()[-1:]}")
        return None
    with open(out_json) as f:
        return json.load(f)["total"]["estimated_us"] / 1e3


def int8_source(onnx_path, out_path):
    """The model as kilnc --precision=int8 can take it: the light models are
    opset 9, and onnx's converter raises Softmax to 13 only with its input's
    shape known, which shape inference gives only at IR version 4 or later
    (before that, initializers not listed as graph inputs have no type, and
    randomize_weights.py's ConstantOfShape weights are not listed). The
    initializers are untouched (their digests stay those recorded)."""
    import onnx
    model = onnx.load(onnx_path)
    model.ir_version = max(model.ir_version, 7)
    onnx.save(onnx.shape_inference.infer_shapes(model), out_path)


def calibration_cache(kilnc, kind, light, tmp):
    """kilnc's calibration table (--calibration-cache JSON) for KIND: its
    batch-1 model over INT8_CALIBRATION seeded N(0, 1) samples per input,
    MinMax, on emu (kilnc --emit=kiln: the table is written before the
    compile proper)."""
    import numpy as np
    import onnx
    b1 = os.path.join(tmp, f"{kind}-calibration.onnx")
    device_models.make(kind, 1, b1, light)
    int8_source(b1, b1)
    model = onnx.load(b1)
    inits = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(INT8_SEED)
    cmd = [kilnc, b1, "--precision=int8", "--emit=kiln", "-o", os.devnull]
    for i, value in enumerate(v for v in model.graph.input if v.name not in inits):
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        data = rng.standard_normal([INT8_CALIBRATION] + shape[1:]).astype(np.float32)
        np.save(os.path.join(tmp, f"{kind}-calibration-{i}.npy"), data)
        cmd.append(f"--calibrate={value.name}={os.path.join(tmp, f'{kind}-calibration-{i}.npy')}")
    cache = os.path.join(tmp, f"{kind}-calibration.json")
    subprocess.run(cmd + ["--calibration-cache", cache], check=True)
    os.remove(b1)
    return cache


def int8_weights_of(artifact, qdq, onnx_path):
    """The variant's derived_weights: each int8 weight of kilnc's QDQ model
    (--save-quantized), checked bit for bit against int8_weights.quantize
    of its fp32 source, with its SHA-256; and a check that the stripped
    artifact is rebuilt from nothing but those and the fp32 initializers
    that export_initializers.py writes."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import int8_weights
    fp32 = {t.name: t for t in onnx.load(onnx_path).graph.initializer}
    derived = []
    for name, source, axis, q in int8_weights.from_qdq(qdq, fp32):
        mine = int8_weights.quantize(numpy_helper.to_array(fp32[source]), axis)
        if mine.shape != q.shape or not np.array_equal(mine, q):
            sys.exit(f"prepare.py: int8_weights.quantize({source}, axis {axis}) is not "
                     f"kilnc's {name}: {int(np.sum(mine != q))} of {q.size} values differ")
        derived.append(dict(name=name, source=source, axis=axis,
                            sha256=device_models.digest_array(mine)))
    need = int8_weights.artifact_initializers(artifact)
    known = {d["name"] for d in derived} | set(fp32)
    unknown = sorted(set(need) - known)
    if unknown or not need:
        sys.exit(f"prepare.py: {artifact} is rebuilt from initializers the check "
                 f"cannot provide: {', '.join(unknown) or 'none found'}")
    # Only the int8 weights the artifact reads (a weight kept float, or one
    # inlined as a constant, needs no file).
    return [d for d in derived if d["name"] in need]


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files)


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except Exception:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "device-check"))
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--no-strip", action="store_true")
    ap.add_argument("--limit-mib", type=float, default=400.0)
    ap.add_argument("--models", nargs="+")
    ap.add_argument("--variants", nargs="+")
    ap.add_argument("--nhwc", action="store_true",
                    help="also ResNet-50 at batch 32 bf16 fused with --layout=nhwc")
    ap.add_argument("--no-estimates", action="store_true",
                    help="no emu estimates (kiln-run --profile-sample 8) for the profiled variants")
    ap.add_argument("--top1-batch", type=int, default=200,
                    help="batch of the top-1 phase's classifiers (full set)")
    args = ap.parse_args()
    kilnc = os.path.join(args.build, "bin", "kilnc")
    kiln_run = os.path.join(args.build, "bin", "kiln-run")
    strip = not args.no_strip
    if strip:
        help_text = subprocess.run([kilnc, "--help"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True).stdout
        if "--strip-weights" not in help_text:
            sys.exit(f"prepare.py: {kilnc} has no --strip-weights "
                     "(rebuild it, or pass --no-strip)")

    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    for sub in ("bin", "scripts", "light", "models"):
        os.makedirs(os.path.join(out, sub))
    shutil.copy2(kiln_run, os.path.join(out, "bin", "kiln-run"))
    for s in SCRIPTS:
        shutil.copy2(os.path.join(ROOT, s), os.path.join(out, "scripts"))
    light = device_models.light_dir()
    full = [(n, k, b, vs + (FP32_NHWC + (NHWC if args.nhwc else [])
                            if n == "resnet50-b32" else []), t, ph)
            for n, k, b, vs, t, ph in FULL]
    plan = DRY if args.dry_run else full + [
        (f"{k}-b{args.top1_batch}", k, args.top1_batch, LOW, None, "top1") for k in TOP1_KINDS]
    if args.models:
        unknown = set(args.models) - {p[0] for p in plan}
        if unknown:
            sys.exit(f"prepare.py: no model {', '.join(sorted(unknown))} in this set "
                     f"({', '.join(p[0] for p in plan)})")
        plan = [p for p in plan if p[0] in args.models]
    if args.variants:
        plan = [(n, k, b, [v for v in vs if v[0] in args.variants], t, ph)
                for n, k, b, vs, t, ph in plan]
    manifest = dict(commit=git("rev-parse", "--short", "HEAD")
                    + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else ""),
                    date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    set="dry-run" if args.dry_run else "full", stripped=strip,
                    peaks_tflops=peaks(), models=[])
    caches = {}  # kind: its int8 calibration table (calibration_cache)
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, batch, variants, torch_kind, phase in plan:
            t0 = time.time()
            if kind in device_models.LIGHT:
                src = os.path.join(light, f"light_{kind}.onnx")
                if not os.path.exists(os.path.join(out, "light", os.path.basename(src))):
                    shutil.copy2(src, os.path.join(out, "light"))
            onnx_path = os.path.join(tmp, name + ".onnx")
            device_models.make(kind, batch, onnx_path, os.path.join(out, "light"))
            entry = dict(name=name, kind=kind, batch=batch, torch=torch_kind, phase=phase,
                         weights_sha256=device_models.digest(onnx_path), variants=[])
            if name in COMPILE and not args.dry_run:
                entry["compile"] = True
            os.makedirs(os.path.join(out, "models", name))
            weights = None
            for vname, flags, bound, *more in variants:
                extras = dict(more[0]) if more else {}
                file = vname.replace(" ", "-") + ".kiln"
                artifact = os.path.join(out, "models", name, file)
                quantized = extras.pop("int8", False)
                source = onnx_path
                if quantized:
                    if kind not in caches:
                        caches[kind] = calibration_cache(kilnc, kind, os.path.join(out, "light"),
                                                         tmp)
                    source = os.path.join(tmp, name + "-int8.onnx")
                    int8_source(onnx_path, source)
                    qdq = os.path.join(tmp, name + "-qdq.onnx")
                    flags = flags + ["--calibration-cache", caches[kind]]
                cmd = [kilnc, source, "-o", artifact] + flags
                if quantized:
                    cmd.append("--save-quantized=" + qdq)
                if strip:
                    cmd.append("--strip-weights")
                subprocess.run(cmd, check=True)
                variant = dict(name=vname, file=file, kilnc_flags=flags, bound=bound,
                               stripped=strip, bench=phase in ("bench", "gemm"))
                if quantized:
                    # The table, beside the artifact (a few kB): what it was
                    # calibrated with.
                    table = file[:-len(".kiln")] + ".calibration.json"
                    shutil.copy2(caches[kind], os.path.join(out, "models", name, table))
                    variant.update(kilnc_flags=flags[:-2] + ["--calibration-cache", table],
                                   calibration=dict(samples=INT8_CALIBRATION, seed=INT8_SEED,
                                                    batch=1, method="minmax",
                                                    data="numpy default_rng N(0, 1)"))
                    if strip:
                        variant["derived_weights"] = int8_weights_of(artifact, qdq, onnx_path)
                    os.remove(qdq)
                    os.remove(source)
                if phase == "top1":
                    variant["top1_bound"] = TOP1_AGREEMENT
                if extras.pop("estimate", False) and not args.no_estimates:
                    if strip and weights is None:
                        weights = os.path.join(tmp, name + "-weights")
                        subprocess.run([sys.executable, os.path.join(HERE, "export_initializers.py"),
                                        onnx_path, weights], check=True, stdout=subprocess.DEVNULL)
                    est = file[:-len(".kiln")] + ".estimate.json"
                    ms = estimate(kiln_run, artifact, weights, os.path.join(out, "models", name, est))
                    if ms is not None:
                        variant.update(estimate=est, estimate_ms=ms)
                variant.update(extras)
                entry["variants"].append(variant)
            if weights:
                shutil.rmtree(weights)
            os.remove(onnx_path)  # VGG-19's random weights alone are 550 MB
            manifest["models"].append(entry)
            print(f"prepared {name}: {', '.join(v[0] for v in variants)} "
                  f"({du(os.path.join(out, 'models', name)) / 2**20:.1f} MiB, "
                  f"{time.time() - t0:.0f} s)", flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "attention_bench.py"), "prepare", "--kilnc", kilnc, "--out", out] + (["--dry-run"] if args.dry_run else []), check=True)
    subprocess.run([sys.executable, os.path.join(HERE, "wgmma_bench.py"), "prepare", "--kilnc", kilnc, "--out", out] + (["--dry-run"] if args.dry_run else []), check=True)  # issue 11: wgmma vs mma.sync vs cuBLAS
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    total = du(out) / 2**20
    # The device tool carries 64 MiB with the working tree; prepare.sh packs
    # OUT with xz (artifacts are mostly PTX and cubins: about 300 MiB packed
    # into 42 MiB on 2026-12-04) and checks the packed size. This limit is on the
    # unpacked directory, a guard against a runaway set.
    print(f"{out}: {total:.1f} MiB unpacked (limit {args.limit_mib:g} MiB)")
    if total > args.limit_mib:
        sys.exit(f"prepare.py: {out} is {total:.1f} MiB, over {args.limit_mib:g} MiB unpacked")


if __name__ == "__main__":
    main()
