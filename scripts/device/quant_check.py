#!/usr/bin/env python3
"""The quantized GEMM kernels on the GPU: int8 and fp8 against bf16.

    scripts/device/quant_check.py prepare --build build --out device-check/quant
                                          [--dry-run]
        (here: build the models, compile them with build/bin/kilnc for sm_90,
        write quant.json; ~0.8 MiB at 4096^3, ~0.3 MiB for --dry-run)
    scripts/device/quant_check.py run --dir device-check/quant
                                      [--device cuda|emu] [--kiln-run PATH]
                                      [--runs N] [--warmup N] [--torch cuda|no]
                                      [--out DIR]
        (on the lent GPU machine, from scripts/device-check.sh, phase "quant"
        of the kernels group; --device emu is the dry run here)

One GEMM, Y = A W with A [M, K] a model input and W [K, N] a weight, at
M = N = K = 4096 (--dry-run: M 128, N 256, K 192: several tiles in M and
N, K off the fp8 kernel's 128-deep tile; about a second on emu), compiled
four ways (kilnc --target=sm_90 --stats; a case that does not compile, or
that --stats does not put on the expected family, is recorded as not
prepared, with the reason, and the run reports it as FAIL: prepare still
exits 0, so that prepare.sh builds the rest of the set):

  int8 wgmma_s8  QOperator: one QLinearMatMul (opset 13), A u8 with zero
                 point 128, W s8 with zero point 2 and values in [-64, 63]
                 (7-bit: onnxruntime's MLAS u8 x s8 kernel sums byte pairs
                 in int16 (vpmaddubsw) on hosts without VNNI, which
                 saturates for full 8-bit weights; test/Target/CUDA/
                 int8_routing.py), per-tensor scales, Y u8 with zero
                 point 128; the scales put Y's standard deviation near 40
                 steps, so the clamp is reached but rare;
  int8 mma_s8    the same model compiled with --wgmma=false (mma.sync
                 m16n8k32);
  fp8 wgmma_f8   QDQ in float8 e4m3 (opset 19): A f32 -> QuantizeLinear /
                 DequantizeLinear with a FLOAT8E4M3FN zero point of 0 and
                 scale sqrt(3)/448 (A's values lie in (-sqrt 3, sqrt 3));
                 W e4m3 (codes with exponent field 4..10, |w| in
                 [1/8, 15]) -> DequantizeLinear with one f32 scale per
                 column (axis 1, no zero point, as kilnc --precision=fp8
                 and onnxruntime's quantizer write them); Y f32 = the
                 MatMul of the two;
  bf16 wgmma_f16 C = A B with A and B both bf16 inputs and C bf16
                 (--precision=bf16 --io-precision=bf16; wgmma_bench.py's
                 model), the baseline of the ratio.

The weights are seeded (scripts/device/portable_random.py, the same bits
under any numpy) and never carried as .npy: the artifacts are compiled
with --strip-weights, and the run regenerates the model, checks the
weight's and the input's SHA-256 against the ones prepare recorded, and
binds the initializers with kiln-run --weights (the fp8 weight as '|V1'
e4m3 codes; its origin names the runtime's dtype, f8e4m3fn, since
2026-12-05: MLIR's spelling f8E4M3FN did not rebind). The references are
computed at run time from the regenerated operands, at both sizes, so the
dry run here goes through the very code the GPU runs (the 4096^3 operands
are 16-64 MiB each, too big to carry; prepare writes ~0.8 MiB). None of
them uses Kiln:

  int8  (1) numpy: the exact integer sums sum_k (a - 128)(w - 2), computed
        as a float64 matrix product, which is exact here (each product is
        below 2^16 in magnitude and every partial sum below 2^53 for
        K < 2^37), then onnxruntime's requantization (MlasRequantizeOutput):
        the f32 multiplier (a_scale * w_scale) / y_scale computed in f32
        left to right, the sum converted to f32 and multiplied by it,
        clamped to [-128, 127] in f32, rounded half to even, plus 128. At
        4096^3 a float64 product of all of Y is too slow on the device's
        CPU for the budget, so 256 sampled rows (gemm_check.sample_rows:
        the first 128 and 128 seeded others) and 256 sampled columns (the
        same rule), every one of their elements; at the dry size all of Y.
        Bound: bit-exact.
        (2) onnxruntime (graph optimizations off) on the same model, all of
        Y: MLAS's integer GEMM plus the same requantization, bit-exact with
        7-bit weights.
  fp8   onnxruntime (graph optimizations off) on the same QDQ model: A
        quantized to e4m3 (x / scale in f32, round to nearest even,
        saturate) and dequantized, W dequantized, an f32 MatMul. Every
        element within 1e-3 of max |Y_ort| (test/Target/CUDA/fp8_models.py's
        bound). Why: both sides round the same f32 quotients to the same
        e4m3 activations and multiply the same e4m3 values (a product of two
        4-bit significands is exact in f32); they differ only in the f32
        summation order and where the scales are applied (onnxruntime sums
        dequantized products, the kernel scales its fp32 accumulator by
        a_scale * w_scale[n] in the epilogue): a few f32 ulps of the partial
        sums. Measured on emu: 3e-4 of the bound (3e-7 of max |Y|) at K =
        192 and at K = 4096 (M 128, N 256), so the bound has a margin of
        ~3000 and still catches one lost or doubled product of typical size
        (|a w| ~ 0.04, 6x the bound at the dry size) and any lost k-step at
        K = 4096. Also printed: how many elements differ at all (most do, by
        ulps).
  bf16  gemm_check.Reference: float64 rows and column sums of the operands
        rounded to bf16, bound 1e-2 (wgmma_bench.py's).

Then, per artifact, kiln-run --bench N --warmup W (N 20, W 3 on cuda; 1
and 0 on emu): the median of the GEMM kernel's own line (kiln_qgemm_*,
kiln_f8*, kiln_gemm_*; fp8's quantization of A runs in its own elementwise
kernel, shown beside it as the run's median). On emu the times are the
emulator's, not a GPU's. Prints one line per case, ending in ok or FAIL:

  int8 wgmma_s8 4096x4096x4096 (MxNxK): 0 of 2097152 sampled (256 rows,
      256 columns) elements differ from the int64 reference, 0 of 16777216
      from onnxruntime; bound bit-exact ok
  fp8 wgmma_f8 ...: worst element 0.0003 of its bound (1e-3 of max |y| =
      39.32), 16000000 of 16777216 elements differ from onnxruntime ok
  bf16 wgmma_f16 ...: rel. error 1.7e-03 (bound 0.01; rows ..., column
      sums ...) ok

then a table (kernel family, shape, time in us on the device, TOPS =
2 M N K / time, ratio = the bf16 kernel's time / this one's, the run's
median, the check) with, on cuda when torch imports, the baselines
torch._int_mm (s8 x s8 -> s32 on the same shape) and torch._scaled_mm
(e4m3 x e4m3, per-tensor scales, bf16 out), each timed with CUDA events
after a warm-up; a baseline that fails says why and fails nothing. Writes
OUT/quant.txt (and quant.json; OUT: --out, else $OUT, else /tmp). Exits 1
when a run fails or a check is out of bounds; 0 with "skipped" when the
directory was not prepared.

KILN_TEST_CORRUPT=X moves one element of every Kiln output (row
min(64, M-1), column N/2: inside every sampled set) by X: X steps of the u8
output for int8 (at least 1), X times the output's rms for fp8 and bf16
(the checks' teeth).
"""
import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path[:0] = [HERE, os.path.join(ROOT, "scripts")]

