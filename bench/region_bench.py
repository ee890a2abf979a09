"""A region into an array: cogfeed.load against odc-stac's load, side by
side in one run, on the same STAC items and the same target grid (issue
27: at least 2x odc-stac's Mpixel/s).

The peer lives in its own environment (odc-stac pulls in dask, xarray,
pystac and its own rasterio):

    python3 -m venv bench/.venv-odc
    bench/.venv-odc/bin/pip install -r bench/odc-requirements.txt
    PYTHONPATH=build/python bench/.venv-odc/bin/python bench/region_bench.py \\
        [--dates 4] [--size 2048] [--latency-ms 164] [--json OUT]

(cogfeed's extension is built for the same Python and numpy, so both run
in that environment.)  Data (made once per run in a temporary folder):
per date, three scenes of --size px at 10 m with two single-band uint16
DEFLATE COGs each (assets red and nir, 512 px tiles, overviews): two in
UTM 33N overlapping each other and one in UTM 32N overlapping both,
items with the projection extension (so that neither reader needs a
header to plan).  The region: the union of the three footprints in UTM
33N at 10 m; groupby solar day (one mosaic per date), nearest.

Each configuration runs in its own process, twice: the first call is
cold (nothing of the files in the reader's caches; the page cache warm
locally, as after the data was written), the second warm; the figure is
output pixels (time x band x y x x) per second and the peak RSS of the
process.  Locally and through the project's nginx with --latency-ms
before the first byte of every response.  odc-stac runs with its thread
pool at 1, 4 and 16 threads (its default is 1; the best is compared).
The arrays are compared (same grid, nearest): both read the same pixels,
but for the reprojected scene, where each approximates the reprojection
(GDAL's -et 0.125) and a few pixels take the neighbouring source pixel.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------ data

def make_data(root, dates, size):
    import rasterio
    from rasterio.warp import transform, transform_bounds
    rng = np.random.default_rng(1)
    x33, y = 252000.0, 4000000.0          # about 12.3 E, 36.1 N: near the 32/33 seam
    # C's corner in UTM 32N: the 33N point that overlaps A and B.
    cx, cy = transform("EPSG:32633", "EPSG:32632", [x33 + size * 5.0], [y - size * 4.0])
    places = [("A", 32633, x33, y), ("B", 32633, x33 + size * 6.0, y - size * 2.0),
              ("C", 32632, round(cx[0] / 10) * 10, round(cy[0] / 10) * 10)]
    yy, xx = np.mgrid[0:size, 0:size]
    items = []
    for d in range(dates):
        when = "2024-07-%02dT10:%02d:00Z" % (1 + 5 * d, 10 + d)
        for name, epsg, x0, y0 in places:
            gt = (x0, 10.0, 0.0, y0, 0.0, -10.0)
            assets = {}
            for band in ("red", "nir"):
                a = (1000 + 500 * np.sin(xx / 97.0 + d) * np.cos(yy / 83.0)
                     + rng.integers(0, 200, (size, size))).astype(np.uint16)
                a[:size // 8, :] = 0                     # a nodata edge
                path = os.path.join(root, "%s_%d_%s.tif" % (name, d, band))
                prof = dict(driver="COG", width=size, height=size, count=1, dtype="uint16",
                            crs="EPSG:%d" % epsg, nodata=0, compress="DEFLATE",
                            blocksize=512, transform=rasterio.Affine.from_gdal(*gt))
                with rasterio.open(path, "w", **prof) as f:
                    f.write(a, 1)
                assets[band] = {"href": path, "type": "image/tiff; application=geotiff",
                                "eo:bands": [{"name": band, "common_name": band}],
                                "raster:bands": [{"data_type": "uint16", "nodata": 0}],
                                "proj:epsg": epsg, "proj:shape": [size, size],
                                "proj:transform": [10.0, 0.0, x0, 0.0, -10.0, y0]}
            b = transform_bounds("EPSG:%d" % epsg, "EPSG:4326", x0, y0 - size * 10.0,
                                 x0 + size * 10.0, y0)
            items.append({
                "type": "Feature", "stac_version": "1.0.0",
                "stac_extensions": [
                    "https://stac-extensions.github.io/projection/v1.1.0/schema.json",
                    "https://stac-extensions.github.io/eo/v1.1.0/schema.json",
                    "https://stac-extensions.github.io/raster/v1.1.0/schema.json"],
                "id": "%s_%d" % (name, d), "bbox": list(b),
                "geometry": {"type": "Polygon", "coordinates": [[
                    [b[0], b[1]], [b[2], b[1]], [b[2], b[3]], [b[0], b[3]], [b[0], b[1]]]]},
                "properties": {"datetime": when, "proj:epsg": epsg}, "links": [],
                "assets": assets})
    # The region: the union of the footprints in UTM 33N.
    xs, ys = [], []
    for _, epsg, x0, y0 in places:
        bb = transform_bounds("EPSG:%d" % epsg, "EPSG:32633", x0, y0 - size * 10.0,
                              x0 + size * 10.0, y0)
        xs += [bb[0], bb[2]]
        ys += [bb[1], bb[3]]
    region = [float(np.floor(min(xs) / 10) * 10), float(np.floor(min(ys) / 10) * 10),
              float(np.ceil(max(xs) / 10) * 10), float(np.ceil(max(ys) / 10) * 10)]
    return items, region


# ------------------------------------------------------------- one run

def run_one(args):
    """In a child process: load twice (cold, warm), print JSON."""
    with open(args.items) as f:
        items = json.load(f)
    region = json.loads(args.region)
    if args.base:
        for it in items:
            for a in it["assets"].values():
                a["href"] = args.base + "/" + os.path.basename(a["href"])
    out = []
    for rnd in ("cold", "warm"):
        t = time.perf_counter()
        if args.tool == "cogfeed":
            import cogfeed
            from cogfeed import stac
            g = cogfeed.Grid.from_bounds(32633, region, 10.0)
            r = cogfeed.load(stac.items(items), ["red", "nir"], grid=g, groupby="solar_day")
            data = r.data
        else:
            import pystac
            from odc.geo.geobox import GeoBox
            from odc.stac import load
            gb = GeoBox.from_bbox(region, crs="EPSG:32633", resolution=10)
            ds = load([pystac.Item.from_dict(i) for i in items], bands=["red", "nir"],
                      geobox=gb, groupby="solar_day", resampling="nearest",
                      pool=args.pool or None)
            data = np.stack([ds["red"].values, ds["nir"].values], axis=1)
        s = time.perf_counter() - t
        out.append({"round": rnd, "seconds": s, "mpix_s": data.size / s / 1e6,
                    "shape": list(data.shape),
                    "checksum": int(data.astype(np.uint64).sum())})
    if args.save:
        np.save(args.save, data)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"runs": out, "peak_rss": rss}))


def child(tool, items_path, region, base, pool, save):
    cmd = [sys.executable, __file__, "--child", tool, "--items", items_path, "--region",
           json.dumps(region), "--pool", str(pool)]
    if base:
        cmd += ["--base", base]
    if save:
        cmd += ["--save", save]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
    if p.returncode:
        raise RuntimeError("%s failed:\n%s" % (tool, p.stderr[-3000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dates", type=int, default=4)
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--latency-ms", type=float, default=164)
    p.add_argument("--json")
    p.add_argument("--child")
    p.add_argument("--items")
    p.add_argument("--region")
    p.add_argument("--base")
    p.add_argument("--pool", type=int, default=0)
    p.add_argument("--save")
    a = p.parse_args(argv)
    if a.child:
        a.tool = a.child
        run_one(a)
        return 0
    from cogfeed.tools import servers as srvmod
    root = tempfile.mkdtemp(prefix="cf-region-")
    results = []
    try:
        items, region = make_data(root, a.dates, a.size)
        ip = os.path.join(root, "items.json")
        with open(ip, "w") as f:
            json.dump(items, f)
        data_mb = sum(os.path.getsize(os.path.join(root, n)) for n in os.listdir(root)
                      if n.endswith(".tif")) / 2**20
        print("%d items (%d dates x 3 scenes x 2 assets of %d px), %.0f MB of COGs; region "
              "%s in UTM 33N at 10 m" % (len(items), a.dates, a.size, data_mb, region))
        configs = [("cogfeed", 0)] + [("odc-stac", n) for n in (1, 4, 16)]
        with srvmod.Nginx(root, latency_ms=a.latency_ms) as srv:
            for where, base in (("local", None), ("nginx %g ms" % a.latency_ms, srv.base)):
                sums = {}
                for tool, pool in configs:
                    save = os.path.join(root, "%s.npy" % tool) if base is None else None
                    r = child(tool, ip, region, base, pool, save)
                    name = tool + (" pool=%d" % pool if pool else "")
                    for run in r["runs"]:
                        results.append(dict(run, tool=name, where=where,
                                            peak_rss=r["peak_rss"]))
                        print("%-18s %-14s %-5s %7.2f s %8.1f Mpix/s  RSS %5.0f MB" % (
                            name, where, run["round"], run["seconds"], run["mpix_s"],
                            r["peak_rss"] / 2**20))
                        sys.stdout.flush()
                    sums[name] = r["runs"][0]["checksum"]
                if base is None:
                    x = np.load(os.path.join(root, "cogfeed.npy"))
                    y = np.load(os.path.join(root, "odc-stac.npy"))
                    differ = float(np.mean(x != y)) if x.shape == y.shape else 1.0
                    print("arrays %s vs %s: %.3f%% of the pixels differ (the reprojected "
                          "scene's: both approximate the reprojection, within -et 0.125)"
                          % (x.shape, y.shape, 100 * differ))
                    results.append({"share_differing": differ})
        for where in ("local", "nginx %g ms" % a.latency_ms):
            for rnd in ("cold", "warm"):
                cf = [r["mpix_s"] for r in results if r.get("where") == where and
                      r["round"] == rnd and r["tool"] == "cogfeed"]
                od = [r["mpix_s"] for r in results if r.get("where") == where and
                      r["round"] == rnd and r["tool"].startswith("odc-stac")]
                if cf and od:
                    print("%s %s: cogfeed %.1f Mpix/s, odc-stac's best %.1f: %.2fx" % (
                        where, rnd, cf[0], max(od), cf[0] / max(od)))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"dates": a.dates, "size": a.size, "latency_ms": a.latency_ms,
                           "data_mb": data_mb, "results": results}, f, indent=1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
