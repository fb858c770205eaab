#!/usr/bin/env python3
"""Runs a CUTLASS GEMM on Kiln's PTX emulator and checks it against numpy.

The harness of docs/emulator.md, "Checked against CUTLASS". For each
variant (a kernel instantiated from CUTLASS's public templates in
Sm80Gemms.cuh / Sm90Gemms.cuh):

1. draws A (M x K), B (K x N) and C (M x N) from a seeded generator, with
   values exactly representable in the operand type (bf16, tf32 held in
   f32, int8, or e4m3: every finite code), stored in the variant's majors;
2. runs the variant's host program (CUTLASS's own host code, no GPU) for
   the kernel's Params, with the device addresses the buffers will have;
3. checks what the Params carry: the swizzle of every TMA tensor map (the
   emulator's encoding, TmaEncodeShim.cpp) is the one the variant is
   meant to exercise, and the PTX uses the instructions it is meant to;
4. runs the kernel with cutlass-emu-run, D prefilled with NaN;
5. compares D = alpha * A B + beta * C element by element with a float64
   reference. Products of bf16, tf32 or e4m3 values are exact in f32
   (8 + 8, 11 + 11 or 4 + 4 significand bits; e4m3's exponents keep every
   product a normal f32), and int8 sums exact in s32, so the kernel's only
   errors are f32
   roundings: at most K in the accumulation (each within 2^-24 of a
   partial sum, bounded by sum_k |a_ik b_kj|) and three in the epilogue.
   The bound per element is (K + 3) 2^-24 (|alpha| sum_k |a_ik||b_kj| +
   |beta||c_ij|); a misread fragment, swizzle or descriptor moves elements
   by O(|a||b|), millions of times more.

Exit status 0 when every element is within its bound; 1 with a report
otherwise (the worst elements, their indices and values).
"""

import argparse
import os
import re
import subprocess
import sys

import numpy as np

# name: (element type, A layout, B layout, expected TMA swizzles (A, B) in
# bytes or None (no TMA), patterns the entry's PTX must contain, whether to
# run with the emulator's unwritten-shared-read check).
#
# The sm_80 kernels run without that check: CUTLASS's multistage mainloop
# (gemm/threadblock/mma_multistage.h) loads the first warp fragment of the
# next stage at the end of every k-iteration, also after the last one, when
# that stage was never filled (its cp.async were predicated off past K);
# the fragment is discarded, so hardware reads stale shared memory there
# and the check, which is stricter than the ISA, would stop the run.
BF16_MMA = r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32"
TF32_MMA = r"mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32"
S8_MMA = (r"mma\.sync\.aligned\.m16n8k32\.row\.col(\.satfinite)?"
          r"\.s32\.s8\.s8\.s32(\.satfinite)?")
LDMATRIX = r"ldmatrix\.sync\.aligned\.x4\.m8n8\.shared\.b16"
LDMATRIX_T = r"ldmatrix\.sync\.aligned\.x4\.trans\.m8n8\.shared\.b16"
CP_ASYNC = r"cp\.async\.cg\.shared\.global(\.L2::128B)? \[%r\d+\], \[%rd\d+\], 16"
WGMMA = r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.bf16\.bf16"
WGMMA_E4M3 = r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k32\.f32\.e4m3\.e4m3"
TMA = r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global\.mbarrier"
TMA_MULTICAST = r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global\.mbarrier::complete_tx::bytes\.multicast::cluster"
MAPA = r"mapa\.shared::cluster"
CLUSTER_BARRIER = r"barrier\.cluster\.arrive"
VARIANTS = {
    "sm80_bf16_tn": ("bf16", "row", "col", None,
                     [BF16_MMA, LDMATRIX, CP_ASYNC], False),
    "sm80_bf16_nt": ("bf16", "col", "row", None,
                     [BF16_MMA, LDMATRIX_T, CP_ASYNC], False),
    "sm80_s8_tn": ("s8", "row", "col", None,
                   [S8_MMA, LDMATRIX, CP_ASYNC], False),
    "sm80_tf32_tn": ("tf32", "row", "col", None,
                     [TF32_MMA, LDMATRIX, CP_ASYNC], False),
    "sm90_tn_sw128": ("bf16", "row", "col", (128, 128), [WGMMA, TMA], True),
    "sm90_nt_sw128": ("bf16", "col", "row", (128, 128), [WGMMA, TMA], True),
    "sm90_tt_sw32": ("bf16", "row", "row", (32, 64), [WGMMA, TMA], True),
    "sm90_nn_sw64": ("bf16", "col", "col", (128, 64), [WGMMA, TMA], True),
    "sm90_tn_c2x2": ("bf16", "row", "col", (128, 128),
                     [WGMMA, TMA_MULTICAST, MAPA, CLUSTER_BARRIER], True),
    "sm90_nt_c4x2": ("bf16", "col", "row", (128, 128),
                     [WGMMA, TMA_MULTICAST, MAPA, CLUSTER_BARRIER], True),
    "sm90_e4m3_tn": ("e4m3", "row", "col", (128, 128), [WGMMA_E4M3, TMA],
                     True),
}