FULL = [(4096, 4096, 4096)]  # (M, N, K)
DRY = [(128, 256, 192)]
# (name, kind, expected family in kilnc --stats, kilnc flags)
CASES = [("int8-wgmma", "int8", "wgmma_s8", []),
         ("int8-mma", "int8", "mma_s8", ["--wgmma=false"]),
         ("fp8-wgmma", "fp8", "wgmma_f8", []),
         ("bf16-wgmma", "bf16", "wgmma_f16",
          ["--precision=bf16", "--io-precision=bf16"])]
KERNEL_PREFIX = {"int8": "kiln_qgemm_", "fp8": "kiln_f8", "bf16": "kiln_gemm_"}
# Seeds of the portable generator (weights) and of the inputs.
SEED_INT8_W, SEED_INT8_A = 4101, 4102
SEED_FP8_W, SEED_FP8_S, SEED_FP8_A = 4201, 4202, 4203
SEED_BF16_A, SEED_BF16_B = 21, 22  # wgmma_bench.py's
# int8 quantization parameters.
ZA, ZW, ZY = 128, 2, 128
A_SCALE, W_SCALE = 0.02, 0.01
FP8_BOUND = 1e-3  # of max |y| (fp8_models.py)
BF16_BOUND = 1e-2  # wgmma_bench.py's
PEAK_TOPS = {"int8": 1979.0, "fp8": 1979.0, "bf16": 989.0}  # H200 dense
KERNEL_TIME = re.compile(r"kernel (\S+) \(x\d+\): median ([0-9.]+) ms")
RUN_TIME = re.compile(r"per run: median ([0-9.]+) ms")
CONFIG = re.compile(r"^\s*(kiln_\w+): (\w+) ([^,\n]*),", re.M)


