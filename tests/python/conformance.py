"""Conformance fixtures: GeoTIFFs written by GDAL, and GDAL's reads of them.

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
import struct
import tempfile

import numpy as np
from osgeo import gdal, osr

gdal.UseExceptions()

# Cached fixtures are keyed by the spec and by this file's own text, so any
# change to the pixel content or to the way files are written regenerates
# them (about 10 s for the whole matrix).
with open(os.path.abspath(__file__), "rb") as _f:
    GENERATOR_VERSION = hashlib.sha256(_f.read()).hexdigest()[:16]

GDAL_TYPES = {
    "uint8": gdal.GDT_Byte,
    "int8": gdal.GDT_Byte,  # with PIXELTYPE=SIGNEDBYTE (GDAL 3.6 has no GDT_Int8)
    "uint16": gdal.GDT_UInt16,
    "int16": gdal.GDT_Int16,
    "uint32": gdal.GDT_UInt32,
    "int32": gdal.GDT_Int32,
    "uint64": gdal.GDT_UInt64,
    "int64": gdal.GDT_Int64,
    "float32": gdal.GDT_Float32,
    "float64": gdal.GDT_Float64,
}


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
    blob = json.dumps({"spec": spec, "gen": GENERATOR_VERSION, "gdal": gdal.__version__},
                      sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def default_dir():
    root = os.environ.get("CF_TEST_DATA")
    if not root:
        root = os.path.join(tempfile.gettempdir(), "cogfeed-testdata")
    return os.path.join(root, "conformance")


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


def _mem_source(spec, data):
    w, h, nb = spec["width"], spec["height"], spec["bands"]
    mem = gdal.GetDriverByName("MEM").Create("", w, h, nb, GDAL_TYPES[spec["dtype"]])
    if spec["dtype"] == "int8":
        mem.GetRasterBand(1).SetMetadataItem("PIXELTYPE", "SIGNEDBYTE", "IMAGE_STRUCTURE")
    mem.SetGeoTransform([500000.0, 10.0, 0.0, 4200000.0, 0.0, -10.0])
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    mem.SetProjection(srs.ExportToWkt())
    for b in range(nb):
        band = mem.GetRasterBand(b + 1)
        arr = data[b]
        if spec["dtype"] == "int8":
            arr = arr.view(np.uint8)
        band.WriteArray(arr)
        if spec["nodata"] is not None:
            band.SetNoDataValue(float("nan") if spec["nodata"] == "nan" else spec["nodata"])
        if spec["scale_offset"]:
            band.SetScale(spec["scale_offset"][b][0])
            band.SetOffset(spec["scale_offset"][b][1])
    if spec["mask"]:
        mem.CreateMaskBand(gdal.GMF_PER_DATASET)
        mem.GetRasterBand(1).GetMaskBand().WriteArray(_mask_array(spec))
    return mem


def _write_gtiff(spec, data, path):
    opts = ["COMPRESS=" + spec["compress"]] + list(spec["options"])
    if spec["dtype"] == "int8":
        opts.append("PIXELTYPE=SIGNEDBYTE")
    src = _mem_source(spec, data)
    if spec["sparse"]:
        # Write block by block, skipping the empty ones: SPARSE_OK=TRUE keeps
        # them out of the file (offset 0, byte count 0).
        w, h, nb = spec["width"], spec["height"], spec["bands"]
        tw = int(_opt(spec, "BLOCKXSIZE", 256))
        th = int(_opt(spec, "BLOCKYSIZE", 256))
        drv = gdal.GetDriverByName("GTiff")
        ds = drv.Create(path, w, h, nb, GDAL_TYPES[spec["dtype"]], options=opts)
        ds.SetGeoTransform(src.GetGeoTransform())
        ds.SetProjection(src.GetProjection())
        keep = _sparse_keep(spec, tw, th)
        for b in range(nb):
            band = ds.GetRasterBand(b + 1)
            if spec["nodata"] is not None:
                band.SetNoDataValue(float("nan") if spec["nodata"] == "nan" else spec["nodata"])
            for ty in range(keep.shape[0]):
                for tx in range(keep.shape[1]):
                    if keep[ty, tx]:
                        x0, y0 = tx * tw, ty * th
                        band.WriteArray(data[b, y0:y0 + th, x0:x0 + tw], x0, y0)
        ds = None
        return
    if spec["overviews"] or spec["mask"]:
        # Overviews (and the mask's overviews) are built on a temporary copy
        # and copied in with COPY_SRC_OVERVIEWS so they land inside the file.
        tmp = path + ".src.tif"
        gdal.SetConfigOption("GDAL_TIFF_INTERNAL_MASK", "YES")
        try:
            t = gdal.GetDriverByName("GTiff").CreateCopy(
                tmp, src, options=["TILED=YES", "COMPRESS=DEFLATE"] +
                (["PIXELTYPE=SIGNEDBYTE"] if spec["dtype"] == "int8" else []))
            if spec["overviews"]:
                t.BuildOverviews("NEAREST" if spec["compress"] != "JPEG" else "AVERAGE",
                                 spec["overviews"])
            t = None
            t = gdal.Open(tmp)
            ovr_opts = ["COPY_SRC_OVERVIEWS=YES"] if spec["overviews"] else []
            gdal.GetDriverByName("GTiff").CreateCopy(path, t, options=opts + ovr_opts)
            t = None
        finally:
            gdal.SetConfigOption("GDAL_TIFF_INTERNAL_MASK", None)
            gdal.Unlink(tmp)
        return
    gdal.GetDriverByName("GTiff").CreateCopy(path, src, options=opts)


def _write_cog(spec, data, path):
    opts = ["COMPRESS=" + spec["compress"]] + list(spec["options"])
    src = _mem_source(spec, data)
    if spec["sparse"]:
        # COG + SPARSE_OK omits blocks that are entirely nodata: blank out a
        # checkerboard of blocks in the source.
        ts = int(_opt(spec, "BLOCKSIZE", 512))
        keep = _sparse_keep(spec, ts, ts)
        nd = spec["nodata"] if spec["nodata"] is not None else 0
        for b in range(spec["bands"]):
            arr = data[b].copy()
            for ty in range(keep.shape[0]):
                for tx in range(keep.shape[1]):
                    if not keep[ty, tx]:
                        arr[ty * ts:(ty + 1) * ts, tx * ts:(tx + 1) * ts] = nd
            src.GetRasterBand(b + 1).WriteArray(arr)
    gdal.GetDriverByName("COG").CreateCopy(path, src, options=opts)


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

def numpy_dtype(ds):
    b = ds.GetRasterBand(1)
    if b.DataType == gdal.GDT_Byte and \
            b.GetMetadataItem("PIXELTYPE", "IMAGE_STRUCTURE") == "SIGNEDBYTE":
        return np.dtype("int8")
    return np.dtype(gdal.GetDataTypeName(b.DataType).lower()
                    .replace("byte", "uint8"))


def level_size(ds, level):
    if level == 0:
        return ds.RasterXSize, ds.RasterYSize
    o = ds.GetRasterBand(1).GetOverview(level - 1)
    return o.XSize, o.YSize


def nodata_of(ds):
    return ds.GetRasterBand(1).GetNoDataValue()


def fill_value(ds):
    nd = nodata_of(ds)
    return 0 if nd is None else nd


def gdal_read(ds, window, bands=None, level=0):
    """Expected (bands, h, w) array: GDAL inside the image, nodata/0 outside."""
    x, y, w, h = window
    bands = list(bands) if bands else list(range(1, ds.RasterCount + 1))
    W, H = level_size(ds, level)
    dt = numpy_dtype(ds)
    out = np.empty((len(bands), h, w), dtype=dt)
    out[...] = np.array(fill_value(ds)).astype(dt)
    x0, y0 = max(x, 0), max(y, 0)
    x1, y1 = min(x + w, W), min(y + h, H)
    if x1 <= x0 or y1 <= y0:
        return out
    for i, b in enumerate(bands):
        band = ds.GetRasterBand(b)
        if level:
            band = band.GetOverview(level - 1)
        a = band.ReadAsArray(x0, y0, x1 - x0, y1 - y0)
        if dt == np.int8:
            a = a.view(np.int8) if a.dtype == np.uint8 else a.astype(np.int8)
        out[i, y0 - y:y1 - y, x0 - x:x1 - x] = a
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
    m = ds.GetRasterBand(1).GetMaskBand()
    if level:
        m = m.GetOverview(level - 1)
    out[y0 - y:y1 - y, x0 - x:x1 - x] = m.ReadAsArray(x0, y0, x1 - x0, y1 - y0)
    return out


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
    wkt = ds.GetProjection()
    if not wkt:
        return None
    srs = osr.SpatialReference(wkt=wkt)
    srs.AutoIdentifyEPSG()
    code = srs.GetAuthorityCode(None)
    return int(code) if code else None


def gdal_compression(ds):
    c = ds.GetMetadataItem("COMPRESSION", "IMAGE_STRUCTURE")
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
        ("u16_deflate_p2_ovr_mask", gdal.GDT_UInt16, 2, t + ["COMPRESS=DEFLATE", "PREDICTOR=2"],
         None, True, True),
        ("f32_lzw_p3_nodata", gdal.GDT_Float32, 1, t + ["COMPRESS=LZW", "PREDICTOR=3"],
         -1, False, False),
        ("i16_zstd_band_bigtiff_be", gdal.GDT_Int16, 3,
         t + ["COMPRESS=ZSTD", "INTERLEAVE=BAND", "BIGTIFF=YES", "ENDIANNESS=BIG"],
         None, False, False),
        ("u8_packbits_strips", gdal.GDT_Byte, 1, ["TILED=NO", "BLOCKYSIZE=4", "COMPRESS=PACKBITS"],
         None, False, False),
        ("u8x3_jpeg_ycbcr", gdal.GDT_Byte, 3, t + ["COMPRESS=JPEG", "PHOTOMETRIC=YCBCR"],
         None, False, False),
        ("u8x3_webp", gdal.GDT_Byte, 3, t + ["COMPRESS=WEBP", "WEBP_LOSSLESS=TRUE"],
         None, False, False),
        ("f32_lerc_zstd", gdal.GDT_Float32, 1, t + ["COMPRESS=LERC_ZSTD"], None, False, False),
        ("u8_sparse", gdal.GDT_Byte, 1, t + ["SPARSE_OK=TRUE"], 0, False, False),
    ]
    w, h = 40, 30
    for name, dt, nb, opts, nodata, mask, ovr in seeds:
        rng = np.random.default_rng(len(name))
        mem = gdal.GetDriverByName("MEM").Create("", w, h, nb, dt)
        mem.SetGeoTransform([0, 1, 0, 0, 0, -1])
        srs = osr.SpatialReference()
        srs.ImportFromEPSG(4326)
        mem.SetProjection(srs.ExportToWkt())
        for b in range(nb):
            a = np.add.outer(np.arange(h), np.arange(w)) * 3 + rng.integers(0, 4, (h, w))
            mem.GetRasterBand(b + 1).WriteArray(a)
            if nodata is not None:
                mem.GetRasterBand(b + 1).SetNoDataValue(nodata)
        if mask:
            mem.CreateMaskBand(gdal.GMF_PER_DATASET)
            m = np.full((h, w), 255, np.uint8)
            m[:10, :10] = 0
            mem.GetRasterBand(1).GetMaskBand().WriteArray(m)
        tmp = os.path.join(directory, ".src.tif")
        if ovr:
            src = gdal.GetDriverByName("GTiff").CreateCopy(
                tmp, mem, options=["TILED=YES", "BLOCKXSIZE=16", "BLOCKYSIZE=16"])
            src.BuildOverviews("NEAREST", [2])
            src = None
            mem = gdal.Open(tmp)
            opts = opts + ["COPY_SRC_OVERVIEWS=YES"]
        gdal.SetConfigOption("GDAL_TIFF_INTERNAL_MASK", "YES")
        try:
            gdal.GetDriverByName("GTiff").CreateCopy(os.path.join(directory, name), mem,
                                                     options=opts)
        finally:
            gdal.SetConfigOption("GDAL_TIFF_INTERNAL_MASK", None)
            mem = None
            if os.path.exists(tmp):
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