# Device addresses of A, B, C, D: far apart, so an overrun lands in no
# buffer and the emulator names it.
ADDRESSES = [0x100000000, 0x200000000, 0x300000000, 0x400000000]
# CUtensorMapSwizzle (TensorMap.h) -> bytes.
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
TMAP_MAGIC = b"KTMA"


def to_bf16_bits(x):
    """float32 -> bf16 bit patterns, round to nearest even."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bits.astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def e4m3_values(codes):
    """float8 E4M3 (OCP "FN": bias 7, no infinities, S.1111.111 NaN)
    codes -> float64, from the format's definition."""
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = (codes & 7).astype(np.float64)
    normal = (1 + mantissa / 8) * np.exp2(exponent - 7.0)
    subnormal = mantissa / 8 * 2.0**-6
    values = sign * np.where(exponent == 0, subnormal, normal)
    return np.where((codes & 0x7F) == 0x7F, np.nan, values)


def operand(rng, rows, cols, dtype):
    """Values in [-1, 1) exact in `dtype` (s8: every int8, -128 to 127;
    e4m3: every finite code, subnormals and +-448 included):
    (stored array, float64 values)."""
    if dtype == "e4m3":
        codes = rng.integers(0, 256, (rows, cols)).astype(np.uint8)
        codes[(codes & 0x7F) == 0x7F] ^= 0x01  # NaN -> +-448
        return codes, e4m3_values(codes)
    if dtype == "s8":
        x = rng.integers(-128, 128, (rows, cols)).astype(np.int8)
        return x, x.astype(np.float64)
    x = rng.uniform(-1.0, 1.0, (rows, cols)).astype(np.float32)
    if dtype == "bf16":
        bits = to_bf16_bits(x)
        return bits, bf16_values(bits)
    # tf32: keep the sign, exponent and upper 10 mantissa bits of an f32.
    x = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return x, x.astype(np.float64)


def stored(matrix, layout):
    """The bytes of a logical matrix in row- or column-major order."""
    return np.ascontiguousarray(matrix if layout == "row" else matrix.T)


def tensor_map_swizzles(params):
    """The swizzle (bytes) of every emulator tensor map in the Params."""
    swizzles = []
    for match in re.finditer(re.escape(TMAP_MAGIC), params):
        at = match.start()
        if at % 64 == 0:  # CUtensorMap is 64-byte aligned in Params
            swizzles.append(SWIZZLE_BYTES.get(params[at + 6], -1))
    return swizzles


def read_launch(text):
    launch = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        launch[key] = value
    return launch


