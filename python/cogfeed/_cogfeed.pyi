"""Type stubs for cogfeed._cogfeed, the C core (python/_cogfeed.c and
python/_loader.c).  tests/python/test_package.py checks them against the
module with mypy's stubtest."""
import enum
import os
from types import TracebackType
from typing import Any, Callable, List, Literal, Optional, Sequence, Tuple, Union, final, overload

import numpy as np
import numpy.typing as npt

__version__: str

from .grid import Grid

_Window = Tuple[int, int, int, int]
# cogfeed.loader.Resampling (C compares the names case-insensitively)
_Resampling = Literal["nearest", "near", "bilinear", "cubic", "average", "mode"]

class Status(enum.IntEnum):
    """cogfeed's status codes: cogfeed.h's cf_status, the same values,
    names without CF_E_ (CF_STATUS_TABLE)."""
    OK = 0
    ARG = 1
    NOMEM = 2
    IO = 3
    FORMAT = 4
    UNSUPPORTED = 5
    CODEC = 6
    LIMIT = 7
    HTTP = 8
    AUTH = 9
    NOTFOUND = 10
    CHANGED = 11
    RANGE = 12
    TIMEOUT = 13
    STATE = 14
    END = 15

class Error(RuntimeError):
    """Raised for every cogfeed failure, as the subclass of its status.
    .code (a Status), .name (its short text) and .http_status say which."""
    code: Status
    name: str
    http_status: int

class ArgumentError(Error, ValueError):
    """CF_E_ARG: invalid argument from the caller."""

class OutOfMemoryError(Error, MemoryError):
    """CF_E_NOMEM: allocation failed."""

class InputOutputError(Error, OSError):
    """CF_E_IO: local I/O error or network transport failure."""

class FormatError(Error, OSError):
    """CF_E_FORMAT: malformed TIFF / GeoTIFF structure."""

class UnsupportedError(Error, OSError):
    """CF_E_UNSUPPORTED: valid but unsupported (or codec not built in)."""

class CodecError(Error, OSError):
    """CF_E_CODEC: corrupt compressed tile data."""

class LimitError(Error):
    """CF_E_LIMIT: a safety cap was hit (size, count, memory)."""

class HTTPError(Error, OSError):
    """CF_E_HTTP: HTTP error status not covered below."""

class AccessDeniedError(Error, PermissionError):
    """CF_E_AUTH: 401/403, or a TLS certificate that did not verify."""

class NotFoundError(Error, FileNotFoundError):
    """CF_E_NOTFOUND: file or object does not exist (404, ENOENT)."""

class ObjectChangedError(Error, OSError):
    """CF_E_CHANGED: object changed while reading (ETag, 412)."""

class RangeRequestError(Error, OSError):
    """CF_E_RANGE: range request failed: 416, no range support, Content-Range mismatch."""

class TimedOutError(Error, TimeoutError):
    """CF_E_TIMEOUT: deadline, stall or retry budget exhausted."""

class StateError(Error):
    """CF_E_STATE: call not valid in the object's current state."""

def status_table() -> Tuple[Tuple[str, int, str, str, str, str, str], ...]:
    """CF_STATUS_TABLE's rows: (name, code, text, doc, pyclass, pybase, member)."""
def status_name(code: int) -> Optional[str]:
    """C's cf_status_name: 'CF_E_NOTFOUND', ...; None for a non-status."""
def loader_options() -> list[dict[str, Any]]:
    """cf_loader_option_table: the Loader's scalar options and kernels, one
    dict each (name, group, id, type, ctype, default, min, max, hint,
    default_doc, runtime_default, choices)."""
def io_options() -> list[dict[str, Any]]:
    """cf_io_option_table: cogfeed.IO's scalar options, as loader_options."""

