#!/usr/bin/env python3
"""The kiln Python package on a GPU: DLPack tensors in and out on cuda.

  --prepare DIR   (development machine, needs kilnc) compile the check's
                  models into DIR with kiln.compile and save the inputs and
                  the numpy float64 references next to them.
  --dir DIR       (device machine, no LLVM: only the package is needed,
                  build/python or build-device-python/python, whichever is
                  built for this interpreter; carried beside the device
                  pack) load DIR's artifacts and check,
                  on --device (cuda; emu for the dry run):
    1. host numpy in, numpy out, against the float64 reference;
    2. outputs="device": DLPack tensors in GPU memory (device (2, 0)), fed
       back as the next run's input without a host copy (relu is
       idempotent, so the result must equal the first run's), and a run
       without that CUDA input again is refused, naming it;
    3. with PyTorch when it is installed: a torch CUDA tensor in, a CUDA
       tensor out through torch.from_dlpack, equal to the host run;
    4. Session.bench(50): median ms, throughput.
  Prints one line per check and "python-check: N passed, N failed".
Tolerance: fp32 relu(x W) with K=256 terms of O(1): reordering error below
K * 2^-24 * sum|terms| ~ 4e-4 absolute at worst; bound 1e-3. Steps 2 and 3
move the same bytes, so they must be bit-identical to step 1.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

K, N, M = 256, 64, 256  # relu(x[N,K] W[K,M]) then relu(y W2[M,M])


def prepare(out):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import kiln
    rng = np.random.default_rng(5)
    w = rng.standard_normal((K, M)).astype(np.float32) / np.sqrt(K)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Relu", ["h"], ["y"])], "relu_mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, M])],
        [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    relu = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, M])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, M])])
    os.makedirs(out, exist_ok=True)
    kiln.compile(model).save(os.path.join(out, "relu_mm.kiln"))
    kiln.compile(helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)])
                 ).save(os.path.join(out, "relu.kiln"))
    x = rng.standard_normal((N, K)).astype(np.float32)
    np.save(os.path.join(out, "x.npy"), x)
    np.save(os.path.join(out, "ref.npy"),
            np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0))
    print(f"python-check: prepared {out}")


def check(directory, device):
    try:
        import kiln
    except ImportError as err:  # e.g. another Python than the build's
        print(f"python-check: SKIP: cannot import kiln from build/python ({err})")
        return 0
    results = []

    def report(name, ok, detail):
        results.append(ok)
        print(f"python-check: {'PASS' if ok else 'FAIL'} {name}: {detail}")

    x = np.load(os.path.join(directory, "x.npy"))
    ref = np.load(os.path.join(directory, "ref.npy"))
    mm = kiln.Session(kiln.load(os.path.join(directory, "relu_mm.kiln")), device=device)
    relu = kiln.Session(kiln.load(os.path.join(directory, "relu.kiln")), device=device)
    y = mm.run({"x": x})["y"]
    sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
    import numerics  # next to this file in the device pack, else scripts/
    # Per element |y - ref| <= 1e-3 (the tolerance above), and 1e-3 on the
    # norm (scripts/numerics.py).
    result = numerics.compare(y, ref, numerics.Tolerance(1e-3, 0.0, 0.0, 1e-3))
    report("host in/out", result.ok, result.figures())
    if device.startswith("cuda"):
        on_gpu = mm.run({"x": x}, outputs="device")["y"]
        where = on_gpu.__dlpack_device__()
        again = relu.run({"x": on_gpu})  # a CUDA input: outputs stay on the GPU
        back = relu.run({"x": again["y"]}, outputs="host")["y"]
        report("DLPack device round trip", tuple(where) == (2, 0) and
               np.array_equal(back, y), f"device {tuple(where)}, bit-identical "
               f"{np.array_equal(back, y)}")
        try:  # the CUDA input of the last run is not kept
            relu.run({})
            report("CUDA input given again", False, "a run without it ran")
        except kiln.RuntimeError as err:
            report("CUDA input given again", err.tensor == "x", err.message)
        try:
            import torch
        except ImportError:
            print("python-check: SKIP torch: not installed")
        else:
            xt = torch.from_numpy(x).cuda()
            yt = torch.from_dlpack(mm.run({"x": xt})["y"])
            same = yt.is_cuda and np.array_equal(yt.cpu().numpy(), y)
            report("torch CUDA in/out", same, f"is_cuda {yt.is_cuda}")
    bench = mm.bench(50 if device.startswith("cuda") else 2, {"x": x}, warmup=1)
    report("bench", bench.median_ms > 0,
           f"median {bench.median_ms:.4f} ms, {bench.throughput:.0f} runs/s "
           f"on {mm.device_name}")
    failed = results.count(False)
    print(f"python-check: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def package_dir(root):
    """The kiln package built for this interpreter: build/python, or
    build-device-python/python, which prepare.sh builds for the device
    machine's CPython (3.12 there on 2026-12-04, 3.11 here): an extension
    module loads only in the minor version it was built for."""
    import sysconfig
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    candidates = [os.path.join(os.environ.get("KILN_BUILD_DIR", os.path.join(root, "build")), "python"),
                  os.path.join(root, "build-device-python", "python")]
    for candidate in candidates:
        if os.path.exists(os.path.join(candidate, "kiln", "_native" + suffix)):
            return candidate
    return candidates[0]  # the import then fails and says why


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", metavar="DIR")
    parser.add_argument("--dir")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, package_dir(root))
    if args.prepare:
        os.environ.setdefault("KILN_KILNC", os.path.join(root, "build", "bin", "kilnc"))
        prepare(args.prepare)
        return 0
    return check(args.dir, args.device)


if __name__ == "__main__":
    sys.exit(main())
