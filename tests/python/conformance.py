"""Conformance fixtures: GeoTIFFs written by GDAL, and GDAL's reads of them.

GDAL here is the one rasterio's wheel carries (3.10, pinned through
requirements-dev.txt), driven through rasterio, except for reading JPEG:
that wheel decodes JPEG with its own libjpeg 9, whose upsampling and IDCT
differ from libjpeg-turbo (what cogfeed, Debian's GDAL and most builds
use) by one or two levels, so JPEG files are read by Debian's GDAL
command-line tools (debian_gdal_read).  docs/conformance.md says which
GDAL each test uses.

The conformance suite (test_conformance.py, test_cli.py) and the codec
benchmark compare cogfeed's reads with GDAL's reads of the very same files,
bit for bit.  This module is the one place that knows how those files are
made:

  * FIXTURES is a representative matrix (not the cross product) that covers
    every codec, dtype, tile size, interleave, endianness, BigTIFF, stripped
    layout, overviews, sparse tiles, nodata, internal masks and many bands.
  * fixture_path(spec) writes a spec with GDAL (COG or GTiff driver) into
    $CF_TEST_DATA/conformance (or a caller-given directory), cached under a
    content hash of the spec, the generator version and GDAL's version, so a
    second test run reuses the files and a changed spec gets a new file.
  * windows_for(...) lists the windows each file is read with, and
    gdal_read(...) builds the expected array: GDAL's ReadAsArray of the part
    inside the image, nodata (or 0) outside.

Nothing generated here is ever committed (.gitignore covers *.tif).
"""

import hashlib
import json
import os
import re
import stat
import struct
import subprocess
import tempfile

import numpy as np
import rasterio
import rasterio.errors
import rasterio.shutil
from rasterio.enums import Resampling
from rasterio.io import MemoryFile
from rasterio.transform import Affine
from rasterio.windows import Window

# Cached fixtures are keyed by the spec and by this file's own text, so any
# change to the pixel content or to the way files are written regenerates
# them (about 10 s for the whole matrix).
with open(os.path.abspath(__file__), "rb") as _f:
    GENERATOR_VERSION = hashlib.sha256(_f.read()).hexdigest()[:16]

def _spec(name, **kw):
    s = {
        "name": name,
        "driver": "COG",  # or "GTiff"
        "width": 777,
        "height": 555,
        "bands": 1,
        "dtype": "uint8",
        "compress": "NONE",
        "options": [],  # extra creation options
        "nodata": None,  # number or "nan"
        "mask": False,  # internal per-dataset mask
        "overviews": [],  # GTiff only: factors; COG builds its own
        "sparse": False,  # leave some blocks unwritten (SPARSE_OK=TRUE)
        "patch_compression": None,  # rewrite the Compression tag (e.g. 32946)
        # False where GDAL 3.6 does not read back what it wrote (see
        # docs/conformance.md); cogfeed must still match GDAL's read.
        "gdal_roundtrip": True,
        "scale_offset": None,  # per-band (scale, offset) written to GDAL_METADATA
    }
    s.update(kw)
    return s