@final
class IO:
    """The I/O context: connection pools, retries, the header cache."""
    def __init__(
        self,
        max_inflight: int = ...,
        header_bytes: int = ...,
        merge_gap: int = ...,
        request_timeout_s: float = ...,
        connect_timeout_s: float = ...,
        low_speed_time_s: float = ...,
        low_speed_bytes: int = ...,
        max_retries: int = ...,
        retry_budget: int = ...,
        retry_base_ms: float = ...,
        retry_max_ms: float = ...,
        verify_tls: bool = ...,
        header_cache_dir: Optional[str] = ...,
        ca_file: Optional[str] = ...,
        max_open_files: int = ...,
        hedge_after_ms: float = ...,
        header_cache_max_bytes: int = ...,
        header_memory_max: int = ...,
        cache_bytes: int = ...,
        sign_margin_s: float = ...,
        sign: Optional[Callable[[str], Any]] = ...,
    ) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def get(self, url: Union[str, "os.PathLike[str]"], *, max_bytes: int = ...) -> bytes: ...
    def set_max_inflight(self, n: int, /) -> None: ...

_Transform = Tuple[float, float, float, float, float, float]

@final
class CRS:
    """A coordinate reference system (PROJ): compares by PROJ equivalence,
    and equal to its EPSG code as an int."""
    def __new__(cls, value: Any) -> "CRS": ...
    @property
    def name(self) -> str: ...
    @property
    def epsg(self) -> Optional[int]: ...
    @property
    def epsg_written(self) -> Optional[int]: ...
    @property
    def is_geographic(self) -> bool: ...
    @property
    def is_projected(self) -> bool: ...
    @property
    def linear_unit(self) -> Optional[float]: ...
    def to_epsg(self) -> Optional[int]: ...
    def to_wkt(self) -> str: ...
    def to_json(self) -> str: ...
    def to_string(self) -> str: ...
    def equals(self, other: Any, /) -> bool: ...
    @classmethod
    def from_epsg(cls, code: int, /) -> "CRS": ...
    @classmethod
    def from_wkt(cls, text: str, /) -> "CRS": ...
    @classmethod
    def from_user_input(cls, value: Any, /) -> "CRS": ...
    def __reduce__(self) -> Any: ...

