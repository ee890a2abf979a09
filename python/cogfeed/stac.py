"""cogfeed.stac: STAC Items, ItemCollections, Collections and static
Catalogs in; their assets out as the Loader's inputs (docs/datasets.md).

    import cogfeed
    items = cogfeed.stac.items("https://example.com/catalog.json")
    sel = items.select(["red", "green", "blue", "nir"])   # keys or common names
    loader = cogfeed.Loader(sel, patch_size=256)            # one layer per asset

JSON is read through cogfeed's own I/O (``IO.get``: local paths, file://,
http(s)://, s3://, az://, gs://, with the credential rules of
docs/remote.md for every href) and parsed with the standard library; pystac
and pystac-client objects are taken where those are installed (never
required).  A catalog may come from someone hostile: every count, size and
depth is bounded, links may not leave a remote catalog for the local disk
or go from https to http, and link loops are refused (``Limits``).
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
import posixpath
import re
import threading
import time
from dataclasses import dataclass, field
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List,
                    Mapping, Optional, Sequence, Set, Tuple, Union, cast,
                    overload)
from urllib.parse import parse_qs

import numpy as np
import numpy.typing as npt

from . import _cogfeed
from .grid import Grid

if TYPE_CHECKING:
    from ._cogfeed import IO, CRS

__all__ = ["Asset", "Href", "Item", "Items", "Selection", "Limits", "Signer",
           "SignFunction", "StacError", "items", "item_from_dict"]

log = logging.getLogger("cogfeed.stac")

#: sign=: href -> signed href, or (signed href, expiry as a POSIX time).
SignFunction = Callable[[str], Union[str, Tuple[str, float]]]

#: A source of items: a path or URL of a STAC JSON document, a parsed
#: document (dict), a pystac Item / ItemCollection / Catalog, a
#: pystac-client ItemSearch, or a list of these.
Source = Any

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_REMOTE = ("http", "https", "s3", "az", "gs")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_AUTH_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,31}:[A-Za-z0-9_.\-]{1,32}$")


class StacError(ValueError):
    """A STAC document cogfeed cannot use: broken JSON, a missing or
    wrong-typed field, a refused link, a bound exceeded.  The message names
    the document (file or URL, without its query string), the item id and
    the asset key where they apply."""


@dataclass(frozen=True)
class Limits:
    """Bounds on what a catalog may make cogfeed do (docs/datasets.md,
    "Hostile catalogs")."""
    #: bytes of one JSON document (IO.get's max_bytes)
    max_bytes: int = 16 << 20
    #: documents fetched while walking a catalog
    max_documents: int = 10_000
    #: items in all (a collection, a search result, a catalog walk)
    max_items: int = 1_000_000
    #: child levels below the document given
    max_depth: int = 16
    #: links of one document, assets of one item, bands of one asset
    max_links: int = 100_000
    max_assets: int = 1_000
    max_bands: int = 10_000
    #: JSON nesting depth of one document
    max_nesting: int = 64
    #: the largest proj:shape side (pixels)
    max_side: int = 1 << 31
    #: a STAC GeoParquet file: its bytes, and its columns decoded
    max_table_bytes: int = 256 << 20


# -- small helpers ---------------------------------------------------------


def _scheme(href: str) -> str:
    m = _SCHEME.match(href)
    return m.group(1).lower() if m else ""


def _is_local(href: str) -> bool:
    s = _scheme(href)
    return s in ("", "file")


#: The C side's names: at most this many bytes with their NUL (CF__NAME_MAX).
_NAME_MAX = 200


def _fit(s: str, outlen: int) -> str:
    """s as lib/common/error.c's cf__name_fit fits it into outlen bytes
    (with the NUL): whole if it fits, else its head, "..." and its tail,
    cut on UTF-8 character boundaries."""
    b = s.encode("utf-8", "surrogatepass")
    n = len(b)
    if n < outlen or outlen < 1:
        return s
    room = outlen - 1 if outlen < 8 else outlen - 4
    head = room if outlen < 8 else room // 2
    tail = room - head
    while head and (b[head] & 0xC0) == 0x80:
        head -= 1
    while tail and (b[n - tail] & 0xC0) == 0x80:
        tail -= 1
    if outlen < 8:
        return b[:head].decode("utf-8", "replace")
    return (b[:head] + b"..." + b[n - tail:]).decode("utf-8", "replace")


def _shown(href: str) -> str:
    """href as errors show it, as the C side names a file
    (cf__redact_url): no user info, query or fragment, fitted into its
    200 bytes; control characters escaped."""
    h = href.split("#", 1)[0].split("?", 1)[0]
    m = _SCHEME.match(h)
    scheme = ""
    if m:
        rest = h[m.end():]
        auth, sep, path = rest.partition("/")
        if "@" in auth:
            auth = auth.rsplit("@", 1)[1]
        scheme, h = m.group(0), auth + sep + path
    out = scheme + _fit(h, _NAME_MAX - len(scheme.encode()))
    return "".join(c if 0x20 <= ord(c) != 0x7F else "\\x%02x" % ord(c) for c in out)


def _resolve(base: Optional[str], href: str) -> str:
    """href made absolute against the document it came from (base: a path
    or URL; its query is not carried over)."""
    if _scheme(href) or base is None:
        return href
    if href.startswith("/") and _is_local(base):
        return href
    bs = _scheme(base)
    if bs and bs != "file":
        m = _SCHEME.match(base)
        assert m is not None
        rest = base[m.end():].split("#", 1)[0].split("?", 1)[0]
        auth, _, path = rest.partition("/")
        # The href's own query and fragment stay as they are.
        cut = min([i for i in (href.find("?"), href.find("#")) if i >= 0],
                  default=len(href))
        hpath, tail = href[:cut], href[cut:]
        if hpath.startswith("/"):
            joined = hpath
        else:
            joined = posixpath.join("/" + posixpath.dirname(path), hpath)
        norm = posixpath.normpath(joined) if joined else "/"
        if norm.startswith("//"):
            norm = "/" + norm.lstrip("/")
        if joined.endswith("/") and not norm.endswith("/"):
            norm += "/"
        return m.group(0) + auth + norm + tail
    root = base[7:] if bs == "file" else base
    if root.startswith("localhost/"):
        root = root[9:]
    d = os.path.dirname(root)
    p = os.path.normpath(os.path.join(d, href))
    return ("file://" + p) if bs == "file" else p


def _check_target(origin: str, href: str, what: str) -> None:
    """The rule for hrefs a document names (links and assets): a remote
    document may not send cogfeed to the local disk, and an https one not
    to plain http.  Control characters are refused."""
    if _CONTROL.search(href):
        raise StacError("%s: a href holding a control character is refused"
                        % what)
    if not href:
        raise StacError("%s: empty href" % what)
    o, t = _scheme(origin), _scheme(href)
    if t and t != "file" and t not in _REMOTE:
        raise StacError("%s: unsupported URL scheme %r in %s" % (
            what, t, _shown(href)))
    if o in _REMOTE and _is_local(href):
        raise StacError("%s: %s is a local file named by a remote document "
                        "(%s): refused" % (what, _shown(href), _shown(origin)))
    if o == "https" and t == "http":
        raise StacError("%s: %s is plain http, named by an https document "
                        "(%s): refused" % (what, _shown(href), _shown(origin)))


def _bad_constant(name: str) -> float:
    raise ValueError("%s is not JSON" % name)


def _depth(obj: Any, limit: int) -> int:
    """Nesting depth of a parsed document, stopping past limit."""
    level: List[Any] = [obj]
    depth = 0
    while level and depth <= limit:
        depth += 1
        nxt: List[Any] = []
        for o in level:
            vs = o.values() if isinstance(o, dict) else o
            nxt.extend(v for v in vs if isinstance(v, (dict, list)))
        level = nxt
    return depth


def _parse(data: bytes, where: str, limits: Limits) -> Dict[str, Any]:
    # The C parser guards its own recursion (RecursionError); the nesting
    # bound is then checked on the result without recursing.
    too_deep = StacError("%s: JSON nested deeper than %d levels"
                         % (where, limits.max_nesting))
    try:
        doc = json.loads(data, parse_constant=_bad_constant)
    except RecursionError:
        raise too_deep from None
    except (ValueError, UnicodeDecodeError) as e:
        raise StacError("%s: not valid JSON: %s" % (where, e)) from None
    if not isinstance(doc, dict):
        raise StacError("%s: a STAC document is a JSON object, not %s"
                        % (where, type(doc).__name__))
    if _depth(doc, limits.max_nesting) > limits.max_nesting:
        raise too_deep
    return cast(Dict[str, Any], doc)


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise StacError("%s: a number is needed, not %r" % (what, _short(v)))
    f = float(v)
    if not math.isfinite(f):
        raise StacError("%s: %r is not finite" % (what, v))
    return f


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def _str(v: Any, what: str, limit: int = 4096) -> str:
    if not isinstance(v, str):
        raise StacError("%s: a string is needed, not %s" % (what, _short(v)))
    if len(v) > limit:
        raise StacError("%s: a string of %d characters (at most %d)"
                        % (what, len(v), limit))
    return v


_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})"
                     r"(?:\.(\d{1,12}))?([Zz]|[+-]\d{2}:\d{2})$")


def _time(v: Any, what: str) -> Optional[_dt.datetime]:
    """An RFC 3339 date-time (what STAC requires; fractions of any length,
    as Python 3.9's fromisoformat does not take), in UTC when no offset."""
    if v is None:
        return None
    s = _str(v, what, 64)
    m = _RFC3339.match(s)
    try:
        if not m:
            raise ValueError(s)
        y, mo, d, h, mi, se = (int(x) for x in m.groups()[:6])
        us = int((m.group(7) or "0")[:6].ljust(6, "0"))
        z = m.group(8)
        tz = _dt.timezone.utc
        if z not in ("Z", "z"):
            off = _dt.timedelta(hours=int(z[1:3]), minutes=int(z[4:6]))
            tz = _dt.timezone(-off if z[0] == "-" else off)
        return _dt.datetime(y, mo, d, h, mi, min(se, 59), us, tzinfo=tz)
    except ValueError:
        raise StacError("%s: %r is not an RFC 3339 date-time" % (what, s)) from None


# -- the model -------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    """One band of an asset: eo:bands / STAC 1.1 bands and raster:bands."""
    name: Optional[str] = None
    common_name: Optional[str] = None
    nodata: Optional[float] = None
    scale: Optional[float] = None
    offset: Optional[float] = None
    data_type: Optional[str] = None


@dataclass(frozen=True)
class Asset:
    """An asset of an item, with what the projection and raster extensions
    say about it (asset fields over item fields)."""
    key: str
    href: str                  #: absolute, unsigned
    item_id: str
    type: Optional[str] = None
    roles: Tuple[str, ...] = ()
    bands: Tuple[Band, ...] = ()
    #: projection extension: a CRS text ("EPSG:32633", WKT2 or PROJ JSON)
    crs: Optional[str] = None
    transform: Optional[Tuple[float, float, float, float, float, float]] = None
    shape: Optional[Tuple[int, int]] = None     #: (height, width)
    proj_bbox: Optional[Tuple[float, float, float, float]] = None
    where: str = ""            #: the document it came from (shown form)

    @property
    def common_names(self) -> Tuple[str, ...]:
        return tuple(b.common_name for b in self.bands if b.common_name)

    @property
    def nodata(self) -> Optional[float]:
        return self.bands[0].nodata if self.bands else None

    @property
    def scale(self) -> Optional[float]:
        return self.bands[0].scale if self.bands else None

    @property
    def offset(self) -> Optional[float]:
        return self.bands[0].offset if self.bands else None

    @property
    def data_type(self) -> Optional[str]:
        return self.bands[0].data_type if self.bands else None

    @property
    def described(self) -> Optional[Described]:
        """Its grid, dtype and bands from the catalog (Href.description's
        fields), or None."""
        return _described(self.crs, self.transform, self.shape,
                          [b.data_type for b in self.bands])

    @property
    def has_grid(self) -> bool:
        """True when the projection extension gives the whole grid (a CRS,
        proj:transform and proj:shape), so no header read is needed."""
        return (self.crs is not None and self.transform is not None
                and self.shape is not None)

    def stac_grid(self) -> Optional[Grid]:
        """The grid the projection extension gives, or None."""
        if not self.has_grid:
            return None
        assert self.transform is not None and self.shape is not None
        try:
            return Grid(_crs(self.crs), self.transform, self.shape[1],
                        self.shape[0])
        except (ValueError, _cogfeed.Error) as e:
            raise StacError("%s: item %r, asset %r: projection fields are "
                            "not a grid: %s" % (self.where, self.item_id,
                                                self.key, e)) from None


#: STAC raster data_type -> the dtype a read gives (cogfeed's names);
#: float16 and "other" are not described (read the header).
_DTYPES = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
           "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
           "float32": "float32", "float64": "float64", "cint16": "complex_int16",
           "cint32": "complex_int32", "cfloat32": "complex64", "cfloat64": "complex128"}


