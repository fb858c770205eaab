#!/usr/bin/env python3
"""Attention graphs on the fused attention kernel, against numpy float64.

Usage: attention_kernels.py WORKDIR [--kilnc PATH] [--kiln-run PATH]
                            [--only NAME,...] [--wgmma true|false]

Each case is an ONNX graph written the way exporters write attention:
MatMul(Q, Transpose(K)) -> Mul or Div by the scale (before or after the
product) -> an optional mask -> Softmax -> MatMul with V. The masks are a
BERT padding mask ((1 - m) * -10000 broadcast over heads and queries), a
causal mask from Trilu + Where (bottom-right aligned when the query and key
lengths differ, as in decoding with a KV cache) or from Where on a bool
tril initializer (the kernel then skips key tiles past the diagonal), and
GQA's Expand + Reshape of K and V. kilnc must turn each into one kiln_attn_ kernel (kilnc --stats);
kiln-run runs it on emu, and its output is compared with numpy float64 on
the same inputs. kilnc's default target is sm_90, where bf16/fp16 run the
wgmma kernel; --wgmma true|false compiles the bf16/fp16 runs only, with
kilnc --wgmma=true|false, and fails a run whose kernel is not the sm_90a
wgmma kernel (true) or the mma.sync one (false). One line per case and
precision:

  <case> <precision>: <kernel config> rel-err <e> (bound <b>), worst element
                      <r> of its bound ... ok|FAIL

Bounds on the relative error of the output norm, with the per-element
bounds that go with them (scripts/numerics.py):
  fp32  1e-4: the kernel accumulates in fp32 over at most 1000 keys and 256
        head elements ((Sk + D) u = 7e-5 with u = 2^-24, worst case) and its
        exponentials are ex2.approx (2^-22 relative);
  bf16  2e-2: Q, K and V are rounded to bf16 (2^-9 relative each) and so is
        P before the second product, the project's bf16 bound;
  fp16  5e-3: the same with 10-bit mantissas (2^-12).
"""
import argparse
import os
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "scripts"))
import numerics  # noqa: E402
from fused_index_arithmetic import (  # noqa: E402
    compile_with_stats, contraction_report)

F = TensorProto.FLOAT


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=outputs[0], **attrs)


