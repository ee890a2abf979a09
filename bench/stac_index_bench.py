"""Indexing a large STAC ItemCollection: cogfeed.stac.items() against
pystac and a bare json.load (issue 27's target: "a catalog of 100,000
items (generated) is indexed in under 3 s and 300 MB").

    PYTHONPATH=build/python .venv/bin/python bench/stac_index_bench.py \\
        [--items 100000] [--keep DIR] [--skip-pystac] [--json OUT]

Catalog (make_catalog): one STAC ItemCollection (a GeoJSON
FeatureCollection as a STAC API search returns it) of --items
Sentinel-2 L2A-like items, STAC 1.1.0 with the eo, raster and projection
v2 extensions: a 109.8 km UTM tile footprint (Polygon, lon/lat, zones 30
to 36 N, 40 to 60 degrees N) and its bbox, datetime (2024, RFC 3339 with
milliseconds), eo:cloud_cover, s2:mgrs_tile, proj:code; assets blue,
green, red, nir (10 m), scl (20 m), each with an absolute https href,
proj:shape, proj:transform and STAC 1.1 bands (raster:scale/offset),
and a thumbnail; self and collection links.  Written streaming, item by
item (compact json.dumps); about 3 KB an item (304 MB for 100,000).  --keep DIR keeps it as
DIR/items-N.json and reuses it when present (else: a temporary folder,
removed at the end).

Each task runs in its own child process (one at a time), so its peak RSS
is clean: the child imports what it needs, takes its VmRSS as the
baseline, runs, and reports the wall time of each phase
(time.perf_counter) and its peak RSS above the baseline (VmHWM minus the
baseline VmRSS, /proc/self/status):

  cogfeed  indexed: cogfeed.stac.items(path, limits=Limits(max_bytes=1 GiB))
  cogfeed-parquet  the same from the catalog as STAC GeoParquet (written
           once by stac-geoparquet beside the JSON; --skip-parquet)
           search:  its.search(bbox=[10, 45, 20, 55],
                    datetime="2024-03-01/2024-06-30", max_cloud_cover=50)
           select:  sel.select(["red", "green", "blue", "nir"]), then
                    .images() and .layers() (the Loader's inputs)
           sorted:  its.sorted("clear") (all items)
  pystac   the nearest thing a user has today: pystac.ItemCollection
           .from_file(path), the same search by hand over item.bbox,
           item.datetime and properties["eo:cloud_cover"], the 4 assets'
           hrefs per item, and the same sort
  json     json.load of the file alone (the floor of any approach that
           holds Python dicts)

The target is on "indexed" (items() alone) and on the peak RSS.
"""

import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

BBOX = [10, 45, 20, 55]
DATETIME = "2024-03-01/2024-06-30"
MAX_CC = 50
PICK = ["red", "green", "blue", "nir"]
TARGET_S, TARGET_MB = 3.0, 300.0

EXTENSIONS = [
    "https://stac-extensions.github.io/eo/v2.0.0/schema.json",
    "https://stac-extensions.github.io/raster/v2.0.0/schema.json",
    "https://stac-extensions.github.io/projection/v2.0.0/schema.json",
]
COG = "image/tiff; application=geotiff; profile=cloud-optimized"
# key: (file, band name, common name, resolution, side, data type)
BANDS = [("blue", "B02", "blue", 10, 10980, "uint16"),
         ("green", "B03", "green", 10, 10980, "uint16"),
         ("red", "B04", "red", 10, 10980, "uint16"),
         ("nir", "B08", "nir", 10, 10980, "uint16"),
         ("scl", "SCL", None, 20, 5490, "uint8")]
# Sentinel-2 tile origins (upper-left easting) of one UTM zone
EASTINGS = [199980, 300000, 399960, 499980, 600000, 699960]
LAT_BANDS = "CDEFGHJKLMNPQRSTUVWX"
MGRS_COLS = ["STUVWXYZ", "ABCDEFGH", "JKLMNPQR"]   # by zone % 3
MGRS_ROWS = "ABCDEFGHJKLMNPQRSTUV"


