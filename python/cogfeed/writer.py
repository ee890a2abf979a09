"""cogfeed.Writer and cogfeed.write: tiled GeoTIFFs written tile by tile
and finished as Cloud-Optimized GeoTIFFs in GDAL's COG layout.

    with cogfeed.Writer("pred.tif", like="scene.tif", bands=1,
                        dtype="uint8", nodata=255) as w:
        for ty in range(w.tiles[1]):
            for tx in range(w.tiles[0]):
                w.write_tile(tx, ty, classes_of(tx, ty))   # (bands, h, w)

    cogfeed.write("dem.tif", array, grid=grid, compression="zstd")
    cogfeed.write("dem.tif", dem, grid=grid, compression="lerc_zstd",
                  max_error=0.01)
    cogfeed.write("rgb.tif", rgb_uint8, grid=grid, compression="jpeg",
                  quality=85)

The C writer (cf_writer, include/cogfeed.h) encodes each tile as it comes
and keeps it in a spool file beside the output; close() builds the
overviews from it, lays the file out (header and every directory first,
then the smallest overview's tiles ... the full resolution's, each in row
order) and renames it into place: the output path never holds a partial
file.  Peak disk: the output plus the spool (its full resolution).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from ._cogfeed import StateError, _Writer
from .grid import Grid

__all__ = ["Writer", "write"]

# cf_dtype numbers (include/cogfeed.h) of the types the writer takes.
_DTYPES = {"uint8": 1, "int8": 2, "uint16": 3, "int16": 4, "uint32": 5,
           "int32": 6, "uint64": 7, "int64": 8, "float32": 9, "float64": 10}
# GDAL's COMPRESS names: the TIFF compression code and, for LERC, the
# code of its additional compression (cf_writer_options.lerc_layer).
_CODECS = {"none": (1, 1), "deflate": (8, 1), "zstd": (50000, 1),
           "lerc": (34887, 1), "lerc_deflate": (34887, 8),
           "lerc_zstd": (34887, 50000), "jpeg": (7, 1), "webp": (50001, 1)}
_COMPRESSION = {k: v[0] for k, v in _CODECS.items()}
_PHOTOMETRIC = {None: 0, "minisblack": 1, "rgb": 2, "ycbcr": 6}


def _codec(who: str, compression: str) -> Tuple[int, int]:
    comp = str(compression).lower()
    if comp not in _CODECS:
        raise ValueError("%s: compression %r: one of %s" % (
            who, compression, ", ".join(_CODECS)))
    return _CODECS[comp]
_RESAMPLING = {"nearest": 0, "average": 3, "mode": 4}

StrPath = Union[str, "os.PathLike[str]"]


class _Finishing:
    """close() / abort() / with-block of an object over a C one (self._c):
    close() finishes the file, abort() (or an exception inside the with
    block) leaves nothing behind.  A close() refused because another
    thread is still inside (RuntimeError) can be called again."""

    _c: Any

    def close(self) -> None:
        """Finish the file: overviews, layout, rename into place (an
        object: the last parts and the header sent, the object made)."""
        if self._c is not None:
            self._c.close()
            self._c = None

    def abort(self) -> None:
        """Give up: nothing is written, the spool is removed (an object:
        the upload is aborted)."""
        if self._c is not None:
            self._c.abort()
            self._c = None

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _share_arg(who: str, share: Any) -> Tuple[int, int]:
    """share=(first row of tiles, rows of tiles) as the C options take it;
    None: (0, 0), the whole image."""
    if share is None:
        return 0, 0
    try:
        r0, n = (int(v) for v in share)
    except (TypeError, ValueError):
        raise ValueError("%s: share %r: (first row of tiles, rows of tiles)"
                         % (who, share)) from None
    if r0 < 0 or n < 1:
        raise ValueError("%s: share %r: a first row >= 0 and at least one row"
                         % (who, share))
    return r0, n


class _Sharing(_Finishing):
    """A share writer's steps, for a Writer or Stitcher opened with
    share=(first row of tiles, rows of tiles): one of several processes
    that make one COG together (docs/writer.md, "One COG from several
    processes").  After its last tile: share_build() makes the overview
    rows of its share from its own rows (every process at once);
    share_carry(carry) takes the carry of the share before (None for the
    first share), makes the few rows whose windows reach into it and
    returns this share's carry for the next (in share order); close()
    then writes its file.  share_tiles(level) says which rows of tiles of
    each level it made, for the assembling Writer(overviews_given=True)."""

    path: str

    def _open(self) -> Any:
        """The C object; ValueError once closed."""
        if self._c is None:
            raise ValueError("%s: %s is closed" % (type(self).__name__, self.path))
        return self._c

    @property
    def levels(self) -> int:
        """Levels written: the full resolution and its overviews."""
        return cast(int, self._open().levels)

    def share_build(self) -> None:
        self._open().share_build()

    def share_carry(self, carry: Optional[bytes]) -> bytes:
        return cast(bytes, self._open().share_carry(carry))

    def share_tiles(self, level: int) -> Tuple[int, int]:
        return cast(Tuple[int, int], self._open().share_tiles(int(level)))


class Writer(_Sharing):
    """Writer(path, width=, height=, bands=, dtype=, *, grid=, like=,
    tile_size=512, compression="deflate", level=0, predictor=None,
    overviews="auto", overview_resampling="average", nodata=None,
    descriptions=None, scales=None, offsets=None, max_error=0.0,
    quality=None, lossless=False, photometric=None, io=None, part_size=0,
    mask=False)

    path: a local file, or an object: s3://bucket/key, gs://bucket/key,
    az://container/blob or https://ACCOUNT.blob.core.windows.net/c/blob,
    with the credentials reading takes (docs/remote.md).  An object is
    streamed as multipart parts (S3, Cloud Storage) or Azure blocks while
    tiles come, with no local
    copy; the header goes up last.  Nothing is visible until close()
    succeeds; a failure or abort() aborts the upload and leaves no object
    (docs/inference.md, "Writing to object storage").  io: a cogfeed.IO
    whose timeouts and retries the upload follows.  part_size: bytes per
    part (0: 8 MiB; at least 5 MiB).  like: a file (path, URL or cogfeed.Cog) or a
    cogfeed.Grid whose grid, size and (for a file) band count, data type
    and nodata are the defaults of the others.  grid: a cogfeed.Grid (a CRS
    without an EPSG code is written as GDAL's user-defined GeoKeys:
    docs/writer.md); width and height default to its size.
    compression: GDAL's COMPRESS names: "deflate", "zstd", "none",
    "lerc", "lerc_deflate", "lerc_zstd", "jpeg" (uint8, 1 or 3 bands) or
    "webp" (uint8, 3 or 4 bands).  level: DEFLATE's, ZSTD's or the LERC
    layer's level (0: GDAL's default).  max_error: LERC's largest error
    per value (GDAL's MAX_Z_ERROR; 0, the default, is lossless).
    quality: JPEG's and WEBP's 1..100 (None: GDAL's 75; WEBP at 100 is
    lossless, as GDAL's COG driver).  lossless: WEBP lossless (GDAL's
    WEBP_LOSSLESS).  photometric: None (JPEG of 3 bands "ycbcr" as GDAL,
    WEBP "rgb", else "minisblack"), "minisblack", "rgb" or "ycbcr" (JPEG
    of 3 bands).  Options that do not fit the codec are refused (quality
    with DEFLATE, max_error with JPEG, ...).  predictor: None picks 2 for
    integers and 3 for floats with DEFLATE and ZSTD; 1 turns it off.  overviews: "auto" halves
    until a level fits one tile (GDAL's COG driver), 0 writes none, n at
    most n.  overview_resampling: "average" (nodata and NaN left out, as
    gdaladdo -r average), "nearest" or "mode" (class maps).  nodata: a
    number, written as GDAL_NODATA.  descriptions, scales, offsets: one
    per band, as GDAL's band descriptions and scale/offset.  mask: an
    internal mask band (GDAL's per-dataset mask, as `gdal_translate -mask`
    or GDAL_TIFF_INTERNAL_MASK write it: 1 bit a pixel, DEFLATE), given
    per tile by write_tile(..., mask=) or write(..., mask=); a tile written
    without one is all valid, a tile never written is not.  Its overviews
    are GDAL's: the mask resampled as the image (average: valid where any
    pixel under it is), and an average leaves masked pixels out.

    Tiles come in any order through write_tile (from any number of
    threads: each call encodes its tile in an encoder of its own, at most
    one per CPU, or `threads`), or whole tile-aligned windows through
    write (their tiles encoded on `threads` threads), or already
    encoded through write_encoded_tile;
    tiles never written are sparse (read as
    nodata, or 0).  close() (or leaving a with block) finishes the file; an
    exception inside the block, or abort(), leaves nothing behind.

    threads: None (one per CPU this process may use, within 256 MiB of
    their buffers) or at most that many for each of the writer's parallel
    stages: tiles encoded at once, write()'s pool, the overview pass at
    close (or, for an object, as rows complete).  Several writers or
    processes on one machine (torchrun's ranks) each take their own: give
    each its share.  The bytes written do not depend on it.

    One COG from several processes (docs/writer.md): share=(first row of
    tiles, rows of tiles) makes a share writer, a local file holding those
    full-resolution rows and the overview rows its share owns (see
    share_build, share_carry, share_tiles); overviews_given=True makes the
    writer that assembles the shares' files: every level's tiles given
    through write_encoded_tile(..., level=), none made, none decoded.
    With layout_only=True as well, the writer writes and opens nothing:
    layout(sizes) gives the COG's header and every tile's offset from the
    tiles' encoded sizes, for processes that each upload their own tiles
    as parts of one object (cogfeed.Upload).
    """

    def __init__(self, path: StrPath, width: Optional[int] = None,
                 height: Optional[int] = None, bands: Optional[int] = None,
                 dtype: Any = None, *, grid: Optional[Grid] = None,
                 like: Any = None, tile_size: int = 512,
                 compression: str = "deflate", level: int = 0,
                 predictor: Optional[int] = None,
                 overviews: Union[str, int] = "auto",
                 overview_resampling: str = "average",
                 nodata: Optional[float] = None,
                 descriptions: Optional[Sequence[Optional[str]]] = None,
                 scales: Optional[Sequence[float]] = None,
                 offsets: Optional[Sequence[float]] = None,
                 max_error: float = 0.0, quality: Optional[int] = None,
                 lossless: bool = False,
                 photometric: Optional[str] = None, io: Any = None,
                 part_size: int = 0, mask: bool = False,
                 threads: Optional[int] = None,
                 share: Optional[Tuple[int, int]] = None,
                 overviews_given: bool = False,
                 layout_only: bool = False) -> None:
        if threads is not None and int(threads) < 1:
            raise ValueError("Writer: threads %r: None (one per CPU) or at least 1"
                             % (threads,))
        share_row0, share_rows = _share_arg("Writer", share)
        self.threads = int(threads) if threads is not None else None
        if isinstance(like, Grid):
            grid = like if grid is None else grid
        elif like is not None:
            if isinstance(like, (str, bytes, os.PathLike)):
                from . import open as _open
                with _open(like) as cog:
                    lg, lb, ldt, lnd = cog.grid(0), cog.count, cog.dtype, cog.nodata
            else:  # a cogfeed.Cog
                lg, lb, ldt, lnd = like.grid(0), like.count, like.dtype, like.nodata
            grid = lg if grid is None else grid
            bands = lb if bands is None else bands
            if dtype is None:  # its nodata only with its dtype: a float
                dtype = ldt    # scene's NaN is no uint8 class map's
                nodata = lnd if nodata is None else nodata
        if grid is not None:
            width = grid.width if width is None else width
            height = grid.height if height is None else height
        if width is None or height is None:
            raise ValueError("Writer: give width and height, grid= or like=")
        dt = np.dtype(dtype if dtype is not None else "uint8")
        if dt.name not in _DTYPES:
            raise ValueError("Writer: dtype %s not written (%s)" % (
                dt, ", ".join(_DTYPES)))
        code, layer = _codec("Writer", compression)
        ph = photometric.lower() if isinstance(photometric, str) else photometric
        if ph not in _PHOTOMETRIC:
            raise ValueError("Writer: photometric %r: None, 'minisblack', "
                             "'rgb' or 'ycbcr'" % (photometric,))
        if quality is not None and not 1 <= int(quality) <= 100:
            raise ValueError("Writer: quality %r not in 1..100" % (quality,))
        rs = str(overview_resampling).lower()
        if rs not in _RESAMPLING:
            raise ValueError("Writer: overview_resampling %r: one of %s" % (
                overview_resampling, ", ".join(_RESAMPLING)))
        if overviews == "auto":
            ovr = -1
        elif isinstance(overviews, int) and overviews >= 0:
            ovr = overviews
        else:
            raise ValueError("Writer: overviews %r: 'auto' or a count" % (
                overviews,))
        self.dtype = dt
        self.bands = int(bands if bands is not None else 1)
        self.width, self.height = int(width), int(height)
        self.tile_size = int(tile_size)
        self.path = os.fspath(path)
        self.mask = bool(mask)
        # a grid's own size is not the writer's: only its CRS and transform
        self._c: Optional[_Writer] = _Writer(
            path, self.width, self.height, self.bands, _DTYPES[dt.name],
            self.tile_size, code, int(level),
            0 if predictor is None else int(predictor), ovr, _RESAMPLING[rs],
            None if nodata is None else float(nodata), grid,
            None if descriptions is None else list(descriptions),
            None if scales is None else [float(v) for v in scales],
            None if offsets is None else [float(v) for v in offsets],
            layer, float(max_error), 0 if quality is None else int(quality),
            bool(lossless), _PHOTOMETRIC[ph], io, int(part_size), self.mask,
            self.threads or 0, share_row0, share_rows, bool(overviews_given),
            bool(layout_only))

    def layout(self, sizes: Sequence[int]) -> Tuple[bytes, List[int]]:
        """A layout writer's (layout_only=True) COG from its tiles' encoded
        sizes: for each level from 0 (full resolution) to levels - 1, each
        tile in row order, its bytes then (with mask) its mask tile's (0:
        sparse).  Returns (header, offsets): the file's first bytes, every
        directory with each tile's place, and where each size's bytes go
        (0 for none); the file is the header followed by the tiles' bytes
        in the order of their offsets, the bytes a writer given the tiles
        would write.  May be called again."""
        header, offsets = self._open().layout([int(n) for n in sizes])
        return header, offsets

    @property
    def tiles(self) -> Tuple[int, int]:
        """(tiles across, tiles down) at full resolution."""
        return cast(Tuple[int, int], self._open().tiles)

    def tile_window(self, tx: int, ty: int) -> Tuple[int, int, int, int]:
        """(x, y, w, h) of tile (tx, ty), clipped at the image's edges."""
        t = self.tile_size
        x, y = tx * t, ty * t
        return x, y, min(t, self.width - x), min(t, self.height - y)

    def _array(self, a: Any) -> np.ndarray:
        a = np.asarray(a)
        if a.ndim == 2:
            a = a[None]
        if a.ndim != 3 or a.shape[0] != self.bands:
            raise ValueError("Writer: an array of (bands=%d, h, w) expected, "
                             "got shape %s" % (self.bands, a.shape))
        if a.dtype != self.dtype:
            raise TypeError("Writer: %s array for a %s file (cast it: "
                            "nothing is converted silently)" % (
                                a.dtype, self.dtype))
        return np.ascontiguousarray(a)

    def _mask(self, mask: Any, shape: Tuple[int, ...]) -> Optional[np.ndarray]:
        """mask as bytes (1 valid, 0 not) of shape (h, w), or None."""
        if mask is None:
            return None
        if not self.mask:
            raise ValueError("Writer: a mask for %s, opened without one "
                             "(Writer(..., mask=True))" % self.path)
        m = np.asarray(mask)
        if m.shape != shape:
            raise ValueError("Writer: a mask of shape %s for pixels %s" % (
                m.shape, shape))
        return np.ascontiguousarray(m != 0, dtype=np.uint8)

    def _split(self, array: Any, mask: Any) -> Tuple[Any, Any]:
        """(data, mask) of array: a numpy masked array's data, and its mask
        when none is given (a pixel valid where no band of it is masked);
        masked pixels for a writer without a mask are refused, not written
        as data."""
        if not isinstance(array, np.ma.MaskedArray):
            return array, mask
        if mask is None:
            mm = np.ma.getmaskarray(array)
            bad = mm.any(axis=0) if mm.ndim == 3 else mm
            if bad.any() and not self.mask:
                raise ValueError(
                    "Writer: a masked array with %d masked pixels for %s, "
                    "opened without a mask (Writer(..., mask=True), or "
                    "array.filled(nodata))" % (int(bad.sum()), self.path))
            mask = ~bad if self.mask else None
        return array.data, mask

    def write_tile(self, tx: int, ty: int, array: Any,
                   mask: Any = None) -> None:
        """Tile (tx, ty): an array (bands, h, w) (or (h, w) for one band)
        of the writer's dtype, h and w the tile's clipped size; mask (h, w)
        (true or non-zero: valid), for a writer opened with mask=True; a
        numpy masked array brings its own (see write)."""
        array, mask = self._split(array, mask)
        a = self._array(array)
        self._open().write_tile(int(tx), int(ty), a, self._mask(mask, a.shape[1:]))

    def write_encoded_tile(self, tx: int, ty: int, data: Any,
                           mask: Any = None, level: int = 0) -> None:
        """Tile (tx, ty) given as the bytes a writer with the same options
        stored for it (Cog.tile_info's offset and byte_count in a file it
        wrote; mask: its mask tile's, Cog.tile_info(..., mask=True), which
        a writer with mask=True requires), kept as they are: tiles copied
        from one COG into another without encoding them again, as predict
        assembles the shares of a distributed run.  b"" leaves the tile
        sparse.  The bytes are checked (size; decoded once, for the
        overviews or, without them, here; with overviews_given=True
        the size only).  level > 0: a tile of an
        overview, for a writer with overviews_given=True (share writers'
        tiles: not decoded; to object storage, each level's tiles in row
        order)."""
        self._open().write_encoded_tile(int(tx), int(ty), data, mask, int(level))

    def write(self, array: Any, x: int = 0, y: int = 0,
              mask: Any = None) -> None:
        """Every tile of the window (x, y, w, h) of array (bands, h, w):
        x and y on tile corners, w and h whole tiles or up to the image's
        edge (a whole image is write(array)).  mask: (h, w), true or
        non-zero where valid (a writer opened with mask=True); a numpy
        masked array gives its own (a pixel valid where no band of it is
        masked) when mask is None; on a writer without a mask, a masked
        array with masked pixels is refused (ValueError)."""
        array, mask = self._split(array, mask)
        a = self._array(array)
        m = self._mask(mask, a.shape[1:])
        t = self.tile_size
        h, w = a.shape[1:]
        if x % t or y % t:
            raise ValueError("Writer.write: (%d, %d) is not a tile corner "
                             "(tile_size %d)" % (x, y, t))
        if x + w > self.width or y + h > self.height or (
                w % t and x + w != self.width) or (
                h % t and y + h != self.height):
            raise ValueError("Writer.write: window (%d, %d, %d, %d) is not "
                             "whole tiles inside %dx%d" % (
                                 x, y, w, h, self.width, self.height))
        wr = self._open()

        def one(tx: int, ty: int) -> None:
            x0, y0, tw, th = self.tile_window(tx, ty)
            win = np.s_[y0 - y:y0 - y + th, x0 - x:x0 - x + tw]
            wr.write_tile(tx, ty, np.ascontiguousarray(a[(slice(None),) + win]),
                          None if m is None else np.ascontiguousarray(m[win]))

        tiles = [(tx, ty) for ty in range(y // t, (y + h + t - 1) // t)
                 for tx in range(x // t, (x + w + t - 1) // t)]
        # The tiles are encoded on a thread each (the writer encodes tiles
        # written at once in parallel, a slot per CPU; the GIL is released
        # meanwhile); the file is the same bytes in any order.
        threads = min(len(tiles), self.threads or _usable_cpus())
        if threads < 2:
            for tx, ty in tiles:
                one(tx, ty)
            return
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cogfeed-encode")
        futures = [pool.submit(one, tx, ty) for tx, ty in tiles]
        try:
            for f in futures:  # (until the first failure)
                if f.exception() is not None:
                    break
        finally:
            # on a failure (or Ctrl-C) the tiles not started are not written
            pool.shutdown(wait=True, cancel_futures=True)
        errors = [e for e in (f.exception() for f in futures if not f.cancelled())
                  if e is not None]
        if errors:
            # a tile's own failure before those of tiles that only found
            # the writer failed by it (StateError)
            raise next((e for e in errors if not isinstance(e, StateError)), errors[0])



def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container's or
    taskset's share), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def write(path: StrPath, array: Any, mask: Any = None, **kwargs: Any) -> None:
    """Write array (bands, h, w) or (h, w) as a COG at path: Writer's
    keyword arguments (grid=, like=, compression=, nodata=, ...); the size,
    band count and dtype come from the array.  mask (h, w), true or
    non-zero where valid, is written as an internal mask band; so is a
    numpy masked array's mask (a pixel valid where no band is masked)
    when mask is None; mask=False writes a masked array's data with no
    mask band."""
    masked = isinstance(array, np.ma.MaskedArray)
    if mask is False:
        array, mask, masked = np.ma.getdata(array), None, False
    a = np.asarray(array.data if masked else array)
    if a.ndim == 2:
        a = a[None]
    with Writer(path, a.shape[2], a.shape[1], a.shape[0], a.dtype,
                mask=mask is not None or masked, **kwargs) as w:
        w.write(array if masked and mask is None else a, mask=mask)
