#!/usr/bin/env python3
"""Runs the ONNX backend node tests through kilnc and the PTX emulator.

Usage:
  conformance.py [--tsv RESULTS.tsv] [--write-doc docs/conformance.md]
                 [--check test/e2e/expected-failures.txt]
                 [--shrink-expected test/e2e/expected-failures.txt]
                 [--shard I/N] [--filter REGEX] [--jobs N] [--kilnc PATH]
                 [--kiln-run PATH]

For every `test_*` folder under `<onnx>/backend/test/data/node` (the `onnx`
package this interpreter imports), it compiles model.onnx with kilnc, turns
test_data_set_0/input_*.pb into .npy files, runs `kiln-run --device emu`,
and compares each output with output_*.pb the way ONNX's own backend runner
does: same dtype, then `assert_allclose(rtol=1e-3, atol=1e-7)` for numbers
and exact equality otherwise. Node tests carry no data.json, so these
defaults apply to every test here; no test gets a looser tolerance.

Each test lands in one class:
  pass            outputs match
  mismatch        outputs differ (values, shape or dtype)
  unsupported-op  kilnc says an op type is not supported by the importer
  compile-error   any other kilnc failure
  runtime-error   kiln-run failed, or an input/output could not be converted
  timeout         kilnc or kiln-run ran past --timeout seconds

kilnc runs with KILN_PTXAS="" so it skips cubin assembly: the emulator runs
the PTX, and ptxas would only slow the run (pass --with-ptxas to keep it).

--check FILE reads the list of tests expected to fail, written by hand:
one entry per line, `<test> <class>: <reason>`, the class one of those
above (not pass) and the reason why the test fails ('#' starts a comment;
a malformed line, an unknown class, a missing reason or a test listed twice
is an error). It exits 1 and says which when
  - a test not on the list fails (an unexpected failure),
  - a listed test fails in another class than its entry's (a compile-error
    that now compiles and returns wrong numbers is a mismatch: a new bug,
    not the old one),
  - a listed test passes (an unexpected pass: delete its entry; the list
    only shrinks).
With --shard I/N only every N-th test (in sorted order, starting at I)
runs, and only its part of the list counts. --shrink-expected FILE deletes
the entries of the tests that passed in this run from FILE, keeping every
other line as it is; nothing writes new entries (add one by hand, with its
reason, only for a failure that is not a bug: docs/conformance.md).
"""
import argparse
import collections
import concurrent.futures
import datetime
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import numerics  # noqa: E402

RTOL = 1e-3
ATOL = 1e-7
CLASSES = ["pass", "mismatch", "unsupported-op", "compile-error",
           "runtime-error", "timeout"]
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
UNSUPPORTED_OP = re.compile(r"op type '([^']+)' is not supported")


class TestFailure(Exception):
    """Ends one test early with a class and a one-line detail."""

    def __init__(self, status, detail):
        super().__init__(detail)
        self.status = status
        self.detail = detail


# --- Finding and describing tests -----------------------------------------


def node_test_root():
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test",
                        "data", "node")


def list_tests(root, pattern, shard):
    names = sorted(d for d in os.listdir(root)
                   if d.startswith("test_") and
                   os.path.exists(os.path.join(root, d, "model.onnx")))
    if pattern:
        names = [n for n in names if re.search(pattern, n)]
    index, count = shard
    return [n for i, n in enumerate(names) if i % count == index]


def op_types(model):
    """Distinct op types of the top-level graph, domain-qualified if custom."""
    ops = set()
    for node in model.graph.node:
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        ops.add(f"{domain}.{node.op_type}" if domain else node.op_type)
    return sorted(ops)


# --- Running one test ------------------------------------------------------


def first_line(text, replacements):
    for line in text.splitlines():
        line = line.strip()
        if line:
            for old, new in replacements:
                line = line.replace(old, new)
            return line
    return "(no message)"


