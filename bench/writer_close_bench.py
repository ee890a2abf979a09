#!/usr/bin/env python3
"""cogfeed.Writer's two halves timed apart: the tiles (`write`, encoded on
a thread per CPU) and `close()` (the overview pass: level 0 read back,
decoded and every overview made and encoded, on a thread per CPU; then
the file written from the spool).  An N x N float32 image (a gradient
plus noise) in memory, 512 px tiles, overviews auto, best of --reps per
codec; the output in --out.  Warm: the array in memory, the spool in the
page cache.  Run it with two builds on PYTHONPATH in turn to compare.

    PYTHONPATH=build/python .venv/bin/python bench/writer_close_bench.py \\
        [--size 8192] [--codecs deflate,zstd] [--reps 3] [--json OUT]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

import cogfeed


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--codecs", default="deflate,zstd")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "cf_close_bench.tif"))
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args(argv)
    n = a.size
    img = np.random.default_rng(1).random((1, n, n), dtype=np.float32) * np.float32(0.1)
    img += np.linspace(0, 1, n, dtype=np.float32)[None, None, :]
    g = cogfeed.Grid(32633, width=n, height=n, geotransform=(500000, 10, 0, 5000000, 0, -10))
    res = {"size": n, "cpus": len(os.sched_getaffinity(0)), "codecs": {}}
    for comp in a.codecs.split(","):
        best = [float("inf")] * 3
        for _ in range(a.reps):
            t = time.perf_counter()
            w = cogfeed.Writer(a.out, n, n, 1, np.float32, grid=g, compression=comp)
            w.write(img)
            t1 = time.perf_counter()
            w.close()
            t2 = time.perf_counter()
            best = [min(best[0], t1 - t), min(best[1], t2 - t1), min(best[2], t2 - t)]
        res["codecs"][comp] = {"tiles_s": best[0], "close_s": best[1], "total_s": best[2],
                               "bytes": os.path.getsize(a.out)}
        print("%-8s best of %d: tiles %.2f s, close %.2f s, total %.2f s (%.0f MB)"
              % (comp, a.reps, best[0], best[1], best[2], os.path.getsize(a.out) / 1e6))
    os.unlink(a.out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
