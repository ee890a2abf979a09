"""Labels from a vector file, per patch: cogfeed.VectorLabels against
rasterio.features.rasterize, and against reading the image channels of
the same patches (issue 30: rasterising in C "fast enough not to show").

    PYTHONPATH=build/python .venv/bin/python bench/vector_bench.py \\
        [--features 100000] [--patches 2000] [--rounds 2] [--json OUT]

Data (made once per run in a temporary folder): --features polygons
(5 to 24 vertices, 30 to 300 m across, a fifth with a hole, classes 1 to
20) scattered over 100 x 100 km of UTM 33N, written as one GeoPackage
with pyogrio; an image of 4096 x 4096 px at 10 m (4 bands uint16,
DEFLATE, 512 px tiles) over the middle of that area.

1. Indexing: VectorLabels(path, "cls") (pyogrio's read of the file, then
   cf_vlabels_new: WKB parsed, bounds, the packed Hilbert R-tree), and the
   C part alone; the process's RSS before and after.
2. Per patch: --patches random 256 x 256 px grids at 10 m inside the
   area, the same for both.  cogfeed: VectorLabels.rasterize(grid) (the
   index selects the features).  rasterio (GDAL 3.10, the same rules:
   outputs compared): the features whose bounds meet the patch found
   with numpy over precomputed bounds (rasterio has no index; without
   this step it would burn all 100,000 features each time), then
   rasterio.features.rasterize of those GeoJSON dicts.  Alternating
   rounds; the median per-patch time of each.
3. In the Loader: random 256 px patches of the image, batch 16, with and
   without labels=, alternating rounds of --seconds each (local file in
   the page cache, i.e. warm; the chunk cache off so that every patch is
   decoded): patches/s, and the per-patch cost the labels add.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

X0, Y0, RES, SPAN = 500000.0, 4100000.0, 10.0, 100000.0


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def make_features(n, seed=0):
    rng = np.random.default_rng(seed)
    feats, bounds = [], np.empty((n, 4))
    for i in range(n):
        cx, cy = X0 + rng.uniform(0, SPAN), Y0 - rng.uniform(0, SPAN)
        r = rng.uniform(15, 150)
        k = int(rng.integers(5, 25))
        a = np.sort(rng.uniform(0, 2 * np.pi, k))
        rr = r * rng.uniform(0.5, 1.0, k)
        ring = [(float(cx + rr[j] * np.cos(a[j])), float(cy + rr[j] * np.sin(a[j])))
                for j in range(k)]
        ring.append(ring[0])
        rings = [ring]
        if rng.random() < 0.2:
            h = [(cx + 0.2 * r * np.cos(t), cy + 0.2 * r * np.sin(t))
                 for t in np.linspace(0, 2 * np.pi, 7)[:-1]]
            rings.append(h + [h[0]])
        xy = np.array(ring)
        bounds[i] = (xy[:, 0].min(), xy[:, 1].min(), xy[:, 0].max(), xy[:, 1].max())
        feats.append(({"type": "Polygon", "coordinates": rings}, int(rng.integers(1, 21))))
    return feats, bounds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--features", type=int, default=100000)
    ap.add_argument("--patches", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    import pyogrio.raw
    import rasterio
    from rasterio.features import rasterize
    from rasterio.transform import Affine

    import cogfeed
    from cogfeed.vector import _geojson_wkb

    tmp = tempfile.mkdtemp(prefix="cf_vector_bench_")
    res = {"features": args.features, "patches": args.patches}
    try:
        feats, bounds = make_features(args.features)
        wkb = [_geojson_wkb(g) for g, _ in feats]
        vals = [v for _, v in feats]
        gpkg = os.path.join(tmp, "fields.gpkg")
        pyogrio.raw.write(gpkg, np.array(wkb, dtype=object),
                          [np.array(vals, dtype=np.int32)], fields=["cls"],
                          geometry_type="Polygon", crs="EPSG:32633", driver="GPKG")
        res["gpkg_mb"] = os.path.getsize(gpkg) / 1e6

        # 1. indexing
        r0 = rss_mb()
        t = time.perf_counter()
        vl = cogfeed.VectorLabels(gpkg, "cls")
        res["index_s_with_read"] = time.perf_counter() - t
        res["index_rss_mb"] = rss_mb() - r0
        t = time.perf_counter()
        c_only = cogfeed._cogfeed._VLabels(wkb, vals, vl.crs, False)
        res["index_s_c_only"] = time.perf_counter() - t
        del c_only
        print("index: %d features, %.2f s with pyogrio's read (%.2f s in C), "
              "+%.0f MB RSS" % (len(vl), res["index_s_with_read"], res["index_s_c_only"],
                                res["index_rss_mb"]), flush=True)

        # 2. per patch
        rng = np.random.default_rng(1)
        P = 256
        origins = [(X0 + rng.uniform(0, SPAN - P * RES), Y0 - rng.uniform(0, SPAN - P * RES))
                   for _ in range(args.patches)]
        grids = [cogfeed.Grid("EPSG:32633", geotransform=(x, RES, 0, y, 0, -RES), width=P,
                              height=P) for x, y in origins]

        def run_cogfeed():
            out = []
            for g in grids:
                t = time.perf_counter()
                vl.rasterize(g)
                out.append(time.perf_counter() - t)
            return out

        def run_rasterio():
            out = []
            for x, y in origins:
                t = time.perf_counter()
                x1, y1 = x + P * RES, y - P * RES
                sel = np.nonzero((bounds[:, 0] <= x1) & (bounds[:, 2] >= x) &
                                 (bounds[:, 1] <= y) & (bounds[:, 3] >= y1))[0]
                shapes = [feats[i] for i in sel]
                if shapes:
                    rasterize(shapes, out_shape=(P, P),
                              transform=Affine(RES, 0, x, 0, -RES, y), fill=0,
                              dtype="uint8")
                else:
                    np.zeros((P, P), np.uint8)
                out.append(time.perf_counter() - t)
            return out

        # the outputs agree (same rules)
        differ = 0
        for (x, y), g in list(zip(origins, grids))[:200]:
            x1, y1 = x + P * RES, y - P * RES
            sel = np.nonzero((bounds[:, 0] <= x1) & (bounds[:, 2] >= x) &
                             (bounds[:, 1] <= y) & (bounds[:, 3] >= y1))[0]
            ref = (rasterize([feats[i] for i in sel], out_shape=(P, P),
                             transform=Affine(RES, 0, x, 0, -RES, y), fill=0, dtype="uint8")
                   if len(sel) else np.zeros((P, P), np.uint8))
            differ += int((vl.rasterize(g) != ref).sum())
        res["pixels_differ_first_200"] = differ
        cf_t, rio_t = [], []
        for _ in range(args.rounds):
            cf_t += run_cogfeed()
            rio_t += run_rasterio()
        res["cogfeed_ms_per_patch"] = 1e3 * statistics.median(cf_t)
        res["rasterio_ms_per_patch"] = 1e3 * statistics.median(rio_t)
        res["rasterio_over_cogfeed"] = res["rasterio_ms_per_patch"] / res["cogfeed_ms_per_patch"]
        print("per 256 px patch (median of %d): cogfeed %.3f ms, rasterio %.3f ms: "
              "%.1fx; pixels differing in 200 patches: %d"
              % (len(cf_t), res["cogfeed_ms_per_patch"], res["rasterio_ms_per_patch"],
                 res["rasterio_over_cogfeed"], differ), flush=True)

        # 3. in the Loader
        S = 4096
        img = os.path.join(tmp, "img.tif")
        ox, oy = X0 + SPAN / 2 - S * RES / 2, Y0 - SPAN / 2 + S * RES / 2
        a = np.random.default_rng(2).integers(0, 4000, (4, S, S), dtype=np.uint16)
        cogfeed.write(img, a, grid=cogfeed.Grid("EPSG:32633",
                                                geotransform=(ox, RES, 0, oy, 0, -RES),
                                                width=S, height=S),
                      compression="deflate", tile_size=512)
        del a

        def loader_rate(labels):
            kw = dict(patch_size=256, batch_size=16, sampler="random", cache_bytes=0,
                      seed=int(time.time()))
            if labels:
                kw["labels"] = vl
            with cogfeed.Loader(img, epoch_length=1 << 20, **kw) as ld:
                it = iter(ld)
                next(it)
                n, t = 0, time.perf_counter()
                while time.perf_counter() - t < args.seconds:
                    next(it)
                    n += 16
                return n / (time.perf_counter() - t)

        plain, lab = [], []
        for _ in range(args.rounds):
            plain.append(loader_rate(False))
            lab.append(loader_rate(True))
        res["loader_patches_per_s"] = statistics.median(plain)
        res["loader_with_labels_patches_per_s"] = statistics.median(lab)
        res["labels_cost_ms_per_patch"] = 1e3 * (1 / res["loader_with_labels_patches_per_s"] -
                                                 1 / res["loader_patches_per_s"])
        print("Loader, local DEFLATE 4 x uint16, random 256 px (warm: page cache; chunk "
              "cache off): %.1f patches/s without labels, %.1f with (%+.2f ms a patch)"
              % (res["loader_patches_per_s"], res["loader_with_labels_patches_per_s"],
                 res["labels_cost_ms_per_patch"]), flush=True)
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        res["gdal"] = rasterio.__gdal_version__
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
