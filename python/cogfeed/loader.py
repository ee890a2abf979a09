"""cogfeed.Loader: batches of training patches out of COGs.

The work (sampling, reading, decoding, conversion, augmentation, batching)
is done in C by reader threads that fill a fixed ring of batch slots; this
module normalises arguments and turns ring slots into numpy arrays without
copying.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import (TYPE_CHECKING, Any, Dict, List, Literal, Mapping,
                    Optional, Protocol, Sequence, Tuple, Type, TypedDict,
                    Union, cast)

from . import _cogfeed

if sys.version_info >= (3, 11):
    from typing import NotRequired, Unpack
elif TYPE_CHECKING:  # type checkers bundle typing_extensions' stubs
    from typing_extensions import NotRequired, Unpack

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._cogfeed import CRS
    from .grid import Grid
    from .stac import Selection
    from .vector import VectorLabels

__all__ = ["Loader", "Batch", "LoaderState", "LoaderOptions", "LoaderLayout",
           "LoaderStats", "IOOptions", "GridSpec", "ResamplingSpec", "Sampler",
           "Resampling", "DType", "Window", "StrPath"]

_MiB = 1 << 20

# -- the types of the public API (checked by tests/python/test_typing.py
#    with mypy --strict and pyright on a user's script) -------------------

#: A local path or a URL (file://, http(s)://, s3://, az://, gs://).
StrPath = Union[str, "os.PathLike[str]"]

#: The samplers (python/_loader.c's sampler names; "tile_shuffle" is
#: accepted too).
Sampler = Literal["random", "blocked", "tile-shuffle", "tile_shuffle", "grid"]

#: The resampling kernels (the choices of the C table's "resampling":
#: _OPTIONS below; "near" is GDAL's spelling of "nearest").  Type checkers
#: need the names in the source: tests/python/test_options.py checks them
#: against the C table.
Resampling = Literal["nearest", "near", "bilinear", "cubic", "average", "mode"]

#: A window of a batch: (file index, x, y, width, height) in pixels.
Window = Tuple[int, int, int, int, int]


class _TorchDType(Protocol):
    """torch.float32 (a torch.dtype) without importing torch: the loader
    takes it, and the check stays exact where torch is not installed."""
    @property
    def is_floating_point(self) -> bool: ...
    @property
    def is_complex(self) -> bool: ...


#: The output dtype: "raw" (the files' own, None too) or float32 as a
#: string, numpy or torch dtype.
DType = Union[Literal["raw", "float32", "f4"], "np.dtype[np.float32]",
              Type["np.float32"], _TorchDType, None]


class ResamplingSpec(TypedDict, total=False):
    """resampling= as a dict: the kernel of the images, of the mask and
    of the layers (one name, or one per layer)."""
    image: Resampling
    mask: Resampling
    layers: Union[Resampling, Sequence[Resampling]]


class GridSpec(TypedDict, total=False):
    """grid= as a dict: {"crs", "res"[, "bounds"]} or {"like": file}."""
    crs: Union[CRS, int, str]
    res: Union[float, Tuple[float, float]]
    bounds: Tuple[float, float, float, float]
    like: Union[StrPath, Grid]


def _io_options(io_options: Optional[IOOptions], sign: Any) -> Optional[Dict[str, Any]]:
    """io_options with sign= (a function, or a cogfeed.stac.Signer that
    keeps each signature until it is due) for the loader's io."""
    if sign is None:
        return None if io_options is None else dict(io_options)
    from .stac import Signer
    out: Dict[str, Any] = dict(io_options or {})
    out["sign"] = sign if isinstance(sign, Signer) else Signer(sign)
    return out


class IOOptions(TypedDict, total=False):
    """io_options=: cogfeed.IO's keyword arguments."""
    max_inflight: int
    header_bytes: int
    merge_gap: int
    request_timeout_s: float
    connect_timeout_s: float
    low_speed_time_s: float
    low_speed_bytes: int
    max_retries: int
    retry_budget: int
    retry_base_ms: float
    retry_max_ms: float
    verify_tls: bool
    header_cache_dir: Optional[str]
    ca_file: Optional[str]
    max_open_files: int
    hedge_after_ms: float
    header_cache_max_bytes: int
    header_memory_max: int
    cache_bytes: int
    sign_margin_s: float
    sign: Any


class LoaderOptions(TypedDict, total=False):
    """The keyword arguments of cogfeed.Loader after images and masks
    (cogfeed.torch.CogDataset takes them as **loader_kwargs; it sets rank
    and world_size itself).  See Loader for what each means."""
    patch_size: float
    batch_size: int
    sampler: Sampler
    seed: int
    layers: Optional[Sequence[Union[StrPath, Sequence[StrPath]]]]
    weights: Optional[Sequence[float]]
    bands: Optional[Sequence[int]]
    level: int
    stride: Optional[float]
    epoch_length: Optional[int]
    drop_last: bool
    flip: bool
    rot90: bool
    dtype: DType
    scale_offset: bool
    mean: Optional[Sequence[float]]
    std: Optional[Sequence[float]]
    skip_errors: bool
    skip_limit: float
    prefetch: Optional[int]
    decode_threads: Optional[int]
    concurrency: Union[int, Literal["auto", "adaptive"], None]
    max_inflight: Optional[int]
    inflight_bytes: Optional[int]
    cache_bytes: Optional[int]
    io_options: Optional[IOOptions]
    grid: Union[Grid, StrPath, GridSpec, None]
    resampling: Union[Resampling, ResamplingSpec, None]
    reproject: bool
    ungeoreferenced: bool
    error_threshold: float
    valid_mask: bool
    mosaic: bool
    skip_empty: bool
    roi: Any
    roi_crs: Any
    toi: Any
    units: str
    scene_masks: Union[StrPath, Sequence[StrPath], Sequence[Sequence[StrPath]],
                       Sequence[Sequence[Sequence[StrPath]]], None]
    invalid_classes: Optional[Sequence[float]]
    labels: Any
    sign: Any
    time_steps: Optional[int]
    dates: Any
    date_pattern: Optional[str]
    date_format: Optional[str]
    date_layers: Optional[Sequence[Sequence[Any]]]


class Batch(TypedDict):
    """A batch of cogfeed.Loader (see Loader); the arrays' dtype is the
    files' (dtype="raw") or float32."""
    image: npt.NDArray[Any]
    mask: NotRequired[npt.NDArray[Any]]
    valid: NotRequired[npt.NDArray[np.uint8]]
    dates: NotRequired[npt.NDArray[np.datetime64]]
    date_valid: NotRequired[npt.NDArray[np.bool_]]
    series: NotRequired[List[int]]
    windows: List[Window]
    augment: List[int]
    grid: List[Optional[Grid]]
    index: int
    epoch: int


class LoaderState(TypedDict):
    """Loader.state_dict(): where the iteration is (epoch, next batch)
    and what the stream depends on.  A CogDataset's state before its
    first iteration holds only epoch and batch."""
    epoch: int
    batch: int
    seed: NotRequired[int]
    sampler: NotRequired[str]
    rank: NotRequired[int]
    world_size: NotRequired[int]
    batch_size: NotRequired[int]
    patch_size: NotRequired[int]
    stride: NotRequired[int]
    epoch_length: NotRequired[int]
    drop_last: NotRequired[bool]
    flip: NotRequired[bool]
    rot90: NotRequired[bool]
    level: NotRequired[int]
    files: NotRequired[str]


class LoaderLayout(TypedDict):
    """Loader.layout: shapes and sizes."""
    batch_size: int
    patch_size: int
    time_steps: int
    channels: int
    dtype: str
    has_mask: bool
    mask_dtype: str
    image_bytes: int
    mask_bytes: int
    prefetch: int
    samples: int
    batches: int
    has_valid: bool
    valid_bytes: int


