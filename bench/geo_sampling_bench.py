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

import argparse
import json
import os
import subprocess
import sys
import time

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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--overlap", type=int, default=1024)
    ap.add_argument("--patch", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--latency-ms", type=float, default=164)
    ap.add_argument("--storages", default="remote,local")
    ap.add_argument("--workers", default="4,8,12", help="TorchGeo's DataLoader worker counts")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cold-batches", type=int, default=4)
    ap.add_argument("--python", default="python3.12",
                    help="the interpreter the peers' environment is made with")
    ap.add_argument("--data", default=os.path.join(REPO, "build", "bench-data", "geo_sampling"))
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true",
                    help="small and short: checks that every run works")
    a = ap.parse_args(argv)
    if a.quick:
        a.size, a.overlap, a.seconds, a.workers = 1024, 256, 5, "2"
        a.data = os.path.join(a.data, "quick")
    peers.ensure_venv(a.python)
    peers.ensure_build()
    scenes = make_data(a.data, a.size, a.overlap)
    W, H = 2 * a.size - a.overlap, a.size
    base = {"patch": a.patch, "batch": a.batch, "bands": 4, "mask_bytes": 0, "crs": EPSG,
            "gt": [X0, RES, 0, Y1, 0, -RES], "width": W, "height": H,
            "seconds": a.seconds, "warmup": a.warmup, "cold_batches": a.cold_batches,
            "cache_bytes": 128 << 20}
    # in A alone, across A and B above C (nothing resampled on either side)
    P = a.patch
    check = [[64, 64], [a.size - a.overlap // 2 - P // 2, 32]]
    got = [peers.child(dict(base, run=r, check=check, scenes=scenes),
                       gdal=peers.GDAL_BASE)["digests"]
           for r in ("mosaic_cogfeed", "mosaic_torchgeo")]
    same = got[0] == got[1]
    peers.log("the check windows' patches: %s" % ("identical" if same else "DIFFER: %s" % got))
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "load_before": os.getloadavg()[0], "cpus": os.cpu_count(),
           "cpu": peers.cpu_model(), "latency_ms": a.latency_ms, "size": a.size,
           "overlap": a.overlap, "patch": a.patch, "batch": a.batch, "identical": same,
           "rows": [], "versions": peers.versions(),
           "bytes": sum(os.path.getsize(p) for p in scenes)}
    runs = peers.Runs()
    print(peers.HEAD)
    with peers.serve(a.data, a.latency_ms) as srv:
        for storage in a.storages.split(","):
            remote = storage == "remote"

            def url(p):
                return srv.url(os.path.relpath(p, a.data)) if remote else p

            cfg = dict(base, log=srv.log if remote else None)
            for w in [int(x) for x in a.workers.split(",")]:
                runs.run("geo", storage, "random", "torchgeo", "%d workers" % w,
                         dict(cfg, run="mosaic_torchgeo", workers=w,
                              scenes=["/vsicurl/" + url(p) if remote else p for p in scenes]),
                         gdal=dict(peers.GDAL_REMOTE if remote else peers.GDAL_BASE,
                                   GDAL_NUM_THREADS="1", GDAL_CACHEMAX="128"))
            # at its defaults, and with a larger memory budget for reads
            # (more patches in flight: what `cogfeed tune` would pick)
            for name, ib in (("Loader defaults", None), ("inflight 1 GiB", 1 << 30)):
                runs.run("geo", storage, "random", "cogfeed", name,
                         dict(cfg, run="mosaic_cogfeed", inflight_bytes=ib,
                              scenes=[url(p) for p in scenes]))
    res["rows"] = runs.rows
    res["load_after"] = os.getloadavg()[0]
    series_bench.report(res, a.storages.split(","), title=(
        "random %d px patches (batch %d) of a %d x %d px region: scenes A, B (UTM 33N, %d px, "
        "overlapping %d px) and C (UTM 32N), %.0f MB of COGs; nginx latency %g ms; "
        "patches identical at the check windows: %s"
        % (a.patch, a.batch, W, H, a.size, a.overlap, res["bytes"] / 1e6, a.latency_ms,
           same)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
