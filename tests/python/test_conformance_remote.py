"""The conformance fixtures read over HTTP (nginx), S3 (moto, SigV4 enforced)
and Azure Blob (Azurite, Shared Key and SAS) give byte-identical results to
local reads, with the request counts the design promises: one request to
open a COG, none on a header-cache hit, at most one per tile for a window.

Local reads are themselves checked bit-exact against GDAL by
test_conformance.py, so equality here closes the loop to GDAL.
"""
import gc
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
import conformance as C  # noqa: E402
from azurite import Azurite  # noqa: E402
from moto_server import Moto  # noqa: E402
from servers import Nginx  # noqa: E402

import cogfeed  # noqa: E402

NAMES = [f["name"] for f in C.FIXTURES]


@pytest.fixture(scope="module")
def paths():
    return C.generate_all()


@pytest.fixture(scope="module")
def folder(paths):
    d = {os.path.dirname(p) for p in paths.values()}
    assert len(d) == 1
    return d.pop()


def windows(cog):
    W, H = cog.width, cog.height
    return [w for _, w in C.windows_for(W, H, cog.tile_width, cog.tile_height)]


def compare_all(paths, url_of, io):
    """Read every fixture's windows locally and through url_of(name)."""
    fails = []
    for name in NAMES:
        local = cogfeed.open(paths[name])
        try:
            remote = cogfeed.open(url_of(name), io=io)
        except cogfeed.Error as e:
            fails.append("%s: open failed: %s" % (name, e))
            continue
        if (remote.width, remote.height, remote.count, remote.dtype) != (
                local.width, local.height, local.count, local.dtype):
            fails.append("%s: metadata differs" % name)
            continue
        for win in windows(local):
            a = local.read(window=win)
            try:
                b = remote.read(window=win)
            except cogfeed.Error as e:
                fails.append("%s %s: %s" % (name, win, e))
                continue
            if a.tobytes() != b.tobytes():
                fails.append("%s %s: remote bytes differ from local" % (name, win))
        for level in range(1, len(local.overviews) + 1):
            a = local.read(level=level)
            if a.tobytes() != remote.read(level=level).tobytes():
                fails.append("%s level %d differs" % (name, level))
        if local.has_mask:
            if local.read_mask().tobytes() != remote.read_mask().tobytes():
                fails.append("%s mask differs" % name)
    return fails


def test_http_identical_to_local(paths, folder):
    with Nginx(folder) as srv:
        io = cogfeed.IO(max_inflight=32)
        fails = compare_all(paths, lambda n: srv.url(os.path.basename(paths[n])), io)
    assert not fails, "\n".join(fails)


@pytest.fixture()
def clean_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith(("AWS_", "AZURE_", "GOOGLE_")):
            monkeypatch.delenv(k)
    return monkeypatch


def test_s3_identical_to_local(paths, clean_env):
    with Moto() as m:
        files = {os.path.basename(p): p for p in paths.values()}
        key_id, secret = m.setup("conformance", files)
        for k, v in m.env(key_id, secret).items():
            clean_env.setenv(k, v)
        io = cogfeed.IO(max_inflight=32)
        fails = compare_all(
            paths, lambda n: "s3://conformance/" + os.path.basename(paths[n]), io)
    assert not fails, "\n".join(fails)


@pytest.mark.parametrize("auth", ["shared_key", "sas"])
def test_azure_identical_to_local(paths, clean_env, auth):
    with Azurite() as az:
        az.create_container("conformance")
        for p in paths.values():
            az.put_file("conformance", os.path.basename(p), p)
        if auth == "shared_key":
            clean_env.setenv("AZURE_STORAGE_CONNECTION_STRING", az.connection_string())
            url_of = lambda n: "az://conformance/" + os.path.basename(paths[n])  # noqa: E731
        else:
            sas = az.sas("conformance")
            url_of = lambda n: "%s/conformance/%s?%s" % (  # noqa: E731
                az.endpoint, os.path.basename(paths[n]), sas)
        io = cogfeed.IO(max_inflight=32)
        fails = compare_all(paths, url_of, io)
    assert not fails, "\n".join(fails)