class LoaderStats(TypedDict):
    """Loader.stats(): counters (see Loader.stats)."""
    samples: int
    batches: int
    skipped: int
    bytes_fetched: int
    bytes_decoded: int
    bytes_delivered: int
    requests: int
    retries: int
    io_inflight: int
    concurrency: int
    reading: int
    cache_hits: int
    cache_misses: int
    cache_hit_rate: float
    wait_s: float
    read_busy_s: float
    convert_busy_s: float
    elapsed_s: float
    hedges: int
    hedge_wins: int
    memory_budget: int
    memory_used: int
    memory_peak: int
    chunk_bytes_decoded: int
    decoded_per_read: float
    empty_left_out: int
    empty_redrawn: int
    read_rounds: int
    samples_read: int

#: The C option tables (include/cogfeed.h, cf_option_info): the Loader's
#: scalars and kernels, and cogfeed.IO's, by name: type, default, min,
#: max, hint, choices.  Loader's defaults, kernel names and the defaults
#: and ranges in help(Loader) come from here, not from this file.
_OPTIONS: Dict[str, Dict[str, Any]] = {
    o["name"]: o for o in _cogfeed.loader_options()}
_IO_OPTIONS: Dict[str, Dict[str, Any]] = {
    o["name"]: o for o in _cogfeed.io_options()}

#: Loader keywords named otherwise in the C table.
_C_NAMES = {"scale_offset": "apply_scale_offset", "decode_threads": "threads"}


def _default(name: str) -> Any:
    """The C table's default of option `name` (its C name)."""
    return _OPTIONS[name]["default"]


#: Config keys that describe where a config came from, not how to load.
_META_KEYS = ("variant",)


def _is_float32(dtype: object) -> bool:
    """False for dtype "raw" (or None), True for anything numpy reads as
    float32 ("float32", "f4", numpy.float32, numpy.dtype("float32"),
    torch.float32); ValueError otherwise."""
    if dtype is None or (isinstance(dtype, str) and dtype == "raw"):
        return False
    name = str(dtype)
    if name == "torch.float32":
        return True
    try:
        import numpy as np
        if np.dtype(cast(Any, dtype)) == np.float32:
            return True
    except TypeError:
        pass
    raise ValueError("dtype must be 'raw' or float32 (a string, numpy or "
                     "torch dtype), not %r" % (dtype,))


def _paths(x: object, what: str) -> List[str]:
    if isinstance(x, str):
        return [x]   # as it is: a stac.Href keeps its description
    if isinstance(x, os.PathLike):
        return [str(os.fspath(x))]
    if isinstance(x, bytes):
        return [os.fsdecode(x)]
    try:
        return [os.fsdecode(os.fspath(p)) for p in cast(Sequence[Any], x)]
    except TypeError:
        raise TypeError("%s: expected a path or a sequence of paths" % what)


def _described(groups: Sequence[Optional[Sequence[str]]]) -> Optional[List[Any]]:
    """Each path's description, aligned with the C loader's paths (images,
    masks, layers, scene masks): a stac.Href's (grid, dtype, bands) from
    its asset's STAC fields, else None (its header is read when the
    Loader starts); None when no path has one."""
    from .stac import Href
    out = [p.description() if isinstance(p, Href) else None
           for g in groups for p in (g or ())]
    return out if any(d is not None for d in out) else None


def _int0(v: Optional[int]) -> int:
    """None as 0 (the C side's "default"); anything else as an int, checked
    by the C side."""
    return 0 if v is None else int(v)


_RESAMPLING: Tuple[str, ...] = tuple(_OPTIONS["resampling"]["choices"])


def _kernel(name: object, what: str) -> str:
    n = "nearest" if name == "near" else str(name)
    if n not in _RESAMPLING:
        raise ValueError("%s: resampling %r is not one of %s" % (
            what, name, ", ".join(_RESAMPLING)))
    return n


def _mosaicked_layers(layers: Any) -> bool:
    """Whether mosaic=True's layers are given as lists of scenes (each
    mosaicked), rather than one file per mosaic (read as it lies)."""
    kinds = set()
    for per in layers:
        if isinstance(per, (str, bytes, os.PathLike)):
            kinds.add(False)
            continue
        kinds.update(isinstance(x, (list, tuple)) for x in per)
    if len(kinds) > 1:
        raise ValueError("layers with mosaic=True: give every layer as a file (read as "
                         "it lies) or every one as a list of scenes (mosaicked), not both")
    return kinds == {True}


def _mosaic_layers(items: List[Any], layers: List[Any], scene_masks: Any,
                   time_steps: Optional[int], dates: Any, date_pattern: Optional[str],
                   date_layers: Any) -> Tuple[List[Any], Any]:
    """Loader(mosaic=True, layers=...): each source (a list of scenes) and
    its layers (per source, a list of layers, each a list of scenes
    parallel to the image's) as a series of mosaics, one date for the
    image and one per layer; scene masks repeated for each."""
    if time_steps is not None or dates is not None or date_pattern is not None \
            or date_layers is not None:
        raise ValueError("layers with mosaic=True: not with time_steps, dates or "
                         "date_layers")
    if len(layers) != len(items):
        raise ValueError("layers: with mosaic=True, one list of layers per mosaic "
                         "(%d for %d mosaics)" % (len(layers), len(items)))
    out: List[List[List[str]]] = []
    for f, (scenes, lay) in enumerate(zip(items, layers)):
        if isinstance(scenes, (str, bytes, os.PathLike)):
            scenes = [scenes]
        scenes = [os.fspath(p) for p in scenes]
        if isinstance(lay, (str, bytes, os.PathLike)) or not lay:
            raise ValueError("layers[%d]: with mosaic=True, a list of layers, each the "
                             "list of its scenes (parallel to the image's)" % f)
        steps = [scenes]
        for k, one in enumerate(lay):
            one = [one] if isinstance(one, (str, bytes, os.PathLike)) else list(one)
            if len(one) != len(scenes):
                raise ValueError("layers[%d][%d]: %d scenes, the mosaic has %d (a layer "
                                 "gives each scene's file)" % (f, k, len(one), len(scenes)))
            steps.append([os.fspath(p) for p in one])
        if out and len(steps) != len(out[0]):
            raise ValueError("layers: every mosaic needs the same number of layers")
        out.append(steps)
    scm = None
    if scene_masks is not None:
        if isinstance(scene_masks, (str, bytes, os.PathLike)):
            raise ValueError("scene_masks: shape them as the images")
        scm_l: List[Any] = list(scene_masks)
        if len(scm_l) != len(out):
            raise ValueError("scene_masks: one list per mosaic")
        scm = [[list(m)] * len(st) for m, st in zip(scm_l, out)]
    return out, scm


def _resampling(rs: object, nlayers: int
                ) -> Tuple[str, str, Optional[List[str]]]:
    """(image, mask, [layer, ...]) kernels from resampling= (a name for
    the images and layers, or a dict with "image", "mask", "layers")."""
    image, mask = _default("resampling"), _default("mask_resampling")
    layers: Optional[List[str]] = None
    if isinstance(rs, dict):
        unknown = set(rs) - {"image", "mask", "layers"}
        if unknown:
            raise ValueError("resampling: unknown keys %s (use image, mask, "
                             "layers)" % ", ".join(sorted(unknown)))
        image = _kernel(rs.get("image", image), "resampling['image']")
        mask = _kernel(rs.get("mask", mask), "resampling['mask']")
        ly = rs.get("layers", image)
        if isinstance(ly, str):
            layers = [_kernel(ly, "resampling['layers']")] * nlayers
        else:
            layers = [_kernel(x, "resampling['layers']") for x in ly]
            if len(layers) != nlayers:
                raise ValueError("resampling['layers']: %d kernels for %d "
                                 "layers" % (len(layers), nlayers))
    elif rs is not None:
        image = _kernel(rs, "resampling")
    return image, mask, layers