def run_tool(command, timeout, env=None):
    try:
        return subprocess.run(command, capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise TestFailure("timeout",
                          f"{os.path.basename(command[0])} ran past "
                          f"{timeout} s")


def compile_model(model_path, artifact, tools, replacements, flags=()):
    env = dict(os.environ)
    if not tools.with_ptxas:
        env["KILN_PTXAS"] = ""
    run = run_tool([tools.kilnc, model_path, "-o", artifact] + list(flags),
                   tools.timeout, env)
    if run.returncode == 0:
        return
    message = run.stderr + run.stdout
    unsupported = UNSUPPORTED_OP.search(message)
    if unsupported:
        raise TestFailure("unsupported-op",
                          f"op type '{unsupported.group(1)}' is not supported")
    raise TestFailure("compile-error",
                      exit_description(run.returncode) +
                      first_line(message, replacements))


def exit_description(returncode):
    if returncode < 0:
        return f"killed by signal {-returncode}: "
    return ""


def load_tensor(path, value_info, what):
    if value_info.type.WhichOneof("value") != "tensor_type":
        raise TestFailure("runtime-error",
                          f"{what} '{value_info.name}' is not a tensor")
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


FLOAT8_TYPES = (onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT8E4M3FNUZ,
                onnx.TensorProto.FLOAT8E5M2, onnx.TensorProto.FLOAT8E5M2FNUZ)
FOUR_BIT_TYPES = (onnx.TensorProto.INT4, onnx.TensorProto.UINT4)


def float8_is_nan(elem_type, bits):
    """The NaN codes of each float8 type (bits as uint8)."""
    if elem_type == onnx.TensorProto.FLOAT8E4M3FN:
        return (bits & 0x7F) == 0x7F
    if elem_type == onnx.TensorProto.FLOAT8E5M2:
        return (bits & 0x7F) > 0x7C
    return bits == 0x80


def plain_array(array, elem_type):
    """numpy_helper gives float8 as uint8 codes and INT4/UINT4 as int8/uint8
    values (one per element), both under a custom dtype: the plain ones."""
    if elem_type in FLOAT8_TYPES:
        return array.view(np.uint8)
    if elem_type == onnx.TensorProto.INT4:
        return array.astype(np.int8)
    if elem_type == onnx.TensorProto.UINT4:
        return array.astype(np.uint8)
    return array


def as_kiln_npy(array, value_info):
    """numpy_helper gives bf16 as its uint16 bits; kiln-run reads '<V2'.
    float8 goes as raw bytes ('|V1', what np.save writes for ml_dtypes'
    float8), INT4/UINT4 one value per byte ('|i1', '|u1')."""
    elem_type = value_info.type.tensor_type.elem_type
    if elem_type == onnx.TensorProto.BFLOAT16:
        return array.astype(np.uint16).view(np.dtype("V2"))
    if elem_type in FLOAT8_TYPES:
        return plain_array(array, elem_type).view(np.dtype("V1"))
    return plain_array(array, elem_type)


def from_kiln_npy(array):
    """The inverse of as_kiln_npy: bf16 ('V2') back to its uint16 bits,
    float8 ('V1') to its uint8 codes."""
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:
        return array.view(np.uint16)
    if array.dtype.kind == "V" and array.dtype.itemsize == 1:
        return array.view(np.uint8)
    return array


def as_initializer(array, value_info):
    """A TensorProto of the test's value. numpy_helper.from_array cannot pack
    an odd number of INT4/UINT4 values; make_tensor can."""
    elem_type = value_info.type.tensor_type.elem_type
    if elem_type in FOUR_BIT_TYPES:
        return onnx.helper.make_tensor(
            value_info.name, elem_type, array.shape,
            plain_array(array, elem_type).astype(np.int64).ravel().tolist())
    return onnx.numpy_helper.from_array(array, value_info.name)


def graph_inputs(model):
    initializers = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in initializers]


