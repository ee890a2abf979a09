#!/usr/bin/python3
"""Remote vs local vs GDAL /vsicurl/: many random windows over a set of COGs.

Side by side in one run, on the same files and the same windows:
  * cogfeed reading from local disk (page cache warm),
  * cogfeed reading the same files through nginx with a first-byte latency
    (164 ms by default, what the paper measured to Azure Blob),
  * GDAL's /vsicurl/ through the same nginx, with the best settings found
    (HTTP/2 multiplexing where offered, merged consecutive ranges, VSI cache,
    one dataset per thread, several thread counts tried).

Prints MB/s of decoded pixels delivered, windows/s, requests per window and
the ratios; --json for machines.  Not a test: it measures.

    PYTHONPATH=build/python /usr/bin/python3 bench/remote_bench.py
"""
import argparse
import concurrent.futures as cf
import json
import os
import random
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "servers"))

import cogfeed  # noqa: E402
from servers import Nginx  # noqa: E402


def make_files(folder, n, size, tile, compress, bands=4):
    """Smooth, noisy uint16 scenes written as COGs by GDAL (cached)."""
    from osgeo import gdal
    gdal.UseExceptions()
    os.makedirs(folder, exist_ok=True)
    paths = []
    rng = np.random.default_rng(7)
    for i in range(n):
        p = os.path.join(folder, "scene_%02d_%s_%d.tif" % (i, compress.lower(), tile))
        paths.append(p)
        if os.path.exists(p):
            continue
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
        data = np.empty((bands, size, size), np.uint16)
        for b in range(bands):
            f = rng.uniform(2, 12, 4)
            base = (np.sin(xx * f[0] + b) + np.cos(yy * f[1]) + np.sin((xx + yy) * f[2])) * 800 + 2000
            data[b] = np.clip(base + rng.normal(0, 60, (size, size)), 0, 65535).astype(np.uint16)
        mem = gdal.GetDriverByName("MEM").Create("", size, size, bands, gdal.GDT_UInt16)
        for b in range(bands):
            mem.GetRasterBand(b + 1).WriteArray(data[b])
        opts = ["COMPRESS=%s" % compress, "BLOCKSIZE=%d" % tile, "OVERVIEWS=NONE"]
        if compress in ("ZSTD", "DEFLATE", "LZW"):
            opts.append("PREDICTOR=2")
        gdal.Translate(p + ".tmp", mem, format="COG", creationOptions=opts)
        os.rename(p + ".tmp", p)
    return paths