def _in_pixels(units: str, patch_size: float, stride: Optional[float],
               res: Tuple[float, float]) -> Tuple[int, Optional[int]]:
    """patch_size and stride in pixels of the target grid: as given
    (units "pixels"), or converted from its CRS units (rounded)."""
    if units == "pixels":
        if patch_size != int(patch_size) or (stride is not None and stride != int(stride)):
            raise ValueError("patch_size / stride: whole pixels (or units='crs')")
        return int(patch_size), None if stride is None else int(stride)
    if units != "crs":
        raise ValueError("units: 'pixels' or 'crs', not %r" % (units,))
    xr, yr = abs(float(res[0])), abs(float(res[1]))
    if xr == 0.0:
        raise ValueError("units='crs': give grid= (a cogfeed.Grid, a file, or crs and "
                         "res): its resolution makes CRS units pixels")
    if abs(xr - yr) > 1e-9 * xr:
        raise ValueError("units='crs': the grid's pixels are %g x %g, not square"
                         % (xr, yr))

    def px(v: float, what: str) -> int:
        n = int(round(float(v) / xr))
        if n < 1:
            raise ValueError("%s %g in CRS units is less than a pixel of %g" % (what, v, xr))
        return n
    return px(patch_size, "patch_size"), None if not stride else px(stride, "stride")


def _target(grid: object
            ) -> Tuple[Optional[Grid], Optional[CRS], Tuple[float, float]]:
    """grid= as (Grid or None, grid_crs or None, (xres, yres))."""
    from .grid import Grid
    if grid is None:
        return None, None, (0.0, 0.0)
    if isinstance(grid, Grid):
        return grid, None, (0.0, 0.0)
    if isinstance(grid, (str, bytes, os.PathLike)):
        return Grid.like(os.fspath(grid)), None, (0.0, 0.0)
    if not isinstance(grid, dict):
        raise TypeError("grid: a cogfeed.Grid, a file to take the grid of, "
                        "or a dict (crs, res, optional bounds; or like)")
    unknown = set(grid) - {"crs", "res", "bounds", "like"}
    if unknown:
        raise ValueError("grid: unknown keys %s (use crs, res, bounds, like)"
                         % ", ".join(sorted(unknown)))
    if "like" in grid:
        if set(grid) != {"like"}:
            raise ValueError("grid: 'like' takes no other keys")
        return Grid.like(grid["like"]), None, (0.0, 0.0)
    if "crs" not in grid or "res" not in grid:
        raise ValueError("grid: a dict needs crs and res (and optionally "
                         "bounds), or like")
    res = grid["res"]
    xres, yres = (res, res) if not hasattr(res, "__len__") else res
    if grid.get("bounds") is not None:
        return Grid.from_bounds(grid["crs"], grid["bounds"], (xres, yres)), \
            None, (0.0, 0.0)
    from ._cogfeed import CRS
    crs = grid["crs"] if isinstance(grid["crs"], CRS) else CRS(grid["crs"])
    return None, crs, (float(xres), float(yres))


def _rings(geom: Mapping[str, Any]) -> List[List[List[Tuple[float, float]]]]:
    """The polygons (each its rings) of a GeoJSON Polygon / MultiPolygon
    (a Feature's)."""
    t = geom.get("type")
    if t == "Feature":
        return _rings(geom.get("geometry") or {})
    coords = geom.get("coordinates")
    if t == "Polygon":
        polys = [coords]
    elif t == "MultiPolygon":
        polys = list(coords or [])
    else:
        raise ValueError("roi: a Polygon or MultiPolygon (or a Feature of one), not %r" % (t,))
    out = []
    for poly in polys:
        rings = []
        for ring in poly or []:
            pts = [(float(p[0]), float(p[1])) for p in ring]
            if len(pts) > 1 and pts[0] == pts[-1]:
                pts = pts[:-1]  # GeoJSON closes its rings
            rings.append(pts)
        if rings:
            out.append(rings)
    if not out:
        raise ValueError("roi: the geometry has no rings")
    return out


def _roi(roi: Any, crs: Any) -> Dict[str, Any]:
    """roi= and roi_crs= as the extension's roi_xy, roi_rings, roi_crs."""
    if roi is None:
        if crs is not None:
            raise ValueError("roi_crs without roi")
        return {}
    geo = getattr(roi, "__geo_interface__", None)
    if isinstance(roi, dict):
        rings = _rings(roi)
        if crs is None:
            crs = 4326  # RFC 7946: GeoJSON is longitude / latitude
    elif geo is not None:
        rings = _rings(geo)
    else:
        b = [float(v) for v in roi]
        if len(b) != 4 or not (b[0] < b[2] and b[1] < b[3]):
            raise ValueError("roi: a bbox is (xmin, ymin, xmax, ymax) with min < max")
        rings = [[[(b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])]]]
    if crs is not None:
        from ._cogfeed import CRS
        crs = crs if isinstance(crs, CRS) else CRS(crs)
    return {"roi_xy": [v for poly in rings for r in poly for p in r for v in p],
            "roi_rings": [len(r) for poly in rings for r in poly],
            "roi_polys": [len(poly) for poly in rings], "roi_crs": crs}


def _vlabels_of(labels: Any) -> Any:
    from .vector import VectorLabels
    if not isinstance(labels, VectorLabels):
        raise TypeError("labels must be a cogfeed.VectorLabels, not %s"
                        % type(labels).__name__)
    return labels._c


def _scene_masks(masks: Any, images: List[Any], series: List[bool]) -> Optional[List[Any]]:
    """scene_masks= flattened as the images are: one path per image."""
    if masks is None:
        return None
    ms = [masks] if isinstance(masks, (str, bytes, os.PathLike)) else list(masks)
    if len(ms) != len(images):
        raise ValueError("scene_masks: %d entries for %d images (shape them as images)"
                         % (len(ms), len(images)))
    out: List[Any] = []  # str or bytes paths, as the images'
    for m, img, s in zip(ms, images, series):
        if s:
            if not isinstance(m, (list, tuple)) or len(m) != len(img):
                raise ValueError("scene_masks: one list per time series, as long as it")
            out += [os.fspath(p) for p in m]
        else:
            if isinstance(m, (list, tuple)):
                raise ValueError("scene_masks: one path per image")
            out.append(os.fspath(m))
    return out


