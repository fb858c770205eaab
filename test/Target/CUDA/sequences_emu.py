import os, subprocess, sys
import numpy as np

d = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.standard_normal((6, 4)).astype(np.float32)
t = rng.standard_normal((2, 4)).astype(np.float32)
np.save(os.path.join(d, "x.npy"), x)
np.save(os.path.join(d, "t.npy"), t)
subprocess.run(["kiln-run", os.path.join(d, "seq.kiln"), "--device", "emu",
                "-i", "x=" + os.path.join(d, "x.npy"),
                "-i", "t=" + os.path.join(d, "t.npy"),
                "-o", os.path.join(d, "out")], check=True,
               stdout=subprocess.DEVNULL)
chunks = [x[0:2], x[2:4], x[4:6]]
want = {
    "y": np.concatenate([t, chunks[0], chunks[1]], 0),
    "n": np.array(3, np.int64),
    "a": t,
    "h": np.array(True),
    "e": np.array(False),
    "g": t,
    "s": np.stack(chunks, 0),
    "r": x[4],
    "p": np.concatenate([t, t], -1),
    "m1": np.concatenate([c + t for c in chunks], 0),
    "m2": np.concatenate([c * c for c in chunks], 0),
}
for name, expected in want.items():
    got = np.load(os.path.join(d, "out", name + ".npy"))
    ok = (got.dtype == expected.dtype and got.shape == expected.shape
          and np.array_equal(got, expected))
    print(f"{name}: {'exact' if ok else f'MISMATCH got {got!r}'}")
