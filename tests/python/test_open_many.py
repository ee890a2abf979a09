"""cogfeed.open_many / cf_cog_open_many (issue 28, "Opening many files").

cogfeed.open opens one file after the other: one round trip each (27
files at 164 ms took 4.5 s).  open_many runs the opens together on the
io loop, each file's next request sent as soon as its last answer came.
The tests check that concurrency, never wall time: the test nginx (with a
first-byte latency) counts the waves of requests, round trips one after
the other, and the io counts the most requests it had in flight at once
(peak_inflight).  bench/open_many_bench.py measures the wall time.
"""
import os
import shutil
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
import conformance as C  # noqa: E402
from servers import Nginx  # noqa: E402
from test_open_ahead import pages  # noqa: E402

import cogfeed  # noqa: E402

N = 100
LATENCY_MS = 100


def kinds(root):
    """Ten distinct small files: COGs of several sizes, dtypes, band counts,
    tilings, compressions, with and without overviews and georeference;
    a striped GTiff; a multi-page TIFF whose IFDs lie far apart (three
    round trips to open)."""
    rng = np.random.default_rng(28)
    out = []

    def cog(name, shape, dtype, **kw):
        a = (rng.random(shape) * 200).astype(dtype)
        out.append(C.write_array(root / name, a, **kw))

    gt = (500000.0, 10.0, 0.0, 4200000.0, 0.0, -10.0)
    cog("k0.tif", (1, 300, 200), "uint8", BLOCKSIZE=64, COMPRESS="DEFLATE")
    cog("k1.tif", (3, 513, 257), "uint16", BLOCKSIZE=128, COMPRESS="ZSTD",
        PREDICTOR=2)
    cog("k2.tif", (2, 1024, 1024), "float32", BLOCKSIZE=256,
        COMPRESS="LZW", gt=gt)
    cog("k3.tif", (4, 64, 64), "int16", BLOCKSIZE=32, COMPRESS="NONE")
    cog("k4.tif", (1, 700, 900), "float64", BLOCKSIZE=256,
        COMPRESS="DEFLATE", PREDICTOR=3, gt=gt)
    cog("k5.tif", (1, 2048, 2048), "uint8", BLOCKSIZE=256,
        COMPRESS="DEFLATE", OVERVIEWS="NONE")
    cog("k6.tif", (3, 400, 400), "uint8", BLOCKSIZE=64, COMPRESS="JPEG",
        QUALITY=90)
    cog("k7.tif", (1, 100, 100), "int32", driver="GTiff", COMPRESS="DEFLATE")
    cog("k8.tif", (5, 256, 256), "uint16", BLOCKSIZE=64, COMPRESS="DEFLATE",
        INTERLEAVE="BAND")
    pages(str(root / "k9.tif"), 3)
    out.append(str(root / "k9.tif"))
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    ks = kinds(root)
    shutil.copy(ks[0], root / "warm.tif")
    names = []
    for i in range(N):
        name = "f%03d.tif" % i
        shutil.copy(ks[i % len(ks)], root / name)
        names.append(name)
    with open(root / "text.tif", "w") as f:
        f.write("not a TIFF at all, only words\n" * 10)
    with open(ks[2], "rb") as f:
        head = f.read(300)  # the IFD needs more than this
    with open(root / "short.tif", "wb") as f:
        f.write(head)
    with Nginx(str(root), latency_ms=LATENCY_MS) as srv:
        srv.names = names
        yield srv


STRUCTURE = ("width", "height", "count", "dtype", "tile_width", "tile_height",
             "tiled", "compression", "predictor", "interleave", "overviews",
             "geotransform", "epsg", "nodata", "metadata", "file_size",
             "header_bytes", "header_requests", "warnings")


