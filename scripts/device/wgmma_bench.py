#!/usr/bin/env python3
"""GEMMs on the GPU: the wgmma kernels against mma.sync, FFMA and cuBLAS.

Usage (development machine, called by prepare.py):
  wgmma_bench.py prepare --kilnc PATH --out DEVICE_CHECK_DIR [--dry-run]
Usage (device machine, called by scripts/device-check.sh with its arguments):
  wgmma_bench.py --dir DEVICE_CHECK_DIR [--device cuda|emu]
                 [--torch cuda|cpu|no] [--runs N] [--warmup N] [--out DIR]

prepare compiles into DIR/wgmma/ one MatMul, C = A B with A [M, K] and
B [K, N] both model inputs (no weights to carry), at 4096^3 and 8192^3
(--dry-run: 192 x 200 x 136, off every tile), with --precision=bf16
--io-precision=bf16 (A, B and C bf16 in memory, as torch.matmul on bf16
tensors), three times: --wgmma --tma (the sm_90a warp-specialised wgmma
kernel, its producer loading tiles with TMA), --wgmma --tma=false (the same
kernel with the cp.async producer) and --wgmma=false (mma.sync), recording
the config kilnc --stats reports, and
writes wgmma.json. Then the fp32 rows: the same MatMul at 4096^3 (dry run:
the same small shape) with fp32 in memory, compiled with --precision=tf32
--wgmma (wgmma_tf32), --precision=tf32 --wgmma=false (mma.sync tf32) and
the default fp32 (the FFMA kernel, no TF32). B as an input is MN-major, so
wgmma_tf32 transposes it as it stages it; the "wgmma, B weight" row makes B
an initializer instead (compiled with --strip-weights, bound at run time
with kiln-run --weights: the artifact stays small), which kilnc stores
transposed at compile time, as it does a model's MatMul weights.

The run, per shape: seeded normal A and B (gemm_check.make_input), rounded
to bf16; per artifact kiln-run -o once (gemm_check.Reference: 256 sampled
rows and the column sums against float64 of the bf16 operands, bound
1e-2: bf16 output rounding alone is ~1.8e-3; tf32 5e-3: 10-bit mantissas;
fp32 1e-4: the same sums in another order), then --bench N: the median
of the kiln_gemm_ kernel (its per-kernel line; with split-K the sum of the
main and reduction kernels), TFLOP/s, % of the H200's dense peak for the
precision (bf16 989, tf32 494, fp32 67 TFLOP/s) and of cuBLAS; then
torch.matmul on the same operands (CUDA events, gemm_check.torch_gemm):
bf16, fp32 with allow_tf32 True (the tf32 rows' reference) and False (the
fp32 row's). Prints a markdown table, also to
OUT/wgmma.txt and OUT/wgmma.json. Exits 1 when a run fails or an error is
out of bounds; 0 with a note when prepare.py made no wgmma set.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import bench_cli

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FULL = [(4096, 4096, 4096), (8192, 8192, 8192)]
DRY = [(192, 200, 136)]
FULL_F32 = [(4096, 4096, 4096)]
BOUNDS = {"bf16": 1e-2, "tf32": 5e-3, "fp32": 1e-4}
PEAKS = {"bf16": 989.0, "tf32": 494.0, "fp32": 67.0}  # H200 dense TFLOP/s
# (precision, impl, kilnc flags)
# bf16: the wgmma kernel with each producer (TMA vs cp.async), then
# mma.sync; tf32 (the TMA producer is bf16/fp16 only) and fp32 after.
IMPLS = [("bf16", "wgmma-tma", ["--precision=bf16", "--io-precision=bf16", "--wgmma", "--tma"]),
         ("bf16", "wgmma-cp.async", ["--precision=bf16", "--io-precision=bf16", "--wgmma", "--tma=false"]),
         ("bf16", "mma.sync", ["--precision=bf16", "--io-precision=bf16", "--wgmma=false"]),
         ("tf32", "wgmma", ["--precision=tf32", "--wgmma"]),
         ("tf32", "wgmma, B weight", ["--precision=tf32", "--wgmma", "--strip-weights"]),
         ("tf32", "mma.sync", ["--precision=tf32", "--wgmma=false"]),
         ("fp32", "ffma", ["--precision=fp32"])]
GEMM_KERNEL = re.compile(r"kernel (kiln_gemm_\w+) \(x\d+\): median ([0-9.]+) ms")
CONFIG = re.compile(r"kiln_gemm_\d+: (\S+ \S+ \S+ \S+ \S+(?: tma)?),")


def gemm_model(m, k, n, weight=False):
    """C = A B; `weight`: B an initializer (gemm_check.make_input's values
    for seed 22, which the run binds again with --weights)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])]
    initializers = []
    if weight:
        b = np.random.default_rng(22).standard_normal((k, n), dtype=np.float32)
        initializers.append(numpy_helper.from_array(b, "b"))
    else:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, n]))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "gemm", inputs,
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def prepare(args):
    import onnx
    out = os.path.join(args.out, "wgmma")
    os.makedirs(out, exist_ok=True)
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for precision, impl, flags in IMPLS:
            shapes = DRY if args.dry_run else FULL if precision == "bf16" else FULL_F32
            weight = "B weight" in impl
            for m, k, n in shapes:
                src = os.path.join(tmp, f"g-{m}x{k}x{n}{'-w' if weight else ''}.onnx")
                if not os.path.exists(src):
                    onnx.save(gemm_model(m, k, n, weight), src)
                slug = re.sub(r"[^a-z0-9]+", "-", impl).strip("-")
                name = f"gemm-{m}x{k}x{n}-{precision}-{slug}"
                ran = subprocess.run([args.kilnc, src, "-o", os.path.join(out, name + ".kiln"),
                                      "--stats"] + flags,
                                     check=True, capture_output=True, text=True)
                config = CONFIG.search(ran.stdout)
                entries.append(dict(name=name, file=name + ".kiln", shape=[m, k, n],
                                    precision=precision, impl=impl, weight=weight,
                                    config=config.group(1) if config else "?"))
    with open(os.path.join(out, "wgmma.json"), "w") as f:
        json.dump(dict(set="dry-run" if args.dry_run else "full", runs=entries), f, indent=1)
    print(f"prepared wgmma: {len(entries)} artifacts")


