"""Decode throughput per codec: cogfeed vs GDAL on the same files.

For each codec a SIZE x SIZE image with 512 px tiles is written by GDAL's
COG driver, or its GTiff driver for the variants the COG driver does not
write (LZMA, CCITT, 12-bit, float16, CInt16, CMYK, CIELab: see CODECS;
OJPEG, which nothing writes, is GDAL's JPEG strips rebuilt, 512-row strips
read strip by strip)
(cached in $CF_TEST_DATA/bench, or bench/ of a private per-user folder in
the temp folder: conformance.testdata_root()), read once
so it sits in the page cache, then decoded whole, tile by tile:

  cogfeed 1 thread   one cogfeed.open, cog.read() of every tile in order
  cogfeed N threads  the same tiles from a thread pool of N (the extension
                     releases the GIL while reading)
  GDAL 1 thread      GDAL_NUM_THREADS=1, a read of every tile window
  GDAL N threads     the best of two ways to use all cores with GDAL:
                     (a) GDAL_NUM_THREADS=ALL_CPUS and one whole-image
                     read (GDAL decodes the tiles of one request on
                     its own pool; tile-sized requests would stay serial);
                     (b) a pool of N threads, each with its own dataset,
                     reading tile windows

Throughput is MB/s of decoded pixels (width x height x bands x sample
size), the best of --repeat rounds; each round runs every variant in turn
so that load from other processes is shared fairly.  GDAL's datasets are
reopened each run so its block cache never serves a tile twice.  Every cogfeed result is checked
bit-exact against GDAL's decoded image.

GDAL is the one rasterio's wheel carries (3.10, through rasterio, as in the
conformance tests), which writes the files and is timed.  Its JPEG decoder
is libjpeg 9, not libjpeg-turbo (cogfeed's and Debian's): the JPEG row is
timed against that build, and its pixels are checked against Debian's GDAL
(gdal_translate, libjpeg-turbo), the oracle of docs/conformance.md.  This
is a benchmark, not a test: run it by hand after ./run.sh build, e.g.

    PYTHONPATH=build/python .venv/bin/python bench/codec_bench.py [--json]

--strips measures strip files instead (issue 25 item 10): the SIZE x SIZE
image of each of --strip-codecs written untiled by GDAL's GTiff driver
(TILED=NO, BLOCKYSIZE=N for each N of --strip-rows, 0 being one strip of
the whole image; OJPEG rebuilt from GDAL's JPEG strips as above), read as
512 x 512 windows (--window) in row order and in a random order (seed 1),
one thread:

  cogfeed           one cogfeed.IO per round, so its cache of decoded
                    chunks (cache_bytes) starts empty: strips are decoded
                    once for the windows beside each other, and a window
                    near the top of a tall strip decodes only down to its
                    last row
  cogfeed no cache  the same with cache_bytes=-1: every window decodes the
                    strips it touches (down to its last row); left out for
                    one strip of the whole image, where it decodes the
                    image once per window
  GDAL              the dataset reopened per round: its block cache
                    starts empty too

State: the file in the page cache (read once before), decoded-chunk caches
cold at the start of each round and warm within it (that is the point).
MB/s of window pixels delivered; the windows tile the image once.  Every
cogfeed result is checked bit-exact against GDAL's (Debian's GDAL for JPEG
and OJPEG, as above):

    PYTHONPATH=build/python .venv/bin/python bench/codec_bench.py --strips
"""

import argparse
import hashlib
import random
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.io import MemoryFile
from rasterio.windows import Window

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
import conformance as C  # noqa: E402
import format_fixtures as F  # noqa: E402

import cogfeed  # noqa: E402

