#!/usr/bin/env python3
"""The first batch of a Loader over a large STAC search, over nginx with a
first-byte latency (164 ms by default): issue 27's "a catalog of 100,000
items ... its first batch comes without reading a single header when the
projection extension is present".

Data (made once into --data, reused): a region of --side x --side scenes
of --size px (10 m, UTM 33N, one uint16 band, DEFLATE, 256 px tiles,
nodata 0, written by cogfeed.write), each at --dates dates, the scenes of
a date shifted by a third of a scene from the last date's (so that a
patch meets several scenes of several dates), with holes of nodata.
Catalog: one ItemCollection of --items items (STAC 1.1, projection v2
and raster fields, one asset "red"): the region's scenes, and the rest of
the --items elsewhere in UTM 30N to 36N, whose files do not exist (a
request for one would be a 404, which fails the run).

Then, in this process, served by nginx from --data:

  index    stac.items(catalog), .search(bbox=the region, datetime),
           .sorted("recent"), .select(["red"])
  Loader   Loader(selection, grid=the region, mosaic=True,
           valid_mask=True, sampler="random", patch_size, batch_size):
           each file described by its item (no header read when it
           starts); its opening time and the requests nginx saw during it,
           then its first batch's time and requests
  plain    the same Loader given the same hrefs as plain strings: every
           header read when it starts (128 at a time), as before

Both first batches are compared (the same windows, seeds and pixels).
Cold: the first Loader of each kind on a fresh nginx (the files in the
page cache after --data is made; nothing cached in cogfeed: no header
cache).

    PYTHONPATH=build/python .venv/bin/python bench/stac_first_batch_bench.py \\
        [--items 100000] [--side 24] [--dates 4] [--latency-ms 164] [--json OUT]
"""

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "servers"))

import cogfeed  # noqa: E402
from cogfeed import stac  # noqa: E402
from servers import Nginx  # noqa: E402

X0, Y1, RES, EPSG = 400000.0, 5200000.0, 10.0, 32633


def scene_origin(a, i, j, d):
    """Upper-left corner of scene (i, j) of date d."""
    shift = (d % 3) * a.size * RES / 3
    return X0 + j * a.size * RES + shift, Y1 - i * a.size * RES - shift