def run(args):
    import numpy as np
    import gemm_check
    manifest_path = os.path.join(args.dir, "wgmma", "wgmma.json")
    if not os.path.exists(manifest_path):
        print("wgmma_bench.py: no wgmma set in this device-check/ (prepare.py made none)")
        return 0
    manifest = json.load(open(manifest_path))
    kiln_run = os.path.join(args.dir, "bin", "kiln-run")
    tdev = "cuda" if args.torch == "cuda" else "cpu"
    work = tempfile.mkdtemp(prefix="kiln-wgmma-bench-")
    rows, failed, shapes = [], 0, {}
    for e in manifest["runs"]:
        m, k, n = e["shape"]
        precision = e.get("precision", "bf16")  # older sets: bf16 only
        bound = BOUNDS[precision]
        key = (m, k, n, precision)
        if key not in shapes:
            a = gemm_check.make_input(m, k, seed=21)
            b = gemm_check.make_input(k, n, seed=22)
            files = {"weights": os.path.join(work, f"weights-{m}x{k}x{n}-{precision}")}
            os.makedirs(files["weights"], exist_ok=True)
            np.save(os.path.join(files["weights"], "b.npy"), b)
            for name, x in (("a", a), ("b", b)):
                files[name] = os.path.join(work, f"{name}-{m}x{k}x{n}-{precision}.npy")
                if precision == "bf16":
                    gemm_check.save_bf16(files[name], gemm_check.to_bf16_bits(x))
                else:
                    np.save(files[name], x)
            shapes[key] = dict(a=a, b=b, files=files,
                               ref=gemm_check.Reference(a, b, precision))
            if args.torch != "no":
                try:
                    ms, c, note = gemm_check.torch_gemm(a, b, precision, tdev, args.runs)
                    err, _ = shapes[key]["ref"].error(c, bound)
                    rows.append(dict(name=f"gemm-{m}x{k}x{n}", shape=[m, k, n],
                                     precision=precision, impl="torch.matmul",
                                     config=note or "cuBLAS", ms=ms, err=err,
                                     tflops=gemm_check.tflops(m, k, n, ms),
                                     status="ok" if err <= bound else "FAIL: error out of bound"))
                    failed += err > bound
                except Exception as ex:  # no torch, or no CUDA
                    rows.append(dict(name=f"gemm-{m}x{k}x{n}", shape=[m, k, n],
                                     precision=precision, impl="torch.matmul", config="-",
                                     status=f"no baseline: {ex}"))
        s = shapes[key]
        row = dict(name=e["name"], shape=e["shape"], precision=precision, impl=e["impl"],
                   config=e["config"])
        base = [kiln_run, os.path.join(args.dir, "wgmma", e["file"]), "--device", args.device,
                "-i", f"a={s['files']['a']}"]
        base += (["--weights", s["files"]["weights"]] if e.get("weight")
                 else ["-i", f"b={s['files']['b']}"])
        out = os.path.join(work, "out")
        ran = subprocess.run(base + ["-o", out], capture_output=True, text=True)
        if ran.returncode != 0:
            row["status"] = "FAIL: " + (ran.stderr.strip().splitlines() or ["kiln-run failed"])[-1]
            failed += 1
            rows.append(row)
            continue
        outputs = sorted(f for f in os.listdir(out) if f.endswith(".npy"))
        row["err"], row["detail"] = s["ref"].error(
            gemm_check.load_output(os.path.join(out, outputs[0])), bound)
        ran = subprocess.run(base + ["--bench", str(args.runs), "--warmup", str(args.warmup)],
                             capture_output=True, text=True)
        times = GEMM_KERNEL.findall(ran.stdout + ran.stderr)
        if ran.returncode != 0 or not times:
            row["status"] = "FAIL: " + (ran.stderr.strip().splitlines() or ["no kiln_gemm_ time"])[-1]
            failed += 1
            rows.append(row)
            continue
        row["ms"] = sum(float(t) for _, t in times)
        row["tflops"] = gemm_check.tflops(m, k, n, row["ms"])
        ok = row["err"] <= bound
        row["status"] = "ok" if ok else "FAIL: error out of bound"
        failed += not ok
        rows.append(row)

    cublas = {(*r["shape"], r["precision"]): r.get("ms") for r in rows
              if r["impl"] == "torch.matmul"}

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)
    lines = [f"GEMMs, wgmma vs mma.sync vs FFMA vs cuBLAS (issue 11): device {args.device}, "
             f"torch {args.torch}, kiln-run --bench {args.runs} --warmup {args.warmup}; "
             f"set {manifest['set']}; dense peaks: bf16 989, tf32 494, fp32 67 TFLOP/s", "",
             "| GEMM M×K×N | precision | impl | config | median ms | TFLOP/s | % of dense peak "
             "| % of cuBLAS | rel. error (bound) | status |", "|---|"]
    for r in rows:
        ref = cublas.get((*r["shape"], r["precision"]))
        share = ref / r["ms"] if ref and r.get("ms") and r["impl"] != "torch.matmul" else None
        peak = r["tflops"] / PEAKS[r["precision"]] if r.get("tflops") else None
        lines.append(f"| {'×'.join(map(str, r['shape']))} | {r['precision']} | {r['impl']} | "
                     f"{r['config']} | "
                     f"{f(r.get('ms'), '.4f')} | {f(r.get('tflops'), '.1f')} | {f(peak, '.1%')} | "
                     f"{f(share, '.0%')} | {f(r.get('err'), '.2e')} "
                     f"({BOUNDS[r['precision']]:g}) | {r['status']} |")
    bench_cli.publish(args.out, "wgmma", "\n".join(lines), rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(bench_cli.main(prepare, run))
