#!/usr/bin/env python3
"""The product surface on a GPU: the main example and kiln-run's bench output.

Two modes:
  surface_check.py --prepare --build BUILD [--out device-check]
      here (with LLVM): trains the digits CNN (examples/digits/make_model.py),
      compiles it, and packs into OUT/surface/ the artifact, 32 held-out
      images, their labels and onnxruntime's fp32 probabilities, and copies
      this script to OUT/scripts/. scripts/device/prepare.sh calls it.
  surface_check.py --dir device-check [--device cuda|emu] [...]
      on the lent machine (no LLVM; called by scripts/device-check.sh,
      which passes its own options: the unknown ones are ignored): with the
      packed kiln-run,
      1. --version names the build;
      2. the digits artifact on the device: probabilities within 1e-4 of
         onnxruntime's largest value (fp32 both sides: summation order
         only, about 1e-6 for a 256-term dot product), top-1 equal to
         onnxruntime's on all 32 images;
      3. --bench 200 --json parses, inferences_per_s equals the runs over
         their summed time, and the text form prints the same throughput
         line;
      4. exit status 1 for a truncated artifact.
      Prints a table (also OUT/surface.txt when $OUT is set); exits 1 on a
      failed check.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE_NUMERICS = os.path.dirname(os.path.abspath(__file__))
# scripts/numerics.py: next to this file in the device pack, one folder up
# in the source tree.
sys.path[:0] = [HERE_NUMERICS, os.path.join(HERE_NUMERICS, "..")]
import numerics  # noqa: E402

BOUND = 1e-4  # fp32 (scripts/numerics.py's rule)


def prepare(args):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(os.path.abspath(args.out), "surface")
    os.makedirs(out, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(root, "examples/digits/make_model.py"),
                    out], check=True, stdout=subprocess.DEVNULL)
    model = os.path.join(out, "digits_cnn.onnx")
    subprocess.run([os.path.join(args.build, "bin", "kilnc"), model, "-o",
                    os.path.join(out, "digits_cnn.kiln"), "--shape=image=32x1x8x8"],
                   check=True)
    session = numerics.ort_session(model)
    images = np.load(os.path.join(out, "images.npy"))
    np.save(os.path.join(out, "reference.npy"), session.run(None, {"image": images})[0])
    for sub in ("scripts", "bin"):
        os.makedirs(os.path.join(args.out, sub), exist_ok=True)
    shutil.copy2(os.path.abspath(__file__), os.path.join(args.out, "scripts"))
    # Its comparison rule travels with it (prepare.py packs it too).
    shutil.copy2(os.path.join(root, "scripts", "numerics.py"),
                 os.path.join(args.out, "scripts"))
    if not os.path.exists(os.path.join(args.out, "bin", "kiln-run")):  # prepare.py copies it too
        shutil.copy2(os.path.join(args.build, "bin", "kiln-run"), os.path.join(args.out, "bin"))
    print(f"prepared surface: {out}")


def check(args):
    surface = os.path.join(args.dir, "surface")
    kiln_run = os.path.join(args.dir, "bin", "kiln-run")
    artifact = os.path.join(surface, "digits_cnn.kiln")
    work = os.path.join(os.environ.get("OUT") or surface, "surface-work")
    os.makedirs(work, exist_ok=True)
    rows, failed = [], False

    def record(name, ok, detail):
        nonlocal failed
        failed |= not ok
        rows.append(f"| {name} | {'ok' if ok else 'FAIL'} | {detail} |")

    def kiln(*extra):
        return subprocess.run([kiln_run, artifact, "--device", args.device,
                               "-i", f"image={os.path.join(surface, 'images.npy')}",
                               *extra], capture_output=True, text=True, timeout=600)

    version = subprocess.run([kiln_run, "--version"], capture_output=True, text=True)
    record("kiln-run --version", version.returncode == 0 and "(commit" in version.stdout,
           version.stdout.splitlines()[0] if version.stdout else version.stderr.strip())

    run = kiln("-o", work)
    if run.returncode != 0:
        record("digits on " + args.device, False, run.stderr.strip()[:200])
    else:
        got = np.load(os.path.join(work, "probabilities.npy")).astype(np.float64)
        want = np.load(os.path.join(surface, "reference.npy")).astype(np.float64)
        labels = np.load(os.path.join(surface, "labels.npy"))
        result = numerics.compare(got, want, BOUND)
        top1 = (got.argmax(1) == want.argmax(1)).mean()
        record("digits on " + args.device, result.ok and top1 == 1.0,
               f"rel. error {result.rel_l2:.2e} (bound {BOUND:.0e}), worst element "
               f"{result.worst_ratio:.2f} of its bound, top-1 agreement "
               f"{top1 * 100:.0f}%, correct {(got.argmax(1) == labels).sum()}/{len(labels)}")

    emu = args.device == "emu"  # the dry run: few runs, the emulator is slow
    runs = 2 if emu else 200
    bench = kiln("--bench", str(runs), "--warmup", "0" if emu else "3", "--json")
    try:
        report = json.loads(bench.stdout)["bench"]
        want = 1000.0 * len(report["run_ms"]) / sum(report["run_ms"])
        ok = (bench.returncode == 0 and report["runs"] == runs
              and abs(report["inferences_per_s"] - want) <= 1e-6 * want)
        record("--bench --json", ok,
               f"median {report['median_ms']:.4f} ms per batch of {report['batch']}, "
               f"{report['inferences_per_s']:.1f} inferences/s, "
               f"{report['samples_per_s']:.0f} samples/s")
    except (ValueError, KeyError, TypeError) as e:
        record("--bench --json", False, f"{e}: {bench.stdout[:100]!r} {bench.stderr[:200]!r}")
    text = kiln("--bench", "2" if emu else "20", "--warmup", "0" if emu else "3")
    record("--bench text", text.returncode == 0 and " inferences/s (" in text.stdout,
           next((l.strip() for l in text.stdout.splitlines() if "throughput" in l), "no line"))

    truncated = os.path.join(work, "truncated.kiln")
    with open(artifact, "rb") as f, open(truncated, "wb") as g:
        g.write(f.read()[:1000])
    bad = subprocess.run([kiln_run, truncated, "--device", args.device, "--random-inputs"],
                         capture_output=True, text=True)
    record("exit status 1", bad.returncode == 1 and bad.stderr.count("\n") == 1,
           f"status {bad.returncode}: {bad.stderr.strip()[:120]}")

    table = "\n".join([f"surface check on {args.device}",
                       "| check | status | detail |", "|---|---|---|"] + rows)
    print(table)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "surface.txt"), "w") as f:
            f.write(table + "\n")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prepare", action="store_true")
    ap.add_argument("--build")
    ap.add_argument("--out", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "device-check"))
    ap.add_argument("--dir", default="device-check")
    ap.add_argument("--device", default="cuda")
    args, _ = ap.parse_known_args()
    if args.prepare:
        prepare(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
