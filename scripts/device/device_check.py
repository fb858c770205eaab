#!/usr/bin/env python3
"""Runs the artifacts that scripts/device/prepare.sh packed, on the GPU.

Usage: device_check.py [--dir device-check] [--device cuda|emu] [--runs N]
                       [--warmup N] [--torch auto|cpu|no] [--work DIR]
                       [--budget SECONDS] [--bench-seconds S]
                       [--top1-budget SECONDS] [--phase all|bench|top1]
                       [--timeout SECONDS] [--out DIR] [MODEL...]

Called by scripts/device-check.sh; see there and docs/benchmarks.md. For each
model in DIR/manifest.json:

1. regenerate its ONNX model with the portable generator
   (device_models.py), and check every initializer against the SHA-256 that
   prepare.sh recorded from the model the artifacts were compiled from (a
   difference stops that model: its artifacts would run with other weights);
2. write the initializers as .npy files (export_initializers.py) for
   `kiln-run --weights`, a seeded input and the onnxruntime fp32 reference
   (make_reference.py --provider auto);
3. per artifact: kiln-run once with -o, relative error of the output norm
   against the reference (compare.py; bound fp32 1e-4, bf16 2e-2), then
   kiln-run --bench N for the median time per run;
4. for the benchmark models, before the kiln runs, the PyTorch eager
   baselines (torch_baselines.py) on the same input.

Then the top-1 phase (the manifest's models with phase "top1": the nine
light classifiers at batch 200, bf16/fp16/tf32), with its own time budget
(--top1-budget, counted from its start, so it cannot starve the benchmarks
before it): steps 1 and 2 as above (one seeded N(0, 1) input batch), then
per artifact one kiln-run with -o: the relative error of the output norm
(bounds bf16 2e-2, fp16 and tf32 5e-3) and the fraction of the samples whose
top-1 class (argmax over the output's non-batch dimensions) is the
reference's (bound 0.99). It also reports how many distinct classes the
reference picks over the batch (a check where every sample gets the same
class says little), and the same agreement on the batch-centred outputs
(compare.py --top1). The next model is regenerated and its reference made
(CPU work) while the current one's artifacts run.

Ends with two tables (benchmarks; top-1), also written to OUT/table.txt with
OUT/results.json and OUT/kiln-run-logs.tar.gz (kiln-run's output per
artifact: per-kernel times) when --out or $OUT is set.
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import device_models  # noqa: E402


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

    def left(self):
        return self.budget - (time.time() - self.start)

    def timeout(self):
        """One kiln-run's limit: --timeout, cut to what is left of the
        budget (plus 30 s), so hanging kernels cannot eat the lease."""
        return max(10.0, min(self.args.timeout, self.left() + 30.0))

    def row(self, model, variant, ms=None, err=None, bound=None, status="", note=""):
        r = dict(model=model, variant=variant, ms=ms, err=err, bound=bound,
                 status=status, note=note)
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

    def kiln_variant(self, m, v, work, rundir, weights):
        a = self.args
        name = m["name"]
        base = self.kiln_run_command(name, v, weights, rundir)
        out = os.path.join(work, "out-" + v["name"].replace(" ", "-"))
        shutil.rmtree(out, ignore_errors=True)
        if self.left() < 0:
            return self.row(name, "kiln " + v["name"], status="SKIPPED", note="time budget spent")
        t0 = time.time()
        rc, text = run(base + ["-o", out], self.timeout(),
                       os.path.join(work, f"run-{v['name'].replace(' ', '-')}.log"))
        once = time.time() - t0  # one run plus loading: an upper bound
        if rc != 0:
            why = "timed out" if rc is None else last_line(text)
            return self.row(name, "kiln " + v["name"], status="FAIL", note=why)
        rc, text = run([sys.executable, os.path.join(HERE, "compare.py"),
                        os.path.join(rundir, "reference"), out], 120)
        err = float(text.strip().splitlines()[-1]) if rc == 0 else float("inf")
        status = "ok" if err <= v["bound"] else "MISMATCH"
        ms, note = None, ""
        if not v.get("bench", True) or a.runs <= 0:
            note = "not benchmarked"
        elif self.left() < 0:
            note = "bench skipped: time budget spent"
        else:
            # --bench N runs warmup + 2N times (N timed whole, N kernel by
            # kernel); slow artifacts get fewer runs, so one bench takes
            # about --bench-seconds at most.
            runs = min(a.runs, max(3, int(a.bench_seconds / max(2 * once, 1e-3))))
            warmup = min(a.warmup, runs)
            rc, text = run(base + ["--bench", str(runs), "--warmup", str(warmup)],
                           self.timeout(), os.path.join(work, f"bench-{v['name'].replace(' ', '-')}.log"))
            found = re.search(r"per run: median ([0-9.]+) ms", text)
            if rc == 0 and found:
                ms = float(found.group(1))
                if runs < a.runs:
                    note = f"median of {runs} runs (slow)"
            else:
                note = "bench " + ("timed out" if rc is None else "failed: " + last_line(text))
        self.row(name, "kiln " + v["name"], ms, err, v["bound"], status, note)

    def model(self, m, tdev):
        a = self.args
        name = m["name"]
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

    def top1_prepare(self, m):
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
        err, stats, problem = compare.compare(ref_dir, out, top1=True)
        if problem or not stats:
            return self.top1_row(name, vname, status="FAIL", note=problem or "no outputs")
        note = "" if err != float("inf") else "non-finite output"
        ok = err <= v["bound"] and stats["top1"] >= v["top1_bound"]
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
                 "speed-up vs PyTorch fp32 eager |",
                 "|---|---|---|---|---|---|"]
        for r in self.rows:
            ms = f"{r['ms']:.3f}" if r["ms"] is not None else "-"
            err = (f"{r['err']:.1e} ({r['bound']:.0e})" if r["err"] is not None
                   and r["bound"] is not None else "-")
            speed = (f"{base[r['model']] / r['ms']:.2f}x"
                     if r["ms"] and r["model"] in base else "-")
            status = r["status"] + (f": {r['note']}" if r["note"] else "")
            lines.append(f"| {r['model']} | {r['variant']} | {ms} | {err} | {status} | {speed} |")
        return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(HERE, ".."))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", type=int, default=20, help="bench runs (0: no bench)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--torch", choices=["auto", "cpu", "no"], default="auto")
    ap.add_argument("--work", default="/tmp/kiln-device-check")
    ap.add_argument("--budget", type=float, default=240.0,
                    help="seconds after which remaining runs are skipped")
    ap.add_argument("--bench-seconds", type=float, default=30.0,
                    help="fewer bench runs for artifacts slower than this allows")
    ap.add_argument("--top1-budget", type=float, default=150.0,
                    help="seconds of the top-1 phase (counted from its start)")
    ap.add_argument("--phase", choices=["all", "bench", "top1"], default="all",
                    help="run only the benchmarks or only the top-1 phase")
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
                  f"PyTorch: {args.warmup} warm-up runs, median of {args.runs}")
    for line in header:
        log(line)
    os.makedirs(args.work, exist_ok=True)
    models = [m for m in man["models"] if not args.models or m["name"] in args.models]
    bench = [m for m in models if m.get("phase", "bench") == "bench"]
    top1 = [m for m in models if m.get("phase") == "top1"]
    start = check.start
    times = dict(bench=0.0, top1=0.0)

    def report(final):
        """The tables; in OUT too (after the benchmarks as well, so that a
        command stopped at the device tool's limit still leaves them)."""
        table = check.table() + f"\n\n({times['bench']:.0f} s)" if check.rows else ""
        if top1 and args.phase != "bench" and (final or check.top1_rows):
            table += ("\n\n" if table else "") + (
                "Top-1 phase: one seeded N(0, 1) batch, onnxruntime fp32 reference, "
                "one kiln-run per artifact\n\n" + check.top1_table()
                + f"\n\n({times['top1']:.0f} s)")
        total = time.time() - start
        text = ("\n".join(header) + "\n\n" + table + f"\n\n({total:.0f} s in all"
                + ("" if final else "; INCOMPLETE: the top-1 phase is still to run") + ")\n")
        if final:
            log("\n" + table)
            log(f"\n({total:.0f} s in all)")
        if not args.out:
            return
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "table.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(dict(header=header, rows=check.rows, top1_rows=check.top1_rows,
                           seconds=total, bench_seconds=times["bench"],
                           top1_seconds=times["top1"], complete=final), f, indent=1)
        # kiln-run's own output per artifact (per-kernel times of --bench).
        import tarfile
        with tarfile.open(os.path.join(args.out, "kiln-run-logs.tar.gz"), "w:gz") as tar:
            for m in models:
                work = os.path.join(args.work, m["name"])
                for f in sorted(os.listdir(work)) if os.path.isdir(work) else []:
                    if f.endswith(".log"):
                        tar.add(os.path.join(work, f), arcname=f"{m['name']}/{f}")

    if args.phase in ("all", "bench"):
        for m in bench:
            check.model(m, tdev)
    times["bench"] = time.time() - start
    if args.phase in ("all", "top1") and top1:
        report(final=False)
        log(f"top-1 phase: {len(top1)} models, budget {args.top1_budget:g} s")
        check.start, check.budget = time.time(), args.top1_budget
        check.top1_phase(top1)
        times["top1"] = time.time() - check.start
    report(final=True)
    bad = [r for r in check.rows + check.top1_rows if r["status"] in ("FAIL", "MISMATCH")]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
