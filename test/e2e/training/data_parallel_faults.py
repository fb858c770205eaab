#!/usr/bin/env python3
"""A rank that dies or stops responding ends a data-parallel job.

Two ranks train the MLP of data_parallel.py (per-rank batch 4) for many
epochs, with a checkpoint after each, under mpirun. Once rank 0 has
written its first checkpoint:

- `stop`: rank 1 is stopped (SIGSTOP), so it neither dies nor answers.
  Rank 0 waits in the next all-reduce until `--collective-timeout` (4 s)
  passes, prints the timeout error and exits 1; mpirun then ends the job.
  Checked: mpirun's status is non-zero, the error line is there, and the
  job ended within timeout + 20 s of the stop (mpirun's own teardown and
  the emulator's step are the slack).
- `kill`: rank 1 is killed (SIGKILL); mpirun sees it and ends rank 0.
  Checked: non-zero status, ended within 20 s.

After each, the last checkpoint must load: a single process resumes from
it (--resume, with the world-size-1 artifact: another number of ranks)
and trains one more epoch; its step counter must continue from the
checkpoint's.
"""
import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data_parallel as dp  # noqa: E402

TIMEOUT = 4


def children(pid):
    """Every descendant of pid (mpirun's ranks), from /proc."""
    result = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            result.append(int(entry))
            result.extend(children(int(entry)))
    return result


def rank_pids(mpirun_pid):
    """{rank: pid} of the kiln-train processes under mpirun."""
    ranks = {}
    for pid in children(mpirun_pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"kiln-train" in cmd and b"OMPI_COMM_WORLD_RANK" in env:
            ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = pid
    return ranks


def step_count(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    lo, hi = header["kiln.state.opt.step"]["data_offsets"]
    return float(np.frombuffer(blob[8 + n + lo:8 + n + hi], np.float32)[0])


def scenario(args, name, art, single_art, sig):
    ck = os.path.join(args.work, name)
    cmd = dp.mpirun(2) + [args.kiln_train, art, "--data",
                          os.path.join(args.work, "x.npy"), "--labels",
                          os.path.join(args.work, "y.npy"), "--epochs", "1000",
                          "--device", "emu", "--quiet", "--checkpoint-dir", ck,
                          "--collective-timeout", str(TIMEOUT)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, KILN_EMU_THREADS="1"))
    checkpoint = os.path.join(ck, "checkpoint.safetensors")
    deadline = time.time() + 120
    while not os.path.exists(checkpoint) and time.time() < deadline:
        time.sleep(0.2)
    pids = rank_pids(proc.pid)
    if not os.path.exists(checkpoint) or 1 not in pids:
        proc.kill()
        print(f"FAIL {name}: no checkpoint or no rank 1 ({pids})")
        return 1
    hit = time.time()
    os.kill(pids[1], sig)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        os.kill(pids[1], signal.SIGKILL)
        print(f"FAIL {name}: the job still runs {TIMEOUT + 60} s after the fault")
        return 1
    took = time.time() - hit
    out = out.decode(errors="replace")
    failures = 0
    limit = (TIMEOUT if sig == signal.SIGSTOP else 0) + 20
    if proc.returncode == 0:
        print(f"FAIL {name}: mpirun exited 0")
        failures += 1
    if took > limit:
        print(f"FAIL {name}: the job took {took:.1f} s to end (limit {limit} s)")
        failures += 1
    if sig == signal.SIGSTOP and "did not complete within the collective timeout" not in out:
        print(f"FAIL {name}: no timeout error in:\n{out}")
        failures += 1
    # The last checkpoint loads, on another number of ranks (one).
    before = step_count(checkpoint)
    r = subprocess.run([args.kiln_train, single_art, "--data",
                        os.path.join(args.work, "x.npy"), "--labels",
                        os.path.join(args.work, "y.npy"), "--epochs",
                        str(int(before // 10) + 1), "--device", "emu", "--quiet",
                        "--checkpoint-dir", ck, "--resume"],
                       capture_output=True, text=True)
    after = step_count(checkpoint) if r.returncode == 0 else -1
    if r.returncode != 0 or after != before + 10:
        print(f"FAIL {name}: resume: status {r.returncode}, steps {before} -> "
              f"{after}\n{r.stderr}")
        failures += 1
    print(f"{name}: mpirun status {proc.returncode}, ended {took:.1f} s after "
          f"the fault, resumed from step {int(before)} on 1 rank to "
          f"{int(after)}: {'ok' if not failures else 'FAILED'}")
    for line in out.splitlines():
        if "error" in line:
            print("  " + line)
            break
    # Leave no stopped process behind.
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kilnc", required=True)
    p.add_argument("--kiln-train", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    model = dp.prepare(args.work)
    spec = "momentum:lr=0.1,momentum=0.9"
    art = os.path.join(args.work, "dp2.kiln")
    single = os.path.join(args.work, "dp1.kiln")
    dp.compile_model(args, model, art, dp.GLOBAL_BATCH // 2, spec, True)
    dp.compile_model(args, model, single, dp.GLOBAL_BATCH, spec, True)
    failures = scenario(args, "stop", art, single, signal.SIGSTOP)
    failures += scenario(args, "kill", art, single, signal.SIGKILL)
    print(f"data-parallel faults: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
