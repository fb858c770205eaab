#!/usr/bin/env python3
"""Issue 13's calibration: the performance model's estimates against GPU times.

Usage: calibration.py PROFILE.json [PROFILE.json ...] [--md OUT.md]
                      [--json OUT.json] [--ini OUT.ini] [--coverage 0.8]
                      [--factor 2] [--target-table gpus.ini]

Each PROFILE is a kiln-profile JSON file as `kiln-run --device cuda
--profile --profile-json F --estimate-from EST.json` writes it: per kernel a
measured time (`measured_us`, the median per run) beside the emu estimate
(`estimated_us`, `bound`). A profile is one model variant, labelled
DIR/NAME after its folder and file name (`profile-` dropped), so that
device_check.py's work/resnet50-b32/profile-bf16-fused.json is
"resnet50-b32/bf16-fused".

Per model: the kernels sorted by measured time (ties in file order), the
smallest prefix of them whose measured time is at least --coverage (0.8) of
the model's measured total, and for each its estimate / measured ratio and
whether it is within --factor (2) of the measured time: 1/F <= ratio <= F,
both ends included. The verdict is PASS when every kernel of the prefix is
within (issue 13: "within 2x of the measured time for the kernels that make
up 80% of a model's time"), else FAIL. A kernel with a measured time but no
estimate has ratio "-" and is not within. Also: the share of the model's
measured time in kernels (of the whole model) that are within, and the
whole model's estimate / measured (over its kernels that have both).

Then the suggested figures of runtime/targets/gpus.ini, from every kernel
of every profile with both times, grouped by target and by the figure
their `bound` class divides by: memory -> dram_bandwidth_gbps; compute ->
the tensor peak of the kernel's MMA type (bf16_tflops, fp16_tflops,
tf32_tflops, int8_tops; bf16 when the type is unknown, as PerformanceModel.cpp does) or
fp32_tflops without MMA; issue -> clock_ghz (the issue rate is schedulers
x clock, and schedulers are whole); launch -> launch_overhead_us. For each,
the time-weighted geometric mean of measured / estimated, r: a geometric
mean because the errors are factors (2x over and 2x under cancel to 1,
where an arithmetic mean would call that 1.25x over), weighted by measured
time because the figure matters where the time goes; a median was the
other candidate, but a class often has a handful of kernels and a median
of a few jumps with one. A rate becomes figure / r, the overhead
overhead x r. This is first order: it scales a kernel's whole estimate
(its launch overhead too) and attributes a kernel mixing MMA and FMA to
its MMA peak. --ini writes the whole target table with the suggested
values, to try with KILN_TARGET_TABLE=FILE (docs/runtime.md).

Prints the markdown (--md writes it too; ready for docs/benchmarks.md),
--json the same as JSON. Exit 0 whatever the verdicts; 2 on bad input: a
file that is missing, unreadable or not JSON, not a kiln-profile, or
without measured times (an emu profile) or estimates (a cuda profile made
without --estimate-from): one line naming the file, and no output file is
written (each is written to a temporary file and renamed).
"""
import argparse
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The table travels with the packed scripts (prepare.py) or is the source's.
TARGET_TABLES = [os.path.join(HERE, "gpus.ini"),
                 os.path.join(HERE, "..", "..", "runtime", "targets", "gpus.ini")]
BOUNDS = ["memory", "compute", "issue", "launch"]
TENSOR_FIGURE = {"f16": "fp16_tflops", "tf32": "tf32_tflops", "bf16": "bf16_tflops",
                 "int8": "int8_tops", "": "bf16_tflops"}
# Exact 2x (and 0.5x) must count as within despite rounding in the files.
TOLERANCE = 1e-9


class CalibrationError(Exception):
    """Bad input: the message is one line naming the file."""


