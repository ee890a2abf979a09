"""One configuration of bench/peers.py, run in its own process.

    python bench/peers_lib/peers_runs.py CONFIG.json   # prints one JSON result

CONFIG["run"] names the runner: windows_cogfeed, windows_loader,
windows_async_tiff, windows_rasterio, windows_tifffile (a list of 512 px
windows), patches_cogfeed, patches_torchgeo, patches_baseline (training
batches of image + mask patches), decode (cogfeed's codecs against
imagecodecs).  bench/peers.py writes the config, starts this file with
the right interpreter (the peers' virtual environment; the project's own
for the paper-style baseline) and reads the result.

Every result has the same units: header_s (opening the files: their
headers), first_s (the first batch after that), then the warm part:
items (windows or patches), seconds, mb_per_s (decoded pixels delivered
at the files' own sample size: 4 x uint16 + the uint8 mask for patches),
items_per_s, cpu_s_per_gb (this process and its children, e.g.
DataLoader workers), peak_rss_mb (the sum of their peak resident sets),
requests_per_item (from the serving nginx's access log; None locally).
"""

import asyncio
import hashlib
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from cogfeed.tools import common


# -- measuring --------------------------------------------------------------

def tree():
    return common.descendants(os.getpid())


class Meter:
    """Wall time, CPU of the process tree and nginx requests between
    marks."""

    def __init__(self, log):
        self.log = common.LogCounter(log) if log else None
        self.t = time.perf_counter()
        self.cpu = common.cpu_seconds(tree())

    def mark(self):
        """(seconds, CPU seconds, requests or None) since the last mark."""
        t, cpu = time.perf_counter(), common.cpu_seconds(tree())
        req = self.log.take()[0] if self.log else None
        out = (t - self.t, cpu - self.cpu, req)
        self.t, self.cpu = t, cpu
        return out


def result(cfg, header, first, warm, items, nbytes, extra=None):
    """The result dict from three Meter marks."""
    s, cpu, req = warm
    gb = nbytes / 1e9
    r = {"header_s": header[0], "header_requests": header[2],
         "first_s": first[0], "first_requests": first[2],
         "items": items, "seconds": s, "bytes": nbytes,
         "mb_per_s": nbytes / 1e6 / s, "items_per_s": items / s,
         "cpu_s_per_gb": cpu / gb if gb else None,
         "peak_rss_mb": common.peak_rss_mb(tree()),
         "requests_per_item": None if req is None else req / items,
         "load_avg": os.getloadavg()[0]}
    r.update(extra or {})
    return r


def digest(arrays, hwc=False):
    """Short hash of arrays in (bands, h, w) order (hwc: given as (h, w,
    bands))."""
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(np.moveaxis(a, -1, 0) if hwc
                                      else a).tobytes())
    return h.hexdigest()[:12]


def paste_hwc(out, a, x, y, win, tx, ty, tw, th):
    """Copy the part of tile (tx, ty) (an (h, w, bands) array) that falls
    in the window at (x, y) into out, (h, w, bands) too: row copies, no
    transpose."""
    x0, y0 = max(x, tx * tw), max(y, ty * th)
    x1, y1 = min(x + win, (tx + 1) * tw), min(y + win, (ty + 1) * th)
    out[y0 - y:y1 - y, x0 - x:x1 - x] = \
        a[y0 - ty * th:y1 - ty * th, x0 - tx * tw:x1 - tx * tw]


# -- windows ----------------------------------------------------------------

def _split(cfg):
    w = [tuple(x) for x in cfg["windows"]]
    b = cfg["batch"]
    return w[:b], w[b:], cfg["win"]