@final
class Cog:
    """An open (Geo)TIFF / COG."""
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def bits_per_sample(self) -> int: ...
    @property
    def tile_width(self) -> int: ...
    @property
    def tile_height(self) -> int: ...
    @property
    def tiled(self) -> bool: ...
    @property
    def bigtiff(self) -> bool: ...
    @property
    def big_endian(self) -> bool: ...
    @property
    def has_mask(self) -> bool: ...
    @property
    def compression(self) -> str: ...
    @property
    def predictor(self) -> int: ...
    @property
    def interleave(self) -> str: ...
    @property
    def overviews(self) -> list[Tuple[int, int]]: ...
    @property
    def geotransform(self) -> Optional[Tuple[float, float, float, float, float, float]]: ...
    @property
    def crs(self) -> Optional[CRS]: ...
    @property
    def epsg(self) -> Optional[int]: ...
    @property
    def transform(self) -> Optional[_Transform]: ...
    @property
    def bounds(self) -> Optional[Tuple[float, float, float, float]]: ...
    @property
    def res(self) -> Optional[Tuple[float, float]]: ...
    @property
    def nodata(self) -> Optional[float]: ...
    @property
    def scales(self) -> Tuple[float, ...]: ...
    @property
    def offsets(self) -> Tuple[float, ...]: ...
    @property
    def nodatas(self) -> list[Optional[float]]: ...
    @property
    def descriptions(self) -> list[str]: ...
    @property
    def units(self) -> list[str]: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def datetime(self) -> Optional[str]: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def file_size(self) -> int: ...
    @property
    def header_bytes(self) -> int: ...
    @property
    def header_requests(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def etag(self) -> Optional[str]: ...
    @property
    def name(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def read(
        self,
        window: Optional[_Window] = None,
        bands: Optional[Sequence[int]] = None,
        level: int = 0,
        *,
        out: Optional[npt.NDArray[Any]] = None,
        grid: Optional[Grid] = None,
        resampling: _Resampling = "nearest",
        error_threshold: float = 0.125,
        src_nodata: Optional[float] = None,
        dst_nodata: Optional[float] = None,
    ) -> npt.NDArray[Any]: ...
    def read_mask(self, window: Optional[_Window] = None, level: int = 0) -> npt.NDArray[np.uint8]: ...
    def level_info(self, level: int, /) -> dict[str, Union[int, bool]]: ...
    def tile_info(self, index: int, level: Optional[int] = None, *, mask: bool = False) -> dict[str, Any]: ...
    def decode_tile(
        self, data: Union[bytes, bytearray, memoryview, npt.NDArray[Any]], index: int,
        level: Optional[int] = None,
        *,
        out: Optional[npt.NDArray[Any]] = None,
        mask: bool = False,
    ) -> npt.NDArray[Any]: ...
    def get_metadata(self, band: int = 0, domain: str = "") -> dict[str, str]: ...
    def metadata_domains(self, band: int = 0) -> list[str]: ...
    def grid(self, level: int = 0) -> Grid: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Cog": ...
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
        /,
    ) -> None: ...

def open(url: Union[str, bytes, os.PathLike[str], os.PathLike[bytes]], io: Optional[IO] = None, *, raw_color: bool = False) -> Cog: ...
_URL = Union[str, bytes, os.PathLike[str], os.PathLike[bytes]]

# errors="raise" (default): every URL opened, or one exception of the first
# failure's class naming each file that failed (.errors: per URL, its
# exception or None); errors="return": failures in place.
@overload
def open_many(
    urls: Sequence[_URL],
    io: Optional[IO] = None,
    *,
    raw_color: bool = False,
    errors: Literal["raise"] = "raise",
) -> list[Cog]: ...
@overload
def open_many(
    urls: Sequence[_URL],
    io: Optional[IO] = None,
    *,
    raw_color: bool = False,
    errors: Literal["return"],
) -> list[Union[Cog, Error]]: ...
def read_many(
    items: Sequence[Tuple[Cog, Optional[_Window]]],
    bands: Optional[Sequence[int]] = None,
    level: int = 0,
    threads: int = 0,
    inflight_bytes: int = 0,
) -> list[npt.NDArray[Any]]: ...
def default_io() -> IO: ...
def grid_level(cog: Cog, grid: Grid, resampling: _Resampling = "nearest", /) -> int: ...
def grid_from_bounds(
    crs: Any, bounds: Tuple[float, float, float, float], xres: float, yres: float, /
) -> Tuple[_Transform, int, int]: ...

SHARE_FAILED_CARRY: bytes

@final
class _Writer:
    """cf_writer; use cogfeed.Writer."""
    def __init__(self, path: Union[str, os.PathLike[str]], width: int, height: int,
                 bands: int, dtype: int, tile_size: int, compression: int, level: int,
                 predictor: int, overviews: int, resampling: int,
                 nodata: Optional[float], grid: Optional[Grid],
                 descriptions: Optional[Sequence[Optional[str]]],
                 scales: Optional[Sequence[float]],
                 offsets: Optional[Sequence[float]], lerc_layer: int = 1,
                 max_error: float = 0.0, quality: int = 0, lossless: bool = False,
                 photometric: int = 0, io: Optional[IO] = None,
                 part_size: int = 0, mask: bool = False, threads: int = 0,
                 share_row0: int = 0, share_rows: int = 0,
                 overviews_given: bool = False) -> None: ...
    @property
    def tiles(self) -> Tuple[int, int]: ...
    @property
    def levels(self) -> int: ...
    def write_tile(self, tx: int, ty: int, data: Any, mask: Any = None, /) -> None: ...
    def write_encoded_tile(self, tx: int, ty: int, data: Any, mask: Any = None,
                           level: int = 0, /) -> None: ...
    def share_build(self) -> None: ...
    def share_carry(self, carry: Optional[bytes], /) -> bytes: ...
    def share_tiles(self, level: int, /) -> Tuple[int, int]: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...

@final
class _Stitcher:
    """cf_stitcher; use cogfeed.Stitcher."""
    def __init__(self, path: Union[str, os.PathLike[str]], width: int, height: int,
                 tile_size: int, compression: int, level: int, overviews: int,
                 grid: Optional[Grid], channels: int, blend: int, overlap: int,
                 argmax: bool, patches: Any, lerc_layer: int = 1,
                 max_error: float = 0.0, io: Optional[IO] = None,
                 part_size: int = 0, mask: bool = False, threads: int = 0,
                 share_row0: int = 0, share_rows: int = 0) -> None: ...
    @property
    def levels(self) -> int: ...
    def add(self, x: int, y: int, w: int, h: int, pred: Any, valid: Any = None, /) -> None: ...
    def share_build(self) -> None: ...
    def share_carry(self, carry: Optional[bytes], /) -> bytes: ...
    def share_tiles(self, level: int, /) -> Tuple[int, int]: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...

@final
class _VLabels:
    """cf_vlabels; use cogfeed.VectorLabels."""
    def __init__(self, wkb: Sequence[Any], values: Sequence[float],
                 crs: Optional[CRS] = ..., all_touched: bool = ...) -> None: ...
    def rasterize(self, grid: Grid, dtype: Optional[str] = ...) -> Tuple[Any, int]: ...
    def count(self) -> int: ...
    def dtype(self) -> str: ...
    def bounds(self) -> Tuple[float, float, float, float]: ...

_StacLimits = Tuple[int, int, int, int, int, int]

@final
class _StacIndex:
    """cf_stac; use cogfeed.stac.items()."""
    def __init__(self) -> None: ...
    def add(self, data: bytes, base: Optional[str], limits: _StacLimits) -> bool: ...
    def add_file(self, path: str, base: Optional[str], limits: _StacLimits,
                 max_bytes: int) -> bool: ...
    def add_arrow(self, batch: Any, base: Optional[str], limits: _StacLimits) -> None: ...
    def count(self) -> int: ...
    def item(self, i: int) -> Tuple[Any, ...]: ...
    def item_doc(self, i: int) -> int: ...
    def columns(self) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]: ...
    def match(self, boxes: Sequence[Tuple[float, float, float, float]],
              t_lo: Optional[int], t_hi: Optional[int],
              max_cloud: Optional[float]) -> npt.NDArray[np.uint8]: ...
    def pick(self, rows: npt.NDArray[np.int64], names: Sequence[str]) -> npt.NDArray[np.int64]: ...
    def grid_fields(self, rows: npt.NDArray[np.int64], ks: npt.NDArray[np.int64]
                    ) -> Tuple[List[str], List[str], List[Optional[str]],
                               npt.NDArray[np.float64], npt.NDArray[np.int64],
                               List[List[Optional[str]]]]: ...
    def hrefs(self, rows: npt.NDArray[np.int64],
              ks: npt.NDArray[np.int64]) -> Tuple[List[str], List[bool]]: ...

@final
class _Loader:
    """The C loader behind cogfeed.Loader (python/cogfeed/loader.py)."""
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    def shard_batches(self, rank: int, world_size: int, /) -> int: ...
    def layout(self) -> dict[str, Any]: ...
    def set_buffers(self, slot: int, image: Any, mask: Any = None, /) -> None: ...
    def next(self) -> Optional[Tuple[Any, ...]]: ...
    def release(self) -> None: ...
    def set_epoch(self, epoch: int, batch: int = 0, /) -> None: ...
    def position(self) -> Tuple[int, int]: ...
    def window(self, j: int, /) -> Tuple[Tuple[int, int, int, int, int], int]: ...
    def window_grid(
        self, file: int, x: int, y: int, w: int, h: int, /
    ) -> Optional[Tuple[Optional[CRS], Tuple[float, float, float, float, float, float], int, int]]: ...
    def stats(self) -> dict[str, Any]: ...
    def close(self) -> None: ...
