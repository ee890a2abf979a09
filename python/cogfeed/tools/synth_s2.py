"""cogfeed synth --layout s2: what the public Sentinel-2 L2A archives hold,
made from nothing.

One COG per band, each on its own grid of one UTM zone (EPSG:32633), with
internal overviews and nodata 0 as the archives have them:

    B02 B03 B04 B08                 10 m  uint16
    B05 B06 B07 B8A B11 B12         20 m  uint16
    SCL                             20 m  uint8 scene classes (0 = no data)
    B01 B09                         60 m  uint16

plus what a training set brings from elsewhere: a DEM in EPSG:4326
(float32, ~1 arc-second, nodata -9999, a hole of nodata) and a label raster
on another grid (15 m, its origin 7 m east and 3 m south of the tile's,
uint8 land cover, 255 outside the surveyed area).

The scene is synth.py's: one land-cover map at 10 m renders every band with
its class signature; 20 m and 60 m bands are the 10 m rendering averaged
over 2 x 2 and 6 x 6 pixels, as a coarser sensor band integrates it.
Everything derives from (seed, tile); the same seed writes the same pixels.
"""

import os
import sys

import numpy as np

from . import synth

TILE = "T33TWN"
UTM_EPSG = 32633
X0, Y0 = 500000.0, 5100000.0

BANDS_10 = ("B02", "B03", "B04", "B08")
BANDS_20 = ("B05", "B06", "B07", "B8A", "B11", "B12")
BANDS_60 = ("B01", "B09")

# L2A reflectance x 10000 per class (water, forest, cropland, grassland,
# urban, bare) of the bands synth.py does not render: red edge, narrow
# NIR, SWIR, coastal aerosol, water vapour (published spectra's ranges).
SIGNATURES_EXTRA = {
    "B05": [300, 620, 900, 1050, 1400, 2400],
    "B06": [220, 2300, 2900, 2000, 1550, 2600],
    "B07": [200, 2800, 3500, 2300, 1650, 2700],
    "B8A": [160, 3200, 4000, 2600, 1780, 2850],
    "B11": [80, 1500, 2200, 2400, 2100, 3300],
    "B12": [50, 700, 1200, 1500, 1900, 2900],
    "B01": [700, 300, 450, 500, 1150, 1300],
    "B09": [60, 1000, 1300, 900, 700, 900],
}

# synth's classes -> SCL codes: water 6, vegetation 4, not vegetated 5.
SCL_OF_CLASS = np.array([6, 4, 4, 4, 5, 5], dtype=np.uint8)


