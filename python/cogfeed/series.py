"""Time series for cogfeed.Loader: dates for every scene, and series of any
length made into samples of exactly T dates (docs/datasets.md, "Time
series").

The C loader reads T aligned dates per sample source, each date one
scene or a mosaic of several (the scenes of one solar day: each pixel
from the first with data, as cogfeed.Loader's mosaic; the C loader's
step_scenes).  A location's series of N dates becomes sources of exactly
T dates each:

- N == T: one source, its dates in order;
- N < T: one source padded to T by repeating its last date; the padded
  steps are zero in the image and False in ``batch["date_valid"]``, their
  date NaT (the repeats are read again: with the chunk cache on, from
  memory);
- N > T: ceil(N / T) sources, each T distinct dates in date order, drawn
  once from a generator seeded by the Loader's seed and the location
  (reproducible, and a resume replays them): the dates are dealt out in a
  shuffled order so that every date is in one source, the last source
  topped up with dates drawn from the rest.  Each source of a location
  weighs 1 / (its number of sources), so every location is drawn as
  often as it would be with one source (random sampler); the grid
  sampler visits a location once per source.

Dates come from ``dates=`` (a list per series, parallel to the paths),
from the file names (``date_pattern``, a regular expression whose group
``date`` is parsed with ``date_format``, as TorchGeo's filename_regex and
date_format), from the files' TIFFTAG_DATETIME (``dates="tiff"``: reads
each header once, through the header cache), or from STAC
(``Selection.series()``).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, cast

import numpy as np

__all__ = ["plan", "parse_dates", "nest", "same_shape", "same_dates", "flatten", "match",
           "Matched"]

NaT = np.datetime64("NaT", "s")


def _to_dt64(v: Any, where: str) -> np.datetime64:
    if v is None:
        return NaT
    if isinstance(v, np.datetime64):
        return cast(np.datetime64, v.astype("datetime64[s]"))
    if isinstance(v, _dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return np.datetime64(v, "s")
    if isinstance(v, _dt.date):
        return np.datetime64(v, "s")
    if isinstance(v, str):
        s = v.strip()
        # TIFFTAG_DATETIME's "YYYY:MM:DD HH:MM:SS"
        m = re.fullmatch(r"(\d{4}):(\d{2}):(\d{2})[ T](\d{2}):(\d{2}):(\d{2})", s)
        if m:
            s = "%s-%s-%sT%s:%s:%s" % m.groups()
        if re.search(r"\d[Zz]$|\d[+-]\d{2}:\d{2}$", s):
            # an RFC 3339 offset (STAC's form): to UTC, as the datetime
            # branch above (numpy would drop a "+02:00" or warn on "-05:00")
            from .stac import StacError, _time
            try:
                return _to_dt64(_time(s, where), where)
            except StacError:
                pass
        else:
            try:
                return np.datetime64(s, "s")
            except ValueError:
                pass
    raise ValueError("%s: %r is not a date" % (where, v))


def parse_dates(series: Sequence[Sequence[str]], dates: Any,
                date_pattern: Optional[str], date_format: Optional[str]
                ) -> List[List[np.datetime64]]:
    """A date for every scene of every series (NaT where unknown)."""
    if dates is not None and date_pattern is not None:
        raise ValueError("dates and date_pattern: give one of them")
    if isinstance(dates, str):
        if dates != "tiff":
            raise ValueError("dates: 'tiff', or a list of dates per series")
        from . import open as _open
        out = []
        for s in series:
            row = []
            for p in s:
                with _open(p) as c:
                    dt = c.datetime
                if dt is None:
                    raise ValueError("%s: no TIFFTAG_DATETIME (dates='tiff')" % p)
                row.append(_to_dt64(dt, p))
            out.append(row)
        return out
    if dates is not None:
        dl = [list(d) if isinstance(d, (list, tuple)) else [d] for d in dates]
        if len(dl) != len(series) or any(len(a) != len(b) for a, b in zip(dl, series)):
            raise ValueError("dates: one date per scene, shaped as the images")
        return [[_to_dt64(v, "dates[%d][%d]" % (i, j)) for j, v in enumerate(d)]
                for i, d in enumerate(dl)]
    if date_pattern is not None:
        rx = re.compile(date_pattern)
        if "date" not in rx.groupindex:
            raise ValueError("date_pattern needs a group named 'date', e.g. "
                             r"r'_(?P<date>\d{8})_'")
        out = []
        for s in series:
            row = []
            for p in s:
                name = os.path.basename(str(p).split("?")[0])
                m = rx.search(name)
                if not m:
                    raise ValueError("%s: date_pattern %r does not match" % (name, date_pattern))
                text = m.group("date")
                try:
                    d = (_dt.datetime.strptime(text, date_format) if date_format
                         else text)
                except ValueError as e:
                    raise ValueError("%s: %r does not match date_format %r (%s)"
                                     % (name, text, date_format, e)) from None
                row.append(_to_dt64(d, name))
            out.append(row)
        return out
    return [[NaT] * len(s) for s in series]


def nest(images: Sequence[Any], what: str) -> List[List[List[Any]]]:
    """Each series as its dates, each date as its scenes: a path alone is
    a date of one scene, a list (or tuple) of paths the scenes of one date
    (a mosaic: the first with data gives each pixel)."""
    out: List[List[List[Any]]] = []
    for i, s in enumerate(images):
        if not isinstance(s, (list, tuple)):
            raise ValueError("%s: series %d is %r, not a list of dates" % (what, i, s))
        row: List[List[Any]] = []
        for j, d in enumerate(s):
            if isinstance(d, (list, tuple)):
                if not d:
                    raise ValueError("%s: series %d, date %d has no scenes" % (what, i, j))
                if any(isinstance(p, (list, tuple)) for p in d):
                    raise ValueError("%s: series %d, date %d: a date is a path or a list "
                                     "of paths" % (what, i, j))
                row.append([os.fspath(p) for p in d])
            else:
                row.append([os.fspath(d)])
        out.append(row)
    return out


def same_shape(a: List[List[List[Any]]], b: List[List[List[Any]]], what: str) -> None:
    """b (scene masks) shaped as a (the images): a series per series, a
    date per date, a scene per scene."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)) or any(
            len(u) != len(v) for x, y in zip(a, b) for u, v in zip(x, y)):
        raise ValueError("%s: shape them as the images (a series per series, a date per "
                         "date, a scene per scene)" % what)


