"""Craft malformed TIFF files (reliability items 1-25, and 26: the decoders
of the formats of issue 19) into a folder.

The files are made at test time and never committed.  Each case is a small
valid 64x64 tiled image (4 uncompressed 32x32 tiles of uint8) that is then
broken in one way.  `make_all(folder)` returns a list of Case records:

  expect = "open"  cogfeed.open must raise cogfeed.Error (and `cogfeed info`
                   must exit 1): the header is broken.
  expect = "read"  the header may pass, but open or read must raise: the
                   tile data is broken.
  expect = "ok"    the file is odd but usable: open and read must not crash
                   or hang; they may succeed.

Usage: python3 make_malformed.py OUTDIR   (writes the files, lists them)
"""

import os
import struct
import sys
import zlib
from collections import namedtuple

Case = namedtuple("Case", "name path item expect what")


class Sparse:
    """A file of `size` bytes: `head`, then a hole (zeros that take no
    disk space).  The crafted tile indexes are 256 MiB files of this kind."""

    def __init__(self, head, size):
        self.head, self.size = bytes(head), size


def crafted_index(nifds, side, offsets_at, counts_at, size):
    """nifds IFDs of side x side tiles of 1x1 pixel (side^2 tiles each),
    whose TileOffsets and TileByteCounts are BYTE arrays at offsets_at and
    counts_at, in a hole of zeros (every tile sparse), in a file of `size`
    bytes: the header a server must send is a few KB, the index it
    declares 16 bytes per tile."""
    n = side * side
    head = bytearray(b"II*\0" + struct.pack("<I", 8))
    for j in range(nifds):
        pos = len(head)
        tags = [(254, 4, 1, 1 if j else 0), (256, 4, 1, side), (257, 4, 1, side),
                (258, 3, 1, 8), (259, 3, 1, 1), (262, 3, 1, 1), (277, 3, 1, 1),
                (322, 4, 1, 1), (323, 4, 1, 1), (324, 1, n, offsets_at),
                (325, 1, n, counts_at)]
        head += struct.pack("<H", len(tags))
        for tag, typ, count, v in tags:
            val = struct.pack("<H", v) + b"\0\0" if typ == 3 else struct.pack("<I", v)
            head += struct.pack("<HHI", tag, typ, count) + val
        nxt = pos + 2 + 12 * len(tags) + 4 if j + 1 < nifds else 0
        head += struct.pack("<I", nxt)
    assert len(head) <= min(offsets_at, counts_at)
    return Sparse(head, size)

TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8,
             11: 4, 12: 8, 13: 4, 16: 8, 17: 8, 18: 8}
FMT = {1: "B", 3: "H", 4: "I", 16: "Q", 12: "d", 11: "f"}


class Tiff:
    """Minimal TIFF/BigTIFF writer: header | data area | IFD, data | ..."""

    def __init__(self, big=False, be=False):
        self.big, self.be = big, be
        self.e = ">" if be else "<"
        self.area = bytearray()
        self.ifds = []          # list of lists of (tag, type, count, bytes)
        self.ifd_off = []
        self.entry_pos = []     # per IFD: {tag: file offset of the entry}
        self.next_pos = []

    def hsize(self):
        return 16 if self.big else 8

    def data(self, b):
        """Put bytes in the data area; returns their file offset."""
        off = self.hsize() + len(self.area)
        self.area += b
        return off

    def ifd(self):
        self.ifds.append([])

    def tag(self, tag, typ, values=None, count=None, raw=None):
        if raw is None:
            if isinstance(values, (bytes, bytearray)):
                raw = bytes(values)
            else:
                if not isinstance(values, (list, tuple)):
                    values = [values]
                raw = struct.pack(self.e + FMT[typ] * len(values), *values)
        if count is None:
            count = len(raw) // TYPE_SIZE.get(typ, 1)
        self.ifds[-1].append((tag, typ, count, raw))

    def build(self):
        e, big = self.e, self.big
        inl, esz = (8, 20) if big else (4, 12)
        cnt_fmt, off_fmt = ("Q", "Q") if big else ("H", "I")
        out = bytearray(self.hsize()) + self.area
        if len(out) % 2:
            out += b"\0"
        self.ifd_off, self.entry_pos, self.next_pos = [], [], []
        for tags in self.ifds:
            pos = len(out)
            self.ifd_off.append(pos)
            n = len(tags)
            data = pos + struct.calcsize(cnt_fmt) + n * esz + inl
            body = bytearray(struct.pack(e + cnt_fmt, n))
            extra = bytearray()
            ent = {}
            for tag, typ, count, raw in tags:
                ent.setdefault(tag, pos + len(body))
                head = struct.pack(e + "HH" + ("Q" if big else "I"), tag, typ,
                                   count)
                if len(raw) <= inl:
                    val = raw + b"\0" * (inl - len(raw))
                else:
                    val = struct.pack(e + off_fmt, data + len(extra))
                    extra += raw + (b"\0" if len(raw) % 2 else b"")
                body += head + val
            self.entry_pos.append(ent)
            self.next_pos.append(pos + len(body))
            body += b"\0" * inl
            out += body + extra
        for i, p in enumerate(self.next_pos):
            nxt = self.ifd_off[i + 1] if i + 1 < len(self.ifd_off) else 0
            out[p:p + inl] = struct.pack(e + off_fmt, nxt)
        out[0:2] = b"MM" if self.be else b"II"
        if big:
            out[2:8] = struct.pack(e + "HHH", 43, 8, 0)
            out[8:16] = struct.pack(e + "Q", self.ifd_off[0])
        else:
            out[2:8] = struct.pack(e + "HI", 42, self.ifd_off[0])
        return out

    def patch(self, buf, pos, value, size):
        fmt = {2: "H", 4: "I", 8: "Q"}[size]
        buf[pos:pos + size] = struct.pack(self.e + fmt, value)

    def value_pos(self, i, tag):
        """Offset of the value/offset field of tag in IFD i."""
        return self.entry_pos[i][tag] + (12 if self.big else 8)