# --- operands and models (the same code here and on the device) ----------

def sha256(array):
    import numpy as np
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def y_scale(k):
    """int8 output scale: Y's standard deviation near 40 steps. (a - 128)
    is uniform on [-128, 127] (sd 73.9), w - 2 on [-66, 61] (sd 36.9)."""
    import numpy as np
    return float(np.float32(A_SCALE * W_SCALE * 73.9 * 36.9 * math.sqrt(k) / 40))


def int8_operands(m, n, k):
    import numpy as np
    from portable_random import PortableRandom
    w = ((PortableRandom(SEED_INT8_W).bits(k * n) >> np.uint64(57))
         .astype(np.int16) - 64).astype(np.int8).reshape(k, n)
    a = (PortableRandom(SEED_INT8_A).bits(m * k) >> np.uint64(56)).astype(
        np.uint8).reshape(m, k)
    return a, w


def int8_model(m, n, k, w):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.array(A_SCALE, np.float32), "a_scale"),
             numpy_helper.from_array(np.array(ZA, np.uint8), "a_zero_point"),
             numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(W_SCALE, np.float32), "w_scale"),
             numpy_helper.from_array(np.array(ZW, np.int8), "w_zero_point"),
             numpy_helper.from_array(np.array(y_scale(k), np.float32), "y_scale"),
             numpy_helper.from_array(np.array(ZY, np.uint8), "y_zero_point")]
    graph = helper.make_graph(
        [helper.make_node("QLinearMatMul",
                          ["a", "a_scale", "a_zero_point", "w", "w_scale",
                           "w_zero_point", "y_scale", "y_zero_point"], ["y"])],
        "qgemm", [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def int8_requantize(acc, k):
    """onnxruntime's QLinearMatMul output from exact integer sums `acc`
    (MlasRequantizeOutput, all in f32)."""
    import numpy as np
    f32 = np.float32
    multiplier = (f32(A_SCALE) * f32(W_SCALE)) / f32(y_scale(k))
    v = np.asarray(acc).astype(np.float32) * multiplier
    v = np.minimum(np.maximum(v, f32(0 - ZY)), f32(255 - ZY))
    return (np.rint(v).astype(np.int32) + ZY).astype(np.uint8)


def fp8_operands(m, n, k):
    """x f32 [m, k]; W as e4m3 codes (uint8) [k, n]; per-column scales."""
    import numpy as np
    from portable_random import PortableRandom
    allowed = np.array([s << 7 | e << 3 | mt for s in (0, 1)
                        for e in range(4, 11) for mt in range(8)], np.uint8)
    # Drawn K-major (the order the artifact stores W in).
    base = allowed[(PortableRandom(SEED_FP8_W).bits(k * n) %
                    np.uint64(allowed.size)).astype(np.int64)]
    codes = np.ascontiguousarray(base.reshape(n, k).T)
    scales = (PortableRandom(SEED_FP8_S).uniform(0.5, 1.5, (n,)) / 64).astype(
        np.float32)
    x = PortableRandom(SEED_FP8_A).standard_normal((m, k)).astype(np.float32)
    return x, codes, scales


def fp8_x_scale():
    import numpy as np
    return float(np.float32(math.sqrt(3.0) / 448.0))


def fp8_model(m, n, k, codes, scales):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    f8 = TensorProto.FLOAT8E4M3FN
    inits = [numpy_helper.from_array(np.array(fp8_x_scale(), np.float32), "x_scale"),
             helper.make_tensor("x_zero_point", f8, [], b"\x00", raw=True),
             helper.make_tensor("w", f8, [k, n], codes.tobytes(), raw=True),
             numpy_helper.from_array(scales, "w_scale")]
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero_point"], ["xq"]),
         helper.make_node("DequantizeLinear", ["xq", "x_scale", "x_zero_point"], ["xd"]),
         helper.make_node("DequantizeLinear", ["w", "w_scale"], ["wd"], axis=1),
         helper.make_node("MatMul", ["xd", "wd"], ["y"])],
        "f8gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    return model


def bf16_operands(m, n, k):
    import gemm_check
    return (gemm_check.make_input(m, k, seed=SEED_BF16_A),
            gemm_check.make_input(k, n, seed=SEED_BF16_B))


def build(kind, m, n, k):
    """(model, {name: operand}, {name: sha256}) for one kind at one shape."""
    if kind == "int8":
        a, w = int8_operands(m, n, k)
        return int8_model(m, n, k, w), {"a": a, "w": w}, {"a": sha256(a), "w": sha256(w)}
    if kind == "fp8":
        x, codes, scales = fp8_operands(m, n, k)
        return (fp8_model(m, n, k, codes, scales),
                {"x": x, "w": codes, "w_scale": scales},
                {"x": sha256(x), "w": sha256(codes), "w_scale": sha256(scales)})
    import wgmma_bench
    a, b = bf16_operands(m, n, k)
    return wgmma_bench.gemm_model(m, k, n), {"a": a, "b": b}, {}


def write_weights(model, folder):
    """Every initializer as folder/<name>.npy for kiln-run --weights (float8
    ones as '|V1' bytes, as kiln-run reads them)."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    os.makedirs(folder, exist_ok=True)
    for t in model.graph.initializer:
        if t.data_type == TensorProto.FLOAT8E4M3FN:
            value = np.frombuffer(t.raw_data, np.uint8).reshape(tuple(t.dims)).view("V1")
        else:
            value = np.array(numpy_helper.to_array(t), order="C")
        np.save(os.path.join(folder, re.sub(r"[^A-Za-z0-9._-]", "_", t.name) + ".npy"),
                value)


# --- prepare (development machine) ----------------------------------------

def prepare(args):
    import onnx
    kilnc = os.path.join(args.build, "bin", "kilnc")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    shapes = DRY if args.dry_run else FULL
    entries, failed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for m, n, k in shapes:
            built = {}
            for name, kind, family, flags in CASES:
                if kind not in built:
                    built[kind] = build(kind, m, n, k)
                    onnx.save(built[kind][0], os.path.join(tmp, f"{kind}.onnx"))
                model, _, hashes = built[kind]
                artifact = f"{name}-{m}x{n}x{k}.kiln"
                command = [kilnc, os.path.join(tmp, f"{kind}.onnx"), "--target=sm_90",
                           "--stats", "-o", os.path.join(args.out, artifact)] + flags
                if kind != "bf16":  # bf16's weight is an input
                    command.append("--strip-weights")
                compiled = subprocess.run(command, capture_output=True, text=True)
                entry = {"name": name, "kind": kind, "family": family,
                         "shape": [m, n, k], "artifact": artifact,
                         "sha256": hashes, "flags": flags}
                configs = [(kernel, fam, cfg) for kernel, fam, cfg
                           in CONFIG.findall(compiled.stdout)
                           if kernel.startswith(KERNEL_PREFIX[kind])]
                if compiled.returncode != 0:
                    entry["error"] = ("kilnc failed at prepare: " +
                                      (compiled.stderr.strip().splitlines() or ["?"])[0][:300])
                elif [fam for _, fam, _ in configs] != [family]:
                    entry["error"] = (
                        "kilnc --stats put the GEMM on "
                        f"{[fam for _, fam, _ in configs] or 'no contraction kernel'}, "
                        f"expected [{family!r}]")
                if "error" in entry:
                    # The other cases still travel; the run reports this one.
                    if os.path.exists(os.path.join(args.out, artifact)):
                        os.remove(os.path.join(args.out, artifact))
                    entries.append(entry)
                    failed += 1
                    print(f"quant_check: NOT prepared {name} {m}x{n}x{k}: {entry['error']}",
                          flush=True)
                    continue
                entry["kernel"] = configs[0][0]
                entry["config"] = f"{family} {configs[0][2]}"
                entries.append(entry)
                print(f"quant_check: prepared {name} {m}x{n}x{k}: {family} "
                      f"{configs[0][2]}", flush=True)
    with open(os.path.join(args.out, "quant.json"), "w") as f:
        json.dump({"target": "sm_90", "set": "dry-run" if args.dry_run else "full",
                   "cases": entries}, f, indent=1)
    if failed:
        print(f"quant_check: {failed} of {len(entries)} cases not prepared (see above); "
              "the rest are in quant.json")
    return 0


# --- run (GPU machine, or emu here) ---------------------------------------

def corrupt(got, kind):
    """KILN_TEST_CORRUPT: one element moved (the checks' teeth)."""
    import numpy as np
    value = os.environ.get("KILN_TEST_CORRUPT")
    if not value:
        return got
    got = got.copy()
    i, j = min(64, got.shape[0] - 1), got.shape[1] // 2
    if kind == "int8":
        got[i, j] = np.uint8((int(got[i, j]) + max(1, round(float(value)))) % 256)
    else:
        rms = float(np.sqrt(np.mean(got.astype(np.float64) ** 2)))
        got[i, j] = got[i, j] + float(value) * rms
    return got


class Prepared:
    """One kind's regenerated operands, files and references at one shape."""

    def __init__(self, kind, m, n, k, work, hashes):
        import numpy as np
        self.kind, self.shape = kind, (m, n, k)
        self.model, self.ops, got_hashes = build(kind, m, n, k)
        self.problem = ""
        for key, want in hashes.items():
            if got_hashes.get(key) != want:
                self.problem = (f"the regenerated {key} differs from prepare's "
                                "(SHA-256): another generator?")
        self.dir = os.path.join(work, f"{kind}-{m}x{n}x{k}")
        os.makedirs(self.dir, exist_ok=True)
        self.inputs = []
        if kind == "bf16":
            import gemm_check
            for key in ("a", "b"):
                path = os.path.join(self.dir, key + ".npy")
                gemm_check.save_bf16(path, gemm_check.to_bf16_bits(self.ops[key]))
                self.inputs += ["-i", f"{key}={path}"]
            self.reference = gemm_check.Reference(self.ops["a"], self.ops["b"], "bf16")
            return
        key = "a" if kind == "int8" else "x"
        path = os.path.join(self.dir, key + ".npy")
        np.save(path, self.ops[key])
        self.inputs = ["-i", f"{key}={path}"]
        if kind in ("int8", "fp8"):  # stripped artifacts
            write_weights(self.model, os.path.join(self.dir, "weights"))
            self.inputs += ["--weights", os.path.join(self.dir, "weights")]
        self.ort, self.ort_problem = None, ""
        try:
            import numerics
            self.ort = numerics.ort_session(self.model).run(
                ["y"], {key: self.ops[key]})[0]
        except Exception as e:  # no onnxruntime, or it refuses the model
            self.ort_problem = f"no onnxruntime reference: {str(e).splitlines()[0]}"
        if kind == "int8":
            self.int8_reference(m, n, k)

    def int8_reference(self, m, n, k):
        """Exact sums (float64 products of integers, exact below 2^53) of
        sampled rows and columns (all of Y when M, N <= 256), requantized."""
        import numpy as np
        import gemm_check
        a = self.ops["a"].astype(np.float64) - ZA
        w = self.ops["w"].astype(np.float64) - ZW
        self.rows = gemm_check.sample_rows(m, seed=1)
        self.cols = gemm_check.sample_rows(n, seed=2)
        self.row_ref = int8_requantize((a[self.rows] @ w).astype(np.int64), k)
        self.col_ref = int8_requantize((a @ w[:, self.cols]).astype(np.int64), k)
        del a, w

    def check(self, got):
        """(ok, text) for Kiln's output `got`."""
        import numpy as np
        m, n, k = self.shape
        if self.problem:
            return False, self.problem
        if got.shape != (m, n):
            return False, f"output shape {got.shape}, want {(m, n)}"
        if self.kind == "bf16":
            import gemm_check
            err, note = self.reference.error(got, BF16_BOUND)
            ok = err <= BF16_BOUND
            return ok, f"rel. error {err:.2e} (bound {BF16_BOUND:g}; {note})"
        if self.kind == "int8":
            ref_rows = np.count_nonzero(got[self.rows] != self.row_ref)
            ref_cols = np.count_nonzero(got[:, self.cols] != self.col_ref)
            sampled = self.row_ref.size + self.col_ref.size
            every = len(self.rows) == m and len(self.cols) == n
            text = (f"{ref_rows + ref_cols} of {sampled} "
                    f"{'(rows and columns: all of Y twice)' if every else 'sampled (256 rows, 256 columns)'} "
                    "elements differ from the int64 reference")
            ok = ref_rows + ref_cols == 0
            if self.ort is None:
                return False, text + f", {self.ort_problem}"
            diff = int(np.count_nonzero(got != self.ort))
            return ok and diff == 0, (text + f", {diff} of {got.size} from onnxruntime; "
                                      "bound bit-exact")
        if self.ort is None:
            return False, self.ort_problem
        if not np.isfinite(got).all():
            return False, f"{int((~np.isfinite(got)).sum())} non-finite elements"
        ref = self.ort.astype(np.float64)
        top = float(np.max(np.abs(ref)))
        diff = np.abs(got.astype(np.float64) - ref)
        worst = float(diff.max()) / (FP8_BOUND * top)
        return worst <= 1.0, (f"worst element {worst:.4f} of its bound (1e-3 of max |y| "
                              f"= {top:.4g}), {int(np.count_nonzero(diff))} of {got.size} "
                              "elements differ from onnxruntime")


def kiln_run(args, entry, prep, work):
    """(output, gemm ms, run ms, problem): kiln-run -o once, then --bench."""
    import numpy as np
    import gemm_check
    artifact = os.path.join(args.dir, entry["artifact"])
    base = [args.kiln_run, artifact, "--device", args.device] + prep.inputs
    out = os.path.join(work, "out-" + entry["name"])
    shutil.rmtree(out, ignore_errors=True)
    ran = subprocess.run(base + ["-o", out], capture_output=True, text=True)
    if ran.returncode != 0:
        return None, None, None, "kiln-run failed: " + (
            (ran.stderr or ran.stdout).strip().splitlines() or ["?"])[-1]
    name = "c" if entry["kind"] == "bf16" else "y"
    path = os.path.join(out, name + ".npy")
    if not os.path.exists(path):
        return None, None, None, f"kiln-run wrote no {name}.npy"
    got = gemm_check.load_output(path) if entry["kind"] == "bf16" else np.load(path)
    shutil.rmtree(out, ignore_errors=True)
    ran = subprocess.run(base + ["--bench", str(args.runs), "--warmup", str(args.warmup)],
                         capture_output=True, text=True)
    text = ran.stdout + ran.stderr
    times = [float(ms) for kernel, ms in KERNEL_TIME.findall(text)
             if kernel.startswith(KERNEL_PREFIX[entry["kind"]])]
    whole = RUN_TIME.search(text)
    if ran.returncode != 0 or not times:
        return got, None, None, "kiln-run --bench: " + (
            (ran.stderr.strip().splitlines() or ["no GEMM kernel time"])[-1])
    return got, sum(times), float(whole.group(1)) if whole else None, ""


def torch_baselines(args, shape, rows):
    """torch._int_mm and torch._scaled_mm on the shape (cuda only)."""
    m, n, k = shape
    if args.device != "cuda" or args.torch == "no":
        print(f"torch baselines: skipped (device {args.device}, torch {args.torch})")
        return
    try:
        import torch
        from torch_baselines import timed
    except Exception as e:
        print(f"torch baselines: skipped (no torch: {str(e).splitlines()[0]})")
        return

    def bench(fn):
        with torch.inference_mode():
            fn()
            torch.cuda.synchronize()
            t0, count = time.perf_counter(), 0
            while count < 3 or time.perf_counter() - t0 < 0.5:
                for _ in range(10):
                    fn()
                torch.cuda.synchronize()
                count += 10
                if count >= 20000:
                    break
            return timed(fn, args.runs, 0, "cuda")

    def row(impl, kind, make):
        """`make()` returns candidate calls (the first that runs is timed)."""
        entry = {"name": impl, "kind": kind, "family": impl, "shape": [m, n, k],
                 "config": "-", "baseline": True}
        problem = "?"
        try:
            for fn in make():
                try:
                    entry["ms"] = bench(fn)
                    entry["status"] = "baseline"
                    break
                except Exception as e:
                    problem = (str(e).strip().splitlines() or ["?"])[0][:120]
        except Exception as e:
            problem = (str(e).strip().splitlines() or ["?"])[0][:120]
        if "ms" not in entry:
            entry["status"] = "no baseline: " + problem
        print(f"{impl} {m}x{n}x{k}: " + (f"{entry['ms'] * 1e3:.1f} us" if "ms" in entry
                                          else entry["status"]))
        rows.append(entry)

    gen = torch.Generator(device="cuda").manual_seed(5)

    def int_mm():
        a8 = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda",
                           generator=gen)
        b8 = torch.randint(-64, 64, (k, n), dtype=torch.int8, device="cuda",
                           generator=gen)
        b8t = b8.t().contiguous().t()  # column-major, should B need it
        return [lambda: torch._int_mm(a8, b8), lambda: torch._int_mm(a8, b8t)]

    def scaled_mm():
        f8 = torch.float8_e4m3fn
        af = torch.randn(m, k, device="cuda", generator=gen).to(f8)
        # _scaled_mm wants B column-major: the transpose of a row-major [N, K].
        bf = torch.randn(n, k, device="cuda", generator=gen).to(f8).t()
        one = torch.tensor(1.0, device="cuda")

        def call():
            r = torch._scaled_mm(af, bf, scale_a=one, scale_b=one,
                                 out_dtype=torch.bfloat16)
            return r[0] if isinstance(r, tuple) else r
        return [call]

    def matmul_bf16():
        a = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda", generator=gen).to(torch.bfloat16)
        return [lambda: torch.matmul(a, b)]

    row("torch.matmul", "bf16", matmul_bf16)
    row("torch._int_mm", "int8", int_mm)
    row("torch._scaled_mm", "fp8", scaled_mm)


def table(args, manifest, rows):
    def f(v, fmt):
        return "-" if v is None else format(v, fmt)
    # Kiln's rows against Kiln's bf16 kernel, torch's against torch.matmul bf16.
    bf16 = {(tuple(r["shape"]), bool(r.get("baseline"))): r.get("ms") for r in rows
            if r["kind"] == "bf16"}
    lines = [f"Quantized GEMMs (int8, fp8) vs bf16: device {args.device}, kiln-run --bench "
             f"{args.runs} --warmup {args.warmup}, set {manifest.get('set', '?')}; time: "
             "the GEMM kernel's median; TOPS = 2MNK / time; ratio = the bf16 kernel's "
             "time / this one's (torch's rows: torch.matmul bf16's); dense peaks (H200): int8 and fp8 1979, bf16 989 TOPS"
             + ("; emu times are the emulator's, not a GPU's" if args.device == "emu" else ""),
             "", "| kernel family | M×N×K | time (us) | TOPS | % of peak | ratio vs bf16 "
             "| run median (us) | config | check |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, n, k = r["shape"]
        ms = r.get("ms")
        tops = 2.0 * m * n * k / (ms * 1e-3) / 1e12 if ms else None
        ref = bf16.get((tuple(r["shape"]), bool(r.get("baseline"))))
        lines.append(f"| {r['family']} ({r['kind']}) | {m}×{n}×{k} | "
                     f"{f(ms * 1e3 if ms else None, '.1f')} | {f(tops, '.1f')} | "
                     f"{f(tops / PEAK_TOPS[r['kind']] if tops else None, '.1%')} | "
                     f"{f(ref / ms if ref and ms else None, '.2f')} | "
                     f"{f(r['run_ms'] * 1e3 if r.get('run_ms') else None, '.1f')} | "
                     f"{r.get('config', '-')} | {r['status']} |")
    return "\n".join(lines)


def publish(args, manifest, rows, lines):
    text = table(args, manifest, rows) + "\n\n" + "\n".join(lines)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "quant.txt"), "w") as fh:
        fh.write(text + "\n")
    with open(os.path.join(args.out, "quant.json"), "w") as fh:
        json.dump({"device": args.device, "rows": rows}, fh, indent=1)
    return text


