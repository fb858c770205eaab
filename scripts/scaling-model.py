#!/usr/bin/env python3
"""Data-parallel scaling on paper: step time and efficiency on many H200s.

For ResNet-50 (ImageNet, 25.6 M parameters) and a BERT-base encoder
(110 M parameters, sequence 128), weak scaling (a fixed per-GPU batch) on
8, 64 and 512 H200s, from:

- the single-GPU step time: FLOPs per step / (bf16 dense peak from
  runtime/targets/gpus.ini x EFFICIENCY), labelled "roofline estimate":
  neither a GPU nor the emu performance model has timed these training
  steps yet (`--step-ms MODEL=MS` replaces it with a measured number);
- the gradient buckets Kiln emits (`kilnc --train --data-parallel
  --bucket-mb 25`): the weights in reverse order, merged into contiguous
  buckets of at most 25 MiB, one all-reduce each (the same algorithm as
  gradientBuckets in lib/Compiler/TrainingCompile.cpp);
- a ring all-reduce per bucket: 2(N-1)/N x bytes / bandwidth + latency x
  2(N-1) steps. Inside one node (N <= 8) the ring runs over NVLink at
  900 GB/s per GPU; across nodes every ring has an inter-node hop, so the
  ring runs at the NIC's 400 Gb/s (50 GB/s) per GPU. Latency per ring
  step: 3 us on NVLink, 8 us across nodes (typical NCCL figures, assumed);
- hierarchical (NCCL's shape across nodes): reduce-scatter in the node
  over NVLink, ring all-reduce of 1/8 of the bytes across the nodes on
  each GPU's NIC, all-gather in the node;
- overlap: the backward pass is 2/3 of the compute, and a bucket's
  gradients are ready once the backward pass has covered its share of the
  parameters (parameters as a proxy of backward time); the all-reduces run
  one after another on one stream, each starting when its bucket is ready
  and the previous one is done, as Kiln's NCCL engine runs the buckets
  kilnc writes as soon as their gradients exist (docs/runtime.md
  "Data-parallel training"). "No overlap" adds every all-reduce after
  the backward pass (Kiln before 2026-12-04). Compression: bf16 gradients halve the bytes;
  PowerSGD rank 4 sends r(m + n) values per m x n matrix (a conv's weight
  as out x in*k*k; a matrix whose smaller side is <= r, biases and norms
  uncompressed, as kilnc --allreduce-dtype=powersgd:R decides) in fp32, in
  two all-reduces per bucket (P, then Q: twice the latency terms).

`--artifact FILE.kiln` models a compiled `kilnc --train --data-parallel`
artifact instead: its buckets (and PowerSGD matrices) are read from the
file's `collectives` and `powersgd` sections (docs/artifact-format.md),
and `--step-ms` gives its single-GPU step (no default: nothing has timed
it). It prints one line per GPU count with each bucket's all-reduce time.

Prints a Markdown table (docs/benchmarks.md "Data-parallel scaling").
"""
import argparse
import configparser
import os
import struct

MIB = 1024 * 1024
EFFICIENCY = 0.40  # assumed fraction of the bf16 dense peak a step reaches
NVLINK_GBPS, NIC_GBPS = 900.0, 50.0  # GB/s per GPU
NVLINK_LAT, NIC_LAT = 3e-6, 8e-6
GPUS_PER_NODE = 8


def resnet50():
    """[(name, shape)] of ResNet-50's trainable tensors in forward order."""
    w = [("conv1", (64, 3, 7, 7)), ("bn1.g", (64,)), ("bn1.b", (64,))]
    cin = 64
    for stage, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for b in range(blocks):
            p = f"l{stage}.{b}"
            cout = width * 4
            w += [(p + ".c1", (width, cin, 1, 1)), (p + ".bn1g", (width,)), (p + ".bn1b", (width,)),
                  (p + ".c2", (width, width, 3, 3)), (p + ".bn2g", (width,)), (p + ".bn2b", (width,)),
                  (p + ".c3", (cout, width, 1, 1)), (p + ".bn3g", (cout,)), (p + ".bn3b", (cout,))]
            if b == 0:
                w += [(p + ".down", (cout, cin, 1, 1)), (p + ".dbng", (cout,)), (p + ".dbnb", (cout,))]
            cin = cout
    w += [("fc.w", (1000, 2048)), ("fc.b", (1000,))]
    return w


