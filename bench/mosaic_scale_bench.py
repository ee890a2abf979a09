"""One mosaic of many scenes: cogfeed.load(groupby="all") against
gdalwarp's mosaic of the same files onto the same grid, as the scenes
grow (issue 27: mosaics of many scenes; a step took at most 1,024 scenes
and each patch read every scene, so the time grew with scenes x patches).

    PYTHONPATH=build/python .venv/bin/python bench/mosaic_scale_bench.py \\
        [--counts 256,1024,4096] [--size 64] [--json OUT]

Data (made once in a temporary folder): n scenes of --size px, uint16
DEFLATE COGs (nodata 0, a hole in each), on a square layout with half a
scene of overlap, one in seven at 15 m instead of 10 m (resampled); the
region: all of them in UTM 33N at 10 m, nearest.  Warm: each side runs
once before the timed run (the files in the page cache, GDAL's and
cogfeed's own caches as a process leaves them: each run is a process of
its own).  The arrays are compared (equal: the test suite's
test_load_a_step_of_thousands_of_scenes checks the same with -et 0).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

X0, Y1, RES = 500000.0, 4000000.0, 10.0


def make(root, n, size):
    import cogfeed
    side = int(round(n ** 0.5))
    step = size // 2
    rng = np.random.default_rng(n)
    paths = []
    for j in range(side):
        for i in range(side):
            res = 15.0 if (i + j) % 7 == 0 else RES
            a = rng.integers(1, 4000, (1, size, size), np.uint16)
            a[:, size // 4:size // 2, size // 3:size // 2] = 0
            g = cogfeed.Grid(32633, (res, 0, X0 + i * step * RES, 0, -res,
                                     Y1 - j * step * RES), size, size)
            p = os.path.join(root, "s%d_%d.tif" % (j, i))
            with cogfeed.Writer(p, size, size, 1, "uint16", grid=g, tile_size=min(size, 256),
                                nodata=0, overviews=0) as w:
                w.write(a)
            paths.append(p)
    extent = (side - 1) * step + size
    bounds = (X0, Y1 - extent * RES, X0 + extent * RES, Y1)
    return paths, bounds


RUN_COGFEED = r"""
import sys, time, json, numpy as np, cogfeed
paths, bounds = json.load(open(sys.argv[1])), json.loads(sys.argv[2])
out = sys.argv[3]
g = cogfeed.Grid.from_bounds(32633, bounds, 10.0)
for k in range(2):
    t = time.perf_counter()
    r = cogfeed.load(paths, grid=g, groupby="all")
    dt = time.perf_counter() - t
np.save(out, r.data[0])
print(dt)
"""


def run_gdal(paths, bounds, out):
    lst = out + ".txt"
    with open(lst, "w") as f:
        f.write("\n".join(reversed(paths)))           # gdalwarp: the last on top
    cmd = ["gdalwarp", "-q", "-overwrite", "-r", "near", "-t_srs", "EPSG:32633",
           "-te"] + [repr(b) for b in bounds] + ["-tr", "10", "10", "-dstnodata", "0",
                                                  "-wo", "NUM_THREADS=ALL_CPUS",
                                                  "--optfile", lst, out]
    for k in range(2):
        t = time.perf_counter()
        subprocess.run(cmd, check=True)
        dt = time.perf_counter() - t
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="256,1024,4096")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    import cogfeed
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(c) for c in a.counts.split(",")]:
            d = os.path.join(tmp, str(n))
            os.makedirs(d)
            paths, bounds = make(d, n, a.size)
            cf_out, gd_out = os.path.join(d, "cf.npy"), os.path.join(d, "gdal.tif")
            with open(os.path.join(d, "paths.json"), "w") as f:
                json.dump(paths, f)
            r = subprocess.run([sys.executable, "-c", RUN_COGFEED, f.name,
                                json.dumps(bounds), cf_out], check=True,
                               capture_output=True, text=True)
            t_cf = float(r.stdout.split()[-1])
            t_gd = run_gdal(paths, bounds, gd_out)
            with cogfeed.open(gd_out) as c:
                same = bool(np.array_equal(np.load(cf_out), c.read()))
            mpx = (bounds[2] - bounds[0]) * (bounds[3] - bounds[1]) / RES ** 2 / 1e6
            row = {"scenes": len(paths), "mpixels": round(mpx, 2), "cogfeed_s": round(t_cf, 3),
                   "gdalwarp_s": round(t_gd, 3), "ratio": round(t_gd / t_cf, 2),
                   "cogfeed_us_per_scene": round(t_cf / len(paths) * 1e6, 1),
                   "equal": same}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench": "mosaic_scale", "state": "warm", "size": a.size,
                       "cpus": os.cpu_count(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
