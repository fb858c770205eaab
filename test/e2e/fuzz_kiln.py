"""Compiling and running one model with Kiln for the random-graph fuzzer:
the variants (kilnc flags and the precision whose bound applies), kilnc
and kiln-run --device emu as subprocesses with the outcome classified
(pass, unsupported, crash, compile-error, runtime-error, timeout), and
the per-output comparison with the reference (scripts/numerics.py's rule
plus fuzz_reference.py's allowance).
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnx.printer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import numerics  # noqa: E402
from fuzz_reference import ALLOWANCE, PERTURB  # noqa: E402

ROTATION = ["bf16-nhwc", "tf32", "fp16", "fp32-nhwc", "bf16", "tf32-nhwc",
            "fp16-nhwc"]
# Contraction kernel configurations (--variants rotate-kernels): the
# generic kernels (--contraction-kernels=false) and the tensor-core
# families, wgmma (sm_90's default) and mma.sync (--wgmma=false), in every
# precision that has them.
KERNEL_ROTATION = ["bf16-mma", "fp32-nockern", "tf32-mma", "bf16-nockern",
                   "fp16-mma", "tf32-nockern", "bf16-wgmma", "fp16-nockern",
                   "tf32-wgmma"]
BOUNDS = numerics.NORM_BOUND

CRASH_MARKERS = ("LLVM ERROR", "Assertion", "PLEASE submit a bug report",
                 "Stack dump", "UNREACHABLE", "Segmentation fault")
UNSUPPORTED = re.compile(r"not supported|unsupported", re.I)


# --- Variants --------------------------------------------------------------


def variant_flags(name):
    """kilnc flags of a variant name (fusion_fuzz.py's docstring lists them)."""
    if name == "fused":
        return []
    if name == "unfused":
        return ["--fuse=false"]
    parts = name.split("-")
    precision = parts[0]
    if precision not in BOUNDS:
        raise ValueError(f"unknown variant '{name}'")
    flags = [f"--precision={precision}"]
    for part in parts[1:]:
        if part == "nhwc":
            flags.append("--layout=nhwc")
        elif part == "nchw":
            flags.append("--layout=nchw")
        elif part == "unfused":
            flags.append("--fuse=false")
        elif part == "nockern":
            flags.append("--contraction-kernels=false")
        elif part == "mma":
            flags.append("--wgmma=false")
        elif part == "wgmma":
            flags.append("--wgmma=true")
        else:
            raise ValueError(f"unknown variant '{name}'")
    return flags


def variant_precision(name):
    head = name.split("-")[0]
    return head if head in BOUNDS else "fp32"


def variants_for(seed, spec):
    out = []
    for name in spec:
        if name == "rotate":
            name = ROTATION[seed % len(ROTATION)]
        elif name == "rotate-kernels":
            name = KERNEL_ROTATION[seed % len(KERNEL_ROTATION)]
        if name not in out:
            out.append(name)
    return out


# --- Running Kiln ------------------------------------------------------------


class Tools:
    def __init__(self, kilnc, kiln_run, timeout):
        self.kilnc = kilnc
        self.kiln_run = kiln_run
        self.timeout = timeout


def crash_signature(text):
    """A short name for a crash: the assertion / LLVM ERROR text, or the
    first Kiln frame of the stack dump."""
    for line in text.splitlines():
        if "Assertion" in line or "LLVM ERROR" in line or "UNREACHABLE" in line:
            return re.sub(r"\s+", " ", line.strip())[:200]
    for line in text.splitlines():
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ (.*)", line)
        if m and ("kiln" in m.group(1).lower() or "anonymous namespace" in m.group(1)
                  or "Kiln" in m.group(1)):
            frame = re.sub(r"\(/[^)]*\)", "", m.group(1))
            return "crash in " + frame.strip()[:200]
    for line in text.splitlines():
        if line.strip() and not line.startswith(("PLEASE", "Stack dump", " ")):
            return line.strip()[:200]
    return "crash"


def run_variant(model_path, feeds, names, variant, workdir, tools, seed):
    """Compiles and runs one variant. Returns (status, detail, outputs):
    status 'ok' (outputs: name -> array), 'unsupported', 'crash',
    'compile-error', 'runtime-error' or 'timeout'."""
    status, detail, artifact, _ = compile_variant(model_path, variant, workdir,
                                                  tools)
    if status != "ok":
        return status, detail, None
    inputs = [(name, os.path.join(workdir, f"in{i}.npy"))
              for i, name in enumerate(feeds)]
    return run_artifact(artifact, inputs, names,
                        os.path.join(workdir, f"{variant}.out"), tools, seed)


def compile_variant(model_path, variant, workdir, tools, extra=(), tag=None):
    """kilnc with the variant's flags and `extra` ones. Returns (status,
    detail, artifact, kilnc's output): status 'ok', 'unsupported',
    'crash', 'compile-error' or 'timeout'."""
    os.makedirs(workdir, exist_ok=True)
    artifact = os.path.join(workdir, f"{tag or variant}.kiln")
    env = dict(os.environ)
    env["KILN_PTXAS"] = ""
    cmd = [tools.kilnc, model_path, "-o", artifact] + variant_flags(variant) + \
        list(extra)
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=tools.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"kilnc ran past {tools.timeout} s", None, ""
    text = (run.stderr + run.stdout).strip()
    crashed = (run.returncode not in (0, 1) or
               any(m in text for m in CRASH_MARKERS))
    if crashed:
        how = (f"signal {-run.returncode}" if run.returncode < 0
               else f"exit {run.returncode}")
        return "crash", f"kilnc {how}: {crash_signature(text)}", None, text
    if run.returncode != 0:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) == 1 and UNSUPPORTED.search(lines[0]):
            return ("unsupported", lines[0].replace(model_path, "MODEL"), None,
                    text)
        message = " | ".join(lines[:3]).replace(model_path, "MODEL")
        return "compile-error", message[:400], None, text
    return "ok", "", artifact, text


