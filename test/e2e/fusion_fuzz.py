#!/usr/bin/env python3
"""Random-graph differential test: kilnc + kiln-run --device emu vs onnxruntime.

Usage:
  fusion_fuzz.py [--seed S] [--count N] [--jobs J] [--variants LIST]
                 [--failures DIR] [--keep DIR] [--kilnc PATH] [--kiln-run PATH]
                 [--strict] [--print-graph] [--verbose]
                 [--focus movement|compute|pool-norm|recurrent|attention|loop]
                 [--dynamic-batch]
  fusion_fuzz.py --minimize --seed S [--variants V]     # one generated graph
  fusion_fuzz.py --minimize --model M.onnx [--variants V]  # a saved model
  fusion_fuzz.py --repros test/e2e/fusion-fuzz-repros     # saved reproducers

Each seed S, S+1, ..., S+N-1 gives one small random ONNX graph (opset 17,
float32 activations, 3-12 nodes): data movement (Gather with 0-D/1-D/2-D
constant indices, negative ones included, on any axis, and with int64
indices from a graph input; Gather from a weight table (an embedding);
GatherElements; Slice with negative starts/ends/steps; Pad; Concat; Split;
Expand; Tile; Transpose; Reshape; Flatten; Squeeze; Unsqueeze), elementwise
ops with broadcasting (Add, Sub, Mul, Min, Max, Relu, Sigmoid, Tanh, Neg),
contractions (MatMul, Gemm, small Conv; MatMuls side by side on one input,
MatMul into Softmax), row ops (ReduceSum, ReduceMean, Softmax,
LogSoftmax, LayerNormalization) and scans, selections and N-d indexing
(CumSum with exclusive/reverse, TopK's values, GatherND with batch_dims,
ScatterND with reductions none/add/mul, Einsum transposes, sums and contractions),
windows in every padding mode (Conv with auto_pad SAME_UPPER, SAME_LOWER
or VALID; MaxPool and AveragePool with explicit pads or auto_pad,
strides, ceil_mode, MaxPool's dilations and AveragePool's
count_include_pad; LpPool with p = 1, 2, 3; GlobalAveragePool,
GlobalMaxPool) and normalisations (BatchNormalization in inference,
InstanceNormalization). Shapes are small, with one long dimension
(16 to 257) now and then for block-wide reductions.
The generator tracks every shape; the model then has to pass
onnx.checker (full check), strict onnx shape inference (which must agree
with the tracked shapes) and onnxruntime. Every dead end is a graph output,
and any other intermediate is one with probability 1/4. --focus FAMILY
draws one family's generators 12 times as often (movement, compute or
pool-norm: fuzz_ops_<family>.py); recurrent adds RNN/GRU/LSTM layers
(fuzz_ops_recurrent.py), which the other graphs never draw; loop makes
the random graph the body of an ONNX Loop with a run-time trip count
(fuzz_loop.py, below).

The parts, by what they do: fuzz_graph.py (shape tracking, validation),
fuzz_ops_movement.py, fuzz_ops_compute.py, fuzz_ops_pool_norm.py,
fuzz_ops_recurrent.py (the op generators by family), fuzz_generator.py (the Builder and its op
weights), fuzz_reference.py (onnxruntime and the allowances),
fuzz_kiln.py (variants, kilnc and kiln-run, the comparison),
fuzz_reduce.py (--minimize's candidates), fuzz_dynamic.py
(--dynamic-batch), fuzz_loop.py (--focus loop), fuzz_campaign.py (the loop and summary train_fuzz.py
shares); this file checks one graph and holds the command line.

For every graph, onnxruntime (CPU, fp32) computes the reference on seeded
inputs (floats ~ N(0, 1); indices uniform in [-d, d)), and each variant is
compiled by kilnc (KILN_PTXAS="": the emulator runs the PTX) and run by
kiln-run --device emu; every output is compared. Variants:

  fused, unfused    fp32, default layout, --fuse=true / --fuse=false
  P, P-nhwc         --precision=P (fp32, tf32, bf16, fp16), --layout=nhwc
                    for -nhwc; fused
  rotate            one of ROTATION, chosen by the seed: graph S runs
                    ROTATION[S % 7] = bf16-nhwc, tf32, fp16, fp32-nhwc, bf16,
                    tf32-nhwc, fp16-nhwc, so every precision and layout is
                    exercised over any 7 consecutive seeds
  P-nockern         --contraction-kernels=false: matmuls and convolutions
                    on the generic kernels instead of the tiled templates
  P-mma, P-wgmma    --wgmma=false / --wgmma=true: the mma.sync or the wgmma
                    tensor-core family (wgmma is sm_90's default; tf32,
                    bf16, fp16)
  rotate-kernels    one of KERNEL_ROTATION: graph S runs
                    KERNEL_ROTATION[S % 9] = bf16-mma, fp32-nockern,
                    tf32-mma, bf16-nockern, fp16-mma, tf32-nockern,
                    bf16-wgmma, fp16-nockern, tf32-wgmma

Suffixes combine (bf16-nhwc-mma). Each variant has its precision's bound
(below): the kernel family changes the order of the sums and, for tf32 on
wgmma, truncates the operands instead of rounding them (at most 2 u_P,
within the allowance's two rounding responses).
--variants is a comma-separated list of these (default fused,unfused,rotate).

Comparison, per output (scripts/numerics.py's rule, as every numerics test
in Kiln): b the reference, a Kiln's result, the precision's norm bound B
(fp32 1e-4: both sides compute in fp32 but associate sums differently -
warp-shuffle trees, FMA contraction, blocked GEMMs; with at most a few
hundred terms per sum the relative difference is ~1e-6, so 1e-4 leaves two
orders of margin while any indexing error moves an element by far more;
bf16 2e-2, fp16 and tf32 5e-3: docs/testing.md) and a per-element
allowance s_i for the graph's conditioning, which random graphs do not
control (LayerNormalization of a row of equal values, a dot product that
cancels):
  every element  |a_i - b_i| <= 6 B rms(b) + B |b_i| + s_i
  the norm       ||a - b|| / ||b|| <= B + ||s|| / ||b||
s_i is measured, element by element: onnxruntime also runs the graph
PERTURB_DRAWS = 4 times with every float input, weight and node result
multiplied by 1 + 1e-3 N(0, 1) elementwise (rounding at every op, so two
copies of one value differ, as they may in Kiln); D_i, the largest change
of element i, is what a relative error of 1e-3 at every op does to it, and
s_i = ALLOWANCE (u_P / 1e-3) D_i + B f, u_P the unit roundoff of the
variant's precision (Kiln rounds at most once per op to it) and f the
error floor (1e-2 times the largest |x| over the output and every value it
is computed from: an exact 0 from x - x may come out as 1e-7 when the two
x are computed by different code). A well-conditioned element gets almost
nothing; an ill-conditioned one what its own sensitivity says, and no
output is left out. The summary reports the worst per-element ratio over
every compared output (<= 1 passes) and the outputs' amplification k (the
largest relative change of an output's norm over 1e-3; informational).

Outcomes per (graph, variant): pass; unsupported (kilnc exits 1 with one
clean line that says 'not supported' or 'unsupported': counted and listed,
a failure with --strict); fail: a kilnc crash (signal, exit status other
than 0 and 1, or 'LLVM ERROR' / 'Assertion' / a stack dump on stderr), any
other kilnc error, a kiln-run error, a missing or mis-shaped output, or an
error over the bound. A failure prints the seed, variant, the graph in ONNX
textual syntax and the numbers, and saves model.onnx, inputs.npz and
report.txt under --failures DIR/seed<S>-<variant>/. --keep DIR keeps every
graph's work folder (models, artifacts, outputs).

--minimize greedily shrinks one failing graph while the same failure (same
variant, same class and, for crashes, the same signature) persists: it
drops graph outputs, truncates (an output's producer goes and one of its
operands becomes the output), cuts nodes (a node's results become fresh
graph inputs, and whatever only fed it disappears) and bypasses nodes
(their users read an input of the same shape), until nothing more can go;
then prints the reduced graph and saves it under --failures.

--dynamic-batch checks run-time sizes instead: graphs whose float inputs
share a leading batch B, each variant compiled once with
--shape x=Nx... --dim N=1..B and run at N = 1, (B + 1) // 2 and B against
onnxruntime at the same N (fuzz_dynamic.py says what is skipped); its
configurations are VARIANT@min, @mid and @max, and its last line reads
'fusion-fuzz-dynamic: N graphs, M runs: ..., F fail, S skipped, ...'.

--focus loop checks device-side loops: each seed's model is a Loop whose
trip count M is a graph input around a random body (carried values,
captured main-graph values, the counter, sometimes a data-dependent
condition or a nested loop; fuzz_loop.py says how), each variant
compiled once and run at M = 0, 1 and 3 (and M = 3 with a first
condition false where the model has one) against onnxruntime's Loop,
the allowance measured on the loop unrolled for that run; its
configurations are VARIANT@M=0 and so on, and its last line reads
'fusion-fuzz-loop: N models, M runs: ...'. --minimize shrinks bodies too;
--model and --repros run a model with such a Loop the same way.

Exit status: 0 when no (graph, variant) failed, 1 otherwise. The last line
reads 'fusion-fuzz: N graphs, M runs: P pass, U unsupported, F fail'.
"""
import argparse
import collections
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import onnx.parser

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The parts, by what they do; their names are re-exported here for the
# scripts that import this one (train_fuzz.py, scripts/compare-artifacts.py).
from fuzz_campaign import Campaign, check_repros  # noqa: E402
import fuzz_dynamic  # noqa: E402
import fuzz_loop  # noqa: E402
from fuzz_graph import (OPSET, MAX_ELEMS, GeneratorError, Value,  # noqa: E402,F401
                        nelems, validate)
