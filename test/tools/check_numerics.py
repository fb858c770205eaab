#!/usr/bin/env python3
"""scripts/numerics.py's rule on hand-made cases (numerics-rule.test).
Prints one line per case, "<case>: ok" or "<case>: WRONG ...", and exits
1 if any case is wrong."""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import numerics  # noqa: E402

rng = np.random.default_rng(0)
want = rng.standard_normal(2500)
rms = math.sqrt(float(np.mean(want ** 2)))
cases = []


def case(name, result, ok, norm_ok=None, over=None):
    good = result.ok == ok and (norm_ok is None or result.norm_ok == norm_ok) \
        and (over is None or result.elements_over == over)
    cases.append(good)
    print(f"{name}: {'ok' if good else 'WRONG'} ({result.line()})")


# Rounding-sized noise passes in bf16.
noisy = want * (1 + 3e-3 * rng.standard_normal(want.size))
case("bf16 noise", numerics.compare(noisy, want, "bf16"), True)
# One element off by its whole RMS: the norm (2e-2 at 2,500 elements)
# passes, the element fails.
bad = noisy.copy()
bad[7] += 0.9 * rms
case("one element off", numerics.compare(bad, want, "bf16"), False,
     norm_ok=True, over=1)
# The same with the test hook.
os.environ["KILN_TEST_CORRUPT"] = "0.9@7"
case("KILN_TEST_CORRUPT", numerics.compare(noisy, want, "bf16"), False,
     norm_ok=True, over=1)
del os.environ["KILN_TEST_CORRUPT"]
# NaN where the reference has a number, and a missing NaN, fail; matching
# NaN and Inf pass; an Inf of the wrong sign fails.
special = want.copy()
special[:3] = [np.nan, np.inf, -np.inf]
case("NaN/Inf matched", numerics.compare(special.copy(), special, "fp32"),
     True)
got = special.copy()
got[0] = 1.0
case("a NaN lost", numerics.compare(got, special, "fp32"), False)
got = special.copy()
got[1] = -np.inf
case("an Inf's sign", numerics.compare(got, special, "fp32"), False)
got = special.copy()
got[10] = np.nan
case("a NaN made", numerics.compare(got, special, "fp32"), False)
# Shapes must agree.
case("shape", numerics.compare(want[:10], want[:11], "fp32"), False)
# An all-zero reference: exact passes, anything else fails without an
# allowance and passes within one.
zero = np.zeros(4)
case("zeros exact", numerics.compare(zero, zero, "fp32"), True)
case("zeros off", numerics.compare(zero + 1e-7, zero, "fp32"), False)
case("zeros, allowance", numerics.compare(zero + 1e-7, zero, "fp32",
                                          allowance=1e-6), True)
# fp32's bound: 1e-5 relative noise passes, 1e-3 fails.
case("fp32 1e-5", numerics.compare(want * (1 + 1e-5), want, "fp32"), True)
case("fp32 1e-3", numerics.compare(want * (1 + 1e-3), want, "fp32"), False)
# The amplification widens the bound to u k: 5e-2 relative noise fails
# bf16 alone and passes with k = 40 (u k = 0.156).
loose = want * (1 + 5e-2 * rng.standard_normal(want.size))
case("bf16, k 1", numerics.compare(loose, want, numerics.tolerance("bf16", 1)),
     False)
case("bf16, k 40", numerics.compare(loose, want,
                                    numerics.tolerance("bf16", 40)), True)
# combine: one failing output fails the lot and is named.
both = numerics.combine([numerics.compare(noisy, want, "bf16", "a"),
                         numerics.compare(bad, want, "bf16", "b")])
case("combine", both, False)
cases.append(both.worst_output == "b")
print(f"{len(cases)} checks, {cases.count(False)} wrong")
sys.exit(1 if False in cases else 0)