def run_artifact(artifact, inputs, names, outdir, tools, seed):
    """kiln-run --device emu on [(input name, .npy path)]; returns (status,
    detail, outputs): 'ok' (name -> array, None where missing),
    'runtime-error' or 'timeout'."""
    shutil.rmtree(outdir, ignore_errors=True)
    cmd = [tools.kiln_run, artifact, "--device", "emu", "-o", outdir]
    for name, path in inputs:
        cmd += ["-i", f"{name}={path}"]
    env = dict(os.environ)
    env.setdefault("KILN_EMU_THREADS", "1")
    env.setdefault("KILN_EMU_CHECK_SHARED", "1")
    env.setdefault("KILN_EMU_RANDOM_BLOCKS", str(seed % 1000 + 1))
    env.setdefault("KILN_EMU_MAX_STEPS", "200000000")
    try:
        run = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=tools.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", f"kiln-run ran past {tools.timeout} s", None
    if run.returncode != 0:
        text = (run.stderr + run.stdout).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        how = (f"signal {-run.returncode}: " if run.returncode < 0 else "")
        return "runtime-error", how + " | ".join(lines[:3])[:400], None
    outs = {}
    for name in names:
        path = os.path.join(outdir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")
        outs[name] = np.load(path) if os.path.exists(path) else None
    return "ok", "", outs


def compare(names, ref, amp, floors, sens, outs, variant):
    """Per output: (name, ok, text, worst per-element ratio)."""
    precision = variant_precision(variant)
    tol = numerics.tolerance(precision)
    scale = ALLOWANCE * numerics.UNIT_ROUNDOFF[precision] / PERTURB
    rows = []
    for name, b, (kn, km), floor, d in zip(names, ref, amp, floors, sens):
        a = outs.get(name)
        if a is None:
            rows.append((name, False, "missing", None))
            continue
        if a.dtype != b.dtype:
            rows.append((name, False, f"dtype {a.dtype}", None))
            continue
        allowance = scale * d + tol.norm * floor
        result = numerics.compare(a, b, tol, name, allowance)
        text = (result.figures() + f", amplification {kn:.1f}/{km:.1f}")
        if not result.ok and not result.problem:
            text = "mismatch: " + text
        rows.append((name, result.ok, text,
                     None if result.problem else result.worst_ratio))
    return rows


def graph_text(model):
    try:
        return onnx.printer.to_text(model.graph)
    except Exception:  # noqa: BLE001
        return onnx.helper.printable_graph(model.graph)
