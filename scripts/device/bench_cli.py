"""What the kernel benchmarks (attention_bench.py, wgmma_bench.py) share:
their command line (`prepare --kilnc K --out D [--dry-run]`, then the run
with --dir, --device, --torch, --runs, --warmup, --out; device-check.sh's
other options are ignored) and writing their table and rows to --out."""
import argparse
import json
import os
import sys


def main(prepare, run):
    """Parses sys.argv and calls prepare(args) or run(args)."""
    if len(sys.argv) > 1 and sys.argv[1] == "prepare":
        ap = argparse.ArgumentParser()
        ap.add_argument("--kilnc", required=True)
        ap.add_argument("--out", required=True)
        ap.add_argument("--dry-run", action="store_true")
        prepare(ap.parse_args(sys.argv[2:]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--torch", default="cuda")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default=None)
    # device-check.sh passes its own arguments through: keep what applies.
    args, _ = ap.parse_known_args()
    return run(args)


def publish(out, stem, text, rows):
    """Prints `text`; with `out`, writes it to OUT/STEM.txt and `rows` to
    OUT/STEM.json."""
    print(text)
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, stem + ".txt"), "w") as fh:
            fh.write(text + "\n")
        with open(os.path.join(out, stem + ".json"), "w") as fh:
            json.dump(rows, fh, indent=1)
