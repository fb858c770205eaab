#!/usr/bin/env python3
"""Runs the artifacts that scripts/device/prepare.sh packed, on the GPU.

Usage: device_check.py [--dir device-check] [--device cuda|emu] [--runs N]
                       [--warmup N] [--gemm-runs N] [--torch auto|cpu|no]
                       [--work DIR] [--phase all|PHASE,...]
                       [--gemm-budget S] [--budget S] [--top1-budget S]
                       [--compile-budget S] [--compile-mode MODE]
                       [--bench-seconds S] [--timeout SECONDS] [--out DIR]
                       [MODEL...]

Called by scripts/device-check.sh; see there and docs/benchmarks.md. The
phases run in the order gemm, bench, top1, compile ("all" is the first
three), each with its own time budget counted from its start; the tables
are written after every phase.

The GEMM phase (the manifest's models with phase "gemm", gemm-MxKxN): B is
regenerated (device_models.gemm_weight) and checked against the recorded
SHA-256, A is seeded; per variant (precision bf16, fp32 or tf32):
torch.matmul on the same operands (gemm_check.torch_gemm: cuBLAS, TF32 off
for fp32), then kiln-run once with -o (gemm_check.Reference: sampled rows
and column sums against float64 on the CPU) and kiln-run --bench N
--profile (warm-up for about 0.5 s, --estimate-from the emu estimate
prepare.py made): median ms, TFLOP/s, % of cuBLAS, % of the dense peak, NVML
energy.

The benchmark phase, for each model with phase "bench":

1. regenerate its ONNX model with the portable generator
   (device_models.py), and check every initializer against the SHA-256 that
   prepare.sh recorded from the model the artifacts were compiled from (a
   difference stops that model: its artifacts would run with other weights);
2. write the initializers as .npy files (export_initializers.py) for
   `kiln-run --weights`, a seeded input and the onnxruntime fp32 reference
   (make_reference.py --provider auto);
3. per artifact: kiln-run once with -o, relative error of the output norm
   against the reference (compare.py, scripts/numerics.py's rule: bound
   fp32 1e-4, bf16 2e-2 on the norm, and the per-element bounds), then
   kiln-run --bench N for the median time per run (and NVML energy; with
   --profile for variants marked profile); an int8 variant (issue 26)
   first derives its int8 weights from the exported fp32 ones
   (int8_weights.py, Kiln's per-channel rule), each checked against the
   SHA-256 prepare.py recorded, and is also judged on the fraction of the
   batch whose top-1 class is the reference's (compare.py --top1's
   measure; the bound is the variant's top1_bound);
4. for the models with a PyTorch kind, before the kiln runs, the PyTorch
   eager baselines (torch_baselines.py) on the same input.

Then the top-1 phase (the manifest's models with phase "top1": the nine
light classifiers at batch 200, bf16/fp16/tf32): steps 1 and 2 as above
(one seeded N(0, 1) input batch), then
per artifact one kiln-run with -o: the relative error of the output norm
(bounds bf16 2e-2, fp16 and tf32 5e-3) and the fraction of the samples whose
top-1 class (argmax over the output's non-batch dimensions) is the
reference's (bound 0.99). It also reports how many distinct classes the
reference picks over the batch (a check where every sample gets the same
class says little), and the same agreement on the batch-centred outputs
(compare.py --top1). The next model is regenerated and its reference made
(CPU work) while the current one's artifacts run.

The compile phase (only when named in --phase): torch.compile(mode=
--compile-mode) of the bf16 PyTorch baseline of the models marked compile
(ResNet-50 at batch 32), in a process group killed at the phase's budget.

After the GEMM and the benchmark phases, issue 13's calibration
(calibration.py) over this run's measured profiles that carry estimates
(profile-*.json of the variants marked profile): one verdict line per
profiled variant in the log and the table, and OUT/calibration.md,
calibration.json and calibration.ini (the target table with the suggested
figures). Without measured profiles (emu) one line says so.

Ends with the tables (GEMM; benchmarks; top-1), also written to
OUT/table.txt with OUT/results.json and OUT/kiln-run-logs.tar.gz (kiln-run's
output per artifact: per-kernel times; profile and trace JSON) when --out or
$OUT is set.
"""
import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import device_models  # noqa: E402
import gemm_check  # noqa: E402


def log(message):
    print(message, flush=True)


def run(cmd, timeout, logfile=None):
    """(returncode, combined output); returncode None on a timeout."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc = None
    if logfile:
        with open(logfile, "w") as f:
            f.write(" ".join(cmd) + "\n" + out)
    return rc, out


def run_group(cmd, timeout, logfile=None):
    """run() in a new process session, all of it killed on a timeout
    (torch.compile's compile workers are the child's children)."""
    import signal
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _ = p.communicate()
        rc = None
    if logfile:
        with open(logfile, "w") as f:
            f.write(" ".join(cmd) + "\n" + (out or ""))
    return rc, out or ""


ENERGY = re.compile(r"energy: ([0-9.]+) J per run, average power ([0-9.]+) W")
PER_RUN = re.compile(r"per run: median ([0-9.]+) ms")


def energy(text):
    """(J per run, W) from kiln-run --bench's NVML line, or (None, None)."""
    found = ENERGY.search(text)
    return (float(found.group(1)), float(found.group(2))) if found else (None, None)


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:120] if lines else ""


