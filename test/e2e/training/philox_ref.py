"""Philox-4x32-10 in numpy, written from Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3" (SC'11), section 5: the reference the dropout
and augmentation tests compare Kiln's generated kernels with. Checked
against the Random123 known-answer vectors in dropout.py before use."""
import numpy as np

MASK = np.uint64(0xFFFFFFFF)
M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)


def philox4x32_10(ctr, key):
    """ctr: four arrays (or ints) of 32-bit words, key: two; returns the
    four output words as uint64 arrays holding 32-bit values."""
    c = [np.asarray(w, dtype=np.uint64) & MASK for w in ctr]
    k0, k1 = np.uint64(key[0]) & MASK, np.uint64(key[1]) & MASK
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        p0 = M0 * c[0]  # < 2^64: both factors are below 2^32
        p1 = M1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & MASK,
             (p0 >> np.uint64(32)) ^ c[3] ^ k1, p0 & MASK]
    return c


def element_bits(shape, key, counter, stream=0):
    """kiln.philox's result: element i (row-major) is word i mod 4 of
    philox(counter[0] + i div 4, counter[1] + stream, counter[2],
    counter[3]) under key (Passes.td / KilnRandomOps.td)."""
    n = int(np.prod(shape)) if len(shape) else 1
    i = np.arange(n, dtype=np.uint64)
    ctr = [(np.uint64(counter[0]) + i // np.uint64(4)) & MASK,
           np.full(n, (int(counter[1]) + stream) & 0xFFFFFFFF, np.uint64),
           np.full(n, int(counter[2]) & 0xFFFFFFFF, np.uint64),
           np.full(n, int(counter[3]) & 0xFFFFFFFF, np.uint64)]
    words = philox4x32_10(ctr, key)
    pick = (i % np.uint64(4)).astype(np.int64)
    out = np.choose(pick, words)
    return out.reshape(shape)


def dropout_mask(shape, key, counter, ratio, stream=0):
    """kiln.dropout_mask: 1 / keep where the element's word is below
    round(keep * 2^32), else 0 (float64)."""
    keep = 1.0 - ratio
    threshold = min(int(round(keep * 2.0**32)), 0xFFFFFFFF)
    bits = element_bits(shape, key, counter, stream)
    return np.where(bits < np.uint64(threshold), 1.0 / keep, 0.0)
