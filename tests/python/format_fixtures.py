"""Fixtures of the TIFF variants GDAL reads beyond the COG matrix (issue 19).

conformance.py covers what GDAL's COG and GTiff drivers write by default;
this module covers the rest of what GDAL *reads*, one small file per class:
colour spaces GDAL converts (CMYK, CIELab, YCbCr not in JPEG), FillOrder 2,
odd bit depths, float16/float24, complex samples, LZMA and the CCITT codecs,
files GDAL tolerates (deflate strips with trailing bytes or extra rows,
PackBits overruns, tile offsets in StripOffsets, truncated files, broken
IFD chains, overviews in SubIFDs), files that must be refused at open, and
metadata (band descriptions, units, nodata, scale/offset, GDAL metadata
domains, TIFF text tags).

Files GDAL can write are written by GDAL (3.10, the one rasterio's wheel
carries, as in conformance.py; docs/conformance.md); the others are GDAL files taken
apart (read_tiff) and written again with the change (write_tiff), or built
from scratch with the same writer.  Compressed streams come from GDAL too
(compress()), so nothing depends on a Python codec.  Everything is made at
test time into $CF_TEST_DATA/formats and cached under a hash of this file
and GDAL's version; nothing is committed.

Each Fixture says what the conformance test expects of it:
  expect="read"    cogfeed reads it exactly as GDAL does (GDAL is the
                   oracle: every window bit for bit, dtype, bands, levels)
  expect="refuse"  cogfeed.open raises, with `reason` in the message
  raw=True         also compared against GDAL's GTIFF_RAW: reading when
                   opened with raw_color=True
"""

import contextlib
import hashlib
import os
import shutil
import struct
import tempfile
import zlib
from collections import namedtuple

import numpy as np
import rasterio
import rasterio.shutil
from rasterio.enums import Resampling
from rasterio.io import MemoryFile
from rasterio.transform import Affine

with open(os.path.abspath(__file__), "rb") as _f:
    GENERATOR_VERSION = hashlib.sha256(_f.read()).hexdigest()[:16]

Fixture = namedtuple("Fixture", "name cls make expect reason raw")


def _fx(name, cls, make, expect="read", reason=None, raw=False):
    return Fixture(name, cls, make, expect, reason, raw)


# ---------------------------------------------------------------------------
# A minimal TIFF reader and writer (classic TIFF, either byte order).
# ---------------------------------------------------------------------------

TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8,
             11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8}
FMT = {1: "B", 2: "B", 3: "H", 4: "I", 6: "b", 7: "B", 8: "h", 9: "i",
       11: "f", 12: "d", 13: "I", 16: "Q"}
OFFSET_TAGS = (273, 324)
COUNT_TAGS = (279, 325)


class Ifd:
    """One IFD: tags as {tag: (type, [values] or raw bytes)}, and the
    chunks (tiles or strips) as a list of bytes."""

    def __init__(self, tags=None, chunks=None):
        self.tags = dict(tags or {})
        self.chunks = list(chunks or [])

    def get(self, tag, default=None):
        t = self.tags.get(tag)
        if t is None:
            return default
        v = t[1]
        return v[0] if isinstance(v, list) and len(v) == 1 else v

    def set(self, tag, typ, values):
        if not isinstance(values, (list, bytes, bytearray)):
            values = [values]
        self.tags[tag] = (typ, values)


def read_tiff(path):
    """(byte order '<' or '>', [Ifd]) of a classic TIFF, chunks included."""
    data = open(path, "rb").read()
    e = "<" if data[:2] == b"II" else ">"
    assert struct.unpack(e + "H", data[2:4])[0] == 42, "classic TIFF only"
    off = struct.unpack(e + "I", data[4:8])[0]
    ifds = []
    while off:
        n = struct.unpack(e + "H", data[off:off + 2])[0]
        ifd = Ifd()
        for i in range(n):
            p = off + 2 + 12 * i
            tag, typ, cnt = struct.unpack(e + "HHI", data[p:p + 8])
            size = TYPE_SIZE[typ] * cnt
            vo = p + 8 if size <= 4 else struct.unpack(e + "I", data[p + 8:p + 12])[0]
            raw = data[vo:vo + size]
            if typ in (2, 7):
                ifd.tags[tag] = (typ, raw)
            elif typ in (5, 10):
                ifd.tags[tag] = (typ, list(struct.unpack(e + ("I" if typ == 5 else "i") * (2 * cnt), raw)))
            else:
                ifd.tags[tag] = (typ, list(struct.unpack(e + FMT[typ] * cnt, raw)))
        offs = ifd.tags.get(324, ifd.tags.get(273))[1]
        cnts = ifd.tags.get(325, ifd.tags.get(279))[1]
        ifd.chunks = [data[o:o + c] for o, c in zip(offs, cnts)]
        ifds.append(ifd)
        off = struct.unpack(e + "I", data[off + 2 + 12 * n:off + 6 + 12 * n])[0]
    return e, ifds


def write_tiff(path, ifds, e="<", subifds=None):
    """Write IFDs (chunks first, then each IFD with its tag data) chained in
    order.  subifds: {parent index: [Ifd]} written after their parent and
    listed in its SubIFDs tag (330), not chained.  Offset/count tags are
    filled from the chunks under whichever tags the Ifd has them (so a
    caller can rename TileOffsets to StripOffsets).  Returns the offsets of
    the IFDs written, in writing order, and where each next pointer is."""
    out = bytearray(8)
    subifds = subifds or {}
    order = []  # (ifd, parent or None)
    for i, d in enumerate(ifds):
        order.append((d, None))
        for s in subifds.get(i, []):
            order.append((s, i))
    chunk_offs = []
    for d, _ in order:
        offs = []
        for c in d.chunks:
            offs.append(len(out) if c else 0)
            out += c
            if len(out) % 2:
                out += b"\0"
        chunk_offs.append(offs)
    ifd_pos, next_pos = [], []
    for k, (d, _) in enumerate(order):
        tags = dict(d.tags)
        ot = next((t for t in OFFSET_TAGS if t in tags), None)
        ct = next((t for t in COUNT_TAGS if t in tags), None)
        if ot is not None:
            tags[ot] = (4, chunk_offs[k] or [0])
        if ct is not None:
            tags[ct] = (4, [len(c) for c in d.chunks] or [0])
        if 330 in tags:
            tags[330] = (4, [0] * len(tags[330][1]))  # patched below
        pos = len(out)
        ifd_pos.append(pos)
        n = len(tags)
        body = bytearray(struct.pack(e + "H", n))
        extra = bytearray()
        data_at = pos + 2 + 12 * n + 4
        for tag in sorted(tags):
            typ, v = tags[tag]
            if isinstance(v, (bytes, bytearray)):
                raw, cnt = bytes(v), len(v) // TYPE_SIZE[typ]
            elif typ in (5, 10):
                raw = struct.pack(e + ("I" if typ == 5 else "i") * len(v), *v)
                cnt = len(v) // 2
            else:
                raw, cnt = struct.pack(e + FMT[typ] * len(v), *v), len(v)
            head = struct.pack(e + "HHI", tag, typ, cnt)
            if len(raw) <= 4:
                body += head + raw + b"\0" * (4 - len(raw))
            else:
                body += head + struct.pack(e + "I", data_at + len(extra))
                extra += raw + (b"\0" if len(raw) % 2 else b"")
        next_pos.append(pos + len(body))
        body += b"\0\0\0\0"
        out += body + extra
    # chain the main IFDs, point the parents at their SubIFDs
    main = [k for k, (_, par) in enumerate(order) if par is None]
    for a, b in zip(main, main[1:]):
        out[next_pos[a]:next_pos[a] + 4] = struct.pack(e + "I", ifd_pos[b])
    for k, (d, par) in enumerate(order):
        if 330 in d.tags and par is None:
            kids = [j for j, (_, p2) in enumerate(order) if p2 == main.index(k)]
            arr = struct.pack(e + "I" * len(kids), *[ifd_pos[j] for j in kids])
            _patch_tag(out, e, ifd_pos[k], 330, arr)
    out[0:2] = b"II" if e == "<" else b"MM"
    out[2:8] = struct.pack(e + "HI", 42, ifd_pos[main[0]])
    with open(path, "wb") as f:
        f.write(out)
    return [ifd_pos[k] for k in main], [next_pos[k] for k in main]


