"""Write the tiny seed files of fuzz_tiff into fuzz/seeds/tiff/.

Seeds are small on purpose (a few KB in all): one 16x16 tile each, built
with the writer of tests/python/make_malformed.py, covering classic and
BigTIFF, both byte orders, tiles and strips, planar 2, overviews with a
mask, GeoTIFF keys, GDAL_NODATA and GDAL_METADATA.

Usage: /usr/bin/python3 fuzz/fuzz_tiff_seeds.py
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import make_malformed as M  # noqa: E402

GEO = [(33550, 12, [10.0, 10.0, 0.0]),
       (33922, 12, [0.0, 0.0, 0.0, 500000.0, 4000000.0, 0.0]),
       (34735, 3, [1, 1, 0, 2, 1025, 0, 1, 2, 3072, 0, 1, 32633]),
       (42113, 2, b"-9999\0"),
       (42112, 2, b'<GDALMetadata><Item name="SCALE" sample="0" '
                  b'role="scale">0.5</Item></GDALMetadata>\0')]


def tile(n):
    return [bytes(range(256))[:n]]


def seeds():
    t = M.Tiff()
    M.image(t, width=16, height=16, tile=16, tiles=tile(256), extra=GEO)
    yield "classic_le_geo", t.build()
    t = M.Tiff(big=True, be=True)
    M.image(t, width=16, height=16, tile=16, spp=2, planar=2,
            tiles=tile(256) * 2)
    yield "bigtiff_be_planar", t.build()
    t = M.Tiff()
    M.image(t, width=32, height=16, tile=16, comp=8, tiles=tile(40) * 2)
    M.image(t, width=32, height=16, tile=16, subfile=4, photometric=4,
            tiles=tile(30) * 2)
    M.image(t, width=16, height=8, tile=16, subfile=1, tiles=tile(20))
    M.image(t, width=16, height=8, tile=16, subfile=5, photometric=4,
            tiles=tile(10))
    yield "overview_mask", t.build()
    # A stripped image: 3 strips of 6 rows.
    t = M.Tiff(be=True)
    t.data(bytes(16 * 16))
    t.ifd()
    for tag, typ, v in [(256, 4, 16), (257, 4, 16), (258, 3, 8),
                        (259, 3, 1), (262, 3, 1), (273, 4, [8, 104, 200]),
                        (277, 3, 1), (278, 4, 6), (279, 4, [96, 96, 64])]:
        t.tag(tag, typ, v)
    yield "strips_be", t.build()
    # Tag arrays that share bytes (refused): TileByteCounts inside
    # TileOffsets, and two IFDs on one BYTE index -- small cousins of the
    # crafted 2^26-tile files of make_malformed.py, for the fuzzer to grow.
    t = M.Tiff()
    M.image(t, width=32, height=32, tile=16, tiles=tile(16) * 4)
    b = t.build()
    at = int.from_bytes(b[t.value_pos(0, 324):t.value_pos(0, 324) + 4], "little")
    t.patch(b, t.value_pos(0, 325), at + 4, 4)
    yield "arrays_overlap", b
    head = M.crafted_index(2, 4, 512, 512, 1024).head
    yield "index_shared", head + bytes(1024 - len(head))


if __name__ == "__main__":
    out = os.path.join(HERE, "seeds", "tiff")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(data))
        print(name, len(data))
