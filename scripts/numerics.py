"""Kiln's one rule for comparing computed numbers with a reference.

Every test and device script that checks numerics imports this module
(test/Target/CUDA, test/e2e, test/e2e/training, test/Pipelines/Training,
python/tests, examples, scripts/device): the bounds, the way NaN and Inf are
matched and the report line are the same everywhere. docs/testing.md
("Comparing numbers") states the rule and justifies the constants.

The rule, per output (`got` against the reference `want`, both as float64):

  1. Same shape; the same non-finite values where `want` has them (NaN
     where NaN, +Inf where +Inf, -Inf where -Inf) and finite values
     elsewhere.
  2. Norm: ||got - want|| / ||want|| <= B, the precision's bound on the
     relative L2 error (bf16 2e-2, fp16 and tf32 5e-3, fp32 1e-4); for a
     network that amplifies a relative error of its contraction weights k
     times (measured: light_zoo.py), B = max(B_p, u_p k) (`amplification`).
  3. Per element: |got_i - want_i| <= atol + rtol |want_i| (+ s_i), with
     rtol = B and atol = A * B * rms(want), A = 6 (ELEMENT_TAIL): the
     error of one element may be as large as the whole output's may be
     relative to its own value, and no element may be off by more than
     six standard deviations of an error whose relative L2 norm is B.
     s_i >= 0 is an optional per-element allowance for an
     ill-conditioned reference (fusion_fuzz.py measures it by perturbing
     onnxruntime's computation); 0 elsewhere. With an allowance the norm
     bound is B + ||s|| / ||want||, its L2 counterpart.

The norm alone lets a few wrong elements through: with n elements, one
element off by d moves the relative L2 error by d / (rms sqrt(n)), so at
B = 2e-2 an element of a 2,500-element output can be wrong by its whole
RMS. The per-element rule catches it at 6 B rms = 0.12 rms.

Each comparison reports the worst per-element ratio |got_i - want_i| /
bound_i (<= 1 passes) and where it is, so the margin is visible.

Test hook (docs/testing.md "Teeth"): KILN_TEST_CORRUPT=D[@I] adds D *
rms(want) to element I (flat index; default the middle one) of every
`got` before comparing, to show that the per-element rule fails where the
norm alone passes.

`ort_session` is the one way tests build an onnxruntime reference: the CPU
provider with every graph optimization off (ORT_DISABLE_ALL), so the
reference computes each node as the ONNX graph says (onnxruntime 1.20.1's
rewrites have changed results: Gemm followed by an identity Transpose came
out as the transposed product, found by fusion_fuzz.py).
"""
import math
import os
from dataclasses import dataclass

import numpy as np

# Unit roundoff 2^-p of each format (p: significand bits with the implicit
# one): the largest relative error of one rounding to nearest.
UNIT_ROUNDOFF = {
    "fp32": 2.0 ** -24,
    "tf32": 2.0 ** -11,
    "fp16": 2.0 ** -11,
    "bf16": 2.0 ** -8,
}
# B: the bound on the relative L2 error of a whole network's output
# (issue 5; docs/testing.md): about 5 unit roundoffs of the low precision
# (bf16 5.1 u, fp16/tf32 10 u) and, for fp32, the growth of f32 sums of up
# to 25,088 terms (VGG's first fully connected layer) taken in another order
# than the reference's, u sqrt(K) sqrt(L) ~ 6e-8 * 158 * 7 = 7e-5 over L ~ 50
# layers.
NORM_BOUND = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}
# Whole networks: rounding every contraction operand to nearest (a relative
# error uniform in [-u, u], random in sign) moves a network's output by
# about 0.5 u k, k its amplification: the relative output change per unit
# relative change of every contraction weight (onnxruntime, N(0, 1) x 1e-3
# perturbations). Measured on the light zoo (docs/testing.md), Kiln's
# relative L2 error is 0.38-0.70 u k in bf16 and fp16 for k from 0.7 to
# 69; B(p, k) = max(B_p, u_p k) holds all of them (margin 1.4 or more),
# and not, on four of nine models, an operand truncated instead of
# rounded (tf32 on wgmma: 0.94-5.2 u k).
# A: how many standard deviations of the norm-bounded error one element
# may be off. The largest of n <= 10^7 Gaussian errors passes 6 sigma with
# probability n * 2 Phi(-6) <= 2e-2, and the measured errors sit at a
# fraction of B (docs/testing.md lists the worst ratio of every run).
ELEMENT_TAIL = 6.0


