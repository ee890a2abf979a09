"""Opening a remote file whose IFDs lie far apart (item 11 of issue 15).

A multi-page TIFF keeps each page's pixels after its IFD, so the IFD chain
can only be followed one IFD after the other: 43b28fd made 255 requests
one after the other for 255 IFDs 2 MiB apart (42 s at 164 ms).  The
reader now reads ahead when the parser's requests step by a constant
stride (lib/pipeline/head_ahead.h): the test nginx, with a latency,
counts the waves of requests (those that arrived while none other was in
flight), which is the number of round trips the open waited for.
"""
import os
import struct
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import Nginx  # noqa: E402

import cogfeed  # noqa: E402

STEP = 2 << 20


def pages(path, n, step=STEP, jitter=0, offsets=None):
    """n IFDs of 16x16 uint8 pages, IFD k at 8 + k*step (+ k*k*jitter), or
    at offsets[k], its one tile (all pixels k) right after it; the rest of the
    file a hole."""
    def ifd_at(k):
        if offsets:
            return offsets[k] if k < n else offsets[-1] + 65536
        return 8 + k * step + k * k * jitter
    with open(path, "wb") as f:
        f.write(b"II*\0" + struct.pack("<I", 8))
        for k in range(n):
            at = ifd_at(k)
            nxt = ifd_at(k + 1) if k + 1 < n else 0
            tags = [(254, 4, 1 if k else 0), (256, 4, 16), (257, 4, 16),
                    (258, 3, 8), (259, 3, 1), (262, 3, 1), (277, 3, 1),
                    (322, 4, 16), (323, 4, 16), (324, 4, 0), (325, 4, 256)]
            tile_at = at + 2 + 12 * len(tags) + 4
            ifd = struct.pack("<H", len(tags))
            for tag, typ, v in tags:
                v = tile_at if tag == 324 else v
                val = (struct.pack("<HH", v, 0) if typ == 3
                       else struct.pack("<I", v))
                ifd += struct.pack("<HHI", tag, typ, 1) + val
            ifd += struct.pack("<I", nxt)
            f.seek(at)
            f.write(ifd + bytes([k]) * 256)
        f.truncate(ifd_at(n))


def decoy_offsets(n, s=32768):
    """IFD offsets whose gaps are all multiples of the first stride s but
    never land where the guesses are: s, 2s, 3s, 5s, 9s, 17s, 33s (each
    one past as many guesses as the last round sent), then 64s (past the
    most guesses a round sends).  The first two IFDs lie beyond the first
    64 KiB read, so that the parser asks for each."""
    gaps = [131072 - 8, s, 2 * s, 3 * s, 5 * s, 9 * s, 17 * s, 33 * s]
    gaps += [64 * s] * n
    at = [8]
    for g in gaps[:n - 1]:
        at.append(at[-1] + g)
    return at


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("pages")
    pages(str(root / "p255.tif"), 255)
    pages(str(root / "p40.tif"), 40, jitter=4096)  # no constant stride
    pages(str(root / "p3.tif"), 3)
    pages(str(root / "decoy.tif"), 255, offsets=decoy_offsets(255))
    with Nginx(str(root), latency_ms=40) as srv:
        yield srv


def test_far_apart_ifds_open_in_few_round_trips(site):
    site.reset()
    cog = cogfeed.open(site.url("p255.tif"), io=cogfeed.IO())
    waves, reqs = site.waves(), site.requests("/p255.tif")
    # the whole chain is read; GDAL (and so cogfeed) uses its first 30
    # reduced IFDs as overviews
    assert len(cog.overviews) == 30
    assert (cog.read(window=(0, 0, 16, 16), level=30) == 30).all()
    assert (cog.read(window=(0, 0, 16, 16), level=17) == 17).all()
    # head + log2(255) rounds of guesses + the round that learns the
    # stride (43b28fd: 255 waves of one request each)
    assert waves <= 12, waves
    # every IFD fetched once (guesses past the end of the file are not
    # sent), plus at most one round of guesses that missed
    assert 255 <= reqs <= 255 + 64, reqs
    assert cog.header_requests == reqs


def test_header_cache_keeps_only_what_was_used(site, tmp_path):
    """Guesses the parser never asked for do not reach the header cache:
    an entry of p3.tif holds its three IFDs only (43b28fd: the same)."""
    hc = str(tmp_path / "hc")
    cog = cogfeed.open(site.url("p3.tif"), io=cogfeed.IO(header_cache_dir=hc))
    assert len(cog.overviews) == 2
    (entry,) = os.listdir(hc)
    assert os.path.getsize(os.path.join(hc, entry)) < 3 * 65536 + 4096
    again = cogfeed.open(site.url("p3.tif"), io=cogfeed.IO(header_cache_dir=hc))
    assert again.header_requests == 0
    assert (again.read(window=(0, 0, 16, 16), level=2) == 2).all()


def test_irregular_chain_still_opens(site):
    """No constant stride: every guess misses, the file opens all the same
    with one request per IFD and at most one missed guess each."""
    site.reset()
    cog = cogfeed.open(site.url("p40.tif"), io=cogfeed.IO())
    assert len(cog.overviews) == 30  # GDAL uses the first 30 reduced IFDs
    assert (cog.read(window=(0, 0, 16, 16), level=30) == 30).all()
    reqs = site.requests("/p40.tif")
    assert reqs - 1 <= 2 * 40, reqs


def test_guesses_that_never_hit_cost_little(site):
    """A chain laid out to defeat the guesses (decoy_offsets): the first
    read-ahead doubled the guesses at every demand a whole number of
    strides away and fetched 259 MB to open 255 IFDs that need 4 MB (one
    16 KiB read each), close to the 256 MiB header cap.  Now guesses
    double only after a round that was all used, and unused guesses stay
    within the bytes the parser asked for plus 1 MiB."""
    site.reset()
    cog = cogfeed.open(site.url("decoy.tif"), io=cogfeed.IO())
    assert len(cog.overviews) == 30  # GDAL uses the first 30 reduced IFDs
    assert (cog.read(window=(0, 0, 16, 16), level=30) == 30).all()
    needed = 255 * 16384  # the whole chain is walked (masks may follow)
    assert cog.header_bytes <= 2 * needed + (1 << 20), cog.header_bytes
