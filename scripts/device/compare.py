#!/usr/bin/env python3
"""Kiln's outputs against a reference directory, by scripts/numerics.py's rule.

Usage: compare.py [--bound B] REFERENCE_DIR OUTPUT_DIR
       compare.py --top1 [--bound B] REFERENCE_DIR OUTPUT_DIR

Each output is compared as docs/testing.md ("Comparing numbers") says: the
relative error of its norm, ||kiln - ref|| / ||ref||, within B, and every
element within 6 B rms(ref) + B |ref| (NaN/Inf where the reference has
them). Prints one line per output, then a last line "E R" with the worst
relative error and the worst per-element ratio (<= 1 passes) over the
outputs ("inf inf" when one is missing or misshaped); exits 0 either way,
the caller applies the verdict (E <= B and R <= 1). B defaults to 1e-4.

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

HERE = os.path.dirname(os.path.abspath(__file__))
# scripts/numerics.py: next to this file in the device pack, one folder up
# in the source tree.
sys.path[:0] = [HERE, os.path.join(HERE, "..")]
import numerics  # noqa: E402


def top1_classes(a):
    """The argmax over all but dimension 0."""
    return a.reshape(a.shape[0], -1).argmax(axis=1)


def centred(a, log):
    z = a.reshape(a.shape[0], -1)
    if log:
        z = np.log(np.maximum(z, 1e-300))
    return z - z.mean(axis=0)


def compare(ref_dir, out_dir, top1=False, bound=1e-4):
    """(numerics.Comparison over the outputs, {top1, classes, centred_top1,
    centred_classes} (least over the outputs; empty unless top1), problem
    or None)."""
    results, stats = [], {}
    for name in sorted(os.listdir(ref_dir)):
        ref = np.load(os.path.join(ref_dir, name)).astype(np.float64)
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            return None, {}, f"output {name} missing"
        got = np.load(path).astype(np.float64)
        if got.shape != ref.shape:
            return None, {}, f"output {name}: shape {got.shape}, want {ref.shape}"
        results.append(numerics.compare(got, ref, bound, name))
        if top1:
            # A classifier's output: [batch, classes] or [batch, classes, 1, 1].
            log = bool((ref > 0).all())
            for key, want, have in (
                    ("", top1_classes(ref), top1_classes(got)),
                    ("centred_", top1_classes(centred(ref, log)), top1_classes(centred(got, log)))):
                for k, value in ((key + "top1", float(np.mean(want == have))),
                                 (key + "classes", len(np.unique(want)))):
                    stats[k] = min(stats.get(k, value), value)
    if not results:
        return None, {}, "no outputs"
    return numerics.combine(results), stats, None


def figures(result):
    """(E, R): the worst relative error and per-element ratio; inf, inf
    for a NaN/Inf mismatch (a NaN output must not pass)."""
    if result is None or result.problem:
        return float("inf"), float("inf")
    return result.rel_l2, result.worst_ratio


def main():
    argv = sys.argv[1:]
    top1 = "--top1" in argv
    argv = [a for a in argv if a != "--top1"]
    bound = 1e-4
    if argv[:1] == ["--bound"] and len(argv) > 1:
        bound, argv = float(argv[1]), argv[2:]
    if len(argv) != 2:
        sys.exit("\n".join(__doc__.strip().splitlines()[2:4]))
    result, stats, problem = compare(argv[0], argv[1], top1, bound)
    err, ratio = figures(result)
    if problem:
        print("error: " + problem)
    elif top1:
        print(f"rel-err {err:.3e} worst-element {ratio:.3f} top1 {stats['top1']:.3f} "
              f"classes {stats['classes']} centred-top1 {stats['centred_top1']:.3f} "
              f"centred-classes {stats['centred_classes']}")
    else:
        print(result.line())
    if not top1:
        print(f"{err:.3e} {ratio:.3f}")


if __name__ == "__main__":
    main()