def _block_mean(a, k):
    h, w = a.shape
    return a.reshape(h // k, k, w // k, k).mean(axis=(1, 3))


def _write(path, arr, transform, crs, nodata, names, resampling, tile):
    """arr (bands, h, w) as a COG with internal overviews."""
    import rasterio
    import rasterio.shutil
    from rasterio.io import MemoryFile
    bands, h, w = arr.shape
    prof = dict(driver="GTiff", width=w, height=h, count=bands, dtype=arr.dtype.name,
                crs=crs, transform=transform, nodata=nodata)
    tmp = path + ".part"
    with MemoryFile() as mf:
        with mf.open(**prof) as ds:
            ds.write(arr)
            for i, n in enumerate(names):
                ds.set_band_description(i + 1, n)
        with mf.open() as ds:
            rasterio.shutil.copy(ds, tmp, driver="COG", BLOCKSIZE=tile, COMPRESS="DEFLATE",
                                 PREDICTOR="YES", OVERVIEWS="AUTO",
                                 OVERVIEW_RESAMPLING=resampling)
    os.replace(tmp, path)


def _clouds(rng, size, cover=0.08):
    """Cloud masks: thresholded smooth noise, a few blobs."""
    f = synth.fractal_noise(rng, size, 3.6, lowcut=2.0)
    thick = f > np.quantile(f, 1 - cover)
    thin = (f > np.quantile(f, 1 - 2 * cover)) & ~thick
    return thick, thin


def layout(outdir):
    """Paths of the layout's files."""
    d = os.path.join(outdir, "s2", TILE)
    p = {b: os.path.join(d, b + ".tif") for b in BANDS_10 + BANDS_20 + BANDS_60 + ("SCL",)}
    p["DEM"] = os.path.join(d, "dem_4326.tif")
    p["LABELS"] = os.path.join(d, "labels_15m.tif")
    return p


def synth_s2(outdir, size=1098, seed=0, tile=512, progress=True):
    """Write the tile (size: pixels of a 10 m band, a multiple of 6);
    return layout(outdir)."""
    from rasterio.transform import from_origin
    if size < 96 or size > 10980 or size % 6:
        raise synth.UsageError("synth --layout s2: --size must be a multiple of 6 in "
                               "96..10980, got %d" % size)
    paths = layout(outdir)
    os.makedirs(os.path.dirname(paths["B02"]), exist_ok=True)
    rng = np.random.default_rng([seed, 2])
    cls = synth.land_cover(rng, size)
    base = synth.render(rng, cls).astype(np.float32)       # B02 B03 B04 B08 at 10 m
    texture = base[3] / np.maximum(synth.SIGNATURES[cls][..., 3], 1)
    thick, thin = _clouds(rng, size)
    crs = "EPSG:%d" % UTM_EPSG

    def finish(a):
        a = np.where(thick, 6500 + 300 * rng.standard_normal(a.shape), a)
        a = np.where(thin, a * 0.6 + 2000, a)
        return np.clip(np.rint(a), 1, 10000).astype(np.uint16)

    def say(msg):
        if progress:
            sys.stderr.write("synth s2: %s\n" % msg)

    for k, res in ((1, 10.0), (2, 20.0), (6, 60.0)):
        names = BANDS_10 if k == 1 else BANDS_20 if k == 2 else BANDS_60
        for b in names:
            if b in BANDS_10:
                full = base[BANDS_10.index(b)]
            else:
                sig = np.array(SIGNATURES_EXTRA[b], dtype=np.float32)[cls]
                full = sig * texture + rng.normal(0, 6, cls.shape)
            full = finish(full).astype(np.float32)
            a = _block_mean(full, k) if k > 1 else full
            a = np.clip(np.rint(a), 1, 10000).astype(np.uint16)
            a[:, : max(1, a.shape[1] // 40)] = 0  # the orbit's edge: no data
            _write(paths[b], a[None], from_origin(X0, Y0, res, res), crs, 0, (b,),
                   "AVERAGE", tile)
            say("%s %dx%d at %g m" % (b, a.shape[1], a.shape[0], res))
    # SCL at 20 m: the mode of each 2 x 2 block of the class map, clouds on top.
    scl = SCL_OF_CLASS[cls].reshape(size // 2, 2, size // 2, 2)[:, 0, :, 0].copy()
    scl[thick[::2, ::2]] = 9
    scl[thin[::2, ::2]] = 8
    scl[:, : max(1, scl.shape[1] // 40)] = 0
    _write(paths["SCL"], scl[None], from_origin(X0, Y0, 20, 20), crs, 0, ("SCL",), "NEAREST",
           tile)
    say("SCL %dx%d at 20 m" % scl.shape[::-1])
    # DEM in WGS 84, ~1 arc-second, over the tile and a margin.
    from rasterio.warp import transform_bounds
    west, south, east, north = transform_bounds(crs, "EPSG:4326", X0, Y0 - size * 10,
                                                X0 + size * 10, Y0)
    step = 1.0 / 3600
    w = int(np.ceil((east - west) / step)) + 20
    h = int(np.ceil((north - south) / step)) + 20
    n = max(w, h)
    elev = synth.fractal_noise(rng, n, 3.8, lowcut=1.5)[:h, :w]
    dem = (600 + 350 * elev).astype(np.float32)
    dem[h // 3: h // 3 + h // 20, w // 2: w // 2 + w // 15] = -9999  # void
    _write(paths["DEM"], dem[None], from_origin(west - 10 * step, north + 10 * step, step, step),
           "EPSG:4326", -9999.0, ("elevation",), "AVERAGE", tile)
    say("DEM %dx%d in EPSG:4326" % (w, h))
    # Labels on another grid: 15 m, origin shifted by (+7 m, -3 m).
    n15 = (size * 10 - 15) // 15
    yy = (Y0 - 3 - 7.5 - 15 * np.arange(n15))[:, None]
    xx = (X0 + 7 + 7.5 + 15 * np.arange(n15))[None, :]
    iy = np.clip(((Y0 - yy) / 10).astype(int), 0, size - 1)
    ix = np.clip(((xx - X0) / 10).astype(int), 0, size - 1)
    lab = cls[iy, ix].astype(np.uint8)
    lab[: n15 // 10, :] = 255  # not surveyed
    _write(paths["LABELS"], lab[None], from_origin(X0 + 7, Y0 - 3, 15, 15), crs, 255,
           ("landcover",), "NEAREST", tile)
    say("labels %dx%d at 15 m" % (n15, n15))
    return paths