def bert_base():
    h, f = 768, 3072
    w = [("emb.word", (30522, h)), ("emb.pos", (512, h)), ("emb.type", (2, h)),
         ("emb.lng", (h,)), ("emb.lnb", (h,))]
    for l in range(12):
        p = f"layer{l}"
        for m in "qkvo":
            w += [(f"{p}.{m}.w", (h, h)), (f"{p}.{m}.b", (h,))]
        w += [(p + ".ln1g", (h,)), (p + ".ln1b", (h,)), (p + ".ff1.w", (f, h)), (p + ".ff1.b", (f,)),
              (p + ".ff2.w", (h, f)), (p + ".ff2.b", (h,)), (p + ".ln2g", (h,)), (p + ".ln2b", (h,))]
    w += [("pooler.w", (h, h)), ("pooler.b", (h,))]
    return w


def count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# (weights, per-GPU batch, training GFLOP per sample: 3 x the forward's
# 2 x multiply-adds; BERT: 6 x encoder parameters x 128 tokens + attention).
MODELS = {
    "ResNet-50": (resnet50, 128, 3 * 2 * 4.09),
    "BERT-base": (bert_base, 32, 6 * 85.0e-3 * 128 + 3 * 2 * 12 * 2 * 128 * 128 * 768 / 1e9),
}