def versions():
    parts = [f"python {platform.python_version()}"]
    for name in ("numpy", "onnx", "onnxruntime", "torch", "torchvision"):
        try:
            module = __import__(name)
            parts.append(f"{name} {module.__version__}")
        except Exception:
            parts.append(f"{name} -")
    return ", ".join(parts)


def gpu_name():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, timeout=30)
        return p.stdout.strip() or "-"
    except Exception:
        return "-"


def torch_device(mode, device):
    """The device for the PyTorch baselines, or (None, why)."""
    if mode == "no":
        return None, "PyTorch baselines off (--torch no)"
    try:
        import torch
    except Exception as e:
        return None, f"PyTorch baselines skipped: no torch ({e})"
    if device.startswith("cuda"):
        if torch.cuda.is_available():
            return "cuda", f"PyTorch {torch.__version__} on {torch.cuda.get_device_name()}"
        if mode != "cpu":
            return None, "PyTorch baselines skipped: torch sees no CUDA device"
    if mode == "cpu" or not device.startswith("cuda"):
        if mode == "cpu":
            return "cpu", f"PyTorch {torch.__version__} on the CPU (dry run: times are not comparable)"
        return None, "PyTorch baselines skipped (not on cuda; --torch cpu runs them on the CPU)"
    return None, "PyTorch baselines skipped"


def joules(r):
    j, w = r.get("joules"), r.get("watts")
    return f"{j:.4g} ({w:.0f} W)" if j is not None and w is not None else "-"