def run_case(args, variant, m, n, k):
    """One variant at one shape: True when every element is within bound."""
    dtype, layout_a, layout_b, swizzles, patterns, check_shared = \
        VARIANTS[variant]
    name = f"{variant} M={m} N={n} K={k}"
    with open(args.ptx) as f:
        ptx = f.read()
    entry = f"kiln_cutlass_{variant}"
    start = ptx.find(f".entry {entry}(")
    if start < 0:
        print(f"FAIL {name}: {args.ptx} has no entry {entry}")
        return False
    end = ptx.find(".entry ", start + 1)
    body = ptx[start:end if end > 0 else len(ptx)]
    for pattern in patterns:
        if not re.search(pattern, body):
            print(f"FAIL {name}: the PTX of {entry} has no /{pattern}/")
            return False

    rng = np.random.default_rng(args.seed)
    a_stored, a = operand(rng, m, k, dtype)
    b_stored, b = operand(rng, k, n, dtype)
    c = rng.uniform(-1.0, 1.0, (m, n)).astype(np.float32)
    files = []
    for i, array in enumerate([stored(a_stored, layout_a),
                               stored(b_stored, layout_b), c,
                               np.full((m, n), np.nan, np.float32)]):
        path = os.path.join(args.work, f"{variant}.{'abcd'[i]}.bin")
        array.tofile(path)
        files.append(path)

    host = subprocess.run(
        [args.params_tool, variant, str(m), str(n), str(k),
         repr(args.alpha), repr(args.beta)] + [hex(x) for x in ADDRESSES],
        capture_output=True, text=True)
    if host.returncode != 0:
        print(f"FAIL {name}: host program failed: {host.stderr.strip()}")
        return False
    launch = read_launch(host.stdout)
    params = bytes.fromhex(launch["params"])
    found = tensor_map_swizzles(params)
    if swizzles is not None and sorted(found) != sorted(swizzles):
        print(f"FAIL {name}: the Params carry tensor maps with swizzles "
              f"{found}, expected {list(swizzles)}")
        return False
    launch_path = os.path.join(args.work, f"{variant}.launch")
    with open(launch_path, "w") as f:
        f.write(host.stdout)

    out = os.path.join(args.work, f"{variant}.d.out")
    cmd = [args.runner, "--ptx", args.ptx, "--launch", launch_path,
           "--workers", "2"] + (["--check-shared"] if check_shared else [])
    cmd += [arg for addr, path in zip(ADDRESSES, files)
            for arg in ("--in", f"{hex(addr)}={path}")]
    cmd += ["--out", f"{hex(ADDRESSES[3])}={out}"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"FAIL {name}: {run.stderr.strip()}")
        return False
    d = np.fromfile(out, np.float32).reshape(m, n).astype(np.float64)

    c64 = c.astype(np.float64)
    ref = args.alpha * (a @ b) + args.beta * c64
    bound = (k + 3) * 2.0**-24 * (abs(args.alpha) * (np.abs(a) @ np.abs(b))
                                  + abs(args.beta) * np.abs(c64))
    err = np.abs(d - ref)
    bad = ~(err <= bound)  # NaN (never written) counts as bad
    tiles = f"grid {launch['grid']}, block {launch['block'].split()[0]}"
    swz = f", swizzles {found}" if found else ""
    if bad.any():
        print(f"FAIL {name}: {int(bad.sum())} of {m * n} elements outside "
              f"the bound ({tiles}{swz})")
        for i, j in np.argwhere(bad)[:8]:
            print(f"  D[{i},{j}] = {d[i, j]!r}, float64 reference "
                  f"{ref[i, j]!r}, bound {bound[i, j]:.3g}")
        return False
    ratio = float(np.max(err / bound))
    emu = run.stdout.strip().split(": ", 1)[-1]
    print(f"PASS {name}: {m * n} elements within (K+3) 2^-24 sum|a||b| "
          f"(worst at {ratio:.3f} of its bound; {tiles}{swz}); {emu}")
    return True


def shape(text):
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not MxNxK")
    return m, n, k


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", required=True, action="append",
                    choices=sorted(VARIANTS), help="repeatable")
    ap.add_argument("--shape", type=shape, action="append",
                    help="MxNxK, repeatable (default 200x136x72)")
    ap.add_argument("--params-tool", required=True,
                    help="the family's host program (kiln-cutlass-*-params)")
    ap.add_argument("--ptx", required=True)
    ap.add_argument("--runner", required=True, help="cutlass-emu-run")
    ap.add_argument("--work", required=True, help="a scratch directory")
    ap.add_argument("--alpha", type=float, default=1.25)
    ap.add_argument("--beta", type=float, default=-0.5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    ok = True
    for variant in args.variant:
        for m, n, k in args.shape or [(200, 136, 72)]:
            ok &= run_case(args, variant, m, n, k)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
