#!/usr/bin/env python3
"""expect_exit.py STATUS -- COMMAND...: runs COMMAND, passes its stdout and
stderr through, and fails unless it exited with exactly STATUS (lit's `not`
accepts any non-zero status; the tools document 1 and 2 apart)."""
import subprocess
import sys

want = int(sys.argv[1])
assert sys.argv[2] == "--", "usage: expect_exit.py STATUS -- COMMAND..."
run = subprocess.run(sys.argv[3:], capture_output=True, text=True)
sys.stdout.write(run.stdout)
sys.stdout.write(run.stderr)
if run.returncode != want:
    sys.exit(f"expect_exit.py: {sys.argv[3]} exited with {run.returncode}, "
             f"not {want}")