# --- Sequences and optionals -----------------------------------------------
# kilnc compiles a sequence input as N tensors (--sequence x=N, each
# element's shape by --shape x[i]=...) and an optional one present or absent
# (--absent x); kiln-run binds a sequence as -i x=a.npy,b.npy and writes a
# sequence output as x.0.npy, x.1.npy, ... (docs/runtime.md).


def is_composite(type_proto):
    return type_proto.WhichOneof("value") in ("sequence_type", "optional_type")


def element_value_info(type_proto, name):
    """The tensor ValueInfo of a sequence's or optional's elements."""
    while type_proto.WhichOneof("value") != "tensor_type":
        kind = type_proto.WhichOneof("value")
        if kind not in ("sequence_type", "optional_type"):
            raise TestFailure("runtime-error",
                              f"'{name}' holds a {kind}, not tensors")
        type_proto = getattr(type_proto, kind).elem_type
    value = onnx.ValueInfoProto()
    value.name = name
    value.type.CopyFrom(type_proto)
    return value


def load_composite(path, value_info):
    """A sequence or optional test value: a list of arrays (a sequence, or
    an optional holding one), a single array (an optional tensor), or None
    (an empty optional)."""
    with open(path, "rb") as f:
        data = f.read()
    if value_info.type.WhichOneof("value") == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return list(numpy_helper.to_list(proto))
    proto = onnx.OptionalProto()
    proto.ParseFromString(data)
    value = numpy_helper.to_optional(proto)
    return list(value) if isinstance(value, (list, tuple)) else value


def dims_text(array):
    return "x".join(str(d) for d in array.shape) or "scalar"


def composite_flags(model, data_dir, baked=frozenset()):
    """kilnc's --sequence, --shape and --absent for the test's sequence and
    optional inputs, and --shape for a tensor input that leaves a dim open
    (the SequenceMap tests' x1 of shape [N])."""
    flags = []
    for i, value in enumerate(graph_inputs(model)):
        path = os.path.join(data_dir, f"input_{i}.pb")
        if not os.path.exists(path) or value.name in baked:
            continue
        if not is_composite(value.type):
            tensor_type = value.type.tensor_type
            if value.type.HasField("tensor_type") and (
                    not tensor_type.HasField("shape") or any(
                        not d.HasField("dim_value")
                        for d in tensor_type.shape.dim)):
                array = load_tensor(path, value, "input")
                flags += ["--shape", f"{value.name}={dims_text(array)}"]
            continue
        data = load_composite(path, value)
        if data is None:
            flags += ["--absent", value.name]
        elif not isinstance(data, list):
            flags += ["--shape", f"{value.name}={dims_text(data)}"]
        else:
            flags += ["--sequence", f"{value.name}={len(data)}"]
            for j, array in enumerate(data):
                flags += ["--shape", f"{value.name}[{j}]={dims_text(array)}"]
    return flags


def write_inputs(model, data_dir, workdir, baked=frozenset()):
    """Saves each input_<i>.pb as .npy; returns kiln-run's -i arguments.
    Inputs in `baked` were compiled in as constants and are not passed."""
    arguments = []
    inputs = graph_inputs(model)
    for i, value in enumerate(inputs):
        path = os.path.join(data_dir, f"input_{i}.pb")
        if not os.path.exists(path) or value.name in baked:
            continue  # An optional input the test leaves out, or a baked one.
        if is_composite(value.type):
            data = load_composite(path, value)
            element = element_value_info(value.type, value.name)
            arrays = data if isinstance(data, list) else (
                [] if data is None else [data])
            files = []
            for j, array in enumerate(arrays):
                files.append(os.path.join(workdir, f"input_{i}.{j}.npy"))
                np.save(files[-1], as_kiln_npy(array, element),
                        allow_pickle=False)
            if files:
                arguments += ["-i", f"{value.name}={','.join(files)}"]
            continue
        array = load_tensor(path, value, "input")
        if array.dtype == object:
            # STRING: kiln-run reads NumPy str arrays ('<U'), which np.save
            # writes without pickling.
            array = array.astype(str)
        npy = os.path.join(workdir, f"input_{i}.npy")
        np.save(npy, as_kiln_npy(array, value), allow_pickle=False)
        arguments += ["-i", f"{value.name}={npy}"]
    return arguments


