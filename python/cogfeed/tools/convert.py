"""cogfeed convert: write COG variants through GDAL's COG driver (the GDAL
that rasterio's wheel carries).

One call writes one variant (one codec, one tile size) of every input into
OUTDIR, keeping the inputs' relative layout (images/..., masks/...), so a
dataset folder holding several variants looks like DIR/<compress>_<tile>/...
which is what `cogfeed tune` searches over (see variant_name()).

Masks (any input whose path has a component or name containing "mask") are
always written losslessly: with the same codec when it is lossless, with
DEFLATE when the images use JPEG, WebP or LERC with a MAX_Z_ERROR > 0,
because a label changed by lossy compression is a wrong label.

JPEG and WebP only take 8-bit samples (WebP also only 3 or 4 bands), so
16-bit images are scaled to 8 bits for them (--scale-max, default 10000,
the Sentinel-2 reflectance scale); this is lossy twice over and is said on
stderr when it happens.
"""

import argparse
import os
import sys

from .common import creation_kwargs, need

CODECS = ("none", "deflate", "lzw", "zstd", "lerc", "lerc_zstd", "jpeg",
          "webp")
LOSSY = ("jpeg", "webp")


class UsageError(ValueError):
    """A bad option value (reported without a traceback)."""


def variant_name(compress, tile, level=None):
    """Folder name of one variant, e.g. 'deflate6_512' or 'lerc_zstd_512'."""
    c = compress.lower()
    if level is not None and c in ("deflate", "zstd"):
        c = "%s%d" % (c, level)
    return "%s_%d" % (c, tile)


def is_mask(path):
    parts = os.path.normpath(path).lower().split(os.sep)
    return any("mask" in p for p in parts)


def creation_options(compress, tile, level=None, overviews="none",
                     max_z_error=0.0, quality=None, threads=1):
    c = compress.lower()
    if c not in CODECS:
        raise UsageError("convert: unknown --compress %r (one of %s)"
                         % (compress, ", ".join(CODECS)))
    if tile < 128 or tile > 1024 or tile % 16:
        raise UsageError("convert: --tile must be a multiple of 16 in "
                         "128..1024, got %d" % tile)
    co = ["COMPRESS=" + c.upper(), "BLOCKSIZE=%d" % tile,
          "OVERVIEWS=" + overviews.upper(), "NUM_THREADS=%d" % threads]
    if c in ("deflate", "lzw", "zstd"):
        co.append("PREDICTOR=YES")
    if level is not None:
        if c not in ("deflate", "zstd", "lerc_zstd"):
            raise UsageError("convert: --level applies to deflate, zstd and "
                             "lerc_zstd, not %s" % c)
        co.append("LEVEL=%d" % level)
    if c in ("lerc", "lerc_zstd"):
        co.append("MAX_Z_ERROR=%g" % max_z_error)
    if c in LOSSY and quality is not None:
        co.append("QUALITY=%d" % quality)
    return co


def mask_codec(compress, max_z_error):
    """The codec masks get for a given image codec: always lossless."""
    c = compress.lower()
    if c in LOSSY or (c in ("lerc", "lerc_zstd") and max_z_error > 0):
        return "deflate"
    return c


def _inputs(srcs):
    """(absolute path, path relative to its SRC root) for every .tif."""
    out = []
    for s in srcs:
        if os.path.isdir(s):
            for root, dirs, files in os.walk(s):
                dirs.sort()
                for f in sorted(files):
                    if f.lower().endswith((".tif", ".tiff")):
                        p = os.path.join(root, f)
                        out.append((p, os.path.relpath(p, s)))
        elif os.path.isfile(s):
            out.append((s, os.path.basename(s)))
        else:
            raise UsageError("convert: %s: no such file or directory" % s)
    if not out:
        raise UsageError("convert: no .tif inputs in %s" % " ".join(srcs))
    # Two inputs with the same output path (an image and its mask given
    # one by one, or two folders holding the same names) would overwrite
    # each other.
    seen = {}
    for path, rel in out:
        key = os.path.normcase(os.path.normpath(rel))
        if key in seen:
            raise UsageError(
                "convert: %s and %s would both be written as %s: give a "
                "folder above both (its layout is kept) or convert them "
                "apart"
                % (seen[key], path, rel))
        seen[key] = path
    return out


