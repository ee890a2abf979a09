"""Decoded tiles kept and shared (lib/pipeline/chunk_cache.c): random and
grid patches give the same pixels with and without the chunk cache, locally
and over HTTP; readers that miss the same tile at once fetch and decode it
once (in-flight sharing), so a remote grid run asks for each tile it needs
exactly once when the cache holds them all."""
import os
import shutil

import numpy as np
import pytest

from test_loader import make_pair, _servers

import cogfeed


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("share"))
    # 1024 px in 256 px tiles: 16 tiles per file, image and mask.
    ip, mp_ = make_pair(d, "s", 1024, 1024, block=256)
    return {"dir": d, "image": ip, "mask": mp_}


@pytest.fixture(scope="module")
def remote(pair):
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        pytest.skip("nginx not installed")
    with _servers().Nginx(pair["dir"], latency_ms=30) as srv:
        yield srv


def _run(images, masks, sampler, cache_bytes, **kw):
    ld = cogfeed.Loader(images, masks, patch_size=96, batch_size=8,
                        sampler=sampler, cache_bytes=cache_bytes, seed=3,
                        epoch_length=96, decode_threads=8, concurrency=8,
                        **kw)
    out = [(b["image"].copy(), b["mask"].copy(), list(b["windows"]))
           for b in ld]
    st = ld.stats()
    ld.close()
    return out, st


def _same(a, b):
    assert len(a) == len(b) > 0
    for (ai, am, aw), (bi, bm, bw) in zip(a, b):
        assert aw == bw
        np.testing.assert_array_equal(ai, bi)
        np.testing.assert_array_equal(am, bm)


@pytest.mark.parametrize("sampler", ["random", "grid"])
def test_same_pixels_with_and_without_cache_local(pair, sampler):
    """The cache (and the waits on other readers' claims) change nothing
    delivered; with it, random patches meet tiles decoded before (96 random
    256 px... here 96 px patches over 16 tiles: most are hits)."""
    plain, st0 = _run([pair["image"]], [pair["mask"]], sampler, 0)
    cached, st1 = _run([pair["image"]], [pair["mask"]], sampler, 64 << 20)
    _same(plain, cached)
    assert st0["cache_hits"] == 0
    assert st1["cache_hits"] > 0, st1
    # Fewer tiles read: each of the 32 at most a few times (readers that
    # start together before any is decoded share the first reads).
    assert st1["requests"] < st0["requests"], (st0, st1)


@pytest.mark.parametrize("sampler", ["random", "grid"])
def test_same_pixels_with_and_without_cache_remote(pair, remote, sampler):
    url = remote.url(os.path.basename(pair["image"]))
    murl = remote.url(os.path.basename(pair["mask"]))
    io = {"hedge_after_ms": -1}
    plain, _ = _run([url], [murl], sampler, 0, io_options=io)
    cached, st = _run([url], [murl], sampler, 64 << 20, io_options=io)
    _same(plain, cached)
    assert st["cache_hits"] > 0


def test_remote_grid_fetches_each_tile_once(pair, remote):
    """64 px grid patches in 256 px tiles, 16 readers in flight over a
    30 ms link: neighbouring readers miss the same tile together.  Each
    waits for the one reader that claimed it instead of fetching it again,
    so the run asks for exactly the 16 + 16 tiles it needs (before, each
    reader that missed a tile fetched it: about one request per patch and
    file)."""
    url = remote.url(os.path.basename(pair["image"]))
    murl = remote.url(os.path.basename(pair["mask"]))
    ld = cogfeed.Loader([url], [murl], patch_size=64, batch_size=16,
                        sampler="grid", cache_bytes=64 << 20,
                        decode_threads=16, concurrency=16,
                        io_options={"hedge_after_ms": -1})
    opened = ld.stats()["requests"]  # the headers
    n = 0
    c = cogfeed.open(pair["image"])
    for b in ld:
        for i, (f, x, y, w, h) in enumerate(b["windows"]):
            np.testing.assert_array_equal(
                b["image"][i], c.read(window=(x, y, w, h)))
            n += 1
    st = ld.stats()
    ld.close()
    assert n == 256
    assert st["retries"] == 0, st
    assert st["requests"] - opened == 32, (opened, st)
    assert st["cache_hits"] > 0, st


def test_close_while_readers_share_tiles(pair, remote):
    """Closing the loader while readers wait on tiles other readers are
    fetching returns promptly (their fetches are cancelled, the claims
    abandoned, the waiters woken), and nothing is left pending."""
    url = remote.url(os.path.basename(pair["image"]))
    murl = remote.url(os.path.basename(pair["mask"]))
    for _ in range(3):
        ld = cogfeed.Loader([url], [murl], patch_size=64, batch_size=4,
                            sampler="grid", cache_bytes=64 << 20,
                            decode_threads=16, concurrency=16)
        it = iter(ld)
        next(it)
        ld.close()


def test_remote_default_inflight_budget_is_twice_local(pair, remote):
    """inflight_bytes' default doubles when a file is remote (a remote
    reader holds its scratch through each round trip): the same loader,
    ring and cache fixed, budgets 256 MiB (64 MiB a core past 4 cores)
    locally and twice that over HTTP; a given inflight_bytes is kept."""
    ncpu = os.cpu_count() or 1
    local = (64 << 20) * (ncpu if ncpu > 4 else 4)
    url = remote.url(os.path.basename(pair["image"]))
    budgets = []
    for images, ib in (([pair["image"]], None), ([url], None), ([url], 96 << 20)):
        with cogfeed.Loader(images, patch_size=96, batch_size=8, prefetch=4,
                            cache_bytes=0, epoch_length=8, inflight_bytes=ib) as ld:
            budgets.append(ld.stats()["memory_budget"])
    ring = budgets[2] - (96 << 20)
    assert budgets[0] - ring == local, (budgets, local)
    assert budgets[1] - ring == 2 * local, (budgets, local)
