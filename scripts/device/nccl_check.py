#!/usr/bin/env python3
"""The NCCL engine on the GPU: weights after 10 steps, NCCL vs the host path.

    scripts/device/nccl_check.py prepare --build build --out device-check/nccl
        (here: an ONNX MLP, its --data-parallel artifacts for world sizes 1
        and 2, the data, and a copy of bin/kiln-train)
    scripts/device/nccl_check.py run --dir device-check/nccl [--device emu]
                                    [--ranks 1|2]
        (on the lent GPU machine, from scripts/device-check.sh; --ranks 2
        needs two GPUs and mpirun: test/Pipelines/Training/nccl-2gpu.test)

The MLP (Gemm, Relu, Gemm; cross-entropy; SGD with momentum) is compiled
with --data-parallel and buckets of 1 KiB (three buckets, so the engine
queues several all-reduces behind their events). One epoch of 80 samples
is 10 optimizer steps at a global batch of 8. It is trained twice:

- with `--collective-engine nccl` (world size 1: kiln-train bootstraps the
  engine without MPI, every bucket goes through ncclAllReduce on the
  engine's stream after its event; world size 2: under mpirun);
- with `--collective-engine mpi`, the host path (world size 1: no
  all-reduce at all; world size 2: MPI_Allreduce on host copies).

Every tensor of the two checkpoints must agree element by element within
1e-6 of the tensor's largest |value| (test/e2e/training/data_parallel.py's
bound and its reasoning: at world size 2 the two engines sum the two
ranks' gradients in different orders; at world size 1 the mean over one
rank is exact, so any difference means the engine moved or lost data).

libnccl.so.2: KILN_NCCL_LIBRARY when set, else PyTorch's wheel's
(nvidia.nccl, site-packages/nvidia/nccl/lib), else the loader's path.
--device emu (device-check.sh --dry-run) runs the host path twice: the
script's plumbing only (NCCL needs a GPU). Writes $OUT/nccl_check.json.
Exits 0 when device-check/nccl is missing (prints "skipped").
"""
import argparse
import glob
import json
import os
import shutil
import site
import struct
import subprocess
import sys
import time

IN, HID, C = 6, 16, 4
GLOBAL_BATCH, SAMPLES = 8, 80
RTOL = 1e-6


def make_model(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(27)
    shapes = [(IN, HID), (HID,), (HID, C), (C,)]
    names = ["fc1.w", "fc1.b", "fc2.w", "fc2.b"]
    vals = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"]),
         helper.make_node("Relu", ["h"], ["a"]),
         helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["z"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", C])],
        [numpy_helper.from_array(v, n) for v, n in zip(vals, names)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              path)
    np.save(os.path.join(os.path.dirname(path), "x.npy"),
            rng.standard_normal((SAMPLES, IN)).astype(np.float32))
    np.save(os.path.join(os.path.dirname(path), "y.npy"),
            rng.integers(0, C, SAMPLES).astype(np.int64))


def prepare(args):
    os.makedirs(os.path.join(args.out, "bin"), exist_ok=True)
    shutil.copy2(os.path.join(args.build, "bin", "kiln-train"),
                 os.path.join(args.out, "bin", "kiln-train"))
    model = os.path.join(args.out, "mlp.onnx")
    make_model(model)
    for ranks in (1, 2):
        batch = GLOBAL_BATCH // ranks
        subprocess.run(
            [os.path.join(args.build, "bin", "kilnc"), model,
             f"--shape=x={batch}x{IN}", "--train", "--loss=cross_entropy",
             f"--labels=y:{batch}:int64", "--optimizer=momentum:lr=0.1",
             "--data-parallel", "--bucket-mb=0.001", "-o",
             os.path.join(args.out, f"mlp.dp{ranks}.kiln")], check=True)
    os.remove(model)
    print("nccl_check: prepared world sizes 1, 2")


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + lo:8 + n + hi], np.float32)
    return out