class Check:
    def __init__(self, args):
        self.args = args
        self.dir = os.path.abspath(args.dir)
        with open(os.path.join(self.dir, "manifest.json")) as f:
            self.manifest = json.load(f)
        self.kiln_run = os.path.join(self.dir, "bin", "kiln-run")
        self.start = time.time()
        self.budget = args.budget
        self.rows = []
        self.top1_rows = []
        self.gemm_rows = []
        self.calibration_lines = []
        self.peaks = self.manifest.get("peaks_tflops", {})

    def left(self):
        return self.budget - (time.time() - self.start)

    def timeout(self):
        """One kiln-run's limit: --timeout, cut to what is left of the
        budget (plus 30 s), so hanging kernels cannot eat the lease."""
        return max(10.0, min(self.args.timeout, self.left() + 30.0))

    def row(self, model, variant, ms=None, err=None, bound=None, status="", note="",
            joules=None, watts=None, top1=None):
        r = dict(model=model, variant=variant, ms=ms, err=err, bound=bound,
                 status=status, note=note, joules=joules, watts=watts)
        if top1 is not None:
            r["top1"] = top1
        self.rows.append(r)
        ms_s = f"{ms:.3f} ms" if ms is not None else "-"
        err_s = f"{err:.2e}" if err is not None else "-"
        log(f"  {model:18s} {variant:26s} {ms_s:>12s} {err_s:>9s} {status} {note}")

    def kiln_run_command(self, name, v, weights, rundir):
        """kiln-run on one artifact: its weights bound, the model's inputs."""
        cmd = [self.kiln_run, os.path.join(self.dir, "models", name, v["file"]),
               "--device", self.args.device]
        if v.get("stripped"):
            cmd += ["--weights", weights]
        with open(os.path.join(rundir, "inputs", "names.txt")) as f:
            for line in f:
                if line.strip():
                    gname, file = line.rstrip("\n").split("\t")
                    cmd += ["-i", f"{gname}={os.path.join(rundir, 'inputs', file)}"]
        return cmd

    def profile_args(self, name, v, work):
        """Issue 13, for variants marked profile: kiln-run --profile (on cuda
        per-kernel times measured over the --bench runs) with its JSON and a
        trace, and on cuda --estimate-from the emu estimate prepare.py made."""
        if not v.get("profile"):
            return []
        slug = v["name"].replace(" ", "-")
        extra = ["--profile", "--profile-json", os.path.join(work, f"profile-{slug}.json"),
                 "--trace", os.path.join(work, f"trace-{slug}.json")]
        estimate = os.path.join(self.dir, "models", name, v.get("estimate") or "-")
        if v.get("estimate") and os.path.exists(estimate) and self.args.device.startswith("cuda"):
            extra += ["--estimate-from", estimate]
        return extra

    def kiln_variant(self, m, v, work, rundir, weights):
        a = self.args
        name = m["name"]
        base = self.kiln_run_command(name, v, weights, rundir)
        out = os.path.join(work, "out-" + v["name"].replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        if self.left() < 0:
            return self.row(name, "kiln " + v["name"], status="SKIPPED", note="time budget spent")
        if v.get("derived_weights"):
            # int8 (issue 26): the artifact's weights are int8 initializers
            # kilnc derived from the fp32 ones; derive them here the same
            # way, each checked against the SHA-256 prepare.py recorded.
            import int8_weights
            problems = int8_weights.derive(v["derived_weights"], weights,
                                           exported=m["weights_sha256"])
            if problems:
                return self.row(name, "kiln " + v["name"], status="FAIL",
                                note=f"{len(problems)} of {len(v['derived_weights'])} int8 "
                                     f"weights: {problems[0]}")
        t0 = time.time()
        rc, text = run(base + ["-o", out], self.timeout(),
                       os.path.join(work, f"run-{v['name'].replace(' ', '-')}.log"))
        once = time.time() - t0  # one run plus loading: an upper bound
        if rc != 0:
            why = "timed out" if rc is None else last_line(text)
            return self.row(name, "kiln " + v["name"], status="FAIL", note=why)
        rc, text = run([sys.executable, os.path.join(HERE, "compare.py"),
                        "--bound", str(v["bound"]),
                        os.path.join(rundir, "reference"), out], 120)
        # "E R": the worst relative error and per-element ratio (numerics.py).
        try:
            err, ratio = (float(x) for x in text.strip().splitlines()[-1].split())
        except (ValueError, IndexError):
            err = ratio = float("inf")
        status = "ok" if err <= v["bound"] and ratio <= 1.0 else "MISMATCH"
        ms, note, joules, watts = None, "", None, None
        if status != "ok" and err <= v["bound"]:
            note = f"an element off: {ratio:.2f} of its bound; "
        top1 = None
        if v.get("top1_bound") is not None:
            # int8: also the fraction of the batch whose top-1 class is the
            # fp32 reference's (prepare.py INT8_TOP1).
            import compare
            _, stats, problem = compare.compare(os.path.join(rundir, "reference"), out,
                                                top1=True, bound=v["bound"])
            top1 = stats.get("top1", 0.0) if not problem else 0.0
            note += (f"top-1 agreement {top1:.3f} (bound {v['top1_bound']:g}; reference "
                     f"classes {stats.get('classes', '-')}); ")
            if top1 < v["top1_bound"]:
                status = "MISMATCH"
        if not v.get("bench", True) or a.runs <= 0:
            note += "not benchmarked"
        elif self.left() < 0:
            note += "bench skipped: time budget spent"
        else:
            # --bench N runs warmup + 2N times (N timed whole, N kernel by
            # kernel); slow artifacts get fewer runs, so one bench takes
            # about --bench-seconds at most.
            runs = min(a.runs, max(3, int(a.bench_seconds / max(2 * once, 1e-3))))
            warmup = min(a.warmup, runs)
            slug = v["name"].replace(" ", "-")
            extra = self.profile_args(name, v, work)
            rc, text = run(base + ["--bench", str(runs), "--warmup", str(warmup)] + extra,
                           self.timeout(), os.path.join(work, f"bench-{slug}.log"))
            found = PER_RUN.search(text)
            if rc == 0 and found:
                ms = float(found.group(1))
                joules, watts = energy(text)
                if runs < a.runs:
                    note += f"median of {runs} runs (slow)"
                if v.get("profile"):
                    note = (note + "; " if note and not note.endswith("; ") else note) + \
                        f"per-kernel profile in {name}/bench-{slug}.log"
            else:
                note += "bench " + ("timed out" if rc is None else "failed: " + last_line(text))
        self.row(name, "kiln " + v["name"], ms, err, v["bound"], status,
                 note.rstrip("; "), joules, watts, top1)

    def model(self, m, tdev):
        a = self.args
        name = m["name"]
        if self.left() < 0:  # not even the model's regeneration
            if m.get("torch") and tdev:
                self.row(name, "PyTorch", status="SKIPPED", note="time budget spent")
            for v in m["variants"]:
                self.row(name, "kiln " + v["name"], status="SKIPPED", note="time budget spent")
            return
        work = os.path.join(a.work, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        onnx_path = os.path.join(work, "model.onnx")
        t0 = time.time()
        device_models.make(m["kind"], m["batch"], onnx_path, os.path.join(self.dir, "light"))
        digest = device_models.digest(onnx_path)
        want = m["weights_sha256"]
        differ = sorted(k for k in set(want) | set(digest) if want.get(k) != digest.get(k))
        if differ:
            note = (f"regenerated weights differ from the compiled ones: {len(differ)} of "
                    f"{len(want)} initializers (first {differ[0]})")
            for v in m["variants"]:
                self.row(name, "kiln " + v["name"], status="FAIL", note=note)
            return
        weights = os.path.join(work, "weights")
        if any(v.get("stripped") for v in m["variants"]):
            rc, text = run([sys.executable, os.path.join(HERE, "export_initializers.py"),
                            onnx_path, weights], 600)
            if rc != 0:
                for v in m["variants"]:
                    self.row(name, "kiln " + v["name"], status="FAIL",
                             note="export_initializers.py: " + last_line(text))
                return
        rundir = os.path.join(work, "run")
        cmd = [sys.executable, os.path.join(HERE, "make_reference.py"), onnx_path, rundir,
               "--provider", "auto"]
        if device_models.vocab(m["kind"]):
            cmd += ["--int-high", str(device_models.vocab(m["kind"]))]
        rc, text = run(cmd, 900)
        if rc != 0:
            for v in m["variants"]:
                self.row(name, "kiln " + v["name"], status="FAIL",
                         note="reference: " + last_line(text))
            return
        log(f"{name}: {len(digest)} initializers as compiled; {last_line(text)}; "
            f"{time.time() - t0:.1f} s")
        # The baseline first: it is the run most likely to work on a new
        # machine, and the kiln rows' speed-ups need it.
        if m.get("torch") and tdev:
            self.torch_rows(m, onnx_path, rundir, tdev)
        for v in m["variants"]:
            self.kiln_variant(m, v, work, rundir, weights)

    def calibrate(self, models, since):
        """Issue 13: calibration.py over the profiles written since `since`
        that have measured times and estimates; OUT/calibration.*."""
        import calibration
        profiles, skipped = [], []
        for m in models:
            work = os.path.join(self.args.work, m["name"])
            for f in sorted(os.listdir(work)) if os.path.isdir(work) else []:
                path = os.path.join(work, f)
                if (f.startswith("profile-") and f.endswith(".json")
                        and os.path.getmtime(path) >= since):
                    try:
                        profiles.append(calibration.load_profile(path))
                    except calibration.CalibrationError as e:
                        skipped.append(str(e))
        if not profiles:
            self.calibration_lines = [
                f"calibration (issue 13): no measured profile with estimates: {len(skipped)} "
                f"profile(s), skipped (first: {skipped[0]})" if skipped else
                "calibration (issue 13): no profiles in this run"]
        else:
            out = self.args.out
            try:
                if out:
                    os.makedirs(out, exist_ok=True)
                report, _ = calibration.report_files(
                    profiles, *(os.path.join(out, "calibration." + ext) if out else None
                                for ext in ("md", "json", "ini")),
                    table_path=calibration.default_table())
                self.calibration_lines = [calibration.verdict_line(r) for r in report["models"]]
            except calibration.CalibrationError as e:  # an unwritable OUT
                self.calibration_lines = [f"calibration: {e}"]
            if skipped:
                self.calibration_lines.append(f"calibration: {len(skipped)} profile(s) "
                                              f"skipped; first: {skipped[0]}")
        for line in self.calibration_lines:
            log(line)

    # --- GEMM phase ------------------------------------------------------

    def gemm_row(self, model, shape, precision, impl, ms=None, err=None, bound=None,
                 status="", note="", joules=None, watts=None):
        r = dict(model=model, shape=list(shape), precision=precision, impl=impl, ms=ms,
                 tflops=gemm_check.tflops(*shape, ms) if ms else None, err=err,
                 bound=bound, status=status, note=note, joules=joules, watts=watts)
        self.gemm_rows.append(r)
        ms_s = f"{ms:.4f} ms" if ms is not None else "-"
        tf_s = f"{r['tflops']:.1f} TFLOP/s" if r["tflops"] else "-"
        err_s = f"{err:.2e}" if err is not None else "-"
        log(f"  {model:12s} {precision:5s} {impl:8s} {ms_s:>12s} {tf_s:>15s} {err_s:>9s} "
            f"{status} {note}")

    def gemm_model(self, m, tdev):
        """One GEMM model: regenerate B, check its digest, bind it; per
        variant (precision) cuBLAS first, then kiln."""
        a = self.args
        name = m["name"]
        shape = device_models.gemm_shape(m["kind"])
        M, K, N = shape
        if self.left() < 0:
            for v in m["variants"]:
                for impl in (["cuBLAS"] if tdev else []) + ["kiln"]:
                    self.gemm_row(name, shape, v["precision"], impl, status="SKIPPED",
                                  note="time budget spent")
            return
        work = os.path.join(a.work, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        t0 = time.time()
        b = device_models.gemm_weight(K, N)
        want = m["weights_sha256"]
        got = {"b": device_models.digest_array(b)}
        differ = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
        if differ:
            for v in m["variants"]:
                self.gemm_row(name, shape, v["precision"], "kiln", status="FAIL",
                              note="regenerated weights differ from the compiled ones "
                                   f"(first {differ[0]})")
            return
        weights = os.path.join(work, "weights")
        os.makedirs(weights)
        np.save(os.path.join(weights, "b.npy"), b)
        x = gemm_check.make_input(M, K)
        inputs = {"fp32": os.path.join(work, "a-fp32.npy")}
        np.save(inputs["fp32"], x)
        if any(v["precision"] == "bf16" for v in m["variants"]):
            inputs["bf16"] = os.path.join(work, "a-bf16.npy")
            gemm_check.save_bf16(inputs["bf16"], gemm_check.to_bf16_bits(x))
        log(f"{name}: {M}x{K}x{N}, b regenerated as compiled, input written; "
            f"{time.time() - t0:.1f} s")
        refs = {}
        for v in m["variants"]:
            precision = v["precision"]
            if self.left() < 0:
                for impl in (["cuBLAS"] if tdev else []) + ["kiln"]:
                    self.gemm_row(name, shape, precision, impl, status="SKIPPED",
                                  note="time budget spent")
                continue
            operands = "bf16" if precision == "bf16" else "fp32"
            if operands not in refs:
                t1 = time.time()
                refs.clear()  # one at a time (8192^2 in float64: 512 MiB)
                refs[operands] = gemm_check.Reference(x, b, precision)
                log(f"  reference ({operands} operands, {len(refs[operands].rows)} rows and "
                    f"the column sums, float64 on the CPU): {time.time() - t1:.1f} s")
            ref = refs[operands]
            if tdev:
                self.gemm_torch(name, shape, v, x, b, ref, tdev)
            self.gemm_kiln(name, shape, v, work, weights, inputs[operands], ref)

    def gemm_torch(self, name, shape, v, x, b, ref, tdev):
        precision = v["precision"]
        try:
            ms, c, note = gemm_check.torch_gemm(x, b, precision, tdev, self.args.gemm_runs)
            err, detail = ref.error(c, v["bound"])
            del c
        except Exception as e:  # report, keep the kiln row
            return self.gemm_row(name, shape, precision, "cuBLAS", status="FAIL",
                                 note=f"{type(e).__name__}: {e}"[:200])
        self.gemm_row(name, shape, precision, "cuBLAS", ms, err, v["bound"],
                      "ok" if err <= v["bound"] else "MISMATCH", f"{note}; {detail}")

    def gemm_kiln(self, name, shape, v, work, weights, input_file, ref):
        a = self.args
        precision = v["precision"]
        slug = v["name"].replace(" ", "-")
        cmd = [self.kiln_run, os.path.join(self.dir, "models", name, v["file"]),
               "--device", a.device, "-i", f"a={input_file}"]
        if v.get("stripped"):
            cmd += ["--weights", weights]
        out = os.path.join(work, "out-" + slug)
        shutil.rmtree(out, ignore_errors=True)
        # One run for the output (and a first time), then the bench.
        rc, text = run(cmd + ["-o", out, "--bench", "1", "--warmup", str(min(1, a.warmup))],
                       self.timeout(), os.path.join(work, f"run-{slug}.log"))
        found = PER_RUN.search(text)
        if rc != 0 or not found:
            why = "timed out" if rc is None else last_line(text)
            return self.gemm_row(name, shape, precision, "kiln", status="FAIL", note=why)
        first = float(found.group(1))
        files = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
        if len(files) != 1:
            return self.gemm_row(name, shape, precision, "kiln", status="FAIL",
                                 note=f"{len(files)} outputs, want 1")
        err, detail = ref.error(gemm_check.load_output(os.path.join(out, files[0])),
                                v["bound"])
        shutil.rmtree(out, ignore_errors=True)
        status = "ok" if err <= v["bound"] else "MISMATCH"
        ms, note, joules, watts = first, detail, None, None
        if a.gemm_runs > 1 and self.left() >= 0:
            # Warm-up runs for 1.5 s at the first run's pace (which was
            # likely at idle clocks, so 0.3-1.5 s: the clocks ramp up), then
            # at most --bench-seconds of timed runs (2 per --bench run).
            runs = min(a.gemm_runs, max(3, int(a.bench_seconds * 1e3 / max(2 * first, 1e-3))))
            warmup = a.warmup if a.device == "emu" else int(
                min(2000, max(a.warmup, math.ceil(1500.0 / max(first, 1e-3)))))
            rc, text = run(cmd + ["--bench", str(runs), "--warmup", str(warmup)]
                           + self.profile_args(name, v, work),
                           self.timeout(), os.path.join(work, f"bench-{slug}.log"))
            found = PER_RUN.search(text)
            if rc == 0 and found:
                ms = float(found.group(1))
                joules, watts = energy(text)
                note += f"; --bench {runs} --warmup {warmup}"
            else:
                note += "; bench " + ("timed out" if rc is None else "failed: " + last_line(text))
                note += "; time of one run"
        else:
            note += "; time of one run (--bench 1)"
        self.gemm_row(name, shape, precision, "kiln", ms, err, v["bound"], status, note,
                      joules, watts)
        self.gemm_rows[-1]["estimate_ms"] = v.get("estimate_ms")

    def gemm_table(self):
        cublas = {(r["model"], r["precision"]): r["ms"] for r in self.gemm_rows
                  if r["impl"] == "cuBLAS" and r["ms"]}
        peaks = self.peaks
        lines = ["| GEMM M×K×N | precision | impl | median ms | TFLOP/s | % of cuBLAS | "
                 "% of dense peak (TFLOP/s) | rel. error (bound) | energy J/run (W) | "
                 "emu estimate ms | status |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in self.gemm_rows:
            shape = "×".join(str(d) for d in r["shape"])
            ms = f"{r['ms']:.4f}" if r["ms"] is not None else "-"
            tf = (("-" if not r["tflops"] else f"{r['tflops']:.1f}" if r["tflops"] >= 10
                   else f"{r['tflops']:.3g}"))
            base = cublas.get((r["model"], r["precision"]))
            vs = (f"{100.0 * base / r['ms']:.1f}%" if r["impl"] != "cuBLAS" and base and r["ms"]
                  else "-")
            peak = peaks.get(r["precision"])
            of_peak = (f"{100.0 * r['tflops'] / peak:.3g}% ({peak:g})" if r["tflops"] and peak
                       else "-")
            err = f"{r['err']:.1e} ({r['bound']:.0e})" if r["err"] is not None else "-"
            status = r["status"] + (f": {r['note']}" if r["note"] else "")
            impl = "cuBLAS (torch.matmul)" if r["impl"] == "cuBLAS" else "kiln"
            precision = {"fp32": "fp32 (no TF32)"}.get(r["precision"], r["precision"])
            est = f"{r['estimate_ms']:.4f}" if r.get("estimate_ms") else "-"
            lines.append(f"| {shape} | {precision} | {impl} | {ms} | {tf} | {vs} | {of_peak} | "
                         f"{err} | {joules(r)} | {est} | {status} |")
        return "\n".join(lines)

    def torch_rows(self, m, onnx_path, rundir, tdev):
        a = self.args
        name = m["name"]
        if self.left() < 0:
            return self.row(name, "PyTorch", status="SKIPPED", note="time budget spent")
        import torch_baselines
        try:
            results = torch_baselines.baselines(m["torch"], onnx_path, rundir, tdev,
                                                a.runs, a.warmup)
        except Exception as e:  # report, keep the kiln rows
            results = [("eager", None, None, f"failed: {type(e).__name__}: {e}")]
        for variant, ms, err, note in results:
            bound = 1e-4 if variant.startswith("fp32") else 2e-2
            if err is not None:
                self.row(name, "PyTorch " + variant, ms, err, bound,
                         "ok" if err <= bound else "MISMATCH")
            else:
                self.row(name, "PyTorch " + variant, ms, status="FAIL" if ms is None else "",
                         note=note)

    def top1_row(self, model, variant, err=None, bound=None, stats=None, agree_bound=None,
                 status="", note=""):
        stats = stats or {}
        r = dict(model=model, variant=variant, err=err, bound=bound, top1=stats.get("top1"),
                 top1_bound=agree_bound, ref_classes=stats.get("classes"),
                 centred_top1=stats.get("centred_top1"),
                 centred_classes=stats.get("centred_classes"), status=status, note=note)
        self.top1_rows.append(r)
        err_s = f"{err:.2e}" if err is not None else "-"
        agree_s = f"{r['top1']:.3f}" if r["top1"] is not None else "-"
        log(f"  {model:18s} {variant:6s} {err_s:>9s} {agree_s:>6s} {status} {note}")

    def compile_model(self, m, tdev):
        """The compile phase: torch.compile(mode=--compile-mode) of the
        model's PyTorch baseline, bf16 (channels_last), in its own process
        group, killed when the phase's budget runs out (compiling with
        max-autotune takes minutes). Reuses the benchmark phase's
        regenerated model and reference when they are there."""
        a = self.args
        name, variant = m["name"], f"PyTorch bf16 torch.compile {a.compile_mode}"
        if not tdev:
            return self.row(name, variant, status="SKIPPED", note="no PyTorch device")
        work = os.path.join(a.work, name)
        onnx_path, rundir = os.path.join(work, "model.onnx"), os.path.join(work, "run")
        if not (os.path.exists(onnx_path) and os.path.isdir(os.path.join(rundir, "reference"))):
            prepared = self.top1_prepare(m, keep_onnx=True)
            if len(prepared) == 2:
                return self.row(name, variant, status=prepared[0], note=prepared[1])
        if self.left() < 0:
            return self.row(name, variant, status="SKIPPED", note="time budget spent")
        cmd = [sys.executable, os.path.join(HERE, "torch_baselines.py"), m["torch"], onnx_path,
               rundir, "--device", tdev, "--runs", str(a.runs), "--warmup", str(a.warmup),
               "--compile", a.compile_mode]
        t0 = time.time()
        rc, text = run_group(cmd, max(10.0, self.left()), os.path.join(work, "compile.log"))
        results = [json.loads(line[len("RESULT "):]) for line in text.splitlines()
                   if line.startswith("RESULT ")]
        if rc is None:
            return self.row(name, variant, status="SKIPPED",
                            note=f"compile not done in the phase's budget ({time.time() - t0:.0f} s)")
        if rc != 0 or not results:
            return self.row(name, variant, status="FAIL", note=last_line(text))
        for r in results:
            err = r.get("err")
            self.row(name, "PyTorch " + r["variant"], r.get("ms"), err, 2e-2 if err is not None else None,
                     ("ok" if err <= 2e-2 else "MISMATCH") if err is not None else "",
                     r.get("note", ""))

    def top1_prepare(self, m, keep_onnx=False):
        """Regenerates model m, checks and exports its weights and makes the
        reference: (work, rundir, weights) or (status, note) when it cannot
        run. Runs on a worker thread while the previous model's artifacts
        run on the GPU (all of it is CPU work)."""
        name = m["name"]
        if self.left() < 0:
            return "SKIPPED", "time budget spent"
        try:
            work = os.path.join(self.args.work, name)
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            onnx_path = os.path.join(work, "model.onnx")
            t0 = time.time()
            device_models.make(m["kind"], m["batch"], onnx_path,
                               os.path.join(self.dir, "light"))
            digest = device_models.digest(onnx_path)
            want = m["weights_sha256"]
            differ = sorted(k for k in set(want) | set(digest) if want.get(k) != digest.get(k))
            if differ:
                return "FAIL", (f"regenerated weights differ from the compiled ones: "
                                f"{len(differ)} of {len(want)} initializers (first {differ[0]})")
            weights = os.path.join(work, "weights")
            rc, text = run([sys.executable, os.path.join(HERE, "export_initializers.py"),
                            onnx_path, weights], 600)
            if rc != 0:
                return "FAIL", "export_initializers.py: " + last_line(text)
            rundir = os.path.join(work, "run")
            rc, text = run([sys.executable, os.path.join(HERE, "make_reference.py"), onnx_path,
                            rundir, "--provider", "auto"],
                           max(60.0, min(900.0, self.left() + 60.0)))
            if rc != 0:
                return "FAIL", "reference " + ("timed out" if rc is None
                                               else "failed: " + last_line(text))
            if not keep_onnx:
                os.remove(onnx_path)  # VGG-19 at batch 200: 550 MB
            log(f"{name}: {len(digest)} initializers as compiled; {last_line(text)}; "
                f"{time.time() - t0:.1f} s")
            return work, rundir, weights
        except (Exception, SystemExit) as e:  # make() exits on a bad model
            return "FAIL", f"regenerating the model: {type(e).__name__}: {e}"

    def top1_phase(self, models):
        """Each model's artifacts once; the next model is prepared meanwhile."""
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(self.top1_prepare, models[0]) if models else None
            for i, m in enumerate(models):
                prepared = pending.result()
                pending = (pool.submit(self.top1_prepare, models[i + 1])
                           if i + 1 < len(models) else None)
                if len(prepared) == 2:
                    for v in m["variants"]:
                        self.top1_row(m["name"], v["name"], status=prepared[0],
                                      note=prepared[1])
                    continue
                work, rundir, weights = prepared
                for v in m["variants"]:
                    self.top1_variant(m, v, work, rundir, weights,
                                      os.path.join(rundir, "reference"))
                shutil.rmtree(weights, ignore_errors=True)

    def top1_variant(self, m, v, work, rundir, weights, ref_dir):
        name, vname = m["name"], v["name"]
        if self.left() < 0:
            return self.top1_row(name, vname, status="SKIPPED", note="time budget spent")
        cmd = self.kiln_run_command(name, v, weights, rundir)
        out = os.path.join(work, "out-" + vname.replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        rc, text = run(cmd + ["-o", out], self.timeout(),
                       os.path.join(work, f"top1-{vname.replace(' ', '-')}.log"))
        if rc != 0:
            return self.top1_row(name, vname, status="FAIL",
                                 note="timed out" if rc is None else last_line(text))
        import compare
        result, stats, problem = compare.compare(ref_dir, out, top1=True,
                                                 bound=v["bound"])
        if problem or not stats:
            return self.top1_row(name, vname, status="FAIL", note=problem or "no outputs")
        err, ratio = compare.figures(result)
        note = "" if err != float("inf") else "non-finite output"
        if err != float("inf") and ratio > 1.0:
            note = f"an element off: {ratio:.2f} of its bound"
        ok = result.ok and stats["top1"] >= v["top1_bound"]
        self.top1_row(name, vname, err, v["bound"], stats, v["top1_bound"],
                      "ok" if ok else "MISMATCH", note)

    def top1_table(self):
        lines = ["| model | precision | rel. error (bound) | top-1 agreement (bound) | "
                 "reference classes | centred top-1 agreement | centred classes | status |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in self.top1_rows:
            err = f"{r['err']:.1e} ({r['bound']:.0e})" if r["err"] is not None else "-"
            agree = (f"{r['top1']:.3f} ({r['top1_bound']:g})" if r["top1"] is not None
                     else "-")
            cagree = f"{r['centred_top1']:.3f}" if r["centred_top1"] is not None else "-"
            status = r["status"] + (f": {r['note']}" if r["note"] else "")
            lines.append(f"| {r['model']} | {r['variant']} | {err} | {agree} | "
                         f"{'-' if r['ref_classes'] is None else r['ref_classes']} | {cagree} | "
                         f"{'-' if r['centred_classes'] is None else r['centred_classes']} | "
                         f"{status} |")
        return "\n".join(lines)

    def table(self):
        base = {}
        for r in self.rows:
            if r["variant"] == "PyTorch fp32 eager" and r["ms"]:
                base[r["model"]] = r["ms"]
        lines = ["| model | variant | median ms | rel. error (bound) | status | "
                 "speed-up vs PyTorch fp32 eager | energy J/run (W) |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.rows:
            ms = f"{r['ms']:.3f}" if r["ms"] is not None else "-"
            err = (f"{r['err']:.1e} ({r['bound']:.0e})" if r["err"] is not None
                   and r["bound"] is not None else "-")
            speed = (f"{base[r['model']] / r['ms']:.2f}x"
                     if r["ms"] and r["model"] in base else "-")
            status = r["status"] + (f": {r['note']}" if r["note"] else "")
            lines.append(f"| {r['model']} | {r['variant']} | {ms} | {err} | {status} | {speed} | "
                         f"{joules(r)} |")
        return "\n".join(lines)


PHASES = ["gemm", "bench", "top1", "compile"]
DEFAULT_PHASES = ["gemm", "bench", "top1"]  # "all"; compile only when asked for


def phases_arg(text):
    names = DEFAULT_PHASES if text == "all" else [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in PHASES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown phase {', '.join(bad) or repr(text)} (all, or a comma list of "
            f"{', '.join(PHASES)})")
    return [p for p in PHASES if p in names]  # always in this order


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(HERE, ".."))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", type=int, default=20, help="bench runs (0: no bench)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--gemm-runs", type=int, default=50,
                    help="timed runs of each GEMM, kiln and cuBLAS (1: the first run's time)")
    ap.add_argument("--torch", choices=["auto", "cpu", "no"], default="auto")
    ap.add_argument("--work", default="/tmp/kiln-device-check")
    ap.add_argument("--gemm-budget", type=float, default=75.0,
                    help="seconds of the GEMM phase (counted from its start)")
    ap.add_argument("--budget", type=float, default=150.0,
                    help="seconds of the benchmark phase (counted from its start)")
    ap.add_argument("--bench-seconds", type=float, default=20.0,
                    help="fewer bench runs for artifacts slower than this allows")
    ap.add_argument("--top1-budget", type=float, default=90.0,
                    help="seconds of the top-1 phase (counted from its start)")
    ap.add_argument("--compile-budget", type=float, default=300.0,
                    help="seconds of the torch.compile phase (counted from its start)")
    ap.add_argument("--compile-mode", default="max-autotune",
                    help="torch.compile mode of the compile phase")
    ap.add_argument("--phase", type=phases_arg, default=list(DEFAULT_PHASES),
                    help="all (gemm,bench,top1: the default) or a comma list of "
                         "gemm, bench, top1, compile (run in that order)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds for one kiln-run")
    ap.add_argument("--out", default=os.environ.get("OUT", ""))
    ap.add_argument("models", nargs="*", help="only these models of the manifest")
    args = ap.parse_args()
    check = Check(args)
    man = check.manifest
    header = [f"kiln {man.get('commit', '?')} (prepared {man.get('date', '?')}, "
              f"{'stripped' if man.get('stripped') else 'full'} artifacts, set {man.get('set')})",
              f"device {args.device}: {gpu_name()}",
              versions()]
    tdev, tnote = torch_device(args.torch, args.device)
    header.append(tnote)
    header.append(f"kiln-run --bench {args.runs} --warmup {args.warmup}; "
                  f"PyTorch: {args.warmup} warm-up runs, median of {args.runs}; "
                  f"GEMMs: {args.gemm_runs} timed runs each after ~0.5 s of warm-up")
    header.append("phases " + ", ".join(
        f"{p} ({getattr(args, {'bench': 'budget'}.get(p, p + '_budget')):g} s)"
        for p in args.phase))
    for line in header:
        log(line)
    os.makedirs(args.work, exist_ok=True)
    models = [m for m in man["models"] if not args.models or m["name"] in args.models]
    by_phase = dict(gemm=[m for m in models if m.get("phase") == "gemm"],
                    bench=[m for m in models if m.get("phase", "bench") == "bench"],
                    top1=[m for m in models if m.get("phase") == "top1"],
                    compile=[m for m in models if m.get("compile")])
    budgets = dict(gemm=args.gemm_budget, bench=args.budget, top1=args.top1_budget,
                   compile=args.compile_budget)
    start = time.time()
    times = {}

    def report(todo):
        """The tables; in OUT too, after every phase, so that a command
        stopped at the device tool's limit still leaves the phases done."""
        parts = []
        if check.gemm_rows:
            parts.append("GEMM phase: C = A B, A [M, K] the input, B [K, N] a bound weight; "
                         "kiln-run --bench vs torch.matmul (cuBLAS) on the same operands; "
                         "rel. error over 256 sampled rows and the column sums against "
                         "float64 on the CPU\n\n" + check.gemm_table()
                         + f"\n\n({times.get('gemm', 0):.0f} s)")
        if check.rows:
            parts.append(check.table() + f"\n\n({times.get('bench', 0) + times.get('compile', 0):.0f} s)")
        if check.top1_rows:
            parts.append("Top-1 phase: one seeded N(0, 1) batch, onnxruntime fp32 reference, "
                         "one kiln-run per artifact\n\n" + check.top1_table()
                         + f"\n\n({times.get('top1', 0):.0f} s)")
        if check.calibration_lines:
            parts.append("\n".join(check.calibration_lines))
        table = "\n\n".join(parts)
        total = time.time() - start
        text = ("\n".join(header) + "\n\n" + table + f"\n\n({total:.0f} s in all"
                + (f"; INCOMPLETE: still to run: {', '.join(todo)}" if todo else "") + ")\n")
        if not todo:
            log("\n" + table)
            log(f"\n({total:.0f} s in all)")
        if not args.out:
            return
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(dict(header=header, gemm_rows=check.gemm_rows, rows=check.rows,
                           top1_rows=check.top1_rows, seconds=total,
                           phase_seconds=times, complete=not todo, still_to_run=todo),
                      f, indent=1)
        # kiln-run's own output per artifact (per-kernel times of --bench),
        # and the measured profiles and traces.
        import tarfile
        with tarfile.open(os.path.join(args.out, "kiln-run-logs.tar.gz"), "w:gz") as tar:
            for m in models:
                work = os.path.join(args.work, m["name"])
                for f in sorted(os.listdir(work)) if os.path.isdir(work) else []:
                    if f.endswith(".log") or (f.endswith(".json") and
                                              f.startswith(("profile-", "trace-"))):
                        tar.add(os.path.join(work, f), arcname=f"{m['name']}/{f}")

    todo = [p for p in args.phase if by_phase[p]]
    while todo:
        phase = todo.pop(0)
        log(f"{phase} phase: {len(by_phase[phase])} models, budget {budgets[phase]:g} s")
        check.start, check.budget = time.time(), budgets[phase]
        for m in (by_phase[phase] if phase != "top1" else []):
            {"gemm": check.gemm_model, "bench": check.model,
             "compile": check.compile_model}[phase](m, tdev)
        if phase == "top1":
            check.top1_phase(by_phase["top1"])
        times[phase] = time.time() - check.start
        if phase in ("gemm", "bench"):
            check.calibrate(models, start)
        report(todo)
    if not check.rows and not check.gemm_rows and not check.top1_rows:
        report([])
    bad = [r for r in check.gemm_rows + check.rows + check.top1_rows
           if r["status"] in ("FAIL", "MISMATCH")]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