def same_dates(a: List[List[List[Any]]], b: List[List[List[Any]]], what: str) -> None:
    """b (layers per date) has a date per date of a, the same number of
    files at every date."""
    if len(a) != len(b) or any(len(x) != len(y) for x, y in zip(a, b)):
        raise ValueError("%s: one entry per date of every series, shaped as the images' "
                         "dates" % what)
    n = set(len(d) for s in b for d in s)
    if len(n) > 1:
        raise ValueError("%s: every date needs the same number of files (%d to %d)"
                         % (what, min(n), max(n)))


def flatten(sources: Sequence[Sequence[Sequence[Any]]], K: int) -> List[Any]:
    """Every date's scenes padded to K by repeating its last (a repeat adds
    nothing to the mosaic, and is read only where pixels are still left
    without data), flattened source by source, date by date."""
    return [d[min(k, len(d) - 1)] for s in sources for d in s for k in range(K)]


def within(dates: Sequence[Sequence[np.datetime64]], toi: Any) -> List[List[int]]:
    """The indices of each series' dates inside a time of interest (what
    stac.Items.search's datetime takes); a date not known (NaT) is not."""
    from .stac import _interval, _us
    lo, hi = _interval(toi)
    lo_us = None if lo is None else _us(lo)
    hi_us = None if hi is None else _us(hi)
    out = []
    for ds in dates:
        keep = []
        for j, d in enumerate(ds):
            if np.isnat(d):
                continue
            us = int(np.asarray(d, dtype="datetime64[us]").astype(np.int64))
            if (lo_us is None or us >= lo_us) and (hi_us is None or us <= hi_us):
                keep.append(j)
        out.append(keep)
    return out