from fuzz_generator import FAMILIES, Builder, focused, generate  # noqa: E402,F401
from fuzz_kiln import (BOUNDS, CRASH_MARKERS, KERNEL_ROTATION,  # noqa: E402,F401
                       ROTATION, UNSUPPORTED, Tools, compare, crash_signature,
                       graph_text, run_variant, variant_flags,
                       variant_precision, variants_for)
from fuzz_reduce import candidates, prune, shrink  # noqa: E402,F401
from fuzz_reference import (ALLOWANCE, FLOOR_REL, PERTURB,  # noqa: E402,F401
                            PERTURB_DRAWS, cone_scales, expand_layer_norms,
                            make_inputs, ort_session, perturb_every_result,
                            reference, value_shapes)


# --- One graph, all variants ---------------------------------------------------


class Result:
    def __init__(self, seed):
        self.seed = seed
        self.statuses = {}     # variant -> 'pass' | 'unsupported' | 'fail'
        self.details = {}      # variant -> text
        self.signatures = {}   # variant -> failure class
        self.amps = []
        self.ratios = []       # (worst per-element ratio, variant, output)
        self.generator_error = None
        self.nodes = 0
        self.ops = collections.Counter()


def check_model(model, seed, variants, tools, workdir):
    """Runs every variant of one model; returns a Result (model and feeds
    are attached as .model and .feeds)."""
    res = Result(seed)
    res.model = model
    res.nodes = len(model.graph.node)
    res.ops.update(n.op_type for n in model.graph.node)
    feeds = make_inputs(model, seed)
    res.feeds = feeds
    try:
        names, ref, amp, floors, sens = reference(model, feeds)
    except GeneratorError as e:
        res.generator_error = str(e)
        return res
    res.amps = [max(a) for a in amp]
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, "model.onnx")
    onnx.save(model, path)
    for i, arr in enumerate(feeds.values()):  # run_variant passes these
        np.save(os.path.join(workdir, f"in{i}.npy"), arr)
    for variant in variants:
        status, detail, outs = run_variant(path, feeds, names, variant,
                                           workdir, tools, seed)
        if status == "ok":
            rows = compare(names, ref, amp, floors, sens, outs, variant)
            res.ratios += [(r[3], variant, r[0]) for r in rows
                           if r[3] is not None]
            bad = [r for r in rows if not r[1]]
            lines = [f"  {r[0]} {list(ref[names.index(r[0])].shape)}: {r[2]}"
                     for r in rows]
            res.details[variant] = "\n".join(lines)
            if bad:
                res.statuses[variant] = "fail"
                kinds = sorted({"mismatch" if "rel-err" in r[2]
                                else r[2].split()[0] for r in bad})
                res.signatures[variant] = "wrong output: " + ",".join(kinds)
            else:
                res.statuses[variant] = "pass"
        elif status == "unsupported":
            res.statuses[variant] = "unsupported"
            res.details[variant] = detail
            res.signatures[variant] = detail
        else:
            res.statuses[variant] = "fail"
            res.details[variant] = detail
            res.signatures[variant] = (f"{status}: {detail}" if status != "crash"
                                       else detail)
    return res