def is_shape_like(value, array, position):
    """Inputs a static-shape compiler needs as constants: integer tensors
    (axes, shapes, pads, sizes, repeats, indices of shape arithmetic), tiny
    float tensors after the first input (Clip bounds, Resize scales and roi,
    Pad values, Dropout ratio: at most 8 elements, a 4-D roi) and boolean
    scalars after the first input (mode switches: Dropout's training_mode)."""
    if array.dtype.kind in "iu":
        return True
    if array.dtype.kind == "b":
        return position > 0 and array.size == 1
    return array.dtype.kind == "f" and position > 0 and array.size <= 8


def bake_shape_inputs(model, data_dir, workdir):
    """A copy of the model with its shape-like inputs turned into initializers
    holding the test's values; returns (path, names baked)."""
    specialized = onnx.ModelProto()
    specialized.CopyFrom(model)
    baked = set()
    for i, value in enumerate(graph_inputs(model)):
        path = os.path.join(data_dir, f"input_{i}.pb")
        if not os.path.exists(path) or is_composite(value.type):
            continue
        array = load_tensor(path, value, "input")
        if array.dtype == object or not is_shape_like(value, array, i):
            continue
        specialized.graph.initializer.append(as_initializer(array, value))
        baked.add(value.name)
    path = os.path.join(workdir, "specialized.onnx")
    onnx.save(specialized, path)
    return path, baked


def run_model(artifact, arguments, outdir, tools, replacements):
    run = run_tool([tools.kiln_run, artifact, "--device", "emu", "-o",
                    outdir] + arguments, tools.timeout)
    if run.returncode != 0:
        raise TestFailure("runtime-error",
                          exit_description(run.returncode) +
                          first_line(run.stderr + run.stdout, replacements))


def compare_output(name, got, expected):
    """Returns None when `got` matches, else a one-line reason."""
    if not np.issubdtype(expected.dtype, np.number):
        if got.shape != expected.shape:
            return f"'{name}': shape {got.shape}, expected {expected.shape}"
        if got.tolist() != expected.tolist():
            wrong = int(np.sum(got != expected))
            return f"'{name}': {wrong}/{expected.size} elements differ"
        return None
    if got.dtype != expected.dtype:
        return f"'{name}': dtype {got.dtype}, expected {expected.dtype}"
    if got.shape != expected.shape:
        return f"'{name}': shape {got.shape}, expected {expected.shape}"
    # ONNX's runner: every element within ATOL + RTOL |expected|, NaN where
    # NaN (scripts/numerics.py's per-element rule with these constants).
    result = numerics.compare(got, expected,
                              numerics.Tolerance.elementwise(RTOL, ATOL))
    if result.ok:
        return None
    if result.problem:
        return f"'{name}': {result.problem}"
    worst = abs(result.worst_got - result.worst_want)
    return (f"'{name}': {result.elements_over}/{expected.size} elements off, "
            f"the worst off by {worst:.3g}")


def check_composite_output(value, expected_path, outdir):
    """A sequence output is <name>.<i>.npy, one file per tensor; an optional
    tensor <name>.npy; an empty optional no file."""
    expected = load_composite(expected_path, value)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", value.name)
    element = element_value_info(value.type, value.name)
    if isinstance(expected, list):
        got_count = len(glob.glob(os.path.join(outdir, glob.escape(safe) +
                                               ".*.npy")))
        if got_count != len(expected):
            raise TestFailure("mismatch",
                              f"'{value.name}': {got_count} tensors, "
                              f"expected {len(expected)}")
        files = [(f"{value.name}[{j}]", f"{safe}.{j}.npy", array)
                 for j, array in enumerate(expected)]
    elif expected is None:
        if os.path.exists(os.path.join(outdir, safe + ".npy")):
            raise TestFailure("mismatch", f"'{value.name}': a tensor, "
                              "expected an empty optional")
        return
    else:
        files = [(value.name, safe + ".npy", expected)]
    for name, file, want in files:
        got_path = os.path.join(outdir, file)
        if not os.path.exists(got_path):
            raise TestFailure("runtime-error",
                              f"kiln-run wrote no output '{name}'")
        got = from_kiln_npy(np.load(got_path))
        reason = compare_output(
            name, got,
            plain_array(want, element.type.tensor_type.elem_type))
        if reason:
            raise TestFailure("mismatch", reason)


