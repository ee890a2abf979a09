"""A region into an array: cogfeed.load (docs/datasets.md, "A region into
an array").

The same planner as the Loader's mosaics reads every scene of a time step
onto the region's grid (each from its own CRS, the first scene with data
giving each pixel), patch by patch in the C readers; this module only
groups the scenes into time steps, runs one Loader per asset (up to 16
steps each, as one series of mosaics: the later scenes of all its steps
go out in the same round trips) over the region's grid patches, and
pastes the patches into the result.  The
arguments follow odc-stac's ``load`` where they can.
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Dict, Hashable, List, Optional, Sequence,
                    Tuple, Union, cast)

import numpy as np

from .grid import Grid
from .loader import GridSpec, IOOptions, Loader, Resampling, StrPath, _io_options, _target

if TYPE_CHECKING:
    import numpy.typing as npt

    from .stac import Item

GroupBy = Union[str, Callable[[Any], Hashable], None]

__all__ = ["load", "Region", "item_steps"]

# Loaders reading at once, and the decoded tiles each keeps for its next
# patches (a region's patch grid meets each tile about once more).
_AT_ONCE = 4
_MAX_SCENES = 1 << 20    # the Loader's time_steps (CF__LD_MAX_SCENES)
_CACHE_BYTES = 128 << 20
_REMOTE = ("http://", "https://", "s3://", "az://", "gs://")


@dataclass
class Region:
    """What cogfeed.load read: ``data`` (T, C, H, W) in the files' dtype,
    ``valid`` (T, H, W) uint8 (1 where a scene of the step had data in
    every asset) when asked, the ``times`` of the steps (the earliest
    ``datetime`` of each step's items; None for plain files), the ``bands``
    (asset names, or band numbers of plain files), the ``grid`` and the
    ``nodata`` of the first file (0 without one).  Where no scene of a
    step has data, ``data`` holds what the step's first scene holds there:
    its nodata outside it, its values under its own clouds or nodata
    bands; ``valid`` (valid=True) tells those pixels apart."""
    data: npt.NDArray[Any]
    valid: Optional[npt.NDArray[np.uint8]]
    times: List[Optional[_dt.datetime]]
    bands: List[str]
    grid: Grid
    nodata: float

    def to_xarray(self) -> Any:
        """An xarray.DataArray (time, band, y, x) with pixel-centre
        coordinates, the CRS as WKT and the transform (rasterio's order,
        as rioxarray keeps it) in attrs (and
        ``valid`` as a (time, y, x) coordinate when read); needs xarray."""
        try:
            import xarray as xr
        except ImportError:
            raise ImportError("Region.to_xarray needs xarray (pip install xarray)") from None
        x0, xres, rx, y0, ry, yres = self.grid.geotransform
        if rx or ry:
            raise ValueError("Region.to_xarray: a rotated grid has no x / y coordinates")
        w, h = self.grid.width, self.grid.height
        xs = x0 + xres * (np.arange(w) + 0.5)
        ys = y0 + yres * (np.arange(h) + 0.5)
        coords: Dict[str, Any] = {"time": [_utc64(t) for t in self.times],
                                  "band": list(self.bands), "y": ys, "x": xs}
        if self.valid is not None:
            coords["valid"] = (("time", "y", "x"), self.valid)
        crs = self.grid.crs
        return xr.DataArray(self.data, dims=("time", "band", "y", "x"), coords=coords,
                            attrs={"crs": crs.to_wkt() if crs is not None else "",
                                   "transform": tuple(self.grid.transform),
                                   "nodata": self.nodata})


def _utc64(t: Optional[_dt.datetime]) -> np.datetime64:
    """t as numpy's datetime64[ns], in UTC (numpy holds no time zones)."""
    if t is None:
        return np.datetime64("NaT", "ns")
    if t.tzinfo is not None:
        t = t.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    return np.datetime64(t, "ns")


@dataclass
class _Scene:
    hrefs: List[str]            # one per asset
    scm: Optional[str]          # its scene mask
    time: Optional[_dt.datetime]
    lon: Optional[float]
    key: Any                    # what groupby was given (an Item, or a path)


def _region_grid(grid: Union[Grid, StrPath, GridSpec]) -> Grid:
    g, crs, _ = _target(grid)
    if g is None:
        raise ValueError("load: grid needs its bounds (a cogfeed.Grid, a file to take "
                         "the grid of, {'like': path}, or {'crs', 'res', 'bounds'})")
    if g.crs is None:
        raise ValueError("load: the grid has no CRS")
    return g


def _scenes(items: Any, bands: Optional[Sequence[str]], scene_masks: Any
            ) -> Tuple[List[_Scene], List[str], bool]:
    """The scenes of items (STAC items, or paths), their band names, and
    whether they carry dates."""
    from .stac import Item, Items
    seq: List[Any] = (list(items) if not isinstance(items, (str, bytes, os.PathLike))
                      else [items])
    if not seq:
        raise ValueError("load: no items")
    if all(isinstance(i, Item) for i in seq):
        if not bands:
            raise ValueError("load: bands= names the assets to read (keys or common names)")
        names = list(bands)
        sel = Items(seq).select(names + ([scene_masks] if scene_masks else []))
        # Plain strings: a region read needs every item's header, so the
        # Loaders open them all at once as they start (one round trip for
        # 128), rather than each sample its own as it first reads a file
        # (stac.Href: the better way to sample a few patches of many).
        per = [[str(h) for h in sel.hrefs(n)] for n in names]
        scm = ([str(h) for h in sel.hrefs(scene_masks)] if scene_masks
               else [None] * len(seq))
        out = [_Scene([p[k] for p in per], scm[k], it.time, _centre_lon(it), it)
               for k, it in enumerate(seq)]
        return out, names, True
    if any(isinstance(i, Item) for i in seq):
        raise ValueError("load: a mix of STAC items and paths")
    if bands is not None:
        raise ValueError("load: bands= picks STAC assets; plain files give all their bands")
    masks = [None] * len(seq) if scene_masks is None else list(scene_masks)
    if len(masks) != len(seq):
        raise ValueError("load: scene_masks: one per file (%d for %d files)"
                         % (len(masks), len(seq)))
    return ([_Scene([os.fspath(p)], None if m is None else os.fspath(m), None, None, p)
             for p, m in zip(seq, masks)], [], False)


def _centre_lon(it: "Item") -> Optional[float]:
    """The longitude of the middle of an item's bbox (the short way across
    the antimeridian), or None without a bbox."""
    if it.bbox is None or len(it.bbox) not in (4, 6):
        return None
    w, e = float(it.bbox[0]), float(it.bbox[len(it.bbox) // 2])
    if w > e:
        e += 360.0
    return ((w + e) / 2 + 180.0) % 360.0 - 180.0


def item_steps(items: Sequence["Item"], groupby: GroupBy) -> List[List[int]]:
    """Items (indices) grouped into time steps as load() groups them
    ("solar_day", "time", "all", None or a function of the item), steps in
    time order, each step's items in the given order."""
    scenes = [_Scene([], None, it.time, _centre_lon(it), k) for k, it in enumerate(items)]
    if groupby is not None and callable(groupby):
        user = groupby
        groupby = lambda k: user(items[k])  # noqa: E731
    if groupby in ("solar_day", "time") and any(s.time is None for s in scenes):
        k = next(i for i, s in enumerate(scenes) if s.time is None)
        raise ValueError("item %r has no datetime (nor start_datetime) to group by"
                         % items[k].id)
    return [[s.key for s in g] for g in _groups(scenes, groupby, True)]


#: time steps of one asset read by one Loader (a series of mosaics): a
#: sample holds them all (16 x C x 256 x 256 values)
_STEPS_AT_ONCE = 16


def _groups_of_reads(sizes: Sequence[int], nassets: int, masked: Sequence[bool]
                     ) -> List[List[Tuple[int, int]]]:
    """The (step, asset) reads of load(), grouped for one Loader each: the
    steps of one asset (one layout), up to _STEPS_AT_ONCE, all with scene
    masks or all without, and within the Loader's scenes (each step padded
    to the group's largest: sizes[t] scenes in step t)."""
    out: List[List[Tuple[int, int]]] = []
    for a in range(nassets):
        cur: List[Tuple[int, int]] = []
        most = 0
        for t, n in enumerate(sizes):
            if cur and (len(cur) == _STEPS_AT_ONCE or masked[cur[0][0]] != masked[t] or
                        (len(cur) + 1) * max(most, n) > _MAX_SCENES):
                out.append(cur)
                cur, most = [], 0
            cur.append((t, a))
            most = max(most, n)
        if cur:
            out.append(cur)
    return out


def _asset_name(names: List[str], a: int) -> str:
    return names[a] if names else "the files"


def _solar_day(s: _Scene) -> Any:
    """The date where the scene's centre has its local solar time (odc-stac's
    solar_day): UTC shifted by longitude / 15 hours."""
    assert s.time is not None
    t = s.time
    if t.tzinfo is not None:
        t = t.astimezone(_dt.timezone.utc)
    if s.lon is not None:
        t = t + _dt.timedelta(hours=s.lon / 15.0)
    return t.date()


def _groups(scenes: List[_Scene], groupby: GroupBy, dated: bool) -> List[List[_Scene]]:
    """Scenes into time steps, in order of time (or of first appearance
    for undated files); each step's scenes in the order given."""
    if groupby is None:
        keyf: Callable[[_Scene], Any] = lambda s: id(s)  # noqa: E731
    elif callable(groupby):
        user = groupby
        keyf = lambda s: user(s.key)  # noqa: E731
    elif groupby == "all" or (not dated and groupby in ("solar_day", "time")):
        # Plain files have no dates: one mosaic of all of them.
        keyf = lambda s: 0  # noqa: E731
    elif groupby == "solar_day":
        keyf = _solar_day
    elif groupby == "time":
        keyf = lambda s: s.time  # noqa: E731
    else:
        raise ValueError("groupby is 'solar_day', 'time', 'all', None or a function, "
                         "not %r" % (groupby,))
    steps: Dict[Any, List[_Scene]] = {}
    for s in scenes:
        steps.setdefault(keyf(s), []).append(s)
    out = list(steps.values())
    if dated:
        out.sort(key=lambda g: min(_utc64(s.time) for s in g))
    return out


def load(items: Union[Sequence[Any], StrPath, "Item"], bands: Optional[Sequence[str]] = None,
         *, grid: Union[Grid, StrPath, GridSpec], groupby: GroupBy = "solar_day",
         resampling: Resampling = "nearest", valid: bool = False,
         scene_masks: Optional[Union[str, Sequence[Optional[StrPath]]]] = None,
         invalid_classes: Optional[Sequence[float]] = None, patch_size: int = 256,
         io_options: Optional[IOOptions] = None, error_threshold: float = 0.125,
         output: str = "numpy", sign: Any = None) -> Any:
    """Read a region of many scenes onto one grid: (time, band, y, x).

    Args:
        items: STAC items (cogfeed.stac.Items, or a list of stac.Item), or
            paths / URLs of COGs.
        bands: the STAC assets to read, by key or common name (each asset
            file's bands become channels, in order); None for plain files
            (all their bands).
        grid: the region's grid: a cogfeed.Grid, a file to take the grid of,
            ``{"like": path}``, or ``{"crs", "res", "bounds"}``.
        groupby: how scenes make time steps: "solar_day" (items of one
            local solar day, odc-stac's default for Sentinel-2), "time"
            (the same datetime), "all" (one mosaic), None (a step per
            scene), or a function of the item (or path) giving a key.  The
            scenes of a step make one mosaic, the first in ``items``'
            order with data giving each pixel (sort the items first:
            ``items.sorted("clear")``).  Plain files have no dates: they
            make one mosaic unless groupby is None or a function.
        resampling: kernel of the reads onto the grid (gdalwarp's).
        valid: also return where a scene had data (Region.valid).
        scene_masks, invalid_classes: clouds out of the mosaic: the asset
            name of each item's classification raster (e.g. "scl"), or one
            path per plain file; and its classes that are not data.
        patch_size: side of the patches read at once (memory: the
            readers' patches, not the region); 256 was the fastest of 128
            to 1495 on a 1495 x 1639 region of 512 px tiles (bench/
            region_bench.py).
        io_options: cogfeed.IO options of the reads (remote credentials,
            retries, header cache).
        error_threshold: reprojection error bound, source pixels.
        output: "numpy" (a Region) or "xarray" (Region.to_xarray()).
        sign: signs the hrefs that need it (odc-stac's ``patch_url``):
            a function href -> signed href, or a cogfeed.stac.Signer;
            each file is signed when it is opened and again before its
            signature expires (Loader's ``sign``).

    Returns:
        a cogfeed.Region, or an xarray.DataArray with output="xarray".
    """
    if output not in ("numpy", "xarray"):
        raise ValueError("load: output is 'numpy' or 'xarray', not %r" % (output,))
    if invalid_classes is not None and scene_masks is None:
        raise ValueError("load: invalid_classes without scene_masks")
    g = _region_grid(grid)
    io_options = cast(Optional[IOOptions], _io_options(io_options, sign))
    scenes, names, dated = _scenes(items, bands, scene_masks)
    steps = _groups(scenes, groupby, dated)
    W, H = g.width, g.height
    P = int(patch_size)
    if P < 1:
        raise ValueError("load: patch_size must be >= 1")
    for step in steps:
        if len(step) > _MAX_SCENES:
            raise ValueError("load: a time step of %d scenes (a mosaic takes at most %d): "
                             "group them into smaller steps (groupby=...)"
                             % (len(step), _MAX_SCENES))
    nassets = len(scenes[0].hrefs)
    # The output (T, bands, H, W) is made once the first file of every
    # asset has been opened (its bands and type, what a raw Loader gives),
    # while the first Loaders open theirs; each asset's reads go straight
    # into its bands (no join of per-asset arrays at the end: a copy of
    # the whole region, 14% of a local load).
    out: Dict[str, Any] = {}
    vmask = np.ones((len(steps), H, W), np.uint8) if valid else None
    # Each step's scene masks (none, or one per scene).
    scms = [[s.scm for s in step if s.scm is not None] for step in steps]
    if any(m and len(m) != len(step) for m, step in zip(scms, steps)):
        raise ValueError("load: scene_masks: every file needs one, or none does")
    lock = threading.Lock()
    # Remote: every patch of the region in flight at once (each waits on
    # round trips, and a mosaic's later scenes add one each), rather than
    # the adaptive ramp a training run needs; local: adaptive.
    remote = any(h.startswith(_REMOTE) for s in scenes for h in s.hrefs)
    at_once = min(-(-W // P) * -(-H // P), 128) if remote else None

    def read(group: Sequence[Tuple[int, int]]) -> None:
        """Time steps t of assets a, (t, a) in group: one Loader's epoch
        over the region, each (t, a) a date of one series of mosaics, so
        that the later scenes of all of them go out in the same round
        trips (docs/loader.md, "Mosaics")."""
        series = [[[s.hrefs[a] for s in steps[t]] for t, a in group]]
        masks = [[scms[t] for t, _ in group]] if scms[group[0][0]] else None
        with Loader(series, grid=g, sampler="grid", patch_size=P, batch_size=16,
                    resampling=resampling, valid_mask=valid, io_options=io_options,
                    error_threshold=error_threshold, concurrency=at_once,
                    cache_bytes=_CACHE_BYTES, scene_masks=masks,
                    invalid_classes=invalid_classes if masks else None) as ld:
            lay = ld.layout
            nc, dt = int(lay["channels"]), np.dtype(lay["dtype"])
            data, first, types = out_array()
            a = group[0][1]
            if nc != first[a + 1] - first[a] or dt != types[a]:
                raise ValueError("load: %s: its files differ in bands or type from one "
                                 "time step to another (%d bands of %s, the first file %d "
                                 "of %s)" % (_asset_name(names, a), nc, dt,
                                             first[a + 1] - first[a], types[a]))
            dst = data[:, first[a]:first[a + 1]]   # the asset's bands
            it = iter(ld)
            # Exactly one epoch (past it the readers would start the next).
            for _ in range(len(ld)):
                b = next(it)
                for i, (_, x, y, w, h) in enumerate(b["windows"]):
                    # A patch larger than the region (a narrow one) reaches
                    # past it: only its part inside is kept.
                    w, h = min(w, W - x), min(h, H - y)
                    for j, (t, _) in enumerate(group):
                        dst[t, :, y:y + h, x:x + w] = b["image"][i, j][:, :h, :w]
                    if vmask is not None:
                        with lock:  # the assets of a step share its plane
                            for j, (t, _) in enumerate(group):
                                vmask[t, y:y + h, x:x + w] &= b["valid"][i, j][:h, :w]

    # Steps and assets read at once (each Loader waits on its own round
    # trips), a few at a time: each has its readers, io loops and cache.
    def first_files() -> Tuple[float, List[int], List[Any]]:
        """The first file of each asset, opened through the reads' I/O
        options (credentials, CA, signing) while the first steps are read:
        the first's nodata (0 without one), and the band offsets and type
        of the output."""
        from ._cogfeed import IO, open_many
        io = IO(**io_options) if io_options else None
        cogs = open_many([scenes[0].hrefs[a] for a in range(nassets)], io=io)
        try:
            nd = cogs[0].nodata
            first = [0]
            for c in cogs:
                first.append(first[-1] + c.count)
            types = [np.dtype(c.dtype) for c in cogs]
            return (float(nd) if nd is not None else 0.0), first, types
        finally:
            for c in cogs:
                c.close()

    def out_array() -> Tuple[Any, List[int], List[Any]]:
        """The output array (of the assets' types promoted, as a join
        of them would be), each asset's first band in it, and their
        types."""
        with lock:
            if "data" not in out:
                _, first, types = files_fut.result()
                out["data"] = np.empty((len(steps), first[-1], H, W), np.result_type(*types))
                out["first"], out["types"] = first, types
            return out["data"], out["first"], out["types"]

    groups = _groups_of_reads([len(s) for s in steps], nassets, [bool(m) for m in scms])
    pool = ThreadPoolExecutor(max_workers=min(len(groups), _AT_ONCE))
    side = ThreadPoolExecutor(max_workers=1)
    try:
        files_fut = side.submit(first_files)
        for fut in [pool.submit(read, grp) for grp in groups]:
            fut.result()
        nodata = files_fut.result()[0]
    finally:
        # On a failure (or Ctrl-C) the steps not started are not read.
        pool.shutdown(wait=True, cancel_futures=True)
        side.shutdown(wait=True)
    data, first, _ = out_array()
    if names:
        band_names = [n if first[a + 1] - first[a] == 1 else "%s_%d" % (n, j + 1)
                      for a, n in enumerate(names) for j in range(first[a + 1] - first[a])]
    else:
        band_names = [str(k + 1) for k in range(data.shape[1])]
    region = Region(data, vmask, [min((s.time for s in st if s.time is not None),
                                      default=None) for st in steps],
                    band_names, g, nodata)
    return region.to_xarray() if output == "xarray" else region
