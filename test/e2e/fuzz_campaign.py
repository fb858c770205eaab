"""The loop the random-model testers share (fusion_fuzz.py, train_fuzz.py).

One model per seed, checked in a set of configurations (fusion_fuzz's
"variants", train_fuzz's "modes") on a thread pool; every result tallied,
every failure saved and printed as it comes, and a summary at the end whose
lines the lit tests check. The testers keep what differs: the generator,
the configurations of a seed, the check, the failure report and its folder.
"""

import collections
import concurrent.futures
import os
import shutil
import tempfile
import threading
import time

import numpy as np


def fmt_where(where, limit=12):
    text = ", ".join(f"{s}/{v}" for s, v in where[:limit])
    return text + (f", ... ({len(where)} in all)" if len(where) > limit else "")


class Campaign:
    """`tool` names the tester in its last line ("fusion-fuzz"), `unit` what
    a seed gives ("graphs"), `config` what a configuration is called
    ("variant"), `compared` what a ratio is measured over ("outputs").
    `make_result(seed)` is the tester's empty Result; `check(model, seed,
    configs, workdir)` returns a filled one with .statuses, .details,
    .signatures, .ratios [(ratio, config, what)], .ops and, optionally,
    .amps; `save_failure(res, config, folder)` returns where it saved and
    `failure_report(res, config)` the text to print. A tester whose runs
    may be skipped (status 'skipped', .details saying why) passes
    `skips=True`: the skips are listed by reason, left out of the runs and
    counted in the last line; `summary_lines()` returns lines of its own
    printed before that line."""

    def __init__(self, args, *, tool, unit, config, compared, make_result,
                 check, save_failure, failure_report, graph_text,
                 skips=False, summary_lines=None):
        self.args = args
        self.tool, self.unit, self.config = tool, unit, config
        self.compared = compared
        self.make_result = make_result
        self.check = check
        self.save_failure = save_failure
        self.failure_report = failure_report
        self.graph_text = graph_text
        self.skips = skips
        self.summary_lines = summary_lines
        self.skipped = collections.defaultdict(list)  # reason -> [(seed, config)]
        self.totals = collections.Counter()
        self.by_config = collections.defaultdict(collections.Counter)
        self.classes = collections.defaultdict(list)  # signature -> [(seed, config)]
        self.unsupported = collections.defaultdict(list)
        self.gen_errors = []
        self.ops = collections.Counter()
        self.amps = []
        self.ratios = []

    def _one(self, seed, generate, configs_for, work_root):
        try:
            model = generate(seed)
        except Exception as e:  # noqa: BLE001 - a generator bug: report, go on
            r = self.make_result(seed)
            r.generator_error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            return r
        workdir = os.path.join(work_root, f"seed{seed}")
        try:
            r = self.check(model, seed, configs_for(seed), workdir)
        except Exception as e:  # noqa: BLE001 - a harness bug: report, go on
            r = self.make_result(seed)
            r.generator_error = (f"harness: {type(e).__name__}: "
                                 f"{str(e).splitlines()[0][:300]}")
        if not self.args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        return r

    def _tally(self, res):
        args = self.args
        if res.generator_error:
            self.gen_errors.append((res.seed, res.generator_error))
            print(f"GENERATOR seed {res.seed}: {res.generator_error}", flush=True)
            return
        self.ops.update(res.ops)
        self.amps += getattr(res, "amps", [])
        self.ratios += [(r, res.seed, c, w) for r, c, w in res.ratios]
        if args.print_graph:
            loss = getattr(getattr(res, "case", None), "loss", None)
            label = f"seed {res.seed}" + (f" ({loss})" if loss else "")
            print(f"--- {label}\n{self.graph_text(res.model)}")
        for config, status in res.statuses.items():
            if status == "unsupported" and args.strict:
                status = "fail"
            self.totals[status] += 1
            self.by_config[config][status] += 1
            if args.verbose:
                print(f"seed {res.seed} {config}: {status}", flush=True)
            if status == "unsupported":
                self.unsupported[res.details[config]].append((res.seed, config))
            elif status == "skipped":
                self.skipped[res.details[config]].append((res.seed, config))
            elif status == "fail":
                self.classes[res.signatures[config]].append((res.seed, config))
                d = self.save_failure(res, config, args.failures)
                print(self.failure_report(res, config) + f"saved to {d}\n",
                      flush=True)

    def run(self, generate, configs_for):
        """Checks seeds args.seed .. args.seed + args.count - 1 with
        args.jobs threads, prints the summary; returns the exit status."""
        args = self.args
        work_root = args.keep or tempfile.mkdtemp(prefix=f"{self.tool}-")
        os.makedirs(work_root, exist_ok=True)
        lock = threading.Lock()
        start = time.monotonic()
        seeds = range(args.seed, args.seed + args.count)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for res in pool.map(
                    lambda s: self._one(s, generate, configs_for, work_root),
                    seeds):
                with lock:
                    self._tally(res)
        seconds = time.monotonic() - start
        self._summary(seconds)
        if not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)
        return 1 if self.totals["fail"] or self.gen_errors else 0

    def _summary(self, seconds):
        print("\nops generated: " + ", ".join(
            f"{k} {v}" for k, v in sorted(self.ops.items())))
        print(f"per {self.config}: " + "; ".join(
            f"{c}: " + ", ".join(f"{s} {n}" for s, n in sorted(t.items()))
            for c, t in sorted(self.by_config.items())))
        if self.amps:
            q = np.quantile(self.amps, [0.5, 0.9, 0.99])
            print(f"outputs {len(self.amps)}: amplification median {q[0]:.2f}, "
                  f"90% {q[1]:.2f}, 99% {q[2]:.1f}, max {max(self.amps):.1f} "
                  f"(every output compared)")
        if self.ratios:
            worst = max(self.ratios)
            q = np.quantile([r[0] for r in self.ratios], [0.5, 0.99])
            print(f"worst per-element ratio over {len(self.ratios)} compared "
                  f"{self.compared}: {worst[0]:.3f} (seed {worst[1]} {worst[2]} "
                  f"'{worst[3]}'); median {q[0]:.3f}, 99% {q[1]:.3f} "
                  f"(<= 1 passes)")
        if self.unsupported:
            print(f"unsupported ({sum(len(v) for v in self.unsupported.values())}):")
            for msg, where in sorted(self.unsupported.items()):
                print(f"  {len(where)}x {msg} (seeds {fmt_where(where)})")
        if self.skipped:
            print(f"skipped ({sum(len(v) for v in self.skipped.values())}):")
            for why, where in sorted(self.skipped.items(), key=lambda kv: -len(kv[1])):
                print(f"  {len(where)}x {why} (seeds {fmt_where(where)})")
        print(f"failure classes ({len(self.classes)}):")
        for sig, where in sorted(self.classes.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(where)}x {sig}\n      seeds {fmt_where(where)}")
        if self.gen_errors:
            print(f"generator errors ({len(self.gen_errors)}): seeds "
                  + ", ".join(str(s) for s, _ in self.gen_errors))
        for line in (self.summary_lines() if self.summary_lines else []):
            print(line)
        t = self.totals
        skipped = f", {t['skipped']} skipped" if self.skips else ""
        print(f"{self.tool}: {self.args.count} {self.unit}, "
              f"{sum(t.values()) - t['skipped']} "
              f"runs: {t['pass']} pass, {t['unsupported']} unsupported, "
              f"{t['fail']} fail{skipped}, {len(self.gen_errors)} generator "
              f"errors ({seconds:.0f} s)")