@dataclass(frozen=True)
class Tolerance:
    """B (norm), rtol and atol in units of rms(want); `atol`, when set, is
    an absolute atol used instead (for kernels whose error has a proven
    absolute bound, e.g. membound_kernels.py's sums)."""
    norm: float
    rtol: float
    atol_rms: float
    atol: float = None

    @staticmethod
    def from_norm(bound):
        """The per-element bounds that go with a norm bound B."""
        return Tolerance(bound, bound, ELEMENT_TAIL * bound)

    @staticmethod
    def elementwise(rtol, atol):
        """|got_i - want_i| <= atol + rtol |want_i| alone (no norm bound):
        for float64 references whose error per element is known, as the
        training tests' step-by-step references are."""
        return Tolerance(math.inf, rtol, 0.0, atol)

    def describe(self):
        first = (f"{self.atol:g}" if self.atol is not None
                 else f"{self.atol_rms:g} rms")
        return (f"norm {self.norm:g}, per element {first} + "
                f"{self.rtol:g} |want|")


def norm_bound(precision, amplification=None):
    """B for a precision, and for a network whose measured amplification
    of contraction-weight errors is `amplification`: max(B_p, u_p k)."""
    if precision not in NORM_BOUND:
        raise ValueError(f"unknown precision '{precision}' "
                         f"(one of {', '.join(NORM_BOUND)})")
    bound = NORM_BOUND[precision]
    if amplification:
        bound = max(bound, UNIT_ROUNDOFF[precision] * amplification)
    return bound


def amplification(model, feeds, output, draws=2, relative=1e-3, seed=1):
    """k: the largest relative change of `output`'s norm, per unit of
    relative change, when every Conv/ConvTranspose/Gemm/MatMul weight (an
    initializer) of the ONNX ModelProto is multiplied by 1 + relative
    N(0, 1), elementwise, over `draws` draws (onnxruntime, graph
    optimizations off)."""
    import onnx
    from onnx import numpy_helper
    weights = {n.input[1] for n in model.graph.node
               if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")
               and len(n.input) > 1}
    want = ort_session(model).run([output], feeds)[0].astype(np.float64)
    norm = float(np.linalg.norm(want))
    rng = np.random.default_rng(seed)
    worst = 0.0
    for _ in range(draws):
        moved = onnx.ModelProto()
        moved.CopyFrom(model)
        for t in moved.graph.initializer:
            if t.name in weights and t.data_type == onnx.TensorProto.FLOAT:
                a = numpy_helper.to_array(t)
                a = a * (1 + relative * rng.standard_normal(a.shape))
                t.CopyFrom(numpy_helper.from_array(a.astype(np.float32),
                                                   t.name))
        got = ort_session(moved).run([output], feeds)[0].astype(np.float64)
        if norm > 0:
            worst = max(worst, float(np.linalg.norm(got - want)) / norm /
                        relative)
    return worst


def tolerance(precision_or_bound, amplification=None):
    """The Tolerance of a precision name ("fp32", "tf32", "fp16", "bf16"),
    with the network's measured `amplification` when the comparison is a
    whole network's, or of an explicit norm bound (a float)."""
    if isinstance(precision_or_bound, str):
        return Tolerance.from_norm(norm_bound(precision_or_bound,
                                              amplification))
    if isinstance(precision_or_bound, Tolerance):
        return precision_or_bound
    return Tolerance.from_norm(float(precision_or_bound))


