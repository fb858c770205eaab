#!/usr/bin/env python3
"""A kernel that faults on purpose: the error names it and the process exits.

    scripts/device/fault_check.py prepare --build build --out device-check/fault
        (here: compile a small model for sm_90, then write fault.kiln, the
        same artifact with one kernel's PTX storing to address 0 first)
    scripts/device/fault_check.py run --dir device-check/fault
                                      [--device cuda|emu] [--kiln-run PATH]
        (on the lent GPU machine, from scripts/device-check.sh, phase
        "fault"; --device emu is the dry run here)

Issue 28's "a kernel that faults on a GPU": an out-of-bounds artifact made
on purpose must give an error naming the kernel, and the process must exit
cleanly. The model is three kernels (Relu, a MatMul, an Add); prepare.py
rewrites the artifact's `kernels` section (docs/artifact-format.md: the
kernel records, then every section's offset and CRC-32C, the table's and
the header's) so that the MatMul's kernel begins with

    mov.b64 %rd_kiln_fault, 0; st.global.u32 [%rd_kiln_fault], 0;

and drops every cubin, so that the driver JIT-compiles the PTX it holds.
The artifact is otherwise valid: the reader accepts it, and only the store
is wrong. The runs, each under a 60 s limit:

1. `fault.kiln`: kiln-run must exit 2 (a kernel fault is Kiln's bug, not the
   user's) with an error line that says the device faulted (on cuda,
   CUDA_ERROR_ILLEGAL_ADDRESS and the hint to rerun with
   CUDA_LAUNCH_BLOCKING=1: a fault surfaces at the next synchronisation,
   after the launch that caused it); no core dump, no hang, no stack trace.
2. `fault.kiln` with CUDA_LAUNCH_BLOCKING=1: the same, and the error names
   the faulting kernel (on emu every run is like this: the emulator reports
   the launch that faulted).
3. `clean.kiln` (the artifact as kilnc wrote it) in a new process: exits 0
   and its output matches numpy within scripts/numerics.py's fp32 rule, so
   the device works again for the next process.

One line per run ("fault: ... ok"), then "<runs> runs, <failures>
failures". Writes $OUT/fault_check.json. Exits 1 when a run goes otherwise;
0 with "skipped" when the directory was not prepared.
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import numerics  # noqa: E402

KERNELS = 5        # docs/artifact-format.md section kinds
WEIGHT_DATA = 4
LIMIT_S = 60       # a run past this has hung


def crc32c(data):
    """CRC-32C (Castagnoli, reflected 0x82F63B78), as the artifact uses."""
    table = crc32c.table
    if table is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        crc32c.table = table
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = None
assert crc32c(b"123456789") == 0xE3069283  # the format's check value


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def u32(self):
        (v,) = struct.unpack_from("<I", self.data, self.at)
        self.at += 4
        return v

    def str(self):   # u32 length, then the bytes
        n = self.u32()
        self.at += n
        return self.data[self.at - n:self.at]

    def blob(self):  # u64 length, then the bytes
        (n,) = struct.unpack_from("<Q", self.data, self.at)
        self.at += 8 + n
        return self.data[self.at - n:self.at]


def pack_str(b):
    return struct.pack("<I", len(b)) + b


def pack_blob(b):
    return struct.pack("<Q", len(b)) + b


def inject_fault(ptx, kernel):
    """The kernel's PTX with a store to address 0 as its first instruction."""
    text = ptx.decode()
    entry = re.search(r"\.entry\s+" + re.escape(kernel) + r"\s*\(", text)
    if not entry:
        raise SystemExit(f"fault_check: no .entry {kernel} in its PTX")
    # The body's '{' follows the parameter list's ')'.
    body = text.index("{", text.index(")", entry.end()))
    store = ("\n\t.reg .b64 %rd_kiln_fault;\n"
             "\tmov.b64 %rd_kiln_fault, 0;\n"
             "\tst.global.u32 [%rd_kiln_fault], 0;\n")
    return (text[:body + 1] + store + text[body + 1:]).encode()


