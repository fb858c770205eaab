#!/usr/bin/env python3
"""PowerSGD's math (runtime/lib/PowerSgd.cpp) against numpy, element by element.

`kiln-powersgd-check` runs the runtime's allReduceMeanPowerSgd on gradient
buckets read from .npy files, alone (a world of one) and under `mpirun -np
2` (the MPI engine), for 3 steps: the steps share the error feedback and
the warm-started Q. This script draws the buckets and computes the same
algorithm independently in float64 numpy (Vogels et al. 2019, as
docs/runtime.md "Compression: PowerSGD" states it):

    M_i = grad_i + error_i                  (rank i)
    P   = orthonormalise(mean_i M_i Q)      (Gram-Schmidt = QR, diag(R) > 0)
    Q   = mean_i M_i^T P                    (kept: the next step's warm start)
    out = P Q^T,  error_i = M_i - P Q^T

with the first Q from the documented SplitMix64 + Box-Muller stream (so
that both sides start from the same Q), and the elements outside the
matrices averaged exactly. Checked: every rank's output bucket and every
rank's error feedback after every step.

Bound: |got - want| <= 1e-5 x max|want| per tensor (each step's output,
each rank's error). The runtime stores P, the orthonormal P, Q and P Q^T in
f32 (what the wire carries) and accumulates in f64: four roundings of
2^-24 (6e-8) relative per step, which the next step's P = M Q carries on
(warm start) and the orthonormalisation amplifies by P's condition number
(about 3 for these random matrices). 3 steps x 4 roundings x 3 x 6e-8 is
~2e-6; 1e-5 keeps 5x of margin. A dropped error feedback, a missing
orthonormalisation, a sum instead of a mean or a Q not carried over misses
it by orders of magnitude (the commit message shows one).

Full rank (r = min(rows, cols) for every matrix): P Q^T = P P^T mean(M) =
mean(M), so the first step's output must be the plain mean of the ranks'
gradients, checked against numpy's mean with the same 1e-5 bound (f32
storage of the factors, ~4 roundings).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

MASK = (1 << 64) - 1
RTOL = 1e-5


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def initial_q(seed, ident, cols, r):
    """The documented stream: SplitMix64 seeded with seed ^ (id * C),
    uniforms ((x >> 11) + 1) / 2^53, Box-Muller pairs, rounded to f32."""
    state = (seed ^ ((ident * 0xD1B54A32D192ED03) & MASK)) & MASK
    values = []
    while len(values) < cols * r:
        state, a = splitmix64(state)
        state, b = splitmix64(state)
        u1 = ((a >> 11) + 1) * 2.0 ** -53
        u2 = ((b >> 11) + 1) * 2.0 ** -53
        radius = np.sqrt(-2.0 * np.log(u1))
        values += [radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)]
    return np.array(values[:cols * r], np.float32).astype(np.float64).reshape(cols, r)


def orthonormalise(p):
    q, r = np.linalg.qr(p)
    return q * np.sign(np.diag(r))  # Gram-Schmidt's signs: diag(R) > 0


def reference(grads, matrices, rank, seed):
    """grads[i][t]: rank i's bucket at step t. Returns (outputs[t],
    errors[t][i][b]) in float64."""
    n_ranks, steps = len(grads), len(grads[0])
    count = grads[0][0].size
    covered = np.zeros(count, bool)
    for off, rows, cols in matrices:
        covered[off:off + rows * cols] = True
    error = [[np.zeros((rows, cols)) for off, rows, cols in matrices]
             for _ in range(n_ranks)]
    qs = [initial_q(seed, b, cols, min(rank, rows, cols))
          for b, (off, rows, cols) in enumerate(matrices)]
    outputs, errors = [], []
    for t in range(steps):
        g = [np.asarray(grads[i][t], np.float64) for i in range(n_ranks)]
        out = np.zeros(count)
        out[~covered] = np.mean([gi[~covered] for gi in g], axis=0)
        for b, (off, rows, cols) in enumerate(matrices):
            ms = [g[i][off:off + rows * cols].reshape(rows, cols) + error[i][b]
                  for i in range(n_ranks)]
            p = orthonormalise(np.mean([m @ qs[b] for m in ms], axis=0))
            qs[b] = np.mean([m.T @ p for m in ms], axis=0)
            approx = p @ qs[b].T
            for i in range(n_ranks):
                error[i][b] = ms[i] - approx
            out[off:off + rows * cols] = approx.ravel()
        outputs.append(out)
        errors.append([[e.copy() for e in error[i]] for i in range(n_ranks)])
    return outputs, errors


def compare(what, got, want, rtol=RTOL):
    got = np.asarray(got, np.float64)
    scale = float(np.max(np.abs(want), initial=0))
    diff = np.abs(got - want)
    worst = float(np.max(diff, initial=0)) / max(scale, 1e-30)
    bad = diff > rtol * scale
    if got.shape != want.shape or bad.any():
        i = int(np.argmax(bad.ravel())) if got.shape == want.shape else -1
        print(f"FAIL {what}: {int(bad.sum()) if i >= 0 else 'shape'} outside "
              f"{rtol:g} x max|want|; first at {i}: got {got.ravel()[i]!r} "
              f"want {np.asarray(want).ravel()[i]!r}")
        return 1, worst
    return 0, worst


def run_case(args, name, ranks, matrices, count, rank, seed, steps, rng):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    grads = [[(rng.standard_normal(count) * (1 + 0.3 * t)).astype(np.float32)
              for t in range(steps)] for _ in range(ranks)]
    for i in range(ranks):
        for t in range(steps):
            np.save(os.path.join(work, f"grad.rank{i}.step{t}.npy"), grads[i][t])
    cmd = [args.tool, "--dir", work, "--steps", str(steps), "--rank", str(rank),
           "--seed", str(seed)]
    for off, rows, cols in matrices:
        cmd += ["--matrix", f"{off}:{rows}x{cols}"]
    if ranks > 1:
        cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
               str(ranks), "--mca", "btl", "self,vader"] + cmd
    subprocess.run(cmd, check=True)
    outputs, errors = reference(grads, matrices, rank, seed)
    failures, worst = 0, 0.0
    for t in range(steps):
        for i in range(ranks):
            got = np.load(os.path.join(work, f"out.rank{i}.step{t}.npy"))
            f, w = compare(f"{name} step {t} rank {i} output", got, outputs[t])
            failures, worst = failures + f, max(worst, w)
            for b in range(len(matrices)):
                got = np.load(os.path.join(work, f"error.rank{i}.step{t}.m{b}.npy"))
                want = errors[t][i][b]
                # A full-rank error is rounding noise around zero: compare it
                # on the scale of the matrix it is the error of.
                scale_ref = outputs[t][matrices[b][0]:matrices[b][0] +
                                       matrices[b][1] * matrices[b][2]]
                scale = max(float(np.max(np.abs(want))), float(np.max(np.abs(scale_ref))))
                bad = np.abs(got - want) > RTOL * scale
                w = float(np.max(np.abs(got - want))) / scale
                worst = max(worst, w)
                if bad.any():
                    print(f"FAIL {name} step {t} rank {i} error {b}: "
                          f"{int(bad.sum())} elements outside {RTOL:g} x {scale:.3g}")
                    failures += 1
    return failures, worst, grads, outputs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True, help="kiln-powersgd-check")
    p.add_argument("--work", required=True)
    p.add_argument("--mpi", action="store_true", help="also 2 ranks under mpirun")
    args = p.parse_args()
    rng = np.random.default_rng(27)
    # A bucket as Kiln lays it out: a bias, a matrix, a bias, a matrix.
    low = [(5, 12, 10), (5 + 120 + 3, 8, 20)]
    count = 5 + 120 + 3 + 160
    failures = 0
    cases = [("rank2-1proc", 1, low, 2)]
    if args.mpi:
        cases += [("rank2-2procs", 2, low, 2)]
    for name, ranks, matrices, rank in cases:
        f, worst, _, _ = run_case(args, name, ranks, matrices, count, rank, 7,
                                  3, rng)
        failures += f
        print(f"{name}: {ranks} rank(s), PowerSGD rank {rank}, 3 steps, worst "
              f"{worst:.2g} of max|numpy| {'ok' if not f else 'FAILED'}")
    # Full rank: the first step is the exact mean.
    full = [(0, 6, 9), (54 + 4, 12, 4)]
    ranks = 2 if args.mpi else 1
    f, worst, grads, outputs = run_case(args, "full-rank", ranks, full,
                                        54 + 4 + 48, 6, 3, 3, rng)
    mean = np.mean([np.asarray(g[0], np.float64) for g in grads], axis=0)
    got = np.load(os.path.join(args.work, "full-rank", "out.rank0.step0.npy"))
    f2, worst2 = compare("full rank: step 0 against the plain mean", got, mean)
    failures += f + f2
    print(f"full-rank: {ranks} rank(s), rank = min dim: step 0 against numpy's "
          f"mean of the gradients, worst {worst2:.2g}; 3 steps against the "
          f"reference, worst {worst:.2g} {'ok' if not f + f2 else 'FAILED'}")
    print(f"powersgd-unit: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