def test_request_counts(paths, folder, tmp_path):
    """Open = 1 request; reopen = 0 (memory cache) and 0 from the on-disk
    cache in a new IO; a window = one request per tile or fewer."""
    name = "zstd_u16_p2_t256" if "zstd_u16_p2_t256" in paths else NAMES[0]
    cogs = [n for n in NAMES if C.FIXTURES_BY_NAME[n]["driver"] == "COG"]
    name = cogs[0]
    base = os.path.basename(paths[name])
    with Nginx(folder) as srv:
        url = srv.url(base)
        io = cogfeed.IO(header_cache_dir=str(tmp_path / "hc"))
        cog = cogfeed.open(url, io=io)
        assert cog.header_requests == 1
        assert srv.requests("/" + base) == 1
        again = cogfeed.open(url, io=io)
        assert again.header_requests == 0
        assert srv.requests("/" + base) == 1
        assert io.stats()["header_cache_hits"] >= 1
        io2 = cogfeed.IO(header_cache_dir=str(tmp_path / "hc"))
        third = cogfeed.open(url, io=io2)
        assert third.header_requests == 0
        assert srv.requests("/" + base) == 1
        # The cached open still reads correct pixels (ETag pinned from cache).
        tw, th = cog.tile_width, cog.tile_height
        local = cogfeed.open(paths[name])
        win = (tw // 2, th // 2, tw, th)  # touches 4 tiles
        before = srv.requests("/" + base)
        assert third.read(window=win).tobytes() == local.read(window=win).tobytes()
        used = srv.requests("/" + base) - before
        ntiles = 4 * (1 if local.interleave == "pixel" else local.count)
        assert 1 <= used <= ntiles
        # A tile-aligned window inside one tile costs exactly one request.
        before = srv.requests("/" + base)
        cog.read(window=(0, 0, tw, th), bands=[1])
        assert srv.requests("/" + base) - before == 1


def test_stale_header_cache_entry_is_dropped(tmp_path):
    """An object replaced after its header went to the on-disk cache: the
    open from the cache still answers with the old header (no request),
    but its first read fails as changed (412 to If-Match), says that the
    header came from the cache, and drops the entry, so the next open
    reads the new header; through cog.read and read_many alike."""
    import shutil
    import numpy as np
    srcs = []
    for k, (w, h, c) in enumerate([(256, 256, 3), (300, 200, 2)]):
        arr = (np.arange(w * h * c, dtype=np.uint16).reshape(c, h, w) * (k + 3))
        p = C.write_array(tmp_path / ("v%d.tif" % k), arr, "COG",
                          BLOCKSIZE=128, COMPRESS="ZSTD")
        srcs.append((p, arr))
    root, hc = tmp_path / "srv", str(tmp_path / "hc")
    root.mkdir()
    obj = str(root / "s.tif")
    shutil.copy(srcs[0][0], obj)
    changed = cogfeed.Error  # code 11: CF_E_CHANGED
    with Nginx(str(root)) as srv:
        url = srv.url("s.tif")
        cogfeed.open(url, io=cogfeed.IO(header_cache_dir=hc)).read((0, 0, 8, 8))
        for k, how in ((1, "read"), (0, "read_many"), (1, "read")):
            path, arr = srcs[k]
            shutil.copy(path, obj)  # replaced: the cached header is stale
            stale = cogfeed.open(url, io=cogfeed.IO(header_cache_dir=hc))
            assert stale.header_requests == 0
            assert stale.count == srcs[1 - k][1].shape[0]  # the old header
            with pytest.raises(changed) as ei:
                if how == "read":
                    stale.read((0, 0, 64, 64))
                else:
                    cogfeed.read_many([(stale, (0, 0, 64, 64))])
            msg = str(ei.value)
            assert ei.value.code == cogfeed.Status.CHANGED and "HTTP 412" in msg, msg
            assert "came from the header cache" in msg, msg
            fresh = cogfeed.open(url, io=cogfeed.IO(header_cache_dir=hc))
            assert fresh.header_requests == 1
            assert fresh.count == arr.shape[0]
            assert (fresh.read((5, 7, 64, 64)) == arr[:, 7:71, 5:69]).all()
            again = cogfeed.open(url, io=cogfeed.IO(header_cache_dir=hc))
            assert again.header_requests == 0  # stored afresh


def test_read_many_identical_over_http(paths, folder):
    """cogfeed.read_many: every fixture window of every file in one call,
    locally and over HTTP, with a small in-flight budget (the smallest
    power of two from 32 MiB that every tile fits: windows wait for room)
    and with the default; each equals Cog.read.  Requests stay at most one
    per tile.  A budget a tile can never fit fails with "safety limit"
    naming it."""
    with Nginx(folder) as srv:
        io = cogfeed.IO(max_inflight=64)
        local, remote = [], []
        for name in NAMES:
            lc = cogfeed.open(paths[name])
            rc = cogfeed.open(srv.url(os.path.basename(paths[name])), io=io)
            for win in windows(lc):
                local.append((lc, win))
                remote.append((rc, win))
        want = [c.read(window=w) for c, w in local]
        # Distinct tiles over all windows: a tile several windows need is
        # fetched once per call.
        tiles = set()
        for c, (x, y, w, h) in local:
            x0, y0 = max(x, 0), max(y, 0)
            x1, y1 = min(x + w, c.width), min(y + h, c.height)
            if x0 >= x1 or y0 >= y1:
                continue  # outside the image: no tile
            planes = 1 if c.interleave == "pixel" else c.count
            for ty in range(y0 // c.tile_height, (y1 - 1) // c.tile_height + 1):
                for tx in range(x0 // c.tile_width, (x1 - 1) // c.tile_width + 1):
                    for p in range(planes):
                        tiles.add((c.name, tx, ty, p))
        tiles = len(tiles)
        with pytest.raises(cogfeed.Error) as err:
            cogfeed.read_many(local, inflight_bytes=1 << 10, threads=3)
        e = err.value
        assert e.code == cogfeed.Status.LIMIT and "inflight_bytes" in str(e), e
        assert re.search(r"level \d+, (tile|strip) \d+", str(e)), e
        small = 32 << 20  # the fixtures' 200-band tile needs 64 MiB
        while True:
            try:
                got_small = cogfeed.read_many(local, inflight_bytes=small,
                                              threads=3)
                break
            except cogfeed.Error as e:
                assert e.code == cogfeed.Status.LIMIT and "inflight_bytes" in str(e), e
                small *= 2
        for kw in ({}, {"inflight_bytes": small, "threads": 3}):
            got = cogfeed.read_many(local, **kw) if not kw else got_small
            assert all(a.tobytes() == b.tobytes() for a, b in zip(want, got))
            before = srv.requests()
            got = cogfeed.read_many(remote, **kw)
            used = srv.requests() - before
            bad = [i for i, (a, b) in enumerate(zip(want, got))
                   if a.tobytes() != b.tobytes()]
            assert not bad, [remote[i][1] for i in bad[:5]]
            assert 0 < used <= tiles
        # Band subsets and a failing window: the error names the file.
        got = cogfeed.read_many(remote[:20], bands=[1])
        assert all(a.tobytes() == c.read(window=w, bands=[1]).tobytes()
                   for a, (c, w) in zip(got, local[:20]))
        with pytest.raises(cogfeed.Error, match="band 5000 does not exist"):
            cogfeed.read_many(remote[:3], bands=[5000])
        with pytest.raises(TypeError):
            cogfeed.read_many([(remote[0][1], remote[0][0])])
        assert cogfeed.read_many([]) == []
        # A file that changes on the server after it was opened fails the
        # call with "changed", naming it (in C each window gets its own
        # status: test_pipeline_read.c); the unchanged file still reads.
        srv.reset()
        win = local[0][1]
        base = os.path.basename(paths[NAMES[0]])
        changed = cogfeed.open(srv.url(base, fault="etag-change"), io=io)
        good = cogfeed.open(srv.url(base), io=io)
        with pytest.raises(cogfeed.Error) as ei:
            cogfeed.read_many([(good, win), (changed, win), (good, win)])
        assert ei.value.code == cogfeed.Status.CHANGED and base in str(ei.value)
        assert cogfeed.read_many([(good, win)])[0].tobytes() == want[0].tobytes()


def test_close_while_another_thread_reads(paths, folder):
    """Cog.close() from one thread while another thread's read (or
    read_many) is in flight: the read finishes with the right pixels, and
    the file reports closed at once and refuses new reads.  Its memory is
    freed only after the read (under ASan a free under it fails here)."""
    import threading
    name = NAMES[0]
    base = os.path.basename(paths[name])
    lc = cogfeed.open(paths[name])
    want = lc.read()
    with Nginx(folder, latency_ms=1000) as srv:
        for many in (False, True):
            c = cogfeed.open(srv.url(base))
            got = {}

            def read():
                try:
                    got["a"] = (cogfeed.read_many([(c, None)])[0] if many
                                else c.read())
                except Exception as e:  # reported below
                    got["e"] = e

            before = srv.requests("/" + base)
            t = threading.Thread(target=read)
            t.start()
            # The tile request has reached the server: the read is in C
            # (the server holds it for a second before answering).
            for _ in range(1000):
                if srv.requests("/" + base) > before:
                    break
                t.join(0.01)
            assert srv.requests("/" + base) > before
            c.close()
            assert c.closed and "closed" in repr(c)
            with pytest.raises(ValueError, match="closed"):
                c.read()
            t.join(60)
            assert "e" not in got, got.get("e")
            assert got["a"].tobytes() == want.tobytes()
            c.close()  # once more: nothing left to do
            assert c.closed


def test_close_from_python_code_inside_a_call(paths):
    """A window's __index__ is Python code run inside read / read_many, as
    the GIL can hand over to another thread's close() there: read refuses
    the closed file, and read_many keeps an item it already took open
    until it is done (the file was freed under it before)."""
    name = NAMES[0]
    want = cogfeed.open(paths[name]).read(window=(0, 0, 8, 8))

    class Closer:
        def __init__(self, cog):
            self.cog = cog

        def __index__(self):
            self.cog.close()
            return 0

    c = cogfeed.open(paths[name])
    with pytest.raises(ValueError, match="closed"):
        c.read(window=(Closer(c), 0, 8, 8))
    assert c.closed
    a, b = cogfeed.open(paths[name]), cogfeed.open(paths[name])
    got = cogfeed.read_many([(a, (0, 0, 8, 8)), (b, (Closer(a), 0, 8, 8))])
    assert all(g.tobytes() == want.tobytes() for g in got)
    assert a.closed and not b.closed
    with pytest.raises(ValueError, match="closed"):
        a.read(window=(0, 0, 8, 8))


def test_lists_changed_by_python_code_inside_a_call(paths):
    """Converting a window, band or item runs Python code (__index__) that
    may empty the very list being read: the call reads the lists as they
    were when it was made (it used to read freed or missing items and
    crash)."""
    name = NAMES[0]
    want = cogfeed.open(paths[name]).read(window=(0, 0, 8, 8), bands=[1])

    class Clear:
        def __init__(self, lst, value=0):
            self.lst, self.value = lst, value

        def __index__(self):
            self.lst.clear()
            gc.collect()
            return self.value

    c = cogfeed.open(paths[name])
    win = [0, 0, 8, 8]
    win[0] = Clear(win)
    assert c.read(window=win, bands=[1]).tobytes() == want.tobytes()
    bands = [None]
    bands[0] = Clear(bands, 1)
    assert c.read(window=(0, 0, 8, 8), bands=bands).tobytes() == \
        want.tobytes()
    items = []
    items += [(cogfeed.open(paths[name]), (0, 0, 8, 8)),
              (cogfeed.open(paths[name]), (Clear(items), 0, 8, 8)),
              (cogfeed.open(paths[name]), (0, 0, 8, 8))]
    got = cogfeed.read_many(items, bands=[1])
    assert len(got) == 3 and not items
    assert all(g.tobytes() == want.tobytes() for g in got)