def rewrite_kernels(section, target):
    """The kernels section with `target`'s PTX faulting and no cubins."""
    r = Reader(section)
    count = r.u32()
    out = [struct.pack("<I", count)]
    names = []
    for _ in range(count):
        name = r.str()
        names.append(name.decode())
        geometry = struct.pack("<7I", *(r.u32() for _ in range(7)))
        params = r.u32()
        layout = b"".join(struct.pack("<I", r.u32()) + pack_str(r.str())
                          for _ in range(params))
        ptx = r.blob()
        r.u32()          # cubin sm
        r.blob()         # cubin
        if name.decode() == target:
            ptx = inject_fault(ptx, target)
        out.append(pack_str(name) + geometry + struct.pack("<I", params)
                   + layout + pack_blob(ptx) + struct.pack("<I", 0)
                   + pack_blob(b""))
    if target not in names:
        raise SystemExit(f"fault_check: no kernel {target} (have {names})")
    return b"".join(out)


def rewrite_artifact(data, target):
    """The artifact with its kernels section rewritten, laid out again."""
    count, table_at = struct.unpack_from("<IQ", data, 20)
    entries = [list(struct.unpack_from("<IIQQII", data, table_at + 32 * i))
               for i in range(count)]
    bodies = {}
    for kind, _, offset, size, _, _ in entries:
        body = data[offset:offset + size]
        bodies[kind] = rewrite_kernels(body, target) if kind == KERNELS else body
    # Header, table, then the sections in their old order, each at a
    # multiple of 64 (weight-data must be).
    at = 64 + 32 * count
    layout = []
    for entry in sorted(entries, key=lambda e: e[2]):
        at = (at + 63) // 64 * 64
        body = bodies[entry[0]]
        entry[2], entry[3], entry[4] = at, len(body), crc32c(body)
        layout.append((at, body))
        at += len(body)
    table = b"".join(struct.pack("<IIQQII", *e) for e in entries)
    header = bytearray(data[:64])
    struct.pack_into("<Q", header, 24, 64)
    struct.pack_into("<Q", header, 32, at)
    struct.pack_into("<I", header, 44, crc32c(table))
    struct.pack_into("<I", header, 60, crc32c(bytes(header[:60])))
    out = bytearray(at)
    out[:64] = header
    out[64:64 + len(table)] = table
    for offset, body in layout:
        out[offset:offset + len(body)] = body
    return bytes(out)


