#!/usr/bin/env python3
"""Relative error on the output norm: ||kiln - ref|| / ||ref|| per output.

Usage: compare.py REFERENCE_DIR OUTPUT_DIR
       compare.py --top1 REFERENCE_DIR OUTPUT_DIR

Prints the worst relative error over the outputs (inf when one is missing or
misshaped); exits 0 either way, the caller applies the bound.

--top1 (the GPU check's top-1 phase, for classifiers): also the fraction of
the samples (dimension 0) whose top-1 class, the argmax over the other
dimensions, is the reference's (the least over the outputs), and how many
distinct classes the reference picks; prints "rel-err R top1 A classes C
centred-top1 A' centred-classes C'", or "error: WHY" when an output is
missing or misshaped.

With random weights a classifier tends to give every input the same class
(global pooling averages the input's variation away: 8 of the 9 light
models do on N(0, 1) inputs), which makes top-1 agreement easy. The centred
figures are the same measure on the outputs minus their mean over the batch
(on log(output) when the output is positive, e.g. a softmax: the class that
sets each sample apart), where the classes differ between samples and the
margins are small: informational, no bound.
"""
import os
import sys

import numpy as np


def top1_classes(a):
    """The argmax over all but dimension 0."""
    return a.reshape(a.shape[0], -1).argmax(axis=1)


def centred(a, log):
    z = a.reshape(a.shape[0], -1)
    if log:
        z = np.log(np.maximum(z, 1e-300))
    return z - z.mean(axis=0)


def compare(ref_dir, out_dir, top1=False):
    """(worst relative error, {top1, classes, centred_top1, centred_classes}
    (least over the outputs; empty unless top1), problem or None)."""
    worst, stats = 0.0, {}
    for name in sorted(os.listdir(ref_dir)):
        ref = np.load(os.path.join(ref_dir, name)).astype(np.float64)
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            return float("inf"), {}, f"output {name} missing"
        got = np.load(path).astype(np.float64)
        if got.shape != ref.shape:
            return float("inf"), {}, f"output {name}: shape {got.shape}, want {ref.shape}"
        denom = max(np.linalg.norm(ref), 1e-30)
        err = float(np.linalg.norm(got - ref) / denom)
        # max() would drop a NaN (a NaN output must not pass).
        worst = max(worst, err if np.isfinite(err) else float("inf"))
        if top1:
            # A classifier's output: [batch, classes] or [batch, classes, 1, 1].
            log = bool((ref > 0).all())
            for key, want, have in (
                    ("", top1_classes(ref), top1_classes(got)),
                    ("centred_", top1_classes(centred(ref, log)), top1_classes(centred(got, log)))):
                for k, value in ((key + "top1", float(np.mean(want == have))),
                                 (key + "classes", len(np.unique(want)))):
                    stats[k] = min(stats.get(k, value), value)
    return worst, stats, None


def main():
    argv = sys.argv[1:]
    top1 = argv[:1] == ["--top1"]
    if top1:
        argv = argv[1:]
    if len(argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2] + "\n" + __doc__.strip().splitlines()[3])
    err, stats, problem = compare(argv[0], argv[1], top1)
    if not top1:
        print("inf" if problem else f"{err:.3e}")
    elif problem:
        print("error: " + problem)
    else:
        print(f"rel-err {err:.3e} top1 {stats['top1']:.3f} classes {stats['classes']} "
              f"centred-top1 {stats['centred_top1']:.3f} "
              f"centred-classes {stats['centred_classes']}")


if __name__ == "__main__":
    main()
