"""Checks kiln-run --json output (argv[1]) for the Relu model on input argv[2]."""
import json
import sys

import numpy as np

with open(sys.argv[1]) as f:
    text = f.read()
report = json.loads(text)  # the whole of stdout is one JSON object
assert text.count("\n") == 1, "one line"
x = np.load(sys.argv[2]).astype(np.float64)
y = np.maximum(x, 0)

assert report["device"]["kind"] == "emu", report["device"]
(out,) = report["outputs"]
assert out["name"] == "y" and out["dtype"] == "f32" and out["shape"] == [4, 8], out
# Relu of f32 values is exact, and the summary is printed with 9 significant
# digits (enough to round-trip f32), so 1e-6 relative covers printing; the
# mean is accumulated in double in both.
for key, want in (("min", y.min()), ("max", y.max()), ("mean", y.mean())):
    assert abs(out[key] - want) <= 1e-6 * max(1.0, abs(want)), (key, out[key], want)
assert np.allclose(out["first"], y.reshape(-1)[:4], rtol=1e-6, atol=0), out["first"]
assert out["non_finite"] == 0

bench = report["bench"]
assert bench["runs"] == 3 and bench["warmup"] == 1 and bench["batch"] == 4, bench
assert len(bench["run_ms"]) == 3 and all(t > 0 for t in bench["run_ms"])
# Throughput is the runs over their summed time; samples/s multiplies by the
# batch. Recomputed here from the per-run times (printed to 9 digits).
want = 1000.0 * 3 / sum(bench["run_ms"])
assert abs(bench["inferences_per_s"] - want) <= 1e-6 * want, (bench, want)
assert abs(bench["samples_per_s"] - 4 * want) <= 1e-6 * 4 * want, bench
assert bench["p10_ms"] <= bench["median_ms"] <= bench["p90_ms"], bench
assert bench["min_ms"] == min(bench["run_ms"]), bench
assert bench["kernels"] and all(k["median_ms"] > 0 for k in bench["kernels"])
print("json ok")
