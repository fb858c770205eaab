#!/usr/bin/env python3
"""Seeded random numbers that are the same bits on every machine.

numpy's generators promise the same stream only within a numpy version, and
the GPU check regenerates the random models on a machine with another numpy
than the one the artifacts were compiled from (their weights are not carried,
see scripts/device/prepare.sh). This generator uses nothing but 64-bit
integer arithmetic and correctly rounded float operations, so any numpy (or
plain Python) gives the same bits:

- draw k (k = 1, 2, ...) of seed s is SplitMix64 (Steele, Lea and Flood,
  2014; Vigna's splitmix64.c): z = s + k * 0x9E3779B97F4A7C15 mod 2^64, then
  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
  z *= 0x94D049BB133111EB; z ^= z >> 31;
- uniform(lo, hi): u = (z >> 11) * 2^-53 (exact in float64, in [0, 1)),
  then lo + (hi - lo) * u in float64 (each operation correctly rounded);
  callers convert to float32 (round to nearest even);
- normal(mean, std) is NOT Gaussian: it is uniform on
  [mean - std * sqrt(3), mean + std * sqrt(3)), the same mean and variance
  (log, cos and exp are not correctly rounded everywhere; sqrt is).

Draws are consumed in order, like numpy's Generator: the same sequence of
calls gives the same values.
"""
import math

import numpy as np

GAMMA = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB
MASK = (1 << 64) - 1


class PortableRandom:
    """A SplitMix64 stream with numpy-like uniform() and normal()."""

    chunk = 1 << 22  # draws per block (bounds temporary memory)

    def __init__(self, seed=0):
        self.seed = int(seed) & MASK
        self.count = 0  # draws consumed so far

    def bits(self, n):
        """The next n 64-bit draws as a uint64 array."""
        n = int(n)
        out = np.empty(n, dtype=np.uint64)
        seed = np.uint64(self.seed)
        for start in range(0, n, self.chunk):
            stop = min(n, start + self.chunk)
            first = self.count + start + 1
            k = np.arange(stop - start, dtype=np.uint64) + np.uint64(first & MASK)
            z = seed + k * np.uint64(GAMMA)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
            out[start:stop] = z ^ (z >> np.uint64(31))
        self.count += n
        return out

    def random(self, shape):
        """Uniform float64 in [0, 1) with 53 random bits."""
        size = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
        u = (self.bits(size) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
        return u.reshape(tuple(int(d) for d in shape))

    def uniform(self, low, high, shape):
        """Uniform float64 in [low, high)."""
        low, high = float(low), float(high)
        return low + (high - low) * self.random(shape)

    def normal(self, mean, std, shape):
        """Uniform with the given mean and standard deviation (see above)."""
        half = float(std) * math.sqrt(3.0)
        return self.uniform(float(mean) - half, float(mean) + half, shape)

    def standard_normal(self, shape):
        return self.normal(0.0, 1.0, shape)