def number(value):
    """A JSON number (not a bool), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def label_of(path):
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem.startswith("profile-"):
        stem = stem[len("profile-"):]
    return f"{folder}/{stem}" if folder else stem


def load_profile(path):
    """The kernels of one measured profile with estimates, or CalibrationError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CalibrationError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}")
    try:
        root = json.loads(text)
    except json.JSONDecodeError as e:
        raise CalibrationError(f"{path}: malformed JSON: {e.msg} (line {e.lineno}, "
                               f"column {e.colno})")
    if not isinstance(root, dict) or root.get("format") != "kiln-profile":
        found = root.get("format") if isinstance(root, dict) else None
        raise CalibrationError(
            f"{path}: not a kiln-profile file (format "
            f"{json.dumps(found) if found is not None else 'missing'}; "
            "kiln-run --profile-json writes one)")
    if root.get("version") != 1:
        raise CalibrationError(f"{path}: kiln-profile version {root.get('version')} is not 1")
    items = root.get("kernels")
    if not isinstance(items, list) or not items:
        raise CalibrationError(f"{path}: no kernels (an empty or missing 'kernels' array)")
    kernels = []
    for i, k in enumerate(items):
        if not isinstance(k, dict) or not isinstance(k.get("kernel"), str) or not k["kernel"]:
            raise CalibrationError(f"{path}: kernel entry {i} has no name")
        for key in ("measured_us", "estimated_us"):
            if k.get(key) is not None and (number(k[key]) is None or k[key] < 0):
                raise CalibrationError(f"{path}: kernel '{k['kernel']}': {key} "
                                       f"{json.dumps(k[key])} is not a time")
        kernels.append(dict(kernel=k["kernel"], launches=k.get("launches"),
                            bound=k.get("bound") if isinstance(k.get("bound"), str) else None,
                            measured_us=number(k.get("measured_us")),
                            estimated_us=number(k.get("estimated_us")),
                            mma_type=k.get("mma_type") or "",
                            mma_flops=number(k.get("mma_flops")) or 0.0))
    device = root.get("device") or "?"
    if not any(k["measured_us"] is not None for k in kernels):
        raise CalibrationError(
            f"{path}: no measured times (device {device}, time source "
            f"'{root.get('time_source')}'): profile the artifact on cuda with "
            "kiln-run --profile --estimate-from EST.json")
    if not any(k["measured_us"] for k in kernels):
        raise CalibrationError(f"{path}: every measured time is 0")
    if not any(k["estimated_us"] is not None for k in kernels):
        raise CalibrationError(
            f"{path}: no estimates beside the measured times: run kiln-run with "
            "--estimate-from an emu --profile-json of the same artifact")
    return dict(label=label_of(path), file=path, device=device,
                device_name=root.get("device_name") or "", target=root.get("target") or "",
                measured_runs=root.get("measured_runs"), kernels=kernels)


def within(ratio, factor):
    return ratio is not None and 1.0 / factor * (1 - TOLERANCE) <= ratio <= factor * (1 + TOLERANCE)


def analyse(profile, coverage, factor):
    """One model's rows, prefix and verdict."""
    measured = [k for k in profile["kernels"] if k["measured_us"] is not None]
    rows = sorted(measured, key=lambda k: -k["measured_us"])  # stable: ties in file order
    total = sum(k["measured_us"] for k in rows)
    cumulative, prefix = 0.0, 0
    out = []
    for k in rows:
        est, meas = k["estimated_us"], k["measured_us"]
        ratio = est / meas if est is not None and meas > 0 else None
        cumulative += meas
        out.append(dict(k, ratio=ratio, within=within(ratio, factor), share=meas / total,
                        cumulative=cumulative / total))
    for i, r in enumerate(out):
        if r["cumulative"] >= coverage * (1 - TOLERANCE):
            prefix = i + 1
            break
    head = out[:prefix]
    both = [r for r in out if r["estimated_us"] is not None]
    est_sum = sum(r["estimated_us"] for r in both)
    meas_both = sum(r["measured_us"] for r in both)
    return dict(
        label=profile["label"], file=profile["file"], device=profile["device"],
        device_name=profile["device_name"], target=profile["target"],
        kernels=len(profile["kernels"]), unmeasured=len(profile["kernels"]) - len(out),
        without_estimate=len(out) - len(both), measured_us=total, estimated_us=est_sum,
        ratio=est_sum / meas_both if meas_both > 0 else None,
        prefix=head, prefix_share=head[-1]["cumulative"] if head else 0.0,
        prefix_within=sum(1 for r in head if r["within"]),
        share_within=sum(r["measured_us"] for r in out if r["within"]) / total,
        verdict="PASS" if all(r["within"] for r in head) else "FAIL",
        rest=len(out) - prefix, rest_share=1.0 - (head[-1]["cumulative"] if head else 0.0))


