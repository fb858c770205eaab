#!/usr/bin/env python3
"""Do two kilnc builds compile the same models to the same artifacts?

Usage:
  scripts/compare-artifacts.py --old OLD/kilnc --new build/bin/kilnc
      [--sets light,encoder,fuzz] [--fuzz-seed 0] [--fuzz-count 300]
      [--jobs 2] [--kiln-run build/bin/kiln-run --run-count N]
      [--work DIR] [--keep-going]

Written for issue 23's restructurings (kernel choices as typed attributes,
emission moved to serialisation), which must change no kernel. Each model is
compiled by both compilers with the same flags into an artifact
(docs/artifact-format.md), and every section but `meta` (the compiler's
version and option string) is compared byte for byte: the signature, the
weight index and bytes, the kernels (names, PTX, cubins, launch geometry,
parameter lists), the launch list, the memory plan, the weight origins, the
kernel resources ptxas reported, the TMA tensor maps. A difference names the
model, the flags and the sections, and for `kernels` the kernels whose
records differ. With --kiln-run, the first --run-count artifacts of each set
are also run on emu with the same seeded inputs and their outputs compared
byte for byte (identical artifacts imply it; this shows the runtime path).

The models:
  light    the onnx package's light zoo (backend/test/data/light/*.onnx),
           each in fp32, bf16 (NHWC, wgmma), tf32 and fp16
  encoder  test/Frontend/ONNX/models/make_encoder.py's layer (batch 1 and
           8), in fp32, bf16, tf32 and fp16
  fuzz     test/e2e/fusion_fuzz.py's seeds, each with the variants CI runs
           (fused, unfused and the seed's rotation)

Exit status 0 when everything is identical, 1 when something differs or a
compile fails in one compiler but not the other (a compile that fails the
same way in both counts as identical).
"""
import argparse
import concurrent.futures
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTION_NAMES = {1: "meta", 2: "signature", 3: "weights", 4: "weight-data",
                 5: "kernels", 6: "launches", 7: "memory-plan",
                 8: "weight-origins", 9: "kernel-resources", 10: "training",
                 11: "tensor-maps"}
PRECISIONS = {
    "fp32": [],
    "bf16": ["--precision=bf16"],
    "tf32": ["--precision=tf32"],
    "fp16": ["--precision=fp16"],
}


def sections(path):
    """{kind: bytes} of an artifact (docs/artifact-format.md: a 64-byte
    header whose bytes 20..32 give the section count and table offset, then
    32-byte table entries: kind u32, flags u32, offset u64, size u64)."""
    with open(path, "rb") as f:
        data = f.read()
    count, table = struct.unpack_from("<IQ", data, 20)
    out = {}
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<IIQQ", data,
                                                    table + 32 * i)
        out[kind] = data[offset:offset + size]
    return out


def ptx_entries(blob):
    """The PTX `.entry` names in a kernels section, with a hash of the text
    between one entry and the next (which kernels changed)."""
    text = blob.decode("latin-1")
    out = {}
    start = 0
    while True:
        at = text.find(".entry ", start)
        if at < 0:
            break
        end = text.find("(", at)
        name = text[at + 7:end].strip()
        nxt = text.find(".entry ", end)
        body = text[at:nxt if nxt >= 0 else len(text)]
        out.setdefault(name, hashlib.sha1(body.encode("latin-1")).hexdigest())
        start = end
    return out


def _read(fmt, blob, at):
    return struct.unpack_from(fmt, blob, at), at + struct.calcsize(fmt)