def rss_kb(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _lonlat(zone, x, y):
    """UTM north (x, y) to (lon, lat), roughly (a spherical formula: good
    to a few hundred metres, enough for footprints)."""
    lat = y / 0.9996 / 111132.95
    lon0 = zone * 6 - 183
    lon = lon0 + (x - 500000) / (0.9996 * 111319.49 * math.cos(math.radians(lat)))
    return round(lon, 9), round(lat, 9)


def make_item(i, rng):
    zone = rng.randint(30, 36)
    x0 = rng.choice(EASTINGS)
    # upper-left northing: the footprint between 40 and 60 degrees N
    y0 = 100000 * rng.randint(46, 66) + rng.choice((0, 40))
    x1, y1 = x0 + 109800, y0 - 109800
    ul, ll = _lonlat(zone, x0, y0), _lonlat(zone, x0, y1)
    lr, ur = _lonlat(zone, x1, y1), _lonlat(zone, x1, y0)
    ring = [list(ul), list(ll), list(lr), list(ur), list(ul)]
    lons = [p[0] for p in ring]
    lats = [p[1] for p in ring]
    band = LAT_BANDS[int((ll[1] + 80) // 8)]
    sq = (MGRS_COLS[zone % 3][(x0 + 20) // 100000 - 1] +
          MGRS_ROWS[(y1 // 100000 + (5 if zone % 2 == 0 else 0)) % 20])
    tile = "%d%s%s" % (zone, band, sq)
    day = rng.randrange(366)
    # overpass near 10:30 local solar time
    sec = int((10.5 - (zone * 6 - 183) / 15.0) * 3600) + rng.randrange(-600, 600)
    t = time.gmtime(1704067200 + day * 86400 + sec)
    dt = time.strftime("%Y-%m-%dT%H:%M:%S", t) + ".%03dZ" % rng.randrange(1000)
    iid = "S2B_%s_%s_0_L2A-%06d" % (tile, time.strftime("%Y%m%d", t), i)
    base = "https://data.example.com/sentinel-2-l2a/%d/%s/%s/%d/%d/%s/" % (
        zone, band, sq, t.tm_year, t.tm_mon, iid)
    assets = {}
    for key, fname, common, res, side, dtype in BANDS:
        b = {"name": fname, "nodata": 0, "data_type": dtype}
        if common:
            b["eo:common_name"] = common
            b["raster:scale"] = 0.0001
            b["raster:offset"] = -0.1
        assets[key] = {"href": base + fname + ".tif", "type": COG,
                       "roles": ["data"], "proj:shape": [side, side],
                       "proj:transform": [res, 0, x0, 0, -res, y0],
                       "bands": [b]}
    assets["thumbnail"] = {"href": base + "thumbnail.png", "type": "image/png",
                           "roles": ["thumbnail"]}
    return {
        "type": "Feature", "stac_version": "1.1.0",
        "stac_extensions": EXTENSIONS, "id": iid,
        "collection": "sentinel-2-l2a",
        "geometry": {"type": "Polygon", "coordinates": [ring]},
        "bbox": [min(lons), min(lats), max(lons), max(lats)],
        "properties": {
            "datetime": dt, "platform": "sentinel-2b",
            "constellation": "sentinel-2", "instruments": ["msi"],
            "eo:cloud_cover": round(rng.uniform(0, 100), 6),
            "s2:mgrs_tile": tile, "proj:code": "EPSG:326%02d" % zone},
        "assets": assets,
        "links": [
            {"rel": "self", "href": "https://stac.example.com/collections/"
             "sentinel-2-l2a/items/" + iid},
            {"rel": "collection", "href": "https://stac.example.com/"
             "collections/sentinel-2-l2a"}],
    }


def make_catalog(path, n, seed=0):
    """Write an ItemCollection of n items to path, item by item (through
    path + ".part", renamed when complete)."""
    rng = random.Random(seed)
    part = path + ".part"
    with open(part, "w") as f:
        f.write('{"type":"FeatureCollection","numberMatched":%d,'
                '"numberReturned":%d,"features":[' % (n, n))
        for i in range(n):
            if i:
                f.write(",")
            f.write(json.dumps(make_item(i, rng), separators=(",", ":")))
        f.write('],"links":[{"rel":"self","href":"https://stac.example.com/'
                'search"}]}')
    os.replace(part, path)


# -- children ---------------------------------------------------------------


def parquet_of(path, n):
    """The catalog as STAC GeoParquet beside it (stac-geoparquet writes it
    once), or None without stac-geoparquet."""
    try:
        import stac_geoparquet.arrow as sga
    except ImportError:
        print("stac-geoparquet not installed: no GeoParquet row")
        return None
    pq = os.path.splitext(path)[0] + ".parquet"
    if not os.path.exists(pq):
        t = time.perf_counter()
        with open(path) as f:
            feats = json.load(f)["features"]
        sga.to_parquet(sga.parse_stac_items_to_arrow(feats), pq)
        print("GeoParquet: written in %.1f s" % (time.perf_counter() - t))
    print("GeoParquet: %s, %.1f MB" % (pq, os.path.getsize(pq) / 1e6))
    return pq


def child_cogfeed(path):
    import cogfeed
    import cogfeed.stac
    base = rss_kb()
    ph = {}
    t = time.perf_counter()
    its = cogfeed.stac.items(path, limits=cogfeed.stac.Limits(max_bytes=1 << 30,
                                                              max_table_bytes=1 << 30))
    ph["indexed"] = time.perf_counter() - t
    t = time.perf_counter()
    sel = its.search(bbox=BBOX, datetime=DATETIME, max_cloud_cover=MAX_CC)
    ph["search"] = time.perf_counter() - t
    t = time.perf_counter()
    sel2 = sel.select(PICK)
    imgs = sel2.images()
    lays = sel2.layers()
    ph["select"] = time.perf_counter() - t
    t = time.perf_counter()
    srt = its.sorted("clear")
    ph["sorted"] = time.perf_counter() - t
    assert len(srt) == len(its) and len(lays) == len(imgs)
    return base, ph, {"items": len(its), "found": len(sel), "images": len(imgs)}


def child_pystac(path):
    import datetime as dt
    import pystac
    base = rss_kb()
    utc = dt.timezone.utc
    lo = dt.datetime(2024, 3, 1, tzinfo=utc)
    hi = dt.datetime(2024, 6, 30, 23, 59, 59, 999999, tzinfo=utc)
    w, s, e, n = BBOX
    ph = {}
    t = time.perf_counter()
    ic = pystac.ItemCollection.from_file(path)
    ph["indexed"] = time.perf_counter() - t
    t = time.perf_counter()
    sel = []
    for it in ic:
        cc = it.properties.get("eo:cloud_cover")
        if cc is None or cc > MAX_CC:
            continue
        b = it.bbox
        if b is None or b[0] > e or b[2] < w or b[1] > n or b[3] < s:
            continue
        if it.datetime is None or not lo <= it.datetime <= hi:
            continue
        sel.append(it)
    ph["search"] = time.perf_counter() - t
    t = time.perf_counter()
    hrefs = [[it.assets[k].href for k in PICK] for it in sel]
    imgs = [h[0] for h in hrefs]
    ph["select"] = time.perf_counter() - t
    t = time.perf_counter()
    newest = sorted(ic, key=lambda i: i.datetime.timestamp(), reverse=True)
    srt = sorted(newest, key=lambda i: (i.properties.get("eo:cloud_cover") is None,
                                        i.properties.get("eo:cloud_cover") or 0.0))
    ph["sorted"] = time.perf_counter() - t
    assert len(srt) == len(ic)
    return base, ph, {"items": len(ic), "found": len(sel), "images": len(imgs)}


def child_json(path):
    base = rss_kb()
    t = time.perf_counter()
    with open(path, "rb") as f:
        doc = json.load(f)
    ph = {"indexed": time.perf_counter() - t}
    return base, ph, {"items": len(doc["features"])}


def child(task, path):
    base, ph, counts = {"cogfeed": child_cogfeed, "cogfeed-parquet": child_cogfeed,
                        "pystac": child_pystac, "json": child_json}[task](path)
    peak = rss_kb("VmHWM")
    out = {"task": task, "phases_s": ph, "total_s": sum(ph.values()),
           "baseline_rss_mb": base / 1024.0,
           "peak_rss_mb": (peak - base) / 1024.0}
    out.update(counts)
    sys.stdout.write(json.dumps(out) + "\n")


def run_child(task, path):
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                        task, path], stdout=subprocess.PIPE, env=os.environ,
                       universal_newlines=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


# -- main -------------------------------------------------------------------


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=100000)
    p.add_argument("--keep", metavar="DIR",
                   help="keep the catalog as DIR/items-N.json; reuse it if there")
    p.add_argument("--skip-pystac", action="store_true")
    p.add_argument("--skip-parquet", action="store_true",
                   help="leave out the STAC GeoParquet form of the catalog")
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--child", nargs=2, metavar=("TASK", "PATH"),
                   help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(*a.child)
        return 0
    tmp = None
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        root = a.keep
    else:
        root = tmp = tempfile.mkdtemp(prefix="cf-stac-index-")
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
           "load_before": os.getloadavg()[0], "cpus": os.cpu_count(),
           "python": sys.version.split()[0], "items": a.items,
           "search": {"bbox": BBOX, "datetime": DATETIME,
                      "max_cloud_cover": MAX_CC}}
    try:
        path = os.path.join(root, "items-%d.json" % a.items)
        if os.path.exists(path):
            res["generate_s"] = None
            print("catalog: reusing %s" % path)
        else:
            t = time.perf_counter()
            make_catalog(path, a.items)
            res["generate_s"] = time.perf_counter() - t
            print("catalog: generated %s in %.1f s" % (path, res["generate_s"]))
        res["catalog"] = path
        res["file_mb"] = os.path.getsize(path) / 1e6
        print("%d items, %.1f MB (%.0f bytes an item)" % (
            a.items, res["file_mb"], os.path.getsize(path) / max(a.items, 1)))
        sys.stdout.flush()

        tasks = ["cogfeed"] + ([] if a.skip_pystac else ["pystac"]) + ["json"]
        paths = {t: path for t in tasks}
        pq = parquet_of(path, a.items) if not a.skip_parquet else None
        if pq:
            tasks.insert(1, "cogfeed-parquet")
            paths["cogfeed-parquet"] = pq
            res["parquet_mb"] = os.path.getsize(pq) / 1e6
        runs = {}
        for task in tasks:
            runs[task] = r = run_child(task, paths[task])
            print("  %-8s done: %.2f s, +%.0f MB" % (task, r["total_s"],
                                                     r["peak_rss_mb"]))
            sys.stdout.flush()
        res["runs"] = runs
        try:
            import pystac
            res["pystac"] = pystac.__version__
        except ImportError:
            pass

        phases = ["indexed", "search", "select", "sorted"]
        print("\n%-9s %9s %9s %9s %9s %9s %10s %7s %7s" % (
            "", "indexed", "search", "select", "sorted", "total", "peak MB",
            "found", "images"))

        def cell(v, fmt="%9.3f"):
            return fmt % v if v is not None else "%9s" % "-"

        for task in tasks:
            r = runs[task]
            ph = r["phases_s"]
            print("%-9s %s %s %s %s %s %10.0f %7s %7s" % (
                task, *(cell(ph.get(k)) for k in phases), cell(r["total_s"]),
                r["peak_rss_mb"], r.get("found", "-"), r.get("images", "-")))
        cf = runs["cogfeed"]
        ratios = {}
        for task in tasks[1:]:
            r = runs[task]
            rt = {k: r["phases_s"][k] / cf["phases_s"][k]
                  for k in phases if k in r["phases_s"] and cf["phases_s"][k] > 0}
            if len(r["phases_s"]) == len(phases):
                rt["total"] = r["total_s"] / cf["total_s"]
            rt["peak_rss"] = r["peak_rss_mb"] / max(cf["peak_rss_mb"], 1e-9)
            ratios[task] = rt
            print("%-9s %s %s %s %s %s %10s" % (
                task[:5] + "/cf", *(cell(rt.get(k), "%8.2fx") for k in phases),
                cell(rt.get("total"), "%8.2fx"), "%9.2fx" % rt["peak_rss"]))
        res["ratios_vs_cogfeed"] = ratios
        if "pystac" in runs:
            res["found_agree"] = runs["pystac"]["found"] == cf["found"]
            if not res["found_agree"]:
                print("WARNING: cogfeed found %d items, pystac by hand %d"
                      % (cf["found"], runs["pystac"]["found"]))
        met = (cf["phases_s"]["indexed"] < TARGET_S and
               cf["peak_rss_mb"] < TARGET_MB)
        res["target"] = {"indexed_s": TARGET_S, "peak_rss_mb": TARGET_MB,
                         "met": met}
        print("\ntarget: indexed < %g s and < %g MB: %s (indexed %.2f s, "
              "peak +%.0f MB; all four phases %.2f s)" % (
                  TARGET_S, TARGET_MB, "met" if met else "not met",
                  cf["phases_s"]["indexed"], cf["peak_rss_mb"], cf["total_s"]))
        res["load_after"] = os.getloadavg()[0]
        if a.json:
            with open(a.json, "w") as f:
                json.dump(res, f, indent=1)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