def make_model():
    """y = relu(x) @ W + b: a Relu, a MatMul and an Add kernel (unfused)."""
    import numpy as np
    import onnx
    import onnx.helper as oh
    import onnx.numpy_helper as onh
    rng = np.random.default_rng(28)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32,)).astype(np.float32)
    graph = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["r"]),
         oh.make_node("MatMul", ["r", "W"], ["m"]),
         oh.make_node("Add", ["m", "b"], ["y"])],
        "fault",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [16, 64])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [16, 32])],
        [onh.from_array(w, "W"), onh.from_array(b, "b")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    x = rng.standard_normal((16, 64)).astype(np.float32)
    return model, x, np.maximum(x, 0) @ w + b


def prepare(args):
    import numpy as np
    import onnx
    kilnc = os.path.join(args.build, "bin", "kilnc")
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(args.out)
    model, x, y = make_model()
    clean = os.path.join(args.out, "clean.kiln")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        compiled = subprocess.run(
            [kilnc, path, "--target=sm_90", "--fuse=false", "-o", clean],
            capture_output=True, text=True)
    if compiled.returncode != 0:
        sys.exit(f"fault_check: kilnc failed: {compiled.stderr.strip()}")
    with open(clean, "rb") as f:
        data = f.read()
    # The kernel to break: the second launch's (the MatMul), so that one
    # kernel runs well before it.
    names = kernels_in_launch_order(data)
    if len(names) < 2:
        sys.exit(f"fault_check: expected 2+ kernels, have {names}")
    target = names[1]
    with open(os.path.join(args.out, "fault.kiln"), "wb") as f:
        f.write(rewrite_artifact(data, target))
    np.save(os.path.join(args.out, "x.npy"), x)
    np.save(os.path.join(args.out, "y.npy"), y)
    with open(os.path.join(args.out, "fault.json"), "w") as f:
        json.dump({"target": "sm_90", "kernel": target, "kernels": names}, f,
                  indent=1)
    print(f"fault_check: prepared fault.kiln: kernel {target} stores to "
          f"address 0 ({len(names)} kernels)")
    return 0


def kernels_in_launch_order(data):
    """Kernel names in the order the launch list first uses them."""
    count, table_at = struct.unpack_from("<IQ", data, 20)
    sections = {}
    for i in range(count):
        kind, _, offset, size = struct.unpack_from("<IIQQ", data,
                                                   table_at + 32 * i)
        sections[kind] = data[offset:offset + size]
    r = Reader(sections[KERNELS])
    names = []
    for _ in range(r.u32()):
        names.append(r.str().decode())
        for _ in range(7):
            r.u32()
        for _ in range(r.u32()):
            r.u32()
            r.str()
        r.blob()
        r.u32()
        r.blob()
    r = Reader(sections[6])  # launches
    order = []
    for _ in range(r.u32()):
        kernel, argc = r.u32(), r.u32()
        r.at += 8 * argc
        if names[kernel] not in order:
            order.append(names[kernel])
    return order


def run_kiln(args, artifact, env_extra, out):
    command = [args.kiln_run, os.path.join(args.dir, artifact), "--device",
               args.device, "-i", f"x={os.path.join(args.dir, 'x.npy')}",
               "-o", out]
    env = dict(os.environ, **env_extra)
    start = time.time()
    try:
        ran = subprocess.run(command, capture_output=True, text=True, env=env,
                             timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        return None, "", time.time() - start
    return ran.returncode, ran.stderr, time.time() - start


def check_fault(args, kernel, label, env_extra, work):
    """A faulting run: (ok, line)."""
    rc, err, seconds = run_kiln(args, "fault.kiln", env_extra,
                                os.path.join(work, label))
    lines = [line for line in err.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    problems = []
    if rc is None:
        problems.append(f"still running after {LIMIT_S} s")
    elif rc != 2:
        problems.append(f"exit {rc}, expected 2")
    if rc is not None and not re.search(
            r"ILLEGAL_ADDRESS|illegal memory access|in no allocation", err):
        problems.append("no fault named in its error")
    if env_extra and kernel not in err:
        problems.append(f"the error does not name kernel {kernel}")
    if re.search(r"Stack dump|Segmentation fault|core dumped|terminate called",
                 err):
        problems.append("crashed")
    if len(lines) > 3:
        problems.append(f"{len(lines)} lines of error output")
    how = "; ".join(problems) or "ok"
    return not problems, (f"fault: {label}: exit {rc}, {seconds:.1f} s: "
                          f"{last[:300]!r}: {how}")


def run(args):
    manifest_path = os.path.join(args.dir, "fault.json")
    if not os.path.exists(manifest_path):
        print(f"fault_check: skipped ({args.dir} not prepared: "
              "fault_check.py prepare)")
        return 0
    import numpy as np
    if not args.kiln_run:
        args.kiln_run = os.path.join(args.dir, "..", "bin", "kiln-run")
    with open(manifest_path) as f:
        kernel = json.load(f)["kernel"]
    work = tempfile.mkdtemp(prefix="kiln-fault-")
    rows = []
    try:
        rows.append(check_fault(args, kernel, "asynchronous", {}, work))
        rows.append(check_fault(args, kernel, "CUDA_LAUNCH_BLOCKING=1",
                                {"CUDA_LAUNCH_BLOCKING": "1"}, work))
        out = os.path.join(work, "clean")
        rc, err, seconds = run_kiln(args, "clean.kiln", {}, out)
        if rc != 0:
            rows.append((False, f"fault: clean run after: exit {rc}: "
                                f"{err.strip()[-300:]!r}"))
        else:
            got_file = os.path.join(out, "y.npy")
            got = np.load(got_file) if os.path.exists(got_file) else None
            want = np.load(os.path.join(args.dir, "y.npy"))
            if os.environ.get("KILN_TEST_CORRUPT") and got is not None:
                got = got.copy()  # teeth: one element moved
                got.flat[0] += float(os.environ["KILN_TEST_CORRUPT"])
            c = numerics.compare(got, want, "fp32", "clean run after")
            rows.append((c.ok, "fault: " + c.line()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failures = sum(not ok for ok, _ in rows)
    for _, line in rows:
        print(line, flush=True)
    summary = f"{len(rows)} runs, {failures} failures (kernel {kernel})"
    print(summary)
    out_root = os.environ.get("OUT", "/tmp")
    os.makedirs(out_root, exist_ok=True)
    with open(os.path.join(out_root, "fault_check.json"), "w") as f:
        json.dump({"device": args.device, "kernel": kernel,
                   "runs": [{"ok": ok, "line": line} for ok, line in rows],
                   "summary": summary}, f, indent=1)
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("--build", required=True)
    pp.add_argument("--out", required=True)
    pr = sub.add_parser("run")
    pr.add_argument("--dir", required=True)
    pr.add_argument("--device", default="cuda")
    pr.add_argument("--kiln-run", default="")
    args = p.parse_args()
    return prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    sys.exit(main())
