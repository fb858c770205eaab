#!/usr/bin/env python3
"""The compile-and-run part of scripts/run-example.sh.

  run_example.py --build-dir build [--work DIR] [--device auto|cuda|emu]
                 [--model MODEL.onnx [--shape name=dims ...]]

Default: trains the bundled digits CNN (make_model.py), compiles it with
kilnc to a .kiln file, runs it with kiln-run on held-out handwritten digits
(on cuda when a GPU is present, else on emu) and prints the compile summary
(kernels, arena, weights), the top-5 classes of the first image, the
agreement with onnxruntime on the whole batch, and, on a GPU only, the run
time. --model runs another ONNX model the same way on a seeded random
input (its outputs then mean nothing, but the agreement still does).
Exits 1 when Kiln and onnxruntime disagree beyond the bound below.
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import numerics  # noqa: E402  (Kiln's comparison rule, docs/testing.md)

# fp32 on both sides: the sums differ only in order (Kiln's kernels and FMA
# contraction against onnxruntime's MLAS), a relative error of about
# sqrt(K) * 2^-24 for a K-term dot product, 1e-6 for this model's 256-term
# layer. Kiln's fp32 rule (1e-4 on the relative L2 error, and per element
# 6e-4 rms + 1e-4 |onnxruntime|) leaves two orders of margin and still fails
# on any real bug (a wrong weight moves probabilities by 1e-2 or more).
# onnxruntime runs with its graph optimizations off.


def gpu_present():
    """A CUDA driver that sees at least one device."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 \
        and count.value > 0


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        sys.exit(f"run_example.py: {os.path.basename(cmd[0])} failed "
                 f"(exit {result.returncode})")
    return result.stdout


def stat(text, name):
    match = re.search(rf"^{name}: (\d+)$", text, re.M)
    return int(match.group(1)) if match else None


def size(n):
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def ascii_digit(image):
    shades = " .:-=+*#%@"
    return ["    " + "".join(shades[min(9, int(v * 9.99))] * 2 for v in row)
            for row in image[0]]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--work", help="default: BUILD_DIR/example")
    parser.add_argument("--device", default="auto", choices=["auto", "cuda", "emu"])
    parser.add_argument("--model", help="another ONNX model (random input)")
    parser.add_argument("--shape", action="append", default=[])
    args = parser.parse_args()
    bin_dir = os.path.join(os.path.abspath(args.build_dir), "bin")
    kilnc, kiln_run = os.path.join(bin_dir, "kilnc"), os.path.join(bin_dir, "kiln-run")
    work = os.path.abspath(args.work or os.path.join(args.build_dir, "example"))
    os.makedirs(work, exist_ok=True)
    device = args.device if args.device != "auto" else ("cuda" if gpu_present() else "emu")

    import onnx
    labels = None
    if args.model:
        model = os.path.abspath(args.model)
    else:
        print(run([sys.executable, os.path.join(HERE, "make_model.py"), work]).strip())
        model = os.path.join(work, "digits_cnn.onnx")
        labels = np.load(os.path.join(work, "labels.npy"))
    proto = onnx.load(model, load_external_data=False)
    initializers = {i.name for i in proto.graph.initializer}
    graph_inputs = [i for i in proto.graph.input if i.name not in initializers]

    # Inputs: the held-out digits, or seeded random values for --model.
    shapes = dict(s.split("=", 1) for s in args.shape)
    feeds = {}
    if labels is not None:
        feeds["image"] = np.load(os.path.join(work, "images.npy"))
    else:
        rng = np.random.default_rng(0)
        for i in graph_inputs:
            dims = [d.dim_value if d.HasField("dim_value") else None
                    for d in i.type.tensor_type.shape.dim]
            if i.name in shapes:
                dims = [int(d) for d in shapes[i.name].split("x")]
            if None in dims:
                sys.exit(f"run_example.py: input '{i.name}' has a symbolic "
                         f"dimension: give --shape {i.name}=DIMxDIM...")
            dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
            if np.issubdtype(dtype, np.floating):
                feeds[i.name] = rng.uniform(-1, 1, dims).astype(dtype)
            else:  # indices (token ids, say): small, valid for any table
                feeds[i.name] = rng.integers(0, 8, dims).astype(dtype)
    shape_flags = [f"--shape={name}={'x'.join(map(str, a.shape))}" for name, a in feeds.items()]
    for name, array in feeds.items():
        np.save(os.path.join(work, f"input_{name}.npy"), array)

    artifact = os.path.join(work, os.path.splitext(os.path.basename(model))[0] + ".kiln")
    start = time.monotonic()
    stats = run([kilnc, model, "-o", artifact, "--stats"] + shape_flags)
    seconds = time.monotonic() - start
    print(f"compiled {os.path.basename(model)} -> {artifact} in {seconds:.1f} s: "
          f"{stat(stats, 'kernels')} kernels (unfused: {stat(stats, 'kernels unfused')}), "
          f"arena {size(stat(stats, 'arena bytes'))} (naive plan: "
          f"{size(stat(stats, 'naive arena bytes'))}), weights "
          f"{size(stat(stats, 'weight bytes'))}, file {size(os.path.getsize(artifact))}")

    out_dir = os.path.join(work, "out")
    cmd = [kiln_run, artifact, "--device", device, "-o", out_dir]
    for name in feeds:
        cmd += ["-i", f"{name}={os.path.join(work, f'input_{name}.npy')}"]
    start = time.monotonic()
    run(cmd)
    print(f"ran it on {device}"
          + (f" (the PTX emulator, on the CPU) in {time.monotonic() - start:.1f} s"
             if device == "emu" else ""))

    session = numerics.ort_session(model)
    names = [o.name for o in session.get_outputs()]
    expected = session.run(None, feeds)
    results = []
    for name, want in zip(names, expected):
        path = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", name) + ".npy")
        got = np.load(path).astype(np.float64)
        results.append(numerics.compare(got, want, "fp32", f"'{name}'"))
        line = f"output '{name}' {list(got.shape)}: {results[-1].figures()}"
        if got.ndim == 2 and got.shape[1] > 1:
            agree = (got.argmax(1) == want.argmax(1)).mean()
            line += f", top-1 agreement {agree * 100:.1f}% of {got.shape[0]}"
            if labels is not None:
                line += (f"; correct digits: kiln {(got.argmax(1) == labels).sum()}, "
                         f"onnxruntime {(want.argmax(1) == labels).sum()} of {len(labels)}")
        print(line)
        if got.ndim == 2 and got.shape[1] >= 5:
            first = got[0]
            top = np.argsort(-first)[:5]
            what = "digit" if labels is not None else "class"
            if labels is not None:
                print(f"first held-out image (written as a {labels[0]}):")
                print("\n".join(ascii_digit(feeds["image"][0])))
            print(f"top-5 for image 0: " + ", ".join(f"{what} {c} {first[c]:.4f}" for c in top))

    if device == "cuda":
        bench = json.loads(run(cmd + ["--bench", "100", "--json"]))["bench"]
        print(f"run time on the GPU: median {bench['median_ms']:.4f} ms per batch of "
              f"{bench['batch']}, {bench['inferences_per_s']:.0f} inferences/s "
              f"({bench['samples_per_s']:.0f} samples/s)")
    verdict = numerics.combine(results)
    if not verdict.ok:
        sys.exit(f"run_example.py: Kiln and onnxruntime disagree: {verdict.figures()}")
    print(f"agreement with onnxruntime: within Kiln's fp32 bounds ({verdict.figures()})")


if __name__ == "__main__":
    main()