def check_outputs(model, data_dir, outdir):
    for i, value in enumerate(model.graph.output):
        expected_path = os.path.join(data_dir, f"output_{i}.pb")
        if is_composite(value.type):
            check_composite_output(value, expected_path, outdir)
            continue
        expected = load_tensor(expected_path, value, "output")
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", value.name)
        got_path = os.path.join(outdir, safe + ".npy")
        if not os.path.exists(got_path):
            raise TestFailure("runtime-error",
                              f"kiln-run wrote no output '{value.name}'")
        got = from_kiln_npy(np.load(got_path))
        if (value.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16
                and got.shape == expected.shape):
            # bf16 is compared as its bits; any NaN matches any NaN (the
            # GPU's canonical NaN is 0x7FFF, ONNX's reference writes 0x7FC0).
            def is_nan(bits):
                return (bits.astype(np.uint32) & 0x7FFF) > 0x7F80
            got = np.where(is_nan(got) & is_nan(expected), expected, got)
            got = got.astype(expected.dtype)
        elem_type = value.type.tensor_type.elem_type
        expected = plain_array(expected, elem_type)
        if elem_type in FLOAT8_TYPES and got.shape == expected.shape:
            # float8 is compared as its codes; any NaN matches any NaN.
            both_nan = (float8_is_nan(elem_type, got)
                        & float8_is_nan(elem_type, expected))
            got = np.where(both_nan, expected, got).astype(np.uint8)
        reason = compare_output(value.name, got, expected)
        if reason:
            raise TestFailure("mismatch", reason)


def run_test(name, root, tools):
    """Runs one node test; returns (name, status, detail, ops, seconds)."""
    start = time.monotonic()
    test_dir = os.path.join(root, name)
    model_path = os.path.join(test_dir, "model.onnx")
    model = onnx.load(model_path)
    ops = op_types(model)
    with tempfile.TemporaryDirectory(prefix="kiln-conf-") as workdir:
        replacements = [(model_path, "model.onnx"), (workdir, "<tmp>")]
        artifact = os.path.join(workdir, "model.kiln")
        data_dir = os.path.join(test_dir, "test_data_set_0")
        try:
            baked = frozenset()
            flags = composite_flags(model, data_dir)
            try:
                compile_model(model_path, artifact, tools, replacements, flags)
            except TestFailure as failure:
                # Kiln compiles for static shapes: when an input that decides
                # a shape (axes, pads, sizes, ...) is not a constant, compile
                # again with the test's values for such inputs baked in.
                if "compile-time" not in failure.detail:
                    raise
                specialized, baked = bake_shape_inputs(model, data_dir, workdir)
                if not baked:
                    raise
                compile_model(specialized, artifact, tools,
                              replacements + [(specialized, "model.onnx")],
                              composite_flags(model, data_dir, baked))
            arguments = write_inputs(model, data_dir, workdir, baked)
            outdir = os.path.join(workdir, "out")
            run_model(artifact, arguments, outdir, tools, replacements)
            check_outputs(model, data_dir, outdir)
            status = "pass"
            detail = ("shape inputs baked: " + ", ".join(sorted(baked))) if baked else ""
        except TestFailure as failure:
            status, detail = failure.status, failure.detail
        except Exception as error:  # A converter bug must not stop the run.
            status = "runtime-error"
            detail = f"harness: {type(error).__name__}: {error}"
            detail = first_line(detail, replacements)
    return name, status, detail, ops, time.monotonic() - start