def image(t, width=64, height=64, tile=32, spp=1, bits=8, comp=1,
          tiles=None, skip=(), subfile=0, photometric=1, planar=1, sf=None,
          counts=None, offsets=None, extra=()):
    """Add an image IFD; `tiles` are the tile payloads (default: 32x32 bytes
    of a gradient).  Returns nothing; tags in `skip` are left out."""
    across, down = -(-width // tile), -(-height // tile)
    n = across * down * (spp if planar == 2 else 1)
    if tiles is None:
        size = tile * tile * (1 if planar == 2 else spp) * bits // 8
        tiles = [bytes((k * 7 + j) & 255 for j in range(size)) for k in range(n)]
    offs = [t.data(b) for b in tiles]
    cnts = [len(b) for b in tiles]
    if offsets is not None:
        offs = offsets
    if counts is not None:
        cnts = counts
    at = 16 if t.big else 4
    t.ifd()
    tags = [
        (254, 4, subfile), (256, 4, width), (257, 4, height),
        (258, 3, [bits] * spp), (259, 3, comp), (262, 3, photometric),
        (277, 3, spp), (284, 3, planar), (322, 4, tile), (323, 4, tile),
        (324, at, offs), (325, at, cnts),
    ]
    if sf is not None:
        tags.append((339, 3, [sf] * spp))
    for tag, typ, v in tags:
        if tag not in skip and not (tag == 254 and not subfile):
            t.tag(tag, typ, v)
    for tag, typ, v in extra:
        t.tag(tag, typ, v)


def good(big=False, be=False, **kw):
    t = Tiff(big, be)
    image(t, **kw)
    return t, t.build()


# Old-style JPEG pieces: a flat Q table, and Huffman tables of one 2-bit
# code each (DC category 0, AC end of block), so that 3 zero bytes are one
# 2x2 MCU of flat gray.
OJ_Q = bytes([1] * 64)
OJ_DC = bytes([0, 1] + [0] * 14 + [0])
OJ_AC = bytes([0, 1] + [0] * 14 + [0])


def ojpeg_strips(rps=16, strips=None, tables=None, jif=None, extra=(), counts=None,
                 w=64, h=64):
    """A w x h (64x64) old-style JPEG YCbCr 2x2 file in strips of `rps`
    rows, with JPEG*Tables tags pointing at `tables` (q, dc, ac byte
    strings, or offsets) or a JPEGInterchangeFormat stream `jif`."""
    t = Tiff()
    n = -(-h // rps)
    if strips is None:
        strips = [bytes(3 * 4 * (rps // 16))] * n
    offs = [t.data(b) for b in strips]
    t.ifd()
    for tag, typ, v in [(256, 4, w), (257, 4, h), (258, 3, [8, 8, 8]), (259, 3, 6),
                        (262, 3, 6), (277, 3, 3), (278, 4, rps), (273, 4, offs),
                        (279, 4, counts or [len(b) for b in strips]), (530, 3, [2, 2])]:
        t.tag(tag, typ, v)
    if jif is not None:
        t.tag(513, 4, t.data(jif))
        t.tag(514, 4, len(jif))
    elif tables is not False:
        q, dc, ac = tables or (OJ_Q, OJ_DC, OJ_AC)
        at = [x if isinstance(x, int) else t.data(x) for x in (q, dc, ac)]
        t.tag(512, 3, 1)
        for tag, off in zip((519, 520, 521), at):
            t.tag(tag, 4, [off] * 3 if not isinstance(off, list) else off)
    for tag, typ, v in extra:
        t.tag(tag, typ, v)
    return t.build()


def ojpeg_jif(sof_h=64, body=b"", dht=None, marker=0xC0, sof_w=64):
    dqt = b"\xff\xdb\x00\x43\x00" + OJ_Q
    dht = dht if dht is not None else (
        b"\xff\xc4" + struct.pack(">H", 2 + 1 + len(OJ_DC)) + b"\x00" + OJ_DC +
        b"\xff\xc4" + struct.pack(">H", 2 + 1 + len(OJ_AC)) + b"\x10" + OJ_AC)
    sof = bytes([0xFF, marker, 0, 17, 8]) + struct.pack(">HH", sof_h, sof_w) + \
        bytes([3, 1, 0x22, 0, 2, 0x11, 0, 3, 0x11, 0])
    sos = bytes([0xFF, 0xDA, 0, 12, 3, 1, 0, 2, 0, 3, 0, 0, 63, 0])
    return b"\xff\xd8" + dqt + dht + sof + sos + body


def ojpeg_cases():
    """Item 26: old-style JPEG (tiff_ojpeg.c, codec ojpeg.c)."""
    yield "ojpeg_flat", 26, "ok", "old-style JPEG, table tags, 4 strips", ojpeg_strips()
    yield "ojpeg_jif_flat", 26, "ok", "old-style JPEG, JPEGInterchangeFormat stream", \
        ojpeg_strips(rps=64, tables=False, jif=ojpeg_jif(body=bytes(48) + b"\xff\xd9"))
    yield "ojpeg_jif_no_dri", 26, "read", "old-style JPEG stream of 4 strips without \
RST markers", ojpeg_strips(tables=False, jif=ojpeg_jif(body=bytes(48) + b"\xff\xd9"))
    yield "ojpeg_strip_truncated", 26, "read", "old-style JPEG strip of 2 bytes", \
        ojpeg_strips(strips=[bytes(12), b"\0\0", bytes(12), bytes(12)])
    yield "ojpeg_strip_garbage", 26, "read", "old-style JPEG strips of noise", \
        ojpeg_strips(strips=[bytes((k * 37 + 11) & 255 for k in range(40))] * 4)
    yield "ojpeg_table_past_eof", 26, "open", "JPEGQTables offset past EOF", \
        ojpeg_strips(tables=(1 << 30, OJ_DC, OJ_AC))
    yield "ojpeg_qtables_count", 26, "open", "JPEGQTables with 4 values", \
        ojpeg_strips(tables=False, extra=[(519, 4, [8] * 4), (520, 4, [8] * 3),
                                          (521, 4, [8] * 3)])
    yield "ojpeg_no_tables", 26, "open", "old-style JPEG without tables or stream", \
        ojpeg_strips(tables=False)
    yield "ojpeg_huffman_too_long", 26, "open", "DC table of 4080 codes", \
        ojpeg_strips(tables=(OJ_Q, bytes([255] * 16), OJ_AC))
    yield "ojpeg_rps_not_mcu", 26, "open", "RowsPerStrip 8 with 2x2 MCUs", \
        ojpeg_strips(rps=8, strips=[bytes(6)] * 8)
    yield "ojpeg_sof_short", 26, "open", "SOF 32 rows for a 64-row image", \
        ojpeg_strips(tables=False, jif=ojpeg_jif(sof_h=32, body=bytes(48)))
    yield "ojpeg_progressive", 26, "open", "SOF2 in the stream", \
        ojpeg_strips(tables=False, jif=ojpeg_jif(marker=0xC2))
    yield "ojpeg_dht_past_end", 26, "open", "DHT longer than the stream", \
        ojpeg_strips(tables=False, jif=ojpeg_jif(dht=b"\xff\xc4\x40\x00\x00")[:60])
    yield "ojpeg_jif_garbage", 26, "read", "JPEGInterchangeFormat data is noise", \
        ojpeg_strips(tables=False, jif=ojpeg_jif(body=bytes((k * 53 + 7) & 255
                                                            for k in range(64))))
    yield "ojpeg_jif_past_eof", 26, "read", "JPEGInterchangeFormat past EOF", \
        ojpeg_strips(tables=False, extra=[(513, 4, 1 << 30), (514, 4, 100)])
    # After review: the whole image as one chunk gets the chunk size check
    # (it opened, then every read failed: "tile too large"); a DHT with no
    # table was read one byte past its segment; strips of more MCUs than a
    # 16-bit restart interval holds had it truncated.
    yield "ojpeg_jif_one_huge_chunk", 26, "open", "JPEGInterchangeFormat stream of a \
20000x20000 image, read as one chunk of 1.2 GB", \
        ojpeg_strips(tables=False, w=20000, h=20000, strips=[bytes(12)] * 1250,
                     jif=ojpeg_jif(sof_h=20000, sof_w=20000, body=bytes(48) + b"\xff\xd9"))
    yield "ojpeg_dht_empty", 26, "open", "DHT segment without a table", \
        ojpeg_strips(tables=False, jif=ojpeg_jif(dht=b"\xff\xc4\x00\x02"))
    yield "ojpeg_restart_interval_overflow", 26, "open", "strips of 65536 MCUs \
without DRI", ojpeg_strips(tables=False, w=65535, h=512, rps=256, strips=[bytes(12)] * 2,
                           jif=ojpeg_jif(sof_h=512, sof_w=65535, body=bytes(48) + b"\xff\xd9"))


def cases():
    """Yield (name, item, expect, what, bytes)."""
    # 1: IFD loops and long chains
    # (as in GDAL, a chain that goes wrong after the first IFD is read up
    # to there, with a warning: "ok")
    t, b = good()
    t.patch(b, t.next_pos[0], t.ifd_off[0], 4)
    yield "loop_self", 1, "ok", "IFD 0 points to itself", b
    t = Tiff()
    image(t)
    image(t, width=32, height=32, subfile=1)
    b = t.build()
    t.patch(b, t.next_pos[1], t.ifd_off[0], 4)
    yield "loop_ab", 1, "ok", "IFD 1 points back to IFD 0", b
    t = Tiff()
    for _ in range(400):
        image(t, width=16, height=16, tile=16, subfile=1, tiles=[b"x" * 256])
    yield "chain_400", 1, "ok", "400 IFDs (above CF_MAX_IFDS: 256 read)", t.build()
    # 2: offsets past the end, BigTIFF offsets >= 2^63
    t, b = good()
    t.patch(b, t.next_pos[0], len(b) + 4096, 4)
    yield "next_ifd_past_eof", 2, "ok", "next IFD offset past EOF", b
    t, b = good(big=True)
    t.patch(b, 8, 1 << 63, 8)
    yield "bigtiff_offset_2_63", 2, "open", "first IFD at 2^63", b
    t, b = good()
    t.patch(b, 4, len(b) - 1, 4)
    yield "ifd_cut_off", 2, "open", "first IFD at the last byte", b
    # 3: absurd BigTIFF entry counts
    t, b = good(big=True)
    t.patch(b, t.ifd_off[0], 1 << 40, 8)
    yield "bigtiff_entries_2_40", 3, "open", "IFD entry count 2^40", b
    t, b = good(big=True)
    t.patch(b, t.ifd_off[0], 70000, 8)
    yield "bigtiff_entries_70000", 3, "open", "IFD entry count 70000", b
    # 4: tag count x size overflow, tag data past EOF
    t = Tiff(big=True)
    image(t, skip=(324,))
    t.tag(324, 16, raw=b"\0" * 8, count=1 << 61)
    yield "count_overflow", 4, "open", "TileOffsets count 2^61 LONG8", t.build()
    t, b = good()
    t.patch(b, t.value_pos(0, 325), len(b) - 6, 4)
    yield "tagdata_past_eof", 4, "open", "TileByteCounts data past EOF", b
    # 5: array lengths
    t = Tiff()
    image(t, tiles=[b"a" * 1024] * 3)
    yield "offsets_fewer", 5, "open", "3 TileOffsets for 4 tiles", t.build()
    t = Tiff()
    image(t, counts=[1024] * 3)
    yield "offsets_counts_differ", 5, "open", "4 offsets, 3 counts", t.build()
    t = Tiff()
    image(t, spp=3, planar=2, tiles=[b"p" * 1024] * 4)
    yield "planar_fewer", 5, "open", "planar 2 needs 12 tiles, has 4", t.build()
    # 6: huge tile counts in a tiny file
    t = Tiff()
    image(t, width=1 << 20, height=1 << 20, tile=16, tiles=[b"z" * 256])
    yield "huge_tile_count", 6, "open", "2^32 tiles in a tiny file", t.build()
    # 6 and 9: tile indexes far larger than their file (2^26 tiles of 1x1
    # pixel: 1 GiB of index per IFD) from arrays shared by every IFD, and
    # one without sharing just over the header memory budget
    yield "index_shared_2_26", 9, "open", \
        "2^26 tiles, TileOffsets = TileByteCounts (BYTE)", \
        crafted_index(1, 8192, 4096, 4096, 1 << 28)
    yield "index_shared_256_ifds", 9, "open", \
        "256 IFDs x 2^26 tiles, all on one BYTE array", \
        crafted_index(256, 8192, 1 << 16, 1 << 16, 1 << 28)
    yield "index_over_budget", 6, "open", \
        "2^24 tiles: 256 MiB of index, above the budget", \
        crafted_index(1, 4096, 4096, 4096 + (1 << 24), 1 << 26)
    t = Tiff()
    image(t)
    b = t.build()
    t.patch(b, t.value_pos(0, 325), struct.unpack_from("<I", b, t.value_pos(0, 324))[0] + 8, 4)
    yield "counts_overlap_offsets", 9, "open", \
        "TileByteCounts starts inside TileOffsets", b
    t = Tiff()
    image(t)
    b = t.build()
    t.patch(b, t.value_pos(0, 324), t.ifd_off[0] + 2, 4)
    yield "offsets_in_ifd", 9, "open", "TileOffsets data inside the IFD", b
    # 7: byte counts
    # (an uncompressed tile is read as libtiff reads it: its size from its
    # offset, whatever the count says; GDAL reads these two)
    t = Tiff()
    image(t, counts=[1024, 1024, 1 << 30, 1024])
    yield "bytecount_past_eof", 7, "ok", "ByteCount of 1 GiB, the tile's 1024 bytes in the file", \
        t.build()
    t = Tiff()
    image(t, counts=[1024, 1024, 1 << 30, 1024])
    b = t.build()
    offs = struct.unpack_from("<I", b, t.value_pos(0, 324))[0]  # 4 LONGs, elsewhere
    t.patch(b, offs + 8, len(b) - 100, 4)
    yield "tile_data_past_eof", 7, "read", "uncompressed tile 2 starts 100 bytes before the end", b
    t = Tiff()
    image(t, skip=(325,))
    yield "bytecount_missing", 7, "open", "no TileByteCounts", t.build()
    t = Tiff()
    image(t, counts=[1024, 10, 1024, 1024])
    yield "bytecount_too_small", 7, "ok", "uncompressed tile whose count says 10 bytes", \
        t.build()
    t = Tiff()
    image(t, counts=[1024, 0, 1024, 1024], offsets=None)
    yield "bytecount_zero", 7, "ok", "sparse tile (reads as 0)", t.build()
    # 8: corrupt arrays in a later IFD
    t = Tiff()
    image(t, width=128, height=128)
    image(t, width=64, height=64, subfile=1)
    b = t.build()
    t.patch(b, t.value_pos(1, 324), 0xFFFFFF00, 4)
    yield "overview_offsets_corrupt", 8, "ok", "IFD 1 TileOffsets past EOF (left out)", b
    # 9: IFD inside pixel data, overlapping tiles
    t = Tiff()
    image(t, offsets=[8, 8, 8, 8], counts=[1024] * 4)
    yield "overlapping_tiles", 9, "ok", "all tiles at offset 8", t.build()
    # 10: huge sizes
    t = Tiff()
    image(t, width=1 << 30, height=1 << 30, tiles=[b"q" * 1024])
    yield "huge_dimensions", 10, "open", "2^30 x 2^30 pixels", t.build()
    t = Tiff()
    image(t, spp=1, extra=[], skip=(277,))
    t.tag(277, 3, 65529)
    yield "spp_65529", 10, "open", "SamplesPerPixel 65529", t.build()
    # 11: tile sizes
    t = Tiff()
    image(t, skip=(322,))
    t.tag(322, 4, 0)
    yield "tilewidth_zero", 11, "open", "TileWidth 0", t.build()
    t = Tiff()
    t.data(b"s" * 64 * 64)
    t.ifd()
    for tag, typ, v in [(256, 4, 64), (257, 4, 64), (258, 3, 8), (259, 3, 1),
                        (262, 3, 1), (273, 4, 8), (277, 3, 1), (278, 4, 0),
                        (279, 4, 4096)]:
        t.tag(tag, typ, v)
    yield "rowsperstrip_zero", 11, "open", "RowsPerStrip 0", t.build()
    # 12: size arithmetic
    t = Tiff()
    image(t, tile=65536, spp=4, bits=64, sf=3, tiles=[b"w" * 64])
    yield "tile_bytes_overflow", 12, "open", "one tile of 128 GiB", t.build()
    # 13: BitsPerSample
    for bits, name in [(0, "bits_0"), (65, "bits_65")]:
        t = Tiff()
        image(t, bits=bits, tiles=[b"b" * 512] * 4)
        yield name, 13, "open", "BitsPerSample %d" % bits, t.build()
    # odd depths are read (widened as GDAL does); 512 bytes are a 4-bit tile
    # but too few for 12 or 24 bits
    for bits, name, exp in [(12, "bits_12", "read"), (24, "bits_24", "read"),
                            (4, "bits_4", "ok"), (40, "bits_40", "read")]:
        t = Tiff()
        image(t, bits=bits, tiles=[b"b" * 512] * 4)
        yield name, 13, exp, "BitsPerSample %d, 512-byte tiles" % bits, t.build()
    t = Tiff()
    image(t, spp=3, skip=(258,), tiles=[b"c" * 3072] * 4)
    t.tag(258, 3, [8, 8, 16])
    yield "bits_differ", 13, "open", "BitsPerSample 8,8,16", t.build()
    # 14: SampleFormat
    t = Tiff()
    image(t, bits=16, sf=3)
    yield "float16", 14, "ok", "SampleFormat 3 with 16 bits (read as float32)", t.build()
    t = Tiff()
    image(t, bits=8, sf=3)
    yield "float8", 14, "read", "SampleFormat 3 with 8 bits (refused at open)", t.build()
    t = Tiff()
    image(t, bits=32, sf=6)
    yield "complex_float16", 14, "read", "complex float of 32 bits (refused)", t.build()
    t = Tiff()
    image(t, bits=32, sf=5, tiles=[b"c" * 100] * 4)
    yield "cint16_short", 14, "read", "CInt16 tiles too short", t.build()
    t = Tiff()
    image(t, sf=9)
    yield "sampleformat_9", 14, "open", "SampleFormat 9", t.build()
    # 15: predictor that cannot apply
    t = Tiff()
    image(t, comp=8, tiles=[zlib.compress(bytes(range(256)) * 4)] * 4,
          extra=[(317, 3, 3)])
    yield "predictor3_uint8", 15, "read", "floating-point predictor on uint8", \
        t.build()
    # 16: LZW garbage
    t = Tiff()
    image(t, comp=5, tiles=[bytes([0x80, 0xFF, 0x13, 0x37] * 8)] * 4)
    yield "lzw_garbage", 16, "read", "LZW tile of noise", t.build()
    t = Tiff()
    image(t, comp=5, tiles=[b"\x80"] * 4)
    yield "lzw_one_byte", 16, "read", "1-byte LZW tiles", t.build()
    # 17: PackBits runs past the end
    t = Tiff()
    image(t, comp=32773, tiles=[b"\x7f" + b"r" * 10] * 4)
    yield "packbits_overrun", 17, "read", "literal run longer than input", \
        t.build()
    # 18: decompression bomb (64 MiB of zeros for a 1 KiB tile)
    bomb = zlib.compress(b"\0" * (64 << 20), 9)
    t = Tiff()
    image(t, comp=8, tiles=[bomb] * 4)
    yield "deflate_bomb", 18, "ok", "deflate tile inflating to 64 MiB", \
        t.build()
    t = Tiff()
    image(t, comp=8, tiles=[b"\x78\x9c\xff\xff\xff\xff"] * 4)
    yield "deflate_garbage", 18, "read", "corrupt deflate stream", t.build()
    # 20: JPEG tables of length 1
    t = Tiff()
    image(t, comp=7, tiles=[b"\xff\xd8\xff\xd9"] * 4, extra=[(347, 7, b"\xff")])
    yield "jpegtables_len1", 20, "read", "JPEGTables of 1 byte", t.build()
    # 22: NaN / Inf / zero-denominator geotransform
    t = Tiff()
    image(t, extra=[(33550, 12, [float("nan"), 1.0, 0.0]),
                    (33922, 12, [0.0, 0.0, 0.0, float("inf"), 0.0, 0.0])])
    yield "geotransform_nan", 22, "ok", "NaN pixel scale", t.build()
    t = Tiff()
    image(t, extra=[(33922, 12, [0.0] * 6)])
    t.tag(33550, 5, raw=struct.pack("<IIIIII", 1, 0, 1, 0, 0, 0))
    yield "rational_zero_den", 22, "ok", "RATIONAL pixel scale 1/0", t.build()
    # 23: ASCII without NUL, zero count
    t = Tiff()
    image(t, extra=[(42113, 2, b"-9999")])
    yield "ascii_no_nul", 23, "ok", "GDAL_NODATA without NUL", t.build()
    t = Tiff()
    image(t)
    t.tag(42113, 2, raw=b"", count=0)
    yield "ascii_zero_count", 23, "ok", "GDAL_NODATA with count 0", t.build()
    # 24: GeoKeyDirectory claiming more keys than it has
    t = Tiff()
    image(t, extra=[(34735, 3, [1, 1, 0, 5000, 3072, 0, 1, 32633])])
    yield "geokeys_corrupt", 24, "ok", "5000 keys claimed, 1 present", t.build()
    # 25: missing required tags, unknown types, unsorted/duplicate tags
    t = Tiff()
    image(t, skip=(256,))
    yield "missing_width", 25, "open", "no ImageWidth", t.build()
    t = Tiff()
    image(t, skip=(324,))
    yield "missing_tileoffsets", 25, "open", "no TileOffsets", t.build()
    t = Tiff()
    image(t)
    t.tag(305, 99, raw=b"abcd", count=4)
    yield "unknown_type", 25, "ok", "tag with type code 99", t.build()
    t = Tiff()
    image(t, skip=(256,))
    t.tag(256, 4, 64)
    t.tag(256, 4, 5000)
    yield "unsorted_duplicate", 25, "ok", "ImageWidth last and twice", t.build()
    # 26: the decoders of issue 19 (CCITT, LZMA, bit unpacking, float16,
    # complex, colour conversion) on broken data
    for comp, name in [(2, "ccittrle"), (3, "ccittfax3"), (4, "ccittfax4")]:
        t = Tiff()
        image(t, bits=1, tiles=[bytes([0x80, 0xFF, 0x13, 0x37] * 30)] * 4, comp=comp)
        yield name + "_garbage", 26, "read", "%s tiles of noise" % name, t.build()
        t = Tiff()
        image(t, bits=1, tiles=[b"\x00"] * 4, comp=comp)
        yield name + "_one_byte", 26, "read", "%s tiles of one zero byte" % name, t.build()
    t = Tiff()
    image(t, bits=1, tiles=[b""] * 4, comp=4, counts=[0, 0, 0, 0])
    yield "ccittfax4_sparse", 26, "ok", "G4 tiles all sparse", t.build()
    t = Tiff()
    image(t, bits=8, tiles=[bytes(32)] * 4, comp=4)
    yield "ccittfax4_8bit", 26, "read", "G4 with 8-bit samples (refused)", t.build()
    t = Tiff()
    image(t, comp=34925, tiles=[bytes([0xFD, 0x37, 0x7A, 0x58, 0x5A, 0, 0, 4]) + b"x" * 40] * 4)
    yield "lzma_garbage", 26, "read", "LZMA tiles of noise after an .xz magic", t.build()
    t = Tiff()
    image(t, comp=34925, tiles=[_xz(b"\0" * (64 << 20))] * 4)
    yield "lzma_bomb", 26, "ok", "LZMA tile inflating to 64 MiB", t.build()
    t = Tiff()
    image(t, comp=34925, tiles=[_xz_huge_dict(bytes(1024))] * 4)
    yield "lzma_huge_dict", 26, "read", "LZMA stream asking for a 4 GiB dictionary", t.build()
    t = Tiff()
    noise = bytes((i * 2654435761 >> 13) & 255 for i in range(1024))
    image(t, comp=34925, tiles=[_xz(noise)[:200]] * 4)
    yield "lzma_truncated", 26, "read", "LZMA stream cut in its data", t.build()
    t = Tiff()
    image(t, bits=12, comp=8, tiles=[zlib.compress(b"\xab" * 100)] * 4)
    yield "bits12_deflate_short", 26, "read", "12-bit deflate tiles too short", t.build()
    t = Tiff()
    image(t, bits=16, sf=3, comp=8, tiles=[zlib.compress(b"\x7c" * 2048)] * 4,
          extra=[(317, 3, 3)])
    yield "float16_pred3", 26, "ok", "float16 with the float predictor", t.build()
    t = Tiff()
    image(t, bits=24, sf=3, comp=8, tiles=[zlib.compress(b"\xff" * 3072)] * 4)
    yield "float24_nan", 26, "ok", "float24 tiles of NaN", t.build()
    t = Tiff()
    image(t, bits=64, sf=6, tiles=[b"\xff" * 8192] * 4)
    yield "cfloat32_nan", 26, "ok", "CFloat32 tiles of NaN", t.build()
    t = Tiff()
    image(t, spp=3, photometric=6, comp=5, tiles=[bytes([0x80, 0x01])] * 4,
          extra=[(530, 3, [2, 2])])
    yield "ycbcr_lzw_short", 26, "read", "subsampled YCbCr LZW tiles too short", t.build()
    t = Tiff()
    image(t, spp=3, photometric=6, tiles=[bytes(1536)] * 4, extra=[(530, 3, [3, 5])])
    yield "ycbcr_bad_subsampling", 26, "open", "YCbCrSubsampling 3x5", t.build()
    t = Tiff()
    image(t, spp=4, photometric=5, tiles=[bytes(4096)] * 4, extra=[(332, 3, 2)])
    yield "cmyk_inkset2", 26, "ok", "separated, InkSet 2 (read as stored)", t.build()
    t = Tiff()
    image(t, spp=3, photometric=8, tiles=[bytes(3072)] * 4,
          extra=[(318, 5, struct.pack("<IIII", 1, 1, 0, 1))])
    yield "cielab_whitepoint_zero", 26, "read", "CIELab with WhitePoint y = 0", t.build()
    t = Tiff()
    image(t, tiles=[bytes(1024)] * 4, extra=[(266, 3, 2), (259, 3, 8)], skip=(259,))
    yield "fillorder2_deflate_garbage", 26, "read", "FillOrder 2 on bytes no stream", \
        t.build()
    t = Tiff()
    image(t, comp=6, tiles=[b"\xff\xd8" * 10] * 4)
    yield "ojpeg", 26, "read", "tiled old-style JPEG (refused at open)", t.build()
    yield from ojpeg_cases()
    # Not TIFF at all
    yield "empty", 0, "open", "0 bytes", b""
    yield "not_tiff", 0, "open", "PNG signature", b"\x89PNG\r\n\x1a\n" + b"\0" * 64
    yield "header_only", 0, "open", "8-byte header, no IFD", b"II*\0\x08\0\0\0"


def _xz(data):
    import lzma
    return lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC32)


def _xz_huge_dict(data):
    """An .xz stream whose LZMA2 filter asks for the largest dictionary
    (4 GiB - 1): the block header's property byte is patched and its CRC32
    made right again, so only the decoder's memory limit can stop it."""
    b = bytearray(_xz(data))
    hs = (b[12] + 1) * 4  # block header after the 12-byte stream header
    hdr = b[12:12 + hs]
    i = hdr.index(0x21)  # filter id LZMA2, then props size 1, then props
    hdr[i + 2] = 40
    hdr[-4:] = struct.pack("<I", zlib.crc32(bytes(hdr[:-4])))
    b[12:12 + hs] = hdr
    return bytes(b)


def make_all(folder):
    os.makedirs(folder, exist_ok=True)
    out = []
    for name, item, expect, what, data in cases():
        path = os.path.join(folder, "malformed_%s.tif" % name)
        with open(path, "wb") as f:
            if isinstance(data, Sparse):
                f.write(data.head)
                f.truncate(data.size)
            else:
                f.write(bytes(data))
        out.append(Case(name, path, item, expect, what))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_malformed.py OUTDIR")
    for c in make_all(sys.argv[1]):
        print("%-28s item %2d  %-5s  %s" % (c.name, c.item, c.expect, c.what))