def check_repros(folder, *, tool, config, default_configs, load, check,
                 failure_report):
    """Saved reproducers, folder/*.onnxtxt: each must pass every
    configuration its '# <config>s: a,b' line names (`default_configs`
    without one). `load(path, text)` returns the model, `check(model,
    configs, workdir)` a Result. Prints a line per run and a summary;
    returns the exit status (an unsupported run fails too)."""
    import glob
    import re
    paths = sorted(glob.glob(os.path.join(folder, "*.onnxtxt")))
    totals = collections.Counter()
    for path in paths:
        with open(path) as f:
            text = f.read()
        m = re.search(rf"^#\s*{config}s:\s*(\S+)", text, re.M)
        configs = m.group(1).split(",") if m else list(default_configs)
        name = os.path.splitext(os.path.basename(path))[0]
        model = load(path, text)
        work = tempfile.mkdtemp(prefix=f"{tool}-repro-")
        res = check(model, configs, work)
        shutil.rmtree(work, ignore_errors=True)
        if res.generator_error:
            print(f"repro {name}: {res.generator_error}")
            totals["fail"] += 1
            continue
        for c in configs:
            status = res.statuses[c]
            totals[status] += 1
            print(f"repro {name} {c}: {status}"
                  + (f": {res.signatures[c]}" if c in res.signatures else ""))
            if status == "fail":
                print(failure_report(res, c))
    print(f"{tool} repros: {len(paths)} models, {sum(totals.values())} "
          f"runs: {totals['pass']} pass, {totals['unsupported']} unsupported, "
          f"{totals['fail']} fail")
    return 1 if totals["fail"] or totals["unsupported"] else 0
