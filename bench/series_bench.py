#!/usr/bin/env python3
"""Time series of per-date mosaics, (B, 12, C, 256, 256), from a region
that two overlapping tiles cover on 12 dates, read over nginx with a
first-byte latency (164 ms by default) and locally: cogfeed.Loader
against TorchGeo's time-series sampling of the same files (issue 30).

Data (made once into --data): two tiles of --size px (4 bands uint16,
DEFLATE, 512 px tiles, nodata 0) overlapping by --overlap px in UTM 33N,
on --dates dates 5 days apart (tile_A_YYYYMMDD.tif, tile_B_...); each
date's tiles end along a diagonal swath edge inside the overlap (a
different one each date), so a patch there needs both tiles of its date.

The readers, each in its own process (bench/peers_lib/peers_runs.py, the
peers' environment: the same torch and numpy; cogfeed built for it in
build-peers/):

  cogfeed   Loader([[ [A_d, B_d] for each date ]], dates=..., grid=the
            region, random patches, dtype float32, valid_mask: a valid
            plane per date), cache_bytes 256 MiB (the data decode to
            more than that: warm figures stream, they are not
            cache-resident); at its defaults, and with inflight_bytes
            1 GiB (more patches in flight: its tuning, as TorchGeo's is
            its worker count);
  torchgeo  RasterDataset dated from the file names (filename_regex /
            date_format), RandomGeoSampler locations, each sample the
            dataset's slice of each date's interval (its per-date mosaic:
            rasterio.merge, the first file with data) stacked to (T, C,
            H, W), DataLoader(stack_samples, persistent workers; a sweep
            of --workers), GDAL over /vsicurl/ with the settings GDAL's
            docs give for cloud reads (GDAL_CACHEMAX 256 MB per worker;
            no 16 workers: 12 held 18.7 GB of RSS between them on this
            24 GB machine).

Before the runs both read the same three windows (in A only, in the
overlap, in B only) and their series are compared (digests).  Reported
per reader: header seconds (opening), the first batch, the cold rate
(the first --cold-batches batches: nothing cached), the warm rate over
--seconds, the requests per sample (nginx's log), peak RSS of the
process tree; and cogfeed / TorchGeo's best as ratios.

    PYTHONPATH=build/python .venv/bin/python bench/series_bench.py \\
        [--storages remote,local] [--workers 4,8,12] [--seconds 60] [--json OUT]
"""

import argparse
import datetime as dt
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers_lib"))
sys.path.insert(0, os.path.join(REPO, "tests", "servers"))

import peers  # noqa: E402  (the peers' environment and the child runner)

X0, Y1, RES, EPSG = 500000.0, 4100000.0, 10.0, 32633


def day(d):
    return dt.date(2024, 3, 1) + dt.timedelta(days=5 * d)


