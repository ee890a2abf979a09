"""Reading onto a grid: cogfeed's cog.read(grid=...) against GDAL's warper
onto the very same patch grids, on the Sentinel-2-like tile of `cogfeed
synth --layout s2`.

Each workload reads --patches patches of --patch pixels of the 10 m grid
(random, fixed seed) from one input:

  B05 20 m -> 10 m  bilinear     B01 60 m -> 10 m  cubic
  SCL 20 m -> 10 m  nearest      labels 15 m (shifted) -> 10 m  mode
  B02 10 m -> 60 m  average (an overview is decoded)
  DEM WGS 84 -> UTM 10 m  bilinear (reprojection)

and times, one thread each, in alternating rounds (best of --repeat):

  cogfeed         cog.read(grid=patch, resampling=...)
  GDAL warp       GDAL's warper (rasterio.warp.reproject: GDAL 3.10, the
                  one rasterio's wheel carries) from the opened dataset
                  onto the same bounds and resolution, the same kernel,
                  error threshold 0.125 (gdalwarp's), one thread, from the
                  overview level Debian's gdalwarp picks for that grid
                  (asked once per workload), GDAL's block cache off so
                  both decode every tile
  cogfeed decode  cog.read(window=...) of the source window the patch
                  needs: decoding alone, so that read_grid - decode is the
                  resampling's share

and counts the pixels where cogfeed and that GDAL differ (the tests hold
cogfeed to Debian's gdalwarp, tests/python/test_geo_warp.py).  Prints
patches/s, the ratio cogfeed / GDAL and the resampling's share of
cogfeed's time.  A benchmark, not a test (after ./run.sh build):

    PYTHONPATH=build/python .venv/bin/python bench/warp_bench.py [--json]
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import rasterio
from rasterio.enums import Resampling
from rasterio.transform import Affine
from rasterio.warp import reproject

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
from geo_fixtures import gdalwarp_overview  # noqa: E402

import cogfeed  # noqa: E402
from cogfeed.tools import synth_s2

WORKLOADS = [
    ("B05 20m->10m bilinear", "B05", "bilinear", 10, None),
    ("B01 60m->10m cubic", "B01", "cubic", 10, None),
    ("SCL 20m->10m nearest", "SCL", "nearest", 10, None),
    ("labels 15m->10m mode", "LABELS", "mode", 10, None),
    ("B02 10m->60m average", "B02", "average", 60, None),
    ("DEM 4326->UTM bilinear", "DEM", "bilinear", 10, None),
]


def patches(rng, size, patch, n, res):
    """n patch grids of `patch` pixels at `res` m inside the tile."""
    span = size * 10.0
    step = patch * res
    out = []
    for _ in range(n):
        x0 = synth_s2.X0 + rng.uniform(0, span - step)
        y1 = synth_s2.Y0 - rng.uniform(0, span - step)
        x0 = synth_s2.X0 + round((x0 - synth_s2.X0) / 10) * 10   # on the 10 m grid
        y1 = synth_s2.Y0 - round((synth_s2.Y0 - y1) / 10) * 10
        out.append(cogfeed.Grid.from_bounds("EPSG:32633", (x0, y1 - step, x0 + step, y1), res))
    return out


def run_cogfeed(path, grids, rs):
    with cogfeed.open(path) as cog:
        t = time.perf_counter()
        outs = [cog.read(grid=g, resampling=rs) for g in grids]
        return time.perf_counter() - t, outs


def run_decode(path, grids, rs):
    """The source windows cogfeed decodes for the grids (same level)."""
    with cogfeed.open(path) as cog:
        wins = []
        for g in grids:
            level = cogfeed._cogfeed.grid_level(cog, g, rs)
            sub = cog.grid(level)
            inv_x0 = (g.bounds[0] - sub.geotransform[0]) / sub.geotransform[1]
            inv_y0 = (g.bounds[3] - sub.geotransform[3]) / sub.geotransform[5]
            w = int(np.ceil((g.bounds[2] - g.bounds[0]) / sub.geotransform[1])) + 4
            h = int(np.ceil((g.bounds[3] - g.bounds[1]) / -sub.geotransform[5])) + 4
            wins.append((level, (int(inv_x0) - 2, int(inv_y0) - 2, max(w, 1), max(h, 1))))
        if cog.crs != 32633:
            return None
        t = time.perf_counter()
        for level, win in wins:
            cog.read(window=win, level=level)
        return time.perf_counter() - t


def run_gdal(path, grids, rs, level):
    """GDAL's warper onto each grid from overview `level` (0: full)."""
    kw = {"overview_level": level - 1} if level else {}
    with rasterio.Env(GDAL_CACHEMAX=0), rasterio.open(path, **kw) as ds:
        bands = list(range(1, ds.count + 1))
        outs = []
        t = time.perf_counter()
        for g in grids:
            o = np.zeros((ds.count, g.height, g.width), ds.dtypes[0])
            reproject(rasterio.band(ds, bands), o, dst_crs="EPSG:32633",
                      dst_transform=Affine.from_gdal(*g.geotransform),
                      resampling=Resampling[rs], num_threads=1)
            outs.append(o)
        return time.perf_counter() - t, outs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="folder for (or with) the s2 tile; default: a temp folder")
    p.add_argument("--size", type=int, default=1098)
    p.add_argument("--patch", type=int, default=256)
    p.add_argument("--patches", type=int, default=48)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a, _ = p.parse_known_args(argv)
    tmp = None
    root = a.data
    if not root:
        tmp = tempfile.TemporaryDirectory(prefix="cogfeed-warp-bench-")
        root = tmp.name
    paths = synth_s2.layout(root)
    if not os.path.exists(paths["LABELS"]):
        synth_s2.synth_s2(root, a.size, 0, 512, progress=False)
    with cogfeed.open(paths["B02"]) as c:
        size = c.width
    rng = np.random.default_rng(7)
    rows = []
    for name, key, rs, res, _ in WORKLOADS:
        n = a.patch if res == 10 else max(8, a.patch * 10 // res)
        grids = patches(rng, size, n, a.patches, res)
        best = {"cogfeed": 1e9, "gdal": 1e9, "decode": 1e9}
        level = gdalwarp_overview(paths[key], grids[0], rs)
        differ = 0
        for _ in range(a.repeat):
            tc, oc = run_cogfeed(paths[key], grids, rs)
            tg, og = run_gdal(paths[key], grids, rs, level)
            td = run_decode(paths[key], grids, rs)
            best["cogfeed"] = min(best["cogfeed"], tc)
            best["gdal"] = min(best["gdal"], tg)
            if td is not None:
                best["decode"] = min(best["decode"], td)
            differ = sum(int((x[0] != y.reshape(x[0].shape)).sum()) for x, y in zip(oc, og))
        npx = a.patches * n * n
        row = {
            "workload": name, "patch": n, "patches": a.patches,
            "cogfeed_patches_s": a.patches / best["cogfeed"],
            "gdal_patches_s": a.patches / best["gdal"],
            "ratio": best["gdal"] / best["cogfeed"],
            "cogfeed_mpx_s": npx / best["cogfeed"] / 1e6,
            "resample_share": (None if best["decode"] >= 1e9 else
                               max(0.0, 1 - best["decode"] / best["cogfeed"])),
            "pixels_differing": differ,
        }
        rows.append(row)
    gv = rasterio.__gdal_version__
    if a.json:
        print(json.dumps({"gdal": gv, "rows": rows}, indent=1))
        return 0
    print("warp_bench: %d patches per workload, one thread, best of %d; GDAL %s"
          % (a.patches, a.repeat, gv))
    print("%-26s %6s %12s %12s %7s %10s %9s" % ("workload", "patch", "cogfeed p/s", "GDAL p/s",
                                                "ratio", "resample", "differ"))
    for r in rows:
        share = "-" if r["resample_share"] is None else "%.0f%%" % (100 * r["resample_share"])
        print("%-26s %6d %12.1f %12.1f %6.2fx %10s %9d" % (
            r["workload"], r["patch"], r["cogfeed_patches_s"], r["gdal_patches_s"], r["ratio"],
            share, r["pixels_differing"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