def windows_cogfeed(cfg):
    """cogfeed.read_many: the first batch, then every other window in one
    call (all tiles requested together, decoded as they arrive)."""
    import cogfeed
    first, rest, win = _split(cfg)
    m = Meter(cfg.get("log"))
    with ThreadPoolExecutor(min(32, len(cfg["urls"]))) as ex:
        cogs = list(ex.map(cogfeed.open, cfg["urls"]))
    header = m.mark()
    a = cogfeed.read_many([(cogs[i], (x, y, win, win)) for i, x, y in first])
    f = m.mark()
    b = cogfeed.read_many([(cogs[i], (x, y, win, win)) for i, x, y in rest])
    warm = m.mark()
    return result(cfg, header, f, warm, len(rest), sum(x.nbytes for x in b),
                  {"digest": digest(a[:4])})


def windows_loader(cfg):
    """cogfeed.Loader, random 512 px patches of the same files (its own
    windows: the Loader samples them), images only, batch cfg["batch"],
    streamed for cfg["seconds"] after cfg["warmup"] batches (its ring
    reads ahead: a fixed count of windows would be served from it)."""
    import cogfeed
    return _drive(dict(cfg, patch=cfg["win"], mask_bytes=0),
                  lambda: cogfeed.Loader(
                      cfg["urls"], patch_size=cfg["win"],
                      batch_size=cfg["batch"], sampler="random", seed=0,
                      epoch_length=10 ** 9), lambda ld: ld.close())