# codec -> (dtype, bands, creation options): the type each codec is
# typically used with.  Rows with a COMPRESS= option of their own are
# written by the GTiff driver (tiled) with those options: the variants of
# issue 19 (LZMA, CCITT, odd depths, float16, complex, colour spaces) that
# the COG driver does not write.
CODECS = {
    "NONE": ("uint16", 1, []),
    "DEFLATE": ("uint16", 1, ["PREDICTOR=2"]),
    "LZW": ("uint16", 1, ["PREDICTOR=2"]),
    "PACKBITS": ("uint8", 1, []),
    "ZSTD": ("uint16", 1, ["PREDICTOR=2"]),
    "DEFLATE_F32": ("float32", 1, ["PREDICTOR=3"]),
    "LERC": ("float32", 1, []),
    "LERC_DEFLATE": ("float32", 1, []),
    "LERC_ZSTD": ("float32", 1, []),
    "JPEG": ("uint8", 3, ["QUALITY=85"]),
    "WEBP": ("uint8", 3, ["QUALITY=80"]),
    "LZMA": ("uint16", 1, ["COMPRESS=LZMA", "PREDICTOR=2"]),
    "CCITTRLE": ("bit", 1, ["COMPRESS=CCITTRLE", "NBITS=1"]),
    "CCITTFAX3": ("bit", 1, ["COMPRESS=CCITTFAX3", "NBITS=1"]),
    "CCITTFAX4": ("bit", 1, ["COMPRESS=CCITTFAX4", "NBITS=1"]),
    "NBITS12": ("uint16", 1, ["COMPRESS=NONE", "NBITS=12"]),
    "FLOAT16": ("float32", 1, ["COMPRESS=NONE", "NBITS=16"]),
    "CINT16": ("cint16", 1, ["COMPRESS=NONE"]),
    "CMYK": ("uint8", 4, ["COMPRESS=NONE", "PHOTOMETRIC=CMYK"]),
    "CIELAB": ("uint8", 3, ["COMPRESS=NONE", "PHOTOMETRIC=CIELAB"]),
    # nothing writes old-style JPEG: GDAL's JPEG strips (tile rows each)
    # rebuilt as an OJPEG file with table tags (format_fixtures.ojpeg_file)
    "OJPEG": ("uint8", 3, ["OJPEG"]),
}
# rasterio's names of the GDAL types written
GDT = {"uint8": "uint8", "uint16": "uint16", "float32": "float32", "bit": "uint8",
       "cint16": "complex_int16"}


def pixels(size, dtype, bands):
    """Smooth terrain-like content plus sensor noise (compresses like real data)."""
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    out = np.empty((bands, size, size),
                   dtype={"bit": np.uint8, "cint16": np.complex64}.get(dtype, dtype))
    for b in range(bands):
        f = (np.sin(xx / (97.0 + 11 * b)) * np.cos(yy / 131.0) + 0.4 * np.sin((xx + yy) / 29.0)
             + 1.5) / 3.0
        f += rng.normal(0, 0.01, size=f.shape).astype(np.float32)
        f = np.clip(f, 0, 1)
        if dtype == "uint8":
            out[b] = (f * 255).astype(np.uint8)
        elif dtype == "uint16":
            out[b] = (f * 4000).astype(np.uint16)
        elif dtype == "bit":  # a scanned map: shapes, lines, speckle
            m = f > 0.5
            m[::97, :] = True
            m[:, ::131] = False
            out[b] = m
        elif dtype == "cint16":
            out[b] = (f * 4000 - 2000) + 1j * (2000 - f * 3000)
        else:
            out[b] = f * 1000.0
    return out