def run_all(names, root, tools, jobs):
    results = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_test, n, root, tools) for n in names]
        for done, future in enumerate(
                concurrent.futures.as_completed(futures), 1):
            results.append(future.result())
            if done % 100 == 0:
                print(f"  {done}/{len(names)} done", file=sys.stderr)
    return sorted(results)


# --- Reports ---------------------------------------------------------------


def percent(part, whole):
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def summarize(results):
    counts = collections.Counter(r[1] for r in results)
    total = len(results)
    supported = total - counts["unsupported-op"]
    return counts, total, supported


def summary_line(results, seconds):
    counts, total, supported = summarize(results)
    classes = ", ".join(f"{counts[c]} {c}" for c in CLASSES)
    return (f"conformance: {total} tests: {classes}; pass rate "
            f"{percent(counts['pass'], total)} overall, "
            f"{percent(counts['pass'], supported)} over {supported} tests "
            f"with supported ops; {seconds:.0f} s wall")


def write_tsv(path, results):
    with open(path, "w") as f:
        f.write("test\tstatus\tseconds\tops\tdetail\n")
        for name, status, detail, ops, seconds in results:
            f.write(f"{name}\t{status}\t{seconds:.2f}\t{','.join(ops)}\t"
                    f"{detail}\n")


def shrink_expected(path, results):
    """Deletes the entries of the tests that passed from the list at path;
    every other line is kept as it is. Returns how many went."""
    passed = {r[0] for r in results if r[1] == "pass"}
    with open(path) as f:
        lines = f.readlines()
    kept = [line for line in lines
            if line.split("#", 1)[0].split()[:1] == []
            or line.split()[0] not in passed]
    with open(path, "w") as f:
        f.writelines(kept)
    return len(lines) - len(kept)


def per_op_rows(results):
    passed = collections.Counter()
    total = collections.Counter()
    for _, status, _, ops, _ in results:
        for op in ops:
            total[op] += 1
            passed[op] += status == "pass"
    return [(op, passed[op], total[op]) for op in sorted(total)]


def failure_causes(results, limit):
    """The most common failure details, with quoted names masked."""
    causes = collections.Counter()
    example = {}
    for name, status, detail, _, _ in results:
        if status in ("pass", "unsupported-op"):
            continue
        detail = re.sub(r"^(kilnc|kiln-run): error: (model\.onnx: )?", "",
                        detail)
        cause = f"{status}: " + re.sub(r"'[^']*'", "'…'", detail)
        causes[cause] += 1
        example.setdefault(cause, name)
    return [(c, n, example[c]) for c, n in causes.most_common(limit)]


# docs/conformance.md's section on the list (write_doc writes it).
EXPECTED_LIST_DOC = [
    "## The expected-failures list",
    "",
    ('`test/e2e/expected-failures.txt` lists every test that does not '
     'pass, one line each: `<test> <class>: <reason>`, the class one of '
     "the table's (not pass) and the reason why it fails. It is written by "
     'hand and only shrinks: an entry is added only for a failure that is '
     'not a Kiln bug (an op or type Kiln does not support, wrong test '
     'data), with its reason. CI (`test/Target/CUDA/conformance.test`, '
     '`conformance.py --check`) fails when a test not on the list fails; '
     "when a listed test fails in another class than its entry's (a "
     'compile-error that starts compiling and returns wrong numbers is a '
     'mismatch: a new bug, not the old one); and when a listed test passes '
     '(delete its entry: `conformance.py --shrink-expected FILE` deletes '
     'the entries of every test that passed, and nothing writes new ones). '
     'A malformed entry, an unknown class or a test listed twice is an '
     'error naming the line. `test/Target/CUDA/conformance-check.test` '
     'checks all of this on three node tests (~5 s).'),
    "",
]