def make_data(folder, size, overlap, ndates):
    """The tiles of every date (made once); their paths per date."""
    import cogfeed
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(30)
    out = []
    yy, xx = np.mgrid[0:size, 0:size]
    for d in range(ndates):
        row = []
        for k, name in enumerate("AB"):
            p = os.path.join(folder, "tile_%s_%s.tif" % (name, day(d).strftime("%Y%m%d")))
            row.append(p)
            if os.path.exists(p):
                continue
            # smooth fields plus noise: compresses as imagery does
            base = rng.integers(500, 3000, size=(4, size // 64 + 1, size // 64 + 1))
            a = np.kron(base, np.ones((64, 64)))[:, :size, :size]
            a = (a + rng.normal(0, 40, size=a.shape)).clip(1, 10000).astype(np.uint16)
            # the swath edge: a diagonal inside the overlap, per date
            c = overlap * (0.25 + 0.5 * rng.random())
            slope = rng.uniform(-0.1, 0.1)
            if name == "A":   # A ends right of the edge
                a[:, xx > size - overlap + c + slope * (yy - size / 2)] = 0
            else:             # B starts there
                a[:, xx < c + slope * (yy - size / 2)] = 0
            x0 = X0 + k * (size - overlap) * RES
            g = cogfeed.Grid(EPSG, geotransform=(x0, RES, 0, Y1, 0, -RES), width=size,
                             height=size)
            cogfeed.write(p + ".tmp", a, grid=g, nodata=0, compression="deflate",
                          predictor=2, tile_size=512)
            os.replace(p + ".tmp", p)
        out.append(row)
    return out


def parse(argv, doc, size, overlap, batch, data, more=None):
    """The arguments both side-by-side benches take (this one's and
    geo_sampling_bench.py's: their sizes, batch and data folder differ),
    --quick applied; the peers' environment made when missing."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=size)
    ap.add_argument("--overlap", type=int, default=overlap)
    ap.add_argument("--patch", type=int, default=256)
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--latency-ms", type=float, default=164)
    ap.add_argument("--storages", default="remote,local")
    ap.add_argument("--workers", default="4,8,12",
                    help="TorchGeo's DataLoader worker counts")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cold-batches", type=int, default=4)
    ap.add_argument("--python", default="python3.12",
                    help="the interpreter the peers' environment is made with")
    ap.add_argument("--data", default=os.path.join(REPO, "build", "bench-data", data))
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true",
                    help="small and short: checks that every run works")
    if more:
        more(ap)
    a = ap.parse_args(argv)
    if a.quick:
        a.size, a.overlap, a.seconds, a.workers = 1024, 256, 5, "2"
        a.data = os.path.join(a.data, "quick")
    peers.ensure_venv(a.python)
    peers.ensure_build()
    return a


def side_by_side(a, workload, base, check, inputs, runs_of, gdal_cache_mb, res):
    """Both readers at the check windows (digests compared: res
    ["identical"]), then per storage TorchGeo at each worker count and
    cogfeed at its defaults and with inflight_bytes 1 GiB (more patches
    in flight: what `cogfeed tune` would pick), each in its own process;
    inputs(reader, url) gives a config's files, runs_of the (cogfeed,
    TorchGeo) runner names.  The rows go into res; saved with --json."""
    got = [peers.child(dict(base, run=r, check=check, **inputs(r, lambda p: p)),
                       gdal=peers.GDAL_BASE)["digests"] for r in runs_of]
    res["identical"] = got[0] == got[1]
    peers.log("the check windows: %s" % ("identical" if res["identical"] else
                                          "DIFFER: %s" % got))
    res.update({"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                "load_before": os.getloadavg()[0], "cpus": os.cpu_count(),
                "cpu": peers.cpu_model(), "latency_ms": a.latency_ms, "size": a.size,
                "overlap": a.overlap, "patch": a.patch, "batch": a.batch,
                "versions": peers.versions()})
    runs = peers.Runs()
    print(peers.HEAD)
    with peers.serve(a.data, a.latency_ms) as srv:
        for storage in a.storages.split(","):
            remote = storage == "remote"

            def url(p):
                return srv.url(os.path.relpath(p, a.data)) if remote else p

            def gdal_url(p):
                return "/vsicurl/" + url(p) if remote else p

            cfg = dict(base, log=srv.log if remote else None)
            for w in [int(x) for x in a.workers.split(",")]:
                runs.run(workload, storage, "random", "torchgeo", "%d workers" % w,
                         dict(cfg, run=runs_of[1], workers=w, **inputs(runs_of[1], gdal_url)),
                         gdal=dict(peers.GDAL_REMOTE if remote else peers.GDAL_BASE,
                                   GDAL_NUM_THREADS="1", GDAL_CACHEMAX=str(gdal_cache_mb)))
            for name, ib in (("Loader defaults", None), ("inflight 1 GiB", 1 << 30)):
                runs.run(workload, storage, "random", "cogfeed", name,
                         dict(cfg, run=runs_of[0], inflight_bytes=ib,
                              **inputs(runs_of[0], url)))
    res["rows"] = runs.rows
    res["load_after"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return res


def main(argv):
    def more(ap):
        ap.add_argument("--dates", type=int, default=12)
    a = parse(argv, __doc__, 2048, 512, 8, "series", more)
    series = make_data(a.data, a.size, a.overlap, a.dates)
    W, H = 2 * a.size - a.overlap, a.size
    dates = [day(d).isoformat() for d in range(a.dates)]
    intervals = [(day(d).isoformat(), (dt.datetime.combine(day(d), dt.time.max)).isoformat())
                 for d in range(a.dates)]
    files = sorted(p for row in series for p in row)   # the tiles' index order: A first
    base = {"patch": a.patch, "batch": a.batch, "bands": a.dates * 4, "mask_bytes": 0,
            "crs": EPSG, "gt": [X0, RES, 0, Y1, 0, -RES], "width": W, "height": H,
            "dates": dates, "intervals": intervals, "seconds": a.seconds,
            "warmup": a.warmup, "cold_batches": a.cold_batches,
            "cache_bytes": 256 << 20}
    # The same three windows read by both: in A alone, across the
    # overlap, in B alone (pixels of the region's grid).
    P = a.patch
    check = [[64, 64], [a.size - a.overlap // 2 - P // 2, H // 2 - P // 2],
             [W - P - 64, H - P - 64]]

    def inputs(run, url):
        if run == "series_cogfeed":
            return {"series": [[url(p) for p in row] for row in series]}
        return {"files": [url(p) for p in files]}

    res = side_by_side(a, "series", base, check, inputs, ("series_cogfeed", "series_torchgeo"),
                       256, {"dates": a.dates})
    report(res, a.storages.split(","))
    return 0


def report(res, storages, title=None):
    """The rows of res, then cogfeed against TorchGeo's best per storage."""
    print("\n" + (title or "(B=%d, T=%d, C=4, %d px) series, %d x %d px tiles overlapping "
                   "%d px, nginx latency %g ms; series identical at the check windows: %s"
                   % (res["batch"], res["dates"], res["patch"], res["size"], res["size"],
                      res["overlap"], res["latency_ms"], res["identical"])))
    print("%-7s %-9s %-12s %8s %8s %9s %9s %8s %8s" % (
        "storage", "reader", "setting", "header s", "1st s", "cold it/s", "warm it/s",
        "req/it", "RSS MB"))
    for r in res["rows"]:
        if "error" in r:
            print("%-7s %-9s %-12s error: %s" % (r["storage"], r["reader"], r["setting"],
                                                 r["error"][-200:]))
            continue
        req = r.get("requests_per_item")
        print("%-7s %-9s %-12s %8.1f %8.1f %9.2f %9.2f %8s %8.0f" % (
            r["storage"], r["reader"], r["setting"], r["header_s"], r["first_s"],
            r["cold_items_per_s"], r["items_per_s"], "-" if req is None else "%.1f" % req,
            r["peak_rss_mb"]))
    for st in storages:
        ok = [r for r in res["rows"] if r["storage"] == st and "error" not in r]
        tg = [r for r in ok if r["reader"] == "torchgeo"]
        if not tg:
            continue
        bw = max(tg, key=lambda r: r["items_per_s"])
        bc = max(tg, key=lambda r: r["cold_items_per_s"])
        bf = min(tg, key=lambda r: r["header_s"] + r["first_s"])
        for c in [r for r in ok if r["reader"] == "cogfeed"]:
            first = c["header_s"] + c["first_s"]
            print("%s, cogfeed %s / TorchGeo's best: warm %.1fx (%s), cold %.1fx (%s), peak "
                  "RSS %.2fx; first batch (opening + first) %.1f s against %.1f s (%s): %.1fx "
                  "sooner" % (st, c["setting"], c["items_per_s"] / bw["items_per_s"],
                              bw["setting"], c["cold_items_per_s"] / bc["cold_items_per_s"],
                              bc["setting"], c["peak_rss_mb"] / bw["peak_rss_mb"], first,
                              bf["header_s"] + bf["first_s"], bf["setting"],
                              (bf["header_s"] + bf["first_s"]) / first))

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
