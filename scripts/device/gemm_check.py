#!/usr/bin/env python3
"""The GEMM phase's numerics and its cuBLAS baseline (device_check.py).

The GEMM models are one MatMul, C = A B: A [M, K] the input, B [K, N] an
initializer regenerated with the portable generator (device_models.py
gemm-MxKxN), C [M, N]. They are compiled (prepare.py) as

- bf16: kilnc --precision=bf16 --io-precision=bf16: A, B and C are bf16 in
  memory (kiln-run reads and writes bf16 .npy files as '|V2'), fp32
  accumulation on mma.sync tensor cores;
- tf32: --precision=tf32: fp32 in memory, operands rounded to tf32
  (cvt.rna) for the tf32 mma;
- fp32: the default: the FFMA kernel, no TF32.

The reference is what the kernel is asked to compute: float64 products of
the operands as the kernel sees them (bf16: A and B rounded to bf16 to
nearest even, as kiln-run's input and kilnc's weight conversion do; fp32
and tf32: the fp32 values), on the CPU with numpy. A full float64 product
of 8192^3 on the device machine's CPU takes minutes, so it checks

- rows: 256 sampled rows of C (the first 128, one block tile's worth of
  tiles, and 128 seeded random ones; all rows when M <= 256), every column:
  ||C_rows - R_rows|| / ||R_rows||;
- column sums: sum_i C[i, :] against (sum_i A[i, :]) B in float64, which
  every row of C enters (a wrong or unwritten tile anywhere shows);
- every element of C finite.

The error is the larger of the two relative errors (inf if C has a
non-finite element or the wrong shape). Bounds (prepare.py): bf16 5e-3
(bf16 rounding of the output alone is ~1.5e-3), tf32 5e-3, fp32 1e-4.

Usage (a check by hand): gemm_check.py M K N  (numerics of the reference
helpers only, numpy)
"""
import os
import sys
import time

import numpy as np

# scripts/numerics.py: next to this file in the device pack, one folder up
# in the source tree.
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
import numerics  # noqa: E402

ROWS = 256  # sampled rows of C
FIRST = 128  # of which the first rows


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns (uint16), round to nearest even (finite
    inputs)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
            >> np.uint32(16)).astype(np.uint16)


def from_bf16_bits(u):
    return (np.ascontiguousarray(u, dtype=np.uint16).astype(np.uint32)
            << np.uint32(16)).view(np.float32)


def save_bf16(path, bits):
    """A bf16 .npy as kiln-run reads it: descr '|V2'."""
    np.save(path, np.ascontiguousarray(bits, dtype=np.uint16).view("V2"))


def load_output(path):
    """kiln-run's output .npy as float32 (bf16 comes back as '<V2')."""
    c = np.load(path)
    if c.dtype.kind == "V" and c.dtype.itemsize == 2:
        return from_bf16_bits(c.view(np.uint16))
    return c.astype(np.float32, copy=False)


def sample_rows(m, seed=0):
    if m <= ROWS:
        return np.arange(m)
    rest = np.random.default_rng(seed).choice(np.arange(FIRST, m), ROWS - FIRST,
                                              replace=False)
    return np.concatenate([np.arange(FIRST), np.sort(rest)])


def make_input(m, k, seed=1234):
    """A: standard normal float32 (numpy seed 1234, as make_reference.py)."""
    return np.random.default_rng(seed).standard_normal((m, k), dtype=np.float32)


class Reference:
    """float64 rows and column sums of A B for one precision's operands."""

    def __init__(self, a, b, precision):
        if precision == "bf16":
            a = from_bf16_bits(to_bf16_bits(a))
            b = from_bf16_bits(to_bf16_bits(b))
        self.a, self.b = a, b  # the operands as the kernel sees them (float32)
        self.rows = sample_rows(a.shape[0])
        b64 = b.astype(np.float64)
        self.row_ref = a[self.rows].astype(np.float64) @ b64
        self.col_ref = a.sum(axis=0, dtype=np.float64) @ b64
        self.shape = (a.shape[0], b.shape[1])

    def error(self, c, bound=None):
        """(relative error, note): the sampled rows and the column sums by
        scripts/numerics.py's rule; with `bound`, an element over its
        per-element bound makes the error inf (the note says where)."""
        if tuple(c.shape) != self.shape:
            return float("inf"), f"output shape {tuple(c.shape)}, want {self.shape}"
        if not np.isfinite(c).all():
            return float("inf"), f"{int((~np.isfinite(c)).sum())} non-finite elements"
        tol = bound if bound is not None else 1.0
        rows = numerics.compare(c[self.rows], self.row_ref, tol, "rows")
        cols = numerics.compare(c.sum(axis=0, dtype=np.float64), self.col_ref,
                                tol, "column sums")
        note = (f"rows {rows.rel_l2:.1e} (worst element {rows.worst_ratio:.2f}), "
                f"column sums {cols.rel_l2:.1e} (worst element {cols.worst_ratio:.2f})")
        err = max(rows.rel_l2, cols.rel_l2)
        if bound is not None and max(rows.worst_ratio, cols.worst_ratio) > 1.0:
            return float("inf"), "an element over its bound: " + note
        return err, note


def tflops(m, k, n, ms):
    return 2.0 * m * k * n / (ms * 1e-3) / 1e12 if ms else None


def torch_gemm(a, b, precision, device, runs, warmup_seconds=0.5):
    """torch.matmul on the same operands: (median ms, C as float32 numpy,
    note). bf16 operands are the float32 ones rounded (.to(bfloat16) rounds
    to nearest even, as to_bf16_bits); fp32 with TF32 off in cuBLAS, tf32
    with it on. Warm-up calls for warmup_seconds (in groups of 10, synchronised), then
    torch_baselines.timed: `runs` calls each between CUDA events, median."""
    import torch
    from torch_baselines import timed
    # The switch torch_baselines.py uses too (one API in the process: newer
    # PyTorch objects to mixing allow_tf32 with fp32_precision).
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_tf32
    try:
        matmul.allow_tf32 = precision == "tf32"
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        ta = torch.from_numpy(a).to(device).to(dtype)
        tb = torch.from_numpy(b).to(device).to(dtype)
        cuda = device.startswith("cuda")
        with torch.inference_mode():
            c = torch.matmul(ta, tb)  # the first call picks the kernel
            # Warm-up by the clock (the GPU's clocks ramp up from idle):
            # groups of 10 calls until warmup_seconds have passed.
            warmup, t0 = 0, time.perf_counter()
            while warmup < 3 or time.perf_counter() - t0 < warmup_seconds:
                for _ in range(10):
                    torch.matmul(ta, tb)
                if cuda:
                    torch.cuda.synchronize()
                warmup += 10
                if warmup >= 20000:
                    break
            ms = timed(lambda: torch.matmul(ta, tb), runs, 0, device)
            out = c.float().cpu().numpy()
        note = f"{warmup} warm-up runs, allow_tf32={precision == 'tf32'}"
        return ms, out, note
    finally:
        matmul.allow_tf32 = saved


def main():
    m, k, n = (int(v) for v in sys.argv[1:4])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import device_models
    a = make_input(m, k)
    b = device_models.gemm_weight(k, n)
    for precision in ("fp32", "bf16"):
        ref = Reference(a, b, precision)
        exact = ref.a.astype(np.float64) @ ref.b.astype(np.float64)
        c = exact.astype(np.float32)
        if precision == "bf16":
            c = from_bf16_bits(to_bf16_bits(c))
        print(precision, "output rounding alone:", *ref.error(c))


if __name__ == "__main__":
    main()