def save_failure(res, variant, fail_dir):
    d = os.path.join(fail_dir, f"seed{res.seed}-{variant}")
    os.makedirs(d, exist_ok=True)
    onnx.save(res.model, os.path.join(d, "model.onnx"))
    np.savez(os.path.join(d, "inputs.npz"), **res.feeds)
    with open(os.path.join(d, "report.txt"), "w") as f:
        f.write(failure_report(res, variant))
    return d


def failure_report(res, variant):
    flags = " ".join(variant_flags(variant))
    return (f"FAIL seed {res.seed} variant {variant} (kilnc {flags or '(defaults)'}): "
            f"{res.signatures[variant]}\n{res.details[variant]}\n"
            f"{graph_text(res.model)}\n")



# --- Minimization -------------------------------------------------------------


def minimize(model, seed, variant, tools, workdir, signature):
    """Greedy reduction (fuzz_reduce.py) while (variant, signature) persists."""
    def same_failure(m):
        try:
            validate(m, tracked=False)
        except GeneratorError:
            return False
        r = check_model(m, seed, [variant], tools, workdir)
        if r.generator_error or r.statuses.get(variant) != "fail":
            return False
        return r.signatures[variant] == signature
    return shrink(model, same_failure)


# --- Driver ----------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--variants", default="fused,unfused,rotate")
    ap.add_argument("--kilnc", default="kilnc")
    ap.add_argument("--kiln-run", default="kiln-run")
    ap.add_argument("--failures", default="fuzz-failures",
                    help="where failing models are saved")
    ap.add_argument("--keep", help="keep every graph's work folder here")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--strict", action="store_true",
                    help="count 'unsupported' compile errors as failures")
    ap.add_argument("--minimize", action="store_true")
    ap.add_argument("--model", help="with --minimize (or alone): this model "
                    "instead of a generated one")
    ap.add_argument("--repros", metavar="DIR",
                    help="check every DIR/*.onnxtxt (ONNX textual syntax; a "
                    "'# variants: a,b' line names its variants) instead")
    ap.add_argument("--print-graph", action="store_true",
                    help="print every graph (textual syntax)")
    ap.add_argument("--verbose", action="store_true",
                    help="print every (graph, variant) result")
    ap.add_argument("--focus", choices=sorted(list(FAMILIES) + ["loop"]),
                    help="draw one family of op generators "
                    "(fuzz_ops_<family>.py) 12 times as often; loop: "
                    "random Loop bodies, run at several trip counts "
                    "(fuzz_loop.py)")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="run-time sizes: graphs with a batched leading dim, "
                    "each variant compiled once with --dim N=1..B and run at "
                    "N = 1, (B+1)/2 and B (fuzz_dynamic.py)")
    args = ap.parse_args()

    tools = Tools(args.kilnc, args.kiln_run, args.timeout)
    spec = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in spec:
        if v not in ("rotate", "rotate-kernels"):
            variant_flags(v)  # validates

    if args.dynamic_batch:
        if args.repros or args.minimize or args.model:
            ap.error("--dynamic-batch runs generated graphs only")
        if args.focus == "loop":
            ap.error("--dynamic-batch and --focus loop do not combine")
        return dynamic_main(args, tools, spec)
    if args.repros:
        return repros_main(args, tools)
    if args.minimize or args.model:
        return minimize_main(args, tools, spec)
    if args.focus == "loop":
        return loop_main(args, tools, spec)

    campaign = Campaign(
        args, tool="fusion-fuzz", unit="graphs", config="variant",
        compared="outputs", make_result=Result,
        check=lambda model, seed, variants, workdir: check_model(
            model, seed, variants, tools, workdir),
        save_failure=save_failure, failure_report=failure_report,
        graph_text=graph_text)
    builder = focused(Builder, args.focus)
    return campaign.run(lambda seed: generate(seed, builder),
                        lambda seed: variants_for(seed, spec))


