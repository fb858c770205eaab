#!/usr/bin/env python3
"""Fused attention on the GPU: Kiln's kernel against PyTorch's SDPA.

Usage (development machine, called by prepare.py):
  attention_bench.py prepare --kilnc PATH --out DEVICE_CHECK_DIR [--dry-run]
Usage (device machine, called by scripts/device-check.sh with its arguments):
  attention_bench.py --dir DEVICE_CHECK_DIR [--device cuda|emu]
                     [--torch cuda|cpu|no] [--runs N] [--warmup N] [--out DIR]

prepare compiles into DIR/attention/ (no weights: the models are attention
alone, inputs q, k, v of [batch, heads, seq, d]):
  - attention at batch 8, 16 heads, seq 2048, d 128 and 64, causal (a bool
    tril initializer with Where: the kernel skips key tiles past the
    diagonal) and not, in bf16 and fp16 (--precision, fp32 inputs converted
    by a small kernel first; only the kiln_attn_ kernel is timed), each
    twice: on the sm_90a wgmma kernel (kilnc's default, name suffix
    -wgmma) and on the mma.sync one (--wgmma=false, suffix -mma);
  - the encoder layer (make_encoder.py) at batch 32 in bf16, with the fused
    attention kernel and without it (--attention-kernels=false: a generic
    score + softmax kernel and a GEMM, as before), plus its input ids;
and writes attention.json. --dry-run makes the same set small (batch 1,
2 heads, seq 128, d 64 and 128; the encoder at hidden 64, batch 2) for the
emu dry run (test/Target/CUDA/attention-bench-dry-run.test).

The run, per attention artifact: kiln-run -i q,k,v (seeded normal inputs)
--bench N: the median time of the kiln_attn_ kernel (its per-kernel line),
TFLOP/s (4 b h sq sk d flops, halved when causal), and the output against
torch SDPA in fp32 on the same inputs (relative error of the output norm;
bounds bf16 2e-2, fp16 5e-3); then torch.nn.functional.
scaled_dot_product_attention in the same dtype with the flash backend
(CUDA events, median of N; once per shape and dtype) and the ratio
kiln/SDPA (issue 12: >= 70%, goal >= 100%); then the wgmma and mma.sync
kernels side by side (their times and the speed-up). Per encoder artifact:
the median per-run time (fused attention vs not). Prints markdown tables,
also to OUT/attention.txt and
OUT/attention.json. Exits 1 when a run fails or an error is out of bounds;
0 with a note when prepare.py made no attention set.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import bench_cli

# scripts/numerics.py: next to this file in the device pack, one folder up
# in the source tree.
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
import numerics  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

FULL = dict(batch=8, heads=16, seq=2048, dims=[128, 64])
DRY = dict(batch=1, heads=2, seq=128, dims=[64, 128])
BOUNDS = {p: numerics.NORM_BOUND[p] for p in ("bf16", "fp16")}
PER_RUN = re.compile(r"per run: median ([0-9.]+) ms")
ATTN_KERNEL = re.compile(r"kernel (kiln_attn_\w+) \(x\d+\): median ([0-9.]+) ms")


def attention_model(b, h, s, d, causal):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array(1 / np.sqrt(d), np.float32), "scale")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"]),
             helper.make_node("Mul", ["s0", "scale"], ["s"])]
    scores = "s"
    if causal:
        inits += [numpy_helper.from_array(np.tril(np.ones((s, s), bool)), "tril"),
                  numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
        nodes.append(helper.make_node("Where", ["tril", "s", "ninf"], ["sc"]))
        scores = "sc"
    nodes += [helper.make_node("Softmax", [scores], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["y"])]
    shape = [b, h, s, d]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def prepare(args):
    import numpy as np
    import onnx
    shape = DRY if args.dry_run else FULL
    out = os.path.join(args.out, "attention")
    os.makedirs(out, exist_ok=True)
    entries = []
    with tempfile.TemporaryDirectory() as tmp:
        for d in shape["dims"]:
            for causal in (False, True):
                m = attention_model(shape["batch"], shape["heads"], shape["seq"], d, causal)
                src = os.path.join(tmp, "a.onnx")
                onnx.save(m, src)
                for precision in ("bf16", "fp16"):
                    for kernel, wgmma in (("wgmma", "true"), ("mma", "false")):
                        config = f"attn-d{d}{'-causal' if causal else ''}-{precision}"
                        name = f"{config}-{kernel}"
                        subprocess.run([args.kilnc, src, "-o", os.path.join(out, name + ".kiln"),
                                        f"--precision={precision}", f"--wgmma={wgmma}"],
                                       check=True)
                        entries.append(dict(kind="attention", name=name, file=name + ".kiln",
                                            config=config, kernel=kernel,
                                            batch=shape["batch"], heads=shape["heads"],
                                            seq=shape["seq"], d=d, causal=causal,
                                            precision=precision, bound=BOUNDS[precision]))
        enc = ["--batch", "2", "--hidden", "64", "--heads", "2", "--ffn", "128",
               "--seq", "32", "--vocab", "100"] if args.dry_run else ["--batch", "32"]
        src = os.path.join(tmp, "encoder.onnx")
        subprocess.run([sys.executable, os.path.join(ROOT, "test", "Frontend", "ONNX",
                                                     "models", "make_encoder.py"), src] + enc,
                       check=True)
        batch, seq = int(enc[1]), 32 if args.dry_run else 128
        np.save(os.path.join(out, "encoder-ids.npy"),
                (np.arange(batch * seq) % (100 if args.dry_run else 1000))
                .reshape(batch, seq).astype(np.int64))
        for fused in (True, False):
            name = f"encoder-b{batch}-bf16-{'fused' if fused else 'unfused'}-attention"
            subprocess.run([args.kilnc, src, "-o", os.path.join(out, name + ".kiln"),
                            "--precision=bf16", f"--attention-kernels={str(fused).lower()}"],
                           check=True)
            entries.append(dict(kind="encoder", name=name, file=name + ".kiln",
                                fused_attention=fused))
    with open(os.path.join(out, "attention.json"), "w") as f:
        json.dump(dict(set="dry-run" if args.dry_run else "full", runs=entries), f, indent=1)
    print(f"prepared attention: {len(entries)} artifacts")


def sdpa(torch, q, k, v, causal, device):
    """torch SDPA in the inputs' dtype, the flash backend on CUDA."""
    f = torch.nn.functional.scaled_dot_product_attention
    if device == "cuda":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return f(q, k, v, is_causal=causal)
    return f(q, k, v, is_causal=causal)


