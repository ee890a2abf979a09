"""cogfeed.Grid: a CRS, an affine transform and a size -- what a file, a
patch or a target of cog.read(grid=...) is laid out on.

Pixel-is-area, as GDAL and rasterio: the transform maps pixel corners and
pixel centres are at +0.5.  ``transform`` is in rasterio's (and the affine
package's) order ``(a, b, c, d, e, f)``: x = a*col + b*row + c,
y = d*col + e*row + f; ``geotransform`` is the same in GDAL's order
``(c, a, b, f, d, e)``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, Union, cast

from ._cogfeed import CRS, grid_from_bounds

if TYPE_CHECKING:
    from ._cogfeed import Cog

__all__ = ["Grid"]

#: Six numbers: a transform (rasterio order) or a geotransform (GDAL order).
_Six = Tuple[float, float, float, float, float, float]

#: What cogfeed.CRS() takes: a CRS, an EPSG code, "EPSG:4326", WKT,
#: PROJ JSON or a PROJ string.
CRSLike = Union[CRS, int, str]


def _crs(value: Optional[CRSLike]) -> Optional[CRS]:
    if value is None or isinstance(value, CRS):
        return value
    return CRS(value)


class Grid:
    """Grid(crs, transform, width, height) or Grid(crs, width=, height=,
    geotransform=(GDAL order)).

    crs: anything cogfeed.CRS() accepts, or None for a grid without one.
    Constructors: Grid.from_bounds(crs, bounds, res) and Grid.like(file).
    """

    __slots__ = ("crs", "geotransform", "width", "height")

    crs: Optional[CRS]
    geotransform: _Six
    width: int
    height: int

    def __init__(self, crs: Optional[CRSLike],
                 transform: Optional[Sequence[float]] = None,
                 width: Optional[int] = None, height: Optional[int] = None, *,
                 geotransform: Optional[Sequence[float]] = None) -> None:
        if (transform is None) == (geotransform is None):
            raise ValueError("Grid: give transform (rasterio order) or "
                             "geotransform (GDAL order), one of them")
        if transform is not None:
            t = tuple(float(v) for v in tuple(transform)[:6])
            if len(t) != 6:
                raise ValueError("transform must have 6 numbers (a, b, c, d, e, f)")
            gt: Tuple[float, ...] = (t[2], t[0], t[1], t[5], t[3], t[4])
        else:
            assert geotransform is not None
            gt = tuple(float(v) for v in geotransform)
            if len(gt) != 6:
                raise ValueError("geotransform must have 6 numbers")
        if width is None or height is None:
            raise ValueError("Grid: width and height are required")
        width, height = int(width), int(height)
        if width < 1 or height < 1:
            raise ValueError("Grid: width and height must be >= 1, got %dx%d"
                             % (width, height))
        object.__setattr__(self, "crs", _crs(crs))
        object.__setattr__(self, "geotransform", gt)
        object.__setattr__(self, "width", width)
        object.__setattr__(self, "height", height)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Grid is immutable")

    @classmethod
    def from_bounds(cls, crs: Optional[CRSLike],
                    bounds: Tuple[float, float, float, float],
                    res: Union[float, Tuple[float, float]]) -> Grid:
        """The north-up grid of resolution res (a number or (xres, yres))
        covering bounds (xmin, ymin, xmax, ymax) from its top-left corner;
        the size follows gdalwarp's -te/-tr rule."""
        if hasattr(res, "__len__"):
            xres, yres = cast(Tuple[float, float], res)
        else:
            xres = yres = float(res)
        c = _crs(crs)
        gt, w, h = grid_from_bounds(
            c, cast(Tuple[float, float, float, float], tuple(bounds)),
            float(xres), float(yres))
        return cls(c, geotransform=gt, width=w, height=h)

    @classmethod
    def like(cls, source: Union[Grid, Cog, str, bytes, os.PathLike[str]],
             level: int = 0) -> Grid:
        """The grid of a file (a cogfeed.Cog, a path or URL) or of a Grid."""
        if isinstance(source, Grid):
            return source
        if not isinstance(source, (str, bytes, os.PathLike)):
            return source.grid(level)
        from . import open as _open
        with _open(source) as cog:
            return cog.grid(level)

    @property
    def transform(self) -> _Six:
        c, a, b, f, d, e = self.geotransform
        return (a, b, c, d, e, f)

    @property
    def shape(self) -> Tuple[int, int]:
        """(height, width), numpy order."""
        return (self.height, self.width)

    @property
    def res(self) -> Tuple[float, float]:
        g = self.geotransform
        return (abs(complex(g[1], g[4])), abs(complex(g[2], g[5])))

    @property
    def bounds(self) -> Tuple[float, float, float, float]:
        """(left, bottom, right, top)."""
        g = self.geotransform
        xs, ys = [], []
        for px, py in ((0, 0), (self.width, 0), (0, self.height),
                       (self.width, self.height)):
            xs.append(g[0] + px * g[1] + py * g[2])
            ys.append(g[3] + px * g[4] + py * g[5])
        return (min(xs), min(ys), max(xs), max(ys))

    def window(self, x: int, y: int, width: int, height: int) -> Grid:
        """The window (x, y, width, height) of this grid as a Grid (a patch)."""
        g = self.geotransform
        return Grid(self.crs, width=width, height=height, geotransform=(
            g[0] + x * g[1] + y * g[2], g[1], g[2],
            g[3] + x * g[4] + y * g[5], g[4], g[5]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grid):
            return NotImplemented
        same_crs = (self.crs is None and other.crs is None) or (
            self.crs is not None and other.crs is not None and self.crs == other.crs)
        return (same_crs and self.geotransform == other.geotransform
                and (self.width, self.height) == (other.width, other.height))

    def __hash__(self) -> int:
        return hash((self.geotransform, self.width, self.height))

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        return (_rebuild, (self.crs, self.geotransform, self.width, self.height))

    def __repr__(self) -> str:
        return "Grid(%r, geotransform=%r, width=%d, height=%d)" % (
            self.crs, self.geotransform, self.width, self.height)


def _rebuild(crs: Optional[CRS], gt: _Six, w: int, h: int) -> Grid:
    return Grid(crs, geotransform=gt, width=w, height=h)


def _from_cog(crs: Optional[CRS], gt: _Six, width: int, height: int) -> Grid:
    return Grid(crs, geotransform=gt, width=width, height=height)