def build(c):
    """The ONNX model of case `c` (a dict) and its inputs' shapes."""
    b, h, sq, sk, d = c["b"], c["h"], c["sq"], c["sk"], c["d"]
    kv_heads = c.get("kv_heads", h)
    inits = [numpy_helper.from_array(np.array(np.sqrt(d), np.float32), "sqrt_d")]
    nodes = []
    inputs = [("q", [b, h, sq, d]), ("k", [b, kv_heads, sk, d]),
              ("v", [b, kv_heads, sk, d])]
    q, k, v = "q", "k", "v"
    if kv_heads != h:
        group = h // kv_heads
        inits += [numpy_helper.from_array(np.array([2], np.int64), "axis2"),
                  numpy_helper.from_array(
                      np.array([b, kv_heads, group, sk, d], np.int64), "expand"),
                  numpy_helper.from_array(np.array([b, h, sk, d], np.int64),
                                          "merge")]
        for name in ("k", "v"):
            nodes += [node("Unsqueeze", [name, "axis2"], [name + "_u"]),
                      node("Expand", [name + "_u", "expand"], [name + "_e"]),
                      node("Reshape", [name + "_e", "merge"], [name + "_g"])]
        k, v = "k_g", "v_g"
    if c.get("scale_q"):
        inits.append(numpy_helper.from_array(
            np.array(1 / np.sqrt(d), np.float32), "inv_sqrt_d"))
        nodes.append(node("Mul", [q, "inv_sqrt_d"], ["qs"]))
        q = "qs"
    nodes.append(node("Transpose", [k], ["kt"], perm=[0, 1, 3, 2]))
    nodes.append(node("MatMul", [q, "kt"], ["s"]))
    s = "s"
    if not c.get("scale_q"):
        nodes.append(node("Div", [s, "sqrt_d"], ["ss"]))
        s = "ss"
    if c.get("padding"):
        inputs.append(("mask", [b, sk]))
        inits += [numpy_helper.from_array(np.array(1, np.float32), "one"),
                  numpy_helper.from_array(np.array(-10000, np.float32), "big"),
                  numpy_helper.from_array(np.array([1, 2], np.int64), "axes12")]
        nodes += [node("Sub", ["one", "mask"], ["inv"]),
                  node("Mul", ["inv", "big"], ["neg"]),
                  node("Unsqueeze", ["neg", "axes12"], ["ext"]),
                  node("Add", [s, "ext"], ["sm"])]
        s = "sm"
    if c.get("causal_const"):
        # A bool tril buffer, as GPT-2's exporters store it: a constant
        # triangle the kernel compares indices against and skips past.
        i = np.arange(sq)[:, None]
        j = np.arange(sk)[None, :]
        inits += [numpy_helper.from_array(j - i <= sk - sq, "tril"),
                  numpy_helper.from_array(np.array(-1e30, np.float32), "fill")]
        nodes.append(node("Where", ["tril", s, "fill"], ["sc"]))
        s = "sc"
    if c.get("causal"):
        inits += [numpy_helper.from_array(np.ones((sq, sk), np.float32), "ones"),
                  numpy_helper.from_array(np.array(sk - sq, np.int64), "diag"),
                  numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
        nodes += [node("Trilu", ["ones", "diag"], ["tri"], upper=0),
                  node("Cast", ["tri"], ["allowed"], to=TensorProto.BOOL),
                  node("Where", ["allowed", s, "ninf"], ["sc"])]
        s = "sc"
    nodes += [node("Softmax", [s], ["p"], axis=-1),
              node("MatMul", ["p", v], ["y"])]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info(n, F, shape) for n, shape in inputs],
        [helper.make_tensor_value_info("y", F, [b, h, sq, d])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m, dict(inputs)


def reference(c, feeds):
    """numpy float64 attention of the case."""
    q, k, v = (feeds[n].astype(np.float64) for n in ("q", "k", "v"))
    h, kv_heads = c["h"], c.get("kv_heads", c["h"])
    if kv_heads != h:
        k = np.repeat(k, h // kv_heads, axis=1)
        v = np.repeat(v, h // kv_heads, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(c["d"])
    if c.get("padding"):
        s = s + ((1 - feeds["mask"].astype(np.float64)) * -10000)[:, None, None, :]
    if c.get("causal") or c.get("causal_const"):
        i = np.arange(c["sq"])[:, None]
        j = np.arange(c["sk"])[None, :]
        s = np.where(j - i <= c["sk"] - c["sq"], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v


def case(name, d, sq, sk=None, h=2, b=1, **flags):
    return name, dict(d=d, sq=sq, sk=sk or sq, h=h, b=b, **flags)


# Head dims 32..256, lengths 1 (decode), 17 (off every tile), 128 and 1000,
# masks, unequal lengths and GQA. Long fp32 cases keep heads and head dims
# small: emu runs the FFMA kernel one warp instruction at a time.
CASES = dict([
    case("d32-s17", 32, 17),
    case("d64-s128", 64, 128),
    case("d128-s17-padding", 128, 17, padding=True),
    case("d256-s17-causal", 256, 17, causal=True),
    case("d64-decode-q1-k128", 64, 1, 128, causal=True),
    case("d32-s1", 32, 1),
    case("d64-q17-k128-padding", 64, 17, 128, padding=True, b=2),
    case("d128-q128-k17", 128, 128, 17, scale_q=True),
    case("d32-s1000-causal", 32, 1000, h=1, causal=True),
    case("d64-s1000-padding", 64, 1000, h=1, padding=True),
    case("d128-gqa-s33", 128, 33, h=4, kv_heads=2, causal=True),
    case("d64-q100-k300-tril", 64, 100, 300, causal_const=True),
    case("d64-mqa-s20", 64, 20, h=3, kv_heads=1),
    # More key tiles than the wgmma kernel's ring has stages (two consumer
    # warpgroups at d128, one at d256).
    case("d128-s300-causal", 128, 300, h=1, causal=True),
    case("d256-s130", 256, 130, h=1),
])

PRECISIONS = {
    "fp32": ([], 1e-4),
    "bf16": (["--precision=bf16"], 2e-2),
    "fp16": (["--precision=fp16"], 5e-3),
}

# Which precisions run per case (emu time: the FFMA kernel is the slow one).
DEFAULT = ["fp32", "bf16"]
ONLY = {"d32-s1000-causal": ["fp32", "bf16", "fp16"],
        "d64-s1000-padding": ["fp32", "bf16"],
        "d256-s17-causal": ["fp32", "bf16", "fp16"],
        "d128-s300-causal": ["bf16"],
        "d256-s130": ["fp16"]}


def run(args, name, c, precision):
    flags, bound = PRECISIONS[precision]
    if args.wgmma:
        flags = flags + [f"--wgmma={args.wgmma}"]
    work = os.path.join(args.workdir, name, precision)
    os.makedirs(work, exist_ok=True)
    m, shapes = build(c)
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    # crc32, not hash(): Python salts str hashes per process, so the inputs
    # would change from run to run.
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    feeds = {n: rng.standard_normal(shape).astype(np.float32)
             for n, shape in shapes.items()}
    if "mask" in feeds:
        # Each sequence keeps a prefix of its keys (at least one).
        lengths = rng.integers(1, c["sk"] + 1, size=c["b"])
        feeds["mask"] = (np.arange(c["sk"])[None, :] <
                         lengths[:, None]).astype(np.float32)
    artifact = os.path.join(work, "m.kiln")
    stats, error = compile_with_stats(args.kilnc, path, artifact, flags)
    if error:
        print(f"{name} {precision}: {error} FAIL")
        return False
    report = contraction_report(stats)
    kernels = [line.split(": ", 1)[1].split(",")[0] for line in report
               if line.startswith("kiln_attn_")]
    if len(kernels) != 1:
        print(f"{name} {precision}: not one attention kernel: {report} FAIL")
        return False
    family = {"true": "attn_wgmma_f16", "false": "attn_mma_f16"}.get(args.wgmma)
    if family and not kernels[0].startswith(family + " "):
        print(f"{name} {precision}: {kernels[0]} is not {family} FAIL")
        return False
    command = [args.kiln_run, artifact, "--device", "emu", "-o",
               os.path.join(work, "out")]
    for n, data in feeds.items():
        np.save(os.path.join(work, f"{n}.npy"), data)
        command += ["-i", f"{n}={os.path.join(work, n + '.npy')}"]
    ran = subprocess.run(command, capture_output=True, text=True)
    if ran.returncode != 0:
        print(f"{name} {precision}: kiln-run failed: "
              f"{ran.stderr.strip().splitlines()[:1]} FAIL")
        return False
    result = numerics.compare(np.load(os.path.join(work, "out", "y.npy")),
                              reference(c, feeds), bound, "y")
    print(f"{name} {precision}: {kernels[0]} {result.figures()} "
          f"{'ok' if result.ok else 'FAIL'}")
    return result.ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workdir")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--only", default="")
    ap.add_argument("--wgmma", choices=["true", "false"])
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(CASES)
    failed = runs = 0
    for name in names:
        for precision in ONLY.get(name, DEFAULT):
            if args.wgmma and precision == "fp32":
                continue
            runs += 1
            failed += not run(args, name, CASES[name], precision)
    print(f"{runs} runs, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