def make_files(a):
    """The region's COGs under a.data/data (made once); their names."""
    out = os.path.join(a.data, "data")
    os.makedirs(out, exist_ok=True)
    names = []
    for d in range(a.dates):
        for i in range(a.side):
            for j in range(a.side):
                name = "r_%d_%d_%d.tif" % (d, i, j)
                names.append(name)
                path = os.path.join(out, name)
                if os.path.exists(path):
                    continue
                rng = np.random.default_rng([d, i, j])
                img = rng.integers(200, 4000, size=(a.size, a.size), dtype=np.uint16)
                yy, xx = np.ogrid[:a.size, :a.size]
                for _ in range(3):   # holes: no data there
                    cy, cx, r = rng.integers(0, a.size, 3)
                    img[(yy - cy) ** 2 + (xx - cx) ** 2 < (r // 3) ** 2] = 0
                x, y = scene_origin(a, i, j, d)
                g = cogfeed.Grid(EPSG, width=a.size, height=a.size,
                                 geotransform=(x, RES, 0.0, y, 0.0, -RES))
                cogfeed.write(path + ".tmp", img, grid=g, tile_size=256, nodata=0,
                              overviews=0)
                os.replace(path + ".tmp", path)
    return names


def lonlat_boxes(epsg, xs, ys, span):
    """(west, south, east, north) of each square [x, x + span] x [y - span,
    y] of UTM zone epsg, from its corners (one transform per zone)."""
    from rasterio.warp import transform
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    cx = np.concatenate([xs, xs + span, xs + span, xs])
    cy = np.concatenate([ys, ys, ys - span, ys - span])
    lon, lat = (np.asarray(v).reshape(4, -1) for v in transform(
        "EPSG:%d" % epsg, "EPSG:4326", cx.tolist(), cy.tolist()))
    return np.stack([lon.min(0), lat.min(0), lon.max(0), lat.max(0)], axis=1)


def make_catalog(a, base_url):
    """The ItemCollection (written for this server's URL: its hrefs are
    absolute) and the region's bbox in lon/lat."""
    path = os.path.join(a.data, "items-%d.json" % a.items)
    ext = ["https://stac-extensions.github.io/projection/v2.0.0/schema.json",
           "https://stac-extensions.github.io/raster/v1.1.0/schema.json"]
    span = a.size * RES
    n_region = a.side * a.side * a.dates
    t0 = dt.datetime(2024, 3, 1, 10, tzinfo=dt.timezone.utc)
    rows = []   # (epsg, x, y, href, date)
    for n in range(a.items):
        if n < n_region:
            d, rest = divmod(n, a.side * a.side)
            i, j = divmod(rest, a.side)
            x, y = scene_origin(a, i, j, d)
            rows.append((EPSG, x, y, "%s/data/r_%d_%d_%d.tif" % (base_url, d, i, j),
                         t0 + dt.timedelta(days=10 * d)))
        else:   # elsewhere: other zones, or further north; no file
            m = n - n_region
            rows.append((32630 + m % 7, 300000.0 + (m // 7 % 100) * span,
                         6500000.0 - (m // 700 % 200) * span,
                         "%s/elsewhere/e_%d.tif" % (base_url, m),
                         t0 + dt.timedelta(days=m % 120)))
    boxes = np.zeros((len(rows), 4))
    for epsg in sorted({r[0] for r in rows}):
        k = [n for n, r in enumerate(rows) if r[0] == epsg]
        boxes[k] = lonlat_boxes(epsg, [rows[n][1] for n in k], [rows[n][2] for n in k], span)
    with open(path + ".tmp", "w") as f:
        f.write('{"type": "FeatureCollection", "features": [\n')
        for n, (epsg, x, y, href, when) in enumerate(rows):
            w, s_, e, nn = (round(v, 7) for v in boxes[n])
            item = {
                "type": "Feature", "stac_version": "1.1.0", "stac_extensions": ext,
                "id": "i%d" % n, "bbox": [w, s_, e, nn],
                "geometry": {"type": "Polygon", "coordinates": [[[w, s_], [e, s_], [e, nn],
                                                                 [w, nn], [w, s_]]]},
                "properties": {"datetime": when.strftime("%Y-%m-%dT%H:%M:%SZ")},
                "assets": {"red": {
                    "href": href, "type": "image/tiff; application=geotiff",
                    "roles": ["data"], "proj:code": "EPSG:%d" % epsg,
                    "proj:shape": [a.size, a.size],
                    "proj:transform": [RES, 0.0, x, 0.0, -RES, y],
                    "bands": [{"name": "red", "eo:common_name": "red", "nodata": 0,
                               "data_type": "uint16"}]}},
                "links": []}
            f.write((",\n" if n else "") + json.dumps(item))
        f.write("\n]}\n")
    os.replace(path + ".tmp", path)
    # the region: inside the scenes of every date (see main)
    b = lonlat_boxes(EPSG, [X0 + span], [Y1 - span], (a.side - 1) * span)[0]
    return path, tuple(b)


def first_batch(srv, images, region, a):
    """(opening s, requests while opening, first batch s, its requests,
    the batch)."""
    srv.reset()
    t = time.perf_counter()
    ld = cogfeed.Loader(images, grid=region, mosaic=True, valid_mask=True,
                        sampler="random", patch_size=a.patch, batch_size=a.batch, seed=5,
                        copy=True, io_options={"max_retries": 1})
    t_open = time.perf_counter() - t
    n_open = srv.requests()
    t = time.perf_counter()
    b = next(iter(ld))
    t_first = time.perf_counter() - t
    n_first = srv.requests() - n_open
    ld.close()
    return t_open, n_open, t_first, n_first, b


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=100000)
    p.add_argument("--side", type=int, default=24, help="scenes per side of the region")
    p.add_argument("--dates", type=int, default=4)
    p.add_argument("--size", type=int, default=512, help="scene side, px")
    p.add_argument("--patch", type=int, default=256)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--latency-ms", type=float, default=164)
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "cf_stac_first"))
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args(argv)
    t = time.perf_counter()
    names = make_files(a)
    print("data: %d COGs of %d px in %s (%.1f s)" % (len(names), a.size, a.data,
                                                    time.perf_counter() - t))
    res = {"items": a.items, "region_scenes": len(names), "latency_ms": a.latency_ms,
           "patch": a.patch, "batch": a.batch, "size": a.size}
    with Nginx(a.data, latency_ms=a.latency_ms) as srv:
        t = time.perf_counter()
        cat, box = make_catalog(a, srv.base)
        print("catalog: %d items (%.0f MB) in %.1f s" % (a.items, os.path.getsize(cat) / 1e6,
                                                         time.perf_counter() - t))
        t = time.perf_counter()
        its = stac.items(cat, limits=stac.Limits(max_bytes=1 << 30))
        t_index = time.perf_counter() - t
        t = time.perf_counter()
        sel = its.search(bbox=list(box), datetime="2024-03-01/2024-12-31") \
            .sorted("recent").select(["red"])
        t_search = time.perf_counter() - t
        span = a.size * RES
        region = cogfeed.Grid.from_bounds(EPSG, (X0 + span, Y1 - a.side * span,
                                                 X0 + a.side * span, Y1 - span), RES)
        res.update(index_s=t_index, search_select_s=t_search, found=len(sel),
                   region_px=[region.width, region.height])
        print("indexed %.2f s; search + select %.3f s: %d items over a %d x %d px region"
              % (t_index, t_search, len(sel), region.width, region.height))
        lazy = first_batch(srv, sel, region, a)
        plain = first_batch(srv, [[str(h) for h in sel.images()]], region, a)
    same = (lazy[4]["windows"] == plain[4]["windows"] and
            np.array_equal(lazy[4]["image"], plain[4]["image"]) and
            np.array_equal(lazy[4]["valid"], plain[4]["valid"]))
    for name, r in (("described", lazy), ("plain", plain)):
        res[name] = {"open_s": r[0], "open_requests": r[1], "first_batch_s": r[2],
                     "first_batch_requests": r[3], "to_first_batch_s": r[0] + r[2]}
    res["same_batch"] = bool(same)
    print("\n%-10s %10s %14s %14s %16s %16s" % ("Loader", "opening s", "opening reqs",
                                                "1st batch s", "1st batch reqs",
                                                "to 1st batch s"))
    for name in ("described", "plain"):
        r = res[name]
        print("%-10s %10.2f %14d %14.2f %16d %16.2f" % (
            name, r["open_s"], r["open_requests"], r["first_batch_s"],
            r["first_batch_requests"], r["to_first_batch_s"]))
    print("\nfirst batch %.1fx sooner; the same batch: %s; headers read while the "
          "described Loader started: %d" % (
              res["plain"]["to_first_batch_s"] / res["described"]["to_first_batch_s"], same,
              res["described"]["open_requests"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