# The matrix.  Names are stable test ids.  Sizes are deliberately not
# multiples of the tile size.
FIXTURES = [
    # --- every codec, on the COG driver with overviews ---------------------
    _spec("none_u8x3_t256", bands=3, options=["BLOCKSIZE=256"]),
    _spec("none_f64_t128", dtype="float64", width=333, height=277, options=["BLOCKSIZE=128"]),
    # 4-band 8- and 16-bit pixel-interleaved (RGB + NIR): split by SSE2
    # 16 or 8 pixels at a time, with scalar tails on these odd widths
    _spec("none_u8x4_t128", bands=4, width=333, height=211, options=["BLOCKSIZE=128"]),
    _spec("none_u16x4_t128", dtype="uint16", bands=4, width=347, height=190,
          options=["BLOCKSIZE=128"]),
    _spec("deflate_u8_p2_t256", compress="DEFLATE", options=["BLOCKSIZE=256", "PREDICTOR=2"]),
    _spec("deflate_i8_t256", dtype="int8", compress="DEFLATE", options=["BLOCKSIZE=256"]),
    _spec("deflate_u16_p2_t512", dtype="uint16", bands=2, width=1300, height=900,
          compress="DEFLATE", options=["BLOCKSIZE=512", "PREDICTOR=2"]),
    _spec("deflate_i16_p2_t256", dtype="int16", compress="DEFLATE", nodata=-9999,
          options=["BLOCKSIZE=256", "PREDICTOR=2"], scale_offset=[(0.01, -50.0)]),
    _spec("deflate_u32_p2_t256", dtype="uint32", compress="DEFLATE",
          options=["BLOCKSIZE=256", "PREDICTOR=2"]),
    _spec("deflate_i32_t256", dtype="int32", compress="DEFLATE", options=["BLOCKSIZE=256"]),
    _spec("deflate_i64_p2_t256", dtype="int64", width=600, height=400, compress="DEFLATE",
          options=["BLOCKSIZE=256", "PREDICTOR=2"]),
    _spec("deflate_u64_t256", dtype="uint64", width=600, height=400, compress="DEFLATE",
          options=["BLOCKSIZE=256"]),
    _spec("deflate_f32_p3_t256", dtype="float32", bands=2, compress="DEFLATE", nodata="nan",
          options=["BLOCKSIZE=256", "PREDICTOR=3"]),
    _spec("deflate_f64_p3_t256", dtype="float64", compress="DEFLATE",
          options=["BLOCKSIZE=256", "PREDICTOR=3"]),
    _spec("deflate32946_u16_p2_t256", dtype="uint16", compress="DEFLATE",
          options=["BLOCKSIZE=256", "PREDICTOR=2"], patch_compression=32946),
    _spec("lzw_u8x3_t256", bands=3, compress="LZW", options=["BLOCKSIZE=256"]),
    _spec("lzw_i16_p2_t128", dtype="int16", compress="LZW", width=700, height=500,
          options=["BLOCKSIZE=128", "PREDICTOR=2"]),
    _spec("lzw_u32_p2_t256", dtype="uint32", compress="LZW", options=["BLOCKSIZE=256", "PREDICTOR=2"]),
    _spec("lzw_f32_p3_t512", dtype="float32", compress="LZW", width=1100, height=600,
          options=["BLOCKSIZE=512", "PREDICTOR=3"]),
    _spec("lzw_f64_t256", dtype="float64", compress="LZW", options=["BLOCKSIZE=256"]),
    _spec("packbits_u8_t256", compress="PACKBITS", options=["BLOCKSIZE=256"]),
    _spec("packbits_i16_t256", dtype="int16", compress="PACKBITS", options=["BLOCKSIZE=256"]),
    _spec("packbits_f32_t128", dtype="float32", compress="PACKBITS", width=400, height=300,
          options=["BLOCKSIZE=128"]),
    _spec("zstd_u8_t256", compress="ZSTD", options=["BLOCKSIZE=256"]),
    _spec("zstd_u16_p2_t256", dtype="uint16", bands=4, compress="ZSTD",
          options=["BLOCKSIZE=256", "PREDICTOR=2"]),
    _spec("zstd_i32_p2_t256", dtype="int32", compress="ZSTD", nodata=-2147483648,
          options=["BLOCKSIZE=256", "PREDICTOR=2"]),
    _spec("zstd_f32_p3_t1024", dtype="float32", compress="ZSTD", width=2100, height=1500,
          options=["BLOCKSIZE=1024", "PREDICTOR=3"]),
    _spec("zstd_f64_p3_t256", dtype="float64", compress="ZSTD", options=["BLOCKSIZE=256", "PREDICTOR=3"]),
    _spec("lerc_f32_t256", dtype="float32", compress="LERC", options=["BLOCKSIZE=256"]),
    _spec("lerc_u8_t256", compress="LERC", bands=3, options=["BLOCKSIZE=256"]),
    _spec("lerc_i8_t256", dtype="int8", compress="LERC", options=["BLOCKSIZE=256"]),
    _spec("lerc_u16_t256", dtype="uint16", compress="LERC", options=["BLOCKSIZE=256"]),
    _spec("lerc_i32_t256", dtype="int32", compress="LERC", options=["BLOCKSIZE=256"]),
    _spec("lerc_f64_t256", dtype="float64", compress="LERC", options=["BLOCKSIZE=256"]),
    _spec("lerc_f32_lossy_t256", dtype="float32", compress="LERC",
          options=["BLOCKSIZE=256", "MAX_Z_ERROR=0.01"]),
    _spec("lerc_deflate_f32_t256", dtype="float32", bands=2, compress="LERC_DEFLATE",
          options=["BLOCKSIZE=256"]),
    _spec("lerc_deflate_i16_t512", dtype="int16", compress="LERC_DEFLATE", width=1100, height=800,
          options=["BLOCKSIZE=512"]),
    _spec("lerc_zstd_f32_nan_t256", dtype="float32", compress="LERC_ZSTD", nodata="nan",
          options=["BLOCKSIZE=256"]),
    _spec("lerc_zstd_u16_t256", dtype="uint16", bands=3, compress="LERC_ZSTD",
          options=["BLOCKSIZE=256"]),
    _spec("jpeg_u8x1_t256", compress="JPEG", options=["BLOCKSIZE=256", "QUALITY=85"]),
    _spec("jpeg_u8x3_ycbcr_t256", bands=3, compress="JPEG", options=["BLOCKSIZE=256"]),
    _spec("jpeg_u8x3_ycbcr_mask_t512", bands=3, compress="JPEG", mask=True, width=1200, height=900,
          options=["BLOCKSIZE=512", "QUALITY=90"]),
    _spec("jpeg_u8x3_rgb_gtiff_t256", driver="GTiff", bands=3, compress="JPEG",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "PHOTOMETRIC=RGB"]),
    _spec("jpeg_u8x3_ycbcr_gtiff_ovr", driver="GTiff", bands=3, compress="JPEG", overviews=[2, 4],
          options=["TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "PHOTOMETRIC=YCBCR"]),
    _spec("webp_u8x3_lossless_t256", bands=3, compress="WEBP",
          options=["BLOCKSIZE=256", "QUALITY=100"]),  # COG: QUALITY=100 -> lossless
    _spec("webp_u8x3_lossy_t256", bands=3, compress="WEBP", options=["BLOCKSIZE=256", "QUALITY=70"]),
    _spec("webp_u8x4_lossy_t256", bands=4, compress="WEBP", options=["BLOCKSIZE=256", "QUALITY=80"]),
    _spec("webp_u8x4_lossless_gtiff", driver="GTiff", bands=4, compress="WEBP",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "WEBP_LOSSLESS=TRUE"]),
    # --- layouts: non-square tiles, band interleave, BigTIFF, big-endian ---
    _spec("gtiff_nonsquare_256x128_u16", driver="GTiff", dtype="uint16", bands=2, compress="DEFLATE",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=128", "PREDICTOR=2"], overviews=[2, 4]),
    _spec("gtiff_band_i16_zstd", driver="GTiff", dtype="int16", bands=3, compress="ZSTD",
          nodata=-32768, scale_offset=[(0.5, 0.0), (1.0, 10.0), (2.5e-4, -3.25)],
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "INTERLEAVE=BAND", "PREDICTOR=2"],
          overviews=[2]),
    _spec("gtiff_band_f32_lzw", driver="GTiff", dtype="float32", bands=3, compress="LZW",
          options=["TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "INTERLEAVE=BAND", "PREDICTOR=3"]),
    _spec("cog_bigtiff_u16_deflate", dtype="uint16", bands=2, compress="DEFLATE",
          options=["BLOCKSIZE=256", "BIGTIFF=YES", "PREDICTOR=2"]),
    _spec("gtiff_bigtiff_band_f64", driver="GTiff", dtype="float64", bands=2, compress="ZSTD",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "INTERLEAVE=BAND", "BIGTIFF=YES"],
          overviews=[2, 4]),
    _spec("gtiff_be_u16_deflate_p2", driver="GTiff", dtype="uint16", bands=3, compress="DEFLATE",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "ENDIANNESS=BIG", "PREDICTOR=2"],
          overviews=[2]),
    # GDAL 3.6 does not read back its own big-endian floating-point predictor
    # and big-endian float LERC files (libtiff swabs around the codec, see
    # docs/conformance.md).  Big-endian floats are covered without predictor
    # 3 and big-endian LERC with integers; the two quirky cases are kept too:
    # cogfeed must read them exactly as GDAL does.
    _spec("gtiff_be_f32_deflate_p3_quirk", driver="GTiff", dtype="float32", compress="DEFLATE",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "ENDIANNESS=BIG", "PREDICTOR=3"],
          gdal_roundtrip=False),
    _spec("gtiff_be_lerc_f32_quirk", driver="GTiff", dtype="float32", compress="LERC",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "ENDIANNESS=BIG"],
          gdal_roundtrip=False),
    _spec("gtiff_be_f32_lzw", driver="GTiff", dtype="float32", compress="LZW",
          options=["TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "ENDIANNESS=BIG"]),
    _spec("gtiff_be_f64_none_band", driver="GTiff", dtype="float64", bands=2,
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "ENDIANNESS=BIG", "INTERLEAVE=BAND"]),
    _spec("gtiff_be_i32_zstd_p2", driver="GTiff", dtype="int32", compress="ZSTD",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "ENDIANNESS=BIG", "PREDICTOR=2"]),
    _spec("gtiff_be_lerc_i32", driver="GTiff", dtype="int32", compress="LERC_ZSTD",
          options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "ENDIANNESS=BIG"]),
    _spec("gtiff_bigtiff_be_i16_packbits", driver="GTiff", dtype="int16", compress="PACKBITS",
          options=["TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "ENDIANNESS=BIG", "BIGTIFF=YES"]),
    # --- stripped (non-tiled) files ------------------------------------------
    _spec("strip_u8x3_none", driver="GTiff", bands=3, width=517, height=383,
          options=["TILED=NO", "BLOCKYSIZE=16"]),
    _spec("strip_i16_deflate_p2", driver="GTiff", dtype="int16", width=517, height=383,
          compress="DEFLATE", options=["TILED=NO", "BLOCKYSIZE=7", "PREDICTOR=2"]),
    _spec("strip_f32_lzw_band", driver="GTiff", dtype="float32", bands=2, width=517, height=383,
          compress="LZW", options=["TILED=NO", "BLOCKYSIZE=32", "INTERLEAVE=BAND", "PREDICTOR=3"]),
    _spec("strip_u16_packbits_be", driver="GTiff", dtype="uint16", width=517, height=383,
          compress="PACKBITS", options=["TILED=NO", "BLOCKYSIZE=1", "ENDIANNESS=BIG"]),
    _spec("strip_u8_jpeg_ycbcr", driver="GTiff", bands=3, width=517, height=383,
          compress="JPEG", options=["TILED=NO", "BLOCKYSIZE=16", "PHOTOMETRIC=YCBCR"]),
    _spec("strip_u8_whole_deflate", driver="GTiff", width=517, height=383, compress="DEFLATE",
          options=["TILED=NO", "BLOCKYSIZE=383"]),
    # --- sparse tiles, nodata, masks, many bands -----------------------------
    _spec("sparse_u16_nodata", driver="GTiff", dtype="uint16", compress="DEFLATE", sparse=True,
          nodata=65535, options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "SPARSE_OK=TRUE"]),
    _spec("sparse_u8x3_zero", driver="GTiff", bands=3, sparse=True,
          options=["TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "SPARSE_OK=TRUE"]),
    _spec("sparse_f32_nan_band", driver="GTiff", dtype="float32", bands=2, compress="ZSTD", sparse=True,
          nodata="nan", options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "SPARSE_OK=TRUE",
                                 "INTERLEAVE=BAND"]),
    _spec("sparse_cog_i16", dtype="int16", compress="LZW", sparse=True, nodata=-1,
          options=["BLOCKSIZE=256", "SPARSE_OK=TRUE"]),
    _spec("nodata_f64_neg", dtype="float64", compress="DEFLATE", nodata=-1e30,
          options=["BLOCKSIZE=256"]),
    _spec("nodata_u8_0", compress="LZW", nodata=0, options=["BLOCKSIZE=256"]),
    _spec("mask_u16_gtiff", driver="GTiff", dtype="uint16", bands=2, compress="DEFLATE", mask=True,
          overviews=[2, 4], options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256"]),
    _spec("mask_cog_f32", dtype="float32", compress="ZSTD", mask=True, options=["BLOCKSIZE=256"]),
    _spec("many_bands_i16_pixel", dtype="int16", bands=200, width=160, height=120,
          compress="DEFLATE", options=["BLOCKSIZE=128", "PREDICTOR=2"]),
    _spec("many_bands_u16_band", driver="GTiff", dtype="uint16", bands=200, width=160, height=120,
          compress="ZSTD", options=["TILED=YES", "BLOCKXSIZE=128", "BLOCKYSIZE=128", "INTERLEAVE=BAND"]),
]

FIXTURES_BY_NAME = {f["name"]: f for f in FIXTURES}

# Codecs GDAL 3.6 cannot write, so the matrix cannot contain them:
#  - legacy Deflate code 32946 is covered by patching the Compression tag of
#    a GDAL DEFLATE file (libtiff and GDAL read 32946 and 8 identically);
#    GDAL itself writes Adobe Deflate (code 8) for COMPRESS=DEFLATE.


def spec_hash(spec):
    blob = json.dumps({"spec": spec, "gen": GENERATOR_VERSION,
                       "gdal": rasterio.__gdal_version__},
                      sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def testdata_root():
    """Where generated test data is cached: $CF_TEST_DATA (run.sh and ctest
    set it to build/testdata), else a folder of this user's in the temp
    folder, which other local users can also write to: a name they could
    plant first (a symlink, a folder of theirs with fixtures of their own,
    one open to all) is refused rather than read or written through."""
    root = os.environ.get("CF_TEST_DATA")
    if root:
        return root
    root = os.path.join(tempfile.gettempdir(), "cogfeed-testdata-%d" % os.getuid())
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(root)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise RuntimeError("%s is not a private folder of this user (a symlink, another "
                           "user's, or writable by others): remove it or set CF_TEST_DATA"
                           % root)
    return root


def default_dir():
    return os.path.join(testdata_root(), "conformance")


def make_pixels(spec):
    """Deterministic smooth + noisy content with the dtype's extremes."""
    dt = np.dtype(spec["dtype"])
    w, h, nb = spec["width"], spec["height"], spec["bands"]
    seed = int(hashlib.sha256(spec["name"].encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.empty((nb, h, w), dtype=dt)
    lossy = spec["compress"] in ("JPEG", "WEBP")
    for b in range(nb):
        f = 0.5 + 0.5 * np.sin(xx / (37.0 + 3 * b) + b) * np.cos(yy / (53.0 + 2 * b))
        f += 0.15 * np.sin((xx + 2 * yy) / 11.0)
        noise = rng.normal(0.0, 0.03 if lossy else 0.08, size=(h, w))
        v = np.clip(f / 1.3 + noise, 0.0, 1.0)
        if dt.kind == "f":
            band = ((v - 0.3) * 2000.0 + rng.normal(0, 1e-3, size=(h, w))).astype(dt)
        else:
            info = np.iinfo(dt)
            # 64-bit ints are built from integers so float rounding cannot
            # hide their low bits; the extremes below cover the full range.
            lo, hi = float(info.min), float(info.max)
            if dt.itemsize == 8:
                band = np.floor(v * 2.0 ** 40).astype(np.int64) * 997
                band += rng.integers(0, 1 << 20, size=(h, w))
                if info.min != 0:
                    band -= np.int64(1) << 49
                band = band.astype(dt)
            else:
                band = np.round(lo + v * (hi - lo)).astype(dt)
        out[b] = band
    if not lossy:
        # Extremes at fixed pixels (lossy codecs would only blur them).
        if dt.kind == "f":
            fi = np.finfo(dt)
            if spec["compress"].startswith("LERC") and nb > 1:
                # GDAL 3.6 + multi-band (pixel-interleaved) LERC: NaN turns
                # into -FLT_MAX, and overviews resampled from +-FLT_MAX/Inf
                # are written in a form GDAL cannot decode itself.
                specials = [-0.0, fi.tiny, fi.tiny / 4, 1.0]
            else:
                specials = [fi.min, fi.max, -0.0, fi.tiny, fi.tiny / 4, 1.0]
                # NaN/Inf stay out where a NaN nodata would make them ambiguous.
                if spec["nodata"] != "nan":
                    specials += [np.inf, -np.inf, np.nan]
        else:
            ii = np.iinfo(dt)
            specials = [ii.min, ii.max, 0, ii.max - 1, ii.min + 1]
        for b in range(nb):
            for i, val in enumerate(specials):
                out[b, (7 * b) % h, (i * 13 + b) % w] = val
    if spec["nodata"] is not None:
        nd = np.nan if spec["nodata"] == "nan" else spec["nodata"]
        # A nodata blob in the middle of the first band (and a smaller one in others).
        for b in range(nb):
            r = max(3, min(w, h) // (8 + b))
            m = (xx - w * 0.6) ** 2 + (yy - h * 0.4) ** 2 < r * r
            out[b][m] = nd
    return out


def _sparse_keep(spec, tw, th):
    """Which blocks of a sparse fixture hold data: a checkerboard with a hole."""
    w, h = spec["width"], spec["height"]
    keep = np.zeros(((h + th - 1) // th, (w + tw - 1) // tw), dtype=bool)
    keep[::2, ::2] = True
    keep[1::2, 1::2] = True
    keep[0, 0] = False  # the very first block is empty too
    return keep


def _mask_array(spec):
    w, h = spec["width"], spec["height"]
    yy, xx = np.mgrid[0:h, 0:w]
    m = np.full((h, w), 255, dtype=np.uint8)
    m[(xx + yy) < min(w, h) // 3] = 0  # a triangle of invalid pixels
    m[h // 2:h // 2 + 40, :] = 0  # and a band across the image
    m[:, w - 3:] = 0
    return m


def _opt(spec, key, default=None):
    for o in spec["options"]:
        k, _, v = o.partition("=")
        if k.upper() == key:
            return v
    return default


def _kw(options):
    """Creation options ["KEY=VALUE", ...] as rasterio keywords."""
    return dict(o.split("=", 1) for o in options)


def _nodata(spec):
    return None if spec["nodata"] is None else (
        float("nan") if spec["nodata"] == "nan" else spec["nodata"])


def _profile(spec):
    return dict(width=spec["width"], height=spec["height"], count=spec["bands"],
                dtype=spec["dtype"], crs="EPSG:32633", nodata=_nodata(spec),
                transform=Affine.from_gdal(500000.0, 10.0, 0.0, 4200000.0, 0.0, -10.0))


def _mem_source(spec, data, mf):
    """The pixels, georeferencing, nodata, scales and mask as an
    uncompressed GTiff in memory file mf (the source every writer copies)."""
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with mf.open(driver="GTiff", tiled=True, **_profile(spec)) as m:
            m.write(data)
            if spec["scale_offset"]:
                m.scales = tuple(so[0] for so in spec["scale_offset"])
                m.offsets = tuple(so[1] for so in spec["scale_offset"])
            if spec["mask"]:
                m.write_mask(_mask_array(spec))
    return mf.open()


def _write_gtiff(spec, data, path):
    opts = _kw(["COMPRESS=" + spec["compress"]] + list(spec["options"]))
    if spec["sparse"]:
        # Write block by block, skipping the empty ones: SPARSE_OK=TRUE keeps
        # them out of the file (offset 0, byte count 0).
        nb = spec["bands"]
        tw = int(_opt(spec, "BLOCKXSIZE", 256))
        th = int(_opt(spec, "BLOCKYSIZE", 256))
        keep = _sparse_keep(spec, tw, th)
        with rasterio.open(path, "w", driver="GTiff", **_profile(spec), **opts) as ds:
            for b in range(nb):
                for ty in range(keep.shape[0]):
                    for tx in range(keep.shape[1]):
                        if keep[ty, tx]:
                            x0, y0 = tx * tw, ty * th
                            blk = data[b, y0:y0 + th, x0:x0 + tw]
                            ds.write(blk, b + 1, window=Window(x0, y0, blk.shape[1], blk.shape[0]))
        return
    with MemoryFile() as mf, _mem_source(spec, data, mf) as src, \
            rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        if spec["overviews"] or spec["mask"]:
            # Overviews (and the mask's overviews) are built on a temporary
            # copy and copied in with COPY_SRC_OVERVIEWS so they land inside
            # the file.
            tmp = path + ".src.tif"
            try:
                rasterio.shutil.copy(src, tmp, driver="GTiff", TILED="YES", COMPRESS="DEFLATE")
                if spec["overviews"]:
                    with rasterio.open(tmp, "r+") as t:
                        t.build_overviews(spec["overviews"],
                                          Resampling.nearest if spec["compress"] != "JPEG"
                                          else Resampling.average)
                ovr = {"COPY_SRC_OVERVIEWS": "YES"} if spec["overviews"] else {}
                rasterio.shutil.copy(tmp, path, driver="GTiff", **opts, **ovr)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            return
        rasterio.shutil.copy(src, path, driver="GTiff", **opts)


def _write_cog(spec, data, path):
    opts = _kw(["COMPRESS=" + spec["compress"]] + list(spec["options"]))
    if spec["sparse"]:
        # COG + SPARSE_OK omits blocks that are entirely nodata: blank out a
        # checkerboard of blocks in the source.
        ts = int(_opt(spec, "BLOCKSIZE", 512))
        keep = _sparse_keep(spec, ts, ts)
        nd = spec["nodata"] if spec["nodata"] is not None else 0
        data = data.copy()
        for ty in range(keep.shape[0]):
            for tx in range(keep.shape[1]):
                if not keep[ty, tx]:
                    data[:, ty * ts:(ty + 1) * ts, tx * ts:(tx + 1) * ts] = nd
    with MemoryFile() as mf, _mem_source(spec, data, mf) as src:
        rasterio.shutil.copy(src, path, driver="COG", **opts)


def write_array(path, arr, driver="COG", gt=None, **creation):
    """arr (bands, H, W) written by GDAL's `driver` (COG or GTiff) with these
    creation options (keywords: BLOCKSIZE=256, COMPRESS="DEFLATE", ...);
    gt: a GDAL geotransform.  Returns the path as a str."""
    c, h, w = arr.shape
    prof = dict(driver="GTiff", width=w, height=h, count=c, dtype=arr.dtype.name)
    if gt is not None:
        prof["transform"] = Affine.from_gdal(*gt)
    with MemoryFile() as mf:
        with mf.open(**prof) as m:
            m.write(arr)
        with mf.open() as m:
            rasterio.shutil.copy(m, str(path), driver=driver, **creation)
    return str(path)


def _patch_compression(path, new_code):
    """Rewrite the Compression tag (259) of every IFD in place."""
    with open(path, "r+b") as f:
        head = f.read(16)
        bo = "<" if head[:2] == b"II" else ">"
        big = struct.unpack(bo + "H", head[2:4])[0] == 43
        off = struct.unpack(bo + ("Q" if big else "I"), head[8:16] if big else head[4:8])[0]
        seen = set()
        while off and off not in seen:
            seen.add(off)
            f.seek(off)
            n = struct.unpack(bo + ("Q" if big else "H"), f.read(8 if big else 2))[0]
            esz = 20 if big else 12
            ents = f.read(n * esz)
            for i in range(n):
                tag, typ = struct.unpack(bo + "HH", ents[i * esz:i * esz + 4])
                if tag == 259:
                    assert typ == 3
                    vpos = off + (8 if big else 2) + i * esz + (12 if big else 8)
                    f.seek(vpos)
                    f.write(struct.pack(bo + "H", new_code))
            f.seek(off + (8 if big else 2) + n * esz)
            off = struct.unpack(bo + ("Q" if big else "I"), f.read(8 if big else 4))[0]


def fixture_path(spec, directory=None):
    """Path of the fixture for `spec`, writing it with GDAL if not cached."""
    directory = directory or default_dir()
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "%s-%s.tif" % (spec["name"], spec_hash(spec)))
    if os.path.exists(path):
        return path
    tmp = path + ".%d.tmp.tif" % os.getpid()
    data = make_pixels(spec)
    try:
        if spec["driver"] == "COG":
            _write_cog(spec, data, tmp)
        else:
            _write_gtiff(spec, data, tmp)
        if spec["patch_compression"]:
            _patch_compression(tmp, spec["patch_compression"])
        os.replace(tmp, path)  # atomic: concurrent runs never see half a file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


# ---------------------------------------------------------------------------
# What GDAL says about a file and its windows.
# ---------------------------------------------------------------------------

def debian_gdal_read(name, level=0, ot=None):
    """All bands of dataset `name` (a path, or GDAL's GTIFF_RAW:/GTIFF_DIR:
    syntax; overview `level`) as (bands, H, W), decoded by Debian's GDAL
    (gdal_translate, libjpeg-turbo), converted to GDAL type `ot` if given:
    an uncompressed copy is made next to the file once and read back."""
    m = re.match(r"((?:GTIFF_RAW:|GTIFF_DIR:\d+:)*)(.*)$", name)
    prefix, path = m.group(1), m.group(2)
    tag = re.sub(r"\W", "", prefix.lower()) + (ot or "")
    out = "%s.debian%s-l%d.tif" % (path, "-" + tag if tag else "", level)
    if not os.path.exists(out):
        tmp = out + ".%d.tmp" % os.getpid()
        cmd = ["gdal_translate", "-q", "-of", "GTiff", "-co", "COMPRESS=NONE",
               "--config", "GDAL_PAM_ENABLED", "NO"]
        if level:
            cmd += ["-ovr", str(level - 1)]
        if ot:
            cmd += ["-ot", ot]
        try:
            subprocess.run(cmd + [name, tmp], check=True, capture_output=True, timeout=300)
        except subprocess.CalledProcessError as e:
            raise rasterio.errors.RasterioIOError(
                "gdal_translate %s: %s" % (name, e.stderr.decode(errors="replace").strip()))
        os.replace(tmp, out)
    with rasterio.open(out) as d:
        return d.read()


def _is_jpeg(ds):
    return "JPEG" in gdal_compression(ds).upper()


def open_ref(path):
    """The reference reader's dataset for `path` (rasterio; close it or use
    it in a with block).  The functions below take it."""
    return rasterio.open(path)


def _level(ds, level):
    """A dataset of overview `level` (0: ds itself, not to be closed)."""
    return ds if level == 0 else rasterio.open(ds.name, overview_level=level - 1)


def block_size(ds, level=0):
    """(tile or strip width, height) of a level."""
    with_level = _level(ds, level)
    try:
        h, w = with_level.block_shapes[0]
    finally:
        if with_level is not ds:
            with_level.close()
    return w, h


def overview_count(ds):
    return len(ds.overviews(1))


def overview_sizes(ds):
    return [level_size(ds, i + 1) for i in range(overview_count(ds))]


def numpy_dtype(ds):
    return np.dtype(ds.dtypes[0])


def level_size(ds, level):
    if level == 0:
        return ds.width, ds.height
    with _level(ds, level) as o:
        return o.width, o.height


def nodata_of(ds):
    return ds.nodata


def fill_value(ds):
    nd = nodata_of(ds)
    return 0 if nd is None else nd


def gdal_read(ds, window, bands=None, level=0, dtype=None, debian_ot=None):
    """Expected (bands, h, w) array: GDAL inside the image, nodata/0 outside.
    dtype: the array's type (default: numpy_dtype(ds)); debian_ot: read
    with Debian's GDAL converted to that GDAL type (as JPEG files are)."""
    x, y, w, h = window
    bands = list(bands) if bands else list(range(1, ds.count + 1))
    W, H = level_size(ds, level)
    dt = np.dtype(dtype or numpy_dtype(ds))
    out = np.empty((len(bands), h, w), dtype=dt)
    out[...] = np.array(fill_value(ds)).astype(dt)
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + w, W), min(y + h, H)
    if x1 <= x0 or y1 <= y0:
        return out
    if debian_ot or _is_jpeg(ds):
        a = debian_gdal_read(ds.name, level, debian_ot)
        out[:, y0 - y:y1 - y, x0 - x:x1 - x] = a[[b - 1 for b in bands], y0:y1, x0:x1]
        return out
    src = _level(ds, level)
    try:
        out[:, y0 - y:y1 - y, x0 - x:x1 - x] = src.read(
            bands, window=Window(x0, y0, x1 - x0, y1 - y0))
    finally:
        if src is not ds:
            src.close()
    return out


def gdal_read_mask(ds, window, level=0):
    """Expected internal mask (h, w): GDAL's mask inside, 0 outside."""
    x, y, w, h = window
    W, H = level_size(ds, level)
    out = np.zeros((h, w), dtype=np.uint8)
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + w, W), min(y + h, H)
    if x1 <= x0 or y1 <= y0:
        return out
    src = _level(ds, level)
    try:
        out[y0 - y:y1 - y, x0 - x:x1 - x] = src.read_masks(
            1, window=Window(x0, y0, x1 - x0, y1 - y0))
    finally:
        if src is not ds:
            src.close()
    return out


def has_dataset_mask(ds):
    """True when band 1's mask is a per-dataset (internal) mask."""
    from rasterio.enums import MaskFlags
    return list(ds.mask_flag_enums[0]) == [MaskFlags.per_dataset]


def windows_for(W, H, tw, th):
    """Windows (name, (x, y, w, h)) that exercise tile and image edges."""
    wins = [
        ("tile0", (0, 0, min(tw, W), min(th, H))),
        ("whole", (0, 0, W, H)),
        ("px00", (0, 0, 1, 1)),
        ("px_center", (W // 2, H // 2, 1, 1)),
        ("px_last", (W - 1, H - 1, 1, 1)),
        ("cross_edges", (max(0, tw - 17), max(0, th - 9), 50, 40)),
        ("last_partial_tile", ((W - 1) // tw * tw, (H - 1) // th * th,
                               W - (W - 1) // tw * tw, H - (H - 1) // th * th)),
        ("edge_strip", (W - 30, 0, 30, H)),
        ("out_right_bottom", (W - 10, H - 10, 40, 30)),
        ("out_left_top", (-5, -7, 30, 20)),
        ("out_fully_right", (W + 10, 0, 16, 16)),
        ("out_fully_negative", (-100, -100, 10, 10)),
        ("larger_than_image", (-3, -3, W + 6, H + 6)),
        ("odd_interior", (W // 3 + 1, H // 3 + 3, W // 3 + 5, H // 4 + 7)),
    ]
    if W > tw and H > th:
        wins.append(("tile11", (tw, th, min(tw, W - tw), min(th, H - th))))
    return wins


def band_sets(count):
    """Band lists (None = all) to read with: subsets, reordering."""
    sets = [None, [1]]
    if count >= 2:
        sets += [[count], [count, 1]]
    if count >= 3:
        sets += [[3, 1, 2]]
    if count >= 10:
        sets += [[count, count // 2, 2, 1]]
    return sets


def level_windows(W, H, tw, th):
    """A smaller set of windows for overview levels."""
    return [
        ("whole", (0, 0, W, H)),
        ("cross_edges", (max(0, tw - 5), max(0, th - 3), 20, 14)),
        ("out_right_bottom", (W - 4, H - 4, 12, 9)),
        ("px_last", (W - 1, H - 1, 1, 1)),
    ]


def gdal_epsg(ds):
    return ds.crs.to_epsg() if ds.crs else None


def gdal_compression(ds):
    c = ds.tags(ns="IMAGE_STRUCTURE").get("COMPRESSION")
    return c or "NONE"


def generate_all(directory=None, names=None):
    paths = {}
    for spec in FIXTURES:
        if names and spec["name"] not in names:
            continue
        paths[spec["name"]] = fixture_path(spec, directory)
    if not names:
        # Drop fixtures of older generator versions so the cache stays small.
        d = directory or default_dir()
        keep = {os.path.basename(p) for p in paths.values()}
        for fn in os.listdir(d):
            if fn.endswith(".tif") and fn not in keep and ".tmp." not in fn:
                try:
                    os.unlink(os.path.join(d, fn))
                except FileNotFoundError:
                    pass
    return paths


def write_fuzz_seeds(directory):
    """The small seeds of fuzz/seeds/open/ (40x30 images, 16 px tiles)."""
    os.makedirs(directory, exist_ok=True)
    t = ["TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16"]
    seeds = [
        ("u16_deflate_p2_ovr_mask", "uint16", 2, t + ["COMPRESS=DEFLATE", "PREDICTOR=2"],
         None, True, True),
        ("f32_lzw_p3_nodata", "float32", 1, t + ["COMPRESS=LZW", "PREDICTOR=3"],
         -1, False, False),
        ("i16_zstd_band_bigtiff_be", "int16", 3,
         t + ["COMPRESS=ZSTD", "INTERLEAVE=BAND", "BIGTIFF=YES", "ENDIANNESS=BIG"],
         None, False, False),
        ("u8_packbits_strips", "uint8", 1, ["TILED=NO", "BLOCKYSIZE=4", "COMPRESS=PACKBITS"],
         None, False, False),
        ("u8x3_jpeg_ycbcr", "uint8", 3, t + ["COMPRESS=JPEG", "PHOTOMETRIC=YCBCR"],
         None, False, False),
        ("u8x3_webp", "uint8", 3, t + ["COMPRESS=WEBP", "WEBP_LOSSLESS=TRUE"],
         None, False, False),
        ("f32_lerc_zstd", "float32", 1, t + ["COMPRESS=LERC_ZSTD"], None, False, False),
        ("u8_sparse", "uint8", 1, t + ["SPARSE_OK=TRUE"], 0, False, False),
    ]
    w, h = 40, 30
    for name, dt, nb, opts, nodata, mask, ovr in seeds:
        rng = np.random.default_rng(len(name))
        a = np.stack([np.add.outer(np.arange(h), np.arange(w)) * 3 + rng.integers(0, 4, (h, w))
                      for _ in range(nb)]).astype(dt)
        tmp = os.path.join(directory, ".src.tif")
        with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
            with rasterio.open(tmp, "w", driver="GTiff", width=w, height=h, count=nb, dtype=dt,
                               crs="EPSG:4326", transform=Affine.from_gdal(0, 1, 0, 0, 0, -1),
                               nodata=nodata, TILED="YES", BLOCKXSIZE=16, BLOCKYSIZE=16) as m:
                m.write(a)
                if mask:
                    mk = np.full((h, w), 255, np.uint8)
                    mk[:10, :10] = 0
                    m.write_mask(mk)
                if ovr:
                    m.build_overviews([2], Resampling.nearest)
            try:
                rasterio.shutil.copy(tmp, os.path.join(directory, name), driver="GTiff",
                                     **_kw(opts + (["COPY_SRC_OVERVIEWS=YES"] if ovr else [])))
            finally:
                os.unlink(tmp)


if __name__ == "__main__":
    import argparse
    import time
    ap = argparse.ArgumentParser(
        description="Write every conformance fixture (cached; see the "
                    "module docstring).")
    ap.add_argument("dir", nargs="?", default=None,
                    help="where (default $CF_TEST_DATA/conformance)")
    ap.add_argument("--fuzz-seeds", metavar="DIR",
                    help="write the fuzzers' seed files into DIR instead")
    a = ap.parse_args()
    if a.fuzz_seeds:
        write_fuzz_seeds(a.fuzz_seeds)
        raise SystemExit(0)
    t0 = time.time()
    ps = generate_all(a.dir)
    total = sum(os.path.getsize(p) for p in ps.values())
    print("%d fixtures, %.1f MB, %.1f s" % (len(ps), total / 1e6, time.time() - t0))
