#!/usr/bin/env python3
"""PyTorch eager baselines for the GPU check, with the check's own weights.

Usage: torch_baselines.py resnet50|encoder|lstm MODEL.onnx RUNDIR [--device cuda]
                          [--runs 20] [--warmup 5] [--compile MODE]

RUNDIR is what make_reference.py wrote (inputs/, reference/). Prints one line
per variant: name, median ms, relative error of the output norm against the
onnxruntime fp32 reference.

- resnet50: torchvision.models.resnet50 with every parameter and running
  statistic taken from the ONNX model's initializers by name (the light
  ResNet-50 is Caffe2's: res<stage>_<block>_branch2{a,b,c} are a block's
  conv1..3, branch1 its downsample, pred the classifier; strides sit on the
  3x3 convolutions, as in torchvision). Each of torchvision's tensors must be
  matched exactly once with its shape; if not, the baseline runs with
  torchvision's own random weights, for its time only (no error, and the
  note says why). A softmax is appended (the ONNX model ends with one).
- encoder: an nn.Module written the way a PyTorch user writes
  make_encoder.py's layer (nn.Embedding, nn.Linear, nn.LayerNorm,
  F.gelu, softmax attention), weights from the initializers.
- lstm: device_models.py's bidirectional 2-layer LSTM as one nn.LSTM
  (num_layers=2, bidirectional: cuDNN's RNN on a GPU), W, R and B of each
  layer and direction from the initializers, ONNX's gate order (i, o, f,
  c) reordered to PyTorch's (i, f, g, o); its [T, B, 2H] output viewed as
  ONNX's [T, 2, B, H].

Variants: "fp32 eager" (TF32 off, in cuDNN convolutions as in matmuls: the
kiln fp32 artifacts compute in full fp32) and "bf16 eager" (module and input
cast to bfloat16; ResNet-50 also channels_last, as PyTorch recommends for
bf16 convolutions). Each: `warmup` untimed runs, then `runs` runs each timed
with CUDA events (on the CPU, perf_counter), median.

--compile MODE (the GPU check's compile phase): instead, "bf16 compile MODE"
only: the bf16 module (ResNet-50 channels_last) through
torch.compile(mode=MODE), e.g. max-autotune; the first call compiles (its
time is in the note), then timed as above. Each row is also printed as
"RESULT {json}" for device_check.py, which runs this in its own process
group and kills it when the phase's budget is spent.

The GEMM phase's cuBLAS baseline is gemm_check.torch_gemm.
"""
import argparse
import json
import math
import os
import re
import statistics
import sys
import time

import numpy as np

# scripts/numerics.py: next to this file in the device pack, one folder up
# in the source tree.
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
import numerics  # noqa: E402


def onnx_arrays(path):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return model, arrays


# --- ResNet-50 -------------------------------------------------------------

BN_FIELDS = {"s": "weight", "b": "bias", "rm": "running_mean", "riv": "running_var"}


def resnet_key(name):
    """torchvision's state_dict key for a light ResNet-50 initializer."""
    name = name.removeprefix("gpu_0/")
    if name == "conv1_w_0":
        return "conv1.weight"
    if name == "pred_w_0":
        return "fc.weight"
    if name == "pred_b_0":
        return "fc.bias"
    m = re.fullmatch(r"res_conv1_bn_(s|b|rm|riv)_0", name)
    if m:
        return "bn1." + BN_FIELDS[m.group(1)]
    m = re.fullmatch(r"res(\d)_(\d+)_branch(1|2a|2b|2c)_(w|bn_s|bn_b|bn_rm|bn_riv)_0", name)
    if not m:
        return None
    stage, block, branch, what = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    prefix = f"layer{stage - 1}.{block}."
    if branch == "1":
        conv, bn = prefix + "downsample.0", prefix + "downsample.1"
    else:
        i = "abc".index(branch[1]) + 1
        conv, bn = prefix + f"conv{i}", prefix + f"bn{i}"
    if what == "w":
        return conv + ".weight"
    return bn + "." + BN_FIELDS[what[3:]]