def run(args):
    manifest_path = os.path.join(args.dir, "quant.json")
    if not os.path.exists(manifest_path):
        print(f"quant_check: skipped ({args.dir} not prepared: quant_check.py prepare)")
        return 0
    if not args.kiln_run:
        args.kiln_run = os.path.join(args.dir, "..", "bin", "kiln-run")
    if not os.path.exists(args.kiln_run) and not shutil.which(args.kiln_run):
        print(f"quant_check: FAILED: no kiln-run at {args.kiln_run}")
        return 1
    if args.runs is None:
        args.runs = 1 if args.device == "emu" else 20
    if args.warmup is None:
        args.warmup = 0 if args.device == "emu" else 3
    args.out = args.out or os.environ.get("OUT", "/tmp")
    with open(manifest_path) as fh:
        manifest = json.load(fh)
    work = tempfile.mkdtemp(prefix="kiln-quant-")
    rows, lines, failures, prepared = [], [], 0, {}
    try:
        for entry in manifest["cases"]:
            m, n, k = entry["shape"]
            key = (entry["kind"], m, n, k)
            start = time.time()
            ms = run_ms = None
            try:
                if entry.get("error"):
                    raise RuntimeError(entry["error"])
                if key not in prepared:
                    prepared.clear()  # one kind's operands at a time (4096^3: ~100 MiB)
                    prepared[key] = Prepared(entry["kind"], m, n, k, work, entry["sha256"])
                prep = prepared[key]
                got, ms, run_ms, problem = kiln_run(args, entry, prep, work)
                if got is not None:
                    got = corrupt(got, entry["kind"])
                    ok, text = prep.check(got)
                else:
                    ok, text = False, problem
            except Exception as e:  # one case's error must not lose the others
                ok, problem = False, ""
                text = (str(e).strip().splitlines() or ["?"])[0]
                if not isinstance(e, RuntimeError):
                    text = f"{type(e).__name__}: {text}"
            if ok and problem:
                ok, text = False, text + "; " + problem
            label = f"{entry['kind']} {entry['family']} {m}x{n}x{k} (MxNxK)"
            timing = f"kernel {ms * 1e3:.1f} us" if ms else "kernel not timed"
            line = (f"{label}: {text}; {timing}, {time.time() - start:.1f} s "
                    f"{'ok' if ok else 'FAIL'}")
            print(line, flush=True)
            lines.append(line)
            failures += not ok
            rows.append({"name": entry["name"], "kind": entry["kind"],
                         "family": entry["family"], "shape": entry["shape"],
                         "config": entry.get("config", "-"), "ms": ms, "run_ms": run_ms,
                         "status": "ok" if ok else "FAIL", "line": line})
            publish(args, manifest, rows, lines)  # after every case
        prepared.clear()
        for shape in sorted({tuple(e["shape"]) for e in manifest["cases"]}):
            torch_baselines(args, shape, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = f"quant_check: {len(lines)} cases, {failures} failures"
    lines.append(summary)
    publish(args, manifest, rows, lines)
    print(table(args, manifest, rows))
    print(summary)
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--build", required=True)
    pp.add_argument("--out", required=True)
    pp.add_argument("--dry-run", action="store_true",
                    help="the small shape (128x256x192) for emu")
    pr = sub.add_parser("run")
    pr.add_argument("--dir", required=True)
    pr.add_argument("--device", default="cuda")
    pr.add_argument("--kiln-run", default="",
                    help="default: DIR/../bin/kiln-run (device-check/bin)")
    pr.add_argument("--runs", type=int, default=None, help="cuda 20, emu 1")
    pr.add_argument("--warmup", type=int, default=None, help="cuda 3, emu 0")
    pr.add_argument("--torch", default="cuda", help="cuda (when it imports) or no")
    pr.add_argument("--out", default=None, help="default: $OUT, else /tmp")
    args = p.parse_args()
    return prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
