"""cogfeed.VectorLabels: labels drawn as polygons (fields, flood and burn
outlines, buildings), burnt into each patch's mask on its target grid.

The polygons are read once (a file through pyogrio, the ``vector`` extra;
or geometries given directly), indexed in C (a packed Hilbert R-tree over
their bounds) and burnt per patch in C with gdal_rasterize's rules: a
pixel takes a feature's class when its centre is inside it, or, with
``all_touched``, when the feature's outline passes through it too; where
features overlap the later one wins; elsewhere 0.  A patch reads only the
features its bounds select, in the features' own CRS, and transforms only
their vertices to its grid (as ogr2ogr then gdal_rasterize would).
docs/datasets.md, "Labels from vector files".
"""

from __future__ import annotations

import os
import struct
from typing import (TYPE_CHECKING, Any, Callable, Iterable, List, Mapping,
                    Optional, Sequence, Tuple, Union, cast)

from . import _cogfeed

if TYPE_CHECKING:
    import numpy as np

    from .grid import Grid

__all__ = ["VectorLabels"]

StrPath = Union[str, "os.PathLike[str]"]


def _ring_wkb(ring: Sequence[Sequence[float]]) -> bytes:
    pts = [(float(p[0]), float(p[1])) for p in ring]
    return struct.pack("<I", len(pts)) + b"".join(struct.pack("<dd", x, y)
                                                  for x, y in pts)


def _geojson_wkb(geom: Mapping[str, Any]) -> bytes:
    """A GeoJSON Polygon / MultiPolygon (a dict) as little-endian WKB."""
    t = geom.get("type")
    c: Any = geom.get("coordinates")
    if not isinstance(c, (list, tuple)):
        raise ValueError("vector labels: a geometry without coordinates")
    if t == "Polygon":
        return (struct.pack("<BII", 1, 3, len(c))
                + b"".join(_ring_wkb(r) for r in c))
    if t == "MultiPolygon":
        return (struct.pack("<BII", 1, 6, len(c))
                + b"".join(_geojson_wkb({"type": "Polygon", "coordinates": p})
                           for p in c))
    raise ValueError("vector labels: a %r geometry; labels are Polygon or "
                     "MultiPolygon" % (t,))


def _as_wkb(g: Any) -> bytes:
    if isinstance(g, (bytes, bytearray, memoryview)):
        return bytes(g)
    if isinstance(g, Mapping):
        if g.get("type") == "Feature":
            return _geojson_wkb(g["geometry"])
        return _geojson_wkb(g)
    wkb = getattr(g, "wkb", None)  # shapely and friends
    if isinstance(wkb, (bytes, bytearray)):
        return bytes(wkb)
    gi = getattr(g, "__geo_interface__", None)
    if isinstance(gi, Mapping):
        return _as_wkb(gi)
    raise TypeError("vector labels: a geometry must be WKB bytes, a GeoJSON "
                    "dict or have .wkb / __geo_interface__, not %s"
                    % type(g).__name__)


def _class_values(raw: Iterable[Any], classes: Optional[Mapping[Any, int]],
                  attribute: str, where: str) -> List[float]:
    out: List[float] = []
    for i, v in enumerate(raw):
        if classes is not None:
            if v not in classes:
                raise ValueError("%s: feature %d has %s=%r, which classes= "
                                 "does not name" % (where, i, attribute, v))
            v = classes[v]
        if v is None:
            raise ValueError("%s: feature %d has no %s" % (where, i,
                                                           attribute))
        try:
            out.append(float(v))
        except (TypeError, ValueError):
            raise ValueError("%s: feature %d has %s=%r: not a number (map "
                             "names to classes with classes=)"
                             % (where, i, attribute, v)) from None
    return out