#: What a Loader needs of a file to place it before reading its header:
#: (CRS text, geotransform, width, height, dtype, bands).
Described = Tuple[str, Tuple[float, ...], int, int, str, int]


def _described(crs: Optional[str], transform: Optional[Sequence[float]],
               shape: Optional[Sequence[int]], dtypes: Sequence[Optional[str]]
               ) -> Optional[Described]:
    """An asset's description from its projection fields and its bands'
    raster data_type (all alike), or None when any part is missing."""
    if crs is None or transform is None or shape is None or not dtypes:
        return None
    if len(set(dtypes)) != 1 or dtypes[0] is None:
        return None
    dt = _DTYPES.get(dtypes[0])
    if dt is None or not (shape[0] > 0 and shape[1] > 0):
        return None
    return (crs, tuple(map(float, transform)), int(shape[1]), int(shape[0]), dt,
            len(dtypes))


class _Column:
    """One selected asset of each selected item of the C index: its
    item ids, keys, grid fields and band dtypes, fetched from the index
    once, when a Href of it is first asked for them (so that a selection
    of 100,000 items gives its hrefs without making 100,000
    descriptions)."""
    __slots__ = ("_ix", "_rows", "_ks", "_fields")

    def __init__(self, ix: Any, rows: npt.NDArray[np.int64], ks: npt.NDArray[np.int64]
                 ) -> None:
        self._ix, self._rows, self._ks = ix, rows, ks
        self._fields: Optional[Tuple[Any, ...]] = None

    def at(self, j: int) -> Tuple[str, str, Optional[Described]]:
        if self._fields is None:
            ids, keys, crs, tr, sh, dts = self._ix.grid_fields(self._rows, self._ks)
            self._fields = (ids, keys, crs, tr.tolist(), sh.tolist(), dts)
        ids, keys, crs, tr, sh, dts = self._fields
        t, s = tr[j], sh[j]
        return (ids[j], keys[j],
                _described(crs[j], None if t[0] != t[0] else t, None if s[0] <= 0 else s,
                           dts[j]))


class Href(str):
    """A selected asset's href (what Selection.images(), layers() and
    hrefs() return): a str that also says which item and asset it is and,
    where the asset's projection and raster fields give them, its grid,
    dtype and bands, so that a Loader given it can place the file without
    reading its header, and read that only when a sample first reads the
    file (docs/datasets.md, "The Loader reads a header only when a sample
    reads the file")."""
    __slots__ = ("_src", "_j")
    _src: Union[Tuple[str, str, Optional[Described]], _Column]
    _j: int

    def __new__(cls, text: str, item_id: str, key: str,
                desc: Optional[Described] = None) -> Href:
        h = super().__new__(cls, text)
        h._src, h._j = (item_id, key, desc), 0
        return h

    @classmethod
    def _of(cls, text: str, col: _Column, j: int) -> Href:
        h = str.__new__(cls, text)
        h._src, h._j = col, j
        return h

    def _fields(self) -> Tuple[str, str, Optional[Described]]:
        return self._src.at(self._j) if isinstance(self._src, _Column) else self._src

    @property
    def item_id(self) -> str:
        return self._fields()[0]

    @property
    def key(self) -> str:
        return self._fields()[1]

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Href, (str(self),) + self._fields())

    def description(self) -> Optional[Tuple[Grid, str, int]]:
        """(grid, dtype, bands), or None where the catalog does not give
        all three (the Loader then reads the header when it starts)."""
        d = self._fields()[2]
        if d is None:
            return None
        crs, tr, w, h, dt, n = d
        try:
            return (Grid(_crs(crs), tr, w, h), dt, n)
        except (ValueError, _cogfeed.Error):
            return None   # not a grid: the header says what the file is


_crs_cache: Dict[str, CRS] = {}
_crs_lock = threading.Lock()


def _crs(text: Optional[str]) -> Optional[CRS]:
    if text is None:
        return None
    with _crs_lock:
        c = _crs_cache.get(text)
    if c is None:
        c = _cogfeed.CRS(text)
        with _crs_lock:
            if len(_crs_cache) < 4096:
                _crs_cache[text] = c
    return c


@dataclass(frozen=True)
class Item:
    """A STAC Item: id, dates, cloud cover, footprint and assets."""
    id: str
    assets: Mapping[str, Asset]
    datetime: Optional[_dt.datetime] = None
    start_datetime: Optional[_dt.datetime] = None
    end_datetime: Optional[_dt.datetime] = None
    cloud_cover: Optional[float] = None
    geometry: Optional[Dict[str, Any]] = None
    bbox: Optional[Tuple[float, ...]] = None
    collection: Optional[str] = None
    href: Optional[str] = None        #: where it was read from, if known
    properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def time(self) -> Optional[_dt.datetime]:
        """datetime, else start_datetime."""
        return self.datetime or self.start_datetime


def _where(item_id: Optional[str], where: str, key: Optional[str] = None) -> str:
    s = where
    if item_id is not None:
        s += ": item %r" % item_id
    if key is not None:
        s += ", asset %r" % key
    return s