def windows_async_tiff(cfg):
    """async-tiff through its own object-store layer (obstore's HTTPStore,
    or LocalStore): every window's tiles fetched with fetch_tiles and
    decoded on async-tiff's Rust thread pool, cfg["concurrency"] windows
    at once, pasted into an (h, w, bands) window: its own layout (a
    transpose to (bands, h, w) in numpy took a third of the event loop's
    thread, py-spy, and capped it)."""
    from async_tiff import TIFF, ThreadPool
    from async_tiff.store import HTTPStore, LocalStore
    first, rest, win = _split(cfg)
    conc = cfg["concurrency"]
    base = cfg["base"]
    if base.startswith("http"):
        store = HTTPStore.from_url(base, client_options={"allow_http": True})
    else:
        store = LocalStore(base)
    pool = ThreadPool(os.cpu_count() or 1)

    async def main():
        m = Meter(cfg.get("log"))
        tiffs = await asyncio.gather(*[TIFF.open(p, store=store)
                                       for p in cfg["paths"]])
        ifd = tiffs[0].ifds[0]
        tw, th = ifd.tile_width, ifd.tile_height
        bands = ifd.samples_per_pixel
        dt = np.dtype("uint%d" % ifd.bits_per_sample[0])
        header = m.mark()
        sem = asyncio.Semaphore(conc)

        async def one(w):
            i, x, y = w
            async with sem:
                xy = [(tx, ty)
                      for ty in range(y // th, (y + win - 1) // th + 1)
                      for tx in range(x // tw, (x + win - 1) // tw + 1)]
                tiles = await tiffs[i].fetch_tiles(xy, 0)
                arrs = await asyncio.gather(*[t.decode(pool=pool)
                                              for t in tiles])
            out = np.empty((win, win, bands), dt)
            for (tx, ty), a in zip(xy, arrs):
                # (h, w, bands): chunky tiles
                paste_hwc(out, np.asarray(a), x, y, win, tx, ty, tw, th)
            return out

        a = await asyncio.gather(*[one(w) for w in first])
        f = m.mark()
        b = await asyncio.gather(*[one(w) for w in rest])
        warm = m.mark()
        return result(cfg, header, f, warm, len(rest),
                      sum(x.nbytes for x in b),
                      {"digest": digest(a[:4], hwc=True)})

    return asyncio.run(main())


def windows_rasterio(cfg):
    """rasterio (PyPI: its wheel's GDAL) over /vsicurl/ or local paths,
    cfg["threads"] threads each with its own datasets (GDAL datasets are
    not thread-safe); GDAL's configuration comes from the environment
    peers.py sets (cfg["gdal"])."""
    import rasterio
    from rasterio.windows import Window
    first, rest, win = _split(cfg)
    n = cfg["threads"]
    local = threading.local()
    paths = cfg["paths"]

    def ds(i):
        d = getattr(local, "ds", None)
        if d is None:
            d = local.ds = {}
        if i not in d:
            d[i] = rasterio.open(paths[i])
        return d[i]

    def one(w):
        i, x, y = w
        return ds(i).read(window=Window(x, y, win, win))

    barrier = threading.Barrier(n)

    def opener(_):
        for i in range(len(paths)):
            ds(i)
        barrier.wait()

    m = Meter(cfg.get("log"))
    with ThreadPoolExecutor(n) as ex:
        list(ex.map(opener, range(n)))
        header = m.mark()
        a = list(ex.map(one, first))
        f = m.mark()
        b = list(ex.map(one, rest))
        warm = m.mark()
    return result(cfg, header, f, warm, len(rest), sum(x.nbytes for x in b),
                  {"digest": digest(a[:4]), "gdal_version":
                   rasterio.__gdal_version__})


def windows_tifffile(cfg):
    """tifffile + imagecodecs, local files: the tile bytes by pread, decoded
    by tifffile's page.decode (imagecodecs' codecs and predictors), pasted
    into an (h, w, bands) window, its own layout; cfg["threads"] threads
    over the windows."""
    import tifffile
    first, rest, win = _split(cfg)
    m = Meter(None)
    files = []
    for p in cfg["paths"]:
        tf = tifffile.TiffFile(p)
        pg = tf.pages[0]
        files.append((os.open(p, os.O_RDONLY), pg, pg.dataoffsets,
                      pg.databytecounts, pg.decode, tf))
    pg = files[0][1]
    tw, th = pg.tilewidth, pg.tilelength
    across = (pg.imagewidth + tw - 1) // tw
    bands, dt = pg.samplesperpixel, pg.dtype
    jt = pg.jpegtables
    header = m.mark()

    def one(w):
        i, x, y = w
        fd, _, offs, counts, decode, _ = files[i]
        out = np.empty((win, win, bands), dt)
        for ty in range(y // th, (y + win - 1) // th + 1):
            for tx in range(x // tw, (x + win - 1) // tw + 1):
                k = ty * across + tx
                data = os.pread(fd, counts[k], offs[k])
                a = decode(data, k, jpegtables=jt)[0]   # (1, h, w, bands)
                paste_hwc(out, a.reshape(a.shape[-3:]), x, y, win, tx, ty,
                          tw, th)
        return out

    with ThreadPoolExecutor(cfg["threads"]) as ex:
        a = list(ex.map(one, first))
        f = m.mark()
        b = list(ex.map(one, rest))
        warm = m.mark()
    return result(cfg, header, f, warm, len(rest), sum(x.nbytes for x in b),
                  {"digest": digest(a[:4], hwc=True)})


# -- training patches -------------------------------------------------------

def _patch_bytes(cfg):
    """Pixel bytes of one patch at the files' own sample sizes (uint16
    image bands + the uint8 mask), whatever dtype a loader hands out."""
    p = cfg["patch"]
    return p * p * (cfg["bands"] * 2 + cfg.get("mask_bytes", 1))


def _endless(ld):
    """Batches of ld across epochs: a grid sampler's epoch ends (all the
    windows once), and a small dataset's may end within the run."""
    while True:
        got = False
        for b in ld:
            got = True
            yield b
        if not got:
            raise RuntimeError("an epoch with no batch")


def _drive(cfg, make, close=None):
    """Construct a loader (header time), take its first batch (cold), then
    with cfg["cold_batches"] the rate over that many first batches apart
    (nothing cached yet: cold), skip cfg["warmup"] batches, then count
    patches for cfg["seconds"] (warm)."""
    m = Meter(cfg.get("log"))
    ld = make()
    header = m.mark()
    it = _endless(ld)
    n = int(next(it)["image"].shape[0])
    f = m.mark()
    t0 = time.perf_counter()
    for _ in range(cfg.get("cold_batches", 1) - 1):
        n += int(next(it)["image"].shape[0])
    cold = {"cold_items": n, "cold_s": f[0] + time.perf_counter() - t0}
    cold["cold_items_per_s"] = n / cold["cold_s"]
    for _ in range(cfg["warmup"]):
        next(it)
    m.mark()
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < cfg["seconds"]:
        b = next(it)
        n += int(b["image"].shape[0])
    warm = m.mark()
    r = result(cfg, header, f, warm, n, n * _patch_bytes(cfg),
               cold if "cold_batches" in cfg else None)
    stats = getattr(ld, "stats", None)   # cogfeed's Loader: decoded bytes
    if callable(stats):                  # per delivered byte, whole run
        st = stats()
        if isinstance(st, dict) and "decoded_per_read" in st:
            r["decoded_per_read"] = st["decoded_per_read"]
            r["cache_hit_rate"] = st.get("cache_hit_rate")
    it.close()
    if close:
        close(ld)
    stop = getattr(getattr(ld, "_iterator", None), "_shutdown_workers",
                   None)   # a DataLoader's persistent workers
    if stop:
        stop()
    return r


def patches_cogfeed(cfg):
    import cogfeed
    kw = {}
    if cfg["sampler"] == "random":
        kw["epoch_length"] = 10 ** 9
    return _drive(cfg, lambda: cogfeed.Loader(
        cfg["images"], masks=cfg["masks"], patch_size=cfg["patch"],
        batch_size=cfg["batch"], sampler=cfg["sampler"], seed=0, **kw),
        lambda ld: ld.close())


def patches_baseline(cfg):
    import rasterio  # noqa: F401  (imports are not header time)
    import torch  # noqa: F401
    from cogfeed.tools.baseline import BaselineLoader
    return _drive(cfg, lambda: BaselineLoader(
        cfg["images"], cfg["masks"], patch_size=cfg["patch"],
        batch_size=cfg["batch"], sampler=cfg["sampler"], seed=0,
        workers=cfg["workers"], prefetch_factor=2),
        lambda ld: ld.close())


def _drop_vsicurl(_):
    import rasterio.cache
    rasterio.cache.invalidate_all()


def patches_torchgeo(cfg):
    """TorchGeo as its tutorials use it: an image RasterDataset & a mask
    RasterDataset (an IntersectionDataset), RandomGeoSampler or
    GridGeoSampler of patch x patch pixels, a DataLoader with
    stack_samples, cfg["workers"] persistent workers.  Each worker first
    drops the GDAL /vsicurl/ state it inherited (rasterio.cache.
    invalidate_all): forked from the main process, which opened every
    file to build the index, the workers would otherwise share its
    connections and read each other's responses ("ZSTD_decompress():
    Unknown frame descriptor" in LERC_ZSTD tiles, seen here).  A fork
    server avoids that too, but starts every worker's imports anew
    (minutes on 2 busy cores) and shares no memory with the parent."""
    import torch
    from torch.utils.data import DataLoader
    from torchgeo.datasets import stack_samples
    from torchgeo.samplers import GridGeoSampler, RandomGeoSampler
    from peers_torchgeo import Images, Masks

    torch.set_num_threads(1)

    def make():
        ds = Images(paths=cfg["images"]) & Masks(paths=cfg["masks"])
        if cfg["sampler"] == "random":
            smp = RandomGeoSampler(ds, size=cfg["patch"], length=10 ** 6)
        else:
            smp = GridGeoSampler(ds, size=cfg["patch"], stride=cfg["patch"])
        w = cfg["workers"]
        remote = any("://" in p for p in cfg["images"])
        return DataLoader(ds, sampler=smp, batch_size=cfg["batch"],
                          num_workers=w, collate_fn=stack_samples,
                          persistent_workers=w > 0,
                          prefetch_factor=2 if w else None,
                          worker_init_fn=_drop_vsicurl if remote and w
                          else None)

    return _drive(cfg, make)


# -- time series (bench/series_bench.py) --------------------------------------

def _cogfeed_on_region(cfg, images, kw):
    """A cogfeed.Loader of `images` (one sample source) onto the region's
    grid, random patches (kw: how it reads them); with cfg["check"], the
    digests of the check windows' patches instead."""
    import cogfeed
    g = cogfeed.Grid(cfg["crs"], geotransform=cfg["gt"], width=cfg["width"],
                     height=cfg["height"])
    if cfg.get("check"):
        out = []
        for x, y in cfg["check"]:
            with cogfeed.Loader(images, grid=g.window(x, y, cfg["patch"], cfg["patch"]),
                                patch_size=cfg["patch"], batch_size=1, sampler="grid",
                                **kw) as ld:
                out.append(digest([next(iter(ld))["image"][0]]))
        return {"digests": out}
    return _drive(cfg, lambda: cogfeed.Loader(
        images, grid=g, patch_size=cfg["patch"], batch_size=cfg["batch"],
        sampler="random", seed=0, epoch_length=10 ** 9, cache_bytes=cfg["cache_bytes"],
        inflight_bytes=cfg.get("inflight_bytes"), **kw), lambda ld: ld.close())


def _check_slices(cfg):
    """The check windows as TorchGeo's (x, y) slices of the region."""
    x0, res, _, y1, _, _ = cfg["gt"]
    for x, y in cfg["check"]:
        yield (slice(x0 + x * res, x0 + (x + cfg["patch"]) * res, res),
               slice(y1 - (y + cfg["patch"]) * res, y1 - y * res, res))


def series_cogfeed(cfg):
    """cogfeed.Loader over the series: each location's dates a mosaic of
    the two tiles (the first with data gives each pixel), read onto the
    region's grid, random patches, float32 and a valid plane per date."""
    return _cogfeed_on_region(cfg, [cfg["series"]], dict(
        dates=[cfg["dates"]], resampling="nearest", dtype="float32", valid_mask=True))


def series_torchgeo(cfg):
    """TorchGeo's time-series sampling of the same files: a RasterDataset
    dated from the file names, RandomGeoSampler locations, each sample the
    dataset's slice of every date's interval (its per-date mosaic,
    rasterio.merge) stacked to (T, C, H, W) (peers_torchgeo.DateMosaics),
    a DataLoader with stack_samples and cfg["workers"] persistent workers;
    with cfg["check"], the digests at the check windows."""
    import pandas as pd
    import torch
    from torch.utils.data import DataLoader
    from torchgeo.datasets import stack_samples
    from torchgeo.samplers import RandomGeoSampler
    from peers_torchgeo import DateMosaics, SeriesScenes

    torch.set_num_threads(1)
    iv = [(pd.Timestamp(a), pd.Timestamp(b)) for a, b in cfg["intervals"]]
    if cfg.get("check"):
        ds = DateMosaics(SeriesScenes(paths=cfg["files"]), iv)
        return {"digests": [digest([ds[sl]["image"].numpy()]) for sl in _check_slices(cfg)]}

    def make():
        ds = SeriesScenes(paths=cfg["files"])
        smp = RandomGeoSampler(ds, size=cfg["patch"], length=10 ** 6)
        w = cfg["workers"]
        remote = any("://" in p for p in cfg["files"])
        return DataLoader(DateMosaics(ds, iv), sampler=smp, batch_size=cfg["batch"],
                          num_workers=w, collate_fn=stack_samples,
                          persistent_workers=w > 0, prefetch_factor=2 if w else None,
                          worker_init_fn=_drop_vsicurl if remote and w else None)

    return _drive(cfg, make)


# -- a region of scenes in two zones (bench/geo_sampling_bench.py) -------------

def mosaic_cogfeed(cfg):
    """cogfeed.Loader(mosaic=True) over the scenes onto the region's grid
    (the first with data gives each pixel, the other zone's reprojected),
    random patches, float32 and bilinear as TorchGeo reads them."""
    return _cogfeed_on_region(cfg, [cfg["scenes"]], dict(
        mosaic=True, resampling="bilinear", dtype="float32", scale_offset=False))


def mosaic_torchgeo(cfg):
    """TorchGeo as its tutorials use it over such a region: a RasterDataset
    of the scenes with the region's CRS and resolution (the other zone's
    scene warped by a WarpedVRT), RandomGeoSampler, DataLoader with
    stack_samples and cfg["workers"] persistent workers; each sample the
    merge of the scenes under it (rasterio.merge: the first with data);
    with cfg["check"], the digests of the check windows."""
    import torch
    from pyproj import CRS
    from torch.utils.data import DataLoader
    from torchgeo.datasets import stack_samples
    from torchgeo.samplers import RandomGeoSampler
    from peers_torchgeo import RegionScenes

    torch.set_num_threads(1)
    crs, res = CRS.from_epsg(cfg["crs"]), cfg["gt"][1]
    if cfg.get("check"):
        ds = RegionScenes(paths=cfg["scenes"], crs=crs, res=res)
        return {"digests": [digest([ds[sl]["image"].numpy()]) for sl in _check_slices(cfg)]}

    def make():
        ds = RegionScenes(paths=cfg["scenes"], crs=crs, res=res)
        smp = RandomGeoSampler(ds, size=cfg["patch"], length=10 ** 6)
        w = cfg["workers"]
        remote = any("://" in p for p in cfg["scenes"])
        return DataLoader(ds, sampler=smp, batch_size=cfg["batch"], num_workers=w,
                          collate_fn=stack_samples, persistent_workers=w > 0,
                          prefetch_factor=2 if w else None,
                          worker_init_fn=_drop_vsicurl if remote and w else None)

    return _drive(cfg, make)


# -- decode -----------------------------------------------------------------

# imagecodecs' own codec function for each row (the library call alone, no
# tifffile around it, no predictor), and the keyword arguments it needs.
IC_CODEC = {"DEFLATE": "deflate_decode", "DEFLATE_F32": "deflate_decode",
            "LZW": "lzw_decode", "PACKBITS": "packbits_decode",
            "ZSTD": "zstd_decode", "LERC": "lerc_decode",
            "LERC_DEFLATE": "lerc_decode", "LERC_ZSTD": "lerc_decode",
            "JPEG": "jpeg8_decode", "WEBP": "webp_decode"}


def decode(cfg):
    """Each codec's file: every tile's compressed bytes, read into memory
    beforehand, decoded by cogfeed (Cog.decode_tile: the tile as stored,
    (h, w, bands), predictor undone) and by imagecodecs (tifffile's
    page.decode of the same bytes: the same layout, predictor undone),
    with 1 thread and with cfg["threads"] -- like for like.  Beside them,
    in their own columns: cogfeed's end-to-end Cog.read of each tile's
    window (pread from the page cache, decode, paste into (bands, h, w)),
    and imagecodecs' bare codec function on the same bytes (the library
    call alone, 1 thread: no tifffile, no predictor), which separates the
    library's time from the code around it.  The best of cfg["repeat"]
    rounds, each round running every variant in turn; bit-exactness of
    decode_tile against imagecodecs checked."""
    import cogfeed
    import imagecodecs
    import tifffile
    out = {"imagecodecs": imagecodecs.__version__,
           "tifffile": tifffile.__version__,
           "libraries": imagecodecs.version(), "codecs": []}
    n = cfg["threads"]
    for codec, path in cfg["files"]:
        tf = tifffile.TiffFile(path)
        pg = tf.pages[0]
        with open(path, "rb") as f:
            raw = f.read()
        segs = [raw[o:o + c] for o, c in zip(pg.dataoffsets,
                                             pg.databytecounts)]
        tw, th = pg.tilewidth, pg.tilelength
        across = (pg.imagewidth + tw - 1) // tw
        wins = [((k % across) * tw, (k // across) * th,
                 min(tw, pg.imagewidth - (k % across) * tw),
                 min(th, pg.imagelength - (k // across) * th))
                for k in range(len(segs))]
        dec, jt = pg.decode, pg.jpegtables
        cog = cogfeed.open(path)
        # every tile whole, as stored (the files are multiples of the tile)
        nbytes = len(segs) * tw * th * cog.count * cog.dtype.itemsize
        ex = ThreadPoolExecutor(n)

        def ic(k):
            return dec(segs[k], k, jpegtables=jt)[0]   # (1, h, w, bands)

        def cf(k):
            return cog.decode_tile(segs[k], k)         # (h, w, bands)

        def cf_read(k):
            return cog.read(window=wins[k])            # (bands, h, w)

        ks = range(len(segs))
        variants = [("cogfeed_1t", lambda: [cf(k) for k in ks]),
                    ("imagecodecs_1t", lambda: [ic(k) for k in ks]),
                    ("cogfeed_mt", lambda: list(ex.map(cf, ks))),
                    ("imagecodecs_mt", lambda: list(ex.map(ic, ks))),
                    ("cogfeed_read_1t", lambda: [cf_read(k) for k in ks]),
                    ("cogfeed_read_mt", lambda: list(ex.map(cf_read, ks)))]
        fn = IC_CODEC.get(codec)
        if fn:
            bare = getattr(imagecodecs, fn)
            kw = {"tables": jt} if fn == "jpeg8_decode" and jt else {}
            if fn in ("deflate_decode", "lzw_decode", "packbits_decode",
                      "zstd_decode"):
                # the decoded size, as tifffile passes it: no guessing
                kw = {"out": tw * th * cog.count * cog.dtype.itemsize}
            variants.append(("imagecodecs_codec_1t",
                             lambda: [bare(segs[k], **kw) for k in ks]))
        # wall time, and CPU time of the process (all its threads): on a
        # machine shared with other work the CPU seconds per GB move less
        best, last, cpu = {}, {}, {}
        for _ in range(cfg["repeat"]):
            for name, run in variants:
                c0, t0 = time.process_time(), time.perf_counter()
                last[name] = run()
                dt = time.perf_counter() - t0
                dc = time.process_time() - c0
                best[name] = min(dt, best.get(name, dt))
                cpu[name] = min(dc, cpu.get(name, dc))
        ex.shutdown()
        same = all(np.array_equal(a, b[0].reshape(a.shape))
                   for a, b in zip(last["cogfeed_1t"], last["imagecodecs_1t"]))
        same_read = all(np.array_equal(a[:, :b.shape[0], :b.shape[1]],
                                       np.moveaxis(b, -1, 0)[:, :a.shape[1],
                                                             :a.shape[2]])
                        for a, b in zip(last["cogfeed_read_1t"],
                                        last["cogfeed_1t"]))
        r = {"codec": codec, "dtype": str(cog.dtype), "bands": cog.count,
             "tiles": len(segs), "file_mb": len(raw) / 1e6,
             "decoded_mb": nbytes / 1e6, "bit_exact": bool(same and same_read),
             "threads": n, "load_avg": os.getloadavg()[0]}
        for k, t in best.items():
            r[k] = nbytes / t / 1e6
        for k, t in cpu.items():   # CPU seconds per GB of decoded pixels
            r["cpu_s_per_gb_" + k] = t / (nbytes / 1e9)
        r["ratio_cpu_1t"] = (r["cpu_s_per_gb_imagecodecs_1t"] /
                             r["cpu_s_per_gb_cogfeed_1t"])
        r["ratio_cpu_mt"] = (r["cpu_s_per_gb_imagecodecs_mt"] /
                             r["cpu_s_per_gb_cogfeed_mt"])
        r["ratio_1t"] = r["cogfeed_1t"] / r["imagecodecs_1t"]
        r["ratio_mt"] = r["cogfeed_mt"] / r["imagecodecs_mt"]
        r["ratio_read_1t"] = r["cogfeed_read_1t"] / r["imagecodecs_1t"]
        r["ratio_read_mt"] = r["cogfeed_read_mt"] / r["imagecodecs_mt"]
        cog.close()
        tf.close()
        out["codecs"].append(r)
        sys.stderr.write("decode %-13s cogfeed %7.0f / %7.0f MB/s, "
                         "imagecodecs %7.0f / %7.0f (1 / %d threads); "
                         "Cog.read %7.0f / %7.0f; imagecodecs codec alone "
                         "%s%s\n" % (
                             codec, r["cogfeed_1t"], r["cogfeed_mt"],
                             r["imagecodecs_1t"], r["imagecodecs_mt"], n,
                             r["cogfeed_read_1t"], r["cogfeed_read_mt"],
                             "%.0f" % r["imagecodecs_codec_1t"]
                             if "imagecodecs_codec_1t" in r else "-",
                             "" if same and same_read else "  NOT BIT-EXACT"))
    return out


# Codec -> (dtype, bands, creation options), as bench/codec_bench.py: the
# type each codec is typically used with.
CODECS = {
    "NONE": ("uint16", 4, []),
    "DEFLATE": ("uint16", 4, ["PREDICTOR=2"]),
    "LZW": ("uint16", 4, ["PREDICTOR=2"]),
    "PACKBITS": ("uint8", 3, []),
    "ZSTD": ("uint16", 4, ["PREDICTOR=2"]),
    "DEFLATE_F32": ("float32", 1, ["PREDICTOR=3"]),
    "LERC": ("float32", 1, []),
    "LERC_DEFLATE": ("float32", 1, []),
    "LERC_ZSTD": ("uint16", 4, []),
    "JPEG": ("uint8", 3, ["QUALITY=85"]),
    "WEBP": ("uint8", 3, ["QUALITY=80"]),
}


def decode_files(cfg):
    """One COG per codec of CODECS, made once by this environment's GDAL
    (rasterio's) from the top-left size x size of a synthetic scene:
    uint16 reflectance as it is, uint8 RGB scaled from it, float32 NIR
    reflectance."""
    import rasterio
    from rasterio.windows import Window
    size, folder = cfg["size"], cfg["folder"]
    os.makedirs(folder, exist_ok=True)
    with rasterio.open(cfg["source"]) as src:
        refl = src.read(window=Window(0, 0, size, size))
    files = []
    for codec, (dt, bands, opts) in CODECS.items():
        path = os.path.join(folder, "%s.tif" % codec.lower())
        files.append((codec, path))
        if os.path.exists(path):
            continue
        if dt == "uint8":
            a = np.clip(refl[[2, 1, 0]] / 8.0, 0, 255).astype(np.uint8)
        elif dt == "float32":
            a = (refl[3:4] / 10000.0).astype(np.float32)
        else:
            a = refl[:bands]
        co = dict(o.split("=") for o in opts)
        co.update(compress=codec.split("_F32")[0], blocksize=512,
                  overviews="NONE", interleave="PIXEL")
        with rasterio.open(path + ".tmp.tif", "w", driver="COG", width=size,
                           height=size, count=a.shape[0], dtype=dt,
                           **co) as dst:
            dst.write(a)
        os.replace(path + ".tmp.tif", path)
    return {"files": files}


RUNS = {f.__name__: f for f in (
    decode_files,
    windows_cogfeed, windows_loader, windows_async_tiff, windows_rasterio,
    windows_tifffile, patches_cogfeed, patches_baseline, patches_torchgeo,
    series_cogfeed, series_torchgeo, mosaic_cogfeed, mosaic_torchgeo, decode)}


def main(argv):
    with open(argv[0]) as f:
        cfg = json.load(f)
    r = RUNS[cfg["run"]](cfg)
    json.dump(r, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    # DataLoader workers, thread pools: nothing left to wait for.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