class VectorLabels:
    """VectorLabels(source, attribute=None, *, classes=None, value=1,
    layer=None, where=None, crs=None, all_touched=False)

    source: a vector file (GeoPackage, GeoJSON, Shapefile, FlatGeobuf...:
        anything GDAL reads, through pyogrio: ``pip install
        cogfeed[vector]``), or a sequence of geometries (WKB bytes, GeoJSON
        dicts or Features, shapely geometries).
    attribute: the field holding each feature's class (a file); None: every
        feature burns ``value``.  For a sequence of geometries, ``values``
        may be given instead as a sequence.
    classes: a mapping from the attribute's values (e.g. crop names) to
        class numbers.
    layer, where: the file's layer and an OGR SQL filter (pyogrio's).
    crs: the geometries' CRS (anything cogfeed.CRS takes); a file's own by
        default.  None for geometries given directly: their coordinates
        are then in each grid's CRS.
    all_touched: also burn every pixel a polygon's outline passes through
        (gdal_rasterize -at).

    Features without a geometry are left out (``skipped`` counts them).
    Class values are integers that fit int32; the mask's dtype is the
    smallest of uint8, uint16, int32 that holds them (``dtype``).
    """

    def __init__(self, source: Union[StrPath, Sequence[Any]],
                 attribute: Optional[str] = None, *,
                 values: Optional[Sequence[float]] = None,
                 classes: Optional[Mapping[Any, int]] = None,
                 value: float = 1, layer: Union[str, int, None] = None,
                 where: Optional[str] = None, crs: Any = None,
                 all_touched: bool = False) -> None:
        self.skipped = 0
        self.all_touched = bool(all_touched)
        if isinstance(source, (str, bytes, os.PathLike)):
            path = source.decode() if isinstance(source, bytes) else os.fspath(source)
            wkb, vals, file_crs = self._read_file(path, attribute, classes, value,
                                                  layer, where)
            if crs is None:
                crs = file_crs
            self.source: str = path
        else:
            geoms = list(source)
            if values is not None:
                vals = _class_values(values, classes, "values", "vector labels")
                if len(vals) != len(geoms):
                    raise ValueError("vector labels: %d geometries but %d "
                                     "values" % (len(geoms), len(vals)))
            elif attribute is not None:
                vals = _class_values(
                    [(g.get("properties") or {}).get(attribute)
                     if isinstance(g, Mapping) else None for g in geoms],
                    classes, attribute, "vector labels")
            else:
                vals = [float(value)] * len(geoms)
            wkb, vals = self._keep(
                [None if isinstance(g, Mapping) and g.get("type") == "Feature" and
                 g.get("geometry") is None else g for g in geoms], vals, _as_wkb)
            self.source = "<geometries>"
        self.crs = (crs if crs is None or isinstance(crs, _cogfeed.CRS)
                    else _cogfeed.CRS(crs))
        self._c = _cogfeed._VLabels(wkb, vals, self.crs, self.all_touched)

    def _read_file(self, path: str, attribute: Optional[str],
                   classes: Optional[Mapping[Any, int]], value: float,
                   layer: Union[str, int, None], where: Optional[str]
                   ) -> Tuple[List[bytes], List[float], Optional[str]]:
        try:
            import pyogrio.raw  # type: ignore[import-untyped, import-not-found, unused-ignore]
        except ImportError:
            raise ImportError("reading vector files needs pyogrio: pip "
                              "install cogfeed[vector]") from None
        try:
            meta, _, geoms, fields = pyogrio.raw.read(
                path, layer=layer, where=where,
                columns=[attribute] if attribute else [])
        except Exception as e:  # pyogrio's errors: name the file
            raise ValueError("vector labels: %s: %s" % (path, e)) from None
        if attribute is not None:
            names = list(meta.get("fields", []))
            if attribute not in names:
                raise ValueError("vector labels: %s has no field %r (it has "
                                 "%s)" % (path, attribute,
                                          ", ".join(map(str, names)) or
                                          "none"))
            raw = list(fields[names.index(attribute)])
            vals = _class_values(raw, classes, attribute, path)
        else:
            vals = [float(value)] * len(geoms)
        wkb, kept = self._keep(list(geoms), vals, bytes)
        return wkb, kept, meta.get("crs")

    def _keep(self, geoms: List[Any], vals: List[float],
              to_wkb: Callable[[Any], bytes]) -> Tuple[List[bytes], List[float]]:
        """The features that have a geometry, as WKB, with their values;
        those without are counted in self.skipped."""
        wkb: List[bytes] = []
        kept: List[float] = []
        for g, v in zip(geoms, vals):
            if g is None:
                self.skipped += 1
                continue
            wkb.append(to_wkb(g))
            kept.append(v)
        return wkb, kept

    def __len__(self) -> int:
        return int(self._c.count())

    @property
    def dtype(self) -> str:
        """The mask's dtype: the smallest of uint8, uint16, int32 holding
        every class value."""
        return str(self._c.dtype())

    @property
    def bounds(self) -> Tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) of all features, in their CRS."""
        return tuple(self._c.bounds())  # type: ignore[return-value]

    def rasterize(self, grid: Union[Grid, StrPath],
                  dtype: Optional[str] = None) -> np.ndarray:
        """The labels burnt onto ``grid`` (a cogfeed.Grid, or a file whose
        grid to take): a (height, width) array, 0 where no feature is."""
        from .grid import Grid
        g = grid if isinstance(grid, Grid) else Grid.like(grid)
        arr, _ = self._c.rasterize(g, dtype)
        return cast("np.ndarray", arr)

    def __repr__(self) -> str:
        return "VectorLabels(%r, %d features%s)" % (
            self.source, len(self), ", all_touched" if self.all_touched
            else "")
