#!/usr/bin/env python3
"""The Sentinel-2-like per-band stack read onto one 10 m grid, in one run,
locally and over nginx with a first-byte latency (164 ms by default):

  stack     cogfeed.Loader over one COG per band (B02 B03 B04 B08 at 10 m,
            B05 B06 B8A B11 at 20 m, B01 B09 at 60 m: ten bands) read onto
            the 10 m grid of B02 (bilinear; the 20/60 m bands resampled in
            the readers), blocked patches;
  prewarp   cogfeed.Loader over the same pixels pre-warped into one 10-band
            COG at 10 m (cog.read(grid=...) of each band, written with the
            bands' tiling and compression), the same patches;
  warpedvrt the baseline: each patch read from every band file through
            rasterio's WarpedVRT onto the 10 m grid (what TorchGeo's
            RasterDataset does), handles opened once per thread, a pool of
            threads (GDAL releases the GIL).

Reports patches/s, the ratios (targets: stack >= 80% of prewarp, >= 5x
warpedvrt), and the resampling CPU seconds per GB of output (process CPU
of stack minus prewarp over the same number of patches).  Not a test:
wall-clock numbers depend on the machine and its load, which is printed.

    PYTHONPATH=build/python python bench/s2_stack_bench.py --size 2016
"""

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "servers"))

import cogfeed  # noqa: E402
from servers import Nginx  # noqa: E402

BANDS = ["B02", "B03", "B04", "B08", "B05", "B06", "B8A", "B11", "B01", "B09"]


def make_tile(folder, size, tile):
    bin_ = os.environ.get("COGFEED_BIN", "cogfeed")
    from cogfeed.tools import synth_s2
    t = synth_s2.layout(folder)
    if all(os.path.exists(t[b]) for b in BANDS):
        return t
    subprocess.run([bin_, "synth", folder, "--layout", "s2", "--size", str(size), "--tile",
                    str(tile), "--seed", "1", "--quiet"], check=True)
    return synth_s2.layout(folder)


def prewarp(t, path, tile):
    """The ten bands on B02's grid (bilinear, as the stack reads them) in
    one COG, tiled and compressed as the band files are."""
    if os.path.exists(path):
        return path
    import rasterio
    import rasterio.shutil
    with cogfeed.open(t["B02"]) as ref:
        g = ref.grid()
    data = []
    for b in BANDS:
        with cogfeed.open(t[b]) as c:
            data.append(c.read(grid=g, resampling="bilinear")[0])
    arr = np.stack(data)
    prof = dict(driver="GTiff", width=g.width, height=g.height, count=len(BANDS),
                dtype=arr.dtype.name, crs="EPSG:32633", nodata=0,
                transform=rasterio.Affine(*g.transform))
    from rasterio.io import MemoryFile
    with MemoryFile() as mf:
        with mf.open(**prof) as m:
            m.write(arr)
        with mf.open() as m:
            rasterio.shutil.copy(m, path + ".tmp", driver="COG", BLOCKSIZE=tile,
                                 COMPRESS="DEFLATE", PREDICTOR=2, OVERVIEWS="NONE",
                                 INTERLEAVE="BAND")
    os.rename(path + ".tmp", path)
    return path


def cpu():
    t = os.times()
    return t.user + t.system


def run_loader(make, seconds):
    """patches/s of a Loader in steady state (the first batch excluded),
    for at least `seconds`; (patches/s, patches, cpu s, bytes)."""
    with make() as ld:
        it = iter(ld)
        next(it)
        n, nbytes, t0, c0 = 0, 0, time.perf_counter(), cpu()
        while True:
            try:
                b = next(it)
            except StopIteration:
                it = iter(ld)
                continue
            n += len(b["windows"])
            nbytes += b["image"].nbytes
            if time.perf_counter() - t0 >= seconds:
                break
        dt = time.perf_counter() - t0
        return n / dt, n, cpu() - c0, nbytes