def write_doc(path, results, seconds, jobs):
    counts, total, supported = summarize(results)
    lines = [
        "# ONNX backend conformance",
        "",
        "<!-- Generated by `python3 test/e2e/conformance.py --write-doc "
        "docs/conformance.md`; do not edit by hand. -->",
        "",
        "How many of the ONNX backend node tests (`onnx/backend/test/data/"
        "node`) compile with `kilnc` and match their expected outputs when "
        "run on the PTX emulator (`kiln-run --device emu`). Outputs are "
        f"compared as ONNX's backend runner does: same dtype, then "
        f"rtol {RTOL:g}, atol {ATOL:g}.",
        "",
        "Kiln compiles for static shapes. A graph input that decides a "
        "shape is taken at run time where the model's declared shapes fix "
        "what it must do (Reduce* axes, Reshape, Squeeze, Unsqueeze, Expand, "
        "Tile, Split, ConstantOfShape, TopK, Slice, Pad, Range, Resize and "
        "Upsample scales and sizes, DFT's axis: a ShapeGuard host step "
        "checks it; where "
        "the value also decides which elements are read, as Slice's starts "
        "do, the device computes them from it; docs/runtime.md \"Shape "
        "inputs at run time\"), and Clip's bounds, Trilu's k, Pad's value, "
        "Resize's roi, Dropout's ratio and training_mode and a float8 zero "
        "point are run-time data. Only when the model does "
        "not compile so, because an input that decides a shape or a mode "
        "(Col2Im's shapes, STFT's frame sizes, MelWeightMatrix's bins, "
        "a shape computed inside the graph as in the expanded window and "
        "CenterCropPad tests, ...) is not a graph input a declared shape "
        "fixes, "
        "does the harness compile the model again with the test's values "
        "for such inputs baked in as initializers (integer inputs, float "
        "inputs of at most 8 elements after the first, boolean scalars after "
        "the first); the data inputs still run through the kernels. The TSV "
        "marks those "
        f"passes ({sum(1 for r in results if r[1] == 'pass' and r[2])} here).",
        "",
        "A sequence or optional input is compiled as the test's data has it "
        "(`kilnc --sequence x=N` and `--shape 'x[i]=...'` per tensor, "
        "`--absent x` for an empty optional; docs/runtime.md \"Sequences and "
        "optionals\"), bound with `-i x=a.npy,b.npy`, and a sequence output "
        "compared tensor by tensor. A tensor input whose declared shape "
        "leaves a dim open gets `--shape` from the test's data.",
        "",
        f"- Date: {datetime.date.today().isoformat()}",
        f"- onnx version: {onnx.__version__}",
        f"- Tests: {total}",
        f"- Pass rate, all tests: {counts['pass']}/{total} "
        f"({percent(counts['pass'], total)})",
        f"- Pass rate, tests whose ops the importer supports: "
        f"{counts['pass']}/{supported} ({percent(counts['pass'], supported)})",
        f"- Full run: {seconds:.0f} s wall with {jobs} workers",
        "",
        "| class | tests |",
        "|---|---|",
    ]
    lines += [f"| {c} | {counts[c]} |" for c in CLASSES]
    lines += [""] + EXPECTED_LIST_DOC
    lines += [
        "## Most common failures",
        "",
        "Failures other than unsupported ops, grouped by message.",
        "",
        "| tests | cause | example |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | {c.replace('|', '/')} | `{e}` |"
              for c, n, e in failure_causes(results, 20)]
    lines += [
        "",
        "## Per op",
        "",
        "A test counts toward every op type in its graph, so `_expanded` "
        "tests (a function op written out as its body) also count toward "
        "the ops of that body.",
        "",
        "| op | pass / total |",
        "|---|---|",
    ]
    lines += [f"| {op} | {p} / {t} |" for op, p, t in per_op_rows(results)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# --- The CI check ----------------------------------------------------------


class ListError(Exception):
    pass


ENTRY = re.compile(r"^(\S+)\s+([a-z-]+):\s*(\S.*)$")


def read_expected(path):
    """{test: (class, reason)} from the hand-written list at `path`; a
    malformed entry raises ListError naming the file and line."""
    entries = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            where = f"{path}:{number}"
            match = ENTRY.match(text)
            if not match:
                raise ListError(f"{where}: expected '<test> <class>: <reason>', "
                                f"got '{text[:80]}'")
            name, status, reason = match.groups()
            if status not in CLASSES or status == "pass":
                raise ListError(f"{where}: '{name}': unknown class '{status}' "
                                f"(one of {', '.join(CLASSES[1:])})")
            if name in entries:
                raise ListError(f"{where}: '{name}' is listed twice")
            entries[name] = (status, reason)
    return entries


def check(results, expected):
    """Prints the three kinds of difference from the list; 1 if any."""
    failing = {r[0]: (r[1], r[2]) for r in results if r[1] != "pass"}
    ran = {r[0] for r in results}
    unexpected_failures = sorted(set(failing) - set(expected))
    changed = sorted(name for name in set(failing) & set(expected)
                     if failing[name][0] != expected[name][0])
    unexpected_passes = sorted((set(expected) & ran) - set(failing))
    print(f"unexpected failures ({len(unexpected_failures)}):")
    for name in unexpected_failures:
        status, detail = failing[name]
        print(f"  {name} {status}: {detail}")
    print(f"changed class ({len(changed)}); a listed failure that now fails "
          "another way is a new failure:")
    for name in changed:
        status, detail = failing[name]
        print(f"  {name}: listed {expected[name][0]} ({expected[name][1]}), "
              f"now {status}: {detail}")
    print(f"unexpected passes ({len(unexpected_passes)}); remove them from "
          "the list (--shrink-expected):")
    for name in unexpected_passes:
        print(f"  {name}")
    return 1 if unexpected_failures or changed or unexpected_passes else 0


# --- Driver ----------------------------------------------------------------


def parse_shard(text):
    index, count = (int(x) for x in text.split("/"))
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"bad shard {text}")
    return index, count