def _patch_tag(out, e, ifd_off, tag, raw):
    n = struct.unpack(e + "H", out[ifd_off:ifd_off + 2])[0]
    for i in range(n):
        p = ifd_off + 2 + 12 * i
        if struct.unpack(e + "H", out[p:p + 2])[0] == tag:
            if len(raw) <= 4:
                out[p + 8:p + 8 + len(raw)] = raw
            else:
                vo = struct.unpack(e + "I", out[p + 8:p + 12])[0]
                out[vo:vo + len(raw)] = raw
            return
    raise KeyError(tag)


@contextlib.contextmanager
def scratch_tif(dir=None):
    """A path for a scratch TIFF inside a fresh private folder (mkdtemp:
    0700), removed after: tempfile.mktemp only names a file in the shared
    temp folder, where another local user can plant a symlink first."""
    d = tempfile.mkdtemp(prefix="cf-scratch-", dir=dir)
    try:
        yield os.path.join(d, "scratch.tif")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def compress(data, codec, **opts):
    """`data` compressed by GDAL's (libtiff's) `codec` as one strip."""
    with scratch_tif(opts.pop("dir", None)) as tmp:
        with rasterio.open(tmp, "w", driver="GTiff", width=len(data), height=1, count=1,
                           dtype="uint8", COMPRESS=codec) as d:
            d.write(np.frombuffer(data, np.uint8)[None, None, :])
        return read_tiff(tmp)[1][0].chunks[0]


def pixels(h, w, nb, dtype, seed):
    """Smooth signal plus noise, with the dtype's range used."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    dt = np.dtype(dtype)
    out = []
    for b in range(nb):
        f = 0.5 + 0.45 * np.sin(xx / (9.0 + b)) * np.cos(yy / (13.0 + 2 * b))
        f = np.clip(f + rng.normal(0, 0.05, (h, w)), 0, 1)
        if dt.kind == "f":
            out.append((f * 200 - 50).astype(dt))
        elif dt.kind == "c":
            out.append((f * 3000 - 1500 + 1j * (1500 - f * 2500)).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(np.round(info.min + f * (float(info.max) - info.min)).astype(dt))
    return np.stack(out)


# GDAL's complex integer types: NumPy has none, so the pixels are given as
# complex floats and GDAL converts them (rasterio knows CInt16 but not CInt32:
# a VRT band of that type over the float source does it).
COMPLEX_INT = {"cint16": ("CInt16", "complex64"), "cint32": ("CInt32", "complex128")}


def _kw(opts):
    return dict(o.split("=", 1) for o in opts)


def _complex_int_vrt(src, gdal_type, vrt):
    """A VRT of `src` whose bands are of `gdal_type` (GDAL converts)."""
    with rasterio.open(src) as d:
        w, h, nb = d.width, d.height, d.count
        gt = ", ".join(repr(v) for v in d.transform.to_gdal())
    bands = "".join(
        '<VRTRasterBand dataType="%s" band="%d"><SimpleSource>'
        '<SourceFilename relativeToVRT="0">%s</SourceFilename><SourceBand>%d</SourceBand>'
        '</SimpleSource></VRTRasterBand>' % (gdal_type, b, src, b) for b in range(1, nb + 1))
    with open(vrt, "w") as f:
        f.write('<VRTDataset rasterXSize="%d" rasterYSize="%d"><GeoTransform>%s'
                '</GeoTransform>%s</VRTDataset>' % (w, h, gt, bands))


def gdal_write(path, data, opts, dtype=None, nodata=None, overviews=None, meta=None):
    """Write a (bands, h, w) array with the GTiff driver; overviews are
    built on a temporary copy and copied in (COPY_SRC_OVERVIEWS).  meta:
    {"tags": {...}, "bands": [{"description", "scale", "offset", "unit",
    "tags"}, ...]}, the dataset's and each band's metadata."""
    nb, h, w = data.shape
    dtype = dtype or str(data.dtype)
    gdal_type, dtype = COMPLEX_INT.get(dtype, (None, dtype))
    tmps = []
    try:
        with MemoryFile() as mf:
            with mf.open(driver="GTiff", width=w, height=h, count=nb, dtype=dtype,
                         nodata=nodata, tiled=True,
                         transform=Affine.from_gdal(300000.0, 30.0, 0.0, 5000000.0, 0.0, -30.0)
                         ) as m:
                m.write(data.astype(dtype))
                meta = meta or {}
                if meta.get("tags"):
                    m.update_tags(**meta["tags"])
                for b, bm in enumerate(meta.get("bands", []), 1):
                    if bm.get("description"):
                        m.set_band_description(b, bm["description"])
                    if bm.get("unit"):
                        m.set_band_unit(b, bm["unit"])
                    if bm.get("tags"):
                        m.update_tags(b, **bm["tags"])
                scaled = [bm for bm in meta.get("bands", []) if "scale" in bm]
                if scaled:
                    bms = meta["bands"] + [{}] * (nb - len(meta["bands"]))
                    m.scales = tuple(bm.get("scale", 1.0) for bm in bms)
                    m.offsets = tuple(bm.get("offset", 0.0) for bm in bms)
            src = mf.name
            if gdal_type:
                src = path + ".src.tif"
                tmps.append(src)
                with mf.open() as m:
                    rasterio.shutil.copy(m, src, driver="GTiff")
                vrt = path + ".vrt"
                tmps.append(vrt)
                _complex_int_vrt(src, gdal_type, vrt)
                src = vrt
            if overviews:
                tmp = path + ".ovr-src.tif"
                tmps.append(tmp)
                keep = ("TILED", "BLOCKXSIZE", "BLOCKYSIZE", "INTERLEAVE")
                rasterio.shutil.copy(src, tmp, driver="GTiff",
                                     **_kw([o for o in opts if o.split("=")[0] in keep]))
                with rasterio.open(tmp, "r+") as t:
                    t.build_overviews(overviews, Resampling.nearest)
                rasterio.shutil.copy(tmp, path, driver="GTiff",
                                     **_kw(opts + ["COPY_SRC_OVERVIEWS=YES"]))
            else:
                rasterio.shutil.copy(src, path, driver="GTiff", **_kw(opts))
    finally:
        for t in tmps:
            if os.path.exists(t):
                os.unlink(t)


def _tiled(t=64):
    return ["TILED=YES", "BLOCKXSIZE=%d" % t, "BLOCKYSIZE=%d" % t]


# ---------------------------------------------------------------------------
# Makers: each writes one file at `path`.
# ---------------------------------------------------------------------------

def gdal_file(shape, dtype, opts, seed=1, **kw):
    def make(path):
        nb, h, w = shape
        gdal_write(path, pixels(h, w, nb, dtype if dtype not in ("cint16", "cint32") else
                                "complex64", seed), opts, dtype=dtype, **kw)
    return make


def nbits_file(shape, dtype, nbits, opts, seed=2):
    """GDAL's NBITS option: values kept within the depth."""
    def make(path):
        nb, h, w = shape
        a = pixels(h, w, nb, "uint32", seed).astype(np.uint64)
        a = (a >> np.uint64(32 - nbits)).astype(dtype)
        gdal_write(path, a, opts + ["NBITS=%d" % nbits], dtype=dtype)
    return make