def plan(series: Sequence[Sequence[Any]], dates: Sequence[Sequence[np.datetime64]],
         T: int, seed: int, leave_out_empty: bool = False
         ) -> Tuple[List[List[int]], np.ndarray, np.ndarray, List[int], List[float]]:
    """The Loader's sources of exactly T dates: (the dates of each source
    as indices into its series, dates (sources, T) datetime64[s], valid
    (sources, T) bool, the series of each source, its weight).
    leave_out_empty: a series without dates gives no source (else it is
    an error)."""
    if T < 1:
        raise ValueError("time_steps must be at least 1")
    picks: List[List[int]] = []
    dts: List[List[np.datetime64]] = []
    ok: List[List[bool]] = []
    owner: List[int] = []
    weight: List[float] = []
    for i, (s, d) in enumerate(zip(series, dates)):
        n = len(s)
        if n == 0:
            if leave_out_empty:
                continue
            raise ValueError("images: series %d is empty" % i)
        # date order; scenes without a date after the dated ones, in
        # their given order (stable)
        order = sorted(range(n), key=lambda j: (bool(np.isnat(d[j])),
                                                 0 if np.isnat(d[j]) else int(d[j].astype("int64")),
                                                 j))
        if n <= T:
            pick = order + [order[-1]] * (T - n)
            picks.append(pick)
            dts.append([d[j] for j in order] + [NaT] * (T - n))
            ok.append([True] * n + [False] * (T - n))
            owner.append(i)
            weight.append(1.0)
            continue
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, i, 0x7e5e])
        deal = [order[j] for j in rng.permutation(n)]
        rank = {j: r for r, j in enumerate(order)}  # date order
        k = -(-n // T)
        for g in range(k):
            grp = deal[g * T:(g + 1) * T]
            if len(grp) < T:
                rest = [j for j in deal if j not in grp]
                grp += [rest[j] for j in rng.choice(len(rest), T - len(grp), replace=False)]
            grp = sorted(grp, key=rank.__getitem__)
            picks.append(grp)
            dts.append([d[j] for j in grp])
            ok.append([True] * T)
            owner.append(i)
            weight.append(1.0 / k)
    return (picks, np.array(dts, dtype="datetime64[s]").reshape(len(picks), T),
            np.array(ok, dtype=bool).reshape(len(picks), T), owner, weight)


class Matched(NamedTuple):
    """What match() gives: the series with their dates (those without a
    match left out, missing="drop"), and for each date the matched files
    of the other collections (cogfeed.Loader's date_layers) and their
    dates (datetime64[s]); the dates kept (indices into each series), and
    the scene masks given, filtered as the images."""
    images: List[List[Any]]
    dates: List[List[Any]]
    layers: List[List[List[str]]]
    layer_dates: List[List[List[np.datetime64]]]
    kept: List[List[int]]
    scene_masks: Optional[List[List[Any]]]


def match(images: Sequence[Sequence[Any]], dates: Sequence[Sequence[Any]],
          *others: Tuple[Sequence[Sequence[Any]], Sequence[Sequence[Any]]],
          tolerance: Any = None, missing: str = "drop",
          scene_masks: Optional[Sequence[Sequence[Any]]] = None) -> Matched:
    """A series built from several collections: each date of ``images``
    (per location, its dates; a date a path or the list of its scenes)
    gets, from every other collection, its scene nearest in time within
    ``tolerance`` (a datetime.timedelta or numpy timedelta64; None: the
    nearest at any distance; ties: the earlier), stacked after the image's
    bands as that date's layers (``Loader(..., date_layers=m.layers)``):
    e.g. the Sentinel-1 scene of each Sentinel-2 date.

    Each other collection is a pair (paths, dates) shaped per location as
    ``images``: the scenes it offers that location, one file per date (a
    matched layer is read as it is, not mosaicked).  A date with no match
    in some collection is left out (``missing="drop"``) or raises
    (``missing="error"``); ``scene_masks`` (shaped as ``images``) are
    left out with their dates."""
    if missing not in ("drop", "error"):
        raise ValueError("match: missing is 'drop' or 'error', not %r" % (missing,))
    if not others:
        raise ValueError("match: give at least one other collection (paths, dates)")
    tol: Optional[int] = None
    if tolerance is not None:
        td = (tolerance if isinstance(tolerance, np.timedelta64)
              else np.timedelta64(tolerance))
        tol = int(td.astype("timedelta64[s]").astype(np.int64))
        if tol < 0:
            raise ValueError("match: tolerance must not be negative")
    if len(dates) != len(images) or any(len(d) != len(i) for d, i in zip(dates, images)):
        raise ValueError("match: dates: one per date of every series, shaped as the images")
    pools = []
    for c, (paths, odates) in enumerate(others):
        if len(paths) != len(images) or len(odates) != len(images):
            raise ValueError("match: collection %d: one list per location (%d locations)"
                             % (c + 1, len(images)))
        loc = []
        for i, (ps, ds) in enumerate(zip(paths, odates)):
            if len(ps) != len(ds):
                raise ValueError("match: collection %d, location %d: a date per file"
                                 % (c + 1, i))
            files = []
            for p in ps:
                if isinstance(p, (list, tuple)):
                    if len(p) != 1:
                        raise ValueError(
                            "match: collection %d, location %d: a date of %d scenes; a matched "
                            "layer is one file per date (group with groupby=None, or stack "
                            "them first)" % (c + 1, i, len(p)))
                    p = p[0]
                files.append(os.fspath(p))
            secs = [_to_dt64(d, "collection %d dates" % (c + 1)) for d in ds]
            order = sorted((j for j in range(len(secs)) if not np.isnat(secs[j])),
                           key=lambda j: int(secs[j].astype(np.int64)))
            loc.append((files, secs, order))
        pools.append(loc)
    if scene_masks is not None and (len(scene_masks) != len(images) or any(
            len(m) != len(i) for m, i in zip(scene_masks, images))):
        raise ValueError("match: scene_masks: shape them as the images")
    out = Matched([], [], [], [], [], None if scene_masks is None else [])
    for i, (series, ds) in enumerate(zip(images, dates)):
        keep_i: List[Any] = []
        keep_d: List[Any] = []
        kept: List[int] = []
        lays: List[List[str]] = []
        ldates: List[List[np.datetime64]] = []
        for j, (img, d) in enumerate(zip(series, ds)):
            t = _to_dt64(d, "dates[%d][%d]" % (i, j))
            if np.isnat(t):
                raise ValueError("match: series %d, date %d has no date" % (i, j))
            ts = int(t.astype(np.int64))
            row, rdates = [], []
            for c, loc in enumerate(pools):
                files, secs, order = loc[i]
                best = None
                for k in order:  # in time order: the first of equals is the earlier
                    dist = abs(int(secs[k].astype(np.int64)) - ts)
                    if (tol is None or dist <= tol) and (best is None or dist < best[0]):
                        best = (dist, k)
                if best is None:
                    break
                row.append(files[best[1]])
                rdates.append(secs[best[1]])
            if len(row) < len(pools):
                if missing == "error":
                    raise ValueError("match: series %d, date %s: no scene of collection %d "
                                     "within the tolerance" % (i, t, len(row) + 1))
                continue
            keep_i.append(img)
            keep_d.append(d)
            kept.append(j)
            lays.append(row)
            ldates.append(rdates)
        if not keep_i:
            raise ValueError("match: series %d: no date has a match in every collection "
                             "within the tolerance" % i)
        out.images.append(keep_i)
        out.dates.append(keep_d)
        out.layers.append(lays)
        out.layer_dates.append(ldates)
        out.kept.append(kept)
        if scene_masks is not None and out.scene_masks is not None:
            out.scene_masks.append([scene_masks[i][j] for j in kept])
    return out
