"""Encoding speed: cogfeed.write against GDAL writing the same tiled
GeoTIFF, one row per codec (issue 29: "encoders at least as fast as
GDAL's for the same codec and level").  Two GDALs: rasterio's wheel
(its own builds of libdeflate, libzstd, libwebp, liblerc and libjpeg 9),
and Debian's gdal_translate, which links the same Debian codec libraries
as cogfeed, so its column compares the encoders' own code.

Both write the same image, same tile size, same codec, level, predictor
and quality, one thread each (GDAL NUM_THREADS=1), no overviews, so only
encoding and writing are compared.  Debian's GDAL translates an
uncompressed copy of the image (in the page cache); its process start-up
(a 16 x 16 px translate with the same options, best of --repeat) is
taken off its time.  Runs alternate (cogfeed, GDAL,
cogfeed, ...); the best of --repeat runs is reported, in MB/s of raw
pixels, with the compression ratio (raw / file) and whether the two files
decode to the same pixels (read back by GDAL).

    python bench/encode_bench.py [--size 4096] [--repeat 3] [--dir /tmp]
"""

import argparse
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np
import rasterio

import cogfeed

# name: (bands, dtype, cogfeed kwargs, GDAL creation options)
CODECS = {
    "DEFLATE": (4, "uint16", dict(compression="deflate", level=6),
                dict(compress="DEFLATE", zlevel=6, predictor=2)),
    "ZSTD": (4, "uint16", dict(compression="zstd", level=9),
             dict(compress="ZSTD", zstd_level=9, predictor=2)),
    "LERC_ZSTD": (4, "uint16", dict(compression="lerc_zstd", level=9),
                  dict(compress="LERC_ZSTD", zstd_level=9, max_z_error=0)),
    "JPEG": (3, "uint8", dict(compression="jpeg", quality=75),
             dict(compress="JPEG", jpeg_quality=75, photometric="YCBCR")),
    "WEBP": (3, "uint8", dict(compression="webp", quality=75),
             dict(compress="WEBP", webp_level=75)),
}


def image(bands, dtype, n, seed=0):
    """Smooth fields with noise: something between a DEM and a photo."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:n, 0:n].astype(np.float32)
    top = 255 if dtype == "uint8" else 4000
    a = np.stack([(np.sin(x / (40 + 7 * b)) + np.cos(y / (55 - 5 * b))) * top / 4 + top / 2
                  for b in range(bands)])
    a += rng.normal(0, top / 100, a.shape).astype(np.float32)
    return np.clip(a, 0, top).astype(dtype)


def write_gdal(path, a, tile, co):
    b, h, w = a.shape
    with rasterio.Env(GDAL_NUM_THREADS="1"):
        with rasterio.open(path, "w", driver="GTiff", width=w, height=h, count=b,
                           dtype=a.dtype, tiled=True, blockxsize=tile, blockysize=tile,
                           interleave="pixel", num_threads=1, **co) as d:
            d.write(a)


def write_debian(path, src, tile, co, srcwin=None):
    """gdal_translate (Debian's GDAL) of the uncompressed src with the
    same creation options, one thread; seconds taken."""
    cmd = ["gdal_translate", "-q", "--config", "GDAL_NUM_THREADS", "1", "-co", "TILED=YES",
           "-co", "BLOCKXSIZE=%d" % tile, "-co", "BLOCKYSIZE=%d" % tile,
           "-co", "INTERLEAVE=PIXEL", "-co", "NUM_THREADS=1"]
    for k, v in co.items():
        cmd += ["-co", "%s=%s" % (k.upper(), v)]
    if srcwin:
        cmd += ["-srcwin", "0", "0", str(srcwin), str(srcwin)]
    t = time.perf_counter()
    subprocess.run(cmd + [src, path], check=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--codecs", default=",".join(CODECS))
    o = ap.parse_args()
    print("%d x %d, tile %d, best of %d, 1 thread each; GDAL %s (rasterio %s)" % (
        o.size, o.size, o.tile, o.repeat, rasterio.__gdal_version__, rasterio.__version__))
    debian = shutil.which("gdal_translate")
    if debian:
        v = subprocess.run(["gdal_translate", "--version"], capture_output=True, text=True)
        print("Debian's GDAL: %s" % v.stdout.strip())
    print("| codec | image | cogfeed MB/s | GDAL MB/s | cogfeed/GDAL | Debian GDAL MB/s | "
          "cogfeed/Debian GDAL | ratio cogfeed | ratio GDAL | same pixels |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in o.codecs.split(","):
        bands, dtype, ckw, co = CODECS[name]
        a = image(bands, dtype, o.size)
        mine = os.path.join(o.dir, "enc_bench_cogfeed.tif")
        theirs = os.path.join(o.dir, "enc_bench_gdal.tif")
        raw = os.path.join(o.dir, "enc_bench_raw.tif")
        deb = os.path.join(o.dir, "enc_bench_debian.tif")
        if debian:
            write_gdal(raw, a, o.tile, {})
        tc, tg, td, t0 = [], [], [], []
        for _ in range(o.repeat):
            t = time.perf_counter()
            cogfeed.write(mine, a, tile_size=o.tile, overviews=0, threads=1, **ckw)
            tc.append(time.perf_counter() - t)
            t = time.perf_counter()
            write_gdal(theirs, a, o.tile, co)
            tg.append(time.perf_counter() - t)
            if debian:
                td.append(write_debian(deb, raw, o.tile, co))
                t0.append(write_debian(deb + ".small.tif", raw, o.tile, co, srcwin=16))
        mb = a.nbytes / 1e6
        dmb = mb / (min(td) - min(t0)) if debian else float("nan")
        with rasterio.open(mine) as r1, rasterio.open(theirs) as r2:
            same = np.array_equal(r1.read(), r2.read())
        sc, sg = os.path.getsize(mine), os.path.getsize(theirs)
        print("| %s | %s x %d | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f | %s |" % (
            name, dtype, bands, mb / min(tc), mb / min(tg), min(tg) / min(tc), dmb,
            dmb and (mb / min(tc)) / dmb, a.nbytes / sc, a.nbytes / sg,
            "yes" if same else "no"))
        for p in (mine, theirs, raw, deb, deb + ".small.tif"):
            if os.path.exists(p):
                os.remove(p)


if __name__ == "__main__":
    main()