def resnet50(path):
    """(module, note): torchvision's ResNet-50 holding the ONNX weights."""
    import torch
    import torchvision
    model, arrays = onnx_arrays(path)
    net = torchvision.models.resnet50(weights=None)
    state = net.state_dict()
    wanted = {k for k in state if not k.endswith("num_batches_tracked")}
    loaded = {}
    for name, array in arrays.items():
        if array.dtype != np.float32 or array.size < 2:
            continue
        key = resnet_key(name)
        if key is None:
            return None, f"initializer {name} has no torchvision counterpart"
        if key in loaded or key not in wanted:
            return None, f"initializer {name} -> {key}: duplicate or unknown"
        if tuple(state[key].shape) != array.shape:
            return None, f"{name} {array.shape} vs {key} {tuple(state[key].shape)}"
        loaded[key] = torch.from_numpy(array.copy())
    if set(loaded) != wanted:
        return None, f"{len(wanted - set(loaded))} torchvision tensors not in the ONNX model"
    net.load_state_dict(loaded, strict=False)
    eps = [a.f for n in model.graph.node if n.op_type == "BatchNormalization"
           for a in n.attribute if a.name == "epsilon"]
    for module in net.modules():
        if isinstance(module, torch.nn.BatchNorm2d) and eps:
            module.eps = eps[0]
    strides = {n.input[1].removeprefix("gpu_0/"): [a.ints for a in n.attribute if a.name == "strides"]
               for n in model.graph.node if n.op_type == "Conv"}
    if list(strides.get("res3_0_branch2b_w_0", [[1, 1]])[0]) != [2, 2]:
        return None, "the ONNX model strides another convolution than torchvision"

    return with_softmax(net), "torchvision resnet50, ONNX weights by name"