def dynamic_main(args, tools, spec):
    """--dynamic-batch: one compile per variant, several sizes."""
    kinds = fuzz_dynamic.GraphKinds()
    campaign = Campaign(
        args, tool="fusion-fuzz-dynamic", unit="graphs", config="variant@size",
        compared="outputs", make_result=fuzz_dynamic.DynamicResult,
        check=lambda model, seed, variants, workdir: kinds.check(
            model, seed, variants, tools, workdir),
        save_failure=fuzz_dynamic.save_failure,
        failure_report=fuzz_dynamic.failure_report, graph_text=graph_text,
        skips=True, summary_lines=kinds.lines)
    builder = focused(fuzz_dynamic.BatchBuilder, args.focus)
    return campaign.run(lambda seed: fuzz_dynamic.generate_batched(seed, builder),
                        lambda seed: variants_for(seed, spec))


def loop_main(args, tools, spec):
    """--focus loop: one compile per variant, several trip counts."""
    kinds = fuzz_loop.LoopKinds()
    campaign = Campaign(
        args, tool="fusion-fuzz-loop", unit="models", config="variant@run",
        compared="outputs", make_result=fuzz_loop.LoopResult,
        check=lambda model, seed, variants, workdir: kinds.check(
            model, seed, variants, tools, workdir),
        save_failure=fuzz_loop.save_failure,
        failure_report=fuzz_loop.failure_report, graph_text=graph_text,
        summary_lines=kinds.lines)
    return campaign.run(fuzz_loop.generate_loop,
                        lambda seed: variants_for(seed, spec))


