#!/usr/bin/env python3
"""Draws a kiln-train loss history (CSV) as a PNG.

    scripts/plot-loss.py DIR/loss.csv loss.png [--width 800 --height 400]

The CSV is what kiln-train --history writes: `step,epoch,loss,metric,value`,
one row per train step (loss) and one per epoch with a validation metric.
The plot has the per-step loss (blue, log scale when it spans more than a
decade), its per-epoch mean (black) and the validation metric on its own
axis (red dots). No plotting library is needed: the PNG is rasterised and
encoded here with zlib (the project pins no matplotlib); the axis ranges are
printed, since the image has no text.
"""
import argparse
import csv
import math
import struct
import sys
import zlib


def read_history(path):
    steps, losses, epochs, metrics = [], [], {}, []
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        if rows.fieldnames is None or "loss" not in rows.fieldnames:
            raise SystemExit(f"plot-loss: {path}: not a kiln-train history "
                             "(no 'loss' column)")
        for row in rows:
            if row["loss"]:
                steps.append(int(row["step"]))
                losses.append(float(row["loss"]))
                epochs.setdefault(int(row["epoch"]), []).append(
                    (int(row["step"]), float(row["loss"])))
            elif row.get("value"):
                metrics.append((int(row["epoch"]), row["metric"],
                                float(row["value"])))
    if not steps:
        raise SystemExit(f"plot-loss: {path}: no loss rows")
    return steps, losses, epochs, metrics


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c, r=0):
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                xx, yy = int(x) + dx, int(y) + dy
                if 0 <= xx < self.w and 0 <= yy < self.h:
                    i = (yy * self.w + xx) * 3
                    self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c):
        n = int(max(abs(x1 - x0), abs(y1 - y0), 1))
        for k in range(n + 1):
            t = k / n
            self.dot(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, c)

    def png(self):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3])
                       for y in range(self.h))

        def chunk(kind, data):
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(
                ">I", zlib.crc32(body) & 0xFFFFFFFF)
        return (b"\x89PNG\r\n\x1a\n" +
                chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("png")
    p.add_argument("--width", type=int, default=800)
    p.add_argument("--height", type=int, default=400)
    a = p.parse_args()
    steps, losses, epochs, metrics = read_history(a.csv)
    positive = all(l > 0 for l in losses)
    log = positive and max(losses) / min(losses) > 10
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    lo, hi = min(map(f, losses)), max(map(f, losses))
    hi = hi if hi > lo else lo + 1
    s0, s1 = min(steps), max(max(steps), min(steps) + 1)
    m, W, H = 40, a.width, a.height
    X = lambda s: m + (s - s0) / (s1 - s0) * (W - 2 * m)
    Y = lambda v: H - m - (f(v) - lo) / (hi - lo) * (H - 2 * m)
    c = Canvas(W, H)
    c.line(m, H - m, W - m, H - m, (0, 0, 0))
    c.line(m, m, m, H - m, (0, 0, 0))
    for (sa, la), (sb, lb) in zip(zip(steps, losses), zip(steps[1:], losses[1:])):
        c.line(X(sa), Y(la), X(sb), Y(lb), (40, 90, 200))
    means = [(max(s for s, _ in rows), sum(l for _, l in rows) / len(rows))
             for _, rows in sorted(epochs.items())]
    for (sa, la), (sb, lb) in zip(means, means[1:]):
        c.line(X(sa), Y(la), X(sb), Y(lb), (0, 0, 0))
    if metrics:
        v0 = min(v for _, _, v in metrics)
        v1 = max(max(v for _, _, v in metrics), v0 + 1e-12)
        last_step = {e: max(s for s, _ in rows) for e, rows in epochs.items()}
        for e, _, v in metrics:
            c.dot(X(last_step.get(e, s1)), H - m - (v - v0) / (v1 - v0) * (H - 2 * m),
                  (200, 30, 30), r=3)
    with open(a.png, "wb") as out:
        out.write(c.png())
    print(f"{a.png}: steps {s0}-{max(steps)}, loss {min(losses):.4g}-{max(losses):.4g}"
          f"{' (log scale)' if log else ''}"
          + (f", {metrics[-1][1]} {min(v for _, _, v in metrics):.4g}-"
             f"{max(v for _, _, v in metrics):.4g}" if metrics else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