def kernel_records(blob):
    """The `kernels` section as a list of dicts (docs/artifact-format.md:
    name str, grid and block u32[3], dynamic shared u32, np u32, np x
    (kind u32, name str), PTX blob, cubin sm u32, cubin blob)."""
    (count,), at = _read("<I", blob, 0)
    out = []
    for _ in range(count):
        (size,), at = _read("<I", blob, at)
        name = blob[at:at + size].decode()
        at += size
        geometry, at = _read("<8I", blob, at)
        params = []
        for _ in range(geometry[7]):
            (kind, size), at = _read("<II", blob, at)
            params.append((kind, blob[at:at + size]))
            at += size
        (size,), at = _read("<Q", blob, at)
        ptx = blob[at:at + size]
        at += size
        (sm,), at = _read("<I", blob, at)
        (size,), at = _read("<Q", blob, at)
        cubin = blob[at:at + size]
        at += size
        out.append({"name": name, "geometry": geometry, "params": params,
                    "ptx": ptx, "sm": sm, "cubin": cubin})
    return out


def launch_records(blob):
    """The `launches` section: [(kernel index, argument tuple)]."""
    (count,), at = _read("<I", blob, 0)
    out = []
    for _ in range(count):
        (kernel, nargs), at = _read("<II", blob, at)
        args, at = _read(f"<{nargs}Q", blob, at)
        out.append((kernel, args))
    return out


def resource_records(blob, count):
    """The `kernel-resources` section: one 6 x u32 tuple per kernel."""
    if blob is None:
        return [None] * count
    return [struct.unpack_from("<6I", blob, 4 + 24 * i) for i in range(count)]


def masked_ptx(kernel):
    """A kernel's PTX with the names of its module's entries (a split-K
    kernel and its _reduce share a module) and NVRTC's internal symbols
    masked."""
    ptx = re.sub(rb"\d+_INTERNAL_[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]{8}", b"@I",
                 kernel["ptx"])
    names = re.findall(rb"\.entry\s+([\w$]+)\s*\(", ptx)
    for i, name in sorted(enumerate(names), key=lambda e: -len(e[1])):
        ptx = re.sub(rb"(?<![0-9A-Za-z])" + re.escape(name) + rb"(?![0-9])",
                     b"@K%d" % i, ptx)
    return ptx


def tensor_map_records(blob):
    """The `tensor-maps` section: a list of 140-byte records."""
    if not blob:
        return []
    (count,) = struct.unpack_from("<I", blob, 0)
    return [blob[4 + 140 * i:4 + 140 * (i + 1)] for i in range(count)]


def resolved_args(kernel, args, maps):
    """A launch's arguments with each tensor-map index replaced by the
    record it names (identical maps are shared like identical kernels)."""
    return tuple(maps[value] if kind == 5 and value < len(maps) else value
                 for (kind, _), value in zip(kernel["params"], args))


def same_launch_by_launch(old, new):
    """Whether two artifacts run the same kernels: launch i of both runs a
    kernel with the same geometry, parameters, resources and PTX (its entry
    name aside) with the same arguments. This is what the artifact builder's
    sharing of identical template kernels (issue 23, emission at
    serialisation) keeps while it changes the kernels section: two launches
    of identical kernels kiln_conv_2 and kiln_conv_6 become two launches of
    kiln_conv_2. The PTX is compared with the entry name and NVRTC's
    internal-linkage symbols (`_ZN45_INTERNAL_<hash>_14_kiln_conv_6_cu_<hash
    of the program name>...`, the only place the program name shows) masked;
    a cubin is compared byte for byte when the PTX is identical and not
    otherwise (ptxas made it from PTX that is compared). A `tensor-map`
    argument is compared as the record it names. Returns (None, (old kernels,
    new kernels)) or (reason, None)."""
    ko, kn = kernel_records(old.get(5, b"")), kernel_records(new.get(5, b""))
    lo, ln = launch_records(old.get(6, b"")), launch_records(new.get(6, b""))
    mo, mn = tensor_map_records(old.get(11)), tensor_map_records(new.get(11))
    ro = resource_records(old.get(9), len(ko))
    rn = resource_records(new.get(9), len(kn))
    if len(lo) != len(ln):
        return f"{len(lo)} vs {len(ln)} launches", None
    used = set()
    for i, ((a, args_a), (b, args_b)) in enumerate(zip(lo, ln)):
        x, y = ko[a], kn[b]
        used.add(b)
        where = f"launch {i} ({x['name']} vs {y['name']})"
        if len(args_a) != len(x["params"]) or \
                resolved_args(x, args_a, mo) != resolved_args(y, args_b, mn):
            return f"{where}: arguments differ", None
        if x["geometry"] != y["geometry"] or x["params"] != y["params"] \
                or x["sm"] != y["sm"] or ro[a] != rn[b]:
            return f"{where}: geometry, parameters or resources differ", None
        if x["ptx"] == y["ptx"]:
            if x["cubin"] != y["cubin"]:
                return f"{where}: cubin differs", None
        elif masked_ptx(x) != masked_ptx(y):
            return f"{where}: PTX differs", None
    if len(used) != len(kn):
        return f"{len(kn) - len(used)} kernels no launch runs", None
    return None, (len(ko), len(kn))


