"""cogfeed.Loader against hostile inputs and a failing run: memory stays
within the loader's documented budget whatever the files claim,
skip_errors never hides a failure of the run (expired credentials) and
gives up when most samples fail, and close() lets go of every socket and
file at once.

Servers are the local nginx of tests/servers (faults.lua)."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "servers"))
from servers import Nginx  # noqa: E402
from test_loader import expected, make_cog  # noqa: E402

import cogfeed  # noqa: E402

E_LIMIT, E_AUTH, E_NOTFOUND = (cogfeed.Status.LIMIT, cogfeed.Status.AUTH,
                              cogfeed.Status.NOTFOUND)
GIB = 1 << 30


def write_huge_tiles(path, claim=GIB):
    """A 512 x 512 uint8 DEFLATE TIFF of four 256 x 256 tiles that each
    claim `claim` bytes, one after another from offset 4096: the file is
    4 GiB long but holds 4 KB (the rest is a hole)."""
    tags = [(256, 4, 1, 512), (257, 4, 1, 512), (258, 3, 1, 8),
            (259, 3, 1, 8), (262, 3, 1, 1), (277, 3, 1, 1),
            (322, 3, 1, 256), (323, 3, 1, 256)]
    n = len(tags) + 2
    arrays = 8 + 2 + n * 12 + 4
    tags += [(324, 4, 4, arrays), (325, 4, 4, arrays + 16)]
    b = b"II" + struct.pack("<HI", 42, 8) + struct.pack("<H", n)
    for tag, typ, count, value in tags:
        if typ == 3 and count == 1:
            b += struct.pack("<HHIHH", tag, typ, count, value, 0)
        else:
            b += struct.pack("<HHII", tag, typ, count, value)
    b += struct.pack("<I", 0)
    b += struct.pack("<4I", *[4096 + k * claim for k in range(4)])
    b += struct.pack("<4I", *[claim] * 4)
    with open(path, "wb") as f:
        f.write(b)
        f.truncate(4096 + 4 * claim)


# Run in a child so that its peak RSS (ru_maxrss) is this read's alone.
CHILD = r"""
import json, resource, sys
import cogfeed
path, what = sys.argv[1], sys.argv[2]
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
res = {"errors": []}
if what == "loader":
    ld = cogfeed.Loader([path], patch_size=256, batch_size=2,
                        sampler=sys.argv[3], decode_threads=2,
                        inflight_bytes=64 << 20)
    it = iter(ld)
    for _ in range(2):
        try:
            next(it)
            res["errors"].append(None)
        except cogfeed.Error as e:
            res["errors"].append([e.code, str(e)])
    st = ld.stats()
    res["budget"], res["peak"] = st.get("memory_budget"), st.get("memory_peak")
    ld.close()
else:
    cog = cogfeed.open(path)
    try:
        cogfeed.read_many([(cog, (0, 0, 512, 512))], inflight_bytes=64 << 20)
        res["errors"].append(None)
    except cogfeed.Error as e:
        res["errors"].append([e.code, str(e)])
res["grew"] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
print(json.dumps(res))
"""


@pytest.mark.parametrize("what", ["loader/grid", "loader/tile-shuffle",
                                  "read_many"])
def test_tiles_claiming_a_gib_each_stay_within_the_budget(tmp_path, what):
    """Four tiles of a 4 KB sparse file each claim 1 GiB: with a 64 MiB
    budget the loader (and read_many) refuse every one with a "safety
    limit" error naming the file, the level and the tile, before
    allocating anything (the process's peak RSS grows by less than the
    budget; it used to try a 1 GiB fetch buffer per reader and name the
    file "?")."""
    path = str(tmp_path / "huge.tif")
    write_huge_tiles(path)
    assert os.stat(path).st_blocks * 512 < 1 << 20
    args = [sys.executable, "-c", CHILD, path] + what.split("/")
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["grew"] < 64 << 20, res
    assert res["errors"] and all(res["errors"]), res
    for code, msg in res["errors"]:
        assert code == E_LIMIT, msg
        assert path in msg and "?" not in msg, msg
        assert "level 0, tile " in msg and "inflight_bytes" in msg, msg
    if "budget" in res:
        assert res["peak"] <= res["budget"] and res["peak"] < 64 << 20, res


def test_tight_budget_reads_the_same_pixels(tmp_path):
    """A loader whose inflight_bytes leaves room for one decode at a time
    (readers wait for memory) reads exactly what an unconstrained one
    reads, and reports a peak within its budget."""
    arr = expected(512, 384, 0, 0, 3)
    path = make_cog(str(tmp_path / "a.tif"), arr, block=256)
    kw = dict(patch_size=64, batch_size=4, sampler="random", seed=5,
              epoch_length=32, decode_threads=4)
    want = [(list(b["windows"]), b["image"].copy())
            for b in cogfeed.Loader([path], **kw)]
    # The smallest power of two at which a tile fits at all.
    budget = 1 << 18
    while True:
        ld = cogfeed.Loader([path], inflight_bytes=budget, **kw)
        try:
            next(iter(ld))
            break
        except cogfeed.Error as e:
            assert e.code == E_LIMIT and "inflight_bytes" in str(e)
            budget *= 2
        finally:
            ld.close()
    ld = cogfeed.Loader([path], inflight_bytes=budget, **kw)
    got = [(list(b["windows"]), b["image"].copy()) for b in ld]
    assert len(got) == len(want)
    for (wa, ia), (wb, ib) in zip(want, got):
        assert wa == wb
        np.testing.assert_array_equal(ia, ib)
    st = ld.stats()
    assert st["memory_peak"] <= st["memory_budget"]
    ld.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A 512 x 512 COG of 64 px tiles on a local nginx."""
    d = tmp_path_factory.mktemp("limits")
    make_cog(str(d / "cog.tif"), expected(512, 512, 0, 0, 1), block=64)
    with Nginx(str(d)) as srv:
        yield srv


