#!/usr/bin/env python3
"""Relative error on the output norm: ||kiln - ref|| / ||ref|| per output.

Usage: compare.py REFERENCE_DIR OUTPUT_DIR
Prints the worst relative error over the outputs (inf when one is missing or
misshaped); exits 0 either way, the caller applies the bound.
"""
import os
import sys

import numpy as np


def main():
    ref_dir, out_dir = sys.argv[1], sys.argv[2]
    worst = 0.0
    for name in sorted(os.listdir(ref_dir)):
        ref = np.load(os.path.join(ref_dir, name)).astype(np.float64)
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            print("inf")
            return
        got = np.load(path).astype(np.float64)
        if got.shape != ref.shape:
            print("inf")
            return
        denom = max(np.linalg.norm(ref), 1e-30)
        worst = max(worst, float(np.linalg.norm(got - ref) / denom))
    print(f"{worst:.3e}")


if __name__ == "__main__":
    main()