def _proj(d: Mapping[str, Any], what: str, limits: Limits,
          into: Dict[str, Any]) -> None:
    """The projection extension's fields of d (an item's properties or an
    asset) into `into`; CRS texts that could make PROJ open files are
    refused."""
    crs: Optional[str] = None
    if d.get("proj:code") is not None:
        code = _str(d["proj:code"], what + ": proj:code", 64)
        if not _AUTH_CODE.match(code):
            raise StacError("%s: proj:code %r is not AUTHORITY:CODE" % (what, code))
        crs = code
    elif d.get("proj:epsg") is not None:
        e = d["proj:epsg"]
        if isinstance(e, bool) or not isinstance(e, int) or not 0 < e < 10**7:
            raise StacError("%s: proj:epsg %s is not an EPSG code" % (what, _short(e)))
        crs = "EPSG:%d" % e
    elif d.get("proj:wkt2") is not None:
        w = _str(d["proj:wkt2"], what + ": proj:wkt2", 1 << 16).strip()
        if not re.match(r"^[A-Z][A-Z0-9_]*\s*\[", w):
            raise StacError("%s: proj:wkt2 is not WKT" % what)
        crs = w
    elif d.get("proj:projjson") is not None:
        pj = d["proj:projjson"]
        if not isinstance(pj, dict):
            raise StacError("%s: proj:projjson is not an object" % what)
        crs = json.dumps(pj)
    if crs is not None:
        into["crs"] = crs
    if d.get("proj:transform") is not None:
        t = d["proj:transform"]
        if not isinstance(t, list) or len(t) not in (6, 9):
            raise StacError("%s: proj:transform needs 6 or 9 numbers, not %s"
                            % (what, _short(t)))
        v = [_num(x, what + ": proj:transform") for x in t]
        if len(t) == 9 and v[6:] != [0.0, 0.0, 1.0]:
            raise StacError("%s: proj:transform's last row is not 0, 0, 1" % what)
        into["transform"] = tuple(v[:6])
    if d.get("proj:shape") is not None:
        s = d["proj:shape"]
        if (not isinstance(s, list) or len(s) != 2 or
                any(isinstance(x, bool) or not isinstance(x, int) for x in s)):
            raise StacError("%s: proj:shape needs two integers [rows, "
                            "columns], not %s" % (what, _short(s)))
        if not all(0 < x <= limits.max_side for x in s):
            raise StacError("%s: proj:shape %s out of range 1..%d"
                            % (what, s, limits.max_side))
        into["shape"] = (s[0], s[1])
    if d.get("proj:bbox") is not None:
        b = d["proj:bbox"]
        if not isinstance(b, list) or len(b) not in (4, 6):
            raise StacError("%s: proj:bbox needs 4 numbers" % what)
        v = [_num(x, what + ": proj:bbox") for x in b]
        into["proj_bbox"] = (v[0], v[1], v[-3], v[-2]) if len(v) == 6 else tuple(v)


def _bands(a: Mapping[str, Any], what: str, limits: Limits) -> Tuple[Band, ...]:
    """eo:bands + raster:bands (STAC 1.0, two parallel lists) or bands
    (STAC 1.1, one list with eo:common_name, nodata, data_type...)."""
    def lst(key: str) -> List[Any]:
        v = a.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise StacError("%s: %s is not a list" % (what, key))
        if len(v) > limits.max_bands:
            raise StacError("%s: %s has %d entries (at most %d)"
                            % (what, key, len(v), limits.max_bands))
        for i, b in enumerate(v):
            if not isinstance(b, dict):
                raise StacError("%s: %s[%d] is not an object" % (what, key, i))
        return v

    if "eo:bands" not in a and "raster:bands" not in a and "bands" not in a:
        return ()
    eo, raster, v11 = lst("eo:bands"), lst("raster:bands"), lst("bands")
    n = max(len(eo), len(raster), len(v11))
    out = []
    for i in range(n):
        e = eo[i] if i < len(eo) else {}
        r = raster[i] if i < len(raster) else {}
        b = v11[i] if i < len(v11) else {}
        w = "%s: band %d" % (what, i)

        def pick(*cands: Tuple[Mapping[str, Any], str]) -> Any:
            for m, k in cands:
                if m.get(k) is not None:
                    return m[k]
            return None

        name = pick((b, "name"), (e, "name"))
        cn = pick((b, "eo:common_name"), (e, "common_name"))
        nd = pick((b, "nodata"), (r, "nodata"), (a, "nodata"))
        sc = pick((b, "raster:scale"), (r, "scale"), (a, "raster:scale"))
        of = pick((b, "raster:offset"), (r, "offset"), (a, "raster:offset"))
        dt = pick((b, "data_type"), (r, "data_type"), (a, "data_type"))
        nodata: Optional[float] = None
        if nd is not None:
            if isinstance(nd, str) and nd in ("nan", "inf", "-inf"):
                nodata = float(nd)
            else:
                nodata = _num(nd, w + ": nodata")
        out.append(Band(
            name=None if name is None else _str(name, w + ": name", 256),
            common_name=None if cn is None else _str(cn, w + ": common_name", 64),
            nodata=nodata,
            scale=None if sc is None else _num(sc, w + ": scale"),
            offset=None if of is None else _num(of, w + ": offset"),
            data_type=None if dt is None else _str(dt, w + ": data_type", 32)))
    return tuple(out)


def item_from_dict(d: Mapping[str, Any], *, href: Optional[str] = None,
                   where: Optional[str] = None,
                   limits: Limits = Limits()) -> Item:
    """An Item from its parsed JSON.  href: where it was read from (relative
    asset hrefs are resolved against it, else against its absolute self
    link); where: how errors name the document."""
    wh = where or (_shown(href) if href else "<dict>")
    if d.get("type") != "Feature":
        raise StacError("%s: not a STAC Item (type %s, not \"Feature\")"
                        % (wh, _short(d.get("type"))))
    iid = d.get("id")
    if not isinstance(iid, str) or not iid or len(iid) > 1024:
        raise StacError("%s: an item needs a string id, not %s" % (wh, _short(iid)))
    w = _where(iid, wh)
    props = d.get("properties")
    if not isinstance(props, dict):
        raise StacError("%s: properties is not an object" % w)
    links = d.get("links", [])
    if not isinstance(links, list):
        raise StacError("%s: links is not a list" % w)
    base = href
    if base is None:
        for ln in links[:limits.max_links]:
            if (isinstance(ln, dict) and ln.get("rel") == "self" and
                    isinstance(ln.get("href"), str) and
                    (_scheme(ln["href"]) or ln["href"].startswith("/"))):
                base = ln["href"]
                break
    item_proj: Dict[str, Any] = {}
    _proj(props, w, limits, item_proj)
    assets_d = d.get("assets")
    if not isinstance(assets_d, dict):
        raise StacError("%s: assets is not an object" % w)
    if len(assets_d) > limits.max_assets:
        raise StacError("%s: %d assets (at most %d)" % (w, len(assets_d),
                                                        limits.max_assets))
    assets: Dict[str, Asset] = {}
    for key, a in assets_d.items():
        aw = _where(iid, wh, key)
        if not isinstance(a, dict):
            raise StacError("%s: not an object" % aw)
        h = a.get("href")
        if not isinstance(h, str) or not h:
            raise StacError("%s: no href" % aw)
        h = _str(h, aw + ": href", 8192)
        absolute = _resolve(base, h)
        if not _scheme(absolute) and not os.path.isabs(absolute):
            raise StacError("%s: relative href %r and no location to resolve "
                            "it against (no absolute self link)" % (aw, _shown(h)))
        _check_target(base or absolute, absolute, aw)
        pj = dict(item_proj)
        _proj(a, aw, limits, pj)
        roles = a.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise StacError("%s: roles is not a list of strings" % aw)
        t = a.get("type")
        assets[key] = Asset(
            key=key, href=absolute, item_id=iid,
            type=None if t is None else _str(t, aw + ": type", 256),
            roles=tuple(roles[:64]), bands=_bands(a, aw, limits),
            crs=pj.get("crs"), transform=pj.get("transform"),
            shape=pj.get("shape"), proj_bbox=pj.get("proj_bbox"), where=wh)
    cc = props.get("eo:cloud_cover")
    geom = d.get("geometry")
    if geom is not None and not isinstance(geom, dict):
        raise StacError("%s: geometry is not an object" % w)
    bbox = d.get("bbox")
    bb: Optional[Tuple[float, ...]] = None
    if bbox is not None:
        if not isinstance(bbox, list) or len(bbox) not in (4, 6):
            raise StacError("%s: bbox needs 4 or 6 numbers" % w)
        bb = tuple(_num(x, w + ": bbox") for x in bbox)
    col = d.get("collection")
    it = Item(
        id=iid, assets=assets,
        datetime=_time(props.get("datetime"), w + ": datetime"),
        start_datetime=_time(props.get("start_datetime"), w + ": start_datetime"),
        end_datetime=_time(props.get("end_datetime"), w + ": end_datetime"),
        cloud_cover=None if cc is None else _num(cc, w + ": eo:cloud_cover"),
        geometry=geom, bbox=bb,
        collection=col if isinstance(col, str) else None,
        href=href, properties=props)
    if it.time is None:
        raise StacError("%s: neither datetime nor start_datetime" % w)
    return it


# -- signing ---------------------------------------------------------------


def _expiry(url: str) -> Optional[float]:
    """The expiry a signed URL's query states: Azure SAS se=, S3 SigV4
    X-Amz-Date + X-Amz-Expires, Cloud Storage V4 X-Goog-Date +
    X-Goog-Expires, SigV2 / CloudFront Expires=; None."""
    q = parse_qs(url.split("#", 1)[0].partition("?")[2])
    try:
        if "se" in q:
            se = q["se"][0]
            if re.match(r"^\d{4}-\d{2}-\d{2}$", se):   # a date alone: its start
                se += "T00:00:00Z"
            t = _time(se, "se")
            return t.timestamp() if t else None
        for p in ("X-Amz-", "X-Goog-"):   # SigV4, and Cloud Storage's V4 signing
            if p + "Date" in q and p + "Expires" in q:
                t0 = _dt.datetime.strptime(q[p + "Date"][0], "%Y%m%dT%H%M%SZ")
                return (t0.replace(tzinfo=_dt.timezone.utc).timestamp() +
                        float(q[p + "Expires"][0]))
        if "Expires" in q:
            return float(q["Expires"][0])
    except (ValueError, StacError):
        return None
    return None


