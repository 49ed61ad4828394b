"""Writes a synthetic version-2 trace of the size calibrate's speed target
names: 32 layers x 8 KV heads, one prompt of 4,096 positions, 32 window
rows and 64 future rows per head, float16 (194 MiB of values), attention
growing sharper with depth (random logits, seed 3). It times calibrate on
future records, which `pyramidkv trace --make` does not write
(docs/calibrate.md).

    /usr/bin/python3 bench/trace/synth_future_trace.py OUT.trace
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyramidkv_trace as pt  # noqa: E402

L, H, P, W, F = 32, 8, 4096, 32, 64


def main(path):
    rng = np.random.default_rng(3)
    with pt.TraceWriter(path, L, H, 1) as w:
        for l in range(L):
            sharp = 1.0 + 6.0 * l / (L - 1)
            for h in range(H):
                n = P + F
                base = rng.standard_normal(n).astype(np.float32) * sharp
                logits = base[np.newaxis, :] + rng.standard_normal(
                    (W + F, n)).astype(np.float32)
                q = np.arange(P - W, n)[:, None]
                logits[np.arange(n)[None, :] > q] = -np.inf
                logits -= logits.max(axis=1, keepdims=True)
                a = np.exp(logits)
                a /= a.sum(axis=1, keepdims=True)
                pre = a[:W, :P] / a[:W, :P].sum(axis=1, keepdims=True)
                w.add_prefill(l, h, pre, qhead=0, dtype="f16")
                w.add_future(l, h, a[W:], qhead=0, dtype="f16")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: synth_future_trace.py OUT.trace")
    main(sys.argv[1])