def _run(ld, most=100):
    """Batch sizes and errors of up to `most` next() calls."""
    sizes, errors = [], []
    it = iter(ld)
    for _ in range(most):
        try:
            sizes.append(len(next(it)["windows"]))
        except StopIteration:
            break
        except cogfeed.Error as e:
            errors.append(e)
    return sizes, errors


@pytest.mark.parametrize("skip", [False, True])
def test_expired_credentials_fail_the_run_even_with_skip_errors(served, skip):
    """The server answers 403 AccessDenied once 20 requests were made (an
    expiring presigned URL): batches fail with CF_E_AUTH naming the file,
    with skip_errors too (it used to turn into 0-sample batches for ever,
    this epoch and the next); no batch is ever empty."""
    served.reset()
    url = served.url("cog.tif", fault="after-403-20")
    ld = cogfeed.Loader([url], patch_size=64, batch_size=8, sampler="grid",
                        skip_errors=skip, decode_threads=4)
    sizes, errors = _run(ld)      # this epoch, then the next
    sizes2, errors2 = _run(ld)
    st = ld.stats()
    ld.close()
    assert errors and errors2 and 0 not in sizes + sizes2, (sizes, sizes2)
    assert sum(sizes) < 20 and not sizes2, (sizes, sizes2)
    for e in errors + errors2:
        assert e.code == E_AUTH and "403" in str(e) and "cog.tif" in str(e), e
    assert st["skipped"] == 0


@pytest.mark.parametrize("code,want", [(407, E_AUTH), (410, E_NOTFOUND), (451, E_AUTH)])
def test_proxy_auth_gone_and_legal_block_fail_the_run(served, code, want):
    """A proxy wanting credentials (407), an object gone for good (410), a
    legal block (451) after 20 requests: with skip_errors and
    skip_limit=1.0 the batches fail naming the status, never come out
    empty (all three used to be dropped as samples' failures)."""
    served.reset()
    url = served.url("cog.tif", fault="after-%d-20" % code)
    ld = cogfeed.Loader([url], patch_size=64, batch_size=8, sampler="grid",
                        skip_errors=True, skip_limit=1.0, decode_threads=2)
    sizes, errors = _run(ld)
    st = ld.stats()
    ld.close()
    assert errors and 0 not in sizes, (sizes, errors)
    for e in errors:
        assert e.code == want and ("HTTP %d" % code) in str(e), e
        assert "cog.tif" in str(e), e
    assert st["skipped"] == 0


def test_skip_errors_gives_up_when_most_samples_fail(served):
    """The server answers 500 to everything after its first 10 requests (a
    store gone): each sample fails after the io layer's retries, an error
    skip_errors drops, but once more than half of the last 64 samples
    failed the batches fail with the cause instead of coming out empty;
    with skip_limit=1 they keep coming, empty."""
    for limit in (0.5, 1.0):
        served.reset()
        url = served.url("cog.tif", fault="after-500-10")
        ld = cogfeed.Loader([url], patch_size=64, batch_size=8,
                            sampler="grid", skip_errors=True,
                            skip_limit=limit, decode_threads=2,
                            io_options={"max_retries": 0})
        sizes, errors = _run(ld)
        sizes2, errors2 = _run(ld)
        st = ld.stats()
        ld.close()
        if limit == 1.0:
            assert not errors + errors2 and sizes2 == [0] * 8, sizes2
            assert st["skipped"] == 128 - sum(sizes)
        else:
            assert errors2 and 0 not in sizes2, (sizes, sizes2)
            assert all("500" in str(e) and "skip_errors gave up" in str(e)
                       for e in errors + errors2)


def _fds():
    """This process's open descriptors: {fd: what it is}."""
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            out[int(fd)] = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            pass
    return out


@pytest.mark.parametrize("remote", [True, False])
def test_close_releases_sockets_and_files_at_once(served, remote, tmp_path):
    """close() shuts the loader's io loops (their connections, epoll and
    event descriptors) and its files at once, with a batch view still
    alive and the loader object not collected: the process has the
    descriptors it had before the loader was made (it kept about 128
    sockets open until garbage collection)."""
    if remote:
        urls = [served.url("cog.tif")]
    else:
        urls = [make_cog(str(tmp_path / ("l%d.tif" % i)),
                         expected(256, 256, i, 0, 1), block=64)
                for i in range(3)]
    before = _fds()
    ld = cogfeed.Loader(urls, patch_size=64, batch_size=8, sampler="random",
                        epoch_length=64)
    batch = next(iter(ld))
    during = _fds()
    opened = set(during) - set(before)
    if remote:
        assert any(during[fd].startswith("socket:") for fd in opened)
    else:
        assert any(during[fd] in urls for fd in opened)
    ld.close()
    after = _fds()
    left = {fd: after[fd] for fd in set(after) - set(before)}
    assert not left, left
    # The batch stays readable, the loader object is still here.
    assert batch["image"].shape[0] == 8 and int(batch["image"].sum()) > 0
    with pytest.raises(ValueError, match="closed"):
        next(iter(ld))