def same_file(a, b, read=True):
    """a (from open_many) and b (from open) are the same file, opened the
    same way (read: and read the same)."""
    for k in STRUCTURE + ("etag", "name"):
        assert getattr(a, k) == getattr(b, k), (a.name, k)
    assert (a.crs is None) == (b.crs is None)
    if not read:
        return
    w = (min(a.width, 77), min(a.height, 55))
    win = (a.width - w[0], a.height - w[1], w[0], w[1])
    np.testing.assert_array_equal(a.read(window=win), b.read(window=win))
    lv = len(a.overviews)
    np.testing.assert_array_equal(a.read(window=(0, 0, 8, 8), level=lv),
                                  b.read(window=(0, 0, 8, 8), level=lv))


def test_many_open_in_one_round_trip(site):
    """100 files, each one request (header_bytes covers every header but
    the multi-page one's): one wave of requests, all 100 in flight at once;
    the same requests, and the same files, as opening one after another."""
    urls = [site.url(n) for n in site.names]
    io = cogfeed.IO(max_inflight=128, hedge_after_ms=-1)
    # A new io's first request to a host goes alone (libcurl's PIPEWAIT:
    # the others wait to learn whether it multiplexes): warm it first.
    cogfeed.open(site.url("warm.tif"), io=io)
    site.reset()
    before = io.stats()["requests"]
    cogs = cogfeed.open_many(urls, io=io)
    waves, reqs = site.waves(), site.requests()
    st = io.stats()
    assert [c.name for c in cogs] == urls
    # the multi-page files (every tenth) take two more round trips each:
    # IFD 1 and then IFD 2 (the stride is learnt from their distance)
    assert reqs == N + 2 * (N // 10), reqs
    assert st["requests"] - before == reqs
    # one wave for the first reads, and at most two for the multi-page
    # files' later reads (open one by one: 120 waves)
    assert waves <= 3, waves
    assert st["peak_inflight"] == N, st

    site.reset()
    io1 = cogfeed.IO(max_inflight=128, hedge_after_ms=-1)
    one = [cogfeed.open(u, io=io1) for u in urls[:20]]
    # one by one: a wave per round trip (f009 takes 3)
    assert site.waves() == 20 + 2 * 2
    assert site.requests() == sum(c.header_requests for c in cogs[:20])
    assert io1.stats()["peak_inflight"] == 1
    for i, (a, b) in enumerate(zip(cogs, one)):
        same_file(a, b, read=i < 10)  # f000-f009: each kind once
    # the other 80 are copies of those ten: the same structure
    for i, a in enumerate(cogs[20:], 20):
        b = one[i % 10]
        assert [getattr(a, k) for k in STRUCTURE] == \
            [getattr(b, k) for k in STRUCTURE], (a.name, b.name)


def test_later_round_trips_go_out_together(site):
    """header_bytes of 512: every file's header takes a second read (and
    the multi-page ones more); those go out as each file's first answer
    comes, so the open still costs the round trips of one file."""
    urls = [site.url(n) for n in site.names]
    io = cogfeed.IO(max_inflight=256, header_bytes=512, hedge_after_ms=-1)
    site.reset()
    cogs = cogfeed.open_many(urls, io=io)
    waves, reqs = site.waves(), site.requests()
    assert reqs == sum(c.header_requests for c in cogs)
    # (k7, a small striped GTiff, has its whole header in 512 bytes)
    assert all(c.header_requests >= 2 for i, c in enumerate(cogs[:10])
               if i != 7), [c.header_requests for c in cogs[:10]]
    most = max(c.header_requests for c in cogs)
    assert waves <= most + 1, (waves, most)
    ref = cogfeed.IO(header_bytes=512)
    for i in (0, 1, 2, 5, 9):
        b = cogfeed.open(urls[i], io=ref)
        assert cogs[i].header_requests == b.header_requests
        same_file(cogs[i], b)


def test_in_flight_bounded_by_max_inflight(site):
    """At most max_inflight files are opened at once, and the io never
    has more than max_inflight requests in flight: with 16, the peak is
    16 (neither fewer: they do run together; nor more)."""
    urls = [site.url(n) for n in site.names]
    io = cogfeed.IO(max_inflight=16, hedge_after_ms=-1)
    site.reset()
    cogs = cogfeed.open_many(urls, io=io)
    assert len(cogs) == N and all(isinstance(c, cogfeed.Cog) for c in cogs)
    assert io.stats()["peak_inflight"] == 16, io.stats()


def test_errors_name_each_failing_file(site):
    urls = [site.url(n) for n in site.names[:10]]
    bad = {3: site.url("missing.tif"), 5: site.url("text.tif"),
           8: site.url("short.tif"), 9: "/no/such/local/file.tif"}
    mixed = list(urls)
    for i, u in bad.items():
        mixed[i] = u
    io = cogfeed.IO()
    got = cogfeed.open_many(mixed, io=io, errors="return")
    for i, g in enumerate(got):
        if i in bad:
            assert isinstance(g, cogfeed.Error), (i, g)
            assert bad[i].split("://")[-1] in str(g), (i, str(g))
        else:
            assert isinstance(g, cogfeed.Cog) and g.name == mixed[i]
    assert isinstance(got[3], cogfeed.NotFoundError) and got[3].http_status == 404
    assert isinstance(got[5], cogfeed.FormatError)
    assert isinstance(got[8], cogfeed.FormatError)
    assert isinstance(got[9], cogfeed.NotFoundError)
    # the good files are whole
    same_file(got[0], cogfeed.open(urls[0], io=cogfeed.IO()))

    with pytest.raises(cogfeed.NotFoundError) as ei:
        cogfeed.open_many(mixed, io=io)
    e = ei.value
    msg = str(e)
    assert msg.startswith("4 of 10 files failed to open"), msg
    for u in bad.values():
        assert u.split("://")[-1] in msg, (u, msg)
    assert e.http_status == 404 and e.code == cogfeed.Status.NOTFOUND
    assert [type(x).__name__ if x else None for x in e.errors] == \
        [type(x).__name__ if isinstance(x, cogfeed.Error) else None for x in got]

    with pytest.raises(ValueError):
        cogfeed.open_many(urls, errors="ignore")
    with pytest.raises(TypeError):
        cogfeed.open_many(urls[0])
    assert cogfeed.open_many([]) == []


def test_header_cache_answers_before_any_request(site, tmp_path):
    """With header_cache_dir, a second open_many (a new IO: nothing in
    memory) makes no request at all; the files read as before."""
    urls = [site.url(n) for n in site.names]
    hc = str(tmp_path / "hc")
    first = cogfeed.open_many(urls, io=cogfeed.IO(header_cache_dir=hc))
    site.reset()
    io = cogfeed.IO(header_cache_dir=hc)
    again = cogfeed.open_many(urls, io=io)
    assert site.requests() == 0
    assert io.stats()["header_cache_hits"] == N
    assert all(c.header_requests == 0 for c in again)
    for i in (0, 2, 9):
        a, b = again[i], first[i]
        assert (a.width, a.height, a.count, a.dtype, a.overviews) == \
            (b.width, b.height, b.count, b.dtype, b.overviews)
        np.testing.assert_array_equal(a.read(window=(0, 0, 16, 16)),
                                      b.read(window=(0, 0, 16, 16)))
    # the memory half too: the same io again, still no request
    site.reset()
    cogfeed.open_many(urls[:10], io=io)
    assert site.requests() == 0


def test_local_files(site):
    """Local paths (and a mix with URLs) open as cogfeed.open opens them."""
    paths = [os.path.join(site.root, n) for n in site.names[:10]]
    cogs = cogfeed.open_many(paths + [site.url(site.names[0])])
    for p, c in zip(paths, cogs):
        same_file(c, cogfeed.open(p))
    assert cogs[-1].header_requests == 1
