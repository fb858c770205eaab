#!/usr/bin/env python3
"""One rank of `mpirun -np N python data_parallel_trainer.py ...`:
kiln.Trainer.fit on a --data-parallel artifact, as a user's train.py would
be (data_parallel.py --python runs it and compares rank 0's checkpoint with
kiln-train's under the same mpirun)."""
import sys

import numpy as np

import kiln

art, x, y, ck = sys.argv[1:5]
trainer = kiln.Trainer(art, device="emu", collective_timeout=120)
trainer.fit(np.load(x), np.load(y), epochs=1, seed=0, checkpoint_dir=ck)
print(f"rank {trainer.rank} of {trainer.world_size}: "
      f"{trainer.step_count} steps", flush=True)
