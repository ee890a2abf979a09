"""gdalwarp as the GDAL of the rasterio wheel runs it (GDAL 3.10 at the
time of writing; Debian's gdal-bin is 3.6): its C API's GDALWarp, the
function behind the gdalwarp program, called through ctypes on the wheel's
libgdal.  The oracle of the antimeridian and pole tests: GDAL 3.7 fixed
gdalwarp's overview choice across the antimeridian (its issue 7019), which
Debian's 3.6 gets 8x too coarse.

    python gdalwarp_wheel.py [gdalwarp options] SRC DST

With CPL_DEBUG=ON in the environment GDAL logs its choices to stderr
("Selecting overview level N")."""

import ctypes
import glob
import os
import sys

import rasterio


def _lib():
    libs = os.path.join(os.path.dirname(rasterio.__file__), os.pardir, "rasterio.libs")
    found = sorted(glob.glob(os.path.join(libs, "libgdal-*.so*")))
    if not found:
        raise RuntimeError("no libgdal in %s" % libs)
    lib = ctypes.CDLL(found[0])
    lib.GDALAllRegister()
    lib.GDALVersionInfo.restype = ctypes.c_char_p
    lib.GDALVersionInfo.argtypes = [ctypes.c_char_p]
    lib.GDALOpenEx.restype = ctypes.c_void_p
    lib.GDALOpenEx.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_void_p,
                               ctypes.c_void_p, ctypes.c_void_p]
    lib.GDALWarpAppOptionsNew.restype = ctypes.c_void_p
    lib.GDALWarpAppOptionsNew.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p]
    lib.GDALWarpAppOptionsFree.argtypes = [ctypes.c_void_p]
    lib.GDALWarp.restype = ctypes.c_void_p
    lib.GDALWarp.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_int)]
    lib.GDALClose.argtypes = [ctypes.c_void_p]
    return lib


def version():
    return _lib().GDALVersionInfo(b"RELEASE_NAME").decode()


def main(argv):
    lib = _lib()
    *opts, src, dst = argv
    arr = (ctypes.c_char_p * (len(opts) + 1))(*[o.encode() for o in opts], None)
    o = lib.GDALWarpAppOptionsNew(arr, None)
    if not o:
        sys.exit("gdalwarp_wheel: bad options %r" % (opts,))
    h = lib.GDALOpenEx(src.encode(), 0x02 | 0x40, None, None, None)  # raster, shared
    if not h:
        sys.exit("gdalwarp_wheel: cannot open %s" % src)
    hs = (ctypes.c_void_p * 1)(h)
    usage = ctypes.c_int(0)
    d = lib.GDALWarp(dst.encode(), None, 1, hs, o, ctypes.byref(usage))
    lib.GDALWarpAppOptionsFree(o)
    if not d:
        sys.exit("gdalwarp_wheel: GDALWarp failed")
    lib.GDALClose(d)
    lib.GDALClose(h)


if __name__ == "__main__":
    main(sys.argv[1:])