def default_tool(name):
    built = os.path.join(REPO_ROOT, "build", "bin", name)
    return built if os.path.exists(built) else name


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tsv", help="write the per-test result table here")
    ap.add_argument("--write-doc", metavar="PATH",
                    help="write the conformance report (markdown) here")
    ap.add_argument("--shrink-expected", metavar="PATH",
                    help="delete the entries of the tests that passed from "
                         "this list")
    ap.add_argument("--check", metavar="PATH",
                    help="fail if results differ from this expected list")
    ap.add_argument("--shard", type=parse_shard, default=(0, 1),
                    help="run every N-th test, starting at I (I/N)")
    ap.add_argument("--filter", help="only tests whose name matches REGEX")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=int, default=60,
                    help="seconds per kilnc or kiln-run call")
    ap.add_argument("--kilnc", default=default_tool("kilnc"))
    ap.add_argument("--kiln-run", default=default_tool("kiln-run"))
    ap.add_argument("--with-ptxas", action="store_true",
                    help="let kilnc assemble cubins with ptxas")
    return ap.parse_args()


def main():
    args = parse_args()
    expected = None
    if args.check:
        try:
            expected = read_expected(args.check)
        except (ListError, OSError) as error:
            print(f"conformance.py: error: {error}", file=sys.stderr)
            return 2
    root = node_test_root()
    names = list_tests(root, args.filter, args.shard)
    start = time.monotonic()
    results = run_all(names, root, args, args.jobs)
    seconds = time.monotonic() - start
    if args.tsv:
        write_tsv(args.tsv, results)
    if args.write_doc:
        write_doc(args.write_doc, results, seconds, args.jobs)
    if args.shrink_expected:
        gone = shrink_expected(args.shrink_expected, results)
        print(f"{args.shrink_expected}: {gone} entries of passing tests deleted")
    status = check(results, expected) if expected is not None else 0
    print(summary_line(results, seconds))
    return status


if __name__ == "__main__":
    sys.exit(main())