# --- the target table ------------------------------------------------------

def read_table(path):
    """(text, {section: {key: value}}) of a gpus.ini-format file, read as
    runtime/lib/TargetTable.cpp reads it ('#' starts a comment anywhere)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    sections, current = {}, None
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
        elif "=" in line and current is not None:
            key, value = (s.strip() for s in line.split("=", 1))
            current[key] = value
    return text, sections


def figure_of(kernel):
    bound = kernel["bound"]
    if bound == "memory":
        return "dram_bandwidth_gbps"
    if bound == "compute":
        if kernel["mma_flops"] > 0 or kernel["mma_type"]:
            return TENSOR_FIGURE.get(kernel["mma_type"], "bf16_tflops")
        return "fp32_tflops"
    if bound == "issue":
        return "clock_ghz"
    if bound == "launch":
        return "launch_overhead_us"
    return None


def rounded(figure, value):
    if figure == "dram_bandwidth_gbps":
        return f"{value:.0f}"
    if figure == "clock_ghz":
        return f"{value:.3f}"
    if figure == "launch_overhead_us":
        return f"{value:.2f}"
    return f"{value:.4g}"


def suggest(profiles, table):
    """Per (target, figure): the time-weighted geometric mean of measured /
    estimated over the kernels of that bound class, and the new value."""
    groups = {}
    for p in profiles:
        for k in p["kernels"]:
            figure = figure_of(k)
            m, e = k["measured_us"], k["estimated_us"]
            if figure and m and e:  # both present and non-zero
                groups.setdefault((p["target"], k["bound"], figure), []).append((m, e))
    out = []
    order = {b: i for i, b in enumerate(BOUNDS)}
    for (target, bound, figure), pairs in sorted(groups.items(),
                                                 key=lambda g: (g[0][0], order[g[0][1]], g[0][2])):
        weight = sum(m for m, _ in pairs)
        r = math.exp(sum(m * math.log(m / e) for m, e in pairs) / weight)
        current = number(_float((table or {}).get(target, {}).get(figure)))
        suggested = None
        if current is not None:
            suggested = current * r if figure == "launch_overhead_us" else current / r
        out.append(dict(target=target, bound=bound, figure=figure, kernels=len(pairs),
                        measured_us=weight, factor=r,
                        low=min(m / e for m, e in pairs), high=max(m / e for m, e in pairs),
                        current=current,
                        suggested=float(rounded(figure, suggested)) if suggested is not None
                        else None))
    return out


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def calibrated_table(text, suggestions):
    """The table's text with the suggested values put in (every section kept,
    so that KILN_TARGET_TABLE=FILE loads it)."""
    new = {(s["target"], s["figure"]): s for s in suggestions if s["suggested"] is not None}
    lines, section = [], None
    for line in text.splitlines():
        body = line.split("#", 1)[0].strip()
        if body.startswith("[") and body.endswith("]"):
            section = body[1:-1].strip()
        elif "=" in body and section is not None:
            key = body.split("=", 1)[0].strip()
            s = new.get((section, key))
            if s:
                line = (f"{key} = {rounded(key, s['suggested'])}  # calibration.py: was "
                        f"{s['current']:g}, measured/estimated {s['factor']:.3f} over "
                        f"{s['kernels']} {s['bound']}-bound kernel(s)")
        lines.append(line)
    return "\n".join(lines) + "\n"


# --- output ------------------------------------------------------------------

def us(value):
    return "-" if value is None else f"{value:.2f}"


def ratio_text(value):
    return "-" if value is None else f"{value:.2f}"


def percent(value):
    return f"{100.0 * value:.1f}%"


def verdict_line(m, coverage=0.8, factor=2.0):
    """One line per model for device_check.py's log and table."""
    return (f"calibration {m['label']}: {m['verdict']}: {m['prefix_within']} of the "
            f"{len(m['prefix'])} kernels making up {percent(m['prefix_share'])} of the "
            f"measured time within {factor:g}x; estimate/measured {ratio_text(m['ratio'])} "
            f"for the model; {percent(m['share_within'])} of the time within {factor:g}x")


