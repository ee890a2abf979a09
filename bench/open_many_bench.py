"""Opening many remote files: cogfeed.open one after the other against
cogfeed.open_many, side by side in one run on the same files (issue 28:
27 files at 164 ms took 4.5 s one by one; async-tiff's gathered opens
0.18 s).

The project's nginx adds --latency-ms before the first byte of every
response.  Each round opens the N files (distinct names, so nothing is
shared but the connection pool) with a fresh cogfeed.IO, so every figure
is cold (no header cached, new connections):

  one-by-one     [cogfeed.open(u, io=io) for u in urls]
  open_many      cogfeed.open_many(urls, io=io), the default max_inflight
                 (64: the files beyond it wait for the first answers)
  open_many-N    the same with IO(max_inflight=N): all N in flight
  open_many+hc   the same with header_cache_dir filled by a first pass
                 (a new IO: the disk half answers, no request)

  PYTHONPATH=BUILD/python .venv/bin/python bench/open_many_bench.py \\
      [--files 100] [--latency-ms 164] [--rounds 1] [--json OUT]

Files: one 1024 x 1024 uint16 COG of 256-pixel DEFLATE tiles with its
overviews (written once with rasterio, about 20 KiB of header), copied
N times.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import warnings

import cogfeed
from cogfeed.tools import servers as srvmod


def make_files(root, n):
    warnings.simplefilter("ignore")  # rasterio: not georeferenced
    import rasterio
    from rasterio.io import MemoryFile
    from rasterio.shutil import copy
    a = (np.arange(1024 * 1024, dtype=np.uint32) % 4093).astype(np.uint16)
    prof = dict(driver="GTiff", width=1024, height=1024, count=1,
                dtype="uint16")
    src = os.path.join(root, "src.tif")
    with rasterio.Env(), MemoryFile() as mf:
        with mf.open(**prof) as m:
            m.write(a.reshape(1, 1024, 1024))
        with mf.open() as m:
            copy(m, src, driver="COG", BLOCKSIZE=256, COMPRESS="DEFLATE")
    names = []
    for i in range(n):
        names.append("f%04d.tif" % i)
        shutil.copy(src, os.path.join(root, names[-1]))
    return names


def one_by_one(urls, io):
    return [cogfeed.open(u, io=io) for u in urls]


def run(how, urls, hc, max_inflight=64):
    io = cogfeed.IO(header_cache_dir=hc, max_inflight=max_inflight)
    t = time.perf_counter()
    cogs = (cogfeed.open_many(urls, io=io) if how != "one-by-one"
            else one_by_one(urls, io))
    s = time.perf_counter() - t
    st = io.stats()
    assert len(cogs) == len(urls)
    for c in cogs:
        c.close()
    return {"how": how, "seconds": s, "requests": st["requests"],
            "header_cache_hits": st["header_cache_hits"],
            "peak_inflight": st["peak_inflight"]}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=100)
    p.add_argument("--latency-ms", type=float, default=164)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--json")
    a = p.parse_args(argv)
    root = tempfile.mkdtemp(prefix="cf-open-many-")
    try:
        names = make_files(root, a.files)
        results = []
        with srvmod.Nginx(root, latency_ms=a.latency_ms) as srv:
            urls = [srv.url(n) for n in names]
            print("%d files, nginx at %g ms first-byte latency; cold: a new "
                  "IO each run" % (len(urls), a.latency_ms))
            print("A new IO's first request to a host goes alone (libcurl's "
                  "PIPEWAIT): one round trip more when cold.")
            print("%-14s %9s %9s %8s %6s %6s" % (
                "", "seconds", "RTTs", "requests", "hits", "peak"))
            for rnd in range(a.rounds):
                hc = os.path.join(root, "hc%d" % rnd)
                for how in ("one-by-one", "open_many", "open_many-N",
                            "fill-cache", "open_many+hc"):
                    r = run(how, urls, hc if how in ("fill-cache",
                                                     "open_many+hc") else None,
                            len(urls) if how == "open_many-N" else 64)
                    r["round"] = rnd + 1
                    if how == "fill-cache":
                        continue  # the first pass with the cache: not shown
                    results.append(r)
                    print("%-14s %9.3f %9.1f %8d %6d %6d" % (
                        how, r["seconds"],
                        r["seconds"] * 1000 / a.latency_ms if a.latency_ms
                        else 0, r["requests"], r["header_cache_hits"],
                        r["peak_inflight"]))
                    sys.stdout.flush()
        one = [r["seconds"] for r in results if r["how"] == "one-by-one"]
        many = [r["seconds"] for r in results if r["how"] == "open_many"]
        print("\nopen_many is %.0fx faster than one by one (%.2f s vs %.2f s)"
              % ((sum(one) / len(one)) / (sum(many) / len(many)),
                 sum(many) / len(many), sum(one) / len(one)))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"latency_ms": a.latency_ms, "files": a.files,
                           "runs": results}, f, indent=1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