def load_model(path):
    """An .onnx file, or ONNX textual syntax ('#' lines are comments)."""
    if path.endswith(".onnx"):
        return onnx.load(path)
    with open(path) as f:
        return onnx.parser.parse_model(f.read())


def repros_main(args, tools):
    """Checks saved reproducers: each must pass every variant it names."""
    return check_repros(
        args.repros, tool="fusion-fuzz", config="variant",
        default_configs=["fused", "unfused"],
        load=lambda path, text: load_model(path),
        check=lambda model, variants, work: check_any(
            model, args.seed, variants, tools, work),
        failure_report=failure_report)


def check_any(model, seed, variants, tools, work):
    """check_model, or for a model with a run-time Loop its runs at every
    trip count as one status per variant (fuzz_loop.by_variant)."""
    if fuzz_loop.is_loop_model(model):
        return fuzz_loop.by_variant(
            fuzz_loop.check_loop(model, seed, variants, tools, work), variants)
    return check_model(model, seed, variants, tools, work)


def minimize_main(args, tools, spec):
    seed = args.seed
    if args.model:
        model = load_model(args.model)
    elif args.focus == "loop":
        model = fuzz_loop.generate_loop(seed)
    else:
        model = generate(seed, focused(Builder, args.focus))
    variants = variants_for(seed, spec)
    if fuzz_loop.is_loop_model(model):
        return loop_minimize_main(args, tools, model, variants)
    work = tempfile.mkdtemp(prefix="fusion-fuzz-min-")
    res = check_model(model, seed, variants, tools, work)
    if res.generator_error:
        print(f"onnxruntime rejects the model: {res.generator_error}")
        return 1
    failing = [v for v in variants if res.statuses.get(v) == "fail"]
    for v in variants:
        print(f"seed {seed} {v}: {res.statuses[v]}"
              + (f": {res.signatures[v]}" if v in res.signatures else ""))
    if not args.minimize:
        for v in failing:
            print(failure_report(res, v))
        shutil.rmtree(work, ignore_errors=True)
        return 1 if failing else 0
    if not failing:
        print("nothing to minimize: no variant fails")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    for variant in failing:
        sig = res.signatures[variant]
        print(f"minimizing seed {seed} {variant}: {sig} "
              f"({len(model.graph.node)} nodes)", flush=True)
        small = minimize(model, seed, variant, tools, work, sig)
        r = check_model(small, seed, [variant], tools, work)
        d = save_failure(r, variant, os.path.join(args.failures, "minimized"))
        print(failure_report(r, variant) + f"saved to {d}\n", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 1




def loop_minimize_main(args, tools, model, variants):
    """minimize_main for a model with a run-time Loop: the failing
    configurations are VARIANT@RUN, and bodies shrink too."""
    seed = args.seed
    work = tempfile.mkdtemp(prefix="fusion-fuzz-min-")
    res = fuzz_loop.check_loop(model, seed, variants, tools, work)
    if res.generator_error:
        print(f"the reference fails: {res.generator_error}")
        return 1
    for key, status in res.statuses.items():
        print(f"seed {seed} {key}: {status}"
              + (f": {res.signatures[key]}" if key in res.signatures else ""))
    failing = [k for k, s in res.statuses.items() if s == "fail"]
    if not args.minimize or not failing:
        for key in failing:
            print(fuzz_loop.failure_report(res, key))
        if args.minimize:
            print("nothing to minimize: no run fails")
        shutil.rmtree(work, ignore_errors=True)
        return 1 if failing else 0
    # One key per variant: the first failing run of each.
    done = set()
    for key in failing:
        variant = key.split("@")[0]
        if variant in done:
            continue
        done.add(variant)
        sig = res.signatures[key]
        print(f"minimizing seed {seed} {key}: {sig} "
              f"({sum(fuzz_loop.all_ops(model.graph).values())} nodes)", flush=True)

        def same_failure(m):
            try:
                validate(m, tracked=False)
            except GeneratorError:
                return False
            r = fuzz_loop.check_loop(m, seed, [variant], tools, work)
            return (not r.generator_error and r.statuses.get(key) == "fail"
                    and r.signatures[key] == sig)
        small = shrink(model, same_failure, more=fuzz_loop.loop_candidates)
        r = fuzz_loop.check_loop(small, seed, [variant], tools, work)
        d = fuzz_loop.save_failure(r, key, os.path.join(args.failures, "minimized"))
        print(fuzz_loop.failure_report(r, key) + f"saved to {d}\n", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
