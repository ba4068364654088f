"""make bench: a small model's request loop from Python against the same loop from C.

Both loops run one request at a time (host arrays in, host arrays out) on one model in a
private npud: the Python loop calls graph.run; the C loop is graph._c_loop, the same
npu_graph_run_host calls made from C with the GIL released. They alternate in blocks on one
session and one graph, so a busy host slows both alike. The figure is the ratio of the
Python loop's median latency to the C loop's (issue 13's target: <= 1.15).
Usage: bench_loop.py [REQUESTS]
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import npu  # noqa: E402
import onnxbuild  # noqa: E402
from npudtest import Npud  # noqa: E402

B, K, M = 8, 64, 32
BLOCK = 100


def py_block(g, feed, n):
    run = g.run
    clock = time.perf_counter
    lat = []
    for _ in range(n):
        t0 = clock()
        run(feed)
        lat.append(clock() - t0)
    return lat


def p(lat, q):
    lat = sorted(lat)
    return lat[min(len(lat) - 1, int(len(lat) * q))] * 1e6


def main():
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    d = Npud()
    try:
        model, _, _ = onnxbuild.mlp(B, K, M)
        with npu.connect(d.sock) as ctx:
            g = ctx.load(model)
            feed = {"X": (np.arange(B * K, dtype=np.float32) % 7 * 0.25).reshape(B, K)}
            py_block(g, feed, 500)  # warm both paths: slots, caches
            g._c_loop(feed, 500)
            py, c = [], []
            for _ in range(total // BLOCK):
                py += py_block(g, feed, BLOCK)
                c += g._c_loop(feed, BLOCK)
        print("python request loop (MLP [%d,%d]x[%d,%d], one request at a time, %d each, alternating blocks "
              "of %d): C p50 %.1f us p99 %.1f us; Python p50 %.1f us p99 %.1f us; p50 ratio %.3f (target <= 1.15)"
              % (B, K, K, M, len(py), BLOCK, p(c, .5), p(c, .99), p(py, .5), p(py, .99), p(py, .5) / p(c, .5)))
    finally:
        d.stop()


if __name__ == "__main__":
    main()