def run_warpedvrt(files, grid, windows, threads, env):
    """The baseline over `windows` (x, y) of the 10 m grid."""
    import rasterio
    import rasterio.shutil
    from rasterio.enums import Resampling
    from rasterio.vrt import WarpedVRT
    from rasterio.windows import Window
    local = threading.local()
    P = windows[0][2]

    def handles():
        if not hasattr(local, "h"):
            local.env = rasterio.Env(**env)
            local.env.__enter__()
            local.h = []
            for f in files:
                src = rasterio.open(f)
                local.h.append((src, WarpedVRT(src, crs="EPSG:32633",
                                               transform=rasterio.Affine(*grid.transform),
                                               width=grid.width, height=grid.height,
                                               resampling=Resampling.bilinear)))
        return local.h

    def one(w):
        x, y, p = w
        out = np.empty((len(files), p, p), np.uint16)
        for k, (_, vrt) in enumerate(handles()):
            out[k] = vrt.read(1, window=Window(x, y, p, p))
        return out

    with cf.ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, windows[:threads]))  # open the handles
        t0 = time.perf_counter()
        list(ex.map(one, windows))
        dt = time.perf_counter() - t0
    return len(windows) / dt


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=2016,
                    help="10 m grid side (px, a multiple of 6)")
    ap.add_argument("--tile", type=int, default=256)
    ap.add_argument("--patch", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8, help="per cogfeed configuration")
    ap.add_argument("--latency-ms", type=float, default=164)
    ap.add_argument("--baseline-patches", type=int, default=48)
    ap.add_argument("--baseline-threads", type=int, default=0,
                    help="WarpedVRT threads (0: 2 x cores locally, 32 remote)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "cf_s2_stack"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    root = os.path.join(a.dir, "%d_%d" % (a.size, a.tile))
    t = make_tile(root, a.size, a.tile)
    pw = prewarp(t, os.path.join(root, "prewarped_10band.tif"), a.tile)
    with cogfeed.open(t["B02"]) as c:
        grid = c.grid()
    rng = np.random.default_rng(0)
    n = a.size // a.patch
    windows = [(int(i % n) * a.patch, int(i // n) * a.patch, a.patch)
               for i in rng.permutation(n * n)]
    while len(windows) < a.baseline_patches:
        windows += windows
    windows = windows[:a.baseline_patches]
    rows = []
    load0 = load()
    with Nginx(root, latency_ms=a.latency_ms, workers=2) as srv:
        for where in ("local", "remote"):
            url = (lambda p: p) if where == "local" else \
                (lambda p: srv.url(os.path.relpath(p, root)))
            kw = dict(patch_size=a.patch, batch_size=a.batch, sampler="blocked",
                      epoch_length=max(n * n, 4 * a.batch))

            def stack():
                return cogfeed.Loader(url(t["B02"]), layers=[[url(t[b]) for b in BANDS[1:]]],
                                      resampling="bilinear", **kw)

            def pre():
                return cogfeed.Loader(url(pw), **kw)

            s = run_loader(stack, a.seconds)
            p = run_loader(pre, a.seconds)
            env = dict(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR",
                       CPL_VSIL_CURL_ALLOWED_EXTENSIONS=".tif", GDAL_HTTP_MULTIPLEX="YES",
                       GDAL_HTTP_MERGE_CONSECUTIVE_RANGES="YES", VSI_CACHE="TRUE")
            th = a.baseline_threads or (2 * os.cpu_count() if where == "local" else 32)
            files = [url(t[b]) if where == "local" else "/vsicurl/" + url(t[b])
                     for b in BANDS]
            bw = windows if where == "local" else windows[:max(th, a.baseline_patches // 2)]
            w = run_warpedvrt(files, grid, bw, th, env)
            gb = s[3] / 1e9
            rows.append(dict(where=where, stack=s[0], prewarp=p[0], warpedvrt=w,
                             stack_vs_prewarp=s[0] / p[0], stack_vs_warpedvrt=s[0] / w,
                             resample_cpu_s_per_gb=((s[2] / s[1] - p[2] / p[1]) * s[1] / gb)
                             if gb else 0.0,
                             stack_cpu_s_per_gb=s[2] / gb if gb else 0.0,
                             baseline_threads=th))
    load1 = load()
    if a.json:
        print(json.dumps(dict(rows=rows, load=[load0, load1], args=vars(a))))
        return
    print("S2 per-band stack (10 bands: 4 x 10 m, 4 x 20 m, 2 x 60 m onto 10 m), "
          "%d px grid, %d px tiles, %d px blocked patches, batch %d; nginx latency %g ms; "
          "load average %.1f -> %.1f on %d cores" % (a.size, a.tile, a.patch, a.batch,
                                                   a.latency_ms, load0, load1,
                                                   os.cpu_count()))
    print("| storage | stack patches/s | pre-warped patches/s | WarpedVRT patches/s | "
          "stack / pre-warped | stack / WarpedVRT | resampling CPU s/GB | stack CPU s/GB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %.1f | %.1f | %.1f (%d threads) | %.2f | %.1fx | %.2f | %.2f |" % (
            r["where"], r["stack"], r["prewarp"], r["warpedvrt"], r["baseline_threads"],
            r["stack_vs_prewarp"], r["stack_vs_warpedvrt"], r["resample_cpu_s_per_gb"],
            r["stack_cpu_s_per_gb"]))


if __name__ == "__main__":
    main()