@dataclass
class Comparison:
    """The outcome of compare(): `ok`, the figures, and a report line."""
    name: str
    tol: Tolerance
    ok: bool = False
    problem: str = ""
    rel_l2: float = math.inf
    worst_ratio: float = math.inf
    worst_index: tuple = ()
    worst_got: float = math.nan
    worst_want: float = math.nan
    elements_over: int = 0
    size: int = 0
    norm_ok: bool = False
    corrupted: str = ""
    worst_output: str = ""
    norm_limit: float = math.nan
    absolute: bool = False  # an all-zero reference: the norm figures are ||e||

    @property
    def element_ok(self):
        return not self.problem and self.worst_ratio <= 1.0

    def figures(self):
        """'rel-err E (bound B), worst element R of its bound at [i] (got
        g, want w)', or the problem."""
        if self.problem:
            return self.problem
        where = ", ".join(str(i) for i in self.worst_index)
        limit = self.tol.norm if math.isnan(self.norm_limit) else self.norm_limit
        text = (f"{'abs-err' if self.absolute else 'rel-err'} "
                f"{self.rel_l2:.3e} (bound {limit:.3g}"
                f"{'' if self.norm_ok else ' EXCEEDED'}), worst element "
                f"{self.worst_ratio:.3f} of its bound"
                + (f" in {self.worst_output}" if self.worst_output else "")
                + f" at [{where}] (got {self.worst_got:.6g}, want "
                f"{self.worst_want:.6g})")
        if self.elements_over:
            text += f", {self.elements_over}/{self.size} elements over"
        if self.corrupted:
            text += f" [{self.corrupted}]"
        return text

    def line(self):
        """'<name>: <figures> ok|FAIL'."""
        return f"{self.name}: {self.figures()} {'ok' if self.ok else 'FAIL'}"


def combine(results, name="outputs"):
    """One Comparison for several outputs: ok when all are, the largest
    relative error, and the worst element over all of them (named)."""
    results = list(results)
    if not results:
        raise ValueError("combine() of no comparisons")
    bad = [r for r in results if r.problem]
    if bad:
        out = Comparison(name=name, tol=bad[0].tol,
                         problem=f"{bad[0].name}: {bad[0].problem}")
        return out
    def limit(r):
        return r.tol.norm if math.isnan(r.norm_limit) else r.norm_limit
    worst = max(results, key=lambda r: r.worst_ratio)
    # The norm figures of the output closest to (or furthest over) its bound.
    norm_worst = max(results, key=lambda r: r.rel_l2 / max(limit(r), 1e-300))
    out = Comparison(name=name, tol=worst.tol)
    out.rel_l2, out.norm_limit = norm_worst.rel_l2, limit(norm_worst)
    out.norm_ok = all(r.norm_ok for r in results)
    out.worst_ratio, out.worst_index = worst.worst_ratio, worst.worst_index
    out.worst_got, out.worst_want = worst.worst_got, worst.worst_want
    out.worst_output = worst.name if len(results) > 1 else ""
    out.elements_over = sum(r.elements_over for r in results)
    out.size = sum(r.size for r in results)
    out.corrupted = worst.corrupted
    out.ok = all(r.ok for r in results)
    return out


def _corruption():
    spec = os.environ.get("KILN_TEST_CORRUPT", "")
    if not spec:
        return None
    delta, _, index = spec.partition("@")
    return float(delta), (int(index) if index else None)


def _nonfinite_mismatch(g, w):
    """Text for the first place where the non-finite values differ, or ''."""
    want_nan, got_nan = np.isnan(w), np.isnan(g)
    bad = (want_nan != got_nan) | (np.isinf(w) & (g != w)) | (
        np.isinf(g) & (g != w))
    if not bad.any():
        return ""
    count = int(bad.sum())
    first = np.unravel_index(int(np.argmax(bad)), w.shape) if w.ndim else ()
    where = ", ".join(str(i) for i in first)
    return (f"{count}/{w.size} elements differ in NaN/Inf (first at "
            f"[{where}]: got {g[first]!r}, want {w[first]!r})")


