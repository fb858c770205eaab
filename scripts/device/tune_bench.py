#!/usr/bin/env python3
"""Autotuning on the GPU (issue 11): tuning time and tuned vs heuristic.

The GPU machine has no LLVM, so kilnc cannot tune there itself; the jobs
travel instead (docs/architecture.md, "Autotuning"):

  tune_bench.py prepare [--kilnc K] [--worker W] [--out DIR] [--dry-run]
      (development machine) ResNet-50 bf16 at batch 32 (scripts/device/
      device_models.py; --dry-run: a two-convolution model at batch 1 and
      2 candidates per problem) compiled with `kilnc --tune --tune-export
      DIR/jobs`: one job file per distinct contraction problem with its
      candidates' PTX (8 per problem), and DIR/heuristic.kiln (the
      heuristic's configs). Copies kiln-tune-worker into DIR/bin. If
      DIR/results/ holds the .out files of a run (below), it also imports
      them (`kilnc --tune-import`) into DIR/cache.json and compiles
      DIR/tuned.kiln from the cache, for the next run to time. The
      artifacts are compiled with --strip-weights and model.onnx is
      removed (ResNet-50's random weights are ~100 MB that the device tool
      cannot carry); run regenerates the model with the portable generator
      and binds its initializers with kiln-run --weights.
  tune_bench.py run [--dir DIR] [--device cuda|emu] [--kiln-run R] [--out O]
      (GPU machine) runs kiln-tune-worker on every job (on emu, a copy of
      the job with `device emu`), one process per job as kilnc --tune does;
      the tuning time is the workers' wall time (issue: at most 60 s for
      ResNet-50). Prints per problem the heuristic's and the winner's time
      and their sums, then, for each artifact present, its latency:
      kiln-run --bench (cuda: the median of the kernels' measured times;
      emu: the performance model's estimate). Writes O/tune.txt,
      O/tune.json and O/tune-results/*.out (copy them to DIR/results/ and
      prepare again for tuned.kiln).

Exit status 1 when a job's reference fails or an artifact does not run.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def small_model(path):
    """Two NHWC-able convolutions and a Gemm: three contraction problems."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(1)

    def w(name, *shape):
        return numpy_helper.from_array(
            (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32), name)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["c2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "w3"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "tune_small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [w("w1", 32, 16, 3, 3), w("w2", 32, 32, 1, 1), w("w3", 10, 32)])
    import onnx
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def kilnc(args, model, *flags):
    cmd = [args.kilnc, model, "--precision=bf16", *flags]
    started = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"tune_bench.py: {' '.join(cmd)} failed:\n{p.stderr.strip()}")
    return time.time() - started


def prepare(args):
    os.makedirs(args.out, exist_ok=True)
    model = os.path.join(args.out, "model.onnx")
    if not os.path.exists(model):
        make_model({"model": "tune-small" if args.dry_run else "resnet50"}, model)
    jobs = os.path.join(args.out, "jobs")
    shutil.rmtree(jobs, ignore_errors=True)
    candidates = "2" if args.dry_run else "8"
    # The artifacts travel without weights (ResNet-50's are ~100 MB of
    # incompressible random bytes); run regenerates the model and binds them.
    seconds = kilnc(args, model, "--tune", "--tune-device=cuda", "--tune-export", jobs,
                    f"--tune-max-candidates={candidates}", "--strip-weights", "-o",
                    os.path.join(args.out, "heuristic.kiln"))
    os.makedirs(os.path.join(args.out, "bin"), exist_ok=True)
    shutil.copy(args.worker, os.path.join(args.out, "bin", "kiln-tune-worker"))
    count = len(glob.glob(os.path.join(jobs, "*.job")))
    print(f"tune_bench: prepared {count} tuning jobs ({candidates} candidates each) "
          f"in {seconds:.1f} s of compiling")
    results = os.path.join(args.out, "results")
    if glob.glob(os.path.join(results, "*.out")):
        for out in glob.glob(os.path.join(results, "*.out")):
            shutil.copy(out, jobs)
        kilnc(args, model, "--tune-import", jobs, "--tune-cache",
              os.path.join(args.out, "cache.json"), "--strip-weights", "-o",
              os.path.join(args.out, "tuned.kiln"))
        print("tune_bench: imported the results into cache.json; tuned.kiln built")
    if not args.dry_run:
        os.remove(model)  # regenerated by prepare and run alike (portable generator)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"model": "tune-small" if args.dry_run else "resnet50-bf16-b32",
                   "jobs": count, "candidates": int(candidates)}, f, indent=1)
    return 0


def make_model(manifest, path, light=None):
    """Regenerates the manifest's model (the same bits as prepare's)."""
    if manifest["model"] == "tune-small":
        small_model(path)
    else:
        cmd = [sys.executable, os.path.join(HERE, "device_models.py"), "make", "resnet50",
               "32", path]
        subprocess.run(cmd + (["--light", light] if light else []), check=True)


def bind_weights(args, manifest, work):
    """The weights directory for kiln-run --weights: the regenerated
    model's initializers as .npy files (export_initializers.py)."""
    model = os.path.join(work, "model.onnx")
    light = os.path.join(args.dir, "..", "light")
    make_model(manifest, model, light if os.path.isdir(light) else None)
    weights = os.path.join(work, "weights")
    subprocess.run([sys.executable, os.path.join(HERE, "export_initializers.py"), model,
                    weights], check=True, stdout=subprocess.DEVNULL)
    os.remove(model)
    return weights