def buckets(weights, bucket_mb):
    """Kiln's buckets: weights in reverse order, merged up to bucket_mb MiB.
    Each bucket: [(name, shape)]."""
    limit = max(int(bucket_mb * MIB) // 4, 1)
    result = []
    for name, shape in reversed(weights):
        n = count(shape)
        if result and sum(count(s) for _, s in result[-1]) + n <= limit:
            result[-1].append((name, shape))
        else:
            result.append([(name, shape)])
    return result


PSGD_RANK = 4


def compressed(shape, rank=PSGD_RANK):
    """kilnc's rule: a weight of >= 2 dims as [d0, d1 x ...] whose smaller
    side exceeds the rank."""
    return len(shape) >= 2 and min(shape[0], count(shape) // shape[0]) > rank


def wire_bytes(bucket, compression):
    total = 0
    for _, shape in bucket:
        n = count(shape)
        if compression == "powersgd" and compressed(shape):
            m = shape[0]
            k = n // m
            total += 4 * PSGD_RANK * (m + k)
        elif compression == "bf16":
            total += 2 * n
        else:
            total += 4 * n
    return total


def all_reduces(bucket, compression):
    """PowerSGD sends a bucket with a compressed matrix in two all-reduces
    (P with the exact elements, then Q); everything else in one."""
    if compression == "powersgd" and any(compressed(s) for _, s in bucket):
        return 2
    return 1


def ring_seconds(nbytes, n, hierarchical=False, calls=1):
    """ring_seconds_one for nbytes split over `calls` all-reduces in a row
    (each pays the latency terms)."""
    return sum(ring_seconds_one(nbytes / calls, n, hierarchical)
               for _ in range(calls))


def ring_seconds_one(nbytes, n, hierarchical=False):
    """One all-reduce of nbytes over n GPUs. Flat: one ring over every GPU
    (the issue's formula), at the slowest link's bandwidth. Hierarchical
    (what NCCL does across nodes): reduce-scatter inside each node over
    NVLink, a ring all-reduce of each GPU's 1/8 across the n/8 nodes on its
    own NIC, all-gather inside the node."""
    if n == 1:
        return 0.0
    if n <= GPUS_PER_NODE:
        return 2 * (n - 1) / n * nbytes / (NVLINK_GBPS * 1e9) + NVLINK_LAT * 2 * (n - 1)
    if not hierarchical:
        return 2 * (n - 1) / n * nbytes / (NIC_GBPS * 1e9) + NIC_LAT * 2 * (n - 1)
    g, m = GPUS_PER_NODE, n // GPUS_PER_NODE
    inside = 2 * (g - 1) / g * nbytes / (NVLINK_GBPS * 1e9) + NVLINK_LAT * 2 * (g - 1)
    across = 2 * (m - 1) / m * (nbytes / g) / (NIC_GBPS * 1e9) + NIC_LAT * 2 * (m - 1)
    return inside + across


def step_time(weights, t1, n, bucket_mb, compression, overlap, hierarchical=False):
    bs = buckets(weights, bucket_mb)
    total = sum(count(s) for _, s in weights)
    forward, backward = t1 / 3, 2 * t1 / 3
    done_params = 0
    comm_end = 0.0
    comm_sum = 0.0
    for b in bs:
        done_params += sum(count(s) for _, s in b)
        ready = forward + backward * done_params / total
        c = ring_seconds(wire_bytes(b, compression), n, hierarchical,
                         all_reduces(b, compression))
        comm_sum += c
        comm_end = max(comm_end, ready) + c
    if overlap:
        return max(t1, comm_end), comm_sum, len(bs)
    return t1 + comm_sum, comm_sum, len(bs)


def peak_tflops(repo):
    ini = configparser.ConfigParser()
    ini.read(os.path.join(repo, "runtime", "targets", "gpus.ini"))
    return float(ini["sm_90-h200"]["bf16_tflops"])


KIND_NAMES = {1: "all-reduce-mean", 2: "all-reduce-mean-bf16",
              3: "all-reduce-mean-f16", 4: "all-reduce-powersgd"}


def read_schedule(path):
    """The collective steps of a .kiln artifact, from its `collectives`
    section (kind 12) and, for PowerSGD, its `powersgd` section (kind 15):
    [(kind, element count, wire bytes, all-reduces)] in the order the
    runtime runs them. The layout is docs/artifact-format.md's."""
    blob = open(path, "rb").read()
    if blob[:8] != b"KILN\r\n\x1a\n":
        raise SystemExit(f"{path}: not a Kiln artifact (bad magic)")
    (count_,) = struct.unpack_from("<I", blob, 20)
    (table,) = struct.unpack_from("<Q", blob, 24)
    sections = {}
    for i in range(count_):
        kind, _, offset, size = struct.unpack_from("<IIQQ", blob, table + 32 * i)
        sections[kind] = blob[offset:offset + size]
    if 12 not in sections:
        raise SystemExit(f"{path}: no 'collectives' section (compile with "
                         "kilnc --train --data-parallel)")
    if 16 in sections:
        raise SystemExit(f"{path}: a ZeRO stage 1 artifact (kilnc "
                         "--shard-optimizer: reduce-scatter and all-gather "
                         "steps), which this model does not cover yet")
    body = sections[12]
    (steps,) = struct.unpack_from("<I", body, 0)
    schedule = []
    for i in range(steps):
        kind, _, _, elements, _ = struct.unpack_from("<IIQQI", body, 4 + 28 * i)
        schedule.append([kind, elements, {1: 4, 2: 2, 3: 2, 4: 4}[kind] * elements, 1])
    if 15 in sections:
        body = sections[15]
        rank, _, matrices = struct.unpack_from("<IQI", body, 0)
        for i in range(matrices):
            step, _, rows, cols = struct.unpack_from("<IQQQ", body, 16 + 28 * i)
            # The matrix's rows x cols f32 values become r (rows + cols).
            schedule[step][2] -= 4 * (rows * cols - rank * (rows + cols))
            schedule[step][3] = 2
    return [tuple(s) for s in schedule]


def model_artifact(args):
    schedule = read_schedule(args.artifact)
    if args.step_ms is None:
        raise SystemExit("--artifact needs --step-ms: the single-GPU step "
                         "time of that artifact")
    t1 = float(args.step_ms[0] if isinstance(args.step_ms, list) else args.step_ms) / 1e3
    print(f"{args.artifact}: {len(schedule)} collective steps: " + ", ".join(
        f"{KIND_NAMES.get(k, k)} {e} elements ({b} bytes on the wire, "
        f"{c} all-reduce{'s' if c > 1 else ''})" for k, e, b, c in schedule))
    for n in args.gpus:
        times = [ring_seconds(b, n, args.hierarchical, c) for _, _, b, c in schedule]
        total = sum(times)
        print(f"{n} GPUs ({'hierarchical' if args.hierarchical else 'flat'} "
              f"ring): all-reduce " + " + ".join(f"{t * 1e6:.4f} us" for t in times)
              + f" = {total * 1e6:.4f} us; step without overlap "
              f"{(t1 + total) * 1e3:.4f} ms ({t1 / (t1 + total):.1%})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bucket-mb", type=float, default=25)
    p.add_argument("--step-ms", action="append", default=[],
                   help="MODEL=MS: a measured single-GPU step time (with "
                        "--artifact: MS)")
    p.add_argument("--artifact", help="model this --data-parallel artifact's "
                   "collective steps instead of ResNet-50 and BERT-base")
    p.add_argument("--gpus", default="8,64,512",
                   help="with --artifact: the GPU counts")
    p.add_argument("--hierarchical", action="store_true",
                   help="with --artifact: the hierarchical ring, not the flat one")
    args = p.parse_args()
    if args.artifact:
        args.gpus = [int(g) for g in args.gpus.split(",")]
        args.step_ms = args.step_ms[0] if args.step_ms else None
        return model_artifact(args)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    peak = peak_tflops(repo)
    measured = dict(s.split("=", 1) for s in args.step_ms)
    print(f"bf16 dense peak {peak:g} TFLOP/s (gpus.ini), efficiency {EFFICIENCY:g}; "
          f"buckets of {args.bucket_mb:g} MiB\n")
    print("| model | GPUs | single-GPU step | buckets | all-reduce (fp32, flat ring, serial) "
          "| fp32, no overlap | fp32, overlap (Kiln) | fp32, overlap, hier. "
          "| bf16, overlap, hier. | PowerSGD r=4, overlap, hier. |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, (make, batch, gflop) in MODELS.items():
        weights = make()
        if name in measured:
            t1 = float(measured[name]) / 1e3
            label = "measured"
        else:
            t1 = batch * gflop * 1e9 / (peak * 1e12 * EFFICIENCY)
            label = "roofline est."
        for n in (8, 64, 512):
            cells = []
            comm = None
            nb = 0
            for compression, overlap, hier in (
                    ("none", False, False), ("none", True, False), ("none", True, True),
                    ("bf16", True, True), ("powersgd", True, True)):
                t, c, nb = step_time(weights, t1, n, args.bucket_mb, compression,
                                     overlap, hier)
                if comm is None:
                    comm = c
                cells.append(f"{t * 1e3:.1f} ms ({t1 / t:.0%})")
            params = sum(count(s) for _, s in weights) / 1e6
            print(f"| {name} ({params:.1f} M, batch {batch}/GPU) | {n} | "
                  f"{t1 * 1e3:.1f} ms ({label}) | {nb} | {comm * 1e3:.1f} ms | "
                  + " | ".join(cells) + " |")
    print("\n(percentages: scaling efficiency = single-GPU step / step on N GPUs, "
          "weak scaling)")


if __name__ == "__main__":
    main()