def find_nccl():
    if os.environ.get("KILN_NCCL_LIBRARY"):
        return os.environ["KILN_NCCL_LIBRARY"]
    try:
        import nvidia.nccl
        for root in list(nvidia.nccl.__path__):
            candidate = os.path.join(root, "lib", "libnccl.so.2")
            if os.path.exists(candidate):
                return candidate
    except ImportError:
        pass
    roots = site.getsitepackages() + [site.getusersitepackages()]
    for root in roots:
        hits = glob.glob(os.path.join(root, "nvidia", "nccl", "lib",
                                      "libnccl.so.2"))
        if hits:
            return hits[0]
    return None  # the loader's search path


def train(args, ranks, engine, ck):
    cmd = [os.path.join(args.dir, "bin", "kiln-train"),
           os.path.join(args.dir, f"mlp.dp{ranks}.kiln"),
           "--data", os.path.join(args.dir, "x.npy"),
           "--labels", os.path.join(args.dir, "y.npy"), "--epochs", "1",
           "--device", args.device, "--quiet", "--checkpoint-dir", ck,
           "--collective-engine", engine, "--collective-timeout", "60"]
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               str(ranks)] + cmd
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: "
                           f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return time.time() - start


def run(args):
    if not os.path.exists(os.path.join(args.dir, "bin", "kiln-train")):
        print(f"nccl_check: skipped ({args.dir} not prepared: "
              "nccl_check.py prepare)")
        return 0
    out = os.environ.get("OUT", "/tmp")
    os.makedirs(out, exist_ok=True)
    result = {"ranks": args.ranks, "device": args.device}
    engine = "nccl" if args.device != "emu" else "mpi"
    if engine == "nccl":
        lib = find_nccl()
        if lib:
            os.environ["KILN_NCCL_LIBRARY"] = lib
        result["libnccl"] = lib or "libnccl.so.2 (loader path)"
    work = os.path.join(out, "nccl-check")
    shutil.rmtree(work, ignore_errors=True)
    try:
        result["nccl_s"] = train(args, args.ranks, engine,
                                 os.path.join(work, "nccl"))
        result["host_s"] = train(args, args.ranks, "mpi",
                                 os.path.join(work, "host"))
    except RuntimeError as e:
        result["error"] = str(e)
        print(f"nccl_check: FAILED: {e}")
        with open(os.path.join(out, "nccl_check.json"), "w") as f:
            json.dump(result, f, indent=2)
        return 1
    got = read_safetensors(os.path.join(work, "nccl", "checkpoint.safetensors"))
    want = read_safetensors(os.path.join(work, "host", "checkpoint.safetensors"))
    worst, failures = 0.0, []
    for name in sorted(want):
        if name not in got or got[name].shape != want[name].shape:
            failures.append(f"{name}: missing or reshaped")
            continue
        scale = max(float(abs(want[name]).max()), 1e-30)
        diff = float(abs(got[name].astype("float64") - want[name]).max())
        worst = max(worst, diff / scale)
        if diff > RTOL * scale:
            failures.append(f"{name}: max |diff| {diff:.3g} > {RTOL} x {scale:.3g}")
    result.update(tensors=len(want), worst_relative=worst, failures=failures)
    with open(os.path.join(out, "nccl_check.json"), "w") as f:
        json.dump(result, f, indent=2)
    label = ("NCCL" if engine == "nccl" else
             "host path twice (emu dry run: NCCL needs a GPU)")
    status = "ok" if not failures else "FAILED: " + "; ".join(failures)
    print(f"nccl_check: world size {args.ranks}, {label} vs host path, 10 "
          f"steps: {len(want)} tensors, worst |diff| {worst:.3g} of the "
          f"tensor's scale (bound {RTOL}) {status}")
    return 0 if not failures else 1


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--build", required=True)
    pp.add_argument("--out", required=True)
    pr = sub.add_parser("run")
    pr.add_argument("--dir", required=True)
    pr.add_argument("--device", default="cuda")
    pr.add_argument("--ranks", type=int, default=1, choices=[1, 2])
    args = p.parse_args()
    if args.command == "prepare":
        prepare(args)
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