def read_lines(path):
    rows = []
    with open(path) as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def latency_us(args, artifact, out, weights):
    profile = os.path.join(out, os.path.basename(artifact) + ".profile.json")
    cmd = [args.kiln_run, artifact, "--device", args.device, "--random-inputs",
           "--weights", weights, "--profile-json", profile]
    if args.device.startswith("cuda"):
        cmd += ["--bench", str(args.runs)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    with open(profile) as f:
        kernels = json.load(f)["kernels"]
    key = "measured_us" if all(k.get("measured_us") is not None for k in kernels) \
        else "estimated_us"
    return sum(k.get(key) or 0 for k in kernels), key.split("_")[0]


def run(args):
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    out = args.out or os.environ.get("OUT") or args.dir
    results = os.path.join(out, "tune-results")
    os.makedirs(results, exist_ok=True)
    worker = args.worker or os.path.join(args.dir, "bin", "kiln-tune-worker")
    rows, failed, wall = [], False, 0.0
    for job in sorted(glob.glob(os.path.join(args.dir, "jobs", "*.job"))):
        name = os.path.basename(job)[:-4]
        with open(job) as f:
            text = f.read()
        if args.device == "emu":
            text = text.replace("\ndevice cuda\n", "\ndevice emu\n")
        # Beside the original: its PTX paths are relative to it.
        local = os.path.join(os.path.dirname(job), f".{name}.{args.device}.job")
        with open(local, "w") as f:
            f.write(text)
        started = time.time()
        with open(os.path.join(results, name + ".out"), "w") as f:
            p = subprocess.run([worker, local], stdout=f, stderr=subprocess.PIPE,
                               text=True, timeout=600)
        wall += time.time() - started
        lines = read_lines(os.path.join(results, name + ".out"))
        times = {r["candidate"]: r["us"] for r in lines if r.get("ok")}
        rejected = [r for r in lines if r.get("ok") is False]
        row = {"job": name, "rc": p.returncode, "times_us": times,
               "rejected": [r.get("error") for r in rejected]}
        if 0 not in times:
            failed = True
            row["error"] = (p.stderr.strip().splitlines() or
                            [r.get("error", "?") for r in rejected] or ["?"])[-1]
        rows.append(row)
    heuristic = sum(r["times_us"].get(0, 0) for r in rows)
    best = sum(min(r["times_us"].values()) for r in rows if r["times_us"])
    lines = [f"tune_bench: {manifest['model']} on {args.device}, {len(rows)} problems, "
             f"up to {manifest['candidates']} candidates each"
             + (" [DRY RUN on emu: times are the performance model's]"
                if args.device == "emu" else ""),
             f"  tuning time: {wall:.1f} s of worker wall time (issue 11: at most 60 s)"]
    for r in rows:
        if "error" in r:
            lines.append(f"  {r['job']}: FAILED: {r['error']}")
            continue
        t = r["times_us"]
        winner = min(t, key=t.get)
        lines.append(f"  {r['job']}: heuristic {t[0]:.1f} us, best {t[winner]:.1f} us "
                     f"(candidate {winner} of {len(t)}"
                     + (f", {len(r['rejected'])} rejected" if r["rejected"] else "") + ")")
    lines.append(f"  contractions, summed per problem: heuristic {heuristic:.1f} us, "
                 f"tuned {best:.1f} us"
                 + (f" ({heuristic / best:.2f}x)" if best else ""))
    work = tempfile.mkdtemp(prefix="kiln-tune-bench-")
    weights = bind_weights(args, manifest, work)
    for name in ("heuristic", "tuned"):
        artifact = os.path.join(args.dir, name + ".kiln")
        if not os.path.exists(artifact):
            lines.append(f"  {name}.kiln: not prepared (run prepare with the "
                         "results to build it)" if name == "tuned" else "")
            continue
        us, source = latency_us(args, artifact, out, weights)
        if us is None:
            failed = True
            lines.append(f"  {name}.kiln: FAILED: {source}")
        else:
            lines.append(f"  {name}.kiln latency: {us / 1000:.3f} ms ({source})")
    shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(line for line in lines if line)
    print(text)
    with open(os.path.join(out, "tune.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "tune.json"), "w") as f:
        json.dump({"device": args.device, "wall_s": wall, "rows": rows}, f, indent=1)
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--kilnc", default=os.path.join(ROOT, "build", "bin", "kilnc"))
    pp.add_argument("--worker", default=os.path.join(ROOT, "build", "bin", "kiln-tune-worker"))
    pp.add_argument("--out", default=os.path.join(ROOT, "device-check", "tune"))
    pp.add_argument("--dry-run", action="store_true")
    pr = sub.add_parser("run")
    pr.add_argument("--dir", default=os.path.join(ROOT, "device-check", "tune"))
    pr.add_argument("--device", default="cuda")
    pr.add_argument("--kiln-run", default=os.path.join(ROOT, "device-check", "bin", "kiln-run"))
    pr.add_argument("--worker")
    pr.add_argument("--runs", type=int, default=20)
    pr.add_argument("--out")
    a = p.parse_args()
    if a.mode == "run" and not os.path.exists(os.path.join(a.dir, "manifest.json")):
        print(f"tune_bench.py: {a.dir}/manifest.json missing: run "
              "scripts/device/prepare.sh first", file=sys.stderr)
        return 1
    return prepare(a) if a.mode == "prepare" else run(a)


if __name__ == "__main__":
    sys.exit(main())