def compile_model(kilnc, model, flags, out, extra_env=None):
    env = dict(os.environ)
    env.update(extra_env or {})
    proc = subprocess.run([kilnc, model, "-o", out] + flags,
                          capture_output=True, text=True, env=env)
    return proc.returncode, proc.stderr.strip().splitlines()[-1:] or [""]


def compare_one(job, args):
    """Compiles `job` with both compilers; a description of the difference,
    or None when the artifacts agree."""
    label, model, flags = job
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        old_path = os.path.join(tmp, "old.kiln")
        new_path = os.path.join(tmp, "new.kiln")
        old_rc, old_err = compile_model(args.old, model, flags, old_path)
        new_rc, new_err = compile_model(args.new, model, flags, new_path)
        if old_rc or new_rc:
            if old_rc == new_rc:
                return ("same-failure", f"{label}: both fail: {new_err[0]}")
            return ("differ", f"{label}: old exit {old_rc} ({old_err[0]}), "
                              f"new exit {new_rc} ({new_err[0]})")
        old, new = sections(old_path), sections(new_path)
        differ = [SECTION_NAMES.get(k, str(k))
                  for k in sorted(set(old) | set(new))
                  if k != 1 and old.get(k) != new.get(k)]
        if not differ:
            return ("same", label)
        reason = None
        if set(differ) <= {"kernels", "launches", "kernel-resources",
                           "tensor-maps"}:
            reason, counts = same_launch_by_launch(old, new)
            if reason is None:
                return ("same-shared", f"{label}: {counts[0]} -> {counts[1]} "
                                       "kernels, launch by launch the same")
        detail = ""
        if "kernels" in differ:
            a, b = ptx_entries(old.get(5, b"")), ptx_entries(new.get(5, b""))
            changed = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
            detail = f"; kernels whose PTX differs: {', '.join(changed[:8])}" \
                     f"{' ...' if len(changed) > 8 else ''} " \
                     f"({len(a)} vs {len(b)} entries)"
        if reason:
            detail += f"; launch by launch: {reason}"
        return ("differ", f"{label}: sections differ: {', '.join(differ)}"
                          f"{detail}")


def run_outputs(kiln_run, artifact, outdir):
    proc = subprocess.run([kiln_run, artifact, "--device", "emu",
                           "--random-inputs", "--seed", "1", "-o", outdir],
                          capture_output=True, text=True)
    if proc.returncode:
        return None, proc.stderr.strip()
    files = {}
    for name in sorted(os.listdir(outdir)):
        with open(os.path.join(outdir, name), "rb") as f:
            files[name] = f.read()
    return files, ""


def light_jobs():
    import onnx
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test",
                         "data", "light")
    jobs = []
    for name in sorted(os.listdir(light)):
        if not name.endswith(".onnx"):
            continue
        model = os.path.join(light, name)
        for precision, flags in PRECISIONS.items():
            extra = ["--layout=nhwc"] if precision == "bf16" else []
            jobs.append((f"light {name} {precision}{' nhwc' if extra else ''}",
                         model, flags + extra))
    return jobs


