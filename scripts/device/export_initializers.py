#!/usr/bin/env python3
"""Writes every initializer of an ONNX model as DIR/<name>.npy.

Usage: export_initializers.py MODEL.onnx DIR

The files are what `kiln-run --weights DIR` binds into an artifact (one
compiled with `kilnc --strip-weights`, or any artifact whose weights are to
be replaced): each artifact weight names the initializer it was compiled
from, and kiln-run reads DIR/<name>.npy with the name sanitised the way
kiln-run names its output files (characters outside [A-Za-z0-9._-] become
'_'). Two initializers whose sanitised names collide are an error.
"""
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    model = onnx.load(sys.argv[1])
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    written = {}
    for tensor in model.graph.initializer:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", tensor.name)
        if safe in written:
            sys.exit(f"export_initializers.py: initializers '{written[safe]}' "
                     f"and '{tensor.name}' both become {safe}.npy")
        written[safe] = tensor.name
        # np.array(order="C"), not np.ascontiguousarray: that one makes a
        # scalar initializer 1-D, and kiln-run checks the recorded shape.
        np.save(os.path.join(outdir, safe + ".npy"),
                np.array(numpy_helper.to_array(tensor), order="C"))
    print(f"wrote {len(written)} initializers to {outdir}")


if __name__ == "__main__":
    main()