class Loader:
    """Iterate over batches of patches read from Cloud-Optimized GeoTIFFs.

    Each batch is a dict: ``"image"`` of shape (B, C, H, W) (or
    (B, T, C, H, W) with time series), ``"mask"`` of shape (B, 1, H, W) when
    masks are given, ``"valid"`` (B, 1, H, W) uint8 with ``valid_mask``
    (1 where every scene and layer has data; (B, T, H, W) with time series,
    each date's own), ``"windows"`` a list of (file_index, x, y, w, h) in
    pixels of the chosen level (of the target grid when ``grid`` is set),
    ``"grid"`` the cogfeed.Grid of each sample's patch (where it lies, before
    augmentation, so that predictions can be written back; None for an
    image without georeferencing), ``"augment"`` the flip/rotation code of
    each sample (see below), ``"index"`` the batch number and ``"epoch"``.

    Every input of a sample (each time step, each layer, the mask) is read
    onto the sample's target grid: by default the image's own grid; see
    ``grid``.  An input on that grid up to a whole-pixel shift is read as
    it is; one at another resolution or origin is resampled (the overview
    GDAL would pick when coarser); one in another CRS is reprojected
    (``reproject``).  docs/loader.md, "Grids".

    The arrays VIEW the loader's ring memory without copying: they are valid
    until the next batch is taken (or ``copy=True``).  Iterating runs to the
    end of the current epoch and then moves to the next epoch (a ``for``
    loop per epoch gives new samples each time); breaking out and iterating
    again continues where it stopped.

    Arguments:
        images: a path/URL or a list of them (local, file://, http(s)://,
            s3://, az://, gs://); for time series, a list per location of
            its dates, each date a scene or a list of scenes (the tiles of
            one day, made one mosaic as ``mosaic`` says: the first with
            data gives each pixel; ``Selection.series(groupby=
            "solar_day")`` builds them); or a cogfeed.stac.Selection (STAC items'
            chosen assets: one sample source per item, the first asset as
            the image and one layer per other asset; docs/datasets.md).
            The hrefs a selection gives (stac.Href) carry the STAC grid,
            dtype and bands: with a target grid (``grid=``), level 0 and
            the random or grid sampler, such a file's header is read when
            a sample first reads it, not when the Loader starts.
        masks: one mask per image file (read onto the sample's grid like
            every input), or None.
        patch_size: side of the square patches in pixels (``units="crs"``:
            in the target grid's CRS units, e.g. metres).
        batch_size: patches per batch.
        sampler: "random" (uniform windows anywhere), "blocked" (each patch
            inside one tile: one tile read per patch), "tile-shuffle" (whole
            tiles decoded once into a shuffle buffer, random crops from many
            tiles per batch), or "grid" (every patch in order, for
            validation/inference).
        seed: seed of the sampler and augmentation.
        layers: extra aligned layers stacked as channels after the image
            bands: one list of paths per image file (e.g. [dem, landcover]).
            With ``mosaic=True``: a layer given as a file is read as it
            lies, once per sample (a DEM over the region); a layer given as
            a list of files, one per scene of the mosaic in its order
            (per-band COGs: ``[[[nir_a, nir_b]]]``), is mosaicked on its
            own as the image is (the first scene with data gives each
            pixel), takes the image's resampling, and needs its data type
            and band count.  All layers of a mosaic are of one kind.  A STAC selection with
            ``mosaic=True`` is one mosaic of all its items, each selected
            asset after the first a layer.
        weights: sampling weight of each image file, > 0 (default: its
            area).
        bands: 1-based image bands to read (default: all).
        level: overview level (0 = full resolution).
        stride: grid sampler step in pixels (default None or 0: patch_size;
            smaller overlaps, larger leaves gaps; the last row/column is
            moved back to end at the edge); in CRS units with ``units="crs"``.
        units: "pixels" (default) or "crs": ``patch_size`` and ``stride``
            in the units of the target grid's CRS, as TorchGeo's samplers
            take them with ``units=Units.CRS``; made whole pixels of
            ``grid=``'s resolution (rounded; needs ``grid=`` with square
            pixels).
        epoch: epoch to start with.
        rank: this process's shard.
        world_size: number of shards; shards are disjoint and
            together cover the epoch.
        epoch_length: patches per epoch over all ranks (default: the number
            of non-overlapping patches of all files; grid: all windows).
        drop_last: drop a last partial batch, and give every rank the same
            number of batches.
        flip: random horizontal/vertical flips, same for image and mask.
        rot90: random rotations by multiples of 90 degrees, same for image
            and mask.  Code a of a sample: rotate by a & 3 quarter turns as
            numpy.rot90, then flip the last axis if a & 4.
        dtype: "raw" (the files' dtype, default) or "float32".
        scale_offset: float32 only: apply the files' per-band scale/offset.
        mean: float32 only: per-channel mean to subtract.
        std: float32 only: per-channel standard deviation to divide by.
        skip_errors: drop failed patches from their batch and count them in
            stats()["skipped"] instead of raising.  Never
            dropped: failures of the run rather than of the patch (expired
            or wrong credentials, an object gone or replaced while read, no
            memory); their batch raises.
        skip_limit: with skip_errors, raise (the batch's first failure)
            when more than this share of the last max(64, 2 x batch_size)
            patches was dropped (1.0: never).
        prefetch: batch slots in the ring (default None: enough for every
            patch being read plus two batches, at least 4, at most
            2 x inflight_bytes); memory is prefetch x batch bytes.
        decode_threads: reader threads; each reads and decodes one patch at
            a time (default: 2 x cores + 2 for local files; for remote 128,
            or 32 per core where that is more; capped by inflight_bytes).
        concurrency: patches read at once (default None: adaptive, raised
            while CPU cores sit idle, lowered on retries); stats()
            ["concurrency"] says where it stands.  (Its old name
            max_inflight still works, with a DeprecationWarning: IO's
            max_inflight counts requests, not patches.)
        inflight_bytes: memory budget of the patches being read: reader
            scratch, compressed tiles in flight and decode scratch all come
            out of it, and readers wait for room (default None: 256 MiB, or
            64 MiB per core on machines of more than 4 cores; twice that
            when a file is remote, where a reader holds its scratch
            through each round trip).  A tile that
            can never fit fails its patch with a "safety limit" error
            naming the file, level and tile.  The loader's memory is at
            most prefetch x a batch + cache_bytes (tile-shuffle) +
            inflight_bytes: stats()["memory_budget"].
        cache_bytes: decoded tiles kept (default None: the C default below,
            as GDAL_CACHEMAX's): tile-shuffle's
            buffer; with other samplers the tiles that random patches,
            grid patches sharing tiles and resampled inputs meet again;
            0: none.
        io_options: dict of cogfeed.IO keyword arguments for the loader's
            own I/O loops: ca_file / verify_tls (a private object store),
            timeouts and retries, header_cache_dir (open thousands of
            remote files with no request in the next run), max_open_files
            (local files open at once; default a quarter of ulimit -n),
            hedge_after_ms (a slow request is sent again; -1: never).
            Default: IO's defaults.  With adaptive concurrency, the loader
            resizes the loops' max_inflight (requests) as it goes (remote
            files).
        copy: give each batch its own arrays instead of ring views.
        grid: the target grid of the samples (default None: each image's
            own grid at ``level``): a cogfeed.Grid (one grid for every
            image file; the sampler draws windows of it), a path or URL
            (the grid of that file), ``{"like": path}``, ``{"crs": ...,
            "res": r or (xres, yres), "bounds": (xmin, ymin, xmax, ymax)}``
            (one grid), or ``{"crs": ..., "res": ...}`` (each image's
            footprint in that CRS at that resolution, snapped to multiples
            of it: gdalwarp -t_srs -tr -tap).
        resampling: kernel of the inputs read onto the grid: "nearest",
            "bilinear", "cubic", "average" or "mode", for the
            images and layers; or a dict {"image": ..., "layers": name or
            one per layer, "mask": ...}.  Masks use "nearest" unless given
            (use "mode" for labels read onto a coarser grid).  Computed as
            GDAL's warper computes them (nodata never contributes).
        reproject: read inputs in another CRS than the grid reprojected
            (True); False refuses them, naming both CRSs.
        ungeoreferenced: inputs without georeferencing (no geotransform,
            or no CRS while the grid has one), and stacks on an image
            without one, are refused (False); True reads such an
            input pixel for pixel when its size equals the grid's.
        error_threshold: reprojection error bound in source pixels
            (gdalwarp's -et).
        valid_mask: add ``batch["valid"]``, (B, 1, H, W) uint8: 1 where
            every scene and layer of the sample has data, 0 where any has
            none (time series: (B, T, H, W), each date's own validity, 0
            for padded dates) (outside its file, its nodata in any band, its internal
            mask; resampled: no valid source pixel under the kernel, as
            gdalwarp -dstalpha).  The mask file does not count.  Flipped
            and rotated with the image.  Use it to keep fill values out of
            normalisation and losses, in float32 output too.
        mosaic: the scenes of each image's list make one mosaic, not a
            time series: each pixel (all its bands) from the first scene,
            in the order given, that has data there, every scene read
            onto the sample's grid (its own CRS reprojected); batches are
            (B, C, H, W).  A later scene is read only while pixels are
            left without data, and costs no request where it misses the
            patch.  Give ``grid`` the union of the scenes (the default
            grid is the first scene's).
        skip_empty: leave out of the epoch (grid) or draw again (random,
            blocked) the patches no scene reaches, known from the scenes'
            footprints on the grid before anything is read; counted in
            ``stats()["empty_left_out"]`` / ``["empty_redrawn"]``.  Not
            with tile-shuffle.
        roi: a region of interest every patch meets: a bbox (xmin, ymin,
            xmax, ymax), a GeoJSON Polygon / MultiPolygon (or a Feature of
            one), or an object with ``__geo_interface__`` (shapely); in
            ``roi_crs``, which defaults to EPSG:4326 for GeoJSON dicts (as
            RFC 7946 has them) and to the target grid's CRS otherwise.
            The grid sampler keeps the windows that meet it (each of its
            pixels in one window per epoch), random draws patches around
            it; counted in ``stats()["empty_left_out"]`` /
            ``["empty_redrawn"]``.  Not with tile-shuffle.
        roi_crs: the CRS of ``roi`` (anything cogfeed.CRS takes).
        toi: a time of interest: an RFC 3339 instant, "start/end" (".."
            open; a date alone is its whole day, UTC) or a (start, end)
            pair, as ``Items.search(datetime=...)`` takes.  A STAC
            selection keeps the items whose datetime (or start/end
            interval) meets it; a time series keeps the dates inside it
            (a date not known is outside), and a series left without one
            is left out (its mask, layers and weight with it).  Needs
            dates: a selection, or series with ``dates`` /
            ``date_pattern``.
        scene_masks: a classification raster per scene (Sentinel-2's SCL,
            Landsat's QA), shaped as ``images`` (a path per image, or a
            list per time series / mosaic, a list per date of a series of
            mosaics), read onto the sample's grid
            (nearest) with its scene: where it holds one of
            ``invalid_classes`` (or has no data itself) the scene has no
            data, so ``batch["valid"]`` is 0 there and a mosaic takes the
            pixel from a later scene.  Used with ``valid_mask`` or
            ``mosaic``.
        invalid_classes: the values of ``scene_masks`` that are not data,
            e.g. ``[0, 1, 3, 8, 9, 10]`` for SCL's no data, saturated,
            cloud shadow, cloud (medium, high) and cirrus.
        labels: a cogfeed.VectorLabels (polygons with class values from a
            GeoPackage, GeoJSON, Shapefile...): each sample's
            ``batch["mask"]`` is burnt from them on the sample's target
            grid, with gdal_rasterize's rules, and augmented with the image.
            Instead of ``masks``; needs georeferenced images.
        sign: signs remote hrefs that need it (an Azure SAS, presigned
            URLs, Planetary Computer's ``planetary_computer.sign``): a
            function href -> signed href (or (signed href, expiry as a
            POSIX time)) or a cogfeed.stac.Signer.  The loader's io signs
            every remote file when it opens it and again
            ``io_options["sign_margin_s"]`` (300 s) before the signature
            expires, so a run longer than a token's life goes on; give the
            hrefs unsigned.  A STAC selection made with ``sign=`` passes
            its own (default None: hrefs as given).
        time_steps: T, the dates of every sample, for time series of any
            length (``images`` a list of scenes per location): a shorter
            series is padded (its padded steps zero, ``date_valid``
            False), a longer one is dealt into ceil(N / T) samples sources
            of T dates each, drawn once from ``seed`` (docs/datasets.md,
            "Time series").  Without it every series needs the same
            length.  A series keeps its T axis, also with T = 1.
        dates: the date of every scene, shaped as ``images`` (datetimes,
            ISO strings, numpy datetime64); or "tiff" for each file's
            TIFFTAG_DATETIME.  With dates, ``batch["dates"]`` (B, T)
            datetime64[s] (NaT for padding) and ``batch["date_valid"]``
            (B, T) bool; with ``time_steps``, ``batch["series"]`` the
            series (location) of each sample.
        date_pattern, date_format: dates from the file names instead: a
            regular expression with a group named ``date``, parsed with
            ``date_format`` (strptime), as TorchGeo's filename_regex.
        date_layers: layers per date instead of per location (time
            series): for each series a list per date of its layer files
            (or one path), stacked after that date's image bands: another
            collection's scene matched to each date, as
            cogfeed.series.match gives (``Matched.layers``).  Instead of
            ``layers``; their validity counts in their date's.
    """

    def __init__(
        self,
        images: Union[StrPath, Sequence[StrPath], Sequence[Sequence[StrPath]],
                      Sequence[Sequence[Sequence[StrPath]]], Selection],
        masks: Union[StrPath, Sequence[StrPath], None] = None,
        patch_size: float = _default("patch_size"),
        batch_size: int = _default("batch_size"),
        sampler: Sampler = "random",
        seed: int = _default("seed"),
        *,
        layers: Optional[Sequence[Union[StrPath, Sequence[StrPath]]]] = None,
        weights: Optional[Sequence[float]] = None,
        bands: Optional[Sequence[int]] = None,
        level: int = _default("level"),
        stride: Optional[float] = None,
        epoch: int = _default("epoch"),
        rank: int = _default("rank"),
        world_size: int = _default("world_size"),
        epoch_length: Optional[int] = None,
        drop_last: bool = _default("drop_last"),
        flip: bool = False,
        rot90: bool = False,
        dtype: DType = "raw",
        scale_offset: bool = _default("apply_scale_offset"),
        mean: Optional[Sequence[float]] = None,
        std: Optional[Sequence[float]] = None,
        skip_errors: bool = _default("skip_errors"),
        prefetch: Optional[int] = None,
        decode_threads: Optional[int] = None,
        concurrency: Union[int, Literal["auto", "adaptive"], None] = None,
        inflight_bytes: Optional[int] = None,
        cache_bytes: Optional[int] = None,
        io_options: Optional[IOOptions] = None,
        copy: bool = False,
        skip_limit: float = _default("skip_limit"),
        max_inflight: Optional[int] = None,
        grid: Union[Grid, StrPath, GridSpec, None] = None,
        resampling: Union[Resampling, ResamplingSpec, None] = _default("resampling"),
        reproject: bool = _default("reproject"),
        ungeoreferenced: bool = _default("ungeoreferenced"),
        error_threshold: float = _default("error_threshold"),
        valid_mask: bool = _default("valid_mask"),
        mosaic: bool = _default("mosaic"),
        skip_empty: bool = _default("skip_empty"),
        roi: Any = None,
        roi_crs: Any = None,
        toi: Any = None,
        units: str = "pixels",
        scene_masks: Union[StrPath, Sequence[StrPath], Sequence[Sequence[StrPath]],
                           Sequence[Sequence[Sequence[StrPath]]], None] = None,
        invalid_classes: Optional[Sequence[float]] = None,
        labels: Optional[VectorLabels] = None,
        sign: Any = None,
        time_steps: Optional[int] = None,
        dates: Any = None,
        date_pattern: Optional[str] = None,
        date_format: Optional[str] = None,
        date_layers: Optional[Sequence[Sequence[Any]]] = None,
    ) -> None:
        from .stac import Selection as _Selection
        stac_sel: Optional[_Selection] = None
        if isinstance(images, _Selection):
            # STAC items (cogfeed.stac): one sample source per item, one
            # layer per selected asset after the first (docs/datasets.md).
            if layers is not None:
                raise ValueError("layers: a STAC selection gives its own "
                                 "(one per selected asset)")
            stac_sel = images
            if toi is not None:
                stac_sel = stac_sel.within(toi)
                toi = None   # applied: its items are the time of interest's
            if sign is None:
                sign = stac_sel.signer
            # Unsigned: the loader's io signs them as it opens the files
            # and again before the signatures expire.
            images, layers = stac_sel.images(signed=False), stac_sel.layers(signed=False)
            if mosaic:
                # One mosaic of all the items, each asset mosaicked.
                images = [images]
                layers = None if layers is None else cast(Any, [[list(c) for c in zip(*layers)]])
        items: List[Any] = ([images] if isinstance(images, (str, bytes, os.PathLike))
                            else list(images))
        if not items:
            raise ValueError("images: at least one file is needed")
        # Mosaics with layers (several assets per scene, e.g. per-band
        # COGs): each source's image and layers are read as the dates of
        # a series of mosaics (each mosaicked on its own, the first scene
        # with data giving each pixel) and stacked as channels.
        self._stacked_steps = 0
        if mosaic and layers is not None:   # lists, not iterators: read twice
            layers = [x if isinstance(x, (str, bytes, os.PathLike)) else
                      [y if isinstance(y, (str, bytes, os.PathLike)) else list(y) for y in x]
                      for x in layers]
        if mosaic and layers is not None and _mosaicked_layers(layers):
            items, scene_masks = _mosaic_layers(items, list(layers), scene_masks,
                                                time_steps, dates, date_pattern, date_layers)
            layers = None
            self._stacked_steps = len(items[0])
        series = [isinstance(i, (list, tuple)) for i in items]
        if any(series) and not all(series):
            raise ValueError("images: mix of single scenes and time series")
        owner: Optional[List[int]] = None
        self._dates: Optional[np.ndarray] = None
        self._date_ok: Optional[np.ndarray] = None
        dated = dates is not None or date_pattern is not None
        # A series whose dates are lists of scenes is a series of mosaics
        # (the scenes of one date, e.g. one solar day's tiles).
        per_date = all(series) and any(isinstance(d, (list, tuple)) for i in items for d in i)
        if (time_steps is not None or dated) and mosaic and not per_date:
            raise ValueError("time_steps / dates: not with mosaic=True (a "
                             "mosaic's list is the scenes of one image); a time series "
                             "of mosaics gives each date as a list of scenes")
        if per_date:
            mosaic = False
        step_scenes = 0
        scm: Optional[List[Any]] = None
        # date_layers: (paths, layers per date), flattened source by source
        step_lay: Optional[Tuple[List[str], int]] = None
        is_series = all(series) and not mosaic
        if date_layers is not None and not is_series:
            raise ValueError("date_layers: for time series (a list of dates per location)")
        if date_layers is not None and layers is not None:
            raise ValueError("layers and date_layers: give one of them")
        if toi is not None and not is_series:
            raise ValueError("toi: needs dates: a STAC selection, or time series with "
                             "dates= or date_pattern=")
        if is_series:
            from . import series as _series
            nested = _series.nest(items, "images")
            dl_n = None
            if date_layers is not None:
                dl_n = _series.nest(list(date_layers), "date_layers")
                _series.same_dates(nested, dl_n, "date_layers")
            scm_n = None
            if scene_masks is not None:
                if isinstance(scene_masks, (str, bytes, os.PathLike)):
                    raise ValueError("scene_masks: shape them as the images")
                scm_n = _series.nest(list(scene_masks), "scene_masks")
                _series.same_shape(nested, scm_n, "scene_masks")
            lens = set(len(i) for i in nested)
            if time_steps is None and len(lens) > 1 and toi is None:
                raise ValueError("images: time series of different lengths "
                                 "(%d to %d dates): give time_steps=T to pad "
                                 "or draw T dates each" % (min(lens), max(lens)))
            T = int(time_steps) if time_steps is not None else len(nested[0])
            # a date's file name or header tells its date: its first scene's
            sdates = _series.parse_dates([[d[0] for d in i] for i in nested], dates,
                                         date_pattern, date_format)
            if toi is not None:
                if not dated:
                    raise ValueError("toi: the series need dates (dates= or date_pattern=)")
                keep = _series.within(sdates, toi)

                def kept(per: Any) -> Any:   # each series' dates inside toi
                    return None if per is None else [[s_[j] for j in k]
                                                     for s_, k in zip(per, keep)]
                nested, sdates, scm_n, dl_n = kept(nested), kept(sdates), kept(scm_n), kept(dl_n)
                lens = set(len(i) for i in nested if i)
                if not lens:
                    raise ValueError("toi: no date of any series is inside it")
                if time_steps is None and len(lens) > 1:
                    raise ValueError("toi: the series keep %d to %d dates: give time_steps=T "
                                     "to pad or draw T dates each" % (min(lens), max(lens)))
                # through plan(), which leaves out the series left empty
                T = int(time_steps) if time_steps is not None else lens.pop()
            sources, scm_s = nested, scm_n
            if time_steps is not None or toi is not None:
                picks, self._dates, self._date_ok, owner, sw = _series.plan(
                    nested, sdates, T, seed, leave_out_empty=toi is not None)
                sources = [[nested[o][j] for j in pk] for o, pk in zip(owner, picks)]
                if scm_n is not None:
                    scm_s = [[scm_n[o][j] for j in pk] for o, pk in zip(owner, picks)]
                if dl_n is not None:
                    dl_n = [[dl_n[o][j] for j in pk] for o, pk in zip(owner, picks)]
                if masks is not None:
                    ml = _paths(masks, "masks")
                    masks = [ml[o] for o in owner]
                if layers is not None:
                    layer_lists = list(layers)
                    layers = [layer_lists[o] for o in owner]
                w0 = list(weights) if weights is not None else [1.0] * (max(owner) + 1)
                weights = [float(w0[o]) * x for o, x in zip(owner, sw)]
                if all(x == 1.0 for x in weights):
                    weights = None
            elif dated:
                self._dates = np.array(sdates, dtype="datetime64[s]")
                self._date_ok = np.ones(self._dates.shape, bool)
            if T < 1 or any(len(i) != T for i in sources):
                raise ValueError("images: every time series needs the same "
                                 "number of dates")
            K = max(len(d) for i in sources for d in i)
            flat = _series.flatten(sources, K)
            if scm_s is not None:
                scm = _series.flatten(scm_s, K)
            if dl_n is not None:
                step_lay = ([p for src in dl_n for d in src for p in d], len(dl_n[0][0]))
            if K > 1:  # each date a mosaic of K scenes (padded)
                mosaic, step_scenes = True, K
            t = T * K
        elif all(series):
            if time_steps is not None:
                raise ValueError("time_steps: not with mosaic=True (a mosaic's list is "
                                 "the scenes of one image)")
            t = len(items[0])
            if t < 1 or any(len(i) != t for i in items):
                raise ValueError("images: every mosaic needs the same number of scenes "
                                 "(repeat a scene to pad one)")
            flat = [os.fspath(p) for i in items for p in i]
        else:
            if time_steps is not None and not mosaic:
                raise ValueError("time_steps: the images must be time series "
                                 "(a list of scenes per location)")
            t = 1
            flat = [os.fspath(p) for p in items]
            if dated and not mosaic:
                from . import series as _series
                one = _series.parse_dates([[p] for p in flat], None if dates is None else
                                          [[d] for d in dates], date_pattern, date_format)
                self._dates = np.array(one, dtype="datetime64[s]")
                self._date_ok = np.ones(self._dates.shape, bool)
        self._owner = owner
        nfiles = len(flat) // t
        if not is_series:
            scm = _scene_masks(scene_masks, items, series)
        if weights is not None:
            weights = list(weights)
        masks_l = None if masks is None else _paths(masks, "masks")
        nlayers = 0
        lay: Optional[List[str]] = None
        if step_lay is not None:
            lay, nlayers = step_lay
        elif layers is not None:
            layers = list(layers)
            if len(layers) != nfiles:
                raise ValueError("layers: one list per image file")
            per = [_paths(x, "layers") for x in layers]
            nlayers = len(per[0])
            if any(len(p) != nlayers for p in per):
                raise ValueError("layers: every file needs the same layers")
            lay = [p for x in per for p in x]
        f32 = _is_float32(dtype)
        # Mosaicked layers: the C loader's channels are one step's, so a
        # mean / std per output channel (image's, then each layer's) is
        # applied here, after the steps are stacked.
        self._norm: Optional[Tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]] = None
        if self._stacked_steps and (mean is not None or std is not None):
            if not f32:
                raise ValueError("mean / std: the output must be float32 (dtype='float32')")
            self._norm = (np.asarray([0.0] if mean is None else list(mean), np.float32),
                          np.asarray([1.0] if std is None else list(std), np.float32))
            if (self._norm[1] == 0).any():
                raise ValueError("std: 0 is not a standard deviation")
            mean = std = None
        if max_inflight is not None:
            warnings.warn("Loader(max_inflight=...) is now concurrency=... "
                          "(patches read at once; IO's max_inflight counts "
                          "requests)", DeprecationWarning, stacklevel=2)
            if concurrency is None:
                concurrency = max_inflight
        if concurrency in ("auto", "adaptive"):
            concurrency = None
        # Values are passed through: the C side checks every range (one
        # table, lib/pipeline/loader_options.h).
        rs_image, rs_mask, rs_layers = _resampling(resampling, nlayers)
        tgrid, tcrs, tres = _target(grid)
        patch_size, stride = _in_pixels(units, patch_size, stride,
                                        tgrid.res if tgrid is not None else tres)
        self._kw: Dict[str, Any] = dict(
            images=flat, masks=masks_l, layers=lay, nlayers=nlayers,
            time_steps=t,
            weights=None if weights is None else [float(w) for w in weights],
            bands=None if bands is None else [int(b) for b in bands],
            level=int(level), patch_size=int(patch_size),
            batch_size=int(batch_size), sampler=str(sampler),
            stride=_int0(stride), seed=int(seed), epoch=int(epoch),
            rank=int(rank), world_size=int(world_size),
            epoch_length=_int0(epoch_length), drop_last=bool(drop_last),
            flip=bool(flip), rot90=bool(rot90), float32=f32,
            apply_scale_offset=bool(scale_offset),
            mean=None if mean is None else [float(m) for m in mean],
            std=None if std is None else [float(s) for s in std],
            skip_errors=bool(skip_errors), skip_limit=float(skip_limit),
            prefetch=_int0(prefetch), threads=_int0(decode_threads),
            concurrency=_int0(cast(Optional[int], concurrency)),
            inflight_bytes=_int0(inflight_bytes),
            io_options=_io_options(io_options, sign),
            grid=tgrid, grid_crs=tcrs, grid_res=tres, resampling=rs_image,
            mask_resampling=rs_mask, layer_resampling=rs_layers,
            reproject=bool(reproject), ungeoreferenced=bool(ungeoreferenced),
            error_threshold=float(error_threshold),
            valid_mask=bool(valid_mask), mosaic=bool(mosaic), step_scenes=step_scenes,
            valid_per_step=bool(valid_mask) and is_series,
            layers_per_step=step_lay is not None,
            skip_empty=bool(skip_empty), scene_masks=scm,
            **_roi(roi, roi_crs),
            invalid_classes=(None if invalid_classes is None
                             else [float(c) for c in invalid_classes]),
            labels=None if labels is None else _vlabels_of(labels),
            # (used with a target grid, at level 0, by the random and grid
            # samplers: not made where the C loader would ignore them)
            described=(_described([flat, masks_l, lay, scm])
                       if (tgrid is not None or tcrs is not None) and int(level) == 0
                       and str(sampler) in ("random", "grid") else None))
        # Described files are opened by the first sample reading them: an
        # error then names the item and asset as one at the start would.
        self._hrefs: List[Any] = ([] if self._kw["described"] is None else
                                  [p for g in (flat, masks_l, lay, scm) for p in (g or ())
                                   if hasattr(p, "item_id")])
        self._labels = labels  # the C loader holds its own reference too
        if cache_bytes is not None:  # None: the C default (5% of RAM)
            self._kw["cache_bytes"] = int(cache_bytes)
        try:
            self._ld = _cogfeed._Loader(**self._kw)
        except _cogfeed.Error as e:
            if stac_sel is None:
                raise
            raise stac_sel.explain(e) from None
        finally:
            self._kw["described"] = None   # read by the C loader's start only
        self._layout = cast(LoaderLayout, self._ld.layout())
        if self._stacked_steps:   # the image's and the layers' channels
            self._layout = cast(LoaderLayout, dict(
                self._layout, channels=int(self._layout["channels"]) * self._stacked_steps,
                time_steps=1))
            nc = int(self._layout["channels"])
            if self._norm is not None and any(len(v) not in (1, nc) for v in self._norm):
                self._ld.close()
                raise ValueError("mean / std: one value, or one per channel (%d: the image's, "
                                 "then each layer's)" % nc)
        self._copy = bool(copy)
        # a series keeps its T axis, also of one date
        self._time_series = is_series and not self._stacked_steps
        self._origins: Dict[int, Optional[Grid]] = {}

    # -- construction from a config ------------------------------------

    @classmethod
    def from_config(cls, config: Union[StrPath, Mapping[str, Any]],
                    **overrides: Any) -> Loader:
        """A Loader from a dict or a JSON file of Loader keyword arguments
        (what ``cogfeed tune`` writes as best.json: it holds "images" and,
        when used, "masks").  Keyword arguments override the config."""
        if isinstance(config, (str, os.PathLike)):
            with open(config) as f:
                config = json.load(f)
        if not isinstance(config, dict):
            raise ValueError("a config is a dict (JSON object)")
        kw = {k: v for k, v in config.items()
              if k not in _META_KEYS and not k.startswith("_")}
        kw.update(overrides)
        if "images" not in kw:
            raise ValueError("config has no 'images'")
        import inspect
        known = set(inspect.signature(cls.__init__).parameters) - {"self"}
        unknown = sorted(set(kw) - known)
        if unknown:
            raise ValueError("unknown Loader settings in config: %s" %
                             ", ".join(unknown))
        return cls(**kw)

    # -- iteration ------------------------------------------------------

    def __iter__(self) -> Loader:
        return self

    def __next__(self) -> Batch:
        try:
            r = self._ld.next()
        except _cogfeed.Error as e:
            from .stac import _explained
            n = _explained(e, ((h, h) for h in self._hrefs))
            if n is e:
                raise
            raise n from None
        if r is None:
            epoch, _ = self._ld.position()
            self._ld.set_epoch(epoch + 1, 0)
            raise StopIteration
        index, image, mask, windows, augs, valid = r
        if self._stacked_steps:
            # a mosaic's image and layers: channels after channels; a pixel
            # is valid where each of them has data
            image = image.reshape(image.shape[0], -1, *image.shape[3:])
            if self._norm is not None:
                image -= self._norm[0][:, None, None]
                image /= self._norm[1][:, None, None]
            if valid is not None:
                valid = valid.min(axis=1, keepdims=True)
        elif not self._time_series:
            image = image.reshape(image.shape[0], *image.shape[2:])
        if self._copy:
            image = image.copy()
            mask = None if mask is None else mask.copy()
            valid = None if valid is None else valid.copy()
        batch: Batch = {"image": image, "windows": windows, "augment": augs,
                        "grid": [self._grid_of(w) for w in windows],
                        "index": index, "epoch": self._ld.position()[0]}
        if mask is not None:
            batch["mask"] = mask
        if valid is not None:
            batch["valid"] = valid
        if self._dates is not None and self._date_ok is not None:
            files = [w[0] for w in windows]
            batch["dates"] = self._dates[files]
            ok = self._date_ok[files]
            batch["date_valid"] = ok
            if not ok.all() and self._time_series:
                # padded steps: their (repeated) scene is not data
                image[~ok] = 0
                if valid is not None:
                    valid[~ok] = 0
        if self._owner is not None:
            batch["series"] = [self._owner[w[0]] for w in windows]
        return batch

    def _grid_of(self, window: Window) -> Optional[Grid]:
        f, x, y, w, h = window
        if f not in self._origins:
            r = self._ld.window_grid(f, 0, 0, 1, 1)
            from .grid import Grid
            self._origins[f] = None if r is None else Grid(
                r[0], geotransform=r[1], width=1, height=1)
        g = self._origins[f]
        return None if g is None else g.window(x, y, w, h)

    def grid(self, window: Sequence[int]) -> Optional[Grid]:
        """The cogfeed.Grid of a window (file, x, y, w, h) of this loader
        (as in batch["windows"]): where that patch lies."""
        f, x, y, w, h = window
        return self._grid_of((f, x, y, w, h))

    def __len__(self) -> int:
        """Batches of this rank per epoch."""
        return int(self._layout["batches"])

    def shard_len(self, rank: int, world_size: int) -> int:
        """Batches per epoch that shard ``rank`` of ``world_size`` of the
        same settings gets (this loader's own: len(self)), computed, not
        read: e.g. the lengths of DataLoader workers' shards."""
        return int(self._ld.shard_batches(int(rank), int(world_size)))

    # -- epochs and resuming --------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its first batch (invalidates views)."""
        self._ld.set_epoch(int(epoch), 0)

    @property
    def epoch(self) -> int:
        return self._ld.position()[0]

    # What decides the stream of windows besides (epoch, batch): a state
    # is only valid for a loader that agrees on all of them.
    _STREAM_KEYS = ("seed", "sampler", "rank", "world_size", "batch_size",
                    "patch_size", "stride", "epoch_length", "drop_last",
                    "flip", "rot90", "level")

    def _stream(self) -> Dict[str, Any]:
        """The settings of _STREAM_KEYS and a short digest of the inputs
        and their weights, in order ("files")."""
        import hashlib
        k = self._kw
        h = hashlib.sha256()
        parts = [k["images"], k["masks"] or [], k["layers"] or [],
                 k["weights"] or [], [k["time_steps"]]]
        if k["grid"] is not None or k["grid_crs"] is not None:
            # (only then: states of loaders on their images' grids keep
            # their digest)
            parts.append([k["grid"], k["grid_crs"], k["grid_res"]])
        for part in parts:
            h.update(json.dumps([str(x) for x in part]).encode())
        st = dict((key, k[key]) for key in self._STREAM_KEYS)
        st["files"] = h.hexdigest()[:16]
        return st

    def state_dict(self) -> LoaderState:
        """Where the iteration is: resuming from it continues exactly.  It
        also records what the stream depends on (seed, sampler, shard,
        batch and patch size, epoch length, augmentation, level and a
        digest of the files and weights)."""
        epoch, batch = self._ld.position()
        return cast(LoaderState, dict(self._stream(), epoch=epoch, batch=batch))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a state_dict() of a loader with the same settings;
        ValueError names the first setting that differs (keys a state
        lacks, e.g. from an older version, are not checked)."""
        for k, v in self._stream().items():
            if k in state and state[k] != v:
                what = ("the files or their weights" if k == "files"
                        else "%s=%r, this one has %r" % (k, state[k], v))
                raise ValueError("state_dict is from a loader with %s: it "
                                 "would not continue the same stream" % what)
        self._ld.set_epoch(int(state["epoch"]), int(state["batch"]))

    # -- inspection -----------------------------------------------------

    @property
    def layout(self) -> LoaderLayout:
        """Shapes and sizes: batch_size, patch_size, time_steps, channels,
        dtype, has_mask, image_bytes/mask_bytes per slot, prefetch,
        samples and batches of this rank per epoch."""
        return cast(LoaderLayout, dict(self._layout))

    def window(self, j: int) -> Tuple[Window, int]:
        """((file, x, y, w, h), augment code) of this rank's sample j of
        the current epoch, computed without reading."""
        return self._ld.window(int(j))

    def stats(self) -> LoaderStats:
        """Counters: samples, batches, skipped, bytes_fetched /
        bytes_decoded / bytes_delivered, requests, retries, hedges /
        hedge_wins (requests sent twice / answered by the second copy),
        io_inflight,
        concurrency, reading, cache_hits / cache_misses / cache_hit_rate,
        wait_s (time the consumer waited: data stall), read_busy_s and
        convert_busy_s (summed over reader threads), elapsed_s,
        memory_budget / memory_used / memory_peak (bytes: the budget of
        the loader's buffers, what they hold now, the most they held),
        chunk_bytes_decoded (what the codecs wrote: each tile a window
        touches is decoded whole unless a cache held it) and
        decoded_per_read (chunk_bytes_decoded / bytes_decoded: about 9
        for random 256 px patches on 512 px tiles without cache hits, 1
        for tile-aligned patches; 0 for uncompressed files),
        empty_left_out and empty_redrawn (skip_empty: grid windows of the
        epoch that no scene reaches, left out; random or blocked windows
        drawn again so far), read_rounds (sets of requests sent at once
        and waited for, summed over the samples read: the round trips a
        remote sample costs; a mosaic's later scenes take rounds of their
        own, one for the second scenes of every date, one for the
        third...) and samples_read (the samples the readers read, also
        those read ahead into the next epoch: what bytes_decoded,
        chunk_bytes_decoded and read_rounds count)."""
        return cast(LoaderStats, self._ld.stats())

    def set_buffers(self, slot: int, image: Any, mask: Any = None) -> None:
        """Use caller memory (any writable C-contiguous buffer of at least
        layout["image_bytes"] / ["mask_bytes"], e.g. pinned memory) for ring
        slot ``slot``.  Only before the first batch of an epoch."""
        self._ld.set_buffers(int(slot), image, mask)

    def close(self) -> None:
        """Stop the reader threads now and close the files and the I/O
        loops' connections; the ring is freed with the last batch that
        views it."""
        self._ld.close()

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- help(Loader): the defaults and ranges of the C table ------------------

#: What each Arguments entry of Loader's docstring gets from the C table
#: (the prose stays hand-written; defaults and ranges are generated).
_DOC_ROWS = {"resampling": ("resampling", "mask_resampling")}
#: Upper bounds that only say "no bound": the largest int, int64, uint64.
_NO_BOUND = (2**31 - 1, 2**63 - 1, 2**64 - 1)


def _fmt(o: Mapping[str, Any], v: Any) -> str:
    if o["type"] == "bool":
        return "True" if v else "False"
    if o["type"] == "kernel":
        return '"%s"' % v
    if o["type"] == "float":
        return "%.17g" % v
    return str(v)


def _range(o: Mapping[str, Any]) -> str:
    """The accepted range in words ("" for flags)."""
    if o["type"] == "bool":
        return ""
    if o["type"] == "kernel":
        return "one of " + ", ".join(o["choices"])
    lo, hi = o["min"], o["max"]
    lo_s = "> 0" if o["type"] == "float" and lo == 5e-324 else \
        ("" if lo == float("-inf") else "at least %s" % _fmt(o, lo))
    if hi in _NO_BOUND or hi in (float("inf"), sys.float_info.max):
        return lo_s
    if lo_s.startswith("at least"):
        return "%s to %s" % (_fmt(o, lo), _fmt(o, hi))
    return ("%s, at most %s" % (lo_s, _fmt(o, hi))).lstrip(", ")


def option_summary(o: Mapping[str, Any], here: bool = True) -> str:
    """One C table row in words: 'C default 0; 0 to 64 (0: auto).'.  A
    default computed on the machine is said in words, and with here its
    value on this one."""
    if o["runtime_default"]:
        d = "C default: %s%s" % (o["default_doc"], " (here %s)" % _fmt(
            o, o["default"]) if here else "")
    else:
        d = "C default %s" % _fmt(o, o["default"])
    r = _range(o)
    return "%s%s%s." % (d, "; " + r if r else "",
                        " (%s)" % o["hint"] if o["hint"] else "")


def _table_doc(doc: Optional[str]) -> Optional[str]:
    """Loader's docstring with each table-backed entry of its Arguments
    followed by the C table's default and range (option_summary)."""
    if not doc:
        return doc  # python -OO
    import re
    import textwrap
    out: List[str] = []
    pending: List[str] = []

    def flush() -> None:
        for name in pending:
            o = _OPTIONS[name]
            text = option_summary(o)
            if len(pending) > 1:
                text = "%s: %s" % (name, text)
            out.extend(textwrap.wrap(text, 76, initial_indent=" " * 12,
                                     subsequent_indent=" " * 12))
        pending.clear()

    args = False
    for line in doc.split("\n"):
        entry = re.match(r"^        (\w+): ", line) if args else None
        if entry or (args and not line.startswith(" " * 12)):
            flush()
        if line.strip() == "Arguments:":
            args = True
        elif entry:
            c = _C_NAMES.get(entry.group(1), entry.group(1))
            pending.extend(n for n in _DOC_ROWS.get(c, (c,)) if n in _OPTIONS)
        out.append(line)
    flush()
    return "\n".join(out)


Loader.__doc__ = _table_doc(Loader.__doc__)