def encoder_jobs(work):
    jobs = []
    for batch in (1, 8):
        model = os.path.join(work, f"encoder_b{batch}.onnx")
        subprocess.run([sys.executable, os.path.join(
            ROOT, "test", "Frontend", "ONNX", "models", "make_encoder.py"),
            model, "--batch", str(batch)], check=True)
        for precision, flags in PRECISIONS.items():
            jobs.append((f"encoder b{batch} {precision}", model, flags))
    return jobs


def fuzz_jobs(work, seed, count):
    sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
    import fusion_fuzz
    import onnx
    jobs = []
    for s in range(seed, seed + count):
        try:
            model = fusion_fuzz.generate(s)
        except fusion_fuzz.GeneratorError as err:
            print(f"fuzz seed {s}: generator error ({err}); skipped",
                  file=sys.stderr)
            continue
        path = os.path.join(work, f"fuzz{s}.onnx")
        onnx.save(model, path)
        for variant in fusion_fuzz.variants_for(s, ["fused", "unfused",
                                                    "rotate"]):
            jobs.append((f"fuzz seed {s} {variant}", path,
                         fusion_fuzz.variant_flags(variant)))
    return jobs


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the reference kilnc")
    parser.add_argument("--new", required=True, help="the kilnc under test")
    parser.add_argument("--sets", default="light,encoder,fuzz")
    parser.add_argument("--fuzz-seed", type=int, default=0)
    parser.add_argument("--fuzz-count", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--kiln-run", help="also run artifacts on emu")
    parser.add_argument("--run-count", type=int, default=5,
                        help="artifacts of each set run on emu (with --kiln-run)")
    parser.add_argument("--work", help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    args.run = bool(args.kiln_run)

    with tempfile.TemporaryDirectory(dir=args.work) as work:
        args.work = work
        sets = args.sets.split(",")
        jobs = []
        if "light" in sets:
            jobs += light_jobs()
        if "encoder" in sets:
            jobs += encoder_jobs(work)
        if "fuzz" in sets:
            jobs += fuzz_jobs(work, args.fuzz_seed, args.fuzz_count)
        same = shared = differ = same_failure = ran = 0
        run_left = {}
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(compare_one, job, args): job for job in jobs}
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                if result[0] == "differ":
                    differ += 1
                    print("DIFFER", result[1], flush=True)
                elif result[0] == "same-shared":
                    shared += 1
                    print("shared", result[1], flush=True)
                elif result[0] == "same-failure":
                    same_failure += 1
                    print("same failure", result[1], flush=True)
                else:
                    same += 1
        # Outputs on emu: recompiled here so the artifacts still exist.
        if args.run:
            for job in jobs:
                kind = job[0].split()[0]
                if run_left.setdefault(kind, args.run_count) <= 0:
                    continue
                with tempfile.TemporaryDirectory(dir=work) as tmp:
                    outs = []
                    for which, kilnc in (("old", args.old), ("new", args.new)):
                        path = os.path.join(tmp, which + ".kiln")
                        if compile_model(kilnc, job[1], job[2], path)[0]:
                            break
                        os.mkdir(os.path.join(tmp, which))
                        outs.append(run_outputs(args.kiln_run, path,
                                                os.path.join(tmp, which)))
                    if len(outs) != 2:
                        continue
                    run_left[kind] -= 1
                    ran += 1
                    (a, err_a), (b, err_b) = outs
                    if a is None or b is None or a != b:
                        differ += 1
                        print("DIFFER", job[0], ": emu outputs differ",
                              err_a or err_b, flush=True)
        print(f"{len(jobs)} compiles compared: {same} identical, "
              f"{shared} the same launch by launch with identical kernels "
              f"shared, {same_failure} failing the same way in both, {differ} "
              f"differing" + (f"; {ran} artifact pairs run on emu with "
                              f"byte-identical outputs unless listed"
                              if args.run else ""))
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