class _NoBar:
    """What convert calls on a bar when none is drawn."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    @staticmethod
    def write(text, file=None):
        (file or sys.stderr).write(text + "\n")


def _progress(total, enabled):
    """tqdm's bar on stderr over all files, one step per file written;
    only when stderr is a terminal (a log gets no bar, and then tqdm is
    not needed)."""
    if not (enabled and total > 0 and sys.stderr.isatty()):
        return _NoBar()
    tqdm = need("tqdm").tqdm
    return tqdm(total=total, desc="convert", unit="file", file=sys.stderr)


def _copy_scaled(rasterio, ds, dst, scale_max, co):
    """Write ds as 8-bit COG dst, 0..scale_max mapped linearly onto 0..255
    and rounded (gdal_translate -ot Byte -scale 0 MAX 0 255)."""
    import numpy as np
    from rasterio.io import MemoryFile
    a = ds.read().astype(np.float64) * (255.0 / scale_max)
    a = np.clip(np.floor(a + 0.5), 0, 255).astype(np.uint8)
    # The source's colour interpretation, not GTiff's default for 3-4
    # bytes (RGB + alpha, which the COG driver would turn into a mask).
    prof = dict(driver="GTiff", width=ds.width, height=ds.height,
                count=ds.count, dtype="uint8", crs=ds.crs,
                transform=ds.transform, photometric="MINISBLACK")
    with MemoryFile() as mf:
        with mf.open(**prof) as m:
            m.write(a)
            m.colorinterp = ds.colorinterp
        with mf.open() as m:
            rasterio.shutil.copy(m, dst, driver="COG", **co)


def convert(srcs, outdir, compress, tile, level=None, overviews="none",
            max_z_error=0.0, quality=None, scale_max=10000, progress=True,
            threads=1):
    """Write the variant; return a list of (src, dst, codec used)."""
    rasterio = need("rasterio")
    import rasterio.shutil
    c = compress.lower()
    img_co = creation_options(c, tile, level, overviews, max_z_error,
                              quality, threads)
    mc = mask_codec(c, max_z_error)
    msk_co = creation_options(mc, tile, level if mc == c else None,
                              overviews, 0.0, None, threads)
    if mc != c:
        msk_co = [o for o in msk_co if not o.startswith("PREDICTOR")]
    files = _inputs(srcs)
    warned = False
    out = []
    with _progress(len(files), progress) as bar:
        for src, rel in files:
            dst = os.path.join(outdir, rel)
            os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
            mask = is_mask(rel) or is_mask(src)
            co = creation_kwargs(msk_co if mask else img_co)
            tmp = dst + ".part"
            with rasterio.open(src) as ds:
                if not mask and c in LOSSY:
                    if c == "webp" and ds.count not in (3, 4):
                        raise UsageError("convert: webp takes 3 or 4 bands; %s "
                                         "has %d" % (src, ds.count))
                    if ds.dtypes[0] != "uint8":
                        if not warned and progress:
                            bar.write("convert: %s takes 8-bit samples: "
                                      "scaling 0..%d to 0..255 (lossy)"
                                      % (c, scale_max), file=sys.stderr)
                            warned = True
                        _copy_scaled(rasterio, ds, tmp, scale_max, co)
                        ds = None
                if ds is not None:
                    rasterio.shutil.copy(ds, tmp, driver="COG", **co)
            os.replace(tmp, dst)
            bar.update(1)
            out.append((src, dst, mc if mask else c))
    if progress and mc != c:
        sys.stderr.write("convert: masks written with %s (lossless), not "
                         "%s\n" % (mc, c))
    return out


def main(argv):
    p = argparse.ArgumentParser(
        prog="cogfeed convert",
        description="Write a COG variant (codec, tile size) of GeoTIFFs "
                    "with GDAL's COG driver; folders keep their layout.")
    p.add_argument("src", nargs="+", help="GeoTIFF files or folders")
    p.add_argument("outdir", help="output folder (e.g. DATA/lerc_zstd_512)")
    p.add_argument("--compress", required=True, choices=CODECS,
                   help="codec of the variant (required)")
    p.add_argument("--tile", type=int, default=512,
                   help="internal tile size, 128-1024, a multiple of 16 "
                        "(default 512)")
    p.add_argument("--level", type=int, default=None,
                   help="deflate/zstd/lerc_zstd level")
    p.add_argument("--overviews", choices=("none", "auto"), default="none",
                   help="'auto' adds GDAL's overviews (default none: "
                        "training reads level 0)")
    p.add_argument("--max-z-error", type=float, default=0.0,
                   help="LERC max error (0 = lossless)")
    p.add_argument("--quality", type=int, default=None,
                   help="JPEG/WebP quality 1-100 (GDAL default 75)")
    p.add_argument("--scale-max", type=float, default=10000,
                   help="value mapped to 255 when 16-bit images are "
                        "written as jpeg/webp")
    p.add_argument("--threads", type=int, default=1,
                   help="GDAL compression threads")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar or notes on stderr")
    # Options may come before, between or after SRC... OUTDIR.
    a = p.parse_intermixed_args(argv)
    try:
        res = convert(a.src, a.outdir, a.compress, a.tile, a.level,
                      a.overviews, a.max_z_error, a.quality, a.scale_max,
                      not a.quiet, a.threads)
    except UsageError as e:
        sys.stderr.write("cogfeed %s\n" % e)
        return 2
    total = sum(os.path.getsize(d) for _, d, _ in res)
    print("wrote %d files (%.1f MB) to %s" % (len(res), total / 1e6,
                                               a.outdir))
    return 0
