"""Malformed TIFFs through the whole reader (Python API and CLI).

Files come from make_malformed.py (crafted at test time).  Each file is
opened and read in a child process so that a crash shows up as a failed
test (with the signal) instead of killing pytest, and a hang as a timeout.

  "open" files: cogfeed.open raises cogfeed.Error naming the file, and
                `cogfeed info FILE` exits 1 with a message naming it.
  "read" files: open or the full-window read raises cogfeed.Error naming
                the file.
  "ok" files:   no crash, no hang, no exception other than cogfeed.Error;
                a sparse tile (ByteCount 0) reads as zeros.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_malformed as M  # noqa: E402

CASES = [(name, item, expect) for name, item, expect, _w, _d in M.cases()]
TIMEOUT = 60

CHILD = r"""
import json, sys
import cogfeed
path = sys.argv[1]
res = {"open": None, "read": None, "msg": ""}
def note(kind, e):
    res[kind] = "error" if isinstance(e, cogfeed.Error) else "other"
    res["msg"] = str(e) if isinstance(e, cogfeed.Error) else repr(e)
    res["runtime"] = isinstance(e, RuntimeError)
try:
    c = cogfeed.open(path)
    res["open"] = "ok"
except Exception as e:
    note("open", e)
if res["open"] == "ok":
    try:
        a = c.read(window=(0, 0, c.width, c.height))
        res["read"] = "ok"
        res["shape"] = list(a.shape)
        # second 32x32 tile (x 32..63, y 0..31): the sparse one when present
        res["tile1_zero"] = bool((a[:, 0:32, 32:64] == 0).all())
    except Exception as e:
        note("read", e)
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    base = os.environ.get("CF_TEST_DATA")
    d = (os.path.join(base, "malformed") if base
         else str(tmp_path_factory.mktemp("malformed")))
    M.make_all(d)
    return d


def path_of(folder, name):
    return os.path.join(folder, "malformed_%s.tif" % name)


def run_child(path):
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, path],
                           capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail("%s: open/read hung for more than %d s" % (path, TIMEOUT))
    assert p.returncode == 0, "%s: reader crashed (exit %d)\n%s" % (
        path, p.returncode, p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,item,expect", CASES,
                         ids=[c[0] for c in CASES])
def test_reader(folder, name, item, expect):
    path = path_of(folder, name)
    base = os.path.basename(path)
    r = run_child(path)
    assert r["open"] != "other" and r["read"] != "other", \
        "%s: raised something other than cogfeed.Error: %s" % (base, r["msg"])
    failed = r["open"] == "error" or r["read"] == "error"
    if failed:
        assert r.get("runtime"), "cogfeed.Error must subclass RuntimeError"
        assert base in r["msg"], "message does not name the file: %r" % r["msg"]
    if expect == "open":
        assert r["open"] == "error", "%s (item %d): open succeeded" % (base,
                                                                      item)
    elif expect == "read":
        assert failed, "%s (item %d): open and read both succeeded" % (base,
                                                                       item)
    elif name == "bytecount_zero" and r["read"] == "ok":
        assert r["tile1_zero"], "sparse tile did not read as zeros"


OPEN_CASES = [c for c in CASES if c[2] == "open"]


@pytest.mark.parametrize("name,item,expect", OPEN_CASES,
                         ids=[c[0] for c in OPEN_CASES])
def test_cli_info(folder, name, item, expect):
    exe = os.environ.get("COGFEED_BIN")
    assert exe, "COGFEED_BIN is not set (run through ctest)"
    path = path_of(folder, name)
    try:
        p = subprocess.run([exe, "info", path], capture_output=True,
                           text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail("%s: cogfeed info hung" % path)
    assert p.returncode == 1, "exit %d, stderr %r" % (p.returncode,
                                                      p.stderr[-500:])
    assert os.path.basename(path) in p.stderr, p.stderr[-500:]


# ---------------------------------------------------------------------------
# The header memory budget (item 3 of issue 15): a crafted tile index is
# refused before it is fetched or allocated, real large indexes still open.

INDEX_CASES = ["index_shared_2_26", "index_shared_256_ifds",
               "index_over_budget"]

MEASURE = r"""
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=150)
print(p.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(p.stderr)
"""


@pytest.mark.parametrize("name", INDEX_CASES)
def test_crafted_index_is_refused_without_allocating_it(folder, name):
    """2^26 1x1 tiles whose offsets and counts are one BYTE array (1 IFD,
    and 256 IFDs on the same array), and 2^24 tiles in separate arrays:
    `cogfeed info` fails naming the cause and never takes the memory the
    index declares (43b28fd opened the first at 1.1 GB and the third at
    306 MB of RSS, and took 5.3 GB before failing the second)."""
    exe = os.environ.get("COGFEED_BIN")
    assert exe, "COGFEED_BIN is not set (run through ctest)"
    path = path_of(folder, name)
    p = subprocess.run([sys.executable, "-c", MEASURE, exe, "info", path],
                       capture_output=True, text=True, timeout=200)
    rc, rss_kb, err = p.stdout.split("\n", 2)
    assert int(rc) == 1, err
    assert os.path.basename(path) in err
    why = ("tag arrays may not share bytes" if "shared" in name
           else "above the budget of 268435456 (io option header_memory_max)")
    assert why in err, err
    assert int(rss_kb) < 200 * 1024, "peak RSS %s KB" % rss_kb


def large_index(path, bands, planar):
    """A 100,000 x 100,000 uint16 tiled header with 256-pixel tiles:
    391 x 391 = 152,881 tiles per band plane, every tile sparse."""
    t = M.Tiff()
    n = 391 * 391 * (bands if planar == 2 else 1)
    t.ifd()
    for tag, typ, v in [(256, 4, 100000), (257, 4, 100000),
                        (258, 3, [16] * bands), (259, 3, 1), (262, 3, 1),
                        (277, 3, bands), (284, 3, planar), (322, 4, 256),
                        (323, 4, 256)]:
        t.tag(tag, typ, v)
    t.tag(324, 4, raw=bytes(4 * n))
    t.tag(325, 4, raw=bytes(4 * n))
    with open(path, "wb") as f:
        f.write(t.build())
    return n


@pytest.mark.parametrize("bands,planar", [(1, 1), (13, 2)])
def test_large_real_index_opens(tmp_path, bands, planar):
    """A real large file's index fits the default budget: 152,881 tiles,
    and 13 band planes of them (1,987,453 tiles, 32 MB of index); a budget
    set lower (io option header_memory_max) refuses it, naming the
    option."""
    import cogfeed
    path = str(tmp_path / "big.tif")
    n = large_index(path, bands, planar)
    cog = cogfeed.open(path)
    assert (cog.width, cog.height, cog.count) == (100000, 100000, bands)
    a = cog.read(window=(99800, 99800, 300, 300))
    assert a.shape == (bands, 300, 300) and not a.any()
    small = 16 * n  # the index alone: no room for the header bytes
    with pytest.raises(cogfeed.Error, match="io option header_memory_max"):
        cogfeed.open(path, io=cogfeed.IO(header_memory_max=small))
    ok = cogfeed.open(path, io=cogfeed.IO(header_memory_max=small + 16 * n))
    assert ok.count == bands