def make_file(codec, size, tile, directory):
    dtype, bands, opts = CODECS[codec]
    comp = codec.split("_F32")[0] if codec.endswith("_F32") else codec
    key = hashlib.sha256(json.dumps([codec, size, tile, dtype, bands, opts, 1,
                                     rasterio.__gdal_version__]).encode()).hexdigest()[:12]
    path = os.path.join(directory, "%s_%d_%s.tif" % (codec, size, key))
    if os.path.exists(path):
        return path
    data = pixels(size, dtype, bands)
    tmp = path + ".tmp.tif"
    if codec == "OJPEG":
        F.ojpeg_file(data.shape, "tables", rps=tile, data=data)(tmp)
        os.replace(tmp, path)
        return path
    if any(o.startswith("COMPRESS=") for o in opts):
        driver, opts = "GTiff", ["TILED=YES", "BLOCKXSIZE=%d" % tile, "BLOCKYSIZE=%d" % tile,
                                 "NUM_THREADS=ALL_CPUS"] + opts
    else:
        driver, opts = "COG", ["COMPRESS=" + comp, "BLOCKSIZE=%d" % tile, "OVERVIEWS=NONE",
                               "NUM_THREADS=ALL_CPUS"] + opts
    with MemoryFile() as mf:
        with mf.open(driver="GTiff", width=size, height=size, count=bands, dtype=GDT[dtype],
                     tiled=True) as m:
            m.write(data)
        with mf.open() as m:
            rasterio.shutil.copy(m, tmp, driver=driver, **dict(o.split("=", 1) for o in opts))
    os.replace(tmp, path)
    return path


# --strips: the codecs of strip files (types and options from CODECS)
STRIP_CODECS = ["DEFLATE", "LZW", "JPEG", "OJPEG", "NONE"]


def make_strip_file(codec, size, rps, directory):
    """codec's image (CODECS' type and options) in strips of rps rows (0:
    one strip), written by GDAL's GTiff driver (OJPEG: rebuilt from GDAL's
    JPEG strips)."""
    dtype, bands, opts = CODECS[codec]
    rows = rps or size
    key = hashlib.sha256(json.dumps(["strips", codec, size, rows, dtype, bands, opts, 1,
                                     rasterio.__gdal_version__]).encode()).hexdigest()[:12]
    path = os.path.join(directory, "strips_%s_%d_%d_%s.tif" % (codec, size, rows, key))
    if os.path.exists(path):
        return path
    data = pixels(size, dtype, bands)
    tmp = path + ".tmp.tif"
    if codec == "OJPEG":
        F.ojpeg_file(data.shape, "tables", rps=rows, data=data)(tmp)
    else:
        co = dict(o.split("=", 1) for o in opts)
        co.update(COMPRESS=codec, TILED="NO", BLOCKYSIZE=str(rows))
        with rasterio.open(tmp, "w", driver="GTiff", width=size, height=size, count=bands,
                           dtype=GDT[dtype], **co) as m:
            m.write(data)
    os.replace(tmp, path)
    return path