def _sign_once(sign: SignFunction, href: str) -> Tuple[str, Optional[float]]:
    """sign(href) as (signed href, expiry as a POSIX time or None: never),
    the expiry from what sign returns with the href, else from the signed
    URL's query; refused when the signed href points elsewhere."""
    r = sign(href)
    exp: Optional[float]
    if isinstance(r, tuple):
        signed, exp = str(r[0]), None if r[1] is None else float(r[1])
    elif isinstance(r, str):
        signed, exp = r, _expiry(r)
    else:
        raise TypeError("sign(%s) returned %s, not a str or (str, expiry)"
                        % (_shown(href), type(r).__name__))
    # The signer is the user's: it may change the query, never where
    # the href points (a signature for another host is refused).
    if _shown(signed) != _shown(href):
        raise StacError("sign(%s) returned a href to %s: a signer may "
                        "add a query, not move the href"
                        % (_shown(href), _shown(signed)))
    return signed, exp


class Signer:
    """sign= made lazy: an href is signed when it is first handed out,
    and signed again once its signature is within `margin_s` of expiring.
    The expiry is what the sign function returns with the href (a tuple
    (href, POSIX time)), else what the signed URL's query says (Azure SAS
    ``se=``, S3 ``X-Amz-Date`` + ``X-Amz-Expires``, Cloud Storage
    ``X-Goog-Date`` + ``X-Goog-Expires``, ``Expires=``), else never.  The signed hrefs live in memory only; cogfeed's header cache
    files them without the signature (lib/pipeline/hc_key.c).  A Loader
    given one signs its files' hrefs in its io (cf_io_options.sign):
    when it opens them and again while it runs, before they expire."""

    def __init__(self, sign: SignFunction, margin_s: float = 300.0) -> None:
        if not callable(sign):
            raise TypeError("sign must be a callable href -> signed href")
        self._sign = sign
        self.margin_s = float(margin_s)
        self._cache: Dict[str, Tuple[str, Optional[float]]] = {}
        self._lock = threading.Lock()
        self.calls = 0

    def signed(self, href: str) -> Tuple[str, Optional[float]]:
        """(href signed, its expiry as a POSIX time or None: never); the
        signature kept until it is within margin_s of expiring."""
        now = time.time()
        with self._lock:
            hit = self._cache.get(href)
        if hit is not None and (hit[1] is None or hit[1] - self.margin_s > now):
            return hit
        out = _sign_once(self._sign, href)
        with self._lock:
            self.calls += 1
            self._cache[href] = out
        return out

    def __call__(self, href: str) -> str:
        return self.signed(href)[0]

    def __getstate__(self) -> Dict[str, Any]:
        # To DataLoader workers and other processes: the function and the
        # margin; signatures are made afresh there (a lock cannot travel).
        return {"sign": self._sign, "margin_s": self.margin_s}

    def __setstate__(self, st: Dict[str, Any]) -> None:
        self.__init__(st["sign"], st["margin_s"])  # type: ignore[misc]


def _sign_for_io(sign: Any, url: str) -> Tuple[str, float]:
    """The C io's signing function (cf_sign_fn, python/_cogfeed.c):
    url signed by `sign` (a Signer or a sign function) and its expiry
    (0.0: never)."""
    signed, exp = sign.signed(url) if isinstance(sign, Signer) else _sign_once(sign, url)
    return signed, 0.0 if exp is None else exp


# -- reading documents -----------------------------------------------------


