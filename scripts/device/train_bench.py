#!/usr/bin/env python3
"""Training speed on the GPU: kiln-train's ms per train step vs PyTorch.

    scripts/device/train_bench.py prepare --build build --out device-check/train
        (here: compile the training artifacts with kilnc --train, write their
        data and a manifest, copy bin/kiln-train)
    scripts/device/train_bench.py run --dir device-check/train [--device emu]
        (on the lent GPU machine, from scripts/device-check.sh; --device emu
        is the dry run here: only the small model, two steps)

Models: ONNX MLPs (Gemm, Relu, Gemm, Relu, Gemm; cross-entropy on int64
labels; Adam), the layers autodiff has rules for in this branch: "mlp-small"
(64-64-10, batch 32: the dry run, two steps) and "mlp-large"
(1024-1024-1024-1000, batch 256: big enough that the GEMMs dominate). Per model, kiln-train
trains E epochs of random data and reports its own ms/step (batch upload,
the train_step launches, the state update); PyTorch eager runs the same
model, loss and optimizer (torch.optim.Adam, bf16 autocast: "eager AMP",
and fp32) on the same batch; each model is also compiled with
--precision=bf16 (kiln's AMP: fp32 master weights, bf16 matmul operands),
the row to compare with eager AMP and reports ms/step over the same number of
steps after a warm-up, synchronised. ResNet-50 and the encoder layer (the
issue's models) need autodiff's convolution and normalisation rules (in the
autodiff branch, not yet merged here).

Writes $OUT/train_bench.json and prints a table. Exits 0 when a model is
skipped for want of its files, so device-check.sh never fails on it.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

MODELS = {
    # name: (layer widths, batch, epochs of 4 batches on the GPU)
    "mlp-small": ([64, 64, 10], 32, 4),
    # 3.1M parameters: 12.6 MB of initial state, within the device tool's
    # 64 MiB carry next to device-check's inference artifacts.
    "mlp-large": ([1024, 1024, 1024, 1000], 256, 8),
}


def build_onnx(path, widths, seed):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    r = np.random.default_rng(seed)
    nodes, inits, prev = [], [], "x"
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        w = (r.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"fc{i}.weight"),
                  numpy_helper.from_array(np.zeros(b, np.float32), f"fc{i}.bias")]
        out = f"z{i}" if i == len(widths) - 2 else f"h{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"fc{i}.weight", f"fc{i}.bias"], [out]))
        if i != len(widths) - 2:
            nodes.append(helper.make_node("Relu", [out], [f"a{i}"]))
            out = f"a{i}"
        prev = out
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", widths[0]])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", widths[-1]])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def prepare(args):
    import numpy as np
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(os.path.join(args.out, "bin"), exist_ok=True)
    shutil.copy2(os.path.join(args.build, "bin", "kiln-train"),
                 os.path.join(args.out, "bin", "kiln-train"))
    manifest = {}
    for name, (widths, batch, epochs) in MODELS.items():
        onnx_path = os.path.join(args.out, name + ".onnx")
        build_onnx(onnx_path, widths, seed=0)
        art = name + ".train.kiln"
        # fp32, and bf16 mixed precision (fp32 master weights, bf16 matmul
        # operands: what PyTorch's bf16 autocast does).
        for suffix, precision in (("", "fp32"), (".bf16", "bf16")):
            subprocess.run([os.path.join(args.build, "bin", "kilnc"), onnx_path,
                            "--shape", f"x={batch}x{widths[0]}", "--train",
                            "--loss=cross_entropy", f"--labels=y:{batch}:int64",
                            "--optimizer=adam:lr=0.001", "--precision=" + precision,
                            "-o", os.path.join(args.out, name + suffix + ".train.kiln")],
                           check=True)
        r = np.random.default_rng(1)
        n = batch * 4
        np.save(os.path.join(args.out, name + ".x.npy"),
                r.standard_normal((n, widths[0])).astype(np.float32))
        np.save(os.path.join(args.out, name + ".y.npy"),
                r.integers(0, widths[-1], n).astype(np.int64))
        if name == "mlp-small":  # the emu dry run: two steps
            for part in ("x", "y"):
                full = np.load(os.path.join(args.out, f"{name}.{part}.npy"))
                np.save(os.path.join(args.out, f"{name}.dry.{part}.npy"), full[:2 * batch])
        os.remove(onnx_path)  # not needed on the device
        manifest[name] = {"widths": widths, "batch": batch, "epochs": epochs,
                          "artifact": art, "artifact_bf16": name + ".bf16.train.kiln"}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"train_bench: prepared {', '.join(manifest)} in {args.out}")


def torch_ms(widths, batch, steps, device, amp):
    """PyTorch eager: forward, cross-entropy, backward, Adam; ms/step."""
    import torch
    torch.manual_seed(0)
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i != len(widths) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, widths[0], device=device)
    y = torch.randint(0, widths[-1], (batch,), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    for _ in range(3):
        step()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return (time.perf_counter() - start) * 1e3 / steps


def run(args):
    manifest_path = os.path.join(args.dir, "manifest.json")
    if not os.path.exists(manifest_path):
        print(f"train_bench: skipped ({manifest_path} missing: run "
              "scripts/device/train_bench.py prepare)")
        return 0
    with open(manifest_path) as f:
        manifest = json.load(f)
    dry = args.device == "emu"
    results, failed = [], False
    for name, m in manifest.items():
        if dry and name != "mlp-small":
            continue
        epochs = 1 if dry else m["epochs"]

        def kiln_train(artifact):
            cmd = [os.path.join(args.dir, "bin", "kiln-train"),
                   os.path.join(args.dir, artifact),
                   "--data", os.path.join(args.dir, name + (".dry" if dry else "") + ".x.npy"),
                   "--labels", os.path.join(args.dir, name + (".dry" if dry else "") + ".y.npy"),
                   "--epochs", str(epochs), "--seed", "0", "--device", args.device]
            p = subprocess.run(cmd, capture_output=True, text=True)
            got = re.search(r"train: (\d+) steps, ([0-9.]+) ms/step", p.stdout)
            if p.returncode != 0 or not got:
                return None, (p.stderr or p.stdout).strip().splitlines()[-1:]
            return (int(got.group(1)), float(got.group(2))), None
        row = {"model": name, "batch": m["batch"]}
        got, err = kiln_train(m["artifact"])
        if err:
            failed = True
            row["error"] = err
        else:
            row["steps"], row["kiln_ms"] = got
        if m.get("artifact_bf16"):
            got, err = kiln_train(m["artifact_bf16"])
            if err:
                failed = True
                row["bf16_error"] = err
            else:
                row["kiln_bf16_ms"] = got[1]
        try:
            import torch
            device = "cuda" if args.device != "emu" and torch.cuda.is_available() else "cpu"
            steps = row.get("steps", 32)
            row["torch_device"] = device
            row["torch_amp_ms"] = torch_ms(m["widths"], m["batch"], steps, device, True)
            row["torch_fp32_ms"] = torch_ms(m["widths"], m["batch"], steps, device, False)
        except ImportError:
            row["torch"] = "not installed"
        results.append(row)
    lines = ["train_bench: ms per train step (kiln-train fp32 and bf16 mixed "
             "precision; PyTorch eager Adam, bf16 autocast and fp32)" + (" [DRY RUN on emu]" if dry else "")]
    for r in results:
        if "error" in r:
            lines.append(f"  {r['model']:<10} batch {r['batch']:>4}: kiln-train FAILED: {r['error']}")
            continue
        t = (f", torch[{r['torch_device']}] amp {r['torch_amp_ms']:.3f} ms, "
             f"fp32 {r['torch_fp32_ms']:.3f} ms, kiln/amp "
             f"{r['torch_amp_ms'] / r['kiln_ms']:.2f}x" if "torch_amp_ms" in r
             else ", torch not installed")
        lines.append(f"  {r['model']:<10} batch {r['batch']:>4}: kiln {r['kiln_ms']:.3f} ms"
                     f" over {r['steps']} steps{t}")
        if "bf16_error" in r:
            lines.append(f"  {r['model']:<10} bf16 AMP: kiln-train FAILED: {r['bf16_error']}")
        elif "kiln_bf16_ms" in r:
            t = (f", torch[{r['torch_device']}] amp {r['torch_amp_ms']:.3f} ms, "
                 f"kiln-bf16/amp {r['torch_amp_ms'] / r['kiln_bf16_ms']:.2f}x"
                 if "torch_amp_ms" in r else ", torch not installed")
            lines.append(f"  {r['model']:<10} bf16 AMP: kiln {r['kiln_bf16_ms']:.3f} ms"
                         f" over {r['steps']} steps{t}")
    print("\n".join(lines))
    out = os.environ.get("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "train_bench.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(out, "train_bench.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="mode", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--build", default="build")
    pp.add_argument("--out", default="device-check/train")
    pr = sub.add_parser("run")
    pr.add_argument("--dir", default="device-check/train")
    pr.add_argument("--device", default="cuda")
    a = p.parse_args()
    return prepare(a) if a.mode == "prepare" else run(a)


if __name__ == "__main__":
    sys.exit(main())