def markdown(report):
    c, f = report["coverage"], report["factor"]
    lines = [f"Estimate (emu performance model) against measured (cuda) per kernel; "
             f"within {f:g}x: {1 / f:g} <= estimate/measured <= {f:g}. A model passes when "
             f"every kernel of the smallest set, by measured time, making up "
             f"{percent(c)} of its measured time is within (`scripts/device/calibration.py`).",
             "",
             "| model | device | target | kernels | measured us | estimated us | est/meas | "
             f"kernels for {percent(c)} | of them within {f:g}x | time within {f:g}x | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in report["models"]:
        device = m["device"] + (f" ({m['device_name']})" if m["device_name"] else "")
        lines.append(f"| {m['label']} | {device} | {m['target'] or '-'} | {m['kernels']} | "
                     f"{us(m['measured_us'])} | {us(m['estimated_us'])} | "
                     f"{ratio_text(m['ratio'])} | {len(m['prefix'])} "
                     f"({percent(m['prefix_share'])}) | {m['prefix_within']} | "
                     f"{percent(m['share_within'])} | {m['verdict']} |")
    for m in report["models"]:
        lines += ["", f"{m['label']}: the kernels making up {percent(c)} of the measured time",
                  "",
                  "| # | kernel | launches | bound | measured us | share | cumulative | "
                  f"estimated us | est/meas | within {f:g}x |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for i, r in enumerate(m["prefix"], 1):
            lines.append(f"| {i} | {r['kernel']} | {r['launches'] if r['launches'] is not None else '-'} "
                         f"| {r['bound'] or '-'} | {us(r['measured_us'])} | {percent(r['share'])} | "
                         f"{percent(r['cumulative'])} | {us(r['estimated_us'])} | "
                         f"{ratio_text(r['ratio'])} | {'yes' if r['within'] else 'no'} |")
        notes = []
        if m["rest"]:
            notes.append(f"{m['rest']} more kernel(s): {percent(m['rest_share'])} of the time")
        if m["without_estimate"]:
            notes.append(f"{m['without_estimate']} measured kernel(s) without an estimate "
                         "(ratio '-', not within)")
        if m["unmeasured"]:
            notes.append(f"{m['unmeasured']} kernel(s) without a measured time left out")
        if notes:
            lines += ["", "(" + "; ".join(notes) + ")"]
    lines += ["", "Suggested figures for `runtime/targets/gpus.ini` (r: the time-weighted "
              "geometric mean of measured/estimated over the kernels of the bound class; a "
              "rate becomes figure / r, the launch overhead overhead x r)", "",
              "| target | bound | figure | kernels | measured us | r | range | current | "
              "suggested |", "|---|---|---|---|---|---|---|---|---|"]
    for s in report["suggestions"]:
        current = "-" if s["current"] is None else f"{s['current']:g}"
        suggested = "-" if s["suggested"] is None else rounded(s["figure"], s["suggested"])
        lines.append(f"| {s['target'] or '-'} | {s['bound']} | {s['figure']} | {s['kernels']} | "
                     f"{us(s['measured_us'])} | {s['factor']:.3f} | {s['low']:.2f}-"
                     f"{s['high']:.2f} | {current} | {suggested} |")
    if not report["suggestions"]:
        lines.append("| - | - | - | 0 | - | - | - | - | - |")
    fragment = []
    for target in sorted({s["target"] for s in report["suggestions"]
                          if s["suggested"] is not None}):
        fragment.append(f"[{target}]")
        for s in report["suggestions"]:
            if s["target"] == target and s["suggested"] is not None:
                fragment.append(f"{s['figure']} = {rounded(s['figure'], s['suggested'])}"
                                f"  # was {s['current']:g}, r {s['factor']:.3f}")
    if fragment:
        lines += ["", "The changed lines (`--ini FILE` writes the whole table with them, for "
                  "`KILN_TARGET_TABLE=FILE`):", "", "```ini"] + fragment + ["```"]
    return "\n".join(lines) + "\n"


def calibrate(profiles, coverage=0.8, factor=2.0, table=None):
    return dict(format="kiln-calibration", version=1, coverage=coverage, factor=factor,
                models=[analyse(p, coverage, factor) for p in profiles],
                suggestions=suggest(profiles, table))


def write_all(outputs):
    """{path: text}: every file to a temporary file beside it, then renamed,
    so that a failure leaves none of them half written."""
    temps, path = [], None
    try:
        for path, text in outputs.items():
            fd, temp = tempfile.mkstemp(prefix=".calibration-", dir=os.path.dirname(
                os.path.abspath(path)))
            temps.append((temp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        for temp, path in temps:
            os.replace(temp, path)
    except OSError as e:
        for temp, _ in temps:
            if os.path.exists(temp):
                os.remove(temp)
        raise CalibrationError(f"{path}: cannot write: {e.strerror or e}")


def default_table():
    return next((p for p in TARGET_TABLES if os.path.exists(p)), None)


def report_files(profiles, md=None, json_path=None, ini=None, coverage=0.8, factor=2.0,
                 table_path=None):
    """The report of loaded profiles, written to the files named (all or
    none); returns (report, markdown)."""
    text, table = None, None
    if table_path:
        try:
            text, table = read_table(table_path)
        except OSError as e:
            raise CalibrationError(f"{table_path}: cannot read: {e.strerror or e}")
    report = calibrate(profiles, coverage, factor, table)
    report["target_table"] = table_path
    page = markdown(report)
    outputs = {}
    if md:
        outputs[md] = page
    if json_path:
        outputs[json_path] = json.dumps(report, indent=1) + "\n"
    if ini:
        if text is None:
            raise CalibrationError("--ini: no target table (gpus.ini) to start from")
        outputs[ini] = calibrated_table(text, report["suggestions"])
    write_all(outputs)
    return report, page


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profiles", nargs="+", metavar="PROFILE.json")
    ap.add_argument("--md", help="write the markdown here too")
    ap.add_argument("--json", help="write the report as JSON")
    ap.add_argument("--ini", help="write the target table with the suggested figures")
    ap.add_argument("--coverage", type=float, default=0.8,
                    help="the share of the measured time the verdict covers (default 0.8)")
    ap.add_argument("--factor", type=float, default=2.0,
                    help="within F: 1/F <= estimate/measured <= F (default 2)")
    ap.add_argument("--target-table", help="the figures' current values (default: "
                    "gpus.ini beside this script, else runtime/targets/gpus.ini)")
    args = ap.parse_args(argv)
    if not 0 < args.coverage <= 1 or not args.factor >= 1:
        ap.error("--coverage must be in (0, 1] and --factor at least 1")
    try:
        profiles = [load_profile(p) for p in args.profiles]
        _, page = report_files(profiles, args.md, args.json, args.ini, args.coverage,
                               args.factor, args.target_table or default_table())
    except CalibrationError as e:
        print(f"calibration.py: error: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
