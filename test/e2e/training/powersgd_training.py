#!/usr/bin/env python3
"""PowerSGD data-parallel training under mpirun on emu against one process.

The MLP of data_parallel.py (fc1.w 6 x 16, fc1.b, fc2.w 16 x 4, fc2.b;
SGD+momentum, global batch 8, 10 steps), trained by one plain process
(the fp32 reference) and by 2 ranks of batch 4 with
`kilnc --data-parallel --allreduce-dtype=powersgd:R`:

- R = 16 >= every weight's smaller side: no weight is compressed (a
  rank-R factorisation of a matrix with min(rows, cols) <= R sends no
  fewer values), the artifact has no all-reduce-powersgd step, and the run
  must reproduce the fp32 reference like the plain all-reduce: 1e-6 of
  each tensor's largest element (data_parallel.py's bound and reason).
  The full-rank *math* (R = min dim inside the compressed path gives the
  exact mean) is checked by powersgd_unit.py.
- R = 2: both weight matrices go as rank-2 factors (biases exact). It
  must still train: the loss of the last step below the first step's, and
  within 10% of the fp32 run's last loss (PowerSGD keeps what a step's
  approximation misses as error feedback and sends it later, so after 10
  steps the weights differ from the exact run only by the last steps'
  residual times lr and the drift it caused). The weights are compared
  too, with a loose, empirical bound (0.25 of each tensor's scale; the
  run is deterministic, so the margin does not have to cover noise).
  Measured 2026-12-02: last loss 2.55% off, weights 0.17 of the scale;
  with the error feedback dropped (error = 0 in PowerSgd.cpp) 14.6% and
  0.65, so both checks fail on that bug.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data_parallel as dp  # noqa: E402

LOW_RANK = 2
LOSS_RTOL = 0.10
WEIGHT_RTOL = 0.25


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--python", action="store_true",
                   help="also the low-rank job through kiln.Trainer (the "
                        "kiln package on PYTHONPATH)")
    args = p.parse_args()
    model = dp.prepare(args.work)
    spec = dict(dp.OPTIMIZERS)["momentum"]
    ref_art = os.path.join(args.work, "ref.kiln")
    dp.compile_model(args, model, ref_art, dp.GLOBAL_BATCH, spec, False)
    ref_ck = os.path.join(args.work, "ref")
    dp.train(args, ref_art, ref_ck, 0)
    failures = 0
    # R >= every min dim: uncompressed, as exact as the plain all-reduce.
    art = os.path.join(args.work, "full.kiln")
    dp.compile_model(args, model, art, dp.GLOBAL_BATCH // 2, spec, True,
                     "powersgd:16")
    ck = os.path.join(args.work, "full")
    dp.train(args, art, ck, 2)
    f, worst = dp.compare("powersgd:16 2 ranks", ck, ref_ck)
    failures += f
    print(f"powersgd:16 (no weight compressed): 2 ranks x batch 4, 10 steps, "
          f"worst difference {worst:.2g} of the tensor's scale "
          f"{'ok' if not f else 'FAILED'}")
    # Low rank: compressed, still trains.
    art = os.path.join(args.work, "low.kiln")
    dp.compile_model(args, model, art, dp.GLOBAL_BATCH // 2, spec, True,
                     f"powersgd:{LOW_RANK}")
    ck = os.path.join(args.work, "low")
    dp.train(args, art, ck, 2)
    got, want = dp.losses(ck), dp.losses(ref_ck)
    decreases = got[-1] < got[0]
    close = abs(got[-1] - want[-1]) <= LOSS_RTOL * abs(want[-1])
    f, worst = dp.compare(f"powersgd:{LOW_RANK} 2 ranks weights", ck, ref_ck,
                          WEIGHT_RTOL)
    ok = decreases and close and not f
    failures += not ok
    print(f"powersgd:{LOW_RANK}: 2 ranks x batch 4, 10 steps, loss "
          f"{got[0]:.4f} -> {got[-1]:.4f} (fp32: {want[0]:.4f} -> "
          f"{want[-1]:.4f}, last within {abs(got[-1] - want[-1]) / abs(want[-1]):.2%}"
          f"), weights worst {worst:.2g} of the tensor's scale "
          f"{'ok' if ok else 'FAILED'}")
    if args.python:
        # The same low-rank job through kiln.Trainer (the same
        # TrainingSession, so the same PowerSGD): bit-identical.
        py_ck = os.path.join(args.work, "python-low")
        subprocess.run(
            dp.mpirun(2) + [sys.executable, os.path.join(
                os.path.dirname(os.path.abspath(__file__)),
                "data_parallel_trainer.py"), art,
                os.path.join(args.work, "x.npy"),
                os.path.join(args.work, "y.npy"), py_ck],
            check=True, capture_output=True, text=True,
            env=dict(os.environ, KILN_EMU_THREADS="1"))
        same = dp.same_checkpoint(py_ck, ck)
        failures += not same
        print(f"python: kiln.Trainer, powersgd:{LOW_RANK}, mpirun -np 2: "
              f"checkpoint {'bit-identical to' if same else 'DIFFERS from'} "
              f"kiln-train's {'ok' if same else 'FAILED'}")
    print(f"powersgd-training: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