def compare(got, want, tol="fp32", name="output", allowance=None):
    """Compares `got` with the reference `want` by the module's rule.

    tol: a precision name, a norm bound, or a Tolerance. allowance: an
    optional array (broadcast to want's shape) of per-element absolute
    allowances s_i >= 0 added to each element's bound."""
    tol = tolerance(tol)
    result = Comparison(name=name, tol=tol)
    if got is None:
        result.problem = "missing"
        return result
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        result.problem = f"shape {list(got.shape)}, want {list(want.shape)}"
        return result
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    result.size = w.size
    corrupt = _corruption()
    if corrupt and w.size:
        delta, index = corrupt
        flat = w.size // 2 if index is None else index % w.size
        finite = w[np.isfinite(w)]
        rms = float(np.sqrt(np.mean(finite ** 2))) if finite.size else 1.0
        g = g.copy()
        g.reshape(-1)[flat] += delta * rms
        result.corrupted = (f"KILN_TEST_CORRUPT: element {flat} moved by "
                            f"{delta:g} rms")
    problem = _nonfinite_mismatch(g, w)
    if problem:
        result.problem = problem
        return result
    finite = np.isfinite(w)
    gf, wf = g[finite], w[finite]
    if not wf.size:
        result.rel_l2 = result.worst_ratio = 0.0
        result.norm_ok = result.ok = True
        return result
    diff = np.abs(gf - wf)
    norm_want = float(np.linalg.norm(wf))
    norm_diff = float(np.linalg.norm(diff))
    result.rel_l2 = norm_diff / norm_want if norm_want > 0 else (
        0.0 if norm_diff == 0 else math.inf)
    rms = norm_want / math.sqrt(wf.size)
    atol = tol.atol if tol.atol is not None else tol.atol_rms * rms
    bound = atol + tol.rtol * np.abs(wf)
    result.norm_limit = tol.norm
    if allowance is not None:
        extra = np.broadcast_to(np.asarray(allowance, np.float64), w.shape)
        bound = bound + extra[finite]
        # ||e|| <= B ||want|| + ||s||, shown relative to ||want|| (or, for
        # an all-zero reference, as it is).
        slack = float(np.linalg.norm(extra[finite]))
        if norm_want > 0:
            result.norm_limit = tol.norm + slack / norm_want
        else:
            result.rel_l2, result.norm_limit = norm_diff, slack
            result.absolute = True
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(bound > 0, diff / bound,
                         np.where(diff > 0, math.inf, 0.0))
    worst = int(np.argmax(ratio))
    result.worst_ratio = float(ratio[worst])
    positions = np.argwhere(finite) if w.ndim else np.zeros((1, 0), int)
    result.worst_index = tuple(int(i) for i in positions[worst])
    result.worst_got, result.worst_want = float(gf[worst]), float(wf[worst])
    result.elements_over = int((ratio > 1.0).sum())
    result.norm_ok = result.rel_l2 <= result.norm_limit
    result.ok = result.norm_ok and result.worst_ratio <= 1.0
    return result


def assert_close(got, want, tol="fp32", name="output", allowance=None):
    """compare(), raising AssertionError with the report line unless ok
    (for pytest); returns the Comparison."""
    result = compare(got, want, tol, name, allowance)
    if not result.ok:
        raise AssertionError(result.line())
    return result


def rel_l2(got, want):
    """||got - want|| / ||want|| in float64 (for checks that two results
    must differ; closeness is compare()'s)."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    norm = float(np.linalg.norm(w))
    return float(np.linalg.norm(g - w)) / norm if norm > 0 else math.inf


def ort_session(model, providers=("CPUExecutionProvider",),
                **session_options):
    """An onnxruntime InferenceSession (on the CPU unless `providers` says
    otherwise) with every graph optimization off. `model`: a path,
    serialized bytes or a ModelProto; session_options: attributes of
    ort.SessionOptions to set."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    for key, value in session_options.items():
        setattr(options, key, value)
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    return ort.InferenceSession(model, options, providers=list(providers))
