#!/usr/bin/env python3
"""Random geo-sampling of a region that several overlapping scenes in two
UTM zones cover, over nginx with a first-byte latency (164 ms by default)
and locally: cogfeed.Loader(mosaic=True) against TorchGeo's RasterDataset
+ RandomGeoSampler on the same files and target grid (issue 27: at least
5x its patch rate, at most half its peak RSS, the first batch at least
10x sooner).

Data (made once into --data): three scenes of --size px (4 bands uint16,
DEFLATE, 512 px tiles, nodata 0): A and B in UTM 33N side by side,
overlapping by --overlap px, each ending along a diagonal swath edge
inside the overlap and with nodata holes (clouds masked out); C made in
UTM 33N under the region's lower middle, then warped into UTM 32N (the
zone west) by gdalwarp, so that it fills A's and B's holes there only
through a reprojection.  The region: A and B's union, in UTM 33N at 10 m.

The readers, each in its own process (bench/peers_lib/peers_runs.py, the
peers' environment: the same torch and numpy; cogfeed built for it in
build-peers/):

  cogfeed   Loader([[A, B, C]], mosaic=True, grid=the region, random
            patches, bilinear, dtype float32), cache_bytes 128 MiB (the
            scenes decode to more than that: warm figures stream); at its
            defaults, and with inflight_bytes 1 GiB (more patches in
            flight: its tuning, as TorchGeo's is its worker count);
  torchgeo  RasterDataset(paths, crs=the region's, res=10) (C through a
            WarpedVRT), RandomGeoSampler, DataLoader(stack_samples,
            persistent workers; a sweep of --workers), each sample the
            rasterio.merge of the scenes under it (the first with data);
            GDAL over /vsicurl/ with the settings GDAL's docs give for
            cloud reads, GDAL_CACHEMAX 128 MB per worker.

Both read the same two windows first (in A alone; across A and B, away
from C: no resampling on either side) and the patches are compared
(digests).  Reported per reader: opening (header s), the first batch, the
cold rate (the first --cold-batches batches), the warm rate over
--seconds, requests per patch (nginx's log), the peak RSS of the process
tree; then cogfeed / TorchGeo's best as ratios.

    PYTHONPATH=build/python .venv/bin/python bench/geo_sampling_bench.py \\
        [--storages remote,local] [--workers 4,8,12] [--seconds 60] [--json OUT]
"""

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers_lib"))
sys.path.insert(0, os.path.join(REPO, "tests", "servers"))

import peers  # noqa: E402  (the peers' environment and the child runner)
import series_bench  # noqa: E402  (its report)

X0, Y1, RES, EPSG = 500000.0, 4100000.0, 10.0, 32633


def _scene(rng, size, name, overlap):
    """4 bands of smooth fields plus noise, a swath edge and nodata holes."""
    base = rng.integers(500, 3000, size=(4, size // 64 + 1, size // 64 + 1))
    a = np.kron(base, np.ones((64, 64)))[:, :size, :size]
    a = (a + rng.normal(0, 40, size=a.shape)).clip(1, 10000).astype(np.uint16)
    yy, xx = np.ogrid[:size, :size]
    if name == "A":
        a[:, xx > size - overlap // 3 + 0.05 * (yy - size / 2)] = 0
    elif name == "B":
        a[:, xx < overlap // 3 + 0.05 * (yy - size / 2)] = 0
    if name in "AB":
        for _ in range(12):   # clouds, masked out to nodata
            cy, cx, r = rng.integers(0, size), rng.integers(0, size), rng.integers(40, 200)
            a[:, (yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = 0
    return a


def make_data(folder, size, overlap):
    """scene_A.tif, scene_B.tif (UTM 33N), scene_C.tif (UTM 32N); made once."""
    import cogfeed
    os.makedirs(folder, exist_ok=True)
    paths = [os.path.join(folder, "scene_%s.tif" % n) for n in "ABC"]
    if all(os.path.exists(p) for p in paths):
        return paths
    rng = np.random.default_rng(27)
    W = 2 * size - overlap
    places = {"A": X0, "B": X0 + (size - overlap) * RES,
              "C": X0 + (W - size) / 2 * RES}
    for name, p in zip("ABC", paths):
        a = _scene(rng, size, name, overlap)
        y1 = Y1 if name != "C" else Y1 - size // 3 * RES
        g = cogfeed.Grid(EPSG, geotransform=(places[name], RES, 0, y1, 0, -RES), width=size,
                         height=size)
        dst = p if name != "C" else p + ".33.tif"
        cogfeed.write(dst + ".tmp", a, grid=g, nodata=0, compression="deflate", predictor=2,
                      tile_size=512)
        os.replace(dst + ".tmp", dst)
        if name == "C":
            w32 = p + ".32.tif"
            subprocess.run(["gdalwarp", "-q", "-overwrite", "-t_srs", "EPSG:32632", "-tr",
                            "10", "10", "-r", "near", "-dstnodata", "0", dst, w32], check=True)
            subprocess.run(["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=512",
                            "-co", "COMPRESS=DEFLATE", "-co", "PREDICTOR=2", w32, p + ".tmp"],
                           check=True)
            os.replace(p + ".tmp", p)
            os.unlink(dst)
            os.unlink(w32)
    return paths


def main(argv):
    a = series_bench.parse(argv, __doc__, 4096, 1024, 16, "geo_sampling")
    scenes = make_data(a.data, a.size, a.overlap)
    W, H = 2 * a.size - a.overlap, a.size
    base = {"patch": a.patch, "batch": a.batch, "bands": 4, "mask_bytes": 0, "crs": EPSG,
            "gt": [X0, RES, 0, Y1, 0, -RES], "width": W, "height": H,
            "seconds": a.seconds, "warmup": a.warmup, "cold_batches": a.cold_batches,
            "cache_bytes": 128 << 20}
    # in A alone, across A and B above C (nothing resampled on either side)
    P = a.patch
    check = [[64, 64], [a.size - a.overlap // 2 - P // 2, 32]]
    res = series_bench.side_by_side(
        a, "geo", base, check, lambda run, url: {"scenes": [url(p) for p in scenes]},
        ("mosaic_cogfeed", "mosaic_torchgeo"), 128,
        {"bytes": sum(os.path.getsize(p) for p in scenes)})
    series_bench.report(res, a.storages.split(","), title=(
        "random %d px patches (batch %d) of a %d x %d px region: scenes A, B (UTM 33N, %d px, "
        "overlapping %d px) and C (UTM 32N), %.0f MB of COGs; nginx latency %g ms; "
        "patches identical at the check windows: %s"
        % (a.patch, a.batch, W, H, a.size, a.overlap, res["bytes"] / 1e6, a.latency_ms,
           res["identical"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