def time_torch(torch, fn, runs, warmup, device):
    import statistics
    import time
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(runs, 1)):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run(args):
    import numpy as np
    manifest_path = os.path.join(args.dir, "attention", "attention.json")
    if not os.path.exists(manifest_path):
        print("attention_bench.py: no attention set in this device-check/ (prepare.py made none)")
        return 0
    manifest = json.load(open(manifest_path))
    kiln_run = os.path.join(args.dir, "bin", "kiln-run")
    torch = None
    if args.torch != "no":
        try:
            import torch as torch_module
            torch = torch_module
        except ImportError:
            print("attention_bench.py: no torch: SDPA columns empty")
    tdev = "cuda" if args.torch == "cuda" else "cpu"
    work = tempfile.mkdtemp(prefix="kiln-attn-bench-")
    rows, failed = [], 0

    def add(row):  # printed as it lands: the table comes only at the end
        rows.append(row)
        print("attention row:", {k: row[k] for k in row if k in (
            "name", "ms", "sdpa_ms", "err", "status")}, flush=True)
    sdpa_ms = {}  # SDPA's time per (config): the same for both kernels
    for e in manifest["runs"]:
        artifact = os.path.join(args.dir, "attention", e["file"])
        base = [kiln_run, artifact, "--device", args.device]
        row = dict(name=e["name"])
        if e["kind"] == "encoder":
            cmd = base + ["-i", f"input_ids={os.path.join(args.dir, 'attention', 'encoder-ids.npy')}",
                          "--bench", str(args.runs), "--warmup", str(args.warmup)]
            ran = subprocess.run(cmd, capture_output=True, text=True)
            m = PER_RUN.search(ran.stdout + ran.stderr)
            row.update(kind="encoder", ms=float(m.group(1)) if m else None,
                       status="ok" if ran.returncode == 0 and m else "FAIL: " +
                       (ran.stderr.strip().splitlines() or ["no time"])[-1])
            failed += not row["status"].startswith("ok")
            add(row)
            continue
        shape = [e["batch"], e["heads"], e["seq"], e["d"]]
        rng = np.random.default_rng(12)
        feeds = {n: rng.standard_normal(shape).astype(np.float32) for n in "qkv"}
        cmd = list(base)
        for n, a in feeds.items():
            np.save(os.path.join(work, n + ".npy"), a)
            cmd += ["-i", f"{n}={os.path.join(work, n + '.npy')}"]
        out = os.path.join(work, "out")
        ran = subprocess.run(cmd + ["-o", out, "--bench", str(args.runs), "--warmup",
                                    str(args.warmup)], capture_output=True, text=True)
        m = ATTN_KERNEL.search(ran.stdout + ran.stderr)
        flops = 4 * e["batch"] * e["heads"] * e["seq"] * e["seq"] * e["d"] / (2 if e["causal"] else 1)
        row.update(kind="attention", precision=e["precision"], d=e["d"], causal=e["causal"],
                   ms=float(m.group(2)) if m else None, bound=e["bound"],
                   config=e.get("config", e["name"]), kernel=e.get("kernel", "-"))
        if ran.returncode != 0 or not m:
            row["status"] = "FAIL: " + (ran.stderr.strip().splitlines() or ["no kiln_attn_ time"])[-1]
            failed += 1
            add(row)
            continue
        row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
        got = np.load(os.path.join(out, "y.npy")).astype(np.float64)
        if torch is not None:
            q, k, v = (torch.from_numpy(feeds[n]).to(tdev) for n in "qkv")
            # The reference: SDPA in fp32 on the same inputs.
            ref = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=e["causal"]).double().cpu().numpy()
            result = numerics.compare(got, ref, e["bound"])
            row["err"] = result.rel_l2
            row["worst_element"] = result.worst_ratio
            dt = torch.bfloat16 if e["precision"] == "bf16" else torch.float16
            q2, k2, v2 = (t.to(dt) for t in (q, k, v))
            key = e.get("config", e["name"])
            if key not in sdpa_ms:
                sdpa_ms[key] = time_torch(
                    torch, lambda: sdpa(torch, q2, k2, v2, e["causal"], tdev),
                    args.runs, args.warmup, tdev)
            row["sdpa_ms"] = sdpa_ms[key]
            row["ratio"] = row["sdpa_ms"] / row["ms"]
            ok = result.ok
            row["status"] = "ok" if ok else "FAIL: " + result.figures()
            failed += not ok
        else:
            row["status"] = "ok (no reference)"
        add(row)

    def f(v, fmt):
        return "-" if v is None else format(v, fmt)
    lines = [f"Attention (issue 12): device {args.device}, torch {args.torch}, "
             f"kiln-run --bench {args.runs} --warmup {args.warmup}; set {manifest['set']}", "",
             "| attention | kiln ms (kiln_attn_ kernel) | TFLOP/s | SDPA flash ms | kiln/SDPA speed "
             "| rel. error vs SDPA fp32 (bound) | status |", "|---|"]
    for r in rows:
        if r["kind"] == "attention":
            lines.append(f"| {r['name']} | {f(r.get('ms'), '.4f')} | {f(r.get('tflops'), '.1f')} | "
                         f"{f(r.get('sdpa_ms'), '.4f')} | {f(r.get('ratio'), '.0%')} | "
                         f"{f(r.get('err'), '.2e')} ({r['bound']:g}) | {r['status']} |")
    # The two kernels side by side (speed-up: mma.sync time / wgmma time).
    by = {}
    for r in rows:
        if r["kind"] == "attention":
            by.setdefault(r["config"], {})[r["kernel"]] = r.get("ms")
    pairs = [(c, k) for c, k in by.items() if "wgmma" in k and "mma" in k]
    if pairs:
        lines += ["", "| attention | wgmma ms | mma.sync ms | wgmma speed-up |", "|---|"]
        for c, k in pairs:
            w, s = k["wgmma"], k["mma"]
            speedup = f"{s / w:.2f}x" if w and s else "-"
            lines.append(f"| {c} | {f(w, '.4f')} | {f(s, '.4f')} | {speedup} |")
    lines += ["", "| encoder | median ms per run | status |", "|---|"]
    for r in rows:
        if r["kind"] == "encoder":
            lines.append(f"| {r['name']} | {f(r.get('ms'), '.4f')} | {r['status']} |")
    bench_cli.publish(args.out, "attention", "\n".join(lines), rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(bench_cli.main(prepare, run))