def bilevel_file(shape, opts, seed=3):
    """1-bit scanned-map-like content: blobs, lines, long runs."""
    def make(path):
        nb, h, w = shape
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:h, 0:w]
        a = ((np.sin(xx / 7.0) * np.cos(yy / 5.0) + rng.normal(0, 0.3, (h, w))) > 0.6)
        a[::17, :] = 1          # full-width black rows (runs > 2560 when wide)
        a[:, ::23] = 0
        a[h // 3:h // 3 + 5, w // 4:] = 0
        gdal_write(path, a.astype(np.uint8)[None], opts + ["NBITS=1"], dtype="uint8")
    return make


def fax_page(shape, opts, seed=7, border=0):
    """A bilevel fax-like page: lines of text (Pillow's default font at a
    few sizes), rules, boxes, long white runs, all-white rows; `border`
    black columns at the right edge (a scanner's edge)."""
    def make(path):
        from PIL import Image, ImageDraw, ImageFont
        nb, h, w = shape
        rng = np.random.default_rng(seed)
        im = Image.new("1", (w, h), 0)
        draw = ImageDraw.Draw(im)
        words = ["FAX", "page", "of", "the", "quick", "brown", "fox", "jumps", "over",
                 "1234", "dog", "###", "|||", "mmm", "iii", "Re:", "To:", "From:"]
        y = 40
        while y < h - 10:
            size = int(rng.choice([12, 16, 22, 30]))
            font = ImageFont.load_default(size=size)
            line = " ".join(str(v) for v in rng.choice(words, 30))
            draw.text((int(rng.integers(20, 120)), y), line, font=font, fill=1)
            y += size + int(rng.integers(4, 40))
            r = rng.random()
            if r < 0.1:
                draw.line([0, y, w - 1, y], fill=1, width=int(rng.integers(1, 4)))
            elif r < 0.2:
                x0, x1 = sorted(int(v) for v in rng.integers(0, w, 2))
                draw.rectangle([x0, y, x1, y + int(rng.integers(5, 60))], outline=1,
                               fill=int(rng.integers(0, 2)))
        a = np.array(im, dtype=np.uint8)
        if border:
            a[:, w - border:] = 1
        gdal_write(path, a[None], opts + ["NBITS=1"], dtype="uint8")
    return make


def narrower(width):
    """A change for rewrite(): ImageWidth made smaller than the width the
    strips were coded at (rows decode past the width: libtiff cleans each
    up, keeping the zero runs its cleanup makes as changing elements of
    the next row's reference)."""
    def change(ifds):
        ifds[0].set(256, 4, width)
    return change


def rewrite(base, change, e=None):
    """A GDAL file made by `base` (a maker), then `change(ifds)` applied to
    its IFDs before writing it again (change may return (ifds, subifds))."""
    def make(path):
        tmp = path + ".base.tif"
        base(tmp)
        order, ifds = read_tiff(tmp)
        os.unlink(tmp)
        r = change(ifds)
        subs = None
        if isinstance(r, tuple):
            ifds, subs = r
        elif r is not None:
            ifds = r
        write_tiff(path, ifds, e or order, subifds=subs)
    return make


def with_counts(base, change):
    """A file made by `base` whose StripByteCounts (or TileByteCounts) are
    then replaced by change(counts), the chunks left where they are."""
    def make(path):
        base(path)
        out = bytearray(open(path, "rb").read())
        e = "<" if out[:2] == b"II" else ">"
        ifd = struct.unpack(e + "I", out[4:8])[0]
        tag = 325 if _has_tag(out, e, ifd, 325) else 279
        _set_array(out, e, ifd, tag, change(_tag_value(out, e, ifd, tag)))
        with open(path, "wb") as f:
            f.write(out)
    return make


def _has_tag(out, e, ifd_off, tag):
    try:
        _tag_value(out, e, ifd_off, tag)
        return True
    except KeyError:
        return False


def fill_order_2(ifds):
    rev = bytes(int("{:08b}".format(i)[::-1], 2) for i in range(256))
    for d in ifds:
        d.set(266, 3, 2)
        d.chunks = [c.translate(rev) for c in d.chunks]


def lab_white_point(ifds):
    for d in ifds:  # D65 instead of libtiff's default D50
        d.set(318, 5, [3127, 10000, 3290, 10000])


def inkset_2(ifds):
    for d in ifds:
        d.set(332, 3, 2)


def trailing_bytes(ifds):
    for d in ifds:
        d.chunks = [c + b"\x13\x37\xde\xad\xbe\xef\x42" if c else c for c in d.chunks]


def tiles_as_strips(ifds):
    for d in ifds:
        d.tags[273] = d.tags.pop(324)
        d.tags[279] = d.tags.pop(325)


def move_overviews_to_subifds(ifds):
    main = ifds[0]
    main.set(330, 4, [0] * (len(ifds) - 1))
    return [main], {0: ifds[1:]}


def ycbcr_file(w, h, sh, sv, codec, tile=None, rps=None, coef=None, refbw=None, seed=5):
    """8-bit YCbCr not in JPEG, subsampled sh x sv: data units of sh*sv
    luma then Cb, Cr bytes per block, compressed by GDAL's `codec`."""
    def make(path):
        rng = np.random.default_rng(seed)
        cw = tile or w
        if tile:
            ch, across, down = tile, -(-w // tile), -(-h // tile)
        else:
            ch = rps or h
            across, down = 1, -(-h // ch)
        chunks = []
        for k in range(across * down):
            rows = ch if tile else min(ch, h - (k // across) * ch)
            bw, bh = -(-cw // sh), -(-rows // sv)
            yy, xx = np.mgrid[0:bh, 0:bw]
            units = np.empty((bh, bw, sh * sv + 2), np.uint8)
            base = (120 + 80 * np.sin((xx + k) / 3.0) * np.cos(yy / 4.0))
            for j in range(sh * sv):
                units[..., j] = np.clip(base + rng.normal(0, 20, base.shape), 0, 255)
            units[..., sh * sv] = rng.integers(0, 256, base.shape)
            units[..., sh * sv + 1] = rng.integers(0, 256, base.shape)
            raw = units.tobytes()
            chunks.append(raw if codec == "NONE" else compress(raw, codec))
        d = Ifd(chunks=chunks)
        comp = {"NONE": 1, "LZW": 5, "DEFLATE": 8}[codec]
        d.set(256, 4, w)
        d.set(257, 4, h)
        d.set(258, 3, [8, 8, 8])
        d.set(259, 3, comp)
        d.set(262, 3, 6)
        d.set(277, 3, 3)
        d.set(284, 3, 1)
        d.set(530, 3, [sh, sv])
        if coef:
            d.set(529, 5, coef)
        if refbw:
            d.set(532, 5, refbw)
        if tile:
            d.set(322, 4, tile)
            d.set(323, 4, tile)
            d.set(324, 4, [0])
            d.set(325, 4, [0])
        else:
            d.set(278, 4, ch)
            d.set(273, 4, [0])
            d.set(279, 4, [0])
        write_tiff(path, [d])
    return make


def plain_ifd(w, h, bits, chunks, comp=1, tile=None, rps=None, spp=1, sf=1, photo=1,
              extra=()):
    d = Ifd(chunks=chunks)
    d.set(256, 4, w)
    d.set(257, 4, h)
    d.set(258, 3, [bits] * spp)
    d.set(259, 3, comp)
    d.set(262, 3, photo)
    d.set(277, 3, spp)
    d.set(339, 3, [sf] * spp)
    if tile:
        d.set(322, 4, tile)
        d.set(323, 4, tile)
        d.set(324, 4, [0])
        d.set(325, 4, [0])
    else:
        d.set(278, 4, rps or h)
        d.set(273, 4, [0])
        d.set(279, 4, [0])
    for tag, typ, v in extra:
        d.set(tag, typ, v)
    return d


def deflate_extra_rows(path):
    """A strip file whose last strip's stream holds a full strip's rows
    (libtiff reads the rows it needs and ignores the rest)."""
    w, h, rps = 50, 37, 16
    a = pixels(h, w, 1, "uint8", 7)[0]
    chunks = []
    for y0 in range(0, h, rps):
        rows = a[y0:y0 + rps]
        if rows.shape[0] < rps:  # pad the last strip to rps rows
            rows = np.vstack([rows, np.full((rps - rows.shape[0], w), 77, np.uint8)])
        chunks.append(zlib.compress(rows.tobytes()))
    write_tiff(path, [plain_ifd(w, h, 8, chunks, comp=8, rps=rps)])


def packbits_overrun(path):
    """A PackBits strip whose last literal run claims one byte more than
    the strip holds (GDAL reads it; the run is cut at the row's end)."""
    w, h = 40, 3
    chunks = []
    for y in range(h):
        row = bytes((x * 7 + y) & 255 for x in range(w))
        # two literal runs of 20: the second says 21 bytes, has 20
        chunks.append(bytes([19]) + row[:20] + bytes([20]) + row[20:])
    write_tiff(path, [plain_ifd(w, h, 8, chunks, comp=32773, rps=1)])


def truncated_file(path):
    """A tiled file cut off in the middle of its last tiles."""
    tmp = path + ".full.tif"
    gdal_write(tmp, pixels(200, 200, 1, "uint16", 9), _tiled(64) + ["COMPRESS=DEFLATE"])
    data = open(tmp, "rb").read()
    os.unlink(tmp)
    e, ifds = read_tiff_bytes(data)
    offs = ifds[0].tags[324][1]
    cut = sorted(offs)[-3] + 5  # three tiles lose their data
    open(path, "wb").write(data[:cut])


def read_tiff_bytes(data):
    with scratch_tif() as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
        return read_tiff(tmp)


def ifd_chain(kind):
    """A file with two overviews whose IFD chain goes wrong after IFD 1:
    "loop" points IFD 2's next back to IFD 1, "past_eof" points it past the
    end, "bad_ifd" points it at bytes that are no IFD (0 entries)."""
    def make(path):
        tmp = path + ".src.tif"
        gdal_write(tmp, pixels(150, 130, 1, "uint8", 11), _tiled(32) + ["COMPRESS=LZW"],
                   overviews=[2, 4])
        e, ifds = read_tiff(tmp)
        os.unlink(tmp)
        pos, nxt = write_tiff(path, ifds, e)
        with open(path, "r+b") as f:
            size = f.seek(0, 2)
            if kind == "loop":
                target = pos[1]
            elif kind == "past_eof":
                target = size + 1000
            else:
                f.write(b"\0\0\0\0\0\0\0\0")
                target = size
            f.seek(nxt[2])
            f.write(struct.pack(e + "I", target))
    return make


def with_page(page_maker, position):
    """A GDAL file with one more page (subfile type 0) at `position`; the
    page comes from page_maker's first IFD."""
    def make(path):
        tmp1, tmp2 = path + ".a.tif", path + ".b.tif"
        gdal_write(tmp1, pixels(60, 70, 1, "uint16", 12), _tiled(32) + ["COMPRESS=DEFLATE"],
                   overviews=[2])
        page_maker(tmp2)
        e, ifds = read_tiff(tmp1)
        _, extra = read_tiff(tmp2)
        for p in (tmp1, tmp2):
            os.unlink(p)
        ifds.insert(position, extra[0])
        write_tiff(path, ifds, e)
    return make


def unsupported_codec(code, bits=8, sf=1, spp=1, photo=1):
    def make(path):
        write_tiff(path, [plain_ifd(16, 16, bits, [b"\x01" * 64], comp=code, spp=spp, sf=sf,
                                    photo=photo)])
    return make


def overview_with_codec(code):
    """Full resolution fine, its overview in a codec cogfeed cannot read."""
    def make(path):
        tmp = path + ".src.tif"
        gdal_write(tmp, pixels(64, 64, 1, "uint8", 13), _tiled(32), overviews=[2])
        e, ifds = read_tiff(tmp)
        os.unlink(tmp)
        ifds[1].set(259, 3, code)
        write_tiff(path, ifds, e)
    return make


def ojpeg_no_spp(path):
    """Old-style JPEG (compression 6) without SamplesPerPixel or
    Photometric: libtiff, so GDAL, takes it as 3-sample YCbCr."""
    tmp = path + ".src.tif"
    gdal_write(tmp, pixels(32, 32, 3, "uint8", 14), ["COMPRESS=JPEG", "PHOTOMETRIC=YCBCR"])
    e, ifds = read_tiff(tmp)
    os.unlink(tmp)
    d = ifds[0]
    d.set(259, 3, 6)
    for t in (277, 262, 258):
        d.tags.pop(t, None)
    write_tiff(path, [d], e)


# --- old-style JPEG (compression 6) -----------------------------------------
# Nothing writes it any more, so these are built from GDAL's new-style JPEG
# strips (JPEGTABLESMODE=3: every table in JPEGTables, the same for all
# strips): a strip's stream is SOI SOF SOS <entropy data> EOI, and each
# strip's entropy data starts with DC predictors at zero, exactly what a
# restart interval is.  The layouts are the ones libtiff's tif_ojpeg.c
# reads (docs/reader.md).

def _jpeg_segments(stream):
    """[(marker, segment bytes incl. FF xx)] up to SOS, and the bytes after
    the SOS segment."""
    segs, p = [], 0
    while True:
        assert stream[p] == 0xFF
        m = stream[p + 1]
        if m in (0xD8, 0xD9):
            segs.append((m, stream[p:p + 2]))
            p += 2
            continue
        n = struct.unpack(">H", stream[p + 2:p + 4])[0]
        segs.append((m, stream[p:p + 2 + n]))
        p += 2 + n
        if m == 0xDA:
            return segs, stream[p:]


def _jpeg_strips(shape, photometric, rps, seed=21, data=None, tile=None):
    """GDAL JPEG strips (tiles of tile x tile pixels when `tile`) of a
    (bands, h, w) image (`data`, or pixels()): (tables segments, [(SOF,
    SOS, entropy data without EOI)] per strip)."""
    nb, h, w = shape
    opts = ["COMPRESS=JPEG", "JPEGTABLESMODE=3", "JPEG_QUALITY=85"]
    opts += _tiled(tile) if tile else ["BLOCKYSIZE=%d" % rps]
    if photometric:
        opts.append("PHOTOMETRIC=" + photometric)
    with scratch_tif() as tmp:
        gdal_write(tmp, pixels(h, w, nb, "uint8", seed) if data is None else data, opts)
        _, ifds = read_tiff(tmp)
    d = ifds[0]
    tables, _ = _jpeg_segments(bytes(d.get(347)) + b"\xff\xda\x00\x02")
    tables = [s for m, s in tables if m in (0xDB, 0xC4)]
    strips = []
    for c in d.chunks:
        segs, rest = _jpeg_segments(c)
        sof = next(s for m, s in segs if m in (0xC0, 0xC1))
        sos = next(s for m, s in segs if m == 0xDA)
        assert rest[-2:] == b"\xff\xd9"
        strips.append((sof, sos, rest[:-2]))
    return tables, strips


def _sof_height(sof, h):
    return sof[:5] + struct.pack(">H", h) + sof[7:]


def _table_parts(tables):
    """Old-style table tags' data: 64-byte Q tables, and 16 counts + values
    for each DC and AC Huffman table, by table id."""
    q, dc, ac = {}, {}, {}
    for s in tables:
        body = s[4:]
        if s[1] == 0xDB:
            while body:
                q[body[0] & 15] = body[1:65]
                body = body[65:]
        else:
            while body:
                n = sum(body[1:17])
                (ac if body[0] >> 4 else dc)[body[0] & 15] = body[1:17 + n]
                body = body[17 + n:]
    return q, dc, ac


def ojpeg_file(shape, layout, rps=None, photometric="YCBCR", sub=(2, 2), bad=None, data=None,
               tile=None):
    """An old-style JPEG file of a (bands, h, w) image.
    layout "whole":  JPEGInterchangeFormat is one complete stream of the
                     image (restart markers between strips when there are
                     several); the strips point into its entropy data.
    layout "tables": JPEGQ/DC/ACTables and JPEGRestartInterval tags, strips
                     of entropy data only.
    layout "header_jif": JPEGInterchangeFormat holds the header (SOI to
                     SOS), the strips the entropy data.
    layout "header_sos_strip0": JPEGInterchangeFormat holds the header up
                     to the frame (SOI, tables, SOF), strip 0 starts with
                     the SOS.
    layout "strip_streams": each strip a complete stream, nothing else.
    bad: a malformation (see the fixtures).  data: the pixels (uint8,
    `shape`), pixels() by default.  tile: tiles of tile x tile pixels
    (layout "tables" only: each tile one restart interval, as libtiff
    reads them)."""
    nb, h, w = shape
    def make(path):
        r = tile or rps or h
        tables, strips = _jpeg_strips(shape, photometric, r, data=data, tile=tile)
        sof, sos = strips[0][0], strips[0][1]
        d = Ifd()
        d.set(256, 4, w)
        d.set(257, 4, h)
        d.set(258, 3, [8] * nb)
        d.set(259, 3, 6)
        d.set(262, 3, 6 if nb == 3 else 1)
        d.set(277, 3, nb)
        if tile:
            assert layout == "tables"
            d.set(322, 3, tile)
            d.set(323, 3, tile)
            d.set(324, 4, [0])
            d.set(325, 4, [0])
        else:
            d.set(278, 4, r)
            d.set(273, 4, [0])
            d.set(279, 4, [0])
        if nb == 3:
            d.set(530, 3, list(sub))
        patch = {}
        if layout == "whole":
            # entropy data of all strips, RSTn between them, in one stream
            mcus = -(-w // (8 * sub[0])) * (r // (8 * sub[1])) if nb == 3 else \
                -(-w // 8) * (r // 8)
            dri = b"\xff\xdd\x00\x04" + struct.pack(">H", mcus) if len(strips) > 1 else b""
            head = b"\xff\xd8" + b"".join(tables) + dri + \
                _sof_height(sof, h - 9 if bad == "sof_height" else h) + sos
            body, parts = b"", []
            for k, (_, _, ent) in enumerate(strips):
                if k:
                    body += bytes([0xFF, 0xD0 + (k - 1) % 8])
                parts.append((len(head) + len(body), len(ent)))
                body += ent
            stream = head + body + b"\xff\xd9"
            if bad == "truncated":
                stream = stream[:len(stream) * 2 // 3]
            d.chunks = [stream]
            d.set(513, 4, 0)
            d.set(514, 4, 0)
            patch["whole"] = (parts, len(stream))
        elif layout == "header_jif":
            # JPEGInterchangeFormat holds the header only, up to its SOS
            head = b"\xff\xd8" + b"".join(tables) + _sof_height(sof, h) + sos
            d.chunks = [head] + [s[2] for s in strips]
            d.set(513, 4, 0)
            d.set(514, 4, 0)
            patch["header"] = len(head)
        elif layout == "header_sos_strip0":
            # JPEGInterchangeFormat holds a complete header up to the
            # frame, the scan header starts strip 0 (libtiff reads the
            # stream on into the strips)
            head = b"\xff\xd8" + b"".join(tables) + _sof_height(sof, h)
            d.chunks = [head, sos + strips[0][2]] + [s[2] for s in strips[1:]]
            d.set(513, 4, 0)
            d.set(514, 4, 0)
            patch["header"] = len(head)
        elif layout == "tables":
            q, dc, ac = _table_parts(tables)
            # the tables each component uses, as the SOF and SOS say
            qids = [sof[12 + 3 * k] for k in range(nb)]
            hids = [sos[6 + 2 * k] for k in range(nb)]
            d.set(512, 3, 1)
            d.set(515, 3, 0)
            nq = {"one_qtable": 1, "qtables_count": 4}.get(bad, nb)
            ids_q = (qids * 2)[:nq]
            d.set(519, 4, [0] * nq)
            d.set(520, 4, [0] * nb)
            d.set(521, 4, [0] * nb)
            blob = b"".join(q[i] for i in ids_q) + b"".join(dc[i >> 4] for i in hids) + \
                b"".join(ac[i & 15] for i in hids)
            datas = [s[2] for s in strips]
            if bad == "truncated":
                datas[-1] = datas[-1][:len(datas[-1]) // 3]
            d.chunks = datas
            patch["tables"] = (hids, dc, ac, blob, nq)
        else:
            d.chunks = [b"\xff\xd8" + b"".join(tables) + s[0] + s[1] + s[2] + b"\xff\xd9"
                        for s in strips]
        e = "<"
        ifd_at, _ = write_tiff(path, [d], e)
        out = bytearray(open(path, "rb").read())
        if "whole" in patch:
            parts, n = patch["whole"]
            at = _tag_value(out, e, ifd_at[0], 273)[0]
            _patch_tag(out, e, ifd_at[0], 513, struct.pack(e + "I", at))
            _patch_tag(out, e, ifd_at[0], 514, struct.pack(e + "I", n))
            _set_array(out, e, ifd_at[0], 273, [at + o for o, _ in parts])
            _set_array(out, e, ifd_at[0], 279, [c for _, c in parts])
        if "header" in patch:
            offs = _tag_value(out, e, ifd_at[0], 273)
            cnts = _tag_value(out, e, ifd_at[0], 279)
            _patch_tag(out, e, ifd_at[0], 513, struct.pack(e + "I", offs[0]))
            _patch_tag(out, e, ifd_at[0], 514, struct.pack(e + "I", patch["header"]))
            _set_array(out, e, ifd_at[0], 273, offs[1:])
            _set_array(out, e, ifd_at[0], 279, cnts[1:])
        if "tables" in patch:
            hids, dc, ac, blob, nq = patch["tables"]
            base = len(out)
            out += blob
            qo = [base + 64 * k for k in range(nq)]
            p = base + 64 * nq
            dco, aco = [], []
            for i in hids:
                dco.append(p)
                p += len(dc[i >> 4])
            for i in hids:
                aco.append(p)
                p += len(ac[i & 15])
            if bad == "table_past_eof":
                aco[-1] = len(out) + 1000
            _set_array(out, e, ifd_at[0], 519, qo)
            _set_array(out, e, ifd_at[0], 520, dco)
            _set_array(out, e, ifd_at[0], 521, aco)
        with open(path, "wb") as f:
            f.write(out)
    return make


def _tag_value(out, e, ifd_off, tag):
    n = struct.unpack(e + "H", out[ifd_off:ifd_off + 2])[0]
    for i in range(n):
        p = ifd_off + 2 + 12 * i
        t, typ, cnt = struct.unpack(e + "HHI", out[p:p + 8])
        if t == tag:
            size = TYPE_SIZE[typ] * cnt
            vo = p + 8 if size <= 4 else struct.unpack(e + "I", out[p + 8:p + 12])[0]
            return list(struct.unpack(e + FMT[typ] * cnt, out[vo:vo + size]))
    raise KeyError(tag)


def _set_array(out, e, ifd_off, tag, values):
    """Set a LONG array tag; one that does not fit where it is goes to the
    end of the file."""
    n = struct.unpack(e + "H", out[ifd_off:ifd_off + 2])[0]
    raw = struct.pack(e + "I" * len(values), *values)
    for i in range(n):
        p = ifd_off + 2 + 12 * i
        t, typ, cnt = struct.unpack(e + "HHI", out[p:p + 8])
        if t != tag:
            continue
        if len(raw) <= 4:
            out[p + 2:p + 8] = struct.pack(e + "HI", 4, len(values))
            out[p + 8:p + 12] = raw + b"\0" * (4 - len(raw))
        elif cnt * TYPE_SIZE[typ] >= len(raw) and cnt * TYPE_SIZE[typ] > 4:
            vo = struct.unpack(e + "I", out[p + 8:p + 12])[0]
            out[p + 2:p + 8] = struct.pack(e + "HI", 4, len(values))
            out[vo:vo + len(raw)] = raw
        else:
            if len(out) % 2:
                out.append(0)
            at = len(out)
            out += raw
            out[p + 2:p + 12] = struct.pack(e + "HII", 4, len(values), at)
        return
    raise KeyError(tag)


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def checked_in(name):
    """A tiny file kept in tests/python/data: CCITT Group 3 with 2-D coding,
    which GDAL cannot write, was written once with libtiff's encoder through
    Pillow (TIFFTAG 292 T4Options set; see data/README)."""
    def make(path):
        with open(os.path.join(DATA, name), "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
    return make


def metadata_file(path):
    data = pixels(40, 50, 3, "int16", 15)
    bands = [{"description": "red & <edge>", "scale": 0.5, "offset": 10.0, "unit": "m"},
             {"description": "nir", "scale": 0.001, "offset": -3.25, "unit": "reflectance"},
             {}]
    for b, bm in enumerate(bands):
        bm["tags"] = {"BAND_KEY": "band %d" % (b + 1)}
    tags = {
        "TIFFTAG_DATETIME": "2024:05:06 07:08:09",
        "TIFFTAG_SOFTWARE": "cogfeed tests",
        "TIFFTAG_ARTIST": "someone",
        "TIFFTAG_IMAGEDESCRIPTION": "a \"quoted\" description",
        "TIFFTAG_XRESOLUTION": "300",
        "TIFFTAG_YRESOLUTION": "150.5",
        "TIFFTAG_RESOLUTIONUNIT": "3",
        "MISSION": "S2B & co <x>",
        "CLOUD_COVER": "12.5",
    }
    gdal_write(path, data, _tiled(32) + ["COMPRESS=DEFLATE"], nodata=-999,
               meta={"tags": tags, "bands": bands})


def metadata_domains_file(path):
    """GDAL_METADATA with domains and items GDAL's writer does not make
    itself (other writers do): read the way GDAL reads them."""
    xml = ('<GDALMetadata>\n'
           '  <Item name="PLAIN">v1</Item>\n'
           '  <Item name="IN_DOMAIN" domain="PROCESSING">level-2 &amp;amp; more</Item>\n'
           '  <Item name="EMPTY"/>\n'
           '  <Item name="BANDITEM" sample="1" domain="STATS">7</Item>\n'
           '  <Item name="DESCRIPTION" sample="0" role="description">first</Item>\n'
           '  <Item name="SCALE" sample="1" role="scale">2.5</Item>\n'
           '  <Item name="NOBAND" sample="9">ignored</Item>\n'
           '</GDALMetadata>\n').encode() + b"\0"
    a = pixels(20, 30, 2, "uint16", 16)
    chunks = [a.transpose(1, 2, 0).tobytes()]
    d = plain_ifd(30, 20, 16, chunks, spp=2, extra=[(42112, 2, xml), (306, 2, b"2001:02:03 04:05:06\0"),
                                                     (269, 2, b"doc name\0"), (316, 2, b"host\0"),
                                                     (33432, 2, b"(c) nobody\0")])
    write_tiff(path, [d])


FIXTURES = [
    # --- colour spaces GDAL converts ----------------------------------------
    _fx("cmyk_u8x4_tiled_ovr", "CMYK", gdal_file((4, 130, 150), "uint8",
        ["PHOTOMETRIC=CMYK", "COMPRESS=DEFLATE"] + _tiled(64), overviews=[2]), raw=True),
    _fx("cmyk_u8x5_strips", "CMYK", gdal_file((5, 61, 77), "uint8",
        ["PHOTOMETRIC=CMYK", "COMPRESS=LZW", "BLOCKYSIZE=9"]), raw=True),
    _fx("cmyk_u8x4_jpeg", "CMYK", gdal_file((4, 64, 80), "uint8",
        ["PHOTOMETRIC=CMYK", "COMPRESS=JPEG"] + _tiled(32)), raw=True),
    _fx("cmyk_u16x4_raw", "CMYK", gdal_file((4, 40, 50), "uint16", ["PHOTOMETRIC=CMYK"])),
    _fx("cmyk_u8x4_band", "CMYK", gdal_file((4, 30, 40), "uint8",
        ["PHOTOMETRIC=CMYK", "INTERLEAVE=BAND"]), expect="refuse",
        reason="band-interleaved 8-bit CMYK", raw=True),
    _fx("cielab_u8", "CIELab", gdal_file((3, 90, 110), "uint8",
        ["PHOTOMETRIC=CIELAB", "COMPRESS=DEFLATE"] + _tiled(32)), raw=True),
    _fx("cielab_u8_whitepoint_d65", "CIELab", rewrite(gdal_file((3, 50, 60), "uint8",
        ["PHOTOMETRIC=CIELAB"]), lab_white_point), raw=True),
    _fx("cmyk_u8x4_inkset2_raw", "CMYK", rewrite(gdal_file((4, 30, 40), "uint8",
        ["PHOTOMETRIC=CMYK"]), inkset_2)),
    _fx("cielab_u16_raw", "CIELab", gdal_file((3, 30, 40), "uint16", ["PHOTOMETRIC=CIELAB"])),
    _fx("cielab_u8x4_raw", "CIELab", gdal_file((4, 30, 40), "uint8", ["PHOTOMETRIC=CIELAB"])),
    _fx("icclab_u8", "ICCLab", gdal_file((3, 30, 40), "uint8", ["PHOTOMETRIC=ICCLAB"])),
    _fx("itulab_u8", "ITULab", gdal_file((3, 30, 40), "uint8", ["PHOTOMETRIC=ITULAB"])),
    _fx("ycbcr22_lzw_strips", "YCbCr", ycbcr_file(75, 50, 2, 2, "LZW", rps=16), raw=True),
    _fx("ycbcr21_none_strips", "YCbCr", ycbcr_file(61, 33, 2, 1, "NONE", rps=8), raw=True),
    _fx("ycbcr22_deflate_tiled", "YCbCr", ycbcr_file(70, 45, 2, 2, "DEFLATE", tile=32), raw=True),
    _fx("ycbcr42_none", "YCbCr", ycbcr_file(37, 23, 4, 2, "NONE"), raw=True),
    _fx("ycbcr44_lzw", "YCbCr", ycbcr_file(41, 29, 4, 4, "LZW", rps=12), raw=True),
    _fx("ycbcr11_none_coef", "YCbCr", ycbcr_file(30, 20, 1, 1, "NONE",
        coef=[2990, 10000, 5870, 10000, 1140, 10000],
        refbw=[16, 1, 235, 1, 128, 1, 240, 1, 128, 1, 240, 1]), raw=True),
    _fx("ycbcr12_none", "YCbCr", ycbcr_file(33, 21, 1, 2, "NONE"), raw=True),
    # --- FillOrder 2 ---------------------------------------------------------
    _fx("fillorder2_u16_strips", "FillOrder", rewrite(gdal_file((1, 40, 33), "uint16",
        ["BLOCKYSIZE=7"]), fill_order_2)),
    _fx("fillorder2_u8x3_lzw", "FillOrder", rewrite(gdal_file((3, 40, 50), "uint8",
        ["COMPRESS=LZW", "BLOCKYSIZE=10"]), fill_order_2)),
    _fx("fillorder2_f32_deflate_p3_tiled", "FillOrder", rewrite(gdal_file((1, 70, 70),
        "float32", ["COMPRESS=DEFLATE", "PREDICTOR=3"] + _tiled(32)), fill_order_2)),
    _fx("fillorder2_g4", "FillOrder", rewrite(bilevel_file((1, 90, 300),
        ["COMPRESS=CCITTFAX4"]), fill_order_2)),
    # --- bit depths GDAL widens ----------------------------------------------
    _fx("nbits2_u8", "bits", nbits_file((1, 33, 45), "uint8", 2, [])),
    _fx("nbits4_u8x3_pixel", "bits", nbits_file((3, 31, 29), "uint8", 4,
        ["COMPRESS=DEFLATE", "BLOCKYSIZE=5"])),
    _fx("nbits4_u8x2_band_tiled", "bits", nbits_file((2, 50, 70), "uint8", 4,
        ["INTERLEAVE=BAND", "COMPRESS=LZW"] + _tiled(32))),
    _fx("nbits7_u8", "bits", nbits_file((1, 20, 21), "uint8", 7, ["COMPRESS=PACKBITS"])),
    _fx("nbits12_u16_tiled", "bits", nbits_file((1, 80, 90), "uint16", 12,
        ["COMPRESS=DEFLATE"] + _tiled(32))),
    _fx("nbits12_u16x3_be", "bits", nbits_file((3, 25, 27), "uint16", 12, ["ENDIANNESS=BIG"])),
    _fx("nbits14_u16", "bits", nbits_file((1, 30, 31), "uint16", 14, ["COMPRESS=LZMA"])),
    _fx("nbits24_u32", "bits", nbits_file((1, 20, 19), "uint32", 24, [])),
    _fx("nbits24_u32_be", "bits", nbits_file((1, 20, 19), "uint32", 24, ["ENDIANNESS=BIG"])),
    _fx("nbits31_u32_lzw", "bits", nbits_file((2, 21, 23), "uint32", 31, ["COMPRESS=LZW"])),
    _fx("nbits17_u32", "bits", nbits_file((1, 9, 41), "uint32", 17, [])),
    # --- float16 / float24 ---------------------------------------------------
    _fx("float16", "float16", gdal_file((1, 60, 70), "float32", ["NBITS=16"])),
    _fx("float16_x2_deflate_p3_tiled", "float16", gdal_file((2, 70, 90), "float32",
        ["NBITS=16", "COMPRESS=DEFLATE", "PREDICTOR=3"] + _tiled(32), nodata=-50)),
    _fx("float16_be_lzw", "float16", gdal_file((1, 30, 40), "float32",
        ["NBITS=16", "COMPRESS=LZW", "ENDIANNESS=BIG"])),
    # --- complex -------------------------------------------------------------
    _fx("cint16", "complex", gdal_file((1, 60, 70), "cint16", ["COMPRESS=DEFLATE"] + _tiled(32))),
    _fx("cint16_x2_be", "complex", gdal_file((2, 30, 40), "cint16", ["ENDIANNESS=BIG"])),
    _fx("cint32_lzw", "complex", gdal_file((1, 30, 40), "cint32", ["COMPRESS=LZW"])),
    _fx("cfloat32_band", "complex", gdal_file((2, 30, 40), "complex64",
        ["INTERLEAVE=BAND", "COMPRESS=ZSTD"] + _tiled(16))),
    _fx("cfloat64_be", "complex", gdal_file((1, 30, 40), "complex128", ["ENDIANNESS=BIG"])),
    _fx("cfloat64_nodata", "complex", gdal_file((1, 30, 40), "complex128", [], nodata=-1)),
    # --- codecs --------------------------------------------------------------
    _fx("lzma_u16_p2_tiled_ovr", "LZMA", gdal_file((2, 130, 110), "uint16",
        ["COMPRESS=LZMA", "PREDICTOR=2"] + _tiled(64), overviews=[2])),
    _fx("lzma_f32_p3_strips", "LZMA", gdal_file((1, 50, 60), "float32",
        ["COMPRESS=LZMA", "PREDICTOR=3", "BLOCKYSIZE=13"])),
    _fx("ccittrle", "CCITT", bilevel_file((1, 95, 333), ["COMPRESS=CCITTRLE"])),
    _fx("ccittfax3", "CCITT", bilevel_file((1, 95, 333), ["COMPRESS=CCITTFAX3"])),
    _fx("ccittfax4", "CCITT", bilevel_file((1, 95, 333), ["COMPRESS=CCITTFAX4"])),
    _fx("ccittfax4_wide", "CCITT", bilevel_file((1, 40, 6000), ["COMPRESS=CCITTFAX4"])),
    _fx("ccittfax4_tiled", "CCITT", bilevel_file((1, 100, 130),
        ["COMPRESS=CCITTFAX4"] + _tiled(64))),
    _fx("ccittfax3_strips", "CCITT", bilevel_file((1, 77, 250),
        ["COMPRESS=CCITTFAX3", "BLOCKYSIZE=10"])),
    # fax pages with a black right edge coded 1728 wide in files that say
    # 1720 and 1700 (one strip each): libtiff (so GDAL) decodes them with
    # its row-end cleanup and no error; cogfeed fell out of step ("uncompressed
    # mode", "vertical code left of a0")
    _fx("ccittfax4_page_1720", "CCITT", rewrite(fax_page((1, 1100, 1728),
        ["COMPRESS=CCITTFAX4", "BLOCKYSIZE=1100"], seed=11, border=18), narrower(1720))),
    _fx("ccittfax4_page_1700_300rows", "CCITT", rewrite(fax_page((1, 300, 1728),
        ["COMPRESS=CCITTFAX4", "BLOCKYSIZE=300"], seed=9, border=40), narrower(1700))),
    _fx("ccittfax4_page_2592", "CCITT", fax_page((1, 300, 2592),
        ["COMPRESS=CCITTFAX4", "BLOCKYSIZE=300"], seed=8)),
    _fx("ccittfax3_2d", "CCITT", checked_in("ccitt_g3_2d.tif")),
    _fx("ccittfax3_2d_fillbits", "CCITT", checked_in("ccitt_g3_2d_fillbits.tif")),
    _fx("ccittfax3_2d_fillorder2", "CCITT", rewrite(checked_in("ccitt_g3_2d.tif"),
                                                    fill_order_2)),
    _fx("jpeg12_refused", "JPEG", unsupported_codec(7, bits=12), expect="refuse",
        reason="12-bit JPEG"),
    _fx("ojpeg_no_spp", "OJPEG", ojpeg_no_spp, expect="refuse",
        reason="quantization table 0, which strip 0 does not define"),
    # old-style JPEG, in the layouts libtiff (so GDAL) reads
    _fx("ojpeg_if_ycbcr22", "OJPEG", ojpeg_file((3, 37, 45), "whole")),
    _fx("ojpeg_if_ycbcr11", "OJPEG", ojpeg_file((3, 30, 41), "whole", photometric="RGB",
                                                sub=(1, 1))),
    _fx("ojpeg_if_strips", "OJPEG", ojpeg_file((3, 70, 45), "whole", rps=16)),
    _fx("ojpeg_if_strips_11", "OJPEG", ojpeg_file((3, 70, 45), "whole", rps=8,
                                                  photometric="RGB", sub=(1, 1))),
    _fx("ojpeg_if_header_strips", "OJPEG", ojpeg_file((3, 75, 61), "header_jif", rps=32)),
    _fx("ojpeg_header_sos_strip0", "OJPEG", ojpeg_file((3, 75, 61), "header_sos_strip0",
                                                        rps=32)),
    _fx("ojpeg_header_sos_strip0_one", "OJPEG", ojpeg_file((3, 37, 45), "header_sos_strip0")),
    _fx("ojpeg_strip_stream", "OJPEG", ojpeg_file((3, 37, 45), "strip_streams")),
    _fx("ojpeg_tables_restart", "OJPEG", ojpeg_file((3, 70, 45), "tables", rps=16)),
    _fx("ojpeg_tables_11", "OJPEG", ojpeg_file((3, 50, 47), "tables", rps=8,
                                               photometric="RGB", sub=(1, 1))),
    _fx("ojpeg_tables_one_strip", "OJPEG", ojpeg_file((3, 37, 45), "tables")),
    # tiled: one column of tiles (libtiff's frame is one tile wide)
    _fx("ojpeg_tables_tiled", "OJPEG", ojpeg_file((3, 70, 29), "tables", tile=32)),
    _fx("ojpeg_tables_tiled_11", "OJPEG", ojpeg_file((3, 50, 16), "tables", tile=16,
                                                     photometric="RGB", sub=(1, 1))),
    _fx("ojpeg_tables_one_qtable", "OJPEG", ojpeg_file((3, 70, 45), "tables", rps=16,
                                                       bad="one_qtable")),
    # ... and the ones GDAL does not read
    _fx("ojpeg_grey_refused", "OJPEG", ojpeg_file((1, 33, 50), "whole", photometric=None),
        expect="refuse", reason="PhotometricInterpretation 1 with 1 samples"),
    _fx("ojpeg_strip_streams_refused", "OJPEG", ojpeg_file((3, 70, 45), "strip_streams",
        rps=16), expect="refuse", reason="strip 0 is 16 rows high, the image 70"),
    _fx("ojpeg_sof_height_refused", "OJPEG", ojpeg_file((3, 37, 45), "whole",
        bad="sof_height"), expect="refuse", reason="unexpected height"),
    _fx("ojpeg_qtables_count_refused", "OJPEG", ojpeg_file((3, 70, 45), "tables", rps=16,
        bad="qtables_count"), expect="refuse", reason="JPEGQTables has 4 values"),
    # GDAL reads this one, but only the first column of tiles right (no
    # error): refused, saying so
    _fx("tiled_ojpeg_columns_refused", "OJPEG", ojpeg_file((3, 70, 45), "tables", tile=32),
        expect="refuse", reason="tiled with 2 tiles across"),
    _fx("ojpeg_table_past_eof_refused", "OJPEG", ojpeg_file((3, 70, 45), "tables", rps=16,
        bad="table_past_eof"), expect="refuse", reason="past the end of the file"),
    # --- what GDAL tolerates -------------------------------------------------
    _fx("deflate_trailing_bytes", "tolerate", rewrite(gdal_file((1, 50, 60), "uint16",
        ["COMPRESS=DEFLATE", "BLOCKYSIZE=7"]), trailing_bytes)),
    _fx("deflate_extra_rows", "tolerate", deflate_extra_rows),
    _fx("packbits_overrun", "tolerate", packbits_overrun),
    _fx("tiles_in_stripoffsets", "tolerate", rewrite(gdal_file((1, 70, 80), "uint8",
        ["COMPRESS=LZW"] + _tiled(32)), tiles_as_strips)),
    _fx("truncated", "tolerate", truncated_file),
    # uncompressed chunks: libtiff reads the strip (tile) size from the
    # offset, whatever the byte count says (too short, too long for the
    # bits per sample, even past the end of the file)
    _fx("none_counts_half_strips", "tolerate", with_counts(gdal_file((1, 50, 100), "uint16",
        ["BLOCKYSIZE=10"]), lambda c: [v // 2 for v in c])),
    _fx("none_count_as_1bit", "tolerate", with_counts(gdal_file((1, 50, 100), "uint8",
        ["BLOCKYSIZE=50"]), lambda c: [v // 8 for v in c])),
    _fx("none_count_bilevel_as_8bit", "tolerate", with_counts(bilevel_file((1, 50, 101),
        ["BLOCKYSIZE=50"]), lambda c: [50 * 101])),
    _fx("none_count_nbits12_as_16", "tolerate", with_counts(nbits_file((1, 30, 41), "uint16",
        12, ["BLOCKYSIZE=30"]), lambda c: [30 * 41 * 2])),
    _fx("none_counts_tiles_short", "tolerate", with_counts(gdal_file((2, 70, 80), "int16",
        _tiled(32)), lambda c: [v - 3 for v in c])),
    # ... but not what GDAL reads through libtiff's RGBA interface: a
    # short strip fails there, in GDAL and in cogfeed
    _fx("none_counts_cmyk_short", "tolerate", with_counts(gdal_file((4, 30, 40), "uint8",
        ["PHOTOMETRIC=CMYK", "BLOCKYSIZE=10"]), lambda c: [v - 3 for v in c])),
    _fx("ifd_loop", "tolerate", ifd_chain("loop")),
    _fx("ifd_past_eof", "tolerate", ifd_chain("past_eof")),
    _fx("ifd_bad_trailing", "tolerate", ifd_chain("bad_ifd")),
    _fx("overviews_in_subifds", "tolerate", rewrite(gdal_file((1, 130, 150), "uint16",
        ["COMPRESS=DEFLATE"] + _tiled(32), overviews=[2, 4]), move_overviews_to_subifds)),
    # --- refused at open, by name; pages not read are not ---------------------
    _fx("jbig_refused", "refuse", unsupported_codec(34661), expect="refuse", reason="JBIG"),
    _fx("unknown_codec_refused", "refuse", unsupported_codec(40000), expect="refuse",
        reason="compression 40000 is unknown"),
    _fx("overview_jbig_refused", "refuse", overview_with_codec(34661), expect="refuse",
        reason="IFD 1 (overview 1): JBIG"),
    _fx("float8_refused", "refuse", unsupported_codec(1, bits=8, sf=3), expect="refuse",
        reason="floating-point samples of 8 bits"),
    _fx("page_with_jbig_not_read", "pages", with_page(unsupported_codec(34661), 2)),
    _fx("page_with_bits40_not_read", "pages", with_page(unsupported_codec(1, bits=40), 1)),
    # --- metadata ------------------------------------------------------------
    _fx("metadata_gdal", "metadata", metadata_file),
    _fx("metadata_domains", "metadata", metadata_domains_file),
]

FIXTURES_BY_NAME = {f.name: f for f in FIXTURES}


def default_dir():
    from conformance import testdata_root
    return os.path.join(testdata_root(), "formats")


def fixture_path(name, directory=None):
    """Path of fixture `name`, made if not cached."""
    directory = directory or default_dir()
    os.makedirs(directory, exist_ok=True)
    tag = hashlib.sha256(("%s|%s|%s" % (name, GENERATOR_VERSION, rasterio.__gdal_version__))
                         .encode()).hexdigest()[:16]
    path = os.path.join(directory, "%s-%s.tif" % (name, tag))
    if os.path.exists(path):
        return path
    tmp = path + ".%d.tmp.tif" % os.getpid()
    try:
        FIXTURES_BY_NAME[name].make(tmp)
        os.replace(tmp, path)
    finally:
        for p in (tmp,):
            if os.path.exists(p):
                os.unlink(p)
    return path


def generate_all(directory=None):
    paths = {f.name: fixture_path(f.name, directory) for f in FIXTURES}
    d = directory or default_dir()
    keep = {os.path.basename(p) for p in paths.values()}
    for fn in os.listdir(d):
        if fn.endswith(".tif") and fn not in keep and ".tmp." not in fn:
            try:
                os.unlink(os.path.join(d, fn))
            except FileNotFoundError:
                pass
    return paths


if __name__ == "__main__":
    import sys
    ps = generate_all(sys.argv[1] if len(sys.argv) > 1 else None)
    for n, p in ps.items():
        print("%-34s %7d  %s" % (n, os.path.getsize(p), p))