def with_softmax(body):
    import torch

    class WithSoftmax(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = body

        def forward(self, x):
            return torch.softmax(self.body(x), dim=1)

    return WithSoftmax().eval()


# --- Encoder layer -----------------------------------------------------------

def encoder(path):
    """(module, note): make_encoder.py's layer as a PyTorch module."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    _, w = onnx_arrays(path)
    vocab, hidden = w["embeddings.word"].shape
    seq = w["embeddings.position"].shape[0]
    heads = int(np.asarray(w["heads"]).reshape(-1)[0])
    ffn = w["ffn.in.weight"].shape[1]

    def linear(prefix):
        layer = nn.Linear(w[prefix + ".weight"].shape[0], w[prefix + ".weight"].shape[1])
        layer.weight.data = torch.from_numpy(np.ascontiguousarray(w[prefix + ".weight"].T))
        layer.bias.data = torch.from_numpy(w[prefix + ".bias"].copy())
        return layer

    def norm(prefix):
        layer = nn.LayerNorm(hidden, eps=1e-12)
        layer.weight.data = torch.from_numpy(w[prefix + ".gamma"].copy())
        layer.bias.data = torch.from_numpy(w[prefix + ".beta"].copy())
        return layer

    class EncoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.word = nn.Embedding(vocab, hidden)
            self.word.weight.data = torch.from_numpy(w["embeddings.word"].copy())
            self.position = nn.Parameter(torch.from_numpy(w["embeddings.position"].copy()))
            self.norm0 = norm("embeddings.norm")
            self.q, self.k, self.v = (linear("attention." + n) for n in ("query", "key", "value"))
            self.o = linear("attention.output")
            self.norm1 = norm("attention.norm")
            self.ffn_in, self.ffn_out = linear("ffn.in"), linear("ffn.out")
            self.norm2 = norm("ffn.norm")

        def forward(self, ids):
            b, s = ids.shape
            x = self.norm0(self.word(ids) + self.position[:s])

            def split(t):
                return t.view(b, s, heads, hidden // heads).transpose(1, 2)

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(hidden // heads)
            ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, hidden)
            x = self.norm1(self.o(ctx) + x)
            y = self.ffn_out(F.gelu(self.ffn_in(x)))
            return self.norm2(y + x)

    del seq, ffn
    return EncoderLayer().eval(), "nn.Module mirroring make_encoder.py, ONNX weights"


# --- Recurrent: the 2-layer LSTM ------------------------------------------------

def lstm(path):
    """(module, note): device_models.py's LSTM as nn.LSTM (cuDNN on a GPU)."""
    import torch
    from torch import nn
    _, w = onnx_arrays(path)
    _, gates_h, inputs = w["W1"].shape
    h = gates_h // 4
    net = nn.LSTM(inputs, h, num_layers=2, bidirectional=True)
    # ONNX stacks the gates i, o, f, c; PyTorch i, f, g (= c), o.
    order = np.concatenate([np.arange(0, h), np.arange(2 * h, 3 * h),
                            np.arange(3 * h, 4 * h), np.arange(h, 2 * h)])
    for layer in (1, 2):
        for d, suffix in ((0, ""), (1, "_reverse")):
            def put(name, value):
                getattr(net, f"{name}_l{layer - 1}{suffix}").data = torch.from_numpy(
                    np.ascontiguousarray(value[order]))
            put("weight_ih", w[f"W{layer}"][d])
            put("weight_hh", w[f"R{layer}"][d])
            put("bias_ih", w[f"B{layer}"][d][:4 * h])
            put("bias_hh", w[f"B{layer}"][d][4 * h:])

    class OnnxLayout(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = net

        def forward(self, x):
            y, _ = self.rnn(x)
            t, b, _ = y.shape
            return y.view(t, b, 2, h).permute(0, 2, 1, 3)

    return OnnxLayout().eval(), "nn.LSTM(num_layers=2, bidirectional), ONNX weights"


# --- Timing ------------------------------------------------------------------

def timed(fn, runs, warmup, device):
    import torch
    for _ in range(warmup):
        fn()
    times = []
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        for _ in range(runs):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    else:
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def rel_err(got, ref):
    """PyTorch's own relative error against the reference (informational:
    the baselines are not under Kiln's bounds); scripts/numerics.py's
    measure."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != np.shape(ref):
        return float("inf")
    return numerics.rel_l2(got, ref)


def setup(kind, path, rundir, device):
    """(module, comparable, note, input on device, reference)."""
    import torch
    make = (resnet50 if kind.startswith("resnet50")
            else lstm if kind.startswith("lstm") else encoder)
    net, note = make(path)
    comparable = net is not None
    if not comparable:  # still a timing baseline, without an error
        import torchvision
        net = with_softmax(torchvision.models.resnet50(weights=None))
        note = "torchvision's own random weights (" + note + "): no error"
    with open(os.path.join(rundir, "inputs", "names.txt")) as f:
        files = [line.rstrip("\n").split("\t")[1] for line in f if line.strip()]
    x = torch.from_numpy(np.load(os.path.join(rundir, "inputs", files[0]))).to(device)
    refs = sorted(os.listdir(os.path.join(rundir, "reference")))
    ref = np.load(os.path.join(rundir, "reference", refs[0]))
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return net, comparable, note, x, ref


def compiled(kind, path, rundir, device="cuda", runs=20, warmup=5, mode="max-autotune"):
    """[("bf16 compile MODE[ channels_last]", ms, rel err or None, note)]."""
    import torch
    net, comparable, note, x, ref = setup(kind, path, rundir, device)
    net = net.to(device).to(torch.bfloat16)
    variant = f"bf16 torch.compile {mode}"
    xv = x
    if x.dtype.is_floating_point and x.dim() == 4:
        net = net.to(memory_format=torch.channels_last)
        xv = x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
        variant += " channels_last"
    elif x.dtype.is_floating_point:  # a sequence (the LSTM)
        xv = x.to(torch.bfloat16)
    t0 = time.time()
    fn = torch.compile(net, mode=mode)
    with torch.inference_mode():
        out = fn(xv).float().cpu().numpy()
        seconds = time.time() - t0
        ms = timed(lambda: fn(xv), runs, warmup, device)
    return [(variant, ms, rel_err(out, ref) if comparable else None,
             f"{note}; compiled in {seconds:.0f} s")]


def baselines(kind, path, rundir, device="cuda", runs=20, warmup=5):
    """[(variant, median ms or None, rel err or None, note)]."""
    import torch
    net, comparable, note, x, ref = setup(kind, path, rundir, device)
    rows = []
    image = x.dtype.is_floating_point and x.dim() == 4
    for variant in ("fp32 eager", "bf16 eager"):
        if variant.startswith("bf16"):
            net = net.to(torch.bfloat16)
            if image:
                net = net.to(memory_format=torch.channels_last)
                xv = x.to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
                variant = "bf16 eager channels_last"
            elif x.dtype.is_floating_point:  # a sequence (the LSTM)
                xv = x.to(torch.bfloat16)
            else:
                xv = x
        else:
            net = net.to(device)
            xv = x
        with torch.inference_mode():
            out = net(xv).float().cpu().numpy()
            ms = timed(lambda: net(xv), runs, warmup, device)
        rows.append((variant, ms, rel_err(out, ref) if comparable else None, note))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["resnet50", "encoder", "lstm"])
    ap.add_argument("model")
    ap.add_argument("rundir")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", metavar="MODE", help="torch.compile(mode=MODE), bf16 only")
    args = ap.parse_args()
    if args.compile:
        rows = compiled(args.kind, args.model, args.rundir, args.device, args.runs,
                        args.warmup, args.compile)
    else:
        rows = baselines(args.kind, args.model, args.rundir, args.device, args.runs,
                         args.warmup)
    for variant, ms, err, note in rows:
        ms_s = f"{ms:.3f} ms" if ms is not None else "-"
        err_s = f"{err:.2e}" if err is not None else "-"
        print(f"{variant:28s} {ms_s:>12s} {err_s:>10s}  ({note})")
        print("RESULT " + json.dumps(dict(variant=variant, ms=ms, err=err, note=note)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
