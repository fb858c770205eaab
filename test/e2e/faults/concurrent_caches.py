#!/usr/bin/env python3
"""Concurrent kilnc runs sharing one kernel cache and one tune cache
(issue 28, "Concurrency"; docs/reliability.md).

Usage: concurrent_caches.py MODEL WORK --kilnc K [--jobs N]

1. Kernel cache: N kilnc compile MODEL at once into one empty
   --kernel-cache; every run must succeed and write the same artifact,
   byte for byte, as a compile with the cache off; no temporary file may
   be left in the cache; then a warm compile must take every template
   kernel and every PTX module from the cache and write the same bytes.
2. Tune cache: two `kilnc --tune --tune-device=emu` tune two different
   models into one --tune-cache at once; both must succeed, the cache must
   be valid JSON holding every problem of both models once (the writers'
   entries merged, no file half-written), and compiling each model with
   the cache and no worker must take every region's config from it.
One line per part: "<part>: ... ok|FAIL".
"""
import argparse
import filecmp
import glob
import json
import os
import re
import shutil
import subprocess
import sys


def run_all(commands, cwds, env=None):
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env,
                              cwd=d)
             for c, d in zip(commands, cwds)]
    return [(p.wait(), *p.communicate()) for p in procs]


def kernel_cache(args):
    # The artifact records kilnc's command line, so every compile runs the
    # same one, each in a directory of its own.
    cache = os.path.abspath(os.path.join(args.work, "kcache"))
    argv = [args.kilnc, os.path.abspath(args.model), "--precision=bf16",
            f"--kernel-cache={cache}", "-o", "m.kiln"]
    dirs = [os.path.join(args.work, name)
            for name in ["ref", "warm"] + [f"k{i}" for i in range(args.jobs)]]
    for d in dirs:
        os.makedirs(d, exist_ok=True)
    # The reference: alone, into a cache that is then removed.
    subprocess.run(argv, check=True, capture_output=True, cwd=dirs[0])
    shutil.rmtree(cache)
    results = run_all([argv] * args.jobs, dirs[2:])
    failed = [r[2].strip().splitlines()[-1:] for r in results if r[0] != 0]
    ref = os.path.join(dirs[0], "m.kiln")
    same = all(filecmp.cmp(ref, os.path.join(d, "m.kiln"), shallow=False)
               for d in dirs[2:] if os.path.exists(os.path.join(d, "m.kiln")))
    temps = [f for f in glob.glob(os.path.join(cache, "**", "*"),
                                  recursive=True)
             if "tmp" in os.path.basename(f) and os.path.isfile(f)]
    # The warm compile's bytes (the same command line), then its hits.
    subprocess.run(argv, check=True, capture_output=True, cwd=dirs[1])
    warm = subprocess.run(argv + ["--stats"], capture_output=True, text=True,
                          cwd=dirs[2])
    m = re.search(r"template kernels: (\d+), (\d+) distinct, (\d+) from the "
                  r"kernel cache; ptxas: (\d+) modules, (\d+) from the kernel "
                  r"cache", warm.stdout)
    all_hits = bool(m) and m.group(2) == m.group(3) and \
        m.group(4) == m.group(5)
    warm_same = filecmp.cmp(ref, os.path.join(dirs[1], "m.kiln"),
                            shallow=False)
    ok = not failed and same and not temps and all_hits and warm_same
    print(f"kernel cache: {args.jobs} concurrent compiles, {len(failed)} "
          f"failed, artifacts {'identical' if same else 'DIFFER'}, "
          f"{len(temps)} temporaries left, warm compile "
          f"{m.group(0) if m else '?'}{'' if warm_same else ', DIFFERS'} "
          f"{'ok' if ok else 'FAIL'}")
    for f in failed:
        print("  ", f)
    return ok


def other_model(path):
    """One MatMul of sizes MODEL does not have: its problem is another key."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = np.random.default_rng(3).standard_normal((56, 72)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "other",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 56])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 72])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def tune_cache(args):
    # Two runs tune different models into one cache at once: a writer that
    # did not merge what the other wrote would lose that one's problems.
    cache = os.path.join(args.work, "tune.json")
    other = os.path.join(args.work, "other.onnx")
    other_model(other)
    base = ["--precision=bf16", "--tune", "--tune-device=emu",
            "--tune-max-candidates=2", f"--tune-cache={cache}",
            "--kernel-cache=off"]
    results = run_all([[args.kilnc, m] + base +
                       ["-o", os.path.join(args.work, f"t{i}.kiln")]
                       for i, m in enumerate([args.model, other])],
                      [None, None])
    failed = [r[2].strip().splitlines()[-1:] for r in results if r[0] != 0]
    try:
        with open(cache) as f:
            entries = json.load(f).get("entries", [])
        problems = [json.dumps(e.get("problem"), sort_keys=True)
                    for e in entries]
        distinct = len(set(problems))
        valid = True
    except (OSError, ValueError) as e:
        entries, distinct, valid = [], 0, False
        print("  tune cache unreadable:", e)
    env = dict(os.environ, KILN_TUNE_WORKER="/nonexistent")
    regions, returncodes = [], []
    for m in (args.model, other):
        cached = subprocess.run(
            [args.kilnc, m, "--precision=bf16", f"--tune-cache={cache}",
             "--kernel-cache=off", "--stats",
             "-o", os.path.join(args.work, "cached.kiln")],
            capture_output=True, text=True, env=env)
        returncodes.append(cached.returncode)
        regions += re.findall(r"^ *kiln_gemm_\d+: .*; (.*)$", cached.stdout,
                              re.MULTILINE)
    from_cache = bool(regions) and all(r.startswith("tuned (cache)")
                                       for r in regions)
    ok = (not failed and valid and distinct == len(entries) and
          distinct == len(regions) and from_cache and
          not any(returncodes))
    print(f"tune cache: 2 concurrent --tune runs, {len(failed)} failed, "
          f"cache {'valid' if valid else 'INVALID'} with {len(entries)} "
          f"entries ({distinct} problems), {len(regions)} regions, "
          f"{'all' if from_cache else 'NOT all'} from the cache "
          f"{'ok' if ok else 'FAIL'}")
    for f in failed:
        print("  ", f)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("work")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = (not kernel_cache(args)) + (not tune_cache(args))
    print(f"concurrent caches: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