class _Index:
    """The items cogfeed's C index (cf_stac) read from JSON documents: a
    few hundred bytes an item, searched and picked from in C; an Item
    object is made only when one is asked for (then as item_from_dict
    makes it from the same JSON)."""

    def __init__(self) -> None:
        self.ix = _cogfeed._StacIndex()
        #: (href, shown, first row) of each document read into it, by its
        #: number (first row: of a GeoParquet batch; None for JSON)
        self.docs: List[Tuple[str, str, Optional[int]]] = []
        self._made: Dict[int, Item] = {}
        self._cols: Optional[Tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = None

    def __len__(self) -> int:
        return int(self.ix.count())

    def columns(self) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """(time in UTC microseconds, eo:cloud_cover or NaN) of every item."""
        if self._cols is None or len(self._cols[0]) != len(self):
            self._cols = self.ix.columns()
        return self._cols

    def item(self, i: int) -> Item:
        it = self._made.get(i)
        if it is not None:
            return it
        (iid, col, props, geom, self_href, (dt, sdt, edt), cc, bbox, doc, feat,
         assets) = self.ix.item(i)
        href, shown, row = self.docs[doc]
        wh = (shown if feat < 0 else "%s: features[%d]" % (shown, feat) if row is None
              else "%s: row %d" % (shown, row + feat))
        w = _where(iid, wh)
        base = href if href is not None else self_href
        made: Dict[str, Asset] = {}
        for (key, h, rel, t, roles, crs, tr, sh, pb, bands) in assets:
            made[key] = Asset(key=key, href=_resolve(base, h) if rel else h, item_id=iid,
                              type=t, roles=roles, bands=tuple(Band(*b) for b in bands),
                              crs=crs, transform=tr, shape=sh, proj_bbox=pb, where=wh)
        it = Item(id=iid, assets=made,
                  datetime=_time(dt, w + ": datetime"),
                  start_datetime=_time(sdt, w + ": start_datetime"),
                  end_datetime=_time(edt, w + ": end_datetime"),
                  cloud_cover=cc, geometry=None if geom is None else json.loads(geom),
                  bbox=bbox, collection=col, href=href, properties=json.loads(props))
        if len(self._made) >= 4096:   # a bound, not a cache of every item
            self._made.clear()
        self._made[i] = it
        return it

    def href(self, i: int, h: str, rel: bool) -> str:
        """Asset href h of item i, joined with its base when relative."""
        if not rel:
            return h
        doc = int(self.ix.item_doc(i))
        return _resolve(self.docs[doc][0], h)


class _Walk:
    def __init__(self, io: Optional[IO], limits: Limits) -> None:
        self.io = io if io is not None else _cogfeed.default_io()
        self.limits = limits
        self.fetched = 0
        self.seen: Set[str] = set()
        self.index = _Index()
        #: in walk order: runs (start, end) of the index's items, and items
        #: read by the reference (item_from_dict)
        self.parts: List[Union[Tuple[int, int], Item]] = []
        self.py_items = 0
        self.ids: Set[Tuple[Optional[str], str]] = set()

    def count(self) -> int:
        return len(self.index) + self.py_items

    def index_limits(self) -> Tuple[int, int, int, int, int, int]:
        """The limits for the C index (its max_items: what the items read
        by the reference leave)."""
        L = self.limits
        return (max(L.max_items - self.py_items, 0), L.max_assets, L.max_bands,
                L.max_links, L.max_nesting, L.max_side)

    def read(self, href: str, path: Tuple[str, ...]) -> None:
        """Fetch the document at href and walk it: its items into the C
        index when it is an Item or ItemCollection the index takes, else
        parsed here (catalogs, and documents the index leaves to the
        reference, which names what is wrong with them)."""
        if self.fetched >= self.limits.max_documents:
            raise StacError("%s: more than %d documents in one catalog walk"
                            % (_shown(href), self.limits.max_documents))
        self.fetched += 1
        L = self.limits
        lim = self.index_limits()
        n0 = len(self.index)
        data: Optional[bytes] = None
        held: Optional[bool] = None
        try:
            if not _scheme(href):   # a local file: parsed from a memory map
                held = bool(self.index.ix.add_file(href, href, lim, L.max_bytes))
            else:
                data = self.io.get(href, max_bytes=L.max_bytes)
                held = bool(self.index.ix.add(data, href, lim))
        except _cogfeed.Error as e:
            # Refused by the index (read below by the reference), or not
            # readable from the disk (the io then says why, as it would).
            if data is not None and not isinstance(e, _cogfeed.UnsupportedError):
                raise
            log.debug("%s: read by the reference: %s", _shown(href), e)
        if held:
            self.index.docs.append((href, _shown(href), None))
            if len(self.index) > n0:
                self.parts.append((n0, len(self.index)))
            return
        if data is None:
            data = self.io.get(href, max_bytes=L.max_bytes)
        self.document(_parse(data, _shown(href), L), href, path)

    def add(self, it: Item) -> None:
        if self.count() >= self.limits.max_items:
            raise StacError("%s: more than %d items" % (
                _where(it.id, _shown(it.href) if it.href else "<dict>"),
                self.limits.max_items))
        self.parts.append(it)
        self.py_items += 1

    def result(self) -> Items:
        if not self.py_items:
            return Items._indexed(self.index, np.arange(len(self.index), dtype=np.int64))
        out: List[Item] = []
        for p in self.parts:
            if isinstance(p, Item):
                out.append(p)
            else:
                out.extend(self.index.item(i) for i in range(p[0], p[1]))
        return Items(out)

    def document(self, doc: Dict[str, Any], href: Optional[str],
                 path: Tuple[str, ...]) -> None:
        """Walk one parsed document read from href (None: given as a
        dict); path: the hrefs of its ancestors (loop detection)."""
        wh = _shown(href) if href else "<dict>"
        t = doc.get("type")
        if t == "Feature":
            self.add(item_from_dict(doc, href=href, where=wh, limits=self.limits))
            return
        if t == "FeatureCollection":
            feats = doc.get("features")
            if not isinstance(feats, list):
                raise StacError("%s: FeatureCollection without a features list" % wh)
            if self.count() + len(feats) > self.limits.max_items:
                raise StacError("%s: %d features, more than the %d items allowed"
                                % (wh, len(feats), self.limits.max_items))
            for i, f in enumerate(feats):
                if not isinstance(f, dict):
                    raise StacError("%s: features[%d] is not an object" % (wh, i))
                self.add(item_from_dict(f, href=href, where="%s: features[%d]"
                                        % (wh, i), limits=self.limits))
            return
        if t in ("Catalog", "Collection"):
            self.catalog(doc, href, path)
            return
        raise StacError("%s: not a STAC Item, ItemCollection, Collection or "
                        "Catalog (type %s)" % (wh, _short(t)))

    def catalog(self, doc: Dict[str, Any], href: Optional[str],
                path: Tuple[str, ...]) -> None:
        wh = _shown(href) if href else "<dict>"
        if len(path) > self.limits.max_depth:
            raise StacError("%s: catalog nested deeper than %d levels"
                            % (wh, self.limits.max_depth))
        links = doc.get("links", [])
        if not isinstance(links, list):
            raise StacError("%s: links is not a list" % wh)
        if len(links) > self.limits.max_links:
            raise StacError("%s: %d links (at most %d)"
                            % (wh, len(links), self.limits.max_links))
        base = href
        if base is None:
            for ln in links:
                if (isinstance(ln, dict) and ln.get("rel") == "self" and
                        isinstance(ln.get("href"), str) and _scheme(ln["href"])):
                    base = ln["href"]
        for i, ln in enumerate(links):
            if not isinstance(ln, dict):
                raise StacError("%s: links[%d] is not an object" % (wh, i))
            rel = ln.get("rel")
            if rel not in ("item", "child"):
                continue
            h = ln.get("href")
            if not isinstance(h, str):
                raise StacError("%s: links[%d] (%s) has no href" % (wh, i, rel))
            target = _resolve(base, _str(h, "%s: links[%d]" % (wh, i), 8192))
            if not _scheme(target) and not os.path.isabs(target):
                raise StacError("%s: relative link %r and no location to "
                                "resolve it against" % (wh, _shown(h)))
            _check_target(base or target, target, "%s: links[%d]" % (wh, i))
            key = target.split("#", 1)[0]
            if key in path or key == (href or ""):
                raise StacError("%s: link loop: links[%d] (%s) leads back to %s"
                                % (wh, i, rel, _shown(target)))
            if key in self.seen:
                continue   # reached twice (not a loop): read once
            self.seen.add(key)
            self.read(target, path + ((href or ""),))


def _to_dicts(obj: Any) -> Optional[List[Dict[str, Any]]]:
    """pystac / pystac-client objects as dicts, else None."""
    if hasattr(obj, "items_as_dicts") and callable(obj.items_as_dicts):
        return [cast(Dict[str, Any], d) for d in obj.items_as_dicts()]
    if hasattr(obj, "item_collection") and callable(obj.item_collection) and \
            not hasattr(obj, "to_dict"):
        return cast(List[Dict[str, Any]], obj.item_collection().to_dict()["features"])
    if hasattr(obj, "get_all_items") or hasattr(obj, "get_items"):
        # A pystac Catalog / Collection in memory: its items, resolved.
        get = getattr(obj, "get_items", None) or getattr(obj, "get_all_items")
        try:
            its = list(get(recursive=True))
        except TypeError:
            its = list(get())
        return [cast(Dict[str, Any], i.to_dict(transform_hrefs=True)) for i in its]
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        d = obj.to_dict()
        if isinstance(d, dict):
            return [d]
    return None


def items(source: Source, *, io: Optional[IO] = None,
          limits: Limits = Limits()) -> Items:
    """Read STAC items from source: a path or URL (file://, http(s)://,
    s3://, az://, gs://) of an Item, an ItemCollection, a Collection or a
    Catalog (whose item and child links are followed, relative to the
    catalog's own location), or of a STAC GeoParquet table (a name ending
    in .parquet / .geoparquet; needs pyarrow); a parsed document (dict); a pystac Item,
    ItemCollection, Catalog or Collection, or a pystac-client ItemSearch;
    or a list of any of these.  io: the cogfeed.IO that reads the JSON
    (default: cogfeed.default_io()).  Raises StacError naming the
    document, item id and asset key for what cannot be used, and
    cogfeed.Error (NotFoundError, LimitError...) for what cannot be read."""
    w = _Walk(io, limits)
    srcs = list(source) if isinstance(source, (list, tuple)) else [source]
    for s in srcs:
        if isinstance(s, (str, os.PathLike)):
            href = os.fspath(s)
            if not _scheme(href):
                href = os.path.abspath(href)
            _check_target("", href, "items()")
            w.seen.add(href)
            if _PARQUET.search(href.split("#", 1)[0].split("?", 1)[0]):
                _geoparquet(w, href)
            else:
                w.read(href, ())
        elif isinstance(s, dict):
            w.document(cast(Dict[str, Any], s), None, ())
        else:
            ds = _to_dicts(s)
            if ds is None:
                raise TypeError("items(): a path, URL, dict, pystac or "
                                "pystac-client object is needed, not %s"
                                % type(s).__name__)
            for d in ds:
                w.document(d, None, ())
    return w.result()


# -- STAC GeoParquet --------------------------------------------------------

_PARQUET = re.compile(r"\.(geo)?parquet$", re.IGNORECASE)
_ITEM_COLUMNS = ("type", "stac_version", "stac_extensions", "id", "geometry",
                 "bbox", "links", "assets", "collection")


def _wkb(b: bytes, where: str) -> Dict[str, Any]:
    """GeoJSON of a WKB Point, Polygon or MultiPolygon (2D, or with Z / M
    dropped), the footprint types STAC items have."""
    import struct
    pos = 0

    def take(fmt: str) -> Tuple[Any, ...]:
        nonlocal pos
        n = struct.calcsize(fmt)
        if pos + n > len(b):
            raise StacError("%s: geometry WKB cut short" % where)
        v = struct.unpack_from(fmt, b, pos)
        pos += n
        return v

    def geom(depth: int) -> Tuple[str, Any]:
        if depth > 2:
            raise StacError("%s: geometry WKB nested too deep" % where)
        (order,) = take("B")
        e = "<" if order == 1 else ">"
        (t,) = take(e + "I")
        dims = 2
        if t & 0x80000000 or t & 0x40000000:      # EWKB Z / M flags
            dims += bool(t & 0x80000000) + bool(t & 0x40000000)
            t &= 0xFFFF
        elif t >= 1000:                           # ISO Z (1000s), M, ZM
            dims += 1 if t // 1000 in (1, 2) else 2
            t %= 1000
        if t & 0x20000000 or t & 0xFFFF0000:
            raise StacError("%s: geometry WKB with an SRID or unknown type" % where)

        def point() -> List[float]:
            v = take(e + "d" * dims)
            return [float(v[0]), float(v[1])]

        def count(limit: int) -> int:
            (n,) = take(e + "I")
            if n > limit or n * 16 > len(b) - pos:
                raise StacError("%s: geometry WKB count %d beyond its bytes"
                                % (where, n))
            return int(n)

        def ring() -> List[List[float]]:
            return [point() for _ in range(count(1 << 24))]

        if t == 1:
            return "Point", point()
        if t == 3:
            return "Polygon", [ring() for _ in range(count(1 << 16))]
        if t == 6 and depth == 0:
            polys = []
            for _ in range(count(1 << 16)):
                k, c = geom(depth + 1)
                if k != "Polygon":
                    raise StacError("%s: MultiPolygon holding a %s" % (where, k))
                polys.append(c)
            return "MultiPolygon", polys
        raise StacError("%s: geometry WKB type %d not read (Point, Polygon, "
                        "MultiPolygon)" % (where, t))

    kind, coords = geom(0)
    return {"type": kind, "coordinates": coords}


def _plain(v: Any) -> Any:
    """A row value as JSON would hold it: nulls of the table's union
    schema dropped, dates as RFC 3339 text."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=_dt.timezone.utc)
        return v.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")
    return v


def _geoparquet(w: _Walk, href: str) -> None:
    """Items of a STAC GeoParquet file (stac-geoparquet's layout: one row
    per item; id, geometry as WKB, bbox, links, assets as columns, the
    properties as the other columns), read through the io and decoded by
    pyarrow (the optional extra)."""
    wh = _shown(href)
    import importlib
    try:   # Any-typed: pyarrow is an optional extra, without stubs
        pa: Any = importlib.import_module("pyarrow")
        pq: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise StacError("%s: reading STAC GeoParquet needs pyarrow (pip "
                        "install cogfeed[stac])" % wh) from None
    data = w.io.get(href, max_bytes=w.limits.max_table_bytes)
    if data[:4] != b"PAR1" or data[-4:] != b"PAR1":
        raise StacError("%s: not a Parquet file" % wh)
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        md = pf.metadata
        if md.num_rows + w.count() > w.limits.max_items:
            raise StacError("%s: %d rows, more than the %d items allowed"
                            % (wh, md.num_rows, w.limits.max_items))
        # Row groups are decoded one at a time: the largest is what a
        # hostile table (a decompression bomb) could make cogfeed hold.
        decoded = max((md.row_group(i).total_byte_size
                       for i in range(md.num_row_groups)), default=0)
        if decoded > w.limits.max_table_bytes:
            raise StacError("%s: a row group of %d bytes once decoded, more "
                            "than the %d allowed (max_table_bytes)"
                            % (wh, decoded, w.limits.max_table_bytes))
        names = set(pf.schema_arrow.names)
        if "id" not in names or "assets" not in names:
            raise StacError("%s: not a STAC GeoParquet table (no id or assets "
                            "column)" % wh)
        # Batch by batch into the index (each row as its item's JSON, in
        # C); a batch the index refuses is read here, row by row, by the
        # reference, which names what is wrong.
        start = 0
        for batch in pf.iter_batches(batch_size=8192):
            n0 = len(w.index)
            try:
                w.index.ix.add_arrow(batch, href, w.index_limits())
            except _cogfeed.UnsupportedError as e:
                log.debug("%s: rows %d..: read by the reference: %s", wh, start, e)
                for i, r in enumerate(batch.to_pylist()):
                    w.add(_row_item(r, href, "%s: row %d" % (wh, start + i), w.limits))
            else:
                w.index.docs.append((href, wh, start))
                w.parts.append((n0, len(w.index)))
            start += batch.num_rows
    except StacError:
        raise
    except (pa.ArrowException, OSError, ValueError) as e:
        raise StacError("%s: unreadable Parquet: %s" % (wh, e)) from None


def _row_item(r: Dict[str, Any], href: str, rw: str, limits: Limits) -> Item:
    """The item of one GeoParquet row (pyarrow's to_pylist form), by the
    reference."""
    g = r.get("geometry")
    bbox = r.get("bbox")
    if isinstance(bbox, dict):
        bbox = [bbox.get(k) for k in ("xmin", "ymin", "xmax", "ymax")]
    d = {
        "type": "Feature", "id": r.get("id"),
        "geometry": _wkb(g, rw) if isinstance(g, bytes) else None,
        "bbox": bbox, "links": _plain(r.get("links") or []),
        "assets": _plain(r.get("assets") or {}),
        "collection": r.get("collection"),
        "properties": _plain({k: v for k, v in r.items()
                              if k not in _ITEM_COLUMNS}),
    }
    return item_from_dict(d, href=href, where=rw, limits=limits)


# -- selection and the Loader's inputs -------------------------------------


def _bbox_parts(b: Sequence[float]) -> List[Tuple[float, float, float, float]]:
    """A longitude / latitude bbox (2D, or the 2D part of a 3D one) as
    boxes that do not cross the antimeridian."""
    v = [float(x) for x in b]
    if len(v) == 6:
        v = [v[0], v[1], v[3], v[4]]
    if len(v) != 4 or not all(math.isfinite(x) for x in v) or v[1] > v[3]:
        raise ValueError("bbox: (west, south, east, north), not %r" % (list(b),))
    w, s_, e, n = v
    if w > e:  # across the antimeridian
        return [(w, s_, 180.0, n), (-180.0, s_, e, n)]
    return [(w, s_, e, n)]


def _item_meets(it: Item, box: List[Tuple[float, float, float, float]]) -> bool:
    """Whether the item's bbox meets box; an item without one, or with
    one that is no bbox (south above north), does not."""
    try:
        return it.bbox is not None and _bbox_meets(box, _bbox_parts(it.bbox))
    except ValueError:
        return False


def _bbox_meets(a: List[Tuple[float, float, float, float]],
                b: List[Tuple[float, float, float, float]]) -> bool:
    return any(p[0] <= q[2] and q[0] <= p[2] and p[1] <= q[3] and q[1] <= p[3]
               for p in a for q in b)


_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


def _instant(v: Any, end: bool) -> Optional[_dt.datetime]:
    """One end of a datetime interval: None / ".." / "" (open), a datetime
    (UTC when naive), an RFC 3339 string, or a date (its first or, as the
    end, its last instant, UTC)."""
    if v is None or v in ("..", ""):
        return None
    if isinstance(v, _dt.datetime):
        return v if v.tzinfo else v.replace(tzinfo=_dt.timezone.utc)
    if isinstance(v, _dt.date):
        v = v.isoformat()
    m = _DATE.match(str(v))
    if m:
        d = _dt.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)),
                         tzinfo=_dt.timezone.utc)
        return d + _dt.timedelta(days=1, microseconds=-1) if end else d
    return _time(v, "datetime")


def _interval(v: Any) -> Tuple[Optional[_dt.datetime], Optional[_dt.datetime]]:
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError("datetime: a (start, end) pair")
        lo, hi = _instant(v[0], False), _instant(v[1], True)
    elif isinstance(v, str) and "/" in v:
        a, b = v.split("/", 1)
        lo, hi = _instant(a, False), _instant(b, True)
    else:
        lo, hi = _instant(v, False), _instant(v, True)
    if lo is not None and hi is not None and lo > hi:
        raise ValueError("datetime: the interval ends before it starts")
    return lo, hi


def _meets_time(it: Item, lo: Optional[_dt.datetime], hi: Optional[_dt.datetime]) -> bool:
    """Whether the item's [start_datetime or datetime, end_datetime or
    datetime] meets [lo, hi] (None: open), as a STAC API's search has it."""
    a = it.start_datetime or it.datetime
    b = it.end_datetime or it.datetime
    return not (a is None or b is None or (hi is not None and a > hi) or
                (lo is not None and b < lo))


def _us(t: _dt.datetime) -> int:
    """An aware datetime as UTC microseconds since 1970 (exact)."""
    return (t - _EPOCH) // _dt.timedelta(microseconds=1)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


class Items(Sequence[Item]):
    """The items read (in order); select() picks their assets.

    Items read from JSON documents live in cogfeed's C index (a few
    hundred bytes an item): search(), sorted() and select() run there,
    and an Item object is made when one is asked for."""

    def __init__(self, items: Sequence[Item]) -> None:
        self._items: Optional[List[Item]] = list(items)
        self._idx: Optional[_Index] = None
        self._rows: npt.NDArray[np.int64] = np.zeros(0, np.int64)

    @classmethod
    def _indexed(cls, idx: _Index, rows: npt.NDArray[np.int64]) -> Items:
        out = cls.__new__(cls)
        out._items, out._idx, out._rows = None, idx, rows
        return out

    def _sub(self, order: Union[Sequence[int], npt.NDArray[np.int64]]) -> Items:
        """These items at positions `order` (in that order)."""
        if self._idx is not None:
            return Items._indexed(self._idx, self._rows[np.asarray(order, dtype=np.int64)])
        assert self._items is not None
        return Items([self._items[i] for i in order])

    @overload
    def __getitem__(self, i: int) -> Item: ...
    @overload
    def __getitem__(self, i: slice) -> Items: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[Item, Items]:
        if self._idx is not None:
            if isinstance(i, slice):
                return Items._indexed(self._idx, self._rows[i])
            return self._idx.item(int(self._rows[i]))
        assert self._items is not None
        if isinstance(i, slice):
            return Items(self._items[i])
        return self._items[i]

    def __len__(self) -> int:
        return len(self._rows) if self._idx is not None else len(self._items or ())

    def __iter__(self) -> Iterator[Item]:
        if self._idx is not None:
            idx = self._idx
            return (idx.item(int(r)) for r in self._rows)
        return iter(self._items or ())

    def __repr__(self) -> str:
        return "<cogfeed.stac.Items: %d items>" % len(self)

    def __reduce__(self) -> Tuple[Any, ...]:
        # The index lives in C: a pickle (DataLoader workers, multiprocessing)
        # carries the Item objects, as a list of them always did.
        return (Items, (list(self),))

    def filter(self, predicate: Callable[[Item], bool]) -> Items:
        return self._sub([k for k, it in enumerate(self) if predicate(it)])

    def search(self, bbox: Optional[Sequence[float]] = None,
               datetime: Union[str, Tuple[Any, Any], _dt.datetime, None] = None, *,
               max_cloud_cover: Optional[float] = None) -> Items:
        """The items a STAC API search with these parameters would give
        (in this order): ``bbox`` (west, south, east, north) in longitude /
        latitude, meeting the item's bbox (west > east: across the
        antimeridian, for both); ``datetime`` an RFC 3339 instant, an
        interval "start/end" with ".." for an open end (a date alone is its
        whole day, UTC), or a (start, end) pair of datetimes or strings
        (None: open), meeting the item's [start_datetime, end_datetime] or
        its datetime; ``max_cloud_cover``: eo:cloud_cover at most this
        (items without it left out, as a STAC API's query does).  Items
        without a bbox are left out by a bbox (their footprint is not
        known).  Items in the C index are searched there (a packed Hilbert
        R-tree of their bboxes, then dates and cloud cover)."""
        lo, hi = _interval(datetime) if datetime is not None else (None, None)
        box = _bbox_parts(bbox) if bbox is not None else None
        if self._idx is not None:
            mc = None if max_cloud_cover is None else float(max_cloud_cover)
            if mc is not None and math.isnan(mc):
                mc = math.inf   # as the comparisons below: every item with one
            m = self._idx.ix.match(box or [], None if lo is None else _us(lo),
                                   None if hi is None else _us(hi), mc)
            return Items._indexed(self._idx, self._rows[m[self._rows].astype(bool)])
        out = []
        for k, it in enumerate(self):
            if max_cloud_cover is not None and (it.cloud_cover is None or
                                                it.cloud_cover > max_cloud_cover):
                continue
            if box is not None and not _item_meets(it, box):
                continue
            if (lo is not None or hi is not None) and not _meets_time(it, lo, hi):
                continue
            out.append(k)
        return self._sub(out)

    def sorted(self, by: Union[str, Callable[[Item], Any]] = "recent") -> Items:
        """The items in a mosaic's order (the first item with data at a
        pixel gives it: Loader(mosaic=True)): "recent" (newest ``time``
        first), "clear" (lowest ``eo:cloud_cover`` first, items without
        it last; ties newest first), or a key function (ascending).  The
        sort is stable."""
        if callable(by):
            keys = [by(it) for it in self]
            return self._sub(sorted(range(len(keys)), key=keys.__getitem__))
        if by not in ("recent", "clear"):
            raise ValueError("sorted: by is 'recent', 'clear' or a key function, "
                             "not %r" % (by,))
        if self._idx is not None:
            when_all, cloud_all = self._idx.columns()
            when = when_all[self._rows]
        else:
            its = list(self)
            when = np.array([_us(i.time) if i.time else np.iinfo(np.int64).min
                             for i in its], np.int64)
            cloud_all = np.array([np.nan if i.cloud_cover is None else i.cloud_cover
                                  for i in its], np.float64)
        # Stable sorts, as Python's sorted(reverse=True) keeps ties in order
        # (an item without a time, the int64 minimum, goes last).
        lowest = np.iinfo(np.int64)
        order = np.argsort(np.where(when == lowest.min, lowest.max, -when), kind="stable")
        if by == "clear":
            cc = (cloud_all[self._rows] if self._idx is not None else cloud_all)[order]
            order = order[np.argsort(np.where(np.isnan(cc), 0.0, cc), kind="stable")]
            cc = (cloud_all[self._rows] if self._idx is not None else cloud_all)[order]
            order = order[np.argsort(np.isnan(cc), kind="stable")]
        return self._sub(order)

    def select(self, assets: Sequence[str], *,
               sign: Optional[SignFunction] = None,
               missing: str = "error") -> Selection:
        """Pick the assets of each item by key or by common name
        (eo:bands / STAC 1.1 bands eo:common_name: "blue", "red", "nir"...):
        each name is a key when an item has an asset of that key, else the
        one asset whose band's common name it is.  missing: "error"
        (default: StacError naming the item and the name) or "skip" (the
        item is left out).  sign: see Signer."""
        names = [assets] if isinstance(assets, str) else list(assets)
        if not names:
            raise ValueError("select: at least one asset key or common name")
        if missing not in ("error", "skip"):
            raise ValueError("select: missing must be 'error' or 'skip'")
        signer = Signer(sign) if sign is not None else None
        if self._idx is not None:
            picks = self._idx.ix.pick(self._rows, names)
            keep = np.ones(len(self._rows), bool)
            for j in np.flatnonzero((picks < 0).any(axis=1)):
                # The first name an item lacks decides, as in the loop
                # below: the reference says what is wrong.
                k = int(np.flatnonzero(picks[j] < 0)[0])
                if picks[j, k] == -1 and missing == "skip":
                    keep[j] = False
                    continue
                it = self[int(j)]
                _pick(it, names[k])       # raises for an ambiguous name
                raise _no_asset(it, names[k])
            if not keep.any():
                raise StacError("select(%s): no item has these assets" % names)
            return _IndexedSelection(names, self._idx, self._rows[keep], picks[keep], signer)
        rows: List[Tuple[Item, List[Asset]]] = []
        for it in self:
            row: List[Asset] = []
            for n in names:
                a = _pick(it, n)
                if a is None:
                    if missing == "skip":
                        break
                    raise _no_asset(it, n)
                row.append(a)
            else:
                rows.append((it, row))
        if not rows:
            raise StacError("select(%s): no item has these assets" % names)
        return Selection(names, rows, signer)


def _no_asset(it: Item, name: str) -> StacError:
    have = ", ".join(sorted(it.assets)) or "none"
    return StacError("%s: no asset with key or common name %r (assets: %s)"
                     % (_where(it.id, _shown(it.href) if it.href else "<dict>"), name, have))


def _named(e: _cogfeed.Error, a: Union[Asset, Href]) -> _cogfeed.Error:
    """A copy of e whose message starts with the item id and asset key
    (its status, name and HTTP status kept)."""
    n = type(e)("item %r, asset %r: %s" % (a.item_id, a.key, e))
    n.__dict__.update(vars(e))
    return n


def _explained(e: _cogfeed.Error, hrefs: Iterable[Tuple[str, Union[Asset, Href]]]
               ) -> _cogfeed.Error:
    """e with the item id and asset key of the href its message names
    (of the (href, its asset) pairs; the longest such name), or e itself
    when it names none of them."""
    msg = str(e)
    best: Optional[Tuple[int, Union[Asset, Href]]] = None
    for h, a in hrefs:
        sh = _shown(h)
        if sh in msg and (best is None or len(sh) > best[0]):
            best = (len(sh), a)
    return e if best is None else _named(e, best[1])


def _pick(it: Item, name: str) -> Optional[Asset]:
    if name in it.assets:
        return it.assets[name]
    found = [a for a in it.assets.values() if name in a.common_names]
    if len(found) > 1:
        # Several assets of one band (a COG and a JP2 of B04): prefer the
        # GeoTIFF, then the data role.
        tif = [a for a in found if (a.type or "").startswith("image/tiff")]
        found = tif or [a for a in found if "data" in a.roles] or found
        if len(found) > 1:
            raise StacError("%s: common name %r is the band of several "
                            "assets (%s): select by key" % (
                                _where(it.id, found[0].where), name,
                                ", ".join(a.key for a in found)))
    return found[0] if found else None


class Selection:
    """The chosen assets of each item: the Loader's inputs, one sample
    source per item and one layer per asset (the first asset is the
    image, the others its ``layers``), read onto the first asset's grid.
    cogfeed.Loader(selection, ...) takes it where it takes paths."""

    def __init__(self, names: Sequence[str],
                 rows: Sequence[Tuple[Item, Sequence[Asset]]],
                 signer: Optional[Signer]) -> None:
        self.names = list(names)
        self._item_list = [r[0] for r in rows]
        self._asset_rows = [list(r[1]) for r in rows]
        self.signer = signer
        #: (item id, asset key) of every grid taken from a header (no or
        #: incomplete projection fields), and of those taken from STAC
        self.header_grids: List[Tuple[str, str]] = []
        self.stac_grids: List[Tuple[str, str]] = []

    @property
    def items(self) -> Sequence[Item]:
        """The selected items."""
        return self._item_list

    @property
    def assets(self) -> Sequence[Sequence[Asset]]:
        """The chosen assets of each item, in the order of names."""
        return self._asset_rows

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return "<cogfeed.stac.Selection: %d items x %s>" % (len(self.items),
                                                            self.names)

    def within(self, toi: Any) -> Selection:
        """The items whose datetime, or [start_datetime, end_datetime],
        meets a time of interest (Items.search's datetime), with the same
        assets; StacError when none does."""
        keep = [j for j, it in enumerate(self.items) if _meets_time(it, *_interval(toi))]
        return self._rows_kept(keep, toi)

    def _rows_kept(self, keep: Sequence[int], toi: Any) -> Selection:
        if not keep:
            raise StacError("no selected item is inside the time of interest %r" % (toi,))
        return Selection(self.names, [(self.items[j], list(self.assets[j])) for j in keep],
                         self.signer)

    def href(self, a: Asset, signed: bool = True) -> str:
        """a's href, signed (lazily, again when expired) with sign=;
        signed=False: as the catalog gives it (for a reader that signs
        it itself, as the Loader does)."""
        return Href(self._signed(a.href) if signed else a.href, a.item_id, a.key, a.described)

    def _signed(self, h: str) -> str:
        return self.signer(h) if self.signer is not None else h

    def images(self, signed: bool = True) -> List[str]:
        """The first asset of each item (signed unless signed=False)."""
        return [self.href(r[0], signed) for r in self.assets]

    def layers(self, signed: bool = True) -> Optional[List[List[str]]]:
        """The other assets of each item (signed unless signed=False),
        or None for one asset."""
        if len(self.names) == 1:
            return None
        return [[self.href(a, signed) for a in r[1:]] for r in self.assets]

    def hrefs(self, name: str, signed: bool = True) -> List[str]:
        """The href (signed unless signed=False) of the asset `name` (a
        key or a common name) of each selected item, e.g. the Loader's
        masks=; StacError naming the item where one has none."""
        out = []
        for it in self.items:
            a = _pick(it, name)
            if a is None:
                raise _no_asset(it, name)
            out.append(self.href(a, signed))
        return out

    def grids(self, io: Optional[IO] = None) -> List[Grid]:
        """The grid of each item's first asset: from the projection
        extension when it gives the whole grid, else from the file's header
        (cogfeed.open through io, whose header cache it uses).  Which one
        each item used is in header_grids / stac_grids, and header reads
        are logged."""
        out: List[Grid] = []
        self.header_grids, self.stac_grids = [], []
        for it, row in zip(self.items, self.assets):
            a = row[0]
            g = a.stac_grid()
            if g is not None:
                self.stac_grids.append((it.id, a.key))
                out.append(g)
                continue
            log.info("item %r, asset %r: no complete projection fields, grid "
                     "from the header of %s", it.id, a.key, _shown(a.href))
            self.header_grids.append((it.id, a.key))
            out.append(self._header_grid(a, io))
        return out

    def series(self, io: Optional[IO] = None, groupby: Any = None, signed: bool = True
               ) -> Tuple[List[List[Any]], List[List[Optional[_dt.datetime]]]]:
        """The items as time series, for cogfeed.Loader(images, dates=...,
        time_steps=T): returns (hrefs per series, dates per series).  One
        asset per item (a series reads one file per date; select the bands
        of one multi-band asset, or stack them first).

        groupby None: one series per location, the items whose first asset
        lies on the same grid (CRS, transform and size: a Sentinel-2 MGRS
        tile, a Landsat path/row), in date order, a href per date.

        groupby "solar_day" (the items of one local solar day, as
        cogfeed.load and odc-stac group them), "time" (one datetime) or a
        function of the item giving a key: one series of all the items, a
        date per group in time order, each date the list of its items'
        hrefs in this selection's order (the Loader mosaics them: the first
        with data gives each pixel, so sort first, e.g. items.sorted(
        "clear")), its date the earliest of them.  For a region that
        several tiles cover: read it onto the region's grid (grid=).

        signed=False: the hrefs unsigned, for a Loader given
        ``sign=selection.signer``, which signs them again while it runs."""
        if len(self.names) != 1:
            raise StacError("series(): one asset per item, not %d (%s)"
                            % (len(self.names), ", ".join(self.names)))
        if groupby is not None:
            from .region import item_steps
            steps = item_steps(self.items, groupby)
            return ([[[self.href(self.assets[i][0], signed) for i in st] for st in steps]],
                    [[min((t for t in (self.items[i].time for i in st) if t is not None),
                          default=None) for st in steps]])
        groups: Dict[Any, List[int]] = {}
        for i, g in enumerate(self.grids(io)):
            key = (g.crs.to_wkt() if g.crs is not None else None,
                   tuple(round(v, 9) for v in g.geotransform), g.width, g.height)
            groups.setdefault(key, []).append(i)
        hrefs: List[List[Any]] = []
        dates: List[List[Optional[_dt.datetime]]] = []
        for idx in groups.values():
            idx.sort(key=lambda i: (self.items[i].time is None,
                                    self.items[i].time or _dt.datetime.min.replace(
                                        tzinfo=_dt.timezone.utc)))
            hrefs.append([self.href(self.assets[i][0], signed) for i in idx])
            dates.append([self.items[i].time for i in idx])
        return hrefs, dates

    def _header_grid(self, a: Asset, io: Optional[IO]) -> Grid:
        try:
            with _cogfeed.open(self.href(a), io=io) as cog:
                return Grid.like(cog)
        except _cogfeed.Error as e:
            raise _named(e, a) from None

    def explain(self, e: _cogfeed.Error) -> _cogfeed.Error:
        """e (a Loader's or a reader's error) with the item id and asset
        key of the href its message names, when it names one of ours."""
        return _explained(e, ((a.href, a) for row in self.assets for a in row))

    def check(self, io: Optional[IO] = None) -> None:
        """Open every selected asset once (through io and its header
        cache), raising on the first that cannot be read with a message
        naming the item id and the asset key; where the projection
        extension gives a grid, check that the header agrees."""
        for it, row in zip(self.items, self.assets):
            for a in row:
                try:
                    with _cogfeed.open(self.href(a), io=io) as cog:
                        g = a.stac_grid()
                        if g is not None and (cog.width, cog.height) != (
                                g.width, g.height):
                            raise StacError(
                                "item %r, asset %r: proj:shape says %dx%d, "
                                "%s is %dx%d" % (it.id, a.key, g.width, g.height,
                                                 _shown(a.href), cog.width,
                                                 cog.height))
                except _cogfeed.Error as e:
                    raise _named(e, a) from None

    def loader_inputs(self, signed: bool = True) -> Dict[str, Any]:
        """{"images": [...], "layers": [[...], ...] or None}; signed=False
        with "sign": the signer, for a Loader that signs them while it
        runs."""
        if not signed:
            return {"images": self.images(False), "layers": self.layers(False),
                    "sign": self.signer}
        return {"images": self.images(), "layers": self.layers()}


class _AssetRows(Sequence[Sequence[Asset]]):
    """An indexed selection's chosen assets, made per item when asked."""

    def __init__(self, idx: _Index, rows: npt.NDArray[np.int64],
                 picks: npt.NDArray[np.int64]) -> None:
        self._idx, self._rows, self._picks = idx, rows, picks

    @overload
    def __getitem__(self, j: int) -> Sequence[Asset]: ...
    @overload
    def __getitem__(self, j: slice) -> Sequence[Sequence[Asset]]: ...

    def __getitem__(self, j: Union[int, slice]) -> Any:
        if isinstance(j, slice):
            return _AssetRows(self._idx, self._rows[j], self._picks[j])
        assets = list(self._idx.item(int(self._rows[j])).assets.values())
        return [assets[int(k)] for k in self._picks[j]]

    def __len__(self) -> int:
        return len(self._rows)


class _IndexedSelection(Selection):
    """A Selection of items in the C index: the Loader's inputs come from
    there (a list of 100,000 hrefs in a few tens of milliseconds); Item
    and Asset objects are made only for what asks for them."""

    def __init__(self, names: Sequence[str], idx: _Index, rows: npt.NDArray[np.int64],
                 picks: npt.NDArray[np.int64], signer: Optional[Signer]) -> None:
        self.names = list(names)
        self._idx, self._rows, self._picks = idx, rows, picks
        self.signer = signer
        self.header_grids = []
        self.stac_grids = []

    def __reduce__(self) -> Tuple[Any, ...]:
        # As Items: the pickle carries the Item and Asset objects.
        return (Selection, (self.names, list(zip(self.items, self.assets)), self.signer))

    @property
    def items(self) -> Sequence[Item]:
        return Items._indexed(self._idx, self._rows)

    @property
    def assets(self) -> Sequence[Sequence[Asset]]:
        return _AssetRows(self._idx, self._rows, self._picks)

    def within(self, toi: Any) -> Selection:
        lo, hi = _interval(toi)
        m = self._idx.ix.match([], None if lo is None else _us(lo),
                               None if hi is None else _us(hi), None)[self._rows].astype(bool)
        if not m.any():
            return self._rows_kept([], toi)
        return _IndexedSelection(self.names, self._idx, self._rows[m], self._picks[m],
                                 self.signer)

    def _column(self, ks: npt.NDArray[np.int64], signed: bool = True) -> List[str]:
        """The hrefs (joined with their base where relative, signed
        unless signed=False) of asset ks[j] of each selected item j, as
        Href objects with their description straight from the index."""
        hs, rel = self._idx.ix.hrefs(self._rows, ks)
        out = [self._idx.href(int(self._rows[j]), h, True) if r else h
               for j, (h, r) in enumerate(zip(hs, rel))] if any(rel) else hs
        if self.signer is not None and signed:
            out = [self._signed(h) for h in out]
        col = _Column(self._idx.ix, self._rows, ks)
        of = Href._of
        return [of(h, col, j) for j, h in enumerate(out)]

    def images(self, signed: bool = True) -> List[str]:
        return self._column(self._picks[:, 0], signed)

    def layers(self, signed: bool = True) -> Optional[List[List[str]]]:
        if len(self.names) == 1:
            return None
        cols = [self._column(self._picks[:, k], signed) for k in range(1, len(self.names))]
        return [list(r) for r in zip(*cols)]

    def hrefs(self, name: str, signed: bool = True) -> List[str]:
        ks = self._idx.ix.pick(self._rows, [name])[:, 0]
        bad = np.flatnonzero(ks < 0)
        if len(bad):
            it = self.items[int(bad[0])]
            _pick(it, name)   # raises for an ambiguous name
            raise _no_asset(it, name)
        return self._column(ks, signed)

    def grids(self, io: Optional[IO] = None) -> List[Grid]:
        # The projection fields straight from the index; an Asset is made
        # only for an item whose grid comes from its header.
        ids, keys, crs, tr, sh, _ = self._idx.ix.grid_fields(self._rows, self._picks[:, 0])
        out: List[Grid] = []
        self.header_grids, self.stac_grids = [], []
        for j in range(len(ids)):
            if crs[j] is not None and sh[j, 0] > 0 and not np.isnan(tr[j, 0]):
                try:
                    out.append(Grid(_crs(crs[j]), tuple(tr[j]), int(sh[j, 1]), int(sh[j, 0])))
                except (ValueError, _cogfeed.Error):
                    out.append(cast(Grid, self.assets[j][0].stac_grid()))  # raises, naming it
                self.stac_grids.append((ids[j], keys[j]))
                continue
            a = self.assets[j][0]
            log.info("item %r, asset %r: no complete projection fields, grid "
                     "from the header of %s", ids[j], keys[j], _shown(a.href))
            self.header_grids.append((ids[j], keys[j]))
            out.append(self._header_grid(a, io))
        return out

    def explain(self, e: _cogfeed.Error) -> _cogfeed.Error:
        # (the columns' Href objects name their items and assets)
        return _explained(e, ((h, cast(Href, h)) for k in range(len(self.names))
                              for h in self._column(self._picks[:, k])))