def windows_for(paths, size, count, win, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        i = rng.randrange(len(paths))
        out.append((i, rng.randrange(0, size - win + 1), rng.randrange(0, size - win + 1)))
    return out


def run_cogfeed(urls, windows, win, threads, io):
    cogs = [cogfeed.open(u, io=io) for u in urls]
    before = sum(c.requests for c in cogs)

    def one(w):
        i, x, y = w
        return cogs[i].read(window=(x, y, win, win)).nbytes

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(threads) as ex:
        nbytes = sum(ex.map(one, windows))
    dt = time.perf_counter() - t0
    reqs = sum(c.requests for c in cogs) - before
    return {"seconds": dt, "bytes": nbytes, "requests": reqs}


def run_gdal(urls, windows, win, threads):
    from osgeo import gdal
    gdal.UseExceptions()
    for k, v in {
        "GDAL_HTTP_MULTIPLEX": "YES",
        "GDAL_HTTP_VERSION": "2",
        "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
        "GDAL_NUM_THREADS": "1",
        "VSI_CACHE": "TRUE",
        "VSI_CACHE_SIZE": str(256 << 20),
        "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",
        "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif",
        "GDAL_HTTP_MAX_RETRY": "3",
    }.items():
        gdal.SetConfigOption(k, v)
    import threading
    local = threading.local()

    def one(w):
        i, x, y = w
        ds = getattr(local, "ds", None)
        if ds is None:
            ds = local.ds = {}
        if i not in ds:
            ds[i] = gdal.Open("/vsicurl/" + urls[i])
        return ds[i].ReadAsArray(x, y, win, win).nbytes

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(threads) as ex:
        nbytes = sum(ex.map(one, windows))
    return {"seconds": time.perf_counter() - t0, "bytes": nbytes}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.path.join(HERE, "..", "build", "bench-data", "remote"))
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--compress", default="ZSTD")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--windows", type=int, default=400)
    ap.add_argument("--latency-ms", type=float, default=164.0)
    ap.add_argument("--threads", type=int, default=96, help="cogfeed reader threads")
    ap.add_argument("--gdal-threads", default="16,64", help="GDAL thread counts to try")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    paths = make_files(a.data, a.files, a.size, a.tile, a.compress)
    wins = windows_for(paths, a.size, a.windows, a.window, a.seed)
    res = {"config": vars(a).copy()}
    # Local: warm the page cache with one pass, then measure.
    run_cogfeed(paths, wins[: len(wins) // 4], a.window, 2, None)
    res["cogfeed_local"] = run_cogfeed(paths, wins, a.window, max(2, os.cpu_count() or 2), None)
    with Nginx(a.data, latency_ms=a.latency_ms) as srv:
        urls = [srv.url(os.path.basename(p)) for p in paths]
        io = cogfeed.IO(max_inflight=min(1024, a.threads * 4))
        t0 = time.perf_counter()
        opened = [cogfeed.open(u, io=io) for u in urls]
        res["open_seconds_per_file"] = (time.perf_counter() - t0) / len(urls)
        res["open_requests_per_file"] = sum(c.header_requests for c in opened) / len(opened)
        del opened
        res["cogfeed_remote"] = run_cogfeed(urls, wins, a.window, a.threads, io)
        best = None
        for t in [int(x) for x in a.gdal_threads.split(",") if x]:
            r = run_gdal(urls, wins, a.window, t)
            r["threads"] = t
            res.setdefault("gdal_vsicurl", []).append(r)
            if best is None or r["seconds"] < best["seconds"]:
                best = r
        res["gdal_best"] = best
    # Bit-exact spot check between local and remote reads.
    with Nginx(a.data) as srv:
        i, x, y = wins[0]
        la = cogfeed.open(paths[i]).read(window=(x, y, a.window, a.window))
        ra = cogfeed.open(srv.url(os.path.basename(paths[i]))).read(window=(x, y, a.window, a.window))
        res["remote_equals_local"] = bool(np.array_equal(la, ra))

    def mbps(r):
        return r["bytes"] / r["seconds"] / 1e6

    for k in ("cogfeed_local", "cogfeed_remote", "gdal_best"):
        res[k]["MBps"] = mbps(res[k])
        res[k]["windows_per_s"] = len(wins) / res[k]["seconds"]
    res["cogfeed_remote"]["requests_per_window"] = res["cogfeed_remote"]["requests"] / len(wins)
    res["remote_vs_local"] = res["cogfeed_remote"]["MBps"] / res["cogfeed_local"]["MBps"]
    res["remote_vs_gdal_best"] = res["cogfeed_remote"]["MBps"] / res["gdal_best"]["MBps"]
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print("%d windows of %d px over %d %s COGs (%d px, %d px tiles), nginx latency %.0f ms"
          % (len(wins), a.window, a.files, a.compress, a.size, a.tile, a.latency_ms))
    print("%-28s %10s %12s" % ("reader", "MB/s", "windows/s"))
    for k, label in (("cogfeed_local", "cogfeed local"),
                     ("cogfeed_remote", "cogfeed remote (%d threads)" % a.threads),
                     ("gdal_best", "GDAL /vsicurl/ best (%d thr)" % res["gdal_best"]["threads"])):
        print("%-28s %10.1f %12.1f" % (label, res[k]["MBps"], res[k]["windows_per_s"]))
    for r in res["gdal_vsicurl"]:
        print("  GDAL %3d threads: %.1f MB/s" % (r["threads"], mbps(r)))
    print("remote / local      = %.2fx" % res["remote_vs_local"])
    print("remote / GDAL best  = %.2fx" % res["remote_vs_gdal_best"])
    print("requests per window = %.2f (open: %.1f request per file, %.0f ms)"
          % (res["cogfeed_remote"]["requests_per_window"], res["open_requests_per_file"],
             res["open_seconds_per_file"] * 1000))
    print("remote bytes identical to local: %s" % res["remote_equals_local"])


if __name__ == "__main__":
    main()