def bench_strips(codec, rps, args):
    """One strip layout: rows per strip `rps` (0: one strip), windows in
    row order and in a random order; see the module's docstring."""
    path = make_strip_file(codec, args.size, rps, args.dir)
    with open(path, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    win = args.window
    wins = tiles(args.size, win)
    shuffled = list(wins)
    random.Random(1).shuffle(shuffled)
    with cogfeed.open(path) as cog:
        shape = (cog.count, cog.height, cog.width)
        dtype = cog.dtype
        nbytes = cog.count * cog.height * cog.width * np.dtype(cog.dtype).itemsize
    out = []
    for order, ws in (("rows", wins), ("random", shuffled)):
        res = {"codec": codec, "rows_per_strip": rps or args.size, "order": order,
               "dtype": str(dtype), "bands": shape[0], "size": args.size, "window": win,
               "file_mb": os.path.getsize(path) / 1e6, "decoded_mb": nbytes / 1e6}

        def cf(cache, ws=ws):
            with cogfeed.open(path, cogfeed.IO(cache_bytes=cache)) as c:
                parts = [c.read(window=w) for w in ws]
                res["decoded_per_delivered_" + ("cache" if cache == 0 else "nocache")] = \
                    c.stats()["decoded_bytes"] / c.stats()["delivered_bytes"]
                return parts

        def gdal(ws=ws):
            with rasterio.Env(GDAL_NUM_THREADS="1"), rasterio.open(path) as ds:
                return [ds.read(window=Window(*w)) for w in ws]

        variants = [("cogfeed", lambda: cf(0)), ("gdal", gdal)]
        if rps:
            variants.append(("cogfeed_nocache", lambda: cf(-1)))
        best, got = interleaved_best(args.repeat, variants)
        for k, t in best.items():
            res[k] = nbytes / t / 1e6
        res["ratio"] = res["cogfeed"] / res["gdal"]
        if rps:
            res["ratio_nocache"] = res["cogfeed_nocache"] / res["gdal"]
        mine = assemble(got["cogfeed"], ws, shape, dtype)
        ref = assemble([p.reshape((shape[0],) + p.shape[-2:]) for p in got["gdal"]], ws, shape,
                       mine.dtype)
        if codec in ("JPEG", "OJPEG"):  # libjpeg-turbo's pixels: Debian's GDAL
            ref = C.debian_gdal_read(path).reshape(shape)
        same = mine.tobytes() == ref.tobytes()
        if rps:
            same = same and assemble(got["cogfeed_nocache"], ws, shape,
                                     dtype).tobytes() == ref.tobytes()
        res["bit_exact"] = bool(same)
        out.append(res)
    return out


def print_strips_markdown(doc):
    print("| codec | rows per strip | order | file MB | cogfeed | cogfeed, no cache | GDAL | "
          "ratio | ratio, no cache | decoded / delivered | bit-exact |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in doc["results"]:
        nc = "cogfeed_nocache" in r
        print("| %s | %d | %s | %.1f | %.0f | %s | %.0f | %.2f | %s | %.2f%s | %s |" % (
            r["codec"], r["rows_per_strip"], r["order"], r["file_mb"], r["cogfeed"],
            "%.0f" % r["cogfeed_nocache"] if nc else "-", r["gdal"], r["ratio"],
            "%.2f" % r["ratio_nocache"] if nc else "-", r["decoded_per_delivered_cache"],
            " (%.2f)" % r["decoded_per_delivered_nocache"] if nc else "",
            "yes" if r["bit_exact"] else "NO"))
    print()
    print("GDAL %s, cogfeed %s, %d CPUs, load average before/after %.1f / %.1f." % (
        doc["gdal"], doc["cogfeed"], doc["cpus"], *doc["loadavg_before_after"]))


def main_strips(args):
    results = []
    load_before = os.getloadavg()[0]
    if not args.json:
        print("%d x %d strip files, %d px windows, 1 thread, best of %d; MB/s of window "
              "pixels; decoded-chunk caches cold at each round's start" % (
                  args.size, args.size, args.window, args.repeat))
        print("%-8s %5s %-7s %8s %9s %9s %9s %7s %7s %9s %s" % (
            "codec", "rps", "order", "file MB", "cogfeed", "no cache", "gdal", "ratio",
            "ratio nc", "dec/deliv", "exact"))
    for codec in args.strip_codecs.split(","):
        for rps in [int(v) for v in args.strip_rows.split(",")]:
            for r in bench_strips(codec, rps, args):
                results.append(r)
                if not args.json:
                    nc = "cogfeed_nocache" in r
                    print("%-8s %5d %-7s %8.1f %9.0f %9s %9.0f %7.2f %7s %9.2f %s" % (
                        codec, r["rows_per_strip"], r["order"], r["file_mb"], r["cogfeed"],
                        "%.0f" % r["cogfeed_nocache"] if nc else "-", r["gdal"], r["ratio"],
                        "%.2f" % r["ratio_nocache"] if nc else "-",
                        r["decoded_per_delivered_cache"],
                        "yes" if r["bit_exact"] else "NO"), flush=True)
    load = [load_before, os.getloadavg()[0]]
    doc = {"gdal": rasterio.__gdal_version__, "cogfeed": cogfeed.__version__,
           "cpus": os.cpu_count(), "loadavg_before_after": load, "strips": True,
           "results": results}
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        print()
    else:
        print("load average before/after: %.1f / %.1f on %d CPUs" % (load[0], load[1],
                                                                    os.cpu_count()))
    return 0 if all(r["bit_exact"] for r in results) else 1


def tiles(size, tile):
    return [(x, y, min(tile, size - x), min(tile, size - y))
            for y in range(0, size, tile) for x in range(0, size, tile)]


def interleaved_best(repeat, variants):
    """Best time of each variant over `repeat` rounds; every round runs all
    variants one after the other, so a burst of load from other processes
    hits cogfeed and GDAL alike instead of one of them."""
    best, result = {}, {}
    for _ in range(repeat):
        for name, fn in variants:
            t0 = time.perf_counter()
            result[name] = fn()
            dt = time.perf_counter() - t0
            best[name] = min(dt, best.get(name, dt))
    return best, result


def assemble(parts, wins, shape, dtype):
    out = np.empty(shape, dtype=dtype)
    for (x, y, w, h), a in zip(wins, parts):
        out[:, y:y + h, x:x + w] = a
    return out


def bench_codec(codec, args):
    path = make_file(codec, args.size, args.tile, args.dir)
    with open(path, "rb") as f:  # into the page cache
        while f.read(1 << 24):
            pass
    wins = tiles(args.size, args.tile)
    if codec == "OJPEG":  # a strip file: block by block is strip by strip
        wins = [(0, y, args.size, min(args.tile, args.size - y))
                for y in range(0, args.size, args.tile)]
    cog = cogfeed.open(path)
    shape = (cog.count, cog.height, cog.width)
    nbytes = cog.count * cog.height * cog.width * np.dtype(cog.dtype).itemsize
    res = {"codec": codec, "dtype": str(cog.dtype), "bands": cog.count, "size": args.size,
           "tile": args.tile, "file_mb": os.path.getsize(path) / 1e6, "decoded_mb": nbytes / 1e6,
           "threads": args.threads}

    chunks = [wins[i::args.threads] for i in range(args.threads)]

    def gdal_tiles():
        with rasterio.Env(GDAL_NUM_THREADS="1"), \
                rasterio.open(path) as ds:  # reopened: its block cache starts empty
            return [ds.read(window=Window(*w)) for w in wins]

    def gdal_whole_all_cpus():
        with rasterio.Env(GDAL_NUM_THREADS="ALL_CPUS"), rasterio.open(path) as ds:
            return ds.read()

    def gdal_pool_worker(ws):
        # GDAL datasets are not thread-safe: one each
        with rasterio.Env(GDAL_NUM_THREADS="1"), rasterio.open(path) as ds:
            return [ds.read(window=Window(*w)) for w in ws]

    with ThreadPoolExecutor(args.threads) as ex:
        variants = [
            ("cogfeed_1t", lambda: [cog.read(window=w) for w in wins]),
            ("gdal_1t", gdal_tiles),
            ("cogfeed_mt", lambda: list(ex.map(lambda w: cog.read(window=w), wins))),
            ("gdal_mt_whole", gdal_whole_all_cpus),
            ("gdal_mt_pool", lambda: list(ex.map(gdal_pool_worker, chunks))),
        ]
        best, out = interleaved_best(args.repeat, variants)
    cog.close()
    for k, t in best.items():
        res[k] = nbytes / t / 1e6
    mine = assemble(out["cogfeed_1t"], wins, shape, cog.dtype)
    mine_mt = assemble(out["cogfeed_mt"], wins, shape, cog.dtype)
    ref = assemble([p.reshape((cog.count,) + p.shape[-2:]) for p in out["gdal_1t"]], wins,
                   shape, mine.dtype)
    whole = out["gdal_mt_whole"]
    res["gdal_mt"] = max(res["gdal_mt_whole"], res["gdal_mt_pool"])
    res["ratio_1t"] = res["cogfeed_1t"] / res["gdal_1t"]
    res["ratio_mt"] = res["cogfeed_mt"] / res["gdal_mt"]
    whole = whole.reshape(shape)
    if codec in ("JPEG", "OJPEG"):  # libjpeg-turbo's pixels: Debian's GDAL
        ref = whole = C.debian_gdal_read(path).reshape(shape)
    res["bit_exact"] = bool(mine.tobytes() == ref.tobytes() == whole.tobytes() ==
                            mine_mt.tobytes())
    return res


def print_markdown(doc):
    res = doc["results"]
    n = res[0]["threads"] if res else 0
    print("| codec | dtype | file MB | cogfeed 1 thread | GDAL 1 thread | ratio | "
          "cogfeed %d threads | GDAL %d threads (whole / pool) | ratio | bit-exact |" % (n, n))
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in res:
        print("| %s | %s | %.1f | %.0f | %.0f | %.2f | %.0f | %.0f (%.0f / %.0f) | %.2f | %s |" % (
            r["codec"], "%sx%d" % (r["dtype"], r["bands"]) if r["bands"] > 1 else r["dtype"],
            r["file_mb"], r["cogfeed_1t"], r["gdal_1t"], r["ratio_1t"], r["cogfeed_mt"],
            r["gdal_mt"], r["gdal_mt_whole"], r["gdal_mt_pool"], r["ratio_mt"],
            "yes" if r["bit_exact"] else "NO"))
    print()
    print("GDAL %s, cogfeed %s, %d CPUs, load average before/after %.1f / %.1f." % (
        doc["gdal"], doc["cogfeed"], doc["cpus"], *doc["loadavg_before_after"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--codecs", default=",".join(CODECS))
    ap.add_argument("--dir", default=None,
                    help="cache of the generated files (default: the tests' data "
                    "folder's bench/, conformance.testdata_root())")
    ap.add_argument("--strips", action="store_true",
                    help="strip files read as windows instead (see above)")
    ap.add_argument("--strip-codecs", default=",".join(STRIP_CODECS))
    ap.add_argument("--strip-rows", default="16,64,0",
                    help="rows per strip of the layouts (0: one strip of the whole image)")
    ap.add_argument("--window", type=int, default=512, help="--strips: window size")
    ap.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ap.add_argument("--markdown", metavar="JSON",
                    help="print the table of a saved --json result as Markdown, run nothing")
    args = ap.parse_args()
    if args.markdown:
        with open(args.markdown) as f:
            doc = json.load(f)
        (print_strips_markdown if doc.get("strips") else print_markdown)(doc)
        return 0
    args.dir = args.dir or os.path.join(C.testdata_root(), "bench")
    os.makedirs(args.dir, exist_ok=True)
    if args.strips:
        return main_strips(args)
    results = []
    load_before = os.getloadavg()[0]
    if not args.json:
        print("%d x %d, %d px tiles, %d threads, best of %d; MB/s of decoded pixels" % (
            args.size, args.size, args.tile, args.threads, args.repeat))
        print("%-13s %-8s %8s %9s %9s %7s %9s %9s %7s %s" % (
            "codec", "dtype", "file MB", "cf 1t", "gdal 1t", "ratio", "cf %dt" % args.threads,
            "gdal %dt" % args.threads, "ratio", "exact"))
    for codec in args.codecs.split(","):
        r = bench_codec(codec, args)
        results.append(r)
        if not args.json:
            print("%-13s %-8s %8.1f %9.0f %9.0f %7.2f %9.0f %9.0f %7.2f %s" % (
                codec, "%sx%d" % (r["dtype"], r["bands"]) if r["bands"] > 1 else r["dtype"],
                r["file_mb"], r["cogfeed_1t"], r["gdal_1t"], r["ratio_1t"], r["cogfeed_mt"],
                r["gdal_mt"], r["ratio_mt"], "yes" if r["bit_exact"] else "NO"), flush=True)
    # The load average says how much other work shared the cores: numbers
    # taken on a busy machine are only comparable within one run.
    load = [load_before, os.getloadavg()[0]]
    if args.json:
        json.dump({"gdal": rasterio.__gdal_version__, "cogfeed": cogfeed.__version__,
                   "cpus": os.cpu_count(), "loadavg_before_after": load, "results": results},
                  sys.stdout, indent=1)
        print()
    else:
        print("load average before/after: %.1f / %.1f on %d CPUs" % (load[0], load[1],
                                                                    os.cpu_count()))
    return 0 if all(r["bit_exact"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
