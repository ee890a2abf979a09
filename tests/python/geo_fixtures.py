"""Rasters for the geo tests, written and warped by GDAL's command-line
tools (Debian's gdal-bin: the oracle of reading onto a grid).

Only the CLI is used (gdal_translate, gdalwarp, gdalinfo), so that the
oracle is the GDAL named by `gdalinfo --version` whatever Python bindings
are installed.  Arrays go to GDAL as raw files described by a VRT; results
come back through cogfeed's plain window reader, whose bit-exactness
against GDAL the conformance suite checks.
"""

import json
import os
import subprocess

import numpy as np

import cogfeed

GDAL_TYPE = {
    "uint8": "Byte", "int16": "Int16", "uint16": "UInt16", "int32": "Int32",
    "uint32": "UInt32", "float32": "Float32", "float64": "Float64",
}


def gdal_version():
    out = subprocess.run(["gdalinfo", "--version"], capture_output=True,
                         text=True, check=True).stdout
    return out.strip()


def run(args, env=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run(args, capture_output=True, text=True, env=e)
    if p.returncode:
        raise RuntimeError("%s failed: %s" % (" ".join(args), p.stderr.strip()))
    return p


def _srs_xml(srs):
    return (srs.replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;").replace('"', "&quot;"))


def write_vrt(path, arr, gt, srs=None, nodata=None):
    """A VRT over raw little-endian samples of arr (bands, h, w)."""
    arr = np.ascontiguousarray(arr)
    b, h, w = arr.shape
    raw = path + ".raw"
    arr.astype(arr.dtype.newbyteorder("<")).tofile(raw)
    sz = arr.dtype.itemsize
    parts = ['<VRTDataset rasterXSize="%d" rasterYSize="%d">' % (w, h)]
    if srs:
        parts.append("<SRS>%s</SRS>" % _srs_xml(srs))
    parts.append("<GeoTransform>%s</GeoTransform>" % ", ".join(repr(float(v)) for v in gt))
    for i in range(b):
        parts.append('<VRTRasterBand dataType="%s" band="%d" subClass="VRTRawRasterBand">'
                     % (GDAL_TYPE[str(arr.dtype)], i + 1))
        if nodata is not None:
            parts.append("<NoDataValue>%r</NoDataValue>" % float(nodata))
        parts.append('<SourceFilename relativeToVRT="0">%s</SourceFilename>' % raw)
        parts.append("<ImageOffset>%d</ImageOffset><PixelOffset>%d</PixelOffset>"
                     "<LineOffset>%d</LineOffset><ByteOrder>LSB</ByteOrder>"
                     % (i * w * h * sz, sz, w * sz))
        parts.append("</VRTRasterBand>")
    parts.append("</VRTDataset>")
    with open(path, "w") as f:
        f.write("\n".join(parts))
    return path


def write_cog(path, arr, gt, srs="EPSG:32633", nodata=None, blocksize=256,
              overviews=False, ovr_resampling="AVERAGE", compress="DEFLATE",
              extra=(), env=None):
    """arr (bands, h, w) as a COG written by GDAL; srs: anything
    gdal_translate -a_srs takes."""
    vrt = write_vrt(path + ".src.vrt", arr, gt, None, nodata)
    args = ["gdal_translate", "-q", "-of", "COG", "-co", "BLOCKSIZE=%d" % blocksize,
            "-co", "COMPRESS=%s" % compress,
            "-co", "OVERVIEWS=%s" % ("AUTO" if overviews else "NONE"),
            "-co", "OVERVIEW_RESAMPLING=%s" % ovr_resampling]
    if srs:
        args += ["-a_srs", srs]
    for e in extra:
        args += ["-co", e]
    run(args + [vrt, path], env)
    for p in (vrt, vrt[:-4] + ".vrt.raw", path + ".src.vrt.raw"):
        if os.path.exists(p):
            os.remove(p)
    return path


def write_gtiff(path, arr, gt, srs, nodata=None, env=None):
    """A plain GTiff (keeps the GeoKeys GDAL writes for srs)."""
    vrt = write_vrt(path + ".src.vrt", arr, gt, None, nodata)
    args = ["gdal_translate", "-q", "-of", "GTiff"]
    if srs:
        args += ["-a_srs", srs]
    run(args + [vrt, path], env)
    os.remove(vrt)
    os.remove(vrt + ".raw")
    return path


def gdalinfo(path):
    return json.loads(run(["gdalinfo", "-json", path]).stdout)


def gdalwarp(src, dst, grid, resampling, srs=None, extra=()):
    """gdalwarp src onto cogfeed.Grid `grid` (its bounds, resolution and
    CRS, given as WKT2); the result read back as an array."""
    b = grid.bounds
    xres, yres = grid.res
    t_srs = srs or grid.crs.to_wkt()
    args = ["gdalwarp", "-q", "-overwrite", "-of", "GTiff", "-r", resampling,
            "-t_srs", t_srs, "-te", repr(b[0]), repr(b[1]), repr(b[2]), repr(b[3]),
            "-tr", repr(xres), repr(yres)] + list(extra) + [src, dst]
    run(args)
    with cogfeed.open(dst) as c:
        assert (c.width, c.height) == (grid.width, grid.height), (c.width, c.height)
        return c.read()


def gdalwarp_overview(src, grid, resampling):
    """The overview level gdalwarp picks for grid (from its debug log)."""
    b = grid.bounds
    xres, yres = grid.res
    p = run(["gdalwarp", "-q", "-overwrite", "--debug", "on", "-of", "MEM", "-r",
             resampling, "-t_srs", grid.crs.to_wkt(), "-te", repr(b[0]), repr(b[1]),
             repr(b[2]), repr(b[3]), "-tr", repr(xres), repr(yres), src, "/vsimem/x"])
    for line in p.stderr.splitlines():
        if "Selecting overview level" in line:
            return int(line.split("level")[1].split()[0]) + 1
    return 0


def gdalwarp_wheel(src, dst, grid, resampling, extra=()):
    """gdalwarp (-ovr AUTO) onto `grid` by the rasterio wheel's GDAL (3.10:
    gdalwarp_wheel.py), the oracle where Debian's 3.6 is known wrong (its
    overview choice across the antimeridian).  Returns (array, the level
    it read: 0 full resolution, n overview n)."""
    import sys
    b = grid.bounds
    xres, yres = grid.res
    here = os.path.dirname(os.path.abspath(__file__))
    p = run([sys.executable, os.path.join(here, "gdalwarp_wheel.py"), "-overwrite",
             "-of", "GTiff", "-r", resampling, "-t_srs", grid.crs.to_wkt(),
             "-te", repr(b[0]), repr(b[1]), repr(b[2]), repr(b[3]),
             "-tr", repr(xres), repr(yres)] + list(extra) + [src, dst],
            env={"CPL_DEBUG": "ON"})
    level = 0
    for line in p.stderr.splitlines():
        if "Selecting overview level" in line:
            level = int(line.split("level")[1].split()[0]) + 1
    with cogfeed.open(dst) as c:
        assert (c.width, c.height) == (grid.width, grid.height), (c.width, c.height)
        return c.read(), level
