#!/usr/bin/env python3
"""Writes every initializer of MODEL as DIR/<name>.npy (kiln-run --weights
DIR reads them) and seeded int64 ids of SHAPE to IDS.npy.

Usage: export_initializers.py MODEL DIR IDS.npy ROWSxCOLS HIGH
"""
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

model, directory, ids, shape, high = sys.argv[1:6]
os.makedirs(directory, exist_ok=True)
for init in onnx.load(model).graph.initializer:
    np.save(os.path.join(directory, init.name + ".npy"),
            numpy_helper.to_array(init))
dims = tuple(int(d) for d in shape.split("x"))
np.save(ids, np.random.default_rng(1).integers(0, int(high), dims).astype(np.int64))
